//! `goodput simulate`: the engine simulator, live (`--listen`) or offline (`--out`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::subcommand::CliResult;
use crate::duration::parse_duration;
use crate::sim::config::{Format, Profile, SimConfig};
use crate::sim::{live, offline};

/// Boxed so that this subcommand does not bloat the `Command` enum.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub opts: Box<Opts>,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["listen", "out", "capacity_sweep"])))]
pub struct Opts {
    /// Live mode: serve /metrics on this address, e.g. 127.0.0.1:8000.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Live mode: run this many times faster than the wall clock.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Offline mode: write DIR/<name>/<unix-millis>.prom, DIR/requests.jsonl and DIR/inflight.jsonl.
    #[arg(long, value_name = "DIR", requires = "duration")]
    pub out: Option<PathBuf>,
    /// Offline mode: virtual time to simulate, e.g. 10m.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Offline mode: time between recorded scrapes.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub scrape_interval: Duration,
    /// YAML file with every knob (see docs/simulator.md); flags below override it.
    #[arg(long, short, value_name = "FILE.yaml")]
    pub config: Option<PathBuf>,
    /// Named load profile (applied on top of --config).
    #[arg(long, value_enum)]
    pub profile: Option<Profile>,
    /// Target name (recording directory, `target` in the ground truth).
    #[arg(long)]
    pub name: Option<String>,
    /// `model_name` label.
    #[arg(long)]
    pub model: Option<String>,
    /// Data-parallel engines.
    #[arg(long)]
    pub engines: Option<u32>,
    /// Seed of the random streams: the same seed gives the same output.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Arrival rate in requests/s (steady rate, end of a ramp, or base between bursts).
    #[arg(long)]
    pub rate: Option<f64>,
    /// The engine whose /metrics exposition the simulator writes.
    #[arg(long, value_enum)]
    pub engine: Option<Format>,
    /// Deprecated name of --engine, kept so that old scripts run; warns once.
    #[arg(long, value_enum, hide = true, conflicts_with = "engine")]
    pub format: Option<Format>,
    /// Offline mode: unix seconds of virtual time zero.
    #[arg(long)]
    pub start: Option<u64>,
    /// Live mode: write the ground truth (one JSON line per finished request) to FILE as
    /// requests finish.
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub truth: Option<PathBuf>,
    /// Live mode: POST a vLLM-shaped `llm_request` span per finished request to this
    /// OTLP/HTTP endpoint (JSON), e.g. http://127.0.0.1:4318/v1/traces.
    #[arg(long, value_name = "URL", requires = "listen")]
    pub otlp_traces_endpoint: Option<String>,
    /// The spans' `service.name`.
    #[arg(long, value_name = "NAME", default_value = "vllm")]
    pub otlp_service_name: String,
    /// Finds the engine's true capacity for an SLO offline: a sweep of mean arrival rates in
    /// the profile's shape, in virtual time, the highest whose attainment meets `--objective`
    /// (docs/capacity.md#ground-truth).
    #[arg(long, conflicts_with_all = ["listen", "out"])]
    pub capacity_sweep: bool,
    /// The SLO of `--capacity-sweep`: TTFT limit, e.g. 500ms.
    #[arg(long, value_parser = parse_duration, requires = "capacity_sweep")]
    pub slo_ttft: Option<Duration>,
    /// The SLO of `--capacity-sweep`: TPOT limit, e.g. 50ms.
    #[arg(long, value_parser = parse_duration, requires = "capacity_sweep")]
    pub slo_tpot: Option<Duration>,
    /// The SLO of `--capacity-sweep`: end-to-end limit, e.g. 10s.
    #[arg(long, value_parser = parse_duration, requires = "capacity_sweep")]
    pub slo_e2e: Option<Duration>,
    /// The SLO of `--capacity-sweep`: share of requests that must meet every limit.
    #[arg(long, default_value_t = 0.95, requires = "capacity_sweep")]
    pub objective: f64,
    /// Share of API requests answered with HTTP 500 before streaming.
    #[arg(long, value_name = "RATE")]
    pub fault_http_error: Option<f64>,
    /// Share of API requests that end in an in-band stream error (`data: {"error": …}`).
    #[arg(long, value_name = "RATE")]
    pub fault_stream_error: Option<f64>,
    /// Share of API requests whose connection the server drops mid-stream.
    #[arg(long, value_name = "RATE")]
    pub fault_server_abort: Option<f64>,
}

