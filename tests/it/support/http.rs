//! Local HTTP servers for the tests: `python -m http.server`, and one that negotiates PEP 691.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::python::system_python;

const PEP691_SERVER: &str = r#"import functools, http.server, os, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        path = self.translate_path(self.path)
        wants_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
        page = os.path.join(path, "index.json")
        if wants_json and self.path.endswith("/") and os.path.isfile(page):
            f = open(page, "rb")
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
            return f
        return super().send_head()
port, root = int(sys.argv[1]), sys.argv[2]
http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Handler, directory=root)).serve_forever()
"#;

/// `python -m http.server` serving `root` on a free port of 127.0.0.1, stopped on drop.
pub struct Server {
    child: Child,
    port: u16,
}

impl Server {
    pub fn start(root: &Path) -> Server {
        Server::spawn(|port| {
            let mut c = Command::new(system_python());
            c.args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"]).arg(root);
            c
        })
    }

    /// A simple index that answers PEP 691 JSON (a directory's `index.json`) to a client that
    /// asks for it, and its HTML otherwise, as PyPI does.
    pub fn start_pep691(root: &Path) -> Server {
        let script = root.join(".pep691-server.py");
        std::fs::write(&script, PEP691_SERVER).unwrap();
        Server::spawn(|port| {
            let mut c = Command::new(system_python());
            c.arg(&script).arg(port.to_string()).arg(root);
            c
        })
    }

    fn spawn(command: impl Fn(u16) -> Command) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = command(port).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        // Stopped on drop, also when it never answers.
        let server = Server { child, port };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("http.server did not start on port {port}");
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
