//! **The deleter: the only code in lakedrill that removes objects.** Read this before changing it.
//!
//! A purge is refused outright for a table in rollout stage `report-only` (the default), in stage `test` under a
//! policy that does not declare `regulatedData: false`, before `minQuarantinePeriod` or a quarantine extension has
//! passed, by a build whose SHA-256 differs from the policy's `reclamationImplementationDigest`, and under a
//! policy that pins no build at all (only `reclamationImplementationDigest: any` accepts every build).
//!
//! A purge is accepted only with fresh, valid, signed drill evidence that covers every bundle root of
//! the candidate with `RESTORE_VERIFIED` — signed by a drill key the policy's `evidenceSigners` lists when it lists
//! any, of the kind the weekly gate counts and not drilled under another policy of the table — and only when a compare-and-set over the table generation,
//! the protected-ref root, the lease watermark and the hold generation still matches what was
//! recorded at quarantine. The comparison and the move to `DELETE_APPROVED` happen in one registry
//! transaction ([`crate::registry::Registry::candidate_accept`]). Before it, the gates of DESIGN §7 are
//! evaluated for the candidate's table ([`crate::ops::gates::deleter_gates`]: the weekly restores from a report
//! covering the table, the quarterly recovery for critical tables, no acceptance or delete after a hold); a
//! failing gate refuses, naming itself and its figure.
//!
//! After acceptance the deleter
//! 1. archives the exact inventory, signed, next to the receipts (write-once);
//! 2. removes the candidate's quarantine tags and snapshots from the table in one catalog commit, so
//!    that no metadata points at an object about to disappear;
//! 3. deletes exactly the inventory — never a fresh listing — in bounded batches, re-checking the stop
//!    switch, the hold generation, the lease watermark and the candidate's state between batches;
//! 4. records a write-once receipt before and after every delete, and re-checks every object: an
//!    object is `VERIFIED` only when a re-check shows it gone; anything uncertain (an error, a lost
//!    response, a re-check that disagrees) is `DELETE_UNKNOWN`, never counted as deleted;
//! 5. signs a receipts summary stating the deleted set, its root and whether it equals the inventory.
//!
//! Every step is persisted before it is acted on, so a purge killed at any point resumes: objects
//! whose delete was requested but not confirmed are re-checked, never blindly deleted twice.
//!
//! On a versioned bucket the policy's `objectVersioning` chooses marker-only deletes (the default: a
//! delete marker hides the object, its version stays until lifecycle) or permanent deletes of the exact
//! version the inventory saw; [`undelete`] brings marker-hidden objects back and verifies them against
//! the bundles.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;

use crate::bundle::Layer;
use crate::error::{Error, Result};
use crate::evidence::keys::{SigningKey, TrustStore};
use crate::evidence::{self, Subject};
use crate::govern::closure::ObjectRef;
use crate::govern::policy::{ObjectVersioning, Policy};
use crate::io::store::DelayPoint;
use crate::io::store::s3::{DeleteAnswer, DeleteKey, DeleteMethod, MAX_DELETE_OBJECTS_KEYS};
use crate::model::location;
use crate::ops::binding::{still_claimed, taken_over};
use crate::ops::context::Context;
use crate::ops::plan::QUARANTINE_TAG_PREFIX;
use crate::ops::retire::retire_bundles;
use crate::registry::{Acceptance, CandidateRecord, PurgeBaseline, Registry, State};
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;

/// `predicateType` of the signed inventory archive and the receipts summary.
pub use crate::evidence::predicate::RECEIPTS_PREDICATE_TYPE;

/// What `purge` needs.
#[derive(Debug, Clone)]
pub struct PurgeOptions {
    /// The candidate.
    pub candidate_id: String,
    /// The signed drill report. Without it, the covering weekly report the weekly gate found under `reports`.
    pub evidence: Option<String>,
    /// The reports folder the gates read (`<reports>/<plan>/…`). Without it, the folder two levels above
    /// `evidence` (the evidence's plan folder's parent).
    pub reports: Option<String>,
    /// Trust store for the evidence.
    pub trust: std::path::PathBuf,
    /// The retention policy.
    pub policy: std::path::PathBuf,
    /// Signing key for the archive and the receipts summary.
    pub key: std::path::PathBuf,
    /// Where receipts, the archive and the summary go (`<receipts>/<candidate>/`).
    pub receipts: String,
    /// Print what would happen and every check's outcome; change nothing.
    pub dry_run: bool,
}

/// The drill report a purge deletes on: its URI and the SHA-256 of its bytes. The accepting run names it in the
/// signed inventory archive (`evidence`), so that a resume without `--evidence` judges the same report again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RunEvidence {
    // In sorted order: a signed payload's keys are.
    /// SHA-256 of the report's bytes (hex).
    pub sha256: String,
    /// Where the report lies.
    pub uri: String,
}

fn snapshot_ids_of(rec: &CandidateRecord) -> Vec<i64> {
    rec.candidate["snapshot_ids"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
        .unwrap_or_default()
}

/// Why key `k` is not a drill key of `trust`, in words: a key the folder holds without the drill role, or one
/// outside it.
fn drill_key_status(trust: &TrustStore, k: &str) -> String {
    match trust.get(k) {
        Some(pk) => format!(
            "{}, which the trust folder's {} does not give the drill role",
            pk.name(),
            crate::evidence::keys::ROLES_FILE
        ),
        None => "a key outside the trust folder".to_owned(),
    }
}

/// Checks the evidence against the candidate (pure). Returns every reason to refuse.
///
/// Only a signature by a key that holds the `drill` role of `trust` ([`crate::evidence::keys::Role`]) counts, and
/// never one by `deleter_keyid`, the key the purge signs its receipts with: a deleter must not be able to vouch
/// for the drill that allows its deletes, whatever the trust folder holds. For a merged report that holds for
/// every shard as well: the signers `report merge` recorded in `merged_from` must not include `deleter_keyid`,
/// and a merged report without that record is refused. When the policy lists `evidenceSigners` (it binds the
/// table), only a signature by a listed key counts, and every shard of a merged report must be signed by a listed
/// key too.
///
/// The report must be one the weekly gate counts ([`crate::ops::gates::counts_as_weekly`]: a quarantine drill,
/// a `restore --shard` report, or their merge — not a cold-backup drill), and one drilled under the policy the
/// purge runs under: a report whose results name another policy digest for the candidate's table is refused,
/// naming both digests (one naming none counts, as in the gate).
#[must_use]
pub fn check_evidence(
    rec: &CandidateRecord,
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    deleter_keyid: &str,
    policy: &Policy,
    now: chrono::DateTime<Utc>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let listed = policy.evidence_signers();
    let drill_keys = trust.for_role(crate::evidence::keys::Role::Drill);
    let signers = match listed {
        Some(ids) => drill_keys.only(ids),
        None => drill_keys,
    }
    .without(deleter_keyid);
    let keyids: Vec<String> = serde_json::from_slice::<crate::evidence::Envelope>(bytes)
        .map(|e| e.signatures.into_iter().map(|s| s.keyid).collect())
        .unwrap_or_default();
    if keyids.iter().all(|k| signers.get(k).is_none()) {
        for k in &keyids {
            if k == deleter_keyid {
                reasons.push(format!(
                    "evidence {name} is signed by the purge's own key (keyid {k}, --key): a deleter must not vouch \
                     for the drill that allows its deletes; sign drill reports with a key of their own"
                ));
            } else if let Some(ids) = listed
                && !ids.contains(k)
            {
                reasons.push(format!(
                    "evidence {name} is signed by {} (keyid {k}), which the policy {}'s evidenceSigners does not list \
                     ({}): only a drill report signed by a listed key counts for this table",
                    trust.get(k).map_or_else(
                        || "a key outside the trust folder".to_owned(),
                        |pk| pk.name().to_owned()
                    ),
                    policy.source_name(),
                    ids.join(", ")
                ));
            } else if let Some(pk) = trust.get(k) {
                reasons.push(format!(
                    "evidence {name} is signed by {} (keyid {k}), which the trust folder's {} does not give the \
                     drill role",
                    pk.name(),
                    crate::evidence::keys::ROLES_FILE
                ));
            }
        }
        if !reasons.is_empty() {
            return reasons;
        }
    }
    let all_trust = trust;
    let trust = &signers;
    let mut findings = Vec::new();
    let Some((_, pred)) = crate::ops::audit::check_report(name, bytes, trust, &mut findings) else {
        reasons.extend(
            findings
                .iter()
                .map(|f| format!("evidence {}: {} — {}", f.report, f.check, f.detail)),
        );
        if reasons.is_empty() {
            reasons.push(format!("evidence {name} does not verify"));
        }
        return reasons;
    };
    reasons.extend(
        findings
            .iter()
            .map(|f| format!("evidence {}: {} — {}", f.report, f.check, f.detail)),
    );
    // A merged report is signed by the merging key, but the shards are the evidence of the restores: a shard signed
    // by the purge's own key would let the deleter vouch for its deletes behind another key's signature. A report
    // merged before `report merge` recorded the shards' signers cannot show they were not the purge's key: it is
    // refused too (merging the same shards again records them).
    for s in pred.merged_from.iter().flatten() {
        match &s.keyids {
            None => reasons.push(format!(
                "evidence {name} was merged from shard report {} (shard {}/{}) without a record of who signed it (a \
                 merge by an older lakedrill), so it cannot be shown that the purge's own key did not sign it: merge \
                 the shards again with `report merge`",
                s.report, s.index, s.count
            )),
            Some(ids) if ids.iter().any(|k| k == deleter_keyid) => reasons.push(format!(
                "evidence {name} was merged from shard report {} (shard {}/{}), which is signed by the purge's own \
                 key (keyid {deleter_keyid}, --key): a deleter must not vouch for the drill that allows its deletes; \
                 sign drill reports with a key of their own",
                s.report, s.index, s.count
            )),
            // A shard counts only when a key that may sign drill reports for this purge signed it: a drill key of the
            // purge's trust folder (the merging key's trust folder may give the role to others) and, under
            // evidenceSigners, a listed one. The merging key's signature says nothing about who drilled.
            Some(ids) => {
                if ids.is_empty() {
                    reasons.push(format!(
                        "evidence {name} was merged from shard report {} (shard {}/{}) with no signer recorded, so \
                         it cannot be shown that a drill key{} signed it",
                        s.report,
                        s.index,
                        s.count,
                        listed.map_or_else(String::new, |_| format!(
                            " the policy {}'s evidenceSigners lists",
                            policy.source_name()
                        ))
                    ));
                }
                for k in ids.iter().filter(|k| signers.get(k).is_none()) {
                    if let Some(listed) = listed
                        && !listed.contains(k)
                    {
                        reasons.push(format!(
                            "evidence {name} was merged from shard report {} (shard {}/{}), which is signed by keyid \
                             {k}, which the policy {}'s evidenceSigners does not list ({}): every shard of a merged \
                             report must be signed by a listed key",
                            s.report,
                            s.index,
                            s.count,
                            policy.source_name(),
                            listed.join(", ")
                        ));
                    } else {
                        reasons.push(format!(
                            "evidence {name} was merged from shard report {} (shard {}/{}), which is signed by keyid \
                             {k}, {}: every shard of a merged report must be signed by a key with the drill role of \
                             the purge's --trust",
                            s.report,
                            s.index,
                            s.count,
                            drill_key_status(all_trust, k)
                        ));
                    }
                }
            }
        }
    }
    // What deletes is what the weekly gate counts: a drill of the quarantined bundles (not a cold-backup drill),
    // drilled under the rules in force (#23 point 5).
    if !crate::ops::gates::counts_as_weekly(&pred) {
        reasons.push(format!(
            "evidence {name} is a {:?} drill report (plan {}): only a {:?} drill of the bundles (`drill run` of a \
             bundles plan, `restore --shard`, or their merge) is evidence of their restores, as the weekly gate counts",
            pred.drill.kind,
            pred.drill.plan,
            crate::ops::gates::WEEKLY_KIND
        ));
    }
    if let Some(other) = pred.other_policy_digest(&rec.table_uuid, policy.digest()) {
        reasons.push(format!(
            "evidence {name} drilled table {} under policy sha256 {other}, but the purge runs under policy {} with \
             sha256 {}: the rules changed after the drill, so it is no evidence for them; drill again",
            rec.table_uuid,
            policy.source_name(),
            policy.digest()
        ));
    }
    // A shard's report names every root it touched RESTORE_VERIFIED, but verified only its share of them: it is
    // refused by what it signs, wherever it lies (a copy outside `shards/` is still a shard).
    if pred.is_shard_partial() {
        let (of, what) = match &pred.shard {
            Some(s) => (
                format!("shard {}/{}", s.index, s.count),
                format!(
                    "1/{} of the {}",
                    s.count,
                    if s.split == crate::evidence::predicate::ShardSplit::Objects {
                        "objects"
                    } else {
                        "items"
                    }
                ),
            ),
            None => ("a shard".to_owned(), "a share of the objects".to_owned()),
        };
        reasons.push(format!(
            "evidence {name} is the partial report of {of} of a sharded drill: a shard report covers {what}; merge \
             the shards with `report merge` and give the merged report"
        ));
    }
    reasons.extend(evidence_age(&pred, policy, now));
    let bundles = rec
        .quarantine
        .as_ref()
        .and_then(|q| q["bundles"].as_array().cloned())
        .unwrap_or_default();
    if bundles.is_empty() {
        reasons.push("the candidate has no recorded bundles".into());
    }
    for b in bundles {
        let root = b["bundle_root"].as_str().unwrap_or_default();
        // Every result of the root must have passed, not one of them: a report that verified the same bundle twice
        // (two copies of it in the sample) with one failure is no evidence for it. A result that only claims the
        // root (its envelope's, unverified) counts against it when it failed and never for it: a pass shows the
        // root only as the root it verified (review E4).
        let of_root: Vec<_> = pred
            .results
            .iter()
            .filter(|r| r.bundle_root.as_deref() == Some(root) || r.claimed_bundle_root.as_deref() == Some(root))
            .collect();
        let ok = !of_root.is_empty()
            && of_root.iter().all(|r| {
                r.status == crate::bundle::RestoreStatus::RestoreVerified && r.bundle_root.as_deref() == Some(root)
            });
        if !ok && !crate::safety::weakened(crate::safety::Check::EvidenceCoverage) {
            reasons.push(format!(
                "the evidence does not show bundle root {root} (snapshot {}) RESTORE_VERIFIED",
                b["snapshot_id"]
            ));
        }
    }
    reasons
}

/// Why the evidence `pred` is too old, or claims to come from the future, at `now` under the policy's
/// `evidenceMaxAge` (pure). A merged report is as old as its oldest shard. Judged at the time a purge decides: at
/// its acceptance (the clock read again right before the acceptance transaction), and at each resume before
/// further deletes.
fn evidence_age(pred: &crate::ops::drill::DrillPredicate, policy: &Policy, now: chrono::DateTime<Utc>) -> Vec<String> {
    let mut reasons = Vec::new();
    let max = policy.evidence_max_age();
    let age_of = |field: &str, at: &str| {
        chrono::DateTime::parse_from_rfc3339(at)
            .map(|t| now - t.with_timezone(&Utc))
            .map_err(|e| format!("evidence {field} {at:?} is not a time: {e}"))
    };
    match age_of("finished_at", &pred.finished_at) {
        Ok(age) => {
            if age > max {
                reasons.push(format!(
                    "evidence is stale: finished {} ({} h ago), the policy accepts at most {} h",
                    pred.finished_at,
                    age.num_hours(),
                    max.num_hours()
                ));
            }
            if age < -chrono::Duration::minutes(crate::ops::gates::FUTURE_SLACK_MINUTES) {
                reasons.push(format!("evidence finished in the future ({})", pred.finished_at));
            }
        }
        Err(why) => reasons.push(why),
    }
    // A merged report is as old as its oldest shard: `report merge` takes the newest shard's end as the report's,
    // so a shard verified long ago, merged with fresh ones, would otherwise count as fresh.
    if pred.merged_from.is_some() {
        match age_of("started_at", &pred.started_at) {
            Ok(age) if age > max => reasons.push(format!(
                "evidence is stale: it was merged from shard reports and its oldest shard started {} ({} h ago), \
                 the policy accepts at most {} h",
                pred.started_at,
                age.num_hours(),
                max.num_hours()
            )),
            Ok(_) => {}
            Err(why) => reasons.push(why),
        }
    }
    reasons
}

/// The reports folder a drill report lies in: `<reports>` when the report is `<reports>/<plan>/<file>` for
/// the plan it names (read without verifying: only to locate the folder). `None` for a report that does not
/// exist, cannot be read as one, or lies elsewhere.
async fn reports_folder_of(storage: &crate::io::store::Storage, evidence_uri: &str) -> Result<Option<String>> {
    let Some(f) = storage.get_opt(evidence_uri).await? else {
        return Ok(None);
    };
    let Some(st) = crate::evidence::peek_unverified(&f.bytes) else {
        return Ok(None);
    };
    let Some(plan) = st["predicate"]["drill"]["plan"].as_str() else {
        return Ok(None);
    };
    Ok(location::parent(evidence_uri)
        .filter(|folder| location::file_name(folder) == plan)
        .and_then(|folder| location::parent(&folder)))
}

/// The candidate's recorded bundles: (bundle URI, bundle root, snapshot id).
fn bundles_of(rec: &CandidateRecord) -> Vec<(String, String, i64)> {
    rec.quarantine
        .as_ref()
        .and_then(|q| q["bundles"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|b| {
            (
                b["uri"].as_str().unwrap_or_default().to_owned(),
                b["bundle_root"].as_str().unwrap_or_default().to_owned(),
                b["snapshot_id"].as_i64().unwrap_or_default(),
            )
        })
        .collect()
}

/// Evidence is valid for a bundle root only while no newer drill of that root failed (DESIGN §8). Two sources,
/// both searched:
///
/// - **the registry** (`reg`, the one the drills record into: the same `[registry]` of the same configuration):
///   every drill report, wherever it was written, shard reports included, records its verdict per bundle root;
///   a failure of one of the candidate's roots that finished after the evidence started refuses, naming the
///   report (one that finished while the passing drill ran may have seen an object after the pass read it). This
///   does not depend on where the caller keeps the evidence: a copy of an old PASS in a fresh folder is still
///   older than the FAIL the registry knows.
/// - **the chains beside the evidence** (`<reports>/<plan>/…`, shard folders included): every report there that
///   verifies under `trust`, finished after the evidence started and did not verify one of the candidate's roots. This
///   covers drills run without a registry. Evidence that does not lie in its plan's folder cannot be placed in
///   its chain and is refused too.
///
/// A drill run with no registry (or another one) records nothing here; evidence the registry has no record of is
/// warned about, since only the reports beside it could be searched.
///
/// # Errors
/// Storage errors while listing or reading the reports; registry errors.
pub async fn newer_failures(
    storage: &crate::io::store::Storage,
    reg: &Registry,
    evidence_uri: &str,
    evidence_bytes: &[u8],
    evidence: &crate::ops::drill::DrillPredicate,
    roots: &[(String, String, i64)],
    trust: &TrustStore,
) -> Result<Vec<String>> {
    // The evidence read its roots from its start on (a merged report: its oldest shard's start): a drill that
    // failed one of them and finished after that start may have seen an object after the evidence read it (it
    // finished while the passing drill was still running), so it is newer than some of the evidence.
    let (Ok(started), Ok(finished)) = (
        chrono::DateTime::parse_from_rfc3339(&evidence.started_at),
        chrono::DateTime::parse_from_rfc3339(&evidence.finished_at),
    ) else {
        return Ok(vec![format!(
            "evidence {evidence_uri}: started_at {:?} or finished_at {:?} is not a time, so no newer failure of its \
             roots can be ruled out",
            evidence.started_at, evidence.finished_at
        )]);
    };
    let since = started.min(finished).with_timezone(&Utc);
    let snapshot_of = |root: &str| roots.iter().find(|(_, r, _)| r == root).map(|(_, _, sid)| *sid);
    // (report, root) → the reason: one reason per failing report and root, whichever source found it first.
    let mut failures: BTreeMap<(String, String), String> = BTreeMap::new();
    let root_names: Vec<String> = roots.iter().map(|(_, root, _)| root.clone()).collect();
    for v in reg.drill_failures_after(&root_names, since).await? {
        let shard = v.shard.as_deref().map_or_else(String::new, |s| format!(", shard {s}"));
        let reason = format!(
            "a newer drill report {} (plan {}{shard}, finished {}; recorded in the registry) FAILED {} \
             (snapshot {}): the evidence {evidence_uri} (started {}) no longer counts for it",
            v.report_uri,
            v.plan,
            v.finished_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            v.root_words(),
            snapshot_of(&v.bundle_root).unwrap_or_default(),
            evidence.started_at
        );
        failures.entry((v.report_uri, v.bundle_root)).or_insert(reason);
    }
    if !reg.drill_recorded(&crate::evidence::sha256_hex(evidence_bytes)).await? {
        crate::report::output::warn(format!(
            "the registry has no record of the evidence {evidence_uri}: it was drilled without this registry \
             ([registry] in the drill's configuration) or before drills recorded their verdicts, so drills of its \
             roots run the same way are known only from the reports beside it"
        ));
    }
    let plan_folder = location::parent(evidence_uri);
    let Some(reports_root) = plan_folder
        .as_deref()
        .filter(|f| location::file_name(f) == evidence.drill.plan)
        .and_then(location::parent)
    else {
        let mut reasons: Vec<String> = failures.into_values().collect();
        reasons.push(format!(
            "evidence {evidence_uri} is not in its plan's reports folder (<reports>/{}/): the newer reports of its \
             chain cannot be checked; give the report where `drill run` wrote it",
            evidence.drill.plan
        ));
        return Ok(reasons);
    };
    for o in storage.list(&reports_root).await? {
        if o.uri == evidence_uri || !o.uri.ends_with(".dsse.json") {
            continue;
        }
        // Bounded as table metadata is: a file of any size can be written beside the evidence.
        let max = storage.options().max_metadata_bytes;
        let bytes = storage.get_bounded(&o.uri, max, "a drill report").await?.bytes;
        let mut findings = Vec::new();
        let Some((_, p)) = crate::ops::audit::check_report(&o.uri, &bytes, trust, &mut findings) else {
            continue; // not a drill report signed by a trusted key
        };
        // Newer: it finished after the evidence started, while or after the evidence's drill read its roots.
        let newer = chrono::DateTime::parse_from_rfc3339(&p.finished_at).is_ok_and(|t| t > since);
        if !newer {
            continue;
        }
        for r in &p.results {
            // A failed item whose envelope did not verify names only the root it claims (unverified): it counts
            // as a failure of that root all the same, since a claim can only refuse more.
            let Some((_, root, sid)) = roots.iter().find(|(_, root, _)| r.judged_root() == Some(root)) else {
                continue;
            };
            if r.status != crate::bundle::RestoreStatus::RestoreVerified {
                let claimed = if r.bundle_root.is_none() {
                    " (the root its envelope claims: the envelope did not verify)"
                } else {
                    ""
                };
                failures.entry((o.uri.clone(), root.clone())).or_insert_with(|| {
                    format!(
                        "a newer drill report {} (finished {}) FAILED bundle root {root}{claimed} (snapshot {sid}): \
                         the evidence {evidence_uri} (started {}) no longer counts for it",
                        o.uri, p.finished_at, evidence.started_at
                    )
                });
            }
        }
    }
    Ok(failures.into_values().collect())
}

/// Why the evidence at `uri` does not count under a policy with `evidenceRetention`: such a policy wants its
/// evidence as unrewritable as the receipts, so the report must be an S3 object under Object Lock in the policy's
/// mode until at least its `finished_at` plus the policy's period. Without `evidenceRetention`, nothing.
///
/// # Errors
/// Storage errors reading the object's lock or its bucket's configuration.
pub async fn evidence_unlocked(
    storage: &crate::io::store::Storage,
    uri: &str,
    bytes: &[u8],
    policy: &Policy,
) -> Result<Vec<String>> {
    let Some(retention) = policy.evidence_retention() else {
        return Ok(Vec::new());
    };
    let claim = crate::ops::evidence_lock::claim(retention);
    let Some(lock) = crate::ops::evidence_lock::status(storage, uri).await? else {
        return Ok(vec![format!(
            "evidence {uri} is not under Object Lock: the policy sets evidenceRetention ({} for {} s), so only a \
             report on S3 that cannot be rewritten counts (run the drill with the policy's evidenceRetention and an \
             s3:// reports folder on a bucket with Object Lock)",
            claim.mode, claim.period_seconds
        )]);
    };
    let finished = crate::evidence::peek_unverified(bytes)
        .and_then(|st| st["predicate"]["finished_at"].as_str().map(str::to_owned))
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| t.with_timezone(&Utc));
    Ok(crate::ops::evidence_lock::shortfall(&lock, Some(&claim), finished)
        .map(|why| format!("evidence {uri} is not locked as the policy's evidenceRetention requires: {why}"))
        .into_iter()
        .collect())
}

/// Which of a candidate's objects (by index) lie, with their size, in the inventory of one of its verified
/// bundles.
pub type Covered = Vec<bool>;

/// Re-verifies each of the candidate's bundles from the bundle alone at acceptance: the envelope under `trust`,
/// the recorded root, the root recomputed from the inventory, and every metadata copy (metadata JSON, manifest
/// list, manifests; small) present with its recorded BLAKE3. Returns every problem, naming bundle and object,
/// and which of the candidate's `objects` the bundles whose envelope verified sealed with that size.
///
/// # Errors
/// Never for a broken bundle (that is a reason); storage errors other than a missing member are reasons too.
pub async fn bundles_intact(
    storage: &crate::io::store::Storage,
    bundles: &[(String, String, i64)],
    objects: &[ObjectRef],
    trust: &TrustStore,
) -> Result<(Vec<String>, Covered)> {
    let mut reasons = Vec::new();
    let wanted = path_keys(objects);
    // Each object's index by path key (the sizes sealed are compared with its own).
    let mut index: Vec<(u128, usize)> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| (path_key(&o.path), i))
        .collect();
    index.sort_unstable();
    let mut covered = vec![false; objects.len()];
    for (uri, root, sid) in bundles {
        // Only each object's sealed size is taken as the inventory is read (no entry of a data file is kept,
        // #24), and counted only once the bundle verified.
        let (pred, copies, digests, sizes) =
            match read_bundle_taking(storage, uri, trust, &wanted, |e| e.size, None).await {
                Ok(v) => v,
                Err(e) => {
                    reasons.push(format!("bundle {uri} (snapshot {sid}) does not verify: {e}"));
                    continue;
                }
            };
        for (k, size) in sizes {
            let from = index.partition_point(|(x, _)| *x < k);
            for (_, i) in index[from..].iter().take_while(|(x, _)| *x == k) {
                if objects[*i].size == size {
                    covered[*i] = true;
                }
            }
        }
        if &pred.bundle_root != root {
            reasons.push(format!(
                "bundle {uri} has root {} but the quarantine recorded {root}",
                pred.bundle_root
            ));
        }
        let recomputed = digests.root;
        if recomputed != pred.bundle_root {
            reasons.push(format!(
                "bundle {uri}: its inventory hashes to {recomputed}, not to its root {}",
                pred.bundle_root
            ));
        }
        for e in pred
            .inventory
            .iter()
            .filter(|e| e.layer.is_metadata() && e.copy.is_some())
        {
            if !copies.contains(&e.path) {
                reasons.push(format!(
                    "bundle {uri}: its copy of {} ({:?}) is missing or differs from its recorded BLAKE3 {}",
                    e.path, e.layer, e.blake3
                ));
            }
        }
    }
    Ok((reasons, covered))
}

