//! The module graph of one crate's source tree, one node per file, drawn from every path the
//! code names: `use` trees (braces, globs, aliases, re-exports), inline paths in expressions
//! and types (`crate::a::B`, `super::b::C`, `child::D`, names brought in by `use`), and paths
//! serde attributes name in strings. A path through a re-export lands on the file that defines
//! the item, so a `mod.rs` that only re-exports its files is a facade, while one that defines
//! an item its own files use and also uses theirs is a cycle like any other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::tokens::{Tok, tokens};

pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Module path (`alert::rule`, `` for the crate root) → the modules it depends on. Test files
/// and inline test modules are left out: a test may reach anywhere.
pub fn module_graph(src: &Path) -> Graph {
    let files: BTreeMap<String, File> = rust_files(src)
        .into_iter()
        .filter(|f| !is_test_file(f))
        .filter_map(|f| {
            let module = module_of(src, &f)?;
            let text = std::fs::read_to_string(&f).unwrap();
            Some((module, File::parse(&without_tests(&text))))
        })
        .collect();
    let tree = Tree { files };
    let mut graph = Graph::new();
    for (module, file) in &tree.files {
        let mut edges = BTreeSet::new();
        for import in &file.imports {
            match tree.resolve(module, &import.path, 0) {
                Some(Target::Item(t)) => {
                    edges.insert(t);
                }
                // A glob takes every name: a dependency on the whole module.
                Some(Target::Module(t)) if import.name.is_none() => {
                    edges.insert(t);
                }
                // A module imported by name is a dependency through the paths that use it,
                // but the name may also be a function or constant beside it (`use
                // super::joint` takes both `mod joint` and `fn joint`).
                Some(Target::Module(t)) => {
                    if let (Some(above), Some(name)) = (parent(&t), t.rsplit("::").next())
                        && let Some(Some(Target::Item(d))) = tree.defined(&above, name, 0)
                    {
                        edges.insert(d);
                    }
                }
                None => {}
            }
        }
        for path in &file.paths {
            if let Some(Target::Item(t) | Target::Module(t)) = tree.resolve(module, path, 0) {
                edges.insert(t);
            }
        }
        edges.remove(module);
        graph.insert(module.clone(), edges);
    }
    graph
}

/// A cycle as `a → b → … → a`, if the graph has one.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(n: &str, graph: &Graph, state: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) -> Option<Vec<String>> {
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

/// What a path names: an item defined in a module's file, or a module itself.
enum Target {
    Item(String),
    Module(String),
}

/// One `use` leaf: the path as written, and the name it binds (`None` for a glob).
struct Import {
    path: Vec<String>,
    name: Option<String>,
}

#[derive(Default)]
struct File {
    imports: Vec<Import>,
    /// Names the file itself defines at its top level (types, functions, constants, inline modules, macros).
    defines: BTreeSet<String>,
    /// Inline paths of two or more segments, outside `use` declarations.
    paths: Vec<Vec<String>>,
}

struct Tree {
    files: BTreeMap<String, File>,
}

/// Re-exports can point at each other; deeper than this is a loop, not a path.
const MAX_HOPS: usize = 32;

impl Tree {
    fn child(&self, module: &str, seg: &str) -> Option<String> {
        let c = if module.is_empty() { seg.to_string() } else { format!("{module}::{seg}") };
        self.files.contains_key(&c).then_some(c)
    }

