//! The data and delete objects of a snapshot's inventory, held compactly (#24): a million-object inventory as
//! typed [`InventoryEntry`] values is ~350 MB (a struct of ~176 B, the path, the BLAKE3 hex and the ETag as
//! separate allocations, and the URI); here each object is a fixed slot (the digest as its 32 bytes) and its
//! path in a shared arena of large blocks, about 140 MB for a million objects of ~75-byte paths.
//!
//! A verifier keeps only what it reads: path, layer, size, rows, digest ([`ObjectIndex::with_capacity`]); the
//! URI is derived again from the path when the object is opened ([`super::UriBinding`]), and the ETag and version
//! only count towards the root, computed as the inventory streams by. Sealing also keeps each object's ETag and
//! version ([`ObjectIndex::with_tags`]), which the inventory member and the root need, and gives each entry back
//! whole ([`ObjectIndex::entry`]) as the member is written, its URI derived from its path then.

use crate::evidence::inventory::InventoryEntry;
use crate::model::object::Layer;

/// Bytes per arena block: paths are appended to the last block until it is full, so no block is ever copied
/// to grow (a `String` of every path would double, and copy, its way up).
const BLOCK: usize = 8 << 20;

/// The data and delete objects of an inventory, in canonical order (layer, then path) once
/// [`ObjectIndex::sort`] has run or they were pushed in that order.
#[derive(Default)]
pub(super) struct ObjectIndex {
    blocks: Vec<String>,
    slots: Vec<Slot>,
    /// Per slot, when kept: where its ETag and version are in the arena.
    tags: Option<Vec<Tags>>,
}

/// A string in the arena: block, start, length.
#[derive(Clone, Copy, Default)]
struct Span {
    block: u32,
    start: u32,
    len: u32,
}

/// An object's ETag and version, when kept.
#[derive(Clone, Copy, Default)]
struct Tags {
    e_tag: Option<Span>,
    version: Option<Span>,
}

#[derive(Clone, Copy)]
struct Slot {
    path: Span,
    layer: Layer,
    /// Whether `blake3` holds the entry's digest (its hex parsed); an entry whose digest is not 64 hex digits
    /// never matches any object.
    digest_ok: bool,
    has_rows: bool,
    size: u64,
    rows: u64,
    blake3: [u8; 32],
}

/// One object of an [`ObjectIndex`].
#[derive(Clone, Copy)]
pub(super) struct Object<'a> {
    /// The path as written in the inventory.
    pub path: &'a str,
    /// Its size in bytes, as sealed.
    pub size: u64,
    /// Its rows, from the manifest, as sealed.
    pub record_count: Option<u64>,
    blake3: Option<[u8; 32]>,
}

impl Object<'_> {
    /// The sealed BLAKE3, lowercase hex (as the inventory writes it; a placeholder for a digest that was not
    /// 64 hex digits, which nothing matches).
    pub fn blake3_hex(&self) -> String {
        match &self.blake3 {
            Some(d) => hex::encode(d),
            None => "(not a BLAKE3 digest)".into(),
        }
    }

    /// Whether `hex` (lowercase, as [`crate::io::store::Storage::hash`] gives it) is the sealed digest.
    pub fn digest_is(&self, hex: &str) -> bool {
        let mut d = [0u8; 32];
        self.blake3.is_some() && hex::decode_to_slice(hex, &mut d).is_ok() && Some(d) == self.blake3
    }
}

impl ObjectIndex {
    /// An empty index with room for `objects` slots.
    pub fn with_capacity(objects: usize) -> Self {
        Self {
            blocks: Vec::new(),
            slots: Vec::with_capacity(objects),
            tags: None,
        }
    }

    /// An empty index with room for `objects` slots that also keeps each object's ETag and version.
    pub fn with_tags(objects: usize) -> Self {
        Self {
            tags: Some(Vec::with_capacity(objects)),
            ..Self::with_capacity(objects)
        }
    }

