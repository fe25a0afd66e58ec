//! The bundle format: the folder and file names, how inventory URIs are bound to their paths
//! ([`UriBinding`]), the [`RestoreReport`], and the signed reads of a bundle that do not check its
//! data ([`verified_predicate`], [`verified_metadata_copy`], [`list_bundles`]). Seal and verify build on
//! it; it uses only the wings below `bundle`.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::evidence;
pub use crate::evidence::inventory::{
    BackupInfo, BundlePredicate, CanonicalDigests, INVENTORY_MEMBER, InventoryEntry, InventoryMember, MemberReader,
    ObjectShard, ShardPart, canonical_digests, canonical_inventory, inventory_root,
};
use crate::evidence::keys::TrustStore;
pub use crate::evidence::predicate::RestoreStatus;
use crate::io::store::{Storage, Within};
use crate::model::findings::{Finding, FindingKind};
use crate::model::location::{self, TableLocation};
pub use crate::model::object::Layer;

/// `predicateType` of a bundle statement.
pub const PREDICATE_TYPE: &str = "https://lakedrill.dev/bundle/v1";
/// File name of the envelope inside a bundle folder.
pub const ENVELOPE_FILE: &str = "bundle.dsse.json";

/// How an inventory's `uri`s are bound to its `path`s.
///
/// A `uri` in the inventory is never taken on trust, even under a valid signature: it must be what
/// sealing derives from the entry's `path`, so that a verifier only ever opens objects of the table.
/// The table root a bundle was sealed from is the one its manifest-list entry names (its `uri`
/// minus its `path` relative to the table location); every other entry's `uri` must be its `path`
/// rebased onto that same root. The metadata entry may instead carry its `path` itself as a
/// canonical URI (a table read from a metadata file). A cold-backup bundle's objects all live at
/// `<backup_root>/objects/<blake3>`. Anything else is a [`FindingKind::UriNotDerived`] finding and
/// the entry is not opened.
#[derive(Debug, Clone)]
pub struct UriBinding {
    root: String,
    /// The written table location rebased onto `root` (`None` for a cold-backup bundle).
    loc: Option<TableLocation>,
}

impl UriBinding {
    /// The binding of a bundle's inventory.
    ///
    /// # Errors
    /// Why no table root can be derived (no manifest-list entry, or one whose `uri` does not end
    /// with its `path`), as a sentence for a finding.
    pub fn new(pred: &BundlePredicate) -> std::result::Result<Self, String> {
        Self::of(
            pred.backup.as_ref().map(|b| b.backup_root.as_str()),
            &pred.table_location,
            pred.inventory.iter().find(|e| e.layer == Layer::ManifestList),
        )
    }

    /// [`UriBinding::new`] from its parts: a cold backup's root, else the table location and the inventory's
    /// (first) manifest-list entry — what a verifier has seen of an inventory in canonical order by the time its
    /// first data entry streams by.
    ///
    /// # Errors
    /// As [`UriBinding::new`].
    pub fn of(
        backup_root: Option<&str>,
        table_location: &str,
        manifest_list: Option<&InventoryEntry>,
    ) -> std::result::Result<Self, String> {
        if let Some(b) = backup_root {
            return Ok(Self {
                root: b.trim_end_matches('/').to_owned(),
                loc: None,
            });
        }
        let written =
            TableLocation::new(table_location, "memory:///unused".into(), ENVELOPE_FILE).map_err(|e| e.to_string())?;
        let ml = manifest_list.ok_or("the inventory has no manifest list to anchor the table root")?;
        let rel = written.relative(&ml.path).map_err(|_| {
            format!(
                "the manifest list {} is not under the table location {}",
                ml.path, table_location
            )
        })?;
        let root = ml
            .uri
            .strip_suffix(&format!("/{rel}"))
            .filter(|r| location::canonical_uri(r).ok().as_deref() == Some(*r))
            .ok_or_else(|| {
                format!(
                    "the manifest list's uri {} is not a table root joined with its path relative to the table location ({rel})",
                    ml.uri
                )
            })?;
        let loc = TableLocation::new(table_location, root.to_owned(), ENVELOPE_FILE).map_err(|e| e.to_string())?;
        Ok(Self {
            root: root.to_owned(),
            loc: Some(loc),
        })
    }

