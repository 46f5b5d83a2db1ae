//! Error budgets in the evaluation loop (docs/metrics.md#error-budget-over-a-period): the
//! pure [`BudgetBook`] takes each target's histogram increases once a minute and every
//! request record the tick drains (through [`RequestPath`](super::requests::RequestPath)),
//! and each report carries every budget.

use std::sync::{Arc, Mutex};

use super::evaluator::Roster;
use crate::budget::BudgetBook;
use crate::budget::reload::Ledgers;
use crate::config::Config;
use crate::report::Report;

/// The book and the targets whose windows feed it.
pub struct Budgets {
    book: Arc<Mutex<BudgetBook>>,
    targets: Roster,
    /// False without SLOs: there is nothing to count.
    counting: bool,
}

impl Budgets {
    pub fn new(config: &Config, targets: Roster) -> Budgets {
        let names = config.targets.iter().map(|t| t.name.clone()).collect();
        let book = BudgetBook::new(config.budget_specs(), names);
        Budgets { book: Arc::new(Mutex::new(book)), targets, counting: !config.slos.is_empty() }
    }

    /// Takes the SLOs and targets of a reloaded config: each SLO's ledgers are kept,
    /// started, restarted or dropped by the rule of `budget::reload`; returns each SLO's
    /// fate by name.
    pub fn reconfigure(&mut self, config: &Config) -> Vec<(String, Ledgers)> {
        let names = config.targets.iter().map(|t| t.name.clone()).collect();
        self.counting = !config.slos.is_empty();
        self.book.lock().unwrap_or_else(|e| e.into_inner()).reconfigure(config.budget_specs(), names)
    }

    /// The book, for the request path to count the records it drains.
    pub fn book(&self) -> Arc<Mutex<BudgetBook>> {
        self.book.clone()
    }

    /// Feeds the targets' histograms and puts every budget into `report`, on the blocking
    /// pool: a large fleet's range reads take milliseconds. Nothing to do without SLOs.
    pub async fn apply(&self, report: &mut Report) {
        if !self.counting {
            // Without SLOs the book is empty; a reload that removed the last one leaves none.
            report.budgets.clear();
            return;
        }
        let roster = &self.targets;
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
