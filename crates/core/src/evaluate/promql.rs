//! PromQL's float math, ported to match Prometheus 3.x exactly
//! (docs/architecture.md#semantics-that-must-be-exact).
//!
//! - [`extrapolated_rate`] is `promql/functions.go` `extrapolatedRate` for counters:
//!   counter-reset correction, extrapolation to the range edges only when the first/last
//!   sample is within 1.1× the average spacing (else half a spacing), and the zero floor
//!   (never extrapolate a counter back past zero). 3.x applies the 1.1× threshold *before*
//!   the zero floor; 2.42 did it after. They differ only when a series starts more than
//!   1.1 spacings after the range start and its first value is below about one spacing's
//!   increase.
//! - [`histogram_quantile`] is `promql/quantile.go` `BucketQuantile` for classic buckets.
//!
//! Everything here is pure and works on plain numbers; the caller selects the samples of
//! the left-open range (t−w, t].

/// What a rate computation needs about one series inside one range, gathered in one pass
/// over its samples (oldest first). Keeps no sample list, so a 1 h range at 1 s costs
/// nothing extra.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeAcc {
    first_t: i64,
    first_v: f64,
    last_t: i64,
    last_v: f64,
    n: usize,
    /// Sum of the values just before each reset (Prometheus adds `prev` on `cur < prev`).
    correction: f64,
}

impl RangeAcc {
    /// Starts a range with its first sample.
    pub fn new(t_ms: i64, v: f64) -> Self {
        RangeAcc { first_t: t_ms, first_v: v, last_t: t_ms, last_v: v, n: 1, correction: 0.0 }
    }

    /// A range from its first and last `(t_ms, value)`, sample count and reset correction
    /// (the sum of the values before each reset, added oldest first).
    pub fn from_parts(first: (i64, f64), last: (i64, f64), n: usize, correction: f64) -> Self {
        RangeAcc { first_t: first.0, first_v: first.1, last_t: last.0, last_v: last.1, n, correction }
    }

    /// Adds the next sample. `forced_reset` marks a restart known from outside the value
    /// (a changed `_created` or process start time); Prometheus only sees a decrease.
    pub fn push(&mut self, t_ms: i64, v: f64, forced_reset: bool) {
        if v < self.last_v || forced_reset {
            self.correction += self.last_v;
        }
        self.last_t = t_ms;
        self.last_v = v;
        self.n += 1;
    }

    pub fn samples(&self) -> usize {
        self.n
    }

    /// `last − first` plus the reset correction: the raw increase between the first and
    /// last sample (no extrapolation), as docs/architecture.md#ratios-from-raw-increases wants.
    pub fn raw_increase(&self) -> f64 {
        self.last_v - self.first_v + self.correction
    }
}

/// How a range's increase becomes a rate.
#[allow(clippy::manual_non_exhaustive)] // the hidden variant is a test switch, not a placeholder
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateMode {
    /// Prometheus's `extrapolatedRate`.
    #[default]
    Prometheus,
    /// Raw increase / range, no extrapolation. Wrong on purpose: the oracle test uses it
    /// to prove that it can tell the difference.
    #[doc(hidden)]
    NaiveForTests,
}

/// `increase(x[range])` of a counter over the range ending at `range_end_ms`, or `None`
/// when fewer than two samples fell inside (PromQL then drops the series).
pub fn extrapolated_increase(acc: &RangeAcc, range_end_ms: i64, range_ms: i64) -> Option<f64> {
    extrapolated(acc, range_end_ms, range_ms, false)
}

/// `rate(x[range])` of a counter: [`extrapolated_increase`] divided by the range in seconds.
pub fn extrapolated_rate(acc: &RangeAcc, range_end_ms: i64, range_ms: i64) -> Option<f64> {
    extrapolated(acc, range_end_ms, range_ms, true)
}

/// Rate in the chosen [`RateMode`].
pub fn rate(acc: &RangeAcc, range_end_ms: i64, range_ms: i64, mode: RateMode) -> Option<f64> {
    match mode {
        RateMode::Prometheus => extrapolated_rate(acc, range_end_ms, range_ms),
        RateMode::NaiveForTests => (acc.n >= 2).then(|| acc.raw_increase() / (range_ms as f64 / 1000.0)),
    }
}

