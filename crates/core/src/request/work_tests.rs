//! The store's work per tick counted, not timed: a tick after a day of requests (the records
//! up to the longest window, or up to the cap) takes the records and map steps a tick after
//! a minute takes, and merges at most each window's slots.

use std::time::Duration;

use super::*;
use crate::duration::Window;
use crate::slo::{Objective, Scope, Slo};

const T0_MS: i64 = 1_700_000_000_000;
const WINDOWS: [u64; 4] = [60, 300, 3_600, 21_600];

fn config(cap: usize) -> StoreConfig {
    StoreConfig {
        targets: vec!["t".into()],
        windows: WINDOWS.iter().map(|&s| Window::from_secs(s)).collect(),
        alert_only: Vec::new(),
        quantiles: vec![0.5, 0.9, 0.99],
        slos: vec![Slo {
            name: "chat".into(),
            ttft: Some(Duration::from_millis(200)),
            tpot: Some(Duration::from_millis(50)),
            e2e: None,
            objective: Objective::new(0.99).unwrap(),
            scope: Scope::all(),
        }],
        max_records_per_series: cap,
        max_series_per_target: 4,
    }
}

/// Request `n` of engine spans at one a second, finishing at `t_ms`.
fn record(n: u64, t_ms: i64) -> RequestRecord {
    record_from(Source::Otlp, n, t_ms)
}

/// Request `n` from `source`; a tap's carries the engine's times, so that it pairs at once
/// and its TTFT gap has a value in every window.
fn record_from(source: Source, n: u64, t_ms: i64) -> RequestRecord {
    let wobble = (n.wrapping_mul(2_654_435_761) % 1_000_003) as f64 / 1_000_003.0;
    RequestRecord {
        source,
        target: "t".into(),
        model: "m".into(),
        status: if n.is_multiple_of(97) { Status::HttpError(500) } else { Status::Ok },
        finished_unix: t_ms as f64 / 1000.0,
        e2e_s: 1.0 + wobble,
        ttft_s: Some(0.05 + 0.3 * wobble),
        tpot_s: Some(0.01 + 0.05 * (1.0 - wobble)),
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 40, exact: true }),
        itl: vec![ItlGap { seconds: 0.02, tokens: 1 }],
        engine: (source == Source::Tap).then_some(EngineTimes {
            queue_s: Some(0.001),
            prefill_s: Some(0.04 + 0.2 * wobble),
            decode_s: None,
        }),
        request_id: None,
    }
}

/// A 5 s tick: the five requests that finished since the last, then every window.
fn tick(store: &mut RequestStore, k: i64) -> Vec<SeriesWindows> {
    tick_from(store, k, Source::Otlp)
}

fn tick_from(store: &mut RequestStore, k: i64, source: Source) -> Vec<SeriesWindows> {
    let now = T0_MS + k * 5_000;
    let records = (0..5).map(|j| record_from(source, (k * 5 + j) as u64, now - 5_000 + j * 1_000 + 500));
    store.ingest(records, now);
    store.evaluate(now)
}

struct Minute {
    work: Work,
    records_held: usize,
    evaluations: u64,
}

impl Minute {
    fn steps_per_record(&self) -> f64 {
        self.work.steps as f64 / self.work.records as f64
    }
}

/// The store's work over one minute of ticks after `history_ms` of them. The history is
/// ingested tick by tick and evaluated now and then, and at its last tick, so that the
/// minute measured finds every window's sums in place, as a daemon's next tick does.
fn a_minute_after(history_ms: i64, cap: usize, source: Source) -> Minute {
    let mut store = RequestStore::new(config(cap));
    let ticks = history_ms / 5_000;
    for k in 0..ticks {
        let now = T0_MS + k * 5_000;
        let records = (0..5).map(|j| record_from(source, (k * 5 + j) as u64, now - 5_000 + j * 1_000 + 500));
        store.ingest(records, now);
        if k % 120 == 0 || k == ticks - 1 {
            store.evaluate(now);
        }
    }
    let before = store.work();
    let mut evaluations = 0;
    for k in ticks..ticks + 12 {
        let out = tick_from(&mut store, k, source);
        assert_eq!(out.len(), 1);
        evaluations += out[0].windows.len() as u64;
        let one_minute = &out[0].windows[0].1;
        assert!(one_minute.requests >= 55, "{} requests in the last minute", one_minute.requests);
        if source == Source::Tap {
            let gap = one_minute.ttft_gap.as_ref().expect("a tap's window has its TTFT gap");
            assert!(gap.paired >= 55, "{gap:?}");
        }
    }
    let after = store.work();
    let work = Work {
        records: after.records - before.records,
        steps: after.steps - before.steps,
        slots: after.slots - before.slots,
        sketches: after.sketches - before.sketches,
        cells: after.cells - before.cells,
    };
    Minute { work, records_held: store.records_held(), evaluations }
}

