//! Verifying: a bundle checked per DESIGN §5 (see [`crate::bundle`] for the format).
//!
//! [`verify()`] checks the envelope's signature, the bundle root and the subject, binds every
//! inventory URI to its path, checks the byte copies and the metadata layers against each other
//! from the bundle alone (never from the live table's metadata, which may be expired), then hashes
//! every data and delete object in storage (and, deep, reads their Parquet footers, or for a v3 Puffin
//! file of deletion vectors its footer and each vector the bundled manifests name, see
//! [`crate::table::puffin`]). Every problem
//! is a finding in the [`RestoreReport`]; an `Err` means it could not decide. It reads, never
//! writes. It may use what the `bundle` wing may use: `table` to parse the copies, `io` to read
//! objects, `evidence` to check the signature, `report` for progress.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use futures::StreamExt;

use super::format::{
    BundlePredicate, CanonicalDigests, ENVELOPE_FILE, INVENTORY_MEMBER, InventoryEntry, Layer, ObjectShard,
    PREDICATE_TYPE, RestoreReport, RestoreStatus, UriBinding, bundle_dir, get_copy, load_inventory_keeping,
    symlink_finding,
};
use super::objects::{Object, ObjectIndex};
use crate::error::{Error, Result};
use crate::evidence;
use crate::evidence::keys::TrustStore;
use crate::io::store::{Storage, Within};
use crate::model::findings::{Finding, FindingKind};
use crate::model::location::{self, TableLocation};
use crate::table;
use crate::table::lineage;
use crate::table::puffin::DeletionVectorEntry;
use crate::table::scan::{Decoder, LiveFile};
use crate::table::tree::Content;

/// How to verify a bundle.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Also read Parquet footers and compare row counts with the manifests, and check every deletion
    /// vector (v3) against its Puffin footer and manifest entry.
    pub deep: bool,
    /// Read data from a relocated copy of the table rooted here.
    pub table_root: Option<String>,
    /// Verify only this share of the objects ([`ObjectShard`]); `None`: all of them.
    pub shard: Option<ObjectShard>,
}

/// **Unverified.** The bundle root an envelope claims, read without checking its signature: the `blake3` digest
/// of its subject named for the bundle folder `bundle_id` (or of its only subject), else its predicate's
/// `bundle_root`. Only a 64-hex-digit root is taken. Recorded on a bundle that failed before its verified root
/// could be read, so that the failure counts against the root the bundle says it holds: a claim can only make
/// lakedrill refuse more (DESIGN "Stale evidence"). `None` when the envelope names none.
#[must_use]
pub(crate) fn claimed_root(envelope: &[u8], bundle_id: &str) -> Option<String> {
    let is_root = |r: &&String| r.len() == 64 && r.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let want = format!("lakedrill-bundle:{bundle_id}");
    let from_subject = evidence::peek_subjects(envelope).ok().and_then(|subjects| {
        let named = subjects.iter().find(|s| s.name == want);
        let only = (subjects.len() == 1).then(|| &subjects[0]);
        named
            .or(only)
            .and_then(|s| s.digest.get("blake3"))
            .filter(is_root)
            .cloned()
    });
    from_subject.or_else(|| {
        let st = evidence::peek_unverified(envelope)?;
        st["predicate"]["bundle_root"]
            .as_str()
            .map(str::to_owned)
            .filter(|r| is_root(&r))
    })
}

/// The most objects the verifier reserves room for up front (16M): a signed count above it is read all the same,
/// the index growing as the inventory streams.
const MAX_RESERVED_OBJECTS: usize = 1 << 24;

