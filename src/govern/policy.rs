//! The retention policy document, `lakehouseRetentionPolicy.v1` (DESIGN §2, §3).
//!
//! What it does: [`parse`] (and [`load`], which reads a file and calls it) turns the YAML an operator wrote
//! into a [`Policy`] in two steps, as ripgrep turns `LowArgs` into `HiArgs`: serde reads the document as
//! written into a private `RawPolicy` (every key known, every value kept as the YAML gave it), and one
//! validation pass turns that into a [`Policy`] whose values are checked, typed (durations are
//! [`chrono::Duration`]) and defaulted. [`Policy::digest`] is the lowercase hex SHA-256 of the exact file
//! bytes, the `policy_digest` that evidence records. [`Policy::check_table`], [`Policy::check_catalog`] and
//! [`Policy::check_format_version`] compare the policy's bindings with the table being governed.
//!
//! What it guarantees:
//! - A [`Policy`] only exists if every rule below holds; there is no way to build one that skips them.
//! - Every rejection names the field and the rule (`policy.yaml: field orphanSafetyInterval: must be greater
//!   than maxWriterDuration (6h)`), so the CLI can exit 2 with a message an operator can act on. Unknown
//!   keys, duplicate keys, several YAML documents in one file and YAML syntax errors are rejected too
//!   ([`PolicyError::Syntax`], with the line and column the YAML parser gives).
//! - Numbers and durations are never coerced: `minSnapshotAge: 30` (no unit), `1.5h`, `3w`, `-1d`, a quoted
//!   `legalHoldGeneration: "19"` and an explicit `null` are all errors, never a default.
//! - Rules: `schema` is `lakehouseRetentionPolicy.v1`; every duration is `<integer><d|h|m|s>` and greater
//!   than zero; `orphanSafetyInterval` is strictly greater than `maxWriterDuration` (it must exceed the
//!   longest writer visibility delay); `protectedRefs` is a non-empty list of non-empty names without
//!   duplicates and without two names that differ only by case (DESIGN §6: such branches are ambiguous);
//!   `legalHoldGeneration` is an integer ≥ 0; `formatVersion` is 1, 2 or 3; `objectVersioning` is
//!   `marker-only` or `permanent`; `reclamationImplementationDigest` is 64 lowercase hex digits or the word
//!   `any` (absent means the deleter refuses to purge: [`Policy::reclamation_implementation`]); `regulatedData` is
//!   a YAML boolean (a YAML 1.1 `yes`/`no` is read as the boolean the parser gives); `minQuarantinePeriod` is a
//!   positive duration; `critical` is a YAML boolean (default false); `recoveryRtoLimit` is a duration of at
//!   most 4h (the default); `rpoTarget` (optional) is a positive duration of at most 92 days
//!   ([`MAX_RPO_TARGET_DAYS`], the quarterly window): the largest RPO a cold-backup
//!   recovery of the table may show for the quarterly gate, which without it wants RPO 0 (DESIGN §7: "RPO equal
//!   to the declared checkpoint"); `evidenceRetention` is a mapping of `mode` (`governance` or `compliance`) and
//!   `period` (a positive duration); `evidenceSigners` (optional) is a non-empty list of key ids, each the 64
//!   lowercase hex digits [`crate::evidence::keys::keyid`] computes, without duplicates: the only keys whose drill
//!   reports count as evidence for deletes of the table;
//!   disaster-recovery points have distinct snapshot ids and RFC 3339 times; `table` is a valid
//!   [`TableBinding`], which always binds the table's UUID (at least [`MIN_UUID_PREFIX_HEX_DIGITS`] hex
//!   digits of it): a bare name is refused.
//!
//! What it does NOT do: it does no I/O besides [`load`] reading one file, and it does not look at any
//! table, catalog, registry or clock. It does not decide what may be deleted: it only hands validated
//! numbers to the planner and the deleter gate. It does not check that the protected refs exist in the
//! table, that the DR points' snapshots exist, or that the running binary matches
//! `reclamationImplementationDigest`; those comparisons belong to the stages that have the table and the
//! binary. It does not normalize the document: the digest is over the bytes as written, so reformatting a
//! policy changes its digest.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

/// The only `schema` value this module accepts.
pub const SCHEMA_V1: &str = "lakehouseRetentionPolicy.v1";

/// Default of `evidenceMaxAge`: drill evidence older than this does not approve a delete.
pub const DEFAULT_EVIDENCE_MAX_AGE: &str = "7d";

/// The longest `evidenceMaxAge` a policy may set, in days.
pub const MAX_EVIDENCE_MAX_AGE_DAYS: i64 = 31;

/// The longest `rpoTarget` a policy may set, in days: the quarterly gate's window (92 days). A cold backup whose
/// recovery may lag its declared point by more than a quarter is not checked by a quarterly gate at all (a policy
/// with `rpoTarget: 36500d`, a hundred years, turned the check off).
pub const MAX_RPO_TARGET_DAYS: i64 = 92;

/// Fewest hex digits a UUID prefix in `table` may have (#23 point 5). Eight hex digits (the first group of the
/// hyphenated form, as in `orders/7f31c2a9...`) leave a 1 in 4 billion chance that another table matches; four
/// left 1 in 65,536, too close for a binding that decides what may be deleted.
pub const MIN_UUID_PREFIX_HEX_DIGITS: usize = 8;

/// A policy with every required field and nothing else: the example of DESIGN §3 with the 8 hex digits of the
/// UUID a `table` binding needs (DESIGN's own `orders/7f31...` has 4 and is refused). It parses.
pub const EXAMPLE: &str = "\
schema: lakehouseRetentionPolicy.v1
table: orders/7f31a2b4...          # table name / UUID (a prefix of at least 8 hex digits of the UUID)
protectedRefs: [main, audit-q2]
minSnapshotAge: 30d
maxReaderLease: 14d
maxWriterDuration: 6h
legalHoldGeneration: 19
orphanSafetyInterval: 12h
";

/// The value of `reclamationImplementationDigest` that accepts every build, written out on purpose.
pub const ANY_IMPLEMENTATION: &str = "any";

/// Why a policy could not be read or is not valid. Every variant means "could not decide" (exit code 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("cannot read policy file {}", path.display())]
    Io {
        /// The file as given.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The document is not valid YAML, is not UTF-8, has an unknown or duplicate key, or a value has the
    /// wrong shape (a list where a string belongs, …). The message comes from the YAML parser and names the
    /// key (unknown and duplicate keys) or the line and column.
    #[error("{source_name}: {message}")]
    Syntax {
        /// The file name used in messages.
        source_name: String,
        /// What the YAML parser said.
        message: String,
    },
    /// A field is missing or breaks a rule.
    #[error("{source_name}: field {field}: {rule}")]
    Field {
        /// The file name used in messages.
        source_name: String,
        /// The field as written in the document (camelCase), with an index for list entries, e.g.
        /// `protectedRefs[1]` or `disasterRecoveryPoints[0].snapshotId`.
        field: String,
        /// The rule it breaks, in words.
        rule: String,
    },
    /// The policy is bound to another table (or catalog, or format version) than the one it is applied to.
    #[error("{source_name}: field {field}: the policy is bound to {expected}, but the table is {actual}")]
    TableMismatch {
        /// The file name used in messages.
        source_name: String,
        /// The binding field: `table`, `catalog` or `formatVersion`.
        field: &'static str,
        /// The binding as written in the policy.
        expected: String,
        /// What the table actually is.
        actual: String,
    },
}

impl From<PolicyError> for crate::Error {
    /// A policy that cannot be used is bad input.
    fn from(e: PolicyError) -> Self {
        crate::Error::module(crate::ErrorKind::BadInput, e)
    }
}

impl PolicyError {
    /// The document field this error is about, if it is about one.
    #[must_use]
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Field { field, .. } => Some(field),
            Self::TableMismatch { field, .. } => Some(field),
            Self::Io { .. } | Self::Syntax { .. } => None,
        }
    }
}

/// A rule broken by one field, before it is tied to a file. [`parse_duration`] returns it so that other
/// modules (command-line flags, drill plans) can name their own fields; [`FieldError::in_source`] turns it
/// into a [`PolicyError::Field`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field {field}: {rule}")]
pub struct FieldError {
    /// The field's name.
    pub field: String,
    /// The rule it breaks, in words.
    pub rule: String,
}

impl FieldError {
    fn new(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            rule: rule.into(),
        }
    }

    /// This error as a [`PolicyError::Field`] of the document `source_name`.
    #[must_use]
    pub fn in_source(self, source_name: &str) -> PolicyError {
        PolicyError::Field {
            source_name: source_name.to_owned(),
            field: self.field,
            rule: self.rule,
        }
    }
}

/// Parses a duration written as one non-negative integer and a unit: `d` (days), `h`, `m` or `s`, as in
/// `30d`, `12h`, `90m`, `30s`. Nothing else is accepted: no sign, no fraction, no space, no other or
/// upper-case unit, no bare number. `0s` parses; callers that need a positive duration check it (every
/// duration of a [`Policy`] must be greater than zero).
///
/// # Errors
///
/// A [`FieldError`] naming `field` and saying what is wrong with `s`.
///
/// # Examples
///
/// ```
/// use lakedrill::govern::policy::parse_duration;
///
/// assert_eq!(parse_duration("maxWriterDuration", "6h")?, chrono::Duration::hours(6));
/// let err = parse_duration("maxWriterDuration", "1.5h").unwrap_err();
/// assert_eq!(err.field, "maxWriterDuration");
/// # Ok::<(), lakedrill::govern::policy::FieldError>(())
/// ```
pub fn parse_duration(field: &str, s: &str) -> Result<chrono::Duration, FieldError> {
    crate::clock::parse_duration(s).map_err(|reason| FieldError::new(field, reason))
}

/// Which table a policy governs, from `table`: the table's UUID (a prefix of it), optionally after its name.
///
/// Written forms:
/// - `NAME/UUIDPREFIX`: `orders/7f31c2a9...`, `orders/7f31a2b4-09c1`, or a whole UUID after the slash;
/// - a UUID prefix alone: `/7f31c2a9...`, `7f31c2a9...` (the elision marker says it is a prefix), or a
///   whole hyphenated UUID.
///
/// A bare name (`orders`, `sales.orders`) is refused (#23 point 5): a name is reused when a table is dropped
/// and recreated, or exists in another catalog, and a policy must never govern a table it was not written
/// for. The UUID is what Iceberg keeps for the life of a table (`table-uuid` in its metadata).
///
/// A trailing `...` or `…` on the UUID prefix only marks the elision and is dropped. The prefix must be a
/// prefix of the canonical hyphenated form (`7f31a2b4-09c1-…`: hex digits, dashes exactly where the
/// canonical form has them), with at least [`MIN_UUID_PREFIX_HEX_DIGITS`] hex digits; it is compared
/// case-insensitively. A bare word without a marker (`7f31c2a9`) is a name, never a prefix, and so refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableBinding {
    name: Option<String>,
    uuid_prefix: String,
}

