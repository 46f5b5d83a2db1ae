//! Config reload (docs/discovery.md#reload): on SIGHUP, and when the config file changes
//! (an edit, or a Kubernetes ConfigMap's `..data` symlink swap), the file is read and
//! validated again, then applied at once or not at all.
//!
//! What can change live is where targets come from and how they are scraped: `targets`,
//! `discovery` and `scrape`. A target whose settings did not change keeps its windows and
//! alert state (crates/daemon/src/daemon/fleet.rs). Every other section shapes state built
//! at start (the listener, the windows every target keeps, the alert engine, the error
//! budgets, the taps and the OTLP receiver): a reload that changes one is refused, saying
//! which, and the running config stays, as it does for a file that fails validation. The
//! outcome is `llm_slo_config_last_reload_successful`, as Prometheus reports its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::clock::Clock;
use crate::config::{self, Config};
use crate::serve::reload::ReloadStats;

/// How often the config file's metadata is compared.
pub const POLL: Duration = Duration::from_secs(1);

/// Applies new configs to a running daemon.
#[derive(Clone)]
pub struct Reloader {
    configs: watch::Sender<Arc<Config>>,
    stats: Arc<ReloadStats>,
    clock: Arc<dyn Clock>,
}

impl Reloader {
    pub fn new(configs: watch::Sender<Arc<Config>>, stats: Arc<ReloadStats>, clock: Arc<dyn Clock>) -> Reloader {
        stats.succeeded(clock.now_ms());
        Reloader { configs, stats, clock }
    }

    /// The config in force.
    pub fn current(&self) -> Arc<Config> {
        self.configs.borrow().clone()
    }

    /// Makes `new` the running config, or says why not (a setting that needs a restart).
    pub fn apply(&self, new: Config) -> Result<(), String> {
        let current = self.current();
        if let Err(why) = live_changes_only(&current, &new) {
            self.stats.failed();
            return Err(why);
        }
        if *current != new {
            self.configs.send_replace(Arc::new(new));
        }
        self.stats.succeeded(self.clock.now_ms());
        Ok(())
    }

    /// Reads, validates and applies the config file at `path`, `prepare` having adjusted it
    /// as at start (the command line's overrides). Logs the outcome; true when applied.
    pub fn reload_file(&self, path: &Path, prepare: fn(&mut Config)) -> bool {
        let loaded = match config::load(path) {
            Ok(l) => l,
            Err(errors) => {
                for e in &errors.0 {
                    tracing::error!("{e}");
                }
                self.stats.failed();
                tracing::error!(
                    file = %path.display(),
                    errors = errors.0.len(),
                    "config reload failed: the file does not validate; the running config stays"
                );
                return false;
            }
        };
        for w in &loaded.warnings {
            tracing::warn!("{w}");
        }
        let mut new = loaded.config;
        prepare(&mut new);
        match self.apply(new) {
            Ok(()) => {
                tracing::info!(file = %path.display(), "config reloaded");
                true
            }
            Err(why) => {
                tracing::error!(file = %path.display(), "config reload refused: {why}; the running config stays");
                false
            }
        }
    }
}

/// `Ok` when `new` differs from `current` only in what can change live.
fn live_changes_only(current: &Config, new: &Config) -> Result<(), String> {
    let mut changed = Vec::new();
    let mut check = |key: &'static str, same: bool| {
        if !same {
            changed.push(key);
        }
    };
    check("listen", current.listen == new.listen);
    check("evaluation_interval", current.evaluation_interval == new.evaluation_interval);
    check("server", current.server == new.server);
    check("windows", current.eval_windows() == new.eval_windows());
    check("quantiles", current.eval_quantiles() == new.eval_quantiles());
    check("slos", current.slos == new.slos && current.slo_periods == new.slo_periods);
    check("kv_cache", current.kv_cache == new.kv_cache);
    check("alerting", current.alerting == new.alerting);
    check("gpu", current.gpu == new.gpu);
    check("cost", current.cost == new.cost);
    check("spec_decode", current.spec_draft_cost_ratio == new.spec_draft_cost_ratio);
    check("otlp", current.otlp == new.otlp);
    // The taps listen and the OTLP receiver maps spans to targets from the start; a change
    // of either would leave them behind.
    check("targets[].tap", request_path(current) == request_path(new));
    if changed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} changed, which takes a restart (only targets, discovery and scrape change live; docs/discovery.md#reload)",
        changed.join(", ")
    ))
}

/// What the request path took from the targets at start: each tapped target's tap, and
/// with `otlp:` every target's service name.
fn request_path(c: &Config) -> Vec<(String, Option<config::TapConfig>, Option<String>)> {
    c.targets
        .iter()
        .filter(|t| t.tap.is_some() || c.otlp.is_some())
        .map(|t| (t.name.clone(), t.tap.clone(), c.otlp.is_some().then(|| t.service_name().to_string())))
        .collect()
}

/// What tells one version of the config file from another without reading it: the path it
/// resolves to (a ConfigMap swaps a symlink), its inode, size and modification time.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    resolved: Option<PathBuf>,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp { resolved: std::fs::canonicalize(path).ok(), inode, len: m.len(), modified: m.modified().ok() })
}

/// Reloads `path` on SIGHUP and whenever it changes, until `stop`.
pub async fn watch(reloader: Reloader, path: PathBuf, prepare: fn(&mut Config), mut stop: watch::Receiver<bool>) {
    let mut hup = hangup();
    let mut last = stamp(&path);
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let signalled = tokio::select! {
            _ = stop.changed() => return,
            _ = recv(&mut hup) => true,
            _ = ticks.tick() => false,
        };
        let now = stamp(&path);
        if signalled {
            tracing::info!(file = %path.display(), "SIGHUP: reloading the config");
        } else if now == last || now.is_none() {
            // Unchanged, or gone for a moment (an editor's or a ConfigMap's swap).
            continue;
        } else {
            tracing::info!(file = %path.display(), "the config file changed: reloading it");
        }
        last = now;
        // Reading and validating is file I/O and CPU: off the async workers.
        let (r, p) = (reloader.clone(), path.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || r.reload_file(&p, prepare)).await {
            tracing::error!("config reload failed: {e}");
        }
    }
}

#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangup = ();

fn hangup() -> Hangup {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        signal(SignalKind::hangup())
            .map_err(|e| tracing::warn!("cannot watch SIGHUP ({e}); the config reloads on file changes only"))
            .ok()
    }
}

async fn recv(h: &mut Hangup) {
    #[cfg(unix)]
    match h {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
    #[cfg(not(unix))]
    std::future::pending::<()>().await
}
