//! The discrete-event loop: arrivals, data-parallel routing, engine steps, and the
//! dispatch of every step's events to the metrics registry and the ground truth.
//!
//! Time is virtual seconds since the start; [`Sim::advance_to`] processes every event up
//! to and including a given instant, in a fixed order, so one seed gives one history.
//! In live mode API clients add requests at the current instant ([`Sim::submit`]) and
//! collect what the engine did for them ([`Sim::take_outputs`]).

use std::collections::{HashSet, VecDeque};

use super::arrivals::{ArrivalGen, RequestSpec};
use super::client::{ClientDraws, ClientRequest, Fault};
use super::config::{ConfigError, SimConfig};
use super::engine::Engine;
use super::event::{Event, Finished};
use super::metrics::Metrics;

/// What the engine did that the live shell must pass on.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A client's request got `n` tokens in the step that ended at `at`.
    Tokens { id: u64, at: f64, n: u32 },
    /// Any request finished; `client` when an API client submitted it.
    Finished { f: Finished, client: bool },
}

/// A client request as the simulator took it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Admitted {
    pub id: u64,
    /// Virtual arrival time (the instant of [`Sim::submit`]).
    pub arrival: f64,
    /// Tokens the engine will generate (fewer if the client leaves first).
    pub output: u32,
    /// `HttpError` requests were rejected at the frontend and are not queued.
    pub fault: Option<Fault>,
}

/// A request still in flight when the run stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    pub engine: u32,
    pub id: u64,
    pub arrival: f64,
    pub first_token: Option<f64>,
    pub prompt: u32,
    pub output: u32,
}

pub struct Sim {
    cfg: SimConfig,
    arrivals: ArrivalGen,
    engines: Vec<Engine>,
    now: f64,
    metrics: Metrics,
    /// Finished requests, kept only when ground truth is wanted (offline mode).
    truth: Option<Vec<Finished>>,
    events: Vec<Event>,
    next_id: u64,
    /// Client requests between arrival and the engine queue (the frontend overhead).
    pending: VecDeque<RequestSpec>,
    /// Ids of client requests not yet finished.
    clients: HashSet<u64>,
    client_draws: ClientDraws,
    /// Outputs for the live shell, when it asked for them.
    outputs: Option<Vec<Output>>,
}

impl Sim {
    /// `keep_truth` records every finished request (memory grows with the run).
    pub fn new(cfg: &SimConfig, keep_truth: bool) -> Result<Sim, ConfigError> {
        cfg.validate()?;
        Ok(Sim {
            arrivals: ArrivalGen::new(cfg),
            engines: (0..cfg.engines).map(|i| Engine::new(i, &cfg.engine, cfg.seed)).collect(),
            now: 0.0,
            metrics: Metrics::new(cfg),
            truth: keep_truth.then(Vec::new),
            events: Vec::new(),
            next_id: 0,
            pending: VecDeque::new(),
            clients: HashSet::new(),
            client_draws: ClientDraws::new(cfg),
            outputs: None,
            cfg: cfg.clone(),
        })
    }

    /// Collects [`Output`]s from now on; the caller must drain them with
    /// [`Sim::take_outputs`] after each advance.
    pub fn record_outputs(&mut self) {
        self.outputs.get_or_insert_with(Vec::new);
    }

    /// The outputs since the last call, in the order they happened.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        self.outputs.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A client request arrives now. It reaches the least loaded engine after the
    /// frontend overhead, like a generated one, and never times out on its own: only
    /// [`Sim::abort`] ends it early. A request drawn for an HTTP-error fault is not queued.
    pub fn submit(&mut self, r: ClientRequest) -> Admitted {
        let plan = self.client_draws.plan(&r);
        let id = self.next_id;
        self.next_id += 1;
        let admitted = Admitted { id, arrival: self.now, output: plan.output, fault: plan.fault };
        if plan.fault != Some(Fault::HttpError) {
            self.pending.push_back(RequestSpec {
                id,
                arrival: self.now,
                prompt: r.prompt,
                output: plan.output,
                end: plan.end,
                max_tokens: r.max_tokens,
                prefix_hit: 0,
                abort_at: None,
            });
            self.clients.insert(id);
        }
        admitted
    }

