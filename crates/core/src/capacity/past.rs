//! The sums of a history's older intervals (docs/capacity.md#history): once an interval
//! is older than the recent ones a history keeps one by one ([`super::history::RECENT`]),
//! what an estimate reads of it is added to sums per workload, rate bin and table, and the
//! interval itself is dropped. A day of history is then its recent intervals and a few
//! thousand sums, not 5,760 intervals (docs/footprint.md#capacity-at-steady-state).
//!
//! What the sums keep of an interval, against the recent ones:
//! - **Workload**: its prompt and output lengths rounded to an eighth of an octave (a
//!   bucket); whether it counts is decided by the bucket's lengths against the current
//!   signature, so its membership may differ from its own lengths' where they lie within
//!   4.4 % of the tolerance band's edges.
//! - **Rate**: its bin (`bins_per_decade`, not the finer cells of the grid's phases), with
//!   the request-weighted rate of the bin's points: an estimate puts the bin's points at
//!   that rate at every phase.
//! - **Settling**: a passing interval that had not held its rate at [`PAST_LEVELS`] levels
//!   (the middles of eight equal parts) rather than at each of `settle_levels`; a draw
//!   takes the level its own share falls in. With four levels and buckets of a quarter
//!   octave, pooled coverage on the held-out seeds fell from 87 % to 82 % (brackets);
//!   with eight of each it is 86 % (docs/accuracy.md#capacity).
//! - **Bootstrap class**: one of [`PAST_CLASSES`], its block's class modulo four. Each
//!   class sums many blocks, so the variance a draw's weights give is the block
//!   bootstrap's in expectation (docs/capacity.md#cost), with fewer classes to average.
//! - **Numbers**: `f32`. The sums are only ever added to (an interval never leaves them
//!   but with its whole bin, below) or multiplied by the decay's new reference, so each is
//!   within a few units of `f32`'s 2^−24 of its value; weights span at most 2^24, so a
//!   contribution a day old is at the edge of what an `f32` sum of newer ones still holds,
//!   as the day's bound says it should be.
//! - **Age**: a sum notes the hour of its newest interval and goes when that is more than
//!   [`super::history::MAX_AGE`] old; counts per hour say how many intervals each SLO used.
//!   The bound is thus a day to within the hour.

use super::cells::{Decay, Stats, Tables, cell_of, key, settle_share};
use super::fit::Fit;
use super::interval::{Interval, Signature, same_workload};

/// Settling levels kept of older intervals.
pub const PAST_LEVELS: usize = 8;
/// Bootstrap classes older intervals are dealt round.
pub const PAST_CLASSES: usize = 4;
/// Workload buckets per octave of prompt or output length: 9 % apart.
const BUCKETS_PER_OCTAVE: f32 = 8.0;
const HOUR_MS: i64 = 3_600_000;

/// A length as its bucket; `i16::MIN` for an unknown one.
fn bucket(x: f32) -> i16 {
    if x.is_finite() && x > 0.0 { (x.log2() * BUCKETS_PER_OCTAVE).round() as i16 } else { i16::MIN }
}

/// The length a bucket stands for; NaN for an unknown one.
fn length(b: i16) -> f32 {
    if b == i16::MIN { f32::NAN } else { (b as f32 / BUCKETS_PER_OCTAVE).exp2() }
}

/// One sum: an SLO, an attainment end (0 lower, 1 upper), a table (0 at the points' own
/// rates, 1 + level for the settling levels), a rate bin and a class, in one ordered key.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Sum {
    key: u32,
    /// The hour (since the epoch) of the newest interval added.
    hour: u32,
    total: f32,
    good: f32,
    rate_total: f32,
}

/// The key of a sum: SLO (8 bits), end (1), table (4), bin (16, offset), class (3).
fn sum_key(slo: usize, end: usize, table: usize, bin: i32, class: usize) -> u32 {
    let bin = (bin.clamp(i16::MIN as i32, i16::MAX as i32) + 32_768) as u32;
    ((slo as u32) << 24) | ((end as u32) << 23) | ((table as u32) << 19) | (bin << 3) | class as u32
}

/// The SLO, end, table, bin and class of a key.
fn unkey(k: u32) -> (usize, usize, usize, i32, usize) {
    let bin = ((k >> 3) & 0xffff) as i32 - 32_768;
    ((k >> 24) as usize, ((k >> 23) & 1) as usize, ((k >> 19) & 15) as usize, bin, (k & 7) as usize)
}

/// SLOs whose older intervals are summed: the first 256 of a target and model.
pub const MAX_SLOS: usize = 256;

const _: () = assert!(PAST_LEVELS < 16 && PAST_CLASSES <= 8);

/// One SLO's counts of one hour: intervals used and judged from brackets, and the sums of
/// the mean age (as `super::history` keeps them for recent intervals).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
struct Hour {
    hour: u32,
    slo: u8,
    used: u32,
    inexact: u32,
    weight: f64,
    weighted_s: f64,
}

