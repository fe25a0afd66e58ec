//! `plan` and `status`: the candidates of one fixed table generation minus the non-deletable closure.
//!
//! Everything here is computed from one fixed table generation plus the registry and the policy: [`plan`]
//! is report-only and changes nothing. [`gather`] reads what the pure planner ([`crate::govern::closure`])
//! needs; [`world_stamp`] is the compare-and-set key quarantine and purge check against. The floor of
//! `ops`: it imports no other command file.
//!
//! This module deletes nothing; deletion belongs to [`crate::ops::deleter`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{DateTime, Utc};
use iceberg::spec::SnapshotRetention;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::govern::closure::{
    self, Baseline, HoldScope as PlanHold, ListedObject, PlanInput, Protections, RefInfo, SnapshotInfo, TableDefaults,
};
use crate::govern::closure::{DeletionRight, DeletionScope};
use crate::govern::decision::{DecisionDoc, RightScope, deadline_ms, parse_scope};
use crate::govern::policy::Policy;
use crate::model::location;
use crate::ops::context::Context;
use crate::registry::{HoldScope, Registry, WorldStamp};
use crate::report::output::{self, Outcome, Verdict};
use crate::table::{Table, TableSource};

/// Prefix of the tags quarantine pins snapshots with.
pub const QUARANTINE_TAG_PREFIX: &str = "quarantine/";

