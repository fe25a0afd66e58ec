//! The protected closure and the deletion candidates of one table generation (report-only).
//!
//! From one fixed table generation, [`plan`] computes which snapshots must be kept and why —
//! every ref head, the history each branch's retention keeps, the policy's `protectedRefs`, the
//! `minSnapshotAge` floor, valid reader leases, disaster-recovery checkpoints, legal holds — and
//! which objects are reachable *only* from the other snapshots. Those objects, minus anything
//! under an open writer's prefix or a held prefix, form the candidate inventory, with a root
//! digest. Unreferenced files under the table location ("orphans") become candidates only when
//! older than `orphanSafetyInterval`, outside every writer prefix, and inside the table's own
//! location (segment-wise, so `orders_v2/` is never part of `orders/`).
//!
//! Beside it, [`plan`] computes what Iceberg's plain `expire_snapshots` with the same age would
//! have removed, and every difference with the reason the registry saved it.
//!
//! The safety invariant, checked by a property test over random histories: **no candidate object
//! is reachable from a retained snapshot**. When some snapshot's layers cannot be read, lakedrill
//! cannot know what it references: orphan detection is switched off, and a retained snapshot
//! with unknown layers is an error.
//!
//! This module is pure: it reads nothing and changes nothing. Refs are never dropped implicitly:
//! a ref whose `max-ref-age-ms` has passed still protects its snapshot until someone removes it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use foldhash::{HashMap, HashSet};
use rayon::prelude::*;

use serde::{Deserialize, Serialize};

pub use crate::govern::baseline::{PlainExpire, PlainOrphans};
pub use crate::govern::input::{
    Baseline, DeletionRight, DeletionRightStatus, DeletionScope, PlanInput, Protections, RefInfo, SnapshotInfo,
    TableDefaults,
};
use crate::govern::policy::protects_ref;
use crate::model::object::path_set;
pub use crate::model::object::{
    HoldScope, Layer, ListedObject, ManifestObjects, ObjectRef, SnapshotObjects, distinct_objects,
};

/// A retained snapshot and every reason it is retained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protected {
    /// Snapshot id.
    pub snapshot_id: i64,
    /// Reasons (`ref:main`, `branch-retention:main`, `protected-ref:audit-q2`, `min-snapshot-age`,
    /// `lease:<id>`, `checkpoint:<label>`, `hold:<id>`, `current`).
    pub reasons: Vec<String>,
}

/// A set of objects that may be quarantined and, with evidence, deleted together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// Stable id: bound to the table, the generation and the snapshots.
    pub candidate_id: String,
    /// `expired-snapshots` or `orphans`.
    pub kind: String,
    /// The expirable snapshots (empty for orphans).
    pub snapshot_ids: Vec<i64>,
    /// The exact inventory.
    pub objects: Vec<ObjectRef>,
    /// Total bytes.
    pub bytes: u64,
    /// BLAKE3 over the canonical inventory (`[layer, path, size]` lines, sorted).
    pub inventory_root: String,
}

/// Something plain expiry would remove that lakedrill keeps, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Difference {
    /// The snapshot or object.
    pub subject: String,
    /// Why lakedrill keeps it.
    pub reasons: Vec<String>,
}

/// The plan: report-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Retained snapshots with reasons.
    pub protected: Vec<Protected>,
    /// Candidates.
    pub candidates: Vec<Candidate>,
    /// Plain `expire_snapshots` with the baseline's parameters ([`crate::govern::baseline`]).
    pub plain_expire: PlainExpire,
    /// Plain `DeleteOrphanFiles` with the baseline's `older_than`.
    #[serde(default)]
    pub plain_orphans: PlainOrphans,
    /// What the registry and policy saved from plain expiry.
    pub differences: Vec<Difference>,
    /// Things the operator should know (unreadable snapshots, protected refs that do not exist …).
    pub warnings: Vec<String>,
    /// Deletion-right requests and where each stands.
    #[serde(default)]
    pub deletion_rights: Vec<DeletionRightStatus>,
    /// Unreferenced objects under the location that are never orphan candidates, whatever their age, with
    /// the reason: hidden files (a path segment starting with `.` or `_`: `.crc` sidecars, `_SUCCESS`, a
    /// writer's `_temporary` staging), the `version-hint.text` pointer, files without a modification time, files
    /// whose path resolves outside the table root, and files of an unfinished snapshot candidate whose snapshots
    /// left the table ([`kept_beyond_metadata`]).
    #[serde(default)]
    pub kept_unreferenced: Vec<KeptUnreferenced>,
}

/// An unreferenced object that is never an orphan candidate, and why: an entry of
/// [`Plan::kept_unreferenced`], serialized as a [`Difference`] is (`{reasons[], subject}`). Its fields are in
/// sorted order: `plan` writes it straight to text, in the order a JSON object value prints its keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptUnreferenced {
    /// Why it is never an orphan: the fixed texts of [`never_orphan`], borrowed rather than copied per object
    /// (a Spark table has a hidden `.crc` sidecar beside every file: 100,000 copies of one reason were 19 MB), or
    /// the reason [`kept_beyond_metadata`] gives, which names the file's target or its candidate.
    pub reasons: Vec<Cow<'static, str>>,
    /// The object, relative to the table location.
    pub subject: String,
}

/// Whether a path is in some set of paths (one set, or the union of two asked in turn).
type PathTest<'a> = Box<dyn Fn(&str) -> bool + Sync + 'a>;

/// Lakekeeper's floor for orphan removal: `plan` warns below it.
pub const ORPHAN_SAFETY_WARNING_MS: i64 = 24 * 3_600_000;

/// Why an unreferenced listed object is never an orphan candidate, if it is one of those (pure): one of three
/// fixed texts.
#[must_use]
pub fn never_orphan(l: &ListedObject) -> Option<&'static str> {
    never_orphan_by_name(&l.path).or_else(|| {
        (l.last_modified_ms <= 0)
            .then_some("no-modification-time: the store gives it no modification time, so its age is unknown")
    })
}

/// [`never_orphan`]'s reasons that the path alone gives: a version hint or a hidden path.
fn never_orphan_by_name(path: &str) -> Option<&'static str> {
    if path == "metadata/version-hint.text" || path.ends_with("/version-hint.text") {
        Some("pointer: a table's version hint, reported and never removed")
    } else if crate::govern::baseline::hidden(path) {
        // Short: a Spark-written table has a `.crc` sidecar beside every file, and this text is in the plan once
        // per sidecar (100,000 times); what hidden means is in DESIGN.md ("Orphans").
        Some("hidden: a path segment starts with `.` or `_` (as in Iceberg's DeleteOrphanFiles); never removed")
    } else {
        None
    }
}

/// Why an unreferenced listed object that could otherwise be an orphan is kept by what lies beyond the table's
/// metadata (pure): its path resolves outside the table root (a symlink leaves the table, README "Symlinks"); it
/// is a file of a snapshot candidate that is not finished and whose snapshots left the table (a bundle-mode
/// quarantine: its bundles are the way back and point at this file; a purge past its catalog commit deletes it
/// itself); the bundles of an unfinished bundle-mode candidate name it in place (its snapshot's way back, though
/// another snapshot referenced it when it was quarantined); a symlink inside the table is on its way (the same
/// file is listed under another path, which the table may reference); or it is an object store's folder marker
/// (a key ending with `/`, listed without it); or an active protection names a snapshot that left the table and
/// whose files were resolved from its verified bundle, and that snapshot reaches it. `None`: none of these.
#[must_use]
pub fn kept_beyond_metadata(input: &PlanInput, path: &str) -> Option<String> {
    if input.protections.folder_markers.contains(path) {
        return Some(
            "folder-marker: a zero-byte object whose key ends with `/` (a folder marker of the S3 console or Hadoop \
             S3A), listed without the slash, and no object has that name; never removed"
                .to_owned(),
        );
    }
    if let Some(target) = input.protections.outside_root.get(path) {
        return Some(format!(
            "outside-table-root: resolves to {target}, outside the table root (a symlink leaves the table); never \
             removed"
        ));
    }
    if let Some(why) = kept_by_missing_protection(input, path) {
        return Some(why);
    }
    if let Some(why) = kept_as_statistics_of_missing(input, path) {
        return Some(why);
    }
    if let Some(id) = input.protections.snapshot_candidate_files.get(path) {
        return Some(format!(
            "candidate:{id}: a file of snapshot candidate {id}, which is not finished and whose snapshots left the \
             table (its bundles are the way back to them, or its own purge deletes it); never an orphan while it is"
        ));
    }
    kept_by_bundle(input, path).or_else(|| kept_by_link(input, path))
}

/// Why `path` is reached through a symlink that stays inside the table, or is the real path of a file the table
/// references through one, as a reason (`linked:…`, `link-target:…`): the same file under two paths, never an
/// orphan and never in a snapshot candidate, since removing it under either name removes it under both.
fn kept_by_link(input: &PlanInput, path: &str) -> Option<String> {
    if let Some(target) = input.protections.linked.get(path) {
        return Some(format!(
            "linked: reaches its file through a symlink, which resolves to {target} in the table (the same file \
             listed twice); never removed through the link"
        ));
    }
    input.protections.link_targets.get(path).map(|alias| {
        format!("link-target: the table references this file through a symlink as {alias}; never removed while it does")
    })
}

/// Which listed objects' size and modification time the plan reads (pure): `needed(path)` is false only where
/// [`plan`] and [`crate::govern::compare::compare`] never ask, so a listing may leave those unread
/// ([`ListedObject::TIME_NOT_READ`]) and plan the same. The times are asked of an unreferenced object (an
/// orphan, or not: its age decides) and of one plain `expire_snapshots` would remove (no time is a reason to
/// keep it); neither is ever an object the current snapshot references, nor an unreferenced hidden file or
/// `metadata/version-hint.text` (kept by their names alone). Every time is needed when a snapshot's layers could not be read.
///
/// On a table whose current snapshot references most of its files (a 1,000-snapshot Spark-written history:
/// every data file, and a hidden `.crc` sidecar beside each) that leaves nearly every stat unread.
pub fn listing_time_needed(input: &PlanInput) -> impl Fn(&str) -> bool + Sync + '_ {
    let readable: Option<Vec<&SnapshotObjects>> = input.snapshots.iter().map(|s| s.objects.as_ref()).collect();
    let current = match input.current_snapshot_id {
        None => Some(None),
        Some(id) => input
            .snapshots
            .iter()
            .find(|s| s.snapshot_id == id)
            .and_then(|s| s.objects.as_ref())
            .map(Some),
    };
    // `None`: every time is needed.
    let known = readable.zip(current).map(|(all, current)| {
        rayon::join(
            || -> HashSet<&str> {
                let mut set = HashSet::with_capacity_and_hasher(current.map_or(0, |o| o.len()), Default::default());
                set.extend(current.iter().flat_map(|o| o.iter().map(|x| x.path.as_str())));
                set
            },
            || -> HashSet<&str> {
                distinct_objects(all)
                    .into_iter()
                    .map(|o| o.path.as_str())
                    .chain(input.statistics_files.values().flatten().map(String::as_str))
                    .filter(|p| kept_by_name(p))
                    .collect()
            },
        )
    });
    move |path: &str| match &known {
        None => true,
        Some((current, referenced_by_name)) => {
            !current.contains(path) && (!kept_by_name(path) || referenced_by_name.contains(path))
        }
    }
}

/// An unreferenced path that neither lakedrill's orphan pass nor plain `remove_orphan_files` would remove,
/// whatever its age: hidden, or the table's version hint.
fn kept_by_name(path: &str) -> bool {
    path == "metadata/version-hint.text" || crate::govern::baseline::hidden(path)
}

/// The candidate root: BLAKE3 over the candidate's objects (layer, path, size), sorted. Not a bundle root
/// ([`crate::bundle::inventory_root`] hashes a sealed inventory with digests).
#[must_use]
pub fn candidate_root(objects: &[ObjectRef]) -> String {
    let mut sorted: Vec<&ObjectRef> = objects.iter().collect();
    sorted.sort();
    let mut h = blake3::Hasher::new();
    for o in sorted {
        h.update(serde_json::json!([o.layer, o.path, o.size]).to_string().as_bytes());
        h.update(b"\n");
    }
    h.finalize().to_hex().to_string()
}

/// Whether `path` is at or under `prefix`, segment-wise.
#[must_use]
pub fn under(path: &str, prefix: &str) -> bool {
    let p = prefix.trim_matches('/');
    p.is_empty() || path == p || (path.len() > p.len() && path.starts_with(p) && path.as_bytes()[p.len()] == b'/')
}

/// Which snapshots a branch's retention keeps (Iceberg's rule), given an age limit.
fn branch_keeps(
    by_id: &BTreeMap<i64, &SnapshotInfo>,
    head: i64,
    min_keep: i32,
    max_age_ms: i64,
    now_ms: i64,
) -> Vec<i64> {
    let mut out = Vec::new();
    let mut cur = Some(head);
    let mut seen = BTreeSet::new();
    let mut n = 0;
    while let Some(id) = cur {
        if !seen.insert(id) {
            break;
        }
        let Some(s) = by_id.get(&id) else { break };
        if n < min_keep || now_ms.saturating_sub(s.timestamp_ms) <= max_age_ms {
            out.push(id);
        } else {
            break;
        }
        n += 1;
        cur = s.parent_id;
    }
    out
}

struct RightScope<'a> {
    right: &'a DeletionRight,
    snapshot_ids: Vec<i64>,
    conflicts: Vec<String>,
}

