//! On a recording, the recording rules `goodput rules` generates,
//! evaluated by a real Prometheus, agree with `goodput replay` for the quantities both
//! compute.
//!
//! A simulator recording of two targets (one model each, two data-parallel engines each)
//! is backfilled into Prometheus with promtool, labelled the way a scrape would label it
//! (`instance`). The generated recording rules are then backfilled with `promtool tsdb
//! create-blocks-from rules`, one dependency level per pass (promtool cannot evaluate a
//! rule that reads a series recorded in the same pass), restarting Prometheus between
//! passes so that it loads the new blocks. Each recorded series is then compared with the
//! daemon's family of the same meaning at every 5 s instant. One model per target makes
//! "summed across pods" and "per target" the same population, so the two must agree.
//!
//! Skips when prometheus/promtool are missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::support;
use crate::tools;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use goodput_sim::config::Profile;
use goodput_sim::{SimConfig, offline};
use support::prometheus::{Prometheus, backfill};
use tools::require_tool;

const STEP_MS: i64 = 5_000;
/// Relative agreement required (the bar of docs/architecture.md#semantics-that-must-be-exact).
const REL_TOL: f64 = 1e-9;
const TARGETS: [(&str, &str); 2] = [("pod-a", "llama-8b"), ("pod-b", "qwen-7b")];
/// Thresholds on vLLM bucket boundaries (TTFT 0.1, TPOT 0.025): the rules count only whole
/// buckets, so only there do they define attainment as the daemon does.
const CONFIG: &str = r#"targets:
  - {name: pod-a, url: "http://127.0.0.1:8000/metrics"}
  - {name: pod-b, url: "http://127.0.0.1:8001/metrics"}
windows: [1m, 5m]
slos:
  - {name: chat, ttft: 100ms, tpot: 25ms, objective: 0.95}
"#;

fn goodput(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_goodput")).args(args).output().expect("run goodput")
}

/// The vLLM series the rules read, from one scrape body, as OpenMetrics sample lines with
/// the scrape's `instance` label and timestamp, keyed by sample name.
fn om_lines(body: &str, instance: &str, t_ms: i64, out: &mut BTreeMap<String, Vec<String>>) {
    const READ: [&str; 5] = [
        "vllm:time_to_first_token_seconds_",
        "vllm:request_time_per_output_token_seconds_",
        "vllm:e2e_request_latency_seconds_",
        "vllm:request_success_total",
        "vllm:generation_tokens_total",
    ];
    for line in body.lines().filter(|l| READ.iter().any(|p| l.starts_with(p))) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}').to_string()),
            None => (series, String::new()),
        };
        if name.ends_with("_created") {
            continue;
        }
        let sep = if labels.is_empty() { "" } else { "," };
        let ts = format!("{}.{:03}", t_ms / 1000, t_ms % 1000);
        out.entry(name.to_string())
            .or_default()
            .push(format!("{name}{{{labels}{sep}instance=\"{instance}\"}} {value} {ts}"));
    }
}

