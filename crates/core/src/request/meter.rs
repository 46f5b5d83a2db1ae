//! The measurement of one request as its bytes pass through the tap
//! (docs/request-path.md, "Definitions").
//!
//! The tap feeds a [`Meter`] what it forwards: the request body (up to a cap), the response
//! head, each piece of the response body with the monotonic time it arrived, and how the
//! exchange ended. The meter never fails: what it cannot read it counts in
//! [`Meter::faults`], and the request is still recorded from what was read.
//!
//! Definitions, with `t_req` the moment the request arrived:
//! - a *token-bearing* event carries output (text, reasoning, tool calls, token ids, a TGI
//!   token) or raises the cumulative `usage.completion_tokens`; the role-only first chunk,
//!   comments, keep-alives, the finish-only chunk and the usage-only chunk do not;
//! - TTFT = first token-bearing event − `t_req`; E2E = `[DONE]` (or the end of the body) −
//!   `t_req`;
//! - N = the final `usage.completion_tokens` (or TGI's `generated_tokens`), exact; without
//!   either, the sum of per-event counts (cumulative usage, `token_ids`, one per TGI event,
//!   SGLang's `meta_info.completion_tokens`), exact only if every event's count was;
//!   otherwise one per event, a lower bound;
//! - TPOT = (t_last − t_first) / (N − 1), over at least two token-bearing events of one
//!   choice;
//! - ITL: one gap per token-bearing event after the first, with its token count.

use super::attribute::model_at_entry;
use super::body::{self, MAX_REQUEST_BODY};
use super::event::{self, Event};
use super::record::{self, EngineTimes, ItlGap, RequestRecord, Source, Status, TokenCount};
use super::route::Route;
use super::sse::Decoder;

/// Largest non-streaming response body the meter reads for its `usage`; larger ones are
/// recorded with E2E and status only.
pub const MAX_RESPONSE_BODY: usize = 1 << 20;

/// Most ITL gaps kept for one request; later events still count toward N and TPOT.
pub const MAX_ITL_GAPS: usize = 1 << 15;

/// Why a request passed through without a record (`llm_slo_tap_requests_unmeasured_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unmeasured {
    /// Not a generation route (docs/request-path.md, "What is measured").
    Route,
    /// A 2xx response with a `Content-Encoding` (gzip, …): the tap does not decompress.
    ContentEncoding,
    /// A 2xx response that is neither `text/event-stream` nor JSON.
    ContentType,
    /// A protocol upgrade (WebSocket): relayed as bytes.
    Upgrade,
    /// The measurement itself failed (a bug); the request was still served.
    Fault,
}

impl Unmeasured {
    pub const ALL: [Unmeasured; 5] = [
        Unmeasured::Route,
        Unmeasured::ContentEncoding,
        Unmeasured::ContentType,
        Unmeasured::Upgrade,
        Unmeasured::Fault,
    ];

    /// The `reason` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Unmeasured::Route => "route",
            Unmeasured::ContentEncoding => "content_encoding",
            Unmeasured::ContentType => "content_type",
            Unmeasured::Upgrade => "upgrade",
            Unmeasured::Fault => "measurement_fault",
        }
    }
}

/// How the exchange ended, as the tap saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The response body ended normally.
    Eof,
    /// The client went away first (the response body was dropped unfinished, or the
    /// request body failed).
    ClientAbort,
    /// The upstream failed: no connection, no response, or an error mid-body.
    UpstreamReset,
}

/// What the response head said about the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No response head yet.
    Waiting,
    HttpError(u16),
    Sse,
    Json,
}

/// One request's measurement in progress.
#[derive(Debug)]
pub struct Meter {
    route: Route,
    t_req: f64,
    request: Vec<u8>,
    request_overflow: bool,
    model: Option<String>,
    /// The first response id the stream or body named.
    request_id: Option<String>,
    /// The engine's own times for the request, from the last event or body that had them.
    engine: Option<EngineTimes>,
    mode: Mode,
    sse: Decoder,
    json: Vec<u8>,
    json_overflow: bool,
    tokens: Tokens,
    error: bool,
    t_done: Option<f64>,
    faults: u32,
}

