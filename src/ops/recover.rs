//! Full recovery from a bundle into a new location: `lakedrill recover`, the cold-backup drill, and
//! `restore --into` ([`restore_into`]: the same steps for a copy with a new table UUID).
//!
//! 1. The bundle is verified deeply from the bundle alone (signature, root, layers, every data and
//!    delete object by BLAKE3 where the inventory says it is: the backup store for a cold backup).
//!    A bundle that does not verify is a `FAILED` recovery naming each bad object; nothing is written.
//! 2. [`materialize::rebuild`] copies every object into the new location and rewrites every path
//!    (metadata JSON, manifest list, manifests, position delete rows), keeping the table UUID.
//! 3. The result is checked as a reader would see it: the recovered table is loaded from its new
//!    metadata file; every data and equality-delete object must hash as in the bundle and every
//!    position delete file must hold the same rows with rebased paths; the rewritten metadata, manifest
//!    list and manifests must equal the original's except for paths (and the sizes of rewritten
//!    position delete files); and a scan with the `iceberg` crate, deletes applied, must give the
//!    rows the manifests promise (data rows minus position-deleted rows; with equality deletes the
//!    manifests promise no figure and the scanned count is recorded).
//! 4. Only a recovery that verified is registered in the catalog.
//!
//! RTO is the wall time from the start to verified and registered; RPO is the declared checkpoint
//! time (the signed `backup.declared_at`, which `backup` took from the registry's checkpoint record) minus
//! the recovered snapshot's commit time (0 for a quarantine bundle recovered by hand, whose snapshot is its
//! own recovery point). A declared point before the commit is a `CHECKPOINT_MISMATCH`. Comparing the signed
//! checkpoint with the registry's record is the cold-backup drill's part (`ops::drill`): a recovery reads
//! only the bundle.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use futures::TryStreamExt;
use iceberg::spec::{FormatVersion, ManifestStatus, serialize_data_file_to_json};
use serde::{Deserialize, Serialize};

use crate::bundle::{self, BundlePredicate, Layer, RestoreStatus, VerifyOptions};
use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::evidence::keys::TrustStore;
use crate::io::store::Storage;
use crate::model::findings::{Finding, FindingKind};
use crate::model::location::{self, TableLocation};
use crate::ops::context::Context;
use crate::ops::materialize::{self, Identity, Rebuilt};
use crate::report::output::{Outcome, Verdict};
use crate::table::{self, Table, TableSource};

/// Where to register a recovered table.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Catalog section of the configuration.
    pub catalog: String,
    /// `NS.TABLE`.
    pub table: String,
}

/// The result of one recovery (`recover --json`, and one item of a cold-backup drill).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecoverReport {
    /// `RECOVERED` (verified and queryable) or `FAILED`.
    pub status: RestoreStatus,
    /// The bundle.
    pub bundle_id: Option<String>,
    /// Its root digest.
    pub bundle_root: Option<String>,
    /// Table UUID (kept by the recovery).
    pub table_uuid: Option<String>,
    /// The recovered snapshot.
    pub snapshot_id: Option<i64>,
    /// The snapshot the checkpoint declares (cold backups).
    pub declared_snapshot_id: Option<i64>,
    /// The declared recovery point (RFC 3339).
    pub declared_at: Option<String>,
    /// Cold backups: the registry checkpoint the bundle declares (its signed `backup.checkpoint_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// The new location.
    pub into: String,
    /// The recovered table's metadata file.
    pub metadata_location: Option<String>,
    /// `CATALOG.NS.TABLE` when registered.
    pub registered_as: Option<String>,
    /// Objects written (data and delete files).
    pub objects_restored: usize,
    /// Bytes written.
    pub bytes_restored: u64,
    /// Position delete files whose rows were rewritten.
    pub position_deletes_rewritten: usize,
    /// Rows the manifests promise after deletes (absent with equality deletes).
    pub rows_promised: Option<u64>,
    /// Rows a scan of the recovered table returned, deletes applied.
    pub rows_scanned: Option<u64>,
    /// Deletion vectors (format v3) checked in the recovered table against its manifests.
    #[serde(default)]
    pub deletion_vectors_checked: usize,
    /// Why `rows_scanned` is absent, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<String>,
    /// Start to verified and registered.
    pub rto_seconds: f64,
    /// Declared recovery point minus the recovered snapshot's commit time.
    pub rpo_seconds: Option<f64>,
    /// Every problem found.
    pub findings: Vec<Finding>,
}

impl RecoverReport {
    /// A recovery into `into` that has done nothing yet: `FAILED`, every figure empty.
    pub(crate) fn failed(into: String) -> Self {
        Self {
            status: RestoreStatus::Failed,
            bundle_id: None,
            bundle_root: None,
            table_uuid: None,
            snapshot_id: None,
            declared_snapshot_id: None,
            declared_at: None,
            checkpoint_id: None,
            into,
            metadata_location: None,
            registered_as: None,
            objects_restored: 0,
            bytes_restored: 0,
            position_deletes_rewritten: 0,
            rows_promised: None,
            rows_scanned: None,
            deletion_vectors_checked: 0,
            scan: None,
            rto_seconds: 0.0,
            rpo_seconds: None,
            findings: Vec::new(),
        }
    }
}

