//! Orphan reclamation, the reversible half: `quarantine o-…` holds a candidate's unreferenced files in an
//! orphan bundle, and [`put_back`] brings them back where they were.
//!
//! [`seal_and_hold`] reads and hashes every file of the candidate at the table location, decides how the files
//! are held and writes the signed orphan bundle (kind `orphans`, [`OrphanInfo`]) before any file leaves:
//! * on an S3 bucket whose versioning is `Enabled`, by a plain conditional delete (`If-Match` the ETag read):
//!   a delete marker hides the file, its version stays and is checked to be there;
//! * anywhere else, by a write-once copy to `<orphanQuarantine>/<table uuid>/<candidate id>/<BLAKE3>-<path
//!   digest>.orphan-copy` (the policy's location; one copy per file, shared with no other), read back and verified, and only
//!   then the file is removed from the table location (after its bytes were hashed once more).
//!
//! Nothing is final: the bytes stay until the deleter ([`crate::ops::deleter`]) removes the version or the copy
//! through its acceptance point. [`put_back`] removes the delete markers above the recorded version, or copies
//! the quarantined bytes back (never over another file), and verifies each file against the bundle; `restore
//! --put-back`, `quarantine release` and every run that finds a quarantined orphan referenced again use it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use futures::StreamExt;

use crate::bundle::{HeldFile, InventoryEntry};
use crate::error::{Error, Result};
use crate::evidence::inventory::{BundlePredicate, CopyNaming, OrphanHold, OrphanInfo, inventory_root};
use crate::evidence::keys::SigningKey;
use crate::govern::closure::{Candidate, PlanInput};
use crate::govern::policy::Policy;
use crate::io::store::Storage;
use crate::io::store::s3::{DeleteKey, Held, LifecycleEnd, LifecycleRule, bucket_and_key, soonest};
use crate::model::location;
use crate::ops::context::Context;
use crate::registry::{Registry, State, WorldStamp};
use crate::report::output::{Outcome, Verdict};
use crate::table::Table;

/// What a quarantine of orphans needs besides the context.
pub struct HoldRequest<'a> {
    /// The table as planned.
    pub table: &'a Table,
    /// The plan input the candidate came from (listing time, writers, holds).
    pub input: &'a PlanInput,
    /// The retention policy (`orphanQuarantine`).
    pub policy: &'a Policy,
    /// The registry.
    pub reg: &'a Registry,
    /// The orphan candidate.
    pub candidate: &'a Candidate,
    /// The world the plan saw.
    pub stamp: &'a WorldStamp,
    /// Signing key for the bundle.
    pub key: &'a SigningKey,
    /// Where bundles go.
    pub bundles: &'a str,
    /// The build's digest binding, recorded with the quarantine.
    pub digest: serde_json::Value,
    /// The policy's digest.
    pub policy_digest: String,
    /// When.
    pub now: DateTime<Utc>,
    /// The run holding the candidate's claim: it names the private names its local take-out renames files to.
    pub run_id: &'a str,
}

/// How the files of a table are held, and why that way.
struct HoldChoice {
    hold: OrphanHold,
    /// The policy's `orphanQuarantine` folder of this table (copy hold).
    quarantine_root: Option<String>,
    /// Why this hold (the quarantine's record and output say it).
    reason: String,
    /// On a delete-marker hold: the lifecycle rule that removes the held versions soonest, if any.
    lifecycle: Option<LifecycleRule>,
}

/// How the `objects` of a table can be held: a delete marker on a versioned bucket, as long as no lifecycle rule
/// of the bucket removes their versions before the policy's `minQuarantinePeriod` has passed (the earliest a purge
/// may take them); else a copy under the policy's `orphanQuarantine` (which must lie outside the table). `Err` is
/// the refusal's reason.
async fn hold_for(
    storage: &Storage,
    table: &Table,
    policy: &Policy,
    objects: &[crate::model::object::ObjectRef],
    since: DateTime<Utc>,
) -> Result<std::result::Result<HoldChoice, String>> {
    let root = table.location().root_uri();
    let mut no_markers = None;
    if root.starts_with("s3://") && storage.s3_versioning_enabled(root).await? {
        let uris: Vec<(String, u64)> = objects
            .iter()
            .map(|o| (location::join(root, &o.path), o.size))
            .collect();
        match lifecycle_allows(storage, root, Held::BehindMarker, &uris, since, policy).await {
            Ok((reason, lifecycle)) => {
                return Ok(Ok(HoldChoice {
                    hold: OrphanHold::DeleteMarker,
                    quarantine_root: None,
                    reason: format!(
                        "held behind delete markers on bucket {}: {reason}",
                        bucket_and_key(root).map_or("", |(b, _)| b)
                    ),
                    lifecycle,
                }));
            }
            Err(why) => no_markers = Some(why),
        }
    }
    let Some(q) = policy.orphan_quarantine() else {
        return Ok(Err(match no_markers {
            Some(why) => format!(
                "no delete-marker hold: {why}; and the policy {} names no orphanQuarantine location for write-once \
                 copies: orphans cannot be held reversibly",
                policy.source_name()
            ),
            None => format!(
                "the table location {root} keeps no versions (not an S3 bucket with versioning Enabled) and the \
                 policy {} names no orphanQuarantine location for write-once copies: orphans cannot be held reversibly",
                policy.source_name()
            ),
        }));
    };
    // The same folder overlaps as much as one under the other (`is_under` is strict).
    if q.trim_end_matches('/') == root.trim_end_matches('/')
        || location::is_under(q, root)
        || location::is_under(root, q)
    {
        return Ok(Err(format!(
            "the policy's orphanQuarantine {q} overlaps the table location {root}: the copies would be listed as \
             the table's files"
        )));
    }
    let uuid = table.metadata().uuid().to_string();
    Ok(Ok(HoldChoice {
        hold: OrphanHold::QuarantineCopy,
        quarantine_root: Some(location::join(q, &uuid)),
        reason: match no_markers {
            Some(why) => format!(
                "no delete-marker hold: {why}; held as write-once copies under the policy's orphanQuarantine instead"
            ),
            None => "the table location keeps no versions: held as write-once copies under the policy's \
                     orphanQuarantine"
                .to_owned(),
        },
        lifecycle: None,
    }))
}

/// Whether the lifecycle rules of the S3 bucket of `bucket_uri` let files held there as `held` since `since` (each
/// `uris` entry a file's URI and size) stay until a purge may take them: no enabled rule that may apply to one of
/// them removes it before the policy's `minQuarantinePeriod` has passed (a rule counts its days from the marker or
/// the copy, which is the quarantine). `Ok` is what the rules do (the rule that ends the hold soonest, if any, and a
/// move to another storage class) and that rule; `Err` names the rule that ends the hold too soon and the first file
/// it applies to, or says the bucket's lifecycle configuration could not be read.
async fn lifecycle_allows(
    storage: &Storage,
    bucket_uri: &str,
    held: Held,
    uris: &[(String, u64)],
    since: DateTime<Utc>,
    policy: &Policy,
) -> std::result::Result<(String, Option<LifecycleRule>), String> {
    let bucket = bucket_and_key(bucket_uri).map_or("", |(b, _)| b);
    let rules = storage.s3_lifecycle_rules(bucket_uri).await.map_err(|e| {
        format!(
            "the lifecycle configuration of bucket {bucket} could not be read ({}; reading it needs \
             s3:GetLifecycleConfiguration), so how long the bucket keeps the held files is unknown",
            e.with_causes()
        )
    })?;
    let objects = || uris.iter().map(|(u, n)| (u.as_str(), *n));
    let what = match held {
        Held::BehindMarker => "removes non-current versions",
        Held::Current => "expires objects",
    };
    let describe = |e: &LifecycleEnd<'_>| {
        format!(
            "lifecycle rule {} of bucket {bucket} (prefix '{}'{}), which applies to {} of the {} held file(s) (first: {})",
            e.rule.name(),
            e.rule.prefix,
            if e.rule.tag_filtered {
                ", filtered by tags too, taken to apply"
            } else {
                ""
            },
            e.objects,
            uris.len(),
            e.first
        )
    };
    let archive = soonest(&rules, held, since, true, objects()).map(|e| {
        format!(
            "; {} moves them to storage class {} from {}: drills and put-backs of those files then need a restore \
             from that class first",
            describe(&e),
            e.storage_class.unwrap_or("?"),
            e.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    });
    let Some(end) = soonest(&rules, held, since, false, objects()) else {
        return Ok((
            format!(
                "no enabled lifecycle rule of bucket {bucket} {what} of these files{}",
                archive.unwrap_or_default()
            ),
            None,
        ));
    };
    let lasts = end.at - since;
    if let Some(min) = policy.min_quarantine_period()
        && lasts < min
    {
        return Err(format!(
            "{} {what} {} after the quarantine, before the policy's minQuarantinePeriod ({}) has passed: the bucket \
             would not keep these files until a purge may take them (change the rule or the policy)",
            describe(&end),
            crate::clock::format_duration(lasts),
            crate::clock::format_duration(min)
        ));
    }
    Ok((
        format!(
            "{} {what} {} after the quarantine, from {}: purge or release before then (`quarantine extend` past it is \
             refused){}",
            describe(&end),
            crate::clock::format_duration(lasts),
            end.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            archive.unwrap_or_default()
        ),
        Some(end.rule.clone()),
    ))
}

/// What the lifecycle rules of a bucket, read now, do to the hold of one quarantined orphan candidate: the rule
/// that ends it soonest, or why the rules could not be read. The rules a quarantine judged are recorded with it
/// (`hold_ends_at`); a rule added afterwards is seen only here, so every `plan` reads them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldEndNow {
    /// `rule` of `bucket` removes one of the held files at `at` at the earliest.
    Ends {
        /// When, counted from the quarantine.
        at: DateTime<Utc>,
        /// The rule's ID.
        rule: String,
        /// Its bucket.
        bucket: String,
    },
    /// The bucket's lifecycle configuration could not be read: whether a rule ends the hold is unknown.
    Unreadable {
        /// The bucket.
        bucket: String,
        /// The reason.
        why: String,
    },
}

