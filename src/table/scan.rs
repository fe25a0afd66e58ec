//! Whole-history walks: every snapshot's manifest list and every distinct manifest, each read once.
//!
//! `plan` (and quarantine and purge, which re-plan) needs, for every snapshot of a table, the paths, layers
//! and sizes of everything it reaches — nothing else. A table with 1,000 snapshots names some 500,000
//! manifest-list entries and, through them, every manifest of its history; decoding each into the iceberg
//! crate's full model (through apache-avro's `Value` tree) costs more than everything else `plan` does.
//!
//! [`history`] therefore:
//! - fetches the manifest lists `io_concurrency` at a time and decodes only `manifest_path` and
//!   `manifest_length` of each entry, on the rayon pool;
//! - fetches every *distinct* manifest (by path and length) once, however many lists name it, checks its
//!   length against the list, and decodes only `status`, `data_file.content`, `data_file.file_path` and
//!   `data_file.file_size_in_bytes` of each entry, straight into [`ObjectRef`]s with table-relative paths;
//! - shares each manifest's objects between the snapshots that list it ([`SnapshotObjects`]).
//!
//! A manifest's entries are read by an [`EntryProgram`](crate::table::entry_program::EntryProgram) compiled once from the writer's schema (it passes over
//! column statistics and the other fields a walk does not read by their encoding alone); a manifest list, and a
//! manifest whose schema does not compile to a program, by `serde_avro_fast` (serde straight from the Avro
//! bytes, no intermediate values). Whenever the fast path cannot decode an object — a codec it lacks, a schema
//! it does not take, hostile bytes — the iceberg crate's parser decodes the same bytes and its verdict stands.
//! Never when the container's framing is broken (a block with bytes left after its datums, a negative count, a
//! wrong sync marker, a file ending inside a block): that is an error naming the object, since the reference
//! parser (apache-avro) reads a lowered block count as fewer entries — a count of 0 as the end of the file — at the
//! same length; and what the reference parser reads is checked the same way first (`check_container`). Each
//! manifest's entries, counted by status, must be what its list records ([`ListEntry::check_counts`]), and each
//! snapshot's manifests must reach its summary's totals ([`check_snapshot_totals`]). Tests walk every fixture table
//! both ways and compare the results object by object, check that the fast decoder alone reads every real manifest
//! (it is not silently falling back), and decode thousands of mutated manifests both ways: no panic, and where both
//! decoders accept the bytes they agree.
//!
//! Not checked: a manifest list's own entries against anything but the snapshot's summary (its length is recorded
//! nowhere; its `added_snapshot_id` and sequence numbers are not compared with the snapshots).

use foldhash::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use iceberg::spec::{DataContentType, FormatVersion, ManifestStatus};
use serde::Deserialize;

use crate::error::{Error, Result};
#[cfg(test)]
use crate::io::avro::AVRO_MAX_ALLOCATION;
use crate::io::store::{Fetched, Storage};
use crate::model::location::TableLocation;
use crate::model::object::{Layer, ManifestObjects, ObjectRef, SnapshotObjects};
use crate::table::{Table, check_manifest_length, parse_manifest, parse_manifest_list};

#[allow(clippy::wildcard_imports)]
use crate::table::container::*;
pub use crate::table::counts::{AcceptedExcess, EntryTally, ListEntry, TotalsRules, check_snapshot_totals};

/// The part of a manifest entry a walk reads.
#[derive(Deserialize)]
struct EntryRecord {
    status: i32,
    data_file: DataFileRecord,
}

#[derive(Deserialize)]
struct DataFileRecord {
    // Absent in v1 manifests: data.
    #[serde(default)]
    content: i32,
    file_path: String,
    file_format: String,
    file_size_in_bytes: i64,
    record_count: i64,
    // v3 (row lineage and deletion vectors): absent from v1/v2 manifests.
    #[serde(default)]
    first_row_id: Option<i64>,
    #[serde(default)]
    referenced_data_file: Option<String>,
    #[serde(default)]
    content_offset: Option<i64>,
    #[serde(default)]
    content_size_in_bytes: Option<i64>,
}

/// Decodes the `count` datums of a block with `serde_avro_fast`.
fn serde_block<T: serde::de::DeserializeOwned>(
    framing: &Framing,
    block: &[u8],
    count: i64,
    mut each: impl FnMut(T) -> std::result::Result<(), Stop>,
) -> std::result::Result<(), Stop> {
    let mut config = serde_avro_fast::de::DeserializerConfig::new(&framing.schema.serde);
    config.max_seq_size = MAX_SEQ;
    let mut state =
        serde_avro_fast::de::DeserializerState::with_config(serde_avro_fast::de::read::SliceRead::new(block), config);
    for _ in 0..count {
        each(T::deserialize(state.deserializer()).map_err(|_| Stop::Decode)?)?;
    }
    // Bytes left over after `count` datums: the count or a datum is not what was written.
    let mut rest = state.into_reader();
    let left = std::io::BufRead::fill_buf(&mut rest).map_err(|_| Stop::Decode)?.len();
    if left > 0 {
        return Err(leftover(left, count));
    }
    Ok(())
}

/// Decodes the `count` manifest entries of a block, with the schema's [`EntryProgram`] where it has one, else
/// with `serde_avro_fast` (unless `program_only`: then it stops, as a decoder that cannot read the bytes).
fn entry_block(
    framing: &Framing,
    block: &[u8],
    count: i64,
    program_only: bool,
    mut each: impl FnMut(EntryRecord) -> std::result::Result<(), Stop>,
) -> std::result::Result<(), Stop> {
    let Some(program) = &framing.schema.entries else {
        if program_only {
            return Err(Stop::Decode);
        }
        return serde_block(framing, block, count, each);
    };
    let mut rest = block;
    for _ in 0..count {
        let e = program.read(&mut rest).map_err(|_| Stop::Decode)?;
        each(EntryRecord {
            status: e.status,
            data_file: DataFileRecord {
                content: e.content,
                file_path: e.file_path.to_owned(),
                file_format: e.file_format.to_owned(),
                file_size_in_bytes: e.file_size_in_bytes,
                record_count: e.record_count,
                first_row_id: e.first_row_id,
                referenced_data_file: e.referenced_data_file.map(str::to_owned),
                content_offset: e.content_offset,
                content_size_in_bytes: e.content_size_in_bytes,
            },
        })?;
    }
    // As in `serde_block`: bytes left over mean the count or an entry is not what was written.
    if !rest.is_empty() {
        return Err(leftover(rest.len(), count));
    }
    Ok(())
}

/// Reads the Avro object container framing (header, blocks, sync markers) and decodes each datum with
/// `serde_avro_fast`. The framing is read here rather than by `serde_avro_fast`'s own container reader
/// because that reader cannot be bounded: a few hundred hostile bytes make it reserve 512 MiB (deflate) or
/// 4 GiB (snappy). Here every length is checked against the bytes actually present, a deflate block inflates
/// to at most [`AVRO_MAX_ALLOCATION`] bytes, and codecs other than `null` and `deflate` go to the reference
/// parser.
fn fast_records<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    mut each: impl FnMut(T) -> std::result::Result<(), Stop>,
) -> std::result::Result<(), Stop> {
    let (framing, header) = read_header(bytes)?;
    read_blocks(&framing, &bytes[header..], true, |block, count| {
        serde_block(&framing, block, count, &mut each)
    })
    .map(|_| ())
}

/// Which decoder reads an object: the fast one, falling back to the reference parser when it cannot, or
/// the reference parser (the iceberg crate) alone. Walks use [`Decoder::Fast`]; tests compare both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoder {
    /// A manifest's entries by the [`EntryProgram`](crate::table::entry_program::EntryProgram) compiled from its schema (by `serde_avro_fast` when there is
    /// none), a manifest list's by `serde_avro_fast`; then the iceberg crate if that fails.
    Fast,
    /// The iceberg crate only.
    Reference,
    /// The fast decoders only, and a manifest's entries by its [`EntryProgram`](crate::table::entry_program::EntryProgram) only: an error when they cannot
    /// decode (tests prove with it that real tables take the fastest path rather than a fallback).
    FastOnly,
}

fn fast_failed(uri: &str) -> Error {
    Error::corrupt(uri, "the fast Avro decoder cannot read it (FastOnly: no fallback)")
}

/// The entries of a manifest list (pure).
///
/// # Errors
/// The reference parser's error naming `uri`, when neither decoder can read the bytes.
pub fn manifest_list_entries(
    uri: &str,
    bytes: &[u8],
    version: FormatVersion,
    decoder: Decoder,
) -> Result<Vec<ListEntry>> {
    if decoder != Decoder::Reference {
        let mut out = Vec::new();
        let fast = fast_records::<ListEntry>(bytes, |e| {
            out.push(e);
            Ok(())
        });
        match (fast, decoder) {
            (Ok(()), _) => return Ok(out),
            (Err(stop), decoder) => {
                if let Some(e) = stop.into_error(uri) {
                    return Err(e);
                }
                if decoder == Decoder::FastOnly {
                    return Err(fast_failed(uri));
                }
            }
        }
    }
    Ok(parse_manifest_list(uri, bytes, version)?
        .entries()
        .iter()
        .map(ListEntry::of)
        .collect())
}

fn layer(content: i32) -> Option<Layer> {
    match content {
        0 => Some(Layer::Data),
        1 => Some(Layer::PositionDeletes),
        2 => Some(Layer::EqualityDeletes),
        _ => None,
    }
}

/// The spec's name of a file format (`file_format`, field 101), upper case as Iceberg Java writes it;
/// `None` for a name the spec does not define.
fn format_name(written: &str) -> Option<&'static str> {
    ["AVRO", "ORC", "PARQUET", "PUFFIN"]
        .into_iter()
        .find(|f| f.eq_ignore_ascii_case(written))
}

