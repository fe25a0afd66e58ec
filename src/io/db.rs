//! One SQL connection pool over SQLite and PostgreSQL, for the registry and the catalog reader.
//!
//! Both use sqlx's `Any` driver, so every statement is written once: `$N` placeholders (sqlx's SQLite driver
//! binds `$N` by number too), `ON CONFLICT … DO NOTHING/UPDATE` instead of `INSERT OR IGNORE`, `RETURNING`,
//! explicit ordering columns instead of SQLite's `rowid`, and only the types `Any` carries (`BIGINT`/`INTEGER`
//! as `i64`, `TEXT` as `String`; booleans are stored as integers, times as fixed-width RFC 3339 text). What
//! still differs between the two databases lives here: URI parsing, per-connection settings, the transaction
//! that takes the global write lock, the schema's type names and the catalog queries about tables and columns.
//!
//! It does not support in-memory SQLite databases, MySQL, or passwords in URIs (the configuration refuses them;
//! PostgreSQL reads `PGPASSWORD` or `~/.pgpass`).

use std::borrow::Cow;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyPool, ConnectOptions, Connection};

/// The database behind a URI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

/// A parsed database URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DbUri<'a> {
    /// `sqlite:PATH`, `sqlite://PATH` or `sqlite:///ABS` (query string kept, if any).
    Sqlite {
        /// The file path (`?…` removed).
        path: &'a str,
        /// The query string after `?`, if any.
        query: Option<&'a str>,
    },
    /// `postgres://…` or `postgresql://…`, passed to sqlx as written.
    Postgres(&'a str),
}

impl DbUri<'_> {
    /// The dialect of the URI.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            DbUri::Sqlite { .. } => Dialect::Sqlite,
            DbUri::Postgres(_) => Dialect::Postgres,
        }
    }
}

/// Whether `uri` names a PostgreSQL database.
pub(crate) fn is_postgres(uri: &str) -> bool {
    uri.starts_with("postgres://") || uri.starts_with("postgresql://")
}

/// Parses a registry or catalog URI. The error is the reason, for the caller to wrap with the field's name.
pub(crate) fn parse_uri(uri: &str) -> Result<DbUri<'_>, String> {
    if is_postgres(uri) {
        let url = url::Url::parse(uri).map_err(|e| format!("not a PostgreSQL URL ({e})"))?;
        if url.password().is_some() {
            return Err("the URL carries a password; use PGPASSWORD or ~/.pgpass".to_owned());
        }
        if url.path().trim_start_matches('/').is_empty() {
            return Err("the URL names no database (postgres://USER@HOST:PORT/DATABASE)".to_owned());
        }
        return Ok(DbUri::Postgres(uri));
    }
    let rest = uri
        .strip_prefix("sqlite://")
        .or_else(|| uri.strip_prefix("sqlite:"))
        .ok_or_else(|| "expected sqlite:PATH, sqlite://PATH or postgres://USER@HOST:PORT/DATABASE".to_owned())?;
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() {
        return Err("the path is empty".to_owned());
    }
    Ok(DbUri::Sqlite { path, query })
}

/// The sqlx URL of a SQLite file: `%`, `?` and `#` in the path are escaped, because sqlx percent-decodes it.
pub(crate) fn sqlite_url(path: &str, create_if_missing: bool) -> String {
    let mut escaped = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '%' => escaped.push_str("%25"),
            '?' => escaped.push_str("%3F"),
            '#' => escaped.push_str("%23"),
            c => escaped.push(c),
        }
    }
    let mode = if create_if_missing { "rwc" } else { "rw" };
    format!("sqlite://{escaped}?mode={mode}")
}

/// Pool settings.
pub(crate) struct PoolSettings {
    /// Connections per pool.
    pub max_connections: u32,
    /// How long to wait for a free connection.
    pub acquire_timeout: Duration,
    /// Statements run on every new connection, per dialect (PRAGMAs, session settings).
    pub sqlite_session: &'static [&'static str],
    /// Statements run on every new PostgreSQL connection.
    pub postgres_session: &'static [&'static str],
}

