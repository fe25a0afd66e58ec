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
use crate::govern::policy::Policy;
use crate::io::store::Storage;
use crate::model::location;
use crate::ops::drill::DrillPredicate;
use crate::registry::{EventKind, Registry, State};

/// The weekly drill sample the gate wants.
pub const WEEKLY_SAMPLE: usize = 30;

/// The status of a gate that does not apply to the table (the quarterly recovery of a table the policy does
/// not mark critical). It counts as passed.
pub const NOT_REQUIRED: &str = "NOT_REQUIRED";

/// How far back the quarterly recovery gate looks by default.
pub const QUARTERLY_WINDOW_DAYS: i64 = 92;

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
    policy: &Policy,
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

    // 3 and 4. Signed drill reports, for this table.
    let (weekly, quarterly) = report_gates(storage, reports, &candidates, &input.table_uuid, policy, now).await?;

    // 5. Acceptances and deletes after a hold took effect.
    let g5 = hold_gate(reg, input, &candidates).await?;

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
    policy: &Policy,
    reports: &ReportSource<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<Gate>> {
    let candidates = reg.candidates(&input.table_uuid).await?;
    let (weekly, quarterly) = report_gates(storage, reports, &candidates, &input.table_uuid, policy, now).await?;
    let holds = hold_gate(reg, input, &candidates).await?;
    Ok(vec![weekly, quarterly, holds])
}

