//! One target and model's history of evaluation intervals (docs/capacity.md#history):
//! compact, bounded, decaying, and reset when the engine restarts or its config changes.
//!
//! The newest [`RECENT`] intervals are kept one by one: the workload signature, the
//! settling span, the saturation signal and requests attributed to the interval of their
//! arrival read them, and an estimate bins them as they are. Older ones are kept only as
//! the sums an estimate reads of them ([`Past`]). The bound: none older than [`MAX_AGE`]
//! (the older sums to within the hour). A day with one SLO is about 6 KiB of recent
//! intervals and a few thousand sums of 20 bytes (docs/footprint.md#capacity-at-steady-state).

use std::collections::VecDeque;
use std::time::Duration;

use super::cells::{Decay, Share, Tables, class_of, shares};
use super::fit::Fit;
pub use super::interval::{HALF_LIFE, Interval, Judged, SIGNATURE_TOLERANCE, Signature};
use super::interval::{draining, same_workload};
use super::past::Past;

/// Intervals kept one by one: fifteen minutes at [`super::SPACING`]. Twice the
/// signature's span; a request is attributed to the interval of its arrival up to this far
/// back (a shorter wait than half the shortest window is the rule: that interval is there).
pub const RECENT: usize = 60;
/// Intervals older than this are dropped.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3_600);

/// The settling span: how long (in intervals, three minutes) the engine must have held a
/// rate before passing at it proves the rate sustainable. On a ramp the queue near the knee
/// builds for minutes, so passing while the rate rose says little about the rate it
/// reached (docs/capacity.md#slo-capacity). Chosen on seeds 1 and 2 of the ground-truth
/// check among one, two, three and four minutes (docs/accuracy.md#capacity).
pub const SETTLE_INTERVALS: usize = 12;

/// The newest intervals whose median is the workload signature: eight minutes.
pub const SIGNATURE_SPAN: usize = 4 * super::saturation::TREND_INTERVALS;

const _: () = assert!(RECENT >= SIGNATURE_SPAN && RECENT >= SETTLE_INTERVALS);

/// What identifies one run of an engine: a change in any part starts a new history.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// `process_start_time_seconds`.
    pub process_start: Option<f64>,
    /// KV capacity in tokens (from the engine's cache config): a config change moves it.
    pub kv_capacity_tokens: Option<f64>,
}

impl Identity {
    /// Whether `next` is another run than `self`. A value that disappears is not a change
    /// (one scrape may lack it); one that appears or differs is.
    pub fn changed(&self, next: &Identity) -> bool {
        let differs = |a: Option<f64>, b: Option<f64>| matches!((a, b), (Some(x), Some(y)) if x != y);
        differs(self.process_start, next.process_start) || differs(self.kv_capacity_tokens, next.kv_capacity_tokens)
    }
}

/// One SLO's intervals that count (the current workload's, not draining): how many, how
/// many judged from histogram brackets, and the sums their mean age comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Used {
    pub used: usize,
    pub inexact: usize,
    /// Σ decay weight × requests, and the same times the interval's time after the
    /// decay's reference (seconds): the request-weighted mean age.
    weight: f64,
    weighted_s: f64,
}

/// The intervals of one target and model since its engine's current run began: the
/// recent ones, and the sums of the older ones.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct History {
    pub identity: Identity,
    /// The newest intervals, at most [`RECENT`], oldest first.
    recent: VecDeque<Interval>,
    /// The position in the history of the newest interval, plus one: the bootstrap block
    /// of each follows from it.
    next_seq: u64,
    objectives: Vec<f64>,
    fit: Fit,
    decay: Option<Decay>,
    past: Past,
    /// Times this history was reset because the engine restarted or changed config.
    pub resets: u64,
    /// Intervals added, sums touched and read, shares made in this process: the work its
    /// updates and estimates did, which must not grow with the history's length
    /// (`work_tests.rs`); not saved.
    #[serde(skip)]
    pub work: u64,
}

impl History {
    /// An empty history for SLOs of these objectives.
    pub fn new(objectives: Vec<f64>, fit: Fit) -> History {
        History { objectives, fit, ..History::default() }
    }

    /// The objectives of the SLOs judged, in order.
    pub fn objectives(&self) -> &[f64] {
        &self.objectives
    }

