//! One request and its response on one connection, driven by the scrape's own task.
//!
//! hyper's HTTP/1 connection is a future that does the reading and writing; the response
//! head and body come out of it through channels. Rather than spawn it as a task of its
//! own for as long as the connection lives (what hyper-util's pool does), the scrape polls
//! it: while waiting for the head, and in every poll of the body ([`ScrapeBody`]). When the
//! body has been read to its end, [`ScrapeBody::finish`] takes the socket back out of it
//! for the next scrape ([`super::idle`]), and hyper's buffers go with the connection future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http_body_util::Empty;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{Builder, Parts, SendRequest};
use hyper::header::{CONNECTION, HeaderValue};
use hyper::{Request, Response, Version};

use super::idle::{Idle, Io, Origin};

type Driving = Pin<Box<dyn Future<Output = hyper::Result<Parts<Io>>> + Send>>;

/// hyper's connection future until it ends, then what it left.
enum Conn {
    Running(Driving),
    /// The socket and unread bytes, or `None` when the connection failed.
    Ended(Option<Box<Parts<Io>>>),
}

impl Conn {
    /// Lets the connection read and write what it can.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Conn::Running(f) = self
            && let Poll::Ready(r) = f.as_mut().poll(cx)
        {
            *self = Conn::Ended(r.ok().map(Box::new));
        }
    }
}

/// Sends `req` on `io` and returns the response, its body driving the connection.
pub(super) async fn send(
    builder: &Builder,
    io: Io,
    req: Request<Empty<Bytes>>,
    origin: Origin,
    idle: Arc<Idle>,
) -> hyper::Result<Response<ScrapeBody>> {
    let (mut tx, conn) = builder.handshake(io).await?;
    let mut conn = Conn::Running(Box::pin(conn.without_shutdown()));
    // A fresh connection takes its first request without waiting to be ready.
    let mut sending = std::pin::pin!(tx.send_request(req));
    let resp = std::future::poll_fn(|cx| {
        conn.drive(cx);
        sending.as_mut().poll(cx)
    })
    .await?;
    let keep_alive = keeps_alive(&resp);
    Ok(resp.map(|incoming| ScrapeBody { incoming, conn, tx, ended: false, keep_alive, origin, idle }))
}

/// Whether the server lets the connection carry another request after this response.
fn keeps_alive<B>(resp: &Response<B>) -> bool {
    let has = |token: &str| {
        resp.headers()
            .get_all(CONNECTION)
            .iter()
            .filter_map(|v: &HeaderValue| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    match resp.version() {
        Version::HTTP_11 => !has("close"),
        Version::HTTP_10 => has("keep-alive"),
        _ => false,
    }
}

/// A response body that drives its connection as it is read.
pub(super) struct ScrapeBody {
    incoming: Incoming,
    conn: Conn,
    /// Kept until the body is done: dropping it tells the connection no request follows.
    tx: SendRequest<Empty<Bytes>>,
    /// The body was read to its end.
    ended: bool,
    keep_alive: bool,
    origin: Origin,
    idle: Arc<Idle>,
}

impl ScrapeBody {
    /// After the body was read to its end: the connection's socket goes back to the pool,
    /// unless the server closes it or sent more than the response. A body dropped
    /// unfinished closes its connection instead.
    pub fn finish(self) {
        let ScrapeBody { mut conn, tx, ended, keep_alive, origin, idle, .. } = self;
        if !keep_alive || !ended {
            return;
        }
        // With no request to come, the connection ends at the next poll, without I/O.
        drop(tx);
        conn.drive(&mut Context::from_waker(Waker::noop()));
        if let Conn::Ended(Some(parts)) = conn
            && parts.read_buf.is_empty()
        {
            idle.put(origin, parts.io);
        }
    }
}

impl Body for ScrapeBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        this.conn.drive(cx);
        let polled = Pin::new(&mut this.incoming).poll_frame(cx);
        this.ended |= matches!(polled, Poll::Ready(None));
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
