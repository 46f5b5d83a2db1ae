//! The typed declaration of an exported family, and the registry that holds them: each
//! subsystem declares its families once ([`Family`]: name, HELP, type, unit, label names) and
//! registers them; the daemon's /metrics writer renders whatever is registered, with the HELP
//! and TYPE the declaration gives, and docs/metrics.md's family index is generated from the
//! same declarations (`goodput_daemon::serve::catalog`).
//!
//! An own registry rather than `prometheus-client`'s `Registry` and `EncodeLabelSet`: that
//! registry holds metric *objects* (a `Family<Labels, Gauge>` keyed by label set) created up
//! front and updated in place, while most of our series are written straight from a report
//! each tick (targets, models, windows and SLOs come and go, over a million samples at
//! thousands of targets, docs/footprint.md#b-aggregator) or read from live atomics at a GET.
//! Its text encoder writes OpenMetrics (`# EOF`, `_total` added to counter names, its own
//! number formatting), not the text format 0.0.4 bytes dashboards, rules and the golden files
//! pin, and it caches nothing across GETs, where /metrics renders a report's families once
//! per tick (docs/metrics.md#how-metrics-is-served). What is kept from it is the idea: a
//! family's metadata and its label names are declared as types, not repeated as strings.
//! This module is pure data: no I/O, no clock, no text format.

use std::collections::HashMap;

use super::emit::Emit;

/// A family's TYPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
}

impl Kind {
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        }
    }
}

/// What a family's values count or measure, for the docs; the name's suffix says the same
/// for Prometheus (`_seconds`, `_ratio`, `_bytes`, `_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Seconds,
    /// A share or fraction, 0–1 (a burn rate or budget share may pass 1).
    Ratio,
    Bytes,
    BytesPerSecond,
    Tokens,
    TokensPerSecond,
    Requests,
    RequestsPerSecond,
    /// Events per second (preemptions).
    EventsPerSecond,
    /// Events of some kind: spans, records, connections, steps, notifications.
    Count,
    /// Unix time in seconds.
    Timestamp,
    Watts,
    Hertz,
    Celsius,
    Dollars,
    /// A 0/1 flag, or an info series whose value is always 1.
    Flag,
    /// A pure number (a speedup, a length in tokens per step).
    Number,
}

impl Unit {
    pub const fn as_str(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Ratio => "ratio",
            Unit::Bytes => "bytes",
            Unit::BytesPerSecond => "bytes/s",
            Unit::Tokens => "tokens",
            Unit::TokensPerSecond => "tokens/s",
            Unit::Requests => "requests",
            Unit::RequestsPerSecond => "requests/s",
            Unit::EventsPerSecond => "events/s",
            Unit::Count => "count",
            Unit::Timestamp => "unix seconds",
            Unit::Watts => "watts",
            Unit::Hertz => "hertz",
            Unit::Celsius => "celsius",
            Unit::Dollars => "dollars",
            Unit::Flag => "0/1",
            Unit::Number => "number",
        }
    }
}

/// A label whose values are a closed set, such as a reason: an enum whose variants are every
/// value the label takes, so that the docs list them and every one can be exported from 0.
pub trait LabelValue: Copy + 'static {
    const ALL: &'static [Self];
    fn as_str(self) -> &'static str;
}

/// One label name of a family, with its values where they are a closed set.
#[derive(Debug, Clone, Copy)]
pub struct LabelName {
    pub name: &'static str,
    /// Every value the label takes, when they are a closed set ([`LabelValue`]).
    values: Option<fn() -> Vec<&'static str>>,
}

impl LabelName {
    /// A label whose values come from the data (a target's name, a window).
    pub const fn any(name: &'static str) -> LabelName {
        LabelName { name, values: None }
    }

    /// A label whose values are the variants of `V`.
    pub const fn of<V: LabelValue>(name: &'static str) -> LabelName {
        LabelName { name, values: Some(values_of::<V>) }
    }

