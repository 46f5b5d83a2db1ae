//! The capacity chart's geometry: an interval is a band with its p50, a censored estimate a
//! dashed lower bound with an arrow and "≥", no estimate a sentence instead of a plot; the
//! newest values sit at the y of their value; saturated evaluations are shaded.

use std::collections::VecDeque;

use super::*;
use crate::capacity::{Method, RateEstimate};

/// The value of `attr="…"` in the first element of `html` whose tag starts with `tag`.
fn attr<'a>(html: &'a str, tag: &str, attr: &str) -> &'a str {
    let at = html.find(tag).unwrap_or_else(|| panic!("no {tag} in {html}"));
    let el = &html[at..at + html[at..].find('>').unwrap()];
    let key = format!(" {attr}=\"");
    let v = el.find(&key).unwrap_or_else(|| panic!("no {attr} in {el}")) + key.len();
    &el[v..v + el[v..].find('"').unwrap()]
}

fn num(html: &str, tag: &str, a: &str) -> f64 {
    attr(html, tag, a).parse().unwrap()
}

/// A report of one SLO `chat` with `estimate` (none when `None`) and arrivals 3.2/s.
fn report(estimate: Option<(f64, f64, f64, bool)>, headroom: Option<f64>) -> CapacityReport {
    let estimates = estimate
        .map(|(p10, p50, p90, censored)| RateEstimate {
            end: None,
            p10,
            p50,
            p90,
            censored,
            below_data: false,
            bins: 4,
        })
        .into_iter()
        .collect();
    CapacityReport {
        target: "t".into(),
        model: "m".into(),
        arrival_rate: Some(3.2),
        rising: false,
        saturated: false,
        reasons: Vec::new(),
        slos: vec![SloCapacity {
            slo: "chat".into(),
            objective: 0.95,
            method: Method::Empirical,
            estimates,
            headroom,
            intervals_used: 40,
            age_seconds: Some(100.0),
        }],
        intervals: 40,
    }
}

/// A ring of `points` for `chat`, arrivals 3 req/s throughout, saturated where `sat`.
fn series(points: &[[f32; 3]], sat: &[bool]) -> Series {
    let mut s = Series::default();
    for (i, p) in points.iter().enumerate() {
        s.t_ms.push_back(i as i64 * 5_000);
        s.arrivals.push_back(3.0);
        s.saturated.push_back(sat.get(i).copied().unwrap_or(false));
        let _ = p;
    }
    s.capacity.push(("chat".into(), points.iter().copied().collect::<VecDeque<_>>()));
    s
}

fn draw(series: Option<&Series>, report: Option<&CapacityReport>) -> String {
    let mut out = String::new();
    chart(&mut out, "chat", series, report, 10, "last 45s");
    out
}

