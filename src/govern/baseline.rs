//! The baseline: exactly what Iceberg Java's own maintenance would remove at one table generation (pure).
//!
//! lakedrill's candidates are judged against what the operator's existing jobs do, so the baseline is
//! Iceberg's rule, not a model of it with lakedrill's own ages:
//!
//! - [`plain_expire`] is `ExpireSnapshots.expireOlderThan(T).retainLast(N)` (`RemoveSnapshots` in Iceberg
//!   1.9): `main` and every other ref whose head is younger than its `max-ref-age-ms` (the ref's own, else
//!   `history.expire.max-ref-age-ms`, else forever) are kept; each kept branch keeps its ancestors while fewer
//!   than its `min-snapshots-to-keep` (the branch's own, else `N`, else `history.expire.min-snapshots-to-keep`)
//!   are kept or while they are not older than its own `max-snapshot-age-ms` (else `T`), stopping at the
//!   first that is neither; a snapshot no kept ref reaches is kept when not older than `T`. Everything else
//!   expires. The objects removed are those reachable before (manifest lists, manifests, live data and delete
//!   entries, statistics files) minus those reachable after: `ExpireSnapshotsSparkAction`'s reachable cleanup.
//!   Metadata JSON files are never counted (Iceberg leaves them to `write.metadata.delete-after-commit`), nor
//!   Hadoop `.crc` sidecars (they are not table files).
//! - [`plain_orphans`] is `DeleteOrphanFiles.olderThan(T)`: every listed file under the table location whose
//!   modification time is before `T`, that is not hidden (no path segment starts with `.`, or with `_` unless
//!   it is a `_name=value` partition folder), and that no snapshot, metadata file of the metadata log, the
//!   current metadata file, `metadata/version-hint.text` or statistics file names.
//!
//! The oracle test (`tests/it/oracle.rs`) checks both against Iceberg Java through Spark, file by file.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashSet;
use rayon::prelude::*;

use serde::{Deserialize, Serialize};

use crate::govern::input::{PlanInput, SnapshotInfo};
use crate::model::object::{distinct_objects, path_set};

/// What plain `expire_snapshots` would remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PlainExpire {
    /// Snapshots it would expire.
    pub snapshot_ids: Vec<i64>,
    /// Objects it would then remove.
    pub objects: Vec<String>,
}

/// What plain `DeleteOrphanFiles` would remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PlainOrphans {
    /// Paths relative to the table location, sorted.
    pub objects: Vec<String>,
}

/// Whether Iceberg's orphan listing skips the path: a segment starting with `.`, or with `_` unless it is a
/// partition folder (`_name=value`).
#[must_use]
pub fn hidden(path: &str) -> bool {
    let mut segments = path.split('/').peekable();
    while let Some(s) = segments.next() {
        let folder = segments.peek().is_some();
        if s.starts_with('.') || (s.starts_with('_') && !(folder && s.contains('='))) {
            return true;
        }
    }
    false
}

/// Whether the path is a Hadoop checksum sidecar (`.name.crc`), which is not a table file.
#[must_use]
pub fn crc_sidecar(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with('.') && name.ends_with(".crc")
}

/// The ancestors of `head`, head first, stopping at a missing parent or a cycle.
fn ancestors<'a>(by_id: &BTreeMap<i64, &'a SnapshotInfo>, head: i64) -> Vec<&'a SnapshotInfo> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut cur = Some(head);
    while let Some(id) = cur {
        let Some(s) = by_id.get(&id) else { break };
        if !seen.insert(id) {
            break;
        }
        out.push(*s);
        cur = s.parent_id;
    }
    out
}