/// The lifecycle rules of the buckets that hold `rec`'s files on S3 (behind delete markers, or as copies), read
/// now (each bucket once per `rules` cache): what ends the hold soonest, one answer per bucket that ends it or
/// cannot be read. Nothing for a hold off S3, a candidate that is not an orphan quarantine, or a bucket whose rules
/// leave the files alone.
///
/// A held file counts while it is still one of the candidate's objects (a put-back takes it out of the candidate).
/// `location` relates the held paths to the candidate's object paths; without it (`quarantine extend` names no
/// table) a held path counts when one of its `/`-suffixes is an object path, which can only count more files.
pub async fn hold_ends_now(
    storage: &Storage,
    rules: &mut BTreeMap<String, std::result::Result<Vec<LifecycleRule>, String>>,
    location: Option<&location::TableLocation>,
    rec: &crate::registry::CandidateRecord,
) -> Vec<HoldEndNow> {
    let Some(q) = rec.quarantine.as_ref().filter(|q| q["mode"] == "orphans") else {
        return Vec::new();
    };
    let held = match q["hold"].as_str() {
        Some("delete-marker") => Held::BehindMarker,
        Some("quarantine-copy") => Held::Current,
        _ => return Vec::new(),
    };
    let Some(since) = q["quarantined_at"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
    else {
        return Vec::new();
    };
    let sizes: std::collections::HashMap<&str, u64> = rec.objects.iter().map(|o| (o.path.as_str(), o.size)).collect();
    // Each held file where it is held (`held_at`: the URI, with ` version …` after it behind a marker) and its
    // size (a rule may be bounded by size), by bucket.
    let mut by_bucket: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for h in q["held"].as_array().into_iter().flatten() {
        let (Some(at), Some(path)) = (h["held_at"].as_str(), h["path"].as_str()) else {
            continue;
        };
        let uri = match held {
            Held::BehindMarker => at.rsplit_once(" version ").map_or(at, |(u, _)| u),
            Held::Current => at,
        };
        let Some((bucket, _)) = bucket_and_key(uri) else {
            continue;
        };
        // A held file that is no longer one of the candidate's objects was put back: nothing holds it.
        let size = match location {
            Some(loc) => sizes
                .get(loc.relative(path).unwrap_or_else(|_| path.to_owned()).as_str())
                .copied(),
            None => std::iter::once(path)
                .chain(path.match_indices('/').map(|(i, _)| &path[i + 1..]))
                .find_map(|suffix| sizes.get(suffix).copied()),
        };
        if let Some(size) = size {
            by_bucket
                .entry(bucket.to_owned())
                .or_default()
                .push((uri.to_owned(), size));
        }
    }
    let mut out = Vec::new();
    for (bucket, files) in by_bucket {
        if !rules.contains_key(&bucket) {
            let read = storage
                .s3_lifecycle_rules(&format!("s3://{bucket}/"))
                .await
                .map_err(|e| e.with_causes());
            rules.insert(bucket.clone(), read);
        }
        match &rules[&bucket] {
            Ok(r) => {
                if let Some(end) = soonest(r, held, since, false, files.iter().map(|(u, n)| (u.as_str(), *n))) {
                    out.push(HoldEndNow::Ends {
                        at: end.at,
                        rule: end.rule.name().to_owned(),
                        bucket,
                    });
                }
            }
            Err(why) => out.push(HoldEndNow::Unreadable {
                bucket,
                why: why.clone(),
            }),
        }
    }
    out
}

/// How this release names the write-once copies of an orphan bundle.
const COPY_NAMING: CopyNaming = CopyNaming::PerFile;

/// One file read for the bundle: its entry and, for a copy hold, its bytes.
struct Read {
    entry: InventoryEntry,
    bytes: Option<bytes::Bytes>,
}

/// Reads one orphan at the table location: `Err(reason)` when it is gone or no longer the planned size.
async fn read_one(
    storage: &Storage,
    table: &Table,
    o: &crate::model::object::ObjectRef,
    hold: OrphanHold,
) -> Result<std::result::Result<Read, String>> {
    let uri = location::join(table.location().root_uri(), &o.path);
    let path = format!("{}/{}", table.location().written().trim_end_matches('/'), o.path);
    let (info, size, digest, bytes) = match hold {
        OrphanHold::DeleteMarker => match storage.hash(&uri).await {
            Ok(h) => (h.info, h.bytes_read, h.blake3, None),
            Err(Error::NotFound { .. }) => return Ok(Err(format!("{} is gone since the plan", o.path))),
            Err(e) => return Err(e),
        },
        OrphanHold::QuarantineCopy => match storage.get_opt(&uri).await? {
            Some(f) => {
                let digest = blake3::hash(&f.bytes).to_hex().to_string();
                (f.info, f.bytes.len() as u64, digest, Some(f.bytes))
            }
            None => return Ok(Err(format!("{} is gone since the plan", o.path))),
        },
    };
    if size != o.size {
        return Ok(Err(format!(
            "{} is {size} bytes now, {} when planned: it changed since the plan",
            o.path, o.size
        )));
    }
    if hold == OrphanHold::DeleteMarker && info.version.is_none() {
        return Ok(Err(format!("{} has no version id on a versioned bucket", o.path)));
    }
    Ok(Ok(Read {
        entry: InventoryEntry {
            path,
            uri,
            layer: o.layer,
            size,
            blake3: digest,
            e_tag: info.e_tag.clone(),
            version: info.version.clone(),
            record_count: None,
            copy: None,
        },
        bytes,
    }))
}

/// What [`take_out`] did with one held file.
enum TakeOut {
    /// Out of the table location and held; how.
    Out(String),
    /// Still in place (or put back in place); why.
    Stayed(String),
    /// Renamed aside and changed since it was copied, while another file took its path: it is left under its
    /// private name (never removed, never put over the other file); why, naming both paths.
    Aside(String),
}

/// The private name a take-out of run `run_id` renames the local file `uri` to before it removes it: the same
/// folder, `.lakedrill-removing-<run>-<name>` (a hidden name: never listed as an orphan, never a table file). A
/// name over 128 bytes is replaced by the first 32 hex digits of its BLAKE3 (the prefix and the run take 57 bytes,
/// and a longer private name would pass the filesystem's 255 and stop every take-out of the candidate at it).
///
/// # Errors
/// [`Error::BadUri`] for a URI without a file name.
pub fn removing_uri(uri: &str, run_id: &str) -> Result<String> {
    let (dir, name) = uri
        .rsplit_once('/')
        .filter(|(_, n)| !n.is_empty())
        .ok_or_else(|| Error::BadUri {
            uri: uri.to_owned(),
            reason: "no file name to rename aside".to_owned(),
        })?;
    if name.len() > 128 {
        let digest = blake3::hash(name.as_bytes()).to_hex();
        return Ok(format!("{dir}/{REMOVING_PREFIX}{run_id}-{}", &digest.as_str()[..32]));
    }
    Ok(format!("{dir}/{REMOVING_PREFIX}{run_id}-{name}"))
}

/// How the private name of a file being removed begins ([`removing_uri`]).
pub const REMOVING_PREFIX: &str = ".lakedrill-removing-";

/// Takes one held file out of the table location, reversibly. Returns what happened, or why it stayed. A local
/// file whose path with symlinks resolved is not under the table root (`confined`), or is not the path itself (a
/// link inside the table on its way), stays where it is: the listing follows links, and removing it would remove
/// another folder's file (README "Symlinks").
async fn take_out(
    storage: &Storage,
    confined: &crate::io::store::Confined,
    f: &HeldFile,
    unconditioned: Option<&str>,
    run_id: &str,
) -> Result<TakeOut> {
    let e = &f.entry;
    // On S3 the delete that takes a file out is conditional on the ETag read with its bytes (`If-Match`), so a file
    // overwritten since is spared (a marker would hide the newer version; an unversioned removal would lose it).
    // Only where the provider is known to honour the condition, and only with an ETag to name.
    if e.uri.starts_with("s3://") {
        if let Some(why) = unconditioned {
            return Ok(TakeOut::Stayed(format!("{why}: it stays in place")));
        }
        if e.e_tag.is_none() {
            return Ok(TakeOut::Stayed(
                "the provider gave it no ETag to make its delete conditional on: it stays in place".into(),
            ));
        }
    }
    match &f.version {
        Some(version) => {
            let answer = match delete_if_match(storage, e, "hide").await? {
                Ok(a) => a,
                Err(why) => return Ok(TakeOut::Stayed(why)),
            };
            // The marker must hide it and its version must still be there, unchanged.
            let hidden = storage.head(&e.uri).await?.is_none();
            let kept = storage.head_version(&e.uri, Some(version)).await?;
            match (hidden, kept) {
                (true, Some(k)) if k.size == e.size => Ok(TakeOut::Out(format!(
                    "delete marker {} over version {version}",
                    answer.delete_marker_version_id.as_deref().unwrap_or("?")
                ))),
                (false, _) => Ok(TakeOut::Stayed(
                    "still visible after its delete marker was written".into(),
                )),
                (true, _) => Err(Error::corrupt(
                    &e.uri,
                    format!(
                        "version {version} is gone or changed after a plain delete on a versioned bucket: the bucket \
                         does not keep versions as it says"
                    ),
                )),
            }
        }
        None => {
            // Removed only while it is still exactly the bytes copied.
            let now = match storage.hash(&e.uri).await {
                Ok(h) => h,
                Err(Error::NotFound { .. }) => return Ok(TakeOut::Stayed("gone before its removal".into())),
                Err(err) => return Err(err),
            };
            if now.blake3 != e.blake3 || now.bytes_read != e.size {
                return Ok(TakeOut::Stayed("changed after it was copied: it stays in place".into()));
            }
            // The last check before the delete: where the path leads now, not where it led at the plan. A path
            // that reaches its file through a link (leaving the table, or to another path inside it) would remove
            // that other file.
            if let Some(target) = confined.escape(&e.uri).await? {
                return Ok(TakeOut::Stayed(format!(
                    "{} resolves to {target}, outside the table root (a symlink leaves the table): never removed, it \
                     stays in place",
                    e.uri
                )));
            }
            if let Some(target) = confined.through_link(&e.uri).await? {
                return Ok(TakeOut::Stayed(format!(
                    "{} resolves to {target} through a symlink (the same file under another path of the table): \
                     never removed through the link, it stays in place",
                    e.uri
                )));
            }
            storage
                .failpoint_delay(crate::io::store::DelayPoint::OrphanRemove)
                .await;
            if e.uri.starts_with("file://") {
                return remove_local(storage, f, run_id).await;
            }
            if e.uri.starts_with("s3://") {
                if let Err(why) = delete_if_match(storage, e, "remove").await? {
                    return Ok(TakeOut::Stayed(why));
                }
            } else {
                storage.delete(&e.uri).await?;
            }
            if storage.head(&e.uri).await?.is_some() {
                return Ok(TakeOut::Stayed("still present after its removal".into()));
            }
            Ok(TakeOut::Out(format!("copied to {} and removed", f.uri)))
        }
    }
}

/// The removal of a held file on the local filesystem, conditional as far as the filesystem allows (it has no
/// conditional delete): the file is renamed aside to its private name ([`removing_uri`], one `rename(2)`: a
/// writer that rewrites the path from then on writes another file), hashed there, and removed only while it is
/// exactly the bytes copied; otherwise it is renamed back, never over a file that took its path meanwhile (then
/// it stays under its private name and the quarantine names both paths: [`TakeOut::Aside`]). A run killed
/// between the rename and the removal leaves the private name; [`settle_removing`] settles it. What stays open:
/// a writer holding the file open from before the rename can still write to it until it is removed (DESIGN.md).
async fn remove_local(storage: &Storage, f: &HeldFile, run_id: &str) -> Result<TakeOut> {
    let e = &f.entry;
    let private = removing_uri(&e.uri, run_id)?;
    match storage.local_rename(&e.uri, &private).await {
        Ok(()) => {}
        Err(Error::NotFound { .. }) => return Ok(TakeOut::Stayed("gone before its removal".into())),
        Err(err) => return Err(err),
    }
    storage
        .failpoint_delay(crate::io::store::DelayPoint::OrphanRenamed)
        .await;
    let h = storage.hash(&private).await?;
    if h.blake3 == e.blake3 && h.bytes_read == e.size {
        storage.delete(&private).await?;
        return Ok(TakeOut::Out(format!(
            "copied to {}, renamed aside to {private}, hashed again there and removed",
            f.uri
        )));
    }
    let why = format!(
        "changed after it was copied (BLAKE3 {} once renamed aside, {} when copied)",
        h.blake3, e.blake3
    );
    if storage.local_rename_no_clobber(&private, &e.uri).await? {
        Ok(TakeOut::Stayed(format!("{why}: renamed back, it stays in place")))
    } else {
        Ok(TakeOut::Aside(format!(
            "{why}, and another file took its path {} meanwhile: it is left at {private} (not removed, not put \
             over that file); move one of them yourself",
            e.uri
        )))
    }
}

/// Settles what a take-out of candidate `rec` killed between a rename aside and its removal left (`remove_local`):
/// for each of `files` (held as local copies) whose private name of the candidate's take-out run exists, the
/// file goes back to its path when that path is free; when another file took the path, it is removed only when its
/// bytes are the copy's and the copy holds them (the copy is its way back), and left otherwise, named. Returns one
/// line per private name found, for the run's output; a line starting `ORPHAN_LEFT_ASIDE` is one left.
///
/// # Errors
/// Storage errors.
pub async fn settle_removing(
    storage: &Storage,
    rec: &crate::registry::CandidateRecord,
    files: &[HeldFile],
) -> Result<Vec<String>> {
    let Some(run) = rec
        .quarantine
        .as_ref()
        .and_then(|q| q["take_out_run"].as_str().map(str::to_owned))
    else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for f in files
        .iter()
        .filter(|f| f.version.is_none() && f.entry.uri.starts_with("file://"))
    {
        let e = &f.entry;
        let private = removing_uri(&e.uri, &run)?;
        if storage.head(&private).await?.is_none() {
            continue;
        }
        let id = &rec.candidate_id;
        let back = if storage.head(&e.uri).await?.is_none() {
            match storage.local_rename_no_clobber(&private, &e.uri).await {
                Ok(back) => back,
                // A filesystem without hard links, for one: the file stays under its private name, named.
                Err(err) => {
                    out.push(format!(
                        "ORPHAN_LEFT_ASIDE: {} of candidate {id}: a killed take-out left it renamed aside at \
                         {private}, and it could not be put back at its free path ({}): move it back yourself",
                        e.path,
                        err.with_causes()
                    ));
                    continue;
                }
            }
        } else {
            false
        };
        if back {
            out.push(format!(
                "ORPHAN_SETTLED: {} of candidate {id}: a killed take-out left it renamed aside at {private}; put back \
                 at its path",
                e.path
            ));
            continue;
        }
        let h = storage.hash(&private).await?;
        let copy = match storage.hash(&f.uri).await {
            Ok(c) => Some(c),
            Err(Error::NotFound { .. }) => None,
            Err(err) => return Err(err),
        };
        let held = h.blake3 == e.blake3
            && h.bytes_read == e.size
            && copy.is_some_and(|c| c.blake3 == e.blake3 && c.bytes_read == e.size);
        if held {
            storage.delete(&private).await?;
            out.push(format!(
                "ORPHAN_SETTLED: {} of candidate {id}: a killed take-out left it renamed aside at {private}, and \
                 another file is at its path now; its bytes are the copy's ({}), so the private name was removed",
                e.path, f.uri
            ));
        } else {
            out.push(format!(
                "ORPHAN_LEFT_ASIDE: {} of candidate {id}: a killed take-out left it renamed aside at {private}, \
                 another file is at its path {} now, and its bytes are not the quarantine copy's: it is left there \
                 (not removed, not put over that file); move one of them yourself",
                e.path, e.uri
            ));
        }
    }
    Ok(out)
}

/// The take-out's delete of `e` on S3, conditional on the ETag read with its bytes (`If-Match`): the provider's
/// answer, or why the file stays in place when the provider did not `what` it (a file changed since is refused:
/// `PreconditionFailed`).
async fn delete_if_match(
    storage: &Storage,
    e: &InventoryEntry,
    what: &str,
) -> Result<std::result::Result<crate::io::store::s3::DeleteAnswer, String>> {
    let answer = storage
        .s3_delete_one(&DeleteKey {
            uri: e.uri.clone(),
            e_tag: e.e_tag.clone(),
            version_id: None,
        })
        .await?;
    if answer.deleted {
        return Ok(Ok(answer));
    }
    Ok(Err(format!(
        "the provider did not {what} it ({}): it stays in place",
        answer.code.as_deref().unwrap_or("no code")
    )))
}

/// After a take-out step of `f` failed: whether the file left the table location anyway and is held as recorded
/// (`Some(true)`), is still in place (`Some(false)`), or left but is not where it should be held (`None`: its
/// version is gone behind the marker, or its copy is missing).
async fn left_anyway(storage: &Storage, f: &HeldFile, run_id: &str) -> Result<Option<bool>> {
    let e = &f.entry;
    if storage.head(&e.uri).await?.is_some() {
        return Ok(Some(false));
    }
    // Renamed aside and not removed (the step failed between): neither in place nor settled; the candidate's
    // record says the take-out is unfinished, and [`settle_removing`] settles the private name.
    if f.version.is_none()
        && e.uri.starts_with("file://")
        && storage.head(&removing_uri(&e.uri, run_id)?).await?.is_some()
    {
        return Ok(None);
    }
    let held = match &f.version {
        Some(version) => storage.head_version(&e.uri, Some(version)).await?,
        None => storage.head(&f.uri).await?,
    };
    Ok(held.is_some_and(|h| h.size == e.size).then_some(true))
}

/// What [`read_and_copy`] read: every file's entry and how the files are held.
pub struct Prepared {
    entries: Vec<InventoryEntry>,
    hold: OrphanHold,
    quarantine_root: Option<String>,
    hold_reason: String,
    hold_lifecycle: Option<LifecycleRule>,
    held_since: DateTime<Utc>,
}

/// The first half of `quarantine o-…`, run while the candidate is claimed: read and hash every file where it is
/// and write the copies (copy hold), each read back. Nothing leaves the table. `Err` is the refusal's reason.
///
/// # Errors
/// Storage and registry errors; a copy that reads back with other bytes.
pub async fn read_and_copy(ctx: &Context, r: &HoldRequest<'_>) -> Result<std::result::Result<Prepared, String>> {
    let id = &r.candidate.candidate_id;
    let refuse = |reason: String| Ok(Err(reason));
    let state = r.reg.candidate_state(id).await?;
    if state != State::UnreferencedEligible {
        return refuse(format!("{id} is already {state} (another quarantine ran meanwhile)"));
    }
    // The hold begins here, before any copy or marker is written: the quarantine's time (`minQuarantinePeriod`
    // counts from it) and the time every lifecycle rule is judged from (a rule counts from the copy or the marker,
    // both later).
    let held_since = ctx.now();
    let mut choice = match hold_for(&ctx.storage, r.table, r.policy, &r.candidate.objects, held_since).await? {
        Ok(c) => c,
        Err(why) => return refuse(why),
    };
    let hold = choice.hold;
    // Copies go to a folder of this candidate's own, each named for its file ([`COPY_NAMING`]): no copy is shared
    // with another file or another candidate, so purging one never takes bytes another still holds.
    let quarantine_root = choice.quarantine_root.as_ref().map(|q| location::join(q, id));
    // 1. Every file read and hashed where it is (nothing changes yet).
    let concurrency = ctx.storage.options().io_concurrency.get();
    let read: Vec<Result<std::result::Result<Read, String>>> = futures::stream::iter(
        r.candidate
            .objects
            .iter()
            .map(|o| read_one(&ctx.storage, r.table, o, hold)),
    )
    .buffered(concurrency)
    .collect()
    .await;
    let mut entries = Vec::new();
    let mut copies = Vec::new();
    let mut changed = Vec::new();
    for x in read {
        match x? {
            Ok(Read { entry, bytes }) => {
                if let Some(b) = bytes {
                    copies.push((COPY_NAMING.name(&entry), entry.blake3.clone(), b));
                }
                entries.push(entry);
            }
            Err(why) => changed.push(why),
        }
    }
    if !changed.is_empty() {
        return refuse(format!("{}; re-plan (nothing was changed)", changed.join("; ")));
    }
    // Copies on S3 last only as long as the quarantine bucket's lifecycle rules keep them (an `Expiration` that
    // applies there): the same rule as for markers, judged on the copies' own names, before any is written.
    if let Some(q) = quarantine_root.as_ref().filter(|q| q.starts_with("s3://")) {
        let uris: Vec<(String, u64)> = copies
            .iter()
            .map(|(name, _, b)| (location::join(q, name), b.len() as u64))
            .collect();
        match lifecycle_allows(&ctx.storage, q, Held::Current, &uris, held_since, r.policy).await {
            Ok((note, rule)) => {
                choice.reason = format!("{}; the copies: {note}", choice.reason);
                choice.lifecycle = rule;
            }
            Err(why) => {
                return refuse(format!(
                    "{}; the copies cannot be held either: {why} (nothing was changed)",
                    choice.reason
                ));
            }
        }
    }
    // 2. The copies, write-once, each read back and verified before anything leaves the table.
    if let Some(q) = &quarantine_root {
        for (name, digest, bytes) in copies {
            let uri = location::join(q, &name);
            match ctx.storage.put_new(&uri, bytes).await {
                // Already there: this candidate's own earlier try (its folder and the name are its own); read back below.
                Ok(_) | Err(Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
            let h = ctx.storage.hash(&uri).await?;
            if h.blake3 != digest {
                return Err(Error::corrupt(
                    &uri,
                    format!("the quarantine copy reads back with BLAKE3 {}, not {digest}", h.blake3),
                ));
            }
        }
    }
    Ok(Ok(Prepared {
        entries,
        hold,
        quarantine_root,
        hold_reason: choice.reason,
        hold_lifecycle: choice.lifecycle,
        held_since,
    }))
}

/// How far this host's clock may read ahead of the store's before an orphan quarantine refuses to take files out.
pub const MAX_CLOCK_AHEAD: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// Checks that this host's clock (the context's) does not read ahead of the store holding the table at `root` by
/// more than [`MAX_CLOCK_AHEAD`] (review W4): an orphan's age is the host's now minus the store's modification
/// time, so a host clock a day ahead made a file written an hour ago look a day old, older than
/// `orphanSafetyInterval`, and a writer's uncommitted files were taken out of the table. It writes a small probe
/// object under `<root>/.lakedrill-probe/`, reads its modification time and removes it again.
///
/// # Errors
/// "Cannot decide" (exit 2) naming the table root, both times and the difference when the host reads too far ahead;
/// storage errors writing or reading the probe.
pub async fn store_clock_agrees(ctx: &Context, root: &str) -> Result<()> {
    let probe = location::join(root, &format!(".lakedrill-probe/clock-{}", uuid::Uuid::new_v4()));
    let before = ctx.now();
    ctx.storage
        .put(&probe, bytes::Bytes::from_static(b"lakedrill clock probe\n"))
        .await?;
    let seen = ctx.storage.head(&probe).await;
    if let Err(e) = ctx.storage.delete_probe(&probe).await {
        crate::error::warn(format!(
            "the clock probe {probe} could not be removed ({e}): remove it by hand"
        ));
    }
    let Some(info) = seen? else {
        return Err(Error::invalid(
            &probe,
            "cannot decide: the clock probe just written is not there, so the store's time is unknown (nothing left \
             the table)",
        ));
    };
    let ahead = before - info.last_modified;
    if ahead > MAX_CLOCK_AHEAD {
        return Err(Error::invalid(
            root,
            format!(
                "cannot decide: this host's clock read {} when the store stamped an object written after it {} ({} s \
                 ahead, more than {} s): every file would look that much older than it is, and a writer's files \
                 younger than orphanSafetyInterval could be taken out of the table. Set the clock right (NTP) and \
                 quarantine again (nothing left the table)",
                before.to_rfc3339(),
                info.last_modified.to_rfc3339(),
                ahead.num_seconds(),
                MAX_CLOCK_AHEAD.num_seconds()
            ),
        ));
    }
    Ok(())
}

/// Why the orphans of `objects` may not leave the table as it is now (`input`, gathered once they were read):
/// one the table now references (a slow writer's late commit while they were read), or under a writer or hold
/// begun meanwhile; `None` when nothing stands in the way. What is elsewhere on the table is not a reason (a lease
/// is on a snapshot, and no snapshot references an orphan).
///
/// # Errors
/// "Cannot decide" (exit 2) naming the table's metadata file `metadata_uri` when snapshots' layers cannot be read or
/// a protection names a snapshot missing from the generation (review W5: these were refusals, exit 1, where the
/// same conditions at the start of the quarantine and in the purge exit 2).
pub fn standing_refusal(
    input: &PlanInput,
    objects: &[crate::model::object::ObjectRef],
    metadata_uri: &str,
) -> Result<Option<String>> {
    let standing = crate::govern::closure::orphan_rebase(input, objects);
    if !standing.unreadable.is_empty() {
        return Err(Error::corrupt(
            metadata_uri,
            format!(
                "cannot decide: the layers of snapshot(s) {:?} of the table's current generation cannot be read, so \
                 the orphans cannot be shown unreferenced (nothing left the table)",
                standing.unreadable
            ),
        ));
    }
    if !standing.missing_protected.is_empty() {
        return Err(Error::corrupt(
            metadata_uri,
            format!(
                "cannot decide: {}, missing from the table's current generation, so what it reaches is unknown and \
                 the orphans cannot be shown unreferenced (nothing left the table)",
                standing.missing_protected.join("; ")
            ),
        ));
    }
    if standing.released_objects.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "while the orphans were read, some came to be needed or protected: {}; re-plan (nothing left the table)",
        standing
            .released_objects
            .iter()
            .map(|(p, why)| format!("{p}: {why}"))
            .collect::<Vec<_>>()
            .join("; ")
    )))
}

