//! Retention governance: the registry commands, `plan`, `status` and `quarantine`.
//!
//! Everything here is computed from one fixed table generation plus the registry and the policy:
//! [`plan`] is report-only and changes nothing; [`quarantine`] seals a bundle for every snapshot of a
//! candidate and then makes exactly one catalog commit, refusing when the table, the refs, the
//! leases or the holds changed since the plan. Registry changes that start covering a candidate
//! (a lease, a hold, a checkpoint) send it to `PROTECTED`, also while it is quarantined.
//!
//! This module deletes nothing; deletion belongs to [`crate::ops::deleter`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{DateTime, Utc};
use iceberg::spec::{SnapshotReference, SnapshotRetention};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::govern::closure::{
    self, HoldScope as PlanHold, ListedObject, PlanInput, Protections, RefInfo, SnapshotInfo, TableDefaults,
};
use crate::govern::policy::Policy;
use crate::model::location;
use crate::ops::context::Context;
use crate::registry::{HoldScope, NewLease, Registry, State, WorldStamp};
use crate::report::output::{self, Outcome, Verdict};
use crate::table::{Table, TableSource};

/// Prefix of the tags quarantine pins snapshots with.
pub const QUARANTINE_TAG_PREFIX: &str = "quarantine/";

/// The registry named in the configuration (`[registry] uri`, default `sqlite:lakedrill-registry.db`),
/// opened once per context and closed by [`Context::close`] (see [`Context::registry`]).
///
/// # Errors
/// Registry open errors.
pub async fn registry(ctx: &Context) -> Result<Registry> {
    ctx.registry().await
}

/// The name a policy's `table` binding is compared with.
#[must_use]
pub fn policy_name(table: &Table) -> String {
    if table.name().contains("://") {
        location::file_name(table.location().root_uri()).to_owned()
    } else {
        table.name().to_owned()
    }
}

/// Loads a table and checks it against the policy's binding.
///
/// # Errors
/// Load errors; [`Error::Module`] (a policy error) when the policy is bound to another table.
pub async fn bound_table(ctx: &Context, source: &TableSource, policy: &Policy) -> Result<Table> {
    let table = ctx.table(source).await?;
    policy.check_table(&policy_name(&table), &table.metadata().uuid())?;
    Ok(table)
}

/// BLAKE3 over the canonical sorted list of (ref name, type, snapshot id, retention) of all refs, plus the
/// policy's protected refs. Refs starting with `exclude_prefix` (a candidate's own quarantine tags) are left out.
#[must_use]
pub fn protected_ref_root(table: &Table, protected: &[String], exclude_prefix: Option<&str>) -> String {
    let mut lines = Vec::new();
    for (name, r) in table.refs() {
        if exclude_prefix.is_some_and(|p| name.starts_with(p)) {
            continue;
        }
        let retention = serde_json::to_value(&r.retention).unwrap_or_default();
        lines.push(serde_json::json!(["ref", name, r.snapshot_id, retention]).to_string());
    }
    let mut p: Vec<&String> = protected.iter().collect();
    p.sort();
    for name in p {
        lines.push(serde_json::json!(["protected", name]).to_string());
    }
    lines.sort();
    blake3::hash(lines.join("\n").as_bytes()).to_hex().to_string()
}

/// A path given by an operator (relative, or absolute under the table) as a path relative to the table location.
#[must_use]
pub fn relative_prefix(table: &Table, p: &str) -> String {
    table
        .location()
        .relative(p)
        .or_else(|_| {
            let root = table.location().root_uri();
            location::canonical_uri(p)
                .ok()
                .and_then(|u| u.strip_prefix(root).map(|r| r.trim_start_matches('/').to_owned()))
                .ok_or(())
        })
        .unwrap_or_else(|()| p.trim_matches('/').to_owned())
}

