//! The report format of the fault matrix (`lakedrill drill faults`): its predicate, the statement whose
//! subject is the running binary, and the pure consistency checks an auditor runs on it.
//!
//! Pure: the matrix itself runs in `lab::faults`; this is what it signs and what `audit verify` reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evidence::{Statement, Subject};

/// `predicateType` of a fault-matrix report.
pub const PREDICATE_TYPE: &str = "https://lakedrill.dev/fault-matrix/v1";

/// One scenario of the matrix, as reported.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScenarioResult {
    /// Short id (`hold-races-cas`, …).
    pub id: String,
    /// The fault, as DESIGN §6 names it.
    pub fault: String,
    /// The outcome written down before the run.
    pub expected: String,
    /// Each expectation checked, prefixed `ok:` or `NOT OBSERVED:`, and what was seen.
    pub observed: Vec<String>,
    /// Faults the fault layer actually injected, by kind.
    pub injected: BTreeMap<String, u64>,
    /// Objects lost (must be 0).
    pub objects_lost: usize,
    /// Up to 20 of them.
    pub lost: Vec<String>,
    /// Readers that used a snapshot without a lease (visible, never silently broken).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprotected_readers: Vec<Value>,
    /// The data and delete files of the scenario's candidate and how many of them its purge deleted
    /// (absent in reports written before these figures existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_files: Option<ContentFileFigures>,
    /// Why the scenario could not run, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Expected outcome observed, nothing lost, no error.
    pub pass: bool,
}

/// A scenario's content files: the data and delete files (position and equality deletes) in its candidate's
/// inventory, and how many of them were deleted and verified gone. Every scenario's candidate holds at least
/// one data file, so that "objects lost = 0" speaks about data, not only about metadata.
/// See: issue 18 point 5.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ContentFileFigures {
    /// Data files in the candidate's inventory.
    pub candidate_data_files: usize,
    /// Delete files in the candidate's inventory.
    pub candidate_delete_files: usize,
    /// Data files of the inventory deleted and verified gone (0 where the scenario's purge is refused).
    pub data_files_deleted: usize,
    /// Delete files of the inventory deleted and verified gone.
    pub delete_files_deleted: usize,
}

/// The matrix run itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MatrixInfo {
    /// Run id.
    pub id: String,
    /// SHA-256 of the running binary.
    pub implementation_digest: String,
    /// lakedrill's version.
    pub version: String,
    /// `file` or `s3`.
    pub store: String,
    /// Where the scratch lakehouses were built.
    pub scratch: String,
}

/// Totals.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct MatrixSummary {
    /// Scenarios that passed.
    pub passed: usize,
    /// Scenarios that did not.
    pub failed: usize,
    /// Objects lost over all scenarios.
    pub objects_lost: usize,
    /// `PASS` only when all fourteen scenarios passed.
    pub gate: String,
}

/// The predicate of a fault-matrix report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FaultPredicate {
    /// The run.
    pub matrix: MatrixInfo,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339).
    pub finished_at: String,
    /// Per scenario.
    pub scenarios: Vec<ScenarioResult>,
    /// Totals.
    pub summary: MatrixSummary,
    /// SHA-256 of the previous fault-matrix report in the same folder, or null.
    pub previous_report: Option<String>,
}

/// Every scenario id, in order.
pub const SCENARIOS: [&str; 14] = [
    "reader-registration-delay",
    "ref-case-collision",
    "uncommitted-writer",
    "lagging-listing",
    "hold-races-cas",
    "planner-bug",
    "bundle-missing-layer",
    "late-model-reader",
    "lagging-replica",
    "lost-delete-receipts",
    "delete-marker-recovery",
    "stale-pass-after-fail",
    "hold-lands-mid-purge",
    "orphan-referenced-after-quarantine",
];

/// The statement of a fault-matrix report: its subject is the running binary.
#[must_use]
pub fn statement(p: &FaultPredicate) -> Statement {
    Statement {
        subject: vec![Subject {
            name: "lakedrill-implementation".into(),
            digest: BTreeMap::from([("sha256".to_owned(), p.matrix.implementation_digest.clone())]),
        }],
        predicate_type: PREDICATE_TYPE.into(),
        predicate: serde_json::to_value(p).unwrap_or(Value::Null),
    }
}

/// Consistency checks of a verified fault-matrix predicate (pure): every reason it cannot be believed.
#[must_use]
pub fn check_predicate(p: &FaultPredicate, subject_sha256: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let passed = p.scenarios.iter().filter(|s| s.pass).count();
    if p.summary.passed != passed || p.summary.failed != p.scenarios.len() - passed {
        out.push(format!(
            "summary says {}/{} passed/failed, scenarios say {passed}/{}",
            p.summary.passed,
            p.summary.failed,
            p.scenarios.len() - passed
        ));
    }
    let lost: usize = p.scenarios.iter().map(|s| s.objects_lost).sum();
    if p.summary.objects_lost != lost {
        out.push(format!(
            "summary says {} objects lost, scenarios say {lost}",
            p.summary.objects_lost
        ));
    }
    for s in &p.scenarios {
        let holds = !s.observed.is_empty() && s.observed.iter().all(|l| !l.starts_with("NOT OBSERVED"));
        if let Some(c) = &s.content_files
            && (c.data_files_deleted > c.candidate_data_files || c.delete_files_deleted > c.candidate_delete_files)
        {
            out.push(format!(
                "scenario {} deleted more content files than its candidate holds ({} of {} data, {} of {} delete files)",
                s.id, c.data_files_deleted, c.candidate_data_files, c.delete_files_deleted, c.candidate_delete_files
            ));
        }
        if s.pass && (s.objects_lost > 0 || s.error.is_some() || !holds) {
            out.push(format!(
                "scenario {} passes although it lost objects, failed or missed an expectation",
                s.id
            ));
        }
    }
    let complete = SCENARIOS.iter().all(|id| p.scenarios.iter().any(|s| s.id == *id));
    let gate = if complete && passed == p.scenarios.len() {
        "PASS"
    } else {
        "FAIL"
    };
    if p.summary.gate != gate {
        out.push(format!("gate {} but the scenarios imply {gate}", p.summary.gate));
    }
    if subject_sha256 != Some(p.matrix.implementation_digest.as_str()) {
        out.push(format!(
            "the subject's sha256 {subject_sha256:?} is not the implementation digest {}",
            p.matrix.implementation_digest
        ));
    }
    out
}
