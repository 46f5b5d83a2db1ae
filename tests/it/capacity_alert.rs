//! `LLMCapacityHeadroomLow` comes first: under the simulator's `ramp` profile it fires
//! before `LLMGoodputDivergence`, and under `steady` it stays quiet. The recording is
//! replayed with the default alert rules, as the daemon runs them (tests/it/capacity_support).

use crate::capacity_support;

use capacity_support::{config, first_firing, run};
use goodput_sim::Profile;

const HEADROOM: &str = "LLMCapacityHeadroomLow";
const DIVERGENCE: &str = "LLMGoodputDivergence";

#[test]
fn under_ramp_the_headroom_alert_fires_before_goodput_diverges() {
    for seed in [3, 7] {
        let r = run(&config(Profile::Ramp, seed), 900);
        let headroom = first_firing(&r, HEADROOM).unwrap_or_else(|| panic!("seed {seed}: {HEADROOM} never fired"));
        let divergence =
            first_firing(&r, DIVERGENCE).unwrap_or_else(|| panic!("seed {seed}: {DIVERGENCE} never fired"));
        assert!(headroom < divergence, "seed {seed}: {HEADROOM} at {headroom} s, {DIVERGENCE} at {divergence} s");
        // It fired on an estimate that had seen the knee, while arrivals rose.
        let at = r.iter().find(|i| i.t_rel_s == headroom).and_then(|i| i.capacity.clone()).expect("capacity");
        assert!(at.rising && !at.slos[0].estimates[0].censored, "seed {seed}: {at:?}");
    }
}

#[test]
fn under_steady_load_it_stays_quiet() {
    for seed in [1, 2] {
        let r = run(&config(Profile::Steady, seed), 900);
        assert_eq!(first_firing(&r, HEADROOM), None, "seed {seed}");
        // The engine is never pushed past its knee: no failing load is proven (the bracket's
        // lower end may fail; its upper end does not), so capacity stays a lower bound.
        let last = r.last().and_then(|i| i.capacity.clone()).expect("capacity");
        assert!(last.slos[0].censored(), "seed {seed}: {last:?}");
        assert!(!last.saturated, "seed {seed}");
    }
}
