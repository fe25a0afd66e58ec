//! The comparison with plain Iceberg maintenance (pure): what lakedrill's plan and what Iceberg's own
//! `expire_snapshots` and `remove_orphan_files` with the plan's baseline ([`crate::govern::baseline`]) would
//! delete at one table generation, object by object, with every reason lakedrill kept what only Iceberg would
//! delete (the plan's differences).
//!
//! It deletes nothing and reads nothing; `rollout report` records it as an observation. May use `model` and
//! the ground.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::govern::closure::{self, Plan, PlanInput};

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

/// Compares the plan with plain `expire_snapshots` and plain `remove_orphan_files` at the plan's baseline
/// ([`Plan::plain_expire`], [`Plan::plain_orphans`]); the reasons are the plan's differences (pure).
#[must_use]
pub fn compare(input: &PlanInput, plan: &Plan) -> Comparison {
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for o in closure::distinct_objects(input.snapshots.iter().filter_map(|s| s.objects.as_ref())) {
        sizes.insert(o.path.as_str(), o.size);
    }
    for l in input.listing.iter().flatten() {
        sizes.entry(l.path.as_str()).or_insert(l.size);
    }
    let mut iceberg: BTreeMap<&str, &'static str> = BTreeMap::new();
    for p in &plan.plain_orphans.objects {
        iceberg.insert(p.as_str(), "remove_orphan_files");
    }
    for p in &plan.plain_expire.objects {
        iceberg.insert(p.as_str(), "expire_snapshots");
    }
    let why: BTreeMap<&str, &Vec<String>> = plan
        .differences
        .iter()
        .map(|d| (d.subject.as_str(), &d.reasons))
        .collect();
    let lakedrill: BTreeSet<&str> = plan
        .candidates
        .iter()
        .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
        .collect();
    let object = |path: &str, via: Option<&str>, reasons: Vec<String>| {
        let kinds: BTreeSet<&str> = reasons.iter().map(|r| kind_of(r)).collect();
        ComparedObject {
            path: path.to_owned(),
            bytes: sizes.get(path).copied().unwrap_or(0),
            via: via.map(str::to_owned),
            kinds: kinds.into_iter().map(str::to_owned).collect(),
            reasons,
        }
    };
    let mut out = Comparison::default();
    for (path, via) in &iceberg {
        if lakedrill.contains(path) {
            out.both.push(object(path, None, Vec::new()));
            continue;
        }
        let mut reasons = Vec::new();
        for r in why.get(path).into_iter().flat_map(|v| v.iter()) {
            push_unique(&mut reasons, r.clone());
        }
        if reasons.is_empty() {
            reasons.push("unreadable: lakedrill could not establish that nothing references it".into());
        }
        out.only_iceberg.push(object(path, Some(via), reasons));
    }
    for path in lakedrill {
        if !iceberg.contains_key(path) {
            out.only_lakedrill.push(object(path, None, Vec::new()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use super::*;
    use crate::govern::closure::{ListedObject, Protections, RefInfo, SnapshotInfo, TableDefaults};

    const DAY: i64 = 24 * 3600 * 1000;

    fn snap(id: i64, parent: Option<i64>, ts: i64, files: &[&str]) -> SnapshotInfo {
        crate::govern::input::test_snapshot(id, parent, ts, files, 7)
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
                listed("data/staging/w/part-0", 5 * DAY),
                listed("data/fresh", DAY / 24),
                listed("data/old-orphan", 4 * DAY),
            ]),
            protections: Protections::default(),
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
            baseline: crate::govern::input::Baseline::relative(now, DAY, 3 * DAY),
            statistics_files: BTreeMap::new(),
        };
        input.protections.leases.push((1, "L".into()));
        input.protections.writers.push(("W".into(), "data/staging/w".into()));
        let plan = crate::govern::closure::plan(&input);
        let c = compare(&input, &plan);
        let paths = |v: &[ComparedObject]| v.iter().map(|o| o.path.clone()).collect::<Vec<_>>();
        // Snapshot 2 is expired by both; the old orphan is deleted by both.
        assert_eq!(paths(&c.both), vec!["data/old-orphan", "ml-2"]);
        // The leased snapshot's exclusive files, the writer's staged file; the fresh file is younger than plain's 3 days.
        assert_eq!(paths(&c.only_iceberg), vec!["data/a", "data/staging/w/part-0", "ml-1"]);
        let by = |p: &str| c.only_iceberg.iter().find(|o| o.path == p).unwrap();
        assert_eq!(by("ml-1").kinds, vec!["lease"]);
        assert_eq!(by("ml-1").reasons, vec!["lease:L (snapshot 1)"]);
        assert_eq!(by("ml-1").via.as_deref(), Some("expire_snapshots"));
        assert_eq!(by("data/staging/w/part-0").kinds, vec!["writer"]);
        assert_eq!(by("data/staging/w/part-0").via.as_deref(), Some("remove_orphan_files"));
        assert!(c.only_lakedrill.is_empty());
        // A plain job with a shorter threshold also deletes the fresh file lakedrill keeps for the safety interval.
        input.baseline.orphans_older_than_ms = now - 1000;
        let plan = crate::govern::closure::plan(&input);
        let c = compare(&input, &plan);
        let fresh = c.only_iceberg.iter().find(|o| o.path == "data/fresh").unwrap();
        assert_eq!(fresh.kinds, vec!["safety-interval"]);
        assert_eq!(fresh.bytes, 5);
    }
}