/// Token accounting over the events of a stream.
#[derive(Debug, Default)]
struct Tokens {
    t_first: Option<f64>,
    t_last: f64,
    events: u32,
    counted: u64,
    counted_exact: bool,
    /// The last `usage.completion_tokens` of a chunk with choices (continuous usage).
    cumulative: Option<u64>,
    /// The last `meta_info.completion_tokens` (SGLang).
    meta: Option<u64>,
    /// The last `tokens_predicted` (llama.cpp's native route).
    predicted: Option<u64>,
    /// The last `usage.completion_tokens` seen anywhere, and TGI's `generated_tokens`.
    usage: Option<u64>,
    prompt: Option<u64>,
    itl: Vec<ItlGap>,
    /// (index, finished) of each choice seen.
    choices: Vec<(u32, bool)>,
    /// A TGI or SGLang event said the generation finished.
    finished: bool,
}

impl Meter {
    /// A measurement of a request on `route` that arrived at `t_req` (seconds on the
    /// caller's monotonic clock).
    pub fn new(route: Route, t_req: f64) -> Meter {
        Meter {
            route,
            t_req,
            request: Vec::new(),
            request_overflow: false,
            model: None,
            request_id: None,
            engine: None,
            mode: Mode::Waiting,
            sse: Decoder::default(),
            json: Vec::new(),
            json_overflow: false,
            tokens: Tokens { counted_exact: true, ..Tokens::default() },
            error: false,
            t_done: None,
            faults: 0,
        }
    }

    pub fn route(&self) -> Route {
        self.route
    }

    /// Things the meter could not read (an event that is not JSON, a cut event); each one
    /// is a `llm_slo_tap_measurement_faults_total`.
    pub fn faults(&self) -> u32 {
        self.faults
    }

    /// A piece of the request body. Past [`MAX_REQUEST_BODY`] the body is not read at all.
    pub fn request_body(&mut self, bytes: &[u8]) {
        if self.request_overflow {
            return;
        }
        if self.request.len() + bytes.len() > MAX_REQUEST_BODY {
            self.request_overflow = true;
            self.request = Vec::new();
            return;
        }
        self.request.extend_from_slice(bytes);
    }

    /// The request body is complete.
    pub fn request_end(&mut self) {
        if self.request_overflow || self.request.is_empty() {
            return;
        }
        match body::parse(&self.request) {
            Some(info) => {
                self.model = info.model.filter(|m| !m.is_empty()).map(|m| model_at_entry(&m)).or(self.model.take())
            }
            None => self.faults += 1,
        }
        self.request = Vec::new();
    }

