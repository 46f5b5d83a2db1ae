//! The shared skip-or-fail helper (tests/it/tools) itself: what it decides for a missing tool
//! with and without GOODPUT_REQUIRE_TOOLS=1, and how it searches PATH.

use crate::tools;

use tools::{Decision, decide, decide_opt_in, find_in};

#[test]
fn found_is_used_missing_is_skipped_unless_required() {
    assert_eq!(decide(true, false), Decision::Use);
    assert_eq!(decide(true, true), Decision::Use);
    assert_eq!(decide(false, false), Decision::Skip);
    assert_eq!(decide(false, true), Decision::Fail);
}

#[test]
fn an_opt_in_test_skips_unless_enabled_even_when_tools_are_required() {
    assert_eq!(decide_opt_in(true), Decision::Use);
    assert_eq!(decide_opt_in(false), Decision::Skip);
}

#[test]
fn path_search_takes_the_first_directory_and_only_files() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A directory named like the tool is not the tool.
    std::fs::create_dir(a.path().join("promtool")).unwrap();
    std::fs::write(a.path().join("alertmanager"), "").unwrap();
    std::fs::write(b.path().join("promtool"), "").unwrap();
    std::fs::write(b.path().join("prometheus-alertmanager"), "").unwrap();
    let path = std::env::join_paths([a.path(), b.path()]).unwrap();
    assert_eq!(find_in(&path, &["promtool"]), Some(b.path().join("promtool")));
    // Directory order wins over name order, as in a shell.
    assert_eq!(find_in(&path, &["prometheus-alertmanager", "alertmanager"]), Some(a.path().join("alertmanager")));
    assert_eq!(find_in(&path, &["prometheus"]), None);
}
