//! Iceberg catalogs: SQL catalogs (the JDBC catalog schema shared by Java, PyIceberg and iceberg-rust), here, and
//! REST catalogs ([`crate::io::rest`]), behind one [`Catalog`].
//!
//! lakedrill reads a catalog to learn one thing: the current metadata location of a table, which
//! fixes the *table generation* every later step is computed from. It reads the `iceberg_tables`
//! row directly, so that the bytes themselves are then read through [`crate::io::store`] like every
//! other object, from any store. Commits (register, tag, compare-and-set of the metadata location)
//! use the same row with a `WHERE metadata_location = <expected>` guard, so a concurrent writer
//! makes them fail instead of being overwritten.
//!
//! The database is a SQLite file (`sqlite:PATH`) or PostgreSQL (`postgres://USER@HOST:PORT/DATABASE`), through
//! the same `Any` pool as the registry (`crate::io::db`). lakedrill never creates a catalog database here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use iceberg::CatalogBuilder;
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};
use sqlx::{AnyPool, Row};

use crate::io::db::{self, DbUri, PoolSettings};

use crate::config::CatalogConfig;
use crate::error::{Error, Result};
use crate::io::store::Storage;

pub use crate::io::ident::TableIdent;

/// Opens the catalog of `cfg` with `iceberg-catalog-sql` (for writers that create or register tables: the demo,
/// `restore --into`, `recover`), with the bind style of its database: `?` for SQLite, `$N` for PostgreSQL.
/// `iceberg-catalog-sql` creates its tables when they are missing; `create` also creates a missing SQLite file.
///
/// # Errors
/// [`Error::Catalog`] for a URI that is neither SQLite nor PostgreSQL, or a database that cannot be opened.
pub async fn open_iceberg(
    section: &str,
    cfg: &CatalogConfig,
    warehouse: String,
    storage: Arc<dyn iceberg::io::StorageFactory>,
    create: bool,
) -> Result<iceberg_catalog_sql::SqlCatalog> {
    let cat_err = catalog_error(section);
    if cfg.kind == "rest" {
        return Err(cat_err(
            "registering a table through a REST catalog is not built yet (issue 21): recover or restore into a SQL \
             catalog, or register the written metadata file with the REST catalog's own tools"
                .to_owned(),
            None,
        ));
    }
    let uri = cfg.uri.as_str();
    let target = db::parse_uri(uri).map_err(|reason| cat_err(format!("{uri}: {reason}"), None))?;
    let (url, style) = match target {
        DbUri::Sqlite { path, .. } => (db::sqlite_url(path, create), SqlBindStyle::QMark),
        DbUri::Postgres(url) => (url.to_owned(), SqlBindStyle::DollarNumeric),
    };
    sqlx::any::install_default_drivers();
    SqlCatalogBuilder::default()
        .uri(url)
        .warehouse_location(warehouse)
        .sql_bind_style(style)
        .with_storage_factory(storage)
        .load(
            cfg.name.clone().unwrap_or_else(|| section.to_owned()),
            iceberg_pool_props(),
        )
        .await
        .map_err(|e| cat_err(format!("cannot open {uri} with iceberg-catalog-sql"), Some(Box::new(e))))
}

/// The pool settings given to `iceberg-catalog-sql`, whose pool lakedrill cannot configure otherwise nor close
/// (it is closed when the catalog is dropped). Its default idle timeout of 10 s makes sqlx's maintenance task
/// sweep the pool every 10 s, and that sweep is where sqlx 0.8 can spin forever (sqlx#3645, see `db::connect`);
/// an hour leaves the sweep to its first run and sqlx's 30-minute `max_lifetime`, beyond any command's life.
/// See: <https://github.com/launchbadge/sqlx/issues/3645>
pub(crate) fn iceberg_pool_props() -> HashMap<String, String> {
    HashMap::from([("pool.idle-timeout".to_owned(), "3600".to_owned())])
}

/// An open catalog of either kind: what every command that reads or commits a table through `--catalog` uses.
#[derive(Debug, Clone)]
pub enum Catalog {
    /// `type = "sql"`.
    Sql(SqlCatalog),
    /// `type = "rest"`.
    Rest(Box<crate::io::rest::RestCatalog>),
}

