//! Manifest entries read straight from their Avro bytes by a program compiled from the writer's schema.
//!
//! A walk needs nine fields of each manifest entry (`status` and eight of `data_file`); a Spark-written entry
//! carries, besides, six maps of per-column statistics, split offsets and the partition tuple. `serde_avro_fast`
//! reads every one of those through serde's visitors (each record field named and matched, each ignored value
//! visited), which was two thirds of `plan`'s decoding on a 1,000-snapshot Spark history. The writer's schema
//! says how long every value is, so the program compiled here passes over what the walk does not read by its
//! encoding alone (a fixed-size run of bytes, a varint, a length-prefixed run, a block of items) and reads the
//! nine fields where they stand.
//!
//! The program is only a faster path: a schema it does not compile to (a field of an unexpected type, a
//! required field missing, a duplicated name, nesting deeper than 32 levels) leaves the entries to
//! `serde_avro_fast`, and bytes it cannot read (truncated, a varint too long, an out-of-range union branch, a
//! string that is not UTF-8, more than [`MAX_SEQ`] items in an array or map) stop it like any fast-decoder
//! failure, so that the iceberg crate's parser decides (see [`crate::table::scan`]).

use serde_avro_fast::schema::{RegularType, SchemaKey, SchemaMut};

/// The deepest nesting of schema nodes a program is compiled for (Iceberg's manifest entries nest four deep).
const DEPTH: usize = 32;

/// The most items one array or map may hold (as `serde_avro_fast`'s `max_seq_size` bounds it on the serde path).
pub const MAX_SEQ: u64 = 1 << 20;

/// The bytes could not be read as the schema says (the caller's reference parser decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

type R<T> = std::result::Result<T, Unreadable>;

/// How to pass over a value of one schema node without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Skip {
    /// A value of exactly this many bytes: null (0), boolean (1), float (4), double (8), a fixed, or a record of
    /// only such values.
    Bytes(usize),
    /// A zig-zag varint: an int, a long or an enum's index.
    Varint,
    /// A length-prefixed run of bytes: bytes or a string.
    Sized,
    /// An array of these items, in blocks.
    Array(Box<Skip>),
    /// A map (string keys) of these values, in blocks.
    Map(Box<Skip>),
    /// A union: a branch index, then a value of that branch.
    Union(Box<[Skip]>),
    /// A record: its fields in order.
    Record(Box<[Skip]>),
}

/// How an optional field of the entry is written: a bare value, or a union of null and the value either way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opt {
    Bare,
    NullFirst,
    NullSecond,
}

/// A field of `data_file`, in the writer's order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DataField {
    Skip(Skip),
    Content,
    FilePath,
    FileFormat,
    RecordCount,
    FileSize,
    FirstRowId(Opt),
    ReferencedDataFile(Opt),
    ContentOffset(Opt),
    ContentSize(Opt),
}

/// A field of the manifest entry, in the writer's order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum EntryField {
    Skip(Skip),
    Status,
    DataFile(Box<[DataField]>),
}

/// The program that reads one manifest entry of one writer schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryProgram {
    fields: Box<[EntryField]>,
}

/// The fields of a manifest entry a walk reads, strings borrowed from the decoded block.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry<'a> {
    /// `status`: 0 EXISTING, 1 ADDED, 2 DELETED.
    pub status: i32,
    /// `data_file.content` (0 where the schema has none: a v1 manifest).
    pub content: i32,
    /// `data_file.file_path`.
    pub file_path: &'a str,
    /// `data_file.file_format`.
    pub file_format: &'a str,
    /// `data_file.record_count`.
    pub record_count: i64,
    /// `data_file.file_size_in_bytes`.
    pub file_size_in_bytes: i64,
    /// `data_file.first_row_id` (v3).
    pub first_row_id: Option<i64>,
    /// `data_file.referenced_data_file` (v3 deletion vectors).
    pub referenced_data_file: Option<&'a str>,
    /// `data_file.content_offset` (v3 deletion vectors).
    pub content_offset: Option<i64>,
    /// `data_file.content_size_in_bytes` (v3 deletion vectors).
    pub content_size_in_bytes: Option<i64>,
}

