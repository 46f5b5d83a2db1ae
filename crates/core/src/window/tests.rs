//! Ring bounds, range selection and the measured memory of a 1 h / 1 s store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::canonical::{
    Bucket, CounterKind, CounterValue, Engine, FinishReason, GaugeKind, Histogram, HistogramKind, ModelSnapshot, Shard,
    Snapshot,
};

/// A vLLM V1 rank as the 0.13 fixture exposes it: 23 TTFT, 20 TPOT, 20 ITL and 22 E2E
/// buckets (stored), the other histograms (not stored), tokens, three finish reasons, KV.
pub(crate) fn vllm_like(shards: usize, tick: f64) -> Snapshot {
    let hist = |n: usize| Histogram {
        buckets: (0..n)
            .map(|i| Bucket {
                le: if i + 1 == n { f64::INFINITY } else { 0.001 * 2f64.powi(i as i32) },
                count: tick * i as f64,
            })
            .collect(),
        sum: tick,
        count: tick * n as f64,
    };
    let mut m = ModelSnapshot::default();
    for s in 0..shards {
        let key = format!("engine=\"{s}\"");
        for (kind, n) in [
            (HistogramKind::Ttft, 23),
            (HistogramKind::Tpot, 20),
            (HistogramKind::Itl, 20),
            (HistogramKind::E2e, 22),
            (HistogramKind::QueueTime, 22),
            (HistogramKind::PrefillTime, 22),
            (HistogramKind::DecodeTime, 22),
            (HistogramKind::RequestPromptTokens, 15),
            (HistogramKind::RequestGenerationTokens, 15),
        ] {
            m.histograms.entry(kind).or_default().push(Shard {
                key: key.clone(),
                created: Some(1.7e9),
                value: hist(n),
            });
        }
        for (kind, reason) in [
            (CounterKind::PromptTokens, None),
            (CounterKind::GenerationTokens, None),
            (CounterKind::RequestsFinished, Some(FinishReason::Stop)),
            (CounterKind::RequestsFinished, Some(FinishReason::Length)),
            (CounterKind::RequestsFinished, Some(FinishReason::Abort)),
            (CounterKind::Preemptions, None),
        ] {
            let key = match reason {
                Some(r) => format!("{key},finished_reason=\"{}\"", r.as_str()),
                None => key.clone(),
            };
            m.counters.entry(kind).or_default().push(Shard {
                key,
                created: Some(1.7e9),
                value: CounterValue { value: tick, reason },
            });
        }
        m.gauges.entry(GaugeKind::KvCacheUsage).or_default().push(Shard {
            key: key.clone(),
            created: None,
            value: 0.8,
        });
        m.gauges.entry(GaugeKind::Running).or_default().push(Shard { key, created: None, value: 3.0 });
    }
    Snapshot {
        engine: Engine::Vllm,
        models: BTreeMap::from([("meta-llama/Llama-3.1-8B-Instruct".to_string(), m)]),
        process_start: Some(1.7e9),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    }
}

pub(crate) fn fill(shards: usize, points: i64, interval_ms: i64) -> TargetWindows {
    let mut w = TargetWindows::new(Duration::from_secs(3600));
    for i in 0..points {
        w.push(i * interval_ms + 7, Arc::new(vllm_like(shards, i as f64)));
    }
    w
}

#[test]
fn one_hour_at_one_second_stays_small() {
    for (shards, limit_mb) in [(1usize, 1.0f64), (2, 2.0)] {
        let w = fill(shards, 3700, 1000);
        assert_eq!(w.len(), 3600, "points older than the hour are dropped");
        let mb = w.heap_bytes() as f64 / 1e6;
        let per_point = w.heap_bytes() / w.len();
        println!("{shards} rank(s): {mb:.2} MB for 1 h at 1 s, {per_point} B per scrape");
        assert!(mb < limit_mb, "{shards} rank(s): {mb:.2} MB");
        // 141 stored series per rank: 85 latency buckets, 15 prompt- and 15
        // generation-length buckets, _sum and _count of 9 histograms, 6 counters, 2 gauges.
        let mut cols = 0;
        w.for_each_in_range(i64::MAX, i64::MAX, |_, _, v| cols = v.len());
        assert_eq!(cols, 141 * shards);
    }
}

