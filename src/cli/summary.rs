//! The terminal summary of one report: what `goodput demo` prints every few seconds and
//! `goodput replay --format table` prints per instant.
//!
//! It says what a person needs first and hides nothing that changes the reading: every
//! configured window's attainment (not only the shortest), the failed requests behind an
//! attainment below 100 %, the exact share from the request path beside the histogram
//! bracket, pending as well as firing alerts, and where to look next.

use std::fmt::Write as _;

use super::columns::{WIDTH, Wrapped, ellipsize, latency};
use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::report::{Report, SloStatus, SloValues, TargetReport, WindowReport};
use crate::request::DataSource;
use crate::slo::Clause;
use goodput::alert::from_report;

/// What the summary shows besides the report.
pub struct View<'a> {
    /// The configured windows, shortest first; the report also holds the longer windows
    /// the alert rules read, which the summary leaves out.
    pub windows: &'a [Window],
    /// The daemon's base URL (`http://addr`), for the "open next" line; `None` in a replay.
    pub base_url: Option<String>,
}

/// The widths of the target and model columns; longer names are ellipsized, so that a
/// row with every column fits [`WIDTH`] beside the header's `(over 1h)`.
const TARGET: usize = 14;
const MODEL: usize = 32;

/// Indent of a line that continues a wrapped one, and of the SLO lines under their row.
const INDENT: usize = 4;

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// The p99 every surface shows (`alert::from_report::latency`), with its source.
fn p99(w: &WindowReport, metric: HistogramKind) -> Option<(f64, DataSource)> {
    from_report::latency(w, metric, 0.99)
}

/// How a source is named in the summary.
fn source_name(s: DataSource) -> &'static str {
    match s {
        DataSource::Metrics => "histograms",
        DataSource::Tap => "tap",
        DataSource::Otlp => "spans",
    }
}

/// The whole summary, ending with a blank line.
pub fn render(report: &Report, view: &View<'_>) -> String {
    let mut out = String::new();
    let evaluated = report.targets.iter().any(|t| t.health.last_evaluation_ms.is_some() || !t.models.is_empty());
    if !evaluated {
        let mut w = Wrapped::new("waiting for the first scrapes and evaluation of ", INDENT, WIDTH);
        for (i, t) in report.targets.iter().enumerate() {
            w.push(if i == 0 { "" } else { ", " }, &t.target);
        }
        out.push_str(&w.text());
        out.push('\n');
        return out;
    }
    let shortest = view.windows.first().copied();
    let header = row(["target", "model", "p99 TTFT", "p99 TPOT", "req/s", "failed", "tokens/s", "KV band"]);
    let over = format!("(over {})", shortest.map_or("-".into(), |w| w.to_string()));
    // An unusually long window label goes above the header rather than past the width.
    if header.chars().count() + 3 + over.chars().count() <= WIDTH {
        let _ = writeln!(out, "{header}   {over}");
    } else {
        let _ = writeln!(out, "{over}\n{header}");
    }
    for t in &report.targets {
        target(&mut out, t, view, report.t_ms);
    }
    alerts(&mut out, report);
    out.push_str(&waiting(report));
    if let Some(base) = &view.base_url {
        let _ = writeln!(out, "next: open {base}/ for the status page (charts, alerts, scrape health)");
    }
    out.push('\n');
    out
}

/// One row of the table: the target and model ellipsized to their columns, the numbers
/// right-aligned, so that every row lines up under the header.
fn row(cells: [&str; 8]) -> String {
    format!(
        "{:<TARGET$} {:<MODEL$} {:>8} {:>8} {:>7} {:>7} {:>8} {:>16}",
        ellipsize(cells[0], TARGET),
        ellipsize(cells[1], MODEL),
        cells[2],
        cells[3],
        cells[4],
        cells[5],
        cells[6],
        cells[7]
    )
}

