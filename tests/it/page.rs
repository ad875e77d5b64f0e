//! The release page in a real browser: `index` writes `release.html` beside the PEP 503 pages,
//! `site` gathers two architecture indexes under a landing page, `python -m http.server` serves
//! them on 127.0.0.1, and headless Chromium (Debian's `chromium`, installed by `scripts/test`) loads
//! them: the rendered DOM has a row per wheel and the install commands, and no element overflows
//! the viewport at 390 and 1280 px (a probe page frames each page at that width and writes what
//! it measured into its own DOM).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::browser::{chromium, dump_dom};
use support::gpugen::{GFX942, GFX950};
use support::http::Server;
use support::python::system_python;
use support::sets::arch_set;
use support::{stderr, stdout, wheelfix};

/// A page of the test's own beside the site: it frames `?page=` at `?width=` px and writes
/// into its body's `data-result` whether the framed document is wider than its viewport, and
/// which elements reach past it.
const PROBE: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"></head><body data-result="pending">
<iframe id="f" style="height:900px;border:0"></iframe>
<script>
const q = new URLSearchParams(location.search);
const f = document.getElementById('f');
f.style.width = q.get('width') + 'px';
f.onload = () => {
  const d = f.contentDocument.documentElement;
  const wide = [];
  for (const e of f.contentDocument.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.right > d.clientWidth + 1 && !e.closest('.scroll')) wide.push(e.tagName + '.' + e.className + ':' + Math.round(r.right));
  }
  document.body.setAttribute('data-result', (d.scrollWidth > d.clientWidth ? 'overflow ' + d.scrollWidth + '>' + d.clientWidth : 'fits') + ' | ' + wide.slice(0, 5).join(' '));
};
f.src = q.get('page');
</script></body></html>
"#;

fn probe(server: &Server, page: &str, width: u32) -> String {
    let dom = dump_dom(&server.url(&format!("probe.html?page=/{page}&width={width}")));
    let at = dom.find("data-result=\"").unwrap_or_else(|| panic!("no result in the probe's DOM: {dom}")) + 13;
    dom[at..at + dom[at..].find('"').unwrap()].to_string()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    list.sort();
    list
}

