//! `quarantine`: seal a bundle for every snapshot of a candidate, then make exactly one catalog commit.
//!
//! It refuses when the candidate is not one of a fresh plan of the table's current generation, when the
//! independent closure check finds a non-deletable object in it, and when a lease, hold, DR checkpoint or writer
//! that came while it sealed covers it (related under the registry's write lock at the commit; one elsewhere on
//! the table refuses nothing). [`release`] is the way back
//! before the deleter's acceptance point: it removes a candidate's quarantine tags in one catalog commit and
//! records the operator's reason, so that the next plan proposes its snapshots again. This module deletes
//! nothing; deletion belongs to [`crate::ops::deleter`].

use std::path::Path;

use chrono::{DateTime, Utc};
use iceberg::spec::{SnapshotReference, SnapshotRetention};

use crate::error::{Error, Result};
use crate::govern::closure::{self};
use crate::govern::policy::Policy;
use crate::io::store::DelayPoint;
use crate::model::location;
use crate::ops::binding::{protect_claimed, taken_over};
use crate::ops::context::Context;
use crate::ops::plan::*;
use crate::registry::{PurgeBaseline, Registry, State, WorldStamp};
use crate::report::output::{Outcome, Verdict};
use crate::table::{Table, TableSource};

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
    crate::ops::plan::check_bindings(&table, &policy)?;
    let refuse = |reason: String| refused(candidate_id, &reason);
    // Only the build the policy pins may quarantine (a different build may still plan, drill and report).
    let digest = crate::ops::binding::digest_binding(ctx, &policy)?;
    if !digest.allows_reclamation() {
        return refuse(digest.message().unwrap_or_default());
    }
    // Quarantine is reversible and goes on; the purge of what it holds will refuse until the policy pins a build.
    if !digest.allows_purge() {
        crate::error::warn(digest.message().unwrap_or_default());
    }
    let reg = registry(ctx).await?;
    // Only the policy bound to the table at `rollout set` (when one is) decides what is quarantined.
    let binding = crate::ops::binding::policy_binding(&reg, &table.metadata().uuid().to_string(), &policy).await?;
    if let Some(why) = binding.refusal() {
        return refuse(why);
    }
    let now = ctx.now();
    // The candidate must come out of a fresh plan of this very generation. The stamp is read first: a lease or
    // hold landing during the plan moves its counters, so the purge's compare-and-set sees it.
    let stamp = world_stamp(&table, &policy, &reg, None).await?;
    let input = gather(ctx, &table, &policy, &reg, now, None).await?;
    let p = ctx.hooks.planned(&input, closure::plan(&input));
    refuse_unreadable_retained(&table, &input, &p)?;
    // Cannot decide (the plan proposes no such candidate; this says why): an orphan candidate while a protection
    // names a snapshot that left the table (its leftover files look unreferenced), a snapshot candidate while a
    // protected ref is missing (the snapshot it protected is unknown).
    let undecided = if candidate_id.starts_with("o-") {
        closure::protections_of_missing_snapshots(&input)
    } else if candidate_id.starts_with("c-") {
        closure::missing_protected_refs(&input)
    } else {
        Vec::new()
    };
    if !undecided.is_empty() {
        return Err(Error::corrupt(
            table.metadata_uri(),
            format!(
                "cannot decide: {}; candidate {candidate_id} is not quarantined",
                undecided.join("; ")
            ),
        ));
    }
    let Some(candidate) = p.candidates.iter().find(|c| c.candidate_id == candidate_id).cloned() else {
        // A candidate that went on (quarantined, purged, protected, released) is no longer planned: its recorded
        // state says why, where "re-plan" would send the operator after a candidate that will not come back.
        let went_on = reg
            .candidate_heads(&table.metadata().uuid().to_string())
            .await?
            .into_iter()
            .find(|h| h.candidate_id == candidate_id)
            .filter(|h| !matches!(h.state, State::Discovered | State::UnreferencedEligible));
        if let Some(head) = went_on {
            return refuse(format!(
                "{candidate_id} is already {} (`lakedrill status {candidate_id}` shows its record): only a candidate of a fresh plan is quarantined",
                head.state.as_str()
            ));
        }
        return refuse(format!(
            "{candidate_id} is not a candidate of the table's current generation (the table, a lease, a hold or a ref changed since the plan): re-plan"
        ));
    };
    let orphans = candidate.kind == "orphans";
    // Defense in depth: the candidate is checked against the non-deletable set by code that does not share
    // the planner's logic; a conflict means a planner bug, and the candidate is PROTECTED for good. Orphans
    // are also checked to be referenced by nothing, under no writer prefix and no hold.
    let conflicts = if crate::safety::weakened(crate::safety::Check::ClosureGate) {
        Vec::new()
    } else {
        let mut c = closure::nondeletable_conflicts(&input, &candidate.snapshot_ids, &candidate.objects);
        if orphans {
            c.extend(
                closure::orphan_rebase(&input, &candidate.objects)
                    .released_objects
                    .into_iter()
                    .map(|(p, why)| format!("{p}: {why}")),
            );
        }
        c
    };
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
    let run = match crate::ops::binding::claim_run(&reg, candidate_id, now, "quarantine").await? {
        Ok(run) => run,
        Err(why) => return refuse(why),
    };
    // The claim is renewed while the quarantine works: sealing a large snapshot or waiting on a slow catalog writes
    // nothing to the registry for longer than the silence after which a second run may take a claim over, and a
    // second quarantine of the same candidate would then commit and record the same bundles this one may remove.
    // Set from the moment the catalog commit landed (or may have) until the candidate is settled (its quarantine
    // recorded and it is QUARANTINED or PROTECTED): an error in between keeps the claim (see below).
    let unsettled: std::sync::Mutex<Option<Unsettled>> = std::sync::Mutex::new(None);
    let work = async {
        if orphans {
            let request = crate::ops::orphans::HoldRequest {
                table: &table,
                input: &input,
                policy: &policy,
                reg: &reg,
                candidate: &candidate,
                stamp: &stamp,
                key: &key,
                bundles,
                digest: serde_json::to_value(&digest).map_err(|e| Error::Internal(e.to_string()))?,
                policy_digest: policy.digest().to_owned(),
                now,
                run_id: &run.run_id,
            };
            hold_orphans(ctx, source, &request).await
        } else {
            seal_and_commit(
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
                &run.run_id,
                &unsettled,
            )
            .await
        }
    };
    let out = crate::ops::binding::with_heartbeat(ctx, &reg, candidate_id, &run.run_id, Box::pin(work)).await;
    // A commit that landed (or may have) and an error before the candidate was settled: the claim is kept. It is
    // what keeps the candidate's files out of orphan detection while nothing else says its snapshots may have left
    // the table (`plan::snapshot_candidate_files`), and `quarantine release` takes it over once this run is gone.
    let landed = unsettled
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let (Err(e), Some(landed)) = (&out, landed) {
        return Err(Error::invalid(
            candidate_id,
            format!(
                "the quarantine's catalog commit landed ({}) but the candidate could not be settled ({}); the \
                 bundles sealed for it are the way back to its snapshots: {}; {candidate_id} stays claimed by run {} \
                 (the claim is kept, so that `plan` keeps its files out of orphan detection); once the registry \
                 answers, run `lakedrill status {candidate_id}` and `lakedrill quarantine release {candidate_id} \
                 --reason …` (it takes the claim over and releases the candidate; in bundle mode bring the \
                 snapshots back first with `set-current --from-bundle`)",
                landed.committed,
                e.with_causes(),
                landed.bundles.join(", "),
                run.run_id
            ),
        ));
    }
    let released = reg.purge_release(candidate_id, &run.run_id, ctx.now()).await;
    let out = out?;
    released?;
    Ok(out)
}

