//! Prints the tables of docs/accuracy.md#exact-values-from-the-request-path from live runs:
//! for each profile, the load generator sends the workload through goodput's tap to a
//! simulated engine at wall speed; every tap record is paired with the engine's truth line
//! by the response id; and every 5 s the daemon's exact 1m window from the tap is set beside
//! the engine's truth for the same requests and the bracket from the engine's histograms.
//!
//! `cargo run --release --example tap_accuracy [SECONDS]` (default 120 s of load per
//! profile, about 7 minutes in all).

#[path = "../tests/it/tap_truth_support/mod.rs"]
mod tap_truth_support;

use std::time::Duration;

use goodput::request::Status;
use goodput_sim::SimConfig;
use goodput_sim::config::Profile;
use tap_truth_support::compare::{Pairs, WindowRow, delta, good, pair, spread, truth_record, truth_status};
use tap_truth_support::{Outcome, TARGET, run};

/// The SLOs of the histogram tables above it in docs/accuracy.md.
const SLOS: &str = "[{name: on_interactive, ttft: 500ms, tpot: 50ms, e2e: 10s, objective: 0.95},
        {name: on_tight, ttft: 250ms, tpot: 50ms, objective: 0.95},
        {name: between, ttft: 200ms, tpot: 30ms, e2e: 12s, objective: 0.95}]";
const WINDOW: &str = "1m";
const SEED: u64 = 11;

/// The profiles of docs/simulator.md, with the ramp's and the bursts' periods shortened so
/// that one run crosses saturation (about 5 req/s) and back.
fn load(profile: Profile, secs: f64) -> SimConfig {
    let mut c = SimConfig::profile(profile);
    c.name = TARGET.into();
    c.seed = SEED;
    match profile {
        Profile::Ramp => c.arrivals.period_s = secs,
        Profile::Burst => c.arrivals.period_s = secs / 2.0,
        _ => {}
    }
    c
}

struct Result {
    name: &'static str,
    load: SimConfig,
    out: Outcome,
}

fn main() {
    let secs: f64 = std::env::args().nth(1).map_or(120.0, |s| s.parse().expect("SECONDS is a number"));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut results = Vec::new();
    for (name, profile) in [("steady", Profile::Steady), ("ramp", Profile::Ramp), ("burst", Profile::Burst)] {
        let load = load(profile, secs);
        let grace = Duration::from_secs(90);
        let every = Duration::from_secs(5);
        let out = rt.block_on(run(&load, secs, grace, &format!("[{WINDOW}]"), SLOS, every, dir.path()));
        eprintln!(
            "{name}: {} requests sent, {} measured, {} truth lines",
            out.sent.sent,
            out.tap.len(),
            out.truth.len()
        );
        results.push(Result { name, load, out });
    }

    println!(
        "{secs} s of load per profile at wall speed (seed {SEED}, one engine), through the tap on loopback; \
         the daemon scrapes and evaluates every 1 s, and its report is read every 5 s.\n"
    );
    requests_table(&results);
    windows_table(&results);
}

