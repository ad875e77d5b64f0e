//! The rules over the whole environment: what could not be read, whether any GPU software is
//! installed at all, kernel databases (judged over every distribution that carries a library's),
//! exact pins that no longer hold, one ROCm ABI, and the libraries the loader finds.

use std::collections::{BTreeMap, BTreeSet};

use super::fixes::{Fixes, Install, pinned};
use super::{Kind, Problem, name_of, owner_name};
use crate::analysis::databases;
use crate::analysis::installed::{Distribution, Environment, InstalledBinary};
use crate::analysis::machine::Machine;
use crate::extra::{DeviceExtra, device_project_target};
use crate::gpu::resolve::modes_of;
use crate::gpu::targets::{Keep, TargetId};

/// Distributions and binaries that could not be read: nothing can be said of them.
pub(super) fn unread_problems(env: &Environment, fixes: &Fixes<'_>, problems: &mut Vec<Problem>) {
    for (dist_info, why) in &env.site.unreadable {
        // The project and version its directory names (`name-version.dist-info`), when both are
        // what an installer takes.
        let named =
            dist_info.strip_suffix(".dist-info").and_then(|stem| stem.rsplit_once('-')).and_then(|(name, version)| {
                let name = crate::wheel::name::PackageName::parse(name).ok()?;
                version.parse::<pep440_rs::Version>().ok()?;
                Some((name, version))
            });
        // Installers cannot list an environment with such a directory in it (pip stops on
        // METADATA it cannot decode): it goes first, then the distribution is reinstalled over
        // the files it left.
        let path = env.site.root.join(dist_info);
        let remove = crate::html::shell_words(&["rm", "-r", "--", &path.display().to_string()]);
        let install = match &named {
            Some((name, version)) => {
                fixes.try_install(&[], &[pinned(name.as_str(), None, version)], Install::Reinstall)
            }
            None => Err("reinstall the distribution it belonged to".to_string()),
        };
        let fix = match install {
            Ok(install) => format!("{remove} && {install}"),
            Err(words) => {
                format!("`{remove}` (installers cannot read the environment while it is there), then: {words}")
            }
        };
        problems.push(
            Problem::new(
                Kind::DistributionUnreadable,
                format!("{dist_info} cannot be read ({why}): its files and their device code are not judged"),
            )
            .in_file(dist_info, None)
            .fixed_by(fix),
        );
    }
    for (path, why) in &env.unreadable {
        let owner = env.site.owner(path);
        problems.push(
            Problem::new(
                Kind::BinaryUnreadable,
                format!("{path} cannot be read ({why}): its device code is not judged"),
            )
            .in_file(path, owner.map(name_of))
            .fixed_by(match owner {
                Some(d) => fixes.install(&[d], &[pinned(&d.name, None, &d.version)], Install::Reinstall),
                None => "reinstall the distribution that owns it".to_string(),
            }),
        );
    }
}

/// Whether anything installed is GPU software: device code (in binaries, split out, in
/// archives or kernel databases), or a binary that needs a ROCm library.
pub(super) fn has_gpu_software(env: &Environment) -> bool {
    let rocm = crate::exclude::ExcludeList::new(true, &[]).ok();
    let needs_rocm = |b: &InstalledBinary| {
        rocm.as_ref().is_some_and(|list| b.facts.needed.iter().any(|n| list.reason(n, None).is_some()))
    };
    let code = |b: &InstalledBinary| {
        b.gpu
            .iter()
            .any(|c| c.is_package_amd_code() || !c.kpack_search_paths.is_empty() || !c.kpack_marker_problems.is_empty())
    };
    let device_file = |f: &String| f.ends_with(".kpack") || databases::database(f).is_some();
    env.binaries.iter().any(|b| code(b) || needs_rocm(b))
        || env.site.distributions.iter().any(|d| d.files.iter().any(device_file))
        || !env.site.unreadable.is_empty()
        || !env.unreadable.is_empty()
}