fn metapackage(d: &Path, target: &str, wheels: &[PathBuf]) {
    let mut args = vec!["metapackage", "--name", "rocm-torch", "--rocm-version", "10.1.0", "--gpu-target", target];
    args.extend(["-o", target]);
    let wheels: Vec<&str> = wheels.iter().map(|p| p.to_str().unwrap()).collect();
    args.extend(wheels);
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn release_pages_render_in_a_browser_with_every_wheel_and_the_install_commands() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (target, flags) in [("gfx950", GFX950), ("gfx942", GFX942)] {
        let wheels = arch_set(&d.join(target), target, flags);
        metapackage(d, target, &wheels);
    }
    // The server's root holds the probe and `public/`, the site as it will be published.
    let root = d.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("probe.html"), PROBE).unwrap();
    // The probe can fail: a long command in a `<pre>` that neither wraps nor scrolls.
    let wide = format!(
        "<!DOCTYPE html><meta name=viewport content=\"width=device-width\"><pre>pip install {}</pre>",
        "x".repeat(80)
    );
    std::fs::write(root.join("wide.html"), wide).unwrap();
    let server = Server::start(&root);
    let base = server.url("public/");
    for target in ["gfx950", "gfx942"] {
        let out = wheelfix(d, &["index", "-o", &format!("site/{target}"), target]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = wheelfix(d, &["site", "-o", "www/public", "--site-url", &base, "site/gfx950", "site/gfx942"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("gfx950/: 4 files, check 0 errors, 0 warnings"), "{}", stdout(&out));

    for target in ["gfx950", "gfx942"] {
        let dom = dump_dom(&server.url(&format!("public/{target}/release.html")));
        for wheel in files(&d.join(target)) {
            let name = wheel.file_name().unwrap().to_str().unwrap();
            assert!(dom.contains(&format!("<tr data-file=\"{name}\">")), "no row for {name} in {dom}");
        }
        let site = format!("{base}{target}/");
        // The metapackage pinned exactly: no other index's release of it can be taken instead.
        let install = format!("'rocm-torch[device-{target}]==");
        let pip = format!("pip install --index-url {site} --extra-index-url https://pypi.org/simple {install}");
        let uv = format!("uv pip install --index-url https://pypi.org/simple --extra-index-url {site} {install}");
        assert!(dom.contains(&pip), "{dom}");
        assert!(dom.contains(&uv), "{dom}");
        assert!(dom.contains("ROCm 10.1.0"), "{dom}");
        assert!(dom.contains(&format!("<code>{target}</code>")), "the GPU target column: {dom}");
        assert!(dom.contains("measured"), "torch's tag is measured from its binaries: {dom}");
        assert!(dom.contains("check: 0 errors, 0 warnings"), "{dom}");
        // What the machine needs: the glibc the wheels' tags allow, and the Pythons served.
        assert!(dom.contains("Linux with glibc 2.17 or newer"), "{dom}");
        assert!(dom.contains("Python: CPython 3.12, any Python 3"), "{dom}");
        // The PEP 503 pages installers read are beside it, unchanged, and serve the set.
        let simple = std::fs::read_to_string(d.join(format!("www/public/{target}/index.html"))).unwrap();
        assert!(simple.contains("<title>Simple index</title>") && !simple.contains("release"), "{simple}");
        let got = Command::new(system_python())
            .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
            .arg(d.join(format!("dl-{target}")))
            .args(["--index-url", &site, "rocm-torch"])
            .output()
            .unwrap();
        assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
    }
    let landing = dump_dom(&server.url("public/index.html"));
    // Each architecture's index is its GPU's anchor, and its products'.
    assert!(
        landing.contains("<article class=\"site\" data-site=\"gfx942\" id=\"gfx942\"><a id=\"instinct-mi300x\"></a>"),
        "{landing}"
    );
    for target in ["gfx950", "gfx942"] {
        assert!(landing.contains(&format!("<a href=\"{target}/release.html\">{target}</a>")), "{landing}");
        assert!(landing.contains(&format!("--index-url {base}{target}/")), "{landing}");
    }
    assert!(landing.contains("2.15.0a0+git31a77fc.rocm10.1.0"), "the project matrix: {landing}");
    assert!(landing.contains("gfx942 (AMD Instinct MI300X"), "the cards name their GPUs: {landing}");

    assert!(probe(&server, "wide.html", 390).starts_with("overflow"), "the probe sees an overflow");
    // The guide's screenshots: `WHEELFIX_PAGE_SCREENSHOTS=docs/src/images cargo test --test it page::`.
    if let Some(out) = std::env::var_os("WHEELFIX_PAGE_SCREENSHOTS") {
        for (page, name, size) in [
            ("public/gfx950/release.html", "release-page.png", "1280,1100"),
            ("public/gfx950/release.html", "release-page-phone.png", "390,1400"),
            ("public/index.html", "landing-page.png", "1280,800"),
        ] {
            let shot = std::path::absolute(Path::new(&out).join(name)).unwrap();
            let status = Command::new(chromium())
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
                .arg(format!("--window-size={size}"))
                .arg(format!("--screenshot={}", shot.display()))
                .arg(server.url(page))
                .output()
                .unwrap();
            assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        }
    }
    for page in ["public/index.html", "public/gfx950/release.html", "public/gfx942/release.html"] {
        for width in [390, 1280] {
            let result = probe(&server, page, width);
            assert!(result.starts_with("fits |") && result.trim_end().ends_with('|'), "{page} at {width} px: {result}");
        }
    }
}

#[test]
fn the_page_shows_what_check_finds_and_its_bytes_do_not_change() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An unlabelled wheel beside the set: check's error is on the page.
    arch_set(&d.join("gfx950"), "gfx950", GFX950);
    support::sets::py3_wheel("atom", "0.1.9", &[]).write(&d.join("gfx950"));
    let args = ["index", "-o", "site", "--site-url", "https://rocm.example/gfx950", "gfx950"];
    assert!(wheelfix(d, &args).status.success());
    let first = std::fs::read(d.join("site/release.html")).unwrap();
    let page = String::from_utf8(first.clone()).unwrap();
    assert!(page.contains("check: 0 errors, 1 warning") || page.contains("no-local-version"), "{page}");
    assert!(page.contains("<code>no-local-version</code> atom 0.1.9"), "{page}");
    assert!(page.contains("pip install --index-url https://rocm.example/gfx950/ "), "{page}");
    assert!(page.contains("no local label"), "{page}");
    // No install target without a metapackage: the projects nothing requires.
    let command = &page[page.find("--extra-index-url https://pypi.org/simple atom==0.1.9 ").expect(&page)..];
    let command = &command[..command.find("</code>").unwrap()];
    assert!(command.contains(" nixl==") && command.contains(" torch=="), "each pinned exactly: {command}");
    assert!(wheelfix(d, &args).status.success());
    assert_eq!(std::fs::read(d.join("site/release.html")).unwrap(), first, "same set, same bytes");
    assert_eq!(support::release_page(&d.join("site/release.json")).files.len(), 4);
    // --no-page writes none.
    let out = wheelfix(d, &["index", "-o", "bare", "--no-page", "gfx950"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!d.join("bare/release.html").exists() && d.join("bare/index.html").exists());
    // site wants indexes wheelfix wrote, each under its own name.
    let out = wheelfix(d, &["site", "-o", "public", "bare"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("has no release.json"), "{}", stderr(&out));
    assert!(!d.join("public").exists());
}

#[test]
fn gpu_names_can_be_given_and_the_site_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    arch_set(&d.join("gfx950"), "gfx950", GFX950);
    std::fs::write(d.join("names.json"), r#"{"gfx950": "Our lab's MI355X nodes"}"#).unwrap();
    let args = ["index", "-o", "site/gfx950", "--gpu-names", "names.json", "gfx950"];
    assert!(wheelfix(d, &args).status.success());
    let page = std::fs::read_to_string(d.join("site/gfx950/release.html")).unwrap();
    assert!(page.contains("Our lab&#x27;s MI355X nodes") || page.contains("Our lab&#39;s MI355X nodes"), "{page}");
    assert!(wheelfix(d, &["site", "-o", "public", "site/gfx950"]).status.success());
    let page = std::fs::read_to_string(d.join("public/gfx950/release.html")).unwrap();
    assert!(page.contains("MI355X nodes"), "the site renders what the index was given: {page}");
    // Without it, the built-in table.
    assert!(wheelfix(d, &["index", "-o", "plain", "gfx950"]).status.success());
    let page = std::fs::read_to_string(d.join("plain/release.html")).unwrap();
    assert!(page.contains("Instinct MI350X, MI355X"), "{page}");
    // A file that is not a map of names publishes nothing and says why.
    std::fs::write(d.join("bad.json"), "[1, 2]").unwrap();
    let out = wheelfix(d, &["index", "-o", "bad", "--gpu-names", "bad.json", "gfx950"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("--gpu-names bad.json: not a JSON object"), "{}", stderr(&out));
    assert!(!d.join("bad").exists());
}

/// The text of every `<code class="cmd">` of a rendered page, as a person copies it.
fn commands(dom: &str) -> Vec<String> {
    dom.split("<code class=\"cmd\"")
        .skip(1)
        .map(|rest| {
            let text = &rest[rest.find('>').unwrap() + 1..rest.find("</code>").unwrap()];
            support::html_text(text)
        })
        .collect()
}

/// Each install command the release page and the landing page print, run exactly as printed
/// (by `sh`, with pip or uv of a fresh virtual environment) against the served site, installs
/// every project the page lists at the version it lists.
#[test]
fn the_pages_install_commands_install_the_set_they_list() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let py = support::python::python_tag();
    let tag = format!("{py}-{py}-manylinux_2_17_x86_64");
    let version = "2.0.0+rocm7.1.0";
    let core = {
        let mut spec =
            support::wheelgen::WheelSpec::new("stack_core", version, &tag).file("stack_core/__init__.py", "").file(
                "stack_core/_k.so",
                support::gpugen::host_with_fatbin("_k", support::gpugen::bundle_for(&[("gfx942", GFX942)], 6)),
            );
        spec.wheel_tags = Some(vec![tag.clone()]);
        spec.write(&d.join("gfx942"))
    };
    let extra =
        support::sets::py3_wheel("stack_extra", version, &[&format!("stack-core=={version}")]).write(&d.join("gfx942"));
    let mut args = vec!["metapackage", "--name", "rocm-stack", "--rocm-version", "7.1.0", "--gpu-target", "gfx942"];
    args.extend(["-o", "gfx942", core.to_str().unwrap(), extra.to_str().unwrap()]);
    let out = wheelfix(d, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let root = d.join("www");
    std::fs::create_dir_all(&root).unwrap();
    let server = Server::start(&root);
    let base = server.url("public/");
    assert!(wheelfix(d, &["index", "-o", "site/gfx942", "gfx942"]).status.success());
    let out = wheelfix(d, &["site", "-o", "www/public", "--site-url", &base, "site/gfx942"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // What the page lists: every file's project at its version.
    let page = support::release_page(&d.join("site/gfx942/release.json"));
    let listed: Vec<(String, String)> = page
        .files
        .iter()
        .map(|f| {
            let version = match &f.local {
                Some(l) => format!("{}+{l}", f.public),
                None => f.public.clone(),
            };
            (f.project.clone(), version)
        })
        .collect();
    assert_eq!(listed.len(), 3, "{listed:?}");

    // A second source serves newer same-named releases without the extras (as PyPI serves
    // same-named projects): the commands, pinned exactly, must still install the set's.
    let shadow = d.join("shadow");
    for project in ["rocm_stack", "stack_core", "stack_extra"] {
        support::sets::py3_wheel(project, "9.0", &[]).write(&shadow);
    }
    let tools = support::python::tools_venv().join("bin");
    let mut ran = 0;
    for page in ["public/gfx942/release.html", "public/index.html"] {
        let found = commands(&dump_dom(&server.url(page)));
        assert_eq!(found.len(), 2, "{page}: a pip and a uv command: {found:?}");
        for command in found {
            let venv = d.join(format!("venv-{ran}"));
            ran += 1;
            let made = Command::new(system_python()).args(["-m", "venv"]).arg(&venv).output().unwrap();
            assert!(made.status.success());
            let path = format!("{}:{}:{}", venv.join("bin").display(), tools.display(), std::env::var("PATH").unwrap());
            let out = Command::new("sh")
                .arg("-c")
                .arg(&command)
                .env("PATH", path)
                .env("VIRTUAL_ENV", &venv)
                .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
                .env("UV_NO_CACHE", "1")
                .env("PIP_FIND_LINKS", &shadow)
                .env("UV_FIND_LINKS", &shadow)
                .current_dir(d)
                .output()
                .unwrap();
            assert!(out.status.success(), "{page}: `{command}` failed: {}", String::from_utf8_lossy(&out.stderr));
            let installed = Command::new(venv.join("bin/python"))
                .args(["-c", "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name'].lower().replace('_', '-'): d.version for d in m.distributions()}))"])
                .output()
                .unwrap();
            let installed: serde_json::Value = serde_json::from_slice(&installed.stdout).unwrap();
            for (project, version) in &listed {
                assert_eq!(
                    installed[project].as_str(),
                    Some(version.as_str()),
                    "{page}: `{command}` installed {installed}"
                );
            }
        }
    }
    assert_eq!(ran, 4);
    // The shadow is live: the same pip command without the pin takes its newer release.
    let unpinned = commands(&dump_dom(&server.url("public/gfx942/release.html")))[0].replace("==7.1.0+", "XX");
    let unpinned = unpinned.split("XX").next().unwrap().to_string() + "'";
    let report = d.join("unpinned.json");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{unpinned} --dry-run --ignore-installed --report {}", report.display()))
        .env("PATH", format!("{}:{}", tools.display(), std::env::var("PATH").unwrap()))
        .env("PIP_FIND_LINKS", &shadow)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .current_dir(d)
        .output()
        .unwrap();
    assert!(out.status.success(), "`{unpinned}`: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["install"][0]["metadata"]["version"], "9.0", "`{unpinned}` took the shadow's: {report:#}");
}

/// The multi-architecture page of a split set with its selector: the GPU table with product
/// names and one pip and one uv command per GPU, the per-project rows folded; it fits a phone
/// and a desktop. `WHEELFIX_PAGE_SCREENSHOTS=docs/src/images` writes the guide's screenshots.
#[test]
fn the_multi_arch_page_starts_from_the_gpu_and_fits_every_width() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let name = "rocm_demo-1.0.0-cp312-cp312-manylinux2014_x86_64.whl";
    std::fs::create_dir_all(d.join("in")).unwrap();
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name), d.join("in").join(name)).unwrap();
    let step = |args: &[&str]| {
        let out = wheelfix(d, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    let input = d.join("in").join(name);
    step(&["retag", "--rocm-version", "7.1.0", "-w", "labelled", input.to_str().unwrap()]);
    let labelled = files(&d.join("labelled"));
    step(&["split", "--all-targets", "-w", "set", labelled[0].to_str().unwrap()]);
    let split: Vec<String> = files(&d.join("set")).iter().map(|p| p.display().to_string()).collect();
    let mut selector = vec!["selector", "--name", "rocm-demo-gpu", "-o", "set"];
    selector.extend(split.iter().map(String::as_str));
    step(&selector);
    step(&["index", "-o", "www/multi", "--site-url", "https://rocm.example/multi/", "set"]);
    std::fs::write(d.join("www/probe.html"), PROBE).unwrap();
    let server = Server::start(&d.join("www"));
    let dom = dump_dom(&server.url("multi/release.html"));
    for target in ["gfx942", "gfx950"] {
        // Each GPU's row is its anchor (`#gfx942`), as are its products (`#mi300x`).
        assert!(dom.contains(&format!("<tr data-gpu=\"{target}\" id=\"{target}\">")), "{dom}");
        assert!(
            dom.contains(&format!(
                "--extra-index-url https://rocm.example/multi/ 'rocm-demo-gpu[device-{target}]==1.0.0+rocm7.1.0'"
            )),
            "{dom}"
        );
    }
    assert!(dom.contains("AMD Instinct MI300X, MI300A, MI325X") && dom.contains("family gfx9"), "{dom}");
    assert!(dom.contains("<a id=\"instinct-mi300x\"></a><a id=\"mi300x\"></a><a id=\"mi300a\"></a>"), "{dom}");
    // Each command has its copy button; the command scrolls instead of wrapping.
    assert!(
        dom.contains(
            "<button type=\"button\" class=\"copy\">copy</button><pre class=\"scroll\"><code class=\"cmd pip\">"
        ),
        "{dom}"
    );
    assert!(dom.contains("<details class=\"per-project\">"), "{dom}");
    assert!(dom.contains("'rocm-demo-gpu[device-all]==1.0.0+rocm7.1.0'"), "{dom}");
    for width in [390, 1400] {
        let result = probe(&server, "multi/release.html", width);
        assert!(result.starts_with("fits |") && result.trim_end().ends_with('|'), "at {width} px: {result}");
    }
    if let Some(out) = std::env::var_os("WHEELFIX_PAGE_SCREENSHOTS") {
        for (name, size) in [("multi-arch-page.png", "1400,1000"), ("multi-arch-page-phone.png", "390,1500")] {
            let shot = std::path::absolute(Path::new(&out).join(name)).unwrap();
            let status = Command::new(chromium())
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
                .arg(format!("--window-size={size}"))
                .arg(format!("--screenshot={}", shot.display()))
                .arg(server.url("multi/release.html"))
                .output()
                .unwrap();
            assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        }
    }
}