/// What the registry row says may be deleted, checked against what was signed (#23 point 4): the candidate's
/// inventory must hash to its recorded root, and every object must lie, with its size, in the inventory of one
/// of the candidate's verified bundles. A registry row edited to add a retained file (with a matching root or
/// not) is refused here, before acceptance. Returns every reason to refuse.
///
/// # Errors
/// A bundle's table location that is not a storage URI.
fn inventory_covered(rec: &CandidateRecord, covered: &Covered) -> Result<Vec<String>> {
    let objects = &rec.objects;
    let mut reasons = Vec::new();
    let recorded = rec.candidate["inventory_root"].as_str().unwrap_or_default();
    let recomputed = crate::govern::closure::candidate_root(objects);
    if recomputed != recorded {
        reasons.push(format!(
            "the candidate's inventory ({} objects) hashes to {recomputed}, not to its recorded root {recorded}: the \
             registry row was changed after planning",
            objects.len()
        ));
    }
    let outside: Vec<String> = objects
        .iter()
        .enumerate()
        .filter(|(i, _)| !covered.get(*i).copied().unwrap_or(false))
        .map(|(_, o)| o)
        .map(|o| format!("{} ({} bytes)", o.path, o.size))
        .collect();
    if !outside.is_empty() {
        let shown: Vec<&String> = outside.iter().take(10).collect();
        reasons.push(format!(
            "{} object(s) of the candidate lie in no verified bundle inventory of it with that size: {shown:?}{}",
            outside.len(),
            if outside.len() > shown.len() { " …" } else { "" }
        ));
    }
    Ok(reasons)
}

#[derive(Debug, Clone, Serialize)]
struct Receipt<'a> {
    phase: &'a str,
    key: String,
    layer: Layer,
    expected_size: u64,
    /// The version sealed (or seen before the delete); in permanent mode the one deleted.
    version_id: Option<String>,
    /// The ETag the delete was conditional on.
    e_tag: Option<String>,
    /// `bundle`, `head` or `none`: where `e_tag` comes from.
    expected_from: &'a str,
    permanent: bool,
    requested_at: Option<String>,
    confirmed_at: Option<String>,
    /// How the delete was sent (`s3-delete-objects`, `s3-delete-object-if-match`, …).
    method: Option<DeleteMethod>,
    provider_result: String,
    /// The provider's `DeleteMarker` for this key, as it returned it.
    delete_marker: Option<bool>,
    /// The provider's `DeleteMarkerVersionId`.
    delete_marker_version_id: Option<String>,
    /// The provider's whole answer for this key.
    provider: Option<DeleteAnswer>,
    recheck: Option<String>,
}

/// What a purge did.
#[derive(Debug, Clone, Serialize)]
pub struct PurgeReport {
    /// `DRY_RUN`, `REFUSED`, `HALTED`, `VERIFIED` or `DELETE_UNKNOWN`.
    pub status: String,
    /// The candidate.
    pub candidate_id: String,
    /// Reasons for a refusal or a halt.
    pub reasons: Vec<String>,
    /// Object paths by final state.
    pub objects: BTreeMap<String, Vec<String>>,
    /// The signed summary, when written.
    pub summary: Option<String>,
    /// The gates evaluated before acceptance (DESIGN §7), each with its figures; empty when none were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<crate::ops::gates::Gate>,
    /// The delete requests this run sent, by kind (on S3: `DeleteObjects` batches and single deletes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<crate::io::store::RequestCounts>,
    /// The registry write transactions this process committed or began (the purge writes its receipts and state
    /// changes batch by batch: two per batch, #24).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_transactions: Option<u64>,
}

/// `lakedrill purge CANDIDATE --evidence REPORT`: up to 3 tries while only the acceptance's
/// compare-and-set refuses ([`Acceptance::Moved`]); the reasons of those tries are in `moved_tries`.
///
/// # Errors
/// When lakedrill cannot decide (unreadable policy, registry, store). Refusals are outcomes (exit 1).
pub async fn purge(ctx: &Context, source: &TableSource, opts: &PurgeOptions) -> Result<Outcome> {
    let mut moved_before = Vec::new();
    loop {
        let mut moved = false;
        let mut out = purge_try(ctx, source, opts, &mut moved).await?;
        if moved && !opts.dry_run && moved_before.len() + 1 < PURGE_TRIES {
            // Only the compare-and-set refused it: the world moved between this try's read and its acceptance (a
            // reader's lease, a hold, a commit). The next try reads it again and rebases onto it, as the next run
            // would; each refused try is in the registry's events as a refused purge.
            let why = out.json["reasons"].clone();
            crate::report::output::warn(format!(
                "{}: the world moved while the purge judged it ({}); judging it again",
                opts.candidate_id,
                why.as_array()
                    .map(|a| a.iter().filter_map(|r| r.as_str()).collect::<Vec<_>>().join("; "))
                    .unwrap_or_default()
            ));
            moved_before.push(why);
            continue;
        }
        if !moved_before.is_empty() {
            // What the earlier tries were refused for, with the outcome of the last.
            out.json["moved_tries"] = serde_json::Value::Array(moved_before);
        }
        return Ok(out);
    }
}

/// How many times one `purge` judges its candidate when only the compare-and-set refuses it (the world moved
/// between its read and its acceptance).
const PURGE_TRIES: usize = 3;

/// One try of [`purge`]. `moved` is set when only the acceptance's compare-and-set refused it.
#[allow(clippy::too_many_lines)]
async fn purge_try(ctx: &Context, source: &TableSource, opts: &PurgeOptions, moved: &mut bool) -> Result<Outcome> {
    let policy = crate::govern::policy::load(&opts.policy)?;
    let trust = TrustStore::load_dir(&opts.trust)?;
    // Without evidenceSigners the drill keys are whatever the caller's trust folder gives the drill role: nothing
    // binds them to the table. Said on every purge, so that the operator sees it (and `--json` lists it).
    if policy.evidence_signers().is_none() {
        crate::report::output::warn(format!(
            "the policy {} names no evidenceSigners, so any key with the drill role of --trust {} counts as drill \
             evidence for this table: list the drill keys' ids in the policy's evidenceSigners to bind them to it",
            policy.source_name(),
            opts.trust.display()
        ));
    }
    // The key this purge signs with: read first (a key that cannot be used stops the purge before anything is
    // judged), and never a signer of the evidence it accepts.
    let deleter = crate::evidence::keys::load_signing_key(&opts.key)?;
    // With a roles file, only a key with the deleter role signs what a purge writes (receipts, archive, summary,
    // retirement records): others' signatures would not verify for auditors, so the purge would end in evidence
    // nobody accepts.
    trust.require_role(
        &opts.key,
        &deleter,
        crate::evidence::keys::Role::Deleter,
        "receipts, inventory archives, purge summaries or retirement records",
    )?;
    // Evidence that must be locked goes only where it can be (the receipts location and, for the retirement
    // records, every bundle's folder): checked before anything is accepted or deleted.
    if let Some(r) = policy.evidence_retention() {
        crate::ops::evidence_lock::preflight(&ctx.storage, &location::canonical_uri(&opts.receipts)?, Some(r)).await?;
        let rec = crate::ops::plan::registry(ctx)
            .await?
            .candidate(&opts.candidate_id)
            .await?;
        for (uri, _, _) in bundles_of(&rec) {
            crate::ops::evidence_lock::preflight(&ctx.storage, &uri, Some(r)).await?;
        }
    }
    let reg = crate::ops::plan::registry(ctx).await?;
    let now = ctx.now();
    // When the record was written, read before it: a later read that differs means it may have changed since.
    let mut seen = reg.candidate_version(&opts.candidate_id).await?;
    let mut rec = reg.candidate(&opts.candidate_id).await?;
    let refused_with = |status: &str, reasons: Vec<String>, gates: Vec<crate::ops::gates::Gate>| {
        let mut human = format!("{status}: {} is not deleted\n", opts.candidate_id);
        for r in &reasons {
            human.push_str(&format!("  - {r}\n"));
        }
        Outcome::new(
            Verdict::Findings,
            &PurgeReport {
                status: status.into(),
                candidate_id: opts.candidate_id.clone(),
                reasons,
                objects: BTreeMap::new(),
                summary: None,
                gates,
                requests: None,
                registry_transactions: None,
            },
            human,
        )
    };
    let refused = |status: &str, reasons: Vec<String>| refused_with(status, reasons, vec![]);
    let resuming = matches!(rec.state, State::DeleteApproved | State::Deleted | State::DeleteUnknown);
    if rec.state == State::Verified {
        return refused("REFUSED", vec!["the candidate is already purged and VERIFIED".into()]);
    }
    // Only the build the policy pins (or any build, when it says `any` explicitly) may purge, also when
    // resuming a purge another build started; a policy that pins nothing refuses (#23 point 5).
    let digest = crate::ops::binding::digest_binding(ctx, &policy)?;
    if !digest.allows_purge() {
        return refused("REFUSED", vec![digest.message().unwrap_or_default()]);
    }
    // Only the policy bound to the table at `rollout set` governs its deletes, also when resuming: its fields
    // (evidenceMaxAge, critical, minQuarantinePeriod, …) decide what is accepted, and `--policy` is the caller's.
    // Judged once the policy's own bindings (table UUID, formatVersion, catalog) held: a policy for another table
    // cannot decide anything (exit 2) before it is refused here (exit 1).
    let bound_policy = async || -> Result<Option<String>> {
        Ok(crate::ops::binding::policy_binding(&reg, &rec.table_uuid, &policy)
            .await?
            .refusal())
    };
    // The drill report this run deletes on: the one its acceptance judged, or on a resume the one judged again
    // before any further delete. Named in the signed inventory archive (the accepting run's) and in the output.
    let mut run_evidence: Option<RunEvidence> = None;
    // On a resume, the evidence the signed inventory archive says the purge was accepted on.
    let mut archived_evidence: Option<RunEvidence> = None;
    if resuming {
        // A resumed purge is held to the policy's bindings too (table UUID, formatVersion, catalog).
        let table = crate::ops::plan::bound_table(ctx, source, &policy).await?;
        if table.metadata().uuid().to_string() != rec.table_uuid {
            return Err(Error::invalid(
                &opts.candidate_id,
                "the candidate belongs to another table",
            ));
        }
        if let Some(why) = bound_policy().await? {
            return refused("REFUSED", vec![why]);
        }
        // What the registry holds now is not trusted as it stands: every object it would delete must be in the
        // signed inventory archive the accepting run wrote before its first delete; without one, the acceptance's
        // checks run again.
        let resume = resume_problems(ctx, &reg, &rec, opts, &table, &policy, &trust, now).await?;
        if !resume.problems.is_empty() {
            return refused("REFUSED", resume.problems);
        }
        archived_evidence.clone_from(&resume.accepted);
        // Nothing the acceptance judged is taken as still true when more deletes are to go out: days may have
        // passed since (DESIGN "A resume judges its evidence and the gates again").
        if !resume.archived || approved_left(&reg, &opts.candidate_id).await? {
            let (evidence, reasons, gates) = resume_checks(
                ctx,
                &reg,
                &rec,
                opts,
                &table,
                &policy,
                &trust,
                deleter.keyid(),
                resume.accepted.as_ref(),
            )
            .await?;
            if !reasons.is_empty() {
                let mut reasons = reasons;
                reasons.push(format!(
                    "nothing more of {} is deleted: it stays {} with its receipts; run a drill of its bundles and \
                     resume with `purge --evidence <fresh report>` once the reasons above are gone",
                    opts.candidate_id, rec.state
                ));
                return refused_with("REFUSED", reasons, gates);
            }
            run_evidence = evidence;
        }
    }
    if !resuming {
        let table = crate::ops::plan::bound_table(ctx, source, &policy).await?;
        if table.metadata().uuid().to_string() != rec.table_uuid {
            return Err(Error::invalid(
                &opts.candidate_id,
                "the candidate belongs to another table",
            ));
        }
        if let Some(why) = bound_policy().await? {
            return refused("REFUSED", vec![why]);
        }
        let mut reasons = Vec::new();
        // The stage itself (report-only refuses) is checked inside the acceptance transaction; `test` also needs
        // the policy to still declare the table unregulated.
        let stage = reg.rollout_stage(&rec.table_uuid).await?;
        if stage.stage == crate::registry::RolloutStage::Test && policy.regulated_data() != Some(false) {
            reasons.push(format!(
                "the table is in rollout stage test, but the policy {} does not declare it unregulated (regulatedData: false)",
                policy.source_name()
            ));
        }
        if let Some(min) = policy.min_quarantine_period() {
            let since = rec
                .quarantine
                .as_ref()
                .and_then(|q| q["quarantined_at"].as_str())
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map_or(rec.updated_at, |t| t.with_timezone(&Utc));
            if now < since + min {
                reasons.push(format!(
                    "the policy's minQuarantinePeriod ({}) has not passed: quarantined at {}, no purge before {}",
                    crate::clock::format_duration(min),
                    since.to_rfc3339(),
                    (since + min).to_rfc3339()
                ));
            }
        }
        // The deletion rights in force come from the table's latest governance decision: one signed by this purge's
        // own key, or (with a roles file) by a key without the governance role, is a deleter granting itself
        // rights — whatever the trust folder of `decision apply` said when it was applied.
        if let Some(d) = reg.decisions(&rec.table_uuid).await?.pop()
            && d.decision["deletion_rights"].as_array().is_some_and(|a| !a.is_empty())
        {
            let signer = if d.keyid == deleter.keyid() {
                Some("this purge's own key (--key)".to_owned())
            } else if trust.has_roles()
                && !trust
                    .roles_of(&d.keyid)
                    .contains(&crate::evidence::keys::Role::Governance)
            {
                Some(format!(
                    "key {}, which the trust folder's roles.toml does not give the governance role",
                    d.keyid
                ))
            } else {
                None
            };
            if let Some(signer) = signer {
                reasons.push(format!(
                    "the table's deletion rights in force come from governance decision v{} (issuer {}), signed by \
                     {signer}: a deleter must not grant its own deletion rights; apply a decision signed by a \
                     governance key",
                    d.version, d.issuer
                ));
            }
        }
        let tag_prefix = format!("{QUARANTINE_TAG_PREFIX}{}", opts.candidate_id);
        // The table as it is now, the candidate's own quarantine tags aside: they protect it from other plans
        // and from engines, never from itself.
        // The stamp is read before the registry's leases and holds are gathered: one that lands in between moves
        // the stamp's counters past what the acceptance compares (the other order let a lease landing there into
        // the stamp but not into what the rebase and the closure check judged).
        let current = crate::ops::plan::world_stamp(&table, &policy, &reg, Some(&tag_prefix)).await?;
        let input = crate::ops::plan::gather(ctx, &table, &policy, &reg, now, Some(&tag_prefix)).await?;
        ctx.storage.failpoint_delay(DelayPoint::PurgePlanRead).await;
        // The gates hold the deleter (DESIGN §7): evaluated for this table before acceptance; a failing gate
        // refuses, naming itself and its figure.
        let reports_uri = match (&opts.reports, &opts.evidence) {
            (Some(r), _) => Some(location::canonical_uri(r)?),
            (None, Some(ev)) => reports_folder_of(&ctx.storage, &location::canonical_uri(ev)?).await?,
            (None, None) => None,
        };
        let gates = match &reports_uri {
            Some(r) => {
                crate::ops::gates::deleter_gates(
                    &ctx.storage,
                    &reg,
                    &input,
                    table.location(),
                    &policy,
                    &crate::ops::gates::ReportSource {
                        reports_uri: r.clone(),
                        trust: &trust,
                        since: None,
                    },
                    now,
                )
                .await?
            }
            None => {
                reasons.push(
                    "the gates cannot be evaluated: no reports folder (--reports DIR), and no evidence lying in its \
                     plan's folder (<reports>/<plan>/) to find it from"
                        .into(),
                );
                Vec::new()
            }
        };
        for g in gates.iter().filter(|g| !g.passed()) {
            reasons.push(format!("gate {} {}: {}", g.name, g.status, g.detail));
        }
        // The evidence: as given, or the covering weekly report the gate found.
        let evidence = opts.evidence.clone().or_else(|| {
            gates
                .iter()
                .find(|g| g.name == "weekly_restores")
                .and_then(|g| g.figures["covering_report"].as_str().map(str::to_owned))
        });
        // What the acceptance runs on, recorded in the signed inventory archive for a resume to judge again, and
        // its predicate, whose age is judged again right before the acceptance transaction.
        let mut accepted_on: Option<(RunEvidence, crate::ops::drill::DrillPredicate)> = None;
        match &evidence {
            None => reasons.push("no evidence given (--evidence REPORT), and no covering weekly report found".into()),
            Some(ev) => {
                let uri = location::canonical_uri(ev)?;
                let max = ctx.storage.options().max_metadata_bytes;
                let read = match ctx.storage.get_bounded(&uri, max, "the evidence").await {
                    Err(Error::NotFound { .. }) => None,
                    read => Some(read?),
                };
                match read {
                    None => reasons.push(format!("evidence {uri} does not exist")),
                    Some(f) => {
                        let mut problems = check_evidence(
                            &rec,
                            location::file_name(&uri),
                            &f.bytes,
                            &trust,
                            deleter.keyid(),
                            &policy,
                            now,
                        );
                        problems.extend(evidence_unlocked(&ctx.storage, &uri, &f.bytes, &policy).await?);
                        if problems.is_empty() {
                            // A newer failure of any chain outlives this PASS; the bundles must still be whole.
                            let bundles = bundles_of(&rec);
                            let mut none = Vec::new();
                            if let Some((_, pred)) =
                                crate::ops::audit::check_report(location::file_name(&uri), &f.bytes, &trust, &mut none)
                                && !crate::safety::weakened(crate::safety::Check::NewerFailure)
                            {
                                problems.extend(
                                    newer_failures(&ctx.storage, &reg, &uri, &f.bytes, &pred, &bundles, &trust).await?,
                                );
                            }
                            let (broken, verified) =
                                bundles_intact(&ctx.storage, &bundles, &rec.objects, &trust).await?;
                            problems.extend(broken);
                            if problems.is_empty() {
                                problems.extend(inventory_covered(&rec, &verified)?);
                            }
                        }
                        if problems.is_empty() {
                            let mut none = Vec::new();
                            accepted_on =
                                crate::ops::audit::check_report(location::file_name(&uri), &f.bytes, &trust, &mut none)
                                    .map(|(_, pred)| {
                                        (
                                            RunEvidence {
                                                uri: uri.clone(),
                                                sha256: crate::evidence::sha256_hex(&f.bytes),
                                            },
                                            pred,
                                        )
                                    });
                        }
                        if problems.is_empty() && rec.state == State::Quarantined && !opts.dry_run {
                            let moved = reg
                                .candidate_move(
                                    &opts.candidate_id,
                                    State::RestoreVerified,
                                    "drill evidence covers every bundle root",
                                    None,
                                    None,
                                    now,
                                )
                                .await;
                            if let Err(e) = moved {
                                // Another process moved the candidate meanwhile (a concurrent purge): refuse.
                                let state = reg.candidate_state(&opts.candidate_id).await?;
                                if state == State::Quarantined {
                                    return Err(e.into());
                                }
                                return refused(
                                    "REFUSED",
                                    vec![format!(
                                        "the candidate became {state} while this purge checked it (another purge of it ran)"
                                    )],
                                );
                            }
                            // Only its state changed (and the record's time with it).
                            rec.state = State::RestoreVerified;
                            seen = reg.candidate_version(&opts.candidate_id).await?;
                        }
                        reasons.extend(problems);
                    }
                }
            }
        }
        // Back to recomputation: when the table, its refs, its leases or its holds changed since quarantine,
        // the candidate is re-judged at the current generation instead of refused (DESIGN "Rebase").
        let orphans = is_orphans(&rec);
        // A candidate judged with deletion rights whose snapshots are out of the table (bundle mode) cannot be
        // re-planned once the rights change: the planner no longer sees those snapshots, so the rebase would keep
        // them whatever `minSnapshotAge` says. It is refused, and its stamp stays as it is, until the rights are
        // back or an operator releases it (`quarantine release`; the bundles are the way back).
        if !orphans && !rec.stamp.deletion_rights.is_empty() && rec.stamp.deletion_rights != current.deletion_rights {
            let gone: Vec<i64> = snapshot_ids_of(&rec)
                .into_iter()
                .filter(|id| table.metadata().snapshot_by_id(*id).is_none())
                .collect();
            if !gone.is_empty() {
                let version = reg.rights_in_force(&rec.table_uuid).await?.version;
                return refused(
                    "REFUSED",
                    vec![format!(
                        "the deletion rights in force changed since the candidate was judged (governance decision {} \
                         now), and its snapshot(s) {gone:?} are out of the table (bundle mode), so they cannot be judged \
                         again against minSnapshotAge: nothing is deleted; `quarantine release` it and re-plan, or \
                         restore the rights",
                        version.map_or_else(|| "(none)".to_owned(), |v| format!("v{v}"))
                    )],
                );
            }
        }
        let mut rebased = false;
        if orphans && matches!(rec.state, State::Quarantined | State::RestoreVerified) {
            match orphan_rebase(ctx, &reg, &rec, &input, &current, opts.dry_run).await? {
                Rebased::Onto => rebased = true,
                Rebased::Refused(status, reasons) => return refused(&status, reasons),
                Rebased::DryRun(preview) => {
                    let standing = reg.acceptance_standing(&opts.candidate_id, policy.max_unreconciled_unknowns(), now);
                    reasons.extend(standing.await?);
                    return Ok(refused_after_rebase(preview, reasons));
                }
            }
        } else if stamp_changed(&rec.stamp, &current)
            && matches!(rec.state, State::Quarantined | State::RestoreVerified)
        {
            match rebase(ctx, source, &reg, &table, &rec, &input, &current, opts.dry_run).await? {
                Rebased::Onto => rebased = true,
                Rebased::Refused(status, reasons) => return refused(&status, reasons),
                Rebased::DryRun(preview) => {
                    let standing = reg.acceptance_standing(&opts.candidate_id, policy.max_unreconciled_unknowns(), now);
                    reasons.extend(standing.await?);
                    return Ok(refused_after_rebase(preview, reasons));
                }
            }
        }
        // Read again when a rebase (or anything else) wrote it since; one record held at a time (#24: a million
        // objects' is ~100 MB, and the table's plan input is held here too).
        if rebased || reg.candidate_version(&opts.candidate_id).await? != seen {
            drop(rec);
            rec = reg.candidate(&opts.candidate_id).await?;
        }
        // Defense in depth: the inventory against the non-deletable set of the table as it is now (its own
        // quarantine tags aside), by code that shares nothing with the planner.
        if !crate::safety::weakened(crate::safety::Check::ClosureGate) {
            // Cannot decide when a snapshot outside the candidate could not be read: what it reaches is unknown.
            let ids = snapshot_ids_of(&rec);
            let unreadable = unreadable_outside(&input, &ids);
            if !unreadable.is_empty() {
                return Err(Error::corrupt(
                    table.metadata_uri(),
                    format!(
                        "cannot decide: the layers of {} snapshot(s) outside the candidate could not be read, so \
                         nothing can be shown unreachable: {}",
                        unreadable.len(),
                        unreadable.join("; ")
                    ),
                ));
            }
            // Cannot decide either while a protection names a snapshot that left the table (an orphan candidate:
            // its leftover files look unreferenced) or a protected ref is missing (a snapshot candidate: the
            // snapshot it protected is unknown).
            let undecided = if orphans {
                crate::govern::closure::protections_of_missing_snapshots(&input)
            } else {
                crate::govern::closure::missing_protected_refs(&input)
            };
            if !undecided.is_empty() {
                return Err(Error::corrupt(
                    table.metadata_uri(),
                    format!(
                        "cannot decide: {}; nothing of candidate {} is deleted",
                        undecided.join("; "),
                        opts.candidate_id
                    ),
                ));
            }
            let conflicts = crate::govern::closure::nondeletable_conflicts(&input, &ids, &rec.objects);
            if !conflicts.is_empty() {
                reasons.push(format!("independent closure check: {}", conflicts.join("; ")));
            }
        }
        // `drill faults` injects its races here (a hold landing just before the compare-and-set).
        ctx.hooks.before_accept().await?;
        // The evidence's age is judged when the acceptance is made, not when this try began: reading and judging a
        // large table (above) can take long enough for fresh evidence to go stale.
        let accept_now = ctx.now();
        if let Some((_, pred)) = &accepted_on {
            reasons.extend(evidence_age(pred, &policy, accept_now));
        }
        match reg
            .candidate_accept(
                &opts.candidate_id,
                &current,
                table.location(),
                policy.max_unreconciled_unknowns(),
                reasons,
                opts.dry_run,
                accept_now,
            )
            .await?
        {
            refusal @ (Acceptance::Refused(_) | Acceptance::Moved(_)) => {
                let mut reasons = refusal.reasons().to_vec();
                let gates = gates.clone();
                // A ref that now points at one of the candidate's snapshots protects it for good.
                let ids = snapshot_ids_of(&rec);
                let covering: Vec<String> = table
                    .refs()
                    .iter()
                    .filter(|(name, r)| {
                        !crate::ops::plan::is_quarantine_tag(name, &tag_prefix) && ids.contains(&r.snapshot_id)
                    })
                    .map(|(name, r)| format!("ref {name} now points at snapshot {}", r.snapshot_id))
                    .collect();
                if !covering.is_empty() && !opts.dry_run && rec.state.can_move_to(State::Protected) {
                    reg.candidate_transition(
                        &opts.candidate_id,
                        State::Protected,
                        &covering.join("; "),
                        None,
                        None,
                        now,
                    )
                    .await?;
                    reasons.push(format!("the candidate is now PROTECTED: {}", covering.join("; ")));
                }
                *moved = covering.is_empty() && matches!(refusal, Acceptance::Moved(_));
                return refused_with("REFUSED", reasons, gates);
            }
            Acceptance::Approved if opts.dry_run => {
                let objects = &rec.objects;
                let mut human = if is_orphans(&rec) {
                    format!(
                        "DRY RUN: every check passed; a purge would delete these {} held orphans for good (the version \
                         behind each delete marker, or each quarantine copy):\n",
                        objects.len()
                    )
                } else {
                    format!(
                        "DRY RUN: every check passed; a purge would delete these {} objects:\n",
                        objects.len()
                    )
                };
                for o in objects {
                    human.push_str(&format!("  {} ({:?}, {} bytes)\n", o.path, o.layer, o.size));
                }
                for g in &gates {
                    human.push_str(&format!("gate {:<24} {}  {}\n", g.name, g.status, g.detail));
                }
                let mut by = BTreeMap::new();
                by.insert(
                    "would_delete".to_owned(),
                    objects.iter().map(|o| o.path.clone()).collect(),
                );
                return Outcome::new(
                    Verdict::Ok,
                    &PurgeReport {
                        status: "DRY_RUN".into(),
                        candidate_id: opts.candidate_id.clone(),
                        reasons: vec![],
                        objects: by,
                        summary: None,
                        gates: gates.clone(),
                        requests: None,
                        registry_transactions: None,
                    },
                    human,
                );
            }
            Acceptance::Approved => {}
        }
        run_evidence = accepted_on.map(|(e, _)| e);
    } else if opts.dry_run {
        return refused(
            "DRY_RUN",
            vec![format!(
                "the candidate is {} (a purge in progress); `purge` without --dry-run resumes it",
                rec.state
            )],
        );
    }
    // The record read for the checks above is not needed by the run, which reads its own (#24: a
    // million-object record is several hundred MB).
    drop(rec);
    let key = crate::evidence::keys::load_signing_key(&opts.key)?;
    // One run at a time per candidate: a second purge (or a resume while the first still runs) is refused.
    let run = match crate::ops::binding::claim_run(&reg, &opts.candidate_id, ctx.now(), "purge").await? {
        Ok(run) => run,
        Err(why) => return refused("REFUSED", vec![why]),
    };
    // Everything the run does under its claim renews it (`with_heartbeat`): reading bundles, the catalog commit
    // and a large table can take longer than the silence after which a claim may be taken over, and the batches
    // (which renew it too) only begin after them.
    let mut conditions = None;
    let claimed = async {
        // Claimed now; another run may have finished the candidate between our checks and our claim.
        let state = reg.candidate_state(&opts.candidate_id).await?;
        if !matches!(state, State::DeleteApproved | State::Deleted | State::DeleteUnknown) {
            return Ok(Err(state));
        }
        // Every report a purge of the candidate accepted goes into its registry record (`accepted_evidence`), which
        // the signed purge summary names: the acceptance's, and a resume's newer one (before, only the run's output
        // named it). The archive's is recorded first for a purge accepted before the record existed.
        let record_evidence = async |e: &RunEvidence, on: &str| -> Result<bool> {
            let entry = serde_json::json!({
                "accepted_at": ctx.now().to_rfc3339(),
                "on": on,
                "run_id": run.run_id,
                "sha256": e.sha256,
                "uri": e.uri,
            });
            Ok(reg
                .candidate_evidence_accepted(&opts.candidate_id, &entry, ctx.now())
                .await?)
        };
        if let Some(a) = &archived_evidence {
            record_evidence(a, "acceptance").await?;
        }
        if let Some(e) = &run_evidence {
            record_evidence(e, if resuming { "resume" } else { "acceptance" }).await?;
        }
        execute(
            ctx,
            source,
            &reg,
            &policy,
            &opts.candidate_id,
            &key,
            &trust,
            &opts.receipts,
            &run.run_id,
            run_evidence.as_ref(),
            &mut conditions,
        )
        .await
        .map(Ok)
    };
    let out = crate::ops::binding::with_heartbeat(ctx, &reg, &opts.candidate_id, &run.run_id, Box::pin(claimed)).await;
    let released = reg.purge_release(&opts.candidate_id, &run.run_id, ctx.now()).await;
    let out = out?;
    released?;
    let mut out = match out {
        Ok(out) => out,
        Err(state) => {
            return refused(
                "REFUSED",
                vec![format!("the candidate is {state}: another purge of it ran meanwhile")],
            );
        }
    };
    if let Some(e) = &run_evidence {
        // The drill report this run deleted on (a resume's may be newer than the one its acceptance judged).
        out.json["evidence"] = serde_json::json!(e);
    }
    if let Some(c) = conditions {
        // What the S3 provider did with a delete's ETag condition (asked once per run).
        out.json["delete_conditions"] = c;
    }
    Ok(out)
}

