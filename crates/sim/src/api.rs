//! The simulator's OpenAI-compatible API (docs/simulator.md#the-openai-api):
//! `/v1/models`, `/v1/chat/completions` and `/v1/completions`, streaming and not.
//!
//! A request is validated as vLLM validates it, then enters the simulated engine's queue
//! at the current virtual instant; its response is written step by step as the live
//! driver hands the engine's steps over. A client that goes away aborts its request in
//! the engine, as vLLM's frontend does.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use super::api_json::{self as json, Route, StreamFormat};
use super::client::{ClientRequest, Fault};
use super::config::SimConfig;
use super::event::FinishReason;
use super::otlp;
use super::realtime::{App, Step, Waiter};
use super::truth::Origin;

/// The largest request body accepted (128 MiB): room for multimodal requests, whose
/// image parts count no prompt tokens here.
pub const MAX_BODY: usize = 128 << 20;

/// What a valid request asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub prompt: u32,
    pub max_tokens: u32,
    pub ignore_eos: bool,
    pub stream: bool,
    pub include_usage: bool,
    pub continuous_usage: bool,
}

fn error(status: StatusCode, message: &str, kind: &str, param: Option<&str>) -> Response {
    let body = json::error_body(message, kind, param, status.as_u16());
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A request vLLM would refuse, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400 BadRequestError.
    BadRequest(String),
    /// 404 NotFoundError for the `model` parameter.
    UnknownModel(String),
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::BadRequest(_) => StatusCode::BAD_REQUEST,
            Refusal::UnknownModel(_) => StatusCode::NOT_FOUND,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match &self {
            Refusal::BadRequest(m) => error(self.status(), m, "BadRequestError", None),
            Refusal::UnknownModel(model) => {
                let m = format!("The model `{model}` does not exist.");
                error(self.status(), &m, "NotFoundError", Some("model"))
            }
        }
    }
}

fn bad_request(message: &str) -> Refusal {
    Refusal::BadRequest(message.to_string())
}

/// A field of the body with the wrong shape; its text is the `message` of the 400 answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum RequestError {
    #[error("`messages` must be a list of messages")]
    MessagesNotList,
    #[error("`messages` must not be empty")]
    MessagesEmpty,
    #[error("`prompt` is required")]
    PromptMissing,
    #[error("the simulator serves one prompt per request; send a string or one list of token ids")]
    ManyPrompts,
    #[error("Prompt cannot be empty")]
    PromptEmpty,
    #[error("`prompt` must be a string or a list of token ids")]
    PromptShape,
    #[error("`{0}` must be an integer")]
    NotInteger(&'static str),
}

impl From<RequestError> for Refusal {
    fn from(e: RequestError) -> Refusal {
        Refusal::BadRequest(e.to_string())
    }
}

/// Crude token count of a text: one token per 4 characters, rounded up.
pub fn text_tokens(s: &str) -> u32 {
    s.chars().count().div_ceil(4) as u32
}

/// Prompt tokens of a chat request: 4 per message (role and template markers) plus the
/// content's [`text_tokens`].
fn chat_prompt(body: &Value) -> Result<u32, RequestError> {
    let msgs = body.get("messages").and_then(Value::as_array).ok_or(RequestError::MessagesNotList)?;
    if msgs.is_empty() {
        return Err(RequestError::MessagesEmpty);
    }
    let content = |m: &Value| -> u32 {
        match m.get("content") {
            Some(Value::String(s)) => text_tokens(s),
            Some(Value::Array(parts)) => {
                parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).map(text_tokens).sum()
            }
            _ => 0,
        }
    };
    Ok(msgs.iter().map(|m| 4 + content(m)).sum())
}

/// Prompt tokens of a completion: token ids count exactly, text by [`text_tokens`].
fn completion_prompt(body: &Value) -> Result<u32, RequestError> {
    let one = |v: &Value| -> Option<u32> {
        match v {
            Value::String(s) => Some(text_tokens(s)),
            Value::Array(ids) if ids.iter().all(Value::is_u64) => Some(ids.len() as u32),
            _ => None,
        }
    };
    let p = body.get("prompt").ok_or(RequestError::PromptMissing)?;
    let n = match p {
        Value::Array(items) if items.len() == 1 && !items[0].is_u64() => one(&items[0]),
        Value::Array(items) if items.len() > 1 && !items[0].is_u64() => {
            return Err(RequestError::ManyPrompts);
        }
        _ => one(p),
    };
    match n {
        Some(0) => Err(RequestError::PromptEmpty),
        Some(n) => Ok(n),
        None => Err(RequestError::PromptShape),
    }
}

fn opt_u32(body: &Value, key: &'static str) -> Result<Option<u32>, RequestError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(|x| Some(x.min(u64::from(u32::MAX)) as u32)).ok_or(RequestError::NotInteger(key)),
    }
}

