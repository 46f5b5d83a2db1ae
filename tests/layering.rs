//! The layering docs/architecture.md describes, checked rather than promised: the pure core
//! depends on no async runtime, network or clock; within each crate, modules import in one
//! direction only (no cycle between files); and the library crates' public functions return
//! typed errors (docs/development.md#errors).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

#[path = "layering/graph.rs"]
mod graph;
#[path = "layering/tokens.rs"]
mod tokens;

use graph::{Graph, cycles, find_cycle, is_test_file, module_graph, rust_files, without_tests};

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

/// No module reaches, by any path, a module that reaches it: not between sibling files, and
/// not between a folder's `mod.rs` and its own files (a `mod.rs` that defines an item its
/// files import back). There is no exemption list.
#[test]
fn modules_import_in_one_direction() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    let mut unexpected = Vec::new();
    for krate in ["crates/core/src", "crates/daemon/src", "crates/sim/src", "src"] {
        let graph = module_graph(&base.join(krate));
        checked += graph.len();
        if krate == "crates/core/src" {
            // The walk sees real edges, inline paths and re-exports included: evaluation
            // fills the report's types, and the report's types import nothing above them.
            assert!(graph["evaluate"].contains("report"), "evaluate → report not found: {:?}", graph["evaluate"]);
            assert!(graph["budget"].contains("report::budget"), "budget's re-export not seen: {:?}", graph["budget"]);
            for (module, edges) in graph.iter().filter(|(m, _)| *m == "report" || m.starts_with("report::")) {
                let above: Vec<_> =
                    edges.iter().filter(|e| !e.starts_with("report") && !BENEATH_REPORT.contains(&top(e))).collect();
                assert!(above.is_empty(), "{module} reaches above the report types: {above:?}");
            }
        }
        for cycle in cycles(&graph) {
            let path = find_cycle(&cycle.iter().map(|m| (m.clone(), graph[m].clone())).collect()).unwrap();
            unexpected.push(format!("{krate}: {} (one path: {})", cycle.join(" "), path.join(" → ")));
        }
    }
    assert!(unexpected.is_empty(), "modules import each other in a cycle:\n{}", unexpected.join("\n"));
    assert!(checked > 100, "only {checked} modules found: is the walk looking in the right place?");
}

/// The core's modules the report types may use: vocabulary, durations, SLO math, GPU values.
const BENEATH_REPORT: &[&str] = &["canonical", "duration", "slo", "gpu"];

