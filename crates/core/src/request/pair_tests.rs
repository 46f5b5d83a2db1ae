//! The TTFT gap paired per request: from the engine's times in the response, from the span
//! of the same request id whichever side comes first, and absent with its reasons.

use super::pair::{GapReference, MAX_WAITING, PAIR_WAIT_MS, Pairer};
use super::*;

const NOW_MS: i64 = 1_700_000_000_000;

fn rec(source: Source, id: Option<&str>, ttft: Option<f64>, finished: f64) -> RequestRecord {
    RequestRecord {
        source,
        target: "t".into(),
        model: "m".into(),
        status: Status::Ok,
        finished_unix: finished,
        e2e_s: 1.0,
        ttft_s: ttft,
        tpot_s: None,
        prompt_tokens: None,
        output_tokens: None,
        itl: Vec::new(),
        engine: None,
        request_id: id.map(str::to_string),
    }
}

fn at(s: f64) -> f64 {
    NOW_MS as f64 / 1000.0 - s
}

fn window(p: &mut Pairer) -> Option<TtftGap> {
    p.window("t", "m", 0, (at(60.0), at(0.0)), &[0.5, 1.0]).0
}

#[test]
fn a_tap_record_pairs_with_its_span_whichever_comes_first() {
    let mut p = Pairer::default();
    p.offer(&rec(Source::Tap, Some("a"), Some(0.30), at(5.0)), NOW_MS);
    p.offer(&rec(Source::Otlp, Some("b"), Some(0.10), at(4.0)), NOW_MS);
    assert_eq!(p.waiting(), 2);
    p.offer(&rec(Source::Otlp, Some("a"), Some(0.25), at(5.0)), NOW_MS);
    p.offer(&rec(Source::Tap, Some("b"), Some(0.1004), at(4.0)), NOW_MS);
    assert_eq!(p.waiting(), 0);
    let g = window(&mut p).unwrap();
    assert_eq!((g.reference, g.paired, g.absent), (GapReference::Otlp, 2, None));
    assert!((g.mean.unwrap() - (0.05 + 0.0004) / 2.0).abs() < 1e-12, "{g:?}");
    assert!((g.min.unwrap() - 0.0004).abs() < 1e-12 && (g.quantiles[1].1 - 0.05).abs() < 1e-12, "{g:?}");
    assert!(g.unpaired.values().all(|n| *n == 0), "{g:?}");
    // Another target's span with the same id is another request.
    let mut other = rec(Source::Otlp, Some("c"), Some(0.1), at(3.0));
    other.target = "u".into();
    p.offer(&other, NOW_MS);
    p.offer(&rec(Source::Tap, Some("c"), Some(0.2), at(3.0)), NOW_MS);
    assert_eq!(p.waiting(), 2);
}

#[test]
fn the_engine_times_in_the_response_pair_at_once() {
    let mut p = Pairer::default();
    let mut r = rec(Source::Tap, Some("a"), Some(0.5), at(1.0));
    r.engine = Some(EngineTimes { queue_s: Some(0.1), prefill_s: Some(0.3), decode_s: Some(2.0) });
    p.offer(&r, NOW_MS);
    // llama.cpp: no queue time.
    let mut l = rec(Source::Tap, None, Some(0.02), at(1.0));
    l.engine = Some(EngineTimes { queue_s: None, prefill_s: Some(0.015), decode_s: None });
    p.offer(&l, NOW_MS);
    assert_eq!(p.waiting(), 0, "nothing waits for a span");
    let g = window(&mut p).unwrap();
    assert_eq!((g.reference, g.paired), (GapReference::Response, 2));
    assert!((g.quantiles[1].1 - 0.1).abs() < 1e-12 && (g.min.unwrap() - 0.005).abs() < 1e-12, "{g:?}");
    // A decode time alone says nothing of the first token: the span is waited for.
    let mut d = rec(Source::Tap, Some("d"), Some(0.5), at(1.0));
    d.engine = Some(EngineTimes { decode_s: Some(1.0), ..EngineTimes::default() });
    p.offer(&d, NOW_MS);
    p.offer(&rec(Source::Otlp, Some("d"), Some(0.4), at(1.0)), NOW_MS);
    assert_eq!(window(&mut p).unwrap().reference, GapReference::Both);
}

