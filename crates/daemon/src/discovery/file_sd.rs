//! `file_sd`: targets from files in Prometheus's own format, JSON or YAML
//! (`[{"targets": ["host:port"], "labels": {…}}]`), found by glob patterns.
//!
//! The patterns are expanded and each file's modification time, size and inode looked at
//! every [`POLL`]: a new, changed, replaced (a ConfigMap's symlink swap) or removed file is
//! read again at once, and every file is read again each `refresh` regardless.
//!
//! Only a file that is gone takes its targets with it. A file that cannot be read or parsed,
//! whose metadata cannot be read, or that a pattern can no longer be expanded to (its
//! directory cannot be listed: out of descriptors, permissions) keeps the targets it gave
//! before, so that a passing fault cannot make a fleet vanish and come back. Each such
//! error is counted (`llm_slo_discovery_errors_total`) and logged once, and again only when
//! it or the file changes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use super::found::{AddressError, Found, metrics_url};
use super::publisher::Publisher;
use crate::config::FileSd;

/// How often the patterns are expanded and the files' metadata compared.
pub const POLL: Duration = Duration::from_secs(1);

/// Largest file read: a target group is a few hundred bytes.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// One group of a file: targets sharing labels.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Group {
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

/// A matched path as a poll sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// A file, at this version.
    File(Stamp),
    /// It could not be looked at (its metadata, or the directory holding it): whatever it
    /// gave before stands.
    Unknown,
}

/// A path's metadata: `Ok(None)` when it is gone or not a file, `Err` when it cannot be read.
fn stamp(path: &Path) -> Result<Option<Stamp>, String> {
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read its metadata: {e}", path.display())),
    };
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0;
    Ok(m.is_file().then(|| Stamp { modified: m.modified().ok(), len: m.len(), inode }))
}

