//! Cold backups: `lakedrill backup --to URI`.
//!
//! A backup copies every object one snapshot reaches (metadata JSON, manifest list, manifests, data
//! and delete files) into a separate store or prefix, content-addressed as `<to>/objects/<blake3>`,
//! and seals a standard bundle under `<to>/bundles/<bundle id>/` whose inventory points at those
//! copies. The bundle also names the declared disaster-recovery checkpoint it was made for
//! ([`BackupInfo`]), recorded in the registry like `checkpoint add`.
//!
//! The declared recovery point (`declared_at`, signed into the bundle from the registry's record) is, in
//! order: the `at` of the existing checkpoint `--checkpoint ID` names; `--at` (which may not precede the
//! snapshot's commit); else the table's state when the backup is declared — the commit time of the table's
//! current snapshot ([`default_recovery_point_ms`]). So a backup of the current snapshot declares RPO 0,
//! and a backup of an older snapshot declares the history it misses (head commit − snapshot commit) instead
//! of a 0 by construction. The wall-clock time of declaration is not used: it would charge a table that was
//! not written to for the idle time, which is no lost data.
//!
//! Every object is read once from the table and hashed; the copy is read back and must hash the
//! same. An object already in the backup under its digest is hashed again and kept when it
//! matches, so a second backup of an unchanged table copies nothing and an interrupted backup
//! resumes where it stopped. The envelope is written last: a backup that did not finish has no
//! bundle and is never drilled. A snapshot whose data or delete files are missing or disagree with
//! their manifests is refused (exit 1) before any checkpoint is recorded; one whose manifest list or
//! a manifest is missing or not of its recorded length cannot be read at all (exit 2, naming it),
//! also before any checkpoint is recorded.
//!
//! Memory: an object is held in memory while it is copied, at most `io_concurrency` at a time, and never more of it
//! than its manifest's size (a larger file is refused, `SIZE_MISMATCH`, on the store's first answer).

use std::collections::BTreeSet;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Serialize;

use crate::bundle::{self, BackupInfo, InventoryEntry, Layer};
use crate::error::{Error, Result};
use crate::io::store::{ObjectInfo, Storage};
use crate::model::findings::{Finding, FindingKind};
use crate::model::location;
use crate::ops::context::Context;
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;
use crate::table::resolve::{self, Selector};
use crate::table::tree;

/// Which snapshot a backup is for.
#[derive(Debug, Clone)]
pub enum BackupPoint {
    /// A snapshot selected like everywhere else; a new checkpoint is declared for it.
    Select(Selector),
    /// An existing checkpoint of the registry.
    Checkpoint(String),
}

impl BackupPoint {
    /// The point `backup`'s flags name: `--checkpoint`, else `--snapshot-id`, else `--ref`, else the current
    /// snapshot (clap keeps them exclusive).
    #[must_use]
    pub fn from_flags(checkpoint: Option<&str>, snapshot_id: Option<i64>, ref_name: Option<&str>) -> Self {
        match (checkpoint, snapshot_id, ref_name) {
            (Some(c), _, _) => BackupPoint::Checkpoint(c.to_owned()),
            (None, Some(id), _) => BackupPoint::Select(Selector::SnapshotId(id)),
            (None, None, Some(r)) => BackupPoint::Select(Selector::Ref(r.to_owned())),
            (None, None, None) => BackupPoint::Select(Selector::Current),
        }
    }
}

/// What `backup` reports (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct BackupReport {
    /// `BACKED_UP`.
    pub status: &'static str,
    /// The backup bundle folder.
    pub bundle_uri: String,
    /// Its root digest.
    pub bundle_root: String,
    /// The snapshot backed up.
    pub snapshot_id: i64,
    /// The checkpoint it was made for.
    pub checkpoint_id: String,
    /// The declared recovery point (RFC 3339).
    pub declared_at: String,
    /// The RPO a recovery of this backup will show: `declared_at` minus the snapshot's commit time, in
    /// seconds (0 when the backed-up snapshot is the declared point).
    pub rpo_seconds: f64,
    /// Objects the snapshot reaches.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Objects copied by this run (the rest were already in the backup, verified by digest).
    pub objects_copied: usize,
    /// Bytes copied by this run.
    pub bytes_copied: u64,
}

