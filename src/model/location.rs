//! Storage URIs and path safety.
//!
//! Two kinds of strings name objects in lakedrill:
//!
//! * **storage URIs**, which lakedrill reads and writes: `file:///abs/path`, `s3://bucket/key`,
//!   `memory:///key`. [`canonical_uri`] turns what a user types (a plain local path, `file:`,
//!   `s3a://`…) into this one canonical, *unencoded* form;
//! * **paths as written** in Iceberg metadata, which may be absolute, relative to the working
//!   directory of the writer (`data/x/table/...`, `./table/...`), use `file:` or `s3a://` forms,
//!   and may try to escape the table with `..`.
//!
//! [`TableLocation`] maps the second onto the first: it normalizes a written path, checks that it
//! lies under the table's `location` (as written), and rebases it onto the table root where the
//! files really are. A path outside the table is an error naming it, and since every read goes
//! through this mapping, such a path is never opened.
//!
//! This module does no I/O.

use crate::error::{Error, Result};

/// A normalized path: an optional scheme-and-authority key plus clean segments.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NormPath {
    /// `""` for schemeless relative paths, `"file"` for local absolute paths, `"s3://bucket"` …
    key: String,
    /// Path segments without `.`, `..` or empty parts.
    segments: Vec<String>,
}

/// Splits `s` into segments and resolves `.` and `..`; `None` if `..` climbs above the start.
fn clean_segments(s: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for part in s.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            p => out.push(p.to_owned()),
        }
    }
    Some(out)
}

/// Normalizes a path as written in metadata (or typed by a user).
fn normalize(written: &str) -> Option<NormPath> {
    let (key, rest) = if let Some(rest) = written.strip_prefix("file://") {
        // `file:///abs` or `file://localhost/abs`; any other host is not local.
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        if !rest.starts_with('/') {
            return None;
        }
        ("file".to_owned(), rest)
    } else if let Some(rest) = written.strip_prefix("file:") {
        if !rest.starts_with('/') {
            return None;
        }
        ("file".to_owned(), rest)
    } else if let Some((scheme, rest)) = written.split_once("://") {
        if scheme.is_empty()
            || !scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        {
            return None;
        }
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "s3a" | "s3n" => "s3".to_owned(),
            "gcs" => "gs".to_owned(),
            "azure" => "az".to_owned(),
            s => s.to_owned(),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() && scheme != "memory" {
            return None;
        }
        (format!("{scheme}://{authority}"), path)
    } else if written.starts_with('/') {
        ("file".to_owned(), written)
    } else {
        (String::new(), written)
    };
    let segments = clean_segments(rest)?;
    Some(NormPath { key, segments })
}

/// Turns a user-supplied location into lakedrill's canonical storage URI.
///
/// Plain paths are made absolute against the current directory. `s3a://` and `s3n://` become
/// `s3://`, `gcs://` becomes `gs://` (Google Cloud Storage) and `azure://` becomes `az://` (Azure Blob Storage,
/// `az://<container>/<path>`, the account from the environment). The result has no trailing slash and is not percent-encoded.
///
/// # Errors
/// [`Error::BadUri`] for empty input, an unsupported scheme, a `file://` URI with a remote host,
/// or a `..` that climbs above the root.
pub fn canonical_uri(input: &str) -> Result<String> {
    let bad = |reason: &str| Error::BadUri {
        uri: input.to_owned(),
        reason: reason.to_owned(),
    };
    if input.trim().is_empty() {
        return Err(bad("empty"));
    }
    if let Some(scheme) = scheme_without_slashes(input) {
        return Err(bad(&format!(
            "starts with the scheme `{scheme}:` but not `{scheme}://` (a URI needs two slashes after its scheme: \
             `{scheme}://bucket/prefix`); a local folder whose name holds a colon is written `./{input}`"
        )));
    }
    let owned;
    let input_abs = if input.contains("://") || input.starts_with("file:") || input.starts_with('/') {
        input
    } else {
        let cwd = std::env::current_dir().map_err(|_| bad("relative path, and the current directory is unknown"))?;
        owned = format!("{}/{input}", cwd.display());
        owned.as_str()
    };
    let norm = normalize(input_abs)
        .ok_or_else(|| bad("not a valid path or URI (remote file host, or `..` above the root)"))?;
    let path = norm.segments.join("/");
    match norm.key.as_str() {
        "file" => Ok(format!("file:///{path}")),
        k if k.starts_with("s3://")
            || k.starts_with("gs://")
            || k.starts_with("az://")
            || k.starts_with("memory://") =>
        {
            if path.is_empty() {
                Ok(k.to_owned())
            } else {
                Ok(format!("{k}/{path}"))
            }
        }
        k => Err(bad(&format!(
            "unsupported scheme in {k}; lakedrill reads file://, s3://, gs://, az:// and memory://"
        ))),
    }
}

