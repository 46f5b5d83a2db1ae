//! The budget book over simulated weeks: requests counted exactly over a sliding 30-day
//! period, histogram increases across a restart, the memory bound at a full period, and the
//! work of a tick after a minute and after a day.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::tally::{REQUEST_WIDTH, histogram_width};
use super::*;
use crate::canonical::{
    Bucket, CounterKind, CounterValue, Engine, FinishReason, Histogram, HistogramKind, ModelSnapshot, Shard, Snapshot,
};
use crate::request::{Source, Status, TokenCount};
use crate::slo::{Objective, Scope};

const DAY_MS: i64 = 86_400_000;
const MIN5_MS: i64 = 300_000;
const HOUR_MS: i64 = 3_600_000;
/// On a bucket boundary, so that each simulated five minutes fills one bucket.
const T0_MS: i64 = 1_700_000_100_000;

fn slo(ttft_ms: Option<u64>, tpot_ms: Option<u64>, e2e_ms: Option<u64>) -> Slo {
    Slo {
        name: "chat".into(),
        ttft: ttft_ms.map(Duration::from_millis),
        tpot: tpot_ms.map(Duration::from_millis),
        e2e: e2e_ms.map(Duration::from_millis),
        objective: Objective::new(0.99).unwrap(),
        scope: Scope::all(),
    }
}

