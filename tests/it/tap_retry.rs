//! The tap against upstreams with real servers' connection habits: one that closes after
//! every response although it answered `Keep-Alive` (llama.cpp's llama-server does), one
//! that closes without answering, one that breaks off mid-body. A request whose reused
//! connection failed before any answer is sent again on a fresh connection, once, and
//! counted; nothing is sent again once a byte of the answer went to the client; a failed
//! request keeps the model its body names; and the tap adds no header of its own.

use crate::tap_common;

use std::time::Duration;

use bytes::Bytes;
use goodput::request::Status;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use tap_common::raw::{Habit, RawUpstream, head_of, response};
use tap_common::{TapUnder, fetch, post};
use tokio::net::TcpStream;

const CHAT: &str = r#"{"model":"m1","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

/// A short chat stream, as llama-server answers it: chunked, `Keep-Alive` but no
/// `Connection` header, no `Date`.
fn llama_stream() -> Vec<u8> {
    let body = concat!(
        "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"id\":\"chatcmpl-1\",\"model\":\"m1\",\"object\":\"chat.completion.chunk\"}\n\n",
        "data: {\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"delta\":{}}],\"id\":\"chatcmpl-1\",\"model\":\"m1\",\"object\":\"chat.completion.chunk\",\"timings\":{\"prompt_n\":2,\"prompt_ms\":1.5,\"predicted_n\":1,\"predicted_ms\":0.5}}\n\n",
        "data: [DONE]\n\n",
    );
    let headers = [
        ("Server", "llama.cpp"),
        ("X-Accel-Buffering", "no"),
        ("Content-Type", "text/event-stream"),
        ("Keep-Alive", "timeout=5, max=100"),
    ];
    response(&headers, body, true)
}

