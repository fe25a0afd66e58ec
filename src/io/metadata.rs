//! Table metadata as written: the iceberg crate's model of a metadata file plus what that model loses (the refs
//! of a format-v1 table, every statistics file of a snapshot), and the columns it cannot model. Here, below
//! both the catalogs (which commit it) and the table reader, so that neither imports the other.

use std::collections::BTreeMap;
use std::io::Read;

use iceberg::spec::{FormatVersion, SnapshotReference, TableMetadata};

use crate::error::{Error, Result};

/// Table metadata bytes with gzip undone (magic `1f 8b`), never past `max` bytes, for readers outside this
/// module (the containment check reading another table's UUID).
///
/// # Errors
/// [`Error::Corrupt`] naming `uri` when the gzip cannot be decompressed or expands past `max` bytes.
pub fn gunzipped(uri: &str, bytes: &[u8], max: u64) -> Result<Vec<u8>> {
    maybe_gunzip(uri, bytes, max)
}

/// Decompresses gzip metadata (`*.gz.metadata.json`, magic `1f 8b`) when needed, never to more than `max`
/// bytes: a few MB of gzip can expand to gigabytes, so the decoder reads through `take(max + 1)` and one byte
/// over the limit refuses the file.
fn maybe_gunzip(uri: &str, bytes: &[u8], max: u64) -> Result<Vec<u8>> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .take(max.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| Error::corrupt(uri, format!("gzip metadata cannot be decompressed: {e}")))?;
        if out.len() as u64 > max {
            return Err(Error::corrupt(
                uri,
                format!(
                    "gzip table metadata decompresses to more than {max} bytes, over the limit (`max_metadata_bytes` under [storage] in the configuration); decompression was stopped"
                ),
            ));
        }
        Ok(out)
    } else {
        Ok(bytes.to_vec())
    }
}

/// Whether a schema type name is one the `iceberg` crate's model does not have (format v3's `variant`,
/// `geometry(…)`, `geography(…)`, `unknown`).
fn beyond_the_model(t: &str) -> bool {
    matches!(t, "variant" | "unknown") || t.starts_with("geometry") || t.starts_with("geography")
}

/// Replaces, in a schema's JSON (or a type's), every type the `iceberg` crate cannot model by `binary`, and
/// returns `field name: type` for each. Reachability needs no column type, so lakedrill plans, seals, verifies and
/// purges such tables on this view while keeping the original bytes; what would write the model back (a recovery,
/// `restore --into`) refuses them ([`types_beyond_the_model`]).
pub(crate) fn substitute_types(v: &mut serde_json::Value, name: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(t) if beyond_the_model(t) => {
            out.push(format!("{name}: {t}"));
            *t = "binary".to_owned();
        }
        serde_json::Value::Object(o) => {
            let here = o
                .get("name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or(name)
                .to_owned();
            for key in ["type", "element", "key", "value"] {
                if let Some(t) = o.get_mut(key) {
                    substitute_types(t, &here, out);
                }
            }
            if let Some(serde_json::Value::Array(fields)) = o.get_mut("fields") {
                for f in fields {
                    substitute_types(f, &here, out);
                }
            }
        }
        _ => {}
    }
}

/// The columns of table metadata (JSON bytes, maybe gzip) whose types the `iceberg` crate cannot model
/// (`payload: variant`, …): empty for every table it models whole. Unparseable input gives an empty list (the
/// metadata parser reports it).
#[must_use]
pub fn types_beyond_the_model(uri: &str, bytes: &[u8], max_bytes: u64) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(json) = maybe_gunzip(uri, bytes, max_bytes) else {
        return out;
    };
    if let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&json) {
        lenient_schemas(&mut value, &mut out);
    }
    out
}

/// [`substitute_types`] over every schema of table metadata (`schemas[]` and the v1 `schema`).
fn lenient_schemas(value: &mut serde_json::Value, out: &mut Vec<String>) {
    if let Some(serde_json::Value::Array(schemas)) = value.get_mut("schemas") {
        for s in schemas {
            substitute_types(s, "", out);
        }
    }
    if let Some(s) = value.get_mut("schema") {
        substitute_types(s, "", out);
    }
    out.sort();
    out.dedup();
}