/// The paths a pattern matches now, and the first error met expanding it, if any (then the
/// list may be short of what is there).
fn expand(pattern: &str) -> (Vec<PathBuf>, Option<String>) {
    let mut error = None;
    let mut paths = Vec::new();
    match glob::glob(pattern) {
        Ok(found) => {
            for p in found {
                match p {
                    Ok(p) => paths.push(p),
                    Err(e) => {
                        error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }
        Err(e) => error = Some(format!("not a valid pattern: {e}")),
    }
    // The glob crate takes a directory it cannot look at for one that is not there: tell
    // a directory that is gone from one that cannot be read.
    if paths.is_empty() && error.is_none() {
        let dir = literal_dir(pattern);
        if let Err(e) = std::fs::metadata(&dir)
            && !matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
        {
            error = Some(format!("cannot read {}: {e}", dir.display()));
        }
    }
    (paths, error)
}

/// The directory a pattern's matches are listed from: its leading components without
/// wildcards, less the file name when there are none.
fn literal_dir(pattern: &str) -> PathBuf {
    let wild = |c: &str| c.contains(['*', '?', '[']);
    let parts: Vec<&str> = pattern.split('/').collect();
    let n = parts.iter().position(|c| wild(c)).unwrap_or(parts.len().saturating_sub(1));
    let dir = parts[..n].join("/");
    match dir.as_str() {
        "" if pattern.starts_with('/') => PathBuf::from("/"),
        "" => PathBuf::from("."),
        d => PathBuf::from(d),
    }
}

/// The state of one `file_sd` source between polls.
#[derive(Debug, Default)]
pub struct Poller {
    patterns: Vec<String>,
    /// Per file: the version read last and what it gave (kept when a later version fails).
    files: BTreeMap<PathBuf, (Stamp, Vec<Found>)>,
    /// Per pattern: the paths it matched at its last expansion, kept while it fails.
    matched: Vec<BTreeSet<PathBuf>>,
    /// Errors in force, by the pattern or file they concern, with the file's version: each
    /// is logged when it first appears or changes.
    errors: BTreeMap<String, (Option<Stamp>, String)>,
    /// Error lines logged so far.
    logged: u64,
}

/// What one poll found.
#[derive(Debug)]
pub struct Polled {
    pub found: Vec<Found>,
    /// Reads that failed in this poll (patterns, metadata, files).
    pub failures: u64,
}

impl Poller {
    pub fn new(patterns: Vec<String>) -> Poller {
        Poller { matched: vec![BTreeSet::new(); patterns.len()], patterns, ..Poller::default() }
    }

    /// Expands the patterns and reads the files that are new or changed, or all of them
    /// when `full`; returns every target the files give.
    pub fn poll(&mut self, full: bool) -> Polled {
        let mut failures = 0;
        let mut errors: BTreeMap<String, (Option<Stamp>, String)> = BTreeMap::new();
        let mut now: BTreeMap<PathBuf, Seen> = BTreeMap::new();
        for (i, pattern) in self.patterns.iter().enumerate() {
            let (paths, error) = expand(pattern);
            if let Some(e) = error {
                failures += 1;
                let kept = self.matched[i].len();
                let message =
                    format!("file_sd: cannot expand {pattern:?}: {e}; keeping the {kept} files it matched before");
                errors.insert(format!("pattern {pattern}"), (None, message));
                // What the pattern matched before and cannot be seen now may still be there.
                for p in &self.matched[i] {
                    now.entry(p.clone()).or_insert(Seen::Unknown);
                }
                self.matched[i].extend(paths.iter().cloned());
            } else {
                self.matched[i] = paths.iter().cloned().collect();
            }
            for path in paths {
                match stamp(&path) {
                    Ok(Some(st)) => {
                        now.insert(path, Seen::File(st));
                    }
                    Ok(None) => {
                        now.remove(&path);
                        self.matched[i].remove(&path);
                    }
                    Err(e) => {
                        failures += 1;
                        let kept = self.files.get(&path).map_or(0, |f| f.1.len());
                        let message = format!("file_sd: {e}; keeping the {kept} targets it gave before");
                        errors.insert(path.display().to_string(), (None, message));
                        now.insert(path, Seen::Unknown);
                    }
                }
            }
        }
        self.files.retain(|path, _| now.contains_key(path));
        for (path, seen) in now {
            let Seen::File(st) = seen else { continue };
            let key = path.display().to_string();
            let prev = self.files.get(&path);
            if !full && prev.is_some_and(|(s, _)| *s == st) {
                // Not read again: an error of this version stands.
                if let Some(e) = self.errors.get(&key).filter(|(s, _)| s.as_ref() == Some(&st)) {
                    errors.insert(key, e.clone());
                }
                continue;
            }
            let found = match read(&path) {
                Ok(found) => found,
                Err(e) => {
                    failures += 1;
                    let kept = prev.map(|(_, f)| f.clone()).unwrap_or_default();
                    let message = format!(
                        "file_sd: {e}; keeping the {} targets this file gave before (docs/discovery.md#file_sd)",
                        kept.len()
                    );
                    errors.insert(key, (Some(st.clone()), message));
                    kept
                }
            };
            self.files.insert(path, (st, found));
        }
        self.log_changes(errors);
        Polled { found: self.files.values().flat_map(|(_, f)| f.iter().cloned()).collect(), failures }
    }

    /// Logs each error that is new or changed (another message, another version of the
    /// file) and each that cleared, then makes `errors` the ones in force.
    fn log_changes(&mut self, errors: BTreeMap<String, (Option<Stamp>, String)>) {
        for (key, e) in &errors {
            if self.errors.get(key) != Some(e) {
                tracing::error!("{}", e.1);
                self.logged += 1;
            }
        }
        for key in self.errors.keys().filter(|k| !errors.contains_key(*k)) {
            tracing::info!("file_sd: {key} reads again");
        }
        self.errors = errors;
    }

    /// Error lines logged so far: one per error as it appears or changes.
    pub fn logged(&self) -> u64 {
        self.logged
    }
}

/// Keeps the files' targets published until the source is dropped.
pub async fn run(cfg: FileSd, publish: Publisher) {
    let mut poller = Some(Poller::new(cfg.files.clone()));
    let mut refreshed = Instant::now();
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let full = refreshed.elapsed() >= cfg.refresh;
        if full {
            refreshed = Instant::now();
        }
        // Listing directories and parsing a file of thousands of targets is blocking work.
        let Some(mut p) = poller.take() else { return };
        let Ok((p, polled)) = tokio::task::spawn_blocking(move || {
            let polled = p.poll(full);
            (p, polled)
        })
        .await
        else {
            tracing::error!("file_sd: a poll of {:?} panicked; the source stops, keeping its targets", cfg.files);
            return;
        };
        poller = Some(p);
        publish.failed("file_sd", polled.failures);
        publish.publish(polled.found);
    }
}

/// Why a target file cannot be used: `file:line:column: problem` for a syntax or type
/// error, `file: group N of M: problem` for a bad value. Each message carries its cause's
/// text, so the causes are not chained as sources (a chain printer would show them twice).
#[derive(Debug, thiserror::Error)]
pub enum TargetFileError {
    #[error("{file}: cannot read: {error}")]
    Read { file: String, error: std::io::Error },
    #[error("{file}: larger than {} MiB; a target file is a few kilobytes", MAX_FILE_BYTES >> 20)]
    TooLarge { file: String },
    #[error(
        "{file}:{}:{}: {error}; expected [{{\"targets\": [\"host:port\"], \"labels\": {{…}}}}]",
        .error.line(),
        .error.column()
    )]
    Json { file: String, error: serde_json::Error },
    #[error("{file}: {error}; expected a list of {{targets: [host:port], labels: {{…}}}}")]
    Yaml { file: String, error: Box<serde_saphyr::Error> },
    #[error("{file}: group {group} of {groups}: {key:?} is not a label name; use letters, digits and '_'")]
    LabelName { file: String, group: usize, groups: usize, key: String },
    #[error("{file}: group {group} of {groups}: {error}")]
    Address { file: String, group: usize, groups: usize, error: AddressError },
}

