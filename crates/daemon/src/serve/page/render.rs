//! The page's HTML, section by section: header, alerts, scrape health, then per target and
//! model the SLO table, capacity against the current load, and the charts
//! (docs/status-page.md).
//!
//! The cost is linear in targets × models × (SLOs × windows + charts × ring length): one
//! pass over the report, one lookup of each model's history.

use std::fmt::Write;
use std::time::Duration;

use super::PageFacts;
use super::capacity::{self, headroom_class};
use super::history::{History, Series};
use super::html::{Esc, anchor, count, limit, pct, safe_link, secs, short};
use super::svg::{Band, Chart, Line, Ribbon, Threshold, attainment_cell};
use crate::alert::view::rfc3339_ms;
use crate::capacity::CapacityReport;
use crate::duration::{Window, format_duration};
use crate::report::{AlertJson, ModelReport, Report, SloStatus, TargetReport, WindowReport};
use crate::request::preferred_slo;
use crate::slo::{Clause, Slo};

/// Bytes of HTML per target and model, roughly, to size the buffer once.
const BYTES_PER_MODEL: usize = 20 * 1024;

/// The whole page for `report`, with charts drawn from `history`.
pub fn render(report: &Report, history: &History, facts: &PageFacts) -> String {
    let models: usize = report.targets.iter().map(|t| t.models.len().max(1)).sum();
    let mut out = String::with_capacity(8 * 1024 + models * BYTES_PER_MODEL);
    head(&mut out, report, facts);
    if report.t_ms == 0 && report.targets.is_empty() {
        out.push_str(
            r#"<p class="empty">No evaluation yet: the first report comes one evaluation interval after start. This page reloads by itself.</p>"#,
        );
    } else {
        alerts(&mut out, report);
        health(&mut out, report);
        for t in &report.targets {
            target(&mut out, t, &report.capacity, history, facts);
        }
    }
    let _ = write!(
        out,
        r#"<footer>goodput {} ({}) · charts show the last {} evaluations of each model's shortest window · <a href="api/v1/report">the same numbers as JSON</a></footer></body></html>"#,
        Esc(crate::VERSION),
        Esc(crate::COMMIT),
        history.ring_len(),
    );
    out
}

