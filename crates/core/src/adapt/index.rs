//! The engine tables indexed by exposed name, built once per process: detecting the
//! engine and classifying a scrape's names are hash lookups, not a scan of every table
//! row per family (that scan was a sixth of ingesting a 45 KB scrape).

use std::sync::OnceLock;

use super::engine_table;
use super::intern::FastMap;
use crate::canonical::Engine;

/// One engine's table by source name.
pub(super) struct TableIndex {
    /// The table's distinct sources in table order, each with the rows that read it.
    pub sources: Vec<(&'static str, Vec<usize>)>,
    pub by_name: FastMap<&'static str, u32>,
}

impl TableIndex {
    fn new(engine: Engine) -> TableIndex {
        let mut sources: Vec<(&'static str, Vec<usize>)> = Vec::new();
        let mut by_name = FastMap::default();
        for (i, m) in engine_table(engine).mappings.iter().enumerate() {
            let k = *by_name.entry(m.source).or_insert_with(|| {
                sources.push((m.source, Vec::new()));
                sources.len() as u32 - 1
            });
            sources[k as usize].1.push(i);
        }
        TableIndex { sources, by_name }
    }
}

pub(super) fn table_index(engine: Engine) -> &'static TableIndex {
    static INDEX: [OnceLock<TableIndex>; Engine::ALL.len()] = [const { OnceLock::new() }; Engine::ALL.len()];
    INDEX[engine as usize].get_or_init(|| TableIndex::new(engine))
}

/// Every engine's sources, numbered across engines (`first[e]..first[e + 1]` are
/// engine `e`'s), by the family names that are instances of them.
pub(super) struct DetectIndex {
    /// A source by its own name (also what a histogram's `_bucket`/`_sum`/`_count` strip to).
    pub exact: FastMap<&'static str, Vec<u32>>,
    /// A `_total` counter source by its name without `_total` (a family declared without it).
    pub total_base: FastMap<&'static str, Vec<u32>>,
    pub first: Vec<u32>,
}

pub(super) fn detect_index() -> &'static DetectIndex {
    static INDEX: OnceLock<DetectIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let (mut exact, mut total_base) = (FastMap::default(), FastMap::default());
        let mut first = vec![0u32];
        for engine in Engine::ALL {
            let base = *first.last().unwrap_or(&0);
            let sources = &table_index(engine).sources;
            for (k, (source, _)) in sources.iter().enumerate() {
                let id = base + k as u32;
                exact.entry(*source).or_insert_with(Vec::new).push(id);
                if let Some(b) = source.strip_suffix("_total") {
                    total_base.entry(b).or_insert_with(Vec::new).push(id);
                }
            }
            first.push(base + sources.len() as u32);
        }
        DetectIndex { exact, total_base, first }
    })
}