    /// Resolves `path` as written in `from`; `None` for paths outside the crate (std, a
    /// dependency, a local name).
    fn resolve(&self, from: &str, path: &[String], hops: usize) -> Option<Target> {
        if hops > MAX_HOPS || path.is_empty() {
            return None;
        }
        let first = path[0].as_str();
        let mut cur = match first {
            "crate" => String::new(),
            "super" => parent(from)?,
            "self" => from.to_string(),
            _ => {
                if let Some(c) = self.child(from, first) {
                    c
                } else {
                    // A name a `use` of this file brought in: continue from what it names.
                    let import = self.files.get(from)?.imports.iter().find(|i| i.name.as_deref() == Some(first))?;
                    let mut full = import.path.clone();
                    full.extend(path[1..].iter().cloned());
                    return self.resolve(from, &full, hops + 1);
                }
            }
        };
        for seg in &path[1..] {
            match seg.as_str() {
                "super" => cur = parent(&cur)?,
                "self" => {}
                _ => match self.child(&cur, seg) {
                    Some(c) => cur = c,
                    None => return self.lookup(&cur, seg, hops + 1),
                },
            }
        }
        Some(Target::Module(cur))
    }

    /// Where the item `name`, reached through `module`, is defined; `None` when `module`
    /// re-exports it from outside the crate.
    fn lookup(&self, module: &str, name: &str, hops: usize) -> Option<Target> {
        match self.defined(module, name, hops) {
            Some(found) => found,
            // A name the walk cannot place (a macro's output, a variant of an imported
            // enum): the module it was reached through.
            None => self.files.contains_key(module).then(|| Target::Item(module.to_string())),
        }
    }

    /// Where an item `name` that `module` defines or imports (not a child module of that
    /// name) is defined: `None` when it has none, `Some(None)` when it takes it from outside
    /// the crate.
    fn defined(&self, module: &str, name: &str, hops: usize) -> Option<Option<Target>> {
        if hops > MAX_HOPS {
            return None;
        }
        let file = self.files.get(module)?;
        let child = self.child(module, name);
        if file.defines.contains(name) && child.is_none() {
            return Some(Some(Target::Item(module.to_string())));
        }
        for import in file.imports.iter().filter(|i| i.name.as_deref() == Some(name)) {
            match self.resolve(module, &import.path, hops + 1) {
                Some(Target::Module(m)) if Some(&m) == child.as_ref() => {}
                t => return Some(t),
            }
        }
        for glob in file.imports.iter().filter(|i| i.name.is_none()) {
            if let Some(Target::Module(m)) = self.resolve(module, &glob.path, hops + 1)
                && let Some(t) = self.defined(&m, name, hops + 1)
            {
                return Some(t);
            }
        }
        None
    }
}

fn parent(module: &str) -> Option<String> {
    if module.is_empty() {
        return None;
    }
    Some(module.rsplit_once("::").map_or(String::new(), |(p, _)| p.to_string()))
}

const ITEM_KEYWORDS: &[&str] = &["struct", "enum", "fn", "trait", "type", "const", "static", "union", "mod"];
const KEYWORDS: &[&str] = &[
    "as", "async", "const", "crate", "dyn", "enum", "fn", "impl", "let", "mod", "mut", "pub", "ref", "self", "Self",
    "static", "struct", "super", "trait", "type", "union", "unsafe", "use", "where",
];

