//! `lakedrill demo`: a real local lakehouse, built with the `iceberg` crate, and the pipeline on it.
//!
//! The lakehouse is an Iceberg SQL catalog on SQLite (`DIR/catalog.db`, catalog name `demo`)
//! with one partitioned table `sales.orders` under `DIR/warehouse`, whose history has appends
//! (Parquet files written with `parquet`'s `ArrowWriter`), overwrites, a delete, a replace, a tag and a
//! branch. Everything the demo writes stays under `DIR`. A `DIR` that exists and was not made by a
//! previous demo is refused: the demo never removes files it did not create.
//!
//! The history is made so that the expiring snapshots reach data, not only metadata: a late batch
//! withdrawn by the next overwrite, and the last append's file corrected by an overwrite and compacted
//! by a replace, leave three Parquet data files that only expiring snapshots (each in a different one)
//! reach. The demo's purge must delete at least one data file, or the demo fails; it reports how many
//! data and delete files it deleted (`purge.data_files_deleted`, `purge.delete_files_deleted`). The
//! table has no delete files (every rewrite is copy-on-write), so the second figure is 0.
//!
//! The iceberg crate's transactions can only fast-append; overwrite, delete, tag and branch
//! commits are made here the way any engine makes them: new manifests and manifest list, new
//! metadata file written once (`PutMode::Create`), then a compare-and-set of the catalog row.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use iceberg::io::LocalFsStorageFactory;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Literal, ManifestListWriter, ManifestWriterBuilder,
    NestedField, Operation, PrimitiveType, Schema, Snapshot, SnapshotReference, SnapshotRetention, Struct, Summary,
    TableMetadata, Transform, Type, UnboundPartitionSpec,
};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation, TableIdent};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};
use parquet::arrow::ArrowWriter;

use crate::error::{Error, Result};
use crate::model::location;
use crate::ops::commands::{self, InspectWhat};
use crate::ops::context::Context;
use crate::report::output::{Outcome, Verdict};
use crate::table::TableSource;
use crate::table::resolve::Selector;

const MARKER: &str = ".lakedrill-demo";
const CATALOG: &str = "demo";
const REGIONS: [&str; 3] = ["emea", "amer", "apac"];

fn ice(context: &str) -> impl FnOnce(iceberg::Error) -> Error + '_ {
    move |e| Error::iceberg(context, e)
}

/// Prepares `dir`: creates it, or clears a previous demo; refuses anything else.
fn prepare_dir(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        let marker = dir.join(MARKER);
        let empty = std::fs::read_dir(dir)
            .map_err(|e| Error::io("read directory", dir, e))?
            .next()
            .is_none();
        if !empty && !marker.exists() {
            return Err(Error::invalid(
                dir.display().to_string(),
                format!("exists and was not made by `lakedrill demo` (no {MARKER}); choose another --dir"),
            ));
        }
        if !empty {
            for sub in [
                "warehouse",
                "catalog.db",
                "bundles",
                "reports",
                "keys",
                "drills",
                "backups",
                "scratch",
                "lakedrill-registry.db",
                "lakedrill-registry.db-shm",
                "lakedrill-registry.db-wal",
                "lakedrill.toml",
            ] {
                let p = dir.join(sub);
                if p.is_dir() {
                    std::fs::remove_dir_all(&p).map_err(|e| Error::io("clear previous demo", &p, e))?;
                } else if p.exists() {
                    std::fs::remove_file(&p).map_err(|e| Error::io("clear previous demo", &p, e))?;
                }
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    std::fs::write(dir.join(MARKER), b"made by lakedrill demo\n")
        .map_err(|e| Error::io("write", dir.join(MARKER), e))?;
    dir.canonicalize().map_err(|e| Error::io("resolve", dir, e))
}

fn arrow_schema() -> Arc<ArrowSchema> {
    let f = |name: &str, t: DataType, nullable: bool, id: i32| {
        Field::new(name, t, nullable).with_metadata(HashMap::from([("PARQUET:field_id".to_owned(), id.to_string())]))
    };
    Arc::new(ArrowSchema::new(vec![
        f("id", DataType::Int64, false, 1),
        f("region", DataType::Utf8, false, 2),
        f("amount", DataType::Float64, true, 3),
    ]))
}

/// Writes one Parquet file of `rows` rows for `region` and returns its manifest entry.
async fn write_data_file(
    ctx: &Context,
    table_location: &str,
    region: &str,
    first_id: i64,
    rows: i64,
) -> Result<DataFile> {
    let ids: Vec<i64> = (first_id..first_id + rows).collect();
    #[allow(clippy::cast_precision_loss)]
    let amounts: Vec<f64> = ids.iter().map(|i| ((i * 7919) % 10_000) as f64 / 100.0).collect();
    let batch = RecordBatch::try_new(
        arrow_schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(vec![region; usize::try_from(rows).unwrap_or(0)])),
            Arc::new(Float64Array::from(amounts)),
        ],
    )
    .map_err(|e| Error::Internal(format!("demo batch: {e}")))?;
    let mut buf = Vec::new();
    {
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), None)
            .map_err(|e| Error::Internal(format!("demo parquet: {e}")))?;
        w.write(&batch)
            .map_err(|e| Error::Internal(format!("demo parquet: {e}")))?;
        w.close().map_err(|e| Error::Internal(format!("demo parquet: {e}")))?;
    }
    let path = format!(
        "{}/data/region={region}/{}.parquet",
        table_location.trim_end_matches('/'),
        uuid::Uuid::new_v4()
    );
    let size = buf.len() as u64;
    ctx.storage
        .put_new(&location::canonical_uri(&path)?, bytes::Bytes::from(buf))
        .await?;
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::from_iter([Some(Literal::string(region))]))
        .partition_spec_id(0)
        .record_count(u64::try_from(rows).unwrap_or(0))
        .file_size_in_bytes(size)
        .build()
        .map_err(|e| Error::Internal(format!("demo data file: {e}")))
}

