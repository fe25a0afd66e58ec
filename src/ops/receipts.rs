//! Purge receipts, chained and signed per batch (#23 point 4).
//!
//! The registry's receipt rows are what the deleter decides from, but a row can be edited by anyone who can
//! write the database. So every receipt is also sealed into a signed file beside the purge's other evidence:
//! after each registry batch of a purge commits, the receipts it recorded are written as one DSSE envelope
//! `<receipts>/<candidate>/batch-<seq>.dsse.json` (predicate type [`RECEIPTS_PREDICATE_TYPE`], `kind: batch`),
//! whose predicate names the previous batch's SHA-256. The signed purge summary carries the chain's head (the
//! newest batch's SHA-256) and its length, so `audit verify` of a summary checks, from the files alone, every
//! signature, every link and the head; with the registry it also compares every receipt row with its sealed
//! copy, so an edited, removed or added row is a finding.
//!
//! Crash safety: a run that dies after its registry commit and before the batch file is written leaves rows
//! that no batch holds; the next run (or `reconcile`, or `undelete`) seals them first, in one batch, when it
//! opens the chain ([`Chain::open`]). A batch is never rewritten (write-once, under the purge's evidence lock
//! when the policy asks for one).
//!
//! What it does NOT do: decide anything about deleting. It only writes and reads evidence.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::evidence::keys::{SigningKey, TrustStore};
use crate::evidence::predicate::RECEIPTS_PREDICATE_TYPE;
use crate::evidence::{self, Statement, Subject};
use crate::govern::policy::EvidenceRetention;
use crate::io::store::Storage;
use crate::model::location;
use crate::registry::{ReceiptRow, Registry};

/// The file-name prefix of a batch (`batch-000001.dsse.json`).
pub const BATCH_PREFIX: &str = "batch-";

/// One receipt as a batch seals it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SealedReceipt {
    /// Object path.
    pub path: String,
    /// Attempt number (the registry row's key with the path).
    pub attempt: i64,
    /// The receipt as the registry holds it.
    pub receipt: serde_json::Value,
}

impl From<&ReceiptRow> for SealedReceipt {
    fn from(r: &ReceiptRow) -> Self {
        Self {
            path: r.path.clone(),
            attempt: r.attempt,
            receipt: r.receipt.clone(),
        }
    }
}

/// The name of batch `seq`.
#[must_use]
pub fn batch_name(seq: u64) -> String {
    format!("{BATCH_PREFIX}{seq:06}.dsse.json")
}

/// A candidate's receipts chain as the deleter extends it.
#[derive(Debug, Clone)]
pub struct Chain {
    dir: String,
    candidate_id: String,
    seq: u64,
    head: Option<String>,
    receipts: u64,
}

impl Chain {
    /// Opens the chain in `dir` (the candidate's receipts folder): reads every batch (order and links checked),
    /// then seals, as one new batch, every registry receipt of the candidate that no batch holds yet.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the batch file when the chain in `dir` is broken (a batch missing, unreadable
    /// or not linked to the one before: the deleter does not extend evidence it cannot account for); registry
    /// and storage errors.
    pub async fn open(
        storage: &Storage,
        reg: &Registry,
        candidate_id: &str,
        dir: &str,
        key: &SigningKey,
        retention: Option<EvidenceRetention>,
        now: DateTime<Utc>,
    ) -> Result<Self> {
        // Only which receipts are sealed is needed here, not what they say (a million-object purge seals two
        // million receipts, #24).
        let read = read_with(storage, dir, None, false).await?;
        if let Some(p) = read.problems.first() {
            return Err(Error::invalid(&p.0, &p.1));
        }
        let mut chain = Self {
            dir: dir.to_owned(),
            candidate_id: candidate_id.to_owned(),
            seq: read.batches.len() as u64,
            head: read.batches.last().map(|b| b.sha256.clone()),
            receipts: read.receipts.len() as u64,
        };
        // Receipts are write-once and every sealed one is in the registry (else `audit verify` names it), so
        // equal counts mean nothing is outstanding; otherwise the registry's receipts are streamed past the
        // sealed ones (after an interrupted run: the batch it recorded but did not seal).
        let mut outstanding: Vec<SealedReceipt> = Vec::new();
        if reg.receipt_count(candidate_id).await? != read.receipts.len() as u64 {
            let sealed: BTreeSet<(&str, i64)> = read.receipts.keys().map(|(p, a)| (p.as_str(), *a)).collect();
            reg.for_each_receipt(candidate_id, |r| {
                if !sealed.contains(&(r.path.as_str(), r.attempt)) {
                    outstanding.push(SealedReceipt::from(&r));
                }
            })
            .await?;
        }
        chain.seal(storage, key, outstanding, retention, now).await?;
        Ok(chain)
    }