/// Where a candidate's signed inventory archive is: `<receipts>/<candidate>/inventory.dsse.json`.
fn archive_uri(receipts: &str, candidate_id: &str) -> Result<String> {
    Ok(location::join(
        &location::join(&location::canonical_uri(receipts)?, candidate_id),
        "inventory.dsse.json",
    ))
}

/// What [`resume_problems`] found.
struct ResumeCheck {
    /// Why the purge may not resume.
    problems: Vec<String>,
    /// Whether the signed inventory archive exists.
    archived: bool,
    /// The evidence the archive says the purge was accepted on (`None` without an archive, or in one written
    /// before archives named it).
    accepted: Option<RunEvidence>,
}

/// Why a purge in progress (`DELETE_APPROVED`, `DELETED`, `DELETE_UNKNOWN`) may not resume: the run that accepted
/// it wrote the signed inventory archive before its catalog commit and its first delete, so every object the
/// registry now names must be in it (a rebase only takes objects out). A registry row edited after the acceptance
/// (an object added to the candidate, a state set to `DELETE_APPROVED` by hand) is refused here. Without an archive:
/// a candidate with deletes behind it is refused (its archive is elsewhere: the same `--receipts` must be given);
/// a `DELETE_APPROVED` one (a run killed between its acceptance and its archive) is held to the acceptance's checks
/// again — the evidence given with `--evidence` (judged by [`resume_checks`], which every resume that still has
/// deletes to send runs), every bundle whole and covering the inventory, the independent closure check on the
/// table as it is now.
#[allow(clippy::too_many_arguments)]
async fn resume_problems(
    ctx: &Context,
    reg: &Registry,
    rec: &CandidateRecord,
    opts: &PurgeOptions,
    table: &crate::table::Table,
    policy: &Policy,
    trust: &TrustStore,
    now: chrono::DateTime<Utc>,
) -> Result<ResumeCheck> {
    let uri = archive_uri(&opts.receipts, &opts.candidate_id)?;
    let no_archive = |problems: Vec<String>| ResumeCheck {
        problems,
        archived: false,
        accepted: None,
    };
    if let Some(f) = ctx.storage.get_opt(&uri).await? {
        // Signed by the purge's own key (or any trusted key with the deleter role: a resume after the deleter's key
        // was rotated).
        let key = crate::evidence::keys::load_signing_key(&opts.key)?;
        let keys = archive_keys(&uri, Some(trust), &opts.key, &key)?;
        let (problems, accepted) = archived_problems(rec, &uri, f.bytes, &keys)?;
        return Ok(ResumeCheck {
            problems,
            archived: true,
            accepted,
        });
    }
    if rec.state != State::DeleteApproved {
        return Ok(no_archive(vec![format!(
            "the candidate is {} but its signed inventory archive {uri} does not exist: the run that deleted from it \
             wrote one first (give the same --receipts as that run)",
            rec.state
        )]));
    }
    if opts.evidence.is_none() {
        return Ok(no_archive(vec![format!(
            "the candidate is DELETE_APPROVED but its signed inventory archive {uri} does not exist (a run stopped \
             between its acceptance and its first write, or the registry row was changed): the acceptance's checks \
             run again, and they need the evidence (--evidence REPORT)"
        )]));
    }
    let bundles = bundles_of(rec);
    let (mut problems, verified) = bundles_intact(&ctx.storage, &bundles, &rec.objects, trust).await?;
    if problems.is_empty() {
        problems.extend(inventory_covered(rec, &verified)?);
    }
    if problems.is_empty() && !is_orphans(rec) {
        let tag_prefix = format!("{QUARANTINE_TAG_PREFIX}{}", rec.candidate_id);
        let input = crate::ops::plan::gather(ctx, table, policy, reg, now, Some(&tag_prefix)).await?;
        let ids = snapshot_ids_of(rec);
        let unreadable = unreadable_outside(&input, &ids);
        if !unreadable.is_empty() {
            return Err(Error::corrupt(
                table.metadata_uri(),
                format!(
                    "cannot decide: the layers of {} snapshot(s) outside the candidate could not be read: {}",
                    unreadable.len(),
                    unreadable.join("; ")
                ),
            ));
        }
        let conflicts = crate::govern::closure::nondeletable_conflicts(&input, &ids, &rec.objects);
        if !conflicts.is_empty() {
            problems.push(format!("independent closure check: {}", conflicts.join("; ")));
        }
    }
    Ok(no_archive(
        problems
            .into_iter()
            .map(|p| format!("resuming without a signed inventory archive ({uri}): {p}"))
            .collect(),
    ))
}

/// Whether any object of the candidate is still `DELETE_APPROVED`: a run would send deletes for it.
async fn approved_left(reg: &Registry, candidate_id: &str) -> Result<bool> {
    let mut any = false;
    reg.for_each_object_state(candidate_id, |o| any |= o.state == State::DeleteApproved)
        .await?;
    Ok(any)
}

/// What a resumed purge that still has deletes to send judges again first, at the time of the resume, as a new
/// acceptance would (DESIGN "A resume judges its evidence and the gates again"): the evidence (the one given with
/// `--evidence`, or else the one the signed inventory archive says the purge was accepted on, byte for byte),
/// verified under a drill key of `trust` and never signed by the purge's own key, covering every bundle root of
/// the candidate, within `evidenceMaxAge` now, under Object Lock where the policy asks, with no newer failed drill
/// of those roots; the gates for the table ([`crate::ops::gates::deleter_gates`]); and the policy's
/// `maxUnreconciledUnknowns` over the table's `DELETE_UNKNOWN` objects. Returns the evidence it judged, every
/// reason to refuse, and the gates.
///
/// # Errors
/// Storage and registry errors (a missing or broken report is a reason).
#[allow(clippy::too_many_arguments)]
async fn resume_checks(
    ctx: &Context,
    reg: &Registry,
    rec: &CandidateRecord,
    opts: &PurgeOptions,
    table: &crate::table::Table,
    policy: &Policy,
    trust: &TrustStore,
    deleter_keyid: &str,
    accepted: Option<&RunEvidence>,
) -> Result<(Option<RunEvidence>, Vec<String>, Vec<crate::ops::gates::Gate>)> {
    // The time of the resume: not the time this command began reading.
    let now = ctx.now();
    let mut reasons = Vec::new();
    let (uri, recorded) = match (&opts.evidence, accepted) {
        (Some(ev), _) => (location::canonical_uri(ev)?, None),
        (None, Some(a)) => (a.uri.clone(), Some(a.sha256.as_str())),
        (None, None) => {
            return Ok((
                None,
                vec![format!(
                    "the purge of {} is resumed without evidence (--evidence REPORT), and its signed inventory \
                     archive names none to judge again (written by a lakedrill before archives named it)",
                    rec.candidate_id
                )],
                Vec::new(),
            ));
        }
    };
    let mut judged = None;
    // Within `max_metadata_bytes`, as the acceptance reads it: a file of any size can be named as evidence.
    let max = ctx.storage.options().max_metadata_bytes;
    match ctx.storage.get_opt_bounded(&uri, max, "the evidence").await? {
        None => reasons.push(format!("evidence {uri} does not exist")),
        Some(f) => {
            let sha256 = crate::evidence::sha256_hex(&f.bytes);
            match recorded {
                Some(want) if want != sha256 => reasons.push(format!(
                    "evidence {uri}, which the purge was accepted on, is no longer the report it was: its signed \
                     inventory archive records SHA-256 {want}, the file now has {sha256}"
                )),
                _ => {
                    let name = location::file_name(&uri);
                    let mut problems = check_evidence(rec, name, &f.bytes, trust, deleter_keyid, policy, now);
                    problems.extend(evidence_unlocked(&ctx.storage, &uri, &f.bytes, policy).await?);
                    if problems.is_empty() {
                        let mut none = Vec::new();
                        if let Some((_, pred)) = crate::ops::audit::check_report(name, &f.bytes, trust, &mut none)
                            && !crate::safety::weakened(crate::safety::Check::NewerFailure)
                        {
                            let bundles = bundles_of(rec);
                            problems.extend(
                                newer_failures(&ctx.storage, reg, &uri, &f.bytes, &pred, &bundles, trust).await?,
                            );
                        }
                    }
                    reasons.extend(problems.into_iter().map(|p| format!("resuming on {uri}: {p}")));
                    judged = Some(RunEvidence {
                        uri: uri.clone(),
                        sha256,
                    });
                }
            }
        }
    }
    // The gates a new acceptance passes, for the table as it is now.
    let reports_uri = match &opts.reports {
        Some(r) => Some(location::canonical_uri(r)?),
        None => reports_folder_of(&ctx.storage, &uri).await?,
    };
    let gates = match &reports_uri {
        Some(r) => {
            let tag_prefix = format!("{QUARANTINE_TAG_PREFIX}{}", rec.candidate_id);
            let input = crate::ops::plan::gather(ctx, table, policy, reg, now, Some(&tag_prefix)).await?;
            crate::ops::gates::deleter_gates(
                &ctx.storage,
                reg,
                &input,
                table.location(),
                policy,
                &crate::ops::gates::ReportSource {
                    reports_uri: r.clone(),
                    trust,
                    since: None,
                },
                now,
            )
            .await?
        }
        None => {
            reasons.push(format!(
                "the gates cannot be evaluated: no reports folder (--reports DIR), and the evidence {uri} does not lie \
                 in its plan's folder (<reports>/<plan>/) to find it from"
            ));
            Vec::new()
        }
    };
    for g in gates.iter().filter(|g| !g.passed()) {
        reasons.push(format!("gate {} {}: {}", g.name, g.status, g.detail));
    }
    let unknowns = reg.table_unknowns(&rec.table_uuid).await?;
    let max = policy.max_unreconciled_unknowns();
    if unknowns > i64::from(max) {
        reasons.push(format!(
            "gate unknowns_reconciled FAIL: {unknowns} DELETE_UNKNOWN objects of this table await reconciliation \
             (the policy's maxUnreconciledUnknowns is {max}): `reconcile` them first"
        ));
    }
    if !reasons.is_empty() {
        judged = None;
    }
    Ok((judged, reasons, gates))
}

/// The keys a candidate's signed inventory archive (at `uri`) verifies under: every key of `trust` with the
/// deleter role, and the key the run signs with (`key`, read from `key_path`: a run with the purge's own key needs
/// no trust store).
///
/// # Errors
/// Two keys of the trust store with one key id.
fn archive_keys(uri: &str, trust: Option<&TrustStore>, key_path: &Path, key: &SigningKey) -> Result<TrustStore> {
    let mut keys = trust
        .map(|t| t.for_role(crate::evidence::keys::Role::Deleter).keys().to_vec())
        .unwrap_or_default();
    if !keys.iter().any(|k| k.keyid() == key.keyid()) {
        keys.push(crate::evidence::keys::PublicKey::new(
            "the run's key",
            key_path,
            key.verifying_key(),
        ));
    }
    TrustStore::from_keys(keys).map_err(|e| Error::invalid(uri, e.to_string()))
}

/// [`resume_problems`] when the archive exists: its signature under `keys`, its subject naming the candidate, and
/// every object of the record in it with the same size. When the record's inventory root is the archived one, the
/// archive's inventory is not parsed (only skimmed for the evidence it names). Returns every reason to refuse and
/// the evidence the archive says the purge was accepted on (`None` in an archive written before archives named
/// it, or one that does not verify).
fn archived_problems(
    rec: &CandidateRecord,
    uri: &str,
    bytes: Bytes,
    keys: &TrustStore,
) -> Result<(Vec<String>, Option<RunEvidence>)> {
    let verified = match evidence::verify_payload(bytes, keys) {
        Ok(v) => v,
        Err(f) => {
            return Ok((
                vec![format!("the signed inventory archive {uri} does not verify: {f}")],
                None,
            ));
        }
    };
    let name = format!("lakedrill-candidate:{}", rec.candidate_id);
    let Some(subject) = verified.subjects().iter().find(|s| s.name == name) else {
        return Ok((
            vec![format!(
                "the signed inventory archive {uri} is not {}'s (no subject {name})",
                rec.candidate_id
            )],
            None,
        ));
    };
    if verified.predicate_type() != RECEIPTS_PREDICATE_TYPE {
        return Ok((
            vec![format!(
                "the signed inventory archive {uri} has predicate type {}, not {RECEIPTS_PREDICATE_TYPE}",
                verified.predicate_type()
            )],
            None,
        ));
    }
    #[derive(serde::Deserialize)]
    struct Named {
        #[serde(default)]
        evidence: Option<RunEvidence>,
    }
    let accepted = verified
        .parse_predicate::<Named>()
        .map_err(|e| Error::invalid(uri, format!("the signed inventory archive's evidence: {e}")))?
        .evidence;
    if subject.digest.get("blake3").map(String::as_str)
        == Some(crate::govern::closure::candidate_root(&rec.objects).as_str())
    {
        hold_row_to_archive(rec, uri, &verified)?;
        return Ok((Vec::new(), accepted));
    }
    #[derive(serde::Deserialize)]
    struct Archived {
        candidate: ArchivedCandidate,
    }
    #[derive(serde::Deserialize)]
    struct ArchivedCandidate {
        objects: Vec<ObjectRef>,
    }
    let archived: Archived = verified
        .parse_predicate()
        .map_err(|e| Error::invalid(uri, format!("the signed inventory archive's candidate: {e}")))?;
    let sizes = sizes_by_path(&archived.candidate.objects);
    let outside: Vec<String> = rec
        .objects
        .iter()
        .filter(|o| sizes.get(o.path.as_str()) != Some(&o.size))
        .map(|o| format!("{} ({} bytes)", o.path, o.size))
        .collect();
    if outside.is_empty() {
        hold_row_to_archive(rec, uri, &verified)?;
        return Ok((Vec::new(), accepted));
    }
    let shown: Vec<&String> = outside.iter().take(10).collect();
    Ok((
        vec![format!(
            "{} object(s) the registry names for this purge are not in its signed inventory archive {uri} (the \
             registry row was changed after the acceptance): {}{}",
            outside.len(),
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
            if outside.len() > shown.len() { ", …" } else { "" }
        )],
        accepted,
    ))
}

/// Each object's size by its path: what a signed inventory archive holds, for holding a registry row to it.
fn sizes_by_path(objects: &[ObjectRef]) -> std::collections::HashMap<&str, u64> {
    objects.iter().map(|o| (o.path.as_str(), o.size)).collect()
}

/// Holds the registry row of a purge in progress to its signed inventory archive (review R3-3): the row's
/// `snapshot_ids`, its inventory (the root its objects hash to, and the `inventory_root` it records) and its
/// quarantine's `bundles` must be what the archive signed — or, once a rebase was recorded after the acceptance
/// (the catalog commit found a newer generation), what the last such rebase left: its snapshots, all among the
/// archived ones, and its inventory root. The bundles never change after the quarantine. The row is what a resume
/// commits (its snapshots leave the table) and deletes (its objects, conditional on what its bundles sealed), so a
/// row edited after the acceptance (by hand or by a bug) could widen the catalog commit to a snapshot the table
/// keeps, leave one of the candidate's snapshots in the table over files about to be deleted, or swap the bundles
/// the acceptance was judged on. [`archived_problems`] has already required every object of the row to be in the
/// archive with its size when the roots differ, and this function requires it again when the row stands on a rebase
/// (`execute` reads the row again under its claim). Returns whether the row stands on a rebase recorded after the
/// acceptance: the rebase record is in the same registry as the row, so the catalog-commit step then judges the
/// table again (the independent closure check included) before it commits anything.
///
/// # Errors
/// Any difference: "cannot decide" (exit 2), naming the candidate, the field and both values; nothing is deleted.
/// An archive whose predicate does not parse.
fn hold_row_to_archive(rec: &CandidateRecord, uri: &str, verified: &crate::evidence::VerifiedPayload) -> Result<bool> {
    #[derive(serde::Deserialize)]
    struct Archived {
        candidate: ArchivedCandidate,
        #[serde(default)]
        quarantine: Option<serde_json::Value>,
    }
    #[derive(serde::Deserialize)]
    struct ArchivedCandidate {
        #[serde(default)]
        snapshot_ids: Vec<i64>,
        /// Only read when the row stands on a rebase: otherwise the row's root is held to the archived one.
        #[serde(default)]
        objects: Vec<ObjectRef>,
    }
    let archived: Archived = verified
        .parse_predicate()
        .map_err(|e| Error::invalid(uri, format!("the signed inventory archive's candidate: {e}")))?;
    let id = &rec.candidate_id;
    let name = format!("lakedrill-candidate:{id}");
    let archived_root = verified
        .subjects()
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.digest.get("blake3"))
        .cloned()
        .unwrap_or_default();
    let archive = format!("its signed inventory archive {uri}");
    let differs = |field: &str, row: &dyn std::fmt::Display, signed: &dyn std::fmt::Display, against: &str| {
        Error::invalid(
            id,
            format!(
                "cannot decide: the registry row of candidate {id} was changed after its acceptance: its {field} is \
                 {row} in the registry but {signed} in {against}; nothing is committed or deleted (put the row back, \
                 or release the candidate)"
            ),
        )
    };
    let bundles = |q: Option<&serde_json::Value>| {
        q.and_then(|q| q.get("bundles"))
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    };
    let (row_bundles, archived_bundles) = (bundles(rec.quarantine.as_ref()), bundles(archived.quarantine.as_ref()));
    if row_bundles != archived_bundles {
        return Err(differs("bundles", &row_bundles, &archived_bundles, &archive));
    }
    let root = crate::govern::closure::candidate_root(&rec.objects);
    let recorded = rec.candidate["inventory_root"].as_str().unwrap_or_default();
    if recorded != root {
        return Err(differs(
            "inventory_root",
            &recorded,
            &format_args!("its objects hash to {root}"),
            "the registry row itself",
        ));
    }
    let set = |ids: &[i64]| ids.iter().copied().collect::<std::collections::BTreeSet<i64>>();
    let show = |ids: &std::collections::BTreeSet<i64>| format!("{ids:?}");
    let row_ids = set(&snapshot_ids_of(rec));
    let archived_ids = set(&archived.candidate.snapshot_ids);
    let last = rec
        .quarantine
        .as_ref()
        .and_then(|q| q["rebases"].as_array())
        .and_then(|a| a.iter().rev().find(|r| r["after_acceptance"] == true));
    let Some(last) = last else {
        if row_ids != archived_ids {
            return Err(differs("snapshot_ids", &show(&row_ids), &show(&archived_ids), &archive));
        }
        if root != archived_root {
            return Err(differs("inventory root", &root, &archived_root, &archive));
        }
        return Ok(false);
    };
    let rebase = format!(
        "the last rebase recorded after its acceptance (at {})",
        last["at"].as_str().unwrap_or("an unknown time")
    );
    let rebased_ids: std::collections::BTreeSet<i64> = last["snapshot_ids"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
        .unwrap_or_default();
    if !rebased_ids.is_subset(&archived_ids) {
        return Err(differs(
            &format!("snapshot_ids after {rebase}"),
            &show(&rebased_ids),
            &show(&archived_ids),
            &format!("{archive} (a rebase only takes snapshots out)"),
        ));
    }
    if row_ids != rebased_ids {
        return Err(differs("snapshot_ids", &show(&row_ids), &show(&rebased_ids), &rebase));
    }
    // A rebase only takes objects out: every object of the row is one the archive signed, with its size. The rebase
    // record is in the same registry as the row, so the row's root matching it proves nothing on its own (review
    // M1: an object added to the row with its root and a rebase record recomputed reached the delete step).
    let sizes = sizes_by_path(&archived.candidate.objects);
    if let Some(o) = rec.objects.iter().find(|o| sizes.get(o.path.as_str()) != Some(&o.size)) {
        return Err(differs(
            &format!("objects after {rebase}"),
            &format_args!("{} ({} bytes)", o.path, o.size),
            &sizes
                .get(o.path.as_str())
                .map_or_else(|| "absent".to_owned(), |s| format!("{s} bytes")),
            &format!("{archive} (a rebase only takes objects out)"),
        ));
    }
    // A rebase recorded before rebase records carried their root: the objects were held to the archive above.
    if let Some(rebased_root) = last["inventory_root"].as_str()
        && rebased_root != root
    {
        return Err(differs("inventory root", &root, &rebased_root, &rebase));
    }
    Ok(true)
}

