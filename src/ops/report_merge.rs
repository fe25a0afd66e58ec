//! `report merge`: one signed report from the shard reports of a sharded drill (`drill run --shard I/N`).
//!
//! A drill over more bundles than one machine can verify in its window is split into N shards that run
//! anywhere (a Kubernetes Indexed Job, N cron hosts): every shard computes the same overall sample from
//! the same plan, seed and bundle listing, and verifies only its share ([`crate::ops::drill::Shard`]). The merge
//! then checks, before it signs anything, that
//!
//! * every shard report verifies under the trust store's keys with the drill role and passes the same internal checks as
//!   `audit verify` (signature, canonical bytes, summary, sample, subjects);
//! * all shards are of the same plan (name, kind and plan digest), the same seed, population (ids, the roots they
//!   list, source) and selection, and the same implementation digest;
//! * the shards are exactly `0..N` of one `N`, each once, so their results are disjoint and together are
//!   the whole sample;
//!
//! * with `--split objects` (one snapshot verified by N machines), every shard drilled every sampled bundle,
//!   and for each bundle the shares are `0..N` of one bundle root whose objects add up to its whole inventory, no
//!   share holding more than the inventory and failed shares claiming no two different roots (each merged result
//!   adds the shares' counts, joins their findings and takes the longest share's RTO);
//!
//! and signs one report into the plan's chain (`previous_report` = the chain's newest report) whose results
//! are the shards' results in sampling order, whose subjects are the shards' subjects, and whose
//! `merged_from` lists each shard report's SHA-256. `audit verify` checks it like any other report. If
//! anything does not hold, nothing is written and the merge is refused (exit 1) with every reason. A shard the merge
//! cannot decide on — its signers unreadable or none of the trust store, a time that is not RFC 3339, counts whose
//! sum overflows — is an error naming it (exit 2), and nothing is written either.
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
    let mut shards: Vec<ShardReport> = Vec::new();
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
        // Who signed the shard: `purge` reads these to refuse shards signed by its own key, and the policy's
        // `evidenceSigners` must list every one. A shard whose signers cannot be read would be recorded with none.
        let (subjects, keyids) = shard_subjects_and_signers(&uri, &bytes, &trust)?;
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
    reasons.extend(disagreements(&shards, &first, n));
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
        ShardSplit::Objects => merge_object_shares(&first.sample.selected, &shards, n)?,
    };
    let (started, finished) = time_window(&shards)?;
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

/// A shard, its checked predicate and its subjects.
type ShardReport = (ShardRef, DrillPredicate, Vec<Subject>);