impl Opts {
    /// The simulator configuration these flags describe.
    pub fn sim_config(&self) -> Result<SimConfig, String> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                SimConfig::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))?
            }
            None => SimConfig::default(),
        };
        if let Some(p) = self.profile {
            c.apply_profile(p);
        }
        if let Some(v) = &self.name {
            c.name = v.clone();
        }
        if let Some(v) = &self.model {
            c.model = v.clone();
        }
        if let Some(v) = self.engines {
            c.engines = v;
        }
        if let Some(v) = self.seed {
            c.seed = v;
        }
        if let Some(v) = self.rate {
            c.arrivals.rate = v;
        }
        if let Some(v) = self.engine.or(self.format) {
            c.format = v;
        }
        if let Some(v) = self.start {
            c.start_unix_s = v;
        }
        let f = &mut c.faults;
        for (flag, slot) in [
            (self.fault_http_error, &mut f.http_error_rate),
            (self.fault_stream_error, &mut f.stream_error_rate),
            (self.fault_server_abort, &mut f.server_abort_rate),
        ] {
            if let Some(v) = flag {
                *slot = v;
            }
        }
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

/// Prints the profile's true capacity for the SLO the flags give.
fn capacity_sweep(args: &Opts, cfg: &goodput_sim::SimConfig) -> CliResult {
    use goodput_sim::capacity::{Sweep, Target, true_capacity};
    if !(args.objective > 0.0 && args.objective < 1.0) {
        return Err(format!("--objective {} is out of range; give a share in (0, 1), e.g. 0.95", args.objective).into());
    }
    if args.slo_ttft.is_none() && args.slo_tpot.is_none() && args.slo_e2e.is_none() {
        return Err(
            "--capacity-sweep needs an SLO limit: --slo-ttft, --slo-tpot and/or --slo-e2e, e.g. --slo-ttft 500ms"
                .into(),
        );
    }
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let target = Target {
        ttft_s: secs(args.slo_ttft),
        tpot_s: secs(args.slo_tpot),
        e2e_s: secs(args.slo_e2e),
        objective: args.objective,
    };
    match true_capacity(cfg, &target, &Sweep::default())? {
        Some(rate) => println!("true capacity: {rate:.3} requests/s at objective {}", args.objective),
        None => println!("true capacity: none; even the lowest rate of the sweep misses objective {}", args.objective),
    }
    Ok(0)
}

pub fn run(args: Args) -> CliResult {
    let args = *args.opts;
    if args.format.is_some() {
        // `--format` names an output format everywhere else (inspect, replay, rules).
        eprintln!("warning: `goodput simulate --format` is deprecated; use --engine (vllm, sglang or tgi)");
    }
    let cfg = args.sim_config()?;
    if args.capacity_sweep {
        return capacity_sweep(&args, &cfg);
    }
    if let Some(dir) = &args.out {
        let duration = args.duration.ok_or("--out needs --duration, e.g. --duration 10m")?;
        let opts = offline::Options { duration, scrape_interval: args.scrape_interval };
        let s = offline::run(&cfg, dir, &opts)?;
        println!(
            "wrote {} scrapes to {}, {} finished requests to {}, {} in flight",
            s.scrapes,
            s.target_dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "),
            s.finished,
            dir.join("requests.jsonl").display(),
            s.in_flight
        );
        return Ok(0);
    }
    let addr = args.listen.ok_or("give --listen ADDR (live) or --out DIR --duration D (offline)")?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let opts = live::Options {
        speed: args.speed,
        truth: args.truth.clone(),
        otlp_traces_endpoint: args.otlp_traces_endpoint.clone(),
        service_name: args.otlp_service_name.clone(),
    };
    rt.block_on(async move {
        let handle = live::serve_with(cfg, addr, opts).await?;
        println!(
            "simulated engine serving {} and the OpenAI API at {} ({}x speed); Ctrl-C stops it",
            handle.url(),
            handle.api_base(),
            args.speed
        );
        tokio::signal::ctrl_c().await?;
        handle.shutdown().await;
        Ok(0)
    })
}
