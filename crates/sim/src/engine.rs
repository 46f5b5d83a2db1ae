//! One engine core: a vLLM-V1-style continuous-batching scheduler over a KV block pool.
//!
//! Each step: (1) running requests get their tokens first, in order; when the pool runs
//! dry the most recently admitted request is preempted (its blocks freed, recomputed
//! later from scratch) and put back at the head of the queue; (2) only if nothing was
//! preempted, waiting requests are admitted FCFS while the token budget, `max_num_seqs`
//! and free blocks allow. The step's duration follows from what it computes; its effects
//! (tokens, first tokens, finishes) land at its end, which is when vLLM stamps them.
//! Everything is in virtual seconds; no wall clock.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::arrivals::RequestSpec;
use super::config::EngineModel;
use super::event::{Event, FinishReason, Finished};
use super::kv::{BlockPool, blocks_for};

#[derive(Debug, Clone)]
struct Req {
    spec: RequestSpec,
    /// When the engine queue received it (after the frontend overhead).
    enqueued: f64,
    /// Tokens whose KV is computed.
    computed: u32,
    generated: u32,
    blocks: u32,
    scheduled_at: Option<f64>,
    first_token_at: Option<f64>,
    last_token_at: Option<f64>,
    /// Tokens scheduled in the step in flight (excluding drafts), and drafts.
    sched: u32,
    drafts: u32,
}

impl Req {
    fn context(&self) -> u32 {
        self.spec.prompt + self.generated
    }
}

pub struct Engine {
    pub index: u32,
    cfg: EngineModel,
    waiting: VecDeque<Req>,
    running: Vec<Req>,
    pool: BlockPool,
    rng: ChaCha8Rng,
    /// End of the step in flight.
    busy_until: Option<f64>,
    /// Earliest client give-up among queued and running requests (a lower bound), so that
    /// steps need not scan a long queue for aborts every time.
    next_abort: f64,
}