    /// Whether this history was kept for SLOs of `objectives` with the estimator `fit`.
    pub fn matches(&self, objectives: &[f64], fit: &Fit) -> bool {
        self.objectives == objectives && self.fit == *fit
    }

    /// Appends `iv`, first resetting on a new engine identity; the oldest recent interval
    /// passes to the sums, and what is older than [`MAX_AGE`] is dropped.
    pub fn push(&mut self, identity: Identity, mut iv: Interval) {
        if self.identity.changed(&identity) {
            self.recent.clear();
            self.past = Past::default();
            self.decay = None;
            self.resets += 1;
        }
        self.identity = Identity {
            process_start: identity.process_start.or(self.identity.process_start),
            kv_capacity_tokens: identity.kv_capacity_tokens.or(self.identity.kv_capacity_tokens),
        };
        let before = self.recent.range(self.recent.len().saturating_sub(SETTLE_INTERVALS - 1)..);
        let held = before
            .map(|i| i.arrival_rate)
            .chain([iv.arrival_rate])
            .filter(|r| r.is_finite())
            .fold(f32::INFINITY, f32::min);
        iv.held_rate = if held.is_finite() { held } else { f32::NAN };
        let half_life_ms = HALF_LIFE.as_millis() as f64;
        match self.decay {
            None => self.decay = Some(Decay::new(iv.t_ms, half_life_ms)),
            Some(d) if d.due(iv.t_ms) => {
                self.past.rescale(d.scale(iv.t_ms), (iv.t_ms - d.ref_ms) as f64 / 1000.0);
                self.decay = Some(Decay::new(iv.t_ms, half_life_ms));
                self.work += self.past.sums() as u64;
            }
            Some(_) => {}
        }
        let max_age_ms = MAX_AGE.as_millis() as i64;
        let oldest = iv.t_ms - max_age_ms;
        if self.recent.capacity() < RECENT + 1 {
            self.recent.reserve_exact(RECENT + 1 - self.recent.len());
        }
        self.recent.push_back(iv);
        self.next_seq += 1;
        while self.recent.len() > RECENT || self.recent.front().is_some_and(|f| f.t_ms < oldest) {
            let Some(old) = self.recent.pop_front() else { break };
            let seq = self.next_seq - self.recent.len() as u64 - 1;
            if old.t_ms >= oldest
                && let Some(d) = self.decay
            {
                self.work += self.past.add(&old, seq, &d, &self.objectives, &self.fit);
            }
        }
        let now = self.recent.back().map_or(0, |i| i.t_ms);
        self.work += 1 + self.past.expire(now, max_age_ms);
    }

    /// Heap bytes of the intervals and sums, from capacities.
    pub fn heap_bytes(&self) -> usize {
        let boxed: usize = self.recent.iter().map(|i| std::mem::size_of_val(&*i.slos)).sum();
        self.recent.capacity() * std::mem::size_of::<Interval>()
            + boxed
            + self.objectives.capacity() * std::mem::size_of::<f64>()
            + self.past.heap_bytes()
    }