    /// The response head. `Err` when a 2xx body is one the meter cannot read; the caller
    /// then stops feeding it and counts the reason.
    pub fn response_head(
        &mut self,
        status: u16,
        content_type: Option<&str>,
        content_encoding: Option<&str>,
    ) -> Result<(), Unmeasured> {
        if !(200..300).contains(&status) {
            self.mode = Mode::HttpError(status);
            return Ok(());
        }
        if content_encoding.is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity")) {
            return Err(Unmeasured::ContentEncoding);
        }
        let media = content_type.and_then(|c| c.split(';').next()).map(|m| m.trim().to_ascii_lowercase());
        self.mode = match media.as_deref() {
            Some("text/event-stream") => Mode::Sse,
            Some(m) if m == "application/json" || m.ends_with("+json") => Mode::Json,
            _ => return Err(Unmeasured::ContentType),
        };
        Ok(())
    }

    /// A piece of the response body, received at `t`.
    pub fn response_body(&mut self, bytes: &[u8], t: f64) {
        match self.mode {
            Mode::Sse => {
                let Meter { sse, tokens, error, t_done, faults, model, request_id, engine, .. } = self;
                sse.feed(bytes, |block| {
                    let Some(data) = block.data else { return };
                    if block.overflow {
                        *faults += 1;
                        return;
                    }
                    if data.trim_ascii() == b"[DONE]" {
                        t_done.get_or_insert(t);
                        return;
                    }
                    match event::parse(data) {
                        Some(ev) => {
                            *error |= ev.is_error();
                            if model.is_none() {
                                *model = ev.model.as_deref().filter(|m| !m.is_empty()).map(model_at_entry);
                            }
                            if request_id.is_none() {
                                *request_id = ev.id.as_deref().and_then(record::request_id);
                            }
                            *engine = engine_times(&ev).or(engine.take());
                            tokens.event(&ev, t);
                        }
                        None => *faults += 1,
                    }
                });
            }
            Mode::Json if !self.json_overflow => {
                if self.json.len() + bytes.len() > MAX_RESPONSE_BODY {
                    self.json_overflow = true;
                    self.json = Vec::new();
                } else {
                    self.json.extend_from_slice(bytes);
                }
            }
            Mode::Json | Mode::HttpError(_) | Mode::Waiting => {}
        }
    }

    /// The record of the request, which ended as `end` at `t`; `finished_unix` is the
    /// wall-clock time of the end, `target` the configured target's name.
    pub fn finish(mut self, end: End, t: f64, finished_unix: f64, target: &str) -> RequestRecord {
        // A body whose end was never seen (the upstream request failed before it was sent
        // whole) still names its model when what was read is the whole JSON text.
        if !self.request_overflow
            && !self.request.is_empty()
            && let Some(info) = body::parse(&self.request)
        {
            self.model = info.model.filter(|m| !m.is_empty()).map(|m| model_at_entry(&m)).or(self.model.take());
        }
        let mut ttft_s = None;
        let mut tpot_s = None;
        let mut output_tokens = None;
        let mut t_end = t;
        let status = match self.mode {
            Mode::Waiting => match end {
                End::ClientAbort => Status::ClientAbort,
                End::Eof | End::UpstreamReset => Status::UpstreamReset,
            },
            Mode::HttpError(code) => Status::HttpError(code),
            Mode::Json => {
                if end == End::Eof && !self.json_overflow && !self.json.is_empty() {
                    match event::parse(&self.json) {
                        Some(ev) => {
                            self.error |= ev.is_error();
                            if self.model.is_none() {
                                self.model = ev.model.as_deref().map(model_at_entry);
                            }
                            self.request_id = ev.id.as_deref().and_then(record::request_id);
                            self.engine = engine_times(&ev);
                            self.tokens.body(&ev);
                            output_tokens = self.tokens.usage.map(|value| count(value, true));
                        }
                        None => self.faults += 1,
                    }
                }
                match end {
                    End::Eof if self.error => Status::StreamError,
                    End::Eof => Status::Ok,
                    End::ClientAbort => Status::ClientAbort,
                    End::UpstreamReset => Status::UpstreamReset,
                }
            }
            Mode::Sse => {
                let tk = &self.tokens;
                let complete = self.t_done.is_some() || tk.finished || tk.all_choices_finished();
                t_end = self.t_done.unwrap_or(t);
                ttft_s = tk.t_first.map(|f| f - self.t_req);
                let n = tk.total();
                output_tokens = Some(n);
                if let Some(first) = tk.t_first
                    && tk.events >= 2
                    && n.value >= 2
                    && tk.choices.len() <= 1
                {
                    tpot_s = Some((tk.t_last - first) / f64::from(n.value - 1));
                }
                if self.error {
                    Status::StreamError
                } else if complete {
                    Status::Ok
                } else {
                    match end {
                        End::Eof => Status::Truncated,
                        End::ClientAbort => Status::ClientAbort,
                        End::UpstreamReset => Status::UpstreamReset,
                    }
                }
            }
        };
        RequestRecord {
            source: Source::Tap,
            target: target.to_string(),
            model: self.model.unwrap_or_default(),
            status,
            finished_unix,
            e2e_s: (t_end - self.t_req).max(0.0),
            ttft_s,
            tpot_s,
            prompt_tokens: self.tokens.prompt.map(saturate),
            output_tokens,
            itl: std::mem::take(&mut self.tokens.itl),
            engine: self.engine,
            request_id: self.request_id,
        }
    }
}

/// A count from a lenient number: a whole, non-negative one.
fn whole(n: event::Num) -> Option<u64> {
    n.0.filter(|v| v.is_finite() && *v >= 0.0 && v.fract() == 0.0 && *v < 1e18).map(|v| v as u64)
}

/// The engine's own times for the request, when the event or body carries them: vLLM's
/// `metrics` (queue, scheduled → first token, first → last token) or llama.cpp's `timings`
/// (prompt processing from the slot's start, then generation; no queue). llama.cpp writes
/// 0 for a phase not reached yet.
fn engine_times(ev: &Event<'_>) -> Option<EngineTimes> {
    let any = |t: &EngineTimes| t.queue_s.is_some() || t.prefill_s.is_some() || t.decode_s.is_some();
    if let Some(m) = ev.metrics.0 {
        let t = EngineTimes {
            queue_s: m.queue_time_ms.ms_as_seconds(),
            prefill_s: m.time_to_first_token_ms.ms_as_seconds(),
            decode_s: m.generation_time_ms.ms_as_seconds(),
        };
        if any(&t) {
            return Some(t);
        }
    }
    let t = ev.timings.0?;
    let reached = |ms: event::Num| ms.ms_as_seconds().filter(|s| *s > 0.0);
    let t = EngineTimes { queue_s: None, prefill_s: reached(t.prompt_ms), decode_s: reached(t.predicted_ms) };
    any(&t).then_some(t)
}

