//! One request and its response on one connection, driven by the task that asked for it.
//!
//! hyper's HTTP/1 connection is a future that does the reading and writing; the response
//! head and body come out of it through channels. Rather than spawn it as a task of its
//! own for as long as the connection lives (what hyper-util's pool does), the asking task
//! polls it: while waiting for the head, and in every poll of the body ([`Driven`]). When
//! the body has been read to its end on a connection the server keeps open, the socket is
//! taken back out of it and handed to its [`Home`] (a pool of idle connections,
//! [`super::idle`]); hyper's buffers go with the connection future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{Builder, Parts, SendRequest};
use hyper::header::{CONNECTION, HeaderMap};
use hyper::{Request, Response, Version};

/// Where a connection's socket goes after an exchange that leaves it open.
pub type Home<T> = Box<dyn FnOnce(T) + Send>;

type Driving<T> = Pin<Box<dyn Future<Output = hyper::Result<Parts<T>>> + Send>>;

/// A connection's socket: what hyper reads and writes.
pub trait Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static {}

impl<T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static> Io for T {}

/// A request's body, as hyper's client connection sends it.
pub trait SendBody: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static {}

impl<B> SendBody for B where
    B: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// hyper's connection future as an exchange sees it.
enum Conn<T> {
    Running(Driving<T>),
    /// The socket and unread bytes, or `None` when the connection failed.
    Ended(Option<Box<Parts<T>>>),
    /// Running as a task of its own ([`send_upgrade`]).
    Elsewhere,
}

impl<T> Conn<T> {
    /// Lets the connection read and write what it can.
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Conn::Running(f) = self
            && let Poll::Ready(r) = f.as_mut().poll(cx)
        {
            *self = Conn::Ended(r.ok().map(Box::new));
        }
    }
}

/// Sends `req` (in origin form: [`super::origin_form`]) on `io` and returns the response,
/// whose body drives the connection; `home` gets the socket once the body has been read to
/// its end, if the server keeps the connection open. An error is the connection's: it
/// failed, or the answer is not HTTP.
pub async fn send<T: Io, B: SendBody>(
    builder: &Builder,
    io: T,
    req: Request<B>,
    home: Option<Home<T>>,
) -> hyper::Result<Response<Driven<T, B>>> {
    let (mut tx, conn) = builder.handshake(io).await?;
    let mut conn = Conn::Running(Box::pin(conn.without_shutdown()));
    // A fresh connection takes its first request without waiting to be ready.
    let mut sending = std::pin::pin!(tx.send_request(req));
    let resp = std::future::poll_fn(|cx| {
        conn.drive(cx);
        sending.as_mut().poll(cx)
    })
    .await?;
    let home = home.filter(|_| keeps_alive(&resp));
    Ok(resp.map(|incoming| Driven { incoming, conn, tx: Some(tx), home }))
}

/// [`send`] for a request that may switch protocols: the connection runs as a task of its
/// own, so that a `101` hands its socket to `hyper::upgrade::on`; it is not kept after.
pub async fn send_upgrade<T: Io, B: SendBody>(
    builder: &Builder,
    io: T,
    req: Request<B>,
) -> hyper::Result<Response<Driven<T, B>>> {
    let (mut tx, conn) = builder.handshake(io).await?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let resp = tx.send_request(req).await?;
    Ok(resp.map(|incoming| Driven { incoming, conn: Conn::Elsewhere, tx: Some(tx), home: None }))
}

/// The tokens of a message's `Connection` headers (RFC 9110 §7.6.1), trimmed: `close`,
/// `keep-alive`, `upgrade`, and the names of hop-by-hop headers.
pub fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers.get_all(CONNECTION).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).map(str::trim)
}

/// Whether the server lets the connection carry another request after this response.
fn keeps_alive<B>(resp: &Response<B>) -> bool {
    let has = |token: &str| connection_tokens(resp.headers()).any(|t| t.eq_ignore_ascii_case(token));
    match resp.version() {
        Version::HTTP_11 => !has("close"),
        Version::HTTP_10 => has("keep-alive"),
        _ => false,
    }
}

/// A response body that drives its connection as it is read, and sends the socket home
/// after its last frame. Dropped before that, it closes the connection.
pub struct Driven<T, B> {
    incoming: Incoming,
    conn: Conn<T>,
    /// Kept until the body is done: dropping it tells the connection no request follows.
    tx: Option<SendRequest<B>>,
    home: Option<Home<T>>,
}

impl<T, B> Driven<T, B> {
    /// The body has been read: with no request to come, the connection ends without I/O,
    /// and its socket goes home unless the server sent more than the response.
    fn go_home(&mut self, cx: &mut Context<'_>) {
        let Some(home) = self.home.take() else { return };
        self.tx = None;
        self.conn.drive(cx);
        if let Conn::Ended(Some(parts)) = std::mem::replace(&mut self.conn, Conn::Ended(None))
            && parts.read_buf.is_empty()
        {
            home(parts.io);
        }
    }
}

impl<T, B> Body for Driven<T, B> {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        this.conn.drive(cx);
        let polled = Pin::new(&mut this.incoming).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            // A body of known length ends with its last frame; its reader may not poll again.
            Poll::Ready(Some(Ok(_))) => this.incoming.is_end_stream(),
            _ => false,
        };
        if ended {
            this.go_home(cx);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