/// Opens a pool on `url` (a sqlx URL: see [`sqlite_url`] for SQLite files).
///
/// One connection is made first, outside the pool, so that a server that refuses connections or a database
/// that does not exist is reported with its cause at once (the pool would retry until its acquire timeout and
/// then report only "pool timed out").
///
/// The pool has no idle timeout and no maximum lifetime, so sqlx starts no maintenance task for it. That task
/// is where sqlx 0.8 can spin forever: `release` makes a connection acquirable before it counts it idle, a
/// concurrent `pop_idle` then wraps `num_idle` below zero, and the reaper's loop `for _ in 0..num_idle()` runs
/// 2^64 times without yielding, which keeps the runtime (and the process) from ever shutting down. A command
/// is short-lived and closes its pools (the operations context's `close`); reaping idle connections buys it
/// nothing. See: <https://github.com/launchbadge/sqlx/issues/3645> (fixed by sqlx#4289, in no 0.8 release:
/// 0.8.6 is the last; iceberg-catalog-sql 0.10 needs sqlx 0.8).
pub(crate) async fn connect(url: &str, dialect: Dialect, settings: &PoolSettings) -> Result<AnyPool, sqlx::Error> {
    sqlx::any::install_default_drivers();
    let options: AnyConnectOptions = url.parse()?;
    options.connect().await?.close().await?;
    let session = match dialect {
        Dialect::Sqlite => settings.sqlite_session,
        Dialect::Postgres => settings.postgres_session,
    };
    AnyPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .idle_timeout(None)
        .max_lifetime(None)
        .after_connect(move |conn, _meta| {
            Box::pin(async move {
                for statement in session {
                    sqlx::query(statement).execute(&mut *conn).await?;
                }
                Ok(())
            })
        })
        .connect_with(options)
        .await
}

impl Dialect {
    /// The statement that opens a write transaction holding the database-wide write lock from its start.
    ///
    /// SQLite: `BEGIN IMMEDIATE` takes the file's write lock (waiting up to the busy timeout).
    /// See: <https://www.sqlite.org/lang_transaction.html#deferred_immediate_and_exclusive_transactions>
    ///
    /// PostgreSQL: `READ COMMITTED`, then [`Dialect::write_lock`] as the first statement. Under
    /// `READ COMMITTED` every later statement takes a fresh snapshot, so once the lock is held the transaction
    /// sees every change committed by the previous holder (`REPEATABLE READ` would keep the snapshot of the
    /// lock statement itself and read stale rows).
    pub(crate) fn begin_write(self) -> &'static str {
        match self {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN ISOLATION LEVEL READ COMMITTED",
        }
    }

    /// The statement, run first inside [`Dialect::begin_write`], that takes the write lock where `BEGIN` does
    /// not: a transaction-scoped advisory lock on PostgreSQL (released at commit or rollback; it needs no
    /// table, so it also serializes the first creation of the schema). `lock_timeout` bounds the wait.
    /// See: <https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS>
    pub(crate) fn write_lock(self) -> Option<&'static str> {
        match self {
            Dialect::Sqlite => None,
            // `pg_advisory_xact_lock` returns `void`, a type the `Any` driver cannot decode: count the row.
            Dialect::Postgres => Some("SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock($1)) AS write_lock"),
        }
    }

    /// The statement that opens a read-only transaction whose statements all see one snapshot.
    pub(crate) fn begin_snapshot(self) -> &'static str {
        match self {
            // A deferred transaction on a WAL database reads one snapshot from its first read.
            Dialect::Sqlite => "BEGIN",
            Dialect::Postgres => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        }
    }

    /// `SELECT COUNT(*)` of tables named `$1` in the database (SQLite) or the current schema (PostgreSQL).
    pub(crate) fn count_tables(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
            Dialect::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
            }
        }
    }

    /// `SELECT COUNT(*)` of columns named `$2` in table `$1`.
    pub(crate) fn count_columns(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SELECT COUNT(*) FROM pragma_table_info($1) WHERE name = $2",
            Dialect::Postgres => {
                "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() \
                 AND table_name = $1 AND column_name = $2"
            }
        }
    }

    /// Translates DDL written for SQLite into this dialect. The SQLite text is the reference (its files exist
    /// in the field); PostgreSQL gets 64-bit integers, an identity column for `AUTOINCREMENT`, and byte-order
    /// (`C`) collation on every text column so that `ORDER BY`, `MAX` and `>=` on text give SQLite's answers.
    pub(crate) fn ddl(self, sqlite: &str) -> Cow<'_, str> {
        match self {
            Dialect::Sqlite => Cow::Borrowed(sqlite),
            Dialect::Postgres => Cow::Owned(
                sqlite
                    .replace(
                        "INTEGER PRIMARY KEY AUTOINCREMENT",
                        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                    )
                    .replace("INTEGER", "BIGINT")
                    .replace("TEXT", "TEXT COLLATE \"C\""),
            ),
        }
    }
}

