//! Every knob of the simulator (YAML with `deny_unknown_fields`) and the named profiles.
//!
//! The defaults model a mid-size model on one accelerator: roughly 5 requests/s (≈ 800–900
//! output tokens/s) of capacity with the default workload, where the KV pool fills up. Profiles only change
//! the arrival process (and, for `spec`, turn on speculative decoding), so that `steady`
//! and `ramp` run the same engine and differ only in load.

use serde::{Deserialize, Serialize};

/// Why a simulator config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The YAML does not parse into a [`SimConfig`]; the parser's message names the key, its
    /// line and column, and is the whole message (it is not chained as a source too, which
    /// would print it twice).
    #[error("{0}")]
    Yaml(Box<serde_saphyr::Error>),
    /// A knob the model cannot run with; `reason` names the field (`engine.block_size …`)
    /// or the fields to change together.
    #[error("invalid simulator config: {reason}")]
    Invalid { reason: &'static str },
}

/// Which exposition the simulated engine serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Vllm,
    Sglang,
    Tgi,
}

/// A named starting point; every field can still be overridden.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Comfortably loaded: KV well under the 85 % band, no preemptions, TTFT far under 500 ms.
    Steady,
    /// Load rises linearly past saturation over `period_s`, then starts again.
    Ramp,
    /// A moderate base load with short bursts well above capacity.
    Burst,
    /// Steady load with speculative decoding on.
    Spec,
    /// No load of its own: every request comes from a client of the OpenAI API
    /// (`goodput simulate --listen`).
    None,
}

/// The shape of the open-loop arrival process (a non-homogeneous Poisson process).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Constant `rate`.
    Steady,
    /// Linear from `ramp_start_rate` to `rate` over `period_s`, repeating.
    Ramp,
    /// `rate`, plus `burst_rate` during the first `burst_length_s` of every `period_s`.
    Burst,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Target name: the recording directory and the `target` field of the ground truth.
    pub name: String,
    /// `model_name` label.
    pub model: String,
    /// Data-parallel engines (`engine` label "0", "1", …), each with its own scheduler.
    pub engines: u32,
    pub seed: u64,
    pub format: Format,
    /// Unix seconds of virtual time zero (offline mode).
    pub start_unix_s: u64,
    pub arrivals: Arrivals,
    pub workload: Workload,
    pub engine: EngineModel,
    pub faults: Faults,
}

/// Faults injected into requests from API clients (live mode), each with its own share of
/// requests, drawn from the seeded client stream. Generated load is never faulted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Faults {
    /// HTTP 500 with vLLM's error JSON, before anything is streamed; the engine never sees it.
    pub http_error_rate: f64,
    /// HTTP 200, then partway through the output an in-band `data: {"error": …}` event and
    /// `data: [DONE]`; the engine finishes the request with reason `error`.
    pub stream_error_rate: f64,
    /// Partway through the output the server closes the connection without `[DONE]`; the
    /// engine finishes the request with reason `abort`.
    pub server_abort_rate: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Arrivals {
    pub pattern: Pattern,
    /// Requests/s across all engines: the steady rate, the rate at the end of a ramp, or
    /// the base rate between bursts.
    pub rate: f64,
    pub ramp_start_rate: f64,
    /// Length of one ramp (it loops), or the time between burst starts.
    pub period_s: f64,
    pub burst_rate: f64,
    pub burst_length_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Log-normal prompt length: median and sigma of the underlying normal.
    pub prompt_median: f64,
    pub prompt_sigma: f64,
    /// Log-normal (heavy-tailed) output length before the `max_tokens` cap.
    pub output_median: f64,
    pub output_sigma: f64,
    /// The requests' `max_tokens`; a longer sampled output finishes with reason `length`.
    pub max_tokens: u32,
    /// Share of requests whose user gives up early (uniform in the interval below).
    pub abort_fraction: f64,
    pub abort_after_min_s: f64,
    pub abort_after_max_s: f64,
    /// Every client gives up after this long (0 = never). Bounds the queue under overload.
    pub client_timeout_s: f64,
    /// Share of requests that start with a shared system prompt of `shared_prefix_tokens`.
    pub shared_prefix_fraction: f64,
    pub shared_prefix_tokens: u32,
    /// API server time (tokenization, IPC) between arrival and the engine queue.
    pub frontend_overhead_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineModel {
    pub num_gpu_blocks: u32,
    pub block_size: u32,
    pub max_num_seqs: u32,
    /// Token budget of one step (prefill chunks plus decode tokens).
    pub max_num_batched_tokens: u32,
    pub max_model_len: u32,
    /// When false a prompt must fit the remaining budget whole to be scheduled.
    pub chunked_prefill: bool,
    /// Step time = base + prefill tokens·prefill_per_token + seqs·decode_per_seq
    ///           + KV tokens attended·kv_per_token.
    pub step_base_s: f64,
    pub prefill_per_token_s: f64,
    pub decode_per_seq_s: f64,
    pub kv_per_token_s: f64,
    /// Speculative decoding: draft tokens per step (0 = off).
    pub spec_tokens: u32,
    /// Probability that each draft token is accepted, given the previous one was.
    pub spec_acceptance: f64,
    /// Extra step time per draft token proposed (the drafter's cost).
    pub spec_draft_per_token_s: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            name: "sim".into(),
            model: "meta-llama/Llama-3.1-8B-Instruct".into(),
            engines: 1,
            seed: 1,
            format: Format::Vllm,
            start_unix_s: 1_767_225_600,
            arrivals: Arrivals::default(),
            workload: Workload::default(),
            engine: EngineModel::default(),
            faults: Faults::default(),
        }
    }
}

