//! The architecture test: `src/` keeps the wings and directions of the target layout.
//!
//! It reads every `src/**/*.rs`, builds the graph of `crate::` references between files and between wings,
//! and fails with one line per violation, `file:line: rule: message`. The rules are data at the top of this
//! file ([`DIRECTIONS`], [`GROUND`], [`CONTEXT_WINGS`], [`PURE`]); the checks are pure functions over a map
//! `path -> source text`, so the unit tests below run them on small synthetic trees.
//!
//! What counts as a reference:
//! - every `crate::a::b::…` path in code, in `use` items (grouped and multi-line `use crate::{a::x, b::{c, d}};`
//!   included, each leaf counted on its own line) and inline in expressions and types
//!   (`crate::faults::weakened(…)`); `super::` and `self::` paths resolved against the file's module path
//!   (plus any inline `mod x { … }` they sit in); a root re-export named in `src/lib.rs` (`pub use
//!   error::Error;`) resolves `crate::Error` to the file that defines it. Paths relative to a child module
//!   without `self::` (`use tree::Tree;` in `table.rs`, where `mod tree;` declares the child) count as
//!   `self::tree::Tree`: a face that re-exports or calls its children and a child that uses the face through
//!   `super::` make a circle like any two files.
//! - a path maps to the file that defines the module: the longest prefix `a/b/c` such that `src/a/b/c.rs`
//!   exists, else `src/a/b.rs`, else `src/a.rs`. Unknown targets (`crate::SOMETHING` that is no file and no
//!   root re-export) are ignored.
//! - comments (`//`, `///`, `//!`, `/* */`), string, raw-string and char literals are blanked before anything
//!   is read, so text in them never makes an edge.
//! - everything inside a `#[cfg(test)] mod … { … }` is ignored (tracked by brace depth from its `mod … {`):
//!   unit-test fixtures may use higher wings without making a production edge, and the clock and pure-wing
//!   rules apply to production code only. Other `#[cfg(test)]` items (a test-only fn) are production items
//!   here. Only `error-names-no-module` reads test modules too: `error.rs` names no module at all.
//! - `src/lib.rs` is the crate root (only `pub mod` / `pub use`): its own edges are skipped. `src/main.rs`
//!   uses `lakedrill::`, not `crate::`: it is skipped too (but still may not call `Utc::now()`).
//!
//! The rules: `outside-wings` (a file whose wing is not in [`DIRECTIONS`]), `direction`, `circle` (a
//! strongly connected component of the file graph with more than one file, or a file that reaches itself
//! through `super::`), `context-below-ops`, `pure-wing`, `clock`, `error-names-no-module`, `no-mod-rs` and
//! `face-doc`. See: issue 17, point 7, and `ARCHITECTURE.md`, "Allowed directions".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

/// The wings and the wings each may import, lowest first. A wing may always use itself (subject to the
/// `circle` rule). The wing of a file is the first path component under `src/` (the file stem for a top-level
/// file: `src/table.rs` and `src/table/tree.rs` are both wing `table`); the top-level files in [`GROUND`] form
/// the wing `ground`. A file in any other wing is an `outside-wings` violation.
const DIRECTIONS: &[(&str, &[&str])] = &[
    ("ground", &["ground"]),
    ("model", &["ground"]),
    ("evidence", &["model", "ground"]),
    ("io", &["model", "ground"]),
    ("govern", &["evidence", "model", "ground"]),
    ("table", &["io", "model", "ground"]),
    ("registry", &["govern", "io", "model", "ground"]),
    ("report", &["govern", "evidence", "model", "ground"]),
    (
        "bundle",
        &[
            "report", "registry", "table", "govern", "evidence", "io", "model", "ground",
        ],
    ),
    (
        "ops",
        &[
            "bundle", "report", "registry", "table", "govern", "evidence", "io", "model", "ground",
        ],
    ),
    (
        "lab",
        &[
            "ops", "bundle", "report", "registry", "table", "govern", "evidence", "io", "model", "ground",
        ],
    ),
    (
        "cli",
        &[
            "lab", "ops", "bundle", "report", "registry", "table", "govern", "evidence", "io", "model", "ground",
        ],
    ),
];

/// The top-level files (by stem) that form the wing `ground`: the error type, the clock, the configuration
/// and the safety switches.
const GROUND: &[&str] = &["error", "clock", "config", "safety"];

/// The only wings whose files may name `ops::context` or the `Context` of `ops`.
const CONTEXT_WINGS: &[&str] = &["ops", "lab", "cli"];

/// Words (identifiers, or `async fn`) that files of a wing may not contain in code: the pure wings are sync
/// and reach no storage, registry or runtime; `report` renders and reaches no storage.
const PURE: &[(&str, &[&str])] = &[
    ("govern", &["async fn", "Storage", "Registry", "tokio", "object_store"]),
    (
        "evidence",
        &["async fn", "Storage", "Registry", "tokio", "object_store"],
    ),
    ("model", &["async fn", "Storage", "Registry", "tokio", "object_store"]),
    ("report", &["Storage", "object_store"]),
];

/// The only file that may call `Utc::now()`.
const CLOCK_FILE: &str = "src/clock.rs";

/// The file that names no module.
const ERROR_FILE: &str = "src/error.rs";

/// One broken rule at one place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    file: String,
    line: usize,
    rule: &'static str,
    message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}: {}", self.file, self.line, self.rule, self.message)
    }
}

fn violation(file: &str, line: usize, rule: &'static str, message: String) -> Violation {
    Violation {
        file: file.to_owned(),
        line,
        rule,
        message,
    }
}

