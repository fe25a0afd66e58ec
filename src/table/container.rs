//! The Avro object container as lakedrill reads it itself: header, blocks, sync markers and deflate, and the
//! framing check every Avro file goes through before apache-avro reads it (`check_container`). Below both the
//! table reader and the fast decoder of `scan`, so that neither imports the other for it.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::avro::AVRO_MAX_ALLOCATION;
use crate::table::entry_program::EntryProgram;

/// Why the fast decoder stopped: bytes it cannot decode (then the reference parser decides), a container whose
/// framing is broken (an error: the reference parser would read such a file with entries missing), or the caller.
#[derive(Debug)]
pub(crate) enum Stop {
    Decode,
    Corrupt(String),
    Caller(Error),
}

impl Stop {
    /// The error a broken container is, naming `uri`; `None` for bytes the reference parser decides on.
    pub(crate) fn into_error(self, uri: &str) -> Option<Error> {
        match self {
            Stop::Decode => None,
            Stop::Corrupt(why) => Some(Error::corrupt(uri, why)),
            Stop::Caller(e) => Some(e),
        }
    }
}

/// The most one array or map in a datum may hold on the fast path (column statistics maps, split
/// offsets); beyond it the reference parser decides.
pub(crate) const MAX_SEQ: usize = 1 << 20;

/// A cursor over Avro bytes: zig-zag longs and length-checked slices.
pub(crate) struct Cursor<'a>(pub(crate) &'a [u8]);

impl<'a> Cursor<'a> {
    pub(crate) fn long(&mut self) -> std::result::Result<i64, Stop> {
        use integer_encoding::VarInt;
        let (v, n) = i64::decode_var(self.0).ok_or(Stop::Decode)?;
        self.0 = &self.0[n..];
        Ok(v)
    }

    pub(crate) fn take(&mut self, n: i64) -> std::result::Result<&'a [u8], Stop> {
        let n = usize::try_from(n).map_err(|_| Stop::Decode)?;
        if n > self.0.len() {
            return Err(Stop::Decode);
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
}

/// What an Avro object container's header says its blocks are read with.
pub(crate) struct Framing {
    pub(crate) schema: Arc<ParsedSchema>,
    pub(crate) sync: [u8; 16],
    pub(crate) deflate: bool,
}

/// How many distinct Avro schemas a [`SchemaCache`] keeps parsed (a table has a few: one per manifest-list
/// layout, one per partition spec and format version of its manifests).
pub(crate) const SCHEMAS_KEPT: usize = 64;

/// A container's schema as the fast decoders read it: for `serde_avro_fast`, and compiled into an
/// [`EntryProgram`] where it is a manifest entry's schema the program reads.
pub(crate) struct ParsedSchema {
    pub(crate) serde: serde_avro_fast::Schema,
    pub(crate) entries: Option<EntryProgram>,
}

pub(crate) type Kept = (Box<[u8]>, Arc<ParsedSchema>);

/// Avro schemas parsed once and shared, kept by their exact text (compared whole, not by a hash). Past
/// [`SCHEMAS_KEPT`] schemas the oldest kept is replaced, so files with broken or hostile schemas cannot stop the
/// table's own from being kept.
pub(crate) struct SchemaCache {
    pub(crate) kept: std::sync::Mutex<(Vec<Kept>, usize)>,
}

impl SchemaCache {
    pub(crate) const fn new() -> Self {
        Self {
            kept: std::sync::Mutex::new((Vec::new(), 0)),
        }
    }

