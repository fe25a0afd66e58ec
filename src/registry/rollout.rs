//! Rollout stages, governance decisions and rollout observations (schema version 2).
//!
//! - **Rollout stage** per table: `report-only` (the default for every table, also one the registry has never
//!   seen), `test`, `cohort:NAME`, `enabled`. Every change is a registry change with its reason, who made it,
//!   and the digest of the policy it was checked against; the full history is kept in `rollout_changes`.
//! - **Governance decisions**: every applied version is kept; a version not above the latest applied one is
//!   refused ([`RegistryError::VersionNotNewer`]) inside the same write transaction that would apply it, so two
//!   processes applying decisions at once cannot both win. Legal holds a decision turns on or off are ordinary
//!   registry holds (they bump the hold generation the deleter's compare-and-set checks), mapped to the
//!   decision's hold key in `governance_holds`.
//! - **Rollout observations**: what `rollout report` saw at each run (not changes: they do not bump the
//!   registry generation).
//!
//! It does not decide what a decision means for a plan, and it does not read a policy: callers check that a
//! `test` stage has an unregulated policy before calling [`Registry::rollout_set`]. Quarantine extensions,
//! also added in schema version 2, are a candidate's record and live in `candidates`. It uses the face
//! (`super`) and `protections` (a decision's holds are ordinary holds).

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use super::base::{
    EventKind, Registry, RegistryError, canonical_table_uuid, decode, fmt_time, json, opt_time, query, require_text,
    time,
};
use super::protections::{Counter, Hold, bump_table_counter, insert_hold};
use crate::model::object::HoldScope;

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
    /// Made with `--force` over the rollout rules ([`rollout_refusals`]); `overrode` says which.
    #[serde(default)]
    pub forced: bool,
    /// The rules a forced change overrode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrode: Vec<String>,
}

/// The rollout rules `rollout set` enforces (#23 point 6).
#[derive(Debug, Clone)]
pub struct RolloutRules {
    /// How long a table must have been observed in `report-only` (`rollout report`) before `test`: at least
    /// [`MIN_REPORT_ONLY`].
    pub min_report_only: chrono::Duration,
    /// The operator's override: the change is made and recorded as forced, with the rules it overrode.
    pub force: bool,
}

/// The least report-only observation period before `test` ([`crate::config::MIN_REPORT_ONLY_DAYS`]).
pub const MIN_REPORT_ONLY: chrono::Duration = chrono::Duration::days(crate::config::MIN_REPORT_ONLY_DAYS as i64);

/// What the rollout rules look at, read in the change's own transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutFacts {
    /// The table's first `rollout report` observation since it last entered `report-only`.
    pub first_observation: Option<DateTime<Utc>>,
    /// Other tables in `test` now.
    pub others_in_test: Vec<String>,
    /// Candidates of the table purged to `VERIFIED` since it last entered `test`.
    pub verified_in_test: i64,
    /// Objects of the table's candidates in `DELETE_UNKNOWN`, whatever their candidate's state.
    pub unknowns: i64,
}

fn rank(s: &RolloutStage) -> u8 {
    match s {
        RolloutStage::ReportOnly => 0,
        RolloutStage::Test => 1,
        RolloutStage::Cohort(_) => 2,
        RolloutStage::Enabled => 3,
    }
}

