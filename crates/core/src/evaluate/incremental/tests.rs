//! The incremental windows against the from-scratch reference (`evaluate_target`, which
//! reads every point through `RangeView::collect`): random scrape sequences with resets,
//! `_created` and process-start changes, NaN, layout changes, models and shards that
//! vanish and return, irregular times and evaluations that lag the newest scrape; every
//! report equal bit for bit at every tick, gauge means within 1e-12 relative.
//!
//! With alert-only windows longer than every configured one, the store the incremental
//! state follows thins what the configured windows let go of (`TargetWindows::thin_before`);
//! the reference then reads a second store fed the same scrapes and never thinned (what
//! every window read before thinning), and the reference on the thinned store must agree.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::*;
use crate::canonical::{
    Bucket, CounterKind, CounterValue, Engine, FinishReason, GaugeKind, Histogram, HistogramKind, ModelSnapshot, Shard,
    Snapshot,
};
use crate::evaluate::{AlertWindow, evaluate_target};
use crate::report::{GaugeStats, ModelReport};
use crate::slo::{Objective, Scope, Slo};

/// What one (model, shard) has counted so far.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counts {
    pub(super) buckets: [f64; 3],
    pub(super) sum: f64,
    pub(super) tokens: f64,
    pub(super) stop: f64,
    pub(super) abort: f64,
    pub(super) created: f64,
}

/// One scrape's changes for one (model, shard).
#[derive(Debug, Clone)]
struct Change {
    present: bool,
    incs: [u8; 3],
    tokens: u16,
    /// 0: none; 1: values restart (created changes too); 2: only `_created` changes;
    /// 3: values restart, `_created` stays.
    restart: u8,
    nan_tokens: bool,
    kv: f64,
    running: u8,
}

#[derive(Debug, Clone)]
struct Step {
    dt_ms: i64,
    changes: [Change; 4],
    process_restart: bool,
    /// Evaluate after this scrape, this many ms before it (a scrape newer than the tick).
    eval_lag_ms: Option<i64>,
}

fn change() -> impl Strategy<Value = Change> {
    (
        prop::bool::weighted(0.85),
        [0u8..4, 0u8..4, 0u8..4],
        0u16..500,
        prop_oneof![12 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        prop::bool::weighted(0.03),
        prop_oneof![8 => 0.0f64..1.0, 1 => Just(f64::NAN), 1 => Just(0.8)],
        0u8..20,
    )
        .prop_map(|(present, incs, tokens, restart, nan_tokens, kv, running)| Change {
            present,
            incs,
            tokens,
            restart,
            nan_tokens,
            kv,
            running,
        })
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![20 => 1i64..4_000, 1 => 10_000i64..40_000],
        [change(), change(), change(), change()],
        prop::bool::weighted(0.02),
        prop_oneof![2 => Just(None), 3 => Just(Some(0i64)), 1 => (1i64..3_000).prop_map(Some)],
    )
        .prop_map(|(dt_ms, changes, process_restart, eval_lag_ms)| Step {
            dt_ms,
            changes,
            process_restart,
            eval_lag_ms,
        })
}

const MODELS: [&str; 2] = ["a", "b"];

/// A model that now and then shows only series no alert-only window keeps: in a thin
/// scrape it is one column, so that it still counts in the windows' spans.
const LONE: &str = "c";

