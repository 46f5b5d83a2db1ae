//! The HTTP client scrapes go through: hyper's HTTP/1.1 client connection over TCP, or
//! rustls on ring with the platform's certificate verifier, no proxy; the connections it
//! keeps between scrapes are sockets, and each exchange is driven by the scrape's own task
//! ([`crate::http1`]).
//!
//! One client is shared by every target of a daemon. A client per target kept a pool, a TLS
//! verifier and idle connections per target, most of the per-target memory of an aggregator
//! (docs/footprint.md#b-aggregator). The settings that differ between targets (timeout,
//! headers, credentials) are set per request ([`super::Fetcher`]).
//!
//! It is hyper's connection rather than a pooled client (reqwest, hyper-util's) for what a
//! fleet keeps between scrapes. Those pools keep each idle connection as hyper's task with
//! its buffers: ≈ 84 KiB through reqwest (hyper's adaptive read buffer grows to the largest
//! read a 45 KB scrape fills, and stays), ≈ 35 KiB through hyper-util with the read buffer
//! fixed; a fleet keeps a connection per target, so at 10 000 targets that was 0.35–0.8 GiB
//! waiting for the next scrape (docs/footprint.md, "10 000 targets at steady state"). Here
//! an idle connection is its socket, and a response is read through a buffer of
//! [`READ_BUFFER`] bytes that exists while it is read.

use std::sync::{Arc, Once};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::client::conn::http1::Builder;
use hyper::{Request, Response, Uri};
use hyper_rustls::MaybeHttpsStream;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use rustls_platform_verifier::BuilderVerifierExt;
use tokio::net::TcpStream;

use crate::http1::{Driven, Idle, Keep, Origin, exchange, idle, origin_form};

/// Bytes a connection reads into at a time, and the largest response head (status line and
/// headers) a target may send: a /metrics response's head is a few hundred bytes.
pub const READ_BUFFER: usize = 16 << 10;

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A connection to a target: plain TCP or TLS over it.
type Io = MaybeHttpsStream<TokioIo<TcpStream>>;

/// A response as a scrape reads it.
pub(super) type ScrapeBody = Driven<Io, Empty<Bytes>>;

/// An [`Io`] as it waits for the next scrape: a TLS connection's state (≈ 1.1 KiB) boxed,
/// so that the plain connections of a fleet are not each the size of one.
enum Kept {
    Tcp(TokioIo<TcpStream>),
    Tls(Box<Io>),
}

impl Kept {
    fn of(io: Io) -> Kept {
        match io {
            MaybeHttpsStream::Http(tcp) => Kept::Tcp(tcp),
            tls => Kept::Tls(Box::new(tls)),
        }
    }

    fn into_io(self) -> Io {
        match self {
            Kept::Tcp(tcp) => MaybeHttpsStream::Http(tcp),
            Kept::Tls(tls) => *tls,
        }
    }
}

impl Keep for Kept {
    /// A TLS connection is taken as open: the peer may send TLS records between requests
    /// (session tickets), and one it closed fails its request, which then goes out again on
    /// a new connection ([`HttpClient::send`]).
    fn open(&self) -> bool {
        match self {
            Kept::Tcp(tcp) => idle::tcp_open(tcp.inner()),
            Kept::Tls(_) => true,
        }
    }
}

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

/// The client and its idle connections (module docs). Whether a scrape asks for gzip is
/// the request's, so targets with and without it share connections.
#[derive(Clone)]
pub struct HttpClient {
    connector: Connector,
    http1: Builder,
    idle: Arc<Idle<Kept>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

/// Why a request got no response.
#[derive(Debug)]
pub(super) enum RequestError {
    /// No connection to the target could be opened (refused, no route, DNS, TLS).
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// The connection failed or the response was not HTTP.
    Http(hyper::Error),
    /// The URI names no host to connect to.
    NoOrigin,
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
        let mut http1 = Builder::new();
        http1.read_buf_exact_size(Some(READ_BUFFER));
        // Any number per origin: targets sharing an address each keep their own.
        Ok(HttpClient { connector, http1, idle: Arc::new(Idle::new(usize::MAX)) })
    }

    /// Sends `req` (its URI absolute) on a kept connection to its origin, or a new one, and
    /// returns the response. A request that fails on a kept connection is sent once more on
    /// a new one: the peer may have closed it as the request went out, and a scrape's GET is
    /// safe to repeat.
    pub(super) async fn send(&self, req: Request<Empty<Bytes>>) -> Result<Response<ScrapeBody>, RequestError> {
        let uri = req.uri().clone();
        let origin = Origin::of(&uri).ok_or(RequestError::NoOrigin)?;
        let req = origin_form(req);
        if let Some(kept) = self.idle.take(&origin) {
            let again = copy(&req);
            match exchange::send(&self.http1, kept.into_io(), req, Some(self.home(origin.clone()))).await {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    tracing::debug!(%origin, error = %e, "a kept connection failed; sending the scrape again on a new one")
                }
            }
            return self.send_fresh(uri, again, origin).await;
        }
        self.send_fresh(uri, req, origin).await
    }

    async fn send_fresh(
        &self,
        uri: Uri,
        req: Request<Empty<Bytes>>,
        origin: Origin,
    ) -> Result<Response<ScrapeBody>, RequestError> {
        let io = crate::http1::connect(&self.connector, uri).await.map_err(RequestError::Connect)?;
        exchange::send(&self.http1, io, req, Some(self.home(origin))).await.map_err(RequestError::Http)
    }

    /// Where a connection to `origin` goes after its exchange.
    fn home(&self, origin: Origin) -> crate::http1::Home<Io> {
        let idle = self.idle.clone();
        Box::new(move |io| idle.put(origin, Kept::of(io)))
    }
}

/// A request like `req`, to send again.
fn copy(req: &Request<Empty<Bytes>>) -> Request<Empty<Bytes>> {
    let mut r = Request::new(Empty::new());
    *r.method_mut() = req.method().clone();
    *r.uri_mut() = req.uri().clone();
    *r.version_mut() = req.version();
    *r.headers_mut() = req.headers().clone();
    r
}
