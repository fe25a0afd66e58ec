//! The layers of one snapshot: manifest list → manifests → live data and delete files.
//!
//! [`read_tree`] walks one snapshot of a [`Table`] with bounded concurrency and keeps the exact
//! bytes of the manifest list and of every manifest (sealing copies them into a bundle). Each
//! manifest's entries are reduced to the few fields lakedrill needs ([`FileEntry`]), applying the
//! spec's inheritance rule for sequence numbers that `Manifest::parse_avro` leaves out.
//!
//! Data files are not opened here. An object that cannot be read is an error naming it.

use std::sync::Arc;

use futures::StreamExt;
use iceberg::spec::{DataContentType, Manifest, ManifestFile, ManifestList, ManifestStatus};
use serde::Serialize;

use crate::error::Result;
use crate::io::store::{Fetched, Storage};
use crate::table::Table;

/// What a file in a manifest holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    /// Rows of the table.
    Data,
    /// Position delete file.
    PositionDeletes,
    /// Equality delete file.
    EqualityDeletes,
}

impl From<DataContentType> for Content {
    fn from(c: DataContentType) -> Self {
        match c {
            DataContentType::Data => Content::Data,
            DataContentType::PositionDeletes => Content::PositionDeletes,
            DataContentType::EqualityDeletes => Content::EqualityDeletes,
        }
    }
}

impl Content {
    /// `data`, `position_deletes` or `equality_deletes`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Content::Data => "data",
            Content::PositionDeletes => "position_deletes",
            Content::EqualityDeletes => "equality_deletes",
        }
    }
}

/// One live entry of a manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileEntry {
    /// Data, position deletes or equality deletes.
    pub content: Content,
    /// The path as written in the manifest.
    pub file_path: String,
    /// Where lakedrill reads it (after rebasing).
    #[serde(skip)]
    pub uri: String,
    /// Size the manifest declares.
    pub file_size_in_bytes: u64,
    /// Rows the manifest declares.
    pub record_count: u64,
    /// Partition spec of the manifest.
    pub spec_id: i32,
    /// Partition values by partition field name.
    pub partition: serde_json::Value,
    /// `file_format`: `PARQUET`, `AVRO`, `ORC`, or `PUFFIN` for a deletion vector (v3).
    pub file_format: &'static str,
    /// v3 deletion vector: the data file whose rows it deletes.
    pub referenced_data_file: Option<String>,
    /// v3 deletion vector: offset of its blob in the Puffin file.
    pub content_offset: Option<i64>,
    /// v3 deletion vector: length of its blob.
    pub content_size_in_bytes: Option<i64>,
    /// v3 row lineage: the first row id of a data file.
    pub first_row_id: Option<i64>,
    /// Data sequence number, after inheritance.
    #[serde(skip)]
    pub sequence_number: Option<i64>,
}

/// One manifest and its live entries.
#[derive(Debug, Clone)]
pub struct ManifestLayer {
    /// The manifest list's entry for it.
    pub entry: ManifestFile,
    /// Where it was read.
    pub uri: String,
    /// Its exact bytes.
    pub fetched: Fetched,
    /// Its live (ADDED and EXISTING) entries.
    pub live: Arc<Vec<FileEntry>>,
    /// How many entries it has with status DELETED.
    pub deleted_entries: usize,
}

/// All metadata layers of one snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotTree {
    /// The snapshot.
    pub snapshot_id: i64,
    /// The manifest list path as written.
    pub manifest_list_written: String,
    /// Where it was read.
    pub manifest_list_uri: String,
    /// Its exact bytes.
    pub manifest_list: Fetched,
    /// Parsed manifest list.
    pub list: ManifestList,
    /// Manifests in manifest-list order.
    pub manifests: Vec<ManifestLayer>,
}

impl SnapshotTree {
    /// Every live file of the snapshot, sorted by path.
    #[must_use]
    pub fn live_files(&self) -> Vec<&FileEntry> {
        let mut v: Vec<&FileEntry> = self.manifests.iter().flat_map(|m| m.live.iter()).collect();
        v.sort_by(|a, b| a.file_path.cmp(&b.file_path).then(a.content.cmp(&b.content)));
        v
    }
}

