//! The span → record mapping on the attribute sets vLLM, TRT-LLM and SGLang write, old and
//! new semantic-convention names, missing and malformed values, 0- and 1-token requests.

use super::*;

const ARRIVAL_NS: u64 = 1_700_000_000_000_000_000;

/// vLLM's `llm_request` span (vllm/v1/engine/output_processor.py `do_tracing`).
fn vllm(completion_tokens: i64) -> SpanInput {
    let attrs = [
        (TTFT, AttrValue::Double(0.25)),
        (E2E, AttrValue::Double(1.75)),
        (QUEUE, AttrValue::Double(0.05)),
        (PREFILL, AttrValue::Double(0.2)),
        (DECODE, AttrValue::Double(1.5)),
        ("gen_ai.latency.time_in_model_inference", AttrValue::Double(1.7)),
        (PROMPT_TOKENS, AttrValue::Int(100)),
        (COMPLETION_TOKENS, AttrValue::Int(completion_tokens)),
        ("gen_ai.request.id", AttrValue::Str("cmpl-1".into())),
    ];
    SpanInput {
        name: "llm_request".into(),
        start_unix_nano: ARRIVAL_NS,
        end_unix_nano: ARRIVAL_NS + 1_750_000_000,
        error: false,
        attributes: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

fn with(mut s: SpanInput, key: &str, v: AttrValue) -> SpanInput {
    s.attributes.insert(key.to_string(), v);
    s
}

fn without(mut s: SpanInput, key: &str) -> SpanInput {
    s.attributes.remove(key);
    s
}

#[test]
fn a_vllm_span_maps_to_an_exact_record() {
    let r = record_from_span(&vllm(31)).unwrap();
    assert_eq!(r.source, Source::Otlp);
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.ttft_s, Some(0.25));
    assert_eq!(r.e2e_s, 1.75);
    // 1.5 s of decode over the 30 gaps between 31 tokens.
    assert_eq!(r.tpot_s, Some(0.05));
    assert_eq!(r.prompt_tokens, Some(100));
    assert_eq!(r.output_tokens, Some(TokenCount { value: 31, exact: true }));
    assert!(r.tpot_exact());
    assert_eq!(r.finished_unix, (ARRIVAL_NS + 1_750_000_000) as f64 / 1e9);
    assert_eq!(r.engine, Some(EngineTimes { queue_s: Some(0.05), prefill_s: Some(0.2), decode_s: Some(1.5) }));
    assert!(r.itl.is_empty());
    assert_eq!(r.model, "", "vLLM's span names no model; the receiver fills in the target's");
    assert_eq!(r.target, "");
    assert_eq!(r.request_id.as_deref(), Some("cmpl-1"));
    let long = with(vllm(31), "gen_ai.request.id", AttrValue::Str("x".repeat(crate::request::MAX_REQUEST_ID + 1)));
    assert_eq!(record_from_span(&long).unwrap().request_id, None, "an overlong id is left out");
    let odd = with(vllm(31), "gen_ai.request.id", AttrValue::Int(7));
    assert_eq!(record_from_span(&odd).unwrap().request_id, None, "a number is no id, and no error");
}

#[test]
fn current_semconv_token_names_are_read_and_win_over_the_old_ones() {
    let s = without(without(vllm(31), PROMPT_TOKENS), COMPLETION_TOKENS);
    let s = with(with(s, INPUT_TOKENS, AttrValue::Int(7)), OUTPUT_TOKENS, AttrValue::Int(11));
    let r = record_from_span(&s).unwrap();
    assert_eq!((r.prompt_tokens, r.output_tokens.map(|n| n.value)), (Some(7), Some(11)));
    assert_eq!(r.tpot_s, Some(0.15));

    let both = with(with(vllm(31), INPUT_TOKENS, AttrValue::Int(8)), OUTPUT_TOKENS, AttrValue::Int(16));
    let r = record_from_span(&both).unwrap();
    assert_eq!((r.prompt_tokens, r.output_tokens.map(|n| n.value)), (Some(8), Some(16)));
    assert_eq!(r.tpot_s, Some(0.1));
}

#[test]
fn zero_and_one_token_requests_have_no_tpot() {
    for n in [0, 1] {
        let r = record_from_span(&vllm(n)).unwrap();
        assert_eq!(r.tpot_s, None, "{n} tokens");
        assert_eq!(r.output_tokens, Some(TokenCount { value: n as u32, exact: true }));
    }
    let r = record_from_span(&vllm(2)).unwrap();
    assert_eq!(r.tpot_s, Some(1.5));
}

#[test]
fn missing_attributes_leave_their_fields_empty() {
    // SGLang's root span: TTFT, E2E and decode, no queue; tokens may be absent.
    let s = without(without(without(without(vllm(5), QUEUE), PREFILL), COMPLETION_TOKENS), PROMPT_TOKENS);
    let r = record_from_span(&s).unwrap();
    assert_eq!(r.tpot_s, None, "decode time without a token count gives no TPOT");
    assert_eq!((r.prompt_tokens, r.output_tokens), (None, None));
    assert_eq!(r.engine, Some(EngineTimes { queue_s: None, prefill_s: None, decode_s: Some(1.5) }));

    let bare = without(without(without(s, DECODE), TTFT), "gen_ai.latency.time_in_model_inference");
    let r = record_from_span(&bare).unwrap();
    assert_eq!((r.ttft_s, r.engine, r.e2e_s), (None, None, 1.75));
}

#[test]
fn e2e_and_the_end_time_fall_back_on_each_other() {
    let mut s = without(vllm(3), E2E);
    s.end_unix_nano = ARRIVAL_NS + 2_000_000_000;
    assert_eq!(record_from_span(&s).unwrap().e2e_s, 2.0, "the span's duration stands in for E2E");

    let mut s = vllm(3);
    s.end_unix_nano = 0;
    let r = record_from_span(&s).unwrap();
    assert_eq!(r.finished_unix, ARRIVAL_NS as f64 / 1e9 + 1.75, "start + e2e when the end is unknown");

    let mut s = without(vllm(3), E2E);
    s.end_unix_nano = 0;
    assert_eq!(record_from_span(&s), Err(NotRecorded::Invalid(E2E)));
    let mut s = vllm(3);
    (s.start_unix_nano, s.end_unix_nano) = (0, 0);
    assert_eq!(record_from_span(&s), Err(NotRecorded::Invalid("end_time_unix_nano")));
}

#[test]
fn spans_without_latency_attributes_are_not_llm_requests() {
    let mut s = SpanInput { name: "POST /v1/chat/completions".into(), ..Default::default() };
    s.attributes.insert(COMPLETION_TOKENS.into(), AttrValue::Int(3));
    s.attributes.insert("gen_ai.latencyx".into(), AttrValue::Double(1.0));
    s.attributes.insert("gen_ai.lat".into(), AttrValue::Double(1.0));
    assert_eq!(record_from_span(&s), Err(NotRecorded::NotLlmRequest));
    assert!(!SpanInput::default().is_llm_request());
    assert!(with(SpanInput::default(), QUEUE, AttrValue::Double(0.0)).is_llm_request());
}

#[test]
fn malformed_values_make_the_span_invalid_and_name_the_attribute() {
    for (key, v) in [
        (TTFT, AttrValue::Double(-0.1)),
        (TTFT, AttrValue::Double(f64::NAN)),
        (E2E, AttrValue::Double(f64::INFINITY)),
        (DECODE, AttrValue::Str("12.3ms".into())),
        (QUEUE, AttrValue::Bool(true)),
        (COMPLETION_TOKENS, AttrValue::Int(-1)),
        (COMPLETION_TOKENS, AttrValue::Double(2.5)),
        (PROMPT_TOKENS, AttrValue::Int(i64::from(u32::MAX) + 1)),
        (PROMPT_TOKENS, AttrValue::Other),
    ] {
        assert_eq!(record_from_span(&with(vllm(4), key, v.clone())), Err(NotRecorded::Invalid(key)), "{key} = {v:?}");
    }
    // Whole numbers written as doubles (a JSON exporter) and integer latencies are fine.
    let r = record_from_span(&with(with(vllm(4), COMPLETION_TOKENS, AttrValue::Double(4.0)), TTFT, AttrValue::Int(1)))
        .unwrap();
    assert_eq!((r.output_tokens.map(|n| n.value), r.ttft_s), (Some(4), Some(1.0)));
}

#[test]
fn finish_reasons_and_span_status_decide_the_status() {
    let reasons = |r: &[&str]| AttrValue::Array(r.iter().map(|s| AttrValue::Str(s.to_string())).collect());
    let status = |s: SpanInput| record_from_span(&s).unwrap().status;
    assert_eq!(status(with(vllm(4), FINISH_REASONS, reasons(&["stop"]))), Status::Ok);
    assert_eq!(status(with(vllm(4), FINISH_REASONS, reasons(&["length", "tool_calls"]))), Status::Ok);
    assert_eq!(status(with(vllm(4), FINISH_REASONS, reasons(&["abort"]))), Status::ClientAbort);
    assert_eq!(status(with(vllm(4), FINISH_REASONS, reasons(&["stop", "error"]))), Status::StreamError);
    assert_eq!(status(with(vllm(4), FINISH_REASONS, AttrValue::Str("ABORT".into()))), Status::ClientAbort);
    let mut failed = vllm(4);
    failed.error = true;
    assert_eq!(status(failed.clone()), Status::StreamError);
    assert_eq!(status(with(failed, FINISH_REASONS, reasons(&["abort"]))), Status::ClientAbort);
}

#[test]
fn the_model_comes_from_the_response_then_the_request() {
    let s = with(vllm(4), REQUEST_MODEL, AttrValue::Str("llama-requested".into()));
    assert_eq!(record_from_span(&s).unwrap().model, "llama-requested");
    let s = with(s, RESPONSE_MODEL, AttrValue::Str(" meta-llama/Llama-3.1-8B ".into()));
    assert_eq!(record_from_span(&s).unwrap().model, "meta-llama/Llama-3.1-8B");
    let s = with(vllm(4), RESPONSE_MODEL, AttrValue::Str("  ".into()));
    assert_eq!(record_from_span(&s).unwrap().model, "");
}

#[test]
fn a_model_name_past_the_label_limit_is_cut_where_it_enters() {
    let limit = crate::parse::MAX_LABEL_VALUE_BYTES;
    let huge = "m".repeat(3 << 20);
    let r = record_from_span(&with(vllm(4), RESPONSE_MODEL, AttrValue::Str(huge))).unwrap();
    assert_eq!(r.model.len(), limit + 1, "just past the limit: the store still sees it was too long");
    let fits = "n".repeat(limit);
    let r = record_from_span(&with(vllm(4), REQUEST_MODEL, AttrValue::Str(fits.clone()))).unwrap();
    assert_eq!(r.model, fits);
}
