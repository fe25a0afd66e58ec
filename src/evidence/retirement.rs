//! The retirement record of a bundle (`https://lakedrill.dev/bundle-retirement/v1`): what a finished purge
//! writes beside each bundle of its candidate (`<bundle folder>/retired.dsse.json`), and the pure check a
//! drill runs on it.
//!
//! A purged bundle stays the signed record of what was deleted, but its data and delete files are gone, so a
//! deep drill of it can only find them missing. The retirement record says, signed with the purge's key, that
//! this bundle (its id, its root and the SHA-256 of its envelope file) was retired by the purge of a candidate
//! whose signed summary is at a URI with a SHA-256. A drill skips a bundle whose record verifies and names the
//! bundle it lies beside; a record that does not verify, or names another bundle, is a finding on that bundle.
//!
//! What it guarantees: [`check`] accepts a record only when its envelope verifies under the trust store
//! ([`crate::evidence::verify`]), its predicate type is [`PREDICATE_TYPE`], its predicate parses strictly, its one
//! subject is `lakedrill-bundle:<id>` with the bundle's root (`blake3`) and its envelope file's SHA-256, and its
//! predicate names the same bundle id and root. What it does not do: no I/O (the caller reads the record and
//! the bundle envelope, verifies the envelope and passes what it says), and it does not open the purge summary
//! the record names. It may use the DSSE face of `evidence` and `model`; it is pure and synchronous.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evidence::keys::TrustStore;
use crate::evidence::{self, EvidenceFailure, Statement, Subject};
use crate::model::findings::{Finding, FindingKind};

/// `predicateType` of a retirement record.
pub const PREDICATE_TYPE: &str = "https://lakedrill.dev/bundle-retirement/v1";

/// The record's file name inside the bundle folder.
pub const RECORD_FILE: &str = "retired.dsse.json";

/// The predicate of a retirement record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetirementPredicate {
    /// The retired bundle's id (its folder name).
    pub bundle_id: String,
    /// The retired bundle's root (BLAKE3 over its canonical inventory).
    pub bundle_root: String,
    /// The candidate whose purge retired it.
    pub candidate_id: String,
    /// The URI of the purge's signed receipts summary.
    pub purge_summary: String,
    /// SHA-256 of the summary envelope file's bytes.
    pub purge_summary_sha256: String,
    /// When the record was made (RFC 3339).
    pub retired_at: String,
}

/// What a drill knows of the bundle a record lies beside, from the bundle's own verified envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleIdentity<'a> {
    /// The bundle's folder name.
    pub bundle_id: &'a str,
    /// The root its verified predicate states.
    pub bundle_root: &'a str,
    /// SHA-256 of its envelope file's bytes.
    pub envelope_sha256: &'a str,
}

/// The subject name of a bundle, the same as in the bundle's own statement and in drill reports.
#[must_use]
pub fn subject_name(bundle_id: &str) -> String {
    format!("lakedrill-bundle:{bundle_id}")
}

/// The statement of a retirement record: subject `lakedrill-bundle:<id>` with the bundle root as `blake3` and
/// the SHA-256 of the bundle's envelope file, predicate `p`.
#[must_use]
pub fn statement(p: &RetirementPredicate, bundle_envelope_sha256: &str) -> Statement {
    Statement {
        subject: vec![Subject {
            name: subject_name(&p.bundle_id),
            digest: BTreeMap::from([
                ("sha256".to_owned(), bundle_envelope_sha256.to_owned()),
                ("blake3".to_owned(), p.bundle_root.clone()),
            ]),
        }],
        predicate_type: PREDICATE_TYPE.to_owned(),
        predicate: serde_json::to_value(p).unwrap_or_default(),
    }
}

/// A retirement record that verified and names the bundle it was checked against. Only [`check`] makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedRetirement {
    predicate: RetirementPredicate,
    key_name: String,
}

impl VerifiedRetirement {
    /// What the record says.
    #[must_use]
    pub fn predicate(&self) -> &RetirementPredicate {
        &self.predicate
    }

    /// The trust store's name of the key that signed it.
    #[must_use]
    pub fn key_name(&self) -> &str {
        &self.key_name
    }
}

