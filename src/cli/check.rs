//! `goodput check --config FILE [--probe] [--against URL]`: validate a config, print a
//! summary or every error; with `--probe`, also scrape each target once and say which SLO
//! clauses are bracketed rather than exact, or not evaluable, on what the engine exposes;
//! with `--against`, say what reloading the file into a running daemon would change
//! (super::against).

use std::path::PathBuf;

use super::subcommand::CliResult;
use crate::config::{self, Config};
use crate::daemon::target::{fetcher_for, limits_for};
use crate::duration::format_duration;
use crate::probe::findings;
use crate::scrape::{HttpClient, ingest};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The YAML config file to validate.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Scrape each target once and check the SLOs against its buckets and histograms.
    /// Findings and unreachable targets are warnings (exit 0).
    #[arg(long)]
    pub probe: bool,
    /// Instead of the summary, print what reloading the file into the daemon running at
    /// this address (`http://HOST:PORT` or `HOST:PORT`, its `listen`) would change, and
    /// what each change would do to its state.
    #[arg(long, value_name = "URL")]
    pub against: Option<String>,
}

pub fn run(args: Args) -> CliResult {
    match config::load(&args.config) {
        Ok(loaded) => {
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            let file = args.config.display().to_string();
            match &args.against {
                Some(base) => {
                    let running = super::against::fetch(base)?;
                    let (changes, hash) = super::against::changes(&running, loaded.config.clone());
                    print!("{}", super::against::report(&file, base, &running, &changes, &hash));
                }
                None => print!("{}", summary(&file, &loaded.config)),
            }
            if args.probe {
                for line in probe(&loaded.config)? {
                    eprintln!("warning: {line}");
                }
            }
            Ok(0)
        }
        Err(errs) => {
            for e in &errs.0 {
                eprintln!("error: {e}");
            }
            eprintln!("{}: {} error(s); see docs/config.md for every key", args.config.display(), errs.0.len());
            Ok(1)
        }
    }
}

/// Scrapes every target once, concurrently, with the daemon's own fetcher and ingest,
/// and returns what the user should know, one message each. Never fails on a target.
pub fn probe(c: &Config) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let slos = c.eval_config().slos;
    let limits = limits_for(c);
    let results = rt.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        let client = HttpClient::new();
        for (i, t) in c.targets.iter().enumerate() {
            let fetcher = client.clone().and_then(|client| fetcher_for(c, t, &client));
            let url = crate::redact::url(&t.url);
            let (name, hint, model, limits) = (t.name.clone(), t.engine, t.model.clone(), limits);
            let cardinality = t.cardinality;
            tasks.spawn(async move {
                let fetcher = fetcher.map_err(|e| format!("target {name} ({url}): cannot build the client: {e}"))?;
                let body = fetcher
                    .fetch()
                    .await
                    .map_err(|e| format!("target {name} ({url}) not probed: {} ({})", e.message(), e.reason()))?;
                let snap = ingest(&body, &limits, cardinality, hint, &model)
                    .map_err(|e| format!("target {name} ({url}) not probed: {} ({})", e.message(), e.reason()))?;
                Ok::<_, String>((i, name, snap))
            });
        }
        let mut out = Vec::new();
        while let Some(r) = tasks.join_next().await {
            out.push(r.unwrap_or_else(|e| Err(format!("a probe task failed: {e}"))));
        }
        out
    });
    let mut ok: Vec<_> = Vec::new();
    let mut msgs = Vec::new();
    for r in results {
        match r {
            Ok(x) => ok.push(x),
            Err(m) => msgs.push(m),
        }
    }
    ok.sort_by_key(|x| x.0);
    for (i, name, snap) in &ok {
        println!("  probed {name}: {} engine, {} model(s)", snap.engine.as_str(), snap.models.len());
        let t = &c.targets[*i];
        let sources: Vec<&'static str> =
            [(t.tap.is_some(), "tap"), (c.otlp.is_some(), "spans")].into_iter().filter(|s| s.0).map(|s| s.1).collect();
        msgs.extend(findings(&slos, name, snap, &sources).iter().map(|f| f.to_string()));
    }
    Ok(msgs)
}

