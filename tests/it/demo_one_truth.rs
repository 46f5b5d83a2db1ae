//! One number, one truth, over `goodput demo` as a user runs it, into `sim-batch`'s
//! overload: at every evaluation read, per source (tap, spans, histograms) goodput never
//! exceeds that source's own throughput; /api/v1/report and /metrics show the same values;
//! and each alert's `value` annotation is the /metrics series of the source and window it
//! names.
//!
//! A tick is read whole: /api/v1/report, then /metrics, then the report again; a read where
//! a new evaluation landed in between (the report's instant moved, or /metrics' evaluation
//! time is not the report's) is thrown away and read again.

use crate::net;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use goodput::parse::{Limits, parse};
use serde_json::Value;

type Labels = BTreeMap<String, String>;
/// /metrics as (name, labels, value).
type Samples = Vec<(String, Labels, f64)>;

/// The /metrics samples, name and labels to value.
fn samples(body: &str) -> Samples {
    let exp = parse(body.as_bytes(), &Limits::default()).expect("/metrics parses");
    exp.samples
        .iter()
        .map(|s| {
            let labels = exp.labels_of(s).iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
            (s.name.to_string(), labels, s.value)
        })
        .collect()
}

fn find(s: &[(String, Labels, f64)], name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    s.iter()
        .filter(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).is_some_and(|x| x == v)))
        .map(|x| x.2)
        .collect()
}

fn one(s: &[(String, Labels, f64)], name: &str, labels: &[(&str, &str)]) -> Result<f64, String> {
    match find(s, name, labels)[..] {
        [v] => Ok(v),
        ref other => Err(format!("{name}{labels:?}: {other:?}")),
    }
}

/// One whole tick: the report and /metrics of the same evaluation.
fn tick(port: u16) -> Option<(Value, Samples)> {
    let report: Value = serde_json::from_str(&net::get_body(port, "/api/v1/report")?).ok()?;
    let metrics = samples(&net::get_body(port, "/metrics")?);
    let again: Value = serde_json::from_str(&net::get_body(port, "/api/v1/report")?).ok()?;
    if report["t_ms"] != again["t_ms"] {
        return None;
    }
    for t in report["targets"].as_array()? {
        let at = t["health"]["last_evaluation_ms"].as_f64()? / 1000.0;
        let name = t["target"].as_str()?;
        let exported = find(&metrics, "llm_slo_target_last_evaluation_timestamp_seconds", &[("target", name)]);
        if exported != [at] {
            return None;
        }
    }
    Some((report, metrics))
}

