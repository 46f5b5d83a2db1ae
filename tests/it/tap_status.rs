//! How each request through the tap ends, against real HTTP servers: in-band errors, client
//! aborts, upstream resets, truncated streams, a dead upstream, HTTP errors, slow and huge
//! requests and responses; and what passes through unmeasured (other routes, compressed and
//! non-SSE bodies), counted by reason. In every case the client gets exactly the upstream's
//! bytes (or, when the upstream is gone, what it would get from a broken connection).

use crate::tap_common;

use std::time::Duration;

use crate::support::PATIENCE;

use bytes::Bytes;
use goodput::request::{Status, TokenCount, Unmeasured};
use http_body_util::{Full, StreamBody};
use hyper::Request;
use hyper::body::Frame;
use tap_common::engines::{self, TIMING, Timing};
use tap_common::{Reply, Seen, TapUnder, Upstream, fetch, fetch_some, post, send, wait_ms, within};

const CHAT: &str = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

fn chunk(content: &str) -> Bytes {
    format!("data: {{\"model\":\"llama\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n").into()
}

fn sse(steps: Vec<tap_common::Step>) -> Reply {
    Reply::new(200, "text/event-stream", steps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_error_event_under_200_is_a_stream_error() {
    let error = r#"data: {"error":{"object":"error","message":"boom","type":"InternalServerError","code":500}}"#;
    let up = Upstream::start(move |_| {
        sse(vec![wait_ms(20), send(chunk("a")), send(format!("{error}\n\n")), send("data: [DONE]\n\n")])
    })
    .await;
    let tap = TapUnder::before(&up).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, [&chunk("a")[..], format!("{error}\n\ndata: [DONE]\n\n").as_bytes()].concat());
    let r = tap.record().await;
    assert_eq!(r.status, Status::StreamError);
    assert!(r.ttft_s.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_leaving_mid_stream_is_an_abort_and_the_upstream_hears_of_it() {
    let up = Upstream::start(|s| engines::vllm(s, Timing { ttft: 50, itl: 60 })).await;
    let tap = TapUnder::before(&up).await;
    let got = fetch_some(tap.addr, post("/v1/chat/completions", CHAT), Some(3)).await;
    assert_eq!(got.frames.len(), 3);
    let r = tap.record().await;
    assert_eq!(r.status, Status::ClientAbort);
    assert!(r.ttft_s.is_some(), "tokens came before the abort");
    let began = std::time::Instant::now();
    while up.abandoned() < 1 && began.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(up.abandoned(), 1, "the tap closed the upstream request, as the client's leaving would have");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_failing_mid_stream_is_a_reset_and_the_client_sees_a_broken_body() {
    let up = Upstream::start(|_| {
        sse(vec![send(chunk("a")), wait_ms(30), send(chunk("b")), wait_ms(30), tap_common::Step::Fail])
    })
    .await;
    let tap = TapUnder::before(&up).await;
    let direct = fetch(up.addr, post("/v1/chat/completions", CHAT)).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert!(direct.broken && got.broken, "through the tap as directly: the body breaks");
    assert_eq!(got.body, direct.body);
    let r = tap.record().await;
    assert_eq!(r.status, Status::UpstreamReset);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 2, exact: false }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_that_ends_without_its_end_marker_is_truncated() {
    let up = Upstream::start(|_| sse(vec![send(chunk("a")), wait_ms(10), send(chunk("b"))])).await;
    let tap = TapUnder::before(&up).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert!(!got.broken);
    assert_eq!(got.body, [chunk("a"), chunk("b")].concat());
    assert_eq!(tap.record().await.status, Status::Truncated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_upstream_is_a_502_and_a_reset() {
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let tap = TapUnder::start(&format!("http://{addr}"), false).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert_eq!(got.status, 502);
    assert!(got.text().contains("cannot reach the upstream"), "{}", got.text());
    let r = tap.record().await;
    assert_eq!((r.status, r.ttft_s), (Status::UpstreamReset, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_http_error_is_recorded_with_its_code() {
    let body = r#"{"object":"error","message":"max_tokens is too large","code":400}"#;
    let up = Upstream::start(move |_| Reply::new(400, "application/json", vec![send(body)])).await;
    let tap = TapUnder::before(&up).await;
    let got = fetch(tap.addr, post("/v1/completions", r#"{"model":"llama","prompt":"x","max_tokens":99999}"#)).await;
    assert_eq!((got.status, got.text().as_str()), (400, body));
    let r = tap.record().await;
    assert_eq!((r.status, r.ttft_s, r.output_tokens), (Status::HttpError(400), None, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_upload_arrives_whole_and_ttft_counts_from_the_request_head() {
    let up = Upstream::start(|s| engines::vllm(s, TIMING)).await;
    let tap = TapUnder::before(&up).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
    let pieces: Vec<Bytes> =
        [&CHAT[..10], &CHAT[10..30], &CHAT[30..]].iter().map(|p| Bytes::from(p.to_string())).collect();
    tokio::spawn(async move {
        for p in pieces {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let _ = tx.send(Ok(Frame::data(p))).await;
        }
    });
    let body =
        StreamBody::new(futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) }));
    let req = Request::post("/v1/chat/completions").header("content-type", "application/json").body(body).unwrap();
    let got = fetch(tap.addr, req).await;
    assert_eq!(got.status, 200);
    assert_eq!(up.last().body, CHAT.as_bytes(), "the upstream got the body as sent");
    let r = tap.record().await;
    assert_eq!((r.status, r.model.as_str()), (Status::Ok, "llama"));
    // The head leaves with the first piece at the latest, 200 ms before the last; the
    // engine answers 150 ms after the last.
    within("ttft", r.ttft_s.unwrap(), 0.2 + 0.15, 0.3 + 0.15 + 0.2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn huge_requests_and_responses_pass_whole_and_are_measured_without_their_bodies() {
    // The engine names the model "served"; the request names it "asked".
    let up = Upstream::start(|s: &Seen| {
        if s.json()["stream"] == true {
            let small = Seen { body: Bytes::from_static(br#"{"model":"served","stream":true}"#), ..s.clone() };
            engines::vllm(&small, Timing { ttft: 5, itl: 1 })
        } else {
            let big = format!(
                r#"{{"model":"served","choices":[{{"text":"{}"}}],"usage":{{"completion_tokens":3}}}}"#,
                "y".repeat(3 << 20)
            );
            Reply::new(200, "application/json", vec![send(big)])
        }
    })
    .await;
    let tap = TapUnder::before(&up).await;
    let prompt = "x".repeat(5 << 20);
    let huge = format!(r#"{{"model":"asked","prompt":"{prompt}","stream":true}}"#);
    let got = fetch(tap.addr, post("/v1/completions", &huge)).await;
    assert_eq!(got.status, 200);
    assert!(up.last().body == huge.as_bytes(), "the 5 MiB request reached the upstream intact");
    let r = tap.record().await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.model, "served", "over the cap the request body is not read: the model comes from the chunks");
    let small = r#"{"model":"asked","prompt":"x","stream":true}"#;
    fetch(tap.addr, post("/v1/completions", small)).await;
    assert_eq!(tap.record().await.model, "asked", "under the cap the request names the model");

    let direct = fetch(up.addr, post("/v1/completions", r#"{"model":"asked","prompt":"x"}"#)).await;
    let got = fetch(tap.addr, post("/v1/completions", r#"{"model":"asked","prompt":"x"}"#)).await;
    assert!(got.body.len() > 3 << 20 && got.body == direct.body, "the 3 MiB response came through intact");
    let r = tap.record().await;
    assert_eq!((r.status, r.output_tokens), (Status::Ok, None), "over the cap the usage is not read");
    assert_eq!(tap.stats.fault_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn other_routes_compressed_and_unknown_bodies_pass_unmeasured_and_counted() {
    let gz: &[u8] = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03not really gzip\x00\xff";
    let up = Upstream::start(move |s: &Seen| match s.path.as_str() {
        "/v1/chat/completions" => {
            Reply::new(200, "text/event-stream", vec![send(Bytes::from_static(gz))]).header("content-encoding", "gzip")
        }
        "/v1/completions" => Reply::new(200, "text/plain", vec![send("plain")]),
        _ => engines::by_path(s, TIMING),
    })
    .await;
    let tap = TapUnder::before(&up).await;
    let get = Request::get("/v1/models").body(Full::new(Bytes::new())).unwrap();
    let models = fetch(tap.addr, get).await;
    assert!(models.text().contains("llama"));
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert_eq!((got.body.as_slice(), got.headers["content-encoding"].to_str().unwrap()), (gz, "gzip"));
    assert_eq!(fetch(tap.addr, post("/v1/completions", "{}")).await.text(), "plain");
    fetch(tap.addr, post("/v1/embeddings", r#"{"input":"x"}"#)).await;
    let s = &tap.stats;
    // Counted as each response ends, which a loaded machine may run a moment after the client
    // has read it: wait for the counts, then check that they are exact.
    let began = std::time::Instant::now();
    while s.unmeasured_count(Unmeasured::Route) < 2
        || s.unmeasured_count(Unmeasured::ContentEncoding) < 1
        || s.unmeasured_count(Unmeasured::ContentType) < 1
    {
        assert!(began.elapsed() < PATIENCE, "the unmeasured requests not counted within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(tap.inbox.drain().is_empty(), "nothing measured");
    assert_eq!(s.unmeasured_count(Unmeasured::Route), 2);
    assert_eq!(s.unmeasured_count(Unmeasured::ContentEncoding), 1);
    assert_eq!(s.unmeasured_count(Unmeasured::ContentType), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreadable_event_is_a_fault_and_the_request_is_still_served() {
    let up =
        Upstream::start(|_| sse(vec![send("data: {not json\n\n"), send(chunk("a")), send("data: [DONE]\n\n")])).await;
    let tap = TapUnder::before(&up).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert!(got.text().starts_with("data: {not json\n\n"));
    let r = tap.record().await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(tap.stats.fault_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn inject_usage_makes_n_exact_and_the_client_sees_what_it_would_have() {
    let up = Upstream::start(|s| engines::vllm(s, Timing { ttft: 5, itl: 2 })).await;
    let tap = TapUnder::start(&format!("http://{}", up.addr), true).await;
    for path in ["/v1/chat/completions", "/v1/completions"] {
        let json = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}],"prompt":"hi","stream":true}"#;
        let direct = fetch(up.addr, post(path, json)).await;
        assert!(!direct.text().contains(r#""usage""#));
        let got = fetch(tap.addr, post(path, json)).await;
        assert_eq!(got.text(), direct.text(), "{path}: the injected usage event was removed");
        let seen = up.last();
        assert_eq!(seen.json()["stream_options"]["include_usage"], true, "{path}: injected");
        assert_eq!(seen.headers["content-length"].to_str().unwrap(), seen.body.len().to_string());
        let r = tap.record().await;
        assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: true }), "{path}");
        assert_eq!(r.prompt_tokens, Some(7));
    }
    // A client that asks for usage gets it, and its request is forwarded untouched.
    let asked = r#"{"model":"llama","prompt":"hi","stream":true,"stream_options":{"include_usage":true}}"#;
    let got = fetch(tap.addr, post("/v1/completions", asked)).await;
    assert!(got.text().contains(r#""choices":[],"#), "{}", got.text());
    assert_eq!(up.last().body, asked.as_bytes());
    assert_eq!(tap.record().await.output_tokens, Some(TokenCount { value: 6, exact: true }));
    // Non-streaming requests are left alone.
    let plain = r#"{"model":"llama","prompt":"hi"}"#;
    fetch(tap.addr, post("/v1/completions", plain)).await;
    assert_eq!(up.last().body, plain.as_bytes());
    assert_eq!(tap.record().await.output_tokens, Some(TokenCount { value: 6, exact: true }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expect_100_continue_is_answered_and_the_body_forwarded() {
    let up = Upstream::start(|s| engines::vllm(s, Timing { ttft: 5, itl: 1 })).await;
    let tap = TapUnder::before(&up).await;
    let mut req = post("/v1/chat/completions", CHAT);
    req.headers_mut().insert("expect", "100-continue".parse().unwrap());
    let got = fetch(tap.addr, req).await;
    assert_eq!(got.status, 200);
    assert!(got.text().ends_with("data: [DONE]\n\n"));
    assert_eq!(up.last().body, CHAT.as_bytes());
    assert_eq!(tap.record().await.status, Status::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_websocket_style_upgrade_is_relayed_as_bytes_and_counted() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An upstream that switches to an echo protocol on request.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let svc = hyper::service::service_fn(|mut req: Request<hyper::body::Incoming>| async move {
            let on = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let mut io = hyper_util::rt::TokioIo::new(on.await.unwrap());
                let mut buf = [0u8; 64];
                while let Ok(n @ 1..) = io.read(&mut buf).await {
                    let _ = io.write_all(&buf[..n]).await;
                }
            });
            let resp = hyper::Response::builder()
                .status(101)
                .header("connection", "upgrade")
                .header("upgrade", "echo")
                .body(Full::new(Bytes::new()))
                .unwrap();
            Ok::<_, std::convert::Infallible>(resp)
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
            .with_upgrades()
            .await;
    });
    let tap = TapUnder::start(&format!("http://{up}"), false).await;
    let mut c = tokio::net::TcpStream::connect(tap.addr).await.unwrap();
    c.write_all(b"GET /v1/realtime HTTP/1.1\r\nHost: engine\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        assert_eq!(c.read(&mut b).await.unwrap(), 1, "the tap closed before the 101");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head).to_lowercase();
    assert!(head.starts_with("http/1.1 101") && head.contains("upgrade: echo"), "{head}");
    c.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    c.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"ping");
    assert_eq!(tap.stats.unmeasured_count(Unmeasured::Upgrade), 1);
    assert!(tap.inbox.drain().is_empty());
}
