//! The safety switches: the checks the weakened-build test switches off one at a time.
//!
//! Each [`Check`] names one safety check of the pipeline (a compare-and-set field, the closure gate, a
//! deleter rule). [`weakened`] says whether a check is switched off; outside the crate's own test build
//! (`cfg(test)`) it is a constant `false`, so production builds cannot switch anything off. The fault
//! matrix (`lab::faults`) proves each scenario fails once its check is switched off.
//!
//! Ground file: names no other module.

use serde::{Deserialize, Serialize};

/// The safety checks the weakened-build test switches off, one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// The hold-generation comparison of the delete compare-and-set.
    HoldGenerationCas,
    /// The lease-watermark comparison of the delete compare-and-set.
    LeaseWatermarkCas,
    /// The table-generation comparison of the delete compare-and-set.
    TableGenerationCas,
    /// The independent closure check of quarantine and purge.
    ClosureGate,
    /// The evidence must show every bundle root of the candidate RESTORE_VERIFIED.
    EvidenceCoverage,
    /// An uncertain delete (error, lost response) is DELETE_UNKNOWN, never counted as deleted.
    UncertainDeleteIsUnknown,
    /// An object is VERIFIED only when a re-check after its delete shows it gone.
    RecheckAfterDelete,
    /// Objects under an open writer's prefix are never candidates.
    WriterPrefixes,
    /// Evidence stops counting for a bundle root once a newer report of a known chain failed that root.
    NewerFailure,
    /// Every batch of delete requests re-checks the hold generation inside the registry's write lock.
    HoldCheckPerBatch,
}

impl Check {
    /// Every check.
    pub const ALL: [Check; 10] = [
        Check::HoldGenerationCas,
        Check::LeaseWatermarkCas,
        Check::TableGenerationCas,
        Check::ClosureGate,
        Check::EvidenceCoverage,
        Check::UncertainDeleteIsUnknown,
        Check::RecheckAfterDelete,
        Check::WriterPrefixes,
        Check::NewerFailure,
        Check::HoldCheckPerBatch,
    ];
}

#[cfg(test)]
tokio::task_local! {
    static WEAKENED: Check;
}

/// Whether `check` is switched off. Always `false` outside the crate's own test build.
#[cfg(not(test))]
#[must_use]
#[inline]
pub const fn weakened(_check: Check) -> bool {
    false
}

/// Whether `check` is switched off (test build: inside [`with_weakened`]).
#[cfg(test)]
#[must_use]
pub fn weakened(check: Check) -> bool {
    WEAKENED.try_with(|w| *w == check).unwrap_or(false)
}

/// Runs `f` with `check` switched off (test build only).
#[cfg(test)]
pub async fn with_weakened<F: std::future::Future>(check: Check, f: F) -> F::Output {
    WEAKENED.scope(check, f).await
}
