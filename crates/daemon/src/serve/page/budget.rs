//! The SLO table's error-budget column: each SLO's budget over its period (28 days unless
//! `slos[].period` says otherwise), the numbers `/metrics` exports as
//! `llm_slo_error_budget_*` (docs/metrics.md#error-budget-over-a-period). A window of minutes
//! says how fast the budget burns, not how much of it is left, so no window's attainment
//! is turned into a budget here.

use std::fmt::Write;
use std::time::Duration;

use super::html::{pct, times};
use crate::budget::BudgetReport;
use crate::duration::format_duration;
use crate::request::DataSource;
use crate::slo::Bounded;

/// Under this share left the budget is drawn amber: a quarter of the period's bad requests
/// is what remains to spend.
const LOW: f64 = 0.25;

/// The budget to show for one model and SLO of the target whose `budgets` these are: from
/// the first source with requests judged over the period, in the order the dashboards
/// prefer (tap, otlp, metrics); else the first there is, which still says how much of the
/// period is counted.
pub fn pick<'a>(budgets: &[&'a BudgetReport], model: &str, slo: &str) -> Option<&'a BudgetReport> {
    let rank = |s: DataSource| match s {
        DataSource::Tap => 0,
        DataSource::Otlp => 1,
        DataSource::Metrics => 2,
    };
    let mut mine: Vec<&BudgetReport> = budgets.iter().copied().filter(|b| b.model == model && b.slo == slo).collect();
    mine.sort_by_key(|b| rank(b.source));
    let judged = mine.iter().find(|b| b.values.is_some_and(|v| v.requests > 0.0));
    judged.or(mine.first()).copied()
}

/// What the budget is now: left, exhausted (spent more than once), or not known.
fn state(b: Option<&BudgetReport>) -> &'static str {
    match b.and_then(|b| b.values) {
        Some(v) if v.remaining.estimate < 0.0 => "exhausted",
        Some(_) => "left",
        None => "none",
    }
}

