//! `file_sd`: targets from files in Prometheus's own format, JSON or YAML
//! (`[{"targets": ["host:port"], "labels": {…}}]`), found by glob patterns.
//!
//! The patterns are expanded and each file's modification time, size and inode looked at
//! every [`POLL`]: a new, changed, replaced (a ConfigMap's symlink swap) or removed file is
//! read again at once, and every file is read again each `refresh` regardless. A file that
//! does not parse keeps the targets it gave before, and the error (file, line and column)
//! is logged once per version of the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use super::{Found, Publisher, metrics_url};
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

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0;
    m.is_file().then(|| Stamp { modified: m.modified().ok(), len: m.len(), inode })
}

/// Every file the patterns match now, sorted, with its stamp.
fn expand(patterns: &[String]) -> BTreeMap<PathBuf, Stamp> {
    let mut out = BTreeMap::new();
    for p in patterns {
        match glob::glob(p) {
            Ok(paths) => {
                for path in paths.flatten() {
                    if let Some(s) = stamp(&path) {
                        out.insert(path, s);
                    }
                }
            }
            Err(e) => tracing::warn!(pattern = %p, "file_sd: cannot expand the pattern: {e}"),
        }
    }
    out
}

/// Keeps the files' targets published until the source is dropped.
pub async fn run(cfg: FileSd, publish: Publisher) {
    // Per file: the stamp read last and what it gave (kept when a later version fails).
    let mut files: BTreeMap<PathBuf, (Stamp, Vec<Found>)> = BTreeMap::new();
    let mut refreshed = Instant::now();
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let full = refreshed.elapsed() >= cfg.refresh;
        if full {
            refreshed = Instant::now();
        }
        let now = expand(&cfg.files);
        files.retain(|path, _| now.contains_key(path));
        for (path, st) in now {
            let prev = files.get(&path);
            if !full && prev.is_some_and(|(s, _)| *s == st) {
                continue;
            }
            let kept = prev.map(|(_, f)| f.clone()).unwrap_or_default();
            let found = match read(&path) {
                Ok(found) => found,
                Err(e) => {
                    // Logged again only for another version of the file.
                    if full || prev.is_none_or(|(s, _)| *s != st) {
                        tracing::error!(
                            "file_sd: {e}; keeping the {} targets this file gave before (docs/discovery.md#file_sd)",
                            kept.len()
                        );
                    }
                    kept
                }
            };
            files.insert(path, (st, found));
        }
        publish.publish(files.values().flat_map(|(_, f)| f.iter().cloned()).collect());
    }
}

/// The targets of one file, or why it cannot be used: `file:line:column: problem` for a
/// syntax or type error, `file: group N: problem` for a bad value.
pub fn read(path: &Path) -> Result<Vec<Found>, String> {
    let name = path.display();
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_FILE_BYTES + 1), &mut text)
        .map_err(|e| format!("{name}: cannot read: {e}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{name}: larger than {} MiB; a target file is a few kilobytes", MAX_FILE_BYTES >> 20));
    }
    parse(&text, &name.to_string(), path.extension().is_some_and(|e| e == "json"))
}

/// The targets of a file's text; `json` picks the format (Prometheus goes by the extension:
/// `.json`, else YAML).
pub fn parse(text: &str, name: &str, json: bool) -> Result<Vec<Found>, String> {
    let groups: Vec<Group> = if json {
        serde_json::from_str(text).map_err(|e| {
            format!(
                "{name}:{}:{}: {e}; expected [{{\"targets\": [\"host:port\"], \"labels\": {{…}}}}]",
                e.line(),
                e.column()
            )
        })?
    } else if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_saphyr::from_str(text)
            .map_err(|e| format!("{name}: {e}; expected a list of {{targets: [host:port], labels: {{…}}}}"))?
    };
    let mut out = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        let at = |m: String| format!("{name}: group {} of {}: {m}", i + 1, groups.len());
        for key in g.labels.keys() {
            if !valid_label_name(key) {
                return Err(at(format!("{key:?} is not a label name; use letters, digits and '_'")));
            }
        }
        let scheme = g.labels.get("__scheme__").map_or("http", String::as_str);
        let path = g.labels.get("__metrics_path__").map_or("/metrics", String::as_str);
        let mut labels: BTreeMap<String, String> =
            g.labels.iter().filter(|(k, _)| !k.starts_with("__")).map(|(k, v)| (k.clone(), v.clone())).collect();
        let named = labels.remove("target").or_else(|| labels.remove("name"));
        labels.insert("discovery".into(), "file_sd".into());
        for t in &g.targets {
            let url = metrics_url(scheme, t.trim(), path).map_err(at)?;
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
    fn errors_name_the_file_and_position() {
        let e = parse("[{\"targets\": [\"a:1\"],\n \"labels\": {\"x\": 1}}]", "t.json", true).unwrap_err();
        assert!(e.starts_with("t.json:2:"), "{e}");
        let e = parse(r#"[{"targets": ["http://a:1/metrics"]}]"#, "t.json", true).unwrap_err();
        assert!(e.starts_with("t.json: group 1 of 1:") && e.contains("host:port"), "{e}");
        let e = parse("- targets: [a:1]\n  label: {}\n", "t.yml", false).unwrap_err();
        assert!(e.starts_with("t.yml: ") && e.contains("label"), "{e}");
    }
}
