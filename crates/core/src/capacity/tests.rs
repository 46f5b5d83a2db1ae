//! The book fed synthetic reports: a ramp past a known knee, a steady load, a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::duration::Window;
use crate::report::{
    GaugeStats, Health, ModelReport, Report, SloReport, SloStatus, SloValues, TargetReport, WindowReport,
};
use crate::slo::{Bounded, Clause};
use crate::slo::{Objective, Scope};

fn slo() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(500)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.95).unwrap(),
        scope: Scope::all(),
    }
}

/// A report at `t_s` of one engine serving `rate` requests/s with joint attainment in
/// `[lower, upper]`, its queue at `waiting`, started at `start`.
fn report(t_s: i64, rate: f64, attainment: (f64, f64), waiting: f64, start: f64) -> Report {
    let mut w = WindowReport::empty(Window::from_secs(60));
    w.coverage = 1.0;
    w.requests_per_second = Some(rate);
    w.running = Some(GaugeStats { first: 10.0, last: 10.0, mean: 10.0, max: 10.0 });
    w.waiting = Some(GaugeStats { first: waiting, last: waiting, mean: waiting, max: waiting });
    w.mean_prompt_tokens = Some(400.0);
    w.mean_output_tokens = Some(120.0);
    let joint = Bounded { lower: attainment.0, estimate: (attainment.0 + attainment.1) / 2.0, upper: attainment.1 };
    let mut a = BTreeMap::new();
    a.insert(Clause::Joint, joint);
    w.slos = vec![SloReport {
        slo: "chat".into(),
        objective: 0.95,
        status: SloStatus::Evaluated(SloValues {
            attainment: a,
            burn_rate: joint,
            goodput_requests_per_second: None,
            goodput_tokens_per_second: None,
            requests: rate * 60.0,
            failed: 0.0,
        }),
    }];
    Report {
        t_ms: t_s * 1000,
        targets: vec![TargetReport {
            target: "a".into(),
            engine: None,
            health: Health { up: true, process_start_s: Some(start), ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: vec![w] }].into(),
        }],
        ..Report::default()
    }
}

/// Attainment of an engine whose knee is at 5 requests/s.
fn attainment(rate: f64) -> f64 {
    if rate <= 5.0 { 0.99 } else { (0.99 - 0.3 * (rate - 5.0)).max(0.2) }
}

#[test]
fn a_ramp_past_the_knee_brackets_it_and_steady_load_is_censored() {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    let mut last = Vec::new();
    // Three ramps from 1 to 9 requests/s over 10 minutes each, one tick per 15 s.
    for k in 0..120 {
        let rate = 1.0 + 8.0 * (k % 40) as f64 / 40.0;
        let a = attainment(rate);
        last = book.feed(&report(k * 15, rate, (a, a), 0.0, 1.0));
    }
    let cap = &last[0].slos[0];
    assert_eq!(cap.method, Method::Bounds, "histogram brackets, even when they close");
    let e = cap.conservative().expect("an estimate");
    // 0.99 − 0.3·(λ − 5) = 0.95 at λ = 5.13.
    assert!(!e.censored && e.p10 <= 5.13 && e.p90 >= 4.8 && e.p90 < 6.5, "{e:?}");
    assert!(cap.headroom.is_some() && cap.intervals_used > 100);

    let mut steady = CapacityBook::new(vec![slo()], CapacityConfig::default());
    for k in 0..80 {
        last = steady.feed(&report(k * 15, 2.5 + 0.1 * (k % 3) as f64, (0.99, 0.995), 1.0, 1.0));
    }
    let e = last[0].slos[0].conservative().expect("an estimate");
    assert!(e.censored && e.p90 <= 2.8, "steady load says only: at least what it saw, {e:?}");
    assert!(!last[0].rising && !last[0].saturated);
}

#[test]
fn a_wide_bracket_gives_two_ends_and_headroom_reads_the_lower() {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    let mut last = Vec::new();
    for k in 0..120 {
        let rate = 1.0 + 8.0 * (k % 40) as f64 / 40.0;
        let a = attainment(rate);
        // The lower end fails a whole requests/s earlier.
        last = book.feed(&report(k * 15, rate, (attainment(rate + 1.0), a), 0.0, 1.0));
    }
    let cap = &last[0].slos[0];
    let (lo, hi) = (&cap.estimates[0], &cap.estimates[1]);
    assert_eq!((lo.end, hi.end), (Some(End::Lower), Some(End::Upper)));
    assert!(lo.p50 < hi.p50, "{lo:?} {hi:?}");
    let rate = last[0].arrival_rate.unwrap();
    assert!((cap.headroom.unwrap() - lo.p10 / rate).abs() < 1e-12);
}

#[test]
fn a_restart_starts_the_history_again() {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    for k in 0..20 {
        book.feed(&report(k * 15, 3.0, (0.99, 0.99), 0.0, 1.0));
    }
    let r = book.feed(&report(20 * 15, 3.0, (0.99, 0.99), 0.0, 2.0));
    assert_eq!(r[0].intervals, 1);
    // Ticks closer than the spacing add nothing.
    let r = book.feed(&report(20 * 15 + 5, 3.0, (0.99, 0.99), 0.0, 2.0));
    assert_eq!(r[0].intervals, 1);
}

