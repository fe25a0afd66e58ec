//! Offline re-verification of signed drill reports, alone or as a plan's whole hash chain.
//!
//! `audit verify` needs nothing but the report files and a trust store of public keys: it checks
//! the signature under a trusted key, the payload type and statement structure, that the summary
//! agrees with the per-item results and the sample, and that the subjects name the results'
//! bundles. With `--chain` it checks every report of the plan's folder: each one's
//! `previous_report` must be the SHA-256 of the envelope before it (no gap, no reorder, no fork).
//!
//! With a `roles.toml` in the trust folder ([`crate::evidence::keys::Role`]) each kind verifies only under the
//! keys of the role that signs it: drill reports (restore, cold-backup, shard, merged) under `drill`, bundles and
//! backups under `seal`, receipts, purge summaries, inventory archives and retirement records under `deleter` —
//! the same keys the commands that act on them accept; fault-matrix reports (drill evidence too) under `drill`,
//! and governance decisions under `governance`, the keys `decision apply` accepts.

use serde::Serialize;

use crate::bundle::RestoreStatus;
use crate::error::Result;
use crate::evidence;
use crate::evidence::keys::{Role, TrustStore};
use crate::evidence::predicate::{DrillPredicate, PREDICATE_TYPE as DRILL_PREDICATE_TYPE};
use crate::io::store::Storage;
use crate::model::location;

/// One failed check.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AuditFinding {
    /// Stable name of the check.
    pub check: String,
    /// The report concerned.
    pub report: String,
    /// What failed.
    pub detail: String,
}

