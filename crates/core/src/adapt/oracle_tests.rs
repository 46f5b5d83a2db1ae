//! The fast pass (`build`) against the plain one (`oracle`) on generated scrapes: every
//! engine table, label sets in any order, with and without model labels, escapes, odd
//! `le`s, duplicates, `_created` companions and model limits.

use proptest::prelude::*;

use super::{build, engine_table, oracle};
use crate::canonical::Engine;
use crate::parse::{Limits, parse, vllm_like_exposition};

/// Both passes on one body, every engine, a few model limits and default models; the
/// snapshots are compared as `Debug` text so that NaN values compare equal.
fn assert_same(body: &str) {
    let Ok(exp) = parse(body.as_bytes(), &Limits::unlimited()) else { return };
    for engine in Engine::ALL {
        let table = engine_table(engine);
        for max_models in [0, 1, 2, usize::MAX] {
            for default_model in ["", "m"] {
                let fast = build::build(&exp, engine, default_model, max_models);
                let plain = oracle::build(&exp, engine, table, default_model, max_models);
                assert_eq!(format!("{fast:?}"), format!("{plain:?}"), "{engine} max_models={max_models}\n{body}");
            }
        }
    }
}

#[test]
fn fast_pass_matches_the_plain_one_on_the_generated_vllm_body() {
    for seed in 1..4 {
        assert_same(&vllm_like_exposition(300_000, 3, seed));
    }
    assert_same(super::tests::DP);
}

/// Sample names: every table source with every suffix the adapter looks at, and a few
/// that match nothing.
fn names() -> Vec<String> {
    let mut out = vec!["process_start_time_seconds".to_string(), "node_cpu_seconds_total".to_string()];
    for engine in Engine::ALL {
        for m in engine_table(engine).mappings {
            let base = m.source.strip_suffix("_total").unwrap_or(m.source);
            for suffix in ["", "_bucket", "_sum", "_count", "_created", "_total"] {
                out.push(format!("{base}{suffix}"));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

const LABELS: &[&str] = &[
    "model_name",
    "model",
    "engine",
    "le",
    "position",
    "finished_reason",
    "tp_rank",
    "num_gpu_blocks",
    "block_size",
    "err",
];
const VALUES: &[&str] =
    &["0", "1", "m", "n", "", "+Inf", "0.5", "1e-3", "stop", "abort", "16", "a\\\"b", "x\\ny", "NaN"];

#[derive(Debug, Clone)]
struct Line {
    name: usize,
    labels: Vec<(usize, usize)>,
    value: usize,
    /// A `# TYPE` line for this name's family first (histogram, counter or none).
    type_line: u8,
}

fn line(names: usize) -> impl Strategy<Value = Line> {
    (0..names, proptest::collection::vec((0..LABELS.len(), 0..VALUES.len()), 0..5), 0..6usize, 0..4u8)
        .prop_map(|(name, labels, value, type_line)| Line { name, labels, value, type_line })
}

fn render(names: &[String], lines: &[Line]) -> String {
    let mut body = String::new();
    for l in lines {
        let name = &names[l.name];
        let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        match l.type_line {
            1 => body.push_str(&format!("# TYPE {base} histogram\n")),
            2 => body.push_str(&format!("# TYPE {} counter\n", name.strip_suffix("_total").unwrap_or(name))),
            _ => {}
        }
        body.push_str(name);
        let mut seen = Vec::new();
        let pairs: Vec<String> = l
            .labels
            .iter()
            .filter(|(k, _)| {
                let fresh = !seen.contains(k);
                seen.push(*k);
                fresh
            })
            .map(|&(k, v)| format!("{}=\"{}\"", LABELS[k], VALUES[v]))
            .collect();
        if !pairs.is_empty() {
            body.push_str(&format!("{{{}}}", pairs.join(",")));
        }
        body.push_str(["1", "2.5", "0", "7", "NaN", "1.7e9"][l.value]);
        body.push('\n');
    }
    body
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn fast_pass_matches_the_plain_one(lines in proptest::collection::vec(line(names().len()), 0..40)) {
        assert_same(&render(&names(), &lines));
    }
}