/// Sends `n` requests back to back on one keep-alive connection to the tap; returns how
/// many were answered 200 with the whole stream.
async fn back_to_back(tap: &TapUnder, n: usize) -> (usize, Vec<String>) {
    let stream = TcpStream::connect(tap.addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let (mut ok, mut failures) = (0, Vec::new());
    for i in 0..n {
        sender.ready().await.expect("the tap keeps the client's connection open");
        let resp = sender.send_request(post("/v1/chat/completions", CHAT)).await.expect("an answer");
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        if status == 200 && text.ends_with("data: [DONE]\n\n") {
            ok += 1;
        } else {
            failures.push(format!("request {i}: {status} {text}"));
        }
    }
    (ok, failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upstream_that_closes_after_every_response_fails_no_request() {
    // The upstream lingers 2 ms before closing, so that the tap has reused the pooled
    // connection for the next request by then: the race that made llama-server's clients
    // see 502s, made certain.
    for linger in [Duration::from_millis(2), Duration::ZERO] {
        let up = RawUpstream::start(Habit::CloseAfterEach { response: llama_stream(), linger }).await;
        let tap = TapUnder::start(&format!("http://{}", up.addr), false).await;
        let (ok, failures) = back_to_back(&tap, 200).await;
        assert_eq!((ok, failures.len()), (200, 0), "linger {linger:?}: {failures:#?}");
        assert_eq!(up.answered(), 200, "each request was answered once: none twice");
        let records = tap.records(200).await;
        assert_eq!(records.len(), 200);
        assert!(records.iter().all(|r| r.status == Status::Ok && r.model == "m1"), "{records:#?}");
        let retried = tap.stats.retry_count();
        if linger > Duration::ZERO {
            assert!(retried > 0, "the race never happened: the test proves nothing");
        }
        // Every retry went out on a connection of its own.
        assert!(up.connections() >= 200, "{} connections for 200 requests", up.connections());
        eprintln!("linger {linger:?}: {retried} requests sent again");
        tap.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fresh_connection_that_fails_is_not_retried_and_the_record_keeps_its_model() {
    let up = RawUpstream::start(Habit::CloseWithoutAnswer).await;
    let tap = TapUnder::start(&format!("http://{}", up.addr), false).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert_eq!(got.status, 502, "{}", got.text());
    assert!(got.text().starts_with("goodput tap: cannot reach the upstream"), "{}", got.text());
    let r = tap.record().await;
    assert_eq!((r.status, r.model.as_str()), (Status::UpstreamReset, "m1"), "the body was read: its model stays");
    assert_eq!((tap.stats.retry_count(), up.connections()), (0, 1), "a fresh connection's failure is an answer");

    // A body that has not arrived when the upstream fails is read for its model before the
    // 502: the first half names it, the rest comes 200 ms later.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(2);
    tokio::spawn(async move {
        let _ = tx.send(Ok(Frame::data(Bytes::from_static(br#"{"model":"m2","#)))).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _ = tx.send(Ok(Frame::data(Bytes::from_static(br#""prompt":"x","stream":true}"#)))).await;
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    let req = hyper::Request::post("/v1/completions")
        .header("host", "engine.test")
        .header("content-type", "application/json")
        .body(StreamBody::new(stream))
        .unwrap();
    let got = fetch(tap.addr, req).await;
    assert_eq!(got.status, 502);
    let r = tap.record().await;
    assert_eq!((r.status, r.model.as_str()), (Status::UpstreamReset, "m2"));
    tap.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_sent_again_once_the_answer_began() {
    let event = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n";
    let partial = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
        event.len()
    )
    .into_bytes();
    let up = RawUpstream::start(Habit::BreakMidBody { partial }).await;
    let tap = TapUnder::start(&format!("http://{}", up.addr), false).await;
    for _ in 0..3 {
        let got = fetch(tap.addr, post("/v1/completions", CHAT)).await;
        assert_eq!(got.status, 200);
        assert!(got.broken, "the break reaches the client as it would directly");
    }
    assert_eq!(tap.stats.retry_count(), 0);
    assert_eq!(up.bodies().len(), 3, "each request reached the upstream once");
    let records = tap.records(3).await;
    assert!(records.iter().all(|r| r.status == Status::UpstreamReset && r.model == "m1"), "{records:#?}");
    tap.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_tap_adds_no_header_the_upstream_did_not_send() {
    for chunked in [true, false] {
        let headers = [("Server", "llama.cpp"), ("Content-Type", "text/event-stream"), ("X-Engine", "a, b")];
        let mut upstream_headers = headers.to_vec();
        upstream_headers.push(("Keep-Alive", "timeout=5, max=100"));
        let resp = response(&upstream_headers, "data: [DONE]\n\n", chunked);
        let up = RawUpstream::start(Habit::KeepAlive { response: resp }).await;
        let tap = TapUnder::start(&format!("http://{}", up.addr), false).await;
        let request = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: e\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{CHAT}",
            CHAT.len()
        );
        let (status, direct) = head_of(up.addr, request.as_bytes()).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        let (status, tapped) = head_of(tap.addr, request.as_bytes()).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        // The hop-by-hop Keep-Alive is the connection's, not the message's: the tap re-makes
        // it per connection (HTTP/1.1 keeps alive by default) and adds nothing else.
        let expected: Vec<(String, String)> = direct.iter().filter(|(k, _)| k != "keep-alive").cloned().collect();
        assert_eq!(tapped, expected, "chunked {chunked}: the client saw other headers");
        assert!(tapped.iter().all(|(k, _)| k != "date"), "no Date the upstream did not send");
        tap.stop().await;
    }
    // The tap's own answers carry no Date either.
    let tap = TapUnder::start("http://127.0.0.1:9", false).await;
    let got = fetch(tap.addr, post("/v1/completions", CHAT)).await;
    assert_eq!(got.status, 502);
    assert!(got.headers.get("date").is_none(), "{:?}", got.headers);
    tap.stop().await;
}

/// The request bodies the tap sent are the client's, byte for byte, retried or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_sent_again_is_the_same_request() {
    let up =
        RawUpstream::start(Habit::CloseAfterEach { response: llama_stream(), linger: Duration::from_millis(2) }).await;
    let tap = TapUnder::start(&format!("http://{}", up.addr), false).await;
    let stream = TcpStream::connect(tap.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut sent = Vec::new();
    for i in 0..40 {
        // Bodies of different sizes in several frames, up to 300 KiB.
        let text = format!(r#"{{"model":"m1","prompt":"{}","stream":true}}"#, "x".repeat(i * 7_700));
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> =
            text.as_bytes().chunks(64 * 1024).map(|c| Ok(Frame::data(Bytes::copy_from_slice(c)))).collect();
        let body = StreamBody::new(futures_util::stream::iter(frames));
        let req = hyper::Request::post("/v1/completions")
            .header("host", "e")
            .header("content-length", text.len())
            .body(body)
            .unwrap();
        sender.ready().await.unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.into_body().collect().await.unwrap();
        sent.push(text.into_bytes());
    }
    assert_eq!(up.bodies(), sent, "the upstream answered each body once, as the client sent it");
    assert!(tap.stats.retry_count() > 0);
    tap.stop().await;
}
