//! The bundle inventory: what a sealed bundle says it holds, and the bundle root over it (DESIGN §5).
//!
//! What it does: [`InventoryEntry`] is one object a snapshot reaches (path as written, storage URI read,
//! layer, size, BLAKE3, ETag, version ID); [`BundlePredicate`] is the signed predicate of a bundle statement
//! that carries the inventory; [`canonical_inventory`] gives the inventory's canonical bytes (one JSON array
//! per object, sorted by layer then path) and [`inventory_root`] the **bundle root**, their BLAKE3.
//!
//! What it may use: the shared nouns of `model` ([`Layer`]) and serde and the hash crates. It is pure: no
//! I/O, no async, no storage or registry. Sealing ([`crate::bundle::seal()`]) fills these types from
//! storage; verifying ([`crate::bundle::verify()`]) checks them against it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::object::Layer;

/// One object of the inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryEntry {
    /// The path as written in the metadata (for the metadata file: its location).
    pub path: String,
    /// The storage URI it was read from when sealed.
    pub uri: String,
    /// Its layer.
    pub layer: Layer,
    /// Size in bytes.
    pub size: u64,
    /// BLAKE3, lowercase hex.
    pub blake3: String,
    /// ETag at sealing time.
    pub e_tag: Option<String>,
    /// Version ID at sealing time (versioned stores).
    pub version: Option<String>,
    /// Rows, for data and delete files (from the manifest).
    pub record_count: Option<u64>,
    /// Bundle member holding a byte copy (metadata layers only).
    pub copy: Option<String>,
}

/// The signed predicate of a bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundlePredicate {
    /// Bundle id (`<snapshot id>-<first 16 hex of the root>`).
    pub bundle_id: String,
    /// Table UUID.
    pub table_uuid: String,
    /// Table location as written in the metadata.
    pub table_location: String,
    /// The snapshot.
    pub snapshot_id: i64,
    /// Its commit time: the declared recovery point.
    pub snapshot_timestamp_ms: i64,
    /// Its sequence number.
    pub sequence_number: i64,
    /// Table format version.
    pub format_version: u8,
    /// When the bundle was sealed (RFC 3339).
    pub sealed_at: String,
    /// The metadata location of the table generation sealed.
    pub source_metadata_location: String,
    /// BLAKE3 of that metadata file.
    pub source_metadata_blake3: String,
    /// Root digest over the canonical inventory.
    pub bundle_root: String,
    /// Number of objects.
    pub objects: usize,
    /// Total bytes.
    pub bytes: u64,
    /// Every object.
    pub inventory: Vec<InventoryEntry>,
    /// Present on cold-backup bundles ([`crate::ops::backup`]): the declared recovery point. Object URIs
    /// of such a bundle point into the backup store, not at the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupInfo>,
    /// Present on orphan bundles (kind `orphans`, [`crate::ops::orphans`]): the unreferenced files of one
    /// orphan candidate, where each one's bytes are held until the purge, and why they were eligible. The
    /// inventory then holds every file (path as the table names it, its URI at the table location, size,
    /// BLAKE3, ETag, version id) and `snapshot_id` is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphans: Option<OrphanInfo>,
}

/// How an orphan bundle holds its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrphanHold {
    /// A versioned bucket: the file got a delete marker; its version (the inventory's `version`) stays.
    DeleteMarker,
    /// A store without versions: a write-once copy at `<quarantine_root>/<BLAKE3>` verified before the file
    /// left the table location.
    QuarantineCopy,
}

/// Why an orphan bundle's files were eligible, and where they are held (signed with the bundle).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanInfo {
    /// The orphan candidate (`o-…`).
    pub candidate_id: String,
    /// The table root the files were listed under (canonical storage URI): every entry's `uri` is its path
    /// under `table_location` rebased onto it.
    pub table_root: String,
    /// How the files are held.
    pub hold: OrphanHold,
    /// With [`OrphanHold::QuarantineCopy`]: the copies' folder (the policy's `orphanQuarantine`, then the
    /// table UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_root: Option<String>,
    /// The table generation the candidate was planned at (metadata location).
    pub planned_metadata_location: String,
    /// When the table location was listed for the plan (RFC 3339).
    pub listed_at: String,
    /// The age rule: every file was last modified more than this many milliseconds before `listed_at`
    /// (`orphanSafetyInterval`).
    pub orphan_safety_interval_ms: i64,
    /// The open writers' staging prefixes checked (none of the files lies under one).
    pub writer_prefixes: Vec<String>,
    /// The legal-hold generation checked (no hold covers a file).
    pub hold_generation: u64,
    /// The holds checked, by id.
    pub holds: Vec<String>,
}

