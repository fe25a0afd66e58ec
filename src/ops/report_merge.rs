//! `report merge`: one signed report from the shard reports of a sharded drill (`drill run --shard I/N`).
//!
//! A drill over more bundles than one machine can verify in its window is split into N shards that run
//! anywhere (a Kubernetes Indexed Job, N cron hosts): every shard computes the same overall sample from
//! the same plan, seed and bundle listing, and verifies only its share ([`crate::ops::drill::Shard`]). The merge
//! then checks, before it signs anything, that
//!
//! * every shard report verifies under the trust store's keys with the drill role and passes the same internal checks as
//!   `audit verify` (signature, canonical bytes, summary, sample, subjects);
//! * all shards are of the same plan (name, kind and plan digest), the same seed, population and selection,
//!   and the same implementation digest;
//! * the shards are exactly `0..N` of one `N`, each once, so their results are disjoint and together are
//!   the whole sample;
//!
//! * with `--split objects` (one snapshot verified by N machines), every shard drilled every sampled bundle,
//!   and for each bundle the shares are `0..N` of one bundle root whose objects add up to its whole inventory
//!   (each merged result adds the shares' counts, joins their findings and takes the longest share's RTO);
//!
//! and signs one report into the plan's chain (`previous_report` = the chain's newest report) whose results
//! are the shards' results in sampling order, whose subjects are the shards' subjects, and whose
//! `merged_from` lists each shard report's SHA-256. `audit verify` checks it like any other report. If
//! anything does not hold, nothing is written and the merge is refused (exit 1) with every reason.
//!
//! What it does not do: re-run or re-verify the bundles (the shard reports are the evidence of that). A shard run
//! again under the same run id (its machine failed) merges with the others when plan, seed, sample and split agree;
//! the merged report's `started_at` is then the oldest shard's start, by which `purge` and the gates age it.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;

use crate::bundle::RestoreStatus;
use crate::error::{Error, Result};
use crate::evidence::inventory::ShardPart;
use crate::evidence::keys::{self, TrustStore};
pub use crate::evidence::predicate::ShardRef;
use crate::evidence::predicate::ShardSplit;
use crate::evidence::{self, Statement, Subject};
use crate::model::location;
use crate::ops::context::Context;
use crate::ops::drill::{self, DrillInfo, DrillOutcome, DrillPredicate, DrillResult, Summary};

/// The result of a merge: a merged report, or the reasons it was refused.
#[derive(Debug, Clone)]
pub enum MergeResult {
    /// The merged, signed report.
    Merged(Box<DrillOutcome>),
    /// Nothing was written, for these reasons.
    Refused(Vec<String>),
}

