//! The request path in the evaluation loop: the [`Inbox`] the tap and the OTLP receiver push
//! records into, drained each tick into the pure [`RequestStore`], whose windows then join
//! the tick's report before the alert rules read it (docs/architecture.md#the-request-path).

use std::sync::{Arc, Mutex};

use crate::budget::BudgetBook;
use crate::config::Config;
use crate::inbox::Inbox;
use crate::report::Report;
use crate::request::{
    DEFAULT_MAX_RECORDS_PER_SERIES, DEFAULT_MAX_SERIES_PER_TARGET, InboxCounts, Rebuilt, RequestPathReport,
    RequestStore, SeriesWindows, StoreConfig, attach,
};

/// The inbox and the store behind it.
pub struct RequestPath {
    inbox: Inbox,
    store: Arc<Mutex<RequestStore>>,
    /// Each target's name and `model` setting.
    configured: Arc<Vec<(String, String)>>,
    /// The error-budget book, which counts each drained record too (super::budget).
    budget: Option<Arc<Mutex<BudgetBook>>>,
}

impl RequestPath {
    /// The store for `config`'s targets, windows and SLOs, fed from `inbox`.
    pub fn new(config: &Config, inbox: Inbox) -> RequestPath {
        let store = RequestStore::new(store_config(config));
        let configured = config.targets.iter().map(|t| (t.name.clone(), t.model.clone())).collect();
        RequestPath { inbox, store: Arc::new(Mutex::new(store)), configured: Arc::new(configured), budget: None }
    }

    /// Takes the targets, windows and SLOs of a reloaded config at `now_ms`: the requests
    /// held are judged again under them (`request::reload`), on the blocking pool.
    pub async fn reconfigure(&mut self, config: &Config, now_ms: i64) -> Rebuilt {
        self.configured = Arc::new(config.targets.iter().map(|t| (t.name.clone(), t.model.clone())).collect());
        let (store, cfg) = (self.store.clone(), store_config(config));
        let work = tokio::task::spawn_blocking(move || {
            store.lock().unwrap_or_else(|e| e.into_inner()).reconfigure(cfg, now_ms)
        });
        work.await.unwrap_or_else(|e| {
            tracing::error!("the request store could not take the reloaded config: {e}");
            Rebuilt::default()
        })
    }

    /// The store, for the `state_dir` snapshot to save and restore.
    pub fn store(&self) -> Arc<Mutex<RequestStore>> {
        self.store.clone()
    }

    /// This path counting every drained record into `book` as well.
    pub fn with_budget(mut self, book: Arc<Mutex<BudgetBook>>) -> RequestPath {
        self.budget = Some(book);
        self
    }

    /// Drains the inbox into the store at the report's instant, evaluates the store's
    /// windows and puts them into `report`. The models each target's evaluation found in
    /// its scrapes tell the store which models it serves (docs/request-path.md#which-series-a-record-joins).
    /// The store's work runs on the blocking pool: a flood's worth of records must not hold
    /// up the runtime's other tasks.
    pub async fn apply(&self, report: &mut Report) {
        let records = self.inbox.drain();
        let stats = self.inbox.stats();
        let (store, budget, configured) = (self.store.clone(), self.budget.clone(), self.configured.clone());
        let scraped: Vec<(String, Vec<String>)> = report
            .targets
            .iter()
            .map(|t| (t.target.clone(), t.models.iter().map(|m| m.model.clone()).collect()))
            .collect();
        let now_ms = report.t_ms;
        let work = tokio::task::spawn_blocking(move || -> (Vec<SeriesWindows>, RequestPathReport) {
            let mut s = store.lock().unwrap_or_else(|e| e.into_inner());
            for (target, models) in scraped {
                if let Some((_, model)) = configured.iter().find(|(name, _)| *name == target) {
                    s.set_models(&target, model, models);
                }
            }
            let taken = s.ingest(records, now_ms);
            let out = (s.evaluate(now_ms), s.counters());
            drop(s);
            // The book counts what the store took, under the same model names.
            if let Some(b) = budget {
                b.lock().unwrap_or_else(|e| e.into_inner()).add_records(&taken);
            }
            out
        });
        match work.await {
            Ok((windows, mut counters)) => {
                counters.inbox = Some(InboxCounts { accepted: stats.accepted, dropped: stats.dropped });
                attach(report, windows, counters);
            }
            Err(e) => {
                tracing::error!("request store evaluation failed; this tick shows no request-derived values: {e}")
            }
        }
    }
}

/// What the store evaluates for `config` (examples/fill_state builds its stores with it too,
/// so that they restore into the daemon's).
pub fn store_config(config: &Config) -> StoreConfig {
    StoreConfig {
        targets: config.targets.iter().map(|t| t.name.clone()).collect(),
        windows: config.eval_windows(),
        alert_only: config.alert_only_windows().into_iter().map(|a| (a.window, a.quantiles)).collect(),
        quantiles: config.eval_quantiles(),
        slos: config.slos.clone(),
        max_records_per_series: DEFAULT_MAX_RECORDS_PER_SERIES,
        max_series_per_target: DEFAULT_MAX_SERIES_PER_TARGET,
    }
}
