//! Rendering /metrics for 200 targets built from the fake targets' template
//! (tests/it/render_support): the once-per-tick cost of the report's families, and their size.
//! `render_report` joins the families into one string as the tests read them (and as the
//! daemon held them before it served the chunks); `render_report_chunks` is what the daemon
//! does at the first GET after a tick. Results in docs/benchmarks.md#metrics.
//!
//! ```sh
//! cargo bench --bench metrics_render
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use goodput::serve::{render_report, render_report_chunks};

#[path = "../tests/it/render_support/mod.rs"]
mod render_support;

const TARGETS: usize = 200;

fn bench(c: &mut Criterion) {
    let report = render_support::report(TARGETS);
    let bytes = render_report(&report, &[]).len();
    let lines = render_report(&report, &[]).lines().filter(|l| !l.starts_with('#')).count();

    let mut g = c.benchmark_group("metrics_render_200_targets");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    g.bench_function("render_report", |b| b.iter(|| black_box(render_report(black_box(&report), &[])).len()));
    g.bench_function("render_report_chunks", |b| {
        b.iter(|| black_box(render_report_chunks(black_box(&report), &[])).len())
    });
    g.finish();

    let mut t: Vec<Duration> = (0..9)
        .map(|_| {
            let start = Instant::now();
            black_box(render_report(&report, &[]));
            start.elapsed()
        })
        .collect();
    t.sort();
    println!(
        "/metrics at {TARGETS} targets: median render {:?} ({:.0} ns per sample); {bytes} B, {lines} samples, {} B per target",
        t[4],
        t[4].as_nanos() as f64 / lines as f64,
        bytes / TARGETS
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
