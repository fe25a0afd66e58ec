//! Rollout safety: per-table rollout stages, the comparison with plain Iceberg maintenance, the
//! implementation-digest binding, and the table-level gates report.
//!
//! - [`set`] moves a table between `report-only` (the default for every table), `test`, `cohort:NAME` and
//!   `enabled`, recording who, why, when and the policy digest. `test` requires a policy that declares
//!   `regulatedData: false`; every stage that deletes requires a policy bound to the table. The deleter refuses
//!   tables in `report-only` inside its acceptance transaction.
//! - [`report`] compares lakedrill's candidates with what Iceberg's own `expire_snapshots` and
//!   `remove_orphan_files` would delete with the operator's parameters (the baseline: `--baseline-older-than`,
//!   `--baseline-retain-last`, `--baseline-orphans-older-than`, as for `plan`; [`crate::govern::baseline`]), records the comparison as an observation, and aggregates the observations of the period:
//!   objects both would delete, only Iceberg would delete (with each reason lakedrill kept it), only lakedrill
//!   would delete.
//! - [`crate::ops::binding::digest_binding`] compares the running binary's SHA-256 with the policy's
//!   `reclamationImplementationDigest`: `quarantine` and `purge` refuse on a mismatch; a policy without the field
//!   refuses `purge` (quarantine is allowed, with the same message); `any` allows every build, and says so.
//!
//! What it does not do: [`compare`] is pure and deletes nothing; `report` never changes a table. The
//! comparison computes Iceberg's rule from the table's metadata and one listing; it does not run Spark (the
//! oracle test checks the rule against Iceberg Java).

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::govern::closure::{self};
pub use crate::govern::compare::{ComparedObject, Comparison, compare};
use crate::govern::policy::Policy;
use crate::ops::context::Context;
use crate::registry::{ObservationRecord, RolloutStage};
use crate::report::output::{self, Outcome, Verdict};
use crate::table::TableSource;

/// `lakedrill version`: the crate version and the implementation digest of this build.
///
/// # Errors
/// [`Error::Io`] when the running binary cannot be read.
pub fn version() -> Result<Outcome> {
    let digest = crate::ops::context::implementation_digest()?;
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"name": "lakedrill", "version": env!("CARGO_PKG_VERSION"),
            "implementation_digest": digest, "binary": exe}),
        format!(
            "lakedrill {}\nimplementation digest (sha256 of {exe}) {digest}\n",
            env!("CARGO_PKG_VERSION")
        ),
    )
}

/// `lakedrill rollout set STAGE --reason R [--policy P]` (table addressed).
///
/// # Errors
/// Load, policy and registry errors; a malformed stage (exit 2). A stage that deletes without a policy, or
/// `test` without `regulatedData: false`, is refused (exit 1).
pub async fn set(
    ctx: &Context,
    source: &TableSource,
    stage: &str,
    reason: &str,
    by: &str,
    policy_path: Option<&Path>,
    force: bool,
) -> Result<Outcome> {
    let stage: RolloutStage = stage.parse()?;
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "stage": stage, "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    let policy = policy_path.map(crate::govern::policy::load).transpose()?;
    let table = match &policy {
        Some(p) => crate::ops::plan::bound_table(ctx, source, p).await?,
        None => ctx.table(source).await?,
    };
    if stage.allows_deletes() {
        let Some(p) = &policy else {
            return refuse(format!(
                "stage {stage} allows deletes: give the table's policy (--policy FILE) so the change is checked and recorded against it"
            ));
        };
        if stage == RolloutStage::Test && p.regulated_data() != Some(false) {
            return refuse(format!(
                "stage test requires a policy that declares the table unregulated (regulatedData: false); {} says {}",
                p.source_name(),
                match p.regulated_data() {
                    Some(true) => "regulatedData: true",
                    _ => "nothing about regulated data",
                }
            ));
        }
    }
    let reg = crate::ops::plan::registry(ctx).await?;
    let uuid = table.metadata().uuid().to_string();
    let rules = crate::registry::RolloutRules {
        min_report_only: ctx
            .config
            .rollout
            .min_report_only_days
            .map_or(crate::registry::MIN_REPORT_ONLY, |d| {
                chrono::Duration::days(i64::from(d))
            }),
        force,
    };
    let c = match reg
        .rollout_set(
            &uuid,
            &crate::ops::plan::policy_name(&table),
            &stage,
            reason,
            by,
            policy.as_ref().map(Policy::digest),
            Some(&rules),
            ctx.now(),
        )
        .await?
    {
        Ok(c) => c,
        Err(refusals) => {
            return refuse(format!(
                "{}; `--force` makes the change anyway, recorded as forced and shown by `gates`",
                refusals.join("; ")
            ));
        }
    };
    let mut human = format!(
        "{} ({uuid}): rollout stage {} → {} by {} at {} ({})\n",
        table.name(),
        c.from,
        c.to,
        c.changed_by,
        c.changed_at.to_rfc3339(),
        c.reason
    );
    if c.forced {
        human.push_str(&format!(
            "  FORCED over the rollout rules{}\n",
            if c.overrode.is_empty() {
                " (none was broken)".to_owned()
            } else {
                format!(": {}", c.overrode.join("; "))
            }
        ));
    }
    Outcome::new(Verdict::Ok, &serde_json::json!({"status": "SET", "change": c}), human)
}