fn snapshot(counts: &[Counts; 4], step: &Step, process_start: f64) -> Snapshot {
    let mut models: BTreeMap<String, ModelSnapshot> = BTreeMap::new();
    for (i, (c, ch)) in counts.iter().zip(&step.changes).enumerate() {
        if !ch.present {
            continue;
        }
        let m = models.entry(MODELS[i / 2].to_string()).or_default();
        let key = format!("engine=\"{}\"", i % 2);
        let created = Some(c.created);
        // Bounds above every threshold (1 and 2 s), which an alert-only window keeping a
        // histogram for its SLO brackets drops, and now and then a bound at 0.4 s: the first
        // bound above the 0.3 s threshold moves between layouts.
        let [b0, b1, b2] = c.buckets;
        let mut bounds = vec![(0.1, b0), (0.5, b1), (1.0, b1 + ((b2 - b1) / 2.0).floor()), (2.0, b2)];
        if ch.tokens.is_multiple_of(3) {
            bounds.insert(1, (0.4, b1));
        }
        bounds.push((f64::INFINITY, b2));
        for kind in [HistogramKind::Ttft, HistogramKind::E2e] {
            let buckets = bounds.iter().map(|&(le, count)| Bucket { le, count }).collect();
            let value = Histogram { buckets, sum: c.sum, count: c.buckets[2] };
            m.histograms.entry(kind).or_default().push(Shard { key: key.clone(), created, value });
        }
        let tokens = if ch.nan_tokens { f64::NAN } else { c.tokens };
        m.counters.entry(CounterKind::PromptTokens).or_default().push(Shard {
            key: key.clone(),
            created,
            value: CounterValue { value: tokens, reason: None },
        });
        for (reason, value) in [(FinishReason::Stop, c.stop), (FinishReason::Abort, c.abort)] {
            m.counters.entry(CounterKind::RequestsFinished).or_default().push(Shard {
                key: format!("{key},finished_reason=\"{}\"", reason.as_str()),
                created,
                value: CounterValue { value, reason: Some(reason) },
            });
        }
        for (kind, value) in [
            (GaugeKind::KvCacheUsage, ch.kv),
            (GaugeKind::Running, f64::from(ch.running)),
            (GaugeKind::Waiting, f64::from(ch.running % 3) + 0.1),
        ] {
            m.gauges.entry(kind).or_default().push(Shard { key: key.clone(), created: None, value });
        }
    }
    if step.changes[3].tokens.is_multiple_of(4) {
        let c = &counts[3];
        let m = models.entry(LONE.to_string()).or_default();
        m.counters.entry(CounterKind::PromptTokens).or_default().push(Shard {
            key: String::new(),
            created: Some(c.created),
            value: CounterValue { value: c.tokens, reason: None },
        });
        let kv = Shard { key: String::new(), created: None, value: step.changes[3].kv };
        m.gauges.entry(GaugeKind::KvCacheUsage).or_default().push(kv);
    }
    Snapshot {
        engine: Engine::Vllm,
        models,
        process_start: Some(process_start),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    }
}

fn advance_counts(counts: &mut [Counts; 4], step: &Step) {
    for (c, ch) in counts.iter_mut().zip(&step.changes) {
        if matches!(ch.restart, 1 | 3) {
            *c = Counts { created: c.created, ..Counts::default() };
        }
        if matches!(ch.restart, 1 | 2) {
            c.created += 1.0;
        }
        let [a, b, d] = ch.incs.map(f64::from);
        c.buckets[0] += a;
        c.buckets[1] += a + b;
        c.buckets[2] += a + b + d;
        c.sum += 0.037 * a + 0.31 * b + 1.7 * d;
        c.tokens += f64::from(ch.tokens);
        c.stop += a + b;
        c.abort += d;
    }
}

pub(super) fn config() -> EvalConfig {
    let slo = |name: &str, ttft: f64, e2e: Option<f64>| Slo {
        name: name.into(),
        ttft: Some(Duration::from_secs_f64(ttft)),
        tpot: None,
        e2e: e2e.map(Duration::from_secs_f64),
        objective: Objective::new(0.9).unwrap(),
        scope: Scope::all(),
    };
    EvalConfig {
        windows: [10, 20, 30, 45, 60].map(Window::from_secs).to_vec(),
        quantiles: vec![0.5, 0.9, 0.99],
        kv: KvThresholds::default(),
        slos: vec![slo("fast", 0.1, None), slo("joint", 0.3, Some(0.5))],
        spec_draft_cost_ratio: None,
        // Windows only the alert rules read: their thin state gives the reference's
        // values for what they report.
        alert_only: vec![
            AlertWindow { window: Window::from_secs(20), quantiles: vec![] },
            AlertWindow { window: Window::from_secs(45), quantiles: vec![0.99] },
        ],
    }
}

