//! The live head of a table known only by its metadata folder and UUID: what a quarantine drill measures a
//! bundle's history age against (#23 point 2).
//!
//! A bundle names no catalog, only where its metadata file was read (`<table>/metadata/…`) and the table's
//! UUID. [`live_head`] lists that folder, takes the metadata files with the highest version number in their
//! name (`00042-<uuid>.metadata.json` as catalogs write them, `v42.metadata.json` as Hadoop tables do, each
//! also gzip-compressed), reads them and keeps those of the same table UUID; the head is the current snapshot
//! of the one whose current snapshot is newest.
//!
//! What it guarantees: every answer names the metadata file it read, and every reason for not answering names
//! the folder or file and what was wrong. It never fails: a folder that cannot be listed, a file that does not
//! parse, a newest file of another table (the location was reused) or a table without a current snapshot are
//! reasons, not errors, because the figure is information and no drill may fail for it.
//!
//! What it does not do: ask a catalog. For a catalog table the highest-numbered file is usually the current
//! one, but a writer whose catalog swap failed leaves a metadata file that never became current; it may
//! carry the highest number, and the head read from it is then one the catalog never served. It does not read
//! manifests or check that the bundle's snapshot is an ancestor of the head.
//!
//! [`later_generations`] answers the other question a metadata folder can: does it hold a later generation of
//! the table than the metadata file the user named (`plan --metadata …/00041-….metadata.json`)? Planning on an
//! older file would make everything the later commits wrote (their metadata file, manifest lists and data
//! files, which the older file knows nothing of) orphans once old enough. A listed metadata file is a later
//! generation when it has the same table UUID and
//! * its metadata log names the file read (it was written on top of it), or
//! * its metadata log names a file written after the file read (its `timestamp-ms` is later than the file
//!   read's `last-updated-ms`: a log trimmed by `write.metadata.previous-versions-max` may no longer name
//!   the file read itself), or
//! * both are Hadoop versions (`vN.metadata.json`) and its number is higher: a Hadoop commit *is* the
//!   rename to the next number, so a higher version is committed, or
//! * it was built on the file read's parent (the last file of the file read's log) and not on the file read: a
//!   sibling. Two writers committed from the same generation and only one of them won the catalog; which one
//!   cannot be told without the catalog, and a plan on the loser would make the winner's files (and everything
//!   built on them) orphans. It is reported as "cannot decide" like a later generation.
//!
//! A higher-numbered file that meets none of these is not one: a racing writer whose catalog commit failed
//! leaves its metadata file behind, built on an older generation it started from, and such a file must not
//! refuse every plan for good. Only files whose number is at least the file read's (or that carry no number)
//! are read: a writer numbers a commit one above the generation it builds on, so a sibling carries the same
//! number as the file read and its successors higher ones. A file built on the file read
//! whose commit failed (the writer died or lost the catalog swap) cannot be told from a committed one without
//! a catalog: it is reported too, and the plan is made through the catalog or on the newest file.

use std::collections::BTreeSet;

use iceberg::spec::TableMetadata;

use crate::error::{Error, Result};
use crate::io::store::Storage;
use crate::model::location::{self, TableLocation};

/// The head of a live table, read from one metadata file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveHead {
    /// The metadata file the head was read from.
    pub metadata_uri: String,
    /// The current snapshot.
    pub snapshot_id: i64,
    /// Its commit time (epoch ms).
    pub timestamp_ms: i64,
}

/// The version number in a metadata file's name: `00042-<uuid>.metadata.json` and `v42.metadata.json` (also
/// `.metadata.json.gz` and `.gz.metadata.json`) give 42; anything else `None`.
#[must_use]
pub fn metadata_version(file_name: &str) -> Option<u64> {
    let stem = file_name
        .strip_suffix(".gz.metadata.json")
        .or_else(|| file_name.strip_suffix(".metadata.json.gz"))
        .or_else(|| file_name.strip_suffix(".metadata.json"))?;
    if let Some(n) = stem.strip_prefix('v')
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        return n.parse().ok();
    }
    let (n, rest) = stem.split_once('-')?;
    if n.is_empty() || rest.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// The live head of the table `table_uuid` whose metadata files lie directly in `metadata_dir` (a canonical
