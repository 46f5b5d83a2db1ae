//! The running daemon: one scrape task per target, an evaluator that publishes a
//! [`Report`] every tick, and the HTTP server, all stopped together on shutdown.
//!
//! Shutdown is bounded by [`SHUTDOWN_GRACE`] (docs/deploy.md, docs/limits.md): scraping
//! stops at once, an evaluation in progress is abandoned (its report would be published to
//! nobody), queued alert notifications get [`ALERT_FLUSH`] to go out, and whatever is still
//! running at the deadline is dropped.

pub mod budget;
pub mod clock;
pub mod evaluator;
pub mod fleet;
pub mod gpu;
pub mod reload;
pub mod requests;
pub mod target;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use crate::config::Config;
use crate::deliver::Delivery;
use crate::enrich::Enricher;
use crate::report::Report;
use crate::requests::Inbox;
use crate::serve::{self, Shared};
use crate::state::{self, metrics::StateStats};
use clock::Clock;
use evaluator::{Evaluator, Roster};
use requests::RequestPath;
use target::TargetRuntime;

/// A started daemon. Drop does not stop it; call [`Daemon::shutdown`].
pub struct Daemon {
    addr: SocketAddr,
    otlp: Option<crate::otlp::Handle>,
    /// Each tapped target's name and its tap.
    taps: Vec<(String, crate::tap::Tap)>,
    shared: Shared,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    inbox: Inbox,
    reloader: reload::Reloader,
}

impl Daemon {
    /// The address the HTTP server is bound to (resolves port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The inbox request records go into (docs/architecture.md#the-request-path): what the
    /// taps and the OTLP receiver push, evaluated with each tick's report.
    pub fn request_inbox(&self) -> Inbox {
        self.inbox.clone()
    }

    /// The address the tap of `target` is bound to (resolves port 0); `None` for a target
    /// without a tap.
    pub fn tap_addr(&self, target: &str) -> Option<SocketAddr> {
        self.taps.iter().find(|(name, _)| name == target).map(|(_, tap)| tap.addr)
    }

    /// Every request record the tap of `target` has made so far.
    #[cfg(feature = "test-hooks")]
    pub fn tap_records(&self, target: &str) -> Vec<crate::request::RequestRecord> {
        self.taps.iter().find(|(name, _)| name == target).map(|(_, tap)| tap.seen.records()).unwrap_or_default()
    }

    /// The address the OTLP receiver is bound to, when `otlp:` is configured.
    pub fn otlp_addr(&self) -> Option<SocketAddr> {
        self.otlp.as_ref().map(|o| o.addr)
    }

    /// Every request record the OTLP receiver has queued so far.
    #[cfg(feature = "test-hooks")]
    pub fn otlp_records(&self) -> Vec<crate::request::RequestRecord> {
        self.otlp.as_ref().map(|o| o.records()).unwrap_or_default()
    }

    /// Makes `config` the running config if it changes only what can change live
    /// (docs/discovery.md#reload); otherwise says why and keeps the running one. Either way
    /// `llm_slo_config_last_reload_successful` tells.
    pub fn reload(&self, config: Config) -> Result<(), String> {
        self.reloader.apply(config)
    }

    /// Reloads the config from `path` on SIGHUP and whenever the file changes, `prepare`
    /// applying the command line's overrides each time as at start.
    pub fn watch_config(&mut self, path: std::path::PathBuf, prepare: fn(&mut Config)) {
        let stop = self.stop.subscribe();
        self.tasks.spawn(reload::watch(self.reloader.clone(), path, prepare, stop));
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

/// The longest [`Daemon::shutdown`] takes. Kubernetes' `terminationGracePeriodSeconds` must
/// be longer (docs/deploy.md).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long queued alert notifications get to reach their destinations on shutdown; within
/// [`SHUTDOWN_GRACE`], leaving the rest of it to the HTTP server.
pub const ALERT_FLUSH: Duration = Duration::from_secs(3);

/// Binds the listener, starts every task and returns. Errors only on setup (the listen
/// address is taken, a client cannot be built); target trouble is never an error.
pub async fn start(config: Config, clock: Arc<dyn Clock>) -> std::io::Result<Daemon> {
    // Before anything opens a descriptor, so that the connection cap is sized to the
    // raised limit.
    if let Some(n) = serve::fds::raise_nofile_limit() {
        tracing::debug!(limit = n, "open file descriptor limit");
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.listen)))?;
    let addr = listener.local_addr()?;
    // One inbox for every producer (the taps, the OTLP receiver), drained by the evaluation
    // loop into the request store.
    let inbox = Inbox::new(REQUEST_INBOX_CAPACITY);
    let requests = RequestPath::new(&config, inbox.clone());
    // Bound before any task starts, so that a taken address fails the start cleanly.
    let receiver = match &config.otlp {
        Some(o) => Some(crate::otlp::Receiver::bind(o, &config.targets, inbox.clone()).await?),
        None => None,
    };
    let (stop, stop_rx) = watch::channel(false);
    let mut shared = Shared::new();
    shared.set_external_labels(&config.external_labels);
    shared.page = Arc::new(serve::page::StatusPage::new(
        serve::page::PageFacts::from_config(&config),
        serve::page::DEFAULT_RING_LEN,
    ));
    let mut tasks = JoinSet::new();