/// A quarantine whose catalog commit landed (or may have) and whose candidate is not settled yet.
struct Unsettled {
    /// The committed metadata location, or what the commit was based on when its outcome is unknown.
    committed: String,
    /// The bundles sealed for the candidate.
    bundles: Vec<String>,
}

/// Marks (`Some`) or clears (`None`) [`Unsettled`].
fn set_unsettled(slot: &std::sync::Mutex<Option<Unsettled>>, value: Option<Unsettled>) {
    *slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = value;
}

/// `quarantine o-…` while the candidate is claimed: read and copy the orphans, relate them to the table and the
/// registry as they are once that is done, then seal and hold them.
async fn hold_orphans(
    ctx: &Context,
    source: &TableSource,
    r: &crate::ops::orphans::HoldRequest<'_>,
) -> Result<Outcome> {
    let id = &r.candidate.candidate_id;
    let refuse = |reason: String| refused(id, &reason);
    // The files' ages were the host's now minus the store's times: the two clocks must agree first.
    crate::ops::orphans::store_clock_agrees(ctx, r.table.location().root_uri()).await?;
    let prepared = match crate::ops::orphans::read_and_copy(ctx, r).await? {
        Ok(p) => p,
        Err(why) => return refuse(why),
    };
    // Where the orphans stand now. Reading and copying them took its time; meanwhile a slow writer may have
    // committed one (a late commit, an `add_files`), or a writer or a legal hold may have come over one. The table
    // and the registry are read again (the stamp first, as at the plan) and the files related to them as the
    // purge's rebase relates them; what is elsewhere on the table refuses nothing (before, any lease, hold,
    // checkpoint or writer refused it, and on a live table they come with every job).
    ctx.storage.failpoint_delay(DelayPoint::OrphanHold).await;
    let (table, _, _) = ctx.catalog_table(source).await?;
    if table.metadata().uuid() != r.table.metadata().uuid() {
        return refuse(format!(
            "the catalog entry names another table now (uuid {}, planned {}): re-plan (nothing left the table)",
            table.metadata().uuid(),
            r.table.metadata().uuid()
        ));
    }
    let stamp = world_stamp(&table, r.policy, r.reg, None).await?;
    let input = gather(ctx, &table, r.policy, r.reg, ctx.now(), None).await?;
    if let Some(why) = crate::ops::orphans::standing_refusal(&input, &r.candidate.objects, table.metadata_uri())? {
        return refuse(why);
    }
    let mut out = crate::ops::orphans::seal_and_hold(ctx, r, prepared, &stamp, &input).await?;
    // Held (a file left aside under its private name makes the verdict findings, and the rest is held all the same).
    if out.json["status"] != "QUARANTINED" {
        return Ok(out);
    }
    // The files left the table one at a time after that check; a late commit in between finds its file gone. The
    // table is read once more and what it references now (or a writer or hold covers) is put back at once, not at
    // the next plan or purge. The quarantine is recorded by now: when this read fails, it says so and stands.
    let again = async {
        let (table, _, _) = ctx.catalog_table(source).await?;
        let stamp = world_stamp(&table, r.policy, r.reg, None).await?;
        let input = gather(ctx, &table, r.policy, r.reg, ctx.now(), None).await?;
        Ok::<_, Error>((stamp, input))
    };
    // Only the read is left to the next plan when it fails: the put-back's own error (a claim another run took
    // over, a registry or storage error while files go back) stops the run (exit 2), never a quarantine "done".
    let back = match again.await {
        Ok((stamp, input)) => {
            let back = crate::ops::orphans::put_back_protected(
                ctx,
                r.reg,
                &input,
                &stamp,
                ctx.now(),
                Some((r.candidate.candidate_id.as_str(), r.run_id)),
            )
            .await?;
            for line in &back.standing {
                crate::report::output::warn(line);
            }
            back.findings
        }
        Err(e) => {
            crate::report::output::warn(format!(
                "{id}: the table could not be read again once the orphans left it ({e}); the next plan or purge puts \
                 back any of them a late commit references"
            ));
            Vec::new()
        }
    };
    if !back.is_empty() {
        for line in &back {
            out.human.push_str(&format!("  {line}\n"));
        }
        out.json["orphans_put_back"] = serde_json::json!(back);
        out.json["candidate"] =
            serde_json::to_value(r.reg.candidate(id).await?).map_err(|e| Error::Internal(e.to_string()))?;
    }
    Ok(out)
}

/// A quarantine's refusal of `candidate_id` (exit 1).
fn refused(candidate_id: &str, reason: &str) -> Result<Outcome> {
    Outcome::new(
        Verdict::Findings,
        &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
        format!("REFUSED: {reason}\n"),
    )
}