impl TableBinding {
    /// The table name, if the binding has one.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The UUID prefix in lower case and without the elision marker (every binding has one).
    #[must_use]
    pub fn uuid_prefix(&self) -> &str {
        &self.uuid_prefix
    }

    /// Whether `table_uuid` is the table bound, by its UUID alone: its canonical hyphenated form starts with
    /// the prefix, ignoring case. This is how a drill, which knows a bundle's table UUID but not the name a
    /// catalog gives it, finds the policy of a table.
    #[must_use]
    pub fn matches_uuid(&self, table_uuid: &uuid::Uuid) -> bool {
        let mut buf = uuid::Uuid::encode_buffer();
        table_uuid
            .hyphenated()
            .encode_lower(&mut buf)
            .starts_with(&self.uuid_prefix)
    }

    /// Whether a table bound by `self` could also be bound by `other`: one UUID prefix starts with the other.
    #[must_use]
    pub fn overlaps(&self, other: &TableBinding) -> bool {
        self.uuid_prefix.starts_with(&other.uuid_prefix) || other.uuid_prefix.starts_with(&self.uuid_prefix)
    }

    /// Whether a table with this name and UUID is the one bound. The name matches if it equals
    /// `table_name` or its last dot-separated components (`orders` and `sales.orders` both match
    /// `db.sales.orders`); the UUID prefix matches if the canonical hyphenated form of `table_uuid` starts
    /// with it, ignoring case.
    #[must_use]
    pub fn matches(&self, table_name: &str, table_uuid: &uuid::Uuid) -> bool {
        let name_ok = self.name.as_deref().is_none_or(|name| {
            table_name == name || table_name.strip_suffix(name).is_some_and(|rest| rest.ends_with('.'))
        });
        name_ok && self.matches_uuid(table_uuid)
    }
}

impl fmt::Display for TableBinding {
    /// The binding in its written form, with `...` after a partial UUID: `orders/7f31c2a9...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = &self.name {
            f.write_str(name)?;
        }
        let prefix = &self.uuid_prefix;
        let elided = if prefix.len() < HYPHENATED_UUID_LEN { "..." } else { "" };
        write!(f, "/{prefix}{elided}")
    }
}

impl FromStr for TableBinding {
    type Err = FieldError;

    /// Parses the `table` field; see [`TableBinding`] for the forms.
    fn from_str(s: &str) -> Result<Self, FieldError> {
        let bad = |rule: String| FieldError::new("table", rule);
        if s.trim().is_empty() {
            return Err(bad(format!(
                "must bind the table's UUID, as NAME/UUIDPREFIX (e.g. `table: orders/7f31c2a9...`) or a UUID \
                 prefix alone, with at least {MIN_UUID_PREFIX_HEX_DIGITS} hex digits of the UUID"
            )));
        }
        if s.trim() != s {
            return Err(bad(format!("must not start or end with whitespace, got {s:?}")));
        }
        let (name, prefix) = match s.split_once('/') {
            Some((name, prefix)) => (name, prefix),
            None if strip_elision(s).is_some() || is_full_uuid(s) => ("", s),
            // See: #23 point 5. A name alone is reused by a recreated table or a table of another catalog.
            None => {
                return Err(bad(format!(
                    "must bind the table's UUID, not only its name: write NAME/UUIDPREFIX with at least \
                     {MIN_UUID_PREFIX_HEX_DIGITS} hex digits of the table's UUID (`table-uuid` in its metadata), \
                     e.g. `table: {s}/7f31c2a9...`, got {s:?}"
                )));
            }
        };
        let name = if name.is_empty() {
            None
        } else {
            if strip_elision(name).is_some() {
                return Err(bad(format!(
                    "the elision marker is only allowed after the UUID prefix, got {s:?}"
                )));
            }
            if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(bad(format!("the table name must not contain whitespace, got {name:?}")));
            }
            Some(name.to_owned())
        };
        let uuid_prefix = parse_uuid_prefix(prefix)
            .map_err(|rule| bad(format!("{rule} (e.g. `table: orders/7f31c2a9...`), got {s:?}")))?;
        Ok(Self { name, uuid_prefix })
    }
}

const HYPHENATED_UUID_LEN: usize = 36;
const UUID_DASH_POSITIONS: [usize; 4] = [8, 13, 18, 23];

fn strip_elision(s: &str) -> Option<&str> {
    s.strip_suffix("...").or_else(|| s.strip_suffix('…'))
}

fn is_full_uuid(s: &str) -> bool {
    s.len() == HYPHENATED_UUID_LEN && parse_uuid_prefix(s).is_ok()
}

/// Validates a UUID prefix against the canonical hyphenated form and returns it in lower case.
fn parse_uuid_prefix(written: &str) -> Result<String, String> {
    let prefix = strip_elision(written).unwrap_or(written);
    if prefix.contains('/') {
        return Err("must contain at most one `/`".to_owned());
    }
    if prefix.is_empty() {
        return Err("the UUID prefix after `/` is empty".to_owned());
    }
    if prefix.len() > HYPHENATED_UUID_LEN {
        return Err("the UUID prefix is longer than a hyphenated UUID".to_owned());
    }
    for (i, c) in prefix.chars().enumerate() {
        let dash_here = UUID_DASH_POSITIONS.contains(&i);
        let ok = if dash_here { c == '-' } else { c.is_ascii_hexdigit() };
        if !ok {
            // Hyphens are part of the comparison: a prefix is checked against the canonical hyphenated
            // form, so `7f31a2b409c1` (no dash) cannot match anything and is refused here.
            return Err(
                "the UUID prefix must be hex digits and dashes as in the hyphenated form \
                 (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
                    .to_owned(),
            );
        }
    }
    let hex_digits = prefix.chars().filter(char::is_ascii_hexdigit).count();
    if hex_digits < MIN_UUID_PREFIX_HEX_DIGITS {
        return Err(format!(
            "the UUID prefix must have at least {MIN_UUID_PREFIX_HEX_DIGITS} hex digits"
        ));
    }
    Ok(prefix.to_ascii_lowercase())
}

/// Which builds may purge under a policy (`reclamationImplementationDigest`, #23 point 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReclamationImplementation {
    /// `any`: the policy says explicitly that every build may purge.
    Any,
    /// 64 lowercase hex digits: only the build whose SHA-256 this is may purge.
    Pinned(String),
}

impl ReclamationImplementation {
    /// The value as written in the policy: `any` or the digest.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Any => ANY_IMPLEMENTATION,
            Self::Pinned(d) => d,
        }
    }
}

/// How the deleter removes an object from a versioned bucket (`objectVersioning`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectVersioning {
    /// `marker-only` (the default): delete without a version ID, leaving a delete marker; the object's
    /// versions stay recoverable until the bucket's lifecycle rules remove them.
    #[default]
    MarkerOnly,
    /// `permanent`: delete the exact version ID recorded in the inventory; nothing is left to recover.
    Permanent,
}

impl ObjectVersioning {
    /// The value as written in the policy: `marker-only` or `permanent`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MarkerOnly => "marker-only",
            Self::Permanent => "permanent",
        }
    }
}

impl fmt::Display for ObjectVersioning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How long signed evidence stays write-protected where it is stored (`evidenceRetention`): on an S3 bucket with
/// Object Lock, every signed report, retirement record, inventory archive and purge summary lakedrill writes
/// there carries this retention (DESIGN, "Evidence under Object Lock").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EvidenceRetention {
    /// Object Lock mode.
    pub mode: LockMode,
    /// How long after writing each file stays locked.
    #[serde(serialize_with = "serialize_duration_secs")]
    pub period: chrono::Duration,
}

fn serialize_duration_secs<S: serde::Serializer>(d: &chrono::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64(d.num_seconds())
}

/// An S3 Object Lock retention mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LockMode {
    /// `GOVERNANCE`: users with `s3:BypassGovernanceRetention` may still delete or shorten it.
    Governance,
    /// `COMPLIANCE`: nobody, the root account included, can delete the version or shorten its retention.
    Compliance,
}

impl LockMode {
    /// `governance` or `compliance` as written in a policy or plan.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "governance" => Some(Self::Governance),
            "compliance" => Some(Self::Compliance),
            _ => None,
        }
    }

    /// The S3 header value: `GOVERNANCE` or `COMPLIANCE`.
    #[must_use]
    pub fn s3_value(self) -> &'static str {
        match self {
            Self::Governance => "GOVERNANCE",
            Self::Compliance => "COMPLIANCE",
        }
    }
}

/// A declared disaster-recovery point (`disasterRecoveryPoints[]`): a snapshot that backups must be able to
/// restore, and optionally the time it stands for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrPoint {
    snapshot_id: i64,
    at: Option<DateTime<Utc>>,
}

impl DrPoint {
    /// The Iceberg snapshot ID.
    #[must_use]
    pub fn snapshot_id(&self) -> i64 {
        self.snapshot_id
    }

    /// The recovery point's time, if the policy gives one.
    #[must_use]
    pub fn at(&self) -> Option<DateTime<Utc>> {
        self.at
    }
}

/// Whether the `protectedRefs` entry `protected` names the table's ref `ref_name`: ignoring case, as
/// [`Policy::is_protected_ref`] says why (a policy's `Audit-Q2` keeps the table's `audit-q2`, and both of `Main` and
/// `main`).
#[must_use]
pub fn protects_ref(protected: &str, ref_name: &str) -> bool {
    protected == ref_name || protected.to_lowercase() == ref_name.to_lowercase()
}

/// A validated `lakehouseRetentionPolicy.v1` document, with defaults applied. Built only by [`parse`] and
/// [`load`].
#[derive(Debug, Clone)]
pub struct Policy {
    source_name: String,
    digest: String,
    table: TableBinding,
    protected_refs: Vec<String>,
    min_snapshot_age: chrono::Duration,
    max_reader_lease: chrono::Duration,
    max_writer_duration: chrono::Duration,
    orphan_safety_interval: chrono::Duration,
    legal_hold_generation: u64,
    format_version: Option<u8>,
    catalog: Option<String>,
    dr_points: Vec<DrPoint>,
    object_versioning: ObjectVersioning,
    reclamation_implementation: Option<ReclamationImplementation>,
    evidence_max_age: chrono::Duration,
    max_unreconciled_unknowns: u32,
    regulated_data: Option<bool>,
    min_quarantine_period: Option<chrono::Duration>,
    critical: bool,
    recovery_rto_limit: chrono::Duration,
    rpo_target: Option<chrono::Duration>,
    evidence_retention: Option<EvidenceRetention>,
    evidence_signers: Option<Vec<String>>,
    orphan_quarantine: Option<String>,
}