/// How often the purge's catalog commit is tried when writers keep winning the race.
const COMMIT_ATTEMPTS: usize = 5;

/// What [`rebase`] did.
enum Rebased {
    /// The candidate now stands on the current generation (the record is in its quarantine's `rebases`).
    Onto,
    /// It cannot go on (`REFUSED`, also when it became `PROTECTED`), with the reasons.
    Refused(String, Vec<String>),
    /// A dry run: what a rebase would release and what a purge would then delete.
    DryRun(Outcome),
}

/// Where a purge run of `rec` starts its batches' checks from: the candidate's world stamp.
fn baseline(rec: &CandidateRecord, location: &crate::model::location::TableLocation, run_id: &str) -> PurgeBaseline {
    PurgeBaseline::from_stamp(&rec.table_uuid, location, run_id, &rec.stamp)
}

/// The snapshots outside the candidate (`ids`) whose layers could not be read, each with its reason: while there is
/// one, nothing can be shown unreachable.
fn unreadable_outside(input: &crate::govern::closure::PlanInput, ids: &[i64]) -> Vec<String> {
    input
        .snapshots
        .iter()
        .filter(|s| s.objects.is_none() && !ids.contains(&s.snapshot_id))
        .map(|s| {
            format!(
                "snapshot {}: {}",
                s.snapshot_id,
                input
                    .unreadable
                    .get(&s.snapshot_id)
                    .map_or("no reason recorded", String::as_str)
            )
        })
        .collect()
}

/// The refusal when another purge rebased the candidate between this one's read and its rebase.
fn rebased_meanwhile() -> Rebased {
    Rebased::Refused(
        "REFUSED".into(),
        vec!["another purge rebased or accepted this candidate meanwhile; run purge again".into()],
    )
}

/// Whether the world moved since the candidate's stamp was recorded.
fn stamp_changed(recorded: &crate::registry::WorldStamp, current: &crate::registry::WorldStamp) -> bool {
    recorded != current
}

/// A dry run's account of a rebase: after `human`'s first line, every object a purge would delete and every one it
/// would keep (`kept_word` in the text, `kept_key` in the JSON), with the reason.
fn dry_run_rebase(
    rec: &CandidateRecord,
    r: &crate::govern::closure::Rebase,
    mut human: String,
    kept_key: &str,
    kept_word: &str,
) -> Result<Rebased> {
    for o in &r.objects {
        human.push_str(&format!("  {} ({:?}, {} bytes)\n", o.path, o.layer, o.size));
    }
    for (p, why) in &r.released_objects {
        human.push_str(&format!("  {kept_word}: {p} ({why})\n"));
    }
    let by = BTreeMap::from([
        (
            "would_delete".to_owned(),
            r.objects.iter().map(|o| o.path.clone()).collect(),
        ),
        (
            kept_key.to_owned(),
            r.released_objects.iter().map(|(p, _)| p.clone()).collect(),
        ),
    ]);
    Ok(Rebased::DryRun(Outcome::new(
        Verdict::Ok,
        &PurgeReport {
            status: "DRY_RUN".into(),
            candidate_id: rec.candidate_id.clone(),
            reasons: vec![],
            objects: by,
            summary: None,
            gates: vec![],
            requests: None,
            registry_transactions: None,
        },
        human,
    )?))
}

/// A dry run whose candidate the purge would first rebase: the rebase's preview as it is when nothing else
/// refuses, else `REFUSED` with every reason the purge would be refused for after the rebase (a report-only stage,
/// the gates, the evidence, a stopped deleter…), the preview's objects kept. A preview alone said `DRY_RUN`
/// (exit 0) on a table whose real purge would be refused.
fn refused_after_rebase(mut preview: Outcome, reasons: Vec<String>) -> Outcome {
    if reasons.is_empty() {
        return preview;
    }
    let mut human = format!(
        "REFUSED: {} is not deleted\n",
        preview.json["candidate_id"].as_str().unwrap_or("?")
    );
    for r in &reasons {
        human.push_str(&format!("  - {r}\n"));
    }
    human.push_str("and before that a purge would rebase it:\n");
    human.push_str(&preview.human);
    preview.json["status"] = "REFUSED".into();
    preview.json["reasons"] = reasons.into();
    preview.verdict = Verdict::Findings;
    preview.human = human;
    preview
}

/// Whether the candidate holds orphans (unreferenced files) rather than expired snapshots.
fn is_orphans(rec: &CandidateRecord) -> bool {
    rec.candidate["kind"].as_str() == Some("orphans")
}

/// The orphan candidate re-judged at the table's current generation before acceptance: every quarantined
/// orphan of the table that the table references again, or that an open writer's prefix or a hold now covers,
/// is put back where it was and leaves its candidate as `PROTECTED` ([`crate::ops::orphans::put_back_protected`]);
/// the rest of this candidate moves onto the current stamp. A dry run changes nothing and says what would happen.
async fn orphan_rebase(
    ctx: &Context,
    reg: &Registry,
    rec: &CandidateRecord,
    input: &crate::govern::closure::PlanInput,
    current: &crate::registry::WorldStamp,
    dry_run: bool,
) -> Result<Rebased> {
    let r = crate::govern::closure::orphan_rebase(input, &rec.objects);
    if !r.unreadable.is_empty() {
        return Err(Error::corrupt(
            &current.metadata_location,
            format!(
                "cannot decide: the layers of snapshot(s) {:?} could not be read, so no file of orphan candidate {} \
                 can be shown unreferenced",
                r.unreadable, rec.candidate_id
            ),
        ));
    }
    refuse_missing_protected(&current.metadata_location, &r, &rec.candidate_id, "")?;
    if dry_run {
        if r.unchanged() && !stamp_changed(&rec.stamp, current) {
            return Ok(Rebased::Onto);
        }
        let human = format!(
            "DRY RUN: a purge would put back {} orphan(s) and delete these {} held files:\n",
            r.released_objects.len(),
            r.objects.len()
        );
        return dry_run_rebase(rec, &r, human, "would_put_back", "put back");
    }
    let now = ctx.now();
    let crate::ops::orphans::PutBackLines {
        findings: found,
        standing,
    } = crate::ops::orphans::put_back_protected(ctx, reg, input, current, now, None).await?;
    for line in &standing {
        crate::report::output::warn(line);
    }
    let after = reg.candidate(&rec.candidate_id).await?;
    if after.state == State::Protected {
        let mut reasons = vec![format!("the candidate is now PROTECTED: {}", after.reason)];
        reasons.extend(found);
        return Ok(Rebased::Refused("REFUSED".into(), reasons));
    }
    // Its own files' put-back left to another run holding the claim (a plan putting them back): the candidate
    // may still list files that are back in the table; this purge does not go on over them.
    let own = format!("ORPHAN_PUT_BACK_DEFERRED: candidate {}:", rec.candidate_id);
    if found.iter().any(|f| f.starts_with(&own)) {
        let mut reasons = vec![format!(
            "another run is putting back files of {} (it holds the candidate's claim); purge again once it is done",
            rec.candidate_id
        )];
        reasons.extend(found);
        return Ok(Rebased::Refused("REFUSED".into(), reasons));
    }
    for f in &found {
        crate::report::output::warn(f);
    }
    if stamp_changed(&after.stamp, current) {
        let record = serde_json::json!({
            "at": now.to_rfc3339(), "from": after.stamp, "to": current, "released_snapshots": [],
            "released_objects": [], "snapshot_ids": [], "objects": after.objects.len(),
        });
        if !reg
            .candidate_rebase(
                &after.candidate_id,
                &after.stamp,
                current,
                &after.full_candidate(),
                &[],
                &record,
                None,
                now,
            )
            .await?
        {
            return Ok(rebased_meanwhile());
        }
    }
    Ok(Rebased::Onto)
}

/// Cannot decide on orphan candidate `candidate_id` while a protection names a snapshot missing from the
/// generation (`metadata`): that snapshot's leftover files look unreferenced ([`crate::govern::closure::Rebase::missing_protected`]).
///
/// # Errors
/// [`Error::Corrupt`] naming the metadata, each such protection and its snapshot.
fn refuse_missing_protected(
    metadata: &str,
    r: &crate::govern::closure::Rebase,
    candidate_id: &str,
    tail: &str,
) -> Result<()> {
    if r.missing_protected.is_empty() {
        return Ok(());
    }
    Err(Error::corrupt(
        metadata,
        format!(
            "cannot decide: {}, missing from this generation, so what it reaches is unknown and no file of orphan \
             candidate {candidate_id} can be shown unreferenced{tail}",
            r.missing_protected.join("; ")
        ),
    ))
}

/// The orphan candidate's final check after acceptance, at the generation of `table`: every held file that the
/// table references now, or that an open writer's prefix or a legal hold covers, is put back where it was
/// (verified) and leaves the candidate as `PROTECTED` while no object was deleted yet (the rest goes on, `rec`
/// follows); after a delete (a resumed purge) the run stops instead, naming them. `Some(reason)` stops the run.
async fn orphan_recheck(
    ctx: &Context,
    reg: &Registry,
    policy: &Policy,
    table: &crate::table::Table,
    rec: &mut CandidateRecord,
    tag_prefix: &str,
    run_id: &str,
) -> Result<Option<String>> {
    // The stamp first, then what is judged (as in `purge`): a change in between moves the stamp's counters.
    let current = crate::ops::plan::world_stamp(table, policy, reg, Some(tag_prefix)).await?;
    let input = crate::ops::plan::gather(ctx, table, policy, reg, ctx.now(), Some(tag_prefix)).await?;
    let r = crate::govern::closure::orphan_rebase(&input, &rec.objects);
    if !r.unreadable.is_empty() {
        return Err(Error::corrupt(
            table.metadata_uri(),
            format!(
                "cannot decide: the layers of snapshot(s) {:?} could not be read, so no file of orphan candidate {} \
                 can be shown unreferenced; nothing more was deleted",
                r.unreadable, rec.candidate_id
            ),
        ));
    }
    refuse_missing_protected(
        table.metadata_uri(),
        &r,
        &rec.candidate_id,
        "; nothing more was deleted",
    )?;
    if r.released_objects.is_empty() {
        return Ok(None);
    }
    let held = held_by_path(ctx, rec, None).await?.map(|(_, h)| h).unwrap_or_default();
    let files: Vec<crate::bundle::HeldFile> = r
        .released_objects
        .iter()
        .filter_map(|(p, _)| held.get(p).cloned())
        .collect();
    let back = crate::ops::orphans::put_back(&ctx.storage, &files).await?;
    let said: Vec<String> = r
        .released_objects
        .iter()
        .zip(&back)
        .map(|((p, why), b)| {
            format!(
                "ORPHAN_PUT_BACK: {p} ({why}): {}{}",
                b.action,
                if b.verified {
                    ", verified in place"
                } else {
                    ", NOT verified in place"
                }
            )
        })
        .collect();
    let nothing_done = nothing_done(reg, &rec.candidate_id).await?;
    if !nothing_done || r.objects.is_empty() {
        if r.objects.is_empty()
            && rec.state.can_move_to(State::Protected)
            && let Err(holder) = reg
                .candidate_move_claimed(&rec.candidate_id, run_id, State::Protected, &said.join("; "), ctx.now())
                .await?
        {
            return Err(taken_over(
                &rec.candidate_id,
                run_id,
                holder.as_ref(),
                "moving the candidate to PROTECTED",
            ));
        }
        return Ok(Some(format!(
            "the table changed during the purge and covers held orphans now; they were put back and nothing more was \
             deleted: {}",
            said.join("; ")
        )));
    }
    still_claimed(reg, &rec.candidate_id, run_id, "rebasing the candidate").await?;
    record_rebase(ctx, reg, rec, &current, &r, run_id, ctx.now()).await?;
    for line in &said {
        crate::report::output::warn(line);
    }
    *rec = reg.candidate(&rec.candidate_id).await?;
    Ok(None)
}

