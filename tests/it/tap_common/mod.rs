//! Shared pieces of the tap tests: a scripted upstream (a real hyper server on 127.0.0.1
//! that answers with engine-shaped bodies on a controlled schedule and remembers what it
//! received), a raw HTTP/1.1 client that timestamps each frame, and a tap started in
//! process in front of the upstream.
#![allow(dead_code)]

pub mod engines;
pub mod raw;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::PATIENCE;

use bytes::Bytes;
use futures_util::StreamExt;
use goodput::config::{DEFAULT_TAP_MAX_CONNECTIONS, ListenerGuards, TapConfig};
use goodput::inbox::{Inbox, RequestRecord};
use goodput::tap::{Tap, TapStats};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// What the upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// One step of a scripted response body.
#[derive(Debug, Clone)]
pub enum Step {
    Wait(Duration),
    Send(Bytes),
    /// Fail the body: hyper aborts the connection mid-response.
    Fail,
}

/// A scripted response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
    /// Send the response head only after the leading waits (SGLang withholds it until the
    /// first output).
    pub late_head: bool,
}

impl Reply {
    pub fn new(status: u16, content_type: &str, steps: Vec<Step>) -> Reply {
        Reply { status, headers: vec![("content-type".into(), content_type.into())], steps, late_head: false }
    }

    pub fn late_head(mut self) -> Reply {
        self.late_head = true;
        self
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }
}

pub fn send(b: impl Into<Bytes>) -> Step {
    Step::Send(b.into())
}

pub fn wait_ms(ms: u64) -> Step {
    Step::Wait(Duration::from_millis(ms))
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// The scripted upstream.
pub struct Upstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Bodies whose receiver went away before the script ended (the tap closed the
    /// connection because its client did).
    abandoned: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
}

impl Upstream {
    pub async fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let abandoned = Arc::new(AtomicU64::new(0));
        let script: Script = Arc::new(script);
        let connections = Arc::new(AtomicU64::new(0));
        let (s, a, c) = (seen.clone(), abandoned.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                c.fetch_add(1, Ordering::Relaxed);
                let (script, s, a) = (script.clone(), s.clone(), a.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| respond(req, script.clone(), s.clone(), a.clone()));
                    let _ =
                        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        Upstream { addr, seen, abandoned, connections }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn last(&self) -> Seen {
        self.seen().pop().expect("the upstream received a request")
    }

    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }
}

type UpBody = StreamBody<futures_util::stream::BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>>;

async fn respond(
    req: Request<Incoming>,
    script: Script,
    seen: Arc<Mutex<Vec<Seen>>>,
    abandoned: Arc<AtomicU64>,
) -> Result<Response<UpBody>, std::convert::Infallible> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let s = Seen {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map_or("/".into(), |p| p.to_string()),
        headers: parts.headers,
        body,
    };
    let mut reply = script(&s);
    seen.lock().unwrap().push(s);
    if reply.late_head {
        while let Some(Step::Wait(d)) = reply.steps.first() {
            tokio::time::sleep(*d).await;
            reply.steps.remove(0);
        }
    }
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(16);
    tokio::spawn(async move {
        for step in reply.steps {
            match step {
                Step::Wait(d) => tokio::time::sleep(d).await,
                Step::Send(b) => {
                    if tx.send(Ok(Frame::data(b))).await.is_err() {
                        abandoned.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
                Step::Fail => {
                    let _ = tx.send(Err(std::io::Error::other("scripted failure"))).await;
                    return;
                }
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) }).boxed();
    let mut resp = Response::new(StreamBody::new(stream));
    *resp.status_mut() = hyper::StatusCode::from_u16(reply.status).unwrap();
    for (k, v) in reply.headers {
        resp.headers_mut().append(
            hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            hyper::header::HeaderValue::from_str(&v).unwrap(),
        );
    }
    Ok(resp)
}

/// A response as the client received it.
#[derive(Debug)]
pub struct Got {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// Each data frame and when it arrived, measured from when the request was sent.
    pub frames: Vec<(Duration, Bytes)>,
    /// The body failed (the connection broke mid-response).
    pub broken: bool,
}

impl Got {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The headers a client sees, less `date` (it may tick between two requests).
    pub fn end_to_end_headers(&self) -> Vec<(String, String)> {
        let mut h: Vec<(String, String)> = self
            .headers
            .iter()
            .filter(|(k, _)| k.as_str() != "date")
            .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        h.sort();
        h
    }
}

/// A POST of a JSON text.
pub fn post(path: &str, json: &str) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("host", "engine.test")
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-test")
        .body(Full::new(Bytes::from(json.to_string())))
        .unwrap()
}

/// Sends `req` on a new connection to `addr`; reads at most `frames` data frames (all when
/// `None`), then closes the connection.
pub async fn fetch_some<B>(addr: SocketAddr, req: Request<B>, frames: Option<usize>) -> Got
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    let conn = tokio::spawn(conn);
    let start = Instant::now();
    let resp = sender.send_request(req).await.expect("a response");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = resp.into_body();
    let mut got = Got { status, headers, body: Vec::new(), frames: Vec::new(), broken: false };
    while frames.is_none_or(|n| got.frames.len() < n) {
        match body.frame().await {
            None => break,
            Some(Err(_)) => {
                got.broken = true;
                break;
            }
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    got.body.extend_from_slice(&d);
                    got.frames.push((start.elapsed(), d));
                }
            }
        }
    }
    drop(body);
    drop(sender);
    conn.abort();
    got
}

pub async fn fetch<B>(addr: SocketAddr, req: Request<B>) -> Got
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fetch_some(addr, req, None).await
}

/// A tap running in this process in front of an upstream.
pub struct TapUnder {
    pub addr: SocketAddr,
    pub inbox: Inbox,
    pub stats: Arc<TapStats>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl TapUnder {
    pub async fn start(upstream: &str, inject_usage: bool) -> TapUnder {
        let config = TapConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            upstream: url::Url::parse(upstream).unwrap(),
            inject_usage,
            guards: ListenerGuards::with_cap(DEFAULT_TAP_MAX_CONNECTIONS),
        };
        let inbox = Inbox::new(1024);
        let (stop, rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let cap = config.guards.max_connections;
        let Tap { addr, stats, .. } =
            goodput::tap::start("engine", &config, cap, inbox.clone(), rx, &mut tasks).await.unwrap();
        TapUnder { addr, inbox, stats, stop, tasks }
    }

    pub async fn before(upstream: &Upstream) -> TapUnder {
        TapUnder::start(&format!("http://{}", upstream.addr), false).await
    }

    /// Waits up to [`PATIENCE`] for `n` records and returns every record so far.
    pub async fn records(&self, n: usize) -> Vec<RequestRecord> {
        let mut out = Vec::new();
        let began = std::time::Instant::now();
        while began.elapsed() < PATIENCE {
            out.extend(self.inbox.drain());
            if out.len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(out.len() >= n, "expected {n} records, got {out:#?}");
        out
    }

    /// The one record of the one request sent.
    pub async fn record(&self) -> RequestRecord {
        let mut r = self.records(1).await;
        assert_eq!(r.len(), 1, "{r:#?}");
        r.remove(0)
    }

    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

/// `x` is within [lo, hi].
#[track_caller]
pub fn within(what: &str, x: f64, lo: f64, hi: f64) {
    assert!(x >= lo && x <= hi, "{what} = {x:.4} s, expected within [{lo:.4}, {hi:.4}]");
}
