//! The discrete-event loop: arrivals, data-parallel routing, engine steps, and the
//! dispatch of every step's events to the metrics registry and the ground truth.
//!
//! Time is virtual seconds since the start; [`Sim::advance_to`] processes every event up
//! to and including a given instant, in a fixed order, so one seed gives one history.

use super::arrivals::ArrivalGen;
use super::config::SimConfig;
use super::engine::Engine;
use super::event::{Event, Finished};
use super::metrics::Metrics;

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
}

impl Sim {
    /// `keep_truth` records every finished request (memory grows with the run).
    pub fn new(cfg: &SimConfig, keep_truth: bool) -> Result<Sim, String> {
        cfg.validate()?;
        Ok(Sim {
            arrivals: ArrivalGen::new(cfg),
            engines: (0..cfg.engines).map(|i| Engine::new(i, &cfg.engine, cfg.seed)).collect(),
            now: 0.0,
            metrics: Metrics::new(cfg),
            truth: keep_truth.then(Vec::new),
            events: Vec::new(),
            cfg: cfg.clone(),
        })
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
            let delivery = self.arrivals.peek_time() + overhead;
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
                    let Some(spec) = self.arrivals.pop() else {
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