    /// The client of request `id` went away now: the engine aborts the request at its
    /// next step boundary. False when the request already finished.
    pub fn abort(&mut self, id: u64) -> bool {
        let now = self.now;
        if let Some(r) = self.pending.iter_mut().find(|r| r.id == id) {
            r.abort_at = Some(now);
            return true;
        }
        self.engines.iter_mut().any(|e| e.abort(id, now))
    }

    /// When the next event (an arrival reaching an engine, or a step's end) happens.
    pub fn next_event_time(&self) -> f64 {
        let step = self.engines.iter().filter_map(Engine::busy_until).fold(f64::INFINITY, f64::min);
        step.min(self.next_arrival().0 + self.cfg.workload.frontend_overhead_s)
    }

    /// The next arrival, and whether it is a client's (generated ones win ties).
    fn next_arrival(&self) -> (f64, bool) {
        let generated = self.arrivals.peek_time();
        match self.pending.front() {
            Some(c) if c.arrival < generated => (c.arrival, true),
            _ => (generated, false),
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    pub fn now(&self) -> f64 {
        self.now
    }

    pub fn metrics_mut(&mut self) -> &mut Metrics {
        &mut self.metrics
    }

    /// Processes every event at or before `t` (virtual seconds). Going back is a no-op.
    pub fn advance_to(&mut self, t: f64) {
        if t.partial_cmp(&self.now) != Some(std::cmp::Ordering::Greater) {
            return;
        }
        let overhead = self.cfg.workload.frontend_overhead_s;
        loop {
            let (arrival, from_client) = self.next_arrival();
            let delivery = arrival + overhead;
            let step = self.engines.iter().enumerate().filter_map(|(i, e)| e.busy_until().map(|b| (i, b))).fold(
                None,
                |best: Option<(usize, f64)>, (i, b)| match best {
                    Some((_, bb)) if bb <= b => best,
                    _ => Some((i, b)),
                },
            );
            match step {
                Some((i, at)) if at <= delivery && at <= t => self.engines[i].end_step(at, &mut self.events),
                _ if delivery <= t => {
                    let spec = if from_client {
                        self.pending.pop_front()
                    } else {
                        self.arrivals.pop().map(|mut s| {
                            s.id = self.next_id;
                            self.next_id += 1;
                            s
                        })
                    };
                    let Some(spec) = spec else {
                        break;
                    };
                    // Least loaded engine, lowest index on ties (vLLM's DP balancer).
                    let i = (0..self.engines.len()).min_by_key(|&i| (self.engines[i].load_score(), i)).unwrap_or(0);
                    self.events.push(Event::Arrived {
                        engine: i as u32,
                        prompt: spec.prompt,
                        max_tokens: spec.max_tokens,
                        validation: overhead,
                    });
                    self.engines[i].enqueue(spec, delivery, &mut self.events);
                }
                _ => break,
            }
            self.dispatch();
        }
        self.now = t;
    }

    fn dispatch(&mut self) {
        for ev in self.events.drain(..) {
            self.metrics.observe(&ev);
            if let (Some(truth), Event::Finished(f)) = (&mut self.truth, &ev) {
                truth.push(f.clone());
            }
            let Some(outputs) = &mut self.outputs else { continue };
            match &ev {
                Event::Tokens { id, at, n, .. } if self.clients.contains(id) => {
                    outputs.push(Output::Tokens { id: *id, at: *at, n: *n });
                }
                Event::Finished(f) => {
                    let client = self.clients.remove(&f.id);
                    outputs.push(Output::Finished { f: f.clone(), client });
                }
                _ => {}
            }
        }
    }

    /// The scrape body at the current instant.
    pub fn render(&self) -> String {
        self.metrics.render(&self.engines, self.now)
    }

    /// Finished requests so far (empty unless built with `keep_truth`).
    pub fn finished(&self) -> &[Finished] {
        self.truth.as_deref().unwrap_or(&[])
    }

    pub fn in_flight(&self) -> Vec<InFlight> {
        let mut v: Vec<InFlight> = self
            .engines
            .iter()
            .flat_map(|e| {
                e.in_flight().map(move |(s, first, generated)| InFlight {
                    engine: e.index,
                    id: s.id,
                    arrival: s.arrival,
                    first_token: first,
                    prompt: s.prompt,
                    output: generated,
                })
            })
            .collect();
        v.sort_by_key(|r| r.id);
        v
    }
}
