//! The daemon's whole per-scrape path — parse, adapt, the cardinality check
//! (`scrape::ingest`) and `TargetWindows::push` (layout extract and column encode) — next
//! to the parser alone, on three bodies (docs/benchmarks.md#ingest-parse--adapt--push):
//!
//! - `sim_vllm_45KB`: the simulator's vLLM scrape after 10 minutes of the steady profile
//!   (seed 1), the body docs/footprint.md measures;
//! - `real_<file>`: a real engine scrape from the repository's fixtures (tests/fixtures/real);
//! - `vllm_like_20MB`: the parser benchmark's generated body (23 models × 8 engines).
//!
//! Each iteration pushes into a store that already holds earlier scrapes of the same body,
//! at a later time, as the daemon does every interval. `whole_path` adapts every scrape
//! (`scrape::ingest`, then `TargetWindows::push`); `whole_path_reused` is the daemon's path
//! since the adapter is skipped for a scrape with the previous one's series
//! (`scrape::ingest_reusing` and `TargetState::observe_scraped`).
//!
//! Time is the benchmark thread's on-CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time:
//! the machine is shared, and under load wall time measures the other processes
//! (docs/benchmarks.md). `GOODPUT_BENCH_WALL=1` measures wall time instead.

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{Criterion, Throughput};
use goodput::adapt::EngineHint;
use goodput::config::Cardinality;
use goodput::parse::{Limits, parse, vllm_like_exposition};
use goodput::scrape::{Reuse, ingest, ingest_reusing};
use goodput::target::TargetState;
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

fn real_scrape() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real").join(REAL);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn bench(c: &mut Criterion<Clock>) {
    let bodies = vec![
        ("sim_vllm_45KB".to_string(), sim_scrape()),
        (format!("real_{}", REAL.trim_end_matches(".prom")), real_scrape()),
        ("vllm_like_20MB".to_string(), vllm_like_exposition(20 << 20, 8, 1)),
    ];

    // The daemon's default parse limits; cardinality unbounded so the 20 MB body (184
    // model × engine pairs) is stored rather than refused.
    let limits = Limits::default();
    let cardinality = Cardinality { max_models: usize::MAX, max_series: usize::MAX };
    let mut g = c.benchmark_group("ingest");
    for (name, body) in &bodies {
        let big = body.len() > 1 << 20;
        g.throughput(Throughput::BytesDecimal(body.len() as u64));
        g.sample_size(if big { 20 } else { 100 });
        g.measurement_time(Duration::from_secs(if big { 10 } else { 5 }));
        g.bench_function(format!("{name}/parse"), |b| {
            b.iter(|| black_box(parse(black_box(body.as_bytes()), &limits).expect("parses").samples.len()))
        });
        let mut store = TargetWindows::new(Duration::from_secs(60));
        let mut t_ms = 0i64;
        g.bench_function(format!("{name}/whole_path"), |b| {
            b.iter(|| {
                let snapshot =
                    ingest(black_box(body.as_bytes()), &limits, cardinality, EngineHint::Auto, "t").expect("ingests");
                t_ms += 1000;
                store.push(t_ms, Arc::new(snapshot));
                black_box(store.len())
            })
        });
        let mut state = TargetState::new(Duration::from_secs(60));
        let mut reuse = Reuse::default();
        g.bench_function(format!("{name}/whole_path_reused"), |b| {
            b.iter(|| {
                let scraped =
                    ingest_reusing(black_box(body.as_bytes()), &limits, cardinality, EngineHint::Auto, "t", &mut reuse)
                        .expect("ingests");
                t_ms += 1000;
                state.observe_scraped(t_ms, None, Ok(scraped));
                if reuse.wants_layout() {
                    let w = &state.windows;
                    reuse.adopt(w.point_at(w.seq_range().end - 1).expect("just stored").1);
                }
                black_box(state.windows.len())
            })
        });
    }
    g.finish();
}

fn main() {
    let wall = std::env::var_os("GOODPUT_BENCH_WALL").is_some_and(|v| v == "1");
    let mut c = Criterion::default().with_measurement(Clock { wall }).configure_from_args();
    bench(&mut c);
    c.final_summary();
}

/// Nanoseconds of the calling thread's CPU time, or of wall time.
struct Clock {
    wall: bool,
}

impl Clock {
    fn now_ns(&self) -> u64 {
        if self.wall {
            static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
            return ORIGIN.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64;
        }
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; the clock id is a Linux constant.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }
}

impl Measurement for Clock {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        self.now_ns()
    }
    fn end(&self, start: u64) -> u64 {
        self.now_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &NanosFormatter
    }
}

struct NanosFormatter;

impl ValueFormatter for NanosFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = match typical {
            t if t < 1e3 => (1.0, "ns"),
            t if t < 1e6 => (1e3, "µs"),
            t if t < 1e9 => (1e6, "ms"),
            _ => (1e9, "s"),
        };
        values.iter_mut().for_each(|v| *v /= div);
        unit
    }

    fn scale_throughputs(&self, _typical: f64, throughput: &Throughput, values: &mut [f64]) -> &'static str {
        let (units, unit) = match *throughput {
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) => (n as f64 / 1e6, "MB/s"),
            Throughput::Elements(n) | Throughput::ElementsAndBytes { elements: n, .. } => (n as f64, "elem/s"),
            Throughput::Bits(n) => (n as f64 / 1e6, "Mbit/s"),
        };
        // values are nanoseconds per iteration.
        values.iter_mut().for_each(|v| *v = units / (*v / 1e9));
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
