//! From a daemon [`Report`] to alert inputs, and through the engine: a report whose KV
//! usage and joint attainment cross the thresholds fires the same alerts the rules test
//! promises, and a down target gives only `LLMTargetDown`.

use std::collections::BTreeMap;
use std::time::Duration;

use goodput::alert::from_report::inputs;
use goodput::alert::{AlertEngine, AlertingConfig};
use goodput::canonical::HistogramKind;
use goodput::duration::Window;
use goodput::report::{
    GaugeStats, Health, KvBand, KvReport, LatencyQuantile, ModelReport, Report, SloReport, SloStatus, SloValues,
    TargetReport, WindowReport,
};
use goodput::slo::{Bounded, Clause, Objective, Scope, Slo};

fn win(s: u64) -> Window {
    Window::new(Duration::from_secs(s)).unwrap()
}

fn window(s: u64, kv: f64, joint: f64, status_evaluated: bool) -> WindowReport {
    let mut w = WindowReport::empty(win(s));
    w.coverage = 1.0;
    w.output_tokens_per_second = Some(800.0);
    w.kv_cache = Some(KvReport { last: kv, mean: kv, max: kv, band: KvBand::Critical, band_time: BTreeMap::new() });
    w.waiting = Some(GaugeStats { first: 10.0, last: 40.0, mean: 30.0, max: 40.0 });
    w.latency = vec![
        LatencyQuantile { metric: HistogramKind::Ttft, quantile: 0.99, value: 0.9, bracket: None },
        LatencyQuantile { metric: HistogramKind::Tpot, quantile: 0.99, value: f64::NAN, bracket: None },
        LatencyQuantile { metric: HistogramKind::Ttft, quantile: 0.5, value: 2.0, bracket: None },
    ];
    let mut attainment = BTreeMap::new();
    attainment.insert(Clause::Joint, Bounded { lower: joint - 0.1, estimate: joint, upper: joint + 0.1 });
    let status = if status_evaluated {
        SloStatus::Evaluated(SloValues {
            attainment,
            burn_rate: Bounded::exact((1.0 - joint) / 0.01),
            goodput_requests_per_second: None,
            goodput_tokens_per_second: Some(Bounded::exact(joint * 800.0)),
            requests: 500.0,
            failed: 0.0,
        })
    } else {
        SloStatus::NoTraffic
    };
    w.slos = vec![SloReport { slo: "chat".into(), objective: 0.99, status }];
    w
}

fn chat(scope: Scope) -> Slo {
    chat_named("chat", scope)
}

fn chat_named(name: &str, scope: Scope) -> Slo {
    Slo {
        name: name.into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: Some(Duration::from_millis(50)),
        e2e: None,
        objective: Objective::new(0.99).unwrap(),
        scope,
    }
}

fn target(name: &str, up: bool, windows: Vec<WindowReport>) -> TargetReport {
    TargetReport {
        target: name.into(),
        engine: None,
        health: Health { up, ..Default::default() },
        models: vec![ModelReport { model: "llama".into(), windows }].into(),
    }
}

#[test]
fn report_to_inputs_to_alerts() {
    let report = Report {
        t_ms: 0,
        targets: vec![
            target("hot", true, vec![window(300, 0.95, 0.5, true), window(60, 0.93, 0.6, true)]),
            target("idle", true, vec![window(300, 0.95, 0.5, false)]),
            target("gone", false, vec![window(300, 0.99, 0.1, true)]),
            // As hot as `hot`, but its daemon started 2 minutes ago: only 40% of 5m is covered.
            target("fresh", true, vec![WindowReport { coverage: 0.4, ..window(300, 0.95, 0.5, true) }]),
        ],
        ..Report::default()
    };
    let slos =
        vec![chat(Scope::all()), chat_named("only-idle", Scope { targets: vec!["idle".into()], models: vec![] })];
    let ins = inputs(&report, &slos);
    assert_eq!(ins.len(), 4);
    assert_eq!((ins[0].windows[0].coverage, ins[3].windows[0].coverage), (1.0, 0.4));
    let hot = &ins[0];
    assert_eq!((hot.model.as_str(), hot.up, hot.waiting_now), ("llama", true, Some(40.0)));
    let w5 = hot.window(win(300)).unwrap();
    assert_eq!((w5.ttft_p99, w5.tpot_p99), (Some(0.9), None), "p99 only, NaN dropped");
    // The queue trend reads the window's first scrape: 10 then, 40 now.
    assert_eq!(w5.waiting_at_start, Some(10.0));
    assert!(w5.slos[0].evaluable && w5.slos[0].requests == 500.0);
    assert!(!ins[1].windows[0].slos[0].evaluable);
    assert_eq!((ins[2].model.as_str(), ins[2].up, ins[2].windows.len()), ("", false, 0));
    // Each input carries the SLOs of its scope only; a down target none.
    let names = |i: usize| ins[i].slos.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        (names(0), names(1), names(2)),
        (vec!["chat".to_string()], vec!["chat".into(), "only-idle".into()], vec![])
    );

    let cfg: AlertingConfig = serde_saphyr::from_str(
        "rules: {LLMKVCacheSaturated: {for: 0s}, LLMGoodputDivergence: {for: 0s}, LLMTargetDown: {for: 0s}, LLMTTFTAboveSLO: {for: 0s}}",
    )
    .unwrap();
    let mut e = AlertEngine::new(cfg.rule_set(), None, cfg.resend_interval);
    let mut got: Vec<(String, String)> =
        e.evaluate(0, &ins).iter().map(|n| (n.labels["target"].clone(), n.labels["alertname"].clone())).collect();
    got.sort();
    // `only-idle` (TTFT 500 ms) judges idle's p99 of 900 ms; on hot it does not exist.
    let want: Vec<(String, String)> = [
        // The window rules wait for coverage; the KV rule reads the last scrape and does not.
        ("fresh", "LLMKVCacheSaturated"),
        ("gone", "LLMTargetDown"),
        ("hot", "LLMGoodputDivergence"),
        ("hot", "LLMKVCacheSaturated"),
        ("hot", "LLMTTFTAboveSLO"),
        ("idle", "LLMKVCacheSaturated"),
        ("idle", "LLMTTFTAboveSLO"),
        ("idle", "LLMTTFTAboveSLO"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
    // KV reads the shortest window's last value (0.93 at 1m, not 0.95 at 5m).
    let kv =
        e.active().find(|a| a.labels["target"] == "hot" && a.labels["alertname"] == "LLMKVCacheSaturated").unwrap();
    assert_eq!(kv.value, 0.93);
    // What waits says so, with the coverage it has and how long it still needs.
    let waiting: Vec<_> = e.readiness(&ins).into_iter().filter(|r| !r.ready).collect();
    let div = waiting.iter().find(|r| r.alertname == "LLMGoodputDivergence").unwrap();
    assert_eq!((div.target.as_str(), div.window, div.coverage, div.min_coverage), ("fresh", win(300), 0.4, 0.9));
    assert!((div.ready_in_seconds - 150.0).abs() < 1e-9, "{div:?}");
    // The others' 5m windows are full; their missing 30m, 1h and 6h windows wait.
    assert!(waiting.iter().filter(|r| r.window == win(300)).all(|r| r.target == "fresh"), "{waiting:?}");
    assert!(waiting.iter().any(|r| r.target == "hot" && r.window == win(3600) && r.coverage == 0.0));
}
