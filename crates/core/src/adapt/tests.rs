use super::*;
use crate::canonical::{CounterKind, FinishReason, GaugeKind, HistogramKind, WarningReason};
use crate::parse::{Limits, parse};

fn snap(body: &str, hint: EngineHint) -> Snapshot {
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    adapt(&exp, hint, "default").unwrap()
}

pub(super) const DP: &str = r#"# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 3.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 0.2
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{engine="1",model_name="m"} 1.7e9
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 9.0
vllm:time_per_output_token_seconds_count{engine="0",model_name="m"} 9.0
vllm:time_per_output_token_seconds_sum{engine="0",model_name="m"} 1.0
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 9.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 9.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 1.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 4.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1.0
# TYPE vllm:request_success_created gauge
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.6e9
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.7
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.5
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.7
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100",model_name="m"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 5.0
process_start_time_seconds 1.5e9
"#;

#[test]
fn data_parallel_ranks_stay_separate_shards() {
    let s = snap(DP, EngineHint::Auto);
    assert_eq!(s.engine, Engine::Vllm);
    assert_eq!(s.process_start, Some(1.5e9));
    let m = &s.models["m"];
    let ttft = &m.histograms[&HistogramKind::Ttft];
    assert_eq!(ttft.len(), 2);
    assert_eq!(ttft[0].key, r#"engine="0""#);
    assert_eq!(ttft[1].created, Some(1.7e9));
    assert_eq!(ttft[0].created, None);
    let total = m.histogram_total(HistogramKind::Ttft).unwrap();
    assert_eq!((total.count, total.sum), (5.0, 0.7));
    assert_eq!(total.buckets[0].count, 4.0);
    assert_eq!(total.buckets[1].le, f64::INFINITY);
}

#[test]
fn renamed_families_are_read_once() {
    let m = &snap(DP, EngineHint::Auto).models["m"];
    // Both ITL names carry the same data; counting both would double it.
    assert_eq!(m.histogram_total(HistogramKind::Itl).unwrap().count, 9.0);
    assert!(!m.has_histogram(HistogramKind::Tpot), "per-step ITL must never become TPOT");
    assert_eq!(m.gauges[&GaugeKind::KvCacheUsage].len(), 2);
    assert!((m.gauge_total(GaugeKind::KvCacheUsage).unwrap() - 0.6).abs() < 1e-12);
    assert_eq!(m.gauge_total(GaugeKind::KvCapacityTokens), Some(1600.0));
    assert_eq!(m.spec_accepted_per_position[&1][0].value, 5.0);
}

#[test]
fn finish_reasons_and_created() {
    let m = &snap(DP, EngineHint::Auto).models["m"];
    let fin = &m.counters[&CounterKind::RequestsFinished];
    assert_eq!(fin.len(), 2);
    let abort = fin.iter().find(|s| s.value.reason == Some(FinishReason::Abort)).unwrap();
    assert_eq!(abort.value.value, 1.0);
    let stop = fin.iter().find(|s| s.value.reason == Some(FinishReason::Stop)).unwrap();
    assert_eq!(stop.created, Some(1.6e9));
}

#[test]
fn unknown_scrape_is_an_error_that_says_what_to_do() {
    let exp = parse(b"node_cpu_seconds_total 1\n", &Limits::default()).unwrap();
    let e = adapt(&exp, EngineHint::Auto, "").unwrap_err();
    assert!(e.to_string().contains("set `engine:`"), "{e}");
    let exp = parse(b"tgi_queue_size 1\n", &Limits::default()).unwrap();
    let e = adapt(&exp, EngineHint::Is(Engine::Vllm), "").unwrap_err();
    assert!(e.to_string().contains("engine: vllm"), "{e}");
}

#[test]
fn sglang_gauges_read_rank_zero_only() {
    let body = "sglang:num_running_reqs{model_name=\"q\",tp_rank=\"0\"} 4\n\
                sglang:num_running_reqs{model_name=\"q\",tp_rank=\"1\"} 4\n";
    let m = &snap(body, EngineHint::Auto).models["q"];
    assert_eq!(m.gauge_total(GaugeKind::Running), Some(4.0));
}

#[test]
fn tgi_uses_the_default_model_and_has_no_ttft() {
    let body = "tgi_request_success 3\ntgi_request_failure{err=\"validation\"} 2\ntgi_queue_size 1\n\
                tgi_request_mean_time_per_token_duration_bucket{le=\"+Inf\"} 3\n";
    let s = snap(body, EngineHint::Auto);
    assert_eq!(s.engine, Engine::Tgi);
    let m = &s.models["default"];
    assert!(!m.has_histogram(HistogramKind::Tpot));
    let failed: f64 = m.counters[&CounterKind::RequestsFinished]
        .iter()
        .filter(|s| s.value.reason.is_some_and(FinishReason::is_failure))
        .map(|s| s.value.value)
        .sum();
    assert_eq!(failed, 2.0);
    assert!(s.absent().contains(&"ttft"));
}

/// A vLLM TTFT histogram with `buckets` (le, count) and an E2E histogram that is sound.
fn ttft_with(buckets: &[(&str, &str)]) -> String {
    let mut s = String::from("# TYPE vllm:time_to_first_token_seconds histogram\n");
    for (le, c) in buckets {
        s.push_str(&format!("vllm:time_to_first_token_seconds_bucket{{le=\"{le}\",model_name=\"m\"}} {c}\n"));
    }
    s.push_str("vllm:time_to_first_token_seconds_count{model_name=\"m\"} 10\n");
    s.push_str("vllm:time_to_first_token_seconds_sum{model_name=\"m\"} 1.5\n");
    s.push_str("# TYPE vllm:e2e_request_latency_seconds histogram\n");
    s.push_str("vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 10\n");
    s.push_str("vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 10\n");
    s
}

fn reasons(s: &Snapshot) -> Vec<WarningReason> {
    s.warnings.iter().map(|w| w.reason).collect()
}

#[test]
fn a_histogram_without_inf_is_dropped_with_a_warning() {
    // With the +Inf bucket missing, the last bucket (le=0.5) would pass for the request
    // count; the histogram is unusable instead, so its SLO clauses are not evaluated.
    let s = snap(&ttft_with(&[("0.1", "4"), ("0.5", "8")]), EngineHint::Auto);
    assert_eq!(reasons(&s), [WarningReason::HistogramWithoutInf]);
    assert!(s.warnings[0].message.contains("vllm:time_to_first_token_seconds for model \"m\""), "{:?}", s.warnings);
    assert!(!s.models["m"].has_histogram(HistogramKind::Ttft));
    assert!(s.models["m"].has_histogram(HistogramKind::E2e), "the sound histogram stays");

    let sound = snap(&ttft_with(&[("0.1", "4"), ("+Inf", "10")]), EngineHint::Auto);
    assert!(sound.warnings.is_empty(), "{:?}", sound.warnings);
    assert!(sound.models["m"].has_histogram(HistogramKind::Ttft));
}

#[test]
fn a_nan_bucket_drops_the_histogram_with_a_warning() {
    let s = snap(&ttft_with(&[("0.1", "NaN"), ("+Inf", "10")]), EngineHint::Auto);
    assert_eq!(reasons(&s), [WarningReason::NanBucket]);
    assert!(s.warnings[0].message.contains("NaN count in bucket le=\"0.1\""), "{:?}", s.warnings);
    assert!(!s.models["m"].has_histogram(HistogramKind::Ttft));
}

#[test]
fn duplicate_series_are_a_warning_and_the_first_sample_wins() {
    let mut body = ttft_with(&[("0.1", "4"), ("+Inf", "10")]);
    body.push_str("vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 99\n");
    let s = snap(&body, EngineHint::Auto);
    assert_eq!(reasons(&s), [WarningReason::DuplicateSeries]);
    assert!(s.warnings[0].message.starts_with("1 duplicate series ignored"), "{:?}", s.warnings);
    assert_eq!(s.models["m"].histogram_total(HistogramKind::E2e).unwrap().count, 10.0);
}

#[test]
fn warning_reasons_are_distinct_label_values() {
    let names: std::collections::BTreeSet<&str> = WarningReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.len(), WarningReason::ALL.len());
    assert!(names.iter().all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
}

#[test]
fn a_model_limit_refuses_before_building_and_counts_them_all() {
    let mut body = String::from("# TYPE vllm:num_requests_running gauge\n");
    for i in 0..50 {
        body.push_str(&format!("vllm:num_requests_running{{model_name=\"m{i}\"}} 1\n"));
    }
    let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
    assert_eq!(adapt_bounded(&exp, EngineHint::Auto, "", 50).unwrap().models.len(), 50);
    let e = adapt_bounded(&exp, EngineHint::Auto, "", 49).unwrap_err();
    assert_eq!(e, AdaptError::TooManyModels { found: 50, limit: 49 });
}
