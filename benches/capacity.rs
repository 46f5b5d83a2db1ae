//! The capacity book's cost per tick after 20 minutes, 6 hours and 24 hours of history
//! (docs/capacity.md#cost): one target and model, one SLO judged from histogram brackets
//! (two estimates per refresh), a tick every 5 s and an interval every 15 s, its load a
//! wave from 1 to 9 requests/s every ten minutes past a knee at 5, each interval counting
//! ten times the requests the rate makes in it, so that 20 minutes already fill every rate
//! bin a day fills (an estimate's cost follows the bins: the rates seen, and whether each
//! grid bin holds enough requests to stand alone; the bins are printed). One iteration is a
//! minute of ticks from the wave's lowest load: four intervals and one refresh of the
//! estimates (a series is refreshed once a minute, and at every interval while its
//! arrivals rise, which the trend test does not yet say there; the refreshes are printed).
//! The cost must not grow with the history: the printed ratios are the 6 h and 24 h costs
//! over the 20-minute one. Results in docs/footprint.md.
//!
//! ```sh
//! cargo bench --bench capacity
//! ```

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use goodput::capacity::{CapacityBook, CapacityConfig};
use goodput::duration::Window;
use goodput::report::{
    GaugeStats, Health, ModelReport, Report, SloReport, SloStatus, SloValues, TargetReport, WindowReport,
};
use goodput::slo::{Bounded, Clause, Objective, Scope, Slo};

const TICK_MS: i64 = 5_000;
const SPACING_MS: i64 = 15_000;

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

/// The report at `t_ms`: the load of the wave, attainment falling past 5 requests/s,
/// bracketed ±1 %.
fn report(t_ms: i64) -> Report {
    let phase = (t_ms as f64 / 600_000.0) * std::f64::consts::TAU;
    let rate = 5.0 - 4.0 * phase.cos();
    let a = if rate <= 5.0 { 0.99 } else { (0.99 - 0.3 * (rate - 5.0)).max(0.2) };
    let mut w = WindowReport::empty(Window::from_secs(60));
    w.coverage = 1.0;
    w.requests_per_second = Some(rate);
    w.running = Some(GaugeStats { first: 10.0, last: 10.0, mean: 10.0, max: 10.0 });
    w.waiting = Some(GaugeStats { first: 0.0, last: 0.0, mean: 0.0, max: 0.0 });
    w.mean_prompt_tokens = Some(400.0 + 20.0 * phase.sin());
    w.mean_output_tokens = Some(120.0);
    let joint = Bounded { lower: (a - 0.01).max(0.0), estimate: a, upper: (a + 0.01).min(1.0) };
    let attainment = BTreeMap::from([(Clause::Joint, joint)]);
    w.slos = vec![SloReport {
        slo: "chat".into(),
        objective: 0.95,
        status: SloStatus::Evaluated(SloValues {
            attainment,
            burn_rate: joint,
            goodput_requests_per_second: None,
            goodput_tokens_per_second: None,
            requests: rate * 600.0,
            failed: 0.0,
        }),
    }];
    Report {
        t_ms,
        targets: vec![TargetReport {
            target: "a".into(),
            engine: None,
            health: Health { up: true, process_start_s: Some(1.0), ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: vec![w] }].into(),
        }],
        ..Report::default()
    }
}

/// A book holding `hours` of history, and the instant of its last tick.
fn filled(hours: f64) -> (CapacityBook, i64) {
    let mut book = CapacityBook::new(vec![slo()], CapacityConfig::default());
    let end = (hours * 3_600_000.0) as i64;
    let mut t = 0;
    // Filled an interval at a time: the ticks in between add nothing to the history.
    while t <= end {
        book.feed(&report(t));
        t += SPACING_MS;
    }
    (book, t - SPACING_MS)
}

/// A minute of ticks from `t`: four intervals.
fn minute(book: &mut CapacityBook, t: &mut i64) {
    for _ in 0..4 * SPACING_MS / TICK_MS {
        *t += TICK_MS;
        black_box(book.feed(&report(*t)));
    }
}

/// Mean time of a minute of ticks over `n` rounds, each from a copy of `book` at `t` so that the
/// history keeps its length, in µs.
fn mean_us(book: &CapacityBook, t: i64, n: usize) -> f64 {
    let mut took = Duration::ZERO;
    for _ in 0..n {
        let (mut b, mut t) = (book.clone(), t);
        let start = Instant::now();
        minute(&mut b, &mut t);
        took += start.elapsed();
    }
    took.as_secs_f64() * 1e6 / n as f64
}

fn bench(c: &mut Criterion) {
    let histories = [("20min", 1.0 / 3.0), ("6h", 6.0), ("24h", 24.0)];
    let mut g = c.benchmark_group("capacity_minute_after");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(5));
    let books: Vec<(&str, CapacityBook, i64)> = histories
        .iter()
        .map(|(name, h)| {
            let (b, t) = filled(*h);
            (*name, b, t)
        })
        .collect();
    for (name, book, t) in &books {
        g.bench_function(*name, |b| {
            b.iter_batched_ref(|| (book.clone(), *t), |(book, t)| minute(book, t), BatchSize::LargeInput)
        });
    }
    g.finish();
    // The ratios in one run, interleaved so that a busy machine weighs on each alike.
    let mut means = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..7 {
        for (k, (_, book, t)) in books.iter().enumerate() {
            means[k].push(mean_us(book, *t, 40));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let m: Vec<f64> = means.iter_mut().map(median).collect();
    for (name, book, t) in &books {
        let r = book.clone().feed(&report(*t + SPACING_MS));
        let bins: Vec<usize> = r[0].slos[0].estimates.iter().map(|e| e.bins).collect();
        let (mut b, mut t) = (book.clone(), *t);
        minute(&mut b, &mut t);
        let refreshes = b.estimates_made - book.estimates_made;
        println!(
            "capacity after {name}: history {:.1} KiB, bins {bins:?}, refreshes in the minute {refreshes}",
            book.history_bytes() as f64 / 1024.0
        );
    }
    println!(
        "capacity, a minute of ticks (four intervals): 20 min {:.1} µs, 6 h {:.1} µs ({:.2}×), 24 h {:.1} µs ({:.2}×)",
        m[0],
        m[1],
        m[1] / m[0],
        m[2],
        m[2] / m[0]
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
