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

use super::CliResult;
use super::run::shutdown_signal;
use crate::config::{self, Config};
use crate::daemon::{self, clock::SystemClock};
use crate::report::{Report, SloStatus, WindowReport};
use crate::sim::config::{Profile, SimConfig};
use crate::sim::{drive, live};
use crate::slo::Clause;

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
        let summary = async {
            if args.summary_every == 0 {
                return std::future::pending().await;
            }
            let mut every = tokio::time::interval(Duration::from_secs(args.summary_every));
            every.tick().await;
            loop {
                every.tick().await;
                print!("{}", summary(&d.report()));
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

fn ms(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite()).map_or("-".into(), |v| format!("{:.0}ms", v * 1000.0))
}

fn p99(w: &WindowReport, metric: crate::canonical::HistogramKind) -> Option<f64> {
    w.latency.iter().find(|l| l.metric == metric && l.quantile == 0.99).map(|l| l.value)
}

/// One table row per target and model over its shortest window, then firing alerts.
pub fn summary(report: &Report) -> String {
    use crate::canonical::HistogramKind as H;
    let mut out = format!(
        "{:<10} {:>9} {:>9} {:>10} {:>22} {:>12}\n",
        "target", "p99 TTFT", "p99 TPOT", "tokens/s", "goodput tok/s [lo-hi]", "KV band"
    );
    for t in &report.targets {
        if !t.health.up {
            let why = t.health.last_error.as_deref().unwrap_or("no scrape yet");
            out.push_str(&format!("{:<10} down: {why}\n", t.target));
            continue;
        }
        for m in &t.models {
            let Some(w) = m.windows.first() else { continue };
            let goodput = w.slos.iter().find_map(|s| match &s.status {
                SloStatus::Evaluated(v) => v.goodput_tokens_per_second,
                _ => None,
            });
            let goodput = goodput.map_or("-".into(), |g| format!("{:.0} [{:.0}-{:.0}]", g.estimate, g.lower, g.upper));
            let band =
                w.kv_cache.as_ref().map_or("-".into(), |k| format!("{} {:.0}%", k.band.as_str(), k.last * 100.0));
            let tps = w.output_tokens_per_second.map_or("-".into(), |v| format!("{v:.0}"));
            out.push_str(&format!(
                "{:<10} {:>9} {:>9} {:>10} {:>22} {:>12}\n",
                t.target,
                ms(p99(w, H::Ttft)),
                ms(p99(w, H::Tpot)),
                tps,
                goodput,
                band
            ));
            for s in &w.slos {
                if let SloStatus::Evaluated(v) = &s.status
                    && let Some(j) = v.attainment.get(&Clause::Joint)
                {
                    out.push_str(&format!(
                        "           SLO {:<6} attainment {:.1}% [{:.1}-{:.1}] over {}\n",
                        s.slo,
                        j.estimate * 100.0,
                        j.lower * 100.0,
                        j.upper * 100.0,
                        w.window
                    ));
                }
            }
        }
    }
    let firing: Vec<String> = report
        .alerts
        .iter()
        .filter(|a| a.state == "firing")
        .map(|a| {
            format!(
                "{}{{target={}}}",
                a.labels.get("alertname").map_or("?", |s| s),
                a.labels.get("target").map_or("?", |s| s)
            )
        })
        .collect();
    out.push_str(&format!("firing: {}\n", if firing.is_empty() { "none".into() } else { firing.join(", ") }));
    out.push_str(&waiting(report));
    out.push('\n');
    out
}

/// The rules still waiting for their windows to fill, each with its least covered window
/// (docs/alerts.md#after-a-restart); empty once every rule may judge.
fn waiting(report: &Report) -> String {
    let mut worst: Vec<&crate::report::RuleReadiness> = Vec::new();
    for r in report.alert_readiness.iter().filter(|r| !r.ready) {
        match worst.iter_mut().find(|w| w.alertname == r.alertname) {
            Some(w) if w.ready_in_seconds < r.ready_in_seconds => *w = r,
            Some(_) => {}
            None => worst.push(r),
        }
    }
    if worst.is_empty() {
        return String::new();
    }
    let items: Vec<String> = worst
        .iter()
        .map(|r| {
            let left = Duration::from_secs(r.ready_in_seconds.ceil() as u64);
            format!(
                "{} ({} {:.0}% covered, ready in {})",
                r.alertname,
                r.window,
                r.coverage * 100.0,
                crate::duration::format_duration(left)
            )
        })
        .collect();
    format!("waiting for window coverage: {}\n", items.join(", "))
}
