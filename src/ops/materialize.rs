//! Materializing a bundle as a table at a new location: `restore --into` and `recover`.
//!
//! From the bundle alone (never the live table), [`rebuild`] copies every data and delete object
//! to the new location, checking each copy's BLAKE3 against the inventory, and rewrites every path
//! the way Iceberg's `rewrite_table_path` procedure does:
//! * data and equality-delete files are copied byte for byte;
//! * position delete files name data files by path inside their rows, so their `file_path` column
//!   is rewritten (Parquet read and written with the `parquet` crate, field ids kept); their size
//!   changes and the stale `file_path` bounds are dropped from their manifest entries;
//! * manifests are written again with the `iceberg` crate's writer, entry by entry with the same
//!   status (ADDED, EXISTING, DELETED), snapshot ids, sequence numbers, partitions and metrics;
//!   the manifest list keeps each manifest's adding snapshot and sequence numbers;
//! * the metadata JSON keeps everything but paths and the history lakedrill cannot bring back: it
//!   holds the one snapshot of the bundle, as `main`.
//!
//! `restore --into` gives the copy a new table UUID (it is another table); `recover` keeps it (it
//! is the same table, brought back). Targets are local folders or S3 prefixes: manifests are written with the
//! `iceberg` crate's writers on lakedrill's own storage layer ([`crate::io::iceberg_io`]), every other object with
//! write-once puts, and the recovered table is scanned the same way.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, LargeStringArray, RecordBatch, StringArray};
use bytes::Bytes;
use futures::StreamExt;
use iceberg::io::FileIOBuilder;
use iceberg::spec::{
    FormatVersion, ManifestContentType, ManifestListWriter, ManifestStatus, ManifestWriterBuilder,
    deserialize_data_file_from_json, serialize_data_file_to_json,
};
use iceberg::{Catalog, NamespaceIdent};

use crate::bundle::{self, BundlePredicate, Layer};
use crate::config::CatalogConfig;
use crate::error::{Error, Result};
use crate::io::store::Storage;
use crate::model::location::{self, TableLocation};
use crate::table;

/// Iceberg's reserved field id of `file_path` in position delete files.
pub const POSITION_DELETE_FILE_PATH_ID: i32 = 2_147_483_546;
/// Iceberg's reserved field id of `pos` in position delete files.
pub const POSITION_DELETE_POS_ID: i32 = 2_147_483_545;

fn ice(context: &str) -> impl FnOnce(iceberg::Error) -> Error + '_ {
    move |e| Error::iceberg(context, e)
}

/// Whether the materialized table is the same table or a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// A new table UUID (`restore --into`).
    NewTable,
    /// The original table UUID (`recover`).
    SameTable,
}

/// What [`rebuild`] wrote.
#[derive(Debug, Clone)]
pub struct Rebuilt {
    /// The new metadata file.
    pub metadata_location: String,
    /// The snapshot.
    pub snapshot_id: i64,
    /// Data and delete objects written.
    pub objects_copied: usize,
    /// Their bytes as written.
    pub bytes_copied: u64,
    /// Position delete files whose `file_path` column was rewritten.
    pub position_deletes_rewritten: usize,
    /// Old path (as written) → new URI, for every data and delete object.
    pub new_paths: HashMap<String, String>,
}

/// Rebases `written` (under `old`) onto `into`.
///
/// # Errors
/// [`Error::PathOutsideTable`] when the path is not under the old table location.
pub fn rebase(old: &TableLocation, into: &str, written: &str) -> Result<String> {
    Ok(location::join(into, &old.relative(written)?))
}

/// Checks that a recovery target is a location lakedrill can write a table to: a local folder (`file://`, plain
/// paths) or an object storage prefix (`s3://`, `gs://`, `az://`).
///
/// # Errors
/// [`Error::Invalid`] naming the option for other schemes.
pub fn target(option: &str, into: &str) -> Result<()> {
    if ["file://", "s3://", "gs://", "az://"]
        .iter()
        .any(|p| into.starts_with(p))
    {
        Ok(())
    } else {
        Err(Error::invalid(
            option,
            format!(
                "{into}: recovery targets are local folders (file://, plain paths) or object storage prefixes (s3://, gs://, az://)"
            ),
        ))
    }
}

