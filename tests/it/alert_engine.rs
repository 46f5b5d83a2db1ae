//! The pure alert core: config defaults and overrides, each rule's condition, the
//! Prometheus-style state machine with an injected clock, and the exported views.

use std::collections::BTreeMap;
use std::time::Duration;

use goodput::alert::rule::RuleKind;
use goodput::alert::validate::{required_quantiles, required_windows, validate};
use goodput::alert::view::{api_response, samples};
use goodput::alert::{
    AlertEngine, AlertInput, AlertName, AlertingConfig, Bounded, Clause, DataSource, KvUsage, Severity, Slo, SloReport,
    WindowInput,
};
use goodput::duration::Window;
use goodput::slo::{Objective, Scope};

fn win(s: u64) -> Window {
    Window::new(Duration::from_secs(s)).unwrap()
}

fn cfg(yaml: &str) -> AlertingConfig {
    serde_saphyr::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"))
}

fn latency_slo(name: &str, ttft: f64, tpot: f64, objective: f64) -> Slo {
    Slo {
        name: name.into(),
        ttft: Some(Duration::from_secs_f64(ttft)),
        tpot: Some(Duration::from_secs_f64(tpot)),
        e2e: None,
        objective: Objective::new(objective).unwrap(),
        scope: Scope::all(),
    }
}

fn chat(objective: f64) -> Slo {
    latency_slo("chat", 0.5, 0.05, objective)
}

fn slo(joint: f64, objective: f64, requests: f64) -> SloReport {
    let mut attainment = BTreeMap::new();
    attainment.insert(Clause::Joint, Bounded { lower: joint, estimate: joint, upper: joint });
    SloReport {
        slo: "chat".into(),
        evaluable: true,
        attainment,
        burn_rate: Bounded::exact((1.0 - joint) / (1.0 - objective)),
        goodput_requests_per_second: Some(Bounded::exact(joint)),
        goodput_tokens_per_second: Some(Bounded::exact(joint * 100.0)),
        requests,
    }
}

fn window(s: u64) -> WindowInput {
    WindowInput {
        window: win(s),
        // Full windows: these tests are about thresholds; coverage has its own tests below.
        coverage: 1.0,
        slo_source: DataSource::Metrics,
        slo_coverage: 1.0,
        output_tokens_per_second: None,
        preemptions_per_second: None,
        ttft_p99: None,
        tpot_p99: None,
        waiting_at_start: None,
        kv_usage: None,
        slos: Vec::new(),
        sources: Default::default(),
    }
}

fn input(windows: Vec<WindowInput>) -> AlertInput {
    AlertInput {
        target: "t".into(),
        model: "m".into(),
        up: true,
        waiting_now: None,
        slos: vec![],
        windows,
        capacity: vec![],
    }
}

/// Alert names whose condition holds (the engine with `for: 0s` everywhere fires them at once),
/// with `slos` as the SLOs that apply to every input.
fn firing(yaml: &str, slos: &[Slo], inputs: &[AlertInput]) -> Vec<String> {
    let mut c = cfg(yaml);
    for r in [
        &mut c.rules.kv_cache_saturated.for_,
        &mut c.rules.goodput_divergence.for_,
        &mut c.rules.ttft_above_slo.for_,
        &mut c.rules.tpot_above_slo.for_,
        &mut c.rules.burn_fast.for_,
        &mut c.rules.burn_slow.for_,
        &mut c.rules.target_down.for_,
        &mut c.rules.preemptions.for_,
        &mut c.rules.queue_growing.for_,
    ] {
        *r = Some(Duration::ZERO);
    }
    let inputs: Vec<AlertInput> = inputs.iter().cloned().map(|i| AlertInput { slos: slos.to_vec(), ..i }).collect();
    let mut e = AlertEngine::new(c.rule_set(), None, c.resend_interval);
    let mut names: Vec<String> = e.evaluate(0, &inputs).iter().map(|n| n.labels["alertname"].clone()).collect();
    names.sort();
    names
}

