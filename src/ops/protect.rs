//! The registry commands: leases, holds, DR checkpoints, writers, their listing and ending.
//!
//! Registry changes that start covering a candidate (a lease, a hold, a checkpoint, a writer) send it to
//! `PROTECTED` when they cover it whole or its deletes may be in flight; a quarantined candidate covered in part is
//! rebased by its purge, which releases exactly the covered snapshots and objects (`protect_covered`). Part of the
//! floor of `ops`: it uses only [`crate::ops::plan`].

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::io::store::DelayPoint;
use crate::ops::context::Context;
use crate::ops::plan::*;
use crate::registry::{HoldScope, NewLease, Registry, State};
use crate::report::output::{self, Outcome, Verdict};
use crate::table::{Table, TableSource};

/// Sends every candidate of the table that `covers` says is now protected back to `PROTECTED`.
pub(crate) async fn protect_covered(
    storage: &crate::io::store::Storage,
    reg: &Registry,
    table_uuid: &str,
    why: &str,
    covers: impl Fn(&[i64], &[String]) -> bool,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let mut moved = Vec::new();
    let open = [
        State::UnreferencedEligible,
        State::Quarantined,
        State::RestoreVerified,
        State::DeleteApproved,
    ];
    let listed = reg.candidates_in(table_uuid, Some(&open)).await?;
    storage
        .failpoint_delay(crate::io::store::DelayPoint::ProtectCovered)
        .await;
    for c in listed {
        let ids: Vec<i64> = c.candidate["snapshot_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
            .unwrap_or_default();
        let paths: Vec<String> = c.objects.iter().map(|o| o.path.clone()).collect();
        // A quarantined candidate that the change covers only in part stays quarantined: its purge rebases it
        // and releases exactly what is covered (DESIGN "Rebase"). One it covers whole, a plan candidate, and a
        // candidate whose deletes may be in flight go to PROTECTED at once.
        // An orphan candidate (no snapshots) is covered whole only when every one of its files is.
        let whole = if c.candidate["kind"].as_str() == Some("orphans") {
            paths.iter().all(|p| covers(&[], std::slice::from_ref(p)))
        } else {
            ids.is_empty() || ids.iter().all(|id| covers(&[*id], &[]))
        };
        let partial_is_enough = matches!(c.state, State::Quarantined | State::RestoreVerified) && !whole;
        if covers(&ids, &paths) && !partial_is_enough {
            match reg
                .candidate_transition(&c.candidate_id, State::Protected, why, None, None, now)
                .await
            {
                Ok(_) => moved.push(c.candidate_id),
                // It moved on since it was listed (a purge deleted it, a release released it): it needs no move,
                // and the other candidates still do. The protection is recorded, and a purge's batch re-checks
                // see it. An open candidate that could not be moved is still an error.
                Err(e) => {
                    if open.contains(&reg.candidate_state(&c.candidate_id).await?) {
                        return Err(e.into());
                    }
                }
            }
        }
    }
    Ok(moved)
}

/// Sends every recorded candidate of the table that a new hold covers to `PROTECTED`; returns their ids.
///
/// # Errors
/// Registry errors.
pub async fn protect_covered_by_hold(
    storage: &crate::io::store::Storage,
    reg: &Registry,
    table: &Table,
    table_uuid: &str,
    hold_id: &str,
    scope: &HoldScope,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    // A prefix that cannot be related to the table (a decision's, stored before such prefixes were refused)
    // errs on protecting: it covers every path.
    let rel = if let HoldScope::Prefix(p) = scope {
        relative_prefix(table, p)
    } else {
        None
    };
    protect_covered(
        storage,
        reg,
        table_uuid,
        &format!("hold {hold_id}"),
        |ids, paths| match scope {
            HoldScope::Table => true,
            HoldScope::Snapshot(id) => ids.contains(id),
            HoldScope::Prefix(_) => rel
                .as_deref()
                .is_none_or(|p| paths.iter().any(|x| crate::govern::closure::under(x, p))),
        },
        now,
    )
    .await
}

/// `lakedrill lease add`.
///
/// A lease longer than the policy's `maxReaderLease` is refused (exit 1, nothing recorded): the request is well
/// formed and the policy says no, as a purge of a `report-only` table is refused.
///
/// # Errors
/// An unknown snapshot or a malformed `--expires-in` is [`Error::Invalid`] (exit 2).
pub async fn lease_add(
    ctx: &Context,
    source: &TableSource,
    policy_path: &Path,
    snapshot_id: i64,
    purpose: &str,
    owner: &str,
    expires_in: &str,
) -> Result<Outcome> {
    let policy = crate::govern::policy::load(policy_path)?;
    let table = bound_table(ctx, source, &policy).await?;
    table.snapshot(snapshot_id)?; // a lease on a snapshot that does not exist is refused
    let dur = crate::clock::parse_duration(expires_in).map_err(|why| Error::invalid("--expires-in", why))?;
    if dur > policy.max_reader_lease() {
        let max = crate::clock::format_duration(policy.max_reader_lease());
        let reason =
            format!("--expires-in {expires_in} is longer than the policy's maxReaderLease ({max}): no lease recorded");
        return Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "snapshot_id": snapshot_id, "expires_in": expires_in, "max_reader_lease": max, "reason": reason}),
            format!("REFUSED: lease on snapshot {snapshot_id}: {reason}\n"),
        );
    }
    ctx.storage.failpoint_delay(DelayPoint::Protection).await;
    let reg = registry(ctx).await?;
    let now = ctx.now();
    let uuid = table.metadata().uuid().to_string();
    let lease = reg
        .lease_add(
            &NewLease {
                table_uuid: uuid.clone(),
                snapshot_id,
                purpose: purpose.into(),
                owner: owner.into(),
                expires_at: now + dur,
            },
            now,
        )
        .await?;
    // A purge may have taken the snapshot out of the table between the read above and the lease (its catalog
    // commit checks the leases inside the registry's write lock first: a lease written before that is seen
    // there). A lease granted here would promise a snapshot no reader can open: it is released again and the
    // grant refused, before it sends any candidate to PROTECTED (the purge that removed the snapshot goes on).
    let recorded = || after_recorded(format!("lease {}", lease.lease_id));
    if left_table(ctx, source, snapshot_id).await.map_err(recorded())? {
        reg.lease_release(&lease.lease_id, ctx.now())
            .await
            .map_err(|e| recorded()(e.into()))?;
        return Err(Error::invalid(
            format!("snapshot {snapshot_id}"),
            format!(
                "does not exist in table {} any more: it left the table's metadata while lease {} was being granted \
                 (a purge or expire committed meanwhile); the lease was released",
                table.name(),
                lease.lease_id,
            ),
        ));
    }
    let protected = protect_covered(
        &ctx.storage,
        &reg,
        &uuid,
        &format!("lease {}", lease.lease_id),
        |ids, _| ids.contains(&snapshot_id),
        now,
    )
    .await
    .map_err(recorded())?;
    let human = format!(
        "lease {} on snapshot {snapshot_id} until {}\n",
        lease.lease_id,
        lease.expires_at.to_rfc3339()
    );
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"lease_id": lease.lease_id, "lease": lease, "protected_candidates": protected}),
        human,
    )
}

