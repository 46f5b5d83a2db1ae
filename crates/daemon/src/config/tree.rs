//! YAML text → a tree of nodes that each know their line and column.
//!
//! serde-saphyr does the YAML work (syntax, anchors and aliases, duplicate keys, the size
//! budget); this module keeps its result in a form that [`super::de`] can walk as many times
//! as it takes to collect every error in the file, not just the first (see [`super::yaml`]).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{DeserializeError, Spanned};

use super::error::Pos;

/// Most YAML nodes (scalars, lists, mappings) a config file may hold. A config with a
/// hundred targets and SLOs is a few thousand nodes; the limit is there so that a generated
/// or hostile file is refused before it costs memory.
pub const MAX_NODES: usize = 250_000;
/// Most parser events that aliases (`*name`) may repeat in total: an alias expands to the
/// whole anchored node, so a few nested aliases could otherwise make billions of nodes.
/// Sharing a five-key mapping among a hundred targets repeats about 1,200.
pub const MAX_ALIAS_EVENTS: usize = 10_000;
/// Deepest nesting of lists and mappings; a real config nests five levels.
pub const MAX_DEPTH: usize = 64;

pub(crate) type NodeId = usize;

#[derive(Debug)]
pub(crate) struct Node {
    pub id: NodeId,
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Debug)]
pub(crate) enum Kind {
    Null,
    /// A plain scalar that YAML reads as a boolean or a number; `text` is how it was
    /// written, for keys that want text (`name: 1.10` is the name "1.10", not 1.1).
    Bool(bool, String),
    Int(i128, String),
    Float(f64, String),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

/// One step from a node to a child, for naming a value in messages.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// A problem found while reading the YAML itself, before any key is looked at.
#[derive(Debug)]
pub(crate) struct SyntaxError {
    pub pos: Pos,
    pub message: String,
}

/// Parses `text` into a tree.
pub(crate) fn parse(text: &str) -> Result<Node, SyntaxError> {
    let budget = serde_saphyr::budget! { max_nodes: MAX_NODES, max_depth: MAX_DEPTH };
    let limits = serde_saphyr::alias_limits! { max_total_replayed_events: MAX_ALIAS_EVENTS };
    let options = serde_saphyr::options! { budget: budget, alias_limits: limits };
    let raw: Spanned<RawKind> = serde_saphyr::from_str_with_options(text, options).map_err(|e| syntax_error(&e))?;
    let mut next = 0;
    let mut keys = Vec::new();
    let root = convert(raw, text, &mut next, &mut keys);
    match keys.into_iter().next() {
        Some(bad) => Err(bad),
        None => Ok(root),
    }
}

impl Node {
    /// The steps from `self` to the node `id`, or `None` if it is not below `self`.
    pub fn path_to(&self, id: NodeId) -> Option<Vec<Step>> {
        if self.id == id {
            return Some(Vec::new());
        }
        let children: Box<dyn Iterator<Item = (Step, &Node)>> = match &self.kind {
            Kind::Seq(items) => Box::new(items.iter().enumerate().map(|(i, n)| (Step::Index(i), n))),
            Kind::Map(entries) => Box::new(entries.iter().map(|e| (Step::Key(e.key.clone()), &e.value))),
            _ => return None,
        };
        for (step, child) in children {
            if let Some(mut rest) = child.path_to(id) {
                rest.insert(0, step);
                return Some(rest);
            }
        }
        None
    }

    /// The node at `path` below `self`.
    pub fn at(&self, path: &[Step]) -> Option<&Node> {
        let Some((first, rest)) = path.split_first() else { return Some(self) };
        let child = match (&self.kind, first) {
            (Kind::Seq(items), Step::Index(i)) => items.get(*i)?,
            (Kind::Map(entries), Step::Key(k)) => &entries.iter().find(|e| &e.key == k)?.value,
            _ => return None,
        };
        child.at(rest)
    }

