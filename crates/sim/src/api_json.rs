//! The bytes vLLM's OpenAI-compatible server writes, for the simulator's API
//! (docs/simulator.md#the-openai-api): stream chunks, full responses and error bodies.
//!
//! vLLM (≥ 0.11) dumps stream chunks with pydantic's `exclude_unset`, so a field appears
//! only where the server set it, in declaration order; these structs keep that order and
//! that set of fields. The in-band stream error is `json.dumps` output (spaces after `:`
//! and `,`), unlike every other body, which is compact.

use serde::Serialize;

/// Which endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Chat,
    Completion,
}

impl Route {
    fn chunk_object(self) -> &'static str {
        match self {
            Route::Chat => "chat.completion.chunk",
            Route::Completion => "text_completion",
        }
    }

    /// The response id's prefix, as vLLM's.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Route::Chat => "chatcmpl",
            Route::Completion => "cmpl",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub total_tokens: u32,
    pub completion_tokens: u32,
}

impl Usage {
    pub fn new(prompt: u32, completion: u32) -> Usage {
        Usage { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion }
    }
}

/// One streamed response: everything its chunks share.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamFormat {
    pub route: Route,
    pub id: String,
    pub created: u64,
    pub model: String,
    pub prompt_tokens: u32,
    /// `stream_options.include_usage`: a `choices: []` usage chunk before `[DONE]`.
    pub include_usage: bool,
    /// `stream_options.continuous_usage_stats` (with `include_usage`): cumulative usage on
    /// every chunk.
    pub continuous_usage: bool,
}

#[derive(Serialize)]
struct Chunk<'a, C: Serialize> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [C],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
    /// Set (to null) only on vLLM's first chat chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_token_ids: Option<()>,
}

#[derive(Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    content: &'a str,
}

#[derive(Serialize)]
struct ChatChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: (),
    finish_reason: Option<&'a str>,
    /// `Some(())` prints `"stop_reason":null` (set on the finish chunk only).
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<()>,
    /// Present (null) on every chunk but the role chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    token_ids: Option<()>,
}

#[derive(Serialize)]
struct TextChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: (),
    finish_reason: Option<&'a str>,
    stop_reason: (),
    prompt_token_ids: (),
    token_ids: (),
}

/// `data: <json>\n\n`.
pub fn sse(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// The stream's terminator.
pub const DONE: &str = "data: [DONE]\n\n";

fn to_json<T: Serialize>(v: &T) -> String {
    // Plain structs of strings and numbers always serialize.
    serde_json::to_string(v).unwrap_or_default()
}

impl StreamFormat {
    fn usage(&self, completion: u32) -> Option<Usage> {
        self.continuous_usage.then(|| Usage::new(self.prompt_tokens, completion))
    }

    fn chunk<C: Serialize>(&self, choices: &[C], usage: Option<Usage>, first: bool) -> String {
        sse(&to_json(&Chunk {
            id: &self.id,
            object: self.route.chunk_object(),
            created: self.created,
            model: &self.model,
            choices,
            usage,
            prompt_token_ids: first.then_some(()),
        }))
    }

    /// Chat's first chunk, at the first engine output: the role and empty content.
    pub fn role_chunk(&self) -> String {
        let choice = ChatChoice {
            index: 0,
            delta: Delta { role: Some("assistant"), content: "" },
            logprobs: (),
            finish_reason: None,
            stop_reason: None,
            token_ids: None,
        };
        self.chunk(&[choice], self.usage(0), true)
    }

    /// One engine step's text; `finish` set on the last one. `completion` counts every
    /// token sent so far, this chunk's included.
    pub fn token_chunk(&self, text: &str, completion: u32, finish: Option<&str>) -> String {
        let usage = self.usage(completion);
        match self.route {
            Route::Chat => {
                let choice = ChatChoice {
                    index: 0,
                    delta: Delta { role: None, content: text },
                    logprobs: (),
                    finish_reason: finish,
                    stop_reason: finish.map(|_| ()),
                    token_ids: Some(()),
                };
                self.chunk(&[choice], usage, false)
            }
            Route::Completion => {
                let choice = TextChoice {
                    index: 0,
                    text,
                    logprobs: (),
                    finish_reason: finish,
                    stop_reason: (),
                    prompt_token_ids: (),
                    token_ids: (),
                };
                self.chunk(&[choice], usage, false)
            }
        }
    }

    /// The `choices: []` chunk with the final usage (`include_usage`).
    pub fn usage_chunk(&self, completion: u32) -> String {
        self.chunk::<()>(&[], Some(Usage::new(self.prompt_tokens, completion)), false)
    }
}

#[derive(Serialize)]
struct ErrorInfo<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: u16,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorInfo<'a>,
}