/// Why a retirement record does not retire its bundle. A finding, not an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetirementProblem {
    /// The envelope does not verify under the trust store.
    #[error("the record does not verify: {0}")]
    NotVerified(EvidenceFailure),
    /// A verified statement of another kind.
    #[error("the record's predicateType is {actual}, expected {PREDICATE_TYPE}")]
    WrongPredicateType {
        /// The statement's `predicateType`.
        actual: String,
    },
    /// The predicate or the subject is not a retirement record's.
    #[error("the record is malformed: {reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
    /// The record is about another bundle.
    #[error("the record names {field} {actual}, but the bundle beside it has {expected}")]
    OtherBundle {
        /// Which value differs (`bundle id`, `bundle root`, `bundle envelope sha256`).
        field: &'static str,
        /// The bundle's.
        expected: String,
        /// The record's.
        actual: String,
    },
}

impl RetirementProblem {
    /// The finding on a bundle whose record at `record_uri` has this problem: `BUNDLE_SIGNATURE` when the
    /// record does not verify or is not a retirement record, `SUBJECT_MISMATCH` when it names another bundle.
    #[must_use]
    pub fn finding(&self, record_uri: &str) -> Finding {
        match self {
            Self::OtherBundle {
                field,
                expected,
                actual,
            } => Finding::new(
                FindingKind::SubjectMismatch,
                record_uri,
                Some(format!("a retirement record of this bundle ({field} {expected})")),
                Some(format!("a record naming {field} {actual}; the bundle is not retired")),
            ),
            other => Finding::new(
                FindingKind::BundleSignature,
                record_uri,
                Some(format!(
                    "a retirement record ({PREDICATE_TYPE}) signed by a trusted key"
                )),
                Some(format!("{other}; the bundle is not retired")),
            ),
        }
    }
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Checks the bytes of a retirement record against `trust` and the bundle it lies beside (pure). Only a key with
/// the `deleter` role counts ([`crate::evidence::keys::Role`]; every key without a roles file): a retired bundle
/// is left out of drills, so a record by any other key would hide it.
///
/// # Errors
/// The first rule broken, as a [`RetirementProblem`] (a finding on the bundle, not a failure to decide).
pub fn check(
    record: &[u8],
    trust: &TrustStore,
    bundle: &BundleIdentity<'_>,
) -> Result<VerifiedRetirement, RetirementProblem> {
    let v = evidence::verify(record, &trust.for_role(crate::evidence::keys::Role::Deleter))
        .map_err(RetirementProblem::NotVerified)?;
    let predicate = check_contents(v.predicate_type(), v.predicate(), v.subjects(), bundle)?;
    Ok(VerifiedRetirement {
        predicate,
        key_name: v.key_name().to_owned(),
    })
}

/// Every rule of [`check`] but the signature, on the record's payload read without verifying it (pure): whether the
/// bytes are a retirement record of this bundle at all. For a caller that cannot check the signature (it has no
/// trust store holding the signer) and must still tell a record of this bundle from a planted file or another
/// bundle's record; what it returns is **not verified**.
///
/// # Errors
/// The first rule broken, as a [`RetirementProblem`] (`Malformed` when the bytes are no DSSE envelope of a
/// statement).
pub fn check_unverified(record: &[u8], bundle: &BundleIdentity<'_>) -> Result<RetirementPredicate, RetirementProblem> {
    let st = evidence::peek_unverified(record).ok_or_else(|| RetirementProblem::Malformed {
        reason: "not a DSSE envelope of a JSON statement".into(),
    })?;
    let subjects: Vec<Subject> =
        serde_json::from_value(st["subject"].clone()).map_err(|e| RetirementProblem::Malformed {
            reason: format!("subject: {e}"),
        })?;
    check_contents(
        st["predicateType"].as_str().unwrap_or_default(),
        &st["predicate"],
        &subjects,
        bundle,
    )
}

/// The rules of [`check`] after the signature: predicate type, predicate, one subject, and the bundle they name.
fn check_contents(
    predicate_type: &str,
    predicate: &serde_json::Value,
    subjects: &[Subject],
    bundle: &BundleIdentity<'_>,
) -> Result<RetirementPredicate, RetirementProblem> {
    if predicate_type != PREDICATE_TYPE {
        return Err(RetirementProblem::WrongPredicateType {
            actual: predicate_type.to_owned(),
        });
    }
    let p: RetirementPredicate =
        serde_json::from_value(predicate.clone()).map_err(|e| RetirementProblem::Malformed {
            reason: format!("predicate: {e}"),
        })?;
    if !is_sha256_hex(&p.purge_summary_sha256) {
        return Err(RetirementProblem::Malformed {
            reason: format!(
                "purge_summary_sha256 {:?} is not 64 lowercase hex digits",
                p.purge_summary_sha256
            ),
        });
    }
    if p.purge_summary.is_empty() || p.candidate_id.is_empty() {
        return Err(RetirementProblem::Malformed {
            reason: "purge_summary and candidate_id must not be empty".into(),
        });
    }
    if chrono::DateTime::parse_from_rfc3339(&p.retired_at).is_err() {
        return Err(RetirementProblem::Malformed {
            reason: format!("retired_at {:?} is not an RFC 3339 time", p.retired_at),
        });
    }
    let [subject] = subjects else {
        return Err(RetirementProblem::Malformed {
            reason: format!("{} subjects, expected exactly one", subjects.len()),
        });
    };
    let other = |field: &'static str, expected: &str, actual: &str| {
        (expected != actual).then(|| RetirementProblem::OtherBundle {
            field,
            expected: expected.to_owned(),
            actual: actual.to_owned(),
        })
    };
    let subject_root = subject.digest.get("blake3").map_or("", String::as_str);
    let subject_sha = subject.digest.get("sha256").map_or("", String::as_str);
    let mismatch = other("bundle id", bundle.bundle_id, &p.bundle_id)
        .or_else(|| other("subject", &subject_name(bundle.bundle_id), &subject.name))
        .or_else(|| other("bundle root", bundle.bundle_root, &p.bundle_root))
        .or_else(|| other("bundle root", bundle.bundle_root, subject_root))
        .or_else(|| other("bundle envelope sha256", bundle.envelope_sha256, subject_sha));
    if let Some(m) = mismatch {
        return Err(m);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::keys::{PublicKey, SigningKey};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }

