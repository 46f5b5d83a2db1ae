//! The tap's upstream connections, each counting the responses it carried and the bytes read
//! since its request in flight went out, so that a request that failed on a connection the
//! pool reused, before any byte of an answer, can be told from every other failure
//! (docs/request-path.md#connections). Only that one may be sent again: the peer closing an
//! idle keep-alive connection just as the next request goes out is a race of the
//! connection, not an answer about the request.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use hyper::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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
    /// Whether the connection of `connected` is one the pool reused (an earlier response
    /// came back on it) and no byte of an answer to the request that failed arrived on it:
    /// what makes that request safe to send again. `false` for a connection that is not one
    /// of [`Connector`]'s.
    pub fn reused_unanswered(connected: &Connected) -> bool {
        let mut ext = hyper::http::Extensions::new();
        connected.get_extras(&mut ext);
        ext.get::<Uses>().is_some_and(|u| {
            u.0.answered.load(Ordering::Relaxed) > 0 && u.0.read_since_request.load(Ordering::Relaxed) == 0
        })
    }

    /// Counts a response on the connection it came over (its extensions carry the
    /// connection's metadata).
    pub fn count_response(ext: &hyper::http::Extensions) {
        if let Some(u) = ext.get::<Uses>() {
            u.0.answered.fetch_add(1, Ordering::Relaxed);
        }
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

impl Connection for Counted {
    fn connected(&self) -> Connected {
        self.tcp.connected().extra(self.uses.clone())
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
