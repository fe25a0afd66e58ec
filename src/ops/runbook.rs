//! The anomaly runbook: catalog commits that move a table's `main` branch back.
//!
//! * [`rollback`] — to an ancestor of the current snapshot only, like Iceberg's
//!   `rollback_to_snapshot`; a non-ancestor is refused with the reason (exit 1);
//! * [`set_current`] — to any snapshot in the metadata, or the head of a ref (restoring the
//!   default ref from a protected tag), like `set_current_snapshot`;
//! * [`set_current_from_bundle`] — to a snapshot that is gone from the metadata (bundle-mode
//!   quarantine) but whose verified bundle still describes it: the snapshot is added back from
//!   the bundle's metadata copy, after the bundle and its data verify and every manifest list, manifest,
//!   data and delete file it reaches is found in the table as sealed (a purge that finished deleted them:
//!   refused). A cold-backup bundle is refused: `recover` is for it. Its catalog commit is made inside the
//!   registry's write lock, after judging again there the candidates whose purge could delete what the snapshot
//!   reaches (`BringBack`).
//!
//! Each is one compare-and-set commit on the catalog row (through a REST catalog, one commit with requirements;
//! a snapshot from a bundle is an `add-snapshot` there, judged by `crate::io::rest::add_snapshot_refusal`), visible
//! to every engine reading the catalog; a concurrent commit makes it fail without effect. None of them deletes anything. Moving `main` to the
//! snapshot it already points at commits nothing (`ALREADY_CURRENT`, exit 0): the table's generation stays.

use iceberg::spec::{SnapshotReference, SnapshotRetention};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::io::catalog::{Catalog, TableIdent};
use crate::io::store::DelayPoint;
use crate::model::findings::{Finding, FindingKind};
use crate::model::object::Layer;
use crate::ops::context::Context;
use crate::report::output::{Outcome, Verdict};
use crate::table::resolve::{self, Selector};
use crate::table::{Table, TableSource};

#[derive(Serialize)]
struct Moved {
    status: &'static str,
    table: String,
    from_snapshot_id: Option<i64>,
    to_snapshot_id: i64,
    metadata_location: String,
}

fn main_ref(table: &Table, id: i64) -> SnapshotReference {
    let retention = table
        .refs()
        .get("main")
        .map_or_else(|| SnapshotRetention::branch(None, None, None), |r| r.retention.clone());
    SnapshotReference::new(id, retention)
}

