//! The predicate of a drill report (`https://lakedrill.dev/drill-report/v1`): what a restore drill
//! signs and what the deleter, the gates, the metrics and `audit verify` read back.
//!
//! Pure data: the drill itself runs in `ops::drill`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::findings::Finding;

/// `predicateType` of a drill report.
pub const PREDICATE_TYPE: &str = "https://lakedrill.dev/drill-report/v1";

/// `predicateType` of a purge's signed inventory archive and receipts summary (written by the deleter).
pub const RECEIPTS_PREDICATE_TYPE: &str = "https://lakedrill.dev/purge-receipts/v1";

/// `RESTORE_VERIFIED` or `FAILED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RestoreStatus {
    /// Every check passed.
    RestoreVerified,
    /// At least one finding.
    Failed,
}

/// `drill` block of the report predicate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DrillInfo {
    /// Unique id of this run.
    pub id: String,
    /// Plan kind.
    pub kind: String,
    /// Plan name.
    pub plan: String,
    /// SHA-256 of the plan file's bytes.
    pub plan_digest: String,
    /// SHA-256 of the retention policy in force, when the drill is bound to one: the digest every result that
    /// names a policy names ([`common_policy_digest`]), null when none does or they name several (each result's
    /// own `policy_digest` then says which policy governed its table).
    pub policy_digest: Option<String>,
    /// SHA-256 of the running lakedrill binary.
    pub implementation_digest: String,
    /// The Object Lock retention this report was written under (the plan's `evidence_retention`): `audit verify`
    /// holds the file to it. Absent when the plan sets none, so older reports keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_retention: Option<RetentionClaim>,
    /// How many bundles the drill verified side by side (the plan's `parallel_bundles`), when more than one: each
    /// result's RTO was then measured sharing the machine with the others. Absent for one at a time, so older
    /// reports keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_bundles: Option<usize>,
}

/// A signed file's claim about its own Object Lock retention.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RetentionClaim {
    /// `governance` or `compliance`.
    pub mode: String,
    /// How long after writing the file stays locked, in seconds.
    pub period_seconds: i64,
}

