//! Skipping the adapter when a target's series have not changed since its last scrape.
//!
//! An engine's /metrics names the same series in the same order scrape after scrape; only
//! the values move. Adapting such a scrape afresh builds a [`Snapshot`] (a `String` per
//! shard, trees per model) only for the window store to take it apart again into the layout
//! it already holds and one column of values: most of the per-scrape CPU and allocation of
//! an aggregator (docs/benchmarks.md#ingest-parse--adapt--push). [`Reuse`] keeps, per
//! target, a fingerprint of the last adapted scrape's structure and where each stored column
//! takes its value from; a scrape with the same fingerprint is parsed, its values are
//! gathered into the column, and the adapter is not run.
//!
//! Where a column comes from is learnt by adapting the scrape twice more with its values
//! replaced by sample numbers (counting up, then down and offset by a half), and checking
//! both against the real result: a column that is one sample's value reads back as that
//! sample's number in both; one that depends on no sample (a missing `_sum`, the KV
//! capacity computed from labels) reads back the same in all three; anything else is not
//! reused. What the adapter decides from values rather than structure is checked on every
//! reused scrape, and the scrape is adapted afresh instead when it would change: a NaN
//! bucket (the histogram is dropped), a changed `_created` or process start (a new layout
//! with new restart markers). A scrape with warnings is never reused, so none are lost.
//!
//! The fingerprint is a seeded 64-bit hash ([`foldhash::quality`], a random seed per
//! target) of the family names and types and of every sample's family, name and labels in
//! order. Two different structures are taken for one with probability 2⁻⁶⁴ per changed
//! scrape, and a target cannot aim for it without knowing the seed.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use crate::adapt::{EngineHint, adapt_bounded};
use crate::canonical::{Engine, Snapshot};
use crate::config::Cardinality;
use crate::parse::Exposition;
use crate::target::Values;
use crate::window::{Layout, TargetWindows};

/// The sample whose value is the process start time, wherever it is (the adapter reads it by
/// name alone).
const PROCESS_START: &str = "process_start_time_seconds";

/// A column source: a sample's number, or [`CONST`] with an index into [`Shape::consts`].
const CONST: u32 = 1 << 31;
/// A column without a `_created` marker.
const NONE: u32 = u32::MAX;

/// What one target keeps between scrapes to skip the adapter (module docs).
#[derive(Default)]
pub struct Reuse {
    hasher: foldhash::quality::RandomState,
    shape: Option<Shape>,
    /// The fingerprint of the last scrape adapted afresh: a structure is learnt when it is
    /// seen twice in a row, so that a target whose series change every scrape pays the
    /// fingerprint only, not the extra adapting.
    last: Option<u64>,
    /// Structures learnt in a row without a scrape reused since, and how many fresh scrapes
    /// to wait before learning again: a target whose process start or `_created` changes
    /// every scrape would otherwise pay the learning each time.
    fruitless: u32,
    wait: u32,
}

impl std::fmt::Debug for Reuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reuse").field("shape", &self.shape.as_ref().map(|s| s.fingerprint)).finish()
    }
}

/// What the adapter did with one structure of scrape.
struct Shape {
    fingerprint: u64,
    /// What it was adapted with; a scrape adapted otherwise is not reused.
    hint: EngineHint,
    default_model: Box<str>,
    cardinality: Cardinality,
    engine: Engine,
    layout: Arc<Layout>,
    /// Per column: where its value comes from.
    values: Box<[u32]>,
    /// Per column: where its `_created` marker comes from, or [`NONE`].
    created: Box<[u32]>,
    consts: Box<[f64]>,
    /// The samples named [`PROCESS_START`].
    process_start: Box<[u32]>,
    /// Learnt from a fresh snapshot's layout, not yet matched with the store's `Arc`.
    unadopted: bool,
}

