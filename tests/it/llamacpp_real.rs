//! A real engine nobody here wrote: llama.cpp's `llama-server`, built from the llama.cpp
//! source that the llama-cpp-python source distribution on PyPI vendors, serving a small
//! random-weight model (scripts/llamacpp.sh builds both into a cache). Checked:
//!
//! - `goodput inspect` of its /metrics exits 0 and names the engine `llamacpp`;
//! - the daemon scrapes it: the target is up, detected as `llamacpp`, with its counters;
//! - the official `openai` client streams 40 requests from 8 threads, then 200 back to back
//!   on one keep-alive connection, through the daemon's tap: no request fails, and for every
//!   SLO the tap's good count (`llm_slo_good_requests_total`) agrees with the client's own
//!   per-request verdicts within max(2, 3 %).
//!
//! Opt-in: the first run builds llama-server (4 to 15 minutes on 2 cores), so it runs only
//! with GOODPUT_LLAMACPP=1 and otherwise skips with a note, also under
//! GOODPUT_REQUIRE_TOOLS=1 (README.md#two-commands, the tests). Enabled, the script installs
//! what it lacks, and the test fails when it cannot (no apt-get, no python3, no PyPI).

use crate::net::free_port;
use crate::support::PATIENCE;
use crate::tools;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use goodput::canonical::Engine;
use goodput::config;
use goodput::daemon::{self, clock::SystemClock};
use serde_json::{Value, json};

const TARGET: &str = "llama";
/// Requests from 8 threads sharing one client, then requests back to back from one client.
const PARALLEL: (u64, u64) = (40, 8);
const SEQUENTIAL: u64 = 200;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Builds (or finds in the cache) llama-server and the model; the cache directory.
fn build() -> PathBuf {
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .arg(root().join("scripts/llamacpp.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/llamacpp.sh");
    assert!(out.status.success(), "scripts/llamacpp.sh failed (it needs cmake, a C++ compiler, python3 and PyPI)");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().expect("the cache path").trim());
    eprintln!("llama-server and model ready in {:.0?} at {}", started.elapsed(), dir.display());
    dir
}

/// llama-server, stopped by its PID when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts llama-server with 4 slots and its metrics, and waits for it to load the model. One
/// compute thread: ggml's threads meet at a spinning barrier after every operation, and on a
/// machine with other work a descheduled thread stalls the rest for a time slice, which made
/// latencies erratic by seconds with two.
async fn start(cache: &Path, log: &Path) -> Server {
    let port = free_port();
    let child = Command::new(cache.join("bin/llama-server"))
        .args(["-m"])
        .arg(cache.join("model.gguf"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--metrics", "-np", "4", "-c", "8192", "-t", "1"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start llama-server");
    let server = Server { child, addr: format!("127.0.0.1:{port}").parse().unwrap() };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    loop {
        let ok = client.get(format!("http://{}/health", server.addr)).send().await.is_ok_and(|r| r.status() == 200);
        if ok {
            return server;
        }
        assert!(tokio::time::Instant::now() < deadline, "llama-server did not come up; see {}", log.display());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the openai client (tests/py/llamacpp_client.py) against `base` with `spec`.
async fn client(python: &Path, base: String, spec: Value) -> Value {
    let (python, script) = (python.to_path_buf(), root().join("tests/py/llamacpp_client.py"));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python).arg(script).arg(base).arg(spec.to_string()).output().expect("run python")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "the client failed:\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the client prints JSON")
}

/// The `q` quantile (nearest rank) of `key` over the client's completed requests.
fn quantile(run: &Value, key: &str, q: f64) -> f64 {
    let mut v: Vec<f64> = run["requests"].as_array().unwrap().iter().filter_map(|r| r[key].as_f64()).collect();
    v.sort_by(f64::total_cmp);
    assert!(!v.is_empty(), "no {key} measured");
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// How much longer the client saw each request than the tap (the tap's own forwarding, the
/// loopback hops and the SDK's parsing), paired by response id: (median, max) of each of TTFT,
/// TPOT and E2E, in milliseconds. Every request the client completed is among the tap's
/// records.
fn offsets(run: &Value, records: &[goodput::request::RequestRecord]) -> String {
    let by_id: std::collections::HashMap<&str, &goodput::request::RequestRecord> =
        records.iter().filter_map(|r| Some((r.request_id.as_deref()?, r))).collect();
    let mut d: [Vec<f64>; 3] = Default::default();
    for c in run["requests"].as_array().unwrap().iter().filter(|c| c["ok"] == json!(true)) {
        let id = c["id"].as_str().expect("the client kept the response id");
        let t = by_id.get(id).unwrap_or_else(|| panic!("the tap has no record of {id}"));
        let pairs =
            [(c["ttft"].as_f64(), t.ttft_s), (c["tpot"].as_f64(), t.tpot_s), (c["e2e"].as_f64(), Some(t.e2e_s))];
        for (i, pair) in pairs.into_iter().enumerate() {
            if let (Some(client), Some(tap)) = pair {
                d[i].push((client - tap) * 1e3);
            }
        }
    }
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        format!("median {:.3} ms, max {:.3} ms", v[v.len() / 2], v[v.len() - 1])
    };
    let [ttft, tpot, e2e] = &mut d;
    format!("client - tap: TTFT {}; TPOT {}; E2E {}", stat(ttft), stat(tpot), stat(e2e))
}

/// The value of `name{labels…}` on a text exposition, summed over the series that match (0
/// when none does: a fold from +0, where `sum` of nothing is -0).
fn sample(body: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            let all = labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            (n == name && all).then(|| value.parse::<f64>().ok()).flatten()
        })
        .fold(0.0, |sum, v| sum + v)
}

