//! Loading one Iceberg table at one fixed generation.
//!
//! A table is addressed by a metadata file (`--metadata URI`), by a Hadoop-style table folder
//! (`--metadata DIR`, whose `metadata/version-hint.text` names the current file), or through a
//! catalog (`--catalog NAME --table NS.TABLE`). In every case lakedrill reads the metadata JSON
//! once, keeps its exact bytes and their BLAKE3 (the *table generation*), and from then on works
//! only from that generation: a concurrent commit is noticed by comparing generations, never
//! picked up half way.
//!
//! Every path written in the metadata is mapped through [`TableLocation`], so a path outside the
//! table location is refused before it is opened.
//!
//! This module reads metadata JSON, manifest lists and manifests; it does not read data files and
//! never writes.
//!
//! The wing: `table/tree.rs` walks one snapshot down to its live data and delete files, `table/scan.rs` walks
//! the whole history lean, `table/resolve.rs` answers selectors and time travel, `table/inspect.rs` the
//! metadata tables, `table/head.rs` finds a live table's head from its metadata folder alone. It may use `io`,
//! `model` and the ground files.

pub mod container;
pub mod counts;
pub mod entry_program;
pub mod head;
pub mod inspect;
pub mod lineage;
pub mod puffin;
pub mod resolve;
pub mod scan;
pub mod tree;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use iceberg::spec::{
    FormatVersion, Manifest, ManifestFile, ManifestList, SnapshotRef, SnapshotReference, TableMetadata,
};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::catalog::{Catalog, TableIdent};
use crate::io::store::{Fetched, Storage};
use crate::model::location::{self, TableLocation};

use crate::io::metadata::substitute_types;
pub use crate::io::metadata::{
    FullMetadata, StatisticsEntries, gunzipped, parse_full_metadata, parse_metadata, refuse_encrypted,
    types_beyond_the_model,
};

/// Table properties that name where writers put the table's files: a data or metadata folder other than
/// `<location>/data` and `<location>/metadata` (`write.object-storage.path` and `write.folder-storage.path` are
/// the older names of `write.data.path`). See: the Iceberg configuration reference, "Write properties".
pub const LOCATION_PROPERTIES: [&str; 4] = [
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
];

/// How the user addressed a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableSource {
    /// A metadata JSON file, or a Hadoop table folder with `metadata/version-hint.text`.
    Metadata {
        /// File or folder URI (or local path).
        uri: String,
        /// Where the table's files really are, when not where the metadata says.
        table_root: Option<String>,
    },
    /// A table in a declared catalog.
    Catalog {
        /// Catalog section name in the configuration.
        catalog: String,
        /// `NS.TABLE`.
        table: String,
        /// Where the table's files really are, when not where the metadata says.
        table_root: Option<String>,
    },
}

/// The table generation: which metadata file is current, and the digest of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableGeneration {
    /// The metadata location as the catalog (or the version hint) names it.
    pub metadata_location: String,
    /// BLAKE3 of the metadata file's bytes, lowercase hex.
    pub metadata_blake3: String,
}

/// One table, read at one generation.
#[derive(Debug, Clone)]
pub struct Table {
    name: String,
    metadata: Arc<TableMetadata>,
    metadata_uri: String,
    metadata_bytes: Bytes,
    generation: TableGeneration,
    location: TableLocation,
    refs: BTreeMap<String, SnapshotReference>,
    statistics: StatisticsEntries,
    given_file: bool,
    /// The table's UUID as text and the summary excesses the configuration accepts for it ([`Table::load`]).
    totals: (String, Vec<counts::AcceptedExcess>),
}

/// The next generation of a table's metadata, built from one it read ([`Table::change`]): the iceberg crate's
/// builder, with the refs followed beside it, since the crate's model of a format-v1 table holds only `main`.
/// Its ref and snapshot changes are the builder's; a ref whose snapshot is removed goes, as in the builder.
#[derive(Debug)]
pub struct MetadataChange {
    builder: iceberg::spec::TableMetadataBuilder,
    refs: BTreeMap<String, SnapshotReference>,
    statistics: StatisticsEntries,
    /// The columns of the generation changed whose types the crate's model does not have: a commit would write
    /// them as `binary`, so [`MetadataChange::build`] refuses.
    beyond: Vec<String>,
    /// That generation's metadata location (named in the refusal).
    from: String,
}

impl MetadataChange {
    /// Points ref `name` at `reference`'s snapshot.
    ///
    /// # Errors
    /// [`Error::Iceberg`] when the snapshot is not in the metadata.
    pub fn set_ref(mut self, name: &str, reference: SnapshotReference) -> Result<Self> {
        self.builder = self
            .builder
            .set_ref(name, reference.clone())
            .map_err(|e| Error::iceberg(format!("set ref {name}"), e))?;
        self.refs.insert(name.to_owned(), reference);
        Ok(self)
    }

    /// Removes ref `name` (for `main`, the current snapshot too, as the builder does).
    #[must_use]
    pub fn remove_ref(mut self, name: &str) -> Self {
        self.builder = self.builder.remove_ref(name);
        self.refs.remove(name);
        self
    }

    /// Removes snapshots; refs to them go with them.
    #[must_use]
    pub fn remove_snapshots(mut self, snapshot_ids: &[i64]) -> Self {
        self.builder = self.builder.remove_snapshots(snapshot_ids);
        self
    }

