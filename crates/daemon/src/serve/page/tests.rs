//! The page as HTML: escaping of hostile names, the attainment bracket, thresholds and KV
//! bands, gaps in the charts, the response headers, and the size of a 100-target page. The
//! words and numbers (budgets, units, counts, the capacity sentence) are in text_tests.rs.

use super::svg::Verdict;
use super::*;
use crate::report::SloStatus;
use crate::slo::Bounded;

/// The page after `steps` evaluations of the sample report with `targets` targets, with
/// the sample's error budgets.
pub(super) fn page(targets: usize, steps: usize) -> (String, StatusPage) {
    let p = StatusPage::new(sample::facts(), DEFAULT_RING_LEN);
    let mut last = Report::default();
    for step in 0..steps {
        last = sample::report(targets, step);
        last.budgets = sample::budgets(&last);
        p.record(&last);
    }
    (p.html(&last), p)
}

/// `s` with each space after a digit a no-break space, as the page joins numbers to units.
pub(super) fn nb(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let after_digit = out.ends_with(|p: char| p.is_ascii_digit());
        out.push(if c == ' ' && after_digit { '\u{a0}' } else { c });
    }
    out
}

/// The value of `attr="…"` in the first tag of `html` that has it.
pub(super) fn attr<'a>(html: &'a str, attr: &str) -> &'a str {
    let key = format!(" {attr}=\"");
    let at = html.find(&key).unwrap_or_else(|| panic!("no {attr} in {html}")) + key.len();
    &html[at..at + html[at..].find('"').unwrap()]
}