/// `format_name` of the iceberg crate's format.
#[must_use]
pub fn reference_format_name(f: iceberg::spec::DataFileFormat) -> &'static str {
    match f {
        iceberg::spec::DataFileFormat::Avro => "AVRO",
        iceberg::spec::DataFileFormat::Orc => "ORC",
        iceberg::spec::DataFileFormat::Parquet => "PARQUET",
        iceberg::spec::DataFileFormat::Puffin => "PUFFIN",
    }
}

/// A live data or delete file of a manifest, as far as sealing needs it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LiveFile {
    /// The path as written.
    pub file_path: String,
    /// Data, position deletes or equality deletes.
    pub layer: Layer,
    /// Size the manifest declares.
    pub size: u64,
    /// Rows the manifest declares (for a deletion vector: the positions it deletes).
    pub record_count: u64,
    /// `file_format` (field 101): `PARQUET`, `AVRO`, `ORC` or `PUFFIN` (deletion vectors).
    pub file_format: &'static str,
    /// v3 row lineage: the first row id of a data file (field 142).
    pub first_row_id: Option<i64>,
    /// v3 deletion vectors: the data file whose rows the vector deletes (field 143).
    pub referenced_data_file: Option<String>,
    /// v3 deletion vectors: where the blob starts in the Puffin file (field 144).
    pub content_offset: Option<i64>,
    /// v3 deletion vectors: the blob's length (field 145).
    pub content_size_in_bytes: Option<i64>,
}

impl LiveFile {
    /// Whether the entry is a deletion vector: a position delete stored as a blob of a Puffin file.
    #[must_use]
    pub fn is_deletion_vector(&self) -> bool {
        self.file_format == "PUFFIN"
    }
}

impl From<&LiveFile> for crate::table::puffin::DeletionVectorEntry {
    fn from(f: &LiveFile) -> Self {
        Self {
            referenced_data_file: f.referenced_data_file.clone(),
            content_offset: f.content_offset,
            content_size_in_bytes: f.content_size_in_bytes,
            record_count: f.record_count,
        }
    }
}

/// A manifest entry as a [`LiveFile`] when it is live (ADDED or EXISTING), `None` when DELETED, counted in `tally`;
/// a value the spec does not define stops the fast decoder.
fn live_entry(e: EntryRecord, tally: &mut EntryTally) -> std::result::Result<Option<LiveFile>, Stop> {
    let live = match e.status {
        0 | 1 => true,
        2 => false,
        _ => return Err(Stop::Decode),
    };
    let layer = layer(e.data_file.content).ok_or(Stop::Decode)?;
    let size = u64::try_from(e.data_file.file_size_in_bytes).map_err(|_| Stop::Decode)?;
    let record_count = u64::try_from(e.data_file.record_count).map_err(|_| Stop::Decode)?;
    let file_format = format_name(&e.data_file.file_format).ok_or(Stop::Decode)?;
    tally.count(e.status, layer == Layer::Data, record_count);
    Ok(live.then_some(LiveFile {
        file_path: e.data_file.file_path,
        layer,
        size,
        record_count,
        file_format,
        first_row_id: e.data_file.first_row_id,
        referenced_data_file: e.data_file.referenced_data_file,
        content_offset: e.data_file.content_offset,
        content_size_in_bytes: e.data_file.content_size_in_bytes,
    }))
}

/// Hands every live (ADDED or EXISTING) entry of a manifest to `each` as it is decoded. `Ok(false)` when the
/// fast decoder could not read the bytes (`each` may have been called for some entries: the caller starts over);
/// an error naming `uri` when its framing is broken.
fn fast_live_files(
    uri: &str,
    bytes: &[u8],
    program_only: bool,
    tally: &mut EntryTally,
    mut each: impl FnMut(LiveFile) -> Result<()>,
) -> Result<bool> {
    let fast = read_header(bytes).and_then(|(framing, header)| {
        read_blocks(&framing, &bytes[header..], true, |block, count| {
            entry_block(&framing, block, count, program_only, |e| match live_entry(e, tally)? {
                Some(f) => each(f).map_err(Stop::Caller),
                None => Ok(()),
            })
        })
    });
    match fast {
        Ok(_) => Ok(true),
        Err(stop) => stop.into_error(uri).map_or(Ok(false), Err),
    }
}

/// Hands every live file of a manifest to `each` (pure), with the fast decoder and the reference parser as
/// `decoder` says. When the fast decoder fails half-way, `restart` is called before the reference parser
/// starts over, so that the caller drops what it collected.
///
/// # Errors
/// The reference parser's error naming `uri` when neither decoder can read the bytes, or an error naming it
/// when its Avro framing is broken (a lowered block count, a cut, bytes left in a block: never a reason to let
/// the reference parser read it with entries missing); `each`'s errors.
pub fn live_files(
    uri: &str,
    bytes: &[u8],
    decoder: Decoder,
    each: impl FnMut(LiveFile) -> Result<()>,
    restart: impl FnOnce(),
) -> Result<()> {
    live_files_tallied(uri, bytes, decoder, each, restart).map(|_| ())
}

/// [`live_files`], returning the manifest's entries counted ([`EntryTally`]) for the checks against its manifest
/// list and the snapshot's summary.
///
/// # Errors
/// As [`live_files`].
pub fn live_files_tallied(
    uri: &str,
    bytes: &[u8],
    decoder: Decoder,
    mut each: impl FnMut(LiveFile) -> Result<()>,
    restart: impl FnOnce(),
) -> Result<EntryTally> {
    let mut tally = EntryTally::default();
    if decoder != Decoder::Reference {
        if fast_live_files(uri, bytes, decoder == Decoder::FastOnly, &mut tally, &mut each)? {
            return Ok(tally);
        }
        if decoder == Decoder::FastOnly {
            return Err(fast_failed(uri));
        }
        tally = EntryTally::default();
        restart();
    }
    let parsed = parse_manifest(uri, bytes)?;
    for e in parsed.entries() {
        tally.count_reference(e);
        if e.status() == ManifestStatus::Deleted {
            continue;
        }
        let df = e.data_file();
        let layer = match df.content_type() {
            DataContentType::Data => Layer::Data,
            DataContentType::PositionDeletes => Layer::PositionDeletes,
            DataContentType::EqualityDeletes => Layer::EqualityDeletes,
        };
        each(LiveFile {
            file_path: df.file_path().to_owned(),
            layer,
            size: df.file_size_in_bytes(),
            record_count: df.record_count(),
            file_format: reference_format_name(df.file_format()),
            first_row_id: df.first_row_id(),
            referenced_data_file: df.referenced_data_file(),
            content_offset: df.content_offset(),
            content_size_in_bytes: df.content_size_in_bytes(),
        })?;
    }
    Ok(tally)
}

/// Every live file of a manifest, collected in manifest order ([`live_files`]; what the fast decoder collected
/// before it gave up is dropped before the reference parser starts over).
///
/// # Errors
/// As [`live_files`].
pub fn collect_live_files(uri: &str, bytes: &[u8], decoder: Decoder) -> Result<Vec<LiveFile>> {
    let files = std::cell::RefCell::new(Vec::new());
    live_files(
        uri,
        bytes,
        decoder,
        |f| {
            files.borrow_mut().push(f);
            Ok(())
        },
        || files.borrow_mut().clear(),
    )?;
    Ok(files.into_inner())
}

/// A manifest's objects (pure): `manifest` itself first, then its live data and delete files with paths
/// relative to `location`, a Puffin file of deletion vectors once however many entries name it.
///
/// # Errors
/// The reference parser's error naming `uri` when neither decoder can read the bytes;
/// [`Error::PathOutsideTable`] for an entry outside the table.
pub fn manifest_objects(
    uri: &str,
    bytes: &[u8],
    location: &TableLocation,
    manifest: ObjectRef,
    decoder: Decoder,
) -> Result<Vec<ObjectRef>> {
    manifest_objects_tallied(uri, bytes, location, manifest, decoder).map(|(objects, _)| objects)
}

/// [`manifest_objects`] with the manifest's entries counted.
fn manifest_objects_tallied(
    uri: &str,
    bytes: &[u8],
    location: &TableLocation,
    manifest: ObjectRef,
    decoder: Decoder,
) -> Result<(Vec<ObjectRef>, EntryTally)> {
    let objects = std::cell::RefCell::new(ManifestCollector::new(location.clone(), manifest));
    let tally = live_files_tallied(
        uri,
        bytes,
        decoder,
        |f| objects.borrow_mut().push(f),
        || objects.borrow_mut().restart(),
    )?;
    Ok((objects.into_inner().finish(), tally))
}

/// A manifest's objects as [`manifest_objects`] makes them, gathered one live file at a time.
struct ManifestCollector {
    location: TableLocation,
    objects: Vec<ObjectRef>,
    /// A Puffin file holds the deletion vectors of many data files, each its own entry: it is one object.
    puffins: std::collections::HashSet<String>,
}

impl ManifestCollector {
    fn new(location: TableLocation, manifest: ObjectRef) -> Self {
        Self {
            location,
            objects: vec![manifest],
            puffins: std::collections::HashSet::new(),
        }
    }

    fn push(&mut self, f: LiveFile) -> Result<()> {
        if f.is_deletion_vector() && !self.puffins.insert(f.file_path.clone()) {
            return Ok(());
        }
        self.objects.push(ObjectRef {
            path: self.location.relative(&f.file_path)?,
            layer: f.layer,
            size: f.size,
        });
        Ok(())
    }

    /// Drops every file gathered (the manifest itself stays): a decoder starts over.
    fn restart(&mut self) {
        self.objects.truncate(1);
        self.puffins.clear();
    }

