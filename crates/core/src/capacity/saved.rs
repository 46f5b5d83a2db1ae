//! What a `state_dir` snapshot keeps of the capacity book (docs/capacity.md#history): per
//! target, each model's history (its recent intervals and the sums of the older ones), the
//! requests still waiting for their interval, the saturation state and the last report.
//! A restored series goes on from where it was: its estimates are not made again until its
//! next interval.
//!
//! The part starts with its format ([`FORMAT`]): a snapshot's capacity part of another
//! format (one written before the older intervals were kept as sums held every interval)
//! reads as an empty part of that format, which a restore drops with its reason, rather than
//! as garbage or a corrupt section.

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeTuple;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::history::History;
use super::saturation::Saturation;
use super::{CapacityBook, CapacityReport, Pending, Series};

/// The format of [`SavedCapacity`], written first. Any other first number (the number of
/// series, in the format before it) is another format.
pub const FORMAT: u32 = 0x4341_5002;

/// One target's series.
#[derive(Debug, Clone)]
pub struct SavedCapacity {
    series: Vec<SavedSeries>,
    /// The format it was read in: [`FORMAT`], or another whose series were not read.
    format: u32,
}

impl Default for SavedCapacity {
    fn default() -> SavedCapacity {
        SavedCapacity { series: Vec::new(), format: FORMAT }
    }
}

impl Serialize for SavedCapacity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&FORMAT)?;
        t.serialize_element(&self.series)?;
        t.end()
    }
}

impl<'de> Deserialize<'de> for SavedCapacity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SavedCapacity, D::Error> {
        struct Saved;
        impl<'de> Visitor<'de> for Saved {
            type Value = SavedCapacity;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a capacity part: its format, then its series")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SavedCapacity, A::Error> {
                let format: u32 = seq.next_element()?.unwrap_or_default();
                if format != FORMAT {
                    // The rest is of a shape this build does not know: left unread (the
                    // part is the last thing in its section).
                    return Ok(SavedCapacity { series: Vec::new(), format });
                }
                let series = seq.next_element()?.unwrap_or_default();
                Ok(SavedCapacity { series, format })
            }
        }
        d.deserialize_tuple(2, Saved)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SavedSeries {
    model: String,
    /// The SLOs the history was judged against, with their objectives.
    slos: Vec<(String, f64)>,
    history: History,
    pending: Vec<Pending>,
    saturation: Saturation,
    latest: Option<CapacityReport>,
    /// Whether `latest`'s estimates predate the newest interval.
    stale: bool,
}

impl SavedCapacity {
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Series held.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether it was read in another format than this build's: its series are dropped.
    pub fn other_format(&self) -> Option<u32> {
        (self.format != FORMAT).then_some(self.format)
    }
}

impl CapacityBook {
    /// Whether `target` has a series with history.
    pub fn holds(&self, target: &str) -> bool {
        self.series
            .range((target.to_string(), String::new())..)
            .take_while(|((t, _), _)| t == target)
            .any(|(_, s)| !s.history.is_empty())
    }

    /// What a snapshot keeps of `target`'s series.
    pub fn saved(&self, target: &str) -> SavedCapacity {
        let series = self
            .series
            .range((target.to_string(), String::new())..)
            .take_while(|((t, _), _)| t == target)
            .filter(|(_, s)| !s.history.is_empty())
            .map(|((_, model), s)| SavedSeries {
                model: model.clone(),
                slos: s.history.objectives().iter().zip(&s.slos).map(|(o, n)| (n.clone(), *o)).collect(),
                history: s.history.clone(),
                pending: s.pending.clone(),
                saturation: s.saturation.clone(),
                latest: s.latest.clone().filter(|_| s.estimated == Some(s.generation)),
                stale: s.stale,
            })
            .collect();
        SavedCapacity { series, format: FORMAT }
    }

    /// Takes back `target`'s saved series whose SLOs (names and objectives, in order) and
    /// estimator settings are still the book's; the others start empty, as their history
    /// was judged against other SLOs. Returns how many were taken (none from a part of
    /// another format, [`SavedCapacity::other_format`]).
    pub fn restore(&mut self, target: &str, saved: SavedCapacity) -> usize {
        let mut taken = 0;
        for s in saved.series {
            let now: Vec<(String, f64)> = self
                .slos
                .iter()
                .filter(|slo| slo.applies_to(target, &s.model))
                .map(|slo| (slo.name.clone(), slo.objective.get()))
                .collect();
            let objectives: Vec<f64> = now.iter().map(|(_, o)| *o).collect();
            if now != s.slos || !s.history.matches(&objectives, &self.cfg.fit) {
                continue;
            }
            let key = (target.to_string(), s.model);
            let estimated = s.latest.is_some().then_some(0);
            // Without a report the next interval makes one, and queues its refresh.
            let stale = s.stale && estimated.is_some();
            if stale {
                self.queue.push_back(key.clone());
            }
            // Refreshes due at the save go on spread over the ticks from the newest interval
            // saved, as they would have, rather than all in the first tick after the restore.
            let newest = s.history.last().map(|i| i.t_ms);
            self.last_t_ms = self.last_t_ms.max(newest);
            self.series.insert(
                key,
                Series {
                    pending: s.pending,
                    history: s.history,
                    slos: now.into_iter().map(|(n, _)| n).collect(),
                    saturation: s.saturation,
                    latest: s.latest,
                    generation: 0,
                    estimated,
                    stale,
                },
            );
            taken += 1;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_of_another_format_reads_as_empty_and_says_so() {
        let empty = postcard::to_allocvec(&SavedCapacity::default()).unwrap();
        let back: SavedCapacity = postcard::from_bytes(&empty).unwrap();
        assert_eq!((back.other_format(), back.len()), (None, 0));
        // The format before: the number of series first, then series of another shape.
        let older = postcard::to_allocvec(&(1u64, "m", [7u8; 32])).unwrap();
        let back: SavedCapacity = postcard::from_bytes(&older).unwrap();
        assert_eq!((back.other_format(), back.len()), (Some(1), 0));
        let mut book = CapacityBook::default();
        assert_eq!(book.restore("a", back), 0);
    }
}
