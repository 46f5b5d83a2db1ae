//! vLLM V1 (≥ 0.11) metrics: the families, HELP texts, labels, buckets and observation
//! points of `vllm/v1/metrics/loggers.py` and `stats.py` (docs/engines.md#vllm-v1), and
//! their text exposition as prometheus_client prints it.

use super::config::SimConfig;
use super::engine::Engine;
use super::event::{Event, FinishReason};
use super::expo::{Labels, Style, Writer};
use super::hist::{self, Histogram};

struct PerEngine {
    labels: Labels,
    prefix_queries: u64,
    prefix_hits: u64,
    preemptions: u64,
    prompt_tokens: u64,
    generation_tokens: u64,
    success: [u64; 4],
    spec_drafts: u64,
    spec_draft_tokens: u64,
    spec_accepted: u64,
    spec_per_pos: Vec<u64>,
    req_prompt_tokens: Histogram,
    req_generation_tokens: Histogram,
    iteration_tokens: Histogram,
    max_num_generation_tokens: Histogram,
    params_n: Histogram,
    params_max_tokens: Histogram,
    ttft: Histogram,
    itl: Histogram,
    tpot: Histogram,
    e2e: Histogram,
    queue: Histogram,
    inference: Histogram,
    prefill: Histogram,
    decode: Histogram,
    prefill_kv_computed: Histogram,
}

pub struct VllmMetrics {
    engines: Vec<PerEngine>,
    spec_tokens: u32,
    created: f64,
    cache_info: Vec<(&'static str, String)>,
}

impl VllmMetrics {
    pub fn new(c: &SimConfig) -> VllmMetrics {
        let tok = hist::buckets_1_2_5(c.engine.max_model_len);
        let engines = (0..c.engines)
            .map(|i| PerEngine {
                labels: vec![("engine", i.to_string()), ("model_name", c.model.clone())],
                prefix_queries: 0,
                prefix_hits: 0,
                preemptions: 0,
                prompt_tokens: 0,
                generation_tokens: 0,
                success: [0; 4],
                spec_drafts: 0,
                spec_draft_tokens: 0,
                spec_accepted: 0,
                spec_per_pos: vec![0; c.engine.spec_tokens as usize],
                req_prompt_tokens: Histogram::new(&tok),
                req_generation_tokens: Histogram::new(&tok),
                iteration_tokens: Histogram::new(hist::VLLM_ITER),
                max_num_generation_tokens: Histogram::new(&tok),
                params_n: Histogram::new(hist::VLLM_N),
                params_max_tokens: Histogram::new(&tok),
                ttft: Histogram::new(hist::VLLM_TTFT),
                itl: Histogram::new(hist::VLLM_ITL),
                tpot: Histogram::new(hist::VLLM_ITL),
                e2e: Histogram::new(hist::VLLM_REQ),
                queue: Histogram::new(hist::VLLM_REQ),
                inference: Histogram::new(hist::VLLM_REQ),
                prefill: Histogram::new(hist::VLLM_REQ),
                decode: Histogram::new(hist::VLLM_REQ),
                prefill_kv_computed: Histogram::new(&tok),
            })
            .collect();
        let e = &c.engine;
        let cache_info = vec![
            ("block_size", e.block_size.to_string()),
            ("cache_dtype", "auto".into()),
            ("enable_prefix_caching", if c.workload.shared_prefix_fraction > 0.0 { "True" } else { "False" }.into()),
            ("gpu_memory_utilization", "0.9".into()),
            ("num_cpu_blocks", "None".into()),
            ("num_gpu_blocks", e.num_gpu_blocks.to_string()),
            ("num_gpu_blocks_override", "None".into()),
            ("prefix_caching_hash_algo", "sha256".into()),
            ("sliding_window", "None".into()),
            ("swap_space", "4.0".into()),
        ];
        VllmMetrics { engines, spec_tokens: e.spec_tokens, created: c.start_unix_s as f64, cache_info }
    }