    fn trust(k: &SigningKey) -> TrustStore {
        TrustStore::from_keys(vec![PublicKey::new("ops", "ops.pub", k.verifying_key())]).unwrap()
    }

    fn predicate() -> RetirementPredicate {
        RetirementPredicate {
            bundle_id: "42-0123456789abcdef".into(),
            bundle_root: "b".repeat(64),
            candidate_id: "c-1".into(),
            purge_summary: "file:///r/c-1/summary-4.dsse.json".into(),
            purge_summary_sha256: "c".repeat(64),
            retired_at: "2026-12-01T10:00:00+00:00".into(),
        }
    }

    fn bundle<'a>(root: &'a str, sha: &'a str) -> BundleIdentity<'a> {
        BundleIdentity {
            bundle_id: "42-0123456789abcdef",
            bundle_root: root,
            envelope_sha256: sha,
        }
    }

    fn record(p: &RetirementPredicate, k: &SigningKey) -> Vec<u8> {
        evidence::sign_statement(&statement(p, &"e".repeat(64)), k).to_json_bytes()
    }

    #[test]
    fn a_record_of_its_bundle_verifies_and_round_trips() {
        let k = key(1);
        let (root, sha) = ("b".repeat(64), "e".repeat(64));
        let v = check(&record(&predicate(), &k), &trust(&k), &bundle(&root, &sha)).unwrap();
        assert_eq!(v.predicate(), &predicate());
        assert_eq!(v.key_name(), "ops");
    }

    /// See: review V5 — without the signer's key, a record is still told from junk and from another bundle's.
    #[test]
    fn an_unverified_check_refuses_junk_and_another_bundles_record() {
        let k = key(7);
        let (root, sha) = ("b".repeat(64), "e".repeat(64));
        let p = check_unverified(&record(&predicate(), &k), &bundle(&root, &sha)).unwrap();
        assert_eq!(p, predicate());
        let junk = check_unverified(b"{\"not\": \"a record\"}", &bundle(&root, &sha)).unwrap_err();
        assert!(matches!(junk, RetirementProblem::Malformed { .. }), "{junk}");
        let other_root = "d".repeat(64);
        let other = check_unverified(&record(&predicate(), &k), &bundle(&other_root, &sha)).unwrap_err();
        assert!(
            matches!(
                other,
                RetirementProblem::OtherBundle {
                    field: "bundle root",
                    ..
                }
            ),
            "{other}"
        );
    }

