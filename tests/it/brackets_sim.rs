//! The engine-side exact value lies inside the histograms' bracket whenever both saw the same
//! requests (docs/accuracy.md#brackets-and-sources), at every tick of a simulator run.
//!
//! The simulator records a run offline (steady, ramp into overload, bursts) with every
//! request's truth. The recording is replayed through goodput's evaluation every 5 s. For
//! each tick and window, the requests the histograms' increase holds (finished after the
//! window's first scrape and no later than its last) are handed to a request store as the
//! engine's spans (`source="otlp"`), judged there as spans are, and their exact joint
//! attainment must lie inside the joint bracket the daemon exported from the histograms.

use crate::accuracy_support;

use std::time::Duration;

use accuracy_support::truth::{self, Populations, Request, Span};
use accuracy_support::{Case, SCRAPE_INTERVAL_S, WINDOWS_S, slos};
use goodput::adapt::EngineHint;
use goodput::duration::Window;
use goodput::evaluate::{EvalConfig, KvThresholds};
use goodput::replay::{Recording, ReplayTarget, replay};
use goodput::report::SloStatus;
use goodput::request::{RequestRecord, RequestStore, Source, Status, StoreConfig, TokenCount};
use goodput::slo::Clause;
use goodput_sim::Profile;
use goodput_sim::offline::{self, Options};

const TARGET: &str = "sim";

/// One request as the engine's span tells it, finishing at `finished_unix`.
fn span(r: &Request, model: &str, finished_unix: f64) -> RequestRecord {
    RequestRecord {
        source: Source::Otlp,
        target: TARGET.into(),
        model: model.into(),
        status: if r.failed { Status::ClientAbort } else { Status::Ok },
        finished_unix,
        e2e_s: r.e2e_s,
        ttft_s: r.ttft_s,
        tpot_s: Some(r.tpot_s).filter(|v| v.is_finite()),
        prompt_tokens: None,
        output_tokens: Some(TokenCount { value: r.output_tokens as u32, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

#[test]
fn spans_of_the_histograms_requests_lie_inside_the_bracket_at_every_tick() {
    let cases = [
        Case { profile: Profile::Steady, seed: 21, engines: 1, secs: 360 },
        Case { profile: Profile::Ramp, seed: 22, engines: 2, secs: 420 },
        Case { profile: Profile::Burst, seed: 23, engines: 1, secs: 360 },
    ];
    let (mut checked, mut outside) = (0usize, Vec::new());
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let cfg = case.config();
        let opts = Options {
            duration: Duration::from_secs(case.secs),
            scrape_interval: Duration::from_secs(SCRAPE_INTERVAL_S),
        };
        offline::run(&cfg, dir.path(), &opts).expect("offline run");
        let start_ms = cfg.start_unix_s as i64 * 1000;
        let rec = Recording::scan(dir.path()).expect("scan");
        let scrapes: Vec<i64> = rec.targets.iter().find(|t| t.0 == TARGET).unwrap().1.iter().map(|s| s.0).collect();
        let rel_s: Vec<f64> = scrapes.iter().map(|&ms| (ms - start_ms) as f64 / 1000.0).collect();
        let truth = truth::load(dir.path(), TARGET, start_ms as f64 / 1000.0, &rel_s);
        let eval = EvalConfig {
            windows: WINDOWS_S.iter().map(|&s| Window::from_secs(s)).collect(),
            quantiles: vec![0.5],
            kv: KvThresholds::default(),
            slos: slos(),
            ..EvalConfig::default()
        };
        let targets = [ReplayTarget { name: TARGET.into(), hint: EngineHint::Auto, default_model: String::new() }];
        for frame in replay(dir.path(), &rec, &targets, eval, 5_000).expect("replay") {
            let t = frame.t_ms;
            let Some(model) = frame.report.targets[0].models.first() else { continue };
            for (wi, w) in model.windows.iter().enumerate() {
                let window_s = WINDOWS_S[wi];
                let inside: Vec<usize> = (0..scrapes.len())
                    .filter(|&i| scrapes[i] > t - window_s as i64 * 1000 && scrapes[i] <= t)
                    .collect();
                let (Some(&first), Some(&last)) = (inside.first(), inside.last()) else { continue };
                let pop = Populations::new(&truth, Span { first, last });
                if pop.finished.is_empty() {
                    continue;
                }
                // The spans of exactly those requests, all inside the store's window.
                let mut store = RequestStore::new(StoreConfig {
                    targets: vec![TARGET.into()],
                    windows: vec![Window::from_secs(window_s)],
                    alert_only: Vec::new(),
                    quantiles: vec![0.5],
                    slos: slos(),
                    max_records_per_series: 1_000_000,
                    max_series_per_target: 4,
                });
                let at = t as f64 / 1000.0 - 1.0;
                store.ingest(pop.finished.iter().map(|r| span(r, &model.model, at)), t);
                let series = store.evaluate(t);
                let otlp = &series[0].windows[0].1;
                for (h, o) in w.slos.iter().zip(&otlp.slos) {
                    assert_eq!(h.slo, o.slo);
                    let (SloStatus::Evaluated(hv), SloStatus::Evaluated(ov)) = (&h.status, &o.status) else { continue };
                    // Every request judged: the spans' population is the histograms'.
                    assert_eq!(o.counts[&Clause::Joint].population, pop.finished.len() as u64, "{}", h.slo);
                    let (b, exact) = (hv.attainment[&Clause::Joint], ov.attainment[&Clause::Joint]);
                    assert!(exact.is_exact());
                    checked += 1;
                    if exact.estimate < b.lower - 1e-9 || exact.estimate > b.upper + 1e-9 {
                        outside.push(format!(
                            "{} seed {} t={}s {window_s}s {}: spans {} outside [{}, {}]",
                            case.profile_name(),
                            case.seed,
                            (t - start_ms) / 1000,
                            h.slo,
                            exact.estimate,
                            b.lower,
                            b.upper
                        ));
                    }
                }
            }
        }
    }
    eprintln!("{checked} ticks × windows × SLOs checked");
    assert!(checked > 300, "only {checked} checks");
    assert!(outside.is_empty(), "{} of {checked} outside:\n{}", outside.len(), outside.join("\n"));
}
