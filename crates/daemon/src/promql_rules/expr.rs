//! PromQL building blocks: vLLM's series names, the user's selector, and the
//! "sum across pods, relabelled to `model`" pattern every fleet-wide expression uses.

use super::error::{SelectorError, SelectorProblem};
use crate::alert::rule::LatencyClause;
use crate::duration::Window;

/// vLLM's names for what the rules read (vLLM ≥ 0.11 for the per-request TPOT histogram).
pub const TTFT: &str = "vllm:time_to_first_token_seconds";
pub const TPOT: &str = "vllm:request_time_per_output_token_seconds";
pub const E2E: &str = "vllm:e2e_request_latency_seconds";
pub const FINISHED: &str = "vllm:request_success_total";
pub const GENERATION_TOKENS: &str = "vllm:generation_tokens_total";
pub const PREEMPTIONS: &str = "vllm:num_preemptions_total";
pub const WAITING: &str = "vllm:num_requests_waiting";
/// vLLM V1 renamed the KV gauge; either one is read.
pub const KV_USAGE: [&str; 2] = ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"];

/// The finish reasons the daemon counts as failures (`FinishReason::is_failure`: aborted or
/// failed, whatever the engine calls it); every other reason is a success, as in the
/// daemon's joint attainment. A test holds the two to the same list.
pub const FAILED_FINISH: &str = "abort|aborted|cancelled|error|failed";

/// The matcher of successful finishes: every reason but [`FAILED_FINISH`].
pub fn good_finish() -> String {
    format!("finished_reason!~\"{FAILED_FINISH}\"")
}

/// The engine's histogram a clause is judged on, by vLLM's name: the daemon's choice
/// (`evaluate::slo::histogram_of`), so that both judge a clause on the same observations.
pub fn clause_histogram(clause: crate::slo::Clause) -> &'static str {
    use crate::canonical::HistogramKind;
    match crate::evaluate::slo::histogram_of(clause) {
        HistogramKind::Ttft => TTFT,
        HistogramKind::Tpot => TPOT,
        _ => E2E,
    }
}

/// Without a `--selector`, a scrape target counts as an LLM engine when it exported
/// [`WAITING`] (a gauge every vLLM version exports, and which the queue alert reads anyway)
/// within this long: long enough that an engine down all night still pages in the morning,
/// short enough that Prometheus reads one gauge's day per engine at each evaluation.
pub const ENGINE_LOOKBACK: &str = "1d";

#[derive(Debug, Clone)]
pub struct Metrics {
    selector: String,
}

impl Metrics {
    pub fn vllm(selector: Option<&str>) -> Metrics {
        let s = selector.unwrap_or("").trim().trim_start_matches('{').trim_end_matches('}').trim();
        Metrics { selector: s.to_string() }
    }

    /// `name{selector, extra}`.
    pub fn series(&self, name: &str, extra: &str) -> String {
        let parts: Vec<&str> = [self.selector.as_str(), extra].into_iter().filter(|p| !p.is_empty()).collect();
        if parts.is_empty() { name.to_string() } else { format!("{name}{{{}}}", parts.join(", ")) }
    }

    /// `sum by (by) (<f>(name{…}[w]))` with `model_name` copied to `model`.
    pub fn sum_by(&self, by: &str, f: &str, name: &str, extra: &str, w: Window) -> String {
        format!("sum by ({by}) ({})", to_model(&format!("{f}({}[{w}])", self.series(name, extra))))
    }

    /// Share of window `w` covered by the model's data, like the daemon's
    /// `llm_slo_window_coverage_ratio` (docs/metrics.md#window-coverage): the time since
    /// the oldest sample of its finished-requests counter in the window, found by a
    /// subquery at a resolution of w/100, plus that resolution, over the window, capped
    /// at 1. Pods that came and went count: the model's history is what is covered.
    pub fn coverage(&self, w: Window) -> String {
        let step_ms = (w.millis() / 100).max(1);
        let oldest = format!(
            "min_over_time(min by (model) ({})[{w}:{}])",
            to_model(&format!("timestamp({})", self.series(FINISHED, ""))),
            crate::duration::format_duration(std::time::Duration::from_millis(step_ms as u64))
        );
        format!(
            "clamp_max((time() - {oldest} + {}) / {}, 1)",
            num(step_ms as f64 / 1000.0),
            num(w.millis() as f64 / 1000.0)
        )
    }

    /// The engines' scrape targets that are down now (`up == 0`). With a selector, `up` of
    /// the selected series: the user named the engines, and a pod that never served a
    /// metric is covered too. Without one, `up` alone would be every job in Prometheus
    /// (node exporters, databases), so only the targets that exported [`WAITING`] within
    /// [`ENGINE_LOOKBACK`] count (docs/fleet.md#llmtargetdown-and---selector).
    pub fn engines_down(&self) -> String {
        if self.selector.is_empty() {
            format!("up == 0 and on (job, instance) present_over_time({WAITING}[{ENGINE_LOOKBACK}])")
        } else {
            format!("{} == 0", self.series("up", ""))
        }
    }

    /// `sum by (by) (gauge{…})` with `model_name` copied to `model`.
    pub fn sum_gauge_by(&self, by: &str, name: &str) -> String {
        format!("sum by ({by}) ({})", to_model(&self.series(name, "")))
    }
}

/// Copies vLLM's `model_name` label to `model`, the daemon's name for it.
pub fn to_model(e: &str) -> String {
    format!("label_replace({e}, \"model\", \"$1\", \"model_name\", \"(.*)\")")
}