#[test]
fn what_cannot_be_paired_is_counted_with_its_reason_and_never_compared() {
    let mut p = Pairer::default();
    p.offer(&rec(Source::Tap, None, Some(0.3), at(5.0)), NOW_MS);
    p.offer(&rec(Source::Tap, Some("late"), Some(0.3), at(5.0)), NOW_MS);
    p.offer(&rec(Source::Tap, Some("blind"), Some(0.3), at(5.0)), NOW_MS);
    p.offer(&rec(Source::Otlp, Some("blind"), None, at(5.0)), NOW_MS);
    // Not streamed: no TTFT, so not part of the gap at all.
    p.offer(&rec(Source::Tap, Some("whole"), None, at(5.0)), NOW_MS);
    // A span of some other request is no partner.
    p.offer(&rec(Source::Otlp, Some("x"), Some(0.1), at(5.0)), NOW_MS);
    let g = window(&mut p).unwrap();
    assert_eq!((g.paired, g.mean, g.unpaired["no_request_id"], g.unpaired["engine_without_ttft"]), (0, None, 1, 1));
    assert_eq!(g.unpaired["no_engine_record"], 0, "still waiting");
    p.expire(NOW_MS + PAIR_WAIT_MS - 1, at(60.0));
    assert_eq!(window(&mut p).unwrap().unpaired["no_engine_record"], 0);
    p.expire(NOW_MS + PAIR_WAIT_MS, at(60.0));
    let g = window(&mut p).unwrap();
    assert_eq!((g.unpaired["no_engine_record"], g.reference), (1, GapReference::None), "{g:?}");
    assert!(g.absent.is_some(), "{g:?}");
    assert_eq!(p.waiting(), 0, "the span that found no tap record is dropped too");
    // The span that comes after the wait pairs with nothing.
    p.offer(&rec(Source::Otlp, Some("late"), Some(0.1), at(5.0)), NOW_MS + PAIR_WAIT_MS);
    assert_eq!(window(&mut p).unwrap().paired, 0);
    // What no window reads goes.
    p.expire(NOW_MS + 2 * PAIR_WAIT_MS, at(0.0));
    assert_eq!(window(&mut p), None);
}

#[test]
fn the_waiting_records_are_bounded() {
    let mut p = Pairer::default();
    for i in 0..MAX_WAITING + 10 {
        p.offer(&rec(Source::Tap, Some(&i.to_string()), Some(0.1), at(1.0)), NOW_MS);
        p.offer(&rec(Source::Otlp, Some(&format!("e{i}")), Some(0.1), at(1.0)), NOW_MS);
    }
    assert_eq!(p.waiting(), 2 * MAX_WAITING);
    assert_eq!(window(&mut p).unwrap().unpaired["no_engine_record"], 10, "past the bound: unpaired at once");
}

#[test]
fn the_store_pairs_what_it_takes_under_the_series_it_joined() {
    let mut st = RequestStore::new(StoreConfig {
        targets: vec!["t".into()],
        windows: vec![crate::duration::Window::from_secs(60)],
        alert_only: Vec::new(),
        quantiles: vec![0.99],
        slos: Vec::new(),
        max_records_per_series: 1000,
        max_series_per_target: 8,
    });
    st.ingest([rec(Source::Otlp, Some("a"), Some(0.1), at(2.0))], NOW_MS);
    st.ingest([rec(Source::Tap, Some("a"), Some(0.35), at(2.0))], NOW_MS + 1000);
    let series = st.evaluate(NOW_MS + 1000);
    let tap = series.iter().find(|s| s.key.source == Source::Tap).unwrap();
    let g = tap.windows[0].1.ttft_gap.as_ref().unwrap();
    assert_eq!((g.paired, g.quantiles[0].0), (1, 0.99));
    assert!((g.quantiles[0].1 - 0.25).abs() < 1e-12, "{g:?}");
    let otlp = series.iter().find(|s| s.key.source == Source::Otlp).unwrap();
    assert_eq!(otlp.windows[0].1.ttft_gap, None, "the gap is the tap's");
}

