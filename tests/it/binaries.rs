//! Cargo links every `tests/*.rs` and `tests/*/main.rs` as a binary of its own against the
//! whole daemon, which costs build time and disk for each (docs/development.md#test-binaries).
//! The tests live in this harness, one module per file; the list below names the few that
//! stand alone and why. A file left beside them, or one in tests/it/ that main.rs does not
//! declare (and so never runs), fails here.

use std::collections::BTreeSet;
use std::path::Path;

/// The binaries besides this one, each with the reason it cannot be a module here.
const ALONE: &[(&str, &str)] = &[
    ("layering", "reads the source tree's imports; kept apart from the tests of behaviour"),
    ("metrics_cache", "counts allocations with its own global allocator and reads its own RSS"),
    ("discovery_kubernetes", "needs the `kubernetes` feature (Cargo.toml [[test]] required-features)"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn only_the_listed_tests_stand_alone() {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("tests")).expect("tests/") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().expect("a name").to_string_lossy().into_owned();
        let rust_file = path.is_file() && path.extension().is_some_and(|e| e == "rs");
        if rust_file || path.join("main.rs").is_file() {
            found.insert(name);
        }
    }
    let mut expected: BTreeSet<String> = ALONE.iter().map(|(n, _)| n.to_string()).collect();
    expected.insert("it".to_string());
    assert_eq!(
        found, expected,
        "a test file in tests/ is a binary of its own: make it a module of tests/it/main.rs, or say in \
         tests/it/binaries.rs why it must stand alone"
    );
    assert!(expected.len() <= 8, "at most 8 integration test binaries, found {}", expected.len());
}

#[test]
fn every_file_of_the_harness_is_a_module_of_it() {
    let dir = root().join("tests/it");
    let main = std::fs::read_to_string(dir.join("main.rs")).expect("tests/it/main.rs");
    let declared: BTreeSet<&str> =
        main.lines().filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';')).collect();
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("tests/it") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().expect("a name").to_string_lossy().into_owned();
        let module =
            if path.is_dir() { path.join("mod.rs").is_file() } else { path.extension().is_some_and(|e| e == "rs") };
        if module && name != "main" {
            files.insert(name);
        }
    }
    let undeclared: Vec<&String> = files.iter().filter(|f| !declared.contains(f.as_str())).collect();
    assert!(undeclared.is_empty(), "files in tests/it/ that main.rs does not declare, so never run: {undeclared:?}");
    assert!(files.len() > 90, "the harness holds the former test files and their helpers: {}", files.len());
}
