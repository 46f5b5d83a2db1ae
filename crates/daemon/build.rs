//! Stamps the commit the daemon was built from into `GOODPUT_COMMIT` (for
//! `llm_slo_build_info` and `goodput --version`): the `GOODPUT_COMMIT` environment variable
//! when set (a container build has no `.git`), else `git rev-parse`, else "unknown".

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=GOODPUT_COMMIT");
    let commit = std::env::var("GOODPUT_COMMIT").ok().filter(|c| !c.is_empty()).or_else(git_commit);
    println!("cargo:rustc-env=GOODPUT_COMMIT={}", commit.as_deref().unwrap_or("unknown"));
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn git_commit() -> Option<String> {
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the ref it names (a commit).
    let head = git(&["rev-parse", "--path-format=absolute", "--git-path", "HEAD"])?;
    println!("cargo:rerun-if-changed={head}");
    if let Some(path) = git(&["symbolic-ref", "-q", "HEAD"])
        .and_then(|name| git(&["rev-parse", "--path-format=absolute", "--git-path", &name]))
        .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={path}");
    }
    // A ref that is not a loose file lives in packed-refs (after `git gc`).
    if let Some(packed) = git(&["rev-parse", "--path-format=absolute", "--git-path", "packed-refs"])
        .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={packed}");
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}