/// `sample` block of the report predicate.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SampleInfo {
    /// The seed used.
    pub seed: u64,
    /// How many bundles were eligible.
    pub population: usize,
    /// How many were sampled.
    pub size: usize,
    /// Bundle ids, in sampling order.
    pub selected: Vec<String>,
    /// Quarantine drills: bundles left out of the population because a valid retirement record says their
    /// candidate was purged (`crate::evidence::retirement`). Absent when none, so older reports keep their bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retired: usize,
    /// The bundles (or backups) folder the population was listed from, as a canonical URI. Absent in reports
    /// written before lakedrill recorded it; such a report covers no table for the deleter's weekly gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The id of every bundle in the population, sorted: what the deleter's weekly gate compares with a
    /// table's quarantined bundles ("a plan whose population covers the table"). Empty in older reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub population_ids: Vec<String>,
    /// The root (`blake3` subject digest) each bundle of the population claims, in the order of
    /// `population_ids`; `None` where its envelope names none. Read unverified from every envelope (the sampled
    /// ones are verified in full, and their results' `bundle_root` must equal the root listed here). Empty in
    /// reports written before lakedrill recorded it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub population_roots: Vec<Option<String>>,
    /// The sampler by name and version ([`crate::evidence::sample::SAMPLER`]): `selected` recomputes from `seed`
    /// and `population_ids` ([`crate::evidence::sample::check`]). Absent in reports written before lakedrill
    /// recorded it, whose selection cannot be recomputed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<String>,
    /// The plan's coverage rule (`coverage_weeks`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_weeks: Option<u32>,
    /// The bundles the coverage rule put first (not drilled within `coverage_weeks`, least recently drilled
    /// first), at the head of `selected`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<String>,
    /// Bundles drilled whatever the sample (their retirement record is a finding), at the end of `selected`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced: Vec<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One sampled item's result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DrillResult {
    /// Bundle id.
    pub bundle_id: String,
    /// Table UUID.
    pub table_uuid: Option<String>,
    /// Snapshot.
    pub snapshot_id: Option<i64>,
    /// Bundle root, as the bundle's verified envelope names it (`None` when it did not verify far enough).
    pub bundle_root: Option<String>,
    /// **Unverified.** On a `FAILED` item without a `bundle_root` (the envelope's signature did not verify under
    /// the drill's trust, or its predicate could not be read): the root the envelope *claims*, read without
    /// trusting it (its bundle subject's `blake3` digest). The deleter and the weekly gate count the failure
    /// against that root as if it were verified: an unverified claim can only make lakedrill refuse more (a
    /// forged claim refuses a purge that a newer passing drill would allow again), never accept more. Absent
    /// otherwise, and in older reports, which keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_bundle_root: Option<String>,
    /// `RESTORE_VERIFIED` or `FAILED`.
    pub status: RestoreStatus,
    /// Objects verified.
    pub objects_verified: usize,
    /// Bytes verified.
    pub bytes_verified: u64,
    /// Start of restore to verified and readable.
    pub rto_seconds: f64,
    /// Cold backups: the declared checkpoint time minus the recovered snapshot's commit time (`declared_at` −
    /// commit); null when failed. Null for quarantine restores, which declare no recovery point (reports
    /// written before #23 point 2 carry a constant 0 there): see `history_age_seconds`.
    pub rpo_seconds: Option<f64>,
    /// Problems found.
    pub findings: Vec<Finding>,
    /// Cold backups: the snapshot the checkpoint declares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_snapshot_id: Option<i64>,
    /// Cold backups: the RTO limit applied (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rto_limit_seconds: Option<f64>,
    /// Cold backups: rows the manifests promise (absent with equality deletes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_promised: Option<u64>,
    /// Cold backups: rows a scan of the recovered table returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_scanned: Option<u64>,
    /// Cold backups: the registry checkpoint the backup declares (its signed `backup.checkpoint_id`). The
    /// quarterly gate matches the table's newest checkpoint against it. Absent in older reports, which keep
    /// their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Cold backups: the checkpoint's declared recovery point (RFC 3339), the minuend of `rpo_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_at: Option<String>,
    /// Quarantine drills: how much history the bundle preserves, in seconds — the commit time of the live
    /// table's head at drill time minus the commit time of the bundle's snapshot (0 when the bundle holds the
    /// head; negative when the table was rolled back behind it). Null when the head could not be read
    /// (`history_age_basis` says why); never a reason to fail the item. Absent in cold-backup results and
    /// older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_age_seconds: Option<f64>,
    /// Quarantine drills: where the live head was read (`snapshot S committed T in METADATA_URI`), or why it was
    /// not (`not measured: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_age_basis: Option<String>,
    /// SHA-256 of the retention policy bound to this item's table (the plan's `policies`, matched by the
    /// table UUID), when the plan names one for it. Absent otherwise, so older reports keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<String>,
    /// A shard of a `--split objects` drill: the share of this bundle's objects it verified (counts and
    /// findings above are that share's). Absent otherwise, and in a merged report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_shard: Option<crate::evidence::inventory::ShardPart>,
}

impl DrillResult {
    /// An item of bundle `bundle_id` with `status` and nothing else measured: no ids, roots or figures (0), no
    /// findings. Builders set what they measured over it (`DrillResult { … ..DrillResult::new(id, status) }`).
    #[must_use]
    pub fn new(bundle_id: impl Into<String>, status: RestoreStatus) -> Self {
        Self {
            bundle_id: bundle_id.into(),
            table_uuid: None,
            snapshot_id: None,
            bundle_root: None,
            claimed_bundle_root: None,
            status,
            objects_verified: 0,
            bytes_verified: 0,
            rto_seconds: 0.0,
            rpo_seconds: None,
            findings: Vec::new(),
            declared_snapshot_id: None,
            rto_limit_seconds: None,
            rows_promised: None,
            rows_scanned: None,
            checkpoint_id: None,
            declared_at: None,
            history_age_seconds: None,
            history_age_basis: None,
            policy_digest: None,
            object_shard: None,
        }
    }

    /// The root this item's verdict counts against: its verified `bundle_root`, or, for a `FAILED` item
    /// without one, the root its envelope claims (`claimed_bundle_root`, unverified). A claim never makes an
    /// item count as a pass of anything: a `RESTORE_VERIFIED` item without a verified root judges no root.
    #[must_use]
    pub fn judged_root(&self) -> Option<&str> {
        self.bundle_root.as_deref().or_else(|| {
            (self.status != RestoreStatus::RestoreVerified)
                .then_some(self.claimed_bundle_root.as_deref())
                .flatten()
        })
    }
}

