//! What the planner reads (pure data): one table generation's snapshots, refs and retention defaults, the
//! registry's protections, the policy's ages, the listing, and the operator's baseline job. Built by
//! `ops::plan::gather`; read by [`crate::govern::closure`] and [`crate::govern::baseline`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::object::{HoldScope, ListedObject, SnapshotObjects};
#[cfg(test)]
use crate::model::object::{Layer, ObjectRef};

/// One snapshot and everything it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Snapshot id.
    pub snapshot_id: i64,
    /// Parent id.
    pub parent_id: Option<i64>,
    /// Commit time.
    pub timestamp_ms: i64,
    /// Manifest list, manifests, data and delete files; `None` when the layers could not be read.
    pub objects: Option<SnapshotObjects>,
}

/// A ref and its retention settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefInfo {
    /// Name.
    pub name: String,
    /// Head snapshot.
    pub snapshot_id: i64,
    /// Branch (true) or tag.
    pub is_branch: bool,
    /// `max-ref-age-ms`.
    pub max_ref_age_ms: Option<i64>,
    /// `max-snapshot-age-ms` (branches).
    pub max_snapshot_age_ms: Option<i64>,
    /// `min-snapshots-to-keep` (branches).
    pub min_snapshots_to_keep: Option<i32>,
}

/// What the registry and the policy protect by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protections {
    /// The policy's `protectedRefs`.
    pub protected_refs: Vec<String>,
    /// Valid leases: (snapshot id, lease id).
    pub leases: Vec<(i64, String)>,
    /// DR checkpoints and policy DR points: (snapshot id, label).
    pub checkpoints: Vec<(i64, String)>,
    /// Active holds: (hold id, scope).
    pub holds: Vec<(String, HoldScope)>,
    /// Open writers' staging prefixes (relative to the table location), with writer ids.
    pub writers: Vec<(String, String)>,
    /// Deletion-right requests of the latest governance decision.
    pub deletion_rights: Vec<DeletionRight>,
    /// Files of quarantined orphan candidates not yet purged (relative to the table location): out of the
    /// listing, but their bytes are still held, so a deletion right over them is not fulfilled yet.
    pub held_orphans: Vec<String>,
    /// Listed files of snapshot candidates that are not finished and whose snapshots may be out of the table
    /// (quarantined in bundle mode, a quarantine's commit not yet recorded, a purge past its catalog commit), with
    /// the candidate's id: never orphans while the candidate may still need them (its bundles are the way back to
    /// its snapshots) or its own purge is to delete them.
    pub snapshot_candidate_files: BTreeMap<String, Arc<str>>,
    /// Files the table's snapshots reference that the bundles of its unfinished snapshot candidates quarantined in
    /// bundle mode also name in place (those snapshots left the table; their bundles are the way back), with that
    /// candidate's id: never in another snapshot candidate while the first may still need them.
    pub bundle_files: BTreeMap<String, Arc<str>>,
    /// Bundles of such candidates that could not be read (URI, candidate and why): what they need is unknown, so
    /// no snapshot candidate is proposed, and quarantine and purge refuse, while one is listed.
    pub unreadable_bundles: Vec<String>,
    /// Listed files whose path with symlinks resolved lies outside the table root (a linked folder or file that
    /// leaves the table, README "Symlinks"), with where they resolve to: never orphans.
    pub outside_root: BTreeMap<String, String>,
    /// Listed files that reach their file through a symlink staying inside the table (a linked folder or file),
    /// with the path they resolve to (relative to the table root): the listing shows that file a second time
    /// under its real path, so such a path is never an orphan and is never in a snapshot candidate (a removal
    /// through it removes the other path's file).
    pub linked: BTreeMap<String, String>,
    /// The real paths (relative to the table root) that a path the table references reaches through such a link,
    /// each with that referenced path: the file is live under its other name, so it is never an orphan and never
    /// in a snapshot candidate.
    pub link_targets: BTreeMap<String, String>,
    /// Listed zero-byte objects that are folder markers: keys ending with `/` (`t/data/`, `t/`, written by the S3
    /// console or Hadoop S3A), which object_store lists without the slash, so that no object has the listed name
    /// (a read or a delete of it finds nothing). Never orphans.
    pub folder_markers: BTreeSet<String>,
    /// Snapshots missing from the generation that an active protection names (a lease, a checkpoint or DR point,
    /// a snapshot hold) and whose files lakedrill resolved from its own records: the unfinished snapshot candidate
    /// that took the snapshot out of the table and the bundle sealed for it, verified under a trust store (its
    /// signature, its inventory root and subject; `ops::plan::resolve_missing_protected`). Snapshot id → where the
    /// paths came from (the bundle's URI and the candidate). Such a protection does not switch orphan detection off.
    pub resolved_missing: BTreeMap<i64, String>,
    /// The listed or held paths (relative to the table location) that a snapshot of `resolved_missing` reaches (its
    /// metadata file, manifest list, manifests, data and delete files, deletion-vector files), with that snapshot:
    /// never orphans while the protection lasts.
    pub missing_snapshot_files: BTreeMap<String, i64>,
    /// Why a snapshot missing from the generation that an active protection names could not be resolved, by id
    /// (no trust store, no record of the candidate that took it out, a bundle missing or not verifying): orphan
    /// detection stays off while one is listed, and the warning gives the reason.
    pub unresolved_missing: BTreeMap<i64, String>,
    /// How many orphan candidates of the table ended without a purge (`PROTECTED`, `RELEASED`: put back):
    /// bound into the next orphan candidate's id, so that files put back can be planned again under a new id.
    pub orphan_epoch: u64,
}