/// Verifies a bundle per DESIGN §5, from the bundle alone plus the data objects in storage.
///
/// # Errors
/// Only when lakedrill cannot decide (the envelope cannot be read at all, a store is unreachable);
/// every problem in the bundle or the data is a finding in the report.
#[allow(clippy::too_many_lines)]
pub async fn verify(
    storage: &Storage,
    bundle_uri: &str,
    trust: &TrustStore,
    opts: &VerifyOptions,
) -> Result<RestoreReport> {
    let dir = bundle_dir(bundle_uri)?;
    let env_uri = location::join(&dir, ENVELOPE_FILE);
    let envelope = crate::bundle::format::read_envelope(storage, &dir).await?.bytes;
    let mut report = RestoreReport {
        status: RestoreStatus::Failed,
        bundle_id: None,
        table_uuid: None,
        snapshot_id: None,
        bundle_root: None,
        claimed_bundle_root: None,
        snapshot_timestamp_ms: None,
        objects_verified: 0,
        bytes_verified: 0,
        findings: Vec::new(),
        shard: None,
        metadata_uri: None,
        envelope_sha256: Some(evidence::sha256_hex(&envelope)),
    };
    let finish = |mut r: RestoreReport| {
        r.status = if r.findings.is_empty() {
            RestoreStatus::RestoreVerified
        } else {
            RestoreStatus::Failed
        };
        r
    };
    // 1. Signature, payload type, statement.
    // The envelope is dropped once its payload is decoded, and the predicate is parsed from the signed bytes
    // straight into the typed inventory (no JSON value tree of a million entries).
    // Only keys that may seal count ([`crate::evidence::keys::Role::Seal`]; every key without a roles file).
    let sealers = trust.for_role(crate::evidence::keys::Role::Seal);
    // Kept (a reference count) until the predicate is read: a bundle that fails before then is charged to the
    // root its envelope claims ([`claimed_root`]).
    let unverified = envelope.clone();
    let claim = |r: &mut RestoreReport| r.claimed_bundle_root = claimed_root(&unverified, location::file_name(&dir));
    let verified = match evidence::verify_payload(envelope, &sealers) {
        Ok(v) => v,
        Err(f) => {
            claim(&mut report);
            report.findings.push(Finding::new(
                FindingKind::BundleSignature,
                ENVELOPE_FILE,
                Some(
                    if trust.has_roles() {
                        "a valid signature by a trusted key with the seal role"
                    } else {
                        "a valid signature by a trusted key"
                    }
                    .into(),
                ),
                Some(f.to_string()),
            ));
            return Ok(finish(report));
        }
    };
    if verified.predicate_type() != PREDICATE_TYPE {
        claim(&mut report);
        report.findings.push(Finding::new(
            FindingKind::BundleSignature,
            ENVELOPE_FILE,
            Some(PREDICATE_TYPE.into()),
            Some(verified.predicate_type().to_owned()),
        ));
        return Ok(finish(report));
    }
    let mut pred: BundlePredicate = match verified.parse_predicate() {
        Ok(p) => p,
        Err(e) => {
            claim(&mut report);
            report.findings.push(Finding::new(
                FindingKind::BundleSignature,
                ENVELOPE_FILE,
                Some("a bundle predicate".into()),
                Some(e.to_string()),
            ));
            return Ok(finish(report));
        }
    };
    let subjects = verified.subjects().to_vec();
    drop(verified);
    drop(unverified);
    report.bundle_id = Some(pred.bundle_id.clone());
    report.table_uuid = Some(pred.table_uuid.clone());
    report.snapshot_id = Some(pred.snapshot_id);
    report.bundle_root = Some(pred.bundle_root.clone());
    report.snapshot_timestamp_ms = Some(pred.snapshot_timestamp_ms);
    // The inventory: inline (older bundles) or its member, streamed and checked against the signed digests. The
    // data and delete entries' URIs are bound to their paths as they stream by and then dropped (#24).
    // A snapshot bundle's data and delete entries go into the compact `ObjectIndex` as they stream by (an orphan
    // bundle's are checked whole by `orphans::verify_held`); a share keeps only its own, and its part (count and
    // root) is computed on the way.
    let divert = pred.orphans.is_none();
    // An orphan bundle is not divided as it streams: its files all belong to share 0 (see below), and every share
    // reads its whole inventory.
    let split = opts.shard.filter(|_| divert);
    let streamed = std::sync::Arc::new(std::sync::Mutex::new(StreamedBinding {
        part: split.map(ObjectShard::streamed_part),
        // A reservation, not a bound: `objects` is the signed count, checked against the member only as it is
        // read, so an absurd one (a signer's bug) must not abort the process here. The index grows past it.
        objects: ObjectIndex::with_capacity(
            match (divert && pred.inventory_member.is_some(), opts.shard) {
                (false, _) => 0,
                (true, None) => pred.objects,
                (true, Some(s)) => {
                    let count = s.count.max(1);
                    pred.objects / count + pred.objects / count.saturating_mul(8) + 16
                }
            }
            .min(MAX_RESERVED_OBJECTS),
        ),
        ..StreamedBinding::default()
    }));
    // Only a member's lines are checked to be in canonical order before they are kept (an inline inventory is
    // sorted afterwards), so only a member is bound as it streams: the first manifest list seen is then the one
    // `UriBinding::new` finds in the sorted inventory.
    let keep = pred.inventory_member.is_some().then(|| {
        StreamedBinding::keep(
            &streamed,
            pred.backup.as_ref().map(|b| b.backup_root.clone()),
            pred.table_location.clone(),
            split,
            divert,
        )
    });
    let only = split;
    let loaded = load_inventory_keeping(storage, &dir, &mut pred, keep, !divert, only).await?;
    let mut streamed = std::mem::take(&mut *streamed.lock().map_err(|_| Error::Internal("binding lock".into()))?);
    let CanonicalDigests { root, sha256: sha } = match loaded {
        Ok(d) => d,
        Err((kind, why)) => {
            report.findings.push(Finding::new(
                kind,
                INVENTORY_MEMBER,
                Some("the inventory the predicate signs".into()),
                Some(why),
            ));
            return Ok(finish(report));
        }
    };
    // Canonical order (a member is checked to be in it; an inline inventory is put in it): objects are then found
    // by path with a binary search. The root does not depend on the order.
    if !pred
        .inventory
        .is_sorted_by(|a, b| (a.layer, &a.path) <= (b.layer, &b.path))
    {
        pred.inventory
            .sort_unstable_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    }
    if root != pred.bundle_root {
        report.findings.push(Finding::new(
            FindingKind::RootMismatch,
            ENVELOPE_FILE,
            Some(pred.bundle_root.clone()),
            Some(root.clone()),
        ));
    }
    let subject_ok = subjects.len() == 1
        && subjects[0].digest.get("sha256") == Some(&sha)
        && subjects[0].digest.get("blake3") == Some(&pred.bundle_root);
    if !subject_ok {
        report.findings.push(Finding::new(
            FindingKind::SubjectMismatch,
            ENVELOPE_FILE,
            Some(format!("sha256:{sha}")),
            Some(format!("{subjects:?}")),
        ));
    }
    report.shard = match (opts.shard, streamed.part.take()) {
        (Some(_), Some(part)) if pred.inventory_member.is_some() => Some(part.finish(pred.objects)),
        (Some(s), _) => Some(s.part(&pred.inventory)),
        (None, _) => None,
    };
    // An orphan bundle holds unreferenced files, no snapshot: each must still be where it is held.
    if let Some(info) = &pred.orphans {
        // Its files are read where they are held (versions behind delete markers at the table location it signs,
        // or write-once copies in the quarantine location): a relocated copy of the table holds neither.
        if let Some(root) = &opts.table_root {
            return Err(Error::invalid(
                &dir,
                format!(
                    "an orphan bundle is verified where its files are held: --table-root {root} (a relocated copy of \
                     a snapshot's table) does not apply to it"
                ),
            ));
        }
        // Every file belongs to share 0, which verifies the bundle whole; the other shares hold none of it (and, as
        // for a snapshot bundle, leave the findings about the bundle as a whole to share 0), so the shares of a
        // `--split objects` drill still add up to one whole verification.
        if let Some(s) = opts.shard {
            report.shard = Some(s.orphans_part(&pred.inventory));
            if s.index != 0 {
                report.findings.clear();
                return Ok(finish(report));
            }
        }
        // `--deep` adds nothing here: every held file is read whole and checked by size and BLAKE3 either way, and
        // there are no manifests or Parquet footers to compare.
        super::orphans::verify_held(storage, &pred, info, &mut report).await?;
        return Ok(finish(report));
    }
    report.metadata_uri = pred
        .inventory
        .iter()
        .find(|e| e.layer == Layer::Metadata)
        .map(|e| e.uri.clone());
    // Every entry's uri must be derived from its path (see `UriBinding`); an unbound entry is never opened.
    let binding = match UriBinding::new(&pred) {
        Ok(b) => Some(b),
        Err(reason) => {
            report.findings.push(Finding::new(
                FindingKind::UriNotDerived,
                ENVELOPE_FILE,
                Some("a manifest-list entry whose uri is its path under the table root".into()),
                Some(reason),
            ));
            None
        }
    };
    // The entries whose uri is not derived (none, unless the bundle was tampered with; every one when nothing binds).
    let mut unbound: BTreeSet<String> = BTreeSet::new();
    // Findings about one data or delete object: a share reports those of its own objects (the rest, about the
    // bundle as a whole, are share 0's).
    let mut object_findings = Vec::new();
    if let Some(b) = &binding {
        // The data and delete entries were bound as they streamed by (when the binding was known before the
        // first of them, as in every inventory in canonical order): their findings follow the metadata layers'.
        let done = streamed.bound;
        for e in &mut pred.inventory {
            let object = !e.layer.is_metadata();
            if object && (done || opts.shard.is_some_and(|s| !s.owns(e))) {
                continue;
            }
            match b.check(e) {
                Err(f) => {
                    if object {
                        object_findings.push(f);
                    } else {
                        report.findings.push(f);
                    }
                    unbound.insert(e.path.clone());
                }
                // Derived again from its path when it is opened: a million URIs are not kept (~100 B each).
                Ok(_) if object => e.uri = String::new(),
                Ok(_) => {}
            }
        }
        if done {
            object_findings.append(&mut streamed.findings);
            unbound.append(&mut streamed.unbound);
        }
    }
    // The data and delete entries not diverted as they streamed by (an inline inventory's; a member's when nothing
    // bound them) join the index; the inventory keeps the metadata layers.
    let mut objects = std::mem::take(&mut streamed.objects);
    if divert {
        let all = std::mem::take(&mut pred.inventory);
        for e in all {
            if e.layer.is_metadata() {
                pred.inventory.push(e);
            } else if opts.shard.is_none_or(|s| s.owns(&e)) {
                objects.push(&e);
            }
        }
        objects.sort();
    }
    let is_unbound = |path: &str| binding.is_none() || unbound.contains(path);
    // 2. Metadata copies against the inventory, then the layers against each other.
    let loc = match opts.table_root.as_deref() {
        Some(r) => TableLocation::new(&pred.table_location, location::canonical_uri(r)?, &env_uri).ok(),
        None => None,
    };
    // Where objects are opened: the --table-root, else the root the inventory is bound to. On the local
    // filesystem nothing whose resolved path leaves that root (resolved) is read (README "Symlinks").
    let open_root = match (opts.table_root.as_deref(), &binding) {
        (Some(r), _) => Some(location::canonical_uri(r)?),
        (None, Some(b)) => Some(b.root().to_owned()),
        (None, None) => None,
    };
    let confined = match &open_root {
        Some(r) => Some(storage.confine(r).await?),
        None => None,
    };
    let written_loc = TableLocation::new(&pred.table_location, "memory:///unused".into(), &env_uri).ok();
    let mut copies: BTreeMap<String, Bytes> = BTreeMap::new();
    for e in pred.inventory.iter().filter(|e| e.layer.is_metadata()) {
        let Some(member) = &e.copy else {
            report.findings.push(Finding::new(
                FindingKind::CopyMissing,
                &e.path,
                Some("a byte copy in the bundle".into()),
                Some("none named".into()),
            ));
            continue;
        };
        if member != &format!("copies/{}", e.blake3) {
            report.findings.push(Finding::new(
                FindingKind::CopyMissing,
                &e.path,
                Some(format!("copies/{}", e.blake3)),
                Some(member.clone()),
            ));
            continue;
        }
        match get_copy(storage, &location::join(&dir, member), e.layer, e.size).await? {
            None => report.findings.push(Finding::new(
                FindingKind::CopyMissing,
                &e.path,
                Some(member.clone()),
                Some("absent".into()),
            )),
            // Larger than the inventory signs it: it differs, and is not read whole (a copy of any size can be
            // written into a bundle folder).
            Some(Within::Over { size }) => report.findings.push(Finding::new(
                FindingKind::CopyDigestMismatch,
                &e.path,
                Some(format!("{member}: {} bytes, BLAKE3 {}", e.size, e.blake3)),
                Some(format!("{size} bytes or more; not read")),
            )),
            Some(Within::Read(f)) => {
                let d = blake3::hash(&f.bytes).to_hex().to_string();
                if d != e.blake3 || f.bytes.len() as u64 != e.size {
                    report.findings.push(Finding::new(
                        FindingKind::CopyDigestMismatch,
                        &e.path,
                        Some(e.blake3.clone()),
                        Some(d),
                    ));
                } else {
                    report.objects_verified += 1;
                    report.bytes_verified += e.size;
                    copies.insert(e.path.clone(), f.bytes);
                }
            }
        }
    }
    // An encrypted table cannot be verified (its layers cannot be read): could not decide, not a finding.
    if let Some(md) = pred.inventory.iter().find(|e| e.layer == Layer::Metadata)
        && let Some(bytes) = copies.get(&md.path)
    {
        table::refuse_encrypted(&md.path, bytes, storage.options().max_metadata_bytes)?;
    }
    let deletion_vectors = check_layers(
        &pred,
        ObjectScope {
            objects: &objects,
            shard: opts.shard,
            findings: &mut object_findings,
            deletion_vectors: DeletionVectors::new(),
        },
        opts.deep,
        &copies,
        written_loc.as_ref(),
        storage.options().max_metadata_bytes,
        &mut report.findings,
    );
    // The table's own metadata objects are not read (the copies are), but one that has become a symlink
    // leaving the table is a table that readers would read from elsewhere: a finding.
    if let (Some(c), Some(root)) = (&confined, &open_root) {
        for e in pred.inventory.iter().filter(|e| e.layer.is_metadata()) {
            let at = match &loc {
                Some(l) => l.resolve(&e.path).ok(),
                None if !is_unbound(&e.path) => Some(e.uri.clone()),
                None => None,
            };
            if let Some(at) = at.filter(|u| location::is_under(u, root))
                && let Some(target) = c.escape(&at).await?
            {
                report.findings.push(symlink_finding(&e.path, root, &target));
            }
        }
    }
    // A share other than the first reports only its own objects: the checks above of the bundle as a whole (which
    // it needed to check its objects) are shard 0's to report, so that the shares add up to one whole verification.
    if opts.shard.is_some_and(|s| s.index != 0) {
        report.findings.clear();
        report.objects_verified = 0;
        report.bytes_verified = 0;
    }
    report.findings.append(&mut object_findings);
    // 3. Data and delete objects in storage (with a shard: its share of them, the only ones the index holds).
    let concurrency = storage.options().io_concurrency.get();
    // The metadata copies were needed by the layer checks only: at 10M objects the bundled manifests are
    // hundreds of MB.
    drop(copies);
    // Which objects are opened: a first pass reports those outside the table location (never opened) and counts
    // the rest; the second walks the index again as the objects are read, instead of holding a copy of every
    // object's fields (~80 B each: 800 MB at 10M objects).
    let outside = |e: &Object<'_>| written_loc.as_ref().is_some_and(|w| w.relative(e.path).is_err());
    let opened = |e: &Object<'_>| !(outside(e) || (loc.is_none() && is_unbound(e.path)));
    let mut to_check_count = 0usize;
    for e in objects.iter() {
        if outside(&e) {
            report.findings.push(Finding::new(
                FindingKind::PathOutsideTable,
                e.path,
                Some(pred.table_location.clone()),
                Some("outside; not opened".into()),
            ));
        } else if opened(&e) {
            to_check_count += 1;
        }
    }
    let to_check = objects.iter().filter(|e| opened(e));
    // Where an object is opened, made when it is opened: under --table-root, else derived from its path as the
    // binding checked it.
    let (loc, binding) = (&loc, &binding);
    let open_at = move |e: &Object<'_>| -> Result<String> {
        match (loc, binding) {
            (Some(l), _) => l.resolve(e.path),
            (None, Some(b)) => b
                .derive_from(e.path, || e.blake3_hex())
                .ok_or_else(|| Error::Internal(format!("{}: bound but no uri derives from it", e.path))),
            (None, None) => Err(Error::Internal(format!("{}: opened without a binding", e.path))),
        }
    };
    let deep = opts.deep;
    let deletion_vectors = &deletion_vectors;
    // Counted as the result counts: the metadata layers verified above from their copies are done already, and
    // an object that does not verify is counted as failed, its bytes not among the bytes verified.
    let progress = crate::report::output::Progress::new("verify", to_check_count, storage.options().progress)
        .with_done(report.objects_verified, report.bytes_verified);
    let progress = &progress;
    let confined = &confined;
    // Inner `Err`: the object's resolved path leaves the table root (it was not read). Each result is judged as it
    // arrives and dropped: a million hashes (each with its object's URI, ETag and digest) are never held together.
    // The URI opened goes back with the result: a finding names the object actually read (under `--table-root`, a
    // cold backup's `objects/<blake3>`) beside the path the metadata writes.
    let mut results = futures::stream::iter(to_check)
        .map(|e| async move {
            let uri = match open_at(&e) {
                Ok(uri) => uri,
                Err(err) => return (e, None, Err(err)),
            };
            let res = async {
                let uri = uri.as_str();
                if let Some(c) = confined
                    && let Some(target) = c.escape(uri).await?
                {
                    return Ok(Err(target));
                }
                let h = storage.hash(uri).await?;
                // A deletion vector is checked even when its digest differs: the finding then names the
                // blob that changed. Its offsets only mean something at the sealed size.
                let rows = match deletion_vectors.get(e.path) {
                    Some(d) if deep && h.bytes_read == e.size => Some(Deep::DeletionVectors(
                        crate::table::puffin::verify_file(storage, uri, e.path, e.size, d).await?,
                    )),
                    None if deep && h.bytes_read == e.size && e.digest_is(&h.blake3) => {
                        Some(Deep::Parquet(parquet_rows(storage, uri, h.bytes_read).await?))
                    }
                    _ => None,
                };
                Ok(Ok((h, rows)))
            }
            .await;
            (e, Some(uri), res)
        })
        .buffer_unordered(concurrency);
    while let Some((e, read, res)) = results.next().await {
        let res: Result<std::result::Result<Checked, String>> = res;
        let before = report.findings.len();
        let verified_before = report.objects_verified;
        match res {
            Err(Error::NotFound { .. }) => report.findings.push(Finding::new(
                FindingKind::ObjectMissing,
                e.path,
                Some(format!("{} bytes", e.size)),
                Some("absent".into()),
            )),
            // Named with the operation and the store's own words (before, only "storage error"): an operator must
            // tell a throttled or forbidden read from a lost object.
            Err(err @ Error::Storage { .. }) => report.findings.push(Finding::new(
                FindingKind::ReadFailed,
                e.path,
                None,
                Some(err.with_causes()),
            )),
            Err(other) => return Err(other),
            Ok(Err(target)) => {
                // Not read: the finding says where the path resolves to instead.
                let root = open_root.as_deref().unwrap_or_default();
                report.findings.push(symlink_finding(e.path, root, &target));
                progress.tick_checked(e.size, true);
                continue;
            }
            Ok(Ok((h, rows))) => {
                if h.bytes_read != e.size {
                    report.findings.push(Finding::new(
                        FindingKind::SizeMismatch,
                        e.path,
                        Some(e.size.to_string()),
                        Some(h.bytes_read.to_string()),
                    ));
                } else if !e.digest_is(&h.blake3) {
                    report.findings.push(Finding::new(
                        FindingKind::DigestMismatch,
                        e.path,
                        Some(e.blake3_hex()),
                        Some(h.blake3.clone()),
                    ));
                } else {
                    report.objects_verified += 1;
                    report.bytes_verified += e.size;
                }
                match rows {
                    Some(Deep::DeletionVectors(f)) => report.findings.extend(f),
                    Some(Deep::Parquet(Ok(n))) if Some(n) != e.record_count => report.findings.push(Finding::new(
                        FindingKind::RowCountMismatch,
                        e.path,
                        e.record_count.map(|r| r.to_string()),
                        Some(n.to_string()),
                    )),
                    Some(Deep::Parquet(Err(reason))) => report.findings.push(Finding::new(
                        FindingKind::DataUnreadable,
                        e.path,
                        Some("a Parquet footer".into()),
                        Some(reason),
                    )),
                    _ => {}
                }
            }
        }
        if let Some(read) = read {
            for f in &mut report.findings[before..] {
                f.set_read_at(&read);
            }
        }
        progress.tick_checked(e.size, report.objects_verified == verified_before);
    }
    report
        .findings
        .sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
    Ok(finish(report))
}

