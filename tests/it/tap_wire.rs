//! The tap in front of real HTTP servers speaking each engine's wire format on a scripted
//! schedule: what the client receives through the tap is byte for byte what it receives
//! directly (status, headers, body), the upstream receives the same request, and each
//! record's TTFT, TPOT, ITL and token counts match the schedule.

use crate::tap_common;

use goodput::request::{RequestRecord, Status, TokenCount};
use tap_common::engines::{self, TIMING, Timing};
use tap_common::{Reply, Seen, TapUnder, Upstream, fetch, post, within};

/// Sends the same request directly and through the tap; asserts both sides of the exchange
/// are identical and returns the tap's record and the body.
async fn both_ways(engine: fn(&Seen, Timing) -> Reply, path: &str, json: &str) -> (RequestRecord, Vec<u8>) {
    let up = Upstream::start(move |s| engine(s, TIMING)).await;
    let tap = TapUnder::before(&up).await;
    let direct = fetch(up.addr, post(path, json)).await;
    let seen_direct = up.last();
    let tapped = fetch(tap.addr, post(path, json)).await;
    let seen_tapped = up.last();
    assert_eq!(tapped.status, direct.status);
    assert_eq!(tapped.end_to_end_headers(), direct.end_to_end_headers(), "{path}: headers differ");
    assert_eq!(tapped.text(), direct.text(), "{path}: body differs");
    assert_eq!(tapped.body, direct.body);
    assert!(!tapped.broken && !direct.broken);
    assert_eq!(seen_tapped.body, seen_direct.body, "the upstream got another request body");
    let headers = |s: &Seen| {
        let mut h: Vec<String> = s.headers.iter().map(|(k, v)| format!("{k}: {}", v.to_str().unwrap())).collect();
        h.sort();
        h
    };
    assert_eq!(headers(&seen_tapped), headers(&seen_direct), "the upstream got other request headers");
    assert_eq!((seen_tapped.method.as_str(), seen_tapped.path.as_str()), ("POST", path));
    let record = tap.record().await;
    assert_eq!(record.target, "engine");
    (record, tapped.body)
}

const CHAT_USAGE: &str = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#;

fn ms(x: u64) -> f64 {
    x as f64 / 1000.0
}

