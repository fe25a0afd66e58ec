//! Orphan bundles (kind `orphans`): checking that every quarantined unreferenced file can still come back.
//!
//! An orphan bundle has the snapshot bundle's envelope, root and subject (checked by [`crate::bundle::verify()`]
//! first); its predicate carries [`OrphanInfo`] instead of a snapshot. [`verify_held`] checks every file where
//! it is held — the version behind its delete marker on a versioned bucket, or its write-once copy in the
//! policy's quarantine location — with the recorded size and BLAKE3. Every problem is a finding naming the
//! file; an `Err` means it could not decide. It reads, never writes.

use futures::StreamExt;

use super::format::{ENVELOPE_FILE, RestoreReport};
use crate::error::Result;
use crate::evidence::inventory::{BundlePredicate, InventoryEntry, OrphanHold, OrphanInfo};
use crate::io::store::Storage;
use crate::model::findings::{Finding, FindingKind};
use crate::model::location::TableLocation;

/// Where each file of an orphan bundle must be held, or the finding that its entry is not bound to the table
/// root the bundle names (such an entry is never opened).
///
/// # Errors
/// A finding for the bundle itself when its table location or root cannot be read.
pub fn held(pred: &BundlePredicate, info: &OrphanInfo) -> std::result::Result<Vec<HeldFile>, Vec<Finding>> {
    let loc = TableLocation::new(&pred.table_location, info.table_root.clone(), ENVELOPE_FILE).map_err(|e| {
        vec![Finding::new(
            FindingKind::UriNotDerived,
            ENVELOPE_FILE,
            Some("a table location and root that bind the inventory".into()),
            Some(e.to_string()),
        )]
    })?;
    let mut out = Vec::new();
    let mut findings = Vec::new();
    for e in &pred.inventory {
        let expected = loc.resolve(&e.path).ok();
        if expected.as_deref() != Some(e.uri.as_str()) {
            findings.push(Finding::new(
                FindingKind::UriNotDerived,
                &e.path,
                Some(format!(
                    "{} (its path under the table root {})",
                    expected.as_deref().unwrap_or("a path under the table location"),
                    info.table_root
                )),
                Some(format!("{}: not opened", e.uri)),
            ));
            continue;
        }
        if info.hold == OrphanHold::DeleteMarker && e.version.is_none() {
            findings.push(Finding::new(
                FindingKind::ObjectMissing,
                &e.path,
                Some("a version id behind the delete marker".into()),
                Some("none recorded: the file cannot be brought back".into()),
            ));
            continue;
        }
        let (uri, version) = info.held_at(e);
        out.push(HeldFile {
            entry: e.clone(),
            uri,
            version,
        });
    }
    if findings.is_empty() { Ok(out) } else { Err(findings) }
}

/// One file of an orphan bundle and where its bytes are held.
#[derive(Debug, Clone)]
pub struct HeldFile {
    /// The inventory entry (path, URI at the table location, size, BLAKE3, ETag, version).
    pub entry: InventoryEntry,
    /// Where the bytes are: the table URI (behind a delete marker) or the quarantine copy.
    pub uri: String,
    /// The version to read (delete-marker hold), `None` for a copy.
    pub version: Option<String>,
}

impl HeldFile {
    /// Where the bytes are held, for a finding's subject.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.version {
            Some(v) => format!("{} version {v}", self.uri),
            None => self.uri.clone(),
        }
    }
}

/// Hashes one held file; `None` when its bytes are the recorded ones, else the finding naming it.
///
/// # Errors
/// A store that cannot be read for another reason than a missing object.
pub async fn check_held(storage: &Storage, f: &HeldFile) -> Result<Option<Finding>> {
    let e = &f.entry;
    let h = match storage.hash_version(&f.uri, f.version.as_deref()).await {
        Ok(h) => h,
        Err(crate::error::Error::NotFound { .. }) => {
            return Ok(Some(Finding::new(
                FindingKind::ObjectMissing,
                &e.path,
                Some(format!("held at {} ({} bytes)", f.describe(), e.size)),
                Some("absent: the orphan can no longer be brought back".into()),
            )));
        }
        Err(err) => return Err(err),
    };
    if h.bytes_read != e.size {
        return Ok(Some(Finding::new(
            FindingKind::SizeMismatch,
            &e.path,
            Some(format!("{} bytes at {}", e.size, f.describe())),
            Some(format!("{} bytes", h.bytes_read)),
        )));
    }
    if h.blake3 != e.blake3 {
        return Ok(Some(Finding::new(
            FindingKind::DigestMismatch,
            &e.path,
            Some(format!("BLAKE3 {} at {}", e.blake3, f.describe())),
            Some(h.blake3),
        )));
    }
    Ok(None)
}

/// Checks every file of an orphan bundle where it is held (in parallel, bounded by the store's request
/// limit), adding findings and the verified counts to `report`.
///
/// # Errors
/// A store that cannot be read.
pub async fn verify_held(
    storage: &Storage,
    pred: &BundlePredicate,
    info: &OrphanInfo,
    report: &mut RestoreReport,
) -> Result<()> {
    let files = match held(pred, info) {
        Ok(f) => f,
        Err(findings) => {
            report.findings.extend(findings);
            return Ok(());
        }
    };
    let concurrency = storage.options().io_concurrency.get();
    let checked: Vec<Result<Option<Finding>>> = futures::stream::iter(files.iter().map(|f| check_held(storage, f)))
        .buffered(concurrency)
        .collect()
        .await;
    for (f, c) in files.iter().zip(checked) {
        match c? {
            Some(finding) => report.findings.push(finding),
            None => {
                report.objects_verified += 1;
                report.bytes_verified += f.entry.size;
            }
        }
    }
    Ok(())
}
