//! Every real scrape in the fixtures (tests/fixtures/real) parses, and the
//! parser's view of it agrees with counts and values read off the file by simple line
//! filters that share no code with the parser.

use crate::tools;

use goodput::parse::{Exposition, Limits, MetricType, parse, parse_f64};

fn fixtures() -> Vec<(String, String)> {
    let dir = tools::real_fixtures();
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("read fixtures dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "prom"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 10, "expected the real fixtures, found {} in {}", out.len(), dir.display());
    out
}

fn fixture(name: &str) -> String {
    fixtures().into_iter().find(|(n, _)| n == name).map(|(_, t)| t).unwrap_or_else(|| panic!("no fixture {name}"))
}

/// Sample lines by the simplest possible filter: not blank, not a comment.
fn sample_lines(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// The value token of a sample line, found independently: the first blank-separated token
/// after the label set (none of the fixtures has a space inside a label value followed by
/// a closing brace, which the assertion on counts below would catch).
fn value_token(line: &str) -> &str {
    let after = match line.rfind('}') {
        Some(i) => &line[i + 1..],
        None => line.split_once(' ').map_or("", |(_, r)| r),
    };
    after.split_whitespace().next().unwrap_or("")
}

fn find(e: &Exposition<'_>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let hits: Vec<f64> = e
        .samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| e.label(s, k) == Some(v)))
        .map(|s| s.value)
        .collect();
    assert_eq!(hits.len(), 1, "{name}{labels:?}");
    hits[0]
}

#[test]
fn every_fixture_parses_and_agrees_with_a_line_filter() {
    for (name, text) in fixtures() {
        let e = parse(text.as_bytes(), &Limits::default()).unwrap_or_else(|err| panic!("{name}: {err}"));
        let lines = sample_lines(&text);
        assert!(!lines.is_empty(), "{name}");
        assert!(e.duplicates.is_empty(), "{name}: {:?}", e.duplicates);
        assert_eq!(e.samples.len(), lines.len(), "{name}: sample count");
        let typed: std::collections::BTreeSet<&str> =
            text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split(' ').next()).collect();
        for t in &typed {
            let f = e.families.iter().find(|f| f.name == *t).unwrap_or_else(|| panic!("{name}: family {t}"));
            let declared = text.lines().find_map(|l| l.strip_prefix(&format!("# TYPE {t} "))).unwrap();
            assert_eq!(f.kind.as_str(), declared.trim().replace("unknown", "untyped"), "{name}: {t}");
        }
        assert_eq!(e.families.iter().map(|f| f.samples).sum::<usize>(), e.samples.len(), "{name}");
        for (s, (lineno, line)) in e.samples.iter().zip(&lines) {
            assert_eq!(s.line as usize, *lineno, "{name}");
            assert!(line.starts_with(s.name), "{name}:{lineno}: {} vs {line}", s.name);
            let want = parse_f64(value_token(line)).unwrap_or_else(|| panic!("{name}:{lineno}: value of {line}"));
            assert!(want.to_bits() == s.value.to_bits() || (want.is_nan() && s.value.is_nan()), "{name}:{lineno}");
            let braces = line.matches('=').count();
            assert!(e.labels_of(s).len() <= braces, "{name}:{lineno}");
            let fam = e.family_of(s);
            assert!(s.name.starts_with(fam.name), "{name}:{lineno}: {} not in {}", s.name, fam.name);
        }
    }
}

#[test]
fn histogram_families_own_their_bucket_sum_count_lines() {
    for (name, text) in fixtures() {
        let e = parse(text.as_bytes(), &Limits::default()).unwrap();
        for f in e.families.iter().filter(|f| f.kind == MetricType::Histogram) {
            let expected = sample_lines(&text)
                .iter()
                .filter(|(_, l)| {
                    let n = l.split(['{', ' ']).next().unwrap();
                    [format!("{}_bucket", f.name), format!("{}_sum", f.name), format!("{}_count", f.name)]
                        .iter()
                        .any(|x| x == n)
                })
                .count();
            assert_eq!(f.samples, expected, "{name}: {}", f.name);
            let buckets = e.samples.iter().filter(|s| s.name.ends_with("_bucket") && e.family_of(s).name == f.name);
            for b in buckets {
                assert!(e.label_f64(b, "le").is_some(), "{name}: {} has no numeric le", f.name);
            }
        }
    }
}

#[test]
fn hand_read_values() {
    let m = [("engine", "0"), ("model_name", "Qwen/Qwen3-0.6B")];
    {
        let t = fixture("vllm-v1-0.13ish-dynamo-vllm-only.prom");
        let e = parse(t.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(find(&e, "vllm:time_to_first_token_seconds_count", &m), 2.0);
        assert_eq!(find(&e, "vllm:time_to_first_token_seconds_sum", &m), 0.4143967628479004);
        assert_eq!(find(&e, "vllm:generation_tokens_total", &m), 600.0);
        assert_eq!(find(&e, "vllm:prompt_tokens_created", &m), 1.768264339889982e9);
        let created = e.families.iter().find(|f| f.name == "vllm:iteration_tokens_total_created").unwrap();
        assert_eq!(created.kind, MetricType::Gauge);
        let hist = e.families.iter().find(|f| f.name == "vllm:iteration_tokens_total").unwrap();
        assert_eq!(hist.kind, MetricType::Histogram);
    }
    {
        let t = fixture("tgi-3.3.5-datadog-hugging_face_tgi.prom");
        let e = parse(t.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(find(&e, "tgi_request_queue_duration_count", &[]), 109.0);
        assert_eq!(find(&e, "tgi_request_queue_duration_sum", &[]), 295.275961956);
        assert_eq!(find(&e, "tgi_request_success", &[]), 109.0);
    }
    {
        let t = fixture("dcgm-exporter-linode-lke-ai-conformance.prom");
        let e = parse(t.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(find(&e, "DCGM_FI_DEV_SM_CLOCK", &[("gpu", "0")]), 2310.0);
        assert_eq!(find(&e, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", &[("gpu", "0")]), 455497156.0);
        let s = e.samples.iter().find(|s| s.name == "DCGM_FI_DEV_GPU_UTIL").unwrap();
        assert_eq!(e.label(s, "pci_bus_id"), Some("00000000:00:02.0"));
        assert_eq!(e.label(s, "pod_uid"), Some(""));
    }
    {
        let t = fixture("dynamo-frontend-2026-01-fe.prom");
        let e = parse(t.as_bytes(), &Limits::default()).unwrap();
        let m = [("model", "qwen/qwen3-0.6b")];
        assert_eq!(find(&e, "dynamo_frontend_time_to_first_token_seconds_sum", &m), 1.5625701570000001);
        assert_eq!(find(&e, "dynamo_frontend_inter_token_latency_seconds_count", &m), 299.0);
        assert_eq!(find(&e, "dynamo_frontend_time_to_first_token_seconds_bucket", &[("le", "0")]), 0.0);
        let l = [("endpoint", "chat_completions"), ("request_type", "unary"), ("status", "success")];
        assert_eq!(find(&e, "dynamo_frontend_requests_total", &l), 1.0);
        let total = e.families.iter().find(|f| f.name == "dynamo_frontend_requests_total").unwrap();
        assert_eq!(total.kind, MetricType::Counter);
    }
    {
        let t = fixture("sglang-0.5.x-dynamo-sglang-only.prom");
        let e = parse(t.as_bytes(), &Limits::default()).unwrap();
        let l = [("model_name", "Qwen/Qwen3-0.6B"), ("tp_rank", "0")];
        assert_eq!(find(&e, "sglang:token_usage", &l), 0.0);
    }
}