/// The cell of one SLO: the budget left over its period, or by how much it is overspent;
/// the bracket where the scrape cannot tell; the period, how much of it is counted, and
/// the source when it is not the histograms. `period` names the configured period when the
/// book has nothing for this SLO yet.
pub fn cell(out: &mut String, b: Option<&BudgetReport>, period: Duration) {
    let period = b.map_or(period, |b| b.period);
    let state = state(b);
    let _ = write!(out, r#"<div class="budget" data-budget="{state}" data-period="{}""#, format_duration(period));
    let values = b.and_then(|b| b.values);
    if let Some(v) = values {
        let _ = write!(out, r#" data-remaining="{}" data-consumed="{}""#, v.remaining.estimate, v.consumed.estimate);
    }
    out.push('>');
    match values {
        Some(v) if v.remaining.estimate < 0.0 => {
            let _ =
                write!(out, r#"<span class="left bad">budget exhausted: {} spent</span>"#, times(v.consumed.estimate));
        }
        Some(v) => {
            let class = if v.remaining.estimate < LOW { "warn" } else { "ok" };
            let _ = write!(out, r#"<span class="left {class}">{} left</span>"#, pct(v.remaining.estimate, 0));
        }
        None if b.is_some() => out.push_str(r#"<span class="note">no request judged yet</span>"#),
        None => out.push_str(r#"<span class="note">not counted yet</span>"#),
    }
    if let Some(v) = values.filter(|v| !v.remaining.is_exact()) {
        let _ = write!(out, r#" <span class="range">{}</span>"#, bracket(v.remaining));
    }
    let _ = write!(out, r#"<span class="period">over the last {}"#, format_duration(period));
    if let Some(b) = b.filter(|b| b.coverage < 1.0) {
        let _ = write!(out, ", {} of it counted", pct(b.coverage, 0));
    }
    if let Some(b) = b.filter(|b| b.source != DataSource::Metrics && b.values.is_some()) {
        let _ = write!(out, ", from {}", b.source.as_str());
    }
    out.push_str("</span></div>");
}

/// The bracket of the budget left, each end as left or spent: `[12 % – 61 % left]`,
/// `[1.3× spent – 61 % left]`, `[3.5× – 2.9× spent]`.
fn bracket(remaining: Bounded) -> String {
    let end = |r: f64| if r < 0.0 { (times(1.0 - r), "spent") } else { (pct(r, 0), "left") };
    let ((lo, lo_word), (hi, hi_word)) = (end(remaining.lower), end(remaining.upper));
    if lo_word == hi_word {
        format!("[{lo} – {hi} {hi_word}]")
    } else {
        format!("[{lo} {lo_word} – {hi} {hi_word}]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Values;
    use crate::slo::Bounded;

    fn report(source: DataSource, remaining: Option<Bounded>, coverage: f64) -> BudgetReport {
        let consumed = |r: Bounded| Bounded { lower: 1.0 - r.upper, estimate: 1.0 - r.estimate, upper: 1.0 - r.lower };
        BudgetReport {
            target: "t".into(),
            model: "m".into(),
            slo: "chat".into(),
            source,
            objective: 0.99,
            period: Duration::from_secs(28 * 86_400),
            coverage,
            values: remaining.map(|r| Values {
                requests: 1000.0,
                attainment: Bounded::exact(0.99),
                consumed: consumed(r),
                remaining: r,
            }),
        }
    }

    fn draw(b: Option<&BudgetReport>) -> String {
        let mut out = String::new();
        cell(&mut out, b, Duration::from_secs(7 * 86_400));
        out
    }

    #[test]
    fn the_budget_left_names_its_period_and_coverage() {
        let b = report(DataSource::Metrics, Some(Bounded { lower: 0.12, estimate: 0.38, upper: 0.61 }), 0.0625);
        let html = draw(Some(&b));
        assert!(html.contains(r#"data-budget="left" data-period="28d""#), "{html}");
        assert!(html.contains("<span class=\"left ok\">38\u{a0}% left</span>"), "{html}");
        assert!(html.contains("[12\u{a0}% – 61\u{a0}% left]"), "{html}");
        assert!(html.contains("over the last 28d, 6\u{a0}% of it counted</span>"), "{html}");
        assert!(!html.contains("from metrics"), "{html}");
    }

    #[test]
    fn an_exhausted_budget_says_how_far_over_it_is() {
        let b = report(DataSource::Tap, Some(Bounded::exact(-2.2)), 1.0);
        let html = draw(Some(&b));
        assert!(html.contains(r#"data-budget="exhausted""#), "{html}");
        assert!(html.contains(r#"<span class="left bad">budget exhausted: 3.2× spent</span>"#), "{html}");
        assert!(!html.contains('%') && !html.contains("-999"), "no clamped percentage: {html}");
        assert!(html.contains("over the last 28d, from tap</span>"), "whole period counted: {html}");
        // A bracket across the edge says both.
        let b = report(DataSource::Metrics, Some(Bounded { lower: -0.3, estimate: 0.1, upper: 0.6 }), 1.0);
        let html = draw(Some(&b));
        assert!(html.contains("<span class=\"left warn\">10\u{a0}% left</span>"), "{html}");
        assert!(html.contains("[1.3× spent – 60\u{a0}% left]"), "{html}");
        let b = report(DataSource::Metrics, Some(Bounded { lower: -2.5, estimate: -2.0, upper: -1.5 }), 1.0);
        assert!(draw(Some(&b)).contains("budget exhausted: 3× spent</span> <span class=\"range\">[3.5× – 2.5× spent]"));
    }

    #[test]
    fn without_counts_the_cell_still_names_the_period() {
        let html = draw(None);
        assert!(html.contains(r#"data-budget="none" data-period="7d""#), "{html}");
        assert!(html.contains("not counted yet") && html.contains("over the last 7d"), "{html}");
        let b = report(DataSource::Metrics, None, 0.01);
        let html = draw(Some(&b));
        assert!(html.contains("no request judged yet") && html.contains("over the last 28d, 1\u{a0}% of it counted"));
    }

    #[test]
    fn the_request_path_is_preferred_when_it_judged_requests() {
        let metrics = report(DataSource::Metrics, Some(Bounded::exact(0.5)), 1.0);
        let tap = report(DataSource::Tap, Some(Bounded::exact(0.4)), 1.0);
        let idle_tap = report(DataSource::Tap, None, 1.0);
        assert_eq!(pick(&[&metrics, &tap], "m", "chat").map(|b| b.source), Some(DataSource::Tap));
        assert_eq!(pick(&[&idle_tap, &metrics], "m", "chat").map(|b| b.source), Some(DataSource::Metrics));
        assert!(pick(&[&metrics], "m", "batch").is_none() && pick(&[&metrics], "n", "chat").is_none());
    }
}
