//! `goodput rules`: Prometheus recording and alerting rules computing the configured SLOs
//! fleet-wide in PromQL, as a PrometheusRule or a plain rule file.

use std::path::PathBuf;

use std::collections::BTreeMap;

use super::subcommand::CliResult;
use crate::config;
use crate::promql_rules::{RulesSpec, groups, render_prometheus, render_prometheusrule};

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
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format: a PrometheusRule for the Prometheus Operator, or a plain rule file.
    #[arg(long, value_enum, default_value_t = Format::Prometheusrule)]
    pub format: Format,
    /// Extra label matchers for every engine series, e.g. 'job="vllm"'.
    #[arg(long)]
    pub selector: Option<String>,
    /// NAME=INSTANCE: the `instance` label Prometheus gives the series of configured
    /// target NAME. Needed for each target an SLO's `targets:` names (repeat the flag).
    #[arg(long = "target-instance", value_name = "NAME=INSTANCE")]
    pub target_instances: Vec<String>,
    /// metadata.name of the PrometheusRule.
    #[arg(long, default_value = "goodput")]
    pub name: String,
}

/// Reads the config at `path` with the daemon's own loader (so `goodput check` and
/// `goodput rules` accept exactly the same files) into what the rule generator needs.
/// Errors carry `file:line:column`, one per line.
pub fn load_spec(
    path: &std::path::Path,
    selector: Option<String>,
    target_instances: &[String],
) -> Result<RulesSpec, String> {
    let selector =
        selector.as_deref().map(crate::promql_rules::parse_selector).transpose().map_err(|e| e.to_string())?;
    // The rules never read external_labels: a pod's config generates rules anywhere.
    let loaded = config::load_with_env(path, &|name| Some(format!("${{{name}}}"))).map_err(|errs| errs.to_string())?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let cfg = loaded.config;
    let mut instances = BTreeMap::new();
    for pair in target_instances {
        let Some((name, instance)) = pair.split_once('=').filter(|(n, i)| !n.trim().is_empty() && !i.trim().is_empty())
        else {
            return Err(format!("--target-instance {pair:?}: write NAME=INSTANCE, e.g. chat=10.0.0.5:8000"));
        };
        let name = name.trim();
        if !cfg.targets.iter().any(|t| t.name == name) {
            let known: Vec<&str> = cfg.targets.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "--target-instance {pair:?}: no target named {name:?} in the config; expected one of {}",
                known.join(", ")
            ));
        }
        instances.insert(name.to_string(), instance.trim().to_string());
    }
    Ok(RulesSpec {
        slos: cfg.slos,
        windows: cfg.windows,
        alerting: cfg.alerting,
        selector,
        target_instances: instances,
    })
}

pub fn run(args: Args) -> CliResult {
    let spec = match load_spec(&args.config, args.selector, &args.target_instances) {
        Ok(spec) => spec,
        Err(e) => {
            for line in e.lines() {
                eprintln!("error: {line}");
            }
            eprintln!(
                "{}: fix the config or the flags (`goodput check --config FILE` shows every config error)",
                args.config.display()
            );
            return Ok(1);
        }
    };
    if spec.slos.is_empty() {
        eprintln!("note: {} defines no `slos`; only the non-SLO rules are generated", args.config.display());
    }
    if spec.alerting.runbook_page().is_none() {
        eprintln!(
            "note: {} sets no alerting.runbook_url, so these alerts carry no runbook_url annotation: no daemon serves \
             Prometheus's alerts their runbooks. Set it to an address your on-call can open that serves goodput's \
             /runbooks/ page, e.g. http://goodput.monitoring.example.com:9464/runbooks/ (docs/fleet.md#runbook-links)",
            args.config.display()
        );
    }
    let gs = match groups(&spec) {
        Ok(gs) => gs,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(1);
        }
    };
    let text = match args.format {
        Format::Prometheus => render_prometheus(&gs)?,
        Format::Prometheusrule => render_prometheusrule(&gs, &args.name)?,
    };
    print!("{text}");
    Ok(0)
}