/// Every way a shard is not of the same run as the first one (`first`, of `n` shards): plan, kind, digests, seed,
/// population (its ids, the roots they claim, its source), selection, shard count, split and run id.
fn disagreements(shards: &[ShardReport], first: &DrillPredicate, n: usize) -> Vec<String> {
    let mut reasons = Vec::new();
    for (s, p, _) in shards {
        let mut same = |what: &str, a: String, b: String| {
            if a != b {
                reasons.push(format!(
                    "{}: {what} {a} differs from {}'s {b}",
                    s.report,
                    shards_first_name(shards)
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
        if let Some(why) = roots_differ(
            &first.sample.population_ids,
            &p.sample.population_roots,
            &first.sample.population_roots,
        ) {
            reasons.push(format!("{}: {why} in {}", s.report, shards_first_name(shards)));
        }
    }
    reasons
}

/// How the population roots `roots` (of the ids `ids`, in that order) differ from `first_roots`, naming the first
/// bundle whose root differs and both roots; `None` when they are the same. The deleter refuses a merged report
/// whose results do not match its one list of roots, and `audit verify` flags it: the merge must not sign it.
fn roots_differ(ids: &[String], roots: &[Option<String>], first_roots: &[Option<String>]) -> Option<String> {
    let show = |r: Option<&Option<String>>| r.and_then(Option::as_deref).unwrap_or("none").to_owned();
    if roots.len() != first_roots.len() {
        return Some(format!(
            "{} population roots differ from the {} population roots",
            roots.len(),
            first_roots.len()
        ));
    }
    let i = roots.iter().zip(first_roots).position(|(a, b)| a != b)?;
    Some(format!(
        "population root {} of bundle {} differs from the population root {}",
        show(roots.get(i)),
        ids.get(i).map_or("(unnamed)", String::as_str),
        show(first_roots.get(i))
    ))
}

/// The subjects of a shard report that [`crate::ops::audit::check_report`] accepted, and the ids of the trusted
/// keys that signed it. A report whose signers cannot be read, or that names no trusted signer, could not be
/// decided on (exit 2, naming it): the merged report would record it with no signer, which `purge`'s own-key and
/// `evidenceSigners` checks would then pass over.
fn shard_subjects_and_signers(uri: &str, bytes: &[u8], trust: &TrustStore) -> Result<(Vec<Subject>, Vec<String>)> {
    let corrupt = |reason: String| Error::Corrupt {
        uri: uri.to_owned(),
        reason,
    };
    let subjects = evidence::verify(bytes, trust)
        .map_err(|e| corrupt(format!("the shard report's subjects cannot be read: {e}")))?
        .subjects()
        .to_vec();
    let envelope: evidence::Envelope = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(format!("the shard report's signers cannot be read: {e}")))?;
    let mut keyids: Vec<String> = Vec::new();
    for k in envelope.signatures.into_iter().map(|s| s.keyid) {
        if trust.get(&k).is_some() && !keyids.contains(&k) {
            keyids.push(k);
        }
    }
    if keyids.is_empty() {
        return Err(corrupt(
            "the shard report names no signer of the trust store: the merge would record it without one".into(),
        ));
    }
    Ok((subjects, keyids))
}

/// The merged run's window: the earliest shard start and the latest shard end, compared as times (as strings,
/// `…T09:00:00.500Z` sorts before `…T09:00:00Z` and offsets are not compared at all). Each bound is kept as its
/// shard wrote it. A time that does not parse as RFC 3339 could not be decided on (exit 2, naming the shard).
fn time_window(shards: &[ShardReport]) -> Result<(String, String)> {
    let mut start: Option<(chrono::DateTime<chrono::FixedOffset>, &str)> = None;
    let mut end: Option<(chrono::DateTime<chrono::FixedOffset>, &str)> = None;
    for (s, p, _) in shards {
        let parse = |what: &str, t: &str| {
            chrono::DateTime::parse_from_rfc3339(t).map_err(|e| Error::Corrupt {
                uri: s.report.clone(),
                reason: format!("its {what} {t:?} is not an RFC 3339 time: {e}"),
            })
        };
        let a = parse("started_at", &p.started_at)?;
        let b = parse("finished_at", &p.finished_at)?;
        if start.is_none_or(|(t, _)| a < t) {
            start = Some((a, &p.started_at));
        }
        if end.is_none_or(|(t, _)| b > t) {
            end = Some((b, &p.finished_at));
        }
    }
    Ok((
        start.map(|(_, t)| t.to_owned()).unwrap_or_default(),
        end.map(|(_, t)| t.to_owned()).unwrap_or_default(),
    ))
}

/// A sharded run of the sample's items: position p of the selection is the next result of shard p % N.
fn merge_items(
    selected: &[String],
    shards: &[ShardReport],
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
    shards: &[ShardReport],
    n: usize,
) -> Result<std::result::Result<Vec<DrillResult>, Vec<String>>> {
    let mut ordered: Vec<&ShardReport> = shards.iter().collect();
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
            // A share holding more objects than its inventory is refused by name; the sum is checked, so absurd
            // counts in a signed shard are named rather than wrapped (release) or panicked on (debug).
            for ((s, _), share) in parts.iter().zip(&shares) {
                if share.objects > share.inventory_objects {
                    reasons.push(format!(
                        "{}: share {}/{} of bundle {id} holds {} objects of an inventory of {}",
                        s.report, share.index, share.count, share.objects, share.inventory_objects
                    ));
                }
            }
            let inventory = shares[0].inventory_objects;
            let held = checked_sum(&parts, id, "objects of its share", |(_, i)| {
                shares.get(i).map_or(0, |p| p.objects)
            })?;
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
        // A share that failed before its root was read names the root its envelope claims (unverified). Shares
        // claiming different roots did not drill one bundle, as shares verifying different roots did not: refused
        // (each shard report keeps its failure in the registry and beside the chain).
        if merged.bundle_root.is_none() {
            let claims: Vec<(&ShardRef, &str)> = parts
                .iter()
                .filter_map(|(s, r)| r.claimed_bundle_root.as_deref().map(|c| (*s, c)))
                .collect();
            if let [(first_claim_ref, first_claim), rest @ ..] = claims.as_slice() {
                for (s, c) in rest.iter().filter(|(_, c)| c != first_claim) {
                    reasons.push(format!(
                        "{}: bundle {id} failed claiming root {c}, but {} failed claiming root {first_claim}",
                        s.report, first_claim_ref.report
                    ));
                }
            }
            merged.claimed_bundle_root = claims.first().map(|(_, c)| (*c).to_owned());
        }
        merged.status = if parts.iter().all(|(_, r)| r.status == RestoreStatus::RestoreVerified) {
            RestoreStatus::RestoreVerified
        } else {
            RestoreStatus::Failed
        };
        merged.objects_verified = checked_sum(&parts, id, "objects verified", |(r, _)| r.objects_verified)?;
        merged.bytes_verified = checked_sum(&parts, id, "bytes verified", |(r, _)| r.bytes_verified)?;
        merged.rto_seconds = parts.iter().map(|(_, r)| r.rto_seconds).fold(0.0, f64::max);
        let mut findings: Vec<_> = parts.iter().flat_map(|(_, r)| r.findings.iter().cloned()).collect();
        findings.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
        findings.dedup();
        merged.findings = findings;
        merged.object_shard = None;
        results.push(merged);
    }
    Ok(if reasons.is_empty() { Ok(results) } else { Err(reasons) })
}

/// The sum of a count over the shares of bundle `id` (`count` gets each share's result and its position), or, when
/// it overflows, the error naming the shard whose count overflowed it: a signed shard with absurd counts could not
/// be decided on (exit 2).
fn checked_sum<T: Count>(
    parts: &[(&ShardRef, &DrillResult)],
    id: &str,
    what: &str,
    count: impl Fn((&DrillResult, usize)) -> T,
) -> Result<T> {
    let mut total = T::ZERO;
    for (i, (s, r)) in parts.iter().enumerate() {
        let c = count((r, i));
        total = total.checked_add(c).ok_or_else(|| Error::Corrupt {
            uri: s.report.clone(),
            reason: format!("its {what} of bundle {id} ({c}) overflow the merged count"),
        })?;
    }
    Ok(total)
}

/// A count a merge adds up without wrapping ([`checked_sum`]).
trait Count: Copy + std::fmt::Display {
    const ZERO: Self;
    fn checked_add(self, other: Self) -> Option<Self>;
}

impl Count for usize {
    const ZERO: Self = 0;
    fn checked_add(self, other: Self) -> Option<Self> {
        usize::checked_add(self, other)
    }
}

impl Count for u64 {
    const ZERO: Self = 0;
    fn checked_add(self, other: Self) -> Option<Self> {
        u64::checked_add(self, other)
    }
}

fn shards_first_name(shards: &[ShardReport]) -> String {
    shards.first().map(|s| s.0.report.clone()).unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::evidence::keys::{PublicKey, SigningKey};
    use crate::evidence::predicate::{SampleInfo, Shard};

    /// Shard `index` of 2 (`s<index>.dsse.json`) of an object-split run of bundle `b0`, with `results`.
    fn shard(index: usize, roots: Vec<Option<String>>, window: (&str, &str), results: Vec<DrillResult>) -> ShardReport {
        let r = ShardRef {
            index,
            count: 2,
            report: format!("s{index}.dsse.json"),
            sha256: "0".repeat(64),
            drill_id: format!("d{index}"),
            keyids: Some(vec!["k".into()]),
        };
        let p = DrillPredicate {
            drill: DrillInfo {
                id: format!("d{index}"),
                kind: "quarantine".into(),
                plan: "weekly".into(),
                plan_digest: "p".into(),
                policy_digest: None,
                implementation_digest: "i".into(),
                evidence_retention: None,
                parallel_bundles: None,
            },
            started_at: window.0.into(),
            finished_at: window.1.into(),
            sample: SampleInfo {
                seed: 1,
                population: 1,
                size: 1,
                selected: vec!["b0".into()],
                retired: 0,
                source: Some("file:///b".into()),
                population_ids: vec!["b0".into()],
                population_roots: roots,
                sampler: None,
                coverage_weeks: None,
                coverage: vec![],
                forced: vec![],
            },
            summary: Summary::of(0, results.len()),
            results,
            previous_report: None,
            shard: Some(Shard {
                index,
                count: 2,
                run_id: None,
                split: ShardSplit::Objects,
            }),
            merged_from: None,
        };
        (r, p, vec![])
    }

    const WINDOW: (&str, &str) = ("2026-12-01T09:00:00.000Z", "2026-12-01T10:00:00.000Z");

    /// Share `index` of 2 of bundle `b0`: `objects` of an inventory of `inventory`, verified with `root`.
    fn share(index: usize, objects: usize, inventory: usize, verified: (usize, u64)) -> DrillResult {
        DrillResult {
            bundle_root: Some("root".into()),
            objects_verified: verified.0,
            bytes_verified: verified.1,
            object_shard: Some(ShardPart {
                index,
                count: 2,
                objects,
                inventory_objects: inventory,
                root: format!("share-{index}"),
            }),
            ..DrillResult::new("b0", RestoreStatus::RestoreVerified)
        }
    }

    fn two(a: DrillResult, b: DrillResult) -> Vec<ShardReport> {
        let roots = vec![Some("root".to_owned())];
        vec![
            shard(0, roots.clone(), WINDOW, vec![a]),
            shard(1, roots, WINDOW, vec![b]),
        ]
    }

    fn object_merge(shards: &[ShardReport]) -> Result<std::result::Result<Vec<DrillResult>, Vec<String>>> {
        merge_object_shares(&["b0".to_owned()], shards, 2)
    }

    /// M3: shards whose population lists other roots for its bundles are not of one run: refused (the merged
    /// report would fail `audit verify` and the deleter), naming both shards and both roots.
    #[test]
    fn shards_listing_different_population_roots_are_refused_naming_both_roots() {
        let shards = [
            shard(0, vec![Some("root-a".into())], WINDOW, vec![]),
            shard(1, vec![Some("root-b".into())], WINDOW, vec![]),
        ];
        let reasons = disagreements(&shards, &shards[0].1, 2);
        assert!(
            reasons.iter().any(|r| r.contains("s1.dsse.json")
                && r.contains("s0.dsse.json")
                && r.contains("root-b")
                && r.contains("root-a")
                && r.contains("bundle b0")),
            "{reasons:?}"
        );
        // One list shorter than the other (a root left out) is a difference too; equal lists are none.
        let shorter = [
            shard(0, vec![Some("root-a".into())], WINDOW, vec![]),
            shard(1, vec![], WINDOW, vec![]),
        ];
        let reasons = disagreements(&shorter, &shorter[0].1, 2);
        assert!(reasons.iter().any(|r| r.contains("0 population roots")), "{reasons:?}");
        assert_eq!(disagreements(&shards[..1], &shards[0].1, 2), Vec::<String>::new());
    }

    /// M4: a share holding more objects than its inventory is refused by name, even when the shares' sum happens
    /// to equal the inventory.
    #[test]
    fn a_share_holding_more_objects_than_its_inventory_is_refused_naming_the_shard() {
        let shards = two(share(0, 5, 3, (5, 5)), share(1, 0, 3, (0, 0)));
        let reasons = object_merge(&shards).unwrap().unwrap_err();
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("s0.dsse.json:") && r.contains("holds 5 objects of an inventory of 3")),
            "{reasons:?}"
        );
        // A sound pair merges, adding up the counts.
        let merged = object_merge(&two(share(0, 2, 3, (2, 20)), share(1, 1, 3, (1, 10))))
            .unwrap()
            .unwrap();
        assert_eq!((merged[0].objects_verified, merged[0].bytes_verified), (3, 30));
    }

    /// M4: counts whose sum overflows (a drill-key-signed shard with absurd counts) could not be decided on
    /// (exit 2) naming the shard, instead of wrapping in release and panicking in debug.
    #[test]
    fn overflowing_share_counts_could_not_decide_naming_the_shard() {
        let max = usize::MAX;
        for (shards, what) in [
            (
                two(share(0, max, max, (0, 0)), share(1, max, max, (0, 0))),
                "objects of its share",
            ),
            (
                two(share(0, 1, 2, (max, 0)), share(1, 1, 2, (1, 0))),
                "objects verified",
            ),
            (
                two(share(0, 1, 2, (1, u64::MAX)), share(1, 1, 2, (1, 1))),
                "bytes verified",
            ),
        ] {
            let e = object_merge(&shards).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Corrupt, "{e}");
            let text = e.to_string();
            assert!(text.starts_with("s1.dsse.json:") && text.contains(what), "{text}");
        }
    }

    /// M5: failed shares of one bundle claiming different (unverified) roots did not drill one bundle: refused,
    /// naming both shards and both claims, rather than keeping the first claim and dropping the other.
    #[test]
    fn failed_shares_claiming_different_roots_are_refused_naming_both() {
        let failed = |claim: &str| DrillResult {
            claimed_bundle_root: Some(claim.into()),
            ..DrillResult::new("b0", RestoreStatus::Failed)
        };
        let reasons = object_merge(&two(failed("claim-a"), failed("claim-b")))
            .unwrap()
            .unwrap_err();
        assert!(
            reasons.iter().any(|r| r.starts_with("s1.dsse.json:")
                && r.contains("claim-b")
                && r.contains("s0.dsse.json")
                && r.contains("claim-a")),
            "{reasons:?}"
        );
        // The same claim, or one share with none, merges into a FAILED result keeping the claim.
        for (a, b) in [
            (failed("claim-a"), failed("claim-a")),
            (DrillResult::new("b0", RestoreStatus::Failed), failed("claim-a")),
        ] {
            let merged = object_merge(&two(a, b)).unwrap().unwrap();
            assert_eq!(merged[0].status, RestoreStatus::Failed);
            assert_eq!(merged[0].claimed_bundle_root.as_deref(), Some("claim-a"));
        }
    }

    /// M6: the merged window is the earliest start and the latest end as times. By string order `…09:00:00.500Z`
    /// comes before `…09:00:00Z` and `11:00+02:00` (09:00Z) after `10:00Z`.
    #[test]
    fn the_merged_window_compares_times_not_strings() {
        let shards = [
            shard(0, vec![], ("2026-12-01T09:00:00Z", "2026-12-01T10:00:00Z"), vec![]),
            shard(
                1,
                vec![],
                ("2026-12-01T09:00:00.500Z", "2026-12-01T11:00:00.000+02:00"),
                vec![],
            ),
        ];
        let (start, end) = time_window(&shards).unwrap();
        assert_eq!(
            (start.as_str(), end.as_str()),
            ("2026-12-01T09:00:00Z", "2026-12-01T10:00:00Z")
        );
    }

    /// M6: a shard time that is not RFC 3339 could not be decided on (exit 2), naming the shard and the field.
    #[test]
    fn an_unparsable_shard_time_could_not_decide_naming_the_shard() {
        for window in [("yesterday", WINDOW.1), (WINDOW.0, "2026-13-01T00:00:00Z")] {
            let shards = [shard(0, vec![], WINDOW, vec![]), shard(1, vec![], window, vec![])];
            let e = time_window(&shards).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Corrupt, "{e}");
            assert!(e.to_string().starts_with("s1.dsse.json: its "), "{e}");
        }
    }

    /// M7: a shard whose signers cannot be read would be recorded in `merged_from` with no signer (which `purge`'s
    /// own-key check and `evidenceSigners` would then pass over): could not decide (exit 2), naming the shard.
    #[test]
    fn a_shard_whose_signers_cannot_be_read_could_not_decide() {
        let key = SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[9; 32]));
        let trust = TrustStore::from_keys(vec![PublicKey::new("drill", "drill.pub", key.verifying_key())]).unwrap();
        let st = Statement {
            subject: vec![Subject::sha256("lakedrill-bundle:b0", "0".repeat(64))],
            predicate_type: drill::PREDICATE_TYPE.into(),
            predicate: serde_json::json!({}),
        };
        let bytes = evidence::sign_statement(&st, &key).to_json_bytes();
        let (subjects, keyids) = shard_subjects_and_signers("file:///s/s0.dsse.json", &bytes, &trust).unwrap();
        assert_eq!((subjects.len(), keyids.len()), (1, 1));
        let e = shard_subjects_and_signers("file:///s/s1.dsse.json", b"{}", &trust).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Corrupt, "{e}");
        assert!(e.to_string().starts_with("file:///s/s1.dsse.json: "), "{e}");
        // Signed only by a key outside the trust store: no signer to record.
        let other = TrustStore::from_keys(vec![PublicKey::new(
            "other",
            "other.pub",
            SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[7; 32])).verifying_key(),
        )])
        .unwrap();
        let e = shard_subjects_and_signers("file:///s/s2.dsse.json", &bytes, &other).unwrap_err();
        assert!(e.to_string().starts_with("file:///s/s2.dsse.json: "), "{e}");
    }
}