/// A deletion-right request: a scope that must be deleted by a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionRight {
    /// The request's id (from the decision).
    pub id: String,
    /// What must be deleted.
    pub scope: DeletionScope,
    /// The scope as the decision wrote it (`object:data/…`, `prefix:s3://…`, `snapshot:ID`): what plans and
    /// `gates` show, so that the operator finds the request they signed.
    pub written_scope: String,
    /// The deadline, epoch ms.
    pub deadline_ms: i64,
}

/// The scope of a deletion right.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionScope {
    /// One snapshot (its objects that no retained snapshot shares).
    Snapshot(i64),
    /// Every object at or under a path (relative to the table location): one object, or the files that held
    /// the rows.
    Path(String),
}

/// Where a deletion right stands in this plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionRightStatus {
    /// The request's id.
    pub id: String,
    /// The scope as the decision wrote it (`snapshot:ID`, `prefix:PATH` or `object:PATH`).
    pub scope: String,
    /// The deadline, epoch ms.
    pub deadline_ms: i64,
    /// `conflict` (a legal hold covers the scope: it stays protected until a decision releases it),
    /// `blocked` (a ref, the current snapshot, a lease or a checkpoint still retains it), `candidate` (its
    /// snapshots are in the candidate regardless of `minSnapshotAge`, or its unreferenced files are in an orphan
    /// candidate), `quarantined` (its files are held in quarantine until their purge), or `fulfilled` (nothing
    /// in the scope is left in the table, the listing or an orphan quarantine).
    pub status: String,
    /// The snapshots the scope reaches.
    pub snapshot_ids: Vec<i64>,
    /// Why it is in conflict or blocked.
    pub reasons: Vec<String>,
    /// Past its deadline and not fulfilled.
    pub overdue: bool,
}

/// Table-level retention defaults (table properties `history.expire.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDefaults {
    /// `history.expire.max-snapshot-age-ms` (Iceberg default 5 days).
    pub max_snapshot_age_ms: i64,
    /// `history.expire.min-snapshots-to-keep` (Iceberg default 1).
    pub min_snapshots_to_keep: i32,
    /// `history.expire.max-ref-age-ms` (default: never).
    pub max_ref_age_ms: Option<i64>,
}

