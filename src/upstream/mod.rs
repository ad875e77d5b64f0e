//! What an upstream index (PyPI's simple index, usually) serves for a project: its files and
//! their versions, read from the PEP 691 JSON page, or the PEP 503 HTML page when the index
//! answers with HTML. `check --upstream` compares the set's requirements with them.

pub mod resolve;

use std::str::FromStr;
use std::time::Duration;

use pep440_rs::Version;

use crate::wheel::WheelFilename;

/// The PEP 691 JSON type, preferred; HTML is the fallback every simple index serves.
const ACCEPT: &str = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";
/// A project page may be large (torch's lists thousands of files): a JSON page is read as it
/// arrives, keeping only what is used, so its bound is only against a server that never ends.
const MAX_PAGE: u64 = 256 << 20;
/// An HTML page is held whole while its links are read, on every core at once: PyPI's largest
/// are a few MB, so a page past this is an error rather than memory.
const MAX_HTML_PAGE: u64 = 64 << 20;

/// Why an upstream project page could not be read; `page` is its URL as findings show it.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("cannot reach {page}: {source}")]
    Unreachable { page: String, source: Box<ureq::Error> },
    #[error("{page} answered HTTP {status}")]
    Status { page: String, status: u16 },
    #[error("cannot read {page}: {source}")]
    Unreadable { page: String, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("{page}: {problem}")]
    Page { page: String, problem: PageProblem },
}

/// What is wrong with a PEP 691 page.
#[derive(Debug, thiserror::Error)]
pub enum PageProblem {
    #[error("not a PEP 691 page: {0}")]
    NotPep691(serde_json::Error),
    #[error("a PEP 691 page of api-version {0}, which installers of API version 1 (pip) refuse; not compared")]
    ApiVersion(String),
}

/// One file an upstream index serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamFile {
    pub filename: String,
    pub version: Version,
    /// PEP 592: installers skip it unless a requirement pins it exactly.
    pub yanked: bool,
    /// Its absolute URL, without the `#sha256=` fragment.
    pub url: String,
    /// Its sha256, where the page gives it (PEP 503's `#sha256=` fragment, PEP 691's `hashes`).
    pub sha256: Option<String>,
}

/// An upstream index, reached over HTTP(S) with a timeout, or a local `file://` one.
pub struct Upstream {
    /// As given, as a directory URL, with any password replaced by `****` (as pip prints it):
    /// what findings name. Ex) `https://pypi.org/simple/`, `https://user:****@h/simple/`
    pub url: String,
    /// The URL requests go to, without credentials.
    request_url: String,
    /// `Basic …` for the credentials the URL carried, sent with every request.
    authorization: Option<String>,
    agent: ureq::Agent,
}