/// Commits `new` through the demo catalog (see [`crate::io::catalog::SqlCatalog::commit`]).
async fn commit_metadata(
    ctx: &Context,
    db: &Path,
    ident: &TableIdent,
    current: &str,
    new: &TableMetadata,
) -> Result<String> {
    let cat = crate::io::catalog::SqlCatalog::open(
        CATALOG,
        &crate::config::CatalogConfig {
            kind: "sql".into(),
            uri: format!("sqlite:{}", db.display()),
            warehouse: None,
            name: None,
            ..Default::default()
        },
    )
    .await?;
    let ident = crate::io::catalog::TableIdent {
        namespace: ident.namespace().as_ref().clone(),
        name: ident.name().to_owned(),
    };
    let committed = cat
        .commit(
            &ctx.storage,
            &ident,
            current,
            &crate::table::FullMetadata::from_model(new.clone())?,
        )
        .await;
    cat.close().await;
    committed
}

/// Commits an overwrite or delete on `main`: drops `remove`, keeps the other live files, adds `add`.
async fn commit_rewrite(
    ctx: &Context,
    db: &Path,
    table: &iceberg::table::Table,
    operation: Operation,
    remove: &HashSet<String>,
    add: Vec<DataFile>,
) -> Result<()> {
    let md = table.metadata();
    let io = table.file_io();
    let current = md
        .current_snapshot()
        .ok_or_else(|| Error::Internal("demo: no current snapshot".into()))?;
    let snapshot_id = i64::from(rand::random::<u32>()) << 20 | i64::from(rand::random::<u16>());
    let seq = md.next_sequence_number();
    let list_bytes = io
        .new_input(current.manifest_list())
        .map_err(ice("open manifest list"))?
        .read()
        .await
        .map_err(ice("read manifest list"))?;
    let list = iceberg::spec::ManifestList::parse_with_version(&list_bytes, md.format_version())
        .map_err(ice("parse manifest list"))?;
    let commit = uuid::Uuid::new_v4();
    let manifest_path = format!("{}/metadata/{commit}-m0.avro", md.location());
    let mut writer = ManifestWriterBuilder::new(
        io.new_output(&manifest_path).map_err(ice("create manifest"))?,
        Some(snapshot_id),
        md.current_schema().clone(),
        md.default_partition_spec().as_ref().clone(),
    )
    .build_v2_data();
    for mf in list.entries() {
        let bytes = io
            .new_input(&mf.manifest_path)
            .map_err(ice("open manifest"))?
            .read()
            .await
            .map_err(ice("read manifest"))?;
        let manifest = iceberg::spec::Manifest::parse_avro(&bytes).map_err(ice("parse manifest"))?;
        for e in manifest.entries().iter().filter(|e| e.is_alive()) {
            let data_seq = e.sequence_number().unwrap_or(mf.sequence_number);
            let file_seq = e.file_sequence_number.unwrap_or(mf.sequence_number);
            let added_by = e.snapshot_id().unwrap_or(mf.added_snapshot_id);
            if remove.contains(e.file_path()) {
                writer
                    .add_delete_file(e.data_file().clone(), data_seq, Some(file_seq))
                    .map_err(ice("write manifest"))?;
            } else {
                writer
                    .add_existing_file(e.data_file().clone(), added_by, data_seq, Some(file_seq))
                    .map_err(ice("write manifest"))?;
            }
        }
    }
    for df in add {
        writer.add_file(df, seq).map_err(ice("write manifest"))?;
    }
    let manifest = writer.write_manifest_file().await.map_err(ice("write manifest"))?;
    let list_path = format!("{}/metadata/snap-{snapshot_id}-1-{commit}.avro", md.location());
    let out = io
        .new_output(&list_path)
        .map_err(ice("create manifest list"))?
        .writer()
        .await
        .map_err(ice("create manifest list"))?;
    let mut lw = ManifestListWriter::v2(out, snapshot_id, Some(current.snapshot_id()), seq);
    lw.add_manifests(std::iter::once(manifest))
        .map_err(ice("write manifest list"))?;
    lw.close().await.map_err(ice("write manifest list"))?;
    let snapshot = Snapshot::builder()
        .with_manifest_list(list_path)
        .with_snapshot_id(snapshot_id)
        .with_parent_snapshot_id(Some(current.snapshot_id()))
        .with_sequence_number(seq)
        .with_schema_id(md.current_schema_id())
        .with_timestamp_ms(ctx.now().timestamp_millis())
        .with_summary(Summary {
            operation,
            additional_properties: HashMap::from([("lakedrill.demo".to_owned(), "true".to_owned())]),
        })
        .build();
    let current_location = table
        .metadata_location_result()
        .map_err(ice("metadata location"))?
        .to_owned();
    let new = md
        .clone()
        .into_builder(Some(current_location.clone()))
        .set_branch_snapshot(snapshot, "main")
        .map_err(ice("set main"))?
        .build()
        .map_err(ice("build metadata"))?
        .metadata;
    commit_metadata(ctx, db, table.identifier(), &current_location, &new).await?;
    Ok(())
}

