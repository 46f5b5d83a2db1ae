//! The HTTP side of a scrape: reqwest on rustls/ring, no proxy, with the whole request
//! (connect, headers and body) under one deadline and the body read in chunks so that an
//! oversized response is dropped as soon as it passes the limit.

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use reqwest::header::{ACCEPT as ACCEPT_HEADER, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use url::Url;

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
}

impl std::fmt::Debug for FetchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchSpec")
            .field("url", &crate::redact::url(&self.url))
            .field("headers", &self.headers)
            .field("bearer_token_file", &self.bearer_token_file)
            .field("timeout", &self.timeout)
            .field("body_limit", &self.body_limit)
            .field("gzip", &self.gzip)
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

/// A client for one target.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    headers: HeaderMap,
    spec: FetchSpec,
}

impl Fetcher {
    pub fn new(spec: FetchSpec) -> Result<Fetcher, String> {
        install_crypto_provider();
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT_HEADER, HeaderValue::from_static(ACCEPT));
        let secs = format!("{}", spec.timeout.as_secs_f64());
        if let Ok(v) = HeaderValue::from_str(&secs) {
            headers.insert("x-prometheus-scrape-timeout-seconds", v);
        }
        for (k, v) in &spec.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k:?}: {e}"))?;
            let mut value = HeaderValue::from_str(v.expose()).map_err(|e| format!("header {k:?}: {e}"))?;
            // Sensitive values print as "Sensitive" in any Debug of the request or headers.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .gzip(spec.gzip)
            .user_agent(concat!("goodput/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(spec.timeout)
            .timeout(spec.timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Fetcher { client, headers, spec })
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

    async fn fetch_unbounded(&self) -> Result<Vec<u8>, ScrapeError> {
        let mut req = self.client.get(self.spec.url.clone()).headers(self.headers.clone());
        if let Some(path) = &self.spec.bearer_token_file {
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
            req = req.header(AUTHORIZATION, value);
        }
        let mut resp = req.send().await.map_err(|e| ScrapeError::from_reqwest(&e))?;
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
