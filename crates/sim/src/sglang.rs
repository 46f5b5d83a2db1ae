//! SGLang (≈ 0.5.x) metrics as its multiprocess prometheus_client prints them
//! (docs/engines.md#sglang): tokenizer-side request histograms and counters labelled by
//! `model_name` only and updated when a request finishes (TTFT at first token); scheduler
//! gauges per engine with `tp_rank`/`pp_rank`/…; ITL observed per token.

use super::config::SimConfig;
use super::engine::Engine;
use super::event::{Event, FinishReason};
use super::expo::{Labels, Style, Writer};
use super::hist::{self, Histogram};

/// Reads one scheduler gauge from the metrics state and the engine.
type GaugeFn<'a> = dyn Fn(&Sched, &Engine) -> f64 + 'a;

/// SGLang's scheduler logs (and sets its throughput gauges) every this many decode steps.
const LOG_INTERVAL_STEPS: u32 = 40;

struct Sched {
    labels: Labels,
    queue: Histogram,
    prefill_compute: u64,
    prefill_cache: u64,
    decode: u64,
    retracted_last_step: u64,
    steps_since_log: u32,
    log_started: f64,
    tokens_since_log: u64,
    drafts_since_log: u64,
    draft_tokens_since_log: u64,
    accepted_since_log: u64,
    gen_throughput: f64,
    spec_accept_length: f64,
    spec_accept_rate: f64,
}

pub struct SglangMetrics {
    model: Labels,
    sched: Vec<Sched>,
    max_total_tokens: u64,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    prompt_tokens: u64,
    generation_tokens: u64,
    cached_tokens: u64,
    requests: u64,
    aborted: u64,
}

impl SglangMetrics {
    pub fn new(c: &SimConfig) -> SglangMetrics {
        let sched = (0..c.engines)
            .map(|i| {
                let mut labels: Labels = vec![
                    ("engine_type", "unified".into()),
                    ("model_name", c.model.clone()),
                    ("moe_ep_rank", "0".into()),
                    ("pp_rank", "0".into()),
                    ("tp_rank", "0".into()),
                ];
                if c.engines > 1 {
                    labels.push(("dp_rank", i.to_string()));
                }
                Sched {
                    labels,
                    queue: Histogram::new(hist::SGLANG_QUEUE),
                    prefill_compute: 0,
                    prefill_cache: 0,
                    decode: 0,
                    retracted_last_step: 0,
                    steps_since_log: 0,
                    log_started: 0.0,
                    tokens_since_log: 0,
                    drafts_since_log: 0,
                    draft_tokens_since_log: 0,
                    accepted_since_log: 0,
                    gen_throughput: 0.0,
                    spec_accept_length: 0.0,
                    spec_accept_rate: 0.0,
                }
            })
            .collect();
        SglangMetrics {
            model: vec![("model_name", c.model.clone())],
            sched,
            max_total_tokens: u64::from(c.engine.num_gpu_blocks - 1) * u64::from(c.engine.block_size),
            ttft: Histogram::new(hist::SGLANG_TTFT),
            itl: Histogram::new(hist::SGLANG_ITL),
            e2e: Histogram::new(hist::SGLANG_E2E),
            prompt_tokens: 0,
            generation_tokens: 0,
            cached_tokens: 0,
            requests: 0,
            aborted: 0,
        }
    }

