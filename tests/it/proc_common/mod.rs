//! The `goodput` binary as a child process for the hostile-client tests: started with a
//! config under an optional descriptor limit, its log kept in a file, its memory read from
//! /proc, and the small HTTP helpers those tests share.
#![allow(dead_code)]

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::PATIENCE;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

pub struct Daemon {
    pub child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd`'s child under an `RLIMIT_NOFILE` of `n`, soft and hard, so that it cannot
/// raise it.
pub fn limit_nofile(cmd: &mut Command, n: u64) {
    // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: n, rlim_max: n };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub async fn free_port() -> u16 {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port()
}

impl Daemon {
    /// Starts `goodput run` with `yaml` (after `listen:`), under an `RLIMIT_NOFILE` of
    /// `nofile` (soft and hard, so that the daemon cannot raise it), and waits until it is
    /// ready.
    pub async fn start(yaml: &str, nofile: Option<u64>) -> Daemon {
        let port = free_port().await;
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config.yaml");
        std::fs::write(&cfg, format!("listen: 127.0.0.1:{port}\n{yaml}")).unwrap();
        let log = dir.path().join("stderr.log");
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--config"])
            .arg(&cfg)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(n) = nofile {
            limit_nofile(&mut cmd, n);
        }
        let d = Daemon { child: cmd.spawn().unwrap(), port, log, _dir: dir };
        let began = Instant::now();
        loop {
            if let Some((200, _)) = try_get(port, "/readyz", Duration::from_secs(2)).await {
                return d;
            }
            assert!(began.elapsed() < PATIENCE, "daemon never became ready:\n{}", d.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What the daemon has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A line of /proc/PID/status in KiB (`VmHWM`, `VmRSS`).
    pub fn memory_kib(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("no {key} in {status}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// /metrics on a fresh connection within `limit`, as `values` reads it.
    pub async fn metrics(&self, limit: Duration) -> Option<HashMap<String, f64>> {
        let (status, body) = try_get(self.port, "/metrics", limit).await?;
        assert_eq!(status, 200, "{body}");
        Some(values(&body))
    }
}

pub fn client(limit: Duration) -> reqwest::Client {
    goodput::scrape::install_crypto_provider();
    reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).timeout(limit).build().unwrap()
}

/// GET on a fresh connection; `None` when it fails or takes longer than `limit`.
pub async fn try_get(port: u16, path: &str, limit: Duration) -> Option<(u16, String)> {
    let r = client(limit).get(format!("http://127.0.0.1:{port}{path}")).send().await.ok()?;
    Some((r.status().as_u16(), r.text().await.ok()?))
}

/// Every sample of /metrics, keyed `name` or `name{v1,v2}` with the label values in the
/// order they are written.
pub fn values(body: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let key = match series.split_once('{') {
            None => series.to_string(),
            Some((name, labels)) => {
                let vals: Vec<&str> = labels
                    .trim_end_matches('}')
                    .split("\",")
                    .filter_map(|kv| kv.split_once('=').map(|(_, v)| v.trim_matches('"')))
                    .collect();
                format!("{name}{{{}}}", vals.join(","))
            }
        };
        out.insert(key, value.parse().unwrap_or(f64::NAN));
    }
    out
}