    /// The new metadata.
    ///
    /// # Errors
    /// [`Error::Iceberg`] when the builder refuses it; [`Error::Internal`] when `main` and the current snapshot
    /// disagree.
    pub fn build(self) -> Result<FullMetadata> {
        // The crate's model reads `variant`, `geometry`, `geography` and `unknown` columns as `binary` and would
        // write them so: a commit would change the table's schema for every engine. Refused instead (exit 2).
        if !self.beyond.is_empty() {
            return Err(Error::invalid(
                &self.from,
                format!(
                    "the table has columns of types lakedrill cannot write back ({}): a commit would rewrite them as \
                     binary for every engine, so lakedrill makes no catalog commit on this table (plan, seal, \
                     restore and drills work; quarantine, release, purge and rollback do not)",
                    self.beyond.join(", ")
                ),
            ));
        }
        let metadata = self
            .builder
            .build()
            .map_err(|e| Error::iceberg("build metadata", e))?
            .metadata;
        let mut refs = self.refs;
        refs.retain(|_, r| metadata.snapshot_by_id(r.snapshot_id).is_some());
        if refs.get("main").map(|r| r.snapshot_id) != metadata.current_snapshot_id() {
            return Err(Error::Internal(format!(
                "the new metadata of {} has main at {:?} but current snapshot {:?}",
                metadata.location(),
                refs.get("main").map(|r| r.snapshot_id),
                metadata.current_snapshot_id()
            )));
        }
        Ok(FullMetadata {
            metadata,
            refs,
            statistics: self.statistics,
        })
    }
}

/// A live table as [`Table::load`] gives it: one with an identity. lakedrill keys its registry (candidates, leases,
/// holds, receipts), policies and evidence by the table's UUID; a format-v1 table written without `table-uuid`
/// (the crate reads the missing field as the nil UUID), or one naming the nil UUID, would share one identity
/// with every other such table, so a lease, hold or candidate of one would be taken for the other's. Refused
/// (exit 2). Bundles sealed from such a table before this rule still verify and restore: only live tables are
/// refused.
fn identified(mut table: Table, config: &Config) -> Result<Table> {
    if table.metadata.uuid().is_nil() {
        return Err(Error::invalid(
            &table.metadata_uri,
            format!(
                "table-uuid: the table {} has no table-uuid (a format-v{} table written without one, or the nil \
                 UUID): lakedrill identifies a table in its registry, policies and evidence by its UUID and cannot \
                 tell this table from another without one; give it a UUID first (upgrading it to format v2 with \
                 Iceberg Java or PyIceberg writes one)",
                table.name,
                table.metadata.format_version() as u8
            ),
        ));
    }
    table.totals.1 = accepted_excess(config, table.metadata.uuid())?;
    Ok(table)
}

/// The summary excesses `[[summary_excess."<uuid>"]]` accepts for the table with UUID `own` (keys compared as UUIDs:
/// an uppercase or braced spelling names the same table).
fn accepted_excess(config: &Config, own: uuid::Uuid) -> Result<Vec<counts::AcceptedExcess>> {
    let mut out = Vec::new();
    if let Some((key, entries)) = config
        .summary_excess
        .iter()
        .find(|(k, _)| uuid::Uuid::parse_str(k.trim()).ok() == Some(own))
    {
        for (i, e) in entries.iter().enumerate() {
            let since_ms = e.since_ms(key, i).map_err(|reason| Error::Config {
                file: "configuration".into(),
                reason,
            })?;
            out.push(counts::AcceptedExcess {
                setting: format!("summary_excess.\"{key}\"[{i}]"),
                snapshot_id: e.snapshot,
                since_ms,
                total: e.total.clone(),
                excess: e.excess,
                reason: e.reason.clone(),
            });
        }
    }
    Ok(out)
}

impl Table {
    /// Reads a table's current metadata.
    ///
    /// # Errors
    /// Any [`Error`] naming the object that could not be read or trusted.
    pub async fn load(storage: &Storage, config: &Config, source: &TableSource) -> Result<Table> {
        match source {
            TableSource::Metadata { uri, table_root } => {
                let uri = location::canonical_uri(uri)?;
                let is_file = uri.ends_with(".json") || uri.ends_with(".json.gz");
                let (metadata_uri, default_root, name) = if is_file {
                    (uri.clone(), None, uri.clone())
                } else {
                    // A Hadoop table: the hint, then onward while the next version exists (`hadoop_metadata_file`).
                    let hint_uri = location::join(&uri, "metadata/version-hint.text");
                    let hint = match storage
                        .get_bounded(&hint_uri, storage.options().max_metadata_bytes, "version hint")
                        .await
                    {
                        Ok(h) => h,
                        Err(Error::NotFound { .. }) => {
                            return Err(Error::invalid(
                                &uri,
                                format!("not a metadata file (*.metadata.json) and {hint_uri} does not exist"),
                            ));
                        }
                        Err(e) => return Err(e),
                    };
                    let text = String::from_utf8_lossy(&hint.bytes).trim().to_owned();
                    let file = hadoop_metadata_file(storage, &uri, &text).await?;
                    (file, Some(uri.clone()), uri.clone())
                };
                let mut table = Self::from_metadata_uri(
                    storage,
                    name,
                    &metadata_uri,
                    &metadata_uri,
                    table_root.as_deref().or(default_root.as_deref()),
                )
                .await?;
                table.given_file = is_file;
                identified(table, config)
            }
            TableSource::Catalog {
                catalog,
                table,
                table_root,
            } => {
                let ident: TableIdent = table.parse()?;
                let cat =
                    Catalog::open(catalog, config.catalog(catalog)?, storage.options().max_metadata_bytes).await?;
                let location = cat.metadata_location(&ident).await;
                // Boxed, like the other pool futures: every command awaits Table::load.
                Box::pin(cat.close()).await;
                let location = location?;
                let uri = location::canonical_uri(&location)?;
                identified(
                    Self::from_metadata_uri(
                        storage,
                        format!("{catalog}.{ident}"),
                        &location,
                        &uri,
                        table_root.as_deref(),
                    )
                    .await?,
                    config,
                )
            }
        }
    }

    /// Reads the metadata file at `metadata_uri` (written `metadata_location` in the catalog) as table `name`.
    ///
    /// # Errors
    /// Any [`Error`] naming the metadata file that could not be read or trusted.
    pub async fn from_metadata_uri(
        storage: &Storage,
        name: String,
        metadata_location: &str,
        metadata_uri: &str,
        table_root: Option<&str>,
    ) -> Result<Table> {
        let max = storage.options().max_metadata_bytes;
        let fetched = storage.get_bounded(metadata_uri, max, "table metadata").await?;
        Self::from_bytes(name, metadata_location, metadata_uri, fetched.bytes, table_root, max)
    }

