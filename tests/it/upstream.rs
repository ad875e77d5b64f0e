//! The release set against the upstream index: `check --upstream` against a fake upstream
//! (a simple index written by `wheelfix index`, served on 127.0.0.1 with PEP 691 negotiation)
//! that serves a colliding `nixl 1.5.2` whose only requirement is `nixl-cu12`, and an `atom` at
//! a much higher version; and `check --resolve` with pip and with uv (both from PyPI, in the
//! test environment), whose resolutions take `nixl` from that upstream and bring `nixl-cu12`.

use crate::support;

use std::path::Path;

use support::http::Server;
use support::python::tools_venv;
use support::sets::py3_wheel;
use support::{stderr, wheelfix, wheelfix_env};
use wheelfix::report::release::CheckDocument;

/// `(kind, severity, message)` of every finding of `check --json args`, and the exit code.
fn check(d: &Path, args: &[&str]) -> (i32, Vec<(String, String, String)>, CheckDocument) {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let path = format!("{}:{}", tools_venv().join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let out = wheelfix_env(d, &all, &[("PATH", &path)]);
    let value = support::check_document(&out);
    let list = value
        .findings
        .iter()
        .map(|f| (f.kind.to_string(), f.severity.as_str().to_string(), f.message.clone()))
        .collect();
    (out.status.code().unwrap(), list, value)
}

/// The fake upstream under `<root>/upstream/` and the set's index under `<root>/site/`.
fn upstream_and_site(d: &Path, set: &Path) {
    let up = d.join("upstream-wheels");
    py3_wheel("nixl", "1.5.2", &["nixl-cu12"]).write(&up);
    py3_wheel("nixl_cu12", "1.0", &[]).write(&up);
    py3_wheel("atom", "9.0", &[]).write(&up);
    for (out, input) in [("www/upstream", up.as_path()), ("www/site", set)] {
        let run = wheelfix(d, &["index", "--no-page", "-o", out, input.to_str().unwrap()]);
        assert!(run.status.success(), "{}", stderr(&run));
    }
}

#[test]
fn check_upstream_finds_collisions_and_shadows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A loose pin on nixl, and atom installed by its name.
    let loose = d.join("loose");
    py3_wheel("nixl", "1.5.2+rocm10.1.0", &[]).write(&loose);
    py3_wheel("rocm_stack", "10.1.0+rocm10.1.0", &["nixl>=1.5"]).write(&loose);
    py3_wheel("atom", "0.1.9+rocm10.1.0", &[]).write(&loose);
    // Every requirement on nixl and atom pins the set's label.
    let exact = d.join("exact");
    py3_wheel("nixl", "1.5.2+rocm10.1.0", &[]).write(&exact);
    py3_wheel("atom", "0.1.9+rocm10.1.0", &[]).write(&exact);
    py3_wheel("rocm_stack", "10.1.0+rocm10.1.0", &["nixl==1.5.2+rocm10.1.0", "atom==0.1.9+rocm10.1.0"]).write(&exact);
    upstream_and_site(d, &loose);
    let server = Server::start_pep691(&d.join("www"));
    let upstream = server.url("upstream/");

    let (code, list, value) = check(d, &["--upstream", &upstream, "loose"]);
    support::python::validate("check.schema.json", serde_json::to_string(&value).unwrap().as_bytes());
    assert_eq!(code, 1, "{list:#?}");
    let has = |list: &[(String, String, String)], kind: &str, text: &str| {
        list.iter().any(|(k, _, m)| k == kind && m.contains(text))
    };
    assert!(
        has(
            &list,
            "upstream-collision",
            &format!(
                "rocm-stack 10.1.0+rocm10.1.0 requires `nixl>=1.5`, which {upstream}'s nixl 1.5.2 (nixl-1.5.2-py3-none-any.whl) meets"
            )
        ),
        "{list:#?}"
    );
    assert!(
        has(
            &list,
            "upstream-collision",
            &format!("`pip install atom` takes {upstream}'s atom 9.0 (atom-9.0-py3-none-any.whl)")
        ),
        "{list:#?}"
    );
    // rocm-stack exists only in the set: nothing to say about it.
    assert!(!list.iter().any(|(k, _, m)| k.starts_with("upstream-") && m.contains("also has rocm-stack")), "{list:#?}");

    let (_, list, _) = check(d, &["--upstream", &upstream, "exact"]);
    let upstream_kinds: Vec<&(String, String, String)> =
        list.iter().filter(|(k, _, _)| k.starts_with("upstream-")).collect();
    assert_eq!(upstream_kinds.len(), 2, "{list:#?}");
    assert!(upstream_kinds.iter().all(|(k, s, _)| k == "upstream-shadow" && s == "warning"), "{list:#?}");
    assert!(
        has(
            &list,
            "upstream-shadow",
            &format!(
                "{upstream} also has nixl (1 file, newest 1.5.2): every requirement on it (1) pins the set's own label"
            )
        ),
        "{list:#?}"
    );

    // A project the set holds at two versions can only be printed by name: the commands people
    // copy would take the upstream's higher atom, an error even though every pin is exact.
    let two = d.join("two");
    py3_wheel("atom", "0.1.9+rocm10.1.0", &[]).write(&two);
    py3_wheel("atom", "0.2.0+rocm10.1.0", &[]).write(&two);
    py3_wheel("rocm_stack", "10.1.0+rocm10.1.0", &["atom==0.2.0+rocm10.1.0"]).write(&two);
    let (code, list, _) = check(d, &["--upstream", &upstream, "two"]);
    assert_eq!(code, 1, "{list:#?}");
    let shadow = list.iter().find(|(k, _, _)| k == "upstream-shadow").expect("a shadow finding");
    assert_eq!(shadow.1, "error", "{list:#?}");
    assert!(shadow.2.contains("the set holds atom at 2 versions") && shadow.2.contains("atom 9.0"), "{list:#?}");

    // The set against its own index: the same files (name and sha256) are the set's own, never
    // collisions; nor against an index that mirrors one of them beside a file of its own.
    let (_, list, _) = check(d, &["--upstream", &server.url("site/"), "loose"]);
    assert!(!list.iter().any(|(k, _, _)| k.starts_with("upstream-")), "{list:#?}");

    // An upstream that cannot be reached is an error, not a pass.
    drop(server);
    let (code, list, _) = check(d, &["--upstream", &upstream, "--timeout", "5", "exact"]);
    assert_eq!(code, 1);
    assert!(has(&list, "upstream-unreachable", "could not be read"), "{list:#?}");
}

