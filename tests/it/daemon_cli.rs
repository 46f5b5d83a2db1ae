//! The `goodput` binary: `check` exit codes and messages, `run` serving and stopping
//! cleanly on SIGTERM or saying what to change when its address is taken, and `record`
//! writing DIR/<name>/<unix-millis>.prom with its progress on stderr.

use crate::common;
use crate::net;
use crate::support::PATIENCE;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn check_accepts_the_example_config() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/example.yaml");
    let out = Command::new(BIN).args(["check", "--config"]).arg(&example).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("OK: "), "{stdout}");
    // The configured windows, and those the default burn-rate alerts add.
    assert!(
        stdout.contains(
            "windows 1m, 5m, 15m, 30m (read by alert rules), 1h, 6h (read by alert rules) at quantiles 0.5, 0.9, 0.95, 0.99"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("llama http://127.0.0.1:8000/metrics engine=auto every 5s timeout 3s"), "{stdout}");
}

#[test]
fn check_reports_errors_with_position_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "config.yaml",
        "targets:\n  - name: a\n    url: http://127.0.0.1:1/metrics\nscrape:\n  interval: 5s\n  intervall: 10s\n",
    );
    let out = Command::new(BIN).args(["check", "--config"]).arg(&cfg).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let expected = format!(
        "error: {}:6:3: unknown key \"intervall\" in scrape; expected one of interval, timeout, body_limit, gzip, follow_redirects, max_models, max_series, target_grace",
        cfg.display()
    );
    assert!(stderr.lines().any(|l| l == expected), "{stderr}");

    let missing = Command::new(BIN).args(["check", "--config", "/nonexistent/goodput.yaml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read the config file"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_and_stops_on_sigterm() {
    goodput::scrape::install_crypto_provider();
    let engine = common::Fixture::counting(|n| common::vllm_body(n, 1.0)).await;
    // A free port for the daemon: bind, read, release.
    let port = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "config.yaml",
        &format!(
            "listen: 127.0.0.1:{port}\nscrape: {{interval: 200ms, timeout: 150ms}}\ntargets:\n  - {{name: e, url: 'http://{}/metrics'}}\n",
            engine.addr
        ),
    );
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let mut ready = false;
    let began = Instant::now();
    while began.elapsed() < PATIENCE {
        if let Ok(r) = client.get(format!("{base}/readyz")).send().await
            && r.status() == 200
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !ready {
        let _ = child.kill();
        panic!("daemon never became ready");
    }
    let (_, report) = common::get(&format!("{base}/api/v1/report")).await;
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["targets"][0]["health"]["up"], true, "{report}");

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let began = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if began.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("daemon did not exit within 10 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    // JSON logs: every line is an object, and the shutdown was logged.
    for line in stderr.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }
    assert!(stderr.contains("shutting down"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_raw_bodies_named_by_unix_millis() {
    let engine = common::Fixture::counting(|n| format!("# TYPE c counter\nc_total {n}\n")).await;
    let out = tempfile::tempdir().unwrap();
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let url = format!("http://{}/metrics", engine.addr);
    let out_dir = out.path().to_path_buf();
    let status = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(["record", "--target", &url, "--interval", "200ms", "--duration", "1s", "--out"])
            .arg(&out_dir)
            .status()
    })
    .await
    .unwrap()
    .unwrap();
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!(status.success());
    // --name defaults to the URL's host.
    let dir = out.path().join("127.0.0.1");
    let mut files: Vec<(i64, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let t: i64 = name.strip_suffix(".prom").unwrap_or_else(|| panic!("stray file {name}")).parse().unwrap();
            (t, std::fs::read_to_string(dir.join(&name)).unwrap())
        })
        .collect();
    files.sort();
    // Ticks at 0, 200, …, 800 ms: five scrapes in one second (four if a loaded machine
    // made one scrape overrun its tick, which is then skipped, never bunched).
    assert!((4..=5).contains(&files.len()), "{files:?}");
    assert_eq!(engine.served(), files.len() as u64, "every served scrape was saved");
    for (i, (t, body)) in files.iter().enumerate() {
        assert!((before..=after).contains(t), "timestamp {t} outside the run");
        assert_eq!(body, &format!("# TYPE c counter\nc_total {}\n", i + 1), "raw body kept as served");
    }
    assert!(files.windows(2).all(|w| w[1].0 - w[0].0 >= 150), "{files:?}");
}

/// Kills the child (ours, by PID) when dropped, so that a failed assertion leaves no
/// simulator behind.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn record_shows_its_progress_and_a_summary_that_matches_the_files() {
    let port = net::free_port();
    let _sim = Killed(
        Command::new(BIN)
            .args(["simulate", "--profile", "steady", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + PATIENCE;
    while net::get_body(port, "/metrics").is_none() {
        assert!(Instant::now() < deadline, "the simulator did not serve /metrics within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let args = ["record", "--target", &url, "--name", "sim", "--interval", "500ms", "--duration", "6s", "--out"];
    let rec = Command::new(BIN).args(args).arg(out.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    let files = std::fs::read_dir(out.path().join("sim")).unwrap().count();
    assert!(files >= 8, "{files} scrapes in 6 s at 500ms");
    // A progress line after the first scrape, another after 5 s, then the summary.
    let progress: Vec<&str> = stderr.lines().filter(|l| l.starts_with("recording: ")).collect();
    assert!(progress.len() >= 2, "{stderr}");
    assert!(progress[0].starts_with("recording: 1 scrape(s) written, 0 failed, 0s of 6s"), "{stderr}");
    let summary = stderr.lines().last().unwrap();
    let want = format!("recorded {files} scrape(s) into {} (0 failed) in ", out.path().join("sim").display());
    assert!(summary.starts_with(&want), "the summary counts the files written: {summary}\n{stderr}");

    // --quiet: the summary alone.
    let quiet = tempfile::tempdir().unwrap();
    let args = ["record", "-q", "--target", &url, "--interval", "500ms", "--duration", "1s", "--out"];
    let rec = Command::new(BIN).args(args).arg(quiet.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("recorded "), "{stderr}");
}

#[test]
fn run_on_a_taken_address_says_to_change_listen() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "config.yaml",
        &format!("listen: {addr}\ntargets:\n  - {{name: e, url: 'http://127.0.0.1:1/metrics'}}\n"),
    );
    let out = Command::new(BIN).args(["run", "-c"]).arg(&cfg).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("cannot listen on {addr}")) && stderr.contains("in use"), "{stderr}");
    let hint = format!(
        "hint: another process listens on {addr}; stop it, or set `listen:` in {} to a free address",
        cfg.display()
    );
    assert!(stderr.contains(&hint), "{stderr}");
    drop(taken);
}