fn target(out: &mut String, t: &TargetReport, view: &View<'_>, now_ms: i64) {
    if !t.health.up {
        let why = t.health.last_error.as_deref().unwrap_or("no successful scrape yet");
        let since = goodput::alert::down::since(&t.health, now_ms);
        let line = format!("{:<TARGET$} down {since}: {why}", ellipsize(&t.target, TARGET));
        let _ = writeln!(out, "{}", ellipsize(&line, WIDTH));
        return;
    }
    for m in t.models.iter() {
        let windows: Vec<&WindowReport> =
            m.windows.iter().filter(|w| view.windows.is_empty() || view.windows.contains(&w.window)).collect();
        let Some(w) = windows.first() else { continue };
        let num =
            |v: Option<f64>, digits: usize| v.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{v:.digits$}"));
        // Throughput and failures from the source the goodput lines read first: the same
        // requests.
        let source = from_report::request_order(w).next();
        let failed = match source {
            Some(r) => Some(r.failed as f64 / r.requests as f64),
            None => w.slos.iter().find_map(|s| match &s.status {
                SloStatus::Evaluated(v) if v.requests > 0.0 => Some(v.failed / v.requests),
                _ => None,
            }),
        };
        let band = w.kv_cache.as_ref().map_or("-".into(), |k| format!("{} {:.0}%", k.band.as_str(), k.last * 100.0));
        let (ttft, tpot) = (p99(w, HistogramKind::Ttft), p99(w, HistogramKind::Tpot));
        let _ = writeln!(
            out,
            "{}",
            row([
                &t.target,
                &m.model,
                &latency(ttft.map(|x| x.0)),
                &latency(tpot.map(|x| x.0)),
                &num(source.map_or(w.requests_per_second, |r| Some(r.requests_per_second)), 1),
                &failed.map_or("-".into(), pct),
                &num(source.map_or(w.output_tokens_per_second, |r| Some(r.output_tokens_per_second)), 0),
                &band,
            ])
        );
        sources_line(out, w, ttft, tpot, source.map_or(DataSource::Metrics, |r| r.source));
        let slos: Vec<&str> = w.slos.iter().map(|s| s.slo.as_str()).collect();
        for slo in slos {
            slo_line(out, slo, &windows);
        }
        if let Some(gap) =
            crate::request::preferred(w).and_then(|r| r.ttft_gap.as_ref()).and_then(|g| g.mean.map(|m| (g, m)))
        {
            let _ = writeln!(
                out,
                "    TTFT outside the engine (mean over {} requests paired with the engine's {}): {:+.1}ms",
                gap.0.paired,
                if gap.0.reference == crate::request::GapReference::Otlp { "spans" } else { "own times" },
                gap.1 * 1000.0
            );
        }
    }
}

/// Which source each number of the row is from, and over which window; the histograms'
/// p99 beside a p99 from requests, so that both are in view.
fn sources_line(
    out: &mut String,
    w: &WindowReport,
    ttft: Option<(f64, DataSource)>,
    tpot: Option<(f64, DataSource)>,
    throughput: DataSource,
) {
    let mut parts = Vec::new();
    let mut histograms = Vec::new();
    for (name, kind, x) in [("TTFT", HistogramKind::Ttft, ttft), ("TPOT", HistogramKind::Tpot, tpot)] {
        let Some((_, s)) = x else { continue };
        parts.push(format!("p99 {name} from {}", source_name(s)));
        if s != DataSource::Metrics
            && let Some(h) = w.latency.iter().find(|l| l.metric == kind && l.quantile == 0.99)
        {
            histograms.push(format!("{name} {}", latency(Some(h.value))));
        }
    }
    parts.push(format!("throughput and failures from {}", source_name(throughput)));
    let mut line = Wrapped::new(&format!("    over {}: ", w.window), 2 * INDENT, WIDTH);
    for (i, p) in parts.iter().enumerate() {
        line.push(if i == 0 { "" } else { ", " }, p);
    }
    if !histograms.is_empty() {
        line.push("; ", &format!("histograms' p99 {}", histograms.join(", ")));
    }
    out.push_str(&line.text());
}