/// Where each file of an orphan candidate is held (from its bundles), by its path relative to the table
/// location, and the folder of its copies (copy hold). `None` for a snapshot candidate. With `trust` the
/// bundles are verified; without (reconcile, which only re-checks and retries what a purge already sent)
/// they are read as written.
async fn held_by_path(
    ctx: &Context,
    rec: &CandidateRecord,
    trust: Option<&TrustStore>,
) -> Result<Option<(Option<String>, BTreeMap<String, crate::bundle::HeldFile>)>> {
    if !is_orphans(rec) {
        return Ok(None);
    }
    let mut out = BTreeMap::new();
    let mut quarantine_root = None;
    for (uri, _, _) in bundles_of(rec) {
        let (pred, files) = match trust {
            Some(t) => {
                let (pred, _, digests) =
                    crate::bundle::verified_predicate_keeping(&ctx.storage, &uri, t, |_| Ok(None)).await?;
                crate::ops::orphans::bound_to_record(&uri, &pred, &digests.root, rec)?;
                let info = pred
                    .orphans
                    .clone()
                    .ok_or_else(|| Error::invalid(&uri, "the orphan candidate's bundle holds no orphans"))?;
                let files = crate::bundle::held(&pred, &info).map_err(|f| {
                    Error::invalid(&uri, f.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
                })?;
                (pred, files)
            }
            None => crate::ops::orphans::held_files(&ctx.storage, &uri, rec).await?,
        };
        let info = pred
            .orphans
            .clone()
            .ok_or_else(|| Error::invalid(&uri, "the orphan candidate's bundle holds no orphans"))?;
        quarantine_root = info.quarantine_root.clone();
        let loc = crate::model::location::TableLocation::new(&pred.table_location, info.table_root.clone(), &uri)?;
        for f in files {
            if let Ok(rel) = loc.relative(&f.entry.path) {
                out.insert(rel, f);
            }
        }
    }
    Ok(Some((quarantine_root, out)))
}

/// The record of one rebase: from/to stamp, what was released and why, what stays.
fn rebase_record(
    rec: &CandidateRecord,
    current: &crate::registry::WorldStamp,
    r: &crate::govern::closure::Rebase,
    now: chrono::DateTime<Utc>,
    after_acceptance: bool,
) -> serde_json::Value {
    let mut record = serde_json::json!({
        "at": now.to_rfc3339(),
        "from": rec.stamp,
        "to": current,
        "released_snapshots": r.released_snapshots.iter()
            .map(|(id, why)| serde_json::json!({"snapshot_id": id, "reason": why})).collect::<Vec<_>>(),
        "released_objects": r.released_objects.iter()
            .map(|(path, why)| serde_json::json!({"path": path, "reason": why})).collect::<Vec<_>>(),
        "snapshot_ids": r.snapshot_ids,
        "objects": r.objects.len(),
        // What a resume holds the row's inventory to once this rebase came after the acceptance (R3-3).
        "inventory_root": crate::govern::closure::candidate_root(&r.objects),
    });
    if after_acceptance {
        record["after_acceptance"] = serde_json::json!(true);
    }
    record
}

/// The candidate as a rebase leaves it (its snapshots, inventory, bytes and root), and the paths it releases.
fn rebased_candidate(
    rec: &CandidateRecord,
    r: &crate::govern::closure::Rebase,
) -> Result<(serde_json::Value, Vec<String>)> {
    let candidate = crate::govern::closure::with_inventory(&rec.candidate, &r.snapshot_ids, &r.objects);
    Ok((candidate, r.released_objects.iter().map(|(p, _)| p.clone()).collect()))
}

/// Re-judges a quarantined candidate at the table's current generation (`input`, gathered with its own
/// quarantine tags left out): what is still eligible stays, what became protected leaves as `PROTECTED` with
/// its reason, and the candidate's stamp becomes `current`, all in one registry transaction
/// ([`Registry::candidate_rebase`]). A candidate left with nothing to delete becomes `PROTECTED` itself.
#[allow(clippy::too_many_arguments)]
async fn rebase(
    ctx: &Context,
    source: &TableSource,
    reg: &Registry,
    table: &crate::table::Table,
    rec: &CandidateRecord,
    input: &crate::govern::closure::PlanInput,
    current: &crate::registry::WorldStamp,
    dry_run: bool,
) -> Result<Rebased> {
    let now = ctx.now();
    let ids = snapshot_ids_of(rec);
    let objects = &rec.objects;
    let plan = crate::govern::closure::plan(input);
    let r = crate::govern::closure::rebase(input, &plan, &ids, objects);
    if !r.unreadable.is_empty() {
        return Err(Error::corrupt(
            table.metadata_uri(),
            format!(
                "cannot decide: the layers of snapshot(s) {:?} could not be read, so nothing of candidate {} can be \
                 shown unreachable at the current generation",
                r.unreadable, rec.candidate_id
            ),
        ));
    }
    let mut record = rebase_record(rec, current, &r, now, false);
    // A governance decision changed the deletion rights since the candidate was judged: say so beside what the
    // planner now keeps, since a snapshot that only a withdrawn right had released from `minSnapshotAge` is kept
    // again for that reason alone.
    let rights_changed = if rec.stamp.deletion_rights == current.deletion_rights {
        None
    } else {
        let version = reg.rights_in_force(&rec.table_uuid).await?.version;
        Some(format!(
            "the deletion rights in force changed since the candidate was judged (governance decision {} now): a \
             snapshot that a withdrawn deletion right had released from minSnapshotAge is kept again",
            version.map_or_else(|| "(none)".to_owned(), |v| format!("v{v}"))
        ))
    };
    if let Some(note) = &rights_changed {
        record["deletion_rights_changed"] = serde_json::json!(note);
    }
    if r.objects.is_empty() || r.snapshot_ids.is_empty() {
        let why: Vec<String> = r
            .released_snapshots
            .iter()
            .map(|(id, why)| format!("snapshot {id}: {why}"))
            .collect();
        let mut text = format!(
            "every snapshot of the candidate is kept by the table now: {}",
            why.join("; ")
        );
        if let Some(note) = &rights_changed {
            text.push_str(&format!("; {note}"));
        }
        let mut reasons = vec![format!("the candidate is now PROTECTED: {text}")];
        if !dry_run {
            if rec.state.can_move_to(State::Protected) {
                reg.candidate_transition(&rec.candidate_id, State::Protected, &text, None, None, now)
                    .await?;
            }
            // No candidate stays stuck: its quarantine tags go, and the next plan judges its snapshots afresh.
            match crate::ops::quarantine::release(ctx, source, &rec.candidate_id, &format!("purge: {text}")).await {
                Ok(o) if o.verdict == Verdict::Ok => reasons.push(
                    "purge RELEASED it: its quarantine tags are removed and the next plan judges its snapshots afresh"
                        .into(),
                ),
                Ok(o) => reasons.push(format!("purge could not release it: {}", o.human.trim())),
                Err(e) => reasons.push(format!("purge could not release it: {e}")),
            }
        }
        return Ok(Rebased::Refused("REFUSED".into(), reasons));
    }
    if dry_run {
        let human = format!(
            "DRY RUN: the table or its protections changed since quarantine; a purge would rebase the candidate onto {} and delete \
             these {} objects:\n",
            current.metadata_location,
            r.objects.len()
        );
        return dry_run_rebase(rec, &r, human, "would_protect", "kept");
    }
    let (candidate, released) = rebased_candidate(rec, &r)?;
    if !reg
        .candidate_rebase(
            &rec.candidate_id,
            &rec.stamp,
            current,
            &candidate,
            &released,
            &record,
            None,
            now,
        )
        .await?
    {
        return Ok(rebased_meanwhile());
    }
    Ok(Rebased::Onto)
}

/// Records run `run_id`'s rebase `r` of candidate `rec` onto `current` (with its `rebase` record). Not written — the
/// candidate's stamp or claim moved meanwhile — the inventory read next would be the one before the rebase, holding
/// what the new generation references: an error then (exit 2), and nothing more is deleted.
async fn record_rebase(
    ctx: &Context,
    reg: &Registry,
    rec: &CandidateRecord,
    current: &crate::registry::WorldStamp,
    r: &crate::govern::closure::Rebase,
    run_id: &str,
    now: chrono::DateTime<Utc>,
) -> Result<()> {
    let record = rebase_record(rec, current, r, now, true);
    let (candidate, released) = rebased_candidate(rec, r)?;
    ctx.storage.failpoint_delay(DelayPoint::PurgeRebase).await;
    if reg
        .candidate_rebase(
            &rec.candidate_id,
            &rec.stamp,
            current,
            &candidate,
            &released,
            &record,
            Some(run_id),
            now,
        )
        .await?
    {
        return Ok(());
    }
    Err(Error::invalid(
        &rec.candidate_id,
        format!(
            "cannot decide: the rebase onto {} was not recorded (the candidate's stamp or claim moved meanwhile); \
             nothing more was deleted",
            current.metadata_location
        ),
    ))
}

/// Holds the row a purge read back after recording its rebase `r` to what it recorded (review M2): the row's
/// snapshots and inventory are what the rebase left. The row is what the commit takes out of the table and what is
/// deleted, and on the last commit attempt nothing judges it again.
///
/// # Errors
/// Any difference: "cannot decide" (exit 2), naming the candidate and what differs; nothing more is deleted.
fn as_rebased(rec: &CandidateRecord, r: &crate::govern::closure::Rebase) -> Result<()> {
    let set = |ids: &[i64]| ids.iter().copied().collect::<std::collections::BTreeSet<i64>>();
    let (row_ids, rebased_ids) = (set(&snapshot_ids_of(rec)), set(&r.snapshot_ids));
    let (row_root, rebased_root) = (
        crate::govern::closure::candidate_root(&rec.objects),
        crate::govern::closure::candidate_root(&r.objects),
    );
    let what = if row_ids != rebased_ids {
        format!("its snapshot_ids are {row_ids:?}, the rebase left {rebased_ids:?}")
    } else if row_root != rebased_root {
        format!(
            "its {} object(s) hash to {row_root}, the {} the rebase left to {rebased_root}",
            rec.objects.len(),
            r.objects.len()
        )
    } else {
        return Ok(());
    };
    Err(Error::invalid(
        &rec.candidate_id,
        format!(
            "cannot decide: the registry row of candidate {} changed after this purge recorded its rebase: {what}; \
             nothing more is committed or deleted (put the row back, or release the candidate)",
            rec.candidate_id
        ),
    ))
}

/// Whether no delete of the candidate happened or may have happened: no object deleted or uncertain, and no
/// delete intent without its answer (a run that stopped between sending a batch and recording it). Only then may
/// an approved candidate still be rebased.
async fn nothing_done(reg: &Registry, candidate_id: &str) -> Result<bool> {
    Ok(reg
        .object_states(candidate_id)
        .await?
        .iter()
        .all(|o| !matches!(o.state, State::Deleted | State::Verified | State::DeleteUnknown))
        && reg.in_flight_deletes(candidate_id).await?.is_empty())
}

/// Executes an approved purge (or resumes one).
#[allow(clippy::too_many_lines)]
#[allow(clippy::too_many_arguments)]
async fn execute(
    ctx: &Context,
    source: &TableSource,
    reg: &Registry,
    policy: &Policy,
    candidate_id: &str,
    key: &SigningKey,
    trust: &TrustStore,
    receipts: &str,
    run_id: &str,
    evidence: Option<&RunEvidence>,
    conditions: &mut Option<serde_json::Value>,
) -> Result<Outcome> {
    ctx.storage.failpoint_delay(DelayPoint::PurgeArchive).await;
    let mut rec = reg.candidate(candidate_id).await?;
    let dir = location::join(&location::canonical_uri(receipts)?, candidate_id);
    // 1. The signed archive of the exact inventory (write-once; kept from a previous run on resume), written
    // from the typed record: no JSON value of the inventory is built (#24).
    let archive_uri = archive_uri(receipts, candidate_id)?;
    // A resume holds the row it read under its claim to the archive (a row edited after the resume's first checks
    // is refused too), and judges the table again at its catalog-commit step when the row stands on a rebase made
    // after the acceptance.
    let mut rebased_since_archive = false;
    if let Some(f) = ctx.storage.get_opt(&archive_uri).await? {
        let keys = archive_keys(&archive_uri, Some(trust), Path::new("the purge's --key"), key)?;
        let verified = evidence::verify_payload(f.bytes, &keys).map_err(|e| {
            Error::invalid(
                &archive_uri,
                format!("cannot decide: the signed inventory archive does not verify: {e}; nothing is deleted"),
            )
        })?;
        rebased_since_archive = hold_row_to_archive(&rec, &archive_uri, &verified)?;
    } else {
        #[derive(serde::Serialize)]
        struct Archive<'a> {
            // In sorted order: the payload's keys are.
            /// When it was written: the time its Object Lock retain-until is computed from (`audit verify`).
            at: String,
            candidate: crate::registry::FullCandidate<'a>,
            /// The drill report the purge was accepted on: a resume without `--evidence` judges it again.
            evidence: Option<&'a RunEvidence>,
            evidence_retention: serde_json::Value,
            kind: &'static str,
            quarantine: &'a Option<serde_json::Value>,
            stamp: serde_json::Value,
        }
        let full = rec.full_candidate();
        let mut sha = <sha2::Sha256 as sha2::Digest>::new();
        serde_json::to_writer(&mut sha, &full).map_err(|e| Error::Internal(format!("the candidate's JSON: {e}")))?;
        let subject = vec![Subject {
            name: format!("lakedrill-candidate:{candidate_id}"),
            digest: BTreeMap::from([
                ("sha256".to_owned(), hex::encode(sha2::Digest::finalize(sha))),
                (
                    "blake3".to_owned(),
                    crate::govern::closure::candidate_root(&rec.objects),
                ),
            ]),
        }];
        let now = ctx.now();
        let archive = Archive {
            at: now.to_rfc3339(),
            candidate: full,
            evidence,
            evidence_retention: serde_json::json!(policy.evidence_retention().map(crate::ops::evidence_lock::claim)),
            kind: "inventory",
            quarantine: &rec.quarantine,
            stamp: serde_json::to_value(&rec.stamp).map_err(|e| Error::Internal(e.to_string()))?,
        };
        let envelope = evidence::sign_statement_serialized(&subject, RECEIPTS_PREDICATE_TYPE, &archive, key)
            .map_err(|e| Error::Internal(format!("the inventory archive: {e}")))?;
        still_claimed(reg, candidate_id, run_id, "writing the signed inventory archive").await?;
        crate::ops::evidence_lock::put(
            &ctx.storage,
            &archive_uri,
            Bytes::from(envelope),
            policy.evidence_retention(),
            now,
        )
        .await?;
    }
    // The inventory, typed, taken out of the record (not copied: a million objects, #24); an orphan candidate's
    // re-checks read it from the record, so there it is copied.
    let objects = if is_orphans(&rec) {
        rec.objects.clone()
    } else {
        std::mem::take(&mut rec.objects)
    };
    // What every object was when sealed, from the verified bundles: read before anything changes (a bundle
    // that no longer verifies stops the purge here, before the catalog commit).
    // Deletes go under the table root this run reads (the catalog's location, or `--table-root`): every object to
    // delete must have been sealed at exactly that place, or the run would delete files no drill verified.
    let delete_root = ctx.catalog_table(source).await?.0.location().root_uri().to_owned();
    let sealed = sealed_inventories(ctx, &rec, &objects, trust, SealedObject::of, Some(&delete_root)).await?;
    // Every object to delete was sealed by a bundle the drill verified: one that none holds (only a registry row
    // edited after the acceptance's coverage check gets here) is never deleted on a plain HEAD.
    if let Some(o) = objects.iter().find(|o| sealed.get(&o.path).is_none()) {
        return Err(Error::invalid(
            candidate_id,
            format!(
                "cannot decide: object {} is in the candidate but sealed by none of its bundles; nothing is deleted",
                o.path
            ),
        ));
    }
    // 2. Drop the quarantine tags and the candidate's snapshots from the table: one commit, a compare-and-set
    // against the generation read. A commit that loses the race to a writer is retried on the new generation,
    // after checking again that nothing there reaches the candidate; files are deleted only once it succeeded.
    let mut objects = objects;
    let tag_prefix = format!("{QUARANTINE_TAG_PREFIX}{candidate_id}");
    let mut attempt = 0;
    // Orphans: no catalog commit (nothing in the metadata names them); where each file is held instead, and a
    // final check that the table references none of them now and no writer or hold covers one.
    let held = held_by_path(ctx, &rec, Some(trust)).await?;
    // How the run ends: its outcome, with the reasons it halted (a run that stops before its catalog commit and
    // its first delete has no receipts chain open yet).
    let end_run = |why: Vec<String>, chain: Option<crate::ops::receipts::Chain>| {
        finish(
            ctx,
            reg,
            candidate_id,
            run_id,
            (key, Some(trust)),
            &dir,
            why,
            policy.evidence_retention(),
            chain,
        )
    };
    let table = if held.is_some() {
        let (table, _, _) = ctx.catalog_table(source).await?;
        if let Some(why) = orphan_recheck(ctx, reg, policy, &table, &mut rec, &tag_prefix, run_id).await? {
            return end_run(vec![why], None).await;
        }
        objects = rec.objects.clone();
        table
    } else {
        loop {
            attempt += 1;
            let ids = snapshot_ids_of(&rec);
            let (table, cat, ident) = ctx.catalog_table(source).await?;
            // The generation the acceptance compared is the one committed against; on any other the candidate is
            // re-judged first: what the new generation keeps leaves it as PROTECTED (before any delete).
            if (attempt > 1
                || rebased_since_archive
                || table.generation().metadata_location != rec.stamp.metadata_location)
                && !crate::safety::weakened(crate::safety::Check::TableGenerationCas)
            {
                // The stamp is read before what the rebase judges: a lease or hold that lands after it moves the
                // stamp's counters, and the check before the commit below sees it.
                let current = crate::ops::plan::world_stamp(&table, policy, reg, Some(&tag_prefix)).await?;
                let input = crate::ops::plan::gather(ctx, &table, policy, reg, ctx.now(), Some(&tag_prefix)).await?;
                let plan = crate::govern::closure::plan(&input);
                let r = crate::govern::closure::rebase(&input, &plan, &ids, &objects);
                let nothing_done = nothing_done(reg, candidate_id).await?;
                // What the rebase would keep, held to the independent closure check on the new generation before
                // anything is committed or its stamp (which would count every protection in it as judged) is
                // recorded: a legal hold, lease or checkpoint on a snapshot that already left the table reaches
                // nothing the table keeps. On every new generation, also when the rebase changed nothing: the
                // check is independent of the plan and the rebase, so it does not take their word that nothing
                // changed (review R3-6: a protected ref dropped since the acceptance changes nothing the rebase
                // judges, and the purge committed and deleted without this check). One pass over the generation.
                let conflicts = crate::govern::closure::nondeletable_conflicts(&input, &r.snapshot_ids, &r.objects);
                if !conflicts.is_empty() {
                    return Err(Error::corrupt(
                        table.metadata_uri(),
                        format!(
                            "cannot decide: a commit landed between the acceptance of candidate {candidate_id} and its \
                             catalog commit, and what a rebase onto it would keep conflicts with the independent \
                             closure check: {}; nothing more was deleted",
                            conflicts.join("; ")
                        ),
                    ));
                }
                if !r.unreadable.is_empty() || (!r.unchanged() && (!nothing_done || r.objects.is_empty())) {
                    return Err(Error::corrupt(
                        table.metadata_uri(),
                        format!(
                            "cannot decide: a commit landed between the acceptance of candidate {candidate_id} and its \
                         catalog commit, and the new generation keeps part of it (snapshots {:?}, objects {:?}) or \
                         cannot be read (snapshots {:?}); nothing more was deleted",
                            r.released_snapshots, r.released_objects, r.unreadable
                        ),
                    ));
                }
                if !r.unchanged() {
                    record_rebase(ctx, reg, &rec, &current, &r, run_id, ctx.now()).await?;
                    ctx.storage.failpoint_delay(DelayPoint::PurgeRebaseRecorded).await;
                    rec = reg.candidate(candidate_id).await?;
                    as_rebased(&rec, &r)?;
                    objects = std::mem::take(&mut rec.objects);
                    if attempt < COMMIT_ATTEMPTS {
                        continue;
                    }
                }
            }
            let ids = snapshot_ids_of(&rec);
            let tags: Vec<String> = table
                .refs()
                .keys()
                .filter(|n| crate::ops::plan::is_quarantine_tag(n, &tag_prefix))
                .cloned()
                .collect();
            let present: Vec<i64> = ids
                .iter()
                .copied()
                .filter(|id| table.metadata().snapshot_by_id(*id).is_some())
                .collect();
            if tags.is_empty() && present.is_empty() {
                break table;
            }
            let mut b = table.change();
            for t in &tags {
                b = b.remove_ref(t);
            }
            let new = b.remove_snapshots(&present).build()?;
            // The commit is made inside the registry's write lock, after checking there that nothing came to
            // protect the candidate since the world it was accepted (or last rebased) in: a lease or hold on one
            // of its snapshots, the candidate moved to PROTECTED, the deleter stopped, the stage changed. A lease
            // or hold written before the lock is seen here and the snapshots stay in the table; one written after
            // it finds them gone when it reads the table again (`lease add`, `hold set`).
            ctx.storage.failpoint_delay(DelayPoint::CatalogCommit).await;
            let mut accepted = baseline(&rec, table.location(), run_id);
            let lock = match reg.purge_batch(candidate_id, &mut accepted, ctx.now()).await? {
                Ok(lock) => lock,
                Err(halted) => {
                    return end_run(
                        halted
                            .into_iter()
                            .map(|h| format!("before the catalog commit (the snapshots stay in the table): {h}"))
                            .collect(),
                        None,
                    )
                    .await;
                }
            };
            let judged = table.generation().metadata_location.clone();
            let committed = cat.commit(&ctx.storage, &ident, &judged, &new).await;
            lock.commit().await?;
            match committed {
                // Nothing is deleted on the generation judged before the commit: the catalog is read again, and
                // only a table at the committed generation, built directly on the one judged (its metadata log's
                // last entry) and without the candidate's snapshots and tags, is deleted on as it is. Any other
                // (a REST server applying the commit over another writer's commit that added a snapshot without
                // moving a ref — a staged snapshot that may name the candidate's files — or a commit landing
                // since) goes round the loop: re-judged and rebased on what the table is now, before any delete.
                Ok(loc) => {
                    let (now, _, _) = ctx.catalog_table(source).await?;
                    if committed_on(&now, &loc, &judged) && !carries_candidate(&now, &ids, &tag_prefix) {
                        break now;
                    }
                }
                Err(Error::Catalog { .. }) if attempt < COMMIT_ATTEMPTS => {}
                // Corrupt: the catalog may already have lost refs to the candidate's snapshots (a REST server
                // applying the removal over a concurrent commit). CommitUnknown: the commit was sent and the table,
                // read again, does not show it applied; it may still be, with no check of what it dropped, and the
                // next run would find the snapshots gone and delete. Either way the candidate is protected for
                // good, nothing deleted.
                Err(e @ (Error::Corrupt { .. } | Error::CommitUnknown { .. })) => {
                    reg.candidate_transition(
                        candidate_id,
                        State::Protected,
                        &format!("the purge's catalog commit could not be trusted: {e}"),
                        None,
                        None,
                        ctx.now(),
                    )
                    .await?;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
    };
    // 3–4. Delete exactly the inventory, in batches, with receipts before and after.
    let root = table.location().root_uri().to_owned();
    if root != delete_root {
        return Err(Error::invalid(
            candidate_id,
            format!(
                "the table root moved from {delete_root} to {root} while this purge ran: nothing is deleted; run it \
                 again"
            ),
        ));
    }
    // Orphans: what is deleted is where each file is held (the version behind its marker, or its copy).
    let (target_root, held) = match held {
        Some((Some(q), h)) => (q, Some(h)),
        Some((None, h)) => (root.clone(), Some(h)),
        None => (root.clone(), None),
    };
    // On the local filesystem a delete goes through symlinked folders: an object whose path, symlinks
    // resolved, leaves the table root (the quarantine folder for orphan copies) is never deleted (README
    // "Symlinks").
    let confined = ctx.storage.confine(&target_root).await?;
    let on_s3 = target_root.starts_with("s3://");
    let permanent = policy.object_versioning() == ObjectVersioning::Permanent;
    // An orphan candidate's objects are deleted only where they are held: one its bundles do not hold (the
    // acceptance checks the coverage, so only an edited record gets here) is never deleted at the table's path,
    // where it would be a live file: the run stops before any request.
    if let Some(h) = held.as_ref()
        && let Some(o) = objects.iter().find(|o| !h.contains_key(&o.path))
    {
        return Err(Error::invalid(
            candidate_id,
            format!(
                "cannot decide: orphan {} is in the candidate but in none of its bundles' held files; nothing is \
                 deleted at the table's path",
                o.path
            ),
        ));
    }
    let target = |o: &ObjectRef| -> (String, Option<crate::bundle::HeldFile>) {
        match held.as_ref().and_then(|h| h.get(&o.path)) {
            Some(f) => (f.uri.clone(), Some(f.clone())),
            None => (location::join(&root, &o.path), None),
        }
    };
    // Holds, leases, DR checkpoints and writers that came since the candidate's stamp (what its acceptance or
    // last rebase judged) and cover it stop this run (those that cover it may also have sent it to PROTECTED,
    // which stops it too, also across resumes). Every delete request is sent inside a registry batch that holds
    // the write lock and checked them first, so no request goes out after a covering protection committed (one
    // set meanwhile waits for the batch, and the next batch halts). From the stamp, not from values read now: a
    // protection landing between the candidate's last check and this read would be in the baseline unjudged.
    let mut base = baseline(&rec, table.location(), run_id);
    // Which objects are still to delete (DELETE_APPROVED), each flagged at its index: the states are streamed and
    // looked up in the inventory sorted by path, not held as a map of a million paths (#24).
    let mut by_path: Vec<u32> = (0..u32::try_from(objects.len())
        .map_err(|_| Error::invalid(candidate_id, "a candidate of more than 4,294,967,295 objects"))?)
        .collect();
    by_path.sort_unstable_by(|a, b| objects[*a as usize].path.cmp(&objects[*b as usize].path));
    let index_of = |path: &str| {
        by_path
            .binary_search_by(|i| objects[*i as usize].path.as_str().cmp(path))
            .ok()
            .map(|at| by_path[at] as usize)
    };
    let mut approved = vec![false; objects.len()];
    reg.for_each_object_state(candidate_id, |o| {
        if o.state == State::DeleteApproved
            && let Some(i) = index_of(&o.path)
        {
            approved[i] = true;
        }
    })
    .await?;
    let is_approved = |path: &str| index_of(path).is_some_and(|i| approved[i]);
    // The objects an earlier run asked the store to delete (looked up per object: a set, not a scan; the
    // receipts streamed, not held, #24).
    let mut requested_before: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    reg.for_each_receipt(candidate_id, |r| {
        if r.receipt["phase"] == "requested" && is_approved(&r.path) {
            requested_before.insert(r.path);
        }
    })
    .await?;
    // The signed receipts chain (#23 point 4): what an earlier run recorded but did not seal is sealed first,
    // then every registry batch below is sealed as it commits.
    let retention = policy.evidence_retention();
    let mut chain =
        crate::ops::receipts::Chain::open(&ctx.storage, reg, candidate_id, &dir, key, retention, ctx.now()).await?;
    let mut halted = Vec::new();
    let todo: Vec<&ObjectRef> = objects
        .iter()
        .zip(&approved)
        .filter_map(|(o, approved)| approved.then_some(o))
        .collect();
    // The delete requests carry the ETag sealed in the bundle, so an object overwritten since is spared by the
    // provider, and no HEAD is sent before them (#24). A provider that ignores that condition would delete it:
    // asked once per run (a probe object beside the table's files, removed again), and where it does not honour
    // it every object is read before its delete and compared with what was sealed. An answer that cannot be had
    // counts as not honoured.
    let mut head_first = false;
    if on_s3 && held.is_none() && !todo.is_empty() {
        let probe = location::join(&root, &format!(".lakedrill-probe/{}", uuid::Uuid::new_v4()));
        let found = ctx.storage.s3_delete_conditions(&probe).await;
        head_first = !found
            .as_ref()
            .is_ok_and(crate::io::store::s3::DeleteConditions::honoured);
        if head_first {
            crate::report::output::warn(match &found {
                Ok(c) => format!(
                    "the S3 provider does not honour a delete's ETag condition (DeleteObjects: {}, If-Match: {}): \
                     every object is read before its delete and compared with what was sealed",
                    if c.delete_objects { "honoured" } else { "ignored" },
                    if c.if_match { "honoured" } else { "ignored" }
                ),
                Err(e) => format!(
                    "whether the S3 provider honours a delete's ETag condition could not be found out ({e}): every \
                     object is read before its delete and compared with what was sealed"
                ),
            });
        }
        *conditions = Some(serde_json::json!({
            "delete_objects": found.as_ref().ok().map(|c| c.delete_objects),
            "if_match": found.as_ref().ok().map(|c| c.if_match),
            "error": found.as_ref().err().map(ToString::to_string),
            "head_before_delete": head_first,
        }));
    }
    let progress = crate::report::output::Progress::new("purge", todo.len(), ctx.storage.options().progress);
    // Every batch re-checks the stop switch, holds, leases, the rollout stage and the run's claim inside the
    // registry's write lock, and holds that lock while its delete requests go out. On S3 a batch is one
    // DeleteObjects request per 1,000 keys, `io_concurrency` of them in flight; elsewhere single deletes
    // through a pool of `io_concurrency`. Its size is `[storage] purge_batch_objects` (default 1,000, at most
    // 10,000): a batch's fixed cost — two registry transactions, two sealed receipt batches, the writer gap —
    // is paid per batch, not per 64 objects as before #24.
    let batch_size = ctx
        .hooks
        .purge_batch_size
        .unwrap_or(ctx.storage.options().purge_batch_objects)
        .clamp(1, crate::config::MAX_PURGE_BATCH_OBJECTS);
    let concurrency = ctx.storage.options().io_concurrency.get();
    let mut sent = 0_usize;
    'batches: for (number, chunk) in (1_u64..).zip(todo.chunks(batch_size)) {
        ctx.storage.failpoint_purge_batch(number, false);
        ctx.hooks.before_batch(sent).await?;
        // Orphans: a commit since the last check may reference a held file again: it is put back, and the run
        // stops (the next purge re-judges the rest).
        if held.is_some() && sent > 0 {
            let (now_table, _, _) = ctx.catalog_table(source).await?;
            if now_table.generation().metadata_location != rec.stamp.metadata_location
                && let Some(why) = orphan_recheck(ctx, reg, policy, &now_table, &mut rec, &tag_prefix, run_id).await?
            {
                halted.push(why);
                break 'batches;
            }
        }
        // What each object must still be. Nothing is deleted through a symlink that leaves the table (on a
        // local filesystem; README "Symlinks").
        for o in chunk {
            let (uri, _) = target(o);
            if let Some(target) = confined.escape(&uri).await? {
                halted.push(format!(
                    "{} resolves to {target}, outside the table root {root} (a symlink): not deleted, no further deletes",
                    o.path
                ));
                break 'batches;
            }
            // Nor through a link to another path inside it: that path's file would go (`alias/f` when `alias`
            // links to `data`, and a retained snapshot references `data/f`).
            if let Some(target) = confined.through_link(&uri).await? {
                halted.push(format!(
                    "{} resolves to {target} through a symlink inside the table root {root} (the same file under \
                     another path): not deleted, no further deletes",
                    o.path
                ));
                break 'batches;
            }
        }
        let expected: Vec<Expected> = futures::stream::iter(chunk.iter().map(|o| {
            let requested_before = requested_before.contains(o.path.as_str());
            let (uri, held) = target(o);
            let on_s3 = if head_first {
                Where::S3HeadFirst
            } else if on_s3 {
                Where::S3
            } else {
                Where::Elsewhere
            };
            expect(ctx, uri, held, sealed.get(&o.path), on_s3, permanent, requested_before)
        }))
        .buffered(concurrency)
        .try_collect()
        .await?;
        // 1. The intent, persisted before any request: a run killed after this resumes by re-checking.
        let mut batch = match reg.purge_batch(candidate_id, &mut base, ctx.now()).await? {
            Ok(b) => b,
            Err(why) => {
                halted.extend(why);
                break;
            }
        };
        let mut send = Vec::new();
        for (o, ex) in chunk.iter().zip(expected) {
            // In permanent mode with no sealed version, the request a previous run sent named the version its HEAD
            // read then, which this run does not know: the current object being absent (a provider that ignored
            // `versionId` wrote a delete marker) says nothing of that version. `reconcile` settles it by the
            // version its intent receipt recorded (review of 2026-12-07, R3-2).
            if ex.requested_before && ex.head_done && ex.head.is_none() && ex.permanent && ex.version_id.is_none() {
                let r = receipt(
                    "confirmed",
                    o,
                    &ex,
                    None,
                    "absent at re-check after an interrupted request, but the version that request named is not \
                     sealed: unknown until `reconcile` asks for it",
                    Some("absent (current object only)".into()),
                );
                batch.receipt(candidate_id, &o.path, &r, ctx.now());
                batch.object_transition(candidate_id, &o.path, State::DeleteUnknown, ctx.now());
                progress.tick(o.size);
                continue;
            }
            if ex.requested_before && ex.head_done && ex.head.is_none() {
                // A previous run sent this delete and died before confirming it: the re-check settles it.
                let r = receipt(
                    "confirmed",
                    o,
                    &ex,
                    None,
                    "absent at re-check after an interrupted request",
                    Some("absent".into()),
                );
                batch.receipt(candidate_id, &o.path, &r, ctx.now());
                batch.object_transitions(candidate_id, &o.path, &[State::Deleted, State::Verified], ctx.now());
                progress.tick(o.size);
                continue;
            }
            let mut req = receipt("requested", o, &ex, None, "", None);
            req["requested_at"] = serde_json::json!(ctx.now().to_rfc3339());
            req["hold_generation"] = serde_json::json!(batch.hold_generation);
            batch.receipt(candidate_id, &o.path, &req, ctx.now());
            send.push((*o, ex));
        }
        let recorded = batch.commit().await?;
        seal_batch(ctx, &mut chain, key, &recorded, retention).await?;
        ctx.storage.failpoint_purge_batch(number, true);
        if send.is_empty() {
            continue;
        }
        ctx.storage
            .failpoint_delay(crate::io::store::DelayPoint::PurgeIntent)
            .await;
        // 2. The requests, in a second batch whose checks see any hold set since the intent was recorded.
        let mut batch = match reg.purge_batch(candidate_id, &mut base, ctx.now()).await? {
            Ok(b) => b,
            Err(why) => {
                // Nothing of this batch was sent: each intent gets that answer.
                let answers = unsent_answers(ctx, &send, &why.join("; "));
                let recorded = reg.purge_unsent(candidate_id, &base.run_id, answers, ctx.now()).await?;
                seal_batch(ctx, &mut chain, key, &recorded, retention).await?;
                halted.extend(why);
                break;
            }
        };
        let mut going = Vec::with_capacity(send.len());
        let mut stop = false;
        let mut send = send.into_iter();
        while let Some((o, ex)) = send.next() {
            // An object that is no longer the one sealed (another size or ETag now: overwritten since
            // quarantine) is not deleted: lakedrill deletes only bytes it verified. It stays DELETE_UNKNOWN.
            if let Some(why) = ex.changed(o) {
                let now = ex.head.as_ref().map(|h| format!("present ({} bytes)", h.size));
                let mut r = receipt("confirmed", o, &ex, None, &format!("not deleted: {why}"), now);
                r["confirmed_at"] = serde_json::json!(ctx.now().to_rfc3339());
                r["sent"] = serde_json::json!(false);
                r["hold_generation"] = serde_json::json!(batch.hold_generation);
                batch.receipt(candidate_id, &o.path, &r, ctx.now());
                batch.object_transition(candidate_id, &o.path, State::DeleteUnknown, ctx.now());
                progress.tick(o.size);
                continue;
            }
            // `drill faults` lands its races here (a hold set from another connection, which waits).
            if let Err(e) = ctx.hooks.before_delete(sent).await {
                let why = format!("fault hook: {e}");
                // This object's intent and the rest of the batch's: never sent.
                let rest: Vec<(&ObjectRef, Expected)> = std::iter::once((o, ex)).chain(send.by_ref()).collect();
                for (path, r) in unsent_answers(ctx, &rest, &why) {
                    batch.receipt(candidate_id, &path, &r, ctx.now());
                }
                halted.push(why);
                stop = true;
                break;
            }
            sent += 1;
            going.push((o, ex));
        }
        let requested_at = ctx.now().to_rfc3339();
        let started = std::time::Instant::now();
        let answers = send_deletes(ctx, on_s3, &going).await;
        ctx.storage.note_request_phase(false, started.elapsed());
        let confirmed_at = ctx.now().to_rfc3339();
        // Every object is re-checked after its request: only a re-check that shows it gone counts (for a held
        // orphan: its version, or its copy).
        let started = std::time::Instant::now();
        let after = recheck(ctx, on_s3, &going).await;
        ctx.storage.note_request_phase(true, started.elapsed());
        let mut unsent = Vec::new();
        for (((o, ex), answer), after) in going.iter().zip(answers).zip(after) {
            let recheck = match &after {
                Ok(None) => "absent".to_owned(),
                Ok(Some(i)) => format!("present ({} bytes)", i.size),
                Err(e) => format!("re-check failed: {e}"),
            };
            // A request that failed before it was sent (review R2-7): its intent is answered "not sent" and the
            // object keeps DELETE_APPROVED, as a batch halted before its requests leaves it; nothing of it is
            // uncertain, so nothing is left for `reconcile`. The next run re-checks it and sends it anew.
            if let Err(Unanswered::NotSent(why)) = &answer {
                let mut r = receipt(
                    "confirmed",
                    o,
                    ex,
                    None,
                    &format!("not sent: {why}"),
                    Some(recheck.clone()),
                );
                r["requested_at"] = serde_json::json!(requested_at);
                r["confirmed_at"] = serde_json::json!(confirmed_at);
                r["sent"] = serde_json::json!(false);
                r["hold_generation"] = serde_json::json!(batch.hold_generation);
                batch.receipt(candidate_id, &o.path, &r, ctx.now());
                unsent.push(format!("{}: {why}", o.path));
                progress.tick(o.size);
                continue;
            }
            let other_version = answer
                .as_ref()
                .ok()
                .filter(|a| a.deleted)
                .and_then(|a| other_version_deleted(a, ex));
            let (result, certain) = match &answer {
                Ok(_) if let Some(why) = &other_version => (why.clone(), false),
                Ok(a) if a.deleted => ("deleted".to_owned(), true),
                Ok(a) if a.precondition_failed() => (
                    format!(
                        "not deleted: the provider refused the condition (ETag {} no longer matches: the object \
                         changed since quarantine)",
                        ex.e_tag.as_deref().unwrap_or("?")
                    ),
                    false,
                ),
                Ok(a) if a.code.as_deref() == Some("NoSuchKey") => ("already absent".to_owned(), true),
                Ok(a) => (
                    format!(
                        "error: {}{}",
                        a.code.as_deref().unwrap_or("no code"),
                        a.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                    ),
                    false,
                ),
                Err(e) => (format!("error: {e}"), false),
            };
            let mut r = receipt("confirmed", o, ex, answer.as_ref().ok(), &result, Some(recheck.clone()));
            r["requested_at"] = serde_json::json!(requested_at);
            r["confirmed_at"] = serde_json::json!(confirmed_at);
            r["hold_generation"] = serde_json::json!(batch.hold_generation);
            batch.receipt(candidate_id, &o.path, &r, ctx.now());
            let certain = certain || crate::safety::weakened(crate::safety::Check::UncertainDeleteIsUnknown);
            let gone = matches!(after, Ok(None)) || crate::safety::weakened(crate::safety::Check::RecheckAfterDelete);
            if certain && gone {
                batch.object_transitions(candidate_id, &o.path, &[State::Deleted, State::Verified], ctx.now());
            } else {
                batch.object_transition(candidate_id, &o.path, State::DeleteUnknown, ctx.now());
            }
            progress.tick(o.size);
        }
        let recorded = batch.commit().await?;
        seal_batch(ctx, &mut chain, key, &recorded, retention).await?;
        if !unsent.is_empty() {
            // What failed before sending (a URI, a signature, the HTTP client) fails the next batch the same way.
            let shown: Vec<&str> = unsent.iter().take(3).map(String::as_str).collect();
            halted.push(format!(
                "{} delete request(s) could not be sent, so none of them took effect (the objects stay \
                 DELETE_APPROVED and the next purge sends them): {}{}; no further deletes",
                unsent.len(),
                shown.join("; "),
                if unsent.len() > shown.len() { "; …" } else { "" }
            ));
            break 'batches;
        }
        if stop {
            break 'batches;
        }
        // A hold (or a stop) waiting for the lock gets it now; the next batch sees it.
        reg.yield_to_writers().await;
    }
    // How long a marker-only purge can be undone: the bucket's lifecycle rules decide (read before the inventory
    // goes; reported, never a reason to stop).
    let window = if on_s3 && !permanent && held.is_none() {
        Some(undelete_window(ctx, &root, &objects).await)
    } else {
        None
    };
    // `finish` reads the record and the states as they are now: what this run held of them goes first (#24).
    drop(todo);
    drop(requested_before);
    drop(approved);
    drop(by_path);
    drop(sealed);
    drop(objects);
    drop(rec);
    ctx.storage.failpoint_delay(DelayPoint::PurgeFinish).await;
    let mut out = end_run(halted, Some(chain)).await?;
    if let Some((json, line)) = window {
        out.json["undelete_window"] = json;
        out.human.push_str(&format!("  {line}\n"));
    }
    Ok(out)
}

/// The answers to delete intents whose requests were never sent (`why`): one `confirmed` receipt per object,
/// "not sent", so that none of them is left as a delete that may have happened.
fn unsent_answers(ctx: &Context, unsent: &[(&ObjectRef, Expected)], why: &str) -> Vec<(String, serde_json::Value)> {
    let at = ctx.now().to_rfc3339();
    unsent
        .iter()
        .map(|(o, ex)| {
            let mut r = receipt("confirmed", o, ex, None, &format!("not sent: {why}"), None);
            r["confirmed_at"] = serde_json::json!(at);
            r["sent"] = serde_json::json!(false);
            (o.path.clone(), r)
        })
        .collect()
}

/// How long the objects of a marker-only purge on the S3 bucket at `root` stay recoverable with `undelete`: not at
/// all on a bucket that keeps no versions; else until the enabled lifecycle rule that may apply to one of them
/// (`NoncurrentVersionExpiration`, days from each object's delete) removes their versions soonest, or without such
/// a rule until someone removes them. The JSON (`rule` null when no rule applies, `days` 0 when nothing is kept,
/// `unknown` with the reason when the bucket's settings could not be read) and one line.
async fn undelete_window(ctx: &Context, root: &str, objects: &[ObjectRef]) -> (serde_json::Value, String) {
    use crate::io::store::s3::{Held, soonest};
    let bucket = crate::io::store::s3::bucket_and_key(root).map_or("", |(b, _)| b);
    let unknown = |what: &str, e: Error| {
        (
            serde_json::json!({"rule": null, "days": null, "unknown": format!("{what}: {}", e.with_causes())}),
            format!(
                "undelete window unknown: the {what} of bucket {bucket} could not be read ({})",
                e.with_causes()
            ),
        )
    };
    match ctx.storage.s3_versioning_enabled(root).await {
        Err(e) => return unknown("versioning status", e),
        Ok(false) => {
            return (
                serde_json::json!({"rule": null, "days": 0}),
                format!(
                    "no undelete: bucket {bucket} does not keep versions (versioning is not Enabled), so these \
                     deletes are final"
                ),
            );
        }
        Ok(true) => {}
    }
    let rules = match ctx.storage.s3_lifecycle_rules(root).await {
        Ok(r) => r,
        Err(e) => return unknown("lifecycle configuration (it needs s3:GetLifecycleConfiguration)", e),
    };
    let uris: Vec<(String, u64)> = objects
        .iter()
        .map(|o| (location::join(root, &o.path), o.size))
        .collect();
    let now = ctx.now();
    let list = || uris.iter().map(|(u, n)| (u.as_str(), *n));
    let archived = soonest(&rules, Held::BehindMarker, now, true, list()).map(|e| {
        format!(
            "; lifecycle rule {} moves them to storage class {} {} day(s) after their deletes (an undelete then needs \
             a restore from that class first)",
            e.rule.name(),
            e.storage_class.unwrap_or("?"),
            (e.at - now).num_days()
        )
    });
    match soonest(&rules, Held::BehindMarker, now, false, list()) {
        Some(e) => {
            let days = e.rule.noncurrent_days.unwrap_or(0);
            (
                serde_json::json!({"rule": e.rule, "days": days}),
                format!(
                    "undelete window: lifecycle rule {} of bucket {bucket} removes the deleted objects' versions {days} \
                     day(s) after each one's delete ({} of {} objects under it, first {}); `lakedrill undelete` \
                     brings them back until then{}",
                    e.rule.name(),
                    e.objects,
                    uris.len(),
                    e.first,
                    archived.unwrap_or_default()
                ),
            )
        }
        None => (
            serde_json::json!({"rule": null, "days": null}),
            format!(
                "undelete window: no enabled lifecycle rule of bucket {bucket} removes the deleted objects' versions; \
                 `lakedrill undelete` brings them back until someone removes them{}",
                archived.unwrap_or_default()
            ),
        ),
    }
}

/// Seals the receipts one registry batch recorded as the next signed batch of the chain.
async fn seal_batch(
    ctx: &Context,
    chain: &mut crate::ops::receipts::Chain,
    key: &SigningKey,
    recorded: &[crate::registry::ReceiptRow],
    retention: Option<crate::govern::policy::EvidenceRetention>,
) -> Result<()> {
    let sealed = recorded.iter().map(crate::ops::receipts::SealedReceipt::from).collect();
    chain.seal(&ctx.storage, key, sealed, retention, ctx.now()).await
}

/// What one object of the inventory must still be when its delete goes out.
#[derive(Debug, Clone)]
struct Expected {
    /// What the delete removes: the object at the table location, or where an orphan is held (its URI at the
    /// table location with the version behind its marker, or its quarantine copy).
    uri: String,
    /// Whether it is a held orphan.
    orphan: bool,
    /// A held orphan whose recorded version is the current one again (its delete marker was removed): never
    /// deleted, it is live.
    live_again: bool,
    /// The ETag the delete is conditional on (`If-Match`, or the key's `<ETag>` in `DeleteObjects`).
    e_tag: Option<String>,
    /// Where that ETag comes from: `bundle` (sealed at quarantine), `head` (read before the delete; the bundle
    /// recorded none) or `none`.
    from: &'static str,
    /// The ETag sealed in the bundle.
    sealed_e_tag: Option<String>,
    /// The version id sealed (or, without one, seen before the delete); permanent mode deletes exactly it.
    version_id: Option<String>,
    /// Whether the delete removes `version_id` for good (policy `objectVersioning: permanent`).
    permanent: bool,
    /// Whether a HEAD was sent before the delete, and what it said.
    head_done: bool,
    head: Option<crate::io::store::ObjectInfo>,
    /// A previous run recorded the intent for this object (a resume).
    requested_before: bool,
}

impl Expected {
    /// Why the object seen before the delete is not the one sealed (size or ETag), if it is not.
    fn changed(&self, o: &ObjectRef) -> Option<String> {
        if self.live_again {
            return Some(format!(
                "its version {} is current again at the table location (its delete marker was removed): it is live",
                self.version_id.as_deref().unwrap_or("?")
            ));
        }
        let h = self.head.as_ref()?;
        if h.size != o.size {
            return Some(format!(
                "changed since quarantine ({} bytes now, {} in the inventory)",
                h.size, o.size
            ));
        }
        match (nonempty(h.e_tag.as_deref()), self.sealed_e_tag.as_deref()) {
            (Some(now), Some(sealed)) if now != sealed => Some(format!(
                "changed since quarantine (ETag {now} now, {sealed} when sealed)"
            )),
            _ => None,
        }
    }
}

fn nonempty(s: Option<&str>) -> Option<&str> {
    s.filter(|v| !v.is_empty() && *v != "\"\"")
}

/// What to expect of `o`. On S3 an object whose bundle recorded its ETag (and, in permanent mode, its version)
/// is deleted conditionally without a HEAD first: the provider checks the ETag. Everything else (local files,
/// objects without a sealed ETag, resumed requests) is read first, and compared with the inventory's size and
/// the sealed ETag before any request.
///
/// A held orphan (`held`) is always read first where it is held: the version behind its marker (which must not
/// be the current one again) or its copy, whose own ETag is the condition (the sealed one is the table file's).
#[allow(clippy::too_many_arguments)]
/// Where a purge deletes, for [`expect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    /// S3, whose provider honours a delete's ETag condition: an object with a sealed ETag is not read first.
    S3,
    /// S3, whose provider ignores that condition (or could not be asked): every object is read first.
    S3HeadFirst,
    /// A local filesystem or another store: every object is read first.
    Elsewhere,
}

async fn expect(
    ctx: &Context,
    uri: String,
    held: Option<crate::bundle::HeldFile>,
    sealed: Option<&SealedObject>,
    on: Where,
    permanent: bool,
    requested_before: bool,
) -> Result<Expected> {
    let orphan = held.is_some();
    let (sealed, permanent) = match &held {
        Some(f) if f.version.is_some() => (sealed, true),
        Some(_) => (None, false),
        None => (sealed, permanent),
    };
    let sealed_e_tag = sealed.and_then(|s| nonempty(s.e_tag.as_deref())).map(ToOwned::to_owned);
    let sealed_version = sealed.and_then(|s| s.version.as_deref()).map(ToOwned::to_owned);
    let head_done = orphan
        || on != Where::S3
        || requested_before
        || sealed_e_tag.is_none()
        || (permanent && sealed_version.is_none());
    let held_version = held.as_ref().and_then(|f| f.version.clone());
    let head = if !head_done {
        None
    } else if let (true, true, None, Some(v)) = (permanent, requested_before, &held_version, &sealed_version) {
        // A resumed request in permanent mode is settled by the sealed version, as the re-check after a delete
        // is ([`recheck`]): a provider that ignored `versionId` wrote a delete marker instead, so the current object
        // is gone while the version is still there. Only once the version is gone is the current object asked for
        // (a newer version written since keeps it present, for the comparison with what was sealed).
        match ctx.storage.head_version(&uri, Some(v)).await? {
            Some(h) => Some(h),
            None => ctx.storage.head_version(&uri, None).await?,
        }
    } else {
        ctx.storage.head_version(&uri, held_version.as_deref()).await?
    };
    let live_again = match &held_version {
        Some(v) => ctx
            .storage
            .head(&uri)
            .await?
            .is_some_and(|now| now.version.as_deref() == Some(v.as_str())),
        None => false,
    };
    let seen_e_tag = head
        .as_ref()
        .and_then(|h| nonempty(h.e_tag.as_deref()))
        .map(ToOwned::to_owned);
    let (e_tag, from) = match (&sealed_e_tag, seen_e_tag) {
        (Some(e), _) => (Some(e.clone()), "bundle"),
        (None, Some(h)) => (Some(h), "head"),
        (None, None) => (None, "none"),
    };
    Ok(Expected {
        uri,
        orphan,
        live_again,
        e_tag,
        from,
        sealed_e_tag,
        version_id: sealed_version.or_else(|| head.as_ref().and_then(|h| h.version.clone())),
        permanent,
        head_done,
        head,
        requested_before,
    })
}

/// Re-checks each object of a batch after its delete request, in order. On S3 with `[storage]
/// s3_recheck_by_listing = true` (default off: a listing does not see a read replica still serving a deleted
/// object, a HEAD does) one listing of the batch's key range answers for the objects at their current version
/// ([`crate::io::store::Storage::list_presence`], allowed to pass twice the batch's size of other keys, at least
/// 1,000: a page); a held orphan's version, and whatever the listing left undecided, are read one at a time, as
/// everything is elsewhere (a stat on a local filesystem costs less than listing its folder).
async fn recheck(
    ctx: &Context,
    on_s3: bool,
    going: &[(&ObjectRef, Expected)],
) -> Vec<Result<Option<crate::io::store::ObjectInfo>>> {
    // Permanent mode (a table object's sealed version, a held orphan's version): the version itself is asked
    // for first. A HEAD of the current object (or a listing) alone would find it gone under a delete marker that
    // a provider ignoring the version wrote, while the sealed version is still there. A table object whose
    // version is gone is then judged by the current object as well: a newer version written since quarantine
    // keeps it DELETE_UNKNOWN, for a human. A held orphan's current object is its delete marker: only the
    // version counts.
    let version_of = |ex: &Expected| ex.version_id.clone().filter(|_| ex.permanent);
    let version_only = |ex: &Expected| ex.permanent && ex.orphan && ex.version_id.is_some();
    let mut listed: Vec<Option<Option<crate::io::store::ObjectInfo>>> = vec![None; going.len()];
    if on_s3 && ctx.storage.options().s3_recheck_by_listing {
        let at: Vec<usize> = (0..going.len()).filter(|i| !version_only(&going[*i].1)).collect();
        if !at.is_empty() {
            let uris: Vec<&str> = at.iter().map(|i| going[*i].1.uri.as_str()).collect();
            // A listing that fails leaves its objects to their HEADs (the HEAD's own error is what counts).
            if let Ok(found) = ctx.storage.list_presence(&uris, (2 * uris.len()).max(1000)).await {
                for (i, f) in at.into_iter().zip(found) {
                    listed[i] = f;
                }
            }
        }
    }
    let concurrency = ctx.storage.options().io_concurrency.get();
    futures::stream::iter(going.iter().zip(listed).map(|((_, ex), listed)| {
        let version = version_of(ex);
        let only = version_only(ex);
        async move {
            if let Some(v) = version.as_deref() {
                match ctx.storage.recheck_head(&ex.uri, Some(v)).await {
                    Ok(None) if !only => {}
                    answer => return answer,
                }
            }
            match listed {
                Some(answer) => Ok(answer),
                None => ctx.storage.recheck_head(&ex.uri, None).await,
            }
        }
    }))
    .buffered(concurrency)
    .collect()
    .await
}

/// Why a delete the provider reported done is not the delete asked for, in permanent mode: the answer must
/// name the very version requested and no delete marker. A provider that ignores `versionId` deletes the key
/// instead (a delete marker on top, the sealed version kept) and says `DeleteMarker` with the marker's version.
/// `None`: the answer is the version's delete (or no version was asked for).
fn other_version_deleted(a: &DeleteAnswer, ex: &Expected) -> Option<String> {
    let asked = ex.version_id.as_deref().filter(|_| ex.permanent)?;
    if a.version_id.as_deref() == Some(asked) && a.delete_marker != Some(true) {
        return None;
    }
    Some(format!(
        "not certain: version {asked} was asked to be deleted, but the provider answered for {}{}: it may have \
         written a delete marker and kept the version",
        a.version_id
            .as_deref()
            .map_or_else(|| "no version".to_owned(), |v| format!("version {v}")),
        if a.delete_marker == Some(true) {
            " with DeleteMarker = true"
        } else {
            ""
        }
    ))
}

/// Whether `table` is the generation at `committed` and was built directly on `judged` (the last entry of its
/// metadata log): then nothing but that commit lies between the generation a purge judged and the one it deletes
/// on.
fn committed_on(table: &crate::table::Table, committed: &str, judged: &str) -> bool {
    let same = |a: &str, b: &str| {
        a == b
            || location::canonical_uri(a)
                .ok()
                .is_some_and(|x| location::canonical_uri(b).ok() == Some(x))
    };
    same(&table.generation().metadata_location, committed)
        && table
            .metadata()
            .metadata_log()
            .last()
            .is_some_and(|m| same(&m.metadata_file, judged))
}

/// Whether `table` still has one of the snapshots `ids` or a quarantine tag (after a commit that removed them).
fn carries_candidate(table: &crate::table::Table, ids: &[i64], tag_prefix: &str) -> bool {
    ids.iter().any(|id| table.metadata().snapshot_by_id(*id).is_some())
        || table
            .refs()
            .keys()
            .any(|n| crate::ops::plan::is_quarantine_tag(n, tag_prefix))
}

/// Sends the deletes of one batch and returns each object's answer in order (`Err`: no answer, so the delete
/// may or may not have taken effect). On S3: one `DeleteObjects` request with each key's expected ETag (and
/// version in permanent mode); single conditional deletes when `[storage] s3_delete_objects = false` or the
/// provider does not implement `DeleteObjects`. Elsewhere: one object_store delete each.
async fn send_deletes(
    ctx: &Context,
    on_s3: bool,
    going: &[(&ObjectRef, Expected)],
) -> Vec<std::result::Result<DeleteAnswer, Unanswered>> {
    if going.is_empty() {
        return Vec::new();
    }
    let concurrency = ctx.storage.options().io_concurrency.get();
    if on_s3 {
        let keys: Vec<DeleteKey> = going
            .iter()
            .map(|(_, ex)| DeleteKey {
                uri: ex.uri.clone(),
                e_tag: ex.e_tag.clone(),
                version_id: ex.version_id.clone().filter(|_| ex.permanent),
            })
            .collect();
        if ctx.storage.options().s3_delete_objects {
            // One DeleteObjects request per 1,000 keys, `io_concurrency` of them in flight: a batch larger than
            // one request is bounded concurrency over requests, all sent inside the batch's registry lock (#24).
            let answered: Vec<Result<Option<BTreeMap<String, DeleteAnswer>>>> = futures::stream::iter(
                keys.chunks(MAX_DELETE_OBJECTS_KEYS)
                    .map(|chunk| ctx.storage.s3_delete_objects(chunk)),
            )
            .buffered(concurrency)
            .collect()
            .await;
            let mut answers: BTreeMap<String, std::result::Result<DeleteAnswer, Unanswered>> = BTreeMap::new();
            let mut not_implemented = Vec::new();
            for (chunk, answer) in keys.chunks(MAX_DELETE_OBJECTS_KEYS).zip(answered) {
                match answer {
                    Ok(Some(a)) => {
                        for k in chunk {
                            let got = a.get(&k.uri).cloned().ok_or_else(|| {
                                Unanswered::Unknown(
                                    "the provider's DeleteObjects answer does not mention this key".to_owned(),
                                )
                            });
                            answers.insert(k.uri.clone(), got);
                        }
                    }
                    // Not implemented by this provider: nothing of this request was deleted; single conditional
                    // deletes follow for its keys.
                    Ok(None) => not_implemented.extend(chunk.iter()),
                    // Failed before it was sent: none of its keys was deleted.
                    Err(e) if e.was_not_sent() => {
                        let why = e.with_causes();
                        for k in chunk {
                            answers.insert(k.uri.clone(), Err(Unanswered::NotSent(why.clone())));
                        }
                    }
                    Err(e) => {
                        let why = format!(
                            "the DeleteObjects request got no usable answer (it may or may not have taken effect): {}",
                            e.with_causes()
                        );
                        for k in chunk {
                            answers.insert(k.uri.clone(), Err(Unanswered::Unknown(why.clone())));
                        }
                    }
                }
            }
            let singles: Vec<(String, std::result::Result<DeleteAnswer, Unanswered>)> =
                futures::stream::iter(not_implemented.into_iter().map(|k| async move {
                    (
                        k.uri.clone(),
                        ctx.storage.s3_delete_one(k).await.map_err(|e| Unanswered::of(&e)),
                    )
                }))
                .buffered(concurrency)
                .collect()
                .await;
            answers.extend(singles);
            return keys
                .iter()
                .map(|k| {
                    answers
                        .remove(&k.uri)
                        .unwrap_or_else(|| Err(Unanswered::Unknown("no answer was recorded for this key".to_owned())))
                })
                .collect();
        }
        return futures::stream::iter(
            keys.iter()
                .map(|k| async move { ctx.storage.s3_delete_one(k).await.map_err(|e| Unanswered::of(&e)) }),
        )
        .buffered(concurrency)
        .collect()
        .await;
    }
    // Elsewhere (a local filesystem, Azure, GCS): single deletes through a bounded pool, the answers in the
    // batch's order. The batch's intents were recorded before this call, so an interruption part-way leaves
    // each object with an intent and no answer, as one request at a time would (see `reconcile`).
    let answer = |deleted: bool, code: Option<&str>| DeleteAnswer {
        method: DeleteMethod::Unconditional,
        deleted,
        http_status: None,
        code: code.map(ToOwned::to_owned),
        message: None,
        delete_marker: None,
        delete_marker_version_id: None,
        version_id: None,
        request_id: None,
    };
    futures::stream::iter(going.iter().map(|(_, ex)| async move {
        match ctx.storage.delete(&ex.uri).await {
            Ok(()) => Ok(answer(true, None)),
            Err(Error::NotFound { .. }) => Ok(answer(false, Some("NoSuchKey"))),
            Err(e) => Err(Unanswered::of(&e)),
        }
    }))
    .buffered(concurrency)
    .collect()
    .await
}

/// Why a delete request has no answer of the provider.
enum Unanswered {
    /// It failed before any byte of it went out ([`Error::NotSent`]: its URI, header, signature or client could not
    /// be made): it cannot have taken effect.
    NotSent(String),
    /// It went out, or may have, and no usable answer came back: it may or may not have taken effect.
    Unknown(String),
}

impl Unanswered {
    /// Only an error the storage layer marked as raised before sending is [`Unanswered::NotSent`]; every other one
    /// may have come after the request left.
    fn of(e: &Error) -> Self {
        if e.was_not_sent() {
            Unanswered::NotSent(e.with_causes())
        } else {
            Unanswered::Unknown(e.with_causes())
        }
    }
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::NotSent(why) => write!(f, "not sent: {why}"),
            Unanswered::Unknown(why) => f.write_str(why),
        }
    }
}