/// One object copied (or found) in the backup store.
struct Copied {
    blake3: String,
    size: u64,
    info: ObjectInfo,
    copied: bool,
}

/// A data file read for the backup: copied, another size than its manifest's (`Some(Err(size))`: the size the
/// store gave, or the bytes read when it grew past the manifest's), absent (`None`), or (`Err`) where a path that
/// leaves the table resolves to, not read.
type DataRead = std::result::Result<Option<std::result::Result<Copied, u64>>, String>;

fn object_uri(root: &str, digest: &str) -> String {
    location::join(root, &format!("objects/{digest}"))
}

/// Puts `bytes` (BLAKE3 `digest`) into the backup unless a verified copy is there, then reads the
/// copy back and checks its digest.
async fn store_object(storage: &Storage, root: &str, digest: &str, bytes: Bytes) -> Result<Copied> {
    let dst = object_uri(root, digest);
    let size = bytes.len() as u64;
    if let Some(existing) = storage.head(&dst).await?
        && existing.size == size
    {
        let h = storage.hash(&dst).await?;
        if h.blake3 == digest {
            return Ok(Copied {
                blake3: digest.to_owned(),
                size,
                info: h.info,
                copied: false,
            });
        }
    }
    // Absent, or present with other bytes (a damaged copy): write it.
    storage.put(&dst, bytes).await?;
    let h = storage.hash(&dst).await?;
    if h.blake3 != digest || h.bytes_read != size {
        return Err(Error::corrupt(
            &dst,
            format!(
                "the copy reads back as BLAKE3 {} ({} bytes), the source was {digest} ({size} bytes)",
                h.blake3, h.bytes_read
            ),
        ));
    }
    Ok(Copied {
        blake3: digest.to_owned(),
        size,
        info: h.info,
        copied: true,
    })
}

async fn hash_bytes(bytes: Bytes) -> Result<(Bytes, String)> {
    tokio::task::spawn_blocking(move || {
        let mut h = blake3::Hasher::new();
        h.update_rayon(&bytes);
        let d = h.finalize().to_hex().to_string();
        (bytes, d)
    })
    .await
    .map_err(|e| Error::Internal(format!("hashing task: {e}")))
}

/// The recovery point a new checkpoint declares when neither `--checkpoint` nor `--at` names one: the table's
/// state at declaration, i.e. the commit time of its current snapshot (`head_ms`), and never before the
/// backed-up snapshot's own commit (a branch head newer than `main`, or a table without a current snapshot).
#[must_use]
pub fn default_recovery_point_ms(snapshot_ms: i64, head_ms: Option<i64>) -> i64 {
    head_ms.map_or(snapshot_ms, |h| h.max(snapshot_ms))
}

/// Of what `backup --to to` writes into — `to` itself, its `objects/` (the content-addressed copies) and its
/// `bundles/` — the first at or under `table_root`, if one is.
fn writes_inside(to: &str, table_root: &str) -> Option<String> {
    [
        to.to_owned(),
        location::join(to, "objects"),
        location::join(to, "bundles"),
    ]
    .into_iter()
    .find(|w| w.trim_end_matches('/') == table_root.trim_end_matches('/') || location::is_under(w, table_root))
}

