//! A table location holds the table, and nothing lakedrill must keep.
//!
//! `plan` proposes as orphans the objects under the table location that no snapshot reaches. Metadata whose
//! `location` was widened (to the lakehouse root, a warehouse, a bucket) would make lakedrill's own state (the
//! signing key and trust store, the registry and catalog databases, bundles, reports, receipts, backups) and
//! other tables look like orphans. [`check`] refuses such a location before anything is planned, naming the
//! location and what it holds.
//!
//! What it looks for, in the listing the plan already made (an object counts only when it is there):
//! the files and folders the configuration names (`[registry]`, `[catalog.*]` SQLite files, `[keys]`, path
//! settings of `[defaults.*]`) and the default `reports`/`receipts` folders of the current directory; objects
//! that only lakedrill writes, by name (`bundle.dsse.json`, `*.dsse.json` reports and receipts, `*.key` and
//! `*.pub` keys, `lakedrill.toml`); and metadata files of another table (`*.metadata.json` or
//! `version-hint.text` outside this table's metadata folders), named by their catalog table when a configured
//! catalog has them. It reads no object and it does not decide what is safe to delete: that is the closure's job.

use std::collections::BTreeSet;

use rayon::prelude::*;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::govern::closure::ListedObject;
use crate::io::catalog::Catalog;
use crate::io::db::{self, DbUri};
use crate::model::location;
use crate::model::location::TableLocation;
use crate::table::{LOCATION_PROPERTIES, Table};

/// Settings of `[defaults."<command>"]` that name a file or folder lakedrill keeps.
const PATH_SETTINGS: &[&str] = &[
    "key",
    "trust",
    "bundles",
    "reports",
    "receipts",
    "to",
    "out",
    "into",
    "policy",
    "metrics_file",
    "metrics-file",
];

/// The most things a refusal lists; the rest are counted.
const SHOWN: usize = 10;

/// The local path of a SQLite database URI, `None` for PostgreSQL or an unparsable URI.
fn sqlite_path(uri: &str) -> Option<String> {
    match db::parse_uri(uri).ok()? {
        DbUri::Sqlite { path, .. } => Some(path.to_owned()),
        DbUri::Postgres(_) => None,
    }
}

/// The files and folders of lakedrill's own state that the configuration and the command-line defaults
/// name, each with what it is, as canonical URIs.
fn state_locations(config: &Config) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |what: String, path: &str| {
        if let Ok(uri) = location::canonical_uri(path) {
            out.push((what, uri));
        }
    };
    if let Some(p) = sqlite_path(&config.registry_uri()) {
        add("the registry database".into(), &p);
    }
    for (name, c) in &config.catalog {
        if let Some(p) = sqlite_path(&c.uri) {
            add(format!("the database of catalog {name}"), &p);
        }
    }
    if let Some(k) = &config.keys.signing_key {
        add("the signing key".into(), &k.display().to_string());
    }
    if let Some(t) = &config.keys.trust {
        add("the trust store".into(), &t.display().to_string());
    }
    for (command, fields) in &config.defaults {
        for (field, value) in fields {
            if let (true, Some(v)) = (PATH_SETTINGS.contains(&field.as_str()), value.as_str()) {
                add(format!("`{field}` of [defaults.\"{command}\"]"), v);
            }
        }
    }
    add("the default reports folder".into(), "reports");
    add("the default receipts folder".into(), "receipts");
    out
}

/// What an object's name says lakedrill wrote it, if it does.
fn lakedrill_artefact(name: &str) -> Option<&'static str> {
    if name == crate::bundle::ENVELOPE_FILE {
        Some("a bundle")
    } else if name.ends_with(".dsse.json") {
        Some("a signed report or receipt")
    } else if has_extension(name, crate::evidence::keys::PRIVATE_KEY_EXTENSION) {
        Some("a private key")
    } else if has_extension(name, crate::evidence::keys::PUBLIC_KEY_EXTENSION) {
        Some("a public key")
    } else if name == "lakedrill.toml" {
        Some("a lakedrill configuration")
    } else if name.ends_with(crate::evidence::inventory::ORPHAN_COPY_SUFFIX) {
        Some("an orphan quarantine copy (another table's orphanQuarantine)")
    } else {
        None
    }
}

