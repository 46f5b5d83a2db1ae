//! The running daemon: one scrape task per target, an evaluator that publishes a
//! [`Report`] every tick, and the HTTP server, all stopped together on shutdown.
//!
//! Shutdown is bounded by [`SHUTDOWN_GRACE`] (docs/deploy.md, docs/limits.md): scraping
//! stops at once, an evaluation in progress is abandoned (its report would be published to
//! nobody), queued alert notifications get [`ALERT_FLUSH`] to go out, and whatever is still
//! running at the deadline is dropped.

mod apply;
pub mod budget;
pub mod clock;
pub mod evaluator;
pub mod fleet;
pub mod gpu;
pub mod listeners;
pub mod reload;
pub mod requests;
mod shutdown;
pub mod standby;
pub mod target;
#[cfg(test)]
mod tests;
pub mod tick;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

pub use apply::ReloadError;

use crate::config::Config;
use crate::deliver::Delivery;
use crate::enrich::Enricher;
use crate::inbox::Inbox;
use crate::report::Report;
use crate::serve::{self, Shared};
use crate::state::{self, metrics::StateStats};
use clock::Clock;
use evaluator::{Evaluator, Roster};
use listeners::Listeners;
use requests::RequestPath;
use target::TargetRuntime;
use tick::{Engine, Post, evaluate_loop};

pub use shutdown::{ALERT_FLUSH, SHUTDOWN_GRACE, SNAPSHOT_GRACE};

/// A started daemon. Drop does not stop it; call [`Daemon::shutdown`].
pub struct Daemon {
    /// The HTTP server, the OTLP receiver and the taps, which a reload may move.
    listeners: Arc<std::sync::Mutex<Listeners>>,
    shared: Shared,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    inbox: Inbox,
    reloader: reload::Reloader,
}

impl Daemon {
    fn listeners(&self) -> std::sync::MutexGuard<'_, Listeners> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The address the HTTP server is bound to now (resolves port 0; a reload may move it).
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners().addr().unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The inbox request records go into (docs/architecture.md#the-request-path): what the
    /// taps and the OTLP receiver push, evaluated with each tick's report.
    pub fn request_inbox(&self) -> Inbox {
        self.inbox.clone()
    }

    /// The address the tap of `target` is bound to (resolves port 0); `None` for a target
    /// without a tap.
    pub fn tap_addr(&self, target: &str) -> Option<SocketAddr> {
        self.listeners().tap(target).map(|tap| tap.addr)
    }

    /// Every request record the tap of `target` has made so far.
    #[cfg(feature = "test-hooks")]
    pub fn tap_records(&self, target: &str) -> Vec<crate::request::RequestRecord> {
        self.listeners().tap(target).map(|tap| tap.seen.records()).unwrap_or_default()
    }

    /// The address the OTLP receiver is bound to, when `otlp:` is configured.
    pub fn otlp_addr(&self) -> Option<SocketAddr> {
        self.listeners().otlp().map(|o| o.addr)
    }

    /// Every request record the OTLP receiver has queued so far.
    #[cfg(feature = "test-hooks")]
    pub fn otlp_records(&self) -> Vec<crate::request::RequestRecord> {
        self.listeners().otlp().map(|o| o.records()).unwrap_or_default()
    }

    /// Makes `config` the running config (docs/discovery.md#reload) and says what changed,
    /// or, when part of it cannot be applied (an address that cannot be bound, a
    /// `state_dir` that cannot be used), says why and keeps the running one whole. Either
    /// way `llm_slo_config_last_reload_successful` tells.
    pub async fn reload(&self, config: Config) -> Result<reload::Reloaded, ReloadError> {
        self.reloader.apply(config).await
    }

    /// The command line options that change every config the daemon runs (as flags, e.g.
    /// `--no-alert-delivery`), shown at `/api/v1/config` so that `goodput check --against`
    /// makes the same changes to the file it compares.
    pub fn set_overrides(&self, flags: Vec<String>) {
        self.shared.reload.set_overrides(flags);
    }

    /// Reloads the config from `path` on SIGHUP and whenever the file changes, `prepare`
    /// applying the command line's overrides each time as at start.
    pub fn watch_config(&mut self, path: std::path::PathBuf, prepare: fn(&mut Config)) {
        let stop = self.stop.subscribe();
        // SIGHUP is caught from this call on, not from whenever the task first runs: the HTTP
        // server already answers, and a SIGHUP sent once it does must reload, not end the process.
        let changes = reload::Changes::new(path.clone());
        self.tasks.spawn(reload::watch(self.reloader.clone(), changes, path, prepare, stop));
    }

    /// The latest published report.
    pub fn report(&self) -> Arc<Report> {
        self.shared.report.load_full()
    }

    /// Stops scraping, evaluation and serving within [`SHUTDOWN_GRACE`]: queued alerts are
    /// flushed for up to [`ALERT_FLUSH`], in-flight HTTP requests may finish, and anything
    /// still running at the deadline is dropped. An evaluation running on a blocking thread
    /// is not waited for; the process exit ends it.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        loop {
            match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Ok(Some(Err(e))) if e.is_panic() => tracing::error!("a daemon task panicked: {e}"),
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(_) => {
                    tracing::warn!(
                        tasks = self.tasks.len(),
                        "shutdown took longer than {SHUTDOWN_GRACE:?}; dropping what is still running"
                    );
                    self.tasks.abort_all();
                    return;
                }
            }
        }
    }
}

/// Most request records held between two evaluation ticks; past it they are dropped and
/// counted. At 1,000 requests/s and a 5 s tick that is 5,000; a record is a few hundred
/// bytes plus 16 per ITL gap.
pub const REQUEST_INBOX_CAPACITY: usize = 65_536;