/// Checks the shard reports and, when they are one complete sharded run, signs the merged report.
///
/// # Errors
/// When a shard report or the key cannot be read at all, or the report cannot be written.
#[allow(clippy::too_many_lines)]
pub async fn merge(
    ctx: &Context,
    shard_reports: &[String],
    key: &Path,
    trust: &Path,
    reports: &str,
    clock_now: chrono::DateTime<chrono::Utc>,
) -> Result<MergeResult> {
    // Shard reports are drill reports: only keys with the drill role count ([`crate::evidence::keys::Role`]).
    let folder_keys = TrustStore::load_dir(trust)?;
    let key_path = key;
    let key = keys::load_signing_key(key_path)?;
    // The merged report is a drill report: a key the roles file does not give the drill role would sign
    // evidence that no auditor or deleter accepts (or, a deleter's key, evidence the deleter must refuse).
    folder_keys.require_role(key_path, &key, crate::evidence::keys::Role::Drill, "drill reports")?;
    let trust = folder_keys.for_role(crate::evidence::keys::Role::Drill);
    let mut reasons = Vec::new();
    let mut shards: Vec<(ShardRef, DrillPredicate, Vec<Subject>)> = Vec::new();
    let mut uris = Vec::new();
    for r in shard_reports {
        let uri = location::canonical_uri(r)?;
        if uri.ends_with(".dsse.json") {
            uris.push(uri);
        } else {
            // A folder (or prefix): the shard reports directly in it, e.g. `shards/<run id>/`.
            let folder = uri.trim_end_matches('/').to_owned();
            // A local folder that does not exist or cannot be read is not "no shard report": it could not be
            // looked at (exit 2, naming it). An object-store prefix has no existence apart from its objects.
            if let Some(path) = folder.strip_prefix("file://") {
                std::fs::read_dir(path).map_err(|e| Error::io("list the shard reports folder", path, e))?;
            }
            let found = drill::list_reports(&ctx.storage, &folder).await?;
            if found.is_empty() {
                reasons.push(format!("{folder} holds no shard report (*.dsse.json)"));
            }
            uris.extend(found);
        }
    }
    for uri in uris {
        // A shard report is a few MB at most: one past the metadata bound is refused (exit 2) before it is read
        // whole, as a table metadata file would be.
        let max = ctx.storage.options().max_metadata_bytes;
        let bytes = ctx.storage.get_bounded(&uri, max, "a shard report").await?.bytes;
        let name = location::file_name(&uri).to_owned();
        let mut findings = Vec::new();
        let checked = crate::ops::audit::check_report(&name, &bytes, &trust, &mut findings);
        for f in &findings {
            reasons.push(format!("{name}: {} {}", f.check, f.detail));
        }
        let Some((_, p)) = checked else { continue };
        let Some(shard) = p.shard.clone() else {
            reasons.push(format!("{name}: not a shard report (run `drill run PLAN --shard I/N`)"));
            continue;
        };
        let subjects = evidence::verify(&bytes, &trust)
            .map(|v| v.subjects().to_vec())
            .unwrap_or_default();
        // Who signed the shard: every signature by a key of `trust` verified (or the report was refused above), so
        // these are the shard's signers. `purge` reads them to refuse shards signed by its own key.
        let keyids: Vec<String> = serde_json::from_slice::<evidence::Envelope>(&bytes)
            .map(|e| e.signatures.into_iter().map(|s| s.keyid).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|k| trust.get(k).is_some())
            .collect();
        shards.push((
            ShardRef {
                index: shard.index,
                count: shard.count,
                report: name,
                sha256: evidence::sha256_hex(&bytes),
                drill_id: p.drill.id.clone(),
                keyids: Some(keyids),
            },
            p,
            subjects,
        ));
    }
    let Some((_, first, _)) = shards.first() else {
        reasons.push("no shard report could be read as one".into());
        return Ok(MergeResult::Refused(reasons));
    };
    let first = first.clone();
    let n = shards[0].0.count;
    for (s, p, _) in &shards {
        let mut same = |what: &str, a: String, b: String| {
            if a != b {
                reasons.push(format!(
                    "{}: {what} {a} differs from {}'s {b}",
                    s.report,
                    shards_first_name(&shards)
                ));
            }
        };
        same("plan", p.drill.plan.clone(), first.drill.plan.clone());
        same("kind", p.drill.kind.clone(), first.drill.kind.clone());
        same(
            "plan digest",
            p.drill.plan_digest.clone(),
            first.drill.plan_digest.clone(),
        );
        same(
            "implementation digest",
            p.drill.implementation_digest.clone(),
            first.drill.implementation_digest.clone(),
        );
        same("seed", p.sample.seed.to_string(), first.sample.seed.to_string());
        same(
            "population",
            p.sample.population.to_string(),
            first.sample.population.to_string(),
        );
        same(
            "population ids",
            p.sample.population_ids.join(","),
            first.sample.population_ids.join(","),
        );
        same(
            "source",
            format!("{:?}", p.sample.source),
            format!("{:?}", first.sample.source),
        );
        same(
            "selection",
            p.sample.selected.join(","),
            first.sample.selected.join(","),
        );
        same("shard count", s.count.to_string(), n.to_string());
        same(
            "split",
            format!("{:?}", p.shard.as_ref().map(|x| x.split)),
            format!("{:?}", first.shard.as_ref().map(|x| x.split)),
        );
        same(
            "run id",
            format!("{:?}", p.shard.as_ref().and_then(|x| x.run_id.clone())),
            format!("{:?}", first.shard.as_ref().and_then(|x| x.run_id.clone())),
        );
    }
    let mut seen = BTreeMap::new();
    for (s, _, _) in &shards {
        if let Some(prev) = seen.insert(s.index, s.report.clone()) {
            reasons.push(format!("shard {} appears twice: {prev} and {}", s.index, s.report));
        }
    }
    let missing: Vec<usize> = (0..n).filter(|i| !seen.contains_key(i)).collect();
    if !missing.is_empty() {
        reasons.push(format!("shards {missing:?} of 0..{n} are missing"));
    }
    if !reasons.is_empty() {
        return Ok(MergeResult::Refused(reasons));
    }
    let merged = match first.shard.as_ref().map(|s| s.split).unwrap_or_default() {
        ShardSplit::Items => merge_items(&first.sample.selected, &shards, n),
        ShardSplit::Objects => merge_object_shares(&first.sample.selected, &shards, n),
    };
    let results = match merged {
        Ok(r) => r,
        Err(reasons) => return Ok(MergeResult::Refused(reasons)),
    };
    let mut subjects: Vec<Subject> = Vec::new();
    for (_, _, subs) in &shards {
        for s in subs {
            if !subjects.contains(s) {
                subjects.push(s.clone());
            }
        }
    }
    let passed = results
        .iter()
        .filter(|r| r.status == RestoreStatus::RestoreVerified)
        .count();
    let failed = results.len() - passed;
    let plan_name = first.drill.plan.clone();
    let folder = location::join(&location::canonical_uri(reports)?, &plan_name);
    // The shards' plan asked for Object Lock (the same plan digest for all, checked above): so does the merge.
    let retention = first
        .drill
        .evidence_retention
        .as_ref()
        .map(crate::ops::evidence_lock::from_claim)
        .transpose()?;
    crate::ops::evidence_lock::preflight(&ctx.storage, &folder, retention).await?;
    let previous = drill::latest_report(
        &ctx.storage,
        &folder,
        &drill::drill_report_check(
            &folder_keys.without_granted(crate::evidence::keys::Role::Deleter),
            &plan_name,
        ),
    )
    .await?;
    let started = shards
        .iter()
        .map(|(_, p, _)| p.started_at.clone())
        .min()
        .unwrap_or_default();
    let finished = shards
        .iter()
        .map(|(_, p, _)| p.finished_at.clone())
        .max()
        .unwrap_or_default();
    let mut refs: Vec<ShardRef> = shards.iter().map(|(s, _, _)| s.clone()).collect();
    refs.sort_by_key(|s| s.index);
    let predicate = DrillPredicate {
        drill: DrillInfo {
            id: uuid::Uuid::new_v4().to_string(),
            // Each shard knows only its own items' policies: the merged report's is recomputed over all of them.
            policy_digest: crate::evidence::predicate::common_policy_digest(&results),
            ..first.drill.clone()
        },
        started_at: started,
        finished_at: finished,
        sample: first.sample.clone(),
        results,
        summary: Summary::of(passed, failed),
        previous_report: previous.map(|(_, sha)| sha),
        shard: None,
        merged_from: Some(refs),
    };
    let statement = Statement {
        subject: subjects,
        predicate_type: drill::PREDICATE_TYPE.to_owned(),
        predicate: serde_json::to_value(&predicate).map_err(|e| Error::Internal(format!("merged predicate: {e}")))?,
    };
    let envelope = evidence::sign_statement(&statement, &key);
    let stamp = clock_now.format("%Y%m%dT%H%M%S%.3fZ").to_string();
    let report = location::join(&folder, &format!("{stamp}.dsse.json"));
    let human_report = location::join(&folder, &format!("{stamp}.txt"));
    let now = clock_now;
    crate::ops::evidence_lock::put(
        &ctx.storage,
        &report,
        Bytes::from(envelope.to_json_bytes()),
        retention,
        now,
    )
    .await?;
    crate::ops::evidence_lock::put(
        &ctx.storage,
        &human_report,
        Bytes::from(drill::render_human(&predicate, &report)),
        retention,
        now,
    )
    .await?;
    Ok(MergeResult::Merged(Box::new(DrillOutcome {
        report,
        human_report,
        predicate,
    })))
}

