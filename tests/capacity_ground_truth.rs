//! The online capacity estimate against the simulator's true capacity (a sweep of steady
//! rates in virtual time, `goodput_sim::capacity`): once failing load has been seen, the
//! interval from the lower end's p10 to the upper end's p90 should contain the truth in at
//! least 80 % of evaluations. docs/accuracy.md#capacity publishes the full table
//! (`cargo run --release --example capacity_report`).

mod capacity_support;

use capacity_support::{config, run, truth};
use goodput_sim::Profile;

/// Share of uncensored evaluations whose interval holds `truth`, and how many there were.
fn coverage(profile: Profile, seed: u64, secs: u64) -> (f64, usize, f64) {
    let cfg = config(profile, seed);
    let truth = truth(&cfg);
    let judged: Vec<(f64, f64)> =
        run(&cfg, secs).iter().filter_map(|i| i.interval().filter(|x| !x.2).map(|x| (x.0, x.1))).collect();
    let inside = judged.iter().filter(|(lo, hi)| *lo <= truth && truth <= *hi).count();
    (inside as f64 / judged.len().max(1) as f64, judged.len(), truth)
}

#[test]
fn the_true_capacity_is_found_and_the_estimate_lands_near_it() {
    let (share, n, truth) = coverage(Profile::Ramp, 1, 600);
    // The sweep finds a knee between the profile's steady load and its throughput limit.
    assert!((3.0..4.5).contains(&truth), "true capacity {truth}");
    assert!(n >= 60, "{n} uncensored evaluations in two ramps");
    // Today's coverage on the fast ramp (docs/accuracy.md#capacity): a floor, not the goal.
    assert!(share >= 0.25, "coverage {share:.2} over {n} evaluations");
}

#[test]
#[ignore = "not met yet: coverage is 21–52 % on ramps (docs/accuracy.md#capacity)"]
fn the_interval_contains_the_truth_in_four_evaluations_of_five() {
    for seed in [1, 2] {
        let (share, n, truth) = coverage(Profile::Ramp, seed, 1200);
        assert!(share >= 0.8, "seed {seed}: coverage {share:.2} over {n} evaluations (truth {truth:.2})");
    }
}