/// Why moving a table from `from` to `to` breaks the rollout rules (pure); empty when it does not. Moving back
/// (towards `report-only`) is allowed, except into `test` while another table is there: at most one table is in
/// `test`, whichever way it came. Forward, one step at a time: `report-only` → `test` after
/// `min_report_only` of observations and while no other table is in `test`; `test` → `cohort:NAME` after a clean
/// test period (a purge `VERIFIED` since the table entered `test`, no `DELETE_UNKNOWN`); `cohort:NAME` →
/// `enabled`.
///
/// A change that skips stages names the skip and every rule of the stages it passes over that is not met (the
/// README promises every rule broken, and a forced change records them all in `overrode`): `report-only` →
/// `enabled` also names the missing observation period and the missing test period. The one-table-in-`test` rule
/// is not among them: a change that passes over `test` never puts the table there.
#[must_use]
pub fn rollout_refusals(
    from: &RolloutStage,
    to: &RolloutStage,
    facts: &RolloutFacts,
    rules: &RolloutRules,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut out = Vec::new();
    let one_in_test = || {
        format!(
            "at most one table is in test at a time: {} is",
            facts.others_in_test.join(", ")
        )
    };
    if rank(to) <= rank(from) {
        // Back from a cohort or `enabled` into `test` puts the table there as surely as a step forward does.
        if *to == RolloutStage::Test && *from != RolloutStage::Test && !facts.others_in_test.is_empty() {
            out.push(one_in_test());
        }
        return out;
    }
    let skips = rank(to) > rank(from) + 1;
    if skips {
        out.push(format!(
            "{from} → {to} skips a stage: one step at a time (report-only → test → cohort:NAME → enabled)"
        ));
    }
    // The rules of every stage entered or passed over, in order.
    for step in rank(from) + 1..=rank(to) {
        match step {
            1 => {
                let days = rules.min_report_only.num_days();
                match facts.first_observation {
                    None => out.push(format!(
                        "test needs {days} days of report-only observations (`rollout report`); none is recorded \
                         since the table entered report-only"
                    )),
                    Some(t) if now - t < rules.min_report_only => out.push(format!(
                        "test needs {days} days of report-only observations (`rollout report`); the first is from {} \
                         ({} days ago)",
                        t.to_rfc3339(),
                        (now - t).num_days()
                    )),
                    Some(_) => {}
                }
                if !skips && !facts.others_in_test.is_empty() {
                    out.push(one_in_test());
                }
            }
            2 if rank(from) < 1 => out.push(
                "a cohort needs a clean test period: at least one purge VERIFIED while the table is in test and none \
                 DELETE_UNKNOWN; it has not been in test since it entered report-only"
                    .to_owned(),
            ),
            2 if facts.verified_in_test == 0 || facts.unknowns > 0 => out.push(format!(
                "a cohort needs a clean test period: at least one purge VERIFIED since the table entered test ({} so \
                 far) and no object DELETE_UNKNOWN ({} now)",
                facts.verified_in_test, facts.unknowns
            )),
            _ => {}
        }
    }
    out
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

/// The deletion rights in force for one table: those of its newest applied governance decision (decisions are
/// states, so a right missing from the newest version is withdrawn). The world stamp carries [`Self::digest`]:
/// a decision that withdraws or changes a right moves it, and the deleter's compare-and-set and rebase see it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RightsInForce {
    /// The newest applied decision version of the table (`None` before its first).
    pub version: Option<i64>,
    /// BLAKE3 over the scopes of the rights it grants (sorted, one per line, as written); empty when it grants
    /// none. Only scopes count: a right's id, deadline or reason does not change what a plan may propose.
    pub digest: String,
}

