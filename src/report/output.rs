//! What a command hands back to the binary: an exit verdict, a JSON document and human text.

use serde::Serialize;

use crate::error::{Error, Result};

/// The verdict of a command that could decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Verified, accepted (exit 0).
    Ok,
    /// Findings, refused (exit 1).
    Findings,
    /// Could not decide, with a document saying why and what was known (exit 2). Most "could not decide"
    /// paths are an `Err`; this one keeps the rest of a report (`gates` without `--trust`).
    Undecided,
}

impl Verdict {
    /// The process exit code: 0, 1 or 2 (2, "could not decide", is also every `Err`).
    #[must_use]
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Ok => 0,
            Verdict::Findings => 1,
            Verdict::Undecided => 2,
        }
    }
}

/// A command's result.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Exit verdict.
    pub verdict: Verdict,
    /// The `--json` document; without the keys of [`Outcome::deferred`].
    pub json: serde_json::Value,
    /// Human-readable text.
    pub human: String,
    /// Long arrays at the top of the document kept as typed elements until it is written ([`Elements`]), by key;
    /// [`Outcome::materialize`] puts them into `json`. Only the binary's own dispatch leaves any here.
    pub deferred: Vec<(String, std::sync::Arc<dyn Elements>)>,
}

impl Outcome {
    /// An outcome from a serializable value and its human rendering.
    ///
    /// # Errors
    /// [`Error::Internal`] if the value cannot be serialized.
    pub fn new(verdict: Verdict, value: &impl Serialize, human: String) -> Result<Self> {
        Ok(Self {
            verdict,
            json: serde_json::to_value(value).map_err(serializing)?,
            human,
            deferred: Vec::new(),
        })
    }

    /// The same outcome with every deferred array in `json`.
    ///
    /// # Errors
    /// [`Error::Internal`] if an element cannot be serialized, or `json` is not an object.
    pub fn materialize(mut self) -> Result<Self> {
        for (key, elements) in std::mem::take(&mut self.deferred) {
            let values = elements.values().map_err(serializing)?;
            self.json
                .as_object_mut()
                .ok_or_else(|| Error::Internal(format!("output: `{key}` deferred in a document that is no object")))?
                .insert(key, serde_json::Value::Array(values));
        }
        Ok(self)
    }
}

/// The error of a document that does not serialize.
fn serializing(e: serde_json::Error) -> Error {
    Error::Internal(format!("serializing output: {e}"))
}

/// The elements of a long array of a command's document ([`Outcome::deferred`]), rendered straight to text when
/// the document is written: a `serde_json::Value` per element was a map node of 600 bytes each (a plan's 100k
/// kept hidden files: 65 MB built, then rendered, then dropped). An element must serialize its fields in sorted
/// order, as a `Value` object prints them (the tests compare both renderings).
pub trait Elements: Send + Sync + std::fmt::Debug {
    /// How many elements.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Appends element `i` to `buf` as the pretty printer renders it `depth` levels deep.
    ///
    /// # Errors
    /// What serializing it returns.
    fn render(&self, i: usize, depth: usize, buf: &mut Vec<u8>) -> serde_json::Result<()>;
    /// Every element as a `Value`.
    ///
    /// # Errors
    /// What serializing one returns.
    fn values(&self) -> serde_json::Result<Vec<serde_json::Value>>;
}

impl<T: Serialize + Send + Sync + std::fmt::Debug> Elements for Vec<T> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn render(&self, i: usize, depth: usize, buf: &mut Vec<u8>) -> serde_json::Result<()> {
        self[i].serialize(&mut serde_json::Serializer::with_formatter(buf, Indented::at(depth)))
    }

    fn values(&self) -> serde_json::Result<Vec<serde_json::Value>> {
        use rayon::prelude::*;
        self.par_iter().with_min_len(1024).map(serde_json::to_value).collect()
    }
}

/// `serde_json`'s pretty layout (two spaces a level) for a value that starts `depth` levels deep: what
/// `to_writer_pretty` writes for it inside its document.
#[derive(Debug, Clone, Copy)]
struct Indented {
    /// The current level.
    level: usize,
    /// Whether the array or object just closed had an element.
    has_value: bool,
}

impl Indented {
    /// The layout of a value `depth` levels deep.
    fn at(depth: usize) -> Self {
        Self {
            level: depth,
            has_value: false,
        }
    }