/// `lakedrill rollout show` (table addressed): the current stage and every change with its reason.
///
/// # Errors
/// Load and registry errors.
pub async fn show(ctx: &Context, source: &TableSource) -> Result<Outcome> {
    let table = ctx.table(source).await?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let uuid = table.metadata().uuid().to_string();
    let current = reg.rollout_stage(&uuid).await?;
    let history = reg.rollout_history(&uuid).await?;
    let mut human = format!(
        "{} ({uuid}): rollout stage {}{}\n",
        table.name(),
        current.stage,
        if current.changed_at.is_none() {
            " (the default: never set)"
        } else {
            ""
        }
    );
    human.push_str(&output::table(
        &["generation", "at", "by", "from", "to", "reason"],
        &history
            .iter()
            .map(|c| {
                vec![
                    c.generation.to_string(),
                    c.changed_at.to_rfc3339(),
                    c.changed_by.clone(),
                    c.from.to_string(),
                    c.to.to_string(),
                    if c.forced {
                        format!("FORCED: {} (over: {})", c.reason, c.overrode.join("; "))
                    } else {
                        c.reason.clone()
                    },
                ]
            })
            .collect::<Vec<_>>(),
    ));
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"rollout": current, "history": history}),
        human,
    )
}

/// Aggregates observations (oldest first) into one comparison: each object once, in the category and with the
/// reasons of its latest observation. Keys: `both`, `only_iceberg`, `only_lakedrill`.
///
/// # Errors
/// [`Error::Internal`] when a stored observation does not parse.
pub fn aggregate(observations: &[ObservationRecord]) -> Result<BTreeMap<&'static str, Vec<ComparedObject>>> {
    let mut latest: BTreeMap<String, (&'static str, ComparedObject)> = BTreeMap::new();
    for o in observations {
        let c: Comparison = serde_json::from_value(o.report["comparison"].clone())
            .map_err(|e| Error::Internal(format!("rollout observation {} does not parse: {e}", o.observation_id)))?;
        for (cat, list) in [
            ("both", c.both),
            ("only_iceberg", c.only_iceberg),
            ("only_lakedrill", c.only_lakedrill),
        ] {
            for item in list {
                latest.insert(item.path.clone(), (cat, item));
            }
        }
    }
    let mut cats: BTreeMap<&'static str, Vec<ComparedObject>> = BTreeMap::new();
    for (_, (cat, item)) in latest {
        cats.entry(cat).or_default().push(item);
    }
    Ok(cats)
}

#[derive(Serialize)]
struct Bucket {
    objects: usize,
    bytes: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    by_kind: BTreeMap<String, usize>,
    items: Vec<ComparedObject>,
}

fn bucket(items: Vec<ComparedObject>) -> Bucket {
    let mut by_kind = BTreeMap::new();
    for i in &items {
        for k in &i.kinds {
            *by_kind.entry(k.clone()).or_default() += 1;
        }
    }
    Bucket {
        objects: items.len(),
        bytes: items.iter().map(|i| i.bytes).sum(),
        by_kind,
        items,
    }
}

