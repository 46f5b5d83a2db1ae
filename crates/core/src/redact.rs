//! Credentials never leave the process in text: every URL the daemon prints or exports
//! (logs, errors, `goodput check`, /api/v1/*) goes through [`url`] or [`urls_in`], and
//! header values are [`Secret`]s whose `Debug` and `Display` print `<secret>`.
//!
//! What counts as a credential (docs/config.md, "Secrets"):
//! - a URL's password, shown as `xxxxx` (as Go's `URL.Redacted` does); the
//!   user name stays, since it names the account, unless there is no password, in which
//!   case the user name is the credential (`https://TOKEN@host`, a common API convention);
//! - the value of a query parameter whose name suggests a secret ([`SECRET_PARAMS`]);
//! - every header value from `targets[].headers`, and the bearer token (read from its file
//!   before each scrape and never stored in the config).

use std::fmt;

use url::Url;

/// What replaces a redacted part of a URL.
pub const MASK: &str = "xxxxx";

/// A query parameter is secret when its lower-cased name contains one of these
/// (`access_token`, `api_key`, `X-Amz-Signature`, `password`, …). Over-matching a harmless
/// parameter only hides its value from the logs.
pub const SECRET_PARAMS: &[&str] = &["token", "key", "secret", "pass", "auth", "sig", "credential", "session"];

/// A value that must not appear in logs or output: `Debug` and `Display` print `<secret>`.
/// There is deliberately no `Serialize`; [`Secret::expose`] is the one way to the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it (an HTTP header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// `u` as text, with its credentials masked.
pub fn url(u: &Url) -> String {
    url_str(u.as_str())
}

/// [`url`] for a URL held as text (the alerting and dcgm-exporter settings, a rejected
/// config value). The text is kept as written, only the credentials change, so that the
/// user recognises it. Text that does not even parse as a URL is masked more eagerly: its
/// user info may run up to the last `@` before the query.
pub fn url_str(s: &str) -> String {
    let Some(start) = s.find("://").map(|i| i + 3) else { return s.to_string() };
    let stops: &[char] = if Url::parse(s.trim()).is_ok() { &['/', '?', '#'] } else { &['?', '#'] };
    let auth_end = s[start..].find(stops).map_or(s.len(), |i| start + i);
    let mut out = match s[start..auth_end].rfind('@') {
        // A user name alone is the credential (`https://TOKEN@host`); beside a password it
        // only names the account.
        Some(at) => match s[start..start + at].split_once(':') {
            Some((user, _)) => format!("{}{user}:{MASK}{}", &s[..start], &s[start + at..]),
            None => format!("{}{MASK}{}", &s[..start], &s[start + at..]),
        },
        None => s.to_string(),
    };
    if let Some(qi) = out.find('?') {
        let (head, q) = out.split_at(qi + 1);
        let (q, frag) = q.split_once('#').map_or((q, None), |(q, f)| (q, Some(f)));
        out = format!("{head}{}{}", redact_query(q), frag.map(|f| format!("#{f}")).unwrap_or_default());
    }
    out
}

/// `text` (an error message, a log line) with every `http://` or `https://` URL in it
/// redacted: the last line of defence for messages that embed a URL, such as reqwest's
/// `error sending request for url (…)`.
pub fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_scheme(rest) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        // A URL ends at whitespace, or at a quote or bracket that encloses it in a message.
        let end = tail.find(|c: char| c.is_whitespace() || "\"'<>()[]{}`".contains(c)).unwrap_or(tail.len());
        out.push_str(&url_str(&tail[..end]));
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A reqwest error and its causes as one line ("error sending request: client error
/// (Connect): tcp connect error: Connection refused"), any URL in it redacted. reqwest's
/// own `Display` stops at "error sending request".
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    urls_in(&msg)
}

fn find_scheme(s: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    [lower.find("http://"), lower.find("https://")].into_iter().flatten().min()
}

