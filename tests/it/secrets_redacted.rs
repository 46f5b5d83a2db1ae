//! Credentials never leave the daemon in text (docs/config.md "Secrets"): a
//! target URL with `user:password@` and a token in its query, a custom `X-Api-Key` header, a
//! bearer token file, an Alertmanager URL with `user:password@` and a webhook with a token
//! in its query, all really used (the credentialed targets are up only if each credential
//! was sent). None of the secrets may appear in the daemon's logs (at debug level, every
//! crate), /api/v1/report, /api/v1/alerts, /metrics, or `goodput check [--probe]` output;
//! the masked forms must, so the test cannot pass by printing nothing.

use crate::common;
use crate::support::PATIENCE;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::RawQuery;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

const TARGET_PASS: &str = "sEcReT-target-pass";
const QUERY_TOKEN: &str = "sEcReT-query-token";
const API_KEY: &str = "sEcReT-api-key";
const BEARER: &str = "sEcReT-bearer-token";
const REFUSED_PASS: &str = "sEcReT-refused-pass";
const REFUSED_KEY: &str = "sEcReT-refused-key";
const AM_PASS: &str = "sEcReT-am-pass";
const HOOK_TOKEN: &str = "sEcReT-hook-token";
const SECRETS: [&str; 8] = [TARGET_PASS, QUERY_TOKEN, API_KEY, BEARER, REFUSED_PASS, REFUSED_KEY, AM_PASS, HOOK_TOKEN];

/// base64("scrapeuser:sEcReT-target-pass"): what reqwest sends for the URL's userinfo.
const BASIC: &str = "Basic c2NyYXBldXNlcjpzRWNSZVQtdGFyZ2V0LXBhc3M=";

