//! Retiring the bundles of a finished purge: beside each bundle of the candidate, a signed retirement record
//! (`<bundle folder>/retired.dsse.json`, format in [`crate::evidence::retirement`]) that names the bundle's
//! root and the purge summary, so that drills leave the bundle out of their population instead of finding its
//! purged data missing.
//!
//! The bundles retired are the candidate's own (of a snapshot candidate, those of the snapshots it deleted: a
//! snapshot a rebase released keeps its bundle in the drills) and those a candidate given up earlier (`RELEASED`, or
//! `PROTECTED`) sealed of one of the snapshots this purge deleted: a released candidate's snapshots return to
//! the plan, a later candidate purges them, and the old bundles must not fail every drill after.
//!
//! It writes only once a purge has finished: the candidate is `VERIFIED` (every object of its inventory shown
//! gone) and its signed summary exists. Records are write-once ([`crate::io::store::Storage::put_new`]); a
//! bundle that already has one keeps it, so a resumed purge or a `reconcile` of a finished candidate writes
//! exactly the records that are missing. It deletes nothing and never touches the table. It may use what
//! the `ops` wing may use; it reads the candidate's bundles from the quarantine record in the registry.

use bytes::Bytes;

use crate::bundle::ENVELOPE_FILE;
use crate::error::{Error, Result};
use crate::evidence::keys::{PublicKey, Role, SigningKey, TrustStore};
use crate::evidence::retirement::{self, RECORD_FILE, RetirementPredicate};
use crate::evidence::{self};
use crate::model::location;
use crate::ops::context::Context;
use crate::registry::{Registry, State};

