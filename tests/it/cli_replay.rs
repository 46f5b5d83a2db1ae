//! `goodput replay` end to end: the binary on a simulator recording prints one JSON line
//! per instant, the instants are the step's multiples between the first and last scrape,
//! and every value is the library replay's, so the CLI adds nothing and drops nothing.

use std::path::Path;
use std::process::{Command, Output};

use goodput::replay::{Recording, ReplayTarget, replay};

const STEP_MS: i64 = 5_000;
const CONFIG: &str = r#"targets:
  - {name: sim, url: "http://127.0.0.1:8000/metrics"}
windows: [1m, 5m]
slos:
  - {name: chat, ttft: 250ms, tpot: 50ms, objective: 0.99}
"#;

fn goodput(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_goodput")).args(args).output().expect("run goodput")
}

fn simulate(dir: &Path) {
    let out = goodput(&[
        "simulate",
        "--out",
        dir.to_str().expect("utf-8 path"),
        "--duration",
        "3m",
        "--profile",
        "ramp",
        "--engines",
        "2",
        "--seed",
        "11",
    ]);
    assert!(out.status.success(), "simulate failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn replay_cli(config: &Path, rec: &Path) -> Output {
    goodput(&[
        "replay",
        "--config",
        config.to_str().expect("utf-8"),
        "--recording",
        rec.to_str().expect("utf-8"),
        "--step",
        "5s",
    ])
}

/// Scrape times from the file names, independently of the library's scanner.
fn scrape_times(dir: &Path) -> Vec<i64> {
    let mut t: Vec<i64> = std::fs::read_dir(dir)
        .expect("read recording")
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".prom")?.parse().ok())
        .collect();
    t.sort();
    t
}

#[test]
fn replay_prints_the_library_frames_at_every_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("rec");
    simulate(&rec);
    let config = dir.path().join("goodput.yml");
    std::fs::write(&config, CONFIG).expect("config");

    let out = replay_cli(&config, &rec);
    assert!(out.status.success(), "replay failed: {}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();

    // Instants: every multiple of 5 s in [first scrape, last scrape], no gaps.
    let scrapes = scrape_times(&rec.join("sim"));
    let (first, last) = (scrapes[0], scrapes[scrapes.len() - 1]);
    let first_instant = (first + STEP_MS - 1).div_euclid(STEP_MS) * STEP_MS;
    let last_instant = last.div_euclid(STEP_MS) * STEP_MS;
    let ts: Vec<i64> = lines.iter().map(|l| l["t"].as_i64().expect("whole seconds") * 1000).collect();
    assert_eq!(ts.first(), Some(&first_instant));
    assert_eq!(ts.last(), Some(&last_instant));
    assert_eq!(ts.len() as i64, (last_instant - first_instant) / STEP_MS + 1, "one line per step");
    assert!(ts.windows(2).all(|w| w[1] - w[0] == STEP_MS));

    // After a minute of scrapes the TTFT quantiles are there, for the target, per window.
    let late = &lines[lines.len() - 1];
    let ttft: Vec<&serde_json::Value> =
        late["samples"].as_array().expect("samples").iter().filter(|s| s["name"] == "llm_slo_ttft_seconds").collect();
    for w in ["1m", "5m"] {
        let p99 = ttft
            .iter()
            .find(|s| s["labels"]["target"] == "sim" && s["labels"]["window"] == w && s["labels"]["q"] == "0.99")
            .unwrap_or_else(|| panic!("no TTFT p99 over {w} in {late}"));
        let p50 = ttft.iter().find(|s| s["labels"]["window"] == w && s["labels"]["q"] == "0.5").expect("TTFT p50");
        let (p50, p99) = (p50["value"].as_f64().expect("p50"), p99["value"].as_f64().expect("p99"));
        assert!(p50 > 0.0 && p50 <= p99 && p99.is_finite(), "{w}: p50 {p50} p99 {p99}");
    }

    // The very values the library's replay computes, sample for sample.
    let recording = Recording::scan(&rec).expect("scan");
    let targets =
        [ReplayTarget { name: "sim".into(), hint: goodput::adapt::EngineHint::Auto, default_model: "sim".into() }];
    let cfg = goodput::config::load(&config).expect("config").config.eval_config();
    let frames: Vec<_> = replay(&rec, &recording, &targets, cfg, STEP_MS).expect("replay").collect();
    assert_eq!(frames.len(), lines.len());
    let mut compared = 0;
    for (frame, line) in frames.iter().zip(&lines) {
        let expected: serde_json::Value = serde_json::from_str(&frame.json_line()).expect("json");
        assert_eq!(&expected, line, "instant {}", frame.t_ms);
        compared += frame.samples.len();
    }
    assert!(compared > 1000, "only {compared} samples compared");
}

