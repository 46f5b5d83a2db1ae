//! Prometheus 3.x's float `sum` and `avg`: Kahan–Neumaier compensated addition, in the
//! order the series come (docs/architecture.md#summing-series).
//!
//! Every place goodput adds one value per series (`sum by (le)` of bucket rates,
//! `sum(rate(...))` over data-parallel ranks and finish reasons, gauges over ranks) goes
//! through [`KahanSum`], so the result is the one Prometheus computes bit for bit when the
//! same values come in the same order, not merely within rounding of it.

/// `kahansum.Inc` of Prometheus 3.x (`kahanSumInc` in promql/functions.go before 3.5):
/// adds `inc` to the running `sum` and accumulates what rounding lost in `c`. Neumaier's
/// variant: the lost part is taken from whichever operand is smaller in magnitude. An
/// infinite sum drops the compensation, which could only turn it into NaN.
pub fn inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// A running `sum` as PromQL's aggregation keeps it for one group: the first value is taken
/// as is, every later one goes through [`inc`], and the compensation is added once at the
/// end. Values must be added in the order Prometheus would see the series.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KahanSum {
    sum: f64,
    c: f64,
    n: usize,
}

impl KahanSum {
    pub fn add(&mut self, v: f64) {
        if self.n == 0 {
            self.sum = v;
            self.c = 0.0;
        } else {
            (self.sum, self.c) = inc(v, self.sum, self.c);
        }
        self.n += 1;
    }

    /// How many values were added.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// `sum(...)`: the running sum plus its compensation; `None` when nothing was added
    /// (PromQL then has no output series).
    pub fn sum(&self) -> Option<f64> {
        (self.n > 0).then_some(self.sum + self.c)
    }

    /// `avg(...)` as Prometheus ≥ 3.5 computes it while the running sum stays finite:
    /// `sum / n + c / n`. (Prometheus switches to an incremental mean once the sum would
    /// overflow; the values averaged here, KV usage in 0–1, never come near that.)
    pub fn mean(&self) -> Option<f64> {
        let n = self.n as f64;
        (self.n > 0).then(|| self.sum / n + self.c / n)
    }
}

impl FromIterator<f64> for KahanSum {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        let mut s = KahanSum::default();
        for v in iter {
            s.add(v);
        }
        s
    }
}

/// `sum(...)` of values in series order; `None` for no values.
pub fn sum(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    values.into_iter().collect::<KahanSum>().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(v: &[f64]) -> f64 {
        v.iter().copied().reduce(|a, b| a + b).unwrap()
    }

    #[test]
    fn compensation_recovers_what_naive_addition_loses() {
        // 1 is below half an ulp of 1e16 (2), so naive addition drops both ones.
        let v = [1e16, 1.0, 1.0, -1e16];
        assert_eq!(naive(&v), 0.0);
        assert_eq!(sum(v), Some(2.0));
        // Neumaier's swap: the big term arrives second, Kahan's original would lose it.
        let v = [1.0, 1e100, 1.0, -1e100];
        assert_eq!(naive(&v), 0.0);
        assert_eq!(sum(v), Some(2.0));
    }

    #[test]
    fn three_rates_of_a_plain_scrape_differ_in_the_last_bit() {
        // Rates as `sum(rate(...))` over three finish reasons might produce them.
        let v = [0.1, 0.2, 0.3];
        assert_eq!(naive(&v), 0.6000000000000001);
        assert_eq!(sum(v), Some(0.6));
        // Two terms: TwoSum is exact, so the compensated sum equals the plain one.
        assert_eq!(sum([0.1, 0.2]), Some(0.1 + 0.2));
    }

    #[test]
    fn edge_values_behave_as_in_prometheus() {
        assert_eq!(sum(std::iter::empty()), None);
        assert_eq!(sum([3.5]), Some(3.5));
        // The compensation (0) is still added at the end: -0 comes out as +0, as upstream.
        assert!(sum([-0.0]).unwrap().is_sign_positive());
        // An infinite running sum resets the compensation instead of making it NaN.
        assert_eq!(sum([f64::MAX, f64::MAX, 1.0]), Some(f64::INFINITY));
        assert!(sum([1.0, f64::NAN, 2.0]).unwrap().is_nan());
    }

    #[test]
    fn mean_divides_sum_and_compensation_separately() {
        let s: KahanSum = [0.1, 0.2, 0.3].into_iter().collect();
        assert_eq!(s.len(), 3);
        // ≥ 3.5: sum/n + c/n. (3.0–3.4 divided sum + c, giving 0.19999999999999998; the
        // naive mean is 0.20000000000000004.)
        assert_eq!(s.mean(), Some(0.2));
        assert_ne!(s.sum().unwrap() / 3.0, 0.2);
        assert_eq!(KahanSum::default().mean(), None);
    }
}