impl Engine {
    pub fn new(index: u32, cfg: &EngineModel, seed: u64) -> Engine {
        Engine {
            index,
            cfg: cfg.clone(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            pool: BlockPool::new(cfg.num_gpu_blocks),
            rng: ChaCha8Rng::seed_from_u64(seed ^ (0xe4_9143 + u64::from(index))),
            busy_until: None,
            next_abort: f64::INFINITY,
        }
    }

    pub fn busy_until(&self) -> Option<f64> {
        self.busy_until
    }

    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn kv_usage(&self) -> f64 {
        self.pool.usage()
    }

    pub fn kv_used_tokens(&self) -> u64 {
        u64::from(self.pool.used()) * u64::from(self.cfg.block_size)
    }

    /// Token budget the running batch holds (TGI's `batch_current_max_tokens`).
    pub fn running_max_tokens(&self) -> u64 {
        self.running.iter().map(|r| u64::from(r.spec.prompt + r.spec.max_tokens)).sum()
    }

    /// vLLM's data-parallel balancer score: waiting weighs more than running.
    pub fn load_score(&self) -> usize {
        self.waiting.len() * 4 + self.running.len()
    }

    /// Snapshot of in-flight requests: (spec, first token time, tokens generated).
    pub fn in_flight(&self) -> impl Iterator<Item = (&RequestSpec, Option<f64>, u32)> {
        self.running.iter().chain(self.waiting.iter()).map(|r| (&r.spec, r.first_token_at, r.generated))
    }

    /// A request reaches the engine queue at `now`; starts a step if the engine was idle.
    pub fn enqueue(&mut self, spec: RequestSpec, now: f64, out: &mut Vec<Event>) {
        if let Some(t) = spec.abort_at {
            self.next_abort = self.next_abort.min(t);
        }
        self.waiting.push_back(Req {
            spec,
            enqueued: now,
            computed: 0,
            generated: 0,
            blocks: 0,
            scheduled_at: None,
            first_token_at: None,
            last_token_at: None,
            sched: 0,
            drafts: 0,
        });
        if self.busy_until.is_none() {
            self.start_step(now, out);
        }
    }

    /// The client of request `id` gave up at `at`: it finishes with reason `abort` at the
    /// next step boundary, as vLLM's frontend aborts a request whose connection closed.
    /// False when the request is not here.
    pub fn abort(&mut self, id: u64, at: f64) -> bool {
        let Some(r) = self.running.iter_mut().chain(self.waiting.iter_mut()).find(|r| r.spec.id == id) else {
            return false;
        };
        let t = r.spec.abort_at.map_or(at, |t| t.min(at));
        r.spec.abort_at = Some(t);
        self.next_abort = self.next_abort.min(t);
        true
    }

    /// Applies the step that ends at `now`, then starts the next one if there is work.
    pub fn end_step(&mut self, now: f64, out: &mut Vec<Event>) {
        self.busy_until = None;
        let mut iteration_tokens = 0u64;
        let mut i = 0;
        while i < self.running.len() {
            let r = &mut self.running[i];
            if r.sched == 0 {
                i += 1;
                continue;
            }
            let n = r.sched;
            let drafts = r.drafts;
            r.sched = 0;
            r.drafts = 0;
            if r.computed + n < r.context() {
                r.computed += n; // a prefill chunk; no token yet
                i += 1;
                continue;
            }
            let accepted = if drafts > 0 {
                let alpha = self.cfg.spec_acceptance;
                let a = (0..drafts).take_while(|_| self.rng.random::<f64>() < alpha).count() as u32;
                out.push(Event::Spec { engine: self.index, drafts, accepted: a });
                a
            } else {
                0
            };
            let r = &mut self.running[i];
            let new_tokens = (1 + accepted).min(r.spec.output - r.generated);
            r.computed += n + new_tokens - 1;
            let first = r.generated == 0;
            let itl = if first {
                r.first_token_at = Some(now);
                out.push(Event::FirstToken { engine: self.index, ttft: now - r.spec.arrival, prompt: r.spec.prompt });
                iteration_tokens += u64::from(r.spec.prompt);
                None
            } else {
                r.last_token_at.map(|last| now - last)
            };
            r.generated += new_tokens;
            r.last_token_at = Some(now);
            iteration_tokens += u64::from(new_tokens);
            out.push(Event::Tokens { engine: self.index, id: r.spec.id, at: now, n: new_tokens, itl });
            if r.generated >= r.spec.output {
                let r = self.running.remove(i);
                self.pool.release(r.blocks);
                out.push(Event::Finished(self.finished(&r, now, r.spec.end)));
            } else {
                i += 1;
            }
        }
        out.push(Event::Step { engine: self.index, at: now, iteration_tokens });
        self.start_step(now, out);
    }

    fn finished(&self, r: &Req, now: f64, reason: FinishReason) -> Finished {
        let queue = r.scheduled_at.unwrap_or(now) - r.enqueued;
        let prefill = match (r.scheduled_at, r.first_token_at) {
            (Some(s), Some(f)) => f - s,
            (Some(s), None) => now - s,
            _ => 0.0,
        };
        let decode = match (r.first_token_at, r.last_token_at) {
            (Some(f), Some(l)) => l - f,
            _ => 0.0,
        };
        let tpot = if r.generated > 1 { decode / f64::from(r.generated - 1) } else { 0.0 };
        Finished {
            engine: self.index,
            id: r.spec.id,
            arrival: r.spec.arrival,
            first_token: r.first_token_at,
            finish: now,
            prompt: r.spec.prompt,
            output: r.generated,
            max_tokens: r.spec.max_tokens,
            prefix_hit: r.spec.prefix_hit,
            ttft: r.first_token_at.map(|f| f - r.spec.arrival),
            tpot,
            e2e: now - r.spec.arrival,
            queue,
            prefill,
            decode,
            reason,
        }
    }

    /// Aborts every request whose client has given up by `now`.
    fn abort_expired(&mut self, now: f64, out: &mut Vec<Event>) {
        if now < self.next_abort {
            return;
        }
        self.next_abort = self
            .running
            .iter()
            .chain(&self.waiting)
            .filter_map(|r| r.spec.abort_at)
            .filter(|t| *t > now)
            .fold(f64::INFINITY, f64::min);
        let expired = |r: &Req| r.spec.abort_at.is_some_and(|t| t <= now);
        let mut i = 0;
        while i < self.running.len() {
            if expired(&self.running[i]) {
                let r = self.running.remove(i);
                self.pool.release(r.blocks);
                out.push(Event::Finished(self.finished(&r, now, FinishReason::Abort)));
            } else {
                i += 1;
            }
        }
        let mut kept = VecDeque::with_capacity(self.waiting.len());
        while let Some(r) = self.waiting.pop_front() {
            if expired(&r) {
                self.pool.release(r.blocks);
                out.push(Event::Finished(self.finished(&r, now, FinishReason::Abort)));
            } else {
                kept.push_back(r);
            }
        }
        self.waiting = kept;
    }

    /// Schedules one step at `now`; leaves the engine idle when there is nothing to run.
    fn start_step(&mut self, now: f64, out: &mut Vec<Event>) {
        self.abort_expired(now, out);
        let bs = self.cfg.block_size;
        let mut budget = self.cfg.max_num_batched_tokens;
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let r = &self.running[i];
            let need = r.context() - r.computed;
            let decoding = need == 1 && r.generated >= 1;
            let drafts =
                if decoding { self.cfg.spec_tokens.min(r.spec.output - r.generated - 1).min(budget - 1) } else { 0 };
            let n = need.min(budget);
            let want = blocks_for(r.computed + n + drafts, bs).saturating_sub(r.blocks);
            let mut self_preempted = false;
            while self.pool.free() < want {
                // Evict the lowest-priority (most recently admitted) request.
                let victim_is_self = self.running.len() - 1 == i;
                self.preempt_last(now, out);
                preempted = true;
                if victim_is_self {
                    self_preempted = true;
                    break;
                }
            }
            if self_preempted {
                break;
            }
            self.pool.allocate(want);
            let r = &mut self.running[i];
            r.blocks += want;
            r.sched = n;
            r.drafts = drafts;
            budget -= n + drafts;
            i += 1;
        }
        if !preempted || self.running.is_empty() {
            self.admit(now, &mut budget, out);
        }
        self.busy_until = self.step_duration().map(|d| now + d);
    }

