//! The tap as configured: `targets[].tap` checked at file:line:column by `goodput check`,
//! started with the daemon (a taken address is a start-up error), serving through the
//! daemon, and its health counters on the daemon's /metrics.

use crate::common;
use crate::tap_common;

use std::process::Command;
use std::sync::Arc;

use goodput::config::{self, ConfigError};
use goodput::daemon::{self, clock::SystemClock};
use tap_common::engines::{self, TIMING};
use tap_common::{Reply, Upstream, fetch, post, send};

fn errors(yaml: &str) -> Vec<ConfigError> {
    match config::from_str(yaml, "config.yaml") {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(e) => e.0,
    }
}

/// The one error of `yaml`, as `line:col: message`.
fn one_error(yaml: &str) -> String {
    let errs = errors(yaml);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    let e = &errs[0];
    format!("{}:{}: {}", e.pos.line, e.pos.column, e.message)
}

fn target(tap: &str) -> String {
    format!("targets:\n  - name: a\n    url: http://127.0.0.1:8000/metrics\n    tap: {tap}\n")
}

#[test]
fn tap_settings_are_checked_where_written() {
    let ok = config::from_str(&target("{listen: 0.0.0.0:8001, upstream: http://127.0.0.1:8000}"), "c.yaml").unwrap();
    let tap = ok.config.targets[0].tap.clone().expect("a tap");
    assert_eq!(
        (tap.listen.to_string(), tap.upstream.as_str(), tap.inject_usage),
        ("0.0.0.0:8001".into(), "http://127.0.0.1:8000/", false)
    );
    assert!(ok.warnings.is_empty(), "{:?}", ok.warnings);

    let e = one_error(&target("{listen: 8001, upstream: http://127.0.0.1:8000}"));
    assert!(e.starts_with("4:19: tap.listen: invalid address \"8001\"; expected IP:PORT"), "{e}");
    let e = one_error(&target("{listen: 0.0.0.0:8001, upstream: https://127.0.0.1:8000}"));
    assert!(e.starts_with("4:43: tap.upstream \"https://127.0.0.1:8000\": scheme \"https\" is not supported"), "{e}");
    let e = one_error(&target("{listen: 0.0.0.0:8001, upstream: 'http://u:secret@127.0.0.1:8000'}"));
    assert!(e.contains("it carries credentials") && !e.contains("secret"), "{e}");
    let e = one_error(&target("{listen: 0.0.0.0:8001, upstream: http://127.0.0.1:8001}"));
    assert!(e.starts_with("4:43: tap.upstream http://127.0.0.1:8001 is the tap's own listen address"), "{e}");
    let e = one_error(&target("{listen: 0.0.0.0:8001, upstream: http://127.0.0.1:8000, inject: true}"));
    assert!(
        e.contains(r#"unknown key "inject" in targets[0].tap; expected one of listen, upstream, inject_usage"#),
        "{e}"
    );
    let e = one_error(&target("{upstream: http://127.0.0.1:8000}"));
    assert!(e.contains("listen"), "{e}");

    let two = "targets:
  - {name: a, url: 'http://127.0.0.1:8000/metrics', tap: {listen: '0.0.0.0:8001', upstream: 'http://127.0.0.1:8000'}}
  - {name: b, url: 'http://127.0.0.1:9000/metrics', tap: {listen: '127.0.0.1:8001', upstream: 'http://127.0.0.1:9000'}}
";
    let e = one_error(two);
    assert!(
        e.starts_with("3:67: tap.listen 127.0.0.1:8001 of target \"b\" clashes with the tap of target \"a\""),
        "{e}"
    );
    let e = one_error(&format!(
        "listen: 127.0.0.1:8001\n{}",
        target("{listen: 0.0.0.0:8001, upstream: http://127.0.0.1:8000}")
    ));
    assert!(e.contains("clashes with the daemon's own listen address 127.0.0.1:8001"), "{e}");

    let elsewhere =
        config::from_str(&target("{listen: 0.0.0.0:8001, upstream: http://10.0.0.9:8000}"), "c.yaml").unwrap();
    let w = elsewhere.warnings.iter().map(|w| w.message.clone()).collect::<Vec<_>>().join("\n");
    assert!(w.contains("is not the host:port its metrics are scraped from"), "{w}");
}

#[test]
fn a_tap_whose_upstream_loops_back_to_a_tap_is_refused_where_written() {
    for (listen, up) in [
        ("0.0.0.0:8001", "http://localhost:8001"),
        ("0.0.0.0:8001", "http://0.0.0.0:8001"),
        ("127.0.0.1:8001", "http://localhost:8001/v1"),
        ("[::]:8001", "http://[::ffff:127.0.0.1]:8001"),
    ] {
        let e = one_error(&target(&format!("{{listen: '{listen}', upstream: '{up}'}}")));
        let at = format!("4:{}: tap.upstream ", 33 + listen.len());
        assert!(e.starts_with(&at) && e.contains("loops back to the tap"), "{listen} {up}: {e}");
    }
    let ok = config::from_str(&target("{listen: '127.0.0.1:8001', upstream: 'http://localhost:8000'}"), "c.yaml");
    assert!(ok.is_ok(), "{ok:?}");

    // Two taps forwarding to each other are a loop too; it is reported at the second.
    let cycle = "targets:
  - {name: a, url: 'http://127.0.0.1:8000/metrics', tap: {listen: '127.0.0.1:8001', upstream: 'http://127.0.0.1:8002'}}
  - {name: b, url: 'http://127.0.0.1:8000/metrics', tap: {listen: '127.0.0.1:8002', upstream: 'http://localhost:8001'}}
";
    let e = one_error(cycle);
    assert!(e.starts_with("3:95: tap.upstream http://localhost:8001 of target \"b\""), "{e}");
    assert!(e.contains("loops back to the tap of target \"a\""), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, target("{listen: '0.0.0.0:8001', upstream: 'http://localhost:8001'}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput")).args(["check", "--config"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "goodput check accepted a tap that loops back: {stderr}");
    assert!(stderr.contains("c.yaml:4:45: tap.upstream http://localhost:8001"), "{stderr}");
}

#[test]
fn goodput_check_reports_tap_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, target("{listen: 0.0.0.0:8001, upstream: ftp://127.0.0.1:8000}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput")).args(["check", "--config"]).arg(&path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("c.yaml:4:43: tap.upstream \"ftp://127.0.0.1:8000\": scheme \"ftp\""), "{stderr}");
}