/// Why table metadata (as JSON) describes an encrypted table, or `None`: `encryption-keys` with entries,
/// or a snapshot with a `key-id` (its manifest list is encrypted). See: the table spec, "Encryption keys".
fn encryption(value: &serde_json::Value) -> Option<String> {
    let mut why = Vec::new();
    if let Some(keys) = value.get("encryption-keys").filter(|k| !k.is_null()) {
        let n = keys.as_array().map_or(1, Vec::len);
        if n > 0 {
            why.push(format!("`encryption-keys` holds {n} key(s)"));
        }
    }
    let keyed: Vec<String> = value
        .get("snapshots")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| s.get("key-id").is_some_and(|k| !k.is_null()))
        .map(|s| s.get("snapshot-id").map_or_else(|| "?".to_owned(), ToString::to_string))
        .collect();
    if !keyed.is_empty() {
        why.push(format!("snapshot(s) {} carry a `key-id`", keyed.join(", ")));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The first `snapshot-id` that two entries of the raw metadata's `snapshots` array share, if any.
fn duplicate_snapshot_id(value: &serde_json::Value) -> Option<i64> {
    let mut seen = std::collections::BTreeSet::new();
    value
        .get("snapshots")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("snapshot-id").and_then(serde_json::Value::as_i64))
        .find(|id| !seen.insert(*id))
}

/// The refusal of an encrypted table: lakedrill cannot read encrypted manifest lists and manifests,
/// so it cannot know what the table reaches, and fails closed (exit 2) rather than guess.
fn encrypted(uri: &str, value: &serde_json::Value, reason: &str) -> Error {
    let field = |k: &str| {
        value
            .get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    Error::invalid(
        uri,
        format!(
            "encryption: table {} at {} is encrypted ({reason}); lakedrill cannot read encrypted metadata \
             layers and refuses to plan, seal or restore it",
            field("table-uuid"),
            field("location"),
        ),
    )
}

/// Refuses table metadata bytes that describe an encrypted table (see [`parse_metadata`]); bytes that
/// are not metadata JSON pass (the parser names them).
///
/// # Errors
/// [`Error::Invalid`] naming `encryption`, the table and the reason.
pub fn refuse_encrypted(uri: &str, bytes: &[u8], max_bytes: u64) -> Result<()> {
    let Ok(json) = maybe_gunzip(uri, bytes, max_bytes) else {
        return Ok(());
    };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&json) else {
        return Ok(());
    };
    match encryption(&value) {
        Some(reason) => Err(encrypted(uri, &value, &reason)),
        None => Ok(()),
    }
}

/// Parses table metadata bytes (pure). Returns the metadata and its refs (including the implied
/// `main` of tables written without `refs`). Metadata over `max_bytes`, raw or decompressed, is refused
/// (see [`crate::io::store::StorageOptions::max_metadata_bytes`]).
///
/// An encrypted table (`encryption-keys`, a snapshot `key-id`) is refused: lakedrill cannot read what it
/// reaches. So is metadata in which two snapshots share an id.
///
/// # Errors
/// [`Error::Parse`] or [`Error::Corrupt`] naming `uri` (and the limit, for a file over it, or the duplicated
/// snapshot id);
/// [`Error::Invalid`] naming `encryption` for an encrypted table.
pub fn parse_metadata(
    uri: &str,
    bytes: &[u8],
    max_bytes: u64,
) -> Result<(TableMetadata, BTreeMap<String, SnapshotReference>)> {
    let full = parse_full_metadata(uri, bytes, max_bytes)?;
    Ok((full.metadata, full.refs))
}

