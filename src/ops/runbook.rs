//! The anomaly runbook: catalog commits that move a table's `main` branch back.
//!
//! * [`rollback`] — to an ancestor of the current snapshot only, like Iceberg's
//!   `rollback_to_snapshot`; a non-ancestor is refused with the reason (exit 1);
//! * [`set_current`] — to any snapshot in the metadata, or the head of a ref (restoring the
//!   default ref from a protected tag), like `set_current_snapshot`;
//! * [`set_current_from_bundle`] — to a snapshot that is gone from the metadata (bundle-mode
//!   quarantine) but whose verified bundle still describes it: the snapshot is added back from
//!   the bundle's metadata copy, after the bundle and its data verify.
//!
//! Each is one compare-and-set commit on the catalog row, visible to every engine reading the
//! catalog; a concurrent commit makes it fail without effect. None of them deletes anything. Moving `main` to the
//! snapshot it already points at commits nothing (`ALREADY_CURRENT`, exit 0): the table's generation stays.

use iceberg::spec::{SnapshotReference, SnapshotRetention};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::io::catalog::{Catalog, TableIdent};
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
    let new = md
        .into_builder(Some(table.generation().metadata_location.clone()))
        .set_ref("main", main_ref(table, to))
        .map_err(|e| Error::iceberg("set main", e))?
        .build()
        .map_err(|e| Error::iceberg("build metadata", e))?
        .metadata;
    // Row lineage (v3): row ids already handed out are never handed out again, so moving main back must not
    // lower `next-row-id` (the builder keeps it; this is the guard should that ever change).
    if new.next_row_id() < table.metadata().next_row_id() {
        return Err(Error::invalid(
            table.name(),
            format!(
                "moving main to {to} would lower next-row-id from {} to {}: row ids would be reused",
                table.metadata().next_row_id(),
                new.next_row_id()
            ),
        ));
    }
    let loc = cat
        .commit(&ctx.storage, ident, &table.generation().metadata_location, &new)
        .await?;
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
    move_main(ctx, &table, &cat, &ident, to, table.metadata().clone()).await
}

/// `lakedrill set-current (--snapshot-id N | --ref NAME)`.
///
/// # Errors
/// Selection, load and commit errors.
pub async fn set_current(ctx: &Context, source: &TableSource, selector: &Selector) -> Result<Outcome> {
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    let to = resolve::resolve(&table, selector)?;
    move_main(ctx, &table, &cat, &ident, to, table.metadata().clone()).await
}

/// `lakedrill set-current --from-bundle BUNDLE --trust DIR`: brings back a snapshot that is no
/// longer in the metadata, from a bundle that verifies (data included).
///
/// # Errors
/// Load and commit errors; a bundle that does not verify is refused (exit 1).
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
    if let Some(why) = purging_overlap(ctx, &table, bundle, &trust).await? {
        #[derive(serde::Serialize)]
        struct Refused {
            status: &'static str,
            reason: String,
        }
        return Outcome::new(
            Verdict::Findings,
            &Refused {
                status: "REFUSED",
                reason: why.clone(),
            },
            format!("REFUSED: {why}; nothing was committed\n"),
        );
    }
    let (bundled, _) = crate::table::parse_metadata(bundle, &copy, ctx.storage.options().max_metadata_bytes)?;
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
        doc["snapshots"]
            .as_array_mut()
            .ok_or_else(|| Error::Internal("metadata without a snapshots array".into()))?
            .push(snap_json);
        serde_json::from_value::<iceberg::spec::TableMetadata>(doc)
            .map_err(|e| Error::invalid(bundle, format!("snapshot {snapshot_id} cannot be added back: {e}")))?
    } else {
        table.metadata().clone()
    };
    move_main(ctx, &table, &cat, &ident, snapshot_id, md).await
}

/// Why a snapshot may not come back from `bundle` now: a candidate of the table whose purge is under way
/// (`DELETE_APPROVED`, `DELETED`, `DELETE_UNKNOWN`) deletes files the bundle's snapshot reaches. The deep verify
/// passes while they are still there, and nothing in the purge's later batches reads the table again, so the
/// snapshot would come back over files about to go. Read after the table: a purge accepted after this check commits
/// against a generation that this command's commit (a compare-and-set on the generation read) changes, and then
/// re-judges the candidate on it, which protects what the snapshot brought back reaches.
///
/// # Errors
/// Registry and bundle read errors.
async fn purging_overlap(
    ctx: &Context,
    table: &crate::table::Table,
    bundle: &str,
    trust: &crate::evidence::keys::TrustStore,
) -> Result<Option<String>> {
    use crate::registry::State;
    let reg = crate::ops::plan::registry(ctx).await?;
    let uuid = table.metadata().uuid().to_string();
    let purging = reg
        .candidates_in(
            &uuid,
            Some(&[State::DeleteApproved, State::Deleted, State::DeleteUnknown]),
        )
        .await?;
    if purging.is_empty() {
        return Ok(None);
    }
    let (pred, _) = crate::bundle::verified_predicate(&ctx.storage, bundle, trust).await?;
    let reached: std::collections::HashSet<String> = pred
        .inventory
        .iter()
        .filter_map(|e| table.location().relative(&e.path).ok())
        .collect();
    for rec in purging {
        let shared: Vec<&str> = rec
            .objects
            .iter()
            .filter(|o| reached.contains(&o.path))
            .map(|o| o.path.as_str())
            .collect();
        if !shared.is_empty() {
            return Ok(Some(format!(
                "candidate {} is being purged ({}) and deletes {} file(s) the bundle's snapshot reaches (e.g. {}): \
                 a snapshot cannot come back over files a purge is deleting (`deleter stop` halts it before its next \
                 batch; `recover` brings deleted files back from a backup)",
                rec.candidate_id,
                rec.state,
                shared.len(),
                shared[0]
            )));
        }
    }
    Ok(None)
}