    /// Sets the `_created` value (unix seconds when the registry came up).
    pub fn set_created(&mut self, unix_s: f64) {
        self.created = unix_s;
    }

    pub fn observe(&mut self, ev: &Event) {
        match ev {
            Event::PrefixQuery { engine, queried, hit } => {
                let m = &mut self.engines[*engine as usize];
                m.prefix_queries += u64::from(*queried);
                m.prefix_hits += u64::from(*hit);
            }
            Event::FirstToken { engine, ttft, prompt } => {
                let m = &mut self.engines[*engine as usize];
                m.ttft.observe(*ttft);
                m.prompt_tokens += u64::from(*prompt);
            }
            Event::Tokens { engine, n, itl, .. } => {
                let m = &mut self.engines[*engine as usize];
                m.generation_tokens += u64::from(*n);
                if let Some(itl) = itl {
                    m.itl.observe(*itl);
                }
            }
            Event::Spec { engine, drafts, accepted } => {
                let m = &mut self.engines[*engine as usize];
                m.spec_drafts += 1;
                m.spec_draft_tokens += u64::from(*drafts);
                m.spec_accepted += u64::from(*accepted);
                for p in m.spec_per_pos.iter_mut().take(*accepted as usize) {
                    *p += 1;
                }
            }
            Event::Preempted { engine, .. } => self.engines[*engine as usize].preemptions += 1,
            Event::Arrived { .. } => {}
            Event::Step { engine, iteration_tokens, .. } => {
                self.engines[*engine as usize].iteration_tokens.observe(*iteration_tokens as f64);
            }
            Event::Finished(f) => {
                let m = &mut self.engines[f.engine as usize];
                m.success[f.reason as usize] += 1;
                m.e2e.observe(f.e2e);
                m.queue.observe(f.queue);
                m.prefill.observe(f.prefill);
                m.decode.observe(f.decode);
                m.inference.observe(f.prefill + f.decode);
                m.tpot.observe(f.tpot);
                m.req_prompt_tokens.observe(f64::from(f.prompt));
                m.req_generation_tokens.observe(f64::from(f.output));
                m.max_num_generation_tokens.observe(f64::from(f.max_tokens));
                m.params_n.observe(1.0);
                m.params_max_tokens.observe(f64::from(f.max_tokens));
                m.prefill_kv_computed.observe(f64::from(f.prompt - f.prefix_hit.min(f.prompt)));
            }
        }
    }

