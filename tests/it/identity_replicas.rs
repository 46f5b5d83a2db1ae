//! Several sidecars of one model stay distinct (docs/config.md#external_labels): two `goodput`
//! processes scrape the same simulator with the same config but for `POD_NAME` (expanded
//! from `${POD_NAME}` in `external_labels`, as the Kubernetes manifests set it from the
//! Downward API). A real Prometheus scraping both sees two series per family, one per pod,
//! each with the cluster label; a real Alertmanager receives two alerts with different
//! fingerprints, where without the labels it would have merged them into one; the JSON API
//! shows the labels on the alerts too. Config errors (an unset variable, a label goodput
//! sets itself) stop the daemon with file:line:column.
//!
//! Skips when prometheus or alertmanager is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::common;
use crate::common_am;
use crate::support;
use crate::tools;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common_am::{Am, Http, alertmanager_binary, free_port};
use goodput_sim::config::Profile;
use goodput_sim::{SimConfig, live};
use support::prometheus::Prometheus;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The sidecar config both replicas share; only their environment differs.
fn config(port: u16, sim: &str, down: &str, am: &str) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nevaluation_interval: 500ms\n\
         external_labels: {{cluster: prod-east, pod: '${{POD_NAME}}', namespace: '${{POD_NAMESPACE}}'}}\n\
         scrape: {{interval: 500ms, timeout: 400ms}}\n\
         targets:\n  - {{name: vllm, url: 'http://{sim}/metrics', engine: vllm}}\n  - {{name: gone, url: 'http://{down}/metrics', engine: vllm}}\n\
         windows: [1m]\n\
         alerting:\n  alertmanager: {{url: '{am}'}}\n  resend_interval: 1s\n  rules: {{LLMTargetDown: {{for: 0s}}}}\n"
    )
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_give_distinct_series_and_distinct_alerts() {
    let Some(prometheus) = tools::require("prometheus") else { return };
    let Some(am_bin) = alertmanager_binary() else { return };
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let mut am = Am::new(&am_bin, tmp.path(), "am");
    am.start();
    let http = Http::new();
    http.wait_ready(&am, support::PATIENCE).await;

    let sim = live::serve(SimConfig::profile(Profile::Spec), "127.0.0.1:0".parse().unwrap(), 10.0).await.unwrap();
    let down = common::Fixture::refused_addr().await;
    let mut daemons = Vec::new();
    let mut addrs = Vec::new();
    for pod in ["vllm-0", "vllm-1"] {
        let port = free_port();
        let file = tmp.path().join(format!("{pod}.yaml"));
        std::fs::write(&file, config(port, &sim.addr.to_string(), &down.to_string(), &am.url())).unwrap();
        let child = Command::new(BIN)
            .args(["run", "--config"])
            .arg(&file)
            .env("POD_NAME", pod)
            .env("POD_NAMESPACE", "llm")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join(format!("{pod}.log"))).unwrap())
            .spawn()
            .unwrap();
        daemons.push(Daemon(child));
        addrs.push(format!("127.0.0.1:{port}"));
    }

    // Prometheus scrapes both daemons as one job, as a PodMonitor would.
    let work = tmp.path().join("prom");
    std::fs::create_dir_all(&work).unwrap();
    let targets: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let prom = Prometheus::scraping_each(&prometheus, &work, "goodput", &targets);
    let series = |q: &str| {
        let t = now_ms();
        prom.query_range_series(q, t - 2_000, t, 1)
            .into_iter()
            .map(|(labels, _)| labels)
            .collect::<Vec<BTreeMap<String, String>>>()
    };
    let deadline = Instant::now() + support::PATIENCE;
    let mut up = Vec::new();
    while Instant::now() < deadline {
        up = series("llm_slo_target_up{job=\"goodput\", target=\"vllm\"} == 1");
        if up.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let pods: BTreeSet<&str> = up.iter().map(|l| l["pod"].as_str()).collect();
    assert_eq!(pods, BTreeSet::from(["vllm-0", "vllm-1"]), "one llm_slo_target_up series per replica: {up:?}");
    for l in &up {
        assert_eq!(l["cluster"], "prod-east", "{l:?}");
        assert_eq!(l["namespace"], "llm", "{l:?}");
    }
    // The labels are on every family, the daemon's own included.
    let build = series("llm_slo_build_info{job=\"goodput\"}");
    assert_eq!(build.iter().map(|l| l["pod"].as_str()).collect::<BTreeSet<_>>().len(), 2, "{build:?}");
    let per_pod_without = series("count without (pod, instance) (llm_slo_target_up{job=\"goodput\", target=\"vllm\"})");
    assert_eq!(per_pod_without.len(), 1, "the replicas differ only in pod (and instance)");

    // Alertmanager: the same alert from each replica, told apart by the pod label.
    let deadline = Instant::now() + support::PATIENCE;
    let mut down_alerts = Vec::new();
    while Instant::now() < deadline {
        down_alerts = http
            .alerts(&am)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a["labels"]["alertname"] == "LLMTargetDown")
            .collect();
        if down_alerts.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(down_alerts.len(), 2, "one LLMTargetDown per replica in Alertmanager: {down_alerts:?}");
    let fingerprints: BTreeSet<&str> = down_alerts.iter().map(|a| a["fingerprint"].as_str().unwrap()).collect();
    assert_eq!(fingerprints.len(), 2, "distinct Alertmanager fingerprints: {down_alerts:?}");
    let alert_pods: BTreeSet<&str> = down_alerts.iter().map(|a| a["labels"]["pod"].as_str().unwrap()).collect();
    assert_eq!(alert_pods, BTreeSet::from(["vllm-0", "vllm-1"]));
    for a in &down_alerts {
        assert_eq!(a["labels"]["cluster"], "prod-east");
        assert_eq!(a["labels"]["target"], "gone");
    }

    // The JSON API shows the alert with the same labels.
    let (status, body) = common::get(&format!("http://{}/api/v1/report", addrs[0])).await;
    assert_eq!(status, 200);
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    let shown = report["alerts"].as_array().unwrap().iter().find(|a| a["labels"]["alertname"] == "LLMTargetDown");
    let shown = shown.expect("LLMTargetDown in /api/v1/report");
    assert_eq!(shown["labels"]["pod"], "vllm-0");
    assert_eq!(shown["labels"]["cluster"], "prod-east");
    drop(daemons);
    sim.shutdown().await;
}