    /// Seals `receipts` as the next batch (nothing when empty).
    ///
    /// # Errors
    /// Storage errors writing the batch (an existing file of that name among them).
    pub async fn seal(
        &mut self,
        storage: &Storage,
        key: &SigningKey,
        receipts: Vec<SealedReceipt>,
        retention: Option<EvidenceRetention>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if receipts.is_empty() {
            return Ok(());
        }
        let seq = self.seq + 1;
        let body = serde_json::to_vec(&receipts).map_err(|e| Error::Internal(format!("receipts batch: {e}")))?;
        let st = Statement {
            subject: vec![Subject::sha256(
                format!("lakedrill-receipts:{}:{seq}", self.candidate_id),
                evidence::sha256_hex(&body),
            )],
            predicate_type: RECEIPTS_PREDICATE_TYPE.into(),
            predicate: serde_json::json!({
                "kind": "batch",
                "candidate_id": self.candidate_id,
                "seq": seq,
                "previous": self.head,
                "count": receipts.len(),
                "receipts": receipts,
                "at": now.to_rfc3339(),
                "evidence_retention": retention.map(crate::ops::evidence_lock::claim),
            }),
        };
        let bytes = evidence::sign_statement(&st, key).to_json_bytes();
        let uri = location::join(&self.dir, &batch_name(seq));
        crate::ops::evidence_lock::put(storage, &uri, Bytes::from(bytes.clone()), retention, now).await?;
        self.seq = seq;
        self.head = Some(evidence::sha256_hex(&bytes));
        self.receipts += receipts.len() as u64;
        Ok(())
    }

    /// The newest batch's SHA-256 (`None` before the first batch).
    #[must_use]
    pub fn head(&self) -> Option<&str> {
        self.head.as_deref()
    }

    /// How many batches the chain holds.
    #[must_use]
    pub fn batches(&self) -> u64 {
        self.seq
    }

    /// How many receipts its batches hold.
    #[must_use]
    pub fn receipts(&self) -> u64 {
        self.receipts
    }
}

/// One batch file as read.
#[derive(Debug, Clone)]
pub struct BatchFile {
    /// Its URI.
    pub uri: String,
    /// Its sequence number.
    pub seq: u64,
    /// SHA-256 of its bytes.
    pub sha256: String,
    /// How many receipts it seals (0 when it could not be read).
    pub receipts: usize,
}

/// A receipts folder's chain as read: its batches in order, every sealed receipt by (path, attempt), and
/// every problem found as (file, what is wrong).
#[derive(Debug, Clone, Default)]
pub struct ChainRead {
    /// The batches, by sequence number.
    pub batches: Vec<BatchFile>,
    /// Every sealed receipt by (path, attempt), with the BLAKE3 of its body as JSON ([`receipt_digest`]; zero
    /// when the deleter reads its own chain). Not the bodies: two million of them as JSON values took 7 GB (#24).
    pub receipts: BTreeMap<(String, i64), [u8; 32]>,
    /// Problems: a gap in the sequence, a broken link, an unreadable or (with a trust store) unverified batch,
    /// a receipt sealed twice.
    pub problems: Vec<(String, String)>,
}

/// Reads the batches in `dir`. With `trust`, each batch's signature is checked too (audit); without, only
/// their structure and links (the deleter extending its own chain).
///
/// # Errors
/// Storage errors listing or reading the folder; [`crate::Error::Corrupt`] naming a batch over `max_metadata_bytes`
/// (`[storage]`), which is not read whole.
pub async fn read(storage: &Storage, dir: &str, trust: Option<&TrustStore>) -> Result<ChainRead> {
    read_with(storage, dir, trust, true).await
}