/// Reads every snapshot's layers and the registry's protections into a [`PlanInput`].
///
/// # Errors
/// Storage and registry errors; unreadable layers of a snapshot are not errors (they are `None`).
pub async fn gather(
    ctx: &Context,
    table: &Table,
    policy: &Policy,
    reg: &Registry,
    now: DateTime<Utc>,
    exclude_tags_of: Option<&str>,
) -> Result<PlanInput> {
    let uuid = table.metadata().uuid().to_string();
    let concurrency = ctx.storage.options().io_concurrency.get();
    // Every manifest list and every distinct manifest read once; each manifest's objects shared by every
    // snapshot that lists it (see `SnapshotObjects`).
    let walked = crate::table::scan::history_explained(table, &ctx.storage, concurrency).await?;
    let mut unreadable = BTreeMap::new();
    let snapshots = table
        .snapshots_sorted()
        .into_iter()
        .zip(walked)
        .map(|(s, (_, objects))| SnapshotInfo {
            snapshot_id: s.snapshot_id(),
            parent_id: s.parent_snapshot_id(),
            timestamp_ms: s.timestamp_ms(),
            objects: match objects {
                Ok(o) => Some(o),
                Err(why) => {
                    unreadable.insert(s.snapshot_id(), why);
                    None
                }
            },
        })
        .collect();
    let refs = table
        .refs()
        .iter()
        .filter(|(name, _)| !exclude_tags_of.is_some_and(|p| name.starts_with(p)))
        .map(|(name, r)| match &r.retention {
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                max_ref_age_ms,
            } => RefInfo {
                name: name.clone(),
                snapshot_id: r.snapshot_id,
                is_branch: true,
                max_ref_age_ms: *max_ref_age_ms,
                max_snapshot_age_ms: *max_snapshot_age_ms,
                min_snapshots_to_keep: *min_snapshots_to_keep,
            },
            SnapshotRetention::Tag { max_ref_age_ms } => RefInfo {
                name: name.clone(),
                snapshot_id: r.snapshot_id,
                is_branch: false,
                max_ref_age_ms: *max_ref_age_ms,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            },
        })
        .collect();
    let props = table.metadata().properties();
    let prop = |k: &str| props.get(k).and_then(|v| v.parse::<i64>().ok());
    let defaults = TableDefaults {
        max_snapshot_age_ms: prop("history.expire.max-snapshot-age-ms")
            .unwrap_or(TableDefaults::default().max_snapshot_age_ms),
        min_snapshots_to_keep: prop("history.expire.min-snapshots-to-keep")
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(1),
        max_ref_age_ms: prop("history.expire.max-ref-age-ms"),
    };
    let mut live_metadata_files = BTreeSet::new();
    if let Ok(r) = table.location().relative(&table.generation().metadata_location) {
        live_metadata_files.insert(r);
    } else if let Some(r) = table.metadata_uri().strip_prefix(table.location().root_uri()) {
        live_metadata_files.insert(r.trim_start_matches('/').to_owned());
    }
    for m in table.metadata().metadata_log() {
        if let Ok(r) = table.location().relative(&m.metadata_file) {
            live_metadata_files.insert(r);
        }
    }
    let root = table.location().root_uri().to_owned();
    let listing = ctx
        .storage
        .list(&root)
        .await?
        .into_iter()
        .filter_map(|o| {
            let rel = o.uri.strip_prefix(&root)?.trim_start_matches('/').to_owned();
            Some(ListedObject {
                path: rel,
                size: o.size,
                last_modified_ms: o.last_modified.timestamp_millis(),
            })
        })
        .collect::<Vec<_>>();
    // A widened `location` would list lakedrill's own state and other tables as orphans.
    crate::ops::containment::check(&ctx.config, table, &listing).await?;
    let mut protections = Protections {
        protected_refs: policy.protected_refs().to_vec(),
        ..Protections::default()
    };
    for l in reg.leases(&uuid, now).await?.into_iter().filter(|l| l.active) {
        protections.leases.push((l.snapshot_id, l.lease_id));
    }
    for c in reg.checkpoints(&uuid).await? {
        protections.checkpoints.push((c.snapshot_id, c.checkpoint_id));
    }
    for p in policy.dr_points() {
        protections
            .checkpoints
            .push((p.snapshot_id(), "policy-dr-point".into()));
    }
    for h in reg.holds(&uuid).await?.into_iter().filter(|h| h.active) {
        let scope = match &h.scope {
            HoldScope::Table => PlanHold::Table,
            HoldScope::Snapshot(id) => PlanHold::Snapshot(*id),
            HoldScope::Prefix(p) => PlanHold::Prefix(relative_prefix(table, p)),
        };
        protections.holds.push((h.hold_id, scope));
    }
    for w in reg.writers(&uuid).await?.into_iter().filter(|w| w.open) {
        protections
            .writers
            .push((w.writer_id, relative_prefix(table, &w.prefix)));
    }
    protections.deletion_rights = crate::ops::decision::deletion_rights(table, reg).await?;
    Ok(PlanInput {
        table_uuid: uuid,
        generation_blake3: table.generation().metadata_blake3.clone(),
        snapshots,
        refs,
        current_snapshot_id: table.metadata().current_snapshot_id(),
        defaults,
        live_metadata_files,
        unreadable,
        listing: Some(listing),
        protections,
        min_snapshot_age_ms: policy.min_snapshot_age().num_milliseconds(),
        orphan_safety_interval_ms: policy.orphan_safety_interval().num_milliseconds(),
        now_ms: now.timestamp_millis(),
    })
}

