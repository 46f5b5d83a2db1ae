//! Writes a `state_dir` snapshot holding the past of `fake_targets`, so a daemon starts
//! at steady state instead of filling its state for hours: the goodput half of the
//! "full" comparison in `scripts/bench/versus-prometheus.sh` (docs/footprint.md). The
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
//! `scripts/bench/*.sh` write them).
//!
//! Every evaluation instant of that past (each `evaluation_interval`) is evaluated as the
//! daemon's tick does: the windows' incremental state advanced (`TargetRuntime::evaluation`),
//! the report enriched (`Enricher::apply`: the alert rules and the capacity book, an interval
//! per 15 s) and the error-budget ledgers fed (`BudgetBook::feed_metrics`, once a minute).
//! Beside the scrapes, each target's engine is given the requests a tap in front of it would
//! have measured (`--requests tap`, the default; `otlp` as engine spans; `none` for none):
//! per model, as many a second as its histograms count, spread over each tick and fed to
//! the request store (`RequestStore::ingest`, its records up to the per-series cap and no
//! older than the longest window, its slots and counters) and to the budget book
//! (`BudgetBook::add_records`), as the daemon's request path does each tick.
//! So the snapshot holds, per target, the window store, the capacity book's series
//! (`Part::Capacity`), the budget ledgers (a ledger per source, counted over the past
//! given), the request series and the pending and firing alerts.
//!
//! ```sh
//! cargo run --release --example fill_state -- --config goodput.yaml --template scrape.prom \
//!     --anchor-unix-ms MS --to-unix-ms MS [--step-ms 5000] [--ramp 600] [--requests tap|otlp|none]
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use goodput::adapt::EngineHint;
use goodput::alert::saved::SavedAlert;
use goodput::budget::BudgetBook;
use goodput::budget::saved::SavedBudgets;
use goodput::canonical::HistogramKind;
use goodput::capacity::saved::SavedCapacity;
use goodput::config::{Cardinality, Target};
use goodput::daemon::target::TargetRuntime;
use goodput::enrich::Enricher;
use goodput::evaluate::incremental::Incremental;
use goodput::evaluate::incremental::saved::SavedEvaluation;
use goodput::evaluate::{EvalConfig, RateMode, Thinning};
use goodput::parse::Limits;
use goodput::report::{Report, TargetReport};
use goodput::request::{ItlGap, RequestRecord, RequestStore, SavedRequests, Source, Status, TokenCount};
use goodput::scrape::ingest;
use goodput::state::format::{self, Listed, Part, Section};
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
    /// The source of the requests given to the request stores; `None` for no requests.
    requests: Option<Source>,
}

fn parse_args() -> Args {
    let mut a = Args {
        config: String::new(),
        template: String::new(),
        anchor_ms: 0,
        to_ms: 0,
        step_ms: 5000,
        ramp_s: 600.0,
        requests: Some(Source::Tap),
    };
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
            "--requests" => {
                a.requests = match value.as_str() {
                    "tap" => Some(Source::Tap),
                    "otlp" => Some(Source::Otlp),
                    "none" => None,
                    other => fail(format!("--requests: {other} is none of tap, otlp, none")),
                }
            }
            other => fail(format!(
                "unknown flag {other}; expected --config, --template, --anchor-unix-ms, --to-unix-ms, --step-ms, --ramp, --requests"
            )),
        }
    }
    if a.config.is_empty() || a.template.is_empty() || a.anchor_ms <= 0 || a.to_ms < a.anchor_ms || a.step_ms <= 0 {
        fail("needs --config, --template, --anchor-unix-ms and --to-unix-ms (not before the anchor), and a positive --step-ms".into());
    }
    a
}

/// What one phase's past leaves: each part of the state a snapshot keeps, saved under the
/// phase's first target and given to every target of the phase.
#[derive(Clone)]
struct Past {
    windows: SavedWindows,
    /// The windows' incremental state, saved with them: the daemon restores it and needs
    /// no first pass over the store.
    evaluation: Option<SavedEvaluation>,
    budgets: SavedBudgets,
    requests: SavedRequests,
    capacity: SavedCapacity,
    alerts: Vec<SavedAlert>,
    /// Heap bytes of the capacity book's histories, of the budget ledgers and of the request
    /// series, as the daemon holds them for this target.
    heap: (usize, usize, usize),
}