    // The static targets' runtimes exist before anything scrapes, so that the state
    // snapshot is restored into them first; the fleet adopts them below.
    let statics: Vec<Arc<TargetRuntime>> =
        config.targets.iter().map(|t| Arc::new(TargetRuntime::new(t.clone(), config.max_window()))).collect();
    let roster = Roster::default();

    // The taps put their per-request records in the inbox the OTLP receiver uses.
    let mut taps = Vec::new();
    for t in &config.targets {
        if let Some(tap) = &t.tap {
            let started = crate::tap::start(&t.name, tap, inbox.clone(), stop_rx.clone(), &mut tasks).await?;
            shared.taps.0.push((t.name.clone(), started.stats.clone()));
            taps.push((t.name.clone(), started));
        }
    }

    let gpus = gpu::GpuSources::start(&config, stop_rx.clone(), &mut tasks);
    let eval = config.eval_config();
    log_warmup(&config.alerting);
    let mut enricher = Enricher::new(&eval, &config.alerting, config.gpu.as_ref(), config.cost.as_ref());
    let delivery = Delivery::start(&config.alerting).map_err(std::io::Error::other)?;
    shared.delivery = Some(delivery.metrics());
    let budgets = budget::Budgets::new(&config, roster.clone());
    let requests = requests.with_budget(budgets.book());
    // Restored before the first scrape, which would otherwise find the windows empty.
    let state = config.state.clone().map(|cfg| {
        let stats = Arc::new(StateStats::default());
        let sources = state::Sources { targets: statics.clone(), book: budgets.book(), store: requests.store() };
        state::restore::restore(&cfg.dir, &config, &sources, enricher.alerts_mut(), &stats, clock.now_ms());
        shared.state = Some(stats.clone());
        let fleet = roster.clone();
        state::Keeper::new(cfg, &config, sources, stats).following(Arc::new(move || fleet.runtimes()))
    });
    // The static targets start scraping now, the restored ones where they left off;
    // discovered ones as their sources find them.
    let (configs, configs_rx) = watch::channel(Arc::new(config.clone()));
    let fleet = fleet::Fleet::start(configs_rx.borrow().clone(), roster.clone(), clock.clone(), statics);
    tasks.spawn(fleet.run(configs_rx, stop_rx.clone()));
    let reloader = reload::Reloader::new(configs, shared.reload.clone(), clock.clone());
    tasks.spawn(evaluate_loop(
        Evaluator::over(roster, eval),
        Post { requests, budgets, enricher, gpus, delivery, external_labels: config.external_labels.clone(), state },
        config.evaluation_interval,
        clock,
        shared.clone(),
        stop_rx.clone(),
    ));

    let limits = server_limits(&config);
    let otlp = receiver.map(|r| r.spawn(limits, stop_rx.clone(), &mut tasks)).transpose()?;
    shared.otlp = otlp.as_ref().map(|o| o.stats());
    tasks.spawn(serve::server::serve(listener, serve::router(shared.clone()), limits, shared.http.clone(), stop_rx));
    tracing::info!(%addr, targets = config.targets.len(), "goodput is listening");
    Ok(Daemon { addr, otlp, taps, shared, stop, tasks, inbox, reloader })
}

/// The HTTP server's guards, the connection cap fitted under the descriptor limit with a
/// reserve for every outbound destination (serve::fds).
fn server_limits(config: &Config) -> serve::server::ServerLimits {
    let s = config.server;
    // The 1 is the webhook or the dcgm-exporter, should there be one.
    let destinations = config.targets.len() + config.alerting.alertmanager_urls().len() + 1;
    let (max_connections, lowered) =
        serve::fds::connection_cap(s.max_connections, serve::fds::nofile_limit(), destinations);
    if let Some(why) = lowered {
        tracing::warn!("{why}");
    }
    serve::server::ServerLimits {
        max_connections,
        header_read_timeout: s.header_read_timeout,
        idle_timeout: s.idle_timeout,
    }
}

/// What happens to each report after evaluation: request-derived windows, error budgets, GPU
/// join, alert rules, delivery.
struct Post {
    requests: RequestPath,
    budgets: budget::Budgets,
    enricher: Enricher,
    gpus: gpu::GpuSources,
    delivery: Delivery,
    /// `external_labels`, added to every alert.
    external_labels: Vec<(String, String)>,
    /// `None` without `state_dir`.
    state: Option<state::Keeper>,
}

