//! Rollout safety: per-table rollout stages, the comparison with plain Iceberg maintenance, the
//! implementation-digest binding, and the table-level gates report.
//!
//! - [`set`] moves a table between `report-only` (the default for every table), `test`, `cohort:NAME` and
//!   `enabled`, recording who, why, when and the policy digest. `test` requires a policy that declares
//!   `regulatedData: false`; every stage that deletes requires a policy bound to the table. The deleter refuses
//!   tables in `report-only` inside its acceptance transaction.
//! - [`report`] compares lakedrill's candidates with what plain `expire_snapshots` (same `minSnapshotAge`,
//!   the table's own retention) and plain `remove_orphan_files` (`--orphan-older-than`, Iceberg's default 3 days)
//!   would delete, records the comparison as an observation, and aggregates the observations of the period:
//!   objects both would delete, only Iceberg would delete (with each reason lakedrill kept it), only lakedrill
//!   would delete.
//! - [`crate::ops::binding::digest_binding`] compares the running binary's SHA-256 with the policy's
//!   `reclamationImplementationDigest`: `quarantine` and `purge` refuse on a mismatch; an unpinned policy allows
//!   any build and is reported as a warning.
//!
//! What it does not do: [`compare`] is pure and deletes nothing; `report` never changes a table. The
//! comparison models plain Iceberg maintenance from the table's metadata and one listing; it does not run Spark.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::govern::closure::{self, Plan, PlanInput};
use crate::govern::policy::Policy;
use crate::ops::context::Context;
use crate::registry::{ObservationRecord, RolloutStage};
use crate::report::output::{self, Outcome, Verdict};
use crate::table::TableSource;

/// Iceberg's default `older_than` for `remove_orphan_files` (3 days).
pub const DEFAULT_PLAIN_ORPHAN_OLDER_THAN: &str = "3d";

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
    let c = reg
        .rollout_set(
            &uuid,
            &crate::ops::plan::policy_name(&table),
            &stage,
            reason,
            by,
            policy.as_ref().map(Policy::digest),
            ctx.now(),
        )
        .await?;
    let human = format!(
        "{} ({uuid}): rollout stage {} → {} by {} at {} ({})\n",
        table.name(),
        c.from,
        c.to,
        c.changed_by,
        c.changed_at.to_rfc3339(),
        c.reason
    );
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
                    c.reason.clone(),
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

/// One object of the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparedObject {
    /// Path relative to the table location.
    pub path: String,
    /// Size in bytes (0 when unknown).
    pub bytes: u64,
    /// For objects only Iceberg would delete: `expire_snapshots` or `remove_orphan_files`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// For objects only Iceberg would delete: every reason lakedrill kept it (`lease:<id> (snapshot N)`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// The reasons' kinds: `lease`, `hold`, `writer`, `checkpoint`, `safety-interval`, `ownership`, `unreadable`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
}

/// What lakedrill and plain Iceberg maintenance would delete at one table generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Comparison {
    /// Both would delete.
    pub both: Vec<ComparedObject>,
    /// Only plain Iceberg maintenance would delete (lakedrill kept them).
    pub only_iceberg: Vec<ComparedObject>,
    /// Only lakedrill would delete.
    pub only_lakedrill: Vec<ComparedObject>,
}

fn push_unique(v: &mut Vec<String>, r: String) {
    if !v.contains(&r) {
        v.push(r);
    }
}

fn kind_of(reason: &str) -> &'static str {
    let head = reason.split(':').next().unwrap_or(reason);
    match head {
        "lease" => "lease",
        "hold" => "hold",
        "writer" => "writer",
        "checkpoint" => "checkpoint",
        "safety-interval" => "safety-interval",
        "unreadable" => "unreadable",
        // A ref, a protected ref, branch retention, the current snapshot, minSnapshotAge or a deletion right in
        // conflict: a snapshot the table still owns references the object.
        _ => "ownership",
    }
}

