//! Real Alertmanagers for the alerting tests: find the Debian `prometheus-alertmanager`
//! binary (or skip), run it on 127.0.0.1 with clustering off and its own storage, stop and
//! restart it on the same port and storage, and read its API v2 and /metrics.
//!
//! It reaches `crate::tools` (tests/it/tools), a module of every binary that includes it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Alertmanager binary under Debian's name or upstream's; `None` (with a SKIP note) when
/// missing, a panic when missing and GOODPUT_REQUIRE_TOOLS=1 (crate::tools).
pub fn alertmanager_binary() -> Option<PathBuf> {
    crate::tools::require_any(&["prometheus-alertmanager", "alertmanager"])
}

pub use crate::net::free_port;

/// One Alertmanager with a fixed port and storage directory, so that a restart is the same
/// Alertmanager as far as its clients can tell.
pub struct Am {
    bin: PathBuf,
    pub dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Am {
    pub fn new(bin: &Path, root: &Path, name: &str) -> Am {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("am.yml"),
            "route: {receiver: blackhole, group_wait: 1s, group_interval: 1s}\nreceivers: [{name: blackhole}]\n",
        )
        .unwrap();
        Am { bin: bin.to_path_buf(), dir, port: free_port(), child: None }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn start(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("am.log")).unwrap();
        let child = Command::new(&self.bin)
            .arg(format!("--config.file={}", self.dir.join("am.yml").display()))
            .arg(format!("--storage.path={}", self.dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start alertmanager");
        self.child = Some(child);
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Am {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client for Alertmanager's HTTP API (no proxies, short timeouts).
pub struct Http(pub reqwest::Client);

impl Http {
    pub fn new() -> Http {
        Http(reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap())
    }

    /// GET /api/v2/alerts: the active alerts (resolved ones are not listed).
    pub async fn alerts(&self, am: &Am) -> Option<Vec<serde_json::Value>> {
        let r = self.0.get(format!("{}/api/v2/alerts", am.url())).send().await.ok()?;
        serde_json::from_slice::<Vec<serde_json::Value>>(&r.bytes().await.ok()?).ok()
    }

    /// The sorted alert names of [`Http::alerts`].
    pub async fn names(&self, am: &Am) -> Option<Vec<String>> {
        let mut v: Vec<String> =
            self.alerts(am).await?.iter().filter_map(|a| a["labels"]["alertname"].as_str().map(String::from)).collect();
        v.sort();
        Some(v)
    }

    /// `alertmanager_alerts_received_total{status="resolved"}`: resolutions Alertmanager was sent
    /// (expiry of an alert does not count here).
    pub async fn resolved_received(&self, am: &Am) -> Option<f64> {
        let body = self.0.get(format!("{}/metrics", am.url())).send().await.ok()?.text().await.ok()?;
        Some(
            body.lines()
                .filter(|l| l.starts_with("alertmanager_alerts_received_total{") && l.contains("status=\"resolved\""))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum(),
        )
    }

    pub async fn ready(&self, am: &Am) -> bool {
        let r = self.0.get(format!("{}/-/ready", am.url())).send().await;
        r.is_ok_and(|r| r.status().is_success())
    }

    /// Waits (at most `limit`) for `am` to answer /-/ready; panics naming its log otherwise.
    pub async fn wait_ready(&self, am: &Am, limit: Duration) {
        let t = Instant::now();
        while !self.ready(am).await {
            assert!(t.elapsed() < limit, "alertmanager never became ready; see {:?}", am.dir.join("am.log"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
