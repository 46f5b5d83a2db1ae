//! Connections kept between exchanges, as bare sockets.
//!
//! A kept-alive connection can wait a long time for its next request: a scrape's a whole
//! interval, and a fleet keeps one per target. Kept the way hyper-util's pool keeps one
//! (hyper's connection task with its read buffer, an 8 KiB write buffer and an 8.5 KiB
//! request channel) it held ≈ 35 KiB for that wait, 0.35 GiB at 10 000 targets with an
//! address each (docs/footprint.md, "10 000 targets at steady state"). Here it waits as
//! what its owner keeps of it (a [`Keep`]: the socket); the HTTP state is made for each
//! exchange and gone after it ([`super::exchange`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::Uri;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;

/// How long an idle connection is kept for the next request: longer than any sensible
/// scrape interval, as Go's HTTP client (Prometheus) keeps one for 90 s. An upstream may
/// close one sooner (uvicorn, under vLLM and SGLang, after 5 s idle): a connection closed
/// is not used again, and a request that went out as it closed is sent again on a new one
/// by its client.
pub const IDLE_FOR: Duration = Duration::from_secs(90);

/// How often the connections of origins no request went to lately are looked over.
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// What a client keeps of an idle connection.
pub trait Keep: Send + 'static {
    /// Whether the connection can still carry a request, as far as can be told without
    /// sending one.
    fn open(&self) -> bool;
}

/// Whether an idle TCP connection is still open: nothing to read on it, neither the peer's
/// close nor bytes no request asked for.
pub fn tcp_open(tcp: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    matches!(tcp.poll_peek(&mut Context::from_waker(Waker::noop()), &mut buf), Poll::Pending)
}

/// Where a connection goes: scheme and authority, as `https://host:port`. Connections are
/// shared by every request to the same origin, whatever their headers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin(String);

impl Origin {
    /// The origin of an absolute URI; `None` for one without a scheme or host.
    pub fn of(uri: &Uri) -> Option<Origin> {
        let (scheme, authority) = (uri.scheme_str()?, uri.authority()?);
        Some(Origin(format!("{scheme}://{authority}")))
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The idle connections of one client, newest last per origin.
#[derive(Debug)]
pub struct Idle<K> {
    inner: Mutex<Inner<K>>,
    /// The most kept per origin; a connection put beyond it is closed.
    max_per_origin: usize,
}

#[derive(Debug)]
struct Inner<K> {
    by_origin: HashMap<Origin, Vec<(Instant, K)>>,
    swept: Option<Instant>,
}

impl<K: Keep> Idle<K> {
    pub fn new(max_per_origin: usize) -> Idle<K> {
        Idle { inner: Mutex::new(Inner { by_origin: HashMap::new(), swept: None }), max_per_origin }
    }

    /// The connection to `origin` idle the shortest time that is still open, if any; those
    /// kept past [`IDLE_FOR`] or no longer open are dropped on the way.
    pub fn take(&self, origin: &Origin) -> Option<K> {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let list = inner.by_origin.get_mut(origin)?;
        let mut found = None;
        while let Some((at, kept)) = list.pop() {
            if now.duration_since(at) < IDLE_FOR && kept.open() {
                found = Some(kept);
                break;
            }
        }
        if list.is_empty() {
            inner.by_origin.remove(origin);
        }
        found
    }

    /// Keeps `kept` for the next request to `origin`.
    pub fn put(&self, origin: Origin, kept: K) {
        let now = Instant::now();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let list = inner.by_origin.entry(origin).or_default();
        if list.len() >= self.max_per_origin {
            return;
        }
        list.push((now, kept));
        if inner.swept.is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY) {
            inner.swept = Some(now);
            inner.by_origin.retain(|_, list| {
                list.retain(|(at, _)| now.duration_since(*at) < IDLE_FOR);
                !list.is_empty()
            });
        }
    }

    /// Connections kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).by_origin.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    struct Tcp(TcpStream);

    impl Keep for Tcp {
        fn open(&self) -> bool {
            tcp_open(&self.0)
        }
    }

    async fn pair() -> (Tcp, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (Tcp(client), server)
    }

    fn origin(s: &str) -> Origin {
        Origin::of(&s.parse().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_or_wrote_to_is_not_taken() {
        let idle = Idle::new(8);
        let a = origin("http://127.0.0.1:1");
        let (open_io, _server_open) = pair().await;
        let (closed_io, server_closed) = pair().await;
        let (chatty_io, mut server_chatty) = pair().await;
        drop(server_closed);
        server_chatty.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        idle.put(a.clone(), open_io);
        idle.put(a.clone(), closed_io);
        idle.put(a.clone(), chatty_io);
        assert!(idle.take(&origin("http://127.0.0.1:2")).is_none(), "another origin has none");
        assert!(idle.take(&a).is_some(), "the open one is found under the two that are not");
        assert_eq!(idle.len(), 0, "the closed and the chatty one were dropped on the way");
        assert!(idle.take(&a).is_none());
    }

    #[tokio::test]
    async fn a_connection_idle_past_its_time_is_dropped() {
        let idle = Idle::new(8);
        let (a, b) = (origin("http://127.0.0.1:1"), origin("https://127.0.0.1:1"));
        assert_ne!(a, b, "the scheme is part of the origin");
        let (io_a, _sa) = pair().await;
        let (io_b, _sb) = pair().await;
        idle.put(a.clone(), io_a);
        idle.put(b.clone(), io_b);
        // Look at the kept connections as if IDLE_FOR had passed.
        {
            let mut inner = idle.inner.lock().unwrap();
            for list in inner.by_origin.values_mut() {
                for (at, _) in list.iter_mut() {
                    *at -= IDLE_FOR;
                }
            }
            inner.swept = Some(Instant::now() - SWEEP_EVERY);
        }
        assert!(idle.take(&a).is_none(), "too old to be taken");
        let (io_c, _sc) = pair().await;
        idle.put(a.clone(), io_c);
        assert_eq!(idle.len(), 1, "the sweep dropped the other origin's old one, not the new one");
        assert!(idle.take(&a).is_some());
    }

    #[tokio::test]
    async fn no_more_are_kept_per_origin_than_the_cap() {
        let idle = Idle::new(2);
        let a = origin("http://127.0.0.1:1");
        let mut servers = Vec::new();
        for _ in 0..3 {
            let (io, server) = pair().await;
            servers.push(server);
            idle.put(a.clone(), io);
        }
        assert_eq!(idle.len(), 2, "the third was closed, not kept");
    }
}