/// Whether `name` ends with `.` and `extension` (asked of every listed object: no string is built for it).
fn has_extension(name: &str, extension: &str) -> bool {
    name.strip_suffix(extension).is_some_and(|stem| stem.ends_with('.'))
}

/// Whether a listed object's name is a table metadata file's.
fn is_metadata_name(name: &str) -> bool {
    name.ends_with(".metadata.json") || name.ends_with(".metadata.json.gz") || name == "version-hint.text"
}

/// What [`check`] asks of every listed name, found in one pass over a listing (by index into it): the objects
/// only lakedrill writes, and the table metadata files. `plan` makes it where it sorts the listing, and checks
/// while the history is still being walked.
#[derive(Debug, Default)]
pub struct ListedNames {
    /// Each object only lakedrill writes: what it is and its index.
    artefacts: Vec<(&'static str, usize)>,
    /// The index of each table metadata file (this table's own among them).
    metadata_files: Vec<usize>,
}

impl ListedNames {
    /// The names of `listing` that [`check`] asks about, in one parallel pass.
    #[must_use]
    pub fn of(listing: &[ListedObject]) -> Self {
        let found: Vec<(usize, Option<&'static str>, bool)> = listing
            .par_iter()
            .enumerate()
            .with_min_len(4096)
            .filter_map(|(i, l)| {
                let name = location::file_name(&l.path);
                let artefact = lakedrill_artefact(name);
                let metadata = is_metadata_name(name);
                (artefact.is_some() || metadata).then_some((i, artefact, metadata))
            })
            .collect();
        Self {
            artefacts: found.iter().filter_map(|(i, a, _)| a.map(|a| (a, *i))).collect(),
            metadata_files: found.iter().filter(|(_, _, m)| *m).map(|(i, _, _)| *i).collect(),
        }
    }
}

impl ListedNames {
    /// The paths of the table metadata files in `listing` (the listing these names were found in), without
    /// version hints.
    pub fn metadata_paths<'a>(&'a self, listing: &'a [ListedObject]) -> impl Iterator<Item = &'a str> + 'a {
        self.metadata_files
            .iter()
            .filter_map(|i| listing.get(*i))
            .map(|l| l.path.as_str())
            .filter(|p| location::file_name(p) != "version-hint.text")
    }
}

/// The folder of a relative path (`""` at the top).
fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// How another table's root relates to this table's root, if they overlap (segment-wise).
fn overlap(root: &str, other: &str) -> Option<&'static str> {
    let (a, b) = (root.trim_end_matches('/'), other.trim_end_matches('/'));
    if a == b {
        Some("shares this location")
    } else if b.strip_prefix(a).is_some_and(|r| r.starts_with('/')) {
        Some("lies inside this location")
    } else if a.strip_prefix(b).is_some_and(|r| r.starts_with('/')) {
        Some("lies around this location")
    } else {
        None
    }
}

/// How many other tables' metadata files are read at once.
const METADATA_READS: usize = 16;