async fn get(url: &str) -> String {
    let c = reqwest::Client::builder().no_proxy().build().unwrap();
    c.get(url).send().await.unwrap_or_else(|e| panic!("GET {url}: {e}")).text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn llama_server_is_read_and_its_requests_are_counted_as_the_openai_client_judges_them() {
    if !tools::opt_in("GOODPUT_LLAMACPP", "the real llama-server test (builds llama.cpp, minutes the first time)") {
        return;
    }
    goodput::scrape::install_crypto_provider();
    let cache = build();
    // The script made this virtualenv with the openai SDK (scripts/py-clients.sh).
    let python = root().join(".ci-cache/py/bin/python");
    let python = std::env::var_os("GOODPUT_PYTHON").map(PathBuf::from).unwrap_or(python);
    assert!(python.is_file(), "no Python with the openai SDK at {}: run scripts/py-clients.sh", python.display());
    // The server's log stays in the cache after a failure, for the assertions that name it.
    let log = cache.join("llama-server.log");
    let server = start(&cache, &log).await;
    let metrics_url = format!("http://{}/metrics", server.addr);

    // goodput inspect reads its /metrics.
    let out = Command::new(env!("CARGO_BIN_EXE_goodput")).args(["inspect", &metrics_url]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "inspect failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("engine: llamacpp\n") && text.contains("need the request path"), "{text}");

    // Limits from the client's own timings straight to the server, so that every SLO has
    // good and bad requests on this machine at its current load; parallel and back-to-back
    // requests in the measured run's proportions, whose latencies differ.
    let max_tokens = [16, 96];
    let calibration = client(
        &python,
        format!("http://{}", server.addr),
        json!({"seed": 1, "parallel": [PARALLEL.0 / 4, PARALLEL.1], "sequential": SEQUENTIAL / 4,
               "max_tokens": max_tokens, "slos": {}}),
    )
    .await;
    assert_eq!(calibration["errors"], json!([]), "direct requests failed");
    let us = |s: f64| format!("{}us", (s * 1e6).round().max(1.0));
    let (ttft50, ttft75) = (quantile(&calibration, "ttft", 0.5), quantile(&calibration, "ttft", 0.75));
    let (tpot50, tpot75) = (quantile(&calibration, "tpot", 0.5), quantile(&calibration, "tpot", 0.75));
    let e2e50 = quantile(&calibration, "e2e", 0.5);
    let slos = json!({
        "ttft": {"ttft": ttft50},
        "tpot": {"tpot": tpot50},
        "e2e": {"e2e": e2e50},
        "joint": {"ttft": ttft75, "tpot": tpot75, "e2e": quantile(&calibration, "e2e", 0.75)},
    });
    let slo_yaml: Vec<String> = slos
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, clauses)| {
            let c: Vec<String> =
                clauses.as_object().unwrap().iter().map(|(k, v)| format!("{k}: {}", us(v.as_f64().unwrap()))).collect();
            format!("{{name: {name}, {}, objective: 0.9}}", c.join(", "))
        })
        .collect();
    println!("SLOs from the direct calibration run: {}", slo_yaml.join(", "));

    // The daemon, with its tap in front of the server (its port chosen at bind time).
    let yaml = format!(
        "listen: 127.0.0.1:0
evaluation_interval: 1s
scrape: {{interval: 1s, timeout: 900ms}}
windows: [1m]
targets:
  - {{name: {TARGET}, url: '{metrics_url}', model: tiny,
     tap: {{listen: '127.0.0.1:1', upstream: 'http://{}'}}}}
slos: [{}]
",
        server.addr,
        slo_yaml.join(", ")
    );
    let mut cfg = config::from_str(&yaml, "llamacpp.yaml").unwrap_or_else(|e| panic!("{e:?}\n{yaml}")).config;
    cfg.targets[0].tap.as_mut().unwrap().listen = "127.0.0.1:0".parse().unwrap();
    goodput::seen::keep_records();
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("the daemon starts");
    let tap = d.tap_addr(TARGET).expect("the target has a tap");

    // The target is up, detected as llama.cpp.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let r = d.report();
        let t = r.targets.iter().find(|t| t.target == TARGET);
        if let Some(t) = t
            && t.health.up
            && t.engine == Some(Engine::Llamacpp)
            && !t.models.is_empty()
        {
            assert!(t.health.errors_total.is_empty(), "{:?}", t.health);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the target never came up: {:?}", t.map(|t| &t.health));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The openai client through the tap.
    let spec = json!({"seed": 2, "parallel": [PARALLEL.0, PARALLEL.1], "sequential": SEQUENTIAL,
                      "max_tokens": max_tokens, "slos": slos});
    let run = client(&python, format!("http://{tap}"), spec).await;
    let total = PARALLEL.0 + SEQUENTIAL;

    // Every request is counted before the numbers are read.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let metrics = loop {
        let body = get(&format!("http://{}/metrics", d.local_addr())).await;
        let counted = sample(&body, "llm_slo_requests_total", &[("target", TARGET), ("source", "tap")]);
        if counted >= total as f64 || tokio::time::Instant::now() > deadline {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let report = d.report();
    let records = d.tap_records(TARGET);
    d.shutdown().await;

    let tap_count = |status: &str| sample(&metrics, "llm_slo_requests_total", &[("source", "tap"), ("status", status)]);
    let all = sample(&metrics, "llm_slo_requests_total", &[("target", TARGET), ("source", "tap")]);
    let failed: Vec<String> =
        records.iter().filter(|r| r.status != goodput::request::Status::Ok).map(|r| format!("{r:?}")).collect();
    let retries = sample(&metrics, "llm_slo_tap_upstream_retries_total", &[("target", TARGET)]);
    println!(
        "tap: {all} requests, {} ok, {retries} upstream retries; client errors: {}",
        tap_count("ok"),
        run["errors"]
    );
    println!("{}", offsets(&run, &records));
    assert_eq!(run["errors"], json!([]), "the client saw failures through the tap");
    assert!(failed.is_empty(), "{} tap failures in {total} requests:\n{}", failed.len(), failed.join("\n"));
    assert_eq!((all, tap_count("ok")), (total as f64, total as f64), "every request counted once, ok");
    assert!(records.iter().all(|r| r.model == "tiny"), "every record keeps the client's model");

    // Each SLO's good count: the tap's exact counter against the client's verdicts.
    let tolerance = (0.03 * total as f64).floor().max(2.0);
    for (name, _) in slos.as_object().unwrap() {
        let tap_good = sample(&metrics, "llm_slo_good_requests_total", &[("source", "tap"), ("slo", name)]);
        let client_good = run["good"][name].as_f64().unwrap();
        println!("slo {name}: good by the tap {tap_good}, by the client {client_good} of {total}");
        assert!(
            (tap_good - client_good).abs() <= tolerance,
            "slo {name}: the tap counts {tap_good} good, the client {client_good} (tolerance {tolerance})"
        );
    }
    let mixed = slos.as_object().unwrap().keys().filter(|n| {
        let g = run["good"][n.as_str()].as_f64().unwrap();
        g > 0.1 * total as f64 && g < 0.9 * total as f64
    });
    assert!(mixed.count() >= 2, "the limits sit inside the distribution: {}", run["good"]);

    // What the scrapes gave: counters, no histograms; the SLOs come from the tap alone.
    let t = report.targets.iter().find(|t| t.target == TARGET).unwrap();
    let m = t.models.iter().find(|m| m.model == "tiny").expect("the configured model");
    let w = &m.windows[0];
    assert!(w.output_tokens_per_second.is_some_and(|v| v > 0.0), "token rates from the counters");
    assert!(w.latency.is_empty(), "no latency histogram on /metrics");
    assert!(w.requests.iter().any(|r| r.source == goodput::request::DataSource::Tap && r.requests > 0));
}
