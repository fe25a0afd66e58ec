//! `decision sign` and `decision apply`: governance decisions ([`crate::govern::decision`]) signed, verified
//! and applied to the registry in one transaction.
//!
//! Decisions are signed by the governance layer's key: with a `roles.toml` in the trust folder only keys it gives
//! the `governance` role ([`Role::Governance`]) count, for `decision apply` as for `audit verify`, and
//! `decision sign --trust` refuses a key without it before writing anything. A roles file that gives no key that
//! role (one written before the role existed) means no decision verifies under its folder; the refusal says so
//! and names the fix. Without a roles file every key of the folder counts, as before roles existed.

use std::path::Path;

use crate::error::{Error, Result};
use crate::evidence::keys::{Role, TrustStore};
use crate::evidence::{self, Statement, Subject};
pub use crate::govern::decision::{
    DECISION_PREDICATE_TYPE, DECISION_SCHEMA, DecisionDoc, DeletionRightEntry, LegalHoldEntry, RightScope, deadline_ms,
    parse_scope,
};
use crate::ops::context::Context;
use crate::registry::{HoldScope, NewDecision, RegistryError};
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;

/// `lakedrill decision sign FILE --key KEY [--trust DIR] --out OUT`: wraps a decision document in a signed
/// envelope (for governance layers and tests; the governance layer may sign with any DSSE implementation). With
/// `trust` (the folder the decision will be applied under) holding a roles file, `key` must hold the `governance`
/// role there: a decision under another key would be refused by every `decision apply`.
///
/// # Errors
/// Unreadable or invalid document; key errors, a key without the `governance` role under `trust`
/// ([`crate::evidence::keys::KeyError::RoleNotGranted`]); the output exists. Nothing is written then.
pub fn sign(file: &Path, key: &Path, trust: Option<&Path>, out: &Path) -> Result<Outcome> {
    let bytes = std::fs::read(file).map_err(|e| Error::io("read the decision", file, e))?;
    let doc: DecisionDoc = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(file.display().to_string(), format!("not a decision document: {e}")))?;
    doc.validate()?;
    let key_path = key;
    let key = crate::evidence::keys::load_signing_key(key)?;
    if let Some(trust) = trust {
        TrustStore::load_dir(trust)?.require_role(key_path, &key, Role::Governance, "governance decisions")?;
    }
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

/// `lakedrill decision apply FILE --trust DIR` (table addressed): verifies under the keys with the `governance`
/// role, refuses a version not above the latest, applies the legal holds, keeps the decision, reports the
/// deletion rights and any conflict.
///
/// # Errors
/// Unreadable file, trust store, table or registry. A decision that does not verify (also: signed by a key of
/// the folder without the `governance` role), names another table or carries an old version is refused (exit 1).
pub async fn apply(ctx: &Context, source: &TableSource, file: &Path, trust: &Path) -> Result<Outcome> {
    let folder = TrustStore::load_dir(trust)?;
    let trust = folder.for_role(Role::Governance);
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
        Err(f) => {
            // A roles file that gives no key the governance role (one from before the role): no decision verifies
            // under this folder, whoever signed it; the refusal says so and how to fix it.
            let nobody = folder
                .no_key_holds(Role::Governance)
                .map(|n| format!("; {n}"))
                .unwrap_or_default();
            return refuse(format!(
                "{} does not verify: {} — {f}{nobody}",
                file.display(),
                f.kind()
            ));
        }
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
    let known = crate::ops::protect::candidate_snapshots(&crate::ops::plan::registry(ctx).await?, &uuid).await?;
    let mut holds = Vec::new();
    for h in &doc.legal_holds {
        let want = match (h.state.as_str(), &h.scope) {
            ("on", Some(s)) => {
                let scope: HoldScope = s.parse()?;
                // As `hold set`: an unknown snapshot or a prefix outside the table would hold nothing (exit 2).
                crate::ops::protect::check_hold_scope(&table, &scope, &known)?;
                Some((scope, h.reason.clone()))
            }
            _ => None,
        };
        holds.push((h.key.clone(), want));
    }
    // A deletion right's path outside the table is refused as a hold's is (exit 2): it could name nothing here.
    for r in &doc.deletion_rights {
        if let RightScope::Path(p) = parse_scope(&r.scope)? {
            table.location().prefix_within(&p)?;
        }
    }
    let reg = crate::ops::plan::registry(ctx).await?;
    let now = ctx.now();
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
            protected.extend(
                crate::ops::protect::protect_covered_by_hold(&ctx.storage, &reg, &table, &uuid, id, scope, now).await?,
            );
        }
    }
    let rights = crate::ops::plan::deletion_rights(&table, &reg).await?;
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
