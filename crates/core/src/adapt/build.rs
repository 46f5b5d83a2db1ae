//! Applies one engine's mapping table to a parsed scrape.
//!
//! One pass over the samples files each recognised one under (mapping, model, shard);
//! then, per model, each canonical quantity takes the first mapping in table order that
//! has data, so a renamed family exposed twice is read once.
//!
//! The pass runs once per sample of every scrape, so it does no per-sample allocation: a
//! sample name is matched against the table once per distinct name in its family
//! ([`Classes`]), and models and shards are numbers until the pass is over
//! ([`super::intern`]). The tree of owned keys the rest of the adapter works on is built
//! after it, once per series.

use std::collections::BTreeMap;

use super::engine_table;
use super::index::{TableIndex, table_index};
use super::intern::{FastMap, Models, ShardRef, Shards};
use super::resolve::{Acc, Created, Key, UNLABELLED, attach_unlabelled, resolve};
use super::table::{EngineTable, Target};
use crate::canonical::{Bucket, Engine, FinishReason, ScrapeWarning, Snapshot, WarningReason};
use crate::parse::{Exposition, Label, Sample, parse_f64};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    Value,
    Bucket,
    Sum,
    Count,
    Created,
}

/// (mapping or source index, model, shard) while filing.
type Ids = (u32, u32, u32);

/// What a sample name is to the table.
#[derive(Debug, Clone, Copy)]
enum Class {
    Skip,
    ProcessStart,
    /// A part of the table source with this index in [`TableIndex::sources`].
    Source(u32, Part),
}

/// The class of every sample name seen so far, per family: a family's samples carry at
/// most seven names (the name and its type's suffixes), so a short list compared by
/// content beats hashing every sample's name.
struct Classes<'e> {
    table: &'static TableIndex,
    seen: Vec<Vec<(&'e str, Class)>>,
}

impl<'e> Classes<'e> {
    fn new(engine: Engine, families: usize) -> Self {
        Classes { table: table_index(engine), seen: (0..families).map(|_| Vec::new()).collect() }
    }

    fn of(&mut self, s: &Sample<'e>) -> Class {
        let index = &self.table.by_name;
        let Some(seen) = self.seen.get_mut(s.family as usize) else { return Self::classify(index, s.name) };
        if let Some(&(_, c)) = seen.iter().find(|(n, _)| *n == s.name) {
            return c;
        }
        let c = Self::classify(index, s.name);
        if seen.len() < 8 {
            seen.push((s.name, c));
        }
        c
    }

    /// Finds the table source a sample name belongs to, and which part of it it is.
    fn classify(index: &FastMap<&'static str, u32>, name: &str) -> Class {
        if name == "process_start_time_seconds" {
            return Class::ProcessStart;
        }
        if let Some(&k) = index.get(name) {
            return Class::Source(k, Part::Value);
        }
        for (suffix, part) in [("_bucket", Part::Bucket), ("_sum", Part::Sum), ("_count", Part::Count)] {
            if let Some(base) = name.strip_suffix(suffix)
                && let Some(&k) = index.get(base)
            {
                return Class::Source(k, part);
            }
        }
        let Some(base) = name.strip_suffix("_created") else { return Class::Skip };
        if let Some(&k) = index.get(base) {
            return Class::Source(k, Part::Created);
        }
        match index.get(format!("{base}_total").as_str()) {
            Some(&k) => Class::Source(k, Part::Created),
            None => Class::Skip,
        }
    }
}

/// The accumulators of one scrape, keyed by (mapping, model, shard) numbers.
#[derive(Default)]
struct Filed<'e> {
    models: Models<'e>,
    shards: Shards<'e>,
    accs: Vec<(Ids, Acc)>,
    index: FastMap<Ids, usize>,
    last: Option<(Ids, usize)>,
    created: FastMap<Ids, f64>,
}

impl Filed<'_> {
    fn acc(&mut self, key: Ids) -> &mut Acc {
        let i = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let next = self.accs.len();
                let i = *self.index.entry(key).or_insert(next);
                if i == next {
                    self.accs.push((key, Acc::default()));
                }
                self.last = Some((key, i));
                i
            }
        };
        &mut self.accs[i].1
    }
}

