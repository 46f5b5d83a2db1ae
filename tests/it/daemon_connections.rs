//! The `goodput` binary against idle and slow clients (docs/limits.md): under a low
//! descriptor limit, more idle sockets than it has descriptors leave /metrics answering
//! on a fresh connection and the daemon's own scrapes succeeding; idle and slowloris
//! connections are closed after `server.idle_timeout` and `server.header_read_timeout`.

use crate::common;
use crate::proc_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{PATIENCE, until_async};
use proc_common::{Daemon, try_get, values};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_beyond_the_descriptor_limit_leave_metrics_and_scrapes_working() {
    let engine = common::Fixture::counting(|n| common::vllm_body(n, 1.0)).await;
    let yaml = format!(
        "evaluation_interval: 300ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
         targets: [{{name: e, url: 'http://{}/metrics'}}]\n",
        engine.addr
    );
    let d = Daemon::start(&yaml, Some(256)).await;

    // More idle sockets than the daemon has descriptors: each sends nothing, ever.
    let mut idle = Vec::new();
    for _ in 0..400 {
        idle.push(TcpStream::connect(("127.0.0.1", d.port)).unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let scraped = engine.served();

    let asked = Instant::now();
    let (status, body) = try_get(d.port, "/metrics", Duration::from_secs(5))
        .await
        .expect("/metrics did not answer on a fresh connection within 5 s");
    assert_eq!(status, 200);
    assert!(asked.elapsed() < Duration::from_secs(2), "/metrics took {:?}", asked.elapsed());
    common::promtool_check_metrics(&body);
    let m = values(&body);
    // The cap is the descriptor limit less 64 for the process and 2 for each of the target
    // and the spare destination.
    assert_eq!(m["llm_slo_http_connections_limit"], (256 - 64 - 2 * 2) as f64, "{body}");
    assert!(m["llm_slo_http_connections"] <= m["llm_slo_http_connections_limit"], "{body}");
    assert_eq!(m["process_max_fds"], 256.0, "{body}");
    assert!(m["process_open_fds"] < 256.0 - 40.0, "{body}");
    // Every socket beyond the cap is evicted, once the daemon has accepted them all.
    let evicted = "llm_slo_http_connections_closed_total{evicted}";
    until_async(PATIENCE, "the idle sockets beyond the cap evicted", async || {
        d.metrics(Duration::from_secs(5)).await.filter(|m| m[evicted] >= (400 - 188) as f64)
    })
    .await;

    // The daemon's own scrapes go on, and the target stays up.
    until_async(PATIENCE, "three more scrapes", async || (engine.served() >= scraped + 3).then_some(())).await;
    let (_, report) = try_get(d.port, "/api/v1/report", Duration::from_secs(5)).await.expect("report");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["targets"][0]["health"]["up"], true, "{report}");
    drop(idle);
}

/// Reads until the server closes the connection; how long that took, or `None` if it
/// stayed open for `limit`. `trickle` sends one byte of a never-ending header every 250 ms.
fn closed_after(port: u16, limit: Duration, trickle: bool) -> Option<Duration> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let began = Instant::now();
    if trickle {
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    }
    s.set_read_timeout(Some(Duration::from_millis(250))).unwrap();
    let mut buf = [0u8; 4096];
    while began.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return Some(began.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return Some(began.elapsed()),
        }
        if trickle && s.write_all(b"a").is_err() {
            return Some(began.elapsed());
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slowloris_connections_are_closed_after_their_timeouts() {
    let engine = common::Fixture::counting(|n| common::vllm_body(n, 1.0)).await;
    let yaml = format!(
        "server: {{header_read_timeout: 3s, idle_timeout: 1s}}\n\
         targets: [{{name: e, url: 'http://{}/metrics'}}]\n",
        engine.addr
    );
    let d = Daemon::start(&yaml, None).await;
    let port = d.port;
    let idle = std::thread::spawn(move || closed_after(port, Duration::from_secs(10), false));
    let slow = std::thread::spawn(move || closed_after(port, Duration::from_secs(10), true));
    let idle = idle.join().unwrap().expect("an idle connection stayed open for 10 s");
    let slow = slow.join().unwrap().expect("a slowloris connection stayed open for 10 s");
    // Silence closes after idle_timeout; a trickle of bytes is not a request, so the
    // header timeout closes it.
    assert!(idle >= Duration::from_millis(900) && idle < Duration::from_millis(2500), "idle closed after {idle:?}");
    assert!(slow >= Duration::from_millis(2900) && slow < Duration::from_millis(5000), "slow closed after {slow:?}");

    let (_, body) = try_get(port, "/metrics", Duration::from_secs(5)).await.expect("/metrics");
    let m = values(&body);
    assert!(m["llm_slo_http_connections_closed_total{idle_timeout}"] >= 1.0, "{body}");
    assert!(m["llm_slo_http_connections_closed_total{header_timeout}"] >= 1.0, "{body}");
}
