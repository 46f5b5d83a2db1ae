//! Prints the capacity tables of docs/accuracy.md#capacity from a real run: the simulator
//! finds its own true capacity by a sweep of load levels in the profile's arrival shape,
//! records each profile under several seeds, goodput replays the recording, and every
//! capacity estimate is set beside the truth: coverage of the p10–p90 interval, its width, the bias of the p50, and how
//! much history it took.
//!
//! `cargo run --release --example capacity_report -- 2` (seeds 1 and 2), `-- 3-4` (seeds 3
//! and 4).

#[path = "../tests/it/capacity_support/mod.rs"]
mod capacity_support;

use capacity_support::{cases, first_firing, run, run_exact, truth};

fn main() {
    // `N` is seeds 1 to N; `A-B` seeds A to B (those not used to choose the method's rules).
    let seeds: Vec<u64> = std::env::args().nth(1).map_or(vec![21, 22, 23, 24], |arg| match arg.split_once('-') {
        Some((a, b)) => (a.parse().expect("a seed")..=b.parse().expect("a seed")).collect(),
        None => (1..=arg.parse().expect("a number of seeds")).collect(),
    });
    println!(
        "| profile | seed | attainment | true capacity | first uncensored | evaluations | coverage p10–p90 | median width | median bias p50 | first headroom alert | first divergence |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut pooled: std::collections::BTreeMap<&str, (usize, usize)> = Default::default();
    for (name, make, secs) in cases() {
        for &seed in &seeds {
            let cfg = make(seed);
            let truth = truth(&cfg);
            // Histogram brackets (no request path), then exact from every request's record.
            for (method, r) in [("bounds", run(&cfg, secs)), ("exact", run_exact(&cfg, secs))] {
                let first = r.iter().find(|i| i.interval().is_some_and(|x| !x.2)).map(|i| i.t_rel_s);
                let judged: Vec<_> = r.iter().filter_map(|i| i.interval().filter(|x| !x.2).map(|x| (i, x))).collect();
                let inside = judged.iter().filter(|(_, (lo, hi, _))| *lo <= truth && truth <= *hi).count();
                let mut widths: Vec<f64> = judged.iter().map(|(_, (lo, hi, _))| (hi - lo) / truth).collect();
                let mut bias: Vec<f64> =
                    judged.iter().filter_map(|(i, _)| i.p50()).map(|p| (p - truth) / truth).collect();
                let med = |v: &mut Vec<f64>| {
                    v.sort_by(f64::total_cmp);
                    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
                };
                let s = |x: Option<f64>| x.map_or("—".to_string(), |t| format!("{t:.0} s"));
                println!(
                    "| {name} | {seed} | {method} | {truth:.2} | {} | {} | {} | {:.0} % | {:+.0} % | {} | {} |",
                    s(first),
                    judged.len(),
                    if judged.is_empty() {
                        "—".into()
                    } else {
                        format!("{:.0} %", 100.0 * inside as f64 / judged.len() as f64)
                    },
                    100.0 * med(&mut widths),
                    100.0 * med(&mut bias),
                    s(first_firing(&r, "LLMCapacityHeadroomLow")),
                    s(first_firing(&r, "LLMGoodputDivergence")),
                );
                if name.contains("ramp") {
                    let p = pooled.entry(method).or_insert((0, 0));
                    *p = (p.0 + inside, p.1 + judged.len());
                }
            }
        }
    }
    println!();
    for (method, (inside, all)) in pooled {
        println!(
            "Pooled over the ramp cases, {method}: {:.0} % of {all} evaluations.",
            100.0 * inside as f64 / all.max(1) as f64
        );
    }
}