#[test]
fn defaults_enable_every_rule_and_overrides_merge() {
    let rules = AlertingConfig::default().rule_set();
    assert_eq!(rules.rules.len(), AlertName::ALL.len());
    let c = cfg(
        "rules:\n  LLMKVCacheSaturated: {for: 30s}\n  LLMQueueGrowing: {enabled: false}\n  LLMErrorBudgetBurnFast: {factor: 10, severity: ticket}\n",
    );
    let rs = c.rule_set();
    assert_eq!(rs.rules.len(), AlertName::ALL.len() - 1);
    let kv = rs.rules.iter().find(|r| r.name == AlertName::KvCacheSaturated).unwrap();
    assert_eq!(kv.for_, Duration::from_secs(30));
    assert_eq!(kv.kind, RuleKind::KvCacheSaturated { threshold: 0.9 });
    let fast = rs.rules.iter().find(|r| r.name == AlertName::ErrorBudgetBurnFast).unwrap();
    assert_eq!(fast.severity, Severity::Ticket);
    assert_eq!(
        fast.kind,
        RuleKind::ErrorBudgetBurn { factor: 10.0, long_window: win(3600), short_window: win(300), min_requests: 10.0 }
    );
    assert_eq!(c.resend_interval, Duration::from_secs(60));
}

#[test]
fn config_rejects_typos() {
    for bad in [
        "rules: {LLMKVCacheSaturatd: {for: 1m}}",
        "rules: {LLMKVCacheSaturated: {fro: 1m}}",
        "rules: {LLMTargetDown: {threshold: 3}}",
        "rules: {LLMKVCacheSaturated: {for: 5}}",
        "rules: {LLMKVCacheSaturated: {severity: critical}}",
        "resend_intervall: 1m",
        "rules: {LLMGoodputDivergence: {window: 0s}}",
    ] {
        assert!(serde_saphyr::from_str::<AlertingConfig>(bad).is_err(), "accepted {bad}");
    }
}

#[test]
fn validation_warns_about_clamped_factors() {
    // Reading the YAML refuses both values at their position (tests/it/config_all_errors.rs);
    // `validate` still catches them in a config built in code.
    assert!(serde_saphyr::from_str::<AlertingConfig>("alertmanager: {url: 'ftp://x'}").is_err());
    assert!(serde_saphyr::from_str::<AlertingConfig>("rules: {LLMKVCacheSaturated: {threshold: 1.5}}").is_err());
    let mut c = AlertingConfig {
        alertmanager: Some(goodput::alert::config::Endpoint { url: "ftp://x".into() }),
        ..Default::default()
    };
    c.rules.kv_cache_saturated.threshold = Some(1.5);
    let f = validate(&c, &[chat(0.9)], &[win(300), win(3600)]);
    assert_eq!(f.errors.len(), 2, "{f:?}");
    // 14.4 > 1/(1-0.9) = 10 is clamped; 6 is not.
    let clamp: Vec<_> = f.warnings.iter().filter(|w| w.contains("clamped")).collect();
    assert_eq!(clamp.len(), 1, "{f:?}");
    assert!(clamp[0].contains("LLMErrorBudgetBurnFast") && clamp[0].contains("10.0000"));
    // Windows the rules read are evaluated whether configured or not: no warning.
    assert_eq!(f.warnings.len(), 1, "{f:?}");
    assert_eq!(required_windows(&c.rule_set()), vec![win(300), win(1800), win(3600), win(6 * 3600)]);
    let ok = validate(&AlertingConfig::default(), &[chat(0.99)], &[win(300), win(1800), win(3600), win(21600)]);
    assert_eq!(ok, Default::default());
}

#[test]
fn latency_rules_require_p99_whatever_the_configured_quantiles() {
    assert_eq!(required_quantiles(&AlertingConfig::default().rule_set()), vec![0.99]);
    let one = cfg("rules: {LLMTTFTAboveSLO: {enabled: false}}");
    assert_eq!(required_quantiles(&one.rule_set()), vec![0.99]);
    let none = cfg("rules: {LLMTTFTAboveSLO: {enabled: false}, LLMTPOTAboveSLO: {enabled: false}}");
    assert!(required_quantiles(&none.rule_set()).is_empty());
}