/// Recovers the snapshot of a bundle into the empty location `into` (a local folder or an S3 prefix).
///
/// # Errors
/// Only when lakedrill cannot decide (unreadable bundle folder, unreachable store, catalog
/// errors); a bundle that does not verify or a recovery that does not check out is a `FAILED`
/// report with findings.
#[allow(clippy::too_many_lines)]
pub async fn recover(
    storage: &Storage,
    config: &Config,
    bundle_uri: &str,
    trust: &TrustStore,
    into: &str,
    registration: Option<&Registration>,
    clock: &dyn Clock,
) -> Result<RecoverReport> {
    let t0 = clock.now();
    let into = location::canonical_uri(into)?;
    materialize::target("--into", &into)?;
    let ident: Option<crate::io::catalog::TableIdent> = registration.map(|r| r.table.parse()).transpose()?;
    if let (Some(r), Some(ident)) = (registration, &ident) {
        let cfg = config.catalog(&r.catalog)?.clone();
        materialize::ensure_unregistered(storage, &cfg, &r.catalog, ident, &into).await?;
    }
    let mut report = RecoverReport::failed(into.clone());
    let elapsed = |clock: &dyn Clock| {
        #[allow(clippy::cast_precision_loss)]
        let s = (clock.now() - t0).num_milliseconds() as f64 / 1000.0;
        s
    };
    // 1. Verify the bundle and the objects it names.
    let verified = bundle::verify(
        storage,
        bundle_uri,
        trust,
        &VerifyOptions {
            deep: true,
            table_root: None,
            shard: None,
        },
    )
    .await?;
    report.bundle_id = verified.bundle_id.clone();
    report.bundle_root = verified.bundle_root.clone();
    report.table_uuid = verified.table_uuid.clone();
    report.snapshot_id = verified.snapshot_id;
    if verified.status != RestoreStatus::RestoreVerified {
        report.findings = verified.findings;
        report.rto_seconds = elapsed(clock);
        return Ok(report);
    }
    let (pred, copies) = bundle::verified_predicate(storage, bundle_uri, trust).await?;
    same_bundle(bundle_uri, &verified, &pred)?;
    materialize::outside_table("--into", &into, &pred)?;
    let (declared_snapshot, declared_at_ms) = match &pred.backup {
        Some(b) => {
            let at = chrono::DateTime::parse_from_rfc3339(&b.declared_at)
                .map_err(|e| Error::invalid(&pred.bundle_id, format!("declared_at {:?}: {e}", b.declared_at)))?;
            report.declared_at = Some(b.declared_at.clone());
            report.checkpoint_id = Some(b.checkpoint_id.clone());
            (b.declared_snapshot_id, at.timestamp_millis())
        }
        None => (pred.snapshot_id, pred.snapshot_timestamp_ms),
    };
    report.declared_snapshot_id = Some(declared_snapshot);
    if declared_snapshot != pred.snapshot_id {
        report.findings.push(Finding::new(
            FindingKind::CheckpointMismatch,
            bundle::ENVELOPE_FILE,
            Some(format!("snapshot {declared_snapshot}")),
            Some(format!("snapshot {}", pred.snapshot_id)),
        ));
    }
    // A recovery point before the snapshot was committed: the table at that point was not this snapshot, and
    // the RPO would be negative. `backup` refuses such an `--at`; a checkpoint added by hand may still say it.
    if declared_at_ms < pred.snapshot_timestamp_ms {
        report.findings.push(Finding::new(
            FindingKind::CheckpointMismatch,
            bundle::ENVELOPE_FILE,
            Some(format!(
                "a recovery point at or after snapshot {}'s commit time {}",
                pred.snapshot_id,
                rfc3339_ms(pred.snapshot_timestamp_ms)
            )),
            Some(format!("declared at {}", rfc3339_ms(declared_at_ms))),
        ));
    }

    // 2. Copy and rewrite.
    let rebuilt = match changed_since_verified(
        materialize::rebuild(storage, &pred, &copies, &into, Identity::SameTable).await,
    )? {
        Ok(r) => r,
        Err(finding) => {
            report.findings.push(finding);
            report.rto_seconds = elapsed(clock);
            return Ok(report);
        }
    };
    report.metadata_location = Some(rebuilt.metadata_location.clone());
    report.objects_restored = rebuilt.objects_copied;
    report.bytes_restored = rebuilt.bytes_copied;
    report.position_deletes_rewritten = rebuilt.position_deletes_rewritten;

    // 3. Check the recovered table as a reader sees it.
    check_recovered(
        storage,
        config,
        &pred,
        &copies,
        &rebuilt,
        &mut report,
        Identity::SameTable,
    )
    .await?;

    // 4. Register only what verified.
    if report.findings.is_empty()
        && let (Some(r), Some(ident)) = (registration, &ident)
    {
        let cfg = config.catalog(&r.catalog)?.clone();
        materialize::register(storage, &cfg, &r.catalog, ident, &rebuilt.metadata_location, &into).await?;
        report.registered_as = Some(format!("{}.{ident}", r.catalog));
    }
    report.rto_seconds = elapsed(clock);
    #[allow(clippy::cast_precision_loss)]
    {
        report.rpo_seconds = Some(declared_at_ms.saturating_sub(pred.snapshot_timestamp_ms) as f64 / 1000.0);
    }
    report
        .findings
        .sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    if report.findings.is_empty() {
        report.status = RestoreStatus::RestoreVerified;
    }
    Ok(report)
}

#[derive(Serialize)]
struct Restored {
    status: &'static str,
    table: String,
    snapshot_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata_location: Option<String>,
    objects_copied: usize,
    bytes_copied: u64,
    position_deletes_rewritten: usize,
    rows_promised: Option<u64>,
    rows_scanned: Option<u64>,
    deletion_vectors_checked: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    scan: Option<String>,
    findings: Vec<Finding>,
}