fn extrapolated(acc: &RangeAcc, range_end_ms: i64, range_ms: i64, is_rate: bool) -> Option<f64> {
    if acc.n < 2 {
        return None;
    }
    let range_start_ms = range_end_ms - range_ms;
    let result = acc.raw_increase();
    let mut duration_to_start = (acc.first_t - range_start_ms) as f64 / 1000.0;
    let mut duration_to_end = (range_end_ms - acc.last_t) as f64 / 1000.0;
    let sampled_interval = (acc.last_t - acc.first_t) as f64 / 1000.0;
    let average_between = sampled_interval / (acc.n - 1) as f64;
    let threshold = average_between * 1.1;
    if duration_to_start >= threshold {
        duration_to_start = average_between / 2.0;
    }
    if result > 0.0 && acc.first_v >= 0.0 {
        let duration_to_zero = sampled_interval * (acc.first_v / result);
        if duration_to_zero < duration_to_start {
            duration_to_start = duration_to_zero;
        }
    }
    if duration_to_end >= threshold {
        duration_to_end = average_between / 2.0;
    }
    let mut factor = (sampled_interval + duration_to_start + duration_to_end) / sampled_interval;
    if is_rate {
        factor /= range_ms as f64 / 1000.0;
    }
    Some(result * factor)
}

/// Prometheus's tolerance for float noise between adjacent cumulative buckets.
const SMALL_DELTA_TOLERANCE: f64 = 1e-12;

/// `almost.Equal` from Prometheus's util/almost.
fn almost_equal(a: f64, b: f64, epsilon: f64) -> bool {
    const MIN_NORMAL: f64 = f64::MIN_POSITIVE; // 0x0010000000000000
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < MIN_NORMAL {
        return diff < epsilon * MIN_NORMAL;
    }
    diff / abs_sum.min(f64::MAX) < epsilon
}

/// A quantile and the bounds of the bucket it fell in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantile {
    pub value: f64,
    /// `(lower, upper)` of the bucket holding the rank; `None` when the value is NaN or
    /// ±Inf from an out-of-range φ.
    pub bracket: Option<(f64, f64)>,
}

/// `histogram_quantile(q, buckets)` over `(upper bound, cumulative count)` pairs, in any
/// order, as Prometheus 3.x's `BucketQuantile`.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Quantile {
    let none = |value| Quantile { value, bracket: None };
    if q.is_nan() {
        return none(f64::NAN);
    }
    if q < 0.0 {
        return none(f64::NEG_INFINITY);
    }
    if q > 1.0 {
        return none(f64::INFINITY);
    }
    let mut b: Vec<(f64, f64)> = buckets.to_vec();
    // Go's slices.SortFunc is not stable, but equal bounds are coalesced right after, and
    // addition of their counts is the only thing order could change.
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    match b.last() {
        Some(&(le, _)) if le == f64::INFINITY => {}
        _ => return none(f64::NAN),
    }
    // coalesceBuckets: equal bounds (e.g. "1" and "1.0" from different shards) add up.
    let mut co: Vec<(f64, f64)> = Vec::with_capacity(b.len());
    for (le, c) in b {
        match co.last_mut() {
            Some(last) if last.0 == le => last.1 += c,
            _ => co.push((le, c)),
        }
    }
    ensure_monotonic_and_ignore_small_deltas(&mut co, SMALL_DELTA_TOLERANCE);
    if co.len() < 2 {
        return none(f64::NAN);
    }
    let observations = co[co.len() - 1].1;
    if observations == 0.0 {
        return none(f64::NAN);
    }
    let mut rank = q * observations;
    // sort.Search over all but the +Inf bucket: the first with count >= rank.
    let n = co.len() - 1;
    // A binary search like Go's sort.Search, so NaN counts land where upstream puts them.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    let idx = co[..n].partition_point(|x| !(x.1 >= rank));
    if idx == n {
        let lower = co[n - 1].0;
        return Quantile { value: lower, bracket: Some((lower, f64::INFINITY)) };
    }
    if idx == 0 && co[0].0 <= 0.0 {
        return Quantile { value: co[0].0, bracket: Some((f64::NEG_INFINITY, co[0].0)) };
    }
    let mut bucket_start = 0.0;
    let bucket_end = co[idx].0;
    let mut count = co[idx].1;
    if idx > 0 {
        bucket_start = co[idx - 1].0;
        count -= co[idx - 1].1;
        rank -= co[idx - 1].1;
    }
    Quantile {
        value: bucket_start + (bucket_end - bucket_start) * (rank / count),
        bracket: Some((bucket_start, bucket_end)),
    }
}

/// `ensureMonotonicAndIgnoreSmallDeltas`: differences below `tolerance` (relative) are
/// float noise and flattened either way; real decreases are flattened too. `prev` is not
/// advanced past an ignored bucket, exactly as upstream.
fn ensure_monotonic_and_ignore_small_deltas(buckets: &mut [(f64, f64)], tolerance: f64) {
    let Some(&(_, first)) = buckets.first() else { return };
    let mut prev = first;
    for b in buckets.iter_mut().skip(1) {
        let curr = b.1;
        if curr == prev {
            continue;
        }
        if almost_equal(prev, curr, tolerance) {
            b.1 = prev;
            continue;
        }
        if curr < prev {
            b.1 = prev;
            continue;
        }
        prev = curr;
    }
}

#[cfg(test)]
#[path = "promql_tests.rs"]
mod tests;