    fn preempt_last(&mut self, now: f64, out: &mut Vec<Event>) {
        if let Some(mut v) = self.running.pop() {
            self.pool.release(v.blocks);
            v.blocks = 0;
            v.computed = 0;
            v.sched = 0;
            v.drafts = 0;
            self.waiting.push_front(v);
            out.push(Event::Preempted { engine: self.index, at: now });
        }
    }

    fn admit(&mut self, now: f64, budget: &mut u32, out: &mut Vec<Event>) {
        let bs = self.cfg.block_size;
        while *budget > 0 && self.running.len() < self.cfg.max_num_seqs as usize {
            let Some(r) = self.waiting.front() else { break };
            let fresh = r.scheduled_at.is_none();
            let start = if fresh { r.spec.prefix_hit } else { 0 };
            let need = r.context() - start;
            let whole_fits = need <= *budget || need > self.cfg.max_num_batched_tokens;
            if !self.cfg.chunked_prefill && !whole_fits {
                break;
            }
            let n = need.min(*budget);
            let want = blocks_for(start + n, bs);
            if !self.pool.allocate(want) {
                break;
            }
            let Some(mut r) = self.waiting.pop_front() else {
                break;
            };
            if fresh {
                r.scheduled_at = Some(now);
                out.push(Event::PrefixQuery { engine: self.index, queried: r.spec.prompt, hit: r.spec.prefix_hit });
            }
            r.computed = start;
            r.blocks = want;
            r.sched = n;
            r.drafts = 0;
            *budget -= n;
            self.running.push(r);
        }
    }

    /// Step time from what is scheduled; `None` when nothing is.
    fn step_duration(&self) -> Option<f64> {
        let c = &self.cfg;
        let mut prefill = 0u64;
        let mut decode_seqs = 0u64;
        let mut kv = 0u64;
        let mut drafts = 0u64;
        for r in self.running.iter().filter(|r| r.sched > 0) {
            if r.generated >= 1 && r.sched == 1 && r.computed + 1 == r.context() {
                decode_seqs += 1;
            } else {
                prefill += u64::from(r.sched);
            }
            drafts += u64::from(r.drafts);
            kv += u64::from(r.computed + r.sched + r.drafts);
        }
        if prefill + decode_seqs == 0 {
            return None;
        }
        Some(
            c.step_base_s
                + prefill as f64 * c.prefill_per_token_s
                + decode_seqs as f64 * c.decode_per_seq_s
                + kv as f64 * c.kv_per_token_s
                + drafts as f64 * c.spec_draft_per_token_s,
        )
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
