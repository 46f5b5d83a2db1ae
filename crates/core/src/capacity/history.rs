//! One target and model's history of evaluation intervals (docs/capacity.md#history):
//! compact, bounded, decaying, and reset when the engine restarts or its config changes.
//!
//! The bound: at most [`MAX_INTERVALS`] intervals and none older than [`MAX_AGE`]. An
//! interval is 48 bytes plus 16 per SLO, so a day at the 15 s spacing with one SLO is
//! 5,760 × 64 B = 360 KiB per target and model.

use std::collections::VecDeque;
use std::time::Duration;

/// Most intervals kept: a day at [`super::SPACING`].
pub const MAX_INTERVALS: usize = 5_760;
/// Intervals older than this are dropped.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3_600);
/// Older intervals weigh less: half as much per hour, so a knee seen this morning still
/// counts in the afternoon but today's engine outweighs yesterday's.
pub const HALF_LIFE: Duration = Duration::from_secs(3_600);
/// Intervals whose mean prompt and output lengths are within this share of the current
/// ones (the median of the last eight minutes) count as the same workload; capacity in
/// requests/s depends on the mix. Wide, because the mix of *finished* requests moves with
/// load (long requests time out under overload): at 25 % the overloaded intervals were
/// another workload to the calm ones (docs/accuracy.md#capacity).
pub const SIGNATURE_TOLERANCE: f64 = 0.5;

/// The settling span: how long (in intervals, three minutes) the engine must have held a
/// rate before passing at it proves the rate sustainable. On a ramp the queue near the knee
/// builds for minutes, so passing while the rate rose says little about the rate it
/// reached (docs/capacity.md#slo-capacity). Chosen on seeds 1 and 2 of the ground-truth
/// check among one, two, three and four minutes (docs/accuracy.md#capacity).
pub const SETTLE_INTERVALS: usize = 12;

/// One SLO over one interval: requests judged, and how many met it. The two ends differ
/// only when attainment is a histogram bracket; weighted by the share of the window that
/// is new since the previous interval, so a request is counted once.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Judged {
    pub total: f32,
    pub good_lower: f32,
    pub good_upper: f32,
    /// From requests (tap or spans) rather than histograms.
    pub exact: bool,
}

impl Judged {
    fn add(&mut self, o: Judged) {
        self.total += o.total;
        self.good_lower += o.good_lower;
        self.good_upper += o.good_upper;
    }
}

/// What one evaluation interval saw. Unknown values are NaN.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub t_ms: i64,
    /// Arrivals per second: completions plus the change in requests in flight.
    pub arrival_rate: f32,
    pub finished_rate: f32,
    /// The lowest arrival rate over the settling span that ends with this interval
    /// ([`SETTLE_INTERVALS`]): the rate the engine had held at least that long.
    pub held_rate: f32,
    /// Requests waiting and running at the interval's last scrape.
    pub waiting: f32,
    pub running: f32,
    /// Highest KV-cache usage in the window (0–1).
    pub kv_usage: f32,
    pub preemptions_per_second: f32,
    pub ttft_p99: f32,
    /// The workload signature: mean prompt and output tokens of finished requests.
    pub mean_prompt_tokens: f32,
    pub mean_output_tokens: f32,
    /// One per SLO, in the order of the book's SLOs for this target and model.
    pub slos: Box<[Judged]>,
}

impl Interval {
    /// An interval at `t_ms` with nothing measured.
    pub fn empty(t_ms: i64) -> Interval {
        Interval {
            t_ms,
            arrival_rate: f32::NAN,
            finished_rate: f32::NAN,
            held_rate: f32::NAN,
            waiting: f32::NAN,
            running: f32::NAN,
            kv_usage: f32::NAN,
            preemptions_per_second: f32::NAN,
            ttft_p99: f32::NAN,
            mean_prompt_tokens: f32::NAN,
            mean_output_tokens: f32::NAN,
            slos: Box::default(),
        }
    }
}

/// What identifies one run of an engine: a change in any part starts a new history.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
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

/// The intervals of one target and model since its engine's current run began.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub identity: Identity,
    intervals: VecDeque<Interval>,
    /// Times this history was reset because the engine restarted or changed config.
    pub resets: u64,
}

