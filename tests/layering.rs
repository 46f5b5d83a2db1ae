//! The layering docs/architecture.md describes, checked rather than promised: the pure core
//! depends on no async runtime, network or clock; and within each crate, modules import in
//! one direction only (no cycle between files).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates the core must never reach, directly or through a dependency. The OTLP receiver's
/// protobuf types stay in the daemon: the core maps spans from a neutral input.
const FORBIDDEN_IN_CORE: &[&str] = &[
    "tokio",
    "reqwest",
    "axum",
    "hyper",
    "mio",
    "nvml-wrapper",
    "tracing-subscriber",
    "prost",
    "opentelemetry-proto",
    "tonic",
];

#[test]
fn the_core_has_no_async_network_or_driver_dependency() {
    // `cargo tree` for the host platform, normal edges only: what ships with the core.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "-p", "goodput-core", "-e", "normal", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let reached: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert!(reached.contains("memchr"), "the tree lists the core's own dependencies: {reached:?}");
    let bad: Vec<_> = FORBIDDEN_IN_CORE.iter().filter(|f| reached.contains(**f)).collect();
    assert!(bad.is_empty(), "goodput-core depends on {bad:?}; the core must stay pure (docs/architecture.md)");
}

#[test]
fn the_core_never_reads_the_clock() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/src");
    let mut offenders = Vec::new();
    for file in rust_files(&root) {
        if is_test_file(&file) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests may time themselves; the code may not.
        let code = without_tests(&text);
        for needle in ["SystemTime::now", "Instant::now", "std::thread::sleep"] {
            if code.contains(needle) {
                offenders.push(format!("{}: {needle}", file.display()));
            }
        }
    }
    assert!(offenders.is_empty(), "the core takes time as an argument: {offenders:#?}");
}

#[test]
fn modules_import_in_one_direction() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for krate in ["crates/core/src", "crates/daemon/src", "crates/sim/src", "src"] {
        let graph = module_graph(&base.join(krate));
        checked += graph.len();
        if krate == "crates/core/src" {
            // The walk sees real edges: evaluation fills the report's types.
            assert!(graph["evaluate"].contains("report"), "evaluate → report not found: {:?}", graph["evaluate"]);
        }
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{krate}: modules import each other in a cycle: {}", cycle.join(" → "));
        }
    }
    assert!(checked > 100, "only {checked} modules found: is the walk looking in the right place?");
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("report".to_string(), BTreeSet::from(["alert::view".to_string()])),
        ("alert::view".to_string(), BTreeSet::from(["evaluate".to_string()])),
        ("evaluate".to_string(), BTreeSet::from(["report".to_string()])),
    ]
    .into_iter()
    .collect();
    let cycle = find_cycle(&g).expect("a three-module cycle");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    assert_eq!(cycle.first(), cycle.last());
}

/// Module path (`alert::rule`) → the modules it names, from `crate::…` and `super::…` paths.
/// A parent and its own children are one unit (a `mod.rs` re-exporting its children and a
/// child using its parent's items is the usual facade, not layering), so edges between a
/// module and its ancestors are dropped. Test files are left out: a test may reach anywhere.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeMap<String, PathBuf> = rust_files(src)
        .into_iter()
        .filter(|f| !is_test_file(f))
        .filter_map(|f| Some((module_of(src, &f)?, f)))
        .collect();
    let known: BTreeSet<&str> = modules.keys().map(String::as_str).collect();
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let code = without_tests(&text);
        let mut edges = BTreeSet::new();
        for path in paths_in(&code) {
            let Some(target) = resolve(module, &path, &known) else { continue };
            if !related(module, &target) {
                edges.insert(target);
            }
        }
        graph.insert(module.clone(), edges);
    }
    graph
}

/// The code without its inline `#[cfg(test)] mod tests { … }` (by convention the last item
/// of a file); `#[cfg(test)] mod tests;` declarations are kept, they name a test file.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" && lines.peek().is_some_and(|next| next.trim_end().ends_with('{')) {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `crate::a::b::Item` and `super::c::Item` as segment lists, from code with comments removed.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let code: String = code.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && code.as_bytes()[i - 1].is_ascii_alphanumeric() {
                continue;
            }
            let rest = &code[i..];
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            out.push(rest[..end].split("::").filter(|s| !s.is_empty()).map(String::from).collect());
        }
    }
    out
}

/// The longest known module a path names, relative to `from`.
fn resolve(from: &str, path: &[String], known: &BTreeSet<&str>) -> Option<String> {
    let mut base: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => {
            let mut b: Vec<String> = from.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            b.pop();
            b
        }
        _ => return None,
    };
    let mut best = None;
    for seg in &path[1..] {
        if seg == "super" {
            base.pop();
            continue;
        }
        base.push(seg.clone());
        let candidate = base.join("::");
        if known.contains(candidate.as_str()) {
            best = Some(candidate);
        }
    }
    best
}

fn related(a: &str, b: &str) -> bool {
    a == b || a.is_empty() || b.is_empty() || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// `src/alert/rule.rs` → `alert::rule`; `src/alert/mod.rs` → `alert`; `lib.rs`/`main.rs` → ``.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    Some(parts.join("::"))
}

fn is_test_file(f: &Path) -> bool {
    let name = f.file_stem().unwrap().to_string_lossy();
    name == "tests" || name.ends_with("_tests")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}