impl Catalog {
    /// Opens the catalog declared as `[catalog.<section>]`, of its `type`; a REST catalog's answers are bounded
    /// by `max_metadata_bytes` (`[storage]`) plus 1 MiB ([`crate::io::rest::RestCatalog::open`]).
    ///
    /// # Errors
    /// [`Error::Catalog`] naming the catalog when it cannot be opened (database, endpoint, credentials).
    pub async fn open(section: &str, cfg: &CatalogConfig, max_metadata_bytes: u64) -> Result<Self> {
        match cfg.kind.as_str() {
            "rest" => Ok(Self::Rest(Box::new(
                Box::pin(crate::io::rest::RestCatalog::open(section, cfg, max_metadata_bytes)).await?,
            ))),
            _ => Ok(Self::Sql(SqlCatalog::open(section, cfg).await?)),
        }
    }

    /// Closes what the catalog holds open (the SQL pool; nothing for REST).
    pub async fn close(&self) {
        if let Self::Sql(c) = self {
            c.close().await;
        }
    }

    /// The catalog's name in the configuration.
    #[must_use]
    pub fn section(&self) -> &str {
        match self {
            Self::Sql(c) => c.section(),
            Self::Rest(c) => c.section(),
        }
    }

    /// The current metadata location of a table.
    ///
    /// # Errors
    /// [`Error::Catalog`] naming the catalog and the table.
    pub async fn metadata_location(&self, ident: &TableIdent) -> Result<String> {
        match self {
            Self::Sql(c) => c.metadata_location(ident).await,
            Self::Rest(c) => c.metadata_location(ident).await,
        }
    }

    /// Every table of the catalog with its current metadata location.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the listing fails.
    pub async fn tables(&self) -> Result<Vec<(TableIdent, String)>> {
        match self {
            Self::Sql(c) => c.tables().await,
            Self::Rest(c) => c.tables().await,
        }
    }

    /// Every table row of the catalog's database, under every `catalog_name`: `(None, ident, metadata)` for this
    /// catalog's own tables, `(Some(name), ident, metadata)` for a row another catalog name holds (JDBC and
    /// PyIceberg SQL catalogs of several names can share one database, and with it the storage). A REST catalog
    /// lists only its own tables.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the listing fails.
    pub async fn tables_of_every_name(&self) -> Result<Vec<(Option<String>, TableIdent, String)>> {
        match self {
            Self::Sql(c) => c.tables_of_every_name().await,
            Self::Rest(c) => Ok(c.tables().await?.into_iter().map(|(i, m)| (None, i, m)).collect()),
        }
    }

    /// Commits `new`, computed from the metadata at `expected`: on a SQL catalog a new metadata file and a
    /// compare-and-set of the row ([`SqlCatalog::commit`]); on a REST catalog a commit with requirements
    /// ([`crate::io::rest::RestCatalog::commit`]). Either way a concurrent writer makes it fail with
    /// [`Error::Catalog`] ("lost the race") and nothing changes. Returns the new metadata location.
    ///
    /// # Errors
    /// [`Error::Catalog`] for a lost race or a refused commit; storage errors writing the metadata file;
    /// [`Error::Corrupt`] when a REST server applied the commit on top of a concurrent one and so dropped refs
    /// that one created (see [`crate::io::rest::RestCatalog::commit`]); [`Error::CommitUnknown`] when a commit
    /// was sent and got no clear answer, and the table (REST) or the catalog row (SQL) read again does not show
    /// it: the table may change yet, so the caller must neither discard nor delete anything on its account.
    pub async fn commit(
        &self,
        storage: &Storage,
        ident: &TableIdent,
        expected: &str,
        new: &crate::io::metadata::FullMetadata,
    ) -> Result<String> {
        match self {
            Self::Sql(c) => c.commit(storage, ident, expected, new).await,
            Self::Rest(c) => c.commit(storage, ident, expected, new).await,
        }
    }
}

/// An open SQL catalog.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    section: String,
    catalog_name: String,
    pool: AnyPool,
}

