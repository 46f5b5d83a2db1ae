//! The exported families' names, HELP and TYPE, and the label names they share
//! (docs/metrics.md): the contract dashboards, rules and tests read.

use super::{alerts, budget, capacity, gpu, limits, requests};
use crate::canonical::HistogramKind;

pub const TTFT: &str = "llm_slo_ttft_seconds";
pub const TPOT: &str = "llm_slo_tpot_seconds";
pub const ITL: &str = "llm_slo_itl_seconds";
pub const E2E: &str = "llm_slo_e2e_seconds";
pub const BRACKET: &str = "llm_slo_quantile_bracket_seconds";
pub const LATENCY_MEAN: &str = "llm_slo_latency_mean_seconds";
pub const TOKENS: &str = "llm_slo_tokens_per_second";
pub const REQUESTS: &str = "llm_slo_requests_per_second";
pub const FINISHED_BY_REASON: &str = "llm_slo_finished_requests_per_second";
pub const KV_UTILIZATION: &str = "llm_slo_kv_cache_utilization_ratio";
pub const KV_BAND_TIME: &str = "llm_slo_kv_cache_band_time_ratio";
pub const ATTAINMENT: &str = "llm_slo_attainment_ratio";
pub const GOODPUT_TOKENS: &str = "llm_slo_goodput_tokens_per_second";
pub const GOODPUT_REQUESTS: &str = "llm_slo_goodput_requests_per_second";
pub const BURN_RATE: &str = "llm_slo_error_budget_burn_rate";
pub const SLO_EVALUABLE: &str = "llm_slo_evaluable";
pub const WINDOW_REQUESTS: &str = "llm_slo_window_requests";
pub const KV_CURRENT_BAND: &str = "llm_slo_kv_cache_band";
pub const KV_CAPACITY: &str = "llm_slo_kv_cache_capacity_tokens";
pub const RUNNING: &str = "llm_slo_requests_running";
pub const WAITING: &str = "llm_slo_requests_waiting";
pub const PREEMPTIONS: &str = "llm_slo_preemptions_per_second";
pub const TTFT_COMPONENT: &str = "llm_slo_ttft_component_mean_seconds";
pub const REQUEST_TOKENS_MEAN: &str = "llm_slo_request_tokens_mean";
pub const PROMPT_LENGTH_SHARE: &str = "llm_slo_prompt_length_cumulative_ratio";
pub const GENERATION_LENGTH_SHARE: &str = "llm_slo_generation_length_cumulative_ratio";
pub const SPEC_ACCEPTANCE: &str = "llm_slo_spec_decode_acceptance_ratio";
pub const SPEC_ACCEPTED_LENGTH: &str = "llm_slo_spec_decode_mean_accepted_length";
pub const SPEC_POSITION: &str = "llm_slo_spec_decode_position_acceptance_ratio";
pub const SPEC_SPEEDUP: &str = "llm_slo_spec_decode_speedup_estimate";
pub const PREFIX_HIT: &str = "llm_slo_prefix_cache_hit_ratio";
pub const WINDOW_COVERAGE: &str = "llm_slo_window_coverage_ratio";
pub const TARGET_UP: &str = "llm_slo_target_up";
pub const TARGET_INFO: &str = "llm_slo_target_info";
/// The discovery labels [`TARGET_INFO`] carries (docs/discovery.md#labels); a discovered
/// target's other labels are in /api/v1/report only, so that a target file cannot multiply
/// series.
pub const TARGET_INFO_LABELS: [&str; 4] = ["discovery", "namespace", "pod", "node"];
pub const SCRAPE_DURATION: &str = "llm_slo_scrape_duration_seconds";
pub const SCRAPE_ERRORS: &str = "llm_slo_scrape_errors_total";
pub const SCRAPE_WARNINGS: &str = "llm_slo_scrape_warnings_total";
pub const LAST_SCRAPE_SUCCESS: &str = "llm_slo_target_last_scrape_success_timestamp_seconds";
pub const LAST_EVALUATION: &str = "llm_slo_target_last_evaluation_timestamp_seconds";

