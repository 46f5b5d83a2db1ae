//! The time a client waits outside the engine, request by request: the tap's TTFT of a
//! request minus the engine's own TTFT of the same request (docs/metrics.md#ttft-outside-the-engine).
//!
//! The engine's side comes from the tap's record itself when the response carried the
//! engine's times (vLLM's `metrics`, llama.cpp's `timings`), else from the engine's span of
//! the same request, paired by request id within the target. A tap record that cannot be
//! paired is counted with the reason, never compared with some other request: a window's
//! gap is a statistic of per-request differences, and it is absent, with its reasons, when
//! no request of the window was paired.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use super::record::{RequestRecord, Source};
use super::sketch::nearest_rank;
pub use crate::report::request::{GapReference, TtftGap};

/// How long one side of a pair waits for the other (by the store's clock): an engine exports
/// its span when the request ends, within its exporter's batch delay.
pub const PAIR_WAIT_MS: i64 = 30_000;
/// Records waiting for their other side, per side; past it a tap record is counted
/// unpaired at once and a span is not held.
pub const MAX_WAITING: usize = 65_536;
/// Paired and unpaired requests kept per target and model for the windows; the oldest go
/// first.
pub const MAX_KEPT_PER_SERIES: usize = 65_536;

/// Where the engine's side of a pair came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Partner {
    /// The engine's times in the response the tap relayed.
    Response,
    /// The engine's span of the request (OTLP), by request id.
    Otlp,
}

/// Why a tap record with a TTFT has no engine side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unpaired {
    /// The response named no request id and carried no engine times (TGI, SGLang's native
    /// route, an engine without per-request metrics).
    NoRequestId,
    /// No span with the record's request id came within [`PAIR_WAIT_MS`] (no spans are
    /// sent, or not for this request).
    NoEngineRecord,
    /// The span of the request carried no TTFT.
    EngineWithoutTtft,
}

impl Unpaired {
    pub const ALL: [Unpaired; 3] = [Unpaired::NoRequestId, Unpaired::NoEngineRecord, Unpaired::EngineWithoutTtft];

    pub fn as_str(self) -> &'static str {
        match self {
            Unpaired::NoRequestId => "no_request_id",
            Unpaired::NoEngineRecord => "no_engine_record",
            Unpaired::EngineWithoutTtft => "engine_without_ttft",
        }
    }
}

#[derive(Debug, Clone)]
struct Waiting {
    /// Tap side: the series, finish time and TTFT; engine side: its TTFT.
    model: String,
    finished: f64,
    ttft: Option<f64>,
    deadline_ms: i64,
}

#[derive(Debug, Clone, Default)]
struct Kept {
    /// (finished, gap, partner) of paired requests.
    paired: VecDeque<(f64, f64, Partner)>,
    unpaired: VecDeque<(f64, Unpaired)>,
}

/// Pairs tap records with the engine's view of the same request as records arrive.
#[derive(Debug, Clone, Default)]
pub struct Pairer {
    /// By (target, request id).
    tap: HashMap<(String, String), Waiting>,
    engine: HashMap<(String, String), Waiting>,
    /// Deadlines in arrival order: (deadline, tap side?, key).
    order: VecDeque<(i64, bool, (String, String))>,
    /// By (target, model).
    kept: BTreeMap<(String, String), Kept>,
}

impl Pairer {
    /// Offers a record the store took (with the model of the series it joined) at `now_ms`.
    pub fn offer(&mut self, r: &RequestRecord, now_ms: i64) {
        match r.source {
            Source::Tap => self.offer_tap(r, now_ms),
            Source::Otlp => self.offer_engine(r, now_ms),
        }
    }

    fn offer_tap(&mut self, r: &RequestRecord, now_ms: i64) {
        let Some(ttft) = r.ttft_s else { return };
        let series = (r.target.clone(), r.model.clone());
        if let Some(engine) = r.engine.and_then(|e| e.prefill_s.map(|p| p + e.queue_s.unwrap_or(0.0))) {
            return self.paired(series, r.finished_unix, ttft - engine, Partner::Response);
        }
        let Some(id) = &r.request_id else {
            return self.unpaired(series, r.finished_unix, Unpaired::NoRequestId);
        };
        let key = (r.target.clone(), id.clone());
        if let Some(e) = self.engine.remove(&key) {
            return match e.ttft {
                Some(engine) => self.paired(series, r.finished_unix, ttft - engine, Partner::Otlp),
                None => self.unpaired(series, r.finished_unix, Unpaired::EngineWithoutTtft),
            };
        }
        if self.tap.len() >= MAX_WAITING {
            return self.unpaired(series, r.finished_unix, Unpaired::NoEngineRecord);
        }
        let deadline_ms = now_ms.saturating_add(PAIR_WAIT_MS);
        let w = Waiting { model: r.model.clone(), finished: r.finished_unix, ttft: Some(ttft), deadline_ms };
        self.tap.insert(key.clone(), w);
        self.order.push_back((deadline_ms, true, key));
    }

