//! Config reload (docs/discovery.md#reload): on SIGHUP, and when the config file changes
//! (an edit, or a Kubernetes ConfigMap's `..data` symlink swap), the file is read and
//! validated again, then applied at once or not at all.
//!
//! Every key changes live. What the daemon holds is data, not configuration, and is kept:
//! the scrapes in each target's windows are evaluated again under new windows, SLOs and
//! intervals, alerts of unchanged rules carry on, error budgets follow one rule
//! (crate::budget::reload), the request store judges what it holds again. Only a target
//! whose source changed (URL, engine or model) starts empty. The reload first does what
//! can fail (binding a new address, a new `state_dir`, new delivery workers: super::apply,
//! super::listeners) and changes nothing if any of it does; then it applies the config to
//! the evaluation loop between two ticks, to the fleet of targets and to the listeners.
//! One log line lists every change and what it did ([`crate::config::changes`]), and
//! `llm_slo_config_last_reload_successful` tells the outcome, as Prometheus reports its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::apply::{self, ReloadError};
use super::clock::Clock;
use super::listeners::Listeners;
use super::tick::Engine;
use crate::config::changes::{self, between_configs};
use crate::config::normal::normalize;
use crate::config::{self, Config};
use crate::serve::reload::ReloadStats;

/// How often the config file's metadata is compared.
pub const POLL: Duration = Duration::from_secs(1);

/// Applies new configs to a running daemon.
#[derive(Clone)]
pub struct Reloader(Arc<Inner>);

struct Inner {
    /// The config in force; the fleet of targets follows it.
    configs: watch::Sender<Arc<Config>>,
    engine: Engine,
    listeners: Arc<std::sync::Mutex<Listeners>>,
    stats: Arc<ReloadStats>,
    clock: Arc<dyn Clock>,
    /// One reload at a time: a SIGHUP during a file change's reload waits for it.
    serial: tokio::sync::Mutex<()>,
}

/// What a reload applied.
#[derive(Debug, Clone)]
pub struct Reloaded {
    /// Each change and what it does ([`crate::config::changes`]); empty for the same config.
    pub changes: Vec<changes::Change>,
    /// What the reload did to state that the changes do not say: alerts ended, budgets
    /// restarted, request series judged again.
    pub notes: Vec<String>,
    /// The hash of the config now in force (`llm_slo_config_info`).
    pub hash: String,
}

impl Reloader {
    pub fn new(
        configs: watch::Sender<Arc<Config>>,
        engine: Engine,
        listeners: Arc<std::sync::Mutex<Listeners>>,
        stats: Arc<ReloadStats>,
        clock: Arc<dyn Clock>,
    ) -> Reloader {
        stats.succeeded(clock.now_ms());
        stats.running(&normalize(&configs.borrow()));
        let serial = tokio::sync::Mutex::new(());
        Reloader(Arc::new(Inner { configs, engine, listeners, stats, clock, serial }))
    }

    /// The config in force.
    pub fn current(&self) -> Arc<Config> {
        self.0.configs.borrow().clone()
    }

    /// Makes `new` the running config, or says why it cannot (an address that cannot be
    /// bound, a `state_dir` that cannot be used), having changed nothing.
    pub async fn apply(&self, new: Config) -> Result<Reloaded, ReloadError> {
        let me = &self.0;
        let _one = me.serial.lock().await;
        let current = self.current();
        if *current == new {
            me.stats.succeeded(me.clock.now_ms());
            let hash = me.stats.hash().unwrap_or_default();
            return Ok(Reloaded { changes: Vec::new(), notes: Vec::new(), hash });
        }
        let changes = between_configs(&current, &new);
        // What can fail, first: binding new addresses, a new state_dir, delivery workers.
        let ready = match Listeners::plan(&me.listeners, &new).await {
            Ok(plan) => apply::prepare(&current, &new, plan.addr).map(|p| (plan, p)),
            Err(e) => Err(ReloadError::Listen(e)),
        };
        let (plan, prepared) = match ready {
            Ok(r) => r,
            Err(why) => {
                me.stats.failed();
                return Err(why);
            }
        };
        let notes = {
            let mut post = me.engine.post.lock().await;
            let rearm = post.every != new.evaluation_interval;
            let notes = post.reconfigure(&current, &new, prepared).await;
            if rearm {
                me.engine.rearm.notify_one();
            }
            notes
        };
        let normal = normalize(&new);
        me.listeners.lock().unwrap_or_else(|e| e.into_inner()).commit(Some(&current), &new, plan);
        me.configs.send_replace(Arc::new(new));
        me.stats.running(&normal);
        me.stats.succeeded(me.clock.now_ms());
        Ok(Reloaded { changes, notes, hash: normal.hash() })
    }