async fn move_main(
    ctx: &Context,
    table: &Table,
    cat: &Catalog,
    ident: &TableIdent,
    to: i64,
    md: iceberg::spec::TableMetadata,
    guard: Option<&BringBack>,
) -> Result<Outcome> {
    let from = table.metadata().current_snapshot_id();
    // Already there: a commit would only write a new metadata file, move the table's generation (every pending
    // purge would then rebase) and change nothing an engine reads. Nothing is committed.
    if from == Some(to) && table.refs().get("main").map(|r| r.snapshot_id) == Some(to) {
        let loc = table.generation().metadata_location.clone();
        return Outcome::new(
            Verdict::Ok,
            &Moved {
                status: "ALREADY_CURRENT",
                table: table.name().to_owned(),
                from_snapshot_id: from,
                to_snapshot_id: to,
                metadata_location: loc.clone(),
            },
            format!("main: {to} is already the current snapshot; nothing committed ({loc} stays current)\n"),
        );
    }
    let new = table.change_from(md).set_ref("main", main_ref(table, to))?.build()?;
    // Row lineage (v3): row ids already handed out are never handed out again, so moving main back must not
    // lower `next-row-id` (the builder keeps it; this is the guard should that ever change).
    if new.metadata().next_row_id() < table.metadata().next_row_id() {
        return Err(Error::invalid(
            table.name(),
            format!(
                "moving main to {to} would lower next-row-id from {} to {}: row ids would be reused",
                table.metadata().next_row_id(),
                new.metadata().next_row_id()
            ),
        ));
    }
    // A snapshot brought back from a bundle: the commit is made inside the registry's write lock, once nothing
    // found there can have deleted what it reaches since its files were checked (`BringBack`).
    let lock = match guard {
        Some(g) => {
            let mut lock = g.reg.commit_lock().await?;
            match g.refusal(&mut lock).await {
                Ok(None) => Some(lock),
                Ok(Some(why)) => {
                    lock.release().await?;
                    return refused(why, Vec::new());
                }
                Err(e) => {
                    lock.release().await?;
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let committed = cat
        .commit(&ctx.storage, ident, &table.generation().metadata_location, &new)
        .await;
    // The commit's own answer first: a lock that cannot be released after a commit that succeeded must not hide
    // that the table moved (the lock's session ends with its connection anyway).
    let released = match lock {
        Some(lock) => lock.release().await,
        None => Ok(()),
    };
    let loc = committed?;
    if let Err(e) = released {
        crate::report::output::warn(format!(
            "the registry's write lock could not be released after the commit (it ends with its session): {e}"
        ));
    }
    let human = format!(
        "main: {} -> {to}\ncommitted {loc}\n",
        from.map_or_else(|| "-".into(), |f| f.to_string())
    );
    Outcome::new(
        Verdict::Ok,
        &Moved {
            status: "COMMITTED",
            table: table.name().to_owned(),
            from_snapshot_id: from,
            to_snapshot_id: to,
            metadata_location: loc,
        },
        human,
    )
}

/// `lakedrill rollback --to SNAPSHOT`.
///
/// # Errors
/// Load and commit errors; a refusal (non-ancestor) is an outcome with exit 1.
pub async fn rollback(ctx: &Context, source: &TableSource, to: i64) -> Result<Outcome> {
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    table.snapshot(to)?;
    if !table.current_ancestors().contains(&to) {
        #[derive(Serialize)]
        struct Refused {
            status: &'static str,
            reason: String,
        }
        let reason = format!(
            "snapshot {to} is not an ancestor of the current snapshot {}; rollback only goes back along main's history (use set-current to jump)",
            table
                .metadata()
                .current_snapshot_id()
                .map_or_else(|| "-".into(), |c| c.to_string())
        );
        return Outcome::new(
            Verdict::Findings,
            &Refused {
                status: "REFUSED",
                reason: reason.clone(),
            },
            format!("REFUSED: {reason}\n"),
        );
    }
    move_main(ctx, &table, &cat, &ident, to, table.metadata().clone(), None).await
}

/// `lakedrill set-current (--snapshot-id N | --ref NAME)`.
///
/// # Errors
/// Selection, load and commit errors.
pub async fn set_current(ctx: &Context, source: &TableSource, selector: &Selector) -> Result<Outcome> {
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    let to = resolve::resolve(&table, selector)?;
    move_main(ctx, &table, &cat, &ident, to, table.metadata().clone(), None).await
}

/// `lakedrill set-current --from-bundle BUNDLE --trust DIR`: brings back a snapshot that is no
/// longer in the metadata, from a bundle that verifies (data included) and whose every object (but the old
/// metadata file) is still in the table as sealed.
///
/// # Errors
/// Load and commit errors; a cold-backup bundle or another table's bundle (exit 2). A bundle that does not verify,
/// a purge under way over its files (or a candidate sharing them written while the files were checked), or an
/// object of its snapshot missing from the table or changed there is refused (exit 1), naming the objects; nothing
/// is committed.
pub async fn set_current_from_bundle(
    ctx: &Context,
    source: &TableSource,
    bundle: &str,
    trust: &std::path::Path,
) -> Result<Outcome> {
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    let trust = crate::evidence::keys::TrustStore::load_dir(trust)?;
    let report = crate::bundle::verify(
        &ctx.storage,
        bundle,
        &trust,
        &crate::bundle::VerifyOptions {
            deep: true,
            table_root: None,
            shard: None,
        },
    )
    .await?;
    if report.status != crate::bundle::RestoreStatus::RestoreVerified {
        let mut human = "REFUSED: the bundle does not verify; nothing was committed\n".to_owned();
        for f in &report.findings {
            human.push_str(&format!("  {f}\n"));
        }
        return Outcome::new(Verdict::Findings, &report, human);
    }
    let (snapshot_id, copy) = crate::bundle::verified_metadata_copy(&ctx.storage, bundle, &trust).await?;
    if report.table_uuid.as_deref() != Some(table.metadata().uuid().to_string().as_str()) {
        return Err(Error::invalid(
            bundle,
            "the bundle belongs to another table (its table UUID differs)",
        ));
    }
    // Held without its metadata copies (the deep verify checked them): the inventory is what is compared below.
    let (pred, _, _) = crate::bundle::verified_predicate_keeping(&ctx.storage, bundle, &trust, |_| Ok(None)).await?;
    // The three reads are of one bundle: a bundle folder sealed again in between (by another trusted key) must not
    // have its inventory checked and its snapshot committed on the strength of the first one's deep verify. The
    // metadata copy must be the one this root's inventory names.
    let copy_of_this_root = pred
        .inventory
        .iter()
        .find(|e| e.layer == Layer::Metadata)
        .is_some_and(|e| blake3::hash(&copy).to_hex().as_str() == e.blake3);
    if report.bundle_root.as_deref() != Some(pred.bundle_root.as_str())
        || pred.snapshot_id != snapshot_id
        || !copy_of_this_root
    {
        return Err(Error::invalid(
            bundle,
            format!(
                "changed while it was read: its deep verification was of bundle root {} (snapshot {}), it now holds \
                 root {} (snapshot {}); nothing was committed, run it again",
                report.bundle_root.as_deref().unwrap_or("none"),
                report.snapshot_id.map_or_else(|| "none".to_owned(), |s| s.to_string()),
                pred.bundle_root,
                pred.snapshot_id
            ),
        ));
    }
    if let Some(b) = &pred.backup {
        // Its deep verify read the data in the backup store, not in the table: `recover` makes a table of it.
        return Err(Error::invalid(
            bundle,
            format!(
                "a cold-backup bundle (checkpoint {}, objects in {}) cannot make a snapshot current in the live \
                 table: `recover` brings a backup back as a table",
                b.checkpoint_id, b.backup_root
            ),
        ));
    }
    // The registry as it is before the files are checked: what a purge does after this read, the check inside
    // the commit's lock sees (`BringBack::refusal`).
    let guard = BringBack::read(ctx, &table, &pred).await?;
    if let Some(why) = guard.purging.clone() {
        return refused(why, Vec::new());
    }
    let findings = not_in_table(ctx, &table, &pred).await?;
    if !findings.is_empty() {
        let why = format!(
            "{} object(s) snapshot {snapshot_id} reaches are not in the table as the bundle sealed them (a purge \
             deleted them, or they changed): the snapshot would point at them (`recover` brings deleted files back \
             from a backup)",
            findings.len()
        );
        return refused(why, findings);
    }
    let (bundled, _) = crate::table::parse_metadata(bundle, &copy, ctx.storage.options().max_metadata_bytes)?;
    if let Some(why) = undefined_in_table(ctx, &table, &bundled, snapshot_id).await? {
        return Err(Error::invalid(bundle, why));
    }
    ctx.storage.failpoint_delay(DelayPoint::SetCurrentCommit).await;
    let md = if table.metadata().snapshot_by_id(snapshot_id).is_none() {
        // The metadata builder only adds *new* snapshots (sequence number above the table's last); a
        // snapshot coming back from a bundle keeps its original sequence number, which the spec allows
        // (last-sequence-number stays the maximum). So it is re-inserted into the metadata document.
        let mut doc =
            serde_json::to_value(table.metadata()).map_err(|e| Error::Internal(format!("encode metadata: {e}")))?;
        let bundled_doc =
            serde_json::to_value(&bundled).map_err(|e| Error::Internal(format!("encode bundled metadata: {e}")))?;
        let snap_json = bundled_doc["snapshots"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["snapshot-id"].as_i64() == Some(snapshot_id)))
            .cloned()
            .ok_or_else(|| Error::corrupt(bundle, format!("the bundled metadata lacks snapshot {snapshot_id}")))?;
        // A table without snapshots (a `REPLACE TABLE` whose old snapshots all expired) is written without the
        // array: the snapshot brought back is its first.
        match doc.get_mut("snapshots").and_then(serde_json::Value::as_array_mut) {
            Some(snapshots) => snapshots.push(snap_json),
            None => doc["snapshots"] = serde_json::Value::Array(vec![snap_json]),
        }
        serde_json::from_value::<iceberg::spec::TableMetadata>(doc)
            .map_err(|e| Error::invalid(bundle, format!("snapshot {snapshot_id} cannot be added back: {e}")))?
    } else {
        table.metadata().clone()
    };
    move_main(ctx, &table, &cat, &ident, snapshot_id, md, Some(&guard)).await
}

/// Why the bundle's snapshot cannot be read in the table as its metadata is now, if it cannot: its schema, or the
/// partition spec of a manifest its manifest list (the table's copy, checked against the bundle's) names, is not in
/// the table's metadata with the definition the snapshot was written with (removed since, as an expiry cleaning
/// unused metadata does, or another). The snapshot added back would point at definitions no reader finds.
///
/// # Errors
/// The manifest list cannot be read.
async fn undefined_in_table(
    ctx: &Context,
    table: &Table,
    bundled: &iceberg::spec::TableMetadata,
    snapshot_id: i64,
) -> Result<Option<String>> {
    let Some(snap) = bundled.snapshot_by_id(snapshot_id) else {
        return Ok(Some(format!("the bundled metadata lacks snapshot {snapshot_id}")));
    };
    let now = table.metadata();
    if let Some(id) = snap.schema_id() {
        let same = match (now.schema_by_id(id), bundled.schema_by_id(id)) {
            (Some(a), Some(b)) => a.as_struct() == b.as_struct(),
            _ => false,
        };
        if !same {
            return Ok(Some(format!(
                "snapshot {snapshot_id} was written with schema {id}, which the table's metadata no longer holds as \
                 the bundle has it: the snapshot cannot come back into the table; nothing was committed \
                 (`restore --into` brings it back as a new table)"
            )));
        }
    }
    let (_, _, list) = table.read_manifest_list(&ctx.storage, snap).await?;
    let mut specs: Vec<i32> = list.entries().iter().map(|m| m.partition_spec_id).collect();
    specs.sort_unstable();
    specs.dedup();
    for id in specs {
        let same = match (now.partition_spec_by_id(id), bundled.partition_spec_by_id(id)) {
            (Some(a), Some(b)) => a.fields() == b.fields(),
            _ => false,
        };
        if !same {
            return Ok(Some(format!(
                "a manifest of snapshot {snapshot_id} was written with partition spec {id}, which the table's \
                 metadata no longer holds as the bundle has it: the snapshot cannot come back into the table; \
                 nothing was committed (`restore --into` brings it back as a new table)"
            )));
        }
    }
    Ok(None)
}

/// `set-current --from-bundle` refused, nothing committed (exit 1), with the reason and the objects it names.
fn refused(reason: String, findings: Vec<Finding>) -> Result<Outcome> {
    #[derive(serde::Serialize)]
    struct Refused {
        status: &'static str,
        reason: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        findings: Vec<Finding>,
    }
    let mut human = format!("REFUSED: {reason}; nothing was committed\n");
    for f in &findings {
        human.push_str(&format!("  {f}\n"));
    }
    Outcome::new(
        Verdict::Findings,
        &Refused {
            status: "REFUSED",
            reason,
            findings,
        },
        human,
    )
}

/// What `set-current --from-bundle` read of the registry before it checked the table's files, to judge again
/// inside the registry's write lock right before its catalog commit.
///
/// A candidate of the table whose purge is under way (`DELETE_APPROVED`, `DELETED`, `DELETE_UNKNOWN`) and that
/// deletes files the bundle's snapshot reaches refuses the command: the deep verify and the file check pass while
/// those files are still there, and nothing in the purge's later batches reads the table again. That is judged
/// once before the files are checked ([`BringBack::purging`]) and again inside the lock of the commit
/// ([`BringBack::refusal`]), where a candidate sharing files that was written since the first read (accepted,
/// purged, sent back) refuses it too: its purge may have deleted files after the check found them. A purge that
/// had finished (`VERIFIED`) before the first read is left to the file check, which saw what it deleted. A purge
/// accepted after the lock is let go reads the table after the commit (its acceptance is a registry write too,
/// behind the lock) and finds the snapshot back in it: its catalog-commit step re-judges the candidate on the new
/// generation, keeping what the snapshot reaches (DESIGN "Nothing brings a snapshot back over files being
/// deleted").
struct BringBack {
    reg: crate::registry::Registry,
    uuid: String,
    /// The paths (relative to the table location) of the objects the snapshot reaches.
    reached: std::collections::HashSet<String>,
    /// Each candidate of the table as first read: (state, `updated_at`).
    seen: std::collections::HashMap<String, crate::registry::CandidateVersion>,
    /// Why the command is refused at once (a purge under way over the snapshot's files), if it is.
    purging: Option<String>,
}

impl BringBack {
    /// Reads the table's candidates (their versions first) and judges the purges under way.
    ///
    /// # Errors
    /// Registry errors.
    async fn read(
        ctx: &Context,
        table: &crate::table::Table,
        pred: &crate::evidence::inventory::BundlePredicate,
    ) -> Result<Self> {
        use crate::registry::State;
        let reg = crate::ops::plan::registry(ctx).await?;
        let uuid = table.metadata().uuid().to_string();
        let seen = reg
            .candidate_versions(&uuid)
            .await?
            .into_iter()
            .map(|v| (v.candidate_id.clone(), v))
            .collect();
        let reached = pred
            .inventory
            .iter()
            .filter_map(|e| table.location().relative(&e.path).ok())
            .collect();
        let mut me = Self {
            reg,
            uuid,
            reached,
            seen,
            purging: None,
        };
        let purging = me
            .reg
            .candidates_in(
                &me.uuid,
                Some(&[State::DeleteApproved, State::Deleted, State::DeleteUnknown]),
            )
            .await?;
        for rec in purging {
            if let Some(why) = me.shared(&rec, None) {
                me.purging = Some(why);
                break;
            }
        }
        Ok(me)
    }

    /// Why `rec` refuses the command, when it holds files the snapshot reaches: its purge is under way, or
    /// (`moved_from`) it was written since the first read.
    fn shared(
        &self,
        rec: &crate::registry::CandidateRecord,
        moved_from: Option<Option<crate::registry::State>>,
    ) -> Option<String> {
        let shared: Vec<&str> = rec
            .objects
            .iter()
            .filter(|o| self.reached.contains(&o.path))
            .map(|o| o.path.as_str())
            .collect();
        let first = shared.first()?;
        Some(match moved_from {
            None => format!(
                "candidate {} is being purged ({}) and deletes {} file(s) the bundle's snapshot reaches (e.g. \
                 {first}): a snapshot cannot come back over files a purge is deleting (`deleter stop` halts it before \
                 its next batch; `recover` brings deleted files back from a backup)",
                rec.candidate_id,
                rec.state,
                shared.len(),
            ),
            Some(from) => format!(
                "candidate {} changed ({} -> {}) while set-current checked the table's files, and it holds {} file(s) \
                 the bundle's snapshot reaches (e.g. {first}): a purge of it may have deleted them after they were \
                 found; run set-current again to check them anew",
                rec.candidate_id,
                from.map_or_else(|| "not recorded".to_owned(), |s| s.to_string()),
                rec.state,
                shared.len(),
            ),
        })
    }

    /// Why the catalog commit may not be made, judged inside the registry's write lock: a candidate sharing files
    /// with the snapshot whose purge is under way, or that was written since [`BringBack::read`].
    ///
    /// # Errors
    /// Registry errors.
    async fn refusal(&self, lock: &mut crate::registry::CommitLock) -> Result<Option<String>> {
        use crate::registry::State;
        for now in lock.candidate_versions(&self.uuid).await? {
            let before = self.seen.get(&now.candidate_id);
            let purging = matches!(now.state, State::DeleteApproved | State::Deleted | State::DeleteUnknown);
            let moved = before != Some(&now);
            if !purging && !moved {
                continue;
            }
            let rec = lock.candidate(&now.candidate_id).await?;
            let from = if moved { Some(before.map(|b| b.state)) } else { None };
            if let Some(why) = self.shared(&rec, from) {
                return Ok(Some(why));
            }
        }
        Ok(None)
    }
}

/// The objects the bundle's snapshot reaches that the table does not hold as the bundle sealed them, as findings
/// naming each: absent at the table root, another size than the inventory's, or (a manifest list or manifest)
/// other bytes than the bundle's copy. The deep verify checked the bundle's copies of the metadata layers, not the
/// table's files, and a purge that finished (`VERIFIED`) has deleted the manifest list, manifests and files its
/// candidate held: the snapshot added back would point at them. The table metadata file the bundle was sealed
/// from is not looked for: the snapshot comes back from the bundle's copy of it and nothing the commit writes
/// names that file (Iceberg itself removes old metadata files, `write.metadata.previous-versions-max`).
///
/// # Errors
/// Storage errors other than absence.
async fn not_in_table(
    ctx: &Context,
    table: &crate::table::Table,
    pred: &crate::evidence::inventory::BundlePredicate,
) -> Result<Vec<Finding>> {
    use futures::{StreamExt as _, TryStreamExt as _};
    let storage = &ctx.storage;
    let checks = pred
        .inventory
        .iter()
        .filter(|e| e.layer != Layer::Metadata)
        .map(|e| async move {
            let uri = match table.location().resolve(&e.path) {
                Ok(uri) => uri,
                Err(_) => {
                    return Ok(Some(Finding::new(
                        FindingKind::PathOutsideTable,
                        &e.path,
                        Some(table.location().written().to_owned()),
                        Some("outside; not opened".into()),
                    )));
                }
            };
            // (size, BLAKE3 of a metadata layer) as the table holds it now.
            let found = if e.layer.is_metadata() {
                match storage.hash(&uri).await {
                    Ok(h) => Some((h.bytes_read, Some(h.blake3))),
                    Err(Error::NotFound { .. }) => None,
                    Err(err) => return Err(err),
                }
            } else {
                storage.head(&uri).await?.map(|i| (i.size, None))
            };
            let finding = match found {
                None => Finding::new(
                    FindingKind::ObjectMissing,
                    &e.path,
                    Some(format!("{} bytes", e.size)),
                    Some("absent".into()),
                ),
                Some((size, _)) if size != e.size => Finding::new(
                    FindingKind::SizeMismatch,
                    &e.path,
                    Some(e.size.to_string()),
                    Some(size.to_string()),
                ),
                Some((_, Some(d))) if d != e.blake3 => Finding::new(
                    FindingKind::DigestMismatch,
                    &e.path,
                    Some(format!("{} (the bundle's copy)", e.blake3)),
                    Some(d),
                ),
                Some(_) => return Ok(None),
            };
            Ok(Some(finding.read_at(&uri)))
        });
    let mut findings: Vec<Finding> = futures::stream::iter(checks)
        .buffer_unordered(storage.options().io_concurrency.get())
        .try_filter_map(|f| async move { Ok(f) })
        .try_collect()
        .await?;
    findings.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    Ok(findings)
}
