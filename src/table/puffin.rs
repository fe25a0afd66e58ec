//! Deletion vectors (Iceberg v3): the Puffin file that holds them and each blob, checked against the
//! manifest entries that name it.
//!
//! A v3 position delete may be a *deletion vector*: a blob of type `deletion-vector-v1` inside a Puffin
//! file, named by a manifest entry with `file_format` PUFFIN, `referenced_data_file`, `content_offset`,
//! `content_size_in_bytes` and `record_count` (the number of deleted positions). One Puffin file usually
//! holds the vectors of many data files, so several entries name one object.
//!
//! What is checked, for each entry (see: <https://iceberg.apache.org/puffin-spec/> and the table spec,
//! "Deletion Vectors"):
//! - the file starts with the magic `PFA1` and ends with a readable footer (magic, JSON `FooterPayload`,
//!   payload size, flags, magic); a footer with the LZ4 flag set is reported as unsupported, not guessed at;
//! - one footer blob has exactly the entry's offset and length, type `deletion-vector-v1`, no compression,
//!   and its `referenced-data-file` property equals the entry's `referenced_data_file`;
//! - the blob is `length (4 bytes BE) | magic D1 D3 39 64 | portable 64-bit roaring bitmap | CRC-32 (BE)`,
//!   the length covers magic and bitmap, the CRC-32 (ISO-HDLC) over magic and bitmap matches, the bitmap
//!   deserializes with nothing left over, and its cardinality equals the entry's `record_count` (and the
//!   footer's `cardinality` property, when present).
//!
//! Everything above is pure ([`parse_footer`], [`check_entry`], [`check_blob`]); [`verify_file`] only
//! fetches the byte ranges and hands them over. This module does not apply deletes, does not check that
//! the positions lie within the referenced data file, and does not read Puffin files other than deletion
//! vector files (statistics files are not content files).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::Result;
use crate::io::store::Storage;
use crate::model::findings::{Finding, FindingKind};

/// The magic at the start of a Puffin file and at both ends of its footer.
pub const PUFFIN_MAGIC: [u8; 4] = *b"PFA1";
/// The magic that opens a deletion vector's serialized bitmap.
pub const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// The blob type of a deletion vector.
pub const DV_BLOB_TYPE: &str = "deletion-vector-v1";
/// Footer flag bit 0 of byte 0: the payload is LZ4-compressed.
const FLAG_COMPRESSED: u8 = 1;
/// payload size (4) + flags (4) + magic (4).
const FOOTER_TAIL: u64 = 12;
/// The most footer bytes read: a footer is JSON metadata of the blobs, a few hundred bytes per blob.
const MAX_FOOTER: u64 = 64 << 20;

/// One blob as the footer describes it (the fields lakedrill checks; others are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BlobMetadata {
    /// The blob type (`deletion-vector-v1`).
    #[serde(rename = "type")]
    pub blob_type: String,
    /// Offset of the blob in the file.
    pub offset: i64,
    /// Length of the blob.
    pub length: i64,
    /// Compression codec; deletion vectors are never compressed.
    #[serde(rename = "compression-codec", default)]
    pub compression_codec: Option<String>,
    /// Blob properties (`referenced-data-file`, `cardinality`).
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
}

/// A Puffin footer's payload.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FooterPayload {
    /// The blobs of the file.
    pub blobs: Vec<BlobMetadata>,
}

/// One deletion vector entry of a manifest, as far as its check needs it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeletionVectorEntry {
    /// `referenced_data_file` as written.
    pub referenced_data_file: Option<String>,
    /// `content_offset`.
    pub content_offset: Option<i64>,
    /// `content_size_in_bytes`.
    pub content_size_in_bytes: Option<i64>,
    /// `record_count`: the positions the vector deletes.
    pub record_count: u64,
}

/// A check a deletion vector failed: which, and what was expected and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DvProblem {
    /// The blob's offset in the file, when known.
    pub offset: Option<i64>,
    /// The check (`footer`, `footer blob`, `blob type`, `compression`, `referenced-data-file`, `length`,
    /// `magic`, `crc`, `bitmap`, `cardinality`, `footer cardinality`, `manifest fields`, `blob range`).
    pub check: &'static str,
    /// What was expected.
    pub expected: String,
    /// What was found.
    pub actual: String,
}

impl DvProblem {
    fn new(offset: Option<i64>, check: &'static str, expected: impl Into<String>, actual: impl Into<String>) -> Self {
        Self {
            offset,
            check,
            expected: expected.into(),
            actual: actual.into(),
        }
    }

