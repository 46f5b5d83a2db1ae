//! The step between evaluation and publishing at fleet sizes: `Enricher::apply` (the capacity
//! book, the alert rules' inputs, their state machine, the alert list and rule readiness) on
//! a report of N targets built from the fake targets' template (tests/it/render_support), every
//! window marked fully covered so that every rule judges, a tick every 5 s, with the daemon's
//! allocator (src/main.rs). Twice: with the default alert rules and no SLO, and with two
//! SLOs (their rules, and the capacity book's estimates every 15 s). Its cost per target must
//! not grow with the fleet: the same per-target time at 1 000 and 10 000 targets (the ratio
//! printed). Results in docs/footprint.md.
//!
//! ```sh
//! cargo bench --bench enrich
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use goodput::alert::config::AlertingConfig;
use goodput::enrich::Enricher;

#[path = "../tests/it/render_support/mod.rs"]
mod render_support;

const TICK_MS: i64 = 5_000;
const TICKS: usize = 12;

/// Median and mean time of one `Enricher::apply` over `TICKS` ticks at `targets` targets.
fn ticks(targets: usize, slos: bool) -> (Duration, Duration) {
    let mut report = render_support::report(targets);
    for w in report.targets.iter_mut().flat_map(|t| t.models_mut()).flat_map(|m| &mut m.windows) {
        w.coverage = 1.0;
    }
    let mut eval = render_support::eval_config();
    if !slos {
        eval.slos.clear();
    }
    let mut enricher = Enricher::new(&eval, &AlertingConfig::default(), None, None);
    let mut times: Vec<Duration> = (0..TICKS)
        .map(|_| {
            report.t_ms += TICK_MS;
            let mut r = report.clone();
            let start = Instant::now();
            black_box(enricher.apply(&mut r, Vec::new()));
            let took = start.elapsed();
            black_box(r);
            took
        })
        .collect();
    let mean = times.iter().sum::<Duration>() / TICKS as u32;
    times.sort();
    (times[TICKS / 2], mean)
}

/// The daemon's allocator (src/main.rs): most of this step's time is allocation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing and must stay quick.
    let sizes: [usize; 2] = if std::env::args().any(|a| a == "--bench") { [1_000, 10_000] } else { [50, 500] };
    for (slos, what) in [(false, "default rules, no SLO"), (true, "two SLOs")] {
        let per_target = sizes.map(|n| {
            let (median, mean) = ticks(n, slos);
            let each = mean.as_secs_f64() * 1e6 / n as f64;
            println!("enrich, {what}, {n} targets: median tick {median:.2?}, mean {mean:.2?}, {each:.1} µs per target");
            each
        });
        println!("  per-target cost at {} over {} targets: {:.2}×", sizes[1], sizes[0], per_target[1] / per_target[0]);
    }
}