/// [`RightsInForce::digest`] of a stored decision document: empty when it grants no deletion right.
fn rights_digest(decision: &serde_json::Value) -> String {
    let mut scopes: Vec<String> = decision["deletion_rights"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    r["scope"]
                        .as_str()
                        .map_or_else(|| r["scope"].to_string(), str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    if scopes.is_empty() {
        return String::new();
    }
    scopes.sort();
    scopes.dedup();
    let mut h = blake3::Hasher::new();
    for s in &scopes {
        h.update(s.as_bytes());
        h.update(b"\n");
    }
    h.finalize().to_hex().to_string()
}

/// [`RightsInForce`] of `table_uuid` (canonical), read on `conn` (inside a caller's transaction when it is one).
pub(super) async fn read_rights_in_force(
    conn: &mut AnyConnection,
    table_uuid: &str,
) -> Result<RightsInForce, sqlx::Error> {
    let row =
        sqlx::query("SELECT version, decision_json FROM decisions WHERE table_uuid = $1 ORDER BY version DESC LIMIT 1")
            .bind(table_uuid)
            .fetch_optional(conn)
            .await?;
    let Some(row) = row else {
        return Ok(RightsInForce::default());
    };
    let decision: serde_json::Value = json(&row, "decision_json")?;
    Ok(RightsInForce {
        version: Some(row.try_get("version")?),
        digest: rights_digest(&decision),
    })
}

/// The facts [`rollout_refusals`] judges, read inside a change's transaction.
async fn rollout_facts(conn: &mut AnyConnection, table_uuid: &str) -> Result<RolloutFacts, sqlx::Error> {
    let since_report_only: Option<String> = sqlx::query_scalar(
        "SELECT MAX(changed_at) FROM rollout_changes WHERE table_uuid = $1 AND to_stage = 'report-only'",
    )
    .bind(table_uuid)
    .fetch_one(&mut *conn)
    .await?;
    let first: Option<String> = sqlx::query_scalar(
        "SELECT MIN(observed_at) FROM rollout_observations WHERE table_uuid = $1 AND observed_at >= $2",
    )
    .bind(table_uuid)
    .bind(since_report_only.unwrap_or_default())
    .fetch_one(&mut *conn)
    .await?;
    let others_in_test: Vec<String> = sqlx::query_scalar(
        "SELECT table_name FROM rollout_stages WHERE stage = 'test' AND table_uuid <> $1 ORDER BY table_name",
    )
    .bind(table_uuid)
    .fetch_all(&mut *conn)
    .await?;
    let since_test: Option<String> =
        sqlx::query_scalar("SELECT MAX(changed_at) FROM rollout_changes WHERE table_uuid = $1 AND to_stage = 'test'")
            .bind(table_uuid)
            .fetch_one(&mut *conn)
            .await?;
    let verified_in_test: i64 = match &since_test {
        Some(t) => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM candidates WHERE table_uuid = $1 AND state = 'VERIFIED' AND updated_at >= $2",
            )
            .bind(table_uuid)
            .bind(t)
            .fetch_one(&mut *conn)
            .await?
        }
        None => 0,
    };
    // Objects, not candidates: an uncertain delete can sit under a PROTECTED or DELETED candidate (as the
    // acceptance's unknowns limit and gate 6 count them).
    let unknowns = super::base::read_table_unknowns(&mut *conn, table_uuid).await?;
    Ok(RolloutFacts {
        first_observation: first
            .map(|t| super::base::parse_time("observed_at", &t))
            .transpose()
            .map_err(|e| decode("observed_at", e))?,
        others_in_test,
        verified_in_test,
        unknowns,
    })
}

