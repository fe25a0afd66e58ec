//! Sealed bundles: a signed, self-sufficient description of one snapshot.
//!
//! A bundle is a folder `<out>/<bundle_id>/` holding
//! * `bundle.dsse.json`, a DSSE envelope of an in-toto Statement whose predicate carries the
//!   inventory of every object the snapshot reaches (metadata JSON, manifest list, manifests,
//!   data files, delete files: path as written, storage URI read, layer, size, BLAKE3, ETag,
//!   version ID) and the **bundle root**, a BLAKE3 over the canonical inventory;
//! * `copies/<blake3>`, byte copies of the metadata JSON, the manifest list and every manifest,
//!   named by their digest.
//!
//! [`seal`] reads and hashes every object once, in parallel, and refuses (with findings) a
//! snapshot whose objects are missing or disagree with their manifests; it never modifies the
//! table. [`verify`] checks a bundle from the bundle alone — never from the live table's
//! metadata, which may be expired — and then checks every data and delete object in storage
//! (DESIGN §5). Both are findings-based: a mismatch is a finding, an unreadable store is an error.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::evidence::keys::{SigningKey, TrustStore};
pub use crate::evidence::predicate::RestoreStatus;
use crate::evidence::{self, Statement, Subject};
use crate::io::store::Storage;
use crate::model::findings::{Finding, FindingKind};
use crate::model::location::{self, TableLocation};
pub use crate::model::object::Layer;
use crate::table::tree::Content;
use crate::table::{self, Table};

/// `predicateType` of a bundle statement.
pub const PREDICATE_TYPE: &str = "https://lakedrill.dev/bundle/v1";
/// File name of the envelope inside a bundle folder.
pub const ENVELOPE_FILE: &str = "bundle.dsse.json";

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

