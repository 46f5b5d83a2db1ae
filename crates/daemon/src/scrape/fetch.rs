//! The HTTP side of a scrape: reqwest on rustls/ring, no proxy, with the whole request
//! (connect, headers and body) under one deadline and the body read in chunks so that an
//! oversized response is dropped as soon as it passes the limit.
//!
//! Redirects are followed here rather than by reqwest, so that credentials (the bearer
//! token, every configured header, a URL's `user:password`) go only to the configured
//! target's own origin, and a redirect to a link-local address (a cloud metadata service)
//! is refused (docs/config.md, "Redirects").

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::header::{ACCEPT as ACCEPT_HEADER, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, LOCATION};
use url::{Host, Url};

use super::ScrapeError;
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

/// Installs the ring crypto provider for rustls once per process. reqwest is built
/// without a provider so that aws-lc-sys (a slow C build) stays out of the tree.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider is already installed, which serves just as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The HTTP client scrapes go through: its connection pool and TLS setup, shared by every
/// target of a daemon. A client per target kept a pool, a TLS verifier and idle
/// connections with their read buffers per target, most of the per-target memory of an
/// aggregator (docs/footprint.md#b-aggregator). The settings that differ between targets
/// (timeout, headers, credentials) are set per request; only the gzip decoding, which is one
/// setting for the whole config (`scrape.gzip`), is the client's.
/// Why a target's HTTP client or request settings cannot be built: the target is not
/// scraped, and the message says so in the log and in `goodput check`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The TLS or connection pool setup failed (a shared error: every target sharing the
    /// client reports it).
    #[error("cannot build the HTTP client: {0}")]
    Build(std::sync::Arc<reqwest::Error>),
    /// A configured header's name or value is not valid HTTP.
    #[error("header {name:?}: {why}")]
    Header { name: String, why: String },
}

#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    gzip: bool,
}

impl HttpClient {
    /// A client that asks for and decodes gzip bodies when `gzip` is true.
    pub fn new(gzip: bool) -> Result<HttpClient, ClientError> {
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .gzip(gzip)
            .user_agent(concat!("goodput/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::Build(std::sync::Arc::new(e)))?;
        Ok(HttpClient { client, gzip })
    }

    /// Whether this client asks for gzip bodies.
    pub fn gzip(&self) -> bool {
        self.gzip
    }
}

/// How one target is fetched: its request settings and the client it goes through.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    /// Sent on every request: `Accept` and the scrape timeout.
    headers: HeaderMap,
    /// The configured headers: sent only to the target's own origin.
    secret_headers: HeaderMap,
    spec: FetchSpec,
}

impl Fetcher {
    /// A fetcher with a client of its own, for a one-off scrape (`goodput record`, a GPU
    /// exporter). A daemon's targets share one through [`Fetcher::with_client`].
    pub fn new(spec: FetchSpec) -> Result<Fetcher, ClientError> {
        let client = HttpClient::new(spec.gzip)?;
        Fetcher::with_client(&client, spec)
    }

    /// A fetcher going through `client`. A client whose gzip setting is not the spec's is
    /// not used: the fetcher gets one of its own, so that `spec.gzip` always holds.
    pub fn with_client(client: &HttpClient, spec: FetchSpec) -> Result<Fetcher, ClientError> {
        let client = match client.gzip == spec.gzip {
            true => client.client.clone(),
            false => HttpClient::new(spec.gzip)?.client,
        };
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_HEADER, HeaderValue::from_static(ACCEPT));
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
        Ok(Fetcher { client, headers, secret_headers, spec })
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
        let mut resp = loop {
            let mut req = self.client.get(url.clone()).timeout(self.spec.timeout).headers(self.headers.clone());
            // Credentials stay with the origin they were configured for.
            if url.origin() == self.spec.url.origin() {
                req = req.headers(self.secret_headers.clone());
                if let Some(t) = &token {
                    req = req.header(AUTHORIZATION, t.clone());
                }
            }
            let resp = req.send().await.map_err(|e| ScrapeError::from_reqwest(&e))?;
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
        let encoded = headers
            .get(reqwest::header::CONTENT_ENCODING)
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
        let declared = headers
            .get(reqwest::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .filter(|_| !encoded);
        if let Some(len) = declared
            && len > limit as u64
        {
            return Err(too_large(limit, Some(len)));
        }
        let mut body = Vec::with_capacity(declared.map_or(64 << 10, |n| n as usize).min(limit));
        while let Some(chunk) = resp.chunk().await.map_err(|e| ScrapeError::from_reqwest(&e))? {
            if body.len() + chunk.len() > limit {
                return Err(too_large(limit, None));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

impl Fetcher {
    /// Where a redirect response sends the scrape next, `None` for any other response, or
    /// why it is not followed.
    fn redirect(&self, from: &Url, resp: &reqwest::Response, hops: usize) -> Result<Option<Url>, ScrapeError> {
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
