//! `goodput inspect SOURCE [--format text|json]`: parse one exposition, detect the
//! engine, and print what goodput reads from it on the canonical vocabulary.
//!
//! The JSON shape is a contract (docs/engines.md#canonical-quantities):
//! `{"engine", "families", "samples", "models": {model: {canonical: value}}, "absent", "warnings",
//! "notes"}`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::subcommand::CliResult;
use crate::adapt::{self, EngineHint};
use crate::canonical::{Engine, Histogram, ModelSnapshot, Snapshot};
use crate::gpu::dcgm;
use crate::parse::{self, Limits};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A file path, or an http(s) URL of a /metrics endpoint.
    pub source: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// The engine, when auto-detection should be skipped.
    #[arg(long, default_value = "auto", value_parser = parse_hint)]
    pub engine: EngineHint,
    /// Model name for engines whose metrics carry none (TGI, llama.cpp).
    #[arg(long, default_value = "")]
    pub model: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A summary for people: per model, each canonical quantity.
    Text,
    /// The JSON contract of docs/engines.md#canonical-quantities, for programs.
    Json,
}

pub(crate) fn parse_hint(s: &str) -> Result<EngineHint, String> {
    if s == "auto" {
        return Ok(EngineHint::Auto);
    }
    Engine::parse(s).map(EngineHint::Is).ok_or_else(|| {
        let names: Vec<&str> = Engine::ALL.iter().map(|e| e.as_str()).collect();
        format!("unknown engine {s:?}; expected auto or one of {}", names.join(", "))
    })
}

pub fn run(args: Args) -> CliResult {
    let (body, content_type) = read_source(&args.source)?;
    if let Some(why) = not_an_exposition(&args.source, content_type.as_deref(), &body) {
        return Err(why.into());
    }
    let exp = match parse::parse(&body, &Limits::unlimited()) {
        Ok(e) => e,
        Err(e) if e.line > 0 => return Err(format!("{}:{}: {}", args.source, e.line, e.kind).into()),
        Err(e) => return Err(format!("{}: {}", args.source, e.kind).into()),
    };
    let out = if matches!(args.engine, EngineHint::Auto) && adapt::detect(&exp).is_none() && dcgm::is_dcgm(&exp) {
        dcgm_json(&exp)
    } else {
        let snap = adapt::adapt(&exp, args.engine, &args.model).map_err(|e| format!("{}: {e}", args.source))?;
        snapshot_json(&snap)
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&out)?),
        Format::Text => print!("{}", text(&out)),
    }
    Ok(0)
}

/// The body, and its Content-Type when it came over HTTP.
type Source = (Vec<u8>, Option<String>);

fn read_source(source: &str) -> Result<Source, Box<dyn std::error::Error + Send + Sync>> {
    if source.starts_with("http://") || source.starts_with("https://") {
        crate::scrape::install_crypto_provider();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async {
            let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build()?;
            let resp = client.get(source).send().await?.error_for_status()?;
            let content_type =
                resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
            Ok((resp.bytes().await?.to_vec(), content_type))
        })
        // reqwest's own message is "error sending request"; the chain says why (refused,
        // no such host, a timeout).
        .map_err(|e: reqwest::Error| crate::redact::error_chain(&e).into())
    } else {
        Ok((std::fs::read(source).map_err(|e| format!("{source}: {e}"))?, None))
    }
}

/// Why `body` is not a Prometheus exposition at all, when it is JSON (an API's answer, an
/// engine's `/health` or `/v1/models`): said up front instead of as a parse error at line 1.
fn not_an_exposition(source: &str, content_type: Option<&str>, body: &[u8]) -> Option<String> {
    let json_type = content_type.is_some_and(|t| {
        let t = t.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        t == "application/json" || t.ends_with("+json")
    });
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if !json_type && !matches!(first, Some(b'{' | b'[')) {
        return None;
    }
    let what = match content_type {
        Some(t) if json_type => format!("JSON (Content-Type {t})"),
        _ => "JSON".to_string(),
    };
    let mut msg = format!("{source}: the response is {what}, not a Prometheus exposition");
    if source.starts_with("http://") || source.starts_with("https://") {
        match url::Url::parse(source) {
            Ok(mut u) if u.path() != "/metrics" => {
                u.set_path("/metrics");
                u.set_query(None);
                msg.push_str(&format!("; engines serve their metrics at /metrics: try {}", crate::redact::url(&u)));
            }
            _ => msg.push_str("; is this the engine's metrics endpoint?"),
        }
    } else {
        msg =
            format!("{source}: the file is JSON, not a Prometheus exposition (a saved /metrics scrape is plain text)");
    }
    Some(msg)
}