/// Ingests and evaluates target `t`'s past (fake target `i`) from `from_ms` to `args.to_ms`
/// as the daemon would have, tick by tick.
fn fill(args: &Args, config: &goodput::Config, template: &Template, t: &Target, i: usize, from_ms: i64) -> (Past, u64) {
    let eval = config.eval_config();
    let cfg = eval.for_target(&t.name);
    let rt = TargetRuntime::new(t.clone(), config.max_window());
    let mut enricher = Enricher::new(&eval, &config.alerting, None, None);
    let mut budgets = BudgetBook::new(config.budget_specs(), vec![t.name.clone()]);
    let mut store = RequestStore::new(goodput::daemon::requests::store_config(config));
    let mut traffic = args.requests.map(|source| Traffic::new(source, template, t, i, args));
    let counting = !config.slos.is_empty();
    let eval_ms = (config.evaluation_interval.as_millis() as i64).max(1);
    let (mut at, mut next_tick, mut scrapes) = (from_ms, from_ms, 0u64);
    while at <= args.to_ms {
        let body = template.render(factor(at - args.anchor_ms, i, args.ramp_s));
        let snapshot = ingest(body.as_bytes(), &Limits::default(), Cardinality::default(), EngineHint::Auto, &t.name);
        rt.record(at, Duration::from_millis(1), snapshot);
        scrapes += 1;
        if at >= next_tick {
            tick(&rt, &cfg, &eval, &mut enricher, at);
            if counting {
                budgets.feed_metrics(&t.name, &rt.lock().windows, at);
            }
            if let Some(traffic) = &mut traffic {
                // The requests that finished since the last tick, as the inbox drains them.
                let models = traffic.models();
                store.set_models(&t.name, &t.model, models);
                let taken = store.ingest(traffic.until(at), at);
                budgets.add_records(&taken);
            }
            next_tick = at + eval_ms;
        }
        at += args.step_ms;
    }
    // The ledgers moved to the last instant, as the last tick's report leaves them.
    budgets.report(args.to_ms);
    let thinning = Thinning::of(&eval);
    // The evaluation's lock before the target's, as the daemon takes them.
    let mut evaluation = rt.evaluation();
    let mut held = rt.lock();
    // Thinned as a daemon running that long would have left it (docs/memory.md).
    if let Some(thin) = &thinning {
        held.windows.thin_before(args.to_ms - thin.full_ms, &thin.kept);
    }
    let evaluation = evaluation.as_mut().and_then(|e| e.saved(&mut held.windows));
    let (capacity, capacity_bytes) = {
        let book = enricher.capacity();
        let book = book.lock().unwrap_or_else(|e| e.into_inner());
        (book.saved(&t.name), book.history_bytes())
    };
    let past = Past {
        windows: SavedWindows::save(&held.windows),
        evaluation,
        budgets: budgets.saved(&t.name),
        requests: store.saved(&t.name),
        capacity,
        alerts: enricher.alerts().saved(|_| true),
        heap: (capacity_bytes, budgets.allocated_bytes(), store.bytes_held()),
    };
    (past, scrapes)
}

/// One tick of one target, as the daemon's evaluator and enricher run it.
fn tick(rt: &TargetRuntime, cfg: &EvalConfig, eval: &EvalConfig, enricher: &mut Enricher, now_ms: i64) {
    let models = {
        let mut evaluation = rt.evaluation();
        let state = match &mut *evaluation {
            Some(s) if s.matches(cfg) => s,
            slot => slot.insert(Incremental::new(cfg)),
        };
        state.advance(&mut rt.lock().windows, now_ms);
        state.reports(now_ms, cfg, RateMode::Prometheus)
    };
    let (mut health, engine) = {
        let st = rt.lock();
        (st.health.clone(), st.engine())
    };
    health.last_evaluation_ms = Some(now_ms);
    let target = TargetReport { target: rt.config.name.clone(), engine, health, models: models.into() };
    let mut report = Report { t_ms: now_ms, targets: vec![target], limits: eval.limits(), ..Report::default() };
    let _ = enricher.apply(&mut report, Vec::new());
}

