//! Rollout stages, governance decisions, quarantine extensions and rollout observations (schema version 2).
//!
//! - **Rollout stage** per table: `report-only` (the default for every table, also one the registry has never
//!   seen), `test`, `cohort:NAME`, `enabled`. Every change is a registry change with its reason, who made it,
//!   and the digest of the policy it was checked against; the full history is kept in `rollout_changes`.
//! - **Governance decisions**: every applied version is kept; a version not above the latest applied one is
//!   refused ([`RegistryError::VersionNotNewer`]) inside the same write transaction that would apply it, so two
//!   processes applying decisions at once cannot both win. Legal holds a decision turns on or off are ordinary
//!   registry holds (they bump the hold generation the deleter's compare-and-set checks), mapped to the
//!   decision's hold key in `governance_holds`.
//! - **Quarantine extensions**: the earliest time a candidate may be purged, checked inside
//!   [`Registry::candidate_accept`].
//! - **Rollout observations**: what `rollout report` saw at each run (not changes: they do not bump the
//!   registry generation).
//!
//! It does not decide what a decision means for a plan, and it does not read a policy: callers check that a
//! `test` stage has an unregulated policy before calling [`Registry::rollout_set`].

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use super::{
    Counter, EventKind, HoldScope, Registry, RegistryError, bump_table_counter, canonical_table_uuid, fmt_time,
    opt_time, parse_time, query, require_text, time,
};

/// A table's rollout stage.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum RolloutStage {
    /// Plan, quarantine and drill; never purge. The default for every table.
    ReportOnly,
    /// Deletes allowed on a table whose policy declares it holds no regulated data.
    Test,
    /// Deletes allowed; the table belongs to the named cohort.
    Cohort(String),
    /// Deletes allowed.
    Enabled,
}

impl RolloutStage {
    /// Whether `purge` may delete in this stage.
    #[must_use]
    pub fn allows_deletes(&self) -> bool {
        *self != RolloutStage::ReportOnly
    }
}

impl fmt::Display for RolloutStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RolloutStage::ReportOnly => f.write_str("report-only"),
            RolloutStage::Test => f.write_str("test"),
            RolloutStage::Cohort(n) => write!(f, "cohort:{n}"),
            RolloutStage::Enabled => f.write_str("enabled"),
        }
    }
}

impl FromStr for RolloutStage {
    type Err = RegistryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "report-only" => Ok(RolloutStage::ReportOnly),
            "test" => Ok(RolloutStage::Test),
            "enabled" => Ok(RolloutStage::Enabled),
            _ => match s.strip_prefix("cohort:") {
                Some(n)
                    if !n.is_empty()
                        && n.len() <= 64
                        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
                {
                    Ok(RolloutStage::Cohort(n.to_owned()))
                }
                Some(n) => Err(RegistryError::Invalid {
                    field: "stage",
                    reason: format!("cohort name {n:?} must be 1–64 characters of A-Z, a-z, 0-9, - and _"),
                }),
                None => Err(RegistryError::Invalid {
                    field: "stage",
                    reason: format!("{s:?}: expected report-only, test, cohort:NAME or enabled"),
                }),
            },
        }
    }
}

impl From<RolloutStage> for String {
    fn from(s: RolloutStage) -> Self {
        s.to_string()
    }
}

impl TryFrom<String> for RolloutStage {
    type Error = RegistryError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// A table's current rollout stage. A table never set is `report-only` with no `changed_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutRecord {
    /// The table's UUID.
    pub table_uuid: String,
    /// The table's name when the stage was set.
    pub table_name: Option<String>,
    /// The stage.
    pub stage: RolloutStage,
    /// Why (empty for the default).
    pub reason: String,
    /// Who set it.
    pub changed_by: Option<String>,
    /// When it was set; `None` for the default.
    pub changed_at: Option<DateTime<Utc>>,
    /// The digest of the policy the change was checked against.
    pub policy_digest: Option<String>,
}