fn stage(row: &sqlx::any::AnyRow, column: &'static str) -> Result<RolloutStage, sqlx::Error> {
    let s: String = row.try_get(column)?;
    s.parse().map_err(|e: RegistryError| decode(column, e))
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
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("rollout_stage", async |conn| read_stage(conn, &table_uuid).await)
            .await
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
        rules: Option<&RolloutRules>,
        now: DateTime<Utc>,
    ) -> Result<Result<RolloutChange, Vec<String>>, RegistryError> {
        const OP: &str = "rollout_set";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        require_text("reason", reason)?;
        require_text("by", changed_by)?;
        let mut change = self.change(OP).await?;
        let before = read_stage(&mut change.tx, &table_uuid).await.map_err(query(OP))?;
        // The rules, checked against facts read in this transaction (two tables cannot both enter test).
        let overrode = match rules {
            Some(r) => {
                let facts = rollout_facts(&mut change.tx, &table_uuid).await.map_err(query(OP))?;
                let refusals = rollout_refusals(&before.stage, stage, &facts, r, now);
                if !refusals.is_empty() && !r.force {
                    return Ok(Err(refusals));
                }
                refusals
            }
            None => Vec::new(),
        };
        let forced = rules.is_some_and(|r| r.force);
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
            forced,
            overrode,
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
            "INSERT INTO rollout_changes (generation, table_uuid, table_name, from_stage, to_stage, reason, changed_by, changed_at, policy_digest, forced, overrode) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
        .bind(i64::from(c.forced))
        .bind(serde_json::to_string(&c.overrode).map_err(|e| query(OP)(encode(e)))?)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        change
            .commit(now, EventKind::RolloutStageSet, Some(&table_uuid), &c)
            .await?;
        Ok(Ok(c))
    }

    /// Every stage change of the table, oldest first.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn rollout_history(&self, table_uuid: &str) -> Result<Vec<RolloutChange>, RegistryError> {
        self.table_rows(
            "rollout_history",
            "SELECT * FROM rollout_changes WHERE table_uuid = $1 ORDER BY generation",
            table_uuid,
            |row| {
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
                    forced: row.try_get::<Option<i64>, _>("forced")?.unwrap_or(0) != 0,
                    overrode: match row.try_get::<Option<String>, _>("overrode")? {
                        Some(t) => serde_json::from_str(&t).map_err(|e| decode("overrode", e))?,
                        None => Vec::new(),
                    },
                })
            },
        )
        .await
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
                    let hold = Hold {
                        hold_id: hold_id.clone(),
                        table_uuid: table_uuid.clone(),
                        scope: scope.clone(),
                        reason: format!("governance decision v{} ({key}): {reason}", d.version),
                        hold_generation: generation,
                        set_at: now,
                        cleared_at: None,
                        active: true,
                    };
                    insert_hold(&mut change.tx, &hold).await.map_err(query(OP))?;
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
        change: &mut super::base::Change,
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

    /// The deletion rights in force for the table ([`RightsInForce`]): what the world stamp's `deletion_rights`
    /// records.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`] (also for a stored decision
    /// that does not parse).
    pub async fn rights_in_force(&self, table_uuid: &str) -> Result<RightsInForce, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("rights_in_force", async |conn| {
            read_rights_in_force(conn, &table_uuid).await
        })
        .await
    }

    /// Every applied decision of the table, oldest version first.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn decisions(&self, table_uuid: &str) -> Result<Vec<DecisionRecord>, RegistryError> {
        self.table_rows(
            "decisions",
            "SELECT * FROM decisions WHERE table_uuid = $1 ORDER BY version",
            table_uuid,
            |row| {
                Ok(DecisionRecord {
                    version: row.try_get("version")?,
                    table_uuid: row.try_get("table_uuid")?,
                    issuer: row.try_get("issuer")?,
                    keyid: row.try_get("keyid")?,
                    envelope_sha256: row.try_get("envelope_sha256")?,
                    decision: json(row, "decision_json")?,
                    applied_at: time(row, "applied_at")?,
                    generation: row.try_get("generation")?,
                })
            },
        )
        .await
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
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let since = fmt_time(since);
        self.rows(
            "observations",
            "SELECT * FROM rollout_observations WHERE table_uuid = $1 AND observed_at >= $2 ORDER BY observed_at, observation_id",
            &[&table_uuid, &since],
            |row| {
                Ok(ObservationRecord {
                    observation_id: row.try_get("observation_id")?,
                    table_uuid: row.try_get("table_uuid")?,
                    observed_at: time(row, "observed_at")?,
                    report: json(row, "report_json")?,
                })
            },
        )
        .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::registry::tests::{Backend, T1, T2, fresh_on, on_both_backends, stamp, t};
    use crate::registry::{Acceptance, State};

    on_both_backends!(
        report_only_is_the_default_and_refuses_acceptance_until_a_recorded_stage_change,
        decisions_are_monotonic_kept_and_turn_holds_on_and_off,
        observations_get_increasing_ids_and_filter_by_time,
        the_rollout_rules_read_their_facts_in_the_change_and_force_records_what_it_overrode,
        a_decision_that_changes_the_rights_in_force_refuses_the_acceptance_as_a_compare_and_set,
        a_delete_unknown_object_under_a_protected_candidate_keeps_the_table_out_of_a_cohort,
    );

    /// "No DELETE_UNKNOWN before a cohort" counts objects, not candidates: a candidate a hold sent to `PROTECTED`
    /// while one of its deletes was in flight keeps that object `DELETE_UNKNOWN` under a candidate that is not. The
    /// rule counted candidates in `DELETE_UNKNOWN` and let the table into a cohort.
    async fn a_delete_unknown_object_under_a_protected_candidate_keeps_the_table_out_of_a_cohort(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000031";
        reg.rollout_set(table, "t", &RolloutStage::Test, "r", "tests", None, None, t(0))
            .await
            .unwrap()
            .unwrap();
        // A clean purge in test: VERIFIED.
        reg.candidate_record(table, "c-v", &serde_json::json!({}), &stamp(), &["v".into()], t(1))
            .await
            .unwrap();
        for to in [
            State::Quarantined,
            State::DeleteApproved,
            State::Deleted,
            State::Verified,
        ] {
            reg.candidate_transition("c-v", to, "", None, None, t(1)).await.unwrap();
        }
        // A purge a hold stopped with one delete in flight: the candidate PROTECTED, the object DELETE_UNKNOWN.
        reg.candidate_record(
            table,
            "c-p",
            &serde_json::json!({}),
            &stamp(),
            &["x".into(), "y".into()],
            t(1),
        )
        .await
        .unwrap();
        for to in [State::Quarantined, State::DeleteApproved] {
            reg.candidate_transition("c-p", to, "", None, None, t(1)).await.unwrap();
        }
        reg.receipt_add("c-p", "x", &serde_json::json!({"phase": "requested"}), t(2))
            .await
            .unwrap();
        reg.candidate_transition("c-p", State::Protected, "hold h-1 covers it", None, None, t(3))
            .await
            .unwrap();
        let states: Vec<(String, State)> = reg
            .object_states("c-p")
            .await
            .unwrap()
            .into_iter()
            .map(|o| (o.path, o.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("x".to_owned(), State::DeleteUnknown),
                ("y".to_owned(), State::Protected)
            ]
        );
        let cohort = |force: bool| {
            let reg = &reg;
            async move {
                reg.rollout_set(
                    table,
                    "t",
                    &"cohort:a".parse().unwrap(),
                    "wave 1",
                    "tests",
                    Some("d1"),
                    Some(&RolloutRules {
                        min_report_only: MIN_REPORT_ONLY,
                        force,
                    }),
                    t(4),
                )
                .await
                .unwrap()
            }
        };
        let refused = cohort(false).await.unwrap_err();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(refused[0].contains("no object DELETE_UNKNOWN (1 now)"), "{refused:?}");
        assert_eq!(reg.rollout_stage(table).await.unwrap().stage, RolloutStage::Test);
        let forced = cohort(true).await.unwrap();
        assert!(forced.forced && forced.overrode == refused, "{forced:?}");
    }

    #[test]
    fn the_rights_digest_counts_scopes_only() {
        let doc = |rights: serde_json::Value| serde_json::json!({"deletion_rights": rights});
        assert_eq!(rights_digest(&serde_json::json!({})), "");
        assert_eq!(rights_digest(&doc(serde_json::json!([]))), "");
        let a = rights_digest(&doc(serde_json::json!([
            {"id": "r1", "scope": "snapshot:1", "deadline": "2030-01-01T00:00:00Z"},
            {"id": "r2", "scope": "prefix:data/x/", "deadline": "2030-01-01T00:00:00Z"},
        ])));
        assert_eq!(a.len(), 64);
        // Order, ids, deadlines and reasons change nothing a plan proposes.
        let b = rights_digest(&doc(serde_json::json!([
            {"id": "other", "scope": "prefix:data/x/", "deadline": "2031-01-01T00:00:00Z", "reason": "r"},
            {"id": "r1", "scope": "snapshot:1", "deadline": "2030-01-01T00:00:00Z"},
        ])));
        assert_eq!(a, b);
        let c = rights_digest(&doc(serde_json::json!([
            {"id": "r2", "scope": "prefix:data/x/", "deadline": "2030-01-01T00:00:00Z"},
        ])));
        assert_ne!(a, c);
    }

    async fn a_decision_that_changes_the_rights_in_force_refuses_the_acceptance_as_a_compare_and_set(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000021";
        reg.rollout_set(table, "t", &RolloutStage::Enabled, "r", "tests", Some("d1"), None, now)
            .await
            .unwrap()
            .unwrap();
        let apply = |version: i64, rights: serde_json::Value| {
            let reg = &reg;
            async move {
                let doc = serde_json::json!({"deletion_rights": rights});
                let d = NewDecision {
                    version,
                    table_uuid: table,
                    issuer: "gov",
                    keyid: "k",
                    envelope_sha256: "e",
                    decision: &doc,
                    holds: vec![],
                };
                reg.decision_apply(&d, now).await.unwrap();
            }
        };
        apply(
            1,
            serde_json::json!([{"id": "r1", "scope": "snapshot:1", "deadline": "2030-01-01T00:00:00Z"}]),
        )
        .await;
        let rights = reg.rights_in_force(table).await.unwrap();
        assert_eq!(rights.version, Some(1));
        assert_eq!(rights.digest.len(), 64);
        // Old stamps (no field) read empty.
        let old: crate::registry::WorldStamp = serde_json::from_value(serde_json::json!({
            "metadata_location": "m1", "metadata_blake3": "b1", "protected_ref_root": "r1",
            "lease_watermark": 0, "hold_generation": 0
        }))
        .unwrap();
        assert_eq!(old.deletion_rights, "");
        let mut judged = stamp();
        judged.deletion_rights.clone_from(&rights.digest);
        let record = |id: &'static str| {
            let (reg, judged) = (&reg, &judged);
            async move {
                reg.candidate_record(table, id, &serde_json::json!({}), judged, &["x".into()], now)
                    .await
                    .unwrap();
                reg.candidate_transition(id, State::Quarantined, "sealed", None, None, now)
                    .await
                    .unwrap();
            }
        };
        record("c-a").await;
        let loc = crate::registry::tests::loc();
        // v2 withdraws the right: only the compare-and-set refuses (the purge re-plans and tries again).
        apply(2, serde_json::json!([])).await;
        let r = reg
            .candidate_accept("c-a", &judged, &loc, 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Moved(ref v) if v.len() == 1 && v[0].contains("governance decision v2")),
            "{r:?}"
        );
        // A decision that changes no scope moves nothing.
        apply(
            3,
            serde_json::json!([{"id": "renamed", "scope": "snapshot:1", "deadline": "2031-01-01T00:00:00Z"}]),
        )
        .await;
        record("c-b").await;
        assert_eq!(
            reg.candidate_accept("c-b", &judged, &loc, 0, vec![], false, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
    }

    fn clean_facts() -> RolloutFacts {
        RolloutFacts {
            verified_in_test: 1,
            ..RolloutFacts::default()
        }
    }

    #[test]
    fn the_rollout_rules_step_by_step() {
        let now = t(30 * 86_400_000);
        let rules = RolloutRules {
            min_report_only: MIN_REPORT_ONLY,
            force: false,
        };
        let observed = |days: i64| RolloutFacts {
            first_observation: Some(now - chrono::Duration::days(days)),
            ..RolloutFacts::default()
        };
        let (ro, test, cohort) = (
            RolloutStage::ReportOnly,
            RolloutStage::Test,
            RolloutStage::Cohort("w".into()),
        );
        assert!(rollout_refusals(&ro, &test, &observed(15), &rules, now).is_empty());
        assert!(rollout_refusals(&ro, &test, &observed(13), &rules, now)[0].contains("13 days ago"));
        assert!(rollout_refusals(&ro, &test, &RolloutFacts::default(), &rules, now)[0].contains("none is recorded"));
        let busy = RolloutFacts {
            others_in_test: vec!["rt.db.other".into()],
            ..observed(20)
        };
        assert!(rollout_refusals(&ro, &test, &busy, &rules, now)[0].contains("rt.db.other"));
        assert!(rollout_refusals(&ro, &RolloutStage::Enabled, &observed(99), &rules, now)[0].contains("skips"));
        // A skip names every rule of the stages it passes over that is not met, not only the skip.
        let all = rollout_refusals(&ro, &RolloutStage::Enabled, &observed(3), &rules, now);
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all[0].contains("skips a stage"), "{all:?}");
        assert!(all[1].contains("14 days of report-only observations"), "{all:?}");
        assert!(all[2].contains("clean test period"), "{all:?}");
        let all = rollout_refusals(&test, &RolloutStage::Enabled, &RolloutFacts::default(), &rules, now);
        assert_eq!(all.len(), 2, "{all:?}");
        assert!(all[1].contains("clean test period"), "{all:?}");
        // Met rules are not named: a clean test period leaves only the skip.
        assert_eq!(
            rollout_refusals(&test, &RolloutStage::Enabled, &clean_facts(), &rules, now).len(),
            1
        );
        assert!(rollout_refusals(&test, &cohort, &RolloutFacts::default(), &rules, now)[0].contains("clean test"));
        let clean = RolloutFacts {
            verified_in_test: 1,
            ..RolloutFacts::default()
        };
        assert!(rollout_refusals(&test, &cohort, &clean, &rules, now).is_empty());
        let unknown = RolloutFacts { unknowns: 1, ..clean };
        assert!(!rollout_refusals(&test, &cohort, &unknown, &rules, now).is_empty());
        assert!(rollout_refusals(&cohort, &RolloutStage::Enabled, &RolloutFacts::default(), &rules, now).is_empty());
        // Back is allowed, except into test while another table is there.
        assert!(rollout_refusals(&RolloutStage::Enabled, &ro, &RolloutFacts::default(), &rules, now).is_empty());
        assert!(rollout_refusals(&RolloutStage::Enabled, &ro, &busy, &rules, now).is_empty());
        assert!(rollout_refusals(&cohort, &test, &RolloutFacts::default(), &rules, now).is_empty());
        for from in [&cohort, &RolloutStage::Enabled] {
            let back = rollout_refusals(from, &test, &busy, &rules, now);
            assert_eq!(back.len(), 1, "{back:?}");
            assert!(
                back[0].contains("at most one table is in test at a time: rt.db.other"),
                "{back:?}"
            );
        }
        // Setting test again on the table in test is no move into it.
        assert!(rollout_refusals(&test, &test, &busy, &rules, now).is_empty());
    }

    async fn the_rollout_rules_read_their_facts_in_the_change_and_force_records_what_it_overrode(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let (one, two) = (
            "7f31a2b4-09c1-4d5e-9f00-000000000011",
            "7f31a2b4-09c1-4d5e-9f00-000000000012",
        );
        let rules = |force| RolloutRules {
            min_report_only: MIN_REPORT_ONLY,
            force,
        };
        let set = |table: &'static str, name: &'static str, force: bool| {
            let reg = &reg;
            async move {
                reg.rollout_set(
                    table,
                    name,
                    &RolloutStage::Test,
                    "r",
                    "tests",
                    None,
                    Some(&rules(force)),
                    now,
                )
                .await
                .unwrap()
            }
        };
        let refused = set(one, "one", false).await.unwrap_err();
        assert!(refused[0].contains("none is recorded"), "{refused:?}");
        let forced = set(one, "one", true).await.unwrap();
        assert!(
            forced.forced && forced.overrode[0].contains("none is recorded"),
            "{forced:?}"
        );
        let refused = set(two, "two", false).await.unwrap_err();
        assert!(refused.iter().any(|r| r.contains("one is")), "{refused:?}");
        let h = reg.rollout_history(one).await.unwrap();
        assert_eq!((h.len(), h[0].forced, h[0].overrode.len()), (1, true, 1), "{h:?}");
        assert!(reg.rollout_history(two).await.unwrap().is_empty());
    }

    async fn report_only_is_the_default_and_refuses_acceptance_until_a_recorded_stage_change(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000002";
        assert_eq!(reg.rollout_stage(table).await.unwrap().stage, RolloutStage::ReportOnly);
        reg.candidate_record(table, "c-r", &serde_json::json!({}), &stamp(), &["x".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-r", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        let r = reg
            .candidate_accept("c-r", &stamp(), &crate::registry::tests::loc(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v.len() == 1 && v[0].contains("report-only")),
            "{r:?}"
        );
        let c = reg
            .rollout_set(
                table,
                "orders",
                &"cohort:emea-1".parse().unwrap(),
                "wave 1",
                "alice",
                Some("d1"),
                None,
                now,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.from.clone(), c.to.clone()),
            (RolloutStage::ReportOnly, RolloutStage::Cohort("emea-1".into()))
        );
        assert_eq!(
            reg.candidate_accept("c-r", &stamp(), &crate::registry::tests::loc(), 0, vec![], false, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
        reg.rollout_set(
            table,
            "orders",
            &RolloutStage::ReportOnly,
            "incident",
            "bob",
            None,
            None,
            now,
        )
        .await
        .unwrap()
        .unwrap();
        let h = reg.rollout_history(table).await.unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!((h[1].reason.as_str(), h[1].changed_by.as_str()), ("incident", "bob"));
        let kinds: Vec<EventKind> = reg.events(table).await.unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| **k == EventKind::RolloutStageSet).count(), 2);
        for bad in ["cohort:", "cohort:a b", "prod", "REPORT-ONLY"] {
            assert!(bad.parse::<RolloutStage>().is_err(), "{bad}");
        }
    }

    async fn decisions_are_monotonic_kept_and_turn_holds_on_and_off(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000003";
        let doc = serde_json::json!({"any": "document"});
        let d = |version: i64, on: bool| NewDecision {
            version,
            table_uuid: table,
            issuer: "gov",
            keyid: "k",
            envelope_sha256: "e",
            decision: &doc,
            holds: vec![(
                "case".into(),
                on.then(|| (HoldScope::Snapshot(7), "litigation".to_owned())),
            )],
        };
        let (_, ch) = reg.decision_apply(&d(3, true), now).await.unwrap();
        assert_eq!(ch[0].action, "set");
        assert_eq!(reg.hold_generation(table).await.unwrap(), 1);
        let (_, ch) = reg.decision_apply(&d(4, true), now).await.unwrap();
        assert_eq!(ch[0].action, "unchanged");
        for v in [4, 2] {
            let e = reg.decision_apply(&d(v, false), now).await.unwrap_err();
            assert!(matches!(e, RegistryError::VersionNotNewer { latest: 4, .. }), "{e}");
        }
        assert!(
            reg.holds(table).await.unwrap()[0].active,
            "a refused decision changes nothing"
        );
        let (_, ch) = reg.decision_apply(&d(5, false), now).await.unwrap();
        assert_eq!(ch[0].action, "cleared");
        assert!(!reg.holds(table).await.unwrap()[0].active);
        assert_eq!(reg.hold_generation(table).await.unwrap(), 2);
        let versions: Vec<i64> = reg.decisions(table).await.unwrap().iter().map(|d| d.version).collect();
        assert_eq!(versions, vec![3, 4, 5]);
        assert_eq!(reg.decision_latest_version().await.unwrap(), Some(5));
    }

    async fn observations_get_increasing_ids_and_filter_by_time(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let first = r.observation_add(T1, &serde_json::json!({"n": 1}), t(0)).await.unwrap();
        let second = r
            .observation_add(T1, &serde_json::json!({"n": 2}), t(10))
            .await
            .unwrap();
        r.observation_add(T2, &serde_json::json!({"n": 3}), t(10))
            .await
            .unwrap();
        assert!(second > first, "{first} then {second}");
        let seen = r.observations(T1, t(5)).await.unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].observation_id, second);
        assert_eq!(seen[0].report, serde_json::json!({"n": 2}));
        assert_eq!(r.observations(T1, t(0)).await.unwrap().len(), 2);
        // Observations are not changes: the generation does not move.
        assert_eq!(r.generation().await.unwrap(), 0);
    }
}
