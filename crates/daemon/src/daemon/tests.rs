//! Health bookkeeping and report assembly, without any I/O; the scrape loop's first wait,
//! against a port nothing listens on.

use std::sync::Arc;
use std::time::Duration;

use super::evaluator::Evaluator;
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

fn eval_config() -> crate::evaluate::EvalConfig {
    config::from_str("targets: [{name: x, url: 'http://127.0.0.1:1/metrics'}]", "t.yaml").unwrap().config.eval_config()
}

#[tokio::test]
async fn report_keeps_config_order_and_the_given_instant() {
    let (a, b) = (runtime("b-first"), runtime("a-second"));
    b.record(1, Duration::ZERO, Ok(snapshot()));
    let evaluator = Evaluator::new(vec![a, b], eval_config());
    let report = evaluator.tick(123_456, Duration::from_secs(10)).await;
    assert_eq!(report.t_ms, 123_456);
    let names: Vec<&str> = report.targets.iter().map(|t| t.target.as_str()).collect();
    assert_eq!(names, ["b-first", "a-second"]);
    assert!(!report.targets[0].health.up);
    assert!(report.targets[1].health.up);
    assert_eq!(report.targets[1].health.last_successful_scrape_ms, Some(1));
    for t in &report.targets {
        assert_eq!(t.health.last_evaluation_ms, Some(123_456), "{}", t.target);
    }
}

#[tokio::test]
async fn a_target_still_evaluating_keeps_its_previous_results_and_the_others_move_on() {
    let (slow, fast) = (runtime("slow"), runtime("fast"));
    // The slow target's evaluation at t = 2 s waits until the test lets it go.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let evaluator = Evaluator::new(vec![slow, fast], eval_config()).with_evaluate(move |rt, now_ms, _| {
        if rt.config.name == "slow" && now_ms == 2_000 {
            let _ = gate.lock().unwrap().recv();
        }
        Vec::new()
    });
    evaluator.tick(1_000, Duration::from_secs(10)).await;
    let report = evaluator.tick(2_000, Duration::from_millis(200)).await;
    assert_eq!(report.t_ms, 2_000);
    // The report came at the deadline, with the slow target's results of the tick before.
    assert_eq!(report.targets[0].health.last_evaluation_ms, Some(1_000));
    assert_eq!(report.targets[1].health.last_evaluation_ms, Some(2_000));
    // While it is busy, ticks neither queue more of its evaluations nor wait for it.
    let report = evaluator.tick(3_000, Duration::from_secs(10)).await;
    assert_eq!(report.targets[0].health.last_evaluation_ms, Some(1_000));
    assert_eq!(report.targets[1].health.last_evaluation_ms, Some(3_000));
    release.send(()).unwrap();
    // Once done, its late evaluation shows, and the next tick evaluates it again.
    let mut seen = None;
    for _ in 0..250 {
        seen = evaluator.assemble(3_500).targets[0].health.last_evaluation_ms;
        if seen == Some(2_000) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen, Some(2_000), "the late evaluation was kept");
    let report = evaluator.tick(4_000, Duration::from_secs(10)).await;
    assert_eq!(report.targets[0].health.last_evaluation_ms, Some(4_000));
}

/// A fleet's report does not copy each target's windows: every report carrying a target's
/// latest results shares them with the evaluator, and a report that changes them (the
/// request path attaching its windows) changes its own copy only.
#[tokio::test]
async fn reports_share_a_targets_results_instead_of_copying_them() {
    use crate::report::ModelReport;
    let evaluator = Evaluator::new(vec![runtime("a")], eval_config())
        .with_evaluate(|_, _, _| vec![ModelReport { model: "m".into(), windows: Vec::new() }]);
    let first = evaluator.tick(1_000, Duration::from_secs(10)).await;
    let again = evaluator.assemble(1_500);
    assert!(Arc::ptr_eq(&first.targets[0].models, &again.targets[0].models), "one copy for both reports");
    let mut changed = evaluator.assemble(1_600);
    changed.targets[0].models_mut().push(ModelReport { model: "client-named".into(), windows: Vec::new() });
    assert_eq!((first.targets[0].models.len(), changed.targets[0].models.len()), (1, 2));
    assert!(Arc::ptr_eq(&first.targets[0].models, &evaluator.assemble(1_700).targets[0].models));
    // A new evaluation replaces what the next reports share.
    let next = evaluator.tick(2_000, Duration::from_secs(10)).await;
    assert!(!Arc::ptr_eq(&first.targets[0].models, &next.targets[0].models));
}