/// A data object hashed, and what deep mode found in it.
type Checked = (crate::io::store::Hashed, Option<Deep>);

/// What deep mode reads in a data or delete object.
enum Deep {
    /// A Parquet file's row count, or why its footer could not be read.
    Parquet(std::result::Result<u64, String>),
    /// A Puffin file of deletion vectors: the findings of its vectors (none when all are sound).
    DeletionVectors(Vec<Finding>),
}

/// Reads a Parquet footer and returns the file's row count.
async fn parquet_rows(storage: &Storage, uri: &str, size: u64) -> Result<std::result::Result<u64, String>> {
    if size < 12 {
        return Ok(Err("too small to be Parquet".into()));
    }
    let tail = storage.get_range(uri, size - 8..size).await?;
    let Ok(tail8): std::result::Result<[u8; 8], _> = tail[..].try_into() else {
        return Ok(Err("short read of the footer".into()));
    };
    let len = match parquet::file::metadata::FooterTail::try_from(tail8) {
        Ok(t) => t.metadata_length() as u64,
        Err(e) => return Ok(Err(e.to_string())),
    };
    if len + 8 > size {
        return Ok(Err(format!("footer length {len} exceeds the file")));
    }
    let footer = storage.get_range(uri, size - 8 - len..size - 8).await?;
    match parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&footer) {
        Ok(md) => Ok(Ok(u64::try_from(md.file_metadata().num_rows()).unwrap_or(0))),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// The data and delete objects [`check_layers`] matches the manifests against: the index (with a shard, the
/// share's own objects), the shard, and where findings about those objects go.
struct ObjectScope<'a> {
    objects: &'a ObjectIndex,
    shard: Option<ObjectShard>,
    findings: &'a mut Vec<Finding>,
    /// The live deletion vectors found (with a shard: in the share's own Puffin files).
    deletion_vectors: DeletionVectors,
}

