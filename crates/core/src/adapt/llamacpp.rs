//! llama.cpp's `llama-server` with `--metrics`, docs/engines.md#llamacpp.
//!
//! Counters and gauges under `llamacpp:` only: no latency histogram, no finished-request
//! counter and no model label (the server serves one model; its series belong to the
//! target's configured `model:`). Latency, SLO attainment and goodput therefore come only
//! from the request path (a tap or engine spans).
//!
//! `prompt_tokens_total` counts the prompt tokens the engine computed, without those it
//! reused from its prompt cache (`prompt_tokens_cached_total`). Every request's prompt
//! counts in one or the other, so the two add up to `prompt_tokens` as the other engines
//! count it, and to the prefix-cache queries whose hits are the cached ones.
//! `prompt_tokens_seconds` and `predicted_tokens_seconds` are throughputs since the previous
//! GET /metrics, whoever sent it, so they are not read; the counters give the same rates
//! per window. `n_tokens_max` (typed a counter) is a high-water mark and not read either.

use super::table::{EngineTable, Mapping, Target::*, m};
use crate::canonical::{CounterKind as C, GaugeKind as G};

const MAPPINGS: &[Mapping] = &[
    m("llamacpp:prompt_tokens_total", Counter(C::PromptTokens)),
    m("llamacpp:prompt_tokens_cached_total", CounterPart(C::PromptTokens, "cached")),
    m("llamacpp:tokens_predicted_total", Counter(C::GenerationTokens)),
    m("llamacpp:prompt_tokens_cached_total", Counter(C::PrefixCacheHits)),
    m("llamacpp:prompt_tokens_total", Counter(C::PrefixCacheQueries)),
    m("llamacpp:prompt_tokens_cached_total", CounterPart(C::PrefixCacheQueries, "cached")),
    m("llamacpp:n_decode_total", Counter(C::DecodeCalls)),
    m("llamacpp:spec_decode_num_drafts_total", Counter(C::SpecDrafts)),
    m("llamacpp:spec_decode_num_draft_tokens_total", Counter(C::SpecDraftTokens)),
    m("llamacpp:spec_decode_num_accepted_tokens_total", Counter(C::SpecAcceptedTokens)),
    m("llamacpp:requests_processing", Gauge(G::Running)),
    m("llamacpp:requests_deferred", Gauge(G::Waiting)),
    m("llamacpp:n_busy_slots_per_decode", Gauge(G::BusySlotsPerDecode)),
];

pub static TABLE: EngineTable = EngineTable { model_labels: &[], gauge_rank_label: None, mappings: MAPPINGS };
