//! Governance decisions: versioned, signed documents that a governance layer issues and lakedrill executes.
//!
//! A decision is an in-toto Statement v1 in a DSSE envelope (the same format and keys as drill evidence,
//! [`crate::evidence`]) whose predicate ([`DecisionDoc`], predicate type [`DECISION_PREDICATE_TYPE`]) names one
//! table and carries its governance state at that version:
//!
//! - `legal_holds[]`: each `{key, state: on|off, scope, reason}`; `on` sets a registry legal hold under that key
//!   (bumping the table's hold generation), `off` clears the hold a previous version set under the key; a key left
//!   out keeps its hold (a protection is never released by omission);
//! - `deletion_rights[]`: each `{id, scope, deadline, reason}`: a scope (`snapshot:ID`, `prefix:PATH`,
//!   `object:PATH`) that must be deleted by the deadline. The latest applied decision of a table is the set of
//!   open requests; a request left out of a later version is withdrawn.
//!
//! Guarantees: only an envelope that verifies under the trust store is applied; its version must be above
//! every version applied before (registry-wide, checked in the applying transaction); every applied version is
//! kept. A deletion right whose scope a legal hold covers stays protected and is reported as a conflict; once no
//! hold covers it, its snapshots lose the `minSnapshotAge` floor and become candidates — which still go through
//! quarantine, drill evidence and the deleter's compare-and-set.
//!
//! What it does not do: lakedrill never makes a decision. It does not resolve a conflict between a hold and a
//! deletion right by itself, and it does not rewrite data files to remove rows (a row deletion is an engine's
//! commit; the deletion right then names the files that held the rows).

use std::path::Path;

use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::evidence::{self, Statement, Subject};
use crate::govern::closure::{DeletionRight, DeletionScope};
use crate::ops::context::Context;
use crate::ops::governance;
use crate::registry::{HoldScope, NewDecision, Registry, RegistryError};
use crate::report::output::{Outcome, Verdict};
use crate::table::{Table, TableSource};

/// `predicateType` of a governance decision.
pub const DECISION_PREDICATE_TYPE: &str = "https://lakedrill.dev/governance-decision/v1";

/// The only `schema` value of a decision document.
pub const DECISION_SCHEMA: &str = "lakedrillGovernanceDecision.v1";

/// A decision document (the statement's predicate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionDoc {
    /// Always [`DECISION_SCHEMA`].
    pub schema: String,
    /// Monotonic version (registry-wide), at least 1.
    pub version: i64,
    /// Who issued it.
    pub issuer: String,
    /// When it was issued (RFC 3339), as the governance layer says.
    pub issued_at: String,
    /// The table's UUID.
    pub table_uuid: String,
    /// Legal holds on and off.
    #[serde(default)]
    pub legal_holds: Vec<LegalHoldEntry>,
    /// Open deletion-right requests.
    #[serde(default)]
    pub deletion_rights: Vec<DeletionRightEntry>,
}

/// A legal hold in a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LegalHoldEntry {
    /// Stable key of the hold across versions.
    pub key: String,
    /// `on` or `off`.
    pub state: String,
    /// `table`, `snapshot:ID` or `prefix:PATH` (required when on).
    #[serde(default)]
    pub scope: Option<String>,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// A deletion-right request in a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeletionRightEntry {
    /// The request's id.
    pub id: String,
    /// `snapshot:ID`, `prefix:PATH` or `object:PATH`.
    pub scope: String,
    /// RFC 3339.
    pub deadline: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

