//! `doctor`'s fixes, pasted. A release is split with `--index-url`, given a selector, indexed
//! and served over HTTP on 127.0.0.1; environments are installed from it by pip and by uv (no
//! `--find-links`, no pip configuration), then broken as people break them. For each breakage
//! doctor names it, and its printed fix, run verbatim by bash in a fresh shell (`env -i`),
//! repairs it: doctor is ready afterwards.

use crate::support;

use std::path::{Path, PathBuf};

use support::envs::{Doctor, Release, doctor, fat_wheel_at, hip_runtimes, new_uv_venv, new_venv, paste, sysfs};
use support::{stderr, wheelfix};

/// `demo_gpu` 1.0 and 1.1, each split for every processor its code has (gfx942, gfx90a) and
/// recording the index; the selector `rocm-gpu` of 1.1; all served.
fn served_release(d: &Path) -> Release {
    let release = Release::serve(d);
    for version in ["1.0", "1.1"] {
        let fat = fat_wheel_at(&d.join(format!("fat-{version}")), version);
        let out = d.join(format!("release/{version}"));
        let args = ["split", "--all-targets", "--index-url", &release.url, "-w", out.to_str().unwrap()];
        let done = wheelfix(d, &[&args[..], &[fat.to_str().unwrap()]].concat());
        assert!(done.status.success(), "{}", stderr(&done));
    }
    let mut args = vec!["selector".to_string(), "--name".into(), "rocm-gpu".into(), "--index-url".into()];
    args.extend([release.url.clone(), "-o".into(), "selector".into()]);
    for wheel in std::fs::read_dir(d.join("release/1.1")).unwrap() {
        args.push(wheel.unwrap().path().to_str().unwrap().to_string());
    }
    let done = wheelfix(d, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(done.status.success(), "{}", stderr(&done));
    release.publish(d, &["release/1.0", "release/1.1", "selector"]);
    release
}

/// One environment and the machine doctor judges it for.
struct Judged<'a> {
    d: &'a Path,
    site: PathBuf,
    /// The loader's path to the stub HIP runtime.
    ld: String,
}

impl Judged<'_> {
    fn on(&self, args: &[&str], env: &[(&str, &str)]) -> Doctor {
        let env = [&[("LD_LIBRARY_PATH", self.ld.as_str())], env].concat();
        doctor(self.d, &[args, &[self.site.to_str().unwrap()]].concat(), &env)
    }

    fn gfx942(&self) -> Doctor {
        self.on(&["--gpu", "gfx942"], &[])
    }

    fn assert_ready(&self, after: &str) {
        let v = self.gfx942();
        assert_eq!((v.code, v.status()), (0, "ready".to_string()), "after {after}:\n{}", v.text);
        assert!(v.text.starts_with("ready for gfx942\n"), "{}", v.text);
    }

    /// Doctor finds exactly `kinds` (in any order), and its fix for `kind` as printed.
    fn breakage(&self, kinds: &[&str], kind: &str) -> (Doctor, String) {
        let v = self.gfx942();
        let mut found = v.kinds();
        found.sort();
        found.dedup();
        let mut wanted: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
        wanted.sort();
        assert_eq!(found, wanted, "{}", v.text);
        assert_eq!(v.code, 1, "{}", v.text);
        let fix = v.fix(kind);
        (v, fix)
    }
}

