//! The Iceberg metadata tables: `snapshots`, `refs`, `history`, `files`, `manifests`.
//!
//! Each function returns rows with the field names of the command-line contract (DESIGN §3),
//! answering what PyIceberg's `table.inspect` and Spark's metadata tables answer on the same
//! table. `files` and `manifests` read one snapshot's layers; the others are pure functions of
//! the metadata.

use std::collections::BTreeMap;

use iceberg::spec::{ManifestContentType, ManifestStatus, SnapshotRetention};
use serde::Serialize;

use crate::error::Result;
use crate::io::store::Storage;
use crate::table::Table;
use crate::table::resolve::{self, Selector};
use crate::table::tree::{self, FileEntry};

/// A row of `inspect snapshots`.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotRow {
    /// Snapshot id.
    pub snapshot_id: i64,
    /// Parent snapshot id.
    pub parent_id: Option<i64>,
    /// Sequence number.
    pub sequence_number: i64,
    /// Commit time.
    pub timestamp_ms: i64,
    /// Operation (`append`, `overwrite`, `delete`, `replace`).
    pub operation: String,
    /// Manifest list path as written.
    pub manifest_list: String,
    /// Summary properties other than `operation`.
    pub summary: BTreeMap<String, String>,
}

/// A row of `inspect refs`.
#[derive(Debug, Clone, Serialize)]
pub struct RefRow {
    /// Ref name.
    pub name: String,
    /// `branch` or `tag`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Snapshot the ref points at.
    pub snapshot_id: i64,
    /// Max ref age.
    pub max_ref_age_ms: Option<i64>,
    /// Max snapshot age (branches).
    pub max_snapshot_age_ms: Option<i64>,
    /// Min snapshots to keep (branches).
    pub min_snapshots_to_keep: Option<i32>,
}

/// A row of `inspect history`.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    /// When the snapshot became current.
    pub made_current_at_ms: i64,
    /// Snapshot id.
    pub snapshot_id: i64,
    /// Its parent, when the snapshot is still in the metadata.
    pub parent_id: Option<i64>,
    /// Whether it is an ancestor of (or is) the current snapshot.
    pub is_current_ancestor: bool,
}

/// A row of `inspect manifests`.
#[derive(Debug, Clone, Serialize)]
pub struct ManifestRow {
    /// Manifest path as written.
    pub path: String,
    /// Length in bytes declared by the manifest list.
    pub length: i64,
    /// `data` or `deletes`.
    pub content: &'static str,
    /// Partition spec id.
    pub partition_spec_id: i32,
    /// Sequence number the manifest was added with.
    pub sequence_number: i64,
    /// Snapshot that added it.
    pub added_snapshot_id: i64,
    /// Entries with status ADDED.
    pub added_files_count: Option<u32>,
    /// Entries with status EXISTING.
    pub existing_files_count: Option<u32>,
    /// Entries with status DELETED.
    pub deleted_files_count: Option<u32>,
}