#[test]
fn stored_series_counts_what_the_layout_keeps() {
    for shards in [1, 4] {
        let mut snap = vllm_like(shards, 3.0);
        let m = snap.models.values().next().unwrap().clone();
        snap.models.insert("lora-adapter".into(), m);
        snap.models
            .values_mut()
            .next()
            .unwrap()
            .spec_accepted_per_position
            .insert(0, vec![crate::canonical::Shard { key: String::new(), created: None, value: 1.0 }]);
        let (layout, _) = Layout::extract(&snap, None);
        let counted: usize = snap.models.values().map(stored_series).sum();
        assert_eq!(counted, layout.keys.len(), "{shards} shards");
    }
}

#[test]
fn steady_scrapes_share_one_layout() {
    let w = fill(1, 10, 1000);
    let mut layouts: Vec<&Arc<Layout>> = Vec::new();
    w.for_each_in_range(1_000_000, 1_000_000, |_, l, _| layouts.push(l));
    assert_eq!(layouts.len(), 10);
    assert!(layouts.windows(2).all(|p| Arc::ptr_eq(p[0], p[1])));
}

#[test]
fn ranges_are_left_open_and_end_at_now() {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for t in [0, 10_000, 20_000, 60_000, 70_000] {
        w.push(t, Arc::new(vllm_like(1, 1.0)));
    }
    // (10 s, 60 s]: 20 s and 60 s, not 10 s (the open edge) nor 70 s (after now).
    let ts = w.times_in_range(60_000, 50_000);
    assert_eq!(ts, vec![20_000, 60_000]);
}

#[test]
fn pruning_and_ordering() {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for t in [0, 30_000, 60_000, 90_000] {
        w.push(t, Arc::new(vllm_like(1, 1.0)));
    }
    w.push(90_000, Arc::new(vllm_like(1, 1.0))); // not newer: ignored
    w.push(50_000, Arc::new(vllm_like(1, 1.0)));
    let ts = w.times_in_range(i64::MAX, i64::MAX);
    // 0 and 30 s are at or before 90 s − 60 s.
    assert_eq!(ts, vec![60_000, 90_000]);
    assert_eq!(w.engine(), Some(Engine::Vllm));
}

#[test]
fn the_ring_has_a_hard_cap() {
    let mut w = TargetWindows::new(Duration::from_secs(3600));
    let snap = Arc::new(vllm_like(1, 0.0));
    for i in 0..(MAX_POINTS as i64 + 10) {
        w.push(i, snap.clone());
    }
    assert_eq!(w.len(), MAX_POINTS);
}

