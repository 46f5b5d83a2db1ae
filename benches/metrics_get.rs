//! A GET of /metrics with 100 targets, before and after the per-tick cache
//! (crates/daemon/src/serve/cache.rs, docs/benchmarks.md): `render` is what every GET did
//! before (render the whole report), `cached` what it does now (render the live counters and
//! hand out the cached bytes), plain and gzip; `first_get_*` the once-per-tick cost, paid by
//! the first GET after a tick. The bench
//! prints the ratio of the medians it measured, so the two sides share one run's load.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use goodput::serve::cache::Rendered;
use goodput::serve::page::sample;
use goodput::serve::server::ConnStats;
use goodput::serve::{render_live, render_metrics, render_report, render_report_chunks};
use goodput::tap::metrics::TapMetrics;

const TARGETS: usize = 100;

/// The median of `runs` timed calls of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut t: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    t.sort();
    t[runs / 2]
}

fn bench(c: &mut Criterion) {
    let report = sample::report(TARGETS, 0);
    let http = ConnStats::default();
    let taps = TapMetrics::default();
    let rendered = Rendered::of_text(render_report(&report, &[]));
    let live = || render_live(None, &http, None, &taps, &[]);
    let plain_len = rendered.plain(live()).len();
    let gzip_len = rendered.gzip(&live()).len();

    let mut g = c.benchmark_group("metrics_get_100_targets");
    g.sample_size(20);
    g.bench_function("render", |b| {
        b.iter(|| black_box(render_metrics(black_box(&report), None, &http, None, &[])).len())
    });
    g.bench_function("cached", |b| b.iter(|| black_box(rendered.plain(live())).len()));
    g.bench_function("cached_gzip", |b| b.iter(|| black_box(rendered.gzip(&live())).len()));
    g.bench_function("first_get_render", |b| b.iter(|| black_box(render_report_chunks(black_box(&report), &[]))));
    let text = render_report(&report, &[]);
    g.bench_function("first_gzip_get_deflate", |b| {
        b.iter(|| {
            let r = Rendered::of_text(text.clone());
            r.prepare(true);
            black_box(r.has_gzip())
        })
    });
    g.finish();

    // The ratio within one run: the medians of the two sides, interleaved in rounds.
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        before.push(median(5, || drop(black_box(render_metrics(&report, None, &http, None, &[])))));
        after.push(median(200, || drop(black_box(rendered.plain(live())))));
    }
    before.sort();
    after.sort();
    let (b, a) = (before[2], after[2]);
    println!(
        "metrics GET at {TARGETS} targets: render {b:?}, cached {a:?}, {:.0}x; body {plain_len} B, gzip {gzip_len} B ({:.1}x smaller)",
        b.as_secs_f64() / a.as_secs_f64(),
        plain_len as f64 / gzip_len as f64
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
