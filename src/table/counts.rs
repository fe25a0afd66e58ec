//! What a manifest list records of each manifest (its entry counts) and what a snapshot's summary totals, and
//! the checks that a manifest or a snapshot's manifests hold as many entries as recorded: a lowered Avro block
//! count or a truncated list loses entries without changing anything else a reader sees.

use iceberg::spec::{DataContentType, ManifestStatus};
use serde::Deserialize;

use crate::error::{Error, Result};

/// A manifest as a manifest list names it: path as written, length, and the entry counts the list records for it
/// (required from format v2 on; v1 lists name them `added_data_files_count`, … before Iceberg 1.5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
pub struct ListEntry {
    /// The manifest's path as written.
    pub manifest_path: String,
    /// Its length in bytes, as the list records it.
    pub manifest_length: i64,
    /// Entries with status ADDED.
    #[serde(default, alias = "added_data_files_count")]
    pub added_files_count: Option<i64>,
    /// Entries with status EXISTING.
    #[serde(default, alias = "existing_data_files_count")]
    pub existing_files_count: Option<i64>,
    /// Entries with status DELETED.
    #[serde(default, alias = "deleted_data_files_count")]
    pub deleted_files_count: Option<i64>,
    /// Rows of the ADDED entries' files.
    #[serde(default)]
    pub added_rows_count: Option<i64>,
    /// Rows of the EXISTING entries' files.
    #[serde(default)]
    pub existing_rows_count: Option<i64>,
    /// Rows of the DELETED entries' files.
    #[serde(default)]
    pub deleted_rows_count: Option<i64>,
}

impl ListEntry {
    /// The list's entry for a manifest as the iceberg crate reads it.
    #[must_use]
    pub fn of(m: &iceberg::spec::ManifestFile) -> Self {
        Self {
            manifest_path: m.manifest_path.clone(),
            manifest_length: m.manifest_length,
            added_files_count: m.added_files_count.map(i64::from),
            existing_files_count: m.existing_files_count.map(i64::from),
            deleted_files_count: m.deleted_files_count.map(i64::from),
            added_rows_count: m.added_rows_count.and_then(|n| i64::try_from(n).ok()),
            existing_rows_count: m.existing_rows_count.and_then(|n| i64::try_from(n).ok()),
            deleted_rows_count: m.deleted_rows_count.and_then(|n| i64::try_from(n).ok()),
        }
    }

