//! The store against brute force: for random requests and windows, exact attainment,
//! goodput and quantiles equal a direct count over the records in the window (and, past the
//! cap, over the slot-aligned window the report names); bounds contain the truth when token
//! counts are inexact; memory stays bounded under a flood; SLO scope is respected.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::canonical::HistogramKind;
use crate::duration::Window;
use crate::report::SloStatus;
use crate::slo::{Clause, Objective, Scope, Slo};

const T0: f64 = 1_700_000_000.0;

fn slo(name: &str, ttft_ms: u64, tpot_ms: u64, e2e_s: Option<u64>) -> Slo {
    Slo {
        name: name.into(),
        ttft: Some(Duration::from_millis(ttft_ms)),
        tpot: Some(Duration::from_millis(tpot_ms)),
        e2e: e2e_s.map(Duration::from_secs),
        objective: Objective::new(0.9).unwrap(),
        scope: Scope::all(),
    }
}

fn config(windows: &[u64], cap: usize, slos: Vec<Slo>) -> StoreConfig {
    StoreConfig {
        targets: vec!["t".into()],
        windows: windows.iter().map(|&s| Window::from_secs(s)).collect(),
        alert_only: Vec::new(),
        quantiles: vec![0.5, 0.9, 0.99],
        slos,
        max_records_per_series: cap,
        max_series_per_target: 4,
    }
}

/// A request: finish offset (s), TTFT, TPOT, E2E, status code (0 = ok), exact N.
type Raw = (f64, Option<f64>, Option<f64>, f64, u16, bool);

fn record(r: &Raw) -> RequestRecord {
    let status = match r.4 {
        0 => Status::Ok,
        1 => Status::ClientAbort,
        c => Status::HttpError(c),
    };
    RequestRecord {
        source: Source::Tap,
        target: "t".into(),
        model: "m".into(),
        status,
        finished_unix: T0 + r.0,
        e2e_s: r.3,
        ttft_s: r.1,
        tpot_s: r.2,
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 40, exact: r.5 }),
        itl: vec![ItlGap { seconds: 0.02, tokens: 1 }, ItlGap { seconds: 0.05, tokens: 2 }],
        engine: None,
        request_id: None,
    }
}

fn raw() -> impl Strategy<Value = Raw> {
    (
        0.0f64..600.0,
        proptest::option::weighted(0.9, 0.01f64..1.0),
        proptest::option::weighted(0.85, 0.005f64..0.1),
        0.1f64..20.0,
        prop_oneof![8 => Just(0u16), 1 => Just(1u16), 1 => Just(503u16)],
        proptest::bool::weighted(0.8),
    )
}

/// Independent of `judge`: (population, surely good, possibly good) of the joint clause.
fn brute_joint(rs: &[&Raw], s: &Slo) -> (u64, u64, u64) {
    let (ttft, tpot) = (s.ttft.unwrap().as_secs_f64(), s.tpot.unwrap().as_secs_f64());
    let e2e = s.e2e.map(|d| d.as_secs_f64());
    let (mut pop, mut lo, mut hi) = (0, 0, 0);
    for r in rs {
        if r.4 != 0 {
            pop += 1;
            continue;
        }
        let (Some(t), Some(p)) = (r.1, r.2) else { continue };
        pop += 1;
        let rest = t <= ttft && e2e.is_none_or(|l| r.3 <= l);
        lo += u64::from(rest && p <= tpot);
        hi += u64::from(rest && (p <= tpot || !r.5));
    }
    (pop, lo, hi)
}

fn in_window(rs: &[Raw], from: f64, to: f64) -> Vec<&Raw> {
    rs.iter().filter(|r| T0 + r.0 > from && T0 + r.0 <= to).collect()
}

