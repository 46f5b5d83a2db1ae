//! Samples as calls rather than values: [`Emit`] receives each exported sample with its
//! labels borrowed from the report, so that /metrics is written straight from a report
//! without a label list per sample (docs/footprint.md#b-aggregator), while `goodput replay`
//! and the tests still get [`ExportSample`]s ([`Collect`]).

use std::collections::HashMap;

/// One exported sample: family name, labels in order, value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ExportSample {
    pub name: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

impl ExportSample {
    /// Emits this sample as it is, its labels borrowed.
    pub fn emit(&self, out: &mut dyn Emit) {
        let labels: Vec<Label<'_>> = self.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        out.sample(self.name, Labels::new(&labels, &[]), self.value);
    }
}

/// One label: its name, and its value borrowed from the report or a constant.
pub type Label<'a> = (&'static str, &'a str);

/// A sample's labels in order: those its series share with their neighbours (`target`,
/// `model`, `window`), then its own. Two slices rather than one list, so that neither is
/// copied per sample.
#[derive(Debug, Clone, Copy)]
pub struct Labels<'a> {
    pub head: &'a [Label<'a>],
    pub tail: &'a [Label<'a>],
}

impl<'a> Labels<'a> {
    pub fn new(head: &'a [Label<'a>], tail: &'a [Label<'a>]) -> Labels<'a> {
        Labels { head, tail }
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Label<'a>> + Clone + 'a {
        self.head.iter().chain(self.tail).copied()
    }
}

/// Where the samples of a report go, one call per sample. The emitters call it in the
/// report's order (target by target), so a family's samples arrive interleaved with other
/// families'; the receiver groups them ([`Collect`], the daemon's exposition writer).
pub trait Emit {
    fn sample(&mut self, family: &'static str, labels: Labels<'_>, value: f64);
}

/// Passes on only finite values: a NaN quantile (no observations in the window) or the
/// +Inf side of a bracket is absent, never exported.
pub(crate) struct Finite<'e, E: ?Sized>(pub &'e mut E);

impl<E: Emit + ?Sized> Emit for Finite<'_, E> {
    fn sample(&mut self, family: &'static str, labels: Labels<'_>, value: f64) {
        if value.is_finite() {
            self.0.sample(family, labels, value);
        }
    }
}

/// Collects the samples as [`ExportSample`]s grouped by family: families in the order
/// `rank` gives, those it does not know after them in order of first appearance; each
/// family's samples in the order they came.
pub struct Collect {
    rank: fn(&str) -> Option<usize>,
    index: HashMap<&'static str, usize>,
    families: Vec<(usize, Vec<ExportSample>)>,
}

impl Collect {
    pub fn new(rank: fn(&str) -> Option<usize>) -> Collect {
        Collect { rank, index: HashMap::new(), families: Vec::new() }
    }

    pub fn finish(mut self) -> Vec<ExportSample> {
        self.families.sort_by_key(|f| f.0);
        self.families.into_iter().flat_map(|f| f.1).collect()
    }
}

impl Emit for Collect {
    fn sample(&mut self, family: &'static str, labels: Labels<'_>, value: f64) {
        let n = self.families.len();
        let i = *self.index.entry(family).or_insert(n);
        if i == n {
            let key = (self.rank)(family).unwrap_or(UNRANKED + n);
            self.families.push((key, Vec::new()));
        }
        let labels = labels.iter().map(|(k, v)| (k, v.to_string())).collect();
        self.families[i].1.push(ExportSample { name: family, labels, value });
    }
}

/// Where families no rank knows begin: after every ranked one.
pub const UNRANKED: usize = 1 << 20;
