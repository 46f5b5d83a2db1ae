//! Error budgets across a config reload (docs/metrics.md#error-budget-over-a-period).
//!
//! The one rule: a ledger's counts are kept exactly as long as they still mean what the
//! SLO asks. An SLO whose thresholds, scope and period are unchanged keeps its ledgers,
//! whatever happened to its objective: a ledger counts requests (good ones per clause,
//! and jointly), and the objective only turns those counts into a budget when it is read,
//! so the new objective applies to the whole period at once. An SLO whose thresholds,
//! clauses, scope or period changed has its period restart at the reload: counts judged
//! against the old limits cannot be re-judged (the scrapes behind them are long gone), so
//! its ledgers start empty and its coverage from 0. A removed SLO's ledgers are dropped.

use std::collections::BTreeMap;

use super::{BudgetBook, BudgetSpec, Key};

/// What a reload did to one SLO's ledgers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ledgers {
    /// Unchanged, or only its objective changed: every count is kept.
    Kept,
    /// A new SLO: its ledgers start with the next count.
    Started,
    /// Thresholds, clauses, scope or period changed: the period starts again, empty.
    Restarted,
    /// The SLO is gone, and its ledgers with it.
    Dropped,
}

impl Ledgers {
    pub fn as_str(self) -> &'static str {
        match self {
            Ledgers::Kept => "kept",
            Ledgers::Started => "started",
            Ledgers::Restarted => "restarted",
            Ledgers::Dropped => "dropped",
        }
    }
}

/// Whether `new` counts the same things as `old`: everything but the objective equal.
pub fn counts_alike(old: &BudgetSpec, new: &BudgetSpec) -> bool {
    let mut same = old.slo.clone();
    same.objective = new.slo.objective;
    old.period == new.period && same == new.slo
}

impl BudgetBook {
    /// Takes the SLOs and targets of a new config, keeping, restarting or dropping each
    /// SLO's ledgers by the rule above; returns each SLO's fate by name, the new config's
    /// SLOs in order, then the removed ones.
    pub fn reconfigure(&mut self, specs: Vec<BudgetSpec>, targets: Vec<String>) -> Vec<(String, Ledgers)> {
        let mut fates = Vec::new();
        // Old index → new index of every SLO whose ledgers are kept.
        let mut moved: BTreeMap<usize, usize> = BTreeMap::new();
        for (i, n) in specs.iter().enumerate() {
            let fate = match self.specs.iter().position(|o| o.slo.name == n.slo.name) {
                Some(j) if counts_alike(&self.specs[j], n) => {
                    moved.insert(j, i);
                    Ledgers::Kept
                }
                Some(_) => Ledgers::Restarted,
                None => Ledgers::Started,
            };
            fates.push((n.slo.name.clone(), fate));
        }
        for o in &self.specs {
            if !specs.iter().any(|n| n.slo.name == o.slo.name) {
                fates.push((o.slo.name.clone(), Ledgers::Dropped));
            }
        }
        let ledgers = std::mem::take(&mut self.ledgers);
        self.ledgers =
            ledgers.into_iter().filter_map(|(k, l)| moved.get(&k.slo).map(|&slo| (Key { slo, ..k }, l))).collect();
        self.specs = specs;
        self.targets = targets;
        fates
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::request::{RequestRecord, Source, Status, TokenCount};
    use crate::slo::{Objective, Scope, Slo};

    fn spec(name: &str, ttft_ms: u64, objective: f64) -> BudgetSpec {
        BudgetSpec {
            slo: Slo {
                name: name.into(),
                ttft: Some(Duration::from_millis(ttft_ms)),
                tpot: None,
                e2e: None,
                objective: Objective::new(objective).unwrap(),
                scope: Scope::all(),
            },
            period: Duration::from_secs(86_400),
        }
    }

    fn record(t_ms: i64, ttft: f64) -> RequestRecord {
        RequestRecord {
            source: Source::Tap,
            target: "t".into(),
            model: "m".into(),
            status: Status::Ok,
            finished_unix: t_ms as f64 / 1000.0,
            e2e_s: 1.0,
            ttft_s: Some(ttft),
            tpot_s: Some(0.01),
            prompt_tokens: None,
            output_tokens: Some(TokenCount { value: 10, exact: true }),
            itl: Vec::new(),
            engine: None,
            request_id: None,
        }
    }

    fn requests(book: &mut BudgetBook, slo: &str, now_ms: i64) -> Option<(f64, f64, f64)> {
        let r = book.report(now_ms).into_iter().find(|b| b.slo == slo)?;
        let v = r.values?;
        Some((v.requests, r.objective, r.coverage))
    }

    #[test]
    fn an_objective_change_keeps_the_counts_and_a_threshold_change_restarts_the_period() {
        let t0 = 1_700_000_100_000;
        let mut book = BudgetBook::new(vec![spec("a", 200, 0.99), spec("b", 200, 0.99)], vec!["t".into()]);
        let recs: Vec<_> = (0..10).map(|i| record(t0 + i * 1000, 0.1)).collect();
        book.add_records(&recs);
        let now = t0 + 60_000;
        assert_eq!(requests(&mut book, "a", now).map(|r| r.0), Some(10.0));

        // a: a new objective only; b: a new threshold; c: new; the order changes too.
        let fates =
            book.reconfigure(vec![spec("c", 100, 0.9), spec("b", 300, 0.99), spec("a", 200, 0.95)], vec!["t".into()]);
        assert_eq!(
            fates,
            [("c".into(), Ledgers::Started), ("b".into(), Ledgers::Restarted), ("a".into(), Ledgers::Kept)]
        );
        let (n, objective, coverage) = requests(&mut book, "a", now).unwrap();
        assert_eq!((n, objective), (10.0, 0.95), "the counts are kept and read against the new objective");
        assert!(coverage > 0.0);
        assert!(requests(&mut book, "b", now).is_none(), "b's period restarted empty");
        assert!(requests(&mut book, "c", now).is_none());

        book.add_records(&[record(now + 1000, 0.25)]);
        assert_eq!(requests(&mut book, "b", now + 2000).map(|r| r.0), Some(1.0), "b counts again from the reload");
        assert_eq!(requests(&mut book, "c", now + 2000).map(|r| r.0), Some(1.0));

        let fates = book.reconfigure(vec![spec("a", 200, 0.95)], vec!["t".into()]);
        assert_eq!(
            fates,
            [("a".into(), Ledgers::Kept), ("c".into(), Ledgers::Dropped), ("b".into(), Ledgers::Dropped)]
        );
        assert!(book.report(now + 2000).iter().all(|b| b.slo == "a"));
    }
}