    /// The finding for the Puffin file `path` (as written): it names the file, the blob and the check.
    #[must_use]
    pub fn finding(&self, path: &str) -> Finding {
        let blob = self
            .offset
            .map_or_else(|| "the file".to_owned(), |o| format!("blob at offset {o}"));
        Finding::new(
            FindingKind::DeletionVectorInvalid,
            path,
            Some(format!("{blob}, check {}: {}", self.check, self.expected)),
            Some(self.actual.clone()),
        )
    }
}

/// The payload size and flags in a Puffin file's last 12 bytes, and where the footer starts.
///
/// # Errors
/// A [`DvProblem`] (check `footer`) when the tail is not a Puffin footer tail.
pub fn footer_start(tail: &[u8], file_size: u64) -> std::result::Result<u64, DvProblem> {
    let bad = |actual: String| DvProblem::new(None, "footer", "a Puffin footer (PFA1 at both ends)", actual);
    let Ok(tail) = <[u8; 12]>::try_from(tail) else {
        return Err(bad(format!("{} tail bytes", tail.len())));
    };
    if tail[8..12] != PUFFIN_MAGIC {
        return Err(bad(format!("trailing bytes {}", hex::encode(&tail[8..12]))));
    }
    if tail[4] & FLAG_COMPRESSED != 0 {
        return Err(DvProblem::new(
            None,
            "footer",
            "an uncompressed footer payload",
            "unsupported: the footer payload is LZ4-compressed",
        ));
    }
    let payload = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    let footer = payload + FOOTER_TAIL + PUFFIN_MAGIC.len() as u64;
    // The file's own magic comes before the footer.
    if footer + PUFFIN_MAGIC.len() as u64 > file_size || payload > MAX_FOOTER {
        return Err(bad(format!("payload size {payload} in a file of {file_size} bytes")));
    }
    Ok(file_size - footer)
}

/// Parses a Puffin file's footer (pure): `head` is the file's first 4 bytes, `footer` the bytes from
/// [`footer_start`] to the end of the file.
///
/// # Errors
/// A [`DvProblem`] (check `footer`) naming what is wrong.
pub fn parse_footer(head: &[u8], footer: &[u8]) -> std::result::Result<FooterPayload, DvProblem> {
    let bad = |actual: String| DvProblem::new(None, "footer", "a Puffin file (PFA1 | blobs | footer)", actual);
    if head != PUFFIN_MAGIC {
        return Err(bad(format!("the file starts with {}", hex::encode(head))));
    }
    let n = footer.len();
    if n < PUFFIN_MAGIC.len() + FOOTER_TAIL as usize || footer[..4] != PUFFIN_MAGIC {
        return Err(bad("the footer does not start with PFA1".into()));
    }
    let payload = &footer[4..n - FOOTER_TAIL as usize];
    serde_json::from_slice(payload).map_err(|e| bad(format!("the footer payload is not a FooterPayload: {e}")))
}

/// Checks a deletion vector blob's own layout (pure) and returns its cardinality.
///
/// # Errors
/// The first [`DvProblem`] found (`length`, `magic`, `crc`, `bitmap`), with `offset` for the finding.
pub fn check_blob(blob: &[u8], offset: i64) -> std::result::Result<u64, DvProblem> {
    let at = Some(offset);
    if blob.len() < 12 {
        return Err(DvProblem::new(
            at,
            "length",
            "at least 12 bytes (length, magic, CRC)",
            format!("{} bytes", blob.len()),
        ));
    }
    let declared = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]);
    let body = &blob[4..blob.len() - 4];
    if u64::from(declared) != body.len() as u64 {
        return Err(DvProblem::new(
            at,
            "length",
            format!("{} (magic and bitmap in a blob of {})", body.len(), blob.len()),
            declared.to_string(),
        ));
    }
    if body[..4] != DV_MAGIC {
        return Err(DvProblem::new(
            at,
            "magic",
            hex::encode(DV_MAGIC),
            hex::encode(&body[..4]),
        ));
    }
    let n = blob.len();
    let stored = u32::from_be_bytes([blob[n - 4], blob[n - 3], blob[n - 2], blob[n - 1]]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(DvProblem::new(
            at,
            "crc",
            format!("CRC-32 {computed:08x} over magic and bitmap"),
            format!("{stored:08x}"),
        ));
    }
    let mut bitmap = &body[4..];
    let map = roaring::RoaringTreemap::deserialize_from(&mut bitmap)
        .map_err(|e| DvProblem::new(at, "bitmap", "a portable 64-bit roaring bitmap", e.to_string()))?;
    if !bitmap.is_empty() {
        return Err(DvProblem::new(
            at,
            "bitmap",
            "a portable 64-bit roaring bitmap filling the blob",
            format!("{} bytes after the bitmap", bitmap.len()),
        ));
    }
    Ok(map.len())
}

