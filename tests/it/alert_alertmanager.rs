//! The rule engine and the real delivery client against real Alertmanagers (Debian
//! `prometheus-alertmanager`) on 127.0.0.1: an overload makes LLMKVCacheSaturated and
//! LLMGoodputDivergence appear in Alertmanager's API, recovery resolves them, and an
//! Alertmanager that is stopped and restarted (same storage) loses nothing.
//!
//! Skips when the binary is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::common_am;
use crate::support::PATIENCE;

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common_am::{Am, Http, alertmanager_binary};
use goodput::alert::{
    AlertEngine, AlertInput, AlertingConfig, Bounded, Clause, DataSource, KvUsage, Slo, SloReport, WindowInput,
};
use goodput::deliver::Delivery;
use goodput::duration::Window;
use goodput::slo::{Objective, Scope};

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn win(s: u64) -> Window {
    Window::new(Duration::from_secs(s)).unwrap()
}

/// One target/model; `overloaded` drives KV usage and joint attainment across their thresholds.
fn input(target: &str, up: bool, kv: f64, joint: f64) -> AlertInput {
    let mut attainment = BTreeMap::new();
    attainment.insert(Clause::Joint, Bounded { lower: joint - 0.05, estimate: joint, upper: joint + 0.01 });
    let slo = SloReport {
        slo: "chat".into(),
        evaluable: true,
        attainment,
        burn_rate: Bounded::exact((1.0 - joint) / 0.01),
        goodput_requests_per_second: Some(Bounded::exact(joint * 10.0)),
        goodput_tokens_per_second: Some(Bounded::exact(joint * 1500.0)),
        requests: 600.0,
    };
    AlertInput {
        target: target.into(),
        model: if up { "llama-8b".into() } else { String::new() },
        up,
        waiting_now: None,
        slos: if up { vec![chat()] } else { Vec::new() },
        windows: if up {
            vec![WindowInput {
                window: win(60),
                coverage: 1.0,
                slo_source: DataSource::Metrics,
                slo_coverage: 1.0,
                output_tokens_per_second: Some(1500.0),
                preemptions_per_second: None,
                ttft_p99: None,
                tpot_p99: None,
                waiting_at_start: None,
                kv_usage: Some(KvUsage { last: kv, max: kv.max(0.5) }),
                slos: vec![slo],
                sources: Default::default(),
            }]
        } else {
            Vec::new()
        },
        capacity: vec![],
    }
}

fn chat() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: Some(Duration::from_millis(50)),
        e2e: None,
        objective: Objective::new(0.99).unwrap(),
        scope: Scope::all(),
    }
}

const KV: &str = "LLMKVCacheSaturated";
const DIV: &str = "LLMGoodputDivergence";
const DOWN: &str = "LLMTargetDown";