/// Every family this module emits, in output order, with HELP and TYPE.
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        TTFT,
        "Time to first token quantile q over the window: source=metrics is PromQL-exact histogram_quantile of the engine's buckets; tap/otlp the nearest-rank quantile of measured requests.",
        "gauge",
    ),
    (TPOT, "Per-request time per output token quantile over the window (PromQL-exact).", "gauge"),
    (ITL, "Inter-token latency quantile over the window (PromQL-exact).", "gauge"),
    (E2E, "End-to-end request latency quantile over the window (PromQL-exact).", "gauge"),
    (
        BRACKET,
        "Bounds of the histogram bucket that holds each exported quantile; the quantile is interpolated inside.",
        "gauge",
    ),
    (
        LATENCY_MEAN,
        "Mean of a latency histogram over the window (metric=ttft|tpot|itl|e2e): increase of its _sum over increase of its _count.",
        "gauge",
    ),
    (
        TOKENS,
        "Token throughput, sum over shards of rate(tokens[window]); direction=input is prompt, output is generated.",
        "gauge",
    ),
    (REQUESTS, "Finished requests per second over the window, every finish reason.", "gauge"),
    (
        FINISHED_BY_REASON,
        "Finished requests per second over the window by the engine's finish reason (stop, length, abort, error, success, other).",
        "gauge",
    ),
    (
        KV_UTILIZATION,
        "KV-cache usage (0-1): mean and max over the window's scrapes; stat=last, at the last scrape, has no window.",
        "gauge",
    ),
    (KV_BAND_TIME, "Share of the window's scrapes with KV-cache usage in each band.", "gauge"),
    (
        ATTAINMENT,
        "Share of the window's requests meeting an SLO clause (joint: all clauses, failures count as bad). bound=lower|upper bracket the truth; source=metrics: estimate interpolates (joint: independence product); tap/otlp: exact per request, bounds apart only for TPOT from a counted token number.",
        "gauge",
    ),
    (
        GOODPUT_TOKENS,
        "Output tokens/s of requests meeting the SLO: joint attainment x output tokens/s, with bounds.",
        "gauge",
    ),
    (GOODPUT_REQUESTS, "Requests/s meeting the SLO: joint attainment x finished requests/s, with bounds.", "gauge"),
    (BURN_RATE, "Error-budget burn rate (1 - joint attainment) / (1 - objective), with bounds.", "gauge"),
    (
        SLO_EVALUABLE,
        "1 when the SLO could be evaluated on this engine; 0 when it lacks a clause's histogram (see /api/v1/report for the reason).",
        "gauge",
    ),
    (
        WINDOW_REQUESTS,
        "Requests finished in the window (source=metrics: raw increase), and how many failed or were aborted (outcome label); tap/otlp also count outcome=unobservable, left out of the joint population.",
        "gauge",
    ),
    (KV_CURRENT_BAND, "1 for the KV-cache band of the last scrape, 0 for the others (no window).", "gauge"),
    (KV_CAPACITY, "KV-cache capacity in tokens at the last scrape (no window).", "gauge"),
    (
        RUNNING,
        "Requests in the running batch: mean and max over the window's scrapes; stat=last has no window.",
        "gauge",
    ),
    (
        WAITING,
        "Requests waiting in the queue: mean and max over the window's scrapes; stat=last has no window.",
        "gauge",
    ),
    (PREEMPTIONS, "Preemption events per second, sum over shards of rate(preemptions[window]).", "gauge"),
    (
        TTFT_COMPONENT,
        "Mean TTFT and its parts over the window: queue, prefill, and other (API server, tokenization). Means only.",
        "gauge",
    ),
    (REQUEST_TOKENS_MEAN, "Mean prompt (input) and output tokens per request finished in the window.", "gauge"),
    (
        PROMPT_LENGTH_SHARE,
        "Share of requests finished in the window with a prompt of at most prompt_tokens_le tokens.",
        "gauge",
    ),
    (
        GENERATION_LENGTH_SHARE,
        "Share of requests finished in the window with at most generation_tokens_le output tokens.",
        "gauge",
    ),
    (SPEC_ACCEPTANCE, "Speculative decoding: accepted / proposed draft tokens over the window.", "gauge"),
    (SPEC_ACCEPTED_LENGTH, "Speculative decoding: tokens per verification step, 1 + accepted / drafts.", "gauge"),
    (SPEC_POSITION, "Speculative decoding: accepted tokens at a draft position / drafts.", "gauge"),
    (
        SPEC_SPEEDUP,
        "Speculative decoding: expected speedup for the configured draft cost ratio (a model, not a measurement).",
        "gauge",
    ),
    (PREFIX_HIT, "Prefix-cache hits / queries over the window.", "gauge"),
    (
        WINDOW_COVERAGE,
        "Share of the window covered by scrape data (0-1): time since the model's oldest scrape in the window plus one scrape spacing, over the window. Below 1 until the daemon has scraped for a whole window.",
        "gauge",
    ),
    (TARGET_UP, "1 when the last scrape of the target succeeded.", "gauge"),
    (
        TARGET_INFO,
        "Always 1, for each discovered target: which discovery source found it and, from Kubernetes or a target file, its pod, namespace and node.",
        "gauge",
    ),
    (SCRAPE_DURATION, "Duration of the last scrape of the target.", "gauge"),
    (SCRAPE_ERRORS, "Failed scrapes of the target since start, by reason.", "counter"),
    (
        SCRAPE_WARNINGS,
        "Scrapes of the target accepted with a problem since start, by reason (duplicate series, an unusable histogram).",
        "counter",
    ),
    (LAST_SCRAPE_SUCCESS, "Unix time the last successful scrape of the target started.", "gauge"),
    (
        LAST_EVALUATION,
        "Unix time the target's exported values were evaluated at; behind the other targets when its evaluation is late.",
        "gauge",
    ),
];