/// The scheme of `input` when it starts like a URI (`s3:`, `gs:`, `az:`, `memory:`, any RFC 3986 scheme of two
/// or more characters before the first `/`) without the `//` that follows a scheme (`s3:/bucket/x`,
/// `s3:bucket/x`). `file:` is left out: `file:/a/b` is a valid local path URI. Such input was once read as a
/// relative local folder named `s3:` (a mistyped prefix became a new, empty table root).
fn scheme_without_slashes(input: &str) -> Option<&str> {
    let (scheme, rest) = input.split_once(':')?;
    let is_scheme = scheme.len() > 1
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.');
    (is_scheme && !scheme.eq_ignore_ascii_case("file") && !rest.starts_with("//")).then_some(scheme)
}

/// Joins a relative path onto a canonical URI.
#[must_use]
pub fn join(base: &str, rel: &str) -> String {
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        base.to_owned()
    } else if base.ends_with('/') {
        format!("{base}{rel}")
    } else {
        format!("{base}/{rel}")
    }
}

/// The parent of a canonical URI (`file:///a/b/c` → `file:///a/b`).
#[must_use]
pub fn parent(uri: &str) -> Option<String> {
    let (head, _) = uri.rsplit_once('/')?;
    if head.ends_with('/') || head.ends_with(':') {
        return None;
    }
    Some(head.to_owned())
}

/// The last segment of a URI or path.
#[must_use]
pub fn file_name(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap_or(uri)
}

/// Whether `uri` lies strictly under `prefix` (segment-wise: `orders_v2/` is never under `orders/`).
#[must_use]
pub fn is_under(uri: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    uri.len() > prefix.len() + 1 && uri.starts_with(prefix) && uri.as_bytes()[prefix.len()] == b'/'
}

/// A table's location as written in its metadata, and the root where its files really are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLocation {
    written: String,
    norm: NormPath,
    root_uri: String,
}

impl TableLocation {
    /// Binds the `location` written in a table's metadata to the canonical URI of its root.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the written location cannot be normalized.
    pub fn new(written: &str, root_uri: String, metadata_uri: &str) -> Result<Self> {
        let norm = normalize(written)
            .ok_or_else(|| Error::corrupt(metadata_uri, format!("table location {written:?} is not a valid path")))?;
        if norm.segments.is_empty() && norm.key.is_empty() {
            return Err(Error::corrupt(metadata_uri, "table location is empty"));
        }
        Ok(Self {
            written: written.to_owned(),
            norm,
            root_uri: root_uri.trim_end_matches('/').to_owned(),
        })
    }

    /// Chooses the table root for a metadata file read at `metadata_uri` when the user gave none.
    ///
    /// The written location is used when it is an absolute location that holds the metadata file;
    /// a relative location (tables written with a relative warehouse) is resolved from the metadata
    /// file's folder (`<root>/metadata/<file>`). Anything else needs an explicit `--table-root`:
    /// lakedrill never guesses where a table was copied to.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the root cannot be inferred.
    pub fn infer_root(written: &str, metadata_uri: &str) -> Result<String> {
        let inferred_from_file = || {
            let dir = parent(metadata_uri)?;
            if file_name(&dir) == "metadata" {
                parent(&dir)
            } else {
                None
            }
        };
        let Some(norm) = normalize(written) else {
            return Err(Error::corrupt(
                metadata_uri,
                format!("table location {written:?} is not a valid path"),
            ));
        };
        if norm.key.is_empty() {
            return inferred_from_file().ok_or_else(|| {
                Error::invalid(
                    metadata_uri,
                    format!("the table location {written:?} is relative and the metadata file is not in a `metadata/` folder; pass --table-root"),
                )
            });
        }
        let written_uri = canonical_uri(written)?;
        if is_under(metadata_uri, &written_uri) {
            return Ok(written_uri);
        }
        Err(Error::invalid(
            metadata_uri,
            format!(
                "the metadata file is not under the table location {written:?} written in it (a copied or restored table?); pass --table-root with the folder that holds the table's `metadata/` and data"
            ),
        ))
    }