/// `lakedrill rollout report --policy P [--since DUR] [--baseline-* …]` (table addressed).
///
/// Records what it sees now as an observation, then aggregates every observation of the table since `now -
/// since`: each object counted once, in the category of its latest observation, with that observation's reasons.
///
/// # Errors
/// Load, policy, registry and storage errors; a malformed duration.
pub async fn report(
    ctx: &Context,
    source: &TableSource,
    policy_path: &Path,
    since: &str,
    baseline: &crate::ops::plan::BaselineOptions,
) -> Result<Outcome> {
    let since_d = crate::clock::parse_duration(since).map_err(|why| Error::invalid("--since", why))?;
    let policy = crate::govern::policy::load(policy_path)?;
    let table = crate::ops::plan::bound_table(ctx, source, &policy).await?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let now = ctx.now();
    let mut input = crate::ops::plan::gather(ctx, &table, &policy, &reg, now, None).await?;
    input.baseline = crate::ops::plan::baseline(ctx, &table, &input, baseline)?;
    let baseline_doc = crate::ops::plan::BaselineDoc::from(&input.baseline);
    let plan = closure::plan(&input);
    let cmp = compare(&input, &plan);
    let uuid = table.metadata().uuid().to_string();
    let observation = serde_json::json!({
        "metadata_location": table.generation().metadata_location,
        "policy_digest": policy.digest(),
        "baseline": baseline_doc,
        "comparison": cmp,
    });
    // Before anything is recorded: a window reaching before the first time there is cannot be read.
    let from: DateTime<Utc> = now.checked_sub_signed(since_d).ok_or_else(|| {
        Error::invalid(
            "--since",
            format!("{since} before now is before the first time there is"),
        )
    })?;
    reg.observation_add(&uuid, &observation, now).await?;
    let observations = reg.observations(&uuid, from).await?;
    let mut cats = aggregate(&observations)?;
    let stage = reg.rollout_stage(&uuid).await?;
    let both = bucket(cats.remove("both").unwrap_or_default());
    let only_iceberg = bucket(cats.remove("only_iceberg").unwrap_or_default());
    let only_lakedrill = bucket(cats.remove("only_lakedrill").unwrap_or_default());
    let mut human = format!(
        "{} ({uuid}), rollout stage {}: {} observation(s) since {}\nplain maintenance: Iceberg's expire_snapshots(older_than {}, retain_last {}) + remove_orphan_files(older_than {})\n",
        table.name(),
        stage.stage,
        observations.len(),
        from.to_rfc3339(),
        baseline_doc.older_than,
        baseline_doc
            .retain_last
            .map_or_else(|| "from the table".to_owned(), |n| n.to_string()),
        baseline_doc.orphans_older_than,
    );
    human.push_str(&format!(
        "  both would delete:        {} objects, {} bytes\n  only Iceberg would delete: {} objects, {} bytes {:?}\n  only lakedrill would delete: {} objects, {} bytes\n",
        both.objects, both.bytes, only_iceberg.objects, only_iceberg.bytes, only_iceberg.by_kind, only_lakedrill.objects, only_lakedrill.bytes
    ));
    for i in &only_iceberg.items {
        human.push_str(&format!(
            "  kept by lakedrill: {} ({} bytes, {}) — {}\n",
            i.path,
            i.bytes,
            i.via.as_deref().unwrap_or("-"),
            i.reasons.join("; ")
        ));
    }
    let doc = serde_json::json!({
        "since": from,
        "tables": [{
            "table": table.name(),
            "table_uuid": uuid,
            "rollout_stage": stage.stage,
            "observations": observations.len(),
            "baseline": baseline_doc,
            "both": both,
            "only_iceberg": only_iceberg,
            "only_lakedrill": only_lakedrill,
        }],
    });
    Outcome::new(Verdict::Ok, &doc, human)
}