/// `inspect snapshots`.
#[must_use]
pub fn snapshots(table: &Table) -> Vec<SnapshotRow> {
    table
        .snapshots_sorted()
        .into_iter()
        .map(|s| SnapshotRow {
            snapshot_id: s.snapshot_id(),
            parent_id: s.parent_snapshot_id(),
            sequence_number: s.sequence_number(),
            timestamp_ms: s.timestamp_ms(),
            operation: s.summary().operation.as_str().to_owned(),
            manifest_list: s.manifest_list().to_owned(),
            summary: s
                .summary()
                .additional_properties
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
        .collect()
}

/// `inspect refs`, sorted by name.
#[must_use]
pub fn refs(table: &Table) -> Vec<RefRow> {
    table
        .refs()
        .iter()
        .map(|(name, r)| match &r.retention {
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                max_ref_age_ms,
            } => RefRow {
                name: name.clone(),
                kind: "branch",
                snapshot_id: r.snapshot_id,
                max_ref_age_ms: *max_ref_age_ms,
                max_snapshot_age_ms: *max_snapshot_age_ms,
                min_snapshots_to_keep: *min_snapshots_to_keep,
            },
            SnapshotRetention::Tag { max_ref_age_ms } => RefRow {
                name: name.clone(),
                kind: "tag",
                snapshot_id: r.snapshot_id,
                max_ref_age_ms: *max_ref_age_ms,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            },
        })
        .collect()
}

/// `inspect history`, in snapshot-log order.
#[must_use]
pub fn history(table: &Table) -> Vec<HistoryRow> {
    let ancestors = table.current_ancestors();
    table
        .metadata()
        .history()
        .iter()
        .map(|e| HistoryRow {
            made_current_at_ms: e.timestamp_ms,
            snapshot_id: e.snapshot_id,
            parent_id: table
                .metadata()
                .snapshot_by_id(e.snapshot_id)
                .and_then(|s| s.parent_snapshot_id()),
            is_current_ancestor: ancestors.contains(&e.snapshot_id),
        })
        .collect()
}

/// `inspect files`: the live data and delete files of the selected snapshot, sorted by path.
/// A table without snapshots has no files.
///
/// # Errors
/// Selection errors, and any layer that cannot be read.
pub async fn files(table: &Table, storage: &Storage, selector: &Selector) -> Result<Vec<FileEntry>> {
    if *selector == Selector::Current && table.metadata().current_snapshot_id().is_none() {
        return Ok(Vec::new());
    }
    let id = resolve::resolve(table, selector)?;
    let t = tree::read_tree(table, storage, id, storage.options().io_concurrency.get()).await?;
    Ok(t.live_files().into_iter().cloned().collect())
}

/// `inspect manifests`: the manifest list entries of the selected snapshot, sorted by path.
///
/// # Errors
/// Selection errors, and a manifest list that cannot be read.
pub async fn manifests(table: &Table, storage: &Storage, selector: &Selector) -> Result<Vec<ManifestRow>> {
    if *selector == Selector::Current && table.metadata().current_snapshot_id().is_none() {
        return Ok(Vec::new());
    }
    let id = resolve::resolve(table, selector)?;
    let snapshot = table.snapshot(id)?;
    let (_, _, list) = table.read_manifest_list(storage, snapshot).await?;
    let mut rows: Vec<ManifestRow> = list
        .entries()
        .iter()
        .map(|m| ManifestRow {
            path: m.manifest_path.clone(),
            length: m.manifest_length,
            content: match m.content {
                ManifestContentType::Data => "data",
                ManifestContentType::Deletes => "deletes",
            },
            partition_spec_id: m.partition_spec_id,
            sequence_number: m.sequence_number,
            added_snapshot_id: m.added_snapshot_id,
            added_files_count: m.added_files_count,
            existing_files_count: m.existing_files_count,
            deleted_files_count: m.deleted_files_count,
        })
        .collect();
    // Some readers (iceberg-rust for v1 lists) drop the optional entry counts; the manifest itself
    // still says how many entries it holds in each status, so count them there.
    for (row, mf) in rows.iter_mut().zip(list.entries()) {
        if row.added_files_count.is_none() || row.existing_files_count.is_none() || row.deleted_files_count.is_none() {
            let (_, _, manifest) = table.read_manifest(storage, mf).await?;
            let count =
                |st: ManifestStatus| u32::try_from(manifest.entries().iter().filter(|e| e.status() == st).count()).ok();
            row.added_files_count = row.added_files_count.or_else(|| count(ManifestStatus::Added));
            row.existing_files_count = row.existing_files_count.or_else(|| count(ManifestStatus::Existing));
            row.deleted_files_count = row.deleted_files_count.or_else(|| count(ManifestStatus::Deleted));
        }
    }
    rows.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(rows)
}