    /// Builds a table from metadata bytes already read (pure), refusing metadata over `max_metadata_bytes`
    /// raw or decompressed.
    ///
    /// # Errors
    /// [`Error::Parse`], [`Error::Corrupt`] or [`Error::Invalid`] naming the metadata file.
    pub fn from_bytes(
        name: String,
        metadata_location: &str,
        metadata_uri: &str,
        bytes: Bytes,
        table_root: Option<&str>,
        max_metadata_bytes: u64,
    ) -> Result<Table> {
        let FullMetadata {
            metadata,
            refs,
            statistics,
        } = parse_full_metadata(metadata_uri, &bytes, max_metadata_bytes)?;
        let root = match table_root {
            Some(r) => location::canonical_uri(r)?,
            None => TableLocation::infer_root(metadata.location(), metadata_uri)?,
        };
        let location = TableLocation::new(metadata.location(), root, metadata_uri)?;
        let metadata_uuid_text = metadata.uuid().to_string();
        let generation = TableGeneration {
            metadata_location: metadata_location.to_owned(),
            metadata_blake3: blake3::hash(&bytes).to_hex().to_string(),
        };
        Ok(Table {
            name,
            metadata: Arc::new(metadata),
            metadata_uri: metadata_uri.to_owned(),
            metadata_bytes: bytes,
            generation,
            location,
            refs,
            statistics,
            given_file: false,
            totals: (metadata_uuid_text, Vec::new()),
        })
    }

    /// Whether the user named this metadata file itself (`--metadata …/00042-….metadata.json`): no catalog and
    /// no version hint says that it is the table's current generation, so a later one may lie beside it
    /// (`plan` looks for one: `table::head::later_generations`). `false` for a table read through a catalog or
    /// a Hadoop table folder, and for one built from bytes.
    #[must_use]
    pub fn is_given_file(&self) -> bool {
        self.given_file
    }

    /// A display name: the catalog identifier or the metadata URI.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What [`counts::check_snapshot_totals`] needs of this table: its UUID and the summary excesses the
    /// configuration accepts for it (`[[summary_excess."<uuid>"]]`; none for a table not read by [`Table::load`]).
    #[must_use]
    pub fn totals_rules(&self) -> counts::TotalsRules<'_> {
        counts::TotalsRules {
            table_uuid: &self.totals.0,
            accepted: &self.totals.1,
            lineage: Some(self.metadata.as_ref()),
        }
    }

    /// Accepts for this table the summary excesses the configuration accepts for the table `uuid` (a copy that
    /// `restore --into` made of it under a new UUID carries the same summaries).
    ///
    /// # Errors
    /// [`Error::Config`] naming a malformed entry.
    pub fn accept_excess_of(&mut self, config: &Config, uuid: &str) -> Result<()> {
        if let Ok(u) = uuid::Uuid::parse_str(uuid.trim()) {
            self.totals.1 = accepted_excess(config, u)?;
        }
        Ok(())
    }

    /// The summary excesses the configuration accepts for this table.
    #[must_use]
    pub fn accepted_excess(&self) -> &[counts::AcceptedExcess] {
        &self.totals.1
    }

    /// The parsed metadata.
    #[must_use]
    pub fn metadata(&self) -> &TableMetadata {
        &self.metadata
    }

    /// The URI the metadata file was read from.
    #[must_use]
    pub fn metadata_uri(&self) -> &str {
        &self.metadata_uri
    }

    /// The metadata file's exact bytes.
    #[must_use]
    pub fn metadata_bytes(&self) -> &Bytes {
        &self.metadata_bytes
    }

    /// The generation this table was read at.
    #[must_use]
    pub fn generation(&self) -> &TableGeneration {
        &self.generation
    }

    /// The table location and root.
    #[must_use]
    pub fn location(&self) -> &TableLocation {
        &self.location
    }

    /// All refs by name (branches and tags), including `main`.
    #[must_use]
    pub fn refs(&self) -> &BTreeMap<String, SnapshotReference> {
        &self.refs
    }

    /// Every statistics and partition-statistics entry of the metadata, as written.
    #[must_use]
    pub fn statistics(&self) -> &StatisticsEntries {
        &self.statistics
    }

    /// The next generation's metadata, built on this one (a commit's `expected` is this generation's location).
    #[must_use]
    pub fn change(&self) -> MetadataChange {
        self.change_from(self.metadata.as_ref().clone())
    }

    /// [`Table::change`] from `metadata`, this generation's with a change the builder cannot make (a snapshot
    /// put back from a bundle), its refs and statistics this generation's.
    #[must_use]
    pub fn change_from(&self, metadata: TableMetadata) -> MetadataChange {
        MetadataChange {
            builder: metadata.into_builder(Some(self.generation.metadata_location.clone())),
            refs: self.refs.clone(),
            statistics: self.statistics.clone(),
            beyond: types_beyond_the_model(&self.generation.metadata_location, self.metadata_bytes(), u64::MAX),
            from: self.generation.metadata_location.clone(),
        }
    }

    /// Snapshots sorted by sequence number, then timestamp.
    #[must_use]
    pub fn snapshots_sorted(&self) -> Vec<&SnapshotRef> {
        let mut v: Vec<&SnapshotRef> = self.metadata.snapshots().collect();
        v.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()));
        v
    }

    /// The snapshot with this id.
    ///
    /// # Errors
    /// [`Error::SnapshotNotFound`].
    pub fn snapshot(&self, snapshot_id: i64) -> Result<&SnapshotRef> {
        self.metadata
            .snapshot_by_id(snapshot_id)
            .ok_or_else(|| Error::SnapshotNotFound {
                snapshot_id,
                table: self.name.clone(),
            })
    }

    /// Ids of the current snapshot and all its ancestors.
    #[must_use]
    pub fn current_ancestors(&self) -> std::collections::BTreeSet<i64> {
        let mut out = std::collections::BTreeSet::new();
        let mut cur = self.metadata.current_snapshot_id();
        while let Some(id) = cur {
            if !out.insert(id) {
                break; // a cycle in corrupt metadata must not loop forever
            }
            cur = self.metadata.snapshot_by_id(id).and_then(|s| s.parent_snapshot_id());
        }
        out
    }

    /// Reads and parses the manifest list of a snapshot.
    ///
    /// # Errors
    /// [`Error::PathOutsideTable`], or [`Error::Corrupt`] / [`Error::Parse`] naming the manifest
    /// list and the snapshot.
    pub async fn read_manifest_list(
        &self,
        storage: &Storage,
        snapshot: &SnapshotRef,
    ) -> Result<(String, Fetched, ManifestList)> {
        let written = snapshot.manifest_list();
        if written.is_empty() {
            return Err(Error::corrupt(
                &self.metadata_uri,
                format!(
                    "snapshot {} has no manifest list (v1 embedded manifests are not supported)",
                    snapshot.snapshot_id()
                ),
            ));
        }
        let uri = self.location.resolve(written)?;
        let fetched = fetch_manifest_list(storage, &uri, snapshot.snapshot_id()).await?;
        let list = parse_manifest_list(&uri, &fetched.bytes, self.metadata.format_version())?;
        Ok((uri, fetched, list))
    }

    /// Reads and parses one manifest named in a manifest list.
    ///
    /// # Errors
    /// [`Error::PathOutsideTable`], or [`Error::Corrupt`] / [`Error::Parse`] naming the manifest.
    pub async fn read_manifest(&self, storage: &Storage, mf: &ManifestFile) -> Result<(String, Fetched, Manifest)> {
        let uri = self.location.resolve(&mf.manifest_path)?;
        let fetched = fetch_manifest_within(storage, &uri, mf.manifest_length, || {
            format!("manifest added by snapshot {} does not exist", mf.added_snapshot_id)
        })
        .await?;
        let bytes = fetched.bytes.clone();
        let uri2 = uri.clone();
        let manifest = tokio::task::spawn_blocking(move || parse_manifest(&uri2, &bytes))
            .await
            .map_err(|e| Error::Internal(format!("manifest parse task for {uri}: {e}")))??;
        counts::ListEntry::of(mf).check_counts(&uri, &counts::EntryTally::of_manifest(&manifest))?;
        Ok((uri, fetched, manifest))
    }
}