/// The snapshots each deletion right reaches and the legal holds that cover it.
fn deletion_right_scopes<'a>(input: &'a PlanInput, by_id: &BTreeMap<i64, &SnapshotInfo>) -> Vec<RightScope<'a>> {
    input
        .protections
        .deletion_rights
        .iter()
        .map(|right| {
            let snapshot_ids: Vec<i64> = match &right.scope {
                DeletionScope::Snapshot(id) => by_id.contains_key(id).then_some(*id).into_iter().collect(),
                DeletionScope::Path(p) => by_id
                    .values()
                    .filter(|s| s.objects.as_ref().is_some_and(|o| o.iter().any(|o| under(&o.path, p))))
                    .map(|s| s.snapshot_id)
                    .collect(),
            };
            let mut conflicts = Vec::new();
            for (hold, scope) in &input.protections.holds {
                let covered = match scope {
                    HoldScope::Table => true,
                    HoldScope::Snapshot(id) => snapshot_ids.contains(id),
                    HoldScope::Prefix(hp) => match &right.scope {
                        DeletionScope::Path(p) => under(p, hp) || under(hp, p),
                        DeletionScope::Snapshot(_) => snapshot_ids.iter().any(|id| {
                            by_id[id]
                                .objects
                                .as_ref()
                                .is_some_and(|o| o.iter().any(|o| under(&o.path, hp)))
                        }),
                    },
                };
                if covered {
                    conflicts.push(format!("hold:{hold}"));
                }
            }
            RightScope {
                right,
                snapshot_ids,
                conflicts,
            }
        })
        .collect()
}

/// Where a quarantined candidate stands at a later table generation ([`rebase`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Rebase {
    /// The candidate's snapshots that are still expirable.
    pub snapshot_ids: Vec<i64>,
    /// The candidate's snapshots the table now keeps, with the planner's reasons.
    pub released_snapshots: Vec<(i64, String)>,
    /// The candidate's objects that are still eligible: reachable from no snapshot the table keeps and under
    /// no open writer's prefix or held prefix.
    pub objects: Vec<ObjectRef>,
    /// The candidate's objects that became protected, with the reason.
    pub released_objects: Vec<(String, String)>,
    /// Snapshots outside the still-expirable set whose layers could not be read: nothing can be shown
    /// unreachable while one is listed (the caller cannot decide).
    pub unreadable: Vec<i64>,
    /// Active protections that name a snapshot missing from the generation ([`protections_of_missing_snapshots`];
    /// [`orphan_rebase`] only): what that snapshot reaches is unknown, so no file can be shown unreferenced while
    /// one is listed (the caller cannot decide).
    #[serde(default)]
    pub missing_protected: Vec<String>,
}

impl Rebase {
    /// Whether nothing changed for the candidate.
    #[must_use]
    pub fn unchanged(&self) -> bool {
        self.released_snapshots.is_empty() && self.released_objects.is_empty()
    }
}

/// Re-judges a quarantined candidate (its `snapshot_ids` and exact `objects`) against the table as it is
/// now (`input`, gathered with the candidate's own quarantine tags left out, and the `plan` of it): a
/// snapshot stays in only while the planner still finds it expirable; an object stays in only while no snapshot
/// outside the remaining set reaches it, and no open writer's prefix or prefix hold covers it. A table-wide hold
/// keeps every snapshot and every object. Everything else is released with its reason. Pure.
#[must_use]
pub fn rebase(input: &PlanInput, plan: &Plan, snapshot_ids: &[i64], objects: &[ObjectRef]) -> Rebase {
    let retained: BTreeMap<i64, &Vec<String>> = plan.protected.iter().map(|p| (p.snapshot_id, &p.reasons)).collect();
    let table_hold = input
        .protections
        .holds
        .iter()
        .find(|(_, s)| matches!(s, HoldScope::Table))
        .map(|(h, _)| h.clone());
    let mut out = Rebase::default();
    for id in snapshot_ids {
        if let Some(h) = &table_hold {
            out.released_snapshots.push((*id, format!("hold:{h} (table)")));
        } else if let Some(reasons) = retained.get(id) {
            out.released_snapshots.push((*id, reasons.join(", ")));
        } else {
            out.snapshot_ids.push(*id);
        }
    }
    let keep: HashSet<i64> = out.snapshot_ids.iter().copied().collect();
    let outside: Vec<&SnapshotInfo> = input
        .snapshots
        .iter()
        .filter(|s| !keep.contains(&s.snapshot_id))
        .collect();
    out.unreadable = outside
        .iter()
        .filter(|s| s.objects.is_none())
        .map(|s| s.snapshot_id)
        .collect();
    let referenced = path_set(
        &distinct_objects(outside.iter().filter_map(|s| s.objects.as_ref())),
        input.distinct_paths_hint(),
    );
    for o in objects {
        // A table-wide hold keeps every file too: where the candidate's snapshots already left the table (bundle
        // mode, or a purge resumed after its catalog commit) nothing the table keeps reaches them, and only the
        // hold itself stands between them and the deleter.
        let why = if let Some(h) = &table_hold {
            Some(format!("hold:{h} (table)"))
        } else if referenced.contains(o.path.as_str()) {
            Some("referenced by a snapshot the table keeps".to_owned())
        } else {
            writer_or_prefix_hold(input, &o.path)
                .or_else(|| kept_by_bundle(input, &o.path))
                .or_else(|| kept_by_missing_protection(input, &o.path))
                .or_else(|| kept_by_link(input, &o.path))
        };
        match why {
            Some(w) => out.released_objects.push((o.path.clone(), w)),
            None => out.objects.push(o.clone()),
        }
    }
    out
}

/// The independent closure check (defense in depth against a planner bug, or a registry row edited after
/// planning): every reason why the given snapshots and objects may **not** be deleted, computed from the
/// non-deletable set — every ref head (the policy's `protectedRefs` included), the current snapshot, valid leases,
/// disaster-recovery checkpoints and legal holds (table, snapshot and prefix scopes) — plus open writers' prefixes,
/// and from every other snapshot the table keeps (outside the candidate: its files stay). It shares nothing with
/// [`plan`] but [`distinct_objects`]; quarantine and purge refuse when it finds anything. Empty means no
/// conflict. At most 20 object reasons are listed, followed by a count.
#[must_use]
pub fn nondeletable_conflicts(input: &PlanInput, snapshot_ids: &[i64], objects: &[ObjectRef]) -> Vec<String> {
    let mut why: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for r in &input.refs {
        why.entry(r.snapshot_id).or_default().push(format!("ref {}", r.name));
    }
    if let Some(c) = input.current_snapshot_id {
        why.entry(c).or_default().push("current snapshot".into());
    }
    for (id, lease) in &input.protections.leases {
        why.entry(*id).or_default().push(format!("lease {lease}"));
    }
    for (id, cp) in &input.protections.checkpoints {
        why.entry(*id).or_default().push(format!("checkpoint {cp}"));
    }
    let mut out: Vec<String> = input
        .protections
        .unreadable_bundles
        .iter()
        .map(|b| format!("a bundle of an unfinished bundle-mode quarantine could not be read: {b}"))
        .collect();
    for (hold, scope) in &input.protections.holds {
        match scope {
            HoldScope::Table => out.push(format!("legal hold {hold} covers the whole table")),
            HoldScope::Snapshot(id) => why.entry(*id).or_default().push(format!("legal hold {hold}")),
            HoldScope::Prefix(_) => {}
        }
    }
    for id in snapshot_ids {
        if let Some(w) = why.get(id) {
            out.push(format!("snapshot {id} is non-deletable: {}", w.join(", ")));
        }
    }
    // A gone protected ref's snapshot is unknown: it may be among the candidate's.
    if !snapshot_ids.is_empty() {
        out.extend(
            missing_protected_refs(input)
                .into_iter()
                .map(|m| format!("{m}: the snapshot it protected may be in the candidate")),
        );
    }
    let known: Vec<&SnapshotInfo> = input
        .snapshots
        .iter()
        .filter(|s| why.contains_key(&s.snapshot_id))
        .collect();
    if let Some(s) = known.iter().find(|s| s.objects.is_none()) {
        out.push(format!(
            "non-deletable snapshot {}'s layers could not be read ({}): its closure is unknown",
            s.snapshot_id,
            unreadable_reason(input, s.snapshot_id)
        ));
    }
    // Every other snapshot the table keeps (outside the candidate: retained by age, by count, by a branch's
    // retention) keeps its files too; a file it reaches, deleted, breaks reading it. Path → whether a non-deletable
    // snapshot reaches it (one map, not two sets: at 10M files the current snapshot's paths are most of it).
    let candidate: HashSet<i64> = snapshot_ids.iter().copied().collect();
    let kept: Vec<&SnapshotInfo> = input
        .snapshots
        .iter()
        .filter(|s| !candidate.contains(&s.snapshot_id) && !why.contains_key(&s.snapshot_id))
        .collect();
    if let Some(s) = kept.iter().find(|s| s.objects.is_none()) {
        out.push(format!(
            "snapshot {} (outside the candidate, kept by the table) could not be read ({}): what it reaches is unknown",
            s.snapshot_id,
            unreadable_reason(input, s.snapshot_id)
        ));
    }
    let mut closure: HashMap<&str, bool> = HashMap::default();
    closure.reserve(input.distinct_paths_hint());
    for o in distinct_objects(known.iter().filter_map(|s| s.objects.as_ref())) {
        closure.insert(o.path.as_str(), true);
    }
    for o in distinct_objects(kept.iter().filter_map(|s| s.objects.as_ref())) {
        closure.entry(o.path.as_str()).or_insert(false);
    }
    let mut objs = Vec::new();
    for o in objects {
        if let Some(nondeletable) = closure.get(o.path.as_str()) {
            if *nondeletable {
                objs.push(format!("{} is reachable from a non-deletable snapshot", o.path));
            } else {
                objs.push(format!(
                    "{} is reachable from a snapshot the table keeps outside the candidate",
                    o.path
                ));
            }
        } else if input.live_metadata_files.contains(&o.path) {
            // No plan proposes one; only a registry row edited after the plan brings it here (review W6).
            objs.push(format!(
                "{} is a metadata file the table keeps (its current one, or one its metadata log names)",
                o.path
            ));
        } else if let Some((w, p)) = input.protections.writers.iter().find(|(_, p)| under(&o.path, p)) {
            objs.push(format!("{} is under open writer {w}'s prefix {p}", o.path));
        } else if let Some((h, p)) = input.protections.holds.iter().find_map(|(h, s)| match s {
            HoldScope::Prefix(p) if under(&o.path, p) => Some((h, p)),
            _ => None,
        }) {
            objs.push(format!("{} is under legal hold {h}'s prefix {p}", o.path));
        } else if let Some(id) = input.protections.bundle_files.get(o.path.as_str()) {
            objs.push(format!(
                "{} is named in place by the bundles of candidate {id}, quarantined in bundle mode and not finished",
                o.path
            ));
        } else if let Some(why) = kept_by_missing_protection(input, &o.path) {
            objs.push(format!("{}: {why}", o.path));
        } else if let Some(why) = kept_by_link(input, &o.path) {
            objs.push(format!("{}: {why}", o.path));
        }
    }
    let n = objs.len();
    out.extend(objs.into_iter().take(20));
    if n > 20 {
        out.push(format!("… and {} more objects", n - 20));
    }
    out
}

/// The unfinished bundle-mode candidate whose bundles name `path` in place, as a reason (`bundle:…`).
fn kept_by_bundle(input: &PlanInput, path: &str) -> Option<String> {
    input.protections.bundle_files.get(path).map(|id| {
        format!(
            "bundle:{id}: the bundles of candidate {id} (quarantined in bundle mode, not finished) name it in place; \
             kept until that candidate is purged or released"
        )
    })
}

/// The open writer's prefix or the legal hold's prefix that covers `path`, as a reason (`writer:…`, `hold:…`).
fn writer_or_prefix_hold(input: &PlanInput, path: &str) -> Option<String> {
    if let Some((w, p)) = input.protections.writers.iter().find(|(_, p)| under(path, p)) {
        return Some(format!("writer:{w} (prefix {p})"));
    }
    input.protections.holds.iter().find_map(|(h, s)| match s {
        HoldScope::Prefix(p) if under(path, p) => Some(format!("hold:{h} (prefix {p})")),
        _ => None,
    })
}

/// A candidate as the registry keeps it (`candidate`), with its snapshots and inventory replaced: the objects, their
/// bytes and the inventory root follow (pure; what every rebase writes).
#[must_use]
pub fn with_inventory(candidate: &serde_json::Value, snapshot_ids: &[i64], objects: &[ObjectRef]) -> serde_json::Value {
    let mut c = candidate.clone();
    c["snapshot_ids"] = serde_json::json!(snapshot_ids);
    c["objects"] = serde_json::json!(objects);
    c["bytes"] = serde_json::json!(objects.iter().map(|o| o.size).sum::<u64>());
    c["inventory_root"] = serde_json::json!(candidate_root(objects));
    c
}