/// `lakedrill restore BUNDLE --trust DIR --into URI --catalog NAME --table NS.TABLE`: the bundle's snapshot as a
/// new table (a new UUID), checked as [`recover`] checks what it writes before it is registered.
///
/// # Errors
/// Unsupported bundles or targets, storage and catalog errors. A bundle that does not verify is refused
/// (exit 1) and nothing is written; a copy that does not check out as the bundle's snapshot (the findings
/// `recover` reports) is `FAILED` (exit 1) and not registered.
pub async fn restore_into(
    ctx: &Context,
    bundle_uri: &str,
    trust_dir: &std::path::Path,
    into: &str,
    catalog: &str,
    table_name: &str,
) -> Result<Outcome> {
    let trust = TrustStore::load_dir(trust_dir)?;
    let into = location::canonical_uri(into)?;
    materialize::target("--into", &into)?;
    let ident: crate::io::catalog::TableIdent = table_name.parse()?;
    let cfg = ctx.config.catalog(catalog)?.clone();
    materialize::ensure_unregistered(&ctx.storage, &cfg, catalog, &ident, &into).await?;
    let report = bundle::verify(
        &ctx.storage,
        bundle_uri,
        &trust,
        &VerifyOptions {
            deep: true,
            table_root: None,
            shard: None,
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
    same_bundle(bundle_uri, &report, &pred)?;
    materialize::outside_table("--into", &into, &pred)?;
    let r = match changed_since_verified(
        materialize::rebuild(&ctx.storage, &pred, &copies, &into, Identity::NewTable).await,
    )? {
        Ok(r) => r,
        Err(finding) => {
            // As `recover` reports it: a finding (exit 1), nothing registered.
            let human = format!(
                "FAILED: the copy of snapshot {} at {into} could not be made as the bundle verified it; \
                 {catalog}.{ident} was not registered\n  {finding}\n",
                pred.snapshot_id
            );
            return Outcome::new(
                Verdict::Findings,
                &Restored {
                    status: "FAILED",
                    table: format!("{catalog}.{ident}"),
                    snapshot_id: pred.snapshot_id,
                    metadata_location: None,
                    objects_copied: 0,
                    bytes_copied: 0,
                    position_deletes_rewritten: 0,
                    rows_promised: None,
                    rows_scanned: None,
                    deletion_vectors_checked: 0,
                    scan: None,
                    findings: vec![finding],
                },
                human,
            );
        }
    };
    // What `recover` checks before it registers (the copy loaded as a reader would, layers, objects, deletion
    // vectors, a scan), reported as it reports it.
    let mut checked = RecoverReport {
        bundle_id: report.bundle_id.clone(),
        bundle_root: report.bundle_root.clone(),
        snapshot_id: Some(r.snapshot_id),
        metadata_location: Some(r.metadata_location.clone()),
        objects_restored: r.objects_copied,
        bytes_restored: r.bytes_copied,
        position_deletes_rewritten: r.position_deletes_rewritten,
        ..RecoverReport::failed(into.clone())
    };
    check_recovered(
        &ctx.storage,
        &ctx.config,
        &pred,
        &copies,
        &r,
        &mut checked,
        Identity::NewTable,
    )
    .await?;
    checked
        .findings
        .sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    let verified = checked.findings.is_empty();
    if verified {
        materialize::register(&ctx.storage, &cfg, catalog, &ident, &r.metadata_location, &into).await?;
    }
    let rows = match (checked.rows_promised, checked.rows_scanned) {
        (_, Some(n)) => format!("{n} rows scanned"),
        (Some(p), None) => format!("{p} rows promised"),
        (None, None) => "rows not counted".to_owned(),
    };
    let mut human = if verified {
        format!(
            "RESTORED snapshot {} as {catalog}.{ident} at {into}\nmetadata {}\n{} objects ({} bytes) copied and checked, {} position delete files rewritten, {} deletion vectors checked, {rows}\n",
            r.snapshot_id,
            r.metadata_location,
            r.objects_copied,
            r.bytes_copied,
            r.position_deletes_rewritten,
            checked.deletion_vectors_checked
        )
    } else {
        format!(
            "FAILED: the copy of snapshot {} at {into} does not check out; {catalog}.{ident} was not registered\n",
            r.snapshot_id
        )
    };
    for f in &checked.findings {
        human.push_str(&format!("  {f}\n"));
    }
    Outcome::new(
        if verified { Verdict::Ok } else { Verdict::Findings },
        &Restored {
            status: if verified { "RESTORED" } else { "FAILED" },
            table: format!("{catalog}.{ident}"),
            snapshot_id: r.snapshot_id,
            metadata_location: Some(r.metadata_location),
            objects_copied: r.objects_copied,
            bytes_copied: r.bytes_copied,
            position_deletes_rewritten: r.position_deletes_rewritten,
            rows_promised: checked.rows_promised,
            rows_scanned: checked.rows_scanned,
            deletion_vectors_checked: checked.deletion_vectors_checked,
            scan: checked.scan,
            findings: checked.findings,
        },
        human,
    )
}

/// What `rebuild` answered, with [`Error::Corrupt`] — an object that no longer holds the bytes the bundle verified
/// a moment before, or a layer that cannot be rewritten — turned into a `DIGEST_MISMATCH` finding naming it: a
/// finding (exit 1), as every other difference from the bundle is, not "could not decide" (exit 2). `recover` and
/// `restore --into` both read it so.
///
/// # Errors
/// Every other error of `rebuild`.
/// Whether the predicate read again for the rebuild (`pred`, its signature checked again) is of the bundle the deep
/// verification judged (`verified`): the same id, root and snapshot. Between the two reads the folder may have been
/// replaced by another bundle validly signed by the same key (an older snapshot, another backup): that one would be
/// materialized and registered with no deep verification, under the first one's report.
///
/// # Errors
/// [`Error::Corrupt`] naming the bundle and both roots (exit 2: nothing was written).
fn same_bundle(bundle_uri: &str, verified: &bundle::RestoreReport, pred: &BundlePredicate) -> Result<()> {
    if verified.bundle_root.as_deref() == Some(pred.bundle_root.as_str())
        && verified.bundle_id.as_deref() == Some(pred.bundle_id.as_str())
        && verified.snapshot_id == Some(pred.snapshot_id)
    {
        return Ok(());
    }
    Err(Error::corrupt(
        bundle_uri,
        format!(
            "the bundle changed between its verification and its read for the rebuild: verified {} (root {}, \
             snapshot {}), read {} (root {}, snapshot {}); nothing was written",
            verified.bundle_id.as_deref().unwrap_or("?"),
            verified.bundle_root.as_deref().unwrap_or("?"),
            verified.snapshot_id.map_or_else(|| "?".to_owned(), |s| s.to_string()),
            pred.bundle_id,
            pred.bundle_root,
            pred.snapshot_id
        ),
    ))
}

fn changed_since_verified(rebuilt: Result<Rebuilt>) -> Result<std::result::Result<Rebuilt, Finding>> {
    match rebuilt {
        Ok(r) => Ok(Ok(r)),
        Err(Error::Corrupt { uri, reason }) => Ok(Err(Finding::new(
            FindingKind::DigestMismatch,
            uri,
            Some("the object the bundle verified".into()),
            Some(reason),
        ))),
        Err(e) => Err(e),
    }
}

/// Epoch milliseconds as RFC 3339 (UTC, milliseconds), or the number itself when out of range.
fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// A manifest entry reduced to what a recovery must keep: everything but its path (made
/// relative), and for a rewritten position delete file, its size and `file_path` bounds.
fn normalized_entry(
    json: &str,
    relative: &str,
    rewritten: bool,
    status: ManifestStatus,
    seq: i64,
) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap_or(serde_json::Value::Null);
    v["file_path"] = serde_json::Value::String(relative.to_owned());
    if rewritten {
        if let Some(o) = v.as_object_mut() {
            o.remove("file_size_in_bytes");
        }
        for bounds in ["lower_bounds", "upper_bounds"] {
            if let Some(a) = v.get_mut(bounds).and_then(serde_json::Value::as_array_mut) {
                a.retain(|e| e["key"].as_i64() != Some(i64::from(materialize::POSITION_DELETE_FILE_PATH_ID)));
            }
        }
    }
    if let Some(r) = v.get("referenced_data_file").and_then(serde_json::Value::as_str) {
        let tail = r.rsplit('/').next().unwrap_or(r).to_owned();
        v["referenced_data_file"] = serde_json::Value::String(tail);
    }
    sort_maps(&mut v);
    serde_json::json!({"status": format!("{status:?}"), "sequence_number": seq, "data_file": v})
}

/// Sorts Iceberg's `[{key, value}]` map arrays by key (their order carries no meaning).
fn sort_maps(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Array(a) => {
            if a.iter().all(|e| e.get("key").is_some()) {
                a.sort_by(|x, y| x["key"].to_string().cmp(&y["key"].to_string()));
            }
            a.iter_mut().for_each(sort_maps);
        }
        serde_json::Value::Object(o) => o.values_mut().for_each(sort_maps),
        _ => {}
    }
}

