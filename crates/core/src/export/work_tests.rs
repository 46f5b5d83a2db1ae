//! Export's work per tick counted, not timed: the samples one report becomes, after a minute
//! and after a day of requests and error-budget counts, are as many.

use std::time::Duration;

use crate::budget::{BudgetBook, BudgetSpec, DEFAULT_PERIOD};
use crate::duration::Window;
use crate::report::{Health, ModelReport, Report, TargetReport, WindowReport};
use crate::request::{RequestRecord, RequestStore, Source, Status, StoreConfig, TokenCount, attach};
use crate::slo::{Objective, Scope, Slo};

const T0_MS: i64 = 1_700_000_100_000;
const WINDOWS: [u64; 3] = [60, 3_600, 21_600];

fn slo() -> Slo {
    Slo {
        name: "chat".into(),
        ttft: Some(Duration::from_millis(200)),
        tpot: None,
        e2e: None,
        objective: Objective::new(0.99).unwrap(),
        scope: Scope::all(),
    }
}

fn record(n: i64, t_ms: i64) -> RequestRecord {
    RequestRecord {
        source: Source::Otlp,
        target: "t".into(),
        model: "m".into(),
        status: Status::Ok,
        finished_unix: t_ms as f64 / 1000.0,
        e2e_s: 1.0,
        ttft_s: Some(0.05 + (n % 10) as f64 * 0.03),
        tpot_s: Some(0.02),
        prompt_tokens: Some(100),
        output_tokens: Some(TokenCount { value: 40, exact: true }),
        itl: Vec::new(),
        engine: None,
        request_id: None,
    }
}

/// The samples of the report of the tick after `history_ms` of one request a second.
fn samples_after(history_ms: i64) -> usize {
    let windows: Vec<Window> = WINDOWS.iter().map(|&s| Window::from_secs(s)).collect();
    let mut store = RequestStore::new(StoreConfig {
        targets: vec!["t".into()],
        windows: windows.clone(),
        alert_only: Vec::new(),
        quantiles: vec![0.5, 0.99],
        slos: vec![slo()],
        max_records_per_series: 65_536,
        max_series_per_target: 4,
    });
    let mut book = BudgetBook::new(vec![BudgetSpec { slo: slo(), period: DEFAULT_PERIOD }], vec!["t".into()]);
    let ticks = history_ms / 5_000;
    for k in 0..=ticks {
        let now = T0_MS + k * 5_000;
        let taken = store.ingest((0..5).map(|j| record(k * 5 + j, now - 4_500 + j * 1_000)), now);
        book.add_records(&taken);
    }
    let now = T0_MS + ticks * 5_000;
    let mut report = Report {
        t_ms: now,
        targets: vec![TargetReport {
            target: "t".into(),
            engine: None,
            health: Health { up: true, ..Health::default() },
            models: vec![ModelReport {
                model: "m".into(),
                windows: windows.iter().map(|&w| WindowReport { coverage: 1.0, ..WindowReport::empty(w) }).collect(),
            }]
            .into(),
        }],
        ..Report::default()
    };
    attach(&mut report, store.evaluate(now), store.counters());
    report.budgets = book.report(now);
    super::walk::samples(&report).len()
}

/// docs/footprint.md: a tick's export does not grow with the history behind its values.
#[test]
fn a_report_after_a_day_exports_as_many_samples_as_after_a_minute() {
    let minute = samples_after(60_000);
    let day = samples_after(86_400_000);
    // Three windows of request values, four budget families, the counters.
    assert!(minute > 3 * 10, "{minute} samples");
    assert!(day as f64 <= 1.25 * minute as f64, "a day {day}, a minute {minute}");
    eprintln!("samples exported after a minute {minute}, after a day {day}");
}