/// The quarterly recovery gate's RTO limit when the policy sets none (`recoveryRtoLimit`): DESIGN §7's 4 hours.
pub const DEFAULT_RECOVERY_RTO_LIMIT: &str = "4h";

impl Policy {
    /// `evidenceSigners`, if set: the key ids (lowercase hex, [`crate::evidence::keys::keyid`]) whose drill reports
    /// count as evidence for this table. The policy binds the table, so this binds the drill keys to the table: the
    /// deleter, the weekly gate and the quarterly gate count only a report signed by one of them (whatever else the
    /// trust folder's drill role holds). `None`: every key with the drill role of the trust folder counts.
    #[must_use]
    pub fn evidence_signers(&self) -> Option<&[String]> {
        self.evidence_signers.as_deref()
    }

    /// `evidenceRetention`, if set: the Object Lock retention of the evidence lakedrill writes for this table.
    #[must_use]
    pub fn evidence_retention(&self) -> Option<EvidenceRetention> {
        self.evidence_retention
    }

    /// `critical`: whether the deleter also needs the quarterly recovery gate for this table (a cold-backup
    /// drill of it within 92 days, under [`Policy::recovery_rto_limit`]). Default `false`.
    #[must_use]
    pub fn critical(&self) -> bool {
        self.critical
    }

    /// `recoveryRtoLimit`: the longest a recovery of this table may take for the quarterly gate to pass;
    /// at most (and by default) 4 hours.
    #[must_use]
    pub fn recovery_rto_limit(&self) -> chrono::Duration {
        self.recovery_rto_limit
    }

    /// `rpoTarget`: the largest RPO (declared checkpoint time minus the recovered snapshot's commit time) a
    /// cold-backup recovery of this table may show for the quarterly gate to pass. `None` when the policy sets
    /// none: the gate then wants RPO 0, the recovered snapshot being the declared point (DESIGN §7).
    #[must_use]
    pub fn rpo_target(&self) -> Option<chrono::Duration> {
        self.rpo_target
    }

    /// `regulatedData` as declared: `Some(false)` only when the policy explicitly says the table holds no
    /// regulated data (required for the `test` rollout stage); `None` when the policy does not say.
    #[must_use]
    pub fn regulated_data(&self) -> Option<bool> {
        self.regulated_data
    }

    /// `minQuarantinePeriod`: how long a candidate stays quarantined before a purge may be accepted, if set.
    #[must_use]
    pub fn min_quarantine_period(&self) -> Option<chrono::Duration> {
        self.min_quarantine_period
    }

    /// The `schema` value, always [`SCHEMA_V1`].
    #[must_use]
    pub fn schema(&self) -> &'static str {
        SCHEMA_V1
    }

    /// The file name used in messages, as given to [`parse`] or [`load`].
    #[must_use]
    pub fn source_name(&self) -> &str {
        &self.source_name
    }

    /// Lowercase hex SHA-256 of the exact bytes the policy was parsed from; evidence records it as
    /// `policy_digest`.
    #[must_use]
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The table the policy governs (`table`).
    #[must_use]
    pub fn table(&self) -> &TableBinding {
        &self.table
    }

    /// The refs that are never expired (`protectedRefs`), in the order written.
    #[must_use]
    pub fn protected_refs(&self) -> &[String] {
        &self.protected_refs
    }

    /// Whether `ref_name` is protected. The comparison ignores case on purpose: if the table has both
    /// `Main` and `main` and the policy protects `main`, both are kept (DESIGN §6, branch names that differ
    /// only by case); protecting too much delays reclamation, protecting too little loses data.
    #[must_use]
    pub fn is_protected_ref(&self, ref_name: &str) -> bool {
        self.protected_refs.iter().any(|r| protects_ref(r, ref_name))
    }

    /// Snapshots younger than this are never expired (`minSnapshotAge`).
    #[must_use]
    pub fn min_snapshot_age(&self) -> chrono::Duration {
        self.min_snapshot_age
    }

    /// The longest a reader lease may last (`maxReaderLease`).
    #[must_use]
    pub fn max_reader_lease(&self) -> chrono::Duration {
        self.max_reader_lease
    }

    /// The longest a writer may stay in flight before it commits (`maxWriterDuration`).
    #[must_use]
    pub fn max_writer_duration(&self) -> chrono::Duration {
        self.max_writer_duration
    }

    /// Unreferenced objects younger than this are never candidates (`orphanSafetyInterval`); always greater
    /// than [`Policy::max_writer_duration`].
    #[must_use]
    pub fn orphan_safety_interval(&self) -> chrono::Duration {
        self.orphan_safety_interval
    }

    /// The legal-hold generation the policy was written against (`legalHoldGeneration`).
    #[must_use]
    pub fn legal_hold_generation(&self) -> u64 {
        self.legal_hold_generation
    }

    /// The declared disaster-recovery points (`disasterRecoveryPoints`), in the order written, with
    /// distinct snapshot IDs; empty if none are declared.
    #[must_use]
    pub fn dr_points(&self) -> &[DrPoint] {
        &self.dr_points
    }

    /// Where orphans of a table on a store without versions are copied write-once at quarantine
    /// (`orphanQuarantine`, canonical URI; the copies go to `<it>/<table uuid>/<candidate id>/<BLAKE3>-<path
    /// digest>.orphan-copy`, one per held file). Without it, orphans can be quarantined only on a versioned bucket.
    #[must_use]
    pub fn orphan_quarantine(&self) -> Option<&str> {
        self.orphan_quarantine.as_deref()
    }

    /// How deletes treat versioned buckets (`objectVersioning`, default [`ObjectVersioning::MarkerOnly`]).
    #[must_use]
    pub fn object_versioning(&self) -> ObjectVersioning {
        self.object_versioning
    }

    /// Lowercase hex SHA-256 of the deleter binary the policy allows (`reclamationImplementationDigest`),
    /// if the policy pins one (`None` both when the field is absent and when it says `any`).
    #[must_use]
    pub fn reclamation_implementation_digest(&self) -> Option<&str> {
        match &self.reclamation_implementation {
            Some(ReclamationImplementation::Pinned(d)) => Some(d),
            _ => None,
        }
    }

    /// `reclamationImplementationDigest` as written: a pinned build, `any`, or `None` when the field is absent.
    /// Absent means that no build may purge (the deleter refuses, naming the field and its own digest): a
    /// policy allows every build only by saying `any`.
    #[must_use]
    pub fn reclamation_implementation(&self) -> Option<&ReclamationImplementation> {
        self.reclamation_implementation.as_ref()
    }

    /// How fresh drill evidence must be to approve a delete (`evidenceMaxAge`, default 7 days).
    #[must_use]
    pub fn evidence_max_age(&self) -> chrono::Duration {
        self.evidence_max_age
    }

    /// How many unreconciled `DELETE_UNKNOWN` entries may exist before deletes stop
    /// (`maxUnreconciledUnknowns`, default 0).
    #[must_use]
    pub fn max_unreconciled_unknowns(&self) -> u32 {
        self.max_unreconciled_unknowns
    }

    /// The Iceberg format version the policy is bound to (`formatVersion`: 1, 2 or 3), if any.
    #[must_use]
    pub fn format_version(&self) -> Option<u8> {
        self.format_version
    }

    /// The catalog the policy is bound to (`catalog`), if any.
    #[must_use]
    pub fn catalog(&self) -> Option<&str> {
        self.catalog.as_deref()
    }

    /// Checks that the table being governed is the one in `table`; see [`TableBinding::matches`].
    ///
    /// # Errors
    ///
    /// [`PolicyError::TableMismatch`] with field `table` if the name or the UUID prefix differs.
    pub fn check_table(&self, table_name: &str, table_uuid: &uuid::Uuid) -> Result<(), PolicyError> {
        if self.table.matches(table_name, table_uuid) {
            return Ok(());
        }
        Err(self.mismatch("table", self.table.to_string(), format!("{table_name}/{table_uuid}")))
    }

    /// Checks the table's format version against `formatVersion`; a policy without one accepts any.
    ///
    /// # Errors
    ///
    /// [`PolicyError::TableMismatch`] with field `formatVersion` if the versions differ.
    pub fn check_format_version(&self, table_format_version: u8) -> Result<(), PolicyError> {
        match self.format_version {
            Some(v) if v != table_format_version => {
                Err(self.mismatch("formatVersion", v.to_string(), table_format_version.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// Checks the catalog the table was loaded from against `catalog`; a policy without one accepts any.
    ///
    /// # Errors
    ///
    /// [`PolicyError::TableMismatch`] with field `catalog` if the names differ (compared exactly).
    pub fn check_catalog(&self, catalog_name: &str) -> Result<(), PolicyError> {
        match &self.catalog {
            Some(c) if c != catalog_name => Err(self.mismatch("catalog", c.clone(), catalog_name.to_owned())),
            _ => Ok(()),
        }
    }

    fn mismatch(&self, field: &'static str, expected: String, actual: String) -> PolicyError {
        PolicyError::TableMismatch {
            source_name: self.source_name.clone(),
            field,
            expected,
            actual,
        }
    }
}

/// Reads and validates the policy file at `path`; messages name the file as `path` displays.
///
/// # Errors
///
/// [`PolicyError::Io`] if the file cannot be read, otherwise as [`parse`].
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    use std::io::Read;
    let io = |source| PolicyError::Io {
        path: path.to_owned(),
        source,
    };
    // Bounded: a policy is a page of YAML, and a path naming a device or a huge file must not be read whole.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_POLICY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_POLICY_BYTES {
        return Err(PolicyError::Syntax {
            source_name: path.display().to_string(),
            message: format!("is larger than the policy file bound of {MAX_POLICY_BYTES} bytes (1 MiB)"),
        });
    }
    parse(&bytes, &path.display().to_string())
}

/// The largest policy file [`load`] reads: 1 MiB. A policy is a few dozen lines; the bound only keeps a path that
/// names a device, a pipe or a large file by mistake from being read whole into memory.
pub const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// Validates a policy document given as the exact bytes of the file; `source` is the file name used in
/// messages. The digest is computed over `bytes` as given.
///
/// # Errors
///
/// [`PolicyError::Syntax`] if the bytes are not UTF-8 or not one YAML mapping with known, distinct keys
/// and values of the right shape; [`PolicyError::Field`] naming the first field that is missing or breaks
/// a rule.
///
/// # Examples
///
/// ```
/// let doc = lakedrill::govern::policy::EXAMPLE.as_bytes();
/// let policy = lakedrill::govern::policy::parse(doc, "policy.yaml")?;
/// assert_eq!(policy.max_writer_duration(), chrono::Duration::hours(6));
///
/// let err = lakedrill::govern::policy::parse(&[doc, b"colour: red\n".as_slice()].concat(), "policy.yaml").unwrap_err();
/// assert!(err.to_string().contains("colour"));
/// # Ok::<(), lakedrill::govern::policy::PolicyError>(())
/// ```
pub fn parse(bytes: &[u8], source: &str) -> Result<Policy, PolicyError> {
    let digest = hex::encode(Sha256::digest(bytes));
    let syntax = |message: String| PolicyError::Syntax {
        source_name: source.to_owned(),
        message,
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|e| syntax(format!("is not UTF-8 (invalid byte at offset {})", e.valid_up_to())))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(syntax("is empty".to_owned()));
    }
    // Defaults of serde-saphyr kept on purpose: duplicate keys are errors, only one document is accepted,
    // and the parse runs under its resource budget (alias bombs, deep nesting). Snippets are off because
    // the message must fit on the one line the CLI prints after the file name. Merge keys (`<<:`), which
    // serde-saphyr expands by default, are refused: a merged mapping hides which keys the policy sets (and a
    // key given both ways is taken from the mapping, not reported as a duplicate).
    let options = serde_saphyr::options! {
        with_snippet: false,
        merge_keys: serde_saphyr::MergeKeyPolicy::Error,
    };
    let raw: RawPolicy = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        // The parser's advice to programmers means nothing to an operator editing the file.
        syntax(
            e.to_string()
                .replace(", set DuplicateKeyPolicy in Options if acceptable", "")
                .replace(
                    "YAML merge keys are not allowed by configured policy",
                    "YAML merge keys (`<<:`) are not allowed in a policy: write each key out",
                ),
        )
    })?;
    let mut policy = raw.validate(digest).map_err(|e| e.in_source(source))?;
    source.clone_into(&mut policy.source_name);
    Ok(policy)
}

