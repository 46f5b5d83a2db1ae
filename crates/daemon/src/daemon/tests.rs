//! Health bookkeeping and report assembly, without any I/O.

use std::sync::Arc;
use std::time::Duration;

use super::build_report;
use super::target::TargetRuntime;
use crate::canonical::{Engine, Snapshot};
use crate::config;
use crate::scrape::ScrapeError;

fn runtime(name: &str) -> Arc<TargetRuntime> {
    let yaml = format!("targets: [{{name: {name}, url: 'http://127.0.0.1:1/metrics'}}]");
    let c = config::from_str(&yaml, "t.yaml").unwrap().config;
    Arc::new(TargetRuntime::new(c.targets[0].clone(), c.max_window()))
}

fn snapshot() -> Snapshot {
    Snapshot {
        engine: Engine::Vllm,
        models: Default::default(),
        process_start: None,
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    }
}

#[test]
fn a_recorded_scrape_reaches_the_shared_state() {
    // The bookkeeping itself is goodput_core::target's; this checks the daemon's wiring.
    let rt = runtime("a");
    rt.record(1_000, Duration::from_millis(20), Err(ScrapeError::new("timeout", "slow")));
    assert_eq!(rt.lock().health.last_error.as_deref(), Some("slow (timeout)"));
    assert_eq!(rt.lock().health.last_scrape_duration_seconds, Some(0.02));
    rt.record(4_000, Duration::from_millis(7), Ok(snapshot()));
    let st = rt.lock();
    assert!(st.health.up);
    assert_eq!(st.engine(), Some(Engine::Vllm));
    assert_eq!(st.windows.len(), 1);
}

#[test]
fn report_keeps_config_order_and_the_given_instant() {
    let (a, b) = (runtime("b-first"), runtime("a-second"));
    b.record(1, Duration::ZERO, Ok(snapshot()));
    let c = config::from_str("targets: [{name: x, url: 'http://127.0.0.1:1/metrics'}]", "t.yaml").unwrap().config;
    let report = build_report(&[a, b], 123_456, &c.eval_config());
    assert_eq!(report.t_ms, 123_456);
    let names: Vec<&str> = report.targets.iter().map(|t| t.target.as_str()).collect();
    assert_eq!(names, ["b-first", "a-second"]);
    assert!(!report.targets[0].health.up);
    assert!(report.targets[1].health.up);
}
