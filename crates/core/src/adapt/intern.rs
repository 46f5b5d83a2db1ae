//! Models and shards as small numbers while the samples are filed.
//!
//! Filing a sample under an owned `(model, shard)` string pair cost four allocations and a
//! string-keyed tree lookup per sample, most of the adapter's time on a large scrape
//! (docs/benchmarks.md#ingest-parse--adapt--push). Here a model is its label value borrowed
//! from the exposition, and a shard is the sample's label slice seen through a filter; each
//! gets a number the first time it is seen, and a shard is rendered to its [`ShardKey`]
//! string once. Consecutive samples mostly repeat the previous one's model and shard (a
//! histogram's buckets differ only in `le`), so each interner compares with the previous
//! sample before it hashes.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use crate::canonical::ShardKey;
use crate::parse::{Label, render_series};

/// A fast seeded hasher (foldhash): keys come from scraped label values, so the seed is
/// random per process, and SipHash cost more than the rest of a lookup.
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Label names that never tell one source series from another within a model: the
/// bucket bound and the spec-decode position are part of the quantity, not the shard.
const NOT_SHARD: [&str; 2] = ["le", "position"];

/// Model names, numbered in order of first appearance.
#[derive(Default)]
pub(super) struct Models<'e> {
    names: Vec<&'e str>,
    ids: FastMap<&'e str, u32>,
    last: Option<(&'e str, u32)>,
}

impl<'e> Models<'e> {
    pub(super) fn id(&mut self, name: &'e str) -> u32 {
        if let Some((last, id)) = self.last
            && last == name
        {
            return id;
        }
        let next = self.names.len() as u32;
        let id = *self.ids.entry(name).or_insert(next);
        if id == next {
            self.names.push(name);
        }
        self.last = Some((name, id));
        id
    }

    pub(super) fn name(&self, id: u32) -> &'e str {
        self.names[id as usize]
    }

    pub(super) fn len(&self) -> usize {
        self.names.len()
    }
}

/// A sample's shard: its labels without the model label, `le` and `position`, in the
/// scrape's order. Equal shards render to equal [`ShardKey`]s and the other way round
/// (label names cannot contain `=` or `"`, and values are re-escaped).
#[derive(Clone, Copy)]
pub(super) struct ShardRef<'e> {
    pub labels: &'e [Label<'e>],
    pub model_label: Option<&'static str>,
}

impl<'e> ShardRef<'e> {
    fn kept(self) -> impl Iterator<Item = &'e Label<'e>> {
        self.labels.iter().filter(move |l| Some(l.name) != self.model_label && !NOT_SHARD.contains(&l.name))
    }

    fn render(self) -> ShardKey {
        let kept: Vec<Label<'_>> = self.kept().cloned().collect();
        let rendered = render_series("", &kept);
        rendered.strip_prefix('{').and_then(|r| r.strip_suffix('}')).unwrap_or("").to_string()
    }
}

impl PartialEq for ShardRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (mut a, mut b) = (self.kept(), other.kept());
        loop {
            match (a.next(), b.next()) {
                (None, None) => return true,
                (Some(x), Some(y)) if x.name == y.name && x.value == y.value => {}
                _ => return false,
            }
        }
    }
}

impl Eq for ShardRef<'_> {}

impl Hash for ShardRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for l in self.kept() {
            h.write(l.name.as_bytes());
            h.write_u8(0xff); // not UTF-8: ends the name
            h.write(l.value.as_bytes());
            h.write_u8(0xff);
        }
    }
}

/// Shards, numbered in order of first appearance, each rendered once.
#[derive(Default)]
pub(super) struct Shards<'e> {
    keys: Vec<ShardKey>,
    ids: FastMap<ShardRef<'e>, u32>,
    /// Shards given as strings (the KV-capacity info gauge names its shard by `engine` only).
    literal: FastMap<String, u32>,
    last: Option<(ShardRef<'e>, u32)>,
}

impl<'e> Shards<'e> {
    pub(super) fn id(&mut self, shard: ShardRef<'e>) -> u32 {
        if let Some((last, id)) = self.last
            && last == shard
        {
            return id;
        }
        let next = self.keys.len() as u32;
        let id = *self.ids.entry(shard).or_insert(next);
        if id == next {
            self.keys.push(shard.render());
        }
        self.last = Some((shard, id));
        id
    }

    pub(super) fn literal(&mut self, key: String) -> u32 {
        let next = self.keys.len() as u32;
        let id = *self.literal.entry(key.clone()).or_insert(next);
        if id == next {
            self.keys.push(key);
        }
        id
    }

    pub(super) fn key(&self, id: u32) -> &ShardKey {
        &self.keys[id as usize]
    }
}
