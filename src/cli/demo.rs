//! `goodput demo`: two simulated vLLM engines (one healthy with speculative decoding, one
//! that ramps into overload on a loop) and the daemon watching both, on loopback, with a
//! live terminal summary.
//!
//! The daemon runs on the embedded `config/demo.yaml`, or on the user's `--config`, whose
//! targets named `sim-chat` and `sim-batch` are the demo's engines. The engines serve no
//! load of their own: a load generator per engine sends its workload as real streaming
//! requests through the engine's tap (or straight to the engine, for a target without
//! one), so the daemon sees every request three ways: exactly, from the tap; from the
//! engine's own spans, through its OTLP receiver; and bracketed, from the engine's
//! histograms. Everything listens on free ports, and the config's addresses for the
//! engines, their taps and the OTLP receiver are pointed at them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::run::shutdown_signal;
use super::subcommand::CliResult;
use super::summary;
use crate::adapt::EngineHint;
use crate::canonical::Engine;
use crate::config::{self, Config};
use crate::daemon::{self, clock::SystemClock};
use crate::sim::config::{Profile, SimConfig};
use crate::sim::{drive, live};

/// The demo's config, also shipped as `config/demo.yaml` for `goodput check`.
pub const DEMO_CONFIG: &str = include_str!("../../config/demo.yaml");

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the daemon serves /metrics and its API [default: the config's `listen:`,
    /// 127.0.0.1:9464 in the embedded config].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Run the simulated engines this many times faster than the wall clock.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Seconds between terminal summaries; 0 turns them off.
    #[arg(long, default_value_t = 5)]
    pub summary_every: u64,
    /// Stop by itself after this long (e.g. `10m`); by default run until Ctrl-C.
    #[arg(long, value_parser = crate::duration::parse_duration)]
    pub duration: Option<Duration>,
    /// Run the daemon on this config instead of the embedded one (start from a copy of
    /// config/demo.yaml): its targets named sim-chat and sim-batch are the demo's engines,
    /// pointed at them wherever their `url` says; other targets are scraped as written.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
}

/// The engines the demo simulates: (target name in the config, the load profile its
/// clients generate).
const ENGINES: [(&str, Profile); 2] = [("sim-chat", Profile::Spec), ("sim-batch", Profile::Ramp)];