impl Default for Arrivals {
    fn default() -> Self {
        Arrivals {
            pattern: Pattern::Steady,
            rate: 2.5,
            ramp_start_rate: 1.0,
            period_s: 300.0,
            burst_rate: 12.0,
            burst_length_s: 5.0,
        }
    }
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            prompt_median: 400.0,
            prompt_sigma: 0.8,
            output_median: 120.0,
            output_sigma: 0.9,
            max_tokens: 1024,
            abort_fraction: 0.02,
            abort_after_min_s: 0.2,
            abort_after_max_s: 10.0,
            client_timeout_s: 60.0,
            shared_prefix_fraction: 0.3,
            shared_prefix_tokens: 256,
            frontend_overhead_s: 0.002,
        }
    }
}

impl Default for EngineModel {
    fn default() -> Self {
        EngineModel {
            num_gpu_blocks: 2048,
            block_size: 16,
            max_num_seqs: 128,
            max_num_batched_tokens: 2048,
            max_model_len: 8192,
            chunked_prefill: true,
            step_base_s: 0.010,
            prefill_per_token_s: 0.00005,
            decode_per_seq_s: 0.0001,
            kv_per_token_s: 0.000001,
            spec_tokens: 0,
            spec_acceptance: 0.7,
            spec_draft_per_token_s: 0.0004,
        }
    }
}

impl SimConfig {
    /// The defaults with a named profile applied.
    pub fn profile(p: Profile) -> SimConfig {
        let mut c = SimConfig::default();
        c.apply_profile(p);
        c
    }

    /// Changes only what the profile is about: the arrival process, and spec decoding.
    pub fn apply_profile(&mut self, p: Profile) {
        let a = &mut self.arrivals;
        match p {
            Profile::Steady => {
                a.pattern = Pattern::Steady;
                a.rate = 2.5;
            }
            Profile::Ramp => {
                a.pattern = Pattern::Ramp;
                a.ramp_start_rate = 0.5;
                a.rate = 12.0;
                a.period_s = 300.0;
            }
            Profile::Burst => {
                a.pattern = Pattern::Burst;
                a.rate = 2.0;
                a.burst_rate = 12.0;
                a.period_s = 60.0;
                a.burst_length_s = 5.0;
            }
            Profile::Spec => {
                a.pattern = Pattern::Steady;
                a.rate = 2.5;
                self.engine.spec_tokens = 3;
                self.engine.spec_acceptance = 0.7;
            }
            Profile::None => {
                a.pattern = Pattern::Steady;
                a.rate = 0.0;
            }
        }
    }

    /// Parses a YAML config; unknown keys are errors with line and column.
    pub fn from_yaml(text: &str) -> Result<SimConfig, ConfigError> {
        let c: SimConfig = serde_saphyr::from_str(text).map_err(|e| ConfigError::Yaml(Box::new(e)))?;
        c.validate()?;
        Ok(c)
    }

