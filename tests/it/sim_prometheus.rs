//! A real Prometheus scrapes the live simulator and computes PromQL on what it got: the
//! exposition is accepted by Prometheus itself (not just by our parser), every target is
//! `up`, and counters and histograms move. Skips when `prometheus` is not installed,
//! unless GOODPUT_REQUIRE_TOOLS=1.

use crate::net::free_port;
use crate::support::PATIENCE;
use crate::tools;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use goodput_sim::config::Profile;
use goodput_sim::{SimConfig, live};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tools::require_tool;

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn http_get(port: u16, path_and_query: &str) -> Option<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let req = format!("GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of an instant query that returns exactly one sample.
async fn query(port: u16, q: &str) -> Option<f64> {
    let (code, body) = http_get(port, &format!("/api/v1/query?query={}", encode(q))).await?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_prometheus_scrapes_the_live_simulator() {
    let prometheus = require_tool!("prometheus");
    let mut cfg = SimConfig::profile(Profile::Spec);
    cfg.engines = 2;
    let sim = live::serve(cfg, "127.0.0.1:0".parse().expect("addr"), 10.0).await.expect("serve");
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("prometheus.yml");
    std::fs::write(
        &conf,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: sim\n    static_configs:\n      - targets: [\"{}\"]\n",
            sim.addr
        ),
    )
    .expect("config");
    let port = free_port();
    let _prom = KillOnDrop(
        Command::new(prometheus)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );
    let deadline = Instant::now() + PATIENCE;
    let mut got = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let up = query(port, "up{job=\"sim\"}").await;
        let tokens = query(port, "sum(rate(vllm:generation_tokens_total[5s]))").await;
        let p99 =
            query(port, "histogram_quantile(0.99, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5s])))")
                .await;
        let engines = query(port, "count(vllm:kv_cache_usage_perc)").await;
        if let (Some(up), Some(tokens), Some(p99), Some(engines)) = (up, tokens, p99, engines)
            && tokens > 0.0
            && p99.is_finite()
        {
            got = Some((up, tokens, p99, engines));
            break;
        }
    }
    let (up, tokens, p99, engines) = got.expect("Prometheus scraped the simulator and computed rates within 30 s");
    assert_eq!(up, 1.0, "the scrape succeeded (Prometheus accepted the exposition)");
    assert_eq!(engines, 2.0, "one series per data-parallel engine");
    assert!(tokens > 100.0, "tokens/s at 10x speed: {tokens}");
    assert!(p99 > 0.0 && p99 < 1.0, "ITL p99 {p99}");
    sim.shutdown().await;
}