/// Ticks the engine every 200 ms with `inputs` until `done` holds, for at most `limit`.
async fn tick_until<F, Fut>(
    engine: &mut AlertEngine,
    delivery: &Delivery,
    inputs: &[AlertInput],
    limit: Duration,
    mut done: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        let out = engine.evaluate(now_ms(), inputs);
        delivery.submit(&out);
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_fires_recovery_resolves_and_an_outage_loses_nothing() {
    let Some(bin) = alertmanager_binary() else { return };
    goodput::scrape::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    let mut steady = Am::new(&bin, tmp.path(), "steady");
    let mut flaky = Am::new(&bin, tmp.path(), "flaky");
    steady.start();
    flaky.start();
    let http = Http::new();
    for am in [&steady, &flaky] {
        http.wait_ready(am, PATIENCE).await;
    }

    let yaml = format!(
        "alertmanager: {{url: '{}/'}}\nalertmanagers: [{{url: {}}}]\nresend_interval: 1s\nrunbook_url: 'https://runbooks.example/llm/{{alertname}}'\n\
         rules:\n  LLMKVCacheSaturated: {{for: 1s}}\n  LLMGoodputDivergence: {{for: 1s, window: 1m}}\n  LLMTargetDown: {{for: 1s}}\n",
        steady.url(),
        flaky.url()
    );
    let cfg: AlertingConfig = serde_saphyr::from_str(&yaml).expect("config parses");
    let mut opts = goodput::deliver::DeliveryOptions::from_config(&cfg);
    opts.initial_backoff = Duration::from_millis(200);
    opts.max_backoff = Duration::from_secs(1);
    let delivery = Delivery::start_with(&cfg, opts).unwrap();
    let mut engine = AlertEngine::new(cfg.rule_set(), cfg.runbook_page(), cfg.resend_interval);

    let overload = [input("llama", true, 0.97, 0.42)];
    let calm = [input("llama", true, 0.62, 0.995)];
    let both = vec![DIV.to_string(), KV.to_string()];

    // 1. Overload: both alerts reach both Alertmanagers, with labels and annotations.
    let ok = tick_until(&mut engine, &delivery, &overload, PATIENCE, || async {
        http.names(&steady).await.as_ref() == Some(&both) && http.names(&flaky).await.as_ref() == Some(&both)
    })
    .await;
    assert!(ok, "overload alerts never reached Alertmanager: {:?}", delivery.stats());
    for a in http.alerts(&steady).await.unwrap() {
        let l = &a["labels"];
        assert_eq!(l["severity"], "page");
        assert_eq!(l["target"], "llama");
        assert_eq!(l["model"], "llama-8b");
        let name = l["alertname"].as_str().unwrap();
        assert_eq!(a["annotations"]["runbook_url"], format!("https://runbooks.example/llm/{name}"));
        let desc = a["annotations"]["description"].as_str().unwrap();
        if name == KV {
            assert!(l.get("slo").is_none());
            assert!(desc.contains("97.0%"), "{desc}");
        } else {
            assert_eq!(l["slo"], "chat");
            assert!(desc.contains("42.0%") && desc.contains("1500.0 tokens/s"), "{desc}");
        }
    }

    // 2. Load drops: both resolve, by resolutions Alertmanager received (not by expiry).
    let ok = tick_until(&mut engine, &delivery, &calm, PATIENCE, || async {
        http.names(&steady).await.is_some_and(|n| n.is_empty())
            && http.resolved_received(&steady).await.is_some_and(|r| r >= 2.0)
    })
    .await;
    assert!(ok, "alerts did not resolve: {:?} / {:?}", http.names(&steady).await, delivery.stats());

    // 3. Overload again, then the flaky Alertmanager goes away.
    let ok = tick_until(&mut engine, &delivery, &overload, PATIENCE, || async {
        http.names(&flaky).await.as_ref() == Some(&both)
    })
    .await;
    assert!(ok, "second overload never reached Alertmanager");
    flaky.stop();
    // While it is down: KV recovers, goodput stays bad, and a second target goes down.
    let outage = [input("llama", true, 0.62, 0.42), input("mistral", false, 0.0, 1.0)];
    let end = Instant::now() + Duration::from_secs(6);
    let _ =
        tick_until(&mut engine, &delivery, &outage, Duration::from_secs(6), || async { Instant::now() >= end }).await;
    let expected = vec![DIV.to_string(), DOWN.to_string()];
    assert_eq!(http.names(&steady).await, Some(expected.clone()), "the steady Alertmanager is current");
    let stats = delivery.stats();
    let flaky_stats = stats.iter().find(|s| s.url.starts_with(&flaky.url())).unwrap();
    assert!(flaky_stats.failed_attempts > 0 && flaky_stats.queued >= 2, "{flaky_stats:?}");

    // 4. It comes back on the same storage: the alert still firing and the new one arrive, and
    //    the resolution of the KV alert that happened during the outage is delivered.
    flaky.start();
    let ok = tick_until(&mut engine, &delivery, &outage, PATIENCE, || async {
        http.names(&flaky).await.as_ref() == Some(&expected)
            && http.resolved_received(&flaky).await.is_some_and(|r| r >= 1.0)
    })
    .await;
    assert!(
        ok,
        "after restart: {:?}, resolved received {:?}, {:?}",
        http.names(&flaky).await,
        http.resolved_received(&flaky).await,
        delivery.stats()
    );
    let kv_down = http.alerts(&flaky).await.unwrap();
    assert!(kv_down.iter().all(|a| a["labels"]["alertname"] != KV));
    let down = kv_down.iter().find(|a| a["labels"]["alertname"] == DOWN).unwrap();
    assert_eq!(down["labels"]["target"], "mistral");
    assert!(down["labels"].get("model").is_none());
}
