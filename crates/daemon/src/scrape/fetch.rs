//! The HTTP side of a scrape, through the shared [`HttpClient`]: the whole request
//! (connect, headers and body) under one deadline, the body read in chunks so that an
//! oversized response is dropped as soon as it passes the limit, and a gzip body decoded
//! with the limit applied to what it decodes to.
//!
//! Redirects are followed here rather than by a client, so that credentials (the bearer
//! token, every configured header, a URL's `user:password`) go only to the configured
//! target's own origin, and a redirect to a link-local address (a cloud metadata service)
//! is refused (docs/config.md, "Redirects").

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{
    ACCEPT as ACCEPT_HEADER, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, HeaderMap, HeaderName,
    HeaderValue, LOCATION, USER_AGENT,
};
use hyper::{Request, Response, Uri};
use url::{Host, Url};

use super::ScrapeError;
use super::client::{ClientError, HttpClient};
use crate::redact::Secret;

/// Like Prometheus: the classic text format first, OpenMetrics accepted (our parser reads both).
pub const ACCEPT: &str =
    "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,text/plain;q=0.2,*/*;q=0.1";

/// What to fetch and how. `Debug` masks the URL's credentials (crate::redact).
#[derive(Clone)]
pub struct FetchSpec {
    pub url: Url,
    pub headers: Vec<(String, Secret)>,
    /// Re-read before each request, so rotated tokens work without a restart.
    pub bearer_token_file: Option<PathBuf>,
    pub timeout: Duration,
    /// Largest body accepted, counted after gzip decoding.
    pub body_limit: usize,
    pub gzip: bool,
    /// Follow HTTP redirects (at most [`MAX_REDIRECTS`]); off, a redirect is a scrape error.
    pub follow_redirects: bool,
}

/// Most redirects followed in one scrape, as Go's HTTP client (Prometheus) allows.
pub const MAX_REDIRECTS: usize = 10;

impl std::fmt::Debug for FetchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchSpec")
            .field("url", &crate::redact::url(&self.url))
            .field("headers", &self.headers)
            .field("bearer_token_file", &self.bearer_token_file)
            .field("timeout", &self.timeout)
            .field("body_limit", &self.body_limit)
            .field("gzip", &self.gzip)
            .field("follow_redirects", &self.follow_redirects)
            .finish()
    }
}

/// How one target is fetched: its request settings and the client it goes through.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: HttpClient,
    /// Sent on every request: `Accept`, `Accept-Encoding`, `User-Agent` and the scrape
    /// timeout.
    headers: HeaderMap,
    /// The configured headers: sent only to the target's own origin.
    secret_headers: HeaderMap,
    /// The configured URL as a request goes to it, made once rather than every scrape;
    /// `None` when it is not one (each scrape then says why).
    target: Option<Bare>,
    spec: FetchSpec,
}

/// A URL without its `user:password`, and those as Basic credentials.
#[derive(Debug, Clone)]
struct Bare {
    uri: Uri,
    basic: Option<HeaderValue>,
}

impl Bare {
    fn of(url: &Url) -> Result<Bare, ScrapeError> {
        // A URL's `user:password` is sent as Basic credentials, not in the request line.
        let mut bare = url.clone();
        let basic = (!url.username().is_empty() || url.password().is_some()).then(|| basic_auth(url));
        let _ = bare.set_username("");
        let _ = bare.set_password(None);
        let uri = bare.as_str().parse().map_err(|e| {
            ScrapeError::new("connect", format!("{} is not a URL a request can go to: {e}", crate::redact::url(url)))
        })?;
        Ok(Bare { uri, basic })
    }
}

impl Fetcher {
    /// A fetcher with a client of its own, for a one-off scrape (`goodput record`, a GPU
    /// exporter). A daemon's targets share one through [`Fetcher::with_client`].
    pub fn new(spec: FetchSpec) -> Result<Fetcher, ClientError> {
        Fetcher::with_client(&HttpClient::new()?, spec)
    }