/// Per profile: what was paired, and the client-side time (tap − engine truth).
fn requests_table(results: &[Result]) {
    println!("### Per request: tap against the engine's truth\n");
    println!(
        "| profile | requests | paired by id | client aborts (before any token) | status mismatches | \
         output tokens equal | TTFT delay p50 / p99 / max | E2E delay p50 / p99 / max | \
         first-to-last-token span, max abs diff | verdicts differing (of requests × SLOs) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let p = pair(&r.out.tap, &r.out.truth);
        let d: Vec<_> = p.pairs.iter().filter_map(|(a, b)| delta(a, b)).collect();
        let col = |f: fn(&tap_truth_support::compare::Delta) -> f64| d.iter().map(f).collect::<Vec<f64>>();
        let ms = |(a, b, c): (f64, f64, f64)| format!("{:.1} / {:.1} / {:.1} ms", a * 1e3, b * 1e3, c * 1e3);
        let mismatched = p.pairs.iter().filter(|(a, b)| a.status != truth_status(b)).count();
        let complete: Vec<_> = p.pairs.iter().filter(|(a, _)| a.status == Status::Ok).collect();
        let tokens_equal =
            complete.iter().filter(|(a, b)| a.output_tokens.is_some_and(|n| n.exact && n.value == b.output_tokens));
        let aborts = r.out.tap.iter().filter(|a| a.status == Status::ClientAbort).count();
        let flips: usize = r.out.config.slos.iter().map(|s| flips(&p, s)).sum();
        println!(
            "| {} | {} | {} of {} | {} ({}) | {} | {} of {} | {} | {} | {:.1} ms | {} of {} |",
            r.name,
            r.out.sent.sent,
            p.pairs.len(),
            r.out.tap.len(),
            aborts,
            p.tap_without_id.len(),
            mismatched,
            tokens_equal.count(),
            complete.len(),
            ms(spread(&col(|d| d.ttft))),
            ms(spread(&col(|d| d.e2e))),
            spread(&col(|d| d.decode.abs())).2 * 1e3,
            flips,
            r.out.tap.len() * r.out.config.slos.len(),
        );
    }
    println!();
}

fn flips(p: &Pairs<'_>, slo: &goodput::slo::Slo) -> usize {
    p.pairs.iter().filter(|(a, b)| good(a, slo) != good(&truth_record(b), slo)).count()
}

/// Per profile and SLO, over every evaluation of the 1m window: the exact value from the
/// tap, the engine's truth for the same requests, and the histogram bracket.
fn windows_table(results: &[Result]) {
    println!("### Per {WINDOW} window: exact from the tap, truth, histogram bracket\n");
    println!(
        "| profile | SLO | windows | mean truth | mean exact (tap) | max abs(exact − truth) | \
         mean bracket [lower, upper] | mean width | exact in bracket | truth in bracket | \
         exact outside: populations differ / equal |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in results {
        let p = pair(&r.out.tap, &r.out.truth);
        let rows = tap_truth_support::compare::window_rows(&r.out, &p, WINDOW, &r.load.model);
        for slo in &r.out.config.slos {
            let rows: Vec<&WindowRow> = rows.iter().filter(|w| w.slo == slo.name && w.bracket.is_some()).collect();
            let n = rows.len() as f64;
            let mean = |f: &dyn Fn(&WindowRow) -> f64| rows.iter().map(|w| f(w)).sum::<f64>() / n;
            let inside = |v: &dyn Fn(&WindowRow) -> f64| {
                let k = rows
                    .iter()
                    .filter(|w| w.bracket.is_some_and(|(lo, hi)| v(w) >= lo - 1e-9 && v(w) <= hi + 1e-9))
                    .count();
                format!("{:.0} % ({k}/{})", 100.0 * k as f64 / n, rows.len())
            };
            let lo = |w: &WindowRow| w.bracket.map_or(f64::NAN, |b| b.0);
            let hi = |w: &WindowRow| w.bracket.map_or(f64::NAN, |b| b.1);
            let worst = rows.iter().map(|w| (w.exact.0 - w.truth).abs()).fold(0.0, f64::max);
            let outside: Vec<&&WindowRow> = rows
                .iter()
                .filter(|w| w.bracket.is_some_and(|(lo, hi)| w.exact.0 < lo - 1e-9 || w.exact.0 > hi + 1e-9))
                .collect();
            let same = outside.iter().filter(|w| w.hist_requests == Some(w.requests as f64)).count();
            println!(
                "| {} | {} | {} | {:.4} | {:.4} | {:.4} | [{:.4}, {:.4}] | {:.4} | {} | {} | {} / {} |",
                r.name,
                slo.name,
                rows.len(),
                mean(&|w| w.truth),
                mean(&|w| w.exact.0),
                worst,
                mean(&lo),
                mean(&hi),
                mean(&|w| hi(w) - lo(w)),
                inside(&|w| w.exact.0),
                inside(&|w| w.truth),
                outside.len() - same,
                same,
            );
        }
    }
    println!();
}