/// The gfx942 archive of `demo_gpu/_k.so` installed in `site`.
fn gfx942_archive(site: &Path) -> PathBuf {
    std::fs::read_dir(site.join("demo_gpu/.kpack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("gfx942.kpack"))
        .expect("the gfx942 archive is installed")
}

#[test]
fn each_breakage_of_a_pip_environment_is_named_and_its_pasted_fix_repairs_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = served_release(d);
    let ld = hip_runtimes(d).to_str().unwrap().to_string();
    let (venv, site) = new_venv(d, "env");
    let py = venv.join("bin/python").display().to_string();
    release.pip_install(d, &venv, "rocm-gpu[device-gfx942]");
    let env = Judged { d, site: site.clone(), ld: ld.clone() };
    env.assert_ready("installing rocm-gpu[device-gfx942]");
    let url = &release.url;

    // The device wheel uninstalled: the host's extra brings it back, from the served index.
    paste(d, &format!("{py} -m pip uninstall -q -y demo-gpu-device-gfx942"));
    let (_, fix) = env.breakage(&["kpack-unresolved"], "kpack-unresolved");
    assert_eq!(fix, format!("{py} -m pip install --index-url {url} 'demo-gpu[device-gfx942]==1.1'"));
    paste(d, &fix);
    env.assert_ready(&fix);

    // A damaged archive (its first frame's magic spoilt): its device wheel reinstalled.
    let archive = gfx942_archive(&site);
    let mut bytes = std::fs::read(&archive).unwrap();
    let at = bytes.windows(4).position(|w| w == [0x28, 0xb5, 0x2f, 0xfd]).expect("a zstd frame");
    bytes[at..at + 4].copy_from_slice(b"XXXX");
    std::fs::write(&archive, &bytes).unwrap();
    let (damaged, fix) = env.breakage(&["kpack-archive-damaged"], "kpack-archive-damaged");
    assert!(damaged.text.contains("NO  gfx942: archive damaged"), "{}", damaged.text);
    assert_eq!(
        fix,
        format!("{py} -m pip install --index-url {url} --force-reinstall --no-deps demo-gpu-device-gfx942==1.1")
    );
    paste(d, &fix);
    env.assert_ready(&fix);

    // A garbled marker in the host: never "ready"; the host reinstalled.
    let host = site.join("demo_gpu/_k.so");
    let bytes = std::fs::read(&host).unwrap();
    let garbled = String::from_utf8_lossy(&bytes).contains("kpack_search_paths");
    assert!(garbled, "the split host holds a marker");
    let spoilt = replace_all(&bytes, b"kpack_search_paths", b"kpack_search_pathz");
    std::fs::write(&host, spoilt).unwrap();
    let v = env.gfx942();
    assert_eq!(
        (v.code, v.status(), v.kinds()),
        (1, "cannot-tell".into(), vec!["kpack-marker-unusable".into()]),
        "{}",
        v.text
    );
    let fix = v.fix("kpack-marker-unusable");
    assert_eq!(fix, format!("{py} -m pip install --index-url {url} --force-reinstall --no-deps demo-gpu==1.1"));
    paste(d, &fix);
    env.assert_ready(&fix);

    // METADATA that cannot be read (pip itself stops on it): "cannot tell", never ready; its
    // directory removed and the distribution reinstalled from the index the others record.
    let metadata = site.join("demo_gpu-1.1.dist-info/METADATA");
    std::fs::write(&metadata, [0xffu8, 0xfe, 0x00, 0x13, 0x37].repeat(50)).unwrap();
    let v = env.gfx942();
    assert_eq!((v.code, v.status()), (1, "cannot-tell".to_string()), "{}", v.text);
    assert!(v.text.starts_with("cannot tell"), "{}", v.text);
    assert!(v.kinds().contains(&"distribution-unreadable".to_string()), "{}", v.text);
    let fix = v.fix("distribution-unreadable");
    let dist_info = site.join("demo_gpu-1.1.dist-info");
    let install = format!("{py} -m pip install --index-url {url} --force-reinstall --no-deps demo-gpu==1.1");
    assert_eq!(fix, format!("rm -r -- {} && {install}", dist_info.display()));
    paste(d, &fix);
    env.assert_ready(&fix);

    // HSA_OVERRIDE_GFX_VERSION=11.0.0 on a gfx942 machine: the override is named, not gfx1100's
    // device wheels; its fix, pasted in the shell that set it, makes doctor ready there.
    let mi300 = sysfs(d, "mi300", &[(0, 0), (90402, 0x0400_0000)], None);
    let mi300_arg = mi300.to_str().unwrap();
    let v = env.on(&["--sysfs", mi300_arg], &[("HSA_OVERRIDE_GFX_VERSION", "11.0.0")]);
    assert_eq!((v.code, v.kinds()), (1, vec!["override-hides-native".to_string()]), "{}", v.text);
    let fix = v.fix("override-hides-native");
    assert_eq!(fix, "unset HSA_OVERRIDE_GFX_VERSION");
    let wheelfix_bin = env!("CARGO_BIN_EXE_wheelfix");
    let shell = format!(
        "export HSA_OVERRIDE_GFX_VERSION=11.0.0 LD_LIBRARY_PATH={ld}\n{fix}\n{wheelfix_bin} doctor --sysfs {mi300_arg} {}",
        site.display()
    );
    let out = support::envs::fresh_shell(d, &shell);
    assert_eq!(out.status.code(), Some(0), "{}", support::stdout(&out));

    // The wrong GPU's device wheels: installed through the selector for gfx90a on a gfx942
    // machine; named as such, with the selector's one command.
    paste(d, &format!("{py} -m pip uninstall -q -y demo-gpu-device-gfx942"));
    release.pip_install(d, &venv, "rocm-gpu[device-gfx90a]");
    let (wrong, fix) = env.breakage(&["wrong-gpu-installed"], "wrong-gpu-installed");
    assert!(wrong.text.contains("you installed gfx90a code (demo-gpu-device-gfx90a==1.1)"), "{}", wrong.text);
    assert_eq!(fix, format!("{py} -m pip install --index-url {url} 'rocm-gpu[device-gfx942]==1.1'"));
    paste(d, &fix);
    // Both GPUs' device wheels now: the gfx90a one is no problem by itself.
    env.assert_ready(&fix);

    // The host reinstalled at an older version under its device wheels and selector: their
    // exact pins no longer hold (pip check agrees); one fix for all, the selector's release.
    paste(d, &format!("{py} -m pip install -q --index-url {url} --force-reinstall --no-deps demo-gpu==1.0"));
    assert!(!support::envs::fresh_shell(d, &format!("{py} -m pip check")).status.success());
    let (v, fix) = env.breakage(&["pin-not-held"], "pin-not-held");
    assert_eq!(v.kinds().len(), 3, "gfx942's, gfx90a's and the selector's pins: {}", v.text);
    assert!(v.problems().iter().all(|(_, f)| *f == fix), "{}", v.text);
    let extras = "device-gfx90a,device-gfx942";
    assert_eq!(fix, format!("{py} -m pip install --index-url {url} 'demo-gpu[{extras}]==1.1'"));
    paste(d, &fix);
    env.assert_ready(&fix);
    paste(d, &format!("{py} -m pip check"));
}

/// `haystack` with every `from` replaced by `to` (of the same length).
fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let mut out = haystack.to_vec();
    let mut at = 0;
    while let Some(i) = out[at..].windows(from.len()).position(|w| w == from) {
        out[at + i..at + i + from.len()].copy_from_slice(to);
        at += i + from.len();
    }
    out
}

