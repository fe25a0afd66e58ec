//! Sealing: one snapshot of a table into a bundle folder (see [`crate::bundle`] for the format).
//!
//! [`seal()`] reads and hashes every object the snapshot reaches once, in parallel and bounded,
//! refuses with findings a snapshot whose objects are missing, disagree with their manifests or
//! leave the table root, or whose deletion vectors (v3) fail their checks ([`crate::table::puffin`]), and only then signs and writes the bundle ([`write_bundle`]: the byte
//! copies first, the envelope last). It never modifies the table and never overwrites a bundle.
//! It may use what the `bundle` wing may use: `table` to read the snapshot, `io` to read and write
//! objects, `evidence` to sign, `report` for progress.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::StreamExt;
use serde::Serialize;

use super::format::{BundlePredicate, ENVELOPE_FILE, InventoryEntry, Layer, PREDICATE_TYPE, symlink_finding};
use super::objects::ObjectIndex;
use crate::error::{Error, Result};
use crate::evidence::inventory::{BackupInfo, INVENTORY_MEMBER, InventoryMember, MemberWriter};
use crate::evidence::keys::SigningKey;
use crate::evidence::{self, Statement, Subject};
use crate::io::store::Storage;
use crate::model::findings::{Finding, FindingKind};
use crate::model::location;
use crate::table::Table;

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
    /// Whether this seal wrote the bundle's envelope (`false`: a bundle of the same name, snapshot and root already
    /// stood there, sealed by an earlier or a concurrent run, and was kept as it is). Only a run that created a
    /// bundle folder may remove it: another run may have recorded the one it found.
    #[serde(skip)]
    pub created: bool,
}

fn format_version_number(t: &Table) -> u8 {
    match t.metadata().format_version() {
        iceberg::spec::FormatVersion::V1 => 1,
        iceberg::spec::FormatVersion::V2 => 2,
        iceberg::spec::FormatVersion::V3 => 3,
    }
}

/// The predicate of a bundle of one snapshot of `table`: a sealed bundle (`backup: None`) or a cold backup.
#[must_use]
pub fn snapshot_predicate(
    table: &Table,
    snapshot: &iceberg::spec::Snapshot,
    bundle_id: String,
    bundle_root: String,
    inventory: Vec<InventoryEntry>,
    now: chrono::DateTime<chrono::Utc>,
    backup: Option<BackupInfo>,
) -> BundlePredicate {
    BundlePredicate {
        bundle_id,
        table_uuid: table.metadata().uuid().to_string(),
        table_location: table.location().written().to_owned(),
        snapshot_id: snapshot.snapshot_id(),
        snapshot_timestamp_ms: snapshot.timestamp_ms(),
        sequence_number: snapshot.sequence_number(),
        format_version: format_version_number(table),
        sealed_at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        source_metadata_location: table.generation().metadata_location.clone(),
        source_metadata_blake3: table.generation().metadata_blake3.clone(),
        bundle_root,
        objects: inventory.len(),
        bytes: inventory.iter().map(|e| e.size).sum(),
        inventory,
        inventory_member: None,
        backup,
        orphans: None,
    }
}

/// Seals one snapshot of `table` into a bundle under `out_uri`, named `<snapshot id>-<first 16 hex of the root>`.
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
    seal_for(table, storage, snapshot_id, key, out_uri, now, None).await
}

