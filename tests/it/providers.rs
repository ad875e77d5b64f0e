//! Libraries from other wheels: a consumer wheel whose extension finds `libprov.so.1` in a
//! provider wheel through `$ORIGIN/../provider/lib`, as torch finds the `nvidia-*` libraries.
//! pip installs both into a virtual environment and the consumer imports; without the provider
//! it does not, which proves the link is real. Then `show`, `repair` and `check` on the pair,
//! with and without `--with-wheels`, and on bad inputs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::python::{cc_extension, cc_shared, python_tag, run, system_python};
use support::wheelgen::WheelSpec;
use support::{check_document, show_report, show_reports, stderr, stdout, wheelfix};

/// The provider's library: versioned symbols (`PROV_1.0`) and a glibc 2.25 need (getrandom),
/// which the consumer inherits.
const PROVIDER_C: &str = r#"#include <sys/random.h>
int prov_answer(void) { char b; return getrandom(&b, 1, GRND_NONBLOCK) >= 0 ? 41 : 41; }
"#;

struct Pair {
    provider: PathBuf,
    consumer: PathBuf,
}

/// `provider 1.0` (`provider/lib/libprov.so.1`) and `consumer 1.0`, whose extension needs it
/// through `rpath` (`$ORIGIN/../provider/lib`), in `dir`. `requires`: the consumer's
/// Requires-Dist lines.
fn pair(d: &Path, dir: &str, rpath: &str, requires: &[&str]) -> Pair {
    let build = d.join("build");
    std::fs::create_dir_all(&build).unwrap();
    let map = build.join("prov.map");
    std::fs::write(&map, "PROV_1.0 { global: prov_answer; local: *; };\n").unwrap();
    let script = format!("-Wl,--version-script={}", map.display());
    let lib = cc_shared(&build, PROVIDER_C, "libprov.so.1", &["-Wl,-soname,libprov.so.1", &script]);
    let py = python_tag();
    let mut provider = WheelSpec::new("provider", "1.0", "py3-none-linux_x86_64")
        .file("provider/__init__.py", "")
        .file("provider/lib/libprov.so.1", std::fs::read(&lib).unwrap());
    provider.purelib = false;
    let provider = provider.write(&d.join(dir));
    let lflag = format!("-L{}", build.display());
    let rflag = format!("-Wl,-rpath,{rpath}");
    let (so, file) = cc_extension(
        &build,
        "_c",
        "int prov_answer(void);\n#define ANSWER (prov_answer() + 1)\n",
        &[&lflag, "-l:libprov.so.1", &rflag, "-Wl,--disable-new-dtags"],
    );
    let mut consumer = WheelSpec::new("consumer", "1.0", &format!("{py}-{py}-linux_x86_64"))
        .file("consumer/__init__.py", "from ._c import answer\n")
        .file(&format!("consumer/{file}"), std::fs::read(so).unwrap());
    consumer.metadata = requires.iter().map(|r| format!("Requires-Dist: {r}")).collect();
    let consumer = consumer.write(&d.join(dir));
    Pair { provider, consumer }
}

fn venv(d: &Path, name: &str) -> PathBuf {
    let venv = d.join(name);
    run(Command::new(system_python()).args(["-m", "venv"]).arg(&venv));
    venv
}

fn pip(venv: &Path, args: &[&str]) -> std::process::Output {
    Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "--disable-pip-version-check", "-q"])
        .args(args)
        .output()
        .unwrap()
}

fn import_consumer(venv: &Path) -> std::process::Output {
    Command::new(venv.join("bin/python"))
        .args(["-c", "import consumer; print(consumer.answer())"])
        .current_dir(venv)
        .output()
        .unwrap()
}