/// One SLO: per window, the exact share from requests when there is one, else the
/// histogram estimate, always with the histogram bracket; the shortest window also says
/// how many requests failed and the goodput.
fn slo_line(out: &mut String, slo: &str, windows: &[&WindowReport]) {
    let mut parts = Vec::new();
    let mut objective = None;
    let mut detail = Vec::new();
    // Why a value from requests lies outside the histograms' bracket, one line per window.
    let mut why = Vec::new();
    for (i, w) in windows.iter().enumerate() {
        let Some(s) = w.slos.iter().find(|s| s.slo == slo) else { continue };
        objective = Some(s.objective);
        // A window not yet covered by data holds less than its name says.
        let name = if w.coverage < 0.999 {
            format!("{} ({:.0}% covered)", w.window, w.coverage * 100.0)
        } else {
            w.window.to_string()
        };
        // The SLO as every surface reads it: from requests when a source evaluated it.
        let exact = match from_report::slo_status(w, slo) {
            Some((src, SloStatus::Evaluated(v))) if src != DataSource::Metrics => {
                v.attainment.get(&Clause::Joint).map(|b| (src, b, v))
            }
            _ => None,
        };
        let part = match (&s.status, exact) {
            (_, Some((src, b, r))) => {
                if i == 0 {
                    detail = failures_and_goodput(r, from_report::tokens_per_second(w, src), src);
                }
                // Exact unless some token count was counted, not reported: then bounded.
                let (kind, value) = if b.is_exact() {
                    ("exact", pct(b.estimate))
                } else {
                    ("bounded", format!("[{}–{}]", pct(b.lower), pct(b.upper)))
                };
                let from = source_name(src);
                match &s.status {
                    SloStatus::Evaluated(v) if let Some(h) = v.attainment.get(&Clause::Joint) => {
                        let outside = from_report::outside_bracket(src, *b, *h);
                        if let Some(reason) = outside {
                            why.push(format!("{}: {value} from {from} is {reason}", w.window));
                        }
                        let mark = if outside.is_some() { ", outside" } else { "" };
                        format!(
                            "{name} {value} {kind} from {from} (histograms [{}–{}]{mark})",
                            pct(h.lower),
                            pct(h.upper)
                        )
                    }
                    _ => format!("{name} {value} {kind} from {from}"),
                }
            }
            (SloStatus::Evaluated(v), None) => match v.attainment.get(&Clause::Joint) {
                Some(h) => {
                    if i == 0 {
                        detail = failures_and_goodput(v, w.output_tokens_per_second, DataSource::Metrics);
                    }
                    format!("{name} ~{} [{}–{}] from histograms", pct(h.estimate), pct(h.lower), pct(h.upper))
                }
                None => format!("{name} -"),
            },
            (SloStatus::NoTraffic, _) => format!("{name} no traffic"),
            (SloStatus::NotEvaluable { reason }, _) => format!("{name} not evaluable ({reason})"),
        };
        parts.push(part);
    }
    if parts.is_empty() {
        return;
    }
    let name = ellipsize(slo, 40);
    let mut line =
        Wrapped::new(&format!("    SLO {name} ({}): ", objective.map_or("-".into(), pct)), 2 * INDENT, WIDTH);
    for (i, part) in parts.iter().enumerate() {
        line.push(if i == 0 { "" } else { " · " }, part);
    }
    for d in &detail {
        line.push("; ", d);
    }
    out.push_str(&line.text());
    for reason in &why {
        let mut line = Wrapped::new(&" ".repeat(2 * INDENT), 2 * INDENT, WIDTH);
        for (i, word) in reason.split(' ').enumerate() {
            line.push(if i == 0 { "" } else { " " }, word);
        }
        out.push_str(&line.text());
    }
}

/// "F of N requests failed" and "goodput G of T tok/s (source)", with goodput's bounds when
/// it has them: goodput beside the throughput of the same source's requests.
fn failures_and_goodput(v: &SloValues, throughput: Option<f64>, source: DataSource) -> Vec<String> {
    let goodput = match v.goodput_tokens_per_second {
        Some(g) if g.is_exact() => format!("{:.0}", g.estimate),
        Some(g) => format!("{:.0} [{:.0}–{:.0}]", g.estimate, g.lower, g.upper),
        None => "-".into(),
    };
    let of = throughput.filter(|t| t.is_finite()).map(|t| format!(" of {t:.0}")).unwrap_or_default();
    vec![
        format!("{:.0} of {:.0} requests failed", v.failed, v.requests),
        format!("goodput {goodput}{of} tok/s ({})", source_name(source)),
    ]
}

/// Firing, then pending alerts, each with its target.
fn alerts(out: &mut String, report: &Report) {
    for state in ["firing", "pending"] {
        let mut names: Vec<String> = report
            .alerts
            .iter()
            .filter(|a| a.state == state)
            .map(|a| {
                format!(
                    "{}{{target={}}}",
                    a.labels.get("alertname").map_or("?", |s| s),
                    a.labels.get("target").map_or("?", |s| s)
                )
            })
            .collect();
        if names.is_empty() {
            names.push("none".into());
        }
        let mut line = Wrapped::new(&format!("{state}: "), INDENT, WIDTH);
        for (i, n) in names.iter().enumerate() {
            line.push(if i == 0 { "" } else { ", " }, n);
        }
        out.push_str(&line.text());
    }
}