#[test]
fn every_range_decodes_the_values_that_were_pushed() {
    // Values that exercise deltas, raw fallbacks, resets and a layout change, with a
    // window short enough that pruning turns deltas into keyframes along the way.
    let mut w = TargetWindows::new(Duration::from_secs(100));
    let mut pushed: Vec<(i64, Vec<u64>)> = Vec::new();
    for i in 0..400i64 {
        let tick = if i % 97 == 50 { 0.0 } else { (i * i) as f64 }; // a reset now and then
        let mut snap = vllm_like(if (150..160).contains(&i) { 2 } else { 1 }, tick);
        if i % 13 == 0 {
            snap.models.values_mut().for_each(|m| {
                m.gauges.get_mut(&GaugeKind::KvCacheUsage).unwrap()[0].value = i as f64 / 400.0;
                m.counters.get_mut(&CounterKind::PromptTokens).unwrap()[0].value.value = tick + 0.5;
            });
        }
        let t = i * 1000 + 3;
        // What the column must give back: the snapshot's numbers before any encoding.
        let (_, raw) = Layout::extract(&snap, None);
        pushed.push((t, raw.iter().map(|x| x.to_bits()).collect()));
        w.push(t, Arc::new(snap));
        for range in [1_000, 7_000, 64_000, 99_000] {
            let mut seen = Vec::new();
            w.for_each_in_range(t, range, |ts, _, v| {
                seen.push((ts, v.iter().map(|x| x.to_bits()).collect::<Vec<_>>()))
            });
            let want: Vec<_> = pushed.iter().filter(|(ts, _)| *ts > t - range).cloned().collect();
            assert_eq!(seen, want, "t={t} range={range}");
        }
    }
    // Every segment but a trimmed oldest one starts with its keyframe; the rest are deltas.
    let keys = w.full.iter().filter(|s| s.is_key(0)).count();
    let deltas = w.full_len - keys;
    assert!(deltas > 50 && deltas < w.len(), "{deltas} of {} points are deltas", w.len());
    assert_eq!(w.full.iter().map(|s| s.len()).sum::<usize>(), w.full_len);
    assert!(w.full.iter().all(|s| s.len() <= crate::window::KEYFRAME_EVERY));
}

/// The default windows (1m, 5m, 15m, 1h configured; 30m and 6h alert-only), with `slos`.
fn default_windows(slos: Vec<crate::slo::Slo>) -> crate::evaluate::EvalConfig {
    use crate::duration::Window;
    use crate::evaluate::{AlertWindow, EvalConfig};
    let w = |s| Window::from_secs(s);
    EvalConfig {
        windows: vec![w(60), w(300), w(900), w(1800), w(3600), w(6 * 3600)],
        alert_only: vec![
            AlertWindow { window: w(1800), quantiles: Vec::new() },
            AlertWindow { window: w(6 * 3600), quantiles: Vec::new() },
        ],
        slos,
        ..EvalConfig::default()
    }
}

#[test]
fn six_hours_at_five_seconds_with_thin_alert_windows_stays_small() {
    use crate::evaluate::Thinning;
    use crate::slo::{Objective, Scope, Slo};
    let slo = Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: None,
        e2e: Some(Duration::from_secs(20)),
        objective: Objective::new(0.99).unwrap(),
        scope: Scope::all(),
    };
    // The full store's figure, then the thinned one's: 6 h + 10 min of scrapes, thinned at
    // every push as the daemon thins at every tick.
    let interval = 5_000;
    let points = 6 * 720 + 120;
    let mut full = TargetWindows::new(Duration::from_secs(6 * 3600));
    for i in 0..points {
        full.push(i * interval + 7, Arc::new(vllm_like(1, i as f64)));
    }
    let full_mib = full.heap_bytes() as f64 / (1 << 20) as f64;
    // Without an SLO the thin scrapes keep 6 series of 141 (finished requests by reason,
    // output tokens, preemptions, running); with TTFT and E2E clauses, 51 (their buckets).
    for (slos, limit_mib, smaller) in [(Vec::new(), 0.3, 4.0), (vec![slo], 0.5, 2.0)] {
        let thinning = Thinning::of(&default_windows(slos)).expect("6h reaches past 1h");
        assert_eq!(thinning.full_ms, 3_600_000);
        let mut w = TargetWindows::new(Duration::from_secs(6 * 3600));
        for i in 0..points {
            let t = i * interval + 7;
            w.push(t, Arc::new(vllm_like(1, i as f64)));
            w.thin_before(t - thinning.full_ms, &thinning.kept);
        }
        assert_eq!(w.len(), full.len());
        assert_eq!(w.thin_points(), 5 * 720, "older than the hour: thin");
        let mib = w.heap_bytes() as f64 / (1 << 20) as f64;
        let (thin_layout, full_layout) = (w.stored_points().next().unwrap().1, w.stored_points().last().unwrap().1);
        println!(
            "{} series of {} kept: {mib:.3} MiB for 6 h at 5 s, against {full_mib:.3} MiB whole",
            thin_layout.keys.len(),
            full_layout.keys.len()
        );
        assert!(mib < limit_mib && mib * smaller < full_mib, "{mib:.3} MiB thin, {full_mib:.3} MiB whole");
    }
}

