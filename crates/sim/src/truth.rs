//! Per-request ground truth as JSON lines (docs/simulator.md#ground-truth):
//! `requests.jsonl` for finished requests and `inflight.jsonl` for those still running
//! when the recording stopped.
//!
//! Latencies are the very `f64`s the histograms observed, so bucket counts recomputed
//! from this file match the scrape exactly; instants are unix seconds.

use serde::Serialize;

use super::cluster::InFlight;
use super::event::Finished;

#[derive(Serialize)]
struct FinishedLine<'a> {
    target: &'a str,
    id: u64,
    engine: u32,
    arrival_s: f64,
    first_token_s: Option<f64>,
    finish_s: f64,
    prompt_tokens: u32,
    output_tokens: u32,
    ttft_s: Option<f64>,
    tpot_s: f64,
    e2e_s: f64,
    queue_s: f64,
    prefill_s: f64,
    decode_s: f64,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct InFlightLine<'a> {
    target: &'a str,
    id: u64,
    engine: u32,
    arrival_s: f64,
    first_token_s: Option<f64>,
    /// Equal to what the TTFT histogram observed, when a first token came out.
    ttft_s: Option<f64>,
    prompt_tokens: u32,
    /// Tokens generated so far.
    output_tokens: u32,
}

/// Appends one line per finished request.
pub fn write_finished(out: &mut String, target: &str, start_s: f64, reqs: &[Finished]) {
    for f in reqs {
        let line = FinishedLine {
            target,
            id: f.id,
            engine: f.engine,
            arrival_s: start_s + f.arrival,
            first_token_s: f.first_token.map(|t| start_s + t),
            finish_s: start_s + f.finish,
            prompt_tokens: f.prompt,
            output_tokens: f.output,
            ttft_s: f.ttft,
            tpot_s: f.tpot,
            e2e_s: f.e2e,
            queue_s: f.queue,
            prefill_s: f.prefill,
            decode_s: f.decode,
            finish_reason: f.reason.as_str(),
        };
        push_line(out, &line);
    }
}

pub fn write_in_flight(out: &mut String, target: &str, start_s: f64, reqs: &[InFlight]) {
    for r in reqs {
        let line = InFlightLine {
            target,
            id: r.id,
            engine: r.engine,
            arrival_s: start_s + r.arrival,
            first_token_s: r.first_token.map(|t| start_s + t),
            ttft_s: r.first_token.map(|t| t - r.arrival),
            prompt_tokens: r.prompt,
            output_tokens: r.output,
        };
        push_line(out, &line);
    }
}

fn push_line<T: Serialize>(out: &mut String, v: &T) {
    // Serializing plain structs of numbers and strings cannot fail.
    if let Ok(s) = serde_json::to_string(v) {
        out.push_str(&s);
        out.push('\n');
    }
}