    /// Copies `s` into the arena.
    fn intern(&mut self, s: &str) -> Span {
        let len = s.len();
        let fits = self.blocks.last().is_some_and(|b| b.capacity() - b.len() >= len);
        if !fits {
            self.blocks.push(String::with_capacity(BLOCK.max(len)));
        }
        let block_at = self.blocks.len() - 1;
        let Some(block) = self.blocks.last_mut() else {
            return Span::default(); // unreachable: a block was pushed above
        };
        let start = block.len();
        block.push_str(s);
        // A block holds at most max(BLOCK, one string) bytes, and a path is far below 4 GiB.
        Span {
            block: u32::try_from(block_at).unwrap_or(u32::MAX),
            start: u32::try_from(start).unwrap_or(u32::MAX),
            len: u32::try_from(len).unwrap_or(u32::MAX),
        }
    }

    fn text(&self, s: Span) -> &str {
        let block = &self.blocks[s.block as usize];
        &block[s.start as usize..s.start as usize + s.len as usize]
    }

    /// Adds a data or delete entry (its path, and when kept its ETag and version, copied into the arena).
    pub fn push(&mut self, e: &InventoryEntry) {
        let path = self.intern(&e.path);
        if self.tags.is_some() {
            let t = Tags {
                e_tag: e.e_tag.as_deref().map(|s| self.intern(s)),
                version: e.version.as_deref().map(|s| self.intern(s)),
            };
            if let Some(tags) = self.tags.as_mut() {
                tags.push(t);
            }
        }
        let mut blake3 = [0u8; 32];
        let digest_ok = hex::decode_to_slice(&e.blake3, &mut blake3).is_ok();
        self.slots.push(Slot {
            path,
            layer: e.layer,
            digest_ok,
            has_rows: e.record_count.is_some(),
            size: e.size,
            rows: e.record_count.unwrap_or(0),
            blake3,
        });
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    fn path_of(&self, s: &Slot) -> &str {
        self.text(s.path)
    }

    /// The entry at position `at`, whole but for its `uri` (empty) and `copy` (none): a data or delete entry's
    /// URI is derived from its path by the caller. A digest that was not hex comes back as the placeholder
    /// [`Object::blake3_hex`] gives.
    pub fn entry(&self, at: usize) -> InventoryEntry {
        let s = &self.slots[at];
        let o = self.object(s);
        let tags = self.tags.as_ref().map(|t| t[at]).unwrap_or_default();
        InventoryEntry {
            path: o.path.to_owned(),
            uri: String::new(),
            layer: s.layer,
            size: s.size,
            blake3: o.blake3_hex(),
            e_tag: tags.e_tag.map(|t| self.text(t).to_owned()),
            version: tags.version.map(|t| self.text(t).to_owned()),
            record_count: o.record_count,
            copy: None,
        }
    }

    fn object(&self, s: &Slot) -> Object<'_> {
        Object {
            path: self.path_of(s),
            size: s.size,
            record_count: s.has_rows.then_some(s.rows),
            blake3: s.digest_ok.then_some(s.blake3),
        }
    }

