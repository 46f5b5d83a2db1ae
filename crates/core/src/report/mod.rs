//! The result of one evaluation tick: what every output (/metrics, the JSON API,
//! `replay`, alerts, the demo's terminal summary) reads.
//!
//! The daemon publishes one `Report` per tick through an `ArcSwap`; readers never block
//! the evaluator.

pub mod budget;
pub mod capacity;
pub mod request;
mod status;

pub use status::{SloStatus, SloValues};

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::canonical::{Engine, FinishReason, HistogramKind};
use crate::duration::Window;
use crate::slo::Slo;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Evaluation instant, Unix milliseconds.
    pub t_ms: i64,
    pub targets: Vec<TargetReport>,
    /// Pending and firing alerts after this evaluation.
    pub alerts: Vec<AlertJson>,
    /// Per alert rule, target, model and window it reads: whether the window is covered
    /// enough for the rule to judge it yet (docs/alerts.md#after-a-restart).
    pub alert_readiness: Vec<RuleReadiness>,
    /// The GPUs of this engine (NVML and/or dcgm-exporter), latest readings.
    pub gpus: Vec<crate::gpu::reading::GpuReading>,
    /// The request path's counters and health; `None` where no request store runs (replay).
    pub request_path: Option<request::RequestPathReport>,
    /// What the values were judged against. Exported once per report
    /// (docs/metrics.md#slo-and-kv-band-limits); left out of the JSON report, whose
    /// windows carry each SLO's objective.
    #[serde(skip)]
    pub limits: ConfiguredLimits,
    /// Each SLO's error budget over its period, per target, model and source
    /// (docs/metrics.md#error-budget-over-a-period); empty where no budget book runs.
    pub budgets: Vec<budget::BudgetReport>,
    /// Capacity and saturation per target and model (docs/capacity.md); empty where no
    /// capacity book runs.
    pub capacity: Vec<capacity::CapacityReport>,
}

impl Report {
    /// The report as one target's reader sees it: the same JSON shape, with only the
    /// entries about `target` (the GPUs and request path are the daemon's own, kept
    /// whole). `None` when no target has that name.
    pub fn for_target(&self, target: &str) -> Option<TargetView<'_>> {
        let report = self.targets.iter().find(|t| t.target == target)?;
        Some(TargetView {
            t_ms: self.t_ms,
            targets: std::slice::from_ref(report),
            alerts: self.alerts.iter().filter(|a| a.labels.get("target").is_some_and(|t| t == target)).collect(),
            alert_readiness: self.alert_readiness.iter().filter(|r| r.target == target).collect(),
            gpus: &self.gpus,
            request_path: self.request_path.as_ref(),
            budgets: self.budgets.iter().filter(|b| b.target == target).collect(),
            capacity: self.capacity.iter().filter(|c| c.target == target).collect(),
        })
    }
}

/// [`Report::for_target`]: a fleet's report is megabytes, one target's a few kilobytes.
#[derive(Debug, Serialize)]
pub struct TargetView<'a> {
    pub t_ms: i64,
    pub targets: &'a [TargetReport],
    pub alerts: Vec<&'a AlertJson>,
    pub alert_readiness: Vec<&'a RuleReadiness>,
    pub gpus: &'a [crate::gpu::reading::GpuReading],
    pub request_path: Option<&'a request::RequestPathReport>,
    pub budgets: Vec<&'a budget::BudgetReport>,
    pub capacity: Vec<&'a capacity::CapacityReport>,
}

/// The configured SLOs (thresholds, objective, scope) and KV-cache band limits, so that
/// /metrics can export them beside the values measured against them: a dashboard then
/// draws the line the config sets, not a copy of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfiguredLimits {
    pub slos: Vec<Slo>,
    pub kv: KvThresholds,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    pub target: String,
    /// `None` until the first successful scrape.
    pub engine: Option<Engine>,
    pub health: Health,
    /// Shared between the evaluator's latest results and every report that carries them:
    /// copied per report, a fleet's windows would be held twice over (≈ 10 KiB a target,
    /// docs/footprint.md#10-000-targets-at-steady-state-a-day-of-history-an-slo-and-capacity).
    /// Changed through [`TargetReport::models_mut`].
    pub models: Arc<Vec<ModelReport>>,
}

impl TargetReport {
    /// The models to change: copied first where another report or the evaluator still
    /// shares them.
    pub fn models_mut(&mut self) -> &mut Vec<ModelReport> {
        Arc::make_mut(&mut self.models)
    }
}