/// [`parse_metadata`], keeping what the iceberg crate's model of the metadata loses ([`FullMetadata`]).
///
/// # Errors
/// As [`parse_metadata`].
pub fn parse_full_metadata(uri: &str, bytes: &[u8], max_bytes: u64) -> Result<FullMetadata> {
    if bytes.len() as u64 > max_bytes {
        return Err(crate::io::store::over_limit(
            uri,
            "table metadata",
            bytes.len() as u64,
            max_bytes,
        ));
    }
    let json = maybe_gunzip(uri, bytes, max_bytes)?;
    let value: serde_json::Value = serde_json::from_slice(&json).map_err(|e| Error::Parse {
        uri: uri.to_owned(),
        what: "table metadata (invalid JSON)",
        source: Box::new(e),
    })?;
    if let Some(v) = value.get("format-version")
        && !matches!(v.as_i64(), Some(1..=3))
    {
        return Err(Error::corrupt(
            uri,
            format!("unsupported format-version {v}; lakedrill reads 1, 2 and 3"),
        ));
    }
    if let Some(reason) = encryption(&value) {
        return Err(encrypted(uri, &value, &reason));
    }
    if let Some(id) = duplicate_snapshot_id(&value) {
        // The iceberg crate keys snapshots by id in a map, so the second silently replaces the first (and what
        // only the first reaches would drop out of the closure); Iceberg Java refuses such metadata.
        return Err(Error::corrupt(
            uri,
            format!("snapshot id {id} appears more than once in `snapshots`: which snapshot it names is ambiguous"),
        ));
    }
    let mut value = value;
    lenient_schemas(&mut value, &mut Vec::new());
    FullMetadata::from_json_value(uri, &value)
}

/// The refs a table has: `refs` as written in its metadata JSON, for every format version, and the `main` a table
/// written without one implies at its current snapshot (spec). The iceberg crate 0.10's model of a format-v1
/// table holds only that implied `main` (its v1 reader ignores `refs`), yet Iceberg Java reads and writes `refs`
/// in v1 metadata and Spark creates tags and branches on v1 tables: read from the crate, their snapshots looked
/// unreferenced and expirable. See: apache/iceberg-rust#3693.
///
/// # Errors
/// [`Error::Parse`] for refs that do not parse; [`Error::Corrupt`] for a ref naming a snapshot the metadata does not
/// hold, or a `main` that is not the current snapshot (Iceberg Java refuses both).
fn refs_of_json(
    uri: &str,
    value: &serde_json::Value,
    md: &TableMetadata,
) -> Result<BTreeMap<String, SnapshotReference>> {
    let mut refs: BTreeMap<String, SnapshotReference> = match value.get("refs").filter(|r| !r.is_null()) {
        Some(r) => serde_json::from_value(r.clone()).map_err(|e| Error::Parse {
            uri: uri.to_owned(),
            what: "table metadata refs",
            source: Box::new(e),
        })?,
        None => BTreeMap::new(),
    };
    for (name, r) in &refs {
        if md.snapshot_by_id(r.snapshot_id).is_none() {
            return Err(Error::corrupt(
                uri,
                format!(
                    "ref {name:?} names snapshot {}, which is not in `snapshots`",
                    r.snapshot_id
                ),
            ));
        }
    }
    match (refs.get("main").map(|r| r.snapshot_id), md.current_snapshot_id()) {
        (Some(main), Some(current)) if main != current => {
            return Err(Error::corrupt(
                uri,
                format!("ref \"main\" names snapshot {main}, but the current snapshot is {current}"),
            ));
        }
        (Some(main), None) => {
            return Err(Error::corrupt(
                uri,
                format!("ref \"main\" names snapshot {main}, but the table has no current snapshot"),
            ));
        }
        (None, Some(current)) => {
            // Spec: tables written without `refs` (v1 writers) have an implied `main` at the current snapshot.
            refs.insert("main".to_owned(), implied_main(current));
        }
        _ => {}
    }
    Ok(refs)
}

/// The `main` branch a table without a written `main` has at its current snapshot.
fn implied_main(current: i64) -> SnapshotReference {
    SnapshotReference::new(current, iceberg::spec::SnapshotRetention::branch(None, None, None))
}

