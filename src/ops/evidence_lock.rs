//! Evidence that cannot be rewritten: signed files written under S3 Object Lock (DESIGN, "Evidence under
//! Object Lock").
//!
//! When a policy (or a drill plan) sets `evidenceRetention`, every signed report, inventory archive, purge
//! summary and retirement record lakedrill writes for it goes to S3 with that Object Lock mode and a
//! retain-until date of "now + period", in the same write-once request ([`put`]). Before any work, [`preflight`]
//! refuses a location that cannot hold locked files (not S3, or a bucket without Object Lock), so a run never
//! discovers halfway that its evidence would be unprotected. [`status`] reads a file's lock back for
//! `audit verify`.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::evidence::predicate::RetentionClaim;
use crate::govern::policy::{EvidenceRetention, LockMode};
use crate::io::store::Storage;

/// The claim a signed report makes about its own retention (what `audit verify` holds the file to).
#[must_use]
pub fn claim(r: EvidenceRetention) -> RetentionClaim {
    RetentionClaim {
        mode: match r.mode {
            LockMode::Governance => "governance".into(),
            LockMode::Compliance => "compliance".into(),
        },
        period_seconds: r.period.num_seconds(),
    }
}

/// The retention a signed report claims (`report merge` writes the merged report under the shards' claim).
///
/// # Errors
/// [`Error::Invalid`] for a claim lakedrill would not write (unknown mode, a period not above zero).
pub fn from_claim(c: &RetentionClaim) -> Result<EvidenceRetention> {
    let mode = LockMode::parse(&c.mode)
        .ok_or_else(|| Error::invalid("evidence_retention.mode", format!("unknown mode {:?}", c.mode)))?;
    if c.period_seconds <= 0 {
        return Err(Error::invalid(
            "evidence_retention.period_seconds",
            "must be greater than zero",
        ));
    }
    Ok(EvidenceRetention {
        mode,
        period: chrono::Duration::seconds(c.period_seconds),
    })
}

/// Refuses a location that cannot hold evidence under `retention`: it must be an `s3://` URI on a bucket with
/// Object Lock enabled. Without a retention anything goes.
///
/// # Errors
/// [`Error::Invalid`] naming the location and the reason; storage errors reading the bucket's configuration.
pub async fn preflight(storage: &Storage, location: &str, retention: Option<EvidenceRetention>) -> Result<()> {
    let Some(r) = retention else {
        return Ok(());
    };
    let what = format!(
        "evidenceRetention ({} for {} days) asks for Object Lock",
        r.mode.s3_value(),
        r.period.num_days()
    );
    if !location.starts_with("s3://") {
        return Err(Error::invalid(
            location,
            format!("{what}, which only an s3:// location on a bucket with Object Lock has; this one is not on S3"),
        ));
    }
    if !storage.s3_bucket_lock_enabled(location).await? {
        return Err(Error::invalid(
            location,
            format!("{what}, but the bucket has no Object Lock configuration (create it with Object Lock enabled)"),
        ));
    }
    Ok(())
}

/// Writes one evidence file once: under Object Lock (`retention`, retained until `now + period`) when given,
/// a plain write-once object otherwise.
///
/// # Errors
/// [`Error::AlreadyExists`] when the file exists; storage errors (a refused lock among them) naming it.
pub async fn put(
    storage: &Storage,
    uri: &str,
    bytes: Bytes,
    retention: Option<EvidenceRetention>,
    now: DateTime<Utc>,
) -> Result<crate::io::store::ObjectInfo> {
    match retention {
        None => storage.put_new(uri, bytes).await,
        Some(r) if uri.starts_with("s3://") => {
            storage
                .s3_put_locked(uri, bytes, r.mode.s3_value(), now + r.period)
                .await
        }
        Some(_) => Err(Error::invalid(
            uri,
            "evidenceRetention asks for Object Lock, which only an s3:// location has",
        )),
    }
}

/// A file's lock as `audit verify` reports it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FileLock {
    /// The file.
    pub file: String,
    /// `GOVERNANCE`, `COMPLIANCE`, or `None` when not locked.
    pub mode: Option<String>,
    /// Retain-until date as the provider reports it.
    pub retain_until: Option<String>,
    /// Whether the file's bucket has Object Lock enabled.
    pub bucket_lock_enabled: bool,
}

/// The lock of an `s3://` file (`None` off S3).
///
/// # Errors
/// Storage errors reading the object or its bucket's configuration.
pub async fn status(storage: &Storage, uri: &str) -> Result<Option<FileLock>> {
    if !uri.starts_with("s3://") {
        return Ok(None);
    }
    let lock = storage.s3_object_lock(uri).await?;
    Ok(Some(FileLock {
        file: uri.to_owned(),
        mode: lock.as_ref().and_then(|l| l.mode.clone()),
        retain_until: lock.and_then(|l| l.retain_until),
        bucket_lock_enabled: storage.s3_bucket_lock_enabled(uri).await?,
    }))
}

/// How far the store's clock may be ahead of the writer's when a file's write time is read from the store
/// ([`written_at`]): lakedrill computes a retain-until from its own clock, the store dates the object by its own.
pub const STORE_CLOCK_SLACK_MINUTES: i64 = 5;

