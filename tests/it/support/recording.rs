//! A deterministic vLLM V1 recording for the oracle: two targets, two data-parallel
//! `engine` ranks each, jittered scrape times (never on a whole second, so never on a
//! window edge), one missed scrape and one rank restart. The same numbers come out as
//! text expositions (what `goodput record` writes), as OpenMetrics with timestamps (what
//! promtool backfills) and as canonical snapshots (what the window store holds).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use goodput::canonical::{
    Bucket, CounterKind, CounterValue, Engine, FinishReason, GaugeKind, Histogram, HistogramKind, ModelSnapshot, Shard,
    Snapshot,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal};

/// vLLM V1 latency families, their canonical kind and finite bucket bounds.
pub const HISTS: [(&str, HistogramKind, &[f64]); 4] = [
    (
        "vllm:time_to_first_token_seconds",
        HistogramKind::Ttft,
        &[
            0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
            80.0, 160.0, 640.0, 2560.0,
        ],
    ),
    (
        "vllm:request_time_per_output_token_seconds",
        HistogramKind::Tpot,
        &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0],
    ),
    (
        "vllm:inter_token_latency_seconds",
        HistogramKind::Itl,
        &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0],
    ),
    (
        "vllm:e2e_request_latency_seconds",
        HistogramKind::E2e,
        &[
            0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0,
        ],
    ),
];
pub const PROMPT: &str = "vllm:prompt_tokens";
pub const GENERATION: &str = "vllm:generation_tokens";
pub const SUCCESS: &str = "vllm:request_success";
pub const KV: &str = "vllm:kv_cache_usage_perc";
const REASONS: [&str; 2] = ["stop", "length"];

/// One engine rank's cumulative state.
#[derive(Debug, Clone)]
pub struct Rank {
    pub created: f64,
    /// Cumulative bucket counts per histogram, the last one for +Inf.
    pub buckets: [Vec<f64>; 4],
    pub sums: [f64; 4],
    pub prompt: f64,
    pub generation: f64,
    pub finished: [f64; 2],
    pub kv: f64,
}

impl Rank {
    fn new(created: f64) -> Rank {
        Rank {
            created,
            buckets: HISTS.map(|(_, _, les)| vec![0.0; les.len() + 1]),
            sums: [0.0; 4],
            prompt: 0.0,
            generation: 0.0,
            finished: [0.0; 2],
            kv: 0.0,
        }
    }

    fn observe(&mut self, h: usize, x: f64) {
        for (j, le) in HISTS[h].2.iter().chain([f64::INFINITY].iter()).enumerate() {
            if x <= *le {
                self.buckets[h][j] += 1.0;
            }
        }
        self.sums[h] += x;
    }
}

#[derive(Debug, Clone)]
pub struct Scrape {
    pub t_ms: i64,
    pub process_start: f64,
    pub ranks: Vec<Rank>,
}

#[derive(Debug, Clone)]
pub struct TargetRec {
    pub name: String,
    pub model: String,
    pub scrapes: Vec<Scrape>,
}

/// 2026-01-01T00:00:00Z.
pub const BASE_MS: i64 = 1_767_225_600_000;
pub const INTERVAL_MS: i64 = 5_000;

/// Builds the recording: `scrapes` per target, target `a` misses scrape `scrapes*2/5`,
/// target `b`'s rank 1 restarts just before scrape `scrapes*3/5`.
pub fn generate(scrapes: usize, seed: u64) -> Vec<TargetRec> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for (ti, (name, model, phase_ms)) in
        [("a", "meta-llama/Llama-3.1-8B-Instruct", 1_317), ("b", "qwen", 3_871)].into_iter().enumerate()
    {
        let process_start = (BASE_MS - 600_000) as f64 / 1000.0;
        let mut ranks: Vec<Rank> = (0..2).map(|_| Rank::new(process_start + 1.5)).collect();
        let mut recs = Vec::new();
        for i in 0..scrapes {
            let jitter = rng.random_range(-450..=450);
            let mut t = BASE_MS + phase_ms + i as i64 * INTERVAL_MS + jitter;
            if t % 1000 == 0 {
                t += 1; // never on a whole second: both 2.x [t−w, t] and 3.x (t−w, t] agree
            }
            let restart = ti == 1 && i == scrapes * 3 / 5;
            // Load swings over the recording so quantiles and rates move.
            let load = 1.0 + (i as f64 / 25.0).sin();
            for (r, rank) in ranks.iter_mut().enumerate() {
                if restart && r == 1 {
                    *rank = Rank::new(t as f64 / 1000.0 - 0.5);
                    rank.kv = 0.05;
                    continue; // the fresh process has served nothing yet
                }
                let n = rng.random_range(0..=(3.0 * load + 2.0 * r as f64) as u32 + 1);
                simulate_requests(rank, n, load, &mut rng);
                rank.kv = (0.55 + 0.2 * load + rng.random_range(-0.08..0.08)).clamp(0.0, 1.0);
            }
            let missed = ti == 0 && i == scrapes * 2 / 5;
            if !missed {
                recs.push(Scrape { t_ms: t, process_start, ranks: ranks.clone() });
            }
        }
        out.push(TargetRec { name: name.into(), model: model.into(), scrapes: recs });
    }
    out
}

