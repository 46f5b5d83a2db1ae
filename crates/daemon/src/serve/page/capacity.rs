//! The capacity chart (docs/status-page.md#capacity, docs/capacity.md): per target, model
//! and SLO, the capacity estimate over the history ring against the arrivals, with the
//! evaluations in which the engine was saturated marked, as inline SVG.
//!
//! An interval (failing load seen) is the conservative end's p10–p90 as a shaded band with
//! its p50 as a line; a censored estimate, a lower bound only, is a dashed line and, at the
//! right edge, an upward arrow with "≥": drawing a band there would invent a ceiling.
//! Without an estimate, now or in the ring, the figure is a sentence saying so instead of
//! an empty plot. The right edge shows the report's own numbers, those `/metrics` exports,
//! with their values in data attributes so that a test can read them back from the y.

use std::fmt::Write;

use super::history::Series;
use super::html::{Esc, NBSP, plural};
use super::svg::{PLOT_UNITS, line_path, ribbon_path};
use crate::capacity::{CapacityReport, Method, SloCapacity};

/// Size of the chart.
pub const CAP_W: f64 = 440.0;
pub const CAP_H: f64 = 124.0;
/// The plot's box in the chart: room on the left for the scale, on the right for the
/// newest values, below for the time axis.
pub const PLOT_X: f64 = 40.0;
pub const PLOT_Y: f64 = 6.0;
pub const PLOT_W: f64 = 320.0;
pub const PLOT_H: f64 = 96.0;

/// The newest estimate of one SLO, as the report has it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Now {
    /// Failing load was seen: the conservative end's quantiles.
    Interval { p10: f64, p50: f64, p90: f64 },
    /// No failing load seen yet: at least this rate (the conservative end's p10).
    LowerBound(f64),
    /// No rate bin holds enough requests yet.
    Unknown,
}

impl Now {
    pub fn of(c: Option<&SloCapacity>) -> Now {
        match c.and_then(|c| c.conservative().map(|e| (c, e))) {
            Some((c, e)) if c.censored() => Now::LowerBound(e.p10),
            Some((_, e)) => Now::Interval { p10: e.p10, p50: e.p50, p90: e.p90 },
            None => Now::Unknown,
        }
    }

    fn state(self) -> &'static str {
        match self {
            Now::Interval { .. } => "interval",
            Now::LowerBound(_) => "lower-bound",
            Now::Unknown => "unknown",
        }
    }

    fn values(self) -> [f64; 3] {
        match self {
            Now::Interval { p10, p50, p90 } => [p10, p50, p90],
            Now::LowerBound(v) => [v, f64::NAN, f64::NAN],
            Now::Unknown => [f64::NAN; 3],
        }
    }
}

/// The vertical scale, requests/s from 0 at the bottom of the plot to `top` at its top.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub top: f64,
}

impl Scale {
    /// A round top (1, 2, 2.5 or 5 × 10ⁿ) at least 10 % above `max`, so that the scale's
    /// labels are short and the highest value does not touch the edge.
    pub fn above(max: f64) -> Scale {
        if !(max.is_finite() && max > 0.0) {
            return Scale { top: 1.0 };
        }
        let m = max * 1.1;
        let p = 10f64.powf(m.log10().floor());
        let top = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|k| k * p).find(|t| *t >= m).unwrap_or(10.0 * p);
        Scale { top }
    }

    /// The y in the chart of `rate`, clamped to the plot.
    pub fn y(self, rate: f64) -> f64 {
        PLOT_Y + (1.0 - (rate / self.top).clamp(0.0, 1.0)) * PLOT_H
    }

    /// The same in the stretched plot's whole units, for the paths.
    fn unit(self, rate: f64) -> i32 {
        ((1.0 - (rate / self.top).clamp(0.0, 1.0)) * PLOT_UNITS).round() as i32
    }
}

