//! Findings: problems found *in* a table, a bundle or a report.
//!
//! A finding is not an error. It is collected, the run goes on, and it ends up in the output and
//! the signed evidence; any finding makes the verdict "not verified" (exit 1). Errors, by
//! contrast, mean lakedrill could not decide (exit 2).

use serde::{Deserialize, Serialize};

/// What kind of problem a finding reports. The names are stable: scripts and auditors match them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum FindingKind {
    /// The bundle's signature, payload type or statement does not verify under the trust store.
    BundleSignature,
    /// The signed subject does not match the inventory carried in the bundle.
    SubjectMismatch,
    /// The inventory's root digest does not match its entries.
    RootMismatch,
    /// A metadata copy named by the inventory is not in the bundle.
    CopyMissing,
    /// A metadata copy differs from its inventory digest.
    CopyDigestMismatch,
    /// A metadata copy cannot be parsed.
    CopyUnreadable,
    /// The bundled metadata does not name the bundled snapshot.
    SnapshotMissing,
    /// A metadata layer named by the table is absent from the inventory.
    LayerMissing,
    /// The inventory holds an object the metadata layers do not name.
    ExtraObject,
    /// An object is missing from storage.
    ObjectMissing,
    /// An object's size differs from the manifest or the inventory.
    SizeMismatch,
    /// An object's BLAKE3 differs from the inventory.
    DigestMismatch,
    /// A path written in metadata is outside the table location; it was not opened.
    PathOutsideTable,
    /// A Parquet footer's row count differs from the manifest's record count.
    RowCountMismatch,
    /// A data file is not readable Parquet.
    DataUnreadable,
    /// A deletion vector (v3) fails a check of the Puffin spec or disagrees with its manifest entry: the
    /// finding names the Puffin file, the blob (offset) and the check (`crc`, `cardinality`, ...).
    DeletionVectorInvalid,
    /// v3 row lineage: row-id ranges of snapshots or data files overlap or reach the table's `next-row-id`.
    RowLineageInvalid,
    /// An object could not be read for a reason other than absence.
    ReadFailed,
    /// A recovered table's metadata differs from the original by more than its paths.
    RewriteMismatch,
    /// A scan of a recovered table does not give the rows its manifests promise.
    ScanMismatch,
    /// A recovery took longer than the plan's RTO limit.
    RtoExceeded,
    /// A backup does not bring back the snapshot its checkpoint declares, declares a recovery point before
    /// its snapshot was committed, or its signed checkpoint (snapshot, recovery point) differs from the
    /// registry's record of that checkpoint.
    CheckpointMismatch,
    /// An inventory entry's `uri` is not its `path` rebased onto the bundle's table root (or, for a
    /// cold backup, its digest under the backup root); it was not opened.
    UriNotDerived,
    /// On the local filesystem, an object's path with symlinks resolved leaves the table root with
    /// symlinks resolved; it was not read.
    SymlinkOutsideTable,
    /// The checkpoint a backup declares is not in the configured registry (for the backup's table): nothing
    /// vouches for the recovery point it signs.
    CheckpointUnregistered,
    /// A recovery could not be carried out (one item of a cold-backup drill): the bundle could not be
    /// materialized or its result checked, for the reason given (a layer lakedrill cannot write back, a target it
    /// refuses, a store error). The item fails; the drill goes on with the others.
    RecoveryFailed,
}

/// One problem, with the object it concerns and what was expected and found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What kind of problem.
    pub kind: FindingKind,
    /// The object (path as written in metadata, or a bundle member).
    pub path: String,
    /// The object actually read, when it is not at `path`: the same file under `--table-root`, a relocated
    /// bundle's table root or a cold backup's `objects/<blake3>`. Absent (not `null`) when `path` is what was
    /// read, so findings written before it existed read and serialize the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// What was expected.
    pub expected: Option<String>,
    /// What was found.
    pub actual: Option<String>,
}

impl Finding {
    /// A finding with expected and actual values.
    #[must_use]
    pub fn new(kind: FindingKind, path: impl Into<String>, expected: Option<String>, actual: Option<String>) -> Self {
        Self {
            kind,
            path: path.into(),
            uri: None,
            expected,
            actual,
        }
    }

    /// This finding, saying that the object it names was read at `uri` (kept only when `uri` is not `path`).
    #[must_use]
    pub fn read_at(mut self, uri: &str) -> Self {
        self.set_read_at(uri);
        self
    }

    /// Says that the object this finding names was read at `uri` (kept only when `uri` is not `path`).
    pub fn set_read_at(&mut self, uri: &str) {
        self.uri = (uri != self.path).then(|| uri.to_owned());
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = serde_json::to_value(self.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        // The object read first (what an operator goes to look at), then the path the metadata writes.
        match &self.uri {
            Some(uri) => write!(f, "{kind} {uri} (path {})", self.path)?,
            None => write!(f, "{kind} {}", self.path)?,
        }
        if let Some(e) = &self.expected {
            write!(f, " expected={e}")?;
        }
        if let Some(a) = &self.actual {
            write!(f, " actual={a}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A finding read where its path says has no `uri` key: findings written before the field existed read and
    /// serialize to the same bytes.
    #[test]
    fn uri_is_absent_when_the_path_is_what_was_read() {
        let old =
            r#"{"kind":"OBJECT_MISSING","path":"file:///t/data/a.parquet","expected":"3 bytes","actual":"absent"}"#;
        let f: Finding = serde_json::from_str(old).unwrap();
        assert_eq!(f.uri, None);
        let f = f.read_at("file:///t/data/a.parquet");
        assert_eq!(f.uri, None);
        assert_eq!(serde_json::to_string(&f).unwrap(), old);
    }

    /// Read elsewhere (under `--table-root`, a backup's `objects/<blake3>`): the finding names both, the object
    /// read first.
    #[test]
    fn a_finding_read_elsewhere_names_the_object_read_and_the_path_written() {
        let f = Finding::new(
            FindingKind::ObjectMissing,
            "file:///t/data/a.parquet",
            Some("3 bytes".into()),
            Some("absent".into()),
        )
        .read_at("file:///copy/data/a.parquet");
        assert_eq!(f.uri.as_deref(), Some("file:///copy/data/a.parquet"));
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(json["uri"], "file:///copy/data/a.parquet");
        assert_eq!(json["path"], "file:///t/data/a.parquet");
        assert_eq!(
            f.to_string(),
            "OBJECT_MISSING file:///copy/data/a.parquet (path file:///t/data/a.parquet) expected=3 bytes actual=absent"
        );
    }
}
