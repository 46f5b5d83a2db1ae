//! One target's error-budget ledgers as a `state_dir` snapshot keeps them
//! (docs/architecture.md#state-that-survives-restarts).
//!
//! A ledger is restored only into the SLO with the same definition and period (its rows
//! are that SLO's clauses, its buckets that period's); a changed SLO starts its budget
//! afresh. A ledger of the five-minute buckets earlier versions kept comes back as hourly
//! buckets, every count kept that is still in the period. The anchor (the newest scrape counted) comes back with the ledgers, so the next
//! feed counts what the histograms gained across the restart, once.

use serde::{Deserialize, Serialize};

use super::ledger::Ledger;
use super::tally::{REQUEST_WIDTH, histogram_width};
use super::{Anchor, BudgetBook, BudgetSpec, Key};
use crate::request::DataSource;

/// One target's ledgers and where its histogram ledgers counted up to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedBudgets {
    /// `(newest scrape counted, last read)`, Unix ms.
    anchor: Option<(i64, i64)>,
    ledgers: Vec<SavedLedger>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedLedger {
    model: String,
    /// The SLO and period's definition.
    spec: String,
    source: DataSource,
    ledger: Ledger,
}

impl SavedBudgets {
    pub fn is_empty(&self) -> bool {
        self.ledgers.is_empty() && self.anchor.is_none()
    }
}

fn definition(spec: &BudgetSpec) -> String {
    format!("{spec:?}")
}

impl BudgetBook {
    /// `target`'s ledgers and anchor.
    pub fn saved(&self, target: &str) -> SavedBudgets {
        let ledgers = self
            .ledgers
            .iter()
            .filter(|(k, _)| k.target == target)
            .map(|(k, l)| SavedLedger {
                model: k.model.clone(),
                spec: definition(&self.specs[k.slo]),
                source: k.source,
                ledger: l.clone(),
            })
            .collect();
        SavedBudgets { anchor: self.anchors.get(target).map(|a| (a.scrape_ms, a.fed_ms)), ledgers }
    }

    /// Takes back `target`'s saved ledgers whose SLO is configured with the same definition
    /// and period (on this version's buckets: [`Ledger::fit`]); returns how many were taken
    /// and how many were dropped.
    pub fn restore(&mut self, target: &str, saved: SavedBudgets) -> (usize, usize) {
        if !self.targets.iter().any(|t| t == target) {
            return (0, saved.ledgers.len());
        }
        let (mut taken, mut dropped) = (0, 0);
        for s in saved.ledgers {
            let slo = self.specs.iter().position(|spec| definition(spec) == s.spec);
            // A ledger of an earlier version's finer buckets is moved onto this grid.
            let fitted = slo.and_then(|i| {
                let spec = &self.specs[i];
                let width = match s.source {
                    DataSource::Metrics => histogram_width(&spec.slo),
                    DataSource::Tap | DataSource::Otlp => REQUEST_WIDTH,
                };
                Some((i, s.ledger.fit(width, spec.buckets(), spec.bucket_ms())?))
            });
            match fitted {
                Some((slo, ledger)) => {
                    let key = Key { target: target.to_string(), model: s.model, slo, source: s.source };
                    self.ledgers.entry(key).or_insert(ledger);
                    taken += 1;
                }
                None => dropped += 1,
            }
        }
        if let Some((scrape_ms, fed_ms)) = saved.anchor {
            self.anchors.entry(target.to_string()).or_insert(Anchor { scrape_ms, fed_ms });
        }
        (taken, dropped)
    }
}