fn num(v: f64) -> Value {
    // JSON has no NaN or infinities; those become strings, as Prometheus writes them.
    serde_json::Number::from_f64(v).map(Value::Number).unwrap_or_else(|| {
        Value::String(if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        })
    })
}

fn histogram_json(h: &Histogram) -> Value {
    let buckets: Vec<Value> = h.buckets.iter().map(|b| json!([num(b.le), num(b.count)])).collect();
    json!({"count": num(h.count), "sum": num(h.sum), "buckets": buckets})
}

fn model_json(m: &ModelSnapshot) -> Value {
    let mut out = Map::new();
    for &k in m.histograms.keys() {
        if let Some(h) = m.histogram_total(k) {
            out.insert(k.as_str().into(), histogram_json(&h));
        }
    }
    for (&k, shards) in &m.counters {
        out.insert(k.as_str().into(), num(shards.iter().map(|s| s.value.value).sum()));
        let mut by_reason: BTreeMap<&str, f64> = BTreeMap::new();
        for s in shards {
            if let Some(r) = s.value.reason {
                *by_reason.entry(r.as_str()).or_default() += s.value.value;
            }
        }
        for (r, v) in by_reason {
            out.insert(format!("{}{{reason=\"{r}\"}}", k.as_str()), num(v));
        }
    }
    for &k in m.gauges.keys() {
        if let Some(v) = m.gauge_total(k) {
            out.insert(k.as_str().into(), num(v));
        }
    }
    for (pos, shards) in &m.spec_accepted_per_position {
        out.insert(format!("spec_accepted_tokens{{position=\"{pos}\"}}"), num(shards.iter().map(|s| s.value).sum()));
    }
    Value::Object(out)
}

fn snapshot_json(s: &Snapshot) -> Value {
    let models: Map<String, Value> = s.models.iter().map(|(k, m)| (k.clone(), model_json(m))).collect();
    json!({
        "engine": s.engine.as_str(),
        "families": s.families,
        "samples": s.samples,
        "models": models,
        "absent": s.absent(),
        "warnings": s.warnings.iter().map(|w| w.message.as_str()).collect::<Vec<_>>(),
        "notes": s.engine.request_path_note().into_iter().collect::<Vec<_>>(),
    })
}

fn dcgm_json(exp: &parse::Exposition<'_>) -> Value {
    let gpus: Map<String, Value> = dcgm::gpus(exp)
        .into_iter()
        .map(|g| {
            let mut o: Map<String, Value> = g.readings.iter().map(|(k, v)| ((*k).to_string(), num(*v))).collect();
            o.insert("index".into(), g.index.into());
            o.insert("model_name".into(), g.model_name.into());
            if let Some(p) = g.pod {
                o.insert("pod".into(), format!("{}/{}", p.namespace, p.pod).into());
            }
            (g.uuid, Value::Object(o))
        })
        .collect();
    json!({
        "engine": "dcgm-exporter",
        "families": exp.families.len(),
        "samples": exp.samples.len(),
        "models": {},
        "gpus": gpus,
        "absent": [],
        "warnings": [],
        "notes": [],
    })
}

/// The human summary: one block per model, histograms as count/sum/mean.
fn text(v: &Value) -> String {
    let mut out = format!(
        "engine: {}\nfamilies: {}, samples: {}\n",
        v["engine"].as_str().unwrap_or("?"),
        v["families"],
        v["samples"]
    );
    let sections = [("model", &v["models"]), ("gpu", &v["gpus"])];
    for (what, section) in sections {
        let Some(map) = section.as_object() else { continue };
        for (name, q) in map {
            out.push_str(&format!("\n{what} {name:?}\n"));
            for (k, val) in q.as_object().into_iter().flatten() {
                let shown = match val {
                    Value::Object(h) => {
                        let count = h["count"].as_f64().unwrap_or(f64::NAN);
                        let sum = h["sum"].as_f64().unwrap_or(f64::NAN);
                        let nb = h["buckets"].as_array().map_or(0, Vec::len);
                        format!("histogram  count {count}  sum {sum:.6}  mean {:.6}  ({nb} buckets)", sum / count)
                    }
                    other => other.to_string(),
                };
                out.push_str(&format!("  {k:<40} {shown}\n"));
            }
        }
    }
    let absent: Vec<&str> = v["absent"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if !absent.is_empty() {
        out.push_str(&format!("\nabsent (the engine does not expose these): {}\n", absent.join(", ")));
    }
    for item in v["warnings"].as_array().into_iter().flatten() {
        out.push_str(&format!("warning: {}\n", item.as_str().unwrap_or_default()));
    }
    for item in v["notes"].as_array().into_iter().flatten() {
        out.push_str(&format!("note: {}\n", item.as_str().unwrap_or_default()));
    }
    out
}