fn skip_of(schema: &SchemaMut, key: SchemaKey, depth: usize) -> Option<Skip> {
    if depth > DEPTH {
        return None;
    }
    Some(match &schema.nodes().get(key.idx())?.type_ {
        RegularType::Null => Skip::Bytes(0),
        RegularType::Boolean => Skip::Bytes(1),
        RegularType::Int | RegularType::Long | RegularType::Enum(_) => Skip::Varint,
        RegularType::Float => Skip::Bytes(4),
        RegularType::Double => Skip::Bytes(8),
        RegularType::Bytes | RegularType::String => Skip::Sized,
        RegularType::Fixed(f) => Skip::Bytes(f.size),
        RegularType::Array(a) => Skip::Array(Box::new(skip_of(schema, a.items, depth + 1)?)),
        RegularType::Map(m) => Skip::Map(Box::new(skip_of(schema, m.values, depth + 1)?)),
        RegularType::Union(u) => Skip::Union(
            u.variants
                .iter()
                .map(|v| skip_of(schema, *v, depth + 1))
                .collect::<Option<_>>()?,
        ),
        RegularType::Record(r) => {
            let fields: Vec<Skip> = r
                .fields
                .iter()
                .map(|f| skip_of(schema, f.type_, depth + 1))
                .collect::<Option<_>>()?;
            let fixed: Option<usize> = fields.iter().try_fold(0_usize, |n, f| match f {
                Skip::Bytes(k) => n.checked_add(*k),
                _ => None,
            });
            match fixed {
                Some(n) => Skip::Bytes(n),
                None => Skip::Record(fields.into()),
            }
        }
    })
}

fn node(schema: &SchemaMut, key: SchemaKey) -> Option<&RegularType> {
    schema.nodes().get(key.idx()).map(|n| &n.type_)
}

/// An int or a long (one encoding: a zig-zag varint).
fn is_integer(schema: &SchemaMut, key: SchemaKey) -> bool {
    matches!(node(schema, key), Some(RegularType::Int | RegularType::Long))
}

/// A string or bytes (one encoding: a length-prefixed run).
fn is_text(schema: &SchemaMut, key: SchemaKey) -> bool {
    matches!(node(schema, key), Some(RegularType::String | RegularType::Bytes))
}

/// How an optional field of type `want` is written, if it is written one of the ways [`Opt`] reads.
fn optional(schema: &SchemaMut, key: SchemaKey, want: fn(&SchemaMut, SchemaKey) -> bool) -> Option<Opt> {
    if want(schema, key) {
        return Some(Opt::Bare);
    }
    let Some(RegularType::Union(u)) = node(schema, key) else {
        return None;
    };
    let null = |k: &SchemaKey| matches!(node(schema, *k), Some(RegularType::Null));
    match u.variants.as_slice() {
        [a, b] if null(a) && want(schema, *b) => Some(Opt::NullFirst),
        [a, b] if want(schema, *a) && null(b) => Some(Opt::NullSecond),
        _ => None,
    }
}

/// The fields of the record at `key`, in the writer's order, each compiled by `field` from its name and type, and
/// the names seen; `None` when the node is not a record, a name repeats or a field does not compile.
fn record<F>(
    schema: &SchemaMut,
    key: SchemaKey,
    mut field: impl FnMut(&str, SchemaKey) -> Option<F>,
) -> Option<(Box<[F]>, std::collections::HashSet<&str>)> {
    let Some(RegularType::Record(r)) = node(schema, key) else {
        return None;
    };
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(r.fields.len());
    for f in &r.fields {
        if !seen.insert(f.name.as_str()) {
            return None;
        }
        out.push(field(&f.name, f.type_)?);
    }
    Some((out.into(), seen))
}

fn data_fields(schema: &SchemaMut, key: SchemaKey) -> Option<Box<[DataField]>> {
    let (fields, seen) = record(schema, key, |name, t| {
        Some(match name {
            "content" => is_integer(schema, t).then_some(DataField::Content)?,
            "file_path" => is_text(schema, t).then_some(DataField::FilePath)?,
            "file_format" => is_text(schema, t).then_some(DataField::FileFormat)?,
            "record_count" => is_integer(schema, t).then_some(DataField::RecordCount)?,
            "file_size_in_bytes" => is_integer(schema, t).then_some(DataField::FileSize)?,
            "first_row_id" => DataField::FirstRowId(optional(schema, t, is_integer)?),
            "referenced_data_file" => DataField::ReferencedDataFile(optional(schema, t, is_text)?),
            "content_offset" => DataField::ContentOffset(optional(schema, t, is_integer)?),
            "content_size_in_bytes" => DataField::ContentSize(optional(schema, t, is_integer)?),
            _ => DataField::Skip(skip_of(schema, t, 2)?),
        })
    })?;
    ["file_path", "file_format", "record_count", "file_size_in_bytes"]
        .iter()
        .all(|n| seen.contains(n))
        .then_some(fields)
}