/// Reads a manifest that a manifest list records as `recorded` bytes long: it must exist (else an
/// [`Error::Corrupt`] saying `missing()`) and have that length. One longer is refused as soon as that is known
/// (the store's answer to the read, or the bytes read passing `recorded`) and never read whole: a manifest path
/// holding a huge object must fail naming it, not exhaust memory.
///
/// # Errors
/// [`Error::Corrupt`] naming the manifest (missing, longer or shorter than recorded); storage errors.
pub(crate) async fn fetch_manifest_within(
    storage: &Storage,
    uri: &str,
    recorded: i64,
    missing: impl FnOnce() -> String,
) -> Result<crate::io::store::Fetched> {
    // A negative recorded length: any object is longer, and `check_manifest_length` names the recorded value.
    let bound = u64::try_from(recorded).unwrap_or(0);
    match storage.get_within(uri, bound).await {
        Ok(crate::io::store::Within::Read(f)) => {
            check_manifest_length(uri, f.bytes.len(), recorded)?;
            Ok(f)
        }
        Ok(crate::io::store::Within::Over { size }) => Err(Error::corrupt(
            uri,
            format!(
                "manifest is {size} bytes or more, longer than the {recorded} the manifest list records (replaced?); \
                 it was not read"
            ),
        )),
        Err(Error::NotFound { .. }) => Err(Error::corrupt(uri, missing())),
        Err(e) => Err(e),
    }
}

/// Reads snapshot `snapshot_id`'s manifest list, which must exist (else an [`Error::Corrupt`] naming it) and be
/// at most `max_metadata_bytes` (`[storage]`) long: a manifest list has no recorded length, so the bound of a
/// metadata file is its bound (a list of a million manifests is a few hundred MiB; the default bound is 512 MiB).
///
/// # Errors
/// [`Error::Corrupt`] naming the list (missing, over the bound); storage errors.
pub(crate) async fn fetch_manifest_list(
    storage: &Storage,
    uri: &str,
    snapshot_id: i64,
) -> Result<crate::io::store::Fetched> {
    match storage
        .get_bounded(uri, storage.options().max_metadata_bytes, "manifest list")
        .await
    {
        Err(Error::NotFound { .. }) => Err(Error::corrupt(
            uri,
            format!("the manifest list of snapshot {snapshot_id} does not exist"),
        )),
        other => other,
    }
}

/// A truncated manifest can still decode (cut at a block boundary) and silently lose entries: the length the
/// manifest list records is the check.
///
/// # Errors
/// [`Error::Corrupt`] naming the manifest when `actual` bytes differ from the `recorded` length.
pub(crate) fn check_manifest_length(uri: &str, actual: usize, recorded: i64) -> Result<()> {
    if i64::try_from(actual).ok() == Some(recorded) {
        return Ok(());
    }
    Err(Error::corrupt(
        uri,
        format!("manifest is {actual} bytes but the manifest list records {recorded} (truncated or replaced)"),
    ))
}

pub use crate::io::avro::{AVRO_MAX_ALLOCATION, bound_avro_allocations};

/// [`container::check_container`] (what apache-avro would misread), a panic of its datum decoder an error too.
fn check_container_unwinding(uri: &str, bytes: &[u8], what: &str) -> Result<()> {
    std::panic::catch_unwind(|| container::check_container(uri, bytes)).unwrap_or_else(|_| {
        Err(Error::corrupt(
            uri,
            format!("{what} is malformed (the Avro decoder gave up)"),
        ))
    })
}