impl Reuse {
    /// The scrape as [`Values`] in the layout the store already holds, when its structure is
    /// the one learnt and nothing the adapter decides from values changed; else `None`, and
    /// the caller adapts it afresh and hands it to [`Reuse::learn`].
    pub fn values(
        &mut self,
        exp: &Exposition<'_>,
        hint: EngineHint,
        default_model: &str,
        cardinality: Cardinality,
    ) -> (u64, Option<Values>) {
        let fingerprint = self.fingerprint(exp);
        let values = self.shape.as_ref().and_then(|s| {
            let same = s.fingerprint == fingerprint
                && s.hint == hint
                && *s.default_model == *default_model
                && s.cardinality == cardinality;
            same.then(|| s.gather(exp)).flatten()
        });
        if values.is_some() {
            (self.fruitless, self.wait) = (0, 0);
        }
        (fingerprint, values)
    }

    /// Records a scrape adapted afresh into `snapshot` (fingerprint from [`Reuse::values`]),
    /// learning its structure the second time in a row it is seen.
    pub fn learn(
        &mut self,
        fingerprint: u64,
        exp: &mut Exposition<'_>,
        snapshot: &Arc<Snapshot>,
        hint: EngineHint,
        default_model: &str,
        cardinality: Cardinality,
    ) {
        // Also when the structure is the one learnt: what failed is a restart marker or a
        // NaN, and when it stays so the layout learnt is out of date.
        if self.last.replace(fingerprint) != Some(fingerprint) {
            return;
        }
        if self.wait > 0 {
            self.wait -= 1;
            return;
        }
        self.shape = Shape::learn(fingerprint, exp, snapshot, default_model).map(|mut s| {
            (s.hint, s.cardinality) = (hint, cardinality);
            s
        });
        self.wait = (1 << self.fruitless.min(6)) - 1;
        self.fruitless += 1;
    }

    /// Makes the learnt layout the store's own `Arc` when they are equal, so that reused
    /// scrapes are recognised as the same layout by pointer rather than compared.
    /// Called with the store's newest layout after a scrape was stored; compares once per
    /// structure learnt.
    pub fn adopt(&mut self, stored: &Arc<Layout>) {
        if let Some(s) = &mut self.shape
            && std::mem::take(&mut s.unadopted)
            && *s.layout == **stored
        {
            s.layout = stored.clone();
        }
    }

    /// Whether a structure was just learnt and [`Reuse::adopt`] has not been called since.
    pub fn wants_layout(&self) -> bool {
        self.shape.as_ref().is_some_and(|s| s.unadopted)
    }

    fn fingerprint(&self, exp: &Exposition<'_>) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write_usize(exp.families.len());
        for f in &exp.families {
            h.write(f.name.as_bytes());
            h.write_u8(0xff); // not UTF-8: ends the name
            h.write_u8(f.kind as u8);
        }
        h.write_usize(exp.samples.len());
        h.write_usize(exp.duplicates.len());
        for s in &exp.samples {
            h.write_u32(s.family);
            h.write(s.name.as_bytes());
            h.write_u8(0xff);
            for l in exp.labels_of(s) {
                h.write(l.name.as_bytes());
                h.write_u8(0xfe);
                h.write(l.value.as_bytes());
                h.write_u8(0xff);
            }
            h.write_u8(0xfd); // ends the sample's labels
        }
        h.finish()
    }
}