/// Compares the plan with plain `expire_snapshots` and plain `remove_orphan_files` older than
/// `plain_orphan_older_than_ms` (pure).
#[must_use]
pub fn compare(input: &PlanInput, plan: &Plan, plain_orphan_older_than_ms: i64) -> Comparison {
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    let mut referenced: BTreeSet<&str> = BTreeSet::new();
    for o in closure::distinct_objects(input.snapshots.iter().filter_map(|s| s.objects.as_ref())) {
        sizes.insert(o.path.as_str(), o.size);
        referenced.insert(o.path.as_str());
    }
    let listing = input.listing.as_deref().unwrap_or_default();
    for l in listing {
        sizes.entry(l.path.as_str()).or_insert(l.size);
    }
    let all_known = input.snapshots.iter().all(|s| s.objects.is_some());
    // Plain remove_orphan_files: unreferenced, not live metadata, older than its threshold; nothing else.
    let mut iceberg: BTreeMap<String, &'static str> = plan
        .plain_expire
        .objects
        .iter()
        .map(|p| (p.clone(), "expire_snapshots"))
        .collect();
    let mut orphan_age: BTreeMap<&str, i64> = BTreeMap::new();
    if all_known {
        for l in listing {
            let name = l.path.rsplit('/').next().unwrap_or(&l.path);
            let auxiliary = l.path == "metadata/version-hint.text" || (name.starts_with('.') && name.ends_with(".crc"));
            if referenced.contains(l.path.as_str()) || input.live_metadata_files.contains(&l.path) || auxiliary {
                continue;
            }
            orphan_age.insert(l.path.as_str(), input.now_ms - l.last_modified_ms);
            if input.now_ms - l.last_modified_ms > plain_orphan_older_than_ms {
                iceberg.entry(l.path.clone()).or_insert("remove_orphan_files");
            }
        }
    }
    let lakedrill: BTreeSet<&str> = plan
        .candidates
        .iter()
        .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
        .collect();
    let size = |p: &str| sizes.get(p).copied().unwrap_or(0);
    let mut out = Comparison::default();
    for (path, via) in &iceberg {
        if lakedrill.contains(path.as_str()) {
            out.both.push(ComparedObject {
                path: path.clone(),
                bytes: size(path),
                via: None,
                reasons: Vec::new(),
                kinds: Vec::new(),
            });
            continue;
        }
        let mut reasons = Vec::new();
        for (w, p) in &input.protections.writers {
            if closure::under(path, p) {
                push_unique(&mut reasons, format!("writer:{w} ({p})"));
            }
        }
        for (h, scope) in &input.protections.holds {
            match scope {
                closure::HoldScope::Prefix(p) if closure::under(path, p) => {
                    push_unique(&mut reasons, format!("hold:{h} ({p})"))
                }
                closure::HoldScope::Table => push_unique(&mut reasons, format!("hold:{h} (table)")),
                _ => {}
            }
        }
        for d in &plan.differences {
            if &d.subject == path {
                for r in &d.reasons {
                    push_unique(&mut reasons, r.clone());
                }
            }
        }
        for p in &plan.protected {
            let refs = input
                .snapshots
                .iter()
                .find(|s| s.snapshot_id == p.snapshot_id)
                .and_then(|s| s.objects.as_ref())
                .is_some_and(|o| o.iter().any(|o| &o.path == path));
            if refs {
                p.reasons
                    .iter()
                    .map(|r| format!("{r} (snapshot {})", p.snapshot_id))
                    .for_each(|r| push_unique(&mut reasons, r));
            }
        }
        if let Some(age) = orphan_age.get(path.as_str())
            && *age <= input.orphan_safety_interval_ms
        {
            push_unique(
                &mut reasons,
                format!(
                    "safety-interval: {} s old, orphanSafetyInterval is {} s",
                    age / 1000,
                    input.orphan_safety_interval_ms / 1000
                ),
            );
        }
        if reasons.is_empty() {
            reasons.push("unreadable: lakedrill could not establish that nothing references it".into());
        }
        let kinds: BTreeSet<&str> = reasons.iter().map(|r| kind_of(r)).collect();
        out.only_iceberg.push(ComparedObject {
            path: path.clone(),
            bytes: size(path),
            via: Some((*via).to_owned()),
            reasons,
            kinds: kinds.into_iter().map(str::to_owned).collect(),
        });
    }
    for path in lakedrill {
        if !iceberg.contains_key(path) {
            out.only_lakedrill.push(ComparedObject {
                path: path.to_owned(),
                bytes: size(path),
                via: None,
                reasons: Vec::new(),
                kinds: Vec::new(),
            });
        }
    }
    out
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

/// `lakedrill rollout report --policy P [--since DUR] [--orphan-older-than DUR]` (table addressed).
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
    plain_orphan_older_than: &str,
) -> Result<Outcome> {
    let dur = |field: &str, v: &str| {
        crate::govern::policy::parse_duration(field, v).map_err(|e| Error::invalid(field.to_owned(), e.to_string()))
    };
    let since_d = dur("--since", since)?;
    let orphan_d = dur("--orphan-older-than", plain_orphan_older_than)?;
    let policy = crate::govern::policy::load(policy_path)?;
    let table = crate::ops::plan::bound_table(ctx, source, &policy).await?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let now = ctx.now();
    let input = crate::ops::plan::gather(ctx, &table, &policy, &reg, now, None).await?;
    let plan = closure::plan(&input);
    let cmp = compare(&input, &plan, orphan_d.num_milliseconds());
    let uuid = table.metadata().uuid().to_string();
    let observation = serde_json::json!({
        "metadata_location": table.generation().metadata_location,
        "policy_digest": policy.digest(),
        "plain_orphan_older_than": plain_orphan_older_than,
        "comparison": cmp,
    });
    reg.observation_add(&uuid, &observation, now).await?;
    let from: DateTime<Utc> = now - since_d;
    let observations = reg.observations(&uuid, from).await?;
    let mut cats = aggregate(&observations)?;
    let stage = reg.rollout_stage(&uuid).await?;
    let both = bucket(cats.remove("both").unwrap_or_default());
    let only_iceberg = bucket(cats.remove("only_iceberg").unwrap_or_default());
    let only_lakedrill = bucket(cats.remove("only_lakedrill").unwrap_or_default());
    let mut human = format!(
        "{} ({uuid}), rollout stage {}: {} observation(s) since {}\nplain maintenance modelled as expire_snapshots(older than minSnapshotAge) + remove_orphan_files(older than {plain_orphan_older_than})\n",
        table.name(),
        stage.stage,
        observations.len(),
        from.to_rfc3339()
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
            "plain_orphan_older_than": plain_orphan_older_than,
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
/// also the six safety gates of DESIGN §7 ([`crate::ops::gates`]). Exit 1 when a deletion-right request is past
/// its deadline and not fulfilled, or a safety gate fails.
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
        human.push_str(&format!("  warning: {m}\n"));
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
            human.push_str("  safety gates   not evaluated (give --trust DIR and --reports DIR)\n");
            None
        }
        Some(o) => {
            let trust = crate::evidence::keys::TrustStore::load_dir(&o.trust)?;
            let since = o
                .since
                .as_deref()
                .map(|d| crate::clock::parse_duration(d).map_err(|r| crate::Error::invalid("--since", r)))
                .transpose()?;
            let g = crate::ops::gates::safety_gates(
                &ctx.storage,
                &reg,
                &input,
                &plan,
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
    let verdict = if overdue.is_empty() && safety_ok {
        Verdict::Ok
    } else {
        Verdict::Findings
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
        "safety_gates": safety_gates,
        "gate": if overdue.is_empty() && safety_ok { "PASS" } else { "FAIL" },
    });
    Outcome::new(verdict, &doc, human)
}

/// `lakedrill quarantine extend CANDIDATE --by DUR --reason R`.
///
/// # Errors
/// A malformed duration; an unknown candidate or one not quarantined; registry errors.
pub async fn extend(ctx: &Context, candidate_id: &str, by: &str, reason: &str) -> Result<Outcome> {
    let d = crate::govern::policy::parse_duration("--by", by).map_err(|e| Error::invalid("--by", e.to_string()))?;
    let reg = crate::ops::plan::registry(ctx).await?;
    let ext = reg.quarantine_extend(candidate_id, d, reason, ctx.now()).await?;
    let human = format!(
        "{candidate_id}: no purge before {} ({})\n",
        ext.not_before.to_rfc3339(),
        ext.reason
    );
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"status": "EXTENDED", "extension": ext}),
        human,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use super::*;
    use crate::bundle::Layer;
    use crate::govern::closure::{ListedObject, ObjectRef, Protections, RefInfo, SnapshotInfo, TableDefaults};

    const DAY: i64 = 24 * 3600 * 1000;

    fn snap(id: i64, parent: Option<i64>, ts: i64, files: &[&str]) -> SnapshotInfo {
        SnapshotInfo {
            snapshot_id: id,
            parent_id: parent,
            timestamp_ms: ts,
            objects: Some(
                files
                    .iter()
                    .map(|f| ObjectRef {
                        path: (*f).into(),
                        layer: Layer::Data,
                        size: 7,
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn compare_sorts_each_object_and_names_why_lakedrill_kept_it() {
        let now = 100 * DAY;
        let listed = |p: &str, age: i64| ListedObject {
            path: p.into(),
            size: 5,
            last_modified_ms: now - age,
        };
        let mut input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![
                snap(1, None, now - 9 * DAY, &["ml-1", "data/a"]),
                snap(2, Some(1), now - 8 * DAY, &["ml-2", "data/b"]),
                snap(3, Some(2), now - 7 * DAY, &["ml-3", "data/b"]),
            ],
            refs: vec![RefInfo {
                name: "main".into(),
                snapshot_id: 3,
                is_branch: true,
                max_ref_age_ms: None,
                max_snapshot_age_ms: Some(1),
                min_snapshots_to_keep: None,
            }],
            current_snapshot_id: Some(3),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: Some(vec![
                listed("data/_staging/w/part-0", 5 * DAY),
                listed("data/fresh", DAY / 24),
                listed("data/old-orphan", 4 * DAY),
            ]),
            protections: Protections::default(),
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
        };
        input.protections.leases.push((1, "L".into()));
        input.protections.writers.push(("W".into(), "data/_staging/w".into()));
        let plan = crate::govern::closure::plan(&input);
        let c = compare(&input, &plan, 3 * DAY);
        let paths = |v: &[ComparedObject]| v.iter().map(|o| o.path.clone()).collect::<Vec<_>>();
        // Snapshot 2 is expired by both; the old orphan is deleted by both.
        assert_eq!(paths(&c.both), vec!["data/old-orphan", "ml-2"]);
        // The leased snapshot's exclusive files, the writer's staged file; the fresh file is younger than plain's 3 days.
        assert_eq!(paths(&c.only_iceberg), vec!["data/_staging/w/part-0", "data/a", "ml-1"]);
        let by = |p: &str| c.only_iceberg.iter().find(|o| o.path == p).unwrap();
        assert_eq!(by("ml-1").kinds, vec!["lease"]);
        assert_eq!(by("ml-1").reasons, vec!["lease:L (snapshot 1)"]);
        assert_eq!(by("ml-1").via.as_deref(), Some("expire_snapshots"));
        assert_eq!(by("data/_staging/w/part-0").kinds, vec!["writer"]);
        assert_eq!(by("data/_staging/w/part-0").via.as_deref(), Some("remove_orphan_files"));
        assert!(c.only_lakedrill.is_empty());
        // A plain job with a shorter threshold also deletes the fresh file lakedrill keeps for the safety interval.
        let c = compare(&input, &plan, 1000);
        let fresh = c.only_iceberg.iter().find(|o| o.path == "data/fresh").unwrap();
        assert_eq!(fresh.kinds, vec!["safety-interval"]);
        assert_eq!(fresh.bytes, 5);
    }

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