#[test]
fn check_resolve_with_pip_and_uv_reports_upstream_and_forbidden_distributions() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    py3_wheel("nixl", "1.5.0+rocm10.1.0", &[]).write(&set);
    py3_wheel("rocm_stack", "10.1.0+rocm10.1.0", &["nixl>=1.5"]).write(&set);
    py3_wheel("atom", "0.1.9+rocm10.1.0", &[]).write(&set);
    upstream_and_site(d, &set);
    let server = Server::start_pep691(&d.join("www"));
    let (site, upstream) = (server.url("site/"), server.url("upstream/"));
    let base = ["--index-url", &site, "--extra-index-url", &upstream, "--forbid", "*-cu1[0-9]", "--forbid", "nvidia-*"];

    for resolver in ["pip", "uv"] {
        let mut args = vec![
            "--resolve",
            "rocm-stack",
            "--resolver",
            resolver,
            "--python",
            "3.12",
            "--platform",
            "manylinux_2_28_x86_64",
        ];
        args.extend_from_slice(&base);
        let (code, list, value) = check(d, &args);
        assert_eq!(code, 1, "{resolver}: {list:#?}");
        support::python::validate("check.schema.json", serde_json::to_string(&value).unwrap().as_bytes());
        let resolution = value.resolution.as_ref().unwrap();
        assert!(resolution.resolver.starts_with(resolver), "{resolution:#?}");
        let names: Vec<&str> = resolution.distributions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["nixl", "nixl-cu12", "rocm-stack"], "{resolver}: {resolution:#?}");
        let kinds: Vec<&str> = list.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(kinds, ["resolve-forbidden", "resolve-upstream"], "{resolver}: {list:#?}");
        assert!(list[0].2.contains("nixl-cu12 1.0") && list[0].2.contains("`*-cu1[0-9]`"), "{list:#?}");
        assert!(list[0].2.contains("it came in through rocm-stack → nixl → nixl-cu12"), "{resolver}: {list:#?}");
        assert!(
            list[1].2.contains("took nixl 1.5.2 from")
                && list[1].2.contains(&format!("not from the set's index {site}")),
            "{list:#?}"
        );
        assert_eq!(resolver == "uv", list[1].2.contains("give uv the set's index as --extra-index-url"), "{list:#?}");
    }

    // The release page's uv command (the set's index searched first) takes nixl from the set.
    let mut args = vec!["--resolve", "rocm-stack", "--resolver", "uv", "--site-first"];
    args.extend_from_slice(&base);
    let (code, list, value) = check(d, &args);
    assert_eq!((code, list.len()), (0, 0), "{list:#?}");
    let nixl = &value.resolution.as_ref().unwrap().distributions[0];
    assert_eq!((nixl.name.as_str(), nixl.version.as_str()), ("nixl", "1.5.0+rocm10.1.0"), "{value:#?}");

    // An exact labelled pin resolves from the set alone with pip; uv, which searches
    // --extra-index-url first and stops there, finds no resolution, with its own message.
    let mut args = vec!["--resolve", "atom==0.1.9+rocm10.1.0"];
    args.extend_from_slice(&base);
    let (code, list, value) = check(d, &args);
    assert_eq!((code, list.len()), (0, 0), "{list:#?}");
    assert_eq!(value.resolution.unwrap().distributions[0].version, "0.1.9+rocm10.1.0");
    args.extend(["--resolver", "uv"]);
    let (code, list, _) = check(d, &args);
    assert_eq!(code, 1);
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!(list[0].0, "resolve-failed");
    assert!(list[0].2.contains("atom"), "{list:#?}");
    assert!(list[0].2.contains("check it with --site-first"), "{list:#?}");
}