/// The second half of `quarantine o-…`, once [`read_and_copy`] read the files and [`standing_refusal`] found
/// nothing on the table and registry read after it (`stamp`, then `input_now`): write the signed orphan bundle,
/// take the files out of the table location, record the quarantine with `stamp`. Nothing is deleted for good.
///
/// # Errors
/// Storage, signing and registry errors; a bucket that loses a version on a plain delete.
#[allow(clippy::too_many_lines)]
pub async fn seal_and_hold(
    ctx: &Context,
    r: &HoldRequest<'_>,
    prepared: Prepared,
    stamp: &WorldStamp,
    input_now: &PlanInput,
) -> Result<Outcome> {
    let id = &r.candidate.candidate_id;
    let Prepared {
        entries,
        hold,
        quarantine_root,
        hold_reason,
        hold_lifecycle,
        held_since,
    } = prepared;
    // The earliest moment the lifecycle rule that allowed the hold ends it (counted from the hold's beginning).
    let hold_ends_at = hold_lifecycle.as_ref().and_then(|l| {
        l.removes_at(
            match hold {
                OrphanHold::DeleteMarker => Held::BehindMarker,
                OrphanHold::QuarantineCopy => Held::Current,
            },
            held_since,
        )
    });
    let info = OrphanInfo {
        candidate_id: id.clone(),
        table_root: r.table.location().root_uri().to_owned(),
        hold,
        copy_naming: quarantine_root.as_ref().map(|_| COPY_NAMING),
        quarantine_root: quarantine_root.clone(),
        planned_metadata_location: r.stamp.metadata_location.clone(),
        listed_at: DateTime::<Utc>::from_timestamp_millis(r.input.now_ms)
            .unwrap_or(r.now)
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        orphan_safety_interval_ms: r.input.orphan_safety_interval_ms,
        writer_prefixes: input_now.protections.writers.iter().map(|(_, p)| p.clone()).collect(),
        hold_generation: u64::try_from(stamp.hold_generation).unwrap_or_default(),
        holds: input_now.protections.holds.iter().map(|(h, _)| h.clone()).collect(),
    };
    // 4. The signed bundle, before any file leaves the table location.
    let root = inventory_root(&entries);
    let md = r.table.generation();
    let pred = BundlePredicate {
        // Named by the candidate too: the same files held again under a new candidate (after a put-back) have the
        // same root, and must not find the earlier candidate's bundle in their place.
        bundle_id: format!("orphans-{}-{}", id.trim_start_matches("o-"), &root[..16]),
        table_uuid: r.input.table_uuid.clone(),
        table_location: r.table.location().written().to_owned(),
        snapshot_id: 0,
        snapshot_timestamp_ms: r.input.now_ms,
        sequence_number: 0,
        format_version: match r.table.metadata().format_version() {
            iceberg::spec::FormatVersion::V1 => 1,
            iceberg::spec::FormatVersion::V2 => 2,
            iceberg::spec::FormatVersion::V3 => 3,
        },
        sealed_at: r.now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        source_metadata_location: md.metadata_location.clone(),
        source_metadata_blake3: md.metadata_blake3.clone(),
        bundle_root: root.clone(),
        objects: entries.len(),
        inventory_member: None,
        bytes: entries.iter().map(|e| e.size).sum(),
        inventory: entries,
        backup: None,
        orphans: Some(info.clone()),
    };
    let files = crate::bundle::held(&pred, &info).map_err(|f| {
        Error::Internal(format!(
            "orphan bundle of {id} does not bind its own entries: {}",
            f.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        ))
    })?;
    let out = location::canonical_uri(r.bundles)?;
    // The table root with symlinks resolved, for the check before each file leaves (resolved before the bundle is
    // written: a root that cannot be examined stops the quarantine with nothing done).
    let confined = ctx.storage.confine(r.table.location().root_uri()).await?;
    let bundle_uri = crate::bundle::write_bundle(&ctx.storage, pred.clone(), Vec::new(), r.key, &out).await?;
    let bundle = serde_json::json!({
        "bundle_id": pred.bundle_id,
        "bundle_root": root,
        "snapshot_id": 0,
        "objects": pred.objects,
        "bytes": pred.bytes,
        "uri": bundle_uri,
    });
    // `uncertain`: the take-out is unfinished (`taking_out`): before it began, or files whose leaving is unknown.
    let record = |held: &[serde_json::Value], stayed: &[serde_json::Value], uncertain: Option<&[serde_json::Value]>| {
        let mut q = serde_json::json!({
            "mode": "orphans",
            "hold": hold,
            "hold_reason": hold_reason,
            "hold_lifecycle_rule": hold_lifecycle,
            "hold_ends_at": hold_ends_at,
            "quarantine_root": quarantine_root,
            // Where the held files return: the bundle root does not cover its entries' URIs, so the table root
            // and location they derive from are recorded here and compared by `bound_to_record`.
            "table_root": info.table_root,
            "table_location": pred.table_location,
            "bundles": [bundle],
            "held": held,
            "stayed_in_place": stayed,
            "plan_stamp": r.stamp,
            "held_stamp": stamp,
            "policy_digest": r.policy_digest,
            // When the hold began (before the first copy or marker): `minQuarantinePeriod` counts from here, as
            // the lifecycle rules were judged.
            "quarantined_at": held_since,
            "implementation_digest": r.digest,
            // The run taking the files out: it names the private names a local removal renames them to first, which
            // a run killed in between leaves ([`settle_removing`]).
            "take_out_run": r.run_id,
        });
        if let Some(uncertain) = uncertain {
            q["taking_out"] = serde_json::json!(true);
            q["uncertain"] = serde_json::json!(uncertain);
        }
        q
    };
    // Recorded before the first file leaves: a run that dies during the take-out leaves a QUARANTINED candidate
    // with its bundle (every later plan puts back what a late commit references; its purge is refused until a
    // release puts every file back), never files out of the table that no record names.
    r.reg
        .candidate_transition(
            id,
            State::Quarantined,
            "orphans sealed; taking them out of the table",
            Some(&record(&[], &[], Some(&[]))),
            Some(stamp),
            r.now,
        )
        .await?;
    ctx.storage
        .failpoint_delay(crate::io::store::DelayPoint::OrphanTakeOut)
        .await;
    // Whether the S3 provider honours a delete's ETag condition, asked once (the deleter's probe: one object beside
    // the table's files, removed again; `None` off S3). Where it does not, or that cannot be told, no file is taken
    // out: the take-out's delete would hide or remove a file overwritten since it was read.
    let unconditioned = if r.table.location().root_uri().starts_with("s3://") {
        let probe = location::join(
            r.table.location().root_uri(),
            &format!(".lakedrill-probe/{}", uuid::Uuid::new_v4()),
        );
        match ctx.storage.s3_delete_conditions(&probe).await {
            Ok(c) if c.if_match => None,
            Ok(_) => Some("the S3 provider does not honour If-Match on a delete (probed)".to_owned()),
            Err(e) => Some(format!(
                "whether the S3 provider honours If-Match on a delete could not be found out ({e})"
            )),
        }
    } else {
        None
    };
    // 5. Out of the table location, one file at a time, each checked. An error stops there; what left the table is
    // still recorded below, so that every way back knows it.
    let mut removed = Vec::new();
    let mut stayed = Vec::new();
    let mut stayed_paths = Vec::new();
    let mut uncertain = Vec::new();
    let mut aside = Vec::new();
    let mut failure = None;
    for f in &files {
        let outcome = if failure.is_some() {
            Ok(TakeOut::Stayed("not taken out: an earlier file failed".to_owned()))
        } else {
            take_out(&ctx.storage, &confined, f, unconditioned.as_deref(), r.run_id).await
        };
        match outcome {
            Ok(TakeOut::Out(how)) => {
                removed.push(serde_json::json!({"path": f.entry.path, "held_at": f.describe(), "how": how}));
            }
            Ok(TakeOut::Stayed(why)) => {
                stayed.push(serde_json::json!({"path": f.entry.path, "reason": why}));
                stayed_paths.push(f.entry.path.clone());
            }
            // Not held (its bytes are not the copy's) and not in place: it leaves the candidate as one that stayed,
            // and the run ends with findings naming both paths.
            Ok(TakeOut::Aside(why)) => {
                stayed.push(serde_json::json!({"path": f.entry.path, "reason": why, "left_aside": true}));
                stayed_paths.push(f.entry.path.clone());
                aside.push(format!("{}: {why}", f.entry.path));
            }
            Err(e) => {
                // The step failed, but its request may have taken effect (a lost answer): where the file is now
                // decides, never the error. One out of the table is held (it stays in the candidate, so that every
                // way back knows it); one whose place cannot be told leaves the take-out unfinished.
                match left_anyway(&ctx.storage, f, r.run_id).await {
                    Ok(Some(true)) => removed.push(serde_json::json!({
                        "path": f.entry.path, "held_at": f.describe(),
                        "how": format!("its take-out failed ({e}), yet it is out of the table location and held there, checked"),
                    })),
                    Ok(Some(false)) => {
                        stayed.push(serde_json::json!({"path": f.entry.path, "reason": e.to_string()}));
                        stayed_paths.push(f.entry.path.clone());
                    }
                    Ok(None) => uncertain.push(serde_json::json!({
                        "path": f.entry.path,
                        "reason": format!("{e}; out of the table location, but not held as recorded"),
                    })),
                    Err(probe) => uncertain.push(serde_json::json!({
                        "path": f.entry.path,
                        "reason": format!("{e}; where it is now cannot be read: {probe}"),
                    })),
                }
                failure = Some(e);
            }
        }
    }
    let mut rec = r
        .reg
        .candidate_quarantine_update(
            id,
            &record(
                &removed,
                &stayed,
                (!uncertain.is_empty()).then_some(uncertain.as_slice()),
            ),
            "orphans sealed and held",
            r.now,
        )
        .await?;
    // A file that stayed in place is not held: it leaves the candidate (PROTECTED), so that no purge claims it.
    if !stayed_paths.is_empty() {
        let rel: Vec<String> = stayed_paths
            .iter()
            .map(|p| r.table.location().relative(p).unwrap_or_else(|_| p.clone()))
            .collect();
        let rest: Vec<crate::model::object::ObjectRef> = r
            .candidate
            .objects
            .iter()
            .filter(|o| !rel.contains(&o.path))
            .cloned()
            .collect();
        let why = "it stayed in the table location at quarantine";
        if rest.is_empty() {
            rec = r
                .reg
                .candidate_transition(id, State::Protected, why, None, None, r.now)
                .await?;
        } else {
            let candidate = crate::govern::closure::with_inventory(&rec.candidate, &[], &rest);
            let record = serde_json::json!({
                "at": r.now.to_rfc3339(), "from": stamp, "to": stamp, "released_snapshots": [],
                "released_objects": rel.iter().map(|p| serde_json::json!({"path": p, "reason": why})).collect::<Vec<_>>(),
                "snapshot_ids": [], "objects": rest.len(),
            });
            r.reg
                .candidate_rebase(id, stamp, stamp, &candidate, &rel, &record, None, r.now)
                .await?;
            rec = r.reg.candidate(id).await?;
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let mut human = format!(
        "{id} QUARANTINED (orphans, {}): bundle {bundle_uri} root {root}\n  {hold_reason}\n",
        match hold {
            OrphanHold::DeleteMarker => "delete markers on a versioned bucket",
            OrphanHold::QuarantineCopy => "write-once copies",
        }
    );
    for f in &files {
        human.push_str(&format!("  {} → held at {}\n", f.entry.path, f.describe()));
    }
    for s in &stayed {
        human.push_str(&format!(
            "  WARNING: {} stayed in the table location: {}\n",
            s["path"].as_str().unwrap_or_default(),
            s["reason"].as_str().unwrap_or_default()
        ));
    }
    // A file left under its private name is neither held nor in place: the run says so and exits 1.
    for a in &aside {
        human.push_str(&format!("  ORPHAN_LEFT_ASIDE: {a}\n"));
    }
    Outcome::new(
        if aside.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Findings
        },
        &serde_json::json!({"status": "QUARANTINED", "candidate": rec, "bundles": [bundle], "held": removed,
            "stayed_in_place": stayed, "left_aside": aside}),
        human,
    )
}

/// What [`put_back`] did for one file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PutBack {
    /// The file's path as the table names it.
    pub path: String,
    /// What was done (`delete marker … removed`, `copied back`, `already in place`, or why nothing was).
    pub action: String,
    /// Whether the file is in place now with its recorded size and BLAKE3.
    pub verified: bool,
    /// Whether this call moved it (removed a marker or copied it back); false when it already was in place.
    pub moved: bool,
}