fn joint_counts(w: &RequestWindow, slo: &str) -> ClauseCounts {
    w.slos.iter().find(|s| s.slo == slo).unwrap().counts[&Clause::Joint]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn exact_windows_equal_brute_force(rs in proptest::collection::vec(raw(), 1..400), at in 590u64..900, w in 1u64..400) {
        let slos = vec![slo("a", 300, 40, None), slo("b", 150, 20, Some(8))];
        let mut store = RequestStore::new(config(&[w], 100_000, slos.clone()));
        let now_ms = (T0 as i64 + at as i64) * 1000;
        store.ingest(rs.iter().map(record), now_ms);
        let out = store.evaluate(now_ms);
        let win = &out[0].windows[0].1;
        prop_assert_eq!(win.basis, Basis::Records);
        let (from, to) = ((now_ms - w as i64 * 1000) as f64 / 1000.0, now_ms as f64 / 1000.0);
        prop_assert_eq!((win.from_unix, win.to_unix), (from, to));
        let inside = in_window(&rs, from, to);
        prop_assert_eq!(win.requests, inside.len() as u64);
        prop_assert_eq!(win.failed, inside.iter().filter(|r| r.4 != 0).count() as u64);
        for s in &slos {
            let (pop, lo, hi) = brute_joint(&inside, s);
            let c = joint_counts(win, &s.name);
            prop_assert_eq!((c.population, c.good_lower, c.good_upper), (pop, lo, hi));
            let report = win.slos.iter().find(|x| x.slo == s.name).unwrap();
            // The same requests by arrival and finish slot, for the capacity book.
            let cells = &report.by_arrival;
            let sum = cells.iter().fold((0, 0, 0), |a, c| {
                (a.0 + u64::from(c.population), a.1 + u64::from(c.good_lower), a.2 + u64::from(c.good_upper))
            });
            prop_assert_eq!(sum, (pop, lo, hi));
            prop_assert!(cells.iter().all(|c| c.arrived_ms % ARRIVAL_SLOT_MS == 0
                && c.finished_ms % FINISH_SLOT_MS == 0
                && c.arrived_ms <= c.finished_ms));
            if let SloStatus::Evaluated(v) = &report.status {
                let j = v.attainment[&Clause::Joint];
                prop_assert_eq!((j.lower, j.upper), (lo as f64 / pop as f64, hi as f64 / pop as f64));
                prop_assert_eq!(v.goodput_requests_per_second.unwrap().lower, lo as f64 / w as f64);
            } else {
                prop_assert!(pop == 0);
            }
        }
        // Nearest-rank TTFT quantiles over the window's requests.
        let mut ttft: Vec<f64> = inside.iter().filter_map(|r| r.1).collect();
        ttft.sort_by(f64::total_cmp);
        for q in [0.5, 0.9, 0.99] {
            let want = (!ttft.is_empty()).then(|| ttft[nearest_rank(q, ttft.len() as u64) as usize - 1]);
            prop_assert_eq!(win.quantile(HistogramKind::Ttft, q), want);
        }
    }

    #[test]
    fn past_the_cap_counts_stay_exact_over_the_slot_window(
        rs in proptest::collection::vec(raw(), 50..400), at in 590u64..900, w in prop_oneof![Just(60u64), Just(300), Just(3600)],
    ) {
        let slos = vec![slo("a", 300, 40, None)];
        let mut store = RequestStore::new(config(&[w], 10, slos.clone()));
        let now_ms = (T0 as i64 + at as i64) * 1000 + 137;
        store.ingest(rs.iter().map(record), now_ms);
        let out = store.evaluate(now_ms);
        let win = &out[0].windows[0].1;
        let inside = in_window(&rs, win.from_unix, win.to_unix);
        if let Basis::Slots { slot_seconds } = win.basis {
            prop_assert!(win.to_unix <= now_ms as f64 / 1000.0 && now_ms as f64 / 1000.0 - win.to_unix < slot_seconds);
            prop_assert!((win.to_unix - win.from_unix - w as f64).abs() < 1e-6);
        }
        prop_assert_eq!(win.requests, inside.len() as u64, "{:?} {} {}", win.basis, win.from_unix, win.to_unix);
        let (pop, lo, hi) = brute_joint(&inside, &slos[0]);
        let c = joint_counts(win, "a");
        prop_assert_eq!((c.population, c.good_lower, c.good_upper), (pop, lo, hi));
    }

    #[test]
    fn bounds_contain_the_truth_when_token_counts_are_counted(
        reqs in proptest::collection::vec((0.0f64..60.0, 2u32..200, 0.001f64..0.08, 1u32..5, any::<bool>()), 1..200),
    ) {
        // A counted N (events, each carrying up to k tokens) under-counts, so the TPOT the tap
        // computes from it over-states the true one.
        let s = slo("a", 10_000, 30, None);
        let mut store = RequestStore::new(config(&[120], 100_000, vec![s]));
        let (mut truly_good, mut total) = (0u64, 0u64);
        let records: Vec<RequestRecord> = reqs.iter().map(|&(at, n, tpot, k, counted)| {
            total += 1;
            truly_good += u64::from(tpot <= 0.03);
            let decode = tpot * f64::from(n - 1);
            let seen = if counted { n.div_ceil(k).max(2) } else { n };
            RequestRecord {
                source: Source::Tap, target: "t".into(), model: "m".into(), status: Status::Ok,
                finished_unix: T0 + at, e2e_s: 0.1 + decode, ttft_s: Some(0.1),
                tpot_s: Some(decode / f64::from(seen - 1)), prompt_tokens: None,
                output_tokens: Some(TokenCount { value: seen, exact: !counted || seen == n }), itl: Vec::new(), engine: None,
                request_id: None,
            }
        }).collect();
        let now_ms = (T0 as i64 + 60) * 1000;
        store.ingest(records, now_ms);
        let win = &store.evaluate(now_ms)[0].windows[0].1;
        let SloStatus::Evaluated(v) = &win.slos[0].status else { panic!("not evaluated") };
        let j = v.attainment[&Clause::Joint];
        let truth = truly_good as f64 / total as f64;
        prop_assert!(j.lower <= truth + 1e-12 && truth <= j.upper + 1e-12, "{:?} vs {}", j, truth);
        if reqs.iter().all(|r| !r.4) {
            prop_assert!(j.is_exact());
        }
    }
}