/// The refs the iceberg crate writes for `md` (the `refs` of its JSON, with the implied `main`): every ref for
/// format v2 and v3, only the implied `main` for v1.
fn refs_of_model(md: &TableMetadata) -> Result<BTreeMap<String, SnapshotReference>> {
    let v = serde_json::to_value(md).map_err(|e| Error::Internal(format!("encode metadata: {e}")))?;
    let mut refs: BTreeMap<String, SnapshotReference> = match v.get("refs").filter(|r| !r.is_null()) {
        Some(r) => {
            serde_json::from_value(r.clone()).map_err(|e| Error::Internal(format!("decode encoded refs: {e}")))?
        }
        None => BTreeMap::new(),
    };
    if let (false, Some(id)) = (refs.contains_key("main"), md.current_snapshot_id()) {
        refs.insert("main".to_owned(), implied_main(id));
    }
    Ok(refs)
}

/// The statistics files table metadata names, every entry as written (`statistics` and `partition-statistics`):
/// the iceberg crate keys both by snapshot id and so keeps one of each per snapshot, where the spec allows more
/// (a second file of a snapshot, dropped by the crate, looked unreferenced and became an orphan).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatisticsEntries {
    statistics: Vec<serde_json::Value>,
    partition_statistics: Vec<serde_json::Value>,
}

impl StatisticsEntries {
    /// Reads both lists from metadata JSON; an entry without an integer `snapshot-id` and a string
    /// `statistics-path` is refused.
    fn of_json(uri: &str, value: &serde_json::Value) -> Result<Self> {
        let list = |key: &str| -> Result<Vec<serde_json::Value>> {
            let entries = match value.get(key) {
                None | Some(serde_json::Value::Null) => return Ok(Vec::new()),
                Some(serde_json::Value::Array(a)) => a.clone(),
                Some(_) => return Err(Error::corrupt(uri, format!("`{key}` is not an array"))),
            };
            for e in &entries {
                if e.get("snapshot-id").and_then(serde_json::Value::as_i64).is_none()
                    || e.get("statistics-path").and_then(serde_json::Value::as_str).is_none()
                {
                    return Err(Error::corrupt(
                        uri,
                        format!("an entry of `{key}` lacks an integer `snapshot-id` or a `statistics-path`: {e}"),
                    ));
                }
            }
            Ok(entries)
        };
        Ok(Self {
            statistics: list("statistics")?,
            partition_statistics: list("partition-statistics")?,
        })
    }

    /// Every statistics and partition-statistics file: its snapshot and its path as written.
    pub fn paths(&self) -> impl Iterator<Item = (i64, &str)> {
        self.statistics
            .iter()
            .chain(&self.partition_statistics)
            .filter_map(|e| Some((e.get("snapshot-id")?.as_i64()?, e.get("statistics-path")?.as_str()?)))
    }
}

/// Table metadata as lakedrill reads and commits it: the iceberg crate's model together with what that model
/// loses — every ref (its format-v1 model holds only `main`) and every statistics entry (it keeps one per
/// snapshot). Commits write those back ([`FullMetadata::to_json`]), so that a commit on a v1 table keeps its tags
/// and branches (and stores the quarantine's), and no statistics file drops out of the metadata.
///
/// Not kept: anything else the crate's model does not hold (a column of a type beyond it is written as `binary`
/// by a commit, see [`types_beyond_the_model`]).
#[derive(Debug, Clone)]
pub struct FullMetadata {
    pub(crate) metadata: TableMetadata,
    pub(crate) refs: BTreeMap<String, SnapshotReference>,
    pub(crate) statistics: StatisticsEntries,
}

impl FullMetadata {
    /// Table metadata JSON already parsed into a value (a REST catalog's answer, or a metadata file): the crate's
    /// model of it, its refs as written and its statistics entries.
    ///
    /// # Errors
    /// [`Error::Parse`] naming `uri` for metadata the crate does not read; [`Error::Corrupt`] for refs or
    /// statistics entries that are not valid (a ref naming a snapshot the metadata lacks, a `main` off the current
    /// snapshot).
    pub fn from_json_value(uri: &str, value: &serde_json::Value) -> Result<Self> {
        use serde::Deserialize;
        let statistics = StatisticsEntries::of_json(uri, value)?;
        let metadata = TableMetadata::deserialize(value).map_err(|e| Error::Parse {
            uri: uri.to_owned(),
            what: "table metadata",
            source: Box::new(e),
        })?;
        let refs = refs_of_json(uri, value, &metadata)?;
        Ok(Self {
            metadata,
            refs,
            statistics,
        })
    }

