//! A mergeable quantile sketch with a relative-error guarantee (DDSketch, Masson et al.,
//! VLDB 2019), for latency quantiles over windows the raw records no longer cover, and
//! for ITL, whose per-event gaps are never stored one by one.
//!
//! A value `x > 0` goes to bin `k = ⌈log_γ x⌉`, which holds `(γ^(k−1), γ^k]`; the bin
//! answers with `2γ^k / (γ + 1)`, within [`RELATIVE_ERROR`] of every value in it. So the
//! sketch's nearest-rank quantile is within 2 % of the exact nearest-rank quantile of the
//! same values, as long as that value's bin was not collapsed: past [`MAX_BINS`] bins the
//! lowest ones are merged upwards, which spares the high quantiles and needs a spread of
//! more than γ^256 ≈ 27,000× (1 ms to 27 s) among one slot's values.

use std::collections::BTreeMap;

/// α: every answer is within this share of the true nearest-rank value.
pub const RELATIVE_ERROR: f64 = 0.02;
/// Bins kept per sketch: 8 bytes each, so at most 2 KiB.
pub const MAX_BINS: usize = 256;
/// Values at or below this (seconds) are counted as zero.
const MIN_VALUE: f64 = 1e-9;

fn ln_gamma() -> f64 {
    ((1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR)).ln()
}

/// The bin of a value; `None` for the zero bin.
pub fn key(x: f64) -> Option<i32> {
    (x > MIN_VALUE).then(|| (x.ln() / ln_gamma()).ceil() as i32)
}

fn value(k: i32) -> f64 {
    let gamma = ln_gamma().exp();
    2.0 * (f64::from(k) * ln_gamma()).exp() / (gamma + 1.0)
}

/// The 1-based rank of the nearest-rank `q`-quantile among `n` values: the smallest `r`
/// with `r ≥ q·n`, at least 1. The product is nudged down by a relative 1e-12 so that
/// `0.99 × 100 = 99.00000000000001` is rank 99, as it is on paper.
pub fn nearest_rank(q: f64, n: u64) -> u64 {
    let r = (q * n as f64 * (1.0 - 1e-12)).ceil();
    (r as u64).clamp(1, n.max(1))
}

/// Bins sorted by key, with counts.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sketch {
    zeros: u64,
    bins: Vec<(i32, u32)>,
    count: u64,
}

impl Sketch {
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes held beyond the struct itself.
    pub fn heap_bytes(&self) -> usize {
        self.bins.capacity() * std::mem::size_of::<(i32, u32)>()
    }

    pub fn insert(&mut self, x: f64) {
        self.add_key(key(x), 1);
    }

    /// Adds `n` values of bin `k` (`None`: the zero bin).
    pub fn add_key(&mut self, k: Option<i32>, n: u32) {
        self.count += u64::from(n);
        let Some(k) = k else {
            self.zeros += u64::from(n);
            return;
        };
        match self.bins.binary_search_by_key(&k, |b| b.0) {
            Ok(i) => self.bins[i].1 = self.bins[i].1.saturating_add(n),
            Err(i) => {
                self.bins.insert(i, (k, n));
                self.collapse();
            }
        }
    }

    pub fn merge(&mut self, o: &Sketch) {
        if o.is_empty() {
            return;
        }
        self.count += o.count;
        self.zeros += o.zeros;
        let mut out = Vec::with_capacity(self.bins.len() + o.bins.len());
        let (a, b) = (&self.bins, &o.bins);
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if j == b.len() || (i < a.len() && a[i].0 < b[j].0) {
                out.push(a[i]);
                i += 1;
            } else if i == a.len() || b[j].0 < a[i].0 {
                out.push(b[j]);
                j += 1;
            } else {
                out.push((a[i].0, a[i].1.saturating_add(b[j].1)));
                i += 1;
                j += 1;
            }
        }
        self.bins = out;
        self.collapse();
    }

    /// Merges the lowest bins into the lowest one kept, so that at most [`MAX_BINS`] remain.
    fn collapse(&mut self) {
        if self.bins.len() <= MAX_BINS {
            return;
        }
        let cut = self.bins.len() - MAX_BINS;
        let moved: u32 = self.bins[..=cut].iter().fold(0u32, |s, b| s.saturating_add(b.1));
        self.bins[cut].1 = moved;
        self.bins.drain(..cut);
    }

    /// The nearest-rank `q`-quantile, within [`RELATIVE_ERROR`]; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = nearest_rank(q, self.count);
        if rank <= self.zeros {
            return Some(0.0);
        }
        let mut seen = self.zeros;
        for &(k, n) in &self.bins {
            seen += u64::from(n);
            if seen >= rank {
                return Some(value(k));
            }
        }
        self.bins.last().map(|b| value(b.0))
    }
}

/// Sketches added up without collapsing, so that one can be taken out again exactly: a
/// window's slots summed as the window moves, a slot entering at one end and one leaving at
/// the other ([`super::ring`]). [`SketchSum::sketch`] gives what merging the sketches summed
/// one by one gives: merging keeps the highest [`MAX_BINS`] keys seen and folds every lower
/// bin into the lowest kept, whatever the order, and so does one collapse of the sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SketchSum {
    zeros: u64,
    count: u64,
    bins: BTreeMap<i32, u64>,
}

