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

/// Every profile in Cargo.toml (the container image's `dist` among them) unwinds on a
/// panic: the tap's measurement and each target's evaluation catch their own, and a build
/// that aborts would let a measurement bug take down the daemon and every request through
/// its taps. The daemon crate refuses to compile with `panic = "abort"`; CI builds no
/// `dist`, so this reads the manifest.
#[test]
fn every_build_profile_unwinds() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let mut section = String::new();
    let mut profiles = Vec::new();
    let mut aborting = Vec::new();
    for (n, line) in manifest.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            if let Some(p) = section.strip_prefix("profile.") {
                profiles.push(p.split('.').next().unwrap_or(p).to_string());
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        if section.starts_with("profile.") && key.trim() == "panic" && value.trim().trim_matches('"') != "unwind" {
            aborting.push(format!("Cargo.toml:{}: [{section}] {line}", n + 1));
        }
    }
    for p in ["release", "dist"] {
        assert!(profiles.iter().any(|q| q == p), "[profile.{p}] not found in Cargo.toml: {profiles:?}");
    }
    assert!(aborting.is_empty(), "profiles that abort on a panic: {aborting:?}");
}
