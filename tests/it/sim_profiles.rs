//! What the seeds describe: past saturation, output tokens/s keeps rising or
//! plateaus while the share of requests meeting a TTFT SLO falls, KV usage crosses 90 %,
//! preemptions appear and the queue grows. Under `steady` none of this happens.
//! Everything is read back from the recorded scrapes, as goodput would see them.

use crate::sim_common;

use goodput_sim::config::{Profile, SimConfig};
use sim_common::{Parsed, record};

/// One scrape reduced to what the checks need.
struct Point {
    t: f64,
    generated: f64,
    ttft_ok: f64,
    ttft_n: f64,
    kv: f64,
    waiting: f64,
    preemptions: f64,
}

fn points(cfg: &SimConfig, secs: u64) -> Vec<Point> {
    let run = record(cfg, secs, 5);
    run.scrapes
        .iter()
        .map(|(ms, body)| {
            let s = Parsed::new(body);
            Point {
                t: *ms as f64 / 1000.0,
                generated: s.sum("vllm:generation_tokens_total", &[]),
                // 0.5 s is a vLLM TTFT bucket bound, so this share is exact.
                ttft_ok: s.sum("vllm:time_to_first_token_seconds_bucket", &[("le", "0.5")]),
                ttft_n: s.sum("vllm:time_to_first_token_seconds_count", &[]),
                kv: s.sum("vllm:kv_cache_usage_perc", &[]),
                waiting: s.sum("vllm:num_requests_waiting", &[]),
                preemptions: s.sum("vllm:num_preemptions_total", &[]),
            }
        })
        .collect()
}

/// Output tokens/s and TTFT-SLO share between two points given as fractions of the run.
fn span(p: &[Point], from: f64, to: f64) -> (f64, f64) {
    let n = (p.len() - 1) as f64;
    let (a, b) = (&p[(from * n) as usize], &p[(to * n) as usize]);
    let tps = (b.generated - a.generated) / (b.t - a.t);
    let share = (b.ttft_ok - a.ttft_ok) / (b.ttft_n - a.ttft_n);
    (tps, share)
}

fn thirds(p: &[Point]) -> [(f64, f64); 3] {
    [0.0, 1.0, 2.0].map(|k| span(p, k / 3.0, (k + 1.0) / 3.0))
}

fn max(p: &[Point], f: impl Fn(&Point) -> f64) -> f64 {
    p.iter().map(f).fold(f64::NEG_INFINITY, f64::max)
}

#[test]
fn ramp_saturates_the_way_real_engines_do() {
    for seed in [1, 2, 3] {
        let mut cfg = SimConfig::profile(Profile::Ramp);
        cfg.seed = seed;
        let p = points(&cfg, 300);
        let [first, middle, last] = thirds(&p);
        assert!(last.0 > first.0, "seed {seed}: throughput still above the unloaded third: {first:?} {last:?}");
        assert!(last.0 > 0.75 * middle.0, "seed {seed}: throughput plateaus, no collapse: {middle:?} {last:?}");
        let unloaded = span(&p, 0.0, 0.25);
        assert!(unloaded.1 >= 0.99, "seed {seed}: TTFT SLO met while unloaded: {unloaded:?}");
        assert!(last.1 < 0.5, "seed {seed}: TTFT SLO attainment collapses: {last:?}");
        assert!(max(&p, |x| x.kv) > 0.9, "seed {seed}: KV usage crosses 90%");
        let end = p.last().expect("points");
        assert!(end.preemptions > 0.0, "seed {seed}: preemptions appear");
        let early_queue = max(&p[..p.len() / 3], |x| x.waiting);
        let late_queue = p[2 * p.len() / 3..].iter().map(|x| x.waiting).sum::<f64>() / (p.len() / 3) as f64;
        assert!(late_queue > 10.0 * (early_queue + 1.0), "seed {seed}: queue grows: {early_queue} -> {late_queue}");
    }
}

#[test]
fn steady_stays_healthy() {
    for seed in [1, 2, 3] {
        let mut cfg = SimConfig::profile(Profile::Steady);
        cfg.seed = seed;
        let p = points(&cfg, 300);
        let t = thirds(&p);
        for (tps, share) in t {
            assert!(share >= 0.99, "seed {seed}: TTFT SLO attainment {share}");
            assert!((tps - t[0].0).abs() < 0.3 * t[0].0, "seed {seed}: flat throughput {t:?}");
        }
        assert!(max(&p, |x| x.kv) < 0.85, "seed {seed}: KV stays below the high band");
        assert_eq!(p.last().map(|x| x.preemptions), Some(0.0), "seed {seed}: no preemptions");
        assert!(max(&p, |x| x.waiting) <= 5.0, "seed {seed}: no queue builds up");
    }
}

#[test]
fn bursts_cause_transient_overload_that_recovers() {
    let cfg = SimConfig::profile(Profile::Burst);
    let period = cfg.arrivals.period_s;
    let p = points(&cfg, 180);
    // Phase of each scrape within the burst cycle.
    let start = cfg.start_unix_s as f64;
    let phase = |x: &Point| (x.t - start).rem_euclid(period);
    let in_burst: Vec<&Point> = p.iter().filter(|x| phase(x) < 15.0).collect();
    let calm: Vec<&Point> = p.iter().filter(|x| phase(x) > 40.0).collect();
    assert!(!in_burst.is_empty() && !calm.is_empty());
    let peak_kv = in_burst.iter().map(|x| x.kv).fold(0.0, f64::max);
    let calm_kv = calm.iter().map(|x| x.kv).fold(0.0, f64::max);
    assert!(peak_kv > 0.9, "bursts fill the KV cache: {peak_kv}");
    assert!(calm_kv < 0.75, "and it drains between bursts: {calm_kv}");
    assert!(calm.iter().all(|x| x.waiting <= 3.0), "no queue left between bursts");
    // TTFT SLO attainment dips right after bursts and is perfect between them.
    let share = |a: &Point, b: &Point| (b.ttft_ok - a.ttft_ok) / (b.ttft_n - a.ttft_n);
    let dips = p.windows(2).filter(|w| phase(&w[1]) < 15.0).map(|w| share(&w[0], &w[1]));
    assert!(dips.fold(1.0, f64::min) < 0.5, "bursts hurt TTFT");
    let quiet = p.windows(2).filter(|w| phase(&w[0]) > 40.0).map(|w| share(&w[0], &w[1]));
    assert!(quiet.fold(1.0, f64::min) >= 0.99, "calm stretches meet the SLO");
}