/// TTFT within 150 ms + scheduling noise; TPOT and the ITL gaps near their scripted values.
fn timing_ok(r: &RequestRecord, ttft: u64, tpot: f64, gaps: usize) {
    within("ttft", r.ttft_s.expect("a TTFT"), ms(ttft) - 0.002, ms(ttft) + 0.1);
    within("tpot", r.tpot_s.expect("a TPOT"), tpot * 0.9, tpot * 1.4 + 0.005);
    assert_eq!(r.itl.len(), gaps, "{:?}", r.itl);
    for g in &r.itl {
        within("itl gap", g.seconds, ms(TIMING.itl) * 0.6, ms(TIMING.itl) + 0.1);
    }
    assert!(r.e2e_s >= r.ttft_s.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vllm_chat_stream_with_usage() {
    let (r, body) = both_ways(engines::vllm, "/v1/chat/completions", CHAT_USAGE).await;
    assert!(String::from_utf8_lossy(&body).contains(r#""choices":[],"#), "the client asked for the usage event");
    assert_eq!((r.status, r.model.as_str(), r.prompt_tokens), (Status::Ok, "llama", Some(7)));
    assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: true }));
    timing_ok(&r, TIMING.ttft, ms(TIMING.itl), 5);
    assert!(r.itl.iter().all(|g| g.tokens == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vllm_completions_stream_without_usage_counts_a_lower_bound() {
    let json = r#"{"model":"llama","prompt":"hi","stream":true,"max_tokens":6}"#;
    let (r, _) = both_ways(engines::vllm, "/v1/completions", json).await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: false }));
    assert!(!r.tpot_exact());
    timing_ok(&r, TIMING.ttft, ms(TIMING.itl), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vllm_non_streaming_has_e2e_and_usage_only() {
    let json = r#"{"model":"llama","messages":[{"role":"user","content":"hi"}]}"#;
    let (r, body) = both_ways(engines::vllm, "/v1/chat/completions", json).await;
    assert!(String::from_utf8_lossy(&body).contains(&engines::text()));
    assert_eq!((r.status, r.ttft_s, r.tpot_s), (Status::Ok, None, None));
    assert_eq!((r.prompt_tokens, r.output_tokens), (Some(7), Some(TokenCount { value: 6, exact: true })));
    let e2e = ms(TIMING.ttft + 5 * TIMING.itl);
    within("e2e", r.e2e_s, e2e - 0.002, e2e + 0.1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sglang_generate_counts_from_meta_info_and_times_from_the_request() {
    let (r, _) = both_ways(engines::sglang_generate, "/generate", r#"{"text":"hi","stream":true}"#).await;
    assert_eq!((r.status, r.model.as_str()), (Status::Ok, ""));
    assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: true }));
    // The response head came with the first token: TTFT counts from the request anyway.
    timing_ok(&r, TIMING.ttft, ms(TIMING.itl), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sglang_chat_reasoning_is_output() {
    let (r, _) = both_ways(engines::sglang_chat, "/v1/chat/completions", CHAT_USAGE).await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 7, exact: true }));
    timing_ok(&r, TIMING.ttft, ms(TIMING.itl * 6) / 6.0, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tgi_generate_stream_without_done_or_space_and_with_keep_alives() {
    let (r, body) = both_ways(engines::tgi_generate_stream, "/generate_stream", r#"{"inputs":"hi"}"#).await;
    assert!(body.starts_with(b":\n\ndata:{"), "the keep-alive and the space-less data reached the client");
    assert_eq!(r.status, Status::Ok, "TGI sends no [DONE]: the final event ends it");
    assert_eq!(r.output_tokens, Some(TokenCount { value: 7, exact: true }));
    timing_ok(&r, TIMING.ttft, ms(TIMING.itl), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trtllm_multi_token_chunks_with_continuous_usage() {
    let (r, body) = both_ways(engines::trtllm_chat, "/v1/chat/completions", CHAT_USAGE).await;
    assert!(String::from_utf8_lossy(&body).contains("} \n\n"), "the trailing space reached the client");
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.output_tokens, Some(TokenCount { value: 6, exact: true }));
    assert_eq!(r.itl.iter().map(|g| g.tokens).collect::<Vec<_>>(), vec![2, 2]);
    // Three chunks 40 ms apart carry six tokens: TPOT = 80 ms / 5.
    timing_ok(&r, TIMING.ttft, 0.080 / 5.0, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keep_alive_connections_carry_many_requests_each_measured() {
    let up = Upstream::start(|s| engines::vllm(s, Timing { ttft: 5, itl: 1 })).await;
    let tap = TapUnder::before(&up).await;
    // One client connection, several requests in sequence.
    let stream = tokio::net::TcpStream::connect(tap.addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    for _ in 0..5 {
        use http_body_util::BodyExt;
        sender.ready().await.expect("the connection stays open between requests");
        let resp = sender.send_request(post("/v1/chat/completions", CHAT_USAGE)).await.unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(body.ends_with(b"data: [DONE]\n\n"));
    }
    // A connection goes back to the pool a moment after its response ends, so on a busy
    // machine the next request may open another; fewer than one per request proves reuse.
    assert!(up.connections() < 5, "the tap reused pooled upstream connections: {} for 5 requests", up.connections());
    let records = tap.records(5).await;
    assert_eq!(records.len(), 5);
    assert!(records.iter().all(|r| r.status == Status::Ok && r.output_tokens.unwrap().value == 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_event_reaches_the_client_when_the_upstream_sends_it() {
    use tap_common::{send, wait_ms};
    // One event every 100 ms: a tap that held bytes back would deliver them late or together.
    let up = Upstream::start(|_| {
        let mut steps = Vec::new();
        for i in 0..5 {
            steps.push(wait_ms(100));
            steps.push(send(format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"{i}\"}}]}}\n\n")));
        }
        steps.push(send("data: [DONE]\n\n"));
        Reply::new(200, "text/event-stream", steps)
    })
    .await;
    let tap = TapUnder::before(&up).await;
    let got = fetch(tap.addr, post("/v1/completions", r#"{"prompt":"x","stream":true}"#)).await;
    let events: Vec<f64> =
        got.frames.iter().filter(|(_, b)| b.starts_with(b"data: {")).map(|(t, _)| t.as_secs_f64()).collect();
    assert_eq!(events.len(), 5, "one frame per event: {:?}", got.frames);
    for (i, t) in events.iter().enumerate() {
        let due = 0.1 * (i + 1) as f64;
        within(&format!("event {i} arrival"), *t, due - 0.002, due + 0.03);
    }
    assert_eq!(tap.record().await.status, Status::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_streams_are_each_relayed_and_measured() {
    let up = Upstream::start(|s| engines::vllm(s, Timing { ttft: 30, itl: 10 })).await;
    let tap = TapUnder::before(&up).await;
    let want = fetch(up.addr, post("/v1/chat/completions", CHAT_USAGE)).await.body;
    let addr = tap.addr;
    let clients: Vec<_> = (0..64)
        .map(|_| tokio::spawn(async move { fetch(addr, post("/v1/chat/completions", CHAT_USAGE)).await }))
        .collect();
    for c in clients {
        assert_eq!(c.await.unwrap().body, want);
    }
    let records = tap.records(64).await;
    assert_eq!(records.len(), 64);
    for r in &records {
        assert_eq!((r.status, r.output_tokens), (Status::Ok, Some(TokenCount { value: 6, exact: true })));
        within("ttft", r.ttft_s.unwrap(), 0.028, 0.5);
    }
}