/// A short human summary of what the daemon will do with this config.
pub fn summary(file: &str, c: &Config) -> String {
    let windows: Vec<String> = c
        .eval_windows()
        .iter()
        .map(|w| if c.windows.contains(w) { w.label() } else { format!("{} (read by alert rules)", w.label()) })
        .collect();
    let quantiles: Vec<String> = c
        .eval_quantiles()
        .iter()
        .map(|q| if c.quantiles.contains(q) { q.to_string() } else { format!("{q} (read by alert rules)") })
        .collect();
    let otlp = c.otlp.map_or(String::new(), |o| {
        format!("  receive OTLP spans on {} (POST /v1/traces, body limit {} bytes)\n", o.listen, o.body_limit)
    });
    let identity = if c.external_labels.is_empty() {
        String::new()
    } else {
        let l: Vec<String> = c.external_labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        format!("  external labels on every series and alert: {}\n", l.join(", "))
    };
    let mut s = format!(
        "OK: {file}\n  listen {}\n{identity}{otlp}  scrape every {} (timeout {}, body limit {} bytes, gzip {})\n  evaluate every {} over windows {} at quantiles {}\n  {} target(s):\n",
        c.listen,
        format_duration(c.scrape.interval),
        format_duration(c.scrape.timeout),
        c.scrape.body_limit,
        if c.scrape.gzip { "on" } else { "off" },
        format_duration(c.evaluation_interval),
        windows.join(", "),
        quantiles.join(", "),
        c.targets.len(),
    );
    for t in &c.targets {
        let engine = match t.engine {
            crate::adapt::EngineHint::Auto => "auto".to_string(),
            crate::adapt::EngineHint::Is(e) => e.as_str().to_string(),
        };
        let spans = match (&c.otlp, &t.traces, c.targets.len()) {
            (None, _, _) => String::new(),
            (Some(_), None, 1) => " spans of any service.name".to_string(),
            (Some(_), _, _) => format!(" spans of service.name {:?}", t.service_name()),
        };
        s.push_str(&format!(
            "    {} {} engine={} every {} timeout {}{spans}\n",
            t.name,
            crate::redact::url(&t.url),
            engine,
            format_duration(t.interval),
            format_duration(t.timeout)
        ));
    }
    if !c.discovery.is_empty() {
        s.push_str(&format!(
            "  {} discovery source(s), a vanished target kept {}:\n",
            c.discovery.len(),
            format_duration(c.scrape.target_grace)
        ));
        for d in &c.discovery {
            s.push_str(&format!("    {}\n", describe_discovery(d)));
        }
    }
    s.push_str(&format!("  {} SLO(s)", c.slos.len()));
    if !c.alerting.alertmanagers.is_empty() {
        s.push_str(&format!(", {} Alertmanager(s)", c.alerting.alertmanagers.len()));
    }
    s.push('\n');
    s
}

/// One line of the summary per discovery source (docs/discovery.md).
fn describe_discovery(d: &crate::config::Discovery) -> String {
    use crate::config::{Discovery, DnsRecord};
    match d {
        Discovery::FileSd(f) => format!("file_sd {} re-read every {}", f.files.join(", "), format_duration(f.refresh)),
        Discovery::Dns(n) => {
            let kind = match (n.record, n.port) {
                (DnsRecord::Srv, _) => "SRV".to_string(),
                (DnsRecord::A, p) => format!("A, port {}", p.unwrap_or_default()),
                (DnsRecord::Aaaa, p) => format!("AAAA, port {}", p.unwrap_or_default()),
            };
            format!("dns {} ({kind}) resolved every {}", n.names.join(", "), format_duration(n.refresh))
        }
        Discovery::Kubernetes(k) => {
            let selector =
                if k.selector.is_empty() { "all pods".to_string() } else { format!("pods {:?}", k.selector) };
            format!("kubernetes {selector} in namespace {}, port {}", k.namespace, k.port)
        }
    }
}