/// Refuses a plan in which a retained snapshot's layers could not be read: what it reaches is unknown, so
/// lakedrill cannot decide what is unreachable (`seal` refuses an unreadable snapshot the same way).
///
/// # Errors
/// [`Error::Corrupt`] naming the table's metadata, each such snapshot and the object that could not be read.
pub fn refuse_unreadable_retained(table: &Table, input: &PlanInput, plan: &closure::Plan) -> Result<()> {
    let unreadable = closure::unreadable_retained(input, plan);
    if unreadable.is_empty() {
        return Ok(());
    }
    Err(Error::corrupt(
        table.metadata_uri(),
        format!(
            "cannot decide: the layers of {} retained snapshot(s) could not be read, so nothing can be shown unreachable: {}",
            unreadable.len(),
            unreadable.join("; ")
        ),
    ))
}

/// The world stamp of a table generation (what the deleter's compare-and-set checks).
///
/// # Errors
/// Registry errors.
pub async fn world_stamp(
    table: &Table,
    policy: &Policy,
    reg: &Registry,
    exclude_tags: Option<&str>,
) -> Result<WorldStamp> {
    let uuid = table.metadata().uuid().to_string();
    Ok(WorldStamp {
        metadata_location: table.generation().metadata_location.clone(),
        metadata_blake3: table.generation().metadata_blake3.clone(),
        protected_ref_root: protected_ref_root(table, policy.protected_refs(), exclude_tags),
        lease_watermark: reg.lease_watermark(&uuid).await?.counter,
        hold_generation: reg.hold_generation(&uuid).await?,
    })
}

#[derive(Serialize)]
struct PlanDoc {
    table: String,
    table_uuid: String,
    table_generation: crate::table::TableGeneration,
    protected_ref_root: String,
    lease_watermark: i64,
    hold_generation: i64,
    policy_digest: String,
    #[serde(flatten)]
    plan: closure::Plan,
}

/// `lakedrill plan --policy FILE`: report-only.
///
/// # Errors
/// Load, policy, registry and storage errors.
pub async fn plan(ctx: &Context, source: &TableSource, policy_path: &Path) -> Result<Outcome> {
    let policy = crate::govern::policy::load(policy_path)?;
    let table = bound_table(ctx, source, &policy).await?;
    let reg = registry(ctx).await?;
    let now = Utc::now();
    let input = gather(ctx, &table, &policy, &reg, now, None).await?;
    let p = ctx.hooks.planned(&input, closure::plan(&input));
    refuse_unreadable_retained(&table, &input, &p)?;
    let stamp = world_stamp(&table, &policy, &reg, None).await?;
    let mut human = format!(
        "table {} (uuid {}) at generation {}\nprotected-ref root {}  lease watermark {}  hold generation {}\n\nprotected snapshots:\n",
        table.name(),
        table.metadata().uuid(),
        table.generation().metadata_location,
        stamp.protected_ref_root,
        stamp.lease_watermark,
        stamp.hold_generation
    );
    for x in &p.protected {
        human.push_str(&format!("  {}  {}\n", x.snapshot_id, x.reasons.join(", ")));
    }
    human.push_str("\ncandidates:\n");
    if p.candidates.is_empty() {
        human.push_str("  (none)\n");
    }
    for c in &p.candidates {
        human.push_str(&format!(
            "  {} ({}) snapshots {:?}: {} objects, {} bytes, inventory root {}\n",
            c.candidate_id,
            c.kind,
            c.snapshot_ids,
            c.objects.len(),
            c.bytes,
            c.inventory_root
        ));
    }
    human.push_str(&format!(
        "\nplain expire_snapshots (older than minSnapshotAge) would remove snapshots {:?} and {} objects\n",
        p.plain_expire.snapshot_ids,
        p.plain_expire.objects.len()
    ));
    for d in &p.differences {
        human.push_str(&format!(
            "  kept by lakedrill: {} — {}\n",
            d.subject,
            d.reasons.join(", ")
        ));
    }
    for w in &p.warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    let doc = PlanDoc {
        table: table.name().to_owned(),
        table_uuid: table.metadata().uuid().to_string(),
        table_generation: table.generation().clone(),
        protected_ref_root: stamp.protected_ref_root,
        lease_watermark: stamp.lease_watermark,
        hold_generation: stamp.hold_generation,
        policy_digest: policy.digest().to_owned(),
        plan: p,
    };
    Outcome::new(Verdict::Ok, &doc, human)
}