/// The live deletion vector entries of the bundled manifests, by Puffin file path as written.
type DeletionVectors = BTreeMap<String, Vec<DeletionVectorEntry>>;

/// Checks that the bundled metadata, manifest list and manifests name exactly the inventory (deep: and
/// that v3 row-id ranges neither overlap nor reach `next-row-id`), and returns the live deletion vector
/// entries those manifests hold (deep mode checks each against its blob).
///
/// `objects` holds the inventory's data and delete objects (with `shard`: the share's own), `pred.inventory` its
/// metadata layers. With a shard, only manifest entries of the share's own objects are matched against `objects`
/// (and only its own deletion vectors returned), so that the shares' `object_findings` add up to one whole check;
/// findings about the bundle as a whole go to `findings`.
fn check_layers(
    pred: &BundlePredicate,
    mut scope: ObjectScope<'_>,
    deep: bool,
    copies: &BTreeMap<String, Bytes>,
    loc: Option<&TableLocation>,
    max_metadata_bytes: u64,
    findings: &mut Vec<Finding>,
) -> DeletionVectors {
    check_layers_into(pred, &mut scope, deep, copies, loc, max_metadata_bytes, findings);
    let mut deletion_vectors = scope.deletion_vectors;
    for entries in deletion_vectors.values_mut() {
        entries.sort_unstable();
        entries.dedup();
    }
    deletion_vectors
}

