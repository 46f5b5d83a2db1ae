//! Replay instants, health bookkeeping and the recording loop on a temp directory.

use std::time::Duration;

use super::*;
use crate::adapt::EngineHint;
use crate::duration::Window;
use crate::evaluate::EvalConfig;
use crate::evaluate::KvThresholds;

fn cfg() -> EvalConfig {
    EvalConfig {
        windows: vec![Window::new(Duration::from_secs(60)).unwrap()],
        quantiles: vec![0.5],
        kv: KvThresholds::default(),
        ..EvalConfig::default()
    }
}

#[test]
fn instants_are_step_multiples_inside_the_span() {
    assert_eq!(instants(1_234, 11_000, 5_000).collect::<Vec<_>>(), vec![5_000, 10_000]);
    assert_eq!(instants(5_000, 10_000, 5_000).collect::<Vec<_>>(), vec![5_000, 10_000]);
    assert_eq!(instants(5_001, 9_999, 5_000).count(), 0);
    assert_eq!(instants(-1_500, 0, 1_000).collect::<Vec<_>>(), vec![-1_000, 0]);
}

#[test]
fn failures_mark_down_and_count_by_reason() {
    let mut d = VirtualDaemon::new(["a".to_string(), "b".to_string()], cfg());
    let fail = |r: &str| Err(ScrapeFailure { reason: r.into(), message: format!("{r} happened") });
    d.observe(0, 1_000, fail("timeout"));
    d.observe(0, 2_000, fail("timeout"));
    d.observe(0, 3_000, fail("parse_error"));
    d.observe(7, 3_000, fail("timeout")); // unknown index: ignored
    d.set_scrape_duration(1, 0.5);
    let r = d.report(3_000);
    let a = &r.targets[0].health;
    assert!(!a.up);
    assert_eq!(a.errors_total.get("timeout"), Some(&2));
    assert_eq!(a.errors_total.get("parse_error"), Some(&1));
    assert_eq!(a.last_error.as_deref(), Some("parse_error happened (parse_error)"));
    assert_eq!(r.targets[1].health.last_scrape_duration_seconds, Some(0.5));
    assert_eq!(d.target_index("b"), Some(1));
}

#[test]
fn a_recording_replays_with_health_per_scrape() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    std::fs::create_dir(&a).unwrap();
    std::fs::write(a.join("1500.prom"), "not a metric line {{{\n").unwrap();
    std::fs::write(a.join("7500.prom"), "# TYPE foo gauge\nfoo 1\n").unwrap();
    std::fs::write(a.join("notes.txt"), "ignored").unwrap();
    std::fs::create_dir(dir.path().join("other")).unwrap();
    let rec = Recording::scan(dir.path()).unwrap();
    assert_eq!(rec.targets.len(), 2);
    assert_eq!(rec.targets[0].1.iter().map(|s| s.0).collect::<Vec<_>>(), vec![1500, 7500]);

    let targets = [ReplayTarget { name: "a".into(), hint: EngineHint::Auto, default_model: String::new() }];
    let frames: Vec<Frame> = replay(dir.path(), &rec, &targets, cfg(), 5_000).unwrap().collect();
    assert_eq!(frames.iter().map(|f| f.t_ms).collect::<Vec<_>>(), vec![5_000]);
    let h = &frames[0].report.targets[0].health;
    assert_eq!(h.errors_total.get("parse_error"), Some(&1), "{h:?}");
    let line: serde_json::Value = serde_json::from_str(&frames[0].json_line()).unwrap();
    assert_eq!(line["t"], 5);
    assert!(frames[0].json_line().ends_with("\"t\":5}"), "whole seconds print as an integer");
    let up = line["samples"].as_array().unwrap().iter().find(|s| s["name"] == "llm_slo_target_up").unwrap();
    assert_eq!(up["labels"]["target"], "a");
    assert_eq!(up["value"], 0.0);

    let frames: Vec<Frame> = replay(dir.path(), &rec, &targets, cfg(), 2_500).unwrap().collect();
    // The "foo" scrape names no engine: adapt fails, and that is counted too.
    let last = &frames.last().unwrap().report.targets[0].health;
    assert_eq!(frames.last().unwrap().t_ms, 7_500);
    assert_eq!(last.errors_total.values().sum::<u64>(), 2);

    let missing = [ReplayTarget { name: "zzz".into(), hint: EngineHint::Auto, default_model: String::new() }];
    let err = replay(dir.path(), &rec, &missing, cfg(), 5_000).err().unwrap().to_string();
    assert!(err.contains("zzz") && err.contains("a, other"), "{err}");
}