impl OrphanInfo {
    /// Where a file of the inventory is held: its URI and, for a delete marker, the version behind it.
    #[must_use]
    pub fn held_at(&self, e: &InventoryEntry) -> (String, Option<String>) {
        match (self.hold, &self.quarantine_root) {
            (OrphanHold::QuarantineCopy, Some(root)) => (format!("{}/{}", root.trim_end_matches('/'), e.blake3), None),
            _ => (e.uri.clone(), e.version.clone()),
        }
    }
}

/// The declared disaster-recovery point a cold-backup bundle was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupInfo {
    /// The registry's checkpoint id.
    pub checkpoint_id: String,
    /// The snapshot the checkpoint declares (equal to the bundle's snapshot).
    pub declared_snapshot_id: i64,
    /// The declared recovery point (RFC 3339): RPO = this minus the recovered snapshot's commit time.
    pub declared_at: String,
    /// The backup store's root (objects live under `<root>/objects/<blake3>`).
    pub backup_root: String,
}

/// One share of a bundle's objects, so that one snapshot is verified across N machines
/// (`restore --shard I/N`, `drill run --shard I/N --split objects`).
///
/// A data or delete object belongs to shard `u64::from_le_bytes(BLAKE3(path)[0..8]) mod count`, its path as
/// written in the inventory; the metadata layers (table metadata, manifest list, manifests) belong to shard 0.
/// Every shard still checks the signature, the root and the metadata layers (it needs them to check its own
/// objects), but only shard 0 reports their findings and counts, so that the shards' findings and counts add
/// up to exactly those of one whole verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectShard {
    /// This share, `0..count`.
    pub index: usize,
    /// How many shares.
    pub count: usize,
}

impl ObjectShard {
    /// Parses `I/N` (0-based `I < N`), as `--shard` takes it.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `--shard` and the rule.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || Error::invalid("--shard", format!("{s:?}: expected I/N with 0 <= I < N, e.g. 0/4"));
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    /// Whether inventory entry `e` belongs to this share.
    #[must_use]
    pub fn owns(&self, e: &InventoryEntry) -> bool {
        if e.layer.is_metadata() {
            return self.index == 0;
        }
        let h = blake3::hash(e.path.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&h.as_bytes()[..8]);
        let count = u64::try_from(self.count).unwrap_or(u64::MAX).max(1);
        usize::try_from(u64::from_le_bytes(first) % count).ok() == Some(self.index)
    }

    /// What this share holds of `inventory`: the number of its objects and their root (BLAKE3 of their
    /// canonical inventory lines, in canonical order, as the bundle root is over all of them).
    #[must_use]
    pub fn part(&self, inventory: &[InventoryEntry]) -> ShardPart {
        let mine: Vec<&InventoryEntry> = inventory.iter().filter(|e| self.owns(e)).collect();
        ShardPart {
            index: self.index,
            count: self.count,
            objects: mine.len(),
            inventory_objects: inventory.len(),
            root: root_of(mine),
        }
    }
}

/// What one share of a bundle's objects holds ([`ObjectShard::part`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardPart {
    /// The share, `0..count`.
    pub index: usize,
    /// How many shares.
    pub count: usize,
    /// Objects of the inventory in this share.
    pub objects: usize,
    /// Objects in the whole inventory.
    pub inventory_objects: usize,
    /// BLAKE3 of the canonical inventory lines of this share's objects (the share's root).
    pub root: String,
}

