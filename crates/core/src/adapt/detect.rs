//! Engine auto-detection: which engine's table explains the most of a scrape.

use std::collections::HashSet;

use super::table::EngineTable;
use super::{engine_table, source_of};
use crate::canonical::Engine;
use crate::parse::Exposition;

/// Scores every engine by how many distinct families of its table the scrape contains
/// and picks the best; `None` when no engine matches anything.
///
/// Distinct families, not samples, so that NIM (unprefixed vLLM V0 names) and
/// `trtllm-serve` (a few unprefixed names shared with NIM) are told apart by breadth.
pub fn detect(exposition: &Exposition<'_>) -> Option<Engine> {
    let mut best: Option<(usize, Engine)> = None;
    for engine in Engine::ALL {
        let score = distinct_sources(exposition, engine_table(engine));
        if score > 0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, engine));
        }
    }
    best.map(|(_, e)| e)
}

fn distinct_sources(exposition: &Exposition<'_>, table: &EngineTable) -> usize {
    let mut seen = HashSet::new();
    for family in &exposition.families {
        if family.samples == 0 {
            continue;
        }
        for mapping in table.mappings {
            if source_of(family.name, mapping.source) {
                seen.insert(mapping.source);
            }
        }
    }
    seen.len()
}
