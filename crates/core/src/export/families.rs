//! The per-target families' declarations (docs/metrics.md): name, HELP, TYPE, unit and label
//! names, the contract dashboards, rules and tests read; and the label names other families
//! share with them.

use super::registry::{Family, LabelValue, Unit};
use crate::canonical::{HistogramKind, WarningReason};
use crate::report::KvBand;

crate::label_set! {
    pub Quantile = [target, model, window, source, q];
    pub Bracket = [target, model, window, metric, q, side];
    pub LatencyMean = [target, model, window, source, metric];
    pub Tokens = [target, model, window, source, direction];
    pub Source = [target, model, window, source];
    pub FinishReason = [target, model, window, finished_reason];
    /// `stat="last"` has no `window` (docs/metrics.md#series-without-a-window).
    pub Stat = [target, model, window, stat];
    pub Band = [target, model, window, band: KvBand];
    pub Attainment = [target, model, window, source, slo, clause, bound];
    pub Goodput = [target, model, window, source, slo, bound];
    pub Slo = [target, model, window, source, slo];
    pub SloOutcome = [target, model, window, source, slo, outcome];
    pub ModelBand = [target, model, band: KvBand];
    pub Model = [target, model];
    pub Window = [target, model, window];
    pub Component = [target, model, window, component];
    pub Direction = [target, model, window, direction];
    pub PromptLe = [target, model, window, prompt_tokens_le];
    pub GenerationLe = [target, model, window, generation_tokens_le];
    pub Position = [target, model, window, position];
    pub Target = [target];
    /// Only the labels discovery knows for the target.
    pub TargetInfo = [target, discovery, namespace, pod, node];
    pub TargetReason = [target, reason];
    pub TargetWarning = [target, reason: WarningReason];
}

impl LabelValue for KvBand {
    const ALL: &'static [KvBand] = &KvBand::ALL;
    fn as_str(self) -> &'static str {
        KvBand::as_str(self)
    }
}

