//! `goodput rules` held to the one judgement of a request and the one definition of
//! attainment from histograms, on real promtool.
//!
//! Random requests (TTFT, TPOT, E2E, failed or not) are judged by `request::judge` and
//! binned into an engine's histograms and finish counter, one model per case; the same
//! requests' tap counters (`llm_slo_requests_total`, `llm_slo_good_requests_total`) count
//! what the judgement says. promtool evaluates the generated recording rules over them, and
//! each recorded value must equal the daemon's: per clause and jointly the definition
//! (`slo::HistogramCounts::attainment`, without the restatement of TTFT for requests in
//! flight, which needs a gauge the rules do not read), the exact tap attainment the
//! judgement's count. The judgement's own share lies inside the joint bracket. The other
//! paths (windows, budgets, alerts, export) are held to the same in
//! crates/core/src/slo/paths_tests.rs.
//!
//! promtool's unit tests compare floats exactly, so every expectation is written as an
//! impossible value and the values promtool reports it got are compared here, within 1e-9.
//!
//! Skips when promtool is missing, unless GOODPUT_REQUIRE_TOOLS=1.

use crate::rules_common;
use crate::tools;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use goodput::canonical::{Bucket, Histogram};
use goodput::request::{RequestRecord, Source, Status, TokenCount, Verdict, judge};
use goodput::slo::{Clause, HistogramClause, HistogramCounts, Objective, Scope, Slo};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use rules_common::{goodput_rules, run};
use tools::require_tool;

/// Thresholds on the bucket bounds below: there the rules, which count whole buckets, and
/// the daemon define per-clause attainment alike.
const CONFIG: &str = r#"
listen: 127.0.0.1:9464
targets: [{name: llama, url: "http://127.0.0.1:8000/metrics"}]
windows: [1m]
slos:
  - {name: chat, ttft: 250ms, tpot: 50ms, objective: 0.95}
  - {name: batch, ttft: 1s, tpot: 25ms, e2e: 10s, objective: 0.9}
"#;

const TTFT_LE: &[(f64, &str)] = &[(0.1, "0.1"), (0.25, "0.25"), (0.5, "0.5"), (1.0, "1.0"), (2.5, "2.5")];
const TPOT_LE: &[(f64, &str)] = &[(0.01, "0.01"), (0.025, "0.025"), (0.05, "0.05"), (0.1, "0.1")];
const E2E_LE: &[(f64, &str)] = &[(1.0, "1.0"), (2.5, "2.5"), (5.0, "5.0"), (10.0, "10.0"), (20.0, "20.0")];

const CASES: usize = 24;
/// Steps of 15 s: every step adds the case's requests once, so any window's increases
/// hold them in the same proportions.
const STEPS: usize = 40;

/// One request: TTFT, TPOT, E2E, failed.
type Raw = (f64, f64, f64, bool);

fn slos() -> Vec<Slo> {
    let slo = |name: &str, ttft: f64, tpot: f64, e2e: Option<f64>, objective: f64| Slo {
        name: name.into(),
        ttft: Some(Duration::from_secs_f64(ttft)),
        tpot: Some(Duration::from_secs_f64(tpot)),
        e2e: e2e.map(Duration::from_secs_f64),
        objective: Objective::new(objective).unwrap(),
        scope: Scope::all(),
    };
    vec![slo("chat", 0.25, 0.05, None, 0.95), slo("batch", 1.0, 0.025, Some(10.0), 0.9)]
}

fn cases() -> Vec<Vec<Raw>> {
    let request = (0.01f64..0.6, 0.002f64..0.06, 0.2f64..14.0, proptest::bool::weighted(0.15));
    let strategy = proptest::collection::vec(request, 1..60);
    let mut runner = TestRunner::deterministic();
    (0..CASES).map(|_| strategy.new_tree(&mut runner).unwrap().current()).collect()
}