/// Where an entry's blob lies in the file, or why it cannot be read: the entry lacks its v3 fields, or
/// the range leaves the blob area (pure).
///
/// # Errors
/// A [`DvProblem`] (`manifest fields` or `blob range`).
pub fn blob_range(
    entry: &DeletionVectorEntry,
    footer_start: u64,
) -> std::result::Result<std::ops::Range<u64>, DvProblem> {
    let (Some(offset), Some(size), Some(_)) = (
        entry.content_offset,
        entry.content_size_in_bytes,
        entry.referenced_data_file.as_ref(),
    ) else {
        return Err(DvProblem::new(
            entry.content_offset,
            "manifest fields",
            "referenced_data_file, content_offset and content_size_in_bytes",
            format!(
                "referenced_data_file {:?}, content_offset {:?}, content_size_in_bytes {:?}",
                entry.referenced_data_file, entry.content_offset, entry.content_size_in_bytes
            ),
        ));
    };
    let (Ok(start), Ok(len)) = (u64::try_from(offset), u64::try_from(size)) else {
        return Err(DvProblem::new(
            Some(offset),
            "blob range",
            "a non-negative offset and size",
            format!("offset {offset}, size {size}"),
        ));
    };
    match start.checked_add(len) {
        Some(end) if start >= PUFFIN_MAGIC.len() as u64 && end <= footer_start => Ok(start..end),
        _ => Err(DvProblem::new(
            Some(offset),
            "blob range",
            format!("a range between the file magic and the footer at {footer_start}"),
            format!("offset {offset}, size {size}"),
        )),
    }
}

/// Checks one deletion vector entry against the footer and its blob's bytes (pure). Every failed check
/// is returned; an empty list means the vector is sound.
#[must_use]
pub fn check_entry(footer: &FooterPayload, entry: &DeletionVectorEntry, blob: &[u8]) -> Vec<DvProblem> {
    let (Some(offset), Some(size)) = (entry.content_offset, entry.content_size_in_bytes) else {
        return vec![DvProblem::new(
            None,
            "manifest fields",
            "content_offset and content_size_in_bytes",
            "absent",
        )];
    };
    let at = Some(offset);
    let mut problems = Vec::new();
    let described = footer.blobs.iter().find(|b| b.offset == offset && b.length == size);
    match described {
        None => problems.push(DvProblem::new(
            at,
            "footer blob",
            format!("a footer blob at offset {offset} of length {size}"),
            format!(
                "footer blobs at {:?}",
                footer.blobs.iter().map(|b| (b.offset, b.length)).collect::<Vec<_>>()
            ),
        )),
        Some(b) => {
            if b.blob_type != DV_BLOB_TYPE {
                problems.push(DvProblem::new(at, "blob type", DV_BLOB_TYPE, b.blob_type.clone()));
            }
            if let Some(codec) = b.compression_codec.as_deref().filter(|c| !c.is_empty()) {
                problems.push(DvProblem::new(at, "compression", "none", codec));
            }
            let referenced = b.properties.get("referenced-data-file");
            if referenced != entry.referenced_data_file.as_ref() {
                problems.push(DvProblem::new(
                    at,
                    "referenced-data-file",
                    format!("{:?} (the manifest's referenced_data_file)", entry.referenced_data_file),
                    format!("{referenced:?}"),
                ));
            }
        }
    }
    if blob.len() as u64 != u64::try_from(size).unwrap_or(u64::MAX) {
        problems.push(DvProblem::new(
            at,
            "length",
            format!("{size} bytes"),
            format!("{} bytes read", blob.len()),
        ));
        return problems;
    }
    match check_blob(blob, offset) {
        Err(p) => problems.push(p),
        Ok(cardinality) => {
            if cardinality != entry.record_count {
                problems.push(DvProblem::new(
                    at,
                    "cardinality",
                    format!("{} (the manifest's record_count)", entry.record_count),
                    cardinality.to_string(),
                ));
            }
            if let Some(c) = described.and_then(|b| b.properties.get("cardinality"))
                && c.parse::<u64>().ok() != Some(cardinality)
            {
                problems.push(DvProblem::new(
                    at,
                    "footer cardinality",
                    format!("{cardinality} (the bitmap's)"),
                    c.clone(),
                ));
            }
        }
    }
    problems
}