impl EntryProgram {
    /// The program for manifest entries written with `schema`, or `None` when it does not compile to one (the
    /// entries are then read through serde).
    #[must_use]
    pub fn compile(schema: &SchemaMut) -> Option<Self> {
        let (fields, seen) = record(schema, SchemaKey::root(), |name, t| {
            Some(match name {
                "status" => is_integer(schema, t).then_some(EntryField::Status)?,
                "data_file" => EntryField::DataFile(data_fields(schema, t)?),
                _ => EntryField::Skip(skip_of(schema, t, 1)?),
            })
        })?;
        (seen.contains("status") && seen.contains("data_file")).then_some(Self { fields })
    }

    /// Reads one entry from the front of `bytes`, advancing past it.
    ///
    /// # Errors
    /// [`Unreadable`] when the bytes are not an entry of this schema.
    pub fn read<'a>(&self, bytes: &mut &'a [u8]) -> R<Entry<'a>> {
        let mut c = Cursor(bytes);
        let mut e = Entry::default();
        for f in &self.fields {
            match f {
                EntryField::Skip(s) => c.skip(s)?,
                EntryField::Status => e.status = c.int()?,
                EntryField::DataFile(fields) => {
                    for f in fields {
                        match f {
                            DataField::Skip(s) => c.skip(s)?,
                            DataField::Content => e.content = c.int()?,
                            DataField::FilePath => e.file_path = c.text()?,
                            DataField::FileFormat => e.file_format = c.text()?,
                            DataField::RecordCount => e.record_count = c.long()?,
                            DataField::FileSize => e.file_size_in_bytes = c.long()?,
                            DataField::FirstRowId(o) => e.first_row_id = c.optional(*o, Cursor::long)?,
                            DataField::ReferencedDataFile(o) => {
                                e.referenced_data_file = c.optional(*o, Cursor::text)?;
                            }
                            DataField::ContentOffset(o) => e.content_offset = c.optional(*o, Cursor::long)?,
                            DataField::ContentSize(o) => e.content_size_in_bytes = c.optional(*o, Cursor::long)?,
                        }
                    }
                }
            }
        }
        *bytes = c.0;
        Ok(e)
    }
}

/// Where the program stands in a block's bytes.
struct Cursor<'a, 'b>(&'b mut &'a [u8]);

