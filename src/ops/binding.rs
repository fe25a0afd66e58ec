//! What binds a reclamation to one run of one build: the implementation digest against the policy's
//! pin ([`digest_binding`]), and the claim a quarantine, purge or reconcile takes on a candidate
//! ([`claim_run`]) so that two processes never work on it at once.
//!
//! Part of the floor of `ops`: it uses only the context and the registry.

use std::path::Path;

use chrono::Utc;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::govern::policy::{Policy, ReclamationImplementation};
use crate::ops::context::Context;
use crate::registry::{PurgeRun, Registry};

/// The implementation digest of the running binary against the policy's pin (#23 point 5).
///
/// `quarantine` (reversible) is refused only by a mismatching pin. `purge`, and a delete retried by
/// `reconcile`, need the policy to say which builds may delete: its digest (`pinned-match`) or `any`
/// written out (`any`); a policy without the field (`unpinned`) refuses them, naming the field and this
/// build's digest, so that no build deletes by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DigestBinding {
    /// SHA-256 of the running binary.
    pub running: String,
    /// The policy's `reclamationImplementationDigest` as written (a digest or `any`), if set.
    pub policy: Option<String>,
    /// `pinned-match`, `pinned-mismatch`, `any` or `unpinned`.
    pub status: String,
    /// Whether this build may purge under the policy (`pinned-match` or `any`).
    pub allows_purge: bool,
}

impl DigestBinding {
    /// Whether this build may quarantine under the policy: every build but one a pin excludes. Quarantine is
    /// reversible; an unpinned policy is a warning here and a refusal at purge.
    #[must_use]
    pub fn allows_reclamation(&self) -> bool {
        self.status != "pinned-mismatch"
    }

    /// Whether this build may delete (purge, or retry a delete in `reconcile`): the policy pins this build or
    /// says `any`.
    #[must_use]
    pub fn allows_purge(&self) -> bool {
        self.allows_purge
    }

    /// The refusal or warning text, if any: for a mismatching pin, for an unpinned policy (purge refuses),
    /// and for `any` (every build may purge, said so).
    #[must_use]
    pub fn message(&self) -> Option<String> {
        match (self.status.as_str(), &self.policy) {
            ("pinned-mismatch", Some(p)) => Some(format!(
                "the policy's reclamationImplementationDigest is {p}, this build is {}: only the pinned build may quarantine and purge",
                self.running
            )),
            ("unpinned", _) => Some(format!(
                "the policy pins no reclamationImplementationDigest: purge refuses (quarantine is allowed); pin this \
                 build with `reclamationImplementationDigest: {}`, or accept every build with \
                 `reclamationImplementationDigest: any`",
                self.running
            )),
            ("any", _) => Some(format!(
                "the policy accepts any build (reclamationImplementationDigest: any): this build {} may quarantine and purge",
                self.running
            )),
            _ => None,
        }
    }
}

/// Compares the running binary with the policy's pin.
///
/// # Errors
/// [`crate::Error::Io`] when the running binary cannot be read.
pub fn digest_binding(ctx: &Context, policy: &Policy) -> Result<DigestBinding> {
    let running = ctx.implementation_digest()?;
    let pin = policy.reclamation_implementation();
    let status = match pin {
        None => "unpinned",
        Some(ReclamationImplementation::Any) => "any",
        Some(ReclamationImplementation::Pinned(p)) if *p == running => "pinned-match",
        Some(ReclamationImplementation::Pinned(_)) => "pinned-mismatch",
    };
    Ok(DigestBinding {
        policy: pin.map(|p| p.as_str().to_owned()),
        running,
        allows_purge: matches!(status, "pinned-match" | "any"),
        status: status.to_owned(),
    })
}

/// The policy given to a command against the one bound to the table at `rollout set` (whose digest the table's
/// rollout record holds). `purge`, `quarantine` and the retried deletes of `reconcile` refuse a policy whose digest
/// differs: its fields (evidenceMaxAge, critical, maxUnreconciledUnknowns, minQuarantinePeriod, regulatedData,
/// reclamationImplementationDigest, …) decide what may be deleted, and the caller chooses the file. A table whose
/// rollout record holds no digest (never set, or moved to `report-only` without `--policy`) binds nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyBinding {
    /// The digest recorded by the table's last `rollout set`, if any.
    pub bound: Option<String>,
    /// The given policy's digest.
    pub given: String,
    /// `bound-match`, `bound-mismatch` or `unbound`.
    pub status: String,
    /// The table's rollout stage (for the way out the refusal names).
    pub stage: String,
    /// The given policy's file, as loaded.
    pub policy: String,
    /// The table's UUID.
    pub table_uuid: String,
    /// The table's name as the rollout record has it (its UUID when there is none).
    pub table: String,
}