/// A library that ships kernel databases (Tensile, hipBLASLt, MIOpen, AOTriton, …), judged over
/// every distribution that carries some of them (a host and its device wheels, several device
/// wheels): none for the GPU, and the library falls back to slow paths or finds no kernel.
pub(super) fn database_problems(env: &Environment, machine: &Machine, fixes: &Fixes<'_>, problems: &mut Vec<Problem>) {
    // Library → (targets, families, the distributions that carry them).
    type Carried<'a> = (BTreeSet<TargetId>, BTreeSet<String>, Vec<&'a Distribution>);
    let mut libraries: BTreeMap<&str, Carried<'_>> = BTreeMap::new();
    for d in &env.site.distributions {
        for f in &d.files {
            let entry = if let Some(db) = databases::database(f) {
                let entry = libraries.entry(db.library).or_default();
                entry.0.insert(db.target);
                entry
            } else if let Some((library, family)) = databases::family_database(f) {
                let entry = libraries.entry(library).or_default();
                entry.1.insert(family);
                entry
            } else {
                continue;
            };
            if !entry.2.iter().any(|x| x.name == d.name) {
                entry.2.push(d);
            }
        }
    }
    for (library, (targets, families, carriers)) in &libraries {
        if targets.is_empty() {
            continue;
        }
        for gpu in &machine.gpus {
            let keep = Keep::new(modes_of(&gpu.requested()));
            let covered = targets.iter().any(|t| keep.runs(t))
                || families.iter().any(|f| databases::in_family(&gpu.processor, f));
            if covered {
                continue;
            }
            let names: Vec<&str> = carriers.iter().map(|d| d.name.as_str()).collect();
            let list: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
            // The distribution a device wheel for this GPU would come with: the host the
            // carriers' device wheels pin, else the first carrier.
            let host = carriers.iter().find(|d| device_project_target(&d.name).is_none()).unwrap_or(&carriers[0]);
            problems.push(
                Problem::new(
                    Kind::NoDatabaseForGpu,
                    format!(
                        "{}'s {library} kernel databases are for {} and none is for {}: its kernels for it are not found",
                        names.join(", "),
                        list.join(", "),
                        gpu.processor
                    ),
                )
                .on_gpu(gpu)
                .of(host)
                .fixed_by(super::code::device_fix(host, gpu, fixes)),
            );
        }
    }
}

/// Exact pins between installed distributions that no longer hold: a device wheel pins its host
/// at the version it was split from (and a selector pins the hosts it brings), so a host
/// reinstalled at another version leaves device code that was made for another build. All the
/// pins on one host get one fix, so that no two fixes disagree: the version a selector pins, if
/// one does (the release the person chose), else the host's installed version; either way with
/// the device extras of the device wheels installed for it, which bring theirs at that version.
pub(super) fn pin_problems(env: &Environment, fixes: &Fixes<'_>, problems: &mut Vec<Problem>) {
    let dists = &env.site.distributions;
    // Host (its index) → the distributions whose exact pin on it fails, each with its pin.
    let mut broken: BTreeMap<usize, Vec<(&Distribution, String)>> = BTreeMap::new();
    for d in dists {
        for r in d.requires_dist.iter().filter(|r| r.marker_extras.is_empty()) {
            let Some(exact) = &r.exact else { continue };
            let Some(t) = dists.iter().position(|x| x.name == r.package.as_str()) else { continue };
            let holds = match (r.specifiers(), dists[t].version.parse::<pep440_rs::Version>()) {
                (Some(spec), Ok(version)) => spec.contains(&version),
                _ => true,
            };
            if !holds {
                broken.entry(t).or_default().push((d, exact.version.clone()));
            }
        }
    }
    for (t, pins) in broken {
        let host = &dists[t];
        let selected = pins.iter().find(|(d, _)| device_project_target(&d.name).is_none()).map(|(_, v)| v.as_str());
        let version = selected.unwrap_or(&host.version);
        let mut extras: Vec<String> = dists
            .iter()
            .filter(|d| d.requires_dist.iter().any(|r| r.package.as_str() == host.name))
            .filter_map(|d| device_project_target(&d.name))
            .map(|target| DeviceExtra::of(target).to_string())
            .filter(|e| host.provides_extra.iter().any(|x| crate::wheel::requirement::normalized_extra(x) == *e))
            .collect();
        extras.sort();
        extras.dedup();
        let requirement = match extras.is_empty() {
            true => pinned(&host.name, None, version),
            false => pinned(&host.name, Some(&extras.join(",")), version),
        };
        let fix = fixes.install(&[host], &[requirement], Install::Pinned);
        for (d, pin) in pins {
            problems.push(
                Problem::new(
                    Kind::PinNotHeld,
                    format!(
                        "{} requires {}=={pin}, but {} {} is installed: what it holds was made for another build",
                        name_of(d),
                        host.name,
                        host.name,
                        host.version
                    ),
                )
                .of(d)
                .fixed_by(fix.clone()),
            );
        }
    }
}