/// Where a quarantined orphan candidate stands at a later generation (pure): an object that the table now
/// references (a late commit of a slow writer, an `add_files`), or that lies under an open writer's prefix or a
/// legal hold, leaves it with the reason; the rest stays. When some snapshot's layers cannot be read, nothing
/// can be shown unreferenced: those snapshots are listed in `unreadable` and the caller cannot decide; so too
/// while a lease, checkpoint or snapshot hold names a snapshot missing from the generation (`missing_protected`).
#[must_use]
pub fn orphan_rebase(input: &PlanInput, objects: &[ObjectRef]) -> Rebase {
    let mut out = Rebase {
        unreadable: input
            .snapshots
            .iter()
            .filter(|s| s.objects.is_none())
            .map(|s| s.snapshot_id)
            .collect(),
        missing_protected: protections_of_missing_snapshots(input),
        ..Rebase::default()
    };
    let referenced = crate::govern::baseline::referenced_paths(input);
    let table_hold = input
        .protections
        .holds
        .iter()
        .find(|(_, s)| matches!(s, HoldScope::Table))
        .map(|(h, _)| h.clone());
    for o in objects {
        let why = if referenced.contains(o.path.as_str()) || input.live_metadata_files.contains(&o.path) {
            Some("referenced by the table's current generation (a commit after its quarantine)".to_owned())
        } else if let Some(why) = kept_beyond_metadata(input, &o.path) {
            Some(why)
        } else if let Some(h) = &table_hold {
            Some(format!("hold:{h} covers the whole table"))
        } else {
            writer_or_prefix_hold(input, &o.path)
        };
        match why {
            Some(w) => out.released_objects.push((o.path.clone(), w)),
            None => out.objects.push(o.clone()),
        }
    }
    out
}

/// Every active protection that names a snapshot missing from the table generation and whose files were not
/// resolved (pure): a valid lease, a disaster-recovery checkpoint or policy DR point, a snapshot-scoped legal hold,
/// each as `legal hold h1 on snapshot 7 (not resolved: why)`.
///
/// Such a snapshot left the metadata (a bundle-mode quarantine took it out while the protection was set, or
/// another engine expired it without deleting its files), so what it reaches is unknown here, yet its leftover
/// files are exactly what the protection keeps, and nothing in the generation references them: they look like
/// orphans. A snapshot whose files `ops` resolved from lakedrill's own records (the candidate that took it out and
/// its bundle, verified: [`Protections::resolved_missing`]) is not listed: its files are kept by name
/// ([`kept_beyond_metadata`]). Non-empty means lakedrill cannot decide which unreferenced files are orphans:
/// [`plan`] proposes no orphan candidate (with a warning per protection) and [`orphan_rebase`] lists them in
/// `missing_protected`, on which quarantine and purge of an orphan candidate refuse (DESIGN.md, "Protections on
/// snapshots that left the table").
#[must_use]
pub fn protections_of_missing_snapshots(input: &PlanInput) -> Vec<String> {
    let p = &input.protections;
    missing_protections(input)
        .into_iter()
        .filter(|(id, _)| !p.resolved_missing.contains_key(id))
        .map(|(id, what)| {
            let why = p
                .unresolved_missing
                .get(&id)
                .map_or("this command does not resolve it from a bundle", String::as_str);
            format!("{what} on snapshot {id} (not resolved: {why})")
        })
        .collect()
}

/// The snapshots missing from the table generation that an active protection names, resolved or not (pure): what
/// `ops` tries to resolve from lakedrill's records.
#[must_use]
pub fn snapshots_of_missing_protections(input: &PlanInput) -> BTreeSet<i64> {
    missing_protections(input).into_iter().map(|(id, _)| id).collect()
}

/// Every active protection on a snapshot missing from the generation, as (snapshot id, `lease L`).
fn missing_protections(input: &PlanInput) -> Vec<(i64, String)> {
    let known: HashSet<i64> = input.snapshots.iter().map(|s| s.snapshot_id).collect();
    let p = &input.protections;
    let leases = p.leases.iter().map(|(id, l)| (*id, format!("lease {l}")));
    let checkpoints = p.checkpoints.iter().map(|(id, c)| (*id, format!("checkpoint {c}")));
    let holds = p.holds.iter().filter_map(|(h, scope)| match scope {
        HoldScope::Snapshot(id) => Some((*id, format!("legal hold {h}"))),
        _ => None,
    });
    leases
        .chain(checkpoints)
        .chain(holds)
        .filter(|(id, _)| !known.contains(id))
        .collect()
}

/// Why `path` is kept for a protection on a snapshot that left the table and whose files were resolved
/// ([`Protections::missing_snapshot_files`]), as a reason naming each protection (`lease:L`, `checkpoint:C`,
/// `hold:H`), the snapshot and where its files were resolved from.
fn kept_by_missing_protection(input: &PlanInput, path: &str) -> Option<String> {
    let id = *input.protections.missing_snapshot_files.get(path)?;
    let p = &input.protections;
    let mut named: Vec<String> = p
        .leases
        .iter()
        .filter(|(s, _)| *s == id)
        .map(|(_, l)| format!("lease:{l}"))
        .collect();
    named.extend(
        p.checkpoints
            .iter()
            .filter(|(s, _)| *s == id)
            .map(|(_, c)| format!("checkpoint:{c}")),
    );
    named.extend(p.holds.iter().filter_map(|(h, scope)| match scope {
        HoldScope::Snapshot(s) if *s == id => Some(format!("hold:{h}")),
        _ => None,
    }));
    let from = p.resolved_missing.get(&id).map_or("", String::as_str);
    Some(format!(
        "{} on snapshot {id}, which left the table: the snapshot reaches this file (resolved from {from}); never an \
         orphan while the protection lasts",
        named.join(", ")
    ))
}