#[test]
fn an_interval_is_a_band_with_its_median_and_the_newest_values_at_their_y() {
    let s = series(&[[3.4, 3.7, 4.1]; 10], &[]);
    let r = report(Some((3.4, 3.7, 4.1, false)), Some(3.4 / 3.2));
    let html = draw(Some(&s), Some(&r));
    assert_eq!(attr(&html, "<figure", "data-state"), "interval");
    let scale = Scale::above(4.1);
    assert_eq!(scale.top, 5.0);
    assert_eq!(num(&html, "<figure", "data-top"), 5.0);
    assert!(html.contains(r#"<path class="capband" d="M0 "#), "{html}");
    assert!(html.contains(r#"<path class="line p50""#) && html.contains(r#"<path class="line arrivals""#));
    assert!(!html.contains("line bound") && !html.contains("now bound") && !html.contains('≥'), "{html}");
    // In the plot's units (a hundredth of its height): p90 4.1 of 5 is 18 from the top.
    let band = attr(&html, r#"<path class="capband""#, "d");
    assert_eq!(band, "M0 18h9L9 32h-9Z", "level: one step along p90 and one back along p10");
    assert!(band.contains("L9 32"), "back along p10 (3.4 of 5 is 32 from the top): {band}");
    // The newest values, in the chart's pixels.
    let tag = r#"<rect class="now capband""#;
    assert!((num(&html, tag, "y") - scale.y(4.1)).abs() < 0.051, "{html}");
    assert!((num(&html, tag, "height") - (scale.y(3.4) - scale.y(4.1))).abs() < 0.051);
    assert_eq!((num(&html, tag, "data-p10"), num(&html, tag, "data-p90")), (3.4, 4.1));
    assert!((num(&html, r#"<line class="now p50""#, "y1") - scale.y(3.7)).abs() < 0.051);
    assert!((num(&html, r#"<circle class="now arrivals""#, "cy") - scale.y(3.2)).abs() < 0.051);
    assert!(html.contains(r#"headroom <span class="num warn">1.06×</span>"#), "{html}");
    assert!(html.contains("<desc>Capacity 3.40–4.10\u{a0}requests/s (p10–p90), p50 3.70; arrivals now 3.20"));
    assert!(html.contains("<title>Capacity for SLO chat against arrivals, requests/s</title>"));
}

#[test]
fn a_censored_estimate_is_a_dashed_lower_bound_with_an_arrow() {
    let s = series(&[[2.0, f32::NAN, f32::NAN]; 10], &[]);
    let r = report(Some((2.0, 2.2, 2.5, true)), Some(2.0 / 3.2));
    let html = draw(Some(&s), Some(&r));
    assert_eq!(attr(&html, "<figure", "data-state"), "lower-bound");
    // No band and no median: only the bound, dashed (status.css), across the ring.
    assert!(!html.contains("capband") && !html.contains("line p50"), "{html}");
    let scale = Scale::above(3.2);
    assert_eq!(scale.top, 5.0);
    assert_eq!(attr(&html, r#"<path class="line bound""#, "d"), "M0 60h9");
    // At the right edge: a tick at the bound with an arrow up from it, and "≥ 2.00".
    let d = attr(&html, r#"<path class="now bound""#, "d");
    let y = scale.y(2.0);
    assert!(d.starts_with(&format!("M{} {y:.1}h8M", PLOT_X + PLOT_W + 4.0)) && d.contains("v-12"), "{d}");
    assert_eq!(num(&html, r#"<path class="now bound""#, "data-value"), 2.0);
    assert!(html.contains("≥ 2.00</text>"));
    assert!(html.contains(r#"capacity <span class="num">≥ 2.00</span> (a lower bound"#));
    assert!(html.contains(r#"headroom <span class="num">≥ 0.62×</span>"#), "uncoloured: {html}");
    assert!(html.contains("<desc>Capacity at least 2.00\u{a0}requests/s: no failing load seen yet"));
}

#[test]
fn a_ring_that_changes_from_bound_to_interval_draws_each_where_it_holds() {
    let mut points = vec![[2.0, f32::NAN, f32::NAN]; 4];
    points.extend([[3.0, 3.5, 4.0]; 6]);
    let s = series(&points, &[]);
    let html = draw(Some(&s), Some(&report(Some((3.0, 3.5, 4.0, false)), None)));
    assert!(attr(&html, r#"<path class="line bound""#, "d").starts_with("M0 "), "{html}");
    assert!(attr(&html, r#"<path class="line bound""#, "d").ends_with("h3"), "four points");
    assert!(attr(&html, r#"<path class="capband""#, "d").starts_with("M4 "), "the band from slot 4");
    assert!(attr(&html, r#"<path class="line p50""#, "d").starts_with("M4 "));
    assert!(html.contains(" headroom -"), "no headroom in the report: a dash");
}

#[test]
fn without_an_estimate_the_chart_is_a_sentence_not_an_empty_plot() {
    for (s, r) in [(None, None), (Some(series(&[[f32::NAN; 3]; 10], &[])), Some(report(None, None)))] {
        let html = draw(s.as_ref(), r.as_ref());
        assert_eq!(attr(&html, "<figure", "data-state"), "none");
        assert!(html.contains("Capacity for SLO chat: not enough load variation yet."), "{html}");
        assert!(!html.contains("<svg"), "no empty chart: {html}");
        // The arrivals are said once, beside the charts, not in each SLO's sentence.
        assert!(!html.contains("arrivals"), "{html}");
    }
    // An estimate now with an empty ring (the first evaluation) is drawn.
    let html = draw(None, Some(&report(Some((3.4, 3.7, 4.1, false)), None)));
    assert_eq!(attr(&html, "<figure", "data-state"), "interval");
    assert_eq!(attr(&html, "<figure", "data-points"), "0");
    // An estimate in the ring but none now keeps the chart and says so.
    let html = draw(Some(&series(&[[3.4, 3.7, 4.1]; 3], &[])), Some(&report(None, None)));
    assert_eq!(attr(&html, "<figure", "data-state"), "unknown");
    assert!(html.contains("no capacity estimate now") && !html.contains("now capband"), "{html}");
}

#[test]
fn saturated_evaluations_are_shaded_runs() {
    let sat = [false, true, true, false, false, false, false, true, false, true];
    let html = draw(Some(&series(&[[3.4, 3.7, 4.1]; 10], &sat)), Some(&report(Some((3.4, 3.7, 4.1, false)), None)));
    let rects: Vec<&str> = html.match_indices(r#"<rect class="saturated""#).map(|(i, _)| &html[i..]).collect();
    assert_eq!(rects.len(), 3, "{html}");
    let xw = |r: &str| (num(r, "<rect", "x"), num(r, "<rect", "width"));
    // Each evaluation is half a slot either side, cut at the plot's edges.
    assert_eq!([xw(rects[0]), xw(rects[1]), xw(rects[2])], [(0.5, 2.0), (6.5, 1.0), (8.5, 0.5)]);
    assert_eq!(attr(&html, "<figure", "data-saturated"), "4");
    assert!(html.contains("saturated in 4 of the last 10 evaluations."));
}

#[test]
fn the_scale_is_round_and_above_the_data() {
    for (max, top) in [(0.0, 1.0), (f64::NAN, 1.0), (0.9, 1.0), (4.1, 5.0), (2.2, 2.5), (17.0, 20.0), (0.04, 0.05)] {
        assert!((Scale::above(max).top - top).abs() < 1e-12, "{max}: {}", Scale::above(max).top);
    }
    let s = Scale { top: 5.0 };
    assert_eq!((s.y(0.0), s.y(5.0), s.y(2.5), s.y(9.0)), (PLOT_Y + PLOT_H, PLOT_Y, PLOT_Y + PLOT_H / 2.0, PLOT_Y));
    assert_eq!((tick(2.5), tick(10.0), tick(0.05)), ("2.5".to_string(), "10".to_string(), "0.05".to_string()));
}

#[test]
fn level_runs_are_one_horizontal_step() {
    use super::super::svg::steps;
    let mut d = String::new();
    steps(&mut d, 1, &[5, 5, 5, 3, 3, 4, 4, 4, 4]);
    assert_eq!(d, "h2l1-2h1l1 1h3");
    d.clear();
    steps(&mut d, -1, &[1, 2, 2, 0]);
    assert_eq!(d, "l-1 1h-1l-1-2");
    d.clear();
    steps(&mut d, 1, &[1, 2, 0]);
    assert_eq!(d, "l1 1 1-2", "steps in a row share one command");
}
