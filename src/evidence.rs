//! Evidence: DSSE envelopes of in-toto Statements, signed with Ed25519 (DESIGN §4).
//!
//! What it does: [`Statement::to_bytes`] gives the exact payload bytes of an in-toto Statement v1;
//! [`sign`] / [`sign_statement`] wrap payload bytes in a DSSE [`Envelope`] whose signature is Ed25519 over
//! [`pae`]`(payloadType, payload)`; [`verify`] checks envelope file bytes against a [`TrustStore`] and returns
//! either a [`VerifiedStatement`] or an [`EvidenceFailure`] saying exactly what is wrong.
//!
//! What it guarantees:
//! - The signature covers the exact payload bytes that travel base64-encoded in the envelope. [`verify`] never
//!   re-serializes: it checks the signature over the decoded bytes first, and only then parses them, so
//!   [`VerifiedPayload::payload_bytes`] are byte for byte what was signed.
//! - A signature counts only if its `keyid` is in the trust store and `verify_strict` accepts it. With several
//!   signatures, at least one must be valid and none from a trusted key may be invalid.
//! - Parsing is strict: unknown or duplicate envelope fields, non-canonical base64, duplicate keys in the
//!   payload JSON, and subjects without a lowercase hex `sha256` digest are all refused.
//! - A bad signature is a finding, not an error: [`verify`] returns a typed [`EvidenceFailure`] whose
//!   [`EvidenceFailure::kind`] is a stable string that scripts and reports can rely on.
//! - [`Statement::to_bytes`] is deterministic: compact JSON with every object's keys sorted, whatever
//!   features of `serde_json` other crates switch on.
//!
//! What it does NOT do: no file or network I/O (callers pass bytes; hash the file bytes with [`sha256_hex`]
//! for report chains), no key loading (see [`crate::evidence::keys`]), no check of what the predicate says (the drill
//! report's fields, its chain link, its subjects against a bundle: that is the caller's job), no RFC 8785
//! (JCS) canonicalization of arbitrary JSON, and no timestamps, transparency logs or certificates.
//!
//! The wing (pure and synchronous: no storage, registry or async): this file is DSSE and in-toto;
//! `evidence/keys.rs` the Ed25519 keys and trust stores, `evidence/inventory.rs` a bundle's inventory and
//! root, `evidence/predicate.rs` the drill report, `evidence/fault_matrix.rs` the fault-matrix report,
//! `evidence/retirement.rs` the retirement record a purge writes beside each bundle it retired,
//! `evidence/sample.rs` the drill sampler an auditor recomputes. It
//! may use `model` and the ground files.

pub mod inventory;

pub mod predicate;

pub mod fault_matrix;

pub mod keys;

pub mod retirement;

pub mod sample;

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signature;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::evidence::keys::{SigningKey, TrustStore};

/// The DSSE payload type of an in-toto Statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// DSSE v1 Pre-Authentication Encoding: `"DSSEv1" SP len(type) SP type SP len(body) SP body`, lengths in
/// decimal bytes. This, not the payload, is what gets signed.
///
/// See: <https://github.com/secure-systems-lab/dsse/blob/master/protocol.md>
///
/// ```
/// use lakedrill::evidence::pae;
/// assert_eq!(
///     pae("http://example.com/HelloWorld", b"hello world"),
///     b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
/// );
/// ```
#[must_use]
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let type_len = payload_type.len().to_string();
    let body_len = payload.len().to_string();
    let mut out = Vec::with_capacity(6 + 4 + type_len.len() + payload_type.len() + body_len.len() + payload.len());
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(type_len.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(body_len.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// Lowercase hex SHA-256 of `bytes`. Report chains use it over the envelope *file* bytes.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A DSSE envelope as it is written to disk. Nothing about it is checked until [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// The payload type, [`PAYLOAD_TYPE`] for evidence.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// The payload bytes in standard base64 with padding.
    pub payload: String,
    /// The signatures over `PAE(payloadType, payload bytes)`.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of an [`Envelope`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    /// The signer's key id (see [`crate::evidence::keys::keyid`]).
    pub keyid: String,
    /// The 64-byte Ed25519 signature in standard base64 with padding.
    pub sig: String,
}

impl Envelope {
    /// The envelope as pretty-printed JSON with a trailing newline: the bytes to write to the evidence file.
    /// Keys are in sorted order (`payload`, `payloadType`, `signatures`; `keyid`, `sig`).
    #[must_use]
    pub fn to_json_bytes(&self) -> Vec<u8> {
        // The fields in sorted order, borrowed: the payload of a large bundle is hundreds of MB and is not
        // copied into a `Value` first.
        #[derive(Serialize)]
        struct Sig<'a> {
            keyid: &'a str,
            sig: &'a str,
        }
        #[derive(Serialize)]
        struct Sorted<'a> {
            payload: &'a str,
            #[serde(rename = "payloadType")]
            payload_type: &'a str,
            signatures: Vec<Sig<'a>>,
        }
        let sorted = Sorted {
            payload: &self.payload,
            payload_type: &self.payload_type,
            signatures: self
                .signatures
                .iter()
                .map(|s| Sig {
                    keyid: &s.keyid,
                    sig: &s.sig,
                })
                .collect(),
        };
        let mut out = Vec::with_capacity(self.payload.len() + 512);
        match serde_json::to_writer_pretty(&mut out, &sorted) {
            Ok(()) => {
                out.push(b'\n');
                out
            }
            // Strings into a Vec cannot fail; were it ever to, the Value route gives the same bytes.
            Err(_) => self.to_json_bytes_via_value(),
        }
    }

    fn to_json_bytes_via_value(&self) -> Vec<u8> {
        let signatures = self
            .signatures
            .iter()
            .map(|s| {
                let mut m = Map::new();
                m.insert("keyid".to_owned(), Value::String(s.keyid.clone()));
                m.insert("sig".to_owned(), Value::String(s.sig.clone()));
                Value::Object(m)
            })
            .collect();
        let mut m = Map::new();
        m.insert("payload".to_owned(), Value::String(self.payload.clone()));
        m.insert("payloadType".to_owned(), Value::String(self.payload_type.clone()));
        m.insert("signatures".to_owned(), Value::Array(signatures));
        format!("{:#}\n", Value::Object(m)).into_bytes()
    }
}

/// Signs `payload` as a DSSE envelope with one signature by `key`.
#[must_use]
pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
    let signature = key.sign(&pae(payload_type, payload));
    Envelope {
        payload_type: payload_type.to_owned(),
        payload: STANDARD.encode(payload),
        signatures: vec![EnvelopeSignature {
            keyid: key.keyid().to_owned(),
            sig: STANDARD.encode(signature.to_bytes()),
        }],
    }
}

/// Signs `statement` ([`Statement::to_bytes`]) as a DSSE envelope of type [`PAYLOAD_TYPE`].
///
/// It does not check the statement; call [`Statement::validate`] first to be sure [`verify`] will accept it.
#[must_use]
pub fn sign_statement(statement: &Statement, key: &SigningKey) -> Envelope {
    sign(PAYLOAD_TYPE, &statement.to_bytes(), key)
}

