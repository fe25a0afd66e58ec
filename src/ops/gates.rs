//! The six safety gates of DESIGN §7, recomputed from what was recorded — never from what the deleter
//! believed at the time:
//!
//! 1. `protected_objects_deleted`: objects in a `DELETED`/`VERIFIED` state that the table's protected
//!    closure (refs, leases, checkpoints, holds and the current snapshot, as `plan` computes it now: their
//!    layers, each one's manifest list as the metadata names it, their statistics files and the live metadata
//!    files) still reaches, or that lie under an open writer's prefix or a held prefix. Must be 0, and every kept
//!    snapshot's files must be readable: one that cannot be read (a deleted manifest reads so) fails the gate,
//!    named with the object and the reason, since what it reaches is unknown.
//! 2. `inventory_difference`: for every candidate, deleted objects outside its accepted inventory, and
//!    inventory objects of a finished candidate (`DELETED`/`VERIFIED`) that are not deleted. Must be 0.
//! 3. `weekly_restores`: the newest signed `quarantine` drill report within the window (default 7 days)
//!    verifies, sampled 30 bundles (or every bundle when fewer exist) and all passed root verification.
//!    Bundles a finished purge retired are outside the drill's population (the drill counts them in
//!    `sample.retired`, shown here as `retired`), so a purge never turns this gate FAIL. The gates read
//!    reports and the registry only, never a bundle.
//! 4. `quarterly_recovery`: the newest signed `cold-backup` drill report within the window (default 92
//!    days) verifies, its gate is `PASS` (every table recovered under its RTO limit), every recovered
//!    snapshot is the declared checkpoint, every RPO (declared checkpoint time − recovered commit time) is
//!    within the policy's `rpoTarget` (0 without one), every recovered checkpoint is the registry's record,
//!    and the table's newest DR checkpoint in the registry has a verified backup recovery (by checkpoint id;
//!    reports written before results named their checkpoint never match, so a drill must run again).
//!    Under the policy's `evidenceSigners` gates 3 and 4 count only a report signed by a listed key (merged: every
//!    shard too); the others are named in `unlisted_signer_reports`, and their failures still count. A shard's
//!    partial report is never counted either, and its failures count too. The newest checkpoint's recovery, when it
//!    is in an older report, is held to every rule the covering report's results are. A report file that cannot be
//!    read (over `max_metadata_bytes`, or gone) is one that does not verify, named in `unverified_reports`.
//! 5. `acceptances_after_hold`: delete acceptances recorded after a hold of the table took effect (a hold
//!    event between the stamp the candidate was accepted against and the acceptance), and delete requests
//!    confirmed after a covering hold the candidate was not accepted against. Must be 0 and 0.
//! 6. `unknowns_reconciled`: objects still in `DELETE_UNKNOWN`. Must be 0.
//!
//! Gates 1, 2, 5 and 6 concern the addressed table; 3 and 4 the drill reports of the deployment.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::error::Result;
use crate::evidence::keys::TrustStore;
use crate::govern::closure::{HoldScope, Plan, PlanInput};
use crate::govern::policy::Policy;
use crate::io::store::Storage;
use crate::model::location::{self, TableLocation};
use crate::ops::drill::DrillPredicate;
use crate::registry::{Checkpoint, EventKind, Registry, State};
use crate::table::Table;

/// The weekly drill sample the gate wants.
pub const WEEKLY_SAMPLE: usize = 30;

/// The status of a gate that does not apply to the table (the quarterly recovery of a table the policy does
/// not mark critical). It counts as passed.
pub const NOT_REQUIRED: &str = "NOT_REQUIRED";

/// How far back the quarterly recovery gate looks by default.
pub const QUARTERLY_WINDOW_DAYS: i64 = 92;

/// The drill kind the weekly gate counts: a `quarantine` drill of bundles — `drill run` of a bundles plan,
/// `restore --shard --key` (whose plan is one) and their merge (`report merge` keeps the shards' kind). A
/// `cold-backup` drill proves a recovery for the quarterly gate, not the restores of the quarantined bundles; a
/// fault-matrix report has a predicate type of its own and verifies as no drill report at all.
pub const WEEKLY_KIND: &str = "quarantine";

/// The drill kind the quarterly gate counts.
pub const QUARTERLY_KIND: &str = "cold-backup";

/// Whether a drill report is of the kind the weekly gate counts ([`WEEKLY_KIND`]). The deleter holds its
/// evidence to the same rule (`purge --evidence`), so that what deletes is what the gate counts.
#[must_use]
pub fn counts_as_weekly(p: &DrillPredicate) -> bool {
    p.drill.kind == WEEKLY_KIND
}

/// How far in the future a drill report may say it finished (clock skew between hosts) and still count. A
/// report past it is refused: by the deleter as evidence, by the gates as a finding naming it.
pub const FUTURE_SLACK_MINUTES: i64 = 5;

/// One gate and the figures behind it.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    /// Stable name.
    pub name: &'static str,
    /// `PASS` or `FAIL`.
    pub status: &'static str,
    /// The figures (counts, report names, RTO/RPO).
    pub figures: serde_json::Value,
    /// One line for humans.
    pub detail: String,
}

impl Gate {
    fn new(name: &'static str, pass: bool, figures: serde_json::Value, detail: String) -> Self {
        Self {
            name,
            status: if pass { "PASS" } else { "FAIL" },
            figures,
            detail,
        }
    }

    /// Whether it passed (a gate that does not apply to the table passes).
    #[must_use]
    pub fn passed(&self) -> bool {
        self.status == "PASS" || self.status == NOT_REQUIRED
    }
}

/// Where the report-based gates look, and how far back.
#[derive(Debug, Clone)]
pub struct ReportSource<'a> {
    /// The reports folder (each plan in `<reports>/<plan>/`).
    pub reports_uri: String,
    /// Keys the reports must be signed by.
    pub trust: &'a TrustStore,
    /// Overrides both windows (7 days for the weekly gate, 92 for the quarterly one).
    pub since: Option<Duration>,
}

/// The planner's reading of a prefix (`closure::under`): the empty prefix, that of a stored writer whose prefix
/// cannot be related to the table, covers every path.
fn under(path: &str, prefix: &str) -> bool {
    crate::govern::closure::under(path, prefix)
}