/// Reduces a parsed manifest to its live entries (pure).
///
/// # Errors
/// [`crate::Error::PathOutsideTable`] when an entry points outside the table.
pub fn live_entries(table: &Table, entry: &ManifestFile, manifest: &Manifest) -> Result<(Vec<FileEntry>, usize)> {
    let meta = manifest.metadata();
    let spec = meta.partition_spec();
    let ptype = spec.partition_type(meta.schema()).ok();
    let mut live = Vec::new();
    let mut deleted = 0;
    for e in manifest.entries() {
        if e.status() == ManifestStatus::Deleted {
            deleted += 1;
            continue;
        }
        let df = e.data_file();
        let uri = table.location().resolve(df.file_path())?;
        let mut partition = serde_json::Map::new();
        for (i, (field, value)) in spec.fields().iter().zip(df.partition().iter()).enumerate() {
            let v = match (value, ptype.as_ref().and_then(|t| t.fields().get(i))) {
                (None, _) => serde_json::Value::Null,
                (Some(lit), Some(f)) => lit
                    .clone()
                    .try_into_json(&f.field_type)
                    .unwrap_or_else(|_| serde_json::Value::String(format!("{lit:?}"))),
                (Some(lit), None) => serde_json::Value::String(format!("{lit:?}")),
            };
            partition.insert(field.name.clone(), v);
        }
        // Spec: an ADDED entry (or one with no sequence number) inherits the manifest's.
        let seq = match (e.status(), e.sequence_number()) {
            (ManifestStatus::Added, _) | (_, None | Some(0)) => Some(entry.sequence_number),
            (_, s) => s,
        };
        live.push(FileEntry {
            content: df.content_type().into(),
            file_path: df.file_path().to_owned(),
            uri,
            file_size_in_bytes: df.file_size_in_bytes(),
            record_count: df.record_count(),
            spec_id: entry.partition_spec_id,
            partition: serde_json::Value::Object(partition),
            file_format: crate::table::scan::reference_format_name(df.file_format()),
            referenced_data_file: df.referenced_data_file(),
            content_offset: df.content_offset(),
            content_size_in_bytes: df.content_size_in_bytes(),
            first_row_id: df.first_row_id(),
            sequence_number: seq,
        });
    }
    Ok((live, deleted))
}

/// Reads every metadata layer of one snapshot, `concurrency` manifests at a time.
///
/// # Errors
/// Any [`Error`](crate::Error) naming the layer that could not be read or parsed.
pub async fn read_tree(table: &Table, storage: &Storage, snapshot_id: i64, concurrency: usize) -> Result<SnapshotTree> {
    let snapshot = Arc::clone(table.snapshot(snapshot_id)?);
    let (list_uri, list_fetched, list) = table.read_manifest_list(storage, &snapshot).await?;
    let results: Vec<Result<ManifestLayer>> = futures::stream::iter(list.entries().iter().cloned())
        .map(|mf| async move {
            let (uri, fetched, manifest) = table.read_manifest(storage, &mf).await?;
            let (live, deleted_entries) = live_entries(table, &mf, &manifest)?;
            Ok(ManifestLayer {
                entry: mf,
                uri,
                fetched,
                live: Arc::new(live),
                deleted_entries,
            })
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    let manifests = results.into_iter().collect::<Result<Vec<_>>>()?;
    // A manifest list cut at a block boundary decodes with manifests missing: the summary's totals are the check.
    let mut totals = crate::table::scan::EntryTally::default();
    for m in &manifests {
        let data = || m.live.iter().filter(|f| f.content == Content::Data);
        totals.add(&crate::table::scan::EntryTally {
            live_data_files: data().count() as u64,
            live_delete_files: (m.live.len() - data().count()) as u64,
            live_data_records: data().map(|f| f.record_count).fold(0, u64::saturating_add),
            ..crate::table::scan::EntryTally::default()
        });
    }
    crate::table::scan::check_snapshot_totals(&snapshot, snapshot.manifest_list(), &totals, table.totals_rules())
        .map_err(|why| crate::error::Error::corrupt(&list_uri, why))?;
    Ok(SnapshotTree {
        snapshot_id,
        manifest_list_written: snapshot.manifest_list().to_owned(),
        manifest_list_uri: list_uri,
        manifest_list: list_fetched,
        list,
        manifests,
    })
}

impl From<Content> for crate::model::object::Layer {
    fn from(c: Content) -> Self {
        match c {
            Content::Data => crate::model::object::Layer::Data,
            Content::PositionDeletes => crate::model::object::Layer::PositionDeletes,
            Content::EqualityDeletes => crate::model::object::Layer::EqualityDeletes,
        }
    }
}