/// One subject of a [`Statement`]: an artifact name and its digests (algorithm → lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// The artifact's name, for example a bundle id or a report path.
    pub name: String,
    /// Digests by algorithm name; evidence always has `sha256`.
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    /// A subject with a single `sha256` digest (lowercase hex).
    #[must_use]
    pub fn sha256(name: impl Into<String>, sha256_hex: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            digest: BTreeMap::from([("sha256".to_owned(), sha256_hex.into())]),
        }
    }
}

/// An in-toto Statement v1 to be signed. Its `_type` is always [`STATEMENT_TYPE`].
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// What the statement is about; at least one, each with a `sha256` digest.
    pub subject: Vec<Subject>,
    /// The URI naming the predicate's schema.
    pub predicate_type: String,
    /// The predicate, a JSON object (the drill report for lakedrill evidence).
    pub predicate: Value,
}

impl Statement {
    /// The exact payload bytes to sign: compact JSON, `{"_type", "predicate", "predicateType", "subject"}`,
    /// with the keys of every object (the predicate's too) in sorted order. Deterministic for equal values.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1024);
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        write_statement(out, &self.subject, &self.predicate_type, |out| {
            write_sorted(&self.predicate, out);
            Ok(())
        })
        .unwrap_or_default();
    }

    /// Checks the statement against the rules [`verify`] applies to a payload.
    ///
    /// # Errors
    ///
    /// The [`EvidenceFailure::StatementMalformed`] that [`verify`] would report for these bytes.
    pub fn validate(&self) -> Result<(), EvidenceFailure> {
        check_statement(&self.to_bytes(), false).map(|_| ())
    }
}

/// Writes `value` as compact JSON with every object's keys in sorted order (whether or not `serde_json`'s
/// `preserve_order` feature is on somewhere in the build), without copying it.
/// Writes the payload of a statement about `subject`, its predicate written by `predicate` (see
/// [`Statement::to_bytes`]).
fn write_statement(
    out: &mut Vec<u8>,
    subject: &[Subject],
    predicate_type: &str,
    predicate: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) -> Result<(), serde_json::Error> {
    out.extend_from_slice(b"{\"_type\":");
    write_sorted(&Value::String(STATEMENT_TYPE.to_owned()), out);
    out.extend_from_slice(b",\"predicate\":");
    predicate(out)?;
    out.extend_from_slice(b",\"predicateType\":");
    write_sorted(&Value::String(predicate_type.to_owned()), out);
    out.extend_from_slice(b",\"subject\":[");
    for (i, s) in subject.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let digest = s
            .digest
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut m = Map::new();
        m.insert("digest".to_owned(), Value::Object(digest));
        m.insert("name".to_owned(), Value::String(s.name.clone()));
        write_sorted(&Value::Object(m), out);
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

/// Signs a statement whose predicate is serialized from `predicate` instead of held as a JSON value: a million
/// objects' inventory is about 2 GB as a `serde_json::Value` (#24). `predicate` must serialize as a JSON object
/// with the keys of every object in it in sorted order; the payload is then the bytes [`Statement::to_bytes`]
/// writes for the equal value. Returns the envelope file's bytes ([`Envelope::to_json_bytes`] of the envelope
/// [`sign_statement`] makes of the equal statement), built with one copy of the payload: the statement is
/// written straight after room for the PAE header, signed there, and base64-encoded into the file as it is
/// written (no PAE copy, no base64 string; a million-path summary is about 80 MB of payload, #24).
///
/// # Errors
/// When `predicate` cannot be serialized.
pub fn sign_statement_serialized(
    subject: &[Subject],
    predicate_type: &str,
    predicate: &impl Serialize,
    key: &SigningKey,
) -> Result<Vec<u8>, serde_json::Error> {
    // PAE = "DSSEv1" SP len(type) SP type SP len(body) SP body; the header's length is not known until the
    // body is, so the body goes after as much room as the longest header takes and the header is written
    // right-aligned in front of it.
    let room = 7 + 20 + 1 + PAYLOAD_TYPE.len() + 1 + 20 + 1;
    let mut pae = Vec::with_capacity(room + (1 << 16));
    pae.resize(room, 0);
    write_statement(&mut pae, subject, predicate_type, |out| {
        serde_json::to_writer(&mut *out, predicate)
    })?;
    let body_len = pae.len() - room;
    let header = format!("DSSEv1 {} {PAYLOAD_TYPE} {body_len} ", PAYLOAD_TYPE.len());
    let start = room - header.len();
    pae[start..room].copy_from_slice(header.as_bytes());
    let signature = key.sign(&pae[start..]);
    let payload = &pae[room..];
    #[derive(Serialize)]
    struct Sig<'a> {
        keyid: &'a str,
        sig: &'a str,
    }
    /// The payload in standard base64, encoded as the file is written.
    struct Base64Payload<'a>(&'a [u8]);
    impl Serialize for Base64Payload<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            s.collect_str(&base64::display::Base64Display::new(self.0, &STANDARD))
        }
    }
    #[derive(Serialize)]
    struct Sorted<'a> {
        payload: Base64Payload<'a>,
        #[serde(rename = "payloadType")]
        payload_type: &'a str,
        signatures: [Sig<'a>; 1],
    }
    let sig = STANDARD.encode(signature.to_bytes());
    let file = Sorted {
        payload: Base64Payload(payload),
        payload_type: PAYLOAD_TYPE,
        signatures: [Sig {
            keyid: key.keyid(),
            sig: &sig,
        }],
    };
    let mut out = Vec::with_capacity(payload.len().div_ceil(3) * 4 + 512);
    serde_json::to_writer_pretty(&mut out, &file)?;
    out.push(b'\n');
    Ok(out)
}

fn write_sorted(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_sorted(&Value::String(k.clone()), out);
                out.push(b':');
                write_sorted(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_sorted(v, out);
            }
            out.push(b']');
        }
        // A scalar's Display is its compact JSON and cannot fail.
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

/// Appends `value` to `out` as [`Statement::to_bytes`] writes values: compact JSON, keys sorted (a bundle's
/// inventory member is written line by line this way).
///
/// # Errors
/// When `value` cannot be represented as JSON (a map with non-string keys).
pub fn append_sorted_json(value: &impl Serialize, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    write_sorted(&serde_json::to_value(value)?, out);
    Ok(())
}

