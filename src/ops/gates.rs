//! The six safety gates of DESIGN §7, recomputed from what was recorded — never from what the deleter
//! believed at the time:
//!
//! 1. `protected_objects_deleted`: objects in a `DELETED`/`VERIFIED` state that the table's protected
//!    closure (refs, leases, checkpoints, holds and the current snapshot, as `plan` computes it now) still
//!    reaches, or that lie under an open writer's prefix or a held prefix. Must be 0.
//! 2. `inventory_difference`: for every candidate, deleted objects outside its accepted inventory, and
//!    inventory objects of a finished candidate (`DELETED`/`VERIFIED`) that are not deleted. Must be 0.
//! 3. `weekly_restores`: the newest signed `quarantine` drill report within the window (default 7 days)
//!    verifies, sampled 30 bundles (or every bundle when fewer exist) and all passed root verification.
//!    Bundles a finished purge retired are outside the drill's population (the drill counts them in
//!    `sample.retired`, shown here as `retired`), so a purge never turns this gate FAIL. The gates read
//!    reports and the registry only, never a bundle.
//! 4. `quarterly_recovery`: the newest signed `cold-backup` drill report within the window (default 92
//!    days) verifies, its gate is `PASS` (every table recovered under its RTO limit) and every recovered
//!    snapshot is the declared checkpoint.
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
use crate::io::store::Storage;
use crate::model::location;
use crate::ops::drill::DrillPredicate;
use crate::registry::{EventKind, Registry, State};

/// The weekly drill sample the gate wants.
pub const WEEKLY_SAMPLE: usize = 30;

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

    /// Whether it passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.status == "PASS"
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

fn under(path: &str, prefix: &str) -> bool {
    let p = prefix.trim_end_matches('/');
    path == p || path.starts_with(&format!("{p}/"))
}

