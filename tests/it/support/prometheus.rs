//! A real Prometheus on 127.0.0.1, over backfilled data or scraping a target, and its query
//! APIs.
//!
//! The binaries are found with `crate::tools` (skip, or fail under GOODPUT_REQUIRE_TOOLS=1).
//! The server is killed when the guard drops.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `promtool tsdb create-blocks-from openmetrics FILE DATA`.
pub fn backfill(promtool: &Path, om_file: &Path, data: &Path) {
    let out = Command::new(promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(om_file)
        .arg(data)
        .output()
        .expect("run promtool");
    assert!(out.status.success(), "promtool backfill failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// One `query_range` result: its labels, and (t_ms, value as Prometheus printed it).
pub type Series = (std::collections::BTreeMap<String, String>, Vec<(i64, String)>);

pub struct Prometheus {
    child: Child,
    pub port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Prometheus on `data` with no scrape targets and waits for /-/ready.
    pub fn start(binary: &Path, work: &Path, data: &Path) -> Prometheus {
        Prometheus::with_config(binary, work, data, "global:\n  scrape_interval: 1h\n")
    }

    /// Starts Prometheus scraping `target` (`host:port`) every second as job `job`, with its
    /// data under `work`, and waits for /-/ready.
    pub fn scraping(binary: &Path, work: &Path, job: &str, target: &str) -> Prometheus {
        Prometheus::scraping_each(binary, work, job, &[target])
    }

    /// [`Prometheus::scraping`] for several targets of one job.
    pub fn scraping_each(binary: &Path, work: &Path, job: &str, targets: &[&str]) -> Prometheus {
        let list: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nscrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        );
        Prometheus::with_config(binary, work, &work.join("data"), &config)
    }

    fn with_config(binary: &Path, work: &Path, data: &Path, config_text: &str) -> Prometheus {
        let config = work.join("prometheus.yml");
        std::fs::write(&config, config_text).expect("write config");
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let log = std::fs::File::create(work.join("prometheus.log")).expect("log file");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg("--storage.tsdb.retention.time=100y")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let p = Prometheus { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if p.get("/-/ready").is_some_and(|(status, _)| status == 200) {
                return p;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(work.join("prometheus.log")).unwrap_or_default();
        panic!("prometheus not ready within 60 s; log:\n{log}");
    }

    /// The value of an instant query that returns exactly one sample; `None` for anything
    /// else (no data yet, several series, an API error).
    pub fn query(&self, query: &str) -> Option<f64> {
        let q: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let (status, body) = self.get(&format!("/api/v1/query?query={q}"))?;
        (status == 200).then_some(())?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let result = v["data"]["result"].as_array()?;
        (result.len() == 1).then_some(())?;
        result[0]["value"][1].as_str()?.parse().ok()
    }

    /// A plain HTTP/1.0 GET (no chunked encoding): status and body.
    fn get(&self, path_and_query: &str) -> Option<(u16, String)> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(s, "GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).ok()?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, body.to_string()))
    }

    /// `query_range` → the one result series' points as (t_ms, value). Panics on API
    /// errors; an empty result gives an empty list.
    pub fn query_range(&self, query: &str, start_ms: i64, end_ms: i64, step_s: u64) -> Vec<(i64, f64)> {
        let result = self.query_range_series(query, start_ms, end_ms, step_s);
        assert!(result.len() <= 1, "{query} returned {} series", result.len());
        let Some((_, points)) = result.into_iter().next() else { return Vec::new() };
        points.into_iter().map(|(t, v)| (t, v.parse().expect("float"))).collect()
    }

    /// `query_range` → every result series: its labels and its points as (t_ms, the value
    /// exactly as Prometheus printed it, e.g. `NaN`, `+Inf`). Panics on API errors.
    pub fn query_range_series(&self, query: &str, start_ms: i64, end_ms: i64, step_s: u64) -> Vec<Series> {
        let q: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
        let path = format!(
            "/api/v1/query_range?query={q}&start={}&end={}&step={step_s}",
            start_ms as f64 / 1000.0,
            end_ms as f64 / 1000.0
        );
        let (status, body) = self.get(&path).expect("query_range request");
        assert_eq!(status, 200, "query_range {query}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("query_range JSON");
        v["data"]["result"]
            .as_array()
            .expect("result array")
            .iter()
            .map(|series| {
                let labels = series["metric"]
                    .as_object()
                    .expect("metric")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect();
                let points = series["values"]
                    .as_array()
                    .expect("values")
                    .iter()
                    .map(|p| {
                        let t = (p[0].as_f64().expect("timestamp") * 1000.0).round() as i64;
                        (t, p[1].as_str().expect("value string").to_string())
                    })
                    .collect();
                (labels, points)
            })
            .collect()
    }
}
