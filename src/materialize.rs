//! `restore --into`: materializes a verified bundle as a new, registered, queryable table.
//!
//! From the bundle alone (never the live table) and only after it verifies deeply, lakedrill copies
//! every data and equality-delete object to the new location (checking each copy's BLAKE3 against
//! the inventory), rewrites the manifests and the manifest list with every path rebased onto the new
//! location, writes a metadata file that holds just the restored snapshot (with a new table UUID:
//! the copy is another table), and registers it in a SQL catalog so other engines can query it.
//!
//! Not supported: position delete files (they name data files by path inside their rows, so
//! rebasing them means rewriting Parquet) and non-local targets (the manifests are written with the
//! `iceberg` crate's local file IO). Both are refused before anything is written.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use iceberg::io::{FileIOBuilder, LocalFsStorageFactory};
use iceberg::spec::{
    FormatVersion, ManifestContentType, ManifestListWriter, ManifestWriterBuilder, deserialize_data_file_from_json,
    serialize_data_file_to_json,
};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};
use serde::Serialize;

use crate::bundle::{self, Layer, RestoreStatus, VerifyOptions};
use crate::commands::Context;
use crate::error::{Error, Result};
use crate::location::{self, TableLocation};
use crate::output::{Outcome, Verdict};
use crate::table;

fn ice(context: &str) -> impl FnOnce(iceberg::Error) -> Error + '_ {
    move |e| Error::iceberg(context, e)
}

#[derive(Serialize)]
struct Restored {
    status: &'static str,
    table: String,
    snapshot_id: i64,
    metadata_location: String,
    objects_copied: usize,
    bytes_copied: u64,
}