    /// Reads, validates and applies the config file at `path`, `prepare` having adjusted it
    /// as at start (the command line's overrides). Logs the outcome in one line; true when
    /// applied.
    pub async fn reload_file(&self, path: &Path, prepare: fn(&mut Config)) -> bool {
        // Reading and validating is file I/O and CPU: off the async workers.
        let p = path.to_path_buf();
        let loaded = match tokio::task::spawn_blocking(move || config::load(&p)).await {
            Ok(l) => l,
            Err(e) => {
                self.0.stats.failed();
                tracing::error!("config reload failed: {e}");
                return false;
            }
        };
        let loaded = match loaded {
            Ok(l) => l,
            Err(errors) => {
                for e in &errors.0 {
                    tracing::error!("{e}");
                }
                self.0.stats.failed();
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
        match self.apply(new).await {
            Ok(r) if r.changes.is_empty() => {
                tracing::info!(file = %path.display(), hash = %r.hash, "config reloaded: nothing changed");
                true
            }
            Ok(r) => {
                let changes: Vec<String> = r.changes.iter().map(ToString::to_string).collect();
                let notes =
                    if r.notes.is_empty() { String::new() } else { format!(" | state: {}", r.notes.join("; ")) };
                tracing::info!(
                    file = %path.display(),
                    hash = %r.hash,
                    "config reloaded, {} change(s): {}{notes}",
                    changes.len(),
                    changes.join("; ")
                );
                true
            }
            Err(why) => {
                tracing::error!(file = %path.display(), "config reload refused: {why}; the running config stays");
                false
            }
        }
    }
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

/// Reloads `path` on SIGHUP and whenever it changes (`changes`, made from `path`), until `stop`.
pub async fn watch(
    reloader: Reloader,
    mut changes: Changes,
    path: PathBuf,
    prepare: fn(&mut Config),
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let why = tokio::select! {
            _ = stop.changed() => return,
            why = changes.next() => why,
        };
        match why {
            Change::Signal => tracing::info!(file = %path.display(), "SIGHUP: reloading the config"),
            Change::File => tracing::info!(file = %path.display(), "the config file changed: reloading it"),
        }
        reloader.reload_file(&path, prepare).await;
    }
}

/// Why the config file is to be read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// SIGHUP.
    Signal,
    /// The file is another version than when last seen: an edit, or a ConfigMap swap.
    File,
}

/// The SIGHUPs and changes of one config file, the running daemon's reloads and a daemon
/// waiting for a valid config (super::standby) both follow.
pub struct Changes {
    path: PathBuf,
    hup: Hangup,
    last: Option<Stamp>,
    ticks: tokio::time::Interval,
}

impl Changes {
    /// Starts from the file as it is now; SIGHUP is caught from here on.
    pub fn new(path: PathBuf) -> Changes {
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        Changes { hup: hangup(), last: stamp(&path), path, ticks }
    }

    /// The next SIGHUP or change of the file. Cancel-safe: a `select!` may drop it.
    pub async fn next(&mut self) -> Change {
        loop {
            let signalled = tokio::select! {
                _ = recv(&mut self.hup) => true,
                _ = self.ticks.tick() => false,
            };
            let now = stamp(&self.path);
            // Unchanged, or gone for a moment (an editor's or a ConfigMap's swap).
            if !signalled && (now == self.last || now.is_none()) {
                continue;
            }
            self.last = now;
            return if signalled { Change::Signal } else { Change::File };
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