/// [`seal()`] for a quarantine of candidate `candidate_id` (`Some`): the bundle is named
/// `<snapshot id>-<candidate id without its c->-<first 16 hex of the root>`, so that two candidates sharing a
/// snapshot (planned at different times on one generation) never share a bundle folder, and the one refused
/// never removes the other's recorded bundle. Nothing reads a bundle's name back: it only has to be unique.
///
/// # Errors
/// As [`seal()`].
pub async fn seal_for(
    table: &Table,
    storage: &Storage,
    snapshot_id: i64,
    key: &SigningKey,
    out_uri: &str,
    now: chrono::DateTime<chrono::Utc>,
    candidate_id: Option<&str>,
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
    let mut copies: Vec<(String, Copy)> = Vec::new();
    // The metadata file and the manifest list are held; a manifest's bytes are read again when its copy is written
    // (and must have the digest sealed): a million-entry manifest is tens of MB that hashing the data files need
    // not hold (#24 point 2).
    let mut add_copy = |layer: Layer,
                        path: &str,
                        uri: &str,
                        info: &crate::io::store::ObjectInfo,
                        bytes: &Bytes,
                        digest: String,
                        inventory: &mut Vec<InventoryEntry>| {
        let copy = if layer == Layer::Manifest {
            Copy::ReadAgain(uri.to_owned())
        } else {
            Copy::Held(bytes.clone())
        };
        copies.push((digest.clone(), copy));
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
        blake3_on_rayon(table.metadata_bytes().clone()).await?,
        &mut inventory,
    );
    add_copy(
        Layer::ManifestList,
        &tree.manifest_list_written,
        &tree.manifest_list_uri,
        &tree.manifest_list.info,
        &tree.manifest_list.bytes,
        blake3_on_rayon(tree.manifest_list.bytes.clone()).await?,
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
            blake3_on_rayon(m.fetched.bytes.clone()).await?,
            &mut inventory,
        );
    }
    // The manifests' bytes are read again when their copies are written; the listing is all that is needed here.
    let crate::table::scan::SnapshotFiles {
        files,
        manifests,
        manifest_list,
        deletion_vectors,
        ..
    } = tree;
    drop((manifests, manifest_list));
    // Data and delete files (each once): stream-hash each, in parallel, bounded; results go straight into
    // the inventory, so that a million files are held once as entries and once as the listing.
    // Counted as the result counts: the metadata layers above are done, and a data or delete object that cannot
    // be sealed (missing, another size, outside the table) is counted as failed.
    let progress = crate::report::output::Progress::new("seal", files.len(), storage.options().progress)
        .with_done(inventory.len(), inventory.iter().map(|e| e.size).sum());
    let progress = &progress;
    // The data and delete entries, held compactly (#24: ~190 B an object instead of ~500 as typed entries with
    // their URIs); the URI is derived from the path again as the inventory member is written.
    let mut objects = ObjectIndex::with_tags(files.len());
    // The listing is consumed: each path moves into its inventory entry.
    let confined = &confined;
    // Taken from the end of the listing, which gives its memory back as it empties (the paths move on into the
    // inventory; the listing's own slots, ~140 B per file, would otherwise stay until the last file is hashed).
    let mut files = files;
    let listing = std::iter::from_fn(move || {
        let f = files.pop();
        if files.capacity() > 4096 && files.len() < files.capacity() / 2 {
            files.shrink_to_fit();
        }
        f
    });
    let mut hashed = futures::stream::iter(listing)
        .map(|f| async move {
            // Inner `Err`: where a path that leaves the table resolves to (not read). The URI read goes back
            // with the result: under `--table-root` a finding names it beside the path the metadata writes.
            let (uri, h) = match table.location().resolve(&f.file_path) {
                Ok(uri) => {
                    let h = match confined.escape(&uri).await {
                        Ok(Some(target)) => Ok(Err(target)),
                        Ok(None) => storage.hash(&uri).await.map(Ok),
                        Err(e) => Err(e),
                    };
                    (Some(uri), h)
                }
                Err(e) => (None, Err(e)),
            };
            (f, uri, h)
        })
        .buffer_unordered(concurrency);
    while let Some((f, uri, h)) = hashed.next().await {
        let read = uri.as_deref().unwrap_or_default();
        let before = findings.len();
        let size = f.size;
        match h {
            Ok(Err(target)) => findings.push(symlink_finding(&f.file_path, root, &target)),
            Ok(Ok(h)) => {
                if h.bytes_read != f.size {
                    findings.push(
                        Finding::new(
                            FindingKind::SizeMismatch,
                            &*f.file_path,
                            Some(f.size.to_string()),
                            Some(h.bytes_read.to_string()),
                        )
                        .read_at(read),
                    );
                }
                let record_count = deletion_vectors
                    .get(&*f.file_path)
                    .map_or(f.record_count, |d| d.iter().map(|v| v.record_count).sum());
                objects.push(&InventoryEntry {
                    path: f.file_path.into(),
                    uri: String::new(),
                    layer: f.layer,
                    size: h.bytes_read,
                    blake3: h.blake3,
                    e_tag: h.info.e_tag,
                    version: h.info.version,
                    // A Puffin file of deletion vectors: the positions all its live vectors delete.
                    record_count: Some(record_count),
                    copy: None,
                });
            }
            Err(Error::NotFound { .. }) => findings.push(
                Finding::new(
                    FindingKind::ObjectMissing,
                    &*f.file_path,
                    Some("present".into()),
                    Some("absent".into()),
                )
                .read_at(read),
            ),
            Err(e) => return Err(e),
        }
        progress.tick_checked(size, findings.len() > before);
    }
    drop(hashed);
    // v3 deletion vectors: a Puffin file whose size is right is also read (footer and blobs) and each
    // vector checked against its manifest entries; a broken vector is a refusal naming file, blob and check.
    let puffins = objects
        .iter()
        .filter_map(|o| deletion_vectors.get(o.path).map(|d| (o, d.as_slice())))
        .filter(|(o, _)| !findings.iter().any(|f| f.path == o.path))
        .map(|(o, d)| Ok((table.location().resolve(o.path)?, o.path, o.size, d)))
        .collect::<Result<Vec<_>>>()?;
    let checked: Vec<Result<Vec<Finding>>> = futures::stream::iter(puffins)
        .map(|(uri, path, size, d)| async move {
            let found = crate::table::puffin::verify_file(storage, &uri, path, size, d).await?;
            Ok(found.into_iter().map(|f| f.read_at(&uri)).collect())
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for c in checked {
        findings.extend(c?);
    }
    if !findings.is_empty() {
        findings.sort_by(|a, b| a.path.cmp(&b.path));
        return Ok(Err(findings));
    }
    // Canonical order: the metadata layers (sorted here), then the data and delete objects (sorted in the index).
    inventory.sort_unstable_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    objects.sort();
    let loc = table.location();
    let entries = || {
        inventory.iter().cloned().map(Ok).chain((0..objects.len()).map(|at| {
            let mut e = objects.entry(at);
            e.uri = loc.resolve(&e.path)?;
            Ok(e)
        }))
    };
    // The root and the inventory member's digests over the entries as they are made, one at a time (the first
    // that cannot be made stops it), the member's bytes dropped as they are digested: one pass gives the bundle
    // id and the claim the member is written under.
    let (digests, member) = {
        let mut w = MemberWriter::new();
        for e in entries() {
            w.push(&e?)
                .map_err(|why| Error::Internal(format!("sealing snapshot {snapshot_id}: {why}")))?;
            if w.buffered() >= 4 << 20 {
                w.take();
            }
        }
        w.take();
        w.finish()
    };
    let root = digests.root;
    let bundle_id = match candidate_id {
        Some(c) => format!("{snapshot_id}-{}-{}", c.trim_start_matches("c-"), &root[..16]),
        None => format!("{snapshot_id}-{}", &root[..16]),
    };
    let bytes_total: u64 = inventory.iter().map(|e| e.size).sum::<u64>() + objects.iter().map(|o| o.size).sum::<u64>();
    let count = inventory.len() + objects.len();
    let mut predicate = snapshot_predicate(table, &snapshot, bundle_id.clone(), root.clone(), Vec::new(), now, None);
    predicate.objects = count;
    predicate.bytes = bytes_total;
    let (_, created) = write_bundle_streamed(storage, predicate, entries, Some(member), copies, key, out_uri).await?;
    Ok(Ok(SealReport {
        bundle_id: bundle_id.clone(),
        bundle_root: root,
        snapshot_id,
        objects: count,
        bytes: bytes_total,
        uri: location::join(out_uri, &bundle_id),
        created,
    }))
}

/// Signs a bundle predicate and writes the bundle folder `<out_uri>/<bundle_id>/`: the byte copies first, then the
/// inventory member ([`INVENTORY_MEMBER`], streamed in canonical order), the envelope last (a folder without its
/// envelope is incomplete and never listed). The envelope's predicate names the member by size, line count, SHA-256
/// and BLAKE3, so it stays a few kilobytes whatever the inventory's size.
///
/// # Errors
/// [`Error::Storage`]; [`Error::Invalid`] when a different bundle already stands under that name (bundles are
/// never overwritten).
pub async fn write_bundle(
    storage: &Storage,
    mut predicate: BundlePredicate,
    copies: Vec<(String, Bytes)>,
    key: &SigningKey,
    out_uri: &str,
) -> Result<String> {
    let mut inventory = std::mem::take(&mut predicate.inventory);
    if !inventory.is_sorted_by(|a, b| (a.layer, &a.path) <= (b.layer, &b.path)) {
        inventory.sort_unstable_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    }
    let copies = copies.into_iter().map(|(d, b)| (d, Copy::Held(b))).collect();
    write_bundle_streamed(
        storage,
        predicate,
        || inventory.iter().cloned().map(Ok),
        None,
        copies,
        key,
        out_uri,
    )
    .await
    .map(|(dir, _)| dir)
}

/// The BLAKE3 (hex) of `bytes`, computed on the rayon pool, off the async workers (and on every core when they are
/// large): a million-entry manifest is over a hundred MB.
async fn blake3_on_rayon(bytes: Bytes) -> Result<String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let mut hasher = blake3::Hasher::new();
        // A large manifest on every core, as the data files are hashed.
        if bytes.len() >= 4 << 20 {
            hasher.update_rayon(&bytes);
        } else {
            hasher.update(&bytes);
        }
        let _ = tx.send(hasher.finalize().to_hex().to_string());
    });
    rx.await
        .map_err(|_| Error::Internal("a BLAKE3 task of the seal ended without a result".into()))
}