/// Sends every candidate of the table that `covers` says is now protected back to `PROTECTED`.
pub(crate) async fn protect_covered(
    reg: &Registry,
    table_uuid: &str,
    why: &str,
    covers: impl Fn(&[i64], &[String]) -> bool,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let mut moved = Vec::new();
    for c in reg.candidates(table_uuid).await? {
        if !matches!(
            c.state,
            State::UnreferencedEligible | State::Quarantined | State::RestoreVerified | State::DeleteApproved
        ) {
            continue;
        }
        let ids: Vec<i64> = c.candidate["snapshot_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
            .unwrap_or_default();
        let paths: Vec<String> = c.candidate["objects"]
            .as_array()
            .map(|a| a.iter().filter_map(|o| o["path"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        if covers(&ids, &paths) {
            reg.candidate_transition(&c.candidate_id, State::Protected, why, None, None, now)
                .await?;
            moved.push(c.candidate_id);
        }
    }
    Ok(moved)
}

/// Sends every recorded candidate of the table that a new hold covers to `PROTECTED`; returns their ids.
///
/// # Errors
/// Registry errors.
pub async fn protect_covered_by_hold(
    reg: &Registry,
    table: &Table,
    table_uuid: &str,
    hold_id: &str,
    scope: &HoldScope,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let rel = if let HoldScope::Prefix(p) = scope {
        Some(relative_prefix(table, p))
    } else {
        None
    };
    protect_covered(
        reg,
        table_uuid,
        &format!("hold {hold_id}"),
        |ids, paths| match scope {
            HoldScope::Table => true,
            HoldScope::Snapshot(id) => ids.contains(id),
            HoldScope::Prefix(_) => rel.as_deref().is_some_and(|p| {
                paths
                    .iter()
                    .any(|x| x == p || x.starts_with(&format!("{}/", p.trim_end_matches('/'))))
            }),
        },
        now,
    )
    .await
}

/// `lakedrill lease add`.
///
/// # Errors
/// Refusals (unknown snapshot, beyond `maxReaderLease`) are [`Error::Invalid`] (exit 2).
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
    let dur = crate::govern::policy::parse_duration("--expires-in", expires_in)
        .map_err(|e| Error::invalid("--expires-in", e.to_string()))?;
    if dur > policy.max_reader_lease() {
        return Err(Error::invalid(
            "--expires-in",
            format!(
                "{expires_in} is longer than the policy's maxReaderLease ({} s)",
                policy.max_reader_lease().num_seconds()
            ),
        ));
    }
    let reg = registry(ctx).await?;
    let now = Utc::now();
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
    let protected = protect_covered(
        &reg,
        &uuid,
        &format!("lease {}", lease.lease_id),
        |ids, _| ids.contains(&snapshot_id),
        now,
    )
    .await?;
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

/// `lakedrill hold set`.
///
/// # Errors
/// Registry errors; a malformed scope.
pub async fn hold_set(ctx: &Context, source: &TableSource, scope: &str, reason: &str) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let scope: HoldScope = scope.parse()?;
    if let HoldScope::Snapshot(id) = scope {
        table.snapshot(id)?;
    }
    let reg = registry(ctx).await?;
    let now = Utc::now();
    let uuid = table.metadata().uuid().to_string();
    let hold = reg.hold_set(&uuid, scope.clone(), reason, now).await?;
    let protected = protect_covered_by_hold(&reg, &table, &uuid, &hold.hold_id, &scope, now).await?;
    let human = format!(
        "hold {} ({}) at hold generation {}\n",
        hold.hold_id, hold.scope, hold.hold_generation
    );
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"hold_id": hold.hold_id, "hold_generation": hold.hold_generation, "hold": hold, "protected_candidates": protected}),
        human,
    )
}