#[test]
fn kv_and_divergence_thresholds() {
    let mut w = window(300);
    w.kv_usage = Some(KvUsage { last: 0.91, max: 0.95 });
    w.output_tokens_per_second = Some(50.0);
    w.slos = vec![slo(0.89, 0.99, 100.0)];
    assert_eq!(firing("", &[chat(0.99)], &[input(vec![w.clone()])]), ["LLMGoodputDivergence", "LLMKVCacheSaturated"]);
    // At the thresholds nothing fires: KV must exceed 0.90, attainment must be below 0.9.
    w.kv_usage = Some(KvUsage { last: 0.90, max: 0.99 });
    w.slos = vec![slo(0.9, 0.99, 100.0)];
    assert!(firing("", &[chat(0.99)], &[input(vec![w.clone()])]).is_empty());
    // Below the throughput floor, bad attainment is not divergence.
    w.slos = vec![slo(0.2, 0.99, 100.0)];
    w.output_tokens_per_second = Some(10.0);
    assert!(firing("", &[chat(0.99)], &[input(vec![w.clone()])]).is_empty());
    w.output_tokens_per_second = Some(10.5);
    assert_eq!(firing("", &[chat(0.99)], &[input(vec![w.clone()])]), ["LLMGoodputDivergence"]);
    // An unevaluable SLO or a disabled rule stays quiet.
    w.slos[0].evaluable = false;
    assert!(firing("", &[chat(0.99)], &[input(vec![w])]).is_empty());
}

#[test]
fn latency_rules_compare_p99_with_each_slo() {
    let mut w = window(300);
    w.ttft_p99 = Some(0.6);
    w.tpot_p99 = Some(0.04);
    let strict = latency_slo("strict", 2.0, 0.03, 0.9);
    assert_eq!(
        firing("", &[chat(0.99), strict.clone()], &[input(vec![w.clone()])]),
        ["LLMTPOTAboveSLO", "LLMTTFTAboveSLO"]
    );
    w.ttft_p99 = Some(f64::NAN);
    assert_eq!(firing("", &[chat(0.99), strict], &[input(vec![w])]), ["LLMTPOTAboveSLO"]);
}

#[test]
fn burn_rules_need_both_windows_and_enough_requests() {
    let windows = |long_joint: f64, short_joint: f64, n: f64| {
        let mut l = window(3600);
        l.slos = vec![slo(long_joint, 0.99, n)];
        let mut s = window(300);
        s.slos = vec![slo(short_joint, 0.99, n)];
        vec![l, s]
    };
    // 1 - 0.85 = 0.15 → burn 15 > 14.4 in both windows.
    assert_eq!(firing("", &[chat(0.99)], &[input(windows(0.85, 0.85, 50.0))]), ["LLMErrorBudgetBurnFast"]);
    // Burn 14 in the long window: no.
    assert!(firing("", &[chat(0.99)], &[input(windows(0.86, 0.5, 50.0))]).is_empty());
    // Min-request guard.
    assert!(firing("", &[chat(0.99)], &[input(windows(0.5, 0.5, 9.0))]).is_empty());
    assert_eq!(
        firing("rules: {LLMErrorBudgetBurnFast: {min_requests: 5}}", &[chat(0.99)], &[input(windows(0.5, 0.5, 9.0))]),
        ["LLMErrorBudgetBurnFast"]
    );
    // Objective 0.9: max burn 10, so 14.4 clamps to 10 and only a total failure reaches it.
    let mut l = window(3600);
    l.slos = vec![slo(0.0, 0.9, 50.0)];
    let mut s = window(300);
    s.slos = vec![slo(0.0, 0.9, 50.0)];
    assert_eq!(firing("", &[chat(0.9)], &[input(vec![l.clone(), s.clone()])]), ["LLMErrorBudgetBurnFast"]);
    s.slos = vec![slo(0.01, 0.9, 50.0)];
    assert!(firing("", &[chat(0.9)], &[input(vec![l, s])]).is_empty());
}

