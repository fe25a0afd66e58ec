//! What binds a reclamation to one run of one build: the implementation digest against the policy's
//! pin ([`digest_binding`]), and the claim a quarantine, purge or reconcile takes on a candidate
//! ([`claim_run`]) so that two processes never work on it at once.
//!
//! Part of the floor of `ops`: it uses only the context and the registry.

use std::path::Path;

use chrono::Utc;
use serde::Serialize;

use crate::error::Result;
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

/// A purge run not heard of for this long may be taken over (its process died on another host, or hangs).
pub const PURGE_RUN_SILENCE_MINUTES: i64 = 10;

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
    let silence = chrono::Duration::minutes(PURGE_RUN_SILENCE_MINUTES);
    let take_over = held
        .as_ref()
        .filter(|h| (h.host == me.host && pid_alive(h.pid) == Some(false)) || now - h.heartbeat_at > silence)
        .map(|h| h.run_id.clone());
    Ok(match reg.purge_claim(candidate_id, &me, take_over.as_deref()).await? {
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