/// `lakedrill checkpoint add`.
///
/// # Errors
/// Unknown snapshot; registry errors.
pub async fn checkpoint_add(
    ctx: &Context,
    source: &TableSource,
    snapshot_id: i64,
    at: Option<&str>,
) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let snap = table.snapshot(snapshot_id)?;
    let at = match at {
        Some(t) => DateTime::from_timestamp_millis(crate::table::resolve::parse_instant_ms(t)?)
            .ok_or_else(|| Error::invalid("--at", "out of range"))?,
        None => DateTime::from_timestamp_millis(snap.timestamp_ms()).unwrap_or_default(),
    };
    let reg = registry(ctx).await?;
    let now = Utc::now();
    let uuid = table.metadata().uuid().to_string();
    let cp = reg.checkpoint_add(&uuid, snapshot_id, at, now).await?;
    let protected = protect_covered(
        &reg,
        &uuid,
        &format!("checkpoint {}", cp.checkpoint_id),
        |ids, _| ids.contains(&snapshot_id),
        now,
    )
    .await?;
    let human = format!(
        "checkpoint {} on snapshot {snapshot_id} at {}\n",
        cp.checkpoint_id,
        cp.at.to_rfc3339()
    );
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"checkpoint_id": cp.checkpoint_id, "checkpoint": cp, "protected_candidates": protected}),
        human,
    )
}

/// `lakedrill writer begin`.
///
/// # Errors
/// Registry errors.
pub async fn writer_begin(ctx: &Context, source: &TableSource, prefix: &str) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let reg = registry(ctx).await?;
    let now = Utc::now();
    let w = reg
        .writer_begin(&table.metadata().uuid().to_string(), prefix, now)
        .await?;
    let human = format!("writer {} on prefix {}\n", w.writer_id, w.prefix);
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"writer_id": w.writer_id, "writer": w}),
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
    let now = Utc::now();
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
    let now = Utc::now();
    let v = match what {
        "lease" => serde_json::to_value(reg.lease_release(id, now).await?),
        "hold" => serde_json::to_value(reg.hold_clear(id, now).await?),
        _ => serde_json::to_value(reg.writer_end(id, now).await?),
    }
    .map_err(|e| Error::Internal(e.to_string()))?;
    Outcome::new(Verdict::Ok, &v, format!("{what} {id} ended\n"))
}