/// docs/footprint.md: the request store's tick does not read the records it holds, nor,
/// for a tap, the requests its TTFT gap keeps.
#[test]
fn a_tick_after_a_day_of_requests_takes_the_work_of_a_tick_after_a_minute() {
    for (cap, source) in [
        (DEFAULT_MAX_RECORDS_PER_SERIES, Source::Otlp),
        (3_000, Source::Otlp),
        (DEFAULT_MAX_RECORDS_PER_SERIES, Source::Tap),
    ] {
        let minute = a_minute_after(60_000, cap, source);
        let full = a_minute_after(7 * 3_600_000, cap, source);
        let day = a_minute_after(86_400_000, cap, source);
        // Six hours of one a second, or the cap.
        assert!(day.records_held >= 3_000.min(cap) && day.records_held >= 10 * minute.records_held);
        // The 60 requests of the minute enter the store and the windows the records cover.
        assert!(minute.work.records >= 60 * 3, "{:?}: not counting", minute.work);
        // Once the windows have filled (past the longest, six hours), a day costs what they
        // cost then: nothing grows with the records held.
        let total = |m: &Minute| (m.work.records + m.work.steps) as f64;
        assert!(total(&day) <= 1.25 * total(&full), "cap {cap}: a day {:?}, 7 h {:?}", day.work, full.work);
        // Against a minute, whose windows only take requests in: at a day each request also
        // leaves each window it entered, so at most twice the records, and the same steps
        // for each.
        assert!(day.work.records <= 2 * minute.work.records, "cap {cap}: {:?} vs {:?}", day.work, minute.work);
        assert!(
            day.steps_per_record() <= 1.25 * minute.steps_per_record(),
            "cap {cap}: {:?} vs {:?}",
            day.work,
            minute.work
        );
        // The report lists the requests by arrival of the capacity book's window only, the
        // minute: as many cells after a day as after a minute.
        assert!(minute.work.cells >= 12 * 50, "{:?}: the minute's cells are not counted", minute.work);
        assert!(day.work.cells <= minute.work.cells + minute.work.cells / 4, "{:?} vs {:?}", day.work, minute.work);
        // The slots merged are bounded by the windows' slot counts, whatever the history.
        for m in [&minute, &full, &day] {
            assert!(m.work.slots <= m.evaluations * SLOTS_PER_WINDOW as u64, "{:?}", m.work);
        }
        // A window the records cover merges only its slots' ITL sketches (the records
        // rank the other latencies); one past them merges all four.
        if cap == DEFAULT_MAX_RECORDS_PER_SERIES {
            assert!(day.work.slots > 0 && day.work.sketches == day.work.slots, "{:?}", day.work);
        } else {
            assert!(day.work.sketches > day.work.slots && day.work.sketches <= 4 * day.work.slots, "{:?}", day.work);
        }
        eprintln!(
            "request store, cap {cap}, {source:?}: a minute of ticks after a minute {:?}, after 7 h {:?}, after a day {:?} ({} records held)",
            minute.work, full.work, day.work, day.records_held
        );
    }
}

