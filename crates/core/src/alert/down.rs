//! `LLMTargetDown` when the target's /metrics fails but its requests are still measured:
//! a tap in front of it or its spans judge every request (latency, SLO attainment, errors,
//! goodput), so the alert is a ticket that names them. It pages only when nothing measures
//! the engine (docs/alerts.md#llmtargetdown-while-requests-are-measured).
//!
//! A down target's [`AlertInput`] carries one window per request source that saw a request
//! finish in the target's shortest window ([`super::from_report`]); none when nothing did.

use super::input::{AlertInput, DataSource, Sources, WindowInput};
use super::rule::{Condition, Severity};
use super::table::render;
use std::time::Duration;

use crate::duration::format_duration;
use crate::report::{Health, TargetReport};

/// The summary while a request source still measures the target.
pub const MEASURED_SUMMARY: &str = "{who}'s metrics endpoint is down; its requests are still measured by {sources}";
/// The description while a request source still measures the target.
pub const MEASURED_DESCRIPTION: &str = "Scrapes of {who} are failing, so its queue, KV cache and token counters are not read; its requests are still measured by {sources} (latency, SLO attainment, errors, goodput). It pages once nothing measures them.";

/// Since when a target is down, as the summary and the status page say it: after its last
/// successful scrape (and how long ago at `now_ms`), or since the daemon started when it
/// never had one.
pub fn since(h: &Health, now_ms: i64) -> String {
    match h.last_successful_scrape_ms {
        Some(t) => {
            let ago = Duration::from_secs(((now_ms - t).max(0) as u64).div_ceil(1000));
            format!("since after {} ({} ago)", crate::duration::rfc3339_ms(t), format_duration(ago))
        }
        None => "since the daemon started (no successful scrape yet)".to_string(),
    }
}

/// The request sources that measured `t` in its shortest window, each once, as the windows
/// of its down input.
pub fn measuring(t: &TargetReport) -> Vec<WindowInput> {
    let mut out: Vec<WindowInput> = Vec::new();
    for m in t.models.iter() {
        let Some(w) = m.windows.iter().min_by_key(|w| w.window) else { continue };
        for r in w.requests.iter().filter(|r| r.requests > 0 && r.source != DataSource::Metrics) {
            if out.iter().any(|x| x.slo_source == r.source) {
                continue;
            }
            out.push(WindowInput {
                window: w.window,
                coverage: w.coverage,
                slo_source: r.source,
                slo_coverage: r.coverage,
                output_tokens_per_second: Some(r.output_tokens_per_second),
                preemptions_per_second: None,
                ttft_p99: None,
                tpot_p99: None,
                waiting_at_start: None,
                kv_usage: None,
                slos: Vec::new(),
                sources: Sources {
                    tokens_per_second: [(r.source, r.output_tokens_per_second)].into(),
                    ..Sources::default()
                },
            });
        }
    }
    out.sort_by_key(|w| w.slo_source);
    out
}

/// Turns the `LLMTargetDown` condition of a down `input` into a ticket that names the
/// sources still measuring it; leaves it as configured when there are none.
pub fn still_measured(c: &mut Condition, input: &AlertInput) {
    let sources: Vec<&str> = input
        .windows
        .iter()
        .filter_map(|w| match w.slo_source {
            DataSource::Tap => Some("the tap"),
            DataSource::Otlp => Some("its spans"),
            DataSource::Metrics => None,
        })
        .collect();
    if sources.is_empty() {
        return;
    }
    let (sources, who) = (sources.join(" and "), format!("target {}", input.target));
    let vars = [("who", who.as_str()), ("sources", sources.as_str())];
    c.labels.insert("severity".to_string(), Severity::Ticket.as_str().to_string());
    c.annotations.insert("summary".to_string(), render(MEASURED_SUMMARY, &vars));
    c.annotations.insert("description".to_string(), render(MEASURED_DESCRIPTION, &vars));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::AlertingConfig;
    use crate::alert::rule::conditions;
    use crate::duration::Window;

    fn down(sources: &[DataSource]) -> AlertInput {
        let window = |s: &DataSource| WindowInput {
            window: Window::from_secs(60),
            coverage: 0.5,
            slo_source: *s,
            slo_coverage: 1.0,
            output_tokens_per_second: Some(10.0),
            preemptions_per_second: None,
            ttft_p99: None,
            tpot_p99: None,
            waiting_at_start: None,
            kv_usage: None,
            slos: Vec::new(),
            sources: Sources::default(),
        };
        AlertInput {
            target: "llama".into(),
            model: String::new(),
            up: false,
            waiting_now: None,
            slos: Vec::new(),
            windows: sources.iter().map(window).collect(),
            capacity: Vec::new(),
        }
    }

    fn target_down(input: AlertInput, yaml: &str) -> Condition {
        let cfg: AlertingConfig = serde_saphyr::from_str(yaml).unwrap();
        let mut all = conditions(&cfg.rule_set(), &[input], None);
        assert_eq!(all.len(), 1, "{all:?}");
        all.remove(0)
    }

    #[test]
    fn a_page_only_when_nothing_measures() {
        let c = target_down(down(&[]), "{}");
        assert_eq!(c.labels["severity"], "page");
        assert_eq!(c.annotations["summary"], "target llama is down");
        assert!(c.annotations["description"].ends_with("nothing about it can be measured."));

        let c = target_down(down(&[DataSource::Tap]), "{}");
        assert_eq!(c.labels["severity"], "ticket");
        assert_eq!(
            c.annotations["summary"],
            "target llama's metrics endpoint is down; its requests are still measured by the tap"
        );
        let d = &c.annotations["description"];
        assert!(d.contains("still measured by the tap (latency") && !d.contains("nothing about it"), "{d}");

        let c = target_down(down(&[DataSource::Tap, DataSource::Otlp]), "rules: {LLMTargetDown: {severity: ticket}}");
        assert_eq!(c.labels["severity"], "ticket");
        assert!(c.annotations["summary"].ends_with("measured by the tap and its spans"), "{c:?}");
        // A source that is not a request path says nothing.
        assert_eq!(target_down(down(&[DataSource::Metrics]), "{}").labels["severity"], "page");
    }
}