    /// Refuses a manifest whose entries, counted by status (and their rows), differ from what this list entry
    /// records for it, where it records them: entries lost from a manifest (a lowered Avro block count that some
    /// reader took at its word) or a list that names it wrongly. Iceberg writers (Java's `ManifestWriter`,
    /// PyIceberg, iceberg-rust) count them exactly.
    ///
    /// # Errors
    /// [`Error::Corrupt`] naming the manifest, both counts and the difference.
    pub fn check_counts(&self, uri: &str, found: &EntryTally) -> Result<()> {
        let pairs = [
            ("ADDED entries", self.added_files_count, found.added),
            ("EXISTING entries", self.existing_files_count, found.existing),
            ("DELETED entries", self.deleted_files_count, found.deleted),
            ("rows of ADDED entries", self.added_rows_count, found.added_rows),
            (
                "rows of EXISTING entries",
                self.existing_rows_count,
                found.existing_rows,
            ),
            ("rows of DELETED entries", self.deleted_rows_count, found.deleted_rows),
        ];
        for (what, recorded, counted) in pairs {
            if let Some(recorded) = recorded
                && u64::try_from(recorded).ok() != Some(counted)
            {
                return Err(Error::corrupt(
                    uri,
                    format!(
                        "the manifest holds {counted} {what}, but the manifest list records {recorded}: entries are \
                         missing from the manifest as read, or the list does not describe it"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// A manifest's entries counted as its manifest list counts them (by status, with their rows) and its live files
/// as a snapshot summary totals them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryTally {
    /// Entries with status ADDED.
    pub added: u64,
    /// Entries with status EXISTING.
    pub existing: u64,
    /// Entries with status DELETED.
    pub deleted: u64,
    /// Rows (`record_count`) of the ADDED entries.
    pub added_rows: u64,
    /// Rows of the EXISTING entries.
    pub existing_rows: u64,
    /// Rows of the DELETED entries.
    pub deleted_rows: u64,
    /// Live (ADDED or EXISTING) data file entries.
    pub live_data_files: u64,
    /// Live delete file entries (each deletion vector one).
    pub live_delete_files: u64,
    /// Rows of the live data files.
    pub live_data_records: u64,
}

impl EntryTally {
    /// Counts one entry: its status (0 EXISTING, 1 ADDED, 2 DELETED), whether it is a data file, its rows.
    /// `false` for a status the spec does not define.
    pub(crate) fn count(&mut self, status: i32, data: bool, rows: u64) -> bool {
        let (entries, status_rows) = match status {
            0 => (&mut self.existing, &mut self.existing_rows),
            1 => (&mut self.added, &mut self.added_rows),
            2 => (&mut self.deleted, &mut self.deleted_rows),
            _ => return false,
        };
        *entries += 1;
        *status_rows = status_rows.saturating_add(rows);
        if status != 2 {
            if data {
                self.live_data_files += 1;
                self.live_data_records = self.live_data_records.saturating_add(rows);
            } else {
                self.live_delete_files += 1;
            }
        }
        true
    }

    /// Counts one entry the iceberg crate decoded.
    pub(crate) fn count_reference(&mut self, e: &iceberg::spec::ManifestEntry) {
        let status = match e.status() {
            ManifestStatus::Existing => 0,
            ManifestStatus::Added => 1,
            ManifestStatus::Deleted => 2,
        };
        let data = e.data_file().content_type() == DataContentType::Data;
        self.count(status, data, e.data_file().record_count());
    }

    /// The tally of a manifest the iceberg crate parsed.
    #[must_use]
    pub fn of_manifest(manifest: &iceberg::spec::Manifest) -> Self {
        let mut t = Self::default();
        for e in manifest.entries() {
            t.count_reference(e);
        }
        t
    }

    /// Adds another manifest's tally (a snapshot's totals).
    pub fn add(&mut self, other: &EntryTally) {
        for (a, b) in [
            (&mut self.added, other.added),
            (&mut self.existing, other.existing),
            (&mut self.deleted, other.deleted),
            (&mut self.added_rows, other.added_rows),
            (&mut self.existing_rows, other.existing_rows),
            (&mut self.deleted_rows, other.deleted_rows),
            (&mut self.live_data_files, other.live_data_files),
            (&mut self.live_delete_files, other.live_delete_files),
            (&mut self.live_data_records, other.live_data_records),
        ] {
            *a = a.saturating_add(b);
        }
    }
}

/// A summary total's excess over what the manifests hold that the configuration accepts for one table
/// (`[[summary_excess."<table-uuid>"]]`, [`crate::config::SummaryExcessConfig`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedExcess {
    /// The setting, as messages name it (`summary_excess."<uuid>"[0]`).
    pub setting: String,
    /// The first snapshot that carries the excess: it and its descendants are covered.
    pub snapshot_id: i64,
    /// Its commit time (milliseconds since the epoch): a descendant whose line of parents leaves the metadata
    /// before reaching [`AcceptedExcess::snapshot_id`] is covered only when that snapshot left the metadata too and
    /// every parent on the way was committed at or after this time.
    pub since_ms: i64,
    /// The total (`total-data-files`, `total-delete-files`, `total-records`).
    pub total: String,
    /// The exact excess accepted.
    pub excess: u64,
    /// Why, as the operator wrote it.
    pub reason: String,
}

/// The snapshots of a table as far as an accepted excess needs them: each one's commit time and parent.
pub trait Lineage {
    /// Commit time (ms) and parent of snapshot `id`; `None` when the table's metadata does not hold it.
    fn snapshot(&self, id: i64) -> Option<(i64, Option<i64>)>;
}

impl Lineage for iceberg::spec::TableMetadata {
    fn snapshot(&self, id: i64) -> Option<(i64, Option<i64>)> {
        self.snapshot_by_id(id)
            .map(|s| (s.timestamp_ms(), s.parent_snapshot_id()))
    }
}

impl Lineage for std::collections::BTreeMap<i64, (i64, Option<i64>)> {
    fn snapshot(&self, id: i64) -> Option<(i64, Option<i64>)> {
        self.get(&id).copied()
    }
}

/// What [`check_snapshot_totals`] needs of its table: its UUID (for the hint it gives), the excesses the
/// configuration accepts for it, and its snapshots' lineage (an excess is accepted only down the line of the
/// snapshot that first carried it).
#[derive(Clone, Copy, Default)]
pub struct TotalsRules<'a> {
    /// The table's UUID.
    pub table_uuid: &'a str,
    /// The accepted excesses.
    pub accepted: &'a [AcceptedExcess],
    /// The table's snapshots; without it no excess is accepted.
    pub lineage: Option<&'a dyn Lineage>,
}

impl std::fmt::Debug for TotalsRules<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TotalsRules")
            .field("table_uuid", &self.table_uuid)
            .field("accepted", &self.accepted)
            .finish_non_exhaustive()
    }
}

/// Whether snapshot `id` (committed at `ts`) descends from the accepted excess's first snapshot: walking its parents,
/// that snapshot is reached before one committed before [`AcceptedExcess::since_ms`]; or the line leaves the
/// metadata first, every snapshot on it committed since, and the first snapshot has left the metadata too (it was
/// expired: its descendants keep the acceptance). A line that leaves the metadata while the first snapshot is
/// still there is another line: not covered.
fn descends(lineage: &dyn Lineage, a: &AcceptedExcess, id: i64, ts: i64) -> bool {
    let (mut id, mut ts) = (id, ts);
    for _ in 0..100_000 {
        if id == a.snapshot_id {
            return true;
        }
        if ts < a.since_ms {
            return false;
        }
        match lineage.snapshot(id).and_then(|(_, parent)| parent) {
            Some(p) => match lineage.snapshot(p) {
                Some((pts, _)) => (id, ts) = (p, pts),
                None => return lineage.snapshot(a.snapshot_id).is_none(),
            },
            None => return lineage.snapshot(a.snapshot_id).is_none(),
        }
    }
    false
}

/// Refuses a snapshot whose manifests, as its manifest list names them, hold fewer live data files, delete files
/// or data rows than its summary's totals (`total-data-files`, `total-delete-files`, `total-records`) say. The
/// length of a manifest list is recorded nowhere, and an Avro file cut at a block boundary (even right after its
/// header) decodes cleanly with manifests missing: every file only those manifests reach would look unreferenced.
/// The totals are what a writer recorded of the same state: Iceberg Java carries them from the parent's summary
/// with each commit's added and removed counts (`SnapshotProducer.updateTotal`), as PyIceberg and iceberg-rust do.
///
/// Only fewer is refused: more than the total is not a loss (it keeps files), and a writer that under-counted once
/// would otherwise stop every later plan of the table, the totals being carried from commit to commit. A summary
/// without a total (a writer that keeps none, or a parent without one: Java then writes none either), or with one
/// that does not parse, checks nothing. A total that a writer's bug left too high is carried into every later
/// snapshot; lakedrill cannot tell it from a list that lost manifests, and refuses (exit 2 naming the total and
/// the setting that would accept it). The operator who knows the writer's bug accepts that exact excess from the
/// first snapshot that carries it on (`rules.accepted`): of the entries of the total whose first snapshot the
/// snapshot descends from (see `descends`), the latest applies, and only when the excess is exactly its own — a
/// list that loses manifests later changes the excess and is refused again, and a snapshot of another line (a
/// rollback past the bug and new commits) is not covered whatever its time.
///
/// # Errors
/// A sentence naming the snapshot, its manifest list and the total that is not reached.
pub fn check_snapshot_totals(
    snapshot: &iceberg::spec::Snapshot,
    manifest_list: &str,
    found: &EntryTally,
    rules: TotalsRules<'_>,
) -> std::result::Result<(), String> {
    let summary = &snapshot.summary().additional_properties;
    for (key, counted) in [
        ("total-data-files", found.live_data_files),
        ("total-delete-files", found.live_delete_files),
        ("total-records", found.live_data_records),
    ] {
        let Some(total) = summary.get(key).and_then(|v| v.trim().parse::<u64>().ok()) else {
            continue;
        };
        if counted >= total {
            continue;
        }
        let excess = total - counted;
        let applies = rules
            .accepted
            .iter()
            .filter(|a| a.total == key && a.since_ms <= snapshot.timestamp_ms())
            .filter(|a| {
                rules
                    .lineage
                    .is_some_and(|l| descends(l, a, snapshot.snapshot_id(), snapshot.timestamp_ms()))
            })
            .max_by_key(|a| a.since_ms);
        let id = snapshot.snapshot_id();
        let lost = format!(
            "snapshot {id}: its manifest list {manifest_list} names manifests holding {counted} for its summary's \
             {key} of {total}: manifests are missing from the list as read (truncated?), so what the snapshot \
             reaches is unknown"
        );
        return Err(match applies {
            Some(a) if a.excess == excess => continue,
            Some(a) => format!(
                "{lost}; {} accepts an excess of exactly {} ({}), not {excess}",
                a.setting, a.excess, a.reason
            ),
            None => {
                let committed = chrono::DateTime::from_timestamp_millis(snapshot.timestamp_ms()).map_or_else(
                    || snapshot.timestamp_ms().to_string(),
                    |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                );
                format!(
                    "{lost}; if a writer is known to have left the total {excess} too high (it is carried from \
                     commit to commit), accept exactly that in the configuration: [[summary_excess.\"{}\"]] \
                     snapshot = <the first snapshot that carries it; this one: {id}>, since = \"<its commit time; \
                     this one's: {committed}>\", total = \"{key}\", excess = {excess}, reason = \"<the writer and \
                     its bug>\"",
                    rules.table_uuid
                )
            }
        });
    }
    Ok(())
}