    pub(crate) fn parsed(&self, text: &[u8]) -> std::result::Result<Arc<ParsedSchema>, Stop> {
        let find = |kept: &[Kept]| kept.iter().find(|(t, _)| **t == *text).map(|(_, s)| Arc::clone(s));
        // A poisoned lock (a panic elsewhere while it was held) only loses the cache.
        if let Some(s) = self.kept.lock().ok().and_then(|k| find(&k.0)) {
            return Ok(s);
        }
        let schema: serde_avro_fast::schema::SchemaMut = std::str::from_utf8(text)
            .map_err(|_| Stop::Decode)?
            .parse()
            .map_err(|_| Stop::Decode)?;
        let entries = EntryProgram::compile(&schema);
        let schema = Arc::new(ParsedSchema {
            serde: schema.freeze().map_err(|_| Stop::Decode)?,
            entries,
        });
        if let Ok(mut k) = self.kept.lock()
            && find(&k.0).is_none()
        {
            let (kept, next) = &mut *k;
            let entry = (text.into(), Arc::clone(&schema));
            if kept.len() < SCHEMAS_KEPT {
                kept.push(entry);
            } else {
                kept[*next] = entry;
                *next = (*next + 1) % SCHEMAS_KEPT;
            }
        }
        Ok(schema)
    }
}

/// The Avro schema written as `text`, parsed once per process: every manifest of a table carries the same
/// schema of a few kilobytes, and parsing it for each of 2,000 files was 7 % of a 1,000-snapshot `plan`.
pub(crate) fn parsed_schema(text: &[u8]) -> std::result::Result<Arc<ParsedSchema>, Stop> {
    static SCHEMAS: SchemaCache = SchemaCache::new();
    SCHEMAS.parsed(text)
}

/// An Avro object container's header as written: its schema's text, its codec's name, its sync marker, and how
/// many bytes the header took.
pub(crate) struct RawHeader<'a> {
    pub(crate) schema: &'a [u8],
    pub(crate) codec: &'a [u8],
    pub(crate) sync: [u8; 16],
    pub(crate) len: usize,
}

/// Reads the header of an Avro object container at the start of `bytes`: its framing and how many bytes the
/// header took. Codecs other than `null` and `deflate` are left to the reference parser.
pub(crate) fn read_header(bytes: &[u8]) -> std::result::Result<(Framing, usize), Stop> {
    let raw = read_raw_header(bytes)?;
    let schema = parsed_schema(raw.schema)?;
    let deflate = match raw.codec {
        b"null" => false,
        b"deflate" => true,
        _ => return Err(Stop::Decode),
    };
    Ok((
        Framing {
            schema,
            sync: raw.sync,
            deflate,
        },
        raw.len,
    ))
}

/// Reads the header of an Avro object container without parsing its schema or judging its codec.
pub(crate) fn read_raw_header(bytes: &[u8]) -> std::result::Result<RawHeader<'_>, Stop> {
    let mut c = Cursor(bytes.strip_prefix(b"Obj\x01").ok_or(Stop::Decode)?);
    // Header metadata: a map of bytes, in blocks (a negative count is followed by the block's byte size).
    let (mut schema, mut codec): (Option<&[u8]>, &[u8]) = (None, b"null");
    loop {
        let mut count = c.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            count = count.checked_neg().ok_or(Stop::Decode)?;
            c.long()?;
        }
        for _ in 0..count {
            let key_len = c.long()?;
            let key = c.take(key_len)?;
            let value_len = c.long()?;
            let value = c.take(value_len)?;
            match key {
                b"avro.schema" => schema = Some(value),
                b"avro.codec" => codec = value,
                _ => {}
            }
        }
    }
    let sync: [u8; 16] = c.take(16)?.try_into().map_err(|_| Stop::Decode)?;
    Ok(RawHeader {
        schema: schema.ok_or(Stop::Decode)?,
        codec,
        sync,
        len: bytes.len() - c.0.len(),
    })
}

/// Decodes every whole block at the start of `bytes` (which follow a header read by [`read_header`]), each datum
/// handed to `each`; returns how many bytes those blocks took. With `last`, `bytes` run to the container's end and
/// must be whole blocks; otherwise a block that `bytes` cut short is left, undecoded, for a call with more bytes
/// (a container read piece by piece, #24).
pub(crate) fn read_blocks(
    framing: &Framing,
    bytes: &[u8],
    last: bool,
    mut each_block: impl FnMut(&[u8], i64) -> std::result::Result<(), Stop>,
) -> std::result::Result<usize, Stop> {
    let mut c = Cursor(bytes);
    // One decompressor per call, inflating every block into one buffer kept across blocks: PyIceberg writes one
    // deflate block per manifest entry, and a decoder built per block was a quarter of the decode. libdeflate
    // inflates a whole block in one call, each from its own bytes alone; it took 0.13 s where zlib-rs (through
    // flate2's streaming decoder) took 0.18 s on a 1,000-snapshot PyIceberg history's blocks.
    let mut inflater = framing.deflate.then(libdeflater::Decompressor::new);
    let mut inflated = Vec::new();
    while !c.0.is_empty() {
        let at = bytes.len() - c.0.len();
        let (count, raw) = match next_block(&mut c, &framing.sync) {
            Ok(b) => b,
            // Cut short here: a later call with the rest decides.
            Err(Frame::Short) if !last => return Ok(at),
            // Broken framing is never a reason to hand the bytes to the reference parser, which reads such a file
            // with entries missing: the container is refused.
            Err(f) => return Err(Stop::Corrupt(f.describe(at))),
        };
        let block: &[u8] = if let Some(inflater) = inflater.as_mut() {
            inflate_block(inflater, raw, &mut inflated)?
        } else {
            raw
        };
        each_block(block, count)?;
    }
    Ok(bytes.len())
}

