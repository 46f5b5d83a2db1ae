//! The clauses of an SLO, each judged on its own and all together.

use serde::Serialize;

/// One clause of an SLO, or all of them together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Clause {
    Ttft,
    Tpot,
    E2e,
    Joint,
}

impl Clause {
    pub fn as_str(self) -> &'static str {
        match self {
            Clause::Ttft => "ttft",
            Clause::Tpot => "tpot",
            Clause::E2e => "e2e",
            Clause::Joint => "joint",
        }
    }
}