/// Scrape health of one target, and how fresh its results are.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    pub up: bool,
    /// Why the last scrape failed, for humans.
    pub last_error: Option<String>,
    pub last_scrape_duration_seconds: Option<f64>,
    /// Failed scrapes by machine-readable reason (one of [`SCRAPE_ERROR_REASONS`]), since
    /// the daemon started. Only reasons that happened are in the map.
    pub errors_total: BTreeMap<String, u64>,
    /// Scrapes accepted with a problem, by [`WarningReason`](crate::canonical::WarningReason)
    /// label (`duplicate_series`, `histogram_without_inf`, …), since the daemon started.
    pub warnings_total: BTreeMap<String, u64>,
    /// When the last successful scrape started, Unix milliseconds; `None` before the first.
    pub last_successful_scrape_ms: Option<i64>,
    /// The instant this target's models were evaluated at, Unix milliseconds: the report's
    /// `t_ms`, or earlier when its evaluation is late and the previous results are shown
    /// (docs/limits.md#evaluation). `None` until its first evaluation completes.
    pub last_evaluation_ms: Option<i64>,
    /// Where a discovered target came from: `discovery` (the source) and the labels it gave
    /// (docs/discovery.md#labels); empty for a target of the config's `targets:` list.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// When the target left discovery (or the config, on reload), Unix milliseconds: it is
    /// no longer scraped nor evaluated, and its results and alerts stay as they were until
    /// it comes back or `scrape.target_grace` has passed. `None` for a present target.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vanished_ms: Option<i64>,
    /// The engine's `process_start_time_seconds` at the last successful scrape: a change
    /// is a restart (the capacity history starts again, docs/capacity.md#history).
    #[serde(skip)]
    pub process_start_s: Option<f64>,
}

/// Every reason a scrape can fail for, as `llm_slo_scrape_errors_total{reason}` names it
/// (docs/metrics.md#target-health-and-the-daemon). /metrics shows each of them for every
/// target from the start, at 0 until it happens.
pub const SCRAPE_ERROR_REASONS: &[&str] = &[
    "timeout",
    "connect",
    "http_status",
    "body_too_large",
    "read_error",
    "token_file",
    "redirect",
    "parse_error",
    "too_many_samples",
    "label_limit",
    "adapt_error",
    "too_many_models",
    "too_many_series",
    "internal",
];

#[derive(Debug, Clone, Serialize)]
pub struct ModelReport {
    pub model: String,
    pub windows: Vec<WindowReport>,
}

