//! The HTTP client scrapes go through: hyper's HTTP/1.1 client and connection pool
//! (hyper-util), rustls on ring with the platform's certificate verifier, no proxy.
//!
//! One client is shared by every target of a daemon. A client per target kept a pool, a TLS
//! verifier and idle connections per target, most of the per-target memory of an aggregator
//! (docs/footprint.md#b-aggregator). The settings that differ between targets (timeout,
//! headers, credentials) are set per request ([`super::Fetcher`]).
//!
//! It is hyper rather than reqwest for one setting reqwest does not expose: the size of a
//! connection's read buffer. hyper's adaptive buffer grows to the largest read a body fills
//! (≈ 64 KiB for a 45 KB scrape) and a kept-alive connection holds it until it closes; a
//! fleet keeps a connection per target between scrapes, so at 10 000 targets that was about
//! 0.5 GiB of buffers waiting for the next scrape (docs/footprint.md, "10 000 targets at
//! steady state"). Every connection here reads through a buffer of [`READ_BUFFER`] bytes:
//! a larger body is read in more pieces.

use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls_platform_verifier::BuilderVerifierExt;

/// Bytes a connection reads into at a time, and the largest response head (status line and
/// headers) a target may send: a /metrics response's head is a few hundred bytes.
pub const READ_BUFFER: usize = 16 << 10;

/// How long an idle connection is kept for the next scrape: longer than any sensible scrape
/// interval, as Go's HTTP client (Prometheus) keeps one for 90 s.
const POOL_IDLE: Duration = Duration::from_secs(90);

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;
/// The pooled client requests go through; a scrape sends no body.
pub(super) type Pool = Client<Connector, Empty<Bytes>>;

/// Installs the ring crypto provider for rustls once per process. Nothing in the build
/// brings a default provider, so that aws-lc-sys (a slow C build) stays out of the tree;
/// the other HTTP clients of the process (alert delivery, `goodput against`) rely on it.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider is already installed, which serves just as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Why a target's HTTP client or request settings cannot be built: the target is not
/// scraped, and the message says so in the log and in `goodput check`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The TLS setup failed (the platform's certificate store cannot be read, say): every
    /// target sharing the client reports it.
    #[error("cannot build the HTTP client's TLS setup: {0}")]
    Build(rustls::Error),
    /// A configured header's name or value is not valid HTTP.
    #[error("header {name:?}: {why}")]
    Header { name: String, why: String },
}

/// The client and its pool of connections (module docs). Whether a scrape asks for gzip is
/// the request's, so targets with and without it share one pool.
#[derive(Debug, Clone)]
pub struct HttpClient {
    pub(super) pool: Pool,
}

impl HttpClient {
    pub fn new() -> Result<HttpClient, ClientError> {
        install_crypto_provider();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // ALPN (http/1.1) is set by the connector builder.
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_platform_verifier())
            .map_err(ClientError::Build)?
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        // The scheme is checked by the https connector wrapped around it.
        http.enforce_http(false);
        http.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let pool = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .http1_read_buf_exact_size(READ_BUFFER)
            .build(connector);
        Ok(HttpClient { pool })
    }
}
