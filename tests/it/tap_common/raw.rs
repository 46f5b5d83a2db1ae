//! An upstream written on raw TCP, for the connection habits hyper's server would not show:
//! closing after every response although the answer said `Keep-Alive` (llama.cpp's
//! llama-server does), breaking off mid-body, closing without an answer, and sending exactly
//! the header bytes it is given (no `Date`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the raw upstream does with each connection.
#[derive(Debug, Clone)]
pub enum Habit {
    /// Answers one request with `response`, then closes the connection after `linger`
    /// without reading anything more, whatever its answer said about keep-alive.
    CloseAfterEach { response: Vec<u8>, linger: Duration },
    /// Answers every request on the connection with `response`, keeping it open.
    KeepAlive { response: Vec<u8> },
    /// Reads the request head, then closes without a byte of answer.
    CloseWithoutAnswer,
    /// Answers with `partial` (a head and part of a body), then closes 20 ms later (a close
    /// in the same instant would reach the tap with the bytes, and hyper's server drops an
    /// answer whose body failed before its head was flushed: the client would see no head).
    BreakMidBody { partial: Vec<u8> },
}

pub struct RawUpstream {
    pub addr: SocketAddr,
    connections: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
    bodies: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl RawUpstream {
    pub async fn start(habit: Habit) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, a, b) = (connections.clone(), answered.clone(), bodies.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                c.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(stream, habit.clone(), a.clone(), b.clone()));
            }
        });
        RawUpstream { addr, connections, answered, bodies }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Requests answered in full so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// The request bodies read whole, in order.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.bodies.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    habit: Habit,
    answered: Arc<AtomicU64>,
    bodies: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let Some(head) = read_head(&mut stream, &mut buf).await else { return };
        if let Habit::CloseWithoutAnswer = habit {
            return;
        }
        let Some(body) = read_body(&head, &mut stream, &mut buf).await else { return };
        match &habit {
            Habit::CloseWithoutAnswer => return,
            Habit::BreakMidBody { partial } => {
                bodies.lock().unwrap().push(body);
                let _ = stream.write_all(partial).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                return;
            }
            Habit::CloseAfterEach { response, linger } => {
                bodies.lock().unwrap().push(body);
                if stream.write_all(response).await.is_ok() {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(*linger).await;
                return;
            }
            Habit::KeepAlive { response } => {
                bodies.lock().unwrap().push(body);
                if stream.write_all(response).await.is_err() {
                    return;
                }
                answered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Reads one request head from `stream` (lowercased), keeping what follows it in `buf`;
/// `None` at the end of the connection.
async fn read_head(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        fill(stream, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    buf.drain(..head_end);
    Some(head)
}

/// Reads the body of the request whose head is `head`: `Content-Length` or chunked.
async fn read_body(head: &str, stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let length = head.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>()));
    if let Some(Ok(n)) = length {
        while buf.len() < n {
            fill(stream, buf).await?;
        }
        return Some(buf.drain(..n).collect());
    }
    if !head.contains("transfer-encoding: chunked") {
        return Some(Vec::new());
    }
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            fill(stream, buf).await?;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&buf[..line_end]).trim(), 16).ok()?;
        buf.drain(..line_end + 2);
        while buf.len() < size + 2 {
            fill(stream, buf).await?;
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
        if size == 0 {
            return Some(body);
        }
    }
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A response: `status` line, `headers` as given (in order, exactly), and `body` with a
/// `Content-Length`, or chunked in one chunk when `chunked`.
pub fn response(headers: &[(&str, &str)], body: &str, chunked: bool) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\n".to_vec();
    for (k, v) in headers {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    if chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        out.extend_from_slice(format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).as_bytes());
    } else {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }
    out
}

/// Sends `request` (raw bytes) on a new connection and reads the response head; returns
/// its header lines as `(lowercase name, value)` in the order they came.
pub async fn head_of(addr: SocketAddr, request: &[u8]) -> (String, Vec<(String, String)>) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        fill(&mut s, &mut buf).await.expect("a response head");
    };
    let text = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers)
}