    /// The table root (or backup root) every `uri` is bound to.
    #[must_use]
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The `uri` sealing derives from the entry's `path` (and, for a cold backup, its digest); `None` for a path
    /// that does not resolve under the table location.
    #[must_use]
    pub fn derive(&self, e: &InventoryEntry) -> Option<String> {
        self.derive_from(&e.path, || e.blake3.clone())
    }

    /// [`UriBinding::derive`] from an entry's path and (for a cold backup, asked only then) its BLAKE3 hex.
    #[must_use]
    pub fn derive_from(&self, path: &str, blake3: impl FnOnce() -> String) -> Option<String> {
        match &self.loc {
            None => Some(location::join(&self.root, &format!("objects/{}", blake3()))),
            Some(loc) => loc.resolve(path).ok(),
        }
    }

    /// The entry's `uri` when it is the one derived from its `path`.
    ///
    /// # Errors
    /// A [`FindingKind::UriNotDerived`] finding naming the entry, the URI expected and the one found.
    pub fn check(&self, e: &InventoryEntry) -> std::result::Result<String, Finding> {
        let expected = self.derive(e);
        let as_written = || {
            let absolute = e.path.contains("://") || e.path.starts_with('/') || e.path.starts_with("file:");
            absolute && location::canonical_uri(&e.path).ok().as_deref() == Some(e.uri.as_str())
        };
        if expected.as_deref() == Some(e.uri.as_str())
            || (e.layer == Layer::Metadata && self.loc.is_some() && as_written())
        {
            return Ok(e.uri.clone());
        }
        Err(Finding::new(
            FindingKind::UriNotDerived,
            &e.path,
            Some(match expected {
                Some(x) => format!("{x} (its path under the table root {})", self.root),
                None => format!("a path under the table location, rebased onto {}", self.root),
            }),
            Some(format!(
                "{}: not derived from the path and the table root; not opened",
                e.uri
            )),
        ))
    }
}

/// The result of verifying one bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RestoreReport {
    /// Verdict.
    pub status: RestoreStatus,
    /// Bundle id (from the envelope, even when it does not verify).
    pub bundle_id: Option<String>,
    /// Table UUID.
    pub table_uuid: Option<String>,
    /// Snapshot.
    pub snapshot_id: Option<i64>,
    /// Bundle root (from the verified predicate; `None` when the envelope did not verify far enough to read it).
    pub bundle_root: Option<String>,
    /// **Unverified.** The root the envelope claims (its bundle subject's `blake3` digest, else its predicate's
    /// `bundle_root`), read without trusting it, when the bundle failed before its verified root could be read
    /// (a signature that does not verify under the trust store, a predicate that does not parse). Set only
    /// then, so that a failure can be charged to the root the bundle says it holds: a claim can only make
    /// lakedrill refuse more (DESIGN "Stale evidence"). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_bundle_root: Option<String>,
    /// Commit time of the bundled snapshot (the declared recovery point).
    pub snapshot_timestamp_ms: Option<i64>,
    /// Objects whose bytes were verified.
    pub objects_verified: usize,
    /// Bytes verified.
    pub bytes_verified: u64,
    /// Every problem found.
    pub findings: Vec<Finding>,
    /// Set when only one share of the bundle's objects was verified ([`ObjectShard`]): which share, and what
    /// it holds. Absent for a whole verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardPart>,
    /// Where the bundled snapshot's metadata file was read from when it was sealed (its entry in the verified
    /// inventory), for finding the live table again; `None` for an orphan bundle or one whose inventory did not
    /// load. Not part of the report's JSON.
    #[serde(skip)]
    pub metadata_uri: Option<String>,
    /// The SHA-256 (hex) of the envelope bytes this verification read and judged: what a drill report's subject
    /// names, so that it never names an envelope read again afterwards (review E7). Not part of the report's JSON.
    #[serde(skip)]
    pub envelope_sha256: Option<String>,
}

