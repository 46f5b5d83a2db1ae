//! The meter against each engine's wire format, every ending, and every way the network
//! may cut the bytes.

use super::*;

const VLLM_CHAT: &[&str] = &[
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama","choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}"#,
    r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama","choices":[],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4}}"#,
    "[DONE]",
];

/// `data: X\n\n` for each X.
fn sse(events: &[&str]) -> Vec<Vec<u8>> {
    events.iter().map(|e| format!("data: {e}\n\n").into_bytes()).collect()
}

/// Feeds `pieces` at the given times after a request at t = 0 and finishes at `t_end`.
fn measure(route: Route, ctype: &str, pieces: &[(f64, Vec<u8>)], end: End, t_end: f64) -> (RequestRecord, u32) {
    let mut m = Meter::new(route, 0.0);
    m.response_head(200, Some(ctype), None).unwrap();
    for (t, p) in pieces {
        m.response_body(p, *t);
    }
    let faults = m.faults();
    (m.finish(end, t_end, 1_700_000_000.0, "t"), faults)
}

fn timed(pieces: Vec<Vec<u8>>, times: &[f64]) -> Vec<(f64, Vec<u8>)> {
    times.iter().copied().zip(pieces).collect()
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

fn gaps(r: &RequestRecord) -> Vec<(f64, u32)> {
    r.itl.iter().map(|g| ((g.seconds * 1e6).round() / 1e6, g.tokens)).collect()
}

#[test]
fn vllm_chat_with_include_usage() {
    let pieces = timed(sse(VLLM_CHAT), &[0.5, 1.0, 1.1, 1.2, 1.25, 1.25, 1.3]);
    let (r, faults) = measure(Route::ChatCompletions, "text/event-stream; charset=utf-8", &pieces, End::Eof, 1.4);
    assert_eq!(faults, 0);
    assert_eq!(r.status, Status::Ok);
    assert_eq!((r.source, r.target.as_str(), r.model.as_str()), (Source::Tap, "t", "llama"));
    assert!(close(r.ttft_s, 1.0), "the role chunk at 0.5 is not a token: {:?}", r.ttft_s);
    assert!(close(Some(r.e2e_s), 1.3), "E2E ends at [DONE], not at the close: {}", r.e2e_s);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 4, exact: true }));
    assert_eq!(r.prompt_tokens, Some(5));
    assert!(close(r.tpot_s, 0.2 / 3.0), "{:?}", r.tpot_s);
    assert_eq!(gaps(&r), vec![(0.1, 1), (0.1, 1)]);
    assert_eq!(r.finished_unix, 1_700_000_000.0);
    assert_eq!(r.request_id.as_deref(), Some("c1"), "the response id pairs the record with the engine's");
}

#[test]
fn continuous_usage_counts_multi_token_chunks_exactly() {
    let events = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":9,"completion_tokens":0}}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"ab"}}],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"cde"}}],"usage":{"prompt_tokens":9,"completion_tokens":5}}"#,
        r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":6}}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":6}}"#,
        "[DONE]",
    ];
    let pieces = timed(sse(&events), &[0.2, 1.0, 1.5, 1.6, 1.6, 1.6]);
    let (r, _) = measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 1.6);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: true }));
    assert_eq!(gaps(&r), vec![(0.5, 3), (0.1, 1)], "the finish chunk raised the count: it carried the last token");
    assert!(close(r.tpot_s, 0.6 / 5.0));
    assert!(r.tpot_exact());
}

#[test]
fn without_usage_n_is_counted_and_marked_a_lower_bound() {
    let events: Vec<&str> = VLLM_CHAT.iter().copied().filter(|e| !e.contains("usage")).collect();
    let pieces = timed(sse(&events), &[0.5, 1.0, 1.1, 1.2, 1.25, 1.3]);
    let (r, _) = measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 1.3);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 3, exact: false }));
    assert!(close(r.tpot_s, 0.1));
    assert!(!r.tpot_exact());
    assert_eq!(r.prompt_tokens, None);
}

#[test]
fn a_total_riding_on_the_last_chunk_is_not_that_chunks_count() {
    let events = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"b"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"c"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3}}"#,
        "[DONE]",
    ];
    let pieces = timed(sse(&events), &[0.1, 0.2, 0.3, 0.3]);
    let (r, _) = measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 0.3);
    assert_eq!(gaps(&r), vec![(0.1, 1), (0.1, 1)], "the last chunk carried one token, not three");
    assert_eq!(r.output_tokens, Some(TokenCount { value: 3, exact: true }));
    assert_eq!(r.prompt_tokens, Some(2));
}

