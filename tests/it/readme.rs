//! Every command the README shows runs, as written, and does what its comment says.
//!
//! The commands are read from the README's `sh` blocks, so an edit there is tested here; a
//! command this file does not know how to check fails the test rather than going
//! unchecked. Only what a sandbox forces is changed: the fixed ports (8000 for the engine,
//! 9464 for the daemon) become free ones, long durations become short ones, and the
//! long-running commands (`run`, `demo`, `simulate --listen`) are stopped after they have
//! shown they work. `cargo test` is this run itself.

use crate::net;
use crate::support::PATIENCE;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `goodput …` and `cargo …` command lines of the README's `sh` blocks, comments cut.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = t == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let cmd = t.split("  #").next().unwrap().trim();
        if cmd.starts_with("goodput ") || cmd.starts_with("cargo ") {
            out.push(cmd.to_string());
        }
    }
    out
}

/// Kills the child (ours, by PID) when dropped, so a failed assertion leaves nothing behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    /// SIGTERM, as Kubernetes stops it, then the exit status and everything it printed.
    fn stop(mut self) -> (i32, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let code = loop {
            if let Some(s) = self.0.try_wait().unwrap() {
                break s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "did not stop within 10 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut printed = String::new();
        for pipe in [
            self.0.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
            self.0.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
        ]
        .into_iter()
        .flatten()
        {
            let mut pipe = pipe;
            let _ = pipe.read_to_string(&mut printed);
        }
        (code, printed)
    }
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    net::get_body(addr.rsplit(':').next()?.parse().ok()?, path)
}

/// The body of `GET http://{addr}{path}` once it contains `want`.
fn wait_for(addr: &str, path: &str, want: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(body) = http_get(addr, path).filter(|b| b.contains(want)) {
            return body;
        }
        assert!(Instant::now() < deadline, "GET http://{addr}{path} did not show {want:?} within {PATIENCE:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The README line as argv, with the sandbox's substitutions. A recording must span one
/// 5 s replay step (replay evaluates at multiples of `--step` between the first and the
/// last scrape), hence 7 s.
fn argv(cmd: &str, engine: &str) -> Vec<String> {
    let cmd =
        cmd.replace("127.0.0.1:8000", engine).replace("--interval 5s --duration 10m", "--interval 1s --duration 7s");
    cmd.split_whitespace().skip(1).map(str::to_string).collect()
}

fn run(dir: &Path, args: &[String]) -> Output {
    Command::new(BIN).args(args).current_dir(dir).output().unwrap()
}

fn spawn(dir: &Path, args: &[String]) -> Running {
    Running(
        Command::new(BIN).args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap(),
    )
}

#[track_caller]
fn ok(cmd: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "`{cmd}` exited {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn every_readme_command_runs_as_written() {
    let commands = readme_commands();
    assert!(commands.len() >= 10, "the README's commands were not found: {commands:?}");

    // The configs the README names, with the engine and daemon ports made free.
    let dir = tempfile::tempdir().unwrap();
    let engine = format!("127.0.0.1:{}", net::free_port());
    let listen = format!("127.0.0.1:{}", net::free_port());
    std::fs::create_dir(dir.path().join("config")).unwrap();
    for entry in std::fs::read_dir(root().join("config")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let text =
            text.replace("127.0.0.1:8000", &engine).replace("0.0.0.0:9464", &listen).replace("127.0.0.1:9464", &listen);
        std::fs::write(dir.path().join("config").join(path.file_name().unwrap()), text).unwrap();
    }

    // The live engine first: the other commands read from it.
    let (live, rest): (Vec<&String>, Vec<&String>) = commands.iter().partition(|c| c.contains("--listen"));
    assert_eq!(live.len(), 1, "one `simulate --listen` command: {live:?}");
    let sim = spawn(dir.path(), &argv(live[0], &engine));
    wait_for(&engine, "/metrics", "vllm:");

    let mut checked = 0;
    for cmd in rest {
        let args = argv(cmd, &engine);
        match args.first().map(String::as_str) {
            Some("test") if cmd.starts_with("cargo ") => {} // this very run
            Some("run") if cmd.starts_with("cargo ") => {
                // `cargo run --release -- demo`: the demo, on free ports, for a few seconds.
                assert!(cmd.ends_with("-- demo"), "unknown cargo command in the README: {cmd}");
                let demo_listen = format!("127.0.0.1:{}", net::free_port());
                let d = spawn(
                    dir.path(),
                    &["demo".into(), "--listen".into(), demo_listen.clone(), "--summary-every".into(), "1".into()],
                );
                // The demo scrapes its engines.
                wait_for(&demo_listen, "/metrics", "llm_slo_target_up{target=\"sim-chat\"} 1");
                let (_, printed) = d.stop();
                assert!(printed.contains("goodput demo"), "the demo prints where to look:\n{printed}");
            }
            Some("check") => {
                let out = ok(cmd, &run(dir.path(), &args));
                assert!(
                    out.contains("ok") || out.contains("OK") || out.contains("valid"),
                    "`{cmd}` says the config is good:\n{out}"
                );
            }
            Some("run") => {
                let d = spawn(dir.path(), &args);
                // The daemon scrapes the engine and serves the result.
                wait_for(&listen, "/metrics", "llm_slo_target_up{target=\"vllm\"} 1");
                let (code, printed) = d.stop();
                assert_eq!(code, 0, "the daemon stops cleanly on SIGTERM:\n{printed}");
            }
            Some("inspect") if args.iter().any(|a| a.starts_with("http://")) => {
                let out = ok(cmd, &run(dir.path(), &args));
                assert!(out.contains("vllm"), "inspect detects the simulated vLLM:\n{out}");
            }
            Some("inspect") => {
                // "one saved scrape (any file of a recording)": the recording made above.
                let scrape = std::fs::read_dir(dir.path().join("rec/llama")).unwrap().next().unwrap().unwrap().path();
                std::fs::copy(scrape, dir.path().join("scrape.prom")).unwrap();
                let out = ok(cmd, &run(dir.path(), &args));
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                assert_eq!(v["engine"], "vllm", "{out}");
            }
            Some("record") => {
                ok(cmd, &run(dir.path(), &args));
                let n = std::fs::read_dir(dir.path().join("rec/llama")).unwrap().count();
                assert!(n >= 2, "record wrote {n} scrapes to rec/llama");
            }
            Some("simulate") => {
                ok(cmd, &run(dir.path(), &args));
                assert!(dir.path().join("sim/requests.jsonl").is_file());
                assert!(dir.path().join("sim/llama").is_dir(), "the recording's folder is the config's target");
            }
            Some("replay") => {
                let out = run(dir.path(), &args);
                let stdout = ok(cmd, &out);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(!stderr.contains("warning"), "`{cmd}` replays the recording's target:\n{stderr}");
                if args.iter().any(|a| a == "table") {
                    assert!(
                        stdout.starts_with("at ") && stdout.contains("\nllama "),
                        "a summary per instant:\n{stdout}"
                    );
                } else {
                    let first: serde_json::Value =
                        serde_json::from_str(stdout.lines().next().expect("frames")).unwrap();
                    let samples = first["samples"].as_array().unwrap();
                    assert!(samples.iter().any(|s| s["labels"]["target"] == "llama"), "{first}");
                }
            }
            Some("rules") => {
                let out = ok(cmd, &run(dir.path(), &args));
                assert!(out.contains("kind: PrometheusRule"), "{out}");
            }
            Some("completions") => {
                let out = ok(cmd, &run(dir.path(), &args));
                assert!(out.contains("complete") && out.contains("replay"), "a completion script:\n{out}");
            }
            _ => panic!("tests/it/readme.rs does not know how to check this README command: {cmd}"),
        }
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} commands were checked");
    let (_, printed) = sim.stop();
    assert!(!printed.contains("panicked"), "{printed}");
}

/// docs/README.md is the index of docs/: every page in docs/ is linked from it exactly once,
/// and it links to no page that does not exist.
#[test]
fn the_docs_index_lists_every_page_once() {
    let docs = root().join("docs");
    let index = std::fs::read_to_string(docs.join("README.md")).expect("docs/README.md reads");
    let mut pages: Vec<String> = std::fs::read_dir(&docs)
        .expect("docs/ reads")
        .map(|e| e.expect("a docs/ entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    pages.sort();
    assert!(pages.len() >= 20, "only {} pages in docs/", pages.len());
    let linked: Vec<&str> = index
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|target| !target.contains('/') && target.ends_with(".md"))
        .collect();
    for page in &pages {
        let n = linked.iter().filter(|l| *l == page).count();
        assert_eq!(n, 1, "docs/README.md links {page} {n} times; every page exactly once");
    }
    for l in &linked {
        assert!(pages.iter().any(|p| p == l), "docs/README.md links {l}, which is not in docs/");
    }
}
