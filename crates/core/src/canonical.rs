//! The engine-neutral vocabulary every adapter maps onto (docs/engines.md#canonical-quantities).
//!
//! A [`Snapshot`] is one scrape of one target after its engine adapter ran. It keeps
//! every *series* apart (a data-parallel `engine` rank, a `finished_reason`, …) under a
//! [`ShardKey`], because PromQL computes `rate()` per series before it sums: summing
//! ranks first would disagree with Prometheus whenever one rank restarts.
//!
//! A quantity an engine lacks is simply not in the maps. Adapters never put a different
//! quantity under a canonical name (TGI's `mean_time_per_token` is not [`HistogramKind::Tpot`]).

use std::collections::BTreeMap;
use std::fmt;

use crate::kahan::{self, KahanSum};

/// Which inference server produced a scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Vllm,
    Sglang,
    Tgi,
    Trtllm,
    Nim,
    /// The NVIDIA Dynamo HTTP frontend, in front of vLLM, SGLang or TensorRT-LLM workers.
    Dynamo,
    /// llama.cpp's `llama-server`: counters and gauges only, no latency histogram.
    Llamacpp,
}

impl Engine {
    pub const ALL: [Engine; 7] =
        [Engine::Vllm, Engine::Sglang, Engine::Tgi, Engine::Trtllm, Engine::Nim, Engine::Dynamo, Engine::Llamacpp];

    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::Trtllm => "trtllm",
            Engine::Nim => "nim",
            Engine::Dynamo => "dynamo",
            Engine::Llamacpp => "llamacpp",
        }
    }

    /// Whether the engine exports latency histograms. Without them (llama.cpp), latency,
    /// SLO attainment and goodput come only from the request path: a tap or engine spans
    /// (docs/engines.md#llamacpp).
    pub fn has_latency_histograms(self) -> bool {
        !matches!(self, Engine::Llamacpp)
    }

    /// What `goodput inspect`, `goodput check --probe` and the status page say about an
    /// engine whose /metrics cannot judge a request; `None` for the others.
    pub fn request_path_note(self) -> Option<String> {
        (!self.has_latency_histograms()).then(|| {
            format!(
                "{self} exposes no latency histograms and no model label: latency, SLO attainment and goodput \
                 need the request path, a tap in front of the engine or its spans (docs/request-path.md)"
            )
        })
    }

    pub fn parse(s: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! kinds {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $s:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The canonical name used in `goodput inspect --format json` and the docs.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

kinds! {
    /// Histograms, each with the observation semantics of docs/engines.md#cross-engine-differences.
    HistogramKind {
        Ttft => "ttft",
        /// Per-request TPOT: `(last − first token) / (output tokens − 1)`, one observation per request.
        Tpot => "tpot",
        /// Inter-token latency, one observation per request per engine step (vLLM) or per token (SGLang).
        Itl => "itl",
        E2e => "e2e",
        QueueTime => "queue_time",
        PrefillTime => "prefill_time",
        DecodeTime => "decode_time",
        RequestPromptTokens => "request_prompt_tokens",
        RequestGenerationTokens => "request_generation_tokens",
    }
}

kinds! {
    /// Monotonic counters. `RequestsFinished` shards carry their [`FinishReason`].
    CounterKind {
        PromptTokens => "prompt_tokens",
        GenerationTokens => "generation_tokens",
        RequestsFinished => "requests_finished",
        Preemptions => "preemptions",
        SpecDrafts => "spec_drafts",
        SpecDraftTokens => "spec_draft_tokens",
        SpecAcceptedTokens => "spec_accepted_tokens",
        PrefixCacheQueries => "prefix_cache_queries",
        PrefixCacheHits => "prefix_cache_hits",
        /// vLLM `--enable-mfu-metrics`: FLOPs per GPU.
        EstimatedFlopsPerGpu => "estimated_flops_per_gpu",
        EstimatedReadBytesPerGpu => "estimated_read_bytes_per_gpu",
        EstimatedWriteBytesPerGpu => "estimated_write_bytes_per_gpu",
        /// Engine forward passes over the running batch (llama.cpp's `llama_decode()` calls).
        DecodeCalls => "decode_calls",
    }
}

kinds! {
    /// Instantaneous gauges.
    GaugeKind {
        /// Fraction 0–1 of KV-cache blocks in use.
        KvCacheUsage => "kv_cache_usage",
        Running => "running",
        Waiting => "waiting",
        /// KV capacity in tokens (`num_gpu_blocks × block_size` from `cache_config_info`).
        KvCapacityTokens => "kv_capacity_tokens",
        /// Mean requests in the batch per decode call since the engine started (llama.cpp).
        BusySlotsPerDecode => "busy_slots_per_decode",
    }
}

/// Why a request finished. Only `Abort` and `Error` count as failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FinishReason {
    Stop,
    Length,
    /// Succeeded, and the engine does not say why it stopped (TGI `tgi_request_success`).
    Success,
    Abort,
    Error,
    /// A reason string this version of goodput does not know; treated as success.
    Other,
}

impl FinishReason {
    pub fn from_label(s: &str) -> FinishReason {
        match s {
            "stop" => FinishReason::Stop,
            "success" | "ok" => FinishReason::Success,
            "length" => FinishReason::Length,
            "abort" | "aborted" | "cancelled" => FinishReason::Abort,
            "error" | "failed" => FinishReason::Error,
            _ => FinishReason::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Success => "success",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
            FinishReason::Other => "other",
        }
    }

    pub fn is_failure(self) -> bool {
        matches!(self, FinishReason::Abort | FinishReason::Error)
    }
}

/// Identifies one source series inside a model: the labels left after the model label
/// was taken out, rendered as `k="v",…` in the scrape's order, e.g. `engine="0"`.
/// Empty for engines with one series per quantity.
pub type ShardKey = String;

/// One source series' value, with the `_created` timestamp when the engine exposes one
/// (a change of it means the counter restarted even if its value did not go down).
#[derive(Debug, Clone, PartialEq)]
pub struct Shard<T> {
    pub key: ShardKey,
    pub created: Option<f64>,
    pub value: T,
}

/// A cumulative histogram, buckets sorted by `le` and ending with `+Inf`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    pub buckets: Vec<Bucket>,
    pub sum: f64,
    pub count: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Upper bound, parsed numerically (`"2"` == `"2.0"`).
    pub le: f64,
    /// Cumulative count of observations `<= le`.
    pub count: f64,
}