fn record(r: &Raw) -> RequestRecord {
    RequestRecord {
        source: Source::Tap,
        target: "llama".into(),
        model: "m".into(),
        status: if r.3 { Status::HttpError(503) } else { Status::Ok },
        finished_unix: 1_700_000_000.0,
        e2e_s: r.2,
        ttft_s: Some(r.0),
        tpot_s: Some(r.1),
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 100, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

fn bounds(clause: Clause) -> &'static [(f64, &'static str)] {
    match clause {
        Clause::Ttft => TTFT_LE,
        Clause::Tpot => TPOT_LE,
        _ => E2E_LE,
    }
}

fn value(r: &Raw, clause: Clause) -> f64 {
    match clause {
        Clause::Ttft => r.0,
        Clause::Tpot => r.1,
        _ => r.2,
    }
}

/// The clause's histogram of `requests` (the increase of one step).
fn histogram(requests: &[Raw], clause: Clause) -> Histogram {
    let count = |le: f64| requests.iter().filter(|r| value(r, clause) <= le).count() as f64;
    let mut buckets: Vec<Bucket> = bounds(clause).iter().map(|&(le, _)| Bucket { le, count: count(le) }).collect();
    buckets.push(Bucket { le: f64::INFINITY, count: requests.len() as f64 });
    Histogram { buckets, sum: 0.0, count: requests.len() as f64 }
}

/// The input series of case `k`: model `m<k>` on instance `i<k>:8000`, and its tap's counters.
fn series(k: usize, requests: &[Raw], out: &mut String) {
    let base = format!("instance=\"i{k}:8000\",job=\"vllm\",model_name=\"m{k}\"");
    let mut line = |name: &str, labels: &str, per_step: f64| {
        let _ = writeln!(out, "      - {{series: '{name}{{{labels}}}', values: '0+{per_step}x{STEPS}'}}");
    };
    for (clause, name) in [
        (Clause::Ttft, "vllm:time_to_first_token_seconds"),
        (Clause::Tpot, "vllm:request_time_per_output_token_seconds"),
        (Clause::E2e, "vllm:e2e_request_latency_seconds"),
    ] {
        let h = histogram(requests, clause);
        for (b, (_, le)) in h.buckets.iter().zip(bounds(clause).iter().map(|x| (x.0, x.1)).chain([(0.0, "+Inf")])) {
            line(&format!("{name}_bucket"), &format!("{base},le=\"{le}\""), b.count);
        }
        line(&format!("{name}_count"), &base, h.count);
    }
    let failed = requests.iter().filter(|r| r.3).count() as f64;
    let n = requests.len() as f64;
    line("vllm:request_success_total", &format!("{base},finished_reason=\"stop\""), n - failed);
    line("vllm:request_success_total", &format!("{base},finished_reason=\"abort\""), failed);
    line("vllm:generation_tokens_total", &base, 100.0 * n);
    // The gauge by which the rules know an engine without a selector.
    line("vllm:num_requests_waiting", &base, 0.0);
    let tap = format!("job=\"goodput\",target=\"llama\",model=\"m{k}\",source=\"tap\"");
    line("llm_slo_requests_total", &format!("{tap},status=\"ok\""), n - failed);
    line("llm_slo_requests_total", &format!("{tap},status=\"http_503\""), failed);
    for slo in slos() {
        let good = requests.iter().filter(|r| judge(&record(r), &slo).joint == Verdict::Good).count() as f64;
        line("llm_slo_good_requests_total", &format!("{tap},slo=\"{}\"", slo.name), good);
    }
}

