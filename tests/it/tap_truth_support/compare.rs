//! Pairs each tap record with the simulator's truth line for the same request (by the
//! response id both carry) and compares them: the client-side time the tap adds, token
//! counts, statuses, and SLO verdicts, judged on both sides by the daemon's own code.

use std::collections::HashMap;

use goodput::report::{Report, SloStatus};
use goodput::request::{Compact, DataSource, RequestRecord, Source, Status, TokenCount, Verdict, judge};
use goodput::slo::{Clause, Slo};

use super::{Outcome, TARGET, TruthLine};

/// Tap records and truth lines, paired.
pub struct Pairs<'a> {
    pub pairs: Vec<(&'a RequestRecord, &'a TruthLine)>,
    /// Tap records without an id: the client left before the first event named one.
    pub tap_without_id: Vec<&'a RequestRecord>,
    /// Truth lines of client requests that no tap record names.
    pub truth_unpaired: Vec<&'a TruthLine>,
    /// Tap records whose id no truth line has.
    pub tap_unknown: Vec<&'a RequestRecord>,
    /// Ids found more than once on either side.
    pub duplicates: usize,
}

pub fn pair<'a>(tap: &'a [RequestRecord], truth: &'a [TruthLine]) -> Pairs<'a> {
    let mut duplicates = 0;
    let mut by_id: HashMap<&str, &TruthLine> = HashMap::new();
    for t in truth.iter().filter(|t| t.source.as_deref() == Some("client")) {
        if let Some(id) = t.request_id.as_deref()
            && by_id.insert(id, t).is_some()
        {
            duplicates += 1;
        }
    }
    let mut p = Pairs {
        pairs: Vec::new(),
        tap_without_id: Vec::new(),
        truth_unpaired: Vec::new(),
        tap_unknown: Vec::new(),
        duplicates: 0,
    };
    for r in tap {
        match r.request_id.as_deref() {
            None => p.tap_without_id.push(r),
            Some(id) => match by_id.remove(id) {
                Some(t) => p.pairs.push((r, t)),
                None if p.pairs.iter().any(|(q, _)| q.request_id == r.request_id) => duplicates += 1,
                None => p.tap_unknown.push(r),
            },
        }
    }
    p.truth_unpaired = by_id.into_values().collect();
    p.truth_unpaired.sort_by(|a, b| a.finish_s.total_cmp(&b.finish_s));
    p.duplicates = duplicates;
    p
}

/// The engine's status for a truth line, as the tap's statuses name it.
pub fn truth_status(t: &TruthLine) -> Status {
    match t.finish_reason.as_str() {
        "stop" | "length" => Status::Ok,
        "abort" => Status::ClientAbort,
        _ => Status::StreamError,
    }
}