/// A sharded run of the sample's items: position p of the selection is the next result of shard p % N.
fn merge_items(
    selected: &[String],
    shards: &[(ShardRef, DrillPredicate, Vec<Subject>)],
    n: usize,
) -> std::result::Result<Vec<DrillResult>, Vec<String>> {
    let mut by_shard: BTreeMap<usize, std::collections::VecDeque<DrillResult>> = shards
        .iter()
        .map(|(s, p, _)| (s.index, p.results.iter().cloned().collect()))
        .collect();
    let mut results = Vec::new();
    for (pos, id) in selected.iter().enumerate() {
        let r = by_shard
            .get_mut(&(pos % n))
            .and_then(std::collections::VecDeque::pop_front);
        match r {
            Some(r) if &r.bundle_id == id => results.push(r),
            other => {
                return Err(vec![format!(
                    "sample position {pos} ({id}) is not the next result of shard {}: found {:?}",
                    pos % n,
                    other.map(|r| r.bundle_id)
                )]);
            }
        }
    }
    Ok(results)
}

/// A sharded run of every item's objects (`--split objects`): each shard has a result for every sampled
/// bundle, covering its share of the objects. For each bundle the shares must be `0..N` of the same bundle
/// root and together hold every object of its inventory; the merged result is `RESTORE_VERIFIED` only when
/// every share is, with the shares' counts added up, their findings together and the longest share's RTO (the
/// shares run side by side). Every reason to refuse is returned.
fn merge_object_shares(
    selected: &[String],
    shards: &[(ShardRef, DrillPredicate, Vec<Subject>)],
    n: usize,
) -> std::result::Result<Vec<DrillResult>, Vec<String>> {
    let mut ordered: Vec<&(ShardRef, DrillPredicate, Vec<Subject>)> = shards.iter().collect();
    ordered.sort_by_key(|s| s.0.index);
    let mut reasons = Vec::new();
    let mut results = Vec::new();
    for (pos, id) in selected.iter().enumerate() {
        let mut parts: Vec<(&ShardRef, &DrillResult)> = Vec::new();
        for (s, p, _) in &ordered {
            match p.results.get(pos) {
                Some(r) if &r.bundle_id == id => parts.push((s, r)),
                other => reasons.push(format!(
                    "{}: sample position {pos} ({id}) is not its result {pos}: found {:?}",
                    s.report,
                    other.map(|r| &r.bundle_id)
                )),
            }
        }
        let [(first_ref, first), ..] = parts.as_slice() else {
            continue;
        };
        if parts.len() != n {
            continue;
        }
        for (s, r) in &parts {
            if r.bundle_root != first.bundle_root {
                reasons.push(format!(
                    "{}: bundle {id} was verified with root {:?}, but {} verified root {:?}",
                    s.report, r.bundle_root, first_ref.report, first.bundle_root
                ));
            }
        }
        // Every share names itself and the same inventory, and together they hold all of it. A bundle that did
        // not verify far enough to be split (its signature, say) has no share: it can only fail.
        let shares: Vec<Option<&ShardPart>> = parts.iter().map(|(_, r)| r.object_shard.as_ref()).collect();
        if shares.iter().all(Option::is_some) {
            let shares: Vec<&ShardPart> = shares.into_iter().flatten().collect();
            for ((s, _), share) in parts.iter().zip(&shares) {
                if share.index != s.index || share.count != n {
                    reasons.push(format!(
                        "{}: shard {}/{n} holds share {}/{} of bundle {id}",
                        s.report, s.index, share.index, share.count
                    ));
                }
            }
            let inventory = shares[0].inventory_objects;
            let held: usize = shares.iter().map(|p| p.objects).sum();
            if shares.iter().any(|p| p.inventory_objects != inventory) || held != inventory {
                reasons.push(format!(
                    "bundle {id}: the shares hold {held} objects of inventories of {:?}: not one whole inventory",
                    shares.iter().map(|p| p.inventory_objects).collect::<Vec<_>>()
                ));
            }
        } else if let Some((s, _)) = parts
            .iter()
            .find(|(_, r)| r.object_shard.is_none() && r.status == RestoreStatus::RestoreVerified)
        {
            reasons.push(format!(
                "{}: bundle {id} is RESTORE_VERIFIED without naming its share of the objects",
                s.report
            ));
        }
        let mut merged = (*first).clone();
        // A share that failed before its root was read names the root its envelope claims (unverified).
        if merged.bundle_root.is_none() {
            merged.claimed_bundle_root = parts.iter().find_map(|(_, r)| r.claimed_bundle_root.clone());
        }
        merged.status = if parts.iter().all(|(_, r)| r.status == RestoreStatus::RestoreVerified) {
            RestoreStatus::RestoreVerified
        } else {
            RestoreStatus::Failed
        };
        merged.objects_verified = parts.iter().map(|(_, r)| r.objects_verified).sum();
        merged.bytes_verified = parts.iter().map(|(_, r)| r.bytes_verified).sum();
        merged.rto_seconds = parts.iter().map(|(_, r)| r.rto_seconds).fold(0.0, f64::max);
        let mut findings: Vec<_> = parts.iter().flat_map(|(_, r)| r.findings.iter().cloned()).collect();
        findings.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
        findings.dedup();
        merged.findings = findings;
        merged.object_shard = None;
        results.push(merged);
    }
    if reasons.is_empty() { Ok(results) } else { Err(reasons) }
}

fn shards_first_name(shards: &[(ShardRef, DrillPredicate, Vec<Subject>)]) -> String {
    shards.first().map(|s| s.0.report.clone()).unwrap_or_default()
}
