//! The daemon's whole per-scrape path — parse, adapt, the cardinality check
//! (`scrape::ingest`) and `TargetWindows::push` (layout extract and column encode) — next
//! to the parser alone, on three bodies (docs/benchmarks.md#ingest-parse--adapt--push):
//!
//! - `sim_vllm_45KB`: the simulator's vLLM scrape after 10 minutes of the steady profile
//!   (seed 1), the body docs/footprint.md measures;
//! - `real_<file>`: a real engine scrape from the fixtures (`$GOODPUT_FIXTURES`, or
//!   shared/ beside the checkout; skipped when neither exists);
//! - `vllm_like_20MB`: the parser benchmark's generated body (23 models × 8 engines).
//!
//! Each iteration pushes into a store that already holds earlier scrapes of the same body,
//! at a later time, as the daemon does every interval.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use goodput::adapt::EngineHint;
use goodput::config::Cardinality;
use goodput::parse::{Limits, parse, vllm_like_exposition};
use goodput::scrape::ingest;
use goodput::window::TargetWindows;
use goodput_sim::{Profile, Sim, SimConfig};

/// The real scrape measured: the largest vLLM V1 one (a Dynamo worker, 4 ranks' worth of
/// families).
const REAL: &str = "vllm-v1-0.13ish-dynamo-worker-full.prom";

fn sim_scrape() -> String {
    let mut sim = Sim::new(&SimConfig::profile(Profile::Steady), false).expect("the steady profile is valid");
    sim.advance_to(600.0);
    sim.render()
}

fn real_scrape() -> Option<String> {
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/real");
    let dir = std::env::var_os("GOODPUT_FIXTURES").map(PathBuf::from).unwrap_or(beside);
    std::fs::read_to_string(dir.join(REAL)).ok()
}

fn bench(c: &mut Criterion) {
    let mut bodies = vec![("sim_vllm_45KB".to_string(), sim_scrape())];
    match real_scrape() {
        Some(b) => bodies.push((format!("real_{}", REAL.trim_end_matches(".prom")), b)),
        None => eprintln!("ingest bench: {REAL} not found (set GOODPUT_FIXTURES); skipping it"),
    }
    bodies.push(("vllm_like_20MB".to_string(), vllm_like_exposition(20 << 20, 8, 1)));

    // The daemon's default parse limits; cardinality unbounded so the 20 MB body (184
    // model × engine pairs) is stored rather than refused.
    let limits = Limits::default();
    let cardinality = Cardinality { max_models: usize::MAX, max_series: usize::MAX };
    let mut g = c.benchmark_group("ingest");
    for (name, body) in &bodies {
        let big = body.len() > 1 << 20;
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.sample_size(if big { 20 } else { 100 });
        g.measurement_time(Duration::from_secs(if big { 10 } else { 5 }));
        g.bench_function(format!("{name}/parse"), |b| {
            b.iter(|| black_box(parse(black_box(body.as_bytes()), &limits).expect("parses").samples.len()))
        });
        let mut store = TargetWindows::new(Duration::from_secs(60));
        let mut t_ms = 0i64;
        g.bench_function(format!("{name}/whole_path"), |b| {
            b.iter(|| {
                let snapshot = ingest(black_box(body.as_bytes()), &limits, cardinality, EngineHint::Auto, "t")
                    .expect("ingests");
                t_ms += 1000;
                store.push(t_ms, Arc::new(snapshot));
                black_box(store.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