/// Serves a vLLM body on /basic only with the userinfo, query token and X-Api-Key, and on
/// /bearer only with the bearer token; 401 otherwise.
async fn guarded_engine() -> SocketAddr {
    let check = |headers: HeaderMap, query: Option<String>, path: &'static str| {
        let h = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let ok = match path {
            "basic" => {
                h("authorization") == BASIC
                    && h("x-api-key") == API_KEY
                    && query.as_deref() == Some(&format!("access_token={QUERY_TOKEN}"))
            }
            _ => h("authorization") == format!("Bearer {BEARER}"),
        };
        if ok { (StatusCode::OK, common::vllm_body(1, 1.0)) } else { (StatusCode::UNAUTHORIZED, String::new()) }
    };
    let router = Router::new()
        .route("/basic", get(move |h: HeaderMap, RawQuery(q): RawQuery| async move { check(h, q, "basic") }))
        .route("/bearer", get(move |h: HeaderMap, RawQuery(q): RawQuery| async move { check(h, q, "bearer") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

fn config(dir: &Path, port: u16, engine: SocketAddr, refused: [SocketAddr; 3]) -> std::path::PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, format!("{BEARER}\n")).unwrap();
    let yaml = format!(
        "listen: 127.0.0.1:{port}
evaluation_interval: 300ms
scrape: {{interval: 300ms, timeout: 250ms}}
windows: [30s]
targets:
  - name: basic
    url: 'http://scrapeuser:{TARGET_PASS}@{engine}/basic?access_token={QUERY_TOKEN}'
    engine: vllm
    headers: {{X-Api-Key: {API_KEY}}}
  - name: bearer
    url: 'http://{engine}/bearer'
    engine: vllm
    bearer_token_file: {}
  - name: refused
    url: 'http://refuser:{REFUSED_PASS}@{}/metrics?api_key={REFUSED_KEY}'
alerting:
  alertmanager: {{url: 'http://amuser:{AM_PASS}@{}'}}
  webhook: {{url: 'http://{}/hook?token={HOOK_TOKEN}'}}
  rules:
    LLMTargetDown: {{for: 1s}}
",
        token.display(),
        refused[0],
        refused[1],
        refused[2],
    );
    let path = dir.join("goodput.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

fn assert_clean(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} shows the secret {s:?}:\n{text}");
    }
}

async fn run_blocking(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(BIN).args(&args).output().expect("run goodput");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_appears_in_logs_api_metrics_or_check_output() {
    goodput::scrape::install_crypto_provider();
    let engine = guarded_engine().await;
    let refused = [
        common::Fixture::refused_addr().await,
        common::Fixture::refused_addr().await,
        common::Fixture::refused_addr().await,
    ];
    let port = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), port, engine, refused);
    let cfg_arg = cfg.display().to_string();

    // `goodput check`: the summary lists each target URL, masked.
    let (code, out, err) = run_blocking(vec!["check".into(), "--config".into(), cfg_arg.clone()]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert_clean("goodput check", &format!("{out}{err}"));
    assert!(out.contains(&format!("http://scrapeuser:xxxxx@{engine}/basic?access_token=xxxxx")), "{out}");
    assert!(out.contains(&format!("http://refuser:xxxxx@{}/metrics?api_key=xxxxx", refused[0])), "{out}");

    // `--probe` really scrapes: the credentialed targets answer, the refused one is named, masked.
    let (code, out, err) =
        run_blocking(vec!["check".into(), "--config".into(), cfg_arg.clone(), "--probe".into()]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert_clean("goodput check --probe", &format!("{out}{err}"));
    assert!(out.contains("probed basic: vllm") && out.contains("probed bearer: vllm"), "{out}{err}");
    assert!(
        err.contains(&format!("target refused (http://refuser:xxxxx@{}/metrics?api_key=xxxxx)", refused[0])),
        "{err}"
    );

    // The daemon, logging everything at debug level into a file (a pipe could fill and block it).
    let log_path = dir.path().join("daemon.log");
    let mut child = Command::new(BIN)
        .args(["run", "--config", &cfg_arg])
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(2)).build().unwrap();
    let fetch = |path: &str| {
        let (client, url) = (client.clone(), format!("{base}{path}"));
        async move {
            let r = client.get(&url).send().await.ok()?;
            Some((r.status().as_u16(), r.text().await.ok()?))
        }
    };
    // Wait until both credentialed targets are up, the refused one is down with its error,
    // and LLMTargetDown fires (so delivery to the refusing Alertmanager and webhook is tried).
    let began = Instant::now();
    let (report, alerts) = loop {
        let report = fetch("/api/v1/report").await.filter(|r| r.0 == 200).map(|r| r.1).unwrap_or_default();
        let alerts = fetch("/api/v1/alerts").await.map(|r| r.1).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&report).unwrap_or_default();
        let up = |name: &str| {
            v["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["target"] == name)
                .map(|t| t["health"]["up"] == true)
        };
        if up("basic") == Some(true)
            && up("bearer") == Some(true)
            && up("refused") == Some(false)
            && alerts.contains("firing")
        {
            break (report, alerts);
        }
        if began.elapsed() > PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("targets never settled: {report}\n{alerts}\n{}", std::fs::read_to_string(&log_path).unwrap());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // A few delivery attempts (the first backoff is 500 ms).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let metrics = fetch("/metrics").await.map(|r| r.1).unwrap_or_default();

    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.wait();
    let logs = std::fs::read_to_string(&log_path).unwrap();

    assert_clean("/api/v1/report", &report);
    assert!(report.contains("api_key=xxxxx"), "the refused target's error names its URL, masked: {report}");
    assert_clean("/api/v1/alerts", &alerts);
    assert!(alerts.contains("LLMTargetDown"), "{alerts}");
    assert_clean("/metrics", &metrics);
    assert!(metrics.contains("target=\"refused\""), "{metrics}");
    assert_clean("the daemon's logs", &logs);
    assert!(logs.contains("scrape failed; target is down") && logs.contains("api_key=xxxxx"), "{logs}");
    // Delivery names a destination by its label (docs/metrics.md): the Alertmanager's URL
    // without credentials, the webhook by its origin only.
    assert!(logs.contains(&format!("POST http://{}/api/v2/alerts", refused[1])), "{logs}");
    assert!(logs.contains(&format!("POST http://{}:", refused[2])), "the webhook's failure is logged: {logs}");
}
