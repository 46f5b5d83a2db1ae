//! Offline mode: run in virtual time and write a recording (docs/replay.md) plus ground truth.
//!
//! Scrapes happen every `scrape_interval` from a seeded offset, each with a small seeded
//! jitter, like a real Prometheus scraping a real engine. The run stops at the last
//! scrape, so `requests.jsonl` holds exactly the requests that finished by the final
//! scrape and `inflight.jsonl` the rest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::cluster::Sim;
use super::config::SimConfig;
use super::error::RunError;
use super::truth;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub duration: Duration,
    pub scrape_interval: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// `DIR/<name>` for each target.
    pub target_dirs: Vec<PathBuf>,
    pub scrapes: usize,
    pub finished: usize,
    pub in_flight: usize,
}

/// Records one simulated target into `out_dir`.
pub fn run(cfg: &SimConfig, out_dir: &Path, opts: &Options) -> Result<Summary, RunError> {
    run_many(std::slice::from_ref(cfg), out_dir, opts)
}

/// Records several targets (distinct names) into one directory, one ground-truth file.
pub fn run_many(cfgs: &[SimConfig], out_dir: &Path, opts: &Options) -> Result<Summary, RunError> {
    let interval_ms = opts.scrape_interval.as_millis() as i64;
    let duration_ms = opts.duration.as_millis() as i64;
    if interval_ms < 10 {
        return Err(RunError::ScrapeInterval);
    }
    if duration_ms < interval_ms {
        return Err(RunError::ShortDuration);
    }
    for (i, c) in cfgs.iter().enumerate() {
        if cfgs[..i].iter().any(|o| o.name == c.name) {
            return Err(RunError::DuplicateName(c.name.clone()));
        }
    }
    let mut summary = Summary { target_dirs: Vec::new(), scrapes: 0, finished: 0, in_flight: 0 };
    let mut requests = String::new();
    let mut in_flight = String::new();
    for cfg in cfgs {
        let dir = out_dir.join(&cfg.name);
        // Mixing two runs' scrapes would make a recording no run produced.
        if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
            return Err(RunError::RecordingExists(dir));
        }
        std::fs::create_dir_all(&dir).map_err(|error| RunError::CreateDir { path: dir.clone(), error })?;
        let mut sim = Sim::new(cfg, true)?;
        let start_ms = (cfg.start_unix_s as i64).saturating_mul(1000);
        for rel_ms in scrape_times(cfg.seed, interval_ms, duration_ms) {
            sim.advance_to(rel_ms as f64 / 1000.0);
            let path = dir.join(format!("{}.prom", start_ms + rel_ms));
            std::fs::write(&path, sim.render()).map_err(|error| RunError::Write { path, error })?;
            summary.scrapes += 1;
        }
        let start_s = cfg.start_unix_s as f64;
        truth::write_finished(&mut requests, &cfg.name, start_s, sim.finished());
        let open = sim.in_flight();
        truth::write_in_flight(&mut in_flight, &cfg.name, start_s, &open);
        summary.finished += sim.finished().len();
        summary.in_flight += open.len();
        summary.target_dirs.push(dir);
    }
    for (name, body) in [("requests.jsonl", &requests), ("inflight.jsonl", &in_flight)] {
        let path = out_dir.join(name);
        std::fs::write(&path, body).map_err(|error| RunError::Write { path, error })?;
    }
    Ok(summary)
}

/// Scrape instants in milliseconds since start: a seeded phase, then every interval with
/// −1 %…+3 % jitter (scrapes run late more often than early). Strictly increasing.
pub fn scrape_times(seed: u64, interval_ms: i64, duration_ms: i64) -> Vec<i64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5c4a_9e00);
    let offset = rng.random_range(1..interval_ms.max(2));
    let mut out: Vec<i64> = Vec::new();
    for k in 0.. {
        let jitter = (rng.random_range(-0.01..0.03) * interval_ms as f64).round() as i64;
        let t = offset + k * interval_ms + jitter;
        if t > duration_ms {
            break;
        }
        if out.last().is_none_or(|l| t > *l) && t > 0 {
            out.push(t);
        }
    }
    out
}
