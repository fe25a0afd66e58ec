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
    /// Every object, inline: bundles sealed before the inventory member (#24) carry it here. A bundle with an
    /// [`InventoryMember`] has none inline (the key is absent); the readers fill this from the member once its
    /// signed digests match ([`MemberReader`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<InventoryEntry>,
    /// The inventory as a separate member of the bundle folder ([`INVENTORY_MEMBER`]), bound to this signed
    /// predicate by its size, object count, SHA-256 and BLAKE3. Absent on bundles that carry it inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory_member: Option<InventoryMember>,
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
    /// A store without versions: a write-once copy under `quarantine_root` (named as [`OrphanInfo::copy_naming`]
    /// says) verified before the file left the table location.
    QuarantineCopy,
}

/// How the write-once copies of an orphan bundle are named under its `quarantine_root`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyNaming {
    /// `<BLAKE3>-<first 16 hex digits of BLAKE3(path)>.orphan-copy`: one copy per held file, so purging one
    /// file's copy never takes another file's bytes (two orphans with the same bytes once shared a `<BLAKE3>` copy).
    /// The suffix ([`ORPHAN_COPY_SUFFIX`]) marks it as lakedrill's: a table whose location holds such a file is
    /// refused by `plan` (a quarantine folder inside another table would have its copies proposed as orphans).
    PerFile,
}

/// The file name suffix of an orphan quarantine copy ([`CopyNaming::PerFile`]).
pub const ORPHAN_COPY_SUFFIX: &str = ".orphan-copy";

impl CopyNaming {
    /// The copy's name for an inventory entry.
    #[must_use]
    pub fn name(self, e: &InventoryEntry) -> String {
        match self {
            CopyNaming::PerFile => format!(
                "{}-{}{ORPHAN_COPY_SUFFIX}",
                e.blake3,
                &blake3::hash(e.path.as_bytes()).to_hex()[..16]
            ),
        }
    }
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
    /// table UUID, then — since copies are named per file — the candidate id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_root: Option<String>,
    /// With [`OrphanHold::QuarantineCopy`]: how the copies are named. Absent in bundles of earlier releases,
    /// whose copies are named `<BLAKE3>` (shared by files with the same bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_naming: Option<CopyNaming>,
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
            (OrphanHold::QuarantineCopy, Some(root)) => {
                let name = self.copy_naming.map_or_else(|| e.blake3.clone(), |n| n.name(e));
                (format!("{}/{name}", root.trim_end_matches('/')), None)
            }
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

/// File name of a bundle's inventory member: one JSON object per line (an [`InventoryEntry`], keys sorted), in
/// canonical order (layer, then path), each line ending with a newline.
pub const INVENTORY_MEMBER: &str = "inventory.jsonl";

/// How the signed predicate names its inventory member: a verifier reads the file, checks these against it with
/// standard tools (`wc -c`, `wc -l`, `sha256sum`, `b3sum`), and recomputes the bundle root from its lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryMember {
    /// The member's file name in the bundle folder ([`INVENTORY_MEMBER`]).
    pub name: String,
    /// Lines, one per object.
    pub objects: usize,
    /// The file's size in bytes.
    pub bytes: u64,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    /// BLAKE3 of the file, lowercase hex.
    pub blake3: String,
}

/// The bundle root and the canonical SHA-256 (the statement subject's digests) of an inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanonicalDigests {
    /// BLAKE3 of the canonical inventory: the bundle root.
    pub root: String,
    /// SHA-256 of the canonical inventory.
    pub sha256: String,
}

/// The running digests of the canonical inventory and of the member file, and the order check, shared by
/// [`MemberWriter`] and [`MemberReader`].
struct Digests {
    canonical_b3: blake3::Hasher,
    canonical_sha: sha2::Sha256,
    file_b3: blake3::Hasher,
    file_sha: sha2::Sha256,
    bytes: u64,
    objects: usize,
    /// The last entry's layer and path (the path's buffer reused line after line).
    last: Option<Layer>,
    last_path: String,
    line: Vec<u8>,
}

impl Digests {
    fn new() -> Self {
        use sha2::Digest as _;
        Self {
            canonical_b3: blake3::Hasher::new(),
            canonical_sha: sha2::Sha256::new(),
            file_b3: blake3::Hasher::new(),
            file_sha: sha2::Sha256::new(),
            bytes: 0,
            objects: 0,
            last: None,
            last_path: String::new(),
            line: Vec::with_capacity(256),
        }
    }

