//! What the page says in words and numbers: error budgets over each SLO's period, the
//! capacity stated once per SLO, units joined to their numbers, alert values with units,
//! and counts that agree with their number.

use std::collections::BTreeMap;

use super::tests::{nb, page};
use super::*;
use crate::alert::AlertName;
use crate::duration::Window;
use crate::report::{AlertJson, RuleReadiness, SloStatus};

/// The units the page writes after numbers, as a reader would list them.
const UNITS: [&str; 8] = ["ms", "s", "%", "requests/s", "tokens/s", "preemptions/s", "µs", "MiB"];

/// The page's text nodes: what lies between tags (names are escaped, so no `<` or `>` is
/// text).
fn text_nodes(html: &str) -> Vec<&str> {
    html.split('<').filter_map(|p| p.split_once('>').map(|(_, text)| text)).filter(|t| !t.is_empty()).collect()
}

/// The text a reader sees: the text nodes outside `<title>` and `<desc>` (tooltips and what
/// a screen reader says instead of a drawing).
fn visible_text(html: &str) -> String {
    let mut out = String::new();
    let mut hidden = 0usize;
    for piece in html.split('<') {
        let Some((tag, text)) = piece.split_once('>') else { continue };
        if tag.starts_with("title") || tag.starts_with("desc") {
            hidden += 1;
        } else if tag.starts_with("/title") || tag.starts_with("/desc") {
            hidden = hidden.saturating_sub(1);
        }
        if hidden == 0 {
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

/// Every place in the text nodes where a number and a unit are split by a plain space,
/// where a line could break between them.
fn loose_units(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for text in text_nodes(html) {
        let words: Vec<&str> = text.split(' ').collect();
        for pair in words.windows(2) {
            let unit = pair[1].trim_end_matches([',', '.', ';', ')', ']', ':']);
            if pair[0].ends_with(|c: char| c.is_ascii_digit()) && UNITS.contains(&unit) {
                found.push(format!("{} {} in {text:?}", pair[0], pair[1]));
            }
        }
    }
    found
}

/// An alert `name` with `value` and `summary`.
fn alert(name: &str, value: &str, summary: &str) -> AlertJson {
    AlertJson {
        labels: BTreeMap::from([
            ("alertname".to_string(), name.to_string()),
            ("target".to_string(), sample::target_name(0)),
        ]),
        annotations: BTreeMap::from([("summary".to_string(), summary.to_string())]),
        state: "firing",
        active_at: "2023-11-14T22:13:20.000Z".into(),
        value: value.into(),
    }
}

/// The SLO row `slo` of the section of target `target`.
fn slo_row<'a>(html: &'a str, target: &str, slo: &str) -> &'a str {
    let section = &html[html.find(&format!(r#"id="{}""#, super::html::anchor("t", target))).unwrap()..];
    let row = &section[section.find(&format!(r#"<tr data-slo="{slo}">"#)).unwrap()..];
    &row[..row.find("</tr>").unwrap()]
}

#[test]
fn error_budgets_are_over_the_slo_period_and_say_when_they_are_exhausted() {
    let (html, _) = page(3, 5);
    assert!(html.contains("<th>error budget over the SLO's period</th>"), "{html}");
    let chat = slo_row(&html, "engine-000", "chat");
    assert!(chat.contains(r#"data-budget="left" data-period="7d""#), "{chat}");
    assert!(chat.contains(&nb("38 % left")) && chat.contains(&nb("[21 % – 52 % left]")), "{chat}");
    assert!(chat.contains(&format!("over the last 7d, {} of it counted", nb("10 %"))), "{chat}");
    let batch = slo_row(&html, "engine-000", "batch");
    assert!(batch.contains(r#"data-budget="exhausted" data-period="28d""#), "{batch}");
    assert!(batch.contains("budget exhausted: 3.2× spent") && batch.contains("over the last 28d, from tap"));
    // The down target has no budget in the report: its cells say so, with the period.
    let down = slo_row(&html, "engine-002", "chat");
    assert!(down.contains("not counted yet") && down.contains("over the last 7d"), "{down}");
    // No window's attainment is turned into a budget, and nothing is clamped.
    for stale in ["error budget left", "-999", "-1000", "−999"] {
        assert!(!html.contains(stale), "{stale}");
    }
    let mut r = sample::report(1, 0);
    r.budgets.clear();
    let html = StatusPage::new(sample::facts(), 10).html(&r);
    assert_eq!(html.matches("not counted yet").count(), 2, "one cell per SLO, none made from a window");
}

#[test]
fn capacity_is_stated_once_per_target_model_and_slo() {
    let (html, _) = page(3, 5);
    let sections: Vec<&str> = html.split(r#"<section class="target""#).skip(1).collect();
    assert_eq!(sections.len(), 3);
    for section in sections {
        let text = visible_text(section);
        for slo in ["chat", "batch"] {
            let said = text.matches(&format!("Capacity for SLO {slo}")).count();
            assert_eq!(said, 1, "capacity for {slo} said {said} times in:\n{text}");
        }
        // Headroom: once per SLO with an estimate (none on the down target), in the caption.
        let up = !section.contains(r#"<p class="error">Down "#);
        assert_eq!(text.matches("headroom").count(), if up { 2 } else { 0 }, "{text}");
        assert_eq!(text.matches("Arrivals now").count(), usize::from(up), "{text}");
    }
}

#[test]
fn numbers_and_units_stay_together() {
    assert_eq!(loose_units("<p>took 12.5 ms, 93 % (at 3.20 requests/s)</p>").len(), 3, "the check sees them");
    assert!(loose_units("<p>took 12.5\u{a0}ms in 3 slots</p>").is_empty());
    let (_, p) = page(3, 20);
    let mut r = sample::report(3, 20);
    r.budgets = sample::budgets(&r);
    // Every kind of alert, with summaries in the alert table's words.
    r.alerts = AlertName::ALL
        .iter()
        .map(|n| alert(n.as_str(), "0.5", "engine-000 preempts 0.150 requests/s; p99 TTFT is 3 s; KV 93.0 % full"))
        .collect();
    r.targets[2].health.last_error = Some("scrape timed out after 900 ms".into());
    let html = p.html(&r);
    let loose = loose_units(&html);
    assert!(loose.is_empty(), "a number and its unit may be split by a line break: {loose:#?}");
    // The page does write numbers with units: the check had something to look at.
    for unit in ["ms", "%", "requests/s", "preemptions/s"] {
        assert!(html.contains(&format!("\u{a0}{unit}")), "no value in {unit}");
    }
}

#[test]
fn alert_values_carry_the_unit_of_their_rule() {
    for (name, v, want) in [
        ("LLMKVCacheSaturated", "0.93", "93.0 %"),
        ("LLMGoodputDivergence", "0.8512", "85.12 %"),
        ("LLMTTFTAboveSLO", "3.2", "3200 ms"),
        ("LLMTTFTAboveSLO", "12.5", "12.5 s"),
        ("LLMTPOTAboveSLO", "0.0712", "71 ms"),
        ("LLMErrorBudgetBurnFast", "14.4", "14.4×"),
        ("LLMErrorBudgetBurnSlow", "6.25", "6.25×"),
        ("LLMCapacityHeadroomLow", "1.0625", "1.06×"),
        ("LLMPreemptionsSustained", "0.15", "0.150 preemptions/s"),
        ("LLMQueueGrowing", "12", "12 waiting"),
        ("LLMTargetDown", "0", "down"),
        ("LLMSomethingNew", "0.123456", "0.1235"),
        ("LLMKVCacheSaturated", "NaN", "NaN"),
    ] {
        let want = if want.ends_with(" waiting") { want.to_string() } else { nb(want) };
        assert_eq!(alerts::value(name, v), want, "{name} {v}");
    }
    // Every alert this build raises has a unit for its value.
    for n in AlertName::ALL {
        assert_ne!(alerts::value(n.as_str(), "0.5"), "0.5", "{n:?} has no unit");
    }
    let mut r = sample::report(1, 0);
    r.alerts = vec![alert("LLMKVCacheSaturated", "0.93", "s"), alert("LLMErrorBudgetBurnFast", "14.4", "s")];
    let html = StatusPage::new(sample::facts(), 10).html(&r);
    assert!(html.contains("<td class=\"value\">93.0\u{a0}%</td>") && html.contains(r#"<td class="value">14.4×</td>"#));
}

#[test]
fn counts_agree_with_their_number() {
    let mut r = sample::report(1, 0);
    r.alerts.truncate(1);
    r.alert_readiness = vec![RuleReadiness {
        alertname: "LLMErrorBudgetBurnSlow",
        target: sample::target_name(0),
        model: "model-0".into(),
        window: Window::from_secs(6 * 3600),
        coverage: 0.1,
        min_coverage: 0.9,
        ready: false,
        ready_in_seconds: 17_280.0,
    }];
    let one = StatusPage::new(sample::facts(), 10);
    one.record(&r);
    let html = one.html(&r);
    for said in ["1 target,", "1 model ·", "1 alert:", "<small>1 alert</small>", "(1 rule)", "of 1 evaluation "] {
        assert!(html.contains(said), "{said} not in the page");
    }
    let (html, _) = page(3, 5);
    for said in [
        "3 targets,",
        "3 models ·",
        "2 alerts:",
        "<small>2 alerts</small>",
        "<small>2 SLOs</small>",
        "last 180 evaluations ",
    ] {
        assert!(html.contains(said), "{said} not in the page");
    }
    for (html, noun) in
        [(&html, "targets"), (&html, "models"), (&html, "alerts"), (&html, "SLOs"), (&html, "evaluations")]
    {
        let wrong = html
            .match_indices(&format!("1 {noun}"))
            .filter(|(i, _)| !html[..*i].ends_with(|c: char| c.is_ascii_digit()))
            .count();
        assert_eq!(wrong, 0, "\"1 {noun}\" in the page");
    }
}

#[test]
fn a_down_target_says_since_when_and_blames_no_histogram_on_the_engine() {
    let mut r = sample::report(2, 0);
    let down = &mut r.targets[1];
    down.health.last_successful_scrape_ms = Some(r.t_ms - 90_000);
    for w in &mut down.models_mut()[0].windows {
        for s in &mut w.slos {
            s.status = SloStatus::NotEvaluable { reason: crate::evaluate::slo::NO_SCRAPE.into() };
        }
    }
    let html = StatusPage::new(sample::facts(), 10).html(&r);
    let section = html.split(r#"<section class="target""#).nth(2).unwrap();
    let text = visible_text(section);
    assert!(text.contains("Down since after 2023-11-14T22:11:50.000Z (1m30s ago)"), "{text}");
    assert!(text.contains("no successful scrape of this model in the window"), "{text}");
    assert!(!text.contains("exposes no"), "{text}");
    // Never scraped: since the daemon started.
    r.targets[1].health.last_successful_scrape_ms = None;
    let html = StatusPage::new(sample::facts(), 10).html(&r);
    assert!(html.contains("Down since the daemon started (no successful scrape yet)"), "{html}");
}
