//! The one place the integration tests decide what to do when something outside the crate
//! is missing: a real tool (Prometheus, promtool, Alertmanager, a C compiler), a header
//! (`nvml.h`) or the real-scrape fixtures. Missing means the test is skipped with a note,
//! unless GOODPUT_REQUIRE_TOOLS=1 (set by `.ci/run`) makes it a failure, so CI can never
//! pass by skipping.
//!
//! Each test binary that needs it declares `mod tools;`; the shared support modules reach
//! it as `crate::tools`.
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

/// The folder of real /metrics scrapes: `$GOODPUT_FIXTURES`, else `shared/fixtures/real`
/// beside the checkout (where CI puts it). `None` when neither exists.
pub fn real_fixtures() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [std::env::var_os("GOODPUT_FIXTURES").map(PathBuf::from), Some(root.join("../shared/fixtures/real"))]
        .into_iter()
        .flatten()
        .find(|p| p.is_dir())
}

/// The path of one real scrape. Tests that are about the fixtures themselves fail, with
/// this message, when they are missing.
pub fn real_fixture(name: &str) -> PathBuf {
    let dir = real_fixtures()
        .unwrap_or_else(|| panic!("no real-scrape fixtures: set GOODPUT_FIXTURES or put shared/ beside the checkout"));
    dir.join(name)
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