#[test]
fn token_ids_give_exact_per_event_counts() {
    let events = [
        r#"{"choices":[{"index":0,"text":"","token_ids":[]}]}"#,
        r#"{"choices":[{"index":0,"text":"ab","token_ids":[1,2]}]}"#,
        r#"{"choices":[{"index":0,"text":"","token_ids":[3]}]}"#,
        r#"{"choices":[{"index":0,"text":"c","token_ids":[4,5,6],"finish_reason":"stop"}]}"#,
        "[DONE]",
    ];
    let pieces = timed(sse(&events), &[0.1, 0.3, 0.4, 0.6, 0.6]);
    let (r, _) = measure(Route::Completions, "text/event-stream", &pieces, End::Eof, 0.7);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: true }));
    assert!(close(r.ttft_s, 0.3));
    assert_eq!(gaps(&r), vec![(0.1, 1), (0.2, 3)], "token ids without text still count");
}

#[test]
fn sglang_chat_reasoning_and_a_separate_finish_chunk() {
    let events = [
        r#"{"id":"s","object":"chat.completion.chunk","model":"qwen","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"id":"s","model":"qwen","choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}"#,
        r#"{"id":"s","model":"qwen","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}"#,
        r#"{"id":"s","model":"qwen","choices":[{"index":0,"delta":{},"finish_reason":"stop","matched_stop":2}]}"#,
        "[DONE]",
    ];
    let pieces = timed(sse(&events), &[0.9, 0.9, 1.0, 1.05, 1.05]);
    let (r, _) = measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 1.05);
    assert_eq!((r.status, r.model.as_str()), (Status::Ok, "qwen"));
    assert!(close(r.ttft_s, 0.9), "reasoning is output");
    assert_eq!(r.output_tokens, Some(TokenCount { value: 2, exact: false }));
}

#[test]
fn sglang_native_generate_counts_from_meta_info() {
    let events = [
        r#"{"text":"He","output_ids":[1],"meta_info":{"id":"a","finish_reason":null,"prompt_tokens":4,"completion_tokens":1}}"#,
        r#"{"text":"Hello","output_ids":[1,2,3],"meta_info":{"id":"a","finish_reason":null,"prompt_tokens":4,"completion_tokens":3}}"#,
        r#"{"text":"Hello!","output_ids":[1,2,3,4],"meta_info":{"id":"a","finish_reason":{"type":"length","length":4},"prompt_tokens":4,"completion_tokens":4}}"#,
        "[DONE]",
    ];
    let pieces = timed(sse(&events), &[0.4, 0.6, 0.7, 0.7]);
    let (r, _) = measure(Route::Generate, "text/event-stream", &pieces, End::Eof, 0.7);
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 4, exact: true }));
    assert_eq!(r.prompt_tokens, Some(4));
    assert_eq!(gaps(&r), vec![(0.2, 2), (0.1, 1)]);
    assert!(close(r.tpot_s, 0.3 / 3.0));
}