#[test]
fn a_library_from_another_wheel_is_a_dependency() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = pair(d, "dist", "$ORIGIN/../provider/lib", &["provider==1.0"]);
    std::fs::remove_dir_all(d.join("build")).unwrap();

    // The link is real: installed together the consumer imports, without the provider it fails.
    let env = venv(d, "venv");
    let out = pip(&env, &["install", "--no-index", p.provider.to_str().unwrap(), p.consumer.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let imported = import_consumer(&env);
    assert_eq!(stdout(&imported).trim(), "42", "{}", stderr(&imported));
    assert!(pip(&env, &["uninstall", "-y", "provider"]).status.success());
    let broken = import_consumer(&env);
    assert!(!broken.status.success() && stderr(&broken).contains("libprov.so.1"), "{}", stderr(&broken));

    // Without the provider: not found, and the reason says where and what probably provides it.
    let alone = show_report(d, &p.consumer, &[]);
    let lib = &alone.external_libs["libprov.so.1"];
    assert_eq!(lib.disposition, "not-found", "{alone:#?}");
    let reason = lib.reason.as_str();
    assert!(reason.contains("`$ORIGIN/../provider/lib`") && reason.contains("site-packages/provider/lib"), "{reason}");
    assert!(
        reason.contains("Requires-Dist `provider==1.0` probably provides it") && reason.contains("--with-wheels"),
        "{reason}"
    );
    assert_eq!(alone.platform_tag.as_deref(), Some("linux_x86_64"));

    // With it: a dependency, and its glibc 2.25 need counts toward the consumer's tag.
    let with = show_report(d, &p.consumer, &["--with-wheels", p.provider.to_str().unwrap()]);
    let lib = &with.external_libs["libprov.so.1"];
    assert_eq!(lib.disposition, "dependency", "{with:#?}");
    let provided_by = lib.provided_by.as_ref().unwrap();
    assert_eq!(provided_by.name, "provider");
    assert_eq!(provided_by.version, "1.0");
    assert_eq!(provided_by.wheel, "provider-1.0-py3-none-linux_x86_64.whl");
    assert_eq!(provided_by.path, "provider/lib/libprov.so.1");
    assert_eq!(
        with.symbol_tag.as_deref(),
        Some("manylinux_2_26_x86_64"),
        "GLIBC_2.25 from the provider counts: {with:#?}"
    );
    assert_eq!(with.platform_tag.as_deref(), Some("manylinux_2_26_x86_64"), "a dependency never blocks a tag");
    let constraint = &with.constraints[0];
    assert_eq!(constraint.file, "provider-1.0-py3-none-linux_x86_64.whl:provider/lib/libprov.so.1", "{with:#?}");
    // The provider is tagged linux_x86_64, less compatible than the consumer: show says so.
    let notes = support::notes(&with);
    assert!(notes.contains("less compatible than this wheel's manylinux_2_26_x86_64"), "{notes}");
    // The same wheels given to one invocation count too; a directory does as well.
    let out = wheelfix(d, &["show", "--json", p.consumer.to_str().unwrap(), p.provider.to_str().unwrap()]);
    let both = show_reports(&out);
    assert_eq!(both[0].external_libs["libprov.so.1"].disposition, "dependency");
    let from_dir = show_report(d, &p.consumer, &["--with-wheels", "dist"]);
    assert_eq!(from_dir.external_libs["libprov.so.1"].disposition, "dependency");

    // repair keeps the link: nothing vendored for it, the RPATH as it was, and the repaired
    // wheel installs and imports beside the provider.
    let out = wheelfix(
        d,
        &["repair", "--with-wheels", p.provider.to_str().unwrap(), "-w", "out", p.consumer.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let repaired = std::fs::read_dir(d.join("out")).unwrap().next().unwrap().unwrap().path();
    let name = repaired.file_name().unwrap().to_str().unwrap().to_string();
    assert!(
        name.ends_with("-manylinux_2_26_x86_64.manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")
            || name.contains("manylinux_2_26_x86_64"),
        "{name}"
    );
    let listing = run(Command::new("python3")
        .args(["-c", "import sys,zipfile; print('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))"])
        .arg(&repaired));
    assert!(!listing.contains(".libs/"), "nothing vendored: {listing}");
    let env = venv(d, "venv2");
    let out = pip(&env, &["install", "--no-index", p.provider.to_str().unwrap(), repaired.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&import_consumer(&env)).trim(), "42");
    // Without the provider, repair cannot know what to do: it fails, naming the library.
    let out = wheelfix(d, &["repair", "-w", "alone", p.consumer.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("libprov.so.1"), "{}", stderr(&out));
}

#[test]
fn undeclared_providers_and_check_across_a_set() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = pair(d, "set", "$ORIGIN/../provider/lib", &[]);
    let shown = show_report(d, &p.consumer, &["--with-wheels", p.provider.to_str().unwrap()]);
    assert_eq!(shown.external_libs["libprov.so.1"].disposition, "dependency");
    assert!(support::notes(&shown).contains("undeclared provider"), "{shown:#?}");

    let findings = |dirs: &[&str]| -> (i32, Vec<(String, String)>) {
        let mut args = vec!["check", "--json", "--no-verify"];
        args.extend_from_slice(dirs);
        let out = wheelfix(d, &args);
        let list = check_document(&out)
            .findings
            .into_iter()
            .filter(|f| f.kind.name().ends_with("-provider"))
            .map(|f| (f.kind.to_string(), f.message))
            .collect();
        (out.status.code().unwrap(), list)
    };
    let (code, list) = findings(&["set"]);
    assert_eq!(code, 1);
    assert!(
        list.iter().any(|(k, m)| k == "undeclared-provider" && m.contains("libprov.so.1 comes from provider")),
        "{list:?}"
    );

    // The consumer alone: nothing in the set provides its library.
    std::fs::create_dir_all(d.join("alone")).unwrap();
    std::fs::rename(&p.consumer, d.join("alone").join(p.consumer.file_name().unwrap())).unwrap();
    let (code, list) = findings(&["alone"]);
    assert_eq!(code, 1);
    assert!(
        list.iter()
            .any(|(k, m)| k == "unresolved-provider" && m.contains("libprov.so.1, on `$ORIGIN/../provider/lib`")),
        "{list:?}"
    );

    // The provider installed beside the set (`--with-wheels`, as `show` takes it): no finding.
    let with = ["--with-wheels", p.provider.to_str().unwrap(), "alone"];
    let (_, list) = findings(&with);
    assert!(!list.iter().any(|(k, _)| k == "unresolved-provider"), "{list:?}");

    // Declared and present: no provider finding.
    let q = pair(d, "good", "$ORIGIN/../provider/lib", &["provider"]);
    let (_, list) = findings(&["good"]);
    assert!(list.is_empty(), "{list:?}");
    // Per architecture directory: a provider in another gfx directory does not count.
    std::fs::create_dir_all(d.join("arch/gfx942")).unwrap();
    std::fs::create_dir_all(d.join("arch/gfx950")).unwrap();
    std::fs::copy(&q.consumer, d.join("arch/gfx942").join(q.consumer.file_name().unwrap())).unwrap();
    std::fs::copy(&q.provider, d.join("arch/gfx950").join(q.provider.file_name().unwrap())).unwrap();
    let (_, list) = findings(&["arch"]);
    assert!(list.iter().any(|(k, m)| k == "unresolved-provider" && m.contains("for gfx942")), "{list:?}");
}

#[test]
fn bad_providers_give_findings_not_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = pair(d, "dist", "$ORIGIN/../provider/lib", &["provider"]);
    // A corrupt provider wheel.
    std::fs::create_dir_all(d.join("bad")).unwrap();
    std::fs::write(d.join("bad/provider-1.0-py3-none-linux_x86_64.whl"), b"not a zip").unwrap();
    let shown = show_report(d, &p.consumer, &["--with-wheels", "bad"]);
    assert!(shown.error.is_none(), "{shown:#?}");
    assert!(support::notes(&shown).contains("cannot be used as a provider"), "{shown:#?}");
    assert_eq!(shown.external_libs["libprov.so.1"].disposition, "not-found");
    // Two versions of one project.
    std::fs::create_dir_all(d.join("two")).unwrap();
    std::fs::copy(&p.provider, d.join("two").join(p.provider.file_name().unwrap())).unwrap();
    let mut other = WheelSpec::new("provider", "2.0", "py3-none-linux_x86_64").file("provider/__init__.py", "");
    other.purelib = false;
    other.write(&d.join("two"));
    let shown = show_report(d, &p.consumer, &["--with-wheels", "two"]);
    assert!(support::notes(&shown).contains("provider: --with-wheels holds 2 versions (1.0, 2.0)"), "{shown:#?}");
    assert_eq!(shown.external_libs["libprov.so.1"].disposition, "not-found");
    // An RPATH that climbs above site-packages.
    let q = pair(d, "climb", "$ORIGIN/../../../outside/lib", &["provider"]);
    let shown = show_report(d, &q.consumer, &["--with-wheels", q.provider.to_str().unwrap()]);
    let reason = shown.external_libs["libprov.so.1"].reason.as_str().to_string();
    assert!(reason.contains("climbs above site-packages"), "{reason}");
    let out = wheelfix(d, &["check", "--no-verify", "climb"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("unresolved-provider") && stdout(&out).contains("climbs above site-packages"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn the_driver_list_and_its_switch() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = support::elfgen::ElfSpec::extension("_g").needs("libcuda.so.1");
    let wheel = WheelSpec::new("g", "1.0", "cp312-cp312-linux_x86_64").file("g/_g.so", spec.build()).write(d);
    let shown = show_report(d, &wheel, &[]);
    let lib = &shown.external_libs["libcuda.so.1"];
    assert_eq!(lib.disposition, "excluded", "{shown:#?}");
    assert!(lib.reason.contains("GPU driver library"), "{lib:?}");
    let shown = show_report(d, &wheel, &["--no-driver-exclude"]);
    assert_eq!(shown.external_libs["libcuda.so.1"].disposition, "not-found");
}

/// Opt-in (large downloads): `WHEELFIX_TORCH_WHEEL=torch-2.15.0-…whl WHEELFIX_TORCH_DEPS=dir`
/// (the `nvidia-*` wheels its requirements name, from `pip download`).
#[test]
#[ignore = "needs torch and its nvidia wheels (GBs of downloads); set WHEELFIX_TORCH_WHEEL and WHEELFIX_TORCH_DEPS"]
fn torch_with_its_nvidia_wheels() {
    let torch = support::opt_in_file("WHEELFIX_TORCH_WHEEL", "a torch wheel");
    let (deps, _) = support::opt_in_wheels("WHEELFIX_TORCH_DEPS", "its nvidia wheels' directory");
    let deps = deps.to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let shown = show_report(dir.path(), Path::new(&torch), &["--with-wheels", &deps]);
    eprintln!("torch --with-wheels: {:.1} s", start.elapsed().as_secs_f64());
    let libs = &shown.external_libs;
    let mut summary = Vec::new();
    for (soname, lib) in libs {
        let cuda = soname.starts_with("libcu") || soname.starts_with("libnv") || soname.starts_with("libnccl");
        if cuda {
            summary.push(format!("{soname}: {}", lib.disposition));
            if soname == "libcuda.so.1" {
                assert_eq!(lib.disposition, "excluded", "{lib:?}");
            }
        }
    }
    eprintln!("{}\nplatform tag {:?}, symbol tag {:?}", summary.join("\n"), shown.platform_tag, shown.symbol_tag);
    let deps_found = libs.values().filter(|l| l.disposition == "dependency").count();
    assert!(deps_found >= 10, "{summary:#?}");
}

#[test]
fn rocm_sdk_wheels_resolve_through_the_same_mechanism() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    use support::elfgen::ElfSpec;
    let ext = ElfSpec { runpath: Some("$ORIGIN/../../_rocm_sdk_core/lib".into()), ..ElfSpec::extension("_C") }
        .needs("libamdhip64.so.7");
    let mut torch =
        WheelSpec::new("torch", "2.15.0+rocm7.13.0", "cp312-cp312-linux_x86_64").file("torch/lib/_C.so", ext.build());
    torch.metadata = vec!["Requires-Dist: rocm-sdk-core==7.13.0".into()];
    let torch = torch.write(d);
    let hip = ElfSpec { soname: Some("libamdhip64.so.7".into()), ..ElfSpec::default() }.build();
    let mut core = WheelSpec::new("rocm_sdk_core", "7.13.0", "py3-none-linux_x86_64")
        .file("_rocm_sdk_core/lib/libamdhip64.so.7", hip);
    core.purelib = false;
    let core = core.write(&d.join("sdk"));
    // The environment provides ROCm (the built-in list) ...
    let alone = show_report(d, &torch, &[]);
    assert_eq!(alone.external_libs["libamdhip64.so.7"].disposition, "excluded", "{alone:#?}");
    // ... unless the rocm-sdk wheels are given: then they provide it, like any other wheel.
    let with = show_report(d, &torch, &["--with-wheels", core.to_str().unwrap()]);
    let lib = &with.external_libs["libamdhip64.so.7"];
    assert_eq!(lib.disposition, "dependency", "{with:#?}");
    assert_eq!(lib.provided_by.as_ref().unwrap().name, "rocm-sdk-core");
    assert_eq!(lib.provided_by.as_ref().unwrap().path, "_rocm_sdk_core/lib/libamdhip64.so.7");
}

#[test]
fn a_library_a_required_project_ships_under_the_same_soname_is_named_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No RPATH reaches the provider (a build-tree path only), as with torch extensions that
    // rely on `import torch` having loaded libc10.so: the files do not say it will be found.
    let p = pair(d, "declared", "/build/tree/lib", &["provider"]);
    let with = show_report(d, &p.consumer, &["--with-wheels", p.provider.to_str().unwrap()]);
    let lib = &with.external_libs["libprov.so.1"];
    assert_eq!(lib.disposition, "not-found", "{with:#?}");
    let reason = lib.reason.as_str();
    assert!(
        reason.contains("provider 1.0, which the wheel requires, ships it at provider/lib/libprov.so.1"),
        "{reason}"
    );
    assert!(reason.contains("only if provider has loaded it first"), "{reason}");
    // Not required: nothing to say.
    let q = pair(d, "undeclared", "/build/tree/lib", &[]);
    let without = show_report(d, &q.consumer, &["--with-wheels", q.provider.to_str().unwrap()]);
    let reason = without.external_libs["libprov.so.1"].reason.as_str().to_string();
    assert!(!reason.contains("ships it"), "{reason}");
}

#[test]
fn with_wheels_from_the_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = pair(d, "deps", "$ORIGIN/../provider/lib", &["provider"]);
    let project = d.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("pyproject.toml"), "[tool.wheelfix]\nwith-wheels = [\"../deps\"]\n").unwrap();
    let shown = show_report(&project, &p.consumer, &[]);
    assert_eq!(shown.external_libs["libprov.so.1"].disposition, "dependency", "{shown:#?}");
    let config = stdout(&wheelfix(&project, &["show", "--config"]));
    assert!(
        config.contains("with-wheels") && config.contains("../deps") && config.contains("pyproject.toml)"),
        "{config}"
    );
}

#[test]
fn every_binarys_own_entries_are_tried_for_a_shared_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    use support::elfgen::ElfSpec;
    let good =
        ElfSpec { runpath: Some("$ORIGIN/../provider/lib".into()), ..ElfSpec::extension("good") }.needs("libprov.so.1");
    let bad =
        ElfSpec { runpath: Some("$ORIGIN/../nowhere/lib".into()), ..ElfSpec::extension("bad") }.needs("libprov.so.1");
    let mut consumer = WheelSpec::new("consumer", "1.0", "cp312-cp312-linux_x86_64")
        .file("consumer/good.so", good.build())
        .file("consumer/bad.so", bad.build());
    consumer.metadata = vec!["Requires-Dist: provider".into()];
    let consumer = consumer.write(d);
    let lib = ElfSpec { soname: Some("libprov.so.1".into()), ..ElfSpec::default() }.build();
    let mut provider =
        WheelSpec::new("provider", "1.0", "py3-none-linux_x86_64").file("provider/lib/libprov.so.1", lib);
    provider.purelib = false;
    let provider = provider.write(&d.join("deps"));
    let shown = show_report(d, &consumer, &["--with-wheels", provider.to_str().unwrap()]);
    let lib = &shown.external_libs["libprov.so.1"];
    assert_eq!(lib.disposition, "dependency", "{shown:#?}");
    let needed_by: Vec<&str> = lib.needed_by.iter().map(String::as_str).collect();
    assert_eq!(needed_by, ["consumer/bad.so", "consumer/good.so"]);
}