#[tokio::test]
async fn a_panicking_evaluation_keeps_that_targets_results_and_the_round_goes_on() {
    let targets: Vec<_> = ["a", "bad", "c", "d"].into_iter().map(runtime).collect();
    let evaluator = Evaluator::new(targets, eval_config()).with_evaluate(|rt, now_ms, _| {
        assert!(!(rt.config.name == "bad" && now_ms == 2_000), "a bug in one target's evaluation");
        Vec::new()
    });
    evaluator.tick(1_000, Duration::from_secs(10)).await;
    // The round ends when every target is done, the failed one too: the tick does not sit
    // out its whole wait.
    let report = tokio::time::timeout(Duration::from_secs(60), evaluator.tick(2_000, Duration::from_secs(3600)))
        .await
        .expect("the round ended");
    let seen: Vec<_> = report.targets.iter().map(|t| (t.target.as_str(), t.health.last_evaluation_ms)).collect();
    assert_eq!(seen, [("a", Some(2_000)), ("bad", Some(1_000)), ("c", Some(2_000)), ("d", Some(2_000))]);
    // The target is not left marked busy: the next tick evaluates it.
    let report = evaluator.tick(3_000, Duration::from_secs(10)).await;
    assert_eq!(report.targets[1].health.last_evaluation_ms, Some(3_000));
}

#[tokio::test]
async fn a_round_a_later_tick_superseded_evaluates_no_more_targets_at_its_past_instant() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).max(2);
    // One held target per worker, then one more that the first round cannot reach in time.
    let mut names: Vec<String> = (0..cores).map(|i| format!("held{i}")).collect();
    names.push("last".into());
    let targets: Vec<_> = names.iter().map(|n| runtime(n)).collect();
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(gate);
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = calls.clone();
    let evaluator = Evaluator::new(targets, eval_config()).with_evaluate(move |rt, now_ms, _| {
        seen.lock().unwrap().push((rt.config.name.clone(), now_ms));
        if rt.config.name.starts_with("held") && now_ms == 1_000 {
            let _ = gate.lock().unwrap().recv();
        }
        Vec::new()
    });
    assert_eq!(evaluator.workers(), cores);
    evaluator.tick(1_000, Duration::from_millis(100)).await;
    // Every worker holds a target of the first round; the next tick supersedes it.
    let mut next = Box::pin(evaluator.tick(2_000, Duration::from_secs(3600)));
    tokio::select! {
        _ = &mut next => panic!("the second round cannot end while every worker is held"),
        () = tokio::time::sleep(Duration::from_millis(50)) => {}
    }
    for _ in 0..cores {
        release.send(()).unwrap();
    }
    let report = tokio::time::timeout(Duration::from_secs(60), next).await.expect("the second round ended");
    assert!(!calls.lock().unwrap().contains(&("last".to_string(), 1_000)), "{:?}", calls.lock().unwrap());
    assert_eq!(report.targets.last().unwrap().health.last_evaluation_ms, Some(2_000));
}

#[test]
fn scrape_phases_are_stable_per_name_and_spread_over_the_interval() {
    use super::target::phase;
    let interval = Duration::from_secs(5);
    assert_eq!(phase("t1", interval), phase("t1", interval));
    assert_ne!(phase("t1", interval), phase("t2", interval));
    // A thousand targets named as a config of many usually names them: each tenth of the
    // interval gets close to its share, none is empty or holds a crowd.
    let mut buckets = [0usize; 10];
    for i in 0..1000 {
        let p = phase(&format!("t{i}"), interval);
        assert!(p > Duration::ZERO && p <= interval, "{p:?}");
        buckets[(p.as_nanos() * 10 / interval.as_nanos()).min(9) as usize] += 1;
    }
    assert!(buckets.iter().all(|&n| (50..=150).contains(&n)), "{buckets:?}");
    assert!(phase("x", Duration::from_nanos(1)) <= Duration::from_nanos(1));
}

#[tokio::test]
async fn a_first_scrape_waits_its_turn_and_a_stop_ends_the_wait() {
    use super::clock::SystemClock;
    use super::target::{fetcher_for, first_scrape_after, limits_for, scrape_loop};
    // One start a millisecond: ten thousand targets started together spread over ten seconds.
    assert_eq!(first_scrape_after(0), Duration::ZERO);
    assert_eq!(first_scrape_after(10_000), Duration::from_secs(10));

    let c = config::from_str("targets: [{name: a, url: 'http://127.0.0.1:1/metrics'}]", "t.yaml").unwrap().config;
    let client = crate::scrape::HttpClient::new().unwrap();
    let start = |rt: &Arc<TargetRuntime>, first_after: Duration| {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let fetcher = fetcher_for(&c, &rt.config, &client).unwrap();
        let run = scrape_loop(rt.clone(), fetcher, limits_for(&c), Arc::new(SystemClock), stopped, first_after);
        (stop, tokio::spawn(run))
    };
    let scraped = |rt: &Arc<TargetRuntime>| rt.lock().health.last_scrape_duration_seconds.is_some();

    // Nothing listens on port 1: the scrape fails at once, and is recorded all the same.
    let rt = runtime("a");
    let (_stop, run) = start(&rt, Duration::from_millis(400));
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(!scraped(&rt), "scraped before its turn");
    let t = std::time::Instant::now();
    while !scraped(&rt) {
        assert!(t.elapsed() < Duration::from_secs(10), "never scraped after its turn");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.abort();

    let rt = runtime("a");
    let (stop, run) = start(&rt, Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("the wait ends on stop").unwrap();
    assert!(!scraped(&rt), "a stopped target was scraped");
}
