//! Error budgets in the evaluation loop (docs/metrics.md#error-budget-over-a-period): the
//! pure [`BudgetBook`] takes each target's histogram increases once a minute and every
//! request record the tick drains (through [`RequestPath`](super::requests::RequestPath)),
//! and each report carries every budget.

use std::sync::{Arc, Mutex};

use super::evaluator::Roster;
use crate::budget::BudgetBook;
use crate::config::Config;
use crate::report::Report;

/// The book and the targets whose windows feed it.
pub struct Budgets {
    book: Arc<Mutex<BudgetBook>>,
    /// `None` without SLOs: there is nothing to count.
    targets: Option<Roster>,
}

impl Budgets {
    pub fn new(config: &Config, targets: Roster) -> Budgets {
        let names = config.targets.iter().map(|t| t.name.clone()).collect();
        let book = BudgetBook::new(config.budget_specs(), names);
        let targets = (!config.slos.is_empty()).then_some(targets);
        Budgets { book: Arc::new(Mutex::new(book)), targets }
    }

    /// The book, for the request path to count the records it drains.
    pub fn book(&self) -> Arc<Mutex<BudgetBook>> {
        self.book.clone()
    }

    /// Feeds the targets' histograms and puts every budget into `report`, on the blocking
    /// pool: a large fleet's range reads take milliseconds. Nothing to do without SLOs.
    pub async fn apply(&self, report: &mut Report) {
        let Some(roster) = &self.targets else { return };
        // A vanished target is not fed: its windows stand still until it is back or dropped.
        let targets: Vec<_> = roster.runtimes().into_iter().filter(|rt| rt.vanished_ms().is_none()).collect();
        let (book, now_ms) = (self.book.clone(), report.t_ms);
        let work = tokio::task::spawn_blocking(move || {
            let mut book = book.lock().unwrap_or_else(|e| e.into_inner());
            for rt in &targets {
                // The target's lock is held for the read of one minute of its windows.
                let st = rt.lock();
                book.feed_metrics(&rt.config.name, &st.windows, now_ms);
            }
            book.report(now_ms)
        });
        match work.await {
            Ok(budgets) => report.budgets = budgets,
            Err(e) => tracing::error!("error budget update failed; this tick shows no budgets: {e}"),
        }
    }
}
