//! Under `ramp` the exported goodput clearly diverges from throughput
//! once the engine is overloaded, and under `steady` it does not.
//!
//! The simulated engine serves about 5 requests/s. The ramp climbs from 0.5 to 12 requests/s
//! over each 300 s period, so the first ~90 s of a period are under capacity and the last
//! 100 s far over it (the queue grows until the 60 s client timeout bounds it).

use crate::accuracy_support;

use accuracy_support::{Case, GoodputRow, run};
use goodput_sim::Profile;

/// TTFT ≤ 250 ms and TPOT ≤ 50 ms, both bucket boundaries: the goodput.
const SLO: &str = "on_tight";
const PERIOD_S: f64 = 300.0;

fn one_minute(rows: &[GoodputRow]) -> impl Iterator<Item = &GoodputRow> {
    rows.iter().filter(|g| g.slo == SLO && g.window_s == 60)
}

#[test]
fn under_ramp_goodput_collapses_while_throughput_holds() {
    for (seed, secs) in [(3, 600), (7, 420)] {
        let r = run(Case { profile: Profile::Ramp, seed, engines: 1, secs });
        let (mut early, mut overloaded) = (Vec::new(), Vec::new());
        for g in one_minute(&r.goodput) {
            // Arrival rate at the window's end: 0.5 + 11.5 × phase/300 requests/s.
            let phase = g.t_rel_s % PERIOD_S;
            if (30.0..=90.0).contains(&g.t_rel_s) {
                early.push(g);
            } else if g.t_rel_s >= PERIOD_S * 0.5 && phase >= 200.0 {
                overloaded.push(g);
            }
        }
        assert!(early.len() >= 10 && overloaded.len() >= 15, "seed {seed}: {} / {}", early.len(), overloaded.len());
        for g in &early {
            // The lower bound also allows every request in flight at the window start to
            // have missed TTFT (the provable bound), so it sits a little under the estimate.
            let (lower, estimate) =
                (g.got.lower / g.output_tokens_per_second, g.got.estimate / g.output_tokens_per_second);
            assert!(estimate >= 0.9, "seed {seed} t={}: early goodput estimate {estimate:.3} of throughput", g.t_rel_s);
            assert!(lower >= 0.8, "seed {seed} t={}: early goodput lower bound {lower:.3} of throughput", g.t_rel_s);
        }
        let early_peak = early.iter().map(|g| g.output_tokens_per_second).fold(0.0, f64::max);
        for g in &overloaded {
            let ratio = g.got.upper / g.output_tokens_per_second;
            assert!(
                ratio < 0.5,
                "seed {seed} t={}: overloaded goodput upper bound {ratio:.3} of throughput",
                g.t_rel_s
            );
            // Throughput did not fall: the engine is busy, just not usefully.
            assert!(
                g.output_tokens_per_second > early_peak,
                "seed {seed} t={}: {} tokens/s vs early peak {early_peak}",
                g.t_rel_s,
                g.output_tokens_per_second
            );
        }
        // The bounds hold the truth where populations agree (tests/it/accuracy_ground_truth.rs),
        // and here the collapse is real: the exact share of good requests is tiny too.
        let truth_share: f64 =
            overloaded.iter().map(|g| g.truth / g.output_tokens_per_second).sum::<f64>() / overloaded.len() as f64;
        assert!(truth_share < 0.5, "seed {seed}: exact good share {truth_share:.3} in overload");
    }
}

#[test]
fn under_steady_goodput_tracks_throughput() {
    for (seed, engines) in [(1, 1), (2, 2)] {
        let r = run(Case { profile: Profile::Steady, seed, engines, secs: 420 });
        // From the first full minute on: a window holding a few seconds of traffic has a
        // wide bracket (the requests in flight at its start weigh a lot).
        let rows: Vec<&GoodputRow> = one_minute(&r.goodput).filter(|g| g.t_rel_s >= 60.0).collect();
        assert!(rows.len() >= 60, "seed {seed}: {} windows", rows.len());
        for g in rows {
            let (lower, estimate) =
                (g.got.lower / g.output_tokens_per_second, g.got.estimate / g.output_tokens_per_second);
            assert!(estimate >= 0.9, "seed {seed} t={}: goodput estimate {estimate:.3} of throughput", g.t_rel_s);
            assert!(lower >= 0.8, "seed {seed} t={}: goodput lower bound {lower:.3} of throughput", g.t_rel_s);
        }
    }
}