/// Delete markers [`put_back`] removes above one file's recorded version at most.
const PUT_BACK_MARKERS: usize = 16;

/// Puts one held file back where it was and verifies it. Never overwrites another file at its place.
async fn put_back_one(storage: &Storage, f: &HeldFile) -> Result<PutBack> {
    let e = &f.entry;
    let action = match &f.version {
        Some(version) => {
            // Remove the delete markers that are the current version, one at a time, until a real version is
            // current: the recorded one (in place), or a newer one (left as it is). Nothing else is touched.
            let mut action = Vec::new();
            for _ in 0..PUT_BACK_MARKERS {
                let versions = storage.s3_versions(&e.uri).await?;
                match versions.iter().find(|v| v.is_latest) {
                    Some(m) if m.is_delete_marker => {
                        storage.s3_delete_version(&e.uri, &m.version_id).await?;
                        action.push(format!("delete marker {} removed", m.version_id));
                    }
                    Some(v) if &v.version_id != version => {
                        action.push(format!("a newer version {} is current: left as it is", v.version_id));
                        break;
                    }
                    Some(_) => break,
                    None => {
                        action.push("no version is current".to_owned());
                        break;
                    }
                }
            }
            if action.is_empty() {
                "already in place".to_owned()
            } else {
                action.join("; ")
            }
        }
        None => match storage.head(&e.uri).await? {
            Some(_) => "a file is at its place: not overwritten".to_owned(),
            None => {
                let Some(copy) = storage.get_opt(&f.uri).await? else {
                    return Ok(PutBack {
                        path: e.path.clone(),
                        action: format!("its quarantine copy {} is gone: it cannot be put back", f.uri),
                        verified: false,
                        moved: false,
                    });
                };
                if blake3::hash(&copy.bytes).to_hex().as_str() != e.blake3 {
                    return Ok(PutBack {
                        path: e.path.clone(),
                        action: format!("the quarantine copy {} differs from the bundle: not put back", f.uri),
                        verified: false,
                        moved: false,
                    });
                }
                match storage.put_new(&e.uri, copy.bytes).await {
                    Ok(_) => format!("copied back from {}", f.uri),
                    Err(Error::AlreadyExists { .. }) => "a file appeared at its place: not overwritten".to_owned(),
                    Err(err) => return Err(err),
                }
            }
        },
    };
    let verified = match storage.hash(&e.uri).await {
        Ok(h) => h.blake3 == e.blake3 && h.bytes_read == e.size,
        Err(Error::NotFound { .. }) => false,
        Err(err) => return Err(err),
    };
    let moved = action.contains("removed") || action.starts_with("copied back");
    Ok(PutBack {
        path: e.path.clone(),
        action,
        verified,
        moved,
    })
}

