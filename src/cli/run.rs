//! `goodput run --config FILE`: the daemon, until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;

use super::CliResult;
use crate::config::Config;
use crate::daemon::{self, clock::SystemClock};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The YAML config file (see docs/config.md).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Evaluate the alert rules (/metrics, /api/v1/alerts) but deliver them nowhere, ignoring
    /// the config's Alertmanagers and webhook: for when Prometheus raises the same alerts from
    /// `goodput rules`, so that each problem pages once (docs/alerts.md).
    #[arg(long, env = "GOODPUT_NO_ALERT_DELIVERY")]
    pub no_alert_delivery: bool,
}

pub fn run(args: Args) -> CliResult {
    let Some(mut config) = super::load_config(&args.config) else { return Ok(1) };
    // Decided once, from the fleet at start: a reload that grows it keeps the allocator.
    match crate::allocator::fit_to_fleet(config.discovery.is_empty().then_some(config.targets.len())) {
        Ok(choice) => tracing::debug!(?choice, "allocator"),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(1);
        }
    }
    // Applied to the config at start and to every reloaded one, so that a reload does not
    // undo the command line.
    let prepare: fn(&mut Config) = if args.no_alert_delivery { no_alert_delivery } else { |_| {} };
    prepare(&mut config);
    if args.no_alert_delivery {
        tracing::info!(
            "alert delivery is off (--no-alert-delivery or GOODPUT_NO_ALERT_DELIVERY): alerts show on /metrics and /api/v1/alerts only"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let code = rt.block_on(async move {
        let mut d = daemon::start(config, Arc::new(SystemClock)).await?;
        // SIGHUP and changes of the file reload it (docs/discovery.md#reload).
        d.watch_config(args.config.clone(), prepare);
        shutdown_signal().await;
        tracing::info!(within = ?daemon::SHUTDOWN_GRACE, "shutting down");
        tokio::select! {
            _ = d.shutdown() => {}
            _ = shutdown_signal() => tracing::warn!("second signal: exiting without finishing the shutdown"),
        }
        Ok(0)
    });
    // Dropping the runtime would wait for an abandoned evaluation on a blocking thread,
    // which is what made shutdown take minutes; exiting the process ends it instead.
    rt.shutdown_background();
    code
}

/// Ignores the config's Alertmanagers and webhook (`--no-alert-delivery`).
fn no_alert_delivery(config: &mut Config) {
    let a = &mut config.alerting;
    (a.alertmanager, a.webhook) = (None, None);
    a.alertmanagers.clear();
}

/// Resolves on SIGTERM (Kubernetes) or SIGINT (Ctrl-C).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot watch SIGTERM ({e}); only Ctrl-C stops the daemon");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