/// Catalog commits a quarantine makes before giving up when other writers keep winning the compare-and-set.
const QUARANTINE_COMMIT_ATTEMPTS: usize = 3;

/// The table's metadata with the candidate quarantined: its snapshots under `tags` (tag mode) or removed (bundle
/// mode), built on `table`'s generation.
fn quarantine_metadata(
    table: &Table,
    mode: QuarantineMode,
    tags: &[(String, i64)],
    snapshot_ids: &[i64],
) -> Result<crate::table::FullMetadata> {
    // Through `Table::change`, which follows every ref: the iceberg crate alone writes no refs for a v1 table, so
    // the quarantine tags were never stored there and the table's own tags and branches were dropped.
    let mut change = table.change();
    match mode {
        QuarantineMode::Tag => {
            for (name, id) in tags {
                change = change.set_ref(
                    name,
                    SnapshotReference::new(*id, SnapshotRetention::Tag { max_ref_age_ms: None }),
                )?;
            }
        }
        QuarantineMode::Bundle => change = change.remove_snapshots(snapshot_ids),
    }
    change.build()
}

/// Judges the planned candidate on a generation that a commit by another writer made while the quarantine sealed
/// (or, `lead` saying so, on the planned generation with deletion rights a governance decision changed meanwhile):
/// `Err(reason)` unless every one of its snapshots is still in the table and still expirable and every one of its
/// objects is still reachable from none of the snapshots the table keeps and under no writer or hold (the purge's
/// rebase, with nothing released), and the independent closure check finds nothing. The quarantine does not
/// rebase a candidate: what it seals and tags is exactly what was planned, or it is refused.
async fn rejudge(
    ctx: &Context,
    table: &Table,
    policy: &Policy,
    reg: &Registry,
    candidate: &closure::Candidate,
    lead: &str,
) -> Result<std::result::Result<(), String>> {
    let gone: Vec<i64> = candidate
        .snapshot_ids
        .iter()
        .copied()
        .filter(|id| table.metadata().snapshot_by_id(*id).is_none())
        .collect();
    if !gone.is_empty() {
        return Ok(Err(format!(
            "{lead} and snapshot(s) {gone:?} of the candidate left the table"
        )));
    }
    let input = gather(ctx, table, policy, reg, ctx.now(), None).await?;
    let plan = closure::plan(&input);
    let r = closure::rebase(&input, &plan, &candidate.snapshot_ids, &candidate.objects);
    if !r.unreadable.is_empty() {
        return Ok(Err(format!(
            "{lead} and the layers of snapshot(s) {:?} of its generation cannot be read: nothing can be shown \
             unreachable",
            r.unreadable
        )));
    }
    if !r.unchanged() {
        let snapshots = r
            .released_snapshots
            .iter()
            .map(|(id, why)| format!("snapshot {id}: {why}"));
        let objects = r.released_objects.iter().take(20).map(|(p, why)| format!("{p}: {why}"));
        return Ok(Err(format!(
            "{lead} and its generation keeps part of the candidate: {}",
            snapshots.chain(objects).collect::<Vec<_>>().join("; ")
        )));
    }
    let conflicts = closure::nondeletable_conflicts(&input, &candidate.snapshot_ids, &candidate.objects);
    if !conflicts.is_empty() {
        return Ok(Err(format!(
            "{lead} and the independent closure check finds on its generation: {}",
            conflicts.join("; ")
        )));
    }
    Ok(Ok(()))
}