/// [`read`]; without `keep`, no receipt's digest is computed (its key stays, with zeros).
async fn read_with(storage: &Storage, dir: &str, trust: Option<&TrustStore>, keep: bool) -> Result<ChainRead> {
    let mut files: Vec<(u64, String)> = Vec::new();
    let mut out = ChainRead::default();
    for o in storage.list(dir).await? {
        let name = location::file_name(&o.uri);
        let Some(n) = name
            .strip_prefix(BATCH_PREFIX)
            .and_then(|s| s.strip_suffix(".dsse.json"))
        else {
            continue;
        };
        match n.parse::<u64>() {
            Ok(seq) => files.push((seq, o.uri.clone())),
            Err(_) => out
                .problems
                .push((o.uri.clone(), "is not named batch-<sequence number>.dsse.json".into())),
        }
    }
    files.sort();
    let mut previous: Option<String> = None;
    for (i, (seq, uri)) in files.into_iter().enumerate() {
        // Within `max_metadata_bytes` (a batch's receipts are a few hundred bytes an object): a file of any size
        // can be written under a batch's name.
        let max = storage.options().max_metadata_bytes;
        let bytes = storage.get_bounded(&uri, max, "a receipts batch").await?.bytes;
        let sha = evidence::sha256_hex(&bytes);
        let mut problem = |what: String| out.problems.push((uri.clone(), what));
        if seq != i as u64 + 1 {
            problem(format!("is batch {seq} but batch {} is missing before it", i + 1));
        }
        let predicate = match trust {
            // Receipts are the deleter's to sign ([`crate::evidence::keys::Role::Deleter`]).
            Some(t) => match evidence::verify(&bytes, &t.for_role(crate::evidence::keys::Role::Deleter)) {
                Ok(v) => Some(v.predicate().clone()),
                Err(e) => {
                    problem(format!("does not verify: {e}"));
                    None
                }
            },
            None => evidence::peek_unverified(&bytes).map(|s| s["predicate"].clone()),
        };
        let Some(p) = predicate else {
            if trust.is_none() {
                problem("is not a readable signed receipts batch".into());
            }
            previous = Some(sha.clone());
            out.batches.push(BatchFile {
                uri,
                seq,
                sha256: sha,
                receipts: 0,
            });
            continue;
        };
        if p["kind"] != "batch" || p["seq"].as_u64() != Some(seq) {
            problem(format!(
                "says kind {} seq {}, not a receipts batch numbered {seq}",
                p["kind"], p["seq"]
            ));
        }
        if p["previous"].as_str() != previous.as_deref() {
            problem(format!(
                "links to the previous batch {} but the batch before it has SHA-256 {}",
                p["previous"],
                previous.as_deref().unwrap_or("none")
            ));
        }
        let mut count = 0;
        match serde_json::from_value::<Vec<SealedReceipt>>(p["receipts"].clone()) {
            Ok(rs) => {
                count = rs.len();
                if p["count"].as_u64() != Some(rs.len() as u64) {
                    problem(format!("says count {} but holds {} receipts", p["count"], rs.len()));
                }
                for r in rs {
                    let body = if keep { receipt_digest(&r.receipt) } else { [0; 32] };
                    if out.receipts.insert((r.path.clone(), r.attempt), body).is_some() {
                        problem(format!("seals receipt {} attempt {} a second time", r.path, r.attempt));
                    }
                }
            }
            Err(e) => problem(format!("its receipts do not parse: {e}")),
        }
        previous = Some(sha.clone());
        out.batches.push(BatchFile {
            uri,
            seq,
            sha256: sha,
            receipts: count,
        });
    }
    Ok(out)
}

/// Checks a signed purge summary's receipts chain from the files alone: every batch in the summary's folder
/// verifies under `trust` and links to the one before, and the summary's `receipts_head` is the SHA-256 of its
/// `receipt_batches`-th batch, which together seal its `receipts` receipts. Returns the chain as read and the
/// problems as (file, what is wrong); `None` for a summary written before receipts were chained (no
/// `receipts_head`), which has nothing to check.
///
/// # Errors
/// Storage errors listing or reading the folder; [`crate::Error::Corrupt`] naming a batch over `max_metadata_bytes`.
pub async fn check_summary(
    storage: &Storage,
    summary_uri: &str,
    summary: &serde_json::Value,
    trust: &TrustStore,
) -> Result<Option<ChainRead>> {
    if summary.get("receipts_head").is_none() {
        return Ok(None);
    }
    let dir = location::parent(summary_uri).unwrap_or_default();
    let mut read = read(storage, &dir, Some(trust)).await?;
    let name = location::file_name(summary_uri).to_owned();
    let n = usize::try_from(summary["receipt_batches"].as_u64().unwrap_or(0)).unwrap_or(usize::MAX);
    let head = summary["receipts_head"].as_str();
    let at = n.checked_sub(1).and_then(|i| read.batches.get(i));
    if at.map(|b| b.sha256.as_str()) != head {
        read.problems.push((
            name.clone(),
            format!(
                "names receipts chain head {} after {n} batch(es), but {dir} holds {} batch(es){}: a batch was \
                 removed or replaced",
                head.unwrap_or("none"),
                read.batches.len(),
                at.map(|b| format!(" and batch {n} has SHA-256 {}", b.sha256))
                    .unwrap_or_default()
            ),
        ));
    }
    let sealed: usize = read.batches.iter().take(n).map(|b| b.receipts).sum();
    let claimed = summary["receipts"].as_u64();
    if at.is_some() && claimed != Some(sealed as u64) {
        read.problems.push((
            name,
            format!(
                "counts {} receipt(s), but its {n} batch(es) seal {sealed}",
                claimed.map_or_else(|| "no".to_owned(), |c| c.to_string())
            ),
        ));
    }
    Ok(Some(read))
}

