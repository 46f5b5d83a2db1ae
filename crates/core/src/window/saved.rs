//! A target's window store as a `state_dir` snapshot keeps it (docs/architecture.md#state-that-survives-restarts).
//!
//! Consecutive scrapes that share a [`Layout`] are one run: the layout is written once,
//! the first scrape's values raw and the others as deltas from the one before
//! ([`Column::encode`], so the snapshot costs what the store does in memory). Kinds and
//! finish reasons are written by name, not by position, so that a reordered enum in a
//! later version reads as unknown rather than as another quantity. Restoring replays the
//! points through [`TargetWindows::push_values`]: the store rebuilds its own keyframes
//! and trims to the current longest window. The caller encodes and checksums this.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Column, Layout, Quantity, SeriesKey, TargetWindows, column};
use crate::canonical::{CounterKind, Engine, FinishReason, GaugeKind, HistogramKind};

/// One target's stored scrapes, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedWindows {
    pub engine: Option<Engine>,
    pub runs: Vec<SavedRun>,
}

/// Scrapes sharing one layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedRun {
    layout: SavedLayout,
    points: Vec<SavedPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SavedPoint {
    t_ms: i64,
    column: SavedColumn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum SavedColumn {
    Raw(Vec<f64>),
    /// Against the previous point of the run, in the first delta format
    /// ([`column::decode_first_format`]): what snapshots written before [`SavedColumn::Packed`]
    /// hold. Read, never written. A new variant goes last: postcard writes the index.
    Delta(#[serde(with = "as_bytes")] Vec<u8>),
    /// Against the previous point of the run, as [`Column::encode`] packs it.
    Packed(#[serde(with = "as_bytes")] Vec<u8>),
}

/// A byte string as one serde byte value, not a sequence of `u8`s: postcard writes both as a
/// length and the bytes (so either reads the other's files), but a sequence costs a call
/// per byte, and the packed columns are most of a snapshot: at 10 000 targets with full
/// windows, gigabytes a minute (docs/footprint.md).
pub mod as_bytes {
    use serde::de::{Deserializer, Error, SeqAccess, Visitor};
    use serde::ser::Serializer;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_byte_buf(Bytes)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SavedLayout {
    /// Each model name once; keys refer to them by index.
    models: Vec<String>,
    keys: Vec<SavedKey>,
    created: Vec<Option<f64>>,
    process_start: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SavedKey {
    model: u32,
    quantity: SavedQuantity,
    shard: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum SavedQuantity {
    Bucket(String, u64),
    Sum(String),
    Count(String),
    Counter(String, Option<String>),
    SpecAccepted(u32),
    Gauge(String),
}

/// Why a saved store cannot be restored: it was not written by this version's
/// [`SavedWindows::save`] (a name it does not know, values that do not decode).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("saved window store is not readable: {0}")]
pub struct Unreadable(pub String);

fn by_name<T: Copy>(all: &[T], name: &str, as_str: fn(T) -> &'static str) -> Result<T, Unreadable> {
    all.iter().copied().find(|k| as_str(*k) == name).ok_or_else(|| Unreadable(format!("unknown kind {name:?}")))
}

impl SavedQuantity {
    fn of(q: Quantity) -> SavedQuantity {
        match q {
            Quantity::Bucket(k, le) => SavedQuantity::Bucket(k.as_str().into(), le),
            Quantity::Sum(k) => SavedQuantity::Sum(k.as_str().into()),
            Quantity::Count(k) => SavedQuantity::Count(k.as_str().into()),
            Quantity::Counter(k, r) => SavedQuantity::Counter(k.as_str().into(), r.map(|r| r.as_str().into())),
            Quantity::SpecAccepted(p) => SavedQuantity::SpecAccepted(p),
            Quantity::Gauge(k) => SavedQuantity::Gauge(k.as_str().into()),
        }
    }

    fn quantity(&self) -> Result<Quantity, Unreadable> {
        let h = |n: &str| by_name(HistogramKind::ALL, n, HistogramKind::as_str);
        Ok(match self {
            SavedQuantity::Bucket(k, le) => Quantity::Bucket(h(k)?, *le),
            SavedQuantity::Sum(k) => Quantity::Sum(h(k)?),
            SavedQuantity::Count(k) => Quantity::Count(h(k)?),
            SavedQuantity::Counter(k, r) => Quantity::Counter(
                by_name(CounterKind::ALL, k, CounterKind::as_str)?,
                r.as_deref().map(FinishReason::from_label),
            ),
            SavedQuantity::SpecAccepted(p) => Quantity::SpecAccepted(*p),
            SavedQuantity::Gauge(k) => Quantity::Gauge(by_name(GaugeKind::ALL, k, GaugeKind::as_str)?),
        })
    }
}

impl SavedLayout {
    fn of(l: &Layout) -> SavedLayout {
        let mut models: Vec<String> = Vec::new();
        let keys = l
            .keys
            .iter()
            .map(|k| {
                let model = match models.iter().position(|m| **m == *k.model) {
                    Some(i) => i,
                    None => {
                        models.push(k.model.to_string());
                        models.len() - 1
                    }
                };
                SavedKey { model: model as u32, quantity: SavedQuantity::of(k.quantity), shard: k.shard.clone() }
            })
            .collect();
        SavedLayout { models, keys, created: l.created.to_vec(), process_start: l.process_start }
    }

    fn layout(&self) -> Result<Layout, Unreadable> {
        if self.created.len() != self.keys.len() {
            return Err(Unreadable("layout keys and markers differ in length".into()));
        }
        let models: Vec<Arc<str>> = self.models.iter().map(|m| Arc::from(m.as_str())).collect();
        let keys = self
            .keys
            .iter()
            .map(|k| {
                let model =
                    models.get(k.model as usize).ok_or_else(|| Unreadable("model index out of range".into()))?;
                Ok(SeriesKey { model: model.clone(), quantity: k.quantity.quantity()?, shard: k.shard.clone() })
            })
            .collect::<Result<Box<[_]>, Unreadable>>()?;
        Ok(Layout { keys, created: self.created.clone().into(), process_start: self.process_start })
    }
}

impl SavedWindows {
    /// Every point `store` holds.
    pub fn save(store: &TargetWindows) -> SavedWindows {
        let mut runs: Vec<SavedRun> = Vec::new();
        let mut last: Option<Arc<Layout>> = None;
        let mut prev: Vec<f64> = Vec::new();
        store.for_each_stored(|t_ms, layout, values| {
            let same = last.as_ref().is_some_and(|l| Arc::ptr_eq(l, layout));
            let column = if same && prev.len() == values.len() {
                let mut bytes = Vec::with_capacity(values.len() / 2 + 8);
                column::pack(values, &prev, &mut bytes);
                SavedColumn::Packed(bytes)
            } else {
                SavedColumn::Raw(values.to_vec())
            };
            if !same {
                runs.push(SavedRun { layout: SavedLayout::of(layout), points: Vec::new() });
                last = Some(layout.clone());
            }
            if let Some(run) = runs.last_mut() {
                run.points.push(SavedPoint { t_ms, column });
            }
            prev.clear();
            prev.extend_from_slice(values);
        });
        SavedWindows { engine: store.engine(), runs }
    }

    /// The store these points make, keeping what `max_window` needs. All or nothing: a
    /// point that does not decode refuses the whole store, so that no window is restored
    /// with a hole in it.
    pub fn restore(&self, max_window: Duration) -> Result<TargetWindows, Unreadable> {
        let mut store = TargetWindows::new(max_window);
        let mut last_t = i64::MIN;
        for run in &self.runs {
            let layout = Arc::new(run.layout.layout()?);
            let mut cur: Vec<f64> = Vec::new();
            for (i, p) in run.points.iter().enumerate() {
                let decoded = match &p.column {
                    SavedColumn::Raw(v) => Column::Raw(v.as_slice().into()).decode_into(&mut cur),
                    SavedColumn::Delta(_) | SavedColumn::Packed(_) if i == 0 => {
                        return Err(Unreadable("a run starts with a delta".into()));
                    }
                    SavedColumn::Delta(b) => column::decode_first_format(b, &mut cur),
                    SavedColumn::Packed(b) => Column::Delta(b.as_slice().into()).decode_into(&mut cur),
                };
                if !decoded || cur.len() != layout.keys.len() {
                    return Err(Unreadable("values do not decode against their layout".into()));
                }
                if p.t_ms <= last_t {
                    return Err(Unreadable("points are not in time order".into()));
                }
                last_t = p.t_ms;
                store.push_values(p.t_ms, layout.clone(), cur.clone().into());
            }
        }
        store.set_engine(self.engine);
        Ok(store)
    }

    /// The newest scrape's time, Unix ms.
    pub fn newest_ms(&self) -> Option<i64> {
        self.runs.last().and_then(|r| r.points.last()).map(|p| p.t_ms)
    }

    /// Stored scrapes.
    pub fn points(&self) -> usize {
        self.runs.iter().map(|r| r.points.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::tests::{fill, vllm_like};

    fn points(w: &TargetWindows) -> Vec<(i64, Box<[SeriesKey]>, Vec<u64>)> {
        w.stored_points().map(|(t, l, v)| (t, l.keys.clone(), v.iter().map(|x| x.to_bits()).collect())).collect()
    }

    #[test]
    fn a_restored_store_holds_the_same_points_bit_for_bit() {
        // 200 scrapes: several keyframes, and a layout change in the middle (two shards, then
        // three) so that two runs share nothing.
        let mut w = fill(2, 100, 5_000);
        for i in 100..200 {
            w.push(i * 5_000 + 7, Arc::new(vllm_like(3, i as f64)));
        }
        let saved = SavedWindows::save(&w);
        assert_eq!((saved.runs.len(), saved.points()), (2, 200));
        let back = saved.restore(Duration::from_secs(3600)).unwrap();
        assert_eq!(points(&back), points(&w));
        assert_eq!(back.engine(), w.engine());
        // Consecutive points share one layout again, as the live store's do.
        let layouts: Vec<_> = back.stored_points().map(|(_, l, _)| l).collect();
        assert!(Arc::ptr_eq(&layouts[0], &layouts[99]) && !Arc::ptr_eq(&layouts[99], &layouts[100]));
        // A later scrape with the same series joins the restored layout.
        let mut back = back;
        back.push(200 * 5_000 + 7, Arc::new(vllm_like(3, 200.0)));
        let last: Vec<_> = back.stored_points().map(|(_, l, _)| l).collect();
        assert!(Arc::ptr_eq(&last[199], &last[200]));
        // A shorter longest window keeps only what it needs.
        let short = saved.restore(Duration::from_secs(60)).unwrap();
        assert_eq!(short.len(), 12);
    }

    #[test]
    fn an_unreadable_store_is_refused_whole() {
        let w = fill(1, 10, 1_000);
        let mut saved = SavedWindows::save(&w);
        let SavedColumn::Packed(b) = &mut saved.runs[0].points[3].column else { panic!("a delta point") };
        b.push(0);
        assert!(saved.restore(Duration::from_secs(3600)).is_err(), "trailing bytes");
        let mut saved = SavedWindows::save(&w);
        saved.runs[0].layout.keys[0].quantity = SavedQuantity::Gauge("no_such_gauge".into());
        assert!(saved.restore(Duration::from_secs(3600)).is_err(), "unknown kind");
        let mut saved = SavedWindows::save(&w);
        saved.runs[0].points.swap(2, 5);
        assert!(saved.restore(Duration::from_secs(3600)).is_err(), "out of order");
    }

    #[test]
    fn a_store_saved_in_the_first_delta_format_restores() {
        let w = fill(2, 100, 5_000);
        let mut saved = SavedWindows::save(&w);
        let mut prev = Vec::new();
        for p in &mut saved.runs[0].points {
            let mut cur = prev.clone();
            let ok = match &p.column {
                SavedColumn::Raw(v) => Column::Raw(v.as_slice().into()).decode_into(&mut cur),
                SavedColumn::Packed(b) => Column::Delta(b.as_slice().into()).decode_into(&mut cur),
                SavedColumn::Delta(_) => false,
            };
            assert!(ok);
            if matches!(p.column, SavedColumn::Packed(_)) {
                p.column = SavedColumn::Delta(column::encode_first_format(&cur, &prev));
            }
            prev = cur;
        }
        assert!(saved.runs[0].points.iter().skip(1).all(|p| matches!(p.column, SavedColumn::Delta(_))));
        let back = saved.restore(Duration::from_secs(3600)).unwrap();
        assert_eq!(points(&back), points(&w));
    }
}
