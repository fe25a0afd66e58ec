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
/// that does not parse, checks nothing. The cost of the rule: a total that a writer's bug left too high is carried
/// into every later snapshot, and such a table cannot be planned (exit 2 naming the total) — lakedrill cannot tell it
/// from a list that lost manifests, and refusing is the side that deletes nothing.
///
/// # Errors
/// A sentence naming the snapshot, its manifest list and the total that is not reached.
pub fn check_snapshot_totals(
    snapshot: &iceberg::spec::Snapshot,
    manifest_list: &str,
    found: &EntryTally,
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
        if counted < total {
            return Err(format!(
                "snapshot {}: its manifest list {manifest_list} names manifests holding {counted} for its summary's \
                 {key} of {total}: manifests are missing from the list as read (truncated?), so what the snapshot \
                 reaches is unknown",
                snapshot.snapshot_id()
            ));
        }
    }
    Ok(())
}
