//! The alerts section: every firing alert, then every pending one, each with its value in
//! the unit of what its rule measures, and the rules still waiting for their windows.

use std::fmt::Write;

use super::html::{Esc, NBSP, glue_units, pct, plural, safe_link, secs, times};
use crate::alert::AlertName;
use crate::alert::kind::RuleKind;
use crate::alert::table::spec;
use crate::report::{AlertJson, Report};

pub fn alerts(out: &mut String, report: &Report) {
    let mut shown: Vec<&AlertJson> = report.alerts.iter().collect();
    // Firing first; within a state, the order the engine keeps (by labels).
    shown.sort_by_key(|a| a.state != "firing");
    let _ = write!(out, r#"<section id="alerts"><h2>Alerts <small>{}</small></h2>"#, plural(shown.len(), "alert"));
    if shown.is_empty() {
        out.push_str(r#"<p class="ok">No alert is pending or firing.</p>"#);
    } else {
        out.push_str(
            "<table class=\"alerts\"><thead><tr><th>state</th><th>alert</th><th>target</th><th>model</th><th>labels</th><th>value</th><th>active since</th><th>summary</th><th>runbook</th></tr></thead><tbody>",
        );
        for a in shown {
            row(out, a);
        }
        out.push_str("</tbody></table>");
    }
    let mut waiting: Vec<&str> = report.alert_readiness.iter().filter(|r| !r.ready).map(|r| r.alertname).collect();
    waiting.sort_unstable();
    waiting.dedup();
    if !waiting.is_empty() {
        let _ = write!(
            out,
            r#"<p class="note">Not judging until their windows fill ({}): {} (<a href="api/v1/alerts">details</a>).</p>"#,
            plural(waiting.len(), "rule"),
            waiting.join(", ")
        );
    }
    out.push_str("</section>");
}

fn row(out: &mut String, a: &AlertJson) {
    let label = |k: &str| a.labels.get(k).map_or("", String::as_str);
    let _ = write!(
        out,
        r#"<tr class="{}"><td><span class="pill {}">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>"#,
        Esc(a.state),
        Esc(a.state),
        Esc(a.state),
        Esc(label("alertname")),
        Esc(label("target")),
        Esc(label("model")),
    );
    let others = a.labels.iter().filter(|(k, _)| !matches!(k.as_str(), "alertname" | "target" | "model"));
    for (k, v) in others {
        let _ = write!(out, r#"<span class="label">{}={}</span> "#, Esc(k), Esc(v));
    }
    let _ = write!(
        out,
        r#"</td><td class="value">{}</td><td>{}</td><td>{}</td><td>"#,
        Esc(&value(label("alertname"), &a.value)),
        Esc(&a.active_at),
        Esc(&glue_units(a.annotations.get("summary").map_or("", String::as_str))),
    );
    // The link is the alert's own annotation, as its rule computed it.
    match a.annotations.get("runbook_url").map(String::as_str) {
        Some(url) => match safe_link(url) {
            Some(url) => {
                let _ = write!(out, r#"<a class="runbook" href="{}" rel="noreferrer">runbook</a>"#, Esc(url));
            }
            None => {
                let _ = write!(out, "{}", Esc(url));
            }
        },
        None => out.push('-'),
    }
    out.push_str("</td></tr>");
}

/// An alert's value in the unit of what its rule measures (crates/core/src/alert/rule.rs
/// says which value each rule reports): a share as a percentage, a latency in ms or s, a
/// burn rate or headroom as a factor. An alert this build does not know keeps the number
/// as the engine wrote it, at most four decimals.
pub fn value(alertname: &str, v: &str) -> String {
    let Some(x) = v.parse::<f64>().ok().filter(|x| x.is_finite()) else { return v.to_string() };
    let Some(name) = AlertName::ALL.into_iter().find(|n| n.as_str() == alertname) else {
        return format!("{}", (x * 1e4).round() / 1e4);
    };
    match &spec(name).defaults {
        // The last KV-cache usage, a share of the cache.
        RuleKind::KvCacheSaturated { .. } => pct(x, 1),
        // The joint attainment estimate.
        RuleKind::GoodputDivergence { .. } => pct(x, 2),
        // The p99 latency, seconds.
        RuleKind::LatencyAboveSlo { .. } => secs(x),
        // The short window's burn rate, in budgets per period.
        RuleKind::ErrorBudgetBurn { .. } => times(x),
        // Capacity over arrivals.
        RuleKind::CapacityHeadroomLow { .. } => times(x),
        RuleKind::PreemptionsSustained { .. } => format!("{x:.3}{NBSP}preemptions/s"),
        RuleKind::QueueGrowing { .. } => format!("{x:.0} waiting"),
        // The value is a placeholder 0: the target's state is the news.
        RuleKind::TargetDown => "down".to_string(),
    }
}