/// A scalar exactly as YAML gave it, so that validation (not serde) decides what is acceptable and can
/// name the field: `30` for a duration, `"19"` for a number and `null` anywhere are errors with the field
/// name, not coercions or defaults.
#[derive(Debug, Clone, Default, PartialEq)]
enum Scalar {
    /// The key is not in the document.
    #[default]
    Absent,
    /// `null`, `~` or an empty value.
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
}

impl Scalar {
    fn describe(&self) -> String {
        match self {
            Self::Absent => "nothing".to_owned(),
            Self::Null => "null".to_owned(),
            Self::Bool(b) => format!("the boolean {b}"),
            Self::Int(i) => format!("the bare number {i}"),
            Self::Float(x) => format!("the number {x}"),
            Self::Str(s) => format!("the string {s:?}"),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v.into()))
            }
            fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Scalar, E> {
                i128::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom(format!("number {v} is too large")))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(v))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
                d.deserialize_any(self)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A key that may be absent, explicitly `null`, or given. Unlike `Option`, it keeps `null` apart from a
/// missing key, so that `catalog: ~` is an error rather than a silent "no catalog binding".
#[derive(Debug, Default)]
enum Given<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> Given<T> {
    /// `None` if the key is absent, the value if it is given; an explicit `null` is an error.
    fn optional(self, field: &str) -> Result<Option<T>, FieldError> {
        match self {
            Self::Absent => Ok(None),
            Self::Null => Err(null_not_allowed(field)),
            Self::Value(v) => Ok(Some(v)),
        }
    }

    /// The value; an absent key or an explicit `null` is an error.
    fn required(self, field: &str) -> Result<T, FieldError> {
        self.optional(field)?.ok_or_else(|| required(field))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Given<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Only called for a key that is present (absent keys take `Default`), so `None` is `null`.
        Option::<T>::deserialize(deserializer).map(|v| v.map_or(Self::Null, Self::Value))
    }
}

/// The document as written. Every key may be absent here so that a missing one is reported by
/// validation as `field X: is required` rather than by serde; strings that must keep their exact text
/// (names, digests) are `String`, numbers and durations are [`Scalar`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawPolicy {
    #[serde(default)]
    schema: Given<String>,
    #[serde(default)]
    table: Given<String>,
    #[serde(default)]
    protected_refs: Given<Vec<String>>,
    #[serde(default)]
    min_snapshot_age: Scalar,
    #[serde(default)]
    max_reader_lease: Scalar,
    #[serde(default)]
    max_writer_duration: Scalar,
    #[serde(default)]
    legal_hold_generation: Scalar,
    #[serde(default)]
    orphan_safety_interval: Scalar,
    #[serde(default)]
    format_version: Scalar,
    #[serde(default)]
    catalog: Given<String>,
    #[serde(default)]
    disaster_recovery_points: Given<Vec<RawDrPoint>>,
    #[serde(default)]
    object_versioning: Given<String>,
    #[serde(default)]
    reclamation_implementation_digest: Given<String>,
    #[serde(default)]
    evidence_max_age: Scalar,
    #[serde(default)]
    max_unreconciled_unknowns: Scalar,
    #[serde(default)]
    regulated_data: Scalar,
    #[serde(default)]
    min_quarantine_period: Scalar,
    #[serde(default)]
    critical: Scalar,
    #[serde(default)]
    recovery_rto_limit: Scalar,
    #[serde(default)]
    rpo_target: Scalar,
    #[serde(default)]
    evidence_retention: Given<RawEvidenceRetention>,
    #[serde(default)]
    evidence_signers: Given<Vec<String>>,
    #[serde(default)]
    orphan_quarantine: Given<String>,
}

/// `evidenceRetention` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvidenceRetention {
    #[serde(default)]
    mode: Given<String>,
    #[serde(default)]
    period: Scalar,
}

/// One `disasterRecoveryPoints` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawDrPoint {
    #[serde(default)]
    snapshot_id: Scalar,
    #[serde(default)]
    at: Given<String>,
}

/// A validated duration and its text as written, for messages.
struct WrittenDuration {
    value: chrono::Duration,
    text: String,
}

impl RawPolicy {
    /// Applies every rule, in document order, and returns the first field that breaks one.
    fn validate(self, digest: String) -> Result<Policy, FieldError> {
        let schema = self.schema.required("schema")?;
        if schema != SCHEMA_V1 {
            return Err(FieldError::new(
                "schema",
                format!("must be {SCHEMA_V1}, got {schema:?}"),
            ));
        }
        let table: TableBinding = self.table.required("table")?.parse()?;
        let protected_refs = validate_protected_refs(self.protected_refs.required("protectedRefs")?)?;
        let min_snapshot_age = duration("minSnapshotAge", &self.min_snapshot_age, None)?;
        let max_reader_lease = duration("maxReaderLease", &self.max_reader_lease, None)?;
        let max_writer_duration = duration("maxWriterDuration", &self.max_writer_duration, None)?;
        let legal_hold_generation = integer("legalHoldGeneration", &self.legal_hold_generation, None)?;
        let orphan_safety_interval = duration("orphanSafetyInterval", &self.orphan_safety_interval, None)?;
        // DESIGN §3: the interval must exceed the longest writer visibility delay; an object uploaded by a
        // writer still in flight must never look like an orphan.
        if orphan_safety_interval.value <= max_writer_duration.value {
            return Err(FieldError::new(
                "orphanSafetyInterval",
                format!(
                    "must be greater than maxWriterDuration ({}), got {}",
                    max_writer_duration.text, orphan_safety_interval.text
                ),
            ));
        }
        let format_version = match &self.format_version {
            Scalar::Absent => None,
            Scalar::Int(v @ 1..=3) => u8::try_from(*v).ok(),
            other => {
                return Err(FieldError::new(
                    "formatVersion",
                    format!("must be 1, 2 or 3, got {}", other.describe()),
                ));
            }
        };
        let catalog = match self.catalog.optional("catalog")? {
            Some(c) if c.trim().is_empty() || c.trim() != c => {
                return Err(FieldError::new(
                    "catalog",
                    format!("must be a non-empty name without surrounding whitespace, got {c:?}"),
                ));
            }
            c => c,
        };
        let dr_points = validate_dr_points(
            self.disaster_recovery_points
                .optional("disasterRecoveryPoints")?
                .unwrap_or_default(),
        )?;
        let object_versioning = match self.object_versioning.optional("objectVersioning")?.as_deref() {
            None => ObjectVersioning::default(),
            Some("marker-only") => ObjectVersioning::MarkerOnly,
            Some("permanent") => ObjectVersioning::Permanent,
            Some(other) => {
                return Err(FieldError::new(
                    "objectVersioning",
                    format!("must be marker-only or permanent, got {other:?}"),
                ));
            }
        };
        let orphan_quarantine = match self.orphan_quarantine.optional("orphanQuarantine")? {
            None => None,
            // A policy means the same wherever it is read: no path relative to the current directory.
            Some(u) if !(u.contains("://") || u.starts_with("file:") || u.starts_with('/')) => {
                return Err(FieldError::new(
                    "orphanQuarantine",
                    format!("must be a storage URI or an absolute path, got the relative path {u:?}"),
                ));
            }
            Some(u) => Some(crate::model::location::canonical_uri(&u).map_err(|e| {
                FieldError::new(
                    "orphanQuarantine",
                    format!("must be a storage URI or an absolute path for the orphans' write-once copies: {e}"),
                )
            })?),
        };
        let reclamation_implementation = match self
            .reclamation_implementation_digest
            .optional("reclamationImplementationDigest")?
        {
            None => None,
            Some(d) if d == ANY_IMPLEMENTATION => Some(ReclamationImplementation::Any),
            Some(d) if is_sha256_hex(&d) => Some(ReclamationImplementation::Pinned(d)),
            Some(d) => {
                return Err(FieldError::new(
                    "reclamationImplementationDigest",
                    format!(
                        "must be a SHA-256 as 64 lowercase hex digits (`lakedrill version` prints this build's) or \
                         the word {ANY_IMPLEMENTATION} to accept every build, got {d:?}"
                    ),
                ));
            }
        };
        let evidence_max_age = duration("evidenceMaxAge", &self.evidence_max_age, Some(DEFAULT_EVIDENCE_MAX_AGE))?;
        // The weekly gate's freshness: a policy cannot turn it into a yearly one (a bound policy with `3650d` let a
        // drill from years ago keep deleting).
        if evidence_max_age.value > chrono::Duration::days(MAX_EVIDENCE_MAX_AGE_DAYS) {
            return Err(FieldError::new(
                "evidenceMaxAge",
                format!(
                    "must be at most {MAX_EVIDENCE_MAX_AGE_DAYS}d (drill evidence older than a month proves little \
                     about bundles drilled weekly), got {}",
                    evidence_max_age.text
                ),
            ));
        }
        let max_unreconciled_unknowns = integer("maxUnreconciledUnknowns", &self.max_unreconciled_unknowns, Some(0))?;
        let max_unreconciled_unknowns = u32::try_from(max_unreconciled_unknowns).map_err(|_| {
            FieldError::new(
                "maxUnreconciledUnknowns",
                format!("must be at most {}, got {max_unreconciled_unknowns}", u32::MAX),
            )
        })?;
        let regulated_data = match &self.regulated_data {
            Scalar::Absent => None,
            Scalar::Bool(b) => Some(*b),
            Scalar::Null => return Err(null_not_allowed("regulatedData")),
            other => {
                return Err(FieldError::new(
                    "regulatedData",
                    format!("must be true or false (unquoted), got {}", other.describe()),
                ));
            }
        };
        let min_quarantine_period = match &self.min_quarantine_period {
            Scalar::Absent => None,
            v => Some(duration("minQuarantinePeriod", v, None)?.value),
        };
        let critical = match &self.critical {
            Scalar::Absent => false,
            Scalar::Bool(b) => *b,
            Scalar::Null => return Err(null_not_allowed("critical")),
            other => {
                return Err(FieldError::new(
                    "critical",
                    format!("must be true or false (unquoted), got {}", other.describe()),
                ));
            }
        };
        let recovery_rto_limit = duration(
            "recoveryRtoLimit",
            &self.recovery_rto_limit,
            Some(DEFAULT_RECOVERY_RTO_LIMIT),
        )?;
        if recovery_rto_limit.value > chrono::Duration::hours(4) {
            return Err(FieldError::new(
                "recoveryRtoLimit",
                format!(
                    "may only be stricter than the gate's 4h, got {}",
                    recovery_rto_limit.text
                ),
            ));
        }
        let rpo_target = match &self.rpo_target {
            Scalar::Absent => None,
            v => {
                let d = duration("rpoTarget", v, None)?;
                // As `evidenceMaxAge`: a policy cannot switch the quarterly RPO check off with a huge target.
                if d.value > chrono::Duration::days(MAX_RPO_TARGET_DAYS) {
                    return Err(FieldError::new(
                        "rpoTarget",
                        format!(
                            "must be at most {MAX_RPO_TARGET_DAYS}d (the quarterly gate's window: a larger target \
                             lets a recovery lag its declared point by more than the quarter the gate checks), got {}",
                            d.text
                        ),
                    ));
                }
                Some(d.value)
            }
        };
        let evidence_retention = match self.evidence_retention.optional("evidenceRetention")? {
            None => None,
            Some(r) => {
                let written = r.mode.required("evidenceRetention.mode")?;
                let mode = LockMode::parse(&written).ok_or_else(|| {
                    FieldError::new(
                        "evidenceRetention.mode",
                        format!("must be governance or compliance, got {written:?}"),
                    )
                })?;
                let period = duration("evidenceRetention.period", &r.period, None)?.value;
                Some(EvidenceRetention { mode, period })
            }
        };
        let evidence_signers = self
            .evidence_signers
            .optional("evidenceSigners")?
            .map(validate_evidence_signers)
            .transpose()?;
        Ok(Policy {
            orphan_quarantine,
            evidence_retention,
            evidence_signers,
            regulated_data,
            min_quarantine_period,
            critical,
            recovery_rto_limit: recovery_rto_limit.value,
            rpo_target,
            source_name: String::new(),
            digest,
            table,
            protected_refs,
            min_snapshot_age: min_snapshot_age.value,
            max_reader_lease: max_reader_lease.value,
            max_writer_duration: max_writer_duration.value,
            orphan_safety_interval: orphan_safety_interval.value,
            legal_hold_generation,
            format_version,
            catalog,
            dr_points,
            object_versioning,
            reclamation_implementation,
            evidence_max_age: evidence_max_age.value,
            max_unreconciled_unknowns,
        })
    }
}

