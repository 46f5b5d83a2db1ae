//! What the `goodput rules` tests share: the rules a config gives, and a run of promtool
//! with its output kept for the assertion message. Each test binary that needs it declares
//! `mod rules_common;`, and uses what it needs of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// `goodput rules --format FORMAT` for `config`, written to `dir/goodput.yml`; panics with
/// its stderr when it fails.
pub fn goodput_rules(dir: &Path, config: &str, format: &str) -> String {
    let cfg = dir.join("goodput.yml");
    std::fs::write(&cfg, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_goodput"))
        .args(["rules", "--config"])
        .arg(&cfg)
        .args(["--format", format])
        .output()
        .unwrap();
    assert!(out.status.success(), "goodput rules failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `cmd` (promtool): whether it succeeded, and its stdout and stderr together.
pub fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().expect("run promtool");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}
