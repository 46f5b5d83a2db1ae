//! A `state_dir` snapshot that cannot be trusted, through the `goodput` binary
//! (docs/config.md#state_dir): a last snapshot too slow for the shutdown bound, a truncated
//! file, a file that is not a snapshot at all, and a FIFO or a directory where the file
//! should be.
//!
//! The slow last snapshot is held by the `test-hooks` feature (`GOODPUT_TEST_SNAPSHOT_DELAY`):
//! a store genuinely too large for the bound takes minutes to build, a held one does not.

use crate::common;
use crate::net;
use crate::support::PATIENCE;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Fixture, metrics_samples, vllm_body};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");
const STATE: &str = "goodput.state";

type Samples = Vec<(String, HashMap<String, String>, f64)>;

/// A daemon started by the test, killed when the test ends however it ends.
struct Daemon {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    fn start(dir: &Path, targets: &[(&str, SocketAddr)], env: &[(&str, &str)]) -> Daemon {
        let port = net::free_port();
        let list: Vec<String> =
            targets.iter().map(|(name, addr)| format!("{{name: {name}, url: 'http://{addr}/metrics'}}")).collect();
        let cfg = dir.join("config.yaml");
        std::fs::write(
            &cfg,
            format!(
                "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
                 targets: [{}]\nwindows: [1m]\nstate_dir: {}\nstate_snapshot_interval: 1s\n",
                list.join(", "),
                dir.join("state").display()
            ),
        )
        .unwrap();
        let log = dir.join(format!("goodput-{port}.log"));
        let mut cmd = Command::new(BIN);
        cmd.args(["run", "--config"]).arg(&cfg).env("RUST_LOG", "info").stdout(Stdio::null());
        cmd.stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Daemon { child: cmd.spawn().expect("start goodput"), log, port }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn samples(&self) -> Option<Samples> {
        let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(3)).build().unwrap();
        let r = client.get(format!("http://127.0.0.1:{}/metrics", self.port)).send().await.ok()?;
        Some(metrics_samples(&r.text().await.ok()?))
    }

    /// The first /metrics on which `ok` holds, waiting at most `limit`.
    async fn wait(&mut self, limit: Duration, what: &str, ok: impl Fn(&Samples) -> bool) -> Samples {
        let t = Instant::now();
        loop {
            if let Some(s) = self.samples().await
                && ok(&s)
            {
                return s;
            }
            assert!(self.child.try_wait().unwrap().is_none(), "goodput exited waiting for {what}:\n{}", self.log());
            assert!(t.elapsed() < limit, "no {what} after {limit:?}:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, then how long the daemon took to exit (at most `limit`, or the test fails).
    async fn terminate(&mut self, limit: Duration) -> Duration {
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) }, 0);
        let t = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "exit status {status} after SIGTERM:\n{}", self.log());
                return t.elapsed();
            }
            assert!(t.elapsed() < limit, "still running {limit:?} after SIGTERM:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn value(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    s.iter().find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v))).map(|x| x.2)
}

fn restored(s: &Samples, part: &str, result: &str) -> Option<f64> {
    value(s, "llm_slo_state_restore_total", &[("part", part), ("result", result)])
}

fn snapshotted(s: &Samples) -> bool {
    value(s, "llm_slo_state_last_snapshot_timestamp_seconds", &[]).is_some_and(|t| t > 0.0)
}

async fn fixtures() -> (Fixture, Fixture) {
    (Fixture::counting(|n| vllm_body(n, 1.0)).await, Fixture::counting(|n| vllm_body(n, 2.0)).await)
}

/// The files in `dir`, by name.
fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The state_restore line of the log (the restore logs one line at start).
/// Where the name of `target`'s window-store section starts in a snapshot file, found by
/// walking its frames (docs/architecture.md#state-that-survives-restarts): a 20-byte
/// header, then `length u32, crc u32, postcard(Section)` frames, a section beginning with
/// its target's name (a varint length and the bytes), its identity (a varint) and its part's
/// tag (0 for the window store). Other parts name the target too, so a search for the name
/// alone would find whichever is last.
fn windows_section(bytes: &[u8], target: &str) -> usize {
    fn varint(b: &[u8], at: &mut usize) -> u64 {
        let mut v = 0u64;
        for shift in (0..).step_by(7) {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
        }
        v
    }
    let mut at = 20;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let body = at + 8;
        let mut p = body;
        if len > 0 {
            let name_len = varint(bytes, &mut p) as usize;
            let name = p;
            p += name_len;
            if &bytes[name..p] == target.as_bytes() {
                varint(bytes, &mut p);
                if varint(bytes, &mut p) == 0 {
                    return name;
                }
            }
        }
        at = body + len;
    }
    panic!("no window-store section of {target} in the snapshot")
}