/// One recorded stage change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutChange {
    /// The registry generation of the change.
    pub generation: i64,
    /// The table's UUID.
    pub table_uuid: String,
    /// The table's name.
    pub table_name: String,
    /// The stage before.
    pub from: RolloutStage,
    /// The stage after.
    pub to: RolloutStage,
    /// Why.
    pub reason: String,
    /// Who.
    pub changed_by: String,
    /// When.
    pub changed_at: DateTime<Utc>,
    /// The digest of the policy the change was checked against.
    pub policy_digest: Option<String>,
}

/// An applied governance decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// The decision's monotonic version.
    pub version: i64,
    /// The table it governs.
    pub table_uuid: String,
    /// Who issued it (from the decision document).
    pub issuer: String,
    /// The key id that signed it.
    pub keyid: String,
    /// SHA-256 of the signed envelope file as applied.
    pub envelope_sha256: String,
    /// The decision document (the statement's predicate).
    pub decision: serde_json::Value,
    /// When it was applied.
    pub applied_at: DateTime<Utc>,
    /// The registry generation of the application.
    pub generation: i64,
}

/// What applying a decision did to one of its legal holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GovernanceHoldChange {
    /// The decision's key for the hold.
    pub key: String,
    /// `set`, `cleared`, `unchanged` (already on with the same scope) or `absent` (off and never on).
    pub action: String,
    /// The registry hold, if there is one.
    pub hold_id: Option<String>,
    /// The scope (for holds turned on).
    pub scope: Option<HoldScope>,
}

/// One quarantine extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuarantineExtension {
    /// The registry generation of the change.
    pub generation: i64,
    /// The candidate.
    pub candidate_id: String,
    /// No purge before this time.
    pub not_before: DateTime<Utc>,
    /// Why.
    pub reason: String,
    /// When it was extended.
    pub extended_at: DateTime<Utc>,
}

/// What one `rollout report` run saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationRecord {
    /// Its id.
    pub observation_id: i64,
    /// The table.
    pub table_uuid: String,
    /// When.
    pub observed_at: DateTime<Utc>,
    /// The comparison as computed then.
    pub report: serde_json::Value,
}

/// A decision to apply; see [`Registry::decision_apply`].
#[derive(Debug, Clone)]
pub struct NewDecision<'a> {
    /// The monotonic version.
    pub version: i64,
    /// The table it governs.
    pub table_uuid: &'a str,
    /// Who issued it.
    pub issuer: &'a str,
    /// The signing key id.
    pub keyid: &'a str,
    /// SHA-256 of the envelope file.
    pub envelope_sha256: &'a str,
    /// The decision document.
    pub decision: &'a serde_json::Value,
    /// Legal holds: (key, `Some((scope, reason))` = on, `None` = off).
    pub holds: Vec<(String, Option<(HoldScope, String)>)>,
}

pub(super) async fn read_stage(conn: &mut AnyConnection, table_uuid: &str) -> Result<RolloutRecord, sqlx::Error> {
    let row = sqlx::query("SELECT * FROM rollout_stages WHERE table_uuid = $1")
        .bind(table_uuid)
        .fetch_optional(conn)
        .await?;
    let Some(row) = row else {
        return Ok(RolloutRecord {
            table_uuid: table_uuid.to_owned(),
            table_name: None,
            stage: RolloutStage::ReportOnly,
            reason: String::new(),
            changed_by: None,
            changed_at: None,
            policy_digest: None,
        });
    };
    Ok(RolloutRecord {
        table_uuid: row.try_get("table_uuid")?,
        table_name: row.try_get("table_name")?,
        stage: stage(&row, "stage")?,
        reason: row.try_get("reason")?,
        changed_by: row.try_get("changed_by")?,
        changed_at: opt_time(&row, "changed_at")?,
        policy_digest: row.try_get("policy_digest")?,
    })
}

