//! The per-target cost of the daemon once its windows are full, measured in-process so it
//! needs no hours of wall time (docs/footprint.md). A live benchmark of a few minutes only
//! sees windows holding a few minutes of scrapes.
//!
//! Fills one target's window store with `longest window / interval` scrapes of the
//! template (counters advancing as in `fake_targets`; without `--template`, a synthetic
//! vLLM engine), then times the per-target costs the daemon pays: ingesting one scrape
//! (parse + adapt + push) per interval, and one evaluation tick over the full windows,
//! both as the daemon does it (incremental: the new scrape in, the oldest out, every
//! report) and from scratch (`evaluate_target`, re-reading every stored point). The store
//! is measured as the daemon keeps it (thin beyond the longest configured window, once the
//! evaluation has run) and with every scrape whole (what it kept before).
//!
//! ```sh
//! cargo run --release --example steady_state -- [--template scrape.prom] --interval 1 [--config FILE]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use goodput::adapt::EngineHint;
use goodput::config::Cardinality;
use goodput::evaluate::incremental::Incremental;
use goodput::evaluate::{RateMode, Thinning, evaluate_target};
use goodput::parse::Limits;
use goodput::scrape::ingest;
use goodput::window::TargetWindows;
use goodput::window::saved::SavedWindows;

#[path = "fake_targets/template.rs"]
mod template;
use template::Template;