/// The top-level keys (dotted one level into objects) whose values differ, for findings.
fn differing_keys(a: &serde_json::Value, b: &serde_json::Value) -> String {
    let (Some(x), Some(y)) = (a.as_object(), b.as_object()) else {
        return "the whole value".into();
    };
    let mut keys: BTreeSet<&String> = x.keys().collect();
    keys.extend(y.keys());
    let mut out = Vec::new();
    for k in keys {
        match (x.get(k), y.get(k)) {
            (Some(p), Some(q)) if p == q => {}
            (Some(p @ serde_json::Value::Object(_)), Some(q @ serde_json::Value::Object(_))) => {
                out.push(format!("{k}.{{{}}}", differing_keys(p, q)));
            }
            _ => out.push(k.clone()),
        }
    }
    out.join(", ")
}

/// Entries of one manifest, normalized, in file order.
fn manifest_view(
    uri: &str,
    bytes: &[u8],
    mf: &iceberg::spec::ManifestFile,
    loc: &TableLocation,
    rewritten: &BTreeSet<String>,
    fv: FormatVersion,
) -> Result<Vec<serde_json::Value>> {
    let manifest = table::parse_manifest(uri, bytes)?;
    let meta = manifest.metadata();
    let ptype = meta
        .partition_spec()
        .partition_type(meta.schema())
        .map_err(|e| Error::iceberg("partition type", e))?;
    let mut out = Vec::new();
    for e in manifest.entries() {
        // A DELETED entry names no file (seal, backup and the deep verify skip it) and may name one outside the
        // location (the table's former one): such a path is compared as written, as `rebuild` keeps it.
        let rel = match loc.relative(e.data_file().file_path()) {
            Err(Error::PathOutsideTable { .. }) if e.status() == ManifestStatus::Deleted => {
                e.data_file().file_path().to_owned()
            }
            other => other?,
        };
        let json = serialize_data_file_to_json(e.data_file().clone(), &ptype, fv)
            .map_err(|x| Error::iceberg("encode entry", x))?;
        let seq = e.sequence_number().unwrap_or(mf.sequence_number);
        out.push(normalized_entry(&json, &rel, rewritten.contains(&rel), e.status(), seq));
    }
    Ok(out)
}