    /// The values the label takes, when they are a closed set.
    pub fn values(&self) -> Option<Vec<&'static str>> {
        self.values.map(|f| f())
    }
}

fn values_of<V: LabelValue>() -> Vec<&'static str> {
    V::ALL.iter().map(|v| v.as_str()).collect()
}

/// The label names of a family, as a type: one per label set, shared by the families that
/// carry it.
pub trait LabelSet {
    const NAMES: &'static [LabelName];
}

/// Families without labels of their own.
#[derive(Debug, Clone, Copy)]
pub struct NoLabels;

impl LabelSet for NoLabels {
    const NAMES: &'static [LabelName] = &[];
}

/// One exported family, declared once.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    /// Every label a series of the family may carry, in the order they are written; a series
    /// may lack some (a GPU without a product name, an alert without a model).
    pub labels: &'static [LabelName],
}

impl Family {
    pub const fn gauge<L: LabelSet>(name: &'static str, unit: Unit, help: &'static str) -> Family {
        Family { name, help, kind: Kind::Gauge, unit, labels: L::NAMES }
    }

    pub const fn counter<L: LabelSet>(name: &'static str, unit: Unit, help: &'static str) -> Family {
        Family { name, help, kind: Kind::Counter, unit, labels: L::NAMES }
    }

    /// HELP text and TYPE, as the exposition writes them.
    pub fn meta(&self) -> (&'static str, &'static str) {
        (self.help, self.kind.as_str())
    }

    pub fn has_label(&self, name: &str) -> bool {
        self.labels.iter().any(|l| l.name == name)
    }
}

/// Declares label-set types: `label_set!(pub Target = [target]);` for names whose values are
/// data, `reason: Closed` for a label whose values are the enum `Closed`'s.
#[macro_export]
macro_rules! label_set {
    ($($(#[$m:meta])* $vis:vis $set:ident = [$($name:ident $(: $values:ty)?),* $(,)?];)*) => {
        $(
            $(#[$m])*
            #[derive(Debug, Clone, Copy)]
            $vis struct $set;
            impl $crate::export::LabelSet for $set {
                const NAMES: &'static [$crate::export::LabelName] =
                    &[$($crate::label_set!(@one $name $(: $values)?)),*];
            }
        )*
    };
    (@one $name:ident) => { $crate::export::LabelName::any(stringify!($name)) };
    (@one $name:ident : $values:ty) => { $crate::export::LabelName::of::<$values>(stringify!($name)) };
}

/// Families whose series come from live state when /metrics is read (counters of a listener,
/// a queue, the process) rather than from a report: the subsystem that owns the state
/// declares the families and writes their samples; the /metrics writer calls it on each GET.
pub trait Collector: Send + Sync {
    /// The families [`Collector::collect`] writes, in the order it writes them.
    fn families(&self) -> &'static [Family];
    /// Writes the current samples, each family's together, family by family.
    fn collect(&self, out: &mut dyn Emit);
}

/// Registered families, in order of registration, each name once.
#[derive(Debug, Default)]
pub struct Registry {
    families: Vec<&'static Family>,
    index: HashMap<&'static str, usize>,
    /// Where each group of families begins, with its title (docs/metrics.md's index).
    groups: Vec<(usize, &'static str)>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers `families` as one group titled `title`. A name registered twice is a
    /// programming error (two subsystems would write one family's lines apart).
    pub fn register(&mut self, title: &'static str, families: impl IntoIterator<Item = &'static Family>) -> &mut Self {
        self.groups.push((self.families.len(), title));
        for f in families {
            let i = self.families.len();
            let old = self.index.insert(f.name, i);
            assert!(old.is_none(), "family {} registered twice", f.name);
            self.families.push(f);
        }
        self
    }

    pub fn get(&self, name: &str) -> Option<&'static Family> {
        self.index.get(name).map(|&i| self.families[i])
    }

    /// HELP and TYPE of a registered family.
    pub fn meta(&self, name: &str) -> Option<(&'static str, &'static str)> {
        self.get(name).map(Family::meta)
    }

    pub fn iter(&self) -> impl Iterator<Item = &'static Family> + '_ {
        self.families.iter().copied()
    }

    /// The groups in order of registration: title and families.
    pub fn groups(&self) -> impl Iterator<Item = (&'static str, &[&'static Family])> + '_ {
        self.groups.iter().enumerate().map(|(g, &(start, title))| {
            let end = self.groups.get(g + 1).map_or(self.families.len(), |n| n.0);
            (title, &self.families[start..end])
        })
    }

    pub fn len(&self) -> usize {
        self.families.len()
    }

    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }
}

