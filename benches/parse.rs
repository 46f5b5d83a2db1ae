//! Parser throughput on a generated ~20 MB vLLM-like exposition (see docs/benchmarks.md).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use goodput::parse::{Limits, parse, vllm_like_exposition};

fn bench(c: &mut Criterion) {
    let body = vllm_like_exposition(20 << 20, 8, 1);
    let limits = Limits::unlimited();
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.sample_size(30);
    g.bench_function("vllm_like_20MB", |b| {
        b.iter(|| {
            let e = parse(black_box(body.as_bytes()), &limits).expect("generated body parses");
            black_box(e.samples.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
