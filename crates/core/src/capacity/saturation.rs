//! The model-free saturation signal (docs/capacity.md#saturation): the queue grows and
//! completions stop following arrivals, corroborated by KV usage, preemptions and rising
//! TTFT. It is the knee itself, seen as it starts, before an error budget burns.

use serde::Serialize;

use super::interval::Interval;
pub use super::interval::LAG_SHARE;
use super::stats::{mann_kendall, theil_sen};
pub use crate::report::capacity::Reason;

/// Intervals the trend tests read: 8 intervals of 15 s are two minutes.
pub const TREND_INTERVALS: usize = 8;
/// Significance of the trend tests.
pub const TREND_P: f64 = 0.05;
/// Consecutive intervals a new state must hold before it is shown (hysteresis): entering
/// takes two, leaving three, so one noisy interval neither raises nor clears it.
pub const ENTER_AFTER: u32 = 2;
pub const LEAVE_AFTER: u32 = 3;

/// Whether `ys` (one per interval, oldest first) rises significantly.
pub fn rising(ys: &[f64]) -> bool {
    if ys.len() < 4 || ys.iter().any(|y| !y.is_finite()) {
        return false;
    }
    let xs: Vec<f64> = (0..ys.len()).map(|i| i as f64).collect();
    theil_sen(&xs, ys).is_some_and(|s| s > 0.0) && mann_kendall(ys).p_increasing < TREND_P
}

/// What the last intervals show, before hysteresis: the reasons that hold now.
pub fn reasons(recent: &[&Interval], kv_critical: f64) -> Vec<Reason> {
    let mut out = Vec::new();
    if recent.len() < 4 {
        return out;
    }
    let waiting: Vec<f64> = recent.iter().map(|i| i.waiting as f64).collect();
    let mean_waiting = waiting.iter().sum::<f64>() / waiting.len() as f64;
    if mean_waiting >= 1.0 && rising(&waiting) {
        out.push(Reason::QueueGrowing);
    }
    let arrivals: f64 = recent.iter().map(|i| i.arrival_rate as f64).sum();
    let finished: f64 = recent.iter().map(|i| i.finished_rate as f64).sum();
    if arrivals > 0.0 && finished < (1.0 - LAG_SHARE) * arrivals {
        out.push(Reason::CompletionsLag);
    }
    if recent.last().is_some_and(|i| i.kv_usage >= kv_critical as f32) {
        out.push(Reason::KvCritical);
    }
    if recent.iter().rev().take(2).any(|i| i.preemptions_per_second > 0.0) {
        out.push(Reason::Preemptions);
    }
    let ttft: Vec<f64> = recent.iter().map(|i| i.ttft_p99 as f64).filter(|v| v.is_finite()).collect();
    if ttft.len() == recent.len() && rising(&ttft) {
        out.push(Reason::TtftRising);
    }
    out
}

/// The signal itself: the queue grows *and* completions lag arrivals.
pub fn signal(reasons: &[Reason]) -> bool {
    reasons.contains(&Reason::QueueGrowing) && reasons.contains(&Reason::CompletionsLag)
}

/// The saturation state of one target and model, with hysteresis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Saturation {
    pub saturated: bool,
    /// The reasons behind the state while saturated; empty otherwise.
    pub reasons: Vec<Reason>,
    streak: u32,
}

impl Saturation {
    /// Takes one interval's reasons.
    pub fn update(&mut self, now: Vec<Reason>) {
        let on = signal(&now);
        if on == self.saturated {
            self.streak = 0;
        } else {
            self.streak += 1;
            if self.streak >= if on { ENTER_AFTER } else { LEAVE_AFTER } {
                self.saturated = on;
                self.streak = 0;
            }
        }
        if self.saturated {
            // While saturated the evidence of the last interval shows, whatever it is.
            self.reasons = if now.is_empty() { std::mem::take(&mut self.reasons) } else { now };
        } else {
            self.reasons.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(waiting: f32, arrival: f32, finished: f32) -> Interval {
        Interval { waiting, arrival_rate: arrival, finished_rate: finished, ..Interval::empty(0) }
    }

    #[test]
    fn a_growing_queue_with_lagging_completions_is_the_signal() {
        let grow: Vec<Interval> = (0..8).map(|i| iv(2.0 + 3.0 * i as f32, 8.0, 5.0)).collect();
        let r = reasons(&grow.iter().collect::<Vec<_>>(), 0.9);
        assert!(signal(&r), "{r:?}");
        // A steady queue with completions matching arrivals is not.
        let calm: Vec<Interval> = (0..8).map(|i| iv(if i % 2 == 0 { 1.0 } else { 2.0 }, 3.0, 3.0)).collect();
        assert!(reasons(&calm.iter().collect::<Vec<_>>(), 0.9).is_empty());
        // A queue that grows while completions keep up is a burst being absorbed, not saturation.
        let absorbing: Vec<Interval> = (0..8).map(|i| iv(1.0 + i as f32, 5.0, 5.0)).collect();
        let r = reasons(&absorbing.iter().collect::<Vec<_>>(), 0.9);
        assert_eq!(r, [Reason::QueueGrowing]);
        assert!(!signal(&r));
    }

    #[test]
    fn corroborating_reasons_come_along() {
        let mut v: Vec<Interval> = (0..8).map(|i| iv(2.0 + 3.0 * i as f32, 8.0, 5.0)).collect();
        for (i, x) in v.iter_mut().enumerate() {
            x.kv_usage = 0.95;
            x.preemptions_per_second = 0.5;
            x.ttft_p99 = 0.1 * (i + 1) as f32;
        }
        let r = reasons(&v.iter().collect::<Vec<_>>(), 0.9);
        assert_eq!(r, Reason::ALL);
    }

    #[test]
    fn hysteresis_needs_two_to_enter_and_three_to_leave() {
        let on = || vec![Reason::QueueGrowing, Reason::CompletionsLag];
        let mut s = Saturation::default();
        s.update(on());
        assert!(!s.saturated, "one interval is not enough");
        s.update(on());
        assert!(s.saturated && s.reasons == on());
        s.update(vec![]);
        s.update(vec![]);
        assert!(s.saturated, "two quiet intervals do not clear it");
        s.update(on());
        s.update(vec![]);
        s.update(vec![]);
        assert!(s.saturated, "the streak restarts");
        s.update(vec![]);
        assert!(!s.saturated && s.reasons.is_empty());
    }
}