    /// The scrape body at virtual time `now`.
    pub fn render(&self, engines: &[Engine], now: f64) -> String {
        let mut w = Writer::new(Style::Python);
        super::process::write(&mut w, self.created, now);
        let at = self.created;
        let es = &self.engines;
        let gauge = |w: &mut Writer, name: &str, help: &str, f: &dyn Fn(&Engine) -> f64| {
            w.gauge(name, Some(help), es.iter().zip(engines).map(|(m, e)| (&m.labels, f(e))));
        };
        gauge(&mut w, "vllm:num_requests_running", "Number of requests in model execution batches.", &|e| {
            e.num_running() as f64
        });
        gauge(&mut w, "vllm:num_requests_waiting", "Number of requests waiting to be processed.", &|e| {
            e.num_waiting() as f64
        });
        let sleep: Vec<(Labels, f64)> = es
            .iter()
            .flat_map(|m| {
                [("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)].map(|(s, v)| {
                    let mut l = m.labels.clone();
                    l.push(("sleep_state", s.to_string()));
                    (l, v)
                })
            })
            .collect();
        w.gauge(
            "vllm:engine_sleep_state",
            Some("Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."),
            sleep.iter().map(|(l, v)| (l, *v)),
        );
        gauge(&mut w, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", &|e| e.kv_usage());
        let counter = |w: &mut Writer, base: &str, help: &str, f: &dyn Fn(&PerEngine) -> u64| {
            let rows: Vec<(&Labels, u64)> = es.iter().map(|m| (&m.labels, f(m))).collect();
            w.counter(base, Some(help), rows.iter().copied(), at);
        };
        counter(
            &mut w,
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            &|m| m.prefix_queries,
        );
        counter(&mut w, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", &|m| {
            m.prefix_hits
        });
        counter(&mut w, "vllm:num_preemptions", "Cumulative number of preemption from the engine.", &|m| m.preemptions);
        counter(&mut w, "vllm:prompt_tokens", "Number of prefill tokens processed.", &|m| m.prompt_tokens);
        counter(&mut w, "vllm:generation_tokens", "Number of generation tokens processed.", &|m| m.generation_tokens);
        let success: Vec<(Labels, u64)> = es
            .iter()
            .flat_map(|m| {
                FinishReason::ALL.map(|r| {
                    let mut l = m.labels.clone();
                    l.push(("finished_reason", r.as_str().to_string()));
                    (l, m.success[r as usize])
                })
            })
            .collect();
        w.counter(
            "vllm:request_success",
            Some("Count of successfully processed requests."),
            success.iter().map(|(l, v)| (l, *v)),
            at,
        );
        if self.spec_tokens > 0 {
            counter(&mut w, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", &|m| m.spec_drafts);
            counter(&mut w, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", &|m| m.spec_draft_tokens);
            counter(&mut w, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", &|m| m.spec_accepted);
            let per_pos: Vec<(Labels, u64)> = es
                .iter()
                .flat_map(|m| {
                    m.spec_per_pos.iter().enumerate().map(|(i, v)| {
                        let mut l = m.labels.clone();
                        l.push(("position", i.to_string()));
                        (l, *v)
                    })
                })
                .collect();
            w.counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                Some("Accepted tokens per draft position."),
                per_pos.iter().map(|(l, v)| (l, *v)),
                at,
            );
        }
        let hist = |w: &mut Writer, name: &str, help: &str, f: &dyn Fn(&PerEngine) -> &Histogram| {
            let rows: Vec<(&Labels, &Histogram)> = es.iter().map(|m| (&m.labels, f(m))).collect();
            w.histogram(name, Some(help), rows.iter().copied(), at);
        };
        hist(&mut w, "vllm:request_prompt_tokens", "Number of prefill tokens processed.", &|m| &m.req_prompt_tokens);
        hist(&mut w, "vllm:request_generation_tokens", "Number of generation tokens processed.", &|m| {
            &m.req_generation_tokens
        });
        hist(&mut w, "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", &|m| {
            &m.iteration_tokens
        });
        hist(
            &mut w,
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            &|m| &m.max_num_generation_tokens,
        );
        hist(&mut w, "vllm:request_params_n", "Histogram of the n request parameter.", &|m| &m.params_n);
        hist(&mut w, "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", &|m| {
            &m.params_max_tokens
        });
        hist(&mut w, "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &|m| &m.ttft);
        hist(&mut w, "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &|m| &m.itl);
        hist(
            &mut w,
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            &|m| &m.tpot,
        );
        hist(&mut w, "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &|m| &m.e2e);
        hist(
            &mut w,
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            &|m| &m.queue,
        );
        hist(
            &mut w,
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            &|m| &m.inference,
        );
        hist(
            &mut w,
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            &|m| &m.prefill,
        );
        hist(
            &mut w,
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            &|m| &m.decode,
        );
        hist(
            &mut w,
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            &|m| &m.prefill_kv_computed,
        );
        let info: Vec<Labels> = (0..es.len())
            .map(|i| {
                let mut l = self.cache_info.clone();
                l.push(("engine", i.to_string()));
                l
            })
            .collect();
        w.gauge(
            "vllm:cache_config_info",
            Some("Information of the LLMEngine CacheConfig"),
            info.iter().map(|l| (l, 1.0)),
        );
        w.out
    }
}
