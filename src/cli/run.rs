//! `goodput run --config FILE`: the daemon, until SIGTERM or Ctrl-C.

use std::path::PathBuf;
use std::sync::Arc;

use super::subcommand::CliResult;
use crate::config::Config;
use crate::daemon::{self, clock::SystemClock, standby};

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
    /// What to do when the config cannot be read or does not validate at start: `exit` (1,
    /// with the errors), or `wait`, serving /healthz, /metrics (llm_slo_config_waiting 1)
    /// and the errors at /, until the file validates, then start: for a sidecar, whose exit
    /// would take the engine's pod out of its Service (docs/kubernetes.md).
    #[arg(long, env = "GOODPUT_ON_INVALID_CONFIG", value_enum, default_value_t = OnInvalidConfig::Exit)]
    pub on_invalid_config: OnInvalidConfig,
    /// Where `--on-invalid-config wait` serves while the config file has no valid `listen`
    /// of its own (it cannot be read, is not YAML, or does not set one).
    #[arg(long, env = "GOODPUT_STANDBY_LISTEN", value_name = "ADDR", default_value = standby::DEFAULT_LISTEN)]
    pub standby_listen: std::net::SocketAddr,
}

/// `--on-invalid-config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnInvalidConfig {
    /// Print the errors and exit 1.
    Exit,
    /// Log the errors and wait, serving, until the file validates.
    Wait,
}

pub fn run(args: Args) -> CliResult {
    let mut config = match args.on_invalid_config {
        OnInvalidConfig::Exit => match super::subcommand::load_config(&args.config) {
            Some(c) => c,
            None => return Ok(1),
        },
        // `None`: stopped while waiting, which is a clean exit.
        OnInvalidConfig::Wait => match load_or_wait(&args)? {
            Some(c) => c,
            None => return Ok(0),
        },
    };
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
        let listen = config.listen;
        let hint = format!("set `listen:` in {} to a free address", args.config.display());
        let mut d = daemon::start(config, Arc::new(SystemClock)).await.map_err(|e| start_error(e, listen, &hint))?;
        // SIGHUP and changes of the file reload it (docs/discovery.md#reload).
        d.watch_config(args.config.clone(), prepare);
        if args.no_alert_delivery {
            d.set_overrides(vec![NO_ALERT_DELIVERY.to_string()]);
        }
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

/// Why the daemon could not start; when an address it must listen on is taken, also what
/// to change. `move_listen` says how to move the daemon's own address (`listen`), which
/// differs between `run` (the config) and `demo` (`--listen`).
pub(crate) fn start_error(
    e: std::io::Error,
    listen: std::net::SocketAddr,
    move_listen: &str,
) -> Box<dyn std::error::Error + Send + Sync> {
    if e.kind() != std::io::ErrorKind::AddrInUse {
        return e.into();
    }
    let msg = e.to_string();
    let hint = if msg.starts_with(&format!("cannot listen on {listen}:")) {
        let mut other = listen;
        other.set_port(listen.port().wrapping_add(1).max(1));
        format!("another process listens on {listen}; stop it, or {move_listen}, e.g. {other}")
    } else if msg.contains("(otlp.listen)") {
        "another process listens there; stop it, or set `otlp.listen` to a free address".to_string()
    } else if msg.contains("for the tap of target") {
        "another process listens there; stop it, or set that target's `tap.listen` to a free address".to_string()
    } else {
        "another process listens there; stop it, or choose a free address".to_string()
    };
    format!("{msg}\nhint: {hint}").into()
}

/// The config, or, when it does not validate, the first version of the file that does,
/// waited for on a runtime of its own, ended before the daemon's starts (the allocator is
/// chosen in between). `None` when SIGTERM or Ctrl-C came while waiting.
fn load_or_wait(args: &Args) -> Result<Option<Config>, Box<dyn std::error::Error + Send + Sync>> {
    if let Ok(loaded) = crate::config::load(&args.config) {
        return Ok(Some(with_warnings(loaded)));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let loaded = rt.block_on(standby::wait_for_valid_config(&args.config, args.standby_listen, async {
        shutdown_signal().await;
        tracing::info!("shutting down while waiting for a valid config");
    }));
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(loaded.map(with_warnings))
}

fn with_warnings(loaded: crate::config::Loaded) -> Config {
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    loaded.config
}

/// The flag of [`no_alert_delivery`], as `/api/v1/config` names it among the overrides.
pub(crate) const NO_ALERT_DELIVERY: &str = "--no-alert-delivery";

/// Ignores the config's Alertmanagers and webhook (`--no-alert-delivery`).
pub(crate) fn no_alert_delivery(config: &mut Config) {
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