fn main() {
    let args = parse_args();
    let loaded = goodput::config::load(std::path::Path::new(&args.config)).unwrap_or_else(|e| fail(format!("{e}")));
    let config = loaded.config;
    let Some(state) = &config.state else { fail(format!("{} sets no state_dir to write to", args.config)) };
    let text = std::fs::read_to_string(&args.template)
        .unwrap_or_else(|e| fail(format!("cannot read --template {}: {e}", args.template)));
    let template = Template::parse(&text);
    // Every scrape from the anchor is ingested and evaluated: the window store keeps what
    // the longest window needs and drops the rest on push, while the capacity book keeps up
    // to a day of intervals and the budget ledgers the SLO's period.
    let from_ms = args.anchor_ms;
    let mut scrapes = 0u64;
    let mut by_phase: HashMap<usize, Past> = HashMap::new();
    let mut phases = Vec::with_capacity(config.targets.len());
    for t in &config.targets {
        let path = t.url.path();
        let Some(i) = path.strip_prefix("/t/").and_then(|p| p.strip_suffix("/metrics")).and_then(|i| i.parse().ok())
        else {
            fail(format!("target {}: {path} is not a fake_targets path /t/<i>/metrics", t.name))
        };
        phases.push(i % PHASES);
        by_phase.entry(i % PHASES).or_insert_with(|| {
            let (past, n) = fill(&args, &config, &template, t, i, from_ms);
            scrapes += n;
            past
        });
    }
    let pasts: Vec<&Past> = phases.iter().map(|p| &by_phase[p]).collect();
    // In the daemon's order (state::capture): the list of the sections first, so that a
    // restore of a damaged copy names what it lost; then alerts, budgets, request series,
    // each window store with its windows' incremental state, and the capacity histories,
    // which `state_max_size` leaves out first.
    let alerts: Vec<(&Target, Vec<SavedAlert>)> = config
        .targets
        .iter()
        .zip(&pasts)
        .filter(|(_, p)| !p.alerts.is_empty())
        .map(|(t, p)| (t, p.alerts.iter().cloned().map(|a| relabel(a, &t.name)).collect()))
        .collect();
    let list = |part: &str, with: &dyn Fn(&Past) -> bool| -> Vec<Listed> {
        let named = config.targets.iter().zip(&pasts).filter(|(_, p)| with(p));
        named.map(|(t, _)| Listed { target: t.name.clone(), part: part.into() }).collect()
    };
    let mut listed = list("alerts", &|p| !p.alerts.is_empty());
    listed.extend(list("budgets", &|p| !p.budgets.is_empty()));
    listed.extend(list("requests", &|p| !p.requests.is_empty()));
    for (t, p) in config.targets.iter().zip(&pasts) {
        listed.push(Listed { target: t.name.clone(), part: "windows".into() });
        if p.evaluation.is_some() {
            listed.push(Listed { target: t.name.clone(), part: "evaluation".into() });
        }
    }
    listed.extend(list("capacity", &|p| !p.capacity.is_empty()));
    let contents = Section { target: String::new(), identity: 0, part: Part::Contents(listed) };
    let frame = |target: &Target, part: Part| {
        let what = part.name();
        let section = Section { target: target.name.clone(), identity: identity(target), part };
        format::frame(&section, Vec::new())
            .unwrap_or_else(|| fail(format!("target {}: cannot encode its {what}", target.name)))
    };
    let contents =
        format::frame(&contents, Vec::new()).unwrap_or_else(|| fail("cannot encode the list of sections".into()));
    let each = || config.targets.iter().zip(pasts.iter().copied());
    // Framed as they are written: the file of a large fleet is not held in memory.
    let frames = std::iter::once(contents)
        .chain(alerts.into_iter().map(|(t, a)| frame(t, Part::Alerts(a))))
        .chain(each().filter(|(_, p)| !p.budgets.is_empty()).map(|(t, p)| frame(t, Part::Budgets(p.budgets.clone()))))
        .chain(
            each()
                .filter(|(_, p)| !p.requests.is_empty())
                .map(|(t, p)| frame(t, Part::RequestRecords(p.requests.clone()))),
        )
        .chain(each().flat_map(|(t, p)| {
            let evaluation = p.evaluation.clone().map(|e| frame(t, Part::Evaluation(Some(e))));
            std::iter::once(frame(t, Part::Windows(p.windows.clone()))).chain(evaluation)
        }))
        .chain(
            each().filter(|(_, p)| !p.capacity.is_empty()).map(|(t, p)| frame(t, Part::Capacity(p.capacity.clone()))),
        );
    let written =
        file::write_atomic(&state.dir, &format::header(args.to_ms), frames, state.max_size, &file::Attempt::new(None))
            .unwrap_or_else(|e| fail(format!("cannot write the snapshot to {}: {e}", state.dir.display())));
    if written.left_out > 0 {
        fail(format!(
            "{} sections left out (capacity histories first, then window stores): the snapshot would pass state_max_size ({} MiB); raise it in {}",
            written.left_out,
            state.max_size >> 20,
            args.config
        ));
    }
    let held = |with: &dyn Fn(&Past) -> bool| pasts.iter().filter(|p| with(p)).count();
    let mib = |of: &dyn Fn(&Past) -> usize| pasts.iter().map(|p| of(p)).sum::<usize>() as f64 / (1 << 20) as f64;
    eprintln!(
        "fill_state: {scrapes} scrapes ingested and evaluated for {} phases of {} targets ({} with capacity series, {:.1} MiB of capacity histories; {} with budget ledgers, {:.1} MiB; {} with request series, {:.1} MiB; {} with alerts), {} bytes written to {}",
        by_phase.len(),
        config.targets.len(),
        held(&|p| !p.capacity.is_empty()),
        mib(&|p| p.heap.0),
        held(&|p| !p.budgets.is_empty()),
        mib(&|p| p.heap.1),
        held(&|p| !p.requests.is_empty()),
        mib(&|p| p.heap.2),
        held(&|p| !p.alerts.is_empty()),
        written.bytes,
        state.dir.display()
    );
}

