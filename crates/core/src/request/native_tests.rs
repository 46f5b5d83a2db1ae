//! The meter on llama.cpp's own routes and on the engine-side per-request times that
//! llama.cpp (`timings`) and vLLM (`metrics`, `--enable-per-request-metrics`) put in their
//! responses. The llama.cpp events are as llama-server (llama.cpp 0c1e570) sent them, the
//! long `generation_settings` object cut short.

use super::*;

/// `/completion` with `"stream": true`: no `[DONE]`; the last event says `"stop": true`
/// and carries the timings.
const LLAMA_COMPLETION: &[&str] = &[
    r#"{"index":0,"content":")?","tokens":[6877],"stop":false,"id_slot":-1,"tokens_predicted":1,"tokens_evaluated":2}"#,
    r#"{"index":0,"content":"drive","tokens":[21594],"stop":false,"id_slot":-1,"tokens_predicted":2,"tokens_evaluated":2}"#,
    r#"{"index":0,"content":"\u0004","tokens":[7],"stop":false,"id_slot":-1,"tokens_predicted":3,"tokens_evaluated":2}"#,
    r#"{"index":0,"content":"arsi","tokens":[16665],"stop":false,"id_slot":-1,"tokens_predicted":4,"tokens_evaluated":2}"#,
    r#"{"index":0,"content":"","tokens":[],"id_slot":1,"stop":true,"model":"/models/m.gguf","tokens_predicted":4,"tokens_evaluated":2,"generation_settings":{"stop":[],"n_predict":4,"stream":true},"prompt":"<s> hello","has_new_line":false,"truncated":false,"stop_type":"limit","stopping_word":"","tokens_cached":5,"timings":{"cache_n":0,"prompt_n":2,"prompt_ms":1.727,"prompt_per_token_ms":0.8635,"prompt_per_second":1158.0775911986102,"predicted_n":4,"predicted_ms":2.836,"predicted_per_token_ms":0.9453333333333332,"predicted_per_second":1057.8279266572638}}"#,
];

fn feed(route: Route, ctype: &str, body: &[(f64, String)], end: End, t_end: f64) -> (RequestRecord, u32) {
    let mut m = Meter::new(route, 0.0);
    m.request_body(br#"{"model":"m1","prompt":"hello","stream":true}"#);
    m.request_end();
    m.response_head(200, Some(ctype), None).unwrap();
    for (t, piece) in body {
        m.response_body(piece.as_bytes(), *t);
    }
    let faults = m.faults();
    (m.finish(end, t_end, 1_700_000_000.0, "t"), faults)
}

fn events(events: &[&str], times: &[f64]) -> Vec<(f64, String)> {
    times.iter().zip(events).map(|(t, e)| (*t, format!("data: {e}\n\n"))).collect()
}

fn near(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn llama_completion_stream_is_measured_to_its_stop_event() {
    let body = events(LLAMA_COMPLETION, &[0.3, 0.4, 0.5, 0.6, 0.65]);
    let (r, faults) = feed(Route::LlamaCompletion, "text/event-stream", &body, End::Eof, 0.7);
    assert_eq!(faults, 0);
    assert_eq!(r.status, Status::Ok, "the stop event ends the stream: no [DONE] comes");
    assert_eq!(r.model, "m1", "the request's model, not the file name the response names");
    assert!(near(r.ttft_s, 0.3));
    assert_eq!(r.output_tokens, Some(TokenCount { value: 4, exact: true }));
    assert_eq!(r.prompt_tokens, Some(2));
    assert!(near(r.tpot_s, 0.3 / 3.0), "{:?}", r.tpot_s);
    assert_eq!(r.itl.len(), 3);
    assert!(near(Some(r.e2e_s), 0.7), "no [DONE]: the end of the body");
    let e = r.engine.expect("the timings");
    assert_eq!(e.queue_s, None, "llama.cpp reports no queue time");
    assert!(near(e.prefill_s, 0.001727) && near(e.decode_s, 0.002836), "{e:?}");
}

#[test]
fn llama_completion_without_its_stop_event_is_truncated() {
    let body = events(&LLAMA_COMPLETION[..4], &[0.3, 0.4, 0.5, 0.6]);
    let (r, _) = feed(Route::LlamaCompletion, "text/event-stream", &body, End::Eof, 0.7);
    assert_eq!(r.status, Status::Truncated);
    assert_eq!(r.engine, None);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 4, exact: true }), "tokens_predicted is cumulative");
}