fn required(field: &str) -> FieldError {
    FieldError::new(field, "is required")
}

fn null_not_allowed(field: &str) -> FieldError {
    FieldError::new(
        field,
        "must not be null (leave the field out to use its default, if it has one)",
    )
}

/// A positive duration; `default` is used only when the key is absent, never for an explicit `null`.
fn duration(field: &str, value: &Scalar, default: Option<&str>) -> Result<WrittenDuration, FieldError> {
    let text = match (value, default) {
        (Scalar::Str(s), _) => s.as_str(),
        (Scalar::Absent, Some(d)) => d,
        (Scalar::Absent, None) => return Err(required(field)),
        (Scalar::Null, _) => return Err(null_not_allowed(field)),
        (other, _) => {
            return Err(FieldError::new(
                field,
                format!(
                    "must be a duration with a unit (d, h, m or s, e.g. 30d, 12h), got {}",
                    other.describe()
                ),
            ));
        }
    };
    let value = parse_duration(field, text)?;
    if value <= chrono::Duration::zero() {
        return Err(FieldError::new(field, format!("must be greater than zero, got {text}")));
    }
    Ok(WrittenDuration {
        value,
        text: text.to_owned(),
    })
}

/// A non-negative integer written as a YAML number (not a string); `default` only when the key is absent.
fn integer(field: &str, value: &Scalar, default: Option<u64>) -> Result<u64, FieldError> {
    match (value, default) {
        (Scalar::Int(i), _) if *i < 0 => Err(FieldError::new(field, format!("must not be negative, got {i}"))),
        (Scalar::Int(i), _) => {
            u64::try_from(*i).map_err(|_| FieldError::new(field, format!("must be at most {}, got {i}", u64::MAX)))
        }
        (Scalar::Absent, Some(d)) => Ok(d),
        (Scalar::Absent, None) => Err(required(field)),
        (Scalar::Null, _) => Err(null_not_allowed(field)),
        (other, _) => Err(FieldError::new(
            field,
            format!("must be a non-negative integer (unquoted), got {}", other.describe()),
        )),
    }
}

fn validate_protected_refs(refs: Vec<String>) -> Result<Vec<String>, FieldError> {
    if refs.is_empty() {
        return Err(FieldError::new("protectedRefs", "must name at least one ref"));
    }
    // Lower-cased name → index of its first occurrence.
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(refs.len());
    for (i, name) in refs.iter().enumerate() {
        let field = format!("protectedRefs[{i}]");
        if name.trim().is_empty() || name.trim() != name {
            return Err(FieldError::new(
                field,
                format!("must be a non-empty ref name without surrounding whitespace, got {name:?}"),
            ));
        }
        if let Some(&first) = seen.get(&name.to_lowercase()) {
            let rule = if refs[first] == *name {
                format!("{name:?} is listed twice (also protectedRefs[{first}])")
            } else {
                format!(
                    "{name:?} and {:?} (protectedRefs[{first}]) differ only by case, which is ambiguous",
                    refs[first]
                )
            };
            return Err(FieldError::new(field, rule));
        }
        seen.insert(name.to_lowercase(), i);
    }
    Ok(refs)
}

/// `evidenceSigners`: a non-empty list of key ids as [`crate::evidence::keys::keyid`] writes them (64 lowercase hex
/// digits, the SHA-256 of the public key), none twice.
fn validate_evidence_signers(ids: Vec<String>) -> Result<Vec<String>, FieldError> {
    if ids.is_empty() {
        return Err(FieldError::new(
            "evidenceSigners",
            "must name at least one key id (leave the field out to accept every drill key of the trust folder)",
        ));
    }
    for (i, id) in ids.iter().enumerate() {
        let field = format!("evidenceSigners[{i}]");
        if !is_sha256_hex(id) {
            return Err(FieldError::new(
                field,
                format!(
                    "must be a key id: the 64 lowercase hex digits of the SHA-256 of the public key, as `keygen` \
                     and the signatures' `keyid` write it, got {id:?}"
                ),
            ));
        }
        if let Some(first) = ids[..i].iter().position(|x| x == id) {
            return Err(FieldError::new(
                field,
                format!("key id {id} is listed twice (also evidenceSigners[{first}])"),
            ));
        }
    }
    Ok(ids)
}

