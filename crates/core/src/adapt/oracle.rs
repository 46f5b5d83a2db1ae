//! The adapter's pass over the samples as first written: one owned `(model, shard)` key
//! per sample in a `BTreeMap`. Slow, and plainly right; the fast pass in `build` must give
//! the same snapshot on any scrape (`tests::fast_pass_matches_the_plain_one`).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::build::Part;
use super::resolve::{Acc, Created, Key, UNLABELLED, attach_unlabelled, resolve};
use super::table::{EngineTable, Target};
use crate::canonical::{Bucket, Engine, FinishReason, ScrapeWarning, ShardKey, Snapshot, WarningReason};
use crate::parse::{Exposition, Label, Sample, parse_f64, render_series};

/// The snapshot, or, when the samples name more than `max_models` models, how many they
/// name (counted without filing any sample past the limit).
pub(super) fn build(
    exp: &Exposition<'_>,
    engine: Engine,
    table: &EngineTable,
    default_model: &str,
    max_models: usize,
) -> Result<Snapshot, usize> {
    let mut index: HashMap<&'static str, Vec<usize>> = HashMap::new();
    for (i, m) in table.mappings.iter().enumerate() {
        index.entry(m.source).or_default().push(i);
    }
    let mut warnings = Vec::new();
    let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
    let mut created: Created = BTreeMap::new();
    let mut process_start: Option<f64> = None;
    let mut models_seen: HashSet<String> = HashSet::new();

    for s in &exp.samples {
        if s.name == "process_start_time_seconds" {
            process_start = Some(process_start.map_or(s.value, |p: f64| p.max(s.value)));
            continue;
        }
        let Some((source, part)) = classify(s.name, &index) else { continue };
        let labels = exp.labels_of(s);
        let (model, model_label) = model_of(labels, table, default_model);
        if model != UNLABELLED && !models_seen.contains(&model) {
            models_seen.insert(model.clone());
        }
        if models_seen.len() > max_models {
            continue; // only counted from here on: the scrape is refused
        }
        if part == Part::Created {
            let shard = shard_key(labels, model_label, &["le", "position"]);
            created.insert((source, model, shard), s.value);
            continue;
        }
        for &i in &index[source] {
            file_sample(exp, s, labels, table, i, part, &model, model_label, &mut acc, &mut warnings);
        }
    }

    if models_seen.len() > max_models {
        return Err(models_seen.len());
    }
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

/// Finds the table source a sample name belongs to, and which part of it it is.
fn classify(name: &str, index: &HashMap<&'static str, Vec<usize>>) -> Option<(&'static str, Part)> {
    if let Some((&k, _)) = index.get_key_value(name) {
        return Some((k, Part::Value));
    }
    for (suffix, part) in [("_bucket", Part::Bucket), ("_sum", Part::Sum), ("_count", Part::Count)] {
        if let Some(base) = name.strip_suffix(suffix)
            && let Some((&k, _)) = index.get_key_value(base)
        {
            return Some((k, part));
        }
    }
    let base = name.strip_suffix("_created")?;
    if let Some((&k, _)) = index.get_key_value(base) {
        return Some((k, Part::Created));
    }
    let counter = format!("{base}_total");
    index.get_key_value(counter.as_str()).map(|(&k, _)| (k, Part::Created))
}

fn model_of(labels: &[Label<'_>], table: &EngineTable, default_model: &str) -> (String, Option<&'static str>) {
    for &name in table.model_labels {
        if let Some(l) = labels.iter().find(|l| l.name == name) {
            return (l.value.to_string(), Some(name));
        }
    }
    if table.model_labels.is_empty() { (default_model.to_string(), None) } else { (UNLABELLED.to_string(), None) }
}

/// The labels that tell one source series from another within a model, rendered.
fn shard_key(labels: &[Label<'_>], model_label: Option<&str>, skip: &[&str]) -> ShardKey {
    let kept: Vec<Label<'_>> =
        labels.iter().filter(|l| Some(l.name) != model_label && !skip.contains(&l.name)).cloned().collect();
    let rendered = render_series("", &kept);
    rendered.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or("").to_string()
}

#[allow(clippy::too_many_arguments)]
fn file_sample(
    exp: &Exposition<'_>,
    s: &Sample<'_>,
    labels: &[Label<'_>],
    table: &EngineTable,
    mapping: usize,
    part: Part,
    model: &str,
    model_label: Option<&'static str>,
    acc: &mut BTreeMap<Key, Acc>,
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
            let shard = label("engine").map(|e| format!("engine=\"{e}\"")).unwrap_or_default();
            let e = acc.entry((mapping, model.to_string(), shard)).or_default();
            e.value = entry_value;
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
    let mut shard = shard_key(labels, model_label, &["le", "position"]);
    if let Target::CounterPart(_, name) = target {
        let part = format!("part=\"{name}\"");
        shard = if shard.is_empty() { part } else { format!("{shard},{part}") };
    }
    let e = acc.entry((mapping, model.to_string(), shard)).or_default();
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
