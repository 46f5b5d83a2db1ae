//! The page's HTML, section by section: header, alerts (alerts.rs), scrape health, then per
//! target and model the SLO table with each SLO's error budget over its period (budget.rs),
//! the load now, the capacity charts (capacity.rs) and the other charts
//! (docs/status-page.md).
//!
//! The cost is linear in targets × models × (SLOs × windows + charts × ring length): one
//! pass over the report, one lookup of each model's history.

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Duration;

use super::alerts::alerts;
use super::budget;
use super::capacity;
use super::facts::PageFacts;
use super::history::{History, Series};
use super::html::{Esc, anchor, count, glue_units, limit, pct, per_second, plural, secs, short};
use super::svg::{Band, Chart, Line, Ribbon, Threshold, attainment_cell};
use crate::alert::from_report;
use crate::alert::view::rfc3339_ms;
use crate::budget::BudgetReport;
use crate::capacity::CapacityReport;
use crate::duration::format_duration;
use crate::report::{ModelReport, Report, SloStatus, SloValues, TargetReport, WindowReport};
use crate::request::DataSource;
use crate::slo::{Bounded, Clause, Slo};

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
        // Each target's budgets, found once: the report lists every target's.
        let mut budgets: HashMap<&str, Vec<&BudgetReport>> = HashMap::new();
        for b in &report.budgets {
            budgets.entry(b.target.as_str()).or_default().push(b);
        }
        for t in &report.targets {
            let mine = budgets.get(t.target.as_str()).map_or(&[][..], Vec::as_slice);
            target(&mut out, t, report, mine, history, facts);
        }
    }
    let _ = write!(
        out,
        r#"<footer>goodput {} ({}) · charts show the last {} of each model's shortest window · <a href="api/v1/report">the same numbers as JSON</a></footer></body></html>"#,
        Esc(crate::VERSION),
        Esc(crate::COMMIT),
        plural(history.ring_len(), "evaluation"),
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
    let models: usize = report.targets.iter().map(|t| t.models.len()).sum();
    out.push_str(r#"<p class="meta">"#);
    if report.t_ms > 0 {
        let _ = write!(out, "evaluated {} · ", rfc3339_ms(report.t_ms));
    }
    let _ = write!(
        out,
        r#"every {} · {}, <span class="{}">{down} down</span> · {} · {}: <span class="{}">{firing} firing</span>, <span class="{}">{pending} pending</span></p>"#,
        format_duration(facts.refresh),
        plural(report.targets.len(), "target"),
        if down > 0 { "bad" } else { "ok" },
        plural(models, "model"),
        plural(report.alerts.len(), "alert"),
        if firing > 0 { "bad" } else { "ok" },
        if pending > 0 { "warn" } else { "ok" },
    );
    out.push_str(
        r#"<nav><a href="metrics">/metrics</a> <a href="api/v1/report">/api/v1/report</a> <a href="api/v1/alerts">/api/v1/alerts</a></nav></header>"#,
    );
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
            Esc(&glue_units(h.last_error.as_deref().unwrap_or(""))),
        );
    }
    out.push_str("</tbody></table></section>");
}

