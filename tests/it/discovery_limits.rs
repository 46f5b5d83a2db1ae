//! Discovery under hostile input, in the real binary: 100 000 file_sd targets under a
//! descriptor limit of 1024 are cut to what the limit leaves room for, the same ones on
//! every refresh, the rest refused with a reason on /metrics, with a bounded log; and a
//! target file or directory that cannot be read keeps the targets it gave, its error
//! logged once (docs/discovery.md#limits, docs/limits.md).

use crate::common;
use crate::net::free_port;
use crate::proc_common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::PATIENCE;
use common::{Fixture, metrics_samples, sample_value, vllm_body};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

struct Daemon {
    child: std::process::Child,
    port: u16,
    log: std::path::PathBuf,
    client: reqwest::Client,
}

impl Daemon {
    /// Runs `goodput run` on `config`, its log in `dir`, with `nofile` as both limits of
    /// open descriptors when given.
    fn start(dir: &Path, config: &str, port: u16, nofile: Option<u64>) -> Daemon {
        goodput::scrape::install_crypto_provider();
        let file = dir.join("goodput.yaml");
        std::fs::write(&file, config).unwrap();
        let log = dir.join("daemon.log");
        let mut cmd = Command::new(BIN);
        cmd.args(["--log-format", "human", "run", "--config"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(n) = nofile {
            proc_common::limit_nofile(&mut cmd, n);
        }
        let child = cmd.spawn().unwrap();
        let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build().unwrap();
        Daemon { child, port, log, client }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn get(&self, path: &str) -> Option<(u16, String)> {
        let r = self.client.get(format!("http://127.0.0.1:{}{path}", self.port)).send().await.ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().await.ok()?))
    }

    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let (_, body) = self.get("/metrics").await?;
        sample_value(&metrics_samples(&body), name, labels)
    }

    /// Polls /metrics until the sample has a value for which `ok` holds, for up to [`PATIENCE`].
    async fn until_metric(&self, name: &str, labels: &[(&str, &str)], ok: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if let Some(v) = self.metric(name, labels).await
                && ok(v)
            {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let last = self.metric(name, labels).await;
        let log = self.log();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "{name}{labels:?}: no awaited value within {PATIENCE:?} (last {last:?}); log tail:\n{}",
            tail.join("\n")
        );
    }

    /// Waits up to [`PATIENCE`] for a log line holding `needle`.
    async fn until_log(&self, needle: &str) {
        let began = Instant::now();
        while began.elapsed() < PATIENCE {
            if self.log().contains(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no log line with {needle:?}:\n{}", self.log());
    }

    async fn report(&self) -> serde_json::Value {
        let (_, body) = self.get("/api/v1/report").await.expect("the report is served");
        serde_json::from_str(&body).unwrap()
    }

    fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) }, 0);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit {status:?}");
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

/// Replaces `path` atomically, as a tool writing target files should.
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn lines_with(log: &str, all: &[&str]) -> usize {
    log.lines().filter(|l| all.iter().all(|s| l.contains(s))).count()
}