    /// Metadata built by the iceberg crate alone (the demo lakehouse), its refs and statistics as the crate
    /// writes them.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a format-v1 model: its refs other than `main` are not in what the crate writes, so
    /// they could not be committed.
    pub fn from_model(metadata: TableMetadata) -> Result<Self> {
        if metadata.format_version() == FormatVersion::V1 {
            return Err(Error::invalid(
                metadata.location(),
                "format-v1 metadata built by the iceberg crate alone cannot be committed: the crate does not \
                 write the refs of a v1 table",
            ));
        }
        let refs = refs_of_model(&metadata)?;
        let v = serde_json::to_value(&metadata).map_err(|e| Error::Internal(format!("encode metadata: {e}")))?;
        let statistics = StatisticsEntries::of_json(metadata.location(), &v)?;
        Ok(Self {
            metadata,
            refs,
            statistics,
        })
    }

    /// The iceberg crate's model.
    #[must_use]
    pub fn metadata(&self) -> &TableMetadata {
        &self.metadata
    }

    /// Every ref (branches and tags) with `main`.
    #[must_use]
    pub fn refs(&self) -> &BTreeMap<String, SnapshotReference> {
        &self.refs
    }

    /// Every statistics entry as written.
    #[must_use]
    pub fn statistics(&self) -> &StatisticsEntries {
        &self.statistics
    }

    /// The metadata JSON a commit writes: what the iceberg crate writes for its model, with the refs of a
    /// format-v1 table (`refs`, as Iceberg Java writes them for every version) and every statistics entry of a
    /// snapshot the model still has statistics for put back where the crate's JSON lacks them. Bytes as the crate
    /// writes them when nothing is missing.
    ///
    /// # Errors
    /// [`Error::Internal`] when the metadata cannot be encoded, or when the refs of a v2/v3 model are not those
    /// lakedrill followed (a bug: the two must agree).
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let encode = |e: serde_json::Error| Error::Internal(format!("encode metadata: {e}"));
        let mut doc = serde_json::to_value(&self.metadata).map_err(encode)?;
        let mut patched = false;
        if self.metadata.format_version() == FormatVersion::V1 {
            let implied: BTreeMap<String, SnapshotReference> = self
                .metadata
                .current_snapshot_id()
                .map(|id| ("main".to_owned(), implied_main(id)))
                .into_iter()
                .collect();
            if self.refs != implied {
                doc["refs"] = serde_json::to_value(&self.refs).map_err(encode)?;
                patched = true;
            }
        } else if refs_of_model(&self.metadata)? != self.refs {
            return Err(Error::Internal(format!(
                "the refs of the metadata to commit for {} are not the ones lakedrill followed",
                self.metadata.location()
            )));
        }
        for (key, raw, kept) in [
            (
                "statistics",
                &self.statistics.statistics,
                self.metadata
                    .statistics_iter()
                    .map(|s| s.snapshot_id)
                    .collect::<std::collections::BTreeSet<_>>(),
            ),
            (
                "partition-statistics",
                &self.statistics.partition_statistics,
                self.metadata
                    .partition_statistics_iter()
                    .map(|s| s.snapshot_id)
                    .collect(),
            ),
        ] {
            let keep: Vec<serde_json::Value> = raw
                .iter()
                .filter(|e| {
                    e.get("snapshot-id")
                        .and_then(serde_json::Value::as_i64)
                        .is_some_and(|id| kept.contains(&id))
                })
                .cloned()
                .collect();
            if keep.len() > kept.len() {
                doc[key] = serde_json::Value::Array(keep);
                patched = true;
            }
        }
        if patched {
            serde_json::to_vec(&doc).map_err(encode)
        } else {
            serde_json::to_vec(&self.metadata).map_err(encode)
        }
    }
}