fn simulate_requests(rank: &mut Rank, n: u32, load: f64, rng: &mut ChaCha8Rng) {
    let ttft = LogNormal::new((0.08 * load).ln(), 0.9).expect("valid lognormal");
    let tpot = LogNormal::new((0.03 * load).ln(), 0.5).expect("valid lognormal");
    for _ in 0..n {
        let first = ttft.sample(rng);
        let per_token = tpot.sample(rng);
        let out_tokens = rng.random_range(2..400u32);
        rank.observe(0, first);
        rank.observe(1, per_token);
        for _ in 0..rng.random_range(1..6) {
            rank.observe(2, per_token * rng.random_range(0.5..2.0));
        }
        rank.observe(3, first + per_token * (out_tokens - 1) as f64);
        rank.prompt += rng.random_range(50..3000u32) as f64;
        rank.generation += out_tokens as f64;
        rank.finished[usize::from(rng.random_bool(0.2))] += 1.0;
    }
}

fn num(v: f64) -> String {
    if v == f64::INFINITY { "+Inf".into() } else { format!("{v:?}") }
}

/// One series line body without value: `name{labels}`.
fn series(name: &str, labels: &[(&str, String)]) -> String {
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{name}{{{}}}", l.join(","))
}

/// Every (family, type, [(sample name, labels, value)]) of one scrape, in exposition order.
#[allow(clippy::type_complexity)]
fn families(t: &TargetRec, s: &Scrape) -> Vec<(String, &'static str, Vec<(String, Vec<(&'static str, String)>, f64)>)> {
    let mut out = Vec::new();
    let base = |r: usize| vec![("engine", r.to_string()), ("model_name", t.model.clone())];
    for (h, (name, _, les)) in HISTS.iter().enumerate() {
        let mut lines = Vec::new();
        for (r, rank) in s.ranks.iter().enumerate() {
            for (j, le) in les.iter().chain([f64::INFINITY].iter()).enumerate() {
                let mut l = base(r);
                l.insert(1, ("le", num(*le)));
                lines.push((format!("{name}_bucket"), l, rank.buckets[h][j]));
            }
            lines.push((format!("{name}_count"), base(r), rank.buckets[h][les.len()]));
            lines.push((format!("{name}_sum"), base(r), rank.sums[h]));
        }
        out.push((name.to_string(), "histogram", lines));
        let created =
            s.ranks.iter().enumerate().map(|(r, k)| (format!("{name}_created"), base(r), k.created)).collect();
        out.push((format!("{name}_created"), "gauge", created));
    }
    for (fam, get) in [(PROMPT, 0usize), (GENERATION, 1)] {
        let lines = s
            .ranks
            .iter()
            .enumerate()
            .map(|(r, k)| (format!("{fam}_total"), base(r), if get == 0 { k.prompt } else { k.generation }))
            .collect();
        out.push((fam.to_string(), "counter", lines));
    }
    let mut lines = Vec::new();
    for (r, k) in s.ranks.iter().enumerate() {
        for (i, reason) in REASONS.iter().enumerate() {
            let mut l = base(r);
            l.insert(1, ("finished_reason", reason.to_string()));
            lines.push((format!("{SUCCESS}_total"), l, k.finished[i]));
        }
    }
    out.push((SUCCESS.to_string(), "counter", lines));
    let kv = s.ranks.iter().enumerate().map(|(r, k)| (KV.to_string(), base(r), k.kv)).collect();
    out.push((KV.to_string(), "gauge", kv));
    out.push((
        "process_start_time_seconds".into(),
        "gauge",
        vec![("process_start_time_seconds".into(), vec![], s.process_start)],
    ));
    out
}