fn fail(msg: String) -> ! {
    eprintln!("steady_state: {msg}");
    std::process::exit(2);
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let (mut template_path, mut interval_s, mut config_path, mut evals) = (String::new(), 1.0f64, None, 15usize);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| fail(format!("{flag} needs a value")));
        match flag.as_str() {
            "--template" => template_path = value,
            "--interval" => interval_s = value.parse().unwrap_or_else(|e| fail(format!("--interval: {e}"))),
            "--config" => config_path = Some(value),
            "--evals" => evals = value.parse().unwrap_or_else(|e| fail(format!("--evals: {e}"))),
            other => fail(format!("unknown flag {other}; expected --template, --interval, --config, --evals")),
        }
    }
    if interval_s.is_nan() || interval_s <= 0.0 || evals == 0 {
        fail("--interval and --evals must be positive".into());
    }
    let text = if template_path.is_empty() {
        goodput::parse::vllm_like_exposition(1, 1, 7)
    } else {
        std::fs::read_to_string(&template_path)
            .unwrap_or_else(|e| fail(format!("cannot read --template {template_path:?}: {e}")))
    };
    // The default config (default windows and alert rules) unless one is given.
    let yaml = match &config_path {
        Some(p) => std::fs::read_to_string(p).unwrap_or_else(|e| fail(format!("cannot read {p}: {e}"))),
        None => "targets:\n  - {name: t, url: 'http://127.0.0.1:1/metrics'}\n".to_string(),
    };
    let config = goodput::config::from_str(&yaml, "config").unwrap_or_else(|e| fail(format!("{e}"))).config;
    let eval = config.eval_config().for_target("t");
    let max_window = config.max_window();
    let interval_ms = (interval_s * 1000.0).round() as i64;
    let points = max_window.as_millis() as i64 / interval_ms;

    let template = Template::parse(&text);
    let limits = Limits::default();
    let mut store = TargetWindows::new(max_window);
    let mut ingest_times = Vec::with_capacity(points as usize + 1);
    let mut body_bytes = 0;
    let mut push = |store: &mut TargetWindows, k: i64| {
        // The template's counters grew over 10 simulated minutes; keep that rate.
        let body = template.render(1.0 + (k * interval_ms) as f64 / 600_000.0);
        body_bytes = body.len();
        let began = Instant::now();
        let snapshot = ingest(body.as_bytes(), &limits, Cardinality::default(), EngineHint::Auto, "t")
            .unwrap_or_else(|e| fail(format!("the template does not ingest: {e}")));
        store.push(k * interval_ms, Arc::new(snapshot));
        began.elapsed()
    };
    for k in 0..=points {
        ingest_times.push(push(&mut store, k));
    }
    let now_ms = points * interval_ms;
    let mut scratch_times = Vec::with_capacity(evals);
    let mut models = 0;
    for _ in 0..evals {
        let began = Instant::now();
        models = std::hint::black_box(evaluate_target(&store, now_ms, &eval)).len();
        scratch_times.push(began.elapsed());
    }
    // Every scrape whole, as the store was before any evaluation thinned it.
    let unthinned = store.clone();
    // The daemon's tick: one new scrape per interval, the windows advanced over it.
    let mut inc = Incremental::new(&eval);
    inc.advance(&mut store, now_ms);
    let ticks = (evals * 20).max(100);
    let mut tick_times = Vec::with_capacity(ticks);
    for k in points + 1..=points + ticks as i64 {
        push(&mut store, k);
        let began = Instant::now();
        inc.advance(&mut store, k * interval_ms);
        std::hint::black_box(inc.reports(k * interval_ms, &eval, RateMode::Prometheus));
        tick_times.push(began.elapsed());
    }
    // A restarted daemon's first tick: the store restored (thin beyond the longest
    // configured window), the incremental state built from all of it.
    let last_ms = (points + ticks as i64) * interval_ms;
    let mut first_times = Vec::with_capacity(evals);
    for _ in 0..evals {
        let began = Instant::now();
        let mut fresh = Incremental::new(&eval);
        fresh.advance(&mut store, last_ms);
        std::hint::black_box(fresh.reports(last_ms, &eval, RateMode::Prometheus));
        first_times.push(began.elapsed());
    }
    // With the state saved beside the store: restoring it (the windows' oldest points and
    // the newest read decoded again), then the first tick over the next scrape.
    let saved = inc.saved(&mut store).unwrap_or_else(|| fail("the state could not be saved".into()));
    let saved_bytes = postcard::to_allocvec(&saved).map_or(0, |b| b.len());
    let from_snapshot = SavedWindows::save(&store)
        .restore(max_window)
        .unwrap_or_else(|e| fail(format!("the saved store does not restore: {e}")));
    let next_ms = last_ms + interval_ms;
    let (mut restored_times, mut after_times, mut rethin_times) =
        (Vec::with_capacity(evals), Vec::with_capacity(evals), Vec::with_capacity(evals));
    for _ in 0..evals {
        let mut copy = from_snapshot.clone();
        let began = Instant::now();
        let mut back = Incremental::restored(&saved, &eval, &mut copy)
            .unwrap_or_else(|| fail("the saved state does not restore".into()));
        restored_times.push(began.elapsed());
        push(&mut copy, points + ticks as i64 + 1);
        let began = Instant::now();
        // What the first tick's advance does first of all: the store's restored thin
        // scrapes (full points of their thin layouts) go back into blocks.
        if let Some(t) = Thinning::of(&eval) {
            copy.thin_before(next_ms - t.full_ms, &t.kept);
        }
        rethin_times.push(began.elapsed());
        let began = Instant::now();
        back.advance(&mut copy, next_ms);
        std::hint::black_box(back.reports(next_ms, &eval, RateMode::Prometheus));
        after_times.push(began.elapsed());
    }
    let (restored, after, rethin) = (median(restored_times), median(after_times), median(rethin_times));
    let first = median(first_times);
    let ingest = median(ingest_times);
    let scratch = median(scratch_times);
    let evaluate = median(tick_times);
    let windows: Vec<String> = config.eval_windows().iter().map(|w| format!("{w}")).collect();
    let per_tick = ingest + evaluate;
    println!("windows evaluated      {}", windows.join(","));
    println!("stored points          {} ({} per window at {interval_s}s)", store.len(), points);
    println!("scrape body            {body_bytes} bytes, {models} model(s)");
    println!("ingest, median         {:.1} us per scrape (parse + adapt + push)", ingest.as_secs_f64() * 1e6);
    println!("evaluate, median       {:.1} us per tick (full windows, incremental)", evaluate.as_secs_f64() * 1e6);
    println!("first tick, median     {:.2} ms (the state built from a restored store)", first.as_secs_f64() * 1e3);
    println!(
        "restored, median       {:.2} ms to restore the saved state ({:.1} KiB); then {:.2} ms for the store to re-thin what it restored, {:.2} ms for the first tick",
        restored.as_secs_f64() * 1e3,
        saved_bytes as f64 / 1024.0,
        rethin.as_secs_f64() * 1e3,
        after.as_secs_f64() * 1e3
    );
    println!(
        "from scratch, median   {:.2} ms per tick ({:.0}x the incremental tick)",
        scratch.as_secs_f64() * 1e3,
        scratch.as_secs_f64() / evaluate.as_secs_f64()
    );
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    println!(
        "window store heap      {:.3} MiB ({} thin scrapes of {} series, {} full of {}; {:.3} MiB with every scrape whole)",
        mib(store.heap_bytes()),
        store.thin_points(),
        store.stored_points().next().map_or(0, |p| p.1.keys.len()),
        store.len() - store.thin_points(),
        store.stored_points().last().map_or(0, |p| p.1.keys.len()),
        mib(unthinned.heap_bytes()),
    );
    println!("incremental state heap {:.1} KiB", inc.heap_bytes() as f64 / 1024.0);
    for (part, bytes) in inc.heap_parts() {
        println!("  {part:<22} {:.1} KiB", bytes as f64 / 1024.0);
    }
    // The same windows, every one kept whole: what the alert-only windows save.
    let whole = goodput::evaluate::EvalConfig { alert_only: Vec::new(), ..eval.clone() };
    let mut wide = Incremental::new(&whole);
    wide.advance(&mut store, (points + ticks as i64) * interval_ms);
    println!(
        "  with every window whole {:.1} KiB (alert-only: {})",
        wide.heap_bytes() as f64 / 1024.0,
        eval.alert_only.iter().map(|a| a.window.to_string()).collect::<Vec<_>>().join(",")
    );
    println!(
        "one target, full windows: {:.3} % of one core at a {interval_s}s interval (excluding HTTP and /metrics)",
        per_tick.as_secs_f64() / interval_s * 100.0
    );
    println!(
        "targets one evaluation thread can evaluate per {interval_s}s tick: {:.0}",
        interval_s / evaluate.as_secs_f64()
    );
}