    /// One entry and its member line (newline included): the order is checked, both digests advance.
    fn add(&mut self, e: &InventoryEntry, member_line: &[u8]) -> std::result::Result<(), String> {
        self.add_fields(&Fields::of(e), member_line)
    }

    /// [`Digests::add`] of an entry's canonical fields.
    fn add_fields(&mut self, e: &Fields<'_>, member_line: &[u8]) -> std::result::Result<(), String> {
        use sha2::Digest as _;
        if let Some(layer) = self.last
            && (layer, self.last_path.as_str()) >= (e.layer, e.path)
        {
            return Err(format!(
                "{:?} {} is not after {:?} {}: the inventory must be in canonical order (layer, then path), each object once",
                e.layer, e.path, layer, self.last_path
            ));
        }
        self.last = Some(e.layer);
        self.last_path.clear();
        self.last_path.push_str(e.path);
        canonical_fields(e, &mut self.line);
        self.canonical_b3.update(&self.line);
        self.canonical_sha.update(&self.line);
        self.file_b3.update(member_line);
        self.file_sha.update(member_line);
        self.bytes += member_line.len() as u64;
        self.objects += 1;
        Ok(())
    }

    fn finish(self) -> (CanonicalDigests, InventoryMember) {
        use sha2::Digest as _;
        (
            CanonicalDigests {
                root: self.canonical_b3.finalize().to_hex().to_string(),
                sha256: hex::encode(self.canonical_sha.finalize()),
            },
            InventoryMember {
                name: INVENTORY_MEMBER.to_owned(),
                objects: self.objects,
                bytes: self.bytes,
                sha256: hex::encode(self.file_sha.finalize()),
                blake3: self.file_b3.finalize().to_hex().to_string(),
            },
        )
    }
}

/// Writes an inventory member line by line into a buffer its caller drains in chunks ([`MemberWriter::take`]), so
/// that a million entries never exist as one text; the digests the predicate signs come out of
/// [`MemberWriter::finish`].
pub struct MemberWriter {
    digests: Digests,
    buf: Vec<u8>,
}

impl Default for MemberWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl MemberWriter {
    /// An empty member.
    #[must_use]
    pub fn new() -> Self {
        Self {
            digests: Digests::new(),
            buf: Vec::new(),
        }
    }

    /// Appends one entry's line.
    ///
    /// # Errors
    /// An entry out of canonical order (or repeated), as a sentence naming both paths.
    pub fn push(&mut self, e: &InventoryEntry) -> std::result::Result<(), String> {
        let start = self.buf.len();
        crate::evidence::append_sorted_json(e, &mut self.buf).map_err(|err| format!("{}: {err}", e.path))?;
        self.buf.push(b'\n');
        let added = self.digests.add(e, &self.buf[start..]);
        if added.is_err() {
            self.buf.truncate(start);
        }
        added
    }

    /// Bytes buffered since the last [`MemberWriter::take`].
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The buffered bytes, leaving the buffer empty.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    /// The canonical digests (root, subject) and the member's description for the predicate; the buffer must have
    /// been drained.
    #[must_use]
    pub fn finish(self) -> (CanonicalDigests, InventoryMember) {
        debug_assert!(self.buf.is_empty(), "the member's last bytes were not taken");
        self.digests.finish()
    }
}

/// Reads an inventory member from chunks of its bytes as they arrive ([`MemberReader::feed`]): each line is parsed
/// into its typed entry (no JSON value tree), its canonical order checked and the bundle root recomputed on the
/// fly; [`MemberReader::finish`] then compares size, count and both file digests with what the predicate signed.
/// Nothing past the signed size is read.
pub struct MemberReader {
    expected: InventoryMember,
    digests: Digests,
    partial: Vec<u8>,
    entries: Vec<InventoryEntry>,
    seen: u64,
    keep: Option<Keep>,
    only: Option<ObjectShard>,
}

