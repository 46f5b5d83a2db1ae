//! Requests that API clients submit in live mode: what the simulated engine makes of them.
//!
//! A client fixes the prompt length and the `max_tokens` cap; the workload's output-length
//! distribution decides where the model stops below the cap (reason `stop`), unless the
//! client asked for `ignore_eos`, which runs to the cap (reason `length`), as in vLLM.
//! Injected faults (docs/simulator.md#faults) are drawn here too. Every draw comes from a
//! seeded stream of its own, so generated load and offline runs are untouched by clients.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

use super::config::{Faults, SimConfig};
use super::event::FinishReason;

/// What a client asked for, already validated against `max_model_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientRequest {
    pub prompt: u32,
    /// The output cap: the request's `max_tokens`, or what the context leaves.
    pub max_tokens: u32,
    pub ignore_eos: bool,
}

/// A fault injected into one client request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 500 before streaming; the request never reaches the engine.
    HttpError,
    /// An in-band error event after some tokens (engine reason `error`).
    StreamError,
    /// The server drops the connection after some tokens (engine reason `abort`).
    ServerAbort,
}

impl Fault {
    /// The `fault` value in the ground truth.
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::HttpError => "http_500",
            Fault::StreamError => "stream_error",
            Fault::ServerAbort => "server_abort",
        }
    }
}

/// The engine's plan for one client request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Tokens the engine generates before the request ends.
    pub output: u32,
    pub end: FinishReason,
    pub fault: Option<Fault>,
}

pub struct ClientDraws {
    rng: ChaCha8Rng,
    output: LogNormal<f64>,
    faults: Faults,
}

impl ClientDraws {
    pub fn new(c: &SimConfig) -> ClientDraws {
        let w = &c.workload;
        let output = LogNormal::new(w.output_median.ln(), w.output_sigma)
            .unwrap_or_else(|_| LogNormal::new(0.0, 0.0).expect("unit lognormal"));
        ClientDraws { rng: ChaCha8Rng::seed_from_u64(c.seed ^ 0xc11e_47a9_1000), output, faults: c.faults.clone() }
    }

    /// Draws the output length and any fault. Always three draws, so one request's
    /// options never shift the next request's numbers.
    pub fn plan(&mut self, r: &ClientRequest) -> Plan {
        let cap = r.max_tokens.max(1);
        let u_fault: f64 = self.rng.random();
        let sampled = (self.output.sample(&mut self.rng).round() as u32).max(1);
        let u_at: f64 = self.rng.random();
        let (output, end) =
            if r.ignore_eos || sampled >= cap { (cap, FinishReason::Length) } else { (sampled, FinishReason::Stop) };
        let f = &self.faults;
        let fault = if u_fault < f.http_error_rate {
            Some(Fault::HttpError)
        } else if u_fault < f.http_error_rate + f.stream_error_rate {
            Some(Fault::StreamError)
        } else if u_fault < f.http_error_rate + f.stream_error_rate + f.server_abort_rate {
            Some(Fault::ServerAbort)
        } else {
            None
        };
        match fault {
            // The fault strikes at the step that produces token k, uniform in 1..=output.
            Some(kind @ (Fault::StreamError | Fault::ServerAbort)) => {
                let k = 1 + ((u_at * f64::from(output)) as u32).min(output - 1);
                let end = if kind == Fault::StreamError { FinishReason::Error } else { FinishReason::Abort };
                Plan { output: k, end, fault }
            }
            _ => Plan { output, end, fault },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignore_eos_runs_to_the_cap_and_faults_follow_their_rates() {
        let mut c = SimConfig::default();
        let mut d = ClientDraws::new(&c);
        let req = ClientRequest { prompt: 10, max_tokens: 7, ignore_eos: true };
        for _ in 0..50 {
            assert_eq!(d.plan(&req), Plan { output: 7, end: FinishReason::Length, fault: None });
        }
        let free = ClientRequest { ignore_eos: false, max_tokens: 100_000, ..req };
        let stops = (0..200).filter(|_| d.plan(&free).end == FinishReason::Stop).count();
        assert_eq!(stops, 200, "far below the cap the distribution decides");

        c.faults = Faults { http_error_rate: 0.2, stream_error_rate: 0.3, server_abort_rate: 0.1 };
        let mut d = ClientDraws::new(&c);
        let plans: Vec<Plan> = (0..4000).map(|_| d.plan(&ClientRequest { max_tokens: 50, ..free })).collect();
        let share = |f: Fault| plans.iter().filter(|p| p.fault == Some(f)).count() as f64 / 4000.0;
        assert!((share(Fault::HttpError) - 0.2).abs() < 0.03);
        assert!((share(Fault::StreamError) - 0.3).abs() < 0.03);
        assert!((share(Fault::ServerAbort) - 0.1).abs() < 0.03);
        for p in &plans {
            assert!(p.output >= 1 && p.output <= 50);
            match p.fault {
                Some(Fault::StreamError) => assert_eq!(p.end, FinishReason::Error),
                Some(Fault::ServerAbort) => assert_eq!(p.end, FinishReason::Abort),
                _ => assert!(matches!(p.end, FinishReason::Stop | FinishReason::Length)),
            }
        }
    }
}