/// Histograms added up as Prometheus's `sum by (le)` adds their series: per bound, in the
/// order given, with compensated addition ([`KahanSum`]). A bound that only some of them
/// have gets only their counts.
#[derive(Debug, Clone, Default)]
pub struct HistogramSum {
    /// Sorted by bound.
    buckets: Vec<(f64, KahanSum)>,
    sum: KahanSum,
    count: KahanSum,
}

impl HistogramSum {
    pub fn add(&mut self, h: &Histogram) {
        for b in &h.buckets {
            self.add_bucket(b.le, b.count);
        }
        self.add_sum(h.sum);
        self.add_count(h.count);
    }

    /// One bucket series' value.
    pub fn add_bucket(&mut self, le: f64, count: f64) {
        let i = match self.buckets.binary_search_by(|x| x.0.total_cmp(&le)) {
            Ok(i) => i,
            Err(i) => {
                self.buckets.insert(i, (le, KahanSum::default()));
                i
            }
        };
        self.buckets[i].1.add(count);
    }

    pub fn add_sum(&mut self, v: f64) {
        self.sum.add(v);
    }

    pub fn add_count(&mut self, v: f64) {
        self.count.add(v);
    }

    pub fn finish(&self) -> Histogram {
        Histogram {
            buckets: self.buckets.iter().map(|(le, s)| Bucket { le: *le, count: s.sum().unwrap_or(0.0) }).collect(),
            sum: self.sum.sum().unwrap_or(0.0),
            count: self.count.sum().unwrap_or(0.0),
        }
    }
}

/// A counter series with the finish reason it counts (only for `RequestsFinished`).
#[derive(Debug, Clone, PartialEq)]
pub struct CounterValue {
    pub value: f64,
    pub reason: Option<FinishReason>,
}

/// Everything known about one served model in one scrape.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelSnapshot {
    pub histograms: BTreeMap<HistogramKind, Vec<Shard<Histogram>>>,
    pub counters: BTreeMap<CounterKind, Vec<Shard<CounterValue>>>,
    pub gauges: BTreeMap<GaugeKind, Vec<Shard<f64>>>,
    /// `vllm:spec_decode_num_accepted_tokens_per_pos_total`, keyed by position.
    pub spec_accepted_per_position: BTreeMap<u32, Vec<Shard<f64>>>,
}