/// `lakedrill status [CANDIDATE] [--policy FILE]`: candidate and object states, and for the table (addressed, or
/// the candidate's) its rollout stage and the deleter switch; with a policy also the implementation-digest
/// binding (an unpinned policy is a warning) and the deletion-right requests.
///
/// # Errors
/// Registry errors; load, policy and storage errors when a table and a policy are given.
pub async fn status(
    ctx: &Context,
    source: Option<&TableSource>,
    candidate: Option<&str>,
    policy: Option<&Path>,
) -> Result<Outcome> {
    let reg = registry(ctx).await?;
    let table = match source {
        Some(src) => Some(ctx.table(src).await?),
        None => None,
    };
    let records = match (candidate, &table) {
        (Some(id), _) => vec![reg.candidate(id).await?],
        (None, Some(t)) => reg.candidates(&t.metadata().uuid().to_string()).await?,
        (None, None) => return Err(Error::invalid("status", "give a CANDIDATE id or address a table")),
    };
    let table_uuid = match (&table, records.first()) {
        (Some(t), _) => Some(t.metadata().uuid().to_string()),
        (None, Some(r)) => Some(r.table_uuid.clone()),
        (None, None) => None,
    };
    let switch = reg.deleter_switch().await?;
    let mut human = format!(
        "deleter: {}\n",
        if switch.stopped {
            format!("STOPPED ({}) — no purge is accepted for any table", switch.reason)
        } else {
            "running".to_owned()
        }
    );
    let mut doc = serde_json::Map::new();
    doc.insert(
        "deleter".into(),
        serde_json::to_value(&switch).map_err(|e| Error::Internal(e.to_string()))?,
    );
    if let Some(uuid) = &table_uuid {
        let stage = reg.rollout_stage(uuid).await?;
        human.push_str(&format!(
            "table {uuid}: rollout stage {}{}\n",
            stage.stage,
            if stage.changed_at.is_none() {
                " (the default: purge refused)".to_owned()
            } else {
                format!(
                    " (set by {} at {}: {})",
                    stage.changed_by.as_deref().unwrap_or("?"),
                    stage.changed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                    stage.reason
                )
            }
        ));
        doc.insert(
            "rollout".into(),
            serde_json::to_value(&stage).map_err(|e| Error::Internal(e.to_string()))?,
        );
    }
    if let (Some(p), Some(t)) = (policy, &table) {
        let policy = crate::govern::policy::load(p)?;
        policy.check_table(&policy_name(t), &t.metadata().uuid())?;
        let digest = crate::ops::rollout::digest_binding(&policy)?;
        human.push_str(&format!(
            "implementation: this build {} ({})\n",
            digest.running, digest.status
        ));
        if let Some(m) = digest.message() {
            human.push_str(&format!(
                "{}: {m}\n",
                if digest.allows_reclamation() {
                    "warning"
                } else {
                    "REFUSED"
                }
            ));
        }
        let input = gather(ctx, t, &policy, &reg, Utc::now(), None).await?;
        let plan = closure::plan(&input);
        for r in &plan.deletion_rights {
            human.push_str(&format!(
                "deletion right {} ({}) deadline {}: {}{}\n",
                r.id,
                r.scope,
                output::ts(r.deadline_ms),
                r.status,
                if r.overdue { ", OVERDUE" } else { "" }
            ));
        }
        doc.insert(
            "implementation_digest".into(),
            serde_json::to_value(&digest).map_err(|e| Error::Internal(e.to_string()))?,
        );
        doc.insert(
            "deletion_rights".into(),
            serde_json::to_value(&plan.deletion_rights).map_err(|e| Error::Internal(e.to_string()))?,
        );
    }
    let mut docs = Vec::new();
    for r in records {
        let objects = reg.object_states(&r.candidate_id).await?;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for o in &objects {
            *counts.entry(o.state.to_string()).or_default() += 1;
        }
        let not_before = reg.quarantine_not_before(&r.candidate_id).await?;
        human.push_str(&format!(
            "{}  {}  ({})  objects {:?}{}\n",
            r.candidate_id,
            r.state,
            r.reason,
            counts,
            not_before
                .map(|t| format!("  no purge before {}", t.to_rfc3339()))
                .unwrap_or_default()
        ));
        docs.push(
            serde_json::json!({"candidate": r, "objects": objects, "object_counts": counts, "not_before": not_before}),
        );
    }
    doc.insert("candidates".into(), serde_json::Value::Array(docs));
    Outcome::new(Verdict::Ok, &doc, human)
}

/// How quarantine keeps a candidate's snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuarantineMode {
    /// Pin them under `quarantine/<candidate>` tags; the deleter removes the tags at purge.
    Tag,
    /// Remove them from the metadata; the bundles are the only way back.
    Bundle,
}