fn check_layers_into(
    pred: &BundlePredicate,
    scope: &mut ObjectScope<'_>,
    deep: bool,
    copies: &BTreeMap<String, Bytes>,
    loc: Option<&TableLocation>,
    max_metadata_bytes: u64,
    findings: &mut Vec<Finding>,
) {
    let by_layer = |l: Layer| -> BTreeSet<&str> {
        pred.inventory
            .iter()
            .filter(|e| e.layer == l)
            .map(|e| e.path.as_str())
            .collect()
    };
    let Some(md_entry) = pred.inventory.iter().find(|e| e.layer == Layer::Metadata) else {
        findings.push(Finding::new(
            FindingKind::LayerMissing,
            "metadata.json",
            Some("the table metadata".into()),
            Some("absent from the inventory".into()),
        ));
        return;
    };
    let Some(md_bytes) = copies.get(&md_entry.path) else {
        return;
    };
    let (md, _) = match table::parse_metadata(&md_entry.path, md_bytes, max_metadata_bytes) {
        Ok(m) => m,
        Err(e) => {
            findings.push(Finding::new(
                FindingKind::CopyUnreadable,
                &md_entry.path,
                None,
                Some(format!("{e}")),
            ));
            return;
        }
    };
    let Some(snapshot) = md.snapshot_by_id(pred.snapshot_id) else {
        findings.push(Finding::new(
            FindingKind::SnapshotMissing,
            &md_entry.path,
            Some(pred.snapshot_id.to_string()),
            Some("not in the metadata".into()),
        ));
        return;
    };
    let lists = by_layer(Layer::ManifestList);
    if !lists.contains(snapshot.manifest_list()) {
        findings.push(Finding::new(
            FindingKind::LayerMissing,
            snapshot.manifest_list(),
            Some("the snapshot's manifest list".into()),
            Some("absent from the inventory".into()),
        ));
    }
    for extra in lists.iter().filter(|l| **l != snapshot.manifest_list()) {
        findings.push(Finding::new(
            FindingKind::ExtraObject,
            *extra,
            None,
            Some("a manifest list the snapshot does not name".into()),
        ));
    }
    let Some(list_bytes) = copies.get(snapshot.manifest_list()) else {
        return;
    };
    let list = match table::parse_manifest_list(snapshot.manifest_list(), list_bytes, md.format_version()) {
        Ok(l) => l,
        Err(e) => {
            findings.push(Finding::new(
                FindingKind::CopyUnreadable,
                snapshot.manifest_list(),
                None,
                Some(format!("{e}")),
            ));
            return;
        }
    };
    let named: BTreeSet<&str> = list.entries().iter().map(|m| m.manifest_path.as_str()).collect();
    let have = by_layer(Layer::Manifest);
    for m in named.difference(&have) {
        findings.push(Finding::new(
            FindingKind::LayerMissing,
            *m,
            Some("a manifest named by the manifest list".into()),
            Some("absent from the inventory".into()),
        ));
    }
    for m in have.difference(&named) {
        findings.push(Finding::new(
            FindingKind::ExtraObject,
            *m,
            None,
            Some("a manifest the manifest list does not name".into()),
        ));
    }
    // Deep mode: v3 row lineage (see `table::lineage`).
    let v3 = deep && md.format_version() == iceberg::spec::FormatVersion::V3;
    if v3 {
        let snapshots = md
            .snapshots()
            .filter_map(|s| {
                s.row_range().map(|(first, count)| lineage::RowRange {
                    owner: format!("snapshot {}", s.snapshot_id()),
                    first,
                    count,
                })
            })
            .collect();
        findings.extend(lineage::check_ranges(snapshots, md.next_row_id(), &md_entry.path));
    }
    // The inventory's data and delete objects are found by path with a binary search in each layer's run of the
    // inventory (it is in canonical order: no map of a million paths), and marked by position once named. Each live
    // manifest entry is looked up as it is decoded; what no entry names is extra, what the inventory lacks is
    // missing (a path many entries name, a Puffin file of several deletion vectors, is judged once).
    let ObjectScope {
        objects,
        shard,
        findings: object_findings,
        deletion_vectors,
    } = scope;
    let (objects, shard) = (*objects, *shard);
    let find = |path: &str| {
        [Layer::Data, Layer::PositionDeletes, Layer::EqualityDeletes]
            .into_iter()
            .find_map(|l| objects.find(l, path))
    };
    let mut named = vec![false; objects.len()];
    let mut missing: BTreeMap<String, Layer> = BTreeMap::new();
    let mut data_ranges = Vec::new();
    let mut lineage_findings = Vec::new();
    for mf in list.entries() {
        let Some(bytes) = copies.get(&mf.manifest_path) else {
            continue;
        };
        // Each live entry is judged as it is decoded (a manifest of a million entries is never a list of them): what
        // it adds is kept per manifest and applied once the manifest is read whole, since the fast decoder may give
        // up partway and the reference decoder start over.
        let seen = std::cell::RefCell::new(ManifestSeen::default());
        let each = |f: LiveFile| {
            let mut seen = seen.borrow_mut();
            if shard.is_some_and(|s| !s.owns_path(f.layer, &f.file_path)) {
                return Ok(()); // another share's object
            }
            if let Some(l) = loc
                && l.relative(&f.file_path).is_err()
            {
                // Never opened. One the inventory holds is reported as PATH_OUTSIDE_TABLE where the objects are
                // opened; one it lacks is missing from it, as any other file a manifest names.
                if find(f.file_path.as_str()).is_none() {
                    seen.missing.push((f.file_path, f.layer));
                }
                return Ok(());
            }
            if f.is_deletion_vector() {
                seen.vectors.push((f.file_path.clone(), DeletionVectorEntry::from(&f)));
            }
            match find(f.file_path.as_str()) {
                Some(at) => seen.named.push((at, f.size)),
                None => seen.missing.push((f.file_path, f.layer)),
            }
            Ok(())
        };
        let read = match v3.then_some((mf.first_row_id, &mut data_ranges, &mut lineage_findings)) {
            None => table::scan::live_files(&mf.manifest_path, bytes, Decoder::Fast, each, || {
                *seen.borrow_mut() = ManifestSeen::default();
            }),
            Some(lineage) => manifest_live_files(&mf.manifest_path, bytes, lineage)
                .and_then(|files| files.into_iter().try_for_each(each)),
        };
        if let Err(e) = read {
            findings.push(Finding::new(
                FindingKind::CopyUnreadable,
                &mf.manifest_path,
                None,
                Some(format!("{e}")),
            ));
            continue;
        }
        let seen = seen.into_inner();
        for (path, dv) in seen.vectors {
            deletion_vectors.entry(path).or_default().push(dv);
        }
        for (at, size) in seen.named {
            let e = objects.get(at);
            if !std::mem::replace(&mut named[at], true) && e.size != size {
                object_findings.push(Finding::new(
                    FindingKind::SizeMismatch,
                    e.path,
                    Some(size.to_string()),
                    Some(e.size.to_string()),
                ));
            }
        }
        missing.extend(seen.missing);
    }
    if v3 {
        findings.append(&mut lineage_findings);
        findings.extend(lineage::check_ranges(data_ranges, md.next_row_id(), &md_entry.path));
    }
    for (path, layer) in &missing {
        object_findings.push(Finding::new(
            FindingKind::LayerMissing,
            path,
            Some(format!("{layer:?} file named by a manifest")),
            Some("absent from the inventory".into()),
        ));
    }
    for e in objects.iter().zip(&named).filter(|(_, named)| !**named).map(|(e, _)| e) {
        object_findings.push(Finding::new(
            FindingKind::ExtraObject,
            e.path,
            None,
            Some("an object no live manifest entry names".into()),
        ));
    }
}