    /// A fetcher going through `client`.
    pub fn with_client(client: &HttpClient, spec: FetchSpec) -> Result<Fetcher, ClientError> {
        let client = client.clone();
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_HEADER, HeaderValue::from_static(ACCEPT));
        headers.insert(USER_AGENT, HeaderValue::from_static(concat!("goodput/", env!("CARGO_PKG_VERSION"))));
        if spec.gzip {
            headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        }
        let secs = format!("{}", spec.timeout.as_secs_f64());
        if let Ok(v) = HeaderValue::from_str(&secs) {
            headers.insert("x-prometheus-scrape-timeout-seconds", v);
        }
        let mut secret_headers = HeaderMap::new();
        for (k, v) in &spec.headers {
            let header = |e: &dyn std::fmt::Display| ClientError::Header { name: k.clone(), why: e.to_string() };
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| header(&e))?;
            let mut value = HeaderValue::from_str(v.expose()).map_err(|e| header(&e))?;
            // Sensitive values print as "Sensitive" in any Debug of the request or headers.
            value.set_sensitive(true);
            secret_headers.insert(name, value);
        }
        let target = Bare::of(&spec.url).ok();
        Ok(Fetcher { client, headers, secret_headers, target, spec })
    }

    pub fn spec(&self) -> &FetchSpec {
        &self.spec
    }

    /// Fetches the body, or says why not. Never takes longer than the timeout.
    pub async fn fetch(&self) -> Result<Vec<u8>, ScrapeError> {
        let t = self.spec.timeout;
        match tokio::time::timeout(t, self.fetch_unbounded()).await {
            Ok(r) => r,
            Err(_) => Err(ScrapeError::new(
                "timeout",
                format!("no complete response within the scrape timeout of {}", crate::duration::format_duration(t)),
            )),
        }
    }

    /// The `Authorization` value from `bearer_token_file`, read afresh.
    async fn bearer_token(&self) -> Result<Option<HeaderValue>, ScrapeError> {
        let Some(path) = &self.spec.bearer_token_file else { return Ok(None) };
        let token = tokio::fs::read_to_string(path).await.map_err(|e| {
            ScrapeError::new("token_file", format!("cannot read bearer_token_file {}: {e}", path.display()))
        })?;
        let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|_| {
            ScrapeError::new(
                "token_file",
                format!("bearer_token_file {} holds characters not allowed in a header", path.display()),
            )
        })?;
        value.set_sensitive(true);
        Ok(Some(value))
    }

    async fn fetch_unbounded(&self) -> Result<Vec<u8>, ScrapeError> {
        let token = self.bearer_token().await?;
        let mut url = self.spec.url.clone();
        let mut hops = 0;
        let resp = loop {
            let req = self.request(&url, token.as_ref())?;
            let resp = self.client.send(req).await.map_err(|e| ScrapeError::from_request(&e, &url))?;
            match self.redirect(&url, &resp, hops)? {
                Some(next) => (url, hops) = (next, hops + 1),
                None => break resp,
            }
        };
        let status = resp.status();
        if !status.is_success() {
            return Err(ScrapeError::new("http_status", format!("server returned HTTP {status}")));
        }
        let limit = self.spec.body_limit;
        // Content-Length counts compressed bytes; only trust it when nothing is decoded.
        let headers = resp.headers();
        let encoding = headers.get(CONTENT_ENCODING).map(|v| v.as_bytes().trim_ascii());
        let encoded = encoding.is_some_and(|v| !v.eq_ignore_ascii_case(b"identity"));
        // Only a body asked for gzipped is decoded; any other encoding reaches the parser as
        // sent, and fails there with the reason.
        let gzipped = self.spec.gzip
            && encoding.is_some_and(|v| v.eq_ignore_ascii_case(b"gzip") || v.eq_ignore_ascii_case(b"x-gzip"));
        let declared =
            headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok()).filter(|_| !encoded);
        if let Some(len) = declared
            && len > limit as u64
        {
            return Err(too_large(limit, Some(len)));
        }
        let mut body = Vec::with_capacity(declared.map_or(64 << 10, |n| n as usize).min(limit));
        let mut incoming = resp.into_body();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| {
                let why = crate::redact::error_chain(&e);
                ScrapeError::new(
                    "read_error",
                    format!("reading the body from {} failed: {why}", crate::redact::url(&url)),
                )
            })?;
            let Ok(chunk) = frame.into_data() else { continue };
            // A gzip body is held compressed up to the limit too: it decodes to more.
            if body.len() + chunk.len() > limit {
                return Err(too_large(limit, None));
            }
            body.extend_from_slice(&chunk);
        }
        if gzipped {
            return gunzip(&body, limit);
        }
        Ok(body)
    }

    /// The request for `url`: the target's own headers, and its credentials only where
    /// `url` is the configured target's origin.
    fn request(&self, url: &Url, token: Option<&HeaderValue>) -> Result<Request<Empty<Bytes>>, ScrapeError> {
        let configured = *url == self.spec.url;
        let Bare { uri, basic } = match &self.target {
            Some(t) if configured => t.clone(),
            _ => Bare::of(url)?,
        };
        let mut req = Request::get(uri).body(Empty::new()).map_err(|e| ScrapeError::new("connect", e.to_string()))?;
        let headers = req.headers_mut();
        *headers = self.headers.clone();
        if let Some(basic) = basic {
            headers.insert(AUTHORIZATION, basic);
        }
        // Credentials stay with the origin they were configured for.
        if configured || url.origin() == self.spec.url.origin() {
            headers.extend(self.secret_headers.clone());
            if let Some(t) = token {
                headers.insert(AUTHORIZATION, t.clone());
            }
        }
        Ok(req)
    }
}

