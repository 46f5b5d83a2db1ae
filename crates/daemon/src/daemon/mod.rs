//! The running daemon: one scrape task per target, an evaluator that publishes a
//! [`Report`] every tick, and the HTTP server, all stopped together on shutdown.

pub mod clock;
pub mod evaluator;
pub mod gpu;
pub mod target;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;

use crate::config::Config;
use crate::deliver::Delivery;
use crate::enrich::Enricher;
use crate::report::Report;
use crate::serve::{self, Shared};
use clock::Clock;
use evaluator::Evaluator;
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

    /// Stops scraping, evaluation and serving; in-flight HTTP requests finish first.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while let Some(r) = self.tasks.join_next().await {
            if let Err(e) = r
                && e.is_panic()
            {
                tracing::error!("a daemon task panicked: {e}");
            }
        }
    }
}

/// Binds the listener, starts every task and returns. Errors only on setup (the listen
/// address is taken, a client cannot be built); target trouble is never an error.
pub async fn start(config: Config, clock: Arc<dyn Clock>) -> std::io::Result<Daemon> {
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
    log_warmup(&config.alerting);
    let enricher = Enricher::new(&eval, &config.alerting, config.gpu.as_ref(), config.cost.as_ref());
    let delivery = Delivery::start(&config.alerting).map_err(std::io::Error::other)?;
    shared.delivery = Some(delivery.metrics());
    tasks.spawn(evaluate_loop(
        Evaluator::new(targets, eval),
        Post { enricher, gpus, delivery },
        config.evaluation_interval,
        clock,
        shared.clone(),
        stop_rx.clone(),
    ));

    let app = serve::router(shared.clone());
    let mut server_stop = stop_rx;
    tasks.spawn(async move {
        let graceful = async move {
            let _ = server_stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(graceful).await {
            tracing::error!("HTTP server failed: {e}");
        }
    });
    tracing::info!(%addr, targets = config.targets.len(), "goodput is listening");
    Ok(Daemon { addr, shared, stop, tasks })
}

/// What happens to each report after evaluation: GPU join, alert rules, delivery.
struct Post {
    enricher: Enricher,
    gpus: gpu::GpuSources,
    delivery: Delivery,
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
            _ = stop.changed() => {
                // Resolutions and firing alerts still queued get a last chance to go out.
                post.delivery.flush(std::time::Duration::from_secs(5)).await;
                return;
            }
        }
        let mut report: Report = evaluator.tick(clock.now_ms(), every / 2).await;
        let notifications = post.enricher.apply(&mut report, post.gpus.latest());
        post.delivery.submit(&notifications);
        held.log_armed(&report);
        shared.publish(report);
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
        let judged = |k: &(&str, String, String)| {
            report.alert_readiness.iter().any(|r| (r.alertname, &r.target, &r.model) == (k.0, &k.1, &k.2))
        };
        for k in self.0.difference(&now).filter(|k| judged(k)) {
            tracing::info!(alertname = k.0, target_name = %k.1, model = %k.2, "alert rule armed: its windows are covered by data");
        }
        self.0 = now;
    }
}