// ---------------------------------------------------------------------------------------------------------
// Lexing: blank comments and literals, then split into tokens that know their line and whether they sit in a
// `#[cfg(test)]` module.

/// `src` with comments, string/raw-string/byte-string and char literals replaced by spaces (newlines kept, so
/// line numbers stay). Lifetimes (`'a`) are kept.
fn blank_comments_and_literals(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut at = 0;
    while at < chars.len() {
        if let Some(end) = comment_or_literal_end(&chars, at) {
            out.extend(chars[at..end].iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
            at = end;
        } else {
            out.push(chars[at]);
            at += 1;
        }
    }
    out
}

/// The end (exclusive) of the comment or literal that starts at `i`, if one does.
fn comment_or_literal_end(c: &[char], i: usize) -> Option<usize> {
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let at = |k: usize| c.get(k).copied();
    let find = |from: usize, pred: &dyn Fn(usize) -> bool| (from..c.len()).find(|&k| pred(k)).unwrap_or(c.len());
    match (c[i], at(i + 1)) {
        ('/', Some('/')) => Some(find(i, &|k| c[k] == '\n')),
        ('/', Some('*')) => {
            let mut depth = 0usize;
            let mut k = i;
            while k < c.len() {
                if c[k] == '/' && at(k + 1) == Some('*') {
                    depth += 1;
                    k += 2;
                } else if c[k] == '*' && at(k + 1) == Some('/') {
                    depth -= 1;
                    k += 2;
                    if depth == 0 {
                        return Some(k);
                    }
                } else {
                    k += 1;
                }
            }
            Some(c.len())
        }
        // Raw strings: r"…", r#"…"#, br"…", cr"…" (the prefix starts a token; `r#type` is an identifier).
        ('r', _) => {
            let token_start = match i.checked_sub(1).map(|p| c[p]) {
                None => true,
                Some('b' | 'c') => i < 2 || !ident(c[i - 2]),
                Some(p) => !ident(p),
            };
            let quote = find(i + 1, &|k| c[k] != '#');
            if !token_start || at(quote) != Some('"') {
                return None;
            }
            let hashes = quote - i - 1;
            let close = find(quote + 1, &|k| {
                c[k] == '"' && (1..=hashes).all(|h| at(k + h) == Some('#'))
            });
            Some((close + 1 + hashes).min(c.len()))
        }
        ('"', _) => {
            let mut k = i + 1;
            while k < c.len() && c[k] != '"' {
                k += if c[k] == '\\' { 2 } else { 1 };
            }
            Some((k + 1).min(c.len()))
        }
        // '\n', '\'', '\u{1F600}'
        ('\'', Some('\\')) => Some((find(i + 3, &|k| c[k] == '\'' || c[k] == '\n') + 1).min(c.len())),
        // 'x'; a lifetime is `'a` not followed by a quote.
        ('\'', _) if at(i + 2) == Some('\'') => Some(i + 3),
        _ => None,
    }
}

#[derive(Debug, Clone)]
struct Tok {
    text: String,
    line: usize,
    /// Inside a `#[cfg(test)]` module.
    test: bool,
}

impl Tok {
    fn is(&self, s: &str) -> bool {
        self.text == s
    }

    fn is_ident(&self) -> bool {
        self.text.starts_with(|ch: char| ch.is_alphabetic() || ch == '_')
    }
}

fn text_at(t: &[Tok], i: usize) -> Option<&str> {
    t.get(i).map(|tok| tok.text.as_str())
}

/// Tokens of `src` (comments and literals gone), with `test` set on every token of a `#[cfg(test)]` module.
fn lex(src: &str) -> Vec<Tok> {
    let clean = blank_comments_and_literals(src);
    let c: Vec<char> = clean.chars().collect();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric()
            || ch == '_'
            || (ch == '\'' && c.get(i + 1).is_some_and(|x| x.is_alphabetic() || *x == '_'))
        {
            let start = i;
            i += 1;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            toks.push(Tok {
                text: c[start..i].iter().collect(),
                line,
                test: false,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            toks.push(Tok {
                text: "::".to_owned(),
                line,
                test: false,
            });
            i += 2;
        } else {
            toks.push(Tok {
                text: ch.to_string(),
                line,
                test: false,
            });
            i += 1;
        }
    }
    mark_test_modules(&mut toks);
    toks
}

/// Index just past the bracket/brace group opening at `open` (`[`…`]` or `{`…`}`), or the end.
fn close_of(t: &[Tok], open: usize) -> usize {
    let (o, c) = if t[open].is("[") { ("[", "]") } else { ("{", "}") };
    let mut depth = 0usize;
    for (k, tok) in t.iter().enumerate().skip(open) {
        if tok.is(o) {
            depth += 1;
        } else if tok.is(c) {
            depth -= 1;
            if depth == 0 {
                return k + 1;
            }
        }
    }
    t.len()
}

/// Sets `test` on `#[cfg(test)]` (further attributes, visibility) `mod NAME { … }`, attribute to closing brace.
fn mark_test_modules(t: &mut [Tok]) {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut i = 0;
    while i + CFG_TEST.len() <= t.len() {
        if !CFG_TEST.iter().enumerate().all(|(k, s)| t[i + k].is(s)) {
            i += 1;
            continue;
        }
        let mut j = i + CFG_TEST.len();
        while text_at(t, j) == Some("#") && text_at(t, j + 1) == Some("[") {
            j = close_of(t, j + 1);
        }
        if text_at(t, j) == Some("pub") {
            j += 1;
            if text_at(t, j) == Some("(") {
                while j < t.len() && !t[j].is(")") {
                    j += 1;
                }
                j += 1;
            }
        }
        if text_at(t, j) == Some("mod") && text_at(t, j + 2) == Some("{") {
            let end = close_of(t, j + 2);
            for tok in &mut t[i..end] {
                tok.test = true;
            }
            i = end;
        } else {
            i += CFG_TEST.len();
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Paths: `crate::…`, `self::…`, `super::…` with `use` groups expanded.

/// One expanded path as written (`crate::bundle::Layer`), the line of its leaf and its `as` alias.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    segs: Vec<String>,
    line: usize,
    alias: Option<String>,
    /// The inline (non-file) modules it sits in, outermost first.
    inline: Vec<String>,
}

impl Written {
    fn text(&self) -> String {
        // `crate::report::{self}` shows as `crate::report`; a leading `self::` stays.
        let shown: Vec<&str> = self
            .segs
            .iter()
            .enumerate()
            .filter(|(k, s)| *k == 0 || *s != "self")
            .map(|(_, s)| s.as_str())
            .collect();
        shown.join("::")
    }
}

/// Parses a use tree (or an inline path) starting at `i`: returns the expanded leaves and the index after it.
fn parse_tree(t: &[Tok], mut i: usize) -> (Vec<Written>, usize) {
    let mut prefix: Vec<String> = Vec::new();
    let mut line = t.get(i).map_or(0, |tok| tok.line);
    loop {
        let Some(tok) = t.get(i) else {
            return (leaf(prefix, line, None), i);
        };
        if tok.is("{") {
            let mut out = Vec::new();
            i += 1;
            while let Some(inner) = t.get(i) {
                if inner.is("}") {
                    i += 1;
                    break;
                }
                if inner.is(",") {
                    i += 1;
                    continue;
                }
                let (sub, j) = parse_tree(t, i);
                for mut w in sub {
                    let mut segs = prefix.clone();
                    segs.append(&mut w.segs);
                    w.segs = segs;
                    out.push(w);
                }
                i = if j > i { j } else { i + 1 };
            }
            return (out, i);
        }
        if tok.is("*") {
            prefix.push("*".to_owned());
            return (leaf(prefix, tok.line, None), i + 1);
        }
        if !tok.is_ident() {
            return (leaf(prefix, line, None), i);
        }
        prefix.push(tok.text.clone());
        line = tok.line;
        i += 1;
        if text_at(t, i) == Some("::") {
            i += 1;
            continue;
        }
        let mut alias = None;
        if text_at(t, i) == Some("as") && t.get(i + 1).is_some_and(Tok::is_ident) {
            alias = Some(t[i + 1].text.clone());
            i += 2;
        }
        return (leaf(prefix, line, alias), i);
    }
}

fn leaf(segs: Vec<String>, line: usize, alias: Option<String>) -> Vec<Written> {
    if segs.is_empty() {
        Vec::new()
    } else {
        vec![Written {
            segs,
            line,
            alias,
            inline: Vec::new(),
        }]
    }
}

/// Every `crate::`/`self::`/`super::` path of the file's code (test modules only when `with_tests`).
fn written_paths(t: &[Tok], with_tests: bool) -> Vec<Written> {
    let mut out = Vec::new();
    // The file's own child modules (`mod x;` at any visibility): `x::Item` and `use x::Item` name `self::x`.
    let children: BTreeSet<&str> = (0..t.len())
        .filter(|&k| t[k].is("mod") && text_at(t, k + 2) == Some(";"))
        .filter_map(|k| t.get(k + 1).filter(|n| n.is_ident()).map(|n| n.text.as_str()))
        .collect();
    // Inline modules: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut pending: Option<String> = None;
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        let tok = &t[i];
        if tok.is("{") {
            depth += 1;
            if let Some(name) = pending.take() {
                inline.push((name, depth));
            }
        } else if tok.is("}") {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
        } else if tok.is("mod") && t.get(i + 1).is_some_and(Tok::is_ident) && text_at(t, i + 2) == Some("{") {
            pending = Some(t[i + 1].text.clone());
        } else if (with_tests || !tok.test)
            && (tok.is("crate") || tok.is("self") || tok.is("super"))
            && text_at(t, i + 1) == Some("::")
            && !matches!(i.checked_sub(1).and_then(|p| text_at(t, p)), Some("::" | "$"))
        {
            let (leaves, j) = parse_tree(t, i);
            let names: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
            out.extend(leaves.into_iter().map(|mut w| {
                w.inline.clone_from(&names);
                w
            }));
            // The braces of a use group are balanced: depth is unchanged across it.
            i = j.max(i + 1);
            continue;
        } else if (with_tests || !tok.test)
            && inline.is_empty()
            && children.contains(tok.text.as_str())
            && text_at(t, i + 1) == Some("::")
            && !matches!(i.checked_sub(1).and_then(|p| text_at(t, p)), Some("::" | "$" | "."))
        {
            let (leaves, j) = parse_tree(t, i);
            out.extend(leaves.into_iter().map(|mut w| {
                w.segs.insert(0, "self".to_owned());
                w
            }));
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// Files, wings, references.

/// The module path of a file: `src/a/b.rs` -> `[a, b]`, `src/a/mod.rs` -> `[a]`, `src/lib.rs` -> `[]`.
fn module_path(file: &str) -> Vec<String> {
    let rel = file.strip_prefix("src/").unwrap_or(file);
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut segs: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    if segs == ["lib"] || segs == ["main"] {
        segs.clear();
    }
    segs
}

/// The wing of a file (`ground` for the files of [`GROUND`]); `None` for `src/lib.rs` and `src/main.rs`.
fn wing_of(file: &str) -> Option<String> {
    let rel = file.strip_prefix("src/")?;
    if rel == "lib.rs" || rel == "main.rs" {
        return None;
    }
    let first = rel.split('/').next()?;
    let stem = first.strip_suffix(".rs").unwrap_or(first);
    Some(if GROUND.contains(&stem) {
        "ground".to_owned()
    } else {
        stem.to_owned()
    })
}

fn allowed_of(wing: &str) -> Option<&'static [&'static str]> {
    DIRECTIONS.iter().find(|(w, _)| *w == wing).map(|(_, a)| *a)
}

/// One resolved reference from one file to another.
#[derive(Debug, Clone)]
struct Ref {
    from: String,
    to: String,
    line: usize,
    /// As written, groups expanded: `crate::bundle::Layer`.
    text: String,
    /// The path from the crate root after resolving `self`/`super`/root re-exports: `[bundle, Layer]`.
    full: Vec<String>,
    via_super: bool,
}

/// The parsed sources: tokens per file, and the root re-exports of `src/lib.rs` (name -> path from the root).
struct Tree<'a> {
    files: &'a BTreeMap<String, String>,
    toks: BTreeMap<&'a str, Vec<Tok>>,
    reexports: BTreeMap<String, Vec<String>>,
}

impl<'a> Tree<'a> {
    fn new(files: &'a BTreeMap<String, String>) -> Self {
        let toks: BTreeMap<&str, Vec<Tok>> = files.iter().map(|(f, s)| (f.as_str(), lex(s))).collect();
        let mut reexports = BTreeMap::new();
        if let Some(lib) = toks.get("src/lib.rs") {
            for (i, tok) in lib.iter().enumerate() {
                if !tok.is("use") || tok.test {
                    continue;
                }
                for w in parse_tree(lib, i + 1).0 {
                    let segs: Vec<String> = w
                        .segs
                        .iter()
                        .filter(|s| *s != "crate" && *s != "self")
                        .cloned()
                        .collect();
                    if segs.is_empty() || segs.iter().any(|s| s == "super" || s == "*") {
                        continue;
                    }
                    let name = w.alias.clone().or_else(|| segs.last().cloned());
                    if let Some(name) = name
                        && name != "_"
                    {
                        reexports.insert(name, segs);
                    }
                }
            }
        }
        Tree { files, toks, reexports }
    }

    /// The file defining the module a path (from the root) names: longest prefix with a file.
    fn file_of(&self, full: &[String]) -> Option<String> {
        for k in (1..=full.len()).rev() {
            let base = format!("src/{}", full[..k].join("/"));
            for cand in [format!("{base}.rs"), format!("{base}/mod.rs")] {
                if self.files.contains_key(&cand) && cand != "src/lib.rs" && cand != "src/main.rs" {
                    return Some(cand);
                }
            }
        }
        None
    }

    /// Resolves a written path in `file` to `(target file, path from the root)`.
    fn resolve(&self, file: &str, w: &Written) -> Option<(String, Vec<String>)> {
        let head = w.segs.first()?;
        let mut base: Vec<String> = module_path(file);
        base.extend(w.inline.iter().cloned());
        let rest: &[String] = match head.as_str() {
            "crate" => {
                base.clear();
                &w.segs[1..]
            }
            "self" => &w.segs[1..],
            "super" => {
                let ups = w.segs.iter().take_while(|s| *s == "super").count();
                if ups > base.len() {
                    return None;
                }
                base.truncate(base.len() - ups);
                &w.segs[ups..]
            }
            _ => return None,
        };
        let mut full = base;
        full.extend(
            rest.iter()
                .filter(|s| *s != "self" && *s != "*" && *s != "super")
                .cloned(),
        );
        if let Some(first) = full.first()
            && self.file_of(&full[..1]).is_none()
            && let Some(target) = self.reexports.get(first)
        {
            let mut swapped = target.clone();
            swapped.extend(full[1..].iter().cloned());
            full = swapped;
        }
        let target = self.file_of(&full)?;
        Some((target, full))
    }

    /// Every resolved reference between files of `src/` (not from `lib.rs` or `main.rs`; a file's reference to
    /// itself is kept only when made through `super::`).
    fn references(&self) -> Vec<Ref> {
        let mut out = Vec::new();
        for (&file, toks) in &self.toks {
            if wing_of(file).is_none() {
                continue;
            }
            for w in written_paths(toks, false) {
                let Some((to, full)) = self.resolve(file, &w) else {
                    continue;
                };
                let via_super = w.segs.first().is_some_and(|s| s == "super");
                if to == file && !via_super {
                    continue;
                }
                out.push(Ref {
                    from: file.to_owned(),
                    to,
                    line: w.line,
                    text: w.text(),
                    full,
                    via_super,
                });
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------------------
// The rules.

fn wings_list() -> String {
    DIRECTIONS.iter().map(|(w, _)| *w).collect::<Vec<_>>().join(", ")
}

fn outside_wings(files: &BTreeMap<String, String>) -> Vec<Violation> {
    files
        .keys()
        .filter_map(|f| {
            let wing = wing_of(f)?;
            allowed_of(&wing).is_none().then(|| {
                violation(
                    f,
                    1,
                    "outside-wings",
                    format!("file outside the wings (`{wing}` is none of {})", wings_list()),
                )
            })
        })
        .collect()
}

fn direction(refs: &[Ref]) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in refs {
        let (Some(from), Some(to)) = (wing_of(&r.from), wing_of(&r.to)) else {
            continue;
        };
        let (Some(allowed), Some(_)) = (allowed_of(&from), allowed_of(&to)) else {
            continue;
        };
        if from != to && !allowed.contains(&to.as_str()) {
            out.push(violation(
                &r.from,
                r.line,
                "direction",
                format!(
                    "{from} may not import {to} ({}) — allowed: {}",
                    r.text,
                    allowed.join(", ")
                ),
            ));
        }
    }
    out
}

/// Strongly connected components (Tarjan) of the file graph, each sorted; only those with more than one file.
fn circles(edges: &BTreeMap<&str, BTreeSet<&str>>) -> Vec<Vec<String>> {
    struct State<'s> {
        edges: &'s BTreeMap<&'s str, BTreeSet<&'s str>>,
        index: BTreeMap<&'s str, usize>,
        low: BTreeMap<&'s str, usize>,
        stack: Vec<&'s str>,
        on_stack: BTreeSet<&'s str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'s>(s: &mut State<'s>, v: &'s str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let succ: Vec<&str> = s.edges.get(v).map(|e| e.iter().copied().collect()).unwrap_or_default();
        for w in succ {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                if let Some(x) = s.low.get_mut(v) {
                    *x = (*x).min(lw);
                }
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                if let Some(x) = s.low.get_mut(v) {
                    *x = (*x).min(iw);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(*a).chain(bs.iter().copied()))
        .collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

fn circle(refs: &[Ref]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    // The first reference (lowest line) per file pair.
    let mut first: BTreeMap<(&str, &str), &Ref> = BTreeMap::new();
    for r in refs {
        if r.from == r.to {
            if r.via_super {
                out.push(violation(
                    &r.from,
                    r.line,
                    "circle",
                    format!("{} refers to itself through super ({})", r.from, r.text),
                ));
            }
            continue;
        }
        edges.entry(&r.from).or_default().insert(&r.to);
        let e = first.entry((&r.from, &r.to)).or_insert(r);
        if r.line < e.line {
            *e = r;
        }
    }
    for (k, comp) in circles(&edges).iter().enumerate() {
        let n = comp.len();
        let members: BTreeSet<&str> = comp.iter().map(String::as_str).collect();
        let mut summary_line = None;
        for (&(a, b), r) in &first {
            if members.contains(a) && members.contains(b) {
                if a == comp[0] && summary_line.is_none() {
                    summary_line = Some(r.line);
                }
                out.push(violation(
                    a,
                    r.line,
                    "circle",
                    format!("{a} imports {b} ({}) inside circle {} of {n} files", r.text, k + 1),
                ));
            }
        }
        out.push(violation(
            &comp[0],
            summary_line.unwrap_or(1),
            "circle",
            format!("circle {} holds {n} files: {}", k + 1, comp.join(", ")),
        ));
    }
    out
}

fn context_below_ops(refs: &[Ref]) -> Vec<Violation> {
    refs.iter()
        .filter(|r| wing_of(&r.from).is_some_and(|w| !CONTEXT_WINGS.contains(&w.as_str())))
        .filter(|r| {
            let names_context_module = r.full.len() >= 2 && r.full[0] == "ops" && r.full[1] == "context";
            let names_ops_context =
                wing_of(&r.to).is_some_and(|w| w == "ops") && r.full.last().is_some_and(|s| s == "Context");
            names_context_module || names_ops_context
        })
        .map(|r| {
            violation(
                &r.from,
                r.line,
                "context-below-ops",
                format!("only {} may see ops::Context ({})", CONTEXT_WINGS.join(", "), r.text),
            )
        })
        .collect()
}

/// Lines where the token sequence `words` (split on spaces) occurs in production code.
fn lines_with(t: &[Tok], words: &str) -> Vec<usize> {
    let words: Vec<&str> = words.split(' ').collect();
    let mut lines = Vec::new();
    for i in 0..t.len() {
        if !t[i].test && words.iter().enumerate().all(|(k, w)| text_at(t, i + k) == Some(w)) {
            lines.push(t[i].line);
        }
    }
    lines.dedup();
    lines
}

fn pure_wing(tree: &Tree<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&file, toks) in &tree.toks {
        let Some(wing) = wing_of(file) else { continue };
        let Some((_, banned)) = PURE.iter().find(|(w, _)| *w == wing) else {
            continue;
        };
        for word in *banned {
            for line in lines_with(toks, word) {
                out.push(violation(
                    file,
                    line,
                    "pure-wing",
                    format!("{wing} is pure and may not name `{word}`"),
                ));
            }
        }
    }
    out
}

fn clock(tree: &Tree<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for (&file, toks) in &tree.toks {
        if file == CLOCK_FILE {
            continue;
        }
        for line in lines_with(toks, "Utc :: now") {
            out.push(violation(
                file,
                line,
                "clock",
                format!("Utc::now() outside {CLOCK_FILE}: take the time from the context's Clock"),
            ));
        }
    }
    out
}

fn error_names_no_module(tree: &Tree<'_>) -> Vec<Violation> {
    let Some(toks) = tree.toks.get(ERROR_FILE) else {
        return Vec::new();
    };
    let mut lines: Vec<(usize, String)> = written_paths(toks, true)
        .iter()
        .filter(|w| {
            w.segs.first().is_some_and(|s| s == "crate")
                || tree.resolve(ERROR_FILE, w).is_some_and(|(to, _)| to != ERROR_FILE)
        })
        .map(|w| (w.line, w.text()))
        .collect();
    lines.dedup();
    lines
        .into_iter()
        .map(|(line, text)| {
            violation(
                ERROR_FILE,
                line,
                "error-names-no-module",
                format!("error.rs names no module ({text}): each module's error maps itself into crate::Error"),
            )
        })
        .collect()
}

fn no_mod_rs(files: &BTreeMap<String, String>) -> Vec<Violation> {
    files
        .keys()
        .filter(|f| f.ends_with("/mod.rs"))
        .map(|f| {
            violation(
                f,
                1,
                "no-mod-rs",
                format!(
                    "no mod.rs: name it {}.rs next to its folder",
                    f.trim_end_matches("/mod.rs")
                ),
            )
        })
        .collect()
}

fn face_doc(files: &BTreeMap<String, String>) -> Vec<Violation> {
    let folders: BTreeSet<&str> = files
        .keys()
        .flat_map(|f| f.match_indices('/').map(move |(k, _)| &f[..k]))
        .filter(|d| d.starts_with("src/"))
        .collect();
    let mut out = Vec::new();
    for folder in folders {
        let face = format!("{folder}.rs");
        // A `folder/mod.rs` is `no-mod-rs`'s business; its doc is read as the face here.
        let found = files.get(&face).or_else(|| files.get(&format!("{folder}/mod.rs")));
        match found {
            None => out.push(violation(
                &face,
                1,
                "face-doc",
                format!("folder {folder}/ has no face file {face}"),
            )),
            Some(src) => {
                let first = src.lines().enumerate().find(|(_, l)| !l.trim().is_empty());
                if !first.is_some_and(|(_, l)| l.trim_start().starts_with("//!")) {
                    out.push(violation(
                        &face,
                        first.map_or(1, |(k, _)| k + 1),
                        "face-doc",
                        format!("the face of {folder}/ must open with a //! paragraph: what the wing is for and what it may use"),
                    ));
                }
            }
        }
    }
    out
}

/// All violations of the tree `path -> source` (paths like `src/table/tree.rs`), sorted.
fn check(files: &BTreeMap<String, String>) -> Vec<Violation> {
    let tree = Tree::new(files);
    let refs = tree.references();
    let mut out = outside_wings(files);
    out.extend(direction(&refs));
    out.extend(circle(&refs));
    out.extend(context_below_ops(&refs));
    out.extend(pure_wing(&tree));
    out.extend(clock(&tree));
    out.extend(error_names_no_module(&tree));
    out.extend(no_mod_rs(files));
    out.extend(face_doc(files));
    out.sort();
    out.dedup();
    out
}

/// Reads every `src/**/*.rs` under `root` into `src/… -> text`.
fn load_tree(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| {
                e.unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
                    .path()
            })
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                let key = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy())
                    .collect::<Vec<_>>()
                    .join("/");
                let text =
                    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
                out.insert(key, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&root.join("src"), root, &mut out);
    out
}

/// The crate root: `CARGO_MANIFEST_DIR` at compile time (cargo), else at run time (a standalone `rustc --test`
/// build of this file run with `CARGO_MANIFEST_DIR=…`).
fn manifest_dir() -> String {
    option_env!("CARGO_MANIFEST_DIR")
        .map(str::to_owned)
        .or_else(|| std::env::var("CARGO_MANIFEST_DIR").ok())
        .unwrap_or_else(|| panic!("CARGO_MANIFEST_DIR is not set: run through cargo, or set it to the crate root"))
}

#[test]
fn the_source_tree_keeps_the_architecture() {
    let files = load_tree(Path::new(&manifest_dir()));
    assert!(
        files.contains_key("src/lib.rs"),
        "no src/lib.rs under {}",
        manifest_dir()
    );
    let violations = check(&files);
    let listed: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        violations.is_empty(),
        "{} architecture violations (rules: tests/it/architecture.rs):\n{}",
        violations.len(),
        listed.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------------------
// The rules on synthetic trees.

/// A small tree that keeps every rule.
fn clean_tree() -> BTreeMap<String, String> {
    [
        (
            "src/lib.rs",
            "//! root\npub mod error;\npub mod model;\npub use error::Error;\npub use report::Html;\n",
        ),
        ("src/main.rs", "use lakedrill::Error;\nfn main() {}\n"),
        ("src/error.rs", "//! errors\npub struct Error;\n"),
        (
            "src/clock.rs",
            "//! clock\npub fn now() -> u64 { chrono::Utc::now(); 0 }\n",
        ),
        ("src/model.rs", "//! model\npub mod object;\n"),
        (
            "src/model/object.rs",
            "//! objects\nuse crate::error::Error;\npub struct Layer;\n",
        ),
        ("src/govern.rs", "//! govern\npub mod closure;\npub mod policy;\n"),
        ("src/govern/policy.rs", "//! policy\npub struct Policy;\n"),
        (
            "src/govern/closure.rs",
            "//! closure\nuse crate::model::object::Layer;\nuse super::policy::Policy;\n",
        ),
        ("src/report.rs", "//! report\npub struct Html;\n"),
        ("src/io.rs", "//! io\npub struct Db;\n"),
        (
            "src/bundle.rs",
            "//! bundle\nuse crate::{govern::closure, model::object::Layer};\npub struct Seal;\n",
        ),
        ("src/ops.rs", "//! ops\npub mod context;\nuse crate::bundle::Seal;\n"),
        ("src/ops/context.rs", "//! context\npub struct Context;\n"),
        ("src/lab.rs", "//! lab\nuse crate::ops::context::Context;\n"),
    ]
    .into_iter()
    .map(|(f, s)| (f.to_owned(), s.to_owned()))
    .collect()
}

fn with(mut tree: BTreeMap<String, String>, file: &str, src: &str) -> BTreeMap<String, String> {
    tree.insert(file.to_owned(), src.to_owned());
    tree
}

/// `(file, line, rule)` of each violation.
fn places(v: &[Violation]) -> Vec<(&str, usize, &str)> {
    v.iter().map(|v| (v.file.as_str(), v.line, v.rule)).collect()
}

#[test]
fn a_clean_synthetic_tree_has_no_violation() {
    let v = check(&clean_tree());
    assert!(v.is_empty(), "{v:#?}");
}

#[test]
fn one_forbidden_import_is_one_direction_violation_naming_its_line() {
    let tree = with(
        clean_tree(),
        "src/govern/closure.rs",
        "//! closure\nuse crate::model::object::Layer;\n\nuse crate::report::Html;\n",
    );
    let v = check(&tree);
    assert_eq!(places(&v), [("src/govern/closure.rs", 4, "direction")], "{v:#?}");
    assert_eq!(
        v[0].to_string(),
        "src/govern/closure.rs:4: direction: govern may not import report (crate::report::Html) — allowed: evidence, model, ground"
    );
}

#[test]
fn an_inline_path_in_an_expression_is_an_import() {
    let tree = with(
        clean_tree(),
        "src/model/object.rs",
        "//! objects\npub fn f() {\n    let _ = crate::govern::policy::Policy;\n}\n",
    );
    assert_eq!(places(&check(&tree)), [("src/model/object.rs", 3, "direction")]);
}

#[test]
fn grouped_multi_line_use_counts_each_leaf_on_its_line() {
    let tree = with(
        clean_tree(),
        "src/govern/closure.rs",
        "//! closure\nuse crate::{\n    model::object::Layer,\n    report::{\n        self,\n        Html as H,\n    },\n    io::*,\n};\n",
    );
    let v = check(&tree);
    assert_eq!(
        places(&v),
        [
            ("src/govern/closure.rs", 5, "direction"),
            ("src/govern/closure.rs", 6, "direction"),
            ("src/govern/closure.rs", 8, "direction"),
        ],
        "{v:#?}"
    );
    assert!(v[0].message.contains("(crate::report)"), "{}", v[0]);
    assert!(v[1].message.contains("(crate::report::Html)"), "{}", v[1]);
    assert!(
        v[2].message.contains("govern may not import io (crate::io::*)"),
        "{}",
        v[2]
    );
}

#[test]
fn super_and_self_resolve_against_the_module_path() {
    let tree = with(
        clean_tree(),
        "src/govern/closure.rs",
        "//! closure\nuse super::policy::Policy;\nuse self::inner::X;\nuse super::super::report::Html;\nmod inner { pub struct X; use super::super::policy::Policy; }\n",
    );
    let t = Tree::new(&tree);
    let refs: Vec<(String, usize, String)> = t
        .references()
        .into_iter()
        .filter(|r| r.from == "src/govern/closure.rs")
        .map(|r| (r.to, r.line, r.text))
        .collect();
    assert_eq!(
        refs,
        [
            ("src/govern/policy.rs".to_owned(), 2, "super::policy::Policy".to_owned()),
            ("src/report.rs".to_owned(), 4, "super::super::report::Html".to_owned()),
            (
                "src/govern/policy.rs".to_owned(),
                5,
                "super::super::policy::Policy".to_owned()
            ),
        ]
    );
    assert_eq!(places(&check(&tree)), [("src/govern/closure.rs", 4, "direction")]);
}

#[test]
fn a_root_reexport_resolves_to_its_file() {
    let tree = with(
        clean_tree(),
        "src/model/object.rs",
        "//! objects\nuse crate::Error;\nuse crate::Html;\n",
    );
    let v = check(&tree);
    assert_eq!(places(&v), [("src/model/object.rs", 3, "direction")], "{v:#?}");
    assert!(
        v[0].message.contains("model may not import report (crate::Html)"),
        "{}",
        v[0]
    );
}

#[test]
fn comments_strings_and_chars_make_no_edge() {
    let src = r##"//! closure: crate::report::Html in a doc comment
/// crate::report::Html
// use crate::report::Html;
/* use crate::report::Html; /* nested crate::ops */ still comment crate::bundle */
fn f<'a>(x: &'a str) -> &'a str {
    let _ = "crate::report::Html \" crate::ops::Thing";
    let _ = r#"crate::report::Html " crate::ops"#;
    let _ = b"crate::report";
    let _ = ('"', '\'', '\u{1F600}', b'"');
    x
}
fn g() { let _ = crate::report::Html; }
"##;
    let v = check(&with(clean_tree(), "src/govern/closure.rs", src));
    assert_eq!(places(&v), [("src/govern/closure.rs", 12, "direction")], "{v:#?}");
}

#[test]
fn cfg_test_modules_make_no_edge_and_code_after_them_does() {
    let src = "//! closure\n#[cfg(test)]\n#[allow(unused)]\nmod tests {\n    use crate::ops::context::Context;\n    fn f() { if true { let _ = chrono::Utc::now(); } }\n    async fn g() { tokio::spawn(()); }\n}\nuse crate::report::Html;\n";
    let v = check(&with(clean_tree(), "src/govern/closure.rs", src));
    assert_eq!(places(&v), [("src/govern/closure.rs", 9, "direction")], "{v:#?}");
}

#[test]
fn a_two_file_circle_is_reported_edge_by_edge() {
    let tree = with(
        clean_tree(),
        "src/govern/policy.rs",
        "//! policy\n\nuse crate::govern::closure::X;\npub struct Policy;\n",
    );
    let v = check(&tree);
    assert_eq!(
        places(&v),
        [
            ("src/govern/closure.rs", 3, "circle"),
            ("src/govern/closure.rs", 3, "circle"),
            ("src/govern/policy.rs", 3, "circle"),
        ],
        "{v:#?}"
    );
    let text: Vec<String> = v.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|l| l.ends_with("circle 1 holds 2 files: src/govern/closure.rs, src/govern/policy.rs")),
        "{text:#?}"
    );
    assert!(
        text.iter()
            .any(|l| l.contains("src/govern/policy.rs imports src/govern/closure.rs (crate::govern::closure::X)")),
        "{text:#?}"
    );
}

#[test]
fn a_face_and_its_child_using_each_other_make_a_circle() {
    // `mod seal; pub use seal::Sealed;` in the face and `use super::Format;` in the child: two files, one circle.
    let tree = with(
        with(
            clean_tree(),
            "src/model.rs",
            "//! model\npub mod object;\nmod seal;\npub use seal::Sealed;\npub struct Format;\n",
        ),
        "src/model/seal.rs",
        "//! seal\nuse super::Format;\npub struct Sealed;\n",
    );
    let v = check(&tree);
    assert!(
        places(&v).contains(&("src/model.rs", 4, "circle")) && places(&v).contains(&("src/model/seal.rs", 2, "circle")),
        "{v:#?}"
    );
    // A face that only re-exports its children is no circle.
    let tree = with(
        with(
            clean_tree(),
            "src/model.rs",
            "//! model\npub mod object;\nmod seal;\npub use seal::Sealed;\n",
        ),
        "src/model/seal.rs",
        "//! seal\nuse super::object::Layer;\npub struct Sealed(Layer);\n",
    );
    assert_eq!(check(&tree), Vec::new());
}

#[test]
fn a_file_reaching_itself_through_super_is_a_circle() {
    let tree = with(
        clean_tree(),
        "src/govern/policy.rs",
        "//! policy\nuse super::policy::Other;\npub struct Policy;\n",
    );
    assert_eq!(places(&check(&tree)), [("src/govern/policy.rs", 2, "circle")]);
}

#[test]
fn context_is_seen_only_by_ops_lab_and_cli() {
    let tree = with(
        clean_tree(),
        "src/bundle.rs",
        "//! bundle\nuse crate::ops::context::Context;\npub struct Seal;\n",
    );
    let v = check(&tree);
    assert_eq!(
        places(&v),
        [
            ("src/bundle.rs", 2, "context-below-ops"),
            ("src/bundle.rs", 2, "direction")
        ],
        "{v:#?}"
    );
    // Through a re-export in ops.rs, too.
    let tree = with(
        clean_tree(),
        "src/bundle.rs",
        "//! bundle\npub struct Seal;\nfn f(_: &crate::ops::Context) {}\n",
    );
    assert!(places(&check(&tree)).contains(&("src/bundle.rs", 3, "context-below-ops")));
}

#[test]
fn pure_wings_name_no_runtime_or_storage() {
    let src = "//! closure\n// async fn in a comment, Storage, tokio\nasync fn f() {}\nfn g(_: &Storage) { tokio::spawn(()); }\nfn h(_: StorageError) {}\n";
    let v = check(&with(clean_tree(), "src/govern/closure.rs", src));
    assert_eq!(
        places(&v),
        [
            ("src/govern/closure.rs", 3, "pure-wing"),
            ("src/govern/closure.rs", 4, "pure-wing"),
            ("src/govern/closure.rs", 4, "pure-wing")
        ],
        "{v:#?}"
    );
    let report = "//! report\npub struct Html;\nasync fn r(_: object_store::Path) { tokio::spawn(()); }\n";
    assert_eq!(
        places(&check(&with(clean_tree(), "src/report.rs", report))),
        [("src/report.rs", 3, "pure-wing")]
    );
}

#[test]
fn utc_now_lives_only_in_the_clock() {
    let src = "//! objects\npub struct Layer;\nfn f() { let _ = chrono::Utc::now(); }\n";
    let v = check(&with(clean_tree(), "src/model/object.rs", src));
    assert_eq!(places(&v), [("src/model/object.rs", 3, "clock")], "{v:#?}");
    let main = "use lakedrill::Error;\nfn main() { let _ = Utc::now(); }\n";
    assert_eq!(
        places(&check(&with(clean_tree(), "src/main.rs", main))),
        [("src/main.rs", 2, "clock")]
    );
}

#[test]
fn error_rs_names_no_module() {
    let src = "//! errors\npub struct Error;\nimpl From<crate::error::Error> for Error { }\n#[cfg(test)]\nmod tests {\n    use crate::model::object::Layer;\n}\n";
    let v = check(&with(clean_tree(), "src/error.rs", src));
    assert_eq!(
        places(&v),
        [
            ("src/error.rs", 3, "error-names-no-module"),
            ("src/error.rs", 6, "error-names-no-module")
        ],
        "{v:#?}"
    );
}

#[test]
fn mod_rs_files_outside_wings_and_faces_without_docs_are_violations() {
    let tree = with(clean_tree(), "src/model/deep/mod.rs", "//! deep\n");
    assert_eq!(places(&check(&tree)), [("src/model/deep/mod.rs", 1, "no-mod-rs")]);

    let tree = with(clean_tree(), "src/commands.rs", "//! commands\n");
    let v = check(&tree);
    assert_eq!(places(&v), [("src/commands.rs", 1, "outside-wings")], "{v:#?}");

    let tree = with(clean_tree(), "src/govern.rs", "\npub mod closure;\n");
    assert_eq!(places(&check(&tree)), [("src/govern.rs", 2, "face-doc")]);

    let mut tree = clean_tree();
    tree.remove("src/model.rs");
    assert!(places(&check(&tree)).contains(&("src/model.rs", 1, "face-doc")));
}
