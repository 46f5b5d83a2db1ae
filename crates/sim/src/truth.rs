//! Per-request ground truth as JSON lines (docs/simulator.md#ground-truth):
//! `requests.jsonl` for finished requests and `inflight.jsonl` for those still running
//! when the recording stopped.
//!
//! Latencies are the very `f64`s the histograms observed, so bucket counts recomputed
//! from this file match the scrape exactly; instants are unix seconds. Live mode
//! (`--truth FILE`) writes the same lines as requests finish, plus who sent each request.

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use super::client::Fault;
use super::cluster::InFlight;
use super::error::RunError;
use super::event::Finished;

#[derive(Serialize)]
struct FinishedLine<'a> {
    target: &'a str,
    id: u64,
    /// None only for a request rejected before any engine saw it (an injected HTTP error).
    engine: Option<u32>,
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
    /// Live mode only: `client` (the OpenAI API) or `sim` (generated load).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    /// The response's `id` (`chatcmpl-…`, `cmpl-…`), for client requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    /// The fault injected into this request, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    fault: Option<&'static str>,
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
        push_line(out, &finished_line(target, f, &|t| start_s + t, false, None));
    }
}

/// Who sent a request, for the live ground truth.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    pub request_id: &'a str,
    pub fault: Option<Fault>,
}

fn finished_line<'a>(
    target: &'a str,
    f: &Finished,
    unix: &dyn Fn(f64) -> f64,
    live: bool,
    client: Option<Origin<'a>>,
) -> FinishedLine<'a> {
    FinishedLine {
        target,
        id: f.id,
        engine: Some(f.engine),
        arrival_s: unix(f.arrival),
        first_token_s: f.first_token.map(unix),
        finish_s: unix(f.finish),
        prompt_tokens: f.prompt,
        output_tokens: f.output,
        ttft_s: f.ttft,
        tpot_s: f.tpot,
        e2e_s: f.e2e,
        queue_s: f.queue,
        prefill_s: f.prefill,
        decode_s: f.decode,
        finish_reason: f.reason.as_str(),
        source: live.then_some(if client.is_some() { "client" } else { "sim" }),
        request_id: client.map(|c| c.request_id),
        fault: client.and_then(|c| c.fault).map(Fault::as_str),
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

/// Live mode's `requests.jsonl`: one line per finished request, written (unbuffered) the
/// moment the engine finishes it, so a reader never sees half a line from a live run.
/// Instants are wall-clock unix seconds; latencies are model seconds, the histograms'
/// values, which equal wall seconds at `--speed 1`.
pub struct LiveTruth {
    file: std::fs::File,
    target: String,
    failed: bool,
}

impl LiveTruth {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path, target: &str) -> Result<LiveTruth, RunError> {
        let file =
            std::fs::File::create(path).map_err(|error| RunError::TruthFile { path: path.to_path_buf(), error })?;
        Ok(LiveTruth { file, target: target.to_string(), failed: false })
    }

    /// A request the engine finished; `client` when an API client sent it.
    pub fn finished(&mut self, f: &Finished, unix: &dyn Fn(f64) -> f64, client: Option<Origin<'_>>) {
        let mut line = String::new();
        push_line(&mut line, &finished_line(&self.target, f, unix, true, client));
        self.write(&line);
    }

    /// A client request rejected at the frontend (an injected HTTP error) at unix `at`.
    pub fn rejected(&mut self, id: u64, prompt: u32, at: f64, client: Origin<'_>) {
        let mut line = String::new();
        let l = FinishedLine {
            target: &self.target,
            id,
            engine: None,
            arrival_s: at,
            first_token_s: None,
            finish_s: at,
            prompt_tokens: prompt,
            output_tokens: 0,
            ttft_s: None,
            tpot_s: 0.0,
            e2e_s: 0.0,
            queue_s: 0.0,
            prefill_s: 0.0,
            decode_s: 0.0,
            finish_reason: super::event::FinishReason::Error.as_str(),
            source: Some("client"),
            request_id: Some(client.request_id),
            fault: client.fault.map(Fault::as_str),
        };
        push_line(&mut line, &l);
        self.write(&line);
    }

    fn write(&mut self, line: &str) {
        if let Err(e) = self.file.write_all(line.as_bytes())
            && !self.failed
        {
            // Once: a full disk should not flood the log, nor stop the engine.
            self.failed = true;
            tracing::warn!(error = %e, "cannot write the live ground truth; later lines are lost too");
        }
    }
}