/// A relative path's key for lookups while a bundle's inventory streams by: the first 128 bits of its BLAKE3.
/// Collision-resistant (two paths of a table sharing a key is not a practical event), and a million of them are
/// 16 MB, not the 100 MB of their paths (#24). A key found attaches a sealed entry to an object; what is then
/// done with it (a size compared, a conditional delete) still fails closed on the object itself.
fn path_key(path: &str) -> u128 {
    let mut b = [0_u8; 16];
    b.copy_from_slice(&blake3::hash(path.as_bytes()).as_bytes()[..16]);
    u128::from_le_bytes(b)
}

/// The path keys of `objects`, sorted and deduplicated.
fn path_keys(objects: &[ObjectRef]) -> std::sync::Arc<Vec<u128>> {
    let mut keys: Vec<u128> = objects.iter().map(|o| path_key(&o.path)).collect();
    keys.sort_unstable();
    keys.dedup();
    std::sync::Arc::new(keys)
}

/// What the candidate's verified bundles sealed of its objects, by path key, sorted (an object sealed in two
/// bundles is there twice, in bundle order).
struct SealedByKey<T>(Vec<(u128, T)>);

impl<T> SealedByKey<T> {
    /// Every sealed entry of `path`, in bundle order.
    fn all(&self, path: &str) -> impl Iterator<Item = &T> {
        let k = path_key(path);
        let from = self.0.partition_point(|(x, _)| *x < k);
        self.0[from..].iter().take_while(move |(x, _)| *x == k).map(|(_, t)| t)
    }

    /// The last bundle's entry of `path`.
    fn get(&self, path: &str) -> Option<&T> {
        self.all(path).last()
    }
}

/// Reads the bundle `uri` verified (its envelope under `trust`, every line of its inventory digested and the root
/// recomputed, its metadata copies), taking from the entry of each of the candidate's objects (`wanted`, sorted
/// path keys relative to the table location) what `take` needs, as the member streams by. Those entries are not
/// kept (#24: a million full entries were most of a purge's memory); the metadata entries with a copy are, with
/// the paths of the copies that are intact. What was taken is returned only when the bundle verified.
async fn read_bundle_taking<T: Send + 'static>(
    storage: &crate::io::store::Storage,
    uri: &str,
    trust: &TrustStore,
    wanted: &std::sync::Arc<Vec<u128>>,
    take: fn(&crate::bundle::InventoryEntry) -> T,
    delete_root: Option<&str>,
) -> Result<(
    crate::bundle::BundlePredicate,
    std::collections::BTreeSet<String>,
    crate::bundle::CanonicalDigests,
    Vec<(u128, T)>,
)> {
    let sink = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    // Objects to delete that the bundle sealed at another URI than the one the delete would go to: (count, first).
    let elsewhere = std::sync::Arc::new(std::sync::Mutex::new((0_usize, None::<(String, String)>)));
    let (wanted, bundle_sink, bundle_uri) = (wanted.clone(), sink.clone(), uri.to_owned());
    let (bundle_elsewhere, delete_root_owned) = (elsewhere.clone(), delete_root.map(str::to_owned));
    let keep = move |pred: &crate::bundle::BundlePredicate| {
        let loc = crate::model::location::TableLocation::new(&pred.table_location, String::new(), &bundle_uri)?;
        let keep = move |e: &mut crate::bundle::InventoryEntry| {
            if let Ok(rel) = loc.relative(&e.path) {
                let k = path_key(&rel);
                if wanted.binary_search(&k).is_ok() {
                    if let Some(root) = &delete_root_owned {
                        let target = location::join(root, &rel);
                        if target != e.uri
                            && let Ok(mut x) = bundle_elsewhere.lock()
                        {
                            x.0 += 1;
                            x.1.get_or_insert((e.uri.clone(), target));
                        }
                    }
                    if let Ok(mut sink) = bundle_sink.lock() {
                        sink.push((k, take(e)));
                    }
                }
            }
            e.layer.is_metadata() && e.copy.is_some()
        };
        Ok(Some(Box::new(keep) as crate::evidence::inventory::Keep))
    };
    let (pred, copies, digests) = crate::bundle::verified_predicate_keeping(storage, uri, trust, keep).await?;
    let (n, first) = std::mem::take(
        &mut *elsewhere
            .lock()
            .map_err(|_| Error::Internal(format!("the reader of bundle {uri}'s inventory panicked")))?,
    );
    if let Some((sealed, target)) = first {
        return Err(Error::invalid(
            uri,
            format!(
                "{n} object(s) this purge would delete were sealed at another place (first: sealed as {sealed}, the \
                 delete would go to {target}): the table root this run reads ({}) is not the one the candidate was \
                 sealed and drilled at (another --table-root or catalog entry?); nothing is deleted",
                delete_root.unwrap_or_default()
            ),
        ));
    }
    let taken = std::mem::take(
        &mut *sink
            .lock()
            .map_err(|_| Error::Internal(format!("the reader of bundle {uri}'s inventory panicked")))?,
    );
    Ok((pred, copies, digests, taken))
}