impl Default for TableDefaults {
    fn default() -> Self {
        Self {
            max_snapshot_age_ms: 5 * 24 * 3600 * 1000,
            min_snapshots_to_keep: 1,
            max_ref_age_ms: None,
        }
    }
}

/// Everything [`crate::govern::closure::plan`] needs, all from one table generation.
#[derive(Debug, Clone)]
pub struct PlanInput {
    /// Table UUID.
    pub table_uuid: String,
    /// BLAKE3 of the metadata file (binds candidate ids to the generation).
    pub generation_blake3: String,
    /// Snapshots in the metadata.
    pub snapshots: Vec<SnapshotInfo>,
    /// Refs.
    pub refs: Vec<RefInfo>,
    /// Current snapshot.
    pub current_snapshot_id: Option<i64>,
    /// Table retention defaults.
    pub defaults: TableDefaults,
    /// Metadata files still in use: the current one and those in the metadata log (relative paths).
    pub live_metadata_files: BTreeSet<String>,
    /// Why each snapshot whose `objects` are `None` could not be read (the object and the reason), by id.
    pub unreadable: BTreeMap<i64, String>,
    /// Listing of the table location, for orphans; `None` skips orphan detection.
    pub listing: Option<Vec<ListedObject>>,
    /// Named protections.
    pub protections: Protections,
    /// The policy's `minSnapshotAge`.
    pub min_snapshot_age_ms: i64,
    /// The policy's `orphanSafetyInterval`.
    pub orphan_safety_interval_ms: i64,
    /// Now, epoch ms.
    pub now_ms: i64,
    /// The operator's plain maintenance job that the plan is compared with.
    pub baseline: Baseline,
    /// Statistics and partition-statistics files the metadata names, by snapshot (relative paths): never
    /// orphans while named; Iceberg's expiry removes those of the snapshots it expires.
    pub statistics_files: BTreeMap<i64, Vec<String>>,
}

impl PlanInput {
    /// How many distinct paths a set of the history's paths is sized for
    /// ([`crate::model::object::path_set`]): the listing's length (the table's files, most of them referenced),
    /// else a thousand (the set grows as it must).
    #[must_use]
    pub fn distinct_paths_hint(&self) -> usize {
        self.listing.as_ref().map_or(1024, Vec::len)
    }
}

/// The operator's maintenance job, as its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// `expireOlderThan`: snapshots older than this (epoch ms) may expire.
    pub older_than_ms: i64,
    /// `retainLast`: `None` uses the table's `history.expire.min-snapshots-to-keep`.
    pub retain_last: Option<i32>,
    /// `DeleteOrphanFiles.olderThan`: files modified before this (epoch ms) may be orphans.
    pub orphans_older_than_ms: i64,
}

impl Baseline {
    /// The default baseline at `now_ms`: `older_than = now - minSnapshotAge`, the table's `retainLast`,
    /// `orphans_older_than = now - orphanSafetyInterval`.
    #[must_use]
    pub fn relative(now_ms: i64, min_snapshot_age_ms: i64, orphan_safety_interval_ms: i64) -> Self {
        Self {
            older_than_ms: now_ms - min_snapshot_age_ms,
            retain_last: None,
            orphans_older_than_ms: now_ms - orphan_safety_interval_ms,
        }
    }
}

/// A snapshot of data files of `size` bytes each, for the planner's unit tests.
#[cfg(test)]
pub(crate) fn test_snapshot(id: i64, parent: Option<i64>, ts: i64, files: &[&str], size: u64) -> SnapshotInfo {
    SnapshotInfo {
        snapshot_id: id,
        parent_id: parent,
        timestamp_ms: ts,
        objects: Some(
            files
                .iter()
                .map(|f| ObjectRef {
                    path: (*f).into(),
                    layer: Layer::Data,
                    size,
                })
                .collect(),
        ),
    }
}
