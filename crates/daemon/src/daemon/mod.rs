//! The running daemon: one scrape task per target, an evaluator that publishes a
//! [`Report`] every tick, and the HTTP server, all stopped together on shutdown.
//!
//! Shutdown is bounded by [`SHUTDOWN_GRACE`] (docs/deploy.md, docs/limits.md): scraping
//! stops at once, an evaluation in progress is abandoned (its report would be published to
//! nobody), queued alert notifications get [`ALERT_FLUSH`] to go out, and whatever is still
//! running at the deadline is dropped.

pub mod clock;
pub mod gpu;
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
use crate::evaluate::{EvalConfig, evaluate_target};
use crate::report::{Report, TargetReport};
use crate::serve::{self, Shared};
use clock::Clock;
use target::{TargetRuntime, fetcher_for, limits_for, scrape_loop};

/// A started daemon. Drop does not stop it; call [`Daemon::shutdown`].
pub struct Daemon {
    addr: SocketAddr,
    shared: Shared,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Daemon {
    /// The address the HTTP server is bound to (resolves port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
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
    let (stop, stop_rx) = watch::channel(false);
    let mut shared = Shared::new();
    let mut tasks = JoinSet::new();

    let limits = limits_for(&config);
    let mut targets = Vec::with_capacity(config.targets.len());
    for t in &config.targets {
        let fetcher = fetcher_for(&config, t).map_err(std::io::Error::other)?;
        let rt = Arc::new(TargetRuntime::new(t.clone(), config.max_window()));
        tasks.spawn(scrape_loop(rt.clone(), fetcher, limits, clock.clone(), stop_rx.clone()));
        targets.push(rt);
    }

    let gpus = gpu::GpuSources::start(&config, stop_rx.clone(), &mut tasks);
    let eval = config.eval_config();
    let enricher = Enricher::new(&eval, &config.alerting, config.gpu.as_ref(), config.cost.as_ref());
    let delivery = Delivery::start(&config.alerting).map_err(std::io::Error::other)?;
    shared.delivery = Some(delivery.metrics());
    tasks.spawn(evaluate_loop(
        Arc::new(targets),
        eval,
        Post { enricher, gpus, delivery },
        config.evaluation_interval,
        clock,
        shared.clone(),
        stop_rx.clone(),
    ));

    let limits = server_limits(&config);
    tasks.spawn(serve::server::serve(listener, serve::router(shared.clone()), limits, shared.http.clone(), stop_rx));
    tracing::info!(%addr, targets = config.targets.len(), "goodput is listening");
    Ok(Daemon { addr, shared, stop, tasks })
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

/// What happens to each report after evaluation: GPU join, alert rules, delivery.
struct Post {
    enricher: Enricher,
    gpus: gpu::GpuSources,
    delivery: Delivery,
}

/// Evaluates every target each interval and publishes the report. The first report
/// comes one interval after start, when each target has had its first scrape.
async fn evaluate_loop(
    targets: Arc<Vec<Arc<TargetRuntime>>>,
    eval: EvalConfig,
    mut post: Post,
    every: std::time::Duration,
    clock: Arc<dyn Clock>,
    shared: Shared,
    mut stop: watch::Receiver<bool>,
) {
    let eval = Arc::new(eval);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return last_flush(&post.delivery).await,
        }
        let now_ms = clock.now_ms();
        let (t, e) = (targets.clone(), eval.clone());
        // Window math over long windows is CPU work; run it beside the reactor. It can take
        // seconds, so shutdown does not wait for it: dropping the handle abandons it.
        let job = tokio::task::spawn_blocking(move || {
            #[cfg(feature = "test-hooks")]
            test_hooks::slow_evaluation();
            build_report(&t, now_ms, &e)
        });
        let outcome = tokio::select! {
            r = job => r,
            _ = stop.changed() => {
                tracing::info!("shutting down: abandoning the evaluation in progress");
                return last_flush(&post.delivery).await;
            }
        };
        match outcome {
            Ok(mut report) => {
                let notifications = post.enricher.apply(&mut report, post.gpus.latest());
                post.delivery.submit(&notifications);
                shared.publish(report);
            }
            Err(err) => tracing::error!("evaluation failed; keeping the previous report: {err}"),
        }
    }
}

/// Gives queued resolutions and firing alerts a last chance to go out.
async fn last_flush(delivery: &Delivery) {
    if !delivery.flush(ALERT_FLUSH).await {
        tracing::warn!("shutting down with alert notifications still queued after {ALERT_FLUSH:?}");
    }
}

/// Hooks the integration tests use to reproduce conditions too slow or too rare to build
/// for real; compiled only with the `test-hooks` feature, which `cargo test` turns on.
#[cfg(feature = "test-hooks")]
mod test_hooks {
    use std::sync::atomic::{AtomicBool, Ordering};

    /// With `GOODPUT_TEST_EVALUATION_DELAY=<duration>`, every evaluation after the first
    /// takes that much longer, standing in for a huge target's evaluation.
    pub fn slow_evaluation() {
        static FIRST_DONE: AtomicBool = AtomicBool::new(false);
        let Some(delay) = std::env::var("GOODPUT_TEST_EVALUATION_DELAY").ok() else { return };
        let Ok(delay) = crate::duration::parse_duration(&delay) else { return };
        if FIRST_DONE.swap(true, Ordering::Relaxed) {
            tracing::info!(?delay, "test hook: this evaluation is held");
            std::thread::sleep(delay);
        }
    }
}

/// One report at `now_ms` from the targets' current state, in config order.
///
/// Evaluation reads every stored scrape of every window, so an aggregator's tick is CPU
/// work proportional to targets × window length: it is split over the machine's cores.
pub fn build_report(targets: &[Arc<TargetRuntime>], now_ms: i64, eval: &EvalConfig) -> Report {
    let evaluate = |rt: &Arc<TargetRuntime>| {
        let st = rt.lock();
        TargetReport {
            target: rt.config.name.clone(),
            engine: st.engine(),
            health: st.health.clone(),
            models: evaluate_target(&st.windows, now_ms, &eval.for_target(&rt.config.name)),
        }
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(targets.len().max(1));
    let targets = if threads <= 1 {
        targets.iter().map(evaluate).collect()
    } else {
        let chunk = targets.len().div_ceil(threads);
        std::thread::scope(|s| {
            let parts: Vec<_> = targets
                .chunks(chunk)
                .map(|part| s.spawn(move || part.iter().map(evaluate).collect::<Vec<_>>()))
                .collect();
            // A panic in one target's evaluation is a bug; re-raise it rather than drop targets.
            parts.into_iter().flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        })
    };
    Report { t_ms: now_ms, targets, alerts: Vec::new(), gpus: Vec::new() }
}