pub(super) async fn read_not_before(
    conn: &mut AnyConnection,
    candidate_id: &str,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let t: Option<String> =
        sqlx::query_scalar("SELECT MAX(not_before) FROM quarantine_extensions WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_one(conn)
            .await?;
    t.as_deref().map(|s| parse_time("not_before", s)).transpose()
}

fn stage(row: &sqlx::any::AnyRow, column: &'static str) -> Result<RolloutStage, sqlx::Error> {
    let s: String = row.try_get(column)?;
    s.parse().map_err(|e: RegistryError| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(e),
    })
}

fn encode(e: serde_json::Error) -> sqlx::Error {
    sqlx::Error::Encode(Box::new(e))
}

impl Registry {
    /// The table's rollout stage (`report-only` if never set).
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn rollout_stage(&self, table_uuid: &str) -> Result<RolloutRecord, RegistryError> {
        const OP: &str = "rollout_stage";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let mut conn = self.pool.acquire().await.map_err(query(OP))?;
        read_stage(&mut conn, &table_uuid).await.map_err(query(OP))
    }

    /// Sets the table's rollout stage and records the change (from, to, reason, who, when, policy digest).
    /// Setting the stage a table already has is still recorded, as an operator's act with its reason.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID or an empty reason or name; [`RegistryError::Query`].
    #[allow(clippy::too_many_arguments)]
    pub async fn rollout_set(
        &self,
        table_uuid: &str,
        table_name: &str,
        stage: &RolloutStage,
        reason: &str,
        changed_by: &str,
        policy_digest: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<RolloutChange, RegistryError> {
        const OP: &str = "rollout_set";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        require_text("reason", reason)?;
        require_text("by", changed_by)?;
        let mut change = self.change(OP).await?;
        let before = read_stage(&mut change.tx, &table_uuid).await.map_err(query(OP))?;
        let c = RolloutChange {
            generation: change.generation,
            table_uuid: table_uuid.clone(),
            table_name: table_name.to_owned(),
            from: before.stage,
            to: stage.clone(),
            reason: reason.to_owned(),
            changed_by: changed_by.to_owned(),
            changed_at: now,
            policy_digest: policy_digest.map(str::to_owned),
        };
        sqlx::query(
            "INSERT INTO rollout_stages (table_uuid, table_name, stage, reason, changed_by, changed_at, policy_digest, generation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (table_uuid) DO UPDATE SET table_name = excluded.table_name, \
             stage = excluded.stage, reason = excluded.reason, changed_by = excluded.changed_by, \
             changed_at = excluded.changed_at, policy_digest = excluded.policy_digest, generation = excluded.generation",
        )
        .bind(&table_uuid)
        .bind(table_name)
        .bind(stage.to_string())
        .bind(reason)
        .bind(changed_by)
        .bind(fmt_time(now))
        .bind(policy_digest)
        .bind(change.generation)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        sqlx::query(
            "INSERT INTO rollout_changes (generation, table_uuid, table_name, from_stage, to_stage, reason, changed_by, changed_at, policy_digest) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(c.generation)
        .bind(&table_uuid)
        .bind(table_name)
        .bind(c.from.to_string())
        .bind(c.to.to_string())
        .bind(reason)
        .bind(changed_by)
        .bind(fmt_time(now))
        .bind(policy_digest)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        change
            .commit(now, EventKind::RolloutStageSet, Some(&table_uuid), &c)
            .await?;
        Ok(c)
    }

    /// Every stage change of the table, oldest first.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn rollout_history(&self, table_uuid: &str) -> Result<Vec<RolloutChange>, RegistryError> {
        const OP: &str = "rollout_history";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM rollout_changes WHERE table_uuid = $1 ORDER BY generation")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter()
            .map(|row| {
                Ok(RolloutChange {
                    generation: row.try_get("generation")?,
                    table_uuid: row.try_get("table_uuid")?,
                    table_name: row.try_get("table_name")?,
                    from: stage(row, "from_stage")?,
                    to: stage(row, "to_stage")?,
                    reason: row.try_get("reason")?,
                    changed_by: row.try_get("changed_by")?,
                    changed_at: time(row, "changed_at")?,
                    policy_digest: row.try_get("policy_digest")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(query(OP))
    }

    /// The latest applied decision version, registry-wide (`None` before the first).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn decision_latest_version(&self) -> Result<Option<i64>, RegistryError> {
        sqlx::query_scalar("SELECT MAX(version) FROM decisions")
            .fetch_one(&self.pool)
            .await
            .map_err(query("decision_latest_version"))
    }

    /// Applies a governance decision in one write transaction: refuses a version not above the latest applied
    /// one, turns its legal holds on and off (each a hold change that bumps the table's hold generation), and
    /// keeps the decision.
    ///
    /// # Errors
    /// [`RegistryError::VersionNotNewer`]; [`RegistryError::Invalid`] for a malformed table UUID;
    /// [`RegistryError::Query`].
    pub async fn decision_apply(
        &self,
        d: &NewDecision<'_>,
        now: DateTime<Utc>,
    ) -> Result<(DecisionRecord, Vec<GovernanceHoldChange>), RegistryError> {
        const OP: &str = "decision_apply";
        let table_uuid = canonical_table_uuid(d.table_uuid)?;
        let mut change = self.change(OP).await?;
        let latest: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM decisions")
            .fetch_one(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        if let Some(latest) = latest
            && d.version <= latest
        {
            return Err(RegistryError::VersionNotNewer {
                version: d.version,
                latest,
            });
        }
        let mut changes = Vec::new();
        for (key, want) in &d.holds {
            let existing: Option<String> =
                sqlx::query_scalar("SELECT hold_id FROM governance_holds WHERE table_uuid = $1 AND hold_key = $2")
                    .bind(&table_uuid)
                    .bind(key)
                    .fetch_optional(&mut *change.tx)
                    .await
                    .map_err(query(OP))?;
            let active: Option<(String, String)> = match &existing {
                Some(id) => sqlx::query("SELECT hold_id, scope FROM holds WHERE hold_id = $1 AND cleared_at IS NULL")
                    .bind(id)
                    .fetch_optional(&mut *change.tx)
                    .await
                    .map_err(query(OP))?
                    .map(|r| Ok::<_, sqlx::Error>((r.try_get("hold_id")?, r.try_get("scope")?)))
                    .transpose()
                    .map_err(query(OP))?,
                None => None,
            };
            let clear = |id: String| GovernanceHoldChange {
                key: key.clone(),
                action: "cleared".into(),
                hold_id: Some(id),
                scope: None,
            };
            match (want, active) {
                (Some((scope, _)), Some((id, s))) if *s == scope.to_string() => changes.push(GovernanceHoldChange {
                    key: key.clone(),
                    action: "unchanged".into(),
                    hold_id: Some(id),
                    scope: Some(scope.clone()),
                }),
                (Some((scope, reason)), active) => {
                    if let Some((old, _)) = active {
                        self.clear_in(&mut change, &old, &table_uuid, now).await?;
                        changes.push(clear(old));
                    }
                    let generation = bump_table_counter(&mut change.tx, &table_uuid, Counter::Hold)
                        .await
                        .map_err(query(OP))?;
                    let hold_id = uuid::Uuid::new_v4().to_string();
                    require_text("reason", reason)?;
                    sqlx::query(
                        "INSERT INTO holds (hold_id, table_uuid, scope, reason, hold_generation, set_at) VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(&hold_id)
                    .bind(&table_uuid)
                    .bind(scope.to_string())
                    .bind(format!("governance decision v{} ({key}): {reason}", d.version))
                    .bind(generation)
                    .bind(fmt_time(now))
                    .execute(&mut *change.tx)
                    .await
                    .map_err(query(OP))?;
                    sqlx::query(
                        "INSERT INTO governance_holds (table_uuid, hold_key, hold_id) VALUES ($1, $2, $3) \
                         ON CONFLICT (table_uuid, hold_key) DO UPDATE SET hold_id = excluded.hold_id",
                    )
                    .bind(&table_uuid)
                    .bind(key)
                    .bind(&hold_id)
                    .execute(&mut *change.tx)
                    .await
                    .map_err(query(OP))?;
                    changes.push(GovernanceHoldChange {
                        key: key.clone(),
                        action: "set".into(),
                        hold_id: Some(hold_id),
                        scope: Some(scope.clone()),
                    });
                }
                (None, Some((id, _))) => {
                    self.clear_in(&mut change, &id, &table_uuid, now).await?;
                    changes.push(clear(id));
                }
                (None, None) => changes.push(GovernanceHoldChange {
                    key: key.clone(),
                    action: "absent".into(),
                    hold_id: None,
                    scope: None,
                }),
            }
        }
        let decision_json = serde_json::to_string(d.decision).map_err(|e| query(OP)(encode(e)))?;
        sqlx::query(
            "INSERT INTO decisions (version, table_uuid, issuer, keyid, envelope_sha256, decision_json, applied_at, generation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(d.version)
        .bind(&table_uuid)
        .bind(d.issuer)
        .bind(d.keyid)
        .bind(d.envelope_sha256)
        .bind(decision_json)
        .bind(fmt_time(now))
        .bind(change.generation)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let rec = DecisionRecord {
            version: d.version,
            table_uuid: table_uuid.clone(),
            issuer: d.issuer.to_owned(),
            keyid: d.keyid.to_owned(),
            envelope_sha256: d.envelope_sha256.to_owned(),
            decision: d.decision.clone(),
            applied_at: now,
            generation: change.generation,
        };
        let detail = serde_json::json!({"version": d.version, "issuer": d.issuer, "keyid": d.keyid,
            "envelope_sha256": d.envelope_sha256, "holds": changes});
        change
            .commit(now, EventKind::DecisionApplied, Some(&table_uuid), &detail)
            .await?;
        Ok((rec, changes))
    }

    async fn clear_in(
        &self,
        change: &mut super::Change,
        hold_id: &str,
        table_uuid: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        let op = change.op;
        sqlx::query("UPDATE holds SET cleared_at = $1 WHERE hold_id = $2 AND cleared_at IS NULL")
            .bind(fmt_time(now))
            .bind(hold_id)
            .execute(&mut *change.tx)
            .await
            .map_err(query(op))?;
        bump_table_counter(&mut change.tx, table_uuid, Counter::Hold)
            .await
            .map_err(query(op))?;
        Ok(())
    }

    /// Every applied decision of the table, oldest version first.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn decisions(&self, table_uuid: &str) -> Result<Vec<DecisionRecord>, RegistryError> {
        const OP: &str = "decisions";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM decisions WHERE table_uuid = $1 ORDER BY version")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter()
            .map(|row| {
                let json: String = row.try_get("decision_json")?;
                Ok(DecisionRecord {
                    version: row.try_get("version")?,
                    table_uuid: row.try_get("table_uuid")?,
                    issuer: row.try_get("issuer")?,
                    keyid: row.try_get("keyid")?,
                    envelope_sha256: row.try_get("envelope_sha256")?,
                    decision: serde_json::from_str(&json).map_err(|e| sqlx::Error::ColumnDecode {
                        index: "decision_json".into(),
                        source: Box::new(e),
                    })?,
                    applied_at: time(row, "applied_at")?,
                    generation: row.try_get("generation")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(query(OP))
    }

    /// Extends a candidate's quarantine: no purge before `max(now, the current extension) + by`. Only a
    /// candidate not yet approved for deletion (`QUARANTINED` or `RESTORE_VERIFIED`) can be extended.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Invalid`] for a candidate in another state, a duration not
    /// above zero or an empty reason; [`RegistryError::Query`].
    pub async fn quarantine_extend(
        &self,
        candidate_id: &str,
        by: chrono::Duration,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<QuarantineExtension, RegistryError> {
        const OP: &str = "quarantine_extend";
        require_text("reason", reason)?;
        if by <= chrono::Duration::zero() {
            return Err(RegistryError::Invalid {
                field: "by",
                reason: "must be greater than zero".into(),
            });
        }
        let mut change = self.change(OP).await?;
        let rec = super::read_candidate(&mut change.tx, candidate_id)
            .await
            .map_err(query(OP))?
            .ok_or_else(|| RegistryError::NotFound {
                what: "candidate",
                id: candidate_id.to_owned(),
            })?;
        if !matches!(rec.state, super::State::Quarantined | super::State::RestoreVerified) {
            return Err(RegistryError::Invalid {
                field: "candidate",
                reason: format!(
                    "{candidate_id} is {}; only a QUARANTINED or RESTORE_VERIFIED candidate can be extended",
                    rec.state
                ),
            });
        }
        let current = read_not_before(&mut change.tx, candidate_id).await.map_err(query(OP))?;
        let not_before = current.map_or(now, |c| c.max(now)) + by;
        sqlx::query(
            "INSERT INTO quarantine_extensions (generation, candidate_id, not_before, reason, extended_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(change.generation)
        .bind(candidate_id)
        .bind(fmt_time(not_before))
        .bind(reason)
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let ext = QuarantineExtension {
            generation: change.generation,
            candidate_id: candidate_id.to_owned(),
            not_before,
            reason: reason.to_owned(),
            extended_at: now,
        };
        let table = rec.table_uuid.clone();
        change
            .commit(now, EventKind::QuarantineExtended, Some(&table), &ext)
            .await?;
        Ok(ext)
    }

    /// The latest "no purge before" of a candidate's extensions, if it was ever extended.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn quarantine_not_before(&self, candidate_id: &str) -> Result<Option<DateTime<Utc>>, RegistryError> {
        const OP: &str = "quarantine_not_before";
        let mut conn = self.pool.acquire().await.map_err(query(OP))?;
        read_not_before(&mut conn, candidate_id).await.map_err(query(OP))
    }

    /// Records what one `rollout report` run saw.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn observation_add(
        &self,
        table_uuid: &str,
        report: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<i64, RegistryError> {
        const OP: &str = "observation_add";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        sqlx::query_scalar(
            "INSERT INTO rollout_observations (table_uuid, observed_at, report_json) VALUES ($1, $2, $3) RETURNING observation_id",
        )
        .bind(&table_uuid)
        .bind(fmt_time(now))
        .bind(report.to_string())
        .fetch_one(&self.pool)
        .await
        .map_err(query(OP))
    }

    /// The table's observations at or after `since`, oldest first.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn observations(
        &self,
        table_uuid: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<ObservationRecord>, RegistryError> {
        const OP: &str = "observations";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query(
            "SELECT * FROM rollout_observations WHERE table_uuid = $1 AND observed_at >= $2 ORDER BY observed_at, observation_id",
        )
        .bind(&table_uuid)
        .bind(fmt_time(since))
        .fetch_all(&self.pool)
        .await
        .map_err(query(OP))?;
        rows.iter()
            .map(|row| {
                let json: String = row.try_get("report_json")?;
                Ok(ObservationRecord {
                    observation_id: row.try_get("observation_id")?,
                    table_uuid: row.try_get("table_uuid")?,
                    observed_at: time(row, "observed_at")?,
                    report: serde_json::from_str(&json).map_err(|e| sqlx::Error::ColumnDecode {
                        index: "report_json".into(),
                        source: Box::new(e),
                    })?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(query(OP))
    }
}