/// A manifest-list entry reduced to what a recovery must keep: everything but its path (made relative) and its
/// length (the manifest is written again). The partition summaries are what a reader prunes whole manifests by: a
/// narrowed bound skips a manifest holding matching rows, so they are compared as written (field by field: null,
/// NaN, lower and upper bound bytes), and so is the key metadata.
fn list_view(mf: &iceberg::spec::ManifestFile, loc: &TableLocation) -> Result<serde_json::Value> {
    Ok(serde_json::json!({
        "path": loc.relative(&mf.manifest_path)?,
        "content": format!("{:?}", mf.content),
        "spec": mf.partition_spec_id,
        "sequence_number": mf.sequence_number,
        "min_sequence_number": mf.min_sequence_number,
        "added_snapshot_id": mf.added_snapshot_id,
        "files": [mf.added_files_count, mf.existing_files_count, mf.deleted_files_count],
        "rows": [mf.added_rows_count, mf.existing_rows_count, mf.deleted_rows_count],
        "first_row_id": mf.first_row_id,
        "partitions": mf.partitions.as_ref().map(|fields| fields
            .iter()
            .map(|f| serde_json::json!({
                "contains_null": f.contains_null,
                "contains_nan": f.contains_nan,
                "lower_bound": f.lower_bound.as_ref().map(|b| hex::encode(b.as_slice())),
                "upper_bound": f.upper_bound.as_ref().map(|b| hex::encode(b.as_slice())),
            }))
            .collect::<Vec<_>>()),
        // Empty and absent are the same to the writer (it writes no empty key metadata).
        "key_metadata": mf.key_metadata.as_ref().filter(|k| !k.is_empty()).map(hex::encode),
    }))
}

/// The finding for a manifest-list entry of the recovered table (`new`, under `new_loc`) that differs from the
/// original's (`orig`, under `old_loc`) by more than its path and length, or `None`.
///
/// # Errors
/// [`Error::PathOutsideTable`] for a manifest path outside its table's location.
fn list_entry_mismatch(
    orig: &iceberg::spec::ManifestFile,
    old_loc: &TableLocation,
    new: &iceberg::spec::ManifestFile,
    new_loc: &TableLocation,
) -> Result<Option<Finding>> {
    let la = list_view(orig, old_loc)?;
    let mut lb = list_view(new, new_loc)?;
    // Counts are optional in v1 manifest lists: the writer fills in what the original left out.
    for k in ["files", "rows"] {
        for i in 0..3 {
            if la[k][i].is_null() {
                lb[k][i] = serde_json::Value::Null;
            }
        }
    }
    Ok((la != lb).then(|| {
        Finding::new(
            FindingKind::RewriteMismatch,
            &new.manifest_path,
            Some(format!("manifest list entry: {la}")),
            Some(format!("differs in {}: {lb}", differing_keys(&la, &lb))),
        )
    }))
}