impl ModelReport {
    /// The shortest window that reports everything (not one only the alert rules read):
    /// what the capacity book and the status page's history read, and the one whose
    /// request windows list their requests by arrival (`request::StoreConfig::arrival_window`
    /// picks the same from the config).
    pub fn primary_window(&self) -> Option<&WindowReport> {
        self.windows.iter().filter(|w| !w.alert_only).min_by_key(|w| w.window)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct WindowReport {
    #[serde(serialize_with = "serialize_window")]
    pub window: Window,
    /// Evaluated only for the alert rules (docs/metrics.md#alert-only-windows): the fields
    /// the rules do not read are empty, so a chart or summary reads another window.
    pub alert_only: bool,
    /// Share of the window covered by this model's data, in [0, 1]: below 1 until the
    /// daemon has scraped for a whole window (docs/metrics.md#window-coverage). Alert rules
    /// reading the window wait until it reaches `alerting.min_window_coverage`.
    pub coverage: f64,
    /// PromQL-exact quantiles of every latency histogram the engine has.
    pub latency: Vec<LatencyQuantile>,
    /// `rate(prompt_tokens[w])`, summed over shards.
    pub input_tokens_per_second: Option<f64>,
    /// `rate(generation_tokens[w])`.
    pub output_tokens_per_second: Option<f64>,
    /// `rate(requests_finished[w])` over every finish reason.
    pub requests_per_second: Option<f64>,
    /// The same rate per finish reason (series without a reason left out).
    pub finish_reasons: Vec<FinishRate>,
    pub kv_cache: Option<KvReport>,
    /// Every configured SLO that applies to this target and model.
    pub slos: Vec<SloReport>,
    /// Requests in the running batch and in the queue, over the window's scrapes.
    pub running: Option<GaugeStats>,
    pub waiting: Option<GaugeStats>,
    /// KV-cache capacity in tokens at the last scrape (vLLM `cache_config_info`, SGLang).
    pub kv_capacity_tokens: Option<f64>,
    /// `rate(preemptions[w])`: events, not distinct requests.
    pub preemptions_per_second: Option<f64>,
    pub ttft_breakdown: Option<TtftBreakdown>,
    /// Mean prompt and output length of requests finished in the window.
    pub mean_prompt_tokens: Option<f64>,
    pub mean_output_tokens: Option<f64>,
    /// Share of requests finished in the window with a prompt of at most `le` tokens.
    pub prompt_length_mix: Vec<(f64, f64)>,
    /// Share of requests finished in the window with at most `le` output tokens.
    pub generation_length_mix: Vec<(f64, f64)>,
    /// Mean of each latency histogram over the window, Δsum / Δcount.
    pub latency_means: Vec<LatencyMean>,
    pub spec_decode: Option<SpecDecodeReport>,
    /// Prefix-cache hits / queries over the window (tokens; blocks on vLLM 0.8).
    pub prefix_cache_hit_ratio: Option<f64>,
    /// vLLM `--enable-mfu-metrics` counters as rates: FLOP/s and bytes/s (read + write) per GPU.
    pub engine_flops_per_gpu_per_second: Option<f64>,
    pub engine_bytes_per_gpu_per_second: Option<f64>,
    /// MFU, HBM bandwidth use, decode TPOT floor and cost, when GPU facts are known.
    pub gpu: Option<crate::gpu::derive::Derived>,
    /// The same window from requests (tap, then otlp): exact attainment, goodput and
    /// quantiles beside the histogram-derived values above (docs/metrics.md#exact-values-from-requests).
    pub requests: Vec<request::RequestWindow>,
}

/// First, last, mean and max of a gauge over the window's scrapes.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct GaugeStats {
    /// The oldest scrape in the window (for trends such as a growing queue).
    pub first: f64,
    pub last: f64,
    pub mean: f64,
    pub max: f64,
}

impl GaugeStats {
    pub fn of(samples: &[f64]) -> Option<GaugeStats> {
        let first = *samples.first()?;
        let last = *samples.last()?;
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(GaugeStats { first, last, mean, max })
    }
}

/// TTFT split into means: queue, prefill, and the rest (API server, tokenization, IPC).
/// Means only: quantiles do not add, and TTFT is observed at the first token while queue
/// and prefill are observed when requests finish, so the populations differ slightly.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TtftBreakdown {
    pub ttft: f64,
    pub queue: Option<f64>,
    pub prefill: Option<f64>,
    /// `ttft − queue − prefill`, when both parts are known.
    pub other: Option<f64>,
}

/// Speculative decoding over the window (vLLM spec-decode counters).
#[derive(Debug, Clone, Serialize)]
pub struct SpecDecodeReport {
    /// Accepted / proposed draft tokens.
    pub acceptance_ratio: Option<f64>,
    /// Tokens per verification step: 1 + accepted / drafts (the bonus token included).
    pub mean_accepted_length: Option<f64>,
    /// Accepted at position i / drafts.
    pub per_position: Vec<(u32, f64)>,
    /// Expected speedup for the configured draft-cost ratio (an estimate, not a measurement).
    pub speedup_estimate: Option<f64>,
}

impl WindowReport {
    /// A window with nothing measured yet.
    pub fn empty(window: Window) -> WindowReport {
        WindowReport {
            window,
            alert_only: false,
            coverage: 0.0,
            latency: Vec::new(),
            input_tokens_per_second: None,
            output_tokens_per_second: None,
            requests_per_second: None,
            finish_reasons: Vec::new(),
            kv_cache: None,
            slos: Vec::new(),
            running: None,
            waiting: None,
            kv_capacity_tokens: None,
            preemptions_per_second: None,
            ttft_breakdown: None,
            mean_prompt_tokens: None,
            mean_output_tokens: None,
            prompt_length_mix: Vec::new(),
            generation_length_mix: Vec::new(),
            latency_means: Vec::new(),
            spec_decode: None,
            prefix_cache_hit_ratio: None,
            engine_flops_per_gpu_per_second: None,
            engine_bytes_per_gpu_per_second: None,
            gpu: None,
            requests: Vec::new(),
        }
    }
}

fn serialize_window<S: serde::Serializer>(w: &Window, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&w.label())
}

#[derive(Debug, Clone, Serialize)]
pub struct LatencyQuantile {
    #[serde(serialize_with = "serialize_kind")]
    pub metric: HistogramKind,
    pub quantile: f64,
    /// `histogram_quantile(q, sum by (le) (rate(x_bucket[w])))`; NaN when PromQL gives NaN.
    pub value: f64,
    /// Bounds of the bucket that holds the quantile, when there is one.
    pub bracket: Option<(f64, f64)>,
}