/// What the candidate's bundles sealed of `objects` (`take` of each entry), every bundle verified; a bundle that
/// does not verify is an error.
async fn sealed_inventories<T: Send + 'static>(
    ctx: &Context,
    rec: &CandidateRecord,
    objects: &[ObjectRef],
    trust: &TrustStore,
    take: fn(&crate::bundle::InventoryEntry) -> T,
    delete_root: Option<&str>,
) -> Result<SealedByKey<T>> {
    let wanted = path_keys(objects);
    let mut out = Vec::new();
    for (uri, recorded_root, _) in bundles_of(rec) {
        let (_, _, digests, mut taken) =
            read_bundle_taking(&ctx.storage, &uri, trust, &wanted, take, delete_root).await?;
        // Read again after acceptance (a resume, an undelete): still the bundle the quarantine recorded, not another
        // signed bundle put in its place.
        if digests.root != recorded_root {
            return Err(Error::corrupt(
                &uri,
                format!(
                    "its inventory's root is {}, but the quarantine of {} recorded {recorded_root}: not the bundle \
                     that was drilled; nothing is deleted through it",
                    digests.root, rec.candidate_id
                ),
            ));
        }
        out.append(&mut taken);
    }
    // Stable: an object sealed in two bundles keeps them in bundle order.
    out.sort_by_key(|(k, _)| *k);
    Ok(SealedByKey(out))
}

/// What a delete is conditional on: the ETag and version an object had when it was sealed.
struct SealedObject {
    e_tag: Option<Box<str>>,
    version: Option<Box<str>>,
}

impl SealedObject {
    fn of(e: &crate::bundle::InventoryEntry) -> Self {
        Self {
            e_tag: e.e_tag.as_deref().map(Box::from),
            version: e.version.as_deref().map(Box::from),
        }
    }
}

fn receipt(
    phase: &str,
    o: &ObjectRef,
    ex: &Expected,
    answer: Option<&DeleteAnswer>,
    result: &str,
    recheck: Option<String>,
) -> serde_json::Value {
    serde_json::to_value(Receipt {
        phase,
        key: o.path.clone(),
        layer: o.layer,
        expected_size: o.size,
        version_id: ex.version_id.clone(),
        e_tag: ex.e_tag.clone(),
        expected_from: ex.from,
        permanent: ex.permanent,
        requested_at: None,
        confirmed_at: None,
        method: answer.map(|a| a.method),
        provider_result: result.to_owned(),
        // Only what the provider said: absent when it said nothing (object_store deletes, local files).
        delete_marker: answer.and_then(|a| a.delete_marker),
        delete_marker_version_id: answer.and_then(|a| a.delete_marker_version_id.clone()),
        provider: answer.cloned(),
        recheck,
    })
    .unwrap_or_default()
}

/// Settles the candidate's state from its objects and writes the signed summary.
#[allow(clippy::too_many_arguments)]
async fn finish(
    ctx: &Context,
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    (key, trust): (&SigningKey, Option<&TrustStore>),
    dir: &str,
    halted: Vec<String>,
    retention: Option<crate::govern::policy::EvidenceRetention>,
    chain: Option<crate::ops::receipts::Chain>,
) -> Result<Outcome> {
    // Only the run holding the claim settles the candidate: a run taken over (a batch halted on it, or it was
    // silent) leaves the states, the summary and the retirement records to the run that took it.
    still_claimed(
        reg,
        candidate_id,
        run_id,
        "settling the candidate's state and signing its summary",
    )
    .await?;
    let mut rec = reg.candidate(candidate_id).await?;
    // What the summary needs of the record; the rest goes (#24: nothing of a million objects is held twice).
    let mut verified = std::mem::take(&mut rec.objects);
    let total = verified.len();
    let rec_state = rec.state;
    let inventory_root = rec.candidate["inventory_root"].clone();
    let rebases = rec.quarantine.as_ref().and_then(|q| q.get("rebases")).cloned();
    // Every drill report a purge of the candidate accepted, its acceptance's and each resume's (the registry's
    // record of them; the summary signs it).
    let accepted_evidence = rec
        .quarantine
        .as_ref()
        .and_then(|q| q.get("accepted_evidence"))
        .cloned();
    drop(rec);
    // One pass over the states as they stream from the registry (a scan per object made `finish` quadratic in the
    // candidate's size, and a million state rows held at once were ~100 MB, #24); the inventory, sorted by path,
    // is narrowed to what was verified in place. The paths of the other states are kept for the output.
    verified.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    let mut is_verified = vec![false; verified.len()];
    let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    reg.for_each_object_state(candidate_id, |o| {
        if o.state == State::Verified
            && let Ok(i) = verified.binary_search_by(|v| v.path.as_str().cmp(o.path.as_str()))
        {
            is_verified[i] = true;
        } else {
            by.entry(o.state.to_string()).or_default().push(o.path);
        }
    })
    .await?;
    {
        let mut flags = is_verified.into_iter();
        verified.retain(|_| flags.next().unwrap_or(false));
    }
    let unknown = by.get("DELETE_UNKNOWN").map_or(0, Vec::len);
    let all_verified = verified.len() == total;
    // Objects neither deleted nor uncertain, with no halt named: the candidate went to PROTECTED (a lease or hold
    // that covers it) before this run had anything left to delete. The run halted on it: it is no
    // DELETE_UNKNOWN (nothing is uncertain) and no VERIFIED.
    let mut halted = halted;
    if halted.is_empty() && !all_verified && unknown == 0 {
        let states: Vec<String> = by.iter().map(|(s, p)| format!("{} {s}", p.len())).collect();
        halted.push(format!(
            "candidate {candidate_id} is {rec_state}: {} of its {total} objects were not deleted and none is \
             uncertain ({})",
            total - verified.len(),
            states.join(", ")
        ));
    }
    // Every object gone, but the candidate was protected meanwhile (a hold came while its deletes were in flight,
    // and `reconcile` found each of them taken effect): the deletes stand, and no summary signs them as a purge.
    if halted.is_empty() && all_verified && rec_state == State::Protected {
        halted.push(format!(
            "candidate {candidate_id} is PROTECTED: all {total} of its objects were deleted (VERIFIED) before its \
             protection could stop them; nothing more is deleted and no purge summary is signed"
        ));
    }
    let now = ctx.now();
    let target = if all_verified {
        Some(State::Verified)
    } else if unknown > 0 {
        Some(State::DeleteUnknown)
    } else {
        None
    };
    if let Some(t) = target {
        let mut cur = rec_state;
        for step in [State::Deleted, t] {
            if cur != step && cur.can_move_to(step) {
                // The claim is checked in the move's own transaction.
                if let Err(holder) = reg
                    .candidate_move_claimed(candidate_id, run_id, step, "purge", now)
                    .await?
                {
                    return Err(taken_over(
                        candidate_id,
                        run_id,
                        holder.as_ref(),
                        &format!("moving it to {step}"),
                    ));
                }
                cur = step;
            }
        }
    }
    still_claimed(reg, candidate_id, run_id, "sealing its receipts").await?;
    // Every receipt recorded so far (by this run, `reconcile` or an earlier run) sealed before the summary: the
    // purge hands over the chain it sealed every batch into (opened, and so completed, when it began, and it
    // holds the candidate's claim); anyone else opens it, which seals what is outstanding.
    let chain = match chain {
        Some(c) => c,
        None => crate::ops::receipts::Chain::open(&ctx.storage, reg, candidate_id, dir, key, retention, now).await?,
    };
    let receipts = reg.receipt_count(candidate_id).await?;
    let mut summary_uri = None;
    if halted.is_empty() {
        let root = crate::govern::closure::candidate_root(&verified);
        /// The paths of `0`, serialized as a list without copying them.
        struct Paths<'a>(&'a [ObjectRef]);
        impl serde::Serialize for Paths<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|o| o.path.as_str()))
            }
        }
        // The summary's predicate, its keys in sorted order (the payload's are), written without a JSON value
        // of a million paths (#24).
        #[derive(serde::Serialize)]
        struct Summary<'a> {
            at: String,
            candidate_id: &'a str,
            delete_unknown: &'a [String],
            deleted: Paths<'a>,
            deleted_root: &'a str,
            equals_inventory: bool,
            /// The drill reports the purge accepted (`uri`, `sha256`, `on`: `acceptance` or `resume`, `run_id`,
            /// `accepted_at`), in the order they were accepted.
            #[serde(skip_serializing_if = "Option::is_none")]
            evidence: Option<serde_json::Value>,
            evidence_retention: serde_json::Value,
            inventory_root: &'a serde_json::Value,
            kind: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            rebases: Option<serde_json::Value>,
            receipt_batches: u64,
            receipts: u64,
            receipts_head: Option<&'a str>,
        }
        let subject = vec![Subject {
            name: format!("lakedrill-purge:{candidate_id}"),
            digest: BTreeMap::from([
                ("sha256".to_owned(), evidence::sha256_hex(root.as_bytes())),
                ("blake3".to_owned(), root.clone()),
            ]),
        }];
        // Each rebase onto a later generation (from/to stamp, what was released to PROTECTED and why).
        let summary = Summary {
            at: now.to_rfc3339(),
            candidate_id,
            delete_unknown: by.get("DELETE_UNKNOWN").map_or(&[], Vec::as_slice),
            deleted: Paths(&verified),
            deleted_root: &root,
            equals_inventory: all_verified,
            evidence: accepted_evidence,
            evidence_retention: serde_json::json!(retention.map(crate::ops::evidence_lock::claim)),
            inventory_root: &inventory_root,
            kind: "summary",
            rebases,
            receipt_batches: chain.batches(),
            receipts,
            receipts_head: chain.head(),
        };
        let uri = location::join(dir, &format!("summary-{receipts}.dsse.json"));
        // The summary is named by the receipt count: when it exists, no receipt was added since it was
        // signed (a reconcile with nothing to settle), so it already states this outcome.
        if ctx.storage.head(&uri).await?.is_none() {
            let envelope = evidence::sign_statement_serialized(&subject, RECEIPTS_PREDICATE_TYPE, &summary, key)
                .map_err(|e| Error::Internal(format!("the purge summary: {e}")))?;
            still_claimed(reg, candidate_id, run_id, "writing the signed purge summary").await?;
            crate::ops::evidence_lock::put(&ctx.storage, &uri, Bytes::from(envelope), retention, now).await?;
        }
        // The newest summary of the candidate, anchored in the registry (#23 point 4): `audit verify` of the
        // receipts folder then finds a removed or replaced newest summary.
        let summaries = ctx
            .storage
            .list(dir)
            .await?
            .into_iter()
            .filter(|o| location::file_name(&o.uri).starts_with("summary-"))
            .count();
        let head = evidence::sha256_hex(&ctx.storage.get(&uri).await?.bytes);
        still_claimed(reg, candidate_id, run_id, "anchoring the purge summary").await?;
        reg.chain_anchor(dir, &head, i64::try_from(summaries).unwrap_or(i64::MAX), now)
            .await?;
        summary_uri = Some(uri);
    }
    still_claimed(reg, candidate_id, run_id, "writing the bundles' retirement records").await?;
    retire_bundles(ctx, reg, candidate_id, key, trust, summary_uri.as_deref(), retention).await?;
    let status = if !halted.is_empty() {
        "HALTED"
    } else if all_verified {
        "VERIFIED"
    } else {
        "DELETE_UNKNOWN"
    };
    let mut human = format!(
        "{status}: {candidate_id}: {} of {} objects deleted and verified",
        verified.len(),
        total
    );
    // The output lists every object by state: the verified ones' paths are moved there, not copied.
    if !verified.is_empty() {
        let listed = by.entry(State::Verified.to_string()).or_default();
        listed.extend(verified.into_iter().map(|o| o.path));
        listed.sort_unstable();
    }
    if unknown > 0 {
        human.push_str(&format!(
            ", {unknown} DELETE_UNKNOWN (run `lakedrill reconcile {candidate_id}`)"
        ));
    }
    human.push('\n');
    for h in &halted {
        human.push_str(&format!("  halted: {h}\n"));
    }
    if let Some(s) = &summary_uri {
        human.push_str(&format!("signed summary {s}\n"));
    }
    let mut outcome = Outcome::new(
        if status == "VERIFIED" {
            Verdict::Ok
        } else {
            Verdict::Findings
        },
        &PurgeReport {
            status: status.into(),
            candidate_id: candidate_id.into(),
            reasons: halted,
            objects: BTreeMap::new(),
            summary: summary_uri,
            gates: vec![],
            requests: Some(ctx.storage.request_counts()),
            registry_transactions: Some(reg.write_transactions()),
        },
        human,
    )?;
    // `objects` goes into the document by moving each path (a million paths serialized into a `Value` were a
    // second copy of them, #24); the same JSON as serializing the map.
    outcome.json["objects"] = serde_json::Value::Object(
        by.into_iter()
            .map(|(state, paths)| {
                (
                    state,
                    serde_json::Value::Array(paths.into_iter().map(serde_json::Value::String).collect()),
                )
            })
            .collect(),
    );
    Ok(outcome)
}

/// `lakedrill reconcile CANDIDATE`: settles every `DELETE_UNKNOWN` object by re-checking it, retrying the
/// delete once where the object is still there, and reporting what stays uncertain for a human. Refused (exit 1)
/// before any of that when the registry row is not backed by the purge's signed inventory archive and intent
/// receipts (see `reconcile_problems`).
///
/// # Errors
/// Registry and storage errors.
pub async fn reconcile(
    ctx: &Context,
    source: &TableSource,
    candidate_id: &str,
    key: &Path,
    trust: Option<&Path>,
    receipts: &str,
    policy: &Path,
) -> Result<Outcome> {
    let policy = crate::govern::policy::load(policy)?;
    let key_path = key;
    let key = crate::evidence::keys::load_signing_key(key)?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let rec = reg.candidate(candidate_id).await?;
    // An orphan candidate's retries go where its bundle says each file is held: only a verified bundle says so.
    let trust = match trust {
        Some(t) => {
            let t = TrustStore::load_dir(t)?;
            t.require_role(
                key_path,
                &key,
                crate::evidence::keys::Role::Deleter,
                "receipts, inventory archives, purge summaries or retirement records",
            )?;
            Some(t)
        }
        None if is_orphans(&rec) => {
            return Err(Error::invalid(
                candidate_id,
                "an orphan candidate's retries go where its bundles hold each file, which only a verified bundle \
                 says: give the trust store (--trust DIR)",
            ));
        }
        None => None,
    };
    let table = crate::ops::plan::bound_table(ctx, source, &policy).await?;
    if table.metadata().uuid().to_string() != rec.table_uuid {
        return Err(Error::invalid(candidate_id, "the candidate belongs to another table"));
    }
    // Not while a quarantine or purge of the candidate runs (it would settle objects under that run's feet).
    let run = match crate::ops::binding::claim_run(&reg, candidate_id, ctx.now(), "reconcile").await? {
        Ok(run) => run,
        Err(why) => return reconcile_refused(candidate_id, vec![why]),
    };
    // The claim is renewed for as long as the reconcile holds it (its re-checks and retries, the chain it seals).
    let claimed = reconcile_claimed(
        ctx,
        &reg,
        &rec,
        &table,
        &policy,
        (key_path, &key),
        trust.as_ref(),
        receipts,
        &run.run_id,
    );
    let out = crate::ops::binding::with_heartbeat(ctx, &reg, candidate_id, &run.run_id, Box::pin(claimed)).await;
    let released = reg.purge_release(candidate_id, &run.run_id, ctx.now()).await;
    let out = out?;
    released?;
    Ok(out)
}

/// `reconcile`'s refusal (exit 1): nothing re-checked, retried or recorded, with the reasons.
fn reconcile_refused(candidate_id: &str, reasons: Vec<String>) -> Result<Outcome> {
    let mut human = format!("REFUSED: {candidate_id} is not reconciled\n");
    for r in &reasons {
        human.push_str(&format!("  - {r}\n"));
    }
    Outcome::new(
        Verdict::Findings,
        &PurgeReport {
            status: "REFUSED".into(),
            candidate_id: candidate_id.to_owned(),
            reasons,
            objects: BTreeMap::new(),
            summary: None,
            gates: vec![],
            requests: None,
            registry_transactions: None,
        },
        human,
    )
}

/// Why `reconcile` may not settle the candidate's `DELETE_UNKNOWN` objects from its registry row. A retry is a
/// delete, and the row can be edited by anyone who can write the database, so the row is held to what the purge
/// signed before its first delete, as a resumed purge is ([`resume_problems`]):
/// - the candidate is in a purge (`DELETE_APPROVED`, `DELETED`, `DELETE_UNKNOWN`), or `PROTECTED` during one
///   (its retries are then withheld by the batch check: re-checks only); a `PROTECTED` candidate with no
///   `DELETE_UNKNOWN` object (one `undelete` brought back) has nothing to settle, and a summary signed for it
///   would call objects deleted that are back;
/// - its signed inventory archive (`<receipts>/<candidate>/inventory.dsse.json`) exists, verifies under the run's
///   key or a deleter key of `trust`, names the candidate, and holds every object of the row with its size;
/// - every `DELETE_UNKNOWN` object has an intent receipt (`requested`, newest for it) for its size: a delete that
///   was never requested is not uncertain, so a row saying it is was changed.
///
/// A candidate with no `DELETE_UNKNOWN` object in any other state has nothing to retry and passes (its summary
/// is written again, as before).
///
/// # Errors
/// Storage errors reading the archive; an archive whose candidate cannot be parsed.
async fn reconcile_problems(
    ctx: &Context,
    rec: &CandidateRecord,
    states: &[crate::registry::ObjectState],
    prior: &[crate::registry::ReceiptRow],
    receipts: &str,
    trust: Option<&TrustStore>,
    (key_path, key): (&Path, &SigningKey),
) -> Result<Vec<String>> {
    let by_path: BTreeMap<&str, &ObjectRef> = rec.objects.iter().map(|o| (o.path.as_str(), o)).collect();
    let unknown: Vec<&ObjectRef> = states
        .iter()
        .filter(|s| s.state == State::DeleteUnknown)
        .filter_map(|s| by_path.get(s.path.as_str()).copied())
        .collect();
    let id = &rec.candidate_id;
    if unknown.is_empty() {
        if rec.state == State::Protected {
            return Ok(vec![format!(
                "{id} is PROTECTED and none of its objects is DELETE_UNKNOWN: there is nothing to reconcile (a \
                 candidate `undelete` brought back is PROTECTED, and a purge summary signed for it would call its \
                 objects deleted)"
            )]);
        }
        return Ok(Vec::new());
    }
    if !matches!(
        rec.state,
        State::DeleteApproved | State::Deleted | State::DeleteUnknown | State::Protected
    ) {
        return Ok(vec![format!(
            "the registry says {} object(s) of {id} are DELETE_UNKNOWN, but the candidate is {}: no purge of it is \
             under way, so no delete of it is uncertain (the registry was changed); nothing is retried",
            unknown.len(),
            rec.state
        )]);
    }
    let uri = archive_uri(receipts, id)?;
    let Some(f) = ctx.storage.get_opt(&uri).await? else {
        return Ok(vec![format!(
            "{id} has {} DELETE_UNKNOWN object(s) but its signed inventory archive {uri} does not exist: the purge \
             that sent those deletes wrote it before its first (give the same --receipts as that purge); nothing \
             is retried from the registry row alone",
            unknown.len()
        )]);
    };
    let keys = archive_keys(&uri, trust, key_path, key)?;
    let (mut problems, _) = archived_problems(rec, &uri, f.bytes, &keys)?;
    if problems.iter().any(|p| p.contains("does not verify")) && trust.is_none() {
        problems.push(
            "the archive is verified under the reconcile's --key: give the purge's key, or the trust store whose \
             deleter keys signed it (--trust DIR)"
                .to_owned(),
        );
    }
    // Each object's newest intent receipt (receipts come in order: a later one replaces an earlier one).
    let intents: BTreeMap<&str, &crate::registry::ReceiptRow> = prior
        .iter()
        .filter(|r| r.receipt["phase"] == "requested")
        .map(|r| (r.path.as_str(), r))
        .collect();
    let unsent: Vec<String> = unknown
        .iter()
        .filter(|o| {
            intents
                .get(o.path.as_str())
                .is_none_or(|r| r.receipt["expected_size"].as_u64() != Some(o.size))
        })
        .map(|o| format!("{} ({} bytes)", o.path, o.size))
        .collect();
    if !unsent.is_empty() {
        let shown: Vec<&str> = unsent.iter().take(10).map(String::as_str).collect();
        problems.push(format!(
            "{} DELETE_UNKNOWN object(s) of {id} have no intent receipt for that size: their delete was never \
             requested, so it is not uncertain (the registry was changed): {}{}",
            unsent.len(),
            shown.join(", "),
            if unsent.len() > shown.len() { ", …" } else { "" }
        ));
    }
    Ok(problems)
}

/// One `DELETE_UNKNOWN` object as `reconcile` re-checked it.
struct Recheck<'a> {
    o: &'a ObjectRef,
    /// The version behind a held orphan's marker, re-checked instead of the current object.
    held_version: Option<String>,
    /// In permanent mode, the table object's sealed version (gone too, or the delete did not take effect).
    table_version: Option<String>,
    /// What the re-check found when it settles the object; `None`: present as the purge's intent saw it, a delete
    /// to retry.
    found: Option<String>,
    /// The retry's request: conditional on the ETag and version of the purge's intent.
    key: DeleteKey,
    /// The object's newest intent receipt (the purge's, or an earlier reconcile's).
    intent: Option<&'a crate::registry::ReceiptRow>,
}

/// The intent receipt a `reconcile` records before it retries `it`'s delete: the object's newest intent (the
/// purge's format, its ETag and version: what the retry is conditional on), requested again at `at` under hold
/// generation `hold_generation`, and marked as a retry by `reconcile`.
fn retry_intent(it: &Recheck<'_>, at: chrono::DateTime<Utc>, hold_generation: i64) -> serde_json::Value {
    let mut req = it.intent.map_or_else(
        || {
            serde_json::json!({
                "phase": "requested",
                "key": it.o.path,
                "layer": it.o.layer,
                "expected_size": it.o.size,
                "e_tag": it.key.e_tag,
                "version_id": it.key.version_id,
                "provider_result": "",
            })
        },
        |r| r.receipt.clone(),
    );
    req["phase"] = serde_json::json!("requested");
    req["requested_at"] = serde_json::json!(at.to_rfc3339());
    req["hold_generation"] = serde_json::json!(hold_generation);
    req["retried_by"] = serde_json::json!("reconcile");
    req
}

/// Whether version `v` of `uri` is still there (`false` without a version to ask for).
async fn version_left(ctx: &Context, uri: &str, v: Option<&str>) -> Result<bool> {
    match v {
        Some(v) => Ok(ctx.storage.head_version(uri, Some(v)).await?.is_some()),
        None => Ok(false),
    }
}