fn flag(v: Option<&Value>) -> bool {
    v.and_then(Value::as_bool).unwrap_or(false)
}

/// Validates a request body as vLLM does.
pub fn parse(route: Route, body: &[u8], cfg: &SimConfig) -> Result<Parsed, Refusal> {
    let v: Value = serde_json::from_slice(body).map_err(|e| bad_request(&format!("invalid JSON body: {e}")))?;
    if !v.is_object() {
        return Err(bad_request("the body must be a JSON object"));
    }
    if let Some(m) = v.get("model").and_then(Value::as_str)
        && m != cfg.model
    {
        return Err(Refusal::UnknownModel(m.to_string()));
    }
    let n = opt_u32(&v, "n")?;
    if n.is_some_and(|n| n != 1) {
        return Err(bad_request("the simulator serves n = 1 only"));
    }
    let prompt = match route {
        Route::Chat => chat_prompt(&v),
        Route::Completion => completion_prompt(&v),
    }?;
    let len = cfg.engine.max_model_len;
    if prompt >= len {
        let msg = format!(
            "This model's maximum context length is {len} tokens. However, your request has {prompt} input tokens. Please reduce the length of the input messages."
        );
        return Err(bad_request(&msg));
    }
    let asked = match route {
        Route::Chat => match opt_u32(&v, "max_completion_tokens")? {
            Some(m) => Some(m),
            None => opt_u32(&v, "max_tokens")?,
        },
        // vLLM's CompletionRequest defaults max_tokens to 16; an explicit null lifts it.
        Route::Completion => match v.get("max_tokens") {
            None => Some(16),
            Some(_) => opt_u32(&v, "max_tokens")?,
        },
    };
    let max_tokens = match asked {
        Some(0) => return Err(bad_request("max_tokens must be at least 1, got 0.")),
        Some(m) if u64::from(prompt) + u64::from(m) > u64::from(len) => {
            let msg = format!(
                "'max_tokens' or 'max_completion_tokens' is too large: {m}. This model's maximum context length is {len} tokens and your request has {prompt} input tokens ({m} > {len} - {prompt})."
            );
            return Err(bad_request(&msg));
        }
        Some(m) => m,
        None => len - prompt,
    };
    let stream = flag(v.get("stream"));
    let opts = v.get("stream_options").filter(|o| !o.is_null());
    if opts.is_some() && !stream {
        return Err(bad_request("Stream options can only be defined when `stream=True`."));
    }
    let include_usage = flag(opts.and_then(|o| o.get("include_usage")));
    let continuous_usage = include_usage && flag(opts.and_then(|o| o.get("continuous_usage_stats")));
    Ok(Parsed { prompt, max_tokens, ignore_eos: flag(v.get("ignore_eos")), stream, include_usage, continuous_usage })
}

pub(crate) async fn models(State(app): State<Arc<App>>) -> Response {
    let body = json::models(&app.cfg.model, app.created, app.cfg.engine.max_model_len);
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) async fn chat(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    generate(app, Route::Chat, &headers, &body).await
}

pub(crate) async fn completions(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    generate(app, Route::Completion, &headers, &body).await
}

/// The caller's `X-Request-Id`, which vLLM uses as the base of the response id.
fn request_id_header(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("x-request-id")?.to_str().ok()?;
    (!v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic())).then(|| v.to_string())
}

async fn generate(app: Arc<App>, route: Route, headers: &HeaderMap, body: &[u8]) -> Response {
    let p = match parse(route, body, &app.cfg) {
        Ok(p) => p,
        Err(r) => return r.into_response(),
    };
    let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok()).and_then(otlp::parse_traceparent);
    let (tx, rx) = mpsc::unbounded_channel();
    let (id, fault, fmt) = {
        let mut live = app.lock();
        live.catch_up();
        let a = live.sim.submit(ClientRequest { prompt: p.prompt, max_tokens: p.max_tokens, ignore_eos: p.ignore_eos });
        let seed = app.cfg.seed;
        let base = request_id_header(headers)
            .unwrap_or_else(|| format!("{:016x}{:016x}", otlp::mix(seed ^ 0x1d), otlp::mix(a.id ^ otlp::mix(seed))));
        let fmt = StreamFormat {
            route,
            id: format!("{}-{base}", route.id_prefix()),
            created: live.unix(a.arrival) as u64,
            model: app.cfg.model.clone(),
            prompt_tokens: p.prompt,
            include_usage: p.include_usage,
            continuous_usage: p.continuous_usage,
        };
        if a.fault == Some(Fault::HttpError) {
            let at = live.unix(a.arrival);
            if let Some(t) = &mut live.truth {
                t.rejected(a.id, p.prompt, at, Origin { request_id: &fmt.id, fault: a.fault });
            }
            return error(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error", "InternalServerError", None);
        }
        live.waiters.insert(a.id, Waiter { tx, request_id: fmt.id.clone(), fault: a.fault, traceparent });
        (a.id, a.fault, fmt)
    };
    app.wake.notify_one();
    let guard = AbortOnDrop { app, id, armed: true };
    if p.stream { stream(fmt, rx, guard, fault) } else { full(fmt, rx, guard, fault).await }
}