/// When a file was written, for the check of its retain-until: the time its signed statement names (`signed`, the
/// time lakedrill computed the retain-until from), or, for a file that names none (an inventory archive written
/// before archives carried `at`) or an unreadable one, the store's `LastModified` less
/// [`STORE_CLOCK_SLACK_MINUTES`] (so a retention shortened by less than that goes unnoticed for such a file).
/// `None` when neither is known.
#[must_use]
pub fn written_at(signed: Option<&str>, last_modified: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    signed
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
        .or_else(|| last_modified.map(|t| t - chrono::Duration::minutes(STORE_CLOCK_SLACK_MINUTES)))
}

/// Why `lock` does not protect a file that should be locked, if it does not: on a bucket with Object Lock every
/// evidence file must carry a retention; a file whose signed statement claims `claim` must carry that mode until
/// at least `written_at + period` (when the write time is not known the retention cannot be checked, which is a
/// shortfall too: it is not taken as kept).
#[must_use]
pub fn shortfall(lock: &FileLock, claim: Option<&RetentionClaim>, written_at: Option<DateTime<Utc>>) -> Option<String> {
    let until = lock
        .retain_until
        .as_deref()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc));
    match (claim, &lock.mode) {
        (Some(c), None) => Some(format!(
            "the report claims evidenceRetention {} for {} s, but the file carries no Object Lock retention",
            c.mode, c.period_seconds
        )),
        (Some(c), Some(mode)) if !mode.eq_ignore_ascii_case(&c.mode) => Some(format!(
            "the report claims Object Lock mode {}, the file carries {mode}",
            c.mode
        )),
        (Some(c), Some(_)) => {
            let want = written_at.map(|w| w + chrono::Duration::seconds(c.period_seconds));
            match (want, until) {
                // One second of slack: the provider keeps whole seconds.
                (Some(w), Some(u)) if u + chrono::Duration::seconds(1) < w => Some(format!(
                    "retained until {u}, before the {w} its claimed evidenceRetention needs"
                )),
                (Some(_), None) => Some("the file's retain-until date is missing or unreadable".to_owned()),
                (None, Some(u)) => Some(format!(
                    "retained until {u}, but the time the file was written is not known (its statement names none \
                     and the store gave none): its claimed evidenceRetention of {} s cannot be checked",
                    c.period_seconds
                )),
                (None, None) => Some("the file's retain-until date is missing or unreadable".to_owned()),
                _ => None,
            }
        }
        (None, None) if lock.bucket_lock_enabled => Some(
            "the bucket has Object Lock enabled but this file carries no retention: anyone with write access can \
             delete or replace it"
                .to_owned(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(mode: Option<&str>, until: Option<&str>, bucket: bool) -> FileLock {
        FileLock {
            file: "s3://b/r.dsse.json".into(),
            mode: mode.map(Into::into),
            retain_until: until.map(Into::into),
            bucket_lock_enabled: bucket,
        }
    }

    #[test]
    fn a_file_falls_short_of_its_claim_or_its_bucket() {
        let claim = RetentionClaim {
            mode: "governance".into(),
            period_seconds: 86_400,
        };
        let written = DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let ok = lock(Some("GOVERNANCE"), Some("2026-12-02T00:00:00Z"), true);
        assert_eq!(shortfall(&ok, Some(&claim), Some(written)), None);
        let short = lock(Some("GOVERNANCE"), Some("2026-12-01T12:00:00Z"), true);
        assert!(
            shortfall(&short, Some(&claim), Some(written))
                .unwrap()
                .contains("before")
        );
        let other_mode = lock(Some("COMPLIANCE"), Some("2027-01-01T00:00:00Z"), true);
        assert!(
            shortfall(&other_mode, Some(&claim), Some(written))
                .unwrap()
                .contains("mode")
        );
        assert!(shortfall(&lock(None, None, true), Some(&claim), Some(written)).is_some());
        // No claim: a locked bucket still needs every file locked; an unlocked bucket asks nothing.
        assert!(
            shortfall(&lock(None, None, true), None, None)
                .unwrap()
                .contains("Object Lock enabled")
        );
        assert_eq!(shortfall(&lock(None, None, false), None, None), None);
        assert_eq!(shortfall(&ok, None, None), None);
    }

    #[test]
    fn a_claim_whose_write_time_is_unknown_is_a_shortfall_and_the_store_time_is_the_fallback() {
        let claim = RetentionClaim {
            mode: "governance".into(),
            period_seconds: 86_400,
        };
        let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let short = lock(Some("GOVERNANCE"), Some("2026-12-01T12:00:00Z"), true);
        // Neither signed nor given by the store: not passed.
        assert!(
            shortfall(&short, Some(&claim), None)
                .unwrap()
                .contains("the time the file was written is not known")
        );
        // An archive that names no time (written before archives carried `at`): the store's LastModified decides,
        // less the clock slack.
        let written = written_at(None, Some(t("2026-12-01T00:00:00Z")));
        assert_eq!(written, Some(t("2026-11-30T23:55:00Z")));
        assert!(shortfall(&short, Some(&claim), written).unwrap().contains("before"));
        let kept = lock(Some("GOVERNANCE"), Some("2026-12-01T23:56:00Z"), true);
        assert_eq!(shortfall(&kept, Some(&claim), written), None);
        // A signed time is preferred to the store's; an unreadable one falls back to it.
        assert_eq!(
            written_at(Some("2026-12-02T00:00:00Z"), Some(t("2026-12-01T00:00:00Z"))),
            Some(t("2026-12-02T00:00:00Z"))
        );
        assert_eq!(
            written_at(Some("yesterday"), Some(t("2026-12-01T00:05:00Z"))),
            Some(t("2026-12-01T00:00:00Z"))
        );
        assert_eq!(written_at(None, None), None);
    }
}
