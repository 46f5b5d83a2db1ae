//! Logging setup: human-readable or JSON lines on stderr, filtered by `RUST_LOG`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How log lines are written on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal: escape codes in a pipe or a log file are noise
    // to every reader after it (kubectl logs, grep, journald).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second init (tests calling `cli::main` twice) is harmless, so the error is ignored.
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