#[test]
fn a_host_downgraded_under_its_device_wheel_gets_the_device_wheel_of_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = served_release(d);
    let (venv, site) = new_venv(d, "env");
    let py = venv.join("bin/python").display().to_string();
    release.pip_install(d, &venv, "demo-gpu[device-gfx942]");
    let env = Judged { d, site, ld: hip_runtimes(d).to_str().unwrap().to_string() };
    env.assert_ready("installing demo-gpu[device-gfx942]");
    let url = &release.url;
    paste(d, &format!("{py} -m pip install -q --index-url {url} --force-reinstall --no-deps demo-gpu==1.0"));
    let (v, fix) = env.breakage(&["pin-not-held"], "pin-not-held");
    assert!(
        v.text.contains("demo-gpu-device-gfx942==1.1 requires demo-gpu==1.1, but demo-gpu 1.0 is installed"),
        "{}",
        v.text
    );
    // No selector chose a release: the host as installed, with its device wheel of that version.
    assert_eq!(fix, format!("{py} -m pip install --index-url {url} 'demo-gpu[device-gfx942]==1.0'"));
    paste(d, &fix);
    env.assert_ready(&fix);
}

#[test]
fn in_an_environment_uv_made_the_fixes_run_uv_aimed_at_its_python() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = served_release(d);
    let (venv, site) = new_uv_venv(d, "uvenv");
    assert!(!venv.join("bin/pip").exists(), "uv venv puts no pip in it");
    release.uv_install(d, &venv, "demo-gpu[device-gfx942]");
    let uv = support::envs::uv();
    // Doctor finds uv where the person has it: on PATH.
    let path = format!("{}:/usr/bin:/bin", uv.parent().unwrap().display());
    let env = Judged { d, site, ld: hip_runtimes(d).to_str().unwrap().to_string() };
    let ready = env.on(&["--gpu", "gfx942"], &[("PATH", &path)]);
    assert_eq!(ready.code, 0, "{}", ready.text);
    let installer = &ready.json.environments[0].diagnosis.installer;
    assert!(installer.made_by_uv && !installer.has_pip, "{installer:?}");

    paste(
        d,
        &format!(
            "{} pip uninstall --python {} demo-gpu-device-gfx942",
            uv.display(),
            venv.join("bin/python").display()
        ),
    );
    let v = env.on(&["--gpu", "gfx942"], &[("PATH", &path)]);
    assert_eq!(v.kinds(), ["kpack-unresolved"], "{}", v.text);
    let fix = v.fix("kpack-unresolved");
    let expected = format!(
        "{} pip install --python {} --index-url {} 'demo-gpu[device-gfx942]==1.1'",
        uv.display(),
        venv.join("bin/python").display(),
        release.url
    );
    assert_eq!(fix, expected);
    paste(d, &fix);
    env.assert_ready(&fix);
}

