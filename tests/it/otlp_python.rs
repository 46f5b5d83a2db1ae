//! The real OpenTelemetry Python SDK (its OTLP/HTTP exporter, protobuf, plain and gzip)
//! sends vLLM-shaped `llm_request` spans to a running daemon's receiver: every record
//! carries exactly the TTFT, E2E, TPOT and token counts sent, belongs to the target whose
//! service sent it, and what is not an LLM request or comes from an unknown service is
//! counted on /metrics instead of recorded.

use crate::common;
use crate::tools;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{get, metrics_samples};
use goodput::config;
use goodput::daemon::{self, clock::SystemClock};
use goodput::request::{EngineTimes, RequestRecord, Source, Status, TokenCount};
use serde_json::{Value, json};

/// Exports each group of spans from its own TracerProvider (its own `service.name`), as
/// vLLM does: `start_span("llm_request", kind=SERVER, start_time=arrival)`, attributes set
/// at creation, then a BatchSpanProcessor flushed.
const EXPORTER: &str = r#"
import json, sys
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.trace import SpanKind

spec = json.load(sys.stdin)
flushed = True
for group in spec["groups"]:
    provider = TracerProvider(resource=Resource.create({"service.name": group["service"]}))
    compression = Compression.Gzip if group["gzip"] else Compression.NoCompression
    exporter = OTLPSpanExporter(endpoint=spec["endpoint"], compression=compression, timeout=10)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("vllm.llm_engine")
    for s in group["spans"]:
        span = tracer.start_span(s["name"], kind=SpanKind.SERVER, attributes=s["attributes"], start_time=s["start_ns"])
        span.end(end_time=s["end_ns"])
    flushed = provider.force_flush(10000) and flushed
    provider.shutdown()
print("flushed" if flushed else "not flushed")
"#;

/// One request as the engine would describe it.
struct Case {
    ttft: f64,
    e2e: f64,
    queue: f64,
    prefill: f64,
    decode: f64,
    prompt: i64,
    completion: i64,
    /// `gen_ai.usage.input_tokens`/`output_tokens` instead of the old names.
    new_names: bool,
    model: Option<&'static str>,
    finish: Option<&'static str>,
}

impl Case {
    fn span(&self, start_ns: u64) -> Value {
        let (p, c) = if self.new_names {
            ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
        } else {
            ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens")
        };
        let mut attrs = json!({
            "gen_ai.latency.time_to_first_token": self.ttft,
            "gen_ai.latency.e2e": self.e2e,
            "gen_ai.latency.time_in_queue": self.queue,
            "gen_ai.latency.time_in_model_prefill": self.prefill,
            "gen_ai.latency.time_in_model_decode": self.decode,
            "gen_ai.latency.time_in_model_inference": self.prefill + self.decode,
            "gen_ai.request.id": format!("cmpl-{}", self.ttft),
            p: self.prompt,
            c: self.completion,
        });
        if let Some(m) = self.model {
            attrs["gen_ai.response.model"] = json!(m);
        }
        if let Some(f) = self.finish {
            attrs["gen_ai.response.finish_reasons"] = json!([f]);
        }
        json!({"name": "llm_request", "start_ns": start_ns, "end_ns": self.end_ns(start_ns), "attributes": attrs})
    }

    fn end_ns(&self, start_ns: u64) -> u64 {
        start_ns + (self.e2e * 1e9).round() as u64
    }

    fn record(&self, target: &str, model: &str, start_ns: u64) -> RequestRecord {
        let n = self.completion as u32;
        RequestRecord {
            source: Source::Otlp,
            target: target.into(),
            model: self.model.unwrap_or(model).into(),
            status: if self.finish == Some("abort") { Status::ClientAbort } else { Status::Ok },
            finished_unix: self.end_ns(start_ns) as f64 / 1e9,
            e2e_s: self.e2e,
            ttft_s: Some(self.ttft),
            tpot_s: (n >= 2).then(|| self.decode / f64::from(n - 1)),
            prompt_tokens: Some(self.prompt as u32),
            output_tokens: Some(TokenCount { value: n, exact: true }),
            itl: Vec::new(),
            engine: Some(EngineTimes {
                queue_s: Some(self.queue),
                prefill_s: Some(self.prefill),
                decode_s: Some(self.decode),
            }),
            request_id: Some(format!("cmpl-{}", self.ttft)),
        }
    }
}