fn top(module: &str) -> &str {
    module.split("::").next().unwrap()
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let g: Graph = [
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

/// A source tree of `(path, text)` files in a temp dir, and the cycle the check finds in it.
fn cycle_in(files: &[(&str, &str)]) -> Option<Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    find_cycle(&module_graph(dir.path()))
}

fn assert_cycle(files: &[(&str, &str)], through: &[&str]) {
    let cycle = cycle_in(files).unwrap_or_else(|| panic!("no cycle found in {files:#?}"));
    for m in through {
        assert!(cycle.iter().any(|c| c == m), "cycle {cycle:?} does not pass through {m}");
    }
}

const LIB: (&str, &str) = ("lib.rs", "pub mod a;\npub mod b;\n");

#[test]
fn a_cycle_through_inline_paths_is_found() {
    // Neither file has a `use`: the paths sit in a field type and a call.
    assert_cycle(
        &[
            LIB,
            ("a.rs", "pub struct A { pub b: Option<crate::b::B> }\n"),
            ("b.rs", "pub struct B;\npub fn f() -> usize { std::mem::size_of::<crate::a::A>() }\n"),
        ],
        &["a", "b"],
    );
}

#[test]
fn a_cycle_through_use_trees_and_aliases_is_found() {
    assert_cycle(
        &[
            LIB,
            ("a.rs", "use crate::{b::{self as other}, a as _};\npub struct A(pub other::B);\n"),
            ("b.rs", "use crate::{a::A};\npub struct B;\npub fn f(_: A) {}\n"),
        ],
        &["a", "b"],
    );
}

#[test]
fn a_cycle_between_a_mod_rs_and_its_own_file_is_found() {
    // The folder's mod.rs defines what its file uses, and uses the file in turn.
    assert_cycle(
        &[
            ("lib.rs", "pub mod x;\n"),
            ("x/mod.rs", "mod child;\npub struct Spec;\npub fn run() { child::work() }\n"),
            ("x/child.rs", "pub fn work() { let _ = super::Spec; }\n"),
        ],
        &["x", "x::child"],
    );
}

#[test]
fn a_cycle_through_a_re_export_is_found() {
    // `a` re-exports `b`'s type, and `b` needs `a`'s.
    assert_cycle(
        &[LIB, ("a.rs", "pub use crate::b::B;\npub struct A;\n"), ("b.rs", "pub struct B(pub crate::a::A);\n")],
        &["a", "b"],
    );
}

#[test]
fn a_cycle_through_super_paths_is_found() {
    assert_cycle(
        &[
            ("lib.rs", "pub mod x;\n"),
            ("x/mod.rs", "pub mod a;\npub mod b;\n"),
            ("x/a.rs", "pub struct A;\npub fn f(_: super::b::B) {}\n"),
            ("x/b.rs", "use super::super::x::a;\npub struct B;\npub fn g(_: a::A) {}\n"),
        ],
        &["x::a", "x::b"],
    );
}

#[test]
fn a_cycle_through_a_serde_path_is_found() {
    assert_cycle(
        &[
            LIB,
            ("a.rs", "#[derive(Serialize)]\npub struct A { #[serde(serialize_with = \"crate::b::ser\")] pub x: u8 }\n"),
            ("b.rs", "pub fn ser(_: &crate::a::A) {}\n"),
        ],
        &["a", "b"],
    );
}

#[test]
fn a_cycle_through_a_function_named_as_its_module_is_found() {
    // `use crate::b` takes both the module and the function the root re-exports beside it.
    assert_cycle(
        &[
            ("lib.rs", "pub mod a;\npub mod b;\npub use b::b;\n"),
            ("a.rs", "use crate::b;\npub struct A;\npub fn g() { b() }\n"),
            ("b.rs", "pub fn b() { let _ = crate::a::A; }\n"),
        ],
        &["a", "b"],
    );
}

#[test]
fn a_facade_mod_rs_that_only_re_exports_is_no_cycle() {
    // A path through a re-export lands on the file that defines the item, so a file may use
    // its sibling through the folder's facade; comments, strings and tests name nothing.
    let files = [
        ("lib.rs", "pub mod x;\npub use x::Thing;\n"),
        ("x/mod.rs", "mod spec;\nmod child;\npub use child::Thing;\npub use spec::*;\n"),
        ("x/spec.rs", "pub struct Spec;\n// crate::x::child::Thing\npub const S: &str = \"crate::Thing is here\";\n"),
        (
            "x/child.rs",
            "use super::Spec;\npub struct Thing(pub Spec);\n#[cfg(test)]\nmod tests {\n    use crate::x::child::Thing;\n}\n",
        ),
        ("x/tests.rs", "use crate::x::child::Thing;\n"),
    ];
    assert_eq!(cycle_in(&files), None);
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let g = module_graph(dir.path());
    assert_eq!(g["x::child"], BTreeSet::from(["x::spec".to_string()]), "{g:?}");
    assert_eq!(g["x"], BTreeSet::from(["x::child".to_string(), "x::spec".to_string()]), "{g:?}");
    assert_eq!(g[""], BTreeSet::from(["x::child".to_string()]), "{g:?}");
    assert!(g["x::spec"].is_empty(), "{g:?}");
}

/// A library's public function says why it failed in a type (`thiserror`), whose text is
/// the message the user reads; a bare `String` error is left only to private helpers whose
/// text goes straight into a log line. Only `pub` items count: `pub(crate)` and narrower
/// are not a crate's boundary.
#[test]
fn public_functions_return_typed_errors() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    let mut checked = 0;
    for krate in ["crates/core/src", "crates/daemon/src", "crates/sim/src"] {
        for file in rust_files(&base.join(krate)) {
            if is_test_file(&file) {
                continue;
            }
            let code = without_tests(&std::fs::read_to_string(&file).unwrap());
            for signature in public_signatures(&code) {
                checked += 1;
                if returns_string_error(&signature) {
                    offenders.push(format!("{}: {signature}", file.display()));
                }
            }
        }
    }
    assert!(checked > 500, "only {checked} public functions found: is the walk looking in the right place?");
    assert!(offenders.is_empty(), "public functions with a String error:\n{}", offenders.join("\n"));
}

#[test]
fn the_typed_error_check_finds_a_string_error() {
    let code = "pub fn a(x: u8) -> Result<u8, String> {\n}\nfn b() -> Result<(), String> {}\n\
                pub async fn c(\n    y: u8,\n) -> Result<Vec<(u8, u8)>, String> {}\n\
                pub fn d() -> Result<String, Error> {}\npub(crate) fn e() -> Result<(), String> {}\n";
    let found: Vec<String> = public_signatures(code).into_iter().filter(|s| returns_string_error(s)).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].starts_with("pub fn a") && found[1].starts_with("pub async fn c"), "{found:?}");
}

/// Every `pub fn` / `pub async fn` signature in `code`, on one line, up to its body or `;`.
fn public_signatures(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = ["pub fn ", "pub async fn ", "pub const fn "].iter().filter_map(|p| rest.find(p)).min() {
        let tail = &rest[i..];
        let end = tail.find(['{', ';']).unwrap_or(tail.len());
        out.push(tail[..end].split_whitespace().collect::<Vec<_>>().join(" "));
        rest = &tail[end..];
    }
    out
}

/// Whether a signature's return type is a `Result` whose error is a `String`.
fn returns_string_error(signature: &str) -> bool {
    signature.split_once("->").is_some_and(|(_, ret)| {
        let ret = ret.trim();
        ret.starts_with("Result<")
            && ret.trim_end_matches(|c: char| c.is_whitespace() || c == '>').ends_with(", String")
    })
}