impl PolicyBinding {
    /// Why the given policy may not be used for the table: `Some` only for `bound-mismatch`.
    #[must_use]
    pub fn refusal(&self) -> Option<String> {
        let bound = self.bound.as_deref().filter(|b| *b != self.given)?;
        Some(format!(
            "the policy {} (sha256 {}) is not the policy bound to table {} at `rollout set` (sha256 {bound}): the \
             bound policy's rules (evidenceMaxAge, critical, maxUnreconciledUnknowns, minQuarantinePeriod, \
             regulatedData, reclamationImplementationDigest, …) govern its deletes; to change the policy, run \
             `lakedrill rollout set {} {} --policy {} --reason …` with the new policy",
            self.policy, self.given, self.table_uuid, self.table, self.stage, self.policy
        ))
    }
}

/// Relates `policy` to the policy bound to table `table_uuid` at `rollout set` ([`PolicyBinding`]).
///
/// # Errors
/// Registry errors.
pub async fn policy_binding(reg: &Registry, table_uuid: &str, policy: &Policy) -> Result<PolicyBinding> {
    let record = reg.rollout_stage(table_uuid).await?;
    let given = policy.digest().to_owned();
    let status = match &record.policy_digest {
        None => "unbound",
        Some(b) if *b == given => "bound-match",
        Some(_) => "bound-mismatch",
    };
    Ok(PolicyBinding {
        bound: record.policy_digest,
        given,
        status: status.to_owned(),
        stage: record.stage.to_string(),
        policy: policy.source_name().to_owned(),
        table_uuid: table_uuid.to_owned(),
        table: record.table_name.unwrap_or_else(|| table_uuid.to_owned()),
    })
}

/// A purge run not heard of for this long may be taken over (its process died on another host, or hangs).
pub const PURGE_RUN_SILENCE_MINUTES: i64 = 10;

/// How often a run that holds a claim between registry writes ([`with_heartbeat`]) renews it: a tenth of
/// [`PURGE_RUN_SILENCE_MINUTES`], so that nine renewals in a row may fail (a registry briefly unreachable, a
/// stalled host) before a live run looks silent.
pub const CLAIM_HEARTBEAT_SECS: u64 = 60;

/// Runs `work` while renewing run `run_id`'s claim on `candidate_id` every [`CLAIM_HEARTBEAT_SECS`] (the
/// `claim-heartbeat-ms` failpoint shortens it in tests), so that a run busy for longer than
/// [`PURGE_RUN_SILENCE_MINUTES`] without writing the registry (a quarantine sealing a large snapshot, a purge
/// verifying bundles, rebasing or waiting on a slow catalog before its first batch, a reconcile re-checking a
/// large candidate) is never taken over as silent by a second run of the same candidate. Quarantine, purge, reconcile,
/// undelete, `quarantine release` and `restore --put-back` run their whole claimed part in it. A renewal that fails is
/// warned about and tried again at the next beat; the work is never interrupted. The renewal only writes the
/// heartbeat of the run holding the claim ([`Registry::purge_heartbeat`]): a run taken over renews nothing.
///
/// Callers pass `work` boxed (`Box::pin`): a purge's claimed part is a large future, and held inline in its
/// caller's it overflowed the 2 MiB stack of a test thread in debug builds (the fault matrix's unit test).
pub async fn with_heartbeat<T>(
    ctx: &Context,
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    work: impl std::future::Future<Output = T>,
) -> T {
    let every = ctx
        .storage
        .failpoint_claim_heartbeat()
        .unwrap_or(std::time::Duration::from_secs(CLAIM_HEARTBEAT_SECS));
    let beat = beat_forever(ctx, reg, candidate_id, run_id, every);
    tokio::pin!(work);
    tokio::pin!(beat);
    tokio::select! {
        out = &mut work => out,
        never = &mut beat => match never {},
    }
}

/// The renewals of [`with_heartbeat`]: they never end (the work does).
async fn beat_forever(
    ctx: &Context,
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    every: std::time::Duration,
) -> std::convert::Infallible {
    loop {
        tokio::time::sleep(every).await;
        if let Err(e) = reg.purge_heartbeat(candidate_id, run_id, ctx.now()).await {
            crate::report::output::warn(format!(
                "{candidate_id}: the heartbeat of run {run_id} could not be written ({e}); tried again in {} ms",
                every.as_millis()
            ));
        }
    }
}

