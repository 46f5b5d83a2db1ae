//! Why a simulator run could not start or finish: a bad option, an invalid config, or an
//! I/O failure on a named path or address.
//!
//! The messages are the ones `goodput simulate` and `goodput demo` print. Each carries its
//! cause's text, so the causes (I/O and HTTP client errors) are kept as fields, not chained
//! as sources: the command line prints the whole source chain, which would show them twice.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::config::ConfigError;

/// The error of [`crate::live`], [`crate::offline`], [`crate::drive`], [`crate::capacity`]
/// and the I/O of [`crate::truth`] and [`crate::otlp`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Live mode's `--speed`.
    #[error("--speed must be in (0, 10000], got {0}")]
    LiveSpeed(f64),
    /// The load generator's speed.
    #[error("speed must be a positive number, got {0}")]
    DriveSpeed(f64),
    #[error("cannot build the load generator's HTTP client: {0}")]
    DriveClient(reqwest::Error),
    #[error("--otlp-traces-endpoint must be an http:// URL, got {0:?}")]
    OtlpEndpoint(String),
    #[error("cannot build the OTLP client: {0}")]
    OtlpClient(reqwest::Error),
    #[error("cannot create the ground-truth file {}: {error}", .path.display())]
    TruthFile { path: PathBuf, error: std::io::Error },
    #[error("cannot listen on {addr}: {error}")]
    Listen { addr: SocketAddr, error: std::io::Error },
    /// The bound socket's own address; the OS gave no more context than its error.
    #[error("{0}")]
    ListenerAddr(std::io::Error),
    #[error("--scrape-interval must be at least 10ms")]
    ScrapeInterval,
    #[error("--duration must be at least one --scrape-interval")]
    ShortDuration,
    #[error("two simulated targets are both named {0:?}; give each its own name")]
    DuplicateName(String),
    #[error("{} already holds a recording; remove it or choose another --out", .0.display())]
    RecordingExists(PathBuf),
    #[error("cannot create {}: {error}", .path.display())]
    CreateDir { path: PathBuf, error: std::io::Error },
    #[error("cannot write {}: {error}", .path.display())]
    Write { path: PathBuf, error: std::io::Error },
    /// A capacity sweep's run on its own thread panicked.
    #[error("a sweep run panicked")]
    SweepPanicked,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_failure_says_where_and_why_in_one_message() {
        let error = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "Permission denied");
        let e = RunError::Write { path: "rec/a/1.prom".into(), error };
        assert_eq!(e.to_string(), "cannot write rec/a/1.prom: Permission denied");
        assert!(std::error::Error::source(&e).is_none(), "a chain printer would repeat the cause");
    }
}