    fn finish(mut self) -> Vec<ObjectRef> {
        self.objects.shrink_to_fit();
        self.objects
    }
}

/// Where a manifest's live files go as they are decoded.
trait LiveSink {
    fn live(&mut self, f: LiveFile) -> Result<()>;
}

impl LiveSink for ManifestCollector {
    fn live(&mut self, f: LiveFile) -> Result<()> {
        self.push(f)
    }
}

impl LiveSink for Vec<LiveFile> {
    fn live(&mut self, f: LiveFile) -> Result<()> {
        self.push(f);
        Ok(())
    }
}

/// A manifest decoded by the fast decoder as its pieces arrive, so that it is never held whole (#24: a
/// million-entry manifest is ~130 MB, and a purge re-plans the table while it holds its candidate).
struct ManifestPieces<S> {
    /// The manifest, named in errors.
    uri: String,
    framing: Option<Framing>,
    /// The bytes of a block (or of the header) cut short by the end of the last piece.
    carry: Vec<u8>,
    /// The entries decoded so far, counted.
    tally: EntryTally,
    sink: S,
}

impl<S: LiveSink> ManifestPieces<S> {
    fn new(uri: &str, sink: S) -> Self {
        Self {
            uri: uri.to_owned(),
            framing: None,
            carry: Vec::new(),
            tally: EntryTally::default(),
            sink,
        }
    }

    /// Decodes what `piece` completes (`last`: the manifest's final piece). `Ok(false)` when the fast decoder cannot
    /// read the manifest (the reference parser must then read it whole); an error when its framing is broken.
    fn feed(&mut self, piece: &[u8], last: bool) -> Result<bool> {
        let bytes: &[u8] = if self.carry.is_empty() {
            piece
        } else {
            self.carry.extend_from_slice(piece);
            &self.carry
        };
        let mut used = 0;
        if self.framing.is_none() {
            match read_header(bytes) {
                Ok((framing, n)) => {
                    self.framing = Some(framing);
                    used = n;
                }
                Err(Stop::Decode) if !last => {
                    // The header runs on into the next piece (or is broken: the last piece decides).
                    let keep = bytes.to_vec();
                    self.carry = keep;
                    return Ok(true);
                }
                Err(stop) => return stop.into_error(&self.uri).map_or(Ok(false), Err),
            }
        }
        let Some(framing) = &self.framing else {
            return Ok(false);
        };
        let (sink, tally) = (&mut self.sink, &mut self.tally);
        let decoded = read_blocks(framing, &bytes[used..], last, |block, count| {
            entry_block(framing, block, count, false, |e| match live_entry(e, tally)? {
                Some(f) => sink.live(f).map_err(Stop::Caller),
                None => Ok(()),
            })
        });
        match decoded {
            Ok(n) => {
                let rest = bytes[used + n..].to_vec();
                self.carry = rest;
                Ok(true)
            }
            Err(stop) => stop.into_error(&self.uri).map_or(Ok(false), Err),
        }
    }
}

/// Runs a decode on the rayon pool (one thread per core): decoding is CPU work, and the async workers keep
/// fetching meanwhile; tokio's blocking pool would run up to `io_concurrency` decodes on as many threads. A panic
/// is an error naming the object, never an abort of the pool.
async fn on_rayon<T: Send + 'static>(what: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(result);
    });
    match rx.await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(Error::Internal(format!("decode task for {what} panicked"))),
        Err(_) => Err(Error::Internal(format!(
            "decode task for {what} ended without a result"
        ))),
    }
}

/// A manifest named by a list: it must exist and have the length the list records. One longer is refused
/// before it is read whole ([`crate::table::fetch_manifest_within`]).
async fn fetch_manifest(storage: &Storage, uri: &str, entry: &ListEntry) -> Result<Fetched> {
    crate::table::fetch_manifest_within(storage, uri, entry.manifest_length, || {
        "manifest named by a manifest list does not exist".into()
    })
    .await
}

/// A snapshot's manifest list, bounded by `max_metadata_bytes` ([`crate::table::fetch_manifest_list`]).
async fn fetch_list(storage: &Storage, uri: &str, snapshot_id: i64) -> Result<Fetched> {
    crate::table::fetch_manifest_list(storage, uri, snapshot_id).await
}

/// A snapshot's manifest list: its own object and the manifests it names.
async fn read_list(table: &Table, storage: &Storage, snapshot_id: i64) -> Result<(ObjectRef, Vec<ListEntry>)> {
    let snapshot = table.snapshot(snapshot_id)?;
    let written = snapshot.manifest_list();
    if written.is_empty() {
        return Err(Error::corrupt(
            table.metadata_uri(),
            format!("snapshot {snapshot_id} has no manifest list (v1 embedded manifests are not supported)"),
        ));
    }
    let uri = table.location().resolve(written)?;
    let own = ObjectRef {
        path: table.location().relative(written)?,
        layer: Layer::ManifestList,
        size: 0,
    };
    let bytes = fetch_list(storage, &uri, snapshot_id).await?.bytes;
    let version = table.metadata().format_version();
    let size = bytes.len() as u64;
    let u = uri.clone();
    let entries = on_rayon(&uri, move || manifest_list_entries(&u, &bytes, version, Decoder::Fast)).await?;
    Ok((ObjectRef { size, ..own }, entries))
}

/// Manifests larger than this are decoded piece by piece as they are read ([`ManifestPieces`]); smaller ones are
/// read whole (one request, and a decoder that may fall back to the reference parser at once).
const STREAM_MANIFESTS_OVER: i64 = 16 << 20;
/// The size of each piece of a manifest read piece by piece.
const MANIFEST_PIECE: usize = 8 << 20;

/// One manifest's objects: the manifest itself, then its live data and delete files; with its entries counted,
/// which must be the counts `entry` records.
async fn read_manifest(
    table: &Table,
    storage: &Storage,
    entry: &ListEntry,
) -> Result<(Arc<ManifestObjects>, EntryTally)> {
    let uri = table.location().resolve(&entry.manifest_path)?;
    let manifest = ObjectRef {
        path: table.location().relative(&entry.manifest_path)?,
        layer: Layer::Manifest,
        size: 0,
    };
    let key = format!("{}#{}", entry.manifest_path, entry.manifest_length);
    let location = table.location().clone();
    if entry.manifest_length > STREAM_MANIFESTS_OVER
        && let Some((objects, tally)) =
            read_manifest_in_pieces(storage, &uri, entry, &location, manifest.clone(), MANIFEST_PIECE).await?
    {
        entry.check_counts(&uri, &tally)?;
        return Ok((Arc::new(ManifestObjects { key, objects }), tally));
    }
    let bytes = fetch_manifest(storage, &uri, entry).await?.bytes;
    let manifest = ObjectRef {
        size: bytes.len() as u64,
        ..manifest
    };
    let u = uri.clone();
    let (objects, tally) = on_rayon(&uri, move || {
        manifest_objects_tallied(&u, &bytes, &location, manifest, Decoder::Fast)
    })
    .await?;
    entry.check_counts(&uri, &tally)?;
    Ok((Arc::new(ManifestObjects { key, objects }), tally))
}

/// A large manifest's objects, decoded on the rayon pool piece by piece (of `piece` bytes) as one read of it
/// streams in; `None` when
/// the fast decoder cannot read it (the caller reads it whole for the reference parser).
async fn read_manifest_in_pieces(
    storage: &Storage,
    uri: &str,
    entry: &ListEntry,
    location: &TableLocation,
    manifest: ObjectRef,
    piece: usize,
) -> Result<Option<(Vec<ObjectRef>, EntryTally)>> {
    let (info, mut pieces) = match storage.get_pieces(uri, piece).await {
        Ok(p) => p,
        Err(Error::NotFound { .. }) => {
            return Err(Error::corrupt(uri, "manifest named by a manifest list does not exist"));
        }
        Err(e) => return Err(e),
    };
    check_manifest_length(
        uri,
        usize::try_from(info.size).unwrap_or(usize::MAX),
        entry.manifest_length,
    )?;
    let manifest = ObjectRef {
        size: info.size,
        ..manifest
    };
    let mut decoding = ManifestPieces::new(uri, ManifestCollector::new(location.clone(), manifest));
    let mut read = 0_u64;
    while let Some(piece) = pieces.next().await {
        let piece = piece?;
        read += piece.len() as u64;
        if read > info.size {
            return Err(Error::corrupt(
                uri,
                format!("grew past the {} bytes the store reported while it was read", info.size),
            ));
        }
        let last = read == info.size;
        let (back, readable) = on_rayon(uri, move || {
            let readable = decoding.feed(&piece, last)?;
            Ok((decoding, readable))
        })
        .await?;
        if !readable {
            return Ok(None);
        }
        decoding = back;
    }
    if read != info.size {
        return Err(Error::corrupt(
            uri,
            format!("ended after {read} of the {} bytes the store reported", info.size),
        ));
    }
    Ok(Some((decoding.sink.finish(), decoding.tally)))
}

/// Every snapshot of the table (in [`Table::snapshots_sorted`] order) with everything it reaches, or
/// `None` when some layer of it could not be read (missing, truncated, unparseable, unreadable). See
/// [`history_explained`] for why.
///
/// # Errors
/// [`Error::PathOutsideTable`] when any layer names a path outside the table: that is never a per-snapshot
/// unknown, it stops the walk.
pub async fn history(
    table: &Table,
    storage: &Storage,
    concurrency: usize,
) -> Result<Vec<(i64, Option<SnapshotObjects>)>> {
    Ok(history_explained(table, storage, concurrency)
        .await?
        .into_iter()
        .map(|(id, r)| (id, r.ok()))
        .collect())
}