/// The one policy digest that every result naming a policy names, if there is exactly one (the report-level
/// `drill.policy_digest`).
#[must_use]
pub fn common_policy_digest(results: &[DrillResult]) -> Option<String> {
    let mut digests = results.iter().filter_map(|r| r.policy_digest.as_deref());
    let first = digests.next()?;
    digests.all(|d| d == first).then(|| first.to_owned())
}

/// `summary` block.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Summary {
    /// Items verified.
    pub passed: usize,
    /// Items failed.
    pub failed: usize,
    /// `PASS` or `FAIL`.
    pub gate: String,
}

impl Summary {
    /// The totals and the gate: `PASS` only when something was verified and nothing failed.
    #[must_use]
    pub fn of(passed: usize, failed: usize) -> Self {
        let gate = if failed == 0 && passed > 0 { "PASS" } else { "FAIL" };
        Self {
            passed,
            failed,
            gate: gate.into(),
        }
    }
}

/// The whole predicate of a drill report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DrillPredicate {
    /// Which drill.
    pub drill: DrillInfo,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339).
    pub finished_at: String,
    /// Sampling.
    pub sample: SampleInfo,
    /// Per-item results.
    pub results: Vec<DrillResult>,
    /// Totals and gate.
    pub summary: Summary,
    /// SHA-256 of the previous report envelope of this plan, or null for the first.
    pub previous_report: Option<String>,
    /// Set on the report of one shard of a sharded run (`drill run --shard I/N`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Set on a merged report (`report merge`): the shard reports it was made from; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<Vec<ShardRef>>,
}

impl DrillPredicate {
    /// Whether this is the partial report of one shard of a sharded drill (`drill run --shard`, `restore
    /// --shard`): its signed `shard`, or a result that verified only a share of its bundle's objects. Such a
    /// report verified 1/N of what the drill covers; only the merge of all N (`report merge`) is evidence.
    #[must_use]
    pub fn is_shard_partial(&self) -> bool {
        self.shard.is_some() || self.results.iter().any(|r| r.object_shard.is_some())
    }

    /// A policy digest other than `current` that the report names for table `table_uuid` (in a result of
    /// that table), if any: the drill ran under other rules than the ones in force, so for them it is no
    /// evidence. `None` when every result of the table names `current` or names no policy.
    #[must_use]
    pub fn other_policy_digest(&self, table_uuid: &str, current: &str) -> Option<&str> {
        self.policy_digests(table_uuid).find(|d| *d != current)
    }

    /// The policy digest the report names for table `table_uuid`, if a result of that table names one.
    #[must_use]
    pub fn policy_digest_of(&self, table_uuid: &str) -> Option<&str> {
        self.policy_digests(table_uuid).next()
    }

    /// The policy digests the results of table `table_uuid` name, in result order.
    fn policy_digests<'a, 'u>(&'a self, table_uuid: &'u str) -> impl Iterator<Item = &'a str> + use<'a, 'u> {
        self.results
            .iter()
            .filter(move |r| {
                r.table_uuid
                    .as_deref()
                    .is_some_and(|u| u.eq_ignore_ascii_case(table_uuid))
            })
            .filter_map(|r| r.policy_digest.as_deref())
    }
}

/// One share of a sharded drill: the items at positions `p` of the overall sample with `p % count == index`.
///
/// Every shard computes the same overall sample from the same seed and population, then keeps its share,
/// so every sampled item is in exactly one shard and the shards together are the unsharded run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: usize,
    /// How many shards.
    pub count: usize,
    /// The run the shard belongs to (`--run-id`): all shards of one run name the same id, and the shard
    /// reports go to `<reports>/<plan>/shards/<run id>/`, where `report merge` can be pointed at the folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What is split: the sample's items (the default, absent from the report) or every item's objects
    /// (`--split objects`: each shard drills every sampled bundle, verifying its share of the objects).
    #[serde(default, skip_serializing_if = "ShardSplit::is_items")]
    pub split: ShardSplit,
}

