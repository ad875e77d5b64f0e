//! The man pages the Python wheel installs (`release/wheel-data/data/share/man/man1`) are what
//! `wheelfix manpages` writes from the command line's definitions: one per visible command, and
//! none left over. `WHEELFIX_BLESS=1` rewrites them.

use std::path::Path;
use std::process::Command;

#[test]
fn the_shipped_man_pages_are_current() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("release/wheel-data/data/share/man/man1");
    let fresh = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wheelfix")).arg("manpages").arg(fresh.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let names = |dir: &Path| {
        let mut n: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        n.sort();
        n
    };
    let made = names(fresh.path());
    assert!(made.contains(&"wheelfix.1".to_string()) && made.contains(&"wheelfix-split.1".to_string()), "{made:?}");
    assert!(!made.iter().any(|n| n.contains("manpages") || n.contains("help")), "{made:?}");
    if std::env::var_os("WHEELFIX_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&shipped);
        std::fs::create_dir_all(&shipped).unwrap();
        for name in &made {
            std::fs::copy(fresh.path().join(name), shipped.join(name)).unwrap();
        }
        return;
    }
    assert_eq!(names(&shipped), made, "stale: run `WHEELFIX_BLESS=1 cargo test --test it manpages::`");
    for name in &made {
        let (a, b) = (std::fs::read(shipped.join(name)).unwrap(), std::fs::read(fresh.path().join(name)).unwrap());
        assert!(a == b, "{name} is stale: run `WHEELFIX_BLESS=1 cargo test --test it manpages::`");
    }
    // A page reads as a man page: its title and the options of its command.
    let show = String::from_utf8(std::fs::read(shipped.join("wheelfix-show.1")).unwrap()).unwrap();
    assert!(
        show.starts_with(".ie \\n(.g .ds Aq") || show.contains(".TH wheelfix-show"),
        "{}",
        &show[..200.min(show.len())]
    );
    assert!(show.contains("json"), "the page lists --json");
}