#[test]
fn llama_completion_not_streaming_has_counts_and_timings() {
    let body = r#"{"index":0,"content":"handle craftHER","tokens":[],"id_slot":1,"stop":true,"model":"/m.gguf","tokens_predicted":3,"tokens_evaluated":2,"timings":{"cache_n":1,"prompt_n":1,"prompt_ms":0.635,"predicted_n":3,"predicted_ms":1.016}}"#;
    let (r, faults) =
        feed(Route::LlamaCompletion, "application/json; charset=utf-8", &[(0.2, body.to_string())], End::Eof, 0.2);
    assert_eq!((faults, r.status, r.ttft_s), (0, Status::Ok, None));
    assert_eq!((r.output_tokens, r.prompt_tokens), (Some(TokenCount { value: 3, exact: true }), Some(2)));
    assert!(near(r.engine.and_then(|e| e.prefill_s), 0.000635));
}

#[test]
fn llama_chat_stream_carries_timings_on_its_finish_chunk() {
    let chunks = [
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"chatcmpl-IYT2","model":"/m.gguf","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" URLs"}}],"created":1,"id":"chatcmpl-IYT2","model":"/m.gguf","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" Trace"}}],"created":1,"id":"chatcmpl-IYT2","model":"/m.gguf","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,"id":"chatcmpl-IYT2","model":"/m.gguf","object":"chat.completion.chunk","timings":{"cache_n":0,"prompt_n":29,"prompt_ms":1.831,"predicted_n":2,"predicted_ms":4.751}}"#,
        "[DONE]",
    ];
    let body = events(&chunks, &[0.1, 0.2, 0.3, 0.3, 0.3]);
    let (r, faults) = feed(Route::ChatCompletions, "text/event-stream", &body, End::Eof, 0.4);
    assert_eq!((faults, r.status, r.request_id.as_deref()), (0, Status::Ok, Some("chatcmpl-IYT2")));
    assert!(near(r.ttft_s, 0.2));
    let e = r.engine.expect("the timings");
    assert!(near(e.prefill_s, 0.001831) && near(e.decode_s, 0.004751), "{e:?}");
}

#[test]
fn vllm_per_request_metrics_ride_on_the_usage_chunk() {
    let chunks = [
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","model":"m1","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","model":"m1","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","model":"m1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7},"metrics":{"time_to_first_token_ms":40.0,"generation_time_ms":20.0,"queue_time_ms":15.5,"mean_itl_ms":20.0,"tokens_per_second":33.3}}"#,
        "[DONE]",
    ];
    let body = events(&chunks, &[0.1, 0.12, 0.12, 0.12]);
    let (r, _) = feed(Route::ChatCompletions, "text/event-stream", &body, End::Eof, 0.12);
    let e = r.engine.expect("the metrics object");
    assert!(near(e.queue_s, 0.0155) && near(e.prefill_s, 0.04) && near(e.decode_s, 0.02), "{e:?}");

    // Not streaming: a top-level object; fields vLLM could not compute are null.
    let full = r#"{"id":"cmpl-1","object":"text_completion","model":"m1","choices":[{"index":0,"text":"hi","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1},"metrics":{"time_to_first_token_ms":500.0,"generation_time_ms":null,"queue_time_ms":null,"mean_itl_ms":null,"tokens_per_second":null}}"#;
    let (r, _) = feed(Route::Completions, "application/json", &[(1.0, full.to_string())], End::Eof, 1.0);
    assert_eq!(r.engine, Some(EngineTimes { queue_s: None, prefill_s: Some(0.5), decode_s: None }));
    let none = r#"{"id":"cmpl-1","choices":[{"index":0,"text":"hi","finish_reason":"stop"}],"metrics":null}"#;
    let (r, _) = feed(Route::Completions, "application/json", &[(1.0, none.to_string())], End::Eof, 1.0);
    assert_eq!(r.engine, None);
}

#[test]
fn odd_values_in_the_new_fields_never_spoil_an_event() {
    let chunks = [
        r#"{"choices":[{"index":0,"text":"a"}],"stop":"yes","tokens_predicted":"7","timings":"soon","metrics":[1]}"#,
        r#"{"choices":[{"index":0,"text":"b","finish_reason":"stop"}],"timings":{"prompt_ms":"x","predicted_ms":-1}}"#,
        "[DONE]",
    ];
    let body = events(&chunks, &[0.1, 0.2, 0.2]);
    let (r, faults) = feed(Route::Completions, "text/event-stream", &body, End::Eof, 0.2);
    assert_eq!((faults, r.status, r.engine), (0, Status::Ok, None));
    assert_eq!(r.output_tokens.map(|n| n.value), Some(2));
}