/// Whether the bytes are a Puffin file (they start with its magic): a deletion vector file, not Parquet.
#[must_use]
pub fn is_puffin(bytes: &[u8]) -> bool {
    bytes.starts_with(&PUFFIN_MAGIC)
}

/// A Puffin file (`path` as written) with the `referenced-data-file` property of every blob passed through
/// `map`, for a table moved to a new location (pure). The blobs stay byte for byte at their offsets, so the
/// manifests' `content_offset` / `content_size_in_bytes` stay true; only the footer (written uncompressed, its
/// other fields and properties kept) and so the file's size change. Returns the new bytes and how many blob
/// properties were rebased.
///
/// # Errors
/// [`crate::Error::Corrupt`] naming the file when it is not a readable Puffin file (bad magic, a compressed or
/// unparseable footer); `map`'s errors.
pub fn rebase_referenced_files(
    path: &str,
    bytes: &[u8],
    map: &dyn Fn(&str) -> Result<String>,
) -> Result<(Vec<u8>, usize)> {
    let bad = |p: DvProblem| {
        crate::Error::corrupt(
            path,
            format!("check {}: {} expected, {}", p.check, p.expected, p.actual),
        )
    };
    let size = bytes.len() as u64;
    if size < PUFFIN_MAGIC.len() as u64 * 2 + FOOTER_TAIL {
        return Err(bad(DvProblem::new(
            None,
            "footer",
            "a Puffin file",
            format!("{size} bytes"),
        )));
    }
    let tail = &bytes[bytes.len() - FOOTER_TAIL as usize..];
    let start = usize::try_from(footer_start(tail, size).map_err(bad)?)
        .map_err(|_| crate::Error::corrupt(path, "footer offset beyond memory"))?;
    let footer = &bytes[start..];
    // Checked like a reader would, then rewritten from the generic JSON so that nothing unknown is lost.
    parse_footer(&bytes[..PUFFIN_MAGIC.len()], footer).map_err(bad)?;
    let payload = &footer[PUFFIN_MAGIC.len()..footer.len() - FOOTER_TAIL as usize];
    let mut doc: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| crate::Error::corrupt(path, format!("footer payload: {e}")))?;
    let mut rebased = 0;
    for blob in doc
        .get_mut("blobs")
        .and_then(serde_json::Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(props) = blob.get_mut("properties").and_then(serde_json::Value::as_object_mut) else {
            continue;
        };
        if let Some(r) = props.get("referenced-data-file").and_then(serde_json::Value::as_str) {
            let r = map(r)?;
            props.insert("referenced-data-file".to_owned(), serde_json::Value::String(r));
            rebased += 1;
        }
    }
    let payload = serde_json::to_vec(&doc).map_err(|e| crate::Error::Internal(format!("footer of {path}: {e}")))?;
    let len = u32::try_from(payload.len()).map_err(|_| crate::Error::corrupt(path, "footer payload over 4 GiB"))?;
    let mut out = Vec::with_capacity(start + payload.len() + 16);
    out.extend_from_slice(&bytes[..start]);
    out.extend_from_slice(&PUFFIN_MAGIC);
    out.extend_from_slice(&payload);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&tail[4..8]); // the flags (not compressed: footer_start refused that)
    out.extend_from_slice(&PUFFIN_MAGIC);
    Ok((out, rebased))
}