    pub fn observe(&mut self, ev: &Event) {
        match ev {
            Event::PrefixQuery { engine, queried, hit } => {
                let s = &mut self.sched[*engine as usize];
                s.prefill_cache += u64::from(*hit);
                s.prefill_compute += u64::from(queried - hit);
            }
            Event::FirstToken { ttft, .. } => self.ttft.observe(*ttft),
            Event::Tokens { engine, n, itl, .. } => {
                let s = &mut self.sched[*engine as usize];
                s.decode += u64::from(*n);
                s.tokens_since_log += u64::from(*n);
                if let Some(gap) = itl {
                    // Per token: k tokens after a gap Δ add k observations of Δ/k, and Δ to the sum.
                    self.itl.observe_n(gap / f64::from(*n), u64::from(*n), *gap);
                }
            }
            Event::Spec { engine, drafts, accepted } => {
                let s = &mut self.sched[*engine as usize];
                s.drafts_since_log += 1;
                s.draft_tokens_since_log += u64::from(*drafts);
                s.accepted_since_log += u64::from(*accepted);
            }
            Event::Preempted { engine, .. } => self.sched[*engine as usize].retracted_last_step += 1,
            Event::Step { engine, at, .. } => {
                let s = &mut self.sched[*engine as usize];
                s.steps_since_log += 1;
                if s.steps_since_log >= LOG_INTERVAL_STEPS {
                    let dt = at - s.log_started;
                    s.gen_throughput = if dt > 0.0 { s.tokens_since_log as f64 / dt } else { 0.0 };
                    if s.drafts_since_log > 0 {
                        s.spec_accept_length = 1.0 + s.accepted_since_log as f64 / s.drafts_since_log as f64;
                        s.spec_accept_rate = s.accepted_since_log as f64 / s.draft_tokens_since_log.max(1) as f64;
                    }
                    s.steps_since_log = 0;
                    s.log_started = *at;
                    s.tokens_since_log = 0;
                    s.drafts_since_log = 0;
                    s.draft_tokens_since_log = 0;
                    s.accepted_since_log = 0;
                }
                s.retracted_last_step = 0;
            }
            Event::Arrived { .. } => {}
            Event::Finished(f) => {
                self.sched[f.engine as usize].queue.observe(f.queue);
                self.e2e.observe(f.e2e);
                self.requests += 1;
                self.prompt_tokens += u64::from(f.prompt);
                self.generation_tokens += u64::from(f.output);
                self.cached_tokens += u64::from(f.prefix_hit);
                if f.reason == FinishReason::Abort {
                    self.aborted += 1;
                }
            }
        }
    }

    pub fn render(&self, engines: &[Engine]) -> String {
        let mut w = Writer::new(Style::PythonMultiprocess);
        let s = &self.sched;
        w.histogram(
            "sglang:queue_time_seconds",
            Some("Histogram of queueing time in seconds."),
            s.iter().map(|x| (&x.labels, &x.queue)),
            0.0,
        );
        let rt: Vec<(Labels, u64)> =
            s.iter()
                .flat_map(|x| {
                    [("prefill_compute", x.prefill_compute), ("prefill_cache", x.prefill_cache), ("decode", x.decode)]
                        .map(|(m, v)| {
                            let mut l = x.labels.clone();
                            l.push(("mode", m.into()));
                            (l, v)
                        })
                })
                .collect();
        w.counter(
            "sglang:realtime_tokens",
            Some("Total number of tokens processed (updated on each log interval)."),
            rt.iter().map(|(l, v)| (l, *v)),
            0.0,
        );
        let max = self.max_total_tokens as f64;
        let gauges: [(&str, &str, &GaugeFn<'_>); 9] = [
            ("sglang:num_retracted_reqs", "The number of retracted requests.", &|x, _| x.retracted_last_step as f64),
            ("sglang:num_running_reqs", "The number of running requests.", &|_, e| e.num_running() as f64),
            ("sglang:num_used_tokens", "The number of used tokens.", &|_, e| e.kv_used_tokens() as f64),
            ("sglang:token_usage", "The token usage.", &|_, e| e.kv_used_tokens() as f64 / max),
            ("sglang:gen_throughput", "The generation throughput (token/s).", &|x, _| x.gen_throughput),
            ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", &|_, e| e.num_waiting() as f64),
            ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", &|_, _| max),
            ("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", &|x, _| {
                x.spec_accept_length
            }),
            (
                "sglang:spec_accept_rate",
                "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).",
                &|x, _| x.spec_accept_rate,
            ),
        ];
        for (name, help, f) in gauges {
            w.gauge(name, Some(help), s.iter().zip(engines).map(|(x, e)| (&x.labels, f(x, e))));
        }
        let model = &self.model;
        let one = |h| [(model, h)];
        w.histogram(
            "sglang:time_to_first_token_seconds",
            Some("Histogram of time to first token in seconds."),
            one(&self.ttft),
            0.0,
        );
        w.histogram(
            "sglang:inter_token_latency_seconds",
            Some("Histogram of inter-token latency in seconds."),
            one(&self.itl),
            0.0,
        );
        w.histogram(
            "sglang:e2e_request_latency_seconds",
            Some("Histogram of End-to-end request latency in seconds"),
            one(&self.e2e),
            0.0,
        );
        let counters = [
            ("sglang:prompt_tokens", "Number of prefill tokens processed.", self.prompt_tokens),
            ("sglang:generation_tokens", "Number of generation tokens processed.", self.generation_tokens),
            ("sglang:cached_tokens", "Number of cached prompt tokens.", self.cached_tokens),
            ("sglang:num_requests", "Number of requests processed.", self.requests),
            ("sglang:num_aborted_requests", "Number of requests aborted.", self.aborted),
        ];
        for (name, help, v) in counters {
            w.counter(name, Some(help), [(&self.model, v)], 0.0);
        }
        w.out
    }
}