/// Binds the listener, starts every task and returns. Errors only on setup (the listen
/// address is taken, a client cannot be built); target trouble is never an error.
///
/// `clock` is read through the step guard ([`clock::Steady`]): a step of the wall clock
/// (or of the clock a test injects) is bridged or followed, never seen by the windows as
/// time going back.
pub async fn start(config: Config, clock: Arc<dyn Clock>) -> std::io::Result<Daemon> {
    // Before anything opens a descriptor, so that the connection cap is sized to the
    // raised limit.
    if let Some(n) = crate::listen::fds::raise_nofile_limit() {
        tracing::debug!(limit = n, "open file descriptor limit");
    }
    // One inbox for every producer (the taps, the OTLP receiver), drained by the evaluation
    // loop into the request store.
    let inbox = Inbox::new(REQUEST_INBOX_CAPACITY);
    let requests = RequestPath::new(&config, inbox.clone());
    let (stop, stop_rx) = watch::channel(false);
    let mut shared = Shared::new();
    shared.set_external_labels(&config.external_labels);
    let clock: Arc<dyn Clock> = Arc::new(clock::Steady::new(clock, shared.clock.clone()));
    shared.page = Arc::new(serve::page::StatusPage::new(
        serve::page::PageFacts::from_config(&config),
        serve::page::DEFAULT_RING_LEN,
    ));
    // Every listener is bound before any task starts, so that a taken address fails the
    // start cleanly; they serve once everything behind them runs.
    let listeners = Arc::new(std::sync::Mutex::new(Listeners::new(shared.clone(), inbox.clone(), stop_rx.clone())));
    let plan = Listeners::plan(&listeners, &config).await?;
    let addr = plan.addr;
    let mut tasks = JoinSet::new();

    // The static targets' runtimes exist before anything scrapes, so that the state
    // snapshot is restored into them first; the fleet adopts them below.
    let statics: Vec<Arc<TargetRuntime>> =
        config.targets.iter().map(|t| Arc::new(TargetRuntime::new(t.clone(), config.max_window()))).collect();
    let roster = Roster::default();

    let gpus = gpu::Gpus::start(&config);
    let eval = config.eval_config();
    log_warmup(&config.alerting);
    // Alerts link to this daemon's own /runbooks/ unless the config names another address.
    let alerting = serve::runbooks::with_default_page(&config.alerting, addr);
    tracing::info!(runbooks = alerting.runbook_page().unwrap_or_default(), "alerts link to their runbooks there");
    let mut enricher = Enricher::new(&eval, &alerting, config.gpu.as_ref(), config.cost.as_ref());
    let delivery = Delivery::start(&config.alerting).map_err(std::io::Error::other)?;
    shared.delivery.store(Arc::new(Some(delivery.metrics())));
    let budgets = budget::Budgets::new(&config, roster.clone());
    let requests = requests.with_budget(budgets.book());
    // Restored before the first scrape, which would otherwise find the windows empty.
    let state = config
        .state
        .clone()
        .map(|cfg| -> std::io::Result<state::Keeper> {
            let stats = Arc::new(StateStats::default());
            let sources = state::Sources {
                targets: statics.clone(),
                book: budgets.book(),
                store: requests.store(),
                capacity: enricher.capacity(),
            };
            state::restore::restore(&cfg.dir, &config, &sources, enricher.alerts_mut(), &stats, clock.now_ms())?;
            shared.state.store(Arc::new(Some(stats.clone())));
            let fleet = roster.clone();
            Ok(state::Keeper::new(cfg, &config, sources, stats).following(Arc::new(move || fleet.runtimes())))
        })
        .transpose()?;
    // The static targets start scraping now, the restored ones where they left off;
    // discovered ones as their sources find them.
    let (configs, configs_rx) = watch::channel(Arc::new(config.clone()));
    let fleet = fleet::Fleet::start(
        configs_rx.borrow().clone(),
        roster.clone(),
        clock.clone(),
        statics,
        shared.discovery.clone(),
    );
    tasks.spawn(fleet.run(configs_rx, stop_rx.clone()));
    let evaluator = Evaluator::over(roster.clone(), eval);
    let engine = Engine::new(Post {
        requests,
        budgets,
        enricher,
        gpus,
        delivery,
        external_labels: config.external_labels.clone(),
        state,
        every: config.evaluation_interval,
        eval: evaluator.eval_handle(),
        roster,
        shared: shared.clone(),
        clock: clock.clone(),
    });
    tasks.spawn(evaluate_loop(evaluator, engine.clone(), stop_rx.clone()));
    let reloader = reload::Reloader::new(configs, engine, listeners.clone(), shared.reload.clone(), clock);

    listeners.lock().unwrap_or_else(|e| e.into_inner()).commit(None, &config, plan);
    tasks.spawn(Listeners::drain(listeners.clone(), stop_rx));
    tracing::info!(%addr, targets = config.targets.len(), "goodput is listening");
    Ok(Daemon { listeners, shared, stop, tasks, inbox, reloader })
}

/// Says once, at start, which alert rules stay quiet until their windows are covered, and
/// for how long (docs/alerts.md#after-a-restart).
fn log_warmup(alerting: &crate::alert::AlertingConfig) {
    let waits: Vec<String> = alerting
        .rule_set()
        .rules
        .iter()
        .filter(|r| !r.warmup().is_zero())
        .map(|r| format!("{} {}", r.name.as_str(), crate::duration::format_duration(r.warmup())))
        .collect();
    if !waits.is_empty() {
        tracing::info!(
            "alert rules stay quiet until the windows they read are covered by data (alerting.min_window_coverage); after this start: {}. /api/v1/alerts and llm_slo_alert_rule_ready show what waits",
            waits.join(", ")
        );
    }
}
