//! Request validation and prompt counting, as vLLM answers bad requests.

use super::*;

fn ok(route: Route, body: &str) -> Parsed {
    parse(route, body.as_bytes(), &SimConfig::default()).unwrap_or_else(|r| panic!("{body}: {r:?}"))
}

fn status(route: Route, body: &str) -> u16 {
    match parse(route, body.as_bytes(), &SimConfig::default()) {
        Ok(_) => 200,
        Err(r) => r.status().as_u16(),
    }
}

#[test]
fn prompts_are_counted_crudely_and_token_ids_exactly() {
    let p =
        ok(Route::Chat, r#"{"messages":[{"role":"system","content":"abcdefgh"},{"role":"user","content":"hello"}]}"#);
    assert_eq!(p.prompt, 4 + 2 + 4 + 2);
    let p = ok(Route::Chat, r#"{"messages":[{"role":"user","content":[{"type":"text","text":"abcd"}]}]}"#);
    assert_eq!(p.prompt, 5);
    assert_eq!(ok(Route::Completion, r#"{"prompt":[1,2,3,4,5,6,7]}"#).prompt, 7);
    assert_eq!(ok(Route::Completion, r#"{"prompt":[[1,2,3]]}"#).prompt, 3);
    assert_eq!(ok(Route::Completion, r#"{"prompt":"héllo wörld"}"#).prompt, 3, "characters, not bytes");
}

#[test]
fn max_tokens_defaults_and_caps_follow_vllm() {
    let len = SimConfig::default().engine.max_model_len;
    assert_eq!(ok(Route::Completion, r#"{"prompt":"abcd"}"#).max_tokens, 16);
    assert_eq!(ok(Route::Completion, r#"{"prompt":"abcd","max_tokens":null}"#).max_tokens, len - 1);
    let chat = r#"{"messages":[{"role":"user","content":"abcd"}]"#;
    assert_eq!(ok(Route::Chat, &format!("{chat}}}")).max_tokens, len - 5);
    assert_eq!(ok(Route::Chat, &format!(r#"{chat},"max_tokens":9,"max_completion_tokens":7}}"#)).max_tokens, 7);
    assert_eq!(status(Route::Chat, &format!(r#"{chat},"max_tokens":{len}}}"#)), 400);
    assert_eq!(status(Route::Chat, &format!(r#"{chat},"max_tokens":0}}"#)), 400);
    let p = ok(
        Route::Chat,
        &format!(
            r#"{chat},"stream":true,"stream_options":{{"include_usage":true,"continuous_usage_stats":true}},"ignore_eos":true}}"#
        ),
    );
    assert!(p.stream && p.include_usage && p.continuous_usage && p.ignore_eos);
    let p = ok(Route::Chat, &format!(r#"{chat},"stream":true,"stream_options":{{"continuous_usage_stats":true}}}}"#));
    assert!(!p.continuous_usage, "continuous usage needs include_usage, as in vLLM");
}

#[test]
fn bad_requests_get_vllms_status() {
    assert_eq!(status(Route::Chat, "{not json"), 400);
    assert_eq!(status(Route::Chat, r#"{"model":"other","messages":[{"role":"user","content":"x"}]}"#), 404);
    assert_eq!(status(Route::Chat, r#"{"messages":[]}"#), 400);
    assert_eq!(status(Route::Chat, r#"{"messages":[{"role":"user","content":"x"}],"n":2}"#), 400);
    assert_eq!(
        status(Route::Chat, r#"{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}"#),
        400
    );
    assert_eq!(status(Route::Completion, r#"{"prompt":""}"#), 400);
    let refusal = |route, body: &str| parse(route, body.as_bytes(), &SimConfig::default()).unwrap_err();
    assert_eq!(refusal(Route::Completion, r#"{"prompt":""}"#), Refusal::BadRequest("Prompt cannot be empty".into()));
    assert_eq!(
        refusal(Route::Chat, r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":"9"}"#),
        Refusal::BadRequest("`max_tokens` must be an integer".into())
    );
    assert_eq!(status(Route::Completion, r#"{"prompt":["a","b"]}"#), 400);
    let huge = "x".repeat(4 * 8192);
    assert_eq!(status(Route::Completion, &format!(r#"{{"prompt":"{huge}"}}"#)), 400);
    let model = SimConfig::default().model;
    assert_eq!(
        status(Route::Chat, &format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"x"}}]}}"#)),
        200
    );
}
