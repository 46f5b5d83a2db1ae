//! `goodput replay --config FILE --recording DIR --step 5s`: a recording evaluated in
//! virtual time by the daemon's own core, one JSON line per instant on stdout, with the
//! families and labels /metrics would show at that instant (docs/replay.md); or, with
//! `--format table`, the demo's terminal summary of each instant, for people.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::subcommand::CliResult;
use crate::duration::parse_duration;
use crate::replay::{Recording, ReplayTarget, replay_with};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The daemon's config; its targets are matched to the recording's folders by name.
    #[arg(long, short)]
    pub config: PathBuf,
    /// A folder written by `goodput record` or `goodput simulate --out`: DIR/<target>/<unix-millis>.prom.
    #[arg(long)]
    pub recording: PathBuf,
    /// Evaluate at every multiple of STEP on the Unix epoch, from the first to the last scrape.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub step: Duration,
    /// `json`: one JSON line per instant (for programs); `table`: a readable summary per
    /// instant.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON line per instant, for programs.
    Json,
    /// The demo's terminal summary per instant, for people.
    Table,
}

pub fn run(args: Args) -> CliResult {
    let Some(cfg) = super::subcommand::load_config(&args.config) else { return Ok(1) };
    let step_ms = i64::try_from(args.step.as_millis()).unwrap_or(i64::MAX);
    if step_ms <= 0 {
        return Err("--step must be at least 1ms, e.g. 5s".into());
    }
    let recording = Recording::scan(&args.recording)?;
    for (name, _) in &recording.targets {
        if !cfg.targets.iter().any(|t| &t.name == name) {
            eprintln!(
                "warning: recording folder {name:?} matches no target in {}; it is not replayed",
                args.config.display()
            );
        }
    }
    let targets: Vec<ReplayTarget> = cfg
        .targets
        .iter()
        .map(|t| ReplayTarget { name: t.name.clone(), hint: t.engine, default_model: t.model.clone() })
        .collect();
    if targets.is_empty() {
        return Err(format!("{} configures no targets; nothing to replay", args.config.display()).into());
    }
    let frames = replay_with(&args.recording, &recording, &targets, cfg.eval_config(), &cfg.alerting, step_ms)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let view = super::summary::View { windows: &cfg.windows, base_url: None };
    for frame in frames {
        let text = match args.format {
            Format::Json => frame.json_line() + "\n",
            Format::Table => {
                let at = std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(frame.t_ms).unwrap_or(0));
                format!(
                    "at {}\n{}",
                    humantime::format_rfc3339_seconds(at),
                    super::summary::render(&frame.report, &view)
                )
            }
        };
        if let Err(e) = out.write_all(text.as_bytes()) {
            // A closed pipe (`| head`) is the reader's choice, not an error.
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(0);
            }
            return Err(e.into());
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}