impl ModelSnapshot {
    /// All shards of a histogram summed (what `sum by (le)` gives on one scrape).
    pub fn histogram_total(&self, kind: HistogramKind) -> Option<Histogram> {
        let shards = self.histograms.get(&kind)?;
        let mut total = HistogramSum::default();
        for s in shards {
            total.add(&s.value);
        }
        Some(total.finish())
    }

    /// All shards of a counter summed.
    pub fn counter_total(&self, kind: CounterKind) -> Option<f64> {
        self.counters.get(&kind).map(|v| kahan::sum(v.iter().map(|s| s.value.value)).unwrap_or(0.0))
    }

    /// All shards of a gauge summed (ranks of one model add up; usage is averaged).
    pub fn gauge_total(&self, kind: GaugeKind) -> Option<f64> {
        let total: KahanSum = self.gauges.get(&kind)?.iter().map(|s| s.value).collect();
        match kind {
            // Each data-parallel rank owns its own KV pool; the model's usage is the mean.
            GaugeKind::KvCacheUsage => total.mean(),
            // An average per decode call: ranks' averages do not add.
            GaugeKind::BusySlotsPerDecode => total.mean(),
            _ => total.sum(),
        }
    }

    pub fn has_histogram(&self, kind: HistogramKind) -> bool {
        self.histograms.get(&kind).is_some_and(|v| !v.is_empty())
    }
}

/// One scrape of one target on the canonical vocabulary.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub engine: Engine,
    /// Keyed by model name; engines without a model label (TGI) use the target's
    /// configured model or `""`.
    pub models: BTreeMap<String, ModelSnapshot>,
    /// `process_start_time_seconds`; a change means the engine restarted.
    pub process_start: Option<f64>,
    /// Number of metric families and samples in the scrape.
    pub families: usize,
    pub samples: usize,
    /// What was wrong with the scrape but did not fail it: ignored duplicates, unusable
    /// histograms (docs/config.md, "Scrape warnings").
    pub warnings: Vec<ScrapeWarning>,
}

/// A problem in an accepted scrape, for logs, `goodput inspect` and
/// `llm_slo_scrape_warnings_total{reason}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeWarning {
    pub reason: WarningReason,
    pub message: String,
}

/// Why a scrape was accepted with a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WarningReason {
    /// A series appeared more than once; the first sample was kept, as Prometheus does.
    DuplicateSeries,
    /// A latency histogram had no `le="+Inf"` bucket, so it was ignored: its quantiles are
    /// undefined (PromQL returns NaN) and its request count unknown.
    HistogramWithoutInf,
    /// A latency histogram had a NaN bucket count, so it was ignored.
    NanBucket,
    /// A bucket without a numeric `le` label was ignored.
    BucketWithoutLe,
    /// A histogram had `_count` but no buckets, so it was ignored.
    HistogramWithoutBuckets,
}

impl WarningReason {
    pub const ALL: &'static [WarningReason] = &[
        WarningReason::DuplicateSeries,
        WarningReason::HistogramWithoutInf,
        WarningReason::NanBucket,
        WarningReason::BucketWithoutLe,
        WarningReason::HistogramWithoutBuckets,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningReason::DuplicateSeries => "duplicate_series",
            WarningReason::HistogramWithoutInf => "histogram_without_inf",
            WarningReason::NanBucket => "nan_bucket",
            WarningReason::BucketWithoutLe => "bucket_without_le",
            WarningReason::HistogramWithoutBuckets => "histogram_without_buckets",
        }
    }
}

impl ScrapeWarning {
    pub fn new(reason: WarningReason, message: impl Into<String>) -> Self {
        ScrapeWarning { reason, message: message.into() }
    }
}

impl Snapshot {
    /// Canonical names this snapshot lacks in every model (the `absent` list of `inspect`).
    pub fn absent(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let any_h = |k| self.models.values().any(|m| m.has_histogram(k));
        let any_c = |k| self.models.values().any(|m| m.counters.get(&k).is_some_and(|v| !v.is_empty()));
        let any_g = |k| self.models.values().any(|m| m.gauges.get(&k).is_some_and(|v| !v.is_empty()));
        for &k in HistogramKind::ALL {
            if !any_h(k) {
                out.push(k.as_str());
            }
        }
        for &k in CounterKind::ALL {
            if !any_c(k) {
                out.push(k.as_str());
            }
        }
        for &k in GaugeKind::ALL {
            if !any_g(k) {
                out.push(k.as_str());
            }
        }
        out
    }
}