/// Stops the run (exit 2) unless run `run_id` still holds `candidate_id`'s claim, naming the run that took it
/// over. Checked before every write of a run's that has no registry transaction of its own to check it in (its
/// evidence files, the end of a run); the batches, the catalog commit and the final state moves check it inside
/// their transaction.
///
/// # Errors
/// [`Error::Invalid`] when the claim is another run's (or no run's); registry errors.
pub async fn still_claimed(reg: &Registry, candidate_id: &str, run_id: &str, before: &str) -> Result<()> {
    match reg.purge_claim_held(candidate_id, run_id).await? {
        Ok(()) => Ok(()),
        Err(holder) => Err(taken_over(candidate_id, run_id, holder.as_ref(), before)),
    }
}

/// Moves the candidate that run `run_id` claims to `PROTECTED` with `why`, conditional on that claim: a claim taken
/// over in the meantime refuses it, naming the holder ([`taken_over`]; `before` names the step).
///
/// # Errors
/// Registry errors; the refusal of a claim taken over.
pub async fn protect_claimed(
    reg: &Registry,
    candidate_id: &str,
    run_id: &str,
    why: &str,
    now: chrono::DateTime<Utc>,
    before: &str,
) -> Result<()> {
    if let Err(holder) = reg
        .candidate_move_claimed(candidate_id, run_id, crate::registry::State::Protected, why, now)
        .await?
    {
        return Err(taken_over(candidate_id, run_id, holder.as_ref(), before));
    }
    Ok(())
}

/// The error of a run that lost its claim on `candidate_id` to `holder` (exit 2): it names both runs and what was
/// not done (`before`).
#[must_use]
pub fn taken_over(candidate_id: &str, run_id: &str, holder: Option<&crate::registry::PurgeRun>, before: &str) -> Error {
    Error::invalid(
        candidate_id,
        format!(
            "this run ({run_id}) no longer holds the candidate's claim ({}): another run took it over (this one was \
             taken for silent for {} minutes, or dead); stopped before {before}, and nothing further is deleted or \
             written by this run",
            crate::registry::claim_named(holder),
            PURGE_RUN_SILENCE_MINUTES
        ),
    )
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

/// Whether process `pid` of this host is alive; `None` where `/proc` cannot tell.
fn pid_alive(pid: i64) -> Option<bool> {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return None;
    }
    Some(proc.join(pid.to_string()).exists())
}

/// Whether a run's claim may still be acted on by its holder: not provably dead (same host, its process gone) and
/// not silent for [`PURGE_RUN_SILENCE_MINUTES`] — what [`claim_run`] would not take over.
#[must_use]
pub fn claim_is_live(run: &PurgeRun, now: chrono::DateTime<Utc>) -> bool {
    let silence = chrono::Duration::minutes(PURGE_RUN_SILENCE_MINUTES);
    !((run.host == this_host() && pid_alive(run.pid) == Some(false)) || now - run.heartbeat_at > silence)
}

/// Claims the candidate for this process's quarantine or purge (`what`). A holder may be taken over only when it is provably dead
/// (same host, its process gone) or silent for [`PURGE_RUN_SILENCE_MINUTES`]; otherwise the reason to refuse.
pub async fn claim_run(
    reg: &Registry,
    candidate_id: &str,
    now: chrono::DateTime<Utc>,
    what: &str,
) -> Result<std::result::Result<PurgeRun, String>> {
    let me = PurgeRun {
        run_id: uuid::Uuid::new_v4().to_string(),
        host: this_host(),
        pid: i64::from(std::process::id()),
        started_at: now,
        heartbeat_at: now,
    };
    let held = reg.purge_run(candidate_id).await?;
    let take_over = held.as_ref().filter(|h| !claim_is_live(h, now));
    Ok(match reg.purge_claim(candidate_id, &me, take_over).await? {
        Ok(()) => Ok(me),
        Err(h) => Err(format!(
            "refused to {what}: another quarantine or purge of {candidate_id} is running: run {} on {} (pid {}) since \
             {}, last heard of {}; it can be resumed once that process is gone or silent for \
             {PURGE_RUN_SILENCE_MINUTES} minutes",
            h.run_id,
            h.host,
            h.pid,
            h.started_at.to_rfc3339(),
            h.heartbeat_at.to_rfc3339()
        )),
    })
}