/// `lakedrill restore BUNDLE --trust DIR --into URI --catalog NAME --table NS.TABLE`.
///
/// # Errors
/// Unsupported bundles or targets, storage and catalog errors. A bundle that does not verify is refused
/// (exit 1) and nothing is written.
#[allow(clippy::too_many_lines)]
pub async fn restore_into(
    ctx: &Context,
    bundle_uri: &str,
    trust_dir: &std::path::Path,
    into: &str,
    catalog: &str,
    table_name: &str,
) -> Result<Outcome> {
    let trust = crate::keys::TrustStore::load_dir(trust_dir)?;
    let report = bundle::verify(
        &ctx.storage,
        bundle_uri,
        &trust,
        &VerifyOptions {
            deep: true,
            table_root: None,
        },
    )
    .await?;
    if report.status != RestoreStatus::RestoreVerified {
        let mut human = "REFUSED: the bundle does not verify; nothing was written\n".to_owned();
        for f in &report.findings {
            human.push_str(&format!("  {f}\n"));
        }
        return Outcome::new(Verdict::Findings, &report, human);
    }
    let (pred, copies) = bundle::verified_predicate(&ctx.storage, bundle_uri, &trust).await?;
    let into = location::canonical_uri(into)?;
    let Some(into_path) = into.strip_prefix("file://") else {
        return Err(Error::invalid(
            "--into",
            format!("{into}: only local targets (file://, plain paths) are supported"),
        ));
    };
    if pred.inventory.iter().any(|e| e.layer == Layer::PositionDeletes) {
        return Err(Error::invalid(
            bundle_uri,
            "the snapshot has position delete files, which name data files by path inside their rows; rebasing them is not supported",
        ));
    }
    let ident: crate::catalog::TableIdent = table_name.parse()?;
    let cfg = ctx.config.catalog(catalog)?.clone();
    let old = TableLocation::new(&pred.table_location, "memory:///unused".into(), bundle_uri)?;
    let rebased = |written: &str| -> Result<String> { Ok(location::join(&into, &old.relative(written)?)) };
    if !ctx.storage.list(&into).await?.is_empty() {
        return Err(Error::invalid(
            "--into",
            format!("{into} is not empty; lakedrill restores only into an empty location"),
        ));
    }
    // 1. Data and equality-delete objects, copied and checked.
    let mut copied = 0;
    let mut bytes_copied = 0;
    let mut new_paths: HashMap<String, String> = HashMap::new();
    for e in pred.inventory.iter().filter(|e| !e.layer.is_metadata()) {
        let src = ctx.storage.get(&e.uri).await?;
        let digest = blake3::hash(&src.bytes).to_hex().to_string();
        if digest != e.blake3 {
            return Err(Error::corrupt(
                &e.uri,
                format!("changed while restoring: BLAKE3 {digest}, bundle says {}", e.blake3),
            ));
        }
        let dst = rebased(&e.path)?;
        ctx.storage.put_new(&dst, src.bytes).await?;
        new_paths.insert(e.path.clone(), dst.clone());
        copied += 1;
        bytes_copied += e.size;
    }
    // 2. Manifests with rebased paths, then the manifest list.
    let md_entry = pred
        .inventory
        .iter()
        .find(|e| e.layer == Layer::Metadata)
        .ok_or_else(|| Error::corrupt(bundle_uri, "the inventory has no metadata"))?;
    let md_bytes = copies
        .get(&md_entry.path)
        .ok_or_else(|| Error::corrupt(bundle_uri, "the metadata copy is missing"))?;
    let (md, _) = table::parse_metadata(&md_entry.path, md_bytes)?;
    let snapshot = md
        .snapshot_by_id(pred.snapshot_id)
        .ok_or_else(|| {
            Error::corrupt(
                bundle_uri,
                format!("the bundled metadata lacks snapshot {}", pred.snapshot_id),
            )
        })?
        .clone();
    let list_bytes = copies
        .get(snapshot.manifest_list())
        .ok_or_else(|| Error::corrupt(bundle_uri, "the manifest list copy is missing"))?;
    let list = table::parse_manifest_list(snapshot.manifest_list(), list_bytes, md.format_version())?;
    let io = FileIOBuilder::new(Arc::new(LocalFsStorageFactory)).build();
    let id = snapshot.snapshot_id();
    let mut manifests = Vec::new();
    for mf in list.entries() {
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
            .new_output(rebased(&mf.manifest_path)?)
            .map_err(ice("create manifest"))?;
        let builder = ManifestWriterBuilder::new(out, Some(id), meta.schema().clone(), meta.partition_spec().clone());
        let mut writer = match (md.format_version(), meta.content()) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (_, ManifestContentType::Data) => builder.build_v2_data(),
            (_, ManifestContentType::Deletes) => builder.build_v2_deletes(),
        };
        for e in manifest.entries().iter().filter(|e| e.is_alive()) {
            let json = serialize_data_file_to_json(e.data_file().clone(), &ptype, md.format_version())
                .map_err(ice("encode entry"))?;
            let mut v: serde_json::Value = serde_json::from_str(&json).map_err(|x| Error::Internal(x.to_string()))?;
            let old_path = e.data_file().file_path().to_owned();
            let new_path = new_paths
                .get(&old_path)
                .cloned()
                .ok_or_else(|| Error::corrupt(&old_path, "a live entry the inventory does not hold"))?;
            v["file_path"] = serde_json::Value::String(new_path);
            let df =
                deserialize_data_file_from_json(&v.to_string(), meta.partition_spec().spec_id(), &ptype, meta.schema())
                    .map_err(ice("decode entry"))?;
            let seq = e.sequence_number().unwrap_or(mf.sequence_number);
            let file_seq = e.file_sequence_number.unwrap_or(mf.sequence_number);
            writer
                .add_existing_file(df, e.snapshot_id().unwrap_or(mf.added_snapshot_id), seq, Some(file_seq))
                .map_err(ice("write manifest"))?;
        }
        manifests.push(writer.write_manifest_file().await.map_err(ice("write manifest"))?);
    }
    let list_path = rebased(snapshot.manifest_list())?;
    let out = io
        .new_output(&list_path)
        .map_err(ice("create manifest list"))?
        .writer()
        .await
        .map_err(ice("create manifest list"))?;
    let mut lw = match md.format_version() {
        FormatVersion::V1 => ManifestListWriter::v1(out, id, None),
        _ => ManifestListWriter::v2(out, id, None, snapshot.sequence_number()),
    };
    lw.add_manifests(manifests.into_iter())
        .map_err(ice("write manifest list"))?;
    lw.close().await.map_err(ice("write manifest list"))?;
    // 3. Metadata holding just the restored snapshot, with a new table UUID.
    let mut doc = serde_json::to_value(&md).map_err(|e| Error::Internal(format!("encode metadata: {e}")))?;
    let mut snap = doc["snapshots"]
        .as_array()
        .and_then(|a| a.iter().find(|s| s["snapshot-id"].as_i64() == Some(id)))
        .cloned()
        .ok_or_else(|| Error::Internal("snapshot vanished from the metadata".into()))?;
    snap["manifest-list"] = serde_json::Value::String(list_path);
    if let Some(o) = snap.as_object_mut() {
        o.remove("parent-snapshot-id");
    }
    let new_uuid = uuid::Uuid::new_v4().to_string();
    doc["table-uuid"] = serde_json::Value::String(new_uuid);
    doc["location"] = serde_json::Value::String(into.clone());
    doc["snapshots"] = serde_json::json!([snap]);
    doc["current-snapshot-id"] = serde_json::json!(id);
    doc["refs"] = serde_json::json!({"main": {"snapshot-id": id, "type": "branch"}});
    doc["snapshot-log"] = serde_json::json!([{"snapshot-id": id, "timestamp-ms": snapshot.timestamp_ms()}]);
    doc["metadata-log"] = serde_json::json!([]);
    if let Some(o) = doc.as_object_mut() {
        o.remove("statistics");
        o.remove("partition-statistics");
    }
    let new_md: iceberg::spec::TableMetadata = serde_json::from_value(doc)
        .map_err(|e| Error::Internal(format!("restored metadata does not validate: {e}")))?;
    let md_location = format!("{into}/metadata/00000-{}.metadata.json", uuid::Uuid::new_v4());
    ctx.storage
        .put_new(
            &md_location,
            Bytes::from(serde_json::to_vec(&new_md).map_err(|e| Error::Internal(e.to_string()))?),
        )
        .await?;
    // 4. Register it in the catalog.
    let db = cfg
        .uri
        .strip_prefix("sqlite://")
        .or_else(|| cfg.uri.strip_prefix("sqlite:"))
        .unwrap_or(&cfg.uri)
        .to_owned();
    let cat = SqlCatalogBuilder::default()
        .uri(format!("sqlite:{db}"))
        .warehouse_location(cfg.warehouse.clone().unwrap_or_else(|| format!("file://{into_path}")))
        .sql_bind_style(SqlBindStyle::QMark)
        .with_storage_factory(Arc::new(LocalFsStorageFactory))
        .load(cfg.name.clone().unwrap_or_else(|| catalog.to_owned()), HashMap::new())
        .await
        .map_err(ice("open the catalog"))?;
    let ns = NamespaceIdent::from_strs(ident.namespace.split('.')).map_err(ice("namespace"))?;
    if !cat.namespace_exists(&ns).await.map_err(ice("namespace"))? {
        cat.create_namespace(&ns, HashMap::new())
            .await
            .map_err(ice("create namespace"))?;
    }
    let tid = iceberg::TableIdent::new(ns, ident.name.clone());
    cat.register_table(&tid, md_location.clone())
        .await
        .map_err(ice("register the restored table"))?;
    let human = format!(
        "RESTORED snapshot {id} as {catalog}.{ident} at {into}\nmetadata {md_location}\n{copied} objects ({bytes_copied} bytes) copied and checked\n"
    );
    Outcome::new(
        Verdict::Ok,
        &Restored {
            status: "RESTORED",
            table: format!("{catalog}.{ident}"),
            snapshot_id: id,
            metadata_location: md_location,
            objects_copied: copied,
            bytes_copied,
        },
        human,
    )
}