/// Computes the six gates for one table. `table` is the generation `input` was gathered from: its metadata names
/// each snapshot's manifest list (gate 1), and its location relates the prefixes of cleared holds (which the plan
/// input no longer carries) to the table.
///
/// # Errors
/// Registry and storage errors (a report file that cannot be read counts as one that does not verify, named in the
/// weekly gate's `unverified_reports`; it is not an error).
#[allow(clippy::too_many_lines, clippy::too_many_arguments)]
pub async fn safety_gates(
    storage: &Storage,
    reg: &Registry,
    input: &PlanInput,
    table: &Table,
    plan: &Plan,
    policy: &Policy,
    reports: &ReportSource<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<Gate>> {
    let table_location = table.location();
    let uuid = &input.table_uuid;
    let candidates = reg.candidates(uuid).await?;
    let mut states: BTreeMap<String, Vec<crate::registry::ObjectState>> = BTreeMap::new();
    for c in &candidates {
        states.insert(c.candidate_id.clone(), reg.object_states(&c.candidate_id).await?);
    }
    let gone = |s: State| matches!(s, State::Deleted | State::Verified);

    // 1. Protected objects deleted.
    let manifest_lists = manifest_lists(table);
    let g1 = protected_gate(input, plan, &manifest_lists, &states);

    // 2. Candidate inventory vs deleted set.
    let mut extra = Vec::new();
    let mut missing = Vec::new();
    for c in &candidates {
        let inventory: BTreeSet<&str> = c.objects.iter().map(|o| o.path.as_str()).collect();
        let objs = states.get(&c.candidate_id).map(Vec::as_slice).unwrap_or_default();
        for o in objs.iter().filter(|o| gone(o.state)) {
            if !inventory.contains(o.path.as_str()) {
                extra.push(format!("{}: {}", c.candidate_id, o.path));
            }
        }
        if gone(c.state) {
            let deleted: BTreeSet<&str> = objs.iter().filter(|o| gone(o.state)).map(|o| o.path.as_str()).collect();
            for p in inventory.difference(&deleted) {
                missing.push(format!("{}: {p}", c.candidate_id));
            }
        }
    }
    let g2 = Gate::new(
        "inventory_difference",
        extra.is_empty() && missing.is_empty(),
        serde_json::json!({"deleted_outside_inventory": extra, "inventory_not_deleted": missing,
            "finished_candidates": candidates.iter().filter(|c| gone(c.state)).count()}),
        format!(
            "{} deleted outside an accepted inventory, {} inventory objects of finished candidates not deleted",
            extra.len(),
            missing.len()
        ),
    );

    // 3 and 4. Signed drill reports, for this table.
    let (weekly, quarterly) = report_gates(storage, reg, reports, &candidates, &input.table_uuid, policy, now).await?;

    // 5. Acceptances and deletes after a hold took effect.
    let g5 = hold_gate(reg, input, table_location, &candidates).await?;

    // 6. DELETE_UNKNOWN reconciled.
    let unknown: Vec<String> = states
        .iter()
        .flat_map(|(c, objs)| {
            objs.iter()
                .filter(|o| o.state == State::DeleteUnknown)
                .map(move |o| format!("{c}: {}", o.path))
        })
        .collect();
    let g6 = Gate::new(
        "unknowns_reconciled",
        unknown.is_empty(),
        serde_json::json!({"unreconciled": unknown.len(), "objects": unknown}),
        format!("{} objects still DELETE_UNKNOWN", unknown.len()),
    );
    Ok(vec![g1, g2, weekly, quarterly, g5, g6])
}

/// Each snapshot's manifest list as the table's metadata names it (relative to the table), by snapshot id. Read
/// from the metadata, not from the walk of the layers: a kept snapshot whose list was deleted still names it. A
/// list outside the table is left out (the walk refuses such a table; no candidate holds a path outside it).
fn manifest_lists(table: &Table) -> BTreeMap<i64, String> {
    table
        .snapshots_sorted()
        .into_iter()
        .filter_map(|s| Some((s.snapshot_id(), table.location().relative(s.manifest_list()).ok()?)))
        .collect()
}

/// Gate 1 (pure): the deleted objects (`DELETED`/`VERIFIED` in `states`) that the protected closure of `plan`
/// reaches, or that lie under an open writer's prefix or a held prefix.
///
/// What the closure reaches is every object of each kept snapshot (`plan.protected`) as walked, each kept
/// snapshot's manifest list as the metadata names it (`manifest_lists`, whether or not it could be read), the
/// statistics and partition-statistics files of the kept snapshots and of the current one, and the live metadata
/// files. A kept snapshot whose layers could not be read fails the gate on its own, named with the object and the
/// reason ([`crate::govern::closure::unreadable_retained`], the planner's refusal): what it reaches is unknown, and
/// the likeliest reason a kept snapshot's manifest is missing is that it was deleted, so a PASS would hide the very
/// loss this gate exists to find.
fn protected_gate(
    input: &PlanInput,
    plan: &Plan,
    manifest_lists: &BTreeMap<i64, String>,
    states: &BTreeMap<String, Vec<crate::registry::ObjectState>>,
) -> Gate {
    let gone = |s: State| matches!(s, State::Deleted | State::Verified);
    let retained: BTreeSet<i64> = plan.protected.iter().map(|p| p.snapshot_id).collect();
    let kept_or_current = |id: &i64| retained.contains(id) || input.current_snapshot_id == Some(*id);
    let reachable: BTreeSet<&str> = crate::govern::closure::distinct_objects(
        input
            .snapshots
            .iter()
            .filter(|s| retained.contains(&s.snapshot_id))
            .filter_map(|s| s.objects.as_ref()),
    )
    .into_iter()
    .map(|o| o.path.as_str())
    .chain(input.live_metadata_files.iter().map(String::as_str))
    .chain(
        manifest_lists
            .iter()
            .filter(|(id, _)| retained.contains(id))
            .map(|(_, p)| p.as_str()),
    )
    .chain(
        input
            .statistics_files
            .iter()
            .filter(|(id, _)| kept_or_current(id))
            .flat_map(|(_, files)| files.iter().map(String::as_str)),
    )
    .collect();
    let unreadable = crate::govern::closure::unreadable_retained(input, plan);
    let prefixes: Vec<String> = input
        .protections
        .writers
        .iter()
        .map(|(_, p)| p.clone())
        .chain(input.protections.holds.iter().filter_map(|(_, h)| match h {
            HoldScope::Prefix(p) => Some(p.clone()),
            _ => None,
        }))
        .collect();
    let mut protected_deleted = Vec::new();
    for o in states.values().flatten().filter(|o| gone(o.state)) {
        if reachable.contains(o.path.as_str()) || prefixes.iter().any(|p| under(&o.path, p)) {
            protected_deleted.push(o.path.clone());
        }
    }
    let deleted_total = states.values().flatten().filter(|o| gone(o.state)).count();
    let mut detail = format!(
        "{} of {deleted_total} deleted objects are reached by the protected closure",
        protected_deleted.len()
    );
    if !unreadable.is_empty() {
        detail.push_str(&format!(
            "; the files of {} kept snapshot(s) cannot be read, so what they reach is unknown (a deleted manifest or \
             manifest list of a kept snapshot reads so): {}",
            unreadable.len(),
            unreadable.join("; ")
        ));
    }
    Gate::new(
        "protected_objects_deleted",
        protected_deleted.is_empty() && unreadable.is_empty(),
        serde_json::json!({"protected_deleted": protected_deleted.len(), "deleted": deleted_total,
            "objects": protected_deleted, "unreadable_kept_snapshots": unreadable}),
        detail,
    )
}

/// The gates the deleter evaluates before it accepts a delete of a candidate of this table (DESIGN §7): the
/// weekly restores (a covering report within the policy's evidence age), the quarterly recovery (for critical
/// tables) and no acceptance or delete after a hold. (The unknowns limit is checked inside the acceptance
/// transaction, [`Registry::candidate_accept`].)
///
/// # Errors
/// Registry and storage errors.
pub async fn deleter_gates(
    storage: &Storage,
    reg: &Registry,
    input: &PlanInput,
    table_location: &TableLocation,
    policy: &Policy,
    reports: &ReportSource<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<Gate>> {
    let candidates = reg.candidates(&input.table_uuid).await?;
    let (weekly, quarterly) = report_gates(storage, reg, reports, &candidates, &input.table_uuid, policy, now).await?;
    let holds = hold_gate(reg, input, table_location, &candidates).await?;
    Ok(vec![weekly, quarterly, holds])
}

/// Gate 5: delete acceptances recorded after a hold of the table took effect, and delete requests confirmed
/// after a covering hold the candidate was not accepted against.
async fn hold_gate(
    reg: &Registry,
    input: &PlanInput,
    table_location: &TableLocation,
    candidates: &[crate::registry::CandidateRecord],
) -> Result<Gate> {
    let events = reg.events(&input.table_uuid).await?;
    let holds = holds_set(reg, &input.table_uuid, &events).await?;
    let mut late = Vec::new();
    for e in events
        .iter()
        .filter(|e| e.kind == EventKind::CandidateState && e.detail["to"] == serde_json::json!(State::DeleteApproved))
    {
        let Some(id) = e.detail["candidate_id"].as_str() else {
            continue;
        };
        let Some(c) = candidates.iter().find(|c| c.candidate_id == id) else {
            continue;
        };
        let stamped = c.stamp.hold_generation;
        if let Some(h) = holds
            .iter()
            .find(|h| h.generation < e.generation && h.detail["hold_generation"].as_i64().is_some_and(|g| g > stamped))
        {
            late.push(serde_json::json!({"candidate_id": id, "accepted_at": e.at, "hold": h.detail["hold_id"], "hold_set_at": h.at}));
        }
    }
    let acceptances = events
        .iter()
        .filter(|e| e.kind == EventKind::CandidateState && e.detail["to"] == serde_json::json!(State::DeleteApproved))
        .count();
    // Delete requests after a hold: a delete whose confirmation was recorded after a hold the candidate was
    // not accepted against, and which the hold covers. The deleter sends every request inside a registry batch
    // that holds the write lock, so a request sent before a hold committed is confirmed before the hold's
    // event; a confirmation after it means the request may have gone out under the hold.
    let (deletes_after_hold, deletes_total) =
        deletes_after_holds(reg, input, table_location, candidates, &events, &holds).await?;
    Ok(Gate::new(
        "acceptances_after_hold",
        late.is_empty() && deletes_after_hold.is_empty(),
        serde_json::json!({"acceptances": acceptances, "after_a_hold": late,
            "delete_requests": deletes_total, "deletes_after_a_hold": deletes_after_hold.len(),
            "deletes": deletes_after_hold.iter().take(20).collect::<Vec<_>>()}),
        format!(
            "{} of {acceptances} delete acceptances and {} of {deletes_total} delete requests came after a hold took effect",
            late.len(),
            deletes_after_hold.len()
        ),
    ))
}

/// Gates 3 and 4 for one table, from the verified reports under the reports folder.
async fn report_gates(
    storage: &Storage,
    reg: &Registry,
    src: &ReportSource<'_>,
    candidates: &[crate::registry::CandidateRecord],
    table_uuid: &str,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<(Gate, Gate)> {
    let folder = location::canonical_uri(&src.reports_uri)?;
    let (reports, unverified) = verified_reports(storage, src, policy.evidence_signers()).await?;
    // A report that says it finished in the future is never counted: it would pass any age, and it would hide
    // every failure that finished before its claimed start.
    let limit = now + Duration::minutes(FUTURE_SLACK_MINUTES);
    let (future, reports): (Vec<VerifiedReport>, Vec<VerifiedReport>) =
        reports.into_iter().partition(|r| r.finished > limit);
    let bundles = awaiting_bundles(candidates);
    let mut weekly = weekly_gate(
        &reports,
        &unverified,
        &folder,
        &bundles,
        (table_uuid, policy.digest()),
        policy.evidence_signers(),
        src.since.unwrap_or_else(|| policy.evidence_max_age()),
        now,
    );
    newer_failures_in_registry(reg, &reports, candidates, &mut weekly).await?;
    let checkpoints = reg.checkpoints(table_uuid).await?;
    let mut quarterly = quarterly_gate(
        &reports,
        table_uuid,
        &QuarterlyRules {
            critical: policy.critical(),
            rto_limit: policy.recovery_rto_limit(),
            rpo_target: policy.rpo_target(),
            checkpoints: &checkpoints,
            evidence_signers: policy.evidence_signers(),
        },
        src.since.unwrap_or_else(|| Duration::days(QUARTERLY_WINDOW_DAYS)),
        now,
    );
    // Only a report about this table (one of its results names it, or its population holds one of the bundles
    // awaiting its purge) fails its gates: one drill host's clock does not hold every table of the folder.
    let future: Vec<VerifiedReport> = future
        .into_iter()
        .filter(|r| {
            r.predicate
                .results
                .iter()
                .any(|x| x.table_uuid.as_deref() == Some(table_uuid))
                || uncovered(&r.predicate, &bundles).len() < bundles.len()
        })
        .collect();
    refuse_future_reports(&mut weekly, &future, WEEKLY_KIND, now);
    refuse_future_reports(&mut quarterly, &future, QUARTERLY_KIND, now);
    Ok((weekly, quarterly))
}

/// Fails a gate (one that applies) when a verified report of its drill `kind` says it finished more than
/// [`FUTURE_SLACK_MINUTES`] after `now`, naming the reports: a drill host's clock is wrong or the report is not
/// what it says, and the gate cannot tell which of the folder's reports to believe. The report was not counted.
fn refuse_future_reports(gate: &mut Gate, future: &[VerifiedReport], kind: &str, now: DateTime<Utc>) {
    if gate.status == NOT_REQUIRED {
        return;
    }
    let of_kind: Vec<&VerifiedReport> = future.iter().filter(|r| r.predicate.drill.kind == kind).collect();
    let Some(first) = of_kind.first() else {
        return;
    };
    let problem = format!(
        "the drill report {} says it finished {}, more than {FUTURE_SLACK_MINUTES} minutes after now ({}): a report \
         from the future is not counted (a drill host's clock is wrong, or the report is not what it says); move it \
         away or fix the clock{}",
        first.uri,
        first.predicate.finished_at,
        now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        if of_kind.len() > 1 {
            format!(" ({} such reports)", of_kind.len())
        } else {
            String::new()
        }
    );
    let mut figures = gate.figures.clone();
    figures["future_reports"] = of_kind
        .iter()
        .map(|r| serde_json::json!({"report": r.uri, "finished_at": r.predicate.finished_at}))
        .collect();
    let detail = if gate.passed() {
        problem
    } else {
        format!("{problem}; {}", gate.detail)
    };
    *gate = Gate::new(gate.name, false, figures, detail);
}

/// Fails a passing weekly gate whose covering report is older than a failure the registry recorded for one of the
/// roots of the bundles awaiting a purge (a drill whose reports went to another folder, or a shard): the deleter would refuse
/// that report ([`crate::ops::deleter::newer_failures`]), so the gate says so too, naming the failing report. Any
/// report counts from its start (a merged one from its oldest shard's): a failure that finished while it ran is
/// newer.
async fn newer_failures_in_registry(
    reg: &Registry,
    reports: &[VerifiedReport],
    candidates: &[crate::registry::CandidateRecord],
    weekly: &mut Gate,
) -> Result<()> {
    if weekly.status != "PASS" {
        return Ok(());
    }
    let Some(r) = weekly.figures["covering_report"]
        .as_str()
        .and_then(|uri| reports.iter().find(|r| r.uri == uri))
    else {
        return Ok(());
    };
    // The roots of the bundles the gate covers: those of the candidates awaiting a purge.
    let mut roots: Vec<String> = candidates
        .iter()
        .filter(|c| matches!(c.state, State::Quarantined | State::RestoreVerified))
        .filter_map(|c| c.quarantine.as_ref()?["bundles"].as_array().cloned())
        .flatten()
        .filter_map(|b| b["bundle_root"].as_str().map(str::to_owned))
        .collect();
    roots.sort();
    roots.dedup();
    let failures = reg.drill_failures_after(&roots, r.started).await?;
    let Some(first) = failures.first() else {
        return Ok(());
    };
    let newer: Vec<serde_json::Value> = failures
        .iter()
        .map(|v| {
            serde_json::json!({"report": v.report_uri, "plan": v.plan, "shard": v.shard,
            "bundle_root": v.bundle_root, "root_claimed": v.root_claimed,
            "finished_at": v.finished_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)})
        })
        .collect();
    let mut figures = weekly.figures.clone();
    figures["newer_failures"] = serde_json::Value::Array(newer);
    *weekly = Gate::new(
        weekly.name,
        false,
        figures,
        format!(
            "{}: a newer drill report {} (plan {}, finished {}; recorded in the registry) FAILED {}{}",
            r.uri,
            first.report_uri,
            first.plan,
            first.finished_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            first.root_words(),
            if failures.len() > 1 {
                format!(" ({} failures in all)", failures.len())
            } else {
                String::new()
            }
        ),
    );
    Ok(())
}

/// A hold of the table and the change that set it.
struct HoldSetAt {
    /// The registry generation of the change that set it.
    generation: i64,
    /// When it was set.
    at: DateTime<Utc>,
    /// The hold as stored (what a `hold_set` event records).
    detail: serde_json::Value,
}

/// Every hold the table ever had, however it was set — `hold set` or a governance decision (which records one
/// `decision_applied` event for all the holds it sets, no `hold_set` event) — read from the holds themselves, each
/// placed at the registry generation of the change that set it: its `hold_set` event, or the `decision_applied`
/// event that names it as set. A hold no event names (a row written by hand) is placed before everything
/// (generation 0): it counts against every acceptance and delete that did not judge it.
///
/// # Errors
/// Registry errors.
async fn holds_set(reg: &Registry, table_uuid: &str, events: &[crate::registry::Event]) -> Result<Vec<HoldSetAt>> {
    let mut set_by: BTreeMap<String, (i64, DateTime<Utc>)> = BTreeMap::new();
    for e in events {
        match e.kind {
            EventKind::HoldSet => {
                if let Some(id) = e.detail["hold_id"].as_str() {
                    set_by.entry(id.to_owned()).or_insert((e.generation, e.at));
                }
            }
            EventKind::DecisionApplied => {
                for h in e.detail["holds"].as_array().into_iter().flatten() {
                    if h["action"] == "set"
                        && let Some(id) = h["hold_id"].as_str()
                    {
                        set_by.entry(id.to_owned()).or_insert((e.generation, e.at));
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for h in reg.holds(table_uuid).await? {
        let (generation, at) = set_by.get(&h.hold_id).copied().unwrap_or((0, h.set_at));
        let detail =
            serde_json::to_value(&h).map_err(|e| crate::Error::Internal(format!("hold {}: {e}", h.hold_id)))?;
        out.push(HoldSetAt { generation, at, detail });
    }
    out.sort_by_key(|h| h.generation);
    Ok(out)
}

/// Whether the hold of a `hold_set` event (its detail) covers `path` of a candidate with `snapshot_ids`.
/// Prefixes are compared relative to the table location: an active hold's as the planner resolved it, a
/// cleared one's as the planner would (one that cannot be related to the table counts as covering).
fn hold_covers(
    detail: &serde_json::Value,
    input: &PlanInput,
    location: &TableLocation,
    snapshot_ids: &[i64],
    path: &str,
) -> bool {
    let hold_id = detail["hold_id"].as_str().unwrap_or_default();
    if let Some((_, scope)) = input.protections.holds.iter().find(|(id, _)| id == hold_id) {
        return match scope {
            HoldScope::Table => true,
            HoldScope::Snapshot(id) => snapshot_ids.contains(id),
            HoldScope::Prefix(p) => under(path, p),
        };
    }
    let scope = detail["scope"].as_str().unwrap_or("table");
    match scope.parse::<crate::registry::HoldScope>() {
        Ok(crate::registry::HoldScope::Snapshot(id)) => snapshot_ids.contains(&id),
        // A cleared prefix hold that cannot be related to the table: counted as covering.
        Ok(crate::registry::HoldScope::Prefix(p)) => location.relative_prefix(&p).is_none_or(|r| under(path, &r)),
        // The whole table, or a scope that cannot be read: counted as covering.
        Ok(crate::registry::HoldScope::Table) | Err(_) => true,
    }
}

/// Every delete request of the table's candidates confirmed after a covering hold they were not accepted
/// against (candidate and path, up to all of them), and how many delete requests were confirmed in all.
async fn deletes_after_holds(
    reg: &Registry,
    input: &PlanInput,
    location: &TableLocation,
    candidates: &[crate::registry::CandidateRecord],
    events: &[crate::registry::Event],
    holds: &[HoldSetAt],
) -> Result<(Vec<String>, usize)> {
    let recorded: BTreeMap<(&str, &str, i64), i64> = events
        .iter()
        .filter(|e| e.kind == EventKind::ReceiptRecorded)
        .filter_map(|e| {
            Some((
                (
                    e.detail["candidate_id"].as_str()?,
                    e.detail["path"].as_str()?,
                    e.detail["attempt"].as_i64()?,
                ),
                e.generation,
            ))
        })
        .collect();
    let mut after = Vec::new();
    let mut total = 0;
    for c in candidates {
        let ids: Vec<i64> = c.candidate["snapshot_ids"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
            .unwrap_or_default();
        for r in reg.receipts(&c.candidate_id).await? {
            // A confirmation of a request that was sent: not the answer to an intent whose request never went
            // out (`sent: false`, or "not sent" as its result), nor one settled by a re-check alone.
            let result = r.receipt["provider_result"].as_str().unwrap_or_default();
            let sent = r.receipt["phase"] == "confirmed"
                && r.receipt["sent"] != serde_json::json!(false)
                && !result.starts_with("not sent:")
                && !r.receipt["provider_result"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("absent at re-check"));
            if !sent {
                continue;
            }
            total += 1;
            let Some(g) = recorded.get(&(c.candidate_id.as_str(), r.path.as_str(), r.attempt)) else {
                continue;
            };
            let hit = holds.iter().find(|h| {
                h.generation < *g
                    && h.detail["hold_generation"]
                        .as_i64()
                        .is_some_and(|hg| hg > c.stamp.hold_generation)
                    && hold_covers(&h.detail, input, location, &ids, &r.path)
            });
            if let Some(h) = hit {
                after.push(format!(
                    "{}: {} (hold {} set at {})",
                    c.candidate_id,
                    r.path,
                    h.detail["hold_id"].as_str().unwrap_or_default(),
                    h.at.to_rfc3339()
                ));
            }
        }
    }
    Ok((after, total))
}

/// An error and its sources, one after another (`main` prints the chain so; a gate's figure has no `main`).
fn error_chain(e: &crate::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

/// Every report envelope under the reports folder. Shard reports are among them and are told apart once verified,
/// by their signed predicate ([`DrillPredicate::is_shard_partial`]), not by where they lie: a shard report copied
/// out of `shards/` is still 1/N of a drill.
async fn report_files(storage: &Storage, folder: &str) -> Result<Vec<String>> {
    Ok(storage
        .list(folder)
        .await?
        .into_iter()
        .map(|o| o.uri)
        .filter(|u| u.ends_with(".dsse.json"))
        .collect())
}

/// A drill report that verified under the trust store, with its finish time and the time its evidence dates from.
struct VerifiedReport {
    uri: String,
    finished: DateTime<Utc>,
    /// What the gates age the report by: its `finished_at`, or for a merged report its `started_at` (the oldest
    /// shard's start: a shard verified long ago does not become fresh by being merged), as the deleter does.
    as_of: DateTime<Utc>,
    /// Its `started_at` (no later than its end), merged or not: a failure of one of its roots that finished after
    /// this is newer than the report (it may have seen an object after this drill read it), as the deleter reads it.
    started: DateTime<Utc>,
    predicate: DrillPredicate,
    /// Whether it verifies under a key the policy's `evidenceSigners` lists and, merged, every shard it joins was
    /// signed by a listed key too (always, for a policy that lists none): only such a report counts for the weekly
    /// and the quarterly gate ([`by_signer`]); any other still counts with its failures.
    by_listed_signer: bool,
    /// The key ids its envelope names (read for messages only; the signature is checked above).
    keyids: Vec<String>,
    /// When it is not `by_listed_signer`: which signer the policy does not list, in words (or, for a report with
    /// audit findings, that it does not verify as written).
    unlisted: Option<String>,
    /// Whether its signature verifies but it carries audit findings (named among the files that do not verify):
    /// it never counts, its failures do.
    flawed: bool,
    /// Whether it is one shard's partial report ([`DrillPredicate::is_shard_partial`]): never the report a gate
    /// counts (only the merge of all shards is), but its failures count against older evidence, as the deleter's
    /// `newer_failures` counts them.
    shard_partial: bool,
}

/// Every report under the folder that verifies (newest first, shard reports among them, marked), and those that do
/// not: each URI, with the reason when the file could not be read at all (larger than `max_metadata_bytes`, or gone
/// between the listing and the read). An unreadable file is a report that does not verify, not an error: one junk or
/// vanished file in the folder must not stop the gates of every table. With `evidence_signers` (the policy's), each
/// report also says whether one of those keys signed it.
async fn verified_reports(
    storage: &Storage,
    src: &ReportSource<'_>,
    evidence_signers: Option<&[String]>,
) -> Result<(Vec<VerifiedReport>, Vec<String>)> {
    let folder = location::canonical_uri(&src.reports_uri)?;
    let drill_keys = src.trust.for_role(crate::evidence::keys::Role::Drill);
    let listed_keys = evidence_signers.map(|ids| drill_keys.only(ids));
    let mut good = Vec::new();
    let mut unverified = Vec::new();
    for uri in report_files(storage, &folder).await? {
        // Bounded as table metadata is: a file of any size can be written into the reports folder.
        let bytes = match storage
            .get_bounded(&uri, storage.options().max_metadata_bytes, "a drill report")
            .await
        {
            Ok(f) => f.bytes,
            Err(e) => {
                unverified.push(format!("{uri} (could not be read: {})", error_chain(&e)));
                continue;
            }
        };
        // Under the policy's evidenceSigners first (when it lists any): a report one of them signed counts.
        let by_listed = listed_keys.as_ref().and_then(|keys| {
            let mut findings = Vec::new();
            crate::ops::audit::check_report(&uri, &bytes, keys, &mut findings).filter(|_| findings.is_empty())
        });
        let (p, by_listed_signer, flawed) = match by_listed {
            Some((_, p)) => (p, true, None),
            None => {
                let mut findings = Vec::new();
                // Only keys with the drill role sign drill reports ([`crate::evidence::keys::Role`]), as for the
                // deleter. A report by a drill key the policy does not list is kept: it does not count for the
                // weekly gate, but its failures do. So is one whose signature verifies but that carries audit
                // findings (a re-indented envelope, an inconsistent sample): named among the files that do not
                // verify, never counted, but its failures count, as the deleter's `newer_failures` counts them
                // (review E6: the gate passed on an older PASS beside a re-serialised newer FAIL).
                let Some((_, p)) = crate::ops::audit::check_report(&uri, &bytes, &drill_keys, &mut findings) else {
                    unverified.push(uri);
                    continue;
                };
                if findings.is_empty() {
                    (p, listed_keys.is_none(), None)
                } else {
                    unverified.push(uri.clone());
                    (p, false, Some(crate::ops::audit::findings_reason(&findings)))
                }
            }
        };
        let keyids: Vec<String> = serde_json::from_slice::<crate::evidence::Envelope>(&bytes)
            .map(|e| e.signatures.into_iter().map(|s| s.keyid).collect())
            .unwrap_or_default();
        // A merge's own signature says nothing about who drilled: every shard it joins must be signed by a drill
        // key of this trust folder (the merging key's folder may give the role to others) and, under
        // evidenceSigners, by a listed key as well, as the deleter holds its evidence (`check_evidence`).
        let unlisted_shard = p.merged_from.iter().flatten().find(|s| {
            s.keyids.as_ref().is_none_or(|k| {
                k.is_empty()
                    || k.iter()
                        .any(|x| drill_keys.get(x).is_none() || evidence_signers.is_some_and(|ids| !ids.contains(x)))
            })
        });
        let is_flawed = flawed.is_some();
        let unlisted = if let Some(why) = flawed {
            Some(format!("does not verify as written ({why})"))
        } else if let Some(s) = unlisted_shard {
            Some(format!(
                "was merged from shard report {} signed by {}",
                s.report,
                s.keyids
                    .as_ref()
                    .filter(|k| !k.is_empty())
                    .map_or_else(|| "no recorded key".to_owned(), |k| format!("key {}", k.join(", ")))
            ))
        } else if by_listed_signer {
            None
        } else {
            Some(format!("is signed by key {}", keyids.join(", ")))
        };
        let by_listed_signer = unlisted.is_none();
        // One shard's share: only the merge of all shards is a report the gates count, but its failures count.
        let shard_partial = p.is_shard_partial();
        let Ok(finished) = DateTime::parse_from_rfc3339(&p.finished_at) else {
            unverified.push(uri);
            continue;
        };
        let finished = finished.with_timezone(&Utc);
        let Ok(started) = DateTime::parse_from_rfc3339(&p.started_at) else {
            unverified.push(uri);
            continue;
        };
        let started = started.with_timezone(&Utc).min(finished);
        let as_of = if p.merged_from.is_some() { started } else { finished };
        good.push(VerifiedReport {
            uri,
            finished,
            as_of,
            started,
            predicate: p,
            by_listed_signer,
            keyids,
            unlisted,
            flawed: is_flawed,
            shard_partial,
        });
    }
    good.sort_by(|a, b| b.finished.cmp(&a.finished).then_with(|| b.uri.cmp(&a.uri)));
    Ok((good, unverified))
}

/// How a report's age is dated in a gate's detail: its end, or a merged report's oldest shard's start.
fn dated(r: &VerifiedReport) -> String {
    if r.predicate.merged_from.is_some() {
        format!(
            "merged from shards started {} (finished {})",
            r.predicate.started_at, r.predicate.finished_at
        )
    } else {
        format!("finished {}", r.predicate.finished_at)
    }
}

/// The bundles of a table that a weekly drill must cover: those of its candidates still awaiting a purge
/// (`QUARANTINED`, `RESTORE_VERIFIED`), as their quarantine recorded them (bundle URIs, sorted).
#[must_use]
pub fn awaiting_bundles(candidates: &[crate::registry::CandidateRecord]) -> Vec<String> {
    let mut out: Vec<String> = candidates
        .iter()
        .filter(|c| matches!(c.state, State::Quarantined | State::RestoreVerified))
        .filter_map(|c| c.quarantine.as_ref()?["bundles"].as_array().cloned())
        .flatten()
        .filter_map(|b| b["uri"].as_str().map(str::to_owned))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The bundles of `bundles` a report's population does not hold: its listed folder and ids must name them.
fn uncovered<'b>(p: &DrillPredicate, bundles: &'b [String]) -> Vec<&'b str> {
    let source = p.sample.source.as_deref().map(|s| s.trim_end_matches('/'));
    bundles
        .iter()
        .map(String::as_str)
        .filter(|b| {
            let parent = location::parent(b.trim_end_matches('/'));
            let id = location::file_name(b.trim_end_matches('/'));
            !(parent.as_deref().map(|x| x.trim_end_matches('/')) == source
                && source.is_some()
                && p.sample.population_ids.binary_search_by(|x| x.as_str().cmp(id)).is_ok())
        })
        .collect()
}

/// Splits verified reports by the policy's `evidenceSigners` ([`VerifiedReport::by_listed_signer`], computed once
/// in [`verified_reports`]): those that count for the table, and those another drill key signed (or, merged, of a
/// shard another key signed), order kept. Both report gates count only the first; the second are shown in their
/// figures (`unlisted_signer_reports`), and their failures still count.
fn by_signer<'r>(
    reports: impl Iterator<Item = &'r VerifiedReport>,
) -> (Vec<&'r VerifiedReport>, Vec<&'r VerifiedReport>) {
    reports.partition(|r| r.by_listed_signer)
}

/// What a passing report gate adds about the folder's files that do not verify (none: nothing), so that the
/// human output names them as the `unverified_reports` figure does.
fn unverified_note(unverified: &[String]) -> String {
    match unverified {
        [] => String::new(),
        [one] => format!("; 1 report file in the folder does not verify and was not counted: {one}"),
        [first, rest @ ..] => format!(
            "; {} report files in the folder do not verify and were not counted, the first {first} (all in \
             unverified_reports)",
            rest.len() + 1
        ),
    }
}

/// The `unlisted_signer_reports` figure of a report gate: each report, its key ids and why it does not count.
fn unlisted_figure(unlisted: &[&VerifiedReport]) -> Vec<serde_json::Value> {
    unlisted
        .iter()
        .map(|r| serde_json::json!({"report": r.uri, "keyids": r.keyids, "why": r.unlisted}))
        .collect()
}

/// A report gate's detail when the newest report it would count, `u` (`what`), is signed by no key of the policy's
/// `evidenceSigners` (or, merged, joins a shard of such a key or, without the field, of no drill key): names the
/// report, its signer and the field (`count`: how many such reports).
fn not_listed(what: &str, u: &VerifiedReport, evidence_signers: Option<&[String]>, count: usize) -> String {
    // Without evidenceSigners only a merged report lands here: one of its shards was signed by no drill key of
    // the trust folder (or its signers were not recorded).
    if evidence_signers.is_none() {
        return format!(
            "{what}, {}, {}, which is no key with the drill role of the trust folder: every shard of a merged report \
             must be signed by one ({count} such report(s)); merge shards that drill keys signed",
            u.uri,
            u.unlisted
                .as_deref()
                .unwrap_or("was merged from a shard of no drill key"),
        );
    }
    format!(
        "{what}, {}, {}, which the policy's evidenceSigners does not list ({}): only a report signed by a listed key \
         (every shard of a merged one too) counts for this table ({count} such report(s)); drill with a listed key",
        u.uri,
        u.unlisted.as_deref().unwrap_or("is signed by no listed key"),
        evidence_signers.unwrap_or_default().join(", "),
    )
}

/// The weekly gate for one table: the newest verified weekly (`quarantine`) drill report whose population
/// covers `bundles` (the table's bundles awaiting a purge) finished within `max_age`, sampled
/// `min(30, population)` bundles, and every sampled bundle passed.
///
/// `(table_uuid, policy_digest)` is the table and the digest of the policy in force: a report whose results
/// name another policy digest for this table does not count (#23 point 5: the rules changed after that drill,
/// so it proves nothing about them); one that names none (its plan has no `policies`) counts as before.
/// `evidence_signers` is the policy's list of drill keys for the table: when it is set, only a report signed by one
/// of them counts (a report by another drill key of the trust folder is named, never counted; its failures still
/// void the report that counts).
#[allow(clippy::too_many_arguments)]
fn weekly_gate(
    reports: &[VerifiedReport],
    unverified: &[String],
    folder: &str,
    bundles: &[String],
    (table_uuid, policy_digest): (&str, &str),
    evidence_signers: Option<&[String]>,
    max_age: Duration,
    now: DateTime<Utc>,
) -> Gate {
    const NAME: &str = "weekly_restores";
    let covering = |r: &&&VerifiedReport| uncovered(&r.predicate, bundles).is_empty();
    // Covering weekly reports signed by no key of the policy's evidenceSigners, newest first: shown, never counted.
    let (weekly, unlisted) = by_signer(
        reports
            .iter()
            .filter(|r| counts_as_weekly(&r.predicate) && !r.shard_partial),
    );
    let unlisted: Vec<&VerifiedReport> = unlisted
        .into_iter()
        .filter(|r| uncovered(&r.predicate, bundles).is_empty())
        .collect();
    let unlisted_figure = unlisted_figure(&unlisted);
    let other_policy = |r: &VerifiedReport| {
        r.predicate
            .other_policy_digest(table_uuid, policy_digest)
            .map(str::to_owned)
    };
    // Covering reports drilled under another policy of this table, newest first: shown, never counted.
    let stale: Vec<(&str, String)> = weekly
        .iter()
        .filter(covering)
        .filter_map(|r| Some((r.uri.as_str(), other_policy(r)?)))
        .collect();
    let Some(r) = weekly.iter().filter(covering).find(|r| other_policy(r).is_none()) else {
        let detail = match (stale.first(), unlisted.first(), weekly.first()) {
            (None, Some(u), _) => not_listed(
                &format!(
                    "the newest weekly drill report covering the table's {} quarantined bundle(s)",
                    bundles.len()
                ),
                u,
                evidence_signers,
                unlisted.len(),
            ),
            (Some((uri, digest)), _, _) => format!(
                "the newest weekly drill report covering the table's {} quarantined bundle(s), {uri}, drilled table \
                 {table_uuid} under policy sha256 {digest}, but the policy in force has sha256 {policy_digest}: the \
                 rules changed after the drill, so it is no evidence for them ({} such report(s)); drill again",
                bundles.len(),
                stale.len()
            ),
            (None, None, Some(n)) => {
                let missing = uncovered(&n.predicate, bundles);
                format!(
                    "no weekly drill report covers the table's {} quarantined bundle(s): the newest, {} (plan {}, \
                     population {}{}), lacks {} of them (first: {}){}",
                    bundles.len(),
                    n.uri,
                    n.predicate.drill.plan,
                    n.predicate.sample.population,
                    n.predicate
                        .sample
                        .source
                        .as_deref()
                        .map_or_else(|| ", population not recorded".to_owned(), |s| format!(" from {s}")),
                    missing.len(),
                    missing.first().copied().unwrap_or_default(),
                    if n.predicate.sample.population_ids.is_empty() {
                        "; it does not record its population (an older lakedrill wrote it)"
                    } else {
                        ""
                    }
                )
            }
            (None, None, None) => match unverified.first() {
                None => format!("no verified weekly (quarantine) drill report under {folder}"),
                Some(first) => format!(
                    "no verified weekly (quarantine) drill report under {folder}: {} report(s) there do not verify \
                     under the trust folder's keys (with a roles.toml, its drill keys; first: {first})",
                    unverified.len()
                ),
            },
        };
        return Gate::new(
            NAME,
            false,
            serde_json::json!({"report": weekly.first().map(|r| &r.uri), "covering_report": null,
                "quarantined_bundles": bundles.len(), "unverified_reports": unverified,
                "policy_digest": policy_digest,
                "other_policy_reports": stale.iter().map(|(u, d)| serde_json::json!({"report": u, "policy_digest": d})).collect::<Vec<_>>(),
                "evidence_signers": evidence_signers, "unlisted_signer_reports": unlisted_figure}),
            detail,
        );
    };
    let report_policy = r.predicate.policy_digest_of(table_uuid);
    let p = &r.predicate;
    let age = now - r.as_of;
    let want = WEEKLY_SAMPLE.min(p.sample.population);
    let mut problems = Vec::new();
    if age > max_age {
        problems.push(format!(
            "{} ({} h ago), older than the evidence age of {} h",
            dated(r),
            age.num_hours(),
            max_age.num_hours()
        ));
    }
    if p.sample.size < want || want == 0 {
        problems.push(format!(
            "sampled {} of a population of {}, wanted min({WEEKLY_SAMPLE}, {}) = {want}",
            p.sample.size, p.sample.population, p.sample.population
        ));
    }
    if p.summary.failed > 0 || p.summary.passed != p.sample.size {
        problems.push(format!(
            "{} of {} sampled bundles failed",
            p.sample.size - p.summary.passed.min(p.sample.size),
            p.sample.size
        ));
    }
    // Another report in the folder that failed one of these bundles and finished after this one started (during
    // it, or after it) voids it, as the deleter reads the reports beside its evidence: a drill run without a
    // registry leaves its failure only here.
    let ids: BTreeSet<&str> = bundles
        .iter()
        .map(|b| location::file_name(b.trim_end_matches('/')))
        .collect();
    // By id, and by the root this report verified for them, as the deleter matches failures (by root): a failure
    // recorded under another bundle id of the same root counts too.
    let roots: BTreeSet<&str> = p
        .results
        .iter()
        .filter(|res| ids.contains(res.bundle_id.as_str()))
        .filter_map(|res| res.bundle_root.as_deref())
        .collect();
    if let Some(f) = reports.iter().find(|x| {
        x.uri != r.uri
            && x.finished > r.started
            && x.predicate.results.iter().any(|res| {
                res.status != crate::evidence::predicate::RestoreStatus::RestoreVerified
                    && (ids.contains(res.bundle_id.as_str()) || res.judged_root().is_some_and(|j| roots.contains(j)))
            })
    }) {
        problems.push(format!(
            "the drill report {} (plan {}, finished {}, after this report started {}) FAILED a bundle it covers",
            f.uri, f.predicate.drill.plan, f.predicate.finished_at, p.started_at
        ));
    }
    let detail = if problems.is_empty() {
        format!(
            "{} of {} sampled bundles passed (population {}, wanted {want}, retired {}) in {}, covering the table's {} \
             quarantined bundle(s); {}",
            p.summary.passed,
            p.sample.size,
            p.sample.population,
            p.sample.retired,
            r.uri,
            bundles.len(),
            match report_policy {
                Some(_) => format!("drilled under the policy in force (sha256 {policy_digest})"),
                None => "the report names no policy for the table".to_owned(),
            }
        ) + &unverified_note(unverified)
    } else {
        format!("{}: {}", r.uri, problems.join("; "))
    };
    Gate::new(
        NAME,
        problems.is_empty(),
        serde_json::json!({"report": r.uri, "covering_report": r.uri, "plan": p.drill.plan,
            "finished_at": p.finished_at, "started_at": p.started_at, "merged": p.merged_from.is_some(),
            "age_seconds": age.num_seconds(), "max_age_seconds": max_age.num_seconds(),
            "sampled": p.sample.size, "wanted": want, "population": p.sample.population, "retired": p.sample.retired,
            "passed": p.summary.passed, "failed": p.summary.failed, "quarantined_bundles": bundles.len(),
            "policy_digest": policy_digest, "report_policy_digest": report_policy,
            "other_policy_reports": stale.iter().map(|(u, d)| serde_json::json!({"report": u, "policy_digest": d})).collect::<Vec<_>>(),
            "evidence_signers": evidence_signers, "report_keyids": r.keyids,
            "unlisted_signer_reports": unlisted_figure, "unverified_reports": unverified}),
        detail,
    )
}

/// What the quarterly gate holds a table's recoveries to: its policy's `critical`, `recoveryRtoLimit` and
/// `rpoTarget`, and the table's DR checkpoints in the registry.
#[derive(Debug, Clone, Copy)]
struct QuarterlyRules<'a> {
    /// Whether the gate applies at all.
    critical: bool,
    /// The longest a recovery may take.
    rto_limit: Duration,
    /// The largest RPO a recovery may show; `None`: RPO 0 (DESIGN §7, "RPO equal to the declared checkpoint").
    rpo_target: Option<Duration>,
    /// The table's checkpoints, ordered by `at` then declaration (the registry's order): the last is the newest.
    checkpoints: &'a [Checkpoint],
    /// The policy's `evidenceSigners` (for messages and figures: whether each report counts was decided in
    /// [`verified_reports`], as for the weekly gate).
    evidence_signers: Option<&'a [String]>,
}

#[allow(clippy::cast_precision_loss)]
fn seconds(d: Duration) -> f64 {
    d.num_milliseconds() as f64 / 1000.0
}

/// Whether two RFC 3339 instants are the same instant (at millisecond precision).
fn same_instant(a: &str, b: DateTime<Utc>) -> bool {
    DateTime::parse_from_rfc3339(a).is_ok_and(|t| t.timestamp_millis() == b.timestamp_millis())
}

/// What is wrong with one recovery of the table (one result of a cold-backup report) under the table's rules: it did
/// not verify, it took longer than the policy's `recoveryRtoLimit` (whatever limit the drill plan set itself), it
/// recovered another snapshot than the declared checkpoint, its RPO is over the `rpoTarget` (0 without one), or the
/// checkpoint it declares is not the registry's record. Every recovery a quarterly gate relies on is held to all of
/// them: the covering report's, and the newest checkpoint's (which may be in an older report).
fn result_problems(x: &crate::evidence::predicate::DrillResult, rules: &QuarterlyRules<'_>) -> Vec<String> {
    let limit = seconds(rules.rto_limit);
    let target = rules.rpo_target.map_or(0.0, seconds);
    let target_text = rpo_target_text(rules);
    let mut problems = Vec::new();
    if x.status != crate::evidence::predicate::RestoreStatus::RestoreVerified {
        problems.push(format!(
            "backup {} FAILED ({} finding(s))",
            x.bundle_id,
            x.findings.len()
        ));
    }
    if x.rto_seconds > limit {
        problems.push(format!(
            "backup {} took RTO {:.1}s, over the limit of {limit:.0}s",
            x.bundle_id, x.rto_seconds
        ));
    }
    if x.declared_snapshot_id.is_none() || x.declared_snapshot_id != x.snapshot_id {
        problems.push(format!(
            "backup {} recovered snapshot {:?}, not the declared checkpoint {:?}",
            x.bundle_id, x.snapshot_id, x.declared_snapshot_id
        ));
    }
    if let Some(v) = x.rpo_seconds
        && v > target
    {
        problems.push(format!(
            "backup {} recovered snapshot {:?} with RPO {v:.3}s (checkpoint {} declared at {}), over {target_text}",
            x.bundle_id,
            x.snapshot_id,
            x.checkpoint_id.as_deref().unwrap_or("-"),
            x.declared_at.as_deref().unwrap_or("-")
        ));
    }
    // The registry is the record of what was declared: a recovered checkpoint it does not hold, or holds
    // otherwise, proves nothing about the table's recovery points.
    if let Some(id) = &x.checkpoint_id {
        match rules.checkpoints.iter().find(|c| &c.checkpoint_id == id) {
            None => problems.push(format!(
                "backup {} declares checkpoint {id}, which the registry does not hold for the table",
                x.bundle_id
            )),
            Some(c)
                if x.declared_snapshot_id != Some(c.snapshot_id)
                    || !x.declared_at.as_deref().is_some_and(|a| same_instant(a, c.at)) =>
            {
                problems.push(format!(
                    "backup {} declares checkpoint {id} as snapshot {:?} at {}, the registry as snapshot {} at {}",
                    x.bundle_id,
                    x.declared_snapshot_id,
                    x.declared_at.as_deref().unwrap_or("-"),
                    c.snapshot_id,
                    c.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                ));
            }
            Some(_) => {}
        }
    }
    problems
}

/// The RPO target in words, for a quarterly gate's detail.
fn rpo_target_text(rules: &QuarterlyRules<'_>) -> String {
    match rules.rpo_target {
        Some(t) => format!("the rpoTarget of {:.3}s", seconds(t)),
        None => "the target of 0s (no rpoTarget: recovery must be at the declared checkpoint)".to_owned(),
    }
}

/// The quarterly gate for one table: for a table whose policy says `critical: true`, the newest verified
/// cold-backup drill report that recovered this table finished within `window`, recovered it with every
/// check passing, under `rto_limit`, at the declared checkpoint (recovered snapshot = declared snapshot) with
/// an RPO within the policy's `rpoTarget` (0 without one), every checkpoint it recovered is in the registry
/// as the report declares it, and the table's newest DR checkpoint has a verified recovery of a backup in
/// a verified cold-backup report within `window` (matched by checkpoint id; the newest such result decides).
/// `NOT_REQUIRED` for other tables.
///
/// Under the policy's `evidenceSigners` the rule is the weekly gate's ([`by_signer`]): only a report signed by a
/// listed key (merged: every shard too) is the covering report or a verified recovery of the newest checkpoint; a
/// report of another drill key is named in `unlisted_signer_reports`, and its failures still count (a failure of
/// the table finished after the covering report started, or the newest recovery of the newest checkpoint failed).
#[allow(clippy::too_many_lines)]
fn quarterly_gate(
    reports: &[VerifiedReport],
    table_uuid: &str,
    rules: &QuarterlyRules<'_>,
    window: Duration,
    now: DateTime<Utc>,
) -> Gate {
    const NAME: &str = "quarterly_recovery";
    if !rules.critical {
        return Gate {
            name: NAME,
            status: NOT_REQUIRED,
            figures: serde_json::json!({"critical": false}),
            detail: "not required: the policy does not mark the table critical (critical: true)".into(),
        };
    }
    let of_table = |x: &&crate::evidence::predicate::DrillResult| x.table_uuid.as_deref() == Some(table_uuid);
    let cold = |r: &&VerifiedReport| r.predicate.drill.kind == QUARTERLY_KIND;
    let newest_checkpoint = rules.checkpoints.last();
    let checkpoint_json = newest_checkpoint.map(|c| {
        serde_json::json!({"checkpoint_id": c.checkpoint_id, "snapshot_id": c.snapshot_id,
            "at": c.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)})
    });
    let target_text = rpo_target_text(rules);
    // The cold-backup reports that recovered this table, newest first: those that count, and those signed by a drill
    // key the policy's evidenceSigners does not list (shown, never counted). A shard's partial report is neither.
    let (counted, unlisted) = by_signer(
        reports
            .iter()
            .filter(cold)
            .filter(|r| !r.shard_partial && r.predicate.results.iter().any(|x| of_table(&x))),
    );
    let unlisted_json = unlisted_figure(&unlisted);
    let Some(r) = counted.first().copied() else {
        let mut detail = match unlisted.first() {
            Some(u) => not_listed(
                &format!("the newest cold-backup drill report that recovered table {table_uuid}"),
                u,
                rules.evidence_signers,
                unlisted.len(),
            ),
            None => format!("no verified cold-backup drill report recovered table {table_uuid}"),
        };
        if let Some(c) = newest_checkpoint {
            detail.push_str(&format!(
                "; its newest DR checkpoint {} (snapshot {}, at {}) has no verified backup recovery",
                c.checkpoint_id,
                c.snapshot_id,
                c.at.to_rfc3339()
            ));
        }
        return Gate::new(
            NAME,
            false,
            serde_json::json!({"critical": true, "report": null, "newest_checkpoint": checkpoint_json,
                "newest_checkpoint_recovered_in": null, "rpo_target_seconds": rules.rpo_target.map(seconds),
                "evidence_signers": rules.evidence_signers, "unlisted_signer_reports": unlisted_json}),
            detail,
        );
    };
    let p = &r.predicate;
    let limit = seconds(rules.rto_limit);
    let results: Vec<&crate::evidence::predicate::DrillResult> = p.results.iter().filter(of_table).collect();
    let rto = results.iter().map(|x| x.rto_seconds).fold(0.0, f64::max);
    let rpo = results.iter().filter_map(|x| x.rpo_seconds).fold(0.0, f64::max);
    let age = now - r.as_of;
    let mut problems = Vec::new();
    if age > window {
        problems.push(format!(
            "{} ({} days ago), older than {} days",
            dated(r),
            age.num_days(),
            window.num_days()
        ));
    }
    for x in &results {
        problems.extend(result_problems(x, rules));
    }
    // Any other cold-backup report that failed the table and finished after the counted report started voids it,
    // as a newer failure voids the weekly gate's report: one that counts, one of a drill key the policy does not
    // list, or one shard's partial report (none of the last two counts, but their failures do).
    let verified = |x: &crate::evidence::predicate::DrillResult| {
        x.status == crate::evidence::predicate::RestoreStatus::RestoreVerified
    };
    if let Some(f) = reports.iter().filter(cold).find(|u| {
        u.uri != r.uri && u.finished > r.started && u.predicate.results.iter().any(|x| of_table(&x) && !verified(x))
    }) {
        let what = match (f.by_listed_signer, f.shard_partial) {
            (false, _) if f.flawed => format!("it {}; ", f.unlisted.as_deref().unwrap_or_default()),
            (false, _) => "signed by a key the policy's evidenceSigners does not list; ".to_owned(),
            (true, true) => "one shard's partial report; ".to_owned(),
            (true, false) => String::new(),
        };
        problems.push(format!(
            "the drill report {} ({what}finished {}, after this report started {}) FAILED a recovery of the table",
            f.uri, f.predicate.finished_at, p.started_at
        ));
    }
    // The newest checkpoint: its newest recovery in a report within the window must have verified (a pass counts
    // only in a report that counts; a failure in any).
    let mut newest_recovered_in = None;
    if let Some(c) = newest_checkpoint {
        let newest_result = reports
            .iter()
            .filter(cold)
            .filter(|rep| now - rep.as_of <= window)
            .find_map(|rep| {
                rep.predicate
                    .results
                    .iter()
                    .find(|x| {
                        of_table(x)
                            && x.checkpoint_id.as_deref() == Some(c.checkpoint_id.as_str())
                            && ((rep.by_listed_signer && !rep.shard_partial) || !verified(x))
                    })
                    .map(|x| (rep, x))
            });
        match newest_result {
            // The covering report's own results were checked above.
            Some((rep, x)) if verified(x) && rep.uri == r.uri => newest_recovered_in = Some(rep.uri.clone()),
            // A recovery in an older report is held to the same rules as the covering report's: the policy's RTO
            // limit (not the one its drill plan set itself), recovered = declared, the RPO target and the registry's
            // record of the checkpoint. Before, its status alone was read.
            Some((rep, x)) if verified(x) => {
                let wrong = result_problems(x, rules);
                if wrong.is_empty() {
                    newest_recovered_in = Some(rep.uri.clone());
                } else {
                    problems.push(format!(
                        "the newest DR checkpoint {} (snapshot {}) has no recovery that meets the table's rules: its \
                         newest, in {}: {}",
                        c.checkpoint_id,
                        c.snapshot_id,
                        rep.uri,
                        wrong.join("; ")
                    ));
                }
            }
            Some((rep, x)) => problems.push(format!(
                "the newest DR checkpoint {} (snapshot {}) has no verified backup recovery: its newest, backup {} in \
                 {}, FAILED",
                c.checkpoint_id, c.snapshot_id, x.bundle_id, rep.uri
            )),
            None => problems.push(format!(
                "the newest DR checkpoint {} (snapshot {}, at {}) has no verified backup recovery: no cold-backup \
                 drill report within {} days recovered a backup of it",
                c.checkpoint_id,
                c.snapshot_id,
                c.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                window.num_days()
            )),
        }
    }
    let detail = if problems.is_empty() {
        format!(
            "{} recovered the table from {} backup(s): max RTO {rto:.1}s (limit {limit:.0}s), max RPO {rpo:.3}s \
             (within {target_text}), recovered = declared checkpoint{}",
            r.uri,
            results.len(),
            newest_checkpoint.map_or_else(String::new, |c| format!(
                "; newest DR checkpoint {} recovered",
                c.checkpoint_id
            ))
        )
    } else {
        format!("{}: {}", r.uri, problems.join("; "))
    };
    Gate::new(
        NAME,
        problems.is_empty(),
        serde_json::json!({"critical": true, "report": r.uri, "finished_at": p.finished_at,
            "age_seconds": age.num_seconds(), "window_seconds": window.num_seconds(), "backups": results.len(),
            "max_rto_seconds": rto, "rto_limit_seconds": limit, "max_rpo_seconds": rpo,
            "rpo_target_seconds": rules.rpo_target.map(seconds),
            "recovered_equals_declared": results.iter().all(|x| x.declared_snapshot_id.is_some() && x.declared_snapshot_id == x.snapshot_id),
            "newest_checkpoint": checkpoint_json, "newest_checkpoint_recovered_in": newest_recovered_in,
            "evidence_signers": rules.evidence_signers, "report_keyids": r.keyids,
            "unlisted_signer_reports": unlisted_json}),
        detail,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::predicate::{DrillInfo, DrillResult, RestoreStatus, SampleInfo, Summary};

    const TABLE: &str = "6f1c2a9e-0000-4000-8000-000000000001";

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default()
    }

    fn checkpoint(id: &str, snapshot: i64, at: &str) -> Checkpoint {
        Checkpoint {
            checkpoint_id: id.into(),
            table_uuid: TABLE.into(),
            snapshot_id: snapshot,
            at: t(at),
            created_at: t(at),
        }
    }

    /// A verified recovery of `snapshot` from a backup declaring checkpoint `id` at `declared_at`, RPO `rpo`.
    fn recovered(id: &str, snapshot: i64, declared_at: &str, rpo: f64) -> DrillResult {
        DrillResult {
            table_uuid: Some(TABLE.into()),
            snapshot_id: Some(snapshot),
            objects_verified: 3,
            bytes_verified: 30,
            rto_seconds: 2.0,
            rpo_seconds: Some(rpo),
            declared_snapshot_id: Some(snapshot),
            rto_limit_seconds: Some(14_400.0),
            rows_promised: Some(1),
            rows_scanned: Some(1),
            checkpoint_id: Some(id.into()),
            declared_at: Some(declared_at.into()),
            ..DrillResult::new(format!("{snapshot}-root-{id}"), RestoreStatus::RestoreVerified)
        }
    }

    fn report(uri: &str, finished: &str, results: Vec<DrillResult>) -> VerifiedReport {
        let passed = results
            .iter()
            .filter(|r| r.status == RestoreStatus::RestoreVerified)
            .count();
        let failed = results.len() - passed;
        VerifiedReport {
            uri: uri.into(),
            finished: t(finished),
            as_of: t(finished),
            started: t(finished),
            predicate: DrillPredicate {
                drill: DrillInfo {
                    id: "d".into(),
                    kind: "cold-backup".into(),
                    plan: "quarterly".into(),
                    plan_digest: "p".into(),
                    policy_digest: None,
                    implementation_digest: "i".into(),
                    evidence_retention: None,
                    parallel_bundles: None,
                },
                started_at: finished.into(),
                finished_at: finished.into(),
                sample: SampleInfo {
                    seed: 1,
                    population: results.len(),
                    size: results.len(),
                    selected: results.iter().map(|r| r.bundle_id.clone()).collect(),
                    retired: 0,
                    source: None,
                    population_ids: Vec::new(),
                    population_roots: Vec::new(),
                    sampler: None,
                    coverage_weeks: None,
                    coverage: Vec::new(),
                    forced: Vec::new(),
                },
                results,
                summary: Summary::of(passed, failed),
                previous_report: None,
                shard: None,
                merged_from: None,
            },
            by_listed_signer: true,
            keyids: Vec::new(),
            unlisted: None,
            flawed: false,
            shard_partial: false,
        }
    }

    fn gate(reports: &[VerifiedReport], rpo_target: Option<Duration>, checkpoints: &[Checkpoint]) -> Gate {
        quarterly_gate(
            reports,
            TABLE,
            &QuarterlyRules {
                critical: true,
                rto_limit: Duration::hours(4),
                rpo_target,
                checkpoints,
                evidence_signers: None,
            },
            Duration::days(QUARTERLY_WINDOW_DAYS),
            t("2026-03-01T00:00:00Z"),
        )
    }

    const AT: &str = "2026-02-01T00:00:00.000Z";

    /// Asserts that the gate failed and that its detail says `needle`.
    fn fails_naming(g: &Gate, needle: &str) {
        assert_eq!(g.status, "FAIL", "{}", g.detail);
        assert!(g.detail.contains(needle), "want {needle:?} in {}", g.detail);
    }

    #[test]
    fn a_recovery_at_the_declared_checkpoint_passes_with_rpo_0() {
        let cps = [checkpoint("c-1", 7, AT)];
        let reports = [report("r1", "2026-02-02T00:00:00Z", vec![recovered("c-1", 7, AT, 0.0)])];
        let g = gate(&reports, None, &cps);
        assert_eq!(g.status, "PASS", "{}", g.detail);
        assert_eq!(g.figures["max_rpo_seconds"], 0.0);
        assert_eq!(g.figures["recovered_equals_declared"], true);
        assert_eq!(g.figures["newest_checkpoint_recovered_in"], "r1");
        assert!(g.detail.contains("max RPO 0.000s"), "{}", g.detail);
        assert!(g.detail.contains("newest DR checkpoint c-1 recovered"), "{}", g.detail);
    }

    #[test]
    fn an_rpo_over_the_target_fails_naming_the_figure_and_the_target() {
        // The backed-up snapshot is an hour older than the checkpoint it declares.
        let cps = [checkpoint("c-1", 7, AT)];
        let reports = [report(
            "r1",
            "2026-02-02T00:00:00Z",
            vec![recovered("c-1", 7, AT, 3600.0)],
        )];
        let g = gate(&reports, None, &cps);
        fails_naming(&g, "RPO 3600.000s");
        fails_naming(&g, "over the target of 0s (no rpoTarget");
        let g = gate(&reports, Some(Duration::minutes(30)), &cps);
        fails_naming(&g, "over the rpoTarget of 1800.000s");
        assert_eq!(g.figures["rpo_target_seconds"], 1800.0);
        // Within a target of two hours it passes, and says so.
        let g = gate(&reports, Some(Duration::hours(2)), &cps);
        assert_eq!(g.status, "PASS", "{}", g.detail);
        assert!(
            g.detail
                .contains("max RPO 3600.000s (within the rpoTarget of 7200.000s)"),
            "{}",
            g.detail
        );
    }

    #[test]
    fn another_recovered_snapshot_than_declared_fails() {
        let cps = [checkpoint("c-1", 7, AT)];
        let mut r = recovered("c-1", 7, AT, 0.0);
        r.snapshot_id = Some(6);
        let g = gate(&[report("r1", "2026-02-02T00:00:00Z", vec![r])], None, &cps);
        fails_naming(&g, "recovered snapshot Some(6), not the declared checkpoint Some(7)");
        assert_eq!(g.figures["recovered_equals_declared"], false);
    }

    #[test]
    fn the_newest_checkpoint_without_a_verified_recovery_fails_naming_it() {
        let later = "2026-02-10T00:00:00.000Z";
        let cps = [checkpoint("c-1", 7, AT), checkpoint("c-2", 9, later)];
        let reports = [report("r1", "2026-02-02T00:00:00Z", vec![recovered("c-1", 7, AT, 0.0)])];
        let g = gate(&reports, None, &cps);
        fails_naming(
            &g,
            "the newest DR checkpoint c-2 (snapshot 9, at 2026-02-10T00:00:00.000Z) has no verified backup recovery",
        );
        assert_eq!(g.figures["newest_checkpoint"]["checkpoint_id"], "c-2");
        // Recovered in an older report within the window: it counts.
        let older = report("r0", "2026-02-11T00:00:00Z", vec![recovered("c-2", 9, later, 0.0)]);
        let newest = report("r1", "2026-02-12T00:00:00Z", vec![recovered("c-1", 7, AT, 0.0)]);
        let g = gate(&[newest, older], None, &cps);
        assert_eq!(g.status, "PASS", "{}", g.detail);
        assert_eq!(g.figures["newest_checkpoint_recovered_in"], "r0");
        // Its newest recovery failed: it does not.
        let mut bad = recovered("c-2", 9, later, 0.0);
        bad.status = RestoreStatus::Failed;
        let newest = report("r2", "2026-02-13T00:00:00Z", vec![bad]);
        let older = report("r0", "2026-02-11T00:00:00Z", vec![recovered("c-2", 9, later, 0.0)]);
        let g = gate(&[newest, older], None, &cps);
        fails_naming(&g, "its newest, backup 9-root-c-2 in r2, FAILED");
        // No report at all names the checkpoint too.
        let g = gate(&[], None, &cps);
        fails_naming(&g, "newest DR checkpoint c-2");
    }

    #[test]
    fn a_recovered_checkpoint_the_registry_does_not_hold_as_declared_fails() {
        let cps = [checkpoint("c-1", 7, AT)];
        let reports = [report("r1", "2026-02-02T00:00:00Z", vec![recovered("c-9", 7, AT, 0.0)])];
        let g = gate(&reports, None, &cps);
        fails_naming(&g, "declares checkpoint c-9, which the registry does not hold");
        // Held with another recovery point than the report declares.
        let cps = [checkpoint("c-9", 7, "2026-02-01T01:00:00Z")];
        let g = gate(&reports, None, &cps);
        fails_naming(
            &g,
            "declares checkpoint c-9 as snapshot Some(7) at 2026-02-01T00:00:00.000Z, the registry as snapshot 7 at 2026-02-01T01:00:00.000Z",
        );
    }

    /// `report` as one signed by a drill key the policy's `evidenceSigners` does not list.
    fn unlisted(mut r: VerifiedReport) -> VerifiedReport {
        r.by_listed_signer = false;
        r.keyids = vec!["other".into()];
        r.unlisted = Some("is signed by key other".into());
        r
    }

    /// The quarterly gate holds its reports to the policy's `evidenceSigners` as the weekly gate does: a newer
    /// recovery signed by an unlisted key is named, not counted (the older listed one decides; alone, it fails the
    /// gate naming it), and its failure still voids the listed one. Before, the newest cold-backup report counted
    /// whoever signed it.
    #[test]
    fn the_quarterly_gate_counts_only_reports_by_a_listed_signer_and_their_failures_still_count() {
        let cps = [checkpoint("c-1", 7, AT)];
        let signers = ["listed".to_owned()];
        let held = |reports: &[VerifiedReport]| {
            quarterly_gate(
                reports,
                TABLE,
                &QuarterlyRules {
                    critical: true,
                    rto_limit: Duration::hours(4),
                    rpo_target: None,
                    checkpoints: &cps,
                    evidence_signers: Some(&signers),
                },
                Duration::days(QUARTERLY_WINDOW_DAYS),
                t("2026-03-01T00:00:00Z"),
            )
        };
        let pass = |uri: &str, at: &str| report(uri, at, vec![recovered("c-1", 7, AT, 0.0)]);
        let g = held(&[unlisted(pass("r2", "2026-02-03T00:00:00Z"))]);
        fails_naming(
            &g,
            "r2, is signed by key other, which the policy's evidenceSigners does not list (listed)",
        );
        assert_eq!(g.figures["unlisted_signer_reports"][0]["report"], "r2", "{}", g.figures);

        let g = held(&[
            unlisted(pass("r2", "2026-02-03T00:00:00Z")),
            pass("r1", "2026-02-02T00:00:00Z"),
        ]);
        assert_eq!(g.status, "PASS", "{}", g.detail);
        assert_eq!(g.figures["report"], "r1");
        assert_eq!(g.figures["newest_checkpoint_recovered_in"], "r1");
        assert_eq!(g.figures["unlisted_signer_reports"][0]["report"], "r2", "{}", g.figures);

        let mut failed = recovered("c-1", 7, AT, 0.0);
        failed.status = RestoreStatus::Failed;
        let g = held(&[
            unlisted(report("r2", "2026-02-03T00:00:00Z", vec![failed])),
            pass("r1", "2026-02-02T00:00:00Z"),
        ]);
        fails_naming(&g, "r2 (signed by a key the policy's evidenceSigners does not list");
        fails_naming(&g, "its newest, backup 7-root-c-1 in r2, FAILED");
    }

    /// The newest checkpoint's recovery in an older report is held to the covering report's rules. Here the newest
    /// report recovered an older checkpoint within every limit, and the newest checkpoint's only recovery, in an
    /// older report, took longer than the policy's `recoveryRtoLimit` (4 h) though within the 10 h its drill plan
    /// allowed itself, or recovered another snapshot than it declares: the gate read its status alone and passed.
    #[test]
    fn the_newest_checkpoints_recovery_in_an_older_report_is_held_to_the_policys_rules() {
        let earlier = "2026-01-20T00:00:00.000Z";
        let cps = [checkpoint("c-0", 5, earlier), checkpoint("c-1", 7, AT)];
        let mut slow = recovered("c-1", 7, AT, 0.0);
        slow.rto_seconds = 20_000.0;
        slow.rto_limit_seconds = Some(36_000.0);
        let reports = [
            report("r1", "2026-02-03T00:00:00Z", vec![recovered("c-0", 5, earlier, 0.0)]),
            report("r0", "2026-02-02T00:00:00Z", vec![slow]),
        ];
        let g = gate(&reports, None, &cps);
        fails_naming(
            &g,
            "the newest DR checkpoint c-1 (snapshot 7) has no recovery that meets the table's rules: its newest, in r0",
        );
        fails_naming(&g, "took RTO 20000.0s, over the limit of 14400s");
        assert_eq!(g.figures["newest_checkpoint_recovered_in"], serde_json::Value::Null);
        // Recovered at another snapshot than the checkpoint declares.
        let mut elsewhere = recovered("c-1", 7, AT, 0.0);
        elsewhere.snapshot_id = Some(6);
        let reports = [
            report("r1", "2026-02-03T00:00:00Z", vec![recovered("c-0", 5, earlier, 0.0)]),
            report("r0", "2026-02-02T00:00:00Z", vec![elsewhere]),
        ];
        fails_naming(
            &gate(&reports, None, &cps),
            "recovered snapshot Some(6), not the declared checkpoint Some(7)",
        );
        // Within the rules it counts (the control).
        let reports = [
            report("r1", "2026-02-03T00:00:00Z", vec![recovered("c-0", 5, earlier, 0.0)]),
            report("r0", "2026-02-02T00:00:00Z", vec![recovered("c-1", 7, AT, 0.0)]),
        ];
        let g = gate(&reports, None, &cps);
        assert_eq!(g.status, "PASS", "{}", g.detail);
        assert_eq!(g.figures["newest_checkpoint_recovered_in"], "r0");
    }

    /// A failed recovery of the table in any other cold-backup report that finished after the covering report
    /// started voids it, also one in a report that counts (the scan read only reports of unlisted signers).
    #[test]
    fn a_failure_in_a_counted_report_finished_after_the_covering_report_started_fails_the_quarterly_gate() {
        let cps = [checkpoint("c-1", 7, AT)];
        let started = "2026-02-01T12:00:00Z";
        let mut covering = report("r1", "2026-02-03T00:00:00Z", vec![recovered("c-1", 7, AT, 0.0)]);
        covering.started = t(started);
        covering.predicate.started_at = started.into();
        let mut failed = recovered("c-1", 7, AT, 0.0);
        failed.status = RestoreStatus::Failed;
        let during = report("r0", "2026-02-02T00:00:00Z", vec![failed]);
        let g = gate(&[covering, during], None, &cps);
        fails_naming(
            &g,
            "the drill report r0 (finished 2026-02-02T00:00:00Z, after this report started 2026-02-01T12:00:00Z) \
             FAILED a recovery of the table",
        );
        // One that finished before the covering report started is older: it does not.
        let covering = report("r1", "2026-02-03T00:00:00Z", vec![recovered("c-1", 7, AT, 0.0)]);
        let mut failed = recovered("c-1", 7, AT, 0.0);
        failed.status = RestoreStatus::Failed;
        let before = report("r0", "2026-02-02T00:00:00Z", vec![failed]);
        let g = gate(&[covering, before], None, &cps);
        assert_eq!(g.status, "PASS", "{}", g.detail);
    }

    /// A one-snapshot table (current, `main`) whose manifest list is `metadata/snap-1.avro`, with `objects` as read.
    fn one_snapshot(objects: Option<crate::model::object::SnapshotObjects>) -> PlanInput {
        use crate::govern::input::{Baseline, Protections, RefInfo, SnapshotInfo, TableDefaults};
        let unreadable: BTreeMap<i64, String> = if objects.is_none() {
            BTreeMap::from([(
                1,
                "file:///t/metadata/m-1.avro: manifest named by a manifest list does not exist".to_owned(),
            )])
        } else {
            BTreeMap::new()
        };
        PlanInput {
            table_uuid: TABLE.into(),
            generation_blake3: "g".into(),
            snapshots: vec![SnapshotInfo {
                snapshot_id: 1,
                parent_id: None,
                timestamp_ms: 0,
                objects,
            }],
            refs: vec![RefInfo {
                name: "main".into(),
                snapshot_id: 1,
                is_branch: true,
                max_ref_age_ms: None,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            }],
            current_snapshot_id: Some(1),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable,
            listing: None,
            protections: Protections {
                protected_refs: vec!["main".into()],
                ..Protections::default()
            },
            min_snapshot_age_ms: 0,
            orphan_safety_interval_ms: 0,
            now_ms: 1,
            baseline: Baseline::relative(1, 0, 0),
            statistics_files: BTreeMap::new(),
        }
    }

    /// Candidate `c-1` with `paths` deleted.
    fn deleted(paths: &[&str]) -> BTreeMap<String, Vec<crate::registry::ObjectState>> {
        BTreeMap::from([(
            "c-1".to_owned(),
            paths
                .iter()
                .map(|p| crate::registry::ObjectState {
                    path: (*p).to_owned(),
                    state: State::Deleted,
                    updated_at: t(AT),
                })
                .collect(),
        )])
    }

    fn objects(paths: &[(&str, crate::model::object::Layer)]) -> crate::model::object::SnapshotObjects {
        paths
            .iter()
            .map(|(p, layer)| crate::model::object::ObjectRef {
                path: (*p).to_owned(),
                layer: *layer,
                size: 1,
            })
            .collect::<Vec<_>>()
            .into()
    }

    /// Gate 1 counts the statistics and partition-statistics files of the kept snapshots as the planner protects
    /// them: one deleted is a protected object deleted. Before, it read only the walked layers.
    #[test]
    fn a_deleted_statistics_file_of_a_kept_snapshot_fails_gate_1() {
        use crate::model::object::Layer;
        let mut input = one_snapshot(Some(objects(&[
            ("metadata/snap-1.avro", Layer::ManifestList),
            ("metadata/m-1.avro", Layer::Manifest),
            ("data/a.parquet", Layer::Data),
        ])));
        input
            .statistics_files
            .insert(1, vec!["metadata/1.stats".into(), "metadata/1.partition-stats".into()]);
        let plan = crate::govern::closure::plan(&input);
        let lists = BTreeMap::from([(1, "metadata/snap-1.avro".to_owned())]);
        let g = protected_gate(
            &input,
            &plan,
            &lists,
            &deleted(&["metadata/1.partition-stats", "data/gone.parquet"]),
        );
        assert_eq!(g.status, "FAIL", "{}", g.detail);
        assert_eq!(g.figures["objects"], serde_json::json!(["metadata/1.partition-stats"]));
        assert!(g.detail.starts_with("1 of 2 deleted objects"), "{}", g.detail);
        // The control: only an object nothing kept reaches.
        let g = protected_gate(&input, &plan, &lists, &deleted(&["data/gone.parquet"]));
        assert_eq!(g.status, "PASS", "{}", g.detail);
    }

    /// A kept snapshot whose files cannot be read fails gate 1, named with the object and the reason; its manifest
    /// list, as the metadata names it, is reached all the same. Before, the snapshot was left out of what the
    /// closure reaches and the gate passed: a wrongly deleted manifest of a kept snapshot hid itself.
    #[test]
    fn a_kept_snapshot_whose_files_cannot_be_read_fails_gate_1_naming_it() {
        let input = one_snapshot(None);
        let plan = crate::govern::closure::plan(&input);
        let lists = BTreeMap::from([(1, "metadata/snap-1.avro".to_owned())]);
        let g = protected_gate(&input, &plan, &lists, &deleted(&["metadata/m-1.avro"]));
        assert_eq!(g.status, "FAIL", "{}", g.detail);
        assert!(
            g.detail.contains("the files of 1 kept snapshot(s) cannot be read")
                && g.detail.contains("retained snapshot 1 (")
                && g.detail
                    .contains("metadata/m-1.avro: manifest named by a manifest list does not exist"),
            "{}",
            g.detail
        );
        assert_eq!(g.figures["unreadable_kept_snapshots"].as_array().map(Vec::len), Some(1));
        let g = protected_gate(&input, &plan, &lists, &deleted(&["metadata/snap-1.avro"]));
        assert_eq!(
            g.figures["objects"],
            serde_json::json!(["metadata/snap-1.avro"]),
            "{}",
            g.detail
        );
    }

    #[test]
    fn a_table_not_marked_critical_needs_no_recovery() {
        let g = quarterly_gate(
            &[],
            TABLE,
            &QuarterlyRules {
                critical: false,
                rto_limit: Duration::hours(4),
                rpo_target: None,
                checkpoints: &[checkpoint("c-1", 7, AT)],
                evidence_signers: None,
            },
            Duration::days(92),
            t("2026-03-01T00:00:00Z"),
        );
        assert_eq!(g.status, NOT_REQUIRED);
        assert!(g.passed());
    }

    /// Gate 5 must see every hold, however it was set. A governance decision sets its holds in the registry and
    /// records one `decision_applied` event (no `hold_set` event); the gate read only `hold_set` events, so a delete
    /// confirmed after a decision's table hold passed it. The same run with `hold set` is the control.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_delete_after_a_hold_set_by_a_governance_decision_fails_the_hold_gate() {
        use crate::registry::{NewDecision, RolloutStage, WorldStamp};
        for by_decision in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let reg = Registry::open(&format!("sqlite:{}", dir.path().join("registry.db").display()))
                .await
                .unwrap();
            let now = t("2026-02-01T00:00:00Z");
            let stamp = WorldStamp {
                metadata_location: "m1".into(),
                metadata_blake3: "b1".into(),
                protected_ref_root: "r1".into(),
                lease_watermark: 0,
                hold_generation: 0,
                protection_generation: 0,
                deletion_rights: String::new(),
            };
            let candidate = serde_json::json!({
                "kind": "expired-snapshots",
                "snapshot_ids": [7],
                "objects": [{"path": "data/a.parquet", "layer": "data", "size": 1}],
            });
            reg.candidate_record(TABLE, "c-1", &candidate, &stamp, &["data/a.parquet".into()], now)
                .await
                .unwrap();
            reg.candidate_transition("c-1", State::Quarantined, "sealed", None, None, now)
                .await
                .unwrap();
            reg.rollout_set(TABLE, "t", &RolloutStage::Test, "tests", "me", None, None, now)
                .await
                .unwrap()
                .unwrap();
            let location = TableLocation::new("s3://b/t", "s3://b/t".into(), "s3://b/t/metadata/v1.json").unwrap();
            // Accepted at hold generation 0, before any hold.
            let accepted = reg
                .candidate_accept("c-1", &stamp, &location, 0, vec![], false, now)
                .await
                .unwrap();
            assert_eq!(accepted, crate::registry::Acceptance::Approved);
            reg.receipt_add("c-1", "data/a.parquet", &serde_json::json!({"phase": "requested"}), now)
                .await
                .unwrap();
            let doc = serde_json::json!({"deletion_rights": []});
            if by_decision {
                let d = NewDecision {
                    version: 1,
                    table_uuid: TABLE,
                    issuer: "gov",
                    keyid: "k",
                    envelope_sha256: "e",
                    decision: &doc,
                    holds: vec![("case-1".into(), Some((HoldScope::Table, "litigation".to_owned())))],
                };
                reg.decision_apply(&d, now).await.unwrap();
            } else {
                reg.hold_set(TABLE, HoldScope::Table, "litigation", now).await.unwrap();
            }
            // The delete's answer recorded after the hold: its request may have gone out under it.
            reg.receipt_add(
                "c-1",
                "data/a.parquet",
                &serde_json::json!({"phase": "confirmed", "provider_result": "deleted"}),
                now,
            )
            .await
            .unwrap();
            let input = PlanInput {
                table_uuid: TABLE.into(),
                generation_blake3: "g".into(),
                snapshots: Vec::new(),
                refs: Vec::new(),
                current_snapshot_id: None,
                defaults: crate::govern::input::TableDefaults::default(),
                live_metadata_files: BTreeSet::new(),
                unreadable: BTreeMap::new(),
                listing: None,
                protections: crate::govern::input::Protections {
                    holds: reg
                        .holds(TABLE)
                        .await
                        .unwrap()
                        .into_iter()
                        .map(|h| (h.hold_id, h.scope))
                        .collect(),
                    ..Default::default()
                },
                min_snapshot_age_ms: 0,
                orphan_safety_interval_ms: 0,
                now_ms: 0,
                baseline: crate::govern::input::Baseline::relative(0, 0, 0),
                statistics_files: BTreeMap::new(),
            };
            assert_eq!(input.protections.holds.len(), 1);
            let candidates = reg.candidates(TABLE).await.unwrap();
            let g = hold_gate(&reg, &input, &location, &candidates).await.unwrap();
            let how = if by_decision { "decision" } else { "hold set" };
            assert_eq!(g.name, "acceptances_after_hold");
            assert_eq!(g.status, "FAIL", "{how}: {g:?}");
            assert_eq!(g.figures["deletes_after_a_hold"], 1, "{how}: {g:?}");
            assert_eq!(g.figures["delete_requests"], 1, "{how}: {g:?}");
            reg.close().await;
        }
    }
}