    /// The root a table writes its files under, from the location written in its metadata *wherever the metadata
    /// file lies*: an absolute location as it is (canonical), a relative one resolved from the metadata file's
    /// `metadata/` folder as [`Self::infer_root`] does. Unlike [`Self::infer_root`], an absolute location that
    /// does not hold the metadata file is not refused: what another table's files share with this one is decided
    /// by where its writers put them, not by where its metadata file was registered from.
    ///
    /// # Errors
    /// As [`Self::infer_root`] for a relative location; [`Error::BadUri`] for an absolute one that is not a URI.
    pub fn written_root(written: &str, metadata_uri: &str) -> Result<String> {
        match normalize(written) {
            Some(norm) if !norm.key.is_empty() => canonical_uri(written),
            _ => Self::infer_root(written, metadata_uri),
        }
    }

    /// The location as written in the metadata.
    #[must_use]
    pub fn written(&self) -> &str {
        &self.written
    }

    /// The canonical URI of the table root.
    #[must_use]
    pub fn root_uri(&self) -> &str {
        &self.root_uri
    }

    /// The path of `written` relative to the table location, if it lies under it.
    ///
    /// # Errors
    /// [`Error::PathOutsideTable`] naming the path.
    pub fn relative(&self, written: &str) -> Result<String> {
        // Nearly every path a table's metadata names is written as `<its location>/<rest>`, and a `rest` without
        // empty, `.` or `..` segments normalizes to itself under the location's own segments: no normalization
        // (a key, a vector of segments and a join per path: a tenth of `plan`'s CPU on a 644k-entry history).
        if let Some(rest) = written.strip_prefix(self.written.as_str())
            && let Some(rest) = if self.written.ends_with('/') {
                Some(rest)
            } else {
                rest.strip_prefix('/')
            }
            && !rest.is_empty()
            && rest.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
        {
            return Ok(rest.to_owned());
        }
        self.relative_normalized(written)
    }

    /// [`TableLocation::relative`] by normalizing `written` whole.
    fn relative_normalized(&self, written: &str) -> Result<String> {
        let outside = || Error::PathOutsideTable {
            path: written.to_owned(),
            location: self.written.clone(),
        };
        let norm = normalize(written).ok_or_else(outside)?;
        if norm.key != self.norm.key
            || norm.segments.len() <= self.norm.segments.len()
            || norm.segments[..self.norm.segments.len()] != self.norm.segments[..]
        {
            return Err(outside());
        }
        Ok(norm.segments[self.norm.segments.len()..].join("/"))
    }