/// An inventory line as it is parsed, its strings borrowed from the line where they need no unescaping: the same
/// fields and rules as [`InventoryEntry`] (required and optional fields, unknown ones ignored).
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    path: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    uri: std::borrow::Cow<'a, str>,
    layer: Layer,
    size: u64,
    #[serde(borrow)]
    blake3: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    e_tag: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    version: Option<std::borrow::Cow<'a, str>>,
    record_count: Option<u64>,
    #[serde(borrow)]
    copy: Option<std::borrow::Cow<'a, str>>,
}

impl Line<'_> {
    fn fields(&self) -> Fields<'_> {
        Fields {
            layer: self.layer,
            path: &self.path,
            size: self.size,
            blake3: &self.blake3,
            e_tag: self.e_tag.as_deref(),
            version: self.version.as_deref(),
        }
    }

    fn into_entry(self) -> InventoryEntry {
        InventoryEntry {
            path: self.path.into_owned(),
            uri: self.uri.into_owned(),
            layer: self.layer,
            size: self.size,
            blake3: self.blake3.into_owned(),
            e_tag: self.e_tag.map(std::borrow::Cow::into_owned),
            version: self.version.map(std::borrow::Cow::into_owned),
            record_count: self.record_count,
            copy: self.copy.map(std::borrow::Cow::into_owned),
        }
    }
}

/// Which entries a [`MemberReader`] keeps (every line is still checked and digested), and what of each: the
/// function may clear fields the caller does not need. A purge of a million objects keeps what it deletes and
/// each one's ETag, not the whole sealed inventory (#24).
pub type Keep = Box<dyn FnMut(&mut InventoryEntry) -> bool + Send>;

impl MemberReader {
    /// A reader of the member the predicate describes.
    #[must_use]
    pub fn new(expected: &InventoryMember) -> Self {
        Self {
            expected: expected.clone(),
            digests: Digests::new(),
            partial: Vec::new(),
            entries: Vec::with_capacity(expected.objects.min(1 << 24)),
            seen: 0,
            keep: None,
            only: None,
        }
    }

    /// A reader that keeps only the entries `keep` accepts, as `keep` leaves them; `reserve_all` reserves room
    /// for every entry the member signs (for a `keep` that keeps nearly all of them).
    #[must_use]
    pub fn keeping(expected: &InventoryMember, keep: Keep, reserve_all: bool) -> Self {
        Self {
            expected: expected.clone(),
            digests: Digests::new(),
            partial: Vec::new(),
            entries: if reserve_all {
                Vec::with_capacity(expected.objects.min(1 << 24))
            } else {
                Vec::new()
            },
            seen: 0,
            keep: Some(keep),
            only: None,
        }
    }

    /// With a shard, the data and delete entries of other shares are digested and passed over, never made into
    /// entries (`keep` does not see them); the metadata layers are kept for every share.
    #[must_use]
    pub fn only_shard(mut self, shard: Option<ObjectShard>) -> Self {
        self.only = shard;
        self
    }

    /// Takes the next bytes of the member.
    ///
    /// # Errors
    /// A sentence naming the line (1-based) and why it is not a valid inventory line, or the member running past
    /// its signed size.
    pub fn feed(&mut self, mut chunk: &[u8]) -> std::result::Result<(), String> {
        self.seen += chunk.len() as u64;
        if self.seen > self.expected.bytes {
            return Err(format!(
                "holds more than the {} bytes the signed predicate gives it",
                self.expected.bytes
            ));
        }
        while let Some(nl) = chunk.iter().position(|&b| b == b'\n') {
            let (line, rest) = chunk.split_at(nl + 1);
            chunk = rest;
            if self.partial.is_empty() {
                self.line(line)?;
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole)?;
            }
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> std::result::Result<(), String> {
        let n = self.digests.objects + 1;
        let parsed: Line<'_> = serde_json::from_slice(&line[..line.len() - 1])
            .map_err(|err| format!("line {n} is not an inventory entry: {err}"))?;
        self.digests
            .add_fields(&parsed.fields(), line)
            .map_err(|why| format!("line {n}: {why}"))?;
        if let Some(s) = self.only
            && !s.owns_path(parsed.layer, &parsed.path)
            && !parsed.layer.is_metadata()
        {
            return Ok(());
        }
        let mut e = parsed.into_entry();
        if self.keep.as_mut().is_none_or(|keep| keep(&mut e)) {
            self.entries.push(e);
        }
        Ok(())
    }

    /// The entries, in canonical order, and their canonical digests.
    ///
    /// # Errors
    /// A sentence naming what differs from the signed predicate: a last line without its newline, the size, the
    /// number of lines, or a file digest.
    pub fn finish(self) -> std::result::Result<(Vec<InventoryEntry>, CanonicalDigests), String> {
        if !self.partial.is_empty() {
            return Err(format!(
                "ends inside line {} (every line ends with a newline)",
                self.digests.objects + 1
            ));
        }
        let (canonical, found) = self.digests.finish();
        let want = &self.expected;
        if found.bytes != want.bytes || found.objects != want.objects {
            return Err(format!(
                "holds {} bytes in {} lines; the signed predicate says {} bytes in {} lines",
                found.bytes, found.objects, want.bytes, want.objects
            ));
        }
        if found.sha256 != want.sha256 || found.blake3 != want.blake3 {
            return Err(format!(
                "has SHA-256 {} and BLAKE3 {}; the signed predicate says SHA-256 {} and BLAKE3 {}",
                found.sha256, found.blake3, want.sha256, want.blake3
            ));
        }
        Ok((self.entries, canonical))
    }
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
        self.owns_path(e.layer, &e.path)
    }

