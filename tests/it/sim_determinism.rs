//! Same seed, same output, byte for byte: every scrape file, requests.jsonl and
//! inflight.jsonl. A different seed gives a different history.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use goodput_sim::SimConfig;
use goodput_sim::config::Profile;
use goodput_sim::offline::{self, Options};

fn snapshot(cfg: &SimConfig) -> BTreeMap<String, Vec<u8>> {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options { duration: Duration::from_secs(90), scrape_interval: Duration::from_secs(5) };
    offline::run(cfg, dir.path(), &opts).expect("run");
    let mut out = BTreeMap::new();
    walk(dir.path(), dir.path(), &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            walk(root, &p, out);
        } else {
            let rel = p.strip_prefix(root).expect("prefix").display().to_string();
            out.insert(rel, std::fs::read(&p).expect("read"));
        }
    }
}

#[test]
fn same_seed_gives_byte_identical_recordings() {
    for profile in [Profile::Ramp, Profile::Spec] {
        let mut cfg = SimConfig::profile(profile);
        cfg.engines = 2;
        cfg.seed = 42;
        let a = snapshot(&cfg);
        let b = snapshot(&cfg);
        assert!(a.len() > 15, "scrapes plus ground truth: {}", a.len());
        assert!(a.contains_key("requests.jsonl") && a.contains_key("inflight.jsonl"));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "same scrape instants");
        for (k, v) in &a {
            assert!(v == &b[k], "{k} differs between two runs with one seed");
        }
        cfg.seed = 43;
        let c = snapshot(&cfg);
        assert_ne!(a.get("requests.jsonl"), c.get("requests.jsonl"), "another seed, another history");
    }
}

#[test]
fn several_targets_share_one_recording() {
    let mut healthy = SimConfig::profile(Profile::Steady);
    healthy.name = "healthy".into();
    let mut hot = SimConfig::profile(Profile::Ramp);
    hot.name = "hot".into();
    hot.seed = 9;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options { duration: Duration::from_secs(30), scrape_interval: Duration::from_secs(5) };
    let summary = offline::run_many(&[healthy.clone(), hot.clone()], dir.path(), &opts).expect("run");
    assert_eq!(summary.target_dirs.len(), 2);
    for name in ["healthy", "hot"] {
        let n = std::fs::read_dir(dir.path().join(name)).expect("target dir").count();
        assert!((5..=6).contains(&n), "{name}: one scrape per 5 s over 30 s, got {n}");
    }
    let truth = std::fs::read_to_string(dir.path().join("requests.jsonl")).expect("truth");
    let targets: Vec<String> = truth
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["target"].as_str().unwrap_or("").to_string()
        })
        .collect();
    assert!(targets.iter().any(|t| t == "healthy") && targets.iter().any(|t| t == "hot"));
    assert_eq!(targets.len(), summary.finished);

    // Same name twice, or a directory that already holds a recording, is refused.
    let other = tempfile::tempdir().expect("tempdir");
    assert!(offline::run_many(&[healthy.clone(), healthy.clone()], other.path(), &opts).is_err());
    assert!(offline::run(&healthy, dir.path(), &opts).is_err());
}