/// Why evidence did not verify. A finding, not an error: the caller records it and the run goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum EvidenceFailure {
    /// The bytes are not a DSSE envelope (`{"payloadType", "payload", "signatures": [{"keyid", "sig"}]}`).
    #[error("not a DSSE envelope: expected {{\"payloadType\", \"payload\", \"signatures\"}} JSON: {reason}")]
    EnvelopeMalformed {
        /// What the parser reported.
        reason: String,
    },
    /// The `payload` is not canonical standard base64 with padding.
    #[error("envelope payload is not standard base64: {reason}")]
    PayloadNotBase64 {
        /// What the decoder reported.
        reason: String,
    },
    /// The envelope has an empty `signatures` array.
    #[error("envelope has no signature, expected at least one")]
    NoSignature,
    /// No signature is from a key in the trust store.
    #[error(
        "no signature is from a trusted key: expected a keyid in the trust store, found [{}]",
        keyids.join(", ")
    )]
    UntrustedKey {
        /// The key ids the envelope's signatures name.
        keyids: Vec<String>,
    },
    /// No signature counts, and one is from a key the trust folder holds but whose `roles.toml` does not give
    /// it the role that signs this kind ([`crate::evidence::keys::TrustStore::for_role`]).
    #[error(
        "signed by {key_name} (keyid {keyid}), a key of the trust folder, but {roles_file} does not give it the {role} \
         role that signs this kind"
    )]
    RoleNotGranted {
        /// The signature's key id.
        keyid: String,
        /// The trusted key's name.
        key_name: String,
        /// The role it lacks (`drill`, `seal`, `deleter`, `governance`).
        role: String,
        /// The trust folder's roles file.
        roles_file: String,
    },
    /// A signature from a trusted key does not verify over `PAE(payloadType, payload)`.
    #[error("signature by trusted key {key_name} ({keyid}) does not verify over PAE(payloadType, payload): {reason}")]
    BadSignature {
        /// The signature's key id.
        keyid: String,
        /// The trusted key's name.
        key_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The envelope is validly signed but its payload type is not [`PAYLOAD_TYPE`].
    #[error("payload type is {actual:?}, expected {expected:?}")]
    WrongPayloadType {
        /// [`PAYLOAD_TYPE`].
        expected: String,
        /// The envelope's `payloadType`.
        actual: String,
    },
    /// The signed payload is not an in-toto Statement as evidence requires.
    #[error("payload is not a valid in-toto Statement: {reason}")]
    StatementMalformed {
        /// What is missing or wrong, with the expected shape.
        reason: String,
    },
    /// The signed payload is a JSON object whose `_type` is not [`STATEMENT_TYPE`].
    #[error("statement _type is {actual}, expected {expected:?}")]
    WrongStatementType {
        /// [`STATEMENT_TYPE`].
        expected: String,
        /// The payload's `_type`, as JSON (`null` if absent).
        actual: String,
    },
}

impl EvidenceFailure {
    /// A stable `SCREAMING_SNAKE` name of the failure, for reports and scripts (`BAD_SIGNATURE`, …); the same
    /// string as the `kind` field of its JSON form.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::EnvelopeMalformed { .. } => "ENVELOPE_MALFORMED",
            Self::PayloadNotBase64 { .. } => "PAYLOAD_NOT_BASE64",
            Self::NoSignature => "NO_SIGNATURE",
            Self::UntrustedKey { .. } => "UNTRUSTED_KEY",
            Self::RoleNotGranted { .. } => "ROLE_NOT_GRANTED",
            Self::BadSignature { .. } => "BAD_SIGNATURE",
            Self::WrongPayloadType { .. } => "WRONG_PAYLOAD_TYPE",
            Self::StatementMalformed { .. } => "STATEMENT_MALFORMED",
            Self::WrongStatementType { .. } => "WRONG_STATEMENT_TYPE",
        }
    }
}

/// A Statement whose envelope verified under a trusted key, parsed whole. Only [`verify`] makes one. It
/// dereferences to the [`VerifiedPayload`] (key, exact payload bytes, subjects, predicate type).
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedStatement {
    verified: VerifiedPayload,
    statement: Value,
}

impl std::ops::Deref for VerifiedStatement {
    type Target = VerifiedPayload;

    fn deref(&self) -> &VerifiedPayload {
        &self.verified
    }
}

impl VerifiedStatement {
    /// The whole Statement as parsed from [`VerifiedPayload::payload_bytes`].
    #[must_use]
    pub fn statement(&self) -> &Value {
        &self.statement
    }

    /// The statement's `predicate` (always a JSON object).
    #[must_use]
    pub fn predicate(&self) -> &Value {
        &self.statement["predicate"]
    }
}

/// Verifies envelope file bytes against `trust`.
///
/// In order: the envelope must parse (strictly); the payload must be canonical standard base64; there must be
/// a signature; every signature whose `keyid` is trusted must verify (`verify_strict`) over
/// `PAE(payloadType, payload bytes)` and at least one must; the payload type must be [`PAYLOAD_TYPE`]; the
/// payload must be an in-toto Statement v1 with a non-empty `subject` whose items have a `name` and a 64-char
/// lowercase hex `digest.sha256`, a string `predicateType` and an object `predicate`. The signature is checked
/// before the payload is parsed or its type trusted, as DSSE requires.
///
/// # Errors
///
/// The first rule broken, as an [`EvidenceFailure`]. This is a finding about the evidence, not a failure to
/// decide.
pub fn verify(envelope_bytes: &[u8], trust: &TrustStore) -> Result<VerifiedStatement, EvidenceFailure> {
    let (key, payload) = check_signatures(envelope_bytes, trust)?;
    let checked = check_statement(&payload, false)?;
    Ok(VerifiedStatement {
        verified: VerifiedPayload {
            keyid: key.keyid().to_owned(),
            key_name: key.name().to_owned(),
            payload_bytes: payload,
            subjects: checked.subjects,
            predicate_type: checked.predicate_type,
        },
        statement: checked.statement,
    })
}

/// [`verify`] for large statements (a bundle's payload holds its whole inventory): the same checks, in the
/// same order, with the same failures, but the predicate is not built as a JSON value tree. It is walked once
/// for its shape (an object, with no repeated key anywhere inside) and kept as the exact payload bytes, which
/// [`VerifiedPayload::parse_predicate`] parses straight into a typed predicate. The envelope is taken by value and
/// dropped once its payload is decoded, so the envelope and the payload never exist beside the parse.
///
/// # Errors
///
/// The first rule broken, as an [`EvidenceFailure`], exactly as [`verify`].
pub fn verify_payload(
    envelope_bytes: impl AsRef<[u8]>,
    trust: &TrustStore,
) -> Result<VerifiedPayload, EvidenceFailure> {
    let (key, payload) = check_signatures(envelope_bytes.as_ref(), trust)?;
    drop(envelope_bytes);
    let checked = check_statement(&payload, true)?;
    Ok(VerifiedPayload {
        keyid: key.keyid().to_owned(),
        key_name: key.name().to_owned(),
        payload_bytes: payload,
        subjects: checked.subjects,
        predicate_type: checked.predicate_type,
    })
}

/// A statement whose envelope verified under a trusted key, kept as its exact payload bytes; its subjects and
/// predicate type are checked. Only [`verify_payload`] and [`verify`] (inside a [`VerifiedStatement`]) make one.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedPayload {
    keyid: String,
    key_name: String,
    payload_bytes: Vec<u8>,
    subjects: Vec<Subject>,
    predicate_type: String,
}

impl VerifiedPayload {
    /// The key id of the first valid signature.
    #[must_use]
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The trust store's name for that key (its `.pub` file stem).
    #[must_use]
    pub fn key_name(&self) -> &str {
        &self.key_name
    }

    /// The exact payload bytes that were signed.
    #[must_use]
    pub fn payload_bytes(&self) -> &[u8] {
        &self.payload_bytes
    }

    /// The statement's `predicateType`.
    #[must_use]
    pub fn predicate_type(&self) -> &str {
        &self.predicate_type
    }

    /// The statement's subjects (non-empty, each with a `sha256` digest).
    #[must_use]
    pub fn subjects(&self) -> &[Subject] {
        &self.subjects
    }