/// The running sums give what a fresh count over the records gives, at every tick of a
/// window that slides past a flood and out of it.
#[test]
fn running_sums_equal_a_fresh_count_as_the_windows_slide() {
    let mut store = RequestStore::new(config(400));
    for k in 0..2_000 {
        // A flood of 200 requests at tick 300 pushes records out by the cap.
        if k == 300 {
            let now = T0_MS + k * 5_000;
            store.ingest((0..200).map(|j| record(10_000 + j, now - 1_000)), now);
        }
        // Now and then a late request, into slots the windows have summed already.
        if k % 7 == 0 {
            let now = T0_MS + k * 5_000;
            store.ingest([record(50_000 + k as u64, now - 90_000)], now);
        }
        let out = tick(&mut store, k);
        if k % 50 != 0 {
            continue;
        }
        // A store evaluated for the first time at this tick counts from the records.
        let mut fresh = store.clone();
        for s in fresh.series.values_mut() {
            s.running.clear();
            s.rings.iter_mut().for_each(super::ring::Ring::forget_sum);
        }
        let again = fresh.evaluate(T0_MS + k * 5_000);
        for ((w, a), (_, b)) in out[0].windows.iter().zip(&again[0].windows) {
            assert_eq!(a.requests, b.requests, "tick {k}, {w:?}");
            assert_eq!(a.basis, b.basis, "tick {k}, {w:?}");
            assert_eq!(a.latency, b.latency, "tick {k}, {w:?}");
            assert_eq!(a.slos[0].counts, b.slos[0].counts, "tick {k}, {w:?}");
            assert_eq!(a.slos[0].by_arrival, b.slos[0].by_arrival, "tick {k}, {w:?}");
            let (ma, mb) = (a.mean_ttft_seconds.unwrap_or(0.0), b.mean_ttft_seconds.unwrap_or(0.0));
            assert!((ma - mb).abs() < 1e-9, "tick {k}, {w:?}: {ma} vs {mb}");
        }
    }
}

/// docs/footprint.md quotes these: one series at the record cap (four requests a second
/// for seven hours against windows up to six hours), its records, slots and running sums.
#[test]
fn a_series_at_its_cap_holds_what_the_docs_say() {
    let mut store = RequestStore::new(config(DEFAULT_MAX_RECORDS_PER_SERIES));
    let ticks = 7 * 720;
    for k in 0..ticks {
        let now = T0_MS + k * 5_000;
        let records = (0..20).map(|j| record((k * 20 + j) as u64, now - 5_000 + j * 250 + 100));
        store.ingest(records, now);
        if k % 120 == 0 || k == ticks - 1 {
            store.evaluate(now);
        }
    }
    assert_eq!(store.records_held(), DEFAULT_MAX_RECORDS_PER_SERIES);
    let (records, slots_and_sketches) = (
        DEFAULT_MAX_RECORDS_PER_SERIES * BYTES_PER_RECORD,
        store.bytes_held() - DEFAULT_MAX_RECORDS_PER_SERIES * BYTES_PER_RECORD,
    );
    let running = store.running_bytes();
    // The records cover the 1 h window and shorter ones (65,536 at 4 a second: 4.5 hours);
    // the 6 h window reads slots and keeps no running sums.
    assert!(records == 3 << 20 && store.bytes_held() >= records);
    assert!(running > 0 && running < 2 * records, "{running} B of running sums");
    eprintln!(
        "a series at its cap: records {records} B (raw tier, capacity {} B), slots and sketches {slots_and_sketches} B, running sums {running} B",
        store.bytes_held() - slots_and_sketches
    );
}

/// Two stores fed the same seven hours of requests from `source`, one a second: one with
/// the 6 h window configured, one with it alert-only and read by no latency rule; each with
/// its evaluation at the last tick.
fn six_hours_configured_and_alert_only(
    source: Source,
) -> (RequestStore, Vec<SeriesWindows>, RequestStore, Vec<SeriesWindows>) {
    let six_hours = Window::from_secs(21_600);
    let alert_only =
        StoreConfig { alert_only: vec![(six_hours, Vec::new())], ..config(DEFAULT_MAX_RECORDS_PER_SERIES) };
    let (mut configured, mut alerting) =
        (RequestStore::new(config(DEFAULT_MAX_RECORDS_PER_SERIES)), RequestStore::new(alert_only));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let ticks = 7 * 720;
    for k in 0..ticks {
        let now = T0_MS + k * 5_000;
        let records: Vec<RequestRecord> =
            (0..5).map(|j| record_from(source, (k * 5 + j) as u64, now - 5_000 + j * 1_000 + 500)).collect();
        configured.ingest(records.clone(), now);
        alerting.ingest(records, now);
        if k % 120 == 0 || k >= ticks - 2 {
            (a, b) = (configured.evaluate(now), alerting.evaluate(now));
        }
    }
    (configured, a, alerting, b)
}