/// Checks the table [`materialize::rebuild`] wrote (module docs, step 3), adding a finding to `report` for each
/// difference from the bundle's snapshot. A copy (`identity` [`Identity::NewTable`], `restore --into`) must have
/// another table UUID and its snapshot no parent; otherwise it is the original but for paths.
#[allow(clippy::too_many_lines)]
async fn check_recovered(
    storage: &Storage,
    config: &Config,
    pred: &BundlePredicate,
    copies: &BTreeMap<String, Bytes>,
    rebuilt: &Rebuilt,
    report: &mut RecoverReport,
    identity: Identity,
) -> Result<()> {
    let md_location = &rebuilt.metadata_location;
    let mismatch = |what: &str, path: &str, expected: String, actual: String| {
        Finding::new(
            FindingKind::RewriteMismatch,
            path,
            Some(format!("{what}: {expected}")),
            Some(actual),
        )
    };
    let mut recovered = match Table::load(
        storage,
        config,
        &TableSource::Metadata {
            uri: md_location.clone(),
            table_root: None,
        },
    )
    .await
    {
        Ok(t) => t,
        Err(e) => {
            report.findings.push(Finding::new(
                FindingKind::RewriteMismatch,
                md_location,
                Some("a loadable table".into()),
                Some(e.to_string()),
            ));
            return Ok(());
        }
    };
    // A copy under a new UUID carries the original's summaries: the excesses accepted for it hold here too.
    if recovered.metadata().uuid().to_string() != pred.table_uuid.trim().to_lowercase() {
        recovered.accept_excess_of(config, &pred.table_uuid)?;
    }
    let old_loc = TableLocation::new(&pred.table_location, "memory:///unused".into(), &pred.bundle_id)?;
    let new_loc = recovered.location().clone();
    let rel_old = |p: &str| old_loc.relative(p);

    // Metadata JSON: the original with only paths and the retained history changed.
    let md_entry = pred
        .inventory
        .iter()
        .find(|e| e.layer == Layer::Metadata)
        .ok_or_else(|| Error::corrupt(&pred.bundle_id, "the inventory has no metadata"))?;
    let orig_bytes = copies
        .get(&md_entry.path)
        .ok_or_else(|| Error::corrupt(&md_entry.path, "the metadata copy is missing"))?;
    let (orig_md, _) = table::parse_metadata(&md_entry.path, orig_bytes, storage.options().max_metadata_bytes)?;
    let orig_snap = orig_md
        .snapshot_by_id(pred.snapshot_id)
        .ok_or_else(|| Error::corrupt(&pred.bundle_id, "the bundled metadata lacks its snapshot"))?;
    let new_snap = recovered.snapshot(pred.snapshot_id).ok().cloned();
    let mut a = serde_json::to_value(&orig_md).map_err(|e| Error::Internal(e.to_string()))?;
    let mut b = serde_json::to_value(recovered.metadata()).map_err(|e| Error::Internal(e.to_string()))?;
    if identity == Identity::NewTable {
        // Another table: its own UUID, compared here and then left out of the comparison below.
        if recovered.metadata().uuid() == orig_md.uuid() {
            report.findings.push(mismatch(
                "table uuid",
                md_location,
                format!("a new table UUID, not the original's {}", orig_md.uuid()),
                recovered.metadata().uuid().to_string(),
            ));
        }
        for doc in [&mut a, &mut b] {
            if let Some(o) = doc.as_object_mut() {
                o.remove("table-uuid");
            }
        }
    }
    // Properties are compared, the location ones rebased as `rebuild` rebases them (before, they were left out,
    // and a location property left pointing at the original table's folders went unseen).
    match materialize::location_properties(orig_md.properties(), &old_loc, &report.into) {
        Ok(rebased) => {
            if let Some(props) = a.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
                for (k, v) in rebased {
                    props.insert(k, serde_json::Value::String(v));
                }
            }
        }
        Err(e) => report.findings.push(mismatch(
            "properties",
            md_location,
            "location properties under the table location, rebased".into(),
            e.to_string(),
        )),
    }
    for doc in [&mut a, &mut b] {
        if let Some(o) = doc.as_object_mut() {
            for k in [
                "location",
                "snapshots",
                "refs",
                "snapshot-log",
                "metadata-log",
                "current-snapshot-id",
                "statistics",
                "partition-statistics",
            ] {
                o.remove(k);
            }
        }
    }
    for doc in [&mut a, &mut b] {
        // Held in hash maps by the iceberg crate: their order in JSON carries no meaning.
        for (k, id) in [
            ("schemas", "schema-id"),
            ("partition-specs", "spec-id"),
            ("sort-orders", "order-id"),
        ] {
            if let Some(arr) = doc.get_mut(k).and_then(serde_json::Value::as_array_mut) {
                arr.sort_by_key(|e| e[id].as_i64());
            }
        }
    }
    if a != b {
        report.findings.push(mismatch(
            "metadata",
            md_location,
            "the original's schemas, specs, sort orders, UUID and versions".into(),
            format!("differs in {}", differing_keys(&a, &b)),
        ));
    }
    match &new_snap {
        Some(s)
            if s.sequence_number() == orig_snap.sequence_number()
                && s.timestamp_ms() == orig_snap.timestamp_ms()
                && s.parent_snapshot_id()
                    == match identity {
                        Identity::SameTable => orig_snap.parent_snapshot_id(),
                        // A copy holds no history: its one snapshot has no parent.
                        Identity::NewTable => None,
                    }
                && s.summary() == orig_snap.summary()
                && s.schema_id() == orig_snap.schema_id()
                && new_loc.relative(s.manifest_list()).ok() == rel_old(orig_snap.manifest_list()).ok() => {}
        _ => report.findings.push(mismatch(
            "snapshot",
            md_location,
            format!("snapshot {} as in the original", pred.snapshot_id),
            "different or absent".into(),
        )),
    }
    if recovered.metadata().current_snapshot_id() != Some(pred.snapshot_id) {
        report.findings.push(mismatch(
            "current snapshot",
            md_location,
            pred.snapshot_id.to_string(),
            format!("{:?}", recovered.metadata().current_snapshot_id()),
        ));
    }

    // Manifest list and manifests.
    let concurrency = storage.options().io_concurrency.get();
    let tree = match crate::table::tree::read_tree(&recovered, storage, pred.snapshot_id, concurrency).await {
        Ok(t) => t,
        Err(e) => {
            report.findings.push(Finding::new(
                FindingKind::RewriteMismatch,
                md_location,
                Some("readable manifests".into()),
                Some(e.to_string()),
            ));
            return Ok(());
        }
    };
    let fv = orig_md.format_version();
    let orig_list = table::parse_manifest_list(
        orig_snap.manifest_list(),
        copies
            .get(orig_snap.manifest_list())
            .ok_or_else(|| Error::corrupt(orig_snap.manifest_list(), "the manifest list copy is missing"))?,
        fv,
    )?;
    let rewritten: BTreeSet<String> = pred
        .inventory
        .iter()
        .filter(|e| e.layer == Layer::PositionDeletes)
        .map(|e| rel_old(&e.path))
        .collect::<Result<_>>()?;
    if orig_list.entries().len() != tree.manifests.len() {
        report.findings.push(mismatch(
            "manifest list",
            &tree.manifest_list_written,
            format!("{} manifests", orig_list.entries().len()),
            format!("{} manifests", tree.manifests.len()),
        ));
    }
    for (orig, new) in orig_list.entries().iter().zip(&tree.manifests) {
        if let Some(f) = list_entry_mismatch(orig, &old_loc, &new.entry, &new_loc)? {
            report.findings.push(f);
            continue;
        }
        let orig_bytes = copies
            .get(&orig.manifest_path)
            .ok_or_else(|| Error::corrupt(&orig.manifest_path, "manifest copy missing from the bundle"))?;
        let va = manifest_view(&orig.manifest_path, orig_bytes, orig, &old_loc, &rewritten, fv)?;
        let vb = manifest_view(
            &new.entry.manifest_path,
            &new.fetched.bytes,
            &new.entry,
            &new_loc,
            &rewritten,
            fv,
        )?;
        if va != vb {
            let actual = match va.iter().zip(&vb).find(|(x, y)| x != y) {
                Some((x, y)) => format!(
                    "entry {} differs in {}",
                    x["data_file"]["file_path"].as_str().unwrap_or("?"),
                    differing_keys(x, y)
                ),
                None => format!("{} entries, the original has {}", vb.len(), va.len()),
            };
            report.findings.push(mismatch(
                "manifest",
                &new.entry.manifest_path,
                "the original's entries with rebased paths".into(),
                actual,
            ));
        }
    }

    // Data and delete objects at the new location.
    let by_rel: BTreeMap<String, &bundle::InventoryEntry> = pred
        .inventory
        .iter()
        .filter(|e| !e.layer.is_metadata())
        .map(|e| Ok((rel_old(&e.path)?, e)))
        .collect::<Result<_>>()?;
    let live = tree.live_files();
    let live_rel: BTreeSet<String> = live
        .iter()
        .map(|f| new_loc.relative(&f.file_path))
        .collect::<Result<_>>()?;
    for missing in by_rel.keys().filter(|k| !live_rel.contains(*k)) {
        report.findings.push(Finding::new(
            FindingKind::ObjectMissing,
            location::join(&report.into, missing),
            Some("a live entry of the recovered snapshot".into()),
            Some("absent".into()),
        ));
    }
    let mut seen = BTreeSet::new();
    for f in live {
        let rel = new_loc.relative(&f.file_path)?;
        if !seen.insert(rel.clone()) {
            continue;
        }
        let Some(e) = by_rel.get(&rel) else {
            report.findings.push(Finding::new(
                FindingKind::ExtraObject,
                &f.file_path,
                Some("only objects of the bundle".into()),
                Some("an entry the bundle does not hold".into()),
            ));
            continue;
        };
        if e.layer == Layer::PositionDeletes && f.file_format == "PUFFIN" {
            // A deletion vector file: the original's bytes with only the footer's referenced data files
            // rebased, and every vector sound against the recovered manifests (offsets, CRC, cardinality, the
            // new referenced_data_file).
            let new_bytes = storage.get(&f.uri).await?.bytes;
            let orig_uri = bundle::UriBinding::new(pred)
                .and_then(|b| b.check(e).map_err(|f| f.to_string()))
                .map_err(|reason| Error::corrupt(&e.path, reason))?;
            let orig_bytes = storage.get(&orig_uri).await?.bytes;
            let map = |x: &str| materialize::rebase(&old_loc, &report.into, x);
            let (want, _) = table::puffin::rebase_referenced_files(&e.path, &orig_bytes, &map)?;
            if want != new_bytes[..] {
                report.findings.push(mismatch(
                    "deletion vector file",
                    &f.file_path,
                    "the original's blobs with rebased referenced-data-file properties".into(),
                    "different bytes".into(),
                ));
            }
            let entries: Vec<table::puffin::DeletionVectorEntry> = tree
                .live_files()
                .into_iter()
                .filter(|g| g.file_path == f.file_path)
                .map(|g| table::puffin::DeletionVectorEntry {
                    referenced_data_file: g.referenced_data_file.clone(),
                    content_offset: g.content_offset,
                    content_size_in_bytes: g.content_size_in_bytes,
                    record_count: g.record_count,
                })
                .collect();
            report.deletion_vectors_checked += entries.len();
            report.findings.extend(
                table::puffin::verify_file(storage, &f.uri, &f.file_path, new_bytes.len() as u64, &entries).await?,
            );
        } else if e.layer == Layer::PositionDeletes {
            let new_bytes = storage.get(&f.uri).await?.bytes;
            let orig_uri = bundle::UriBinding::new(pred)
                .and_then(|b| b.check(e).map_err(|f| f.to_string()))
                .map_err(|reason| Error::corrupt(&e.path, reason))?;
            let orig_bytes = storage.get(&orig_uri).await?.bytes;
            let (p, nb) = (f.file_path.clone(), new_bytes);
            let (q, ob) = (e.path.clone(), orig_bytes);
            let (old2, into2) = (old_loc.clone(), report.into.clone());
            let same = tokio::task::spawn_blocking(move || -> Result<bool> {
                let new_rows = materialize::position_delete_rows(&p, nb)?;
                let orig_rows = materialize::position_delete_rows(&q, ob)?;
                let mapped: Vec<(Option<String>, Option<i64>)> = orig_rows
                    .into_iter()
                    .map(|(path, pos)| Ok((path.map(|x| materialize::rebase(&old2, &into2, &x)).transpose()?, pos)))
                    .collect::<Result<_>>()?;
                Ok(mapped == new_rows)
            })
            .await
            .map_err(|x| Error::Internal(format!("compare task: {x}")))??;
            if !same {
                report.findings.push(mismatch(
                    "position delete rows",
                    &f.file_path,
                    "the original rows with rebased paths".into(),
                    "different rows".into(),
                ));
            }
        } else {
            let h = storage.hash(&f.uri).await?;
            if h.blake3 != e.blake3 || h.bytes_read != e.size {
                report.findings.push(Finding::new(
                    FindingKind::DigestMismatch,
                    &f.file_path,
                    Some(e.blake3.clone()),
                    Some(h.blake3),
                ));
            }
        }
    }

    // A scan, deletes applied, against what the manifests promise.
    let data_rows: u64 = pred
        .inventory
        .iter()
        .filter(|e| e.layer == Layer::Data)
        .filter_map(|e| e.record_count)
        .sum();
    let pos_rows: u64 = pred
        .inventory
        .iter()
        .filter(|e| e.layer == Layer::PositionDeletes)
        .filter_map(|e| e.record_count)
        .sum();
    let has_eq = pred.inventory.iter().any(|e| e.layer == Layer::EqualityDeletes);
    report.rows_promised = (!has_eq).then(|| data_rows.saturating_sub(pos_rows));
    if report.deletion_vectors_checked > 0 {
        // The iceberg crate's reader does not apply deletion vectors yet: its scan would count deleted rows.
        // The promise stands on the vectors checked above (each bitmap's cardinality equals its entry's
        // record_count); Spark and DuckDB read such recoveries in the tests (tests/it/engines.rs).
        report.scan = Some(
            "not scanned: the iceberg crate cannot apply deletion vectors; each vector was verified instead".into(),
        );
        return Ok(());
    }
    match scan_rows(storage, md_location, pred.snapshot_id).await {
        Ok(n) => {
            report.rows_scanned = Some(n);
            if let Some(p) = report.rows_promised
                && p != n
            {
                report.findings.push(Finding::new(
                    FindingKind::ScanMismatch,
                    md_location,
                    Some(format!("{p} rows")),
                    Some(format!("{n} rows")),
                ));
            }
        }
        Err(e) => report.findings.push(Finding::new(
            FindingKind::DataUnreadable,
            md_location,
            Some("a scan of the recovered table".into()),
            Some(e.to_string()),
        )),
    }
    Ok(())
}