    /// The statement's `predicate`, parsed from the signed bytes straight into `T` (no value tree). The
    /// predicate is known to be an object without repeated keys.
    ///
    /// # Errors
    ///
    /// What `serde_json` reports when the predicate is not a `T`.
    pub fn parse_predicate<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        #[derive(Deserialize)]
        struct Only<T> {
            predicate: T,
        }
        serde_json::from_slice::<Only<T>>(&self.payload_bytes).map(|o| o.predicate)
    }
}

/// The envelope as read for verifying: the payload is borrowed from the file bytes (a large bundle's base64
/// payload is hundreds of MB and is not copied).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvelopeRef<'a> {
    #[serde(rename = "payloadType")]
    payload_type: String,
    #[serde(borrow)]
    payload: std::borrow::Cow<'a, str>,
    signatures: Vec<EnvelopeSignature>,
}

/// The envelope checks of [`verify`] up to the payload type: returns the key that accepted the signature and
/// the decoded payload. The payload is decoded once, behind the PAE header it is signed with, and the header
/// is then removed in place: the payload is never held twice.
fn check_signatures<'t>(
    envelope_bytes: &[u8],
    trust: &'t TrustStore,
) -> Result<(&'t crate::evidence::keys::PublicKey, Vec<u8>), EvidenceFailure> {
    let envelope: EnvelopeRef<'_> = serde_json::from_slice(envelope_bytes)
        .map_err(|e| EvidenceFailure::EnvelopeMalformed { reason: e.to_string() })?;
    let encoded = envelope.payload.as_bytes();
    let not_base64 = |reason: String| EvidenceFailure::PayloadNotBase64 { reason };
    // The exact decoded length (padded standard base64), which the PAE header names before the body.
    let padding = encoded.iter().rev().take(2).take_while(|b| **b == b'=').count();
    let exact = (encoded.len() / 4 * 3).saturating_sub(padding);
    let header = format!(
        "DSSEv1 {} {} {exact} ",
        envelope.payload_type.len(),
        envelope.payload_type
    );
    let mut message = Vec::with_capacity(header.len() + exact + 3);
    message.extend_from_slice(header.as_bytes());
    message.resize(header.len() + exact + 3, 0);
    let n = STANDARD
        .decode_slice(encoded, &mut message[header.len()..])
        .map_err(|e| not_base64(e.to_string()))?;
    if n != exact {
        return Err(not_base64(format!(
            "decodes to {n} bytes, expected {exact} from its length and padding"
        )));
    }
    message.truncate(header.len() + n);
    if envelope.signatures.is_empty() {
        return Err(EvidenceFailure::NoSignature);
    }
    let mut accepted = None;
    for signature in &envelope.signatures {
        let Some(key) = trust.get(&signature.keyid) else {
            continue;
        };
        let bad = |reason: String| EvidenceFailure::BadSignature {
            keyid: signature.keyid.clone(),
            key_name: key.name().to_owned(),
            reason,
        };
        let bytes = STANDARD
            .decode(&signature.sig)
            .map_err(|e| bad(format!("sig is not standard base64: {e}")))?;
        let sig =
            Signature::from_slice(&bytes).map_err(|_| bad(format!("sig is {} bytes, expected 64", bytes.len())))?;
        key.verifying_key()
            .verify_strict(&message, &sig)
            .map_err(|e| bad(e.to_string()))?;
        accepted.get_or_insert(key);
    }
    let Some(key) = accepted else {
        // A key the folder trusts for other kinds: say so, naming it and the role it lacks.
        if let Some((key, role)) = envelope.signatures.iter().find_map(|s| trust.withheld(&s.keyid)) {
            return Err(EvidenceFailure::RoleNotGranted {
                keyid: key.keyid().to_owned(),
                key_name: key.name().to_owned(),
                role: role.name().to_owned(),
                roles_file: trust.roles_file().map_or_else(
                    || crate::evidence::keys::ROLES_FILE.to_owned(),
                    |p| p.display().to_string(),
                ),
            });
        }
        return Err(EvidenceFailure::UntrustedKey {
            keyids: envelope.signatures.iter().map(|s| s.keyid.clone()).collect(),
        });
    };

    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(EvidenceFailure::WrongPayloadType {
            expected: PAYLOAD_TYPE.to_owned(),
            actual: envelope.payload_type,
        });
    }
    // The payload alone: the header is moved out of the way in place (no second buffer).
    message.drain(..header.len());
    Ok((key, message))
}

struct CheckedStatement {
    statement: Value,
    subjects: Vec<Subject>,
    predicate_type: String,
}

/// Checks the statement's shape. `lean`: the top-level `predicate` is walked for its shape only (no repeated
/// key anywhere inside) and stands in the returned statement as an empty value of its JSON kind.
fn check_statement(payload: &[u8], lean: bool) -> Result<CheckedStatement, EvidenceFailure> {
    let malformed = |reason: String| EvidenceFailure::StatementMalformed { reason };
    let statement = if lean {
        serde_json::from_slice::<LeanStatement>(payload).map(|s| s.0)
    } else {
        serde_json::from_slice::<StrictValue>(payload).map(|s| s.0)
    }
    .map_err(|e| malformed(format!("not JSON: {e}")))?;
    let Value::Object(object) = &statement else {
        return Err(malformed(format!(
            "expected a JSON object, found {}",
            json_kind(&statement)
        )));
    };
    match object.get("_type") {
        Some(Value::String(t)) if t == STATEMENT_TYPE => {}
        other => {
            return Err(EvidenceFailure::WrongStatementType {
                expected: STATEMENT_TYPE.to_owned(),
                actual: other.map_or_else(|| "null (absent)".to_owned(), Value::to_string),
            });
        }
    }

    let items = match object.get("subject") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => {
            return Err(malformed("subject is empty, expected at least one".to_owned()));
        }
        other => {
            return Err(malformed(format!(
                "subject is {}, expected an array",
                other.map_or("absent", json_kind)
            )));
        }
    };
    let subjects = items
        .iter()
        .enumerate()
        .map(|(i, item)| check_subject(i, item).map_err(malformed))
        .collect::<Result<Vec<_>, _>>()?;

    let predicate_type = match object.get("predicateType") {
        Some(Value::String(t)) => t.clone(),
        other => {
            return Err(malformed(format!(
                "predicateType is {}, expected a string",
                other.map_or("absent", json_kind)
            )));
        }
    };
    match object.get("predicate") {
        Some(Value::Object(_)) => {}
        other => {
            return Err(malformed(format!(
                "predicate is {}, expected an object",
                other.map_or("absent", json_kind)
            )));
        }
    }
    Ok(CheckedStatement {
        statement,
        subjects,
        predicate_type,
    })
}

