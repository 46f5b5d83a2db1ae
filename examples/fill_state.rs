//! Writes a `state_dir` snapshot holding the past of `fake_targets`, so a daemon starts
//! with full windows instead of filling them for hours: the goodput half of the "full
//! windows" comparison in `scripts/bench/versus-prometheus.sh` (docs/footprint.md). The
//! Prometheus half is `fake_targets --history-out` fed to `promtool tsdb
//! create-blocks-from openmetrics`; both render the same values at the same instants.
//!
//! Each configured target whose URL ends in `/t/<i>/metrics` gets fake target `i`'s
//! expositions every `--step-ms` from the anchor to `--to-unix-ms`, ingested and recorded
//! exactly as a live scrape is (`scrape::ingest`, `TargetRuntime::record`), so the store
//! is the one the daemon would have built, thinned beyond the longest configured window
//! as its evaluations would have left it. Targets `i` and `i + PHASES` are served the
//! same values (`template::PHASES`), so each phase's past is ingested once and its store
//! saved for every target of that phase: a fleet of thousands costs 97 targets' ingest
//! (the fleet's targets are assumed to share their scrape settings, as
//! `scripts/bench/*.sh` write them). Alerts, budgets and request series are not
//! written: they start empty, as after a first deploy.
//!
//! ```sh
//! cargo run --release --example fill_state -- --config goodput.yaml --template scrape.prom \
//!     --anchor-unix-ms MS --to-unix-ms MS [--step-ms 5000] [--ramp 600]
//! ```

use std::collections::HashMap;
use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::config::Cardinality;
use goodput::daemon::target::TargetRuntime;
use goodput::evaluate::Thinning;
use goodput::parse::Limits;
use goodput::scrape::ingest;
use goodput::state::format::{self, Part, Section};
use goodput::state::{file, identity};
use goodput::window::saved::SavedWindows;

#[path = "fake_targets/template.rs"]
mod template;
use template::{PHASES, Template, factor};

fn fail(msg: String) -> ! {
    eprintln!("fill_state: {msg}");
    std::process::exit(2);
}

struct Args {
    config: String,
    template: String,
    anchor_ms: i64,
    to_ms: i64,
    step_ms: i64,
    ramp_s: f64,
}

fn parse_args() -> Args {
    let mut a =
        Args { config: String::new(), template: String::new(), anchor_ms: 0, to_ms: 0, step_ms: 5000, ramp_s: 600.0 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| fail(format!("{flag} needs a value")));
        let int = |v: &str| v.parse::<i64>().unwrap_or_else(|e| fail(format!("{flag}: {e}")));
        match flag.as_str() {
            "--config" => a.config = value,
            "--template" => a.template = value,
            "--anchor-unix-ms" => a.anchor_ms = int(&value),
            "--to-unix-ms" => a.to_ms = int(&value),
            "--step-ms" => a.step_ms = int(&value),
            "--ramp" => a.ramp_s = value.parse().unwrap_or_else(|e| fail(format!("--ramp: {e}"))),
            other => fail(format!(
                "unknown flag {other}; expected --config, --template, --anchor-unix-ms, --to-unix-ms, --step-ms, --ramp"
            )),
        }
    }
    if a.config.is_empty() || a.template.is_empty() || a.anchor_ms <= 0 || a.to_ms < a.anchor_ms || a.step_ms <= 0 {
        fail("needs --config, --template, --anchor-unix-ms and --to-unix-ms (not before the anchor), and a positive --step-ms".into());
    }
    a
}

fn main() {
    let args = parse_args();
    let loaded = goodput::config::load(std::path::Path::new(&args.config)).unwrap_or_else(|e| fail(format!("{e}")));
    let config = loaded.config;
    let Some(state) = &config.state else { fail(format!("{} sets no state_dir to write to", args.config)) };
    let text = std::fs::read_to_string(&args.template)
        .unwrap_or_else(|e| fail(format!("cannot read --template {}: {e}", args.template)));
    let template = Template::parse(&text);
    // The window store keeps what the longest evaluated window needs; older scrapes would
    // be dropped on push anyway.
    let from_ms = args.anchor_ms.max(args.to_ms - config.max_window().as_millis() as i64);
    let thinning = Thinning::of(&config.eval_config());
    let mut scrapes = 0u64;
    let mut by_phase: HashMap<usize, SavedWindows> = HashMap::new();
    let mut phases = Vec::with_capacity(config.targets.len());
    for t in &config.targets {
        let path = t.url.path();
        let Some(i) = path.strip_prefix("/t/").and_then(|p| p.strip_suffix("/metrics")).and_then(|i| i.parse().ok())
        else {
            fail(format!("target {}: {path} is not a fake_targets path /t/<i>/metrics", t.name))
        };
        phases.push(i % PHASES);
        by_phase.entry(i % PHASES).or_insert_with(|| {
            let rt = TargetRuntime::new(t.clone(), config.max_window());
            let mut at = from_ms;
            while at <= args.to_ms {
                let body = template.render(factor(at - args.anchor_ms, i, args.ramp_s));
                let snapshot =
                    ingest(body.as_bytes(), &Limits::default(), Cardinality::default(), EngineHint::Auto, &t.name);
                rt.record(at, Duration::from_millis(1), snapshot);
                scrapes += 1;
                at += args.step_ms;
            }
            // Thinned as a daemon running that long would have left it (docs/memory.md).
            let mut held = rt.lock();
            if let Some(thin) = &thinning {
                held.windows.thin_before(args.to_ms - thin.full_ms, &thin.kept);
            }
            SavedWindows::save(&held.windows)
        });
    }
    // Framed as they are written: the file of a large fleet is not held in memory.
    let frames = config.targets.iter().zip(&phases).map(|(t, phase)| {
        let section =
            Section { target: t.name.clone(), identity: identity(t), part: Part::Windows(by_phase[phase].clone()) };
        format::frame(&section).unwrap_or_else(|| fail(format!("target {}: cannot encode its windows", t.name)))
    });
    let written = file::write_atomic(&state.dir, &format::header(args.to_ms), frames, state.max_size)
        .unwrap_or_else(|e| fail(format!("cannot write the snapshot to {}: {e}", state.dir.display())));
    if written.left_out > 0 {
        fail(format!(
            "{} of {} targets' windows left out: the snapshot would pass state_max_size ({} MiB); raise it in {}",
            written.left_out,
            config.targets.len(),
            state.max_size >> 20,
            args.config
        ));
    }
    eprintln!(
        "fill_state: {scrapes} scrapes ingested for {} phases of {} targets, {} bytes written to {}",
        by_phase.len(),
        config.targets.len(),
        written.bytes,
        state.dir.display()
    );
}
