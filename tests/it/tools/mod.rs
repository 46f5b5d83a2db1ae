//! The one place the integration tests decide what to do when something outside the crate
//! is missing: a real tool (Prometheus, promtool, Alertmanager, a C compiler) or a header
//! (`nvml.h`). Missing means the test is skipped with a note, unless GOODPUT_REQUIRE_TOOLS=1
//! (set by `.ci/run`) makes it a failure, so CI can never pass by skipping. The real-scrape
//! fixtures need no decision: they are in the repository (`real_fixtures`). A test that builds
//! a lot (a real engine from source) is opt-in instead: `opt_in` runs it only when its
//! variable is set.
//!
//! A module of the harness (tests/it/main.rs) and of the tests that stand alone and need it;
//! the shared support modules reach it as `crate::tools`.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;

/// What a test does about one external requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Found: run the check.
    Use,
    /// Missing, and not required: skip with a note.
    Skip,
    /// Missing, and GOODPUT_REQUIRE_TOOLS=1: fail.
    Fail,
}

/// The decision, apart from the environment, so that it can be tested.
pub fn decide(found: bool, required: bool) -> Decision {
    match (found, required) {
        (true, _) => Decision::Use,
        (false, false) => Decision::Skip,
        (false, true) => Decision::Fail,
    }
}

/// The decision for an opt-in test (one that builds or downloads a lot, and that CI does not
/// run): it runs only when enabled, and otherwise skips, whether or not tools are required.
pub fn decide_opt_in(enabled: bool) -> Decision {
    if enabled { Decision::Use } else { Decision::Skip }
}

/// Whether the opt-in test enabled by `var` (exactly "1") runs; when it does not, a SKIP note
/// says what it would check and how to enable it. GOODPUT_REQUIRE_TOOLS=1 does not make a
/// disabled opt-in test fail: CI does not enable it. Once enabled, what it needs is
/// required: its own checks fail when something is missing.
pub fn opt_in(var: &str, what: &str) -> bool {
    let enabled = std::env::var(var).as_deref() == Ok("1");
    match decide_opt_in(enabled) {
        Decision::Use => true,
        _ => {
            let _ = writeln!(std::io::stderr(), "SKIP: {what} is opt-in; set {var}=1 to run it");
            false
        }
    }
}

/// Whether GOODPUT_REQUIRE_TOOLS=1 (exactly "1"; any other value means not required).
pub fn required() -> bool {
    std::env::var("GOODPUT_REQUIRE_TOOLS").as_deref() == Ok("1")
}

/// Reports that `what` is missing: panics under GOODPUT_REQUIRE_TOOLS=1, otherwise prints
/// a SKIP note naming `fix` (how to get it). The caller then returns from the test.
#[track_caller]
pub fn missing(what: &str, fix: &str) {
    match decide(false, required()) {
        Decision::Fail => panic!("GOODPUT_REQUIRE_TOOLS=1 and {what}; {fix}"),
        _ => {
            // Straight to stderr: libtest captures eprintln! of passing tests, and a skip
            // that nobody sees is how a test silently stops testing.
            let _ = writeln!(std::io::stderr(), "SKIP: {what}; {fix}");
        }
    }
}

/// How to install a tool, for the notes.
fn install_hint(name: &str) -> &'static str {
    match name {
        "prometheus" | "promtool" => "install it with `apt-get install prometheus`",
        "prometheus-alertmanager" | "alertmanager" => "install it with `apt-get install prometheus-alertmanager`",
        _ => "install it or put it on PATH",
    }
}

/// The first of `names` found as a file in a PATH directory, directory by directory (so an
/// earlier directory wins, as in a shell), without any note.
pub fn find(names: &[&str]) -> Option<PathBuf> {
    find_in(&std::env::var_os("PATH")?, names)
}

/// [`find`] over an explicit PATH-style list, so that it can be tested without changing
/// the process environment.
pub fn find_in(path: &OsStr, names: &[&str]) -> Option<PathBuf> {
    std::env::split_paths(path).flat_map(|d| names.iter().map(move |n| d.join(n))).find(|p| p.is_file())
}

/// The tool `name` on PATH; `None` (after a SKIP note) when it is missing, a panic when it
/// is missing under GOODPUT_REQUIRE_TOOLS=1.
#[track_caller]
pub fn require(name: &str) -> Option<PathBuf> {
    require_any(&[name])
}

/// Like [`require`], for a tool known under several names (Debian's
/// `prometheus-alertmanager` is upstream's `alertmanager`).
#[track_caller]
pub fn require_any(names: &[&str]) -> Option<PathBuf> {
    let found = find(names);
    if found.is_none() {
        missing(&format!("{} not found on PATH", names.join(" or ")), install_hint(names[0]));
    }
    found
}

/// `let p = require_tool!("promtool");`: the tool's path, or return from the test (after
/// the SKIP note, or the panic under GOODPUT_REQUIRE_TOOLS=1).
#[allow(unused_macros)]
macro_rules! require_tool {
    ($name:expr) => {
        match $crate::tools::require($name) {
            Some(path) => path,
            None => return,
        }
    };
}
#[allow(unused_imports)]
pub(crate) use require_tool;

/// The folder of real /metrics scrapes, kept in the repository with a `.source.txt` beside
/// each saying where it came from (tests/fixtures/real/README.md).
pub fn real_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real")
}

/// The path of one real scrape.
pub fn real_fixture(name: &str) -> PathBuf {
    real_fixtures().join(name)
}

/// The Python interpreter with the real clients the request-path tests drive: the official
/// `openai` SDK and the OpenTelemetry SDK with its OTLP/HTTP exporter
/// (`.ci-cache/py`, made by `.ci/run` or `scripts/py-clients.sh`). `None` after a SKIP
/// note, or a panic under GOODPUT_REQUIRE_TOOLS=1, when it is missing.
#[track_caller]
pub fn python_clients() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py =
        std::env::var_os("GOODPUT_PYTHON").map(PathBuf::from).unwrap_or_else(|| root.join(".ci-cache/py/bin/python"));
    if py.is_file() {
        return Some(py);
    }
    missing(
        &format!("no Python with the openai and opentelemetry SDKs at {}", py.display()),
        "run `scripts/py-clients.sh` (or set GOODPUT_PYTHON)",
    );
    None
}