#[test]
fn resolve_needs_the_sets_index() {
    let dir = tempfile::tempdir().unwrap();
    let out = wheelfix(dir.path(), &["check", "--resolve", "rocm-torch"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--resolve needs --index-url"), "{}", stderr(&out));
}

/// Against the real PyPI: its `nixl`, `atom` and `torch` collide with a set that pins them
/// loosely. Opt-in: it needs the network.
#[test]
#[ignore = "reaches the real PyPI; run with WHEELFIX_PYPI=1 cargo test --test it upstream:: -- --ignored"]
fn real_pypi_collides_with_loose_pins() {
    assert!(std::env::var_os("WHEELFIX_PYPI").is_some(), "set WHEELFIX_PYPI=1 to reach https://pypi.org/simple");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    for name in ["nixl", "atom", "torch"] {
        py3_wheel(name, "0.0.1+rocm10.1.0", &[]).write(&set);
    }
    py3_wheel("rocm_stack", "10.1.0+rocm10.1.0", &["nixl", "atom>=0.0", "torch"]).write(&set);
    let (code, list, _) = check(d, &["--upstream", "https://pypi.org/simple", "set"]);
    assert_eq!(code, 1);
    for name in ["nixl", "atom", "torch"] {
        assert!(
            list.iter().any(
                |(k, _, m)| k == "upstream-collision" && m.contains(&format!("https://pypi.org/simple/'s {name} "))
            ),
            "{name}: {list:#?}"
        );
    }
}

/// `check --resolve` with pip for a manylinux_2_28 machine, on a set of manylinux2014 and
/// manylinux_2_28 wheels: pip's `--platform` takes exact tags, so wheelfix gives it every tag
/// such a machine accepts; with the pip of the test environment and with the machine's own
/// `python3` (an older pip, which refuses `--platform` without `--target`), it resolves.
#[test]
fn check_resolve_with_pip_admits_every_older_manylinux_tag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    let mut app = support::wheelgen::WheelSpec::new("app", "1.0+rocm10.1.0", "py3-none-manylinux2014_x86_64")
        .file("app/__init__.py", "");
    app.metadata = vec!["Requires-Dist: lib==2.0+rocm10.1.0".into()];
    app.write(&set);
    support::wheelgen::WheelSpec::new("lib", "2.0+rocm10.1.0", "py3-none-manylinux_2_28_x86_64")
        .file("lib/__init__.py", "")
        .write(&set);
    let run = wheelfix(d, &["index", "--no-page", "-o", "www/site", set.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    let server = Server::start_pep691(&d.join("www"));
    let site = server.url("site/");
    let args = [
        "check",
        "--json",
        "--resolve",
        "app",
        "--resolver",
        "pip",
        "--python",
        "3.12",
        "--platform",
        "manylinux_2_28_x86_64",
        "--index-url",
        &site,
    ];
    let tools = format!("{}:{}", tools_venv().join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let machine = std::env::var("PATH").unwrap_or_default();
    for (which, path) in [("the test environment's pip", tools), ("the machine's python3", machine)] {
        let out = wheelfix_env(d, &args, &[("PATH", &path)]);
        let value = support::check_document(&out);
        assert_eq!(out.status.code(), Some(0), "{which}: {value:#?}\n{}", stderr(&out));
        let resolution = value.resolution.as_ref().unwrap();
        let names: Vec<&str> = resolution.distributions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["app", "lib"], "{which}: {value:#?}");
        let command = resolution.command.join(" ");
        assert!(command.contains("manylinux2014_x86_64") && command.contains("manylinux_2_5_x86_64"), "{command}");
    }
}

#[test]
fn a_set_for_another_python_says_to_give_check_its_python() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let set = d.join("set");
    // A set for Python 3.99 only; pip runs on the test environment's Python.
    let mut wheel = py3_wheel("future_stack", "1.0+rocm10.1.0", &[]);
    wheel.metadata.push("Requires-Python: >=3.99".into());
    wheel.write(&set);
    upstream_and_site(d, &set);
    let server = Server::start_pep691(&d.join("www"));
    let site = server.url("site/");
    let (code, list, _) = check(d, &["--resolve", "future-stack", "--index-url", &site]);
    assert_eq!(code, 1, "{list:#?}");
    let failed = list.iter().find(|(k, _, _)| k == "resolve-failed").expect("the resolution fails");
    assert!(failed.2.contains("give check --python X.Y"), "{list:#?}");
    // Told the Python, pip resolves for it.
    let (code, list, _) = check(d, &["--resolve", "future-stack", "--index-url", &site, "--python", "3.99"]);
    assert_eq!(code, 0, "{list:#?}");
}