/// A fresh PostgreSQL database for one test (`CREATE DATABASE t_<uuid>` through the server of
/// `LAKEDRILL_TEST_PG_URI`, which `scripts/test.sh` starts), returned as a URI. Fails loudly when the variable is
/// unset or the server cannot be reached: a PostgreSQL test never passes without PostgreSQL.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) async fn fresh_postgres_database() -> String {
    use sqlx::Connection;
    let admin = std::env::var("LAKEDRILL_TEST_PG_URI").unwrap_or_else(|_| {
        panic!("LAKEDRILL_TEST_PG_URI is not set: run the tests with scripts/test.sh, which starts PostgreSQL")
    });
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {admin} (LAKEDRILL_TEST_PG_URI): {e}"));
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name} on {admin}: {e}"));
    conn.close().await.unwrap();
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path(&name);
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_per_dialect() {
        assert_eq!(
            parse_uri("sqlite:r.db").unwrap(),
            DbUri::Sqlite {
                path: "r.db",
                query: None
            }
        );
        assert_eq!(
            parse_uri("sqlite:///abs/r.db?mode=rwc").unwrap(),
            DbUri::Sqlite {
                path: "/abs/r.db",
                query: Some("mode=rwc")
            }
        );
        assert_eq!(
            parse_uri("postgres://u@127.0.0.1:5432/reg").unwrap().dialect(),
            Dialect::Postgres
        );
        assert_eq!(
            parse_uri("postgresql://u@db/reg?sslmode=require").unwrap().dialect(),
            Dialect::Postgres
        );
        for (bad, why) in [
            ("postgres://u:secret@h/db", "password"),
            ("postgres://u@h", "no database"),
            ("postgres://u@h/", "no database"),
            ("mysql://u@h/db", "expected sqlite"),
            ("sqlite:", "empty"),
            ("r.db", "expected sqlite"),
        ] {
            let err = parse_uri(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn sqlite_urls_escape_what_sqlx_decodes() {
        assert_eq!(sqlite_url("/a b/r.db", true), "sqlite:///a b/r.db?mode=rwc");
        assert_eq!(sqlite_url("x%20?#.db", false), "sqlite://x%2520%3F%23.db?mode=rw");
    }

    /// See: issue 16 point 6 — a process hung at exit in sqlx's pool maintenance task (sqlx#3645).
    #[tokio::test]
    async fn r16_pools_have_no_maintenance_task() {
        let dir = tempfile::tempdir().unwrap();
        let url = sqlite_url(&dir.path().join("p.db").display().to_string(), true);
        let settings = PoolSettings {
            max_connections: 2,
            acquire_timeout: Duration::from_secs(5),
            sqlite_session: &[],
            postgres_session: &[],
        };
        let pool = connect(&url, Dialect::Sqlite, &settings).await.unwrap();
        // sqlx spawns the reaper only when one of these is set (sqlx-core 0.8.6, spawn_maintenance_tasks).
        assert_eq!(pool.options().get_idle_timeout(), None);
        assert_eq!(pool.options().get_max_lifetime(), None);
        assert_eq!(pool.options().get_min_connections(), 0);
        pool.close().await;
    }

    #[test]
    fn postgres_ddl_has_bigint_identity_and_byte_order_text() {
        let sqlite = "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER NOT NULL, s TEXT NOT NULL)";
        assert_eq!(Dialect::Sqlite.ddl(sqlite), sqlite);
        assert_eq!(
            Dialect::Postgres.ddl(sqlite),
            "CREATE TABLE t (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT NOT NULL, \
             s TEXT COLLATE \"C\" NOT NULL)"
        );
    }
}