/// The mean of one latency histogram over a window: `Δ_sum / Δ_count`, next to its
/// quantiles (a mean far above the median says the tail is long).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencyMean {
    #[serde(serialize_with = "serialize_kind")]
    pub metric: HistogramKind,
    pub seconds: f64,
}

/// Finished requests per second with one finish reason.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FinishRate {
    #[serde(serialize_with = "serialize_reason")]
    pub reason: FinishReason,
    pub per_second: f64,
}

fn serialize_reason<S: serde::Serializer>(r: &FinishReason, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.as_str())
}

fn serialize_kind<S: serde::Serializer>(k: &HistogramKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.as_str())
}

/// KV-cache band thresholds (the `kv_cache` key, docs/config.md#kv_cache).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvThresholds {
    pub underloaded: f64,
    pub target_low: f64,
    pub target_high: f64,
    pub critical: f64,
}

impl Default for KvThresholds {
    fn default() -> Self {
        KvThresholds { underloaded: 0.70, target_low: 0.75, target_high: 0.85, critical: 0.90 }
    }
}

/// KV-cache bands (docs/metrics.md#kv-cache), by default:
/// underloaded < 0.70 ≤ low < 0.75 ≤ target ≤ 0.85 < high ≤ 0.90 < critical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvBand {
    Underloaded,
    Low,
    Target,
    High,
    Critical,
}

impl KvBand {
    pub const ALL: [KvBand; 5] = [KvBand::Underloaded, KvBand::Low, KvBand::Target, KvBand::High, KvBand::Critical];

    pub fn as_str(self) -> &'static str {
        match self {
            KvBand::Underloaded => "underloaded",
            KvBand::Low => "low",
            KvBand::Target => "target",
            KvBand::High => "high",
            KvBand::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KvReport {
    pub last: f64,
    pub mean: f64,
    pub max: f64,
    /// The band of the last scrape.
    pub band: KvBand,
    /// Share of the window spent in each band (sums to 1).
    pub band_time: BTreeMap<KvBand, f64>,
}

/// One SLO over one window of one target and model.
#[derive(Debug, Clone, Serialize)]
pub struct SloReport {
    pub slo: String,
    pub objective: f64,
    pub status: SloStatus,
}

/// Whether one alert rule may judge one target and model yet, for one window it reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleReadiness {
    pub alertname: &'static str,
    pub target: String,
    pub model: String,
    #[serde(serialize_with = "serialize_window")]
    pub window: Window,
    /// Share of the window covered by data.
    pub coverage: f64,
    /// Share the rule needs (`alerting.min_window_coverage` or the rule's `min_coverage`).
    pub min_coverage: f64,
    pub ready: bool,
    /// Seconds of further scraping until `min_coverage` is reached; 0 once ready.
    pub ready_in_seconds: f64,
}

/// One pending or firing alert, shaped like an entry of Prometheus's `/api/v1/alerts`.
#[derive(Debug, Clone, Serialize)]
pub struct AlertJson {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub state: &'static str,
    #[serde(rename = "activeAt")]
    pub active_at: String,
    /// The measured value, as a string like Prometheus does (JSON has no NaN).
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str) -> TargetReport {
        TargetReport { target: name.into(), engine: None, health: Health::default(), models: vec![].into() }
    }

    fn alert(target: &str) -> AlertJson {
        AlertJson {
            labels: BTreeMap::from([("alertname".into(), "X".into()), ("target".into(), target.into())]),
            annotations: BTreeMap::new(),
            state: "firing",
            active_at: String::new(),
            value: "1".into(),
        }
    }

    #[test]
    fn one_targets_view_keeps_only_its_entries() {
        let report = Report {
            t_ms: 7,
            targets: vec![target("a"), target("b"), target("ab")],
            alerts: vec![alert("a"), alert("b"), alert("ab")],
            ..Report::default()
        };
        let view = report.for_target("b").expect("b is in the report");
        assert_eq!(view.t_ms, 7);
        assert_eq!(view.targets.iter().map(|t| t.target.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(view.alerts.iter().map(|a| a.labels["target"].as_str()).collect::<Vec<_>>(), ["b"]);
        assert!(report.for_target("c").is_none());
        let json = serde_json::to_value(&view).unwrap();
        let whole = serde_json::to_value(&report).unwrap();
        let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&json), keys(&whole), "the same shape as the whole report");
    }
}
