//! `goodput demo` end to end: started as a user would, /metrics shows TTFT quantiles for
//! both simulated engines within 30 s, and Ctrl-C (SIGINT) stops everything cleanly.

use crate::net;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn demo_serves_ttft_for_both_engines_within_30s_and_stops_on_sigint() {
    let port = net::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["demo", "--listen", &format!("127.0.0.1:{port}"), "--summary-every", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut seen = (false, false);
    // The engines' load goes through their taps and they send spans: both request sources
    // show up beside the histograms.
    let mut sources = (false, false);
    while start.elapsed() < Duration::from_secs(30) && (seen != (true, true) || sources != (true, true)) {
        std::thread::sleep(Duration::from_millis(500));
        let Some(body) = net::get_raw(port, "/metrics") else { continue };
        for line in body.lines().filter(|l| l.starts_with("llm_slo_ttft_seconds{")) {
            seen.0 |= line.contains("target=\"sim-chat\"");
            seen.1 |= line.contains("target=\"sim-batch\"");
        }
        for line in body.lines().filter(|l| l.starts_with("llm_slo_requests_total{") && !l.ends_with(" 0.0")) {
            sources.0 |= line.contains("source=\"tap\"");
            sources.1 |= line.contains("source=\"otlp\"");
        }
    }
    let took = start.elapsed();
    assert_eq!(sources, (true, true), "requests counted from the taps and from spans within {took:?}");
    // One more summary after the tap's numbers exist.
    std::thread::sleep(Duration::from_secs(3));
    // SIGINT is what Ctrl-C sends.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert_eq!(seen, (true, true), "after {took:?}; demo printed:\n{stdout}");
    assert!(took < Duration::from_secs(30));
    let status = status.expect("the demo did not stop within 15 s of SIGINT");
    assert!(status.success(), "{status:?}");
    // It printed where to look, and a summary with both engines.
    assert!(stdout.contains(&format!("http://127.0.0.1:{port}/metrics")), "{stdout}");
    assert!(stdout.contains("sim-chat") && stdout.contains("sim-batch") && stdout.contains("p99 TTFT"), "{stdout}");
    assert!(stdout.contains("stopping the demo"), "{stdout}");
    // The summary says what matters: exact shares from the tap beside the bracket, pending
    // as well as firing alerts, and what to open next.
    assert!(stdout.contains("exact from tap (histograms ["), "{stdout}");
    assert!(stdout.contains("\npending: ") && stdout.contains("\nfiring: "), "{stdout}");
    assert!(stdout.contains(&format!("next: open http://127.0.0.1:{port}/")), "{stdout}");
}