impl DecisionDoc {
    /// Checks every field; returns the first problem, naming it.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the field and the rule.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, reason: String| Err(Error::invalid(format!("decision field {field}"), reason));
        if self.schema != DECISION_SCHEMA {
            return bad("schema", format!("must be {DECISION_SCHEMA}, got {:?}", self.schema));
        }
        if self.version < 1 {
            return bad("version", format!("must be at least 1, got {}", self.version));
        }
        if self.issuer.trim().is_empty() {
            return bad("issuer", "must not be empty".into());
        }
        if uuid::Uuid::parse_str(&self.table_uuid).is_err() {
            return bad("table_uuid", format!("{:?} is not a UUID", self.table_uuid));
        }
        let mut keys = std::collections::BTreeSet::new();
        for h in &self.legal_holds {
            if h.key.trim().is_empty() || !keys.insert(h.key.as_str()) {
                return bad("legal_holds.key", format!("{:?} is empty or repeated", h.key));
            }
            match (h.state.as_str(), &h.scope) {
                ("on", Some(s)) => {
                    s.parse::<HoldScope>()?;
                    if h.reason.trim().is_empty() {
                        return bad("legal_holds.reason", format!("hold {:?} is on without a reason", h.key));
                    }
                }
                ("on", None) => return bad("legal_holds.scope", format!("hold {:?} is on without a scope", h.key)),
                ("off", _) => {}
                (s, _) => return bad("legal_holds.state", format!("{s:?}: expected on or off")),
            }
        }
        let mut ids = std::collections::BTreeSet::new();
        for r in &self.deletion_rights {
            if r.id.trim().is_empty() || !ids.insert(r.id.as_str()) {
                return bad("deletion_rights.id", format!("{:?} is empty or repeated", r.id));
            }
            parse_scope(&r.scope)?;
            deadline_ms(r)?;
        }
        Ok(())
    }
}

enum RightScope {
    Snapshot(i64),
    Path(String),
}

fn parse_scope(s: &str) -> Result<RightScope> {
    let bad = |reason: String| Error::invalid("decision field deletion_rights.scope", reason);
    if let Some(id) = s.strip_prefix("snapshot:") {
        return id
            .parse()
            .map(RightScope::Snapshot)
            .map_err(|e| bad(format!("{s:?}: {e}")));
    }
    match s.strip_prefix("prefix:").or_else(|| s.strip_prefix("object:")) {
        Some(p) if !p.trim().trim_matches('/').is_empty() => Ok(RightScope::Path(p.to_owned())),
        _ => Err(bad(format!("{s:?}: expected snapshot:ID, prefix:PATH or object:PATH"))),
    }
}

fn deadline_ms(r: &DeletionRightEntry) -> Result<i64> {
    chrono::DateTime::parse_from_rfc3339(&r.deadline)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            Error::invalid(
                "decision field deletion_rights.deadline",
                format!("{:?} (request {}) is not RFC 3339: {e}", r.deadline, r.id),
            )
        })
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
    doc.deletion_rights
        .iter()
        .map(|r| {
            Ok(DeletionRight {
                id: r.id.clone(),
                scope: match parse_scope(&r.scope)? {
                    RightScope::Snapshot(id) => DeletionScope::Snapshot(id),
                    RightScope::Path(p) => DeletionScope::Path(governance::relative_prefix(table, &p)),
                },
                deadline_ms: deadline_ms(r)?,
            })
        })
        .collect()
}

/// `lakedrill decision sign FILE --key KEY --out OUT`: wraps a decision document in a signed envelope (for
/// governance layers and tests; the governance layer may sign with any DSSE implementation).
///
/// # Errors
/// Unreadable or invalid document; key errors; the output exists.
pub fn sign(file: &Path, key: &Path, out: &Path) -> Result<Outcome> {
    let bytes = std::fs::read(file).map_err(|e| Error::io("read the decision", file, e))?;
    let doc: DecisionDoc = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(file.display().to_string(), format!("not a decision document: {e}")))?;
    doc.validate()?;
    let key = crate::evidence::keys::load_signing_key(key)?;
    let predicate = serde_json::to_value(&doc).map_err(|e| Error::Internal(e.to_string()))?;
    let statement = Statement {
        subject: vec![Subject::sha256(
            format!("lakedrill-decision:{}:v{}", doc.table_uuid, doc.version),
            evidence::sha256_hex(predicate.to_string().as_bytes()),
        )],
        predicate_type: DECISION_PREDICATE_TYPE.into(),
        predicate,
    };
    let env = evidence::sign_statement(&statement, &key).to_json_bytes();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| Error::io("create the signed decision", out, e))?;
    std::io::Write::write_all(&mut f, &env).map_err(|e| Error::io("write the signed decision", out, e))?;
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"decision": out.display().to_string(), "version": doc.version, "keyid": key.keyid()}),
        format!("signed decision v{} → {}\n", doc.version, out.display()),
    )
}