/// Rows of a scan of one snapshot, deletes applied, with the `iceberg` crate's reader.
async fn scan_rows(storage: &Storage, md_location: &str, snapshot_id: i64) -> Result<u64> {
    let io = materialize::file_io(storage);
    let ident = iceberg::TableIdent::from_strs(["lakedrill", "recovered"]).map_err(|e| Error::iceberg("ident", e))?;
    let t = iceberg::table::StaticTable::from_metadata_file(md_location, ident, io)
        .await
        .map_err(|e| Error::iceberg("load the recovered table", e))?;
    let scan = t
        .scan()
        .snapshot_id(snapshot_id)
        .select_all()
        .build()
        .map_err(|e| Error::iceberg("plan the scan", e))?;
    let stream = scan.to_arrow().await.map_err(|e| Error::iceberg("scan", e))?;
    stream
        .try_fold(0u64, |n, b| async move { Ok(n + b.num_rows() as u64) })
        .await
        .map_err(|e| Error::iceberg("scan", e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use iceberg::spec::{FieldSummary, ManifestContentType, ManifestFile};

    fn location(root: &str) -> TableLocation {
        TableLocation::new(root, root.to_owned(), &format!("{root}/metadata/v1.metadata.json")).unwrap()
    }

    /// Review of 2026-12-07 (R1-3): the predicate read again for the rebuild must be of the bundle the deep
    /// verification judged; another bundle signed by the same key, swapped in between, is refused naming both.
    #[test]
    fn the_bundle_read_for_the_rebuild_must_be_the_one_verified() {
        let pred = BundlePredicate {
            bundle_id: "7-a".into(),
            table_uuid: "u".into(),
            table_location: "wh/t".into(),
            snapshot_id: 7,
            snapshot_timestamp_ms: 0,
            sequence_number: 1,
            format_version: 2,
            sealed_at: String::new(),
            source_metadata_location: String::new(),
            source_metadata_blake3: String::new(),
            bundle_root: "r1".into(),
            objects: 0,
            bytes: 0,
            inventory: Vec::new(),
            inventory_member: None,
            backup: None,
            orphans: None,
        };
        let verified: bundle::RestoreReport = serde_json::from_value(serde_json::json!({
            "status": "RESTORE_VERIFIED", "bundle_id": "7-a", "table_uuid": "u", "snapshot_id": 7,
            "bundle_root": "r1", "objects_verified": 0, "bytes_verified": 0, "findings": [],
        }))
        .unwrap();
        same_bundle("file:///b/7-a", &verified, &pred).unwrap();
        for (field, value) in [
            ("bundle_root", serde_json::json!("r0")),
            ("bundle_id", serde_json::json!("6-a")),
            ("snapshot_id", serde_json::json!(6)),
        ] {
            let mut other = serde_json::to_value(&verified).unwrap();
            other[field] = value;
            let other: bundle::RestoreReport = serde_json::from_value(other).unwrap();
            let e = same_bundle("file:///b/7-a", &other, &pred).unwrap_err();
            assert!(
                matches!(e, Error::Corrupt { .. })
                    && e.to_string().contains("file:///b/7-a")
                    && e.to_string().contains("changed between"),
                "{field}: {e}"
            );
        }
    }

    /// A manifest-list entry under `root` whose one partition field ranges over `[1, upper]` (4-byte ints).
    fn entry(root: &str, upper: u8, key_metadata: Option<Vec<u8>>) -> ManifestFile {
        let summary: FieldSummary = serde_json::from_value(serde_json::json!({
            "contains_null": false,
            "contains_nan": null,
            "lower_bound": [1, 0, 0, 0],
            "upper_bound": [upper, 0, 0, 0],
        }))
        .unwrap();
        ManifestFile {
            manifest_path: format!("{root}/metadata/m0.avro"),
            manifest_length: 4_000,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 3,
            min_sequence_number: 2,
            added_snapshot_id: 7,
            added_files_count: Some(2),
            existing_files_count: Some(1),
            deleted_files_count: Some(0),
            added_rows_count: Some(20),
            existing_rows_count: Some(10),
            deleted_rows_count: Some(0),
            partitions: Some(vec![summary]),
            key_metadata,
            first_row_id: None,
        }
    }

    /// The manifest list's partition summaries are what a reader prunes whole manifests by: a rewritten list whose
    /// upper bound is narrower than the original's skips a manifest that holds matching rows. The check left them
    /// out (and the key metadata too), so such a recovery verified; it is a `REWRITE_MISMATCH` now, naming them.
    #[test]
    fn a_narrowed_partition_bound_or_dropped_key_metadata_in_the_rewritten_list_is_a_rewrite_mismatch() {
        let (old, new) = (location("s3://b/t"), location("file:///rec/t"));
        let orig = entry("s3://b/t", 9, None);
        // The same entry under the new location (and another length: the manifest was written again) matches.
        let mut same = entry("file:///rec/t", 9, None);
        same.manifest_length = 4_100;
        assert_eq!(list_entry_mismatch(&orig, &old, &same, &new).unwrap(), None);
        let narrowed = entry("file:///rec/t", 5, None);
        let f = list_entry_mismatch(&orig, &old, &narrowed, &new)
            .unwrap()
            .expect("a narrowed upper bound is found");
        assert_eq!(f.kind, FindingKind::RewriteMismatch);
        assert_eq!(f.path, "file:///rec/t/metadata/m0.avro");
        let actual = f.actual.unwrap();
        assert!(actual.starts_with("differs in partitions:"), "{actual}");
        assert!(
            actual.contains("05000000") && f.expected.unwrap().contains("09000000"),
            "{actual}"
        );
        // Key metadata dropped by the rewrite.
        let keyed = entry("s3://b/t", 9, Some(vec![1, 2, 3]));
        let f = list_entry_mismatch(&keyed, &old, &same, &new)
            .unwrap()
            .expect("dropped key metadata is found");
        assert!(f.actual.unwrap().starts_with("differs in key_metadata:"));
    }
}