fn check_subject(i: usize, item: &Value) -> Result<Subject, String> {
    let Value::Object(item) = item else {
        return Err(format!("subject[{i}] is {}, expected an object", json_kind(item)));
    };
    let name = match item.get("name") {
        Some(Value::String(name)) => name.clone(),
        other => {
            return Err(format!(
                "subject[{i}].name is {}, expected a string",
                other.map_or("absent", json_kind)
            ));
        }
    };
    let Some(Value::Object(digests)) = item.get("digest") else {
        return Err(format!(
            "subject[{i}].digest is {}, expected an object",
            item.get("digest").map_or("absent", json_kind)
        ));
    };
    let mut digest = BTreeMap::new();
    for (algorithm, value) in digests {
        let Value::String(value) = value else {
            return Err(format!(
                "subject[{i}].digest.{algorithm} is {}, expected a string",
                json_kind(value)
            ));
        };
        digest.insert(algorithm.clone(), value.clone());
    }
    match digest.get("sha256") {
        Some(hex) if is_lower_hex(hex, 64) => {}
        Some(hex) => {
            return Err(format!(
                "subject[{i}].digest.sha256 is {hex:?}, expected 64 lowercase hex characters"
            ));
        }
        None => return Err(format!("subject[{i}].digest has no sha256, expected one")),
    }
    Ok(Subject { name, digest })
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A JSON value parsed like [`Value`] except that an object with a repeated key is an error. `serde_json`
/// keeps the last duplicate silently, and another parser may keep the first, so a signed payload with
/// duplicate keys could be read two ways.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(StrictVisitor { lean: false })
            .map(StrictValue)
    }
}

/// A statement parsed like [`StrictValue`] except its top-level `predicate`, which is only walked for its
/// shape ([`Shape`]): a million-entry inventory is checked without becoming a tree of values.
struct LeanStatement(Value);

impl<'de> Deserialize<'de> for LeanStatement {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(StrictVisitor { lean: true })
            .map(LeanStatement)
    }
}