/// The bytes of one copy a bundle keeps: held, or read again from where they were sealed from.
enum Copy {
    /// In memory.
    Held(Bytes),
    /// Read again from this URI when written; bytes whose BLAKE3 is not the sealed digest are refused.
    ReadAgain(String),
}

/// [`write_bundle`] of a predicate whose inventory (not in it) is what `entries` gives, in canonical order, each
/// made as the member is written: sealing keeps a million entries compactly and gives each back whole only then.
/// `claimed` is the member's description when the caller digested it already (its pass over the entries gave
/// the root too); otherwise `entries` is called twice (the member's digests first, then its bytes). Returns the
/// folder and whether this call wrote its envelope (`false`: the same seal stood there already).
async fn write_bundle_streamed<I: Iterator<Item = Result<InventoryEntry>>>(
    storage: &Storage,
    predicate: BundlePredicate,
    entries: impl Fn() -> I,
    claimed: Option<InventoryMember>,
    copies: Vec<(String, Copy)>,
    key: &SigningKey,
    out_uri: &str,
) -> Result<(String, bool)> {
    let dir = location::join(out_uri, &predicate.bundle_id);
    let env_uri = location::join(&dir, ENVELOPE_FILE);
    // Sealed before (a quarantine that failed after sealing and is retried): nothing is written over it. Read
    // within `max_metadata_bytes`, as every reader of an envelope reads it: a file of any size can stand there.
    let max = storage.options().max_metadata_bytes;
    if let Some(existing) = storage.get_opt_bounded(&env_uri, max, "a bundle envelope").await? {
        return existing_bundle(existing.bytes, &predicate, key, &env_uri).map(|()| (dir, false));
    }
    write_bundle_folder(storage, predicate, entries, claimed, copies, key, out_uri).await
}