    fn offer_engine(&mut self, r: &RequestRecord, now_ms: i64) {
        let Some(id) = &r.request_id else { return };
        let key = (r.target.clone(), id.clone());
        if let Some(t) = self.tap.remove(&key) {
            let (series, tap_ttft) = ((key.0, t.model), t.ttft.unwrap_or(f64::NAN));
            return match r.ttft_s {
                Some(engine) => self.paired(series, t.finished, tap_ttft - engine, Partner::Otlp),
                None => self.unpaired(series, t.finished, Unpaired::EngineWithoutTtft),
            };
        }
        if self.engine.len() >= MAX_WAITING {
            return;
        }
        let deadline_ms = now_ms.saturating_add(PAIR_WAIT_MS);
        let w = Waiting { model: String::new(), finished: r.finished_unix, ttft: r.ttft_s, deadline_ms };
        self.engine.insert(key.clone(), w);
        self.order.push_back((deadline_ms, false, key));
    }

    fn paired(&mut self, series: (String, String), finished: f64, gap: f64, partner: Partner) {
        if !gap.is_finite() {
            return;
        }
        let kept = self.kept.entry(series).or_default();
        kept.paired.push_back((finished, gap, partner));
        if kept.paired.len() > MAX_KEPT_PER_SERIES {
            kept.paired.pop_front();
        }
    }

    fn unpaired(&mut self, series: (String, String), finished: f64, why: Unpaired) {
        let kept = self.kept.entry(series).or_default();
        kept.unpaired.push_back((finished, why));
        if kept.unpaired.len() > MAX_KEPT_PER_SERIES {
            kept.unpaired.pop_front();
        }
    }

    /// Counts the tap records whose wait ended at `now_ms` as unpaired, and drops what
    /// finished at or before `horizon` (Unix seconds), which no window reads.
    pub fn expire(&mut self, now_ms: i64, horizon: f64) {
        while let Some((deadline, _, _)) = self.order.front()
            && *deadline <= now_ms
        {
            let Some((deadline, tap_side, key)) = self.order.pop_front() else { break };
            let side = if tap_side { &mut self.tap } else { &mut self.engine };
            // Paired (removed) or offered again since (a later deadline): nothing to do.
            if side.get(&key).is_none_or(|w| w.deadline_ms != deadline) {
                continue;
            }
            let Some(w) = side.remove(&key) else { continue };
            if tap_side {
                self.unpaired((key.0, w.model), w.finished, Unpaired::NoEngineRecord);
            }
        }
        self.kept.retain(|_, k| {
            k.paired.retain(|p| p.0 > horizon);
            k.unpaired.retain(|u| u.0 > horizon);
            !(k.paired.is_empty() && k.unpaired.is_empty())
        });
    }

    /// The gap of `target`'s `model` over the requests that finished in `(from, to]`;
    /// `None` when the tap measured no TTFT there, paired or not.
    /// The gap over `(from, to]`, and the kept requests read for it (the work it took).
    pub fn window(&self, target: &str, model: &str, from: f64, to: f64, quantiles: &[f64]) -> (Option<TtftGap>, u64) {
        let Some(kept) = self.kept.get(&(target.to_string(), model.to_string())) else { return (None, 0) };
        let visited = (kept.paired.len() + kept.unpaired.len()) as u64;
        (Self::gap(kept, from, to, quantiles), visited)
    }

    fn gap(kept: &Kept, from: f64, to: f64, quantiles: &[f64]) -> Option<TtftGap> {
        let inside = |t: f64| t > from && t <= to;
        let mut gaps: Vec<f64> = Vec::new();
        let (mut response, mut otlp) = (false, false);
        for &(t, gap, partner) in &kept.paired {
            if inside(t) {
                gaps.push(gap);
                response |= partner == Partner::Response;
                otlp |= partner == Partner::Otlp;
            }
        }
        let mut unpaired: BTreeMap<&'static str, u64> = Unpaired::ALL.iter().map(|u| (u.as_str(), 0)).collect();
        for &(t, why) in &kept.unpaired {
            if inside(t) {
                *unpaired.entry(why.as_str()).or_default() += 1;
            }
        }
        if gaps.is_empty() && unpaired.values().all(|n| *n == 0) {
            return None;
        }
        gaps.sort_by(f64::total_cmp);
        let n = gaps.len() as u64;
        let reference = match (response, otlp) {
            (true, true) => GapReference::Both,
            (true, false) => GapReference::Response,
            (false, true) => GapReference::Otlp,
            (false, false) => GapReference::None,
        };
        let absent = gaps.is_empty().then(|| {
            let most = unpaired.iter().max_by_key(|(_, n)| **n).map_or("", |(k, _)| *k);
            match most {
                "no_request_id" => "no request could be paired: the responses named no request id and carried no engine times",
                "engine_without_ttft" => "no request could be paired: the engine's spans carried no TTFT",
                _ => "no request could be paired: no engine span with the same request id arrived within 30 s, and the responses carried no engine times",
            }
        });
        Some(TtftGap {
            reference,
            paired: n,
            mean: (n > 0).then(|| gaps.iter().sum::<f64>() / n as f64),
            min: gaps.first().copied(),
            quantiles: if n == 0 {
                Vec::new()
            } else {
                quantiles.iter().map(|&q| (q, gaps[nearest_rank(q, n) as usize - 1])).collect()
            },
            unpaired,
            absent,
        })
    }

    /// Records waiting for their other side now, both sides.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.tap.len() + self.engine.len()
    }
}