/// Points a new ref at a snapshot (a catalog commit).
async fn commit_ref(
    ctx: &Context,
    db: &Path,
    table: &iceberg::table::Table,
    name: &str,
    r: SnapshotReference,
) -> Result<()> {
    let current_location = table
        .metadata_location_result()
        .map_err(ice("metadata location"))?
        .to_owned();
    let new = table
        .metadata()
        .clone()
        .into_builder(Some(current_location.clone()))
        .set_ref(name, r)
        .map_err(ice("set ref"))?
        .build()
        .map_err(ice("build metadata"))?
        .metadata;
    commit_metadata(ctx, db, table.identifier(), &current_location, &new).await?;
    Ok(())
}

/// Opens (creating it when absent) the SQL catalog `demo` on SQLite at `db`, warehouse `warehouse`.
async fn open_catalog(db: &Path, warehouse: &Path) -> Result<iceberg_catalog_sql::SqlCatalog> {
    open_catalog_at(
        db,
        &format!("file://{}", warehouse.display()),
        Arc::new(LocalFsStorageFactory),
    )
    .await
}

/// [`open_catalog`] with the warehouse at any URI and the iceberg IO given.
async fn open_catalog_at(
    db: &Path,
    warehouse: &str,
    io: Arc<dyn iceberg::io::StorageFactory>,
) -> Result<iceberg_catalog_sql::SqlCatalog> {
    SqlCatalogBuilder::default()
        .uri(format!("sqlite:{}?mode=rwc", db.display()))
        .warehouse_location(warehouse.to_owned())
        .sql_bind_style(SqlBindStyle::QMark)
        .with_storage_factory(io)
        .load(CATALOG, crate::io::catalog::iceberg_pool_props())
        .await
        .map_err(ice("open the demo catalog"))
}

/// The demo catalog of a lakehouse built by [`build_lakehouse_in`] in `dir` (warehouse as given there).
async fn reopen_catalog(ctx: &Context, dir: &Path, warehouse: Option<&str>) -> Result<iceberg_catalog_sql::SqlCatalog> {
    let db = dir.join("catalog.db");
    match warehouse {
        None => open_catalog(&db, &dir.join("warehouse")).await,
        Some(w) => {
            let io = crate::io::iceberg_io::ObjectStoreFactory::new(Arc::new(crate::io::store::Storage::new(
                ctx.storage.options().clone(),
            )));
            open_catalog_at(&db, &location::canonical_uri(w)?, Arc::new(io)).await
        }
    }
}

/// A slow writer of `sales.orders` in the lakehouse at `dir`: writes `n` data files of region `late` and
/// commits nothing; [`late_commit`] commits them (the fault matrix's "orphan referenced after quarantine").
///
/// # Errors
/// Catalog and storage errors.
pub(crate) async fn slow_writer_files(
    ctx: &Context,
    dir: &Path,
    warehouse: Option<&str>,
    n: usize,
) -> Result<Vec<DataFile>> {
    let catalog = reopen_catalog(ctx, dir, warehouse).await?;
    let ident = TableIdent::from_strs(["sales", "orders"]).map_err(ice("table ident"))?;
    let table = catalog.load_table(&ident).await.map_err(ice("load sales.orders"))?;
    let location = table.metadata().location().to_owned();
    let mut files = Vec::new();
    for k in 0..n {
        let first = 900_000 + 1000 * i64::try_from(k).unwrap_or(0);
        files.push(write_data_file(ctx, &location, "late", first, 50).await?);
    }
    Ok(files)
}

/// Commits `files` to `sales.orders` in one append: a writer's commit that lands late.
///
/// # Errors
/// Catalog errors.
pub(crate) async fn late_commit(
    ctx: &Context,
    dir: &Path,
    warehouse: Option<&str>,
    files: Vec<DataFile>,
) -> Result<()> {
    let catalog = reopen_catalog(ctx, dir, warehouse).await?;
    let ident = TableIdent::from_strs(["sales", "orders"]).map_err(ice("table ident"))?;
    let table = catalog.load_table(&ident).await.map_err(ice("load sales.orders"))?;
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files(files)
        .apply(tx)
        .map_err(ice("late append"))?;
    tx.commit(&catalog).await.map_err(ice("commit the late append"))?;
    Ok(())
}

/// The schema of `sales.orders` (field ids 1–3, matching [`arrow_schema`]).
fn orders_schema() -> Result<Schema> {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::required(2, "region", Type::Primitive(PrimitiveType::String)).into(),
            NestedField::optional(3, "amount", Type::Primitive(PrimitiveType::Double)).into(),
        ])
        .build()
        .map_err(ice("demo schema"))
}