    /// Intervals in the history, recent and summed.
    pub fn len(&self) -> usize {
        self.recent.len() + self.past.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    /// Sums held of the older intervals.
    pub fn sums(&self) -> usize {
        self.past.sums()
    }

    pub fn last(&self) -> Option<&Interval> {
        self.recent.back()
    }

    /// The position in the history of the `i`-th recent interval.
    fn seq(&self, i: usize) -> u64 {
        self.next_seq - (self.recent.len() - i) as u64
    }

    /// Adds `j` to SLO `k` of the first recent interval at or after `t_ms` (the oldest
    /// recent one for a request older than them all); `false` (and nothing added) when
    /// there is none yet.
    pub fn attribute(&mut self, t_ms: i64, k: usize, j: Judged) -> bool {
        let i = self.recent.partition_point(|i| i.t_ms < t_ms);
        let Some(iv) = self.recent.get_mut(i) else { return false };
        if let Some(s) = iv.slos.get_mut(k) {
            s.add(j);
        }
        true
    }

    /// The newest `n` intervals, oldest first.
    pub fn recent(&self, n: usize) -> Vec<&Interval> {
        self.recent.range(self.recent.len().saturating_sub(n)..).collect()
    }

    /// The current workload signature: the median prompt and output length of the newest
    /// `n` intervals.
    pub fn signature(&self, n: usize) -> Signature {
        let median_of = |f: fn(&Interval) -> f32| {
            let mut v: Vec<f64> = self.recent(n).iter().map(|i| f(i) as f64).filter(|x| x.is_finite()).collect();
            super::stats::median(&mut v)
        };
        (median_of(|i| i.mean_prompt_tokens), median_of(|i| i.mean_output_tokens))
    }

    /// Whether `iv` counts under `signature`: of the same workload, and not draining.
    fn counts(iv: &Interval, signature: Signature) -> bool {
        same_workload(signature, iv.mean_prompt_tokens, iv.mean_output_tokens) && !draining(iv)
    }

    /// The factor that turns the sums into counts decayed to `now_ms`.
    pub fn scale(&self, now_ms: i64) -> f64 {
        self.decay.map_or(1.0, |d| d.scale(now_ms))
    }

    /// SLO `k`'s intervals that count under the current signature.
    pub fn used(&self, k: usize) -> Used {
        let signature = self.signature(SIGNATURE_SPAN);
        let past = self.past.counts(k, signature);
        let mut u = Used { used: past.used, inexact: past.inexact, weight: past.weight, weighted_s: past.weighted_s };
        let Some(d) = self.decay else { return u };
        for iv in self.recent.iter().filter(|i| Self::counts(i, signature)) {
            let Some(j) = iv.slos.get(k).filter(|j| j.judged()) else { continue };
            let total = j.total as f64 * d.weight(iv.t_ms);
            u.used += 1;
            u.inexact += usize::from(!j.exact);
            u.weight += total;
            u.weighted_s += total * (iv.t_ms - d.ref_ms) as f64 / 1000.0;
        }
        u
    }

    /// The request-weighted mean age of `u`'s intervals at `now_ms`, seconds.
    pub fn age_seconds(&self, u: &Used, now_ms: i64) -> Option<f64> {
        let d = self.decay?;
        (u.weight > 0.0).then(|| (now_ms - d.ref_ms) as f64 / 1000.0 - u.weighted_s / u.weight)
    }

    /// SLO `k`'s tables of both attainment ends (lower, upper) for an estimate: the recent
    /// intervals that count, each at its own cells, and the older ones' sums of the
    /// current workload. Made for one estimate, and counted as work: the recent intervals'
    /// shares and the sums read.
    pub fn tables(&mut self, k: usize) -> (Tables, Tables) {
        let fit = self.fit;
        let (mut lower, mut upper) = (Tables::new(&fit), Tables::new(&fit));
        let (Some(d), Some(&objective)) = (self.decay, self.objectives.get(k)) else { return (lower, upper) };
        let signature = self.signature(SIGNATURE_SPAN);
        let mut out: Vec<Share> = Vec::new();
        let mut work = self.past.add_to(k, signature, &fit, &mut lower, &mut upper);
        for (i, iv) in self.recent.iter().enumerate() {
            work += 1;
            let Some(j) = iv.slos.get(k).filter(|j| j.judged()) else { continue };
            if !Self::counts(iv, signature) {
                continue;
            }
            let w = d.weight(iv.t_ms);
            let class = class_of(self.seq(i), &fit);
            let (rate, held, total) = (iv.arrival_rate as f64, iv.held_rate as f64, j.total as f64 * w);
            for (tables, good) in [(&mut lower, j.good_lower), (&mut upper, j.good_upper)] {
                shares(rate, held, total, good as f64 * w, class, objective, &fit, &mut out);
                tables.apply(&out);
                work += out.len() as u64;
            }
        }
        lower.settle();
        upper.settle();
        self.work += work;
        (lower, upper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(t_ms: i64, isl: f32) -> Interval {
        Interval { mean_prompt_tokens: isl, mean_output_tokens: 100.0, ..Interval::empty(t_ms) }
    }

    fn judged(n: f32) -> Box<[Judged]> {
        Box::new([Judged { total: n, good_lower: n, good_upper: n, exact: true }])
    }

    #[test]
    fn bounded_by_age_recent_one_by_one() {
        let mut h = History::new(vec![0.95], Fit::default());
        let day = MAX_AGE.as_millis() as i64 / 15_000;
        for k in 0..day + 500 {
            h.push(Identity::default(), Interval { arrival_rate: 2.0, slos: judged(10.0), ..iv(k * 15_000, 400.0) });
        }
        assert_eq!(h.recent.len(), RECENT);
        // A day, to within the hour the older sums are dropped by.
        assert!((day as usize..=day as usize + 240).contains(&h.len()), "{}", h.len());
        h.push(Identity::default(), iv(10 * MAX_AGE.as_millis() as i64, 400.0));
        assert_eq!(h.len(), 1, "a day later everything before is gone");
        assert_eq!(h.used(0).used, 0);
    }

    #[test]
    fn a_restart_or_a_config_change_resets_a_missing_value_does_not() {
        let id = |start: Option<f64>, kv: Option<f64>| Identity { process_start: start, kv_capacity_tokens: kv };
        let mut h = History::default();
        h.push(id(Some(1.0), Some(32768.0)), iv(0, 400.0));
        h.push(id(None, None), iv(15_000, 400.0));
        assert_eq!((h.len(), h.resets), (2, 0));
        h.push(id(Some(2.0), Some(32768.0)), iv(30_000, 400.0));
        assert_eq!((h.len(), h.resets), (1, 1), "restart");
        h.push(id(Some(2.0), Some(65536.0)), iv(45_000, 400.0));
        assert_eq!((h.len(), h.resets), (1, 2), "KV capacity changed");
    }

    #[test]
    fn the_held_rate_is_the_lowest_of_the_settling_span() {
        let mut h = History::default();
        for k in 0..20 {
            h.push(Identity::default(), Interval { arrival_rate: k as f32, ..iv(k * 15_000, 400.0) });
        }
        // A rising load has held only the rate it had a settling span ago.
        assert_eq!(h.last().unwrap().held_rate, (20 - SETTLE_INTERVALS) as f32);
        h.push(Identity::default(), Interval { arrival_rate: 2.0, ..iv(20 * 15_000, 400.0) });
        assert_eq!(h.last().unwrap().held_rate, 2.0, "a drop is held at once");
    }

    #[test]
    fn only_the_current_workload_counts_recent_and_summed_both_ways() {
        let at = |k: i64, isl: f32| Interval {
            arrival_rate: 2.0,
            finished_rate: 2.0,
            slos: judged(30.0),
            ..iv(k * 15_000, isl)
        };
        let mut h = History::new(vec![0.95], Fit::default());
        for k in 0..40 {
            h.push(Identity::default(), at(k, 2000.0));
        }
        assert_eq!(h.used(0).used, 40);
        // A new workload takes over the median: the old intervals stop counting, those
        // summed as those kept one by one, and count again when it returns.
        for k in 40..80 {
            h.push(Identity::default(), at(k, 400.0));
        }
        assert!(!h.past.is_empty(), "the oldest are summed");
        assert_eq!(h.used(0).used, 40, "only the 400-token intervals");
        for k in 80..120 {
            h.push(Identity::default(), at(k, 2000.0));
        }
        assert_eq!(h.used(0).used, 80);
        // The tables hold what summing the counted intervals one by one gives.
        let now = 119 * 15_000;
        let direct: f64 = (0..120)
            .filter(|k| !(40..80).contains(k))
            .map(|k| 30.0 * 0.5f64.powf((now - k * 15_000) as f64 / 3_600_000.0))
            .sum();
        let (lower, _) = h.tables(0);
        let summed: f64 = lower.still.iter().map(|c| c.1.total).sum::<f64>() * h.scale(now);
        assert!((direct - summed).abs() < 1e-6 * direct, "{direct} {summed}");
        let u = h.used(0);
        let age = h.age_seconds(&u, now).unwrap();
        assert!(age > 0.0 && age < 119.0 * 15.0, "{age}");
    }

    #[test]
    fn a_draining_interval_never_counts() {
        let mut h = History::new(vec![0.95], Fit::default());
        for k in 0..100 {
            let finished = if k % 2 == 0 { 2.0 } else { 4.0 };
            h.push(
                Identity::default(),
                Interval { arrival_rate: 2.0, finished_rate: finished, slos: judged(30.0), ..iv(k * 15_000, 400.0) },
            );
        }
        assert_eq!(h.len(), 100);
        assert_eq!(h.used(0).used, 50);
    }
}