/// Canonical bytes of an inventory: one JSON array per object, sorted by layer then path.
#[must_use]
pub fn canonical_inventory(entries: &[InventoryEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for_each_canonical_line(entries, |line| out.extend_from_slice(line));
    out
}

/// Hands each line of [`canonical_inventory`] (with its newline) to `each`, in order, without building the
/// whole text (a few hundred MB for a million objects).
fn for_each_canonical_line(entries: &[InventoryEntry], mut each: impl FnMut(&[u8])) {
    let mut sorted: Vec<&InventoryEntry> = entries.iter().collect();
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

/// The bundle root: BLAKE3 of the canonical inventory.
#[must_use]
pub fn inventory_root(entries: &[InventoryEntry]) -> String {
    canonical_digests(entries).0
}

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
        if let Some(b) = &pred.backup {
            return Ok(Self {
                root: b.backup_root.trim_end_matches('/').to_owned(),
                loc: None,
            });
        }
        let written = TableLocation::new(&pred.table_location, "memory:///unused".into(), ENVELOPE_FILE)
            .map_err(|e| e.to_string())?;
        let ml = pred
            .inventory
            .iter()
            .find(|e| e.layer == Layer::ManifestList)
            .ok_or("the inventory has no manifest list to anchor the table root")?;
        let rel = written.relative(&ml.path).map_err(|_| {
            format!(
                "the manifest list {} is not under the table location {}",
                ml.path, pred.table_location
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
        let loc =
            TableLocation::new(&pred.table_location, root.to_owned(), ENVELOPE_FILE).map_err(|e| e.to_string())?;
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

    /// The entry's `uri` when it is the one derived from its `path`.
    ///
    /// # Errors
    /// A [`FindingKind::UriNotDerived`] finding naming the entry, the URI expected and the one found.
    pub fn check(&self, e: &InventoryEntry) -> std::result::Result<String, Finding> {
        let expected = match &self.loc {
            None => Some(location::join(&self.root, &format!("objects/{}", e.blake3))),
            Some(loc) => loc.resolve(&e.path).ok(),
        };
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

/// What `seal` reports.
#[derive(Debug, Clone, Serialize)]
pub struct SealReport {
    /// The bundle id.
    pub bundle_id: String,
    /// The bundle root.
    pub bundle_root: String,
    /// The snapshot sealed.
    pub snapshot_id: i64,
    /// Objects in the inventory.
    pub objects: usize,
    /// Bytes in the inventory.
    pub bytes: u64,
    /// Where the bundle was written.
    pub uri: String,
}

fn format_version_number(t: &Table) -> u8 {
    match t.metadata().format_version() {
        iceberg::spec::FormatVersion::V1 => 1,
        iceberg::spec::FormatVersion::V2 => 2,
        iceberg::spec::FormatVersion::V3 => 3,
    }
}

/// Seals one snapshot of `table` into a bundle under `out_uri`.
///
/// Returns `Ok(Err(findings))` when the snapshot cannot be sealed because objects are missing or
/// disagree with their manifests: nothing is written then.
///
/// # Errors
/// Any [`Error`] that prevents deciding: an unreadable or malformed metadata layer (named), an
/// unreachable store, a bundle that already exists.
pub async fn seal(
    table: &Table,
    storage: &Storage,
    snapshot_id: i64,
    key: &SigningKey,
    out_uri: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<std::result::Result<SealReport, Vec<Finding>>> {
    let concurrency = storage.options().io_concurrency.get();
    let snapshot = table.snapshot(snapshot_id)?.clone();
    let tree = crate::table::scan::snapshot_files(table, storage, snapshot_id, concurrency).await?;
    let mut findings = Vec::new();
    // On the local filesystem, no object whose path (symlinks resolved) leaves the table root is sealed
    // (README "Symlinks"): a refusal naming the path and where it resolves to.
    let root = table.location().root_uri();
    let confined = storage.confine(root).await?;
    let layers = [(table.generation().metadata_location.as_str(), table.metadata_uri())]
        .into_iter()
        .chain(std::iter::once((
            tree.manifest_list_written.as_str(),
            tree.manifest_list_uri.as_str(),
        )))
        .chain(tree.manifests.iter().map(|m| (m.path.as_str(), m.uri.as_str())));
    for (path, uri) in layers {
        if location::is_under(uri, root)
            && let Some(target) = confined.escape(uri).await?
        {
            findings.push(symlink_finding(path, root, &target));
        }
    }
    let mut inventory = Vec::new();
    let mut copies: Vec<(String, Bytes)> = Vec::new();
    let mut add_copy = |layer: Layer,
                        path: &str,
                        uri: &str,
                        info: &crate::io::store::ObjectInfo,
                        bytes: &Bytes,
                        inventory: &mut Vec<InventoryEntry>| {
        let digest = blake3::hash(bytes).to_hex().to_string();
        copies.push((digest.clone(), bytes.clone()));
        inventory.push(InventoryEntry {
            path: path.to_owned(),
            uri: uri.to_owned(),
            layer,
            size: bytes.len() as u64,
            blake3: digest.clone(),
            e_tag: info.e_tag.clone(),
            version: info.version.clone(),
            record_count: None,
            copy: Some(format!("copies/{digest}")),
        });
    };
    let md_info = crate::io::store::ObjectInfo {
        uri: table.metadata_uri().to_owned(),
        size: table.metadata_bytes().len() as u64,
        e_tag: None,
        version: None,
        last_modified: now,
    };
    add_copy(
        Layer::Metadata,
        &table.generation().metadata_location,
        table.metadata_uri(),
        &md_info,
        table.metadata_bytes(),
        &mut inventory,
    );
    add_copy(
        Layer::ManifestList,
        &tree.manifest_list_written,
        &tree.manifest_list_uri,
        &tree.manifest_list.info,
        &tree.manifest_list.bytes,
        &mut inventory,
    );
    // (A manifest whose length differs from the list's record is refused by `snapshot_files`.)
    for m in &tree.manifests {
        add_copy(
            Layer::Manifest,
            &m.path,
            &m.uri,
            &m.fetched.info,
            &m.fetched.bytes,
            &mut inventory,
        );
    }
    // The manifests' bytes live on in `copies` until written; the listing is all that is needed here.
    let crate::table::scan::SnapshotFiles {
        files,
        manifests,
        manifest_list,
        ..
    } = tree;
    drop((manifests, manifest_list));
    // Data and delete files (each once): stream-hash each, in parallel, bounded; results go straight into
    // the inventory, so that a million files are held once as entries and once as the listing.
    let progress = crate::report::output::Progress::new("seal", files.len(), storage.options().progress);
    let progress = &progress;
    inventory.reserve(files.len());
    // The listing is consumed: each path moves into its inventory entry.
    let confined = &confined;
    let mut hashed = futures::stream::iter(files)
        .map(|f| async move {
            // Inner `Err`: where a path that leaves the table resolves to (not read).
            let h = match table.location().resolve(&f.file_path) {
                Ok(uri) => match confined.escape(&uri).await {
                    Ok(Some(target)) => Ok(Err(target)),
                    Ok(None) => storage.hash(&uri).await.map(|h| Ok((uri, h))),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            progress.tick(
                h.as_ref()
                    .ok()
                    .and_then(|h| h.as_ref().ok())
                    .map_or(0, |(_, h)| h.bytes_read),
            );
            (f, h)
        })
        .buffer_unordered(concurrency);
    while let Some((f, h)) = hashed.next().await {
        match h {
            Ok(Err(target)) => findings.push(symlink_finding(&f.file_path, root, &target)),
            Ok(Ok((uri, h))) => {
                if h.bytes_read != f.size {
                    findings.push(Finding::new(
                        FindingKind::SizeMismatch,
                        &f.file_path,
                        Some(f.size.to_string()),
                        Some(h.bytes_read.to_string()),
                    ));
                }
                inventory.push(InventoryEntry {
                    path: f.file_path,
                    uri,
                    layer: f.layer,
                    size: h.bytes_read,
                    blake3: h.blake3,
                    e_tag: h.info.e_tag,
                    version: h.info.version,
                    record_count: Some(f.record_count),
                    copy: None,
                });
            }
            Err(Error::NotFound { .. }) => findings.push(Finding::new(
                FindingKind::ObjectMissing,
                &f.file_path,
                Some("present".into()),
                Some("absent".into()),
            )),
            Err(e) => return Err(e),
        }
    }
    drop(hashed);
    if !findings.is_empty() {
        findings.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(Err(findings));
    }
    inventory.sort_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    let root = inventory_root(&inventory);
    let bundle_id = format!("{snapshot_id}-{}", &root[..16]);
    let bytes_total: u64 = inventory.iter().map(|e| e.size).sum();
    let predicate = BundlePredicate {
        bundle_id: bundle_id.clone(),
        table_uuid: table.metadata().uuid().to_string(),
        table_location: table.location().written().to_owned(),
        snapshot_id,
        snapshot_timestamp_ms: snapshot.timestamp_ms(),
        sequence_number: snapshot.sequence_number(),
        format_version: format_version_number(table),
        sealed_at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        source_metadata_location: table.generation().metadata_location.clone(),
        source_metadata_blake3: table.generation().metadata_blake3.clone(),
        bundle_root: root.clone(),
        objects: inventory.len(),
        bytes: bytes_total,
        inventory,
        backup: None,
    };
    let objects = predicate.objects;
    write_bundle(storage, predicate, copies, key, out_uri).await?;
    Ok(Ok(SealReport {
        bundle_id: bundle_id.clone(),
        bundle_root: root,
        snapshot_id,
        objects,
        bytes: bytes_total,
        uri: location::join(out_uri, &bundle_id),
    }))
}

/// Signs a bundle predicate and writes the bundle folder `<out_uri>/<bundle_id>/`: the byte copies
/// first, the envelope last (a folder without its envelope is incomplete and never listed).
///
/// # Errors
/// [`Error::Storage`]; `AlreadyExists` when the bundle exists.
pub async fn write_bundle(
    storage: &Storage,
    mut predicate: BundlePredicate,
    mut copies: Vec<(String, Bytes)>,
    key: &SigningKey,
    out_uri: &str,
) -> Result<String> {
    let bundle_id = predicate.bundle_id.clone();
    let root = predicate.bundle_root.clone();
    let dir = location::join(out_uri, &bundle_id);
    // The byte copies first, each dropped once written.
    copies.sort_by(|a, b| a.0.cmp(&b.0));
    copies.dedup_by(|a, b| a.0 == b.0);
    for (digest, bytes) in copies {
        let member = location::join(&dir, &format!("copies/{digest}"));
        match storage.put_new(&member, bytes).await {
            Ok(_) => {}
            // Left by an interrupted run: kept only when it is the same bytes (named by digest).
            Err(Error::AlreadyExists { .. }) => {
                let h = storage.hash(&member).await?;
                if h.blake3 != digest {
                    return Err(Error::corrupt(
                        &member,
                        format!("exists with BLAKE3 {}, not the digest it is named by", h.blake3),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    // The statement. The inventory is the bulk of a large bundle: it is written into the payload entry by
    // entry (the same bytes as through a `Value`, at a third of the memory), and each intermediate form is
    // dropped as soon as the next exists.
    let (_, canonical_sha256) = canonical_digests(&predicate.inventory);
    let mut inventory = Some(std::mem::take(&mut predicate.inventory));
    let entries = inventory.as_ref().map_or(0, Vec::len);
    let statement = Statement {
        subject: vec![Subject {
            name: format!("lakedrill-bundle:{bundle_id}"),
            digest: BTreeMap::from([
                ("sha256".to_owned(), canonical_sha256),
                ("blake3".to_owned(), root.clone()),
            ]),
        }],
        predicate_type: PREDICATE_TYPE.to_owned(),
        predicate: serde_json::to_value(&predicate).map_err(|e| Error::Internal(format!("bundle predicate: {e}")))?,
    };
    let mut failed = None;
    // Entries are consumed as they are written: each one's strings are freed once it is in the payload.
    let mut write_inventory = |out: &mut Vec<u8>| {
        out.push(b'[');
        for (i, e) in inventory.take().unwrap_or_default().into_iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if let Err(e) = evidence::append_sorted_json(&e, out) {
                failed.get_or_insert(e);
            }
        }
        out.push(b']');
    };
    // The payload is written, signed and turned into the envelope file in one buffer (`PayloadBuffer`).
    let mut payload = evidence::PayloadBuffer::new(evidence::PAYLOAD_TYPE, entries * 420 + (64 << 10));
    statement.write_with_member(&mut payload.payload_mut(), Some(("inventory", &mut write_inventory)));
    if let Some(e) = failed {
        return Err(Error::Internal(format!("bundle inventory: {e}")));
    }
    let envelope = payload
        .sign_to_json_bytes(key)
        .map_err(|e| Error::Internal(format!("bundle envelope: {e}")))?;
    // The envelope goes last: a bundle folder without it is incomplete and never listed as a bundle.
    let env_uri = location::join(&dir, ENVELOPE_FILE);
    match storage.put_new(&env_uri, Bytes::from(envelope)).await {
        Ok(_) => Ok(dir),
        // Sealed before (a quarantine that failed after sealing and is retried): the existing bundle stands
        // when this key signed it for the same snapshot and the same root; anything else is refused.
        Err(Error::AlreadyExists { .. }) => {
            let existing = storage.get(&env_uri).await?.bytes;
            let trust = crate::evidence::keys::TrustStore::from_keys(vec![crate::evidence::keys::PublicKey::new(
                "sealing-key",
                "sealing-key.pub",
                key.verifying_key(),
            )])?;
            let same = evidence::verify(&existing, &trust).ok().is_some_and(|v| {
                v.predicate()["snapshot_id"] == serde_json::json!(predicate.snapshot_id)
                    && v.predicate()["bundle_root"] == serde_json::json!(root)
            });
            if same {
                Ok(dir)
            } else {
                Err(Error::invalid(
                    &env_uri,
                    "exists and is not this key's seal of the same snapshot and root; bundles are never overwritten",
                ))
            }
        }
        Err(e) => Err(e),
    }
}

/// How to verify a bundle.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Also read Parquet footers and compare row counts with the manifests.
    pub deep: bool,
    /// Read data from a relocated copy of the table rooted here.
    pub table_root: Option<String>,
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
    /// Bundle root.
    pub bundle_root: Option<String>,
    /// Commit time of the bundled snapshot (the declared recovery point).
    pub snapshot_timestamp_ms: Option<i64>,
    /// Objects whose bytes were verified.
    pub objects_verified: usize,
    /// Bytes verified.
    pub bytes_verified: u64,
    /// Every problem found.
    pub findings: Vec<Finding>,
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

/// Verifies a bundle per DESIGN §5, from the bundle alone plus the data objects in storage.
///
/// # Errors
/// Only when lakedrill cannot decide (the envelope cannot be read at all, a store is unreachable);
/// every problem in the bundle or the data is a finding in the report.
#[allow(clippy::too_many_lines)]
pub async fn verify(
    storage: &Storage,
    bundle_uri: &str,
    trust: &TrustStore,
    opts: &VerifyOptions,
) -> Result<RestoreReport> {
    let dir = bundle_dir(bundle_uri)?;
    let env_uri = location::join(&dir, ENVELOPE_FILE);
    let envelope = storage.get(&env_uri).await?.bytes;
    let mut report = RestoreReport {
        status: RestoreStatus::Failed,
        bundle_id: None,
        table_uuid: None,
        snapshot_id: None,
        bundle_root: None,
        snapshot_timestamp_ms: None,
        objects_verified: 0,
        bytes_verified: 0,
        findings: Vec::new(),
    };
    let finish = |mut r: RestoreReport| {
        r.status = if r.findings.is_empty() {
            RestoreStatus::RestoreVerified
        } else {
            RestoreStatus::Failed
        };
        r
    };
    // 1. Signature, payload type, statement.
    let verified = match evidence::verify(&envelope, trust) {
        Ok(v) => v,
        Err(f) => {
            report.findings.push(Finding::new(
                FindingKind::BundleSignature,
                ENVELOPE_FILE,
                Some("a valid signature by a trusted key".into()),
                Some(f.to_string()),
            ));
            return Ok(finish(report));
        }
    };
    if verified.predicate_type() != PREDICATE_TYPE {
        report.findings.push(Finding::new(
            FindingKind::BundleSignature,
            ENVELOPE_FILE,
            Some(PREDICATE_TYPE.into()),
            Some(verified.predicate_type().to_owned()),
        ));
        return Ok(finish(report));
    }
    let pred: BundlePredicate = match serde_json::from_value(verified.predicate().clone()) {
        Ok(p) => p,
        Err(e) => {
            report.findings.push(Finding::new(
                FindingKind::BundleSignature,
                ENVELOPE_FILE,
                Some("a bundle predicate".into()),
                Some(e.to_string()),
            ));
            return Ok(finish(report));
        }
    };
    report.bundle_id = Some(pred.bundle_id.clone());
    report.table_uuid = Some(pred.table_uuid.clone());
    report.snapshot_id = Some(pred.snapshot_id);
    report.bundle_root = Some(pred.bundle_root.clone());
    report.snapshot_timestamp_ms = Some(pred.snapshot_timestamp_ms);
    let (root, sha) = canonical_digests(&pred.inventory);
    if root != pred.bundle_root {
        report.findings.push(Finding::new(
            FindingKind::RootMismatch,
            ENVELOPE_FILE,
            Some(pred.bundle_root.clone()),
            Some(root.clone()),
        ));
    }
    let subject_ok = verified.subjects().len() == 1
        && verified.subjects()[0].digest.get("sha256") == Some(&sha)
        && verified.subjects()[0].digest.get("blake3") == Some(&pred.bundle_root);
    if !subject_ok {
        report.findings.push(Finding::new(
            FindingKind::SubjectMismatch,
            ENVELOPE_FILE,
            Some(format!("sha256:{sha}")),
            Some(format!("{:?}", verified.subjects())),
        ));
    }
    // Every entry's uri must be derived from its path (see `UriBinding`); an unbound entry is never opened.
    let binding = match UriBinding::new(&pred) {
        Ok(b) => Some(b),
        Err(reason) => {
            report.findings.push(Finding::new(
                FindingKind::UriNotDerived,
                ENVELOPE_FILE,
                Some("a manifest-list entry whose uri is its path under the table root".into()),
                Some(reason),
            ));
            None
        }
    };
    let mut unbound: BTreeSet<&str> = BTreeSet::new();
    for e in &pred.inventory {
        let bound = match &binding {
            Some(b) => b.check(e).map_err(|f| report.findings.push(f)).is_ok(),
            None => false,
        };
        if !bound {
            unbound.insert(e.path.as_str());
        }
    }
    // 2. Metadata copies against the inventory, then the layers against each other.
    let loc = match opts.table_root.as_deref() {
        Some(r) => TableLocation::new(&pred.table_location, location::canonical_uri(r)?, &env_uri).ok(),
        None => None,
    };
    // Where objects are opened: the --table-root, else the root the inventory is bound to. On the local
    // filesystem nothing whose resolved path leaves that root (resolved) is read (README "Symlinks").
    let open_root = match (opts.table_root.as_deref(), &binding) {
        (Some(r), _) => Some(location::canonical_uri(r)?),
        (None, Some(b)) => Some(b.root().to_owned()),
        (None, None) => None,
    };
    let confined = match &open_root {
        Some(r) => Some(storage.confine(r).await?),
        None => None,
    };
    let written_loc = TableLocation::new(&pred.table_location, "memory:///unused".into(), &env_uri).ok();
    let mut copies: BTreeMap<String, Bytes> = BTreeMap::new();
    for e in pred.inventory.iter().filter(|e| e.layer.is_metadata()) {
        let Some(member) = &e.copy else {
            report.findings.push(Finding::new(
                FindingKind::CopyMissing,
                &e.path,
                Some("a byte copy in the bundle".into()),
                Some("none named".into()),
            ));
            continue;
        };
        if member != &format!("copies/{}", e.blake3) {
            report.findings.push(Finding::new(
                FindingKind::CopyMissing,
                &e.path,
                Some(format!("copies/{}", e.blake3)),
                Some(member.clone()),
            ));
            continue;
        }
        match get_copy(storage, &location::join(&dir, member), e.layer).await? {
            None => report.findings.push(Finding::new(
                FindingKind::CopyMissing,
                &e.path,
                Some(member.clone()),
                Some("absent".into()),
            )),
            Some(f) => {
                let d = blake3::hash(&f.bytes).to_hex().to_string();
                if d != e.blake3 || f.bytes.len() as u64 != e.size {
                    report.findings.push(Finding::new(
                        FindingKind::CopyDigestMismatch,
                        &e.path,
                        Some(e.blake3.clone()),
                        Some(d),
                    ));
                } else {
                    report.objects_verified += 1;
                    report.bytes_verified += e.size;
                    copies.insert(e.path.clone(), f.bytes);
                }
            }
        }
    }
    check_layers(
        &pred,
        &copies,
        written_loc.as_ref(),
        storage.options().max_metadata_bytes,
        &mut report.findings,
    );
    // The table's own metadata objects are not read (the copies are), but one that has become a symlink
    // leaving the table is a table that readers would read from elsewhere: a finding.
    if let (Some(c), Some(root)) = (&confined, &open_root) {
        for e in pred.inventory.iter().filter(|e| e.layer.is_metadata()) {
            let at = match &loc {
                Some(l) => l.resolve(&e.path).ok(),
                None if !unbound.contains(e.path.as_str()) => Some(e.uri.clone()),
                None => None,
            };
            if let Some(at) = at.filter(|u| location::is_under(u, root))
                && let Some(target) = c.escape(&at).await?
            {
                report.findings.push(symlink_finding(&e.path, root, &target));
            }
        }
    }
    // 3. Data and delete objects in storage.
    let concurrency = storage.options().io_concurrency.get();
    let data: Vec<InventoryEntry> = pred
        .inventory
        .iter()
        .filter(|e| !e.layer.is_metadata())
        .cloned()
        .collect();
    let mut to_check = Vec::new();
    for e in data {
        // Never open a path outside the table location.
        if let Some(w) = &written_loc
            && w.relative(&e.path).is_err()
        {
            report.findings.push(Finding::new(
                FindingKind::PathOutsideTable,
                &e.path,
                Some(pred.table_location.clone()),
                Some("outside; not opened".into()),
            ));
            continue;
        }
        let uri = match &loc {
            Some(l) => l.resolve(&e.path)?,
            None if unbound.contains(e.path.as_str()) => continue,
            None => e.uri.clone(),
        };
        to_check.push((e, uri));
    }
    let deep = opts.deep;
    let progress = crate::report::output::Progress::new("verify", to_check.len(), storage.options().progress);
    let progress = &progress;
    let confined = &confined;
    // Inner `Err`: the object's resolved path leaves the table root (it was not read).
    let results: Vec<(InventoryEntry, Result<std::result::Result<Checked, String>>)> = futures::stream::iter(to_check)
        .map(|(e, uri)| async move {
            let res = async {
                if let Some(c) = confined
                    && let Some(target) = c.escape(&uri).await?
                {
                    return Ok(Err(target));
                }
                let h = storage.hash(&uri).await?;
                let rows = if deep && h.bytes_read == e.size && h.blake3 == e.blake3 {
                    Some(parquet_rows(storage, &uri, h.bytes_read).await?)
                } else {
                    None
                };
                Ok(Ok((h, rows)))
            }
            .await;
            progress.tick(e.size);
            (e, res)
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for (e, res) in results {
        match res {
            Err(Error::NotFound { .. }) => report.findings.push(Finding::new(
                FindingKind::ObjectMissing,
                &e.path,
                Some(format!("{} bytes", e.size)),
                Some("absent".into()),
            )),
            Err(Error::Storage { .. }) => report.findings.push(Finding::new(
                FindingKind::ReadFailed,
                &e.path,
                None,
                Some("storage error".into()),
            )),
            Err(other) => return Err(other),
            Ok(Err(target)) => {
                let root = open_root.as_deref().unwrap_or_default();
                report.findings.push(symlink_finding(&e.path, root, &target));
            }
            Ok(Ok((h, rows))) => {
                if h.bytes_read != e.size {
                    report.findings.push(Finding::new(
                        FindingKind::SizeMismatch,
                        &e.path,
                        Some(e.size.to_string()),
                        Some(h.bytes_read.to_string()),
                    ));
                } else if h.blake3 != e.blake3 {
                    report.findings.push(Finding::new(
                        FindingKind::DigestMismatch,
                        &e.path,
                        Some(e.blake3.clone()),
                        Some(h.blake3.clone()),
                    ));
                } else {
                    report.objects_verified += 1;
                    report.bytes_verified += e.size;
                }
                match rows {
                    Some(Ok(n)) if Some(n) != e.record_count => report.findings.push(Finding::new(
                        FindingKind::RowCountMismatch,
                        &e.path,
                        e.record_count.map(|r| r.to_string()),
                        Some(n.to_string()),
                    )),
                    Some(Err(reason)) => report.findings.push(Finding::new(
                        FindingKind::DataUnreadable,
                        &e.path,
                        Some("a Parquet footer".into()),
                        Some(reason),
                    )),
                    _ => {}
                }
            }
        }
    }
    report
        .findings
        .sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    Ok(finish(report))
}

/// Reads a bundle's byte copy, `None` when it is absent; the table metadata copy is read within
/// [`crate::io::store::StorageOptions::max_metadata_bytes`], like the table's own metadata.
async fn get_copy(storage: &Storage, uri: &str, layer: Layer) -> Result<Option<crate::io::store::Fetched>> {
    if layer != Layer::Metadata {
        return storage.get_opt(uri).await;
    }
    let max = storage.options().max_metadata_bytes;
    match storage.get_bounded(uri, max, "the bundle's table metadata copy").await {
        Ok(f) => Ok(Some(f)),
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

/// A data object hashed, and (deep mode) its Parquet row count or why it could not be read.
type Checked = (crate::io::store::Hashed, Option<std::result::Result<u64, String>>);

/// Reads a Parquet footer and returns the file's row count.
async fn parquet_rows(storage: &Storage, uri: &str, size: u64) -> Result<std::result::Result<u64, String>> {
    if size < 12 {
        return Ok(Err("too small to be Parquet".into()));
    }
    let tail = storage.get_range(uri, size - 8..size).await?;
    let Ok(tail8): std::result::Result<[u8; 8], _> = tail[..].try_into() else {
        return Ok(Err("short read of the footer".into()));
    };
    let len = match parquet::file::metadata::FooterTail::try_from(tail8) {
        Ok(t) => t.metadata_length() as u64,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if len + 8 > size {
        return Ok(Err(format!("footer length {len} exceeds the file")));
    }
    let footer = storage.get_range(uri, size - 8 - len..size - 8).await?;
    match parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&footer) {
        Ok(md) => Ok(Ok(u64::try_from(md.file_metadata().num_rows()).unwrap_or(0))),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Checks that the bundled metadata, manifest list and manifests name exactly the inventory.
fn check_layers(
    pred: &BundlePredicate,
    copies: &BTreeMap<String, Bytes>,
    loc: Option<&TableLocation>,
    max_metadata_bytes: u64,
    findings: &mut Vec<Finding>,
) {
    let by_layer = |l: Layer| -> BTreeSet<&str> {
        pred.inventory
            .iter()
            .filter(|e| e.layer == l)
            .map(|e| e.path.as_str())
            .collect()
    };
    let Some(md_entry) = pred.inventory.iter().find(|e| e.layer == Layer::Metadata) else {
        findings.push(Finding::new(
            FindingKind::LayerMissing,
            "metadata.json",
            Some("the table metadata".into()),
            Some("absent from the inventory".into()),
        ));
        return;
    };
    let Some(md_bytes) = copies.get(&md_entry.path) else {
        return;
    };
    let (md, _) = match table::parse_metadata(&md_entry.path, md_bytes, max_metadata_bytes) {
        Ok(m) => m,
        Err(e) => {
            findings.push(Finding::new(
                FindingKind::CopyUnreadable,
                &md_entry.path,
                None,
                Some(format!("{e}")),
            ));
            return;
        }
    };
    let Some(snapshot) = md.snapshot_by_id(pred.snapshot_id) else {
        findings.push(Finding::new(
            FindingKind::SnapshotMissing,
            &md_entry.path,
            Some(pred.snapshot_id.to_string()),
            Some("not in the metadata".into()),
        ));
        return;
    };
    let lists = by_layer(Layer::ManifestList);
    if !lists.contains(snapshot.manifest_list()) {
        findings.push(Finding::new(
            FindingKind::LayerMissing,
            snapshot.manifest_list(),
            Some("the snapshot's manifest list".into()),
            Some("absent from the inventory".into()),
        ));
    }
    for extra in lists.iter().filter(|l| **l != snapshot.manifest_list()) {
        findings.push(Finding::new(
            FindingKind::ExtraObject,
            *extra,
            None,
            Some("a manifest list the snapshot does not name".into()),
        ));
    }
    let Some(list_bytes) = copies.get(snapshot.manifest_list()) else {
        return;
    };
    let list = match table::parse_manifest_list(snapshot.manifest_list(), list_bytes, md.format_version()) {
        Ok(l) => l,
        Err(e) => {
            findings.push(Finding::new(
                FindingKind::CopyUnreadable,
                snapshot.manifest_list(),
                None,
                Some(format!("{e}")),
            ));
            return;
        }
    };
    let named: BTreeSet<&str> = list.entries().iter().map(|m| m.manifest_path.as_str()).collect();
    let have = by_layer(Layer::Manifest);
    for m in named.difference(&have) {
        findings.push(Finding::new(
            FindingKind::LayerMissing,
            *m,
            Some("a manifest named by the manifest list".into()),
            Some("absent from the inventory".into()),
        ));
    }
    for m in have.difference(&named) {
        findings.push(Finding::new(
            FindingKind::ExtraObject,
            *m,
            None,
            Some("a manifest the manifest list does not name".into()),
        ));
    }
    let mut live: BTreeMap<String, (Layer, u64)> = BTreeMap::new();
    for mf in list.entries() {
        let Some(bytes) = copies.get(&mf.manifest_path) else {
            continue;
        };
        let manifest = match table::parse_manifest(&mf.manifest_path, bytes) {
            Ok(m) => m,
            Err(e) => {
                findings.push(Finding::new(
                    FindingKind::CopyUnreadable,
                    &mf.manifest_path,
                    None,
                    Some(format!("{e}")),
                ));
                continue;
            }
        };
        for e in manifest.entries().iter().filter(|e| e.is_alive()) {
            let df = e.data_file();
            if let Some(l) = loc
                && l.relative(df.file_path()).is_err()
            {
                continue; // reported as PATH_OUTSIDE_TABLE with the inventory check
            }
            live.insert(
                df.file_path().to_owned(),
                (Content::from(df.content_type()).into(), df.file_size_in_bytes()),
            );
        }
    }
    let inv: BTreeMap<&str, &InventoryEntry> = pred
        .inventory
        .iter()
        .filter(|e| !e.layer.is_metadata())
        .map(|e| (e.path.as_str(), e))
        .collect();
    for (path, (layer, size)) in &live {
        match inv.get(path.as_str()) {
            None => findings.push(Finding::new(
                FindingKind::LayerMissing,
                path,
                Some(format!("{layer:?} file named by a manifest")),
                Some("absent from the inventory".into()),
            )),
            Some(e) if e.size != *size => findings.push(Finding::new(
                FindingKind::SizeMismatch,
                path,
                Some(size.to_string()),
                Some(e.size.to_string()),
            )),
            Some(_) => {}
        }
    }
    for path in inv.keys() {
        if !live.contains_key(*path) {
            findings.push(Finding::new(
                FindingKind::ExtraObject,
                *path,
                None,
                Some("an object no live manifest entry names".into()),
            ));
        }
    }
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
    let envelope = storage.get(&location::join(&dir, ENVELOPE_FILE)).await?.bytes;
    let v = evidence::verify(&envelope, trust).map_err(|f| Error::invalid(&dir, format!("bundle signature: {f}")))?;
    let pred: BundlePredicate = serde_json::from_value(v.predicate().clone())
        .map_err(|e| Error::invalid(&dir, format!("bundle predicate: {e}")))?;
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

/// The predicate of a bundle whose signature verifies, with every metadata copy that matches its
/// inventory digest, by path as written.
///
/// # Errors
/// [`Error::Invalid`] when the bundle does not verify.
pub async fn verified_predicate(
    storage: &Storage,
    bundle_uri: &str,
    trust: &TrustStore,
) -> Result<(BundlePredicate, BTreeMap<String, Bytes>)> {
    let dir = bundle_dir(bundle_uri)?;
    let envelope = storage.get(&location::join(&dir, ENVELOPE_FILE)).await?.bytes;
    let v = evidence::verify(&envelope, trust).map_err(|f| Error::invalid(&dir, format!("bundle signature: {f}")))?;
    let pred: BundlePredicate = serde_json::from_value(v.predicate().clone())
        .map_err(|e| Error::invalid(&dir, format!("bundle predicate: {e}")))?;
    let mut copies = BTreeMap::new();
    for e in pred.inventory.iter().filter(|e| e.layer.is_metadata()) {
        let Some(member) = &e.copy else { continue };
        let Some(copy) = get_copy(storage, &location::join(&dir, member), e.layer).await? else {
            return Err(Error::NotFound {
                uri: location::join(&dir, member),
            });
        };
        let bytes = copy.bytes;
        if blake3::hash(&bytes).to_hex().as_str() == e.blake3 {
            copies.insert(e.path.clone(), bytes);
        }
    }
    Ok((pred, copies))
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
            backup: None,
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