/// Every stored point as (time, keys, value bits).
type Bits = Vec<(i64, Box<[SeriesKey]>, Vec<u64>)>;

fn bits(w: &TargetWindows) -> Bits {
    w.stored_points().map(|(t, l, v)| (t, l.keys.clone(), v.iter().map(|x| x.to_bits()).collect())).collect()
}

/// What a snapshot walks is what the store holds: the points [`TargetWindows::stored_points`]
/// gives, thin and full, in order, bit for bit.
#[test]
fn walking_the_stored_points_gives_them_all_in_order() {
    let thinning = crate::evaluate::Thinning::of(&default_windows(Vec::new())).expect("6h reaches past 1h");
    let mut w = TargetWindows::new(Duration::from_secs(6 * 3600));
    for i in 0..1000 {
        let t = i * 5_000 + 7;
        w.push(t, Arc::new(vllm_like(1, i as f64)));
        w.thin_before(t - thinning.full_ms, &thinning.kept);
    }
    assert_eq!(w.thin_points(), 1000 - 720, "older than the hour: thin");
    let mut walked: Bits = Vec::new();
    w.for_each_stored(|t, l, v| walked.push((t, l.keys.clone(), v.iter().map(|x| x.to_bits()).collect())));
    assert_eq!(walked.len(), 1000);
    assert_eq!(walked, bits(&w));
}