/// A truth line as a record, so that the daemon's own code judges it. TPOT is left out below
/// two tokens, as the tap leaves it out.
pub fn truth_record(t: &TruthLine) -> RequestRecord {
    RequestRecord {
        source: Source::Tap,
        target: TARGET.into(),
        model: String::new(),
        status: truth_status(t),
        finished_unix: t.finish_s,
        e2e_s: t.e2e_s,
        ttft_s: t.ttft_s,
        tpot_s: (t.output_tokens >= 2 && t.ttft_s.is_some()).then_some(t.tpot_s),
        prompt_tokens: None,
        output_tokens: Some(TokenCount { value: t.output_tokens, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: t.request_id.clone(),
    }
}

/// The joint verdict of the daemon's judge.
pub fn verdict(r: &RequestRecord, slo: &Slo) -> Verdict {
    judge(&Compact::of(r).expect("a valid record"), slo).joint
}

pub fn good(r: &RequestRecord, slo: &Slo) -> bool {
    verdict(r, slo) == Verdict::Good
}

/// What the tap saw of one completed request beyond the engine: tap − truth, seconds.
#[derive(Debug, Clone, Copy)]
pub struct Delta {
    pub ttft: f64,
    pub e2e: f64,
    /// First to last token, (N − 1)·TPOT.
    pub decode: f64,
    pub tpot: f64,
}

/// The deltas of a pair both sides call complete, with a first token.
pub fn delta(r: &RequestRecord, t: &TruthLine) -> Option<Delta> {
    if r.status != Status::Ok || truth_status(t) != Status::Ok {
        return None;
    }
    let ttft = r.ttft_s? - t.ttft_s?;
    let n = f64::from(t.output_tokens.saturating_sub(1));
    let (decode, tpot) = match r.tpot_s {
        Some(tap) if t.output_tokens >= 2 => (tap * n - t.tpot_s * n, tap - t.tpot_s),
        _ => (0.0, 0.0),
    };
    Some(Delta { ttft, e2e: r.e2e_s - t.e2e_s, decode, tpot })
}

/// Whether a client-side delay of at most `slack` seconds (on TTFT and E2E, and on the
/// first-to-last-token span) could change the request's verdict under `slo`: a clause of
/// the truth lies within `slack` of its limit.
pub fn borderline(t: &TruthLine, slo: &Slo, slack: f64) -> bool {
    if truth_status(t) != Status::Ok {
        return false;
    }
    let near_below = |v: f64, limit: f64| v <= limit && v > limit - slack;
    let ttft = slo.ttft.zip(t.ttft_s).is_some_and(|(l, v)| near_below(v, l.as_secs_f64()));
    let e2e = slo.e2e.is_some_and(|l| near_below(t.e2e_s, l.as_secs_f64()));
    let gaps = f64::from(t.output_tokens.saturating_sub(1));
    let tpot = slo.tpot.is_some_and(|l| gaps > 0.0 && (t.tpot_s - l.as_secs_f64()).abs() * gaps < slack);
    ttft || tpot || e2e
}

/// p50, p99 and max of `v` (nearest rank); zeros when empty.
pub fn spread(v: &[f64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
    (rank(0.5), rank(0.99), s[s.len() - 1])
}

/// One SLO over one window at one evaluation: the exact value from the tap, the truth over
/// the same requests, and the histogram bracket.
#[derive(Debug, Clone)]
pub struct WindowRow {
    pub slo: String,
    pub t_ms: i64,
    /// Requests the tap window counted, and its exact joint attainment (lower, upper).
    pub requests: u64,
    pub exact: (f64, f64),
    /// The same share recomputed from the tap records in the window's span.
    pub recomputed: f64,
    /// The engine's truth for those same requests.
    pub truth: f64,
    /// The histogram bracket, when the window was evaluated from /metrics, and the requests
    /// the histograms counted finished in the window (scrape to scrape).
    pub bracket: Option<(f64, f64)>,
    pub hist_requests: Option<f64>,
}

/// Every evaluated tap window of `label` in `out`'s reports, per SLO.
pub fn window_rows(out: &Outcome, p: &Pairs<'_>, label: &str, model: &str) -> Vec<WindowRow> {
    let truth_of: HashMap<&str, &TruthLine> =
        p.pairs.iter().filter_map(|(r, t)| r.request_id.as_deref().map(|id| (id, *t))).collect();
    let mut rows = Vec::new();
    for report in &out.reports {
        for (slo, w, tap) in tap_windows(report, label, model) {
            let Some(cfg) = out.config.slos.iter().find(|s| s.name == slo.slo) else { continue };
            let SloStatus::Evaluated(v) = &slo.status else { continue };
            let joint = v.attainment[&Clause::Joint];
            let inside: Vec<&RequestRecord> =
                out.tap.iter().filter(|r| r.finished_unix > tap.from_unix && r.finished_unix <= tap.to_unix).collect();
            let share = |n: usize| if inside.is_empty() { f64::NAN } else { n as f64 / inside.len() as f64 };
            let tap_good = inside.iter().filter(|r| good(r, cfg)).count();
            // A record without an id left before its first token: not good on either side.
            let truth_good = inside
                .iter()
                .filter_map(|r| r.request_id.as_deref().and_then(|id| truth_of.get(id)))
                .filter(|t| good(&truth_record(t), cfg))
                .count();
            let hist = w.slos.iter().find(|s| s.slo == slo.slo).and_then(|s| match &s.status {
                SloStatus::Evaluated(h) => Some(h),
                _ => None,
            });
            let bracket = hist.and_then(|h| h.attainment.get(&Clause::Joint)).map(|b| (b.lower, b.upper));
            rows.push(WindowRow {
                slo: slo.slo.clone(),
                t_ms: report.t_ms,
                requests: tap.requests,
                exact: (joint.lower, joint.upper),
                recomputed: share(tap_good),
                truth: share(truth_good),
                bracket,
                hist_requests: hist.map(|h| h.requests),
            });
        }
    }
    rows
}

type TapWindow<'r> =
    (&'r goodput::request::RequestSlo, &'r goodput::report::WindowReport, &'r goodput::request::RequestWindow);

/// Per SLO: the tap's request window of `label`, with the histogram window it sits in.
fn tap_windows<'r>(report: &'r Report, label: &str, model: &str) -> Vec<TapWindow<'r>> {
    let Some(m) =
        report.targets.iter().find(|t| t.target == TARGET).and_then(|t| t.models.iter().find(|m| m.model == model))
    else {
        return Vec::new();
    };
    let Some(w) = m.windows.iter().find(|w| w.window.label() == label) else { return Vec::new() };
    let Some(tap) = w.requests.iter().find(|r| r.source == DataSource::Tap) else { return Vec::new() };
    tap.slos.iter().map(|s| (s, w, tap)).collect()
}
