//! A recording on disk (`DIR/<target>/<unix-millis>.prom`, raw scrape bodies) and the
//! replay loop over it. Reading files is the only I/O; each body is read when its turn
//! comes, so a long recording is never held in memory at once.

use crate::alert::config::AlertingConfig;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::virtual_daemon::{Frame, ReplayTarget, VirtualDaemon, instants};
use crate::adapt::adapt;
use crate::evaluate::EvalConfig;
use crate::parse::{Limits, parse};
use crate::request::RequestRecord;
use crate::target::ScrapeFailure;

/// The scrapes found for each target folder, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    pub targets: Vec<(String, Vec<(i64, PathBuf)>)>,
}

/// What is wrong with a recording, said so the user can fix it.
#[derive(Debug)]
pub enum ReplayError {
    Io { path: PathBuf, error: std::io::Error },
    MissingTarget { target: String, dir: PathBuf, found: Vec<String> },
    Empty { dir: PathBuf },
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Io { path, error } => write!(f, "cannot read {}: {error}", path.display()),
            ReplayError::MissingTarget { target, dir, found } => write!(
                f,
                "recording {} has no folder for target {target:?}; it has [{}]. Name the config's targets after the recording's folders",
                dir.display(),
                found.join(", ")
            ),
            ReplayError::Empty { dir } => {
                write!(f, "recording {} holds no <target>/<unix-millis>.prom files", dir.display())
            }
        }
    }
}

impl std::error::Error for ReplayError {}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReplayError + '_ {
    move |error| ReplayError::Io { path: path.to_path_buf(), error }
}

impl Recording {
    /// Lists `dir/<target>/<unix-millis>.prom`. Other files are ignored.
    pub fn scan(dir: &Path) -> Result<Recording, ReplayError> {
        let mut targets = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else { continue };
            let mut scrapes = Vec::new();
            for f in std::fs::read_dir(&path).map_err(io(&path))? {
                let f = f.map_err(io(&path))?.path();
                let stem = f.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".prom"));
                if let Some(t) = stem.and_then(|s| s.parse::<i64>().ok()) {
                    scrapes.push((t, f));
                }
            }
            scrapes.sort();
            targets.push((name, scrapes));
        }
        targets.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Recording { targets })
    }
}

/// Replays `recording` for the configured `targets`, yielding one frame per instant.
/// Scrapes that fail to read, parse or adapt mark their target down with reason
/// `read_error`, `parse_error` or `adapt_error`, as a live scrape would.
pub fn replay(
    dir: &Path,
    recording: &Recording,
    targets: &[ReplayTarget],
    cfg: EvalConfig,
    step_ms: i64,
) -> Result<impl Iterator<Item = Frame> + use<>, ReplayError> {
    replay_with(dir, recording, targets, cfg, &AlertingConfig::default(), step_ms)
}

/// [`replay`] with the config's `alerting:` section, so alert states match the daemon's.
pub fn replay_with(
    dir: &Path,
    recording: &Recording,
    targets: &[ReplayTarget],
    cfg: EvalConfig,
    alerting: &AlertingConfig,
    step_ms: i64,
) -> Result<impl Iterator<Item = Frame> + use<>, ReplayError> {
    replay_with_requests(dir, recording, targets, cfg, alerting, step_ms, None)
}

/// [`replay_with`], and with `requests` the request path as well: each record joins the
/// daemon's request store at the first instant at or after it ended, as a tap's or an
/// engine span's would, so the reports carry exact values beside the histograms'.
pub fn replay_with_requests(
    dir: &Path,
    recording: &Recording,
    targets: &[ReplayTarget],
    cfg: EvalConfig,
    alerting: &AlertingConfig,
    step_ms: i64,
    requests: Option<Vec<RequestRecord>>,
) -> Result<impl Iterator<Item = Frame> + use<>, ReplayError> {
    let mut scrapes = Vec::new();
    for (idx, t) in targets.iter().enumerate() {
        let Some((_, files)) = recording.targets.iter().find(|(n, _)| *n == t.name) else {
            return Err(ReplayError::MissingTarget {
                target: t.name.clone(),
                dir: dir.to_path_buf(),
                found: recording.targets.iter().map(|x| x.0.clone()).collect(),
            });
        };
        scrapes.extend(files.iter().map(|(ts, p)| (*ts, idx, p.clone())));
    }
    scrapes.sort();
    let (Some(first), Some(last)) = (scrapes.first().map(|s| s.0), scrapes.last().map(|s| s.0)) else {
        return Err(ReplayError::Empty { dir: dir.to_path_buf() });
    };
    let mut daemon = VirtualDaemon::new(targets.iter().map(|t| t.name.clone()), cfg).with_alerting(alerting);
    let mut records = requests.unwrap_or_default();
    if !records.is_empty() {
        daemon = daemon.with_requests();
        records.sort_by(|a, b| a.finished_unix.total_cmp(&b.finished_unix));
    }
    let mut records = records.into_iter().peekable();
    let targets = targets.to_vec();
    let mut next = 0;
    Ok(instants(first, last, step_ms).map(move |now| {
        let now_s = now as f64 / 1000.0;
        daemon.push_records(std::iter::from_fn(|| records.next_if(|r| r.finished_unix <= now_s)));
        while next < scrapes.len() && scrapes[next].0 <= now {
            let (ts, idx, ref path) = scrapes[next];
            let outcome = load(path, &targets[idx]);
            daemon.observe(idx, ts, outcome);
            next += 1;
        }
        Frame::new(daemon.report(now))
    }))
}

fn load(path: &Path, target: &ReplayTarget) -> Result<Arc<crate::canonical::Snapshot>, ScrapeFailure> {
    let fail = |reason: &str, message: String| ScrapeFailure { reason: reason.into(), message };
    let body = std::fs::read(path).map_err(|e| fail("read_error", format!("{}: {e}", path.display())))?;
    let exposition =
        parse(&body, &Limits::default()).map_err(|e| fail("parse_error", format!("{}: {e}", path.display())))?;
    let snap = adapt(&exposition, target.hint, &target.default_model)
        .map_err(|e| fail("adapt_error", format!("{}: {e}", path.display())))?;
    Ok(Arc::new(snap))
}
