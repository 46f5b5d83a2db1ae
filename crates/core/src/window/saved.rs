//! A target's window store as a `state_dir` snapshot keeps it (docs/architecture.md#state-that-survives-restarts).
//!
//! Consecutive scrapes that share a [`Layout`] are one run: the layout is written once,
//! then each scrape in the encoding the store keeps it in, copied: a full scrape's
//! [`Column`] (a keyframe, or the deltas from the scrape before) and a block of thin
//! scrapes as its columns (`thin::Block`). So the snapshot costs what the store does in
//! memory, and writing it costs a copy of each, not a decode and a re-encode. Kinds and
//! finish reasons are written by name, not by position, so that a reordered enum in a
//! later version reads as unknown rather than as another quantity. Restoring replays the
//! points through [`TargetWindows::push_values`]: the store rebuilds its own keyframes
//! and trims to the current longest window. The caller encodes and checksums this.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::full::Encoded;
use super::thin::{Block, BlockParts};
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
    /// A block of thin scrapes as the store keeps it (`thin::Block`), the point's time its
    /// first scrape's: saved as a copy of its columns, restored by decoding them.
    Block(SavedBlock),
}

/// A thin block's fields (`thin::BlockParts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SavedBlock {
    /// Scrapes at its front that the store had dropped: its columns hold them with the
    /// rest, so they are saved, but they are not restored.
    skip: u32,
    base: Vec<f64>,
    /// Each scrape's time after the point's, the first (0) included.
    times: Vec<u32>,
    /// Scrapes 1.. as one column of differences from the trend, and the trend.
    sealed: Option<(Bytes, Bytes)>,
    /// Or, while the block filled, one column per scrape against `base`.
    open: Vec<Bytes>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Bytes(#[serde(with = "as_bytes")] Vec<u8>);

impl SavedBlock {
    fn of(p: BlockParts) -> SavedBlock {
        SavedBlock {
            skip: p.skip as u32,
            base: p.base,
            times: p.times,
            sealed: p.sealed.map(|(s, t)| (Bytes(s), Bytes(t))),
            open: p.open.into_iter().map(Bytes).collect(),
        }
    }

    fn parts(&self, t0: i64) -> BlockParts {
        BlockParts {
            t0,
            skip: self.skip as usize,
            base: self.base.clone(),
            times: self.times.clone(),
            sealed: self.sealed.as_ref().map(|(s, t)| (s.0.clone(), t.0.clone())),
            open: self.open.iter().map(|c| c.0.clone()).collect(),
        }
    }
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

/// A layout's keys by name (its models once each) and its restart markers; also how the
/// evaluation's catalog of series is saved (`evaluate::incremental::saved`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedLayout {
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
    pub(crate) fn of(l: &Layout) -> SavedLayout {
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

    pub(crate) fn layout(&self) -> Result<Layout, Unreadable> {
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
    /// Every point `store` holds, each in the encoding the store keeps it in: a full scrape's
    /// column (a keyframe or the delta from the scrape before, which the store only writes
    /// between scrapes of one layout) and a thin block's columns are copied, not decoded and
    /// packed again. A snapshot saves every stored scrape of every target each interval.
    pub fn save(store: &TargetWindows) -> SavedWindows {
        let mut runs: Vec<SavedRun> = Vec::new();
        let mut last: *const Layout = std::ptr::null();
        let mut push = |layout: &Arc<Layout>, point: SavedPoint| {
            if !std::ptr::eq(last, Arc::as_ptr(layout)) {
                runs.push(SavedRun { layout: SavedLayout::of(layout), points: Vec::new() });
            }
            last = Arc::as_ptr(layout);
            if let Some(run) = runs.last_mut() {
                run.points.push(point);
            }
        };
        for b in &store.thin {
            match b.parts() {
                Some(p) => push(&b.layout, SavedPoint { t_ms: p.t0, column: SavedColumn::Block(SavedBlock::of(p)) }),
                None => {
                    b.for_each(0, |_, t_ms, v| {
                        push(&b.layout, SavedPoint { t_ms, column: SavedColumn::Raw(v.to_vec()) });
                        true
                    });
                }
            }
        }
        for s in &store.full {
            // A segment whose oldest scrape does not decode (never one `push` built) ends
            // what is saved: a point after a gap would decode against the wrong values.
            let whole = s.for_each_encoded(|t_ms, encoded| {
                let column = match encoded {
                    Encoded::Raw(v) => SavedColumn::Raw(v.to_vec()),
                    Encoded::Delta(b) => SavedColumn::Packed(b.to_vec()),
                };
                push(&s.layout, SavedPoint { t_ms, column });
            });
            if !whole {
                break;
            }
        }
        SavedWindows { engine: store.engine(), runs }
    }

    /// The store these points make, keeping what `max_window` needs. All or nothing: a
    /// point that does not decode refuses the whole store, so that no window is restored
    /// with a hole in it.
    pub fn restore(&self, max_window: Duration) -> Result<TargetWindows, Unreadable> {
        let mut store = TargetWindows::new(max_window);
        let last_t = std::cell::Cell::new(i64::MIN);
        let next = |store: &mut TargetWindows, t_ms: i64, layout: &Arc<Layout>, values: &[f64]| {
            if values.len() != layout.keys.len() {
                return Err(Unreadable("values do not decode against their layout".into()));
            }
            if t_ms <= last_t.get() {
                return Err(Unreadable("points are not in time order".into()));
            }
            last_t.set(t_ms);
            store.push_values(t_ms, layout.clone(), values.into());
            Ok(())
        };
        for run in &self.runs {
            let layout = Arc::new(run.layout.layout()?);
            let mut cur: Vec<f64> = Vec::new();
            for (i, p) in run.points.iter().enumerate() {
                let decoded = match &p.column {
                    SavedColumn::Raw(v) => Column::Raw(v.as_slice().into()).decode_into(&mut cur),
                    SavedColumn::Block(b) => {
                        let block = Block::from_parts(layout.clone(), b.parts(p.t_ms))
                            .ok_or_else(|| Unreadable("a thin block's fields do not agree".into()))?;
                        // Kept as the block it was when every column decodes against the
                        // layout, so the first evaluation has nothing to thin again. The
                        // last scrape's values are what a delta after the block is against.
                        let mut whole = true;
                        let decodes = block.for_each(0, |_, _, v| {
                            whole &= v.len() == layout.keys.len();
                            cur.clear();
                            cur.extend_from_slice(v);
                            whole
                        });
                        if !decodes || !whole {
                            return Err(Unreadable("values do not decode against their layout".into()));
                        }
                        let (first, last) = (block.t(0), block.last_t());
                        if first <= last_t.get() {
                            return Err(Unreadable("points are not in time order".into()));
                        }
                        if store.takes_block(first) {
                            store.push_block(block);
                            last_t.set(last);
                            continue;
                        }
                        let mut result = Ok(());
                        let decoded = block.for_each(0, |_, t_ms, v| {
                            result = next(&mut store, t_ms, &layout, v);
                            cur.clear();
                            cur.extend_from_slice(v);
                            result.is_ok()
                        });
                        result?;
                        if !decoded {
                            return Err(Unreadable("values do not decode against their layout".into()));
                        }
                        continue;
                    }
                    SavedColumn::Delta(_) | SavedColumn::Packed(_) if i == 0 => {
                        return Err(Unreadable("a run starts with a delta".into()));
                    }
                    SavedColumn::Delta(b) => column::decode_first_format(b, &mut cur),
                    SavedColumn::Packed(b) => Column::Delta(b.as_slice().into()).decode_into(&mut cur),
                };
                if !decoded {
                    return Err(Unreadable("values do not decode against their layout".into()));
                }
                next(&mut store, p.t_ms, &layout, &cur)?;
            }
        }
        store.set_engine(self.engine);
        Ok(store)
    }

    /// The newest scrape's time, Unix ms.
    pub fn newest_ms(&self) -> Option<i64> {
        self.runs.last().and_then(|r| r.points.last()).map(SavedPoint::newest_ms)
    }

    /// Stored scrapes (a block's, less those its window had dropped).
    pub fn points(&self) -> usize {
        self.runs.iter().flat_map(|r| &r.points).map(SavedPoint::scrapes).sum()
    }
}

impl SavedPoint {
    fn newest_ms(&self) -> i64 {
        match &self.column {
            SavedColumn::Block(b) => self.t_ms.saturating_add(b.times.last().map_or(0, |&t| i64::from(t))),
            _ => self.t_ms,
        }
    }

    fn scrapes(&self) -> usize {
        match &self.column {
            SavedColumn::Block(b) => b.times.len().saturating_sub(b.skip as usize),
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{CounterKind, HistogramKind};
    use crate::window::tests::{fill, vllm_like};
    use crate::window::{Buckets, Kept};

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

    /// A store thinned at every push, as the daemon thins at every tick, whose window has
    /// started dropping its oldest scrapes: sealed blocks, one still filling, one that has
    /// lost scrapes at its front, and a layout change (a shard that came and went) among them.
    fn thinned() -> (TargetWindows, Kept) {
        let kept = Kept {
            histograms: vec![(HistogramKind::Ttft, Buckets::Every)],
            counters: vec![CounterKind::RequestsFinished],
            ..Kept::default()
        };
        let mut w = TargetWindows::new(Duration::from_secs(900));
        for i in 0..1000i64 {
            let t = i * 1000 + 3;
            w.push(t, Arc::new(vllm_like(if (420..440).contains(&i) { 2 } else { 1 }, (i * i) as f64)));
            w.thin_before(t - 100_000, &kept);
        }
        (w, kept)
    }

    fn blocks(saved: &SavedWindows) -> Vec<&SavedBlock> {
        let points = saved.runs.iter().flat_map(|r| &r.points);
        points.filter_map(|p| if let SavedColumn::Block(b) = &p.column { Some(b) } else { None }).collect()
    }

    #[test]
    fn a_thinned_store_is_saved_as_its_blocks_and_restores_bit_for_bit() {
        let (w, kept) = thinned();
        let saved = SavedWindows::save(&w);
        let b = blocks(&saved);
        assert!(b.len() >= 6, "{} blocks", b.len());
        assert!(b.iter().any(|b| b.sealed.is_some()) && b.iter().any(|b| b.sealed.is_none() && !b.open.is_empty()));
        assert!(b[0].skip > 0, "the oldest block has lost scrapes to the window");
        // Every stored scrape, thin or full, is saved once: the blocks' dropped scrapes are not.
        let thin: usize = b.iter().map(|b| b.times.len() - b.skip as usize).sum();
        assert_eq!(thin, w.thin_points());
        assert_eq!(saved.points(), w.len());
        assert_eq!(saved.newest_ms(), Some(999_003));
        // A store saved before its newest scrapes were taken: its newest is inside a block.
        let mut only_thin = saved.clone();
        let last_block = only_thin.runs.iter().rposition(|r| matches!(r.points[0].column, SavedColumn::Block(_)));
        only_thin.runs.truncate(last_block.unwrap() + 1);
        only_thin.runs.last_mut().unwrap().points.retain(|p| matches!(p.column, SavedColumn::Block(_)));
        let newest = only_thin.restore(Duration::from_secs(900)).unwrap().stored_points().last().unwrap().0;
        assert_eq!(only_thin.newest_ms(), Some(newest));
        // Through postcard, as the snapshot file holds it.
        let bytes = postcard::to_allocvec(&saved).unwrap();
        assert_eq!(postcard::from_bytes::<SavedWindows>(&bytes).unwrap(), saved);
        let mut back = saved.restore(Duration::from_secs(900)).unwrap();
        assert_eq!(points(&back), points(&w));
        // The blocks come back as blocks, as they were (the oldest with the scrapes it had
        // dropped): nothing is left for the next evaluation to thin again.
        assert_eq!(back.thin_points(), w.thin_points());
        assert_eq!(blocks(&SavedWindows::save(&back)), b);
        back.thin_before(999_003 - 100_000, &kept);
        assert_eq!(back.thin_points(), w.thin_points());
        assert_eq!(points(&back), points(&w));
    }

    #[test]
    fn a_saved_block_whose_fields_disagree_is_refused() {
        let (w, _) = thinned();
        let saved = SavedWindows::save(&w);
        let sealed = blocks(&saved).iter().position(|b| b.sealed.is_some()).unwrap();
        let open = blocks(&saved).iter().position(|b| b.sealed.is_none() && !b.open.is_empty()).unwrap();
        type Break = fn(&mut SavedBlock);
        let breaks: [(usize, &str, Break); 9] = [
            (sealed, "a value short", |b| b.base.truncate(b.base.len() - 1)),
            (sealed, "times out of order", |b| b.times.swap(1, 2)),
            (sealed, "first time not 0", |b| b.times[0] = 1),
            (sealed, "every scrape dropped", |b| b.skip = b.times.len() as u32),
            (sealed, "a scrape short", |b| b.times.truncate(b.times.len() - 1)),
            (sealed, "columns cut", |b| b.sealed.as_mut().unwrap().0.0.truncate(5)),
            (sealed, "the trend as the differences", |b| {
                let (s, t) = b.sealed.as_mut().unwrap();
                std::mem::swap(s, t);
            }),
            (open, "a column missing", |b| b.open.truncate(b.open.len() - 1)),
            (open, "a column cut", |b| b.open[0].0.truncate(3)),
        ];
        for (at, what, f) in breaks {
            let mut broken = saved.clone();
            let mut k = 0;
            for p in broken.runs.iter_mut().flat_map(|r| &mut r.points) {
                if let SavedColumn::Block(b) = &mut p.column {
                    if k == at {
                        f(b);
                    }
                    k += 1;
                }
            }
            assert!(broken.restore(Duration::from_secs(900)).is_err(), "{what}");
        }
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
                SavedColumn::Delta(_) | SavedColumn::Block(_) => false,
            };
            assert!(ok);
            if matches!(p.column, SavedColumn::Packed(_)) {
                p.column = SavedColumn::Delta(column::encode_first_format(&cur, &prev));
            }
            prev = cur;
        }
        // Keyframes stay raw; every other point is in the first format now.
        let deltas = saved.runs[0].points.iter().filter(|p| matches!(p.column, SavedColumn::Delta(_))).count();
        assert!(saved.runs[0].points.iter().all(|p| !matches!(p.column, SavedColumn::Packed(_))) && deltas >= 90);
        let back = saved.restore(Duration::from_secs(3600)).unwrap();
        assert_eq!(points(&back), points(&w));
    }
}