/// A port free now, for an address that must be known before its listener is bound (the
/// engines' span endpoint is fixed when they start, before the daemon binds it).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub fn run(args: Args) -> CliResult {
    let (mut cfg, source) = match &args.config {
        Some(path) => {
            let Some(cfg) = super::subcommand::load_config(path) else { return Ok(1) };
            (cfg, path.display().to_string())
        }
        None => (
            config::from_str(DEMO_CONFIG, "config/demo.yaml (embedded)")
                .map_err(|e| format!("the embedded demo config is invalid: {e}"))?
                .config,
            "config/demo.yaml (embedded)".to_string(),
        ),
    };
    if let Some(listen) = args.listen {
        cfg.listen = listen;
    }
    let engines_in_config = demo_engines(&cfg, &source)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let code = rt.block_on(async move {
        let otlp = match cfg.otlp.as_mut() {
            Some(o) => {
                o.listen = format!("127.0.0.1:{}", free_port()?).parse()?;
                Some(o.listen)
            }
            None => None,
        };
        let (mut engines, mut loads) = (Vec::new(), Vec::new());
        for (name, profile) in engines_in_config {
            let target = cfg.targets.iter_mut().find(|t| t.name == name).ok_or("demo config lacks a target")?;
            let mut load = SimConfig::profile(profile);
            load.name = name.to_string();
            if !target.model.is_empty() {
                load.model = target.model.clone();
            }
            // The engine generates nothing itself: its load arrives through the tap.
            let mut engine = load.clone();
            engine.apply_profile(Profile::None);
            let opts = live::Options {
                otlp_traces_endpoint: otlp.map(|a| format!("http://{a}/v1/traces")),
                service_name: name.to_string(),
                ..live::Options::speed(args.speed)
            };
            let handle = live::serve_with(engine, "127.0.0.1:0".parse()?, opts).await?;
            target.url = handle.url().parse()?;
            if let Some(tap) = target.tap.as_mut() {
                tap.listen = "127.0.0.1:0".parse()?;
                tap.upstream = format!("http://{}", handle.addr).parse()?;
            }
            engines.push((name, profile, handle));
            loads.push(load);
        }
        let d = match daemon::start(cfg.clone(), Arc::new(SystemClock)).await {
            Ok(d) => d,
            Err(e) => {
                for (_, _, engine) in engines {
                    engine.shutdown().await;
                }
                let hint = match &args.config {
                    Some(path) => format!("pass --listen or set `listen:` in {} to a free address", path.display()),
                    None => "pass --listen with a free address".to_string(),
                };
                return Err(super::run::start_error(e, cfg.listen, &hint));
            }
        };
        let mut drivers = Vec::new();
        for ((name, _, engine), load) in engines.iter().zip(&loads) {
            // Through the tap when the target has one, so that the tap measures each request.
            let base = match d.tap_addr(name) {
                Some(tap) => format!("http://{tap}"),
                None => format!("http://{}", engine.addr),
            };
            drivers.push(drive::start(load, &base, args.speed)?);
        }
        print_banner(&cfg, &d, &engines);
        let view = summary::View { windows: &cfg.windows, base_url: Some(format!("http://{}", d.local_addr())) };
        let summary = async {
            if args.summary_every == 0 {
                return std::future::pending().await;
            }
            let mut every = tokio::time::interval(Duration::from_secs(args.summary_every));
            every.tick().await;
            loop {
                every.tick().await;
                print!("{}", summary::render(&d.report(), &view));
            }
        };
        let deadline = async {
            match args.duration {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown_signal() => {}
            _ = deadline => {}
            _ = summary => {}
        }
        println!("\nstopping the demo");
        // Clients first, then the engines (their last spans still reach the receiver),
        // then the daemon.
        for l in drivers {
            l.shutdown().await;
        }
        for (_, _, e) in engines {
            e.shutdown().await;
        }
        d.shutdown().await;
        Ok::<i32, Box<dyn std::error::Error + Send + Sync>>(0)
    });
    // As `run` does: a task still on a blocking thread must not hold the exit.
    rt.shutdown_background();
    code
}

/// The demo's engines the config names, or why it cannot run them.
fn demo_engines(cfg: &Config, source: &str) -> Result<Vec<(&'static str, Profile)>, String> {
    let mut found = Vec::new();
    for (name, profile) in ENGINES {
        let Some(t) = cfg.targets.iter().find(|t| t.name == name) else { continue };
        if let EngineHint::Is(e) = t.engine
            && e != Engine::Vllm
        {
            return Err(format!(
                "{source}: target {name} says `engine: {}`, but the demo's engines are simulated vLLM; write `engine: vllm` or leave it out",
                e.as_str()
            ));
        }
        found.push((name, profile));
    }
    if found.is_empty() {
        return Err(format!(
            "{source}: no target is named sim-chat or sim-batch, the demo's simulated engines; name one or both (their url is replaced), as config/demo.yaml does"
        ));
    }
    Ok(found)
}

fn print_banner(cfg: &Config, d: &daemon::Daemon, engines: &[(&str, Profile, live::LiveHandle)]) {
    let count = if engines.len() == 2 { "two simulated vLLM engines" } else { "one simulated vLLM engine" };
    println!("goodput demo: {count} and the daemon, on loopback");
    for (name, profile, e) in engines {
        let what = match profile {
            Profile::Ramp => "ramps into overload every 5 minutes",
            _ => "comfortably loaded, speculative decoding on",
        };
        println!("  engine {name:<10} {}  ({what})", e.url());
        if let Some(tap) = d.tap_addr(name) {
            println!("    its tap          http://{tap}/v1  (the demo's clients send their requests here)");
        }
    }
    let addr = d.local_addr();
    println!("  status page      http://{addr}/");
    println!("  metrics          http://{addr}/metrics");
    println!("  report (JSON)    http://{addr}/api/v1/report");
    println!("  alerts (JSON)    http://{addr}/api/v1/alerts");
    if let Some(otlp) = d.otlp_addr() {
        println!("  engine spans     http://{otlp}/v1/traces  (OTLP receiver)");
    }
    println!("  SLOs: {}", cfg.slos.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "));
    println!("Ctrl-C stops everything. The first summary comes in a few seconds.\n");
}