/// A phase's alert as target `name` holds it.
fn relabel(mut a: SavedAlert, name: &str) -> SavedAlert {
    if let Some(t) = a.labels.get_mut("target") {
        *t = name.to_string();
    }
    a
}

/// The requests a tap (or the engine's spans) would have seen at fake target `i`: per
/// model, as many a second as its E2E histogram counts, with latencies and token counts
/// drawn from a fixed sequence, so every run writes the same records.
struct Traffic {
    source: Source,
    target: String,
    /// Per model, requests a second.
    rates: Vec<(String, f64)>,
    /// Up to where the requests were made (Unix ms), and the fractions of a request owed.
    made_ms: i64,
    owed: Vec<f64>,
    seed: u64,
}

impl Traffic {
    fn new(source: Source, template: &Template, t: &Target, i: usize, args: &Args) -> Traffic {
        // The engine's own request rate: its E2E counts a minute apart.
        let counts = |elapsed_ms: i64| -> BTreeMap<String, f64> {
            let body = template.render(factor(elapsed_ms, i, args.ramp_s));
            let Ok(snap) =
                ingest(body.as_bytes(), &Limits::default(), Cardinality::default(), EngineHint::Auto, &t.name)
            else {
                return BTreeMap::new();
            };
            let e2e = |m: &goodput::canonical::ModelSnapshot| {
                m.histograms.get(&HistogramKind::E2e).map_or(0.0, |h| h.iter().map(|s| s.value.count).sum())
            };
            snap.models.iter().map(|(name, m)| (name.clone(), e2e(m))).collect()
        };
        let (a, b) = (counts(0), counts(60_000));
        let rates: Vec<(String, f64)> =
            b.iter().map(|(m, n)| (m.clone(), ((n - a.get(m).copied().unwrap_or(0.0)) / 60.0).max(0.0))).collect();
        let owed = vec![0.0; rates.len()];
        Traffic { source, target: t.name.clone(), rates, made_ms: args.anchor_ms, owed, seed: i as u64 + 1 }
    }

    fn models(&self) -> Vec<String> {
        self.rates.iter().map(|(m, _)| m.clone()).collect()
    }

    /// A number in [0, 1) from a fixed sequence (xorshift).
    fn draw(&mut self) -> f64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        (self.seed >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The requests that finished after the last call, up to `to_ms`, evenly spread.
    fn until(&mut self, to_ms: i64) -> Vec<RequestRecord> {
        let span_s = (to_ms - self.made_ms).max(0) as f64 / 1000.0;
        let mut out = Vec::new();
        for k in 0..self.rates.len() {
            self.owed[k] += self.rates[k].1 * span_s;
            let n = self.owed[k].floor();
            self.owed[k] -= n;
            for j in 0..n as usize {
                let finished_ms = self.made_ms as f64 + (j as f64 + 0.5) / n * (to_ms - self.made_ms) as f64;
                let ttft = 0.05 + 0.4 * self.draw().powi(3);
                let tpot = 0.01 + 0.03 * self.draw();
                let tokens = 20 + (280.0 * self.draw()) as u32;
                let itl = (0..8).map(|_| ItlGap { seconds: tpot * (0.5 + self.draw()), tokens: 1 }).collect();
                out.push(RequestRecord {
                    source: self.source,
                    target: self.target.clone(),
                    model: self.rates[k].0.clone(),
                    status: if self.draw() < 0.002 { Status::HttpError(500) } else { Status::Ok },
                    finished_unix: finished_ms / 1000.0,
                    e2e_s: ttft + tpot * f64::from(tokens - 1),
                    ttft_s: Some(ttft),
                    tpot_s: Some(tpot),
                    prompt_tokens: Some(200 + (800.0 * self.draw()) as u32),
                    output_tokens: Some(TokenCount { value: tokens, exact: true }),
                    itl,
                    engine: None,
                    request_id: None,
                });
            }
        }
        self.made_ms = to_ms;
        out
    }
}
