//! `index` as real installers see it: the site served over HTTP on 127.0.0.1 by
//! `python -m http.server`, the wheels at a `--base-url` of their own (a release's assets), and pip
//! and uv (both from PyPI) installing from it. Every JSON page is checked against PEP 691 and
//! PEP 700 by a checker written from the PEPs.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use support::python::{system_python, tools_venv};
use support::wheelgen::WheelSpec;
use support::{stderr, wheelfix};

/// `python -m http.server` on a free port of 127.0.0.1, serving `root`; its request log is
/// captured. Killed on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(root: &Path, log: PathBuf) -> Server {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(system_python())
            .args(["-u", "-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"])
            .arg(root)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Server { child, port, log };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("http.server did not start");
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// The request lines it logged. Ex) `GET /assets/a-1.0-py3-none-any.whl.metadata HTTP/1.1" 200`
    fn requests(&self) -> Vec<String> {
        let file = std::fs::File::open(&self.log).unwrap();
        BufReader::new(file).lines().map_while(Result::ok).filter(|l| l.contains("\"GET ")).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two pure wheels, one requiring the other, in `dir`.
fn wheels(dir: &Path) -> Vec<PathBuf> {
    let mut app = WheelSpec::new("app", "1.0+rocm10.1.0", "py3-none-any").file("app/__init__.py", "import lib\n");
    app.metadata = vec!["Requires-Dist: lib==2.0+rocm10.1.0".into(), "Requires-Python: >=3.8".into()];
    app.purelib = true;
    let mut lib = WheelSpec::new("lib", "2.0+rocm10.1.0", "py3-none-any").file("lib/__init__.py", "X = 1\n");
    lib.purelib = true;
    vec![app.write(dir), lib.write(dir)]
}

/// PEP 691 (JSON simple API) with PEP 700 (api-version 1.1) and PEP 714, as the PEPs write them.
fn check_pep691_700(site: &Path) {
    let read = |p: PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let api_version = |v: &serde_json::Value, page: &str| {
        let version = v["meta"]["api-version"].as_str().unwrap_or_else(|| panic!("{page}: meta.api-version"));
        let (major, minor) = version.split_once('.').unwrap();
        assert_eq!(major, "1", "{page}: major version 1");
        minor.parse::<u32>().unwrap()
    };
    let root = read(site.join("index.json"));
    assert!(api_version(&root, "index.json") >= 1, "PEP 700 is api-version 1.1");
    for project in root["projects"].as_array().expect("projects is a list") {
        let name = project["name"].as_str().expect("each project has a name");
        let page_name = format!("{name}/index.json");
        let page = read(site.join(name).join("index.json"));
        let minor = api_version(&page, &page_name);
        let normalized = name.to_lowercase().replace(['_', '.'], "-");
        assert_eq!(page["name"], normalized.as_str(), "{page_name}: the name is normalised (PEP 503)");
        // PEP 700: `versions` is required from 1.1.
        let versions: Vec<&str> = page["versions"]
            .as_array()
            .unwrap_or_else(|| panic!("{page_name}: versions"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for file in page["files"].as_array().expect("files is a list") {
            let object = file.as_object().unwrap();
            for key in object.keys() {
                assert!(
                    [
                        "filename",
                        "url",
                        "hashes",
                        "requires-python",
                        "core-metadata",
                        "dist-info-metadata",
                        "gpg-sig",
                        "yanked",
                        "size",
                        "upload-time",
                        "provenance"
                    ]
                    .contains(&key.as_str()),
                    "{page_name}: unknown key {key}"
                );
            }
            let filename = object["filename"].as_str().unwrap();
            assert!(object["url"].is_string(), "{page_name}: url");
            let hashes = object["hashes"].as_object().expect("hashes is a dictionary");
            for (alg, hex) in hashes {
                assert!(!alg.is_empty() && hex.as_str().unwrap().chars().all(|c| c.is_ascii_hexdigit()));
            }
            if minor >= 1 {
                assert!(object.get("size").is_some_and(|s| s.is_u64()), "{page_name}: {filename}: size (PEP 700)");
                assert_eq!(
                    object["size"].as_u64().unwrap(),
                    std::fs::metadata(site.join(name).join(filename))
                        .or_else(|_| std::fs::metadata(site.parent().unwrap().join("assets").join(filename)))
                        .map(|m| m.len())
                        .unwrap_or(object["size"].as_u64().unwrap()),
                    "{filename}: size is the file's"
                );
            }
            // Optional keys are absent or of their type, never null.
            if let Some(rp) = object.get("requires-python") {
                assert!(rp.is_string(), "{page_name}: requires-python must be a string when present");
            }
            for key in ["core-metadata", "dist-info-metadata"] {
                if let Some(m) = object.get(key) {
                    assert!(m.is_boolean() || m.is_object(), "{page_name}: {key}");
                }
            }
            assert_eq!(object.get("core-metadata"), object.get("dist-info-metadata"), "PEP 714: both keys agree");
            if let Some(upload) = object.get("upload-time") {
                assert!(upload.is_string(), "{page_name}: upload-time");
            }
            let version = filename.split('-').nth(1).unwrap();
            assert!(versions.contains(&version), "{page_name}: {version} is in versions");
        }
    }
}

fn uv() -> PathBuf {
    tools_venv().join("bin/uv")
}

/// pip and uv each install `app` (and its requirement) from `index` into a fresh target.
fn install_with_pip_and_uv(d: &Path, index: &str, tag: &str) -> Vec<(String, std::process::Output)> {
    let pip = Command::new(tools_venv().join("bin/python"))
        .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir", "--index-url", index])
        .arg("--target")
        .arg(d.join(format!("pip-{tag}")))
        .arg("app")
        .output()
        .unwrap();
    let uv = Command::new(uv())
        .args(["pip", "install", "--no-cache", "--index-url", index, "--python"])
        .arg(tools_venv().join("bin/python"))
        .arg("--target")
        .arg(d.join(format!("uv-{tag}")))
        .arg("app")
        .output()
        .unwrap();
    vec![("pip".into(), pip), ("uv".into(), uv)]
}

fn assert_installed(d: &Path, tag: &str, results: &[(String, std::process::Output)]) {
    for (client, out) in results {
        assert!(out.status.success(), "{client} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), stderr(out));
        let target = d.join(format!("{client}-{tag}"));
        assert!(target.join("app/__init__.py").exists() && target.join("lib/__init__.py").exists(), "{client}");
        assert!(target.join("app-1.0+rocm10.1.0.dist-info").exists(), "{client}: exactly the indexed version");
    }
}

#[test]
fn pip_and_uv_install_from_a_site_whose_wheels_live_at_a_base_url() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let inputs = wheels(&d.join("wheelhouse"));
    let root = d.join("www");
    std::fs::create_dir_all(&root).unwrap();
    let server = Server::start(&root, d.join("server.log"));

    // Sidecars uploaded beside the wheels (`--upload-dir`); the base URL has no trailing slash.
    let base = server.url("assets");
    let out = wheelfix(
        d,
        &["index", "-o", "www/site", "--base-url", &base, "--upload-dir", "www/assets", "--json", "wheelhouse"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(root.join("site/app/index.html")).unwrap();
    assert!(page.contains(&format!("href=\"{base}/app-1.0%2Brocm10.1.0-py3-none-any.whl#sha256=")), "{page}");
    for input in &inputs {
        let name = input.file_name().unwrap().to_str().unwrap();
        assert!(
            root.join("assets").join(name).exists() && root.join("assets").join(format!("{name}.metadata")).exists()
        );
        assert!(!root.join("site/app").join(name).exists(), "the wheels are not in the site");
    }
    check_pep691_700(&root.join("site"));
    let results = install_with_pip_and_uv(d, &server.url("site/"), "sidecars");
    assert_installed(d, "sidecars", &results);
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.contains("GET /assets/app-1.0%2Brocm10.1.0-py3-none-any.whl.metadata")),
        "the installers used the PEP 658 sidecar: {requests:#?}"
    );

    // A host that serves only the wheels: without --upload-dir's sidecars, an index announcing
    // PEP 658 makes pip fail; `--no-core-metadata` gives one both clients accept.
    std::fs::create_dir_all(root.join("plain")).unwrap();
    for input in &inputs {
        std::fs::copy(input, root.join("plain").join(input.file_name().unwrap())).unwrap();
    }
    let plain = server.url("plain/");
    let out = wheelfix(d, &["index", "-o", "www/announcing", "--base-url", &plain, "wheelhouse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("--upload-dir"), "the missing sidecars are named: {}", stderr(&out));
    let pip = &install_with_pip_and_uv(d, &server.url("announcing/"), "announcing")[0];
    assert!(!pip.1.status.success(), "pip fails on the sidecar's 404 (the failure this option avoids)");

    let out = wheelfix(d, &["index", "-o", "www/bare", "--base-url", &plain, "--no-core-metadata", "wheelhouse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(root.join("bare/app/index.html")).unwrap();
    assert!(!page.contains("core-metadata") && !page.contains("dist-info-metadata"), "{page}");
    assert!(
        !root.join("bare/app").read_dir().unwrap().any(|e| e
            .unwrap()
            .path()
            .extension()
            .is_some_and(|x| x == "metadata"))
    );
    check_pep691_700(&root.join("bare"));
    let results = install_with_pip_and_uv(d, &server.url("bare/"), "bare");
    assert_installed(d, "bare", &results);
}

#[test]
fn a_local_site_is_pep_700_and_keeps_optional_keys_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    wheels(&d.join("wheelhouse"));
    let out = wheelfix(d, &["index", "-o", "site", "wheelhouse"]);
    assert!(out.status.success(), "{}", stderr(&out));
    check_pep691_700(&d.join("site"));
    let lib: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("site/lib/index.json")).unwrap()).unwrap();
    let file = &lib["files"][0];
    assert!(file.get("requires-python").is_none(), "no Requires-Python: the key is left out, not null: {file}");
    assert_eq!(
        file["size"].as_u64(),
        Some(std::fs::metadata(d.join("site/lib").join(file["filename"].as_str().unwrap())).unwrap().len())
    );
    let app: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("site/app/index.json")).unwrap()).unwrap();
    assert_eq!(app["files"][0]["requires-python"], ">=3.8");
    // An upload directory inside the site is refused before anything is written.
    let out = wheelfix(d, &["index", "-o", "site2", "--upload-dir", "site2/assets", "wheelhouse"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!d.join("site2").exists());
}
