//! The live simulator's shared state: the model, its clock, and the client requests
//! waiting on it. [`Live::catch_up`] advances the model to the wall clock and hands each
//! client its engine steps, the ground truth its lines and the exporter its spans.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};

use super::client::Fault;
use super::cluster::{Output, Sim};
use super::config::SimConfig;
use super::event::FinishReason;
use super::otlp;
use super::truth::{LiveTruth, Origin};

/// What the engine did for one client request, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// One engine step produced `n` tokens.
    Tokens(u32),
    /// The request finished; `last` tokens came out in the final step, `output` in all.
    End { last: u32, output: u32, reason: FinishReason },
}

/// A client request the engine is working on, and where its steps go.
pub(crate) struct Waiter {
    pub tx: mpsc::UnboundedSender<Step>,
    pub request_id: String,
    pub fault: Option<Fault>,
    pub traceparent: Option<(String, String)>,
}

pub(crate) struct Live {
    pub sim: Sim,
    started: Instant,
    started_unix: f64,
    speed: f64,
    pub waiters: HashMap<u64, Waiter>,
    pub truth: Option<LiveTruth>,
    otlp: Option<otlp::Exporter>,
}

impl Live {
    pub fn new(
        sim: Sim,
        started: Instant,
        started_unix: f64,
        speed: f64,
        truth: Option<LiveTruth>,
        otlp: Option<otlp::Exporter>,
    ) -> Live {
        Live { sim, started, started_unix, speed, waiters: HashMap::new(), truth, otlp }
    }

    /// Advances the model to the wall clock and passes on what happened.
    pub fn catch_up(&mut self) {
        let t = self.started.elapsed().as_secs_f64() * self.speed;
        self.sim.advance_to(t);
        self.deliver();
    }

    /// Wall-clock unix seconds of virtual instant `t`.
    pub fn unix(&self, t: f64) -> f64 {
        self.started_unix + t / self.speed
    }

    /// How long the driver may sleep: until the next event while clients wait (at most a
    /// second), else a second.
    pub fn next_wake(&self) -> Duration {
        let idle = Duration::from_secs(1);
        if self.waiters.is_empty() {
            return idle;
        }
        let due = self.sim.next_event_time() / self.speed;
        let wait = due - self.started.elapsed().as_secs_f64();
        if wait.is_finite() { Duration::from_secs_f64(wait.clamp(0.0, 1.0)) } else { idle }
    }

    fn deliver(&mut self) {
        let outputs = self.sim.take_outputs();
        if outputs.is_empty() {
            return;
        }
        // A request's last step travels with its finish, as vLLM puts the last tokens and
        // `finish_reason` in one chunk.
        let finish_at: HashMap<u64, f64> = outputs
            .iter()
            .filter_map(|o| match o {
                Output::Finished { f, client: true } => Some((f.id, f.finish)),
                _ => None,
            })
            .collect();
        let mut last: HashMap<u64, u32> = HashMap::new();
        let seed = self.sim.config().seed;
        for o in outputs {
            match o {
                Output::Tokens { id, at, n } => {
                    if finish_at.get(&id) == Some(&at) {
                        last.insert(id, n);
                    } else if let Some(w) = self.waiters.get(&id) {
                        let _ = w.tx.send(Step::Tokens(n));
                    }
                }
                Output::Finished { f, client } => {
                    let waiter = if client { self.waiters.remove(&f.id) } else { None };
                    let unix = |t: f64| self.started_unix + t / self.speed;
                    let origin = waiter.as_ref().map(|w| Origin { request_id: &w.request_id, fault: w.fault });
                    if let Some(truth) = &mut self.truth {
                        truth.finished(&f, &unix, origin);
                    }
                    // vLLM traces requests that reach a finish in the engine's output, not
                    // those the frontend aborts.
                    if let Some(ex) = &self.otlp
                        && f.reason != FinishReason::Abort
                    {
                        let times = otlp::RequestTimes {
                            request_id: waiter
                                .as_ref()
                                .map_or_else(|| format!("sim-{}", f.id), |w| w.request_id.clone()),
                            model: self.sim.config().model.clone(),
                            arrival_unix: unix(f.arrival),
                            finish_unix: unix(f.finish),
                            ttft: f.ttft,
                            e2e: f.e2e,
                            queue: f.queue,
                            prefill: f.prefill,
                            decode: f.decode,
                            prompt_tokens: f.prompt,
                            completion_tokens: f.output,
                            max_tokens: f.max_tokens,
                        };
                        let parent = waiter.as_ref().and_then(|w| w.traceparent.as_ref());
                        ex.send(otlp::span(&times, (seed, f.id), parent));
                    }
                    if let Some(w) = waiter {
                        let n = last.remove(&f.id).unwrap_or(0);
                        let _ = w.tx.send(Step::End { last: n, output: f.output, reason: f.reason });
                    }
                }
            }
        }
    }
}

/// The state every handler shares.
pub(crate) struct App {
    pub live: Mutex<Live>,
    /// Wakes the driver when a client request arrives or leaves.
    pub wake: Notify,
    pub cfg: SimConfig,
    /// Unix seconds the server came up (`created` of the model card).
    pub created: u64,
}

impl App {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}