    /// A line break and the current level's indentation.
    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(w)
    }

    /// The current level's indentation.
    fn indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        const SPACES: &[u8] = &[b' '; 64];
        let mut n = 2 * self.level;
        while n > 0 {
            let k = n.min(SPACES.len());
            w.write_all(&SPACES[..k])?;
            n -= k;
        }
        Ok(())
    }

    /// The start of an array or object, one level deeper.
    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// The end of an array or object: on a line of its own when it had an element.
    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            self.indent(w)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for Indented {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.newline(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.newline(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

pub use crate::error::{take_warnings, warn};

/// Adds `warnings` to a JSON document: appended to its `warnings` array if it has one, or as a new
/// `warnings` array. A document that is not an object (none is, today) is left as it is.
pub fn add_warnings(json: &mut serde_json::Value, warnings: Vec<String>) {
    if warnings.is_empty() {
        return;
    }
    let Some(obj) = json.as_object_mut() else {
        return;
    };
    let entry = obj
        .entry("warnings")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = entry.as_array_mut() {
        list.extend(warnings.into_iter().map(serde_json::Value::String));
    }
}

/// Arrays of at least this many elements at the top of a document are rendered in parallel by [`write_document`].
const PARALLEL_ELEMENTS: usize = 4096;

/// How many elements [`write_document`] renders before it writes them: the text held at once stays bounded (a
/// purge's document of a million receipts is never held rendered whole beside its value).
const RENDERED_AT_ONCE: usize = 16 * PARALLEL_ELEMENTS;

/// Writes `doc` exactly as `serde_json::to_writer_pretty` does, with the elements of each long array at its top
/// level (a purge's million receipts) rendered on the rayon pool, a run of them at a time, and written in order
/// every 65,536 elements ([`write_document`]).
///
/// # Errors
/// What writing to `out` returns, with its I/O kind kept (a reader that went away is a broken pipe).
pub fn write_pretty(out: &mut impl std::io::Write, doc: &serde_json::Value) -> std::io::Result<()> {
    write_document(out, doc, &[])
}

/// Writes `doc` with the arrays of `deferred` in it at their keys' places ([`Outcome::deferred`]), exactly as
/// `serde_json::to_writer_pretty` writes the document that has them: each element is rendered where it is
/// written, in the pretty layout of its depth, and the elements of each long array (those of `deferred`, and
/// those of `doc`'s top level of at least 4,096) on the rayon pool, a run at a time, written in order every 65,536
/// elements (the text held at once stays bounded).
///
/// # Errors
/// What writing to `out` returns, with its I/O kind kept; an `InvalidInput` error when `deferred` names a key
/// that `doc` has, or `doc` is no object and `deferred` is not empty.
pub fn write_document(
    out: &mut impl std::io::Write,
    doc: &serde_json::Value,
    deferred: &[(String, std::sync::Arc<dyn Elements>)],
) -> std::io::Result<()> {
    use rayon::prelude::*;
    enum Member<'a> {
        Value(&'a serde_json::Value),
        Elements(&'a dyn Elements),
    }
    let long = |v: &serde_json::Value| v.as_array().is_some_and(|a| a.len() >= PARALLEL_ELEMENTS);
    let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    let map = match doc.as_object() {
        Some(m) if !deferred.is_empty() || m.values().any(long) => m,
        _ if deferred.is_empty() => return serde_json::to_writer_pretty(out, doc).map_err(std::io::Error::from),
        _ => return Err(invalid("deferred arrays for a document that is no object".into())),
    };
    let mut members: Vec<(&str, Member<'_>)> = map.iter().map(|(k, v)| (k.as_str(), Member::Value(v))).collect();
    for (key, elements) in deferred {
        if map.contains_key(key) {
            return Err(invalid(format!("the document has `{key}` and it is deferred too")));
        }
        members.push((key, Member::Elements(elements.as_ref())));
    }
    // A `Value` object's order: its keys sorted.
    members.sort_by(|a, b| a.0.cmp(b.0));
    let value = |v: &serde_json::Value, depth: usize, buf: &mut Vec<u8>| -> std::io::Result<()> {
        serde::Serialize::serialize(v, &mut serde_json::Serializer::with_formatter(buf, Indented::at(depth)))
            .map_err(std::io::Error::from)
    };
    out.write_all(b"{")?;
    let mut buf = Vec::new();
    for (i, (key, member)) in members.into_iter().enumerate() {
        buf.clear();
        buf.extend_from_slice(if i == 0 { b"\n  " } else { b",\n  " });
        serde_json::to_writer(&mut buf, key).map_err(std::io::Error::from)?;
        buf.extend_from_slice(b": ");
        let elements: &(dyn Fn(usize, &mut Vec<u8>) -> std::io::Result<()> + Sync) = &|j, text| match member {
            Member::Value(v) => match v.as_array().and_then(|a| a.get(j)) {
                Some(e) => value(e, 2, text),
                None => Err(invalid(format!("`{key}` has no element {j}"))),
            },
            Member::Elements(e) => e.render(j, 2, text).map_err(std::io::Error::from),
        };
        let count = match member {
            Member::Value(v) if !long(v) => {
                value(v, 1, &mut buf)?;
                out.write_all(&buf)?;
                continue;
            }
            Member::Value(v) => v.as_array().map_or(0, Vec::len),
            Member::Elements(e) => e.len(),
        };
        out.write_all(&buf)?;
        if count == 0 {
            out.write_all(b"[]")?;
            continue;
        }
        out.write_all(b"[")?;
        for window in (0..count).step_by(RENDERED_AT_ONCE) {
            let runs: Vec<std::io::Result<Vec<u8>>> = (window..count.min(window + RENDERED_AT_ONCE))
                .step_by(PARALLEL_ELEMENTS / 4)
                .collect::<Vec<_>>()
                .into_par_iter()
                .map(|run| {
                    let mut text = Vec::new();
                    for j in run..count.min(run + PARALLEL_ELEMENTS / 4) {
                        text.extend_from_slice(if j == 0 { b"\n    " } else { b",\n    " });
                        elements(j, &mut text)?;
                    }
                    Ok(text)
                })
                .collect();
            for run in runs {
                out.write_all(&run?)?;
            }
        }
        out.write_all(b"\n  ]")?;
    }
    out.write_all(b"\n}")
}

/// Renders rows as an aligned text table.
#[must_use]
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                let pad = widths[i].saturating_sub(c.chars().count());
                s.push_str(c);
                s.push_str(&" ".repeat(pad + 2));
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(headers.iter().map(|h| (*h).to_owned()).collect());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    if rows.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

/// `Some(x)` as text, `None` as `-`.
#[must_use]
pub fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |x| x.to_string())
}

/// Epoch milliseconds as RFC 3339 UTC.
#[must_use]
pub fn ts(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// Progress on stderr for long runs (seal, restore, drill, purge).
///
/// When stderr is a terminal: an `indicatif` bar (items, bytes, rate, ETA); all bars of the process are drawn
/// as one block, so a drill's overall bar and each bundle's bar do not overwrite each other; a bar disappears
/// when it is done (the command's own output says how it ended). Otherwise (logs, cron, Kubernetes): a plain line at most every two seconds
/// and a last one. Nothing when disabled (`-q`). Progress never goes to stdout, so `--json` stays one document.
///
/// It counts what the command's result counts: objects done before the bar started (a bundle's metadata layers,
/// see [`Progress::with_done`]) are in its count from the start, and an object that failed its check
/// ([`Progress::tick_checked`]) is counted as checked and as failed, its bytes not among the bytes done.
#[derive(Debug)]
pub struct Progress {
    label: &'static str,
    total: usize,
    enabled: bool,
    /// The terminal bar.
    bar: Option<indicatif::ProgressBar>,
    state: std::sync::Mutex<ProgressState>,
    started: std::time::Instant,
}

/// What a [`Progress`] has counted.
#[derive(Debug)]
struct ProgressState {
    /// Objects (or items) finished, failed ones included.
    done: usize,
    /// Bytes of the objects that did not fail.
    bytes: u64,
    /// Objects that failed their check.
    failed: usize,
    /// When the last plain line was printed.
    printed: std::time::Instant,
}

/// Every bar of the process, drawn as one block on stderr.
fn bars() -> &'static indicatif::MultiProgress {
    static BARS: std::sync::OnceLock<indicatif::MultiProgress> = std::sync::OnceLock::new();
    BARS.get_or_init(|| indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::stderr()))
}

impl Progress {
    /// A progress reporter for `total` objects (reported with [`Progress::tick`]); silent unless `enabled`.
    #[must_use]
    pub fn new(label: &'static str, total: usize, enabled: bool) -> Self {
        Self::items(label, total, enabled)
    }

    /// A progress reporter for `total` items that are not objects (a drill's bundles, reported with
    /// [`Progress::item`]); silent unless `enabled`.
    #[must_use]
    pub fn items(label: &'static str, total: usize, enabled: bool) -> Self {
        use std::io::IsTerminal;
        let bar = (enabled && std::io::stderr().is_terminal()).then(|| {
            let style = indicatif::ProgressStyle::with_template(
                "{prefix:>8} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            let pb = bars().add(indicatif::ProgressBar::new(total as u64).with_style(style));
            pb.set_prefix(label);
            pb
        });
        Self {
            label,
            total,
            enabled,
            bar,
            state: std::sync::Mutex::new(ProgressState {
                done: 0,
                bytes: 0,
                failed: 0,
                printed: std::time::Instant::now(),
            }),
            started: std::time::Instant::now(),
        }
    }

    /// This reporter, with `objects` objects of `bytes` bytes already done before it started (a bundle's
    /// metadata layers, checked before its data objects) added to its count and its total, so that its last
    /// line counts what the command's result counts.
    #[must_use]
    pub fn with_done(mut self, objects: usize, bytes: u64) -> Self {
        self.total += objects;
        if let Some(pb) = &self.bar {
            pb.set_length(self.total as u64);
            pb.set_position(objects as u64);
        }
        if let Ok(st) = self.state.get_mut() {
            st.done += objects;
            st.bytes += bytes;
        }
        self
    }

    /// Records one finished object of `bytes` bytes.
    pub fn tick(&self, bytes: u64) {
        self.tick_checked(bytes, false);
    }

    /// Records one checked object of `bytes` bytes; a `failed` one (missing, changed, unreadable) is counted as
    /// failed and its bytes are not counted.
    pub fn tick_checked(&self, bytes: u64, failed: bool) {
        let Ok(mut st) = self.state.lock() else { return };
        st.done += 1;
        if failed {
            st.failed += 1;
        } else {
            st.bytes += bytes;
        }
        let failed = failed_note(st.failed);
        if let Some(pb) = &self.bar {
            let secs = self.started.elapsed().as_secs_f64().max(0.001);
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let rate = (st.bytes as f64 / secs) as u64;
            pb.set_message(format!(
                "objects{failed}, {} at {}/s",
                indicatif::HumanBytes(st.bytes),
                indicatif::HumanBytes(rate)
            ));
            pb.inc(1);
            return;
        }
        if self.enabled && (st.printed.elapsed() >= std::time::Duration::from_secs(2) || st.done == self.total) {
            eprintln!("{}", self.line(&st));
            st.printed = std::time::Instant::now();
        }
    }

    /// The plain progress line: `verify: 18/18 objects, 182872 bytes`, with ` (3 failed)` after `objects` when
    /// some failed (their bytes are not in the bytes).
    fn line(&self, st: &ProgressState) -> String {
        format!(
            "{}: {}/{} objects{}, {} bytes",
            self.label,
            st.done,
            self.total,
            failed_note(st.failed),
            st.bytes
        )
    }

    /// Records one finished item described by `what` (a drill's bundle and its verdict).
    pub fn item(&self, what: &str) {
        let Ok(mut st) = self.state.lock() else { return };
        st.done += 1;
        if let Some(pb) = &self.bar {
            pb.set_message(what.to_owned());
            pb.inc(1);
        } else if self.enabled {
            eprintln!("{}: {}/{} {what}", self.label, st.done, self.total);
        }
    }
}

/// ` (N failed)`, or nothing when none failed.
fn failed_note(failed: usize) -> String {
    match failed {
        0 => String::new(),
        n => format!(" ({n} failed)"),
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
            bars().remove(&pb);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rand::{Rng, SeedableRng};
    use serde_json::{Value, json};

    fn value(rng: &mut rand::rngs::StdRng, depth: u32) -> Value {
        let texts = [
            "",
            "a",
            "line\nbreak",
            "quote \" and \\ back",
            "tab\t\u{1}",
            "é ü 漢字 🦀",
            "  indented\n  twice",
        ];
        match rng.gen_range(0..if depth > 3 { 5 } else { 8 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.r#gen()),
            2 => json!(rng.gen_range(-1_000_000_i64..1_000_000)),
            3 => json!(rng.r#gen::<f64>() * 1e6),
            4 => Value::String(texts[rng.gen_range(0..texts.len())].to_owned()),
            5 | 6 => Value::Array((0..rng.gen_range(0..4)).map(|_| value(rng, depth + 1)).collect()),
            _ => Value::Object(
                (0..rng.gen_range(0..4))
                    .map(|i| {
                        (
                            format!("{}{i}", texts[rng.gen_range(0..texts.len())]),
                            value(rng, depth + 1),
                        )
                    })
                    .collect(),
            ),
        }
    }

    /// The last line counts what the result counts: objects done before (metadata layers) in the count and the
    /// total, a failed object as checked and failed, its bytes not counted.
    #[test]
    fn progress_counts_objects_done_before_and_failures() {
        let p = super::Progress::new("verify", 3, false).with_done(2, 100);
        p.tick(10);
        p.tick_checked(20, true);
        p.tick_checked(30, false);
        let st = p.state.lock().unwrap();
        assert_eq!(p.line(&st), "verify: 5/5 objects (1 failed), 140 bytes");
        drop(st);
        let q = super::Progress::new("seal", 1, false);
        q.tick(7);
        assert_eq!(q.line(&q.state.lock().unwrap()), "seal: 1/1 objects, 7 bytes");
    }

    /// Documents with long arrays at the top (rendered in parallel) and everything else a value can be, nested:
    /// the text is byte for byte serde_json's pretty printer's.
    #[test]
    fn parallel_pretty_text_is_serde_jsons() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x9e77);
        let mut parallel = 0;
        for round in 0..60 {
            let mut doc = serde_json::Map::new();
            for k in 0..rng.gen_range(0..6) {
                let v = match rng.gen_range(0..3) {
                    0 => Value::Array(
                        (0..super::PARALLEL_ELEMENTS + rng.gen_range(0..3 * super::PARALLEL_ELEMENTS))
                            .map(|_| value(&mut rng, 1))
                            .collect(),
                    ),
                    _ => value(&mut rng, 0),
                };
                doc.insert(format!("key \"{k}\"\n"), v);
            }
            let doc = Value::Object(doc);
            parallel += usize::from(
                doc.as_object()
                    .unwrap()
                    .values()
                    .any(|v| v.as_array().is_some_and(|a| a.len() >= super::PARALLEL_ELEMENTS)),
            );
            let mut ours = Vec::new();
            super::write_pretty(&mut ours, &doc).unwrap();
            let theirs = serde_json::to_vec_pretty(&doc).unwrap();
            assert!(ours == theirs, "round {round}: texts differ");
        }
        assert!(parallel > 20, "{parallel} documents took the parallel path");
        // Past one window of rendered elements, and ending part-way into the next.
        let windows: Vec<Value> = (0..super::RENDERED_AT_ONCE + 5)
            .map(|i| json!({"subject": format!("data/{i}.parquet"), "reasons": ["hidden"]}))
            .collect();
        for doc in [
            json!({}),
            json!([]),
            json!({"a": []}),
            json!("x"),
            json!(null),
            json!({"kept": windows, "z": 1}),
        ] {
            let mut ours = Vec::new();
            super::write_pretty(&mut ours, &doc).unwrap();
            assert_eq!(ours, serde_json::to_vec_pretty(&doc).unwrap());
        }
    }

    /// A document written with arrays deferred as typed elements is, byte for byte, the pretty printer's text of
    /// the document that has them as values (`materialize`), whatever their length, content and place among the
    /// keys; a deferred key the document also has, or deferred arrays beside no object, are refused.
    #[test]
    fn deferred_elements_are_written_as_their_values() {
        use std::sync::Arc;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        for round in 0..40 {
            let mut doc = serde_json::Map::new();
            for k in 0..rng.gen_range(0..4) {
                doc.insert(format!("k{k}"), value(&mut rng, 0));
            }
            let lengths = [0, 1, 2, super::PARALLEL_ELEMENTS / 4 + 1, super::RENDERED_AT_ONCE + 3];
            let kept: Vec<crate::govern::closure::KeptUnreferenced> = (0..lengths[round % lengths.len()])
                .map(|i| crate::govern::closure::KeptUnreferenced {
                    reasons: (0..rng.gen_range(0..3))
                        .map(|r| std::borrow::Cow::Owned(format!("why {r} \"quoted\"\n\u{7}")))
                        .collect(),
                    subject: format!("data/{i}/ü.parquet"),
                })
                .collect();
            let values: Vec<Value> = (0..rng.gen_range(0..5)).map(|_| value(&mut rng, 1)).collect();
            let outcome = super::Outcome {
                verdict: super::Verdict::Ok,
                json: Value::Object(doc),
                human: String::new(),
                deferred: vec![
                    (format!("a{round}"), Arc::new(values) as Arc<dyn super::Elements>),
                    ("kept_unreferenced".into(), Arc::new(kept)),
                ],
            };
            let mut ours = Vec::new();
            super::write_document(&mut ours, &outcome.json, &outcome.deferred).unwrap();
            let whole = outcome.materialize().unwrap();
            assert!(whole.deferred.is_empty());
            assert!(
                ours == serde_json::to_vec_pretty(&whole.json).unwrap(),
                "round {round}: texts differ"
            );
        }
        let twice = vec![("a".to_owned(), Arc::new(vec![1]) as Arc<dyn super::Elements>)];
        let mut out = Vec::new();
        let e = super::write_document(&mut out, &json!({"a": 1}), &twice).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("`a`"), "{e}");
        let e = super::write_document(&mut Vec::new(), &json!([1]), &twice).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    }
}