#[test]
fn device_all_is_ready_and_a_venv_without_gpu_software_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = served_release(d);
    let ld = hip_runtimes(d).to_str().unwrap().to_string();
    // Both device wheels for one GPU: nothing is a problem; the gfx90a archive serves a gfx90a.
    let (venv, site) = new_venv(d, "all");
    release.pip_install(d, &venv, "rocm-gpu[device-all]");
    let env = Judged { d, site, ld: ld.clone() };
    env.assert_ready("installing rocm-gpu[device-all]");
    let gfx90a = env.on(&["--gpu", "gfx90a:xnack+"], &[]);
    assert_eq!(gfx90a.code, 0, "{}", gfx90a.text);

    // Only pip: nothing to check, exit 0, and never "ready for gfx942".
    let (_, bare) = new_venv(d, "bare");
    let empty = Judged { d, site: bare, ld };
    let v = empty.gfx942();
    assert_eq!((v.code, v.status()), (0, "nothing-to-check".to_string()), "{}", v.text);
    assert!(v.text.starts_with("nothing to check: no GPU code and no ROCm library"), "{}", v.text);
    assert!(!v.text.contains("ready"), "{}", v.text);
}

#[test]
fn without_a_recorded_index_the_fix_says_so_and_doctor_index_url_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = Release::serve(d);
    // Split with no --index-url: the wheels record no index.
    let fat = fat_wheel_at(&d.join("fat"), "1.0");
    let done = wheelfix(d, &["split", "--all-targets", "-w", "plain", fat.to_str().unwrap()]);
    assert!(done.status.success(), "{}", stderr(&done));
    release.publish(d, &["plain"]);
    let (venv, site) = new_venv(d, "env");
    release.pip_install(d, &venv, "demo-gpu");
    let env = Judged { d, site, ld: hip_runtimes(d).to_str().unwrap().to_string() };
    let (_, fix) = env.breakage(&["kpack-unresolved"], "kpack-unresolved");
    let py = venv.join("bin/python").display().to_string();
    // Words, with the one value to fill in, never a command that would fail.
    assert!(fix.starts_with("the index demo-gpu==1.0 came from is not recorded in its METADATA"), "{fix}");
    assert!(fix.contains(&format!("`{py} -m pip install --index-url INDEX 'demo-gpu[device-gfx942]==1.0'`")), "{fix}");
    // Given the index, doctor prints the whole command, and it works.
    let v = env.on(&["--gpu", "gfx942", "--index-url", &release.url], &[]);
    let fix = v.fix("kpack-unresolved");
    assert_eq!(fix, format!("{py} -m pip install --index-url {} 'demo-gpu[device-gfx942]==1.0'", release.url));
    paste(d, &fix);
    env.assert_ready(&fix);
    // An index URL that is none: a usage error.
    let out = wheelfix(d, &["doctor", "--gpu", "gfx942", "--index-url", "not a url", env.site.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_variant_for_another_gpu_is_replaced_by_the_variant_uv_picks_for_this_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let release = Release::serve(d);
    let fat = fat_wheel_at(&d.join("fat"), "1.0");
    // Variants declared for a gfx90a machine (a static provider stands for the machine's own).
    let variants = |target: &str, out: &str| {
        let args = ["variants", "--gpu-target", target, "--static-gpu-target", target, "--index-url", &release.url];
        let done = wheelfix(d, &[&args[..], &["-w", out, fat.to_str().unwrap()]].concat());
        assert!(done.status.success(), "{}", stderr(&done));
        release.publish(d, &[out]);
    };
    variants("gfx90a", "for-gfx90a");
    let (venv, site) = new_uv_venv(d, "uvenv");
    let uv = support::envs::uv();
    let py = venv.join("bin/python");
    let install = format!(
        "{} pip install -q --preview-features wheel-variants --python {} --index-url {} demo-gpu",
        uv.display(),
        py.display(),
        release.url
    );
    paste(d, &install);
    let path = format!("{}:/usr/bin:/bin", uv.parent().unwrap().display());
    let env = Judged { d, site, ld: hip_runtimes(d).to_str().unwrap().to_string() };
    let v = env.on(&["--gpu", "gfx942"], &[("PATH", &path)]);
    assert_eq!(v.kinds(), ["no-code-for-gpu"], "{}", v.text);
    assert_eq!(v.json.environments[0].diagnosis.distributions[0].variant.as_deref(), Some("gfx90a"), "{}", v.text);
    let fix = v.fix("no-code-for-gpu");
    let expected = format!(
        "{} pip install --preview-features wheel-variants --python {} --index-url {} --reinstall --no-deps demo-gpu==1.0",
        uv.display(),
        py.display(),
        release.url
    );
    assert_eq!(fix, expected, "{}", v.text);
    // On the gfx942 machine uv's provider says gfx942: the index declaring it stands for that.
    variants("gfx942", "for-gfx942");
    paste(d, &fix);
    let ready = env.on(&["--gpu", "gfx942"], &[("PATH", &path)]);
    assert_eq!(ready.code, 0, "{}", ready.text);
    assert_eq!(ready.json.environments[0].diagnosis.distributions[0].variant.as_deref(), Some("gfx942"));
}