/// [`history`] with, for each snapshot whose layers could not be read, the error of the first layer that
/// failed (naming the manifest list or manifest), instead of `None`.
///
/// # Errors
/// [`Error::PathOutsideTable`] when any layer names a path outside the table.
pub async fn history_explained(
    table: &Table,
    storage: &Storage,
    concurrency: usize,
) -> Result<Vec<(i64, std::result::Result<SnapshotObjects, String>)>> {
    let concurrency = concurrency.max(1);
    let ids: Vec<i64> = table.snapshots_sorted().iter().map(|s| s.snapshot_id()).collect();
    // Manifest lists as they arrive, each entry interned: a history of N snapshots of M manifests keeps N × M
    // small indexes and each distinct manifest's path once, not N × M paths.
    let mut index: HashMap<ListEntry, usize> = HashMap::default();
    let mut lists: Vec<Result<(ObjectRef, Vec<usize>)>> = Vec::with_capacity(ids.len());
    let mut arriving = futures::stream::iter(ids.iter().copied())
        .map(|id| read_list(table, storage, id))
        .buffered(concurrency);
    while let Some(list) = arriving.next().await {
        lists.push(list.map(|(own, entries)| {
            let refs = entries
                .into_iter()
                .map(|e| {
                    let next = index.len();
                    *index.entry(e).or_insert(next)
                })
                .collect();
            (own, refs)
        }));
    }
    drop(arriving);
    let mut distinct: Vec<(usize, ListEntry)> = index.into_iter().map(|(e, i)| (i, e)).collect();
    // Largest first (each is stored at its index, so the order is the schedule's alone): the decodes share the
    // cores, and a large manifest reached last was decoded alone at the end of the walk (about 20 ms of one core on
    // a 1,000-snapshot Spark history: its newest manifests, named by the newest lists, are the merged ones of 1 MB
    // among a thousand of 8 KB).
    distinct.sort_unstable_by_key(|(i, e)| (std::cmp::Reverse(e.manifest_length), *i));
    type Counted = (Arc<ManifestObjects>, EntryTally);
    let read: Vec<(usize, Result<Counted>)> = futures::stream::iter(&distinct)
        .map(|(i, e)| async move { (*i, read_manifest(table, storage, e).await) })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    type Read = std::result::Result<Counted, String>;
    let mut manifests: Vec<Read> = vec![Err("not read".to_owned()); distinct.len()];
    for (i, r) in read {
        match r {
            Ok(m) => manifests[i] = Ok(m),
            Err(Error::PathOutsideTable { path, location }) => return Err(Error::PathOutsideTable { path, location }),
            // Unreadable: every snapshot that lists it is unknown, and says why.
            Err(e) => manifests[i] = Err(e.with_causes()),
        }
    }
    let mut out = Vec::with_capacity(ids.len());
    for (id, list) in ids.into_iter().zip(lists) {
        let objects = match list {
            Ok((own, refs)) => refs
                .iter()
                .map(|i| manifests.get(*i).cloned().unwrap_or_else(|| Err("not read".to_owned())))
                .collect::<std::result::Result<Vec<_>, String>>()
                // The manifest list is named too: the length it records may be what is wrong.
                .map_err(|why| format!("a manifest named by manifest list {}: {why}", own.path))
                .and_then(|m| {
                    let mut totals = EntryTally::default();
                    for (_, t) in &m {
                        totals.add(t);
                    }
                    check_snapshot_totals(
                        table.snapshot(id).map_err(|e| e.to_string())?,
                        &own.path,
                        &totals,
                        table.totals_rules(),
                    )?;
                    Ok(SnapshotObjects {
                        own: vec![own],
                        manifests: m.into_iter().map(|(o, _)| o).collect(),
                    })
                }),
            Err(Error::PathOutsideTable { path, location }) => return Err(Error::PathOutsideTable { path, location }),
            Err(e) => Err(e.with_causes()),
        };
        out.push((id, objects));
    }
    Ok(out)
}

/// A manifest of one snapshot with its exact bytes (sealing copies them into the bundle).
#[derive(Debug, Clone)]
pub struct SnapshotManifest {
    /// The path as written in the manifest list.
    pub path: String,
    /// Where it was read.
    pub uri: String,
    /// Its exact bytes and what the store said about it.
    pub fetched: Fetched,
}

/// The layers of one snapshot as sealing needs them: the exact bytes of its manifest list and manifests,
/// and each live data or delete file once (a file listed by two manifests is one object), sorted by path.
#[derive(Debug, Clone)]
pub struct SnapshotFiles {
    /// The manifest list path as written.
    pub manifest_list_written: String,
    /// Where it was read.
    pub manifest_list_uri: String,
    /// Its exact bytes.
    pub manifest_list: Fetched,
    /// Manifests in manifest-list order.
    pub manifests: Vec<SnapshotManifest>,
    /// Live files, sorted by path, each path once (a Puffin file holding several deletion vectors too).
    pub files: Vec<SealFile>,
    /// The live deletion vector entries (v3) by Puffin file path as written: every entry, however many
    /// name one file.
    pub deletion_vectors: std::collections::BTreeMap<String, Vec<crate::table::puffin::DeletionVectorEntry>>,
}

/// A live data or delete file as sealing needs it: what [`LiveFile`] holds of it, without the v3 fields (a
/// deletion vector's are in [`SnapshotFiles::deletion_vectors`]); ~120 B a file with its path instead of ~230 B
/// (#24: a million of them are held while they are hashed).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SealFile {
    /// The path as written.
    pub file_path: Box<str>,
    /// Data, position deletes or equality deletes.
    pub layer: Layer,
    /// Size the manifest declares.
    pub size: u64,
    /// Rows the manifest declares (for a deletion vector: the positions it deletes).
    pub record_count: u64,
}