/// Configured 10s and 30s; alert-only 20s (inside the full part), 45s (with a latency
/// rule) and 60s: the store keeps full scrapes for 30 s and thin ones up to 60 s.
pub(super) fn thin_config() -> EvalConfig {
    EvalConfig {
        alert_only: vec![
            AlertWindow { window: Window::from_secs(20), quantiles: vec![0.99] },
            AlertWindow { window: Window::from_secs(45), quantiles: vec![0.99] },
            AlertWindow { window: Window::from_secs(60), quantiles: vec![] },
        ],
        ..config()
    }
}

/// `a` and `b` within 1e-12 relative (or both NaN, or equal).
fn close(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Asserts the incremental reports equal the reference's: bit for bit once the gauge
/// means, checked within 1e-12 relative, are taken from the reference.
pub(crate) fn assert_same(reference: &[ModelReport], incremental: &[ModelReport], at: &str) {
    let mut got = incremental.to_vec();
    assert_eq!(reference.len(), got.len(), "{at}: models");
    for (r, g) in reference.iter().zip(&mut got) {
        for (rw, gw) in r.windows.iter().zip(&mut g.windows) {
            let mean = |a: Option<f64>, b: Option<&mut f64>| {
                if let (Some(a), Some(b)) = (a, b) {
                    assert!(close(a, *b), "{at}: {} {}: mean {a} vs {b}", r.model, rw.window);
                    *b = a;
                }
            };
            mean(rw.kv_cache.as_ref().map(|k| k.mean), gw.kv_cache.as_mut().map(|k| &mut k.mean));
            let stats = |s: &Option<GaugeStats>| s.map(|s| s.mean);
            mean(stats(&rw.running), gw.running.as_mut().map(|s| &mut s.mean));
            mean(stats(&rw.waiting), gw.waiting.as_mut().map(|s| &mut s.mean));
        }
    }
    let (want, got) = (format!("{reference:#?}"), format!("{got:#?}"));
    if want != got {
        // The first differing line with the lines before it: the full reports are long.
        let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
        let i = w.iter().zip(&g).position(|(a, b)| a != b).unwrap_or(w.len().min(g.len()));
        let context = w[i.saturating_sub(12)..i].join("\n");
        panic!(
            "{at}: reports differ at line {i}:\n{context}\n- {}\n+ {}",
            w.get(i).unwrap_or(&""),
            g.get(i).unwrap_or(&"")
        );
    }
}

/// What one run saw.
#[derive(Debug, Default)]
struct Seen {
    ticks: usize,
    /// Forward searches for a series' next sample.
    searches: usize,
    /// Ticks at which the store held thin points, and the most it held.
    thin_ticks: usize,
    most_thin: usize,
}

/// Runs `steps` through both under `cfg`.
fn run(steps: &[Step], cfg: &EvalConfig) -> Seen {
    let mut seen = Seen::default();
    let mut store = TargetWindows::new(Duration::from_secs(60));
    let mut whole = TargetWindows::new(Duration::from_secs(60));
    let mut inc = Incremental::new(cfg);
    let mut counts = [Counts { created: 1.7e9, ..Counts::default() }; 4];
    let (mut t, mut now, mut process_start) = (1_000_000i64, i64::MIN, 1.7e9);
    for (i, s) in steps.iter().enumerate() {
        t += s.dt_ms;
        if s.process_restart {
            process_start += 1.0;
        }
        advance_counts(&mut counts, s);
        let snap = Arc::new(snapshot(&counts, s, process_start));
        store.push(t, snap.clone());
        whole.push(t, snap);
        let Some(lag) = s.eval_lag_ms else { continue };
        now = now.max(t - lag);
        let want = evaluate_target(&whole, now, cfg);
        let at = format!("step {i}, t={t}, now={now}, {} thin", store.thin_points());
        assert_same(&want, &evaluate_target(&store, now, cfg), &format!("reference on the thinned store, {at}"));
        let got = inc.evaluate(&mut store, now, cfg);
        assert_same(&want, &got, &at);
        seen.ticks += 1;
        seen.thin_ticks += usize::from(store.thin_points() > 0);
        seen.most_thin = seen.most_thin.max(store.thin_points());
    }
    // The incremental path is the one tested: the state never starts over.
    assert_eq!(inc.restarts, 0, "restarts in {} ticks", seen.ticks);
    assert_eq!(whole.thin_points(), 0);
    seen.searches = inc.searches;
    seen
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn incremental_windows_equal_the_reference(steps in prop::collection::vec(step(), 1..120)) {
        run(&steps, &config());
    }

    #[test]
    fn incremental_windows_over_a_thinned_store_equal_the_reference(
        steps in prop::collection::vec(step(), 1..120),
    ) {
        run(&steps, &thin_config());
    }
}

#[test]
fn the_random_sequences_exercise_the_rare_paths() {
    // Series that vanish and return make the window search forward for their next sample.
    // Points cross from the full part to the thin one while the alert-only windows hold
    // them, and leave those windows in their thin form.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for cfg in [config(), thin_config()] {
        let mut all = Seen::default();
        for _ in 0..8 {
            let steps = prop::collection::vec(step(), 100..120).new_tree(&mut runner).unwrap().current();
            let seen = run(&steps, &cfg);
            all.ticks += seen.ticks;
            all.searches += seen.searches;
            all.thin_ticks += seen.thin_ticks;
            all.most_thin = all.most_thin.max(seen.most_thin);
        }
        assert!(all.ticks > 400 && all.searches > 10, "{all:?}");
        if crate::evaluate::Thinning::of(&cfg).is_some() {
            assert!(all.thin_ticks * 2 > all.ticks && all.most_thin > 10, "{all:?}");
        } else {
            assert_eq!(all.thin_ticks, 0, "{all:?}");
        }
    }
}