fn target(
    out: &mut String,
    t: &TargetReport,
    report: &Report,
    budgets: &[&BudgetReport],
    history: &History,
    facts: &PageFacts,
) {
    let state = if t.health.up { "up" } else { "down" };
    let _ = write!(
        out,
        r#"<section class="target" id="{}"><h2>{} <small>{}</small> <span class="pill {state}">{state}</span></h2>"#,
        anchor("t", &t.target),
        Esc(&t.target),
        t.engine.map_or("engine not known yet", |e| e.as_str()),
    );
    if !t.health.up {
        let e = t.health.last_error.as_deref().unwrap_or("no successful scrape yet");
        let _ = write!(
            out,
            r#"<p class="error">Down {}: {}. The numbers below are from its last good scrapes and the requests still measured.</p>"#,
            Esc(&crate::alert::down::since(&t.health, report.t_ms)),
            Esc(&glue_units(e))
        );
    }
    if let Some(note) = t.engine.and_then(|e| e.request_path_note()) {
        request_path_note(out, t, &note);
    }
    if t.models.is_empty() {
        out.push_str(r#"<p class="empty">No model evaluated yet.</p>"#);
    }
    for m in t.models.iter() {
        let c = report.capacity.iter().find(|c| c.target == t.target && c.model == m.model);
        model(out, m, c, budgets, history.get(&t.target, &m.model), history.ring_len(), facts);
    }
    out.push_str("</section>");
}

/// For an engine whose /metrics cannot judge a request: that the request path is needed,
/// and which request sources measured the target in its shortest window.
fn request_path_note(out: &mut String, t: &TargetReport, note: &str) {
    let mut sources: Vec<&str> = Vec::new();
    for m in t.models.iter() {
        let Some(w) = m.windows.iter().min_by_key(|w| w.window) else { continue };
        for r in w.requests.iter().filter(|r| r.requests > 0) {
            if !sources.contains(&r.source.as_str()) {
                sources.push(r.source.as_str());
            }
        }
    }
    let measured = if sources.is_empty() {
        "No tap or spans measured a request of it in the shortest window.".to_string()
    } else {
        format!("Measured here from {} requests.", sources.join(" and "))
    };
    let up = if t.health.up { "The target is up: " } else { "" };
    let _ = write!(out, r#"<p class="note request-path">{up}{}. {}</p>"#, Esc(note), Esc(&measured));
}

fn model(
    out: &mut String,
    m: &ModelReport,
    capacity: Option<&CapacityReport>,
    budgets: &[&BudgetReport],
    series: Option<&Series>,
    ring: usize,
    facts: &PageFacts,
) {
    // SLOs in the order of the first window that lists them (every window lists the same).
    let mut names: Vec<&str> = Vec::new();
    for s in m.windows.iter().flat_map(|w| &w.slos) {
        if !names.contains(&s.slo.as_str()) {
            names.push(&s.slo);
        }
    }
    let _ =
        write!(out, r#"<div class="model"><h3>{} <small>{}</small></h3>"#, Esc(&m.model), plural(names.len(), "SLO"));
    let slos: Vec<(&str, Option<&Slo>)> =
        names.iter().map(|n| (*n, facts.slos.iter().find(|s| s.name == *n))).collect();
    if slos.is_empty() {
        out.push_str(r#"<p class="note">No SLO applies to this model.</p>"#);
    } else {
        slo_table(out, m, &slos, budgets, facts);
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

/// The load now, beside the capacity charts (docs/capacity.md): the arrivals, whether they
/// rise, and whether the engine is saturated, with why. Each SLO's capacity and headroom is
/// said once, in its chart's caption.
fn capacity_line(out: &mut String, c: &CapacityReport) {
    out.push_str(r#"<p class="capacity">"#);
    let now = c.arrival_rate.map_or("-".to_string(), |r| per_second(r, "requests/s"));
    let _ = write!(out, "Arrivals now {now}{}.", if c.rising { ", rising" } else { "" });
    if c.saturated {
        let why: Vec<&str> = c.reasons.iter().map(|r| r.as_str()).collect();
        let _ = write!(out, r#" <span class="bad">Saturated</span>: {}."#, Esc(&why.join(", ")));
    }
    out.push_str("</p>");
}

fn slo_table(
    out: &mut String,
    m: &ModelReport,
    slos: &[(&str, Option<&Slo>)],
    budgets: &[&BudgetReport],
    facts: &PageFacts,
) {
    let shown = &facts.windows;
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
    out.push_str("<th>error budget over the SLO's period</th></tr></thead><tbody>");
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
                        let exact = from_requests(w, name).filter(|(_, b, _)| b.is_exact());
                        attainment_cell(out, exact.map(|(_, b, _)| b.estimate), joint, objective);
                        if let Some((source, b, _)) = exact {
                            let _ = write!(out, r#"<span class="requests">exact from {}</span>"#, source.as_str());
                            if let Some(why) = from_report::outside_bracket(source, *b, *joint) {
                                let _ = write!(out, r#"<span class="note outside">{}</span>"#, Esc(why));
                            }
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
                // Not from the histograms, but exact from the requests a tap or spans judged.
                Some((objective, SloStatus::NotEvaluable { .. }))
                    if let Some((source, joint, v)) = from_requests(w, name).filter(|(_, b, _)| b.is_exact()) =>
                {
                    attainment_cell(out, Some(joint.estimate), joint, objective);
                    let _ = write!(
                        out,
                        r#"<span class="requests">exact from {}</span><span class="requests">requests {}, failed {}</span>"#,
                        source.as_str(),
                        count(v.requests),
                        count(v.failed)
                    );
                }
                Some((_, SloStatus::NotEvaluable { reason })) => {
                    let _ = write!(out, r#"<span class="warn">not evaluable: {}</span>"#, Esc(reason));
                }
                Some((_, SloStatus::NoTraffic)) => out.push_str(r#"<span class="note">no traffic</span>"#),
                None => out.push('-'),
            }
            out.push_str("</td>");
        }
        out.push_str("<td>");
        let b = budget::pick(budgets, &m.model, name);
        budget::cell(out, b, facts.period(name));
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table>");
}

/// One SLO's joint attainment from the request source every surface reads
/// (`alert::from_report::slo_status`), when a request source evaluated it.
fn from_requests<'a>(w: &'a WindowReport, name: &str) -> Option<(DataSource, &'a Bounded, &'a SloValues)> {
    match from_report::slo_status(w, name)? {
        (source, SloStatus::Evaluated(v)) if source != DataSource::Metrics => {
            v.attainment.get(&Clause::Joint).map(|b| (source, b, v))
        }
        _ => None,
    }
}

/// Goodput classes, one per SLO in turn (status.css).
const GOODPUT_CLASSES: [&str; 4] = ["g0", "g1", "g2", "g3"];

fn charts(out: &mut String, series: Option<&Series>, ring: usize, slos: &[(&str, Option<&Slo>)], facts: &PageFacts) {
    let empty = Series::default();
    let s = series.unwrap_or(&empty);
    let col = |c: &std::collections::VecDeque<f32>| c.iter().copied().collect::<Vec<f32>>();
    let span = span(series);
    let q = if s.is_empty() { super::history::CHART_QUANTILE } else { s.quantile };
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
    // The sources of the newest point: goodput and throughput share one.
    let from = |x: Option<DataSource>| x.map(|s| format!(" (from {})", s.as_str())).unwrap_or_default();
    let sources = s.sources;
    Chart {
        kind: "goodput",
        title: format!("output tokens/s: goodput beside throughput{}", from(sources.map(|x| x.throughput))),
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

    let (ttft_from, tpot_from) = (sources.and_then(|x| x.ttft), sources.and_then(|x| x.tpot));
    for (kind, clause, values, source) in
        [("ttft", Clause::Ttft, &s.ttft, ttft_from), ("tpot", Clause::Tpot, &s.tpot, tpot_from)]
    {
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
            title: format!("{qname} {upper}{} against the SLO thresholds", from(source)),
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