/// `lakedrill quarantine CANDIDATE`.
///
/// # Errors
/// Load, policy, registry, sealing and commit errors. Refusals (stale plan) are exit 1.
#[allow(clippy::too_many_lines)]
pub async fn quarantine(
    ctx: &Context,
    source: &TableSource,
    candidate_id: &str,
    policy_path: &Path,
    key: &Path,
    bundles: &str,
    mode: QuarantineMode,
) -> Result<Outcome> {
    let policy = crate::govern::policy::load(policy_path)?;
    let key = crate::evidence::keys::load_signing_key(key)?;
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    policy.check_table(&policy_name(&table), &table.metadata().uuid())?;
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    // Only the build the policy pins may quarantine (a different build may still plan, drill and report).
    let digest = crate::ops::rollout::digest_binding(&policy)?;
    if !digest.allows_reclamation() {
        return refuse(digest.message().unwrap_or_default());
    }
    let reg = registry(ctx).await?;
    let now = Utc::now();
    // The candidate must come out of a fresh plan of this very generation.
    let input = gather(ctx, &table, &policy, &reg, now, None).await?;
    let p = ctx.hooks.planned(&input, closure::plan(&input));
    refuse_unreadable_retained(&table, &input, &p)?;
    let Some(candidate) = p.candidates.iter().find(|c| c.candidate_id == candidate_id).cloned() else {
        return refuse(format!(
            "{candidate_id} is not a candidate of the table's current generation (the table, a lease, a hold or a ref changed since the plan): re-plan"
        ));
    };
    if candidate.snapshot_ids.is_empty() {
        return refuse(format!(
            "{candidate_id} holds orphans only; quarantining orphans is not implemented yet"
        ));
    }
    // Defense in depth: the candidate is checked against the non-deletable set by code that does not share
    // the planner's logic; a conflict means a planner bug, and the candidate is PROTECTED for good.
    let conflicts = if crate::safety::weakened(crate::safety::Check::ClosureGate) {
        Vec::new()
    } else {
        closure::nondeletable_conflicts(&input, &candidate.snapshot_ids, &candidate.objects)
    };
    let stamp = world_stamp(&table, &policy, &reg, None).await?;
    let objects: Vec<String> = candidate.objects.iter().map(|o| o.path.clone()).collect();
    let uuid = table.metadata().uuid().to_string();
    let value = serde_json::to_value(&candidate).map_err(|e| Error::Internal(e.to_string()))?;
    let rec = reg
        .candidate_record(&uuid, candidate_id, &value, &stamp, &objects, now)
        .await?;
    if rec.state != State::UnreferencedEligible {
        return refuse(format!("{candidate_id} is already {}", rec.state));
    }
    if !conflicts.is_empty() {
        let reason = format!("independent closure check: {}", conflicts.join("; "));
        reg.candidate_transition(candidate_id, State::Protected, &reason, None, None, now)
            .await?;
        return refuse(format!("{reason}; the candidate is PROTECTED"));
    }
    // One quarantine or purge of a candidate at a time (the registry's run claim, shared with the deleter).
    let run = match crate::ops::deleter::claim_run(&reg, candidate_id, now, "quarantine").await? {
        Ok(run) => run,
        Err(why) => return refuse(why),
    };
    let out = seal_and_commit(
        ctx,
        source,
        candidate_id,
        bundles,
        mode,
        (&table, &cat, &ident),
        &policy,
        &key,
        &reg,
        now,
        &candidate,
        &stamp,
        &digest,
    )
    .await;
    let released = reg.purge_release(candidate_id, &run.run_id, Utc::now()).await;
    let out = out?;
    released?;
    Ok(out)
}

