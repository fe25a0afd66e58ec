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

use crate::io::store::Storage;
use crate::model::location;

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