/// Removes the bundle folders this quarantine created before it was refused: no registry record names them, and
/// left in the bundles folder they would swell every drill's population with bundles of nothing quarantined. They
/// are lakedrill's own output of this run, never table data. Returns what the refusal says about them.
///
/// A folder is removed only while this run still holds the candidate's claim, and only when this run wrote its
/// envelope ([`crate::bundle::SealReport::created`]). A run that lost its claim (another quarantine of the candidate
/// took it over) may be refused because that run committed: it sealed into the same folders and recorded them, and
/// they are its candidate's only way back once its snapshots left the table. A folder this run found sealed already
/// was written by another run, which may have recorded it. Either is kept; a bundle of nothing quarantined is only
/// clutter in the drills, a removed recorded bundle is a lost snapshot.
async fn discard_bundles(
    ctx: &Context,
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    sealed: &[crate::bundle::SealReport],
) -> Result<String> {
    let uris = |b: &[&crate::bundle::SealReport]| b.iter().map(|b| b.uri.as_str()).collect::<Vec<_>>().join(", ");
    let all: Vec<&crate::bundle::SealReport> = sealed.iter().collect();
    let holder = reg.purge_run(candidate_id).await?;
    if holder.as_ref().is_none_or(|h| h.run_id != run_id) {
        return Ok(format!(
            "the bundles sealed for it were kept, since this run no longer holds {candidate_id}'s claim and another \
             run may have recorded them: {}",
            uris(&all)
        ));
    }
    let (ours, found): (Vec<_>, Vec<_>) = all.into_iter().partition(|b| b.created);
    for b in &ours {
        for o in ctx.storage.list(&b.uri).await? {
            ctx.storage.delete(&o.uri).await?;
        }
    }
    Ok(if found.is_empty() {
        "the bundles sealed for it were removed".to_owned()
    } else {
        format!(
            "the bundles sealed for it were removed but for those another run had sealed already, which were kept: {}",
            uris(&found)
        )
    })
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
    (table, cat, ident): (&Table, &crate::io::catalog::Catalog, &crate::io::catalog::TableIdent),
    policy: &Policy,
    key: &crate::evidence::keys::SigningKey,
    reg: &Registry,
    now: DateTime<Utc>,
    candidate: &closure::Candidate,
    stamp: &WorldStamp,
    digest: &crate::ops::binding::DigestBinding,
    run_id: &str,
    unsettled: &std::sync::Mutex<Option<Unsettled>>,
) -> Result<Outcome> {
    let refuse = |reason: String| refused(candidate_id, &reason);
    // Claimed now; another quarantine may have finished between our check and our claim.
    let state = reg.candidate_state(candidate_id).await?;
    if state != State::UnreferencedEligible {
        return refuse(format!(
            "{candidate_id} is already {state} (another quarantine ran meanwhile)"
        ));
    }
    // Seal every snapshot of the candidate.
    let out = location::canonical_uri(bundles)?;
    let mut sealed = Vec::new();
    for id in &candidate.snapshot_ids {
        match crate::bundle::seal_for(table, &ctx.storage, *id, key, &out, now, Some(candidate_id)).await? {
            Ok(r) => sealed.push(r),
            Err(findings) => {
                discard_bundles(ctx, reg, candidate_id, run_id, &sealed).await?;
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
    // The registry is not compared with the plan's stamp here: a lease, hold, DR checkpoint or writer that came
    // since is related to the candidate under the commit's lock below, and only one that covers it refuses (one
    // elsewhere on the table refuses nothing: on a live table readers and writers come with every job).
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
    // The deletion rights the candidate is judged with. A governance decision applied since the plan's stamp may
    // have withdrawn the right that made one of its snapshots expirable (a right lifts `minSnapshotAge`): then the
    // candidate is judged again with the rights in force, on the planned generation, and refused unless it stands
    // exactly as planned. The commit guard below finds them unchanged, or refuses.
    let rights = reg.rights_in_force(&table.metadata().uuid().to_string()).await?;
    if rights.digest != stamp.deletion_rights {
        let lead = format!(
            "the deletion rights changed while the quarantine sealed (governance decision {} is in force now)",
            rights.version.map_or_else(|| "(none)".to_owned(), |v| format!("v{v}"))
        );
        if let Err(why) = rejudge(ctx, table, policy, reg, candidate, &lead).await? {
            let note = discard_bundles(ctx, reg, candidate_id, run_id, &sealed).await?;
            return refuse(format!("{why}; re-plan ({note})"));
        }
    }
    // The commit is made inside the registry's write lock, after checking there that no lease, hold, DR
    // checkpoint or writer came to cover the candidate since its stamp and that it is not PROTECTED (as the
    // purge's catalog commit): in bundle mode it takes the snapshots out of the table, and a lease granted in
    // between would promise a snapshot no reader can open. A commit that loses the race to another writer (on a
    // live table one commits every few minutes, and sealing a large snapshot takes longer) is made again on the
    // new generation, once the candidate is judged there exactly as it was planned ([`rejudge`]).
    let mut on: Option<Table> = None;
    let mut attempt = 0;
    let (committed, judged, committed_on) = loop {
        attempt += 1;
        let base_table = on.as_ref().unwrap_or(table);
        let new = quarantine_metadata(base_table, mode, &tags, &candidate.snapshot_ids)?;
        ctx.storage.failpoint_delay(DelayPoint::CatalogCommit).await;
        let mut base = PurgeBaseline::from_stamp(&table.metadata().uuid().to_string(), table.location(), run_id, stamp);
        base.deletion_rights = Some(rights.digest.clone());
        let lock = match reg.commit_guard(candidate_id, &mut base, ctx.now()).await? {
            Ok(lock) => lock,
            Err(halt) => {
                let note = discard_bundles(ctx, reg, candidate_id, run_id, &sealed).await?;
                return refuse(format!("{}; re-plan ({note})", halt.join("; ")));
            }
        };
        let expected = base_table.generation().metadata_location.clone();
        let committed = cat.commit(&ctx.storage, ident, &expected, &new).await;
        let landed = match &committed {
            Ok(loc) => Some(loc.clone()),
            Err(Error::CommitUnknown { .. } | Error::Corrupt { .. }) => Some(expected.clone()),
            Err(_) => None,
        };
        if let Some(loc) = &landed {
            set_unsettled(
                unsettled,
                Some(Unsettled {
                    committed: loc.clone(),
                    bundles: sealed.iter().map(|b| b.uri.clone()).collect(),
                }),
            );
        }
        // The commit's own answer first (as `release`): the quarantine is recorded next, under the claim.
        end_lock_after_commit(
            lock,
            (ctx.storage.failpoint_quarantine_lock_end_fails(), "commit_guard"),
            landed.is_some(),
            candidate_id,
            ("the quarantine's catalog commit", "the quarantine"),
        )
        .await?;
        match committed {
            Ok(loc) => break (loc, base, base_table.clone()),
            Err(Error::Catalog { reason, .. }) => {
                // A lost race moved the table on; anything else (the generation did not move) is refused as before.
                // Nothing was committed: when the table cannot be read or judged again, the bundles go too.
                let judged = async {
                    let (now_table, _, _) = ctx.catalog_table(source).await?;
                    let why = if now_table.generation().metadata_location == expected {
                        Some(format!("the catalog commit failed: {reason}"))
                    } else if attempt >= QUARANTINE_COMMIT_ATTEMPTS {
                        Some(format!(
                            "the catalog commit lost the race to another writer {attempt} times (last: {reason})"
                        ))
                    } else {
                        rejudge(
                            ctx,
                            &now_table,
                            policy,
                            reg,
                            candidate,
                            "a commit landed while the quarantine sealed",
                        )
                        .await?
                        .err()
                    };
                    Ok::<_, Error>((now_table, why))
                };
                let (now_table, why) = match judged.await {
                    Ok(j) => j,
                    Err(e) => {
                        discard_bundles(ctx, reg, candidate_id, run_id, &sealed).await?;
                        return Err(e);
                    }
                };
                if let Some(why) = why {
                    let note = discard_bundles(ctx, reg, candidate_id, run_id, &sealed).await?;
                    return refuse(format!("{why}; re-plan ({note})"));
                }
                on = Some(now_table);
            }
            // The commit was sent and the catalog, read again, does not show whether it applied: it may have
            // taken the snapshots out of the table (bundle mode), now or later, and then the bundles are the only
            // way back. Nothing is discarded; the candidate goes to PROTECTED with its bundles recorded, so that
            // no purge acts on it and `quarantine release` can remove any of its tags that landed.
            // The same when the commit landed but the dropped-ref check refused what it did (Corrupt): the catalog
            // may have lost refs to the snapshots, and the bundles are the way back.
            Err(e @ (Error::CommitUnknown { .. } | Error::Corrupt { .. })) => {
                let kept: Vec<&str> = sealed.iter().map(|b| b.uri.as_str()).collect();
                let outcome = if matches!(e, Error::CommitUnknown { .. }) {
                    "unknown"
                } else {
                    "committed, not trusted"
                };
                let why = format!(
                    "the quarantine commit's outcome is {outcome} ({}); the bundles sealed for it are kept: {}",
                    e.with_causes(),
                    kept.join(", ")
                );
                let q = serde_json::json!({
                    "mode": match mode { QuarantineMode::Tag => "tag", QuarantineMode::Bundle => "bundle" },
                    "tag_prefix": tag_prefix,
                    "tags": tags.iter().map(|(n, id)| serde_json::json!({"name": n, "snapshot_id": id})).collect::<Vec<_>>(),
                    "bundles": sealed,
                    "commit_outcome": outcome,
                    "commit_based_on": expected,
                    "plan_stamp": stamp,
                    "policy_digest": policy.digest(),
                    "implementation_digest": digest,
                });
                // The record first: a hold may have made the candidate PROTECTED already, and then the move
                // below writes nothing.
                reg.candidate_quarantine_update(candidate_id, &q, &why, ctx.now())
                    .await?;
                reg.candidate_transition(candidate_id, State::Protected, &why, None, None, ctx.now())
                    .await?;
                set_unsettled(unsettled, None);
                let kept = format!(
                    ". Nothing was discarded: the bundles sealed for {candidate_id} are kept ({}) and the candidate is \
                     now PROTECTED; read the table: if its snapshots left it, the bundles are the way back \
                     (`set-current --from-bundle`, `restore`); `quarantine release` removes any of its tags that \
                     landed",
                    kept.join(", ")
                );
                return Err(match e {
                    Error::CommitUnknown { catalog, table, reason } => Error::CommitUnknown {
                        catalog,
                        table,
                        reason: format!("{reason}{kept}"),
                    },
                    Error::Corrupt { uri, reason } => Error::Corrupt {
                        uri,
                        reason: format!("{reason}{kept}"),
                    },
                    e => e,
                });
            }
            Err(e) => return Err(e),
        }
    };
    // The commit stands: in bundle mode the snapshots left the table and the bundles are their only way back, in tag
    // mode the tags are in the table. What it did is recorded at once, before anything else is read: a hold, lease,
    // checkpoint, writer or decision queued on the guard's lock lands right after it and may move the candidate to
    // PROTECTED, and any read below may fail; a candidate without this record keeps neither its files out of orphan
    // detection nor its tags releasable (before, the record was written only with the move to QUARANTINED, and
    // either left it UNREFERENCED_ELIGIBLE with no record of its bundles).
    ctx.storage.failpoint_delay(DelayPoint::QuarantineCommitted).await;
    let q = serde_json::json!({
        "mode": match mode { QuarantineMode::Tag => "tag", QuarantineMode::Bundle => "bundle" },
        "tag_prefix": tag_prefix,
        "tags": tags.iter().map(|(n, id)| serde_json::json!({"name": n, "snapshot_id": id})).collect::<Vec<_>>(),
        "bundles": sealed,
        "committed_metadata_location": committed,
        "plan_stamp": stamp,
        "policy_digest": policy.digest(),
        "quarantined_at": ctx.now(),
        "implementation_digest": digest,
    });
    if let Err(e) = reg
        .candidate_quarantine_update(candidate_id, &q, "sealed and committed", ctx.now())
        .await
    {
        let kept: Vec<&str> = sealed.iter().map(|b| b.uri.as_str()).collect();
        return Err(Error::invalid(
            candidate_id,
            format!(
                "the quarantine committed {committed} but could not be recorded ({}); its bundles are the way back \
                 to its snapshots: {}",
                Error::from(e).with_causes(),
                kept.join(", ")
            ),
        ));
    }
    let finished = if ctx.storage.failpoint_quarantine_record_fails() {
        Err(Error::invalid(
            candidate_id,
            "failpoint quarantine-record-fails: the move to QUARANTINED failed",
        ))
    } else {
        record_quarantined(
            ctx,
            reg,
            candidate_id,
            policy,
            (&committed, &committed_on),
            &judged,
            &tag_prefix,
            &rights.digest,
            now,
        )
        .await
    };
    // Recorded and moved on (to QUARANTINED or PROTECTED): settled, whatever follows.
    if finished.is_ok() {
        set_unsettled(unsettled, None);
    }
    let rec = match finished {
        Ok(Ok(rec)) => rec,
        // A protection landed after the commit: the candidate is PROTECTED with its quarantine recorded. It is
        // handled as any quarantined candidate a protection sent to PROTECTED: no purge takes it, `plan` keeps its
        // files out of other candidates and orphans, and `quarantine release` removes its tags (tag mode) or leaves
        // its bundles as the way back (bundle mode).
        Ok(Err(rec)) => {
            let mut human = format!(
                "{candidate_id} PROTECTED: committed {committed} ({} mode), but {}; its quarantine is recorded\n",
                if mode == QuarantineMode::Tag { "tag" } else { "bundle" },
                rec.reason
            );
            for b in &sealed {
                human.push_str(&format!(
                    "  snapshot {} → bundle {} root {}\n",
                    b.snapshot_id, b.uri, b.bundle_root
                ));
            }
            human.push_str(&format!(
                "  no purge takes it; `lakedrill quarantine release {candidate_id} --reason …` ends it\n"
            ));
            return Outcome::new(
                Verdict::Findings,
                &serde_json::json!({"status": "PROTECTED", "candidate": rec, "bundles": sealed,
                    "committed_metadata_location": committed}),
                human,
            );
        }
        Err(e) => {
            // Not QUARANTINED, and it must not stay UNREFERENCED_ELIGIBLE (a plan would propose what is gone): it
            // goes to PROTECTED with its quarantine recorded, releasable.
            let why = format!(
                "the quarantine committed {committed} and is recorded, but it could not be moved to QUARANTINED: {}",
                e.with_causes()
            );
            let moved = if ctx.storage.failpoint_quarantine_record_fails() {
                Err(Error::invalid(
                    candidate_id,
                    "failpoint quarantine-record-fails: the move to PROTECTED failed",
                ))
            } else {
                reg.candidate_transition(candidate_id, State::Protected, &why, None, None, ctx.now())
                    .await
                    .map_err(Error::from)
            };
            match moved {
                Ok(_) => set_unsettled(unsettled, None),
                Err(again) => crate::report::output::warn(format!(
                    "{candidate_id}: {why}; and it could not be moved to PROTECTED either ({})",
                    again.with_causes()
                )),
            }
            return Err(e);
        }
    };
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

/// Moves a candidate whose quarantine commit `committed` (made on `base_table`'s generation) is recorded to
/// `QUARANTINED`, with the world stamp the commit guard judged: its lease, hold and protection counters as the
/// guard advanced them (`judged`), the deletion rights it found unchanged, and the table generation and
/// protected-ref root of the commit's own result (read from the metadata file it wrote, not from the catalog, which
/// may name a later generation by now). A stamp read after the commit would count what landed since as judged: a
/// lease on part of the candidate would then not move the stamp, the purge would not rebase, and its independent
/// closure check would refuse the candidate for good instead of releasing the leased part. `Ok(Err(record))`
/// when the candidate became `PROTECTED` meanwhile (the record says why).
#[allow(clippy::too_many_arguments)]
async fn record_quarantined(
    ctx: &Context,
    reg: &Registry,
    candidate_id: &str,
    policy: &Policy,
    (committed, base_table): (&str, &Table),
    judged: &PurgeBaseline,
    tag_prefix: &str,
    rights: &str,
    now: DateTime<Utc>,
) -> Result<std::result::Result<crate::registry::CandidateRecord, crate::registry::CandidateRecord>> {
    let ours = Table::from_metadata_uri(
        &ctx.storage,
        base_table.name().to_owned(),
        committed,
        &location::canonical_uri(committed)?,
        Some(base_table.location().root_uri()),
    )
    .await?;
    let post = WorldStamp {
        metadata_location: ours.generation().metadata_location.clone(),
        metadata_blake3: ours.generation().metadata_blake3.clone(),
        protected_ref_root: protected_ref_root(&ours, policy.protected_refs(), Some(tag_prefix)),
        lease_watermark: judged.lease_watermark,
        hold_generation: judged.hold_generation,
        protection_generation: judged.protection_generation,
        // The rights the candidate was judged with (the guard found them in force at the commit): a decision
        // landing after the commit then moves the stamp, and the purge re-plans the candidate.
        deletion_rights: rights.to_owned(),
    };
    if reg.candidate_state(candidate_id).await? == State::Protected {
        return Ok(Err(reg.candidate(candidate_id).await?));
    }
    match reg
        .candidate_transition(
            candidate_id,
            State::Quarantined,
            "sealed and committed",
            None,
            Some(&post),
            now,
        )
        .await
    {
        Ok(rec) => Ok(Ok(rec)),
        // Protected between the read above and the move.
        Err(e) => {
            let rec = reg.candidate(candidate_id).await?;
            if rec.state == State::Protected {
                Ok(Err(rec))
            } else {
                Err(e.into())
            }
        }
    }
}

/// Catalog commits `release` tries before giving up when other writers keep winning the compare-and-set.
const RELEASE_COMMIT_ATTEMPTS: usize = 3;

/// What [`release`] reports (and keeps, as `release`, in the candidate's quarantine details).
#[derive(Debug, Clone, serde::Serialize)]
struct ReleaseRecord {
    /// The state the candidate was released from.
    from: State,
    /// The operator's reason.
    reason: String,
    /// When.
    released_at: DateTime<Utc>,
    /// `tag`, `bundle`, or `none` (protected before it was ever quarantined).
    mode: String,
    /// The `quarantine/<candidate>…` refs removed, with the snapshot each pointed at.
    tags_removed: Vec<serde_json::Value>,
    /// The catalog commit that removed them (none when there was nothing to remove).
    committed_metadata_location: Option<String>,
    /// The candidate's bundles: still the way back to its snapshots in bundle mode.
    bundles: Vec<String>,
    /// Orphans: each held file put back where it was, verified against the bundle.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    put_back: Vec<crate::ops::orphans::PutBack>,
}

/// The candidate's own quarantine refs: `quarantine/<candidate>` or `quarantine/<candidate>/<snapshot>`.
fn own_tags(table: &Table, candidate_id: &str) -> Vec<(String, i64)> {
    let prefix = format!("{QUARANTINE_TAG_PREFIX}{candidate_id}");
    let mut tags: Vec<(String, i64)> = table
        .refs()
        .iter()
        .filter(|(name, _)| crate::ops::plan::is_quarantine_tag(name, &prefix))
        .map(|(name, r)| (name.clone(), r.snapshot_id))
        .collect();
    tags.sort();
    tags
}

/// `lakedrill quarantine release CANDIDATE --reason TEXT`: the way out for a candidate that should not be
/// purged (or cannot be any more), before the deleter's acceptance point.
///
/// In tag mode it removes the candidate's `quarantine/<candidate>…` tags in one catalog commit (a
/// compare-and-set against the metadata location read, retried from a fresh read when another commit wins),
/// then moves the candidate and its objects to `RELEASED` with the operator's reason and time (an event in the
/// registry). The next plan proposes the snapshots again, as a new candidate of the new generation. In bundle
/// mode there are no tags: the snapshots left the metadata at quarantine, so only the state changes, and the
/// candidate's bundles stay the way back (`set-current --from-bundle`). Nothing is deleted.
///
/// Only a `QUARANTINED`, `RESTORE_VERIFIED` or `PROTECTED` candidate none of whose objects went through the
/// deleter can be released; any other is refused (exit 1) naming its state. It takes the candidate's run
/// claim, so it never races a quarantine or a purge of the same candidate.
///
/// # Errors
/// An unknown candidate, an empty reason, a candidate of another table (exit 2); load, catalog and registry
/// errors.
pub async fn release(ctx: &Context, source: &TableSource, candidate_id: &str, reason: &str) -> Result<Outcome> {
    if reason.trim().is_empty() {
        return Err(Error::invalid("--reason", "say why the candidate is released"));
    }
    let reg = registry(ctx).await?;
    let rec = reg.candidate(candidate_id).await?;
    let (table, cat, ident) = ctx.catalog_table(source).await?;
    let uuid = table.metadata().uuid().to_string();
    if rec.table_uuid != uuid {
        return Err(Error::invalid(
            candidate_id,
            format!(
                "the candidate belongs to table {}, not to {} ({uuid})",
                rec.table_uuid,
                table.name()
            ),
        ));
    }
    let claimed = reg.purge_run(candidate_id).await?.is_some();
    if !stranded(&rec, claimed)
        && let Some(why) = rec.state.release_refusal(candidate_id)
    {
        return refuse_release(candidate_id, why);
    }
    let run = match crate::ops::binding::claim_run(&reg, candidate_id, ctx.now(), "release").await? {
        Ok(run) => run,
        Err(why) => return refuse_release(candidate_id, why),
    };
    // Renewed while the release works (putting orphans back, a slow catalog), and checked before each of its
    // writes: a release taken over as silent writes nothing more (exit 2).
    let work = release_claimed(
        ctx,
        source,
        &reg,
        candidate_id,
        &run.run_id,
        reason,
        (table, cat, ident),
    );
    let out = crate::ops::binding::with_heartbeat(ctx, &reg, candidate_id, &run.run_id, Box::pin(work)).await;
    let released = reg.purge_release(candidate_id, &run.run_id, ctx.now()).await;
    let out = out?;
    released?;
    Ok(out)
}

/// Whether `rec` is a snapshot candidate a quarantine left `UNREFERENCED_ELIGIBLE` after its catalog commit landed
/// (or may have): it recorded its quarantine mode but could not move the candidate on, or it kept its claim
/// (`claimed`) when it could not record it. `quarantine release` takes such a candidate (through `PROTECTED`).
/// A claim held by a quarantine still running refuses the release at [`crate::ops::binding::claim_run`].
fn stranded(rec: &crate::registry::CandidateRecord, claimed: bool) -> bool {
    let mode = rec.quarantine.as_ref().and_then(|q| q["mode"].as_str());
    matches!(rec.state, State::Discovered | State::UnreferencedEligible)
        && rec.candidate_id.starts_with("c-")
        && (claimed || matches!(mode, Some("bundle" | "tag")))
}

/// One line per orphan put back by a release: its path, what was done and whether it is verified in place.
fn put_back_lines(put_back: &[crate::ops::orphans::PutBack]) -> String {
    put_back
        .iter()
        .map(|p| {
            format!(
                "  {}: {}{}\n",
                p.path,
                p.action,
                if p.verified {
                    ", verified in place"
                } else {
                    ", NOT verified in place"
                }
            )
        })
        .collect()
}

fn refuse_release(candidate_id: &str, reason: String) -> Result<Outcome> {
    Outcome::new(
        Verdict::Findings,
        &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
        format!("REFUSED: {reason}\n"),
    )
}

/// The part of [`release`] run while the candidate is claimed by run `run_id`: every catalog commit and registry
/// write checks that the run still holds the claim (in the write's own transaction, or under the registry's lock
/// for the catalog commit), and a run that lost it stops there (exit 2) naming the run that took it over.
#[allow(clippy::too_many_lines)]
async fn release_claimed(
    ctx: &Context,
    source: &TableSource,
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    reason: &str,
    (mut table, mut cat, mut ident): (Table, crate::io::catalog::Catalog, crate::io::catalog::TableIdent),
) -> Result<Outcome> {
    // Claimed now: read the state again (a purge may have been accepted between our check and our claim).
    let mut rec = reg.candidate(candidate_id).await?;
    // A quarantine that failed after its catalog commit landed, before it settled the candidate: it goes to
    // PROTECTED first (under this run's claim, which it took over), then is released as any PROTECTED one.
    if stranded(&rec, true) {
        let why = format!(
            "quarantine release: a quarantine of {candidate_id} failed after its catalog commit, before it settled \
             the candidate: {reason}"
        );
        protect_claimed(
            reg,
            candidate_id,
            run_id,
            &why,
            ctx.now(),
            "moving the candidate to PROTECTED",
        )
        .await?;
        rec = reg.candidate(candidate_id).await?;
    }
    if let Some(why) = rec.state.release_refusal(candidate_id) {
        return refuse_release(candidate_id, why);
    }
    let objects = reg.object_states(candidate_id).await?;
    let past = objects
        .iter()
        .filter(|o| {
            matches!(
                o.state,
                State::DeleteApproved | State::Deleted | State::Verified | State::DeleteUnknown
            )
        })
        .count();
    if past > 0 {
        return refuse_release(
            candidate_id,
            format!(
                "{candidate_id} is {} but {past} of its objects went through the deleter: it cannot be released",
                rec.state
            ),
        );
    }
    let q = rec.quarantine.clone().unwrap_or_default();
    let mode = q["mode"].as_str().unwrap_or("none").to_owned();
    let bundles: Vec<String> = q["bundles"]
        .as_array()
        .map(|a| a.iter().filter_map(|b| b["uri"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    // Orphans held in quarantine go back where they were (they have no tags).
    let mut put_back = Vec::new();
    if mode == "orphans" {
        for b in &bundles {
            let (_, files) = crate::ops::orphans::held_files(&ctx.storage, b, &rec).await?;
            // What a take-out killed between a rename aside and its removal left goes back first.
            for line in crate::ops::orphans::settle_removing(&ctx.storage, &rec, &files).await? {
                crate::report::output::warn(line);
            }
            put_back.extend(crate::ops::orphans::put_back(&ctx.storage, &files).await?);
        }
    }
    ctx.storage.failpoint_delay(DelayPoint::ReleaseWrite).await;
    if mode == "orphans" {
        // A file not back in place is not released: the candidate leaves reclamation as PROTECTED, which the next
        // `plan` or `purge` tries to put back again (RELEASED is final, and nothing would try again).
        let missing: Vec<&crate::ops::orphans::PutBack> = put_back.iter().filter(|p| !p.verified).collect();
        if !missing.is_empty() {
            let why = format!(
                "quarantine release could not put {} of {} held files back ({}): {reason}",
                missing.len(),
                put_back.len(),
                missing
                    .iter()
                    .map(|p| format!("{}: {}", p.path, p.action))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            protect_claimed(
                reg,
                candidate_id,
                run_id,
                &why,
                ctx.now(),
                "moving the candidate to PROTECTED",
            )
            .await?;
            let mut human = format!("{candidate_id} INCOMPLETE: not released, now PROTECTED\n  {why}\n");
            human.push_str(&put_back_lines(&put_back));
            human.push_str("  the next `plan` or `purge` of the table tries to put the rest back\n");
            return Outcome::new(
                Verdict::Findings,
                &serde_json::json!({"status": "INCOMPLETE", "candidate_id": candidate_id, "state": State::Protected,
                    "reason": why, "put_back": put_back}),
                human,
            );
        }
    }
    // One commit removing every own tag; a lost compare-and-set is retried from a fresh read (removing our
    // own tags does not depend on what the winning commit changed).
    let mut removed = Vec::new();
    let mut committed = None;
    for attempt in 1..=RELEASE_COMMIT_ATTEMPTS {
        let tags = own_tags(&table, candidate_id);
        if tags.is_empty() {
            break;
        }
        let mut change = table.change();
        for (name, _) in &tags {
            change = change.remove_ref(name);
        }
        let new = change.build()?;
        // The commit is made under the registry's lock, checked there to be this run's claim still: no run takes the
        // claim over while it is made.
        let lock = match reg.claim_lock(candidate_id, run_id, ctx.now()).await? {
            Ok(lock) => lock,
            Err(holder) => {
                return Err(taken_over(
                    candidate_id,
                    run_id,
                    holder.as_ref(),
                    "its catalog commit removing the tags",
                ));
            }
        };
        let committed_now = cat
            .commit(&ctx.storage, &ident, &table.generation().metadata_location, &new)
            .await;
        // The commit's own answer first (the release is then recorded under the claim below).
        end_lock_after_commit(
            lock,
            (ctx.storage.failpoint_release_lock_end_fails(), "claim_lock"),
            committed_now.is_ok(),
            candidate_id,
            ("the catalog commit that removed the tags", "the release"),
        )
        .await?;
        match committed_now {
            Ok(loc) => {
                removed = tags;
                committed = Some(loc);
                break;
            }
            // An unknown outcome is read again like a lost race: tags gone from the table read again were removed
            // (by this commit or another), and what is left is removed on the next attempt.
            Err(Error::Catalog { .. } | Error::CommitUnknown { .. }) if attempt < RELEASE_COMMIT_ATTEMPTS => {
                (table, cat, ident) = ctx.catalog_table(source).await?;
            }
            Err(Error::Catalog { reason, .. }) => {
                return refuse_release(
                    candidate_id,
                    format!(
                        "the catalog commit removing the quarantine tags lost {RELEASE_COMMIT_ATTEMPTS} times ({reason}); nothing was released: try again"
                    ),
                );
            }
            Err(e) => return Err(e),
        }
    }
    let record = ReleaseRecord {
        from: rec.state,
        reason: reason.to_owned(),
        released_at: ctx.now(),
        mode,
        tags_removed: removed
            .iter()
            .map(|(n, id)| serde_json::json!({"name": n, "snapshot_id": id}))
            .collect(),
        committed_metadata_location: committed.clone(),
        bundles,
        put_back,
    };
    let value = serde_json::to_value(&record).map_err(|e| Error::Internal(e.to_string()))?;
    let rec = match reg
        .candidate_release_claimed(candidate_id, run_id, reason, &value, record.released_at)
        .await?
    {
        Ok(Ok(rec)) => rec,
        Ok(Err(why)) => return refuse_release(candidate_id, why),
        Err(holder) => {
            return Err(taken_over(
                candidate_id,
                run_id,
                holder.as_ref(),
                "recording the release",
            ));
        }
    };
    let mut human = format!("{candidate_id} RELEASED (was {}): {reason}\n", record.from);
    match &committed {
        Some(loc) => {
            human.push_str(&format!("  committed {loc}\n"));
            for (n, id) in &removed {
                human.push_str(&format!("  removed tag {n} → {id}\n"));
            }
            human.push_str("  the next `plan` proposes these snapshots again (a new candidate id)\n");
        }
        None if record.mode == "orphans" => {
            human.push_str(&put_back_lines(&record.put_back));
        }
        None if record.mode == "bundle" => {
            human.push_str(
                "  bundle mode: the snapshots left the metadata at quarantine, so no tag was removed; each \
                 comes back (as the current snapshot) with `lakedrill set-current --from-bundle BUNDLE --trust DIR`:\n",
            );
            for b in &record.bundles {
                human.push_str(&format!("    {b}\n"));
            }
            human.push_str(
                "  until a snapshot comes back, the files only it referenced stay where they are, unreferenced: a \
                 later `plan` proposes them as an orphan candidate (`o-…`), which is quarantined and drilled before \
                 any delete; a lease or legal hold on the snapshots keeps them\n",
            );
        }
        None => human.push_str("  the table holds no quarantine tag of this candidate: only the state changed\n"),
    }
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({
            "status": "RELEASED",
            "candidate_id": candidate_id,
            "from": record.from,
            "reason": record.reason,
            "released_at": record.released_at,
            "mode": record.mode,
            "tags_removed": record.tags_removed,
            "committed_metadata_location": record.committed_metadata_location,
            "bundles": record.bundles,
            "put_back": record.put_back,
            "candidate": rec,
        }),
        human,
    )
}

/// Ends the registry lock taken around a catalog commit, once the commit answered. When the commit landed (or may
/// have: `landed`), a lock transaction that cannot be ended must not hide that it did: it is a warning naming
/// `what.0` (the commit) and `what.1` (what is recorded next, under the run's claim), and the caller goes on;
/// otherwise the lock's error stands. `fail` = (a test-only failpoint that plays the lock end failing, the name of
/// its transaction).
async fn end_lock_after_commit(
    lock: crate::registry::PurgeBatch,
    fail: (bool, &'static str),
    landed: bool,
    candidate_id: &str,
    what: (&str, &str),
) -> Result<()> {
    let ended = if fail.0 {
        Err(lock.abandon(fail.1).await)
    } else {
        lock.commit().await.map(drop)
    };
    match ended {
        Err(e) if !landed => Err(e.into()),
        Err(e) => {
            crate::report::output::warn(format!(
                "{candidate_id}: the registry's lock could not be ended after {} ({e}); {} is recorded next",
                what.0, what.1
            ));
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}
