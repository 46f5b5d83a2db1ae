//! Scrapes that are accepted with a problem are no longer silent: a duplicate series, a
//! histogram without `+Inf` and a NaN bucket are each counted per target and reason in
//! `llm_slo_scrape_warnings_total`, logged once, and the unusable histograms make the SLO
//! `not_evaluable` instead of `no_traffic` while requests flow.

use crate::common;
use crate::support::PATIENCE;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// `common::vllm_body` with the TTFT `+Inf` bucket left out.
fn without_inf(n: u64) -> String {
    common::vllm_body(n, 1.0)
        .lines()
        .filter(|l| !(l.starts_with("vllm:time_to_first_token_seconds_bucket") && l.contains("le=\"+Inf\"")))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `common::vllm_body` with a NaN count in the first TTFT bucket.
fn nan_bucket(n: u64) -> String {
    common::vllm_body(n, 1.0)
        .lines()
        .map(|l| {
            if l.starts_with("vllm:time_to_first_token_seconds_bucket") && l.contains("le=\"0.05\"") {
                format!("{} NaN\n", l.rsplit_once(' ').unwrap().0)
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// `common::vllm_body` with its last series written twice.
fn duplicated(n: u64) -> String {
    common::vllm_body(n, 1.0) + "process_start_time_seconds 1.0\n"
}

/// The SLO status of `target`'s first model and window in a /api/v1/report body.
fn slo_status(report: &serde_json::Value, target: &str) -> serde_json::Value {
    let Some(t) = report["targets"].as_array().and_then(|ts| ts.iter().find(|t| t["target"] == target)) else {
        return serde_json::Value::Null;
    };
    t["models"][0]["windows"][0]["slos"][0]["status"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepted_scrape_problems_are_counted_logged_once_and_not_called_no_traffic() {
    goodput::scrape::install_crypto_provider();
    let noinf = common::Fixture::counting(without_inf).await;
    let nan = common::Fixture::counting(nan_bucket).await;
    let dup = common::Fixture::counting(duplicated).await;
    let port = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{port}\nevaluation_interval: 300ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
             targets:\n  - {{name: noinf, url: 'http://{}/metrics'}}\n  - {{name: nan, url: 'http://{}/metrics'}}\n\
             \x20 - {{name: dup, url: 'http://{}/metrics'}}\n\
             slos: [{{name: fast, ttft: 200ms, objective: 0.9}}]\n",
            noinf.addr, nan.addr, dup.addr
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let get = |path: &str| {
        let req = client.get(format!("{base}{path}"));
        async move {
            match req.send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        }
    };

    // Several scrapes of each target, each with its problem.
    let wanted = [("noinf", "histogram_without_inf"), ("nan", "nan_bucket"), ("dup", "duplicate_series")];
    let began = Instant::now();
    let body = loop {
        let body = get("/metrics").await;
        let counts: HashMap<(String, String), f64> = if body.is_empty() {
            HashMap::new()
        } else {
            common::metrics_samples(&body)
                .into_iter()
                .filter(|(n, _, _)| n == "llm_slo_scrape_warnings_total")
                .map(|(_, l, v)| ((l["target"].clone(), l["reason"].clone()), v))
                .collect()
        };
        let have = |t: &str, r: &str| counts.get(&(t.to_string(), r.to_string())).copied().unwrap_or(0.0);
        if wanted.iter().all(|(t, r)| have(t, r) >= 4.0) {
            // Every reason is exported for every target from the start, and each target has
            // only its own problem.
            assert_eq!(counts.len(), 3 * goodput::canonical::WarningReason::ALL.len(), "{counts:?}");
            assert_eq!(counts.values().filter(|v| **v > 0.0).count(), 3, "{counts:?}");
            break body;
        }
        if began.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("warnings not counted within {PATIENCE:?}: {counts:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    common::promtool_check_metrics(&body);

    // Once every target has a window with the SLO in it.
    let report = loop {
        let report: serde_json::Value = serde_json::from_str(&get("/api/v1/report").await).unwrap_or_default();
        if report["targets"].as_array().is_some_and(|ts| ts.len() == 3)
            && ["noinf", "nan", "dup"].iter().all(|t| !slo_status(&report, t).is_null())
        {
            break report;
        }
        assert!(began.elapsed() < PATIENCE, "no SLO in the report within {PATIENCE:?}: {report}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for t in ["noinf", "nan"] {
        let s = slo_status(&report, t);
        assert_eq!(s["status"], "not_evaluable", "{t}: {s}");
        assert!(s["reason"].as_str().unwrap().contains("scrape warnings"), "{t}: {s}");
    }
    // The duplicate is dropped and the rest of the scrape is sound.
    assert_eq!(slo_status(&report, "dup")["status"], "evaluated", "{report}");

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (target, reason) in wanted {
        let lines = stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["fields"]["target_name"] == target && v["fields"]["reason"] == reason)
            .inspect(|v| assert_eq!(v["level"], "WARN", "{v}"))
            .count();
        assert_eq!(lines, 1, "{target}/{reason} should be logged exactly once:\n{stderr}");
    }
}