/// Writes the figure of SLO `slo`, from the ring of `series` and the report's `capacity`.
pub fn chart(
    out: &mut String,
    slo: &str,
    series: Option<&Series>,
    capacity: Option<&CapacityReport>,
    ring_len: usize,
    span: &str,
) {
    let now_slo = capacity.and_then(|c| c.slos.iter().find(|s| s.slo == slo));
    let now = Now::of(now_slo);
    let arrivals_now = capacity.and_then(|c| c.arrival_rate).filter(|a| a.is_finite());
    let column: Vec<[f32; 3]> = series
        .and_then(|s| s.capacity.iter().find(|(n, _)| n == slo))
        .map_or_else(Vec::new, |(_, c)| c.iter().copied().collect());
    let points = column.iter().filter(|p| p[0].is_finite()).count();
    if now == Now::Unknown && points == 0 {
        let _ = write!(
            out,
            r#"<figure class="chart capacity" data-chart="capacity" data-slo="{}" data-state="none"><p class="nodata">Capacity for SLO {}: not enough load variation yet. It shows once the load has varied enough to fill a rate bin with requests (docs/capacity.md).</p></figure>"#,
            Esc(slo),
            Esc(slo),
        );
        return;
    }
    let arrivals: Vec<f32> = series.map_or_else(Vec::new, |s| s.arrivals.iter().copied().collect());
    let saturated: Vec<bool> = series.map_or_else(Vec::new, |s| s.saturated.iter().copied().collect());
    let finite = |v: &f64| v.is_finite();
    let max = column
        .iter()
        .flatten()
        .chain(&arrivals)
        .map(|v| *v as f64)
        .chain(now.values())
        .chain(arrivals_now)
        .filter(finite)
        .fold(0.0, f64::max);
    let scale = Scale::above(max);
    let slots = ring_len.max(2) - 1;
    let saturated_count = saturated.iter().filter(|s| **s).count();
    let headroom = now_slo.and_then(|c| c.headroom).filter(|h| h.is_finite());

    let _ = write!(
        out,
        r#"<figure class="chart capacity" data-chart="capacity" data-slo="{}" data-state="{}" data-points="{points}" data-top="{}" data-plot-y="{PLOT_Y}" data-plot-h="{PLOT_H}" data-saturated="{saturated_count}"><svg class="capacity" width="{CAP_W}" height="{CAP_H}" viewBox="0 0 {CAP_W} {CAP_H}" role="img"><title>Capacity for SLO {} against arrivals, requests/s</title><desc>"#,
        Esc(slo),
        now.state(),
        scale.top,
        Esc(slo),
    );
    describe(out, now, arrivals_now, headroom, saturated_count, saturated.len());
    out.push_str("</desc>");
    // The scale: gridlines and labels at 0, half and the top.
    for v in [0.0, scale.top / 2.0, scale.top] {
        let y = scale.y(v);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{PLOT_X}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="yl" x="{}" y="{:.1}">{}</text>"#,
            PLOT_X + PLOT_W,
            PLOT_X - 3.0,
            y + 3.0,
            tick(v),
        );
    }
    let below = PLOT_Y + PLOT_H + 12.0;
    let _ = write!(
        out,
        r#"<text class="unit" transform="translate(9 {:.0}) rotate(-90)">requests/s</text><text class="axis" x="{PLOT_X}" y="{below}">{}</text><text class="yl" x="{}" y="{below}">now</text>"#,
        PLOT_Y + PLOT_H / 2.0,
        Esc(span),
        PLOT_X + PLOT_W,
    );
    let _ = write!(
        out,
        r#"<svg class="plot" x="{PLOT_X}" y="{PLOT_Y}" width="{PLOT_W}" height="{PLOT_H}" viewBox="0 0 {slots} {PLOT_UNITS}" preserveAspectRatio="none">"#
    );
    saturated_runs(out, &saturated, slots);
    let unit = |v: f64| scale.unit(v);
    // Interval points have a finite p90; a censored one has its p10 alone.
    let column_of = |k: usize, censored: bool| -> Vec<f32> {
        column.iter().map(|p| if p[2].is_finite() != censored { p[k] } else { f32::NAN }).collect()
    };
    let mut d = String::new();
    ribbon_path(&mut d, &column_of(0, false), &column_of(2, false), slots, unit);
    path(out, "capband", &mut d);
    line_path(&mut d, &column_of(1, false), slots, unit);
    path(out, "line p50", &mut d);
    line_path(&mut d, &column_of(0, true), slots, unit);
    path(out, "line bound", &mut d);
    line_path(&mut d, &arrivals, slots, unit);
    path(out, "line arrivals", &mut d);
    out.push_str("</svg>");
    now_marks(out, now, arrivals_now, scale);
    out.push_str("</svg><figcaption>");
    let method = now_slo.filter(|_| now != Now::Unknown).map(|c| c.method);
    legend(out, slo, (now, method), arrivals_now, headroom, (saturated_count, saturated.len()), span);
    out.push_str("</figcaption></figure>");
}