/// The canonical URI of a bundle folder given its folder or its envelope file.
///
/// # Errors
/// [`Error::BadUri`].
pub fn bundle_dir(uri: &str) -> Result<String> {
    let uri = location::canonical_uri(uri)?;
    Ok(match uri.strip_suffix(&format!("/{ENVELOPE_FILE}")) {
        Some(d) => d.to_owned(),
        None => uri,
    })
}

/// Reads a bundle's byte copy of a file the inventory signs as `size` bytes, `None` when it is absent. The copy
/// itself is not signed, so at most `size + 1` bytes are read: a larger copy is [`Within::Over`] (a finding for
/// the caller) and is never held whole. The table metadata copy is also held to
/// [`crate::io::store::StorageOptions::max_metadata_bytes`], like the table's own metadata: an inventory that
/// signs a larger one cannot be decided.
///
/// # Errors
/// [`Error::Corrupt`] for a metadata copy signed as larger than `max_metadata_bytes`; storage errors.
pub(super) async fn get_copy(storage: &Storage, uri: &str, layer: Layer, size: u64) -> Result<Option<Within>> {
    if layer == Layer::Metadata {
        let max = storage.options().max_metadata_bytes;
        if size > max {
            return Err(crate::io::store::over_limit(
                uri,
                "the bundle's table metadata copy (its size in the signed inventory)",
                size,
                max,
            ));
        }
    }
    match storage.get_within(uri, size.saturating_add(1)).await {
        Ok(w) => Ok(Some(w)),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// An object whose path, symlinks resolved, leaves the table root (README "Symlinks").
pub(crate) fn symlink_finding(path: &str, root: &str, target: &str) -> Finding {
    Finding::new(
        FindingKind::SymlinkOutsideTable,
        path,
        Some(format!("a path under the table root {root} with symlinks resolved")),
        Some(format!("resolves to {target}, outside the table; not read")),
    )
}

/// Finds every bundle (folder holding an envelope) under a prefix.
///
/// # Errors
/// [`Error::Storage`] when the prefix cannot be listed.
pub async fn list_bundles(storage: &Storage, prefix_uri: &str) -> Result<Vec<String>> {
    let prefix = location::canonical_uri(prefix_uri)?;
    let mut out: Vec<String> = storage
        .list(&prefix)
        .await?
        .into_iter()
        .filter_map(|o| o.uri.strip_suffix(&format!("/{ENVELOPE_FILE}")).map(str::to_owned))
        .collect();
    out.sort();
    Ok(out)
}

/// The snapshot id and the metadata copy of a bundle whose signature verifies and whose copy
/// matches the inventory (for bringing a snapshot back from a bundle).
///
/// # Errors
/// [`Error::Invalid`] when the bundle does not verify or lacks its metadata copy.
pub async fn verified_metadata_copy(storage: &Storage, bundle_uri: &str, trust: &TrustStore) -> Result<(i64, Bytes)> {
    let dir = bundle_dir(bundle_uri)?;
    let pred = verified_bundle_predicate(storage, &dir, trust).await?;
    let md = pred
        .inventory
        .iter()
        .find(|e| e.layer == Layer::Metadata)
        .ok_or_else(|| Error::invalid(&dir, "the inventory has no metadata entry"))?;
    let member = md
        .copy
        .clone()
        .ok_or_else(|| Error::invalid(&dir, "the metadata entry has no copy"))?;
    let bytes = storage
        .get_bounded(
            &location::join(&dir, &member),
            storage.options().max_metadata_bytes,
            "the bundle's table metadata copy",
        )
        .await?
        .bytes;
    if blake3::hash(&bytes).to_hex().as_str() != md.blake3 {
        return Err(Error::invalid(
            &dir,
            format!("{member} does not match its inventory digest"),
        ));
    }
    Ok((pred.snapshot_id, bytes))
}

/// Fills `pred.inventory` from the bundle's inventory member when its predicate names one ([`INVENTORY_MEMBER`]),
/// and returns the canonical digests of the inventory (root and subject SHA-256), recomputed as it is read.
///
/// The member is read in ranges of 8 MiB up to the size the predicate signs (never past it), each range parsed
/// line by line into typed entries on the rayon pool (no JSON value tree, no whole text held), its canonical order
/// checked; then its size, line count, SHA-256 and BLAKE3 must be those signed. A bundle with the inventory inline
/// (sealed before the member existed) has its digests computed from it.
///
/// Returns `Ok(Err((kind, reason)))` for a bundle that does not hold together: [`FindingKind::CopyMissing`] for a
/// missing member, [`FindingKind::CopyDigestMismatch`] for one that is not what the predicate signs (or a predicate
/// with a member and an inline inventory both, or neither), the reason a sentence naming the member.
///
/// # Errors
/// Only when the store cannot be read.
pub async fn load_inventory(
    storage: &Storage,
    dir: &str,
    pred: &mut BundlePredicate,
) -> Result<std::result::Result<CanonicalDigests, (FindingKind, String)>> {
    load_inventory_keeping(storage, dir, pred, None, false, None).await
}

/// [`load_inventory`] keeping only the entries `keep` accepts (every line is still checked and digested; an
/// inline inventory is filtered the same way after its digests are computed). `reserve_all`: `keep` keeps (nearly)
/// every entry, so room for all of them is reserved at once (no doubling of a million entries). `only`: a member's
/// data and delete lines of other shares are digested and passed over before they become entries
/// ([`crate::evidence::inventory::MemberReader::only_shard`]; an inline inventory is not filtered by it).
///
/// # Errors
/// Only when the store cannot be read.
pub async fn load_inventory_keeping(
    storage: &Storage,
    dir: &str,
    pred: &mut BundlePredicate,
    keep: Option<crate::evidence::inventory::Keep>,
    reserve_all: bool,
    only: Option<ObjectShard>,
) -> Result<std::result::Result<CanonicalDigests, (FindingKind, String)>> {
    let bad = |why: String| Ok(Err((FindingKind::CopyDigestMismatch, why)));
    let Some(member) = pred.inventory_member.clone() else {
        if pred.inventory.is_empty() {
            return bad("the predicate has neither an inventory nor an inventory member".into());
        }
        let (root, sha256) = canonical_digests(&pred.inventory);
        if let Some(mut keep) = keep {
            pred.inventory.retain_mut(|e| keep(e));
        }
        return Ok(Ok(CanonicalDigests { root, sha256 }));
    };
    if !pred.inventory.is_empty() {
        return bad(format!(
            "the predicate carries an inventory inline and names the member {}: a bundle has one or the other",
            member.name
        ));
    }
    if member.name != INVENTORY_MEMBER {
        return bad(format!(
            "the predicate names its inventory member {:?}; it is always {INVENTORY_MEMBER}",
            member.name
        ));
    }
    if member.objects != pred.objects {
        return bad(format!(
            "{INVENTORY_MEMBER} is signed with {} lines but the predicate counts {} objects",
            member.objects, pred.objects
        ));
    }
    let uri = location::join(dir, INVENTORY_MEMBER);
    let missing = || {
        Ok(Err((
            FindingKind::CopyMissing,
            format!("{INVENTORY_MEMBER} is missing from {dir}"),
        )))
    };
    let Some(info) = storage.head(&uri).await? else {
        return missing();
    };
    if info.size != member.bytes {
        return bad(format!(
            "{INVENTORY_MEMBER} holds {} bytes; the signed predicate says {}",
            info.size, member.bytes
        ));
    }
    const RANGE: u64 = 8 << 20;
    let mut reader = match keep {
        Some(keep) => MemberReader::keeping(&member, keep, reserve_all),
        None => MemberReader::new(&member),
    }
    .only_shard(only);
    let mut at = 0;
    while at < member.bytes {
        let end = (at + RANGE).min(member.bytes);
        let bytes = match storage.get_range(&uri, at..end).await {
            Ok(b) if !b.is_empty() => b,
            Ok(_) => break,
            Err(Error::NotFound { .. }) => return missing(),
            Err(e) => return Err(e),
        };
        at += bytes.len() as u64;
        // Parsing and hashing a range is CPU work: on the rayon pool, off the async workers.
        let (tx, rx) = tokio::sync::oneshot::channel();
        rayon::spawn(move || {
            let fed = reader.feed(&bytes);
            let _ = tx.send((reader, fed));
        });
        let (back, fed) = rx
            .await
            .map_err(|_| Error::Internal(format!("reading {uri} ended without a result")))?;
        reader = back;
        if let Err(why) = fed {
            return bad(format!("{INVENTORY_MEMBER} {why}"));
        }
    }
    match reader.finish() {
        Ok((entries, digests)) => {
            pred.inventory = entries;
            Ok(Ok(digests))
        }
        Err(why) => bad(format!("{INVENTORY_MEMBER} {why}")),
    }
}

/// The envelope (`bundle.dsse.json`) of the bundle in folder `dir`, read within `max_metadata_bytes` (`[storage]`):
/// a drill reads the envelope of every bundle of its population, and a file of gigabytes dropped in as one must be
/// refused naming it (exit 2), not take the process down. Only envelopes with an inline inventory (bundles sealed
/// before the inventory member) are large.
///
/// # Errors
/// [`Error::NotFound`], storage errors, and [`Error::Corrupt`] naming the envelope when it is over the limit.
pub async fn read_envelope(storage: &Storage, dir: &str) -> Result<crate::io::store::Fetched> {
    storage
        .get_bounded(
            &location::join(dir, ENVELOPE_FILE),
            storage.options().max_metadata_bytes,
            "the bundle envelope",
        )
        .await
}

/// The predicate of the bundle in folder `dir` as written, its signature not checked, with its inventory as `keep`
/// keeps it, and the inventory's canonical digests: for readers that bind the bundle to something else they trust
/// (the registry's record of it) or that may only ever keep more files because of it. `Ok(Err(why))`: the
/// bundle does not hold together.
///
/// # Errors
/// Only when the store cannot be read.
pub async fn unverified_predicate_keeping(
    storage: &Storage,
    dir: &str,
    keep: Option<crate::evidence::inventory::Keep>,
) -> Result<std::result::Result<(BundlePredicate, CanonicalDigests), String>> {
    let envelope = read_envelope(storage, dir).await?.bytes;
    let Some(st) = evidence::peek_unverified(&envelope) else {
        return Ok(Err("not a bundle envelope".into()));
    };
    let mut pred: BundlePredicate = match serde_json::from_value(st["predicate"].clone()) {
        Ok(p) => p,
        Err(e) => return Ok(Err(format!("bundle predicate: {e}"))),
    };
    Ok(
        match load_inventory_keeping(storage, dir, &mut pred, keep, false, None).await? {
            Ok(digests) => Ok((pred, digests)),
            Err((_, why)) => Err(format!("bundle inventory: {why}")),
        },
    )
}

/// The predicate of the bundle in folder `dir` whose signature verifies, parsed from the signed bytes straight
/// into its typed form ([`evidence::verify_payload`]: no JSON value tree of its inventory).
///
/// # Errors
/// [`Error::BundleNotVerified`] naming the folder when the bundle does not verify or is not a bundle predicate;
/// a storage error when it cannot be read.
pub async fn verified_bundle_predicate(storage: &Storage, dir: &str, trust: &TrustStore) -> Result<BundlePredicate> {
    Ok(verified_in(storage, dir, trust, |_| Ok(None)).await?.0)
}

/// The verified predicate of the bundle in `dir` with its inventory as `keep` keeps it, and the inventory's
/// canonical digests.
async fn verified_in(
    storage: &Storage,
    dir: &str,
    trust: &TrustStore,
    keep: impl FnOnce(&BundlePredicate) -> Result<Option<crate::evidence::inventory::Keep>>,
) -> Result<(BundlePredicate, CanonicalDigests)> {
    let envelope = read_envelope(storage, dir).await?.bytes;
    let v = evidence::verify_payload(envelope, &trust.for_role(crate::evidence::keys::Role::Seal))
        .map_err(|f| Error::not_verified(dir, format!("bundle signature (keys with the seal role): {f}")))?;
    // As `restore` checks a bundle: a bundle statement, its one subject binding the inventory's digests and the
    // root the predicate signs (a seal-signed statement of another kind, or one whose root is not its
    // inventory's, is no bundle).
    if v.predicate_type() != PREDICATE_TYPE {
        return Err(Error::not_verified(
            dir,
            format!(
                "the signed statement is a {}, not a bundle ({PREDICATE_TYPE})",
                v.predicate_type()
            ),
        ));
    }
    let subjects = v.subjects().to_vec();
    let mut pred: BundlePredicate = v
        .parse_predicate()
        .map_err(|e| Error::not_verified(dir, format!("bundle predicate: {e}")))?;
    drop(v);
    let keep = keep(&pred)?;
    let digests = load_inventory_keeping(storage, dir, &mut pred, keep, false, None)
        .await?
        .map_err(|(_, why)| Error::not_verified(dir, format!("bundle inventory: {why}")))?;
    if digests.root != pred.bundle_root {
        return Err(Error::not_verified(
            dir,
            format!(
                "bundle root: the predicate signs {}, its inventory's root is {}",
                pred.bundle_root, digests.root
            ),
        ));
    }
    let subject_ok = subjects.len() == 1
        && subjects[0].digest.get("sha256") == Some(&digests.sha256)
        && subjects[0].digest.get("blake3") == Some(&pred.bundle_root);
    if !subject_ok {
        return Err(Error::not_verified(
            dir,
            format!(
                "bundle subject: the statement's subject does not bind the inventory (sha256 {}, blake3 {})",
                digests.sha256, pred.bundle_root
            ),
        ));
    }
    Ok((pred, digests))
}

/// The predicate of a bundle whose signature verifies, with every metadata copy that matches its
/// inventory digest, by path as written.
///
/// # Errors
/// [`Error::BundleNotVerified`] when the bundle was read and does not verify (a metadata copy it names missing
/// included); a storage error when it cannot be read.
pub async fn verified_predicate(
    storage: &Storage,
    bundle_uri: &str,
    trust: &TrustStore,
) -> Result<(BundlePredicate, BTreeMap<String, Bytes>)> {
    let dir = bundle_dir(bundle_uri)?;
    let (pred, _) = verified_in(storage, &dir, trust, |_| Ok(None)).await?;
    let mut copies = BTreeMap::new();
    intact_copies(storage, &dir, &pred, |path, bytes| {
        copies.insert(path.to_owned(), bytes);
    })
    .await?;
    Ok((pred, copies))
}

/// [`verified_predicate`] keeping only the inventory entries the function `keep` makes from the verified
/// predicate accepts (see [`load_inventory_keeping`]), with the inventory's canonical digests (its root
/// recomputed from every line, kept or not), and the paths (as written) of the metadata copies that match
/// their recorded BLAKE3 — checked one at a time, not held (a million-file snapshot's manifests are large, #24).
///
/// # Errors
/// [`Error::BundleNotVerified`] when the bundle was read and does not verify, a storage error when it cannot be
/// read, or what `keep` returns.
pub async fn verified_predicate_keeping(
    storage: &Storage,
    bundle_uri: &str,
    trust: &TrustStore,
    keep: impl FnOnce(&BundlePredicate) -> Result<Option<crate::evidence::inventory::Keep>>,
) -> Result<(BundlePredicate, BTreeSet<String>, CanonicalDigests)> {
    let dir = bundle_dir(bundle_uri)?;
    let (pred, digests) = verified_in(storage, &dir, trust, keep).await?;
    let mut intact = BTreeSet::new();
    intact_copies(storage, &dir, &pred, |path, _| {
        intact.insert(path.to_owned());
    })
    .await?;
    Ok((pred, intact, digests))
}

/// Reads every metadata copy the inventory of `pred` names (in the bundle folder `dir`) and hands each one whose
/// bytes match its recorded BLAKE3 to `intact` with the path it was written under; a copy that is missing is an
/// error, one that differs is left out.
async fn intact_copies(
    storage: &Storage,
    dir: &str,
    pred: &BundlePredicate,
    mut intact: impl FnMut(&str, Bytes),
) -> Result<()> {
    for e in pred.inventory.iter().filter(|e| e.layer.is_metadata()) {
        let Some(member) = &e.copy else { continue };
        let Some(copy) = get_copy(storage, &location::join(dir, member), e.layer, e.size).await? else {
            return Err(Error::not_verified(
                dir,
                format!("{member}: the metadata copy its inventory names is missing"),
            ));
        };
        // A copy larger than its signed size differs: it is left out without being read whole.
        if let Within::Read(copy) = copy
            && blake3::hash(&copy.bytes).to_hex().as_str() == e.blake3
        {
            intact(&e.path, copy.bytes);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(layer: Layer, path: &str, uri: &str) -> InventoryEntry {
        InventoryEntry {
            path: path.into(),
            uri: uri.into(),
            layer,
            size: 1,
            blake3: "ab".into(),
            e_tag: None,
            version: None,
            record_count: None,
            copy: None,
        }
    }

    fn predicate(inventory: Vec<InventoryEntry>) -> BundlePredicate {
        BundlePredicate {
            bundle_id: "1-x".into(),
            table_uuid: "u".into(),
            table_location: "wh/t".into(),
            snapshot_id: 1,
            snapshot_timestamp_ms: 0,
            sequence_number: 1,
            format_version: 2,
            sealed_at: String::new(),
            source_metadata_location: String::new(),
            source_metadata_blake3: String::new(),
            bundle_root: String::new(),
            objects: inventory.len(),
            bytes: 0,
            inventory,
            inventory_member: None,
            backup: None,
            orphans: None,
        }
    }

    #[test]
    fn inventory_uris_are_bound_to_their_paths() {
        let pred = predicate(vec![
            entry(
                Layer::Metadata,
                "file:///copy/t/metadata/v2.metadata.json",
                "file:///copy/t/metadata/v2.metadata.json",
            ),
            entry(
                Layer::ManifestList,
                "wh/t/metadata/snap-1.avro",
                "file:///copy/t/metadata/snap-1.avro",
            ),
            entry(Layer::Data, "wh/t/data/a.parquet", "file:///copy/t/data/a.parquet"),
            entry(Layer::Data, "wh/t/data/b.parquet", "file:///elsewhere/b.parquet"),
            entry(Layer::Data, "wh/t/data/c.parquet", "file:///copy/t/data/other.parquet"),
        ]);
        let b = UriBinding::new(&pred).unwrap();
        assert_eq!(b.root(), "file:///copy/t");
        let bound: Vec<bool> = pred.inventory.iter().map(|e| b.check(e).is_ok()).collect();
        assert_eq!(bound, [true, true, true, false, false]);
        let f = b.check(&pred.inventory[3]).unwrap_err();
        assert_eq!(f.kind, FindingKind::UriNotDerived);
        assert_eq!(f.path, "wh/t/data/b.parquet");
        assert!(f.expected.unwrap().contains("file:///copy/t/data/b.parquet"));
    }

    #[test]
    fn a_manifest_list_uri_that_does_not_end_with_its_path_binds_nothing() {
        let pred = predicate(vec![entry(
            Layer::ManifestList,
            "wh/t/metadata/snap-1.avro",
            "file:///copy/t/metadata/snap-2.avro",
        )]);
        assert!(UriBinding::new(&pred).unwrap_err().contains("snap-2.avro"));
        assert!(UriBinding::new(&predicate(vec![])).is_err());
    }

    #[test]
    fn cold_backup_objects_are_bound_to_their_digest() {
        let mut pred = predicate(vec![entry(
            Layer::Data,
            "wh/t/data/a.parquet",
            "s3://bk/vault/objects/ab",
        )]);
        pred.backup = Some(BackupInfo {
            checkpoint_id: "c".into(),
            declared_snapshot_id: 1,
            declared_at: String::new(),
            backup_root: "s3://bk/vault".into(),
        });
        let b = UriBinding::new(&pred).unwrap();
        assert!(b.check(&pred.inventory[0]).is_ok());
        pred.inventory[0].uri = "s3://bk/other/objects/ab".into();
        assert!(b.check(&pred.inventory[0]).is_err());
    }
}