/// Refuses a recovery target (`option`, canonical `into`) inside the location of the table `pred` was sealed from:
/// the live table's listing would take the recovered files for its own orphans, and a purge of them would delete
/// the recovered table. The location is where the bundle read the table (its inventory's root; a cold backup's
/// inventory is in the backup store), and the root lakedrill infers from the metadata file it sealed, as it does
/// for `--metadata` ([`TableLocation::infer_root`]), and the location as written wherever the metadata file lay
/// ([`TableLocation::written_root`]: a cold backup's metadata file is in the backup store). When none of them can
/// be computed the target is refused (the table's place is unknown). The location itself is not refused here: a restore goes only
/// into an empty location, and an empty one holds no live table (a recovery may bring a lost table back where it
/// was).
///
/// # Errors
/// [`Error::Invalid`] naming `option`, the target and the table location.
pub fn outside_table(option: &str, into: &str, pred: &BundlePredicate) -> Result<()> {
    let mut roots: Vec<String> = Vec::new();
    if pred.backup.is_none()
        && let Ok(b) = bundle::UriBinding::new(pred)
    {
        roots.push(b.root().to_owned());
    }
    if let Ok(inferred) = TableLocation::infer_root(&pred.table_location, &pred.source_metadata_location) {
        roots.push(inferred);
    }
    // The location as written, wherever the metadata file lay: a cold backup's metadata file is in the backup
    // store, and a table registered from a copied metadata file has it elsewhere; `infer_root` refuses both, and
    // the written location is still where the live table's writers put its files.
    if let Ok(written) = TableLocation::written_root(&pred.table_location, &pred.source_metadata_location)
        && !roots.contains(&written)
    {
        roots.push(written);
    }
    // No root at all: where the table lies is unknown, so no target can be shown to be outside it.
    if roots.is_empty() {
        return Err(Error::invalid(
            option,
            format!(
                "{into}: cannot tell where table {} of bundle {} lies (its location {:?} and metadata file {} give no \
                 root), so the target cannot be shown to lie outside it; refused",
                pred.table_uuid, pred.bundle_id, pred.table_location, pred.source_metadata_location
            ),
        ));
    }
    // On the local filesystem both sides are compared also with their symlinks resolved: a target under a link into
    // the table (or a table root reached through one) is inside it, whatever its spelling.
    let resolved: Vec<String> = roots.iter().filter_map(|r| resolved_local(r)).collect();
    roots.extend(resolved);
    let intos: Vec<String> = std::iter::once(into.to_owned()).chain(resolved_local(into)).collect();
    match roots.iter().find(|r| intos.iter().any(|i| location::is_under(i, r))) {
        Some(root) => Err(Error::invalid(
            option,
            format!(
                "{into} lies inside the location {root} of table {} (the bundle's table): its listing would take the \
                 recovered files for orphans; choose a location outside it",
                pred.table_uuid
            ),
        )),
        None => Ok(()),
    }
}

/// A `file://` URI with the symlinks of its longest existing ancestor resolved (the rest, not yet made, appended as
/// it is); `None` for another scheme or a path that cannot be resolved at all.
fn resolved_local(uri: &str) -> Option<String> {
    let path = uri.strip_prefix("file://")?;
    let mut existing = std::path::PathBuf::from(path);
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut p = real;
            for c in rest.iter().rev() {
                p.push(c);
            }
            return Some(format!("file://{}", p.display()));
        }
        rest.push(existing.file_name()?.to_owned());
        if !existing.pop() {
            return None;
        }
    }
}

/// The `iceberg` crate's file IO on a storage with `storage`'s options (local files and S3 alike). It writes only
/// where nothing is (`PutMode::Create`): the manifests and lists it writes go into a location `restore --into`
/// found empty, and an object another process put there since is refused naming it, never replaced.
#[must_use]
pub fn file_io(storage: &Storage) -> iceberg::io::FileIO {
    let s = Arc::new(Storage::new(storage.options().clone()));
    FileIOBuilder::new(Arc::new(crate::io::iceberg_io::ObjectStoreFactory::write_once(s))).build()
}

/// Rewrites the `file_path` column of a position delete file through `map`.
///
/// # Errors
/// [`Error::Corrupt`] naming `path` when the file is not a readable position delete file.
pub fn rewrite_position_deletes(path: &str, bytes: Bytes, map: &dyn Fn(&str) -> Result<String>) -> Result<Bytes> {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    let bad = |e: &dyn std::fmt::Display| Error::corrupt(path, format!("position delete file: {e}"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| bad(&e))?;
    let schema = Arc::clone(builder.schema());
    let idx = file_path_column(&schema).ok_or_else(|| bad(&"no file_path column"))?;
    let reader = builder.build().map_err(|e| bad(&e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut w = ArrowWriter::try_new(Vec::new(), Arc::clone(&schema), Some(props)).map_err(|e| bad(&e))?;
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e))?;
        let col = batch.column(idx);
        let mapped: ArrayRef = if let Some(a) = col.as_any().downcast_ref::<StringArray>() {
            Arc::new(
                a.iter()
                    .map(|v| v.map(map).transpose())
                    .collect::<Result<StringArray>>()?,
            )
        } else if let Some(a) = col.as_any().downcast_ref::<LargeStringArray>() {
            Arc::new(
                a.iter()
                    .map(|v| v.map(map).transpose())
                    .collect::<Result<LargeStringArray>>()?,
            )
        } else {
            return Err(bad(&format!("file_path has type {}", col.data_type())));
        };
        let mut cols = batch.columns().to_vec();
        cols[idx] = mapped;
        let rb = RecordBatch::try_new(Arc::clone(&schema), cols).map_err(|e| bad(&e))?;
        w.write(&rb).map_err(|e| bad(&e))?;
    }
    Ok(Bytes::from(w.into_inner().map_err(|e| bad(&e))?))
}