/// The name of the create-only claim on a bundle's inventory member: `inventory.sha256`, one line in
/// `sha256sum`'s format naming the SHA-256 of the only bytes the member may hold. No other key of the bundle is a
/// prefix of it: SeaweedFS 4.48 answers a listing that starts after a key (`start-after`) with the key that is
/// that key's prefix (`inventory.jsonl` after `inventory.jsonl.sha256`), which fails lakedrill's check that a
/// listing reached its end.
pub(crate) const MEMBER_CLAIM: &str = "inventory.sha256";

/// [`write_bundle_streamed`] once no envelope stood in the folder: what two seals of one bundle id racing each
/// other both reach (neither saw the other's envelope). The inventory member is a separate object the envelope
/// digests, written in chunks (a multipart upload, which no store makes create-only), so it is claimed first:
/// its SHA-256 is computed in a pass that keeps nothing (the caller's, when it made one: a snapshot's seal gets
/// it with the root), and written create-only as [`MEMBER_CLAIM`]. A seal
/// that finds the claim naming other bytes is refused and writes nothing over the member, so the bundle whose
/// envelope signs the member keeps verifying (review of 2026-12-07, R1-9); one that finds the same bytes
/// claimed writes them again (an interrupted seal retried, or two seals of the same inventory).
async fn write_bundle_folder<I: Iterator<Item = Result<InventoryEntry>>>(
    storage: &Storage,
    mut predicate: BundlePredicate,
    entries: impl Fn() -> I,
    claimed: Option<InventoryMember>,
    mut copies: Vec<(String, Copy)>,
    key: &SigningKey,
    out_uri: &str,
) -> Result<(String, bool)> {
    let bundle_id = predicate.bundle_id.clone();
    let root = predicate.bundle_root.clone();
    let dir = location::join(out_uri, &bundle_id);
    let env_uri = location::join(&dir, ENVELOPE_FILE);
    let member_uri = location::join(&dir, INVENTORY_MEMBER);
    // The member's bytes, digested without being kept (unless the caller did), then claimed before any byte of
    // the bundle is written.
    let claimed = if let Some(claimed) = claimed {
        claimed
    } else {
        let mut w = MemberWriter::new();
        for e in entries() {
            w.push(&e?).map_err(|why| Error::invalid(&member_uri, why))?;
            if w.buffered() >= 4 << 20 {
                w.take();
            }
        }
        w.take();
        w.finish().1
    };
    claim_member(storage, &dir, &claimed.sha256).await?;
    let mut entries = entries();
    // The byte copies first, each dropped once written.
    copies.sort_by(|a, b| a.0.cmp(&b.0));
    copies.dedup_by(|a, b| a.0 == b.0);
    for (digest, copy) in copies {
        let bytes = match copy {
            Copy::Held(b) => b,
            Copy::ReadAgain(uri) => {
                let b = storage.get(&uri).await?.bytes;
                let now = blake3_on_rayon(b.clone()).await?;
                if now != digest {
                    return Err(Error::corrupt(
                        &uri,
                        format!("changed while it was sealed: BLAKE3 {now} now, {digest} when sealed"),
                    ));
                }
                b
            }
        };
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
    // The inventory member, written in chunks of a few MiB as its entries are consumed: only ever the bytes this
    // seal claimed (one left by an interrupted run of the same inventory is written again).
    let mut writer = MemberWriter::new();
    storage
        .put_chunks(&member_uri, || {
            for e in entries.by_ref() {
                let e = match e {
                    Ok(e) => e,
                    Err(err) => return Some(Err(err)),
                };
                if let Err(why) = writer.push(&e) {
                    return Some(Err(Error::invalid(&member_uri, why)));
                }
                if writer.buffered() >= 4 << 20 {
                    return Some(Ok(Bytes::from(writer.take())));
                }
            }
            (writer.buffered() > 0).then(|| Ok(Bytes::from(writer.take())))
        })
        .await?;
    let (canonical, member) = writer.finish();
    if member != claimed {
        return Err(Error::Internal(format!(
            "bundle {bundle_id}: the inventory member written (sha256 {}) is not the one claimed (sha256 {})",
            member.sha256, claimed.sha256
        )));
    }
    if canonical.root != root || member.objects != predicate.objects {
        return Err(Error::Internal(format!(
            "bundle {bundle_id}: the inventory written ({} objects, root {}) is not the predicate's ({} objects, root {root})",
            member.objects, canonical.root, predicate.objects
        )));
    }
    predicate.inventory_member = Some(member);
    let statement = Statement {
        subject: vec![Subject {
            name: format!("lakedrill-bundle:{bundle_id}"),
            digest: BTreeMap::from([
                ("sha256".to_owned(), canonical.sha256),
                ("blake3".to_owned(), root.clone()),
            ]),
        }],
        predicate_type: PREDICATE_TYPE.to_owned(),
        predicate: serde_json::to_value(&predicate).map_err(|e| Error::Internal(format!("bundle predicate: {e}")))?,
    };
    let envelope = evidence::sign_statement(&statement, key).to_json_bytes();
    // The envelope goes last: a bundle folder without it is incomplete and never listed as a bundle.
    match storage.put_new(&env_uri, Bytes::from(envelope)).await {
        Ok(_) => Ok((dir, true)),
        Err(Error::AlreadyExists { .. }) => {
            let max = storage.options().max_metadata_bytes;
            let existing = storage.get_bounded(&env_uri, max, "a bundle envelope").await?.bytes;
            existing_bundle(existing, &predicate, key, &env_uri).map(|()| (dir, false))
        }
        Err(e) => Err(e),
    }
}

/// Claims the inventory member of the bundle folder `dir` for the bytes of SHA-256 `sha256`, create-only: granted
/// when no claim stands or the one standing names the same bytes; refused (nothing written) when it names others.
///
/// # Errors
/// [`Error::Invalid`] naming the member and both digests when another seal claimed other bytes; storage errors.
async fn claim_member(storage: &Storage, dir: &str, sha256: &str) -> Result<()> {
    let claim_uri = location::join(dir, MEMBER_CLAIM);
    let line = format!("{sha256}  {INVENTORY_MEMBER}\n");
    match storage.put_new(&claim_uri, Bytes::from(line.clone())).await {
        Ok(_) => Ok(()),
        Err(Error::AlreadyExists { .. }) => {
            // One line is all a claim holds; read within `max_metadata_bytes` all the same (any file can stand
            // there), never whole.
            let max = storage.options().max_metadata_bytes;
            let standing = storage
                .get_bounded(&claim_uri, max, "the inventory member's claim")
                .await?
                .bytes;
            if standing.as_ref() == line.as_bytes() {
                return Ok(());
            }
            let theirs = String::from_utf8_lossy(&standing);
            let theirs = theirs.split_whitespace().next().unwrap_or_default();
            Err(Error::invalid(
                location::join(dir, INVENTORY_MEMBER),
                format!(
                    "another seal of this bundle claimed the inventory member for other bytes (sha256 {theirs} in \
                     {claim_uri}; this seal's are {sha256}): a member an envelope may sign is never replaced. If \
                     {dir} holds no {ENVELOPE_FILE} (an interrupted seal), remove the folder and seal again"
                ),
            ))
        }
        Err(e) => Err(e),
    }
}

/// An envelope already under a bundle's name stands when this key signed it for the same snapshot and the same
/// root; anything else is refused.
fn existing_bundle(existing: Bytes, predicate: &BundlePredicate, key: &SigningKey, env_uri: &str) -> Result<()> {
    let trust = crate::evidence::keys::TrustStore::from_keys(vec![crate::evidence::keys::PublicKey::new(
        "sealing-key",
        "sealing-key.pub",
        key.verifying_key(),
    )])?;
    // Only the two fields compared are parsed (no value tree of an inline inventory).
    #[derive(serde::Deserialize)]
    struct Sealed {
        snapshot_id: i64,
        bundle_root: String,
    }
    let same = evidence::verify_payload(existing, &trust)
        .ok()
        .and_then(|v| v.parse_predicate::<Sealed>().ok())
        .is_some_and(|s| s.snapshot_id == predicate.snapshot_id && s.bundle_root == predicate.bundle_root);
    if same {
        Ok(())
    } else {
        Err(Error::invalid(
            env_uri,
            "exists and is not this key's seal of the same snapshot and root; bundles are never overwritten",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::keys::{PublicKey, TrustStore};

    fn entry(layer: Layer, path: &str, record_count: Option<u64>) -> InventoryEntry {
        InventoryEntry {
            path: path.into(),
            uri: format!("file:///wh/t/{path}"),
            layer,
            size: 1,
            blake3: "ab".into(),
            e_tag: None,
            version: None,
            record_count,
            copy: None,
        }
    }

    /// A predicate of snapshot 1 over `inventory`, its root computed.
    fn predicate(inventory: Vec<InventoryEntry>) -> BundlePredicate {
        BundlePredicate {
            bundle_id: "1-race".into(),
            table_uuid: "u".into(),
            table_location: "file:///wh/t".into(),
            snapshot_id: 1,
            snapshot_timestamp_ms: 0,
            sequence_number: 1,
            format_version: 2,
            sealed_at: String::new(),
            source_metadata_location: String::new(),
            source_metadata_blake3: String::new(),
            bundle_root: crate::evidence::inventory::inventory_root(&inventory),
            objects: inventory.len(),
            bytes: inventory.len() as u64,
            inventory,
            inventory_member: None,
            backup: None,
            orphans: None,
        }
    }

    fn trust(key: &SigningKey) -> TrustStore {
        TrustStore::from_keys(vec![PublicKey::new("k", "k.pub", key.verifying_key())]).unwrap()
    }

    /// Review of 2026-12-07 (R1-9): two seals of one snapshot racing each other (neither saw the other's envelope)
    /// both wrote the inventory member, a separate object the envelope digests: the second replaced the member
    /// the first envelope already signed (here with a record count more per entry: the same root, other bytes),
    /// and the first bundle stopped verifying. Now the member is claimed create-only for its bytes: the second
    /// seal is refused, naming the member, and the first bundle still verifies.
    #[tokio::test]
    async fn a_racing_seal_never_replaces_the_inventory_member_an_envelope_signs() {
        let tmp = tempfile::tempdir().unwrap();
        let out = location::canonical_uri(tmp.path().to_str().unwrap()).unwrap();
        let storage = Storage::new(crate::config::StorageOptions::default());
        let first = vec![
            entry(Layer::Metadata, "metadata/v1.metadata.json", None),
            entry(Layer::Data, "data/a.parquet", None),
        ];
        let second: Vec<InventoryEntry> = first
            .iter()
            .cloned()
            .map(|mut e| {
                e.record_count = Some(7);
                e
            })
            .collect();
        assert_eq!(
            crate::evidence::inventory::inventory_root(&first),
            crate::evidence::inventory::inventory_root(&second),
            "the same bundle id and root, other member bytes"
        );
        let (key_a, key_b) = (SigningKey::generate(), SigningKey::generate());
        let dir = write_bundle(&storage, predicate(first), Vec::new(), &key_a, &out)
            .await
            .unwrap();
        super::super::format::verified_bundle_predicate(&storage, &dir, &trust(&key_a))
            .await
            .unwrap();
        // The second seal, as one whose check for an envelope ran before the first wrote it.
        let err = write_bundle_folder(
            &storage,
            predicate(second.clone()),
            || second.iter().cloned().map(Ok),
            None,
            Vec::new(),
            &key_b,
            &out,
        )
        .await
        .unwrap_err();
        // The first bundle still verifies: its member was not replaced.
        let pred = super::super::format::verified_bundle_predicate(&storage, &dir, &trust(&key_a))
            .await
            .unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains(INVENTORY_MEMBER) && msg.contains("never replaced"),
            "{msg}"
        );
        assert_eq!(pred.inventory.len(), 2);
        assert!(
            pred.inventory.iter().all(|e| e.record_count.is_none()),
            "the first seal's member"
        );
        // A seal of the same bytes (an interrupted seal retried) is not refused by the claim.
        let again = vec![
            entry(Layer::Metadata, "metadata/v1.metadata.json", None),
            entry(Layer::Data, "data/a.parquet", None),
        ];
        // Its member digested by the caller, as a snapshot's seal does in the pass that gives the root.
        let mut w = MemberWriter::new();
        for e in &again {
            w.push(e).unwrap();
        }
        w.take();
        let (_, member) = w.finish();
        let (_, created) = write_bundle_folder(
            &storage,
            predicate(again.clone()),
            || again.iter().cloned().map(Ok),
            Some(member),
            Vec::new(),
            &key_a,
            &out,
        )
        .await
        .unwrap();
        assert!(!created, "the same seal stood there already");
        super::super::format::verified_bundle_predicate(&storage, &dir, &trust(&key_a))
            .await
            .unwrap();
    }
}
