//! Recovery points of a drill's items (#23 point 2): what a cold backup's RPO is measured from, and how much
//! history a quarantine bundle preserves.
//!
//! - Cold backups: the checkpoint a backup signs (`backup.checkpoint_id`, its snapshot and `declared_at`) is
//!   compared with the registry's record of it when the configuration has a `[registry]`
//!   ([`checkpoint_findings`]): a checkpoint the registry does not hold for the table is
//!   `CHECKPOINT_UNREGISTERED`, one it holds with another snapshot or recovery point is
//!   `CHECKPOINT_MISMATCH`. Either fails the item. Without a `[registry]` the signed checkpoint is taken as is
//!   (the quarterly gate, which always has the registry, compares again).
//! - Quarantine drills: a bundle declares no recovery point, so it has no RPO. Its history age is the commit
//!   time of the live table's head at drill time minus the commit time of the bundle's snapshot
//!   ([`Heads::history_age`]). The head is read from the folder the bundle's metadata file was read from when it was
//!   sealed ([`crate::table::head::live_head`], which says what that can and cannot see); it is read once per
//!   folder and drill run, so every item of one table is measured against the same head.
//!
//! What it does not do: fail a quarantine item for its history age, or for a head it cannot read (the figure
//! is then null and the reason is recorded); decide an RPO target (the quarterly gate holds the policy).

use std::collections::BTreeMap;

use crate::bundle::RestoreReport;
use crate::error::Result;
use crate::evidence::predicate::{DrillResult, RestoreStatus};
use crate::io::store::Storage;
use crate::model::findings::{Finding, FindingKind};
use crate::model::location;
use crate::registry::{Checkpoint, Registry};
use crate::table::head::{self, LiveHead};

/// The findings of a cold-backup result's signed checkpoint against `registered`, the registry's checkpoints
/// of its table. None when the result names no checkpoint (a bundle that did not verify far enough, already a
/// finding) or the registry holds it as signed.
#[must_use]
pub fn checkpoint_findings(r: &DrillResult, registered: &[Checkpoint]) -> Vec<Finding> {
    let Some(id) = &r.checkpoint_id else {
        return Vec::new();
    };
    let table = r.table_uuid.as_deref().unwrap_or("-");
    let Some(c) = registered.iter().find(|c| &c.checkpoint_id == id) else {
        return vec![Finding::new(
            FindingKind::CheckpointUnregistered,
            &r.bundle_id,
            Some(format!("checkpoint {id} of table {table} in the registry")),
            Some(format!(
                "no such checkpoint (the registry holds {} for the table)",
                registered.len()
            )),
        )];
    };
    let mut out = Vec::new();
    if r.declared_snapshot_id != Some(c.snapshot_id) {
        out.push(Finding::new(
            FindingKind::CheckpointMismatch,
            &r.bundle_id,
            Some(format!("checkpoint {id}: snapshot {} (the registry)", c.snapshot_id)),
            Some(format!(
                "snapshot {} (signed in the backup)",
                r.declared_snapshot_id.map_or_else(|| "-".into(), |s| s.to_string())
            )),
        ));
    }
    let same_time = r.declared_at.as_deref().is_some_and(|a| {
        chrono::DateTime::parse_from_rfc3339(a).is_ok_and(|t| t.timestamp_millis() == c.at.timestamp_millis())
    });
    if !same_time {
        out.push(Finding::new(
            FindingKind::CheckpointMismatch,
            &r.bundle_id,
            Some(format!(
                "checkpoint {id}: recovery point {} (the registry)",
                c.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )),
            Some(format!(
                "{} (signed in the backup)",
                r.declared_at.as_deref().unwrap_or("-")
            )),
        ));
    }
    out
}

/// Compares a cold-backup result with the registry ([`checkpoint_findings`]); any finding fails the item and
/// withdraws its RPO (the recovery point it was measured from is not the registry's).
///
/// # Errors
/// Registry errors (the comparison cannot be made: the drill cannot decide).
pub async fn compare_with_registry(reg: &Registry, r: &mut DrillResult) -> Result<()> {
    let (Some(_), Some(uuid)) = (&r.checkpoint_id, r.table_uuid.clone()) else {
        return Ok(());
    };
    let found = checkpoint_findings(r, &reg.checkpoints(&uuid).await?);
    if !found.is_empty() {
        r.findings.extend(found);
        r.status = RestoreStatus::Failed;
        r.rpo_seconds = None;
    }
    Ok(())
}