/// folder URI), or why it cannot be told (see the module documentation).
pub async fn live_head(storage: &Storage, metadata_dir: &str, table_uuid: &str) -> Result<LiveHead, String> {
    let dir = metadata_dir.trim_end_matches('/');
    let listed = storage.list(dir).await.map_err(|e| format!("cannot list {dir}: {e}"))?;
    let mut newest: Vec<String> = Vec::new();
    let mut top = None;
    for o in listed {
        if location::parent(&o.uri).as_deref().map(|p| p.trim_end_matches('/')) != Some(dir) {
            continue;
        }
        let Some(v) = metadata_version(location::file_name(&o.uri)) else {
            continue;
        };
        match top {
            Some(t) if v < t => {}
            Some(t) if v == t => newest.push(o.uri),
            _ => {
                top = Some(v);
                newest = vec![o.uri];
            }
        }
    }
    if newest.is_empty() {
        return Err(format!("{dir} holds no metadata file (*.metadata.json)"));
    }
    let max = storage.options().max_metadata_bytes;
    let mut best: Option<LiveHead> = None;
    let mut reason = None;
    for uri in &newest {
        let bytes = storage
            .get_bounded(uri, max, "table metadata")
            .await
            .map_err(|e| format!("cannot read {uri}: {e}"))?
            .bytes;
        let (md, _) = crate::table::parse_metadata(uri, &bytes, max).map_err(|e| format!("cannot parse {uri}: {e}"))?;
        if !md.uuid().to_string().eq_ignore_ascii_case(table_uuid) {
            reason = Some(format!(
                "the newest metadata file {uri} belongs to table {}, not {table_uuid}: the location holds another table",
                md.uuid()
            ));
            continue;
        }
        let Some(s) = md.current_snapshot() else {
            if best.is_none() {
                reason = Some(format!("the live table has no current snapshot ({uri})"));
            }
            continue;
        };
        if best.as_ref().is_none_or(|b| s.timestamp_ms() > b.timestamp_ms) {
            best = Some(LiveHead {
                metadata_uri: uri.clone(),
                snapshot_id: s.snapshot_id(),
                timestamp_ms: s.timestamp_ms(),
            });
        }
    }
    best.ok_or_else(|| reason.unwrap_or_else(|| format!("no metadata file of table {table_uuid} in {dir}")))
}

/// A later generation of a table, found beside the metadata file read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaterGeneration {
    /// The later metadata file (its URI).
    pub metadata_uri: String,
    /// Why it is later (which rule of the module documentation holds).
    pub why: String,
}

/// The metadata file a table was read from: what [`later_generations`] compares the folder's files with.
#[derive(Debug, Clone, Copy)]
pub struct ReadFile<'a> {
    /// Its parsed metadata.
    pub metadata: &'a TableMetadata,
    /// Its path relative to the table root.
    pub path: &'a str,
    /// Where the table's written paths lie (to read other files' metadata logs).
    pub location: &'a TableLocation,
}

impl ReadFile<'_> {
    /// The paths its metadata log names, relative to the table root.
    fn logged(&self) -> BTreeSet<String> {
        self.metadata
            .metadata_log()
            .iter()
            .filter_map(|m| self.location.relative(&m.metadata_file).ok())
            .collect()
    }
}

/// Whether the listed metadata file at `path` (relative to the table root) may be a later generation than
/// `read` and must be read (pure): not the file read, not one its metadata log names, and numbered higher
/// than it (or either without a number in its name).
#[must_use]
pub fn maybe_later(read: &ReadFile<'_>, logged: &BTreeSet<String>, path: &str) -> bool {
    let name = location::file_name(path);
    let is_metadata =
        name.ends_with(".metadata.json") || name.ends_with(".metadata.json.gz") || name.ends_with(".gz.metadata.json");
    if !is_metadata || path == read.path || logged.contains(path) {
        return false;
    }
    match (metadata_version(location::file_name(read.path)), metadata_version(name)) {
        // The same number: a sibling built on the same parent (see [`later_because`]).
        (Some(ours), Some(theirs)) => theirs >= ours,
        _ => true,
    }
}

