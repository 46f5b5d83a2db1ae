//! The tap against hostile clients and upstreams, through the real `goodput run` binary
//! (docs/limits.md, docs/request-path.md): idle connections past the descriptor limit cost
//! neither /metrics nor other clients; a request body that stalls is cut and answered 408,
//! a malformed one 400; `inject_usage` holds at most one event's worth of an endless event
//! and never loses a byte, even when the upstream breaks.

use crate::proc_common;
use crate::tap_common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use proc_common::{Daemon, client, free_port};
use tap_common::engines::{self, TIMING};
use tap_common::{Reply, Step, TapUnder, Upstream, fetch, post, send, wait_ms};

fn tapped(up: &Upstream, tap: u16, extra: &str) -> String {
    format!(
        "evaluation_interval: 300ms\nscrape: {{interval: 300ms, timeout: 250ms}}\ntargets:\n  - name: llama\n    \
         url: http://{up}/metrics\n    tap: {{listen: '127.0.0.1:{tap}', upstream: 'http://{up}'{extra}}}\n",
        up = up.addr
    )
}

const CHAT: &str = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

/// A streaming chat completion through the tap on a fresh connection: status and body.
async fn chat(tap: u16, limit: Duration) -> Result<(u16, String), reqwest::Error> {
    let r = client(limit)
        .post(format!("http://127.0.0.1:{tap}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(CHAT)
        .send()
        .await?;
    Ok((r.status().as_u16(), r.text().await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tap_connections_past_the_descriptor_limit_cost_neither_metrics_nor_clients() {
    let up = Upstream::start(|s| engines::by_path(s, TIMING)).await;
    let tap = free_port().await;
    let d = Daemon::start(&tapped(&up, tap, ""), Some(1024)).await;

    // More idle sockets than the daemon has descriptors, each sending nothing, ever.
    let mut idle = Vec::new();
    let to: SocketAddr = format!("127.0.0.1:{tap}").parse().unwrap();
    for _ in 0..1100 {
        if let Ok(s) = TcpStream::connect_timeout(&to, Duration::from_millis(500)) {
            idle.push(s);
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let asked = Instant::now();
    let m = d.metrics(Duration::from_secs(5)).await.expect("/metrics did not answer within 5 s");
    assert!(asked.elapsed() < Duration::from_secs(2), "/metrics took {:?}", asked.elapsed());
    // Real clients are served at once: each new connection closes the idlest one.
    for _ in 0..3 {
        let asked = Instant::now();
        let (status, body) = chat(tap, Duration::from_secs(5)).await.expect("a request through the tap");
        assert_eq!(status, 200, "{body}");
        assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
        assert!(asked.elapsed() < Duration::from_secs(3), "the request took {:?}", asked.elapsed());
    }
    let limit = m["llm_slo_tap_connections_limit{llama}"];
    // 1024 less the reserve (64, 2 per target and spare destination), shared by the HTTP
    // server (256) and the tap (2 descriptors a connection: client and upstream).
    assert!(limit >= 8.0 && limit * 2.0 + m["llm_slo_http_connections_limit"] <= 1024.0 - 68.0, "{m:?}");
    assert!(m["llm_slo_tap_connections{llama}"] <= limit, "{m:?}");
    assert!(m["llm_slo_tap_connections_closed_total{llama,evicted}"] >= 1100.0 - limit - 10.0, "{m:?}");
    assert!(m["process_open_fds"] < 1024.0 - 40.0, "{m:?}");
    let log = d.log();
    let refused = log.matches("cannot accept").count();
    assert!(refused <= 2, "{refused} accept failures logged:\n{log}");
    drop(idle);
}

/// Sends `head` then `body` on a raw connection, and reads what comes back until the tap
/// closes it or `limit` passes: (status line, when the answer came, whether it closed).
fn raw_exchange(tap: u16, head: &str, body: &[u8], limit: Duration) -> (String, Duration, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", tap)).unwrap();
    let began = Instant::now();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let (mut got, mut answered, mut buf) = (Vec::new(), None, [0u8; 4096]);
    while began.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return (status_line(&got), answered.unwrap_or(began.elapsed()), true),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                answered.get_or_insert(began.elapsed());
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return (status_line(&got), answered.unwrap_or(began.elapsed()), true),
        }
    }
    (status_line(&got), answered.unwrap_or(limit), false)
}

fn status_line(got: &[u8]) -> String {
    String::from_utf8_lossy(got).lines().next().unwrap_or("").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_is_cut_with_408_and_a_malformed_one_gets_400() {
    let up = Upstream::start(|s| engines::by_path(s, TIMING)).await;
    let tap = free_port().await;
    let d = Daemon::start(&tapped(&up, tap, ", body_read_timeout: 1s"), None).await;

    let head = "POST /v1/chat/completions HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    let stalled = std::thread::spawn(move || raw_exchange(tap, head, b"{\"model\":", Duration::from_secs(8)));
    // Other clients are served meanwhile.
    let (status, body) = chat(tap, Duration::from_secs(5)).await.expect("a request through the tap");
    assert_eq!((status, body.ends_with("data: [DONE]\n\n")), (200, true), "{body}");
    let (line, after, closed) = stalled.join().unwrap();
    assert!(line.starts_with("HTTP/1.1 408"), "a stalled body got {line:?}");
    assert!(after >= Duration::from_millis(900) && after < Duration::from_secs(4), "answered after {after:?}");
    assert!(closed, "the connection of a stalled body stays open");

    let chunked = "POST /v1/chat/completions HTTP/1.1\r\nHost: engine\r\nTransfer-Encoding: chunked\r\n\r\n";
    let (line, _, _) = raw_exchange(tap, chunked, b"zz\r\nhello\r\n0\r\n\r\n", Duration::from_secs(4));
    assert!(line.starts_with("HTTP/1.1 400"), "a malformed chunked body got {line:?}");

    let m = d.metrics(Duration::from_secs(5)).await.expect("/metrics");
    assert!(m["llm_slo_tap_connections_closed_total{llama,body_timeout}"] >= 1.0, "{m:?}");
}

/// An SSE stream whose second event never ends: `size` bytes of content, then (with
/// `fail`) a broken connection or the end of the body.
fn endless_event(size: usize, fail: bool) -> Reply {
    let piece = Bytes::from(vec![b'a'; 1 << 20]);
    let mut steps = vec![send("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")];
    steps.push(send("data: {\"choices\":[{\"delta\":{\"content\":\""));
    let mut left = size;
    while left > 0 {
        let n = left.min(piece.len());
        steps.push(Step::Send(piece.slice(..n)));
        left -= n;
    }
    if fail {
        steps.push(wait_ms(100));
        steps.push(Step::Fail);
    }
    Reply::new(200, "text/event-stream", steps)
}

fn expected_bytes(size: usize) -> Vec<u8> {
    let mut want = b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n".to_vec();
    want.extend_from_slice(b"data: {\"choices\":[{\"delta\":{\"content\":\"");
    want.resize(want.len() + size, b'a');
    want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_usage_holds_at_most_an_event_of_an_endless_one_and_forwards_every_byte() {
    const SIZE: usize = 160 << 20;
    let up = Upstream::start(|s| match s.path.as_str() {
        "/v1/chat/completions" => endless_event(SIZE, false),
        _ => engines::by_path(s, TIMING),
    })
    .await;
    let tap = free_port().await;
    let d = Daemon::start(&tapped(&up, tap, ", inject_usage: true"), None).await;
    let before = d.memory_kib("VmRSS");
    let tap_addr: SocketAddr = format!("127.0.0.1:{tap}").parse().unwrap();
    let got = fetch(tap_addr, post("/v1/chat/completions", CHAT)).await;
    let asked = up.seen().into_iter().rfind(|s| s.path == "/v1/chat/completions").expect("the request went upstream");
    assert_eq!(asked.json()["stream_options"]["include_usage"], true, "the tap asked for usage");
    assert_eq!(got.status, 200);
    assert!(!got.broken);
    assert!(got.body == expected_bytes(SIZE), "the client got {} bytes, not the upstream's", got.body.len());
    let peak = d.memory_kib("VmHWM");
    assert!(peak < before + 48 * 1024, "RSS rose from {before} KiB to a peak of {peak} KiB for one endless event");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_inject_usage_the_held_bytes_of_a_cut_event_still_reach_the_client() {
    let up = Upstream::start(|_| endless_event(1000, true)).await;
    let tap = TapUnder::start(&format!("http://{}", up.addr), true).await;
    let got = fetch(tap.addr, post("/v1/chat/completions", CHAT)).await;
    assert_eq!(got.status, 200);
    assert!(got.broken, "the upstream's break reaches the client");
    assert_eq!(got.text(), String::from_utf8(expected_bytes(1000)).unwrap(), "every byte before the break");
    tap.stop().await;
}