/// The targets of one file, or why it cannot be used.
pub fn read(path: &Path) -> Result<Vec<Found>, TargetFileError> {
    let file = path.display().to_string();
    let unreadable = |error| TargetFileError::Read { file: file.clone(), error };
    let mut text = String::new();
    let f = std::fs::File::open(path).map_err(unreadable)?;
    std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_FILE_BYTES + 1), &mut text).map_err(unreadable)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(TargetFileError::TooLarge { file });
    }
    parse(&text, &file, path.extension().is_some_and(|e| e == "json"))
}

/// The targets of a file's text; `json` picks the format (Prometheus goes by the extension:
/// `.json`, else YAML).
pub fn parse(text: &str, name: &str, json: bool) -> Result<Vec<Found>, TargetFileError> {
    let file = || name.to_string();
    let groups: Vec<Group> = if json {
        serde_json::from_str(text).map_err(|error| TargetFileError::Json { file: file(), error })?
    } else if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_saphyr::from_str(text).map_err(|error| TargetFileError::Yaml { file: file(), error: Box::new(error) })?
    };
    let mut out = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let (group, groups) = (i + 1, groups.len());
        for key in g.labels.keys() {
            if !valid_label_name(key) {
                return Err(TargetFileError::LabelName { file: file(), group, groups, key: key.clone() });
            }
        }
        let scheme = g.labels.get("__scheme__").map_or("http", String::as_str);
        let path = g.labels.get("__metrics_path__").map_or("/metrics", String::as_str);
        let mut labels: BTreeMap<String, String> =
            g.labels.iter().filter(|(k, _)| !k.starts_with("__")).map(|(k, v)| (k.clone(), v.clone())).collect();
        let named = labels.remove("target").or_else(|| labels.remove("name"));
        labels.insert("discovery".into(), "file_sd".into());
        for t in &g.targets {
            let url = metrics_url(scheme, t.trim(), path).map_err(|error| TargetFileError::Address {
                file: file(),
                group,
                groups,
                error,
            })?;
            let name = match &named {
                // Several addresses under one name: each is told apart by its address.
                Some(n) if g.targets.len() > 1 => format!("{n}/{}", t.trim()),
                Some(n) => n.clone(),
                None => t.trim().to_string(),
            };
            out.push(Found { name, url, labels: labels.clone() });
        }
    }
    Ok(out)
}

fn valid_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
#[path = "file_sd_tests.rs"]
mod poll_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_format_with_path_scheme_and_names() {
        let text = r#"[
          {"targets": ["10.0.0.1:8000"], "labels": {"target": "vllm-a", "pod": "p1", "__metrics_path__": "/m"}},
          {"targets": ["10.0.0.2:8000", "10.0.0.3:8000"], "labels": {"__scheme__": "https", "name": "pool"}},
          {"targets": ["10.0.0.4:8000"]}
        ]"#;
        let f = parse(text, "t.json", true).unwrap();
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["vllm-a", "pool/10.0.0.2:8000", "pool/10.0.0.3:8000", "10.0.0.4:8000"]);
        assert_eq!(f[0].url.as_str(), "http://10.0.0.1:8000/m");
        assert_eq!(f[1].url.as_str(), "https://10.0.0.2:8000/metrics");
        assert_eq!(f[0].labels.get("pod").map(String::as_str), Some("p1"));
        assert!(!f[0].labels.contains_key("__metrics_path__") && !f[0].labels.contains_key("target"));
        assert_eq!(f[3].labels.get("discovery").map(String::as_str), Some("file_sd"));
    }

    #[test]
    fn yaml_is_read_too() {
        let f = parse("- targets: ['127.0.0.1:9000']\n  labels: {node: n1}\n", "t.yaml", false).unwrap();
        assert_eq!(f[0].url.as_str(), "http://127.0.0.1:9000/metrics");
        assert_eq!(f[0].labels.get("node").map(String::as_str), Some("n1"));
    }

    #[test]
    fn the_literal_directory_of_a_pattern() {
        assert_eq!(literal_dir("/etc/goodput/targets/*.json"), PathBuf::from("/etc/goodput/targets"));
        assert_eq!(literal_dir("/etc/goodput/*/a.json"), PathBuf::from("/etc/goodput"));
        assert_eq!(literal_dir("/etc/goodput/a.json"), PathBuf::from("/etc/goodput"));
        assert_eq!(literal_dir("*.json"), PathBuf::from("."));
        assert_eq!(literal_dir("/a.json"), PathBuf::from("/"));
    }

    #[test]
    fn errors_name_the_file_and_position() {
        let e = parse("[{\"targets\": [\"a:1\"],\n \"labels\": {\"x\": 1}}]", "t.json", true).unwrap_err().to_string();
        assert!(e.starts_with("t.json:2:"), "{e}");
        let e = parse(r#"[{"targets": ["http://a:1/metrics"]}]"#, "t.json", true).unwrap_err().to_string();
        assert!(e.starts_with("t.json: group 1 of 1:") && e.contains("host:port"), "{e}");
        let e = parse("- targets: [a:1]\n  label: {}\n", "t.yml", false).unwrap_err().to_string();
        assert!(e.starts_with("t.yml: ") && e.contains("label"), "{e}");
    }
}