fn restore_line(log: &str) -> String {
    log.lines().filter(|l| l.contains("goodput::state")).collect::<Vec<_>>().join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_snapshot_too_slow_for_the_bound_keeps_the_previous_one_and_exits_in_time() {
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = fixtures().await;
    let targets = [("alpha", a.addr), ("bravo", b.addr)];
    // Each window store of the last snapshot is held 3 s: 6 s for the two, past the 5 s bound.
    let mut d = Daemon::start(tmp.path(), &targets, &[("GOODPUT_TEST_SNAPSHOT_DELAY", "3s")]);
    d.wait(PATIENCE, "a snapshot", snapshotted).await;
    let took = d.terminate(Duration::from_secs(10)).await;
    let log = d.log();
    assert!(took < Duration::from_secs(5), "exited {took:?} after SIGTERM, past the 5 s bound:\n{log}");
    let state = tmp.path().join("state");
    assert_eq!(files(&state), [STATE], "nothing but the snapshot is left in state_dir:\n{log}");
    assert!(
        log.contains("last state snapshot") && log.contains("is kept"),
        "the log says the last snapshot was given up and which one is kept:\n{log}"
    );
    // The snapshot kept is whole: a restart restores both targets' windows from it.
    let mut d = Daemon::start(tmp.path(), &targets, &[]);
    let s = d.wait(PATIENCE, "the restore counted", |s| restored(s, "windows", "restored").is_some()).await;
    assert_eq!(restored(&s, "windows", "restored"), Some(2.0), "{}", d.log());
    for r in ["corrupt", "truncated"] {
        assert_eq!(restored(&s, "windows", r), Some(0.0), "{r}: {}", d.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_snapshot_restores_what_is_whole_and_names_what_it_lost() {
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = fixtures().await;
    let targets = [("alpha", a.addr), ("bravo", b.addr)];
    let file = tmp.path().join("state").join(STATE);
    let mut d = Daemon::start(tmp.path(), &targets, &[]);
    d.wait(PATIENCE, "a snapshot", snapshotted).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    d.terminate(Duration::from_secs(10)).await;

    // Cut inside bravo's window store (its section names it last): alpha's comes back whole.
    let bytes = std::fs::read(&file).unwrap();
    let at = |name: &str| windows_section(&bytes, name) + 40;
    let cut = at("bravo");
    assert!(cut < bytes.len(), "bravo's window store is more than 40 bytes");
    std::fs::write(&file, &bytes[..cut]).unwrap();
    let mut d = Daemon::start(tmp.path(), &targets, &[]);
    let s = d.wait(PATIENCE, "the restore", |s| restored(s, "windows", "restored").is_some()).await;
    let line = restore_line(&d.log());
    assert_eq!(restored(&s, "windows", "restored"), Some(1.0), "{line}");
    assert_eq!(restored(&s, "windows", "truncated"), Some(1.0), "{line}");
    assert!(line.contains("bravo: windows") && line.contains(&format!("byte {cut}")), "names what it lost:\n{line}");
    // Sections after the cut (the capacity histories come after every window store) are
    // lost too; alpha's window store, before it, is not.
    assert!(
        !line.contains("alpha: windows") && !line.contains("alpha, bravo: windows"),
        "alpha's windows whole:\n{line}"
    );
    let kept = std::fs::read(tmp.path().join("state").join(format!("{STATE}.corrupt"))).unwrap();
    assert_eq!(kept, bytes[..cut], "the damaged file is kept aside");
    d.wait(PATIENCE, "a snapshot", snapshotted).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    d.terminate(Duration::from_secs(10)).await;

    // Cut inside alpha's: both window stores are lost, each named.
    let bytes = std::fs::read(&file).unwrap();
    let cut = at("alpha");
    std::fs::write(&file, &bytes[..cut]).unwrap();
    let mut d = Daemon::start(tmp.path(), &targets, &[]);
    let s = d.wait(PATIENCE, "the restore", |s| restored(s, "windows", "truncated").is_some()).await;
    let line = restore_line(&d.log());
    assert_eq!(restored(&s, "windows", "truncated"), Some(2.0), "{line}");
    assert_eq!(restored(&s, "windows", "restored"), Some(0.0), "{line}");
    assert!(line.contains("alpha: windows") && line.contains("bravo: windows"), "names both targets:\n{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_are_not_a_snapshot_and_are_kept_aside() {
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let (a, _) = fixtures().await;
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    // Not random from run to run: a test that fails fails the same way again.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(state.join(STATE), &noise).unwrap();
    let mut d = Daemon::start(tmp.path(), &[("alpha", a.addr)], &[]);
    let s = d.wait(PATIENCE, "the restore", |s| restored(s, "file", "not_a_snapshot").is_some()).await;
    let line = restore_line(&d.log());
    assert_eq!(restored(&s, "file", "not_a_snapshot"), Some(1.0), "{line}");
    assert!(line.contains("not a goodput snapshot"), "{line}");
    assert!(!line.contains("partly restored"), "{line}");
    assert_eq!(std::fs::read(state.join(format!("{STATE}.corrupt"))).unwrap(), noise, "kept aside unchanged");
    assert!(line.contains(&format!("{STATE}.corrupt")), "the log says where it went:\n{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_or_a_directory_at_the_snapshot_path_fails_the_start_at_once() {
    goodput::scrape::install_crypto_provider();
    let (a, _) = fixtures().await;
    for kind in ["FIFO", "directory"] {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let path = state.join(STATE);
        if kind == "FIFO" {
            let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: mkfifo(3) with a NUL-terminated path the test owns.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        } else {
            std::fs::create_dir(&path).unwrap();
        }
        let mut d = Daemon::start(tmp.path(), &[("alpha", a.addr)], &[]);
        let t = Instant::now();
        let status = loop {
            if let Some(status) = d.child.try_wait().unwrap() {
                break status;
            }
            assert!(t.elapsed() < PATIENCE, "{kind}: still starting after {PATIENCE:?}:\n{}", d.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let log = d.log();
        assert!(!status.success(), "{kind}: the start fails:\n{log}");
        assert!(
            log.contains(path.to_str().unwrap()) && log.contains(kind),
            "{kind}: names the path and what it is:\n{log}"
        );
        assert!(log.contains("remove it"), "{kind}: says what to do:\n{log}");
    }
}