    #[test]
    fn only_a_key_with_the_deleter_role_retires_a_bundle() {
        use crate::evidence::keys::Role;
        let k = key(5);
        let (root, sha) = ("b".repeat(64), "e".repeat(64));
        let rec = record(&predicate(), &k);
        let id = k.keyid().to_owned();
        let sealer = trust(&k).with_roles([(id.clone(), vec![Role::Seal, Role::Drill])]);
        let e = check(&rec, &sealer, &bundle(&root, &sha)).unwrap_err();
        assert!(
            matches!(e, RetirementProblem::NotVerified(EvidenceFailure::RoleNotGranted { ref role, .. }) if role == "deleter"),
            "{e}"
        );
        let deleter = trust(&k).with_roles([(id, vec![Role::Deleter])]);
        assert!(check(&rec, &deleter, &bundle(&root, &sha)).is_ok());
    }

    #[test]
    fn a_changed_byte_an_untrusted_key_or_another_kind_is_not_verified() {
        let k = key(2);
        let (root, sha) = ("b".repeat(64), "e".repeat(64));
        let b = bundle(&root, &sha);
        let mut bytes = record(&predicate(), &k);
        let at = bytes.iter().position(|c| *c == b'"').unwrap() + 40;
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let e = check(&bytes, &trust(&k), &b).unwrap_err();
        assert!(matches!(e, RetirementProblem::NotVerified(_)), "{e}");
        assert_eq!(e.finding("r").kind, FindingKind::BundleSignature);

        let e = check(&record(&predicate(), &key(3)), &trust(&k), &b).unwrap_err();
        assert!(
            matches!(e, RetirementProblem::NotVerified(EvidenceFailure::UntrustedKey { .. })),
            "{e}"
        );

        let mut st = statement(&predicate(), &sha);
        st.predicate_type = "https://lakedrill.dev/drill-report/v1".into();
        let bytes = evidence::sign_statement(&st, &k).to_json_bytes();
        let e = check(&bytes, &trust(&k), &b).unwrap_err();
        assert!(matches!(e, RetirementProblem::WrongPredicateType { .. }), "{e}");

        let mut st = statement(&predicate(), &sha);
        st.predicate["extra"] = serde_json::json!(1);
        let e = check(&evidence::sign_statement(&st, &k).to_json_bytes(), &trust(&k), &b).unwrap_err();
        assert!(matches!(e, RetirementProblem::Malformed { .. }), "{e}");

        let mut p = predicate();
        p.purge_summary_sha256 = "C".repeat(64);
        let e = check(&record(&p, &k), &trust(&k), &b).unwrap_err();
        assert!(e.to_string().contains("purge_summary_sha256"), "{e}");
    }

    #[test]
    fn a_record_of_another_bundle_names_what_differs() {
        let k = key(4);
        let t = trust(&k);
        let bytes = record(&predicate(), &k);
        let (root, sha) = ("b".repeat(64), "e".repeat(64));
        let other_root = "d".repeat(64);
        let e = check(&bytes, &t, &bundle(&other_root, &sha)).unwrap_err();
        assert_eq!(
            e,
            RetirementProblem::OtherBundle {
                field: "bundle root",
                expected: other_root.clone(),
                actual: root.clone()
            }
        );
        let f = e.finding("file:///b/42/retired.dsse.json");
        assert_eq!(f.kind, FindingKind::SubjectMismatch);
        assert_eq!(f.path, "file:///b/42/retired.dsse.json");
        assert!(f.actual.unwrap().contains(&root));

        let other_sha = "f".repeat(64);
        let e = check(&bytes, &t, &bundle(&root, &other_sha)).unwrap_err();
        assert!(
            matches!(
                e,
                RetirementProblem::OtherBundle {
                    field: "bundle envelope sha256",
                    ..
                }
            ),
            "{e}"
        );
        let moved = BundleIdentity {
            bundle_id: "43-0123456789abcdef",
            ..bundle(&root, &sha)
        };
        let e = check(&bytes, &t, &moved).unwrap_err();
        assert!(
            matches!(e, RetirementProblem::OtherBundle { field: "bundle id", .. }),
            "{e}"
        );
    }
}
