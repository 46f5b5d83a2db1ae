//! `goodput check --probe` against real HTTP servers on 127.0.0.1 serving real vLLM and
//! TGI scrapes (tests/fixtures/real): thresholds between buckets are named with their
//! neighbouring boundaries (read here from the fixture itself), clauses the engine cannot
//! evaluate are named, an unreachable target is a warning, and the exit code stays 0.

use crate::tools;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    tools::real_fixture(name)
}

/// Serves `body` to every request, for a bounded number of connections.
fn serve(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(32) {
            let Ok(mut s) = stream else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(&body));
        }
    });
    port
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// The finite `le` bounds of one histogram in an exposition, as numbers.
fn bounds(text: &str, bucket: &str) -> Vec<f64> {
    let mut v: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&format!("{bucket}{{")))
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next()?.parse().ok())
        .filter(|x: &f64| x.is_finite())
        .collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

#[test]
fn probe_names_bracketed_and_unevaluable_clauses() {
    let vllm_text = std::fs::read_to_string(fixture("vllm-v1-0.13ish-dynamo-vllm-only.prom")).expect("vLLM fixture");
    let tgi_text = std::fs::read_to_string(fixture("tgi-3.3.5-datadog-hugging_face_tgi.prom")).expect("TGI fixture");
    let vllm = serve(vllm_text.clone().into_bytes());
    let tgi = serve(tgi_text.into_bytes());
    let down = closed_port();

    // 200 ms TTFT: the neighbours, from the fixture's own bounds.
    let ttft = bounds(&vllm_text, "vllm:time_to_first_token_seconds_bucket");
    let lo = ttft.iter().copied().filter(|&b| b < 0.2).fold(f64::NAN, f64::max);
    let hi = ttft.iter().copied().find(|&b| b > 0.2).expect("a bound above 200ms");
    assert!(!ttft.contains(&0.2) && ttft.contains(&0.25), "200ms between bounds, 250ms a bound");
    let nearest_ms = if 0.2 - lo <= hi - 0.2 { lo * 1000.0 } else { hi * 1000.0 };
    let tpot = bounds(&vllm_text, "vllm:request_time_per_output_token_seconds_bucket");
    assert!(tpot.contains(&0.05), "50ms TPOT is a bound in the fixture");
    let e2e = bounds(&vllm_text, "vllm:e2e_request_latency_seconds_bucket");
    assert!(e2e.contains(&5.0) && !e2e.contains(&3.0), "5s is an E2E bound, 3s is not");
    let (e2e_lo, e2e_hi) = (2.5, 5.0);
    assert!(e2e.contains(&e2e_lo) && !e2e.iter().any(|&b| b > e2e_lo && b < e2e_hi));

    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("goodput.yml");
    std::fs::write(
        &config,
        format!(
            r#"targets:
  - {{name: vllm, url: "http://127.0.0.1:{vllm}/metrics"}}
  - {{name: tgi, url: "http://127.0.0.1:{tgi}/metrics"}}
  - {{name: down, url: "http://127.0.0.1:{down}/metrics", timeout: 2s}}
slos:
  - {{name: chat, ttft: 200ms, tpot: 50ms, objective: 0.99}}
  - {{name: exact, ttft: 250ms, e2e: 5s, objective: 0.9, targets: [vllm]}}
  - {{name: slow, e2e: 3s, objective: 0.9, targets: [vllm]}}
"#
        ),
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["check", "--probe", "--config"])
        .arg(&config)
        .output()
        .expect("run goodput check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "warnings only: exit 0\n{stdout}\n{stderr}");
    assert!(stdout.contains("OK:") && stdout.contains("probed vllm") && stdout.contains("probed tgi"), "{stdout}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("warning: ")).collect();

    let want = format!(
        "ttft 200ms is between buckets {lo} and {hi}: attainment is bracketed, not exact; use {nearest_ms}ms for an exact count"
    );
    let bracketed: Vec<&&str> = warnings.iter().filter(|w| w.contains("between buckets")).collect();
    assert_eq!(bracketed.len(), 2, "vLLM's 200ms TTFT and 3s E2E are bracketed: {warnings:#?}");
    let chat = bracketed.iter().find(|w| w.contains("slo chat")).expect("chat's TTFT");
    assert!(chat.contains("target vllm") && chat.ends_with(&want), "wanted …{want}\ngot {chat}");
    let slow = bracketed.iter().find(|w| w.contains("slo slow")).expect("slow's E2E");
    // 3s: 0.5s from 2.5, 2s from 5: the nearer bound is suggested.
    assert!(
        slow.contains(&format!("e2e 3s is between buckets {e2e_lo} and {e2e_hi}"))
            && slow.ends_with("use 2.5s for an exact count"),
        "{slow}"
    );

    // TGI has no TTFT histogram: not evaluable, said so, not silently passed.
    let tgi_ttft =
        warnings.iter().find(|w| w.contains("target tgi") && w.contains("the ttft clause cannot be evaluated"));
    assert!(tgi_ttft.is_some_and(|w| w.contains("TTFT")), "{warnings:#?}");
    // The `exact` SLO: 250ms TTFT and 5s E2E are bounds, and it only applies to vLLM.
    assert!(!warnings.iter().any(|w| w.contains("slo exact")), "{warnings:#?}");
    assert!(!warnings.iter().any(|w| w.contains("target vllm") && w.contains("tpot")), "50ms is a TPOT bound");
    // The unreachable target is reported, and did not stop the others.
    assert!(warnings.iter().any(|w| w.contains("target down") && w.contains("not probed")), "{warnings:#?}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn plain_check_does_not_scrape() {
    let down = closed_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("goodput.yml");
    std::fs::write(&config, format!("targets: [{{name: a, url: \"http://127.0.0.1:{down}/metrics\"}}]\n"))
        .expect("cfg");
    let out =
        Command::new(env!("CARGO_BIN_EXE_goodput")).args(["check", "--config"]).arg(&config).output().expect("run");
    assert_eq!(out.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not probed"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("probed"));
}

#[test]
fn probe_says_an_engine_without_histograms_needs_the_request_path() {
    let body = std::fs::read(fixture("llamacpp-server-0c1e570.prom")).expect("llama.cpp fixture");
    let (tapped, bare) = (serve(body.clone()), serve(body));
    let tap_port = closed_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("goodput.yml");
    std::fs::write(
        &config,
        format!(
            r#"targets:
  - {{name: tapped, url: "http://127.0.0.1:{tapped}/metrics", model: tiny,
      tap: {{listen: "127.0.0.1:{tap_port}", upstream: "http://127.0.0.1:{tapped}"}}}}
  - {{name: bare, url: "http://127.0.0.1:{bare}/metrics"}}
slos:
  - {{name: chat, ttft: 200ms, tpot: 50ms, objective: 0.99}}
"#
        ),
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["check", "--probe", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "warnings only: exit 0\n{stdout}\n{stderr}");
    assert!(stdout.contains("probed tapped: llamacpp engine") && stdout.contains("probed bare: llamacpp engine"));
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("warning: ")).collect();
    // Once per target, not once per clause.
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    let said = |target: &str| warnings.iter().find(|w| w.contains(&format!("target {target}:"))).copied();
    let tapped = said("tapped").expect("the tapped target");
    assert!(tapped.contains("no latency histograms") && tapped.ends_with("judged from the tap"), "{tapped}");
    let bare = said("bare").expect("the bare target");
    assert!(bare.contains("cannot be judged: add a `tap:`"), "{bare}");
}