/// Records a drill report's verdicts in the demo's registry and anchors its chain there, as `lakedrill drill run`
/// does with a `[registry]`: the deleter reads the verdicts, and `audit verify --chain` checks the chain's head.
async fn record_and_anchor(
    ctx: &Context,
    registry: &crate::registry::Registry,
    report: &str,
    predicate: &crate::ops::drill::DrillPredicate,
) -> Result<()> {
    let now = ctx.now();
    let head = crate::ops::drill::record_verdicts(&ctx.storage, registry, report, predicate, None, now).await?;
    let folder = crate::model::location::parent(report).unwrap_or_default();
    let reports = crate::ops::drill::list_reports(&ctx.storage, &folder).await?;
    registry
        .chain_anchor(&folder, &head, i64::try_from(reports.len()).unwrap_or(i64::MAX), now)
        .await?;
    Ok(())
}

/// Creates an unpartitioned table `namespace.name` at `location` (a `file://` URI) in the SQL
/// catalog `demo` on SQLite at `db` (created when absent; its warehouse is `warehouse`) and commits
/// one append of `data_files`, which must already exist under `location`. The table has the schema
/// of the demo's `sales.orders`; the files are taken as they are described and are not read, so
/// their content need not match it. Returns the new metadata location.
///
/// Used by the throughput benchmark (`benches/throughput.rs`) to seal a table of chosen size.
///
/// # Errors
/// Any error from the catalog: it cannot be opened, the namespace or table cannot be created
/// (for example, the table exists), or the append cannot be committed.
pub async fn create_table_with_data_files(
    db: &Path,
    warehouse: &Path,
    namespace: &str,
    name: &str,
    location: &str,
    data_files: Vec<DataFile>,
) -> Result<String> {
    let catalog = open_catalog(db, warehouse).await?;
    let ns = NamespaceIdent::new(namespace.to_owned());
    if !catalog.namespace_exists(&ns).await.map_err(ice("look up namespace"))? {
        catalog
            .create_namespace(&ns, HashMap::new())
            .await
            .map_err(ice("create namespace"))?;
    }
    let creation = TableCreation::builder()
        .name(name.to_owned())
        .location(location.to_owned())
        .schema(orders_schema()?)
        .build();
    let table = catalog.create_table(&ns, creation).await.map_err(ice("create table"))?;
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files(data_files)
        .apply(tx)
        .map_err(ice("append"))?;
    let table = tx.commit(&catalog).await.map_err(ice("commit append"))?;
    Ok(table
        .metadata_location_result()
        .map_err(ice("metadata location"))?
        .to_owned())
}

fn say(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("demo: {msg}");
    }
}

/// Builds the demo lakehouse under `dir`; returns the path of its catalog database.
///
/// # Errors
/// Any error creating files, the catalog or the table.
pub async fn build_lakehouse(ctx: &Context, dir: &Path, quiet: bool) -> Result<PathBuf> {
    build_lakehouse_in(ctx, dir, None, quiet).await
}