fn record(t_ms: i64, ttft: f64, source: Source) -> RequestRecord {
    RequestRecord {
        source,
        target: "t".into(),
        model: "m".into(),
        status: Status::Ok,
        finished_unix: t_ms as f64 / 1000.0,
        e2e_s: 1.0,
        ttft_s: Some(ttft),
        tpot_s: Some(0.01),
        prompt_tokens: None,
        output_tokens: Some(TokenCount { value: 50, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

#[test]
fn periods_map_to_at_most_max_buckets() {
    let spec = |hours: u64| BudgetSpec { slo: slo(Some(200), None, None), period: Duration::from_secs(hours * 3_600) };
    assert_eq!((spec(28 * 24).bucket_ms(), spec(28 * 24).buckets()), (HOUR_MS, 672));
    assert_eq!((spec(56).bucket_ms(), spec(56).buckets()), (MIN5_MS, 672));
    assert_eq!((spec(2).bucket_ms(), spec(2).buckets()), (MIN5_MS, 24));
    // Thirty days: 65-minute buckets, the period's edge within one.
    assert_eq!((spec(30 * 24).bucket_ms(), spec(30 * 24).buckets()), (65 * 60_000, 665));
    for hours in [57, 30 * 24, 90 * 24, 365 * 24] {
        let s = spec(hours);
        assert!(s.buckets() as u64 <= MAX_BUCKETS && s.bucket_ms() % 60_000 == 0, "{hours} h: {}", s.bucket_ms());
        assert!(s.buckets() as i64 * s.bucket_ms() >= hours as i64 * HOUR_MS);
    }
}

/// `minutes` of one request a minute through the book, and a full ledger of histogram rows
/// counted once a minute as `feed_metrics` counts them.
fn filled(spec: &BudgetSpec, len: usize, bucket_ms: i64, minutes: i64) -> (BudgetBook, Ledger) {
    let mut book = BudgetBook::new(vec![spec.clone()], vec!["t".into()]);
    let width = histogram_width(&spec.slo);
    let mut metrics = Ledger::new(width, len, bucket_ms);
    let row: Vec<f64> = (0..width).map(|i| 100.0 - i as f64 * 0.25).collect();
    for m in 0..minutes {
        let t = T0_MS + m * 60_000;
        book.add_records([&record(t, 0.1, Source::Tap)]);
        metrics.add(t, &row);
    }
    (book, metrics)
}

/// docs/footprint.md and docs/metrics.md quote these: the bytes of one target and SLO at a
/// full 28-day period, hourly against the five-minute buckets of earlier versions.
#[test]
fn a_full_period_costs_under_forty_kib_per_slo() {
    let period = DEFAULT_PERIOD;
    let minutes = period.as_secs() as i64 / 60 + 90;
    for (name, s) in
        [("TTFT and TPOT", slo(Some(200), Some(50), None)), ("three clauses", slo(Some(200), Some(50), Some(5000)))]
    {
        let spec = BudgetSpec { slo: s, period };
        let (book, metrics) = filled(&spec, spec.buckets(), spec.bucket_ms(), minutes);
        assert_eq!(book.allocated_bytes(), book.heap_bytes(), "{name}: the whole period written");
        assert_eq!(metrics.allocated_bytes(), metrics.heap_bytes());
        let both = metrics.allocated_bytes() + book.allocated_bytes();
        assert!(metrics.allocated_bytes() <= 40 << 10, "{name}: metrics ledger {} B", metrics.allocated_bytes());
        // The same counts on five-minute buckets (8,064 rows), as earlier versions kept them.
        let (_, fine) = filled(&spec, 8_064, MIN5_MS, minutes);
        assert!(fine.allocated_bytes() > 11 * metrics.allocated_bytes());
        // Both hold the last 28 days of the counts (the fine edge five minutes, the hourly one
        // an hour; the feed is steady, so the totals differ by that bucket at most).
        let (t, f) = (metrics.totals()[0], fine.totals()[0]);
        assert!(t > 0.0 && (t - f).abs() <= 60.0 * 100.0, "{name}: {t} vs {f}");
        eprintln!(
            "{name}: metrics {} B, tap {} B, both {both} B; five-minute buckets: metrics {} B",
            metrics.allocated_bytes(),
            book.allocated_bytes(),
            fine.allocated_bytes()
        );
    }
}

#[test]
fn a_thirty_day_period_of_every_source_fits_in_a_hundred_kib() {
    // The widest SLO: three clauses.
    let spec = BudgetSpec { slo: slo(Some(200), Some(50), Some(5000)), period: Duration::from_secs(30 * 86_400) };
    let metrics = Ledger::new(histogram_width(&spec.slo), spec.buckets(), spec.bucket_ms());
    let request = Ledger::new(REQUEST_WIDTH, spec.buckets(), spec.bucket_ms());
    let all = metrics.heap_bytes() + 2 * request.heap_bytes();
    assert!(metrics.heap_bytes() < 40 << 10, "metrics ledger {} B", metrics.heap_bytes());
    assert!(all < 100 << 10, "metrics, tap and otlp ledgers: {all} B");
    // And the book allocates a day of rows on the first count, not the period.
    let mut book = BudgetBook::new(vec![spec], vec!["t".into()]);
    assert_eq!(book.heap_bytes(), 0);
    book.add_records([&record(T0_MS, 0.1, Source::Tap)]);
    assert_eq!(book.heap_bytes(), request.heap_bytes());
    assert!(book.allocated_bytes() * 10 < book.heap_bytes(), "{} B", book.allocated_bytes());
}

/// 31 days of requests, ten per five minutes, one in three five minutes holding a slow one;
/// the budget equals the exact count over the period's buckets at every day's end.
#[test]
fn thirty_days_of_requests_give_the_exact_budget_as_the_period_slides() {
    let period = Duration::from_secs(30 * 86_400);
    let spec = BudgetSpec { slo: slo(Some(200), None, None), period };
    let (bucket_ms, len) = (spec.bucket_ms(), spec.buckets() as i64);
    let mut book = BudgetBook::new(vec![spec], vec!["t".into()]);
    let buckets = 31 * DAY_MS / MIN5_MS;
    let bad_in = |b: i64| b % 3 == 0;
    for b in 0..buckets {
        let t = T0_MS + b * MIN5_MS;
        let records: Vec<RequestRecord> =
            (0..10).map(|i| record(t + i * 20_000, if i == 0 && bad_in(b) { 0.5 } else { 0.1 }, Source::Tap)).collect();
        book.add_records(&records);
        if (b + 1) % (DAY_MS / MIN5_MS) != 0 {
            continue;
        }
        let now = t + MIN5_MS - 1;
        // In the period: every five minutes whose records fall in the newest `len` buckets.
        let oldest = now.div_euclid(bucket_ms) - len + 1;
        let inside: Vec<i64> = (0..=b).filter(|x| (T0_MS + x * MIN5_MS).div_euclid(bucket_ms) >= oldest).collect();
        let total = 10.0 * inside.len() as f64;
        let bad = inside.iter().filter(|&&x| bad_in(x)).count() as f64;
        let r = book.report(now);
        assert_eq!(r.len(), 1);
        let v = r[0].values.expect("requests in the period");
        assert_eq!(v.requests, total, "day {}", (b + 1) / 288);
        let consumed = bad / total / 0.01;
        assert!((v.consumed.estimate - consumed).abs() < 1e-9, "day {}: {v:?} vs {consumed}", (b + 1) / 288);
        assert!(v.consumed.is_exact() && (v.remaining.estimate - (1.0 - consumed)).abs() < 1e-9);
        // The period's edge is within one bucket of 30 days back.
        let covered_ms = ((now - T0_MS) as f64).min(period.as_millis() as f64);
        assert!(
            (inside.len() as i64 * MIN5_MS) as f64 >= covered_ms - bucket_ms as f64 - MIN5_MS as f64,
            "day {}: {} five minutes inside",
            (b + 1) / 288,
            inside.len()
        );
        let day = (b + 1) as f64 / 288.0;
        let slack = bucket_ms as f64 / period.as_millis() as f64;
        assert!((r[0].coverage - (day / 30.0).min(1.0)).abs() <= slack, "coverage {} on day {day}", r[0].coverage);
        assert_eq!((r[0].source, r[0].period), (DataSource::Tap, period));
    }
    // A month of silence empties the period; the ledger stays, with nothing to judge.
    let r = book.report(T0_MS + 62 * DAY_MS);
    assert!(r[0].values.is_none() && r[0].coverage == 1.0);
}

#[test]
fn records_count_only_where_the_slo_applies_and_can_judge() {
    let mut scoped = slo(Some(200), Some(50), None);
    scoped.scope = Scope { targets: vec![], models: vec!["m".into()] };
    let spec = BudgetSpec { slo: scoped, period: DEFAULT_PERIOD };
    let mut book = BudgetBook::new(vec![spec], vec!["t".into()]);
    let mut other_model = record(T0_MS, 0.1, Source::Otlp);
    other_model.model = "other".into();
    let mut other_target = record(T0_MS, 0.1, Source::Otlp);
    other_target.target = "elsewhere".into();
    let mut unstreamed = record(T0_MS, 0.1, Source::Otlp);
    unstreamed.ttft_s = None;
    let mut failed = record(T0_MS, 0.1, Source::Otlp);
    failed.status = Status::HttpError(503);
    let good = record(T0_MS, 0.1, Source::Otlp);
    book.add_records([&other_model, &other_target, &unstreamed, &failed, &good]);
    let r = book.report(T0_MS + 1_000);
    assert_eq!(r.len(), 1, "{r:?}");
    let v = r[0].values.unwrap();
    // The failed and the good one; the unstreamed request cannot be judged on TTFT.
    assert_eq!(v.requests, 2.0);
    assert!((v.consumed.estimate - 50.0).abs() < 1e-9, "{v:?}");
    assert_eq!(r[0].source, DataSource::Otlp);
}

/// One TTFT histogram (0.1, 0.5, +Inf) and the finished counter, cumulative since
/// `created`: per scrape 10 more requests, 9 under 0.1 s and 1 over 0.5 s, 1 in 10 aborted.
fn scrape(n: f64, created: f64) -> Arc<Snapshot> {
    let buckets = vec![
        Bucket { le: 0.1, count: 9.0 * n },
        Bucket { le: 0.5, count: 9.0 * n },
        Bucket { le: f64::INFINITY, count: 10.0 * n },
    ];
    let mut m = ModelSnapshot::default();
    m.histograms.entry(HistogramKind::Ttft).or_default().push(Shard {
        key: String::new(),
        created: Some(created),
        value: Histogram { buckets, sum: n, count: 10.0 * n },
    });
    for (reason, v) in [(FinishReason::Stop, 9.0 * n), (FinishReason::Abort, n)] {
        m.counters.entry(CounterKind::RequestsFinished).or_default().push(Shard {
            key: format!("finished_reason=\"{reason:?}\""),
            created: Some(created),
            value: CounterValue { value: v, reason: Some(reason) },
        });
    }
    Arc::new(Snapshot {
        engine: Engine::Vllm,
        models: BTreeMap::from([("m".to_string(), m)]),
        process_start: Some(created),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    })
}

/// Two hours of 15 s scrapes and 5 s ticks with an engine restart in the middle: every
/// request after the first counted scrape is counted once, the restart included.
#[test]
fn histogram_increases_are_counted_once_across_ticks_and_a_restart() {
    let spec = BudgetSpec { slo: slo(Some(100), None, None), period: DEFAULT_PERIOD };
    let mut book = BudgetBook::new(vec![spec], vec!["t".into()]);
    let mut store = TargetWindows::new(Duration::from_secs(600));
    let (mut n, mut created) = (0.0, 1.0);
    let mut scrapes = 0;
    for tick in 0..(2 * 3_600 / 5) {
        let now = T0_MS + tick * 5_000;
        if tick % 3 == 0 {
            // The engine restarts after an hour: its counters start again from zero.
            if tick == 3 * 360 {
                (n, created) = (0.0, 2.0);
            }
            n += 1.0;
            store.push(now, scrape(n, created));
            scrapes += 1;
        }
        book.feed_metrics("t", &store, now);
    }
    let r = book.report(T0_MS + 2 * 3_600_000);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].source, r[0].slo.as_str()), (DataSource::Metrics, "chat"));
    let v = r[0].values.unwrap();
    // Feeds come once a minute (every 12th tick): the first only anchors at the first
    // scrape, the last counts up to the scrapes of its own tick.
    let last_feed = (2 * 3_600 / 5 - 1) / 12 * 12;
    let counted = (0..=last_feed).filter(|t| t % 3 == 0).count() - 1;
    assert!(counted > 400 && counted < scrapes);
    assert_eq!(v.requests, 10.0 * counted as f64, "{v:?}");
    // 90% under the threshold, 10% aborted: joint in [0.8, 0.9], estimate 0.81.
    assert!((v.attainment.lower - 0.8).abs() < 1e-9 && (v.attainment.upper - 0.9).abs() < 1e-9, "{v:?}");
    assert!((v.attainment.estimate - 0.81).abs() < 1e-9);
    assert!((v.consumed.estimate - 19.0).abs() < 1e-6 && (v.remaining.upper + 9.0).abs() < 1e-6, "{v:?}");
}

/// The book's work over one minute of 5 s ticks (15 s scrapes, a tap record a tick, a
/// report a tick) after `history_ms` of the same, and the bytes its ledgers then hold.
fn a_minute_of_ticks_after(history_ms: i64) -> (u64, usize) {
    let spec = BudgetSpec { slo: slo(Some(100), None, None), period: DEFAULT_PERIOD };
    let mut book = BudgetBook::new(vec![spec], vec!["t".into()]);
    let mut store = TargetWindows::new(Duration::from_secs(600));
    let mut tick = |book: &mut BudgetBook, k: i64| {
        let now = T0_MS + k * 5_000;
        if k % 3 == 0 {
            store.push(now, scrape((k / 3 + 1) as f64, 1.0));
        }
        book.feed_metrics("t", &store, now);
        book.add_records([&record(now - 500, 0.05, Source::Tap)]);
        book.report(now)
    };
    let ticks = history_ms / 5_000;
    for k in 0..ticks {
        tick(&mut book, k);
    }
    let before = book.work();
    for k in ticks..ticks + 12 {
        let r = tick(&mut book, k);
        assert_eq!(r.len(), 2, "a metrics and a tap ledger");
        assert!(r.iter().all(|b| b.values.is_some()), "{r:?}");
    }
    (book.work() - before, book.allocated_bytes())
}

/// docs/footprint.md: a tick's budget work (rows written and cleared, totals read) does
/// not grow with the history the ledgers hold.
#[test]
fn a_tick_after_a_day_costs_what_a_tick_after_a_minute_does() {
    let (minute, small) = a_minute_of_ticks_after(60_000);
    let (day, large) = a_minute_of_ticks_after(DAY_MS);
    assert!(large > small, "a day holds more rows: {large} against {small} B");
    // 12 tap rows, a metrics row, 12 reports of two ledgers' totals (3 + 6).
    assert!(minute >= 12 + 1 + 12 * 9, "{minute}: not counting");
    assert!(day as f64 <= 1.25 * minute as f64, "a day: {day}, a minute: {minute}");
    eprintln!("budget work over a minute of ticks: after a minute {minute}, after a day {day}");
}

/// A snapshot of an earlier version holds five-minute ledgers over the whole period: it is
/// restored onto the hourly buckets with its counts, not dropped.
#[test]
fn a_five_minute_ledger_from_an_earlier_snapshot_is_restored_onto_hours() {
    let spec = BudgetSpec { slo: slo(Some(200), None, None), period: DEFAULT_PERIOD };
    let mut book = BudgetBook::new(vec![spec.clone()], vec!["t".into()]);
    book.add_records([&record(T0_MS, 0.1, Source::Tap)]);
    // The same key's ledger as earlier versions kept it: 8,064 five-minute buckets, two
    // days of one good request per five minutes.
    let mut old = Ledger::new(REQUEST_WIDTH, 8_064, MIN5_MS);
    for b in 0..576 {
        old.add(T0_MS + b * MIN5_MS, &[1.0, 1.0, 1.0]);
    }
    let mut saved = serde_json::to_value(book.saved("t")).unwrap();
    saved["ledgers"][0]["ledger"] = serde_json::to_value(&old).unwrap();
    let saved: saved::SavedBudgets = serde_json::from_value(saved).unwrap();
    let mut fresh = BudgetBook::new(vec![spec], vec!["t".into()]);
    assert_eq!(fresh.restore("t", saved), (1, 0), "converted, not dropped");
    let r = fresh.report(T0_MS + 576 * MIN5_MS);
    assert_eq!(r[0].values.unwrap().requests, 576.0);
    assert!(fresh.allocated_bytes() < 12 << 10, "{} B", fresh.allocated_bytes());
}