/// Everything that must hold at one tick; the list of what did not.
fn check(report: &Value, m: &[(String, Labels, f64)]) -> Vec<String> {
    let mut wrong = Vec::new();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    for t in report["targets"].as_array().unwrap() {
        let target = t["target"].as_str().unwrap();
        for model in t["models"].as_array().unwrap() {
            let name = model["model"].as_str().unwrap();
            for w in model["windows"].as_array().unwrap() {
                let window = w["window"].as_str().unwrap();
                let base = [("target", target), ("model", name), ("window", window)];
                let with = |extra: &[(&'static str, &'static str)]| {
                    let mut l: Vec<(&str, &str)> = base.to_vec();
                    l.extend_from_slice(extra);
                    l
                };
                // Per source, goodput under the throughput of the same requests.
                for source in ["tap", "otlp", "metrics"] {
                    let Ok(tput) =
                        one(m, "llm_slo_tokens_per_second", &with(&[("source", source), ("direction", "output")]))
                    else {
                        continue;
                    };
                    for bound in ["lower", "estimate", "upper"] {
                        for g in
                            find(m, "llm_slo_goodput_tokens_per_second", &with(&[("source", source), ("bound", bound)]))
                        {
                            if g > tput * (1.0 + 1e-9) + 1e-9 {
                                wrong.push(format!("{base:?} {source}: goodput {bound} {g} above throughput {tput}"));
                            }
                        }
                    }
                }
                // The report's request windows are /metrics' series of their source.
                for r in w["requests"].as_array().into_iter().flatten() {
                    let source = r["source"].as_str().unwrap();
                    let src: &'static str = match source {
                        "tap" => "tap",
                        "otlp" => "otlp",
                        _ => continue,
                    };
                    let tokens = r["output_tokens_per_second"].as_f64().unwrap();
                    match one(m, "llm_slo_tokens_per_second", &with(&[("source", src), ("direction", "output")])) {
                        Ok(v) if close(v, tokens) => {}
                        other => wrong.push(format!("{base:?} {source} tokens/s: report {tokens}, /metrics {other:?}")),
                    }
                    for q in r["latency"].as_array().into_iter().flatten() {
                        if q["metric"] != "ttft" || q["quantile"].as_f64() != Some(0.99) {
                            continue;
                        }
                        let v = q["value"].as_f64().unwrap();
                        match one(m, "llm_slo_ttft_seconds", &with(&[("source", src), ("q", "0.99")])) {
                            Ok(x) if close(x, v) => {}
                            other => wrong.push(format!("{base:?} {source} p99 TTFT: report {v}, /metrics {other:?}")),
                        }
                    }
                }
            }
        }
    }
    // Each alert's value is its source's series at its window.
    for a in report["alerts"].as_array().into_iter().flatten() {
        let ann = &a["annotations"];
        let (Some(source), Some(window), Some(value)) =
            (ann["source"].as_str(), ann["window"].as_str(), ann["value"].as_str())
        else {
            continue;
        };
        let value: f64 = value.parse().unwrap();
        let l = |k: &str| a["labels"][k].as_str().unwrap_or_default().to_string();
        let (target, model, slo) = (l("target"), l("model"), l("slo"));
        let mut at: Vec<(&str, &str)> =
            vec![("target", &target), ("model", &model), ("source", source), ("window", window)];
        let name = l("alertname");
        let family = match name.as_str() {
            "LLMTTFTAboveSLO" => {
                at.push(("q", "0.99"));
                "llm_slo_ttft_seconds"
            }
            "LLMTPOTAboveSLO" => {
                at.push(("q", "0.99"));
                "llm_slo_tpot_seconds"
            }
            "LLMGoodputDivergence" => {
                at.extend([("slo", slo.as_str()), ("clause", "joint"), ("bound", "estimate")]);
                "llm_slo_attainment_ratio"
            }
            "LLMErrorBudgetBurnFast" | "LLMErrorBudgetBurnSlow" => {
                at.extend([("slo", slo.as_str()), ("bound", "estimate")]);
                "llm_slo_error_budget_burn_rate"
            }
            "LLMPreemptionsSustained" => {
                at.retain(|(k, _)| *k != "source");
                "llm_slo_preemptions_per_second"
            }
            _ => continue,
        };
        match one(m, family, &at) {
            Ok(v) if close(v, value) => {}
            other => {
                wrong.push(format!("{name} on {target}: annotated {value} ({source}, {window}), /metrics {other:?}"))
            }
        }
    }
    wrong
}

#[test]
fn every_tick_of_the_demo_overload_tells_one_truth() {
    let port = net::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["demo", "--listen", &format!("127.0.0.1:{port}"), "--summary-every", "0", "--speed", "5"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let (mut ticks, mut with_requests, mut alerts_read) = (0, 0, 0);
    let mut wrong: Vec<String> = Vec::new();
    let mut last_t = Value::Null;
    while start.elapsed() < Duration::from_secs(100) && wrong.len() < 20 {
        std::thread::sleep(Duration::from_millis(700));
        let Some((report, metrics)) = tick(port) else { continue };
        if report["t_ms"] == last_t || report["targets"].as_array().is_none_or(Vec::is_empty) {
            continue;
        }
        last_t = report["t_ms"].clone();
        ticks += 1;
        with_requests += usize::from(
            metrics
                .iter()
                .any(|(n, l, _)| n == "llm_slo_tokens_per_second" && l.get("source").is_some_and(|s| s == "tap")),
        );
        alerts_read +=
            report["alerts"].as_array().into_iter().flatten().filter(|a| a["annotations"]["value"].is_string()).count();
        wrong.extend(check(&report, &metrics).into_iter().map(|w| format!("t={last_t}: {w}")));
    }
    let _ = child.kill();
    let _ = child.wait();
    eprintln!("{ticks} ticks read, {with_requests} with tap requests, {alerts_read} alert values compared");
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
    // One evaluation every 5 s.
    assert!(ticks >= 12, "only {ticks} whole ticks read in 100 s");
    assert!(with_requests >= 8, "the taps measured requests at {with_requests} of {ticks} ticks");
}
