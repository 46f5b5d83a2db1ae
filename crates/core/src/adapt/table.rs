//! The per-engine mapping tables: which exposed family is which canonical quantity.
//!
//! Each engine module lists its families in preference order. When several sources map
//! to one canonical quantity (a rename kept for compatibility, e.g. vLLM 0.11 exposes both
//! `time_per_output_token_seconds` and `inter_token_latency_seconds` with identical data),
//! the first one that has samples for a model wins and the others are ignored, so a
//! quantity is never counted twice.

use crate::canonical::{CounterKind, FinishReason, GaugeKind, HistogramKind};

/// What one exposed family becomes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    Histogram(HistogramKind),
    Counter(CounterKind),
    /// A `RequestsFinished` counter whose finish reason is read from a label.
    FinishedByLabel(&'static str),
    /// A `RequestsFinished` counter with a fixed finish reason.
    Finished(FinishReason),
    /// `vllm:spec_decode_num_accepted_tokens_per_pos_total{position}`.
    SpecAcceptedPerPosition,
    Gauge(GaugeKind),
    /// An info gauge whose labels `num_gpu_blocks` × `block_size` give KV capacity in tokens.
    KvCapacityInfo,
    /// A histogram's `_sum` read as a monotonic counter (TGI has no token counters).
    HistogramSumAsCounter(CounterKind),
    /// A counter that adds to one another row fills (llama.cpp counts the prompt tokens it
    /// computed and those it reused from its cache apart): its series join that counter
    /// with the extra shard label `part="<name>"`, so that each keeps its own rate.
    CounterPart(CounterKind, &'static str),
}

/// One row: an exposed family name (for histograms, the base name without
/// `_bucket`/`_sum`/`_count`; for counters, the sample name with `_total`).
#[derive(Debug, Clone, Copy)]
pub struct Mapping {
    pub source: &'static str,
    pub target: Target,
}

pub const fn m(source: &'static str, target: Target) -> Mapping {
    Mapping { source, target }
}

/// Everything an engine adapter needs to know about one engine's exposition.
#[derive(Debug)]
pub struct EngineTable {
    /// The label that names the model (`model_name`, `model`), if any.
    pub model_labels: &'static [&'static str],
    /// Labels whose series repeat the same gauge value (SGLang tensor-parallel ranks):
    /// only the series where this label is `"0"` (or absent) is kept for gauges.
    pub gauge_rank_label: Option<&'static str>,
    pub mappings: &'static [Mapping],
}

impl Target {
    /// The canonical quantity this target fills, for preference resolution.
    pub fn slot(self) -> Slot {
        match self {
            Target::Histogram(k) => Slot::Histogram(k),
            Target::Counter(k) | Target::HistogramSumAsCounter(k) => Slot::Counter(k),
            // Sources with different fixed reasons add up (TGI success + failure); only
            // alternatives for the same reasons compete.
            Target::FinishedByLabel(_) => Slot::Counter(CounterKind::RequestsFinished),
            Target::Finished(r) => Slot::Finished(r),
            Target::SpecAcceptedPerPosition => Slot::SpecPerPosition,
            Target::Gauge(k) => Slot::Gauge(k),
            Target::KvCapacityInfo => Slot::Gauge(GaugeKind::KvCapacityTokens),
            // A part adds to the counter instead of competing with its main source.
            Target::CounterPart(k, part) => Slot::CounterPart(k, part),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    Histogram(HistogramKind),
    Counter(CounterKind),
    Gauge(GaugeKind),
    Finished(FinishReason),
    SpecPerPosition,
    CounterPart(CounterKind, &'static str),
}