/// The digest a sealed receipt is compared by: BLAKE3 of its body as compact JSON (keys sorted).
#[must_use]
pub fn receipt_digest(body: &serde_json::Value) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    // Writing a JSON value into a hasher cannot fail.
    let _ = serde_json::to_writer(&mut h, body);
    *h.finalize().as_bytes()
}

/// Compares the registry's receipt rows of a candidate with the sealed receipts, one row at a time as they are
/// read (#24: not every row held): every row must be sealed, as it is, and every sealed receipt must still be a
/// row. Each matched sealed receipt is taken out of `sealed`; what is left is named by [`Compare::finish`].
pub struct Compare {
    sealed: BTreeMap<(String, i64), [u8; 32]>,
    out: Vec<String>,
}

impl Compare {
    /// A comparison against the sealed receipts of a chain ([`ChainRead::receipts`]).
    #[must_use]
    pub fn new(sealed: BTreeMap<(String, i64), [u8; 32]>) -> Self {
        Self {
            sealed,
            out: Vec::new(),
        }
    }

    /// One registry row.
    pub fn row(&mut self, r: &ReceiptRow) {
        match self.sealed.remove(&(r.path.clone(), r.attempt)) {
            Some(d) if d == receipt_digest(&r.receipt) => {}
            Some(_) => self.out.push(format!(
                "registry receipt {} attempt {} differs from its signed copy: registry {}",
                r.path, r.attempt, r.receipt
            )),
            None => self.out.push(format!(
                "registry receipt {} attempt {} is in no signed batch: {}",
                r.path, r.attempt, r.receipt
            )),
        }
    }

    /// What differs, naming path and attempt: the rows that differ or are unsealed, then every sealed receipt no
    /// row matched.
    #[must_use]
    pub fn finish(mut self) -> Vec<String> {
        for (path, attempt) in self.sealed.into_keys() {
            self.out.push(format!(
                "signed receipt {path} attempt {attempt} is missing from the registry (row removed)"
            ));
        }
        self.out
    }
}

/// [`Compare`] over rows at hand.
#[must_use]
pub fn compare(rows: &[ReceiptRow], sealed: &BTreeMap<(String, i64), [u8; 32]>) -> Vec<String> {
    let mut c = Compare::new(sealed.clone());
    for r in rows {
        c.row(r);
    }
    c.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn row(path: &str, attempt: i64, phase: &str) -> ReceiptRow {
        ReceiptRow {
            candidate_id: "c".into(),
            path: path.into(),
            attempt,
            receipt: serde_json::json!({"phase": phase}),
            created_at: DateTime::from_timestamp(0, 0).unwrap(),
        }
    }

    #[test]
    fn compare_finds_an_edited_an_unsealed_and_a_removed_row() {
        let rows = [
            row("a", 1, "requested"),
            row("a", 2, "confirmed"),
            row("b", 1, "requested"),
        ];
        let mut sealed: BTreeMap<(String, i64), [u8; 32]> = rows
            .iter()
            .map(|r| ((r.path.clone(), r.attempt), receipt_digest(&r.receipt)))
            .collect();
        assert!(compare(&rows, &sealed).is_empty());
        // Edited in the registry.
        let mut edited = rows.clone();
        edited[1].receipt = serde_json::json!({"phase": "confirmed", "result": "deleted"});
        let d = compare(&edited, &sealed);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("a attempt 2 differs"), "{d:?}");
        // A row no batch holds.
        let mut more = rows.to_vec();
        more.push(row("c", 1, "requested"));
        let d = compare(&more, &sealed);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("c attempt 1 is in no signed batch"), "{d:?}");
        // A row removed from the registry.
        sealed.insert(
            ("z".into(), 1),
            receipt_digest(&serde_json::json!({"phase": "requested"})),
        );
        let d = compare(&rows, &sealed);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("z attempt 1 is missing from the registry"), "{d:?}");
    }

    #[test]
    fn batch_names_sort_by_sequence() {
        assert_eq!(batch_name(1), "batch-000001.dsse.json");
        assert!(batch_name(9) < batch_name(10));
    }
}