impl Upstream {
    pub fn new(url: &str, timeout: Duration) -> Upstream {
        // The machine's trust store (and SSL_CERT_FILE), as pip and curl use it: an index behind
        // a company's TLS proxy is reached as they reach it.
        let tls = ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::PlatformVerifier).build();
        let agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .user_agent(concat!("wheelfix/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let url = crate::index::directory_url(url);
        let credentials = Credentials::split(&url);
        Upstream {
            url: credentials.redacted,
            request_url: credentials.bare,
            authorization: credentials.authorization,
            agent,
        }
    }

    /// The project's files (`None`: the index does not have the name), or why the page could
    /// not be read.
    pub fn files(&self, project: &str) -> Result<Option<Vec<UpstreamFile>>, UpstreamError> {
        // The name is a PEP 508 name (checked where it entered); quoted all the same, so that
        // nothing in it can become another path or a query.
        let quoted = crate::index::url_quote(project);
        let shown = format!("{}{quoted}/", self.url);
        let url = format!("{}{quoted}/", self.request_url);
        if let Some(dir) = url.strip_prefix("file://") {
            return local_page(&percent_decode(dir), &shown).map(|page| {
                page.map(|links| links.into_iter().filter_map(|link| upstream_file(project, &url, link)).collect())
            });
        }
        let mut request = self.agent.get(&url).header("Accept", ACCEPT);
        if let Some(authorization) = &self.authorization {
            request = request.header("Authorization", authorization);
        }
        let mut response = match request.call() {
            Ok(r) => r,
            Err(e) => return Err(UpstreamError::Unreachable { page: shown, source: Box::new(e) }),
        };
        let status = response.status().as_u16();
        if status == 404 || status == 410 {
            return Ok(None);
        }
        if status != 200 {
            return Err(UpstreamError::Status { page: shown, status });
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let links = if content_type.contains("json") {
            let body = response.body_mut().with_config().limit(MAX_PAGE);
            // Read as it arrives into the few fields the answer needs: a page of hundreds of MB
            // is never held whole, nor as a tree.
            let reader = std::io::BufReader::with_capacity(64 << 10, body.reader());
            json_files_from(reader).map_err(|problem| UpstreamError::Page { page: shown.clone(), problem })?
        } else {
            let bytes = response
                .body_mut()
                .with_config()
                .limit(MAX_HTML_PAGE)
                .read_to_vec()
                .map_err(|e| UpstreamError::Unreadable { page: shown.clone(), source: Box::new(e) })?;
            html_files(&decode_html(&bytes, &content_type))
        };
        Ok(Some(links.into_iter().filter_map(|link| upstream_file(project, &url, link)).collect()))
    }
}

/// A local index's project page (`<dir>/<project>/index.html`, as pip reads a `file://` index).
fn local_page(dir: &str, shown: &str) -> Result<Option<Vec<Link>>, UpstreamError> {
    let page = std::path::Path::new(dir).join("index.html");
    match crate::files::read_bounded(&page, MAX_HTML_PAGE) {
        Ok(bytes) => Ok(Some(html_files(&decode_html(&bytes, "")))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(UpstreamError::Unreadable { page: shown.to_string(), source: Box::new(e) }),
    }
}

/// An HTML page's text in the charset its `Content-Type` names (Latin-1 is the one besides
/// UTF-8 indexes use); otherwise UTF-8, with Latin-1 for a page that is not valid UTF-8.
fn decode_html(bytes: &[u8], content_type: &str) -> String {
    let latin1 = || bytes.iter().map(|&b| b as char).collect::<String>();
    let declared = content_type.split(';').find_map(|p| p.trim().strip_prefix("charset=")).map(|c| c.trim_matches('"'));
    match declared {
        Some("iso-8859-1" | "latin-1" | "latin1" | "windows-1252" | "cp1252") => latin1(),
        _ => match std::str::from_utf8(bytes) {
            Ok(text) => text.to_string(),
            Err(_) => latin1(),
        },
    }
}

/// An index URL's credentials, taken apart: the URL to show (password as `****`), the URL to
/// request (none), and the `Authorization` header that carries them.
struct Credentials {
    redacted: String,
    bare: String,
    authorization: Option<String>,
}

impl Credentials {
    fn split(url: &str) -> Credentials {
        let plain = || Credentials { redacted: url.to_string(), bare: url.to_string(), authorization: None };
        let Some((scheme, rest)) = url.split_once("://") else { return plain() };
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let Some(at) = rest[..authority_end].rfind('@') else { return plain() };
        let (userinfo, host_and_path) = (&rest[..at], &rest[at + 1..]);
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (percent_decode(u), Some(percent_decode(p))),
            None => (percent_decode(userinfo), None),
        };
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{user}:{}", password.as_deref().unwrap_or_default()));
        // pip shows the user and hides the password; a lone token (no password) is hidden whole.
        let shown = match password {
            Some(_) => format!("{}:****", &userinfo[..userinfo.find(':').unwrap_or(userinfo.len())]),
            None => "****".to_string(),
        };
        Credentials {
            redacted: format!("{scheme}://{shown}@{host_and_path}"),
            bare: format!("{scheme}://{host_and_path}"),
            authorization: Some(format!("Basic {token}")),
        }
    }
}

/// A URL as messages show it: any password replaced by `****`.
pub fn redact(url: &str) -> String {
    Credentials::split(url).redacted
}

fn upstream_file(project: &str, page: &str, link: Link) -> Option<UpstreamFile> {
    let version = file_version(project, &link.filename)?;
    let sha256 = link.href.split_once("#sha256=").map(|(_, h)| h.split('&').next().unwrap_or(h).to_ascii_lowercase());
    Some(UpstreamFile {
        version,
        yanked: link.yanked,
        url: join_url(page, &link.href),
        filename: link.filename,
        sha256,
    })
}

/// One file link of a project page.
#[derive(Debug, PartialEq, Eq)]
struct Link {
    filename: String,
    href: String,
    yanked: bool,
}

/// `href` as an absolute URL, read from the page at `page`, without its fragment.
/// Ex) (`http://h/simple/nixl/`, `../../f/nixl.whl#sha256=…`) → `http://h/f/nixl.whl`
pub fn join_url(page: &str, href: &str) -> String {
    let href = href.split('#').next().unwrap_or_default();
    if href.contains("://") {
        return href.to_string();
    }
    let (scheme, rest) = page.split_once("://").unwrap_or(("", page));
    let host_end = rest.find('/').unwrap_or(rest.len());
    let host = &rest[..host_end];
    if let Some(path) = href.strip_prefix("//") {
        return format!("{scheme}://{path}");
    }
    let mut segments: Vec<&str> = if href.starts_with('/') {
        Vec::new()
    } else {
        let dir = &rest[host_end..];
        dir[..dir.rfind('/').map_or(0, |i| i + 1)].split('/').filter(|s| !s.is_empty()).collect()
    };
    for part in href.trim_start_matches('/').split('/') {
        match part {
            ".." => {
                segments.pop();
            }
            "." | "" => {}
            other => segments.push(other),
        }
    }
    let trailing = if href.ends_with('/') { "/" } else { "" };
    format!("{scheme}://{host}/{}{trailing}", segments.join("/"))
}

/// The version a distribution's file name gives. Ex) `nixl-1.5.2-py3-none-any.whl` → `1.5.2`;
/// `nixl-1.5.2.tar.gz` → `1.5.2`
pub fn file_version(project: &str, filename: &str) -> Option<Version> {
    if filename.ends_with(".whl") {
        return WheelFilename::parse(filename).ok().map(|n| n.version.parsed);
    }
    let stem = [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz"].iter().find_map(|ext| filename.strip_suffix(ext))?;
    // The name may itself hold `-`: the version follows the `-` after which the name ends.
    let project = crate::wheel::name::PackageName::new(project);
    stem.match_indices('-')
        .find(|(at, _)| crate::wheel::name::PackageName::new(&stem[..*at]) == project)
        .and_then(|(at, _)| Version::from_str(&stem[at + 1..]).ok())
}

/// The file links of a PEP 691 project page, read from `reader` into only the fields used.
/// A page of another major API version is refused, as pip refuses it.
fn json_files_from(reader: impl std::io::Read) -> Result<Vec<Link>, PageProblem> {
    #[derive(serde::Deserialize)]
    struct Page {
        meta: Meta,
        files: Vec<File>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "api-version")]
        api_version: String,
    }
    #[derive(serde::Deserialize)]
    struct File {
        filename: String,
        #[serde(default)]
        url: String,
        #[serde(default)]
        yanked: Yanked,
        #[serde(default)]
        hashes: std::collections::BTreeMap<String, String>,
    }
    /// PEP 592: `true`, or the reason, which also means yanked.
    #[derive(serde::Deserialize, Default)]
    #[serde(untagged)]
    enum Yanked {
        Flag(bool),
        Reason(#[allow(dead_code)] String),
        #[default]
        No,
    }
    let page: Page = serde_json::from_reader(reader).map_err(PageProblem::NotPep691)?;
    if page.meta.api_version.split('.').next() != Some("1") {
        return Err(PageProblem::ApiVersion(page.meta.api_version));
    }
    Ok(page
        .files
        .into_iter()
        .map(|f| Link {
            filename: f.filename,
            // The hash travels as PEP 503 carries it, in the link's fragment.
            href: match f.hashes.get("sha256") {
                Some(hash) if !f.url.contains('#') => format!("{}#sha256={hash}", f.url),
                _ => f.url,
            },
            yanked: matches!(f.yanked, Yanked::Flag(true) | Yanked::Reason(_)),
        })
        .collect())
}

#[cfg(test)]
fn json_files(body: &str) -> Result<Vec<Link>, PageProblem> {
    json_files_from(body.as_bytes())
}

/// The file links of a PEP 503 project page: each anchor's text names the file (else its
/// link's last path segment); `data-yanked` marks a yanked file.
fn html_files(body: &str) -> Vec<Link> {
    // Tags are found case-blind in one lowered copy (ASCII lowering keeps every offset).
    let lower = body.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = lower[at..].find("<a ") {
        let start = at + found + 3;
        let Some(tag_len) = body[start..].find('>') else { break };
        let attributes = &body[start..start + tag_len];
        let text_start = start + tag_len + 1;
        let text_end = lower[text_start..].find("</a").map_or(body.len(), |n| text_start + n);
        let text = body[text_start..text_end].trim();
        let yanked = attributes.contains("data-yanked");
        let href = attribute(attributes, "href").unwrap_or_default();
        let filename = if !text.is_empty() && !text.contains('<') {
            unescape(text)
        } else {
            let path = href.split(['#', '?']).next().unwrap_or_default();
            percent_decode(path.rsplit('/').next().unwrap_or_default())
        };
        if !filename.is_empty() {
            out.push(Link { filename, href, yanked });
        }
        at = text_end;
    }
    out
}

fn attribute(attributes: &str, name: &str) -> Option<String> {
    let at = attributes.to_ascii_lowercase().find(&format!("{name}="))? + name.len() + 1;
    let rest = &attributes[at..];
    let (quote, rest) = match rest.chars().next()? {
        q @ ('"' | '\'') => (q, &rest[1..]),
        _ => (' ', rest),
    };
    Some(unescape(&rest[..rest.find(quote).unwrap_or(rest.len())]))
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_sent_and_never_shown() {
        let c = Credentials::split("http://user:s3cret@h:8/simple/");
        assert_eq!(c.redacted, "http://user:****@h:8/simple/");
        assert_eq!(c.bare, "http://h:8/simple/");
        assert_eq!(c.authorization.as_deref(), Some("Basic dXNlcjpzM2NyZXQ="));
        assert_eq!(redact("https://tok3n@h/simple/"), "https://****@h/simple/");
        assert_eq!(redact("https://h/simple/"), "https://h/simple/");
        assert_eq!(redact("https://h/p@x/"), "https://h/p@x/");
    }

    #[test]
    fn versions_from_file_names() {
        let v = |s: &str| Version::from_str(s).unwrap();
        assert_eq!(file_version("nixl", "nixl-1.5.2-py3-none-any.whl"), Some(v("1.5.2")));
        assert_eq!(file_version("nixl-cu12", "nixl_cu12-0.7.1.tar.gz"), Some(v("0.7.1")));
        assert_eq!(file_version("atom", "atom-0.1.9.zip"), Some(v("0.1.9")));
        assert_eq!(file_version("atom", "atom-latest.tar.gz"), None);
        assert_eq!(file_version("atom", "README.md"), None);
    }

    #[test]
    fn html_and_json_pages() {
        let html = "<html><body>\n<a href=\"../../f/nixl-1.5.2-py3-none-any.whl#sha256=ab\" data-requires-python=\"&gt;=3.9\">nixl-1.5.2-py3-none-any.whl</a><br/>\n<A HREF='nixl-1.5.1.tar.gz' data-yanked=\"\"></A>\n</body></html>";
        let link = |f: &str, h: &str, y| Link { filename: f.into(), href: h.into(), yanked: y };
        assert_eq!(
            html_files(html),
            vec![
                link("nixl-1.5.2-py3-none-any.whl", "../../f/nixl-1.5.2-py3-none-any.whl#sha256=ab", false),
                link("nixl-1.5.1.tar.gz", "nixl-1.5.1.tar.gz", true)
            ]
        );
        let json = r#"{"meta":{"api-version":"1.1"},"name":"nixl","files":[{"filename":"nixl-1.5.2-py3-none-any.whl","url":"x","hashes":{"sha256":"cd"}},{"filename":"nixl-1.5.0.tar.gz","yanked":"broken","url":"y","hashes":{}}]}"#;
        assert_eq!(
            json_files(json).unwrap(),
            vec![link("nixl-1.5.2-py3-none-any.whl", "x#sha256=cd", false), link("nixl-1.5.0.tar.gz", "y", true)]
        );
        let file = upstream_file("nixl", "http://h/simple/nixl/", json_files(json).unwrap().remove(0)).unwrap();
        assert_eq!((file.url.as_str(), file.sha256.as_deref()), ("http://h/simple/nixl/x", Some("cd")));
        assert_eq!(join_url("http://h:8/simple/nixl/", "../../f/nixl.whl#sha256=ab"), "http://h:8/f/nixl.whl");
        assert_eq!(join_url("http://h/simple/nixl/", "nixl.whl"), "http://h/simple/nixl/nixl.whl");
        assert_eq!(join_url("http://h/simple/nixl/", "/p/n.whl"), "http://h/p/n.whl");
        assert_eq!(join_url("https://h/simple/nixl/", "https://o/n.whl"), "https://o/n.whl");
        assert!(json_files("<html>").is_err());
        assert!(json_files(r#"{"meta":{"api-version":"2.0"},"name":"nixl","files":[]}"#).is_err());
        assert_eq!(decode_html(b"<a href='x'>caf\xe9-1.0.tar.gz</a>", "text/html"), "<a href='x'>café-1.0.tar.gz</a>");
        assert_eq!(percent_decode("torch-2.9.0%2Brocm7.1-cp312.whl"), "torch-2.9.0+rocm7.1-cp312.whl");
    }
}