/// A constant-shape scrape whose counters move by `i`.
fn simple(i: f64) -> Arc<Snapshot> {
    let step = Step {
        dt_ms: 0,
        changes: std::array::from_fn(|k| Change {
            present: k == 0,
            incs: [1, 2, 0],
            tokens: 3,
            restart: 0,
            nan_tokens: false,
            kv: (i * 0.37).fract(),
            running: (i as u64 % 7) as u8,
        }),
        process_restart: false,
        eval_lag_ms: None,
    };
    let c = Counts { buckets: [i, 2.0 * i, 3.0 * i], sum: 0.1 * i, tokens: 5.0 * i, stop: i, abort: 0.0, created: 1.0 };
    Arc::new(snapshot(&[c; 4], &step, 1.0))
}

#[test]
fn windows_longer_than_the_ring_cap_still_match() {
    // A 1 h window at 50 ms holds 72,000 scrapes; the ring keeps MAX_POINTS of them, so
    // every push drops the oldest while the window still covers it.
    let cfg = EvalConfig {
        windows: vec![Window::from_secs(1800), Window::from_secs(3600)],
        quantiles: vec![0.5],
        ..config()
    };
    let mut store = TargetWindows::new(Duration::from_secs(3600));
    let mut inc = Incremental::new(&cfg);
    for i in 0..(crate::window::MAX_POINTS as i64 + 4_000) {
        let t = i * 50;
        store.push(t, simple(i as f64));
        // Ticks 1,000 pushes apart (the ring dropped many points the window held), and a
        // run of ticks at every push (one dropped point per tick).
        if (i > 33_000 && i % 1_000 == 0) || (38_000..38_030).contains(&i) {
            let want = evaluate_target(&store, t, &cfg);
            assert_same(&want, &inc.evaluate(&mut store, t, &cfg), &format!("push {i}"));
        }
    }
    assert_eq!(store.len(), crate::window::MAX_POINTS);
    assert_eq!(inc.restarts, 0, "the dropped points were taken out one by one");
}