/// A window only the alert rules read, none of them a latency rule (the 6 h of the slow
/// burn-rate pair), reports its counts as the same window configured does, and no latency
/// quantile, as the histograms' alert-only windows do; its running sums keep no latencies.
#[test]
fn an_alert_only_window_reports_its_counts_and_keeps_no_latencies() {
    let six_hours = Window::from_secs(21_600);
    let (configured, a, alerting, b) = six_hours_configured_and_alert_only(Source::Otlp);
    let (with, without) = (&a[0].windows[3], &b[0].windows[3]);
    assert_eq!(with.0, six_hours);
    assert!(with.1.requests > 20_000, "{} requests in 6 h", with.1.requests);
    assert_eq!(with.1.requests, without.1.requests);
    assert_eq!(with.1.basis, without.1.basis);
    assert_eq!(with.1.slos[0].counts, without.1.slos[0].counts);
    assert!(!with.1.latency.is_empty(), "the configured window has its quantiles");
    assert!(without.1.latency.is_empty(), "{:?}", without.1.latency);
    // The shorter windows, configured in both, are the same.
    for i in 0..3 {
        assert_eq!(a[0].windows[i].1.latency, b[0].windows[i].1.latency, "window {i}");
    }
    // The 6 h window's 21 600 records are most of the latencies held: three B-tree entries
    // each, against the 1 h window's 3 600.
    let (held, kept) = (configured.running_bytes(), alerting.running_bytes());
    // Nor does it sum its slots' sketches: the ITL quantiles they would give are not
    // reported. The configured 6 h window's sums took in each of its 120 slots once.
    let (with, without) = (configured.work(), alerting.work());
    assert!(with.sketches - without.sketches >= SLOTS_PER_WINDOW as u64, "{with:?} vs {without:?}");
    assert!(kept * 3 < held, "running sums: {kept} B against {held} B");
    eprintln!("running sums with the 6 h window configured: {held} B; alert-only: {kept} B");
}

/// A tap's TTFT gap in a window only the alert rules read: its counts (paired, and why not)
/// as in the same window configured, but no gap values, which are latencies: the window
/// ranks none of its gaps.
#[test]
fn an_alert_only_window_counts_the_ttft_gap_and_ranks_no_gaps() {
    let (configured, a, alerting, b) = six_hours_configured_and_alert_only(Source::Tap);
    let with = a[0].windows[3].1.ttft_gap.as_ref().expect("the configured 6 h window's gap");
    let without = b[0].windows[3].1.ttft_gap.as_ref().expect("the alert-only 6 h window's gap");
    assert!(with.paired > 20_000, "{} paired in 6 h", with.paired);
    assert_eq!((with.paired, &with.unpaired, with.reference), (without.paired, &without.unpaired, without.reference));
    assert!(with.mean.is_some() && with.min.is_some() && !with.quantiles.is_empty(), "{with:?}");
    assert_eq!((without.mean, without.min, without.quantiles.len()), (None, None, 0));
    // The shorter windows, configured in both, are the same.
    for i in 0..3 {
        assert_eq!(a[0].windows[i].1.ttft_gap, b[0].windows[i].1.ttft_gap, "window {i}");
    }
    // Ranking the 6 h window's latencies and gaps took over a quarter of the map steps.
    let (with, without) = (configured.work(), alerting.work());
    assert!(without.steps * 4 < with.steps * 3, "{with:?} vs {without:?}");
}

/// The store lists by arrival the requests of the window the capacity book reads: the
/// report's primary window, from a config where the shortest window is alert-only.
#[test]
fn the_arrival_window_is_the_reports_primary_window() {
    use crate::report::{ModelReport, WindowReport};
    let w = Window::from_secs;
    let cfg = StoreConfig {
        windows: vec![w(30), w(60), w(300), w(21_600)],
        alert_only: vec![(w(30), Vec::new()), (w(21_600), Vec::new())],
        ..config(DEFAULT_MAX_RECORDS_PER_SERIES)
    };
    let report = ModelReport {
        model: "m".into(),
        windows: cfg
            .windows
            .iter()
            .map(|&window| WindowReport {
                alert_only: cfg.alert_only.iter().any(|(a, _)| *a == window),
                ..WindowReport::empty(window)
            })
            .collect(),
    };
    assert_eq!(cfg.arrival_window(), Some(w(60)));
    assert_eq!(report.primary_window().map(|r| r.window), cfg.arrival_window());
}