/// A `<path>` of `d` when it has anything, leaving `d` empty for the next.
fn path(out: &mut String, class: &str, d: &mut String) {
    if !d.is_empty() {
        let _ = write!(out, r#"<path class="{class}" d="{d}"/>"#);
        d.clear();
    }
}

/// One shaded column per run of saturated evaluations, each slot half a step either side.
fn saturated_runs(out: &mut String, saturated: &[bool], slots: usize) {
    let start = (slots + 1).saturating_sub(saturated.len());
    let mut i = 0;
    while i < saturated.len() {
        if !saturated[i] {
            i += 1;
            continue;
        }
        let from = i;
        while i < saturated.len() && saturated[i] {
            i += 1;
        }
        let x0 = ((start + from) as f64 - 0.5).max(0.0);
        let x1 = ((start + i - 1) as f64 + 0.5).min(slots as f64);
        let _ = write!(
            out,
            r#"<rect class="saturated" x="{x0}" y="0" width="{}" height="{PLOT_UNITS}"/>"#,
            (x1 - x0).max(0.0)
        );
    }
}

/// The newest values at the right edge, in the chart's own (unstretched) coordinates.
fn now_marks(out: &mut String, now: Now, arrivals: Option<f64>, scale: Scale) {
    let x = PLOT_X + PLOT_W + 4.0;
    match now {
        Now::Interval { p10, p50, p90 } => {
            let (y10, y50, y90) = (scale.y(p10), scale.y(p50), scale.y(p90));
            let _ = write!(
                out,
                r#"<rect class="now capband" x="{x}" y="{y90:.1}" width="8" height="{:.1}" data-p10="{p10}" data-p90="{p90}"/><line class="now p50" x1="{x}" x2="{}" y1="{y50:.1}" y2="{y50:.1}" data-value="{p50}"/><text class="now" x="{}" y="{:.1}">{}</text>"#,
                (y10 - y90).max(0.0),
                x + 8.0,
                x + 11.0,
                y50 + 3.0,
                rate(p50),
            );
        }
        Now::LowerBound(v) => {
            let y = scale.y(v);
            let _ = write!(
                out,
                r#"<path class="now bound" d="M{x} {y:.1}h8M{} {y:.1}v-12m-3 3l3-3 3 3" data-value="{v}"/><text class="now" x="{}" y="{:.1}">≥ {}</text>"#,
                x + 4.0,
                x + 11.0,
                y + 3.0,
                rate(v),
            );
        }
        Now::Unknown => {}
    }
    if let Some(a) = arrivals {
        let _ = write!(
            out,
            r#"<circle class="now arrivals" cx="{}" cy="{:.1}" r="2.5" data-value="{a}"/>"#,
            PLOT_X + PLOT_W,
            scale.y(a)
        );
    }
}

/// The chart in words, for `<desc>`: what a screen reader says instead of the drawing.
fn describe(
    out: &mut String,
    now: Now,
    arrivals: Option<f64>,
    headroom: Option<f64>,
    saturated: usize,
    evaluations: usize,
) {
    match now {
        Now::Interval { p10, p50, p90 } => {
            let _ = write!(out, "Capacity {}–{}{NBSP}requests/s (p10–p90), p50 {}", rate(p10), rate(p90), rate(p50));
        }
        Now::LowerBound(v) => {
            let _ = write!(out, "Capacity at least {}{NBSP}requests/s: no failing load seen yet", rate(v));
        }
        Now::Unknown => out.push_str("No capacity estimate now"),
    }
    if let Some(a) = arrivals {
        let _ = write!(out, "; arrivals now {}{NBSP}requests/s", rate(a));
    }
    if let Some(h) = headroom {
        let at_least = if matches!(now, Now::LowerBound(_)) { "at least " } else { "" };
        let _ = write!(out, "; headroom {at_least}{h:.2}×");
    }
    let _ = write!(out, "; saturated in {saturated} of the last {}.", plural(evaluations, "evaluation"));
}

/// The caption: the one place the page states the SLO's capacity and headroom in words.
fn legend(
    out: &mut String,
    slo: &str,
    (now, method): (Now, Option<Method>),
    arrivals: Option<f64>,
    headroom: Option<f64>,
    (saturated, evaluations): (usize, usize),
    span: &str,
) {
    let _ = write!(out, "<b>Capacity for SLO {} against arrivals, requests/s</b>", Esc(slo));
    match now {
        Now::Interval { p10, p50, p90 } => {
            let _ = write!(
                out,
                r#" <span class="key capband"></span>capacity p10–p90 <span class="num">{}–{}</span> <span class="key p50"></span>p50 <span class="num">{}</span>"#,
                rate(p10),
                rate(p90),
                rate(p50),
            );
        }
        Now::LowerBound(v) => {
            let _ = write!(
                out,
                r#" <span class="key bound"></span>capacity <span class="num">≥ {}</span> (a lower bound: no failing load seen yet)"#,
                rate(v),
            );
        }
        Now::Unknown => out.push_str(" no capacity estimate now"),
    }
    match method {
        Some(Method::Empirical) => out.push_str(", from requests"),
        Some(Method::Bounds) => out.push_str(", from histogram bounds"),
        None => {}
    }
    let _ = write!(
        out,
        r#" <span class="key arrivals"></span>arrivals <span class="num">{}</span>"#,
        arrivals.map_or("-".into(), rate)
    );
    match headroom {
        // A lower bound on the capacity bounds the headroom from below only: no colour, as
        // the engine may be far from its knee.
        Some(h) if matches!(now, Now::LowerBound(_)) => {
            let _ = write!(out, r#" headroom <span class="num">≥ {h:.2}×</span>"#);
        }
        Some(h) => {
            let _ = write!(out, r#" headroom <span class="num {}">{h:.2}×</span>"#, headroom_class(h));
        }
        None => out.push_str(" headroom -"),
    }
    let _ = write!(
        out,
        r#" <span class="key saturated"></span>saturated in {saturated} of {} <span class="span">{}</span>"#,
        plural(evaluations, "evaluation"),
        Esc(span)
    );
}

/// Under 1 the engine is past its knee; under the alert's default 1.2 it is close.
pub fn headroom_class(h: f64) -> &'static str {
    if h < 1.0 {
        "bad"
    } else if h < 1.2 {
        "warn"
    } else {
        "ok"
    }
}

/// A rate as the page writes it: two decimals.
fn rate(v: f64) -> String {
    if v.is_finite() { format!("{v:.2}") } else { "-".into() }
}

/// A scale label: no trailing zeros (`2.5`, `10`).
fn tick(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