/// The second half of [`quarantine`], run while the candidate is claimed: seal every snapshot, re-check the
/// registry, commit the tags (or the removal) and record the quarantine.
#[allow(clippy::too_many_arguments, clippy::too_many_lines)]
async fn seal_and_commit(
    ctx: &Context,
    source: &TableSource,
    candidate_id: &str,
    bundles: &str,
    mode: QuarantineMode,
    (table, cat, ident): (&Table, &crate::io::catalog::SqlCatalog, &crate::io::catalog::TableIdent),
    policy: &Policy,
    key: &crate::evidence::keys::SigningKey,
    reg: &Registry,
    now: DateTime<Utc>,
    candidate: &closure::Candidate,
    stamp: &WorldStamp,
    digest: &crate::ops::rollout::DigestBinding,
) -> Result<Outcome> {
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    // Claimed now; another quarantine may have finished between our check and our claim.
    let state = reg.candidate(candidate_id).await?.state;
    if state != State::UnreferencedEligible {
        return refuse(format!(
            "{candidate_id} is already {state} (another quarantine ran meanwhile)"
        ));
    }
    // Seal every snapshot of the candidate.
    let out = location::canonical_uri(bundles)?;
    let mut sealed = Vec::new();
    for id in &candidate.snapshot_ids {
        match crate::bundle::seal(table, &ctx.storage, *id, key, &out, now).await? {
            Ok(r) => sealed.push(r),
            Err(findings) => {
                reg.candidate_transition(
                    candidate_id,
                    State::Protected,
                    &format!("snapshot {id} cannot be sealed"),
                    None,
                    None,
                    now,
                )
                .await?;
                return Outcome::new(
                    Verdict::Findings,
                    &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "snapshot_id": id, "findings": findings}),
                    format!("REFUSED: snapshot {id} cannot be sealed; the candidate is PROTECTED\n"),
                );
            }
        }
    }
    // Nothing may have changed in the registry since the plan.
    let again = world_stamp(table, policy, reg, None).await?;
    if &again != stamp {
        return refuse("leases or holds changed while sealing: re-plan".into());
    }
    let tag_prefix = format!("{QUARANTINE_TAG_PREFIX}{candidate_id}");
    let several = candidate.snapshot_ids.len() > 1;
    let tags: Vec<(String, i64)> = candidate
        .snapshot_ids
        .iter()
        .map(|id| {
            (
                if several {
                    format!("{tag_prefix}/{id}")
                } else {
                    tag_prefix.clone()
                },
                *id,
            )
        })
        .collect();
    let mut builder = table
        .metadata()
        .clone()
        .into_builder(Some(table.generation().metadata_location.clone()));
    match mode {
        QuarantineMode::Tag => {
            for (name, id) in &tags {
                builder = builder
                    .set_ref(
                        name,
                        SnapshotReference::new(*id, SnapshotRetention::Tag { max_ref_age_ms: None }),
                    )
                    .map_err(|e| Error::iceberg(format!("tag {name}"), e))?;
            }
        }
        QuarantineMode::Bundle => builder = builder.remove_snapshots(&candidate.snapshot_ids),
    }
    let new = builder
        .build()
        .map_err(|e| Error::iceberg("build metadata", e))?
        .metadata;
    let committed = match cat
        .commit(&ctx.storage, ident, &table.generation().metadata_location, &new)
        .await
    {
        Ok(loc) => loc,
        Err(Error::Catalog { reason, .. }) => return refuse(format!("the catalog commit failed: {reason}; re-plan")),
        Err(e) => return Err(e),
    };
    // The world after the commit is what the deleter will compare against.
    let after = ctx.table(source).await?;
    if after.generation().metadata_location != committed {
        return refuse(format!(
            "another commit followed ours ({}); re-plan",
            after.generation().metadata_location
        ));
    }
    let post = world_stamp(&after, policy, reg, Some(&tag_prefix)).await?;
    let q = serde_json::json!({
        "mode": match mode { QuarantineMode::Tag => "tag", QuarantineMode::Bundle => "bundle" },
        "tag_prefix": tag_prefix,
        "tags": tags.iter().map(|(n, id)| serde_json::json!({"name": n, "snapshot_id": id})).collect::<Vec<_>>(),
        "bundles": sealed,
        "committed_metadata_location": committed,
        "plan_stamp": stamp,
        "policy_digest": policy.digest(),
        "quarantined_at": Utc::now(),
        "implementation_digest": digest,
    });
    let rec = reg
        .candidate_transition(
            candidate_id,
            State::Quarantined,
            "sealed and committed",
            Some(&q),
            Some(&post),
            now,
        )
        .await?;
    let mut human = format!(
        "{candidate_id} QUARANTINED ({} mode), committed {committed}\n",
        if mode == QuarantineMode::Tag { "tag" } else { "bundle" }
    );
    for b in &sealed {
        human.push_str(&format!(
            "  snapshot {} → bundle {} root {}\n",
            b.snapshot_id, b.uri, b.bundle_root
        ));
    }
    if mode == QuarantineMode::Tag {
        for (n, id) in &tags {
            human.push_str(&format!("  tag {n} → {id}\n"));
        }
    }
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"status": "QUARANTINED", "candidate": rec, "bundles": sealed}),
        human,
    )
}
