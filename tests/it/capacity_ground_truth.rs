//! The online capacity estimate against the simulator's true capacity (a sweep of load
//! levels in virtual time, `goodput_sim::capacity`): once failing load has been proven, the
//! interval from the lower end's p10 to the upper end's p90 should contain the truth in at
//! least 80 % of evaluations. docs/accuracy.md#capacity publishes the full table
//! (`cargo run --release --example capacity_report`).

use crate::capacity_support;

use capacity_support::{Instant, cases, config, run, run_both, truth};
use goodput::capacity::Method;
use goodput_sim::{Profile, SimConfig};

/// Uncensored evaluations of one run, and how many of their intervals hold the truth.
fn coverage(cfg: &SimConfig, secs: u64) -> (usize, usize, f64) {
    let truth = truth(cfg);
    let (inside, all) = holds(&run(cfg, secs), truth);
    (inside, all, truth)
}

/// How many of a run's uncensored intervals hold `truth`, of how many.
fn holds(run: &[Instant], truth: f64) -> (usize, usize) {
    let judged: Vec<(f64, f64)> =
        run.iter().filter_map(|i| i.interval().filter(|x| !x.2).map(|x| (x.0, x.1))).collect();
    (judged.iter().filter(|(lo, hi)| *lo <= truth && truth <= *hi).count(), judged.len())
}

#[test]
fn on_the_ramp_the_interval_contains_the_truth_in_four_evaluations_of_five() {
    let (mut inside, mut all) = (0, 0);
    for seed in [1, 2] {
        let (i, n, truth) = coverage(&config(Profile::Ramp, seed), 1200);
        // The sweep finds a knee between the profile's steady load and its throughput limit.
        assert!((3.0..4.5).contains(&truth), "seed {seed}: true capacity {truth}");
        assert!(n >= 150, "seed {seed}: {n} uncensored evaluations in four ramps");
        inside += i;
        all += n;
    }
    let share = inside as f64 / all as f64;
    assert!(share >= 0.8, "coverage {share:.2} over {all} evaluations");
}

#[test]
fn from_exact_request_records_the_estimate_is_empirical_and_agrees_with_the_brackets() {
    let cfg = config(Profile::Ramp, 1);
    let (bounds, exact) = run_both(&cfg, 1200);
    let methods = |r: &[Instant]| -> Vec<Method> {
        r.iter()
            .filter_map(|i| i.capacity.as_ref()?.slos.first().filter(|s| !s.estimates.is_empty()).map(|s| s.method))
            .collect()
    };
    assert!(methods(&bounds).iter().all(|m| *m == Method::Bounds));
    let m = methods(&exact);
    assert!(m.len() > 100 && m.iter().all(|m| *m == Method::Empirical), "{m:?}");
    // Each window's exact attainment lies within its bracket, so the capacity found from
    // it agrees with the bracket's: the two intervals overlap. Not more than that: exact
    // requests are counted at the interval of their arrival, brackets at that of their
    // finish, and a passing interval counts partly at the rate it had held, which moves
    // the ends and the exact estimate apart on a fast ramp (docs/accuracy.md#capacity:
    // the exact p50 lay between the ends in 88 % of evaluations on seed 1 with the coarse
    // bins, 7 % now; the intervals overlap in 99 %).
    let pairs: Vec<((f64, f64), (f64, f64))> = bounds
        .iter()
        .zip(&exact)
        .filter_map(|(b, e)| {
            assert_eq!(b.t_rel_s, e.t_rel_s);
            let (lo, hi, censored) = b.interval()?;
            let (exact_lo, exact_hi, exact_censored) = e.interval()?;
            (!censored && !exact_censored).then_some(((exact_lo, exact_hi), (lo, hi)))
        })
        .collect();
    let overlap = pairs.iter().filter(|((elo, ehi), (lo, hi))| elo <= hi && lo <= ehi).count();
    assert!(pairs.len() > 100 && overlap as f64 >= 0.8 * pairs.len() as f64, "{overlap} of {}", pairs.len());
}

#[test]
#[ignore = "met (99 % brackets, 100 % exact on seeds 1-2; 87 % and 86 % on seeds 3-4, docs/accuracy.md#capacity), but slow in debug: about two minutes of CPU (70 s with one seed per case); run with --ignored"]
fn across_ramp_cases_the_interval_contains_the_truth_in_four_evaluations_of_five() {
    let (mut inside, mut all) = (0, 0);
    let (mut exact_inside, mut exact_all) = (0, 0);
    for (name, make, secs) in cases().into_iter().filter(|c| c.0.contains("ramp")) {
        for seed in [1, 2] {
            let cfg = make(seed);
            let truth = truth(&cfg);
            let (bounds, exact) = run_both(&cfg, secs);
            let ((i, n), (ei, en)) = (holds(&bounds, truth), holds(&exact, truth));
            eprintln!("{name} seed {seed}: {i}/{n}, exact {ei}/{en} (truth {truth:.2})");
            inside += i;
            all += n;
            exact_inside += ei;
            exact_all += en;
        }
    }
    let (share, exact_share) = (inside as f64 / all as f64, exact_inside as f64 / exact_all as f64);
    assert!(share >= 0.8, "brackets: coverage {share:.2} over {all} evaluations");
    assert!(exact_share >= 0.8, "exact: coverage {exact_share:.2} over {exact_all} evaluations");
}

#[test]
fn goodput_simulate_capacity_sweep_prints_the_truth_the_library_finds() {
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(["simulate", "--capacity-sweep", "--profile", "ramp", "--seed", "1"])
            .args(extra)
            .output()
            .expect("goodput runs")
    };
    let out = run(&["--slo-ttft", "500ms", "--slo-tpot", "50ms"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let want = truth(&config(Profile::Ramp, 1));
    assert!(out.status.success() && text.contains(&format!("true capacity: {want:.3} requests/s")), "{text}");
    let out = run(&[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("needs an SLO limit"));
}