/// Aborts the request in the engine if the response is dropped before the engine
/// finished it: the client went away.
struct AbortOnDrop {
    app: Arc<App>,
    id: u64,
    armed: bool,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if self.armed {
            {
                let mut live = self.app.lock();
                live.catch_up();
                live.sim.abort(self.id);
            }
            self.app.wake.notify_one();
        }
    }
}

/// Connection reset: hyper closes the connection when a body yields an error.
fn reset() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, "injected server abort")
}

fn finish_reason(r: FinishReason) -> &'static str {
    r.as_str()
}

struct StreamState {
    rx: mpsc::UnboundedReceiver<Step>,
    fmt: StreamFormat,
    guard: AbortOnDrop,
    fault: Option<Fault>,
    /// Tokens sent so far.
    sent: u32,
    started: bool,
    done: bool,
    queue: VecDeque<Result<String, std::io::Error>>,
}

impl StreamState {
    /// vLLM's first chat chunk comes with the first engine output.
    fn start(&mut self) {
        if !self.started && self.fmt.route == Route::Chat {
            self.queue.push_back(Ok(self.fmt.role_chunk()));
        }
        self.started = true;
    }

    fn tokens(&mut self, n: u32, finish: Option<&str>) {
        let text = json::filler(self.guard.id, self.sent, n);
        self.sent += n;
        self.queue.push_back(Ok(self.fmt.token_chunk(&text, self.sent, finish)));
    }

    fn on_step(&mut self, step: Step) {
        match step {
            Step::Tokens(n) => {
                self.start();
                self.tokens(n, None);
            }
            Step::End { last, reason, .. } => {
                self.guard.armed = false;
                self.done = true;
                if reason == FinishReason::Abort && self.fault == Some(Fault::ServerAbort) {
                    self.queue.push_back(Err(reset()));
                    return;
                }
                self.start();
                if reason == FinishReason::Error {
                    // The failing step's tokens are not sent (vLLM raises before its chunk).
                    self.queue.push_back(Ok(json::stream_error_event()));
                } else {
                    self.tokens(last, Some(finish_reason(reason)));
                    if self.fmt.include_usage {
                        self.queue.push_back(Ok(self.fmt.usage_chunk(self.sent)));
                    }
                }
                self.queue.push_back(Ok(json::DONE.to_string()));
            }
        }
    }
}

fn stream(fmt: StreamFormat, rx: mpsc::UnboundedReceiver<Step>, guard: AbortOnDrop, fault: Option<Fault>) -> Response {
    let st = StreamState { rx, fmt, guard, fault, sent: 0, started: false, done: false, queue: VecDeque::new() };
    let events = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(item) = st.queue.pop_front() {
                return Some((item, st));
            }
            if st.done {
                return None;
            }
            match st.rx.recv().await {
                Some(step) => st.on_step(step),
                None => {
                    // The simulator is shutting down: the stream ends without `[DONE]`.
                    st.guard.armed = false;
                    st.done = true;
                }
            }
        }
    });
    // Starlette adds the charset to text/event-stream; vLLM's responses carry it.
    ([(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")], Body::from_stream(events)).into_response()
}

async fn full(
    fmt: StreamFormat,
    mut rx: mpsc::UnboundedReceiver<Step>,
    mut guard: AbortOnDrop,
    fault: Option<Fault>,
) -> Response {
    let mut sent = 0;
    while let Some(step) = rx.recv().await {
        match step {
            Step::Tokens(n) => sent += n,
            Step::End { last, reason, .. } => {
                guard.armed = false;
                return match reason {
                    FinishReason::Error => {
                        error(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error", "InternalServerError", None)
                    }
                    FinishReason::Abort if fault == Some(Fault::ServerAbort) => {
                        let body = Body::from_stream(futures_util::stream::once(async { Err::<Bytes, _>(reset()) }));
                        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
                    }
                    _ => {
                        sent += last;
                        let text = json::filler(guard.id, 0, sent);
                        let body = json::full_response(&fmt, &text, sent, finish_reason(reason));
                        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
                    }
                };
            }
        }
    }
    guard.armed = false;
    error(StatusCode::SERVICE_UNAVAILABLE, "the simulator is shutting down", "ServiceUnavailableError", None)
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