    /// A prefix an operator gives (a hold's, a writer's, a deletion right's) as a path relative to the table
    /// location.
    ///
    /// A relative prefix is relative to the table location, never to the current directory: the registry stores
    /// the prefix as given and every later command resolves it again, so it must name the same folder whichever
    /// directory that command runs from. `.` and `..` are resolved and must not climb out of the table. An
    /// absolute path or a URI must lie under the table location as written in the metadata, or under the table
    /// root where the files are.
    ///
    /// # Errors
    /// [`Error::Invalid`] (exit 2) naming the prefix and the table location, when the prefix is empty, lies
    /// outside the table, climbs out of it with `..`, or names the table location itself (a `table` scope covers
    /// the whole table).
    pub fn prefix_within(&self, p: &str) -> Result<String> {
        let refuse = |why: &str, tail: &str| {
            Error::invalid(
                format!("prefix {p:?}"),
                format!(
                    "{why} the table location {} (files at {}){tail}",
                    self.written, self.root_uri
                ),
            )
        };
        let relative_hint = "; a relative prefix is taken relative to the table location";
        if p.trim().trim_matches('/').is_empty() && !p.starts_with('/') {
            return Err(refuse("names no folder under", ""));
        }
        let absolute = |s: &str| s.starts_with('/') || s.starts_with("file:") || s.contains("://");
        // On a table whose metadata names a relative location (`./t`), a relative prefix that begins with that
        // location (`t/data`) is ambiguous: releases before prefixes were read relative to the table resolved it
        // against their working directory (where it meant `<table>/data`), so such a prefix stored in a registry
        // relates to no known folder (a hold or writer then covers the whole table, a deletion right grants
        // nothing), and a new one is refused.
        if !absolute(&self.written)
            && !absolute(p)
            && let (Some(loc), Some(pre)) = (clean_segments(&self.written), clean_segments(p))
            && !loc.is_empty()
            && pre.starts_with(&loc)
        {
            return Err(refuse(
                "is ambiguous: it begins with",
                ", which is relative; write the prefix relative to the table location (without it) or as an \
                 absolute path",
            ));
        }
        let rel = if !absolute(p) {
            clean_segments(p)
                .ok_or_else(|| refuse("climbs with `..` out of", relative_hint))?
                .join("/")
        } else if let Ok(rel) = self.relative(p) {
            rel
        } else {
            let uri = canonical_uri(p).map_err(|_| refuse("is not a path or URI under", relative_hint))?;
            if is_under(&uri, &self.root_uri) {
                uri[self.root_uri.len() + 1..].to_owned()
            } else if uri == self.root_uri || self.relative_normalized(&format!("{p}/x")).is_ok() {
                String::new()
            } else {
                return Err(refuse("is not under", relative_hint));
            }
        };
        if rel.is_empty() {
            return Err(refuse(
                "is",
                " itself, not a folder under it (a hold on the whole table is the `table` scope)",
            ));
        }
        Ok(rel)
    }

    /// A prefix read back from the registry (a hold's, a writer's, a deletion right's), relative to the table
    /// location as [`TableLocation::prefix_within`] reads it; `None` when it cannot be related to the table (stored
    /// before such prefixes were refused). A caller errs on protecting: a hold or writer whose prefix is `None`
    /// covers the whole table, a deletion right whose prefix is `None` grants nothing.
    ///
    /// This includes a prefix [`TableLocation::prefix_within`] calls ambiguous: stored by an earlier release on a
    /// table with a relative location, it relates to no known folder.
    #[must_use]
    pub fn relative_prefix(&self, p: &str) -> Option<String> {
        self.prefix_within(p).ok()
    }