/// Checks the framing of an Avro object container that the reference parser (apache-avro, under the iceberg crate)
/// is about to read, and refuses what it would misread. apache-avro ends a file at a block whose datum count is 0
/// or whose count cannot be read whole, and never looks at the bytes a block has left after its datums: a count
/// lowered by one flipped bit reads as fewer entries (1 → 0: none, and every later block is skipped) from a file of
/// the same length, which no length check sees. Here the file must be whole blocks to its last byte, each ending
/// with the sync marker, each with a datum count above 0 (an empty block of 0 at the very end aside), and the
/// block's datums, decoded by apache-avro's own datum decoder, must take exactly its bytes.
///
/// A header, schema or codec this cannot read is left to the parser, whose error stands.
///
/// # Errors
/// [`Error::Corrupt`] naming `uri` and the block.
pub(crate) fn check_container(uri: &str, bytes: &[u8]) -> Result<()> {
    use std::str::FromStr;
    // Before anything of apache-avro runs: its first use fixes the process-wide allocation bound.
    crate::io::avro::bound_avro_allocations();
    let Ok(header) = read_raw_header(bytes) else {
        return Ok(());
    };
    let (Ok(schema), Ok(codec)) = (std::str::from_utf8(header.schema), std::str::from_utf8(header.codec)) else {
        return Ok(());
    };
    let (Ok(schema), Ok(codec)) = (
        apache_avro::Schema::parse_str(schema),
        apache_avro::Codec::from_str(codec),
    ) else {
        return Ok(());
    };
    let body = &bytes[header.len..];
    let mut c = Cursor(body);
    let mut inflater = None;
    let mut inflated = Vec::new();
    while !c.0.is_empty() {
        let at = body.len() - c.0.len();
        let (count, raw) = next_block(&mut c, &header.sync).map_err(|f| Error::corrupt(uri, f.describe(at)))?;
        if count == 0 {
            if raw.is_empty() && c.0.is_empty() {
                break;
            }
            return Err(Error::corrupt(
                uri,
                format!(
                    "the Avro block {at} bytes after the header holds 0 datums: Avro readers end the file there, so \
                     what follows it would not be read"
                ),
            ));
        }
        let decompressed;
        let block: &[u8] = match codec {
            apache_avro::Codec::Null => raw,
            apache_avro::Codec::Deflate(_) => inflate_block(
                inflater.get_or_insert_with(libdeflater::Decompressor::new),
                raw,
                &mut inflated,
            )
            .map_err(|_| {
                Error::corrupt(
                    uri,
                    format!(
                        "the deflate block {at} bytes after the Avro header cannot be inflated (or inflates \
                                 to more than {AVRO_MAX_ALLOCATION} bytes)"
                    ),
                )
            })?,
            other => {
                let mut v = raw.to_vec();
                other.decompress(&mut v).map_err(|e| {
                    Error::corrupt(
                        uri,
                        format!("the Avro block {at} bytes after the header cannot be decompressed: {e}"),
                    )
                })?;
                decompressed = v;
                &decompressed
            }
        };
        let mut rest = block;
        for i in 0..count {
            apache_avro::from_avro_datum(&schema, &mut rest, None).map_err(|e| {
                Error::corrupt(
                    uri,
                    format!(
                        "datum {} of the {count} the Avro block {at} bytes after the header holds cannot be decoded: \
                         {e}",
                        i + 1
                    ),
                )
            })?;
        }
        if !rest.is_empty() {
            let Some(e) = leftover(rest.len(), count).into_error(uri) else {
                return Err(Error::Internal("a leftover is an error".into()));
            };
            return Err(e);
        }
    }
    Ok(())
}

