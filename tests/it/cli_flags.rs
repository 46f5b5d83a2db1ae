//! The `goodput` command line as a user types it: `-c` wherever `--config` is taken, shell
//! completions, and simulate's `--engine` (with `--format`, its deprecated name).
//! That every flag has help text is checked on the clap tree itself (src/cli/mod.rs).

use crate::tools;

use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn goodput(args: &[&str]) -> Output {
    Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap()
}

const SUBCOMMANDS: [&str; 9] =
    ["run", "check", "demo", "inspect", "simulate", "record", "replay", "rules", "completions"];

/// Every command that reads a config takes `-c FILE`: given a file that does not exist,
/// each says it cannot read that file (exit 1), where an unknown flag would be clap's
/// usage error (exit 2).
#[test]
fn every_command_with_a_config_takes_dash_c() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-config.yaml");
    let missing = missing.to_str().unwrap();
    let rec = dir.path().to_str().unwrap();
    let cases: [&[&str]; 6] = [
        &["check", "-c", missing],
        &["run", "-c", missing],
        &["replay", "-c", missing, "--recording", rec],
        &["rules", "-c", missing],
        &["demo", "-c", missing],
        &["simulate", "-c", missing, "--out", rec, "--duration", "1s"],
    ];
    for args in cases {
        let out = goodput(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "goodput {args:?}: {err}");
        assert!(err.contains("no-such-config.yaml") && err.contains("cannot read"), "goodput {args:?}: {err}");
    }
    // And a real config through -c is read as through --config.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config/example.yaml");
    let out = goodput(&["check", "-c", example]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = goodput(&["rules", "-c", concat!(env!("CARGO_MANIFEST_DIR"), "/config/sidecar.yaml")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("kind: PrometheusRule"));
}

#[test]
fn completion_scripts_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let out = goodput(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.len() > 1000, "{shell}: {script}");
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "the {shell} script completes `goodput {sub}`");
        }
        assert!(script.contains("--config") || script.contains("-l config"), "{shell} completes flags too");
    }
    let out = goodput(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash"), "it lists the shells");
}

#[test]
fn bash_accepts_the_bash_completion_script() {
    let Some(bash) = tools::require("bash") else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("goodput.bash");
    std::fs::write(&path, goodput(&["completions", "bash"]).stdout).unwrap();
    let check = Command::new(&bash).arg("-n").arg(&path).output().unwrap();
    assert!(check.status.success(), "bash -n: {}", String::from_utf8_lossy(&check.stderr));
    // Sourced, it registers the completion function for `goodput`.
    let registered = Command::new(&bash)
        .arg("-c")
        .arg(format!("source {} && complete -p goodput", path.display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&registered.stdout);
    assert!(
        registered.status.success() && said.contains("goodput"),
        "{said}{}",
        String::from_utf8_lossy(&registered.stderr)
    );
}

/// The simulated engine is `--engine`; `--format`, its old name, still works for scripts
/// written against it, with a warning naming `--engine`.
#[test]
fn simulate_takes_engine_and_warns_on_the_old_format_flag() {
    let dir = tempfile::tempdir().unwrap();
    let run = |flag: &str, out: &str| {
        let out_dir = dir.path().join(out);
        let o =
            goodput(&["simulate", flag, "tgi", "--name", "t", "--out", out_dir.to_str().unwrap(), "--duration", "10s"]);
        assert!(o.status.success(), "{flag}: {}", String::from_utf8_lossy(&o.stderr));
        let scrape = std::fs::read_dir(out_dir.join("t")).unwrap().next().unwrap().unwrap().path();
        (String::from_utf8(o.stderr).unwrap(), std::fs::read_to_string(scrape).unwrap())
    };
    let (err, body) = run("--engine", "new");
    assert!(body.contains("tgi_request_count"), "a TGI exposition: {body}");
    assert!(!err.contains("deprecated"), "{err}");
    let (err, body) = run("--format", "old");
    assert!(body.contains("tgi_request_count"), "a TGI exposition: {body}");
    assert_eq!(
        err.lines().filter(|l| l.contains("deprecated")).collect::<Vec<_>>(),
        ["warning: `goodput simulate --format` is deprecated; use --engine (vllm, sglang or tgi)"]
    );
    // The alias is not advertised.
    let help = String::from_utf8(goodput(&["simulate", "--help"]).stdout).unwrap();
    assert!(help.contains("--engine <ENGINE>") && !help.contains("--format"), "{help}");
    // Both at once is a usage error.
    let both = goodput(&["simulate", "--engine", "tgi", "--format", "vllm", "--out", "x", "--duration", "1s"]);
    assert_eq!(both.status.code(), Some(2));
}