/// The index of a position delete file's `file_path` column (by field id, else by name).
fn file_path_column(schema: &arrow_schema::Schema) -> Option<usize> {
    let id = POSITION_DELETE_FILE_PATH_ID.to_string();
    schema
        .fields()
        .iter()
        .position(|f| f.metadata().get("PARQUET:field_id") == Some(&id))
        .or_else(|| schema.fields().iter().position(|f| f.name() == "file_path"))
}

/// Reads `(file_path, pos)` rows of a position delete file.
///
/// # Errors
/// [`Error::Corrupt`] naming `path`.
pub fn position_delete_rows(path: &str, bytes: Bytes) -> Result<Vec<(Option<String>, Option<i64>)>> {
    use arrow_array::Int64Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let bad = |e: &dyn std::fmt::Display| Error::corrupt(path, format!("position delete file: {e}"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| bad(&e))?;
    let schema = Arc::clone(builder.schema());
    let fp = file_path_column(&schema).ok_or_else(|| bad(&"no file_path column"))?;
    let pos_id = POSITION_DELETE_POS_ID.to_string();
    let pos = schema
        .fields()
        .iter()
        .position(|f| f.metadata().get("PARQUET:field_id") == Some(&pos_id))
        .or_else(|| schema.fields().iter().position(|f| f.name() == "pos"))
        .ok_or_else(|| bad(&"no pos column"))?;
    let mut rows = Vec::new();
    for batch in builder.build().map_err(|e| bad(&e))? {
        let batch = batch.map_err(|e| bad(&e))?;
        let paths: Vec<Option<String>> = if let Some(a) = batch.column(fp).as_any().downcast_ref::<StringArray>() {
            a.iter().map(|v| v.map(str::to_owned)).collect()
        } else if let Some(a) = batch.column(fp).as_any().downcast_ref::<LargeStringArray>() {
            a.iter().map(|v| v.map(str::to_owned)).collect()
        } else {
            return Err(bad(&"file_path is not a string column"));
        };
        let p = batch
            .column(pos)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| bad(&"pos is not a long column"))?;
        rows.extend(paths.into_iter().zip(p.iter()));
    }
    Ok(rows)
}

/// A manifest entry's data file as Iceberg JSON, with its path (and, for rewritten position
/// deletes, its size and `file_path` bounds) changed.
fn rebased_entry_json(
    json: &str,
    new_path: &str,
    rewritten_size: Option<u64>,
    rebase_ref: &dyn Fn(&str) -> Result<String>,
) -> Result<String> {
    let mut v: serde_json::Value = serde_json::from_str(json).map_err(|x| Error::Internal(x.to_string()))?;
    v["file_path"] = serde_json::Value::String(new_path.to_owned());
    if let Some(size) = rewritten_size {
        v["file_size_in_bytes"] = serde_json::json!(size);
        for bounds in ["lower_bounds", "upper_bounds"] {
            if let Some(a) = v.get_mut(bounds).and_then(serde_json::Value::as_array_mut) {
                a.retain(|e| e["key"].as_i64() != Some(i64::from(POSITION_DELETE_FILE_PATH_ID)));
            }
        }
    }
    if let Some(r) = v.get("referenced_data_file").and_then(serde_json::Value::as_str) {
        let r = rebase_ref(r)?;
        v["referenced_data_file"] = serde_json::Value::String(r);
    }
    Ok(v.to_string())
}

