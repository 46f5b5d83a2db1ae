//! The history rings: bounded length, the shortest window, gaps for missing series and their
//! removal, late SLO columns, the quantile drawn, and the memory bound of docs/limits.md.

use super::*;
use crate::serve::page::sample;

#[test]
fn a_ring_keeps_its_last_points_and_no_more() {
    let mut h = History::new(5);
    for step in 0..12 {
        h.record(&sample::report(1, step));
    }
    let s = h.get("engine-000", "model-0").expect("the series of the sample target");
    assert_eq!(s.len(), 5);
    let last = sample::report(1, 11).t_ms;
    assert_eq!(s.t_ms.back(), Some(&last));
    assert_eq!(s.t_ms.front(), Some(&(last - 4 * 5_000)));
    for col in [&s.throughput, &s.ttft, &s.tpot, &s.kv] {
        assert_eq!(col.len(), 5);
        assert!(col.iter().all(|v| v.is_finite()));
    }
    let names: Vec<&str> = s.goodput.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["chat", "batch"]);
    assert!(s.goodput.iter().all(|(_, g)| g.len() == 5 && g.iter().all(|p| p[0] <= p[1] && p[1] <= p[2])));
    assert_eq!(s.quantile, CHART_QUANTILE);
}

#[test]
fn the_points_come_from_the_shortest_window() {
    let mut r = sample::report(1, 0);
    // Make the 5m window differ: the ring must not read it.
    r.targets[0].models_mut()[0].windows[1].output_tokens_per_second = Some(9.0e9);
    r.targets[0].models_mut()[0].windows.reverse();
    let mut h = History::new(4);
    h.record(&r);
    let s = h.get("engine-000", "model-0").unwrap();
    let expected = sample::report(1, 0).targets[0].models[0].windows[0].output_tokens_per_second.unwrap();
    assert_eq!(s.throughput[0], expected as f32);
}

#[test]
fn a_missing_series_gets_gaps_then_is_dropped_after_a_whole_ring() {
    let mut h = History::new(4);
    h.record(&sample::report(2, 0));
    assert_eq!(h.len(), 2);
    // The second target disappears: its ring goes on with gaps, aligned with the others.
    for step in 1..4 {
        h.record(&sample::report(1, step));
    }
    let gone = h.get("engine-001", "model-1").expect("kept while it has data in its ring");
    assert_eq!(gone.len(), 4);
    assert!(gone.throughput[0].is_finite());
    assert!(gone.throughput.iter().skip(1).all(|v| v.is_nan()));
    assert!(gone.goodput.iter().all(|(_, g)| g.len() == 4));
    h.record(&sample::report(1, 4));
    assert!(h.get("engine-001", "model-1").is_none(), "a ring of nothing but gaps is dropped");
    assert_eq!(h.len(), 1);
}

#[test]
fn an_slo_that_appears_late_is_padded_to_line_up() {
    let mut first = sample::report(1, 0);
    first.targets[0].models_mut()[0].windows[0].slos.truncate(1);
    let mut h = History::new(6);
    h.record(&first);
    h.record(&sample::report(1, 1));
    let s = h.get("engine-000", "model-0").unwrap();
    let batch = &s.goodput.iter().find(|(n, _)| n == "batch").unwrap().1;
    assert_eq!(batch.len(), 2);
    assert!(batch[0][1].is_nan() && batch[1][1].is_finite());
}

#[test]
fn capacity_is_kept_from_the_conservative_end_and_a_censored_one_as_its_bound_alone() {
    let mut h = History::new(4);
    let mut r = sample::report(2, 0);
    // The second target has no capacity report yet: gaps, not zeros.
    r.capacity.retain(|c| c.target == "engine-000");
    r.capacity[0].saturated = true;
    h.record(&r);
    let s = h.get("engine-000", "model-0").unwrap();
    let c = &r.capacity[0];
    assert_eq!(s.arrivals[0], c.arrival_rate.unwrap() as f32);
    assert!(s.saturated[0]);
    let col = |name: &str| s.capacity.iter().find(|(n, _)| n == name).unwrap().1[0];
    let chat = c.slos[0].conservative().unwrap();
    assert!(!c.slos[0].censored());
    assert_eq!(col("chat"), [chat.p10 as f32, chat.p50 as f32, chat.p90 as f32]);
    let batch = col("batch");
    assert!(c.slos[1].censored());
    assert_eq!(batch[0], c.slos[1].estimates[0].p10 as f32);
    assert!(batch[1].is_nan() && batch[2].is_nan(), "a lower bound keeps no median or ceiling: {batch:?}");
    let other = h.get("engine-001", "model-1").unwrap();
    assert!(other.arrivals[0].is_nan() && !other.saturated[0] && other.capacity.is_empty());
    // A gap advances the capacity columns with the others.
    h.record(&sample::report(1, 1));
    let other = h.get("engine-001", "model-1").unwrap();
    assert_eq!((other.arrivals.len(), other.saturated.len()), (2, 2));
    let s = h.get("engine-000", "model-0").unwrap();
    assert!(s.capacity.iter().all(|(_, c)| c.len() == 2));
}

#[test]
fn without_p99_the_highest_quantile_is_drawn() {
    let mut r = sample::report(1, 0);
    for l in &mut r.targets[0].models_mut()[0].windows[0].latency {
        l.quantile = 0.9;
    }
    let mut h = History::new(3);
    h.record(&r);
    let s = h.get("engine-000", "model-0").unwrap();
    assert_eq!(s.quantile, 0.9);
    assert!(s.ttft[0].is_finite());
}

#[test]
fn memory_is_bounded_by_targets_times_ring_length() {
    let mut h = History::new(DEFAULT_RING_LEN);
    for step in 0..DEFAULT_RING_LEN * 2 {
        h.record(&sample::report(100, step));
    }
    assert_eq!(h.len(), 100);
    // docs/limits.md: 29 bytes per point plus 24 per SLO (goodput and capacity), per target
    // and model; the sample's last target is down, so it has no capacity columns.
    let per_point = 8 + 4 * 4 + 4 + 1 + 2 * 12;
    let points = 100 * DEFAULT_RING_LEN * per_point + 99 * DEFAULT_RING_LEN * 2 * 12;
    let names = 100 * (10 + 7 + 4 + 5) + 99 * (4 + 5);
    // Each ring holds exactly its slots (reserve_exact may round up a little).
    let bound = (points + names) * 21 / 20;
    assert!(h.heap_bytes() <= bound, "{} bytes > {bound}", h.heap_bytes());
    assert!(h.heap_bytes() >= points, "{} bytes: not counting", h.heap_bytes());
    eprintln!("history of 100 targets: {} bytes", h.heap_bytes());
}