/// `lakedrill decision apply FILE --trust DIR` (table addressed): verifies, refuses a version not above the
/// latest, applies the legal holds, keeps the decision, reports the deletion rights and any conflict.
///
/// # Errors
/// Unreadable file, trust store, table or registry. A decision that does not verify, names another table or
/// carries an old version is refused (exit 1).
pub async fn apply(ctx: &Context, source: &TableSource, file: &Path, trust: &Path) -> Result<Outcome> {
    let trust = crate::evidence::keys::TrustStore::load_dir(trust)?;
    let bytes = std::fs::read(file).map_err(|e| Error::io("read the decision", file, e))?;
    let refuse = |reason: String| {
        Outcome::new(
            Verdict::Findings,
            &serde_json::json!({"status": "REFUSED", "decision": file.display().to_string(), "reason": reason}),
            format!("REFUSED: {reason}\n"),
        )
    };
    let verified = match evidence::verify(&bytes, &trust) {
        Ok(v) => v,
        Err(f) => return refuse(format!("{} does not verify: {} — {f}", file.display(), f.kind())),
    };
    if verified.predicate_type() != DECISION_PREDICATE_TYPE {
        return refuse(format!(
            "predicateType is {:?}, expected {DECISION_PREDICATE_TYPE}",
            verified.predicate_type()
        ));
    }
    let doc: DecisionDoc = match serde_json::from_value(verified.predicate().clone()) {
        Ok(d) => d,
        Err(e) => return refuse(format!("the signed predicate is not a decision document: {e}")),
    };
    if let Err(e) = doc.validate() {
        return refuse(format!("{e:#}"));
    }
    let digest = evidence::sha256_hex(verified.predicate().to_string().as_bytes());
    if !verified
        .subjects()
        .iter()
        .any(|s| s.digest.get("sha256") == Some(&digest))
    {
        return refuse("no subject binds the decision's predicate digest".into());
    }
    let table = ctx.table(source).await?;
    let uuid = table.metadata().uuid().to_string();
    if uuid::Uuid::parse_str(&doc.table_uuid).ok() != Some(table.metadata().uuid()) {
        return refuse(format!(
            "the decision governs table {}, not {} ({uuid})",
            doc.table_uuid,
            table.name()
        ));
    }
    let mut holds = Vec::new();
    for h in &doc.legal_holds {
        let want = match (h.state.as_str(), &h.scope) {
            ("on", Some(s)) => {
                let scope: HoldScope = s.parse()?;
                if let HoldScope::Snapshot(id) = scope {
                    table.snapshot(id)?;
                }
                Some((scope, h.reason.clone()))
            }
            _ => None,
        };
        holds.push((h.key.clone(), want));
    }
    let reg = governance::registry(ctx).await?;
    let now = Utc::now();
    let env_sha = evidence::sha256_hex(&bytes);
    let new = NewDecision {
        version: doc.version,
        table_uuid: &uuid,
        issuer: &doc.issuer,
        keyid: verified.keyid(),
        envelope_sha256: &env_sha,
        decision: verified.predicate(),
        holds,
    };
    let (rec, changes) = match reg.decision_apply(&new, now).await {
        Ok(x) => x,
        Err(RegistryError::VersionNotNewer { version, latest }) => {
            return refuse(format!(
                "decision version {version} is not newer than the latest applied version {latest}"
            ));
        }
        Err(e) => return Err(e.into()),
    };
    // Holds that now cover a recorded candidate send it to PROTECTED, as `hold set` does.
    let mut protected = Vec::new();
    for c in &changes {
        if c.action == "set"
            && let (Some(scope), Some(id)) = (&c.scope, &c.hold_id)
        {
            protected.extend(governance::protect_covered_by_hold(&reg, &table, &uuid, id, scope, now).await?);
        }
    }
    let rights = deletion_rights(&table, &reg).await?;
    let mut human = format!(
        "applied governance decision v{} from {} (key {}) to {} ({uuid})\n",
        rec.version,
        rec.issuer,
        rec.keyid,
        table.name()
    );
    for c in &changes {
        human.push_str(&format!(
            "  legal hold {}: {}{}\n",
            c.key,
            c.action,
            c.hold_id.as_deref().map(|h| format!(" (hold {h})")).unwrap_or_default()
        ));
    }
    human.push_str(&format!(
        "  {} deletion-right request(s) open; `lakedrill plan` or `lakedrill gates` shows where each stands\n",
        rights.len()
    ));
    Outcome::new(
        Verdict::Ok,
        &serde_json::json!({"status": "APPLIED", "decision": rec, "holds": changes,
            "protected_candidates": protected, "deletion_rights": doc.deletion_rights}),
        human,
    )
}
