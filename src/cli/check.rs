//! `goodput check --config FILE`: validate a config, print a summary or every error.

use std::path::PathBuf;

use super::CliResult;
use crate::config::{self, Config};
use crate::duration::format_duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The YAML config file to validate.
    #[arg(long, short)]
    pub config: PathBuf,
}

pub fn run(args: Args) -> CliResult {
    match config::load(&args.config) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", summary(&args.config.display().to_string(), &loaded.config));
            Ok(0)
        }
        Err(errs) => {
            for e in &errs.0 {
                eprintln!("error: {e}");
            }
            eprintln!("{}: {} error(s); see docs/config.md for every key", args.config.display(), errs.0.len());
            Ok(1)
        }
    }
}

/// A short human summary of what the daemon will do with this config.
pub fn summary(file: &str, c: &Config) -> String {
    let windows: Vec<String> = c.windows.iter().map(|w| w.label()).collect();
    let quantiles: Vec<String> = c.quantiles.iter().map(|q| q.to_string()).collect();
    let mut s = format!(
        "OK: {file}\n  listen {}\n  scrape every {} (timeout {}, body limit {} bytes, gzip {})\n  evaluate every {} over windows {} at quantiles {}\n  {} target(s):\n",
        c.listen,
        format_duration(c.scrape.interval),
        format_duration(c.scrape.timeout),
        c.scrape.body_limit,
        if c.scrape.gzip { "on" } else { "off" },
        format_duration(c.evaluation_interval),
        windows.join(", "),
        quantiles.join(", "),
        c.targets.len(),
    );
    for t in &c.targets {
        let engine = match t.engine {
            crate::adapt::EngineHint::Auto => "auto".to_string(),
            crate::adapt::EngineHint::Is(e) => e.as_str().to_string(),
        };
        s.push_str(&format!(
            "    {} {} engine={} every {} timeout {}\n",
            t.name,
            t.url,
            engine,
            format_duration(t.interval),
            format_duration(t.timeout)
        ));
    }
    s.push_str(&format!("  {} SLO(s)", c.slos.len()));
    if !c.alerting.alertmanagers.is_empty() {
        s.push_str(&format!(", {} Alertmanager(s)", c.alerting.alertmanagers.len()));
    }
    s.push('\n');
    s
}