/// `lakedrill backup`.
///
/// # Errors
/// Load, registry and storage errors. A snapshot that cannot be backed up completely is a
/// finding (exit 1), not an error.
#[allow(clippy::too_many_lines)]
pub async fn backup(
    ctx: &Context,
    source: &TableSource,
    point: &BackupPoint,
    at: Option<&str>,
    key: &std::path::Path,
    to: &str,
) -> Result<Outcome> {
    let key = crate::evidence::keys::load_signing_key(key)?;
    let to = location::canonical_uri(to)?;
    let table = ctx.table(source).await?;
    let uuid = table.metadata().uuid().to_string();
    // A backup inside the table would be listed as its files: planned as orphans and purged. What counts is
    // where it writes: `--to` a parent of the table still writes into it when the table's folder is the
    // backup's `objects/` or `bundles/`.
    let table_root = table.location().root_uri();
    if let Some(written) = writes_inside(&to, table_root) {
        let through = if written == to {
            String::new()
        } else {
            format!(" (it writes into {written})")
        };
        return Err(Error::invalid(
            "--to",
            format!(
                "{to}{through} lies inside the location {table_root} of table {} ({uuid}): the table's listing would \
                 take the backup's objects for orphans and a purge would delete them; back up to a location outside it",
                table.name()
            ),
        ));
    }
    let reg = crate::ops::plan::registry(ctx).await?;
    let existing_checkpoint = match point {
        BackupPoint::Checkpoint(id) => Some(
            reg.checkpoints(&uuid)
                .await?
                .into_iter()
                .find(|c| &c.checkpoint_id == id)
                .ok_or_else(|| {
                    Error::invalid(
                        "--checkpoint",
                        format!("{id} is not a checkpoint of table {uuid} in the registry"),
                    )
                })?,
        ),
        BackupPoint::Select(_) => None,
    };
    let snapshot_id = match (point, &existing_checkpoint) {
        (_, Some(c)) => table.snapshot(c.snapshot_id)?.snapshot_id(),
        (BackupPoint::Select(sel), None) => resolve::resolve(&table, sel)?,
        (BackupPoint::Checkpoint(_), None) => return Err(Error::Internal("checkpoint vanished".into())),
    };
    let snapshot = table.snapshot(snapshot_id)?.clone();
    // A checkpoint stored before `checkpoint add` refused it may declare a recovery point before its snapshot's
    // commit: a backup for it would sign a negative RPO that every recovery then fails (CHECKPOINT_MISMATCH).
    if let Some(c) = &existing_checkpoint
        && c.at.timestamp_millis() < snapshot.timestamp_ms()
    {
        return Err(Error::invalid(
            "--checkpoint",
            format!(
                "checkpoint {} declares its recovery point at {}, before snapshot {snapshot_id}'s commit time ({}): \
                 a recovery point cannot precede the snapshot that recovers it; add a checkpoint with a valid --at",
                c.checkpoint_id,
                c.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                crate::clock::commit_time(snapshot.timestamp_ms())
            ),
        ));
    }
    // The declared recovery point (README "backup"): the registry checkpoint's `at`, else `--at`, else the
    // table's state when the backup is declared (the commit time of its current snapshot). Never the backed-up
    // snapshot's own time by default: backing up an older snapshot then shows its gap as RPO.
    let declared_at: DateTime<Utc> = match (&existing_checkpoint, at) {
        (Some(c), _) => c.at,
        (None, Some(t)) => crate::ops::protect::recovery_point(t, snapshot_id, snapshot.timestamp_ms())?,
        (None, None) => {
            let head_ms = table.metadata().current_snapshot().map(|s| s.timestamp_ms());
            let ms = default_recovery_point_ms(snapshot.timestamp_ms(), head_ms);
            DateTime::from_timestamp_millis(ms).ok_or_else(|| {
                Error::invalid(
                    table.metadata_uri(),
                    format!("commit time {ms} ms of the table's current snapshot is out of range"),
                )
            })?
        }
    };
    let concurrency = ctx.storage.options().io_concurrency.get();
    let t = tree::read_tree(&table, &ctx.storage, snapshot_id, concurrency).await?;
    let mut findings = Vec::new();
    // No bytes from outside the table go into the backup: on the local filesystem an object whose path,
    // symlinks resolved, leaves the table root is a refusal naming it (README "Symlinks").
    let root = table.location().root_uri().to_owned();
    let confined = ctx.storage.confine(&root).await?;
    let mut escaped = BTreeSet::new();
    let layers = [
        (table.generation().metadata_location.as_str(), table.metadata_uri()),
        (t.manifest_list_written.as_str(), t.manifest_list_uri.as_str()),
    ]
    .into_iter()
    .chain(
        t.manifests
            .iter()
            .map(|m| (m.entry.manifest_path.as_str(), m.uri.as_str())),
    );
    for (path, uri) in layers {
        if location::is_under(uri, &root)
            && let Some(target) = confined.escape(uri).await?
        {
            findings.push(bundle::symlink_finding(path, &root, &target));
            escaped.insert(path.to_owned());
        }
    }

    // 1. Metadata layers: already in memory.
    let mut metadata: Vec<(Layer, String, Bytes)> = vec![
        (
            Layer::Metadata,
            table.generation().metadata_location.clone(),
            table.metadata_bytes().clone(),
        ),
        (
            Layer::ManifestList,
            t.manifest_list_written.clone(),
            t.manifest_list.bytes.clone(),
        ),
    ];
    for m in &t.manifests {
        if i64::try_from(m.fetched.bytes.len()).ok() != Some(m.entry.manifest_length) {
            findings.push(Finding::new(
                FindingKind::SizeMismatch,
                &m.entry.manifest_path,
                Some(m.entry.manifest_length.to_string()),
                Some(m.fetched.bytes.len().to_string()),
            ));
        }
        metadata.push((Layer::Manifest, m.entry.manifest_path.clone(), m.fetched.bytes.clone()));
    }
    let mut inventory: Vec<InventoryEntry> = Vec::new();
    let mut copies: Vec<(String, Bytes)> = Vec::new();
    let mut objects_copied = 0;
    let mut bytes_copied = 0;
    let mut seen = BTreeSet::new();
    for (layer, path, bytes) in metadata {
        if !seen.insert(path.clone()) || escaped.contains(&path) {
            continue;
        }
        let (bytes, digest) = hash_bytes(bytes).await?;
        let c = store_object(&ctx.storage, &to, &digest, bytes.clone()).await?;
        if c.copied {
            objects_copied += 1;
            bytes_copied += c.size;
        }
        copies.push((digest.clone(), bytes));
        inventory.push(InventoryEntry {
            path,
            uri: c.info.uri.clone(),
            layer,
            size: c.size,
            blake3: c.blake3,
            e_tag: c.info.e_tag,
            version: c.info.version,
            record_count: None,
            copy: Some(format!("copies/{digest}")),
        });
    }

    // 2. Data and delete files: read once, hash, copy, read back; bounded fan-out.
    // A Puffin file of deletion vectors (v3) is one object; its record count is the positions all its live
    // vectors delete (recovery compares a scan with data rows minus deleted positions).
    let mut dv_positions: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for f in t.live_files().into_iter().filter(|f| f.file_format == "PUFFIN") {
        *dv_positions.entry(f.file_path.as_str()).or_default() += f.record_count;
    }
    let dv_positions: std::collections::BTreeMap<String, u64> =
        dv_positions.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    let files: Vec<tree::FileEntry> = t
        .live_files()
        .into_iter()
        .filter(|f| seen.insert(f.file_path.clone()))
        .cloned()
        .collect();
    // Counted as the result counts: the metadata layers above are done, and a file that cannot be backed up
    // (missing, another size, outside the table) is counted as failed.
    let progress = crate::report::output::Progress::new("backup", files.len(), ctx.storage.options().progress)
        .with_done(inventory.len(), inventory.iter().map(|e| e.size).sum());
    let progress = &progress;
    let storage = &ctx.storage;
    let to_ref = &to;
    let confined = &confined;
    let results: Vec<(tree::FileEntry, Result<DataRead>)> = futures::stream::iter(files)
        .map(|f| async move {
            let res = async {
                if let Some(target) = confined.escape(&f.uri).await? {
                    return Ok(Err(target));
                }
                // Never more than the manifest's size is read: a larger file is refused on the store's first answer.
                let src = match storage.get_within(&f.uri, f.file_size_in_bytes).await {
                    Ok(crate::io::store::Within::Read(s)) => s,
                    Ok(crate::io::store::Within::Over { size }) => return Ok(Ok(Some(Err(size)))),
                    Err(Error::NotFound { .. }) => return Ok(Ok(None)),
                    Err(e) => return Err(e),
                };
                if src.bytes.len() as u64 != f.file_size_in_bytes {
                    return Ok(Ok(Some(Err(src.bytes.len() as u64))));
                }
                let (bytes, digest) = hash_bytes(src.bytes).await?;
                store_object(storage, to_ref, &digest, bytes)
                    .await
                    .map(|c| Ok(Some(Ok(c))))
            }
            .await;
            let backed_up = matches!(&res, Ok(Ok(Some(Ok(_)))));
            progress.tick_checked(f.file_size_in_bytes, !backed_up);
            (f, res)
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    for (f, res) in results {
        match res? {
            Err(target) => findings.push(bundle::symlink_finding(&f.file_path, &root, &target)),
            Ok(None) => findings.push(
                Finding::new(
                    FindingKind::ObjectMissing,
                    &f.file_path,
                    Some("present".into()),
                    Some("absent".into()),
                )
                .read_at(&f.uri),
            ),
            Ok(Some(Err(size))) => findings.push(
                Finding::new(
                    FindingKind::SizeMismatch,
                    &f.file_path,
                    Some(f.file_size_in_bytes.to_string()),
                    Some(size.to_string()),
                )
                .read_at(&f.uri),
            ),
            Ok(Some(Ok(c))) => {
                if c.copied {
                    objects_copied += 1;
                    bytes_copied += c.size;
                }
                inventory.push(InventoryEntry {
                    path: f.file_path.clone(),
                    uri: c.info.uri.clone(),
                    layer: f.content.into(),
                    size: c.size,
                    blake3: c.blake3,
                    e_tag: c.info.e_tag,
                    version: c.info.version,
                    record_count: Some(dv_positions.get(&f.file_path).copied().unwrap_or(f.record_count)),
                    copy: None,
                });
            }
        }
    }
    if !findings.is_empty() {
        findings.sort_by(|a, b| a.path.cmp(&b.path));
        let mut human = format!(
            "REFUSED: snapshot {snapshot_id} cannot be backed up completely; no bundle and no checkpoint were written\n"
        );
        for f in &findings {
            human.push_str(&format!("  {f}\n"));
        }
        return Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "snapshot_id": snapshot_id, "findings": findings}),
            human,
        );
    }

    // 3. The checkpoint, then the bundle (envelope last).
    let now = ctx.now();
    let checkpoint = match existing_checkpoint {
        Some(c) => c,
        None => {
            let c = reg.checkpoint_add(&uuid, snapshot_id, declared_at, now).await?;
            crate::ops::protect::protect_covered(
                &ctx.storage,
                &reg,
                &uuid,
                &format!("checkpoint {}", c.checkpoint_id),
                |ids, _| ids.contains(&snapshot_id),
                now,
            )
            .await?;
            c
        }
    };
    inventory.sort_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    let root = bundle::inventory_root(&inventory);
    let bundle_id = format!(
        "{snapshot_id}-{}-{}",
        &root[..16],
        checkpoint.checkpoint_id.get(..8).unwrap_or(&checkpoint.checkpoint_id)
    );
    let bytes_total: u64 = inventory.iter().map(|e| e.size).sum();
    let declared = checkpoint.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let predicate = bundle::snapshot_predicate(
        &table,
        &snapshot,
        bundle_id.clone(),
        root.clone(),
        inventory,
        now,
        Some(BackupInfo {
            checkpoint_id: checkpoint.checkpoint_id.clone(),
            declared_snapshot_id: checkpoint.snapshot_id,
            declared_at: declared.clone(),
            backup_root: to.clone(),
        }),
    );
    let objects = predicate.objects;
    let bundles = location::join(&to, "bundles");
    let bundle_uri = location::join(&bundles, &bundle_id);
    // A bundle already under this name (a rerun for the same checkpoint) stands only when its envelope is this
    // key's seal of the same snapshot and root: `write_bundle` checks that and writes nothing over it.
    bundle::write_bundle(&ctx.storage, predicate, copies, &key, &bundles).await?;
    // Checked: a snapshot's `timestamp-ms` comes from the metadata, and one far in the past would wrap.
    let rpo_ms = checkpoint
        .at
        .timestamp_millis()
        .checked_sub(snapshot.timestamp_ms())
        .ok_or_else(|| {
            Error::corrupt(
                table.metadata_uri(),
                format!(
                    "snapshot {snapshot_id}'s timestamp-ms {} is too far from its checkpoint's time {} to measure the \
                     recovery point",
                    snapshot.timestamp_ms(),
                    checkpoint.at.to_rfc3339()
                ),
            )
        })?;
    #[allow(clippy::cast_precision_loss)]
    let rpo_seconds = rpo_ms as f64 / 1000.0;
    let report = BackupReport {
        status: "BACKED_UP",
        bundle_uri: bundle_uri.clone(),
        bundle_root: root,
        snapshot_id,
        checkpoint_id: checkpoint.checkpoint_id,
        declared_at: declared,
        rpo_seconds,
        objects,
        bytes: bytes_total,
        objects_copied,
        bytes_copied,
    };
    let human = format!(
        "backed up snapshot {snapshot_id} to {to}\nbundle      {}\nbundle_root {}\ncheckpoint  {} (recovery point {}, RPO {:.3}s)\nobjects     {} ({} bytes); copied now {} ({} bytes), the rest already in the backup and verified\n",
        report.bundle_uri,
        report.bundle_root,
        report.checkpoint_id,
        report.declared_at,
        report.rpo_seconds,
        report.objects,
        report.bytes,
        report.objects_copied,
        report.bytes_copied
    );
    Outcome::new(Verdict::Ok, &report, human)
}