fn openmetrics(rec: &Path) -> String {
    let mut fams = BTreeMap::new();
    for (target, _) in TARGETS {
        let mut files: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(rec.join(target))
            .expect("target folder")
            .filter_map(|e| {
                let p = e.ok()?.path();
                Some((p.file_name()?.to_str()?.strip_suffix(".prom")?.parse().ok()?, p))
            })
            .collect();
        files.sort();
        for (t, p) in files {
            om_lines(&std::fs::read_to_string(&p).expect("scrape"), target, t, &mut fams);
        }
    }
    let mut out = String::new();
    for (name, lines) in fams {
        let _ = writeln!(out, "# TYPE {name} unknown");
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The recording rules, split into passes: a rule goes one pass after the last earlier
/// rule whose series it reads.
fn rule_passes(rules_yaml: &str) -> Vec<Vec<serde_json::Value>> {
    let v: serde_json::Value = serde_saphyr::from_str(rules_yaml).expect("rules YAML");
    let mut level_of_name: HashMap<String, usize> = HashMap::new();
    let mut passes: Vec<Vec<serde_json::Value>> = Vec::new();
    for group in v["groups"].as_array().expect("groups") {
        for r in group["rules"].as_array().expect("rules") {
            let Some(record) = r["record"].as_str() else { continue };
            let expr = r["expr"].as_str().expect("expr");
            let level =
                level_of_name.iter().filter(|(n, _)| expr.contains(n.as_str())).map(|(_, l)| l + 1).max().unwrap_or(0);
            let e = level_of_name.entry(record.to_string()).or_insert(level);
            *e = (*e).max(level);
            if passes.len() <= level {
                passes.resize(level + 1, Vec::new());
            }
            passes[level].push(r.clone());
        }
    }
    passes
}

/// Evaluates one pass of recording rules in Prometheus at every instant of `span` (a
/// range query is the rule's instant query at each step) and backfills the results
/// under the rule's name and labels, as rule evaluation would store them.
///
/// Not `promtool tsdb create-blocks-from rules`: it stamps samples at the rule group's
/// hash-derived offset within the interval, never on the multiples of the step that
/// replay evaluates at; the PromQL evaluated is the same.
fn backfill_rules(
    promtool: &Path,
    prom: &Prometheus,
    work: &Path,
    pass: usize,
    rules: &[serde_json::Value],
    span: (i64, i64),
) {
    let mut fams: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rules {
        let record = r["record"].as_str().expect("record");
        let expr = r["expr"].as_str().expect("expr");
        let extra: BTreeMap<String, String> = r["labels"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
            .unwrap_or_default();
        for (mut labels, points) in prom.query_range_series(expr, span.0, span.1, (STEP_MS / 1000) as u64) {
            labels.remove("__name__");
            labels.extend(extra.clone());
            let ls: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect();
            let lines = fams.entry(record.to_string()).or_default();
            for (t, v) in points {
                lines.push(format!("{record}{{{}}} {v} {}.{:03}", ls.join(","), t / 1000, t % 1000));
            }
        }
    }
    let mut om = String::new();
    for (name, lines) in fams {
        let _ = writeln!(om, "# TYPE {name} unknown");
        for l in lines {
            om.push_str(&l);
            om.push('\n');
        }
    }
    om.push_str("# EOF\n");
    let file = work.join(format!("rules-{pass}.om"));
    std::fs::write(&file, om).expect("write rule results");
    let blocks = work.join(format!("blocks-{pass}"));
    backfill(promtool, &file, &blocks);
    for b in std::fs::read_dir(&blocks).expect("blocks") {
        let b = b.expect("block").path();
        std::fs::rename(&b, work.join("data").join(b.file_name().expect("ULID"))).expect("move block");
    }
}

/// One daemon sample: family, its labels that identify it, value.
type Frames = HashMap<i64, HashMap<(String, BTreeMap<String, String>), f64>>;

fn replay_frames(config: &Path, rec: &Path) -> Frames {
    let out = goodput(&[
        "replay",
        "--config",
        config.to_str().expect("utf-8"),
        "--recording",
        rec.to_str().expect("utf-8"),
        "--step",
        "5s",
    ]);
    assert!(out.status.success(), "goodput replay: {}", String::from_utf8_lossy(&out.stderr));
    let mut frames = Frames::new();
    for line in String::from_utf8(out.stdout).expect("utf-8").lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON line");
        let t = (v["t"].as_f64().expect("t") * 1000.0).round() as i64;
        let f = frames.entry(t).or_default();
        for s in v["samples"].as_array().expect("samples") {
            let labels = s["labels"]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            let value = s["value"].as_f64().unwrap_or(f64::NAN);
            f.insert((s["name"].as_str().expect("name").to_string(), labels), value);
        }
    }
    frames
}

/// How close the two must be. `Exact` is [`REL_TOL`] relative. The joint estimate and
/// what derives from it read `llm_slo:success_ratio`, a ratio of *extrapolated* rates,
/// where the daemon divides *raw* increases (docs/architecture.md#ratios-from-raw-increases):
/// the zero floor of `rate()` limits each finish-reason counter's extrapolation on its
/// own, so the two differ a little whenever a small counter (`length`, `abort`) starts a window at 0. Observed
/// here: at most 2.1e-5 absolute on the estimate; 1e-3 leaves room for other seeds. The
/// joint bounds are defined differently (the daemon's contain the rules'); see
/// docs/fleet.md.
#[derive(Clone, Copy, Debug)]
enum Tol {
    Exact,
    /// Absolute, in the quantity's unit.
    Abs(f64),
    Rel(f64),
    /// Replay's value is at most Prometheus's plus this (a wider lower bound).
    AtMost(f64),
    /// Replay's value is at least Prometheus's minus this (a wider upper bound).
    AtLeast(f64),
}

/// A comparison: the recorded series (PromQL selector) and the daemon sample it equals.
struct Pair {
    what: String,
    tol: Tol,
    promql: String,
    family: &'static str,
    labels: BTreeMap<String, String>,
}

fn pairs() -> Vec<Pair> {
    let mut out = Vec::new();
    for (target, model) in TARGETS {
        // The daemon's histogram-derived series and their recorded twins say source="metrics".
        let base = |w: &str| {
            let mut m = BTreeMap::from([("target".to_string(), target.to_string()), ("window".into(), w.into())]);
            m.insert("model".into(), model.into());
            m.insert("source".into(), "metrics".into());
            m
        };
        for w in ["1m", "5m"] {
            let sel = |name: &str, extra: &str| format!("{name}{{model=\"{model}\", window=\"{w}\"{extra}}}");
            for (rec, fam) in [
                ("llm_slo:ttft_seconds", "llm_slo_ttft_seconds"),
                ("llm_slo:tpot_seconds", "llm_slo_tpot_seconds"),
                ("llm_slo:e2e_seconds", "llm_slo_e2e_seconds"),
            ] {
                for q in ["0.5", "0.9", "0.95", "0.99"] {
                    let mut labels = base(w);
                    labels.insert("q".into(), q.into());
                    let promql = sel(rec, &format!(", q=\"{q}\""));
                    out.push(Pair { what: format!("{fam} q{q}"), tol: Tol::Exact, promql, family: fam, labels });
                }
            }
            // The histograms' throughput, beside their goodput: source="metrics" on both sides.
            let mut labels = base(w);
            labels.insert("direction".into(), "output".into());
            let promql = sel("llm_slo:tokens_per_second", ", direction=\"output\", source=\"metrics\"");
            out.push(Pair {
                what: "output tokens/s".into(),
                tol: Tol::Exact,
                promql,
                family: "llm_slo_tokens_per_second",
                labels,
            });
            let promql = sel("llm_slo:requests_per_second", ", source=\"metrics\"");
            out.push(Pair {
                what: "requests/s".into(),
                tol: Tol::Exact,
                promql,
                family: "llm_slo_requests_per_second",
                labels: base(w),
            });
            for (clause, bound) in [
                ("ttft", None),
                ("tpot", None),
                ("joint", Some("estimate")),
                ("joint", Some("lower")),
                ("joint", Some("upper")),
            ] {
                let mut labels = base(w);
                labels.insert("slo".into(), "chat".into());
                labels.insert("clause".into(), clause.into());
                labels.insert("bound".into(), bound.unwrap_or("estimate").into());
                let b = bound.map(|b| format!(", bound=\"{b}\"")).unwrap_or_default();
                let promql = sel("llm_slo:attainment_ratio", &format!(", slo=\"chat\", clause=\"{clause}\"{b}"));
                let what = format!("attainment {clause} {}", bound.unwrap_or("exact"));
                // Per-clause attainment on a boundary: both are a ratio of one histogram's
                // buckets, whose extrapolation factors are equal, so they agree exactly.
                // The daemon restates the TTFT bracket for the finished population before
                // the Fréchet bounds (docs/fleet.md); the rules cannot, so the daemon's
                // joint bracket contains theirs. The estimate is the same product.
                let tol = match bound {
                    None => Tol::Exact,
                    Some("lower") => Tol::AtMost(1e-3),
                    Some("upper") => Tol::AtLeast(1e-3),
                    Some(_) => Tol::Abs(1e-3),
                };
                out.push(Pair { what, tol, promql, family: "llm_slo_attainment_ratio", labels });
            }
            let mut labels = base(w);
            labels.insert("slo".into(), "chat".into());
            labels.insert("bound".into(), "estimate".into());
            out.push(Pair {
                what: "burn rate".into(),
                // 1e-3 of attainment over the budget 1 − 0.95.
                tol: Tol::Abs(1e-3 / 0.05),
                promql: sel("llm_slo:error_budget_burn_rate", ", slo=\"chat\""),
                family: "llm_slo_error_budget_burn_rate",
                labels: labels.clone(),
            });
            out.push(Pair {
                what: "goodput tokens/s".into(),
                tol: Tol::Rel(1e-3),
                promql: sel("llm_slo:goodput_tokens_per_second", ", slo=\"chat\", bound=\"estimate\""),
                family: "llm_slo_goodput_tokens_per_second",
                labels,
            });
        }
    }
    out
}

fn agree(a: f64, b: f64, tol: Tol) -> bool {
    let d = (a - b).abs();
    let scale = a.abs().max(b.abs());
    (a.is_nan() && b.is_nan())
        || a == b
        || match tol {
            Tol::Exact => d <= REL_TOL * scale,
            Tol::Abs(t) => d <= t,
            Tol::Rel(t) => d <= t * scale,
            Tol::AtMost(t) => b <= a + t,
            Tol::AtLeast(t) => b >= a - t,
        }
}

#[test]
fn recording_rules_in_prometheus_agree_with_replay() {
    let prom_bin = require_tool!("prometheus");
    let promtool = require_tool!("promtool");
    let work = tempfile::tempdir().expect("tempdir");
    let rec = work.path().join("rec");
    let cfgs: Vec<SimConfig> = TARGETS
        .iter()
        .enumerate()
        .map(|(i, (name, model))| {
            let mut c = SimConfig::profile(Profile::Ramp);
            c.name = name.to_string();
            c.model = model.to_string();
            c.engines = 2;
            c.seed = 100 + i as u64;
            c
        })
        .collect();
    let opts = offline::Options { duration: Duration::from_secs(12 * 60), scrape_interval: Duration::from_secs(5) };
    offline::run_many(&cfgs, &rec, &opts).expect("simulate");
    let config = work.path().join("goodput.yml");
    std::fs::write(&config, CONFIG).expect("config");

    let om = work.path().join("rec.om");
    std::fs::write(&om, openmetrics(&rec)).expect("openmetrics");
    let data = work.path().join("data");
    backfill(&promtool, &om, &data);

    let rules = goodput(&["rules", "--format", "prometheus", "--config", config.to_str().expect("utf-8")]);
    assert!(rules.status.success(), "goodput rules: {}", String::from_utf8_lossy(&rules.stderr));
    let passes = rule_passes(&String::from_utf8(rules.stdout).expect("utf-8"));
    assert!(passes.len() >= 3, "quantities, joint and burn are {} dependency levels", passes.len());

    let frames = replay_frames(&config, &rec);
    let (first, last) = (*frames.keys().min().expect("frames"), *frames.keys().max().expect("frames"));
    let mut prom = Prometheus::start(&prom_bin, work.path(), &data);
    for (i, pass) in passes.iter().enumerate() {
        backfill_rules(&promtool, &prom, work.path(), i, pass, (first, last));
        drop(prom);
        prom = Prometheus::start(&prom_bin, work.path(), &data);
    }

    // Instants where the 5m window lies inside the recording, so that neither side sees
    // the recording's start (where Prometheus's zero floor applies per series).
    let start = first + 6 * 60_000;
    let mut compared: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad = Vec::new();
    let mut worst: BTreeMap<String, (usize, f64)> = BTreeMap::new();
    let mut spread: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut range: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for p in pairs() {
        // Only samples stamped exactly at the instant: no lookback to an older one.
        let q = format!("{0} and timestamp({0}) == time()", p.promql);
        let theirs: HashMap<i64, f64> =
            prom.query_range(&q, start, last, (STEP_MS / 1000) as u64).into_iter().collect();
        for t in (start..=last).step_by(STEP_MS as usize) {
            let mine = frames.get(&t).and_then(|f| f.get(&(p.family.to_string(), p.labels.clone()))).copied();
            match (theirs.get(&t), mine) {
                (Some(&a), Some(b)) if agree(a, b, p.tol) => {
                    // Only finite values count: NaN on both sides agrees but proves little.
                    if b.is_finite() {
                        *compared.entry(p.what.clone()).or_default() += 1;
                        let r = range.entry(p.what.clone()).or_insert((f64::INFINITY, f64::NEG_INFINITY));
                        *r = (r.0.min(b), r.1.max(b));
                    }
                    if !matches!(p.tol, Tol::Exact) && a.is_finite() && b.is_finite() {
                        let e = spread.entry(p.what.clone()).or_insert((0.0, 0.0));
                        e.0 = f64::max(e.0, (a - b).abs());
                        e.1 = f64::max(e.1, (a - b).abs() / a.abs().max(b.abs()).max(f64::MIN_POSITIVE));
                    }
                }
                (None, None) => {}
                (a, b) => {
                    let rel = match (a, b) {
                        (Some(&a), Some(b)) => (a - b).abs() / a.abs().max(b.abs()),
                        _ => f64::INFINITY,
                    };
                    let e = worst.entry(p.what.clone()).or_insert((0, 0.0));
                    e.0 += 1;
                    e.1 = f64::max(e.1, rel);
                    bad.push(format!("t={t} {}: prometheus={a:?} replay={b:?}", p.promql))
                }
            }
        }
    }
    let total: usize = compared.values().sum();
    println!("{total} points agree: {compared:?}");
    println!("tolerated differences (max absolute, max relative): {spread:?}");
    println!("disagreements (count, worst relative error): {worst:?}");
    assert!(bad.is_empty(), "{} disagreements:\n{}", bad.len(), bad[..bad.len().min(30)].join("\n"));
    for p in pairs() {
        let n = compared.get(&p.what).copied().unwrap_or(0);
        assert!(n >= 100, "{}: only {n} finite points compared", p.what);
    }
    // The SLO is tight enough under ramp that attainment moves: agreement is not 1 == 1.
    let (lo, hi) = range["attainment joint estimate"];
    assert!(lo < 0.9 && hi - lo > 0.05, "joint attainment barely moves: [{lo}, {hi}]");
    let (lo, hi) = range["llm_slo_ttft_seconds q0.99"];
    assert!(hi > lo, "TTFT p99 never changes: {lo}");

    // Window coverage, from the recording's start where it ramps: the rule finds the oldest
    // sample at a resolution of w/100 and adds that; the daemon adds one scrape spacing
    // (5 s). So they agree within (5 s + w/100) / w.
    let mut cov_bad = Vec::new();
    let mut ramping = 0;
    for (target, model) in TARGETS {
        for (w, secs) in [("1m", 60.0), ("5m", 300.0)] {
            let sel = format!("llm_slo:window_coverage_ratio{{model=\"{model}\", window=\"{w}\"}}");
            let q = format!("{sel} and timestamp({sel}) == time()");
            let theirs: HashMap<i64, f64> =
                prom.query_range(&q, first, last, (STEP_MS / 1000) as u64).into_iter().collect();
            let labels = BTreeMap::from([
                ("target".to_string(), target.to_string()),
                ("model".into(), model.into()),
                ("window".into(), w.into()),
            ]);
            let tol = (5.0 + secs / 100.0) / secs;
            let mut n = 0;
            for t in (first + STEP_MS..=last).step_by(STEP_MS as usize) {
                let key = ("llm_slo_window_coverage_ratio".to_string(), labels.clone());
                let mine = frames.get(&t).and_then(|f| f.get(&key)).copied();
                match (theirs.get(&t), mine) {
                    (Some(&a), Some(b)) if (a - b).abs() <= tol => {
                        n += 1;
                        ramping += usize::from(b < 0.9);
                    }
                    (a, b) => cov_bad.push(format!("t={t} {sel}: prometheus={a:?} replay={b:?}")),
                }
            }
            assert!(n >= 100, "{sel}: only {n} points compared");
        }
    }
    assert!(cov_bad.is_empty(), "coverage disagrees:\n{}", cov_bad[..cov_bad.len().min(30)].join("\n"));
    assert!(ramping >= 20, "coverage compared only where it is 1 ({ramping} points below 0.9)");

    // Teeth: the same comparison catches a rule that forgets to sum across engines.
    let (target, model) = TARGETS[0];
    let one_engine = format!(
        "histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{{model_name=\"{model}\", engine=\"0\"}}[1m])))"
    );
    let labels = BTreeMap::from([
        ("model".to_string(), model.to_string()),
        ("q".into(), "0.99".into()),
        ("source".into(), "metrics".into()),
        ("target".into(), target.into()),
        ("window".into(), "1m".into()),
    ]);
    let wrong = prom.query_range(&one_engine, start, last, (STEP_MS / 1000) as u64);
    let caught = wrong
        .iter()
        .filter(|(t, v)| {
            let mine = frames.get(t).and_then(|f| f.get(&("llm_slo_ttft_seconds".to_string(), labels.clone())));
            mine.is_some_and(|&m| !agree(*v, m, Tol::Exact))
        })
        .count();
    assert!(
        wrong.len() > 50 && caught * 10 > wrong.len() * 9,
        "per-engine p99 not caught: {caught} of {}",
        wrong.len()
    );
}
