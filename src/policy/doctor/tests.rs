//! The doctor's unit tests, from hand-made environments: distributions with their files and
//! requirements, no binaries read from disk.

use super::*;
use crate::analysis::installed::Site;
use crate::gpu::TargetId;
use crate::wheel::requirement::Requirement;

fn dist(name: &str, version: &str, files: &[&str], requires: &[&str], extras: &[&str]) -> Distribution {
    Distribution {
        name: name.into(),
        version: version.into(),
        dist_info: format!("{}-{version}.dist-info", name.replace('-', "_")),
        direct_url: None,
        installer: Some("pip".into()),
        index_url: Some("http://127.0.0.1:8000/simple/".into()),
        variant: None,
        files: files.iter().map(|f| f.to_string()).collect(),
        provides_extra: extras.iter().map(|e| e.to_string()).collect(),
        requires_dist: requires.iter().map(|r| Requirement::parse(r)).collect(),
    }
}

fn environment(distributions: Vec<Distribution>, unreadable: &[(&str, &str)]) -> Environment {
    let site = Site {
        root: "/v/lib/python3.12/site-packages".into(),
        distributions,
        unreadable: unreadable.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        installer: InstallerFacts {
            venv: Some("/v".into()),
            python: Some("/v/bin/python".into()),
            has_pip: true,
            ..InstallerFacts::default()
        },
    };
    Environment {
        site,
        binaries: Vec::new(),
        archives: Default::default(),
        unreadable: Vec::new(),
        file_names: Default::default(),
    }
}

fn machine(gpus: &[&str]) -> Machine {
    let targets: Vec<TargetId> = gpus.iter().map(|g| TargetId::parse(g).unwrap()).collect();
    Machine::named(&targets, &|_| None)
}

fn judge(env: &Environment, gpus: &[&str]) -> Diagnosis {
    let fixes = Fixes::of(&env.site.installer, None, &env.site.distributions);
    diagnose(env, &machine(gpus), &fixes)
}

fn kinds(d: &Diagnosis) -> Vec<Kind> {
    d.problems.iter().map(|p| p.kind).collect()
}

/// A host and its device wheels for `processors`, each with rocBLAS databases for its processor.
fn split_set(processors: &[&str]) -> Vec<Distribution> {
    let extras: Vec<String> = processors.iter().map(|p| format!("device-{p}")).collect();
    let extras: Vec<&str> = extras.iter().map(String::as_str).collect();
    let mut set = vec![dist("demo-gpu", "1.1", &["demo_gpu/__init__.py"], &[], &extras)];
    for p in processors {
        let database = format!("demo_gpu/rocblas/library/TensileLibrary_{p}.dat");
        set.push(dist(&format!("demo-gpu-device-{p}"), "1.1", &[&database], &["demo-gpu==1.1"], &[]));
    }
    set
}

#[test]
fn databases_are_judged_over_the_environment_not_per_wheel() {
    // Both device wheels on a gfx942: the gfx90a one is no problem by itself.
    let both = environment(split_set(&["gfx90a", "gfx942"]), &[]);
    let d = judge(&both, &["gfx942"]);
    assert_eq!((d.status, kinds(&d)), (Status::Ready, vec![]), "{d:#?}");
    // Only gfx90a's: none for gfx942, one problem, its fix the host's extra from its index.
    let wrong = environment(split_set(&["gfx90a"]), &[]);
    let d = judge(&wrong, &["gfx942"]);
    assert_eq!(kinds(&d), [Kind::NoDatabaseForGpu], "{d:#?}");
    assert!(d.problems[0].message.starts_with("demo-gpu-device-gfx90a's rocblas kernel databases are for gfx90a"));
    // The host provides no gfx942 extra: the fix says what to look for, in words.
    let fix = d.problems[0].fix.as_deref().unwrap();
    assert!(fix.contains("has no device wheel for gfx942"), "{fix}");
    assert!(d.fails());
}

#[test]
fn an_environment_without_gpu_software_has_nothing_to_check() {
    let env = environment(vec![dist("pip", "24.0", &["pip/__init__.py"], &[], &[])], &[]);
    let d = judge(&env, &["gfx942"]);
    assert_eq!(d.status, Status::NothingToCheck, "{d:#?}");
    assert!(!d.fails());
    assert!(d.summary().starts_with("nothing to check"), "{}", d.summary());
}

#[test]
fn a_distribution_not_read_makes_the_verdict_cannot_tell() {
    let env = environment(
        vec![dist("pip", "24.0", &[], &[], &[])],
        &[("demo_gpu-1.1.dist-info", "METADATA is not UTF-8"), ("x;y-z.dist-info", "empty METADATA")],
    );
    let d = judge(&env, &["gfx942"]);
    assert_eq!((d.status, kinds(&d)), (Status::CannotTell, vec![Kind::DistributionUnreadable; 2]), "{d:#?}");
    assert!(d.fails());
    let fixes: Vec<&str> = d.problems.iter().filter_map(|p| p.fix.as_deref()).collect();
    // Its directory goes (installers stop on it), then a pinned reinstall from the one index
    // the environment records; a directory that names no project gets words.
    let site = "/v/lib/python3.12/site-packages";
    assert!(fixes.contains(&format!("rm -r -- {site}/demo_gpu-1.1.dist-info && /v/bin/python -m pip install --index-url http://127.0.0.1:8000/simple/ --force-reinstall --no-deps demo-gpu==1.1").as_str()), "{fixes:#?}");
    assert!(
        fixes
            .iter()
            .any(|f| f.starts_with("`rm -r -- '") && f.ends_with("then: reinstall the distribution it belonged to")),
        "{fixes:#?}"
    );
}

#[test]
fn pins_broken_by_a_downgraded_host_get_one_fix_the_selectors_release() {
    let mut set = split_set(&["gfx942"]);
    set[0].version = "1.0".into();
    let selector = dist(
        "rocm-gpu",
        "1.1",
        &[],
        &["demo-gpu==1.1", "demo-gpu-device-gfx942==1.1; extra == \"device-gfx942\""],
        &["device-gfx942"],
    );
    let without = environment(set.clone(), &[]);
    let d = judge(&without, &["gfx942"]);
    assert_eq!(kinds(&d), [Kind::PinNotHeld], "{d:#?}");
    let expected =
        "/v/bin/python -m pip install --index-url http://127.0.0.1:8000/simple/ 'demo-gpu[device-gfx942]==1.0'";
    assert_eq!(d.problems[0].fix.as_deref(), Some(expected), "no selector: the host's version");

    set.push(selector);
    let with = environment(set, &[]);
    let d = judge(&with, &["gfx942"]);
    assert_eq!(kinds(&d), [Kind::PinNotHeld, Kind::PinNotHeld], "{d:#?}");
    let expected =
        "/v/bin/python -m pip install --index-url http://127.0.0.1:8000/simple/ 'demo-gpu[device-gfx942]==1.1'";
    assert!(d.problems.iter().all(|p| p.fix.as_deref() == Some(expected)), "{d:#?}");
}

#[test]
fn no_gpu_is_a_problem_only_where_there_is_gpu_software() {
    let env = environment(split_set(&["gfx942"]), &[]);
    let d = judge(&env, &[]);
    assert_eq!(kinds(&d), [Kind::NoGpu], "{d:#?}");
    let plain = environment(vec![dist("six", "1.16", &["six.py"], &[], &[])], &[]);
    assert_eq!(judge(&plain, &[]).status, Status::NothingToCheck);
}