/// Computes the six gates for one table.
///
/// # Errors
/// Registry and storage errors (an unreadable report is a failed gate, not an error).
#[allow(clippy::too_many_lines)]
pub async fn safety_gates(
    storage: &Storage,
    reg: &Registry,
    input: &PlanInput,
    plan: &Plan,
    reports: &ReportSource<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<Gate>> {
    let uuid = &input.table_uuid;
    let candidates = reg.candidates(uuid).await?;
    let mut states: BTreeMap<String, Vec<crate::registry::ObjectState>> = BTreeMap::new();
    for c in &candidates {
        states.insert(c.candidate_id.clone(), reg.object_states(&c.candidate_id).await?);
    }
    let gone = |s: State| matches!(s, State::Deleted | State::Verified);

    // 1. Protected objects deleted.
    let retained: BTreeSet<i64> = plan.protected.iter().map(|p| p.snapshot_id).collect();
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
    .collect();
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
    let g1 = Gate::new(
        "protected_objects_deleted",
        protected_deleted.is_empty(),
        serde_json::json!({"protected_deleted": protected_deleted.len(), "deleted": deleted_total, "objects": protected_deleted}),
        format!(
            "{} of {deleted_total} deleted objects are reached by the protected closure",
            protected_deleted.len()
        ),
    );

    // 2. Candidate inventory vs deleted set.
    let mut extra = Vec::new();
    let mut missing = Vec::new();
    for c in &candidates {
        let inventory: BTreeSet<&str> = c.candidate["objects"]
            .as_array()
            .map(|a| a.iter().filter_map(|o| o["path"].as_str()).collect())
            .unwrap_or_default();
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

    // 3 and 4. Signed drill reports.
    let (weekly, quarterly) = report_gates(storage, reports, now).await?;

    // 5. Acceptances after a hold took effect.
    let events = reg.events(uuid).await?;
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
        if let Some(h) = events.iter().find(|h| {
            h.kind == EventKind::HoldSet
                && h.generation < e.generation
                && h.detail["hold_generation"].as_i64().is_some_and(|g| g > stamped)
        }) {
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
    let (deletes_after_hold, deletes_total) = deletes_after_holds(reg, input, &candidates, &events).await?;
    let g5 = Gate::new(
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
    );

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

/// Whether the hold of a `hold_set` event (its detail) covers `path` of a candidate with `snapshot_ids`.
/// Prefixes are compared relative to the table location: an active hold's as the planner resolved it, a
/// cleared one's as written (relative; one written as a URI counts as covering).
fn hold_covers(detail: &serde_json::Value, input: &PlanInput, snapshot_ids: &[i64], path: &str) -> bool {
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
        // A cleared prefix hold written as a URI cannot be related to the table here: counted as covering.
        Ok(crate::registry::HoldScope::Prefix(p)) => p.contains("://") || under(path, p.trim_matches('/')),
        // The whole table, or a scope that cannot be read: counted as covering.
        Ok(crate::registry::HoldScope::Table) | Err(_) => true,
    }
}

/// Every delete request of the table's candidates confirmed after a covering hold they were not accepted
/// against (candidate and path, up to all of them), and how many delete requests were confirmed in all.
async fn deletes_after_holds(
    reg: &Registry,
    input: &PlanInput,
    candidates: &[crate::registry::CandidateRecord],
    events: &[crate::registry::Event],
) -> Result<(Vec<String>, usize)> {
    let holds: Vec<&crate::registry::Event> = events.iter().filter(|e| e.kind == EventKind::HoldSet).collect();
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
            // A confirmation of a request that was sent (not one settled by a re-check alone).
            let sent = r.receipt["phase"] == "confirmed"
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
                    && hold_covers(&h.detail, input, &ids, &r.path)
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

/// Every report envelope under the reports folder (shard reports excluded: their merge is the report).
async fn report_files(storage: &Storage, folder: &str) -> Result<Vec<String>> {
    Ok(storage
        .list(folder)
        .await?
        .into_iter()
        .map(|o| o.uri)
        .filter(|u| u.ends_with(".dsse.json") && !u.contains("/shards/"))
        .collect())
}

async fn report_gates(storage: &Storage, src: &ReportSource<'_>, now: DateTime<Utc>) -> Result<(Gate, Gate)> {
    let folder = location::canonical_uri(&src.reports_uri)?;
    let mut newest: BTreeMap<&'static str, (DateTime<Utc>, String, DrillPredicate)> = BTreeMap::new();
    let mut unverified = Vec::new();
    for uri in report_files(storage, &folder).await? {
        let bytes = storage.get(&uri).await?.bytes;
        let mut findings = Vec::new();
        let Some((_, p)) = crate::ops::audit::check_report(&uri, &bytes, src.trust, &mut findings) else {
            unverified.push(uri);
            continue;
        };
        if !findings.is_empty() {
            unverified.push(uri);
            continue;
        }
        let Ok(finished) = DateTime::parse_from_rfc3339(&p.finished_at) else {
            unverified.push(uri);
            continue;
        };
        let finished = finished.with_timezone(&Utc);
        let kind: &'static str = match p.drill.kind.as_str() {
            "quarantine" => "quarantine",
            "cold-backup" => "cold-backup",
            _ => continue,
        };
        if newest.get(kind).is_none_or(|(t, _, _)| *t < finished) {
            newest.insert(kind, (finished, uri, p));
        }
    }
    let weekly_window = src.since.unwrap_or_else(|| Duration::days(7));
    let quarterly_window = src.since.unwrap_or_else(|| Duration::days(92));
    let weekly = match newest.get("quarantine") {
        Some((t, uri, p)) if now - *t <= weekly_window => {
            let want = WEEKLY_SAMPLE.min(p.sample.population);
            let pass = p.sample.size >= want && p.summary.failed == 0 && p.summary.passed == p.sample.size && want > 0;
            Gate::new(
                "weekly_restores",
                pass,
                serde_json::json!({"report": uri, "finished_at": p.finished_at, "sampled": p.sample.size,
                    "population": p.sample.population, "retired": p.sample.retired,
                    "passed": p.summary.passed, "failed": p.summary.failed}),
                format!(
                    "{} of {} sampled bundles passed (population {}, wanted {want}) in {uri}",
                    p.summary.passed, p.sample.size, p.sample.population
                ),
            )
        }
        other => Gate::new(
            "weekly_restores",
            false,
            serde_json::json!({"report": other.map(|(_, u, _)| u), "unverified_reports": unverified}),
            format!(
                "no verified quarantine drill report within {} days",
                weekly_window.num_days()
            ),
        ),
    };
    let quarterly = match newest.get("cold-backup") {
        Some((t, uri, p)) if now - *t <= quarterly_window => {
            let max_rto = p.results.iter().map(|r| r.rto_seconds).fold(0.0, f64::max);
            let max_rpo = p.results.iter().filter_map(|r| r.rpo_seconds).fold(0.0, f64::max);
            let declared = p
                .results
                .iter()
                .all(|r| r.declared_snapshot_id.is_some() && r.declared_snapshot_id == r.snapshot_id);
            let pass = p.summary.gate == "PASS" && declared && !p.results.is_empty();
            Gate::new(
                "quarterly_recovery",
                pass,
                serde_json::json!({"report": uri, "finished_at": p.finished_at, "tables": p.results.len(),
                    "passed": p.summary.passed, "max_rto_seconds": max_rto, "max_rpo_seconds": max_rpo,
                    "recovered_equals_declared": declared}),
                format!(
                    "{} of {} backups recovered, max RTO {max_rto:.1}s, max RPO {max_rpo:.1}s, recovered = declared: {declared}",
                    p.summary.passed,
                    p.results.len()
                ),
            )
        }
        other => Gate::new(
            "quarterly_recovery",
            false,
            serde_json::json!({"report": other.map(|(_, u, _)| u)}),
            format!(
                "no verified cold-backup drill report within {} days",
                quarterly_window.num_days()
            ),
        ),
    };
    Ok((weekly, quarterly))
}