/// TGI: `data:` without a space, keep-alive comments, no `[DONE]`.
fn tgi(last: bool) -> Vec<Vec<u8>> {
    let mut out = vec![b":\n\n".to_vec()];
    for (i, t) in ["Hi", " there", "</s>"].iter().enumerate() {
        let special = *t == "</s>";
        let end = last && special;
        let gen_text = if end { r#""Hi there""# } else { "null" };
        let details = if end { r#"{"finish_reason":"eos_token","generated_tokens":3,"seed":null}"# } else { "null" };
        out.push(format!(
            "data:{{\"index\":{i},\"token\":{{\"id\":{i},\"text\":\"{t}\",\"logprob\":-0.1,\"special\":{special}}},\"generated_text\":{gen_text},\"details\":{details}}}\n\n"
        ).into_bytes());
        if i == 0 {
            out.push(b": keep-alive\n\n".to_vec());
        }
    }
    out
}

#[test]
fn tgi_generate_stream_ends_without_done() {
    let pieces = timed(tgi(true), &[0.3, 0.5, 0.6, 0.7, 0.8]);
    let (r, faults) = measure(Route::GenerateStream, "text/event-stream", &pieces, End::Eof, 0.9);
    assert_eq!((r.status, faults), (Status::Ok, 0));
    assert!(close(r.ttft_s, 0.5), "the comment at 0.3 is not a token");
    assert!(close(Some(r.e2e_s), 0.9), "no [DONE]: E2E ends at the end of the body");
    assert_eq!(r.output_tokens, Some(TokenCount { value: 3, exact: true }));
    assert_eq!(gaps(&r), vec![(0.2, 1), (0.1, 1)], "the keep-alive between tokens does not split a gap");
    let cut: Vec<Vec<u8>> = tgi(false);
    let (r, _) =
        measure(Route::GenerateStream, "text/event-stream", &timed(cut, &[0.3, 0.5, 0.6, 0.7, 0.8]), End::Eof, 0.9);
    assert_eq!(r.status, Status::Truncated, "no final event with generated_text");
}

#[test]
fn trtllm_trailing_space_and_empty_completion_iterations() {
    let pieces = vec![
        (0.1, b"data: {\"choices\":[{\"index\":0,\"text\":\"\"}],\"usage\":{\"completion_tokens\":0}} \n\n".to_vec()),
        (0.2, b"data: {\"choices\":[{\"index\":0,\"text\":\"\"}]} \n\n".to_vec()),
        (0.3, b"data: {\"choices\":[{\"index\":0,\"text\":\"x\"}],\"usage\":{\"completion_tokens\":1}}\n\n".to_vec()),
        (0.5, b"data: {\"choices\":[{\"index\":0,\"text\":\"y\",\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n".to_vec()),
    ];
    let (r, faults) = measure(Route::Completions, "text/event-stream", &pieces, End::Eof, 0.5);
    assert_eq!((r.status, faults), (Status::Ok, 0));
    assert!(close(r.ttft_s, 0.3), "an iteration with empty text is not a token");
    assert!(close(r.tpot_s, 0.2));
}

#[test]
fn in_band_errors_are_stream_errors() {
    let events = [
        VLLM_CHAT[0],
        VLLM_CHAT[1],
        r#"{"error":{"message":"boom","type":"InternalServerError","code":500}}"#,
        "[DONE]",
    ];
    let (r, _) = measure(
        Route::ChatCompletions,
        "text/event-stream",
        &timed(sse(&events), &[0.1, 0.2, 0.3, 0.3]),
        End::Eof,
        0.3,
    );
    assert_eq!(r.status, Status::StreamError);
    let tgi_err = vec![(
        0.1,
        b"data:{\"error\":\"Request failed during generation\",\"error_type\":\"generation\"}\n\n".to_vec(),
    )];
    let (r, _) = measure(Route::GenerateStream, "text/event-stream", &tgi_err, End::Eof, 0.1);
    assert_eq!(r.status, Status::StreamError);
}

#[test]
fn every_ending_is_classified() {
    let upto = |n: usize| timed(sse(&VLLM_CHAT[..n]), &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]);
    let status = |n: usize, end| measure(Route::ChatCompletions, "text/event-stream", &upto(n), end, 1.0).0.status;
    assert_eq!(status(3, End::Eof), Status::Truncated);
    assert_eq!(status(3, End::ClientAbort), Status::ClientAbort);
    assert_eq!(status(3, End::UpstreamReset), Status::UpstreamReset);
    assert_eq!(status(5, End::Eof), Status::Ok, "every choice finished: complete without [DONE]");
    assert_eq!(status(7, End::ClientAbort), Status::Ok, "a client leaving after [DONE] had it all");
    let mut cut = upto(3);
    cut.push((0.35, b"data: {\"choices\":[{\"ind".to_vec()));
    let (r, faults) = measure(Route::ChatCompletions, "text/event-stream", &cut, End::Eof, 0.4);
    assert_eq!((r.status, faults), (Status::Truncated, 0));
    assert!(close(Some(r.e2e_s), 0.4));
}

#[test]
fn http_errors_and_no_response_at_all() {
    let mut m = Meter::new(Route::ChatCompletions, 1.0);
    m.response_head(429, Some("application/json"), Some("gzip")).unwrap();
    m.response_body(br#"{"error":"busy"}"#, 1.2);
    let r = m.finish(End::Eof, 1.25, 0.0, "t");
    assert_eq!((r.status, r.ttft_s, r.output_tokens), (Status::HttpError(429), None, None));
    assert!(close(Some(r.e2e_s), 0.25));
    let r = Meter::new(Route::ChatCompletions, 1.0).finish(End::UpstreamReset, 1.5, 0.0, "t");
    assert_eq!((r.status, r.ttft_s), (Status::UpstreamReset, None));
    let r = Meter::new(Route::Completions, 1.0).finish(End::ClientAbort, 1.5, 0.0, "t");
    assert_eq!(r.status, Status::ClientAbort);
}

#[test]
fn non_streaming_json_gives_e2e_and_usage_only() {
    let body = br#"{"id":"x","object":"chat.completion","model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}"#;
    let (r, _) = measure(
        Route::ChatCompletions,
        "application/json",
        &[(0.5, body[..40].to_vec()), (0.6, body[40..].to_vec())],
        End::Eof,
        0.6,
    );
    assert_eq!((r.status, r.ttft_s, r.tpot_s), (Status::Ok, None, None));
    assert_eq!((r.prompt_tokens, r.output_tokens), (Some(7), Some(TokenCount { value: 2, exact: true })));
    assert_eq!((r.model.as_str(), r.request_id.as_deref()), ("llama", Some("x")));
    assert!(r.itl.is_empty() && close(Some(r.e2e_s), 0.6));
    let (r, _) = measure(
        Route::Completions,
        "application/json",
        &[(0.5, br#"{"object":"error","message":"x"}"#.to_vec())],
        End::Eof,
        0.5,
    );
    assert_eq!(r.status, Status::StreamError);
    let tgi = br#"{"generated_text":"hi","details":{"finish_reason":"length","generated_tokens":12}}"#;
    let (r, _) = measure(Route::Generate, "application/json", &[(0.5, tgi.to_vec())], End::Eof, 0.5);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 12, exact: true }));
    assert_eq!(r.request_id, None, "TGI names no id");
}

#[test]
fn bodies_the_meter_does_not_read() {
    let mut m = Meter::new(Route::ChatCompletions, 0.0);
    assert_eq!(m.response_head(200, Some("text/event-stream"), Some("gzip")), Err(Unmeasured::ContentEncoding));
    assert_eq!(m.response_head(200, Some("text/plain"), None), Err(Unmeasured::ContentType));
    assert_eq!(m.response_head(200, None, None), Err(Unmeasured::ContentType));
    assert_eq!(m.response_head(200, Some("application/problem+json"), Some("identity")), Ok(()));
    assert_eq!(m.response_head(503, Some("text/html"), Some("br")), Ok(()), "an error is a measured failure");
}

#[test]
fn the_request_names_the_model_up_to_the_cap() {
    let mut m = Meter::new(Route::ChatCompletions, 0.0);
    m.request_body(br#"{"model":"asked","#);
    m.request_body(br#""stream":true}"#);
    m.request_end();
    m.response_head(200, Some("text/event-stream"), None).unwrap();
    m.response_body(format!("data: {}\n\n", VLLM_CHAT[1]).as_bytes(), 0.1);
    assert_eq!(m.finish(End::Eof, 0.2, 0.0, "t").model, "asked", "the request's model, not the chunk's");

    let mut m = Meter::new(Route::ChatCompletions, 0.0);
    m.request_body(br#"{"model":"asked","x":""#);
    m.request_body(&vec![b'a'; body::MAX_REQUEST_BODY]);
    m.request_body(br#""}"#);
    m.request_end();
    m.response_head(200, Some("text/event-stream"), None).unwrap();
    m.response_body(format!("data: {}\n\n", VLLM_CHAT[1]).as_bytes(), 0.1);
    assert_eq!(m.faults(), 0, "a body over the cap is not a fault");
    assert_eq!(m.finish(End::Eof, 0.2, 0.0, "t").model, "llama", "over the cap: the model from the chunks");
}

#[test]
fn what_cannot_be_read_is_a_fault_not_a_failure() {
    let pieces = vec![(0.1, b"data: not json\n\n".to_vec()), (0.2, sse(&VLLM_CHAT[1..]).concat())];
    let (r, faults) = measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 0.3);
    assert_eq!((r.status, faults), (Status::Ok, 1));
    assert!(close(r.ttft_s, 0.2));
}

#[test]
fn several_choices_need_every_finish_and_have_no_tpot() {
    let events = [
        r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#,
        r#"{"choices":[{"index":1,"delta":{"content":"b"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"stop"}]}"#,
        r#"{"choices":[{"index":1,"delta":{"content":"d"},"finish_reason":"stop"}]}"#,
    ];
    let (r, _) = measure(
        Route::ChatCompletions,
        "text/event-stream",
        &timed(sse(&events[..3]), &[0.1, 0.2, 0.3]),
        End::Eof,
        0.3,
    );
    assert_eq!(r.status, Status::Truncated, "choice 1 never finished");
    let (r, _) = measure(
        Route::ChatCompletions,
        "text/event-stream",
        &timed(sse(&events), &[0.1, 0.2, 0.3, 0.4]),
        End::Eof,
        0.4,
    );
    assert_eq!((r.status, r.tpot_s), (Status::Ok, None));
}

#[test]
fn events_completed_by_one_read_share_its_time() {
    let pieces = vec![(0.7, sse(VLLM_CHAT).concat())];
    let (r, _) = measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 0.7);
    assert!(close(r.ttft_s, 0.7));
    assert_eq!(gaps(&r), vec![(0.0, 1), (0.0, 1)]);
    assert_eq!(r.tpot_s, Some(0.0));
}

fn split_record(input: &[u8], cuts: &[usize]) -> (RequestRecord, u32) {
    let mut pieces = Vec::new();
    let mut from = 0;
    for &c in cuts.iter().chain([&input.len()]) {
        pieces.push((1.0, input[from..c].to_vec()));
        from = c;
    }
    measure(Route::ChatCompletions, "text/event-stream", &pieces, End::Eof, 1.0)
}

/// Every engine's framing in one stream: CRLF, CR, no space, a trailing space, comments.
fn mixed_stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(b": ping\r\n\r\n");
    s.extend_from_slice(format!("data:{}\r\n\r\n", VLLM_CHAT[0]).as_bytes());
    s.extend_from_slice(format!("data: {} \r\r", VLLM_CHAT[1]).as_bytes());
    s.extend_from_slice(format!("data: {}\n\n", VLLM_CHAT[2]).as_bytes());
    for e in &VLLM_CHAT[3..] {
        s.extend_from_slice(format!("data: {e}\n\n").as_bytes());
    }
    s
}

#[test]
fn a_split_at_every_byte_gives_the_same_record() {
    let input = mixed_stream();
    let whole = split_record(&input, &[]);
    assert_eq!((whole.0.status, whole.0.output_tokens.map(|n| n.value), whole.1), (Status::Ok, Some(4), 0));
    for at in 0..=input.len() {
        assert_eq!(split_record(&input, &[at]), whole, "split at byte {at}");
    }
}

proptest::proptest! {
    #[test]
    fn any_splits_give_the_same_record(cuts in proptest::collection::vec(0usize..2000, 0..12)) {
        let input = mixed_stream();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(input.len())).collect();
        cuts.sort();
        proptest::prop_assert_eq!(split_record(&input, &cuts), split_record(&input, &[]));
    }
}

#[test]
fn a_model_name_past_the_label_limit_is_cut_where_it_enters() {
    let limit = crate::parse::MAX_LABEL_VALUE_BYTES;
    let body = format!(r#"{{"model":"{}","messages":[],"stream":true}}"#, "b".repeat(900 << 10));
    let mut m = Meter::new(Route::ChatCompletions, 0.0);
    m.request_body(body.as_bytes());
    m.request_end();
    m.response_head(404, Some("application/json"), None).unwrap();
    m.response_body(br#"{"error":{"message":"The model does not exist.","code":404}}"#, 0.1);
    let r = m.finish(End::Eof, 0.1, 1_700_000_000.0, "t");
    assert_eq!(r.status, Status::HttpError(404));
    assert_eq!(r.model.len(), limit + 1, "just past the limit: the store still sees it was too long");
    // A name from the response is cut the same way.
    let long = "r".repeat(limit * 2);
    let event = format!(r#"{{"id":"c1","model":"{long}","choices":[{{"index":0,"delta":{{"content":"x"}}}}]}}"#);
    let (r, _) = measure(
        Route::ChatCompletions,
        "text/event-stream",
        &timed(sse(&[&event, "[DONE]"]), &[0.1, 0.2]),
        End::Eof,
        0.3,
    );
    assert_eq!(r.model.len(), limit + 1);
}