async fn free_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_daemon_runs_each_tap_and_exports_its_health() {
    goodput::scrape::install_crypto_provider();
    let gz: &[u8] = b"\x1f\x8b\x08\x00compressed";
    let up = Upstream::start(move |s| match s.path.as_str() {
        "/v1/completions" => Reply::new(200, "text/event-stream", vec![send(gz)]).header("content-encoding", "gzip"),
        _ => engines::by_path(s, TIMING),
    })
    .await;
    let port = free_port().await;
    let yaml = format!(
        "listen: 127.0.0.1:0
targets:
  - name: llama
    url: http://{up}/metrics
    tap: {{listen: '127.0.0.1:{port}', upstream: 'http://{up}'}}
",
        up = up.addr
    );
    let cfg = config::from_str(&yaml, "tap.yaml").expect("valid config").config;
    let d = daemon::start(cfg.clone(), Arc::new(SystemClock)).await.expect("daemon starts");
    let tap: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();

    let chat = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let got = fetch(tap, post("/v1/chat/completions", chat)).await;
    assert!(got.text().ends_with("data: [DONE]\n\n"), "served through the daemon's tap");
    fetch(tap, post("/v1/completions", r#"{"prompt":"x","stream":true}"#)).await;
    fetch(tap, post("/v1/embeddings", "{}")).await;
    fetch(tap, post("/v1/embeddings", "{}")).await;

    let (status, body) = common::get(&format!("http://{}/metrics", d.local_addr())).await;
    assert_eq!(status, 200);
    let value = |name: &str, reason: Option<&str>| {
        common::metrics_samples(&body)
            .into_iter()
            .find(|(n, l, _)| n == name && l["target"] == "llama" && reason.is_none_or(|r| l["reason"] == r))
            .unwrap_or_else(|| panic!("{name} {reason:?} missing from /metrics"))
            .2
    };
    let unmeasured = "llm_slo_tap_requests_unmeasured_total";
    assert_eq!(value(unmeasured, Some("route")), 2.0);
    assert_eq!(value(unmeasured, Some("content_encoding")), 1.0);
    assert_eq!(value(unmeasured, Some("content_type")), 0.0, "every reason is exported from 0");
    assert_eq!(value("llm_slo_tap_measurement_faults_total", None), 0.0);
    assert!(body.contains("# TYPE llm_slo_tap_requests_unmeasured_total counter"));
    // promtool lints the whole exposition, tap families included (a skip note without it).
    common::promtool_check_metrics(&body);

    // A second daemon cannot take the same tap address: a start-up error that says which.
    let mut taken = cfg;
    taken.listen = "127.0.0.1:0".parse().unwrap();
    let err = daemon::start(taken, Arc::new(SystemClock)).await.err().expect("the tap's address is taken");
    assert!(
        err.to_string().contains(&format!("cannot listen on 127.0.0.1:{port} for the tap of target \"llama\"")),
        "{err}"
    );

    d.shutdown().await;
    assert!(tokio::net::TcpStream::connect(tap).await.is_err(), "the tap stopped with the daemon");
}
