//! The status page at `/` with 100 targets and a full history ring: rendering it, and
//! recording one report into the history (docs/status-page.md, docs/benchmarks.md).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use goodput::serve::page::{DEFAULT_RING_LEN, StatusPage, sample};

fn bench(c: &mut Criterion) {
    let page = StatusPage::new(sample::facts(), DEFAULT_RING_LEN);
    let mut report = sample::report(100, 0);
    for step in 0..DEFAULT_RING_LEN {
        report = sample::report(100, step);
        page.record(&report);
    }
    let size = page.html(&report).len();
    let mut g = c.benchmark_group("status_page");
    g.throughput(Throughput::Bytes(size as u64));
    g.sample_size(30);
    g.bench_function("render_100_targets", |b| b.iter(|| black_box(page.html(black_box(&report)).len())));
    g.throughput(Throughput::Elements(100));
    g.bench_function("record_100_targets", |b| b.iter(|| page.record(black_box(&report))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