/// Parses a manifest list (pure), guarding against parser panics on hostile bytes. Its Avro framing is checked
/// first (`container::check_container`): apache-avro reads a lowered block count as fewer entries, and a count of 0 as
/// the end of the file.
///
/// # Errors
/// [`Error::Parse`] naming the URI; [`Error::Corrupt`] naming it when its framing is broken.
pub fn parse_manifest_list(uri: &str, bytes: &[u8], version: FormatVersion) -> Result<ManifestList> {
    bound_avro_allocations();
    check_container_unwinding(uri, bytes, "manifest list")?;
    let res = std::panic::catch_unwind(|| ManifestList::parse_with_version(bytes, version));
    match res {
        Ok(Ok(l)) => Ok(l),
        Ok(Err(e)) => Err(Error::Parse {
            uri: uri.to_owned(),
            what: "manifest list",
            source: Box::new(e),
        }),
        Err(_) => Err(Error::corrupt(
            uri,
            "manifest list is malformed (the Avro decoder gave up)",
        )),
    }
}

/// Parses a manifest (pure), guarding against parser panics on hostile bytes, its Avro framing checked first as
/// [`parse_manifest_list`]'s.
///
/// # Errors
/// [`Error::Parse`] naming the URI.
pub fn parse_manifest(uri: &str, bytes: &[u8]) -> Result<Manifest> {
    bound_avro_allocations();
    check_container_unwinding(uri, bytes, "manifest")?;
    let mut res = std::panic::catch_unwind(|| Manifest::parse_avro(bytes));
    // A manifest carries its table schema as JSON in the Avro header: columns of types the iceberg crate
    // cannot model (`variant`, …) are read as `binary` there too, as in the metadata (reachability needs none).
    if matches!(res, Ok(Err(_)))
        && let Some(lenient) = lenient_manifest_header(bytes)
    {
        res = std::panic::catch_unwind(|| Manifest::parse_avro(&lenient));
    }
    match res {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(Error::Parse {
            uri: uri.to_owned(),
            what: "manifest",
            source: Box::new(e),
        }),
        Err(_) => Err(Error::corrupt(uri, "manifest is malformed (the Avro decoder gave up)")),
    }
}

/// The manifest's bytes with the table schema in its Avro header (`schema`) read leniently (columns of types
/// beyond the iceberg crate's model as `binary`), the data blocks untouched; `None` when the header is not an
/// Avro container header or nothing needs changing.
fn lenient_manifest_header(bytes: &[u8]) -> Option<Vec<u8>> {
    edit_manifest_schema(bytes, &mut |v| {
        let mut found = Vec::new();
        substitute_types(v, "", &mut found);
        !found.is_empty()
    })
}

/// The manifest's bytes with the table schema JSON of its Avro header (`schema`) passed through `edit` (which
/// says whether it changed anything), the sync marker and data blocks untouched; `None` when the header is not
/// an Avro container header or `edit` changed nothing.
fn edit_manifest_schema(bytes: &[u8], edit: &mut dyn FnMut(&mut serde_json::Value) -> bool) -> Option<Vec<u8>> {
    use integer_encoding::VarInt;
    let mut at = 4;
    if bytes.get(..4)? != b"Obj\x01" {
        return None;
    }
    let long = |at: &mut usize| -> Option<i64> {
        let (v, n) = i64::decode_var(bytes.get(*at..)?)?;
        *at += n;
        Some(v)
    };
    let mut entries: Vec<(&[u8], Vec<u8>)> = Vec::new();
    let mut changed = false;
    loop {
        let mut count = long(&mut at)?;
        if count == 0 {
            break;
        }
        if count < 0 {
            count = count.checked_neg()?;
            long(&mut at)?; // the block's size in bytes
        }
        for _ in 0..count {
            let kl = usize::try_from(long(&mut at)?).ok()?;
            let key = bytes.get(at..at.checked_add(kl)?)?;
            at += kl;
            let vl = usize::try_from(long(&mut at)?).ok()?;
            let value = bytes.get(at..at.checked_add(vl)?)?;
            at += vl;
            let mut value = value.to_vec();
            if key == b"schema"
                && let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&value)
                && edit(&mut v)
            {
                value = serde_json::to_vec(&v).ok()?;
                changed = true;
            }
            entries.push((key, value));
        }
    }
    if !changed {
        return None;
    }
    let mut out = b"Obj\x01".to_vec();
    let n = i64::try_from(entries.len()).ok()?;
    out.extend(n.encode_var_vec());
    for (k, v) in entries {
        out.extend(i64::try_from(k.len()).ok()?.encode_var_vec());
        out.extend(k);
        out.extend(i64::try_from(v.len()).ok()?.encode_var_vec());
        out.extend(v);
    }
    out.extend(0i64.encode_var_vec());
    out.extend(bytes.get(at..)?); // the sync marker and the data blocks
    Some(out)
}