/// [`reconcile`] while the candidate is claimed.
#[allow(clippy::too_many_arguments)]
async fn reconcile_claimed(
    ctx: &Context,
    reg: &Registry,
    rec: &CandidateRecord,
    table: &crate::table::Table,
    policy: &Policy,
    (key_path, key): (&Path, &SigningKey),
    trust: Option<&TrustStore>,
    receipts: &str,
    run_id: &str,
) -> Result<Outcome> {
    let candidate_id = rec.candidate_id.as_str();
    let root = table.location().root_uri().to_owned();
    // Orphans are re-checked (and retried) where their verified bundles hold them: the version behind the marker,
    // or the copy (an edited bundle naming another quarantine root would have retries delete there).
    let held = held_by_path(ctx, rec, trust).await?;
    let target_root = match &held {
        Some((Some(q), _)) => q.clone(),
        _ => root.clone(),
    };
    let confined = ctx.storage.confine(&target_root).await?;
    let objects = &rec.objects;
    let states = reg.object_states(candidate_id).await?;
    let prior = reg.receipts(candidate_id).await?;
    // Nothing is settled from a registry row that the purge's signed archive and its intents do not back.
    let problems = reconcile_problems(ctx, rec, &states, &prior, receipts, trust, (key_path, key)).await?;
    if !problems.is_empty() {
        return reconcile_refused(candidate_id, problems);
    }
    // Re-checks always run; a retried delete only by the pinned build on a table whose stage deletes.
    let digest = crate::ops::binding::digest_binding(ctx, policy)?;
    let binding = crate::ops::binding::policy_binding(reg, &rec.table_uuid, policy).await?;
    // A protected candidate's objects are never deleted again: its unknowns are only re-checked (gone: the delete
    // took effect; present: it did not, and the object is kept with its candidate).
    let protected = rec.state == State::Protected;
    let mut withheld = if protected {
        Some(format!(
            "candidate {candidate_id} is PROTECTED ({}): no delete is retried for it",
            rec.reason
        ))
    } else if !digest.allows_purge() {
        digest.message()
    } else if let Some(why) = binding.refusal() {
        Some(why)
    } else if !reg.rollout_stage(&rec.table_uuid).await?.stage.allows_deletes() {
        Some("the table is in rollout stage report-only".to_owned())
    } else {
        None
    };
    let on_s3 = target_root.starts_with("s3://");
    let permanent = policy.object_versioning() == ObjectVersioning::Permanent;
    let by_path: BTreeMap<&str, &ObjectRef> = objects.iter().map(|o| (o.path.as_str(), o)).collect();
    // A retry is a delete: held to the independent closure check on the table as it is now (a snapshot brought
    // back with `set-current --from-bundle`, or a commit naming one of the files again, makes it live) and to what
    // holds a purge's batch (no hold, lease, DR checkpoint or writer that came since the acceptance covers the
    // candidate, the deleter not stopped), inside the registry's write lock for as long as its requests go out.
    let unknown: Vec<ObjectRef> = states
        .iter()
        .filter(|s| s.state == State::DeleteUnknown)
        .filter_map(|s| by_path.get(s.path.as_str()).map(|o| (*o).clone()))
        .collect();
    let mut kept_back = 0usize;
    if withheld.is_none() && !unknown.is_empty() {
        let input = crate::ops::plan::gather(ctx, table, policy, reg, ctx.now(), None).await?;
        let ids = snapshot_ids_of(rec);
        let unreadable = unreadable_outside(&input, &ids);
        let conflicts = crate::govern::closure::nondeletable_conflicts(&input, &ids, &unknown);
        if !unreadable.is_empty() {
            withheld = Some(format!(
                "the layers of {} snapshot(s) outside the candidate could not be read, so nothing can be shown \
                 unreachable: {}",
                unreadable.len(),
                unreadable.join("; ")
            ));
        } else if !conflicts.is_empty() {
            withheld = Some(format!("independent closure check: {}", conflicts.join("; ")));
        }
    }
    // Each object's newest intent receipt (receipts come in order: a later one replaces an earlier one).
    let intents: BTreeMap<&str, &crate::registry::ReceiptRow> = prior
        .iter()
        .filter(|r| r.receipt["phase"] == "requested")
        .map(|r| (r.path.as_str(), r))
        .collect();
    // 1. Every DELETE_UNKNOWN object is re-checked; one still present as the purge's intent saw it is a delete to
    // retry.
    let mut items: Vec<Recheck<'_>> = Vec::new();
    for s in states.iter().filter(|s| s.state == State::DeleteUnknown) {
        let Some(&o) = by_path.get(s.path.as_str()) else {
            continue;
        };
        let held_file = held.as_ref().and_then(|(_, h)| h.get(&o.path));
        let (uri, held_version) = match held_file {
            Some(f) => (f.uri.clone(), f.version.clone()),
            None => (location::join(&root, &o.path), None),
        };
        // A held orphan whose version is current again was put back: it is live, never deleted here.
        let live_again = match &held_version {
            Some(v) => ctx
                .storage
                .head(&uri)
                .await?
                .is_some_and(|now| now.version.as_deref() == Some(v.as_str())),
            None => false,
        };
        let escape = match confined.escape(&uri).await? {
            Some(t) => Some(format!("{t}, outside the table root {root}")),
            None => confined.through_link(&uri).await?.map(|t| {
                format!("{t} through a symlink inside the table root {root} (the same file under another path)")
            }),
        };
        // The ETag and version the purge's delete was conditional on (its intent receipt): a retry is
        // conditional on the same, so an object changed since quarantine is never deleted here either.
        let intent = intents.get(o.path.as_str()).copied();
        let want_e_tag = intent
            .and_then(|r| r.receipt["e_tag"].as_str())
            .filter(|e| !e.is_empty())
            .map(ToOwned::to_owned);
        let want_version = intent
            .and_then(|r| r.receipt["version_id"].as_str())
            .map(ToOwned::to_owned);
        // Permanent mode asks for the table object's sealed version too: the current object may be gone under a
        // delete marker (a provider that ignored the version) while the version is still there.
        let table_version = want_version.clone().filter(|_| permanent && held_version.is_none());
        let sealed_left = version_left(ctx, &uri, table_version.as_deref()).await?;
        let found = match ctx.storage.head_version(&uri, held_version.as_deref()).await? {
            None if sealed_left => Some(format!(
                "absent at re-check, but version {} is still there (the provider may have written a delete marker \
                 instead of deleting it): not deleted",
                table_version.as_deref().unwrap_or_default()
            )),
            None => Some("absent at re-check".to_owned()),
            Some(_) if live_again => Some(
                "present at re-check and current again at the table location (put back): live, not deleted".to_owned(),
            ),
            Some(_) if escape.is_some() => Some(format!(
                "present at re-check; retry refused: resolves to {} (a symlink)",
                escape.as_deref().unwrap_or_default()
            )),
            Some(i) if i.size != o.size => Some(format!(
                "present at re-check with {} bytes, {} in the inventory: changed since quarantine, not deleted",
                i.size, o.size
            )),
            Some(i)
                if want_e_tag.is_some()
                    && nonempty(i.e_tag.as_deref()).is_some_and(|e| Some(e) != want_e_tag.as_deref()) =>
            {
                Some(format!(
                    "present at re-check with ETag {}, {} when the purge was requested: changed since quarantine, not deleted",
                    i.e_tag.as_deref().unwrap_or_default(),
                    want_e_tag.as_deref().unwrap_or_default()
                ))
            }
            Some(_) => None,
        };
        let key = DeleteKey {
            uri: uri.clone(),
            e_tag: want_e_tag,
            version_id: held_version.clone().or(want_version.filter(|_| permanent)),
        };
        items.push(Recheck {
            o,
            held_version,
            table_version,
            found,
            key,
            intent,
        });
    }
    // 2. The retries' intents, recorded (and sealed into the receipts chain) before any of them is sent, as a purge
    // batch records its own: a reconcile that dies while its retries are out leaves each one as a delete that may
    // have happened. Then 3. the retries, in a second batch whose checks see anything that came since, holding the
    // registry's write lock while they go out.
    let dir = location::join(&location::canonical_uri(receipts)?, candidate_id);
    let retention = policy.evidence_retention();
    let mut batch = None;
    if withheld.is_none() && items.iter().any(|i| i.found.is_none()) {
        let mut chain =
            crate::ops::receipts::Chain::open(&ctx.storage, reg, candidate_id, &dir, key, retention, ctx.now()).await?;
        let mut base = baseline(rec, table.location(), run_id);
        match reg.purge_batch(candidate_id, &mut base, ctx.now()).await? {
            Err(halt) => withheld = Some(halt.join("; ")),
            Ok(mut b) => {
                let at = ctx.now();
                for it in items.iter().filter(|i| i.found.is_none()) {
                    let req = retry_intent(it, at, b.hold_generation);
                    b.receipt(candidate_id, &it.o.path, &req, at);
                }
                let recorded = b.commit().await?;
                seal_batch(ctx, &mut chain, key, &recorded, retention).await?;
                ctx.storage.failpoint_purge_batch(1, true);
                ctx.storage.failpoint_delay(DelayPoint::PurgeIntent).await;
                match reg.purge_batch(candidate_id, &mut base, ctx.now()).await? {
                    Ok(b) => batch = Some(b),
                    // Nothing was sent: each retry's receipt below says it was withheld, and why.
                    Err(halt) => withheld = Some(halt.join("; ")),
                }
            }
        }
    }
    if batch.is_none() {
        // What the re-checks found is recorded only by the run that holds the claim (the batch checks it itself;
        // without one, the transaction that records them checks it again below).
        still_claimed(reg, candidate_id, run_id, "recording what its re-checks found").await?;
    }
    // Without a batch: each object's receipt and its state, recorded together once every re-check is done.
    let mut settled: Vec<(String, serde_json::Value, Vec<State>)> = Vec::new();
    for it in items {
        let o = it.o;
        let uri = it.key.uri.clone();
        let mut how = match it.found {
            Some(found) => found,
            None if withheld.is_some() => {
                kept_back += 1;
                format!(
                    "present at re-check; retry withheld: {}",
                    withheld.as_deref().unwrap_or_default()
                )
            }
            None if on_s3 => match ctx.storage.s3_delete_one(&it.key).await {
                Ok(a) if a.deleted => format!(
                    "present at re-check; delete retried ({:?}, delete marker {:?}, request {})",
                    a.method,
                    a.delete_marker,
                    a.request_id.as_deref().unwrap_or("?")
                ),
                Ok(a) if a.precondition_failed() => {
                    "present at re-check; the retry's ETag condition failed: changed since quarantine, not deleted"
                        .to_owned()
                }
                Ok(a) => format!(
                    "present at re-check; retry refused by the provider: {}",
                    a.code.as_deref().unwrap_or("no code")
                ),
                Err(e) => format!("present at re-check; retry failed: {e}"),
            },
            None => match ctx.storage.delete(&uri).await {
                Ok(()) | Err(Error::NotFound { .. }) => "present at re-check; delete retried".to_owned(),
                Err(e) => format!("present at re-check; retry failed: {e}"),
            },
        };
        let gone = ctx
            .storage
            .head_version(&uri, it.held_version.as_deref())
            .await?
            .is_none()
            && !version_left(ctx, &uri, it.table_version.as_deref()).await?;
        if !gone && protected {
            how.push_str("; kept: its delete did not take effect and it stays PROTECTED with its candidate");
        } else if !gone {
            how.push_str("; still present: needs a human");
        }
        let r = serde_json::json!({"phase": "reconciled", "key": o.path, "how": how, "recheck": if gone { "absent" } else { "present" }, "at": ctx.now().to_rfc3339()});
        if let Some(b) = batch.as_mut() {
            b.receipt(candidate_id, &o.path, &r, ctx.now());
            if gone {
                b.object_transitions(candidate_id, &o.path, &[State::Deleted, State::Verified], ctx.now());
            }
        } else {
            let steps = if protected && !gone {
                vec![State::Protected]
            } else if gone {
                vec![State::Deleted, State::Verified]
            } else {
                Vec::new()
            };
            settled.push((o.path.clone(), r, steps));
        }
    }
    if let Some(b) = batch {
        b.commit().await?;
    } else if !settled.is_empty() {
        // One transaction for every receipt and state, conditional on this run's claim (review R2-6): a crash
        // leaves all of them or none, and a run that took the claim over meanwhile is never written over.
        if let Err(holder) = reg.reconcile_record(candidate_id, run_id, settled, ctx.now()).await? {
            return Err(taken_over(
                candidate_id,
                run_id,
                holder.as_ref(),
                "recording what its re-checks found",
            ));
        }
    }
    let mut out = finish(
        ctx,
        reg,
        candidate_id,
        run_id,
        (key, trust),
        &dir,
        Vec::new(),
        retention,
        None,
    )
    .await?;
    // Why the objects still present were not retried, in the output too (the receipts say it per object).
    if let Some(why) = withheld.filter(|_| kept_back > 0) {
        let line = format!("{kept_back} retried delete(s) withheld: {why}");
        out.human.push_str(&format!("  {line}\n"));
        if let Some(reasons) = out.json["reasons"].as_array_mut() {
            reasons.push(line.into());
        }
    }
    Ok(out)
}

/// `lakedrill deleter stop|start`.
///
/// # Errors
/// Registry errors.
pub async fn switch(ctx: &Context, stop: bool, reason: &str) -> Result<Outcome> {
    let reg = crate::ops::plan::registry(ctx).await?;
    let s = reg.set_deleter_stopped(stop, reason, ctx.now()).await?;
    let human = format!(
        "deleter {}\n",
        if s.stopped {
            "STOPPED: every purge halts before its next batch"
        } else {
            "started"
        }
    );
    Outcome::new(Verdict::Ok, &s, human)
}

/// `lakedrill undelete CANDIDATE --trust DIR`: on a versioned bucket, removes the delete markers a
/// marker-only purge left, and verifies every object brought back against the candidate's bundles
/// (BLAKE3 and size). The candidate becomes `PROTECTED`: reclaiming it again needs a new plan. Only a purge that
/// can delete no more is undone (`VERIFIED` or `PROTECTED`): one in progress is refused (exit 1), naming its state.
///
/// # Errors
/// Non-S3 tables; registry and storage errors. Objects that cannot be brought back are findings (exit 1).
#[allow(clippy::too_many_lines)]
pub async fn undelete(
    ctx: &Context,
    source: &TableSource,
    candidate_id: &str,
    trust: &Path,
    seal: Option<(&Path, &str)>,
) -> Result<Outcome> {
    let trust = TrustStore::load_dir(trust)?;
    let seal = match seal {
        Some((key_path, receipts)) => {
            let key = crate::evidence::keys::load_signing_key(key_path)?;
            trust.require_role(key_path, &key, crate::evidence::keys::Role::Deleter, "receipts")?;
            Some((key, location::join(&location::canonical_uri(receipts)?, candidate_id)))
        }
        None => None,
    };
    let reg = crate::ops::plan::registry(ctx).await?;
    let rec = reg.candidate(candidate_id).await?;
    if is_orphans(&rec) {
        return Err(Error::invalid(
            candidate_id,
            "an orphan candidate's files come back with `lakedrill restore BUNDLE --trust DIR --put-back` while \
             they are held (before their purge); a purge removed them for good",
        ));
    }
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    // Never beside a quarantine, purge, reconcile or release of the candidate: removing delete markers under a purge
    // that is still deleting (or will resume) would leave the registry and its signed summary saying deleted.
    let run = match crate::ops::binding::claim_run(&reg, candidate_id, ctx.now(), "undelete").await? {
        Ok(run) => run,
        Err(why) => return refuse(why),
    };
    let claimed = undelete_claimed(ctx, source, &reg, candidate_id, &run.run_id, &trust, seal.as_ref());
    let out = crate::ops::binding::with_heartbeat(ctx, &reg, candidate_id, &run.run_id, Box::pin(claimed)).await;
    let released = reg.purge_release(candidate_id, &run.run_id, ctx.now()).await;
    let out = out?;
    released?;
    Ok(out)
}

/// The part of [`undelete`] run while the candidate is claimed.
async fn undelete_claimed(
    ctx: &Context,
    source: &TableSource,
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    trust: &TrustStore,
    seal: Option<&(SigningKey, String)>,
) -> Result<Outcome> {
    // Read again under the claim; only what went through the deleter comes back.
    let rec = reg.candidate(candidate_id).await?;
    let through = reg
        .object_states(candidate_id)
        .await?
        .iter()
        .filter(|o| matches!(o.state, State::Deleted | State::Verified | State::DeleteUnknown))
        .count();
    if through == 0 {
        let reason = format!(
            "{candidate_id} is {} and none of its objects went through the deleter: there is nothing to undelete",
            rec.state
        );
        return Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        );
    }
    // Only a purge that can delete no more is undone: a finished one (`VERIFIED`), or one a hold, lease or ref
    // stopped (`PROTECTED`: never purged again, and `reconcile` withholds its retries). Under a purge still in
    // progress (`DELETE_APPROVED`, `DELETED`, `DELETE_UNKNOWN`) a resume or `reconcile` would delete again what was
    // brought back, and the objects' states would still say VERIFIED, so the signed summary would call them
    // deleted.
    if !matches!(rec.state, State::Verified | State::Protected) {
        let next = match rec.state {
            State::DeleteApproved | State::Deleted | State::DeleteUnknown => {
                "its purge is not finished: settle it first (`lakedrill reconcile` for DELETE_UNKNOWN objects, \
                 `lakedrill purge` to resume a stopped run) until it is VERIFIED, then undelete"
            }
            _ => "only a VERIFIED (purged) or PROTECTED candidate is undeleted",
        };
        let reason = format!("{candidate_id} is {}: {next}", rec.state);
        return Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "candidate_id": candidate_id, "state": rec.state.as_str(), "reason": reason}),
            format!("REFUSED: {reason}\n"),
        );
    }
    let table = ctx.table(source).await?;
    let root = table.location().root_uri().to_owned();
    if !root.starts_with("s3://") {
        return Err(Error::invalid(
            candidate_id,
            "undelete needs the table on a versioned S3 bucket (delete markers)",
        ));
    }
    // What each object must be, from the verified bundles of the quarantine.
    let expected: SealedByKey<(String, u64)> =
        sealed_inventories(ctx, &rec, &rec.objects, trust, |e| (e.blake3.clone(), e.size), None).await?;
    // Only while this run still holds the claim are delete markers removed.
    still_claimed(reg, candidate_id, run_id, "removing delete markers").await?;
    let mut results = Vec::new();
    let mut all_ok = true;
    // Each object independently (bounded by the storage's request limit); receipts in inventory order.
    let objects = &rec.objects;
    let (root, expected) = (&root, &expected);
    // Each object's action, whether it was verified back, the check, and whether it may be back (its marker was
    // removed, or the removal's outcome is unknown): one that may be back is never left VERIFIED (deleted) in the
    // registry, whatever went wrong after (review of 2026-12-07, R3-5).
    type Checked = (String, bool, String, bool);
    let checked: Vec<Result<Checked>> = futures::stream::iter(objects.iter().map(|o| async move {
        let uri = location::join(root, &o.path);
        let versions = ctx.storage.s3_versions(&uri).await?;
        let latest = versions.iter().find(|v| v.is_latest);
        let (action, touched) = match latest {
            Some(m) if m.is_delete_marker => match ctx.storage.s3_delete_version(&uri, &m.version_id).await {
                Ok(()) => (format!("delete marker {} removed", m.version_id), true),
                Err(e) => (
                    format!(
                        "removing delete marker {} failed ({}): it may have taken effect",
                        m.version_id,
                        e.with_causes()
                    ),
                    true,
                ),
            },
            Some(_) => ("already present".to_owned(), false),
            None => ("no version left (deleted permanently)".to_owned(), false),
        };
        let checked = async {
            Ok::<_, Error>(match (ctx.storage.head(&uri).await?, expected.get(&o.path)) {
                (None, _) => (false, "absent".to_owned()),
                (Some(_), Some((digest, size))) => {
                    let h = ctx.storage.hash(&uri).await?;
                    if &h.blake3 == digest && h.bytes_read == *size {
                        (true, "matches the bundle".to_owned())
                    } else {
                        (
                            false,
                            format!("differs from the bundle (blake3 {} size {})", h.blake3, h.bytes_read),
                        )
                    }
                }
                (Some(i), None) => (
                    i.size == o.size,
                    format!("not in any bundle; size {} (plan said {})", i.size, o.size),
                ),
            })
        }
        .await;
        match checked {
            Ok((ok, check)) => Ok((action, ok, check, touched)),
            Err(e) if touched => Ok((
                action,
                false,
                format!("could not be checked ({}): kept as possibly back", e.with_causes()),
                true,
            )),
            Err(e) => Err(e),
        }
    }))
    .buffered(ctx.storage.options().io_concurrency.get())
    .collect()
    .await;
    // An object brought back is no longer deleted: VERIFIED becomes PROTECTED per object (also when the candidate
    // is PROTECTED already and its own move below is a no-op), so that no plan takes it for an orphan and the
    // registry does not say deleted of a file that is present.
    let deleted: std::collections::BTreeSet<String> = reg
        .object_states(candidate_id)
        .await?
        .into_iter()
        .filter(|s| s.state == State::Verified)
        .map(|s| s.path)
        .collect();
    still_claimed(reg, candidate_id, run_id, "recording what it brought back").await?;
    // Every object whose marker was removed is recorded, also after another object's error (returned once the
    // rest is recorded): an object back in the bucket must not stay VERIFIED (deleted) in the registry.
    let mut first_error = None;
    let mut any_back = false;
    for (o, c) in objects.iter().zip(checked) {
        let (action, ok, check, touched) = match c {
            Ok(c) => c,
            Err(e) => {
                all_ok = false;
                first_error.get_or_insert(e);
                continue;
            }
        };
        all_ok &= ok;
        // Back, or possibly back: the object (and its candidate) is PROTECTED, never left VERIFIED.
        let back = ok || touched;
        any_back |= back;
        let r = serde_json::json!({"phase": "undeleted", "key": o.path, "action": action, "verified": ok, "check": check, "at": ctx.now().to_rfc3339()});
        reg.receipt_add(candidate_id, &o.path, &r, ctx.now()).await?;
        if back && deleted.contains(&o.path) {
            reg.object_transition(candidate_id, &o.path, State::Protected, ctx.now())
                .await?;
        }
        results.push(r);
    }
    // The undelete's receipts, sealed as the next batch of the candidate's signed receipts chain (unlocked:
    // undelete reads no policy, and a batch carries its own retention claim).
    if let Some((key, dir)) = seal {
        crate::ops::receipts::Chain::open(&ctx.storage, reg, candidate_id, dir, key, None, ctx.now()).await?;
    }
    // The candidate becomes PROTECTED as soon as one object came back, not only when all did: a plan skips a
    // VERIFIED candidate whole (its files are deleted), so the objects an INCOMPLETE undelete brought back would
    // look unreferenced and be proposed as orphans. Its objects still gone stay VERIFIED.
    let why = if all_ok {
        "undeleted from delete markers and verified against the bundles; re-plan before reclaiming"
    } else {
        "partly undeleted (INCOMPLETE): the objects brought back and verified are PROTECTED, the others stay as \
         recorded; re-plan before reclaiming"
    };
    if any_back {
        crate::ops::binding::protect_claimed(reg, candidate_id, run_id, why, ctx.now(), "moving it to PROTECTED")
            .await?;
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let mut human = format!(
        "{}: {} objects of {candidate_id}\n",
        if all_ok { "UNDELETED" } else { "INCOMPLETE" },
        results.len()
    );
    for r in &results {
        human.push_str(&format!(
            "  {}  {}  {}\n",
            r["key"].as_str().unwrap_or_default(),
            r["action"].as_str().unwrap_or_default(),
            r["check"].as_str().unwrap_or_default()
        ));
    }
    Outcome::new(
        if all_ok { Verdict::Ok } else { Verdict::Findings },
        &serde_json::json!({"status": if all_ok { "UNDELETED" } else { "INCOMPLETE" }, "candidate_id": candidate_id, "objects": results}),
        human,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::keys::PublicKey;

    fn object(path: &str, size: u64) -> ObjectRef {
        ObjectRef {
            path: path.to_owned(),
            layer: Layer::Data,
            size,
        }
    }

    /// An inventory archive of candidate `c-1` (snapshots 1 and 2, `objects`, one bundle) signed by a new key, and
    /// the registry row as the acceptance left it.
    fn archived(objects: &[ObjectRef]) -> (crate::evidence::VerifiedPayload, CandidateRecord) {
        let key = SigningKey::generate();
        let quarantine = serde_json::json!({"mode": "bundle", "bundles": [{"uri": "file:///b/1", "root": "r"}]});
        let candidate =
            crate::govern::closure::with_inventory(&serde_json::json!({"kind": "snapshots"}), &[1, 2], objects);
        let subject = vec![Subject {
            name: "lakedrill-candidate:c-1".to_owned(),
            digest: BTreeMap::from([
                ("blake3".to_owned(), crate::govern::closure::candidate_root(objects)),
                ("sha256".to_owned(), "0".repeat(64)),
            ]),
        }];
        let predicate = serde_json::json!({"candidate": candidate, "quarantine": quarantine, "kind": "inventory"});
        let envelope =
            evidence::sign_statement_serialized(&subject, RECEIPTS_PREDICATE_TYPE, &predicate, &key).unwrap();
        let trust = TrustStore::from_keys(vec![PublicKey::new("k", "k.pub", key.verifying_key())]).unwrap();
        let verified = evidence::verify_payload(envelope, &trust).unwrap();
        let mut row = candidate.clone();
        row.as_object_mut().unwrap().remove("objects");
        let rec = CandidateRecord {
            candidate_id: "c-1".to_owned(),
            table_uuid: "u".to_owned(),
            state: State::DeleteApproved,
            candidate: row,
            objects: objects.to_vec(),
            stamp: serde_json::from_value(serde_json::json!({
                "metadata_location": "m1", "metadata_blake3": "b1", "protected_ref_root": "r1",
                "lease_watermark": 0, "hold_generation": 0
            }))
            .unwrap(),
            quarantine: Some(quarantine),
            reason: String::new(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
        };
        (verified, rec)
    }

    /// `rec` as a rebase after the acceptance would leave it: snapshots `ids`, inventory `objects`, and the rebase
    /// record naming both (all in the same registry, so anyone who edits the row can write them).
    fn rebased(rec: &mut CandidateRecord, ids: &[i64], objects: Vec<ObjectRef>) {
        let root = crate::govern::closure::candidate_root(&objects);
        rec.candidate["snapshot_ids"] = serde_json::json!(ids);
        rec.candidate["inventory_root"] = serde_json::json!(root);
        rec.objects = objects;
        rec.quarantine.as_mut().unwrap()["rebases"] = serde_json::json!([
            {"after_acceptance": true, "snapshot_ids": ids, "inventory_root": root, "at": "2026-12-07T00:00:00Z"}
        ]);
    }

    // Review M1: `execute` reads the row again under its claim and held it to the archive with `hold_row_to_archive`
    // only. Once the row stood on a rebase recorded after the acceptance, that compared the row's objects with the
    // row's own rebase record, not with the archive: an object added to the row (its root and a rebase record
    // recomputed) between the resume's first checks and `execute` reached the delete step. It is now refused unless
    // the archive signed it with that size; an honest rebase (objects taken out) still stands.
    #[test]
    fn a_row_rebased_after_its_acceptance_may_only_hold_objects_the_archive_signed() {
        let (a, b) = (object("data/a.parquet", 10), object("data/b.parquet", 20));
        let (verified, mut rec) = archived(&[a.clone(), b.clone()]);
        assert!(!hold_row_to_archive(&rec, "file:///r/inventory.dsse.json", &verified).unwrap());

        rebased(&mut rec, &[1], vec![a.clone()]);
        assert!(
            hold_row_to_archive(&rec, "file:///r/inventory.dsse.json", &verified).unwrap(),
            "an honest rebase that took an object out stands"
        );

        for (added, shown) in [
            (
                object("data/x.parquet", 30),
                "data/x.parquet (30 bytes) in the registry but absent",
            ),
            (
                object("data/b.parquet", 21),
                "data/b.parquet (21 bytes) in the registry but 20 bytes",
            ),
        ] {
            rebased(&mut rec, &[1], vec![a.clone(), added]);
            let e = hold_row_to_archive(&rec, "file:///r/inventory.dsse.json", &verified)
                .expect_err("an object the archive did not sign is refused")
                .to_string();
            assert!(
                e.contains("c-1") && e.contains(shown) && e.contains("file:///r/inventory.dsse.json"),
                "names the candidate, the object, both sizes and the archive: {e}"
            );
            assert!(e.contains("cannot decide"), "exit 2: {e}");
        }
    }
}