/// vLLM's error body (`ErrorResponse`), compact as FastAPI's JSONResponse writes it.
pub fn error_body(message: &str, kind: &str, param: Option<&str>, code: u16) -> String {
    to_json(&ErrorBody { error: ErrorInfo { message, kind, param, code } })
}

/// The in-band event vLLM sends when a request finishes with reason `error` mid-stream
/// (`GenerationError`), in `json.dumps` spacing; `[DONE]` follows it.
pub fn stream_error_event() -> String {
    sse(r#"{"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}}"#)
}

#[derive(Serialize)]
struct FullUsage {
    prompt_tokens: u32,
    total_tokens: u32,
    completion_tokens: u32,
    prompt_tokens_details: (),
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    reasoning_content: (),
    content: &'a str,
    tool_calls: [(); 0],
}

#[derive(Serialize)]
struct FullChatChoice<'a> {
    index: u32,
    message: Message<'a>,
    logprobs: (),
    finish_reason: &'a str,
    stop_reason: (),
}

#[derive(Serialize)]
struct FullTextChoice<'a> {
    index: u32,
    text: &'a str,
    logprobs: (),
    finish_reason: &'a str,
    stop_reason: (),
    prompt_logprobs: (),
}

#[derive(Serialize)]
struct Full<'a, C: Serialize> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [C; 1],
    usage: FullUsage,
    prompt_logprobs: (),
    kv_transfer_params: (),
}

/// A non-streaming response with all of its text.
pub fn full_response(f: &StreamFormat, text: &str, completion: u32, finish: &str) -> String {
    let usage = FullUsage {
        prompt_tokens: f.prompt_tokens,
        total_tokens: f.prompt_tokens + completion,
        completion_tokens: completion,
        prompt_tokens_details: (),
    };
    match f.route {
        Route::Chat => to_json(&Full {
            id: &f.id,
            object: "chat.completion",
            created: f.created,
            model: &f.model,
            choices: [FullChatChoice {
                index: 0,
                message: Message { role: "assistant", reasoning_content: (), content: text, tool_calls: [] },
                logprobs: (),
                finish_reason: finish,
                stop_reason: (),
            }],
            usage,
            prompt_logprobs: (),
            kv_transfer_params: (),
        }),
        Route::Completion => to_json(&Full {
            id: &f.id,
            object: "text_completion",
            created: f.created,
            model: &f.model,
            choices: [FullTextChoice {
                index: 0,
                text,
                logprobs: (),
                finish_reason: finish,
                stop_reason: (),
                prompt_logprobs: (),
            }],
            usage,
            prompt_logprobs: (),
            kv_transfer_params: (),
        }),
    }
}

#[derive(Serialize)]
struct ModelCard<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    owned_by: &'static str,
    root: &'a str,
    parent: (),
    max_model_len: u32,
}

#[derive(Serialize)]
struct ModelList<'a> {
    object: &'static str,
    data: [ModelCard<'a>; 1],
}

/// `GET /v1/models`: the one served model.
pub fn models(model: &str, created: u64, max_model_len: u32) -> String {
    to_json(&ModelList {
        object: "list",
        data: [ModelCard {
            id: model,
            object: "model",
            created,
            owned_by: "vllm",
            root: model,
            parent: (),
            max_model_len,
        }],
    })
}

/// Deterministic filler text: one word per token, each with a leading space, so that a
/// client can count tokens by counting words.
const WORDS: [&str; 32] = [
    "the",
    "model",
    "is",
    "simulated",
    "and",
    "each",
    "word",
    "stands",
    "for",
    "one",
    "token",
    "that",
    "a",
    "decode",
    "step",
    "produced",
    "while",
    "the",
    "batch",
    "was",
    "running",
    "on",
    "an",
    "engine",
    "with",
    "paged",
    "cache",
    "blocks",
    "so",
    "latency",
    "looks",
    "real",
];

/// The text of tokens `from..from + n` of request `id`.
pub fn filler(id: u64, from: u32, n: u32) -> String {
    let mut s = String::with_capacity(8 * n as usize);
    for j in from..from + n {
        s.push(' ');
        s.push_str(WORDS[((id as usize).wrapping_mul(7) + j as usize) % WORDS.len()]);
    }
    s
}

#[cfg(test)]
#[path = "api_json_tests.rs"]
mod tests;