/// `Authorization: Basic …` from a URL's user name and password (percent-decoded), marked
/// sensitive so that no `Debug` of the request shows it.
fn basic_auth(url: &Url) -> HeaderValue {
    use base64::Engine as _;
    let decode = |s: &str| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>();
    let mut pair = decode(url.username());
    pair.push(b':');
    pair.extend(decode(url.password().unwrap_or("")));
    let encoded = base64::engine::general_purpose::STANDARD.encode(&pair);
    // Base64 is always a valid header value.
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).unwrap_or(HeaderValue::from_static("Basic"));
    value.set_sensitive(true);
    value
}

/// Decodes a gzip body (several members in a row too, as `gzip` concatenates them),
/// refusing it as soon as it decodes to more than `limit` bytes.
fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, ScrapeError> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity((body.len() * 8).min(limit));
    let decoder = flate2::read::MultiGzDecoder::new(body);
    match decoder.take(limit as u64 + 1).read_to_end(&mut out) {
        Ok(n) if n > limit => Err(too_large(limit, None)),
        Ok(_) => Ok(out),
        Err(e) => Err(ScrapeError::new("read_error", format!("the gzip body does not decode: {e}"))),
    }
}

impl Fetcher {
    /// Where a redirect response sends the scrape next, `None` for any other response, or
    /// why it is not followed.
    fn redirect<B>(&self, from: &Url, resp: &Response<B>, hops: usize) -> Result<Option<Url>, ScrapeError> {
        let status = resp.status();
        if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
            return Ok(None);
        }
        // Without a Location it is an ordinary non-2xx answer.
        let Some(location) = resp.headers().get(LOCATION) else { return Ok(None) };
        let refuse = |why: String| Err(ScrapeError::new("redirect", why));
        let to = match location.to_str().ok().map(|l| from.join(l)) {
            Some(Ok(u)) => u,
            _ => return refuse(format!("the target redirected (HTTP {status}) to an invalid Location")),
        };
        let shown = crate::redact::url(&to);
        if !self.spec.follow_redirects {
            return refuse(format!(
                "the target redirected (HTTP {status}) to {shown} and follow_redirects is off; \
                 set the target's url to the final address, or turn follow_redirects on"
            ));
        }
        if hops >= MAX_REDIRECTS {
            return refuse(format!("more than {MAX_REDIRECTS} redirects (the last to {shown}); is there a loop?"));
        }
        if to.scheme() != "http" && to.scheme() != "https" {
            return refuse(format!("the target redirected to {shown}, which is not http or https"));
        }
        if is_link_local(&to) && to.host() != self.spec.url.host() {
            return refuse(format!(
                "refusing the redirect to the link-local address {shown}, where cloud metadata services answer; \
                 if that really is the target, put it in the target's url"
            ));
        }
        Ok(Some(to))
    }
}

/// Whether `u` names a link-local IP literally: 169.254.0.0/16 or fe80::/10 (also as an
/// IPv4-mapped IPv6 address). A host name that resolves there is not caught.
fn is_link_local(u: &Url) -> bool {
    let v4 = |a: Ipv4Addr| a.is_link_local();
    let v6 = |a: Ipv6Addr| (a.segments()[0] & 0xffc0) == 0xfe80 || a.to_ipv4_mapped().is_some_and(v4);
    match u.host() {
        Some(Host::Ipv4(a)) => v4(a),
        Some(Host::Ipv6(a)) => v6(a),
        Some(Host::Domain(d)) => d.parse::<IpAddr>().is_ok_and(|ip| match ip {
            IpAddr::V4(a) => v4(a),
            IpAddr::V6(a) => v6(a),
        }),
        None => false,
    }
}

fn too_large(limit: usize, declared: Option<u64>) -> ScrapeError {
    let what = match declared {
        Some(n) => format!("body of {n} bytes"),
        None => "body".to_string(),
    };
    ScrapeError::new(
        "body_too_large",
        format!(
            "{what} exceeds scrape.body_limit of {limit} bytes; raise body_limit if this target is legitimately that large"
        ),
    )
}