/// HELP text and TYPE of an exported family (this module's, the alert and GPU ones).
pub fn family_meta(name: &str) -> Option<(&'static str, &'static str)> {
    if name == alerts::ALERT_FAMILY {
        return Some((alerts::ALERT_HELP, "gauge"));
    }
    if name == alerts::READY_FAMILY {
        return Some((alerts::READY_HELP, "gauge"));
    }
    FAMILIES
        .iter()
        .find(|f| f.0 == name)
        .map(|f| (f.1, f.2))
        .or_else(|| gpu::family_meta(name))
        .or_else(|| requests::family_meta(name))
        .or_else(|| limits::family_meta(name))
        .or_else(|| budget::family_meta(name))
        .or_else(|| capacity::family_meta(name))
}

/// The quantile family of a latency histogram, if it is exported.
pub fn latency_family(kind: HistogramKind) -> Option<&'static str> {
    match kind {
        HistogramKind::Ttft => Some(TTFT),
        HistogramKind::Tpot => Some(TPOT),
        HistogramKind::Itl => Some(ITL),
        HistogramKind::E2e => Some(E2E),
        _ => None,
    }
}

/// The label that carries a latency gauge's quantile level, `q="0.99"`. Not `quantile`: in
/// the exposition format that label belongs to summaries (with `_sum` and `_count`), and
/// these are gauges over a window, so `promtool check metrics` rejects it.
pub const QUANTILE_LABEL: &str = "q";

/// The label of [`PROMPT_LENGTH_SHARE`]: the prompt length in tokens the share is at or
/// under. Not `le`, which belongs to histogram buckets.
pub const PROMPT_TOKENS_LE_LABEL: &str = "prompt_tokens_le";

/// The label of [`GENERATION_LENGTH_SHARE`], as [`PROMPT_TOKENS_LE_LABEL`] is for prompts.
pub const GENERATION_TOKENS_LE_LABEL: &str = "generation_tokens_le";
