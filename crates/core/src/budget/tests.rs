//! The budget book over simulated weeks: requests counted exactly over a sliding 30-day
//! period, histogram increases across a restart, and the memory bound.

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
    let spec = |days: u64| BudgetSpec { slo: slo(Some(200), None, None), period: Duration::from_secs(days * 86_400) };
    assert_eq!((spec(28).bucket_ms(), spec(28).buckets()), (MIN5_MS, 8_064));
    assert_eq!((spec(30).bucket_ms(), spec(30).buckets()), (MIN5_MS, 8_640));
    let year = spec(365);
    assert!(year.buckets() as u64 <= MAX_BUCKETS && year.bucket_ms() % 60_000 == 0, "{}", year.bucket_ms());
    assert!(year.buckets() as i64 * year.bucket_ms() >= 365 * DAY_MS);
}

#[test]
fn a_thirty_day_period_of_every_source_fits_well_under_a_mebibyte() {
    // The widest SLO: three clauses.
    let spec = BudgetSpec { slo: slo(Some(200), Some(50), Some(5000)), period: Duration::from_secs(30 * 86_400) };
    let metrics = Ledger::new(histogram_width(&spec.slo), spec.buckets(), spec.bucket_ms());
    let request = Ledger::new(REQUEST_WIDTH, spec.buckets(), spec.bucket_ms());
    let all = metrics.heap_bytes() + 2 * request.heap_bytes();
    assert!(metrics.heap_bytes() < 512 << 10, "metrics ledger {} B", metrics.heap_bytes());
    assert!(all < 3 << 18, "metrics, tap and otlp ledgers: {all} B");
    // And the book allocates it on the first count, not before.
    let mut book = BudgetBook::new(vec![spec], vec!["t".into()]);
    assert_eq!(book.heap_bytes(), 0);
    book.add_records([&record(T0_MS, 0.1, Source::Tap)]);
    assert_eq!(book.heap_bytes(), request.heap_bytes());
}

/// 31 days of requests, ten per five minutes, one in three buckets holding a slow one; the
/// budget equals the exact count over the last 30 days at every day's end.
#[test]
fn thirty_days_of_requests_give_the_exact_budget_as_the_period_slides() {
    let period = Duration::from_secs(30 * 86_400);
    let mut book = BudgetBook::new(vec![BudgetSpec { slo: slo(Some(200), None, None), period }], vec!["t".into()]);
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
        let first = (b - 8_640 + 1).max(0);
        let total = 10.0 * (b - first + 1) as f64;
        let bad = (first..=b).filter(|&x| bad_in(x)).count() as f64;
        let r = book.report(now);
        assert_eq!(r.len(), 1);
        let v = r[0].values.expect("requests in the period");
        assert_eq!(v.requests, total, "day {}", (b + 1) / 288);
        let consumed = bad / total / 0.01;
        assert!((v.consumed.estimate - consumed).abs() < 1e-9, "day {}: {v:?} vs {consumed}", (b + 1) / 288);
        assert!(v.consumed.is_exact() && (v.remaining.estimate - (1.0 - consumed)).abs() < 1e-9);
        let day = (b + 1) as f64 / 288.0;
        assert!((r[0].coverage - (day / 30.0).min(1.0)).abs() < 1e-3, "coverage {} on day {day}", r[0].coverage);
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
