//! The build says where it came from: `goodput --version` and `llm_slo_build_info` name the
//! commit the binary was built from, so a dashboard or a bug report can tell builds apart.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn git_head() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert_eq!(version.trim(), format!("goodput {} ({})", env!("CARGO_PKG_VERSION"), goodput::COMMIT));
    match git_head() {
        // Built in this checkout: the stamp is its HEAD, not a stale one.
        Some(head) => assert_eq!(goodput::COMMIT, head),
        None => assert_eq!(goodput::COMMIT, "unknown"),
    }
}

#[test]
fn metrics_carry_build_info() {
    let report = goodput::Report::default();
    let body = goodput::serve::render_metrics(&report, None, &Default::default(), None, &[]);
    let line =
        format!("llm_slo_build_info{{version=\"{}\",commit=\"{}\"}} 1.0", env!("CARGO_PKG_VERSION"), goodput::COMMIT);
    assert!(body.lines().any(|l| l == line), "{line} not in:\n{body}");
    assert!(body.contains("# TYPE llm_slo_build_info gauge"), "{body}");
}
