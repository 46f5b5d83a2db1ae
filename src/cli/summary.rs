//! The terminal summary of one report: what `goodput demo` prints every few seconds and
//! `goodput replay --format table` prints per instant.
//!
//! It says what a person needs first and hides nothing that changes the reading: every
//! configured window's attainment (not only the shortest), the failed requests behind an
//! attainment below 100 %, the exact share from the request path beside the histogram
//! bracket, pending as well as firing alerts, and where to look next.

use std::fmt::Write as _;

use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::report::{Report, SloStatus, SloValues, TargetReport, WindowReport};
use crate::request::preferred_slo;
use crate::slo::Clause;

/// What the summary shows besides the report.
pub struct View<'a> {
    /// The configured windows, shortest first; the report also holds the longer windows
    /// the alert rules read, which the summary leaves out.
    pub windows: &'a [Window],
    /// The daemon's base URL (`http://addr`), for the "open next" line; `None` in a replay.
    pub base_url: Option<String>,
}

fn ms(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{:.0}ms", v * 1000.0))
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn p99(w: &WindowReport, metric: HistogramKind) -> Option<f64> {
    w.latency.iter().find(|l| l.metric == metric && l.quantile == 0.99).map(|l| l.value)
}

/// The whole summary, ending with a blank line.
pub fn render(report: &Report, view: &View<'_>) -> String {
    let mut out = String::new();
    let evaluated = report.targets.iter().any(|t| t.health.last_evaluation_ms.is_some() || !t.models.is_empty());
    if !evaluated {
        let names: Vec<&str> = report.targets.iter().map(|t| t.target.as_str()).collect();
        let _ = writeln!(out, "waiting for the first scrapes and evaluation of {}", names.join(", "));
        out.push('\n');
        return out;
    }
    let shortest = view.windows.first().copied();
    let _ = writeln!(
        out,
        "{:<10} {:<16} {:>9} {:>9} {:>7} {:>8} {:>9} {:>16}   (over {})",
        "target",
        "model",
        "p99 TTFT",
        "p99 TPOT",
        "req/s",
        "failed",
        "tokens/s",
        "KV band",
        shortest.map_or("-".into(), |w| w.to_string())
    );
    for t in &report.targets {
        target(&mut out, t, view);
    }
    alerts(&mut out, report);
    out.push_str(&waiting(report));
    if let Some(base) = &view.base_url {
        let _ = writeln!(out, "next: open {base}/ for the status page (charts, alerts, scrape health)");
    }
    out.push('\n');
    out
}

fn target(out: &mut String, t: &TargetReport, view: &View<'_>) {
    if !t.health.up {
        let why = t.health.last_error.as_deref().unwrap_or("no successful scrape yet");
        let _ = writeln!(out, "{:<10} down: {why}", t.target);
        return;
    }
    for m in &t.models {
        let windows: Vec<&WindowReport> =
            m.windows.iter().filter(|w| view.windows.is_empty() || view.windows.contains(&w.window)).collect();
        let Some(w) = windows.first() else { continue };
        let num =
            |v: Option<f64>, digits: usize| v.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{v:.digits$}"));
        let failed = w.slos.iter().find_map(|s| match &s.status {
            SloStatus::Evaluated(v) if v.requests > 0.0 => Some(v.failed / v.requests),
            _ => None,
        });
        let band = w.kv_cache.as_ref().map_or("-".into(), |k| format!("{} {:.0}%", k.band.as_str(), k.last * 100.0));
        let _ = writeln!(
            out,
            "{:<10} {:<16} {:>9} {:>9} {:>7} {:>8} {:>9} {:>16}",
            t.target,
            m.model,
            ms(p99(w, HistogramKind::Ttft)),
            ms(p99(w, HistogramKind::Tpot)),
            num(w.requests_per_second, 1),
            failed.map_or("-".into(), pct),
            num(w.output_tokens_per_second, 0),
            band
        );
        let slos: Vec<&str> = w.slos.iter().map(|s| s.slo.as_str()).collect();
        for slo in slos {
            slo_line(out, slo, &windows);
        }
        if let Some(gap) =
            crate::request::preferred(w).and_then(|r| r.ttft_gap.as_ref()).and_then(|g| g.mean.map(|m| (g, m)))
        {
            let _ = writeln!(
                out,
                "    TTFT outside the engine (tap mean − {} mean): {:+.1}ms",
                gap.0.reference.as_str(),
                gap.1 * 1000.0
            );
        }
    }
}

/// One SLO: per window, the exact share from requests when there is one, else the
/// histogram estimate, always with the histogram bracket; the shortest window also says
/// how many requests failed and the goodput.
fn slo_line(out: &mut String, slo: &str, windows: &[&WindowReport]) {
    let mut parts = Vec::new();
    let mut objective = None;
    let mut detail = String::new();
    for (i, w) in windows.iter().enumerate() {
        let Some(s) = w.slos.iter().find(|s| s.slo == slo) else { continue };
        objective = Some(s.objective);
        // A window not yet covered by data holds less than its name says.
        let name = if w.coverage < 0.999 {
            format!("{} ({:.0}% covered)", w.window, w.coverage * 100.0)
        } else {
            w.window.to_string()
        };
        let exact = preferred_slo(w, slo);
        let part = match (&s.status, exact.and_then(|(src, v)| v.attainment.get(&Clause::Joint).map(|b| (src, b, v)))) {
            (SloStatus::Evaluated(v), Some((src, b, r))) => {
                if i == 0 {
                    detail = failures_and_goodput(r);
                }
                // Exact unless some token count was counted, not reported: then bounded.
                let (kind, value) = if b.is_exact() {
                    ("exact", pct(b.estimate))
                } else {
                    ("bounded", format!("[{}–{}]", pct(b.lower), pct(b.upper)))
                };
                match v.attainment.get(&Clause::Joint) {
                    Some(h) => format!(
                        "{name} {value} {kind} from {} (histograms [{}–{}])",
                        src.as_str(),
                        pct(h.lower),
                        pct(h.upper)
                    ),
                    None => format!("{name} {value} {kind} from {}", src.as_str()),
                }
            }
            (SloStatus::Evaluated(v), None) => match v.attainment.get(&Clause::Joint) {
                Some(h) => {
                    if i == 0 {
                        detail = failures_and_goodput(v);
                    }
                    format!("{name} ~{} [{}–{}]", pct(h.estimate), pct(h.lower), pct(h.upper))
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
    let _ = writeln!(out, "    SLO {slo} ({}): {}{detail}", objective.map_or("-".into(), pct), parts.join(" · "));
}

/// "; F of N requests failed; goodput G tok/s", with goodput's bounds when it has them.
fn failures_and_goodput(v: &SloValues) -> String {
    let goodput = match v.goodput_tokens_per_second {
        Some(g) if g.is_exact() => format!("{:.0} tok/s", g.estimate),
        Some(g) => format!("{:.0} tok/s [{:.0}–{:.0}]", g.estimate, g.lower, g.upper),
        None => "-".into(),
    };
    format!("; {:.0} of {:.0} requests failed; goodput {goodput}", v.failed, v.requests)
}

/// Firing, then pending alerts, each with its target.
fn alerts(out: &mut String, report: &Report) {
    for state in ["firing", "pending"] {
        let names: Vec<String> = report
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
        let _ = writeln!(out, "{state}: {}", if names.is_empty() { "none".into() } else { names.join(", ") });
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
    let items: Vec<String> = worst
        .iter()
        .map(|r| {
            let left = std::time::Duration::from_secs(r.ready_in_seconds.ceil() as u64);
            format!(
                "{} ({} {:.0}% covered, ready in {})",
                r.alertname,
                r.window,
                r.coverage * 100.0,
                crate::duration::format_duration(left)
            )
        })
        .collect();
    format!("waiting for window coverage: {}\n", items.join(", "))
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
            models: vec![ModelReport { model: "m".into(), windows: vec![w] }],
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
        assert!(out.contains("3 of 104 requests failed; goodput 97 tok/s"), "the tap's own counts: {out}");
        assert!(out.contains("next: open http://127.0.0.1:9464/"), "{out}");
    }

    #[test]
    fn without_request_data_the_bracket_and_the_histogram_failures_are_shown() {
        let out = render_one(None);
        assert!(out.contains("1m ~95.0% [90.0%–98.0%]"), "{out}");
        assert!(out.contains("2 of 100 requests failed; goodput 95 tok/s [90–98]"), "{out}");
        assert!(!out.contains("from tap"), "{out}");
    }

    #[test]
    fn a_tap_share_from_counted_tokens_is_called_bounded_not_exact() {
        let out = render_one(Some(Bounded { lower: 0.96, estimate: 0.965, upper: 0.97 }));
        assert!(out.contains("1m [96.0%–97.0%] bounded from tap"), "{out}");
        assert!(!out.contains("exact from"), "{out}");
    }

    #[test]
    fn before_the_first_evaluation_it_says_what_it_waits_for() {
        let r = Report {
            targets: vec![TargetReport {
                target: "llama".into(),
                engine: None,
                health: Health::default(),
                models: Vec::new(),
            }],
            ..Report::default()
        };
        let out = render(&r, &View { windows: &[], base_url: None });
        assert_eq!(out, "waiting for the first scrapes and evaluation of llama\n\n");
    }
}
