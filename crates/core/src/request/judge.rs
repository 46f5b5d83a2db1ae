//! One request against one SLO: each clause good, bad, possibly good, or unobservable, and
//! the counts a window adds them up into (docs/architecture.md#exact-attainment-from-requests).
//!
//! - A clause is **unobservable** when the source could not measure it: a non-streaming
//!   response has no TTFT and no TPOT. Such a request is left out of that clause's
//!   population and, if it succeeded, out of the joint population (it is counted, as
//!   `unobservable`). A failed request is in the joint population whatever it lacks: it is
//!   known not to be good.
//! - A TPOT measured with an inexact token count (events counted, no `usage`) is an upper
//!   bound on the true TPOT. At or under the limit it is good; over the limit it is only
//!   **possibly** good. Lower attainment counts it bad, upper counts it good.

use super::compact::Compact;
use super::record::RequestRecord;
pub use crate::report::request::ClauseCounts;
use crate::slo::{Clause, Slo};

/// What a judgement reads of a request: the record as a producer measured it, or the
/// store's compact copy of it. Both give the same numbers, so [`judge`] is the one place
/// where a request is found good or not, wherever it is judged.
pub trait Measured {
    fn ttft(&self) -> Option<f64>;
    fn tpot(&self) -> Option<f64>;
    fn e2e(&self) -> f64;
    /// Whether the request ended complete ([`Status::Ok`](super::Status::Ok)).
    fn ok(&self) -> bool;
    /// The output token count when it is known exactly (from `usage` or per-event ids).
    fn exact_output_tokens(&self) -> Option<u32>;
}

impl Measured for Compact {
    fn ttft(&self) -> Option<f64> {
        Compact::ttft(self)
    }
    fn tpot(&self) -> Option<f64> {
        Compact::tpot(self)
    }
    fn e2e(&self) -> f64 {
        self.e2e
    }
    fn ok(&self) -> bool {
        Compact::ok(self)
    }
    fn exact_output_tokens(&self) -> Option<u32> {
        self.tokens_exact().then_some(self.output_tokens)
    }
}

impl Measured for RequestRecord {
    fn ttft(&self) -> Option<f64> {
        self.ttft_s
    }
    fn tpot(&self) -> Option<f64> {
        self.tpot_s
    }
    fn e2e(&self) -> f64 {
        self.e2e_s
    }
    fn ok(&self) -> bool {
        self.status.is_ok()
    }
    fn exact_output_tokens(&self) -> Option<u32> {
        self.output_tokens.filter(|n| n.exact).map(|n| n.value)
    }
}

/// A streamed request with at most one output token, counted exactly, has no time between
/// tokens: it meets every TPOT limit. Without this, one-token answers would be left out of
/// the joint population as if TPOT were unobservable.
pub fn tpot_vacuous(r: &(impl Measured + ?Sized)) -> bool {
    r.tpot().is_none() && r.ttft().is_some() && r.exact_output_tokens().is_some_and(|n| n <= 1)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Good,
    Bad,
    /// Judged by an upper bound that exceeds the limit: the truth may still meet it.
    Maybe,
    Unobservable,
}

/// The clauses an SLO can have, in export order; [`Clause::Joint`] is counted apart.
pub const CLAUSES: [Clause; 3] = [Clause::Ttft, Clause::Tpot, Clause::E2e];

/// A record judged against one SLO: per clause of [`CLAUSES`] (`None` where the SLO has
/// no such clause), and jointly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judgement {
    pub clauses: [Option<Verdict>; 3],
    pub joint: Verdict,
}