    /// The storage URI where the object named `written` in the metadata really is.
    ///
    /// # Errors
    /// [`Error::PathOutsideTable`] when `written` is not under the table location.
    pub fn resolve(&self, written: &str) -> Result<String> {
        Ok(join(&self.root_uri, &self.relative(written)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_under_the_written_location_is_what_normalizing_gives() {
        let locations = [
            "s3://bkt/warehouse/t",
            "s3://bkt/warehouse/t/",
            "s3://bkt",
            "S3A://bkt/a/./b/../t",
            "file:///tmp/wh/t",
            "file:/tmp/wh/t",
            "file://localhost/tmp/wh/t",
            "/tmp/wh//t",
            "memory:///t",
            "relative/t",
        ];
        let tails = [
            "/data/x.parquet",
            "data/x.parquet",
            "/data//x.parquet",
            "/data/./x.parquet",
            "/data/../x.parquet",
            "/../t/x",
            "/../../x",
            "/",
            "",
            "2/data/x",
            "/metadata/snap-1.avro/",
            "/a b/%20/é#1",
        ];
        for loc in locations {
            let l = TableLocation::new(loc, "memory:///t".into(), "m.json").unwrap();
            for tail in tails {
                let written = format!("{loc}{tail}");
                let fast = l.relative(&written).map_err(|e| e.to_string());
                let slow = l.relative_normalized(&written).map_err(|e| e.to_string());
                assert_eq!(fast, slow, "location {loc:?}, path {written:?}");
            }
        }
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(canonical_uri("/a/b/../c/").unwrap(), "file:///a/c");
        assert_eq!(canonical_uri("file:/a/./b").unwrap(), "file:///a/b");
        assert_eq!(canonical_uri("file:///a/b").unwrap(), "file:///a/b");
        assert_eq!(canonical_uri("s3a://bkt/x//y/").unwrap(), "s3://bkt/x/y");
        assert_eq!(canonical_uri("s3://bkt").unwrap(), "s3://bkt");
        assert_eq!(canonical_uri("gcs://b/x/../y").unwrap(), "gs://b/y");
        assert_eq!(canonical_uri("azure://c/x").unwrap(), "az://c/x");
        assert!(canonical_uri("hdfs://b/x").is_err());
        assert!(canonical_uri("file://otherhost/x").is_err());
        assert!(canonical_uri("/a/../../x").is_err());
        assert!(canonical_uri("").is_err());
    }

    #[test]
    fn a_scheme_without_its_two_slashes_is_refused_not_read_as_a_relative_folder() {
        for input in [
            "s3:/bucket/wh/orders",
            "s3:bucket/wh",
            "S3A:/b/x",
            "gs:/b",
            "az:/c/x",
            "memory:/x",
        ] {
            let err = canonical_uri(input).unwrap_err();
            assert!(
                matches!(&err, Error::BadUri { uri, reason } if uri == input && reason.contains("://")),
                "{input}: {err}"
            );
        }
        // A local folder whose name holds a colon is still reachable, and `file:` keeps its one-slash form.
        assert!(canonical_uri("./s3:/bucket").unwrap().ends_with("/s3:/bucket"));
        assert_eq!(canonical_uri("file:/a/b").unwrap(), "file:///a/b");
        assert!(canonical_uri("a/b:c").unwrap().ends_with("/a/b:c"));
    }

    #[test]
    fn resolves_relative_location() {
        let loc = TableLocation::new("./lineitem_iceberg", "file:///fx/lineitem_iceberg".into(), "m").unwrap();
        assert_eq!(
            loc.resolve("lineitem_iceberg/data/a.parquet").unwrap(),
            "file:///fx/lineitem_iceberg/data/a.parquet"
        );
        assert_eq!(
            loc.resolve("./lineitem_iceberg/metadata/../data/b.parquet").unwrap(),
            "file:///fx/lineitem_iceberg/data/b.parquet"
        );
    }

    #[test]
    fn refuses_paths_outside_the_table() {
        let loc = TableLocation::new("s3://b/wh/orders", "s3://b/wh/orders".into(), "m").unwrap();
        for p in [
            "s3://b/wh/orders_v2/data/x.parquet",
            "s3://b/wh/orders/../secrets/x",
            "s3://other/wh/orders/data/x",
            "file:///wh/orders/data/x",
            "s3://b/wh/orders",
            "wh/orders/data/x",
        ] {
            let err = loc.resolve(p).unwrap_err();
            assert!(
                matches!(err, Error::PathOutsideTable { ref path, .. } if path == p),
                "{p}: {err}"
            );
        }
        assert_eq!(
            loc.resolve("s3a://b/wh/orders/data/x").unwrap(),
            "s3://b/wh/orders/data/x"
        );
    }

    #[test]
    fn rebases_onto_a_new_root() {
        let loc = TableLocation::new("file:/warehouse/db/t", "s3://bk/copy/t".into(), "m").unwrap();
        assert_eq!(
            loc.resolve("file:///warehouse/db/t/metadata/v1.json").unwrap(),
            "s3://bk/copy/t/metadata/v1.json"
        );
    }

    #[test]
    fn infers_roots() {
        assert_eq!(
            TableLocation::infer_root("./t", "file:///fx/t/metadata/v2.metadata.json").unwrap(),
            "file:///fx/t"
        );
        assert_eq!(
            TableLocation::infer_root("file:/w/t", "file:///w/t/metadata/v2.metadata.json").unwrap(),
            "file:///w/t"
        );
        assert!(TableLocation::infer_root("file:/w/t", "s3://b/t/metadata/v2.metadata.json").is_err());
    }

    /// Another table's files go under the location its metadata names, wherever that metadata file lies.
    #[test]
    fn written_roots_do_not_depend_on_where_the_metadata_file_lies() {
        assert_eq!(
            TableLocation::written_root("file:/w/t", "s3://b/elsewhere/v2.metadata.json").unwrap(),
            "file:///w/t"
        );
        assert_eq!(
            TableLocation::written_root("s3://b/t/", "file:///w/t/metadata/v2.metadata.json").unwrap(),
            "s3://b/t"
        );
        assert_eq!(
            TableLocation::written_root("./t", "file:///fx/t/metadata/v2.metadata.json").unwrap(),
            "file:///fx/t"
        );
        assert!(TableLocation::written_root("./t", "file:///fx/elsewhere/v2.metadata.json").is_err());
    }

    #[test]
    fn under_is_segment_wise() {
        assert!(is_under("s3://b/orders/x", "s3://b/orders"));
        assert!(is_under("s3://b/orders/x", "s3://b/orders/"));
        assert!(!is_under("s3://b/orders_v2/x", "s3://b/orders"));
        assert!(!is_under("s3://b/orders", "s3://b/orders"));
    }

    #[test]
    fn prefixes_are_relative_to_the_table_and_stay_in_it() {
        let local = TableLocation::new("file:/wh/db/t", "file:///wh/db/t".into(), "m").unwrap();
        let s3 = TableLocation::new("s3://b/wh/t", "s3://b/wh/t".into(), "m").unwrap();
        let rel = TableLocation::new("./t", "file:///fx/t".into(), "m").unwrap();
        for (loc, p, want) in [
            (&local, "data/region=emea", "data/region=emea"),
            (&local, "./data/x/../y/", "data/y"),
            (&local, "/wh/db/t/data/a", "data/a"),
            (&local, "file:///wh/db/t/data", "data"),
            (&s3, "data/2024", "data/2024"),
            (&s3, "s3a://b/wh/t/data/", "data"),
            (&rel, "data", "data"),
            (&rel, "/fx/t/data", "data"),
        ] {
            assert_eq!(loc.prefix_within(p).unwrap(), want, "{p}");
            assert_eq!(loc.relative_prefix(p).as_deref(), Some(want), "{p}");
        }
        for (loc, p) in [
            (&local, "/etc"),
            (&local, "../other"),
            (&local, "data/../../x"),
            (&local, "/wh/db/t_v2/data"),
            (&local, "/wh/db/t"),
            (&local, "."),
            (&local, "/"),
            (&local, ""),
            (&s3, "s3://b/wh/other/data"),
            (&s3, "s3://other/wh/t/data"),
            (&s3, "/wh/t/data"),
            (&rel, "/fx/other"),
            (&rel, "../t/data"),
        ] {
            let err = loc.prefix_within(p).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::Invalid { .. }), "{p}: {msg}");
            assert!(
                msg.contains(&format!("{p:?}")) && msg.contains(loc.written()),
                "{p}: {msg}"
            );
            assert_eq!(loc.relative_prefix(p), None, "{p}");
        }
        // On a relative location, a prefix that begins with it was resolved against the working directory by earlier
        // releases (`t/data` meant `<table>/data`): refused as input, and stored ones relate to no known folder, so
        // holds and writers stored that way cover the whole table and deletion rights grant nothing. Other prefixes
        // keep their meaning.
        for p in ["t/data", "./t/data/x", "t"] {
            assert_eq!(rel.relative_prefix(p), None, "{p}");
            let msg = rel.prefix_within(p).unwrap_err().to_string();
            assert!(msg.contains("ambiguous") && msg.contains(&format!("{p:?}")), "{msg}");
        }
        assert_eq!(rel.relative_prefix("tables/x").as_deref(), Some("tables/x"));
        assert_eq!(local.relative_prefix("wh/db/t/data").as_deref(), Some("wh/db/t/data"));
    }
}