/// What one bundled manifest's live entries add, applied once the manifest is read whole ([`check_layers`]).
#[derive(Default)]
struct ManifestSeen {
    /// Deletion vectors, by the Puffin file holding them.
    vectors: Vec<(String, DeletionVectorEntry)>,
    /// Inventory positions named, with the size the entry declares.
    named: Vec<(usize, u64)>,
    /// Paths the inventory lacks.
    missing: Vec<(String, Layer)>,
}

/// The live data and delete files of a bundled manifest (v3 deep verification: decoded by the iceberg crate, for
/// row lineage), decoded lean ([`table::scan::live_files`]: a
/// manifest of a million entries is a million small records, not the iceberg crate's full entries). With
/// `lineage` (deep verification of a v3 table) the manifest is parsed by the iceberg crate instead, since row
/// lineage needs every entry, deleted ones too, whose row ranges go into the given list.
fn manifest_live_files(
    path: &str,
    bytes: &[u8],
    (first_row_id, ranges, findings): (Option<u64>, &mut Vec<lineage::RowRange>, &mut Vec<Finding>),
) -> Result<Vec<LiveFile>> {
    let manifest = table::parse_manifest(path, bytes)?;
    ranges.extend(lineage::data_file_ranges(
        first_row_id,
        manifest.entries().iter().map(|e| {
            let df = e.data_file();
            (
                df.file_path(),
                df.content_type() == iceberg::spec::DataContentType::Data,
                df.first_row_id(),
                df.record_count(),
                e.is_alive(),
            )
        }),
        findings,
    ));
    Ok(manifest
        .entries()
        .iter()
        .filter(|e| e.is_alive())
        .map(|e| {
            let df = e.data_file();
            LiveFile {
                file_path: df.file_path().to_owned(),
                layer: Content::from(df.content_type()).into(),
                size: df.file_size_in_bytes(),
                record_count: df.record_count(),
                file_format: table::scan::reference_format_name(df.file_format()),
                first_row_id: df.first_row_id(),
                referenced_data_file: df.referenced_data_file(),
                content_offset: df.content_offset(),
                content_size_in_bytes: df.content_size_in_bytes(),
            }
        })
        .collect())
}

