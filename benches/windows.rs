//! One evaluation tick on a full 6 h window store (5 s scrapes, the default config's
//! windows 1m, 5m, 15m, 30m, 1h, 6h): the incremental windows (`Incremental::advance` over
//! the one new scrape, then every report) against the from-scratch evaluation that re-reads
//! every stored point (`evaluate_target`); and what the same store costs a `state_dir`
//! snapshot (the store saved and framed as its section of the file). Results in
//! docs/benchmarks.md and docs/footprint.md.
//!
//! ```sh
//! cargo bench --bench windows
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use goodput::adapt::EngineHint;
use goodput::canonical::Snapshot;
use goodput::config::Cardinality;
use goodput::evaluate::incremental::Incremental;
use goodput::evaluate::{RateMode, evaluate_target};
use goodput::parse::{Limits, vllm_like_exposition};
use goodput::scrape::ingest;
use goodput::state::format::{Part, Section, frame};
use goodput::window::TargetWindows;
use goodput::window::saved::SavedWindows;

#[path = "../examples/fake_targets/template.rs"]
#[allow(dead_code, unused_imports)]
mod template;
use template::Template;

const INTERVAL_MS: i64 = 5_000;

/// Scrape `k` of the synthetic vLLM engine, its counters advancing as in `fake_targets`.
fn scrape(template: &Template, k: i64) -> Arc<Snapshot> {
    let body = template.render(1.0 + (k * INTERVAL_MS) as f64 / 600_000.0);
    Arc::new(ingest(body.as_bytes(), &Limits::default(), Cardinality::default(), EngineHint::Auto, "t").unwrap())
}

fn bench(c: &mut Criterion) {
    let config = goodput::config::from_str("targets:\n  - {name: t, url: 'http://127.0.0.1:1/metrics'}\n", "config")
        .unwrap()
        .config;
    let eval = config.eval_config().for_target("t");
    let template = Template::parse(&vllm_like_exposition(1, 1, 7));
    let points = config.max_window().as_millis() as i64 / INTERVAL_MS;
    let mut store = TargetWindows::new(config.max_window());
    for k in 0..=points {
        store.push(k * INTERVAL_MS, scrape(&template, k));
    }
    let now = points * INTERVAL_MS;
    let mut inc = Incremental::new(&eval);
    inc.advance(&mut store, now);

    let mut g = c.benchmark_group("full_6h_windows_at_5s");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("from_scratch", |b| b.iter(|| black_box(evaluate_target(&store, now, &eval)).len()));
    // One tick = one new scrape (untimed: ingest is the same either way), then the advance
    // over it and the windows' oldest points, then every report.
    let mut k = points;
    g.bench_function("incremental_tick", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                k += 1;
                store.push(k * INTERVAL_MS, scrape(&template, k));
                let began = Instant::now();
                inc.advance(&mut store, k * INTERVAL_MS);
                black_box(inc.reports(k * INTERVAL_MS, &eval, RateMode::Prometheus).len());
                timed += began.elapsed();
            }
            timed
        })
    });
    g.finish();

    // The store as the daemon holds it after a tick (thinned beyond the hour), saved as a
    // snapshot saves every target's once per `state_snapshot_interval`.
    let section = |store: &TargetWindows| Section {
        target: "t".into(),
        identity: 0,
        part: Part::Windows(SavedWindows::save(store)),
    };
    let mut g = c.benchmark_group("snapshot_of_full_6h_windows_at_5s");
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("save_and_frame", |b| {
        b.iter(|| black_box(frame(&section(&store.clone()), Vec::new())).map(|f| f.len()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