/// A recovery point given as `--at` for snapshot `snapshot_id` committed at `snapshot_ms`: never before that
/// commit, which would sign a negative RPO that every recovery of it then fails (`CHECKPOINT_MISMATCH`). Shared by
/// `checkpoint add` and `backup`.
///
/// # Errors
/// [`Error::Invalid`] naming `--at`: unreadable, out of range, or before the commit.
pub fn recovery_point(t: &str, snapshot_id: i64, snapshot_ms: i64) -> Result<DateTime<Utc>> {
    let ms = crate::table::resolve::parse_instant_ms("--at", t)?;
    if ms < snapshot_ms {
        return Err(Error::invalid(
            "--at",
            format!(
                "{t} is before snapshot {snapshot_id}'s commit time ({}): a recovery point cannot precede the \
                 snapshot that recovers it",
                crate::clock::commit_time(snapshot_ms)
            ),
        ));
    }
    DateTime::from_timestamp_millis(ms).ok_or_else(|| Error::invalid("--at", "out of range"))
}

/// The snapshots the registry's candidates of `table_uuid` name (those a quarantine may have taken out of the
/// metadata while their files wait for the purge).
///
/// # Errors
/// Registry errors.
pub async fn candidate_snapshots(reg: &Registry, table_uuid: &str) -> Result<BTreeSet<i64>> {
    Ok(reg
        .candidates(table_uuid)
        .await?
        .iter()
        .flat_map(|c| c.candidate["snapshot_ids"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_i64())
        .collect())
}

/// Whether a hold's scope names something of `table`: a snapshot it has or one of its candidates names
/// (`candidates`, [`candidate_snapshots`]), or a prefix under its location (one outside would hold nothing).
/// Shared by `hold set` and `decision apply`.
///
/// # Errors
/// An unknown snapshot, or a prefix that is not a folder under the table location (exit 2, naming it).
pub fn check_hold_scope(table: &Table, scope: &HoldScope, candidates: &BTreeSet<i64>) -> Result<()> {
    match scope {
        // A snapshot a bundle-mode quarantine took out of the metadata still has its files until the purge: a
        // candidate of the table that names it makes it holdable (the hold protects that candidate).
        HoldScope::Snapshot(id) if candidates.contains(id) => {}
        HoldScope::Snapshot(id) => {
            table.snapshot(*id)?;
        }
        HoldScope::Prefix(p) => {
            table.location().prefix_within(p)?;
        }
        HoldScope::Table => {}
    }
    Ok(())
}

/// `lakedrill hold set`.
///
/// # Errors
/// Registry errors; a malformed scope, an unknown snapshot, or a prefix that is not a folder under the table
/// location ([`crate::model::location::TableLocation::prefix_within`]), all exit 2.
pub async fn hold_set(ctx: &Context, source: &TableSource, scope: &str, reason: &str) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let scope: HoldScope = scope.parse()?;
    let reg = registry(ctx).await?;
    let uuid = table.metadata().uuid().to_string();
    check_hold_scope(&table, &scope, &candidate_snapshots(&reg, &uuid).await?)?;
    ctx.storage.failpoint_delay(DelayPoint::Protection).await;
    let now = ctx.now();
    let hold = reg.hold_set(&uuid, scope.clone(), reason, now).await?;
    let recorded = || after_recorded(format!("hold {}", hold.hold_id));
    let protected = protect_covered_by_hold(&ctx.storage, &reg, &table, &uuid, &hold.hold_id, &scope, now)
        .await
        .map_err(recorded())?;
    let mut human = format!(
        "hold {} ({}) at hold generation {}\n",
        hold.hold_id, hold.scope, hold.hold_generation
    );
    // A legal hold is kept even when its snapshot left the table meanwhile (a purge committed between the read
    // above and the hold): it holds the snapshot's files, and the output says the snapshot must come back from
    // its bundle to be read.
    let left = match scope {
        HoldScope::Snapshot(id) => left_table(ctx, source, id).await.map_err(recorded())?,
        _ => false,
    };
    if left {
        human.push_str(&left_warning("hold", &protected));
    }
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"hold_id": hold.hold_id, "hold_generation": hold.hold_generation, "hold": hold, "protected_candidates": protected, "snapshot_left_table": left}),
        human,
    )
}

