//! YAML text → [`RawConfig`] and every structural error in it, each at `file:line:column`.
//!
//! serde stops at the first error, so the file is read into a positioned tree once and
//! deserialized over it as often as needed: each run that fails names the node at fault,
//! which is reported and then hidden, and the next run goes past it. Unknown keys are
//! collected without stopping. A run costs microseconds for a real config; the number of
//! runs is capped at [`MAX_ERRORS`].

use std::cell::RefCell;
use std::collections::{BTreeSet, HashSet};

use serde::Deserialize;

use super::de::{self, NodeDe, Problem, Run};
use super::error::{ConfigError, ConfigErrors, MAX_ERRORS, Pos};
use super::raw::RawConfig;
use super::tree::{self, Kind, Node, NodeId, Step};

/// What [`read`] found: the config as far as it could be read, and what was wrong with it.
pub(crate) struct Read {
    pub raw: RawConfig,
    pub errors: Vec<ConfigError>,
    /// `(position of the mapping, key)` of each entry rejected here, so that later checks
    /// do not report it a second time as missing; `(position of the list, "[]")` for items.
    pub rejected: HashSet<(Pos, String)>,
    /// Where the top-level mapping starts.
    pub root: Pos,
    /// Every `targets[].name` written in the file, even of targets rejected here, so that
    /// an SLO naming one is not reported too.
    pub target_names: Vec<String>,
    /// Each key written under `alerting:` and where, for the checks that point at one
    /// (the deprecated `runbook_base_url`).
    pub alerting_keys: Vec<(String, Pos)>,
}

pub(crate) fn read(text: &str, file: &str) -> Result<Read, ConfigErrors> {
    let error = |pos, message: String| ConfigError { file: file.to_string(), pos, message };
    if text.trim().is_empty() {
        return Err(ConfigErrors(vec![error(
            Pos::FILE,
            "the config file is empty; it needs at least `targets:` (see config/example.yaml)".into(),
        )]));
    }
    let root = tree::parse(text).map_err(|e| ConfigErrors(vec![error(e.pos, e.message)]))?;
    if !matches!(root.kind, Kind::Map(_)) {
        let found = root.describe();
        return Err(ConfigErrors(vec![error(
            root.pos,
            format!(
                "the config must be a mapping of keys such as `targets:` and `scrape:`, found {found} (see config/example.yaml)"
            ),
        )]));
    }

    let mut skip: HashSet<NodeId> = HashSet::new();
    let mut errors = Vec::new();
    let mut unknown = BTreeSet::new();
    let raw = loop {
        let run = Run { skip: &skip, unknown: RefCell::new(Vec::new()) };
        let result = RawConfig::deserialize(NodeDe { node: &root, run: &run });
        unknown.extend(run.unknown.into_inner());
        let e = match result {
            Ok(raw) => break Some(raw),
            Err(e) => e,
        };
        let id = e.node.unwrap_or(root.id);
        let path = root.path_to(id).unwrap_or_default();
        let node = root.at(&path).unwrap_or(&root);
        if let Some(message) = message(node, &path, &e, &skip) {
            errors.push(error(node.pos, message));
        }
        // A node is hidden once, so every run gets further than the one before.
        if id == root.id || skip.len() >= MAX_ERRORS || !skip.insert(id) {
            break None;
        }
    };
    for u in unknown {
        let section = match root.path_to(u.map) {
            Some(p) if !p.is_empty() => Node::name(&p),
            _ => "the top level".into(),
        };
        let message = format!("unknown key {:?} in {section}; expected one of {}", u.key, u.expected.join(", "));
        errors.push(error(u.key_pos, message));
    }
    let Some(raw) = raw else {
        errors.sort_by_key(|e| (e.pos.line == 0, e.pos));
        if skip.len() >= MAX_ERRORS {
            errors.push(error(Pos::FILE, format!("more than {MAX_ERRORS} errors; fix these and check again")));
        }
        return Err(ConfigErrors(errors));
    };
    let rejected = skip
        .iter()
        .filter_map(|&id| {
            let mut path = root.path_to(id)?;
            let key = match path.pop()? {
                Step::Key(key) => key,
                Step::Index(_) => "[]".into(),
            };
            Some((root.at(&path)?.pos, key))
        })
        .collect();
    let alerting_keys = keys(&root, "alerting");
    Ok(Read { raw, errors, rejected, root: root.pos, target_names: target_names(&root), alerting_keys })
}

/// The message for a failed run, or `None` when it only repeats an error already reported
/// (a required key that is "missing" because its value was rejected).
fn message(node: &Node, path: &[Step], e: &de::Error, skip: &HashSet<NodeId>) -> Option<String> {
    let here = if path.is_empty() { "the top level".to_string() } else { Node::name(path) };
    match &e.problem {
        Problem::Missing(key) => {
            let rejected = match &node.kind {
                Kind::Map(entries) => entries.iter().any(|en| en.key == *key && skip.contains(&en.value.id)),
                _ => false,
            };
            (!rejected).then(|| format!("missing required key {key:?} in {here}"))
        }
        Problem::Message(m) if path.is_empty() => Some(m.clone()),
        Problem::Message(m) => Some(format!("{here}: {m}")),
    }
}

/// The keys of the top-level mapping `section` with their positions.
fn keys(root: &Node, section: &str) -> Vec<(String, Pos)> {
    match root.at(&[Step::Key(section.into())]) {
        Some(Node { kind: Kind::Map(entries), .. }) => entries.iter().map(|e| (e.key.clone(), e.key_pos)).collect(),
        _ => Vec::new(),
    }
}

fn target_names(root: &Node) -> Vec<String> {
    let Some(Node { kind: Kind::Seq(items), .. }) = root.at(&[Step::Key("targets".into())]) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|t| match &t.at(&[Step::Key("name".into())])?.kind {
            Kind::Str(s) | Kind::Int(_, s) | Kind::Float(_, s) | Kind::Bool(_, s) => Some(s.trim().to_string()),
            _ => None,
        })
        .collect()
}