/// Reads one snapshot's layers for sealing, `concurrency` manifests at a time, decoding lean (see the module
/// documentation): a snapshot of a million files holds a million [`SealFile`]s, not the iceberg crate's full
/// entries, each made as its manifest entry is decoded.
///
/// # Errors
/// Any [`Error`] naming the layer that could not be read or parsed: a missing manifest list or manifest, a
/// manifest whose length differs from the list's record, [`Error::PathOutsideTable`].
pub async fn snapshot_files(
    table: &Table,
    storage: &Storage,
    snapshot_id: i64,
    concurrency: usize,
) -> Result<SnapshotFiles> {
    let snapshot = table.snapshot(snapshot_id)?;
    let written = snapshot.manifest_list().to_owned();
    if written.is_empty() {
        return Err(Error::corrupt(
            table.metadata_uri(),
            format!("snapshot {snapshot_id} has no manifest list (v1 embedded manifests are not supported)"),
        ));
    }
    let list_uri = table.location().resolve(&written)?;
    let manifest_list = fetch_list(storage, &list_uri, snapshot_id).await?;
    let version = table.metadata().format_version();
    let (u, b) = (list_uri.clone(), manifest_list.bytes.clone());
    let entries = on_rayon(&list_uri, move || manifest_list_entries(&u, &b, version, Decoder::Fast)).await?;
    type Vectors = Vec<(String, crate::table::puffin::DeletionVectorEntry)>;
    type Read = (SnapshotManifest, Vec<SealFile>, Vectors, EntryTally);
    let read: Vec<Result<Read>> = futures::stream::iter(entries)
        .map(|e| async move {
            let uri = table.location().resolve(&e.manifest_path)?;
            let fetched = fetch_manifest(storage, &uri, &e).await?;
            let (u, b) = (uri.clone(), fetched.bytes.clone());
            let (files, vectors, tally) = on_rayon(&uri, move || {
                let found = std::cell::RefCell::new((Vec::new(), Vec::new()));
                let tally = live_files_tallied(
                    &u,
                    &b,
                    Decoder::Fast,
                    |f| {
                        let mut found = found.borrow_mut();
                        if f.is_deletion_vector() {
                            found
                                .1
                                .push((f.file_path.clone(), crate::table::puffin::DeletionVectorEntry::from(&f)));
                        }
                        found.0.push(SealFile {
                            file_path: f.file_path.into_boxed_str(),
                            layer: f.layer,
                            size: f.size,
                            record_count: f.record_count,
                        });
                        Ok(())
                    },
                    || *found.borrow_mut() = (Vec::new(), Vec::new()),
                )?;
                let (files, vectors) = found.into_inner();
                Ok((files, vectors, tally))
            })
            .await?;
            e.check_counts(&uri, &tally)?;
            Ok((
                SnapshotManifest {
                    path: e.manifest_path,
                    uri,
                    fetched,
                },
                files,
                vectors,
                tally,
            ))
        })
        .buffered(concurrency.max(1))
        .collect()
        .await;
    let mut manifests = Vec::with_capacity(read.len());
    let mut files = Vec::new();
    let mut deletion_vectors: std::collections::BTreeMap<_, Vec<_>> = std::collections::BTreeMap::new();
    let mut totals = EntryTally::default();
    for r in read {
        let (m, f, vectors, tally) = r?;
        totals.add(&tally);
        manifests.push(m);
        if files.is_empty() {
            files = f;
        } else {
            files.extend(f);
        }
        for (path, v) in vectors {
            deletion_vectors.entry(path).or_default().push(v);
        }
    }
    check_snapshot_totals(snapshot, &written, &totals, table.totals_rules())
        .map_err(|why| Error::corrupt(&list_uri, why))?;
    for entries in deletion_vectors.values_mut() {
        entries.sort_unstable();
        entries.dedup();
    }
    files.sort_unstable();
    files.dedup_by(|a, b| a.file_path == b.file_path);
    files.shrink_to_fit();
    Ok(SnapshotFiles {
        manifest_list_written: written,
        manifest_list_uri: list_uri,
        manifest_list,
        manifests,
        files,
        deletion_vectors,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rand::{Rng, SeedableRng};

    use super::*;

    fn fixture_avro_files() -> Vec<std::path::PathBuf> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "avro") {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop"),
            &mut out,
        );
        out.sort();
        out
    }

    /// The Spark-written v3 table with deletion vectors among the fixtures: its folder, and its location as written.
    fn v3_dv_fixture() -> (std::path::PathBuf, TableLocation) {
        let dir =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/lakedrill-spark/v3_dv");
        let location = TableLocation::new(
            "/tmp/v3wh/db/t",
            format!("file://{}", dir.display()),
            "file:///tmp/v3wh/db/t/metadata/v6.metadata.json",
        )
        .unwrap();
        (dir, location)
    }

    /// `real` with one random change: up to `flips - 1` bits flipped (at least one), truncated, or a byte inserted.
    fn mutated(real: &[u8], rng: &mut rand::rngs::StdRng, flips: usize) -> Vec<u8> {
        let mut b = real.to_vec();
        match rng.gen_range(0..3) {
            0 => {
                for _ in 0..rng.gen_range(1..flips) {
                    let i = rng.gen_range(0..b.len());
                    b[i] ^= 1 << rng.gen_range(0..8);
                }
            }
            1 => b.truncate(rng.gen_range(0..b.len())),
            _ => {
                let i = rng.gen_range(0..b.len());
                b.insert(i, rng.r#gen());
            }
        }
        b
    }

    /// Whether the fast decoder's list entries are the reference parser's: the same manifests, and the same counts
    /// wherever the reference parser reads them (it drops those of a v1 list written under the names Iceberg 1.5
    /// gave them, `added_files_count`, …, which the fast decoder reads under both names).
    fn same_entries(fast: &[ListEntry], reference: &[ListEntry]) -> bool {
        let counts = |e: &ListEntry| {
            [
                e.added_files_count,
                e.existing_files_count,
                e.deleted_files_count,
                e.added_rows_count,
                e.existing_rows_count,
                e.deleted_rows_count,
            ]
        };
        fast.len() == reference.len()
            && fast.iter().zip(reference).all(|(f, r)| {
                f.manifest_path == r.manifest_path
                    && f.manifest_length == r.manifest_length
                    && counts(f).into_iter().zip(counts(r)).all(|(f, r)| r.is_none() || f == r)
            })
    }

    fn files(bytes: &[u8], decoder: Decoder) -> Result<Vec<LiveFile>> {
        let mut out = Vec::new();
        live_files(
            "m.avro",
            bytes,
            decoder,
            |f| {
                out.push(f);
                Ok(())
            },
            || {},
        )?;
        Ok(out)
    }

    /// A Spark-written v3 manifest naming one Puffin file from several deletion vector entries gives that
    /// file once among the manifest's objects, on both decoders; every entry keeps its vector fields.
    #[test]
    fn v3_puffin_is_one_object_per_manifest_and_both_decoders_read_its_vectors() {
        let (dir, location) = v3_dv_fixture();
        let mut shared = 0;
        for p in fixture_avro_files().iter().filter(|p| p.starts_with(&dir)) {
            if p.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                continue;
            }
            let bytes = std::fs::read(p).unwrap();
            let entries = files(&bytes, Decoder::FastOnly).unwrap();
            assert_eq!(entries, files(&bytes, Decoder::Reference).unwrap(), "{}", p.display());
            let manifest = ObjectRef {
                path: "m.avro".into(),
                layer: Layer::Manifest,
                size: 0,
            };
            for decoder in [Decoder::FastOnly, Decoder::Reference] {
                let objects = manifest_objects("m", &bytes, &location, manifest.clone(), decoder).unwrap();
                let mut paths: Vec<&str> = objects.iter().map(|o| o.path.as_str()).collect();
                let n = paths.len();
                paths.sort_unstable();
                paths.dedup();
                assert_eq!(paths.len(), n, "{}: an object twice", p.display());
            }
            let dvs: Vec<&LiveFile> = entries.iter().filter(|f| f.is_deletion_vector()).collect();
            for dv in &dvs {
                assert_eq!(dv.layer, Layer::PositionDeletes);
                assert!(
                    dv.referenced_data_file.is_some()
                        && dv.content_offset.is_some()
                        && dv.content_size_in_bytes.is_some()
                );
            }
            if dvs.len() > 1 && dvs.iter().all(|d| d.file_path == dvs[0].file_path) {
                shared += 1;
            }
        }
        assert!(shared > 0, "no manifest with several vectors of one Puffin file");
    }

    fn times<T: Clone>(v: Vec<T>, n: usize) -> Vec<T> {
        (0..n).flat_map(|_| v.iter().cloned()).collect()
    }

    /// `real` re-encoded as PyIceberg writes it: deflate, a block of `per_block` entries each (PyIceberg flushes a
    /// block per entry), its entries `repeat` times over; the schema and the metadata Iceberg reads are kept. Also
    /// the number of blocks written.
    fn reblocked(real: &[u8], per_block: usize, repeat: usize) -> (Vec<u8>, usize) {
        let reader = apache_avro::Reader::new(real).unwrap();
        let schema = reader.writer_schema().clone();
        let meta: Vec<(String, Vec<u8>)> = reader
            .user_metadata()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let values: Vec<apache_avro::types::Value> = times(reader.map(Result::unwrap).collect(), repeat);
        let codec = apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default());
        let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec);
        for (k, v) in meta {
            w.add_user_metadata(k, v).unwrap();
        }
        let mut blocks = 0;
        for chunk in values.chunks(per_block) {
            for v in chunk {
                w.append(v.clone()).unwrap();
            }
            w.flush().unwrap();
            blocks += 1;
        }
        let bytes = w.into_inner().unwrap();
        // Each block ends with the file's sync marker, which the header carries too.
        let sync = &bytes[bytes.len() - 16..];
        assert_eq!(bytes.windows(16).filter(|w| *w == sync).count(), blocks + 1);
        (bytes, blocks)
    }

    /// The fixtures' manifests and manifest lists rewritten with one deflate block per entry (as PyIceberg writes
    /// them), with blocks of three, and with their entries 300 times over, a block each: the fast decoder, one
    /// inflater reset per block, reads every one alone and gives exactly the entries the iceberg crate's parser
    /// gives of the rewritten bytes, and (but for the repetition) of the original ones.
    #[test]
    fn deflate_block_per_entry_decodes_like_the_reference_parser() {
        let (mut files_checked, mut most_blocks) = (0, 0);
        for p in fixture_avro_files() {
            let real = std::fs::read(&p).unwrap();
            let is_list = p.file_name().unwrap().to_string_lossy().starts_with("snap-");
            let version = [FormatVersion::V2, FormatVersion::V1, FormatVersion::V3]
                .into_iter()
                .find(|v| manifest_list_entries("l", &real, *v, Decoder::Reference).is_ok());
            for (per_block, repeat) in [(1, 1), (3, 1), (1, 300)] {
                let (bytes, blocks) = reblocked(&real, per_block, repeat);
                most_blocks = most_blocks.max(blocks);
                if is_list {
                    let v = version.unwrap();
                    let fast = manifest_list_entries("l", &bytes, v, Decoder::FastOnly)
                        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                    assert!(same_entries(
                        &fast,
                        &manifest_list_entries("l", &bytes, v, Decoder::Reference).unwrap()
                    ));
                    assert!(same_entries(
                        &fast,
                        &times(
                            manifest_list_entries("l", &real, v, Decoder::Reference).unwrap(),
                            repeat
                        )
                    ));
                } else {
                    let fast = files(&bytes, Decoder::FastOnly).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                    assert_eq!(fast, files(&bytes, Decoder::Reference).unwrap(), "{}", p.display());
                    assert_eq!(
                        fast,
                        times(files(&real, Decoder::Reference).unwrap(), repeat),
                        "{}",
                        p.display()
                    );
                }
                files_checked += 1;
            }
        }
        assert!(files_checked > 60, "{files_checked}");
        assert!(most_blocks >= 2_000, "{most_blocks} blocks at most");
    }

    /// An Avro container of `long`s with the given blocks (record count, block bytes as stored).
    fn container(codec: &str, blocks: &[(i64, Vec<u8>)]) -> Vec<u8> {
        use integer_encoding::VarInt;
        let sync = [7u8; 16];
        let mut out = b"Obj\x01".to_vec();
        out.extend(2i64.encode_var_vec());
        for (k, v) in [("avro.schema", "\"long\""), ("avro.codec", codec)] {
            for x in [k, v] {
                out.extend((x.len() as i64).encode_var_vec());
                out.extend(x.as_bytes());
            }
        }
        out.extend(0i64.encode_var_vec());
        out.extend(sync);
        for (count, data) in blocks {
            out.extend(count.encode_var_vec());
            out.extend((data.len() as i64).encode_var_vec());
            out.extend(data);
            out.extend(sync);
        }
        out
    }

    fn deflated(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn longs(bytes: &[u8]) -> Option<Vec<i64>> {
        let mut out = Vec::new();
        fast_records::<i64>(bytes, |v| {
            out.push(v);
            Ok(())
        })
        .ok()
        .map(|()| out)
    }

    /// With one inflater reused for every block, the bound is still per block: a block may inflate to exactly
    /// [`AVRO_MAX_ALLOCATION`] bytes whatever came before it, and one byte more stops the fast decoder (the
    /// reference parser then decides), also after earlier blocks.
    #[test]
    fn reused_inflater_bounds_every_block() {
        use integer_encoding::VarInt;
        let one = |v: i64| deflated(&v.encode_var_vec());
        // Avro longs are zigzag varints: 0 is the byte 0, so a block of zeros holds records of 0.
        let full = deflated(&vec![0u8; AVRO_MAX_ALLOCATION]);
        let over = deflated(&vec![0u8; AVRO_MAX_ALLOCATION + 1]);
        // Each zero byte is a record (a block's bytes are all its datums': bytes left over refuse it).
        let n = i64::try_from(AVRO_MAX_ALLOCATION).unwrap();
        let at_limit = container("deflate", &[(1, one(5)), (n, full.clone()), (1, one(-3)), (n, full)]);
        let read = longs(&at_limit).unwrap();
        assert_eq!(read.len(), 2 * AVRO_MAX_ALLOCATION + 2);
        assert_eq!(read.iter().filter(|v| **v != 0).collect::<Vec<_>>(), [&5, &-3]);
        drop(read);
        let mut many: Vec<(i64, Vec<u8>)> = (0..1_000).map(|i| (1, one(i))).collect();
        assert_eq!(longs(&container("deflate", &many)), Some((0..1_000).collect()));
        many.push((n + 1, over));
        assert_eq!(longs(&container("deflate", &many)), None);
        let plain: Vec<(i64, Vec<u8>)> = (0..1_000).map(|i| (1, i.encode_var_vec())).collect();
        assert_eq!(longs(&container("null", &plain)), Some((0..1_000).collect()));
    }

    /// A schema text is parsed once and shared after; another text, even one differing in a byte, is parsed on
    /// its own; text that is no schema is refused each time; past the cache's size the oldest is replaced, and
    /// a schema asked for again is parsed again and kept.
    #[test]
    fn schemas_are_kept_by_their_exact_text() {
        let cache = SchemaCache::new();
        let text =
            |i: usize| format!(r#"{{"type":"record","name":"kept_{i}","fields":[{{"name":"x","type":"long"}}]}}"#);
        let first = cache.parsed(text(0).as_bytes()).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.parsed(text(0).as_bytes()).unwrap()));
        let other = cache.parsed(text(1).as_bytes()).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(Arc::ptr_eq(&other, &cache.parsed(text(1).as_bytes()).unwrap()));
        assert!(cache.parsed(b"{\"type\":").is_err());
        assert!(cache.parsed(b"{\"type\":").is_err());
        for i in 2..=SCHEMAS_KEPT {
            cache.parsed(text(i).as_bytes()).unwrap();
        }
        // 0 was the oldest: replaced by the last; 1 is still kept.
        assert!(Arc::ptr_eq(&other, &cache.parsed(text(1).as_bytes()).unwrap()));
        let again = cache.parsed(text(0).as_bytes()).unwrap();
        assert!(!Arc::ptr_eq(&first, &again));
        assert!(Arc::ptr_eq(&again, &cache.parsed(text(0).as_bytes()).unwrap()));
        // The process-wide cache answers through the same code.
        assert!(parsed_schema(text(0).as_bytes()).is_ok());
    }

    /// One libdeflate decompressor and buffer reused for every block give what zlib (flate2's decoder, built
    /// fresh for each block) gives, on valid, truncated, bit-flipped, over-long and random streams run through it
    /// one after another: a stream that ended early or broke leaves nothing behind for the next block. The one
    /// difference allowed is stricter: a stream cut short, which zlib may hand back as the bytes it got so far,
    /// libdeflate refuses (the block is then corrupt for the fast decoder, and the reference parser decides).
    #[test]
    fn reused_decompressor_equals_a_fresh_zlib_decoder_per_block() {
        use std::io::Read;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0xdef1a7e);
        let fresh = |raw: &[u8]| {
            let mut out = Vec::new();
            let limit = AVRO_MAX_ALLOCATION as u64;
            flate2::read::DeflateDecoder::new(raw)
                .take(limit + 1)
                .read_to_end(&mut out)
                .ok()
                .filter(|_| out.len() as u64 <= limit)
                .map(|_| out)
        };
        let streams: Vec<(usize, Vec<u8>)> = (0..600)
            .map(|i| {
                // Past the first buffer (8x the deflated size) too: long runs deflate ~1,000 to 1.
                let len = if i % 7 == 0 {
                    rng.gen_range(0..300_000)
                } else {
                    rng.gen_range(0..5_000)
                };
                let data: Vec<u8> = (0..len).map(|_| rng.gen_range(0..(1 + i % 40) as u8)).collect();
                let mut z = deflated(&data);
                match i % 5 {
                    0 => {}
                    1 => z.truncate(rng.gen_range(0..=z.len())),
                    2 => {
                        let at = rng.gen_range(0..z.len());
                        z[at] ^= 1 << rng.gen_range(0..8);
                    }
                    3 => z.extend((0..rng.gen_range(1..20)).map(|_| rng.r#gen::<u8>())),
                    _ => z = (0..rng.gen_range(0..200)).map(|_| rng.r#gen::<u8>()).collect(),
                }
                (i % 5, z)
            })
            .collect();
        let mut inflater = libdeflater::Decompressor::new();
        let mut out = Vec::new();
        let (mut ok, mut failed, mut stricter) = (0, 0, 0);
        for (kind, z) in &streams {
            let reused = inflate_block(&mut inflater, z, &mut out).ok().map(<[u8]>::to_vec);
            match (&reused, fresh(z)) {
                (Some(_), None) => panic!("libdeflate accepted a stream zlib refuses (kind {kind})"),
                (None, Some(_)) => {
                    assert_ne!(*kind, 0, "a whole stream was refused");
                    assert_ne!(*kind, 3, "bytes after a whole stream made it refused");
                    stricter += 1;
                }
                (a, b) => assert_eq!(*a, b),
            }
            if reused.is_some() { ok += 1 } else { failed += 1 }
        }
        assert!(ok > 100 && failed > 10, "{ok} {failed} {stricter}");
    }

    /// A manifest's entries as (status, content, path, format, rows, size, v3 fields), each block read by the
    /// schema's [`EntryProgram`] or by `serde_avro_fast`.
    #[allow(clippy::type_complexity)]
    fn entries_read(
        bytes: &[u8],
        program: bool,
    ) -> std::result::Result<
        Vec<(
            i32,
            i32,
            String,
            String,
            i64,
            i64,
            Option<i64>,
            Option<String>,
            Option<i64>,
            Option<i64>,
        )>,
        Stop,
    > {
        let (framing, header) = read_header(bytes)?;
        let mut out = Vec::new();
        let mut keep = |e: EntryRecord| {
            let d = e.data_file;
            out.push((
                e.status,
                d.content,
                d.file_path,
                d.file_format,
                d.record_count,
                d.file_size_in_bytes,
                d.first_row_id,
                d.referenced_data_file,
                d.content_offset,
                d.content_size_in_bytes,
            ));
            Ok(())
        };
        read_blocks(&framing, &bytes[header..], true, |block, count| {
            if program {
                entry_block(&framing, block, count, true, &mut keep)
            } else {
                serde_block(&framing, block, count, &mut keep)
            }
        })?;
        Ok(out)
    }

    /// Every real manifest among the fixtures (Spark/Java and DuckDB; v1, v2 and v3 with deletion vectors) has a
    /// schema the [`EntryProgram`] compiles for (the integration tests prove it of PyIceberg's and the demo's too,
    /// with [`Decoder::FastOnly`]), and it reads exactly what `serde_avro_fast` reads,
    /// of the real bytes and of mutated ones wherever both read them; it never panics.
    #[test]
    fn entry_program_reads_what_serde_reads_on_real_and_mutated_manifests() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0xe1717);
        let (mut manifests, mut agreed, mut program_refused) = (0, 0, 0);
        for p in fixture_avro_files() {
            if p.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                continue;
            }
            let real = std::fs::read(&p).unwrap();
            let (framing, _) = read_header(&real).unwrap_or_else(|_| panic!("{}", p.display()));
            assert!(
                framing.schema.entries.is_some(),
                "{}: no entry program for its schema",
                p.display()
            );
            let program = entries_read(&real, true).unwrap_or_else(|_| panic!("{}: program", p.display()));
            assert!(!program.is_empty(), "{}", p.display());
            let serde = entries_read(&real, false).unwrap_or_else(|_| panic!("{}: serde", p.display()));
            assert_eq!(program, serde, "{}", p.display());
            manifests += 1;
            for flips in [2, 3, 5] {
                for _ in 0..30 {
                    let b = mutated(&real, &mut rng, flips);
                    match (entries_read(&b, true), entries_read(&b, false)) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(a, b, "{}: mutated", p.display());
                            agreed += 1;
                        }
                        (Err(_), _) => program_refused += 1,
                        _ => {}
                    }
                }
            }
        }
        assert!(manifests > 20, "{manifests}");
        assert!(
            agreed > 100 && program_refused > 100,
            "{agreed} agreed, {program_refused} refused"
        );
    }

    /// Differential decoding of the Spark/Java fixtures' manifests and manifest lists, whole and mutated
    /// (byte flips, truncation, a byte inserted): the fast decoder never panics, and whenever both decoders
    /// accept the same bytes they read the same entries.
    #[test]
    fn fast_and_reference_decoders_agree_on_real_and_mutated_files() {
        let paths = fixture_avro_files();
        assert!(paths.len() > 20, "{}", paths.len());
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5ca1ab1e);
        let (mut agreed, mut fast_only_real, mut refused_both) = (0, 0, 0);
        for p in &paths {
            let real = std::fs::read(p).unwrap();
            let is_list = p.file_name().unwrap().to_string_lossy().starts_with("snap-");
            if is_list {
                let ok = [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3]
                    .iter()
                    .any(|v| manifest_list_entries("l", &real, *v, Decoder::FastOnly).is_ok());
                assert!(ok, "{}: the fast decoder cannot read a real manifest list", p.display());
            } else {
                files(&real, Decoder::FastOnly).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            }
            fast_only_real += 1;
            let (_, header) = read_header(&real).unwrap();
            for _ in 0..40 {
                let b = mutated(&real, &mut rng, 4);
                if is_list {
                    for v in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
                        let fast = manifest_list_entries("l", &b, v, Decoder::FastOnly);
                        let reference = manifest_list_entries("l", &b, v, Decoder::Reference);
                        if let (Ok(f), Ok(r)) = (&fast, &reference) {
                            assert!(same_entries(f, r), "{}: mutated list: {f:?} {r:?}", p.display());
                            agreed += 1;
                        }
                        // Bytes the reference parser refuses are never read by the fast decoder alone: with the header
                        // untouched (the reference also reads its metadata, which the fast decoder does not need),
                        // under a format version the reference reads the real list with.
                        let judged = b.get(..header) == real.get(..header)
                            && manifest_list_entries("l", &real, v, Decoder::Reference).is_ok();
                        assert!(
                            !judged || reference.is_ok() || fast.is_err(),
                            "{}: mutated list the reference refuses read as {:?}",
                            p.display(),
                            fast
                        );
                        refused_both += usize::from(reference.is_err() && fast.is_err());
                    }
                } else {
                    let fast = files(&b, Decoder::FastOnly);
                    let reference = files(&b, Decoder::Reference);
                    if let (Ok(f), Ok(r)) = (&fast, &reference) {
                        assert_eq!(f, r, "{}: mutated manifest", p.display());
                        agreed += 1;
                    }
                    // A manifest's header names its schema and partition spec, which the reference parser reads and
                    // the fast decoder does not need: a header mutation can fail the first alone. With the header
                    // untouched, bytes the reference parser refuses are not read by the fast decoder alone.
                    assert!(
                        b.get(..header) != real.get(..header) || reference.is_ok() || fast.is_err(),
                        "{}: mutated manifest the reference refuses read as {:?}",
                        p.display(),
                        fast.map(|f| f.len())
                    );
                    refused_both += usize::from(reference.is_err() && fast.is_err());
                }
            }
        }
        assert_eq!(fast_only_real, paths.len());
        assert!(agreed > 100 && refused_both > 100, "{agreed} {refused_both}");
    }

    /// One flipped bit makes a block's datum count negative (zig-zag: the sign is the first byte's low bit): the
    /// fast decoder refuses it, and with the fallback the reference parser's refusal stands; nothing reads as empty.
    #[test]
    fn a_negative_block_count_is_refused_not_read_as_empty() {
        let (mut lists, mut manifests) = (0, 0);
        for p in fixture_avro_files() {
            let real = std::fs::read(&p).unwrap();
            let (_, header) = read_header(&real).unwrap();
            let mut b = real.clone();
            b[header] ^= 1;
            let Ok(count) = Cursor(&b[header..]).long() else {
                panic!("{}: no block count after the header", p.display());
            };
            assert!(count < 0, "{}: {count}", p.display());
            if p.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                for v in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
                    for d in [Decoder::FastOnly, Decoder::Fast, Decoder::Reference] {
                        let read = manifest_list_entries("l", &b, v, d);
                        assert!(read.is_err(), "{} ({d:?}): {read:?}", p.display());
                    }
                }
                lists += 1;
            } else {
                for d in [Decoder::FastOnly, Decoder::Fast, Decoder::Reference] {
                    let read = files(&b, d);
                    assert!(read.is_err(), "{} ({d:?}): {:?}", p.display(), read.map(|f| f.len()));
                }
                assert!(in_pieces(&b, 7).is_none(), "{}: in pieces", p.display());
                manifests += 1;
            }
        }
        assert!(lists > 5 && manifests > 10, "{lists} {manifests}");
    }

    /// `real` with the datum count of its first block (right after the header at `header`) set to `count`, when
    /// that count is written in as many bytes as the old one (one flipped bit's worth: the file keeps its length).
    fn with_first_count(real: &[u8], header: usize, count: i64) -> Option<Vec<u8>> {
        use integer_encoding::VarInt;
        let (_, old_len) = i64::decode_var(&real[header..])?;
        let new = count.encode_var_vec();
        (new.len() == old_len).then(|| [&real[..header], &new[..], &real[header + old_len..]].concat())
    }

    /// A block count lowered to 0 (one flipped bit for a block of one entry, as PyIceberg writes them) or by one
    /// leaves bytes in the block after its datums: the fast decoder refuses the file instead of handing it to the
    /// reference parser, which read such a file as fewer entries (0: none at all, every later block skipped) at the
    /// same length; the reference parser alone refuses it too (`check_container`), and so does the decoder that
    /// reads a manifest in pieces. Nothing reads as a shorter list.
    #[test]
    fn a_lowered_block_count_is_refused_by_every_decoder_not_read_as_fewer_entries() {
        let (mut lists, mut manifests) = (0, 0);
        for p in fixture_avro_files() {
            let real = std::fs::read(&p).unwrap();
            let (_, header) = read_header(&real).unwrap();
            let count = Cursor(&real[header..]).long().unwrap();
            assert!(count >= 1, "{}: {count}", p.display());
            for lowered in [0, count - 1] {
                let Some(b) = with_first_count(&real, header, lowered) else {
                    continue;
                };
                if b == real {
                    continue;
                }
                if p.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                    for v in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
                        for d in [Decoder::FastOnly, Decoder::Fast, Decoder::Reference] {
                            let read = manifest_list_entries("l.avro", &b, v, d);
                            let e = read.as_ref().map(Vec::len).unwrap_err();
                            assert!(e.to_string().contains("l.avro"), "{} ({d:?}): {e}", p.display());
                        }
                    }
                    lists += 1;
                } else {
                    for d in [Decoder::FastOnly, Decoder::Fast, Decoder::Reference] {
                        let read = files(&b, d);
                        assert!(
                            read.is_err(),
                            "{} ({d:?}, {count} -> {lowered}): {:?}",
                            p.display(),
                            read.map(|f| f.len())
                        );
                    }
                    assert!(in_pieces(&b, 7).is_none(), "{}: in pieces", p.display());
                    manifests += 1;
                }
            }
        }
        assert!(lists > 5 && manifests > 10, "{lists} {manifests}");
    }

    /// Every real manifest's entries, counted by status with their rows, are what its manifest list records for it
    /// (both decoders); a list entry recording one more or one fewer is refused naming the manifest.
    #[test]
    fn manifest_list_counts_agree_with_every_real_manifest_and_a_difference_is_refused() {
        let mut checked = 0;
        for list in fixture_avro_files() {
            if !list.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                continue;
            }
            let bytes = std::fs::read(&list).unwrap();
            let Some(entries) = [FormatVersion::V2, FormatVersion::V1, FormatVersion::V3]
                .into_iter()
                .find_map(|v| manifest_list_entries("l", &bytes, v, Decoder::FastOnly).ok())
            else {
                panic!("{}: unreadable", list.display());
            };
            for e in entries {
                let name = location_file_name(&e.manifest_path);
                let manifest = list.with_file_name(name);
                let Ok(m) = std::fs::read(&manifest) else {
                    continue; // a manifest the fixture does not keep (a broken history on purpose)
                };
                assert!(e.added_files_count.is_some(), "{}: no counts read", list.display());
                for d in [Decoder::FastOnly, Decoder::Reference] {
                    let tally = live_files_tallied("m.avro", &m, d, |_| Ok(()), || {}).unwrap();
                    e.check_counts("m.avro", &tally)
                        .unwrap_or_else(|err| panic!("{} ({d:?}): {err}", manifest.display()));
                    let mut off = e.clone();
                    off.added_files_count = off.added_files_count.map(|n| n + 1);
                    let err = off.check_counts("m.avro", &tally).unwrap_err();
                    assert!(
                        err.to_string().contains("m.avro") && err.to_string().contains("ADDED"),
                        "{err}"
                    );
                    let mut off = e.clone();
                    off.existing_rows_count = off.existing_rows_count.map(|n| n - 1);
                    if off.existing_rows_count.is_some() {
                        assert!(off.check_counts("m.avro", &tally).is_err());
                    }
                }
                checked += 1;
            }
        }
        assert!(checked > 20, "{checked}");
    }

    fn location_file_name(path: &str) -> &str {
        path.rsplit('/').next().unwrap()
    }

    /// The summary's totals: fewer live files or rows than they say is refused naming the snapshot and the list;
    /// equal or more, a total missing or one that does not parse, is not.
    #[test]
    fn fewer_live_files_than_the_summary_totals_is_refused() {
        let snapshot = |props: &[(&str, &str)]| {
            iceberg::spec::Snapshot::builder()
                .with_snapshot_id(7)
                .with_sequence_number(1)
                .with_timestamp_ms(1)
                .with_manifest_list("s3://b/t/metadata/snap-7.avro")
                .with_summary(iceberg::spec::Summary {
                    operation: iceberg::spec::Operation::Append,
                    additional_properties: props.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                })
                .build()
        };
        let found = EntryTally {
            live_data_files: 2,
            live_delete_files: 1,
            live_data_records: 10,
            ..EntryTally::default()
        };
        let list = "metadata/snap-7.avro";
        for props in [
            vec![],
            vec![
                ("total-data-files", "2"),
                ("total-delete-files", "1"),
                ("total-records", "10"),
            ],
            vec![("total-data-files", "1"), ("total-records", "9")],
            vec![("total-data-files", "many"), ("total-records", "-1")],
        ] {
            check_snapshot_totals(&snapshot(&props), list, &found, TotalsRules::default()).unwrap();
        }
        for (key, total) in [
            ("total-data-files", "3"),
            ("total-delete-files", "2"),
            ("total-records", "11"),
        ] {
            let why =
                check_snapshot_totals(&snapshot(&[(key, total)]), list, &found, TotalsRules::default()).unwrap_err();
            assert!(
                why.contains("snapshot 7") && why.contains(list) && why.contains(key),
                "{why}"
            );
            assert!(
                why.contains("summary_excess.\"\"") && why.contains("excess = 1"),
                "{why}"
            );
        }
    }

    /// An excess the configuration accepts passes only when it is exactly the accepted one, on the entry's first
    /// snapshot and its descendants; of two entries of a total on one line the later applies; a snapshot of another
    /// line (a rollback past the bug, then new commits) is not covered whatever its time; once the first snapshot
    /// has left the metadata, the line that led to it keeps the acceptance.
    #[test]
    fn an_accepted_summary_excess_passes_only_exactly_and_down_its_line() {
        let snapshot = |id: i64, ts: i64, total: &str| {
            iceberg::spec::Snapshot::builder()
                .with_snapshot_id(id)
                .with_sequence_number(1)
                .with_timestamp_ms(ts)
                .with_manifest_list("s3://b/t/metadata/snap.avro")
                .with_summary(iceberg::spec::Summary {
                    operation: iceberg::spec::Operation::Append,
                    additional_properties: [("total-data-files".to_owned(), total.to_owned())]
                        .into_iter()
                        .collect(),
                })
                .build()
        };
        let found = EntryTally {
            live_data_files: 10,
            ..EntryTally::default()
        };
        let entry = |snapshot_id: i64, since_ms: i64, excess: u64| AcceptedExcess {
            setting: format!("summary_excess.\"u\"[{snapshot_id}]"),
            snapshot_id,
            since_ms,
            total: "total-data-files".into(),
            excess,
            reason: "writer bug".into(),
        };
        // 1 before the bug; 2 the first that carries it; 3, 4 (a second bug), 5 after; 6 a rollback to 1, then a commit.
        let mut lineage: std::collections::BTreeMap<i64, (i64, Option<i64>)> = [
            (1, (50, None)),
            (2, (100, Some(1))),
            (3, (150, Some(2))),
            (4, (200, Some(3))),
            (5, (250, Some(4))),
            (6, (300, Some(1))),
        ]
        .into_iter()
        .collect();
        let accepted = [entry(2, 100, 2), entry(4, 200, 5)];
        let check = |lineage: &std::collections::BTreeMap<i64, (i64, Option<i64>)>, id: i64, total: &str| {
            let ts = lineage.get(&id).map_or(0, |(t, _)| *t);
            let rules = TotalsRules {
                table_uuid: "u",
                accepted: &accepted,
                lineage: Some(lineage),
            };
            check_snapshot_totals(&snapshot(id, ts, total), "l", &found, rules)
        };
        assert!(check(&lineage, 2, "12").is_ok());
        assert!(check(&lineage, 3, "12").is_ok());
        assert!(check(&lineage, 5, "15").is_ok());
        // Not the exact excess: a list that lost manifests since changes it.
        let why = check(&lineage, 3, "13").unwrap_err();
        assert!(
            why.contains("summary_excess.\"u\"[2] accepts an excess of exactly 2") && why.contains("not 3"),
            "{why}"
        );
        // The later entry applies from its snapshot on: the earlier excess is no longer accepted there.
        assert!(
            check(&lineage, 5, "12")
                .unwrap_err()
                .contains("[4] accepts an excess of exactly 5")
        );
        // Before the first snapshot nothing is accepted.
        assert!(check(&lineage, 1, "12").unwrap_err().contains("excess = 2"));
        // Another line, committed after both entries: not covered, whatever the excess.
        assert!(check(&lineage, 6, "12").unwrap_err().contains("excess = 2"));
        assert!(check(&lineage, 6, "15").unwrap_err().contains("excess = 5"));
        // An equal or higher count needs nothing; without the lineage nothing is accepted.
        assert!(check(&lineage, 6, "10").is_ok());
        let rules = TotalsRules {
            table_uuid: "u",
            accepted: &accepted,
            lineage: None,
        };
        assert!(check_snapshot_totals(&snapshot(3, 150, "12"), "l", &found, rules).is_err());
        // The first snapshots expired (1 and 2 gone): 3's line leaves the metadata after the entry's time, and the
        // entry's first snapshot is gone too: still covered. The rollback line (6, whose parent 1 is gone) was
        // committed after the entry's time as well, but it never led to 2: while 2 is held it is refused; once both
        // are gone it cannot be told apart, and is covered (documented).
        lineage.remove(&1);
        assert!(check(&lineage, 6, "12").is_err(), "2 is still in the metadata");
        lineage.remove(&2);
        assert!(check(&lineage, 3, "12").is_ok());
        assert!(check(&lineage, 5, "15").is_ok());
        // Another total is not covered.
        let other = [AcceptedExcess {
            total: "total-records".into(),
            ..entry(2, 100, 2)
        }];
        let rules = TotalsRules {
            table_uuid: "u",
            accepted: &other,
            lineage: Some(&lineage),
        };
        assert!(check_snapshot_totals(&snapshot(3, 150, "12"), "l", &found, rules).is_err());
    }

    /// `bytes` fed to [`ManifestPieces`] in pieces of `piece` bytes: its live files, or `None` when the fast
    /// decoder gave up or refused the bytes.
    fn in_pieces(bytes: &[u8], piece: usize) -> Option<Vec<LiveFile>> {
        let mut d = ManifestPieces::new("m.avro", Vec::new());
        let mut chunks = bytes.chunks(piece).peekable();
        if chunks.peek().is_none() {
            return d.feed(&[], true).ok()?.then_some(d.sink);
        }
        while let Some(c) = chunks.next() {
            if !d.feed(c, chunks.peek().is_none()).ok()? {
                return None;
            }
        }
        Some(d.sink)
    }

    /// A manifest decoded piece by piece, whatever the pieces' size (down to one byte: every header and block cut
    /// at every point), gives what the whole bytes give; on mutated and truncated bytes it gives up exactly when
    /// the whole-bytes fast decoder does, and otherwise agrees with it.
    #[test]
    fn a_manifest_decoded_in_pieces_equals_it_decoded_whole() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x9ece5);
        let (mut manifests, mut mutated_agreed, mut mutated_refused) = (0, 0, 0);
        for p in fixture_avro_files() {
            if p.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                continue;
            }
            let real = std::fs::read(&p).unwrap();
            let whole = files(&real, Decoder::FastOnly).unwrap();
            for piece in [1, 3, 17, 200, 4096, real.len()] {
                assert_eq!(
                    in_pieces(&real, piece).as_ref(),
                    Some(&whole),
                    "{} in pieces of {piece}",
                    p.display()
                );
            }
            manifests += 1;
            for _ in 0..20 {
                let b = mutated(&real, &mut rng, 2);
                let whole = files(&b, Decoder::FastOnly).ok();
                let piece = rng.gen_range(1..=b.len().max(1));
                assert_eq!(
                    in_pieces(&b, piece),
                    whole,
                    "{}: mutated, in pieces of {piece}",
                    p.display()
                );
                if whole.is_some() {
                    mutated_agreed += 1;
                } else {
                    mutated_refused += 1;
                }
            }
        }
        assert!(manifests > 10, "{manifests}");
        assert!(
            mutated_agreed > 0 && mutated_refused > 0,
            "{mutated_agreed} {mutated_refused}"
        );
    }

    /// A real manifest read from storage in pieces gives the objects its whole bytes give; one whose length is
    /// not the list's, or that is missing, is an error naming it.
    #[tokio::test]
    async fn a_manifest_read_from_storage_in_pieces_gives_its_objects() {
        let (dir, location) = v3_dv_fixture();
        let storage = Storage::new(crate::io::store::StorageOptions::default());
        let manifest = ObjectRef {
            path: "m.avro".into(),
            layer: Layer::Manifest,
            size: 0,
        };
        let mut read = 0;
        for p in fixture_avro_files().iter().filter(|p| p.starts_with(&dir)) {
            if p.file_name().unwrap().to_string_lossy().starts_with("snap-") {
                continue;
            }
            let bytes = std::fs::read(p).unwrap();
            let uri = format!("file://{}", p.display());
            let entry = ListEntry {
                manifest_path: uri.clone(),
                manifest_length: i64::try_from(bytes.len()).unwrap(),
                ..ListEntry::default()
            };
            let whole = manifest_objects(&uri, &bytes, &location, manifest.clone(), Decoder::FastOnly).unwrap();
            for piece in [5, 1000, bytes.len()] {
                let (got, _) = read_manifest_in_pieces(&storage, &uri, &entry, &location, manifest.clone(), piece)
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(got[0].size, bytes.len() as u64);
                assert_eq!(&got[1..], &whole[1..], "{} in pieces of {piece}", p.display());
            }
            let longer = ListEntry {
                manifest_length: entry.manifest_length + 1,
                ..entry.clone()
            };
            let e = read_manifest_in_pieces(&storage, &uri, &longer, &location, manifest.clone(), 64)
                .await
                .unwrap_err();
            assert!(
                e.to_string().contains(&uri) && e.to_string().contains("manifest list records"),
                "{e}"
            );
            read += 1;
        }
        assert!(read > 0);
        let missing = format!("file://{}/no-such-manifest.avro", dir.display());
        let entry = ListEntry {
            manifest_path: missing.clone(),
            manifest_length: 1,
            ..ListEntry::default()
        };
        let e = read_manifest_in_pieces(&storage, &missing, &entry, &location, manifest, 64)
            .await
            .unwrap_err();
        assert!(
            e.to_string().contains(&missing) && e.to_string().contains("does not exist"),
            "{e}"
        );
    }
}