/// `lakedrill checkpoint add`.
///
/// # Errors
/// Unknown snapshot, or an `--at` that cannot be read or precedes the snapshot's commit time (exit 2); registry
/// errors.
pub async fn checkpoint_add(
    ctx: &Context,
    source: &TableSource,
    snapshot_id: i64,
    at: Option<&str>,
) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let snap = table.snapshot(snapshot_id)?;
    let at = match at {
        Some(t) => recovery_point(t, snapshot_id, snap.timestamp_ms())?,
        None => DateTime::from_timestamp_millis(snap.timestamp_ms()).unwrap_or_default(),
    };
    ctx.storage.failpoint_delay(DelayPoint::Protection).await;
    let reg = registry(ctx).await?;
    let now = ctx.now();
    let uuid = table.metadata().uuid().to_string();
    let cp = reg.checkpoint_add(&uuid, snapshot_id, at, now).await?;
    let protected = protect_covered(
        &ctx.storage,
        &reg,
        &uuid,
        &format!("checkpoint {}", cp.checkpoint_id),
        |ids, _| ids.contains(&snapshot_id),
        now,
    )
    .await
    .map_err(after_recorded(format!("checkpoint {}", cp.checkpoint_id)))?;
    let mut human = format!(
        "checkpoint {} on snapshot {snapshot_id} at {}\n",
        cp.checkpoint_id,
        cp.at.to_rfc3339()
    );
    // As a hold: the checkpoint is kept (its snapshot's files with it) when the snapshot left the table meanwhile.
    let left = left_table(ctx, source, snapshot_id)
        .await
        .map_err(after_recorded(format!("checkpoint {}", cp.checkpoint_id)))?;
    if left {
        human.push_str(&left_warning("checkpoint", &protected));
    }
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"checkpoint_id": cp.checkpoint_id, "checkpoint": cp, "protected_candidates": protected, "snapshot_left_table": left}),
        human,
    )
}

