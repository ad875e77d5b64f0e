//! Opt-in, disk-heavy: the >4 GiB case end to end. Set `WHEELFIX_SCALE_DIR` to a directory with
//! about 15 GB free; the test generates a zip64 wheel over 4 GiB there (`benches/genwheel.py
//! huge`: three 1.1 GB ELF extensions, a stored 2.4 GB blob, 72,000 small members), runs `show
//! --verify`, `retag` and `repair` on it, and checks with Python's `zipfile` that every output
//! opens and that every member matches its RECORD row. It takes several minutes.
//!
//! ```text
//! WHEELFIX_SCALE_DIR=/var/tmp/wf cargo test --release --test it scale:: -- --nocapture
//! ```

use crate::support;

use std::path::Path;
use std::process::Command;

use support::{stderr, wheelfix};

/// Every member of the wheel read and hashed against RECORD by Python's zipfile.
const VERIFY: &str = r#"
import base64, csv, hashlib, io, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
rows = {r[0]: r for r in csv.reader(io.StringIO(z.read(record).decode())) if r}
checked = 0
for info in z.infolist():
    if info.filename == record:
        continue
    h = hashlib.sha256()
    with z.open(info) as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    want = "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
    row = rows[info.filename]
    assert row[1] == want and int(row[2]) == info.file_size, (info.filename, row, want)
    checked += 1
print(checked, z.fp.seek(0, 2))
"#;

fn verify_with_python(wheel: &Path) -> (usize, u64) {
    let out = Command::new("python3").arg("-c").arg(VERIFY).arg(wheel).output().unwrap();
    assert!(out.status.success(), "{}: {}", wheel.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    (parts.next().unwrap().parse().unwrap(), parts.next().unwrap().parse().unwrap())
}

#[test]
#[ignore = "writes wheels of more than 4 GiB (tens of GB of disk); set WHEELFIX_SCALE_DIR to a roomy directory"]
fn a_wheel_over_4_gib_goes_through_every_command() {
    let base = std::env::var_os("WHEELFIX_SCALE_DIR").expect("set WHEELFIX_SCALE_DIR to a directory with room");
    let dir = tempfile::tempdir_in(base).unwrap();
    let d = dir.path();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/genwheel.py");
    let generated = Command::new("python3").arg(&script).arg("huge").arg(d.join("in")).output().unwrap();
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let input = d.join("in/hugepkg-1.0-cp311-cp311-linux_x86_64.whl");
    let (members, size) = verify_with_python(&input);
    assert!(size > 4 << 30 && members > 70_000, "{size} bytes, {members} members");

    let out = wheelfix(d, &["show", "--verify", "--json", input.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = support::show_reports(&out);
    assert!(report[0].hashes_checked);
    assert_eq!(report[0].host_binaries, 3);

    for command in ["retag", "repair"] {
        let out_dir = d.join(command);
        let out = wheelfix(d, &[command, "-q", "-w", out_dir.to_str().unwrap(), input.to_str().unwrap()]);
        assert!(out.status.success(), "{command}: {}", stderr(&out));
        let written: Vec<_> = std::fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(written.len(), 1, "{command}: {written:?}");
        let (checked, out_size) = verify_with_python(&written[0]);
        assert_eq!(checked, members, "{command}: every member");
        assert!(out_size > 4 << 30, "{command}: still a zip64 wheel over 4 GiB");
        std::fs::remove_dir_all(&out_dir).unwrap();
    }
}
