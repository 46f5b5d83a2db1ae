//! The tap's upstream connections ([`Upstream`]), each counting the responses it carried
//! and the bytes read since its request in flight went out, so that a request that failed
//! on a connection kept from an earlier request, before any byte of an answer, can be told
//! from every other failure (docs/request-path.md#connections). Only that one may be sent
//! again: the peer closing an idle keep-alive connection just as the next request goes out
//! is a race of the connection, not an answer about the request.
//!
//! Each exchange runs in the task of the client connection it serves ([`crate::http1`]):
//! a token goes from the upstream's socket to the client's in one poll of that task.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use hyper::client::conn::http1::Builder;
use hyper::{Request, Response, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::http1::{Driven, Home, Idle, Keep, Origin, SendBody, exchange, idle, origin_form};

/// The tap's connections to its upstream: new ones through [`Connector`], idle ones kept as
/// sockets, at most as many as the tap has client connections (each counts against the
/// tap's descriptors).
pub(super) struct Upstream {
    connector: Connector,
    http1: Builder,
    idle: Arc<Idle<Conn>>,
    origin: Origin,
}

/// Why an upstream request got no answer.
#[derive(Debug)]
pub(super) struct Failed {
    pub error: UpstreamError,
    /// It went out on a connection kept from an earlier request and no byte of an answer
    /// came back: what makes it safe to send again.
    pub reused_unanswered: bool,
}

#[derive(Debug, thiserror::Error)]
pub(super) enum UpstreamError {
    #[error("cannot connect: {}", crate::redact::error_chain(.0.as_ref()))]
    Connect(Box<dyn std::error::Error + Send + Sync>),
    #[error("{}", crate::redact::error_chain(.0))]
    Http(hyper::Error),
}

impl Upstream {
    pub fn new(connector: Connector, origin: Origin, max_idle: usize) -> Upstream {
        Upstream { connector, http1: Builder::new(), idle: Arc::new(Idle::new(max_idle)), origin }
    }

    /// Sends `req` (its URI absolute) on a kept connection if there is one, else on a new
    /// one. A request that may switch protocols always goes on a new one, which is not kept.
    pub async fn send<B: SendBody>(&self, req: Request<B>, upgrade: bool) -> Result<Response<Driven<Conn, B>>, Failed> {
        let kept = if upgrade { None } else { self.idle.take(&self.origin) };
        let Some(conn) = kept else { return self.send_fresh(req, upgrade).await };
        let uses = conn.inner().uses.clone();
        // What the earlier response left read is no answer to this request, which may find
        // the connection closed before a byte of it is written.
        uses.new_request();
        match exchange::send(&self.http1, conn, origin_form(req), Some(self.home())).await {
            Ok(resp) => {
                uses.answered();
                Ok(resp)
            }
            Err(e) => Err(Failed { reused_unanswered: uses.reused_unanswered(), error: UpstreamError::Http(e) }),
        }
    }

    /// Sends `req` (its URI absolute) on a new connection.
    pub async fn send_fresh<B: SendBody>(
        &self,
        req: Request<B>,
        upgrade: bool,
    ) -> Result<Response<Driven<Conn, B>>, Failed> {
        let failed = |error| Failed { error, reused_unanswered: false };
        let conn = crate::http1::connect(&self.connector, req.uri().clone())
            .await
            .map_err(|e| failed(UpstreamError::Connect(Box::new(e))))?;
        let uses = conn.inner().uses.clone();
        let req = origin_form(req);
        let sent = if upgrade {
            exchange::send_upgrade(&self.http1, conn, req).await
        } else {
            exchange::send(&self.http1, conn, req, Some(self.home())).await
        };
        let resp = sent.map_err(|e| failed(UpstreamError::Http(e)))?;
        uses.answered();
        Ok(resp)
    }

    /// Where a connection goes after its exchange.
    fn home(&self) -> Home<Conn> {
        let (idle, origin) = (self.idle.clone(), self.origin.clone());
        Box::new(move |conn| idle.put(origin, conn))
    }
}

impl Keep for Conn {
    fn open(&self) -> bool {
        idle::tcp_open(&self.inner().tcp)
    }
}

/// What one connection carried so far; rides in the connection's metadata.
#[derive(Debug, Clone, Default)]
pub(super) struct Uses(Arc<UseCounts>);

#[derive(Debug, Default)]
struct UseCounts {
    /// Responses that came back on it.
    answered: AtomicU64,
    /// Bytes read since the request in flight began to go out. HTTP/1.1 without pipelining
    /// (hyper's client) writes a request only once the previous answer was read whole, so a
    /// write after a read starts the next request.
    read_since_request: AtomicU64,
}

impl Uses {
    /// Whether an earlier response came back on the connection and no byte of an answer to
    /// the request that failed arrived on it: what makes that request safe to send again.
    fn reused_unanswered(&self) -> bool {
        self.0.answered.load(Ordering::Relaxed) > 0 && self.0.read_since_request.load(Ordering::Relaxed) == 0
    }

    /// A request is about to go out on the connection: nothing read so far answers it.
    fn new_request(&self) {
        self.0.read_since_request.store(0, Ordering::Relaxed);
    }

    /// Counts a response that came back on the connection.
    fn answered(&self) {
        self.0.answered.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`HttpConnector`] whose connections carry a [`Uses`].
#[derive(Clone)]
pub(super) struct Connector(pub HttpConnector);

/// One upstream connection.
pub(super) type Conn = TokioIo<Counted>;

/// A TCP stream that keeps its connection's [`Uses`] up to date.
pub(super) struct Counted {
    tcp: TcpStream,
    uses: Uses,
    /// The last thing done was a read: the next write starts a request.
    reading: bool,
}

impl tower_service::Service<Uri> for Connector {
    type Response = Conn;
    type Error = <HttpConnector as tower_service::Service<Uri>>::Error;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Conn, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connecting = self.0.call(dst);
        Box::pin(async move {
            let tcp = connecting.await?.into_inner();
            Ok(TokioIo::new(Counted { tcp, uses: Uses::default(), reading: true }))
        })
    }
}

impl AsyncRead for Counted {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.tcp).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            this.reading = true;
            this.uses.0.read_since_request.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl Counted {
    fn writing(&mut self) {
        if std::mem::take(&mut self.reading) {
            self.uses.0.read_since_request.store(0, Ordering::Relaxed);
        }
    }
}

impl AsyncWrite for Counted {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.writing();
        Pin::new(&mut this.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.writing();
        Pin::new(&mut this.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept connection can find itself closed by the upstream before a byte of the next
    /// request is written (hyper reads the close first): the bytes of the earlier response
    /// must not make that request look answered, or it would get a 502 instead of going out
    /// again.
    #[test]
    fn bytes_read_before_a_request_went_out_are_no_answer_to_it() {
        let uses = Uses::default();
        uses.answered();
        uses.0.read_since_request.store(4096, Ordering::Relaxed);
        assert!(!uses.reused_unanswered(), "bytes read since the request went out are an answer");
        uses.new_request();
        assert!(uses.reused_unanswered(), "the earlier response's bytes are not");
        uses.0.read_since_request.fetch_add(1, Ordering::Relaxed);
        assert!(!uses.reused_unanswered(), "one byte read after it is");
    }
}