/// The history age of a bundle whose snapshot was committed at `snapshot_ms`, against the live head `head`:
/// the figure (seconds) and its basis. No figure (its basis `not measured: …`) when the two times are too far
/// apart to subtract: both come from metadata, which may be hostile.
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn history_age_of(snapshot_ms: i64, head: &LiveHead) -> (Option<f64>, String) {
    let Some(ms) = head.timestamp_ms.checked_sub(snapshot_ms) else {
        return (
            None,
            format!(
                "not measured: the live head snapshot {} (timestamp-ms {} in {}) and the bundle's snapshot \
                 (timestamp-ms {snapshot_ms}) are too far apart to subtract",
                head.snapshot_id, head.timestamp_ms, head.metadata_uri
            ),
        );
    };
    let age = ms as f64 / 1000.0;
    let at = chrono::DateTime::from_timestamp_millis(head.timestamp_ms).map_or_else(
        || format!("{} ms", head.timestamp_ms),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    let mut basis = format!(
        "live head snapshot {} committed {at} in {}",
        head.snapshot_id, head.metadata_uri
    );
    if age < 0.0 {
        basis.push_str(" (older than the bundle's snapshot: the table was rolled back behind it)");
    }
    (Some(age), basis)
}

/// The live heads read during one drill run, by metadata folder and table UUID.
#[derive(Debug, Default)]
pub struct Heads {
    seen: BTreeMap<(String, String), std::result::Result<LiveHead, String>>,
}

impl Heads {
    /// The history age (seconds, or null) and its basis for the quarantine item whose signed bundle envelope is
    /// `envelope`, if `verified`. Never an error: every reason it cannot be measured is the basis, `not
    /// measured: …`.
    pub async fn history_age(&mut self, storage: &Storage, r: &RestoreReport) -> (Option<f64>, String) {
        let not = |why: &str| (None, format!("not measured: {why}"));
        if r.status != RestoreStatus::RestoreVerified {
            return not("the item did not verify, so its snapshot's commit time is not established");
        }
        // Taken from the inventory the verification just read and checked (not read a second time).
        let (Some(table_uuid), Some(snapshot_ms)) = (&r.table_uuid, r.snapshot_timestamp_ms) else {
            return not("the verification named no table or snapshot");
        };
        let Some(dir) = r.metadata_uri.as_deref().and_then(location::parent) else {
            return not(
                "the bundle names no metadata file to find the table from (an orphan bundle holds unreferenced files, not a snapshot)",
            );
        };
        let key = (dir.trim_end_matches('/').to_owned(), table_uuid.to_ascii_lowercase());
        if !self.seen.contains_key(&key) {
            let h = head::live_head(storage, &key.0, table_uuid).await;
            self.seen.insert(key.clone(), h);
        }
        match self.seen.get(&key) {
            Some(Ok(h)) => history_age_of(snapshot_ms, h),
            Some(Err(why)) => not(why),
            None => not("the live head was not read"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cold(checkpoint: Option<&str>, snapshot: i64, at: &str) -> DrillResult {
        DrillResult {
            table_uuid: Some("6f1c2a9e-0000-4000-8000-000000000001".into()),
            snapshot_id: Some(snapshot),
            objects_verified: 1,
            bytes_verified: 1,
            rto_seconds: 1.0,
            rpo_seconds: Some(0.0),
            declared_snapshot_id: Some(snapshot),
            rto_limit_seconds: Some(14_400.0),
            checkpoint_id: checkpoint.map(str::to_owned),
            declared_at: Some(at.to_owned()),
            ..DrillResult::new("7-abc-1234", RestoreStatus::RestoreVerified)
        }
    }

    fn record(id: &str, snapshot: i64, at: &str) -> Checkpoint {
        let at = chrono::DateTime::parse_from_rfc3339(at).map(|t| t.with_timezone(&chrono::Utc));
        Checkpoint {
            checkpoint_id: id.into(),
            table_uuid: "6f1c2a9e-0000-4000-8000-000000000001".into(),
            snapshot_id: snapshot,
            at: at.unwrap_or_default(),
            created_at: chrono::DateTime::default(),
        }
    }

    #[test]
    fn a_signed_checkpoint_is_checked_against_the_registry_record() {
        let reg = [
            record("c-1", 7, "2026-01-01T00:00:00.000Z"),
            record("c-2", 9, "2026-01-02T00:00:00Z"),
        ];
        // As signed: nothing (also when the registry writes the same instant differently).
        assert!(checkpoint_findings(&cold(Some("c-2"), 9, "2026-01-02T00:00:00.000Z"), &reg).is_empty());
        assert!(checkpoint_findings(&cold(Some("c-2"), 9, "2026-01-02T01:00:00+01:00"), &reg).is_empty());
        // No checkpoint named: nothing to compare (the missing block is its own finding).
        assert!(checkpoint_findings(&cold(None, 9, "2026-01-02T00:00:00Z"), &reg).is_empty());
        // Not in the registry.
        let f = checkpoint_findings(&cold(Some("c-3"), 9, "2026-01-02T00:00:00Z"), &reg);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].kind, FindingKind::CheckpointUnregistered);
        assert!(
            f[0].expected.as_deref().unwrap().contains("checkpoint c-3"),
            "{:?}",
            f[0]
        );
        assert!(f[0].actual.as_deref().unwrap().contains("holds 2"), "{:?}", f[0]);
        // Another snapshot and another recovery point than the registry's.
        let f = checkpoint_findings(&cold(Some("c-1"), 9, "2026-01-01T01:00:00Z"), &reg);
        assert_eq!(
            f.iter().map(|x| x.kind).collect::<Vec<_>>(),
            [FindingKind::CheckpointMismatch, FindingKind::CheckpointMismatch]
        );
        assert_eq!(
            f[0].expected.as_deref(),
            Some("checkpoint c-1: snapshot 7 (the registry)")
        );
        assert_eq!(f[0].actual.as_deref(), Some("snapshot 9 (signed in the backup)"));
        assert_eq!(
            f[1].expected.as_deref(),
            Some("checkpoint c-1: recovery point 2026-01-01T00:00:00.000Z (the registry)")
        );
        // A declared time that is not RFC 3339 never matches.
        let f = checkpoint_findings(&cold(Some("c-1"), 7, "yesterday"), &reg);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].actual.as_deref(), Some("yesterday (signed in the backup)"));
    }

    #[test]
    fn history_age_is_head_commit_minus_bundle_commit() {
        let head = LiveHead {
            metadata_uri: "file:///t/metadata/00003-x.metadata.json".into(),
            snapshot_id: 42,
            timestamp_ms: 1_767_225_600_000,
        };
        let (age, basis) = history_age_of(1_767_225_600_000 - 90_500, &head);
        let age = age.unwrap();
        assert!((age - 90.5).abs() < f64::EPSILON, "{age}");
        assert_eq!(
            basis,
            "live head snapshot 42 committed 2026-01-01T00:00:00.000Z in file:///t/metadata/00003-x.metadata.json"
        );
        let (age, _) = history_age_of(head.timestamp_ms, &head);
        assert!(age.unwrap().abs() < f64::EPSILON);
        let (age, basis) = history_age_of(head.timestamp_ms + 1_000, &head);
        let age = age.unwrap();
        assert!((age + 1.0).abs() < f64::EPSILON, "{age}");
        assert!(basis.contains("rolled back"), "{basis}");
    }

    /// Both times come from metadata: ones too far apart to subtract give no figure and say why, never a panic (debug)
    /// or a wrapped age (release).
    #[test]
    fn history_age_of_times_too_far_apart_is_not_measured() {
        let head = LiveHead {
            metadata_uri: "file:///t/metadata/00003-x.metadata.json".into(),
            snapshot_id: 42,
            timestamp_ms: i64::MAX,
        };
        let (age, basis) = history_age_of(-1, &head);
        assert_eq!(age, None);
        assert!(
            basis.starts_with("not measured: ") && basis.contains("too far apart"),
            "{basis}"
        );
        let head = LiveHead {
            timestamp_ms: i64::MIN,
            ..head
        };
        let (age, basis) = history_age_of(1, &head);
        assert_eq!(age, None, "{basis}");
    }
}