fn validate_dr_points(raw: Vec<RawDrPoint>) -> Result<Vec<DrPoint>, FieldError> {
    let mut seen: HashMap<i64, usize> = HashMap::with_capacity(raw.len());
    let mut points = Vec::with_capacity(raw.len());
    for (i, point) in raw.into_iter().enumerate() {
        let field = |name: &str| format!("disasterRecoveryPoints[{i}].{name}");
        let snapshot_id = match &point.snapshot_id {
            Scalar::Int(id) => i64::try_from(*id).map_err(|_| {
                FieldError::new(
                    field("snapshotId"),
                    format!("must fit in a signed 64-bit integer, got {id}"),
                )
            })?,
            Scalar::Absent => return Err(required(&field("snapshotId"))),
            other => {
                return Err(FieldError::new(
                    field("snapshotId"),
                    format!("must be an integer snapshot ID (unquoted), got {}", other.describe()),
                ));
            }
        };
        if let Some(first) = seen.insert(snapshot_id, i) {
            return Err(FieldError::new(
                field("snapshotId"),
                format!("snapshot {snapshot_id} is already declared by disasterRecoveryPoints[{first}]"),
            ));
        }
        let at = point
            .at
            .optional(&field("at"))?
            .map(|at| {
                DateTime::parse_from_rfc3339(&at)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| FieldError::new(field("at"), format!("must be an RFC 3339 time ({e}), got {at:?}")))
            })
            .transpose()?;
        points.push(DrPoint { snapshot_id, at });
    }
    Ok(points)
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse_str(doc: &str) -> Result<Policy, PolicyError> {
        parse(doc.as_bytes(), "policy.yaml")
    }

    /// The DESIGN example with `key: value` lines replaced (`None` removes the key) or appended.
    fn example_with(changes: &[(&str, Option<&str>)]) -> String {
        let mut lines: Vec<String> = EXAMPLE.lines().map(str::to_owned).collect();
        for (key, value) in changes {
            let prefix = format!("{key}:");
            let pos = lines.iter().position(|l| l.starts_with(&prefix));
            match (pos, value) {
                (Some(p), Some(v)) => lines[p] = format!("{key}: {v}"),
                (Some(p), None) => {
                    lines.remove(p);
                }
                (None, Some(v)) => lines.push(format!("{key}: {v}")),
                (None, None) => {}
            }
        }
        lines.join("\n") + "\n"
    }

    /// Parses a document that must fail with a field error, and returns (field, rule).
    fn field_error(doc: &str) -> (String, String) {
        match parse_str(doc) {
            Err(PolicyError::Field {
                source_name,
                field,
                rule,
            }) => {
                assert_eq!(source_name, "policy.yaml");
                (field, rule)
            }
            other => panic!("expected a field error for\n{doc}\ngot {other:?}"),
        }
    }

    fn uuid(s: &str) -> uuid::Uuid {
        uuid::Uuid::parse_str(s).unwrap()
    }

    #[test]
    fn example_parses_with_its_values() {
        let p = parse_str(EXAMPLE).unwrap();
        assert_eq!(p.schema(), "lakehouseRetentionPolicy.v1");
        assert_eq!(p.source_name(), "policy.yaml");
        assert_eq!(p.table().name(), Some("orders"));
        assert_eq!(p.table().uuid_prefix(), "7f31a2b4");
        assert_eq!(p.table().to_string(), "orders/7f31a2b4...");
        assert_eq!(p.protected_refs(), ["main", "audit-q2"]);
        assert_eq!(p.min_snapshot_age(), chrono::Duration::days(30));
        assert_eq!(p.max_reader_lease(), chrono::Duration::days(14));
        assert_eq!(p.max_writer_duration(), chrono::Duration::hours(6));
        assert_eq!(p.legal_hold_generation(), 19);
        assert_eq!(p.orphan_safety_interval(), chrono::Duration::hours(12));
        // Defaults.
        assert_eq!(p.format_version(), None);
        assert_eq!(p.catalog(), None);
        assert!(p.dr_points().is_empty());
        assert_eq!(p.object_versioning(), ObjectVersioning::MarkerOnly);
        assert_eq!(p.reclamation_implementation_digest(), None);
        assert_eq!(p.reclamation_implementation(), None);
        assert_eq!(p.evidence_max_age(), chrono::Duration::days(7));
        assert_eq!(p.max_unreconciled_unknowns(), 0);
    }

    #[test]
    fn unicode_ellipsis_and_bom_are_accepted() {
        let doc = format!("\u{feff}{}", EXAMPLE.replace("7f31a2b4...", "7F31A2B4…"));
        let p = parse_str(&doc).unwrap();
        assert_eq!(p.table().uuid_prefix(), "7f31a2b4");
    }

    #[test]
    fn digest_is_sha256_of_the_exact_bytes() {
        let p = parse_str(EXAMPLE).unwrap();
        assert_eq!(p.digest(), hex::encode(Sha256::digest(EXAMPLE.as_bytes())));
        // Known answer, so that a change of hash or encoding is caught too.
        assert_eq!(
            hex::encode(Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // A change that does not change any value still changes the digest: it is over bytes, not values.
        let reformatted = EXAMPLE.replace("[main, audit-q2]", "[ main, audit-q2 ]");
        let q = parse_str(&reformatted).unwrap();
        assert_eq!(q.protected_refs(), p.protected_refs());
        assert_ne!(q.digest(), p.digest());
        assert_eq!(q.digest().len(), 64);
        assert!(
            q.digest()
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }

    #[test]
    fn all_optional_fields_round_trip() {
        let doc = format!(
            "{EXAMPLE}\
formatVersion: 2
catalog: prod-sql
disasterRecoveryPoints:
  - snapshotId: 3051729675574597004
    at: 2024-06-30T00:00:00Z
  - {{snapshotId: -1, at: \"2024-07-01T02:00:00+02:00\"}}
  - snapshotId: 42
objectVersioning: permanent
reclamationImplementationDigest: {}
evidenceMaxAge: 36h
maxUnreconciledUnknowns: 3
",
            "ab".repeat(32)
        );
        let p = parse_str(&doc).unwrap();
        assert_eq!(p.format_version(), Some(2));
        assert_eq!(p.catalog(), Some("prod-sql"));
        let at = |s: &str| Some(DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc));
        assert_eq!(
            p.dr_points(),
            [
                DrPoint {
                    snapshot_id: 3_051_729_675_574_597_004,
                    at: at("2024-06-30T00:00:00Z")
                },
                DrPoint {
                    snapshot_id: -1,
                    at: at("2024-07-01T00:00:00Z")
                },
                DrPoint {
                    snapshot_id: 42,
                    at: None
                },
            ]
        );
        assert_eq!(p.dr_points()[0].snapshot_id(), 3_051_729_675_574_597_004);
        assert_eq!(p.dr_points()[2].at(), None);
        assert_eq!(p.object_versioning(), ObjectVersioning::Permanent);
        assert_eq!(p.object_versioning().to_string(), "permanent");
        assert_eq!(p.reclamation_implementation_digest(), Some("ab".repeat(32).as_str()));
        assert_eq!(p.evidence_max_age(), chrono::Duration::hours(36));
        assert_eq!(p.max_unreconciled_unknowns(), 3);

        let marker = parse_str(&example_with(&[("objectVersioning", Some("marker-only"))])).unwrap();
        assert_eq!(marker.object_versioning(), ObjectVersioning::MarkerOnly);
    }

    #[test]
    fn orphan_quarantine_is_a_storage_uri_or_absent() {
        assert_eq!(parse_str(EXAMPLE).unwrap().orphan_quarantine(), None);
        let p = parse_str(&example_with(&[("orphanQuarantine", Some("/vault/orphans/"))])).unwrap();
        assert_eq!(p.orphan_quarantine(), Some("file:///vault/orphans"));
        let p = parse_str(&example_with(&[("orphanQuarantine", Some("s3://vault/orphans"))])).unwrap();
        assert_eq!(p.orphan_quarantine(), Some("s3://vault/orphans"));
        let err = parse_str(&example_with(&[("orphanQuarantine", Some("relative/path"))])).unwrap_err();
        assert_eq!(err.field(), Some("orphanQuarantine"), "{err}");
    }

    #[test]
    fn display_names_file_field_and_rule() {
        let err = parse_str(&example_with(&[("orphanSafetyInterval", Some("6h"))])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "policy.yaml: field orphanSafetyInterval: must be greater than maxWriterDuration (6h), got 6h"
        );
        assert_eq!(err.field(), Some("orphanSafetyInterval"));
    }

    /// Written in place of a value to remove the key from the document.
    const ABSENT: &str = "<absent>";

    #[test]
    fn each_rule_names_its_field() {
        // (key, value written or ABSENT, field named in the error, part of the rule)
        let cases = [
            ("schema", "lakehouseRetentionPolicy.v2", "schema", "must be"),
            ("schema", ABSENT, "schema", "is required"),
            ("table", ABSENT, "table", "is required"),
            ("table", "''", "table", "must bind the table's UUID"),
            ("table", "orders/xyz1...", "table", "hex"),
            ("table", "orders/7f31a2b...", "table", "at least 8"),
            ("table", "orders/7f31...", "table", "at least 8"),
            ("table", "orders", "table", "must bind the table's UUID"),
            ("table", "sales.orders", "table", "`table: sales.orders/7f31c2a9...`"),
            ("table", "7f31a2b4", "table", "not only its name"),
            ("table", "orders/7f31a2b409c1", "table", "hyphenated"),
            ("table", "orders/a/7f31", "table", "at most one"),
            ("table", "orders/", "table", "empty"),
            ("table", "orders.../7f31", "table", "elision"),
            ("protectedRefs", ABSENT, "protectedRefs", "is required"),
            ("protectedRefs", "[]", "protectedRefs", "at least one"),
            ("protectedRefs", "[main, '']", "protectedRefs[1]", "non-empty"),
            ("protectedRefs", "[main, ' x']", "protectedRefs[1]", "whitespace"),
            ("protectedRefs", "[main, x, main]", "protectedRefs[2]", "listed twice"),
            ("protectedRefs", "[main, Main]", "protectedRefs[1]", "only by case"),
            ("minSnapshotAge", ABSENT, "minSnapshotAge", "is required"),
            ("minSnapshotAge", "0d", "minSnapshotAge", "greater than zero"),
            ("maxReaderLease", "0s", "maxReaderLease", "greater than zero"),
            ("maxWriterDuration", "~", "maxWriterDuration", "null"),
            (
                "orphanSafetyInterval",
                "5h",
                "orphanSafetyInterval",
                "maxWriterDuration (6h)",
            ),
            (
                "orphanSafetyInterval",
                "6h",
                "orphanSafetyInterval",
                "maxWriterDuration (6h)",
            ),
            (
                "orphanSafetyInterval",
                "360m",
                "orphanSafetyInterval",
                "maxWriterDuration (6h)",
            ),
            ("evidenceMaxAge", "0m", "evidenceMaxAge", "greater than zero"),
            ("evidenceMaxAge", "", "evidenceMaxAge", "null"),
            ("evidenceMaxAge", "3650d", "evidenceMaxAge", "at most 31d"),
            ("evidenceMaxAge", "745h", "evidenceMaxAge", "at most 31d"),
            ("legalHoldGeneration", ABSENT, "legalHoldGeneration", "is required"),
            ("legalHoldGeneration", "-1", "legalHoldGeneration", "negative"),
            ("legalHoldGeneration", "1.5", "legalHoldGeneration", "integer"),
            ("legalHoldGeneration", "\"19\"", "legalHoldGeneration", "unquoted"),
            ("legalHoldGeneration", "true", "legalHoldGeneration", "boolean"),
            ("formatVersion", "4", "formatVersion", "1, 2 or 3"),
            ("formatVersion", "0", "formatVersion", "1, 2 or 3"),
            ("formatVersion", "\"2\"", "formatVersion", "1, 2 or 3"),
            ("catalog", "''", "catalog", "non-empty"),
            ("catalog", "~", "catalog", "null"),
            ("schema", "~", "schema", "null"),
            ("objectVersioning", "null", "objectVersioning", "null"),
            (
                "reclamationImplementationDigest",
                "",
                "reclamationImplementationDigest",
                "null",
            ),
            ("disasterRecoveryPoints", "~", "disasterRecoveryPoints", "null"),
            ("objectVersioning", "delete-all", "objectVersioning", "marker-only or"),
            ("objectVersioning", "Permanent", "objectVersioning", "marker-only or"),
            (
                "maxUnreconciledUnknowns",
                "4294967296",
                "maxUnreconciledUnknowns",
                "at most",
            ),
            ("maxUnreconciledUnknowns", "-1", "maxUnreconciledUnknowns", "negative"),
            (
                "legalHoldGeneration",
                "18446744073709551616",
                "legalHoldGeneration",
                "integer",
            ),
        ];
        assert_field_errors(cases.map(|(key, value, field, rule)| (key, value, field.to_owned(), rule)));
    }

    #[test]
    fn dr_point_and_digest_rules_name_their_field() {
        let dr = "disasterRecoveryPoints";
        let dr_cases = [
            (
                "[{snapshotId: 7}, {snapshotId: 8}, {snapshotId: 7}]",
                "[2].snapshotId",
                "already declared by",
            ),
            ("[{at: '2024-06-30T00:00:00Z'}]", "[0].snapshotId", "is required"),
            ("[{snapshotId: '7'}]", "[0].snapshotId", "unquoted"),
            ("[{snapshotId: 9223372036854775808}]", "[0].snapshotId", "64-bit"),
            ("[{snapshotId: 7, at: 2024-06-30}]", "[0].at", "RFC 3339"),
            ("[{snapshotId: 7, at: ~}]", "[0].at", "null"),
            ("[{snapshotId: ~}]", "[0].snapshotId", "got null"),
        ]
        .map(|(value, suffix, rule)| (dr, value, format!("{dr}{suffix}"), rule));
        let digest = "reclamationImplementationDigest";
        let bad_digests = [
            "AB".repeat(32),
            "ab".repeat(31),
            "zz".repeat(32),
            format!("'{} '", "ab".repeat(32)),
        ];
        let digest_cases = bad_digests
            .iter()
            .map(|d| (digest, d.as_str(), digest.to_owned(), "64 lowercase hex"));
        assert_field_errors(dr_cases.into_iter().chain(digest_cases));
    }

    /// Checks rows of (key, value written or ABSENT, field named in the error, part of the rule).
    fn assert_field_errors<'a>(cases: impl IntoIterator<Item = (&'a str, &'a str, String, &'a str)>) {
        for (key, value, want_field, want_rule) in cases {
            let doc = example_with(&[(key, (value != ABSENT).then_some(value))]);
            let (field, rule) = field_error(&doc);
            assert_eq!(field, want_field, "document:\n{doc}");
            assert!(
                rule.contains(want_rule),
                "rule {rule:?} lacks {want_rule:?}; document:\n{doc}"
            );
        }
    }

    #[test]
    fn bad_durations_name_the_field() {
        // (value as written in YAML, part of the rule)
        let cases = [
            ("30", "bare number 30"),
            ("1.5", "the number 1.5"),
            ("'30'", "has no unit"),
            ("1.5h", "whole number"),
            ("3w", "unknown unit"),
            ("30D", "unknown unit"),
            ("-1d", "whole number"),
            ("+1d", "whole number"),
            ("'30 d'", "whole number"),
            ("d", "whole number"),
            ("''", "is empty"),
            ("99999999999999999999d", "too large"),
            ("9999999999999999h", "too large"),
            ("true", "boolean"),
        ];
        for field in [
            "minSnapshotAge",
            "maxReaderLease",
            "maxWriterDuration",
            "orphanSafetyInterval",
            "evidenceMaxAge",
        ] {
            for (value, want) in cases {
                let doc = example_with(&[(field, Some(value))]);
                let (got_field, rule) = field_error(&doc);
                assert_eq!(got_field, field, "{field}: {value}");
                assert!(rule.contains(want), "{field}: {value}: rule {rule:?} lacks {want:?}");
            }
        }
    }

    #[test]
    fn parse_duration_accepts_each_unit() {
        let cases = [
            ("30d", chrono::Duration::days(30)),
            ("12h", chrono::Duration::hours(12)),
            ("90m", chrono::Duration::minutes(90)),
            ("30s", chrono::Duration::seconds(30)),
            ("0s", chrono::Duration::zero()),
            ("007h", chrono::Duration::hours(7)),
        ];
        for (s, want) in cases {
            assert_eq!(parse_duration("f", s).unwrap(), want, "{s}");
        }
        let err = parse_duration("--older-than", "1.5h").unwrap_err();
        assert_eq!(err.field, "--older-than");
        assert_eq!(err.clone().in_source("cli").field(), Some("--older-than"));
        assert!(err.to_string().starts_with("field --older-than: "));
        // Multi-byte last character: no panic on slicing.
        assert!(parse_duration("f", "3é").is_err());
        assert!(parse_duration("f", "…").is_err());
    }

    #[test]
    fn unknown_field_is_named() {
        let doc = example_with(&[("minSnapshotAgeDays", Some("30"))]);
        let err = parse_str(&doc).unwrap_err();
        assert!(matches!(err, PolicyError::Syntax { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("policy.yaml: "), "{msg}");
        assert!(msg.contains("minSnapshotAgeDays"), "{msg}");

        let doc = example_with(&[("disasterRecoveryPoints", Some("[{snapshotId: 1, when: x}]"))]);
        assert!(parse_str(&doc).unwrap_err().to_string().contains("when"));
    }

    #[test]
    fn syntax_errors_are_syntax() {
        let cases = [
            (
                "duplicate key",
                format!("{EXAMPLE}minSnapshotAge: 31d\n"),
                "duplicate mapping key: minSnapshotAge at line 9",
            ),
            ("two documents", format!("{EXAMPLE}---\n{EXAMPLE}"), "document"),
            ("not a mapping", "- 1\n".to_owned(), "line 1"),
            ("unclosed flow", EXAMPLE.replace("audit-q2]", "audit-q2"), ""),
            (
                "list for string",
                example_with(&[("table", Some("[orders]"))]),
                "line 2",
            ),
            ("empty", "  \n".to_owned(), "is empty"),
        ];
        for (what, doc, want) in cases {
            match parse_str(&doc) {
                Err(PolicyError::Syntax { source_name, message }) => {
                    assert_eq!(source_name, "policy.yaml");
                    assert!(message.contains(want), "{what}: {message:?} lacks {want:?}");
                }
                other => panic!("{what}: expected a syntax error, got {other:?}"),
            }
        }
        let err = parse(b"schema: \xff\n", "p.yaml").unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }

    #[test]
    fn check_table_matches_name_and_uuid_prefix() {
        let p = parse_str(EXAMPLE).unwrap();
        let id = uuid("7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b");
        p.check_table("orders", &id).unwrap();
        p.check_table("db.orders", &id).unwrap();
        p.check_table("sales.db.orders", &id).unwrap();

        let other = uuid("7f30a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b");
        let err = p.check_table("db.orders", &other).unwrap_err();
        match &err {
            PolicyError::TableMismatch {
                field,
                expected,
                actual,
                ..
            } => {
                assert_eq!(*field, "table");
                assert_eq!(expected, "orders/7f31a2b4...");
                assert_eq!(actual, "db.orders/7f30a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b");
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().starts_with("policy.yaml: field table: "), "{err}");
        assert!(p.check_table("db.customers", &id).is_err());
        assert!(
            p.check_table("db.myorders", &id).is_err(),
            "suffix must be a whole name component"
        );
        assert!(p.check_table("orders.x", &id).is_err());
    }

    #[test]
    fn table_binding_forms() {
        let id = uuid("7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b");
        let b = |s: &str| s.parse::<TableBinding>().unwrap();

        let named = b("sales.orders/7f31a2b4");
        assert_eq!((named.name(), named.uuid_prefix()), (Some("sales.orders"), "7f31a2b4"));
        assert!(named.matches("sales.orders", &id));
        assert!(named.matches("db.sales.orders", &id));
        assert!(!named.matches("orders", &id));
        assert!(named.matches_uuid(&id));
        assert!(!named.matches_uuid(&uuid("7f31a2b5-09c1-4e5f-8a6b-0c1d2e3f4a5b")));

        for prefix_only in [
            "7f31a2b4...",
            "/7f31a2b4",
            "/7F31A2B4-09…",
            "7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b",
        ] {
            let binding = b(prefix_only);
            assert_eq!(binding.name(), None, "{prefix_only}");
            assert!(binding.matches("any.table", &id), "{prefix_only}");
        }
        assert_eq!(b("/7F31A2B4-09…").uuid_prefix(), "7f31a2b4-09");
        assert_eq!(b("/7F31A2B4-09…").to_string(), "/7f31a2b4-09...");

        let full = b("orders/7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b");
        assert_eq!(full.to_string(), "orders/7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b");
        assert!(full.matches("orders", &id));
        assert!(!full.matches("orders", &uuid("7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5c")));

        // Overlapping prefixes: some table is bound by both.
        assert!(b("/7f31a2b4").overlaps(&full));
        assert!(full.overlaps(&b("x/7f31a2b4-09")));
        assert!(!b("/7f31a2b4").overlaps(&b("/7f31a2b5")));

        // Hyphens are compared, not ignored.
        assert!("orders/7f31a2b409...".parse::<TableBinding>().is_err());
        assert!(
            "orders/7f31a2b4-09c1-4e5f-8a6b-0c1d2e3f4a5b0"
                .parse::<TableBinding>()
                .is_err()
        );
    }

    /// #23 point 5: the UUID is required, with at least 8 hex digits; the message names the field and shows
    /// the form.
    #[test]
    fn bare_name_and_short_prefix_are_refused() {
        for bare in ["orders", "sales.orders", "cafe", "7f31a2b4", "db.7f31a2b4-09c1"] {
            let err = bare.parse::<TableBinding>().unwrap_err();
            assert_eq!(err.field, "table", "{bare}");
            assert!(err.rule.contains("must bind the table's UUID"), "{bare}: {}", err.rule);
            assert!(
                err.rule.contains(&format!("`table: {bare}/7f31c2a9...`")),
                "{bare}: {}",
                err.rule
            );
        }
        for short in ["orders/7f31", "orders/7f31a2b...", "/7f31a2b", "7f31..."] {
            let err = short.parse::<TableBinding>().unwrap_err();
            assert_eq!(err.field, "table", "{short}");
            assert!(err.rule.contains("at least 8 hex digits"), "{short}: {}", err.rule);
            assert!(err.rule.contains("orders/7f31c2a9..."), "{short}: {}", err.rule);
        }
        let err = parse_str(&example_with(&[("table", Some("orders"))])).unwrap_err();
        assert_eq!(err.field(), Some("table"));
        assert!(
            err.to_string()
                .starts_with("policy.yaml: field table: must bind the table's UUID"),
            "{err}"
        );
    }

    #[test]
    fn design_example_is_refused() {
        // DESIGN §3's example is `EXAMPLE` with its table line (including the comment and the literal `...`):
        // it binds 4 hex digits of the UUID, fewer than a binding needs now.
        let design = EXAMPLE.replace(
            "table: orders/7f31a2b4...          # table name / UUID (a prefix of at least 8 hex digits of the UUID)",
            "table: orders/7f31...          # table name / UUID (a prefix of the UUID may be given)",
        );
        assert_ne!(design, EXAMPLE);
        let (field, rule) = field_error(&design);
        assert_eq!(field, "table");
        assert!(rule.contains("at least 8 hex digits"), "{rule}");
        parse_str(EXAMPLE).unwrap();
    }

    #[test]
    fn reclamation_implementation_is_a_digest_or_any() {
        let digest = "ab".repeat(32);
        let p = parse_str(&example_with(&[("reclamationImplementationDigest", Some(&digest))])).unwrap();
        assert_eq!(
            p.reclamation_implementation(),
            Some(&ReclamationImplementation::Pinned(digest.clone()))
        );
        assert_eq!(p.reclamation_implementation_digest(), Some(digest.as_str()));
        let any = parse_str(&example_with(&[("reclamationImplementationDigest", Some("any"))])).unwrap();
        assert_eq!(any.reclamation_implementation(), Some(&ReclamationImplementation::Any));
        assert_eq!(
            any.reclamation_implementation().map(ReclamationImplementation::as_str),
            Some("any")
        );
        // `any` is not a pin.
        assert_eq!(any.reclamation_implementation_digest(), None);
        for bad in ["ANY", "Any", "'any '", "all", "'*'"] {
            let (field, rule) = field_error(&example_with(&[("reclamationImplementationDigest", Some(bad))]));
            assert_eq!(field, "reclamationImplementationDigest", "{bad}");
            assert!(rule.contains("or the word any"), "{bad}: {rule}");
        }
    }

    #[test]
    fn check_format_version_and_catalog() {
        let unbound = parse_str(EXAMPLE).unwrap();
        unbound.check_format_version(3).unwrap();
        unbound.check_catalog("anything").unwrap();

        let bound = parse_str(&example_with(&[
            ("formatVersion", Some("2")),
            ("catalog", Some("prod")),
        ]))
        .unwrap();
        bound.check_format_version(2).unwrap();
        bound.check_catalog("prod").unwrap();
        let err = bound.check_format_version(3).unwrap_err();
        assert_eq!(err.field(), Some("formatVersion"));
        assert_eq!(
            err.to_string(),
            "policy.yaml: field formatVersion: the policy is bound to 2, but the table is 3"
        );
        assert_eq!(bound.check_catalog("Prod").unwrap_err().field(), Some("catalog"));
    }

    #[test]
    fn protected_refs_match_ignoring_case() {
        let p = parse_str(EXAMPLE).unwrap();
        assert!(p.is_protected_ref("main"));
        assert!(p.is_protected_ref("MAIN"));
        assert!(p.is_protected_ref("Audit-Q2"));
        assert!(!p.is_protected_ref("dev"));
    }

    #[test]
    fn string_fields_keep_their_text() {
        let p = parse_str(&example_with(&[
            ("catalog", Some("0012")),
            ("table", Some("2024/7f31a2b4...")),
        ]))
        .unwrap();
        assert_eq!(p.catalog(), Some("0012"));
        assert_eq!(p.table().name(), Some("2024"));
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        // The "Norway problem": `no` and `on` must stay ref names, not become booleans.
        let p = parse_str(&example_with(&[("protectedRefs", Some("[main, no, on, 2024]"))])).unwrap();
        assert_eq!(p.protected_refs(), ["main", "no", "on", "2024"]);
    }

    #[test]
    fn load_reads_file_and_names_it() {
        let dir = std::env::temp_dir().join(format!("lakedrill-policy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.yaml");
        std::fs::write(&path, EXAMPLE).unwrap();
        let p = load(&path).unwrap();
        assert_eq!(p.source_name(), path.display().to_string());
        assert_eq!(p.digest(), hex::encode(Sha256::digest(EXAMPLE.as_bytes())));

        let missing = dir.join("missing.yaml");
        match load(&missing).unwrap_err() {
            PolicyError::Io { path, source } => {
                assert_eq!(path, missing);
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Review of 2026-12-07 (Q8): the policy file was read whole whatever its size. A file over the 1 MiB bound is
    /// refused naming the file and the bound (here a valid policy padded with comments, which parsed before).
    #[test]
    fn load_refuses_a_file_over_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        let mut doc = EXAMPLE.to_owned();
        while (doc.len() as u64) <= MAX_POLICY_BYTES {
            doc.push_str("# padding padding padding padding padding padding padding padding padding padding\n");
        }
        std::fs::write(&path, &doc).unwrap();
        let e = load(&path).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&path.display().to_string()) && text.contains("larger than the policy file bound of 1048576"),
            "{text}"
        );
        // At the bound it is read.
        let at = dir.path().join("at.yaml");
        let pad = usize::try_from(MAX_POLICY_BYTES).unwrap() - EXAMPLE.len() - 2;
        std::fs::write(&at, format!("{EXAMPLE}#{}\n", "x".repeat(pad))).unwrap();
        assert_eq!(std::fs::metadata(&at).unwrap().len(), MAX_POLICY_BYTES);
        load(&at).unwrap();
    }

    /// Review of 2026-12-07 (Q7): YAML merge keys were expanded (serde-saphyr's default), so a policy could set a
    /// field through `<<:` despite the strict parse. Refused now, naming the merge key.
    #[test]
    fn merge_keys_are_refused() {
        let doc = format!("{}<<: {{evidenceMaxAge: 3d}}\n", example_with(&[]));
        match parse_str(&doc).unwrap_err() {
            PolicyError::Syntax { message, .. } => {
                assert!(message.contains("merge keys (`<<:`) are not allowed"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn regulated_data_and_min_quarantine_period() {
        let p = parse_str(&example_with(&[])).unwrap();
        assert_eq!((p.regulated_data(), p.min_quarantine_period()), (None, None));
        let doc = format!("{}regulatedData: false\nminQuarantinePeriod: 2d\n", example_with(&[]));
        let p = parse_str(&doc).unwrap();
        assert_eq!(p.regulated_data(), Some(false));
        assert_eq!(p.min_quarantine_period(), Some(chrono::Duration::days(2)));
        for (extra, field) in [
            ("regulatedData: \"false\"\n", "regulatedData"),
            ("regulatedData: 0\n", "regulatedData"),
            ("regulatedData: ~\n", "regulatedData"),
            ("minQuarantinePeriod: 0s\n", "minQuarantinePeriod"),
            ("minQuarantinePeriod: 3\n", "minQuarantinePeriod"),
        ] {
            let (f, _) = field_error(&format!("{}{extra}", example_with(&[])));
            assert_eq!(f, field, "{extra}");
        }
    }

    #[test]
    fn evidence_retention_is_a_mode_and_a_period() {
        assert_eq!(parse_str(&example_with(&[])).unwrap().evidence_retention(), None);
        let doc = format!(
            "{}evidenceRetention:\n  mode: compliance\n  period: 400d\n",
            example_with(&[])
        );
        let r = parse_str(&doc).unwrap().evidence_retention().unwrap();
        assert_eq!((r.mode, r.period), (LockMode::Compliance, chrono::Duration::days(400)));
        assert_eq!(r.mode.s3_value(), "COMPLIANCE");
        for (extra, field) in [
            (
                "evidenceRetention:\n  mode: legal\n  period: 1d\n",
                "evidenceRetention.mode",
            ),
            ("evidenceRetention:\n  period: 1d\n", "evidenceRetention.mode"),
            ("evidenceRetention:\n  mode: governance\n", "evidenceRetention.period"),
            (
                "evidenceRetention:\n  mode: governance\n  period: 0d\n",
                "evidenceRetention.period",
            ),
            ("evidenceRetention: ~\n", "evidenceRetention"),
        ] {
            let (f, _) = field_error(&format!("{}{extra}", example_with(&[])));
            assert_eq!(f, field, "{extra}");
        }
    }

    #[test]
    fn critical_and_recovery_rto_limit() {
        let p = parse_str(&example_with(&[])).unwrap();
        assert!(!p.critical());
        assert_eq!(p.recovery_rto_limit(), chrono::Duration::hours(4));
        let p = parse_str(&format!("{}critical: true\nrecoveryRtoLimit: 90m\n", example_with(&[]))).unwrap();
        assert!(p.critical());
        assert_eq!(p.recovery_rto_limit(), chrono::Duration::minutes(90));
        for (extra, field, why) in [
            ("critical: \"true\"\n", "critical", "true or false"),
            ("critical: ~\n", "critical", "null"),
            (
                "recoveryRtoLimit: 5h\n",
                "recoveryRtoLimit",
                "stricter than the gate's 4h",
            ),
            ("recoveryRtoLimit: 0s\n", "recoveryRtoLimit", "greater than zero"),
        ] {
            let (f, reason) = field_error(&format!("{}{extra}", example_with(&[])));
            assert_eq!(f, field, "{extra}");
            assert!(reason.contains(why), "{extra}: {reason}");
        }
    }

    #[test]
    fn rpo_target_is_an_optional_positive_duration() {
        assert_eq!(parse_str(&example_with(&[])).unwrap().rpo_target(), None);
        let p = parse_str(&format!("{}rpoTarget: 15m\n", example_with(&[]))).unwrap();
        assert_eq!(p.rpo_target(), Some(chrono::Duration::minutes(15)));
        for (extra, why) in [
            ("rpoTarget: 0s\n", "greater than zero"),
            ("rpoTarget: 900\n", "with a unit"),
            ("rpoTarget: 1.5h\n", "whole number of units"),
            ("rpoTarget: -1h\n", "-1h"),
            ("rpoTarget: ~\n", "null"),
            // Review of 2026-12-07 (Q6): up to 100 years was accepted, which switched the quarterly check off.
            ("rpoTarget: 93d\n", "at most 92d"),
            ("rpoTarget: 36500d\n", "at most 92d"),
        ] {
            let (f, reason) = field_error(&format!("{}{extra}", example_with(&[])));
            assert_eq!(f, "rpoTarget", "{extra}: {reason}");
            assert!(reason.contains(why), "{extra}: {reason}");
        }
    }

    #[test]
    fn evidence_signers_are_distinct_key_ids() {
        assert_eq!(parse_str(&example_with(&[])).unwrap().evidence_signers(), None);
        let a = "ab".repeat(32);
        let b = crate::evidence::keys::keyid(&ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key());
        let p = parse_str(&format!("{}evidenceSigners: [{a}, {b}]\n", example_with(&[]))).unwrap();
        assert_eq!(p.evidence_signers(), Some([a.clone(), b.clone()].as_slice()));
        let p = parse_str(&format!("{}evidenceSigners:\n  - {b}\n", example_with(&[]))).unwrap();
        assert_eq!(p.evidence_signers(), Some([b.clone()].as_slice()));
        let upper = a.to_uppercase();
        let short = &a[..63];
        for (extra, field, why) in [
            (
                "evidenceSigners: []\n".to_owned(),
                "evidenceSigners",
                "at least one key id",
            ),
            ("evidenceSigners: ~\n".to_owned(), "evidenceSigners", "null"),
            (
                format!("evidenceSigners: [{upper}]\n"),
                "evidenceSigners[0]",
                "lowercase hex",
            ),
            (
                format!("evidenceSigners: [{b}, {short}]\n"),
                "evidenceSigners[1]",
                "must be a key id",
            ),
            (
                "evidenceSigners: [\"\"]\n".to_owned(),
                "evidenceSigners[0]",
                "must be a key id",
            ),
            (
                "evidenceSigners: [drill-key]\n".to_owned(),
                "evidenceSigners[0]",
                "drill-key",
            ),
            (
                format!("evidenceSigners: [{a}, {b}, {a}]\n"),
                "evidenceSigners[2]",
                "listed twice (also evidenceSigners[0])",
            ),
        ] {
            let (f, reason) = field_error(&format!("{}{extra}", example_with(&[])));
            assert_eq!(f, field, "{extra}: {reason}");
            assert!(reason.contains(why), "{extra}: {reason}");
        }
        // A single string is not a list: refused as the YAML parser reads it (the line of the field), as for
        // protectedRefs.
        let doc = format!("{}evidenceSigners: {a}\n", example_with(&[]));
        let line = doc.lines().position(|l| l.starts_with("evidenceSigners")).unwrap() + 1;
        match parse_str(&doc) {
            Err(PolicyError::Syntax { message, .. }) => {
                assert!(message.contains(&format!("line {line}")), "{message}");
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }
}