/// Copies and rewrites a verified bundle's snapshot into the empty location `into` (local or S3).
///
/// The caller has verified the bundle; every object is still checked against its BLAKE3 as it is
/// copied.
///
/// # Errors
/// [`Error::Corrupt`] naming an object that changed or a layer that cannot be rewritten;
/// [`Error::Invalid`] for a non-empty or non-local target or an unsupported format version;
/// storage errors.
#[allow(clippy::too_many_lines)]
pub async fn rebuild(
    storage: &Storage,
    pred: &BundlePredicate,
    copies: &BTreeMap<String, Bytes>,
    into: &str,
    identity: Identity,
) -> Result<Rebuilt> {
    if pred.orphans.is_some() {
        return Err(Error::invalid(
            &pred.bundle_id,
            "is an orphan bundle: it holds files no snapshot references, not a snapshot to materialize as a table \
             (`restore --put-back` puts them back where they were)",
        ));
    }
    target("--into", into)?;
    if !storage.list(into).await?.is_empty() {
        return Err(Error::invalid(
            "--into",
            format!("{into} is not empty; lakedrill restores only into an empty location"),
        ));
    }
    let old = TableLocation::new(&pred.table_location, "memory:///unused".into(), &pred.bundle_id)?;
    let md_entry = pred
        .inventory
        .iter()
        .find(|e| e.layer == Layer::Metadata)
        .ok_or_else(|| Error::corrupt(&pred.bundle_id, "the inventory has no metadata"))?;
    let md_bytes = copies
        .get(&md_entry.path)
        .ok_or_else(|| Error::corrupt(&md_entry.path, "the metadata copy is missing from the bundle"))?;
    let (md, _) = table::parse_metadata(&md_entry.path, md_bytes, storage.options().max_metadata_bytes)?;
    // Such a table plans, seals and verifies on a reachability view; writing its metadata back would need the
    // model the iceberg crate lacks, so it is refused rather than written with the wrong types.
    let beyond = table::types_beyond_the_model(&md_entry.path, md_bytes, storage.options().max_metadata_bytes);
    if !beyond.is_empty() {
        return Err(Error::invalid(
            &pred.bundle_id,
            format!(
                "its schema has column types the iceberg crate cannot write ({}): lakedrill verifies such tables but \
                 cannot materialize them yet",
                beyond.join(", ")
            ),
        ));
    }

    // What cannot be written back is refused before anything is written: a location property outside the old
    // location, and an encrypted manifest.
    let properties = location_properties(md.properties(), &old, into)?;
    let snapshot = md
        .snapshot_by_id(pred.snapshot_id)
        .ok_or_else(|| {
            Error::corrupt(
                &pred.bundle_id,
                format!("the bundled metadata lacks snapshot {}", pred.snapshot_id),
            )
        })?
        .clone();
    let list_bytes = copies
        .get(snapshot.manifest_list())
        .ok_or_else(|| Error::corrupt(snapshot.manifest_list(), "the manifest list copy is missing"))?;
    let list = table::parse_manifest_list(snapshot.manifest_list(), list_bytes, md.format_version())?;
    if let Some(mf) = list
        .entries()
        .iter()
        .find(|m| m.key_metadata.as_ref().is_some_and(|k| !k.is_empty()))
    {
        // Key metadata says the manifest is encrypted. lakedrill holds no keys and writes manifests unencrypted:
        // carried over, the key metadata would describe a file it does not describe; dropped, the recovered table
        // would silently differ from the original (the check compares it). So it is not materialized.
        return Err(Error::invalid(
            &mf.manifest_path,
            format!(
                "its manifest-list entry carries key_metadata ({} bytes: an encrypted manifest), which lakedrill \
                 cannot write back (it writes manifests unencrypted and holds no keys): bundle {} is not \
                 materialized; nothing was written",
                mf.key_metadata.as_ref().map_or(0, Vec::len),
                pred.bundle_id
            ),
        ));
    }
    // The bundle verified before this call; a test lands a change of one of its objects here.
    storage.failpoint_delay(crate::io::store::DelayPoint::RebuildCopy).await;

    // 1. Data and delete objects, copied and checked (position deletes rewritten), in parallel.
    let objects: Vec<&bundle::InventoryEntry> = pred.inventory.iter().filter(|e| !e.layer.is_metadata()).collect();
    let concurrency = storage.options().io_concurrency.get();
    let old_ref = &old;
    // Only objects whose uri is derived from their path are read (the verify before this checked it too).
    let binding = bundle::UriBinding::new(pred).map_err(|reason| Error::corrupt(&pred.bundle_id, reason))?;
    let binding = &binding;
    // The copy is most of a recovery's RTO: progress on stderr (`-q` silences it).
    let progress = crate::report::output::Progress::new("recover: copy", objects.len(), storage.options().progress);
    let progress = &progress;
    let written: Vec<Result<(String, String, u64, bool)>> = futures::stream::iter(objects)
        .map(|e| async move {
            let uri = binding.check(e).map_err(|f| Error::corrupt(&e.path, f.to_string()))?;
            // Never more than the inventory's size is read.
            let src = match storage.get_within(&uri, e.size).await {
                Ok(crate::io::store::Within::Read(s)) => s,
                Ok(crate::io::store::Within::Over { size }) => {
                    return Err(Error::corrupt(
                        &e.path,
                        format!(
                            "changed while restoring: {size} bytes or more at {uri}, bundle says {}",
                            e.size
                        ),
                    ));
                }
                Err(Error::NotFound { .. }) => {
                    return Err(Error::corrupt(&e.path, format!("{uri} is missing")));
                }
                Err(x) => return Err(x),
            };
            let (bytes, digest) = tokio::task::spawn_blocking(move || {
                let d = blake3::hash(&src.bytes).to_hex().to_string();
                (src.bytes, d)
            })
            .await
            .map_err(|x| Error::Internal(format!("hashing task: {x}")))?;
            if digest != e.blake3 {
                // Named where it was read (a cold backup's `objects/<blake3>`), not only where the table had it.
                return Err(Error::corrupt(
                    &e.path,
                    format!(
                        "changed while restoring: BLAKE3 {digest} read at {uri}, bundle says {}",
                        e.blake3
                    ),
                ));
            }
            let dst = rebase(old_ref, into, &e.path)?;
            // Position deletes name data files by path: a Parquet delete file in its rows, a deletion vector
            // (Puffin, format v3) in its footer's `referenced-data-file` properties.
            let rewritten = e.layer == Layer::PositionDeletes;
            let bytes = if rewritten {
                let (path, old, into) = (e.path.clone(), old_ref.clone(), into.to_owned());
                tokio::task::spawn_blocking(move || {
                    let map = |p: &str| rebase(&old, &into, p);
                    if table::puffin::is_puffin(&bytes) {
                        table::puffin::rebase_referenced_files(&path, &bytes, &map).map(|(b, _)| Bytes::from(b))
                    } else {
                        rewrite_position_deletes(&path, bytes, &map)
                    }
                })
                .await
                .map_err(|x| Error::Internal(format!("rewrite task: {x}")))??
            } else {
                bytes
            };
            let size = bytes.len() as u64;
            storage.put_new(&dst, bytes).await?;
            progress.tick(size);
            Ok((e.path.clone(), dst, size, rewritten))
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut new_paths = HashMap::new();
    let mut rewritten_sizes: HashMap<String, u64> = HashMap::new();
    let mut bytes_copied = 0;
    for w in written {
        let (path, dst, size, rewritten) = w?;
        bytes_copied += size;
        if rewritten {
            rewritten_sizes.insert(path.clone(), size);
        }
        new_paths.insert(path, dst);
    }

    // 2. Manifests, entry by entry, then the manifest list.
    let io = file_io(storage);
    let id = snapshot.snapshot_id();
    let rebase_any = |p: &str| rebase(&old, into, p);
    // A DELETED entry names no file to copy (seal, backup and the deep verify skip it): its paths are rebased when
    // they lie under the old location, and kept as written when they do not (a file of a location the table had
    // before, removed by a compaction since).
    let rebase_deleted = |p: &str| match rebase(&old, into, p) {
        Err(Error::PathOutsideTable { .. }) => Ok(p.to_owned()),
        other => other,
    };
    let mut manifests = Vec::new();
    let rewrite = crate::report::output::Progress::new(
        "recover: rewrite manifests",
        list.entries().len(),
        storage.options().progress,
    );
    for mf in list.entries() {
        rewrite.tick(mf.manifest_length.try_into().unwrap_or_default());
        let bytes = copies
            .get(&mf.manifest_path)
            .ok_or_else(|| Error::corrupt(&mf.manifest_path, "manifest copy missing from the bundle"))?;
        let manifest = table::parse_manifest(&mf.manifest_path, bytes)?;
        let meta = manifest.metadata();
        let ptype = meta
            .partition_spec()
            .partition_type(meta.schema())
            .map_err(ice("partition type"))?;
        let out = io
            .new_output(rebase(&old, into, &mf.manifest_path)?)
            .map_err(ice("create manifest"))?;
        let builder = ManifestWriterBuilder::new(
            out,
            Some(mf.added_snapshot_id),
            meta.schema().clone(),
            meta.partition_spec().clone(),
        );
        let mut writer = match (md.format_version(), meta.content()) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
            (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
            (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
            (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        };
        let fv = md.format_version();
        for e in manifest.entries() {
            let old_path = e.data_file().file_path().to_owned();
            let json = serialize_data_file_to_json(e.data_file().clone(), &ptype, fv).map_err(ice("encode entry"))?;
            let new_path = match new_paths.get(&old_path) {
                Some(p) => p.clone(),
                None if e.is_alive() => {
                    return Err(Error::corrupt(&old_path, "a live entry the inventory does not hold"));
                }
                None => rebase_deleted(&old_path)?,
            };
            let rebase_ref: &dyn Fn(&str) -> Result<String> = if e.is_alive() { &rebase_any } else { &rebase_deleted };
            let json = rebased_entry_json(&json, &new_path, rewritten_sizes.get(&old_path).copied(), rebase_ref)?;
            let df = deserialize_data_file_from_json(&json, meta.partition_spec().spec_id(), &ptype, meta.schema())
                .map_err(ice("decode entry"))?;
            // parse_avro applies no inheritance: an absent number is the manifest's.
            let seq = e.sequence_number().unwrap_or(mf.sequence_number);
            let file_seq = e.file_sequence_number.unwrap_or(mf.sequence_number);
            let snap = e.snapshot_id().unwrap_or(mf.added_snapshot_id);
            match e.status() {
                ManifestStatus::Added => writer.add_file(df, seq),
                ManifestStatus::Existing => writer.add_existing_file(df, snap, seq, Some(file_seq)),
                ManifestStatus::Deleted => writer.add_delete_file(df, seq, Some(file_seq)),
            }
            .map_err(ice("write manifest"))?;
        }
        let mut written = writer.write_manifest_file().await.map_err(ice("write manifest"))?;
        written.sequence_number = mf.sequence_number;
        written.min_sequence_number = mf.min_sequence_number;
        // Row lineage (v3): the manifest keeps its first row id, so every row keeps its id (entries without
        // their own inherit it plus the rows before them, in the same order as the original).
        written.first_row_id = mf.first_row_id;
        // The partition summaries describe the entries' partition values, which are written unchanged: the
        // original's are kept as they were (the writer's own could differ in form, e.g. an absent `contains_nan`),
        // and the check compares them.
        written.partitions.clone_from(&mf.partitions);
        manifests.push(written);
    }
    let list_path = rebase(&old, into, snapshot.manifest_list())?;
    let out = io
        .new_output(&list_path)
        .map_err(ice("create manifest list"))?
        .writer()
        .await
        .map_err(ice("create manifest list"))?;
    let mut lw = match md.format_version() {
        FormatVersion::V1 => ManifestListWriter::v1(out, id, snapshot.parent_snapshot_id()),
        FormatVersion::V2 => ManifestListWriter::v2(out, id, snapshot.parent_snapshot_id(), snapshot.sequence_number()),
        FormatVersion::V3 => ManifestListWriter::v3(
            out,
            id,
            snapshot.parent_snapshot_id(),
            snapshot.sequence_number(),
            snapshot.first_row_id(),
        ),
    };
    lw.add_manifests(manifests.into_iter())
        .map_err(ice("write manifest list"))?;
    lw.close().await.map_err(ice("write manifest list"))?;

    // 3. Metadata: the one snapshot, as main; paths rebased.
    let doc = serde_json::to_value(&md).map_err(|e| Error::Internal(format!("encode metadata: {e}")))?;
    let doc = rebased_metadata(doc, id, &list_path, into, &properties, identity)?;
    let new_md: iceberg::spec::TableMetadata = serde_json::from_value(doc)
        .map_err(|e| Error::Internal(format!("restored metadata does not validate: {e}")))?;
    let md_location = format!("{into}/metadata/00000-{}.metadata.json", uuid::Uuid::new_v4());
    storage
        .put_new(
            &md_location,
            Bytes::from(serde_json::to_vec(&new_md).map_err(|e| Error::Internal(e.to_string()))?),
        )
        .await?;
    Ok(Rebuilt {
        metadata_location: md_location,
        snapshot_id: id,
        objects_copied: new_paths.len(),
        bytes_copied,
        position_deletes_rewritten: rewritten_sizes.len(),
        new_paths,
    })
}

/// The metadata JSON of a materialized table: the original's with only the given snapshot (as
/// `main`), its manifest list and location rebased, and (for a copy) a new UUID.
fn rebased_metadata(
    mut doc: serde_json::Value,
    id: i64,
    list_path: &str,
    into: &str,
    location_properties: &[(String, String)],
    identity: Identity,
) -> Result<serde_json::Value> {
    let mut snap = doc["snapshots"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["snapshot-id"].as_i64() == Some(id)))
        .cloned()
        .ok_or_else(|| Error::Internal("snapshot vanished from the metadata".into()))?;
    snap["manifest-list"] = serde_json::Value::String(list_path.to_owned());
    let ts = snap["timestamp-ms"].clone();
    if identity == Identity::NewTable {
        if let Some(o) = snap.as_object_mut() {
            o.remove("parent-snapshot-id");
        }
        doc["table-uuid"] = serde_json::Value::String(uuid::Uuid::new_v4().to_string());
    }
    doc["location"] = serde_json::Value::String(into.to_owned());
    doc["snapshots"] = serde_json::json!([snap]);
    doc["current-snapshot-id"] = serde_json::json!(id);
    doc["refs"] = serde_json::json!({"main": {"snapshot-id": id, "type": "branch"}});
    doc["snapshot-log"] = serde_json::json!([{"snapshot-id": id, "timestamp-ms": ts}]);
    doc["metadata-log"] = serde_json::json!([]);
    if let Some(o) = doc.as_object_mut() {
        o.remove("statistics");
        o.remove("partition-statistics");
    }
    if let Some(props) = doc.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
        // Table properties that hold locations are rebased with the table ([`location_properties`]).
        for (key, rebased) in location_properties {
            props.insert(key.clone(), serde_json::Value::String(rebased.clone()));
        }
    }
    Ok(doc)
}

/// The table's location properties ([`table::LOCATION_PROPERTIES`]: where engines write data and metadata) rebased
/// from `old` onto `into`, as (key, rebased value).
///
/// # Errors
/// [`Error::Invalid`] naming the property and its value when it lies outside `old`: it cannot be rebased, and kept
/// as it is it would send the materialized table's writes into the folders of the table the bundle was sealed from
/// (whose listing takes them for orphans). Iceberg's `rewrite_table_path` refuses such a property too.
pub fn location_properties(
    properties: &HashMap<String, String>,
    old: &TableLocation,
    into: &str,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for key in table::LOCATION_PROPERTIES {
        let Some(value) = properties.get(key) else { continue };
        match rebase(old, into, value) {
            Ok(r) => out.push((key.to_owned(), r)),
            Err(Error::PathOutsideTable { .. }) => {
                return Err(Error::invalid(
                    format!("table property {key}"),
                    format!(
                        "{value} lies outside the table location {} the bundle was sealed from, so it cannot be \
                         rebased onto {into}; kept, it would send the new table's writes into the original table's \
                         folders (Iceberg's rewrite_table_path refuses it too): nothing was written",
                        old.written()
                    ),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Registers a metadata file as `NS.TABLE` in a SQL catalog of the configuration.
///
/// # Errors
/// Catalog errors (an existing table of that name included).
pub async fn register(
    storage: &Storage,
    cfg: &CatalogConfig,
    catalog: &str,
    ident: &crate::io::catalog::TableIdent,
    md_location: &str,
    into: &str,
) -> Result<()> {
    if cfg.kind == "rest" {
        // Through the REST catalog's own registration route, then loaded back and compared.
        let uri = location::canonical_uri(md_location)?;
        let md = crate::table::Table::from_metadata_uri(storage, ident.to_string(), md_location, &uri, None).await?;
        let cat = crate::io::rest::RestCatalog::open(catalog, cfg, storage.options().max_metadata_bytes).await?;
        return cat.register(storage, ident, md_location, md.metadata()).await;
    }
    // A recovery may be the first table of a new catalog: a SQLite file is created when missing (a PostgreSQL
    // database must exist; iceberg-catalog-sql creates its tables in it).
    let cat = open_sql_catalog(storage, cfg, catalog, into).await?;
    let ns = NamespaceIdent::from_strs(&ident.namespace).map_err(ice("namespace"))?;
    if !cat.namespace_exists(&ns).await.map_err(ice("namespace"))? {
        cat.create_namespace(&ns, HashMap::new())
            .await
            .map_err(ice("create namespace"))?;
    }
    let tid = iceberg::TableIdent::new(ns, ident.name.clone());
    cat.register_table(&tid, md_location.to_owned())
        .await
        .map_err(ice("register the restored table"))?;
    Ok(())
}

/// The SQL catalog a recovered table registers in, its warehouse the catalog's own or `into`; a SQLite file is
/// created when missing (a recovery may be the first table of a new catalog).
async fn open_sql_catalog(
    storage: &Storage,
    cfg: &CatalogConfig,
    catalog: &str,
    into: &str,
) -> Result<iceberg_catalog_sql::SqlCatalog> {
    crate::io::catalog::open_iceberg(
        catalog,
        cfg,
        cfg.warehouse.clone().unwrap_or_else(|| into.to_owned()),
        Arc::new(crate::io::iceberg_io::ObjectStoreFactory::new(Arc::new(Storage::new(
            storage.options().clone(),
        )))),
        true,
    )
    .await
}

/// Refuses a registration as `catalog.ident` when the catalog already has that table, before anything is copied
/// (a recovery of a large table would otherwise copy and verify it all, then fail at the last step).
///
/// # Errors
/// [`Error::Invalid`] naming the catalog and the table when it exists; catalog errors.
pub async fn ensure_unregistered(
    storage: &Storage,
    cfg: &CatalogConfig,
    catalog: &str,
    ident: &crate::io::catalog::TableIdent,
    into: &str,
) -> Result<()> {
    let exists = if cfg.kind == "rest" {
        crate::io::rest::RestCatalog::open(catalog, cfg, storage.options().max_metadata_bytes)
            .await?
            .exists(ident)
            .await?
    } else {
        let cat = open_sql_catalog(storage, cfg, catalog, into).await?;
        let ns = NamespaceIdent::from_strs(&ident.namespace).map_err(ice("namespace"))?;
        cat.namespace_exists(&ns).await.map_err(ice("namespace"))?
            && cat
                .table_exists(&iceberg::TableIdent::new(ns, ident.name.clone()))
                .await
                .map_err(ice("look up the table"))?
    };
    if exists {
        return Err(Error::invalid(
            format!("{catalog}.{ident}"),
            format!(
                "catalog {catalog} already has a table {ident}: nothing was copied (choose another --table, or drop \
                 that table first)"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A bundle predicate of snapshot 7 of table `u` at `location`, its metadata file read from `metadata`.
    fn predicate(
        id: &str,
        location: &str,
        metadata: &str,
        backup: Option<crate::evidence::inventory::BackupInfo>,
    ) -> BundlePredicate {
        BundlePredicate {
            bundle_id: id.into(),
            table_uuid: "u".into(),
            table_location: location.into(),
            snapshot_id: 7,
            snapshot_timestamp_ms: 0,
            sequence_number: 1,
            format_version: 2,
            sealed_at: String::new(),
            source_metadata_location: metadata.into(),
            source_metadata_blake3: String::new(),
            bundle_root: String::new(),
            objects: 0,
            bytes: 0,
            inventory: Vec::new(),
            inventory_member: None,
            backup,
            orphans: None,
        }
    }

    /// Review of 2026-12-07 (R1-4): a recovery target under a symlink that leads into the bundle's table was
    /// compared by its spelling only and accepted; its files would land in the live table's listing as orphans.
    /// Refused now; a target under a link that leads elsewhere is not.
    #[test]
    fn a_recovery_target_reached_through_a_symlink_into_the_table_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("wh/t");
        std::fs::create_dir_all(table.join("metadata")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(table.join("metadata"), dir.path().join("into-table")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join("outside")).unwrap();
        let root = format!("file://{}", table.display());
        let pred = predicate("7-a", &root, &format!("{root}/metadata/v1.metadata.json"), None);
        let target = |name: &str| format!("file://{}/recovered", dir.path().join(name).display());
        let e = outside_table("--into", &target("into-table"), &pred).unwrap_err();
        assert!(e.to_string().contains("lies inside the location"), "{e}");
        outside_table("--into", &target("outside"), &pred).unwrap();
        assert!(outside_table("--into", &format!("{root}/metadata/x"), &pred).is_err());
    }

    /// Review of 2026-12-07 (Q2): a cold-backup bundle's metadata file lies in the backup store, not under the table
    /// location, so no root was computed and a target inside the live table was accepted. The written location is
    /// a root now, and a predicate that gives none refuses every target naming the bundle.
    #[test]
    fn a_cold_backup_bundle_refuses_a_target_inside_the_live_table_and_an_unknown_location_refuses_all() {
        let mut pred = predicate(
            "7-b",
            "s3://lake/wh/t",
            "s3://backup/objects/abc",
            Some(crate::evidence::inventory::BackupInfo {
                checkpoint_id: "cp".into(),
                declared_snapshot_id: 7,
                declared_at: String::new(),
                backup_root: "s3://backup".into(),
            }),
        );
        let e = outside_table("--into", "s3://lake/wh/t/recovered", &pred).unwrap_err();
        assert!(e.to_string().contains("lies inside the location s3://lake/wh/t"), "{e}");
        outside_table("--into", "s3://lake/recovered", &pred).unwrap();
        // A relative location with a metadata file outside any `metadata/` folder gives no root.
        pred.table_location = "t".into();
        let e = outside_table("--into", "s3://lake/recovered", &pred).unwrap_err();
        assert!(
            e.to_string().contains("cannot tell where table u of bundle 7-b lies"),
            "{e}"
        );
    }

    /// Location properties under the old location are rebased; one outside it cannot be, and is refused naming the
    /// property and its value (before, it was kept as it was: the recovered table wrote into the original's
    /// folders).
    #[test]
    fn location_properties_are_rebased_and_one_outside_the_location_is_refused() {
        let old = TableLocation::new("s3://b/t", "s3://b/t".into(), "s3://b/t/metadata/v1.metadata.json").unwrap();
        let props = HashMap::from([
            ("write.data.path".to_owned(), "s3://b/t/data/new".to_owned()),
            ("write.metadata.path".to_owned(), "s3://b/t/meta".to_owned()),
            ("owner".to_owned(), "s3://elsewhere/not-a-location".to_owned()),
        ]);
        let mut rebased = location_properties(&props, &old, "file:///rec/t").unwrap();
        rebased.sort();
        assert_eq!(
            rebased,
            [
                ("write.data.path".to_owned(), "file:///rec/t/data/new".to_owned()),
                ("write.metadata.path".to_owned(), "file:///rec/t/meta".to_owned()),
            ]
        );
        for (key, value) in [
            ("write.object-storage.path", "s3://other-bucket/objects"),
            ("write.data.path", "s3://b/t-sibling/data"),
        ] {
            let mut p = props.clone();
            p.insert(key.to_owned(), value.to_owned());
            let e = location_properties(&p, &old, "file:///rec/t").unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::Invalid { .. }), "{text}");
            assert!(
                text.contains(key) && text.contains(value) && text.contains("s3://b/t"),
                "{text}"
            );
        }
    }
}
