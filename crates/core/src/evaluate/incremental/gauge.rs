//! One gauge group's statistics over a sliding window, updated per point entering and
//! leaving.
//!
//! First, last, max and the KV time-in-band counts are exact (a max is a monotonic deque;
//! band shares are integer counts over the sample count, as the reference's added 1.0s
//! are). The mean is a running Kahan–Neumaier sum that subtracts the values leaving: it is
//! within 2 ulp of the exact mean (the compensation error does not grow with the ops
//! summed), while the reference adds the samples naively, which is off the exact mean by
//! at most (n − 1)·2⁻⁵³ relative for non-negative samples. So the two differ by at most
//! (n + 1)·2⁻⁵³ relative (about 1e-14 typically, 4e-12 at `MAX_POINTS` samples in the
//! worst case), and the incremental one is the closer to exact (docs/footprint.md#incremental-windows).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::super::KvThresholds;
use super::super::kv::{self, band_index};
use super::super::range::{FiniteRange, GaugeRange};
use crate::kahan;

#[derive(Debug, Clone)]
pub(super) struct GaugeState {
    /// Only finite samples count (KV usage, as `kv::report` reads it); else all samples.
    finite_only: bool,
    /// Samples in the window (a window holds at most `MAX_POINTS` + `MAX_DROPPED`).
    n: u32,
    first: f64,
    last: f64,
    nan: u32,
    pos_inf: u32,
    neg_inf: u32,
    /// Running compensated sum of the finite samples.
    sum: f64,
    c: f64,
    /// (point seq, value), values strictly decreasing from the front: the max is the front.
    /// Holds finite values when `finite_only`, else every non-NaN one (`f64::max` skips NaN).
    max: VecDeque<(u64, f64)>,
    /// The newest finite sample (KV's `last`).
    last_finite: Option<(u64, f64)>,
    /// Finite samples in each KV band, in `KvBand::ALL` order.
    bands: [u32; 5],
}