/// `r` against `slo`: the one judgement of a request, which the store's windows, its
/// counters, the error budgets and the capacity book all count.
pub fn judge(r: &(impl Measured + ?Sized), slo: &Slo) -> Judgement {
    let mut clauses = [None; 3];
    for (i, clause) in CLAUSES.iter().enumerate() {
        let Some(limit) = slo.threshold(*clause) else { continue };
        let limit = limit.as_secs_f64();
        clauses[i] = Some(match clause {
            Clause::Ttft => r.ttft().map_or(Verdict::Unobservable, |v| at_most(v, limit)),
            Clause::Tpot if tpot_vacuous(r) => Verdict::Good,
            Clause::Tpot => match r.tpot() {
                None => Verdict::Unobservable,
                Some(v) if v <= limit => Verdict::Good,
                // Measured with an exact N, the TPOT is exact: over the limit is bad.
                Some(_) if r.exact_output_tokens().is_some() => Verdict::Bad,
                Some(_) => Verdict::Maybe,
            },
            Clause::E2e | Clause::Joint => at_most(r.e2e(), limit),
        });
    }
    let joint = if !r.ok() {
        Verdict::Bad
    } else {
        let set = clauses.iter().flatten();
        if set.clone().any(|v| *v == Verdict::Unobservable) {
            Verdict::Unobservable
        } else if set.clone().any(|v| *v == Verdict::Bad) {
            Verdict::Bad
        } else if set.clone().any(|v| *v == Verdict::Maybe) {
            Verdict::Maybe
        } else {
            Verdict::Good
        }
    };
    Judgement { clauses, joint }
}

/// `≤`, as a histogram's `le` counts an observation equal to its bound.
fn at_most(v: f64, limit: f64) -> Verdict {
    if v <= limit { Verdict::Good } else { Verdict::Bad }
}

impl ClauseCounts {
    pub fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Good => {
                self.population += 1;
                self.good_lower += 1;
                self.good_upper += 1;
            }
            Verdict::Bad => self.population += 1,
            Verdict::Maybe => {
                self.population += 1;
                self.good_upper += 1;
            }
            Verdict::Unobservable => self.unobservable += 1,
        }
    }

    /// Takes out one verdict [`ClauseCounts::add`] added.
    pub fn remove(&mut self, v: Verdict) {
        match v {
            Verdict::Good => {
                self.population -= 1;
                self.good_lower -= 1;
                self.good_upper -= 1;
            }
            Verdict::Bad => self.population -= 1,
            Verdict::Maybe => {
                self.population -= 1;
                self.good_upper -= 1;
            }
            Verdict::Unobservable => self.unobservable -= 1,
        }
    }

    pub fn merge(&mut self, o: &ClauseCounts) {
        self.population += o.population;
        self.good_lower += o.good_lower;
        self.good_upper += o.good_upper;
        self.unobservable += o.unobservable;
    }

    /// Takes out counts [`ClauseCounts::merge`] added.
    pub fn subtract(&mut self, o: &ClauseCounts) {
        self.population -= o.population;
        self.good_lower -= o.good_lower;
        self.good_upper -= o.good_upper;
        self.unobservable -= o.unobservable;
    }
}

/// One SLO over a window: per clause, jointly, and the output tokens of the good requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SloCounts {
    pub clauses: [ClauseCounts; 3],
    pub joint: ClauseCounts,
    /// Output tokens of the requests jointly good, surely and possibly.
    pub good_tokens_lower: u64,
    pub good_tokens_upper: u64,
}

impl SloCounts {
    pub fn add(&mut self, j: &Judgement, output_tokens: u32) {
        for (c, v) in self.clauses.iter_mut().zip(j.clauses) {
            if let Some(v) = v {
                c.add(v);
            }
        }
        self.joint.add(j.joint);
        match j.joint {
            Verdict::Good => {
                self.good_tokens_lower += u64::from(output_tokens);
                self.good_tokens_upper += u64::from(output_tokens);
            }
            Verdict::Maybe => self.good_tokens_upper += u64::from(output_tokens),
            Verdict::Bad | Verdict::Unobservable => {}
        }
    }

    /// Takes out one request [`SloCounts::add`] added with the same judgement.
    pub fn remove(&mut self, j: &Judgement, output_tokens: u32) {
        for (c, v) in self.clauses.iter_mut().zip(j.clauses) {
            if let Some(v) = v {
                c.remove(v);
            }
        }
        self.joint.remove(j.joint);
        match j.joint {
            Verdict::Good => {
                self.good_tokens_lower -= u64::from(output_tokens);
                self.good_tokens_upper -= u64::from(output_tokens);
            }
            Verdict::Maybe => self.good_tokens_upper -= u64::from(output_tokens),
            Verdict::Bad | Verdict::Unobservable => {}
        }
    }

