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
//!
//! This file is the document: its format, its validation, the scopes it names. Applying it to the registry
//! is `ops::decision`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::object::HoldScope;

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

/// The scope of a deletion right: one snapshot, or a path (prefix or object) as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RightScope {
    /// One snapshot.
    Snapshot(i64),
    /// A prefix or object path, as written in the document.
    Path(String),
}

/// Parses a deletion right's scope: `snapshot:ID`, `prefix:PATH` or `object:PATH`.
///
/// # Errors
/// [`Error::Invalid`] naming the field and the rule.
pub fn parse_scope(s: &str) -> Result<RightScope> {
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

/// A deletion right's deadline, epoch ms.
///
/// # Errors
/// [`Error::Invalid`] when it is not RFC 3339.
pub fn deadline_ms(r: &DeletionRightEntry) -> Result<i64> {
    chrono::DateTime::parse_from_rfc3339(&r.deadline)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            Error::invalid(
                "decision field deletion_rights.deadline",
                format!("{:?} (request {}) is not RFC 3339: {e}", r.deadline, r.id),
            )
        })
}