/// The snapshots Iceberg's `expire_snapshots` would remove with this baseline, sorted.
#[must_use]
pub fn expired_snapshots(input: &PlanInput) -> Vec<i64> {
    let b = &input.baseline;
    let by_id: BTreeMap<i64, &SnapshotInfo> = input.snapshots.iter().map(|s| (s.snapshot_id, s)).collect();
    let mut keep: BTreeSet<i64> = BTreeSet::new();
    let mut referenced: BTreeSet<i64> = BTreeSet::new();
    let min_keep_default = b.retain_last.unwrap_or(input.defaults.min_snapshots_to_keep);
    for r in &input.refs {
        let Some(head) = by_id.get(&r.snapshot_id) else {
            continue; // Iceberg removes a ref whose snapshot does not exist
        };
        if r.name != "main" {
            let max_ref_age = r.max_ref_age_ms.or(input.defaults.max_ref_age_ms).unwrap_or(i64::MAX);
            if input.now_ms.saturating_sub(head.timestamp_ms) > max_ref_age {
                continue; // the ref expires, and with it what only it kept
            }
        }
        keep.insert(r.snapshot_id);
        if !r.is_branch {
            referenced.insert(r.snapshot_id);
            continue;
        }
        let older_than = r
            .max_snapshot_age_ms
            .map_or(b.older_than_ms, |a| input.now_ms.saturating_sub(a));
        let min_keep = usize::try_from(r.min_snapshots_to_keep.unwrap_or(min_keep_default)).unwrap_or(0);
        let chain = ancestors(&by_id, r.snapshot_id);
        referenced.extend(chain.iter().map(|s| s.snapshot_id));
        let mut kept = 0usize;
        for s in chain {
            if kept < min_keep || s.timestamp_ms >= older_than {
                keep.insert(s.snapshot_id);
                kept += 1;
            } else {
                break;
            }
        }
    }
    // A table without refs (format v1 written without them) still has its current snapshot as `main`.
    if let Some(c) = input
        .current_snapshot_id
        .filter(|_| !input.refs.iter().any(|r| r.name == "main"))
    {
        keep.insert(c);
    }
    for s in &input.snapshots {
        if !referenced.contains(&s.snapshot_id) && s.timestamp_ms >= b.older_than_ms {
            keep.insert(s.snapshot_id);
        }
    }
    by_id.keys().copied().filter(|id| !keep.contains(id)).collect()
}

/// Iceberg's `expire_snapshots` with this baseline: the snapshots and the objects it would remove.
#[must_use]
pub fn plain_expire(input: &PlanInput) -> PlainExpire {
    let expired = expired_snapshots(input);
    let gone: HashSet<i64> = expired.iter().copied().collect();
    let stats = |ids: &mut dyn Iterator<Item = i64>| -> BTreeSet<&str> {
        ids.filter_map(|id| input.statistics_files.get(&id))
            .flat_map(|v| v.iter().map(String::as_str))
            .collect()
    };
    let mut after = path_set(
        &distinct_objects(
            input
                .snapshots
                .iter()
                .filter(|s| !gone.contains(&s.snapshot_id))
                .filter_map(|s| s.objects.as_ref()),
        ),
        input.distinct_paths_hint(),
    );
    after.extend(stats(
        &mut input
            .snapshots
            .iter()
            .map(|s| s.snapshot_id)
            .filter(|id| !gone.contains(id)),
    ));
    let mut objects: BTreeSet<String> = distinct_objects(
        input
            .snapshots
            .iter()
            .filter(|s| gone.contains(&s.snapshot_id))
            .filter_map(|s| s.objects.as_ref()),
    )
    .into_iter()
    .map(|o| o.path.as_str())
    .chain(stats(&mut expired.iter().copied()))
    .filter(|p| !after.contains(p))
    .map(str::to_owned)
    .collect();
    objects.retain(|p| !crc_sidecar(p));
    PlainExpire {
        snapshot_ids: expired,
        objects: objects.into_iter().collect(),
    }
}

/// Every path some snapshot's layers or the metadata's statistics files name: what is never an orphan.
#[must_use]
pub fn referenced_paths(input: &PlanInput) -> HashSet<&str> {
    let mut set = path_set(
        &distinct_objects(input.snapshots.iter().filter_map(|s| s.objects.as_ref())),
        input.distinct_paths_hint(),
    );
    set.extend(
        input
            .statistics_files
            .values()
            .flat_map(|v| v.iter().map(String::as_str)),
    );
    set
}