    /// The object at position `at`.
    pub fn get(&self, at: usize) -> Object<'_> {
        self.object(&self.slots[at])
    }

    /// Every object, in the index's order.
    pub fn iter(&self) -> impl Iterator<Item = Object<'_>> {
        self.slots.iter().map(|s| self.object(s))
    }

    /// Puts the objects in canonical order (layer, then path), unless they already are.
    pub fn sort(&mut self) {
        let key = |s: &Slot| (s.layer, self.path_of(s));
        if self.slots.is_sorted_by(|a, b| key(a) <= key(b)) {
            return;
        }
        // Tags move with their slots: sorted together, by position.
        let slots = std::mem::take(&mut self.slots);
        let mut order: Vec<u32> = (0..u32::try_from(slots.len()).unwrap_or(u32::MAX)).collect();
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (&slots[a as usize], &slots[b as usize]);
            (a.layer, self.path_of(a)).cmp(&(b.layer, self.path_of(b)))
        });
        self.slots = order.iter().map(|&i| slots[i as usize]).collect();
        drop(slots);
        if let Some(tags) = self.tags.take() {
            self.tags = Some(order.iter().map(|&i| tags[i as usize]).collect());
        }
    }

    /// The position of the object of `layer` at `path` (the index in canonical order).
    pub fn find(&self, layer: Layer, path: &str) -> Option<usize> {
        self.slots
            .binary_search_by(|s| (s.layer, self.path_of(s)).cmp(&(layer, path)))
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(layer: Layer, path: &str, blake3: &str, rows: Option<u64>) -> InventoryEntry {
        InventoryEntry {
            path: path.into(),
            uri: format!("file:///t/{path}"),
            layer,
            size: path.len() as u64,
            blake3: blake3.into(),
            e_tag: Some("e".into()),
            version: None,
            record_count: rows,
            copy: None,
        }
    }

    #[test]
    fn objects_keep_path_size_rows_and_digest_and_are_found_in_canonical_order_across_blocks() {
        let digest = blake3::hash(b"x").to_hex().to_string();
        let mut index = ObjectIndex::with_capacity(0);
        // Long paths so that the arena spans several blocks; pushed out of order.
        let long = "p".repeat(BLOCK / 3);
        let mut paths: Vec<String> = (0..7).rev().map(|i| format!("t/data/{i}-{long}")).collect();
        for p in &paths {
            index.push(&entry(Layer::Data, p, &digest, Some(3)));
        }
        index.push(&entry(Layer::PositionDeletes, "t/data/0-a", "not hex", None));
        assert!(index.blocks.len() > 1, "the paths span several blocks");
        index.sort();
        paths.sort();
        let got: Vec<&str> = index.iter().map(|o| o.path).collect();
        let mut want: Vec<&str> = paths.iter().map(String::as_str).collect();
        want.push("t/data/0-a");
        assert_eq!(got, want, "data before deletes, each by path");
        let at = index.find(Layer::Data, &paths[2]).expect("found");
        let o = index.get(at);
        assert_eq!(
            (o.path, o.size, o.record_count),
            (paths[2].as_str(), paths[2].len() as u64, Some(3))
        );
        assert!(o.digest_is(&digest) && o.blake3_hex() == digest);
        assert!(!o.digest_is(blake3::hash(b"y").to_hex().as_ref()));
        assert_eq!(
            index.find(Layer::PositionDeletes, &paths[2]),
            None,
            "the layer is part of the key"
        );
        let bad = index.get(index.find(Layer::PositionDeletes, "t/data/0-a").expect("found"));
        assert!(!bad.digest_is(&digest) && bad.record_count.is_none());
        assert_eq!(bad.blake3_hex(), "(not a BLAKE3 digest)");
    }

    #[test]
    fn with_tags_every_entry_comes_back_whole_but_for_its_uri_in_canonical_order() {
        let digest = blake3::hash(b"x").to_hex().to_string();
        let mut entries: Vec<InventoryEntry> = (0..50)
            .rev()
            .map(|i| {
                let mut e = entry(
                    if i % 3 == 0 {
                        Layer::EqualityDeletes
                    } else {
                        Layer::Data
                    },
                    &format!("t/data/{i:03}.parquet"),
                    &digest,
                    (i % 2 == 0).then_some(i),
                );
                e.e_tag = (i % 5 != 0).then(|| format!("\"etag-{i}\""));
                e.version = (i % 7 == 0).then(|| format!("v{i}"));
                e
            })
            .collect();
        let mut index = ObjectIndex::with_tags(entries.len());
        entries.iter().for_each(|e| index.push(e));
        index.sort();
        entries.sort_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
        for (at, want) in entries.iter().enumerate() {
            let mut want = want.clone();
            want.uri = String::new();
            assert_eq!(index.entry(at), want);
        }
        // Without tags, an entry comes back without its ETag and version.
        let mut lean = ObjectIndex::with_capacity(1);
        lean.push(&entries[0]);
        assert_eq!((lean.entry(0).e_tag, lean.entry(0).version), (None, None));
    }
}