impl LabelValue for WarningReason {
    const ALL: &'static [WarningReason] = WarningReason::ALL;
    fn as_str(self) -> &'static str {
        WarningReason::as_str(self)
    }
}

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
pub const FAMILIES: &[Family] = &[
    Family::gauge::<Quantile>(
        TTFT,
        Unit::Seconds,
        "Time to first token quantile q over the window: source=metrics is PromQL-exact histogram_quantile of the engine's buckets; tap/otlp the nearest-rank quantile of measured requests.",
    ),
    Family::gauge::<Quantile>(
        TPOT,
        Unit::Seconds,
        "Per-request time per output token quantile over the window (PromQL-exact).",
    ),
    Family::gauge::<Quantile>(ITL, Unit::Seconds, "Inter-token latency quantile over the window (PromQL-exact)."),
    Family::gauge::<Quantile>(
        E2E,
        Unit::Seconds,
        "End-to-end request latency quantile over the window (PromQL-exact).",
    ),
    Family::gauge::<Bracket>(
        BRACKET,
        Unit::Seconds,
        "Bounds of the histogram bucket that holds each exported quantile; the quantile is interpolated inside.",
    ),
    Family::gauge::<LatencyMean>(
        LATENCY_MEAN,
        Unit::Seconds,
        "Mean of a latency histogram over the window (metric=ttft|tpot|itl|e2e): increase of its _sum over increase of its _count.",
    ),
    Family::gauge::<Tokens>(
        TOKENS,
        Unit::TokensPerSecond,
        "Token throughput: source=metrics is the sum over shards of rate(tokens[window]) (direction=input is prompt, output is generated); source=tap|otlp the output tokens of the requests that source saw finish in the window, over its seconds.",
    ),
    Family::gauge::<Source>(
        REQUESTS,
        Unit::RequestsPerSecond,
        "Finished requests per second over the window, every finish reason (source=metrics) or status (source=tap|otlp).",
    ),
    Family::gauge::<FinishReason>(
        FINISHED_BY_REASON,
        Unit::RequestsPerSecond,
        "Finished requests per second over the window by the engine's finish reason (stop, length, abort, error, success, other).",
    ),
    Family::gauge::<Stat>(
        KV_UTILIZATION,
        Unit::Ratio,
        "KV-cache usage (0-1): mean and max over the window's scrapes; stat=last, at the last scrape, has no window.",
    ),
    Family::gauge::<Band>(KV_BAND_TIME, Unit::Ratio, "Share of the window's scrapes with KV-cache usage in each band."),
    Family::gauge::<Attainment>(
        ATTAINMENT,
        Unit::Ratio,
        "Share of the window's requests meeting an SLO clause (joint: all clauses, failures count as bad). bound=lower|upper bracket the truth; source=metrics: estimate interpolates (joint: independence product); tap/otlp: exact per request, bounds apart only for TPOT from a counted token number.",
    ),
    Family::gauge::<Goodput>(
        GOODPUT_TOKENS,
        Unit::TokensPerSecond,
        "Output tokens/s of requests meeting the SLO: joint attainment x output tokens/s, with bounds.",
    ),
    Family::gauge::<Goodput>(
        GOODPUT_REQUESTS,
        Unit::RequestsPerSecond,
        "Requests/s meeting the SLO: joint attainment x finished requests/s, with bounds.",
    ),
    Family::gauge::<Goodput>(
        BURN_RATE,
        Unit::Number,
        "Error-budget burn rate (1 - joint attainment) / (1 - objective), with bounds.",
    ),
    Family::gauge::<Slo>(
        SLO_EVALUABLE,
        Unit::Flag,
        "1 when the SLO could be evaluated on this engine; 0 when it lacks a clause's histogram (see /api/v1/report for the reason).",
    ),
    Family::gauge::<SloOutcome>(
        WINDOW_REQUESTS,
        Unit::Requests,
        "Requests finished in the window (source=metrics: raw increase), and how many failed or were aborted (outcome label); tap/otlp also count outcome=unobservable, left out of the joint population.",
    ),
    Family::gauge::<ModelBand>(
        KV_CURRENT_BAND,
        Unit::Flag,
        "1 for the KV-cache band of the last scrape, 0 for the others (no window).",
    ),
    Family::gauge::<Model>(KV_CAPACITY, Unit::Tokens, "KV-cache capacity in tokens at the last scrape (no window)."),
    Family::gauge::<Stat>(
        RUNNING,
        Unit::Requests,
        "Requests in the running batch: mean and max over the window's scrapes; stat=last has no window.",
    ),
    Family::gauge::<Stat>(
        WAITING,
        Unit::Requests,
        "Requests waiting in the queue: mean and max over the window's scrapes; stat=last has no window.",
    ),
    Family::gauge::<Window>(
        PREEMPTIONS,
        Unit::EventsPerSecond,
        "Preemption events per second, sum over shards of rate(preemptions[window]).",
    ),
    Family::gauge::<Component>(
        TTFT_COMPONENT,
        Unit::Seconds,
        "Mean TTFT and its parts over the window: queue, prefill, and other (API server, tokenization). Means only.",
    ),
    Family::gauge::<Direction>(
        REQUEST_TOKENS_MEAN,
        Unit::Tokens,
        "Mean prompt (input) and output tokens per request finished in the window.",
    ),
    Family::gauge::<PromptLe>(
        PROMPT_LENGTH_SHARE,
        Unit::Ratio,
        "Share of requests finished in the window with a prompt of at most prompt_tokens_le tokens.",
    ),
    Family::gauge::<GenerationLe>(
        GENERATION_LENGTH_SHARE,
        Unit::Ratio,
        "Share of requests finished in the window with at most generation_tokens_le output tokens.",
    ),
    Family::gauge::<Window>(
        SPEC_ACCEPTANCE,
        Unit::Ratio,
        "Speculative decoding: accepted / proposed draft tokens over the window.",
    ),
    Family::gauge::<Window>(
        SPEC_ACCEPTED_LENGTH,
        Unit::Tokens,
        "Speculative decoding: tokens per verification step, 1 + accepted / drafts.",
    ),
    Family::gauge::<Position>(
        SPEC_POSITION,
        Unit::Ratio,
        "Speculative decoding: accepted tokens at a draft position / drafts.",
    ),
    Family::gauge::<Window>(
        SPEC_SPEEDUP,
        Unit::Number,
        "Speculative decoding: expected speedup for the configured draft cost ratio (a model, not a measurement).",
    ),
    Family::gauge::<Window>(PREFIX_HIT, Unit::Ratio, "Prefix-cache hits / queries over the window."),
    Family::gauge::<Window>(
        WINDOW_COVERAGE,
        Unit::Ratio,
        "Share of the window covered by scrape data (0-1): time since the model's oldest scrape in the window plus one scrape spacing, over the window. Below 1 until the daemon has scraped for a whole window.",
    ),
    Family::gauge::<Target>(TARGET_UP, Unit::Flag, "1 when the last scrape of the target succeeded."),
    Family::gauge::<TargetInfo>(
        TARGET_INFO,
        Unit::Flag,
        "Always 1, for each discovered target: which discovery source found it and, from Kubernetes or a target file, its pod, namespace and node.",
    ),
    Family::gauge::<Target>(SCRAPE_DURATION, Unit::Seconds, "Duration of the last scrape of the target."),
    Family::counter::<TargetReason>(SCRAPE_ERRORS, Unit::Count, "Failed scrapes of the target since start, by reason."),
    Family::counter::<TargetWarning>(
        SCRAPE_WARNINGS,
        Unit::Count,
        "Scrapes of the target accepted with a problem since start, by reason (duplicate series, an unusable histogram).",
    ),
    Family::gauge::<Target>(
        LAST_SCRAPE_SUCCESS,
        Unit::Timestamp,
        "Unix time the last successful scrape of the target started.",
    ),
    Family::gauge::<Target>(
        LAST_EVALUATION,
        Unit::Timestamp,
        "Unix time the target's exported values were evaluated at; behind the other targets when its evaluation is late.",
    ),
];

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

/// The [`QUANTILE_LABEL`] value: shortest decimal that round-trips (`0.5`, `0.99`).
pub fn quantile_label(q: f64) -> String {
    format!("{q}")
}
