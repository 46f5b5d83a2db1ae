//! The request path in the evaluation loop: the [`Inbox`] the tap and the OTLP receiver push
//! records into, drained each tick into the pure [`RequestStore`], whose windows then join
//! the tick's report before the alert rules read it (docs/architecture.md#the-request-path).

use std::sync::{Arc, Mutex};

use crate::budget::BudgetBook;
use crate::config::Config;
use crate::report::Report;
use crate::request::{
    DEFAULT_MAX_RECORDS_PER_SERIES, DEFAULT_MAX_SERIES_PER_TARGET, InboxCounts, RequestPathReport, RequestStore,
    SeriesWindows, StoreConfig, attach,
};
use crate::requests::Inbox;

/// The inbox and the store behind it.
pub struct RequestPath {
    inbox: Inbox,
    store: Arc<Mutex<RequestStore>>,
    /// The error-budget book, which counts each drained record too (super::budget).
    budget: Option<Arc<Mutex<BudgetBook>>>,
}

impl RequestPath {
    /// The store for `config`'s targets, windows and SLOs, fed from `inbox`.
    pub fn new(config: &Config, inbox: Inbox) -> RequestPath {
        let store = RequestStore::new(StoreConfig {
            targets: config.targets.iter().map(|t| t.name.clone()).collect(),
            windows: config.eval_windows(),
            quantiles: config.eval_quantiles(),
            slos: config.slos.clone(),
            max_records_per_series: DEFAULT_MAX_RECORDS_PER_SERIES,
            max_series_per_target: DEFAULT_MAX_SERIES_PER_TARGET,
        });
        RequestPath { inbox, store: Arc::new(Mutex::new(store)), budget: None }
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
    /// windows and puts them into `report`. The store's work runs on the blocking pool: a
    /// flood's worth of records must not hold up the runtime's other tasks.
    pub async fn apply(&self, report: &mut Report) {
        let records = self.inbox.drain();
        let stats = self.inbox.stats();
        let (store, budget) = (self.store.clone(), self.budget.clone());
        let now_ms = report.t_ms;
        let work = tokio::task::spawn_blocking(move || -> (Vec<SeriesWindows>, RequestPathReport) {
            if let Some(b) = budget {
                b.lock().unwrap_or_else(|e| e.into_inner()).add_records(&records);
            }
            let mut s = store.lock().unwrap_or_else(|e| e.into_inner());
            s.ingest(records, now_ms);
            (s.evaluate(now_ms), s.counters())
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