#[test]
fn thin_points_keep_the_kept_series_exactly_whatever_the_cadence() {
    let kept = Kept {
        histograms: vec![(HistogramKind::Ttft, Buckets::Every)],
        counters: vec![CounterKind::RequestsFinished],
        gauges: vec![GaugeKind::Running],
        spec_accepted: false,
    };
    // Resets, a shard that comes and goes, a process restart, and a model that shows only
    // series nobody keeps (one column of it stays, for the windows' spans).
    let snap = |i: i64| {
        let tick = if i % 97 == 50 { 0.0 } else { (i * i) as f64 };
        let mut s = vllm_like(if (150..170).contains(&i) { 2 } else { 1 }, tick);
        // Rarely enough between layout changes that some blocks fill ([`BLOCK`]).
        if (200..260).contains(&i) || i % 131 == 0 {
            let mut lone = ModelSnapshot::default();
            let value = CounterValue { value: tick, reason: None };
            lone.counters.insert(CounterKind::PromptTokens, vec![Shard { key: String::new(), created: None, value }]);
            s.models.insert("lora".into(), lone);
        }
        if i >= 300 {
            s.process_start = Some(1.8e9);
        }
        Arc::new(s)
    };
    let window = Duration::from_secs(300);
    let (mut every, mut seldom, mut whole) =
        (TargetWindows::new(window), TargetWindows::new(window), TargetWindows::new(window));
    for i in 0..600i64 {
        let t = i * 1000 + 3;
        for w in [&mut every, &mut seldom, &mut whole] {
            w.push(t, snap(i));
        }
        every.thin_before(t - 100_000, &kept);
        if i % 37 == 0 {
            seldom.thin_before(t - 100_000, &kept);
        }
        assert_eq!(every.full.iter().map(|s| s.len()).sum::<usize>(), every.full_len);
        assert!(every.full.iter().skip(1).all(|s| s.is_key(0)), "only the oldest segment is trimmed");
        assert_eq!(every.thin_points(), every.thin.iter().map(|b| b.len()).sum::<usize>());
        assert_eq!(every.len(), whole.len());
        if i % 50 != 49 {
            continue;
        }
        // Each range holds the same scrapes; a thin one holds the full one's kept series.
        for range in [50_000, 150_000, 299_000] {
            let mut full = Vec::new();
            whole.for_each_in_range(t, range, |ts, l, v| full.push((ts, l.clone(), v.to_vec())));
            let mut k = 0;
            every.for_each_in_range(t, range, |ts, l, v| {
                let (ft, fl, fv) = &full[k];
                k += 1;
                assert_eq!(ts, *ft);
                if **l == **fl {
                    assert_eq!(
                        v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        fv.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                    );
                    return;
                }
                assert!(l.keys.len() < fl.keys.len() && l.process_start == fl.process_start);
                for (c, key) in l.keys.iter().enumerate() {
                    let j = fl.keys.iter().position(|x| x == key).expect("a thin key is a full key");
                    assert_eq!((v[c].to_bits(), l.created[c]), (fv[j].to_bits(), fl.created[j]), "{key:?}");
                    let first_of_model = fl.keys.iter().position(|x| x.model == key.model) == Some(j);
                    assert!(kept.keeps(key.quantity) || first_of_model, "{key:?}");
                }
                for key in fl.keys.iter().filter(|x| kept.keeps(x.quantity)) {
                    assert!(l.keys.contains(key), "{key:?} kept");
                }
            });
            assert_eq!(k, full.len(), "t={t} range={range}");
        }
        // Numbered access agrees with the sequential decode.
        let all = every.stored_points().collect::<Vec<_>>();
        let mut values = Vec::new();
        for (n, seq) in every.seq_range().enumerate() {
            let (t, layout) = every.point_at(seq).unwrap();
            assert!(t == all[n].0 && Arc::ptr_eq(layout, &all[n].1));
            assert!(every.decode_at(seq, &mut values) && values == all[n].2);
            assert_eq!(every.seq_after(t), seq + 1);
        }
    }
    assert!(every.thin_points() > 150 && every.thin.iter().any(|b| b.sealed.is_some()));
    // The same full points give the same thin points, however often the store was thinned.
    seldom.thin_before(599_003 - 100_000, &kept);
    assert_eq!(bits(&seldom), bits(&every));
    // A thinned store's points, replayed into a fresh store, thin to the same points.
    let mut replayed = TargetWindows::new(window);
    for (t, layout, values) in every.stored_points() {
        replayed.push_values(t, layout, values.into());
    }
    replayed.thin_before(599_003 - 100_000, &kept);
    assert_eq!(bits(&replayed), bits(&every));
    assert_eq!(replayed.thin_points(), every.thin_points());
}

#[test]
fn thin_scrapes_far_apart_keep_their_times() {
    // A thin block spans at most u32::MAX ms after its first scrape: a scrape 50 days on
    // (a target down for that long, a window longer than that) starts another block.
    let kept = Kept { counters: vec![CounterKind::RequestsFinished], ..Kept::default() };
    let day = 86_400_000i64;
    let mut w = TargetWindows::new(Duration::from_secs(200 * 86_400));
    let times = [5, 1_000, 50 * day, 50 * day + 7, 120 * day, 120 * day + 1, 121 * day];
    for (i, &t) in times.iter().enumerate() {
        w.push(t, Arc::new(vllm_like(1, i as f64)));
    }
    let whole = bits(&w);
    w.thin_before(120 * day + 1, &kept);
    assert_eq!(w.thin_points(), 6);
    assert_eq!(w.thin.len(), 3, "one block per span under u32::MAX ms");
    let got: Vec<i64> = w.stored_points().map(|p| p.0).collect();
    assert_eq!(got, times);
    assert_eq!(w.times_in_range(121 * day, 71 * day), [50 * day + 7, 120 * day, 120 * day + 1, 121 * day]);
    for (seq, &t) in w.seq_range().zip(&times) {
        assert_eq!(w.point_at(seq).map(|p| p.0), Some(t));
    }
    assert_eq!(whole.len(), bits(&w).len());
}