impl<'a> Cursor<'a, '_> {
    fn advance(&mut self, n: usize) -> R<()> {
        *self.0 = self.0.get(n..).ok_or(Unreadable)?;
        Ok(())
    }

    /// A varint of at most ten bytes (64 bits).
    fn varint(&mut self) -> R<u64> {
        let mut v = 0_u64;
        for (i, b) in self.0.iter().take(10).enumerate() {
            if i == 9 && *b > 1 {
                return Err(Unreadable);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                *self.0 = &self.0[i + 1..];
                return Ok(v);
            }
        }
        Err(Unreadable)
    }

    fn long(&mut self) -> R<i64> {
        let v = self.varint()?;
        #[allow(clippy::cast_possible_wrap)] // zig-zag: the shifted value fits in 63 bits
        let half = (v >> 1) as i64;
        Ok(half ^ -i64::from(u8::from(v & 1 == 1)))
    }

    fn int(&mut self) -> R<i32> {
        i32::try_from(self.long()?).map_err(|_| Unreadable)
    }

    fn len(&mut self) -> R<usize> {
        usize::try_from(self.long()?).map_err(|_| Unreadable)
    }

    fn text(&mut self) -> R<&'a str> {
        let n = self.len()?;
        let s: &'a [u8] = self.0.get(..n).ok_or(Unreadable)?;
        *self.0 = &self.0[n..];
        std::str::from_utf8(s).map_err(|_| Unreadable)
    }

    fn optional<T>(&mut self, o: Opt, read: fn(&mut Self) -> R<T>) -> R<Option<T>> {
        let present = match o {
            Opt::Bare => true,
            Opt::NullFirst | Opt::NullSecond => match (self.long()?, o) {
                (0, Opt::NullFirst) | (1, Opt::NullSecond) => false,
                (1, Opt::NullFirst) | (0, Opt::NullSecond) => true,
                _ => return Err(Unreadable),
            },
        };
        if present { read(self).map(Some) } else { Ok(None) }
    }

    fn skip(&mut self, s: &Skip) -> R<()> {
        match s {
            Skip::Bytes(n) => self.advance(*n),
            Skip::Varint => self.varint().map(drop),
            Skip::Sized => {
                let n = self.len()?;
                self.advance(n)
            }
            Skip::Array(item) => self.blocks(item, false),
            Skip::Map(value) => self.blocks(value, true),
            Skip::Union(branches) => {
                let i = usize::try_from(self.long()?).map_err(|_| Unreadable)?;
                self.skip(branches.get(i).ok_or(Unreadable)?)
            }
            Skip::Record(fields) => fields.iter().try_for_each(|f| self.skip(f)),
        }
    }

    /// The blocks of an array (or of a map: each item after its string key), up to the empty block; at most
    /// [`MAX_SEQ`] items in all. A block written with its byte size is passed over by it.
    fn blocks(&mut self, item: &Skip, keyed: bool) -> R<()> {
        let mut total = 0_u64;
        loop {
            let count = self.long()?;
            if count == 0 {
                return Ok(());
            }
            total = total.checked_add(count.unsigned_abs()).ok_or(Unreadable)?;
            if total > MAX_SEQ {
                return Err(Unreadable);
            }
            if count < 0 {
                let size = self.len()?;
                self.advance(size)?;
                continue;
            }
            match (item, keyed) {
                // Items of one size (zero for nulls): the whole block at once, never a loop of empty steps.
                (Skip::Bytes(n), false) => {
                    let n = usize::try_from(count)
                        .ok()
                        .and_then(|c| c.checked_mul(*n))
                        .ok_or(Unreadable)?;
                    self.advance(n)?;
                }
                _ => {
                    for _ in 0..count {
                        if keyed {
                            self.skip(&Skip::Sized)?;
                        }
                        self.skip(item)?;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn compiled(schema: &str) -> Option<EntryProgram> {
        EntryProgram::compile(&schema.parse::<SchemaMut>().unwrap())
    }

    const ENTRY: &str = r#"{"type":"record","name":"manifest_entry","fields":[
        {"name":"status","type":"int"},
        {"name":"snapshot_id","type":["null","long"]},
        {"name":"data_file","type":{"type":"record","name":"r2","fields":[
            {"name":"content","type":"int"},
            {"name":"file_path","type":"string"},
            {"name":"file_format","type":"string"},
            {"name":"partition","type":{"type":"record","name":"r102","fields":[
                {"name":"d","type":["null","int"]}, {"name":"flag","type":"boolean"}]}},
            {"name":"record_count","type":"long"},
            {"name":"file_size_in_bytes","type":"long"},
            {"name":"column_sizes","type":["null",{"type":"array","items":{"type":"record","name":"k117_v118",
                "fields":[{"name":"key","type":"int"},{"name":"value","type":"long"}]}}]},
            {"name":"lower_bounds","type":["null",{"type":"map","values":"bytes"}]},
            {"name":"nulls","type":{"type":"array","items":"null"}},
            {"name":"key_metadata","type":["null",{"type":"fixed","name":"f","size":3}]},
            {"name":"first_row_id","type":["long","null"]},
            {"name":"referenced_data_file","type":["null","string"]}]}}]}"#;

    fn zz(v: i64) -> Vec<u8> {
        use integer_encoding::VarInt;
        v.encode_var_vec()
    }

    fn text(s: &str) -> Vec<u8> {
        let mut out = zz(i64::try_from(s.len()).unwrap());
        out.extend(s.as_bytes());
        out
    }

    /// One entry of [`ENTRY`], its parts as written.
    fn entry_bytes(path: &str, negative_block: bool) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(zz(1)); // status ADDED
        b.extend(zz(1)); // snapshot_id: long
        b.extend(zz(-77));
        b.extend(zz(0)); // content
        b.extend(text(path));
        b.extend(text("PARQUET"));
        b.extend(zz(1)); // partition.d: int
        b.extend(zz(20_000));
        b.push(1); // partition.flag
        b.extend(zz(12)); // record_count
        b.extend(zz(4096)); // file_size_in_bytes
        b.extend(zz(1)); // column_sizes: array
        if negative_block {
            let items: Vec<u8> = [zz(1), zz(300), zz(2), zz(400)].concat();
            b.extend(zz(-2));
            b.extend(zz(i64::try_from(items.len()).unwrap()));
            b.extend(items);
        } else {
            b.extend(zz(2));
            b.extend([zz(1), zz(300), zz(2), zz(400)].concat());
        }
        b.extend(zz(0));
        b.extend(zz(1)); // lower_bounds: map
        b.extend(zz(1));
        b.extend(text("1"));
        b.extend(text("\u{0}\u{1}"));
        b.extend(zz(0));
        b.extend(zz(1_000)); // nulls: 1,000 nulls, no bytes
        b.extend(zz(0));
        b.extend(zz(1)); // key_metadata: fixed
        b.extend([9, 9, 9]);
        b.extend(zz(0)); // first_row_id: long (first branch)
        b.extend(zz(5));
        b.extend(zz(0)); // referenced_data_file: null
        b
    }

    #[test]
    fn reads_the_walks_fields_and_passes_over_the_rest_of_each_entry() {
        let p = compiled(ENTRY).unwrap();
        for negative_block in [false, true] {
            let bytes = [
                entry_bytes("s3://b/t/data/a.parquet", negative_block),
                entry_bytes("x", negative_block),
            ]
            .concat();
            let mut rest = bytes.as_slice();
            let a = p.read(&mut rest).unwrap();
            assert_eq!(
                a,
                Entry {
                    status: 1,
                    content: 0,
                    file_path: "s3://b/t/data/a.parquet",
                    file_format: "PARQUET",
                    record_count: 12,
                    file_size_in_bytes: 4096,
                    first_row_id: Some(5),
                    referenced_data_file: None,
                    content_offset: None,
                    content_size_in_bytes: None,
                }
            );
            assert_eq!(p.read(&mut rest).unwrap().file_path, "x");
            assert!(rest.is_empty(), "{} bytes left", rest.len());
            // Cut anywhere, an entry is unreadable, never misread.
            let one = entry_bytes("abc", negative_block);
            for cut in 0..one.len() {
                let mut short = &one[..cut];
                assert_eq!(p.read(&mut short), Err(Unreadable), "cut at {cut}");
            }
        }
    }

    #[test]
    fn bad_bytes_are_unreadable() {
        let p = compiled(ENTRY).unwrap();
        let good = entry_bytes("p", false);
        // An out-of-range union branch for snapshot_id.
        let mut b = good.clone();
        b[1] = 4;
        assert_eq!(p.read(&mut b.as_slice()), Err(Unreadable));
        // A status beyond an int.
        let mut b = zz(i64::from(i32::MAX) + 1);
        b.extend(&good[1..]);
        assert_eq!(p.read(&mut b.as_slice()), Err(Unreadable));
        // An eleven-byte varint.
        let mut b = vec![0xff; 10];
        b.push(0);
        b.extend(&good[1..]);
        assert_eq!(p.read(&mut b.as_slice()), Err(Unreadable));
        // A path that is not UTF-8.
        let mut b = entry_bytes("\u{e9}", false);
        let at = b.windows(2).position(|w| w == [0xc3, 0xa9]).unwrap();
        b[at] = 0xff;
        assert_eq!(p.read(&mut b.as_slice()), Err(Unreadable));
        // More than MAX_SEQ items (nulls: no bytes each, so only the bound stops them).
        let mut b = good.clone();
        let at = b.windows(3).position(|w| w == [0xd0, 0x0f, 0x00]).unwrap();
        b.splice(at..at + 2, zz(i64::try_from(MAX_SEQ).unwrap() + 1));
        assert_eq!(p.read(&mut b.as_slice()), Err(Unreadable));
    }

    #[test]
    fn schemas_it_does_not_read_are_left_to_serde() {
        assert!(compiled(ENTRY).is_some());
        // A field the walk reads, of another type.
        assert!(
            compiled(&ENTRY.replace(
                r#""name":"file_path","type":"string""#,
                r#""name":"file_path","type":"long""#
            ))
            .is_none()
        );
        assert!(
            compiled(&ENTRY.replace(r#""name":"status","type":"int""#, r#""name":"status","type":"string""#)).is_none()
        );
        assert!(compiled(&ENTRY.replace(r#"["long","null"]"#, r#"["long","string"]"#)).is_none());
        // A required field missing.
        assert!(compiled(&ENTRY.replace(r#""name":"record_count""#, r#""name":"rows""#)).is_none());
        assert!(compiled(&ENTRY.replace(r#""name":"status""#, r#""name":"state""#)).is_none());
        // Not a record.
        assert!(compiled(r#""long""#).is_none());
        // Optional fields absent: v1/v2 entries; an int where a long is read: one encoding.
        let v1 = ENTRY
            .replace(r#"{"name":"content","type":"int"},"#, "")
            .replace(r#"{"name":"first_row_id","type":["long","null"]},"#, "");
        assert!(compiled(&v1).is_some(), "{v1}");
        assert!(
            compiled(&ENTRY.replace(
                r#""name":"record_count","type":"long""#,
                r#""name":"record_count","type":"int""#
            ))
            .is_some()
        );
    }
}