/// The findings as one reason: `CHECK: detail` each, joined by `; `.
#[must_use]
pub fn findings_reason(findings: &[AuditFinding]) -> String {
    findings
        .iter()
        .map(|f| format!("{}: {}", f.check, f.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The result of an audit.
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// `VERIFIED` or `FAILED`.
    pub status: String,
    /// Reports checked.
    pub reports_checked: usize,
    /// Key that signed the report(s).
    pub keyids: Vec<String>,
    /// The gate recorded in the (last) report.
    pub gate: Option<String>,
    /// Failed checks.
    pub findings: Vec<AuditFinding>,
    /// The Object Lock state of every file checked on S3 (mode and retain-until date as the provider reports
    /// them); empty off S3, and present then too (scripts iterate it).
    pub locks: Vec<crate::ops::evidence_lock::FileLock>,
    /// With `--chain`: the chain folder and the SHA-256 of its newest report (what an anchor is compared with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_folder: Option<String>,
    /// With `--chain`: SHA-256 of the newest report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_head: Option<String>,
    /// With `--chain`: where the head was compared from (`the registry`, `--expect-head`), or absent when no
    /// anchor was available (the chain's end cannot be checked then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchored: Option<String>,
}

/// Reads `uri`'s Object Lock (on S3) into `locks` and adds an `EVIDENCE_NOT_LOCKED` finding when the file
/// should be locked and is not (see [`crate::ops::evidence_lock::shortfall`]). The file was written at the time
/// its statement names (`written_at`), or else as the store dates it (`last_modified`,
/// [`crate::ops::evidence_lock::written_at`]).
async fn check_lock(
    storage: &Storage,
    uri: &str,
    claim: Option<&crate::evidence::predicate::RetentionClaim>,
    (written_at, last_modified): (Option<&str>, chrono::DateTime<chrono::Utc>),
    locks: &mut Vec<crate::ops::evidence_lock::FileLock>,
    findings: &mut Vec<AuditFinding>,
) -> Result<()> {
    let Some(lock) = crate::ops::evidence_lock::status(storage, uri).await? else {
        return Ok(());
    };
    let written = crate::ops::evidence_lock::written_at(written_at, Some(last_modified));
    if let Some(why) = crate::ops::evidence_lock::shortfall(&lock, claim, written) {
        findings.push(AuditFinding {
            check: "EVIDENCE_NOT_LOCKED".into(),
            report: location::file_name(uri).to_owned(),
            detail: why,
        });
    }
    locks.push(lock);
    Ok(())
}

/// The predicate type a report claims, read before any check (it only chooses which checks run).
fn claimed_predicate_type(bytes: &[u8]) -> Option<String> {
    evidence::peek_unverified(bytes)?["predicateType"]
        .as_str()
        .map(str::to_owned)
}

/// The signature check every report starts with: the envelope verifies under a trusted key (the caller passes the
/// keys of the role that signs its kind, [`TrustStore::for_role`]), and its bytes are
/// the canonical layout lakedrill writes (the chain hashes the file's bytes, so a report whose bytes differ from
/// that layout, even in whitespace, has been edited). Failures are added to `findings`.
fn verified_envelope(
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    findings: &mut Vec<AuditFinding>,
) -> Option<evidence::VerifiedStatement> {
    let v = verified_signature(name, bytes, trust, findings)?;
    match serde_json::from_slice::<evidence::Envelope>(bytes) {
        Ok(env) if env.to_json_bytes() == bytes => {}
        _ => findings.push(AuditFinding {
            check: "ENVELOPE_NOT_CANONICAL".to_owned(),
            report: name.to_owned(),
            detail: "the file's bytes are not the envelope as lakedrill wrote it (edited after signing?)".into(),
        }),
    }
    Some(v)
}

/// [`verified_envelope`] without the canonical-bytes rule: the envelope verifies under a key of `trust`, whatever
/// JSON layout holds it. For files lakedrill does not write and no chain hashes (governance decisions, signed by
/// any DSSE implementation): what is signed is the payload, and DSSE fixes no layout of the envelope around it.
fn verified_signature(
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    findings: &mut Vec<AuditFinding>,
) -> Option<evidence::VerifiedStatement> {
    match evidence::verify(bytes, trust) {
        Ok(v) => Some(v),
        Err(f) => {
            findings.push(AuditFinding {
                check: f.kind().to_owned(),
                report: name.to_owned(),
                detail: f.to_string(),
            });
            None
        }
    }
}

/// Checks one report's bytes (pure). Returns the predicate when it could be read.
///
/// The signature must be by a key of `trust`: pass the keys with the drill role ([`TrustStore::for_role`]) to
/// accept only what may count as drill evidence, as `audit verify`, `report merge`, the gates and the deleter do.
#[must_use]
pub fn check_report(
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    findings: &mut Vec<AuditFinding>,
) -> Option<(String, DrillPredicate)> {
    let v = verified_envelope(name, bytes, trust, findings)?;
    let mut fail = |check: &str, detail: String| {
        findings.push(AuditFinding {
            check: check.to_owned(),
            report: name.to_owned(),
            detail,
        });
    };
    if v.predicate_type() != DRILL_PREDICATE_TYPE {
        fail(
            "PREDICATE_TYPE",
            format!("expected {DRILL_PREDICATE_TYPE}, found {}", v.predicate_type()),
        );
        return None;
    }
    let p: DrillPredicate = match serde_json::from_value(v.predicate().clone()) {
        Ok(p) => p,
        Err(e) => {
            fail("PREDICATE_MALFORMED", e.to_string());
            return None;
        }
    };
    let passed = p
        .results
        .iter()
        .filter(|r| r.status == RestoreStatus::RestoreVerified)
        .count();
    let failed = p.results.len() - passed;
    if p.summary.passed != passed || p.summary.failed != failed {
        fail(
            "SUMMARY_INCONSISTENT",
            format!(
                "summary says {}/{} passed/failed, results say {passed}/{failed}",
                p.summary.passed, p.summary.failed
            ),
        );
    }
    let gate = if failed == 0 && passed > 0 { "PASS" } else { "FAIL" };
    if p.summary.gate != gate {
        fail(
            "GATE_INCONSISTENT",
            format!("gate {} but results imply {gate}", p.summary.gate),
        );
    }
    let ids: Vec<&str> = p.results.iter().map(|r| r.bundle_id.as_str()).collect();
    // A shard report holds its share of the overall sample (drill::Shard); any other report all of it.
    let sel: Vec<&str> = p
        .sample
        .selected
        .iter()
        .enumerate()
        .filter(|(pos, _)| p.shard.as_ref().is_none_or(|s| s.count > 0 && s.holds(*pos)))
        .map(|(_, b)| b.as_str())
        .collect();
    if let Some(s) = &p.shard
        && (s.count == 0 || s.index >= s.count)
    {
        fail("SHARD_INVALID", format!("shard {}/{}", s.index, s.count));
    }
    if ids != sel || p.sample.size != p.sample.selected.len() || p.sample.size > p.sample.population {
        fail(
            "SAMPLE_INCONSISTENT",
            format!(
                "selected {sel:?}, results {ids:?}, size {}, population {}",
                p.sample.size, p.sample.population
            ),
        );
    }
    // A report that lists its population must list exactly `population` distinct ids holding the selection.
    if !p.sample.population_ids.is_empty() {
        let listed: std::collections::BTreeSet<&str> = p.sample.population_ids.iter().map(String::as_str).collect();
        let outside: Vec<&str> = p
            .sample
            .selected
            .iter()
            .map(String::as_str)
            .filter(|b| !listed.contains(b))
            .collect();
        if listed.len() != p.sample.population || listed.len() != p.sample.population_ids.len() || !outside.is_empty() {
            fail(
                "SAMPLE_INCONSISTENT",
                format!(
                    "population {} but {} ids listed ({} distinct); selected outside the population: {outside:?}",
                    p.sample.population,
                    p.sample.population_ids.len(),
                    listed.len()
                ),
            );
        }
    }
    // The roots the population claims (#23 point 1): one per id, and each drilled bundle's root is the one listed.
    if !p.sample.population_roots.is_empty() {
        if p.sample.population_roots.len() == p.sample.population_ids.len() {
            let listed: std::collections::BTreeMap<&str, Option<&str>> = p
                .sample
                .population_ids
                .iter()
                .map(String::as_str)
                .zip(p.sample.population_roots.iter().map(Option::as_deref))
                .collect();
            for r in &p.results {
                let (Some(root), Some(claimed)) = (r.bundle_root.as_deref(), listed.get(r.bundle_id.as_str())) else {
                    continue;
                };
                if *claimed != Some(root) {
                    fail(
                        "SAMPLE_INCONSISTENT",
                        format!(
                            "bundle {} was drilled with root {root}, but the population lists its root as {}",
                            r.bundle_id,
                            claimed.unwrap_or("null")
                        ),
                    );
                }
            }
        } else {
            fail(
                "SAMPLE_INCONSISTENT",
                format!(
                    "{} population roots for {} population ids",
                    p.sample.population_roots.len(),
                    p.sample.population_ids.len()
                ),
            );
        }
    }
    // The selection recomputes from the recorded population and seed (a re-signed report with another seed or
    // another population is caught here, whoever signed it).
    match p.sample.sampler.as_deref() {
        Some(crate::evidence::sample::SAMPLER) => {
            if let Err(why) = crate::evidence::sample::check(
                p.sample.seed,
                &p.sample.population_ids,
                &p.sample.selected,
                (p.sample.coverage_weeks, &p.sample.coverage),
                &p.sample.forced,
            ) {
                fail("SAMPLE_MISMATCH", why);
            }
        }
        Some(other) => fail(
            "SAMPLE_MISMATCH",
            format!("sampler {other:?} is not {}", crate::evidence::sample::SAMPLER),
        ),
        None => fail(
            "SAMPLE_NOT_RECOMPUTABLE",
            "the report names no sampler: its selection cannot be recomputed (a report written before lakedrill recorded its sampler)"
                .into(),
        ),
    }
    for r in &p.results {
        let want = format!("lakedrill-bundle:{}", r.bundle_id);
        let ok = v.subjects().iter().any(|s| {
            s.name == want
                && r.bundle_root
                    .as_ref()
                    .is_none_or(|root| s.digest.get("blake3") == Some(root))
        });
        if !ok {
            fail(
                "SUBJECT_MISMATCH",
                format!("no subject binds bundle {} to root {:?}", r.bundle_id, r.bundle_root),
            );
        }
        if r.status == RestoreStatus::RestoreVerified && !r.findings.is_empty() {
            fail(
                "RESULT_INCONSISTENT",
                format!("{} is RESTORE_VERIFIED with findings", r.bundle_id),
            );
        }
    }
    Some((v.keyid().to_owned(), p))
}

/// Checks a fault-matrix report (`drill faults`, pure): its key id and predicate when it could be read, every
/// failed check added to `findings`. Pass the keys with the drill role ([`TrustStore::for_role`]), as
/// `audit verify` does: a fault-matrix report is drill evidence.
#[must_use]
pub fn check_fault_report(
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    findings: &mut Vec<AuditFinding>,
) -> Option<(String, crate::evidence::fault_matrix::FaultPredicate)> {
    let v = verified_envelope(name, bytes, trust, findings)?;
    if v.predicate_type() != crate::evidence::fault_matrix::PREDICATE_TYPE {
        findings.push(AuditFinding {
            check: "PREDICATE_TYPE".into(),
            report: name.to_owned(),
            detail: format!(
                "expected {}, found {}",
                crate::evidence::fault_matrix::PREDICATE_TYPE,
                v.predicate_type()
            ),
        });
        return None;
    }
    let mut fail = |check: &str, detail: String| {
        findings.push(AuditFinding {
            check: check.to_owned(),
            report: name.to_owned(),
            detail,
        });
    };
    let p: crate::evidence::fault_matrix::FaultPredicate = match serde_json::from_value(v.predicate().clone()) {
        Ok(p) => p,
        Err(e) => {
            fail("PREDICATE_MALFORMED", e.to_string());
            return None;
        }
    };
    let subject = v
        .subjects()
        .iter()
        .find(|s| s.name == "lakedrill-implementation")
        .and_then(|s| s.digest.get("sha256"))
        .map(String::as_str);
    for problem in crate::evidence::fault_matrix::check_predicate(&p, subject) {
        fail("FAULT_MATRIX_INCONSISTENT", problem);
    }
    Some((v.keyid().to_owned(), p))
}

/// Every drill report a signed purge summary names under `evidence` (each with the URI and SHA-256 the purge
/// accepted it by, the registry's `accepted_evidence`), or the signed inventory archive names (the one report the
/// purge was accepted on, an object), must still be there with that SHA-256: a report whose bytes
/// differ is an `EVIDENCE_CHANGED` finding naming the report and both digests, one that is gone an
/// `EVIDENCE_MISSING` finding (as a removed receipts batch or a retirement record's missing bundle is: the store
/// answered that it does not hold it), and an entry without a URI or digest an `EVIDENCE_UNNAMED` finding. A
/// report the store cannot be asked about (no credentials, unreachable) is an error naming it (exit 2): nothing
/// was decided about it. A summary written before summaries named their evidence names none: nothing to check.
///
/// # Errors
/// Storage errors other than "not found" while reading a named report.
async fn check_summary_evidence(
    storage: &Storage,
    summary_name: &str,
    summary: &serde_json::Value,
    findings: &mut Vec<AuditFinding>,
) -> Result<()> {
    let named: Vec<&serde_json::Value> = match &summary["evidence"] {
        serde_json::Value::Array(all) => all.iter().collect(),
        one @ serde_json::Value::Object(_) => vec![one],
        _ => Vec::new(),
    };
    let what = if summary["kind"] == "inventory" {
        "the signed inventory archive"
    } else {
        "the purge summary"
    };
    for e in named {
        let (Some(uri), Some(recorded)) = (e["uri"].as_str(), e["sha256"].as_str()) else {
            findings.push(AuditFinding {
                check: "EVIDENCE_UNNAMED".into(),
                report: summary_name.to_owned(),
                detail: format!("an evidence entry names no report URI or SHA-256: {e}"),
            });
            continue;
        };
        // Bounded as the deleter read it (`purge --evidence`): a report over the bound is not the one it accepted.
        let max = storage.options().max_metadata_bytes;
        let actual = match storage.get_within(uri, max).await {
            Ok(crate::io::store::Within::Read(f)) => evidence::sha256_hex(&f.bytes),
            Ok(crate::io::store::Within::Over { size }) => format!("unknown ({size} bytes, over the {max}-byte bound)"),
            Err(crate::Error::NotFound { .. }) => {
                findings.push(AuditFinding {
                    check: "EVIDENCE_MISSING".into(),
                    report: uri.to_owned(),
                    detail: format!(
                        "{what} {summary_name} names this drill report as evidence (SHA-256 {recorded}), and it is \
                         gone"
                    ),
                });
                continue;
            }
            Err(other) => return Err(other),
        };
        if actual != recorded {
            findings.push(AuditFinding {
                check: "EVIDENCE_CHANGED".into(),
                report: uri.to_owned(),
                detail: format!(
                    "{what} {summary_name} names this drill report as evidence with SHA-256 {recorded}, but it now \
                     has SHA-256 {actual}: it was rewritten after the purge accepted it"
                ),
            });
        }
    }
    Ok(())
}

/// A bundle's envelope (`bundle.dsse.json`): verified as `restore` verifies it (signature, root, subject, every
/// layer, every object where it lies or is held), each finding an audit finding. `bytes` are the envelope's, as the
/// audit read them (within `max_metadata_bytes`): it is not read a second time, whole. Returns the signing key id.
async fn check_bundle(
    storage: &Storage,
    uri: &str,
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    findings: &mut Vec<AuditFinding>,
) -> Result<Option<String>> {
    // Only keys with the seal role sign bundles. `bundle::verify` below checks the signature the same way and
    // reports a failure as BUNDLE_SIGNATURE; of this check only what it alone finds (edited bytes) is kept, so
    // a bad signature is reported once.
    let mut own = Vec::new();
    let v = verified_envelope(name, bytes, &trust.for_role(Role::Seal), &mut own);
    findings.extend(own.into_iter().filter(|f| f.check == "ENVELOPE_NOT_CANONICAL"));
    // A bundle retired by a valid record (its candidate was purged) no longer restores by design: its envelope,
    // root and predicate are checked, not the objects the purge removed.
    let dir = location::parent(uri).unwrap_or_default();
    let record_uri = location::join(&dir, crate::evidence::retirement::RECORD_FILE);
    // Within `max_metadata_bytes`, as drills read it: a file of any size can be put beside the envelope.
    let max = storage.options().max_metadata_bytes;
    if let Some(record) = storage
        .get_opt_bounded(&record_uri, max, "a bundle's retirement record")
        .await?
        && retirement_check(&dir, bytes, &record.bytes, trust).is_ok()
    {
        if let Err(e) = crate::bundle::verified_predicate(storage, uri, trust).await {
            findings.push(AuditFinding {
                check: "BUNDLE_SIGNATURE".into(),
                report: name.to_owned(),
                detail: e.to_string(),
            });
        }
        return Ok(v.map(|v| v.keyid().to_owned()));
    }
    let r = crate::bundle::verify(storage, uri, trust, &crate::bundle::VerifyOptions::default()).await?;
    for f in &r.findings {
        findings.push(bundle_finding(name, f));
    }
    Ok(v.map(|v| v.keyid().to_owned()))
}

/// A bundle finding as an audit finding, each part said once: the check is the finding's kind with a `BUNDLE_`
/// prefix (`BUNDLE_MISSING_FILE`; `BUNDLE_SIGNATURE` stays as it is), and the detail names the finding's path only
/// when it is not the envelope the audit line already names, then what was expected and found.
fn bundle_finding(name: &str, f: &crate::model::findings::Finding) -> AuditFinding {
    let kind = serde_json::to_value(f.kind)
        .ok()
        .and_then(|k| k.as_str().map(str::to_owned))
        .unwrap_or_default();
    let check = if kind.starts_with("BUNDLE_") {
        kind
    } else {
        format!("BUNDLE_{kind}")
    };
    let mut parts = Vec::new();
    if f.path != name && f.path != crate::bundle::ENVELOPE_FILE {
        parts.push(f.path.clone());
    }
    if let Some(uri) = &f.uri {
        parts.push(format!("read={uri}"));
    }
    if let Some(e) = &f.expected {
        parts.push(format!("expected={e}"));
    }
    if let Some(a) = &f.actual {
        parts.push(format!("actual={a}"));
    }
    AuditFinding {
        check,
        report: name.to_owned(),
        detail: parts.join(" "),
    }
}

/// A retirement record's bytes against the bundle in `dir` whose envelope bytes are `envelope` (its id, its root,
/// its envelope's SHA-256), by the rules drills apply.
fn retirement_check(
    dir: &str,
    envelope: &[u8],
    record: &[u8],
    trust: &TrustStore,
) -> std::result::Result<(), crate::evidence::retirement::RetirementProblem> {
    let sha = evidence::sha256_hex(envelope);
    let root = evidence::peek_unverified(envelope)
        .and_then(|st| st["predicate"]["bundle_root"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let bundle = crate::evidence::retirement::BundleIdentity {
        bundle_id: location::file_name(dir),
        bundle_root: &root,
        envelope_sha256: &sha,
    };
    crate::evidence::retirement::check(record, trust, &bundle).map(|_| ())
}

/// A retirement record (`retired.dsse.json`): checked against the bundle it lies beside, by the rules drills
/// apply before they leave a bundle out. Returns the signing key id.
async fn check_retirement(
    storage: &Storage,
    uri: &str,
    name: &str,
    bytes: &[u8],
    trust: &TrustStore,
    findings: &mut Vec<AuditFinding>,
) -> Result<Option<String>> {
    // Only keys with the deleter role retire a bundle (as drills and `retirement::check` read it).
    let v = verified_envelope(name, bytes, &trust.for_role(Role::Deleter), findings);
    let dir = location::parent(uri).unwrap_or_default();
    let max = storage.options().max_metadata_bytes;
    let Some(envelope) = storage
        .get_opt_bounded(
            &location::join(&dir, crate::bundle::ENVELOPE_FILE),
            max,
            "a bundle envelope",
        )
        .await?
    else {
        findings.push(AuditFinding {
            check: "RETIREMENT_WITHOUT_BUNDLE".into(),
            report: name.to_owned(),
            detail: format!("no bundle envelope beside it in {dir}"),
        });
        return Ok(v.map(|v| v.keyid().to_owned()));
    };
    if let Err(p) = retirement_check(&dir, &envelope.bytes, bytes, trust) {
        findings.push(AuditFinding {
            check: "RETIREMENT_INVALID".into(),
            report: name.to_owned(),
            detail: p.to_string(),
        });
    }
    Ok(v.map(|v| v.keyid().to_owned()))
}

/// A signed governance decision: its signature under a key with the `governance` role (as `decision apply` reads
/// it), the subject binding its predicate digest, and every field's rule (as `decision apply` checks them).
/// Any byte layout of the envelope is accepted, as `decision apply` accepts it: decisions are written by
/// governance tooling with any DSSE implementation, and no chain hashes their bytes. Returns the signing key id.
fn check_decision(name: &str, bytes: &[u8], trust: &TrustStore, findings: &mut Vec<AuditFinding>) -> Option<String> {
    let before = findings.len();
    let governance = trust.for_role(Role::Governance);
    let Some(v) = verified_signature(name, bytes, &governance, findings) else {
        // A roles file from before the governance role: say why nothing verifies, and the fix.
        if let Some(hint) = trust.no_key_holds(Role::Governance) {
            for f in &mut findings[before..] {
                f.detail.push_str(&format!("; {hint}"));
            }
        }
        return None;
    };
    let mut fail = |check: &str, detail: String| {
        findings.push(AuditFinding {
            check: check.to_owned(),
            report: name.to_owned(),
            detail,
        });
    };
    match serde_json::from_value::<crate::govern::decision::DecisionDoc>(v.predicate().clone()) {
        Ok(doc) => {
            if let Err(e) = doc.validate() {
                fail("DECISION_INVALID", format!("{e:#}"));
            }
        }
        Err(e) => fail(
            "DECISION_INVALID",
            format!("the predicate is not a decision document: {e}"),
        ),
    }
    let digest = evidence::sha256_hex(v.predicate().to_string().as_bytes());
    if !v.subjects().iter().any(|s| s.digest.get("sha256") == Some(&digest)) {
        fail(
            "SUBJECT_MISMATCH",
            "no subject binds the decision's predicate digest".into(),
        );
    }
    Some(v.keyid().to_owned())
}

/// Every report envelope in a plan's folder, oldest first (names sort by time).
///
/// # Errors
/// [`crate::Error::Storage`].
pub async fn list_reports(storage: &Storage, folder: &str) -> Result<Vec<String>> {
    Ok(storage
        .list(folder)
        .await?
        .into_iter()
        .map(|o| o.uri)
        .filter(|u| u.ends_with(".dsse.json") && location::parent(u).as_deref() == Some(folder.trim_end_matches('/')))
        .collect())
}

/// With `--chain`: each report's coverage picks, recomputed from the drills the chain's reports recorded as
/// finished before it started (what the drill read, [`crate::ops::drill`]'s `last_drilled`): a report whose
/// picks differ drilled bundles of its signer's choosing under the coverage label (`SAMPLE_MISMATCH`). Shard
/// reports are not recomputed (their selection is the overall run's).
fn coverage_recomputed(drilled: &[(String, DrillPredicate)], findings: &mut Vec<AuditFinding>) {
    let ms = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|t| t.timestamp_millis())
    };
    for (name, p) in drilled {
        let (Some(weeks), None, Some(started)) = (p.sample.coverage_weeks, &p.shard, ms(&p.started_at)) else {
            continue;
        };
        if p.sample.population_ids.is_empty() {
            continue;
        }
        let mut last: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
        for (_, e) in drilled {
            let Some(finished) = ms(&e.finished_at).filter(|f| *f < started) else {
                continue;
            };
            for r in e.results.iter().filter(|r| r.object_shard.is_none()) {
                let at = last.entry(r.bundle_id.clone()).or_insert(i64::MIN);
                *at = (*at).max(finished);
            }
        }
        let k = p.sample.selected.len().saturating_sub(p.sample.forced.len());
        let want = crate::evidence::sample::coverage_picks(
            &p.sample.population_ids,
            k,
            &crate::evidence::sample::Coverage {
                weeks,
                last_drilled: &last,
                now_ms: started,
            },
        );
        if want != p.sample.coverage {
            findings.push(AuditFinding {
                check: "SAMPLE_MISMATCH".into(),
                report: name.clone(),
                detail: format!(
                    "the coverage picks recomputed from the chain's earlier drills are {want:?}, the report has {:?}",
                    p.sample.coverage
                ),
            });
        }
    }
}

/// `audit verify REPORT [--chain]`.
///
/// # Errors
/// Only when a report cannot be read at all.
pub async fn verify(storage: &Storage, report_uri: &str, trust: &TrustStore, chain: bool) -> Result<AuditReport> {
    let mut report_uri = location::canonical_uri(report_uri)?;
    let mut findings = Vec::new();
    let mut keyids = Vec::new();
    // A plan's reports folder with --chain: the whole chain, the gate of its newest report (for schedules
    // that do not know the newest report's name).
    let folder_given = !report_uri.ends_with(".dsse.json");
    if folder_given && !chain {
        return Err(crate::Error::invalid(
            &report_uri,
            "is not a report (*.dsse.json); a plan's reports folder needs --chain",
        ));
    }
    let targets = if chain {
        let folder = if folder_given {
            report_uri.trim_end_matches('/').to_owned()
        } else {
            location::parent(&report_uri).unwrap_or_default()
        };
        let t = list_reports(storage, &folder).await?;
        if folder_given {
            match t.last() {
                Some(last) => report_uri = last.clone(),
                None => return Err(crate::Error::invalid(&folder, "holds no report (*.dsse.json)")),
            }
        } else if !t
            .iter()
            .any(|u| location::file_name(u) == location::file_name(&report_uri))
        {
            // The report named is what the auditor asked about: the rest of its folder verifying says nothing
            // of it (an empty folder, a mistyped or removed name), so it must be there, as without --chain.
            return Err(crate::Error::NotFound { uri: report_uri });
        }
        t
    } else {
        vec![report_uri.clone()]
    };
    let chain_folder = chain.then(|| location::parent(&report_uri).unwrap_or_default());
    // Each kind verifies only under the keys of the role that signs it (with a roles.toml; every key without
    // one), as the commands that act on it read it: an auditor never accepts what the deleter would refuse.
    // Bundles (seal) and retirement records (deleter) are checked by their own functions below.
    let drill_keys = trust.for_role(Role::Drill);
    let deleter_keys = trust.for_role(Role::Deleter);
    let mut gate = None;
    let mut locks = Vec::new();
    let mut prev: Option<(String, String, String)> = None; // (name, sha256, plan)
    // With --chain, the drill reports verified, for recomputing their coverage picks afterwards.
    let mut drilled: Vec<(String, DrillPredicate)> = Vec::new();
    for uri in &targets {
        // Bounded as table metadata is: a file of any size can be written into a reports folder.
        let fetched = storage
            .get_bounded(uri, storage.options().max_metadata_bytes, "a signed file")
            .await?;
        let (bytes, modified) = (fetched.bytes, fetched.info.last_modified);
        let name = location::file_name(uri).to_owned();
        // A purge's signed inventory archive or receipts summary: its signature and its lock.
        if !chain
            && claimed_predicate_type(&bytes).as_deref() == Some(crate::evidence::predicate::RECEIPTS_PREDICATE_TYPE)
        {
            if let Some(v) = verified_envelope(&name, &bytes, &deleter_keys, &mut findings) {
                keyids.push(v.keyid().to_owned());
                let p = v.predicate();
                let claim: Option<crate::evidence::predicate::RetentionClaim> =
                    serde_json::from_value(p["evidence_retention"].clone()).ok();
                let at = p["at"].as_str().or_else(|| p["stamp"]["at"].as_str());
                check_lock(storage, uri, claim.as_ref(), (at, modified), &mut locks, &mut findings).await?;
                // A summary or an inventory archive: every drill report it names as evidence still hashes as
                // accepted.
                if p["kind"] == "summary" || p["kind"] == "inventory" {
                    check_summary_evidence(storage, &name, p, &mut findings).await?;
                }
                // A summary: its signed receipts chain, from the files alone (#23 point 4).
                if p["kind"] == "summary"
                    && let Some(read) = crate::ops::receipts::check_summary(storage, uri, p, trust).await?
                {
                    for (file, detail) in read.problems {
                        findings.push(AuditFinding {
                            check: "RECEIPTS_CHAIN_BROKEN".into(),
                            report: location::file_name(&file).to_owned(),
                            detail,
                        });
                    }
                }
            }
            continue;
        }
        // A bundle, a bundle's retirement record or a governance decision: each checked by its kind.
        if !chain && let Some(kind) = claimed_predicate_type(&bytes) {
            let other = match kind.as_str() {
                crate::bundle::PREDICATE_TYPE => {
                    Some(check_bundle(storage, uri, &name, &bytes, trust, &mut findings).await?)
                }
                crate::evidence::retirement::PREDICATE_TYPE => {
                    Some(check_retirement(storage, uri, &name, &bytes, trust, &mut findings).await?)
                }
                crate::govern::decision::DECISION_PREDICATE_TYPE => {
                    Some(check_decision(&name, &bytes, trust, &mut findings))
                }
                _ => None,
            };
            if let Some(keyid) = other {
                keyids.extend(keyid);
                // None of these claims a retention: on S3 its lock is shown, and on a bucket with Object Lock it
                // must carry one.
                check_lock(storage, uri, None, (None, modified), &mut locks, &mut findings).await?;
                continue;
            }
        }
        // A fault-matrix report (`drill faults`) is checked by its own rules; it is signed under the drill role
        // (drill evidence about the build) but never a drill report a purge accepts.
        if claimed_predicate_type(&bytes).as_deref() == Some(crate::evidence::fault_matrix::PREDICATE_TYPE) {
            check_lock(storage, uri, None, (None, modified), &mut locks, &mut findings).await?;
            let Some(f) = check_fault_report(&name, &bytes, &drill_keys, &mut findings) else {
                prev = Some((name, evidence::sha256_hex(&bytes), String::new()));
                continue;
            };
            if !keyids.contains(&f.0) {
                keyids.push(f.0.clone());
            }
            if uri == &report_uri {
                gate = Some(f.1.summary.gate.clone());
            }
            let sha = evidence::sha256_hex(&bytes);
            if chain {
                let expected = prev.as_ref().map(|(_, s, _)| s.clone());
                if f.1.previous_report != expected {
                    findings.push(AuditFinding {
                        check: "CHAIN_BROKEN".into(),
                        report: name.clone(),
                        detail: format!(
                            "previous_report is {:?} but the report before it has SHA-256 {expected:?}",
                            f.1.previous_report
                        ),
                    });
                }
            }
            prev = Some((name, sha, "fault-matrix".into()));
            continue;
        }
        let checked = check_report(&name, &bytes, &drill_keys, &mut findings);
        let sha = evidence::sha256_hex(&bytes);
        if let Some((_, p)) = &checked {
            check_lock(
                storage,
                uri,
                p.drill.evidence_retention.as_ref(),
                (Some(&p.finished_at), modified),
                &mut locks,
                &mut findings,
            )
            .await?;
        }
        if let Some((keyid, p)) = checked {
            if !keyids.contains(&keyid) {
                keyids.push(keyid);
            }
            if uri == &report_uri {
                gate = Some(p.summary.gate.clone());
            }
            if chain {
                let expected = prev.as_ref().map(|(_, s, _)| s.clone());
                if p.previous_report != expected {
                    findings.push(AuditFinding {
                        check: "CHAIN_BROKEN".into(),
                        report: name.clone(),
                        detail: format!(
                            "previous_report is {:?} but the report before it ({}) has SHA-256 {:?}",
                            p.previous_report,
                            prev.as_ref().map_or("none", |(n, _, _)| n.as_str()),
                            expected
                        ),
                    });
                }
                if let Some((_, _, plan)) = &prev
                    && plan != &p.drill.plan
                {
                    findings.push(AuditFinding {
                        check: "CHAIN_MIXED_PLANS".into(),
                        report: name.clone(),
                        detail: format!("plan {} follows plan {plan}", p.drill.plan),
                    });
                }
            }
            let plan = p.drill.plan.clone();
            if chain {
                drilled.push((name.clone(), p));
            }
            prev = Some((name, sha, plan));
        } else {
            prev = Some((name, sha, String::new()));
        }
    }
    coverage_recomputed(&drilled, &mut findings);
    Ok(AuditReport {
        status: if findings.is_empty() {
            "VERIFIED".into()
        } else {
            "FAILED".into()
        },
        reports_checked: targets.len(),
        keyids,
        gate,
        findings,
        locks,
        chain_head: if chain {
            prev.as_ref().map(|(_, sha, _)| sha.clone())
        } else {
            None
        },
        chain_folder,
        anchored: None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod sample_tests {
    use super::*;
    use crate::evidence::keys::{PublicKey, SigningKey};
    use crate::evidence::predicate::*;
    use crate::evidence::{Statement, Subject};

    fn result(id: &str, root: &str) -> DrillResult {
        DrillResult {
            table_uuid: Some("u".into()),
            snapshot_id: Some(1),
            bundle_root: Some(root.into()),
            objects_verified: 1,
            bytes_verified: 1,
            rto_seconds: 1.0,
            ..DrillResult::new(id, RestoreStatus::RestoreVerified)
        }
    }

    /// A drill report of `selected` (every result RESTORE_VERIFIED with `root`) over the population b00..b29,
    /// drilled 2026-12-01 00:00-00:01, signed by a drill key, with that key's trust.
    fn signed(
        selected: Vec<String>,
        coverage: Vec<String>,
        coverage_weeks: Option<u32>,
        root: &str,
    ) -> (Vec<u8>, TrustStore) {
        let key = SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[9; 32]));
        let trust = TrustStore::from_keys(vec![PublicKey::new("drill", "drill.pub", key.verifying_key())]).unwrap();
        let p = predicate(
            selected.clone(),
            coverage,
            coverage_weeks,
            root,
            "2026-12-01T00:00:00.000Z",
        );
        let mut subjects = vec![];
        let mut seen = std::collections::BTreeSet::new();
        for id in &selected {
            if seen.insert(id.clone()) {
                let mut s = Subject::sha256(format!("lakedrill-bundle:{id}"), "0".repeat(64));
                s.digest.insert("blake3".into(), root.into());
                subjects.push(s);
            }
        }
        let st = Statement {
            subject: subjects,
            predicate_type: PREDICATE_TYPE.into(),
            predicate: serde_json::to_value(&p).unwrap(),
        };
        (crate::evidence::sign_statement(&st, &key).to_json_bytes(), trust)
    }

    /// The predicate of [`signed`], started at `started` and finished a minute later.
    fn predicate(
        selected: Vec<String>,
        coverage: Vec<String>,
        coverage_weeks: Option<u32>,
        root: &str,
        started: &str,
    ) -> DrillPredicate {
        let finished = (chrono::DateTime::parse_from_rfc3339(started).unwrap() + chrono::Duration::minutes(1))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let population_ids: Vec<String> = (0..30).map(|i| format!("b{i:02}")).collect();
        let results: Vec<DrillResult> = selected.iter().map(|id| result(id, root)).collect();
        DrillPredicate {
            drill: DrillInfo {
                id: "d".into(),
                kind: "quarantine".into(),
                plan: "weekly".into(),
                plan_digest: "p".into(),
                policy_digest: None,
                implementation_digest: "i".into(),
                evidence_retention: None,
                parallel_bundles: None,
            },
            started_at: started.into(),
            finished_at: finished,
            sample: SampleInfo {
                seed: 1,
                population: 30,
                size: selected.len(),
                selected: selected.clone(),
                retired: 0,
                source: Some("file:///b".into()),
                population_ids,
                population_roots: vec![],
                sampler: Some(crate::evidence::sample::SAMPLER.into()),
                coverage_weeks,
                coverage,
                forced: vec![],
            },
            summary: Summary::of(results.len(), 0),
            results,
            previous_report: None,
            shard: None,
            merged_from: None,
        }
    }

    /// One bundle drilled 30 times read as "30 of 30 sampled", and the weekly gate counted it so: a repeated id in
    /// the selection is a `SAMPLE_MISMATCH` now (and the report does not count for the gates, which read reports
    /// through this check). The same report labelled as coverage picks without a coverage rule likewise.
    #[test]
    fn one_bundle_drilled_thirty_times_is_not_thirty_sampled() {
        let one = vec!["b07".to_owned(); 30];
        let (bytes, trust) = signed(one.clone(), one, None, &"a".repeat(64));
        let mut findings = Vec::new();
        let _ = check_report("r.dsse.json", &bytes, &trust, &mut findings);
        assert!(
            findings
                .iter()
                .any(|f| f.check == "SAMPLE_MISMATCH" && f.detail.contains("b07 more than once")),
            "{findings:?}"
        );
        let picked: Vec<String> = (0..30).map(|i| format!("b{i:02}")).collect();
        let (bytes, trust) = signed(picked.clone(), picked[..5].to_vec(), None, &"a".repeat(64));
        let mut findings = Vec::new();
        let _ = check_report("r.dsse.json", &bytes, &trust, &mut findings);
        assert!(
            findings.iter().any(|f| f.detail.contains("no coverage rule")),
            "{findings:?}"
        );
    }

    /// A plan with a coverage rule: the coverage picks of each report are recomputed from the drills the chain
    /// recorded before it started. A report whose picks are the bundles drilled the week before (hand-picked, not
    /// the least recently drilled) is a `SAMPLE_MISMATCH`; the honest picks pass.
    #[test]
    fn coverage_picks_are_recomputed_from_the_chain() {
        let root = "a".repeat(64);
        let all: Vec<String> = (0..30).map(|i| format!("b{i:02}")).collect();
        // Week 1 drilled b00..b09; week 2 (a week later, rule: 1 week) must first take never-drilled bundles.
        let week1 = predicate(
            all[..10].to_vec(),
            all[..10].to_vec(),
            Some(1),
            &root,
            "2026-11-20T00:00:00.000Z",
        );
        let honest = crate::evidence::sample::coverage_picks(
            &all,
            10,
            &crate::evidence::sample::Coverage {
                weeks: 1,
                last_drilled: &all[..10]
                    .iter()
                    .map(|id| {
                        (
                            id.clone(),
                            chrono::DateTime::parse_from_rfc3339("2026-11-20T00:01:00.000Z")
                                .unwrap()
                                .timestamp_millis(),
                        )
                    })
                    .collect(),
                now_ms: chrono::DateTime::parse_from_rfc3339("2026-11-25T00:00:00.000Z")
                    .unwrap()
                    .timestamp_millis(),
            },
        );
        assert_eq!(honest, all[10..20].to_vec(), "never-drilled first");
        let good = predicate(honest.clone(), honest, Some(1), &root, "2026-11-25T00:00:00.000Z");
        let mut findings = Vec::new();
        coverage_recomputed(&[("w1".into(), week1.clone()), ("w2".into(), good)], &mut findings);
        assert!(findings.is_empty(), "{findings:?}");
        // The same week drilling b00..b09 again, labelled coverage.
        let picked = predicate(
            all[..10].to_vec(),
            all[..10].to_vec(),
            Some(1),
            &root,
            "2026-11-25T00:00:00.000Z",
        );
        let mut findings = Vec::new();
        coverage_recomputed(&[("w1".into(), week1), ("w2".into(), picked)], &mut findings);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].check, "SAMPLE_MISMATCH");
        assert_eq!(findings[0].report, "w2");
    }
}