impl SketchSum {
    pub fn add(&mut self, s: &Sketch) {
        self.zeros += s.zeros;
        self.count += s.count;
        for &(k, n) in &s.bins {
            *self.bins.entry(k).or_default() += u64::from(n);
        }
    }

    /// Takes out a sketch [`SketchSum::add`] added.
    pub fn subtract(&mut self, s: &Sketch) {
        self.zeros -= s.zeros;
        self.count -= s.count;
        for &(k, n) in &s.bins {
            if let Some(c) = self.bins.get_mut(&k) {
                *c -= u64::from(n);
                if *c == 0 {
                    self.bins.remove(&k);
                }
            }
        }
    }

    /// Adds `n` values of bin `k` (`None`: the zero bin), as [`Sketch::add_key`] does.
    pub fn add_key(&mut self, k: Option<i32>, n: u32) {
        self.count += u64::from(n);
        match k {
            Some(k) => *self.bins.entry(k).or_default() += u64::from(n),
            None => self.zeros += u64::from(n),
        }
    }

    /// The sum as one sketch, collapsed to at most [`MAX_BINS`] bins.
    pub fn sketch(&self) -> Sketch {
        let bins = self.bins.iter().map(|(&k, &n)| (k, u32::try_from(n).unwrap_or(u32::MAX))).collect();
        let mut s = Sketch { zeros: self.zeros, bins, count: self.count };
        s.collapse();
        s
    }

    /// Distinct bins held (the zero bin aside).
    pub fn bins(&self) -> usize {
        self.bins.len()
    }

    /// Bytes held beyond the struct itself, estimated (a B-tree entry and its share of a node).
    pub fn heap_bytes(&self) -> usize {
        self.bins.len() * 2 * std::mem::size_of::<(i32, u64)>()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn exact(values: &mut [f64], q: f64) -> f64 {
        values.sort_by(f64::total_cmp);
        values[nearest_rank(q, values.len() as u64) as usize - 1]
    }

    #[test]
    fn nearest_rank_is_the_paper_definition() {
        assert_eq!(nearest_rank(0.99, 100), 99);
        assert_eq!(nearest_rank(0.5, 3), 2);
        assert_eq!(nearest_rank(0.5, 4), 2);
        assert_eq!(nearest_rank(0.0, 10), 1);
        assert_eq!(nearest_rank(1.0, 10), 10);
        assert_eq!(nearest_rank(0.9, 1), 1);
    }

    #[test]
    fn collapsing_keeps_the_high_quantiles() {
        let mut s = Sketch::default();
        // 1 µs to 1000 s: far more than MAX_BINS bins.
        let values: Vec<f64> = (0..2000).map(|i| 1e-6 * 1.02f64.powi(i / 2)).collect();
        for &v in &values {
            s.insert(v);
        }
        assert!(s.bins.len() <= MAX_BINS);
        assert_eq!(s.count(), 2000);
        let mut v = values.clone();
        let want = exact(&mut v, 0.99);
        let got = s.quantile(0.99).unwrap();
        assert!((got - want).abs() <= RELATIVE_ERROR * want * (1.0 + 1e-9), "{got} vs {want}");
    }

    proptest! {
        #[test]
        fn within_the_relative_error_and_mergeable(
            a in proptest::collection::vec(1e-3f64..10.0, 1..300),
            b in proptest::collection::vec(1e-3f64..10.0, 0..300),
            q in 0.0f64..=1.0,
        ) {
            let (mut sa, mut sb, mut whole) = (Sketch::default(), Sketch::default(), Sketch::default());
            a.iter().for_each(|&x| { sa.insert(x); whole.insert(x); });
            b.iter().for_each(|&x| { sb.insert(x); whole.insert(x); });
            sa.merge(&sb);
            prop_assert_eq!(&sa, &whole);
            let mut all: Vec<f64> = a.iter().chain(&b).copied().collect();
            let want = exact(&mut all, q);
            let got = sa.quantile(q).unwrap();
            prop_assert!((got - want).abs() <= RELATIVE_ERROR * want * (1.0 + 1e-9), "{} vs {}", got, want);
        }

        /// Sketches of values spread over more than MAX_BINS bins (so that a large one
        /// collapses, and so does their merge), some zeros: their sum, with one taken out
        /// again, is what merging the others one by one gives.
        #[test]
        fn a_sum_is_the_merge_of_what_it_holds(
            parts in proptest::collection::vec(proptest::collection::vec(-40i32..400, 0..400), 1..12),
            out in 0usize..12,
        ) {
            let sketches: Vec<Sketch> = parts
                .iter()
                .map(|p| {
                    let mut s = Sketch::default();
                    p.iter().for_each(|&e| s.insert(if e < 0 { 0.0 } else { 1e-5 * 1.05f64.powi(e) }));
                    s
                })
                .collect();
            let out = out % sketches.len();
            let mut sum = SketchSum::default();
            sketches.iter().for_each(|s| sum.add(s));
            sum.subtract(&sketches[out]);
            let mut merged = Sketch::default();
            sketches.iter().enumerate().filter(|(i, _)| *i != out).for_each(|(_, s)| merged.merge(s));
            prop_assert_eq!(sum.sketch(), merged);
        }
    }
}