/// Iceberg's `DeleteOrphanFiles` with this baseline; empty when some snapshot's layers could not be read
/// (Iceberg would fail; lakedrill cannot know what they reference) or when there is no listing.
#[must_use]
pub fn plain_orphans(input: &PlanInput) -> PlainOrphans {
    let referenced = referenced_paths(input);
    plain_orphans_among(input, &|p| referenced.contains(p))
}

/// [`plain_orphans`] given `referenced`, whether a path is among the [`referenced_paths`] of `input` (a caller that
/// has them already).
#[must_use]
pub fn plain_orphans_among(input: &PlanInput, referenced: &(dyn Fn(&str) -> bool + Sync)) -> PlainOrphans {
    let Some(listing) = &input.listing else {
        return PlainOrphans::default();
    };
    if input.snapshots.iter().any(|s| s.objects.is_none()) {
        return PlainOrphans::default();
    }
    // Every listed object is judged (200k on a Spark-written table): in parallel.
    let mut objects: Vec<String> = listing
        .par_iter()
        .with_min_len(4096)
        .filter(|l| l.last_modified_ms < input.baseline.orphans_older_than_ms)
        .filter(|l| !hidden(&l.path))
        .filter(|l| l.path != "metadata/version-hint.text")
        .filter(|l| !referenced(l.path.as_str()) && !input.live_metadata_files.contains(&l.path))
        .map(|l| l.path.clone())
        .collect();
    // Equal paths are indistinguishable: the unstable sort orders them as the stable one.
    objects.par_sort_unstable();
    PlainOrphans { objects }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use crate::govern::input::{Baseline, Protections, RefInfo, TableDefaults};
    use crate::model::object::ListedObject;

    const DAY: i64 = 24 * 3600 * 1000;

    fn snap(id: i64, parent: Option<i64>, ts: i64, files: &[&str]) -> SnapshotInfo {
        crate::govern::input::test_snapshot(id, parent, ts, files, 1)
    }

    fn branch(name: &str, head: i64, age: Option<i64>, keep: Option<i32>) -> RefInfo {
        RefInfo {
            name: name.into(),
            snapshot_id: head,
            is_branch: true,
            max_ref_age_ms: None,
            max_snapshot_age_ms: age,
            min_snapshots_to_keep: keep,
        }
    }

    /// main: 1 <- 2 <- 3 <- 4; branch b: 2 <- 5 <- 6; tag t on 1 (max-ref-age 20 days); 7 unreferenced.
    fn input(now: i64) -> PlanInput {
        PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![
                snap(1, None, now - 30 * DAY, &["ml-1", "a"]),
                snap(2, Some(1), now - 20 * DAY, &["ml-2", "a", "b"]),
                snap(3, Some(2), now - 10 * DAY, &["ml-3", "c"]),
                snap(4, Some(3), now - 2 * DAY, &["ml-4", "c", "d"]),
                snap(5, Some(2), now - 9 * DAY, &["ml-5", "b", "e"]),
                snap(6, Some(5), now - 8 * DAY, &["ml-6", "e"]),
                snap(7, Some(3), now - 3 * DAY, &["ml-7", "f"]),
            ],
            refs: vec![
                branch("main", 4, None, None),
                branch("b", 6, None, None),
                RefInfo {
                    name: "t".into(),
                    snapshot_id: 1,
                    is_branch: false,
                    max_ref_age_ms: Some(20 * DAY),
                    max_snapshot_age_ms: None,
                    min_snapshots_to_keep: None,
                },
            ],
            current_snapshot_id: Some(4),
            defaults: TableDefaults::default(),
            live_metadata_files: ["metadata/v9.metadata.json".to_owned()].into(),
            unreadable: BTreeMap::new(),
            listing: None,
            protections: Protections::default(),
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
            baseline: Baseline::relative(now, DAY, 3 * DAY),
            statistics_files: BTreeMap::new(),
        }
    }

    #[test]
    fn expiry_is_icebergs_rule_for_branches_tags_and_unreferenced_snapshots() {
        let now = 100 * DAY;
        let mut i = input(now);
        // older_than = now - 1 day applies to every branch without its own age (not the 5-day table default):
        // main keeps only its head, b only its head; the tag is older than its max-ref-age and goes; 7 is
        // unreferenced and older than older_than.
        assert_eq!(expired_snapshots(&i), vec![1, 2, 3, 5, 7]);
        let e = plain_expire(&i);
        assert_eq!(e.objects, ["a", "b", "f", "ml-1", "ml-2", "ml-3", "ml-5", "ml-7"]);
        // retain_last 2: each branch keeps two; a branch's own settings win over the job's.
        i.baseline.retain_last = Some(2);
        assert_eq!(expired_snapshots(&i), vec![1, 2, 7]);
        i.refs[1] = branch("b", 6, Some(DAY), Some(3));
        assert_eq!(expired_snapshots(&i), vec![1, 7]);
        // An older_than before everything keeps every snapshot a kept ref reaches or that is young enough;
        // the walk along a branch stops at the first snapshot neither young nor within min-snapshots-to-keep.
        i.baseline = Baseline::relative(now, 15 * DAY, DAY);
        i.refs[1] = branch("b", 6, None, None);
        assert_eq!(expired_snapshots(&i), vec![1, 2]);
        // A statistics file of an expired snapshot is removed with it; one of a kept snapshot is not.
        i.statistics_files.insert(1, vec!["metadata/s1.stats".into()]);
        i.statistics_files.insert(4, vec!["metadata/s4.stats".into()]);
        let e = plain_expire(&i);
        assert!(e.objects.contains(&"metadata/s1.stats".to_owned()));
        assert!(!e.objects.contains(&"metadata/s4.stats".to_owned()));
    }

    #[test]
    fn orphans_are_icebergs_rule_hidden_files_live_metadata_and_statistics_excluded() {
        let now = 100 * DAY;
        let mut i = input(now);
        let listed = |p: &str, age: i64| ListedObject {
            path: p.into(),
            size: 1,
            last_modified_ms: now - age,
        };
        i.statistics_files.insert(4, vec!["metadata/s4.stats".into()]);
        i.listing = Some(vec![
            listed("a", 40 * DAY),
            listed("data/old.parquet", 5 * DAY),
            listed("data/new.parquet", DAY),
            listed("data/.hidden", 5 * DAY),
            listed("data/_tmp/x.parquet", 5 * DAY),
            listed("data/_p=1/y.parquet", 5 * DAY),
            listed("metadata/v9.metadata.json", 5 * DAY),
            listed("metadata/v8.metadata.json", 5 * DAY),
            listed("metadata/version-hint.text", 5 * DAY),
            listed("metadata/s4.stats", 5 * DAY),
        ]);
        assert_eq!(
            plain_orphans(&i).objects,
            vec!["data/_p=1/y.parquet", "data/old.parquet", "metadata/v8.metadata.json"]
        );
        // Unknown layers: Iceberg would fail, lakedrill proposes nothing.
        i.snapshots[0].objects = None;
        assert!(plain_orphans(&i).objects.is_empty());
    }

    #[test]
    fn hidden_paths_follow_iceberg() {
        assert!(hidden("data/.hidden"));
        assert!(hidden("data/_tmp/x.parquet"));
        assert!(hidden("data/.x.parquet.crc"));
        assert!(hidden("_SUCCESS"));
        assert!(!hidden("data/_part=1/x.parquet"));
        assert!(
            hidden("data/_part=1"),
            "a file named like a partition folder is still hidden"
        );
        assert!(!hidden("data/part=1/x.parquet"));
        assert!(crc_sidecar("metadata/.v1.metadata.json.crc"));
        assert!(!crc_sidecar("metadata/v1.metadata.json"));
    }
}