    /// Whether the object of `layer` at `path` (as written) belongs to this share.
    #[must_use]
    pub fn owns_path(&self, layer: Layer, path: &str) -> bool {
        if layer.is_metadata() {
            return self.index == 0;
        }
        let h = blake3::hash(path.as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&h.as_bytes()[..8]);
        let count = u64::try_from(self.count).unwrap_or(u64::MAX).max(1);
        usize::try_from(u64::from_le_bytes(first) % count).ok() == Some(self.index)
    }

    /// What this share holds of `inventory`: the number of its objects and their root (BLAKE3 of their
    /// canonical inventory lines, in canonical order, as the bundle root is over all of them).
    #[must_use]
    pub fn part(&self, inventory: &[InventoryEntry]) -> ShardPart {
        self.holding(inventory.iter().filter(|e| self.owns(e)).collect(), inventory.len())
    }

    /// What this share holds of an orphan bundle's `inventory`: every file belongs to share 0 (as a snapshot
    /// bundle's metadata layers do), which verifies the bundle whole; every other share holds none of it.
    #[must_use]
    pub fn orphans_part(&self, inventory: &[InventoryEntry]) -> ShardPart {
        let mine = if self.index == 0 {
            inventory.iter().collect()
        } else {
            Vec::new()
        };
        self.holding(mine, inventory.len())
    }

    /// This share's part when it holds `mine` of an inventory of `of` objects.
    fn holding(&self, mine: Vec<&InventoryEntry>, of: usize) -> ShardPart {
        ShardPart {
            index: self.index,
            count: self.count,
            objects: mine.len(),
            inventory_objects: of,
            root: root_of(mine),
        }
    }

    /// [`ObjectShard::part`] computed as an inventory in canonical order streams by: entries are given to
    /// [`SharePart::add`] one at a time (every entry; the share's own are counted), none is kept.
    #[must_use]
    pub fn streamed_part(self) -> SharePart {
        SharePart {
            shard: self,
            b3: blake3::Hasher::new(),
            objects: 0,
            line: Vec::with_capacity(256),
        }
    }
}

/// A share's [`ShardPart`] being computed over an inventory that streams by in canonical order
/// ([`ObjectShard::streamed_part`]).
pub struct SharePart {
    shard: ObjectShard,
    b3: blake3::Hasher,
    objects: usize,
    line: Vec<u8>,
}

impl SharePart {
    /// The next entry of the inventory, in canonical order: counted and hashed when the share owns it, which
    /// the result tells.
    pub fn add(&mut self, e: &InventoryEntry) -> bool {
        let owned = self.shard.owns(e);
        if owned {
            canonical_line(e, &mut self.line);
            self.b3.update(&self.line);
            self.objects += 1;
        }
        owned
    }