    pub fn merge(&mut self, o: &SloCounts) {
        for (a, b) in self.clauses.iter_mut().zip(&o.clauses) {
            a.merge(b);
        }
        self.joint.merge(&o.joint);
        self.good_tokens_lower += o.good_tokens_lower;
        self.good_tokens_upper += o.good_tokens_upper;
    }

    /// Takes out counts [`SloCounts::merge`] added.
    pub fn subtract(&mut self, o: &SloCounts) {
        for (a, b) in self.clauses.iter_mut().zip(&o.clauses) {
            a.subtract(b);
        }
        self.joint.subtract(&o.joint);
        self.good_tokens_lower -= o.good_tokens_lower;
        self.good_tokens_upper -= o.good_tokens_upper;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::request::{RequestRecord, Source, Status, TokenCount};
    use crate::slo::{Objective, Scope};

    fn slo() -> Slo {
        Slo {
            name: "s".into(),
            ttft: Some(Duration::from_millis(200)),
            tpot: Some(Duration::from_millis(50)),
            e2e: None,
            objective: Objective::new(0.9).unwrap(),
            scope: Scope::all(),
        }
    }

    fn rec(status: Status, ttft: Option<f64>, tpot: Option<f64>, exact: bool) -> Compact {
        Compact::of(&RequestRecord {
            source: Source::Tap,
            target: "t".into(),
            model: "m".into(),
            status,
            finished_unix: 10.0,
            e2e_s: 1.0,
            ttft_s: ttft,
            tpot_s: tpot,
            prompt_tokens: None,
            output_tokens: Some(TokenCount { value: 20, exact }),
            itl: Vec::new(),
            engine: None,
            request_id: None,
        })
        .unwrap()
    }

    #[test]
    fn verdicts() {
        use Verdict::*;
        let s = slo();
        let j = |r| judge(&r, &s);
        assert_eq!(j(rec(Status::Ok, Some(0.2), Some(0.05), true)).joint, Good, "limits are inclusive");
        assert_eq!(j(rec(Status::Ok, Some(0.3), Some(0.01), true)).joint, Bad);
        // Over the limit with a counted N: the true TPOT is lower, maybe under it.
        let m = j(rec(Status::Ok, Some(0.1), Some(0.08), false));
        assert_eq!((m.clauses[1], m.joint), (Some(Maybe), Maybe));
        // Under the limit with a counted N: the true TPOT is lower still.
        assert_eq!(j(rec(Status::Ok, Some(0.1), Some(0.04), false)).joint, Good);
        // Not streamed: neither TTFT nor TPOT, left out of the joint population.
        let u = j(rec(Status::Ok, None, None, true));
        assert_eq!((u.clauses, u.joint), ([Some(Unobservable), Some(Unobservable), None], Unobservable));
        // Failed before the first token: out of the clauses, but bad jointly.
        let f = j(rec(Status::HttpError(503), None, None, true));
        assert_eq!((f.clauses[0], f.joint), (Some(Unobservable), Bad));
    }

    #[test]
    fn counts_add_and_merge() {
        let s = slo();
        let mut a = SloCounts::default();
        for r in [rec(Status::Ok, Some(0.1), Some(0.01), true), rec(Status::Ok, Some(0.1), Some(0.09), false)] {
            a.add(&judge(&r, &s), 20);
        }
        let mut b = SloCounts::default();
        b.add(&judge(&rec(Status::ClientAbort, Some(0.1), None, true), &s), 20);
        a.merge(&b);
        assert_eq!(a.joint, ClauseCounts { population: 3, good_lower: 1, good_upper: 2, unobservable: 0 });
        assert_eq!(a.clauses[1], ClauseCounts { population: 2, good_lower: 1, good_upper: 2, unobservable: 1 });
        assert_eq!((a.good_tokens_lower, a.good_tokens_upper), (20, 40));
    }
}