/// What the daemon says of case `k`, by the PromQL selector of the recorded series that
/// must say the same.
fn expected(k: usize, requests: &[Raw], out: &mut BTreeMap<String, f64>) {
    let n = requests.len() as f64;
    let failed = requests.iter().filter(|r| r.3).count() as f64;
    for slo in slos() {
        let clauses: Vec<HistogramClause> =
            slo.clauses().map(|(c, t)| HistogramClause::of(c, &histogram(requests, c), t.as_secs_f64())).collect();
        let definition = HistogramCounts { finished: Some(n), failed, clauses, in_flight_at_start: None };
        let a = definition.attainment().expect("every clause observed");
        let sel = |extra: &str| {
            format!("llm_slo:attainment_ratio{{model=\"m{k}\", slo=\"{}\", window=\"1m\", {extra}}}", slo.name)
        };
        for (clause, share) in &a.clauses {
            assert!(share.is_exact(), "{clause:?} threshold off the bucket bounds");
            out.insert(sel(&format!("clause=\"{}\", source=\"metrics\"", clause.as_str())), share.estimate);
        }
        for (bound, v) in [("lower", a.joint.lower), ("estimate", a.joint.estimate), ("upper", a.joint.upper)] {
            out.insert(sel(&format!("clause=\"joint\", bound=\"{bound}\", source=\"metrics\"")), v);
        }
        // The judgement of the requests themselves lies inside the histograms' bracket.
        let good = requests.iter().filter(|r| judge(&record(r), &slo).joint == Verdict::Good).count() as f64;
        let judged = good / n;
        assert!(
            a.joint.lower - 1e-12 <= judged && judged <= a.joint.upper + 1e-12,
            "case {k} {}: judged {judged} outside [{}, {}]",
            slo.name,
            a.joint.lower,
            a.joint.upper
        );
        out.insert(sel("clause=\"joint\", bound=\"estimate\", source=\"tap\""), judged);
    }
}

/// The values promtool reports it got, by expression: every expectation is written as -1,
/// so each test fails and prints what the rules computed.
fn got(output: &str) -> BTreeMap<String, Option<f64>> {
    let mut out = BTreeMap::new();
    let mut expr: Option<String> = None;
    for line in output.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("expr: \"") {
            let end = rest.rfind("\", time:").expect("promtool's expr line");
            expr = Some(rest[..end].replace("\\\"", "\""));
        } else if let Some(rest) = line.strip_prefix("got: ")
            && let Some(e) = expr.take()
        {
            // `{labels} 2.5E-01`, or an empty result.
            let v = rest.rsplit_once("} ").and_then(|(_, v)| v.trim().parse::<f64>().ok());
            out.insert(e, v);
        }
    }
    out
}

#[test]
fn generated_rules_give_the_judgement_and_the_histogram_definition() {
    let promtool = require_tool!("promtool");
    let dir = tempfile::tempdir().unwrap();
    let rules = goodput_rules(dir.path(), CONFIG, "prometheus");
    std::fs::write(dir.path().join("rules.yml"), rules).unwrap();

    let cases = cases();
    let mut input = String::new();
    let mut want = BTreeMap::new();
    for (k, requests) in cases.iter().enumerate() {
        series(k, requests, &mut input);
        expected(k, requests, &mut want);
    }
    let mut tests = String::from(
        "rule_files: [rules.yml]\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n",
    );
    tests.push_str(&input);
    tests.push_str("    promql_expr_test:\n");
    for sel in want.keys() {
        let _ = writeln!(tests, "      - expr: '{sel}'\n        eval_time: 5m\n        exp_samples: [{{value: -1}}]");
    }
    let path = dir.path().join("tests.yml");
    std::fs::write(&path, &tests).unwrap();
    let (ok, output) = run(Command::new(&promtool).arg("test").arg("rules").arg(&path));
    assert!(!ok, "every expectation is -1, so promtool must report what it got:\n{output}");
    let got = got(&output);

    let mut wrong = Vec::new();
    for (sel, w) in &want {
        match got.get(sel) {
            Some(Some(g)) if (g - w).abs() <= 1e-9 => {}
            other => wrong.push(format!("{sel}: the daemon says {w}, the rules {other:?}")),
        }
    }
    assert!(wrong.is_empty(), "{} of {} values differ:\n{}", wrong.len(), want.len(), wrong.join("\n"));
    assert_eq!(got.len(), want.len(), "promtool reported every expression");
}
