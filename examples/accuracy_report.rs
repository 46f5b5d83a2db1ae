//! Prints the coverage and error tables of docs/accuracy.md from a real run: the simulator
//! records each profile under several seeds, goodput replays the recording, and every SLO
//! bracket is set beside the exact share from the per-request ground truth.
//!
//! `cargo run --example accuracy_report` (add `--release` to make it faster).

#[path = "../tests/it/accuracy_support/mod.rs"]
mod accuracy_support;

use accuracy_support::stats::{Summary, contains};
use accuracy_support::{Case, CaseResult, ClauseRow, WINDOWS_S, run, slos};
use goodput::slo::Clause;
use goodput_sim::Profile;

const SEEDS: [u64; 4] = [11, 12, 13, 14];
const SECS: u64 = 600;

fn main() {
    let profiles = [Profile::Steady, Profile::Ramp, Profile::Burst];
    let mut results: Vec<CaseResult> = Vec::new();
    for profile in profiles {
        for seed in SEEDS {
            // Every other seed runs two data-parallel engines, so shard sums are covered too.
            let engines = if seed % 2 == 0 { 2 } else { 1 };
            let r = run(Case { profile, seed, engines, secs: SECS });
            eprintln!("{} seed {seed}: {} requests finished", r.case.profile_name(), r.finished_requests);
            results.push(r);
        }
    }
    let names = ["steady", "ramp", "burst"];
    println!(
        "Seeds {SEEDS:?} per profile (even seeds: 2 engines), {SECS} s each, scrape every {} s, windows {:?} s, one evaluation every 5 s.\n",
        accuracy_support::SCRAPE_INTERVAL_S,
        WINDOWS_S
    );
    for s in slos() {
        let clauses: Vec<String> =
            s.clauses().map(|(c, t)| format!("{} ≤ {} s", c.as_str(), t.as_secs_f64())).collect();
        println!("- `{}`: {}", s.name, clauses.join(", "));
    }

    println!("\n### Coverage\n");
    println!(
        "| profile | requests | SLO evaluations | clause brackets ⊇ truth | on-boundary exact | joint ⊇ truth | joint misses: TTFT population shifted | worst joint miss | token goodput ⊇ truth | token-weighted goodput ⊇ |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for name in names {
        let rs: Vec<&CaseResult> = results.iter().filter(|r| r.case.profile_name() == name).collect();
        let rows = || rs.iter().flat_map(|r| r.rows.iter());
        let clause = Summary::of(rows().filter(|x| x.clause != Clause::Joint).map(|x| (x.got, x.truth)));
        let on: Vec<&ClauseRow> = rows().filter(|x| x.clause != Clause::Joint && x.on_boundary).collect();
        let exact = on.iter().filter(|x| x.got.is_exact() && (x.got.estimate - x.truth).abs() <= 1e-12).count();
        let joint: Vec<&ClauseRow> = rows().filter(|x| x.clause == Clause::Joint).collect();
        let joint_s = Summary::of(joint.iter().map(|x| (x.got, x.truth)));
        let misses: Vec<&&ClauseRow> = joint.iter().filter(|x| !contains(&x.got, x.truth)).collect();
        let explained = misses.iter().filter(|x| x.ttft_population_shift != (0.0, 0.0)).count();
        let worst = misses.iter().map(|x| (x.got.lower - x.truth).max(x.truth - x.got.upper)).fold(0.0, f64::max);
        let goodput = || rs.iter().flat_map(|r| r.goodput.iter());
        let tokens = Summary::of(goodput().map(|g| (g.got, g.truth)));
        let weighted = Summary::of(goodput().map(|g| (g.got, g.truth_token_weighted)));
        let finished: usize = rs.iter().map(|r| r.finished_requests).sum();
        let evaluated: usize = rs.iter().map(|r| r.evaluated).sum();
        println!(
            "| {name} | {finished} | {evaluated} | {} | {} | {} | {explained} of {} | {worst:.4} | {} | {} |",
            pct(clause.covered, clause.n),
            pct(exact, on.len()),
            pct(joint_s.covered, joint_s.n),
            misses.len(),
            pct(tokens.covered, tokens.n),
            pct(weighted.covered, weighted.n),
        );
    }
    println!("\n### Joint coverage by SLO and window\n");
    println!(
        "| profile | SLO | window | joint ⊇ truth | windows with a TTFT population shift | mean width | in-flight-widened ⊇ truth | its mean width |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for name in names {
        for spec in slos() {
            for w in WINDOWS_S {
                let joint: Vec<&ClauseRow> = results
                    .iter()
                    .filter(|r| r.case.profile_name() == name)
                    .flat_map(|r| r.rows.iter())
                    .filter(|x| x.clause == Clause::Joint && x.slo == spec.name && x.window_s == w)
                    .collect();
                let covered = joint.iter().filter(|x| contains(&x.got, x.truth)).count();
                let shifted = joint.iter().filter(|x| x.ttft_population_shift != (0.0, 0.0)).count();
                let width = Summary::of(joint.iter().map(|x| (x.got, x.truth))).mean_width;
                let widened = Summary::of(joint.iter().filter_map(|x| x.in_flight_widened.map(|b| (b, x.truth))));
                println!(
                    "| {name} | {} | {}m | {} | {} | {width:.4} | {} | {:.4} |",
                    spec.name,
                    w / 60,
                    pct(covered, joint.len()),
                    pct(shifted, joint.len()),
                    pct(widened.covered, widened.n),
                    widened.mean_width
                );
            }
        }
    }
    let errors: usize = results.iter().map(|r| r.population_errors.len()).sum();
    println!("\nPopulation disagreements (exported finished/failed counts vs ground truth): {errors}.");

    println!("\n### Estimate error (|estimate − ground truth|, attainment as a share)\n");
    println!(
        "| profile | SLO | clause | n | mean abs error | p95 abs error | max abs error | mean bracket width | coverage |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for name in names {
        for spec in slos() {
            for clause in [Clause::Ttft, Clause::Tpot, Clause::E2e, Clause::Joint] {
                let s = Summary::of(
                    results
                        .iter()
                        .filter(|r| r.case.profile_name() == name)
                        .flat_map(|r| r.rows.iter())
                        .filter(|x| x.slo == spec.name && x.clause == clause)
                        .map(|x| (x.got, x.truth)),
                );
                if s.n == 0 {
                    continue;
                }
                println!(
                    "| {name} | {} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} | {} |",
                    spec.name,
                    clause.as_str(),
                    s.n,
                    s.mean_abs_error,
                    s.p95_abs_error,
                    s.max_abs_error,
                    s.mean_width,
                    pct(s.covered, s.n)
                );
            }
        }
    }
}

fn pct(k: usize, n: usize) -> String {
    if n == 0 { "–".into() } else { format!("{:.2} % ({k}/{n})", 100.0 * k as f64 / n as f64) }
}