/// Reads the footer of the Puffin file at `uri` (`size` bytes, `path` as written) and checks each of
/// `entries` against it and its blob: the findings, one per failed check. Only the footer and the blobs'
/// byte ranges are read.
///
/// # Errors
/// Storage errors (`NotFound`, unreachable store): the caller decides what an unreadable object means.
pub async fn verify_file(
    storage: &Storage,
    uri: &str,
    path: &str,
    size: u64,
    entries: &[DeletionVectorEntry],
) -> Result<Vec<Finding>> {
    let findings = |p: DvProblem| Ok(vec![p.finding(path)]);
    if size < PUFFIN_MAGIC.len() as u64 * 2 + FOOTER_TAIL {
        return findings(DvProblem::new(None, "footer", "a Puffin file", format!("{size} bytes")));
    }
    let tail = storage.get_range(uri, size - FOOTER_TAIL..size).await?;
    let start = match footer_start(&tail, size) {
        Ok(s) => s,
        Err(p) => return findings(p),
    };
    let head = storage.get_range(uri, 0..PUFFIN_MAGIC.len() as u64).await?;
    let footer_bytes = storage.get_range(uri, start..size).await?;
    let footer = match parse_footer(&head, &footer_bytes) {
        Ok(f) => f,
        Err(p) => return findings(p),
    };
    let mut out = Vec::new();
    for e in entries {
        let range = match blob_range(e, start) {
            Ok(r) => r,
            Err(p) => {
                out.push(p.finding(path));
                continue;
            }
        };
        let blob = storage.get_range(uri, range).await?;
        out.extend(check_entry(&footer, e, &blob).iter().map(|p| p.finding(path)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const DATA: &str = "s3://b/t/data/a.parquet";

    fn blob_of(positions: &[u64]) -> Vec<u8> {
        let map: roaring::RoaringTreemap = positions.iter().copied().collect();
        let mut body = DV_MAGIC.to_vec();
        map.serialize_into(&mut body).unwrap();
        let mut blob = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        blob.extend(&body);
        blob.extend(crc32fast::hash(&body).to_be_bytes());
        blob
    }

    /// A Puffin file with one deletion vector blob, and the manifest entry that names it.
    fn puffin(positions: &[u64]) -> (Vec<u8>, DeletionVectorEntry) {
        let blob = blob_of(positions);
        let mut file = PUFFIN_MAGIC.to_vec();
        let offset = file.len();
        file.extend(&blob);
        let payload = serde_json::json!({"blobs": [{
            "type": DV_BLOB_TYPE, "fields": [2147483645], "snapshot-id": 1, "sequence-number": 1,
            "offset": offset, "length": blob.len(),
            "properties": {"referenced-data-file": DATA, "cardinality": positions.len().to_string()}
        }], "properties": {"created-by": "test"}})
        .to_string();
        file.extend(PUFFIN_MAGIC);
        file.extend(payload.as_bytes());
        file.extend(u32::try_from(payload.len()).unwrap().to_le_bytes());
        file.extend([0u8; 4]);
        file.extend(PUFFIN_MAGIC);
        let entry = DeletionVectorEntry {
            referenced_data_file: Some(DATA.into()),
            content_offset: Some(i64::try_from(offset).unwrap()),
            content_size_in_bytes: Some(i64::try_from(blob.len()).unwrap()),
            record_count: positions.len() as u64,
        };
        (file, entry)
    }

    /// The pure path of [`verify_file`] over bytes in memory.
    fn check(file: &[u8], entry: &DeletionVectorEntry) -> Vec<DvProblem> {
        let size = file.len() as u64;
        let start = match footer_start(&file[file.len() - 12..], size) {
            Ok(s) => s,
            Err(p) => return vec![p],
        };
        let footer = match parse_footer(&file[..4], &file[usize::try_from(start).unwrap()..]) {
            Ok(f) => f,
            Err(p) => return vec![p],
        };
        let range = match blob_range(entry, start) {
            Ok(r) => r,
            Err(p) => return vec![p],
        };
        let r = usize::try_from(range.start).unwrap()..usize::try_from(range.end).unwrap();
        check_entry(&footer, entry, &file[r])
    }

    fn checks(problems: &[DvProblem]) -> Vec<&'static str> {
        problems.iter().map(|p| p.check).collect()
    }

    #[test]
    fn a_rebased_footer_keeps_every_blob_in_place_and_names_the_new_data_file() {
        let (file, entry) = puffin(&[1, 5, 9]);
        let moved = "file:///rec/t/data/a.parquet";
        let (out, n) = rebase_referenced_files("x.puffin", &file, &|p: &str| {
            assert_eq!(p, DATA);
            Ok(moved.to_owned())
        })
        .unwrap();
        assert_eq!(n, 1);
        let start = usize::try_from(footer_start(&out[out.len() - 12..], out.len() as u64).unwrap()).unwrap();
        let footer = parse_footer(&out[..4], &out[start..]).unwrap();
        let moved_entry = DeletionVectorEntry {
            referenced_data_file: Some(moved.to_owned()),
            ..entry.clone()
        };
        let (o, l) = (
            usize::try_from(entry.content_offset.unwrap()).unwrap(),
            usize::try_from(entry.content_size_in_bytes.unwrap()).unwrap(),
        );
        assert_eq!(out[o..o + l], file[o..o + l], "the blob stays where the manifest says");
        assert!(check_entry(&footer, &moved_entry, &out[o..o + l]).is_empty());
        // The old name no longer matches: the footer really changed.
        assert!(!check_entry(&footer, &entry, &out[o..o + l]).is_empty());
        assert!(rebase_referenced_files("x.parquet", b"PAR1 not puffin PAR1", &|p: &str| Ok(p.to_owned())).is_err());
    }

    #[test]
    fn a_sound_deletion_vector_passes() {
        let (file, entry) = puffin(&[1, 5, 9, 1 << 33]);
        assert_eq!(check(&file, &entry), vec![]);
        assert_eq!(check_blob(&blob_of(&[]), 4).unwrap(), 0);
    }

    #[test]
    fn a_flipped_bitmap_byte_is_a_crc_mismatch_naming_the_blob() {
        let (mut file, entry) = puffin(&[1, 5, 9]);
        // Inside the bitmap: after file magic (4), length (4) and DV magic (4).
        file[14] ^= 0x01;
        let p = check(&file, &entry);
        assert_eq!(checks(&p), vec!["crc"]);
        let f = p[0].finding("data/x.puffin");
        assert_eq!(f.kind, FindingKind::DeletionVectorInvalid);
        assert!(
            f.expected.as_deref().unwrap().contains("blob at offset 4, check crc"),
            "{f}"
        );
    }

    #[test]
    fn a_wrong_length_prefix_or_size_is_a_length_problem() {
        let (mut file, entry) = puffin(&[3]);
        file[7] ^= 0x01; // the blob's big-endian length, low byte
        assert_eq!(checks(&check(&file, &entry)), vec!["length"]);
        let (file, mut entry) = puffin(&[3]);
        entry.content_size_in_bytes = entry.content_size_in_bytes.map(|s| s - 1);
        assert_eq!(checks(&check(&file, &entry)), vec!["footer blob", "length"]);
    }

    #[test]
    fn a_wrong_record_count_is_a_cardinality_problem() {
        let (file, mut entry) = puffin(&[3, 4]);
        entry.record_count = 3;
        let p = check(&file, &entry);
        assert_eq!(checks(&p), vec!["cardinality"]);
        assert_eq!(p[0].actual, "2");
    }

    #[test]
    fn a_wrong_referenced_file_is_named() {
        let (file, mut entry) = puffin(&[3]);
        entry.referenced_data_file = Some("s3://b/t/data/other.parquet".into());
        assert_eq!(checks(&check(&file, &entry)), vec!["referenced-data-file"]);
        entry.referenced_data_file = None;
        assert_eq!(checks(&check(&file, &entry)), vec!["manifest fields"]);
    }

    #[test]
    fn a_compressed_footer_is_unsupported_and_a_bad_magic_is_not_puffin() {
        let (mut file, entry) = puffin(&[3]);
        let n = file.len();
        file[n - 8] |= FLAG_COMPRESSED;
        let p = check(&file, &entry);
        assert_eq!(checks(&p), vec!["footer"]);
        assert!(p[0].actual.contains("unsupported"), "{:?}", p[0]);
        let (mut file, entry) = puffin(&[3]);
        file[0] = b'X';
        assert_eq!(checks(&check(&file, &entry)), vec!["footer"]);
        // Parquet is not Puffin.
        let mut parquet = b"PAR1".to_vec();
        parquet.extend([0u8; 20]);
        parquet.extend(b"PAR1");
        assert_eq!(checks(&check(&parquet, &entry)), vec!["footer"]);
    }

    #[test]
    fn a_bad_dv_magic_or_trailing_bytes_are_reported() {
        let mut blob = blob_of(&[1]);
        blob[4] = 0;
        let n = blob.len();
        let crc = crc32fast::hash(&blob[4..n - 4]).to_be_bytes();
        blob[n - 4..].copy_from_slice(&crc);
        assert_eq!(check_blob(&blob, 4).unwrap_err().check, "magic");
        // A bitmap with one extra byte, length and CRC consistent.
        let map: roaring::RoaringTreemap = [1u64].into_iter().collect();
        let mut body = DV_MAGIC.to_vec();
        map.serialize_into(&mut body).unwrap();
        body.push(0);
        let mut blob = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
        blob.extend(&body);
        blob.extend(crc32fast::hash(&body).to_be_bytes());
        assert_eq!(check_blob(&blob, 4).unwrap_err().check, "bitmap");
    }

    #[test]
    fn the_crc_is_the_standard_crc32() {
        // CRC-32/ISO-HDLC check value.
        assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    }
}