fn saturate(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn count(value: u64, exact: bool) -> TokenCount {
    TokenCount { value: saturate(value), exact }
}

impl Tokens {
    /// One stream event at `t`.
    fn event(&mut self, ev: &Event<'_>, t: f64) {
        let choices = ev.choices.as_deref().unwrap_or(&[]);
        let mut bearing = false;
        let mut exact: Option<u64> = None;
        if let Some(u) = ev.usage {
            self.prompt = u.prompt_tokens.or(self.prompt);
            if let Some(c) = u.completion_tokens {
                self.usage = Some(c);
                // Usage on chunks with choices from the start is cumulative (continuous
                // usage). Usage that first shows up on a later chunk with choices is the total
                // riding on the last chunk (TGI's chat), and the usage-only chunk at the end
                // repeats the total: neither says what its own event carried.
                if !choices.is_empty() && (self.cumulative.is_some() || self.events == 0) {
                    let before = self.cumulative.unwrap_or(0);
                    bearing |= c > before;
                    exact = Some(c.saturating_sub(before));
                    self.cumulative = Some(c.max(before));
                }
            }
        }
        for c in choices {
            bearing |= c.bears_tokens();
            match self.choices.iter_mut().find(|(i, _)| *i == c.index) {
                Some((_, done)) => *done |= c.finish_reason.is_some(),
                None => self.choices.push((c.index, c.finish_reason.is_some())),
            }
        }
        let ids: usize = choices.iter().map(|c| c.token_ids()).sum();
        if exact.is_none() && ids > 0 {
            exact = Some(ids as u64);
        }
        if ev.token.is_some() {
            bearing = true;
            exact = exact.or(Some(1));
        }
        if ev.generated_text.is_some() || ev.details.is_some() {
            self.finished = true;
        }
        if let Some(d) = &ev.details {
            self.usage = d.generated_tokens.or(self.usage);
            self.prompt = d.input_length.or(self.prompt);
        }
        if let Some(m) = &ev.meta_info {
            self.prompt = m.prompt_tokens.or(self.prompt);
            self.finished |= m.finish_reason.is_some();
            if let Some(c) = m.completion_tokens {
                let before = self.meta.unwrap_or(0);
                bearing |= c > before;
                exact = exact.or(Some(c.saturating_sub(before)));
                self.meta = Some(c.max(before));
            }
        } else if ev.text.any() || ev.output_ids.any() {
            bearing = true;
        }
        if let Some(c) = whole(ev.tokens_predicted) {
            let before = self.predicted.unwrap_or(0);
            bearing |= c > before;
            exact = exact.or(Some(c.saturating_sub(before)));
            self.predicted = Some(c.max(before));
        }
        if ev.content.any() || ev.tokens.any() {
            bearing = true;
            exact = exact.or((ev.tokens.0 > 0).then_some(ev.tokens.0 as u64));
        }
        self.prompt = whole(ev.tokens_evaluated).or(self.prompt);
        self.finished |= ev.stop.0 == Some(true);
        if !bearing {
            return;
        }
        let n = match exact {
            Some(n) => n,
            None => {
                self.counted_exact = false;
                1
            }
        };
        self.counted += n;
        self.events += 1;
        match self.t_first {
            None => self.t_first = Some(t),
            Some(_) if self.itl.len() < MAX_ITL_GAPS => {
                self.itl.push(ItlGap { seconds: (t - self.t_last).max(0.0), tokens: saturate(n) })
            }
            Some(_) => {}
        }
        self.t_last = t;
    }

    /// A whole non-streaming body: only its counts.
    fn body(&mut self, ev: &Event<'_>) {
        if let Some(u) = ev.usage {
            self.prompt = u.prompt_tokens;
            self.usage = u.completion_tokens;
        }
        if let Some(d) = &ev.details {
            self.usage = d.generated_tokens.or(self.usage);
            self.prompt = d.input_length.or(self.prompt);
        }
        if let Some(m) = &ev.meta_info {
            self.prompt = m.prompt_tokens.or(self.prompt);
            self.usage = m.completion_tokens.or(self.usage);
        }
        self.usage = whole(ev.tokens_predicted).or(self.usage);
        self.prompt = whole(ev.tokens_evaluated).or(self.prompt);
    }

    fn all_choices_finished(&self) -> bool {
        !self.choices.is_empty() && self.choices.iter().all(|c| c.1)
    }

    /// N: the stream's own total when it gave one, else the events' counts.
    fn total(&self) -> TokenCount {
        match self.usage {
            Some(n) => count(n, true),
            None => count(self.counted, self.counted_exact),
        }
    }
}