/// Builds the [`Error::Catalog`] of the configuration section `section`.
fn catalog_error(section: &str) -> impl Fn(String, Option<Box<dyn std::error::Error + Send + Sync>>) -> Error + '_ {
    move |reason, source| Error::Catalog {
        catalog: section.to_owned(),
        reason,
        source,
    }
}

/// How long a catalog statement on PostgreSQL waits for a row lock another session holds (`lock_timeout`), and how
/// long any one statement may run (`statement_timeout`). A commit is made inside the registry's write lock: without
/// a bound, another session holding the table's catalog row (an engine's commit left open, a `SELECT … FOR UPDATE`
/// in an idle transaction) kept lakedrill waiting there for ever, and every lease, hold and purge of the registry
/// behind it. The update refused by the timeout is settled like any refused statement: the row read again still
/// names the expected metadata, nothing was committed, exit 2.
/// See: <https://www.postgresql.org/docs/current/runtime-config-client.html#GUC-LOCK-TIMEOUT>
pub(crate) const POSTGRES_CATALOG_SESSION: &[&str] = &["SET lock_timeout = '30s'", "SET statement_timeout = '120s'"];

/// The catalog pool: two connections; PostgreSQL sessions bounded by [`POSTGRES_CATALOG_SESSION`].
const POOL: PoolSettings = PoolSettings {
    max_connections: 2,
    acquire_timeout: Duration::from_secs(30),
    sqlite_session: &[],
    postgres_session: POSTGRES_CATALOG_SESSION,
};

impl SqlCatalog {
    /// Opens the catalog declared as `[catalog.<section>]`.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the database cannot be opened.
    pub async fn open(section: &str, cfg: &CatalogConfig) -> Result<Self> {
        let cat_err = catalog_error(section);
        let uri = cfg.uri.as_str();
        let target = db::parse_uri(uri).map_err(|reason| cat_err(format!("{uri}: {reason}"), None))?;
        let dialect = target.dialect();
        let (url, shown) = match target {
            DbUri::Sqlite { path, .. } => {
                // `sqlite:PATH?mode=rwc` (PyIceberg's and sqlx's options) is accepted; the query is dropped.
                if !std::path::Path::new(path).exists() {
                    return Err(cat_err(format!("database file {path} does not exist"), None));
                }
                (db::sqlite_url(path, false), path.to_owned())
            }
            DbUri::Postgres(url) => (url.to_owned(), url.to_owned()),
        };
        let pool = db::connect(&url, dialect, &POOL)
            .await
            .map_err(|e| cat_err(format!("cannot open {shown}"), Some(Box::new(e))))?;
        Ok(Self {
            section: section.to_owned(),
            catalog_name: cfg.name.clone().unwrap_or_else(|| section.to_owned()),
            pool,
        })
    }

    /// Closes the catalog's connection pool, waiting for connections in use to come back (dropping the last
    /// clone closes it without waiting). Called as soon as the catalog is no longer needed, so that no pool is
    /// left to the runtime's shutdown (see the operations context's `close`).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The catalog's name in the configuration.
    #[must_use]
    pub fn section(&self) -> &str {
        &self.section
    }

    /// The current metadata location of a table.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the query fails or the table does not exist.
    pub async fn metadata_location(&self, ident: &TableIdent) -> Result<String> {
        let row = sqlx::query(
            "SELECT metadata_location FROM iceberg_tables \
             WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3",
        )
        .bind(&self.catalog_name)
        .bind(ident.jdbc_namespace())
        .bind(&ident.name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| Error::Catalog {
            catalog: self.section.clone(),
            reason: format!("cannot query table {ident}"),
            source: Some(Box::new(e)),
        })?;
        let Some(row) = row else {
            return Err(Error::Catalog {
                catalog: self.section.clone(),
                reason: format!("table {ident} does not exist (catalog_name {:?})", self.catalog_name),
                source: None,
            });
        };
        row.try_get::<Option<String>, _>(0)
            .map_err(|e| Error::Catalog {
                catalog: self.section.clone(),
                reason: format!("table {ident}: unreadable metadata_location"),
                source: Some(Box::new(e)),
            })?
            .ok_or_else(|| Error::Catalog {
                catalog: self.section.clone(),
                reason: format!("table {ident} has no metadata location"),
                source: None,
            })
    }

