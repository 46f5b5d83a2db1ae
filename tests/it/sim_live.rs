//! Live mode: a real HTTP server on 127.0.0.1 whose /metrics advances with the wall
//! clock times `speed`, parses, and stops cleanly.

use std::time::Duration;

use goodput::parse::{Limits, parse};
use goodput_sim::config::Profile;
use goodput_sim::{SimConfig, live};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    let text = String::from_utf8(buf).expect("utf8");
    let (head, body) = text.split_once("\r\n\r\n").expect("http response");
    (head.to_string(), body.to_string())
}

fn generated(body: &str) -> f64 {
    let exp = parse(body.as_bytes(), &Limits::default()).expect("live scrape parses");
    exp.samples.iter().filter(|s| s.name == "vllm:generation_tokens_total").map(|s| s.value).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_server_serves_advancing_metrics() {
    let cfg = SimConfig::profile(Profile::Steady);
    let h = live::serve(cfg, "127.0.0.1:0".parse().expect("addr"), 20.0).await.expect("serve");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (head, first) = get(h.addr, "/metrics").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain; version=0.0.4"), "{head}");
    let g1 = generated(&first);
    assert!(g1 > 0.0, "30 virtual seconds produced tokens");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (_, second) = get(h.addr, "/metrics").await;
    let g2 = generated(&second);
    // ~20 more virtual seconds at roughly 300-600 tokens/s.
    assert!(g2 > g1 + 1000.0, "virtual time advances with the wall clock: {g1} -> {g2}");
    let addr = h.addr;
    tokio::time::timeout(Duration::from_secs(5), h.shutdown()).await.expect("clean shutdown");
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "port closed after shutdown");
}