    /// The share's part of an inventory of `inventory_objects` entries.
    #[must_use]
    pub fn finish(self, inventory_objects: usize) -> ShardPart {
        ShardPart {
            index: self.shard.index,
            count: self.shard.count,
            objects: self.objects,
            inventory_objects,
            root: self.b3.finalize().to_hex().to_string(),
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
        canonical_line(e, &mut line);
        each(&line);
    }
}

/// What of an entry its canonical line holds.
struct Fields<'a> {
    layer: Layer,
    path: &'a str,
    size: u64,
    blake3: &'a str,
    e_tag: Option<&'a str>,
    version: Option<&'a str>,
}

impl<'a> Fields<'a> {
    fn of(e: &'a InventoryEntry) -> Self {
        Self {
            layer: e.layer,
            path: &e.path,
            size: e.size,
            blake3: &e.blake3,
            e_tag: e.e_tag.as_deref(),
            version: e.version.as_deref(),
        }
    }
}

/// One entry's canonical line, newline included, into `line` (cleared first).
fn canonical_line(e: &InventoryEntry, line: &mut Vec<u8>) {
    canonical_fields(&Fields::of(e), line);
}

/// [`canonical_line`] of an entry's fields.
fn canonical_fields(e: &Fields<'_>, line: &mut Vec<u8>) {
    line.clear();
    // The same bytes as `json!([...]).to_string()`, written straight from the fields (no value tree, no copies).
    let fields = (e.layer, e.path, e.size, e.blake3, e.e_tag, e.version);
    if serde_json::to_writer(&mut *line, &fields).is_err() {
        // Unreachable: strings, numbers and a unit enum always serialize; the value tree gives the same bytes.
        let value = serde_json::json!([e.layer, e.path, e.size, e.blake3, e.e_tag, e.version]);
        line.clear();
        line.extend_from_slice(value.to_string().as_bytes());
    }
    line.push(b'\n');
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
    fn quarantine_copies_are_named_per_file_and_bundles_without_a_naming_keep_the_shared_name() {
        let mut info = OrphanInfo {
            candidate_id: "o-1".into(),
            table_root: "file:///t".into(),
            hold: OrphanHold::QuarantineCopy,
            quarantine_root: Some("file:///vault/u/o-1/".into()),
            copy_naming: None,
            planned_metadata_location: "file:///t/metadata/v1.metadata.json".into(),
            listed_at: "2026-12-06T00:00:00Z".into(),
            orphan_safety_interval_ms: 0,
            writer_prefixes: Vec::new(),
            hold_generation: 0,
            holds: Vec::new(),
        };
        let mut a = entry(Layer::Data, "file:///t/data/a.parquet");
        a.blake3 = "ab".repeat(32);
        let mut b = entry(Layer::Data, "file:///t/data/b.parquet");
        b.blake3.clone_from(&a.blake3);
        // An earlier release's bundle: one copy named by the bytes, shared by both files.
        assert_eq!(info.held_at(&a), (format!("file:///vault/u/o-1/{}", a.blake3), None));
        assert_eq!(info.held_at(&a), info.held_at(&b));
        // Per file: the bytes' BLAKE3 and a digest of the path, a copy each.
        info.copy_naming = Some(CopyNaming::PerFile);
        let (ua, _) = info.held_at(&a);
        let (ub, _) = info.held_at(&b);
        let digest = &blake3::hash(a.path.as_bytes()).to_hex()[..16];
        assert_eq!(ua, format!("file:///vault/u/o-1/{}-{digest}.orphan-copy", a.blake3));
        assert_ne!(ua, ub);
        // The naming is signed with the bundle: it round-trips, and is absent when not set.
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(json["copy_naming"], "per-file");
        assert_eq!(serde_json::from_value::<OrphanInfo>(json).unwrap(), info);
        info.copy_naming = None;
        assert!(serde_json::to_value(&info).unwrap().get("copy_naming").is_none());
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
        // Streamed in canonical order, a share's part is the same.
        for s in &shares {
            let mut streamed = s.streamed_part();
            let owned = entries.iter().filter(|e| streamed.add(e)).count();
            let part = streamed.finish(entries.len());
            assert_eq!(owned, part.objects);
            assert_eq!(part, s.part(&entries));
        }
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
        // Paths and tags with characters JSON escapes come out as a JSON value of them would.
        let mut odd = entry(Layer::Data, "t/data/q\"uote\\back\u{1}é.parquet");
        odd.version = Some("v\t1".into());
        let mut line = Vec::new();
        canonical_line(&odd, &mut line);
        let value = serde_json::json!([odd.layer, odd.path, odd.size, odd.blake3, odd.e_tag, odd.version]);
        assert_eq!(line, format!("{value}\n").into_bytes());
        let mut moved = entries.clone();
        moved[0].uri = "s3://elsewhere/b.parquet".into();
        moved[0].record_count = None;
        assert_eq!(inventory_root(&moved), root);
    }

    fn member_of(entries: &[InventoryEntry]) -> (Vec<u8>, CanonicalDigests, InventoryMember) {
        let mut w = MemberWriter::new();
        let mut bytes = Vec::new();
        for e in entries {
            w.push(e).unwrap();
            if w.buffered() > 100 {
                bytes.extend(w.take());
            }
        }
        bytes.extend(w.take());
        let (d, m) = w.finish();
        (bytes, d, m)
    }

    fn read(bytes: &[u8], member: &InventoryMember, chunk: usize) -> std::result::Result<Vec<InventoryEntry>, String> {
        let mut r = MemberReader::new(member);
        for c in bytes.chunks(chunk.max(1)) {
            r.feed(c)?;
        }
        r.finish().map(|(e, _)| e)
    }

    #[test]
    fn a_member_round_trips_in_any_chunking_with_the_root_of_the_inline_inventory() {
        use sha2::Digest as _;
        let mut entries = vec![
            entry(Layer::Metadata, "t/metadata/v1.metadata.json"),
            entry(Layer::Manifest, "t/metadata/m0.avro"),
        ];
        entries.extend((0..50).map(|i| entry(Layer::Data, &format!("t/data/{i:03}-é\"x.parquet"))));
        entries[3].e_tag = None;
        entries[4].version = Some("v\n1".into());
        let (bytes, d, m) = member_of(&entries);
        assert_eq!((d.root.clone(), d.sha256.clone()), canonical_digests(&entries));
        assert_eq!(m.name, INVENTORY_MEMBER);
        assert_eq!((m.objects, m.bytes), (entries.len(), bytes.len() as u64));
        assert_eq!(m.sha256, hex::encode(sha2::Sha256::digest(&bytes)));
        assert_eq!(m.blake3, blake3::hash(&bytes).to_hex().to_string());
        // One object per line, keys sorted (uri, record count and copy are in the member, not in the root).
        let first = std::str::from_utf8(&bytes).unwrap().lines().next().unwrap();
        assert!(
            first.starts_with("{\"blake3\":\"ab\",\"copy\":null,\"e_tag\":\"e\",\"layer\":\"metadata\""),
            "{first}"
        );
        for chunk in [1, 7, 64, bytes.len()] {
            assert_eq!(read(&bytes, &m, chunk).unwrap(), entries, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_keeping_reader_checks_every_line_but_keeps_only_what_it_accepts_as_it_leaves_it() {
        let entries: Vec<InventoryEntry> = (0..20)
            .map(|i| entry(Layer::Data, &format!("t/data/{i:02}.parquet")))
            .collect();
        let (bytes, d, m) = member_of(&entries);
        let keep: Keep = Box::new(|e: &mut InventoryEntry| {
            e.blake3 = String::new();
            e.path.ends_with("7.parquet")
        });
        let mut r = MemberReader::keeping(&m, keep, false);
        for c in bytes.chunks(13) {
            r.feed(c).unwrap();
        }
        let (kept, digests) = r.finish().unwrap();
        // The root is over every line, kept or not.
        assert_eq!(digests.root, d.root);
        let paths: Vec<&str> = kept.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["t/data/07.parquet", "t/data/17.parquet"]);
        assert!(kept.iter().all(|e| e.blake3.is_empty()));
        // A line altered outside what is kept still fails the member.
        let mut bad = bytes.clone();
        let at = bad.iter().position(|&b| b == b'0').unwrap();
        bad[at] = b'9';
        let mut r = MemberReader::keeping(&m, Box::new(|_| false), false);
        let fed = bad.chunks(13).try_for_each(|c| r.feed(c));
        assert!(fed.is_err() || r.finish().is_err());
    }

    #[test]
    fn a_reader_for_one_share_makes_entries_of_its_own_objects_and_every_metadata_layer_only() {
        let mut entries = vec![
            entry(Layer::Metadata, "t/metadata/v1.metadata.json"),
            entry(Layer::Manifest, "t/metadata/m0.avro"),
        ];
        // Paths JSON escapes, and an entry without its optional fields: read as the typed entry reads them.
        entries.extend((0..40).map(|i| entry(Layer::Data, &format!("t/data/{i:02}-\"q\\é\u{1}.parquet"))));
        entries[5].e_tag = None;
        entries[5].record_count = None;
        let (bytes, d, m) = member_of(&entries);
        let shard = ObjectShard { index: 1, count: 3 };
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        let keep: Keep = Box::new(move |e: &mut InventoryEntry| {
            sink.lock().unwrap().push(e.clone());
            true
        });
        let mut r = MemberReader::keeping(&m, keep, false).only_shard(Some(shard));
        for c in bytes.chunks(7) {
            r.feed(c).unwrap();
        }
        let (kept, digests) = r.finish().unwrap();
        assert_eq!(digests.root, d.root, "every line is digested");
        let want: Vec<InventoryEntry> = entries
            .iter()
            .filter(|e| e.layer.is_metadata() || shard.owns(e))
            .cloned()
            .collect();
        assert!(want.len() > 2 && want.len() < entries.len(), "{}", want.len());
        assert_eq!(kept, want);
        assert_eq!(*seen.lock().unwrap(), want, "`keep` sees only those");
    }

    #[test]
    fn a_member_that_is_not_what_the_predicate_signs_is_refused_naming_why() {
        let entries: Vec<InventoryEntry> = (0..5)
            .map(|i| entry(Layer::Data, &format!("t/data/{i}.parquet")))
            .collect();
        let (bytes, _, m) = member_of(&entries);
        // One byte changed, same size: a digest differs.
        let mut flipped = bytes.clone();
        let at = bytes.iter().position(|&b| b == b'7').unwrap();
        flipped[at] = b'8';
        assert!(read(&flipped, &m, 16).unwrap_err().contains("SHA-256"));
        // A line too many: past the signed size, before any more is parsed.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&bytes[..bytes.iter().position(|&b| b == b'\n').unwrap() + 1]);
        assert!(read(&longer, &m, 16).unwrap_err().contains("more than"));
        // Cut short, inside a line, or by a whole line.
        assert!(
            read(&bytes[..bytes.len() - 3], &m, 16)
                .unwrap_err()
                .contains("ends inside line 5")
        );
        let four = bytes[..bytes.len() - 1].iter().rposition(|&b| b == b'\n').unwrap() + 1;
        assert!(read(&bytes[..four], &m, 16).unwrap_err().contains("in 4 lines"));
        // Not an entry.
        let junk = b"{\"path\": 1}\n".to_vec();
        let e = read(
            &junk,
            &InventoryMember {
                bytes: junk.len() as u64,
                ..m.clone()
            },
            4,
        )
        .unwrap_err();
        assert!(e.starts_with("line 1 is not an inventory entry"), "{e}");
        // Out of canonical order, or one object twice: named by line, even under matching digests.
        let mut swapped = entries.clone();
        swapped.swap(1, 2);
        let mut w = MemberWriter::new();
        w.push(&swapped[0]).unwrap();
        w.push(&swapped[1]).unwrap();
        assert!(w.push(&swapped[2]).unwrap_err().contains("canonical order"));
        let text: Vec<u8> = [&entries[0], &entries[2], &entries[1]]
            .iter()
            .flat_map(|e| {
                let mut l = Vec::new();
                crate::evidence::append_sorted_json(e, &mut l).unwrap();
                l.push(b'\n');
                l
            })
            .collect();
        let e = read(
            &text,
            &InventoryMember {
                bytes: text.len() as u64,
                ..m.clone()
            },
            9,
        )
        .unwrap_err();
        assert!(e.starts_with("line 3:") && e.contains("canonical order"), "{e}");
        let mut twice = Vec::new();
        for _ in 0..2 {
            crate::evidence::append_sorted_json(&entries[0], &mut twice).unwrap();
            twice.push(b'\n');
        }
        let e = read(
            &twice,
            &InventoryMember {
                bytes: twice.len() as u64,
                ..m
            },
            9,
        )
        .unwrap_err();
        assert!(e.contains("line 2:") && e.contains("each object once"), "{e}");
    }
}