/// Why `other`, read at `path` (relative to the table root), is a later generation of the table than
/// `read`, or `None` (pure; the rules of the module documentation).
#[must_use]
pub fn later_because(read: &ReadFile<'_>, path: &str, other: &TableMetadata) -> Option<String> {
    if other.uuid() != read.metadata.uuid() {
        return None;
    }
    let ours = read.metadata.last_updated_ms();
    for m in other.metadata_log() {
        let logged = read.location.relative(&m.metadata_file).ok();
        if logged.as_deref() == Some(read.path) {
            return Some(format!("its metadata log names {}", m.metadata_file));
        }
        if m.timestamp_ms > ours {
            return Some(format!(
                "its metadata log names {}, written at {} ms, after the file read (last-updated-ms {ours})",
                m.metadata_file, m.timestamp_ms
            ));
        }
    }
    if let (Some(a), Some(b)) = (
        crate::table::hadoop_version(location::file_name(read.path)),
        crate::table::hadoop_version(location::file_name(path)),
    ) && b > a
    {
        return Some(format!(
            "Hadoop version {b} follows version {a} (a Hadoop commit is the rename to the next version)"
        ));
    }
    // A sibling: built on the parent of the file read (its log names that parent, and not the file read, which
    // the loop above would have found).
    let parent = read.metadata.metadata_log().last()?;
    let parent_path = read.location.relative(&parent.metadata_file).ok()?;
    other
        .metadata_log()
        .iter()
        .any(|m| read.location.relative(&m.metadata_file).ok().as_deref() == Some(parent_path.as_str()))
        .then(|| {
            format!(
                "it was built on {}, as the file read was, and not on the file read: two commits raced from that \
                 generation, and which of them the catalog took cannot be told without it",
                parent.metadata_file
            )
        })
}

/// How many candidate metadata files are read at once.
const LATER_READS: usize = 16;