/// Why `path` is kept as a possible statistics file of a protected snapshot that left the table and was resolved
/// from its bundle ([`Protections::resolved_missing`]). A bundle seals what the snapshot reaches, not the table's
/// statistics entries naming it (Puffin `*.stats`, partition statistics), and the quarantine's commit dropped those
/// entries with the snapshot: nothing says which unreferenced file was its statistics. While such a protection
/// lasts, an unreferenced file whose name ends in `.stats` or `.puffin`, or holds the snapshot's id, is kept
/// (review of 2026-12-07, R4-5: they were proposed as orphans while the hold stood).
fn kept_as_statistics_of_missing(input: &PlanInput, path: &str) -> Option<String> {
    let p = &input.protections;
    if p.resolved_missing.is_empty() {
        return None;
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    let id = p
        .resolved_missing
        .keys()
        .find(|id| name.contains(&id.to_string()))
        .copied()
        .or_else(|| {
            (name.ends_with(".stats") || name.ends_with(".puffin"))
                .then(|| p.resolved_missing.keys().next().copied())
                .flatten()
        })?;
    Some(format!(
        "statistics-of:{id}: may be a statistics file of snapshot {id}, which left the table under a protection \
         (its bundle does not seal statistics); never an orphan while the protection lasts"
    ))
}

/// Every ref of the policy's `protectedRefs` that does not exist in the table generation (pure), each as
/// `protected ref "audit" (policy protectedRefs) does not exist in this table generation`.
///
/// Non-empty means lakedrill cannot decide which snapshots are expirable: the snapshot such a ref protected is
/// unknown and may now look expirable. [`plan`] proposes no snapshot candidate (with a warning per ref), and
/// quarantine and purge of a snapshot candidate refuse, exit 2, naming them ([`nondeletable_conflicts`] names them
/// too).
#[must_use]
pub fn missing_protected_refs(input: &PlanInput) -> Vec<String> {
    input
        .protections
        .protected_refs
        .iter()
        .filter(|name| !input.refs.iter().any(|r| protects_ref(name, &r.name)))
        .map(|name| format!("protected ref {name:?} (policy protectedRefs) does not exist in this table generation"))
        .collect()
}

/// Why a snapshot's layers could not be read, as [`PlanInput::unreadable`] records it.
fn unreadable_reason(input: &PlanInput, snapshot_id: i64) -> &str {
    input
        .unreadable
        .get(&snapshot_id)
        .map_or("no reason recorded", String::as_str)
}

/// The retained snapshots of `plan` whose layers could not be read, each with its reasons to be retained and
/// the object that could not be read (pure). Non-empty means the plan cannot decide: what a retained snapshot
/// reaches is unknown, so nothing can be shown unreachable: `plan` and `quarantine` exit 2 (and `purge`'s
/// independent check, [`nondeletable_conflicts`], refuses naming the same object).
#[must_use]
pub fn unreadable_retained(input: &PlanInput, plan: &Plan) -> Vec<String> {
    plan.protected
        .iter()
        .filter(|p| {
            input
                .snapshots
                .iter()
                .any(|s| s.snapshot_id == p.snapshot_id && s.objects.is_none())
        })
        .map(|p| {
            format!(
                "retained snapshot {} ({}): {}",
                p.snapshot_id,
                p.reasons.join(", "),
                unreadable_reason(input, p.snapshot_id)
            )
        })
        .collect()
}

/// Adds a [`Difference`] for every object plain maintenance would remove that no candidate holds, with every
/// reason lakedrill keeps it: each reason of each retained snapshot that reaches it (`lease:L (snapshot N)`, the
/// first such snapshot per reason), a writer prefix or a hold, an orphan still within `orphanSafetyInterval`,
/// a statistics file (lakedrill leaves those to the orphan pass once the metadata no longer names them), or
/// layers lakedrill could not read. Objects already named (blocked by a writer or a hold) get the other reasons
/// added. Linear in the retained snapshots' distinct manifests.
fn kept_objects(
    input: &PlanInput,
    reasons: &BTreeMap<i64, BTreeSet<String>>,
    candidates: &[Candidate],
    plain_expire: &PlainExpire,
    plain_orphans: &PlainOrphans,
    differences: &mut Vec<Difference>,
) {
    let in_candidates: HashSet<&str> = candidates
        .iter()
        .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
        .collect();
    let mut kept: BTreeMap<&str, Vec<String>> = plain_expire
        .objects
        .iter()
        .chain(&plain_orphans.objects)
        .map(String::as_str)
        .filter(|p| !in_candidates.contains(p))
        .map(|p| (p, Vec::new()))
        .collect();
    if kept.is_empty() {
        return;
    }
    let push = |v: &mut Vec<String>, r: String| {
        if !v.contains(&r) {
            v.push(r);
        }
    };
    // Membership is asked of every object of every retained manifest and of every listed object: a hash set
    // (a lookup in the ordered map compared a dozen long paths each).
    let is_kept: HashSet<&str> = kept.keys().copied().collect();
    // Retained snapshots that reach a kept object: each shared manifest is searched once, the manifests in
    // parallel.
    let per_manifest: HashMap<*const ManifestObjects, Vec<&str>> = {
        let mut distinct: HashSet<*const ManifestObjects> = HashSet::default();
        let manifests: Vec<&ManifestObjects> = input
            .snapshots
            .iter()
            .filter(|s| reasons.contains_key(&s.snapshot_id))
            .filter_map(|s| s.objects.as_ref())
            .flat_map(|o| o.manifests.iter())
            .filter(|m| distinct.insert(Arc::as_ptr(m)))
            .map(AsRef::as_ref)
            .collect();
        let found: Vec<Vec<&str>> = manifests
            .par_iter()
            .map(|m| {
                m.objects
                    .iter()
                    .map(|o| o.path.as_str())
                    .filter(|p| is_kept.contains(p))
                    .collect()
            })
            .collect();
        manifests.into_iter().map(std::ptr::from_ref).zip(found).collect()
    };
    let mut seen_reason: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for s in &input.snapshots {
        let (Some(why), Some(objs)) = (reasons.get(&s.snapshot_id), s.objects.as_ref()) else {
            continue;
        };
        let mut hits: Vec<&str> = objs
            .own
            .iter()
            .map(|o| o.path.as_str())
            .filter(|p| is_kept.contains(p))
            .collect();
        for m in &objs.manifests {
            hits.extend(per_manifest[&Arc::as_ptr(m)].iter().copied());
        }
        for p in hits {
            let done = seen_reason.entry(p).or_default();
            for r in why {
                if done.insert(r.as_str())
                    && let Some(v) = kept.get_mut(p)
                {
                    push(v, format!("{r} (snapshot {})", s.snapshot_id));
                }
            }
        }
    }
    let stats: HashSet<&str> = input
        .statistics_files
        .values()
        .flat_map(|v| v.iter().map(String::as_str))
        .collect();
    // The listing's modification time of each kept path: one pass over the listing keeps the few it asks for (a
    // map of the whole listing was a fifth of a Spark-written 1,000-snapshot history's plan).
    let modified: HashMap<&str, i64> = input
        .listing
        .as_deref()
        .unwrap_or_default()
        .par_iter()
        .with_min_len(4096)
        .filter(|l| is_kept.contains(l.path.as_str()))
        .map(|l| (l.path.as_str(), l.last_modified_ms))
        .collect();
    for (path, v) in &mut kept {
        for (w, p) in &input.protections.writers {
            if under(path, p) {
                push(v, format!("writer:{w} ({p})"));
            }
        }
        for (h, scope) in &input.protections.holds {
            match scope {
                HoldScope::Prefix(p) if under(path, p) => push(v, format!("hold:{h} ({p})")),
                HoldScope::Table => push(v, format!("hold:{h} (table)")),
                _ => {}
            }
        }
        if stats.contains(path) {
            push(
                v,
                "statistics-file: not sealed with its snapshot; an orphan once the metadata no longer names it".into(),
            );
        }
        let age = modified.get(path).map(|m| (*m, input.now_ms.saturating_sub(*m)));
        if age.is_some_and(|(m, _)| m <= 0) {
            push(
                v,
                "no-modification-time: the store gives it no modification time, so its age is unknown".into(),
            );
        } else if plain_orphans.objects.binary_search_by(|o| o.as_str().cmp(path)).is_ok()
            && let Some((_, age)) = age
            && age <= input.orphan_safety_interval_ms
        {
            push(
                v,
                format!(
                    "safety-interval: {} s old, orphanSafetyInterval is {} s",
                    age / 1000,
                    input.orphan_safety_interval_ms / 1000
                ),
            );
        }
        if let Some(why) = kept_beyond_metadata(input, path) {
            push(v, why);
        }
        if v.is_empty() {
            push(
                v,
                "unreadable: lakedrill could not establish that nothing references it".into(),
            );
        }
    }
    for d in differences.iter_mut() {
        if let Some(v) = kept.remove(d.subject.as_str()) {
            for r in v {
                if !d.reasons.contains(&r) {
                    d.reasons.push(r);
                }
            }
        }
    }
    differences.extend(kept.into_iter().map(|(p, reasons)| Difference {
        subject: p.to_owned(),
        reasons,
    }));
}

/// Computes the plan (pure).
#[must_use]
#[allow(clippy::too_many_lines)]
pub fn plan(input: &PlanInput) -> Plan {
    let by_id: BTreeMap<i64, &SnapshotInfo> = input.snapshots.iter().map(|s| (s.snapshot_id, s)).collect();
    let mut reasons: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    let mut warnings = Vec::new();
    let add = |id: i64, why: String, reasons: &mut BTreeMap<i64, BTreeSet<String>>| {
        if by_id.contains_key(&id) {
            reasons.entry(id).or_default().insert(why);
        }
    };
    let table_hold = input
        .protections
        .holds
        .iter()
        .find(|(_, s)| *s == HoldScope::Table)
        .map(|(id, _)| id.clone());
    // Deletion rights: which snapshots each reaches, and whether a legal hold covers it.
    let rights = deletion_right_scopes(input, &by_id);
    // Snapshots of rights that no hold covers lose the `minSnapshotAge` floor (and only that).
    let exempt: BTreeSet<i64> = rights
        .iter()
        .filter(|r| r.conflicts.is_empty())
        .flat_map(|r| r.snapshot_ids.iter().copied())
        .collect();
    // Refs: every head, and each branch's retained history (with minSnapshotAge as the age floor).
    for r in &input.refs {
        add(r.snapshot_id, format!("ref:{}", r.name), &mut reasons);
        if r.is_branch {
            let min_keep = r
                .min_snapshots_to_keep
                .unwrap_or(input.defaults.min_snapshots_to_keep)
                .max(1);
            let own_age = r.max_snapshot_age_ms.unwrap_or(input.defaults.max_snapshot_age_ms);
            let max_age = own_age.max(input.min_snapshot_age_ms);
            let unfloored = branch_keeps(&by_id, r.snapshot_id, min_keep, own_age, input.now_ms);
            for id in branch_keeps(&by_id, r.snapshot_id, min_keep, max_age, input.now_ms) {
                if !exempt.contains(&id) || unfloored.contains(&id) {
                    add(id, format!("branch-retention:{}", r.name), &mut reasons);
                }
            }
        }
    }
    // Ref names that differ only by case are distinct refs to Iceberg, and easy to confuse for people and
    // for case-insensitive catalogs: every head is kept (above), and the plan says so.
    let mut folded: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for r in &input.refs {
        folded.entry(r.name.to_lowercase()).or_default().push(r.name.as_str());
    }
    for names in folded.values().filter(|n| n.len() > 1) {
        warnings.push(format!(
            "refs {} differ only by case: each is a separate ref and every head is kept",
            names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
        ));
    }
    for name in &input.protections.protected_refs {
        // A protected ref pins its head and is never treated as expired; a protected branch's older
        // history follows the branch's retention like any other branch's.
        // Matched ignoring case ([`protects_ref`]): every ref the entry names is pinned.
        for r in input.refs.iter().filter(|r| protects_ref(name, &r.name)) {
            add(r.snapshot_id, format!("protected-ref:{}", r.name), &mut reasons);
        }
    }
    // A protected ref that is gone (dropped, renamed, or never created) protected some snapshot that lakedrill can
    // no longer name: the snapshot may now look expirable. Cannot decide: no snapshot candidate.
    let missing_refs = missing_protected_refs(input);
    for m in &missing_refs {
        warnings.push(format!(
            "{m}: the snapshot it protected is unknown, so no snapshot candidate is proposed (restore the ref, or \
             take it out of the policy's protectedRefs)"
        ));
    }
    if let Some(c) = input.current_snapshot_id {
        add(c, "current".into(), &mut reasons);
    }
    for s in &input.snapshots {
        if input.now_ms.saturating_sub(s.timestamp_ms) < input.min_snapshot_age_ms && !exempt.contains(&s.snapshot_id) {
            add(s.snapshot_id, "min-snapshot-age".into(), &mut reasons);
        }
        if let Some(h) = &table_hold {
            add(s.snapshot_id, format!("hold:{h}"), &mut reasons);
        }
    }
    for (id, lease) in &input.protections.leases {
        add(*id, format!("lease:{lease}"), &mut reasons);
    }
    for (id, label) in &input.protections.checkpoints {
        add(*id, format!("checkpoint:{label}"), &mut reasons);
    }
    for (hold, scope) in &input.protections.holds {
        if let HoldScope::Snapshot(id) = scope {
            add(*id, format!("hold:{hold}"), &mut reasons);
        }
    }
    let retained: BTreeSet<i64> = reasons.keys().copied().collect();
    let expirable: Vec<i64> = by_id.keys().copied().filter(|id| !retained.contains(id)).collect();

    // The closure: every object reachable from a retained snapshot. Built on one core while the other builds
    // every path the history references (the orphan pass and plain maintenance's orphans both ask) and plain
    // `expire_snapshots`' result: three sets of paths the size of the history, each from `input` alone (on a
    // 1,000-snapshot Spark history they were most of this function's time, one after another).
    let unknown_retained = retained.iter().any(|id| by_id[id].objects.is_none());
    let ((closure, referenced), plain_expire) = rayon::join(
        || {
            rayon::join(
                || -> HashSet<&str> {
                    path_set(
                        &distinct_objects(retained.iter().filter_map(|id| by_id[id].objects.as_ref())),
                        input.distinct_paths_hint(),
                    )
                },
                // Every snapshot retained: the closure is every path the snapshots reference (taken below).
                || {
                    (input.listing.is_some() && !expirable.is_empty())
                        .then(|| crate::govern::baseline::referenced_paths(input))
                },
            )
        },
        || crate::govern::baseline::plain_expire(input),
    );
    // Every snapshot retained: what the history references is the closure and the statistics files, asked of
    // both rather than copied into one more set of the history's size.
    let statistics: HashSet<&str> = if input.listing.is_some() && expirable.is_empty() {
        input.statistics_files.values().flatten().map(String::as_str).collect()
    } else {
        HashSet::default()
    };
    let referenced: Option<PathTest<'_>> = match referenced {
        Some(r) => Some(Box::new(move |p: &str| r.contains(p))),
        None if input.listing.is_some() && expirable.is_empty() => {
            debug_assert!({
                let mut all = closure.clone();
                all.extend(&statistics);
                all == crate::govern::baseline::referenced_paths(input)
            });
            Some(Box::new(|p: &str| closure.contains(p) || statistics.contains(p)))
        }
        None => None,
    };
    let any_unknown = input.snapshots.iter().any(|s| s.objects.is_none());
    for id in retained.iter().filter(|id| by_id[*id].objects.is_none()) {
        warnings.push(format!(
            "retained snapshot {id}'s layers could not be read ({}): no candidates are proposed",
            unreadable_reason(input, *id)
        ));
    }
    let held_prefixes: Vec<(&str, &str)> = input
        .protections
        .holds
        .iter()
        .filter_map(|(id, s)| {
            if let HoldScope::Prefix(p) = s {
                Some((id.as_str(), p.as_str()))
            } else {
                None
            }
        })
        .collect();
    let blocked = |path: &str| -> Option<String> {
        if let Some((w, p)) = input
            .protections
            .writers
            .iter()
            .find(|(_, p)| under(path, p) && !crate::safety::weakened(crate::safety::Check::WriterPrefixes))
        {
            return Some(format!("writer:{w} ({p})"));
        }
        held_prefixes
            .iter()
            .find(|(_, p)| under(path, p))
            .map(|(h, p)| format!("hold:{h} ({p})"))
            .or_else(|| kept_by_bundle(input, path))
            .or_else(|| kept_by_missing_protection(input, path))
            .or_else(|| kept_by_link(input, path))
    };
    let mut differences = Vec::new();
    let mut candidates = Vec::new();
    for b in &input.protections.unreadable_bundles {
        warnings.push(format!(
            "a bundle of an unfinished bundle-mode quarantine could not be read, so what it needs in place is \
             unknown: no snapshot candidate is proposed ({b})"
        ));
    }
    if !unknown_retained
        && table_hold.is_none()
        && input.protections.unreadable_bundles.is_empty()
        && missing_refs.is_empty()
        && !expirable.is_empty()
    {
        let mut objs: BTreeMap<&str, &ObjectRef> = BTreeMap::new();
        for id in &expirable {
            if by_id[id].objects.is_none() {
                warnings.push(format!(
                    "snapshot {id} is expirable but its layers could not be read ({}); only what is known is listed",
                    unreadable_reason(input, *id)
                ));
            }
        }
        for o in distinct_objects(expirable.iter().filter_map(|id| by_id[id].objects.as_ref())) {
            if !closure.contains(o.path.as_str()) {
                objs.insert(o.path.as_str(), o);
            }
        }
        let mut objects = Vec::new();
        for (path, o) in objs {
            match blocked(path) {
                Some(why) => differences.push(Difference {
                    subject: path.to_owned(),
                    reasons: vec![why],
                }),
                None => objects.push((*o).clone()),
            }
        }
        objects.sort();
        let ids_text = expirable.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let id =
            blake3::hash(format!("{}|{}|{ids_text}", input.table_uuid, input.generation_blake3).as_bytes()).to_hex();
        candidates.push(Candidate {
            candidate_id: format!("c-{}", &id[..16]),
            kind: "expired-snapshots".into(),
            snapshot_ids: expirable.clone(),
            bytes: objects.iter().map(|o| o.size).sum(),
            inventory_root: candidate_root(&objects),
            objects,
        });
    }
    // Orphans: listed, referenced by nothing, old enough, outside writers and holds.
    let mut kept_unreferenced = Vec::new();
    if input.listing.is_some() && input.orphan_safety_interval_ms < ORPHAN_SAFETY_WARNING_MS {
        let ms = input.orphan_safety_interval_ms;
        let shown = match ms {
            m if m % 3_600_000 == 0 => format!("{}h", m / 3_600_000),
            m if m % 60_000 == 0 => format!("{}m", m / 60_000),
            m => format!("{}s", m / 1000),
        };
        warnings.push(format!(
            "orphanSafetyInterval is {shown}, below 24 hours (Lakekeeper's floor for orphan removal): a writer whose \
             commit takes longer than that would find its files quarantined as orphans"
        ));
    }
    // A protection on a snapshot that left the metadata keeps that snapshot's leftover files, which nothing in
    // this generation references: unless `ops` resolved them from the snapshot's verified bundle (then they are
    // kept by name, `kept_beyond_metadata`), they cannot be told from orphans, so none is proposed.
    let missing_protected = protections_of_missing_snapshots(input);
    if input.listing.is_some() {
        for m in &missing_protected {
            warnings.push(format!(
                "{m}, which is not in this table generation: what it reaches is unknown, so orphan detection is off \
                 (its leftover files would look unreferenced)"
            ));
        }
    }
    match (
        &input.listing,
        any_unknown || !missing_protected.is_empty(),
        &table_hold,
        &referenced,
    ) {
        (Some(listing), false, None, Some(referenced)) => {
            // Statistics files are named by the metadata, not by a snapshot's layers: never orphans. Each listed
            // object is judged on its own, so the listing (200k entries on a Spark-written table: every file and
            // its `.crc` sidecar) is judged in parallel, in order.
            enum Unreferenced {
                Kept(KeptUnreferenced),
                Blocked(Difference),
                Orphan(ObjectRef),
            }
            let judged: Vec<Unreferenced> = listing
                .par_iter()
                .with_min_len(4096)
                .filter_map(|l| {
                    if referenced(l.path.as_str()) || input.live_metadata_files.contains(&l.path) {
                        return None;
                    }
                    if let Some(why) = never_orphan(l) {
                        return Some(Unreferenced::Kept(KeptUnreferenced {
                            subject: l.path.clone(),
                            reasons: vec![Cow::Borrowed(why)],
                        }));
                    }
                    if let Some(why) = kept_beyond_metadata(input, &l.path) {
                        return Some(Unreferenced::Kept(KeptUnreferenced {
                            subject: l.path.clone(),
                            reasons: vec![Cow::Owned(why)],
                        }));
                    }
                    if input.now_ms.saturating_sub(l.last_modified_ms) <= input.orphan_safety_interval_ms {
                        return None;
                    }
                    if let Some(why) = blocked(&l.path) {
                        return Some(Unreferenced::Blocked(Difference {
                            subject: l.path.clone(),
                            reasons: vec![why],
                        }));
                    }
                    let layer = if l.path.starts_with("metadata/") {
                        if l.path.ends_with(".json") || l.path.ends_with(".json.gz") {
                            Layer::Metadata
                        } else {
                            Layer::Manifest
                        }
                    } else {
                        Layer::Data
                    };
                    Some(Unreferenced::Orphan(ObjectRef {
                        path: l.path.clone(),
                        layer,
                        size: l.size,
                    }))
                })
                .collect();
            let mut objects = Vec::new();
            for j in judged {
                match j {
                    Unreferenced::Kept(k) => kept_unreferenced.push(k),
                    Unreferenced::Blocked(d) => differences.push(d),
                    Unreferenced::Orphan(o) => objects.push(o),
                }
            }
            if !objects.is_empty() {
                objects.sort();
                let root = candidate_root(&objects);
                let epoch = match input.protections.orphan_epoch {
                    0 => String::new(),
                    n => format!("|epoch {n}"),
                };
                let id = blake3::hash(
                    format!("{}|{}|orphans{epoch}|{root}", input.table_uuid, input.generation_blake3).as_bytes(),
                )
                .to_hex();
                candidates.push(Candidate {
                    candidate_id: format!("o-{}", &id[..16]),
                    kind: "orphans".into(),
                    snapshot_ids: Vec::new(),
                    bytes: objects.iter().map(|o| o.size).sum(),
                    inventory_root: root,
                    objects,
                });
            }
        }
        (Some(_), true, _, _) if any_unknown => warnings.push(format!(
            "the layers of snapshot(s) {} could not be read: orphan detection is off",
            input
                .snapshots
                .iter()
                .filter(|s| s.objects.is_none())
                .map(|s| s.snapshot_id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => {}
    }
    // Plain maintenance with the baseline's parameters, and every reason lakedrill keeps what it would remove.
    let plain_orphans = match &referenced {
        Some(r) => crate::govern::baseline::plain_orphans_among(input, r),
        None => crate::govern::baseline::PlainOrphans::default(),
    };
    for id in &plain_expire.snapshot_ids {
        if let Some(r) = reasons.get(id) {
            differences.push(Difference {
                subject: format!("snapshot {id}"),
                reasons: r.iter().cloned().collect(),
            });
        }
    }
    kept_objects(
        input,
        &reasons,
        &candidates,
        &plain_expire,
        &plain_orphans,
        &mut differences,
    );
    differences.sort_by(|a, b| a.subject.cmp(&b.subject));
    kept_unreferenced.sort_by(|a, b| a.subject.cmp(&b.subject));
    let in_candidate: BTreeSet<i64> = candidates.iter().flat_map(|c| c.snapshot_ids.iter().copied()).collect();
    let in_orphans: HashSet<&str> = candidates
        .iter()
        .filter(|c| c.kind == "orphans")
        .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
        .collect();
    let deletion_rights = rights
        .into_iter()
        .map(|r| {
            let retained: Vec<String> = r
                .snapshot_ids
                .iter()
                .filter_map(|id| {
                    reasons
                        .get(id)
                        .map(|why| format!("snapshot {id}: {}", why.iter().cloned().collect::<Vec<_>>().join(", ")))
                })
                .collect();
            let listed: Vec<&str> = match &r.right.scope {
                DeletionScope::Snapshot(_) => Vec::new(),
                DeletionScope::Path(p) => input
                    .listing
                    .iter()
                    .flatten()
                    .filter(|o| under(&o.path, p))
                    .map(|o| o.path.as_str())
                    .collect(),
            };
            let held: Vec<&String> = match &r.right.scope {
                DeletionScope::Snapshot(_) => Vec::new(),
                DeletionScope::Path(p) => input.protections.held_orphans.iter().filter(|h| under(h, p)).collect(),
            };
            let leftover = !listed.is_empty() || !held.is_empty();
            let (status, why) = if !r.conflicts.is_empty() {
                ("conflict", r.conflicts)
            } else if !retained.is_empty() {
                ("blocked", retained)
            } else if r.snapshot_ids.iter().any(|id| in_candidate.contains(id))
                || (r.snapshot_ids.is_empty() && !listed.is_empty() && listed.iter().all(|p| in_orphans.contains(p)))
            {
                ("candidate", Vec::new())
            } else if r.snapshot_ids.is_empty() && listed.is_empty() && !held.is_empty() {
                (
                    "quarantined",
                    vec![format!(
                        "{} file(s) held in an orphan quarantine until their purge: {}",
                        held.len(),
                        held.iter().take(5).map(|h| h.as_str()).collect::<Vec<_>>().join(", ")
                    )],
                )
            } else if r.snapshot_ids.is_empty() && !leftover {
                ("fulfilled", Vec::new())
            } else {
                (
                    "blocked",
                    vec![
                        "objects in the scope are left but in no candidate (orphans wait for orphanSafetyInterval)"
                            .to_owned(),
                    ],
                )
            };
            DeletionRightStatus {
                id: r.right.id.clone(),
                // As the decision wrote it: `object:` or `prefix:` (the plan treats both as a path), never a
                // `path:` kind no decision has.
                scope: r.right.written_scope.clone(),
                deadline_ms: r.right.deadline_ms,
                overdue: status != "fulfilled" && input.now_ms > r.right.deadline_ms,
                status: status.to_owned(),
                snapshot_ids: r.snapshot_ids,
                reasons: why,
            }
        })
        .collect();
    Plan {
        deletion_rights,
        protected: reasons
            .into_iter()
            .map(|(snapshot_id, r)| Protected {
                snapshot_id,
                reasons: r.into_iter().collect(),
            })
            .collect(),
        candidates,
        plain_expire,
        plain_orphans,
        differences,
        warnings,
        kept_unreferenced,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use rand::{Rng, SeedableRng};

    use super::*;

    const DAY: i64 = 24 * 3600 * 1000;

    fn obj(p: &str, layer: Layer) -> ObjectRef {
        ObjectRef {
            path: p.into(),
            layer,
            size: 10,
        }
    }

    /// A random history: appends, overwrites, deletes on main and branches, tags, leases, holds,
    /// writers, checkpoints. Each snapshot references its own manifest list and manifests, plus a
    /// random subset of the live files it inherits and the files it adds.
    fn random_input(rng: &mut rand::rngs::StdRng) -> PlanInput {
        let now = 1_000 * DAY;
        let n = rng.gen_range(1..25);
        let mut snapshots: Vec<SnapshotInfo> = Vec::new();
        // Manifests are shared between snapshots exactly as Iceberg shares them: an append keeps its
        // parent's manifests (the same chunks) and adds one; an overwrite or delete rewrites what it
        // keeps into a new manifest.
        let mut manifests_of: BTreeMap<i64, Vec<Arc<ManifestObjects>>> = BTreeMap::new();
        let mut file_no = 0;
        for i in 0..n {
            let id = 1000 + i64::from(i);
            let parent = if i == 0 {
                None
            } else {
                Some(1000 + rng.gen_range(0..i64::from(i)))
            };
            let mut manifests: Vec<Arc<ManifestObjects>> = parent.map(|p| manifests_of[&p].clone()).unwrap_or_default();
            let op = rng.gen_range(0..3);
            if op > 0 {
                let mut kept: Vec<ObjectRef> = manifests
                    .iter()
                    .flat_map(|m| m.objects.iter().filter(|o| o.layer != Layer::Manifest).cloned())
                    .collect();
                if op == 1 {
                    kept.retain(|_| rng.gen_bool(0.5)); // overwrite / delete
                } else {
                    kept.truncate(kept.len() / 2);
                }
                manifests = Vec::new();
                if !kept.is_empty() {
                    let path = format!("metadata/r-{id}.avro");
                    kept.insert(0, obj(&path, Layer::Manifest));
                    manifests.push(Arc::new(ManifestObjects {
                        key: path,
                        objects: kept,
                    }));
                }
            }
            let path = format!("metadata/m-{id}.avro");
            let mut added = vec![obj(&path, Layer::Manifest)];
            for _ in 0..rng.gen_range(0..3) {
                file_no += 1;
                let layer = if rng.gen_bool(0.2) {
                    Layer::PositionDeletes
                } else {
                    Layer::Data
                };
                added.push(obj(&format!("data/f{file_no}.parquet"), layer));
            }
            manifests.push(Arc::new(ManifestObjects {
                key: path,
                objects: added,
            }));
            manifests_of.insert(id, manifests.clone());
            snapshots.push(SnapshotInfo {
                snapshot_id: id,
                parent_id: parent,
                timestamp_ms: now - DAY * (60 - i64::from(i) * 2) + rng.gen_range(0..DAY),
                objects: Some(SnapshotObjects {
                    own: vec![obj(&format!("metadata/snap-{id}.avro"), Layer::ManifestList)],
                    manifests,
                }),
            });
        }
        let pick = |rng: &mut rand::rngs::StdRng| 1000 + rng.gen_range(0..i64::from(n));
        let current = pick(rng);
        let mut refs = vec![RefInfo {
            name: "main".into(),
            snapshot_id: current,
            is_branch: true,
            max_ref_age_ms: None,
            max_snapshot_age_ms: Some(rng.gen_range(0..40) * DAY),
            min_snapshots_to_keep: Some(rng.gen_range(1..4)),
        }];
        for k in 0..rng.gen_range(0..4) {
            refs.push(RefInfo {
                name: format!("r{k}"),
                snapshot_id: pick(rng),
                is_branch: rng.gen_bool(0.5),
                max_ref_age_ms: if rng.gen_bool(0.3) { Some(DAY) } else { None },
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            });
        }
        let mut protections = Protections::default();
        for k in 0..rng.gen_range(0..3) {
            protections.leases.push((pick(rng), format!("l{k}")));
        }
        if rng.gen_bool(0.3) {
            protections.checkpoints.push((pick(rng), "dr".into()));
        }
        if rng.gen_bool(0.3) {
            protections.holds.push(("h1".into(), HoldScope::Snapshot(pick(rng))));
        }
        if rng.gen_bool(0.2) {
            protections.holds.push(("h2".into(), HoldScope::Prefix("data".into())));
        }
        if rng.gen_bool(0.05) {
            protections.holds.push(("h3".into(), HoldScope::Table));
        }
        if rng.gen_bool(0.3) {
            protections.writers.push(("w1".into(), "data/f1".into()));
        }
        if rng.gen_bool(0.3) {
            protections.protected_refs.push("r0".into());
        }
        let listing = Some(
            (0..rng.gen_range(0..5))
                .map(|k| ListedObject {
                    path: format!("data/orphan{k}.parquet"),
                    size: 5,
                    last_modified_ms: now - rng.gen_range(0..3) * DAY,
                })
                .collect(),
        );
        let min_age = rng.gen_range(0..30) * DAY;
        PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots,
            refs,
            current_snapshot_id: Some(current),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing,
            protections,
            min_snapshot_age_ms: min_age,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
            baseline: Baseline::relative(now, min_age, DAY),
            statistics_files: BTreeMap::new(),
        }
    }

    #[test]
    fn a_file_a_kept_snapshot_reaches_added_to_a_candidate_is_found_by_the_independent_check() {
        // A registry row edited to add a file of the candidate's own snapshot that another snapshot the table
        // keeps (not a ref head, not current, not leased or held) still reaches: only that snapshot protects it.
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut found = 0;
        for _ in 0..300 {
            let input = random_input(&mut rng);
            let p = plan(&input);
            let Some(c) = p.candidates.iter().find(|c| c.kind != "orphans") else {
                continue;
            };
            let nondeletable: HashSet<i64> = input
                .refs
                .iter()
                .map(|r| r.snapshot_id)
                .chain(input.current_snapshot_id)
                .chain(input.protections.leases.iter().map(|(id, _)| *id))
                .chain(input.protections.checkpoints.iter().map(|(id, _)| *id))
                .chain(input.protections.holds.iter().filter_map(|(_, h)| match h {
                    HoldScope::Snapshot(id) => Some(*id),
                    _ => None,
                }))
                .collect();
            let protected: HashSet<&str> = input
                .snapshots
                .iter()
                .filter(|s| nondeletable.contains(&s.snapshot_id))
                .flat_map(|s| s.objects.as_ref().unwrap().iter().map(|o| o.path.as_str()))
                .collect();
            let Some(extra) = input
                .snapshots
                .iter()
                .filter(|s| !c.snapshot_ids.contains(&s.snapshot_id) && !nondeletable.contains(&s.snapshot_id))
                .flat_map(|s| s.objects.as_ref().unwrap().iter())
                .find(|o| !protected.contains(o.path.as_str()))
            else {
                continue;
            };
            if input.protections.writers.iter().any(|(_, w)| under(&extra.path, w))
                || input
                    .protections
                    .holds
                    .iter()
                    .any(|(_, h)| !matches!(h, HoldScope::Snapshot(_)))
            {
                continue;
            }
            let mut objects = c.objects.clone();
            objects.push(extra.clone());
            let conflicts = nondeletable_conflicts(&input, &c.snapshot_ids, &objects);
            assert_eq!(
                conflicts,
                vec![format!(
                    "{} is reachable from a snapshot the table keeps outside the candidate",
                    extra.path
                )]
            );
            found += 1;
        }
        assert!(found >= 10, "only {found} histories had such a file");
    }

    #[test]
    fn no_candidate_object_is_reachable_from_a_retained_snapshot_over_random_histories() {
        // 1,000 histories in the normal suite; `scripts/property.sh` runs 10,000 (LAKEDRILL_PROPERTY_CASES)
        // with a seed per run (LAKEDRILL_PROPERTY_SEED), printed so a failure can be replayed.
        let cases: usize = std::env::var("LAKEDRILL_PROPERTY_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let seed: u64 = std::env::var("LAKEDRILL_PROPERTY_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0x1a4e_d411);
        eprintln!("property: {cases} random histories, seed {seed}");
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut with_candidates = 0;
        for round in 0..cases {
            let input = random_input(&mut rng);
            let p = plan(&input);
            // Sharing manifests between snapshots is only a representation: the same history with
            // every snapshot's objects flattened plans the same.
            let mut flat = input.clone();
            for s in &mut flat.snapshots {
                s.objects = s.objects.as_ref().map(|o| o.iter().cloned().collect());
            }
            let q = plan(&flat);
            assert_eq!(p.candidates, q.candidates, "round {round}: shared vs flat");
            assert_eq!(p.plain_expire, q.plain_expire, "round {round}: shared vs flat");
            let retained: BTreeSet<i64> = p.protected.iter().map(|x| x.snapshot_id).collect();
            let reachable: BTreeSet<&str> = input
                .snapshots
                .iter()
                .filter(|s| retained.contains(&s.snapshot_id))
                .flat_map(|s| s.objects.as_ref().unwrap().iter().map(|o| o.path.as_str()))
                .collect();
            for c in &p.candidates {
                for o in &c.objects {
                    assert!(
                        !reachable.contains(o.path.as_str()),
                        "round {round}: {} reachable from a retained snapshot",
                        o.path
                    );
                    for (_, w) in &input.protections.writers {
                        assert!(!under(&o.path, w), "round {round}: {} under writer prefix", o.path);
                    }
                    for (_, h) in &input.protections.holds {
                        assert!(
                            !matches!(h, HoldScope::Prefix(pf) if under(&o.path, pf)),
                            "round {round}: held {}",
                            o.path
                        );
                        assert_ne!(*h, HoldScope::Table, "round {round}: table hold yet candidates");
                    }
                }
                for id in &c.snapshot_ids {
                    assert!(!retained.contains(id));
                    assert!(
                        !input.protections.leases.iter().any(|(l, _)| l == id),
                        "round {round}: leased {id}"
                    );
                    assert!(
                        !input.protections.checkpoints.iter().any(|(l, _)| l == id),
                        "round {round}: checkpoint {id}"
                    );
                    assert!(Some(*id) != input.current_snapshot_id);
                    assert!(
                        !input.refs.iter().any(|r| r.snapshot_id == *id),
                        "round {round}: ref head {id}"
                    );
                }
                assert_eq!(c.inventory_root, candidate_root(&c.objects));
                // The independent check (which also keeps every snapshot outside the candidate) agrees.
                let conflicts = nondeletable_conflicts(&input, &c.snapshot_ids, &c.objects);
                assert!(conflicts.is_empty(), "round {round}: {conflicts:?}");
                with_candidates += 1;
            }
            // Orphans are never younger than the safety interval.
            for c in p.candidates.iter().filter(|c| c.kind == "orphans") {
                for o in &c.objects {
                    let l = input
                        .listing
                        .as_ref()
                        .unwrap()
                        .iter()
                        .find(|l| l.path == o.path)
                        .unwrap();
                    assert!(input.now_ms - l.last_modified_ms > input.orphan_safety_interval_ms);
                }
            }
        }
        assert!(
            with_candidates > cases / 5,
            "the generator must produce candidates often ({with_candidates} of {cases})"
        );
    }

    /// `input` with the paths `rename` picks made hidden (`data/f1.parquet` -> `data/_f1.parquet`) everywhere, and
    /// a listing of everything the history references, a statistics file, hidden files, version hints and orphans,
    /// each with a random size and age (a tenth without a modification time).
    fn with_full_listing(mut input: PlanInput, rng: &mut rand::rngs::StdRng) -> PlanInput {
        let hide = |p: &str| -> String {
            let n = p.bytes().map(u64::from).sum::<u64>();
            match p.rsplit_once('/') {
                Some((dir, name)) if dir == "data" && n % 4 == 0 => format!("{dir}/_{name}"),
                _ => p.to_owned(),
            }
        };
        for s in &mut input.snapshots {
            if let Some(o) = &mut s.objects {
                for x in &mut o.own {
                    x.path = hide(&x.path);
                }
                for m in &mut o.manifests {
                    for x in &mut Arc::make_mut(m).objects {
                        x.path = hide(&x.path);
                    }
                }
            }
        }
        let some = input.snapshots[rng.gen_range(0..input.snapshots.len())].snapshot_id;
        input
            .statistics_files
            .insert(some, vec![format!("metadata/stats-{some}.puffin")]);
        let mut paths: BTreeSet<String> = input
            .snapshots
            .iter()
            .filter_map(|s| s.objects.as_ref())
            .flat_map(|o| o.iter().map(|x| x.path.clone()).collect::<Vec<_>>())
            .collect();
        paths.extend(input.statistics_files.values().flatten().cloned());
        for extra in [
            "data/.f1.parquet.crc",
            "data/_SUCCESS",
            "metadata/version-hint.text",
            "data/x/version-hint.text",
            "data/stray.parquet",
            "metadata/old.metadata.json",
        ] {
            paths.insert(extra.to_owned());
        }
        let now = input.now_ms;
        let mut listing = input.listing.take().unwrap_or_default();
        for path in paths {
            if listing.iter().any(|l| l.path == path) {
                continue;
            }
            listing.push(ListedObject {
                path,
                size: rng.gen_range(1..100),
                last_modified_ms: if rng.gen_bool(0.1) {
                    0
                } else {
                    now - rng.gen_range(0..40) * 24 * 3_600_000
                },
            });
        }
        input.listing = Some(listing);
        input
    }

    #[test]
    fn leaving_the_times_the_plan_does_not_need_unread_plans_the_same_over_random_histories() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x7133_5eed);
        let (mut unread, mut read_referenced) = (0, 0);
        for round in 0..500 {
            let mut input = with_full_listing(random_input(&mut rng), &mut rng);
            let unreadable = rng.gen_bool(0.1);
            if unreadable {
                let i = rng.gen_range(0..input.snapshots.len());
                input.snapshots[i].objects = None;
            }
            let full = plan(&input);
            let compared = crate::govern::compare::compare(&input, &full);
            let mut lean = input.clone();
            {
                let needed = listing_time_needed(&input);
                let referenced = crate::govern::baseline::referenced_paths(&input);
                for l in lean.listing.as_mut().unwrap() {
                    if needed(&l.path) {
                        read_referenced += usize::from(referenced.contains(l.path.as_str()));
                    } else {
                        assert!(
                            !unreadable,
                            "round {round}: {} unread with a snapshot unreadable",
                            l.path
                        );
                        l.size = 0;
                        l.last_modified_ms = ListedObject::TIME_NOT_READ;
                        unread += 1;
                    }
                }
            }
            let p = plan(&lean);
            assert_eq!(p, full, "round {round}: the plan changed with unread times");
            assert_eq!(
                crate::govern::compare::compare(&lean, &p),
                compared,
                "round {round}: the comparison changed with unread times"
            );
        }
        // Both sides are exercised: times go unread (the current snapshot's objects, hidden files), and times of
        // referenced objects are read (those plain expire_snapshots would remove).
        assert!(
            unread > 2_000 && read_referenced > 2_000,
            "{unread} unread, {read_referenced} read"
        );
    }

    #[test]
    fn a_lease_removes_a_snapshot_and_its_exclusive_files_from_the_candidates() {
        let snap = |id: i64, parent: Option<i64>, ts: i64, files: &[&str]| SnapshotInfo {
            snapshot_id: id,
            parent_id: parent,
            timestamp_ms: ts,
            objects: Some(files.iter().map(|f| obj(f, Layer::Data)).collect()),
        };
        let now = 100 * DAY;
        let mut input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![
                snap(1, None, now - 90 * DAY, &["a", "b"]),
                snap(2, Some(1), now - 80 * DAY, &["b", "c"]),
            ],
            refs: vec![RefInfo {
                name: "main".into(),
                snapshot_id: 2,
                is_branch: true,
                max_ref_age_ms: None,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            }],
            current_snapshot_id: Some(2),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: None,
            protections: Protections::default(),
            min_snapshot_age_ms: 30 * DAY,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
            baseline: Baseline::relative(now, 30 * DAY, DAY),
            statistics_files: BTreeMap::new(),
        };
        let p = plan(&input);
        assert_eq!(p.candidates[0].snapshot_ids, vec![1]);
        assert_eq!(
            p.candidates[0]
                .objects
                .iter()
                .map(|o| o.path.as_str())
                .collect::<Vec<_>>(),
            vec!["a"]
        );
        assert_eq!(p.plain_expire.snapshot_ids, vec![1]);
        input.protections.leases.push((1, "L".into()));
        let p = plan(&input);
        assert!(p.candidates.is_empty());
        let why = |s: &str| p.differences.iter().find(|d| d.subject == s).map(|d| d.reasons.clone());
        assert_eq!(why("snapshot 1"), Some(vec!["lease:L".to_owned()]));
        // The object only plain expiry would remove names the snapshot and the reason that kept it.
        assert_eq!(why("a"), Some(vec!["lease:L (snapshot 1)".to_owned()]));
        assert_eq!(p.differences.len(), 2);
    }

    #[test]
    fn a_table_hold_keeps_every_object_of_a_candidate_whose_snapshots_left_the_table() {
        // Bundle mode (or a purge resumed after its catalog commit): snapshot 1 is out of the table, so nothing
        // the table keeps reaches "a". Only the table-wide hold stands between "a" and the deleter.
        let now = 100 * DAY;
        let mut input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![SnapshotInfo {
                snapshot_id: 2,
                parent_id: Some(1),
                timestamp_ms: now - 80 * DAY,
                objects: Some(vec![obj("b", Layer::Data)].into()),
            }],
            refs: vec![],
            current_snapshot_id: Some(2),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: None,
            protections: Protections::default(),
            min_snapshot_age_ms: 30 * DAY,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
            baseline: Baseline::relative(now, 30 * DAY, DAY),
            statistics_files: BTreeMap::new(),
        };
        let objects = [obj("a", Layer::Data)];
        let r = rebase(&input, &plan(&input), &[1], &objects);
        assert!(r.unchanged(), "{:?}", r.released_objects);
        input.protections.holds.push(("case-1".into(), HoldScope::Table));
        let r = rebase(&input, &plan(&input), &[1], &objects);
        assert!(r.objects.is_empty(), "{:?}", r.objects);
        assert!(r.snapshot_ids.is_empty());
        assert_eq!(
            r.released_objects,
            vec![("a".to_owned(), "hold:case-1 (table)".to_owned())]
        );
        assert_eq!(r.released_snapshots, vec![(1, "hold:case-1 (table)".to_owned())]);
    }

    #[test]
    fn hidden_files_the_version_hint_and_files_without_mtime_are_reported_never_orphans() {
        let now = 100 * DAY;
        let listed = |p: &str, mtime: i64| ListedObject {
            path: p.into(),
            size: 1,
            last_modified_ms: mtime,
        };
        let old = now - 10 * DAY;
        let mut input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![SnapshotInfo {
                snapshot_id: 1,
                parent_id: None,
                timestamp_ms: old,
                objects: Some([obj("data/live.parquet", Layer::Data)].into_iter().collect()),
            }],
            refs: vec![RefInfo {
                name: "main".into(),
                snapshot_id: 1,
                is_branch: true,
                max_ref_age_ms: None,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            }],
            current_snapshot_id: Some(1),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: Some(vec![
                listed("data/live.parquet", old),
                listed("data/stray.parquet", old),
                listed("data/_SUCCESS", old),
                listed("data/.stray.parquet.crc", old),
                listed("data/_temporary/0/x.parquet", old),
                listed("metadata/version-hint.text", old),
                listed("data/epoch.parquet", 0),
                listed("data/young.parquet", now - 1000),
            ]),
            protections: Protections::default(),
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: 2 * DAY,
            now_ms: now,
            baseline: Baseline::relative(now, DAY, 2 * DAY),
            statistics_files: BTreeMap::new(),
        };
        let p = plan(&input);
        let orphans: Vec<&str> = p
            .candidates
            .iter()
            .filter(|c| c.kind == "orphans")
            .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
            .collect();
        assert_eq!(orphans, ["data/stray.parquet"]);
        let kept: Vec<(&str, &str)> = p
            .kept_unreferenced
            .iter()
            .map(|d| (d.subject.as_str(), d.reasons[0].split(':').next().unwrap_or_default()))
            .collect();
        assert_eq!(
            kept,
            [
                ("data/.stray.parquet.crc", "hidden"),
                ("data/_SUCCESS", "hidden"),
                ("data/_temporary/0/x.parquet", "hidden"),
                ("data/epoch.parquet", "no-modification-time"),
                ("metadata/version-hint.text", "pointer"),
            ]
        );
        assert!(
            p.warnings.is_empty(),
            "2 days is above the 24-hour floor: {:?}",
            p.warnings
        );
        // What plain remove_orphan_files (here with `older_than` now) would take and lakedrill keeps says why,
        // from the listing's times; the same whether the listing comes sorted by path or not.
        let mut eager = input.clone();
        eager.baseline.orphans_older_than_ms = now;
        let p = plan(&eager);
        let why = |p: &Plan, path: &str| -> Vec<String> {
            p.differences
                .iter()
                .filter(|d| d.subject == path)
                .flat_map(|d| {
                    d.reasons
                        .iter()
                        .map(|r| r.split(':').next().unwrap_or_default().to_owned())
                })
                .collect()
        };
        assert_eq!(why(&p, "data/young.parquet"), ["safety-interval"]);
        assert_eq!(why(&p, "data/epoch.parquet"), ["no-modification-time"]);
        let mut sorted = eager.clone();
        if let Some(l) = sorted.listing.as_mut() {
            assert!(!l.is_sorted_by(|a, b| a.path < b.path));
            l.sort_by(|a, b| a.path.cmp(&b.path));
        }
        let q = plan(&sorted);
        assert_eq!(q.differences, p.differences);
        assert_eq!(q.kept_unreferenced, p.kept_unreferenced);
        input.orphan_safety_interval_ms = 12 * 3_600_000;
        let p = plan(&input);
        assert!(
            p.warnings.iter().any(|w| w.contains("below 24 hours")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn held_orphans_a_later_commit_references_or_a_writer_or_hold_covers_leave_the_candidate_and_rights_follow() {
        let now = 100 * DAY;
        let old = now - 10 * DAY;
        let held = [
            "data/a.parquet",
            "data/w/b.parquet",
            "data/h/c.parquet",
            "data/d.parquet",
        ];
        let objects: Vec<ObjectRef> = held.iter().map(|p| obj(p, Layer::Data)).collect();
        let mut input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![SnapshotInfo {
                snapshot_id: 1,
                parent_id: None,
                timestamp_ms: old,
                // A late commit now references data/a.parquet.
                objects: Some(
                    [
                        obj("data/live.parquet", Layer::Data),
                        obj("data/a.parquet", Layer::Data),
                    ]
                    .into_iter()
                    .collect(),
                ),
            }],
            refs: vec![],
            current_snapshot_id: Some(1),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: Some(vec![ListedObject {
                path: "data/x.parquet".into(),
                size: 1,
                last_modified_ms: old,
            }]),
            protections: Protections {
                writers: vec![("w1".into(), "data/w".into())],
                holds: vec![("h1".into(), HoldScope::Prefix("data/h".into()))],
                held_orphans: vec!["data/d.parquet".into()],
                deletion_rights: vec![
                    DeletionRight {
                        id: "held".into(),
                        scope: DeletionScope::Path("data/d.parquet".into()),
                        written_scope: "object:data/d.parquet".into(),
                        deadline_ms: now + DAY,
                    },
                    DeletionRight {
                        id: "listed".into(),
                        scope: DeletionScope::Path("data/x.parquet".into()),
                        written_scope: "object:data/x.parquet".into(),
                        deadline_ms: now + DAY,
                    },
                ],
                ..Protections::default()
            },
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: 2 * DAY,
            now_ms: now,
            baseline: Baseline::relative(now, DAY, 2 * DAY),
            statistics_files: BTreeMap::new(),
        };
        let r = orphan_rebase(&input, &objects);
        assert!(r.unreadable.is_empty());
        assert_eq!(
            r.objects.iter().map(|o| o.path.as_str()).collect::<Vec<_>>(),
            ["data/d.parquet"]
        );
        let why: BTreeMap<&str, &str> = r
            .released_objects
            .iter()
            .map(|(p, w)| (p.as_str(), w.as_str()))
            .collect();
        assert!(why["data/a.parquet"].starts_with("referenced by the table"), "{why:?}");
        assert!(why["data/w/b.parquet"].starts_with("writer:w1"), "{why:?}");
        assert!(why["data/h/c.parquet"].starts_with("hold:h1"), "{why:?}");
        // A right over a held file is not fulfilled before the purge; one over a listed orphan is a candidate.
        let p = plan(&input);
        let status: BTreeMap<&str, &str> = p
            .deletion_rights
            .iter()
            .map(|d| (d.id.as_str(), d.status.as_str()))
            .collect();
        assert_eq!(status["held"], "quarantined", "{:?}", p.deletion_rights);
        assert_eq!(status["listed"], "candidate", "{:?}", p.deletion_rights);
        // Files put back are proposed again under another id once an orphan candidate ended without a purge.
        let first = p
            .candidates
            .iter()
            .find(|c| c.kind == "orphans")
            .unwrap()
            .candidate_id
            .clone();
        input.protections.orphan_epoch = 1;
        let again = plan(&input);
        let second = &again
            .candidates
            .iter()
            .find(|c| c.kind == "orphans")
            .unwrap()
            .candidate_id;
        assert_ne!(&first, second);
        input.protections.held_orphans.clear();
        assert_eq!(
            plan(&input)
                .deletion_rights
                .iter()
                .find(|d| d.id == "held")
                .unwrap()
                .status,
            "fulfilled"
        );
        // A snapshot whose layers cannot be read: nothing can be shown unreferenced.
        input.snapshots[0].objects = None;
        assert_eq!(orphan_rebase(&input, &objects).unreadable, vec![1]);
    }

    /// Unreferenced old files that resolve outside the table root, or belong to an unfinished snapshot candidate
    /// whose snapshots left the table (bundle mode), are never orphans: `plan` keeps them with the reason naming
    /// the target or the candidate, plain `remove_orphan_files`' difference says so, and a held orphan among them
    /// leaves its candidate at the re-check (the quarantine refuses, the purge puts it back).
    #[test]
    fn files_outside_the_root_or_of_an_unfinished_snapshot_candidate_are_never_orphans() {
        let now = 100 * DAY;
        let old = now - 10 * DAY;
        let listed = |p: &str| ListedObject {
            path: p.into(),
            size: 1,
            last_modified_ms: old,
        };
        let input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![SnapshotInfo {
                snapshot_id: 1,
                parent_id: None,
                timestamp_ms: old,
                objects: Some([obj("data/live.parquet", Layer::Data)].into_iter().collect()),
            }],
            refs: vec![],
            current_snapshot_id: Some(1),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: Some(vec![
                listed("data/ext/theirs.parquet"),
                listed("data/live.parquet"),
                listed("data/of-c.parquet"),
                listed("data/stray.parquet"),
                listed("metadata/snap-of-c.avro"),
            ]),
            protections: Protections {
                outside_root: [(
                    "data/ext/theirs.parquet".to_owned(),
                    "/elsewhere/theirs.parquet".to_owned(),
                )]
                .into_iter()
                .collect(),
                snapshot_candidate_files: ["data/of-c.parquet", "metadata/snap-of-c.avro"]
                    .into_iter()
                    .map(|p| (p.to_owned(), Arc::<str>::from("c-1")))
                    .collect(),
                ..Protections::default()
            },
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: 2 * DAY,
            now_ms: now,
            baseline: Baseline::relative(now, DAY, 2 * DAY),
            statistics_files: BTreeMap::new(),
        };
        let p = plan(&input);
        let orphans: Vec<&str> = p
            .candidates
            .iter()
            .filter(|c| c.kind == "orphans")
            .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
            .collect();
        assert_eq!(orphans, ["data/stray.parquet"]);
        let kept: BTreeMap<&str, &str> = p
            .kept_unreferenced
            .iter()
            .map(|k| (k.subject.as_str(), k.reasons[0].as_ref()))
            .collect();
        assert!(
            kept["data/ext/theirs.parquet"].starts_with("outside-table-root: resolves to /elsewhere/theirs.parquet"),
            "{kept:?}"
        );
        assert!(kept["data/of-c.parquet"].starts_with("candidate:c-1:"), "{kept:?}");
        assert!(
            kept["metadata/snap-of-c.avro"].starts_with("candidate:c-1:"),
            "{kept:?}"
        );
        for d in p.differences.iter().filter(|d| d.subject != "data/stray.parquet") {
            assert!(
                d.reasons
                    .iter()
                    .any(|r| r.starts_with("outside-table-root") || r.starts_with("candidate:c-1")),
                "{d:?}"
            );
        }
        let held = [
            obj("data/of-c.parquet", Layer::Data),
            obj("data/stray.parquet", Layer::Data),
        ];
        let r = orphan_rebase(&input, &held);
        assert_eq!(r.objects, vec![obj("data/stray.parquet", Layer::Data)]);
        assert_eq!(r.released_objects.len(), 1);
        assert!(r.released_objects[0].1.starts_with("candidate:c-1:"), "{r:?}");
    }

    /// A folder `alias` linked to `data` inside the table lists every file twice. A path through the link is never
    /// an orphan (removing it removes the real file), and neither is the real path of a file the table references
    /// only through the link; neither goes into a snapshot candidate with an expired snapshot that names it under
    /// the other path. A file the bundles of an unfinished bundle-mode candidate name in place is never an orphan,
    /// referenced or not.
    #[test]
    fn paths_through_a_link_inside_the_table_and_files_a_bundle_names_are_never_orphans() {
        let now = 100 * DAY;
        let old = now - 10 * DAY;
        let listed = |p: &str| ListedObject {
            path: p.into(),
            size: 1,
            last_modified_ms: old,
        };
        let snap = |id: i64, ts: i64, files: &[&str]| SnapshotInfo {
            snapshot_id: id,
            parent_id: None,
            timestamp_ms: ts,
            objects: Some(files.iter().map(|f| obj(f, Layer::Data)).collect()),
        };
        let input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            // Snapshot 1 (expired) names the file as written, snapshot 2 (current) through the link.
            snapshots: vec![
                snap(1, old, &["data/f.parquet", "data/only-old.parquet"]),
                snap(2, now - DAY / 2, &["alias/f.parquet"]),
            ],
            refs: vec![],
            current_snapshot_id: Some(2),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: Some(vec![
                listed("alias/f.parquet"),
                listed("alias/only-old.parquet"),
                listed("alias/stray.parquet"),
                listed("data/f.parquet"),
                listed("data/in-a-bundle.parquet"),
                listed("data/only-old.parquet"),
                listed("data/stray.parquet"),
            ]),
            protections: Protections {
                linked: [
                    ("alias/f.parquet", "data/f.parquet"),
                    ("alias/only-old.parquet", "data/only-old.parquet"),
                    ("alias/stray.parquet", "data/stray.parquet"),
                ]
                .into_iter()
                .map(|(a, t)| (a.to_owned(), t.to_owned()))
                .collect(),
                link_targets: [("data/f.parquet".to_owned(), "alias/f.parquet".to_owned())]
                    .into_iter()
                    .collect(),
                bundle_files: [("data/in-a-bundle.parquet".to_owned(), Arc::<str>::from("c-9"))]
                    .into_iter()
                    .collect(),
                ..Protections::default()
            },
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: 2 * DAY,
            now_ms: now,
            baseline: Baseline::relative(now, DAY, 2 * DAY),
            statistics_files: BTreeMap::new(),
        };
        let p = plan(&input);
        let paths = |kind: &str| -> Vec<&str> {
            p.candidates
                .iter()
                .filter(|c| c.kind == kind)
                .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
                .collect()
        };
        assert_eq!(paths("orphans"), ["data/stray.parquet"]);
        assert_eq!(paths("expired-snapshots"), ["data/only-old.parquet"]);
        let kept: BTreeMap<&str, &str> = p
            .kept_unreferenced
            .iter()
            .map(|k| (k.subject.as_str(), k.reasons[0].as_ref()))
            .collect();
        assert!(
            kept["alias/stray.parquet"]
                .starts_with("linked: reaches its file through a symlink, which resolves to data/stray.parquet"),
            "{kept:?}"
        );
        assert!(kept["data/in-a-bundle.parquet"].starts_with("bundle:c-9:"), "{kept:?}");
        let taken_out = p
            .differences
            .iter()
            .find(|d| d.subject == "data/f.parquet")
            .unwrap_or_else(|| panic!("{:?}", p.differences));
        assert!(
            taken_out.reasons.iter().any(|r| r.starts_with("link-target: ")),
            "{taken_out:?}"
        );
        let held = [
            obj("alias/stray.parquet", Layer::Data),
            obj("data/f.parquet", Layer::Data),
            obj("data/in-a-bundle.parquet", Layer::Data),
            obj("data/stray.parquet", Layer::Data),
        ];
        let r = orphan_rebase(&input, &held);
        assert_eq!(r.objects, vec![obj("data/stray.parquet", Layer::Data)]);
        let conflicts = nondeletable_conflicts(&input, &[1], &[obj("alias/only-old.parquet", Layer::Data)]);
        assert!(conflicts.iter().any(|c| c.contains("linked: ")), "{conflicts:?}");
    }

    #[test]
    fn a_deletion_right_lifts_only_the_min_snapshot_age_floor_and_a_hold_makes_it_a_conflict() {
        let snap = |id: i64, parent: Option<i64>, ts: i64, files: &[&str]| SnapshotInfo {
            snapshot_id: id,
            parent_id: parent,
            timestamp_ms: ts,
            objects: Some(files.iter().map(|f| obj(f, Layer::Data)).collect()),
        };
        let now = 100 * DAY;
        let mut input = PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![
                snap(1, None, now - 3 * DAY, &["data/a", "data/b"]),
                snap(2, Some(1), now - 2 * DAY, &["data/b", "data/c"]),
                snap(3, Some(2), now - DAY, &["data/c"]),
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
            listing: None,
            protections: Protections::default(),
            min_snapshot_age_ms: 30 * DAY,
            orphan_safety_interval_ms: DAY,
            now_ms: now,
            baseline: Baseline::relative(now, 30 * DAY, DAY),
            statistics_files: BTreeMap::new(),
        };
        // Everything is younger than minSnapshotAge: no candidate.
        assert!(plan(&input).candidates.is_empty());
        input.protections.deletion_rights.push(DeletionRight {
            id: "dsr".into(),
            scope: DeletionScope::Path("data/a".into()),
            written_scope: "prefix:data/a".into(),
            deadline_ms: now - 1,
        });
        let p = plan(&input);
        assert_eq!(p.candidates[0].snapshot_ids, vec![1]);
        assert_eq!(p.deletion_rights[0].status, "candidate");
        // Shown as the decision wrote it, not as a `path:` kind no decision has.
        assert_eq!(p.deletion_rights[0].scope, "prefix:data/a");
        assert!(p.deletion_rights[0].overdue);
        // A hold on a prefix the scope lies under: conflict, and the snapshot stays protected.
        input
            .protections
            .holds
            .push(("H".into(), HoldScope::Prefix("data".into())));
        let p = plan(&input);
        assert!(p.candidates.is_empty());
        assert_eq!(p.deletion_rights[0].status, "conflict");
        assert_eq!(p.deletion_rights[0].reasons, vec!["hold:H".to_owned()]);
        input.protections.holds.clear();
        // A lease still keeps it: blocked, with the reason.
        input.protections.leases.push((1, "L".into()));
        let p = plan(&input);
        assert!(p.candidates.is_empty());
        assert_eq!(p.deletion_rights[0].status, "blocked");
        assert!(
            p.deletion_rights[0].reasons[0].contains("lease:L"),
            "{:?}",
            p.deletion_rights
        );
        input.protections.leases.clear();
        // The current snapshot is never released by a deletion right.
        input.protections.deletion_rights[0].scope = DeletionScope::Snapshot(3);
        let p = plan(&input);
        assert_eq!(p.deletion_rights[0].status, "blocked");
        // Once the snapshots are gone, it is fulfilled.
        input.protections.deletion_rights[0].scope = DeletionScope::Snapshot(99);
        assert_eq!(plan(&input).deletion_rights[0].status, "fulfilled");
    }

    /// A table whose current snapshot 1 references `data/live.parquet`, with the leftover manifest list and data
    /// file of a snapshot 0 that left the metadata listed, ten days old.
    fn gone_snapshot_input() -> PlanInput {
        let now = 100 * DAY;
        let old = now - 10 * DAY;
        let listed = |p: &str| ListedObject {
            path: p.into(),
            size: 1,
            last_modified_ms: old,
        };
        PlanInput {
            table_uuid: "t".into(),
            generation_blake3: "g".into(),
            snapshots: vec![SnapshotInfo {
                snapshot_id: 1,
                parent_id: None,
                timestamp_ms: old,
                objects: Some([obj("data/live.parquet", Layer::Data)].into_iter().collect()),
            }],
            refs: vec![RefInfo {
                name: "main".into(),
                snapshot_id: 1,
                is_branch: true,
                max_ref_age_ms: None,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            }],
            current_snapshot_id: Some(1),
            defaults: TableDefaults::default(),
            live_metadata_files: BTreeSet::new(),
            unreadable: BTreeMap::new(),
            listing: Some(vec![
                listed("data/live.parquet"),
                listed("data/s0.parquet"),
                listed("metadata/snap-0.avro"),
            ]),
            protections: Protections::default(),
            min_snapshot_age_ms: DAY,
            orphan_safety_interval_ms: 2 * DAY,
            now_ms: now,
            baseline: Baseline::relative(now, DAY, 2 * DAY),
            statistics_files: BTreeMap::new(),
        }
    }

    #[test]
    fn a_protection_on_a_snapshot_gone_from_the_metadata_switches_orphan_detection_off() {
        let orphan_ids = |p: &Plan| -> Vec<String> {
            p.candidates
                .iter()
                .filter(|c| c.kind == "orphans")
                .map(|c| c.candidate_id.clone())
                .collect()
        };
        // Unprotected, the leftovers of snapshot 0 are orphans.
        let input = gone_snapshot_input();
        let p = plan(&input);
        let orphans: Vec<&str> = p
            .candidates
            .iter()
            .filter(|c| c.kind == "orphans")
            .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
            .collect();
        assert_eq!(orphans, ["data/s0.parquet", "metadata/snap-0.avro"]);
        let objects = p.candidates[0].objects.clone();
        assert!(orphan_rebase(&input, &objects).missing_protected.is_empty());
        type Protect = fn(&mut Protections);
        let cases: [(&str, Protect); 3] = [
            ("legal hold h1", |p| p.holds.push(("h1".into(), HoldScope::Snapshot(0)))),
            ("lease l1", |p| p.leases.push((0, "l1".into()))),
            ("checkpoint cp1", |p| p.checkpoints.push((0, "cp1".into()))),
        ];
        for (name, protect) in cases {
            let mut input = gone_snapshot_input();
            protect(&mut input.protections);
            let p = plan(&input);
            assert!(orphan_ids(&p).is_empty(), "{name}: {:?}", p.candidates);
            assert!(
                p.warnings
                    .iter()
                    .any(|w| w.contains(&format!("{name} on snapshot 0")) && w.contains("orphan detection is off")),
                "{name}: {:?}",
                p.warnings
            );
            // The quarantine and purge of an orphan candidate planned before cannot decide.
            let r = orphan_rebase(&input, &objects);
            assert_eq!(
                r.missing_protected,
                [format!(
                    "{name} on snapshot 0 (not resolved: this command does not resolve it from a bundle)"
                )]
            );
            // Resolved from its verified bundle (by `ops`), with what ops gave as the reason it could not be
            // resolved: detection is on, snapshot 0's files are kept for the protection, a stray file is an orphan.
            let mut unresolved = input.clone();
            unresolved
                .protections
                .unresolved_missing
                .insert(0, "no trust store".into());
            assert_eq!(
                protections_of_missing_snapshots(&unresolved),
                [format!("{name} on snapshot 0 (not resolved: no trust store)")]
            );
            let mut resolved = input.clone();
            resolved
                .protections
                .resolved_missing
                .insert(0, "bundle b of candidate c-1, verified".into());
            for f in ["data/s0.parquet", "metadata/snap-0.avro"] {
                resolved.protections.missing_snapshot_files.insert(f.into(), 0);
            }
            if let Some(l) = resolved.listing.as_mut() {
                for path in [
                    "data/stray.parquet",
                    "metadata/0-5a1e.stats",
                    "metadata/partition-stats-0-5a1e.parquet",
                ] {
                    l.push(ListedObject {
                        path: path.into(),
                        size: 1,
                        last_modified_ms: 90 * DAY,
                    });
                }
                l.sort_by(|a, b| a.path.cmp(&b.path));
            }
            let p = plan(&resolved);
            let orphans: Vec<&str> = p
                .candidates
                .iter()
                .filter(|c| c.kind == "orphans")
                .flat_map(|c| c.objects.iter().map(|o| o.path.as_str()))
                .collect();
            assert_eq!(orphans, ["data/stray.parquet"], "{name}: {:?}", p.warnings);
            assert!(
                !p.warnings.iter().any(|w| w.contains("orphan detection is off")),
                "{:?}",
                p.warnings
            );
            let tag = match name.split_once(' ') {
                Some(("legal", rest)) => format!("hold:{}", rest.trim_start_matches("hold ")),
                Some((kind, id)) => format!("{kind}:{id}"),
                None => unreachable!(),
            };
            // Its statistics files, which the bundle does not seal, are kept too.
            for f in ["metadata/0-5a1e.stats", "metadata/partition-stats-0-5a1e.parquet"] {
                let k = p.kept_unreferenced.iter().find(|k| k.subject == f);
                assert!(
                    k.is_some_and(|k| k.reasons[0].starts_with("statistics-of:0")),
                    "{name}: {f}: {:?}",
                    p.kept_unreferenced
                );
            }
            for f in ["data/s0.parquet", "metadata/snap-0.avro"] {
                let k = p.kept_unreferenced.iter().find(|k| k.subject == f).unwrap();
                assert!(
                    k.reasons[0].starts_with(&format!("{tag} on snapshot 0, which left the table")),
                    "{f}: {:?}",
                    k.reasons
                );
            }
            let r = orphan_rebase(&resolved, &objects);
            assert!(r.missing_protected.is_empty() && r.objects.is_empty(), "{r:?}");
            // A snapshot candidate holding a file the protected snapshot reaches (one another engine's expiry left
            // shared with a snapshot the table still has) is refused by the independent check and kept out of a
            // rebase: the resolved files bind every candidate, not only orphans (review of 2026-12-07, R4-10).
            let shared = [crate::model::object::ObjectRef {
                path: "data/s0.parquet".into(),
                layer: crate::model::object::Layer::Data,
                size: 1,
            }];
            let c = nondeletable_conflicts(&resolved, &[], &shared);
            assert!(
                c.iter()
                    .any(|w| w.contains("data/s0.parquet") && w.contains("which left the table")),
                "{name}: {c:?}"
            );
            assert!(
                nondeletable_conflicts(&input, &[], &shared).is_empty(),
                "{name}: unresolved, nothing names it"
            );
            // A protection on a snapshot still in the table changes nothing about orphans.
            let mut on_live = gone_snapshot_input();
            on_live.protections.leases.push((1, "l2".into()));
            assert_eq!(orphan_ids(&plan(&on_live)).len(), 1);
            assert!(protections_of_missing_snapshots(&on_live).is_empty());
        }
    }

    #[test]
    fn a_missing_protected_ref_means_no_snapshot_candidate() {
        let now = 100 * DAY;
        let mut input = gone_snapshot_input();
        input.listing = None;
        input.snapshots = vec![
            crate::govern::input::test_snapshot(0, None, now - 30 * DAY, &["data/s0.parquet"], 10),
            crate::govern::input::test_snapshot(1, Some(0), now - 10 * DAY, &["data/live.parquet"], 10),
        ];
        let c_ids = |p: &Plan| -> Vec<Vec<i64>> {
            p.candidates
                .iter()
                .filter(|c| c.kind == "expired-snapshots")
                .map(|c| c.snapshot_ids.clone())
                .collect()
        };
        // Snapshot 0 is on no ref and old: expirable.
        assert_eq!(c_ids(&plan(&input)), [vec![0]]);
        assert!(nondeletable_conflicts(&input, &[0], &[]).is_empty());
        input.protections.protected_refs = vec!["audit".into()];
        let p = plan(&input);
        assert!(c_ids(&p).is_empty(), "{:?}", p.candidates);
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("protected ref \"audit\"") && w.contains("no snapshot candidate")),
            "{:?}",
            p.warnings
        );
        let conflicts = nondeletable_conflicts(&input, &[0], &[]);
        assert!(
            conflicts.len() == 1 && conflicts[0].contains("protected ref \"audit\""),
            "{conflicts:?}"
        );
        // Once the ref exists (here on the current snapshot), snapshot 0 is a candidate again.
        input.refs.push(RefInfo {
            name: "audit".into(),
            snapshot_id: 1,
            is_branch: false,
            max_ref_age_ms: None,
            max_snapshot_age_ms: None,
            min_snapshots_to_keep: None,
        });
        assert_eq!(c_ids(&plan(&input)), [vec![0]]);
        assert!(missing_protected_refs(&input).is_empty());
    }

    /// A `protectedRefs` entry names the table's ref whatever the case of either (as `Policy::is_protected_ref`
    /// says): `Audit` protects the tag `audit`, which pins snapshot 0 — not "missing", which would block every
    /// snapshot candidate, and not unprotected.
    #[test]
    fn a_protected_ref_is_matched_ignoring_case() {
        let now = 100 * DAY;
        let mut input = gone_snapshot_input();
        input.listing = None;
        input.snapshots = vec![
            crate::govern::input::test_snapshot(0, None, now - 30 * DAY, &["data/s0.parquet"], 10),
            crate::govern::input::test_snapshot(1, Some(0), now - 20 * DAY, &["data/s1.parquet"], 10),
            crate::govern::input::test_snapshot(2, Some(1), now - 10 * DAY, &["data/live.parquet"], 10),
        ];
        input.refs.push(RefInfo {
            name: "audit".into(),
            snapshot_id: 0,
            is_branch: false,
            max_ref_age_ms: None,
            max_snapshot_age_ms: None,
            min_snapshots_to_keep: None,
        });
        input.refs[0].snapshot_id = 2;
        input.current_snapshot_id = Some(2);
        input.protections.protected_refs = vec!["Audit".into()];
        assert!(missing_protected_refs(&input).is_empty());
        let p = plan(&input);
        let expired: Vec<i64> = p
            .candidates
            .iter()
            .filter(|c| c.kind == "expired-snapshots")
            .flat_map(|c| c.snapshot_ids.clone())
            .collect();
        assert_eq!(expired, [1], "{:?}", p.candidates);
        assert!(
            !p.warnings.iter().any(|w| w.contains("does not exist")),
            "{:?}",
            p.warnings
        );
    }

    /// Times at the ends of `i64` (a crafted `timestamp-ms`, a ref's `max-snapshot-age-ms`, a listed modification
    /// time) plan without an overflow: a snapshot from `i64::MIN` is as old as can be, one from `i64::MAX` too new
    /// to expire.
    #[test]
    fn extreme_times_plan_without_overflow() {
        let now = 100 * DAY;
        let mut input = gone_snapshot_input();
        input.snapshots = vec![
            crate::govern::input::test_snapshot(0, None, i64::MIN, &["data/s0.parquet"], 10),
            crate::govern::input::test_snapshot(1, Some(0), i64::MAX, &["data/s1.parquet"], 10),
            crate::govern::input::test_snapshot(2, Some(1), now - DAY, &["data/live.parquet"], 10),
        ];
        input.refs.push(RefInfo {
            name: "b".into(),
            snapshot_id: 1,
            is_branch: true,
            max_ref_age_ms: None,
            max_snapshot_age_ms: Some(i64::MIN),
            min_snapshots_to_keep: Some(1),
        });
        input.refs[0].snapshot_id = 2;
        input.current_snapshot_id = Some(2);
        if let Some(l) = input.listing.as_mut() {
            for o in l.iter_mut() {
                o.last_modified_ms = i64::MIN + 1;
            }
        }
        let p = plan(&input);
        assert!(
            !p.candidates
                .iter()
                .any(|c| c.snapshot_ids.contains(&1) || c.snapshot_ids.contains(&2)),
            "{:?}",
            p.candidates
        );
        let plain = crate::govern::baseline::expired_snapshots(&input);
        assert!(!plain.contains(&2), "{plain:?}");
    }
}