/// The rules still waiting for their windows to fill, each with its least covered window
/// (docs/alerts.md#after-a-restart); empty once every rule may judge.
fn waiting(report: &Report) -> String {
    let mut worst: Vec<&crate::report::RuleReadiness> = Vec::new();
    for r in report.alert_readiness.iter().filter(|r| !r.ready) {
        match worst.iter_mut().find(|w| w.alertname == r.alertname) {
            Some(w) if w.ready_in_seconds < r.ready_in_seconds => *w = r,
            Some(_) => {}
            None => worst.push(r),
        }
    }
    if worst.is_empty() {
        return String::new();
    }
    let mut line = Wrapped::new("waiting for window coverage: ", INDENT, WIDTH);
    let items = worst.iter().map(|r| {
        let left = std::time::Duration::from_secs(r.ready_in_seconds.ceil() as u64);
        format!(
            "{} ({} {:.0}% covered, ready in {})",
            r.alertname,
            r.window,
            r.coverage * 100.0,
            crate::duration::format_duration(left)
        )
    });
    for (i, item) in items.enumerate() {
        line.push(if i == 0 { "" } else { ", " }, &item);
    }
    line.text()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::report::{Health, ModelReport, SloReport};
    use crate::request::{Basis, DataSource, RequestSlo, RequestWindow};
    use crate::slo::Bounded;

    fn values(joint: Bounded, failed: f64, requests: f64) -> SloValues {
        SloValues {
            attainment: BTreeMap::from([(Clause::Joint, joint)]),
            burn_rate: Bounded::exact(0.0),
            goodput_requests_per_second: None,
            goodput_tokens_per_second: Some(joint.scale(100.0)),
            requests,
            failed,
        }
    }

    /// One target and model over 1m: the histograms bracket joint attainment at
    /// [90 %, 98 %], and, when given, the tap measured `tap`.
    fn report(tap: Option<Bounded>) -> (Report, Window) {
        let w1 = Window::new(Duration::from_secs(60)).unwrap();
        let mut w = WindowReport::empty(w1);
        w.coverage = 1.0;
        let hist = Bounded { lower: 0.90, estimate: 0.95, upper: 0.98 };
        w.slos.push(SloReport {
            slo: "chat".into(),
            objective: 0.99,
            status: SloStatus::Evaluated(values(hist, 2.0, 100.0)),
        });
        if let Some(joint) = tap {
            w.requests.push(RequestWindow {
                source: DataSource::Tap,
                coverage: 1.0,
                basis: Basis::Records,
                from_unix: 0.0,
                to_unix: 60.0,
                requests: 104,
                failed: 3,
                requests_per_second: 104.0 / 60.0,
                output_tokens_per_second: 100.0,
                inexact_token_counts: 0,
                mean_ttft_seconds: None,
                latency: Vec::new(),
                slos: vec![RequestSlo {
                    slo: "chat".into(),
                    objective: 0.99,
                    status: SloStatus::Evaluated(values(joint, 3.0, 104.0)),
                    counts: BTreeMap::new(),
                    by_arrival: Vec::new(),
                }],
                ttft_gap: None,
            });
        }
        let target = TargetReport {
            target: "llama".into(),
            engine: None,
            health: Health { up: true, last_evaluation_ms: Some(0), ..Health::default() },
            models: vec![ModelReport { model: "m".into(), windows: vec![w] }].into(),
        };
        (Report { targets: vec![target], ..Report::default() }, w1)
    }

    fn render_one(tap: Option<Bounded>) -> String {
        let (r, w) = report(tap);
        render(&r, &View { windows: &[w], base_url: Some("http://127.0.0.1:9464".into()) })
    }

    #[test]
    fn the_tap_share_stands_beside_the_bracket_with_its_own_failures() {
        let out = render_one(Some(Bounded::exact(0.97)));
        assert!(out.contains("1m 97.0% exact from tap (histograms [90.0%–98.0%])"), "{out}");
        assert!(out.contains("3 of 104 requests failed;"), "the tap's own counts: {out}");
        // Goodput beside the throughput of the same requests, and the row's too.
        assert!(out.contains("goodput 97 of 100 tok/s (tap)"), "{out}");
        assert!(out.contains("over 1m: throughput and failures from tap"), "{out}");
        assert!(out.contains("     1.7    2.9%      100"), "the tap's req/s, failed share and tokens/s: {out}");
        assert!(out.contains("next: open http://127.0.0.1:9464/"), "{out}");
    }

    #[test]
    fn without_request_data_the_bracket_and_the_histogram_failures_are_shown() {
        let out = render_one(None);
        assert!(out.contains("1m ~95.0% [90.0%–98.0%]"), "{out}");
        assert!(out.contains("2 of 100 requests failed;"), "{out}");
        assert!(out.contains("goodput 95 [90–98] tok/s (histograms)"), "{out}");
        assert!(!out.contains("from tap"), "{out}");
    }

    #[test]
    fn a_tap_share_from_counted_tokens_is_called_bounded_not_exact() {
        let out = render_one(Some(Bounded { lower: 0.96, estimate: 0.965, upper: 0.97 }));
        assert!(out.contains("1m [96.0%–97.0%] bounded from tap"), "{out}");
        assert!(!out.contains("exact from"), "{out}");
    }

    /// Long names, slow latencies, four windows and many alerts: every line still fits
    /// the width, and the row lines up under the header.
    #[test]
    fn long_names_and_many_alerts_fit_the_width() {
        use crate::report::{AlertJson, LatencyQuantile};
        let (mut r, w1) = report(Some(Bounded::exact(0.97)));
        let windows: Vec<Window> =
            [60, 300, 900, 3600].iter().map(|&s| Window::new(Duration::from_secs(s)).unwrap()).collect();
        let t = &mut r.targets[0];
        t.target = "vllm-deployment-7f9c8b6d4-x2k4p".into();
        let m = &mut t.models_mut()[0];
        m.model = "meta-llama/Llama-3.1-405B-Instruct-FP8-dynamic".into();
        let first = &mut m.windows[0];
        first.latency.push(LatencyQuantile { metric: HistogramKind::Ttft, quantile: 0.99, value: 79.5, bracket: None });
        first.latency.push(LatencyQuantile {
            metric: HistogramKind::Tpot,
            quantile: 0.99,
            value: 0.042,
            bracket: None,
        });
        first.slos[0].slo = "a-very-long-slo-name-for-the-interactive-chat-tier-of-the-fleet".into();
        first.requests[0].slos[0].slo = first.slos[0].slo.clone();
        let more: Vec<WindowReport> = windows[1..]
            .iter()
            .map(|&w| {
                let mut c = m.windows[0].clone();
                c.window = w;
                c.coverage = 0.5;
                c
            })
            .collect();
        m.windows.extend(more);
        assert_eq!(w1, windows[0]);
        for i in 0..12 {
            r.alerts.push(AlertJson {
                labels: BTreeMap::from([
                    ("alertname".to_string(), "LLMErrorBudgetBurnFast".to_string()),
                    ("target".to_string(), format!("vllm-deployment-7f9c8b6d4-{i}")),
                ]),
                annotations: BTreeMap::new(),
                state: "firing",
                active_at: String::new(),
                value: "1".into(),
            });
        }
        let out = render(&r, &View { windows: &windows, base_url: None });
        for line in out.lines() {
            assert!(line.chars().count() <= WIDTH, "{} chars: {line}\n{out}", line.chars().count());
        }
        let lines: Vec<&str> = out.lines().collect();
        let header = lines[0].split("   (over").next().unwrap();
        let row = lines[1];
        assert!(row.starts_with("vllm-de…-x2k4p meta-llama/Llama…uct-FP8-dynamic "), "{out}");
        assert_eq!(row.chars().count(), header.chars().count(), "the row lines up under the header:\n{out}");
        assert!(row.contains(" 79.5 s ") && row.contains(" 42 ms "), "{out}");
        // The SLO line wraps between windows, and all four windows and the failures are shown.
        for want in ["1m 97.0% exact", "5m (50% covered)", "15m (50% covered)", "1h (50% covered)", "3 of 104"] {
            assert!(out.contains(want), "{want}: {out}");
        }
        assert!(out.lines().filter(|l| l.contains("LLMErrorBudgetBurnFast")).count() >= 2, "{out}");
        assert_eq!(out.matches("LLMErrorBudgetBurnFast").count(), 12, "{out}");
    }

    #[test]
    fn before_the_first_evaluation_it_says_what_it_waits_for() {
        let r = Report {
            targets: vec![TargetReport {
                target: "llama".into(),
                engine: None,
                health: Health::default(),
                models: Default::default(),
            }],
            ..Report::default()
        };
        let out = render(&r, &View { windows: &[], base_url: None });
        assert_eq!(out, "waiting for the first scrapes and evaluation of llama\n\n");
    }
}

#[cfg(test)]
#[path = "surfaces_tests.rs"]
mod surfaces_tests;