/// What a sharded drill splits among its shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardSplit {
    /// The sampled items: the item at position `p` of the sample is drilled by shard `p % count`.
    #[default]
    Items,
    /// The objects of every sampled bundle ([`crate::evidence::inventory::ObjectShard`]): one snapshot too
    /// large for one machine's window is verified by all shards together.
    Objects,
}

impl ShardSplit {
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
    fn is_items(&self) -> bool {
        *self == Self::Items
    }

    /// Parses `items` or `objects` (`--split`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `--split`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "items" => Ok(Self::Items),
            "objects" => Ok(Self::Objects),
            other => Err(Error::invalid(
                "--split",
                format!("{other:?}: expected items (the sampled bundles) or objects (each bundle's objects)"),
            )),
        }
    }
}

impl Shard {
    /// With `--split objects`: the share of every bundle's objects this shard verifies.
    #[must_use]
    pub fn objects(&self) -> Option<crate::evidence::inventory::ObjectShard> {
        (self.split == ShardSplit::Objects).then_some(crate::evidence::inventory::ObjectShard {
            index: self.index,
            count: self.count,
        })
    }

    /// Parses `I/N` (0-based `I < N`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `--shard` and the rule.
    pub fn parse(s: &str) -> Result<Self> {
        let crate::evidence::inventory::ObjectShard { index, count } =
            crate::evidence::inventory::ObjectShard::parse(s)?;
        Ok(Self {
            index,
            count,
            run_id: None,
            split: ShardSplit::Items,
        })
    }

    /// Sets the run id, which must be `[A-Za-z0-9._-]+` and not start with `.` (it names a folder).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming `--run-id`.
    pub fn with_run_id(mut self, run_id: Option<&str>) -> Result<Self> {
        if let Some(id) = run_id {
            if id.is_empty()
                || id.starts_with('.')
                || !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return Err(Error::invalid(
                    "--run-id",
                    format!("{id:?} must be [A-Za-z0-9._-]+ and not start with '.' (it names a folder)"),
                ));
            }
            self.run_id = Some(id.to_owned());
        }
        Ok(self)
    }

    /// Whether the item at `position` of the overall sample belongs to this shard (with `--split objects`,
    /// every item does).
    #[must_use]
    pub fn holds(&self, position: usize) -> bool {
        self.split == ShardSplit::Objects || position % self.count == self.index
    }
}

/// One shard report a merged report was made from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShardRef {
    /// The shard's index.
    pub index: usize,
    /// The number of shards.
    pub count: usize,
    /// The shard report's file name.
    pub report: String,
    /// SHA-256 of the shard report envelope's bytes.
    pub sha256: String,
    /// The shard run's drill id.
    pub drill_id: String,
    /// The key ids whose signatures on the shard report verified when it was merged (under the merge's `--trust`,
    /// its `drill` keys). `purge` refuses a merged report one of whose shards its own `--key` signed, and one
    /// merged before this was recorded (absent), which cannot show who signed its shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyids: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(root: Option<&str>, claimed: Option<&str>, status: RestoreStatus) -> DrillResult {
        DrillResult {
            bundle_root: root.map(str::to_owned),
            claimed_bundle_root: claimed.map(str::to_owned),
            ..DrillResult::new("b", status)
        }
    }

    /// A claimed root judges only a failure: never a pass, and never over a verified root.
    #[test]
    fn a_claimed_root_is_judged_only_on_a_failed_item_without_a_verified_root() {
        use RestoreStatus::{Failed, RestoreVerified};
        assert_eq!(item(None, Some("c"), Failed).judged_root(), Some("c"));
        assert_eq!(item(None, Some("c"), RestoreVerified).judged_root(), None);
        assert_eq!(item(Some("r"), Some("c"), Failed).judged_root(), Some("r"));
        assert_eq!(item(Some("r"), None, RestoreVerified).judged_root(), Some("r"));
        assert_eq!(item(None, None, Failed).judged_root(), None);
        // Absent from the JSON when unset (older reports keep their bytes), read back when set.
        let json = serde_json::to_value(item(Some("r"), None, RestoreVerified)).unwrap_or_default();
        assert!(json.get("claimed_bundle_root").is_none(), "{json}");
        let json = serde_json::to_value(item(None, Some("c"), Failed)).unwrap_or_default();
        assert_eq!(json["claimed_bundle_root"], "c");
    }
}
