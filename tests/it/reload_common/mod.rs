//! The real `goodput run` binary with its config laid out as Kubernetes mounts a ConfigMap
//! (`config.yaml → ..data/config.yaml`, `..data → ..<timestamp>`), for the reload tests:
//! a new version is published by swapping the `..data` symlink atomically, as kubelet does.
//!
//! It reaches `crate::common` and `crate::tools`, modules of the harness beside it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{metrics_samples, sample_value};
use crate::support::PATIENCE;

pub const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// Writes `text` as ConfigMap version `version` in `dir` and swaps `..data` to it atomically
/// (a new symlink renamed over the old one).
pub fn publish(dir: &Path, version: u32, text: &str) {
    let v = format!("..2026_12_01_{version:04}");
    std::fs::create_dir(dir.join(&v)).unwrap();
    std::fs::write(dir.join(&v).join("config.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&v, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

/// A port free a moment ago (bound, then released).
pub use crate::net::free_port;

/// A `goodput run` process on a ConfigMap-style config, stopped by its PID when dropped.
pub struct Daemon {
    pub child: Child,
    pub port: u16,
    pub log: PathBuf,
    pub client: reqwest::Client,
    /// The ConfigMap directory; `config.yaml` in it is what the daemon reads.
    pub dir: PathBuf,
    version: u32,
}

impl Daemon {
    /// Publishes `text` as the first version in `dir` and starts the daemon on it, listening
    /// on `port` (which `text` names), with `args` after `run --config FILE`.
    pub fn start(dir: &Path, port: u16, text: &str, args: &[&str]) -> Daemon {
        publish(dir, 1, text);
        std::os::unix::fs::symlink("..data/config.yaml", dir.join("config.yaml")).unwrap();
        let log = dir.join("daemon.log");
        let child = Command::new(BIN)
            .args(["--log-format", "human", "run", "--config"])
            .arg(dir.join("config.yaml"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // Generous: a test that reads a value once must not fail because a loaded machine was
        // slow to answer one request.
        let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build().unwrap();
        Daemon { child, port, log, client, dir: dir.to_path_buf(), version: 1 }
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.yaml")
    }

    /// Swaps `..data` to a new version holding `text`; the daemon sees it within a second.
    pub fn publish(&mut self, text: &str) {
        self.version += 1;
        publish(&self.dir, self.version, text);
    }

    /// Publishes `text` and waits for the reload's log line; returns it.
    pub async fn reload(&mut self, text: &str) -> String {
        let before = self.reloads();
        self.publish(text);
        self.until_log("a reload", |log| log.matches("config reloaded").count() > before).await;
        self.log().lines().filter(|l| l.contains("config reloaded")).nth(before).unwrap().to_string()
    }

    /// How many reloads applied so far.
    pub fn reloads(&self) -> usize {
        self.log().matches("config reloaded").count()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub async fn json(&self, path: &str) -> Option<serde_json::Value> {
        let r = self.client.get(self.url(path)).send().await.ok()?;
        serde_json::from_str(&r.text().await.ok()?).ok()
    }

    /// Every sample on /metrics.
    pub async fn samples(&self) -> Option<Vec<(String, HashMap<String, String>, f64)>> {
        let r = self.client.get(self.url("/metrics")).send().await.ok()?;
        Some(metrics_samples(&r.text().await.ok()?))
    }

    /// `name`'s value on /metrics (first series).
    pub async fn metric(&self, name: &str) -> Option<f64> {
        self.metric_at(name, &[]).await
    }

    /// The value of the first series of `name` with all of `labels`.
    pub async fn metric_at(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        sample_value(&self.samples().await?, name, labels)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls the report until `ok` holds, for up to [`PATIENCE`].
    pub async fn until(&self, what: &str, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let began = std::time::Instant::now();
        while began.elapsed() < PATIENCE {
            if let Some(r) = self.json("/api/v1/report").await
                && ok(&r)
            {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: not seen within {PATIENCE:?}\nlog:\n{}", self.log());
    }

    /// Polls /metrics until `name` has a value for which `ok` holds, for up to [`PATIENCE`].
    pub async fn until_metric(&self, name: &str, ok: impl Fn(f64) -> bool) -> f64 {
        self.until_metric_at(name, &[], ok).await
    }

    /// Polls /metrics until the series of `name` with `labels` has a value for which `ok`
    /// holds, for up to [`PATIENCE`].
    pub async fn until_metric_at(&self, name: &str, labels: &[(&str, &str)], ok: impl Fn(f64) -> bool) -> f64 {
        let began = std::time::Instant::now();
        while began.elapsed() < PATIENCE {
            if let Some(v) = self.metric_at(name, labels).await
                && ok(v)
            {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{name}{labels:?}: no awaited value within {PATIENCE:?} (last {:?})\nlog:\n{}",
            self.metric_at(name, labels).await,
            self.log()
        );
    }

    /// Polls the log until `ok` holds, for up to [`PATIENCE`].
    pub async fn until_log(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let began = std::time::Instant::now();
        while began.elapsed() < PATIENCE {
            if ok(&self.log()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: not in the log within {PATIENCE:?}:\n{}", self.log());
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// SIGTERM, and the exit status must be success.
    pub fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit {status:?}\nlog:\n{}", self.log());
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

/// The target's entry in /api/v1/report.
pub fn target<'a>(r: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    r["targets"].as_array()?.iter().find(|t| t["target"] == name)
}

pub fn up(r: &serde_json::Value, name: &str) -> bool {
    target(r, name).is_some_and(|t| t["health"]["up"] == true)
}

/// Coverage of the target's `window` in the report: falls back near 0 if its windows are
/// reset.
pub fn coverage(r: &serde_json::Value, name: &str, window: &str) -> f64 {
    let Some(t) = target(r, name) else { return 0.0 };
    t["models"][0]["windows"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["window"] == window)
        .map_or(0.0, |w| w["coverage"].as_f64().unwrap_or(0.0))
}