/// Another table of a catalog, as the containment check compares it with this table.
#[derive(Debug)]
struct OtherTable {
    /// Its root: the `location` its metadata names, wherever that metadata file lies
    /// ([`TableLocation::written_root`]).
    root: String,
    /// Its [`LOCATION_PROPERTIES`] that are set, each with its canonical URI.
    write_paths: Vec<(&'static str, String)>,
    /// The same table at a later generation than the one read (same UUID, its metadata log names ours): this
    /// entry, not the one read, is where the table went on.
    newer: bool,
}

/// One row of a catalog database other than this table's own, as [`check`] names it.
#[derive(Debug)]
struct OtherEntry {
    /// `table <ident> of catalog <section>`, or for a row of another `catalog_name` in the same database,
    /// `table <ident> of catalog_name "<name>" in the database of catalog <section>`.
    who: String,
    /// `<section>.<ident>`, or `<ident> (catalog_name "<name>" in the database of catalog <section>)`.
    entry: String,
    /// What tells the row apart from every other one (its database, its `catalog_name` and its identifier), so
    /// that two sections over one database name it once.
    key: String,
    /// The canonical URI of its current metadata file.
    metadata_uri: String,
    /// What [`check`] compares, or why its metadata could not be read.
    table: std::result::Result<OtherTable, String>,
}

/// Every table of catalog `section`'s database other than `table` itself (its own entry, the same current
/// metadata file, or an earlier generation of it), under every `catalog_name` the database holds (catalogs of
/// several names may share one database, and their tables the storage), with what [`check`] compares (or why
/// its metadata could not be read). A SQLite catalog whose file does not exist holds no table.
///
/// # Errors
/// [`Error::Invalid`] naming the catalog when it cannot be opened or listed: whether another table shares
/// this location cannot be decided then.
async fn other_tables(
    section: &str,
    c: &crate::config::CatalogConfig,
    storage: &crate::io::store::Storage,
    table: &Table,
) -> Result<Vec<OtherEntry>> {
    use futures::StreamExt as _;
    if sqlite_path(&c.uri).is_some_and(|p| !std::path::Path::new(&p).exists()) {
        return Ok(Vec::new());
    }
    let cannot = |e: Error| {
        Error::invalid(
            format!("catalog {section}"),
            format!(
                "cannot list its tables to check that none shares the location of {} ({e}); lakedrill plans only \
                 when every configured catalog can be listed",
                table.name()
            ),
        )
    };
    let cat = Catalog::open(section, c, storage.options().max_metadata_bytes)
        .await
        .map_err(cannot)?;
    let tables = cat.tables_of_every_name().await;
    Box::pin(cat.close()).await;
    let tables = tables.map_err(cannot)?;
    let this = table.metadata_uri().to_owned();
    let database = sqlite_path(&c.uri).unwrap_or_else(|| c.uri.clone());
    let own_name = c.name.clone().unwrap_or_else(|| section.to_owned());
    let found: Vec<_> = futures::stream::iter(tables)
        .filter_map(|(other_name, ident, md)| {
            let this = this.clone();
            async move {
                // A row whose metadata location is no URI is kept as written: its read fails, and an unreadable
                // entry is named (it was dropped here).
                let uri = location::canonical_uri(&md).unwrap_or_else(|_| md.clone());
                // The table itself: its own catalog entry (which may have moved on since it was read). A row of
                // the same name under another `catalog_name` is another entry, and is compared.
                let own_entry = other_name.is_none() && format!("{section}.{ident}") == table.name();
                (uri != this && !own_entry).then_some((other_name, ident, uri))
            }
        })
        .map(|(other_name, ident, uri)| async move {
            let other = read_other(storage, &uri).await;
            (other_name, ident, uri, other)
        })
        .buffer_unordered(METADATA_READS)
        .collect()
        .await;
    Ok(found
        .into_iter()
        .filter(|(_, _, _, other)| {
            !other
                .as_ref()
                .is_ok_and(|(meta, uri)| same_table(table, meta, uri) == Some(Generation::Earlier))
        })
        .map(|(other_name, ident, uri, other)| {
            let (who, entry) = match &other_name {
                None => (
                    format!("table {ident} of catalog {section}"),
                    format!("{section}.{ident}"),
                ),
                Some(name) => (
                    format!("table {ident} of catalog_name {name:?} in the database of catalog {section}"),
                    format!("{ident} (catalog_name {name:?} in the database of catalog {section})"),
                ),
            };
            let key = format!(
                "table:{database}|{}|{ident}",
                other_name.as_deref().unwrap_or(&own_name)
            );
            let table = other.map(|(meta, other_uri)| OtherTable {
                newer: same_table(table, &meta, &other_uri) == Some(Generation::Later),
                root: meta.root,
                write_paths: meta.write_paths,
            });
            OtherEntry {
                who,
                entry,
                key,
                metadata_uri: uri,
                table,
            }
        })
        .collect())
}

/// What [`check`] reads of another table's metadata file.
#[derive(Debug)]
struct OtherMetadata {
    /// Its root ([`TableLocation::written_root`]).
    root: String,
    /// Its set [`LOCATION_PROPERTIES`].
    write_paths: Vec<(&'static str, String)>,
    /// Its `table-uuid`.
    uuid: String,
    /// The canonical URIs of its metadata log.
    metadata_log: Vec<String>,
}

/// Reads another table's metadata file at `uri` (bounded, gzip undone) for what [`check`] compares, with the
/// URI. Its root is the `location` it names **wherever the file lies**: a table registered from metadata kept
/// outside its location (a copy, a migration, a catalog pointed at a metadata file elsewhere) still writes its
/// files under that location. Until 2026-12 such a table could not be read as a table rooted at its file, and
/// only where its metadata file lay was compared.
async fn read_other(
    storage: &crate::io::store::Storage,
    uri: &str,
) -> std::result::Result<(OtherMetadata, String), String> {
    let max = storage.options().max_metadata_bytes;
    let read = async {
        let bytes = storage.get_bounded(uri, max, "table metadata").await?.bytes;
        let full = crate::io::metadata::parse_full_metadata(uri, &bytes, max)?;
        let m = full.metadata();
        let root = TableLocation::written_root(m.location(), uri)?;
        Ok::<_, Error>(OtherMetadata {
            root: root.trim_end_matches('/').to_owned(),
            write_paths: write_paths(m.properties()),
            uuid: m.uuid().to_string(),
            metadata_log: m
                .metadata_log()
                .iter()
                .filter_map(|l| location::canonical_uri(&l.metadata_file).ok())
                .collect(),
        })
    };
    read.await.map(|m| (m, uri.to_owned())).map_err(|e| e.to_string())
}

/// The [`LOCATION_PROPERTIES`] a table sets, each with its canonical URI (a value that is no URI is left out:
/// the table's own reads refuse it).
fn write_paths(properties: &std::collections::HashMap<String, String>) -> Vec<(&'static str, String)> {
    LOCATION_PROPERTIES
        .iter()
        .filter_map(|k| {
            let v = properties.get(*k)?;
            Some((*k, location::canonical_uri(v).ok()?.trim_end_matches('/').to_owned()))
        })
        .collect()
}

/// Where another generation of the same table stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    /// Ours names it in its metadata log.
    Earlier,
    /// It names ours in its metadata log.
    Later,
}

/// Whether `other` (read at `other_uri`) is an earlier or later generation of `table` itself (the same UUID, and
/// one's metadata log names the other's metadata file), or `None` (another table, or an unrelated copy with the
/// same UUID).
fn same_table(table: &Table, other: &OtherMetadata, other_uri: &str) -> Option<Generation> {
    let ours_logs = table
        .metadata()
        .metadata_log()
        .iter()
        .any(|m| location::canonical_uri(&m.metadata_file).is_ok_and(|u| u == other_uri));
    if !table.metadata().uuid().to_string().eq_ignore_ascii_case(&other.uuid) {
        None
    } else if ours_logs {
        Some(Generation::Earlier)
    } else if other.metadata_log.iter().any(|u| u == table.metadata_uri()) {
        Some(Generation::Later)
    } else {
        None
    }
}

/// The `table-uuid` a metadata file names, read from its first 16 KB (every writer puts it near the start:
/// after `format-version` or `location`); the whole file (bounded by `max_metadata_bytes`, gzip undone) only
/// when the start does not name it. `None`: the file names none.
async fn uuid_of(storage: &crate::io::store::Storage, uri: &str, size: u64) -> Result<Option<String>> {
    const START: u64 = 16 * 1024;
    if size > 0 {
        let head = storage.get_range(uri, 0..size.min(START)).await?;
        if !head.starts_with(&[0x1f, 0x8b])
            && let Some(u) = uuid_in(&head)
        {
            return Ok(Some(u));
        }
    }
    let max = storage.options().max_metadata_bytes;
    let bytes = storage.get_bounded(uri, max, "table metadata").await?.bytes;
    let bytes = crate::table::gunzipped(uri, &bytes, max)?;
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(rename = "table-uuid")]
        table_uuid: Option<String>,
    }
    let h: Head =
        serde_json::from_slice(&bytes).map_err(|e| Error::corrupt(uri, format!("not table metadata: {e}")))?;
    Ok(h.table_uuid)
}