impl History {
    /// Appends `iv`, first resetting on a new engine identity and dropping what is over
    /// the bound.
    pub fn push(&mut self, identity: Identity, mut iv: Interval) {
        if self.identity.changed(&identity) {
            self.intervals.clear();
            self.resets += 1;
        }
        self.identity = Identity {
            process_start: identity.process_start.or(self.identity.process_start),
            kv_capacity_tokens: identity.kv_capacity_tokens.or(self.identity.kv_capacity_tokens),
        };
        let oldest = iv.t_ms - MAX_AGE.as_millis() as i64;
        let before = self.intervals.iter().rev().take(SETTLE_INTERVALS - 1).map(|i| i.arrival_rate);
        let held = before.chain([iv.arrival_rate]).filter(|r| r.is_finite()).fold(f32::INFINITY, f32::min);
        iv.held_rate = if held.is_finite() { held } else { f32::NAN };
        self.intervals.push_back(iv);
        while self.intervals.len() > MAX_INTERVALS || self.intervals.front().is_some_and(|f| f.t_ms < oldest) {
            self.intervals.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.intervals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.intervals.is_empty()
    }

    pub fn last(&self) -> Option<&Interval> {
        self.intervals.back()
    }

    /// Adds `j` to SLO `k` of the first interval at or after `t_ms`; `false` (and
    /// nothing added) when there is none yet.
    pub fn attribute(&mut self, t_ms: i64, k: usize, j: Judged) -> bool {
        let i = self.intervals.partition_point(|i| i.t_ms < t_ms);
        let Some(iv) = self.intervals.get_mut(i) else { return false };
        if let Some(s) = iv.slos.get_mut(k) {
            s.add(j);
        }
        true
    }

    /// The newest `n` intervals, oldest first.
    pub fn recent(&self, n: usize) -> Vec<&Interval> {
        self.intervals.iter().skip(self.intervals.len().saturating_sub(n)).collect()
    }

    /// The intervals with the current workload signature (the median of the newest `n`),
    /// each with its decay weight at `now_ms`.
    pub fn same_workload(&self, now_ms: i64, n: usize) -> Vec<(&Interval, f64)> {
        let median_of = |f: fn(&Interval) -> f32| {
            let mut v: Vec<f64> = self.recent(n).iter().map(|i| f(i) as f64).filter(|x| x.is_finite()).collect();
            super::stats::median(&mut v)
        };
        let (isl, osl) = (median_of(|i| i.mean_prompt_tokens), median_of(|i| i.mean_output_tokens));
        // An unknown value (no finished requests, or an output length masked by aborts)
        // rules nothing out.
        let near = |now: Option<f64>, x: f32| match now {
            Some(now) if now > 0.0 && x.is_finite() => (x as f64 - now).abs() <= SIGNATURE_TOLERANCE * now,
            _ => true,
        };
        let half_life_ms = HALF_LIFE.as_millis() as f64;
        self.intervals
            .iter()
            .filter(|i| near(isl, i.mean_prompt_tokens) && near(osl, i.mean_output_tokens))
            .map(|i| (i, 0.5f64.powf((now_ms - i.t_ms).max(0) as f64 / half_life_ms)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(t_ms: i64, isl: f32) -> Interval {
        Interval { mean_prompt_tokens: isl, mean_output_tokens: 100.0, ..Interval::empty(t_ms) }
    }

    #[test]
    fn bounded_by_count_and_age() {
        let mut h = History::default();
        for k in 0..(MAX_INTERVALS as i64 + 10) {
            h.push(Identity::default(), iv(k * 15_000, 400.0));
        }
        assert_eq!(h.len(), MAX_INTERVALS);
        h.push(Identity::default(), iv(10 * MAX_AGE.as_millis() as i64, 400.0));
        assert_eq!(h.len(), 1, "a day later everything before is gone");
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
    fn only_the_current_workload_counts_and_older_weighs_less() {
        let mut h = History::default();
        for k in 0..10 {
            h.push(Identity::default(), iv(k * 15_000, 2000.0));
        }
        for k in 10..20 {
            h.push(Identity::default(), iv(k * 15_000, 400.0 + k as f32));
        }
        let same = h.same_workload(19 * 15_000, 8);
        assert_eq!(same.len(), 10, "the long-prompt intervals are another workload");
        assert!(same[0].1 < same[9].1 && same[9].1 == 1.0);
        let an_hour_later = h.same_workload(19 * 15_000 + 3_600_000, 8);
        assert!((an_hour_later[9].1 - 0.5).abs() < 1e-12);
    }
}