/// The sums of one workload bucket.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Bucket {
    prompt: i16,
    output: i16,
    /// By key.
    sums: Vec<Sum>,
    /// By hour, then SLO.
    hours: Vec<Hour>,
}

/// What an SLO's older intervals add to its counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub used: usize,
    pub inexact: usize,
    pub weight: f64,
    pub weighted_s: f64,
}

/// The sums of the older intervals of one history.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Past {
    buckets: Vec<Bucket>,
    /// Intervals summed, per hour: the history's length counts them.
    intervals: Vec<(u32, u32)>,
}

/// Inserts or finds the element of `v` (ordered by `key`) with key `k`, keeping the
/// vector's capacity its length: a day's sums grow by one now and then.
fn entry<T, K: Ord>(v: &mut Vec<T>, k: K, key: impl Fn(&T) -> K, new: impl FnOnce() -> T) -> &mut T {
    let i = match v.binary_search_by(|x| key(x).cmp(&k)) {
        Ok(i) => i,
        Err(i) => {
            v.reserve_exact(1);
            v.insert(i, new());
            i
        }
    };
    &mut v[i]
}

impl Past {
    /// Intervals summed.
    pub fn len(&self) -> usize {
        self.intervals.iter().map(|h| h.1 as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    /// Heap bytes, from capacities.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self
                .buckets
                .iter()
                .map(|b| {
                    b.sums.capacity() * std::mem::size_of::<Sum>() + b.hours.capacity() * std::mem::size_of::<Hour>()
                })
                .sum::<usize>()
            + self.intervals.capacity() * std::mem::size_of::<(u32, u32)>()
    }

    /// Sums held.
    pub fn sums(&self) -> usize {
        self.buckets.iter().map(|b| b.sums.len()).sum()
    }

    /// Adds `iv` (position `seq` in its history) to the sums, its counts weighted by
    /// `decay`; returns the sums it touched (the work it took). A draining interval never
    /// counts ([`super::interval::draining`]) and is only counted as an interval.
    pub fn add(&mut self, iv: &Interval, seq: u64, decay: &Decay, objectives: &[f64], fit: &Fit) -> u64 {
        let hour = (iv.t_ms.max(0) / HOUR_MS) as u32;
        entry(&mut self.intervals, hour, |h| h.0, || (hour, 0)).1 += 1;
        if super::interval::draining(iv) {
            return 1;
        }
        let (prompt, output) = (bucket(iv.mean_prompt_tokens), bucket(iv.mean_output_tokens));
        let b = entry(
            &mut self.buckets,
            (prompt, output),
            |b| (b.prompt, b.output),
            || Bucket { prompt, output, sums: Vec::new(), hours: Vec::new() },
        );
        let w = decay.weight(iv.t_ms);
        let class = super::cells::class_of(seq, fit) % PAST_CLASSES;
        let (rate, held) = (iv.arrival_rate as f64, iv.held_rate as f64);
        let mut work = 1;
        for (k, j) in iv.slos.iter().enumerate().take(objectives.len().min(MAX_SLOS)) {
            if !j.judged() {
                continue;
            }
            let total = j.total as f64 * w;
            let h = entry(
                &mut b.hours,
                (hour, k as u8),
                |h| (h.hour, h.slo),
                || Hour { hour, slo: k as u8, used: 0, inexact: 0, weight: 0.0, weighted_s: 0.0 },
            );
            h.used += 1;
            h.inexact += u32::from(!j.exact);
            h.weight += total;
            h.weighted_s += total * (iv.t_ms - decay.ref_ms) as f64 / 1000.0;
            if cell_of(rate, fit).is_none() {
                continue;
            }
            for (end, good) in [(0, j.good_lower), (1, j.good_upper)] {
                let good = (good as f64 * w).clamp(0.0, total);
                let mut add = |table: usize, at: f64| {
                    let Some(c) = cell_of(at, fit) else { return };
                    let bin = c.div_euclid(fit.phases() as i32);
                    let s = entry(
                        &mut b.sums,
                        sum_key(k, end, table, bin, class),
                        |s| s.key,
                        || Sum {
                            key: sum_key(k, end, table, bin, class),
                            hour,
                            total: 0.0,
                            good: 0.0,
                            rate_total: 0.0,
                        },
                    );
                    s.hour = hour;
                    s.total += total as f32;
                    s.good += good as f32;
                    s.rate_total += (at * total) as f32;
                    work += 1;
                };
                if good >= objectives[k] * total && held.is_finite() && held > 0.0 && held < rate {
                    for l in 0..PAST_LEVELS {
                        add(1 + l, rate - (l as f64 + 0.5) / PAST_LEVELS as f64 * (rate - held));
                    }
                } else {
                    add(0, rate);
                }
            }
        }
        work
    }

    /// Drops what is older than `max_age_ms` before `now_ms` (to within the hour); returns
    /// the entries visited.
    pub fn expire(&mut self, now_ms: i64, max_age_ms: i64) -> u64 {
        let Some(&(oldest, _)) = self.intervals.first() else { return 0 };
        // The hours that end before the bound: an hour is dropped once all of it is older.
        let keep_from = ((now_ms - max_age_ms).max(0) / HOUR_MS) as u32;
        if oldest >= keep_from {
            return 0;
        }
        let mut visited = self.intervals.len();
        self.intervals.retain(|h| h.0 >= keep_from);
        for b in &mut self.buckets {
            visited += b.sums.len() + b.hours.len();
            b.sums.retain(|s| s.hour >= keep_from);
            b.hours.retain(|h| h.hour >= keep_from);
            b.sums.shrink_to_fit();
            b.hours.shrink_to_fit();
        }
        self.buckets.retain(|b| !b.hours.is_empty() || !b.sums.is_empty());
        self.buckets.shrink_to_fit();
        self.intervals.shrink_to_fit();
        visited as u64
    }

    /// Multiplies every sum by `f`, the reference having moved `shift_s` seconds later.
    pub fn rescale(&mut self, f: f64, shift_s: f64) {
        for b in &mut self.buckets {
            for s in &mut b.sums {
                s.total = (s.total as f64 * f) as f32;
                s.good = (s.good as f64 * f) as f32;
                s.rate_total = (s.rate_total as f64 * f) as f32;
            }
            for h in &mut b.hours {
                h.weighted_s = f * (h.weighted_s - h.weight * shift_s);
                h.weight *= f;
            }
        }
    }

    /// The buckets of the workload `signature`.
    fn current(&self, signature: Signature) -> impl Iterator<Item = &Bucket> {
        self.buckets.iter().filter(move |b| same_workload(signature, length(b.prompt), length(b.output)))
    }

    /// SLO `k`'s counts over the buckets of the workload `signature`.
    pub fn counts(&self, k: usize, signature: Signature) -> Counts {
        let mut c = Counts::default();
        for h in self.current(signature).flat_map(|b| &b.hours).filter(|h| h.slo as usize == k) {
            c.used += h.used as usize;
            c.inexact += h.inexact as usize;
            c.weight += h.weight;
            c.weighted_s += h.weighted_s;
        }
        c
    }

    /// Adds SLO `k`'s sums of the workload `signature` to `lower` and `upper`: each at the
    /// fine cell of its mean rate, in its class; returns the sums read.
    pub fn add_to(&self, k: usize, signature: Signature, fit: &Fit, lower: &mut Tables, upper: &mut Tables) -> u64 {
        let mut read = 0;
        for s in self.current(signature).flat_map(|b| &b.sums) {
            let (slo, end, table, _, class) = unkey(s.key);
            if slo != k || s.total <= 0.0 {
                continue;
            }
            let tables = if end == 0 { &mut *lower } else { &mut *upper };
            let rate = s.rate_total as f64 / s.total as f64;
            let Some(c) = cell_of(rate, fit) else { continue };
            let stats = Stats { total: s.total as f64, good: s.good as f64, rate_total: s.rate_total as f64 };
            if tables.past.len() < PAST_LEVELS {
                tables.past.resize_with(PAST_LEVELS, Default::default);
            }
            match table {
                0 => tables.still.push(key(c, class), stats),
                l => tables.past[l - 1].push(key(c, class), stats),
            }
            read += 1;
        }
        read
    }
}

/// The level of the older intervals' sums that a draw at settling level `level` (of
/// `fit.settle_levels`) reads: the one whose part of 0 to 1 holds the level's share.
pub fn past_level(level: usize, fit: &Fit) -> usize {
    ((settle_share(level, fit) * PAST_LEVELS as f64) as usize).min(PAST_LEVELS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_order_and_round_trip() {
        for (slo, end, table, bin, class) in [(0, 0, 0, -40, 0), (3, 1, 4, 120, 3), (63, 1, 15, 32_767, 7)] {
            assert_eq!(unkey(sum_key(slo, end, table, bin, class)), (slo, end, table, bin, class));
        }
        assert!(sum_key(0, 0, 0, 5, 3) < sum_key(0, 0, 0, 6, 0), "by bin, then class");
        assert!(sum_key(0, 0, 1, -100, 0) > sum_key(0, 0, 0, 100, 0), "by table, then bin");
    }

    #[test]
    fn buckets_are_an_eighth_of_an_octave() {
        assert_eq!(bucket(400.0), bucket(410.0));
        assert_ne!(bucket(400.0), bucket(480.0));
        assert!((length(bucket(400.0)) / 400.0 - 1.0).abs() < 0.1);
        assert!(length(bucket(f32::NAN)).is_nan());
    }
}