fn head(out: &mut String, report: &Report, facts: &PageFacts) {
    let _ = write!(
        out,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta http-equiv="refresh" content="{}"><title>goodput status</title><link rel="stylesheet" href="status.css"></head><body><header><h1>goodput</h1>"#,
        facts.refresh_seconds()
    );
    let down = report.targets.iter().filter(|t| !t.health.up).count();
    let firing = report.alerts.iter().filter(|a| a.state == "firing").count();
    let pending = report.alerts.len() - firing;
    out.push_str(r#"<p class="meta">"#);
    if report.t_ms > 0 {
        let _ = write!(out, "evaluated {} · ", rfc3339_ms(report.t_ms));
    }
    let _ = write!(
        out,
        r#"every {} · {} targets, <span class="{}">{down} down</span> · <span class="{}">{firing} firing</span>, <span class="{}">{pending} pending</span></p>"#,
        format_duration(facts.refresh),
        report.targets.len(),
        if down > 0 { "bad" } else { "ok" },
        if firing > 0 { "bad" } else { "ok" },
        if pending > 0 { "warn" } else { "ok" },
    );
    out.push_str(
        r#"<nav><a href="metrics">/metrics</a> <a href="api/v1/report">/api/v1/report</a> <a href="api/v1/alerts">/api/v1/alerts</a></nav></header>"#,
    );
}

fn alerts(out: &mut String, report: &Report) {
    out.push_str(r#"<section id="alerts"><h2>Alerts</h2>"#);
    let mut shown: Vec<&AlertJson> = report.alerts.iter().collect();
    // Firing first; within a state, the order the engine keeps (by labels).
    shown.sort_by_key(|a| a.state != "firing");
    if shown.is_empty() {
        out.push_str(r#"<p class="ok">No alert is pending or firing.</p>"#);
    } else {
        out.push_str(
            "<table class=\"alerts\"><thead><tr><th>state</th><th>alert</th><th>target</th><th>model</th><th>labels</th><th>value</th><th>active since</th><th>summary</th><th>runbook</th></tr></thead><tbody>",
        );
        for a in shown {
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
                "</td><td>{}</td><td>{}</td><td>{}</td><td>",
                Esc(&value(&a.value)),
                Esc(&a.active_at),
                Esc(a.annotations.get("summary").map_or("", String::as_str)),
            );
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
        out.push_str("</tbody></table>");
    }
    let mut waiting: Vec<&str> = report.alert_readiness.iter().filter(|r| !r.ready).map(|r| r.alertname).collect();
    waiting.sort_unstable();
    waiting.dedup();
    if !waiting.is_empty() {
        let _ = write!(
            out,
            r#"<p class="note">Waiting for their windows to fill before they may fire: {} (<a href="api/v1/alerts">details</a>).</p>"#,
            waiting.join(", ")
        );
    }
    out.push_str("</section>");
}

fn health(out: &mut String, report: &Report) {
    out.push_str(
        r#"<section id="health"><h2>Scrape health</h2><table class="health"><thead><tr><th>target</th><th>engine</th><th>state</th><th>scrape took</th><th>last success</th><th>failed scrapes</th><th>last error</th></tr></thead><tbody>"#,
    );
    for t in &report.targets {
        let h = &t.health;
        let state = if h.up { "up" } else { "down" };
        let errors: u64 = h.errors_total.values().sum();
        let _ = write!(
            out,
            r##"<tr class="{state}"><td><a href="#{}">{}</a></td><td>{}</td><td><span class="pill {state}">{state}</span></td><td>{}</td><td>{}</td><td title="{}">{errors}</td><td class="error">{}</td></tr>"##,
            anchor("t", &t.target),
            Esc(&t.target),
            t.engine.map_or("-", |e| e.as_str()),
            h.last_scrape_duration_seconds.map_or("-".into(), secs),
            h.last_successful_scrape_ms.map_or("never".into(), rfc3339_ms),
            Esc(&h.errors_total.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")),
            Esc(h.last_error.as_deref().unwrap_or("")),
        );
    }
    out.push_str("</tbody></table></section>");
}

fn target(out: &mut String, t: &TargetReport, capacity: &[CapacityReport], history: &History, facts: &PageFacts) {
    let state = if t.health.up { "up" } else { "down" };
    let _ = write!(
        out,
        r#"<section class="target" id="{}"><h2>{} <small>{}</small> <span class="pill {state}">{state}</span></h2>"#,
        anchor("t", &t.target),
        Esc(&t.target),
        t.engine.map_or("engine not known yet", |e| e.as_str()),
    );
    if let Some(e) = t.health.last_error.as_deref().filter(|_| !t.health.up) {
        let _ = write!(
            out,
            r#"<p class="error">Scrape failing: {}. The numbers below are from its last good scrapes.</p>"#,
            Esc(e)
        );
    }
    if t.models.is_empty() {
        out.push_str(r#"<p class="empty">No model evaluated yet.</p>"#);
    }
    for m in &t.models {
        let c = capacity.iter().find(|c| c.target == t.target && c.model == m.model);
        model(out, m, c, history.get(&t.target, &m.model), history.ring_len(), facts);
    }
    out.push_str("</section>");
}

fn model(
    out: &mut String,
    m: &ModelReport,
    capacity: Option<&CapacityReport>,
    series: Option<&Series>,
    ring: usize,
    facts: &PageFacts,
) {
    let _ = write!(out, r#"<div class="model"><h3>{}</h3>"#, Esc(&m.model));
    // SLOs in the order of the first window that lists them (every window lists the same).
    let mut names: Vec<&str> = Vec::new();
    for s in m.windows.iter().flat_map(|w| &w.slos) {
        if !names.contains(&s.slo.as_str()) {
            names.push(&s.slo);
        }
    }
    let slos: Vec<(&str, Option<&Slo>)> =
        names.iter().map(|n| (*n, facts.slos.iter().find(|s| s.name == *n))).collect();
    if slos.is_empty() {
        out.push_str(r#"<p class="note">No SLO applies to this model.</p>"#);
    } else {
        slo_table(out, m, &slos, &facts.windows);
    }
    if let Some(c) = capacity {
        capacity_line(out, c);
    }
    if !slos.is_empty() {
        let span = span(series);
        out.push_str(r#"<div class="charts">"#);
        for (name, _) in &slos {
            capacity::chart(out, name, series, capacity, ring, &span);
        }
        out.push_str("</div>");
    }
    charts(out, series, ring, &slos, facts);
    out.push_str("</div>");
}

/// Capacity against the current load (docs/capacity.md): per SLO the p10–p90 of the highest
/// rate that still met it, or the lower bound while no failing load has been seen, beside
/// the arrivals now; and whether the engine is saturated, with why.
fn capacity_line(out: &mut String, c: &CapacityReport) {
    out.push_str(r#"<p class="capacity">"#);
    let now = c.arrival_rate.map_or("-".to_string(), |r| format!("{r:.2}"));
    let _ = write!(out, "Arrivals now {} requests/s{}.", now, if c.rising { ", rising" } else { "" });
    for s in &c.slos {
        let (Some(lo), Some(hi)) = (s.estimates.first(), s.estimates.last()) else {
            let _ = write!(out, " Capacity for SLO {}: not enough varied load yet.", Esc(&s.slo));
            continue;
        };
        let how = match s.method {
            crate::capacity::Method::Empirical => "from requests",
            crate::capacity::Method::Bounds => "from histogram bounds",
        };
        if s.censored() {
            let _ = write!(
                out,
                " Capacity for SLO {}: at least {:.2} requests/s (no failing load seen yet, {how}).",
                Esc(&s.slo),
                lo.p10
            );
        } else {
            let _ = write!(
                out,
                " Capacity for SLO {}: {:.2}–{:.2} requests/s (p10–p90, {how}), headroom {}.",
                Esc(&s.slo),
                lo.p10,
                hi.p90,
                s.headroom
                    .map_or("-".to_string(), |h| format!(r#"<span class="{}">{h:.2}×</span>"#, headroom_class(h))),
            );
        }
    }
    if c.saturated {
        let why: Vec<&str> = c.reasons.iter().map(|r| r.as_str()).collect();
        let _ = write!(out, r#" <span class="bad">Saturated</span>: {}."#, Esc(&why.join(", ")));
    }
    out.push_str("</p>");
}

fn slo_table(out: &mut String, m: &ModelReport, slos: &[(&str, Option<&Slo>)], shown: &[Window]) {
    let windows: Vec<&WindowReport> =
        m.windows.iter().filter(|w| shown.is_empty() || shown.contains(&w.window)).collect();
    out.push_str(r#"<table class="slos"><thead><tr><th>SLO</th><th>objective</th><th>thresholds</th>"#);
    for w in &windows {
        let _ = write!(out, "<th>attainment over {}", w.window);
        if w.coverage < 1.0 {
            let _ = write!(out, r#" <small>({} covered)</small>"#, pct(w.coverage, 0));
        }
        out.push_str("</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for (name, spec) in slos {
        let _ = write!(out, r#"<tr data-slo="{}"><th>{}</th><td>"#, Esc(name), Esc(name));
        let objective = m.windows.iter().flat_map(|w| &w.slos).find(|s| s.slo == *name).map(|s| s.objective);
        out.push_str(&objective.map_or("-".into(), |o| pct(o, 2)));
        out.push_str("</td><td>");
        if let Some(spec) = spec {
            let parts: Vec<String> =
                spec.clauses().map(|(c, d)| format!("{} ≤ {}", c.as_str().to_uppercase(), limit(d))).collect();
            out.push_str(&parts.join("<br>"));
        }
        out.push_str("</td>");
        for w in &windows {
            out.push_str("<td>");
            match w.slos.iter().find(|s| s.slo == *name).map(|s| (s.objective, &s.status)) {
                Some((objective, SloStatus::Evaluated(v))) => match v.attainment.get(&Clause::Joint) {
                    Some(joint) => {
                        // The request path's share, when it is exact, drawn on the bracket.
                        let exact = preferred_slo(w, name)
                            .and_then(|(source, r)| r.attainment.get(&Clause::Joint).map(|b| (source, b)))
                            .filter(|(_, b)| b.is_exact());
                        attainment_cell(out, exact.map(|(_, b)| b.estimate), joint, objective);
                        if let Some((source, _)) = exact {
                            let _ = write!(out, r#"<span class="requests">exact from {}</span>"#, source.as_str());
                        }
                        let _ = write!(
                            out,
                            r#"<span class="requests">requests {}, failed {}</span>"#,
                            count(v.requests),
                            count(v.failed)
                        );
                    }
                    None => out.push('-'),
                },
                Some((_, SloStatus::NotEvaluable { reason })) => {
                    let _ = write!(out, r#"<span class="warn">not evaluable: {}</span>"#, Esc(reason));
                }
                Some((_, SloStatus::NoTraffic)) => out.push_str(r#"<span class="note">no traffic</span>"#),
                None => out.push('-'),
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// Goodput classes, one per SLO in turn (status.css).
const GOODPUT_CLASSES: [&str; 4] = ["g0", "g1", "g2", "g3"];

fn charts(out: &mut String, series: Option<&Series>, ring: usize, slos: &[(&str, Option<&Slo>)], facts: &PageFacts) {
    let empty = Series::default();
    let s = series.unwrap_or(&empty);
    let col = |c: &std::collections::VecDeque<f32>| c.iter().copied().collect::<Vec<f32>>();
    let span = span(series);
    let q = if s.is_empty() { super::CHART_QUANTILE } else { s.quantile };
    let qname = format!("p{}", (q * 1000.0).round() / 10.0);
    out.push_str(r#"<div class="charts">"#);

    let mut lines = vec![Line { class: "tput", label: "throughput".into(), values: col(&s.throughput) }];
    let mut ribbons = Vec::new();
    for (i, (name, g)) in s.goodput.iter().enumerate() {
        let class = GOODPUT_CLASSES[i % GOODPUT_CLASSES.len()];
        lines.push(Line { class, label: format!("goodput {name}"), values: g.iter().map(|p| p[1]).collect() });
        ribbons.push(Ribbon {
            class,
            lower: g.iter().map(|p| p[0]).collect(),
            upper: g.iter().map(|p| p[2]).collect(),
        });
    }
    Chart {
        kind: "goodput",
        title: "output tokens/s: goodput beside throughput".into(),
        ring_len: ring,
        lines,
        ribbons,
        bands: Vec::new(),
        thresholds: Vec::new(),
        y_max: None,
        unit: short,
        span: span.clone(),
    }
    .write(out);

    for (kind, clause, values) in [("ttft", Clause::Ttft, &s.ttft), ("tpot", Clause::Tpot, &s.tpot)] {
        let thresholds = slos
            .iter()
            .filter_map(|(name, spec)| {
                let d = spec.and_then(|s| s.threshold(clause))?;
                Some(Threshold { label: format!("{name} {}", limit(d)), value: d.as_secs_f64() })
            })
            .collect();
        let upper = kind.to_uppercase();
        Chart {
            kind,
            title: format!("{qname} {upper} against the SLO thresholds"),
            ring_len: ring,
            lines: vec![Line { class: "lat", label: format!("{qname} {upper}"), values: col(values) }],
            ribbons: Vec::new(),
            bands: Vec::new(),
            thresholds,
            y_max: None,
            unit: secs,
            span: span.clone(),
        }
        .write(out);
    }

    let k = facts.kv;
    Chart {
        kind: "kv",
        title: format!(
            "KV-cache utilization: target band {}–{}, critical above {}",
            pct(k.target_low, 0),
            pct(k.target_high, 0),
            pct(k.critical, 0)
        ),
        ring_len: ring,
        lines: vec![Line { class: "kv", label: "KV cache".into(), values: col(&s.kv) }],
        ribbons: Vec::new(),
        bands: vec![
            Band { class: "underloaded", from: 0.0, to: k.underloaded },
            Band { class: "low", from: k.underloaded, to: k.target_low },
            Band { class: "target", from: k.target_low, to: k.target_high },
            Band { class: "high", from: k.target_high, to: k.critical },
            Band { class: "critical", from: k.critical, to: 1.0 },
        ],
        thresholds: vec![Threshold { label: format!("critical {}", pct(k.critical, 0)), value: k.critical }],
        y_max: Some(1.0),
        unit: |v| pct(v, 0),
        span,
    }
    .write(out);
    out.push_str("</div>");
}

/// The time the ring of `series` covers, e.g. "last 15m"; empty before two points.
fn span(series: Option<&Series>) -> String {
    match series.and_then(|s| s.t_ms.front().zip(s.t_ms.back())) {
        Some((a, b)) if b > a => {
            format!("last {}", format_duration(Duration::from_secs(((b - a) as u64).div_ceil(1000))))
        }
        _ => String::new(),
    }
}

/// An alert's value with at most four decimals (the engine writes every digit).
fn value(v: &str) -> String {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() => format!("{}", (x * 1e4).round() / 1e4),
        _ => v.to_string(),
    }
}
