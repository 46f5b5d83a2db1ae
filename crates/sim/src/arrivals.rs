//! The open-loop workload: when requests arrive and what they ask for.
//!
//! Arrivals are a non-homogeneous Poisson process drawn by thinning (Lewis–Shedler), so a
//! ramp or a burst is exact rather than stepped. Each request gets a log-normal prompt
//! length and a log-normal (heavy-tailed) output length capped by `max_tokens`, and maybe a
//! time after which its client gives up. All draws come from one seeded ChaCha stream.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};

use super::config::{Arrivals, Pattern, SimConfig, Workload};
use super::event::FinishReason;

/// What one request asks for, fixed at arrival.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub id: u64,
    /// Frontend arrival, virtual seconds since start.
    pub arrival: f64,
    pub prompt: u32,
    /// Tokens it will generate unless aborted.
    pub output: u32,
    /// How it finishes once `output` tokens are out: `length` when `max_tokens` cut it,
    /// else `stop`; an injected fault (client requests only) ends it with `error` or `abort`.
    pub end: FinishReason,
    pub max_tokens: u32,
    /// Prompt tokens served from the prefix cache when first scheduled.
    pub prefix_hit: u32,
    /// Virtual time at which the client gives up, if it ever does.
    pub abort_at: Option<f64>,
}

pub struct ArrivalGen {
    arrivals: Arrivals,
    workload: Workload,
    max_model_len: u32,
    block_size: u32,
    rng: ChaCha8Rng,
    prompt: LogNormal<f64>,
    output: LogNormal<f64>,
    next: Option<RequestSpec>,
    clock: f64,
    next_id: u64,
}

impl ArrivalGen {
    pub fn new(c: &SimConfig) -> ArrivalGen {
        let w = &c.workload;
        // Validated config: medians >= 1 and sigmas finite, so these cannot fail; fall back
        // to a point mass rather than panic if they ever did.
        let ln = |median: f64, sigma: f64| {
            LogNormal::new(median.ln(), sigma).unwrap_or_else(|_| LogNormal::new(0.0, 0.0).expect("unit lognormal"))
        };
        let mut g = ArrivalGen {
            arrivals: c.arrivals.clone(),
            workload: w.clone(),
            max_model_len: c.engine.max_model_len,
            block_size: c.engine.block_size,
            rng: ChaCha8Rng::seed_from_u64(c.seed ^ 0x5eed_a771_7a15),
            prompt: ln(w.prompt_median, w.prompt_sigma),
            output: ln(w.output_median, w.output_sigma),
            next: None,
            clock: 0.0,
            next_id: 0,
        };
        g.next = g.draw();
        g
    }

    /// The arrival time of the next request (infinite when the rate is zero forever).
    pub fn peek_time(&self) -> f64 {
        self.next.as_ref().map_or(f64::INFINITY, |r| r.arrival)
    }

    pub fn pop(&mut self) -> Option<RequestSpec> {
        let r = self.next.take();
        self.next = self.draw();
        r
    }

    /// Instantaneous arrival rate at virtual time `t`.
    pub fn rate_at(a: &Arrivals, t: f64) -> f64 {
        let phase = t.rem_euclid(a.period_s);
        match a.pattern {
            Pattern::Steady => a.rate,
            Pattern::Ramp => a.ramp_start_rate + (a.rate - a.ramp_start_rate) * phase / a.period_s,
            Pattern::Burst if phase < a.burst_length_s => a.rate + a.burst_rate,
            Pattern::Burst => a.rate,
        }
    }

    fn max_rate(a: &Arrivals) -> f64 {
        match a.pattern {
            Pattern::Steady => a.rate,
            Pattern::Ramp => a.rate.max(a.ramp_start_rate),
            Pattern::Burst => a.rate + a.burst_rate,
        }
    }