/// Gate 5: delete acceptances recorded after a hold of the table took effect, and delete requests confirmed
/// after a covering hold the candidate was not accepted against.
async fn hold_gate(reg: &Registry, input: &PlanInput, candidates: &[crate::registry::CandidateRecord]) -> Result<Gate> {
    let events = reg.events(&input.table_uuid).await?;
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
    let (deletes_after_hold, deletes_total) = deletes_after_holds(reg, input, candidates, &events).await?;
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
    src: &ReportSource<'_>,
    candidates: &[crate::registry::CandidateRecord],
    table_uuid: &str,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<(Gate, Gate)> {
    let folder = location::canonical_uri(&src.reports_uri)?;
    let (reports, unverified) = verified_reports(storage, src).await?;
    let bundles = awaiting_bundles(candidates);
    let weekly = weekly_gate(
        &reports,
        &unverified,
        &folder,
        &bundles,
        src.since.unwrap_or_else(|| policy.evidence_max_age()),
        now,
    );
    let quarterly = quarterly_gate(
        &reports,
        table_uuid,
        policy.critical(),
        policy.recovery_rto_limit(),
        src.since.unwrap_or_else(|| Duration::days(QUARTERLY_WINDOW_DAYS)),
        now,
    );
    Ok((weekly, quarterly))
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

/// A drill report that verified under the trust store, with its finish time.
struct VerifiedReport {
    uri: String,
    finished: DateTime<Utc>,
    predicate: DrillPredicate,
}

/// Every report under the folder that verifies (newest first), and the URIs of those that do not.
async fn verified_reports(storage: &Storage, src: &ReportSource<'_>) -> Result<(Vec<VerifiedReport>, Vec<String>)> {
    let folder = location::canonical_uri(&src.reports_uri)?;
    let mut good = Vec::new();
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
        good.push(VerifiedReport {
            uri,
            finished: finished.with_timezone(&Utc),
            predicate: p,
        });
    }
    good.sort_by(|a, b| b.finished.cmp(&a.finished).then_with(|| b.uri.cmp(&a.uri)));
    Ok((good, unverified))
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

/// The weekly gate for one table: the newest verified weekly (`quarantine`) drill report whose population
/// covers `bundles` (the table's bundles awaiting a purge) finished within `max_age`, sampled
/// `min(30, population)` bundles, and every sampled bundle passed.
fn weekly_gate(
    reports: &[VerifiedReport],
    unverified: &[String],
    folder: &str,
    bundles: &[String],
    max_age: Duration,
    now: DateTime<Utc>,
) -> Gate {
    const NAME: &str = "weekly_restores";
    let weekly: Vec<&VerifiedReport> = reports
        .iter()
        .filter(|r| r.predicate.drill.kind == "quarantine")
        .collect();
    let Some(r) = weekly.iter().find(|r| uncovered(&r.predicate, bundles).is_empty()) else {
        let detail = match weekly.first() {
            Some(n) => {
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
            None => format!("no verified weekly (quarantine) drill report under {folder}"),
        };
        return Gate::new(
            NAME,
            false,
            serde_json::json!({"report": weekly.first().map(|r| &r.uri), "covering_report": null,
                "quarantined_bundles": bundles.len(), "unverified_reports": unverified}),
            detail,
        );
    };
    let p = &r.predicate;
    let age = now - r.finished;
    let want = WEEKLY_SAMPLE.min(p.sample.population);
    let mut problems = Vec::new();
    if age > max_age {
        problems.push(format!(
            "finished {} ({} h ago), older than the evidence age of {} h",
            p.finished_at,
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
    let detail = if problems.is_empty() {
        format!(
            "{} of {} sampled bundles passed (population {}, wanted {want}, retired {}) in {}, covering the table's {} \
             quarantined bundle(s)",
            p.summary.passed,
            p.sample.size,
            p.sample.population,
            p.sample.retired,
            r.uri,
            bundles.len()
        )
    } else {
        format!("{}: {}", r.uri, problems.join("; "))
    };
    Gate::new(
        NAME,
        problems.is_empty(),
        serde_json::json!({"report": r.uri, "covering_report": r.uri, "plan": p.drill.plan,
            "finished_at": p.finished_at, "age_seconds": age.num_seconds(), "max_age_seconds": max_age.num_seconds(),
            "sampled": p.sample.size, "wanted": want, "population": p.sample.population, "retired": p.sample.retired,
            "passed": p.summary.passed, "failed": p.summary.failed, "quarantined_bundles": bundles.len()}),
        detail,
    )
}

/// The quarterly gate for one table: for a table whose policy says `critical: true`, the newest verified
/// cold-backup drill report that recovered this table finished within `window`, recovered it with every
/// check passing, under `rto_limit`, at the declared checkpoint. `NOT_REQUIRED` for other tables.
fn quarterly_gate(
    reports: &[VerifiedReport],
    table_uuid: &str,
    critical: bool,
    rto_limit: Duration,
    window: Duration,
    now: DateTime<Utc>,
) -> Gate {
    const NAME: &str = "quarterly_recovery";
    if !critical {
        return Gate {
            name: NAME,
            status: NOT_REQUIRED,
            figures: serde_json::json!({"critical": false}),
            detail: "not required: the policy does not mark the table critical (critical: true)".into(),
        };
    }
    let mine = |r: &&VerifiedReport| {
        r.predicate.drill.kind == "cold-backup"
            && r.predicate
                .results
                .iter()
                .any(|x| x.table_uuid.as_deref() == Some(table_uuid))
    };
    let Some(r) = reports.iter().find(mine) else {
        return Gate::new(
            NAME,
            false,
            serde_json::json!({"critical": true, "report": null}),
            format!("no verified cold-backup drill report recovered table {table_uuid}"),
        );
    };
    let p = &r.predicate;
    #[allow(clippy::cast_precision_loss)]
    let limit = rto_limit.num_milliseconds() as f64 / 1000.0;
    let results: Vec<&crate::evidence::predicate::DrillResult> = p
        .results
        .iter()
        .filter(|x| x.table_uuid.as_deref() == Some(table_uuid))
        .collect();
    let rto = results.iter().map(|x| x.rto_seconds).fold(0.0, f64::max);
    let rpo = results.iter().filter_map(|x| x.rpo_seconds).fold(0.0, f64::max);
    let age = now - r.finished;
    let mut problems = Vec::new();
    if age > window {
        problems.push(format!(
            "finished {} ({} days ago), older than {} days",
            p.finished_at,
            age.num_days(),
            window.num_days()
        ));
    }
    for x in &results {
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
    }
    let detail = if problems.is_empty() {
        format!(
            "{} recovered the table from {} backup(s): max RTO {rto:.1}s (limit {limit:.0}s), max RPO {rpo:.1}s, \
             recovered = declared checkpoint",
            r.uri,
            results.len()
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
            "recovered_equals_declared": results.iter().all(|x| x.declared_snapshot_id.is_some() && x.declared_snapshot_id == x.snapshot_id)}),
        detail,
    )
}
