//! The page's drawings, as inline SVG: an SLO's attainment as a bracket on a bar, and
//! sparklines of recent evaluations with threshold lines and bands behind them.
//!
//! Colours come from classes styled by status.css. Sparkline paths are written in whole
//! plot units as relative steps, which keeps a 100-target page small.

use std::fmt::Write;

use super::html::{Esc, NBSP, pct};
use crate::slo::Bounded;

/// Width and height of the attainment bar.
const BAR_W: f64 = 160.0;
const BAR_H: f64 = 18.0;
/// Room at each end so that a bracket at 0 or 1 keeps its caps.
const BAR_PAD: f64 = 4.0;

/// How an attainment compares with its objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Met: the exact value, or the whole bracket, is at or above the objective.
    Met,
    /// The bracket straddles the objective: the scrape cannot tell.
    Undecided,
    /// Missed: the exact value, or the whole bracket, is below the objective.
    Missed,
}

impl Verdict {
    pub fn of(exact: Option<f64>, bracket: &Bounded, objective: f64) -> Verdict {
        let (lo, hi) = match exact {
            Some(v) => (v, v),
            None => (bracket.lower, bracket.upper),
        };
        if lo >= objective {
            Verdict::Met
        } else if hi < objective {
            Verdict::Missed
        } else {
            Verdict::Undecided
        }
    }

    pub fn class(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Undecided => "undecided",
            Verdict::Missed => "missed",
        }
    }
}