/// The HIP runtime's sonames the binaries need: several majors in one process cannot both load
/// (`libamdhip64.so.6` beside `.so.7`).
pub(super) fn abi_problems(env: &Environment, problems: &mut Vec<Problem>) {
    const HIP: &str = "libamdhip64.so.";
    let mut needed: BTreeMap<String, Vec<&InstalledBinary>> = BTreeMap::new();
    for b in &env.binaries {
        for n in b.facts.needed.iter().filter(|n| n.starts_with(HIP)) {
            needed.entry(n.clone()).or_default().push(b);
        }
    }
    if needed.len() < 2 {
        return;
    }
    let describe = |soname: &str, list: &[&InstalledBinary]| {
        let mut dists: Vec<String> = list.iter().filter_map(|b| owner_name(env, b.owner)).collect();
        dists.sort();
        dists.dedup();
        format!("{soname}: {}", if dists.is_empty() { list[0].path.clone() } else { dists.join(", ") })
    };
    // The ABI most binaries need is the environment's; the others were built for another ROCm.
    let (main, _) = needed.iter().max_by_key(|(s, l)| (l.len(), s.as_str())).expect("two or more");
    let parts: Vec<String> = needed.iter().map(|(s, l)| describe(s, l)).collect();
    for (soname, list) in needed.iter().filter(|(s, _)| *s != main) {
        let major = soname.strip_prefix(HIP).unwrap_or(soname);
        let main_major = main.strip_prefix(HIP).unwrap_or(main);
        for b in list {
            let mut problem = Problem::new(
                Kind::RocmAbiMixed,
                format!(
                    "built for ROCm {major} ({soname}) in an environment of ROCm {main_major} ({main}); one process cannot load both ({})",
                    parts.join("; ")
                ),
            )
            .in_file(&b.path, owner_name(env, b.owner));
            if let Some(i) = b.owner {
                let d = &env.site.distributions[i];
                problem = problem.fixed_by(format!(
                    "install the build of {} for ROCm {main_major} (its +rocm{main_major}… release)",
                    d.name
                ));
            }
            problems.push(problem);
        }
    }
}

/// Libraries the loader finds nowhere. One that is in the environment, outside the search path
/// of the binary that needs it, loads only if a package preloads it (as `rocm_sdk` does): a
/// note, not a problem.
pub(super) fn loader_problems(env: &Environment, problems: &mut Vec<Problem>, notes: &mut Vec<String>) {
    // One problem per library the loader finds nowhere, naming every file that needs it: an
    // environment without ROCm misses the same few libraries in a hundred files.
    // Soname → (binary, the file that needs it, the binary's owner).
    type Needing<'a> = Vec<(&'a str, &'a str, Option<usize>)>;
    let mut unfound: BTreeMap<&str, Needing<'_>> = Default::default();
    for b in &env.binaries {
        for (soname, by) in &b.unfound {
            if let Some(paths) = env.file_names.get(soname) {
                notes.push(format!(
                    "{}: {soname} (needed by {by}) is not on the loader's path but is installed at {}: it loads only if something preloads it",
                    b.path,
                    paths.join(", ")
                ));
                continue;
            }
            unfound.entry(soname).or_default().push((&b.path, by, b.owner));
        }
    }
    for (soname, needing) in unfound {
        let rocm = crate::exclude::ExcludeList::new(true, &[]).is_ok_and(|l| l.reason(soname, None).is_some());
        let (first, by, owner) = needing[0];
        let who = if needing.len() == 1 {
            format!("needed by {by}")
        } else {
            let others = needing.len() - 1;
            format!("needed by {by} and {others} other file{}", if others == 1 { "" } else { "s" })
        };
        problems.push(
            Problem::new(
                Kind::LibraryNotFound,
                format!(
                    "the loader finds {soname} ({who}) nowhere: importing {} fails{}",
                    if needing.len() == 1 { "it" } else { "them" },
                    if rocm { "; it is ROCm's, which the environment must provide" } else { "" }
                ),
            )
            .in_file(first, owner_name(env, owner))
            .fixed_by(if rocm {
                format!("install the ROCm that provides {soname} (system packages, or ROCm's Python wheels), or point LD_LIBRARY_PATH at its lib directory")
            } else {
                format!("install the package that provides {soname}, or repair the wheel so it carries it (wheelfix repair)")
            }),
        );
    }
}
