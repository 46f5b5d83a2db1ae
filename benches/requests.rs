//! The request store's cost per tick at steady state (docs/footprint.md#budgets-and-requests-at-steady-state):
//! 20 targets behind a tap, each finishing 4 requests a second with 30 ITL gaps and the
//! engine's times (so that each pairs for its TTFT gap), the default windows (1m, 5m, 15m,
//! 1h) and the two the default alert rules alone read (30m, 6h, counts only), the default
//! quantiles and one SLO. The store is filled tick by tick with 7 hours of requests, past
//! the longest window: from then on it holds what it holds after a day, since nothing
//! older is kept. One iteration is one 5 s tick: the 400 requests that finished since the
//! last, taken in, then every series' windows evaluated. The work of a tick (records moved,
//! map steps, slots and sketches into or out of the windows' sums) is printed beside the time.
//! A second group frames every series as a state snapshot does, from the filled store: each
//! into a buffer of its own, and all into one buffer, as the snapshot writer lends it.
//!
//! ```sh
//! cargo bench --bench requests
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use goodput::duration::Window;
use goodput::request::{
    DEFAULT_MAX_RECORDS_PER_SERIES, DEFAULT_MAX_SERIES_PER_TARGET, EngineTimes, ItlGap, RequestRecord, RequestStore,
    Source, Status, StoreConfig, TokenCount,
};
use goodput::slo::{Objective, Scope, Slo};
use goodput::state::format::frame_requests;

const T0_MS: i64 = 1_700_000_000_000;
const TICK_MS: i64 = 5_000;
const TARGETS: usize = 20;
const PER_TICK: i64 = 20;

fn config() -> StoreConfig {
    let w = |s| Window::from_secs(s);
    StoreConfig {
        targets: (0..TARGETS).map(|i| format!("t{i}")).collect(),
        windows: vec![w(60), w(300), w(900), w(1_800), w(3_600), w(21_600)],
        alert_only: vec![(w(1_800), Vec::new()), (w(21_600), Vec::new())],
        quantiles: vec![0.5, 0.9, 0.95, 0.99],
        slos: vec![Slo {
            name: "chat".into(),
            ttft: Some(Duration::from_millis(500)),
            tpot: Some(Duration::from_millis(50)),
            e2e: None,
            objective: Objective::new(0.99).unwrap(),
            scope: Scope::all(),
        }],
        max_records_per_series: DEFAULT_MAX_RECORDS_PER_SERIES,
        max_series_per_target: DEFAULT_MAX_SERIES_PER_TARGET,
    }
}

/// Request `n` of target `t`, finishing at `t_ms`.
fn record(t: usize, n: i64, t_ms: i64) -> RequestRecord {
    let wobble = ((n as u64).wrapping_mul(2_654_435_761) % 1_000_003) as f64 / 1_000_003.0;
    RequestRecord {
        source: Source::Tap,
        target: format!("t{t}"),
        model: "m".into(),
        status: if n % 97 == 0 { Status::HttpError(500) } else { Status::Ok },
        finished_unix: t_ms as f64 / 1000.0,
        e2e_s: 1.0 + wobble,
        ttft_s: Some(0.05 + 0.3 * wobble),
        tpot_s: Some(0.01 + 0.05 * (1.0 - wobble)),
        prompt_tokens: Some(400),
        output_tokens: Some(TokenCount { value: 31, exact: true }),
        itl: (0..30).map(|k| ItlGap { seconds: 0.01 + 0.002 * f64::from(k % 7) + 0.04 * wobble, tokens: 1 }).collect(),
        engine: Some(EngineTimes { queue_s: Some(0.001), prefill_s: Some(0.04 + 0.2 * wobble), decode_s: None }),
        request_id: None,
    }
}

/// Tick `k`: the requests that finished in the 5 s before it, then every window.
fn tick(store: &mut RequestStore, k: i64) -> usize {
    let now = T0_MS + k * TICK_MS;
    let records = (0..TARGETS).flat_map(|t| {
        (0..PER_TICK).map(move |j| record(t, k * PER_TICK + j, now - TICK_MS + j * (TICK_MS / PER_TICK) + 7))
    });
    store.ingest(records, now);
    store.evaluate(now).len()
}

fn bench(c: &mut Criterion) {
    let mut store = RequestStore::new(config());
    let filled = 7 * 720;
    for k in 0..filled {
        tick(&mut store, k);
    }
    let mut k = filled;
    let before = store.work();
    let mut g = c.benchmark_group("request_store_tick");
    g.sample_size(30);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("20_targets_7h", |b| {
        b.iter(|| {
            k += 1;
            black_box(tick(&mut store, k))
        })
    });
    g.finish();
    // What a state snapshot does with the request stores: every target's series framed
    // under the store's lock, as `state::capture` does, each into a buffer of its own (as
    // before the snapshot writer lent one) or all into the one buffer the writer lends.
    let encode = |store: &RequestStore, one_buffer: bool| {
        let mut lent = Vec::new();
        (0..TARGETS)
            .map(|t| {
                let name = format!("t{t}");
                let buf = if one_buffer { std::mem::take(&mut lent) } else { Vec::new() };
                let framed = frame_requests(&name, 0, &store.saved_ref(&name), buf).expect("a section under 4 GiB");
                let len = framed.len();
                // Written, then kept for the next section or (a buffer of its own) dropped.
                lent = framed;
                len
            })
            .sum::<usize>()
    };
    let mut g = c.benchmark_group("request_store_snapshot");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function("20_targets_7h", |b| b.iter(|| black_box(encode(&store, false))));
    g.bench_function("20_targets_7h_one_buffer", |b| b.iter(|| black_box(encode(&store, true))));
    g.finish();
    println!("request store snapshot: {} bytes for {} records", encode(&store, true), store.records_held());
    let (after, ticks) = (store.work(), (k - filled) as u64);
    println!(
        "request store, per tick after 7 h: {} records held, {:.0} records moved, {:.0} map steps, {:.0} slots into or out of the sums, {:.0} sketches ({ticks} ticks)",
        store.records_held(),
        (after.records - before.records) as f64 / ticks as f64,
        (after.steps - before.steps) as f64 / ticks as f64,
        (after.slots - before.slots) as f64 / ticks as f64,
        (after.sketches - before.sketches) as f64 / ticks as f64,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