/// What `gates --trust DIR [--reports DIR] [--since DUR]` adds: the six safety gates of DESIGN §7.
#[derive(Debug, Clone)]
pub struct SafetyOptions {
    /// Trust store for the drill reports.
    pub trust: std::path::PathBuf,
    /// Reports folder.
    pub reports: String,
    /// Window override (`30d` …).
    pub since: Option<String>,
}

/// `lakedrill gates --policy P` (table addressed): the table's rollout stage, the deleter switch, the
/// implementation-digest binding, and every deletion-right request with where it stands; with `--trust`,
/// also the six safety gates of DESIGN §7 ([`crate::ops::gates`]) for this table. Exit 1 when a deletion-right
/// request is past its deadline and not fulfilled, or a safety gate fails; exit 2 (cannot decide) when nothing
/// failed but the gates were not evaluated (no `--trust`).
///
/// # Errors
/// Load, policy, registry and storage errors; an unreadable trust store or a bad `--since`.
pub async fn gates(
    ctx: &Context,
    source: &TableSource,
    policy_path: &Path,
    safety: Option<&SafetyOptions>,
) -> Result<Outcome> {
    let policy = crate::govern::policy::load(policy_path)?;
    let table = crate::ops::plan::bound_table(ctx, source, &policy).await?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let now = ctx.now();
    let input = crate::ops::plan::gather(ctx, &table, &policy, &reg, now, None).await?;
    let plan = closure::plan(&input);
    let uuid = table.metadata().uuid().to_string();
    let stage = reg.rollout_stage(&uuid).await?;
    let switch = reg.deleter_switch().await?;
    let digest = crate::ops::binding::digest_binding(ctx, &policy)?;
    let decisions = reg.decisions(&uuid).await?;
    let overdue: Vec<&closure::DeletionRightStatus> = plan.deletion_rights.iter().filter(|r| r.overdue).collect();
    let conflicts: Vec<&closure::DeletionRightStatus> =
        plan.deletion_rights.iter().filter(|r| r.status == "conflict").collect();
    let mut human = format!(
        "{} ({uuid})\n  rollout stage  {}\n  deleter        {}\n  implementation {} ({})\n",
        table.name(),
        stage.stage,
        if switch.stopped {
            format!("STOPPED ({})", switch.reason)
        } else {
            "running".to_owned()
        },
        digest.running,
        digest.status
    );
    if let Some(m) = digest.message() {
        // The same words as `purge`: a mismatching pin refuses quarantine and purge, an unpinned policy refuses
        // purge, `any` is said out loud.
        let what = if !digest.allows_reclamation() {
            "REFUSED"
        } else if !digest.allows_purge() {
            "purge REFUSED"
        } else {
            "note"
        };
        human.push_str(&format!("  {what}: {m}\n"));
    }
    let writers = crate::ops::plan::overlong_writers(&reg, &table, &policy, now).await?;
    for w in &writers {
        human.push_str(&format!("  warning: {w}\n"));
    }
    // Every rollout change forced over the rules stays visible here.
    let forced: Vec<crate::registry::RolloutChange> = reg
        .rollout_history(&uuid)
        .await?
        .into_iter()
        .filter(|c| c.forced)
        .collect();
    for c in &forced {
        human.push_str(&format!(
            "  rollout FORCED {} → {} by {} at {} ({}){}\n",
            c.from,
            c.to,
            c.changed_by,
            c.changed_at.to_rfc3339(),
            c.reason,
            if c.overrode.is_empty() {
                String::new()
            } else {
                format!(" over: {}", c.overrode.join("; "))
            }
        ));
    }
    for r in &plan.deletion_rights {
        human.push_str(&format!(
            "  deletion right {} ({}) deadline {}: {}{}{}\n",
            r.id,
            r.scope,
            output::ts(r.deadline_ms),
            r.status,
            if r.overdue { ", OVERDUE" } else { "" },
            if r.reasons.is_empty() {
                String::new()
            } else {
                format!(" — {}", r.reasons.join("; "))
            }
        ));
    }
    let safety_gates = match safety {
        None => {
            human.push_str(
                "  safety gates   cannot decide: not evaluated without --trust DIR (and --reports DIR); exit 2\n",
            );
            None
        }
        Some(o) => {
            let trust = crate::evidence::keys::TrustStore::load_dir(&o.trust)?;
            let since = o
                .since
                .as_deref()
                .map(|d| crate::clock::parse_duration(d).map_err(|r| crate::Error::invalid("--since", r)))
                .transpose()?;
            // The weekly gate's window cannot be widened past the policy's `evidenceMaxAge`: a larger `--since`
            // let year-old drill evidence pass the gate that the deleter holds to the policy's age.
            if let (Some(since), Some(text)) = (since, o.since.as_deref())
                && since > policy.evidence_max_age()
            {
                return Err(crate::Error::invalid(
                    "--since",
                    format!(
                        "--since {text} is longer than the policy's evidenceMaxAge of {} ({}): drill evidence older \
                         than that approves no delete, so no gate may count it; give --since {} or less",
                        crate::clock::format_duration(policy.evidence_max_age()),
                        policy.source_name(),
                        crate::clock::format_duration(policy.evidence_max_age()),
                    ),
                ));
            }
            let g = crate::ops::gates::safety_gates(
                &ctx.storage,
                &reg,
                &input,
                &table,
                &plan,
                &policy,
                &crate::ops::gates::ReportSource {
                    reports_uri: o.reports.clone(),
                    trust: &trust,
                    since,
                },
                now,
            )
            .await?;
            for x in &g {
                human.push_str(&format!("  gate {:<26} {}  {}\n", x.name, x.status, x.detail));
            }
            Some(g)
        }
    };
    let safety_ok = safety_gates
        .as_ref()
        .is_none_or(|g| g.iter().all(crate::ops::gates::Gate::passed));
    // Without --trust the drill-report gates cannot be evaluated: the command cannot say the table passes.
    let verdict = if !overdue.is_empty() || !safety_ok {
        Verdict::Findings
    } else if safety_gates.is_none() {
        Verdict::Undecided
    } else {
        Verdict::Ok
    };
    let gate = match verdict {
        Verdict::Ok => "PASS",
        Verdict::Findings => "FAIL",
        Verdict::Undecided => "UNDECIDED",
    };
    let doc = serde_json::json!({
        "table": table.name(),
        "table_uuid": uuid,
        "rollout": stage,
        "deleter": switch,
        "implementation_digest": digest,
        "deletion_rights": plan.deletion_rights,
        "decisions": decisions,
        "overdue": overdue,
        "conflicts": conflicts,
        "writers_open_too_long": writers,
        "rollout_forced": forced,
        "safety_gates": safety_gates,
        "gate": gate,
    });
    let mut doc = doc;
    if verdict == Verdict::Undecided {
        // The exit-2 contract of `--json`: `error` and `exit_code` beside the rest of the report.
        doc["error"] = serde_json::Value::String(
            "cannot decide: the safety gates were not evaluated (give --trust DIR and --reports DIR)".into(),
        );
        doc["exit_code"] = serde_json::json!(2);
    }
    Outcome::new(verdict, &doc, human)
}