/// The `i`th scrape of a deterministic sequence with absences, restarts and the lone model.
pub(super) fn scripted(i: u32, counts: &mut [Counts; 4]) -> Snapshot {
    let s = Step {
        dt_ms: 0,
        changes: std::array::from_fn(|k| Change {
            present: !(i + k as u32).is_multiple_of(11),
            incs: [(i % 3) as u8, 1, (i % 2) as u8],
            tokens: (i * 7 % 100) as u16,
            restart: u8::from(i % 37 == 5),
            nan_tokens: false,
            kv: f64::from(i % 10) / 10.0,
            running: (i % 5) as u8,
        }),
        process_restart: false,
        eval_lag_ms: None,
    };
    advance_counts(counts, &s);
    snapshot(counts, &s, 1.0)
}

#[test]
fn replaying_the_stored_points_gives_the_same_evaluation() {
    // Evaluated along the way, so that the store is thinned before it is taken apart.
    let cfg = thin_config();
    let (mut store, mut whole) =
        (TargetWindows::new(Duration::from_secs(60)), TargetWindows::new(Duration::from_secs(60)));
    let mut live = Incremental::new(&cfg);
    let mut counts = [Counts { created: 1.0, ..Counts::default() }; 4];
    let mut t = 0;
    let mut i = 0u32;
    let mut push = |store: &mut TargetWindows, whole: &mut TargetWindows, t: &mut i64| {
        let snap = Arc::new(scripted(i, &mut counts));
        *t += 700 + i64::from(i % 5) * 300;
        store.push(*t, snap.clone());
        whole.push(*t, snap);
        i += 1;
    };
    for k in 0..200 {
        push(&mut store, &mut whole, &mut t);
        if k % 5 == 0 {
            live.evaluate(&mut store, t, &cfg);
        }
    }
    live.evaluate(&mut store, t, &cfg);
    assert!(store.thin_points() > 10, "{} thin points", store.thin_points());
    let mut restored = TargetWindows::new(Duration::from_secs(60));
    for (t, layout, values) in store.stored_points() {
        restored.push_values(t, layout, values.into());
    }
    let mut from_disk = crate::window::saved::SavedWindows::save(&store).restore(Duration::from_secs(60)).unwrap();
    assert_eq!(restored.len(), store.len());
    let want = evaluate_target(&whole, t, &cfg);
    assert!(!want.is_empty());
    assert_same(&want, &evaluate_target(&store, t, &cfg), "reference on the thinned store");
    assert_same(&want, &evaluate_target(&restored, t, &cfg), "reference on the restored store");
    let mut inc = Incremental::new(&cfg);
    assert_same(&want, &inc.evaluate(&mut restored, t, &cfg), "incremental on the restored store");
    // The restored store thins as the live one did: the same points, bit for bit.
    let bits = |w: &TargetWindows| {
        w.stored_points().map(|(t, l, v)| (t, l, v.iter().map(|x| x.to_bits()).collect::<Vec<_>>())).collect::<Vec<_>>()
    };
    assert_eq!(bits(&restored), bits(&store));
    // The state follows the store it was built on and starts over on another.
    assert_same(&want, &inc.evaluate(&mut store, t, &cfg), "incremental moved to the original store");
    // A snapshot's store goes on as the live one does.
    let mut again = Incremental::new(&cfg);
    for _ in 0..60 {
        let before = t;
        push(&mut store, &mut whole, &mut t);
        let (_, layout, values) = store.stored_points().last().unwrap();
        from_disk.push_values(t, layout, values.into());
        assert!(t > before);
        let want = evaluate_target(&whole, t, &cfg);
        assert_same(&want, &again.evaluate(&mut from_disk, t, &cfg), "incremental on the snapshot's store");
        assert_same(&want, &live.evaluate(&mut store, t, &cfg), "incremental on the live store");
    }
    assert_eq!(bits(&from_disk), bits(&store));
}