/// One SLO's attainment over one window. `exact` is the share measured from request records
/// when the window has them; without it the scrape's bracket is drawn as a bracket (`[`
/// lower, `●` estimate, upper `]`) on a bar whose left end is low enough to show both the
/// objective and the bracket. The error budget is not a window's: the SLO table shows it
/// over the SLO's period beside the windows.
pub fn attainment_cell(out: &mut String, exact: Option<f64>, bracket: &Bounded, objective: f64) {
    let verdict = Verdict::of(exact, bracket, objective);
    let shown = exact.unwrap_or(bracket.estimate);
    // Four budgets below the objective, so that a 99 % SLO spans 95–100 % and a 95 % one
    // 75–100 %; further down when the bracket is lower.
    let floor = (objective - 4.0 * (1.0 - objective)).min(bracket.lower).min(shown).clamp(0.0, 1.0);
    let floor = if floor.is_finite() && floor < 1.0 { floor } else { 0.0 };
    let x = |v: f64| BAR_PAD + (v.clamp(floor, 1.0) - floor) / (1.0 - floor) * (BAR_W - 2.0 * BAR_PAD);
    let what = if exact.is_some() { "exact" } else { "bracket" };
    let _ = write!(
        out,
        r#"<div class="att {}"><svg class="attainment" width="{BAR_W}" height="{BAR_H}" viewBox="0 0 {BAR_W} {BAR_H}" role="img" data-kind="{what}" data-lower="{}" data-estimate="{}" data-upper="{}" data-objective="{}" data-floor="{}">"#,
        verdict.class(),
        bracket.lower,
        bracket.estimate,
        bracket.upper,
        objective,
        floor,
    );
    let _ = write!(
        out,
        "<title>attainment {} ({}: {} to {}), objective {}; bar from {} to 100{NBSP}%</title>",
        pct(shown, 2),
        what,
        pct(bracket.lower, 2),
        pct(bracket.upper, 2),
        pct(objective, 2),
        pct(floor, 1),
    );
    let _ = write!(out, r#"<rect class="track" x="0" y="5" width="{BAR_W}" height="8"/>"#);
    let xo = x(objective);
    let _ = write!(out, r#"<line class="objective" x1="{xo:.1}" x2="{xo:.1}" y1="1" y2="17"/>"#);
    let (xl, xu) = (x(bracket.lower), x(bracket.upper));
    let dim = if exact.is_some() { " dim" } else { "" };
    let _ = write!(
        out,
        r#"<path class="bracket{dim}" d="M{:.1} 3H{xl:.1}V15H{:.1}M{xl:.1} 9H{xu:.1}M{:.1} 3H{xu:.1}V15H{:.1}"/>"#,
        xl + 3.0,
        xl + 3.0,
        xu - 3.0,
        xu - 3.0,
    );
    match exact {
        Some(v) => {
            let _ = write!(out, r#"<rect class="exact" x="{:.1}" y="2" width="3" height="14"/>"#, x(v) - 1.5);
        }
        None => {
            let _ = write!(out, r#"<circle class="estimate" cx="{:.1}" cy="9" r="3"/>"#, x(bracket.estimate));
        }
    }
    out.push_str("</svg>");
    let _ = write!(out, r#" <span class="val">{}</span><br>"#, pct(shown, 2));
    if exact.is_some() {
        out.push_str(r#"<span class="range">exact</span>"#);
    } else if !bracket.is_exact() {
        let _ = write!(out, r#"<span class="range">[{} – {}]</span>"#, pct(bracket.lower, 2), pct(bracket.upper, 2));
    }
    out.push_str("</div>");
}

/// Size of a sparkline; the plot leaves a pixel above and below.
pub const SPARK_W: f64 = 240.0;
pub const SPARK_H: f64 = 64.0;

/// One line of a sparkline: values oldest first, `NaN` for a gap.
pub struct Line {
    /// Styles the line and its legend key (status.css).
    pub class: &'static str,
    /// Legend text, plain (escaped when written).
    pub label: String,
    pub values: Vec<f32>,
}

/// A shaded range between two series (a goodput bracket over time).
pub struct Ribbon {
    pub class: &'static str,
    pub lower: Vec<f32>,
    pub upper: Vec<f32>,
}

/// A horizontal band behind the plot (a KV-cache band).
pub struct Band {
    pub class: &'static str,
    pub from: f64,
    pub to: f64,
}

/// A horizontal line the series are judged against (an SLO threshold).
pub struct Threshold {
    pub label: String,
    pub value: f64,
}

/// A sparkline over the history ring: `ring_len` slots, the newest point at the right.
pub struct Chart {
    /// `data-chart` of the figure, for the tests (`goodput`, `ttft`, `tpot`, `kv`).
    pub kind: &'static str,
    pub title: String,
    pub ring_len: usize,
    pub lines: Vec<Line>,
    pub ribbons: Vec<Ribbon>,
    pub bands: Vec<Band>,
    pub thresholds: Vec<Threshold>,
    /// A fixed top of the scale (1 for a utilization); otherwise the data's and thresholds'
    /// maximum with some headroom.
    pub y_max: Option<f64>,
    /// Formats values for the scale label and the legend.
    pub unit: fn(f64) -> String,
    /// The time the ring covers, e.g. "last 15m".
    pub span: String,
}

/// Units of the plot's height: a value maps to a whole unit, finer than a pixel.
pub(super) const PLOT_UNITS: f64 = 100.0;

impl Chart {
    /// Writes the figure. The plot is a nested SVG whose x unit is one ring slot and whose
    /// y unit is a hundredth of the height, stretched to the chart's size, so that a path
    /// is one small relative step per evaluation (`l1-3`); labels sit in the outer SVG,
    /// which is not stretched.
    pub fn write(&self, out: &mut String) {
        let finite = |v: &f32| v.is_finite();
        let points = self.lines.first().map_or(0, |l| l.values.iter().filter(|v| finite(v)).count());
        let data_max = self
            .lines
            .iter()
            .flat_map(|l| l.values.iter())
            .chain(self.ribbons.iter().flat_map(|r| r.upper.iter()))
            .filter(|v| finite(v))
            .fold(0.0f64, |a, v| a.max(*v as f64));
        let top = self.y_max.unwrap_or_else(|| {
            let t = self.thresholds.iter().map(|t| t.value).filter(|v| v.is_finite()).fold(data_max, f64::max);
            if t > 0.0 { t * 1.15 } else { 1.0 }
        });
        let unit = |v: f64| ((1.0 - (v / top).clamp(0.0, 1.0)) * PLOT_UNITS).round() as i32;
        let slots = self.ring_len.max(2) - 1;
        let (plot_y, plot_h) = (1.0, SPARK_H - 2.0);
        let px = |u: f64| plot_y + u / PLOT_UNITS * plot_h;
        let _ = write!(
            out,
            r#"<figure class="chart" data-chart="{}" data-points="{points}"><svg class="spark" width="{SPARK_W}" height="{SPARK_H}" viewBox="0 0 {SPARK_W} {SPARK_H}" role="img"><title>{}</title><svg class="plot" x="0" y="{plot_y}" width="{SPARK_W}" height="{plot_h}" viewBox="0 0 {slots} {PLOT_UNITS}" preserveAspectRatio="none">"#,
            self.kind,
            Esc(&self.title),
        );
        let scaled = |v: f64| (1.0 - (v / top).clamp(0.0, 1.0)) * PLOT_UNITS;
        for b in &self.bands {
            let (y0, y1) = (scaled(b.to.min(top)), scaled(b.from.max(0.0)));
            let _ = write!(
                out,
                r#"<rect class="band {}" x="0" y="{y0:.1}" width="{slots}" height="{:.1}"/>"#,
                b.class,
                (y1 - y0).max(0.0)
            );
        }
        for r in &self.ribbons {
            let mut d = String::new();
            ribbon_path(&mut d, &r.lower, &r.upper, slots, unit);
            if !d.is_empty() {
                let _ = write!(out, r#"<path class="ribbon {}" d="{d}"/>"#, r.class);
            }
        }
        for t in self.thresholds.iter().filter(|t| t.value.is_finite()) {
            let _ = write!(
                out,
                r#"<line class="threshold" x1="0" x2="{slots}" y1="{u:.1}" y2="{u:.1}" data-value="{}"/>"#,
                t.value,
                u = scaled(t.value),
            );
        }
        for l in &self.lines {
            let mut d = String::new();
            line_path(&mut d, &l.values, slots, unit);
            if !d.is_empty() {
                let _ = write!(out, r#"<path class="line {}" d="{d}"/>"#, l.class);
            }
        }
        out.push_str("</svg>");
        for t in self.thresholds.iter().filter(|t| t.value.is_finite()) {
            let _ = write!(
                out,
                r#"<text class="thr" x="{:.0}" y="{:.1}">{}</text>"#,
                SPARK_W - 2.0,
                (px(scaled(t.value)) - 2.0).max(8.0),
                Esc(&t.label),
            );
        }
        if points == 0 {
            let _ = write!(
                out,
                r#"<text class="nodata" x="{}" y="{}">no data yet</text>"#,
                SPARK_W / 2.0,
                SPARK_H / 2.0 + 4.0
            );
        } else {
            let _ = write!(out, r#"<text class="axis" x="2" y="10">{}</text>"#, Esc(&(self.unit)(top)));
        }
        let _ = write!(out, "</svg><figcaption><b>{}</b>", Esc(&self.title));
        for l in &self.lines {
            let last = l.values.iter().rev().find(|v| v.is_finite()).map_or(f64::NAN, |v| *v as f64);
            let _ = write!(
                out,
                r#" <span class="key {}"></span>{} <span class="num">{}</span>"#,
                l.class,
                Esc(&l.label),
                Esc(&(self.unit)(last))
            );
        }
        let _ = write!(out, r#" <span class="span">{}</span></figcaption></figure>"#, Esc(&self.span));
    }
}

/// The path of `values` (oldest first, `NaN` a gap) over a plot of `slots` + 1 slots whose
/// newest is at the right, in the whole units `unit` maps a value to: a run of finite
/// values is a move and relative steps; a lone point a zero-length step, drawn as a dot by
/// a round cap.
pub(super) fn line_path(d: &mut String, values: &[f32], slots: usize, unit: impl Fn(f64) -> i32) {
    let start = (slots + 1).saturating_sub(values.len());
    let mut run: Vec<i32> = Vec::new();
    let mut run_start = 0;
    for (i, v) in values.iter().chain(std::iter::once(&f32::NAN)).enumerate() {
        if v.is_finite() {
            if run.is_empty() {
                run_start = start + i;
            }
            run.push(unit(*v as f64));
        } else if !run.is_empty() {
            let _ = write!(d, "M{run_start} {}", run[0]);
            if run.len() == 1 {
                d.push_str("l0 0");
            }
            steps(d, 1, &run);
            run.clear();
        }
    }
}

/// The closed shape between `lower` and `upper` wherever both are finite, on the plot of
/// [`line_path`]: along the upper values, back along the lower.
pub(super) fn ribbon_path(d: &mut String, lower: &[f32], upper: &[f32], slots: usize, unit: impl Fn(f64) -> i32) {
    let start = (slots + 1).saturating_sub(lower.len());
    for seg in segments(lower, upper) {
        let up: Vec<i32> = seg.clone().map(|i| unit(upper[i] as f64)).collect();
        let low: Vec<i32> = seg.clone().rev().map(|i| unit(lower[i] as f64)).collect();
        let _ = write!(d, "M{} {}", start + seg.start, up[0]);
        steps(d, 1, &up);
        let _ = write!(d, "L{} {}", start + seg.end - 1, low[0]);
        steps(d, -1, &low);
        d.push('Z');
    }
}

/// After a move to `ys[0]`: one relative step of `dx` slots per further value (`l1-3 1 2`),
/// a level run as one horizontal step (`h4`): a capacity or a KV cache stays level for
/// many evaluations, and a page draws hundreds of such paths.
pub(super) fn steps(d: &mut String, dx: i32, ys: &[i32]) {
    let mut in_l = false;
    let mut level = 0;
    for w in ys.windows(2) {
        let dy = w[1] - w[0];
        if dy == 0 {
            level += 1;
            continue;
        }
        if level > 0 {
            let _ = write!(d, "h{}", dx * level);
            (level, in_l) = (0, false);
        }
        let sep = if in_l { " " } else { "l" };
        let _ = if dy < 0 { write!(d, "{sep}{dx}{dy}") } else { write!(d, "{sep}{dx} {dy}") };
        in_l = true;
    }
    if level > 0 {
        let _ = write!(d, "h{}", dx * level);
    }
}

/// Index ranges where both series are finite, for drawing a ribbon in pieces.
fn segments<'a>(a: &'a [f32], b: &'a [f32]) -> impl Iterator<Item = std::ops::Range<usize>> + 'a {
    let ok = move |i: usize| a[i].is_finite() && b.get(i).is_some_and(|v| v.is_finite());
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < a.len() && !ok(i) {
            i += 1;
        }
        if i >= a.len() {
            return None;
        }
        let start = i;
        while i < a.len() && ok(i) {
            i += 1;
        }
        Some(start..i)
    })
}
