//! Engine-shaped responses on a schedule: the wire formats of vLLM, SGLang, TGI and
//! TRT-LLM as docs/request-path.md describes them (role chunk first, usage chunk when asked,
//! `[DONE]` or not, `data:` with or without a space, keep-alive comments).

use super::{Reply, Seen, Step, send, wait_ms};

/// The text every scripted engine generates, one token per entry.
pub const TOKENS: &[&str] = &["Hel", "lo", ",", " wor", "ld", "!"];

pub fn text() -> String {
    TOKENS.concat()
}

/// When the first token comes (after the request) and the gap between tokens, in ms.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub ttft: u64,
    pub itl: u64,
}

pub const TIMING: Timing = Timing { ttft: 150, itl: 40 };

fn model(seen: &Seen) -> String {
    seen.json()["model"].as_str().unwrap_or("served").to_string()
}

fn wants_usage(seen: &Seen) -> bool {
    seen.json()["stream_options"]["include_usage"] == true
}

fn event(json: &serde_json::Value) -> Step {
    send(format!("data: {json}\n\n"))
}

const PROMPT_TOKENS: u64 = 7;

/// vLLM's OpenAI server: chat and completions, streaming or not. Chat starts with a
/// role-only chunk; the finish chunk has empty content; the usage chunk (`choices: []`)
/// comes only with `include_usage`; `[DONE]` ends the stream. Headers go out at once.
pub fn vllm(seen: &Seen, t: Timing) -> Reply {
    let m = model(seen);
    let chat = seen.path.starts_with("/v1/chat/completions");
    let n = TOKENS.len() as u64;
    let usage =
        serde_json::json!({"prompt_tokens": PROMPT_TOKENS, "total_tokens": PROMPT_TOKENS + n, "completion_tokens": n});
    if seen.json()["stream"] != true {
        let body = if chat {
            serde_json::json!({"id": "cmpl-1", "object": "chat.completion", "created": 1, "model": m,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text()}, "finish_reason": "stop"}],
                "usage": usage})
        } else {
            serde_json::json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": m,
                "choices": [{"index": 0, "text": text(), "finish_reason": "stop"}], "usage": usage})
        };
        let wait = t.ttft + t.itl * (n - 1);
        return Reply::new(200, "application/json", vec![wait_ms(wait), send(body.to_string())]);
    }
    let object = if chat { "chat.completion.chunk" } else { "text_completion" };
    let chunk = |choice: serde_json::Value| {
        event(&serde_json::json!({"id": "cmpl-1", "object": object, "created": 1, "model": m, "choices": [choice]}))
    };
    let piece = |text: &str, finish: Option<&str>| {
        if chat {
            serde_json::json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": finish})
        } else {
            serde_json::json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish})
        }
    };
    let mut steps = vec![wait_ms(t.ttft)];
    if chat {
        steps.push(chunk(serde_json::json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null})));
    }
    for (i, tok) in TOKENS.iter().enumerate() {
        if i > 0 {
            steps.push(wait_ms(t.itl));
        }
        steps.push(chunk(piece(tok, None)));
    }
    steps.push(chunk(piece("", Some("stop"))));
    if wants_usage(seen) {
        steps.push(event(&serde_json::json!({"id": "cmpl-1", "object": object, "created": 1, "model": m, "choices": [], "usage": usage})));
    }
    steps.push(send("data: [DONE]\n\n"));
    Reply::new(200, "text/event-stream; charset=utf-8", steps)
}

/// SGLang's native `/generate`: cumulative `text` and `meta_info.completion_tokens`, a
/// `finish_reason` object on the last event, then `[DONE]`. SGLang withholds the response
/// head until the first output, so the head comes with the first event.
pub fn sglang_generate(_seen: &Seen, t: Timing) -> Reply {
    let mut steps = vec![wait_ms(t.ttft)];
    let n = TOKENS.len();
    for i in 0..n {
        if i > 0 {
            steps.push(wait_ms(t.itl));
        }
        let finish =
            if i + 1 == n { serde_json::json!({"type": "stop", "matched": 2}) } else { serde_json::Value::Null };
        steps.push(event(&serde_json::json!({
            "text": TOKENS[..=i].concat(), "output_ids": (0..=i).collect::<Vec<_>>(),
            "meta_info": {"id": "r1", "finish_reason": finish, "prompt_tokens": PROMPT_TOKENS, "completion_tokens": i + 1}
        })));
    }
    steps.push(send("data: [DONE]\n\n"));
    Reply::new(200, "text/event-stream", steps).late_head()
}