/// `goodput check` on `text` with `env` as the whole environment: (success, output).
fn check(text: &str, env: &[(&str, &str)]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(BIN).args(["check", "--config"]).arg(&file).env_clear().envs(env.iter().copied()).output();
    let out = out.unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn unset_variables_and_goodput_own_label_names_are_config_errors() {
    let head = "targets: [{name: a, url: 'http://127.0.0.1:1/metrics'}]\n";
    let (ok, out) = check(&format!("{head}external_labels:\n  cluster: prod-east\n  pod: ${{POD_NAME}}\n"), &[]);
    assert!(!ok, "an unset variable must fail: {out}");
    assert!(out.contains("c.yaml:4:8:") && out.contains("${POD_NAME} is not set"), "{out}");

    let (ok, out) = check(&format!("{head}external_labels:\n  pod: ${{POD_NAME}}\n"), &[("POD_NAME", "vllm-0")]);
    assert!(ok, "{out}");
    assert!(out.contains("pod=\"vllm-0\""), "check shows the expanded label: {out}");

    let (ok, out) = check(&format!("{head}external_labels:\n  pod: ${{POD_NAME}}\n"), &[("POD_NAME", "")]);
    assert!(!ok && out.contains("empty"), "an empty variable must fail: {out}");

    let (ok, out) = check(&format!("{head}external_labels: {{cluster: a, target: b}}\n"), &[]);
    assert!(!ok, "{out}");
    assert!(out.contains("c.yaml:2:") && out.contains("\"target\" is a label goodput sets itself"), "{out}");

    let (ok, out) = check(&format!("{head}external_labels: {{k8s-pod: a}}\n"), &[]);
    assert!(!ok && out.contains("not a Prometheus label name"), "{out}");

    // `goodput rules` does not read the labels: a pod's config generates rules anywhere.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("c.yaml");
    std::fs::write(
        &file,
        format!("{head}slos: [{{name: chat, ttft: 1s, objective: 0.99}}]\nexternal_labels: {{pod: '${{POD_NAME}}'}}\n"),
    )
    .unwrap();
    let out = Command::new(BIN).args(["rules", "--config"]).arg(&file).env_remove("POD_NAME").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("llm_slo:attainment_ratio"));
}