/// Random offers, expiries and window reads (edges moving forward, now and then back or
/// past themselves): each window's running sums give what a read of every kept request
/// gives, the mean to within rounding.
#[test]
fn the_mean_of_equal_gaps_is_that_gap() {
    let mut p = Pairer::default();
    let gap = 0.003_810_590_000_000_030_3;
    for i in 0..1_000 {
        let mut r = rec(Source::Tap, None, Some(0.1 + gap), at(1.0 + f64::from(i) * 0.01));
        r.engine = Some(EngineTimes { queue_s: None, prefill_s: Some(0.1), decode_s: None });
        p.offer(&r, NOW_MS);
    }
    let g = window(&mut p).unwrap();
    assert_eq!(g.paired, 1_000);
    assert!(g.mean.unwrap() >= g.min.unwrap() && g.mean.unwrap() <= g.quantiles[1].1, "{g:?}");
}

#[test]
fn the_windows_sums_equal_a_read_of_every_kept_request() {
    use rand::{Rng, SeedableRng};
    let quantiles = [0.5, 0.9, 0.99, 1.0];
    for seed in 0..20 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut p = Pairer::default();
        let mut now_ms = NOW_MS;
        let mut reads = 0;
        for step in 0..3_000 {
            now_ms += rng.random_range(0..400);
            let now = now_ms as f64 / 1000.0;
            // Finish times a little in the past, out of order.
            let finished = now - rng.random_range(0.0..20.0);
            let id = format!("r{}", rng.random_range(0..200));
            let ttft = rng.random_bool(0.9).then(|| rng.random_range(0.01..0.5));
            let mut r = rec(if rng.random_bool(0.6) { Source::Tap } else { Source::Otlp }, None, ttft, finished);
            match rng.random_range(0..4) {
                0 => r.request_id = Some(id),
                1 => {
                    r.engine = Some(EngineTimes {
                        queue_s: Some(0.001),
                        prefill_s: Some(rng.random_range(0.0..0.2)),
                        decode_s: None,
                    })
                }
                2 => r.request_id = Some(id),
                _ => {}
            }
            p.offer(&r, now_ms);
            if step % 7 == 0 {
                p.expire(now_ms, now - 120.0);
            }
            if step % 5 == 0 {
                let back = if rng.random_bool(0.02) { 30.0 } else { 0.0 };
                for (i, w) in [10.0, 60.0].into_iter().enumerate() {
                    let edges = (now - back - w, now - back);
                    let got = p.window("t", "m", i, edges, &quantiles).0;
                    let want = p.read_whole("t", "m", edges, &quantiles);
                    reads += 1;
                    match (got, want) {
                        (None, None) => {}
                        (Some(mut g), Some(w)) => {
                            let (gm, wm) = (g.mean.take(), w.mean);
                            assert!(
                                gm.zip(wm).is_none_or(|(a, b)| (a - b).abs() < 1e-12) && gm.is_some() == wm.is_some(),
                                "seed {seed} step {step} window {i}: mean {gm:?} against {wm:?}"
                            );
                            // Never outside the gaps it is the mean of.
                            assert!(gm.is_none_or(|m| g.min.is_some_and(|min| m >= min)), "{g:?} mean {gm:?}");
                            g.mean = w.mean;
                            assert_eq!(g, w, "seed {seed} step {step} window {i}");
                        }
                        (g, w) => panic!("seed {seed} step {step} window {i}: {g:?} against {w:?}"),
                    }
                }
            }
        }
        assert!(reads > 1_000);
    }
}