impl GaugeState {
    pub fn new(finite_only: bool) -> Self {
        GaugeState {
            finite_only,
            n: 0,
            first: f64::NAN,
            last: f64::NAN,
            nan: 0,
            pos_inf: 0,
            neg_inf: 0,
            sum: 0.0,
            c: 0.0,
            max: VecDeque::new(),
            last_finite: None,
            bands: [0; 5],
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.max.capacity() * std::mem::size_of::<(u64, f64)>()
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn finite(&self) -> u32 {
        self.n - self.nan - self.pos_inf - self.neg_inf
    }

    /// The newest point's value.
    pub fn push(&mut self, seq: u64, v: f64, kv: &KvThresholds) {
        if self.n == 0 {
            self.first = v;
        }
        self.n += 1;
        self.last = v;
        if v.is_nan() {
            self.nan += 1;
            return;
        }
        if v == f64::INFINITY {
            self.pos_inf += 1;
        } else if v == f64::NEG_INFINITY {
            self.neg_inf += 1;
        } else {
            (self.sum, self.c) = kahan::inc(v, self.sum, self.c);
            self.last_finite = Some((seq, v));
            if self.finite_only {
                self.bands[band_index(kv::band(v, kv))] += 1;
            }
        }
        if !self.finite_only || v.is_finite() {
            while self.max.back().is_some_and(|&(_, b)| b <= v) {
                self.max.pop_back();
            }
            self.max.push_back((seq, v));
        }
    }

    /// The oldest point (`seq`, value `v`) leaves; `next_first` is the value at the next
    /// point carrying the group, if any is still in the window.
    pub fn pop(&mut self, seq: u64, v: f64, next_first: Option<f64>, kv: &KvThresholds) {
        self.n -= 1;
        if let Some(f) = next_first {
            self.first = f;
        }
        if v.is_nan() {
            self.nan -= 1;
        } else if v == f64::INFINITY {
            self.pos_inf -= 1;
        } else if v == f64::NEG_INFINITY {
            self.neg_inf -= 1;
        } else {
            (self.sum, self.c) = kahan::inc(-v, self.sum, self.c);
            if self.finite_only {
                self.bands[band_index(kv::band(v, kv))] -= 1;
            }
            if self.last_finite.is_some_and(|(s, _)| s == seq) {
                self.last_finite = None;
            }
        }
        if self.finite() == 0 {
            // Nothing left to sum: drop what rounding left behind.
            (self.sum, self.c) = (0.0, 0.0);
        }
        if self.max.front().is_some_and(|&(s, _)| s == seq) {
            self.max.pop_front();
        }
    }

    /// The value at the oldest point carrying the group, found after it left.
    pub fn set_first(&mut self, v: f64) {
        self.first = v;
    }

    fn finite_mean(&self) -> f64 {
        (self.sum + self.c) / self.finite() as f64
    }

    /// The statistics the from-scratch pass gives (`GaugeRange::of`); finite ones only
    /// for KV usage.
    pub fn range(&self) -> Option<GaugeRange> {
        if self.n == 0 {
            return None;
        }
        let mean = if self.nan > 0 || (self.pos_inf > 0 && self.neg_inf > 0) {
            f64::NAN
        } else if self.pos_inf > 0 {
            f64::INFINITY
        } else if self.neg_inf > 0 {
            f64::NEG_INFINITY
        } else {
            self.finite_mean()
        };
        let max = self.max.front().map_or(f64::NEG_INFINITY, |m| m.1);
        let finite = (self.finite_only)
            .then(|| {
                let (_, last) = self.last_finite?;
                // The deque holds finite values only here: its front is the finite max.
                Some(FiniteRange {
                    samples: self.finite() as usize,
                    last,
                    mean: self.finite_mean(),
                    max,
                    bands: self.bands.map(|b| b as usize),
                })
            })
            .flatten();
        // For KV usage the all-sample max would skip infinities too; only `finite` is read.
        Some(GaugeRange { first: self.first, last: self.last, mean, max, finite })
    }
}

/// One gauge group's statistics ([`GaugeState`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedGauge {
    pub(super) finite_only: bool,
    pub(super) n: u32,
    pub(super) first: f64,
    pub(super) last: f64,
    pub(super) nan: u32,
    pub(super) pos_inf: u32,
    pub(super) neg_inf: u32,
    pub(super) sum: f64,
    pub(super) c: f64,
    pub(super) max: Vec<(u64, f64)>,
    pub(super) last_finite: Option<(u64, f64)>,
    pub(super) bands: [u32; 5],
}

impl GaugeState {
    /// The state as a snapshot keeps it, point sequence numbers as `offset` maps them.
    pub fn saved(&self, offset: impl Fn(u64) -> u64) -> SavedGauge {
        SavedGauge {
            finite_only: self.finite_only,
            n: self.n,
            first: self.first,
            last: self.last,
            nan: self.nan,
            pos_inf: self.pos_inf,
            neg_inf: self.neg_inf,
            sum: self.sum,
            c: self.c,
            max: self.max.iter().map(|&(s, v)| (offset(s), v)).collect(),
            last_finite: self.last_finite.map(|(s, v)| (offset(s), v)),
            bands: self.bands,
        }
    }

    /// The state `s` describes, sequence numbers as `seq` maps the saved offsets; `None`
    /// when its counts contradict each other (a snapshot's bytes are checked, not trusted).
    pub fn restored(s: &SavedGauge, seq: impl Fn(u64) -> Option<u64>) -> Option<GaugeState> {
        let special = u64::from(s.nan) + u64::from(s.pos_inf) + u64::from(s.neg_inf);
        let bands: u64 = s.bands.iter().map(|&b| u64::from(b)).sum();
        if s.n == 0 || special > u64::from(s.n) || bands > u64::from(s.n) - special {
            return None;
        }
        let max = s.max.iter().map(|&(o, v)| Some((seq(o)?, v))).collect::<Option<VecDeque<_>>>()?;
        let last_finite = match s.last_finite {
            Some((o, v)) => Some((seq(o)?, v)),
            None => None,
        };
        Some(GaugeState {
            finite_only: s.finite_only,
            n: s.n,
            first: s.first,
            last: s.last,
            nan: s.nan,
            pos_inf: s.pos_inf,
            neg_inf: s.neg_inf,
            sum: s.sum,
            c: s.c,
            max,
            last_finite,
            bands: s.bands,
        })
    }
}