/// `lean`: this is the statement itself, whose `predicate` member is walked by [`Shape`].
struct StrictVisitor {
    lean: bool,
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let value = if self.lean && key == "predicate" {
                access.next_value::<Shape>()?.0
            } else {
                access.next_value::<StrictValue>()?.0
            };
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// A JSON value walked for its shape only: an object with a repeated key anywhere inside is an error (as for
/// [`StrictValue`]), and what is kept is an empty value of the same JSON kind.
struct Shape(Value);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor).map(Shape)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::from(0))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::from(0))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::from(0))
    }

    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::String(String::new()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<Shape>()?.is_some() {}
        Ok(Value::Array(Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = access.next_key::<String>()? {
            if keys.contains(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            access.next_value::<Shape>()?;
            keys.insert(key);
        }
        Ok(Value::Object(Map::new()))
    }
}

/// The statement inside an envelope, read **without verifying** anything: for display and for choosing
/// which checks to run, never for trusting. `None` when the bytes are not an envelope of a JSON statement.
#[must_use]
pub fn peek_unverified(envelope: &[u8]) -> Option<serde_json::Value> {
    use base64::Engine as _;
    let env: serde_json::Value = serde_json::from_slice(envelope).ok()?;
    let payload = base64::engine::general_purpose::STANDARD
        .decode(env.get("payload")?.as_str()?)
        .ok()?;
    serde_json::from_slice(&payload).ok()
}

/// The statement inside an envelope read into `T` **without verifying** anything (as [`peek_unverified`], with no
/// JSON value tree: fields `T` does not name are skipped). For choosing what not to do, never for trusting.
#[must_use]
pub fn peek_unverified_as<T: serde::de::DeserializeOwned>(envelope: &[u8]) -> Option<T> {
    use base64::Engine as _;
    #[derive(serde::Deserialize)]
    struct Env {
        payload: String,
    }
    let env: Env = serde_json::from_slice(envelope).ok()?;
    let payload = base64::engine::general_purpose::STANDARD.decode(env.payload).ok()?;
    serde_json::from_slice(&payload).ok()
}

/// The subjects a signed envelope names, read without building its predicate (the bulk of a large bundle's
/// payload) as JSON values: lakedrill writes the statement's keys in sorted order, so `subject` is its last
/// member and is parsed alone; a payload in another layout is parsed whole. **Not verified**: a drill records
/// these as what each bundle of its population claims, and verifies the sampled ones in full.
///
/// # Errors
/// A message when the envelope, its base64 payload or its subjects do not parse.
pub fn peek_subjects(envelope: &[u8]) -> Result<Vec<Subject>, String> {
    #[derive(Deserialize)]
    struct Outer<'a> {
        #[serde(borrow)]
        payload: std::borrow::Cow<'a, str>,
    }
    const KEY: &[u8] = b",\"subject\":[";
    let env: Outer<'_> = serde_json::from_slice(envelope).map_err(|e| format!("not a DSSE envelope: {e}"))?;
    let payload = STANDARD
        .decode(env.payload.as_bytes())
        .map_err(|e| format!("the payload is not base64: {e}"))?;
    drop(env);
    // Inside a JSON string a quote is escaped, so the last `,"subject":[` of a key-sorted statement is its own.
    let tail = payload.strip_suffix(b"}").and_then(|p| {
        let at = p.windows(KEY.len()).rposition(|w| w == KEY)?;
        serde_json::from_slice::<Vec<Value>>(&p[at + KEY.len() - 1..]).ok()
    });
    let items = match tail {
        Some(items) => items,
        None => {
            let statement: Value =
                serde_json::from_slice(&payload).map_err(|e| format!("the payload is not JSON: {e}"))?;
            match statement.get("subject") {
                Some(Value::Array(items)) => items.clone(),
                other => {
                    return Err(format!(
                        "subject is {}, expected an array",
                        other.map_or("absent", json_kind)
                    ));
                }
            }
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| check_subject(i, item))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::evidence::keys::PublicKey;
    use serde_json::json;

    fn key(seed: u8) -> SigningKey {
        SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }

    #[test]
    fn a_serialized_predicate_signs_the_bytes_of_the_equal_value() {
        #[derive(Serialize)]
        struct P<'a> {
            a: u64,
            b: &'a [&'a str],
            c: Value,
        }
        let k = key(3);
        let subject = vec![Subject {
            name: "x".into(),
            digest: BTreeMap::from([("sha256".to_owned(), "00".repeat(32))]),
        }];
        let c = json!({"z": 1, "y": {"q": [1, 2], "p": "é\"\n"}});
        let typed = P {
            a: 7,
            b: &["p/1", "p/2"],
            c: c.clone(),
        };
        let value = Statement {
            subject: subject.clone(),
            predicate_type: "t".into(),
            predicate: json!({"a": 7, "b": ["p/1", "p/2"], "c": c}),
        };
        let from_typed = sign_statement_serialized(&subject, "t", &typed, &k).unwrap();
        assert_eq!(from_typed, sign_statement(&value, &k).to_json_bytes());
        assert!(verify(&from_typed, &trust(&[("k", &k)])).is_ok());
    }

    fn trust(keys: &[(&str, &SigningKey)]) -> TrustStore {
        TrustStore::from_keys(
            keys.iter()
                .map(|(name, k)| PublicKey::new(*name, format!("{name}.pub"), k.verifying_key()))
                .collect(),
        )
        .unwrap()
    }

    fn statement() -> Statement {
        Statement {
            subject: vec![Subject::sha256("bundle-1", sha256_hex(b"bundle"))],
            predicate_type: "https://lakedrill.dev/drill-report/v1".to_owned(),
            predicate: json!({"summary": {"gate": "PASS", "passed": 1, "failed": 0}, "previous_report": null}),
        }
    }

    /// Signs a raw JSON payload (for statements `Statement` cannot express).
    fn signed_json(payload: &Value, k: &SigningKey) -> Vec<u8> {
        sign(PAYLOAD_TYPE, payload.to_string().as_bytes(), k).to_json_bytes()
    }

    /// The failure of `bytes`, which [`verify_payload`] must report exactly as [`verify`] does.
    fn kind_of(bytes: &[u8], trust: &TrustStore) -> &'static str {
        let err = verify(bytes, trust).unwrap_err();
        assert_eq!(verify_payload(bytes, trust).unwrap_err(), err);
        err.kind()
    }

    #[test]
    fn pae_known_answers() {
        // The example from the DSSE protocol spec.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
        // Lengths are bytes, not chars.
        assert_eq!(pae("é", "ü".as_bytes()), "DSSEv1 2 é 2 ü".as_bytes());
    }

    #[test]
    fn peek_subjects_reads_the_subjects_of_any_layout_and_names_a_bad_envelope() {
        let k = key(1);
        let mut st = statement();
        // A predicate that itself holds a `subject` key, and a subject name with a quote in it.
        st.predicate = json!({"inner": {"subject": [{"name": "decoy"}]}, "n": 1});
        st.subject[0].name = "a \"quoted\" ,\"subject\":[ name".into();
        let canonical = sign_statement(&st, &k).to_json_bytes();
        assert_eq!(peek_subjects(&canonical).unwrap(), st.subject);
        // Another key order (subject first): parsed whole.
        let other = format!(
            r#"{{"subject":{},"_type":"{STATEMENT_TYPE}","predicateType":"{}","predicate":{}}}"#,
            serde_json::to_string(&st.subject).unwrap(),
            st.predicate_type,
            st.predicate
        );
        let other = sign(PAYLOAD_TYPE, other.as_bytes(), &k).to_json_bytes();
        assert_eq!(peek_subjects(&other).unwrap(), st.subject);
        assert!(peek_subjects(b"{}").unwrap_err().contains("not a DSSE envelope"));
        assert!(
            peek_subjects(br#"{"payload": "!!"}"#)
                .unwrap_err()
                .contains("not base64")
        );
        let no_subject = signed_json(&json!({"_type": STATEMENT_TYPE}), &k);
        assert!(peek_subjects(&no_subject).unwrap_err().contains("subject is absent"));
    }

    #[test]
    fn round_trip() {
        let k = key(1);
        let store = trust(&[("ops", &k)]);
        let st = statement();
        st.validate().unwrap();
        let envelope = sign_statement(&st, &k);
        let bytes = envelope.to_json_bytes();
        assert!(bytes.ends_with(b"}\n"));
        assert_eq!(serde_json::from_slice::<Envelope>(&bytes).unwrap(), envelope);

        let verified = verify(&bytes, &store).unwrap();
        assert_eq!(verified.keyid(), k.keyid());
        assert_eq!(verified.key_name(), "ops");
        assert_eq!(verified.payload_bytes(), st.to_bytes());
        assert_eq!(verified.predicate(), &st.predicate);
        assert_eq!(verified.predicate_type(), st.predicate_type);
        assert_eq!(verified.subjects(), st.subject);
        assert_eq!(verified.statement()["_type"], STATEMENT_TYPE);
    }

    #[test]
    fn statement_bytes_are_serde_jsons_compact_rendering_of_the_sorted_value() {
        let items = json!([{"path": "d/é\"q.parquet", "size": 3, "z": null, "a": [1, 2.5]}, {"b": {"y": 1, "x": 2}}]);
        let whole = Statement {
            subject: vec![Subject::sha256("s", "0".repeat(64))],
            predicate_type: "p".to_owned(),
            predicate: json!({"z": 1, "inventory": items, "a": "inventory"}),
        };
        assert_eq!(whole.to_bytes(), {
            let v: Value = serde_json::from_slice(&whole.to_bytes()).unwrap();
            v.to_string().into_bytes()
        });
    }

    #[test]
    fn envelope_json_is_the_pretty_sorted_rendering() {
        let e = sign_statement(&statement(), &key(3));
        assert_eq!(e.to_json_bytes(), e.to_json_bytes_via_value());
    }

    #[test]
    fn statement_bytes_are_compact_sorted_and_deterministic() {
        let st = Statement {
            subject: vec![Subject {
                name: "n".to_owned(),
                digest: BTreeMap::from([
                    ("sha256".to_owned(), "a".repeat(64)),
                    ("blake3".to_owned(), "b".repeat(64)),
                ]),
            }],
            predicate_type: "p".to_owned(),
            predicate: json!({"z": 1, "a": [{"y": true, "b": null}]}),
        };
        let expected = format!(
            r#"{{"_type":"{STATEMENT_TYPE}","predicate":{{"a":[{{"b":null,"y":true}}],"z":1}},"predicateType":"p","subject":[{{"digest":{{"blake3":"{}","sha256":"{}"}},"name":"n"}}]}}"#,
            "b".repeat(64),
            "a".repeat(64)
        );
        assert_eq!(String::from_utf8(st.to_bytes()).unwrap(), expected);
        assert_eq!(st.to_bytes(), st.clone().to_bytes());
    }

    #[test]
    fn verify_uses_exact_payload_bytes_not_reserialized() {
        // A payload with non-canonical spacing and key order still verifies, and comes back byte for byte.
        let k = key(2);
        let payload = format!(
            "{{ \"subject\": [{{\"name\":\"x\",\"digest\":{{\"sha256\":\"{}\"}}}}],\n \"_type\": \"{STATEMENT_TYPE}\", \"predicateType\": \"t\", \"predicate\": {{}} }}",
            "0".repeat(64)
        );
        let bytes = sign(PAYLOAD_TYPE, payload.as_bytes(), &k).to_json_bytes();
        let verified = verify(&bytes, &trust(&[("k", &k)])).unwrap();
        assert_eq!(verified.payload_bytes(), payload.as_bytes());
    }

    #[test]
    fn flipping_any_byte_fails_or_changes_only_whitespace() {
        let k = key(3);
        let store = trust(&[("ops", &k)]);
        let st = Statement {
            subject: vec![Subject::sha256("b", sha256_hex(b"x"))],
            predicate_type: "t".to_owned(),
            predicate: json!({"ok": true}),
        };
        let original = sign_statement(&st, &k).to_json_bytes();
        let original_envelope: Envelope = serde_json::from_slice(&original).unwrap();
        let reference = verify(&original, &store).unwrap();

        let mut accepted = 0usize;
        let mut tampered = original.clone();
        for pos in 0..original.len() {
            for replacement in 0..=u8::MAX {
                if replacement == original[pos] {
                    continue;
                }
                tampered[pos] = replacement;
                assert_eq!(
                    verify_payload(&tampered, &store).map(|v| v.payload_bytes().to_vec()),
                    verify(&tampered, &store).map(|v| v.payload_bytes().to_vec()),
                    "byte {pos} -> {replacement:#04x}: the lean and the full verification disagree"
                );
                if let Ok(v) = verify(&tampered, &store) {
                    // Only JSON whitespace may change into other JSON whitespace.
                    assert!(
                        b" \t\n\r".contains(&original[pos]) && b" \t\n\r".contains(&replacement),
                        "byte {pos} {:#04x} -> {replacement:#04x} still verifies",
                        original[pos]
                    );
                    assert_eq!(v, reference);
                    let envelope: Envelope = serde_json::from_slice(&tampered).unwrap();
                    assert_eq!(envelope, original_envelope);
                    accepted += 1;
                }
            }
            tampered[pos] = original[pos];
        }
        assert!(accepted > 0, "the pretty JSON has whitespace that may change");
    }

    #[test]
    fn wrong_key_is_untrusted() {
        let signer = key(4);
        let other = key(5);
        let bytes = sign_statement(&statement(), &signer).to_json_bytes();
        let err = verify(&bytes, &trust(&[("other", &other)])).unwrap_err();
        assert_eq!(err.kind(), "UNTRUSTED_KEY");
        assert_eq!(
            err,
            EvidenceFailure::UntrustedKey {
                keyids: vec![signer.keyid().to_owned()]
            }
        );
        assert!(err.to_string().contains(signer.keyid()), "{err}");
    }

    /// A key the folder trusts, left out for lacking the role, is named with the role it lacks (it was reported as
    /// "expected a keyid in the trust store").
    #[test]
    fn a_trusted_key_without_the_role_is_named_with_the_role_it_lacks() {
        use crate::evidence::keys::Role;
        let deleter = key(4);
        let bytes = sign_statement(&statement(), &deleter).to_json_bytes();
        let store = trust(&[("deleter", &deleter)]).with_roles([(deleter.keyid().to_owned(), vec![Role::Deleter])]);
        let err = verify(&bytes, &store.for_role(Role::Drill)).unwrap_err();
        assert_eq!(err.kind(), "ROLE_NOT_GRANTED");
        let text = err.to_string();
        assert!(
            text.contains("deleter") && text.contains(deleter.keyid()) && text.contains("the drill role"),
            "{text}"
        );
        assert!(!text.contains("expected a keyid in the trust store"), "{text}");
        // Under the role it holds it verifies; a key outside the folder is still untrusted.
        assert!(verify(&bytes, &store.for_role(Role::Deleter)).is_ok());
        let other = sign_statement(&statement(), &key(5)).to_json_bytes();
        assert_eq!(
            verify(&other, &store.for_role(Role::Drill)).unwrap_err().kind(),
            "UNTRUSTED_KEY"
        );
    }

    #[test]
    fn trusted_keyid_with_signature_by_other_key_is_bad_signature() {
        let trusted = key(6);
        let attacker = key(7);
        let mut envelope = sign_statement(&statement(), &attacker);
        envelope.signatures[0].keyid = trusted.keyid().to_owned();
        let err = verify(&envelope.to_json_bytes(), &trust(&[("ops", &trusted)])).unwrap_err();
        assert_eq!(err.kind(), "BAD_SIGNATURE");
        assert!(err.to_string().contains("ops"), "{err}");
    }

    #[test]
    fn multiple_signatures() {
        let a = key(8);
        let b = key(9);
        let untrusted = key(10);
        let st = statement();
        let env_a = sign_statement(&st, &a);
        let env_b = sign_statement(&st, &b);
        let env_u = sign_statement(&st, &untrusted);
        let store = trust(&[("a", &a), ("b", &b)]);

        // Untrusted first, then a valid trusted one: accepted, and the trusted key is reported.
        let mut env = env_u.clone();
        env.signatures.push(env_b.signatures[0].clone());
        env.signatures.push(env_a.signatures[0].clone());
        let v = verify(&env.to_json_bytes(), &store).unwrap();
        assert_eq!(v.key_name(), "b");

        // A valid trusted signature plus an invalid trusted one: refused.
        let mut env = env_a.clone();
        let mut broken = env_b.signatures[0].clone();
        broken.sig = env_a.signatures[0].sig.clone();
        env.signatures.push(broken);
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "BAD_SIGNATURE");

        // Garbage from an untrusted key is ignored.
        let mut env = env_a;
        env.signatures.push(EnvelopeSignature {
            keyid: untrusted.keyid().to_owned(),
            sig: "!!".to_owned(),
        });
        assert!(verify(&env.to_json_bytes(), &store).is_ok());
    }

    #[test]
    fn envelope_level_failures() {
        let k = key(11);
        let store = trust(&[("k", &k)]);
        let good = sign_statement(&statement(), &k);

        assert_eq!(kind_of(b"", &store), "ENVELOPE_MALFORMED");
        assert_eq!(kind_of(b"[]", &store), "ENVELOPE_MALFORMED");
        assert_eq!(kind_of(b"{\"payloadType\":\"x\"}", &store), "ENVELOPE_MALFORMED");

        let mut v = serde_json::to_value(&good).unwrap();
        v["extra"] = json!(1);
        assert_eq!(kind_of(v.to_string().as_bytes(), &store), "ENVELOPE_MALFORMED");

        let dup = format!(
            "{{\"payloadType\":\"{PAYLOAD_TYPE}\",\"payload\":\"{}\",\"payload\":\"{}\",\"signatures\":[]}}",
            good.payload, good.payload
        );
        assert_eq!(kind_of(dup.as_bytes(), &store), "ENVELOPE_MALFORMED");

        let mut env = good.clone();
        env.payload.push('*');
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "PAYLOAD_NOT_BASE64");
        let mut env = good.clone();
        env.payload = STANDARD.encode(b"ab").trim_end_matches('=').to_owned();
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "PAYLOAD_NOT_BASE64");

        let mut env = good.clone();
        env.signatures.clear();
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "NO_SIGNATURE");

        let mut env = good.clone();
        env.signatures[0].sig = STANDARD.encode([0u8; 63]);
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "BAD_SIGNATURE");
        env.signatures[0].sig = "not base64".to_owned();
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "BAD_SIGNATURE");

        // Changing the payload type breaks the signature (it is inside the PAE) ...
        let mut env = good;
        env.payload_type = "application/json".to_owned();
        assert_eq!(kind_of(&env.to_json_bytes(), &store), "BAD_SIGNATURE");
        // ... and a validly signed other type is WRONG_PAYLOAD_TYPE, naming both.
        let bytes = sign("application/json", &statement().to_bytes(), &k).to_json_bytes();
        let err = verify(&bytes, &store).unwrap_err();
        assert_eq!(
            err,
            EvidenceFailure::WrongPayloadType {
                expected: PAYLOAD_TYPE.to_owned(),
                actual: "application/json".to_owned()
            }
        );
        assert!(err.to_string().contains(PAYLOAD_TYPE) && err.to_string().contains("application/json"));
    }

    #[test]
    fn statement_level_failures() {
        let k = key(12);
        let store = trust(&[("k", &k)]);
        let sha = "a".repeat(64);
        let good = json!({
            "_type": STATEMENT_TYPE,
            "subject": [{"name": "n", "digest": {"sha256": sha}}],
            "predicateType": "t",
            "predicate": {},
        });
        assert!(verify(&signed_json(&good, &k), &store).is_ok());

        let check = |mutate: &dyn Fn(&mut Value), expected_kind: &str| {
            let mut v = good.clone();
            mutate(&mut v);
            let err = verify(&signed_json(&v, &k), &store).unwrap_err();
            assert_eq!(err.kind(), expected_kind, "{v}: {err}");
            assert_eq!(verify_payload(signed_json(&v, &k), &store).unwrap_err(), err, "{v}");
            err
        };
        let err = check(
            &|v| v["_type"] = json!("https://in-toto.io/Statement/v0.1"),
            "WRONG_STATEMENT_TYPE",
        );
        assert!(err.to_string().contains("v0.1") && err.to_string().contains(STATEMENT_TYPE));
        check(
            &|v| drop(v.as_object_mut().unwrap().remove("_type")),
            "WRONG_STATEMENT_TYPE",
        );
        check(&|v| v["subject"] = json!([]), "STATEMENT_MALFORMED");
        check(&|v| v["subject"] = json!({}), "STATEMENT_MALFORMED");
        check(
            &|v| drop(v.as_object_mut().unwrap().remove("subject")),
            "STATEMENT_MALFORMED",
        );
        check(&|v| v["subject"][0] = json!("n"), "STATEMENT_MALFORMED");
        check(
            &|v| drop(v["subject"][0].as_object_mut().unwrap().remove("name")),
            "STATEMENT_MALFORMED",
        );
        check(&|v| v["subject"][0]["name"] = json!(1), "STATEMENT_MALFORMED");
        check(
            &|v| v["subject"][0]["digest"] = json!({"sha512": sha}),
            "STATEMENT_MALFORMED",
        );
        check(&|v| v["subject"][0]["digest"] = json!(sha), "STATEMENT_MALFORMED");
        check(
            &|v| v["subject"][0]["digest"]["sha256"] = json!("a".repeat(63)),
            "STATEMENT_MALFORMED",
        );
        check(
            &|v| v["subject"][0]["digest"]["sha256"] = json!("A".repeat(64)),
            "STATEMENT_MALFORMED",
        );
        check(
            &|v| v["subject"][0]["digest"]["sha256"] = json!("g".repeat(64)),
            "STATEMENT_MALFORMED",
        );
        check(&|v| v["subject"][0]["digest"]["md5"] = json!(5), "STATEMENT_MALFORMED");
        check(&|v| v["predicateType"] = json!(null), "STATEMENT_MALFORMED");
        check(
            &|v| drop(v.as_object_mut().unwrap().remove("predicate")),
            "STATEMENT_MALFORMED",
        );
        check(&|v| v["predicate"] = json!([]), "STATEMENT_MALFORMED");

        for payload in ["[]".to_owned(), "not json".to_owned(), format!("{good}{good}")] {
            let bytes = sign(PAYLOAD_TYPE, payload.as_bytes(), &k).to_json_bytes();
            assert_eq!(kind_of(&bytes, &store), "STATEMENT_MALFORMED", "{payload}");
        }
        // Duplicate keys are refused even though serde_json alone would keep the last one.
        let dup = good.to_string().replacen('{', "{\"predicate\":[],", 1);
        let bytes = sign(PAYLOAD_TYPE, dup.as_bytes(), &k).to_json_bytes();
        let err = verify(&bytes, &store).unwrap_err();
        assert_eq!(err.kind(), "STATEMENT_MALFORMED");
        assert!(err.to_string().contains("duplicate key"), "{err}");
        assert_eq!(verify_payload(&bytes, &store).unwrap_err(), err);
    }

    #[test]
    fn the_lean_verification_reads_the_same_statement_and_refuses_a_repeated_key_deep_in_the_predicate() {
        #[derive(Debug, Deserialize, PartialEq)]
        struct Entry {
            path: String,
            size: u64,
        }
        #[derive(Debug, Deserialize, PartialEq)]
        struct Pred {
            inventory: Vec<Entry>,
            root: String,
        }
        let k = key(14);
        let store = trust(&[("k", &k)]);
        let sha = "b".repeat(64);
        let good = json!({
            "_type": STATEMENT_TYPE,
            "subject": [{"name": "n", "digest": {"sha256": sha, "blake3": "c"}}],
            "predicateType": "t",
            "predicate": {"root": "r", "inventory": [{"path": "a", "size": 1, "extra": [1, {"x": null}]}, {"path": "b", "size": 2}]},
        });
        let bytes = signed_json(&good, &k);
        let full = verify(&bytes, &store).unwrap();
        let lean = verify_payload(bytes.clone(), &store).unwrap();
        assert_eq!(lean.payload_bytes(), full.payload_bytes());
        assert_eq!(lean.subjects(), full.subjects());
        assert_eq!(lean.predicate_type(), full.predicate_type());
        assert_eq!((lean.keyid(), lean.key_name()), (full.keyid(), full.key_name()));
        let typed: Pred = lean.parse_predicate().unwrap();
        assert_eq!(typed, serde_json::from_value::<Pred>(full.predicate().clone()).unwrap());
        assert_eq!(
            typed.inventory[1],
            Entry {
                path: "b".into(),
                size: 2
            }
        );
        // A predicate that is not the type asked for is a parse error, not a panic.
        assert!(lean.parse_predicate::<Vec<u8>>().is_err());
        // The full verification dereferences to the same verified payload.
        assert_eq!(*full, lean);

        // A key repeated inside an inventory entry (or deeper) would be read two ways by two parsers: refused.
        for needle in ["\"size\":2", "\"x\":null"] {
            let text = good.to_string();
            let doubled = text.replacen(needle, &format!("{needle},{needle}"), 1);
            assert_ne!(doubled, text);
            let bytes = sign(PAYLOAD_TYPE, doubled.as_bytes(), &k).to_json_bytes();
            let err = verify_payload(&bytes, &store).unwrap_err();
            assert_eq!(err.kind(), "STATEMENT_MALFORMED");
            assert!(err.to_string().contains("duplicate key"), "{err}");
            assert_eq!(verify(&bytes, &store).unwrap_err(), err);
        }
    }

    #[test]
    fn validate_matches_verify() {
        let mut st = statement();
        st.validate().unwrap();
        st.subject[0].digest.insert("sha256".to_owned(), "nothex".to_owned());
        assert_eq!(st.validate().unwrap_err().kind(), "STATEMENT_MALFORMED");
        let mut st = statement();
        st.subject.clear();
        assert!(st.validate().is_err());
        let mut st = statement();
        st.predicate = json!("string");
        assert!(st.validate().is_err());
    }

    #[test]
    fn failure_json_kind_matches_kind() {
        let failures = [
            EvidenceFailure::EnvelopeMalformed { reason: "r".into() },
            EvidenceFailure::PayloadNotBase64 { reason: "r".into() },
            EvidenceFailure::NoSignature,
            EvidenceFailure::UntrustedKey {
                keyids: vec!["k".into()],
            },
            EvidenceFailure::BadSignature {
                keyid: "k".into(),
                key_name: "n".into(),
                reason: "r".into(),
            },
            EvidenceFailure::WrongPayloadType {
                expected: "e".into(),
                actual: "a".into(),
            },
            EvidenceFailure::StatementMalformed { reason: "r".into() },
            EvidenceFailure::WrongStatementType {
                expected: "e".into(),
                actual: "a".into(),
            },
        ];
        for f in failures {
            let v = serde_json::to_value(&f).unwrap();
            assert_eq!(v["kind"], f.kind());
            assert!(!f.to_string().is_empty());
        }
    }

    #[test]
    fn sha256_hex_known_answer() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