#[test]
fn a_longer_max_window_keeps_what_is_held_and_a_shorter_one_drops_it_at_the_next_push() {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    for i in 0..60 {
        w.push(i * 1000, Arc::new(vllm_like(1, i as f64)));
    }
    assert_eq!(w.len(), 60);
    w.set_max_window(Duration::from_secs(300));
    assert_eq!(w.max_window(), Duration::from_secs(300));
    for i in 60..120 {
        w.push(i * 1000, Arc::new(vllm_like(1, i as f64)));
    }
    assert_eq!(w.len(), 120, "nothing held was dropped and the store now keeps 5 minutes");
    w.set_max_window(Duration::from_secs(30));
    assert_eq!(w.len(), 120, "shortening drops nothing by itself");
    w.push(120_000, Arc::new(vllm_like(1, 120.0)));
    assert_eq!(w.len(), 30, "the next push keeps (t − 30 s, t]");
}

#[test]
fn thin_scrapes_at_an_irregular_cadence_keep_their_times_exactly() {
    // A thin block keeps each step's change from the step before: jitter either way, steps
    // that grow and shrink (changes of either sign, some several bytes long), a gap ending
    // at exactly u32::MAX ms after the block's first scrape (still in it) and one ms past
    // that (another block).
    let kept = Kept { counters: vec![CounterKind::RequestsFinished], ..Kept::default() };
    let mut times: Vec<i64> = (0..70).map(|i| 1_000 + i * 5_000 + [0, 3, -2, 7, -5, 1][i as usize % 6]).collect();
    let mut t = *times.last().unwrap();
    for step in [6_000, 9_000, 20_000, 19_999, 1_000, 1, 2, 5_000, 4_999, 5_003] {
        t += step;
        times.push(t);
    }
    let second = times[BLOCK]; // the second block's first scrape
    times.extend([second + i64::from(u32::MAX) - 10, second + i64::from(u32::MAX), second + i64::from(u32::MAX) + 1]);
    let t = *times.last().unwrap();
    times.extend([t + 4_998, t + 10_001, t + 10_002]);
    let mut w = TargetWindows::new(Duration::from_secs(200 * 86_400));
    for (i, &t) in times.iter().enumerate() {
        w.push(t, Arc::new(vllm_like(1, i as f64)));
    }
    let whole = bits(&w);
    w.thin_before(i64::MAX, &kept);
    assert_eq!(w.thin_points(), times.len() - 1, "all but the newest thin");
    assert_eq!(w.thin.len(), 3, "a full block, one up to u32::MAX ms, the rest");
    let got: Vec<i64> = w.stored_points().map(|p| p.0).collect();
    assert_eq!(got, times);
    let newest = *times.last().unwrap();
    assert_eq!(w.times_in_range(newest, newest - times[0] + 1), times);
    assert_eq!(w.times_in_range(newest, newest - times[75]), times[76..]);
    for ((seq, &t), i) in w.seq_range().zip(&times).zip(0u64..) {
        assert_eq!(w.point_at(seq).map(|p| p.0), Some(t));
        assert_eq!((w.seq_after(t - 1), w.seq_after(t)), (i, i + 1));
    }
    assert_eq!(whole.len(), bits(&w).len());

    // Through a snapshot, as its blocks.
    let saved = saved::SavedWindows::save(&w);
    let back = saved.restore(Duration::from_secs(200 * 86_400)).unwrap();
    assert_eq!(bits(&back), bits(&w));
    assert_eq!(back.thin_points(), w.thin_points());
    assert_eq!(saved::SavedWindows::save(&back), saved);

    // With scrapes dropped from the front of the first block.
    let mut short = back.clone();
    let next = newest + 5_000;
    short.set_max_window(Duration::from_millis((next - times[30]) as u64));
    short.push(next, Arc::new(vllm_like(1, times.len() as f64)));
    let got: Vec<i64> = short.stored_points().map(|p| p.0).collect();
    assert_eq!(got, [&times[31..], &[next]].concat());
    assert_eq!(short.seq_after(times[40]), short.seq_range().start + 10);
}