/// SGLang's OpenAI chat: `reasoning_content` first, a separate finish chunk, usage only
/// when asked.
pub fn sglang_chat(seen: &Seen, t: Timing) -> Reply {
    let m = model(seen);
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        event(&serde_json::json!({"id": "s1", "object": "chat.completion.chunk", "created": 1, "model": m,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish, "matched_stop": null}]}))
    };
    let mut steps =
        vec![wait_ms(t.ttft), chunk(serde_json::json!({"role": "assistant", "content": ""}), serde_json::Value::Null)];
    steps.push(chunk(serde_json::json!({"reasoning_content": "Hmm."}), serde_json::Value::Null));
    for tok in TOKENS {
        steps.push(wait_ms(t.itl));
        steps.push(chunk(serde_json::json!({"content": tok}), serde_json::Value::Null));
    }
    steps.push(chunk(serde_json::json!({}), serde_json::json!("stop")));
    if wants_usage(seen) {
        let n = TOKENS.len() as u64 + 1;
        steps.push(event(
            &serde_json::json!({"id": "s1", "object": "chat.completion.chunk", "created": 1, "model": m, "choices": [],
            "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": n, "total_tokens": PROMPT_TOKENS + n}}),
        ));
    }
    steps.push(send("data: [DONE]\n\n"));
    Reply::new(200, "text/event-stream", steps)
}

/// TGI's `/generate_stream`: `data:` without a space, keep-alive comments while it
/// prefills, one event per token (the last one special), `generated_text` and `details` on
/// the last, and no `[DONE]`.
pub fn tgi_generate_stream(_seen: &Seen, t: Timing) -> Reply {
    let mut steps = vec![wait_ms(t.ttft / 2), send(":\n\n"), wait_ms(t.ttft - t.ttft / 2)];
    let toks: Vec<&str> = TOKENS.iter().copied().chain(["</s>"]).collect();
    for (i, tok) in toks.iter().enumerate() {
        if i > 0 {
            steps.push(wait_ms(t.itl));
        }
        let last = i + 1 == toks.len();
        let json = serde_json::json!({
            "index": i, "token": {"id": i, "text": tok, "logprob": -0.5, "special": last}, "top_tokens": null,
            "generated_text": if last { serde_json::json!(text()) } else { serde_json::Value::Null },
            "details": if last { serde_json::json!({"finish_reason": "eos_token", "generated_tokens": toks.len(), "seed": null}) } else { serde_json::Value::Null },
        });
        steps.push(send(format!("data:{json}\n\n")));
    }
    Reply::new(200, "text/event-stream", steps).header("x-accel-buffering", "no")
}

/// trtllm-serve chat with `continuous_usage_stats`: a role chunk with a trailing space
/// after its JSON, cumulative usage on every chunk, two tokens per chunk
/// (`stream_interval` 2), the usage chunk, `[DONE]`.
pub fn trtllm_chat(seen: &Seen, t: Timing) -> Reply {
    let m = model(seen);
    let usage = |n: usize| serde_json::json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": n, "total_tokens": PROMPT_TOKENS as usize + n});
    let role = serde_json::json!({"id": "t1", "object": "chat.completion.chunk", "model": m,
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}], "usage": usage(0)});
    let mut steps = vec![wait_ms(t.ttft), send(format!("data: {role} \n\n"))];
    for (i, pair) in TOKENS.chunks(2).enumerate() {
        if i > 0 {
            steps.push(wait_ms(t.itl));
        }
        let done = (i + 1) * 2 >= TOKENS.len();
        steps.push(event(&serde_json::json!({"id": "t1", "object": "chat.completion.chunk", "model": m,
            "choices": [{"index": 0, "delta": {"content": pair.concat()}, "finish_reason": if done { serde_json::json!("stop") } else { serde_json::Value::Null }}],
            "usage": usage(((i + 1) * 2).min(TOKENS.len()))})));
    }
    steps.push(event(&serde_json::json!({"id": "t1", "object": "chat.completion.chunk", "model": m, "choices": [], "usage": usage(TOKENS.len())})));
    steps.push(send("data: [DONE]\n\n"));
    Reply::new(200, "text/event-stream", steps)
}

/// Any engine: dispatch on the path (the OpenAI routes speak vLLM).
pub fn by_path(seen: &Seen, t: Timing) -> Reply {
    match seen.path.split('?').next().unwrap_or("") {
        "/generate" => sglang_generate(seen, t),
        "/generate_stream" => tgi_generate_stream(seen, t),
        "/v1/chat/completions" | "/v1/completions" => vllm(seen, t),
        "/v1/models" => Reply::new(
            200,
            "application/json",
            vec![send(r#"{"object":"list","data":[{"id":"llama","object":"model"}]}"#)],
        ),
        _ => Reply::new(404, "application/json", vec![send(r#"{"detail":"Not Found"}"#)]),
    }
}