/// The version of a Hadoop metadata file name, `v42.metadata.json` (also `v42.gz.metadata.json` and
/// `v42.metadata.json.gz`) giving 42; `None` for any other name.
#[must_use]
pub fn hadoop_version(file_name: &str) -> Option<u64> {
    let stem = file_name
        .strip_suffix(".gz.metadata.json")
        .or_else(|| file_name.strip_suffix(".metadata.json.gz"))
        .or_else(|| file_name.strip_suffix(".metadata.json"))?;
    let n = stem.strip_prefix('v')?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// The existing metadata file of Hadoop version `n` in `meta_dir`, if any (the names Iceberg's
/// `HadoopTableOperations.getMetadataFile` tries).
async fn hadoop_version_file(storage: &Storage, meta_dir: &str, n: u64) -> Result<Option<String>> {
    for c in [
        format!("v{n}.metadata.json"),
        format!("v{n}.gz.metadata.json"),
        format!("v{n}.metadata.json.gz"),
    ] {
        let uri = location::join(meta_dir, &c);
        if storage.head(&uri).await?.is_some() {
            return Ok(Some(uri));
        }
    }
    Ok(None)
}

/// Finds the current metadata file of a Hadoop table from its `version-hint.text` content, then reads onward
/// while the next version exists, as Iceberg does.
///
/// A Hadoop commit is the rename of `v(N+1).metadata.json` into place; the hint is written after it, and
/// Iceberg only warns when that write fails. `HadoopTableOperations.refresh()` therefore starts at the hint
/// and takes `v(N+2)`, … while they exist: every Iceberg reader sees the newest version, whatever the hint
/// says. Planning on the hint's version instead would make the later commits' metadata file, manifest lists
/// and data files orphans (they are in no metadata the older version knows). A stale hint is followed onward,
/// with a warning naming both files. See: iceberg `core/src/main/java/org/apache/iceberg/hadoop/HadoopTableOperations.java`.
async fn hadoop_metadata_file(storage: &Storage, table_uri: &str, hint: &str) -> Result<String> {
    let meta_dir = location::join(table_uri, "metadata");
    let hint_uri = location::join(&meta_dir, "version-hint.text");
    if hint.is_empty() {
        return Err(Error::corrupt(hint_uri, "version hint is empty"));
    }
    let (hinted, candidates) = if let Ok(n) = hint.parse::<u64>() {
        let candidates = vec![
            format!("v{n}.metadata.json"),
            format!("v{n}.gz.metadata.json"),
            format!("v{n}.metadata.json.gz"),
        ];
        (hadoop_version_file(storage, &meta_dir, n).await?, candidates)
    } else if !hint.contains('/') {
        let uri = location::join(&meta_dir, hint);
        let found = storage.head(&uri).await?.is_some().then_some(uri);
        (found, vec![hint.to_owned()])
    } else {
        return Err(Error::corrupt(
            hint_uri,
            format!("version hint {hint:?} is neither a version number nor a file name"),
        ));
    };
    let Some(hinted) = hinted else {
        return Err(Error::corrupt(
            hint_uri,
            format!("version hint {hint:?} names no existing metadata file (tried {candidates:?})"),
        ));
    };
    let Some(mut n) = hadoop_version(location::file_name(&hinted)) else {
        return Ok(hinted);
    };
    let mut current = hinted.clone();
    loop {
        // A version number at the top of u64 has no next one to look for: refused, never wrapped (a wrapped
        // counter would stop the walk at a stale version) or a panic.
        let Some(after) = n.checked_add(1) else {
            return Err(Error::corrupt(
                hint_uri,
                format!(
                    "{current} is version {n}, the largest version number there can be: a later version cannot be looked for"
                ),
            ));
        };
        let Some(next) = hadoop_version_file(storage, &meta_dir, after).await? else {
            break;
        };
        n = after;
        current = next;
    }
    if current != hinted {
        crate::error::warn(format!(
            "{hint_uri} names {hinted}, but later versions exist: reading {current}, the newest, as Iceberg's \
             HadoopTableOperations does (the hint is written after a commit, and a failed write leaves it behind)"
        ));
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const HADOOP_FIXTURE: &str = "tests/fixtures/interop/duckdb-iceberg/tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table/metadata";

    /// A version hint behind the newest version is read onward while the next version exists, as Iceberg's
    /// `HadoopTableOperations.refresh()` does; a gap stops it; a hint naming a file reads onward from it too.
    #[tokio::test]
    async fn a_stale_version_hint_is_read_onward_to_the_newest_version() {
        let storage = Storage::new(crate::io::store::StorageOptions::default());
        for v in [5, 6, 7, 9] {
            let bytes = std::fs::read(format!(
                "{}/{HADOOP_FIXTURE}/v{v}.metadata.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap();
            let name = if v == 6 {
                "v6.gz.metadata.json".to_owned()
            } else {
                format!("v{v}.metadata.json")
            };
            storage
                .put(&format!("memory:///t/metadata/{name}"), Bytes::from(bytes))
                .await
                .unwrap();
        }
        for hint in ["5", "6", "7", "v5.metadata.json"] {
            assert_eq!(
                hadoop_metadata_file(&storage, "memory:///t", hint).await.unwrap(),
                "memory:///t/metadata/v7.metadata.json",
                "{hint}"
            );
        }
        assert_eq!(
            hadoop_metadata_file(&storage, "memory:///t", "9").await.unwrap(),
            "memory:///t/metadata/v9.metadata.json"
        );
        let e = hadoop_metadata_file(&storage, "memory:///t", "8").await.unwrap_err();
        assert!(e.to_string().contains("names no existing metadata file"), "{e}");
        assert_eq!(hadoop_version("v12.metadata.json.gz"), Some(12));
        assert_eq!(hadoop_version("00012-a.metadata.json"), None);
        assert_eq!(hadoop_version("v.metadata.json"), None);
    }

    /// The two inputs the first fuzz run found (fuzz/regressions/README.md): each is refused with an error
    /// that names the object; neither panics out of lakedrill nor allocates without bound.
    #[test]
    fn fuzz_regressions_are_errors_naming_the_object() {
        let panic_input = include_bytes!("../fuzz/regressions/manifest-avro-schema-panic");
        let e = parse_manifest("s3://b/t/metadata/m0.avro", panic_input).unwrap_err();
        assert!(e.to_string().contains("s3://b/t/metadata/m0.avro"), "{e}");
        let huge = include_bytes!("../fuzz/regressions/manifest-list-huge-allocation");
        for v in [FormatVersion::V1, FormatVersion::V2] {
            let e = parse_manifest_list("s3://b/t/metadata/snap-1.avro", huge, v).unwrap_err();
            assert!(e.to_string().contains("s3://b/t/metadata/snap-1.avro"), "{e}");
        }
        assert_eq!(apache_avro::util::max_allocation_bytes(1), AVRO_MAX_ALLOCATION);
    }

    /// A manifest whose embedded table schema has a `variant` and a `geography` column (as a v3 writer with
    /// such columns writes it) parses, with the same entries as the original.
    #[test]
    fn a_manifest_with_columns_beyond_the_model_parses_with_its_entries() {
        let orig = include_bytes!(
            "../tests/fixtures/interop/lakedrill-spark/v3_dv/metadata/2ebc42d6-e34c-4551-b9ce-1ee19c9cf033-m0.avro"
        );
        let edited = edit_manifest_schema(orig, &mut |v| {
            let fields = v["fields"].as_array_mut().unwrap();
            fields.push(serde_json::json!({"id": 99, "name": "payload", "required": false, "type": "variant"}));
            fields.push(serde_json::json!({"id": 98, "name": "area", "required": false,
                "type": {"type": "struct", "fields": [{"id": 97, "name": "g", "required": false, "type": "geography"}]}}));
            true
        })
        .unwrap();
        assert!(
            Manifest::parse_avro(&edited).is_err(),
            "the iceberg crate alone refuses it"
        );
        let a = parse_manifest("m0.avro", orig).unwrap();
        let b = parse_manifest("m0.avro", &edited).unwrap();
        let paths = |m: &Manifest| -> Vec<String> {
            m.entries()
                .iter()
                .map(|e| e.data_file().file_path().to_owned())
                .collect()
        };
        assert_eq!(paths(&a), paths(&b));
        assert!(!paths(&a).is_empty());
        assert!(
            lenient_manifest_header(orig).is_none(),
            "nothing to change in a modelled manifest"
        );
    }

    /// Two snapshots sharing an id are refused, naming the id and the metadata file, where the iceberg crate alone
    /// keeps one of them.
    #[test]
    fn metadata_with_two_snapshots_sharing_an_id_is_refused_naming_it() {
        let snapshot = |ts: i64, list: &str| {
            serde_json::json!({
                "snapshot-id": 7, "sequence-number": 1, "timestamp-ms": ts, "manifest-list": list,
                "summary": {"operation": "append"}, "schema-id": 0
            })
        };
        let mut md = serde_json::json!({
            "format-version": 2,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "s3://b/t",
            "last-sequence-number": 1,
            "last-updated-ms": 1_700_000_000_000_i64,
            "last-column-id": 1,
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "x", "required": false, "type": "long"}]}],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {},
            "current-snapshot-id": 7,
            "refs": {"main": {"snapshot-id": 7, "type": "branch"}},
            "snapshots": [snapshot(1_700_000_000_000, "s3://b/t/metadata/snap-7-a.avro")],
            "snapshot-log": [],
            "metadata-log": []
        });
        let uri = "s3://b/t/metadata/00001-x.metadata.json";
        let bytes = serde_json::to_vec(&md).unwrap();
        parse_metadata(uri, &bytes, u64::MAX).unwrap();
        md["snapshots"]
            .as_array_mut()
            .unwrap()
            .push(snapshot(1_700_000_000_001, "s3://b/t/metadata/snap-7-b.avro"));
        let bytes = serde_json::to_vec(&md).unwrap();
        let e = parse_metadata(uri, &bytes, u64::MAX).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains(uri) && text.contains("snapshot id 7"), "{text}");
    }

    /// Format-v1 metadata as Spark writes it, with `refs` (main, and `audit`/`dev` on the first snapshot) and two
    /// statistics files for the current snapshot.
    fn v1_with_refs() -> serde_json::Value {
        let snapshot = |id: i64, parent: Option<i64>, ts: i64| {
            serde_json::json!({
                "snapshot-id": id, "parent-snapshot-id": parent, "timestamp-ms": ts,
                "manifest-list": format!("s3://b/t/metadata/snap-{id}.avro"),
                "summary": {"operation": "append"}, "schema-id": 0
            })
        };
        let stats = |path: &str| {
            serde_json::json!({"snapshot-id": 2, "statistics-path": path, "file-size-in-bytes": 10,
                "file-footer-size-in-bytes": 5, "blob-metadata": []})
        };
        serde_json::json!({
            "format-version": 1,
            "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location": "s3://b/t",
            "last-updated-ms": 1_700_000_000_002_i64,
            "last-column-id": 1,
            "schema": {"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "x", "required": false, "type": "long"}]},
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [
                {"id": 1, "name": "x", "required": false, "type": "long"}]}],
            "partition-spec": [],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {},
            "current-snapshot-id": 2,
            "refs": {
                "main": {"snapshot-id": 2, "type": "branch"},
                "audit": {"snapshot-id": 1, "type": "tag", "max-ref-age-ms": 86_400_000},
                "dev": {"snapshot-id": 1, "type": "branch", "min-snapshots-to-keep": 3}
            },
            "snapshots": [snapshot(1, None, 1_700_000_000_000), snapshot(2, Some(1), 1_700_000_000_001)],
            "statistics": [stats("s3://b/t/metadata/a.stats"), stats("s3://b/t/metadata/b.stats")],
            "snapshot-log": [{"snapshot-id": 1, "timestamp-ms": 1_700_000_000_000_i64},
                {"snapshot-id": 2, "timestamp-ms": 1_700_000_000_001_i64}],
            "metadata-log": []
        })
    }

    fn v1_table(doc: &serde_json::Value) -> Table {
        Table::from_bytes(
            "t".into(),
            "s3://b/t/metadata/00002-9c12d441-03fe-4693-9a96-a0705ddf69c1.metadata.json",
            "s3://b/t/metadata/00002-9c12d441-03fe-4693-9a96-a0705ddf69c1.metadata.json",
            Bytes::from(serde_json::to_vec(doc).unwrap()),
            None,
            u64::MAX,
        )
        .unwrap()
    }

    /// See: apache/iceberg-rust#3693. The iceberg crate reads a v1 table's `refs` as `main` alone; lakedrill reads
    /// every ref with its retention fields from the JSON.
    #[test]
    fn a_v1_tables_tags_and_branches_are_read_with_their_retention() {
        let t = v1_table(&v1_with_refs());
        let refs = t.refs();
        assert_eq!(refs.keys().collect::<Vec<_>>(), ["audit", "dev", "main"]);
        assert_eq!(refs["audit"].snapshot_id, 1);
        assert_eq!(
            refs["audit"].retention,
            iceberg::spec::SnapshotRetention::Tag {
                max_ref_age_ms: Some(86_400_000)
            }
        );
        assert_eq!(
            refs["dev"].retention,
            iceberg::spec::SnapshotRetention::branch(Some(3), None, None)
        );
        assert_eq!(refs["main"].snapshot_id, 2);
        // A v1 table written without `refs` has the implied main.
        let mut doc = v1_with_refs();
        doc.as_object_mut().unwrap().remove("refs");
        assert_eq!(v1_table(&doc).refs().keys().collect::<Vec<_>>(), ["main"]);
        // A ref to a snapshot the metadata does not hold, or a main away from the current snapshot, is refused.
        for (name, target) in [("gone", 7), ("main", 1)] {
            let mut doc = v1_with_refs();
            doc["refs"][name] = serde_json::json!({"snapshot-id": target, "type": "tag"});
            let e = parse_metadata("m.json", &serde_json::to_vec(&doc).unwrap(), u64::MAX).unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    /// A commit on a v1 table writes every ref back (the crate's JSON of the model has none), including the ones
    /// it sets, and drops only the ones it removes; both statistics files of a snapshot stay.
    #[test]
    fn a_commit_on_a_v1_table_writes_its_refs_and_statistics_back() {
        let t = v1_table(&v1_with_refs());
        let tag = SnapshotReference::new(1, iceberg::spec::SnapshotRetention::Tag { max_ref_age_ms: None });
        let new = t
            .change()
            .set_ref("quarantine/c-1", tag.clone())
            .unwrap()
            .build()
            .unwrap();
        // What the crate alone would write: no refs at all, one statistics file.
        let crate_alone: serde_json::Value = serde_json::to_value(new.metadata()).unwrap();
        assert!(crate_alone.get("refs").is_none());
        assert_eq!(crate_alone["statistics"].as_array().unwrap().len(), 1);
        let written = new.to_json().unwrap();
        let back = parse_full_metadata("next.json", &written, u64::MAX).unwrap();
        assert_eq!(
            back.refs().keys().collect::<Vec<_>>(),
            ["audit", "dev", "main", "quarantine/c-1"]
        );
        let mut want = t.refs().clone();
        want.insert("quarantine/c-1".to_owned(), tag);
        assert_eq!(back.refs(), &want);
        let paths: Vec<(i64, &str)> = back.statistics().paths().collect();
        assert_eq!(
            paths,
            [(2, "s3://b/t/metadata/a.stats"), (2, "s3://b/t/metadata/b.stats")]
        );
        assert_eq!(back.metadata().format_version(), FormatVersion::V1);
        // Removing a ref removes that one only; removing a snapshot drops the refs on it, as the builder does.
        let next = Table::from_bytes(
            "t".into(),
            "s3://b/t/metadata/00003-9c12d441-03fe-4693-9a96-a0705ddf69c1.metadata.json",
            "s3://b/t/metadata/00003-9c12d441-03fe-4693-9a96-a0705ddf69c1.metadata.json",
            Bytes::from(written),
            None,
            u64::MAX,
        )
        .unwrap();
        let released = next.change().remove_ref("quarantine/c-1").build().unwrap();
        let back = parse_full_metadata("n.json", &released.to_json().unwrap(), u64::MAX).unwrap();
        assert_eq!(back.refs(), t.refs());
        let expired = t.change().remove_snapshots(&[1]).build().unwrap();
        let back = parse_full_metadata("n.json", &expired.to_json().unwrap(), u64::MAX).unwrap();
        assert_eq!(back.refs().keys().collect::<Vec<_>>(), ["main"]);
    }

    /// The crate reads a `variant` column as `binary`, and a commit wrote it back so: after a quarantine or a
    /// purge every engine saw the column's type changed. A change of such a table is refused when built, naming
    /// the column; a table without one builds as before.
    #[test]
    fn a_change_of_a_table_with_a_variant_column_is_refused_not_written_as_binary() {
        let mut doc = v1_with_refs();
        let variant = serde_json::json!({"id": 2, "name": "payload", "required": false, "type": "variant"});
        doc["schema"]["fields"].as_array_mut().unwrap().push(variant.clone());
        doc["schemas"][0]["fields"].as_array_mut().unwrap().push(variant);
        doc["last-column-id"] = serde_json::json!(2);
        let t = v1_table(&doc);
        let e = t.change().remove_ref("audit").build().unwrap_err().to_string();
        assert!(e.contains("payload") && e.contains("binary"), "{e}");
        assert!(v1_table(&v1_with_refs()).change().remove_ref("audit").build().is_ok());
    }

    /// A version hint at the top of u64 is an error naming the hint, never a wrapped counter or a panic.
    #[tokio::test]
    async fn a_version_hint_at_the_largest_version_number_is_refused_not_wrapped() {
        let storage = Storage::new(crate::io::store::StorageOptions::default());
        let max = u64::MAX;
        for v in [max - 1, max] {
            storage
                .put(
                    &format!("memory:///t/metadata/v{v}.metadata.json"),
                    Bytes::from_static(b"{}"),
                )
                .await
                .unwrap();
        }
        for hint in [max.to_string(), (max - 1).to_string()] {
            let e = hadoop_metadata_file(&storage, "memory:///t", &hint).await.unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
            let text = e.to_string();
            assert!(
                text.contains("version-hint.text") && text.contains("largest version number"),
                "{text}"
            );
        }
    }
}
