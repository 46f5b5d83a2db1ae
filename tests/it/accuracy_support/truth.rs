//! Per-request ground truth from `requests.jsonl` / `inflight.jsonl`, placed on the scrape
//! grid: each observation is tied to the first scrape that shows it.
//!
//! The simulator stamps an observation at its engine step's end and a scrape at virtual
//! time `s` shows every step that ended at or before `s`, so an observation at `e` is first
//! counted by the first scrape with `e ≤ s`. A window's raw increase (first to last scrape
//! inside it) therefore holds exactly the observations first counted by a scrape after the
//! window's first one, up to and including its last one.

use std::path::Path;

use serde_json::Value;

/// One request as the histograms saw it.
#[derive(Debug, Clone)]
pub struct Request {
    /// Index of the first scrape whose TTFT histogram holds this request (None: no token yet).
    pub first_token_scrape: Option<usize>,
    /// Index of the first scrape whose finish-time histograms hold it (None: still running).
    pub finish_scrape: Option<usize>,
    pub ttft_s: Option<f64>,
    pub tpot_s: f64,
    pub e2e_s: f64,
    pub output_tokens: f64,
    /// Aborted or errored: never good.
    pub failed: bool,
}

/// Requests plus how close any observation came to a scrape instant.
pub struct Truth {
    pub requests: Vec<Request>,
    /// Smallest |observation − scrape| in seconds; tiny values would make the placement
    /// depend on float rounding between the simulator's relative and the file's unix times.
    pub closest_to_a_scrape_s: f64,
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
}

/// Loads the ground truth of one target and places it on `scrapes_rel_s` (seconds since
/// the run's start, ascending). `start_s` is the run's unix start.
pub fn load(dir: &Path, target: &str, start_s: f64, scrapes_rel_s: &[f64]) -> Truth {
    let mut closest = f64::INFINITY;
    let mut place = |t_unix: Option<f64>| -> Option<usize> {
        // Subtracting two nearby doubles is exact: this recovers the simulator's own
        // relative time up to the rounding of `start + t` when the file was written.
        let rel = t_unix? - start_s;
        let k = scrapes_rel_s.partition_point(|&s| s < rel);
        for j in [k.wrapping_sub(1), k] {
            if let Some(s) = scrapes_rel_s.get(j) {
                closest = closest.min((s - rel).abs());
            }
        }
        Some(k).filter(|&k| k < scrapes_rel_s.len())
    };
    let mut requests = Vec::new();
    for r in read_jsonl(&dir.join("requests.jsonl")).iter().filter(|r| r["target"] == target) {
        let reason = r["finish_reason"].as_str().unwrap_or("");
        requests.push(Request {
            first_token_scrape: place(num(r, "first_token_s")),
            finish_scrape: place(num(r, "finish_s")),
            ttft_s: num(r, "ttft_s"),
            tpot_s: num(r, "tpot_s").expect("tpot_s"),
            e2e_s: num(r, "e2e_s").expect("e2e_s"),
            output_tokens: num(r, "output_tokens").expect("output_tokens"),
            failed: matches!(reason, "abort" | "error"),
        });
    }
    for r in read_jsonl(&dir.join("inflight.jsonl")).iter().filter(|r| r["target"] == target) {
        requests.push(Request {
            first_token_scrape: place(num(r, "first_token_s")),
            finish_scrape: None,
            ttft_s: num(r, "ttft_s"),
            tpot_s: f64::NAN,
            e2e_s: f64::NAN,
            output_tokens: num(r, "output_tokens").expect("output_tokens"),
            failed: false,
        });
    }
    Truth { requests, closest_to_a_scrape_s: closest }
}

/// The scrape indices `(first, last]` whose increase a window holds.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub first: usize,
    pub last: usize,
}

impl Span {
    pub fn holds(&self, scrape: Option<usize>) -> bool {
        scrape.is_some_and(|k| k > self.first && k <= self.last)
    }
}

/// Shares over one window's populations: the TTFT histogram's (first token inside) and the
/// finish-time histograms' (finished inside).
pub struct Populations<'a> {
    pub first_token: Vec<&'a Request>,
    pub finished: Vec<&'a Request>,
}

impl<'a> Populations<'a> {
    pub fn new(truth: &'a Truth, span: Span) -> Self {
        Populations {
            first_token: truth.requests.iter().filter(|r| span.holds(r.first_token_scrape)).collect(),
            finished: truth.requests.iter().filter(|r| span.holds(r.finish_scrape)).collect(),
        }
    }
}

/// Share of `values` at or under `threshold` (None without values).
pub fn share(values: impl Iterator<Item = f64>, threshold: f64) -> Option<f64> {
    let (mut n, mut good) = (0usize, 0usize);
    for v in values {
        n += 1;
        if v <= threshold {
            good += 1;
        }
    }
    (n > 0).then(|| good as f64 / n as f64)
}