    /// How a message names the value: `scrape.interval`, `targets[0].url`.
    pub fn name(path: &[Step]) -> String {
        let mut out = String::new();
        for step in path {
            match step {
                Step::Key(k) if out.is_empty() => out.push_str(k),
                Step::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// What the value is, for "found …" in messages.
    pub fn describe(&self) -> String {
        match &self.kind {
            Kind::Null => "an empty value".into(),
            Kind::Bool(_, t) => t.clone(),
            Kind::Int(_, t) | Kind::Float(_, t) => format!("the number {t}"),
            Kind::Str(s) => format!("{s:?}"),
            Kind::Seq(_) => "a list".into(),
            Kind::Map(_) => "a mapping".into(),
        }
    }
}

fn pos_of(loc: serde_saphyr::Location) -> Pos {
    Pos::new(loc.line() as u32, loc.column() as u32)
}

/// The source text of a plain scalar, from where it is defined (an alias points elsewhere).
fn source(text: &str, loc: serde_saphyr::Location) -> Option<&str> {
    let span = loc.span();
    let start = usize::try_from(span.byte_offset()?).ok()?;
    let len = usize::try_from(span.byte_len()?).ok()?;
    text.get(start..start.checked_add(len)?).map(str::trim).filter(|s| !s.is_empty())
}

fn convert(raw: Spanned<RawKind>, text: &str, next: &mut NodeId, errors: &mut Vec<SyntaxError>) -> Node {
    let id = *next;
    *next += 1;
    let pos = pos_of(raw.referenced);
    let written = |fallback: String| source(text, raw.defined).map(str::to_string).unwrap_or(fallback);
    let kind = match raw.value {
        RawKind::Null => Kind::Null,
        RawKind::Bool(b) => Kind::Bool(b, written(b.to_string())),
        RawKind::Int(v) => Kind::Int(v, written(v.to_string())),
        RawKind::Float(v) => Kind::Float(v, written(v.to_string())),
        RawKind::Str(s) => Kind::Str(s),
        RawKind::Seq(items) => Kind::Seq(items.into_iter().map(|n| convert(n, text, next, errors)).collect()),
        RawKind::Map(entries) => Kind::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let key_pos = pos_of(k.referenced);
                    let key = match convert(k, text, next, errors).kind {
                        Kind::Str(s) | Kind::Bool(_, s) | Kind::Int(_, s) | Kind::Float(_, s) => s,
                        Kind::Null => String::new(),
                        Kind::Seq(_) | Kind::Map(_) => {
                            errors.push(SyntaxError {
                                pos: key_pos,
                                message: "a key must be a name, not a list or mapping".into(),
                            });
                            String::new()
                        }
                    };
                    Entry { key, key_pos, value: convert(v, text, next, errors) }
                })
                .collect(),
        ),
    };
    Node { id, pos, kind }
}

/// What serde-saphyr hands over for any node; positions come from the `Spanned` around it.
enum RawKind {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<RawKind>>),
    Map(Vec<(Spanned<RawKind>, Spanned<RawKind>)>),
}

impl<'de> Deserialize<'de> for RawKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = RawKind;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<RawKind, E> {
        Ok(RawKind::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<RawKind, E> {
        Ok(RawKind::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawKind, D::Error> {
        RawKind::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawKind, E> {
        Ok(RawKind::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawKind, E> {
        Ok(RawKind::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawKind, E> {
        Ok(RawKind::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<RawKind, E> {
        Ok(RawKind::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<RawKind, E> {
        Ok(i128::try_from(v).map(RawKind::Int).unwrap_or(RawKind::Float(v as f64)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawKind, E> {
        Ok(RawKind::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawKind, E> {
        Ok(RawKind::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<RawKind, E> {
        Ok(RawKind::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawKind, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(RawKind::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawKind, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(RawKind::Map(entries))
    }
}

/// serde-saphyr's error, in words that say which limit was hit and what to do.
fn syntax_error(err: &DeserializeError) -> SyntaxError {
    let pos = err.location().map(pos_of).filter(|p| p.line > 0).unwrap_or(Pos::FILE);
    let mut inner = err;
    while let DeserializeError::WithSnippet { error, .. } | DeserializeError::AliasError { error, .. } = inner {
        inner = error;
    }
    let message = match inner {
        DeserializeError::Budget { breach, .. } => budget_message(breach),
        DeserializeError::AliasReplayLimitExceeded { .. } | DeserializeError::AliasExpansionLimitExceeded { .. } => {
            alias_message()
        }
        other => {
            use serde_saphyr::MessageFormatter;
            serde_saphyr::DefaultMessageFormatter.format_message(other).into_owned()
        }
    };
    SyntaxError { pos, message }
}

fn alias_message() -> String {
    format!(
        "aliases (*name) in this file repeat more than {MAX_ALIAS_EVENTS} YAML events; \
         a config needs far fewer: write the repeated parts out, or alias smaller pieces"
    )
}

fn budget_message(breach: &BudgetBreach) -> String {
    match breach {
        BudgetBreach::Nodes { .. } => format!(
            "the file has more than {MAX_NODES} YAML nodes (each scalar, list and mapping is one), the \
             most a goodput config may have; a target or an SLO takes 5 to 10 nodes. Generate fewer \
             entries, or split the targets over several goodput instances"
        ),
        BudgetBreach::Depth { .. } => {
            format!("lists and mappings are nested more than {MAX_DEPTH} levels deep; a goodput config needs five")
        }
        BudgetBreach::Aliases { .. }
        | BudgetBreach::Anchors { .. }
        | BudgetBreach::AliasAnchorRatio { .. }
        | BudgetBreach::RecordedAnchorEvents { .. }
        | BudgetBreach::RecordedAnchorBytes { .. } => alias_message(),
        BudgetBreach::Documents { .. } => "the file holds more than one YAML document; keep one".into(),
        other => {
            format!("the file is larger than a config file may be ({other:?}); a goodput config is a few kilobytes")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_written_text() {
        let root = parse("a: 1.10\nb:\n  - x\n  - {c: true}\n").unwrap();
        let Kind::Map(entries) = &root.kind else { panic!("{root:?}") };
        assert_eq!((entries[0].key.as_str(), entries[0].key_pos), ("a", Pos::new(1, 1)));
        assert_eq!(entries[0].value.pos, Pos::new(1, 4));
        assert!(matches!(&entries[0].value.kind, Kind::Float(v, t) if *v == 1.1 && t == "1.10"));
        let c = root.at(&[Step::Key("b".into()), Step::Index(1), Step::Key("c".into())]).unwrap();
        assert_eq!(c.pos, Pos::new(4, 9));
        assert_eq!(Node::name(&root.path_to(c.id).unwrap()), "b[1].c");
    }
}