/// The later generations of the table among `listed` (paths relative to the table root `root_uri`, the
/// listing's metadata files), reading only those [`maybe_later`] keeps.
///
/// # Errors
/// [`Error::Invalid`] naming a candidate that cannot be read or parsed: whether it is a later generation
/// cannot be decided then.
pub async fn later_generations(
    storage: &Storage,
    root_uri: &str,
    read: &ReadFile<'_>,
    listed: impl Iterator<Item = &str>,
) -> Result<Vec<LaterGeneration>> {
    use futures::StreamExt as _;
    let logged = read.logged();
    let max = storage.options().max_metadata_bytes;
    let root = root_uri.trim_end_matches('/');
    let candidates: Vec<String> = listed
        .filter(|p| maybe_later(read, &logged, p))
        .map(str::to_owned)
        .collect();
    let found: Vec<Result<Option<LaterGeneration>>> = futures::stream::iter(candidates)
        .map(|path| async move {
            let uri = location::join(root, &path);
            let cannot = |e: Error| {
                Error::invalid(
                    &uri,
                    format!(
                        "cannot decide whether it is a later generation of table {} than the metadata file read \
                         ({e}); move the file away if it is debris, or plan on the newest metadata file",
                        read.metadata.uuid()
                    ),
                )
            };
            let bytes = match storage.get_bounded(&uri, max, "table metadata").await {
                Ok(f) => f.bytes,
                // Gone since the listing (a writer's clean-up): not a generation.
                Err(Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(cannot(e)),
            };
            let (other, _) = crate::table::parse_metadata(&uri, &bytes, max).map_err(cannot)?;
            Ok(later_because(read, &path, &other).map(|why| LaterGeneration {
                metadata_uri: uri.clone(),
                why,
            }))
        })
        .buffer_unordered(LATER_READS)
        .collect()
        .await;
    let mut out = Vec::new();
    for f in found {
        out.extend(f?);
    }
    out.sort_by(|a, b| a.metadata_uri.cmp(&b.metadata_uri));
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;

    use super::*;

    const FIXTURE: &str = "tests/fixtures/interop/duckdb-iceberg/tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table/metadata";
    const UUID: &str = "7c10a28a-8931-4e12-8142-0befc8b0eed7";

    fn fixture(name: &str) -> Bytes {
        Bytes::from(std::fs::read(format!("{}/{FIXTURE}/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap())
    }

    #[test]
    fn metadata_versions_are_read_from_both_naming_schemes() {
        assert_eq!(
            metadata_version("00042-6f1c2a9e-1111-2222-3333-444455556666.metadata.json"),
            Some(42)
        );
        assert_eq!(metadata_version("00003-x.gz.metadata.json"), Some(3));
        assert_eq!(metadata_version("v7.metadata.json"), Some(7));
        assert_eq!(metadata_version("v12.metadata.json.gz"), Some(12));
        for not in [
            "version-hint.text",
            "snap-1-1-abc.avro",
            "v.metadata.json",
            "vx1.metadata.json",
            "-abc.metadata.json",
            "00001-.metadata.json",
            "abc-def.metadata.json",
            "00001-x.metadata.json.tmp",
        ] {
            assert_eq!(metadata_version(not), None, "{not}");
        }
    }

    /// The fixture's metadata file `name`, parsed.
    fn parsed(name: &str) -> TableMetadata {
        crate::table::parse_metadata(name, &fixture(name), u64::MAX).unwrap().0
    }

    /// The fixture's v5 metadata as the file read, with its location under `memory:///t`.
    fn v5_read() -> (TableMetadata, TableLocation) {
        let v5 = parsed("v5.metadata.json");
        let location = TableLocation::new(
            v5.location(),
            "memory:///t".into(),
            "memory:///t/metadata/v5.metadata.json",
        )
        .unwrap();
        (v5, location)
    }

    #[test]
    fn a_later_generation_names_the_file_read_or_a_later_one_or_is_a_later_hadoop_version() {
        let (v5, location) = v5_read();
        let read = ReadFile {
            metadata: &v5,
            path: "metadata/v5.metadata.json",
            location: &location,
        };
        // v7's log names v5 (and v6, written after it).
        let why = later_because(&read, "metadata/v7.metadata.json", &parsed("v7.metadata.json")).unwrap();
        assert!(
            why.contains("names data/iceberg/generated_spec2_0_001/pyspark_iceberg_table/metadata/v5.metadata.json"),
            "{why}"
        );
        // A log trimmed past v5 still names a file written after it.
        let mut trimmed = serde_json::from_slice::<serde_json::Value>(&fixture("v7.metadata.json")).unwrap();
        trimmed["metadata-log"].as_array_mut().unwrap().drain(..5);
        let trimmed: TableMetadata = serde_json::from_value(trimmed).unwrap();
        let why = later_because(&read, "metadata/00007-x.metadata.json", &trimmed).unwrap();
        assert!(why.contains("after the file read"), "{why}");
        // An older generation under a higher number (a failed commit built on v4) is not later; as a Hadoop
        // version it is (a Hadoop commit is the rename).
        let v4 = parsed("v4.metadata.json");
        assert_eq!(later_because(&read, "metadata/00099-failed.metadata.json", &v4), None);
        let why = later_because(&read, "metadata/v8.metadata.json", &v4).unwrap();
        assert!(why.contains("Hadoop version 8 follows version 5"), "{why}");
        // Another table is never a later generation.
        let mut other = serde_json::from_slice::<serde_json::Value>(&fixture("v7.metadata.json")).unwrap();
        other["table-uuid"] = serde_json::Value::String("00000000-0000-4000-8000-000000000001".into());
        let other: TableMetadata = serde_json::from_value(other).unwrap();
        assert_eq!(later_because(&read, "metadata/v7.metadata.json", &other), None);
        // A sibling of the file read (built on its parent v4 too, written later, numbered alike): which of the two
        // the catalog took cannot be told, whichever was written last; read because its number is not lower.
        let mut sibling = serde_json::from_slice::<serde_json::Value>(&fixture("v5.metadata.json")).unwrap();
        sibling["last-updated-ms"] = serde_json::json!(v5.last_updated_ms() + 60_000);
        let sibling: TableMetadata = serde_json::from_value(sibling).unwrap();
        let why = later_because(&read, "metadata/00005-sibling.metadata.json", &sibling).unwrap();
        assert!(why.contains("built on") && why.contains("v4.metadata.json"), "{why}");
        assert!(maybe_later(
            &read,
            &read.logged(),
            "metadata/00005-sibling.metadata.json"
        ));
        // Only higher-numbered files (or unnumbered ones) not in the log are read.
        let logged = read.logged();
        assert!(logged.contains("metadata/v4.metadata.json"), "{logged:?}");
        assert!(maybe_later(&read, &logged, "metadata/v6.metadata.json"));
        assert!(maybe_later(&read, &logged, "metadata/00006-a.gz.metadata.json"));
        assert!(maybe_later(&read, &logged, "metadata/debris.metadata.json"));
        for not in [
            "metadata/v5.metadata.json",
            "metadata/v4.metadata.json",
            "metadata/00001-dropped-from-log.metadata.json",
            "metadata/version-hint.text",
            "metadata/snap-1.avro",
        ] {
            assert!(!maybe_later(&read, &logged, not), "{not}");
        }
    }

    #[tokio::test]
    async fn later_generations_reads_the_candidates_and_refuses_an_unreadable_one() {
        let storage = Storage::new(crate::io::store::StorageOptions::default());
        let (v5, location) = v5_read();
        let read = ReadFile {
            metadata: &v5,
            path: "metadata/v5.metadata.json",
            location: &location,
        };
        for name in [
            "v4.metadata.json",
            "v5.metadata.json",
            "v6.metadata.json",
            "v7.metadata.json",
        ] {
            storage
                .put(&format!("memory:///t/metadata/{name}"), fixture(name))
                .await
                .unwrap();
        }
        let listed = [
            "metadata/v4.metadata.json",
            "metadata/v5.metadata.json",
            "metadata/v6.metadata.json",
            "metadata/v7.metadata.json",
        ];
        let later = later_generations(&storage, "memory:///t/", &read, listed.into_iter())
            .await
            .unwrap();
        let uris: Vec<&str> = later.iter().map(|l| l.metadata_uri.as_str()).collect();
        assert_eq!(
            uris,
            [
                "memory:///t/metadata/v6.metadata.json",
                "memory:///t/metadata/v7.metadata.json"
            ]
        );
        // Listed but gone since: not a generation. Listed and unreadable: cannot decide.
        let gone = later_generations(
            &storage,
            "memory:///t",
            &read,
            ["metadata/v9.metadata.json"].into_iter(),
        )
        .await
        .unwrap();
        assert!(gone.is_empty());
        storage
            .put(
                "memory:///t/metadata/v8.metadata.json",
                Bytes::from_static(b"{not json"),
            )
            .await
            .unwrap();
        let e = later_generations(
            &storage,
            "memory:///t",
            &read,
            ["metadata/v8.metadata.json"].into_iter(),
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("memory:///t/metadata/v8.metadata.json"), "{e}");
    }

    #[tokio::test]
    async fn the_head_is_the_current_snapshot_of_the_highest_numbered_file_of_the_table() {
        let storage = Storage::new(crate::io::store::StorageOptions::default());
        let dir = "memory:///t/metadata";
        // A file in a subfolder is not one of this folder's metadata files.
        for (name, bytes) in [
            ("v5.metadata.json", fixture("v5.metadata.json")),
            ("v7.metadata.json", fixture("v7.metadata.json")),
            ("version-hint.text", Bytes::from_static(b"7")),
            ("old/v9.metadata.json", fixture("v9.metadata.json")),
        ] {
            storage.put(&format!("{dir}/{name}"), bytes).await.unwrap();
        }
        let h = live_head(&storage, dir, UUID).await.unwrap();
        assert_eq!(h.metadata_uri, format!("{dir}/v7.metadata.json"));
        assert_eq!(h.snapshot_id, 3_119_545_726_281_138_740);
        assert_eq!(h.timestamp_ms, 1_719_580_930_749);
        // The UUID is compared case-insensitively.
        assert_eq!(live_head(&storage, dir, &UUID.to_uppercase()).await.unwrap(), h);
    }

    #[tokio::test]
    async fn a_newest_file_of_another_table_or_an_empty_folder_is_a_reason_not_an_error() {
        let storage = Storage::new(crate::io::store::StorageOptions::default());
        let dir = "memory:///t/metadata";
        let why = live_head(&storage, dir, UUID).await.unwrap_err();
        assert!(why.contains("holds no metadata file"), "{why}");
        storage
            .put(&format!("{dir}/v5.metadata.json"), fixture("v5.metadata.json"))
            .await
            .unwrap();
        let mut other: serde_json::Value = serde_json::from_slice(&fixture("v7.metadata.json")).unwrap();
        other["table-uuid"] = serde_json::Value::String("00000000-0000-4000-8000-000000000001".into());
        storage
            .put(&format!("{dir}/v7.metadata.json"), Bytes::from(other.to_string()))
            .await
            .unwrap();
        let why = live_head(&storage, dir, UUID).await.unwrap_err();
        assert!(
            why.contains("v7.metadata.json belongs to table 00000000-0000-4000-8000-000000000001"),
            "{why}"
        );
        storage
            .put(&format!("{dir}/v8.metadata.json"), Bytes::from_static(b"{not json"))
            .await
            .unwrap();
        let why = live_head(&storage, dir, UUID).await.unwrap_err();
        assert!(
            why.contains("cannot parse memory:///t/metadata/v8.metadata.json"),
            "{why}"
        );
    }
}