/// Whether ref `name` is one of the quarantine tags under `prefix` (`quarantine/<candidate id>`): the prefix itself
/// or `<prefix>/…`. A user's ref that merely begins with the same characters is not (a purge would remove it).
#[must_use]
pub fn is_quarantine_tag(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The deletion rights of the table's latest applied decision, with paths relative to the table location.
///
/// # Errors
/// Registry errors; a stored decision that no longer parses.
pub async fn deletion_rights(table: &Table, reg: &Registry) -> Result<Vec<DeletionRight>> {
    let uuid = table.metadata().uuid().to_string();
    let Some(latest) = reg.decisions(&uuid).await?.pop() else {
        return Ok(Vec::new());
    };
    let doc: DecisionDoc = serde_json::from_value(latest.decision)
        .map_err(|e| Error::Internal(format!("stored decision v{} does not parse: {e}", latest.version)))?;
    let mut rights = Vec::new();
    for r in &doc.deletion_rights {
        let scope = match parse_scope(&r.scope)? {
            RightScope::Snapshot(id) => DeletionScope::Snapshot(id),
            // A path that cannot be related to the table (applied before `decision apply` refused such paths)
            // grants nothing: a deletion right errs on keeping.
            RightScope::Path(p) => match relative_prefix(table, &p) {
                Some(rel) => DeletionScope::Path(rel),
                None => continue,
            },
        };
        rights.push(DeletionRight {
            id: r.id.clone(),
            scope,
            written_scope: r.scope.clone(),
            deadline_ms: deadline_ms(r)?,
        });
    }
    Ok(rights)
}

/// The registry named in the configuration (`[registry] uri`, default `sqlite:lakedrill-registry.db`),
/// opened once per context and closed by [`Context::close`] (see [`Context::registry`]).
///
/// # Errors
/// Registry open errors.
pub async fn registry(ctx: &Context) -> Result<Registry> {
    ctx.registry().await
}

/// The name a policy's `table` binding is compared with.
#[must_use]
pub fn policy_name(table: &Table) -> String {
    if table.name().contains("://") {
        location::file_name(table.location().root_uri()).to_owned()
    } else {
        table.name().to_owned()
    }
}

/// Open writers of the table that began longer than `maxWriterDuration` ago, as warnings: their prefixes stay
/// protected (a writer never expires silently), and an operator should end them once the writer is gone.
///
/// # Errors
/// Registry errors.
pub async fn overlong_writers(
    reg: &Registry,
    table: &Table,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    let uuid = table.metadata().uuid().to_string();
    let max = policy.max_writer_duration();
    Ok(reg
        .writers(&uuid)
        .await?
        .into_iter()
        .filter(|w| w.open && now - w.started_at > max)
        .map(|w| {
            format!(
                "writer {} on prefix {} has been open since {} ({} h, longer than maxWriterDuration {} h): its prefix \
                 stays protected; end it (`lakedrill writer end {}`) once the writer is gone",
                w.writer_id,
                w.prefix,
                w.started_at.to_rfc3339(),
                (now - w.started_at).num_hours(),
                max.num_hours(),
                w.writer_id
            )
        })
        .collect())
}

/// Quarantined orphan candidates whose hold a bucket lifecycle rule ends soon — within 7 days — or before the
/// policy lets a purge take them (a `minQuarantinePeriod` bound since), as warnings: the held files go when the
/// rule acts, and no put-back can bring them then. The rule judged at quarantine is recorded (`hold_ends_at`); the
/// lifecycle rules of the buckets holding the files on S3 are also read again here (each bucket once), so that a
/// rule added or shortened since is seen, and a bucket whose rules cannot be read is named. Also one whose
/// quarantine died during its take-out (recorded with `taking_out`).
///
/// # Errors
/// Registry errors.
pub async fn ending_orphan_holds(
    storage: &crate::io::store::Storage,
    reg: &Registry,
    table: &Table,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Result<Vec<String>> {
    use crate::ops::orphans::HoldEndNow;
    let uuid = table.metadata().uuid().to_string();
    let soon = chrono::Duration::days(7);
    let secs = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut rules = BTreeMap::new();
    let mut unreadable: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut out = Vec::new();
    let heads = reg.candidate_heads(&uuid).await?;
    for h in heads.into_iter().filter(|h| {
        matches!(
            h.state,
            crate::registry::State::Quarantined | crate::registry::State::RestoreVerified
        )
    }) {
        if h.taking_out {
            out.push(format!(
                "orphan candidate {}: its quarantine did not finish taking the files out of the table (the run \
                 died in it, or whether a file left could not be told); which of them are held is not recorded, its \
                 purge is refused, and a late commit's file is put back by every plan: release it (`lakedrill \
                 quarantine release {} --reason …` puts every file back), then plan again",
                h.candidate_id, h.candidate_id
            ));
            continue;
        }
        // The soonest end: the recorded rule's, or one of the rules read now if it ends the hold sooner.
        let mut end = h
            .hold_ends
            .clone()
            .map(|(at, rule)| (at, format!("lifecycle rule {rule}")));
        if h.mode.as_deref() == Some("orphans") {
            let rec = reg.candidate(&h.candidate_id).await?;
            for now_read in crate::ops::orphans::hold_ends_now(storage, &mut rules, Some(table.location()), &rec).await
            {
                match now_read {
                    HoldEndNow::Ends { at, rule, bucket } => {
                        if end.as_ref().is_none_or(|(e, _)| at < *e) {
                            end = Some((
                                at,
                                format!(
                                    "lifecycle rule {rule} of bucket {bucket} (read now: not the rule judged at \
                                     quarantine, added or changed since)"
                                ),
                            ));
                        }
                    }
                    HoldEndNow::Unreadable { bucket, why } => {
                        unreadable
                            .entry(bucket)
                            .or_insert_with(|| (why, Vec::new()))
                            .1
                            .push(h.candidate_id.clone());
                    }
                }
            }
        }
        let Some((ends, rule)) = end else {
            continue;
        };
        let purge_from = h.quarantined_at.zip(policy.min_quarantine_period()).map(|(q, m)| q + m);
        if let Some(from) = purge_from.filter(|from| *from > ends) {
            out.push(format!(
                "orphan candidate {}: {rule} ends its hold at {}, before the policy's minQuarantinePeriod lets a \
                 purge take it ({}): the held files will be gone first; release it, or change the rule and \
                 quarantine the files again",
                h.candidate_id,
                secs(ends),
                secs(from)
            ));
        } else if ends - now <= soon {
            out.push(format!(
                "orphan candidate {}: {rule} ends its hold at {} ({}): purge or release it (`lakedrill quarantine \
                 release`) before then",
                h.candidate_id,
                secs(ends),
                if ends <= now {
                    "already passed: the held files may be gone".to_owned()
                } else {
                    format!("in {}", crate::clock::format_duration(ends - now))
                }
            ));
        }
    }
    for (bucket, (why, ids)) in unreadable {
        out.push(format!(
            "the lifecycle configuration of bucket {bucket} could not be read now ({why}; reading it needs \
             s3:GetLifecycleConfiguration): whether a rule added since their quarantine ends the hold of orphan \
             candidate(s) {} before a purge may take them is unknown",
            ids.join(", ")
        ));
    }
    Ok(out)
}

/// Loads a table and checks it against the policy's binding.
///
/// # Errors
/// Load errors; [`Error::Module`] (a policy error) when the policy is bound to another table.
pub async fn bound_table(ctx: &Context, source: &TableSource, policy: &Policy) -> Result<Table> {
    let table = ctx.table(source).await?;
    policy.check_table(&policy_name(&table), &table.metadata().uuid())?;
    check_bindings(&table, policy)?;
    Ok(table)
}

/// The policy's `formatVersion` and `catalog` against the table (#23 point 5): a policy written for a v2 table
/// does not govern it once it is v3, and one bound to a catalog governs the table only as that catalog serves it.
///
/// # Errors
/// [`Error::Invalid`] naming the policy file, the field and both values.
pub fn check_bindings(table: &Table, policy: &Policy) -> Result<()> {
    let field = |f: &str| format!("{}: field {f}", policy.source_name());
    if let Some(v) = policy.format_version() {
        let actual = match table.metadata().format_version() {
            iceberg::spec::FormatVersion::V1 => 1,
            iceberg::spec::FormatVersion::V2 => 2,
            iceberg::spec::FormatVersion::V3 => 3,
        };
        if actual != v {
            return Err(Error::invalid(
                field("formatVersion"),
                format!(
                    "the policy governs format {v}, but table {} is format {actual}",
                    table.name()
                ),
            ));
        }
    }
    if let Some(c) = policy.catalog() {
        let served_by = (!table.name().contains("://")).then(|| table.name().split('.').next().unwrap_or_default());
        if served_by != Some(c) {
            return Err(Error::invalid(
                field("catalog"),
                format!(
                    "the policy governs the table as catalog {c} serves it, but {} is addressed {}",
                    table.name(),
                    served_by.map_or_else(|| "by its metadata file".to_owned(), |s| format!("through catalog {s}"))
                ),
            ));
        }
    }
    Ok(())
}

/// BLAKE3 over the canonical sorted list of (ref name, type, snapshot id, retention) of all refs, plus the
/// policy's protected refs. Refs starting with `exclude_prefix` (a candidate's own quarantine tags) are left out.
#[must_use]
pub fn protected_ref_root(table: &Table, protected: &[String], exclude_prefix: Option<&str>) -> String {
    let mut lines = Vec::new();
    for (name, r) in table.refs() {
        if exclude_prefix.is_some_and(|p| is_quarantine_tag(name, p)) {
            continue;
        }
        let retention = serde_json::to_value(&r.retention).unwrap_or_default();
        lines.push(serde_json::json!(["ref", name, r.snapshot_id, retention]).to_string());
    }
    let mut p: Vec<&String> = protected.iter().collect();
    p.sort();
    for name in p {
        lines.push(serde_json::json!(["protected", name]).to_string());
    }
    lines.sort();
    blake3::hash(lines.join("\n").as_bytes()).to_hex().to_string()
}

/// A prefix read back from the registry (relative to the table location, or absolute under the table) as a path
/// relative to the table location; `None` when it cannot be related to the table (see
/// [`crate::model::location::TableLocation::relative_prefix`]: the caller errs on protecting).
#[must_use]
pub fn relative_prefix(table: &Table, p: &str) -> Option<String> {
    table.location().relative_prefix(p)
}

/// Every object under the table root `root`, as a path relative to it, sorted by path. Each entry is reduced to
/// what the planner reads as the store yields it: a 200k-file table is held once, not as the store's records,
/// then full URIs, then this. On the local filesystem a file's size and time are left unread
/// ([`ListedObject::TIME_NOT_READ`]) until [`read_needed_times`] reads those the plan asks for.
async fn list_table(
    storage: &crate::io::store::Storage,
    root: &str,
) -> Result<(Vec<ListedObject>, crate::ops::containment::ListedNames)> {
    let mut listing = storage
        .list_deferred(root, |rel, stat| {
            let (size, last_modified_ms) = stat.unwrap_or((0, ListedObject::TIME_NOT_READ));
            ListedObject {
                path: rel,
                size,
                last_modified_ms,
            }
        })
        .await?;
    // Paths under one root are distinct, so the in-place sort orders them as the stable one did. Sorted on a
    // blocking thread: `gather` polls the history walk on this task, and 200k paths sorted here (25 ms on a
    // Spark-written table) kept the walk from handing manifests to the decoders meanwhile.
    // The names the containment check asks about are found there too.
    tokio::task::spawn_blocking(move || {
        listing.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        let names = crate::ops::containment::ListedNames::of(&listing);
        (listing, names)
    })
    .await
    .map_err(|e| Error::Internal(format!("sorting the listing of {root}: {e}")))
}

/// Reads the size and time of every listed object whose stat the listing left unread and the plan asks for
/// ([`closure::listing_time_needed`]: not one the current snapshot references, nor a hidden file no snapshot
/// references); one gone since the listing is dropped from it, as a listing that stat'ed it would have.
///
/// # Errors
/// Storage errors naming the object.
async fn read_needed_times(storage: &crate::io::store::Storage, root: &str, input: &mut PlanInput) -> Result<()> {
    let unread: Vec<usize> = {
        use rayon::prelude::*;
        let needed = closure::listing_time_needed(input);
        input.listing.as_deref().map_or_else(Vec::new, |listing| {
            listing
                .par_iter()
                .enumerate()
                .with_min_len(4096)
                .filter(|(_, l)| l.last_modified_ms == ListedObject::TIME_NOT_READ && needed(&l.path))
                .map(|(i, _)| i)
                .collect()
        })
    };
    let Some(listing) = input.listing.as_mut() else {
        return Ok(());
    };
    if unread.is_empty() {
        return Ok(());
    }
    let rels = unread.iter().map(|i| listing[*i].path.clone()).collect();
    let stats = storage.stat_deferred(root, rels).await?;
    let mut gone = Vec::new();
    for (i, stat) in unread.into_iter().zip(stats) {
        match stat {
            Some((size, modified)) => (listing[i].size, listing[i].last_modified_ms) = (size, modified),
            None => gone.push(i),
        }
    }
    if !gone.is_empty() {
        let (mut at, mut next) = (0, gone.into_iter().peekable());
        listing.retain(|_| {
            let keep = next.next_if_eq(&at).is_none();
            at += 1;
            keep
        });
    }
    Ok(())
}

/// Where symlinks lead the listed files (README "Symlinks"): those whose path with symlinks resolved lies outside
/// the table root `root`, each with where it resolves to (the listing follows links, so a linked folder's files
/// are listed as the table's), and those that reach their file through a link staying inside the table, each with
/// its real path relative to the root (the listing shows that file twice: `alias/f` and `data/f` when `alias`
/// links to `data`). Neither is ever an orphan. Only links are resolved
/// ([`crate::io::store::Confined::outside`]): one `lstat` per folder of the listing and per file listed with its
/// stat (on the local filesystem, a link or a name the walk could not defer). Nothing to do off the local
/// filesystem.
///
/// # Errors
/// Storage errors naming the folder or file that could not be examined.
async fn symlinked(
    storage: &crate::io::store::Storage,
    root: &str,
    listing: &[ListedObject],
) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    if !root.starts_with("file://") {
        return Ok((BTreeMap::new(), BTreeMap::new()));
    }
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut last = "";
    for l in listing {
        if let Some((folder, _)) = l.path.rsplit_once('/')
            && folder != last
        {
            seen.insert(folder);
            last = folder;
        }
    }
    let folders = seen.into_iter().map(ToOwned::to_owned).collect();
    let files = listing
        .iter()
        .filter(|l| l.last_modified_ms != ListedObject::TIME_NOT_READ)
        .map(|l| l.path.clone())
        .collect();
    let outside = storage.confine(root).await?.outside(folders, files).await?;
    if outside == crate::io::store::Outside::default() {
        return Ok((BTreeMap::new(), BTreeMap::new()));
    }
    let mut leaving = BTreeMap::new();
    let mut linked = BTreeMap::new();
    for l in listing {
        if let Some(t) = outside.target(&l.path) {
            leaving.insert(l.path.clone(), t);
        } else if let Some(t) = outside.linked(&l.path) {
            linked.insert(l.path.clone(), t);
        }
    }
    Ok((leaving, linked))
}

/// The listed zero-byte objects under the table root `root` (not a local folder) that are folder markers: keys
/// ending with `/` (`t/data/`, or `t/` itself), which the S3 console and Hadoop S3A write and object_store lists
/// without the slash (its `Path` drops it), so the listed name is no object's (`t/data`). One `HEAD` per listed
/// zero-byte object (a table holds few or none): the root's own marker lists as the empty path, any other is one
/// the `HEAD` of its listed name does not find. Such a marker was an orphan candidate whose quarantine read
/// nothing at its name and refused the whole candidate, plan after plan.
///
/// # Errors
/// Storage errors of a `HEAD`, naming the object.
async fn folder_markers(
    storage: &crate::io::store::Storage,
    root: &str,
    listing: &[ListedObject],
) -> Result<BTreeSet<String>> {
    use futures::{StreamExt, TryStreamExt};
    if root.starts_with("file://") {
        return Ok(BTreeSet::new());
    }
    let concurrency = storage.options().io_concurrency.get();
    let found: Vec<Option<String>> =
        futures::stream::iter(listing.iter().filter(|l| l.size == 0).map(|l| async move {
            if l.path.is_empty() {
                return Ok(Some(l.path.clone()));
            }
            let gone = storage.head(&location::join(root, &l.path)).await?.is_none();
            Ok::<_, Error>(gone.then(|| l.path.clone()))
        }))
        .buffered(concurrency)
        .try_collect()
        .await?;
    Ok(found.into_iter().flatten().collect())
}

/// The files of the table's snapshot candidates that are not finished and whose snapshots may be out of the
/// table, each with its candidate's id: quarantined in bundle mode (its bundles are the way back, and they point
/// at these files) from `QUARANTINED` until its purge is `VERIFIED` or it is `RELEASED` (also while `PROTECTED`);
/// quarantined in tag mode once its `quarantine/<id>` tags are gone from the table (its purge's catalog commit
/// took the snapshots out, and the purge deletes the rest itself); or still `UNREFERENCED_ELIGIBLE` while claimed
/// by a quarantine that has not settled its outcome (its commit may have taken the snapshots out already, or it
/// failed or died there and kept its claim) or with a recorded quarantine mode (its commit landed and was
/// recorded, and the move on failed). An object
/// already `VERIFIED` (deleted) or `RELEASED` is left out. Such files are never orphans.
///
/// Memory: only those candidates' object states are read (streamed, not their inventories), and only the paths
/// listed now or held as orphans (`held`) are kept; a tag-mode candidate with its tags in place is not read.
///
/// # Errors
/// Registry errors.
pub async fn snapshot_candidate_files(
    reg: &Registry,
    heads: &[crate::registry::CandidateHead],
    table: &Table,
    listing: &[ListedObject],
    held: &[String],
) -> Result<BTreeMap<String, std::sync::Arc<str>>> {
    use crate::registry::State;
    let tagged = |id: &str| {
        let prefix = format!("{QUARANTINE_TAG_PREFIX}{id}");
        table.refs().keys().any(|n| is_quarantine_tag(n, &prefix))
    };
    let held: BTreeSet<&str> = held.iter().map(String::as_str).collect();
    let mut out = BTreeMap::new();
    for h in heads {
        let unfinished = match h.state {
            State::Verified | State::Released => false,
            // Claimed by a quarantine (between its catalog commit and its record, or one that failed or died
            // there and kept its claim), or with a recorded quarantine mode (its commit landed and was recorded,
            // and the move on failed): its snapshots may be out of the table.
            State::Discovered | State::UnreferencedEligible => {
                h.candidate_id.starts_with("c-") && (h.claimed || matches!(h.mode.as_deref(), Some("bundle" | "tag")))
            }
            _ => matches!(h.mode.as_deref(), Some("bundle" | "tag")),
        };
        if !unfinished || (h.mode.as_deref() == Some("tag") && tagged(&h.candidate_id)) {
            continue;
        }
        let id: std::sync::Arc<str> = h.candidate_id.as_str().into();
        reg.for_each_object_state(&h.candidate_id, |o| {
            if matches!(o.state, State::Verified | State::Released) {
                return;
            }
            let listed = listing.binary_search_by(|l| l.path.as_str().cmp(&o.path)).is_ok();
            if listed || held.contains(o.path.as_str()) {
                out.insert(o.path, id.clone());
            }
        })
        .await?;
    }
    Ok(out)
}

/// The files that the bundles of the table's unfinished bundle-mode snapshot candidates point at in place and that
/// the table's snapshots reference, that are listed now or that are held as orphans (`held`), each with that
/// candidate's id, and the bundles that could not be read (URI and why).
///
/// A bundle-mode quarantine takes its snapshots out of the table; its bundles are the way back to them and name
/// every data and delete file in place (the metadata layers are copies inside the bundle). A file such a snapshot
/// shared with one the table still keeps is not the candidate's to delete, but the bundle still needs it: when the
/// other snapshot expires later, the file must not go with it while the first candidate is unfinished (from its
/// quarantine until its purge is `VERIFIED` or it is `RELEASED`), neither in another snapshot candidate nor, once
/// nothing in the table references it any more, as an orphan. The bundles are read without a trust store: a
/// changed bundle can only keep more files here, and the drills and the deleter verify bundles for what they are.
///
/// Memory: only candidates in that state are read, and of their inventories only the paths the table references,
/// lists or holds are kept.
///
/// # Errors
/// Registry and storage errors other than a missing or unreadable bundle (listed instead).
async fn bundle_mode_files(
    storage: &crate::io::store::Storage,
    reg: &Registry,
    heads: &[crate::registry::CandidateHead],
    table: &Table,
    snapshots: &[SnapshotInfo],
    listing: &[ListedObject],
    held: &[String],
) -> Result<(BTreeMap<String, std::sync::Arc<str>>, Vec<String>)> {
    use crate::registry::State;
    let mut out = BTreeMap::new();
    let mut unreadable = Vec::new();
    let heads: Vec<_> = heads
        .iter()
        .filter(|h| {
            h.candidate_id.starts_with("c-")
                && h.mode.as_deref() == Some("bundle")
                && !matches!(
                    h.state,
                    State::Verified | State::Released | State::Discovered | State::UnreferencedEligible
                )
        })
        .collect();
    if heads.is_empty() {
        return Ok((out, unreadable));
    }
    let referenced = crate::model::object::path_set(
        &crate::model::object::distinct_objects(snapshots.iter().filter_map(|s| s.objects.as_ref())),
        0,
    );
    let held: BTreeSet<&str> = held.iter().map(String::as_str).collect();
    for h in heads {
        let rec = reg.candidate(&h.candidate_id).await?;
        let id: std::sync::Arc<str> = h.candidate_id.as_str().into();
        // Each bundle with the root the registry recorded when it was sealed: the envelope is read unsigned, and
        // only the inventory whose recomputed root is that one may say which files it names in place.
        let bundles: Vec<(String, Option<String>)> = rec
            .quarantine
            .as_ref()
            .and_then(|q| q["bundles"].as_array())
            .map(|b| {
                b.iter()
                    .filter_map(|b| {
                        let uri = b["uri"].as_str()?.to_owned();
                        Some((uri, b["bundle_root"].as_str().map(str::to_owned)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if bundles.is_empty() {
            unreadable.push(format!(
                "candidate {id} (quarantined in bundle mode, {}) records no bundle",
                h.state
            ));
        }
        for (uri, recorded_root) in bundles {
            match in_place_paths(storage, &uri, recorded_root.as_deref()).await {
                Ok(Ok(paths)) => {
                    for p in paths {
                        let Ok(rel) = table.location().relative(&p) else {
                            continue;
                        };
                        let listed = || listing.binary_search_by(|l| l.path.as_str().cmp(&rel)).is_ok();
                        if referenced.contains(rel.as_str()) || listed() || held.contains(rel.as_str()) {
                            out.entry(rel).or_insert_with(|| id.clone());
                        }
                    }
                }
                Ok(Err(why)) => unreadable.push(format!("{uri} (candidate {id}): {why}")),
                Err(e) => unreadable.push(format!("{uri} (candidate {id}): {e}")),
            }
        }
    }
    Ok((out, unreadable))
}

/// Resolves, from lakedrill's own records, what each snapshot reaches that an active protection names and that
/// is missing from the table generation (`closure::snapshots_of_missing_protections`), so that such a protection
/// does not switch orphan detection off for the whole table.
///
/// A snapshot is resolved from a bundle the registry recorded for it: a bundle-mode quarantine of one of the
/// table's snapshot candidates (the candidate that took it out of the table) records one bundle per snapshot, and
/// the bundle's inventory lists every object the snapshot reaches: its metadata file, manifest list, manifests,
/// data and delete files (deletion-vector Puffin files among them). The bundle counts only when it verifies under
/// `trust` (the seal role's signature over the predicate, the inventory's root and subject bound to it: the path
/// list is exactly what the sealer signed), names this table and this snapshot, and has the root the registry
/// recorded for it. The objects' bytes are not hashed again: which paths to keep depends on the signed list only,
/// and a missing or changed file is the drills' finding, not a reason to delete another. Each path is related to
/// the table location as the metadata's own paths are (`referenced_path`), so it matches the listing as the
/// closure's referenced paths do; of those only the paths listed now or held as orphans are kept
/// ([`Protections::missing_snapshot_files`]).
///
/// A snapshot that cannot be resolved — no trust store (`no_trust` says what would give one), no bundle-mode
/// candidate of the table that names it (another engine expired it), no recorded bundle of it, a bundle missing,
/// unreadable or not verifying, a path it names outside the table location — goes to
/// [`Protections::unresolved_missing`] with why: orphan detection stays off while one is listed.
///
/// [`gather`] resolves under the configured `[keys] trust`, so that every command judging orphans (`plan`,
/// `quarantine`, `purge`, the put-back) sees the same; `plan --trust DIR` resolves again under its own folder. What
/// an earlier call resolved is replaced.
///
/// # Errors
/// Registry errors.
pub async fn resolve_missing_protected(
    storage: &crate::io::store::Storage,
    reg: &Registry,
    table: &Table,
    input: &mut PlanInput,
    trust: Option<&Path>,
    no_trust: &str,
) -> Result<()> {
    use crate::registry::State;
    input.protections.resolved_missing.clear();
    input.protections.unresolved_missing.clear();
    input.protections.missing_snapshot_files.clear();
    let ids = closure::snapshots_of_missing_protections(input);
    if ids.is_empty() {
        return Ok(());
    }
    let Some(trust) = trust else {
        for id in ids {
            input.protections.unresolved_missing.insert(
                id,
                format!("no trust store to verify the bundle sealed for it under ({no_trust})"),
            );
        }
        return Ok(());
    };
    let trust = match crate::evidence::keys::TrustStore::load_dir(trust) {
        Ok(t) => t,
        Err(e) => {
            let why = format!(
                "the trust store {} does not load: {}",
                trust.display(),
                Error::from(e).with_causes()
            );
            for id in ids {
                input.protections.unresolved_missing.insert(id, why.clone());
            }
            return Ok(());
        }
    };
    let uuid = table.metadata().uuid().to_string();
    // Every bundle the table's bundle-mode snapshot candidates recorded, by snapshot: (bundle URI, recorded root,
    // candidate id).
    let mut bundles: BTreeMap<i64, Vec<(String, Option<String>, String)>> = BTreeMap::new();
    for h in reg.candidate_heads(&uuid).await? {
        if !h.candidate_id.starts_with("c-")
            || h.mode.as_deref() != Some("bundle")
            || matches!(h.state, State::Discovered | State::UnreferencedEligible)
        {
            continue;
        }
        let rec = reg.candidate(&h.candidate_id).await?;
        let recorded = rec
            .quarantine
            .as_ref()
            .and_then(|q| q["bundles"].as_array().cloned())
            .unwrap_or_default();
        for b in recorded {
            let (Some(id), Some(uri)) = (b["snapshot_id"].as_i64(), b["uri"].as_str()) else {
                continue;
            };
            if ids.contains(&id) {
                bundles.entry(id).or_default().push((
                    uri.to_owned(),
                    b["bundle_root"].as_str().map(str::to_owned),
                    h.candidate_id.clone(),
                ));
            }
        }
    }
    let listing = input.listing.as_deref().unwrap_or_default();
    let held: BTreeSet<&str> = input.protections.held_orphans.iter().map(String::as_str).collect();
    let mut files: BTreeMap<String, i64> = BTreeMap::new();
    for id in ids {
        let Some(found) = bundles.get(&id) else {
            input.protections.unresolved_missing.insert(
                id,
                "no bundle-mode quarantine in lakedrill's registry took it out of the table (another engine \
                 expired it?), so no bundle of lakedrill's records what it reaches"
                    .to_owned(),
            );
            continue;
        };
        let mut failures = Vec::new();
        let mut resolved = None;
        for (uri, root, candidate) in found {
            match bundle_paths(storage, table, &uuid, id, uri, root.as_deref(), &trust).await {
                Ok(paths) => {
                    resolved = Some((format!("bundle {uri} of candidate {candidate}, verified"), paths));
                    break;
                }
                Err(why) => failures.push(format!("bundle {uri} of candidate {candidate}: {why}")),
            }
        }
        match resolved {
            Some((from, paths)) => {
                for rel in paths {
                    let listed = listing.binary_search_by(|l| l.path.as_str().cmp(&rel)).is_ok();
                    if listed || held.contains(rel.as_str()) {
                        files.entry(rel).or_insert(id);
                    }
                }
                input.protections.resolved_missing.insert(id, from);
            }
            None => {
                input.protections.unresolved_missing.insert(id, failures.join("; "));
            }
        }
    }
    input.protections.missing_snapshot_files = files;
    Ok(())
}

/// The paths (relative to the table location) of every object the bundle at `uri` lists, once it verifies under
/// `trust` as the bundle of snapshot `snapshot_id` of table `uuid` with the root the registry recorded (`root`).
/// `Err(why)`: it does not (missing, unreadable, not verifying, another snapshot's, a path outside the table).
async fn bundle_paths(
    storage: &crate::io::store::Storage,
    table: &Table,
    uuid: &str,
    snapshot_id: i64,
    uri: &str,
    root: Option<&str>,
    trust: &crate::evidence::keys::TrustStore,
) -> std::result::Result<Vec<String>, String> {
    let dir = crate::bundle::bundle_dir(uri).map_err(|e| e.with_causes())?;
    let pred = crate::bundle::verified_bundle_predicate(storage, &dir, trust)
        .await
        .map_err(|e| format!("does not verify under the trust store: {}", e.with_causes()))?;
    if pred.snapshot_id != snapshot_id || pred.table_uuid != uuid {
        return Err(format!(
            "it is the bundle of snapshot {} of table {}, not of snapshot {snapshot_id} of table {uuid}",
            pred.snapshot_id, pred.table_uuid
        ));
    }
    if let Some(root) = root
        && root != pred.bundle_root
    {
        return Err(format!(
            "its root is {}, the registry recorded {root}",
            pred.bundle_root
        ));
    }
    pred.inventory
        .iter()
        .map(|e| {
            referenced_path(table, &e.path).map_err(|_| {
                format!(
                    "it names {} ({:?}) outside the table location {}, so the listing cannot be matched to it",
                    e.path,
                    e.layer,
                    table.location().written()
                )
            })
        })
        .collect()
}

/// The paths (as written) of a bundle's objects that it names in place, not as copies inside it: its data and
/// delete files. Read without a trust store, so bound to what the registry recorded when the bundle was sealed:
/// its inventory's recomputed root must be `recorded_root` (the root covers each entry's layer and path; an
/// inventory edited to drop entries, or a layer changed, has another root). Which entries are in place is told by
/// their layer (covered by the root), not by their `copy` field (which it does not cover). `Ok(Err(why))`: the
/// bundle does not hold together or is not the one recorded — the caller keeps the candidate's files unknown.
async fn in_place_paths(
    storage: &crate::io::store::Storage,
    bundle_uri: &str,
    recorded_root: Option<&str>,
) -> Result<std::result::Result<Vec<String>, String>> {
    let Some(recorded_root) = recorded_root else {
        return Ok(Err("the registry records no bundle root for it".into()));
    };
    let dir = crate::bundle::bundle_dir(bundle_uri)?;
    // Only the path of each object named in place is kept.
    let keep: crate::evidence::inventory::Keep = Box::new(|e| {
        if e.layer.is_metadata() {
            return false;
        }
        e.uri = String::new();
        e.blake3 = String::new();
        e.e_tag = None;
        e.version = None;
        true
    });
    let pred = match crate::bundle::unverified_predicate_keeping(storage, &dir, Some(keep)).await? {
        Ok((pred, digests)) if digests.root == recorded_root => pred,
        Ok((_, digests)) => {
            return Ok(Err(format!(
                "its inventory's root is {}, the registry recorded {recorded_root} when it was sealed",
                digests.root
            )));
        }
        Err(why) => return Ok(Err(why)),
    };
    Ok(Ok(pred.inventory.into_iter().map(|e| e.path).collect()))
}

/// The path of the metadata file the table was read from, relative to the table root (`None` outside it).
/// A path the metadata names outside any snapshot's layers (a metadata-log entry, a statistics file), relative to
/// the table root: through the written location, as every path; or, for an absolute URI under the root, by where it
/// is (lakedrill's own catalog commits name the previous metadata file by its full URI, also for a table whose
/// location is relative). Anything else is refused as a snapshot layer outside the table is (`PATH_OUTSIDE_TABLE`,
/// exit 2): skipped, or kept as written, a file spelled another way (`hdfs://nn/…` under the location
/// `hdfs://nn:8020/…`) is listed, referenced by nothing, and proposed as an orphan while the metadata names it.
///
/// # Errors
/// [`Error::PathOutsideTable`] naming the path and the location.
fn referenced_path(table: &Table, written: &str) -> Result<String> {
    let outside = match table.location().relative(written) {
        Ok(r) => return Ok(r),
        Err(e) => e,
    };
    let root = table.location().root_uri().trim_end_matches('/');
    let absolute = written.contains("://") || written.starts_with("file:") || written.starts_with('/');
    if absolute
        && let Ok(uri) = crate::model::location::canonical_uri(written)
        && crate::model::location::is_under(&uri, root)
    {
        return Ok(uri[root.len() + 1..].to_owned());
    }
    Err(outside)
}

fn own_metadata_path(table: &Table) -> Option<String> {
    if let Ok(r) = table.location().relative(&table.generation().metadata_location) {
        Some(r)
    } else {
        table
            .metadata_uri()
            .strip_prefix(table.location().root_uri())
            .map(|r| r.trim_start_matches('/').to_owned())
    }
}

/// Refuses to plan on a metadata file the user named (`--metadata …/00041-….metadata.json`) when the listed
/// metadata files hold a later generation of the same table (`table::head::later_generations`): the later
/// commits' files are in no metadata the older file knows, and would be proposed as orphans. A table read
/// through a catalog or a Hadoop folder is read at its current generation: not checked (a commit landing
/// after the read is covered by `orphanSafetyInterval`, as for any writer).
///
/// # Errors
/// [`Error::Invalid`] ("cannot decide") naming the file read and each later one; storage errors.
async fn refuse_later_generation(ctx: &Context, table: &Table, listed: impl Iterator<Item = &str>) -> Result<()> {
    let Some(path) = table.is_given_file().then(|| own_metadata_path(table)).flatten() else {
        return Ok(());
    };
    let read = crate::table::head::ReadFile {
        metadata: table.metadata(),
        path: &path,
        location: table.location(),
    };
    let later = crate::table::head::later_generations(&ctx.storage, table.location().root_uri(), &read, listed).await?;
    if later.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = later
        .iter()
        .map(|l| format!("{} ({})", l.metadata_uri, l.why))
        .collect();
    Err(Error::invalid(
        table.metadata_uri(),
        format!(
            "cannot decide: a later generation of table {} lies beside this metadata file: {}; planned on this \
             older file, the later commits' metadata, manifest lists and data files would be proposed as orphans. \
             Plan on the newest metadata file or through the catalog (a later file whose commit failed is removed \
             by hand once known to be debris)",
            table.metadata().uuid(),
            list.join("; ")
        ),
    ))
}

/// The table's retention defaults from its `history.expire.*` properties (pure), Iceberg's defaults where a
/// property is absent.
///
/// # Errors
/// [`Error::Invalid`] naming the property, its value and the metadata file `uri` when a property does not parse as
/// the integer Iceberg reads it as (a long, an int for `min-snapshots-to-keep`): Iceberg Java refuses it too, and
/// a default in its place would expire what the table's owner meant to keep.
pub fn table_defaults(uri: &str, props: &std::collections::HashMap<String, String>) -> Result<TableDefaults> {
    fn parsed<T: std::str::FromStr>(
        uri: &str,
        props: &std::collections::HashMap<String, String>,
        key: &str,
        kind: &str,
    ) -> Result<Option<T>> {
        props
            .get(key)
            .map(|v| {
                v.parse::<T>().map_err(|_| {
                    Error::invalid(
                        format!("{uri}: table property {key}"),
                        format!("value {v:?} is not {kind}, so the table's retention is unknown"),
                    )
                })
            })
            .transpose()
    }
    let fallback = TableDefaults::default();
    Ok(TableDefaults {
        max_snapshot_age_ms: parsed(uri, props, "history.expire.max-snapshot-age-ms", "a 64-bit integer")?
            .unwrap_or(fallback.max_snapshot_age_ms),
        min_snapshots_to_keep: parsed(uri, props, "history.expire.min-snapshots-to-keep", "a 32-bit integer")?
            .unwrap_or(fallback.min_snapshots_to_keep),
        max_ref_age_ms: parsed(uri, props, "history.expire.max-ref-age-ms", "a 64-bit integer")?,
    })
}

/// Reads every snapshot's layers and the registry's protections into a [`PlanInput`].
///
/// # Errors
/// Storage and registry errors; [`Error::Invalid`] for a `history.expire.*` table property that does not parse
/// ([`table_defaults`]); unreadable layers of a snapshot are not errors (they are `None`).
pub async fn gather(
    ctx: &Context,
    table: &Table,
    policy: &Policy,
    reg: &Registry,
    now: DateTime<Utc>,
    exclude_tags_of: Option<&str>,
) -> Result<PlanInput> {
    let uuid = table.metadata().uuid().to_string();
    let concurrency = ctx.storage.options().io_concurrency.get();
    // Every manifest list and every distinct manifest read once; each manifest's objects shared by every
    // snapshot that lists it (see `SnapshotObjects`). The table folder is listed meanwhile: on a local disk the
    // listing is a stat per file on a blocking thread, which the walk's fetches and decodes need not wait for.
    // Whether the location holds lakedrill's own state or another table (a widened `location` would list them
    // as orphans) is checked as soon as it is listed, also while the walk goes on.
    let root = table.location().root_uri().to_owned();
    let listed = async {
        let (listing, names) = list_table(&ctx.storage, &root).await?;
        crate::ops::containment::check(&ctx.config, &ctx.storage, table, &listing, &names, policy.source_name())
            .await?;
        refuse_later_generation(ctx, table, names.metadata_paths(&listing)).await?;
        Ok::<_, Error>(listing)
    };
    let (walked, listing) = tokio::join!(
        crate::table::scan::history_explained(table, &ctx.storage, concurrency),
        listed
    );
    let walked = walked?;
    let mut unreadable = BTreeMap::new();
    let snapshots: Vec<SnapshotInfo> = table
        .snapshots_sorted()
        .into_iter()
        .zip(walked)
        .map(|(s, (_, objects))| SnapshotInfo {
            snapshot_id: s.snapshot_id(),
            parent_id: s.parent_snapshot_id(),
            timestamp_ms: s.timestamp_ms(),
            objects: match objects {
                Ok(o) => Some(o),
                Err(why) => {
                    unreadable.insert(s.snapshot_id(), why);
                    None
                }
            },
        })
        .collect();
    let refs = table
        .refs()
        .iter()
        .filter(|(name, _)| !exclude_tags_of.is_some_and(|p| is_quarantine_tag(name, p)))
        .map(|(name, r)| match &r.retention {
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                max_ref_age_ms,
            } => RefInfo {
                name: name.clone(),
                snapshot_id: r.snapshot_id,
                is_branch: true,
                max_ref_age_ms: *max_ref_age_ms,
                max_snapshot_age_ms: *max_snapshot_age_ms,
                min_snapshots_to_keep: *min_snapshots_to_keep,
            },
            SnapshotRetention::Tag { max_ref_age_ms } => RefInfo {
                name: name.clone(),
                snapshot_id: r.snapshot_id,
                is_branch: false,
                max_ref_age_ms: *max_ref_age_ms,
                max_snapshot_age_ms: None,
                min_snapshots_to_keep: None,
            },
        })
        .collect();
    let defaults = table_defaults(table.metadata_uri(), table.metadata().properties())?;
    let mut live_metadata_files: BTreeSet<String> = own_metadata_path(table).into_iter().collect();
    for m in table.metadata().metadata_log() {
        live_metadata_files.insert(referenced_path(table, &m.metadata_file)?);
    }
    let listing = listing?;
    let mut protections = Protections {
        protected_refs: policy.protected_refs().to_vec(),
        ..Protections::default()
    };
    (protections.held_orphans, protections.orphan_epoch) = crate::ops::orphans::held_paths(reg, &uuid).await?;
    // `legalHoldGeneration` is a floor: a registry that has seen fewer hold changes than the policy records (a
    // fresh, restored or wrong registry) cannot be trusted to know every hold.
    let holds_seen = reg.hold_generation(&uuid).await?;
    if u64::try_from(holds_seen).unwrap_or(0) < policy.legal_hold_generation() {
        return Err(Error::invalid(
            format!("{}: field legalHoldGeneration", policy.source_name()),
            format!(
                "the policy requires hold generation {} or later, but the registry's hold generation of table {} is \
                 {holds_seen}: it may not know every legal hold (the wrong or a restored registry?)",
                policy.legal_hold_generation(),
                table.name()
            ),
        ));
    }
    for l in reg.leases(&uuid, now).await?.into_iter().filter(|l| l.active) {
        protections.leases.push((l.snapshot_id, l.lease_id));
    }
    for c in reg.checkpoints(&uuid).await? {
        protections.checkpoints.push((c.snapshot_id, c.checkpoint_id));
    }
    for p in policy.dr_points() {
        protections
            .checkpoints
            .push((p.snapshot_id(), "policy-dr-point".into()));
    }
    for h in reg.holds(&uuid).await?.into_iter().filter(|h| h.active) {
        let scope = match &h.scope {
            HoldScope::Table => PlanHold::Table,
            HoldScope::Snapshot(id) => PlanHold::Snapshot(*id),
            // A stored prefix that cannot be related to the table (set before `hold set` refused such prefixes)
            // errs on protecting: it holds the whole table.
            HoldScope::Prefix(p) => relative_prefix(table, p).map_or(PlanHold::Table, PlanHold::Prefix),
        };
        protections.holds.push((h.hold_id, scope));
    }
    for w in reg.writers(&uuid).await?.into_iter().filter(|w| w.open) {
        // A stored prefix that cannot be related to the table errs on protecting: the empty prefix, which
        // `closure::under` reads as covering every path of the table.
        protections
            .writers
            .push((w.writer_id, relative_prefix(table, &w.prefix).unwrap_or_default()));
    }
    protections.deletion_rights = deletion_rights(table, reg).await?;
    // The table's candidates, read once for both questions below (without their inventories).
    let heads = reg.candidate_heads(&uuid).await?;
    (protections.bundle_files, protections.unreadable_bundles) = bundle_mode_files(
        &ctx.storage,
        reg,
        &heads,
        table,
        &snapshots,
        &listing,
        &protections.held_orphans,
    )
    .await?;
    // The candidate judged here (the one whose quarantine tags are left out) is not kept from its own purge by its
    // own bundles: they name its files in place because they are its files. Before 2026-12-07 they were kept, so the
    // independent closure check refused every bundle-mode candidate ("named in place by the bundles of candidate
    // <itself>") and no bundle-mode quarantine could ever be purged.
    if let Some(own) = exclude_tags_of.and_then(|p| p.strip_prefix(QUARANTINE_TAG_PREFIX)) {
        protections.bundle_files.retain(|_, id| &**id != own);
    }
    // What keeps an unreferenced file from being an orphan beyond the table's metadata: asked only while orphans
    // are judged at all (every layer read, no hold over the whole table).
    let table_hold = protections.holds.iter().any(|(_, s)| matches!(s, PlanHold::Table));
    // Where links lead is asked in every plan: a path reached through a link inside the table, and the real path
    // of a referenced one, stay out of snapshot candidates too.
    (protections.outside_root, protections.linked) = symlinked(&ctx.storage, &root, &listing).await?;
    protections.folder_markers = folder_markers(&ctx.storage, &root, &listing).await?;
    if unreadable.is_empty() && !table_hold {
        protections.snapshot_candidate_files =
            snapshot_candidate_files(reg, &heads, table, &listing, &protections.held_orphans).await?;
    }
    // Every statistics file as written (the iceberg crate keeps one of each kind per snapshot), each mapped into
    // the table or refused like a metadata-log path: kept as written, it never matched the listing, and the file
    // was proposed as an orphan while the metadata named it.
    let mut statistics_files: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (id, path) in table.statistics().paths() {
        statistics_files
            .entry(id)
            .or_default()
            .push(referenced_path(table, path)?);
    }
    let min_snapshot_age_ms = policy.min_snapshot_age().num_milliseconds();
    let orphan_safety_interval_ms = policy.orphan_safety_interval().num_milliseconds();
    let mut input = PlanInput {
        table_uuid: uuid,
        generation_blake3: table.generation().metadata_blake3.clone(),
        snapshots,
        refs,
        current_snapshot_id: table.metadata().current_snapshot_id(),
        defaults,
        live_metadata_files,
        unreadable,
        listing: Some(listing),
        protections,
        min_snapshot_age_ms,
        orphan_safety_interval_ms,
        now_ms: now.timestamp_millis(),
        baseline: Baseline::relative(now.timestamp_millis(), min_snapshot_age_ms, orphan_safety_interval_ms),
        statistics_files,
    };
    // The real path of a file the table references through a link is live under that other name.
    if !input.protections.linked.is_empty() {
        let referenced = crate::govern::baseline::referenced_paths(&input);
        let targets: BTreeMap<String, String> = input
            .protections
            .linked
            .iter()
            .filter(|(alias, _)| referenced.contains(alias.as_str()) || input.live_metadata_files.contains(*alias))
            .map(|(alias, target)| (target.clone(), alias.clone()))
            .collect();
        input.protections.link_targets = targets;
    }
    // What a protected snapshot that left the table reaches, from its verified bundle (else orphan detection is off).
    resolve_missing_protected(
        &ctx.storage,
        reg,
        table,
        &mut input,
        ctx.config.keys.trust.as_deref(),
        "set `[keys] trust` in the configuration, or give `plan --trust DIR`",
    )
    .await?;
    read_needed_times(&ctx.storage, &root, &mut input).await?;
    Ok(input)
}

/// Refuses a plan in which a retained snapshot's layers could not be read: what it reaches is unknown, so
/// lakedrill cannot decide what is unreachable (`seal` refuses an unreadable snapshot the same way).
///
/// # Errors
/// [`Error::Corrupt`] naming the table's metadata, each such snapshot and the object that could not be read.
pub fn refuse_unreadable_retained(table: &Table, input: &PlanInput, plan: &closure::Plan) -> Result<()> {
    let unreadable = closure::unreadable_retained(input, plan);
    if unreadable.is_empty() {
        return Ok(());
    }
    Err(Error::corrupt(
        table.metadata_uri(),
        format!(
            "cannot decide: the layers of {} retained snapshot(s) could not be read, so nothing can be shown unreachable: {}",
            unreadable.len(),
            unreadable.join("; ")
        ),
    ))
}

/// The world stamp of a table generation (what the deleter's compare-and-set checks).
///
/// # Errors
/// Registry errors.
pub async fn world_stamp(
    table: &Table,
    policy: &Policy,
    reg: &Registry,
    exclude_tags: Option<&str>,
) -> Result<WorldStamp> {
    let uuid = table.metadata().uuid().to_string();
    Ok(WorldStamp {
        metadata_location: table.generation().metadata_location.clone(),
        metadata_blake3: table.generation().metadata_blake3.clone(),
        protected_ref_root: protected_ref_root(table, policy.protected_refs(), exclude_tags),
        lease_watermark: reg.lease_watermark(&uuid).await?.counter,
        hold_generation: reg.hold_generation(&uuid).await?,
        protection_generation: reg.protection_generation(&uuid).await?,
        deletion_rights: reg.rights_in_force(&uuid).await?.digest,
    })
}

/// The plain maintenance job of `plan` and `rollout report`, as given on the command line; unset fields come
/// from `[baseline."<table>"]` in the configuration, then from the policy.
#[derive(Debug, Clone, Default)]
pub struct BaselineOptions {
    /// `expire_snapshots(older_than)`: a duration before now or an RFC 3339 time.
    pub older_than: Option<String>,
    /// `expire_snapshots(retain_last)`.
    pub retain_last: Option<i64>,
    /// `remove_orphan_files(older_than)`: a duration before now or an RFC 3339 time.
    pub orphans_older_than: Option<String>,
}

/// A point in time given as a duration before `now` (`7d`) or as an RFC 3339 time, in epoch ms.
fn before_now(field: &str, v: &str, now: DateTime<Utc>) -> Result<i64> {
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.timestamp_millis());
    }
    let d = crate::clock::parse_duration(v).map_err(|why| {
        Error::invalid(
            field.to_owned(),
            format!("neither a duration before now nor an RFC 3339 time: {why}"),
        )
    })?;
    Ok((now - d).timestamp_millis())
}

/// The baseline of `table`: the options, else the configuration's `[baseline."<name>"]` (the catalog
/// identifier, the folder name of a table addressed by `--metadata`, or the UUID), else
/// the policy (`older_than = now - minSnapshotAge`, the table's `retainLast`, `orphans_older_than = now -
/// orphanSafetyInterval`).
///
/// # Errors
/// A malformed time or duration, or `retain_last` below 1, naming the option or setting.
pub fn baseline(ctx: &Context, table: &Table, input: &PlanInput, opts: &BaselineOptions) -> Result<Baseline> {
    let now = DateTime::from_timestamp_millis(input.now_ms).unwrap_or_default();
    let uuid = table.metadata().uuid().to_string();
    let (cfg, key) = [table.name().to_owned(), policy_name(table), uuid]
        .into_iter()
        .find_map(|k| ctx.config.baseline.get(&k).map(|c| (c.clone(), k)))
        .unwrap_or_default();
    let pick = |flag: &str, cli: &Option<String>, setting: &str, file: &Option<String>| {
        cli.as_ref().map(|v| (flag.to_owned(), v.clone())).or_else(|| {
            file.as_ref()
                .map(|v| (format!("baseline.\"{key}\".{setting}"), v.clone()))
        })
    };
    let mut b = input.baseline;
    if let Some((field, v)) = pick("--baseline-older-than", &opts.older_than, "older_than", &cfg.older_than) {
        b.older_than_ms = before_now(&field, &v, now)?;
    }
    if let Some((field, v)) = pick(
        "--baseline-orphans-older-than",
        &opts.orphans_older_than,
        "orphans_older_than",
        &cfg.orphans_older_than,
    ) {
        b.orphans_older_than_ms = before_now(&field, &v, now)?;
    }
    let retain = opts
        .retain_last
        .map(|n| ("--baseline-retain-last".to_owned(), n))
        .or_else(|| cfg.retain_last.map(|n| (format!("baseline.\"{key}\".retain_last"), n)));
    if let Some((field, n)) = retain {
        let n = i32::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
            Error::invalid(
                field,
                format!("must be a whole number of snapshots, at least 1, got {n}"),
            )
        })?;
        b.retain_last = Some(n);
    }
    Ok(b)
}

/// When a baseline time is given as an RFC 3339 string (for the documents).
fn rfc3339(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[derive(Serialize)]
struct PlanDoc {
    /// Findings: quarantined orphans put back because the table references them again (or a writer or a hold
    /// covers them now).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    orphans_put_back: Vec<String>,
    /// Standing findings, not of this plan: held orphans an earlier put-back could not put back because other
    /// bytes sit at their paths, unchanged since (not tried again; their copies are kept).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    orphans_put_back_standing: Vec<String>,
    table: String,
    table_uuid: String,
    table_generation: crate::table::TableGeneration,
    protected_ref_root: String,
    lease_watermark: i64,
    hold_generation: i64,
    protection_generation: i64,
    policy_digest: String,
    baseline: BaselineDoc,
    #[serde(flatten)]
    plan: closure::Plan,
}

/// The baseline as a document records it.
#[derive(Serialize)]
pub struct BaselineDoc {
    /// `expire_snapshots(older_than)`, RFC 3339.
    pub older_than: String,
    /// `expire_snapshots(retain_last)`; `None`: the table's own.
    pub retain_last: Option<i32>,
    /// `remove_orphan_files(older_than)`, RFC 3339.
    pub orphans_older_than: String,
}

impl From<&Baseline> for BaselineDoc {
    fn from(b: &Baseline) -> Self {
        Self {
            older_than: rfc3339(b.older_than_ms),
            retain_last: b.retain_last,
            orphans_older_than: rfc3339(b.orphans_older_than_ms),
        }
    }
}

/// How `plan` prints an entry of `kept_unreferenced` (then the path, ` — ` and the reasons).
const KEPT_LINE: &str = "  unreferenced, never an orphan: ";

/// `lakedrill plan --policy FILE`: report-only.
///
/// # Errors
/// Load, policy, registry and storage errors.
pub async fn plan(ctx: &Context, source: &TableSource, policy_path: &Path, opts: &BaselineOptions) -> Result<Outcome> {
    let trust = ctx.config.keys.trust.clone();
    plan_output(ctx, source, policy_path, opts, trust.as_deref(), true)
        .await?
        .materialize()
}

/// [`plan`] as the binary prints it: the kept hidden files (`kept_unreferenced`, 100k on a Spark-written table)
/// deferred to the writer ([`Outcome::deferred`]), and the text rendered only when `text` (the binary prints
/// either the text or the JSON document). `trust` (`--trust`, `[keys] trust`) verifies the bundles that resolve
/// what a protected snapshot missing from the table reaches ([`resolve_missing_protected`]); without it such a
/// protection switches orphan detection off, as the plan's warning says.
///
/// # Errors
/// [`plan`]'s; a trust folder that does not load.
pub async fn plan_output(
    ctx: &Context,
    source: &TableSource,
    policy_path: &Path,
    opts: &BaselineOptions,
    trust: Option<&Path>,
    text: bool,
) -> Result<Outcome> {
    // A trust folder named (by `--trust` or `[keys] trust`) must be one: it would otherwise be read only when a
    // protected snapshot has left the table, and a typo would pass unnoticed until that day.
    if let Some(t) = trust
        && !t.is_dir()
    {
        return Err(Error::invalid(
            "--trust",
            format!("{}: not a folder (give the folder of trusted *.pub keys)", t.display()),
        ));
    }
    let policy = match crate::govern::policy::load(policy_path) {
        Ok(p) => p,
        // A policy whose `table` binding does not parse (a bare name, most often): `plan` has the table, so it
        // says which UUID to bind.
        Err(e) => {
            if let crate::govern::policy::PolicyError::Field {
                source_name,
                field,
                rule,
            } = &e
                && field == "table"
                && let Ok(table) = ctx.table(source).await
            {
                let uuid = table.metadata().uuid().to_string();
                return Err(Error::invalid(
                    source_name.clone(),
                    format!(
                        "field table: {rule}; the table this plan is for has UUID {uuid}: bind it as `table: NAME/{}...`",
                        &uuid[..8]
                    ),
                ));
            }
            return Err(e.into());
        }
    };
    let table = bound_table(ctx, source, &policy).await?;
    let reg = registry(ctx).await?;
    let now = ctx.now();
    // The stamp before the leases and holds the plan judges (as in `quarantine` and `purge`).
    let stamp = world_stamp(&table, &policy, &reg, None).await?;
    let mut input = gather(ctx, &table, &policy, &reg, now, None).await?;
    // `gather` resolved under the configured trust; a `--trust` of its own is resolved under again.
    if trust != ctx.config.keys.trust.as_deref() {
        resolve_missing_protected(
            &ctx.storage,
            &reg,
            &table,
            &mut input,
            trust,
            "give `plan --trust DIR` or set `[keys] trust` in the configuration",
        )
        .await?;
    }
    input.baseline = baseline(ctx, &table, &input, opts)?;
    let mut p = ctx.hooks.planned(&input, closure::plan(&input));
    refuse_unreadable_retained(&table, &input, &p)?;
    p.warnings.extend(overlong_writers(&reg, &table, &policy, now).await?);
    // An accepted summary excess weakens the truncated-list check: every plan says so.
    p.warnings.extend(table.accepted_excess().iter().map(|a| {
        format!(
            "{}: snapshot {} (committed {}) and its descendants may carry {} exactly {} above what their manifests \
             hold ({}); a manifest list that lost manifests is still refused",
            a.setting,
            a.snapshot_id,
            DateTime::from_timestamp_millis(a.since_ms).map_or_else(
                || a.since_ms.to_string(),
                |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ),
            a.total,
            a.excess,
            a.reason
        )
    }));
    p.warnings
        .extend(ending_orphan_holds(&ctx.storage, &reg, &table, &policy, now).await?);
    // A quarantined orphan that the table references again (or a writer or hold now covers) goes back now.
    let put_back = crate::ops::orphans::put_back_protected(ctx, &reg, &input, &stamp, now, None).await?;
    let b = BaselineDoc::from(&input.baseline);
    // Everything below reads only the plan: the walked history and the listing are freed meanwhile, on another
    // thread (on a 1,000-snapshot Spark table they were a third of the peak, and freeing them took 10 ms).
    rayon::spawn(move || drop(input));
    let mut doc = PlanDoc {
        orphans_put_back: put_back.findings,
        orphans_put_back_standing: put_back.standing,
        table: table.name().to_owned(),
        table_uuid: table.metadata().uuid().to_string(),
        table_generation: table.generation().clone(),
        protected_ref_root: stamp.protected_ref_root,
        lease_watermark: stamp.lease_watermark,
        hold_generation: stamp.hold_generation,
        protection_generation: stamp.protection_generation,
        policy_digest: policy.digest().to_owned(),
        baseline: b,
        plan: p,
    };
    // The JSON document and the text at once; the hidden files' entries (a line per data file on a Spark table,
    // 100k) are rendered where the document is written.
    let kept = std::mem::take(&mut doc.plan.kept_unreferenced);
    let (json, human) = rayon::join(
        || serde_json::to_value(&doc),
        || if text { plan_text(&doc, &kept) } else { String::new() },
    );
    Ok(Outcome {
        verdict: if doc.orphans_put_back.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Findings
        },
        json: {
            let mut json = json.map_err(|e| Error::Internal(format!("serializing output: {e}")))?;
            if let Some(m) = json.as_object_mut() {
                m.remove("kept_unreferenced");
            }
            json
        },
        human,
        deferred: vec![("kept_unreferenced".to_owned(), std::sync::Arc::new(kept))],
    })
}

/// `plan`'s text; `kept` is the plan's `kept_unreferenced`.
fn plan_text(doc: &PlanDoc, kept: &[closure::KeptUnreferenced]) -> String {
    let (p, b, put_back, standing) = (
        &doc.plan,
        &doc.baseline,
        &doc.orphans_put_back,
        &doc.orphans_put_back_standing,
    );
    let mut human = format!(
        "table {} (uuid {}) at generation {}\nprotected-ref root {}  lease watermark {}  hold generation {}\n\nprotected snapshots:\n",
        doc.table,
        doc.table_uuid,
        doc.table_generation.metadata_location,
        doc.protected_ref_root,
        doc.lease_watermark,
        doc.hold_generation
    );
    for x in &p.protected {
        human.push_str(&format!("  {}  {}\n", x.snapshot_id, x.reasons.join(", ")));
    }
    human.push_str("\ncandidates:\n");
    if p.candidates.is_empty() {
        human.push_str("  (none)\n");
    }
    for c in &p.candidates {
        human.push_str(&format!(
            "  {} ({}) snapshots {:?}: {} objects, {} bytes, inventory root {}\n",
            c.candidate_id,
            c.kind,
            c.snapshot_ids,
            c.objects.len(),
            c.bytes,
            c.inventory_root
        ));
    }
    human.push_str(&format!(
        "\nplain expire_snapshots(older_than {}, retain_last {}) would remove snapshots {:?} and {} objects\nplain remove_orphan_files(older_than {}) would remove {} objects\n",
        b.older_than,
        b.retain_last.map_or_else(|| "from the table".to_owned(), |n| n.to_string()),
        p.plain_expire.snapshot_ids,
        p.plain_expire.objects.len(),
        b.orphans_older_than,
        p.plain_orphans.objects.len()
    ));
    for d in &p.differences {
        human.push_str(&format!(
            "  kept by lakedrill: {} — {}\n",
            d.subject,
            d.reasons.join(", ")
        ));
    }
    // One line per hidden file can be a line per data file (Spark's `.crc` sidecars): the rest of the text is
    // reserved at once (exactly: growing by doubling left up to half of a 60 MB text unused) and written in place.
    let kept_text: usize = kept
        .iter()
        .map(|d| {
            KEPT_LINE.len() + d.subject.len() + " — \n".len() + d.reasons.iter().map(|r| r.len() + 2).sum::<usize>()
        })
        .sum();
    let rest_text: usize = p
        .warnings
        .iter()
        .chain(put_back)
        .chain(standing)
        .map(|l| l.len() + "standing finding: \n".len())
        .sum();
    human.reserve_exact(kept_text + rest_text);
    for d in kept {
        human.push_str(KEPT_LINE);
        human.push_str(&d.subject);
        human.push_str(" — ");
        for (i, r) in d.reasons.iter().enumerate() {
            if i > 0 {
                human.push_str(", ");
            }
            human.push_str(r);
        }
        human.push('\n');
    }
    for w in &p.warnings {
        human.push_str(&format!("warning: {w}\n"));
    }
    for f in put_back {
        human.push_str(&format!("finding: {f}\n"));
    }
    for f in standing {
        human.push_str(&format!("standing finding: {f}\n"));
    }
    human
}

/// `lakedrill status [CANDIDATE] [--policy FILE]`: candidate and object states, and for the table (addressed, or
/// the candidate's) its rollout stage and the deleter switch; with a policy also the implementation-digest
/// binding (an unpinned policy refuses purge; `any` is noted) and the deletion-right requests.
///
/// # Errors
/// Registry errors; load, policy and storage errors when a table and a policy are given.
pub async fn status(
    ctx: &Context,
    source: Option<&TableSource>,
    candidate: Option<&str>,
    policy: Option<&Path>,
) -> Result<Outcome> {
    let reg = registry(ctx).await?;
    let table = match source {
        Some(src) => Some(ctx.table(src).await?),
        None => None,
    };
    let records = match (candidate, &table) {
        (Some(id), _) => vec![reg.candidate(id).await?],
        (None, Some(t)) => reg.candidates(&t.metadata().uuid().to_string()).await?,
        (None, None) => return Err(Error::invalid("status", "give a CANDIDATE id or address a table")),
    };
    let table_uuid = match (&table, records.first()) {
        (Some(t), _) => Some(t.metadata().uuid().to_string()),
        (None, Some(r)) => Some(r.table_uuid.clone()),
        (None, None) => None,
    };
    let switch = reg.deleter_switch().await?;
    let mut human = format!(
        "deleter: {}\n",
        if switch.stopped {
            format!("STOPPED ({}) — no purge is accepted for any table", switch.reason)
        } else {
            "running".to_owned()
        }
    );
    let mut doc = serde_json::Map::new();
    doc.insert(
        "deleter".into(),
        serde_json::to_value(&switch).map_err(|e| Error::Internal(e.to_string()))?,
    );
    if let Some(uuid) = &table_uuid {
        let stage = reg.rollout_stage(uuid).await?;
        human.push_str(&format!(
            "table {uuid}: rollout stage {}{}\n",
            stage.stage,
            if stage.changed_at.is_none() {
                " (the default: purge refused)".to_owned()
            } else {
                format!(
                    " (set by {} at {}: {})",
                    stage.changed_by.as_deref().unwrap_or("?"),
                    stage.changed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                    stage.reason
                )
            }
        ));
        doc.insert(
            "rollout".into(),
            serde_json::to_value(&stage).map_err(|e| Error::Internal(e.to_string()))?,
        );
    }
    if let (Some(p), Some(t)) = (policy, &table) {
        let policy = crate::govern::policy::load(p)?;
        policy.check_table(&policy_name(t), &t.metadata().uuid())?;
        let digest = crate::ops::binding::digest_binding(ctx, &policy)?;
        human.push_str(&format!(
            "implementation: this build {} ({})\n",
            digest.running, digest.status
        ));
        if let Some(m) = digest.message() {
            human.push_str(&format!(
                "{}: {m}\n",
                if !digest.allows_reclamation() {
                    "REFUSED"
                } else if !digest.allows_purge() {
                    "purge REFUSED"
                } else {
                    "note"
                }
            ));
        }
        let input = gather(ctx, t, &policy, &reg, ctx.now(), None).await?;
        let plan = closure::plan(&input);
        for r in &plan.deletion_rights {
            human.push_str(&format!(
                "deletion right {} ({}) deadline {}: {}{}\n",
                r.id,
                r.scope,
                output::ts(r.deadline_ms),
                r.status,
                if r.overdue { ", OVERDUE" } else { "" }
            ));
        }
        let binding = crate::ops::binding::policy_binding(&reg, &t.metadata().uuid().to_string(), &policy).await?;
        match binding.refusal() {
            Some(why) => human.push_str(&format!("policy: purge and quarantine REFUSED: {why}\n")),
            None => human.push_str(&format!("policy: sha256 {} ({})\n", binding.given, binding.status)),
        }
        doc.insert(
            "implementation_digest".into(),
            serde_json::to_value(&digest).map_err(|e| Error::Internal(e.to_string()))?,
        );
        doc.insert(
            "policy_binding".into(),
            serde_json::to_value(&binding).map_err(|e| Error::Internal(e.to_string()))?,
        );
        doc.insert(
            "deletion_rights".into(),
            serde_json::to_value(&plan.deletion_rights).map_err(|e| Error::Internal(e.to_string()))?,
        );
    }
    let mut docs = Vec::new();
    for r in records {
        let objects = reg.object_states(&r.candidate_id).await?;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for o in &objects {
            *counts.entry(o.state.to_string()).or_default() += 1;
        }
        let not_before = reg.quarantine_not_before(&r.candidate_id).await?;
        human.push_str(&format!(
            "{}  {}  ({})  objects {:?}{}\n",
            r.candidate_id,
            r.state,
            r.reason,
            counts,
            not_before
                .map(|t| format!("  no purge before {}", t.to_rfc3339()))
                .unwrap_or_default()
        ));
        docs.push(
            serde_json::json!({"candidate": r, "objects": objects, "object_counts": counts, "not_before": not_before}),
        );
    }
    doc.insert("candidates".into(), serde_json::Value::Array(docs));
    Outcome::new(Verdict::Ok, &doc, human)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Retention properties parse as Iceberg reads them; one that does not (or overflows an int) is an error
    /// naming the property, its value and the metadata, never a default.
    #[test]
    fn retention_properties_that_do_not_parse_are_refused_naming_them() {
        let uri = "s3://b/t/metadata/00003-x.metadata.json";
        let props = |kv: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
            kv.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(table_defaults(uri, &props(&[])).unwrap(), TableDefaults::default());
        let d = table_defaults(
            uri,
            &props(&[
                ("history.expire.max-snapshot-age-ms", "86400000"),
                ("history.expire.min-snapshots-to-keep", "3"),
                ("history.expire.max-ref-age-ms", "604800000"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (d.max_snapshot_age_ms, d.min_snapshots_to_keep, d.max_ref_age_ms),
            (86_400_000, 3, Some(604_800_000))
        );
        for (key, value) in [
            ("history.expire.max-snapshot-age-ms", "5d"),
            ("history.expire.min-snapshots-to-keep", "2147483648"),
            ("history.expire.min-snapshots-to-keep", " 3"),
            ("history.expire.max-ref-age-ms", "1e9"),
        ] {
            let e = table_defaults(uri, &props(&[(key, value)])).unwrap_err();
            assert!(matches!(e, Error::Invalid { .. }), "{key}={value}: {e:?}");
            let text = e.to_string();
            assert!(
                text.contains(uri) && text.contains(key) && text.contains(&format!("{value:?}")),
                "{key}={value}: {text}"
            );
        }
    }

    #[test]
    fn a_quarantine_tag_is_the_prefix_or_under_it_never_a_ref_that_only_begins_like_it() {
        let p = "quarantine/c-0123456789abcdef";
        assert!(is_quarantine_tag(p, p));
        assert!(is_quarantine_tag("quarantine/c-0123456789abcdef/42", p));
        assert!(!is_quarantine_tag("quarantine/c-0123456789abcdef-keep", p));
        assert!(!is_quarantine_tag("quarantine/c-0123456789abcdefX/42", p));
        assert!(!is_quarantine_tag("main", p));
    }
}
