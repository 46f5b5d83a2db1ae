//! Joint attainment from marginals, and error-budget burn.

use super::Bounded;

/// Joint attainment of several clauses over the finished requests of a window, where a
/// share `failed` of those requests failed or was aborted (and so is never good).
///
/// Marginals cannot give the joint share; they bound it (Fréchet):
/// `max(0, Σ lowerᵢ − (n − 1) − failed) ≤ p ≤ min(min upperᵢ, 1 − failed)`, and the
/// estimate assumes independence: `(1 − failed) · Π estimateᵢ`.
pub fn joint(clauses: &[Bounded], failed: f64) -> Bounded {
    let failed = failed.clamp(0.0, 1.0);
    let n = clauses.len() as f64;
    let lower_sum: f64 = clauses.iter().map(|c| c.lower).sum();
    let lower = (lower_sum - (n - 1.0).max(0.0) - failed).max(0.0);
    let upper = clauses.iter().map(|c| c.upper).fold(1.0 - failed, f64::min);
    // Σ lower − (n − 1) rounds: exact marginals (1, 1, p) can put `lower` one ulp above
    // `upper = p`, and `clamp` panics on an inverted range.
    let lower = lower.min(upper);
    let estimate = (1.0 - failed) * clauses.iter().map(|c| c.estimate).product::<f64>();
    Bounded { lower, estimate: estimate.clamp(lower, upper), upper }
}

/// Error-budget burn rate `(1 − attainment) / (1 − objective)`: less attainment burns
/// faster, so the lower burn comes from the upper attainment.
pub fn burn_rate(attainment: Bounded, objective: f64) -> Bounded {
    let budget = 1.0 - objective;
    Bounded {
        lower: (1.0 - attainment.upper) / budget,
        estimate: (1.0 - attainment.estimate) / budget,
        upper: (1.0 - attainment.lower) / budget,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frechet_bounds_and_independence_estimate() {
        let ttft = Bounded { lower: 0.9, estimate: 0.95, upper: 0.97 };
        let tpot = Bounded { lower: 0.8, estimate: 0.85, upper: 0.9 };
        let j = joint(&[ttft, tpot], 0.0);
        assert!((j.lower - 0.7).abs() < 1e-12);
        assert_eq!(j.upper, 0.9);
        assert!((j.estimate - 0.95 * 0.85).abs() < 1e-12);
        // 5 % failed requests are never good.
        let j = joint(&[ttft, tpot], 0.05);
        assert!((j.lower - 0.65).abs() < 1e-12);
        assert!((j.estimate - 0.95 * 0.95 * 0.85).abs() < 1e-12);
        // Exact, disjoint-failure marginals collapse the bracket only when they must.
        let j = joint(&[Bounded::exact(1.0), Bounded::exact(1.0)], 0.0);
        assert_eq!(j, Bounded::exact(1.0));
        assert_eq!(joint(&[Bounded::exact(0.3), Bounded::exact(0.4)], 0.0).lower, 0.0);
    }

    #[test]
    fn rounding_never_inverts_the_bounds() {
        // 2.9682539682539684 − 2 rounds to just above 61/63 (found by tests/accuracy_*).
        let p = 61.0 / 63.0;
        let j = joint(&[Bounded::exact(1.0), Bounded::exact(1.0), Bounded::exact(p)], 0.0);
        assert!(j.lower <= j.estimate && j.estimate <= j.upper);
        assert_eq!(j.upper, p);
    }

    #[test]
    fn burn_inverts_the_bounds() {
        let b = burn_rate(Bounded { lower: 0.98, estimate: 0.985, upper: 0.99 }, 0.99);
        assert!((b.lower - 1.0).abs() < 1e-9);
        assert!((b.estimate - 1.5).abs() < 1e-9);
        assert!((b.upper - 2.0).abs() < 1e-9);
    }
}
