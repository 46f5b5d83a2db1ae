//! `/runbooks/`: docs/runbooks.md, built into the binary and rendered to HTML once, so that
//! every alert's default `runbook_url` (`http://HOST:PORT/runbooks/#<anchor>`) lands on a
//! page this daemon serves itself (docs/alerts.md#runbooks).
//!
//! Each heading gets the anchor GitHub gives it (lowercase, punctuation dropped, spaces to
//! `-`, repeats numbered), so an alert's section is `#<alert name in lowercase>` here and on
//! GitHub alike. The markdown is the repository's, not user input, but it is still treated
//! as text: raw HTML in it is shown escaped, only `http(s)://` and in-page links stay links,
//! and images become their alt text. The page has no script; its stylesheet is its own.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::LazyLock;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::alert::AlertingConfig;
use crate::alert::rule::RUNBOOKS_PATH;

/// docs/runbooks.md as this binary was built with it.
pub const MARKDOWN: &str = include_str!("../../../../docs/runbooks.md");

/// The stylesheet, served at `/runbooks/runbooks.css`.
pub const STYLESHEET: &str = "\
body { font: 15px/1.5 system-ui, -apple-system, \"Segoe UI\", sans-serif; margin: 0 auto; padding: 0 16px 32px; max-width: 920px; color: #1f2328; background: #fff; }
nav { border-bottom: 1px solid #d0d7de; padding: 8px 0; font-size: 13px; }
nav a { margin-right: 10px; white-space: nowrap; }
a { color: #0969da; }
h1 { font-size: 24px; }
h2 { font-size: 20px; margin-top: 32px; padding-top: 8px; border-top: 2px solid #d0d7de; }
h3 { font-size: 16px; }
h2:target, h3:target { background: #fff8c5; }
code { font: 13px ui-monospace, monospace; background: #f6f8fa; padding: 0 3px; overflow-wrap: anywhere; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; }
pre code { padding: 0; }
";

/// Its own stylesheet and nothing else, from anywhere: no script, no image, no frame.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static PAGE: LazyLock<String> = LazyLock::new(|| page(MARKDOWN));

/// GitHub's anchor for a heading's text (github-slugger): lowercase, letters, digits, `-`
/// and `_` kept, spaces to `-`, everything else dropped.
pub fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Whether a link of the markdown stays a link on the page.
fn kept(dest: &str) -> bool {
    dest.starts_with('#') || dest.starts_with("https://") || dest.starts_with("http://")
}

/// The markdown's events as the page shows them: headings with their anchors, raw HTML as
/// text, links that cannot work here and images as their text. Also the `##` headings, for
/// the page's index.
fn events(markdown: &str) -> (Vec<Event<'_>>, Vec<(String, String)>) {
    let parsed: Vec<Event> = Parser::new_ext(markdown, Options::empty()).collect();
    let mut out = Vec::with_capacity(parsed.len());
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut sections = Vec::new();
    // CommonMark links do not nest: one flag says whether the open one was dropped.
    let mut dropped_link = false;
    for (i, e) in parsed.iter().enumerate() {
        match e {
            Event::Start(Tag::Heading { level, classes, attrs, .. }) => {
                let text: String = parsed[i + 1..]
                    .iter()
                    .take_while(|e| !matches!(e, Event::End(TagEnd::Heading(_))))
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                let base = slug(&text);
                let n = seen.entry(base.clone()).or_insert(0);
                let anchor = if *n == 0 { base } else { format!("{base}-{n}") };
                *n += 1;
                if *level == HeadingLevel::H2 {
                    sections.push((anchor.clone(), text));
                }
                out.push(Event::Start(Tag::Heading {
                    level: *level,
                    id: Some(CowStr::from(anchor)),
                    classes: classes.clone(),
                    attrs: attrs.clone(),
                }));
            }
            Event::Html(t) | Event::InlineHtml(t) => out.push(Event::Text(t.clone())),
            Event::Start(Tag::Link { dest_url, .. }) => {
                dropped_link = !kept(dest_url);
                if !dropped_link {
                    out.push(e.clone());
                }
            }
            Event::End(TagEnd::Link) => {
                if !std::mem::take(&mut dropped_link) {
                    out.push(e.clone());
                }
            }
            Event::Start(Tag::Image { .. }) | Event::End(TagEnd::Image) => {}
            _ => out.push(e.clone()),
        }
    }
    (out, sections)
}

/// The whole page for `markdown`.
pub fn page(markdown: &str) -> String {
    let (events, sections) = events(markdown);
    let mut body = String::new();
    pulldown_cmark::html::push_html(&mut body, events.into_iter());
    let mut out = String::with_capacity(body.len() + 2048);
    out.push_str(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>goodput runbooks</title><link rel=\"stylesheet\" href=\"runbooks.css\"></head>\n<body>\n<nav><a href=\"../\">status</a>",
    );
    for (anchor, text) in &sections {
        let _ = write!(out, " <a href=\"#{}\">{}</a>", Esc(anchor), Esc(text));
    }
    out.push_str("</nav>\n<main>\n");
    out.push_str(&body);
    out.push_str("</main>\n</body></html>\n");
    out
}

/// Text escaped for HTML content and double-quoted attributes.
struct Esc<'a>(&'a str);

impl std::fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in self.0.chars() {
            match c {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&#39;")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // The runbooks link to engines' and tools' sites: they need not learn the daemon's address.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // The page changes only with the binary.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    r
}

/// `GET /runbooks/`.
pub async fn runbooks() -> Response {
    secure(([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE.as_str()).into_response())
}

/// `GET /runbooks/runbooks.css`.
pub async fn stylesheet() -> Response {
    secure(([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLESHEET).into_response())
}

/// `GET /runbooks`: to `/runbooks/`, by a relative `Location` so that it works behind a
/// proxy that serves the daemon under a path prefix.
pub async fn redirect() -> Response {
    (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, "runbooks/")]).into_response()
}

/// The `runbook_url` of a daemon listening on `addr` whose config sets none: its own
/// `/runbooks/` page. An unspecified address (`0.0.0.0`, `[::]`) names no host a browser
/// could use, so the machine's host name stands in (see [`host_name`]).
pub fn default_page(addr: SocketAddr) -> String {
    let host = match addr.ip() {
        ip if ip.is_unspecified() => host_name().unwrap_or_else(|| "localhost".to_string()),
        IpAddr::V4(ip) => ip.to_string(),
        IpAddr::V6(ip) => format!("[{ip}]"),
    };
    format!("http://{host}:{}{RUNBOOKS_PATH}", addr.port())
}

/// `alerting` with `runbook_url` set to [`default_page`] where the config sets no runbook
/// address of its own (neither `runbook_url` nor the deprecated `runbook_base_url`).
pub fn with_default_page(alerting: &AlertingConfig, addr: SocketAddr) -> AlertingConfig {
    let mut out = alerting.clone();
    if out.runbook_page().is_none() {
        out.runbook_url = Some(default_page(addr));
    }
    out
}

/// The machine's host name, as gethostname(2) and `hostname` give it: in Kubernetes the
/// pod's name. Prometheus builds its own default external URL the same way. `None` when it
/// cannot be read or is not a plain DNS name.
pub fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer it is given.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let len = buf.iter().position(|b| *b == 0)?;
    let name = std::str::from_utf8(&buf[..len]).ok()?;
    let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    plain.then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_githubs_anchors_and_hostile_text_stays_text() {
        let md = "# Runbooks\n\n## LLMTargetDown\n\n### What to do\n\n## Other\n\n### What to do\n\n\
                  <script>alert(1)</script>\n\nSee [docs](alerts.md), [there](https://example.com/a?b=1&c=\"2\"), \
                  [here](#llmtargetdown), [evil](javascript:alert(2)) and ![img](https://example.com/x.png).\n\n\
                  `<b>` and <img src=x onerror=alert(3)>\n";
        let html = page(md);
        for needle in [
            r#"<h2 id="llmtargetdown">LLMTargetDown</h2>"#,
            r#"<h3 id="what-to-do">What to do</h3>"#,
            r#"<h3 id="what-to-do-1">What to do</h3>"#,
            r##"<a href="#llmtargetdown">LLMTargetDown</a> <a href="#other">Other</a></nav>"##,
            "&lt;script&gt;alert(1)&lt;/script&gt;",
            "See docs, ",
            r#"<a href="https://example.com/a?b=1&amp;c=%222%22">there</a>"#,
            r##"<a href="#llmtargetdown">here</a>"##,
            " evil and img.",
            "<code>&lt;b&gt;</code>",
            "&lt;img src=x onerror=alert(3)&gt;",
        ] {
            assert!(html.contains(needle), "{needle} not in:\n{html}");
        }
        assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("javascript:"), "{html}");
        assert!(!html.contains("alerts.md"), "a relative link would be dead here: {html}");
    }

    #[test]
    fn the_default_page_is_the_daemons_own_address() {
        assert_eq!(default_page("127.0.0.1:9464".parse().unwrap()), "http://127.0.0.1:9464/runbooks/");
        assert_eq!(default_page("[::1]:80".parse().unwrap()), "http://[::1]:80/runbooks/");
        let host = host_name().expect("this machine has a host name");
        assert_eq!(default_page("0.0.0.0:9464".parse().unwrap()), format!("http://{host}:9464/runbooks/"));
        assert_eq!(default_page("[::]:9464".parse().unwrap()), format!("http://{host}:9464/runbooks/"));
        let set = AlertingConfig { runbook_url: Some("https://rb.example/".into()), ..AlertingConfig::default() };
        let addr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(with_default_page(&set, addr).runbook_url, set.runbook_url);
        let old = AlertingConfig { runbook_base_url: Some("https://rb.example/".into()), ..AlertingConfig::default() };
        assert_eq!(with_default_page(&old, addr).runbook_url, None);
        let none = with_default_page(&AlertingConfig::default(), addr);
        assert_eq!(none.runbook_url.as_deref(), Some("http://127.0.0.1:1/runbooks/"));
    }
}
