//! `goodput record`: save raw scrape bodies as `DIR/<name>/<unix-millis>.prom`
//! (docs/replay.md), the input of `goodput replay` and of the Prometheus oracle tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use url::Url;

use super::subcommand::CliResult;
use crate::config::parse_bytes;
use crate::daemon::clock::{Clock, SystemClock};
use crate::duration::{format_duration, parse_duration, parse_interval, parse_positive_duration};
use crate::scrape::{FetchSpec, Fetcher};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The /metrics URL to record.
    #[arg(long)]
    pub target: String,
    /// Output folder; scrapes go to OUT/<name>/.
    #[arg(long)]
    pub out: PathBuf,
    /// Time between scrapes; at least 100ms, as in the config.
    #[arg(long, default_value = "5s", value_parser = parse_interval)]
    pub interval: Duration,
    /// How long to record.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Subfolder name (the target name replay matches against); defaults to the URL's host.
    #[arg(long)]
    pub name: Option<String>,
    /// Per-scrape timeout; defaults to the interval.
    #[arg(long, value_parser = parse_positive_duration)]
    pub timeout: Option<Duration>,
    /// Largest body accepted.
    #[arg(long, default_value = "64MiB", value_parser = parse_bytes)]
    pub body_limit: usize,
    /// No progress lines on stderr (the final summary and failures are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Time between progress lines; the first comes after the first scrape, so that a wrong
/// URL shows at once.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub fn run(args: Args) -> CliResult {
    let url = Url::parse(&args.target)
        .map_err(|e| format!("--target {:?} is not a URL: {e}", crate::redact::url_str(&args.target)))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(format!("--target must be an http:// or https:// URL, not {:?}", crate::redact::url(&url)).into());
    }
    if args.interval.is_zero() {
        return Err("--interval must be longer than zero".into());
    }
    let name = match args.name.clone() {
        Some(n) => n,
        None => url.host_str().ok_or("--target has no host; pass --name")?.to_string(),
    };
    if name.is_empty() || name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(format!("--name {name:?} cannot be a folder name; use letters, digits, '-' and '.'").into());
    }
    let dir = args.out.join(&name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let fetcher = Fetcher::new(FetchSpec {
        url,
        headers: Vec::new(),
        bearer_token_file: None,
        timeout: args.timeout.unwrap_or(args.interval).min(args.interval),
        body_limit: args.body_limit,
        gzip: true,
        follow_redirects: true,
    })?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let progress = Progress { start: Instant::now(), total: args.duration, quiet: args.quiet };
    let (ok, failed) = rt.block_on(record(&fetcher, &dir, args.interval, &progress));
    eprintln!(
        "recorded {ok} scrape(s) into {} ({failed} failed) in {}",
        dir.display(),
        format_duration(whole_seconds(progress.start.elapsed()))
    );
    Ok(if ok == 0 { 1 } else { 0 })
}

/// The progress lines on stderr.
struct Progress {
    start: Instant,
    total: Duration,
    quiet: bool,
}

impl Progress {
    fn line(&self, ok: u64, failed: u64) {
        if !self.quiet {
            eprintln!(
                "recording: {ok} scrape(s) written, {failed} failed, {} of {}",
                format_duration(whole_seconds(self.start.elapsed())),
                format_duration(self.total)
            );
        }
    }
}

fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// Scrapes every `interval` for the progress's total (or until Ctrl-C); returns (saved,
/// failed).
async fn record(fetcher: &Fetcher, dir: &Path, interval: Duration, progress: &Progress) -> (u64, u64) {
    let clock = SystemClock;
    let end = progress.start + progress.total;
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let (mut ok, mut failed) = (0, 0);
    let mut next_line = None;
    let stop = super::run::shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            t = ticks.tick() => if t >= end { break },
            _ = &mut stop => break,
        }
        let start_ms = clock.now_ms();
        match fetcher.fetch().await {
            Ok(body) => match write_atomically(dir, start_ms, &body) {
                Ok(()) => ok += 1,
                Err(e) => {
                    failed += 1;
                    tracing::warn!("cannot save scrape: {e}");
                }
            },
            Err(e) => {
                failed += 1;
                tracing::warn!("scrape failed: {e}");
            }
        }
        let now = Instant::now();
        if next_line.is_none_or(|t| now >= t) {
            progress.line(ok, failed);
            next_line = Some(now + PROGRESS_EVERY);
        }
    }
    (ok, failed)
}

/// Writes via a temporary name so that a reader never sees half a scrape.
fn write_atomically(dir: &Path, t_ms: i64, body: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{t_ms}.prom.tmp"));
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, dir.join(format!("{t_ms}.prom")))
}