/// Why a block's framing could not be read.
#[derive(Debug)]
pub(crate) enum Frame {
    /// The bytes end inside the block.
    Short,
    /// The block is not what a writer writes.
    Broken(String),
}

impl Frame {
    /// What is wrong with the block at `at` bytes after the container's header.
    pub(crate) fn describe(self, at: usize) -> String {
        match self {
            Frame::Short => format!(
                "the Avro container ends inside the block {at} bytes after its header: it is cut short (a file must \
                 end right after a whole block)"
            ),
            Frame::Broken(why) => format!("the Avro block {at} bytes after the header {why}"),
        }
    }
}

/// The next block at `c`: its datum count and its bytes as written (compressed), `c` moved past its sync marker.
pub(crate) fn next_block<'a>(c: &mut Cursor<'a>, sync: &[u8; 16]) -> std::result::Result<(i64, &'a [u8]), Frame> {
    let count = c.long().map_err(|_| Frame::Short)?;
    let size = c.long().map_err(|_| Frame::Short)?;
    if size < 0 {
        return Err(Frame::Broken(format!("has a negative byte size ({size})")));
    }
    let raw = c.take(size).map_err(|_| Frame::Short)?;
    let marker = c.take(16).map_err(|_| Frame::Short)?;
    if marker != sync {
        return Err(Frame::Broken(
            "does not end with the container's sync marker".to_owned(),
        ));
    }
    // A block's datum count is never negative in an object container (the spec's "a long indicating the count of
    // objects in this block"; apache-avro and Java refuse one): read as `0..count`, a flipped sign bit would make a
    // manifest list or manifest read as empty, and the closure smaller. See:
    // https://avro.apache.org/docs/1.11.1/specification/#object-container-files
    if count < 0 {
        return Err(Frame::Broken(format!("has a negative datum count ({count})")));
    }
    Ok((count, raw))
}

/// The refusal of a block with bytes left after its `count` datums: its count was lowered (one flipped bit takes 1
/// to 0), or a datum is not what was written. apache-avro never looks at those bytes, and reads a count of 0 as the
/// end of the file, so such a file read with fewer entries, none at all for a count of 0, at the same length.
pub(crate) fn leftover(rest: usize, count: i64) -> Stop {
    Stop::Corrupt(format!(
        "an Avro block has {rest} byte(s) left after its {count} datum(s): its datum count is not the number of \
         entries written (a lowered count makes Avro readers drop entries)"
    ))
}

/// The buffer a block is first inflated into, as a multiple of its deflated size (and at least
/// [`INFLATE_MIN`]); a block that needs more is inflated again into one twice as large, up to the bound.
pub(crate) const INFLATE_RATIO: usize = 8;
pub(crate) const INFLATE_MIN: usize = 64 << 10;

/// Inflates one deflate block of an Avro container with `inflater`, into `out` (grown as needed and kept, with
/// its size, for the next block), and returns the inflated bytes: the block inflates from its own bytes alone,
/// to at most [`AVRO_MAX_ALLOCATION`] bytes whatever blocks came before; bytes after the end of its deflate
/// stream are ignored (as zlib does).
pub(crate) fn inflate_block<'o>(
    inflater: &mut libdeflater::Decompressor,
    raw: &[u8],
    out: &'o mut Vec<u8>,
) -> std::result::Result<&'o [u8], Stop> {
    let limit = AVRO_MAX_ALLOCATION;
    // libdeflate needs the whole output buffer up front; one byte past the bound tells an over-long block.
    let mut room = out
        .len()
        .max(raw.len().saturating_mul(INFLATE_RATIO))
        .max(INFLATE_MIN)
        .min(limit + 1);
    loop {
        if out.len() < room {
            out.resize(room, 0);
        }
        match inflater.deflate_decompress(raw, &mut out[..room]) {
            Ok(n) if n <= limit => return Ok(&out[..n]),
            Err(libdeflater::DecompressionError::InsufficientSpace) if room <= limit => {
                room = room.saturating_mul(2).min(limit + 1);
            }
            Ok(_) | Err(_) => return Err(Stop::Decode),
        }
    }
}
