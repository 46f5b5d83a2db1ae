//! Engine auto-detection: which engine's table explains the most of a scrape.

use super::index::detect_index;
use crate::canonical::Engine;
use crate::parse::Exposition;

/// Scores every engine by how many distinct families of its table the scrape contains
/// and picks the best; `None` when no engine matches anything.
///
/// Distinct families, not samples, so that NIM (unprefixed vLLM V0 names) and
/// `trtllm-serve` (a few unprefixed names shared with NIM) are told apart by breadth.
/// A family is an instance of a table source when it is the source itself, the source
/// without `_total`, or the source with `_bucket`, `_sum` or `_count`.
pub fn detect(exposition: &Exposition<'_>) -> Option<Engine> {
    let index = detect_index();
    let mut seen = vec![false; index.first.last().copied().unwrap_or(0) as usize];
    for family in &exposition.families {
        if family.samples == 0 {
            continue;
        }
        let n = family.name;
        let stripped = ["_bucket", "_sum", "_count"].map(|s| n.strip_suffix(s));
        let exact = std::iter::once(n).chain(stripped.into_iter().flatten()).filter_map(|k| index.exact.get(k));
        for ids in exact.chain(index.total_base.get(n)) {
            for &id in ids {
                seen[id as usize] = true;
            }
        }
    }
    let mut best: Option<(usize, Engine)> = None;
    for (e, engine) in Engine::ALL.into_iter().enumerate() {
        let range = index.first[e] as usize..index.first[e + 1] as usize;
        let score = seen[range].iter().filter(|&&s| s).count();
        if score > 0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, engine));
        }
    }
    best.map(|(_, e)| e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapt::engine_table;
    use crate::parse::{Limits, parse};

    fn source_of(name: &str, source: &str) -> bool {
        name == source
            || source.strip_suffix("_total") == Some(name)
            || ["_bucket", "_sum", "_count"].iter().any(|s| name.strip_suffix(s) == Some(source))
    }

    /// The scan the index replaced: every family against every row of every table.
    fn detect_by_scan(exposition: &Exposition<'_>) -> Option<Engine> {
        let mut best: Option<(usize, Engine)> = None;
        for engine in Engine::ALL {
            let mut seen = std::collections::HashSet::new();
            for family in exposition.families.iter().filter(|f| f.samples > 0) {
                for mapping in engine_table(engine).mappings {
                    if source_of(family.name, mapping.source) {
                        seen.insert(mapping.source);
                    }
                }
            }
            if !seen.is_empty() && best.is_none_or(|(s, _)| seen.len() > s) {
                best = Some((seen.len(), engine));
            }
        }
        best.map(|(_, e)| e)
    }

    #[test]
    fn the_index_scores_as_the_scan_does() {
        // Every table's every source under every name form, one engine at a time and mixed.
        let mut bodies = Vec::new();
        let mut all = String::new();
        for engine in Engine::ALL {
            let mut body = String::new();
            for (i, m) in engine_table(engine).mappings.iter().enumerate() {
                let base = m.source.strip_suffix("_total").unwrap_or(m.source);
                let name = match i % 5 {
                    0 => m.source.to_string(),
                    1 => base.to_string(),
                    2 => format!("{}_bucket{{le=\"+Inf\"}}", m.source),
                    3 => format!("{}_sum", m.source),
                    _ => format!("{}_count", m.source),
                };
                body.push_str(&format!("{name} 1\n"));
                if i % 3 == 0 {
                    bodies.push(body.clone());
                }
            }
            all.push_str(&body);
            bodies.push(body);
        }
        bodies.push(all);
        bodies.push("node_cpu_seconds_total 1\n".into());
        let mut detected = std::collections::BTreeSet::new();
        for body in &bodies {
            let exp = parse(body.as_bytes(), &Limits::default()).unwrap();
            assert_eq!(detect(&exp), detect_by_scan(&exp), "{body}");
            detected.insert(format!("{:?}", detect(&exp)));
        }
        assert!(detected.len() >= Engine::ALL.len(), "{detected:?}");
    }
}
