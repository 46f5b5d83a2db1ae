//! The online capacity estimate against the simulator's true capacity (a sweep of load
//! levels in virtual time, `goodput_sim::capacity`): once failing load has been proven, the
//! interval from the lower end's p10 to the upper end's p90 should contain the truth in at
//! least 80 % of evaluations. docs/accuracy.md#capacity publishes the full table
//! (`cargo run --release --example capacity_report`).

mod capacity_support;

use capacity_support::{cases, config, run, truth};
use goodput_sim::{Profile, SimConfig};

/// Uncensored evaluations of one run, and how many of their intervals hold the truth.
fn coverage(cfg: &SimConfig, secs: u64) -> (usize, usize, f64) {
    let truth = truth(cfg);
    let judged: Vec<(f64, f64)> =
        run(cfg, secs).iter().filter_map(|i| i.interval().filter(|x| !x.2).map(|x| (x.0, x.1))).collect();
    let inside = judged.iter().filter(|(lo, hi)| *lo <= truth && truth <= *hi).count();
    (inside, judged.len(), truth)
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
#[ignore = "not met yet: pooled coverage over every ramp case is about 62 % (docs/accuracy.md#capacity); takes minutes in debug"]
fn across_ramp_cases_the_interval_contains_the_truth_in_four_evaluations_of_five() {
    let (mut inside, mut all) = (0, 0);
    for (name, make, secs) in cases().into_iter().filter(|c| c.0.contains("ramp")) {
        for seed in [1, 2] {
            let (i, n, truth) = coverage(&make(seed), secs);
            eprintln!("{name} seed {seed}: {i}/{n} (truth {truth:.2})");
            inside += i;
            all += n;
        }
    }
    let share = inside as f64 / all as f64;
    assert!(share >= 0.8, "coverage {share:.2} over {all} evaluations");
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