const FLEET: usize = 100_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_file_sd_targets_under_1024_descriptors_are_cut_to_fit_and_stay_put() {
    // Every scrape hangs past its timeout, so each kept target holds a descriptor for the
    // whole timeout: the worst case for the limit.
    let engine = Fixture::hanging(Duration::from_secs(2)).await;
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets");
    std::fs::create_dir(&targets).unwrap();
    let mut json = String::with_capacity(FLEET * 80);
    json.push('[');
    for i in 0..FLEET {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(r#"{{"targets":["{}"],"labels":{{"target":"t{i:06}"}}}}"#, engine.addr));
    }
    json.push(']');
    write(&targets.join("fleet.json"), &json);
    let port = free_port();
    let config = format!(
        "listen: 127.0.0.1:{port}
evaluation_interval: 1s
scrape: {{interval: 1s, timeout: 500ms}}
discovery:
  - file_sd: {{files: ['{}/*.json'], refresh: 2s}}
",
        targets.display()
    );
    let d = Daemon::start(dir.path(), &config, port, Some(1024));

    let refused =
        d.until_metric("llm_slo_discovery_targets_refused", &[("reason", "max_targets")], |v| v > 0.0).await as usize;
    let limit = d.metric("llm_slo_discovery_targets_limit", &[]).await.unwrap() as usize;
    assert!(limit > 0 && limit < 512, "1024 descriptors leave room for a few hundred targets, not {limit}");
    assert_eq!(refused, FLEET - limit, "every target past the limit is refused");
    assert_eq!(d.metric("llm_slo_discovery_targets_refused", &[("reason", "name_taken")]).await, Some(0.0));
    d.until_log("discovery_limits.max_targets lowered from 10000 to").await;

    // Several refreshes re-read the file: the same targets stay, nothing vanishes or comes
    // back, and the refused ones are counted once.
    let settled = Instant::now();
    while settled.elapsed() < Duration::from_secs(9) {
        let (status, _) = d.get("/healthz").await.expect("the daemon keeps serving");
        assert_eq!(status, 200);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let report = d.report().await;
    let names: Vec<&str> =
        report["targets"].as_array().unwrap().iter().map(|t| t["target"].as_str().unwrap()).collect();
    let first: Vec<String> = (0..limit).map(|i| format!("t{i:06}")).collect();
    assert_eq!(names, first, "the kept targets are the first {limit} by name");
    let (status, _) = d.get(&format!("/api/v1/report?target=t{limit:06}")).await.unwrap();
    assert_eq!(status, 404, "the first refused target is not evaluated");
    let total = d.metric("llm_slo_discovery_targets_refused_total", &[("reason", "max_targets")]).await;
    assert_eq!(total, Some(refused as f64), "refusals are counted once, not every refresh");
    let fds = d.metric("process_open_fds", &[]).await.unwrap();
    assert!(fds < 1024.0 - 64.0, "the descriptors in use ({fds}) stay clear of the limit");

    let log = d.log();
    assert_eq!(lines_with(&log, &["target vanished"]), 0, "targets flapped:\n{log}");
    assert_eq!(lines_with(&log, &["target added"]), limit, "each kept target is added once");
    assert_eq!(lines_with(&log, &["more targets than discovery_limits.max_targets"]), 1, "{log}");
    assert_eq!(lines_with(&log, &["discovery_limits.max_targets lowered from 10000 to"]), 1, "{log}");
    assert!(lines_with(&log, &["file_sd:"]) == 0, "the file never failed to read:\n{log}");
    // A line when a target is added and one when its first scrape fails; nothing per scrape.
    let lines = log.lines().count();
    assert!(lines < 2 * limit + 50, "{lines} log lines for {limit} targets in 10 s");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_file_or_directory_that_cannot_be_read_keeps_its_targets_and_is_logged_once() {
    let engine = Fixture::counting(|n| vllm_body(n, 1_700_000_000.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets");
    std::fs::create_dir(&targets).unwrap();
    let a = targets.join("a.json");
    let good = format!(r#"[{{"targets": ["{}"], "labels": {{"target": "vllm-a"}}}}]"#, engine.addr);
    write(&a, &good);
    let port = free_port();
    // A refresh shorter than the poll: every poll reads every file again.
    let config = format!(
        "listen: 127.0.0.1:{port}
evaluation_interval: 200ms
scrape: {{interval: 200ms, timeout: 150ms}}
discovery:
  - file_sd: {{files: ['{}/*.json'], refresh: 200ms}}
",
        targets.display()
    );
    let d = Daemon::start(dir.path(), &config, port, None);
    let present = |r: &serde_json::Value| {
        r["targets"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["target"] == "vllm-a" && t["health"]["vanished_ms"].is_null()))
    };
    let until_present = async |what: &str| {
        let began = Instant::now();
        while began.elapsed() < PATIENCE {
            if present(&d.report().await) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}\nlog:\n{}", d.log());
    };
    d.until_metric("llm_slo_target_up", &[("target", "vllm-a")], |v| v == 1.0).await;

    // 1. A broken file: kept, and logged once however many times it is read again (at a
    // 200ms refresh, many times in 3.5 s).
    write(&a, "[{\"targets\": [\"oops\"");
    d.until_log("file_sd:").await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(present(&d.report().await), "a broken file dropped its target\n{}", d.log());
    assert_eq!(lines_with(&d.log(), &["file_sd:", "a.json"]), 1, "logged once per version:\n{}", d.log());

    // 2. The file turns into a symlink to itself: its metadata cannot be read (ELOOP).
    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink(&a, &a).unwrap();
    d.until_log("cannot read its metadata").await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(present(&d.report().await), "an unreadable file dropped its target\n{}", d.log());
    assert_eq!(lines_with(&d.log(), &["cannot read its metadata"]), 1, "{}", d.log());

    // 3. The directory cannot be listed: every file in it keeps its targets.
    std::fs::remove_file(&a).unwrap();
    write(&a, &good);
    until_present("the file readable again").await;
    std::fs::rename(&targets, dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink(&targets, &targets).unwrap();
    d.until_log("file_sd: cannot expand").await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(present(&d.report().await), "a directory that cannot be read dropped its targets\n{}", d.log());
    assert_eq!(lines_with(&d.log(), &["file_sd: cannot expand"]), 1, "{}", d.log());
    // Each failed read is counted.
    d.until_metric("llm_slo_discovery_errors_total", &[("discovery", "file_sd")], |errors| errors >= 6.0).await;
    assert_eq!(lines_with(&d.log(), &["target vanished"]), 0, "{}", d.log());

    // 4. Readable, and the file removed: now the target is gone.
    std::fs::remove_file(&targets).unwrap();
    std::fs::rename(dir.path().join("real"), &targets).unwrap();
    std::fs::remove_file(&a).unwrap();
    let began = Instant::now();
    while present(&d.report().await) {
        assert!(began.elapsed() < PATIENCE, "a removed file keeps its target\n{}", d.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    d.stop();
}