/// `lakedrill writer begin`.
///
/// # Errors
/// A prefix that is not a folder under the table location (outside it, `..` out of it) is [`Error::Invalid`]
/// (exit 2); registry errors.
pub async fn writer_begin(ctx: &Context, source: &TableSource, prefix: &str) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    // Relative to the table location, never the current directory; outside the table it would protect nothing.
    let rel = table.location().prefix_within(prefix)?;
    let reg = registry(ctx).await?;
    let now = ctx.now();
    let uuid = table.metadata().uuid().to_string();
    let w = reg.writer_begin(&uuid, prefix, now).await?;
    // Nothing under an open writer's prefix is ever deleted: candidates with objects under it are protected
    // (in part: rebased by their purge), as by a hold on the prefix.
    let protected = protect_covered(
        &ctx.storage,
        &reg,
        &uuid,
        &format!("writer {}", w.writer_id),
        |_, paths| paths.iter().any(|p| crate::govern::closure::under(p, &rel)),
        now,
    )
    .await
    .map_err(after_recorded(format!("writer {}", w.writer_id)))?;
    let human = format!("writer {} on prefix {}\n", w.writer_id, w.prefix);
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"writer_id": w.writer_id, "writer": w, "protected_candidates": protected}),
        human,
    )
}

/// `lease|hold|writer|checkpoint list`.
///
/// # Errors
/// Registry errors.
pub async fn list(ctx: &Context, source: &TableSource, what: &str) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let reg = registry(ctx).await?;
    let uuid = table.metadata().uuid().to_string();
    let now = ctx.now();
    let (value, rows): (serde_json::Value, Vec<Vec<String>>) = match what {
        "leases" => {
            let v = reg.leases(&uuid, now).await?;
            let rows = v
                .iter()
                .map(|l| {
                    vec![
                        l.lease_id.clone(),
                        l.snapshot_id.to_string(),
                        l.owner.clone(),
                        l.purpose.clone(),
                        l.expires_at.to_rfc3339(),
                        l.active.to_string(),
                    ]
                })
                .collect();
            (serde_json::to_value(&v).unwrap_or_default(), rows)
        }
        "holds" => {
            let v = reg.holds(&uuid).await?;
            let rows = v
                .iter()
                .map(|h| {
                    vec![
                        h.hold_id.clone(),
                        h.scope.to_string(),
                        h.reason.clone(),
                        h.hold_generation.to_string(),
                        h.active.to_string(),
                    ]
                })
                .collect();
            (serde_json::to_value(&v).unwrap_or_default(), rows)
        }
        "writers" => {
            let v = reg.writers(&uuid).await?;
            let rows = v
                .iter()
                .map(|w| {
                    vec![
                        w.writer_id.clone(),
                        w.prefix.clone(),
                        w.started_at.to_rfc3339(),
                        w.open.to_string(),
                    ]
                })
                .collect();
            (serde_json::to_value(&v).unwrap_or_default(), rows)
        }
        _ => {
            let v = reg.checkpoints(&uuid).await?;
            let rows = v
                .iter()
                .map(|c| vec![c.checkpoint_id.clone(), c.snapshot_id.to_string(), c.at.to_rfc3339()])
                .collect();
            (serde_json::to_value(&v).unwrap_or_default(), rows)
        }
    };
    let headers: &[&str] = match what {
        "leases" => &["lease_id", "snapshot_id", "owner", "purpose", "expires_at", "active"],
        "holds" => &["hold_id", "scope", "reason", "hold_generation", "active"],
        "writers" => &["writer_id", "prefix", "started_at", "open"],
        _ => &["checkpoint_id", "snapshot_id", "at"],
    };
    let mut doc = serde_json::Map::new();
    doc.insert(what.to_owned(), value);
    Outcome::new(Verdict::Ok, &doc, output::table(headers, &rows))
}

