//! /metrics renders the same text as before it was written straight from the report: the
//! golden files were rendered by the sample-list renderer (`ExportSample` per sample, joined
//! text) from a report with every kind of family (tests/it/render_support), and the renderer
//! must reproduce them byte for byte: family order, HELP and TYPE, label order, escaping,
//! external labels and number formatting. `goodput replay`'s sample list must not change
//! either. `GOODPUT_UPDATE_GOLDEN=1` rewrites the files (only for an intended change); they are
//! gzipped, `zcat tests/golden/metrics_render.prom.gz` shows one.

use crate::render_support;

use std::io::{Read, Write};
use std::path::PathBuf;

use goodput::export;
use goodput::serve;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

/// The build info names this build's commit, which the golden file cannot know.
fn without_build_info(text: &str) -> String {
    text.lines().filter(|l| !l.starts_with("llm_slo_build_info{")).flat_map(|l| [l, "\n"]).collect()
}

/// Compares `got` with the golden file `name`, kept gzipped (`zcat` shows it).
fn check(name: &str, got: &str) {
    let path = golden(&format!("{name}.gz"));
    if std::env::var_os("GOODPUT_UPDATE_GOLDEN").is_some() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(got.as_bytes()).unwrap();
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
    }
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut want = String::new();
    flate2::read::GzDecoder::new(&raw[..]).read_to_string(&mut want).expect("a gzipped golden file");
    if got != want {
        let out = std::env::temp_dir().join(format!("goodput-{name}"));
        std::fs::write(&out, got).unwrap();
        let line = got.lines().zip(want.lines()).position(|(a, b)| a != b).map_or(0, |i| i + 1);
        panic!("{name} differs from {} from line {line}; this rendering is in {}", path.display(), out.display());
    }
}

#[test]
fn the_rendering_of_a_report_with_every_family_is_unchanged() {
    let report = render_support::report(4);
    let external = render_support::external_labels();
    let text = serve::render_report(&report, &external);
    // Every kind of series is in it, so that the golden file covers each writer.
    for family in [
        "llm_slo_ttft_seconds{",
        "llm_slo_quantile_bracket_seconds{",
        "llm_slo_attainment_ratio{",
        "llm_slo_kv_cache_band{",
        "llm_slo_target_info{",
        "llm_slo_request_window_coverage_ratio{",
        "llm_slo_ttft_gap_seconds{",
        "llm_slo_requests_total{",
        "llm_slo_request_inbox_records_total{",
        "llm_slo_error_budget_remaining_ratio{",
        "llm_slo_capacity_request_rate{",
        "llm_slo_alert{",
        "llm_slo_alert_rule_ready{",
        "llm_slo_gpu_throttle_reasons{",
        "llm_slo_mfu_ratio{",
        "llm_slo_objective_ratio{",
        "llm_slo_build_info{",
    ] {
        assert!(text.lines().any(|l| l.starts_with(family)), "no {family} in the rendering");
    }
    assert!(text.contains("target=\"engine-\\\"000\\\"\\\\a\""), "the escaped target name");
    assert!(text.contains("pod=\"vllm-1\",cluster="), "the target's own pod wins over the external one");
    check("metrics_render.prom", &without_build_info(&text));
    // Without external labels too: the writer takes another path for samples without labels.
    check("metrics_render_plain.prom", &without_build_info(&serve::render_report(&report, &[])));
}

#[test]
fn the_sample_list_of_replay_is_unchanged() {
    let report = render_support::report(4);
    let samples = export::samples(&report);
    let text: String = samples
        .iter()
        .map(|s| {
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            format!("{} {} {:?}\n", s.name, labels.join(","), s.value)
        })
        .collect();
    check("export_samples.txt", &text);
}
