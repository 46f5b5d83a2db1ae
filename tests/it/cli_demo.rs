//! `goodput demo --config FILE`: the demo's engines watched under the user's config, that
//! config checked as `goodput check` does, and a taken `--listen` address explained.
//! (tests/it/demo_e2e.rs runs the demo on its embedded config.)

use crate::net;
use crate::support::PATIENCE;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");
const DEMO_CONFIG: &str = include_str!("../../config/demo.yaml");

/// Kills the demo (ours, by PID) when dropped, so that a failed assertion leaves nothing.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// config/demo.yaml with its SLOs renamed and only `sim-chat`: a config of the user's.
fn user_config() -> String {
    let text =
        DEMO_CONFIG.replace("name: chat\n", "name: my-interactive\n").replace("name: batch\n", "name: my-offline\n");
    // Without sim-batch, and with an SLO that no longer names it.
    let start = text.find("  - name: sim-batch").unwrap();
    let end = text[start..].find("\nwindows:").unwrap() + start;
    let text = format!("{}{}", &text[..start], &text[end + 1..]);
    assert!(text.contains("my-interactive") && !text.contains("sim-batch"), "{text}");
    text
}

#[test]
fn demo_runs_the_users_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mine.yaml");
    std::fs::write(&cfg, user_config()).unwrap();
    // The ports are picked free before the demo binds them (its `--listen` here, its OTLP
    // receiver inside): another test may take one in between, so a demo that stops at
    // start on a taken address is started again on new ones; any other stop fails.
    let mut attempts = 0;
    let body = 'start: loop {
        attempts += 1;
        let port = net::free_port();
        let log = dir.path().join(format!("demo-{attempts}.log"));
        let mut demo = Killed(
            Command::new(BIN)
                .args(["demo", "--summary-every", "0", "--listen", &format!("127.0.0.1:{port}"), "-c"])
                .arg(&cfg)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(body) = net::get_body(port, "/metrics")
                && body.contains("llm_slo_target_up{target=\"sim-chat\"} 1")
                && body.contains("slo=\"my-interactive\"")
            {
                break 'start body;
            }
            if let Some(status) = demo.0.try_wait().unwrap() {
                let err = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(err.contains("in use") && attempts < 3, "the demo stopped ({status}):\n{err}");
                continue 'start;
            }
            assert!(Instant::now() < deadline, "the demo did not serve its config's SLOs within {PATIENCE:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // The user's SLOs, not the embedded ones, and only the engine the config names.
    assert!(!body.contains("slo=\"chat\"") && !body.contains("slo=\"batch\""), "embedded SLOs leaked");
    assert!(!body.contains("target=\"sim-batch\""), "an engine the config does not name");
}

#[test]
fn a_bad_demo_config_is_reported_like_check_does() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.yaml");
    std::fs::write(&cfg, DEMO_CONFIG.replace("windows: [1m, 5m, 15m, 1h]", "windows: [1m, soon]")).unwrap();
    let line = DEMO_CONFIG.lines().position(|l| l.starts_with("windows:")).unwrap() + 1;
    let out = Command::new(BIN).args(["demo", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("error: {}:{line}:", cfg.display())), "file:line:column: {err}");

    // A valid config without the demo's engines says what to name them.
    std::fs::write(&cfg, "targets:\n  - {name: llama, url: 'http://127.0.0.1:8000/metrics'}\n").unwrap();
    let out = Command::new(BIN).args(["demo", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no target is named sim-chat or sim-batch"), "{err}");
}

#[test]
fn demo_on_a_taken_address_says_to_pass_listen() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = Command::new(BIN)
        .args(["demo", "--summary-every", "0", "--listen", &addr.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cannot listen on {addr}")) && err.contains("in use"), "{err}");
    assert!(
        err.contains(&format!(
            "hint: another process listens on {addr}; stop it, or pass --listen with a free address"
        )),
        "{err}"
    );
    drop(taken);
}
