//! The validated config's types and their defaults: what [`validate`](super::validate) builds
//! from the raw YAML, and what the rest of the daemon reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use super::discovery::{Discovery, DiscoveryLimits};
use super::error::ConfigError;
use super::state::StateConfig;
use crate::adapt::EngineHint;
use crate::alert::config::AlertingConfig;
use crate::duration::Window;
use crate::evaluate::{EvalConfig, KvThresholds};
use crate::gpu::config::{CostConfig, GpuConfig};
use crate::redact::Secret;
use crate::slo::Slo;

/// A validated config. Every field holds a usable value; defaults are filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Address /metrics and the API listen on. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// `external_labels`, `${VAR}`s expanded, sorted by name: added to every exported
    /// series and every alert, so replicas stay distinct.
    pub external_labels: Vec<(String, String)>,
    /// How often the daemon evaluates windows and publishes a report.
    pub evaluation_interval: Duration,
    pub scrape: ScrapeConfig,
    pub server: ServerConfig,
    pub targets: Vec<Target>,
    /// Where more targets come from (docs/discovery.md); empty when only `targets:` is used.
    pub discovery: Vec<Discovery>,
    /// `discovery_limits:` what the sources together may add (docs/discovery.md#limits).
    pub discovery_limits: DiscoveryLimits,
    /// Sorted shortest first, no duplicates, never empty.
    pub windows: Vec<Window>,
    /// Sorted, no duplicates, each in (0, 1). As configured: [`Config::eval_quantiles`]
    /// adds those the alert rules read.
    pub quantiles: Vec<f64>,
    pub slos: Vec<Slo>,
    /// `slos[].period` of the SLOs that set one, by name ([`Config::budget_specs`]).
    pub slo_periods: std::collections::BTreeMap<String, Duration>,
    pub kv_cache: KvThresholds,
    pub alerting: AlertingConfig,
    /// GPU telemetry (NVML, dcgm-exporter); `None` when the section is absent.
    pub gpu: Option<GpuConfig>,
    /// GPU price, for $/M tokens and $/M good tokens.
    pub cost: Option<CostConfig>,
    /// Draft step cost / target step cost, for the spec-decode speedup estimate.
    pub spec_draft_cost_ratio: Option<f64>,
    /// The engine-trace receiver; `None` when `otlp:` is absent.
    pub otlp: Option<OtlpConfig>,
    /// `state_dir` and `state_snapshot_interval`; `None` keeps everything in memory only.
    pub state: Option<StateConfig>,
}

/// `otlp:`: where engines send their request spans (OTLP/HTTP, docs/request-path.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OtlpConfig {
    pub listen: SocketAddr,
    /// Largest accepted export request, compressed and after gzip decoding.
    pub body_limit: usize,
    /// The receiver's connection cap and timeouts.
    pub guards: ListenerGuards,
}

/// `targets[].traces:` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetTraces {
    /// The `service.name` resource attribute of the target's spans.
    pub service_name: String,
}

/// Global scrape settings; each target may override interval, timeout and the
/// cardinality limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeConfig {
    pub interval: Duration,
    pub timeout: Duration,
    /// Largest accepted body, after gzip decoding.
    pub body_limit: usize,
    /// Ask for and accept gzip-compressed bodies.
    pub gzip: bool,
    /// Follow HTTP redirects, as Prometheus does by default (docs/config.md, "Redirects").
    pub follow_redirects: bool,
    /// Most models and stored series one scrape may bring (docs/limits.md).
    pub cardinality: Cardinality,
    /// How long a target that left discovery (or the config, on reload) keeps its windows
    /// and alert state before it is dropped: a rolling restart must not reset history.
    pub target_grace: Duration,
}

/// How many models and series one scrape of a target may hand the window store; a scrape
/// over either limit fails as a whole, like Prometheus's `sample_limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cardinality {
    pub max_models: usize,
    pub max_series: usize,
}

impl Default for Cardinality {
    fn default() -> Self {
        Cardinality { max_models: DEFAULT_MAX_MODELS, max_series: DEFAULT_MAX_SERIES }
    }
}

/// The HTTP server's guards against idle and slow clients (docs/limits.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerConfig {
    /// Most client connections open at once; lowered at start when the descriptor limit
    /// leaves less room after the scrapes' reserve.
    pub max_connections: usize,
    /// A connection without a complete request header this long after it became ready
    /// for one (accepted, or done with its previous request) is closed.
    pub header_read_timeout: Duration,
    /// A connection with no request in progress and no traffic this long is closed.
    pub idle_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// One scraped endpoint. `Debug` masks the URL's credentials (crate::redact).