/// The binding of data and delete entries' URIs to their paths, done as the inventory streams by so that a million
/// URIs are never held at once (#24): the metadata layers come first in canonical order, so the table root is known
/// (from the first manifest-list entry) before the first data entry. Each data or delete entry is then checked
/// ([`UriBinding::check`]) and its URI dropped, or kept with its finding. When the first data entry comes before a
/// binding could be made (an inline inventory out of order, no manifest list), nothing is bound here and `bound`
/// stays `false`: the verifier binds the whole inventory afterwards as it always did.
#[derive(Default)]
struct StreamedBinding {
    /// Whether every data and delete entry was bound as it streamed by.
    bound: bool,
    /// The data and delete entries diverted from the inventory as they streamed by (with a shard: its own).
    objects: ObjectIndex,
    /// With a shard: its part (count and root), computed over every entry streaming by.
    part: Option<crate::evidence::inventory::SharePart>,
    /// Their findings, in inventory order.
    findings: Vec<Finding>,
    /// Their paths whose URI is not derived.
    unbound: BTreeSet<String>,
}

impl StreamedBinding {
    /// The inventory reader's `keep`: it keeps every metadata entry; with `divert`, a data or delete entry bound
    /// as it streams by goes into `objects` instead (with a shard, only the share's own; the others are dropped).
    fn keep(
        state: &std::sync::Arc<std::sync::Mutex<Self>>,
        backup_root: Option<String>,
        table_location: String,
        shard: Option<ObjectShard>,
        divert: bool,
    ) -> crate::evidence::inventory::Keep {
        let state = std::sync::Arc::clone(state);
        let mut manifest_list: Option<InventoryEntry> = None;
        // `None` before the first data entry; then the binding, or `Err` when there is none.
        let mut binding: Option<std::result::Result<UriBinding, ()>> = None;
        Box::new(move |e: &mut InventoryEntry| {
            let Ok(mut s) = state.lock() else {
                return true;
            };
            let owned = match s.part.as_mut() {
                Some(part) => part.add(e),
                None => shard.is_none_or(|sh| sh.owns(e)),
            };
            if e.layer.is_metadata() {
                if binding.is_none() && manifest_list.is_none() && e.layer == Layer::ManifestList {
                    manifest_list = Some(e.clone());
                }
                return true;
            }
            if !owned {
                return false;
            }
            let b = binding.get_or_insert_with(|| {
                let made =
                    UriBinding::of(backup_root.as_deref(), &table_location, manifest_list.as_ref()).map_err(|_| ());
                if made.is_ok() {
                    s.bound = true;
                }
                made
            });
            let Ok(b) = b else {
                return true;
            };
            match b.check(e) {
                Ok(_) => e.uri = String::new(),
                Err(f) => {
                    s.findings.push(f);
                    s.unbound.insert(e.path.clone());
                }
            }
            if divert {
                s.objects.push(e);
                return false;
            }
            true
        })
    }
}