    /// Every table of this catalog with its current metadata location (rows without one are left out).
    ///
    /// # Errors
    /// [`Error::Catalog`] when the query fails.
    pub async fn tables(&self) -> Result<Vec<(TableIdent, String)>> {
        Ok(self
            .tables_of_every_name()
            .await?
            .into_iter()
            .filter_map(|(other, ident, md)| other.is_none().then_some((ident, md)))
            .collect())
    }

    /// Every table row of the database under every `catalog_name` with its current metadata location (rows
    /// whose `metadata_location` is NULL are left out): `None` for this catalog's own `catalog_name`, the other
    /// name otherwise.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the query fails, or naming the row when one of its columns cannot be read as text
    /// (a NULL name, a BLOB): such a row is never skipped, since the listing must be whole (the plan's
    /// containment check plans only when every catalog can be listed).
    pub async fn tables_of_every_name(&self) -> Result<Vec<(Option<String>, TableIdent, String)>> {
        let rows =
            sqlx::query("SELECT catalog_name, table_namespace, table_name, metadata_location FROM iceberg_tables")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| Error::Catalog {
                    catalog: self.section.clone(),
                    reason: "cannot list the tables of every catalog_name".into(),
                    source: Some(Box::new(e)),
                })?;
        let mut out = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            // The row as far as it reads, to name it in an error.
            let shown = || {
                (0..3)
                    .map(|c| {
                        row.try_get::<Option<String>, _>(c)
                            .ok()
                            .flatten()
                            .map_or_else(|| "?".to_owned(), |v| format!("{v:?}"))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let text = |col: usize, what: &str| -> Result<Option<String>> {
                row.try_get::<Option<String>, _>(col).map_err(|e| Error::Catalog {
                    catalog: self.section.clone(),
                    reason: format!(
                        "row {} of iceberg_tables (catalog_name, table_namespace, table_name: {}): its {what} \
                         cannot be read as text, so the catalog cannot be listed whole",
                        i + 1,
                        shown()
                    ),
                    source: Some(Box::new(e)),
                })
            };
            let required = |col: usize, what: &str| -> Result<String> {
                text(col, what)?.ok_or_else(|| Error::Catalog {
                    catalog: self.section.clone(),
                    reason: format!(
                        "row {} of iceberg_tables (catalog_name, table_namespace, table_name: {}): its {what} is \
                         NULL, so the catalog cannot be listed whole",
                        i + 1,
                        shown()
                    ),
                    source: None,
                })
            };
            let catalog_name = required(0, "catalog_name")?;
            let namespace = required(1, "table_namespace")?;
            let name = required(2, "table_name")?;
            // A table without a metadata location (being created) has nothing to list.
            let Some(md) = text(3, "metadata_location")? else {
                continue;
            };
            out.push((
                (catalog_name != self.catalog_name).then_some(catalog_name),
                TableIdent {
                    namespace: namespace.split('.').map(str::to_owned).collect(),
                    name,
                },
                md,
            ));
        }
        Ok(out)
    }

    /// Compare-and-set of a table's metadata location: succeeds only if the row still names
    /// `expected`, so a concurrent commit makes it fail instead of being overwritten.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the row changed since `expected` was read, or the update was refused or never
    /// sent; [`Error::CommitUnknown`] when it got no clear answer and the row read again does not name `new`.
    pub async fn swap_metadata_location(&self, ident: &TableIdent, expected: &str, new: &str) -> Result<()> {
        self.swap(ident, expected, new, (false, false)).await
    }

    /// [`SqlCatalog::swap_metadata_location`] with the test-only answer failpoints `(lost, unanswered)`
    /// ([`Storage::failpoint_catalog_answer`]). A statement that got no answer from the database (the connection
    /// failed once it may have been sent) is settled by reading the row again: naming `new`, the update was
    /// applied; otherwise [`Error::CommitUnknown`], since it may not have been applied, or may still be.
    async fn swap(
        &self,
        ident: &TableIdent,
        expected: &str,
        new: &str,
        (lost, unanswered): (bool, bool),
    ) -> Result<()> {
        let statement = sqlx::query(
            "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2 \
             WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $6",
        )
        .bind(new)
        .bind(expected)
        .bind(&self.catalog_name)
        .bind(ident.jdbc_namespace())
        .bind(&ident.name)
        .bind(expected);
        let sent = if unanswered {
            Err(sqlx::Error::Io(std::io::Error::other(
                "failpoint catalog-update-unanswered: the connection failed with no answer",
            )))
        } else {
            match statement.execute(&self.pool).await {
                Ok(_) if lost => Err(sqlx::Error::Io(std::io::Error::other(
                    "failpoint catalog-answer-lost: the connection failed with no answer",
                ))),
                other => other,
            }
        };
        let res = match sent {
            Ok(res) => res,
            // No connection was had: nothing was sent.
            Err(e @ (sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Configuration(_))) => {
                return Err(Error::Catalog {
                    catalog: self.section.clone(),
                    reason: format!("cannot commit table {ident}: nothing was committed"),
                    source: Some(Box::new(e)),
                });
            }
            Err(e) => return self.settle(ident, expected, new, &e).await,
        };
        if res.rows_affected() == 1 {
            Ok(())
        } else {
            Err(Error::Catalog {
                catalog: self.section.clone(),
                reason: format!(
                    "table {ident} changed since it was read (its metadata location is no longer {expected}); nothing was committed"
                ),
                source: None,
            })
        }
    }

    /// Commits new table metadata: writes it once as the next metadata file
    /// (`<location>/metadata/<version+1>-<uuid>.metadata.json`, never overwriting), then swaps the
    /// catalog row from `expected` to it. Returns the new metadata location.
    ///
    /// If another writer committed first, the swap fails and nothing is committed; the metadata
    /// file written for the attempt stays behind as an unreferenced file (lakedrill never deletes
    /// outside the deleter's plan).
    ///
    /// # Errors
    /// [`Error::Catalog`] when the table changed since `expected` (nothing committed); [`Error::CommitUnknown`]
    /// as [`SqlCatalog::swap_metadata_location`]; storage errors naming the file.
    pub async fn commit(
        &self,
        storage: &Storage,
        ident: &TableIdent,
        expected: &str,
        new: &crate::io::metadata::FullMetadata,
    ) -> Result<String> {
        use std::str::FromStr;
        let next = iceberg::MetadataLocation::from_str(expected)
            .map_err(|e| {
                Error::iceberg(
                    format!("metadata location {expected} is not in the catalog naming scheme"),
                    e,
                )
            })?
            .with_next_version()
            .with_new_metadata(new.metadata())
            .to_string();
        // Not `serde_json::to_vec` of the crate's model: it drops the refs of a format-v1 table (every tag and
        // branch, and the quarantine's own tags) and all but one statistics file per snapshot.
        let mut bytes = new.to_json()?;
        // The crate names the file `*.gz.metadata.json` when the table asks for gzip
        // (`write.metadata.compression-codec`): Java and PyIceberg pick their reader by that name, so the bytes
        // must be gzip too.
        if next.ends_with(".gz.metadata.json") {
            use std::io::Write as _;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(&bytes)
                .and_then(|()| gz.finish())
                .map(|b| bytes = b)
                .map_err(|e| Error::Internal(format!("gzip the metadata of {next}: {e}")))?;
        }
        match storage
            .put_new(
                &crate::model::location::canonical_uri(&next)?,
                bytes::Bytes::from(bytes),
            )
            .await
        {
            Ok(_) => {}
            // Another writer created that metadata file first: the commit lost the race, nothing changed.
            Err(Error::AlreadyExists { uri }) => {
                return Err(Error::Catalog {
                    catalog: self.section.clone(),
                    reason: format!("{uri} was written by another writer first: the commit lost the race"),
                    source: None,
                });
            }
            Err(e) => return Err(e),
        }
        self.swap(ident, expected, &next, storage.failpoint_catalog_answer())
            .await?;
        Ok(next)
    }

    /// After a compare-and-set that failed (`why`): the row read again names `new` (applied); it names `expected`
    /// after the database answered with an error (the statement was refused: nothing was committed,
    /// [`Error::Catalog`]); otherwise the outcome is [`Error::CommitUnknown`] (no answer, or a row that moved on:
    /// the update may have been applied under a later commit, or may still be). Every database error is settled
    /// this way, not taken as "nothing applied" at its word: one answered at commit time (a failed WAL flush)
    /// may leave the update applied.
    async fn settle(&self, ident: &TableIdent, expected: &str, new: &str, why: &sqlx::Error) -> Result<()> {
        let unknown = |more: String| Error::CommitUnknown {
            catalog: self.section.clone(),
            table: ident.to_string(),
            reason: format!("the database gave no answer to the update from {expected} to {new} ({why}); {more}"),
        };
        let row: std::result::Result<Option<Option<String>>, sqlx::Error> = sqlx::query_scalar(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND \
             table_name = $3",
        )
        .bind(&self.catalog_name)
        .bind(ident.jdbc_namespace())
        .bind(&ident.name)
        .fetch_optional(&self.pool)
        .await;
        match row {
            Ok(Some(Some(now))) if now == new => {
                crate::error::warn(format!(
                    "catalog {}: the commit to {ident} got no answer ({why}), but the catalog row read again names \
                     {new}: taken as committed",
                    self.section
                ));
                Ok(())
            }
            Ok(Some(Some(now))) if now == expected && matches!(why, sqlx::Error::Database(_)) => Err(Error::Catalog {
                catalog: self.section.clone(),
                reason: format!(
                    "cannot commit table {ident}: the database refused the update ({why}) and its row still names \
                     {expected}: nothing was committed"
                ),
                source: None,
            }),
            Ok(row) => Err(unknown(format!(
                "the catalog row read again names {}: the update may not have been applied, or may still be",
                row.flatten().unwrap_or_else(|| "nothing".to_owned())
            ))),
            Err(e) => Err(unknown(format!(
                "the catalog row could not be read again to see whether it was applied ({e})"
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A SQL catalog named `lake` over `uri`, its tables created as iceberg-catalog-sql creates them.
    async fn fresh_catalog(uri: &str) -> SqlCatalog {
        let cfg = CatalogConfig {
            kind: "sql".to_owned(),
            uri: uri.to_owned(),
            warehouse: None,
            name: Some("lake".to_owned()),
            ..Default::default()
        };
        let storage = Arc::new(iceberg::io::LocalFsStorageFactory);
        drop(
            open_iceberg("t", &cfg, "file:///tmp/unused".to_owned(), storage, true)
                .await
                .unwrap(),
        );
        SqlCatalog::open("t", &cfg).await.unwrap()
    }

    /// The row of table `db.orders` in catalog `lake`, at `file:///w/00001.metadata.json`.
    async fn orders_row(cat: &SqlCatalog) {
        sqlx::query(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind("lake")
        .bind("db")
        .bind("orders")
        .bind("file:///w/00001.metadata.json")
        .execute(&cat.pool)
        .await
        .unwrap();
    }

    /// The catalog row as iceberg-catalog-sql creates its tables, then lakedrill's read and compare-and-set,
    /// on both databases (the statements are shared; the bind styles differ).
    async fn read_and_swap(uri: String) {
        let cat = fresh_catalog(&uri).await;
        let ident: TableIdent = "db.orders".parse().unwrap();
        let err = cat.metadata_location(&ident).await.unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        orders_row(&cat).await;
        assert_eq!(
            cat.metadata_location(&ident).await.unwrap(),
            "file:///w/00001.metadata.json"
        );
        let stale = cat
            .swap_metadata_location(&ident, "file:///w/00000.metadata.json", "file:///w/00002.metadata.json")
            .await
            .unwrap_err();
        assert!(stale.to_string().contains("nothing was committed"), "{stale}");
        cat.swap_metadata_location(&ident, "file:///w/00001.metadata.json", "file:///w/00002.metadata.json")
            .await
            .unwrap();
        assert_eq!(
            cat.metadata_location(&ident).await.unwrap(),
            "file:///w/00002.metadata.json"
        );
    }

    #[tokio::test]
    async fn read_and_compare_and_set_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        read_and_swap(format!("sqlite:{}", dir.path().join("catalog.db").display())).await;
    }

    /// See: the review of 2026-12-07 (rs), item 5. A row whose columns do not read as text (a BLOB table name,
    /// as SQLite stores whatever it is given) stopped nothing: it was skipped, and the containment check, which
    /// plans only when every catalog can be listed whole, never compared its table. Now it is an error naming the
    /// row; a row whose metadata_location is NULL is still left out.
    #[tokio::test]
    async fn a_catalog_row_that_cannot_be_read_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let cat = fresh_catalog(&format!("sqlite:{}", dir.path().join("catalog.db").display())).await;
        orders_row(&cat).await;
        sqlx::query(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) \
             VALUES ('lake', 'db', 'staged', NULL)",
        )
        .execute(&cat.pool)
        .await
        .unwrap();
        let listed = cat.tables_of_every_name().await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        sqlx::query(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) \
             VALUES ('lake', 'db', X'FF00', 'file:///w/other/00001.metadata.json')",
        )
        .execute(&cat.pool)
        .await
        .unwrap();
        let err = cat.tables_of_every_name().await.unwrap_err();
        let text = format!("{err:#}");
        assert!(
            matches!(err, Error::Catalog { .. })
                && text.contains("row 3 of iceberg_tables")
                && text.contains(r#""lake" "db" ?"#)
                && text.contains("table_name cannot be read as text"),
            "{text}"
        );
        assert!(cat.tables().await.is_err());
    }

    #[tokio::test]
    async fn read_and_compare_and_set_on_postgres() {
        read_and_swap(crate::io::db::fresh_postgres_database().await).await;
    }

    /// Another session holds the table's catalog row locked (an open transaction that selected it `FOR UPDATE`):
    /// the commit's update gives up after the catalog's `lock_timeout` instead of waiting for ever, and is settled
    /// as refused, with nothing committed.
    #[tokio::test]
    async fn a_commit_waits_for_a_locked_catalog_row_only_as_long_as_the_lock_timeout_on_postgres() {
        let uri = crate::io::db::fresh_postgres_database().await;
        let cat = fresh_catalog(&uri).await;
        orders_row(&cat).await;
        let other = db::connect(&uri, db::Dialect::Postgres, &POOL).await.unwrap();
        let mut holder = other.begin().await.unwrap();
        sqlx::query("SELECT metadata_location FROM iceberg_tables WHERE table_name = 'orders' FOR UPDATE")
            .fetch_all(&mut *holder)
            .await
            .unwrap();
        let ident: TableIdent = "db.orders".parse().unwrap();
        let wait = tokio::time::timeout(
            Duration::from_secs(90),
            cat.swap_metadata_location(&ident, "file:///w/00001.metadata.json", "file:///w/00002.metadata.json"),
        )
        .await
        .expect("the commit still waits for the locked row after 90 s: no lock_timeout");
        let err = wait.unwrap_err();
        assert!(
            matches!(&err, Error::Catalog { .. })
                && err.to_string().contains("lock timeout")
                && err.to_string().contains("nothing was committed"),
            "{err}"
        );
        holder.rollback().await.unwrap();
        assert_eq!(
            cat.metadata_location(&ident).await.unwrap(),
            "file:///w/00001.metadata.json"
        );
        other.close().await;
        cat.close().await;
    }

    #[tokio::test]
    async fn bad_uris_are_refused_with_the_reason() {
        for (uri, why) in [
            ("mysql://u@h/db", "expected sqlite"),
            ("postgres://u@h", "no database"),
            ("sqlite:/nonexistent-lakedrill/catalog.db", "does not exist"),
        ] {
            let cfg = CatalogConfig {
                kind: "sql".to_owned(),
                uri: uri.to_owned(),
                warehouse: None,
                name: None,
                ..Default::default()
            };
            let err = SqlCatalog::open("lake", &cfg).await.unwrap_err();
            assert!(err.to_string().contains(why), "{uri}: {err}");
        }
    }
}
