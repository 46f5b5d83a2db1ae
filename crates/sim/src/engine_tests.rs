//! Engine behaviour checked against hand-computed expectations.

use crate::Sim;
use crate::config::SimConfig;
use crate::event::FinishReason;

/// One lone request: its latencies follow from the step-cost formula by hand.
#[test]
fn lone_request_timing_follows_the_cost_model() {
    let mut c = SimConfig::default();
    c.arrivals.rate = 0.0001;
    let w = &mut c.workload;
    (w.prompt_median, w.prompt_sigma, w.output_median, w.output_sigma) = (100.0, 0.0, 10.0, 0.0);
    (w.abort_fraction, w.client_timeout_s, w.shared_prefix_fraction) = (0.0, 0.0, 0.0);
    let mut sim = Sim::new(&c, true).expect("valid");
    sim.advance_to(1e9);
    let f = sim.finished().first().expect("one request finished").clone();
    let e = &c.engine;
    let prefill = e.step_base_s + 100.0 * e.prefill_per_token_s + 100.0 * e.kv_per_token_s;
    let decode: f64 = (1..10).map(|g| e.step_base_s + e.decode_per_seq_s + f64::from(100 + g) * e.kv_per_token_s).sum();
    assert_eq!((f.prompt, f.output, f.reason), (100, 10, FinishReason::Stop));
    assert!((f.ttft.expect("first token") - (c.workload.frontend_overhead_s + prefill)).abs() < 1e-9);
    assert!((f.queue).abs() < 1e-12, "an idle engine schedules at once");
    assert!((f.prefill - prefill).abs() < 1e-9);
    assert!((f.decode - decode).abs() < 1e-9);
    assert!((f.tpot - decode / 9.0).abs() < 1e-9);
    assert!((f.e2e - (c.workload.frontend_overhead_s + prefill + decode)).abs() < 1e-9);
}

/// A pool that holds barely two long requests forces preemption by recompute, and
/// every request still completes with all its tokens.
#[test]
fn tight_pool_preempts_and_recomputes() {
    let mut c = SimConfig::default();
    c.engine.max_model_len = 2048;
    c.engine.num_gpu_blocks = 200;
    c.arrivals.rate = 20.0;
    let w = &mut c.workload;
    (w.prompt_median, w.prompt_sigma, w.output_median, w.output_sigma, w.max_tokens) = (600.0, 0.0, 500.0, 0.0, 1000);
    (w.abort_fraction, w.client_timeout_s) = (0.0, 0.0);
    let mut sim = Sim::new(&c, true).expect("valid");
    sim.advance_to(60.0);
    let body = sim.render();
    let exp = goodput_core::parse::parse(body.as_bytes(), &goodput_core::parse::Limits::default()).expect("parses");
    let preemptions: f64 = exp.samples.iter().filter(|s| s.name == "vllm:num_preemptions_total").map(|s| s.value).sum();
    assert!(preemptions > 0.0, "the tight pool preempted");
    assert!(sim.finished().len() > 10);
    assert!(sim.finished().iter().all(|f| f.output == 500 && f.reason == FinishReason::Stop));
}