#[test]
fn a_flood_cannot_grow_memory() {
    let mut store = RequestStore::new(config(&[60, 300, 3600], 1_000, vec![slo("a", 300, 40, None)]));
    let mut now_ms = T0 as i64 * 1000;
    let mut bytes_after_first_hour = 0;
    // Two hours of 500 requests/s, ingested once a second, with an attacker's model names.
    for sec in 0..7200u32 {
        now_ms += 1000;
        let batch = (0..500u32).map(|i| {
            let mut r = record(&(0.0, Some(0.1 + f64::from(i % 97) / 100.0), Some(0.02), 3.0, 0, true));
            r.finished_unix = now_ms as f64 / 1000.0 - f64::from(i) / 500.0;
            if i % 100 == 0 {
                r.model = format!("m{sec}-{i}");
            }
            r
        });
        store.ingest(batch.collect::<Vec<_>>(), now_ms);
        if sec == 3600 {
            bytes_after_first_hour = store.bytes_held();
        }
    }
    assert!(store.series.len() <= 4, "{} series", store.series.len());
    assert!(store.series.values().all(|s| s.raw.len() <= 1_000));
    let counters = store.counters();
    assert!(counters.series_evicted["t"] > 7000, "the attacker's names push each other out");
    // Per window at most its slots plus the one being filled.
    let max_slots: usize = [60, 300, 3600].iter().map(|s| slots_for(s * 1000) as usize + 1).sum();
    assert!(store.slots_held() <= max_slots * store.series.len(), "{}", store.slots_held());
    let bytes = store.bytes_held();
    assert!(bytes <= bytes_after_first_hour + bytes_after_first_hour / 10, "{bytes} vs {bytes_after_first_hour}");
    assert!(bytes < 16 << 20, "{bytes} bytes");
    // The counters still counted every request of the series that exist.
    let m = counters.series.iter().find(|s| s.model == "m").unwrap();
    assert_eq!(m.requests["ok"], 7200 * 495);
}

