//! `goodput run --on-invalid-config wait` in the real binary: a config that does not
//! validate at start leaves the process up, serving /healthz, /readyz (503), /metrics
//! (`llm_slo_config_waiting` 1) and the errors at `/`; the first valid version of the file,
//! written over it or swapped in as Kubernetes swaps a ConfigMap's `..data` symlink, starts
//! the daemon in the same process on the same address; SIGTERM while waiting exits 0 at
//! once. Without the flag an invalid config still exits 1 with the errors.

use crate::net;
use crate::support::PATIENCE;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// The child, killed (by PID) if a failed assertion leaves it running.
struct Goodput {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Goodput {
    fn start(config: &Path, extra: &[&str], env: &[(&str, &str)], port: u16, log: PathBuf) -> Goodput {
        let child = Command::new(BIN)
            .args(["--log-format", "human", "run", "--config"])
            .arg(config)
            .args(extra)
            .env_remove("GOODPUT_ON_INVALID_CONFIG")
            .env_remove("GOODPUT_STANDBY_LISTEN")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Goodput { child, port, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls until `ok` holds of the body of a 200 to `GET path`, for up to [`PATIENCE`].
    fn until(&mut self, path: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(body) = net::get_body(self.port, path)
                && ok(&body)
            {
                return body;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("{what}: goodput exited ({status}) first\nlog:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "{what}: not seen within {PATIENCE:?}\nlog:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The status line of `GET path`.
    fn status(&self, path: &str) -> String {
        let raw = net::get_raw(self.port, path).unwrap_or_default();
        raw.lines().next().unwrap_or_default().to_string()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0);
    }

    /// Sends SIGTERM and returns the exit code and how long the exit took.
    fn terminate(&mut self) -> (Option<i32>, Duration) {
        self.signal(libc::SIGTERM);
        let began = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return (s.code(), began.elapsed());
            }
            assert!(began.elapsed() < Duration::from_secs(10), "no exit within 10 s of SIGTERM\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Goodput {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A config that validates: one target (down: nothing listens on port 1) evaluated every
/// 200 ms, so that the report's families appear within a second.
fn valid(port: u16) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nevaluation_interval: 200ms\nscrape: {{interval: 200ms, timeout: 150ms}}\n\
         targets:\n  - {{name: e, url: 'http://127.0.0.1:1/metrics'}}\n"
    )
}

/// The same with a URL the validation refuses, on line 5; `listen` still readable.
fn invalid(port: u16) -> String {
    valid(port).replace("http://127.0.0.1:1/metrics", "ftp://x/<e>")
}

/// Writes `text` as a new ConfigMap version in `dir` and swaps `..data` to it atomically.
fn publish(dir: &Path, version: u32, text: &str) {
    let v = format!("..2026_12_01_{version:04}");
    std::fs::create_dir(dir.join(&v)).unwrap();
    std::fs::write(dir.join(&v).join("config.yaml"), text).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&v, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

fn has_line(body: &str, line: &str) -> bool {
    body.lines().any(|l| l == line)
}

/// While waiting: up, healthy, not ready, the gauges, the errors; not the daemon's families.
fn assert_waiting(g: &mut Goodput, error_at: &str) {
    let metrics = g.until("/metrics", "the waiting gauge", |b| has_line(b, "llm_slo_config_waiting 1.0"));
    assert!(has_line(&metrics, "llm_slo_config_last_reload_successful 0.0"), "{metrics}");
    assert!(!metrics.contains("llm_slo_target_up") && !metrics.contains("llm_slo_http_connections"), "{metrics}");
    assert_eq!(g.status("/healthz"), "HTTP/1.1 200 OK");
    assert_eq!(g.status("/readyz"), "HTTP/1.1 503 Service Unavailable");
    let page = net::get_body(g.port, "/").unwrap_or_default();
    assert!(page.contains(error_at), "the page does not list {error_at:?}:\n{page}");
    assert!(g.log().contains(error_at), "the log does not say {error_at:?}:\n{}", g.log());
}

/// Running: the report's families on the same address, the waiting gauge at 0.
fn assert_running(g: &mut Goodput) {
    let metrics = g.until("/metrics", "the daemon's report", |b| has_line(b, "llm_slo_target_up{target=\"e\"} 0.0"));
    assert!(has_line(&metrics, "llm_slo_config_waiting 0.0"), "{metrics}");
    assert!(has_line(&metrics, "llm_slo_config_last_reload_successful 1.0"), "{metrics}");
    assert!(g.log().contains("the config is valid: starting"), "{}", g.log());
}

/// The ConfigMap layout, a config whose `listen` reads though it does not validate: the
/// wait serves on that address (GOODPUT_ON_INVALID_CONFIG, no --standby-listen), survives
/// SIGHUP, and the swap to a valid version starts the daemon there.
#[test]
fn a_configmap_swap_to_a_valid_config_starts_the_daemon_on_the_same_address() {
    let port = net::free_port();
    let dir = tempfile::tempdir().unwrap();
    publish(dir.path(), 1, &invalid(port));
    std::os::unix::fs::symlink("..data/config.yaml", dir.path().join("config.yaml")).unwrap();
    let config = dir.path().join("config.yaml");
    let env = [("GOODPUT_ON_INVALID_CONFIG", "wait")];
    let mut g = Goodput::start(&config, &[], &env, port, dir.path().join("goodput.log"));
    let at = format!("{}:5:20: url: unsupported URL", config.display());
    assert_waiting(&mut g, &at);
    let page = net::get_body(port, "/").unwrap();
    assert!(page.contains("&quot;ftp://x/&lt;e&gt;&quot;") && !page.contains("<e>"), "escaped: {page}");

    // SIGHUP reads the file again; still invalid, still waiting.
    g.signal(libc::SIGHUP);
    let deadline = Instant::now() + PATIENCE;
    while !g.log().contains("SIGHUP: reading the config again") {
        assert!(Instant::now() < deadline, "SIGHUP not logged\n{}", g.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_waiting(&mut g, &at);

    publish(dir.path(), 2, &valid(port));
    assert_running(&mut g);
    assert_eq!(g.status("/readyz"), "HTTP/1.1 200 OK");
    let (code, _) = g.terminate();
    assert_eq!(code, Some(0), "{}", g.log());
}

/// A plain file that is not even YAML (so no `listen` of its own): the wait serves on
/// --standby-listen, and rewriting the file with a valid config starts the daemon, which
/// binds that address once the wait has let it go.
#[test]
fn rewriting_a_file_that_is_not_yaml_starts_the_daemon() {
    let port = net::free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "listen: 127.0.0.1:1\ntargets:\n  - name: e\n   url: x\n").unwrap();
    let addr = format!("127.0.0.1:{port}");
    let args = ["--on-invalid-config", "wait", "--standby-listen", &addr];
    let mut g = Goodput::start(&config, &args, &[], port, dir.path().join("goodput.log"));
    assert_waiting(&mut g, &format!("{}:4:", config.display()));

    std::fs::write(&config, valid(port)).unwrap();
    assert_running(&mut g);
    let (code, _) = g.terminate();
    assert_eq!(code, Some(0), "{}", g.log());
}

#[test]
fn sigterm_while_waiting_exits_0_at_once() {
    let port = net::free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("missing.yaml");
    let addr = format!("127.0.0.1:{port}");
    let args = ["--on-invalid-config", "wait", "--standby-listen", &addr];
    let mut g = Goodput::start(&config, &args, &[], port, dir.path().join("goodput.log"));
    assert_waiting(&mut g, "cannot read the config file");
    let (code, took) = g.terminate();
    assert_eq!(code, Some(0), "{}", g.log());
    assert!(took < Duration::from_secs(2), "SIGTERM took {took:?} to end the wait\n{}", g.log());
}

/// The default: the errors at file:line:column and exit 1, serving nothing.
#[test]
fn without_the_flag_an_invalid_config_exits_1() {
    let port = net::free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, invalid(port)).unwrap();
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&config)
        .env_remove("GOODPUT_ON_INVALID_CONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&format!("error: {}:5:20: url: unsupported URL", config.display())), "{stderr}");
    assert!(stderr.contains("1 error(s)"), "{stderr}");
}