/// The string value of the first `"table-uuid"` key in `bytes` (a prefix of a JSON document), if it is whole.
fn uuid_in(bytes: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"table-uuid\"";
    let at = bytes.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let rest = std::str::from_utf8(&bytes[at..]).ok().or_else(|| {
        // A prefix cut inside a multi-byte character: the valid part.
        std::str::from_utf8(&bytes[at..])
            .err()
            .map(|e| std::str::from_utf8(&bytes[at..at + e.valid_up_to()]).unwrap_or_default())
    })?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let end = rest.find('"')?;
    let value = &rest[..end];
    (!value.contains('\\')).then(|| value.to_owned())
}

/// Refuses a table whose location holds lakedrill's own state or another table, or lies inside another
/// table's location.
///
/// `listing` is the listing of the table root, by path relative to it, and `names` [`ListedNames::of`] it. Every
/// table of every configured catalog (of every `catalog_name` its SQL database holds) is compared by the
/// location its metadata names, wherever that metadata file lies: one whose location equals this one, lies
/// inside it or around it is named (Iceberg #17213: a table registered over another's location loses its files
/// to the other's orphan removal, and expiring snapshots of one deletes files the other references). A SQLite
/// catalog whose file does not exist holds no table; a catalog that cannot be listed makes the check fail.
///
/// # Errors
/// [`Error::Invalid`] naming the table location and what it holds, or naming a catalog that cannot be listed.
pub async fn check(
    config: &Config,
    storage: &crate::io::store::Storage,
    table: &Table,
    listing: &[ListedObject],
    names: &ListedNames,
    policy_file: &str,
) -> Result<()> {
    let root = table.location().root_uri().trim_end_matches('/').to_owned();
    let relative = |uri: &str| -> Option<String> {
        if uri == root {
            return Some(String::new());
        }
        uri.strip_prefix(&root)?.strip_prefix('/').map(str::to_owned)
    };
    let present = |rel: &str| -> Option<&ListedObject> {
        listing
            .iter()
            .find(|l| rel.is_empty() || l.path == rel || l.path.strip_prefix(rel).is_some_and(|r| r.starts_with('/')))
    };
    let mut found: Vec<String> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut push = |text: String, path: &str, found: &mut Vec<String>| {
        if seen.insert(path.to_owned()) {
            found.push(text);
        }
    };
    let mut state = state_locations(config);
    // The policy file the run was given (review W7: held as an orphan, every later command could not read it).
    if let Ok(uri) = location::canonical_uri(policy_file) {
        state.push(("the policy file".into(), uri));
    }
    for (what, uri) in state {
        if let Some(l) = relative(&uri).as_deref().and_then(present) {
            push(format!("{what} {uri}"), &l.path, &mut found);
        }
    }
    for (what, i) in &names.artefacts {
        let path = &listing[*i].path;
        push(format!("{what} {root}/{path}"), path, &mut found);
    }
    // This table's own metadata folders: `metadata/`, the current file's and those of the metadata log.
    let mut own: BTreeSet<String> = BTreeSet::from(["metadata".to_owned()]);
    if let Some(r) = relative(table.metadata_uri()) {
        own.insert(folder(&r).to_owned());
    }
    for m in table.metadata().metadata_log() {
        if let Ok(r) = table.location().relative(&m.metadata_file) {
            own.insert(folder(&r).to_owned());
        }
    }
    // Every other table of every configured catalog whose location is this one, lies inside it or around it,
    // or that writes files into it (`write.data.path` and the other location properties).
    let mut named: BTreeSet<String> = BTreeSet::new();
    let mut newer: Vec<String> = Vec::new();
    for (section, c) in &config.catalog {
        for e in other_tables(section, c, storage, table).await? {
            let OtherEntry {
                who,
                entry,
                key,
                metadata_uri: md_uri,
                table: other,
            } = e;
            if let Ok(o) = &other {
                if o.newer {
                    newer.push(format!(
                        "catalog entry {entry} holds a newer generation of this table (its metadata {md_uri} names \
                         {} in its metadata log)",
                        table.metadata_uri()
                    ));
                }
                // A write path equal to this location or inside it puts the other table's files in this listing.
                // One around it is not refused: a writer puts its files in a partition (`key=value`) or hash
                // folder below its path, never in another table's folder, and a bucket-wide
                // `write.object-storage.path` would otherwise stop every plan in the bucket.
                for (property, path) in &o.write_paths {
                    let how = overlap(&root, path).filter(|h| *h != "lies around this location");
                    if let Some(how) = how {
                        if let Some(r) = relative(path) {
                            named.insert(r.clone());
                        }
                        push(
                            format!(
                                "{who} (location {}) writes files into this location: its `{property}` {path} {how}",
                                o.root
                            ),
                            &format!("{key}:{property}"),
                            &mut found,
                        );
                    }
                }
            }
            // Judged by the location its metadata names, wherever its metadata file lies. A readable one whose
            // metadata file lies inside this location is named too, whatever its location: that file is in this
            // listing, unreferenced by this table. An unreadable one is named wherever its metadata file lies
            // (review W2): its location, which may be inside this one with its metadata elsewhere, is unknown, and
            // was judged by where its metadata file lies, so its files here became orphan candidates.
            let md_inside = overlap(&root, folder(&md_uri)).filter(|h| *h != "lies around this location");
            let how = match &other {
                Ok(o) => {
                    overlap(&root, &o.root).or_else(|| md_inside.map(|_| "keeps its metadata file in this location"))
                }
                Err(_) => Some(overlap(&root, folder(&md_uri)).unwrap_or(
                    "cannot be read, so whether its location lies in this one cannot be decided (make its metadata \
                     readable, or drop the catalog entry)",
                )),
            };
            let Some(how) = how else { continue };
            if let Some(r) = relative(&md_uri) {
                named.insert(folder(&r).to_owned());
            }
            let text = match other {
                Ok(o) => format!("{who} (location {}, metadata {md_uri}) {how}", o.root),
                Err(e) => format!("{who} (metadata {md_uri}, unreadable: {e}) {how}"),
            };
            push(text, &key, &mut found);
        }
    }
    if !newer.is_empty() {
        return Err(Error::invalid(
            format!("table {} (metadata {})", table.name(), table.metadata_uri()),
            format!(
                "cannot decide: {}; planned on this older generation, the newer commits' files would be proposed \
                 as orphans and its expiry would judge a history that has moved on. Plan through that entry",
                newer.join("; ")
            ),
        ));
    }
    // Metadata files in this table's own folders that neither the current file nor its log names may be another
    // table's: one dropped without purging its files and re-created at the same location gets a new UUID, and
    // every file of the old one (held ones too: protections name the old UUID) would read as this table's
    // orphans. Their `table-uuid` is read (the first few KB).
    let mut referenced: BTreeSet<String> = BTreeSet::new();
    if let Some(r) = relative(table.metadata_uri()) {
        referenced.insert(r);
    }
    for m in table.metadata().metadata_log() {
        if let Ok(r) = table.location().relative(&m.metadata_file) {
            referenced.insert(r);
        }
    }
    let this_uuid = table.metadata().uuid().to_string();
    let unnamed: Vec<&ListedObject> = names
        .metadata_files
        .iter()
        .map(|i| &listing[*i])
        .filter(|l| {
            own.contains(folder(&l.path))
                && !referenced.contains(&l.path)
                && (l.path.ends_with(".metadata.json") || l.path.ends_with(".metadata.json.gz"))
        })
        .collect();
    use futures::StreamExt as _;
    let others: Vec<(String, std::result::Result<Option<String>, Error>)> = futures::stream::iter(unnamed)
        .map(|l| {
            let uri = format!("{root}/{}", l.path);
            async move {
                let got = uuid_of(storage, &uri, l.size).await;
                (uri, got)
            }
        })
        .buffer_unordered(METADATA_READS)
        .collect()
        .await;
    let mut others: Vec<(String, std::result::Result<Option<String>, Error>)> = others
        .into_iter()
        .filter(|(_, got)| {
            !matches!(got, Ok(Some(u)) if u.eq_ignore_ascii_case(&this_uuid))
                && !matches!(got, Err(Error::NotFound { .. }))
        })
        .collect();
    others.sort_by(|a, b| a.0.cmp(&b.0));
    for (uri, got) in others {
        let what = match got {
            Ok(Some(u)) => format!(
                "metadata of another table (table-uuid {u}, this table's is {this_uuid}) in this table's metadata                  folder, {uri}: a table dropped without purging its files and re-created here?"
            ),
            Ok(None) => format!("metadata naming no table-uuid in this table's metadata folder, {uri}"),
            Err(e) => format!("metadata in this table's metadata folder whose table-uuid cannot be read, {uri} ({e})"),
        };
        push(what, &uri, &mut found);
    }
    let foreign = names
        .metadata_files
        .iter()
        .map(|i| &listing[*i])
        .filter(|l| !own.contains(folder(&l.path)));
    for l in foreign {
        if !named.contains(folder(&l.path)) && named.insert(folder(&l.path).to_owned()) {
            push(
                format!("another table's metadata {root}/{}", l.path),
                &l.path,
                &mut found,
            );
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    let more = found.len().saturating_sub(SHOWN);
    found.truncate(SHOWN);
    let mut list = found.join("; ");
    if more > 0 {
        list.push_str(&format!("; and {more} more"));
    }
    Err(Error::invalid(
        format!("table {} (location {root})", table.name()),
        format!(
            "it holds lakedrill's own state or shares storage with another table, whose files a plan would \
             propose as orphans or delete with expired snapshots: {list}; lakedrill refuses to plan over it (check \
             the metadata's `location`, or give the table's own folder with --table-root)"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys are told by their extension after a dot, not by a name that merely ends with its letters.
    #[test]
    fn artefacts_are_told_by_name_and_extension() {
        assert_eq!(lakedrill_artefact("ops.key"), Some("a private key"));
        assert_eq!(lakedrill_artefact("ops.pub"), Some("a public key"));
        assert_eq!(lakedrill_artefact(".key"), Some("a private key"));
        assert_eq!(lakedrill_artefact("monkey"), None);
        assert_eq!(lakedrill_artefact("key"), None);
        assert_eq!(lakedrill_artefact("pub"), None);
        assert_eq!(lakedrill_artefact("ops.key.parquet"), None);
        assert_eq!(lakedrill_artefact("r.dsse.json"), Some("a signed report or receipt"));
        assert_eq!(
            lakedrill_artefact("ab12-cd34.orphan-copy"),
            Some("an orphan quarantine copy (another table's orphanQuarantine)")
        );
        assert_eq!(lakedrill_artefact("orphan-copy.parquet"), None);
        assert_eq!(lakedrill_artefact("lakedrill.toml"), Some("a lakedrill configuration"));
        assert_eq!(lakedrill_artefact("00001-a.metadata.json"), None);
    }
}