#[test]
fn replay_reports_folders_and_config_mistakes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("rec");
    simulate(&rec);
    // A folder the config does not name is warned about, and the replay still runs.
    let stray = rec.join("stray");
    std::fs::create_dir_all(&stray).expect("mkdir");
    let one = std::fs::read_dir(rec.join("sim")).expect("ls").next().expect("a scrape").expect("entry").path();
    std::fs::copy(&one, stray.join(one.file_name().expect("name"))).expect("copy");
    let config = dir.path().join("goodput.yml");
    std::fs::write(&config, CONFIG).expect("config");
    let out = replay_cli(&config, &rec);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("warning") && err.contains("\"stray\""), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("\"target\":\"stray\""));

    // A configured target without a folder: an error that lists what the recording has.
    std::fs::write(&config, CONFIG.replace("name: sim", "name: llama")).expect("config");
    let out = replay_cli(&config, &rec);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("\"llama\"") && err.contains("sim") && err.contains("stray"), "{err}");
    assert!(out.stdout.is_empty());

    // A config error: exit 1 with file:line:column.
    std::fs::write(&config, CONFIG.replace("windows: [1m, 5m]", "windows: [1m, soon]")).expect("config");
    let out = replay_cli(&config, &rec);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let at = format!("{}:3:", config.display());
    assert!(err.contains(&at), "wanted {at} in {err}");
}

#[test]
fn replay_as_a_table_summarises_each_instant_for_people() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    simulate(&rec);
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let json = replay_cli(&config, &rec);
    let out = goodput(&[
        "replay",
        "--config",
        config.to_str().unwrap(),
        "--recording",
        rec.to_str().unwrap(),
        "--step",
        "5s",
        "--format",
        "table",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    // One block per instant, as many as JSON lines, each headed by its time.
    let instants = String::from_utf8(json.stdout).unwrap().lines().count();
    assert!(instants > 10);
    assert_eq!(table.matches("\nat 20").count() + usize::from(table.starts_with("at 20")), instants, "{table}");
    let last = table.rsplit("\nat ").next().unwrap();
    // The ramp overloads the engines by the end: the last instant says so, with every
    // window, the failures behind the attainment, and the alert states.
    assert!(last.contains("\nsim "), "{last}");
    assert!(last.contains("SLO chat (99.0%): 1m ~") && last.contains(" · 5m "), "{last}");
    assert!(last.contains("requests failed;") && last.contains("goodput "), "{last}");
    assert!(last.contains("\nfiring: ") && last.contains("\npending: "), "{last}");
    assert!(!last.contains("next: open"), "a replay has no daemon to open");
}

/// A model name longer than its column is ellipsized, the row still lines up under the
/// header, and no line of the table passes 120 columns.
#[test]
fn a_replay_table_with_a_long_model_name_fits_120_columns() {
    const MODEL: &str = "meta-llama/Llama-3.1-405B-Instruct-FP8-dynamic";
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec");
    let out = goodput(&[
        "simulate",
        "--profile",
        "steady",
        "--name",
        "sim",
        "--model",
        MODEL,
        "--out",
        rec.to_str().unwrap(),
        "--duration",
        "2m",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let out = goodput(&[
        "replay",
        "-c",
        config.to_str().unwrap(),
        "--recording",
        rec.to_str().unwrap(),
        "--step",
        "30s",
        "--format",
        "table",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).unwrap();
    for line in table.lines() {
        assert!(line.chars().count() <= 120, "{} columns: {line}\n{table}", line.chars().count());
    }
    let header = table.lines().find(|l| l.starts_with("target ")).expect("a header").split("   (over").next().unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("sim ")).collect();
    assert!(!rows.is_empty(), "{table}");
    for row in rows {
        assert!(row.contains(" meta-llama/Llama…uct-FP8-dynamic "), "the name is ellipsized: {row}");
        assert_eq!(row.chars().count(), header.chars().count(), "lined up under the header:\n{header}\n{row}");
        assert!(row.contains(" ms ") || row.contains(" s "), "latencies carry their unit: {row}");
    }
}