#[test]
fn hostile_names_stay_text() {
    let mut r = sample::report(2, 0);
    let evil = r#"<script>alert(1)</script>"#;
    r.targets[0].target = evil.into();
    r.targets[0].models_mut()[0].model = r#""><img src=x onerror=alert(2)>"#.into();
    for w in &mut r.targets[0].models_mut()[0].windows {
        w.slos[0].slo = "<b>slo</b>".into();
        if let SloStatus::Evaluated(_) = w.slos[1].status {
            w.slos[1].status = SloStatus::NotEvaluable { reason: "<iframe>".into() };
        }
    }
    r.targets[1].health.last_error = Some("</td><script>x</script>".into());
    r.alerts[0].labels.insert("target".into(), evil.into());
    r.alerts[0].labels.insert("extra<".into(), "v\"'".into());
    r.alerts[0].annotations.insert("summary".into(), "<marquee>".into());
    r.alerts[1].annotations.insert("runbook_url".into(), "javascript:alert(3)".into());
    let p = StatusPage::new(sample::facts(), 10);
    p.record(&r);
    let html = p.html(&r);
    for bad in ["<script", "<img", "<b>slo", "<iframe", "<marquee", "href=\"javascript:", "extra<"] {
        assert!(!html.contains(bad), "{bad} reached the page unescaped");
    }
    for escaped in [
        "&lt;script&gt;alert(1)&lt;/script&gt;",
        "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;",
        "&lt;b&gt;slo&lt;/b&gt;",
        "&lt;/td&gt;&lt;script&gt;x&lt;/script&gt;",
        "extra&lt;=v&quot;&#39;",
        "javascript:alert(3)",
    ] {
        assert!(html.contains(escaped), "{escaped} missing");
    }
    // The one real runbook link is still a link.
    assert_eq!(html.matches(r#"<a class="runbook" href="https://"#).count(), 1);
}

#[test]
fn a_bracket_is_drawn_as_a_bracket() {
    let b = Bounded { lower: 0.985, estimate: 0.99, upper: 0.995 };
    let mut out = String::new();
    attainment_cell(&mut out, None, &b, 0.99);
    assert_eq!(attr(&out, "data-kind"), "bracket");
    assert!(out.starts_with(r#"<div class="att undecided">"#), "{out}");
    // The path: a `[` cap at the lower bound, a bar, a `]` cap at the upper.
    let d = attr(&out, "d");
    let nums: Vec<f64> = d
        .split(|c: char| c.is_ascii_alphabetic() || c == ' ')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let shape: String = d.chars().filter(|c| c.is_ascii_alphabetic()).collect();
    assert_eq!(shape, "MHVHMHMHVH", "{d}");
    // M xl+3 3 H xl V 15 H xl+3 M xl 9 H xu M xu-3 3 H xu V 15 H xu-3
    let (xl, xu) = (nums[2], nums[7]);
    assert!(xl < xu, "{d}");
    let near = |a: f64, b: f64| (a - b).abs() < 0.11;
    assert!(near(nums[0], xl + 3.0) && near(nums[4], xl + 3.0), "left cap opens right: {d}");
    assert!(near(nums[8], xu - 3.0) && near(nums[12], xu - 3.0), "right cap opens left: {d}");
    assert!(near(nums[5], xl) && near(nums[10], xu), "{d}");
    let cx: f64 = attr(&out, "cx").parse().unwrap();
    assert!(xl < cx && cx < xu, "estimate {cx} inside [{xl}, {xu}]");
    let xo: f64 = attr(&out, "x1").parse().unwrap();
    assert!((xo - cx).abs() < 0.2, "the objective line sits at the estimate here (both 0.99): {xo} {cx}");
    assert!(out.contains(&nb("99.00 %")) && out.contains(&format!("[{} – {}]", nb("98.50 %"), nb("99.50 %"))), "{out}");
    // A window's attainment is no budget: the budget is the SLO period's, in its own column.
    assert!(!out.contains("budget"), "{out}");
}

#[test]
fn an_exact_value_is_drawn_as_a_mark_with_the_bracket_dimmed() {
    let b = Bounded { lower: 0.985, estimate: 0.99, upper: 0.995 };
    let mut out = String::new();
    attainment_cell(&mut out, Some(0.9925), &b, 0.99);
    assert_eq!(attr(&out, "data-kind"), "exact");
    assert!(out.starts_with(r#"<div class="att met">"#), "{out}");
    assert!(out.contains(r#"class="bracket dim""#) && out.contains(r#"class="exact""#), "{out}");
    assert!(!out.contains("<circle"), "{out}");
    assert!(out.contains(&nb("99.25 %")) && !out.contains("budget"), "{out}");
}

#[test]
fn verdicts() {
    let b = |lower, upper| Bounded { lower, estimate: (lower + upper) / 2.0, upper };
    assert_eq!(Verdict::of(None, &b(0.991, 0.999), 0.99), Verdict::Met);
    assert_eq!(Verdict::of(None, &b(0.95, 0.989), 0.99), Verdict::Missed);
    assert_eq!(Verdict::of(None, &b(0.95, 0.999), 0.99), Verdict::Undecided);
    assert_eq!(Verdict::of(Some(0.995), &b(0.95, 0.999), 0.99), Verdict::Met);
}

#[test]
fn a_low_bracket_widens_the_bar() {
    let mut out = String::new();
    attainment_cell(&mut out, None, &Bounded { lower: 0.5, estimate: 0.6, upper: 0.7 }, 0.99);
    assert_eq!(attr(&out, "data-floor"), "0.5");
    assert!(out.contains(r#"class="att missed""#));
}

#[test]
fn thresholds_and_bands_are_drawn() {
    let (html, _) = page(1, 20);
    // Each latency chart has the SLO thresholds of the model's SLOs, labelled.
    let ttft = &html[html.find(r#"data-chart="ttft""#).unwrap()..];
    let ttft = &ttft[..ttft.find("</figure>").unwrap()];
    assert!(ttft.contains(r#"data-value="0.5""#) && ttft.contains("chat 500\u{a0}ms"), "{ttft}");
    assert!(ttft.contains(r#"data-value="2""#) && ttft.contains("batch 2000\u{a0}ms"), "{ttft}");
    assert!(ttft.contains("p99 TTFT"), "{ttft}");
    let tpot = &html[html.find(r#"data-chart="tpot""#).unwrap()..];
    assert!(tpot.contains(r#"data-value="0.05""#) && tpot.contains("chat 50\u{a0}ms"));
    let kv = &html[html.find(r#"data-chart="kv""#).unwrap()..];
    let kv = &kv[..kv.find("</figure>").unwrap()];
    for band in ["underloaded", "low", "target", "high", "critical"] {
        assert!(kv.contains(&format!(r#"class="band {band}""#)), "{band}: {kv}");
    }
    assert!(kv.contains(r#"data-value="0.9""#) && kv.contains(&nb("target band 75 %–85 %")), "{kv}");
    // The SLO table names thresholds and objectives.
    assert!(html.contains("TTFT ≤ 500\u{a0}ms<br>TPOT ≤ 50\u{a0}ms"));
    assert!(html.contains(&nb("99.00 %")));
}

#[test]
fn charts_draw_the_history_with_gaps_as_breaks() {
    let p = StatusPage::new(sample::facts(), 10);
    p.record(&sample::report(2, 0));
    p.record(&sample::report(1, 1));
    let r = sample::report(2, 2);
    p.record(&r);
    let html = p.html(&r);
    let at = html.find(r#"id="t-engine-2d001""#).unwrap();
    let down = &html[at..];
    let tput = &down[down.find(r#"class="line tput""#).unwrap()..];
    let d = attr(tput, "d");
    // Two points around a gap: two moves, no line across it.
    assert_eq!(d.matches('M').count(), 2, "{d}");
    assert!(!d.contains("l1") && d.matches("l0 0").count() == 2, "lone points are dots: {d}");
    assert!(down.contains(r#"data-points="2""#));
    // Right-aligned in a ring of 10 slots (x 0 to 9): the newest point at the right edge.
    assert!(d.starts_with("M7 ") && d.contains("M9 "), "{d}");
    // A run of points is one move and relative steps of one slot.
    let chat = &html[html.find(r#"class="line tput""#).unwrap()..];
    let d = attr(chat, "d");
    assert!(d.starts_with("M7 ") && d.matches('M').count() == 1 && d.contains('l'), "{d}");
}

#[test]
fn every_section_is_there() {
    let (html, _) = page(3, 5);
    for needle in [
        r#"<meta http-equiv="refresh" content="5">"#,
        r#"<link rel="stylesheet" href="status.css">"#,
        r#"<section id="alerts">"#,
        r#"<section id="health">"#,
        "LLMKVCacheSaturated",
        r#"<span class="pill firing">firing</span>"#,
        r#"<span class="pill pending">pending</span>"#,
        "connect: connection refused",
        "engine-002",
        "1 down",
        "1 firing",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }
    assert_eq!(html.matches(r#"<figure class="chart""#).count(), 3 * 4);
    // One capacity chart per target and SLO: an interval for chat, a lower bound for batch,
    // and words for the down target, which has no capacity report.
    assert_eq!(html.matches(r#"<figure class="chart capacity" data-chart="capacity""#).count(), 3 * 2);
    for (state, n) in [("interval", 2), ("lower-bound", 2), ("none", 2)] {
        assert_eq!(html.matches(&format!(r#"data-state="{state}""#)).count(), n, "{state}");
    }
    assert_eq!(html.matches(r#"data-kind="bracket""#).count(), 3 * 2 * 2, "targets × SLOs × windows");
    // The configured windows only, not those the alert rules add.
    assert!(html.contains("attainment over 5m") && !html.contains("attainment over 1h"));
    assert!(html.ends_with("</html>"));
}

#[test]
fn before_the_first_report_the_page_says_so() {
    let p = StatusPage::default();
    let html = p.html(&Report::default());
    assert!(html.contains("No evaluation yet"), "{html}");
    assert!(!html.contains("<figure"));
}

#[test]
fn the_response_carries_a_strict_policy() {
    let p = StatusPage::default();
    let r = p.response(&sample::report(1, 0));
    let h = r.headers();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none';") && csp.contains("style-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(stylesheet().headers()["content-type"], "text/css; charset=utf-8");
}

#[test]
fn the_page_loads_nothing_from_elsewhere() {
    let (html, _) = page(3, 5);
    for attr in ["src=\"", "href=\""] {
        for (i, _) in html.match_indices(attr) {
            let v = &html[i + attr.len()..];
            let v = &v[..v.find('"').unwrap()];
            let runbook = html[..i].ends_with(r#"<a class="runbook" "#);
            assert!(runbook || !v.contains("//"), "{attr}{v}");
        }
    }
    assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("@import"));
    assert!(!STYLESHEET.contains("url(") && !STYLESHEET.contains("@import"));
}

/// Not a timing test (the bench is benches/status_page.rs): the page's size grows with the
/// targets and no faster.
#[test]
fn a_hundred_targets_make_a_page_of_reasonable_size() {
    let (one, _) = page(1, DEFAULT_RING_LEN);
    let (hundred, _) = page(100, DEFAULT_RING_LEN);
    assert_eq!(hundred.matches(r#"<figure class="chart""#).count(), 400);
    let per_target = hundred.len() / 100;
    assert!(per_target < one.len() * 2, "{per_target} bytes per target vs {} for one", one.len());
    assert!(hundred.len() < 4 << 20, "{} bytes", hundred.len());
    eprintln!("status page: {} bytes for 1 target, {} for 100", one.len(), hundred.len());
}

/// A window whose tap requests evaluated `slo` with an exact joint share of `share`.
fn with_exact_tap_share(w: &mut crate::report::WindowReport, slo: &str, share: f64) {
    use crate::request::{Basis, DataSource, RequestSlo, RequestWindow};
    use crate::slo::Clause;
    let SloStatus::Evaluated(mut values) = w.slos.iter().find(|s| s.slo == slo).unwrap().status.clone() else {
        panic!("the sample evaluates {slo}");
    };
    values.attainment.insert(Clause::Joint, Bounded::exact(share));
    w.requests.push(RequestWindow {
        source: DataSource::Tap,
        coverage: 1.0,
        basis: Basis::Records,
        from_unix: 0.0,
        to_unix: 60.0,
        requests: 400,
        failed: 3,
        requests_per_second: 400.0 / 60.0,
        output_tokens_per_second: 100.0,
        inexact_token_counts: 0,
        mean_ttft_seconds: Some(0.1),
        latency: Vec::new(),
        slos: vec![RequestSlo {
            slo: slo.into(),
            objective: 0.99,
            status: SloStatus::Evaluated(values),
            counts: Default::default(),
            by_arrival: Vec::new(),
        }],
        ttft_gap: None,
    });
}

#[test]
fn an_exact_share_from_the_tap_is_drawn_on_the_bracket() {
    let mut r = sample::report(1, 0);
    let slo = r.targets[0].models[0].windows[0].slos[0].slo.clone();
    let before = StatusPage::new(sample::facts(), DEFAULT_RING_LEN).html(&r);
    assert_eq!(attr(&before, "data-kind"), "bracket", "no request data: the bracket alone");
    with_exact_tap_share(&mut r.targets[0].models_mut()[0].windows[0], &slo, 0.9925);
    let html = StatusPage::new(sample::facts(), DEFAULT_RING_LEN).html(&r);
    assert_eq!(attr(&html, "data-kind"), "exact", "{html}");
    assert!(html.contains("exact from tap"), "the source is named");
    assert!(html.contains(&nb("99.25 %")), "the exact share is printed: {html}");
}

#[test]
fn an_engine_without_histograms_is_judged_from_the_tap_and_says_so() {
    let not_evaluable = |r: &mut Report| {
        r.targets[0].engine = Some(crate::canonical::Engine::Llamacpp);
        for w in &mut r.targets[0].models_mut()[0].windows {
            for s in &mut w.slos {
                s.status = SloStatus::NotEvaluable { reason: "the engine exposes no TTFT histogram".into() };
            }
        }
    };
    let mut r = sample::report(1, 0);
    let slo = r.targets[0].models[0].windows[0].slos[0].slo.clone();
    let mut tapped = r.clone();
    not_evaluable(&mut r);
    let html = StatusPage::new(sample::facts(), DEFAULT_RING_LEN).html(&r);
    assert!(html.contains("The target is up: llamacpp exposes no latency histograms"), "{html}");
    assert!(html.contains("No tap or spans measured a request of it"), "{html}");
    assert!(html.contains("not evaluable: the engine exposes no TTFT histogram") && !html.contains("data-kind"));

    with_exact_tap_share(&mut tapped.targets[0].models_mut()[0].windows[0], &slo, 0.9925);
    not_evaluable(&mut tapped);
    let html = StatusPage::new(sample::facts(), DEFAULT_RING_LEN).html(&tapped);
    assert!(html.contains("Measured here from tap requests."), "{html}");
    assert_eq!(attr(&html, "data-kind"), "exact", "the tap's exact share, without a histogram bracket");
    assert!(html.contains("exact from tap") && html.contains(&nb("99.25 %")), "{html}");
    // Vllm's page has no such note.
    let (plain, _) = page(1, 1);
    assert!(!plain.contains("request-path"));
}

#[test]
fn capacity_shows_beside_the_load_and_says_when_it_is_only_a_lower_bound() {
    use crate::capacity::{CapacityReport, Method, RateEstimate, Reason, SloCapacity};
    let estimate =
        |censored| RateEstimate { end: None, p10: 3.4, p50: 3.7, p90: 4.1, censored, below_data: false, bins: 5 };
    let mut r = sample::report(1, 0);
    let (target, model) = (r.targets[0].target.clone(), r.targets[0].models[0].model.clone());
    let capacity = |censored, saturated| CapacityReport {
        target: target.clone(),
        model: model.clone(),
        arrival_rate: Some(3.2),
        rising: true,
        saturated,
        reasons: if saturated { vec![Reason::QueueGrowing, Reason::CompletionsLag] } else { vec![] },
        slos: vec![SloCapacity {
            slo: "chat".into(),
            objective: 0.95,
            method: Method::Empirical,
            estimates: vec![estimate(censored)],
            headroom: Some(3.4 / 3.2),
            intervals_used: 80,
            age_seconds: Some(300.0),
        }],
        intervals: 80,
    };
    let p = StatusPage::new(sample::facts(), DEFAULT_RING_LEN);
    r.capacity = vec![capacity(false, true)];
    let html = p.html(&r);
    assert!(html.contains("Arrivals now 3.20\u{a0}requests/s, rising."), "{html}");
    assert!(html.contains(r#"<span class="bad">Saturated</span>: queue_growing, completions_lag."#));
    // The estimate is stated in the chart's caption, with how it was made.
    let chat = &html[html.find(r#"data-chart="capacity" data-slo="chat""#).unwrap()..];
    let caption = &chat[chat.find("<figcaption>").unwrap()..chat.find("</figcaption>").unwrap()];
    assert!(caption.contains(r#"p10–p90 <span class="num">3.40–4.10</span>"#), "{caption}");
    assert!(caption.contains(", from requests") && caption.contains(r#"<span class="num warn">1.06×</span>"#));
    r.capacity = vec![capacity(true, false)];
    let html = p.html(&r);
    let chat = &html[html.find(r#"data-chart="capacity" data-slo="chat""#).unwrap()..];
    let caption = &chat[chat.find("<figcaption>").unwrap()..chat.find("</figcaption>").unwrap()];
    assert!(caption.contains("≥ 3.40</span> (a lower bound: no failing load seen yet), from requests"), "{caption}");
    assert!(!html.contains(r#"<span class="bad">Saturated</span>"#));
}