    fn draw(&mut self) -> Option<RequestSpec> {
        let lambda = Self::max_rate(&self.arrivals);
        if lambda <= 0.0 {
            return None;
        }
        let exp = Exp::new(lambda).ok()?;
        // Thinning; bounded so that a zero-rate stretch cannot spin forever.
        for _ in 0..1_000_000 {
            self.clock += exp.sample(&mut self.rng);
            let accept: f64 = self.rng.random();
            if accept * lambda <= Self::rate_at(&self.arrivals, self.clock) {
                return Some(self.request(self.clock));
            }
        }
        None
    }

    fn request(&mut self, arrival: f64) -> RequestSpec {
        let w = &self.workload;
        let id = self.next_id;
        self.next_id += 1;
        let max_prompt = self.max_model_len - w.max_tokens;
        let prompt = (self.prompt.sample(&mut self.rng).round() as u32).clamp(1, max_prompt.max(1));
        let sampled = (self.output.sample(&mut self.rng).round() as u32).max(1);
        let end = if sampled >= w.max_tokens { FinishReason::Length } else { FinishReason::Stop };
        let output = sampled.min(w.max_tokens);
        let shared: f64 = self.rng.random();
        let prefix_hit = if shared < w.shared_prefix_fraction {
            // Only whole blocks hit, and the last prompt token is always computed.
            let cap = prompt.saturating_sub(1).min(w.shared_prefix_tokens);
            cap / self.block_size * self.block_size
        } else {
            0
        };
        let early: f64 = self.rng.random();
        let patience: f64 = self.rng.random();
        let mut abort_at = (w.client_timeout_s > 0.0).then_some(arrival + w.client_timeout_s);
        if early < w.abort_fraction {
            let after = w.abort_after_min_s + patience * (w.abort_after_max_s - w.abort_after_min_s);
            abort_at = Some(abort_at.map_or(arrival + after, |t| t.min(arrival + after)));
        }
        RequestSpec { id, arrival, prompt, output, end, max_tokens: w.max_tokens, prefix_hit, abort_at }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Profile;

    #[test]
    fn ramp_and_bursts_loop_with_their_period() {
        for p in [Profile::Ramp, Profile::Burst] {
            let a = SimConfig::profile(p).arrivals;
            for x in [0.0, 1.0, 4.9, 17.5, a.period_s * 0.99] {
                let r = ArrivalGen::rate_at(&a, x);
                let later = ArrivalGen::rate_at(&a, x + 3.0 * a.period_s);
                assert!((r - later).abs() < 1e-9, "{p:?} at {x}: {r} vs {later}");
            }
        }
        let ramp = SimConfig::profile(Profile::Ramp).arrivals;
        assert_eq!(ArrivalGen::rate_at(&ramp, 0.0), ramp.ramp_start_rate);
        assert!(ArrivalGen::rate_at(&ramp, ramp.period_s * 0.999) > 0.99 * ramp.rate);
    }

    #[test]
    fn ramp_rate_rises_and_count_matches_integral() {
        let c = SimConfig::profile(Profile::Ramp);
        let mut g = ArrivalGen::new(&c);
        let mut first_half = 0;
        let mut second_half = 0;
        while g.peek_time() < c.arrivals.period_s {
            let r = g.pop().unwrap();
            assert!(r.prompt >= 1 && r.output >= 1 && r.output <= r.max_tokens);
            if r.arrival < c.arrivals.period_s / 2.0 {
                first_half += 1;
            } else {
                second_half += 1;
            }
        }
        // Expected counts: integral of the linear rate over each half.
        let a = &c.arrivals;
        let mid = (a.ramp_start_rate + a.rate) / 2.0;
        let e1 = (a.ramp_start_rate + mid) / 2.0 * a.period_s / 2.0;
        let e2 = (mid + a.rate) / 2.0 * a.period_s / 2.0;
        assert!((first_half as f64 - e1).abs() < 5.0 * e1.sqrt(), "{first_half} vs {e1}");
        assert!((second_half as f64 - e2).abs() < 5.0 * e2.sqrt(), "{second_half} vs {e2}");
    }
}
