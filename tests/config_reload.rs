//! Hot reload in the real binary, with its config laid out as Kubernetes mounts a
//! ConfigMap (`config.yaml → ..data/config.yaml`, `..data → ..<timestamp>`): SIGHUP
//! reloads it, and so does swapping the `..data` symlink. A target whose settings did not
//! change keeps its windows across a reload while a new one starts; a config that fails
//! validation, or changes what takes a restart, leaves the running one in place with
//! `llm_slo_config_last_reload_successful` at 0 and the reason, at file:line:column, in the
//! log.

mod common;
mod tools;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Fixture, metrics_samples, vllm_body};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// Writes `text` as a new ConfigMap version in `dir` and swaps `..data` to it atomically.
fn publish(dir: &Path, version: u32, text: &str) {
    let v = format!("..2026_12_01_{version:04}");
    std::fs::create_dir(dir.join(&v)).unwrap();
    std::fs::write(dir.join(&v).join("config.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&v, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

struct Daemon {
    child: std::process::Child,
    port: u16,
    log: std::path::PathBuf,
    client: reqwest::Client,
}

impl Daemon {
    async fn json(&self, path: &str) -> Option<serde_json::Value> {
        let r = self.client.get(format!("http://127.0.0.1:{}{path}", self.port)).send().await.ok()?;
        serde_json::from_str(&r.text().await.ok()?).ok()
    }

    /// `name`'s value on /metrics (first series).
    async fn metric(&self, name: &str) -> Option<f64> {
        let r = self.client.get(format!("http://127.0.0.1:{}/metrics", self.port)).send().await.ok()?;
        let body = r.text().await.ok()?;
        metrics_samples(&body).into_iter().find(|(n, _, _)| n == name).map(|(_, _, v)| v)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls the report until `ok` holds, for up to 20 s.
    async fn until(&self, what: &str, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        for _ in 0..200 {
            if let Some(r) = self.json("/api/v1/report").await
                && ok(&r)
            {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: not seen within 20 s\nlog:\n{}", self.log());
    }

    /// Polls /metrics until `name` has a value for which `ok` holds, for up to 20 s.
    async fn until_metric(&self, name: &str, ok: impl Fn(f64) -> bool) -> f64 {
        for _ in 0..200 {
            if let Some(v) = self.metric(name).await
                && ok(v)
            {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{name}: no awaited value within 20 s (last {:?})\nlog:\n{}", self.metric(name).await, self.log());
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }
}

impl Drop for Daemon {
    /// A failed test must not leave the daemon running.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn target<'a>(r: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    r["targets"].as_array()?.iter().find(|t| t["target"] == name)
}

fn up(r: &serde_json::Value, name: &str) -> bool {
    target(r, name).is_some_and(|t| t["health"]["up"] == true)
}

/// Coverage of the target's 10s window: falls back near 0 if its windows are reset.
fn coverage(r: &serde_json::Value, name: &str) -> f64 {
    let Some(t) = target(r, name) else { return 0.0 };
    t["models"][0]["windows"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["window"] == "10s")
        .map_or(0.0, |w| w["coverage"].as_f64().unwrap_or(0.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_and_a_configmap_swap_reload_and_a_bad_config_keeps_the_running_one() {
    goodput::scrape::install_crypto_provider();
    let a = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let b = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let head = format!(
        "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\nwindows: [10s]\n"
    );
    let target_a = format!("  - {{name: a, url: 'http://{}/metrics', engine: vllm}}\n", a.addr);
    let target_b = format!("  - {{name: b, url: 'http://{}/metrics', engine: vllm}}\n", b.addr);
    publish(dir.path(), 1, &format!("{head}targets:\n{target_a}"));
    std::os::unix::fs::symlink("..data/config.yaml", dir.path().join("config.yaml")).unwrap();
    let log = dir.path().join("daemon.log");
    let child = Command::new(BIN)
        .args(["--log-format", "human", "run", "--config"])
        .arg(dir.path().join("config.yaml"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let d = Daemon { child, port, log, client };

    let r = d.until("target a up with a third of its window", |r| up(r, "a") && coverage(r, "a") > 0.3).await;
    assert!(target(&r, "b").is_none());
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(1.0));
    let started = d.until_metric("llm_slo_config_last_reload_success_timestamp_seconds", |v| v > 0.0).await;

    // SIGHUP reloads the same file: a success, later than the start.
    d.signal(libc::SIGHUP);
    d.until_metric("llm_slo_config_last_reload_success_timestamp_seconds", |v| v > started).await;
    assert!(d.log().contains("SIGHUP: reloading the config"), "{}", d.log());

    // The ConfigMap swap adds b; a, unchanged, keeps its windows.
    let before = coverage(&d.json("/api/v1/report").await.unwrap(), "a");
    publish(dir.path(), 2, &format!("{head}targets:\n{target_a}{target_b}"));
    let r = d.until("target b added by the symlink swap", |r| up(r, "b")).await;
    assert!(coverage(&r, "a") >= before, "a's windows were reset: {} < {before}", coverage(&r, "a"));
    assert!(d.log().contains("the config file changed: reloading it"), "{}", d.log());
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(1.0));

    // A config that fails validation: the running one stays, the metric says 0, the log
    // says where.
    publish(dir.path(), 3, &format!("{head}targets:\n{target_a}  - {{name: c, url: 'ftp://x/metrics'}}\n"));
    d.until_metric("llm_slo_config_last_reload_successful", |v| v == 0.0).await;
    let file = dir.path().join("config.yaml").display().to_string();
    let at = format!("{file}:7:20: url: unsupported URL");
    assert!(d.log().contains(&at), "no error at {at} in the log:\n{}", d.log());
    assert!(d.log().contains("config reload failed"), "{}", d.log());
    let served = b.served();
    let r = d.until("b still scraped", |_| b.served() > served + 2).await;
    assert!(up(&r, "a") && up(&r, "b") && target(&r, "c").is_none());

    // A change of what takes a restart is refused, saying which.
    let moved = head.replace(&port.to_string(), "1");
    publish(dir.path(), 4, &format!("{moved}targets:\n{target_a}{target_b}"));
    for _ in 0..100 {
        if d.log().contains("listen changed, which takes a restart") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(d.log().contains("listen changed, which takes a restart"), "{}", d.log());
    assert_eq!(d.metric("llm_slo_config_last_reload_successful").await, Some(0.0));

    // A good config again: success, and b, removed, waits out its grace period.
    let before = coverage(&d.json("/api/v1/report").await.unwrap(), "a");
    publish(dir.path(), 5, &format!("{head}targets:\n{target_a}"));
    d.until_metric("llm_slo_config_last_reload_successful", |v| v == 1.0).await;
    let r = d.until("b vanished", |r| target(r, "b").is_some_and(|t| t["health"]["vanished_ms"].is_i64())).await;
    assert!(coverage(&r, "a") >= before, "a's windows were reset: {} < {before}", coverage(&r, "a"));

    let mut d = d;
    d.signal(libc::SIGTERM);
    let status = d.child.wait().unwrap();
    assert!(status.success(), "exit {status:?}");
}

/// `llm_slo_window_coverage_ratio` of `target`'s 5m window on the daemon's /metrics.
async fn exported_coverage(d: &goodput::daemon::Daemon, target: &str) -> f64 {
    let (_, body) = common::get(&format!("http://{}/metrics", d.local_addr())).await;
    let s = metrics_samples(&body);
    common::sample_value(&s, "llm_slo_window_coverage_ratio", &[("target", target), ("window", "5m")]).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_keeps_unchanged_targets_windows_and_starts_changed_ones_afresh() {
    use std::sync::Arc;
    goodput::scrape::install_crypto_provider();
    let engines: Vec<Fixture> =
        futures_util::future::join_all((0..3).map(|_| Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)))).await;
    let yaml = |moved: &Fixture, window: &str| {
        format!(
            "listen: 127.0.0.1:0\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\nwindows: [{window}]\n\
             targets:\n  - {{name: kept, url: 'http://{}/metrics', engine: vllm}}\n  - {{name: moved, url: 'http://{}/metrics', engine: vllm}}\n",
            engines[0].addr, moved.addr
        )
    };
    let load = |text: String| goodput::config::from_str(&text, "reload.yaml").expect("valid config").config;
    let clock = Arc::new(common::FastClock::start(1_700_000_000_000, 30.0));
    let d = goodput::daemon::start(load(yaml(&engines[1], "5m")), clock).await.expect("daemon starts");
    let mut before = (0.0, 0.0);
    for _ in 0..200 {
        before = (exported_coverage(&d, "kept").await, exported_coverage(&d, "moved").await);
        if before.0 > 0.3 && before.1 > 0.3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(before.0 > 0.3 && before.1 > 0.3, "the 5m windows did not fill: {before:?}");

    // A change of what takes a restart is refused as a whole: `moved` keeps its URL too.
    let refused = d.reload(load(yaml(&engines[2], "10m"))).unwrap_err();
    assert!(refused.contains("windows changed, which takes a restart"), "{refused}");

    d.reload(load(yaml(&engines[2], "5m"))).expect("a target change applies live");
    let served = engines[2].served();
    for _ in 0..200 {
        if engines[2].served() > served + 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(engines[2].served() > served + 1, "the moved target's new URL is not scraped");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = (exported_coverage(&d, "kept").await, exported_coverage(&d, "moved").await);
    assert!(after.0 >= before.0, "the unchanged target's 5m window was reset: {after:?} after {before:?}");
    assert!(after.1 < before.1, "the changed target kept windows of its old URL: {after:?} after {before:?}");
    d.shutdown().await;
}
