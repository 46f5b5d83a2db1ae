//! Which series records join, through the store: names the target serves keep theirs, every
//! other name is counted under `model=""` with its reason, and a full target pushes out the
//! least recently seen series, never the real model's for a client's invention.

use std::time::Duration;

use super::*;
use crate::duration::Window;
use crate::parse::MAX_LABEL_VALUE_BYTES;
use crate::slo::{Objective, Scope, Slo};

const T0: f64 = 1_700_000_000.0;
const NOW_MS: i64 = 1_700_000_100_000;

fn store(cap: usize) -> RequestStore {
    RequestStore::new(StoreConfig {
        targets: vec!["t".into()],
        windows: vec![Window::from_secs(60)],
        alert_only: Vec::new(),
        quantiles: vec![0.5],
        slos: vec![Slo {
            name: "fast".into(),
            ttft: Some(Duration::from_millis(500)),
            tpot: None,
            e2e: None,
            objective: Objective::new(0.9).unwrap(),
            scope: Scope::all(),
        }],
        max_records_per_series: 1_000,
        max_series_per_target: cap,
    })
}

fn rec(source: Source, model: &str, status: Status) -> RequestRecord {
    RequestRecord {
        source,
        target: "t".into(),
        model: model.into(),
        status,
        finished_unix: T0 + 90.0,
        e2e_s: 1.0,
        ttft_s: status.is_ok().then_some(0.1),
        tpot_s: None,
        prompt_tokens: None,
        output_tokens: None,
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

/// `(model, source, status) → count` of every series.
fn counts(s: &RequestStore) -> Vec<(String, &'static str, String, u64)> {
    let mut out = Vec::new();
    for c in s.counters().series {
        for (status, n) in c.requests {
            out.push((c.model.clone(), c.source.as_str(), status, n));
        }
    }
    out
}

fn count(s: &RequestStore, model: &str, source: &str, status: &str) -> u64 {
    counts(s).into_iter().find(|c| c.0 == model && c.1 == source && c.2 == status).map_or(0, |c| c.3)
}

const NOT_FOUND: Status = Status::HttpError(404);

#[test]
fn once_scraped_only_served_models_keep_their_name() {
    let mut s = store(64);
    s.set_models("t", "llama", ["meta/llama-8b".to_string()]);
    let taken = s.ingest(
        [
            rec(Source::Tap, "meta/llama-8b", Status::Ok),
            // A failure of the served model is its own: 429, 400.
            rec(Source::Tap, "meta/llama-8b", Status::HttpError(429)),
            rec(Source::Otlp, "meta/llama-8b", Status::Ok),
            // The configured model (what a span naming no model is recorded under).
            rec(Source::Otlp, "llama", Status::Ok),
            // Names the engine does not serve, whatever the outcome.
            rec(Source::Tap, "bogus", NOT_FOUND),
            rec(Source::Otlp, "forged", Status::Ok),
            // No name at all: already under "", not counted as refused.
            rec(Source::Tap, "", Status::Ok),
        ],
        NOW_MS,
    );
    let models: Vec<&str> = taken.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(models, ["meta/llama-8b", "meta/llama-8b", "meta/llama-8b", "llama", "", "", ""]);
    assert_eq!(count(&s, "meta/llama-8b", "tap", "ok"), 1);
    assert_eq!(count(&s, "meta/llama-8b", "tap", "http_429"), 1);
    assert_eq!(count(&s, "meta/llama-8b", "otlp", "ok"), 1);
    assert_eq!(count(&s, "llama", "otlp", "ok"), 1);
    assert_eq!((count(&s, "", "tap", "http_404"), count(&s, "", "tap", "ok"), count(&s, "", "otlp", "ok")), (1, 1, 1));
    let c = s.counters();
    assert_eq!((c.rejected["unknown_model"], c.rejected["model_too_long"]), (2, 0));
    assert!(counts(&s).iter().all(|c| c.0 != "bogus" && c.0 != "forged"));
}

#[test]
fn before_any_scrape_a_refused_request_creates_no_series() {
    let mut s = store(64);
    s.ingest(
        [
            rec(Source::Tap, "bogus", NOT_FOUND),
            // Served (the engine answered): a series of its own.
            rec(Source::Tap, "adapter", Status::Ok),
            // Then that model's refusals and failures are its own.
            rec(Source::Tap, "adapter", Status::HttpError(400)),
            rec(Source::Otlp, "adapter", NOT_FOUND),
            // A failure that is no refusal: the engine took the request.
            rec(Source::Tap, "busy", Status::HttpError(503)),
        ],
        NOW_MS,
    );
    assert_eq!(count(&s, "", "tap", "http_404"), 1);
    assert_eq!(count(&s, "adapter", "tap", "http_400"), 1);
    assert_eq!(count(&s, "adapter", "otlp", "http_404"), 1, "the tap's series makes the model known to both");
    assert_eq!(count(&s, "busy", "tap", "http_503"), 1);
    assert_eq!(s.counters().rejected["unknown_model"], 1);
}

#[test]
fn names_longer_than_a_label_value_are_counted_under_no_model() {
    let mut s = store(64);
    let long = "x".repeat(MAX_LABEL_VALUE_BYTES + 1);
    s.set_models("t", "t", [long.clone()]);
    let taken = s.ingest([rec(Source::Otlp, &long, Status::Ok), rec(Source::Tap, &long, NOT_FOUND)], NOW_MS);
    assert!(taken.iter().all(|r| r.model.is_empty()));
    assert_eq!(s.counters().rejected["model_too_long"], 2);
    assert!(s.series.keys().all(|k| k.model.is_empty()));
    // At the limit exactly, a name is a name.
    let at_limit = "y".repeat(MAX_LABEL_VALUE_BYTES);
    s.set_models("t", "t", [at_limit.clone()]);
    s.ingest([rec(Source::Otlp, &at_limit, Status::Ok)], NOW_MS);
    assert_eq!(count(&s, &at_limit, "otlp", "ok"), 1);
}

#[test]
fn a_full_target_pushes_out_the_least_recently_seen_series_unknown_models_first() {
    let mut s = store(3);
    // Before any scrape, three models the engine answered for fill the target.
    s.ingest(["a", "b", "c"].map(|m| rec(Source::Tap, m, Status::Ok)), NOW_MS);
    s.ingest([rec(Source::Tap, "a", Status::Ok)], NOW_MS);
    // A fourth pushes out "b", seen least recently (not "a", seen again).
    s.ingest([rec(Source::Tap, "d", Status::Ok)], NOW_MS);
    let models = |s: &RequestStore| s.series.keys().map(|k| k.model.clone()).collect::<Vec<_>>();
    assert_eq!(models(&s), ["a", "c", "d"]);
    assert_eq!(s.counters().series_evicted["t"], 1);
    // The scrape names "real" and "c": "real" takes the slot of "a" or "d" (not served),
    // the least recently seen of them, and "c" stays though seen before both.
    s.set_models("t", "t", ["real".to_string(), "c".to_string()]);
    s.ingest([rec(Source::Tap, "real", Status::Ok), rec(Source::Otlp, "real", Status::Ok)], NOW_MS);
    assert_eq!(models(&s), ["c", "real", "real"]);
    assert_eq!(s.counters().series_evicted["t"], 3);
    // Unattributed records go to "" beside the cap, which never pushes it out.
    s.ingest((0..10).map(|i| rec(Source::Tap, &format!("bogus-{i}"), NOT_FOUND)), NOW_MS);
    assert_eq!(models(&s), ["", "c", "real", "real"]);
    assert_eq!(s.counters().series_evicted["t"], 3);
    // Only served models are left: a new served one pushes out the least recently seen.
    s.set_models("t", "t", ["real".to_string(), "c".to_string(), "new".to_string()]);
    s.ingest([rec(Source::Tap, "new", Status::Ok)], NOW_MS);
    assert_eq!(models(&s), ["", "new", "real", "real"]);
}

#[test]
fn seventy_bogus_models_leave_the_real_model_measured() {
    let mut s = store(DEFAULT_MAX_SERIES_PER_TARGET);
    s.set_models("t", "t", ["real".to_string()]);
    s.ingest((0..70).map(|i| rec(Source::Tap, &format!("bogus-{i}"), NOT_FOUND)), NOW_MS);
    s.ingest(
        (0..5).flat_map(|_| [rec(Source::Tap, "real", Status::Ok), rec(Source::Otlp, "real", Status::Ok)]),
        NOW_MS,
    );
    assert_eq!((count(&s, "real", "tap", "ok"), count(&s, "real", "otlp", "ok")), (5, 5));
    assert_eq!(count(&s, "", "tap", "http_404"), 70);
    assert_eq!(s.counters().rejected["unknown_model"], 70);
    let windows = s.evaluate(NOW_MS);
    let real = windows.iter().find(|w| w.key.model == "real" && w.key.source == Source::Tap).unwrap();
    assert_eq!(real.windows[0].1.requests, 5);
}

#[test]
fn models_of_targets_the_store_does_not_have_are_ignored() {
    let mut s = store(64);
    s.set_models("elsewhere", "x", ["m".to_string()]);
    s.ingest([rec(Source::Tap, "m", Status::Ok)], NOW_MS);
    assert_eq!(count(&s, "m", "tap", "ok"), 1, "t has no scrape yet: the answered request is m's");
}