/// The text exposition vLLM would serve for one scrape (format 0.0.4).
pub fn exposition(t: &TargetRec, s: &Scrape) -> String {
    let mut body = String::new();
    for (fam, typ, lines) in families(t, s) {
        let declared = if typ == "counter" { format!("{fam}_total") } else { fam.clone() };
        let _ = writeln!(body, "# HELP {declared} {fam} (oracle recording).\n# TYPE {declared} {typ}");
        for (name, labels, v) in lines {
            let _ = writeln!(body, "{} {}", if labels.is_empty() { name } else { series(&name, &labels) }, num(v));
        }
    }
    body
}

/// Writes `dir/<target>/<unix-millis>.prom`, the layout `goodput record` produces.
pub fn write_recording(dir: &Path, targets: &[TargetRec]) -> std::io::Result<()> {
    for t in targets {
        let d = dir.join(&t.name);
        std::fs::create_dir_all(&d)?;
        for s in &t.scrapes {
            std::fs::write(d.join(format!("{}.prom", s.t_ms)), exposition(t, s))?;
        }
    }
    Ok(())
}

/// One OpenMetrics file with timestamps in seconds for `promtool tsdb
/// create-blocks-from openmetrics`: each family once, its series in time order, the
/// labels Prometheus's scrape would add (`target`, `instance`), and `# EOF`.
pub fn openmetrics(targets: &[TargetRec]) -> String {
    let mut fams: BTreeMap<String, (&'static str, Vec<String>)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for t in targets {
        for s in &t.scrapes {
            let ts = format!("{}.{:03}", s.t_ms / 1000, s.t_ms % 1000);
            // `_created` gauges are for the daemon; Prometheus's queries do not read them.
            for (fam, typ, lines) in families(t, s).into_iter().filter(|f| !f.0.ends_with("_created")) {
                let entry = fams.entry(fam.clone()).or_insert_with(|| {
                    order.push(fam.clone());
                    (typ, Vec::new())
                });
                for (name, mut labels, v) in lines {
                    labels.insert(0, ("target", t.name.clone()));
                    labels.insert(1, ("instance", t.name.clone()));
                    entry.1.push(format!("{} {} {ts}", series(&name, &labels), num(v)));
                }
            }
        }
    }
    let mut out = String::new();
    for fam in order {
        let (typ, lines) = &fams[&fam];
        let _ = writeln!(out, "# TYPE {fam} {typ}");
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The canonical snapshot of one scrape, built from the same numbers.
pub fn snapshot(t: &TargetRec, s: &Scrape) -> Arc<Snapshot> {
    let mut m = ModelSnapshot::default();
    for (r, rank) in s.ranks.iter().enumerate() {
        let key = format!("engine=\"{r}\"");
        for (h, (_, kind, les)) in HISTS.iter().enumerate() {
            let buckets = les
                .iter()
                .chain([f64::INFINITY].iter())
                .zip(&rank.buckets[h])
                .map(|(&le, &count)| Bucket { le, count })
                .collect();
            let value = Histogram { buckets, sum: rank.sums[h], count: rank.buckets[h][les.len()] };
            m.histograms.entry(*kind).or_default().push(Shard { key: key.clone(), created: Some(rank.created), value });
        }
        for (kind, v) in [(CounterKind::PromptTokens, rank.prompt), (CounterKind::GenerationTokens, rank.generation)] {
            let value = CounterValue { value: v, reason: None };
            m.counters.entry(kind).or_default().push(Shard { key: key.clone(), created: Some(rank.created), value });
        }
        for (i, reason) in REASONS.iter().enumerate() {
            let value = CounterValue { value: rank.finished[i], reason: Some(FinishReason::from_label(reason)) };
            m.counters.entry(CounterKind::RequestsFinished).or_default().push(Shard {
                key: format!("{key},finished_reason=\"{reason}\""),
                created: Some(rank.created),
                value,
            });
        }
        m.gauges.entry(GaugeKind::KvCacheUsage).or_default().push(Shard { key, created: None, value: rank.kv });
    }
    Arc::new(Snapshot {
        engine: Engine::Vllm,
        models: BTreeMap::from([(t.model.clone(), m)]),
        process_start: Some(s.process_start),
        families: 0,
        samples: 0,
        warnings: Vec::new(),
    })
}
