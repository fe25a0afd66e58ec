//! `quarantine`: seal a bundle for every snapshot of a candidate, then make exactly one catalog commit.
//!
//! It refuses when the table, the refs, the leases or the holds changed since the plan, and when the
//! independent closure check finds a non-deletable object in the candidate. This module deletes nothing;
//! deletion belongs to [`crate::ops::deleter`].

use std::path::Path;

use chrono::{DateTime, Utc};
use iceberg::spec::{SnapshotReference, SnapshotRetention};

use crate::error::{Error, Result};
use crate::govern::closure::{self};
use crate::govern::policy::Policy;
use crate::model::location;
use crate::ops::context::Context;
use crate::ops::plan::*;
use crate::registry::{Registry, State, WorldStamp};
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
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    // Only the build the policy pins may quarantine (a different build may still plan, drill and report).
    let digest = crate::ops::binding::digest_binding(ctx, &policy)?;
    if !digest.allows_reclamation() {
        return refuse(digest.message().unwrap_or_default());
    }
    let reg = registry(ctx).await?;
    let now = ctx.now();
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
    let run = match crate::ops::binding::claim_run(&reg, candidate_id, now, "quarantine").await? {
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
    let released = reg.purge_release(candidate_id, &run.run_id, ctx.now()).await;
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
    digest: &crate::ops::binding::DigestBinding,
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
        "quarantined_at": ctx.now(),
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