/// Masks the values of secret-looking parameters in a raw query, leaving every other byte
/// as it was (re-encoding the whole query would change what the user recognises).
fn redact_query(q: &str) -> String {
    q.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !value.is_empty() && secret_param(name) => format!("{name}={MASK}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn secret_param(raw_name: &str) -> bool {
    let name: String = url::form_urlencoded::parse(raw_name.as_bytes()).map(|(k, _)| k.into_owned()).collect();
    let name = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|p| name.contains(p))
}

/// Why a config value is not a usable http(s) URL. The value is quoted masked, since it
/// may carry credentials, and each message ends with a good example.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// A URL, but not http(s) or without a host.
    #[error("{shown:?} must start with http:// or https:// and name a host, like {example}")]
    NotHttp { shown: String, example: String },
    /// Not a URL at all.
    #[error("{shown:?} is not a URL ({why}); write e.g. {example}")]
    Unparsable { shown: String, why: url::ParseError, example: String },
}

/// Checks that `s` is an http(s) URL naming a host; `example` shows a good value.
pub fn check_http_url(s: &str, example: &str) -> Result<(), UrlError> {
    let shown = url_str(s.trim());
    let example = example.to_string();
    match Url::parse(s.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        Ok(_) => Err(UrlError::NotHttp { shown, example }),
        Err(why) => Err(UrlError::Unparsable { shown, why, example }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> String {
        url(&Url::parse(s).unwrap())
    }

    #[test]
    fn password_is_masked_user_kept() {
        assert_eq!(u("http://alice:hunter2@h:9093/api"), "http://alice:xxxxx@h:9093/api");
    }

    #[test]
    fn lone_user_name_is_the_credential() {
        assert_eq!(u("https://ghp_TOKEN@h/metrics"), "https://xxxxx@h/metrics");
    }

    #[test]
    fn secret_query_values_masked_others_untouched() {
        assert_eq!(
            u("http://h/m?model=a%20b&access_token=s3cr3t&X-Amz-Signature=abc&empty_key=&page=2"),
            "http://h/m?model=a%20b&access_token=xxxxx&X-Amz-Signature=xxxxx&empty_key=&page=2"
        );
    }

    #[test]
    fn plain_url_is_unchanged() {
        assert_eq!(u("http://127.0.0.1:8000/metrics"), "http://127.0.0.1:8000/metrics");
    }

    #[test]
    fn urls_inside_messages() {
        let msg = "error sending request for url (http://bob:pw@10.0.0.1:8000/metrics?apikey=K): refused";
        assert_eq!(
            urls_in(msg),
            "error sending request for url (http://bob:xxxxx@10.0.0.1:8000/metrics?apikey=xxxxx): refused"
        );
        assert_eq!(urls_in("POST HTTPS://u:p@h/x failed"), "POST HTTPS://u:xxxxx@h/x failed");
        assert_eq!(urls_in("no url here"), "no url here");
    }

    #[test]
    fn unparseable_text_still_loses_its_userinfo() {
        assert_eq!(url_str("http://u:p@[bad/x?token=t"), "http://u:xxxxx@[bad/x?token=xxxxx");
        // An unencoded '/' in the password makes the URL invalid; the password still goes.
        assert_eq!(url_str("ftp://u:p/w@h/x"), "ftp://u:xxxxx@h/x");
        assert_eq!(url_str("nope"), "nope");
    }

    #[test]
    fn text_is_kept_as_written() {
        assert_eq!(url_str("HTTP://Am:pw@Host:9093"), "HTTP://Am:xxxxx@Host:9093");
        assert_eq!(url_str("http://h/models/@org?page=2#x"), "http://h/models/@org?page=2#x");
        assert_eq!(url_str("http://h/m?key=k#frag"), "http://h/m?key=xxxxx#frag");
    }

    #[test]
    fn secret_debug_and_display() {
        let s = Secret::from("Bearer abc");
        assert_eq!((format!("{s:?}"), s.to_string(), s.expose()), ("<secret>".into(), "<secret>".into(), "Bearer abc"));
    }
}