/// The snapshot, or, when the samples name more than `max_models` models, how many they
/// name (counted without filing any sample past the limit).
pub(super) fn build<'e>(
    exp: &'e Exposition<'e>,
    engine: Engine,
    default_model: &'e str,
    max_models: usize,
) -> Result<Snapshot, usize> {
    let table = engine_table(engine);
    let mut classes = Classes::new(engine, exp.families.len());
    let mut warnings = Vec::new();
    let mut filed = Filed::default();
    let mut process_start: Option<f64> = None;
    let mut unlabelled_seen = false;

    for s in &exp.samples {
        let (source, part) = match classes.of(s) {
            Class::Skip => continue,
            Class::ProcessStart => {
                process_start = Some(process_start.map_or(s.value, |p: f64| p.max(s.value)));
                continue;
            }
            Class::Source(source, part) => (source, part),
        };
        let labels = exp.labels_of(s);
        let (model_name, model_label) = model_of(labels, table, default_model);
        let model = filed.models.id(model_name);
        unlabelled_seen |= model_name == UNLABELLED;
        if filed.models.len() - usize::from(unlabelled_seen) > max_models {
            continue; // only counted from here on: the scrape is refused
        }
        let shard = ShardRef { labels, model_label };
        if part == Part::Created {
            let shard = filed.shards.id(shard);
            filed.created.insert((source, model, shard), s.value);
            continue;
        }
        for &i in &classes.table.sources[source as usize].1 {
            file_sample(exp, s, labels, table, i, part, model, shard, &mut filed, &mut warnings);
        }
    }

    let models_seen = filed.models.len() - usize::from(unlabelled_seen);
    if models_seen > max_models {
        return Err(models_seen);
    }
    let owned = |(i, m, sh): Ids| (filed.models.name(m).to_string(), filed.shards.key(sh).clone(), i as usize);
    let created: Created = filed
        .created
        .iter()
        .map(|(&ids, &v)| {
            let (model, shard, source) = owned(ids);
            ((classes.table.sources[source].0, model, shard), v)
        })
        .collect();
    let acc: BTreeMap<Key, Acc> = std::mem::take(&mut filed.accs)
        .into_iter()
        .map(|(ids, a)| {
            let (model, shard, mapping) = owned(ids);
            ((mapping, model, shard), a)
        })
        .collect();
    let acc = attach_unlabelled(acc, default_model);
    let created = attach_unlabelled(created, default_model);
    let models = resolve(table, acc, &created, &mut warnings);
    if !exp.duplicates.is_empty() {
        let d = &exp.duplicates[0];
        warnings.push(ScrapeWarning::new(
            WarningReason::DuplicateSeries,
            format!(
                "{} duplicate series ignored (first: {} on line {}, already on line {})",
                exp.duplicates.len(),
                d.series,
                d.line,
                d.first_line
            ),
        ));
    }
    Ok(Snapshot { engine, models, process_start, families: exp.families.len(), samples: exp.samples.len(), warnings })
}

pub(super) fn model_of<'e>(
    labels: &'e [Label<'e>],
    table: &EngineTable,
    default_model: &'e str,
) -> (&'e str, Option<&'static str>) {
    for &name in table.model_labels {
        if let Some(l) = labels.iter().find(|l| l.name == name) {
            return (l.value.as_ref(), Some(name));
        }
    }
    if table.model_labels.is_empty() { (default_model, None) } else { (UNLABELLED, None) }
}

/// The shard key of a [`Target::CounterPart`] series: its own labels and `part="<name>"`.
pub(super) fn with_part(key: &str, name: &str) -> String {
    if key.is_empty() { format!("part=\"{name}\"") } else { format!("{key},part=\"{name}\"") }
}

#[allow(clippy::too_many_arguments)]
fn file_sample<'e>(
    exp: &Exposition<'_>,
    s: &Sample<'_>,
    labels: &[Label<'_>],
    table: &EngineTable,
    mapping: usize,
    part: Part,
    model: u32,
    shard: ShardRef<'e>,
    filed: &mut Filed<'e>,
    warnings: &mut Vec<ScrapeWarning>,
) {
    let target = table.mappings[mapping].target;
    let label = |name: &str| labels.iter().find(|l| l.name == name).map(|l| l.value.as_ref());
    let mut entry_value = None;
    match (target, part) {
        (Target::Histogram(_), Part::Bucket | Part::Sum | Part::Count) => {}
        (Target::HistogramSumAsCounter(_), Part::Sum) => entry_value = Some(s.value),
        (Target::HistogramSumAsCounter(_), _) => return,
        (Target::Gauge(_), Part::Value) => {
            if let Some(rank) = table.gauge_rank_label
                && label(rank).is_some_and(|r| r != "0")
            {
                return;
            }
            entry_value = Some(s.value);
        }
        (Target::KvCapacityInfo, Part::Value) => {
            let blocks = label("num_gpu_blocks").and_then(parse_f64);
            let size = label("block_size").and_then(parse_f64);
            match (blocks, size) {
                (Some(b), Some(z)) if b.is_finite() && z.is_finite() => entry_value = Some(b * z),
                _ => return,
            }
            // The info gauge's other labels are configuration, not series identity.
            let shard = filed.shards.literal(label("engine").map(|e| format!("engine=\"{e}\"")).unwrap_or_default());
            filed.acc((mapping as u32, model, shard)).value = entry_value;
            return;
        }
        (
            Target::Counter(_)
            | Target::CounterPart(..)
            | Target::Finished(_)
            | Target::FinishedByLabel(_)
            | Target::SpecAcceptedPerPosition,
            Part::Value,
        ) => entry_value = Some(s.value),
        _ => return,
    }
    let mut shard = filed.shards.id(shard);
    if let Target::CounterPart(_, name) = target {
        shard = filed.shards.literal(with_part(filed.shards.key(shard), name));
    }
    let e = filed.acc((mapping as u32, model, shard));
    match target {
        Target::Histogram(_) => match part {
            Part::Bucket => match label("le").and_then(parse_f64) {
                Some(le) if !le.is_nan() => e.buckets.push(Bucket { le, count: s.value }),
                _ => warnings.push(ScrapeWarning::new(
                    WarningReason::BucketWithoutLe,
                    format!("line {}: bucket without a numeric le label ignored: {}", s.line, exp.series_string(s)),
                )),
            },
            Part::Sum => e.sum = Some(s.value),
            Part::Count => e.count = Some(s.value),
            _ => {}
        },
        Target::Finished(reason) => {
            e.value = entry_value;
            e.reason = Some(reason);
        }
        Target::FinishedByLabel(name) => {
            e.value = entry_value;
            e.reason = Some(label(name).map_or(FinishReason::Other, FinishReason::from_label));
        }
        Target::SpecAcceptedPerPosition => {
            e.value = entry_value;
            e.position = label("position").and_then(|p| p.parse().ok());
        }
        _ => e.value = entry_value,
    }
}
