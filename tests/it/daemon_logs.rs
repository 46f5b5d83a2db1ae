//! A target that stays down is logged once when it goes down, not on every failed scrape:
//! with 200 such targets at a 5 s interval, one warning per scrape was thousands of lines a
//! minute. The real binary scrapes a port nothing listens on, ten times a second. And the
//! human format writes no colour codes into a pipe or a log file.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::PATIENCE;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// The daemon binary, logging in `format` to a pipe, scraping one target where nothing
/// listens ten times a second: the child, the daemon's port, and the folder of its config
/// (kept alive by the caller).
fn daemon_with_a_dead_target(format: &str) -> (Child, u16, tempfile::TempDir) {
    // Free ports: bind, read, release. Nothing listens on `refused` afterwards.
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (port, refused) = (free(), free());
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{port}\nscrape: {{interval: 100ms, timeout: 80ms}}\n\
             targets:\n  - {{name: gone, url: 'http://127.0.0.1:{refused}/metrics'}}\n"
        ),
    )
    .unwrap();
    let child = Command::new(BIN)
        .args(["--log-format", format, "run", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, port, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_stays_down_is_logged_once() {
    let (child, port, _dir) = daemon_with_a_dead_target("json");

    // Wait until the daemon has failed at least 15 scrapes of the target.
    goodput::scrape::install_crypto_provider();
    let report_url = format!("http://127.0.0.1:{port}/api/v1/report");
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let began = std::time::Instant::now();
    let mut failures = 0;
    while failures < 15 && began.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The daemon may not listen yet, or publish its first report a moment later.
        let Ok(resp) = client.get(&report_url).send().await else { continue };
        let Ok(body) = resp.text().await else { continue };
        let Ok(report) = serde_json::from_str::<serde_json::Value>(&body) else { continue };
        failures = report["targets"][0]["health"]["errors_total"]["connect"].as_u64().unwrap_or(0);
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(failures >= 15, "only {failures} failed scrapes counted:\n{stderr}");

    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
            v["level"] == "WARN" && v["fields"]["message"] == "scrape failed; target is down"
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{failures} failed scrapes gave these warnings:\n{}", warnings.join("\n"));
    assert!(warnings[0].contains("connect"), "the warning says why: {}", warnings[0]);
}

#[test]
fn human_logs_written_to_a_pipe_carry_no_colour_codes() {
    let (mut child, _, _dir) = daemon_with_a_dead_target("human");
    // Read stderr until the start and the target going down are both logged, then stop.
    let mut pipe = std::io::BufReader::new(child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut stderr = Vec::new();
        let logged = |s: &[u8]| {
            let s = String::from_utf8_lossy(s);
            s.contains("goodput is listening") && s.contains("target is down")
        };
        while !logged(&stderr) {
            if std::io::BufRead::read_until(&mut pipe, b'\n', &mut stderr).unwrap_or(0) == 0 {
                break;
            }
        }
        (stderr, pipe)
    });
    let began = std::time::Instant::now();
    while !reader.is_finished() && began.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    child.wait().unwrap();
    // The pipe ends with the daemon, so the reader returns even if a line never came.
    let (mut stderr, mut pipe) = reader.join().unwrap();
    std::io::Read::read_to_end(&mut pipe, &mut stderr).unwrap();
    let stderr = String::from_utf8_lossy(&stderr);
    assert!(stderr.contains("goodput is listening"), "the start was logged:\n{stderr}");
    assert!(stderr.contains("target is down"), "the failing target was logged:\n{stderr}");
    assert!(!stderr.contains('\u{1b}'), "ANSI escape codes in piped logs:\n{stderr:?}");
}
