//! The chunk bytes, field for field, against what vLLM writes.

use super::*;

fn fmt(route: Route, include_usage: bool, continuous_usage: bool) -> StreamFormat {
    StreamFormat {
        route,
        id: "chatcmpl-abc".into(),
        created: 1_767_225_600,
        model: "m".into(),
        prompt_tokens: 12,
        include_usage,
        continuous_usage,
    }
}

#[test]
fn chat_chunks_are_vllms() {
    let f = fmt(Route::Chat, true, false);
    let head = r#"{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":"#;
    assert_eq!(
        f.role_chunk(),
        format!(
            "data: {head}{}\n\n",
            r#"[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null}"#
        )
    );
    assert_eq!(
        f.token_chunk(" the", 1, None),
        format!(
            "data: {head}{}\n\n",
            r#"[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#
        )
    );
    assert_eq!(
        f.token_chunk(" a b", 9, Some("length")),
        format!(
            "data: {head}{}\n\n",
            r#"[{"index":0,"delta":{"content":" a b"},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}]}"#
        )
    );
    assert_eq!(
        f.usage_chunk(9),
        format!("data: {head}{}\n\n", r#"[],"usage":{"prompt_tokens":12,"total_tokens":21,"completion_tokens":9}}"#)
    );
}

#[test]
fn continuous_usage_rides_on_every_chunk() {
    let f = fmt(Route::Chat, true, true);
    assert!(
        f.role_chunk().contains(
            r#""usage":{"prompt_tokens":12,"total_tokens":12,"completion_tokens":0},"prompt_token_ids":null}"#
        )
    );
    assert!(
        f.token_chunk(" x y", 5, None)
            .contains(r#""usage":{"prompt_tokens":12,"total_tokens":17,"completion_tokens":5}}"#)
    );
    let plain = fmt(Route::Chat, true, false);
    assert!(!plain.token_chunk(" x", 1, None).contains("usage"));
}

#[test]
fn completion_chunks_are_vllms() {
    let f = fmt(Route::Completion, false, false);
    assert_eq!(
        f.token_chunk(" word", 1, Some("stop")),
        concat!(
            r#"data: {"id":"chatcmpl-abc","object":"text_completion","created":1767225600,"model":"m","choices":"#,
            r#"[{"index":0,"text":" word","logprobs":null,"finish_reason":"stop","stop_reason":null,"#,
            r#""prompt_token_ids":null,"token_ids":null}]}"#,
            "\n\n"
        )
    );
    assert!(
        f.usage_chunk(3)
            .contains(r#""object":"text_completion","created":1767225600,"model":"m","choices":[],"usage":"#)
    );
}

#[test]
fn errors_bodies_and_models() {
    assert_eq!(
        stream_error_event(),
        "data: {\"error\": {\"message\": \"Internal server error\", \"type\": \"InternalServerError\", \"param\": null, \"code\": 500}}\n\n"
    );
    assert_eq!(
        error_body("The model `x` does not exist.", "NotFoundError", Some("model"), 404),
        r#"{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":"model","code":404}}"#
    );
    let v: serde_json::Value = serde_json::from_str(&models("m", 5, 8192)).expect("json");
    assert_eq!(v["data"][0]["id"], "m");
    assert_eq!(v["data"][0]["max_model_len"], 8192);
    let full = full_response(&fmt(Route::Chat, false, false), " a b", 2, "stop");
    let v: serde_json::Value = serde_json::from_str(&full).expect("json");
    assert_eq!(v["choices"][0]["message"]["content"], " a b");
    assert_eq!(v["usage"]["total_tokens"], 14);
    assert_eq!(v["object"], "chat.completion");
}

#[test]
fn filler_has_one_word_per_token_and_continues() {
    let all = filler(3, 0, 10);
    assert_eq!(all.split_whitespace().count(), 10);
    assert_eq!(format!("{}{}", filler(3, 0, 4), filler(3, 4, 6)), all);
}