impl File {
    fn parse(code: &str) -> File {
        let toks = tokens(code);
        let mut file = File::default();
        let mut depth = 0usize;
        // Brace depths of the inline `mod name { … }` blocks around the cursor: their
        // `super::` is this file's module, one level down per block.
        let mut inline_mods: Vec<usize> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            match &toks[i] {
                Tok::Punct('{') => {
                    depth += 1;
                    if i >= 2 && toks[i - 2] == Tok::Ident("mod".into()) {
                        inline_mods.push(depth);
                    }
                }
                Tok::Punct('}') => {
                    if inline_mods.last() == Some(&depth) {
                        inline_mods.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                Tok::Ident(kw) if kw == "use" => {
                    let mut j = i + 1;
                    let from = file.imports.len();
                    use_tree(&toks, &mut j, Vec::new(), &mut file.imports);
                    for import in &mut file.imports[from..] {
                        out_of_inline_mods(&mut import.path, inline_mods.len());
                    }
                    while j < toks.len() && toks[j] != Tok::Punct(';') {
                        j += 1;
                    }
                    i = j + 1;
                    continue;
                }
                Tok::Ident(kw) if depth == 0 && (ITEM_KEYWORDS.contains(&kw.as_str()) || kw == "macro_rules") => {
                    let mut j = i + 1;
                    if toks.get(j) == Some(&Tok::Punct('!')) {
                        j += 1;
                    }
                    if let Some(Tok::Ident(name)) = toks.get(j)
                        && !KEYWORDS.contains(&name.as_str())
                    {
                        file.defines.insert(name.clone());
                    }
                }
                Tok::Ident(first) if i == 0 || toks[i - 1] != Tok::PathSep => {
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j) == Some(&Tok::PathSep) {
                        match toks.get(j + 1) {
                            Some(Tok::Ident(seg)) => path.push(seg.clone()),
                            _ => break,
                        }
                        j += 2;
                    }
                    if path.len() > 1 {
                        out_of_inline_mods(&mut path, inline_mods.len());
                        file.paths.push(path);
                        i = j;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        file
    }
}

/// A path written inside `levels` inline modules, as seen from the file's own module.
fn out_of_inline_mods(path: &mut Vec<String>, levels: usize) {
    let supers = path.iter().take(levels).take_while(|s| *s == "super").count();
    if supers > 0 {
        path.splice(..supers, (supers == levels).then(|| "self".to_string()));
    }
}

/// Parses one use tree at `toks[*j]` under `prefix`, pushing its leaves.
fn use_tree(toks: &[Tok], j: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Import>) {
    loop {
        match toks.get(*j) {
            Some(Tok::PathSep) => *j += 1,
            Some(Tok::Punct('*')) => {
                *j += 1;
                out.push(Import { path: prefix, name: None });
                return;
            }
            Some(Tok::Punct('{')) => {
                *j += 1;
                loop {
                    match toks.get(*j) {
                        Some(Tok::Punct('}')) => {
                            *j += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *j += 1,
                        None => return,
                        _ => use_tree(toks, j, prefix.clone(), out),
                    }
                }
            }
            Some(Tok::Ident(seg)) => {
                prefix.push(seg.clone());
                *j += 1;
                if toks.get(*j) == Some(&Tok::PathSep) {
                    continue;
                }
                let mut name = seg.clone();
                if toks.get(*j) == Some(&Tok::Ident("as".into())) {
                    if let Some(Tok::Ident(alias)) = toks.get(*j + 1) {
                        name = alias.clone();
                    }
                    *j += 2;
                }
                if seg == "self" {
                    prefix.pop();
                    if name == "self" {
                        name = prefix.last().cloned().unwrap_or_default();
                    }
                }
                out.push(Import { path: prefix, name: Some(name) });
                return;
            }
            _ => return,
        }
    }
}

/// The code without its inline `#[cfg(test)] mod tests { … }` (by convention the last item
/// of a file); `#[cfg(test)] mod tests;` declarations are kept, they name a test file.
pub fn without_tests(text: &str) -> String {
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

/// `src/alert/rule.rs` → `alert::rule`; `src/alert/mod.rs` → `alert`; `lib.rs`/`main.rs` → ``.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    Some(parts.join("::"))
}

pub fn is_test_file(f: &Path) -> bool {
    let name = f.file_stem().unwrap().to_string_lossy();
    name == "tests" || name.ends_with("_tests")
}

pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
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

/// The graph's cycles as strongly connected components (each a sorted set of two or more
/// modules that all reach each other), sorted.
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    fn reach(graph: &Graph, from: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    }
    let reached: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|n| (n, reach(graph, n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (n, r) in &reached {
        if !r.contains(*n) || out.iter().any(|c| c.contains(n)) {
            continue;
        }
        out.push(graph.keys().filter(|m| r.contains(*m) && reached[m].contains(*n)).cloned().collect());
    }
    out.sort();
    out
}