/// [`build_lakehouse`] with the warehouse (tables, data files) at `warehouse` — an `s3://bucket/prefix`
/// for example, written through lakedrill's own storage ([`crate::io::iceberg_io`]) — instead of `DIR/warehouse`.
/// The catalog database, the registry and `lakedrill.toml` stay under `dir`.
///
/// # Errors
/// Any error creating files, the catalog or the table.
pub async fn build_lakehouse_in(ctx: &Context, dir: &Path, warehouse: Option<&str>, quiet: bool) -> Result<PathBuf> {
    let dir = prepare_dir(dir)?;
    let db = dir.join("catalog.db");
    let (warehouse, catalog) = match warehouse {
        None => {
            let w = dir.join("warehouse");
            std::fs::create_dir_all(&w).map_err(|e| Error::io("create directory", &w, e))?;
            (format!("file://{}", w.display()), open_catalog(&db, &w).await?)
        }
        Some(w) => {
            let w = location::canonical_uri(w)?;
            let io = crate::io::iceberg_io::ObjectStoreFactory::new(Arc::new(crate::io::store::Storage::new(
                ctx.storage.options().clone(),
            )));
            let catalog = open_catalog_at(&db, &w, Arc::new(io)).await?;
            (w, catalog)
        }
    };
    let ns = NamespaceIdent::new("sales".to_owned());
    catalog
        .create_namespace(&ns, HashMap::new())
        .await
        .map_err(ice("create namespace sales"))?;
    let schema = orders_schema()?;
    let spec = UnboundPartitionSpec::builder()
        .add_partition_field(2, "region", Transform::Identity)
        .map_err(ice("demo partition spec"))?
        .build();
    // The table's own retention lets snapshots expire after 1 ms, so that the demo's plan has candidates.
    let creation = TableCreation::builder()
        .name("orders".to_owned())
        .schema(schema)
        .partition_spec(spec)
        .properties([("history.expire.max-snapshot-age-ms".to_owned(), "1".to_owned())])
        .build();
    let mut table = catalog
        .create_table(&ns, creation)
        .await
        .map_err(ice("create table sales.orders"))?;
    let ident = table.identifier().clone();
    let location = table.metadata().location().to_owned();
    say(quiet, &format!("created sales.orders at {location}"));

    // Four appends, one file per region each time.
    let mut next_id = 0;
    for round in 0..4 {
        let mut files = Vec::new();
        for region in REGIONS {
            files.push(write_data_file(ctx, &location, region, next_id, 500 + round * 100).await?);
            next_id += 1000;
        }
        let tx = Transaction::new(&table);
        let tx = tx
            .fast_append()
            .add_data_files(files)
            .apply(tx)
            .map_err(ice("append"))?;
        table = tx.commit(&catalog).await.map_err(ice("commit append"))?;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    say(quiet, "4 appends committed");

    // Tag the state after the appends, for the auditors.
    let tagged = table
        .metadata()
        .current_snapshot_id()
        .ok_or_else(|| Error::Internal("demo: no snapshot".into()))?;
    commit_ref(
        ctx,
        &db,
        &table,
        "audit-q2",
        SnapshotReference::new(tagged, SnapshotRetention::Tag { max_ref_age_ms: None }),
    )
    .await?;
    table = catalog.load_table(&ident).await.map_err(ice("reload"))?;

    // A late `amer` batch, appended after the tag and withdrawn by the next overwrite: its data file is
    // reachable only from this append snapshot, which expires. See: issue 18 point 5 (data files in every path).
    let late = write_data_file(ctx, &location, "amer", 50_000, 300).await?;
    let late_path = late.file_path().to_owned();
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files(vec![late])
        .apply(tx)
        .map_err(ice("append"))?;
    table = tx.commit(&catalog).await.map_err(ice("commit append"))?;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    // Overwrite: replace the `emea` files with one corrected file, and withdraw the late batch.
    let live = live_paths(&table).await?;
    let mut emea: HashSet<String> = live.iter().filter(|p| p.contains("region=emea")).cloned().collect();
    emea.insert(late_path);
    let fixed = write_data_file(ctx, &location, "emea", 100_000, 1500).await?;
    commit_rewrite(ctx, &db, &table, Operation::Overwrite, &emea, vec![fixed]).await?;
    table = catalog.load_table(&ident).await.map_err(ice("reload"))?;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    // Branch for a what-if analysis at the overwritten state.
    let overwritten = table
        .metadata()
        .current_snapshot_id()
        .ok_or_else(|| Error::Internal("demo: no snapshot".into()))?;
    commit_ref(
        ctx,
        &db,
        &table,
        "what-if",
        SnapshotReference::new(overwritten, SnapshotRetention::branch(None, None, None)),
    )
    .await?;
    table = catalog.load_table(&ident).await.map_err(ice("reload"))?;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    // Delete: drop the `apac` partition.
    let live = live_paths(&table).await?;
    let apac: HashSet<String> = live.iter().filter(|p| p.contains("region=apac")).cloned().collect();
    commit_rewrite(ctx, &db, &table, Operation::Delete, &apac, Vec::new()).await?;
    table = catalog.load_table(&ident).await.map_err(ice("reload"))?;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    // One more append after the delete, corrected by an overwrite and then compacted by another: the first
    // two versions of that file are reachable only from snapshots that expire, so the candidate holds data
    // files of three different snapshots (a lease or a ref on any two of them still leaves one to delete).
    let f = write_data_file(ctx, &location, "amer", 200_000, 700).await?;
    let mut previous = f.file_path().to_owned();
    let tx = Transaction::new(&table);
    let tx = tx
        .fast_append()
        .add_data_files(vec![f])
        .apply(tx)
        .map_err(ice("append"))?;
    table = tx.commit(&catalog).await.map_err(ice("commit append"))?;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    for operation in [Operation::Overwrite, Operation::Replace] {
        let f = write_data_file(ctx, &location, "amer", 200_000, 700).await?;
        let next = f.file_path().to_owned();
        commit_rewrite(ctx, &db, &table, operation, &HashSet::from([previous]), vec![f]).await?;
        table = catalog.load_table(&ident).await.map_err(ice("reload"))?;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        previous = next;
    }
    say(
        quiet,
        "late batch withdrawn, overwrite, delete, tag audit-q2, branch what-if, a last append, its correction and compaction committed",
    );

    let config = format!(
        "# Written by `lakedrill demo`.\n[catalog.demo]\ntype = \"sql\"\nuri = \"sqlite:{}\"\nwarehouse = \"{}\"\n\n[registry]\nuri = \"sqlite:{}\"\n",
        db.display(),
        warehouse,
        dir.join("lakedrill-registry.db").display()
    );
    std::fs::write(dir.join("lakedrill.toml"), config)
        .map_err(|e| Error::io("write", dir.join("lakedrill.toml"), e))?;
    Ok(db)
}

async fn live_paths(table: &iceberg::table::Table) -> Result<Vec<String>> {
    use futures::TryStreamExt;
    let tasks: Vec<_> = table
        .scan()
        .select_all()
        .build()
        .map_err(ice("plan scan"))?
        .plan_files()
        .await
        .map_err(ice("plan scan"))?
        .try_collect()
        .await
        .map_err(ice("plan scan"))?;
    Ok(tasks.into_iter().map(|t| t.data_file_path.clone()).collect())
}

/// `lakedrill demo`.
///
/// # Errors
/// Any error building the lakehouse or running the pipeline on it.
pub async fn run(ctx: &Context, dir: &Path, quiet: bool) -> Result<Outcome> {
    let db = build_lakehouse(ctx, dir, quiet).await?;
    let dir = db.parent().map(Path::to_path_buf).unwrap_or_default();
    let config = crate::config::Config::load(&dir.join("lakedrill.toml"), true)?;
    let demo_ctx = Context::new(config);
    // The demo's own context is closed (its pools with it) however the pipeline ends.
    let r = pipeline(&demo_ctx, &db, &dir, quiet).await;
    demo_ctx.close().await;
    r
}

/// The pipeline of [`run`] on the lakehouse just built, in its own context.
/// `scripts/verify_report.py`, which the demo writes beside its lakehouse: the repository's copy is not where a
/// user who installed the binary runs the demo.
const VERIFY_REPORT_PY: &str = include_str!("../../scripts/verify_report.py");

async fn pipeline(demo_ctx: &Context, db: &Path, dir: &Path, quiet: bool) -> Result<Outcome> {
    let source = TableSource::Catalog {
        catalog: CATALOG.into(),
        table: "sales.orders".into(),
        table_root: None,
    };
    let table = demo_ctx.table(&source).await?;
    let mut human = format!(
        "lakehouse: {}\ncatalog:   {} (catalog `demo`, table sales.orders)\n\n",
        dir.display(),
        db.display()
    );
    let mut json = serde_json::Map::new();
    for (label, what) in [
        ("snapshots", InspectWhat::Snapshots),
        ("refs", InspectWhat::Refs),
        ("history", InspectWhat::History),
        ("files", InspectWhat::Files),
    ] {
        let o = commands::inspect_table(demo_ctx, &table, what, &Selector::Current).await?;
        human.push_str(&format!("== inspect {label}\n{}\n", o.human));
        json.insert(label.to_owned(), o.json);
    }
    json.insert("lakehouse".into(), serde_json::Value::String(dir.display().to_string()));

    // Governance: plan under a policy, quarantine the candidate (sealing its snapshots), drill the
    // bundles, audit the signed report, and purge with that evidence.
    // The private key in keys/, its public half alone in keys/trust/: the folder every --trust names, which
    // can be handed to auditors as it is.
    let keys_dir = dir.join("keys");
    let trust_dir = keys_dir.join("trust");
    let key = crate::evidence::keys::generate_in("demo-drill", &keys_dir, &trust_dir)?;
    // The deleter signs with a key of its own, and the trust folder's roles file says which key may do what:
    // `purge` never accepts evidence signed by its own key, and only keys with the drill role count.
    let deleter_key = crate::evidence::keys::generate_in("demo-deleter", &keys_dir, &trust_dir)?;
    let roles = trust_dir.join(crate::evidence::keys::ROLES_FILE);
    std::fs::write(
        &roles,
        "# Written by `lakedrill demo`: what each key's signatures count for.\nseal = [\"demo-drill\"]\ndrill = [\"demo-drill\"]\ndeleter = [\"demo-deleter\"]\n# No governance key: the demo applies no decision, so none verifies here. A governance layer's key would be\n# listed as governance = [\"NAME\"].\n",
    )
    .map_err(|e| Error::io("write", &roles, e))?;
    let policy = dir.join("policy.yaml");
    // The demo's data is synthetic (regulatedData: false, so the table may enter the `test` rollout stage), and
    // the policy pins this very build as the only one allowed to quarantine and purge.
    let digest = crate::ops::context::implementation_digest()?;
    // The binding names the table's UUID, so a policy can never govern another table of the same name, and
    // `evidenceSigners` binds the drill key to the table: no other drill key of the trust folder vouches for it.
    let uuid = table.metadata().uuid();
    std::fs::write(
        &policy,
        format!("# Written by `lakedrill demo`.\nschema: lakehouseRetentionPolicy.v1\ntable: orders/{uuid}\nprotectedRefs: [main, audit-q2]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\nregulatedData: false\ncritical: true\nreclamationImplementationDigest: {digest}\nevidenceSigners: [{}]\n", key.keyid),
    )
    .map_err(|e| Error::io("write", &policy, e))?;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await; // past minSnapshotAge
    let plan = crate::ops::plan::plan(demo_ctx, &source, &policy, &Default::default()).await?;
    let proposed = plan.json["candidates"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["kind"] == "expired-snapshots"))
        .ok_or_else(|| Error::Internal(format!("demo: the plan proposed no candidate: {}", plan.human)))?;
    let candidate = proposed["candidate_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::Internal(format!("demo: the plan proposed no candidate: {}", plan.human)))?;
    // The candidate must reach data, not only metadata (issue 18 point 5): the late batch and the first two
    // versions of the last append are data files only expiring snapshots reach.
    let content = crate::lab::ContentFiles::of(&proposed["objects"]);
    if content.data.is_empty() {
        return Err(Error::Internal(format!(
            "demo: the candidate {candidate} holds no data file: {}",
            plan.human
        )));
    }
    human.push_str(&format!("== plan (policy {})\n{}\n", policy.display(), plan.human));
    json.insert("plan".into(), plan.json.clone());
    let bundles = dir.join("bundles").display().to_string();
    let q = crate::ops::quarantine::quarantine(
        demo_ctx,
        &source,
        &candidate,
        &policy,
        &key.private_path,
        &bundles,
        crate::ops::quarantine::QuarantineMode::Tag,
    )
    .await?;
    if q.verdict != Verdict::Ok {
        return Err(Error::Internal(format!("demo: quarantine refused: {}", q.human)));
    }
    say(quiet, &format!("quarantined {candidate}"));
    human.push_str(&format!("== quarantine\n{}\n", q.human));
    let sealed = q.json["bundles"].clone();
    let drills = dir.join("drills");
    std::fs::create_dir_all(&drills).map_err(|e| Error::io("create directory", &drills, e))?;
    let plan = drills.join("weekly-quarantine.toml");
    let plan_text = format!(
        "# Written by `lakedrill demo`.\nname = \"weekly-quarantine\"\nkind = \"quarantine\"\nbundles = \"{}\"\nsample = 30\npolicies = \"{}\"\ntrust = \"{}\"\nkey = \"{}\"\nreports = \"{}\"\n",
        dir.join("bundles").display(),
        policy.display(),
        trust_dir.display(),
        key.private_path.display(),
        dir.join("reports").display()
    );
    std::fs::write(&plan, plan_text).map_err(|e| Error::io("write", &plan, e))?;
    let drill = crate::ops::drill::run(
        &demo_ctx.storage,
        &plan,
        demo_ctx.clock.as_ref(),
        &|| Ok(digest.clone()),
    )
    .await?;
    say(quiet, &format!("drill gate {}", drill.predicate.summary.gate));
    // The drill records its verdicts in the demo's registry, as `lakedrill drill run` does with a `[registry]`:
    // the deleter reads them there.
    let registry = crate::ops::plan::registry(demo_ctx).await?;
    record_and_anchor(demo_ctx, &registry, &drill.report, &drill.predicate).await?;
    let drill_keys =
        crate::evidence::keys::TrustStore::load_dir(&trust_dir)?.for_role(crate::evidence::keys::Role::Drill);
    let pages =
        crate::ops::drill::write_beside(&demo_ctx.storage, &drill.report, &drill.predicate, &drill_keys).await?;
    let html_path = pages.html_report.trim_start_matches("file://").to_owned();
    let trust = crate::evidence::keys::TrustStore::load_dir(&trust_dir)?;
    let audit = crate::ops::audit::verify(&demo_ctx.storage, &drill.report, &trust, true).await?;
    let report_path = drill.report.trim_start_matches("file://").to_owned();
    let human_path = drill.human_report.trim_start_matches("file://").to_owned();
    // The standard-tools check runs where the user is: `scripts/verify_report.py` exists only in the repository,
    // so the demo writes a copy of it beside its lakehouse and prints that path.
    let verify_script = dir.join("verify_report.py");
    std::fs::write(&verify_script, VERIFY_REPORT_PY).map_err(|e| Error::io("write", &verify_script, e))?;
    human.push_str(&format!(
        "\n== weekly drill: gate {} ({} passed, {} failed of {} sampled, seed {})\nsigned report: {report_path}\nhuman report:  {human_path}\nhtml report:   {html_path}\naudit verify:  {} ({} report(s) in the chain)\n\nverify it yourself (the second with Python's `cryptography` only):\n  lakedrill audit verify {report_path} --trust {} --chain\n  python3 {} {report_path} {}\n",
        drill.predicate.summary.gate,
        drill.predicate.summary.passed,
        drill.predicate.summary.failed,
        drill.predicate.sample.size,
        drill.predicate.sample.seed,
        audit.status,
        audit.reports_checked,
        trust_dir.display(),
        verify_script.display(),
        key.public_path.display(),
    ));
    json.insert("bundles".into(), sealed);
    json.insert(
        "drill".into(),
        serde_json::json!({
            "report": report_path,
            "human_report": human_path,
            "html_report": html_path,
            "gate": drill.predicate.summary.gate,
            "passed": drill.predicate.summary.passed,
            "failed": drill.predicate.summary.failed,
            "public_key": key.public_path.display().to_string(),
            "trust": trust_dir.display().to_string(),
            "verify_script": verify_script.display().to_string(),
        }),
    );
    json.insert(
        "audit".into(),
        serde_json::to_value(&audit).map_err(|e| Error::Internal(e.to_string()))?,
    );
    // The quarterly exercise: a cold backup of `main` (declaring it a DR checkpoint), recovered in full by a
    // cold-backup drill. The demo table is critical (its policy says so), so the deleter wants this recovery
    // before it accepts a purge.
    let backups = dir.join("backups").display().to_string();
    let backup = crate::ops::backup::backup(
        demo_ctx,
        &source,
        &crate::ops::backup::BackupPoint::Select(Selector::Ref("main".into())),
        None,
        &key.private_path,
        &backups,
    )
    .await?;
    say(
        quiet,
        &format!("backup {}", backup.json["status"].as_str().unwrap_or("?")),
    );
    human.push_str(&format!("\n== backup --ref main --to {backups}\n{}", backup.human));
    let cold_plan = drills.join("quarterly-cold-backup.toml");
    std::fs::write(
        &cold_plan,
        format!(
            "# Written by `lakedrill demo`.\nname = \"quarterly-cold-backup\"\nkind = \"cold-backup\"\nbackups = \"{backups}\"\nsample = 5\ntarget = \"{}\"\nrto_limit = \"4h\"\ntrust = \"{}\"\nkey = \"{}\"\nreports = \"{}\"\n",
            dir.join("scratch").display(),
            trust_dir.display(),
            key.private_path.display(),
            dir.join("reports").display()
        ),
    )
    .map_err(|e| Error::io("write", &cold_plan, e))?;
    let cold = crate::ops::drill::run_with(
        &demo_ctx.storage,
        &demo_ctx.config,
        &cold_plan,
        demo_ctx.clock.as_ref(),
        &|| Ok(digest.clone()),
        crate::ops::drill::RunOptions::default(),
    )
    .await?;
    say(
        quiet,
        &format!("cold-backup drill gate {}", cold.predicate.summary.gate),
    );
    record_and_anchor(demo_ctx, &registry, &cold.report, &cold.predicate).await?;
    // As `lakedrill drill run` does for every report: the HTML and Markdown pages beside the signed one.
    let cold_pages =
        crate::ops::drill::write_beside(&demo_ctx.storage, &cold.report, &cold.predicate, &drill_keys).await?;
    let cold_html = cold_pages.html_report.trim_start_matches("file://").to_owned();
    let cold_md = cold_pages.markdown_report.trim_start_matches("file://").to_owned();
    let cold_txt = cold.human_report.trim_start_matches("file://").to_owned();
    human.push_str(&format!(
        "\n== quarterly cold-backup drill: gate {} ({} recovered)\nsigned report: {}\nhuman report:  {cold_txt}\nhtml report:   {cold_html}\n",
        cold.predicate.summary.gate,
        cold.predicate.summary.passed,
        cold.report.trim_start_matches("file://")
    ));
    // The deleter: only with that evidence, only if nothing changed since the quarantine, and only for a table
    // whose rollout stage deletes. Every table starts in report-only: a dry run shows the refusal.
    let mut purge_opts = crate::ops::deleter::PurgeOptions {
        candidate_id: candidate.clone(),
        evidence: Some(report_path.clone()),
        reports: None,
        trust: trust_dir.clone(),
        policy: policy.clone(),
        key: deleter_key.private_path.clone(),
        receipts: dir.join("receipts").display().to_string(),
        dry_run: true,
    };
    let refused = crate::ops::deleter::purge(demo_ctx, &source, &purge_opts).await?;
    human.push_str(&format!(
        "\n== purge --dry-run in rollout stage report-only\n{}",
        refused.human
    ));
    let stage = crate::ops::rollout::set(
        demo_ctx,
        &source,
        "test",
        "demo: synthetic data, policy declares regulatedData: false; forced: a lakehouse built a minute ago has no two \
         weeks of report-only observations",
        "lakedrill demo",
        Some(&policy),
        true,
    )
    .await?;
    if stage.verdict != Verdict::Ok {
        return Err(Error::Internal(format!(
            "demo: rollout set test refused: {}",
            stage.human
        )));
    }
    say(quiet, "rollout stage test");
    human.push_str(&format!("\n== rollout set test\n{}", stage.human));
    json.insert("purge_in_report_only".into(), refused.json.clone());
    json.insert("rollout".into(), stage.json.clone());
    purge_opts.dry_run = false;
    let purge = crate::ops::deleter::purge(demo_ctx, &source, &purge_opts).await?;
    say(
        quiet,
        &format!("purge {}", purge.json["status"].as_str().unwrap_or("?")),
    );
    human.push_str(&format!("\n== purge\n{}", purge.human));
    let deleted = purge.json["objects"]["VERIFIED"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    let gone = content.among(deleted);
    let (data_deleted, deletes_deleted) = (gone.data.len(), gone.deletes.len());
    human.push_str(&format!(
        "content files: {data_deleted} of {} data files and {deletes_deleted} of {} delete files in the candidate deleted and verified\n",
        content.data.len(),
        content.deletes.len()
    ));
    say(
        quiet,
        &format!("purge deleted {data_deleted} data files and {deletes_deleted} delete files"),
    );
    let after = commands::inspect_table(
        demo_ctx,
        &demo_ctx.table(&source).await?,
        InspectWhat::Refs,
        &Selector::Current,
    )
    .await?;
    human.push_str(&format!("\n== refs after the purge\n{}", after.human));
    let mut purge_json = purge.json.clone();
    if let Some(o) = purge_json.as_object_mut() {
        o.insert("candidate_data_files".into(), content.data.len().into());
        o.insert("candidate_delete_files".into(), content.deletes.len().into());
        o.insert("data_files_deleted".into(), data_deleted.into());
        o.insert("delete_files_deleted".into(), deletes_deleted.into());
    }
    json.insert("purge".into(), purge_json);
    if purge.verdict == Verdict::Ok && data_deleted == 0 {
        return Err(Error::Internal(format!(
            "demo: the purge of {candidate} deleted no data file: {}",
            purge.human
        )));
    }

    let gates = crate::ops::rollout::gates(
        demo_ctx,
        &source,
        &policy,
        Some(&crate::ops::rollout::SafetyOptions {
            trust: trust_dir.clone(),
            reports: dir.join("reports").display().to_string(),
            since: None,
        }),
    )
    .await?;
    human.push_str(&format!("\n== gates --trust {}\n{}", trust_dir.display(), gates.human));
    json.insert("backup".into(), backup.json.clone());
    json.insert(
        "cold_backup_drill".into(),
        serde_json::json!({"report": cold.report, "human_report": cold_txt, "html_report": cold_html, "markdown_report": cold_md, "gate": cold.predicate.summary.gate, "passed": cold.predicate.summary.passed}),
    );
    json.insert("gates".into(), gates.json.clone());
    let ok = drill.predicate.summary.gate == "PASS"
        && audit.status == "VERIFIED"
        && purge.verdict == Verdict::Ok
        && cold.predicate.summary.gate == "PASS"
        && gates.verdict == Verdict::Ok;
    Ok(Outcome {
        verdict: if ok { Verdict::Ok } else { Verdict::Findings },
        json: serde_json::Value::Object(json),
        human,
        deferred: Vec::new(),
    })
}