/// `lease release ID`, `hold clear ID`, `writer end ID`.
///
/// # Errors
/// Unknown or already-ended ids.
pub async fn end(ctx: &Context, what: &str, id: &str) -> Result<Outcome> {
    let reg = registry(ctx).await?;
    let now = ctx.now();
    let v = match what {
        "lease" => serde_json::to_value(reg.lease_release(id, now).await?),
        "hold" => serde_json::to_value(reg.hold_clear(id, now).await?),
        _ => serde_json::to_value(reg.writer_end(id, now).await?),
    }
    .map_err(|e| Error::Internal(e.to_string()))?;
    Outcome::new(Verdict::Ok, &v, format!("{what} {id} ended\n"))
}

/// An error after a protection was written to the registry: the protection stands (named by its id), so the
/// operator who reads the error does not record it again.
#[derive(Debug, thiserror::Error)]
#[error("{what} was recorded and stands; what follows its recording failed")]
struct AfterRecorded {
    what: String,
    #[source]
    source: Error,
}

/// Maps an error after `what` (`hold h-…`) was recorded to one that says so, with the same exit code.
fn after_recorded(what: String) -> impl FnOnce(Error) -> Error {
    move |e| Error::module(e.kind(), AfterRecorded { what, source: e })
}

/// Whether `snapshot_id` is no longer in the table, read again (through its catalog) after a protection was
/// written: a purge's catalog commit that landed between a protection's first read and its registry write.
async fn left_table(ctx: &Context, source: &TableSource, snapshot_id: i64) -> Result<bool> {
    Ok(ctx
        .table(source)
        .await?
        .metadata()
        .snapshot_by_id(snapshot_id)
        .is_none())
}

/// The warning of a hold or checkpoint (`what`) kept on a snapshot that left the table while it was written, naming
/// the candidates it sent to `PROTECTED`.
fn left_warning(what: &str, protected: &[String]) -> String {
    let kept = if protected.is_empty() {
        String::new()
    } else {
        format!(
            "; candidate(s) {} are PROTECTED (their files are kept)",
            protected.join(", ")
        )
    };
    format!(
        "warning: the snapshot left the table's metadata while the {what} was being written (a purge or expire \
         committed meanwhile); the {what} keeps its files{kept}; `lakedrill set-current --from-bundle` brings it \
         back\n"
    )
}
