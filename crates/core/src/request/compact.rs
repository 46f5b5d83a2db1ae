//! What the store keeps of one request: the numbers windows need, without the ITL vector
//! (folded into per-slot sketches at ingest), in 48 bytes (docs/limits.md#request-store).

use super::record::{RequestRecord, Status};

/// A request as the store keeps it. A missing latency is NaN, so that the record stays
/// small; [`Compact::ttft`] and [`Compact::tpot`] give it back as an `Option`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Compact {
    pub finished: f64,
    pub e2e: f64,
    ttft: f64,
    tpot: f64,
    pub output_tokens: u32,
    pub status: Status,
    flags: u8,
}

const OUTPUT_KNOWN: u8 = 1;
const OUTPUT_EXACT: u8 = 2;

/// Why a record was refused before it reached any window or counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Invalid {
    /// `finished_unix` or `e2e_s` is not a finite number ≥ 0, or a latency is negative or NaN.
    BadNumber,
}

impl Compact {
    /// The record's numbers, or why they cannot be used. Producers measure on a monotonic
    /// clock, so a negative or NaN duration is a producer bug, not a fast request.
    pub fn of(r: &RequestRecord) -> Result<Compact, Invalid> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        let opt_ok = |v: Option<f64>| v.is_none_or(ok);
        if !r.finished_unix.is_finite() || !ok(r.e2e_s) || !opt_ok(r.ttft_s) || !opt_ok(r.tpot_s) {
            return Err(Invalid::BadNumber);
        }
        let mut flags = 0;
        if let Some(n) = r.output_tokens {
            flags |= OUTPUT_KNOWN;
            if n.exact {
                flags |= OUTPUT_EXACT;
            }
        }
        Ok(Compact {
            finished: r.finished_unix,
            e2e: r.e2e_s,
            ttft: r.ttft_s.unwrap_or(f64::NAN),
            tpot: r.tpot_s.unwrap_or(f64::NAN),
            output_tokens: r.output_tokens.map_or(0, |n| n.value),
            status: r.status,
            flags,
        })
    }

    pub fn ttft(&self) -> Option<f64> {
        (!self.ttft.is_nan()).then_some(self.ttft)
    }

    pub fn tpot(&self) -> Option<f64> {
        (!self.tpot.is_nan()).then_some(self.tpot)
    }

    pub fn ok(&self) -> bool {
        self.status.is_ok()
    }

    /// Whether the output token count is known exactly (from `usage` or per-event ids).
    pub fn tokens_exact(&self) -> bool {
        self.flags & OUTPUT_EXACT != 0
    }

    /// Whether the record carries an output token count at all.
    pub fn tokens_known(&self) -> bool {
        self.flags & OUTPUT_KNOWN != 0
    }

    /// Whether a TPOT value is exact: measured with an exact N. Without a TPOT it is moot.
    pub fn tpot_exact(&self) -> bool {
        self.tpot.is_nan() || self.tokens_exact()
    }

    /// When the source first saw this request: it finished `e2e` after it arrived.
    pub fn started(&self) -> f64 {
        self.finished - self.e2e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Source, TokenCount};

    fn record() -> RequestRecord {
        RequestRecord {
            source: Source::Tap,
            target: "t".into(),
            model: "m".into(),
            status: Status::Ok,
            finished_unix: 100.0,
            e2e_s: 2.0,
            ttft_s: Some(0.1),
            tpot_s: Some(0.02),
            prompt_tokens: Some(10),
            output_tokens: Some(TokenCount { value: 50, exact: false }),
            itl: Vec::new(),
            engine: None,
            request_id: None,
        }
    }

    #[test]
    fn keeps_the_numbers_in_48_bytes() {
        assert!(std::mem::size_of::<Compact>() <= 48, "{}", std::mem::size_of::<Compact>());
        let c = Compact::of(&record()).unwrap();
        assert_eq!((c.ttft(), c.tpot(), c.output_tokens), (Some(0.1), Some(0.02), 50));
        assert!(c.tokens_known() && !c.tokens_exact() && !c.tpot_exact());
        assert_eq!(c.started(), 98.0);
    }

    #[test]
    fn refuses_impossible_numbers() {
        for bad in [
            RequestRecord { e2e_s: -1.0, ..record() },
            RequestRecord { finished_unix: f64::NAN, ..record() },
            RequestRecord { ttft_s: Some(f64::INFINITY), ..record() },
            RequestRecord { tpot_s: Some(-0.1), ..record() },
        ] {
            assert_eq!(Compact::of(&bad), Err(Invalid::BadNumber));
        }
    }

    #[test]
    fn one_streamed_token_meets_any_tpot() {
        use crate::request::tpot_vacuous;
        let one = RequestRecord { tpot_s: None, output_tokens: Some(TokenCount { value: 1, exact: true }), ..record() };
        assert!(tpot_vacuous(&Compact::of(&one).unwrap()) && tpot_vacuous(&one));
        // Counted, not known: the one event may have carried many tokens.
        let counted = RequestRecord { output_tokens: Some(TokenCount { value: 1, exact: false }), ..one.clone() };
        assert!(!tpot_vacuous(&Compact::of(&counted).unwrap()) && !tpot_vacuous(&counted));
        // Not streamed: no TTFT, so nothing is known about its tokens' timing.
        let whole = RequestRecord { ttft_s: None, ..one };
        assert!(!tpot_vacuous(&Compact::of(&whole).unwrap()) && !tpot_vacuous(&whole));
    }
}