fn case(ttft: f64, completion: i64) -> Case {
    Case {
        ttft,
        e2e: ttft + 0.02 * completion as f64,
        queue: ttft / 4.0,
        prefill: ttft / 2.0,
        decode: 0.02 * completion as f64,
        prompt: 512,
        completion,
        new_names: false,
        model: None,
        finish: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_spans_become_records_with_exactly_the_values_sent() {
    let Some(python) = tools::python_clients() else { return };
    goodput::scrape::install_crypto_provider();
    let down = common::Fixture::refused_addr().await;
    let yaml = format!(
        "listen: 127.0.0.1:0\notlp: {{listen: 127.0.0.1:0}}\ntargets:\n  \
         - {{name: llama, url: 'http://{down}/metrics', model: llama-3-8b}}\n  \
         - {{name: qwen, url: 'http://{down}/metrics', traces: {{service_name: vllm-qwen}}}}\n"
    );
    let cfg = config::from_str(&yaml, "otlp.yaml").expect("valid config").config;
    goodput::seen::keep_records();
    let d = daemon::start(cfg, Arc::new(SystemClock)).await.expect("daemon starts");
    let otlp = d.otlp_addr().expect("the receiver is bound");

    let start_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let llama = [case(0.123, 31), case(0.0875, 1), case(0.3, 0), Case { finish: Some("abort"), ..case(0.051, 7) }];
    let qwen = [
        Case { new_names: true, model: Some("Qwen/Qwen2.5-7B"), finish: Some("stop"), ..case(0.2345, 128) },
        Case { new_names: true, ..case(0.0042, 2) },
    ];
    let stranger = [case(0.999, 10)];
    let spans = |cases: &[Case]| cases.iter().map(|c| c.span(start_ns)).collect::<Vec<_>>();
    let mut llama_spans = spans(&llama);
    // An application span beside the engine's: not an LLM request, counted and skipped.
    llama_spans.push(json!({"name": "GET /health", "start_ns": start_ns, "end_ns": start_ns + 1000, "attributes": {"http.route": "/health"}}));
    let spec = json!({
        "endpoint": format!("http://{otlp}/v1/traces"),
        "groups": [
            {"service": "llama", "gzip": false, "spans": llama_spans},
            {"service": "vllm-qwen", "gzip": true, "spans": spans(&qwen)},
            {"service": "stranger", "gzip": false, "spans": spans(&stranger)},
        ],
    });
    let out = tokio::task::spawn_blocking(move || run_python(&python, &spec)).await.unwrap();
    assert!(out.contains("flushed"), "the exporter did not flush:\n{out}");

    let got: HashMap<String, RequestRecord> =
        d.otlp_records().into_iter().map(|r| (format!("{:?}", r.ttft_s), r)).collect();
    let want: Vec<RequestRecord> = llama
        .iter()
        .map(|c| c.record("llama", "llama-3-8b", start_ns))
        .chain(qwen.iter().map(|c| c.record("qwen", "qwen", start_ns)))
        .collect();
    assert_eq!(got.len(), want.len(), "records: {got:#?}\nexporter output:\n{out}");
    for w in &want {
        let g = got.get(&format!("{:?}", w.ttft_s)).unwrap_or_else(|| panic!("no record for {w:?}"));
        assert_eq!(g, w, "the record differs from what was sent");
    }
    // Spot checks that do not go through `Case::record`, the arithmetic spelled out.
    let first = &got[&format!("{:?}", Some(0.123))];
    assert_eq!(first.tpot_s, Some((0.02 * 31.0) / 30.0));
    assert_eq!(got[&format!("{:?}", Some(0.0875))].tpot_s, None, "one token has no TPOT");
    assert_eq!(got[&format!("{:?}", Some(0.051))].status, Status::ClientAbort);
    assert_eq!(got[&format!("{:?}", Some(0.2345))].output_tokens, Some(TokenCount { value: 128, exact: true }));

    let (status, body) = get(&format!("http://{}/metrics", d.local_addr())).await;
    assert_eq!(status, 200);
    let samples = metrics_samples(&body);
    let value = |name: &str, label: (&str, &str)| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && l.get(label.0).map(String::as_str) == Some(label.1))
            .map(|s| s.2)
            .unwrap_or_else(|| panic!("{name}{{{}={:?}}} missing from /metrics", label.0, label.1))
    };
    assert_eq!(value("llm_slo_otlp_spans_received_total", ("target", "llama")), 4.0);
    assert_eq!(value("llm_slo_otlp_spans_received_total", ("target", "qwen")), 2.0);
    assert_eq!(value("llm_slo_otlp_spans_dropped_total", ("reason", "unknown_service")), 1.0);
    assert_eq!(value("llm_slo_otlp_spans_dropped_total", ("reason", "not_llm_request")), 1.0);
    assert_eq!(value("llm_slo_otlp_spans_dropped_total", ("reason", "invalid")), 0.0);
    // One export per provider, unless the batch processor split one on its own timer.
    assert!(value("llm_slo_otlp_export_requests_total", ("result", "ok")) >= 3.0);
    assert_eq!(value("llm_slo_otlp_export_requests_total", ("result", "undecodable")), 0.0);

    d.shutdown().await;
    let refused = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(otlp)).await;
    assert!(matches!(refused, Ok(Err(_))), "the receiver still accepts connections after shutdown");
}

/// Runs the exporter script with `spec` on stdin; its stdout and stderr together.
fn run_python(python: &std::path::Path, spec: &Value) -> String {
    let mut child = Command::new(python)
        .args(["-c", EXPORTER])
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python exporter");
    child.stdin.take().unwrap().write_all(spec.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the Python exporter failed:\n{text}");
    text
}