/// `lakedrill quarantine extend CANDIDATE --by DUR --reason R`.
///
/// # Errors
/// A malformed duration; an unknown candidate or one not quarantined; registry errors.
pub async fn extend(ctx: &Context, candidate_id: &str, by: &str, reason: &str) -> Result<Outcome> {
    let d = crate::clock::parse_duration(by).map_err(|why| Error::invalid("--by", why))?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let now = ctx.now();
    // An orphan hold a bucket lifecycle rule ends is never extended past that end: the files would be gone before
    // the purge the extension waits for, and no put-back could bring them. The end is the sooner of the rule judged
    // at quarantine (`hold_ends_at`) and the buckets' rules read now (a rule added or shortened since). Rules that
    // cannot be read now do not stop the extension (it only postpones a purge); it warns, naming the bucket.
    let rec = reg.candidate(candidate_id).await?;
    let recorded = rec
        .quarantine
        .as_ref()
        .and_then(|q| q["hold_ends_at"].as_str())
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| {
            let rule = rec
                .quarantine
                .as_ref()
                .and_then(|q| q["hold_lifecycle_rule"]["rule_id"].as_str())
                .unwrap_or("(no ID)");
            (
                t.with_timezone(&chrono::Utc),
                format!("lifecycle rule {rule} of its bucket ends its hold at {{end}} (recorded at quarantine)"),
            )
        });
    let mut end = recorded;
    let mut warnings = Vec::new();
    let mut rules = std::collections::BTreeMap::new();
    for read in crate::ops::orphans::hold_ends_now(&ctx.storage, &mut rules, None, &rec).await {
        match read {
            crate::ops::orphans::HoldEndNow::Ends { at, rule, bucket } => {
                if end.as_ref().is_none_or(|(e, _)| at < *e) {
                    end = Some((
                        at,
                        format!(
                            "lifecycle rule {rule} of bucket {bucket} ends its hold at {{end}} (read now: not the \
                             rule judged at quarantine, added or changed since)"
                        ),
                    ));
                }
            }
            crate::ops::orphans::HoldEndNow::Unreadable { bucket, why } => warnings.push(format!(
                "the lifecycle configuration of bucket {bucket} could not be read now ({why}; reading it needs \
                 s3:GetLifecycleConfiguration): whether a rule added since the quarantine ends the hold of \
                 {candidate_id} before the extended purge is unknown"
            )),
        }
    }
    // The bound is checked inside the registry's write transaction, against the extension in force there: two
    // extensions at once cannot add up past the end of the hold.
    let ext = match reg
        .quarantine_extend(candidate_id, d, reason, now, end.as_ref().map(|(e, _)| *e))
        .await?
    {
        Ok(ext) => ext,
        Err(not_before) => {
            let Some((ends, rule)) = end else {
                return Err(Error::Internal(format!(
                    "{candidate_id}: the registry refused an extension past a hold end that was not given"
                )));
            };
            let why = format!(
                "{candidate_id} cannot be extended to {}: {}, and the held files would be gone before the purge the \
                 extension waits for; purge or release it before then, or change the rule and quarantine the files \
                 again",
                not_before.to_rfc3339(),
                rule.replace("{end}", &ends.to_rfc3339())
            );
            return Outcome::new(
                Verdict::Findings,
                &serde_json::json!({"status": "REFUSED", "reasons": [why], "hold_ends_at": ends, "warnings": warnings}),
                format!("REFUSED: {why}\n"),
            );
        }
    };
    let mut human = format!(
        "{candidate_id}: no purge before {} ({})\n",
        ext.not_before.to_rfc3339(),
        ext.reason
    );
    for w in &warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"status": "EXTENDED", "extension": ext, "warnings": warnings}),
        human,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn aggregate_counts_each_object_once_in_its_latest_category() {
        let obj = |p: &str, reasons: &[&str]| ComparedObject {
            path: p.into(),
            bytes: 1,
            via: None,
            reasons: reasons.iter().map(|r| (*r).to_owned()).collect(),
            kinds: Vec::new(),
        };
        let obs = |id: i64, c: &Comparison| ObservationRecord {
            observation_id: id,
            table_uuid: "t".into(),
            observed_at: chrono::DateTime::from_timestamp_millis(id).unwrap(),
            report: serde_json::json!({"comparison": c}),
        };
        let first = Comparison {
            both: vec![obj("a", &[]), obj("b", &[])],
            only_iceberg: vec![],
            only_lakedrill: vec![],
        };
        let second = Comparison {
            both: vec![obj("b", &[])],
            only_iceberg: vec![obj("a", &["lease:L (snapshot 1)"])],
            only_lakedrill: vec![obj("c", &[])],
        };
        let cats = aggregate(&[obs(1, &first), obs(2, &second)]).unwrap();
        assert_eq!(
            cats["both"].iter().map(|o| o.path.as_str()).collect::<Vec<_>>(),
            vec!["b"]
        );
        assert_eq!(cats["only_iceberg"][0].reasons, vec!["lease:L (snapshot 1)"]);
        assert_eq!(cats["only_lakedrill"][0].path, "c");
        let mut broken = obs(3, &second);
        broken.report = serde_json::json!({"comparison": 7});
        assert!(aggregate(&[broken]).is_err());
    }
}
