//! The daemon's HTTP/1.1 client connections: scrapes of targets, and the tap's requests to
//! its upstream.
//!
//! Each exchange is driven by the task that asked for it ([`exchange`]): hyper's connection
//! future is polled while the response head is awaited and in every poll of its body,
//! rather than spawned as a task of its own. Between exchanges a connection is kept as its
//! socket ([`idle`]); hyper's buffers and request channel exist for the exchange only.
//!
//! - A scrape keeps no connection task and no buffers for the interval it waits: ≈ 35 KiB
//!   a connection that hyper-util's pool kept (docs/footprint.md, "10 000 targets at
//!   steady state").
//! - A token the tap relays goes from the upstream's socket to the client's in one task's
//!   poll, not through a second task and a channel hand-off between them
//!   (docs/request-path.md#connections).

pub mod exchange;
pub mod idle;

use hyper::header::{HOST, HeaderValue};
use hyper::{Request, Uri};
use tower_service::Service;

pub use exchange::{Driven, Home, SendBody, connection_tokens};
pub use idle::{Idle, Keep, Origin};

/// `req` (its URI absolute) as a server expects it from a client that is not a proxy: the
/// path and query in the request line, the host in `Host` unless the request names one.
pub fn origin_form<B>(req: Request<B>) -> Request<B> {
    let (mut parts, body) = req.into_parts();
    let uri = std::mem::take(&mut parts.uri);
    parts.uri = uri.path_and_query().map_or_else(|| Uri::from_static("/"), |pq| Uri::from(pq.clone()));
    if let Some(host) = uri.authority().and_then(|a| HeaderValue::from_str(a.as_str()).ok()) {
        parts.headers.entry(HOST).or_insert(host);
    }
    Request::from_parts(parts, body)
}

/// Opens a connection to `uri` through `connector` (a tower service, as hyper-util's
/// connectors are).
pub async fn connect<C: Service<Uri> + Clone>(connector: &C, uri: Uri) -> Result<C::Response, C::Error> {
    let mut connector = connector.clone();
    std::future::poll_fn(|cx| connector.poll_ready(cx)).await?;
    connector.call(uri).await
}
