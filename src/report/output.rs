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
    /// The `--json` document.
    pub json: serde_json::Value,
    /// Human-readable text.
    pub human: String,
}

impl Outcome {
    /// An outcome from a serializable value and its human rendering.
    ///
    /// # Errors
    /// [`Error::Internal`] if the value cannot be serialized.
    pub fn new(verdict: Verdict, value: &impl Serialize, human: String) -> Result<Self> {
        Ok(Self {
            verdict,
            json: serde_json::to_value(value).map_err(|e| Error::Internal(format!("serializing output: {e}")))?,
            human,
        })
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

/// Arrays of at least this many elements at the top of a document are rendered in parallel by [`write_pretty`].
const PARALLEL_ELEMENTS: usize = 4096;

/// How many elements [`write_pretty`] renders before it writes them: the text held at once stays bounded (a
/// purge's document of a million receipts is never held rendered whole beside its value).
const RENDERED_AT_ONCE: usize = 16 * PARALLEL_ELEMENTS;

/// Writes `doc` exactly as `serde_json::to_writer_pretty` does, with the elements of each long array at its top
/// level (a plan's 100k kept hidden files, a purge's million receipts) rendered on the rayon pool, a run of them at
/// a time, and written in order every 65,536 elements. Each value is rendered alone and indented by its depth: a JSON text
/// has no raw line break but those between its tokens (a string's are escaped), so indenting after each line
/// break is the pretty printer's own layout.
///
/// # Errors
/// What writing to `out` returns, with its I/O kind kept (a reader that went away is a broken pipe).
pub fn write_pretty(out: &mut impl std::io::Write, doc: &serde_json::Value) -> std::io::Result<()> {
    use rayon::prelude::*;
    let pretty = |v: &serde_json::Value, depth: usize, buf: &mut Vec<u8>| -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(v).map_err(std::io::Error::from)?;
        for (i, line) in text.split(|b| *b == b'\n').enumerate() {
            if i > 0 {
                buf.push(b'\n');
                buf.resize(buf.len() + 2 * depth, b' ');
            }
            buf.extend_from_slice(line);
        }
        Ok(())
    };
    let long = |v: &serde_json::Value| v.as_array().is_some_and(|a| a.len() >= PARALLEL_ELEMENTS);
    let Some(map) = doc.as_object().filter(|m| m.values().any(long)) else {
        return serde_json::to_writer_pretty(out, doc).map_err(std::io::Error::from);
    };
    out.write_all(b"{")?;
    let mut buf = Vec::new();
    for (i, (key, value)) in map.iter().enumerate() {
        buf.clear();
        buf.extend_from_slice(if i == 0 { b"\n  " } else { b",\n  " });
        serde_json::to_writer(&mut buf, key).map_err(std::io::Error::from)?;
        buf.extend_from_slice(b": ");
        match value.as_array().filter(|_| long(value)) {
            Some(elements) => {
                out.write_all(&buf)?;
                out.write_all(b"[")?;
                for (window, elements) in elements.chunks(RENDERED_AT_ONCE).enumerate() {
                    let runs: Vec<std::io::Result<Vec<u8>>> = elements
                        .par_chunks(PARALLEL_ELEMENTS / 4)
                        .enumerate()
                        .map(|(run, chunk)| {
                            let mut text = Vec::new();
                            for (j, e) in chunk.iter().enumerate() {
                                let first = window == 0 && run == 0 && j == 0;
                                text.extend_from_slice(if first { b"\n    " } else { b",\n    " });
                                pretty(e, 2, &mut text)?;
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
            None => {
                pretty(value, 1, &mut buf)?;
                out.write_all(&buf)?;
            }
        }
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
#[derive(Debug)]
pub struct Progress {
    label: &'static str,
    total: usize,
    enabled: bool,
    /// The terminal bar.
    bar: Option<indicatif::ProgressBar>,
    state: std::sync::Mutex<(usize, u64, std::time::Instant)>,
    started: std::time::Instant,
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
            state: std::sync::Mutex::new((0, 0, std::time::Instant::now())),
            started: std::time::Instant::now(),
        }
    }

    /// Records one finished object of `bytes` bytes.
    pub fn tick(&self, bytes: u64) {
        let Ok(mut st) = self.state.lock() else { return };
        st.0 += 1;
        st.1 += bytes;
        if let Some(pb) = &self.bar {
            let secs = self.started.elapsed().as_secs_f64().max(0.001);
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let rate = (st.1 as f64 / secs) as u64;
            pb.set_message(format!(
                "objects, {} at {}/s",
                indicatif::HumanBytes(st.1),
                indicatif::HumanBytes(rate)
            ));
            pb.inc(1);
            return;
        }
        if self.enabled && (st.2.elapsed() >= std::time::Duration::from_secs(2) || st.0 == self.total) {
            eprintln!("{}: {}/{} objects, {} bytes", self.label, st.0, self.total, st.1);
            st.2 = std::time::Instant::now();
        }
    }

    /// Records one finished item described by `what` (a drill's bundle and its verdict).
    pub fn item(&self, what: &str) {
        let Ok(mut st) = self.state.lock() else { return };
        st.0 += 1;
        if let Some(pb) = &self.bar {
            pb.set_message(what.to_owned());
            pb.inc(1);
        } else if self.enabled {
            eprintln!("{}: {}/{} {what}", self.label, st.0, self.total);
        }
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
}