/// Copies `instance` to `target`, for alerts about one pod.
pub fn to_target(e: &str) -> String {
    format!("label_replace({e}, \"target\", \"$1\", \"instance\", \"(.*)\")")
}

/// The ways exporters spell a bucket bound: Go writes `1`, Python `1.0`.
pub fn le_regex(threshold_seconds: f64) -> String {
    let short = format!("{threshold_seconds}");
    if threshold_seconds.fract() == 0.0 && !short.contains(['e', 'E', '.']) {
        format!("{short}|{short}.0")
    } else {
        short
    }
}

/// A float as a PromQL literal (shortest round-trip form).
pub fn num(x: f64) -> String {
    format!("{x}")
}

/// Which recorded quantile family a latency alert reads.
pub fn latency_family(c: LatencyClause) -> &'static str {
    match c {
        LatencyClause::Ttft => "llm_slo:ttft_seconds",
        LatencyClause::Tpot => "llm_slo:tpot_seconds",
    }
}

/// Checks a user's `--selector` as PromQL label matchers (`job="vllm", namespace=~"llm-.*"`,
/// braces optional) and returns the matchers without braces. A value must be quoted:
/// `job=vllm` is not PromQL, and rules built on it would fail to load.
pub fn parse_selector(selector: &str) -> Result<String, SelectorError> {
    let fail = |problem| Err(SelectorError { selector: selector.to_string(), problem });
    let inner = selector.trim();
    let inner = inner.strip_prefix('{').map_or(inner, |s| s.strip_suffix('}').unwrap_or(s)).trim();
    let mut matchers = Vec::new();
    let mut rest = inner;
    while !rest.is_empty() {
        let name_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let name = &rest[..name_len];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return fail(SelectorProblem::ExpectedName { at: rest.to_string() });
        }
        let after = rest[name_len..].trim_start();
        let Some(op) = ["=~", "!~", "!=", "="].into_iter().find(|op| after.starts_with(op)) else {
            return fail(SelectorProblem::NoOperator { name: name.to_string() });
        };
        let value = after[op.len()..].trim_start();
        let quote = value.chars().next().filter(|q| matches!(q, '"' | '\'' | '`'));
        let Some(q) = quote else {
            let value = value.split(',').next().unwrap_or("").trim().to_string();
            return fail(SelectorProblem::Unquoted { name: name.to_string(), op, value });
        };
        // The closing quote, skipping escaped ones (backquoted strings have no escapes).
        let body = &value[1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                '\\' if q != '`' && !escaped => escaped = true,
                c if c == q && !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else {
            return fail(SelectorProblem::Unclosed { name: name.to_string(), quote: q });
        };
        matchers.push(format!("{name}{op}{q}{}{q}", &body[..end]));
        rest = body[end + q.len_utf8()..].trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        } else if !rest.is_empty() {
            return fail(SelectorProblem::ExpectedComma { at: rest.to_string() });
        }
    }
    Ok(matchers.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::FinishReason;

    #[test]
    fn the_rules_count_the_daemons_failures_as_failed() {
        for reason in FAILED_FINISH.split('|') {
            assert!(FinishReason::from_label(reason).is_failure(), "{reason}");
        }
        // Every reason the daemon knows a failure by is in the matcher; the rest succeed.
        for reason in ["stop", "length", "success", "ok", "abort", "aborted", "cancelled", "error", "failed", "x"] {
            let failed = FAILED_FINISH.split('|').any(|r| r == reason);
            assert_eq!(failed, FinishReason::from_label(reason).is_failure(), "{reason}");
        }
    }

    #[test]
    fn selectors_are_promql_matchers() {
        assert_eq!(parse_selector("job=\"vllm\"").unwrap(), "job=\"vllm\"");
        assert_eq!(
            parse_selector(" {job = \"vllm\",namespace=~'llm-.*', a!~`x,y`} ").unwrap(),
            "job=\"vllm\", namespace=~'llm-.*', a!~`x,y`"
        );
        assert_eq!(parse_selector(r#"a="x\"y", b!="""#).unwrap(), r#"a="x\"y", b!="""#);
        assert_eq!(parse_selector("").unwrap(), "");
        let err = parse_selector("job=vllm").unwrap_err().to_string();
        assert!(err.contains("must be quoted, like job=\"vllm\""), "{err}");
        assert!(parse_selector("job").unwrap_err().to_string().contains("needs one of"));
        assert!(parse_selector("1a=\"x\"").unwrap_err().to_string().contains("label name"));
        assert!(parse_selector("a=\"x").unwrap_err().to_string().contains("no closing"));
        assert!(parse_selector("a=\"x\" b=\"y\"").unwrap_err().to_string().contains("comma"));
    }

    #[test]
    fn le_spellings() {
        assert_eq!(le_regex(0.5), "0.5");
        assert_eq!(le_regex(1.0), "1|1.0");
        assert_eq!(le_regex(0.05), "0.05");
        assert_eq!(Metrics::vllm(Some("{job=\"v\"}")).series("x", "le=\"1\""), "x{job=\"v\", le=\"1\"}");
        assert_eq!(Metrics::vllm(None).series("x", ""), "x");
    }

    #[test]
    fn down_engines_are_the_selected_ones_or_those_that_exported_vllm_metrics() {
        assert_eq!(Metrics::vllm(Some("job=\"vllm\"")).engines_down(), "up{job=\"vllm\"} == 0");
        assert_eq!(
            Metrics::vllm(None).engines_down(),
            "up == 0 and on (job, instance) present_over_time(vllm:num_requests_waiting[1d])"
        );
    }
}