/// Puts the given files of an orphan bundle back where they were (bounded parallel) and verifies each.
///
/// # Errors
/// Storage errors.
pub async fn put_back(storage: &Storage, files: &[HeldFile]) -> Result<Vec<PutBack>> {
    let concurrency = storage.options().io_concurrency.get();
    futures::stream::iter(files.iter().map(|f| put_back_one(storage, f)))
        .buffered(concurrency)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// The predicate of an orphan bundle of candidate `rec` and its held files, read without a trust store (for
/// `quarantine release` and the runs that put referenced orphans back: they only ever restore bytes whose BLAKE3
/// the inventory names, to paths bound under the table root, never over another file) but bound to what the
/// registry recorded when `rec` was quarantined ([`bound_to_record`]): a bundle changed since — its entries or
/// its quarantine folder pointed elsewhere — is refused before anything is put back.
///
/// # Errors
/// A bundle that cannot be read, is not an orphan bundle, or is not the one the registry recorded.
pub async fn held_files(
    storage: &Storage,
    bundle_uri: &str,
    rec: &crate::registry::CandidateRecord,
) -> Result<(BundlePredicate, Vec<HeldFile>)> {
    let dir = crate::bundle::bundle_dir(bundle_uri)?;
    let (pred, digests) = crate::bundle::unverified_predicate_keeping(storage, &dir, None)
        .await?
        .map_err(|why| Error::invalid(&dir, why))?;
    bound_to_record(bundle_uri, &pred, &digests.root, rec)?;
    let info = pred
        .orphans
        .clone()
        .ok_or_else(|| Error::invalid(&dir, "not an orphan bundle (it holds a snapshot)"))?;
    let files = crate::bundle::held(&pred, &info)
        .map_err(|f| Error::invalid(&dir, f.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
    Ok((pred, files))
}

/// Whether an orphan bundle read at `bundle_uri` (its predicate, and `root` recomputed from its inventory as it
/// was read) is the one the registry recorded when candidate `rec` was quarantined: the recorded `bundle_root` of
/// that URI, this candidate and table, and the recorded hold and quarantine folder. Every way a held file goes back
/// or is deleted reads its bundle through this check, so that where a file is held and where it returns is what
/// was recorded, not what a bundle rewritten since says. The root covers every entry's layer, path, size, BLAKE3,
/// ETag and version — not its URI, which [`crate::bundle::held`] derives from the path under the bundle's table root
/// and location: those are compared with the record here, as are the hold and the quarantine folder. A record
/// written before 2026-12-07 has no table root or location; for it only a signed reader (`restore --put-back`, a
/// purge given `--trust`) binds them.
///
/// # Errors
/// [`Error::Corrupt`] naming the bundle and the first difference.
pub fn bound_to_record(
    bundle_uri: &str,
    pred: &BundlePredicate,
    root: &str,
    rec: &crate::registry::CandidateRecord,
) -> Result<()> {
    let q = rec.quarantine.clone().unwrap_or_default();
    let recorded_root = q["bundles"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["uri"].as_str() == Some(bundle_uri))
        .and_then(|b| b["bundle_root"].as_str().map(str::to_owned));
    let info = pred.orphans.as_ref();
    let hold = info.and_then(|i| serde_json::to_value(i.hold).ok());
    let problem = if recorded_root.as_deref() != Some(root) || pred.bundle_root != root {
        Some(format!(
            "its inventory's root is {root} (the envelope claims {}), the registry recorded {} for candidate {}",
            pred.bundle_root,
            recorded_root.as_deref().unwrap_or("no root at this URI"),
            rec.candidate_id
        ))
    } else if info.map(|i| i.candidate_id.as_str()) != Some(rec.candidate_id.as_str()) {
        Some(format!(
            "it names candidate {}, not {}",
            info.map_or("none", |i| i.candidate_id.as_str()),
            rec.candidate_id
        ))
    } else if uuid::Uuid::parse_str(pred.table_uuid.trim()).ok() != uuid::Uuid::parse_str(rec.table_uuid.trim()).ok() {
        Some(format!("it is of table {}, not {}", pred.table_uuid, rec.table_uuid))
    } else if hold.as_ref() != Some(&q["hold"]) {
        Some(format!(
            "it holds its files by {hold:?}, the registry recorded {}",
            q["hold"]
        ))
    } else if let Some(recorded) = q["table_root"].as_str()
        && info.map(|i| i.table_root.as_str()) != Some(recorded)
    {
        Some(format!(
            "its files return under the table root {:?}, the registry recorded {recorded}",
            info.map(|i| i.table_root.as_str())
        ))
    } else if let Some(recorded) = q["table_location"].as_str()
        && pred.table_location != recorded
    {
        Some(format!(
            "it names the table location {}, the registry recorded {recorded}",
            pred.table_location
        ))
    } else if info.and_then(|i| i.quarantine_root.as_deref()) != q["quarantine_root"].as_str() {
        Some(format!(
            "its quarantine folder is {:?}, the registry recorded {}",
            info.and_then(|i| i.quarantine_root.as_deref()),
            q["quarantine_root"]
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(Error::corrupt(
            bundle_uri,
            format!(
                "this orphan bundle is not the one recorded at its quarantine: {why}; nothing is put back or deleted \
                 through it"
            ),
        )),
    }
}

/// Every quarantined orphan candidate of the table re-judged at the generation `input` describes
/// ([`crate::govern::closure::orphan_rebase`]): a held file that the table references again (a late commit of a
/// slow writer, `add_files`), or that an open writer's prefix or a legal hold now covers, is put back where it
/// was and leaves its candidate as `PROTECTED` (a candidate left with nothing becomes `PROTECTED` itself); the
/// rest of that candidate is rebased onto `current`. Returns one finding line per file put back, for the run's
/// output. A candidate whose generation cannot be read completely is left as it is (the caller decides).
///
/// Each candidate is put back and written under its run claim: `held` names the candidate and run whose claim the
/// caller holds (a quarantine's own candidate); any other is claimed here for its put-back (renewed while the files
/// go back, [`crate::ops::binding::with_heartbeat`]) and left, with a finding line, while another run holds it.
/// Every registry write checks that the claim is still held; a put-back that lost it stops (exit 2).
///
/// A `PROTECTED` candidate whose files could not all go back because other bytes sit at their paths records them
/// once (`put_back_blocked` in its quarantine record, a finding); while each of those paths holds what it held
/// then and every other file was in place, later calls do not try again and report each as a standing line
/// ([`PutBackLines::standing`]); a path that changed makes the next call try the candidate again.
///
/// # Errors
/// Registry and storage errors; [`Error::Invalid`] when another run took a claim over meanwhile.
pub async fn put_back_protected(
    ctx: &Context,
    reg: &Registry,
    input: &PlanInput,
    current: &WorldStamp,
    now: DateTime<Utc>,
    held: Option<(&str, &str)>,
) -> Result<PutBackLines> {
    let mut findings = Vec::new();
    let mut standing = Vec::new();
    for rec in reg.candidates(&input.table_uuid).await? {
        if rec.candidate["kind"].as_str() != Some("orphans") {
            continue;
        }
        let own = held.filter(|(id, _)| *id == rec.candidate_id).map(|(_, run)| run);
        let taking_out = rec.quarantine.as_ref().is_some_and(|q| q["taking_out"] == true);
        // A quarantine still taking its files out (its run alive) is left to that run: it reads the table again
        // once they are out and puts back what a late commit references; judged here meanwhile, its record would be
        // rewritten under it. One whose run died is judged like any other.
        if taking_out
            && reg
                .purge_run(&rec.candidate_id)
                .await?
                .is_some_and(|run| crate::ops::binding::claim_is_live(&run, now))
        {
            continue;
        }
        let whole = rec.state == State::Protected && rec.quarantine.is_some();
        let judged = crate::govern::closure::orphan_rebase(input, &rec.objects);
        let rebase = matches!(rec.state, State::Quarantined | State::RestoreVerified)
            && judged.unreadable.is_empty()
            && !judged.released_objects.is_empty();
        if !(taking_out || whole || rebase) {
            continue;
        }
        // Written only under the candidate's claim (the caller's, or one taken here, renewed while the files go
        // back and checked before each write), so that a put-back never writes under a purge, release or
        // quarantine of the same candidate. A candidate another run holds is left to it; the next plan tries again.
        let (rec, judged) = (&rec, &judged);
        // A candidate whose last put-back was kept from some paths by other bytes there, every other file in
        // place: while each of those paths holds what it held then, nothing is tried again (no claim, no copy, no
        // hash) and each stays a standing line; the held copies stay.
        if whole
            && !taking_out
            && let Some(lines) = blocked_standing(&ctx.storage, rec).await?
        {
            standing.extend(lines);
            continue;
        }
        let work = |run_id: String| async move {
            let mut findings = Vec::new();
            // A take-out killed between a rename aside and its removal left private names: settled first (its run
            // is dead or silent), so that a file renamed aside is back at its path before anything else.
            if taking_out {
                findings.extend(settle_candidate(&ctx.storage, rec).await?);
            }
            if whole {
                findings.extend(put_back_protected_whole(&ctx.storage, reg, rec, now, &run_id).await?);
            } else if rebase {
                findings.extend(put_back_released(ctx, reg, rec, judged, current, now, &run_id).await?);
            }
            Ok::<_, Error>(findings)
        };
        if let Some(run_id) = own {
            findings.extend(work(run_id.to_owned()).await?);
            continue;
        }
        let run = match crate::ops::binding::claim_run(reg, &rec.candidate_id, now, "put back its orphans").await? {
            Ok(run) => run,
            Err(why) => {
                findings.push(format!(
                    "ORPHAN_PUT_BACK_DEFERRED: candidate {}: {why}; the next plan or purge puts its files back",
                    rec.candidate_id
                ));
                continue;
            }
        };
        let out = crate::ops::binding::with_heartbeat(
            ctx,
            reg,
            &rec.candidate_id,
            &run.run_id,
            Box::pin(work(run.run_id.clone())),
        )
        .await;
        let released = reg.purge_release(&rec.candidate_id, &run.run_id, ctx.now()).await;
        findings.extend(out?);
        released?;
    }
    Ok(PutBackLines { findings, standing })
}

/// What [`put_back_protected`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PutBackLines {
    /// Findings of this call: files put back, files it could not put back, candidates left to another run.
    pub findings: Vec<String>,
    /// Files recorded before as kept from their paths by other bytes there, whose paths have not changed since:
    /// not tried again, still held (never purged), reported on every call.
    pub standing: Vec<String>,
}

/// The key of a candidate's quarantine record listing the files its last put-back could not put back because
/// other bytes sit at their paths ([`put_back_protected_whole`]).
const PUT_BACK_BLOCKED: &str = "put_back_blocked";

/// What sits at a path, as a HEAD answers it (`null`: nothing): two answers that are equal say the path did not
/// change between them.
fn at_path(info: Option<&crate::io::store::ObjectInfo>) -> serde_json::Value {
    info.map_or(serde_json::Value::Null, |i| {
        serde_json::json!({"size": i.size, "e_tag": i.e_tag, "version": i.version,
            "last_modified": i.last_modified.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)})
    })
}

/// The standing lines of a `PROTECTED` candidate whose last put-back recorded files kept from their paths by other
/// bytes (`put_back_blocked`) and found every other file in place, when each of those paths still holds what it
/// held then; `None` (try again) when nothing is recorded, another file was not in place, or a path changed.
async fn blocked_standing(storage: &Storage, rec: &crate::registry::CandidateRecord) -> Result<Option<Vec<String>>> {
    let Some(b) = rec.quarantine.as_ref().map(|q| &q[PUT_BACK_BLOCKED]) else {
        return Ok(None);
    };
    let files = b["files"].as_array().map(Vec::as_slice).unwrap_or_default();
    if files.is_empty() || b["others_in_place"] != true {
        return Ok(None);
    }
    // Every file that was back then must still be as it was (a record without them, written before they were
    // recorded, is tried again once).
    let Some(in_place) = b["in_place"].as_array() else {
        return Ok(None);
    };
    for f in in_place {
        let Some(uri) = f["uri"].as_str() else {
            return Ok(None);
        };
        if at_path(storage.head(uri).await?.as_ref()) != f["at_path"] {
            return Ok(None);
        }
    }
    let mut lines = Vec::new();
    for f in files {
        let Some(uri) = f["uri"].as_str() else {
            return Ok(None);
        };
        if at_path(storage.head(uri).await?.as_ref()) != f["at_path"] {
            return Ok(None);
        }
        lines.push(format!(
            "ORPHAN_PUT_BACK_STANDING: {} of candidate {}: other bytes have sat at its path since {} (unchanged: \
             size {}, ETag {}), so it was not put back; its held copy {} is kept (lakedrill never purges it; a bucket lifecycle rule on \
             its hold can still end it); not tried again \
             until that path changes (or by `quarantine release` / `restore --put-back`)",
            f["path"].as_str().unwrap_or(uri),
            rec.candidate_id,
            b["at"].as_str().unwrap_or("?"),
            f["at_path"]["size"],
            f["at_path"]["e_tag"].as_str().unwrap_or("none"),
            f["held_at"].as_str().unwrap_or("?"),
        ));
    }
    Ok(Some(lines))
}

/// [`put_back_protected`] for a `QUARANTINED` or `RESTORE_VERIFIED` orphan candidate `rec` of which `judged`
/// releases files, while run `run_id` holds its claim: those files go back and leave the candidate.
async fn put_back_released(
    ctx: &Context,
    reg: &Registry,
    rec: &crate::registry::CandidateRecord,
    judged: &crate::govern::closure::Rebase,
    current: &WorldStamp,
    now: DateTime<Utc>,
    run_id: &str,
) -> Result<Vec<String>> {
    let storage = &ctx.storage;
    let mut findings = Vec::new();
    let why: BTreeMap<&str, &str> = judged
        .released_objects
        .iter()
        .map(|(p, w)| (p.as_str(), w.as_str()))
        .collect();
    let mut files = Vec::new();
    for u in &bundle_uris(rec) {
        let (pred, held) = held_files(storage, u, rec).await?;
        let root = pred.orphans.as_ref().map(|i| i.table_root.clone()).unwrap_or_default();
        let loc = location::TableLocation::new(&pred.table_location, root, u)?;
        files.extend(held.into_iter().filter_map(|f| {
            let rel = loc.relative(&f.entry.path).ok()?;
            why.get(rel.as_str()).map(|w| ((*w).to_owned(), f))
        }));
    }
    let held: Vec<HeldFile> = files.iter().map(|(_, f)| f.clone()).collect();
    let results = put_back(storage, &held).await?;
    for ((w, _), p) in files.iter().zip(&results) {
        findings.push(format!(
            "ORPHAN_PUT_BACK: {} of quarantined candidate {} ({w}): {}{}",
            p.path,
            rec.candidate_id,
            p.action,
            if p.verified {
                ", verified in place"
            } else {
                ", NOT verified in place"
            }
        ));
    }
    storage
        .failpoint_delay(crate::io::store::DelayPoint::PutBackRebase)
        .await;
    let released: Vec<String> = judged.released_objects.iter().map(|(p, _)| p.clone()).collect();
    let reasons: Vec<String> = judged
        .released_objects
        .iter()
        .map(|(p, w)| format!("{p}: {w}"))
        .collect();
    let id = &rec.candidate_id;
    if judged.objects.is_empty() {
        if let Err(holder) = reg
            .candidate_move_claimed(
                id,
                run_id,
                State::Protected,
                &format!("put back: {}", reasons.join("; ")),
                now,
            )
            .await?
        {
            return Err(crate::ops::binding::taken_over(
                id,
                run_id,
                holder.as_ref(),
                "moving the candidate to PROTECTED",
            ));
        }
    } else {
        let rest = &judged.objects;
        let candidate = crate::govern::closure::with_inventory(&rec.candidate, &[], rest);
        let record = serde_json::json!({
            "at": now.to_rfc3339(),
            "from": rec.stamp,
            "to": current,
            "released_snapshots": [],
            "released_objects": judged.released_objects.iter()
                .map(|(p, w)| serde_json::json!({"path": p, "reason": format!("{w}: put back")})).collect::<Vec<_>>(),
            "snapshot_ids": [],
            "objects": rest.len(),
        });
        crate::ops::binding::still_claimed(reg, id, run_id, "rebasing the candidate").await?;
        // Refused when the candidate's stamp or state moved since it was read: the files are back all the same, and
        // the candidate still lists them until the next plan rebases it (a purge re-judges every file first).
        if !reg
            .candidate_rebase(id, &rec.stamp, current, &candidate, &released, &record, None, now)
            .await?
        {
            findings.push(format!(
                "ORPHAN_PUT_BACK_NOT_RECORDED: candidate {id} changed since it was read (its stamp or state moved): \
                 the files put back above are back, and the candidate still lists them until the next plan"
            ));
        }
    }
    Ok(findings)
}

/// The URIs of the bundles `rec`'s quarantine record names.
fn bundle_uris(rec: &crate::registry::CandidateRecord) -> Vec<String> {
    rec.quarantine
        .as_ref()
        .and_then(|q| q["bundles"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|b| b["uri"].as_str().map(ToOwned::to_owned))
        .collect()
}

/// [`settle_removing`] for every file of every orphan bundle of candidate `rec`.
///
/// # Errors
/// A bundle that is not the one recorded ([`held_files`]); storage errors.
pub async fn settle_candidate(storage: &Storage, rec: &crate::registry::CandidateRecord) -> Result<Vec<String>> {
    // Only a copy hold renames files aside (on the local filesystem); a marker hold has nothing to settle, and
    // reading its bundles here would make every plan depend on them.
    if rec
        .quarantine
        .as_ref()
        .is_none_or(|q| q["take_out_run"].is_null() || q["hold"] != "quarantine-copy")
    {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for u in &bundle_uris(rec) {
        // A bundle that cannot be read leaves its private names where they are, named: it must not stop every
        // plan of the table (the candidate stays `taking_out`, its purge refused, until a release settles it).
        match held_files(storage, u, rec).await {
            Ok((_, files)) => out.extend(settle_removing(storage, rec, &files).await?),
            Err(e) => out.push(format!(
                "ORPHAN_SETTLE_UNDECIDED: candidate {}: its bundle {u} could not be read ({}): files a killed \
                 take-out renamed aside (`.lakedrill-removing-…` beside their paths) are left as they are",
                rec.candidate_id,
                e.with_causes()
            )),
        }
    }
    Ok(out)
}

/// [`put_back_protected`] for an orphan candidate that is `PROTECTED` as a whole: puts back every file it still
/// holds (none went through the deleter, or the state would say so) and releases the candidate.
async fn put_back_protected_whole(
    storage: &Storage,
    reg: &Registry,
    rec: &crate::registry::CandidateRecord,
    now: DateTime<Utc>,
    run_id: &str,
) -> Result<Vec<String>> {
    let gone: Vec<String> = reg
        .object_states(&rec.candidate_id)
        .await?
        .into_iter()
        .filter(|o| matches!(o.state, State::Deleted | State::Verified | State::DeleteUnknown))
        .map(|o| o.path)
        .collect();
    let mut findings = Vec::new();
    let mut back = Vec::new();
    let mut tried = Vec::new();
    for u in &bundle_uris(rec) {
        let (pred, held) = held_files(storage, u, rec).await?;
        let root = pred.orphans.as_ref().map(|i| i.table_root.clone()).unwrap_or_default();
        let loc = location::TableLocation::new(&pred.table_location, root, u)?;
        let files: Vec<HeldFile> = held
            .into_iter()
            .filter(|f| loc.relative(&f.entry.path).is_ok_and(|rel| !gone.contains(&rel)))
            .collect();
        back.extend(put_back(storage, &files).await?);
        tried.extend(files);
    }
    // A file not back because other bytes sit at its path (a file on a filesystem, a newer version on a bucket) is
    // never overwritten: recorded once with what its path holds, so that the next plans do not try again while it
    // holds the same (`blocked_standing`). A file not back for another reason (its copy gone) is tried every time.
    let mut blocked = Vec::new();
    for (f, p) in tried.iter().zip(&back).filter(|(_, p)| !p.verified) {
        if let Some(info) = storage.head(&f.entry.uri).await? {
            blocked.push(serde_json::json!({
                "path": p.path, "uri": f.entry.uri, "held_at": f.describe(), "action": p.action,
                "at_path": at_path(Some(&info)),
            }));
        }
    }
    let others_in_place = back.iter().filter(|p| !p.verified).count() == blocked.len();
    // The files that are back, each with what its path holds: a standing record holds only while they stay as they
    // are (one removed or replaced since is put back again, review of 2026-12-07, R4-3).
    let mut in_place = Vec::new();
    if !blocked.is_empty() {
        for (f, _) in tried.iter().zip(&back).filter(|(_, p)| p.verified) {
            let info = storage.head(&f.entry.uri).await?;
            in_place.push(serde_json::json!({"uri": f.entry.uri, "at_path": at_path(info.as_ref())}));
        }
    }
    let recorded = rec.quarantine.as_ref().map(|q| &q[PUT_BACK_BLOCKED]);
    let entry = if blocked.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::json!({"at": now.to_rfc3339(), "files": blocked, "others_in_place": others_in_place,
            "in_place": in_place})
    };
    // Written when it differs from what is recorded (not on every attempt that finds the same).
    let same = match recorded {
        None => entry.is_null(),
        Some(r) if r.is_null() || entry.is_null() => r.is_null() && entry.is_null(),
        Some(r) => {
            r["files"] == entry["files"]
                && r["others_in_place"] == entry["others_in_place"]
                && r["in_place"] == entry["in_place"]
        }
    };
    if !same {
        crate::ops::binding::still_claimed(reg, &rec.candidate_id, run_id, "recording the files not put back").await?;
        // `candidate_quarantine_update` drops the take-out marks unless they are set again.
        let mut patch = serde_json::json!({ PUT_BACK_BLOCKED: entry });
        if let Some(q) = &rec.quarantine {
            for k in ["taking_out", "uncertain"] {
                if !q[k].is_null() {
                    patch[k] = q[k].clone();
                }
            }
        }
        reg.candidate_quarantine_update(
            &rec.candidate_id,
            &patch,
            "files its put-back could not put back: other bytes sit at their paths",
            now,
        )
        .await?;
    }
    for b in &blocked {
        findings.push(format!(
            "ORPHAN_PUT_BACK_BLOCKED: {} of candidate {}: other bytes sit at its path (size {}, ETag {}); it is never \
             overwritten, its held copy {} is kept (lakedrill never purges it; a bucket lifecycle rule on its hold \
             can still end it), and the next plans report it without trying \
             again until that path changes",
            b["path"].as_str().unwrap_or("?"),
            rec.candidate_id,
            b["at_path"]["size"],
            b["at_path"]["e_tag"].as_str().unwrap_or("none"),
            b["held_at"].as_str().unwrap_or("?"),
        ));
    }
    for p in back.iter().filter(|p| p.moved || !p.verified) {
        findings.push(format!(
            "ORPHAN_PUT_BACK: {} of candidate {} ({}): {}{}",
            p.path,
            rec.candidate_id,
            rec.reason,
            p.action,
            if p.verified {
                ", verified in place"
            } else {
                ", NOT verified in place"
            }
        ));
    }
    if back.iter().all(|p| p.verified) {
        let record = serde_json::json!({
            "from": State::Protected,
            "reason": format!("its orphans were put back: {}", rec.reason),
            "released_at": now,
            "mode": "orphans",
            "put_back": back,
        });
        // A concurrent run may have released it first: that is the same outcome.
        if let Err(holder) = reg
            .candidate_release_claimed(
                &rec.candidate_id,
                run_id,
                "its held orphans were put back",
                &record,
                now,
            )
            .await?
        {
            return Err(crate::ops::binding::taken_over(
                &rec.candidate_id,
                run_id,
                holder.as_ref(),
                "releasing the candidate",
            ));
        }
    }
    Ok(findings)
}

/// The paths (relative to the table location) of every file of the table's orphan candidates that is held in
/// quarantine and not yet purged (a deletion right over them is not fulfilled before the purge), and how many of
/// its orphan candidates ended without a purge (`PROTECTED` or `RELEASED`: the orphan epoch of
/// [`crate::govern::input::Protections`]).
///
/// # Errors
/// Registry errors.
pub async fn held_paths(reg: &Registry, table_uuid: &str) -> Result<(Vec<String>, u64)> {
    let mut out = Vec::new();
    let mut epoch = 0;
    for rec in reg.candidates(table_uuid).await? {
        if rec.candidate["kind"].as_str() != Some("orphans") {
            continue;
        }
        if matches!(rec.state, State::Protected | State::Released) {
            epoch += 1;
        }
        if matches!(rec.state, State::UnreferencedEligible | State::Verified) {
            continue;
        }
        let states: BTreeMap<String, State> = reg
            .object_states(&rec.candidate_id)
            .await?
            .into_iter()
            .map(|o| (o.path, o.state))
            .collect();
        out.extend(
            states
                .into_iter()
                .filter(|(_, s)| {
                    !matches!(
                        s,
                        State::Verified | State::Protected | State::Released | State::UnreferencedEligible
                    )
                })
                .map(|(p, _)| p),
        );
    }
    Ok((out, epoch))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// See: the review of 2026-12-07. The private name carried the whole file name after 57 bytes of prefix and
    /// run: a name over about 198 bytes passed the filesystem's 255, the rename failed, and every take-out of the
    /// candidate stopped at that file.
    #[test]
    fn a_long_file_name_gets_a_private_name_within_the_filesystems_limit() {
        let run = "6a9157b6-4e27-46fc-b2f9-eda9ed907e95";
        assert_eq!(
            removing_uri("file:///t/data/a.parquet", run).unwrap(),
            format!("file:///t/data/.lakedrill-removing-{run}-a.parquet")
        );
        let long = |c: char| removing_uri(&format!("file:///t/data/{}", c.to_string().repeat(250)), run).unwrap();
        let private = long('x');
        assert!(private.rsplit('/').next().unwrap().len() <= 255, "{private}");
        assert_eq!(private, long('x'), "the same file gets the same name");
        assert_ne!(private, long('y'));
        assert!(removing_uri("file:///t/data/", run).is_err());
    }
}