#[derive(Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub url: Url,
    pub engine: EngineHint,
    /// Model name for engines whose metrics carry no model label; defaults to `name`.
    pub model: String,
    /// Read again before every scrape, so that rotated tokens are picked up.
    pub bearer_token_file: Option<PathBuf>,
    /// Extra request headers, already checked to be valid HTTP header names and values.
    /// Every value is a secret: `X-Api-Key`, `Authorization` and cookies are why they exist.
    pub headers: Vec<(String, Secret)>,
    pub interval: Duration,
    pub timeout: Duration,
    pub follow_redirects: bool,
    /// `scrape.max_models` / `max_series`, or this target's own.
    pub cardinality: Cardinality,
    /// Which OTLP spans are this target's; `None` when `traces:` is not written (the
    /// target's name is then its service name, docs/config.md).
    pub traces: Option<TargetTraces>,
    /// A pass-through proxy in front of the engine's API that measures each request
    /// (docs/request-path.md).
    pub tap: Option<TapConfig>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("url", &crate::redact::url(&self.url))
            .field("engine", &self.engine)
            .field("model", &self.model)
            .field("bearer_token_file", &self.bearer_token_file)
            .field("headers", &self.headers)
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("follow_redirects", &self.follow_redirects)
            .field("cardinality", &self.cardinality)
            .field("traces", &self.traces)
            .field("tap", &self.tap)
            .finish()
    }
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";
pub const DEFAULT_SCRAPE_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);
/// The default `evaluation_interval` is the scrape interval, but not shorter than this:
/// Prometheus reads /metrics every 15–30 s, so evaluating more often spends CPU on results
/// nobody reads. Set `evaluation_interval` explicitly to go faster.
pub const MIN_DEFAULT_EVALUATION_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_TARGET_GRACE: Duration = Duration::from_secs(600);
pub const DEFAULT_BODY_LIMIT: usize = 16 << 20;
/// Prometheus, a dashboard or two and an operator's curl need a handful.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// A real client sends its request header in one packet; Prometheus times its own scrape
/// of goodput out after 10 s by default.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// A vLLM serving LoRA adapters shows each adapter as a model: dozens, rarely hundreds.
/// Far beyond that is a label gone wrong (a request id as `model_name`), not an engine.
pub const DEFAULT_MAX_MODELS: usize = 1_000;
/// A data-parallel engine with every latency histogram stores about 100 series per rank
/// and model; a few thousand is a large real target.
pub const DEFAULT_MAX_SERIES: usize = 100_000;
/// A batch of 512 vLLM spans (the Python SDK's largest by default) is about 300 KiB of
/// protobuf, a few times that as JSON.
pub const DEFAULT_OTLP_BODY_LIMIT: usize = 4 << 20;
pub const DEFAULT_WINDOWS: &[&str] = &["1m", "5m", "15m", "1h"];
pub const DEFAULT_QUANTILES: &[f64] = &[0.5, 0.9, 0.95, 0.99];

impl Config {
    /// What `evaluate_target` needs at each tick.
    pub fn eval_config(&self) -> EvalConfig {
        EvalConfig {
            windows: self.eval_windows(),
            quantiles: self.eval_quantiles(),
            kv: self.kv_cache,
            slos: self.slos.clone(),
            spec_draft_cost_ratio: self.spec_draft_cost_ratio,
            alert_only: self.alert_only_windows(),
        }
    }

    /// The windows evaluated only because alert rules read them (not in `windows`): each
    /// is evaluated and exported only for the rules (docs/metrics.md#alert-only-windows).
    pub fn alert_only_windows(&self) -> Vec<crate::evaluate::AlertWindow> {
        let rules = self.alerting.rule_set();
        (self.eval_windows().into_iter().filter(|w| !self.windows.contains(w)))
            .map(|window| crate::evaluate::AlertWindow {
                window,
                quantiles: crate::alert::validate::required_quantiles_at(&rules, window),
            })
            .collect()
    }

    /// The longest window evaluated (what each target's store must keep).
    pub fn max_window(&self) -> Duration {
        self.eval_windows().iter().map(|w| w.duration()).max().unwrap_or(Duration::from_secs(3600))
    }

    /// The configured windows plus those the enabled alert rules read (the burn-rate
    /// pairs' 5m/30m/1h/6h), sorted, without duplicates.
    pub fn eval_windows(&self) -> Vec<Window> {
        let mut w = self.windows.clone();
        w.extend(crate::alert::validate::required_windows(&self.alerting.rule_set()));
        w.sort();
        w.dedup();
        w
    }

    /// The configured quantiles plus those the enabled alert rules read (p99 for
    /// `LLMTTFTAboveSLO`/`LLMTPOTAboveSLO`), sorted, without duplicates. Like the extra
    /// windows, the extra quantile is exported too.
    pub fn eval_quantiles(&self) -> Vec<f64> {
        let mut q = self.quantiles.clone();
        q.extend(crate::alert::validate::required_quantiles(&self.alerting.rule_set()));
        q.sort_by(f64::total_cmp);
        q.dedup();
        q
    }
}

/// A config that passed validation, with its warnings (things that work but are likely
/// mistakes).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<ConfigError>,
}

/// A listener's guards against idle and slow clients, as written (docs/limits.md); the
/// connection cap is lowered at start to fit the descriptor limit (crate::listen::fds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerGuards {
    /// Most client connections open at once.
    pub max_connections: usize,
    /// A connection without a complete request header this long after it opened, or after
    /// its previous response, is closed.
    pub header_read_timeout: Duration,
    /// A connection with no request in progress and no traffic this long is closed.
    pub idle_timeout: Duration,
    /// A request body that stalls this long (or averages under 1 KiB/s past it) is cut.
    pub body_read_timeout: Duration,
}

/// A tap's clients: a gateway's pool, or as many clients as the engine has requests in
/// progress and queued. Each takes two descriptors (its own, and the upstream connection).
pub const DEFAULT_TAP_MAX_CONNECTIONS: usize = 1024;
/// The OTLP receiver's: engines export from a handful of connections each.
pub const DEFAULT_OTLP_MAX_CONNECTIONS: usize = 64;
/// A request body must keep arriving: no pause this long, and 1 KiB/s on average past it.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

impl ListenerGuards {
    pub fn with_cap(max_connections: usize) -> ListenerGuards {
        ListenerGuards {
            max_connections,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
        }
    }
}

/// A validated tap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// Where clients connect. Port 0 picks a free port.
    pub listen: SocketAddr,
    /// The engine's API base, `http://host:port` with an optional path prefix.
    pub upstream: Url,
    /// Add `stream_options.include_usage` to streaming OpenAI requests that lack it, and
    /// remove the usage event it causes from the response.
    pub inject_usage: bool,
    /// The client side's connection cap and timeouts.
    pub guards: ListenerGuards,
}
