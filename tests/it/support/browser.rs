//! Headless Chromium (Debian's `chromium`, installed by `scripts/test`): the DOM a page
//! renders, as a person's browser shows it.

use std::process::Command;

/// Debian's Chromium; a test that needs it fails without it.
pub fn chromium() -> &'static str {
    for name in ["chromium", "chromium-browser"] {
        if Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return name;
        }
    }
    panic!("headless Chromium is needed (`apt-get install chromium`; scripts/test installs it)");
}

/// The DOM Chromium renders for `url`, scripts run for up to 5 s of virtual time.
pub fn dump_dom(url: &str) -> String {
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,900",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed on {url}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