    /// Rejects configurations the model cannot run, saying which knob to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let e = &self.engine;
        let w = &self.workload;
        let a = &self.arrivals;
        let f = &self.faults;
        let checks: [(bool, &str); 17] = [
            (self.engines >= 1 && self.engines <= 64, "engines must be 1..=64"),
            (!self.name.is_empty() && !self.name.contains(['/', '\\']), "name must be non-empty without slashes"),
            (e.block_size >= 1, "engine.block_size must be >= 1"),
            (e.num_gpu_blocks >= 2, "engine.num_gpu_blocks must be >= 2"),
            (e.max_num_seqs >= 1, "engine.max_num_seqs must be >= 1"),
            (e.max_num_batched_tokens > e.spec_tokens, "engine.max_num_batched_tokens must exceed spec_tokens"),
            (e.max_model_len >= 2, "engine.max_model_len must be >= 2"),
            (
                (u64::from(e.num_gpu_blocks) - 1) * u64::from(e.block_size)
                    >= u64::from(e.max_model_len) + u64::from(e.spec_tokens),
                "the KV pool must hold one max_model_len sequence: raise engine.num_gpu_blocks or lower max_model_len",
            ),
            (
                [e.step_base_s, e.prefill_per_token_s, e.decode_per_seq_s, e.kv_per_token_s, e.spec_draft_per_token_s]
                    .iter()
                    .all(|x| x.is_finite() && *x >= 0.0)
                    && e.step_base_s > 0.0,
                "engine step costs must be finite and >= 0, step_base_s > 0",
            ),
            ((0.0..=1.0).contains(&e.spec_acceptance), "engine.spec_acceptance must be in [0, 1]"),
            (
                [a.rate, a.ramp_start_rate, a.burst_rate].iter().all(|x| x.is_finite() && *x >= 0.0 && *x <= 1e5),
                "arrival rates must be in [0, 100000] requests/s",
            ),
            (a.period_s.is_finite() && a.period_s > 0.0 && a.burst_length_s >= 0.0, "arrivals.period_s must be > 0"),
            (
                w.prompt_median >= 1.0
                    && w.output_median >= 1.0
                    && w.prompt_sigma >= 0.0
                    && w.output_sigma >= 0.0
                    && w.prompt_sigma <= 5.0
                    && w.output_sigma <= 5.0,
                "workload medians must be >= 1 and sigmas in [0, 5]",
            ),
            (w.max_tokens >= 1 && w.max_tokens < e.max_model_len, "workload.max_tokens must be in 1..max_model_len"),
            (
                (0.0..=1.0).contains(&w.abort_fraction) && (0.0..=1.0).contains(&w.shared_prefix_fraction),
                "fractions must be in [0, 1]",
            ),
            (
                w.abort_after_min_s >= 0.0
                    && w.abort_after_max_s >= w.abort_after_min_s
                    && w.client_timeout_s >= 0.0
                    && w.frontend_overhead_s >= 0.0
                    && w.frontend_overhead_s < 10.0,
                "workload timeouts must be >= 0 with abort_after_min_s <= abort_after_max_s",
            ),
            (
                [f.http_error_rate, f.stream_error_rate, f.server_abort_rate].iter().all(|x| (0.0..=1.0).contains(x))
                    && f.http_error_rate + f.stream_error_rate + f.server_abort_rate <= 1.0,
                "faults rates must each be in [0, 1] and sum to at most 1",
            ),
        ];
        match checks.iter().find(|(ok, _)| !ok) {
            Some(&(_, reason)) => Err(ConfigError::Invalid { reason }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_sets_any_knob_and_rejects_unknown_ones() {
        let c = SimConfig::from_yaml(
            "name: llama\nengines: 2\narrivals: {pattern: burst, rate: 3}\nengine:\n  num_gpu_blocks: 4096\n  spec_tokens: 2\n",
        )
        .expect("valid");
        assert_eq!((c.name.as_str(), c.engines, c.arrivals.pattern), ("llama", 2, Pattern::Burst));
        assert_eq!((c.engine.num_gpu_blocks, c.engine.spec_tokens), (4096, 2));
        assert_eq!(c.workload, Workload::default(), "unset sections keep defaults");

        let err = SimConfig::from_yaml("engine:\n  num_gpu_blokcs: 10\n").expect_err("typo").to_string();
        assert!(err.contains("num_gpu_blokcs") && err.contains('2'), "names the key and its line: {err}");
        let err = SimConfig::from_yaml("engine: {num_gpu_blocks: 10}\n").expect_err("too small").to_string();
        assert!(err.starts_with("invalid simulator config: ") && err.contains("num_gpu_blocks"), "{err}");
        let err = SimConfig { engines: 0, ..SimConfig::default() }.validate().expect_err("no engine");
        assert_eq!(err.to_string(), "invalid simulator config: engines must be 1..=64");
    }

    #[test]
    fn every_profile_is_valid_and_ramp_passes_the_steady_rate() {
        for p in [Profile::Steady, Profile::Ramp, Profile::Burst, Profile::Spec, Profile::None] {
            SimConfig::profile(p).validate().expect("profile validates");
        }
        let steady = SimConfig::profile(Profile::Steady);
        let ramp = SimConfig::profile(Profile::Ramp);
        assert!(ramp.arrivals.rate > 3.0 * steady.arrivals.rate);
        assert_eq!(ramp.engine, steady.engine, "profiles differ in load, not in the engine");
    }
}