/// The family index of docs/metrics.md as a Markdown table per group: name, type, unit,
/// labels (a closed set's values listed), HELP.
pub fn markdown_table(registry: &Registry) -> String {
    let mut out = String::new();
    for (title, families) in registry.groups() {
        out.push_str(&format!("\n### {title}\n\n| family | type | unit | labels | help |\n|---|---|---|---|---|\n"));
        for f in families {
            let labels: Vec<String> = f
                .labels
                .iter()
                .map(|l| match l.values() {
                    Some(v) => format!("`{}=\"{}\"`", l.name, v.join("\\|")),
                    None => format!("`{}`", l.name),
                })
                .collect();
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                f.name,
                f.kind.as_str(),
                f.unit.as_str(),
                labels.join(", "),
                f.help.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy)]
    enum Why {
        A,
        B,
    }

    impl LabelValue for Why {
        const ALL: &'static [Why] = &[Why::A, Why::B];
        fn as_str(self) -> &'static str {
            match self {
                Why::A => "a",
                Why::B => "b_c",
            }
        }
    }

    crate::label_set! {
        Target = [target];
        TargetWhy = [target, reason: Why];
    }

    const UP: Family = Family::gauge::<Target>("x_up", Unit::Flag, "Up.");
    const ERRORS: Family = Family::counter::<TargetWhy>("x_errors_total", Unit::Count, "Errors | by reason.");
    static ALL: [Family; 2] = [UP, ERRORS];

    #[test]
    fn a_declaration_gives_meta_labels_and_values() {
        let mut r = Registry::new();
        r.register("X", &ALL);
        assert_eq!(r.meta("x_errors_total"), Some(("Errors | by reason.", "counter")));
        assert_eq!(r.meta("x_up"), Some(("Up.", "gauge")));
        assert_eq!(r.meta("nope"), None);
        let e = r.get("x_errors_total").unwrap();
        assert!(e.has_label("reason") && !e.has_label("model"));
        assert_eq!(e.labels[1].values(), Some(vec!["a", "b_c"]));
        assert_eq!(e.labels[0].values(), None);
        let table = markdown_table(&r);
        assert!(table.contains("\n### X\n"), "{table}");
        assert!(table.contains(
            "| `x_errors_total` | counter | count | `target`, `reason=\"a\\|b_c\"` | Errors \\| by reason. |"
        ));
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn a_name_registers_once() {
        let mut r = Registry::new();
        r.register("X", &ALL).register("Y", &ALL[..1]);
    }

    #[test]
    fn groups_keep_their_families_in_order() {
        static MORE: [Family; 1] = [Family::gauge::<Target>("y", Unit::Number, "Y.")];
        let mut r = Registry::new();
        r.register("first", &ALL).register("second", &MORE);
        let groups: Vec<(&str, Vec<&str>)> = r.groups().map(|(t, f)| (t, f.iter().map(|f| f.name).collect())).collect();
        assert_eq!(groups, [("first", vec!["x_up", "x_errors_total"]), ("second", vec!["y"])]);
        assert_eq!(r.len(), 3);
    }
}