/// Canonical bytes of an inventory: one JSON array per object, sorted by layer then path.
#[must_use]
pub fn canonical_inventory(entries: &[InventoryEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for_each_canonical_line(entries, |line| out.extend_from_slice(line));
    out
}

/// Hands each line of [`canonical_inventory`] (with its newline) to `each`, in order, without building the
/// whole text (a few hundred MB for a million objects).
fn for_each_canonical_line(entries: &[InventoryEntry], each: impl FnMut(&[u8])) {
    for_each_canonical_line_of(entries.iter().collect(), each);
}

fn for_each_canonical_line_of(mut sorted: Vec<&InventoryEntry>, mut each: impl FnMut(&[u8])) {
    sorted.sort_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    let mut line = Vec::with_capacity(256);
    for e in sorted {
        line.clear();
        let value = serde_json::json!([e.layer, e.path, e.size, e.blake3, e.e_tag, e.version]);
        line.extend_from_slice(value.to_string().as_bytes());
        line.push(b'\n');
        each(&line);
    }
}

/// BLAKE3 (the bundle root) and SHA-256 of the canonical inventory, lowercase hex, streamed.
#[must_use]
pub fn canonical_digests(entries: &[InventoryEntry]) -> (String, String) {
    use sha2::Digest as _;
    let mut b3 = blake3::Hasher::new();
    let mut sha = sha2::Sha256::new();
    for_each_canonical_line(entries, |line| {
        b3.update(line);
        sha.update(line);
    });
    (b3.finalize().to_hex().to_string(), hex::encode(sha.finalize()))
}

/// BLAKE3 of the canonical lines of some of an inventory's entries (in canonical order, whatever the order
/// given): the root of one share of a bundle's objects.
#[must_use]
pub fn root_of(entries: Vec<&InventoryEntry>) -> String {
    let mut b3 = blake3::Hasher::new();
    for_each_canonical_line_of(entries, |line| {
        b3.update(line);
    });
    b3.finalize().to_hex().to_string()
}

/// The bundle root: BLAKE3 of the canonical inventory.
#[must_use]
pub fn inventory_root(entries: &[InventoryEntry]) -> String {
    canonical_digests(entries).0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(layer: Layer, path: &str) -> InventoryEntry {
        InventoryEntry {
            path: path.into(),
            uri: format!("file:///t/{path}"),
            layer,
            size: 7,
            blake3: "ab".into(),
            e_tag: Some("e".into()),
            version: None,
            record_count: Some(3),
            copy: None,
        }
    }

    #[test]
    fn every_object_is_in_exactly_one_share_and_the_shares_spread_and_add_up() {
        let mut entries = vec![
            entry(Layer::Metadata, "t/metadata/v1.metadata.json"),
            entry(Layer::ManifestList, "t/metadata/snap-1.avro"),
            entry(Layer::Manifest, "t/metadata/m0.avro"),
        ];
        entries.extend((0..4000).map(|i| entry(Layer::Data, &format!("t/data/{i:05}.parquet"))));
        let shares: Vec<ObjectShard> = (0..4).map(|index| ObjectShard { index, count: 4 }).collect();
        for e in &entries {
            let owners = shares.iter().filter(|s| s.owns(e)).count();
            assert_eq!(owners, 1, "{}", e.path);
            if e.layer.is_metadata() {
                assert!(shares[0].owns(e), "{} belongs to share 0", e.path);
            }
        }
        let parts: Vec<ShardPart> = shares.iter().map(|s| s.part(&entries)).collect();
        assert_eq!(parts.iter().map(|p| p.objects).sum::<usize>(), entries.len());
        for p in &parts {
            assert_eq!(p.inventory_objects, entries.len());
            // 1,000 data objects expected per share: the path hash spreads them.
            let data = p.objects - if p.index == 0 { 3 } else { 0 };
            assert!((850..=1150).contains(&data), "{p:?}");
        }
        // A share's root is the root over its own entries, in canonical order whatever the order given.
        let mine: Vec<InventoryEntry> = entries.iter().filter(|e| shares[2].owns(e)).cloned().rev().collect();
        assert_eq!(parts[2].root, inventory_root(&mine));
        // One share of one holds everything: its root is the bundle root.
        assert_eq!(
            ObjectShard { index: 0, count: 1 }.part(&entries).root,
            inventory_root(&entries)
        );
        for bad in ["4/4", "1/0", "x/2", "2", "-1/3"] {
            let e = ObjectShard::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--shard") && e.contains("I/N"), "{bad}: {e}");
        }
        assert_eq!(ObjectShard::parse("3/8").unwrap(), ObjectShard { index: 3, count: 8 });
    }

    #[test]
    fn the_root_is_the_blake3_of_the_canonical_lines_sorted_by_layer_then_path() {
        use sha2::Digest as _;
        let entries = [
            entry(Layer::Data, "t/data/b.parquet"),
            entry(Layer::Data, "t/data/a.parquet"),
            entry(Layer::Metadata, "t/metadata/v1.metadata.json"),
        ];
        let bytes = canonical_inventory(&entries);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            concat!(
                "[\"metadata\",\"t/metadata/v1.metadata.json\",7,\"ab\",\"e\",null]\n",
                "[\"data\",\"t/data/a.parquet\",7,\"ab\",\"e\",null]\n",
                "[\"data\",\"t/data/b.parquet\",7,\"ab\",\"e\",null]\n",
            )
        );
        // The streamed digests are the one-shot digests of those bytes; uri, record count and copy are not in them.
        let (root, sha) = canonical_digests(&entries);
        assert_eq!(root, blake3::hash(&bytes).to_hex().to_string());
        assert_eq!(sha, hex::encode(sha2::Sha256::digest(&bytes)));
        assert_eq!(inventory_root(&entries), root);
        let mut moved = entries.clone();
        moved[0].uri = "s3://elsewhere/b.parquet".into();
        moved[0].record_count = None;
        assert_eq!(inventory_root(&moved), root);
    }
}
