//! Helpers shared by the simulator tests: run offline, read the recording back with the
//! project's own parser, and load the ground truth.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use goodput::parse::{Limits, parse};
use goodput_sim::SimConfig;
use goodput_sim::offline::{self, Options};
use serde_json::Value;

pub struct Run {
    pub dir: tempfile::TempDir,
    pub scrapes: Vec<(i64, String)>,
    pub finished: Vec<Value>,
    pub in_flight: Vec<Value>,
}

impl Run {
    pub fn last(&self) -> &str {
        &self.scrapes.last().expect("at least one scrape").1
    }
}

pub fn record(cfg: &SimConfig, secs: u64, interval_secs: u64) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options { duration: Duration::from_secs(secs), scrape_interval: Duration::from_secs(interval_secs) };
    offline::run(cfg, dir.path(), &opts).expect("offline run");
    let scrapes = read_scrapes(&dir.path().join(&cfg.name));
    let finished = read_jsonl(&dir.path().join("requests.jsonl"));
    let in_flight = read_jsonl(&dir.path().join("inflight.jsonl"));
    Run { dir, scrapes, finished, in_flight }
}

pub fn read_scrapes(dir: &Path) -> Vec<(i64, String)> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("target dir").map(|e| e.expect("entry").path()).collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let ms: i64 =
                p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).expect("unix-millis name");
            (ms, std::fs::read_to_string(&p).expect("scrape"))
        })
        .collect()
}

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path).expect("jsonl").lines().map(|l| serde_json::from_str(l).expect("json line")).collect()
}

/// Sum over every sample named `name` whose labels include all of `want`.
pub fn sum(body: &str, name: &str, want: &[(&str, &str)]) -> f64 {
    Parsed::new(body).sum(name, want)
}

/// A sample's name, labels and value.
type OwnedSample = (String, Vec<(String, String)>, f64);

/// One scrape parsed once, for many lookups.
pub struct Parsed {
    samples: Vec<OwnedSample>,
}

impl Parsed {
    pub fn new(body: &str) -> Parsed {
        let exp = parse(body.as_bytes(), &Limits::default()).expect("scrape parses");
        assert!(exp.duplicates.is_empty(), "duplicate series");
        let samples = exp
            .samples
            .iter()
            .map(|s| {
                let labels = exp.labels_of(s).iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
                (s.name.to_string(), labels, s.value)
            })
            .collect();
        Parsed { samples }
    }

    pub fn sum(&self, name: &str, want: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, labels, _)| {
                n == name && want.iter().all(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, _, v)| *v)
            .sum()
    }
}

/// The `le` bounds of histogram `base` in order (as floats, `+Inf` last).
pub fn bounds(body: &str, base: &str) -> Vec<(String, f64)> {
    let exp = parse(body.as_bytes(), &Limits::default()).expect("scrape parses");
    let bucket = format!("{base}_bucket");
    let mut out: Vec<(String, f64)> = Vec::new();
    for s in exp.samples.iter().filter(|s| s.name == bucket) {
        let le = exp.label(s, "le").expect("le").to_string();
        if !out.iter().any(|(l, _)| *l == le) {
            let v = goodput::parse::parse_f64(&le).expect("numeric le");
            out.push((le, v));
        }
    }
    out
}

pub fn f(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}
