//! `goodput rules`: Prometheus recording and alerting rules computing the configured SLOs
//! fleet-wide in PromQL, as a PrometheusRule or a plain rule file.

use std::path::PathBuf;

use serde::Deserialize;

use super::CliResult;
use crate::alert::AlertingConfig;
use crate::alert::input::SloSpec;
use crate::alert::promql::{RulesSpec, groups, render_prometheus, render_prometheusrule};
use crate::duration::{Window, parse_duration};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A `monitoring.coreos.com/v1` PrometheusRule for the Prometheus Operator.
    Prometheusrule,
    /// A plain Prometheus rule file (`rule_files:`).
    Prometheus,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The daemon's config file; its `slos`, `windows` and `alerting` are used.
    #[arg(long)]
    pub config: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Prometheusrule)]
    pub format: Format,
    /// Extra label matchers for every engine series, e.g. 'job="vllm"'.
    #[arg(long)]
    pub selector: Option<String>,
    /// metadata.name of the PrometheusRule.
    #[arg(long, default_value = "goodput")]
    pub name: String,
}

/// The parts of the main config that rules need; other keys are ignored here (the full
/// loader validates them).
#[derive(Debug, Deserialize)]
struct RulesConfig {
    #[serde(default)]
    slos: Vec<SloConfig>,
    #[serde(default)]
    windows: Vec<String>,
    #[serde(default)]
    alerting: AlertingConfig,
}

#[derive(Debug, Deserialize)]
struct SloConfig {
    name: String,
    ttft: Option<String>,
    tpot: Option<String>,
    e2e: Option<String>,
    #[serde(default = "default_objective")]
    objective: f64,
}

fn default_objective() -> f64 {
    0.99
}

fn seconds(slo: &str, what: &str, v: &Option<String>) -> Result<Option<f64>, String> {
    v.as_deref()
        .map(|s| parse_duration(s).map(|d| d.as_secs_f64()).map_err(|e| format!("slo {slo}: {what}: {e}")))
        .transpose()
}

/// Reads the config at `path` into what the rule generator needs.
pub fn load_spec(path: &std::path::Path, selector: Option<String>) -> Result<RulesSpec, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let cfg: RulesConfig = serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut slos = Vec::new();
    for s in &cfg.slos {
        if !(s.objective > 0.0 && s.objective < 1.0) {
            return Err(format!("slo {}: objective {} must be between 0 and 1, e.g. 0.99", s.name, s.objective));
        }
        slos.push(SloSpec {
            name: s.name.clone(),
            ttft: seconds(&s.name, "ttft", &s.ttft)?,
            tpot: seconds(&s.name, "tpot", &s.tpot)?,
            e2e: seconds(&s.name, "e2e", &s.e2e)?,
            objective: s.objective,
        });
    }
    let windows = cfg
        .windows
        .iter()
        .map(|w| {
            parse_duration(w)
                .ok()
                .and_then(Window::new)
                .ok_or_else(|| format!("windows: {w:?} is not a window; write e.g. 5m"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RulesSpec { slos, windows, alerting: cfg.alerting, selector })
}

pub fn run(args: Args) -> CliResult {
    let spec = load_spec(&args.config, args.selector)?;
    if spec.slos.is_empty() {
        eprintln!("note: {} defines no `slos`; only the non-SLO rules are generated", args.config.display());
    }
    let gs = groups(&spec);
    let text = match args.format {
        Format::Prometheus => render_prometheus(&gs)?,
        Format::Prometheusrule => render_prometheusrule(&gs, &args.name)?,
    };
    print!("{text}");
    Ok(0)
}