impl Shape {
    fn learn(fingerprint: u64, exp: &mut Exposition<'_>, real: &Arc<Snapshot>, default_model: &str) -> Option<Shape> {
        let n = exp.samples.len();
        if !real.warnings.is_empty() || !exp.duplicates.is_empty() || n >= CONST as usize {
            return None;
        }
        // NaN restart markers never compare equal, so every scrape makes a new layout.
        let nan = |v: Option<f64>| v.is_some_and(f64::is_nan);
        let (layout, real_values) = stored(real.clone())?;
        if nan(layout.process_start) || layout.created.iter().any(|&c| nan(c)) {
            return None;
        }
        // The probes overwrite the values in place (a copy of the exposition would double the
        // transient memory of learning) and put them back before they are read below.
        let real_samples: Vec<f64> = exp.samples.iter().map(|s| s.value).collect();
        let mut probe = |value: &dyn Fn(usize) -> f64| {
            for (i, s) in exp.samples.iter_mut().enumerate() {
                s.value = value(i);
            }
            let snapshot = adapt_bounded(exp, EngineHint::Is(real.engine), default_model, usize::MAX).ok()?;
            stored(Arc::new(snapshot))
        };
        let up = probe(&|i| i as f64);
        let down = probe(&|i| -(i as f64) - 0.5);
        for (s, v) in exp.samples.iter_mut().zip(real_samples) {
            s.value = v;
        }
        let exp = &*exp;
        let ((up_layout, up), (down_layout, down)) = (up?, down?);
        if up_layout.keys != layout.keys || down_layout.keys != layout.keys || real_values.len() != layout.keys.len() {
            return None;
        }
        let mut consts = Vec::new();
        let mut source = |real: f64, up: f64, down: f64| -> Option<u32> {
            let i = up as usize;
            if up >= 0.0 && up.fract() == 0.0 && i < n && down == -up - 0.5 {
                return (real.to_bits() == exp.samples[i].value.to_bits()).then_some(i as u32);
            }
            if real.to_bits() == up.to_bits() && up.to_bits() == down.to_bits() {
                consts.push(real);
                return Some(CONST | (consts.len() - 1) as u32);
            }
            None
        };
        let values = (0..layout.keys.len()).map(|c| source(real_values[c], up[c], down[c])).collect::<Option<_>>()?;
        let created = (0..layout.keys.len())
            .map(|c| match (layout.created[c], up_layout.created[c], down_layout.created[c]) {
                (None, None, None) => Some(NONE),
                (Some(r), Some(u), Some(d)) => source(r, u, d),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let process_start = (0..n as u32).filter(|&i| exp.samples[i as usize].name == PROCESS_START).collect();
        Some(Shape {
            fingerprint,
            hint: EngineHint::Auto,
            default_model: default_model.into(),
            cardinality: Cardinality { max_models: usize::MAX, max_series: usize::MAX },
            engine: real.engine,
            layout,
            values,
            created,
            consts: consts.into(),
            process_start,
            unadopted: true,
        })
    }

    fn value(&self, exp: &Exposition<'_>, k: u32) -> f64 {
        match k & CONST {
            0 => exp.samples[k as usize].value,
            _ => self.consts[(k & !CONST) as usize],
        }
    }

    /// The scrape's values, or `None` where the adapter would decide otherwise than it did
    /// for the learnt scrape.
    fn gather(&self, exp: &Exposition<'_>) -> Option<Values> {
        // A NaN bucket makes the adapter drop its histogram.
        if exp.samples.iter().any(|s| s.value.is_nan() && s.name.ends_with("_bucket")) {
            return None;
        }
        let mut process_start: Option<f64> = None;
        for &i in &self.process_start {
            let v = exp.samples[i as usize].value;
            process_start = Some(process_start.map_or(v, |p| p.max(v)));
        }
        // Compared as the store compares layouts: a change (or a NaN) is a new layout.
        if process_start != self.layout.process_start {
            return None;
        }
        for (&k, &was) in self.created.iter().zip(&self.layout.created[..]) {
            let now = (k != NONE).then(|| self.value(exp, k));
            if now != was {
                return None;
            }
        }
        let values = self.values.iter().map(|&k| self.value(exp, k)).collect();
        Some(Values { engine: self.engine, layout: self.layout.clone(), values })
    }
}

/// The layout and values the window store makes of `snapshot`.
fn stored(snapshot: Arc<Snapshot>) -> Option<(Arc<Layout>, Vec<f64>)> {
    let mut w = TargetWindows::new(Duration::from_secs(60));
    w.push(1, snapshot);
    let seq = w.seq_range().start;
    let layout = w.point_at(seq)?.1.clone();
    let mut values = Vec::new();
    w.decode_at(seq, &mut values).then_some((layout, values))
}