/// Evaluates every target each interval and publishes the report. The first report
/// comes one interval after start, when each target has had its first scrape.
///
/// A tick waits for its evaluations at most half an interval: a target evaluating longer
/// is shown with its previous results (the `evaluator` module).
async fn evaluate_loop(
    evaluator: Evaluator,
    mut post: Post,
    every: std::time::Duration,
    clock: Arc<dyn Clock>,
    shared: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let mut held = HeldRules::default();
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return abandon(&evaluator, &mut post, clock.as_ref()).await,
        }
        // A tick waits for its evaluations up to half an interval; shutdown does not wait for
        // it. Evaluations still running are abandoned: the process exit ends them.
        let began = std::time::Instant::now();
        let tick = evaluator.tick(clock.now_ms(), every / 2);
        let mut report: Report = tokio::select! {
            r = tick => r,
            _ = stop.changed() => return abandon(&evaluator, &mut post, clock.as_ref()).await,
        };
        let evaluated = began.elapsed();
        post.requests.apply(&mut report).await;
        let requests = began.elapsed();
        post.budgets.apply(&mut report).await;
        let budgets = began.elapsed();
        let cpu = thread_cpu();
        let mut notifications = post.enricher.apply(&mut report, post.gpus.latest());
        let (alerts, alerts_cpu) = (began.elapsed(), thread_cpu().saturating_sub(cpu));
        crate::deliver::add_external_labels(&post.external_labels, &mut report, &mut notifications);
        post.delivery.submit(&notifications);
        held.log_armed(&report);
        let (now_ms, enriched) = (report.t_ms, began.elapsed());
        // For a large fleet, the status page's point and freeing the previous report and its
        // /metrics rendering take milliseconds: not on the async workers.
        let s = shared.clone();
        if let Err(e) = tokio::task::spawn_blocking(move || s.publish(report)).await {
            tracing::error!("cannot publish the report: {e}");
        }
        // A tick longer than the interval skips the next (`RUST_LOG=goodput::tick=debug`
        // shows where a large fleet's tick goes: docs/footprint.md).
        tracing::debug!(
            target: "goodput::tick",
            evaluated = ?evaluated,
            enriched = ?(enriched - evaluated),
            requests = ?(requests - evaluated),
            budgets = ?(budgets - requests),
            rules = ?(alerts - budgets),
            rules_cpu = ?alerts_cpu,
            published = ?(began.elapsed() - enriched),
            "tick"
        );
        if let Some(keeper) = post.state.as_mut()
            && keeper.due(now_ms)
        {
            keeper.snapshot(now_ms, post.enricher.alerts().saved(|_| true), false).await;
        }
    }
}

/// CPU time of the calling thread: beside a step's wall time in the tick log, it tells work
/// from waiting for a core or a lock in a busy process.
fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Stops evaluating: says so when an evaluation is still running (a late one goes on in the
/// background after its tick), writes the last state snapshot, then flushes the alerts.
async fn abandon(evaluator: &Evaluator, post: &mut Post, clock: &dyn Clock) {
    let running = evaluator.running();
    if running > 0 {
        tracing::info!(targets = running, "shutting down: abandoning the evaluation in progress");
    }
    if let Some(keeper) = post.state.as_mut() {
        keeper.snapshot(clock.now_ms(), post.enricher.alerts().saved(|_| true), true).await;
    }
    last_flush(&post.delivery).await
}

/// Gives queued resolutions and firing alerts a last chance to go out.
async fn last_flush(delivery: &Delivery) {
    if !delivery.flush(ALERT_FLUSH).await {
        tracing::warn!("shutting down with alert notifications still queued after {ALERT_FLUSH:?}");
    }
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

/// The (alert, target, model) triples whose rule still waits for window coverage, to log
/// when each starts judging.
#[derive(Default)]
struct HeldRules(std::collections::BTreeSet<(&'static str, String, String)>);

impl HeldRules {
    fn log_armed(&mut self, report: &Report) {
        let now: std::collections::BTreeSet<_> = report
            .alert_readiness
            .iter()
            .filter(|r| !r.ready)
            .map(|r| (r.alertname, r.target.clone(), r.model.clone()))
            .collect();
        let left: Vec<_> = self.0.difference(&now).collect();
        // Looked up in a set, built only in a tick where rules stopped waiting: a search of
        // the list per rule armed was quadratic in the fleet, and after a restart thousands
        // of targets' rules arm in the same tick.
        let judged: std::collections::HashSet<(&str, &str, &str)> = if left.is_empty() {
            Default::default()
        } else {
            report.alert_readiness.iter().map(|r| (r.alertname, r.target.as_str(), r.model.as_str())).collect()
        };
        for k in left.into_iter().filter(|k| judged.contains(&(k.0, k.1.as_str(), k.2.as_str()))) {
            tracing::info!(alertname = k.0, target_name = %k.1, model = %k.2, "alert rule armed: its windows are covered by data");
        }
        self.0 = now;
    }
}