#[test]
fn a_queue_that_grows_while_completions_lag_is_saturation() {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    let mut last = Vec::new();
    for k in 0..12 {
        let mut r = report(k * 15, 5.0, (0.5, 0.5), 5.0 + 10.0 * k as f64, 1.0);
        // Arrivals run ahead of completions: the queue rose by 10 in the 60 s window.
        let w = &mut r.targets[0].models_mut()[0].windows[0];
        w.waiting = Some(GaugeStats { first: (5.0 + 10.0 * k as f64 - 40.0).max(0.0), ..w.waiting.unwrap() });
        last = book.feed(&r);
    }
    assert!(last[0].saturated, "{:?}", last[0]);
    assert!(last[0].reasons.contains(&Reason::QueueGrowing) && last[0].reasons.contains(&Reason::CompletionsLag));
}

#[test]
fn aborts_under_overload_do_not_make_the_overloaded_intervals_another_workload() {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    let mut last = Vec::new();
    for k in 0..120 {
        let rate = 1.0 + 8.0 * (k % 40) as f64 / 40.0;
        let a = attainment(rate);
        let mut r = report(k * 15, rate, (a, a), 0.0, 1.0);
        if rate > 5.0 {
            // Past the knee 40 % of requests time out in the queue with nothing generated:
            // the finished requests' mean output length falls to a quarter.
            let w = &mut r.targets[0].models_mut()[0].windows[0];
            w.mean_output_tokens = Some(30.0);
            w.finish_reasons = vec![crate::report::FinishRate {
                reason: crate::canonical::FinishReason::Abort,
                per_second: 0.4 * rate,
            }];
        }
        last = book.feed(&r);
    }
    // Most of the last eight minutes were overloaded; compared by output length they would
    // be the current workload, and the calm intervals that show the knee another one.
    let e = last[0].slos[0].conservative().expect("an estimate");
    assert!(!e.censored && !e.below_data && (4.5..6.0).contains(&e.p50), "{e:?}");
    assert_eq!(last[0].slos[0].intervals_used, 120);
}

/// [`report`] with the window's requests also judged one by one from engine spans:
/// `cells` of (arrived s, finished s, requests, good).
fn exact_report(t_s: i64, rate: f64, cells: &[(i64, i64, u32, u32)]) -> Report {
    use crate::request::{ArrivalCell, Basis, DataSource, RequestSlo, RequestWindow};
    let mut r = report(t_s, rate, (0.0, 1.0), 0.0, 1.0);
    let (n, good) = cells.iter().fold((0, 0), |(n, g), c| (n + c.2, g + c.3));
    let joint = Bounded::exact(good as f64 / n.max(1) as f64);
    let values = SloValues {
        attainment: BTreeMap::from([(Clause::Joint, joint)]),
        burn_rate: joint,
        goodput_requests_per_second: None,
        goodput_tokens_per_second: None,
        requests: n as f64,
        failed: 0.0,
    };
    let by_arrival = cells
        .iter()
        .map(|&(a, f, n, g)| ArrivalCell {
            arrived_ms: a * 1000,
            finished_ms: f * 1000,
            population: n,
            good_lower: g,
            good_upper: g,
        })
        .collect();
    r.targets[0].models_mut()[0].windows[0].requests.push(RequestWindow {
        source: DataSource::Otlp,
        coverage: 1.0,
        basis: Basis::Records,
        from_unix: (t_s - 60) as f64,
        to_unix: t_s as f64,
        requests: n as u64,
        failed: 0,
        requests_per_second: rate,
        output_tokens_per_second: 0.0,
        inexact_token_counts: 0,
        mean_ttft_seconds: None,
        latency: Vec::new(),
        slos: vec![RequestSlo {
            slo: "chat".into(),
            objective: 0.95,
            status: SloStatus::Evaluated(values),
            counts: BTreeMap::new(),
            by_arrival,
        }],
        ttft_gap: None,
    });
    r
}

#[test]
fn exact_requests_count_once_at_the_interval_centred_on_their_arrival() {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    // 10 good requests arrive at 5 s, 60 bad ones at 20 s that queue until 44 s. A 1m
    // window is centred on an arrival at 20 s (its slot's middle, 22.5 s) at 52.5 s: the
    // interval at 60 s holds them, not the one at 45 s they finished in.
    let cells = [(5, 10, 10, 10), (20, 44, 60, 0)];
    for t in [15, 30, 45, 60, 75] {
        let seen: Vec<_> = cells.iter().copied().filter(|c| c.1 <= t).collect();
        book.feed(&exact_report(t, 1.0, &seen));
    }
    let series = book.series.values().next().expect("one series");
    let counted: Vec<(i64, f32, f32)> =
        series.history.recent(10).iter().map(|i| (i.t_ms / 1000, i.slos[0].total, i.slos[0].good_lower)).collect();
    assert_eq!(counted, [(15, 0.0, 0.0), (30, 0.0, 0.0), (45, 10.0, 10.0), (60, 60.0, 0.0), (75, 0.0, 0.0)]);
    assert!(series.history.recent(10).iter().all(|i| i.slos[0].exact) && series.pending.is_empty());
}