#[cfg(test)]
mod tests {
    use super::{default_recovery_point_ms, writes_inside};

    /// A parent of the table whose `objects/` or `bundles/` is the table's folder writes into the table.
    #[test]
    fn a_target_whose_objects_or_bundles_folder_is_the_table_writes_inside_it() {
        let root = "file:///wh/objects";
        assert_eq!(writes_inside("file:///wh", root).as_deref(), Some("file:///wh/objects"));
        assert_eq!(
            writes_inside("file:///wh", "file:///wh/bundles").as_deref(),
            Some("file:///wh/bundles")
        );
        assert_eq!(
            writes_inside("file:///wh/objects/b", root).as_deref(),
            Some("file:///wh/objects/b")
        );
        assert_eq!(writes_inside(root, root).as_deref(), Some(root));
        // A parent whose writes stay beside the table (a table inside `bundles/` is beside the bundle folders the
        // backup writes there), and a sibling.
        assert_eq!(writes_inside("file:///wh", "file:///wh/db/t"), None);
        assert_eq!(writes_inside("file:///wh", "file:///wh/bundles/t"), None);
        assert_eq!(writes_inside("file:///backups", root), None);
        assert_eq!(writes_inside("file:///wh", "file:///wh/objectsx"), None);
    }

    #[test]
    fn the_default_recovery_point_is_the_heads_commit_never_the_snapshots_own_time() {
        // A backup of the head declares the head's commit: RPO 0.
        assert_eq!(default_recovery_point_ms(5_000, Some(5_000)), 5_000);
        // A backup of an older snapshot declares the head's commit: its RPO is the history it misses.
        assert_eq!(default_recovery_point_ms(2_000, Some(5_000)), 5_000);
        // A branch head newer than the current snapshot is its own recovery point (no negative RPO).
        assert_eq!(default_recovery_point_ms(7_000, Some(5_000)), 7_000);
        // A table without a current snapshot: the snapshot's own commit.
        assert_eq!(default_recovery_point_ms(2_000, None), 2_000);
    }
}