#[test]
fn target_down_preemptions_and_queue() {
    let down = AlertInput {
        target: "x".into(),
        model: String::new(),
        up: false,
        waiting_now: None,
        slos: vec![],
        windows: vec![],
        capacity: vec![],
    };
    assert_eq!(firing("", &[], &[down]), ["LLMTargetDown"]);
    let mut w = window(300);
    w.preemptions_per_second = Some(0.2);
    w.waiting_at_start = Some(5.0);
    let mut i = input(vec![w]);
    i.waiting_now = Some(12.0);
    assert_eq!(firing("", &[], &[i.clone()]), ["LLMPreemptionsSustained", "LLMQueueGrowing"]);
    i.waiting_now = Some(9.0); // grew, but below the 10 floor
    i.windows[0].preemptions_per_second = Some(0.1);
    assert!(firing("", &[], &[i.clone()]).is_empty());
    i.waiting_now = Some(30.0);
    i.windows[0].waiting_at_start = Some(30.0); // large but not growing
    assert!(firing("", &[], &[i]).is_empty());
}

#[test]
fn state_machine_follows_prometheus_for_semantics() {
    let c = cfg(
        "resend_interval: 1m\nrunbook_base_url: https://rb.example/alerts\nrules: {LLMKVCacheSaturated: {for: 2m}}",
    );
    let mut e = AlertEngine::new(c.rule_set(), c.runbook_page(), c.resend_interval);
    let mut hot = window(60);
    hot.kv_usage = Some(KvUsage { last: 0.95, max: 0.97 });
    let mut cool = window(60);
    cool.kv_usage = Some(KvUsage { last: 0.5, max: 0.97 });
    let (hot, cool) = (vec![input(vec![hot])], vec![input(vec![cool])]);
    let s = 1000;
    // A pending alert that clears is dropped without a notification.
    assert!(e.evaluate(0, &hot).is_empty());
    assert_eq!(samples(&e)[0].labels[2], ("state", "pending".to_string()));
    assert!(e.evaluate(60 * s, &cool).is_empty());
    assert!(samples(&e).is_empty());
    // Active from 100 s; fires at 220 s (held for exactly `for`), not at 219 s.
    assert!(e.evaluate(100 * s, &hot).is_empty());
    assert!(e.evaluate(219 * s, &hot).is_empty());
    let n = e.evaluate(220 * s, &hot);
    assert_eq!(n.len(), 1);
    assert_eq!((n[0].starts_at_ms, n[0].ends_at_ms), (100 * s, None));
    assert_eq!(n[0].annotations["runbook_url"], "https://rb.example/alerts/LLMKVCacheSaturated");
    let sm = samples(&e);
    assert_eq!(sm[0].name, "llm_slo_alert");
    assert_eq!(
        sm[0].labels,
        vec![
            ("alertname", "LLMKVCacheSaturated".to_string()),
            ("severity", "page".to_string()),
            ("state", "firing".to_string()),
            ("target", "t".to_string()),
            ("model", "m".to_string()),
        ]
    );
    let api = serde_json::to_value(api_response(&e)).unwrap();
    assert_eq!(api["data"]["alerts"][0]["state"], "firing");
    assert_eq!(api["data"]["alerts"][0]["activeAt"], "1970-01-01T00:01:40.000Z");
    assert_eq!(api["data"]["alerts"][0]["value"], "0.95");
    // Re-sent once per resend interval.
    assert!(e.evaluate(250 * s, &hot).is_empty());
    assert_eq!(e.evaluate(280 * s, &hot).len(), 1);
    // Resolution: one notification with endsAt, then nothing.
    let r = e.evaluate(300 * s, &cool);
    assert_eq!((r.len(), r[0].ends_at_ms, r[0].fingerprint.clone()), (1, Some(300 * s), n[0].fingerprint.clone()));
    assert!(e.evaluate(400 * s, &cool).is_empty());
    assert!(samples(&e).is_empty());
}