#[test]
fn scope_decides_which_slos_a_series_judges() {
    let mut only_a = slo("only-a", 300, 40, None);
    only_a.scope = Scope { targets: vec![], models: vec!["a".into()] };
    let everywhere = slo("all", 300, 40, None);
    let mut store = RequestStore::new(config(&[60], 100, vec![only_a, everywhere]));
    let now_ms = (T0 as i64 + 10) * 1000;
    let recs =
        ["a", "b"].map(|m| RequestRecord { model: m.into(), ..record(&(5.0, Some(0.1), Some(0.01), 1.0, 0, true)) });
    store.ingest(recs, now_ms);
    let out = store.evaluate(now_ms);
    let names = |m: &str| -> Vec<String> {
        out.iter().find(|s| s.key.model == m).unwrap().windows[0].1.slos.iter().map(|s| s.slo.clone()).collect()
    };
    assert_eq!(names("a"), ["only-a", "all"]);
    assert_eq!(names("b"), ["all"]);
    let counters = store.counters();
    let b = counters.series.iter().find(|s| s.model == "b").unwrap();
    assert_eq!(b.good_requests.keys().collect::<Vec<_>>(), ["all"]);
}

#[test]
fn refusals_are_counted_by_reason() {
    let mut store = RequestStore::new(config(&[60], 100, vec![]));
    let now_ms = (T0 as i64 + 100) * 1000;
    let ok = record(&(50.0, Some(0.1), None, 1.0, 0, true));
    store.ingest(
        [
            RequestRecord { target: "nope".into(), ..ok.clone() },
            RequestRecord { e2e_s: f64::NAN, ..ok.clone() },
            RequestRecord { finished_unix: T0 + 200.0, ..ok.clone() },
            // Long ago, or absurdly so: counted, in no window, and no arithmetic overflows.
            RequestRecord { finished_unix: -1e300, ..ok.clone() },
            RequestRecord { finished_unix: 0.0, e2e_s: 1e300, ..ok.clone() },
            ok,
        ],
        now_ms,
    );
    let c = store.counters();
    for reason in ["unknown_target", "invalid", "future"] {
        assert_eq!(c.rejected[reason], 1, "{reason}");
    }
    for reason in ["model_too_long", "unknown_model"] {
        assert_eq!(c.rejected[reason], 0, "{reason}");
    }
    assert_eq!(c.series[0].requests["ok"], 3);
    assert_eq!(store.evaluate(now_ms)[0].windows[0].1.requests, 1);
}

#[test]
fn non_streaming_requests_are_counted_apart_and_coverage_starts_at_the_first_request() {
    let mut store = RequestStore::new(config(&[60], 100, vec![slo("a", 300, 40, None)]));
    let now_ms = (T0 as i64 + 100) * 1000;
    // Began at T0 + 70: the tap has watched 30 s of the 60 s window.
    let whole = record(&(75.0, None, None, 5.0, 0, true));
    let streamed = record(&(80.0, Some(0.1), Some(0.01), 1.0, 0, true));
    store.ingest([whole, streamed], now_ms);
    let w = &store.evaluate(now_ms)[0].windows[0].1;
    assert!((w.coverage - 0.5).abs() < 1e-9, "{}", w.coverage);
    let c = &w.slos[0].counts;
    assert_eq!(c[&Clause::Joint], ClauseCounts { population: 1, good_lower: 1, good_upper: 1, unobservable: 1 });
    assert_eq!(c[&Clause::Ttft].unobservable, 1);
    // Only non-streaming traffic: nothing to judge, said so.
    let mut store = RequestStore::new(config(&[60], 100, vec![slo("a", 300, 40, None)]));
    store.ingest([record(&(75.0, None, None, 5.0, 0, true))], now_ms);
    let w = &store.evaluate(now_ms)[0].windows[0].1;
    assert!(matches!(&w.slos[0].status, SloStatus::NotEvaluable { reason } if reason == ALL_UNOBSERVABLE));
}