/// Writes the retirement record of every bundle of `candidate_id` once its purge finished (the candidate is
/// `VERIFIED` and `summary_uri` names its signed summary); does nothing otherwise. Also retires the bundles
/// that released or protected candidates of the same table sealed of a snapshot this purge deleted (their
/// records name this purge). Returns the records' URIs, those written now and those already there.
///
/// A record already beside a bundle is kept only when it passes [`retirement::check`] against that bundle
/// (its root and envelope SHA-256) under the deleter keys of `trust` and `key`'s public key, read
/// within `max_metadata_bytes`; only then is it anchored. A bundle whose envelope is gone is skipped, with a
/// warning when it is one of the candidate's own.
///
/// # Errors
/// Registry and storage errors, and an existing record that does not pass the check (naming the record and the
/// reason; nothing is anchored for it), naming the bundle and saying that the purge itself is complete and how
/// to write the missing records (`lakedrill reconcile CANDIDATE`).
pub async fn retire_bundles(
    ctx: &Context,
    reg: &Registry,
    candidate_id: &str,
    key: &SigningKey,
    trust: Option<&TrustStore>,
    summary_uri: Option<&str>,
    retention: Option<crate::govern::policy::EvidenceRetention>,
) -> Result<Vec<String>> {
    let Some(summary_uri) = summary_uri else {
        return Ok(Vec::new());
    };
    let rec = reg.candidate(candidate_id).await?;
    if rec.state != State::Verified {
        return Ok(Vec::new());
    }
    let unfinished = |what: &str, e: &Error| {
        Error::invalid(
            what,
            format!(
                "the purge of {candidate_id} is VERIFIED, but its retirement record could not be written ({e}); \
                 `lakedrill reconcile {candidate_id}` writes the missing records"
            ),
        )
    };
    let summary = ctx
        .storage
        .get(summary_uri)
        .await
        .map_err(|e| unfinished(summary_uri, &e))?;
    let summary_sha256 = evidence::sha256_hex(&summary.bytes);
    let recorded = |c: &crate::registry::CandidateRecord| {
        c.quarantine
            .as_ref()
            .and_then(|q| q["bundles"].as_array().cloned())
            .unwrap_or_default()
    };
    // The snapshots this purge deleted: the candidate's as it ended, after any rebase.
    let purged: std::collections::BTreeSet<i64> = rec.candidate["snapshot_ids"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
        .unwrap_or_default();
    // The candidate's own bundles: a record must be written beside each (one that cannot be is an error). An
    // orphan candidate's bundle holds what its purge deleted. A snapshot candidate's bundle is retired only when
    // its snapshot was deleted: a rebase that released a snapshot (a hold, lease, checkpoint or ref landed on it)
    // leaves that snapshot's bundle its way back, in every drill's population.
    let orphans = rec.candidate["kind"].as_str() == Some("orphans");
    let mut bundles = Vec::new();
    for b in recorded(&rec) {
        match b["snapshot_id"].as_i64() {
            _ if orphans => bundles.push(b),
            Some(s) if purged.contains(&s) => bundles.push(b),
            Some(_) => {}
            None => {
                return Err(Error::Internal(format!(
                    "candidate {candidate_id}: a recorded bundle without snapshot_id: {b}"
                )));
            }
        }
    }
    let own = bundles.len();
    // A candidate given up before its purge (RELEASED, or PROTECTED and not yet released) leaves its bundles
    // behind; once this purge deleted one of their snapshots, they are as stale as this candidate's own.
    for other in reg.candidates(&rec.table_uuid).await? {
        if other.candidate_id == rec.candidate_id || !matches!(other.state, State::Released | State::Protected) {
            continue;
        }
        bundles.extend(
            recorded(&other)
                .into_iter()
                .filter(|b| b["snapshot_id"].as_i64().is_some_and(|s| purged.contains(&s))),
        );
    }
    // Where the candidate's own bundles were sealed (they come first): another candidate's bundle is retired only
    // when sealed at the same table location (review V2). A recovered copy of the table (`recover --catalog`) keeps
    // its UUID and snapshot ids: without this, the copy's purge of a snapshot retired the original's bundles of it,
    // and drills stopped checking what may be the original's only way back.
    let mut own_location: Option<String> = None;
    let now = ctx.now().to_rfc3339();
    let max = ctx.storage.options().max_metadata_bytes;
    // Whose records count as this bundle's: the deleter keys of the trust folder and the key signing now (without
    // a trust folder a record by another key is refused, never taken unchecked).
    let mut keys = trust
        .map(|t| t.for_role(Role::Deleter).keys().to_vec())
        .unwrap_or_default();
    if !keys.iter().any(|k| k.keyid() == key.keyid()) {
        keys.push(PublicKey::new("the run's key", "--key", key.verifying_key()));
    }
    let record_trust = &TrustStore::from_keys(keys).map_err(|e| Error::invalid("--trust", e.to_string()))?;
    let mut out = Vec::with_capacity(bundles.len());
    for (i, b) in bundles.iter().enumerate() {
        let (Some(dir), Some(root)) = (b["uri"].as_str(), b["bundle_root"].as_str()) else {
            return Err(Error::Internal(format!(
                "candidate {candidate_id}: a recorded bundle without uri or bundle_root: {b}"
            )));
        };
        let bundle_id = b["bundle_id"]
            .as_str()
            .map_or_else(|| location::file_name(dir).to_owned(), str::to_owned);
        let uri = location::join(dir, RECORD_FILE);
        // A bundle that has since been removed (its envelope is gone) is in no drill's population any more: there
        // is nothing to retire, and no record is written into an empty folder. For a given-up candidate's bundle
        // that is expected; for the candidate's own it is said (see: review V6 — it used to stop every `finish` of
        // a VERIFIED purge, and every `reconcile` after it, with exit 2).
        let envelope_uri = location::join(dir, ENVELOPE_FILE);
        let Some(envelope) = ctx
            .storage
            .get_opt_bounded(&envelope_uri, max, "a bundle envelope")
            .await
            .map_err(|e| unfinished(&envelope_uri, &e))?
        else {
            if i < own {
                crate::report::output::warn(format!(
                    "candidate {candidate_id}: bundle {dir} has no envelope ({envelope_uri} is gone): nothing to \
                     retire there, no retirement record written"
                ));
            }
            continue;
        };
        let envelope_sha256 = evidence::sha256_hex(&envelope.bytes);
        let location = sealed_at(&envelope.bytes);
        if i < own {
            own_location = own_location.or(location);
        } else if own_location.is_none() || location != own_location {
            // Another table's bundle (a copy of this one under the same UUID), or one whose location cannot be told:
            // it stays in the drills' population.
            continue;
        }
        // A record that is already there is kept only once it is shown to be this bundle's (see: review V5 — it was
        // anchored unread, so a planted file or another bundle's record became this bundle's record): checked as a
        // drill checks it, against this bundle's root and envelope, under the deleter keys.
        let identity = retirement::BundleIdentity {
            bundle_id: location::file_name(dir),
            bundle_root: root,
            envelope_sha256: &envelope_sha256,
        };
        let this_bundles = |existing: Bytes| {
            let problem = match retirement::check(&existing, record_trust, &identity) {
                Ok(_) => return Ok(existing),
                Err(problem) => problem,
            };
            // Without a trust folder only this run's key is known, so a record signed by the purge's own (other)
            // deleter key cannot be verified here: it is kept when everything but its signature holds (it names
            // this bundle, its root and envelope), with a warning; junk and another bundle's record never pass.
            // A purge always has its trust folder, so this is `reconcile` without --trust only.
            if trust.is_none()
                && matches!(problem, retirement::RetirementProblem::NotVerified(_))
                && retirement::check_unverified(&existing, &identity).is_ok()
            {
                crate::report::output::warn(format!(
                    "{uri}: an existing retirement record of bundle {bundle_id} signed by a key other than \
                     this run's; its signature was not checked (give --trust DIR to check it)"
                ));
                return Ok(existing);
            }
            Err(Error::corrupt(
                &uri,
                format!(
                    "a retirement record already there that does not retire bundle {bundle_id} (root {root}): \
                     {problem}; nothing was anchored for it. The purge of {candidate_id} is VERIFIED: inspect \
                     the file, remove it, and `lakedrill reconcile {candidate_id}` writes the record"
                ),
            ))
        };
        let written = async {
            // Read within the metadata limit: a file of any size can be put there.
            if let Some(existing) = ctx.storage.get_opt_bounded(&uri, max, "a retirement record").await? {
                return this_bundles(existing.bytes);
            }
            let p = RetirementPredicate {
                bundle_id: bundle_id.clone(),
                bundle_root: root.to_owned(),
                candidate_id: candidate_id.to_owned(),
                purge_summary: summary_uri.to_owned(),
                purge_summary_sha256: summary_sha256.clone(),
                retired_at: now.clone(),
            };
            let st = retirement::statement(&p, &envelope_sha256);
            let bytes = Bytes::from(evidence::sign_statement(&st, key).to_json_bytes());
            match crate::ops::evidence_lock::put(&ctx.storage, &uri, bytes.clone(), retention, ctx.now()).await {
                Ok(_) => Ok(bytes),
                // Another run wrote it meanwhile: write-once, theirs stays, held to the same check.
                Err(Error::AlreadyExists { .. }) => {
                    this_bundles(ctx.storage.get_bounded(&uri, max, "a retirement record").await?.bytes)
                }
                Err(e) => Err(e),
            }
        };
        let record = written.await.map_err(|e: Error| match e {
            // A record that is not this bundle's, or over the limit: said as it is, naming the record.
            e @ Error::Corrupt { .. } => e,
            e => unfinished(&uri, &e),
        })?;
        // The record, anchored in the registry by its URI (#23 point 4): `audit verify` of it with the registry
        // then finds it replaced (a removed record puts its bundle back into every drill's population, where
        // its purged objects fail the drill). What is anchored is the bytes checked above, never a second read.
        let head = evidence::sha256_hex(&record);
        reg.chain_anchor(&uri, &head, 1, ctx.now()).await?;
        out.push(uri);
    }
    Ok(out)
}

/// The table location a bundle envelope says its bundle was sealed at (**not verified**: used only to leave a
/// bundle out of the retirement); `None` when the envelope does not say.
fn sealed_at(envelope: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Statement {
        predicate: Predicate,
    }
    #[derive(serde::Deserialize)]
    struct Predicate {
        table_location: String,
    }
    evidence::peek_unverified_as::<Statement>(envelope)
        .map(|s| s.predicate.table_location.trim_end_matches('/').to_owned())
}
