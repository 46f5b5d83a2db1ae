//! `goodput demo`: two simulated vLLM engines (one healthy with speculative decoding, one
//! that ramps into overload on a loop) and the daemon watching both, on loopback, with a
//! live terminal summary.
//!
//! The daemon runs on the embedded `config/demo.yaml`. The engines serve no load of their
//! own: a load generator per engine sends its workload as real streaming requests through
//! the engine's tap, so the daemon sees every request three ways: exactly, from the tap;
//! from the engine's own spans, through its OTLP receiver; and bracketed, from the
//! engine's histograms. Everything listens on free ports, and the config's addresses are
//! pointed at them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::run::shutdown_signal;
use super::{CliResult, summary};
use crate::config::{self, Config};
use crate::daemon::{self, clock::SystemClock};
use crate::sim::config::{Profile, SimConfig};
use crate::sim::{drive, live};

/// The demo's config, also shipped as `config/demo.yaml` for `goodput check`.
pub const DEMO_CONFIG: &str = include_str!("../../config/demo.yaml");

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the daemon serves /metrics and its API.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub listen: SocketAddr,
    /// Run the simulated engines this many times faster than the wall clock.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Seconds between terminal summaries; 0 turns them off.
    #[arg(long, default_value_t = 5)]
    pub summary_every: u64,
    /// Stop by itself after this long (e.g. `10m`); by default run until Ctrl-C.
    #[arg(long, value_parser = crate::duration::parse_duration)]
    pub duration: Option<Duration>,
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
    let mut cfg = config::from_str(DEMO_CONFIG, "config/demo.yaml (embedded)")
        .map_err(|e| format!("the embedded demo config is invalid: {e}"))?
        .config;
    cfg.listen = args.listen;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let otlp: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        if let Some(o) = cfg.otlp.as_mut() {
            o.listen = otlp;
        }
        let (mut engines, mut loads) = (Vec::new(), Vec::new());
        for (name, profile) in ENGINES {
            let target = cfg.targets.iter_mut().find(|t| t.name == name).ok_or("demo config lacks a target")?;
            let mut load = SimConfig::profile(profile);
            load.name = name.to_string();
            load.model = target.model.clone();
            // The engine generates nothing itself: its load arrives through the tap.
            let mut engine = load.clone();
            engine.apply_profile(Profile::None);
            let opts = live::Options {
                otlp_traces_endpoint: Some(format!("http://{otlp}/v1/traces")),
                service_name: name.to_string(),
                ..live::Options::speed(args.speed)
            };
            let handle = live::serve_with(engine, "127.0.0.1:0".parse()?, opts).await?;
            target.url = handle.url().parse()?;
            if let Some(tap) = target.tap.as_mut() {
                tap.listen = "127.0.0.1:0".parse()?;
                tap.upstream = format!("http://{}", handle.addr).parse()?;
            }
            engines.push(handle);
            loads.push(load);
        }
        let d = daemon::start(cfg.clone(), Arc::new(SystemClock)).await?;
        let mut drivers = Vec::new();
        for ((name, _), load) in ENGINES.iter().zip(&loads) {
            let tap = d.tap_addr(name).ok_or("the demo config gives every engine a tap")?;
            drivers.push(drive::start(load, &format!("http://{tap}"), args.speed)?);
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
        for e in engines {
            e.shutdown().await;
        }
        d.shutdown().await;
        Ok::<i32, Box<dyn std::error::Error + Send + Sync>>(0)
    })
}

fn print_banner(cfg: &Config, d: &daemon::Daemon, engines: &[live::LiveHandle]) {
    println!("goodput demo: two simulated vLLM engines and the daemon, on loopback");
    for ((name, profile), e) in ENGINES.iter().zip(engines) {
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
