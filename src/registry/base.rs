//! The registry's base: the schema and its migrations, [`Registry`] open and close, the change
//! transaction every write runs in (the database-wide write lock), the generation counter and the event
//! log, [`RegistryError`], and the helpers every record family uses to read rows.
//!
//! The record families (`protections`, `rollout`, `candidates`, `purge_runs`) build on it; it uses none
//! of them.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AnyPool, Row};

use crate::io::db::{self, DbUri, Dialect, PoolSettings};

use crate::model::object::HoldScopeError;

/// The schema version this build writes and understands.
/// Version 2 added rollout stages, governance decisions, quarantine extensions and rollout observations. A
/// version-1 build must not open a version-2 file: it would ignore `report-only` stages and purge.
/// Version 3 added `generation` to writers and checkpoints: the explicit insertion order that replaced
/// SQLite's `rowid` when PostgreSQL was added. A version-2 build would leave it empty.
/// Version 4 added `forced` and `overrode` to rollout changes (the enforced rollout rules and their override) and
/// the `chain_heads` anchors.
/// Version 5 added `drill_verdicts`: each drill report's verdict per bundle root, which the deleter reads to
/// refuse evidence a newer drill failed wherever its report lies. A version-4 drill would not record its
/// failures, so it must not open a version-5 file.
/// Version 6 added `root_claimed` to `drill_verdicts`: whether the judged root was verified or only claimed by an
/// envelope that did not verify. A version-5 drill would record claimed roots as if verified.
pub const SCHEMA_VERSION: i64 = 6;

/// The key of the PostgreSQL advisory lock every registry change takes ([`Dialect::write_lock`]): the ASCII
/// bytes of `lakedril`. Advisory locks are per database, so registries in several schemas of one database
/// share it (they serialize, they do not conflict).
pub(super) const PG_WRITE_LOCK_KEY: i64 = 0x6c61_6b65_6472_696c;

/// How long one attempt at the write lock waits for another process's write transaction (SQLite's busy
/// timeout, PostgreSQL's `lock_timeout`); [`WRITE_WAIT`] bounds the attempts.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a change waits in all for the registry's write lock before it fails. A purge batch holds the lock
/// across its delete requests and their re-checks (and a REST catalog commit, up to its request timeout), which
/// can take minutes on a slow store; a protection (`hold set`, `lease add`, …) must wait for it and land, not fail
/// after [`BUSY_TIMEOUT`] while the purge goes on.
pub const WRITE_WAIT: Duration = Duration::from_secs(30 * 60);

/// How long the deleter leaves the SQLite write lock free between two batches ([`Registry::yield_to_writers`]):
/// longer than the longest sleep of SQLite's busy handler (100 ms), so a waiting writer always gets in.
pub const WRITER_GAP: Duration = Duration::from_millis(120);

/// Connections per [`Registry`] (per process). Writers are serialized anyway; more would only add waiting.
pub(super) const MAX_CONNECTIONS: u32 = 4;

/// Per-connection settings. SQLite: WAL, `synchronous = FULL`, and [`BUSY_TIMEOUT`] for the write lock.
/// See: <https://www.sqlite.org/pragma.html#pragma_synchronous> — NORMAL in WAL mode may lose the last commits
/// on power loss; a lost hold is a lost protection. PostgreSQL: [`BUSY_TIMEOUT`] as `lock_timeout`, so a change
/// waits for the write lock as long as on SQLite (commits are durable with the default `synchronous_commit`).
pub(super) const POOL: PoolSettings = PoolSettings {
    max_connections: MAX_CONNECTIONS,
    acquire_timeout: Duration::from_secs(30),
    sqlite_session: &[
        "PRAGMA busy_timeout = 10000",
        "PRAGMA journal_mode = WAL",
        "PRAGMA synchronous = FULL",
    ],
    postgres_session: &["SET lock_timeout = '10s'"],
};

/// The schema, idempotent, written for SQLite and translated for PostgreSQL by [`Dialect::ddl`]. Times are
/// RFC 3339 UTC text with nine fraction digits (fixed width, so text order is time order). Ids are UUID v4 text.
/// Booleans are integers (0/1).
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS registry_state (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version   INTEGER NOT NULL,
    generation       INTEGER NOT NULL,
    deleter_stopped  INTEGER NOT NULL DEFAULT 0,
    deleter_reason   TEXT    NOT NULL DEFAULT '',
    deleter_changed_at TEXT
);
CREATE TABLE IF NOT EXISTS table_counters (
    table_uuid       TEXT PRIMARY KEY,
    lease_counter    INTEGER NOT NULL DEFAULT 0,
    hold_generation  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS leases (
    lease_id          TEXT PRIMARY KEY,
    table_uuid        TEXT    NOT NULL,
    snapshot_id       INTEGER NOT NULL,
    purpose           TEXT    NOT NULL,
    owner             TEXT    NOT NULL,
    expires_at        TEXT    NOT NULL,
    reader_generation INTEGER NOT NULL,
    created_at        TEXT    NOT NULL,
    released_at       TEXT
);
CREATE INDEX IF NOT EXISTS leases_by_table ON leases (table_uuid);
CREATE TABLE IF NOT EXISTS holds (
    hold_id          TEXT PRIMARY KEY,
    table_uuid       TEXT    NOT NULL,
    scope            TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    hold_generation  INTEGER NOT NULL,
    set_at           TEXT    NOT NULL,
    cleared_at       TEXT
);
CREATE INDEX IF NOT EXISTS holds_by_table ON holds (table_uuid);
CREATE TABLE IF NOT EXISTS writers (
    writer_id        TEXT PRIMARY KEY,
    table_uuid       TEXT    NOT NULL,
    prefix           TEXT    NOT NULL,
    started_at       TEXT    NOT NULL,
    ended_at         TEXT,
    generation       INTEGER
);
CREATE INDEX IF NOT EXISTS writers_by_table ON writers (table_uuid);
CREATE TABLE IF NOT EXISTS checkpoints (
    checkpoint_id    TEXT PRIMARY KEY,
    table_uuid       TEXT    NOT NULL,
    snapshot_id      INTEGER NOT NULL,
    at               TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    generation       INTEGER
);
CREATE INDEX IF NOT EXISTS checkpoints_by_table ON checkpoints (table_uuid);
CREATE TABLE IF NOT EXISTS events (
    generation       INTEGER PRIMARY KEY,
    at               TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    table_uuid       TEXT,
    detail_json      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_table ON events (table_uuid);
CREATE TABLE IF NOT EXISTS candidates (
    candidate_id     TEXT PRIMARY KEY,
    table_uuid       TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    candidate_json   TEXT    NOT NULL,
    stamp_json       TEXT    NOT NULL,
    quarantine_json  TEXT,
    reason           TEXT    NOT NULL DEFAULT '',
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS candidates_by_table ON candidates (table_uuid);
CREATE TABLE IF NOT EXISTS candidate_parts (
    candidate_id     TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    part             TEXT    NOT NULL,
    PRIMARY KEY (candidate_id, seq)
);
CREATE TABLE IF NOT EXISTS object_states (
    candidate_id     TEXT    NOT NULL,
    path             TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    PRIMARY KEY (candidate_id, path)
);
CREATE TABLE IF NOT EXISTS receipts (
    candidate_id     TEXT    NOT NULL,
    path             TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    receipt_json     TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    PRIMARY KEY (candidate_id, path, attempt)
);
CREATE TABLE IF NOT EXISTS rollout_stages (
    table_uuid       TEXT PRIMARY KEY,
    table_name       TEXT    NOT NULL,
    stage            TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    changed_by       TEXT    NOT NULL,
    changed_at       TEXT    NOT NULL,
    policy_digest    TEXT,
    generation       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rollout_changes (
    generation       INTEGER PRIMARY KEY,
    table_uuid       TEXT    NOT NULL,
    table_name       TEXT    NOT NULL,
    from_stage       TEXT    NOT NULL,
    to_stage         TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    changed_by       TEXT    NOT NULL,
    changed_at       TEXT    NOT NULL,
    policy_digest    TEXT,
    forced           INTEGER,
    overrode         TEXT
);
CREATE INDEX IF NOT EXISTS rollout_changes_by_table ON rollout_changes (table_uuid);
CREATE TABLE IF NOT EXISTS decisions (
    version          INTEGER PRIMARY KEY,
    table_uuid       TEXT    NOT NULL,
    issuer           TEXT    NOT NULL,
    keyid            TEXT    NOT NULL,
    envelope_sha256  TEXT    NOT NULL,
    decision_json    TEXT    NOT NULL,
    applied_at       TEXT    NOT NULL,
    generation       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS governance_holds (
    table_uuid       TEXT    NOT NULL,
    hold_key         TEXT    NOT NULL,
    hold_id          TEXT    NOT NULL,
    PRIMARY KEY (table_uuid, hold_key)
);
CREATE TABLE IF NOT EXISTS quarantine_extensions (
    generation       INTEGER PRIMARY KEY,
    candidate_id     TEXT    NOT NULL,
    not_before       TEXT    NOT NULL,
    reason           TEXT    NOT NULL,
    extended_at      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS quarantine_extensions_by_candidate ON quarantine_extensions (candidate_id);
CREATE TABLE IF NOT EXISTS rollout_observations (
    observation_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    table_uuid       TEXT    NOT NULL,
    observed_at      TEXT    NOT NULL,
    report_json      TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS rollout_observations_by_table ON rollout_observations (table_uuid, observed_at);
CREATE TABLE IF NOT EXISTS chain_heads (
    folder           TEXT    PRIMARY KEY,
    head_sha256      TEXT    NOT NULL,
    reports          INTEGER NOT NULL,
    anchored_at      TEXT    NOT NULL
);
CREATE TABLE IF NOT EXISTS drill_verdicts (
    report_sha256    TEXT    NOT NULL,
    bundle_root      TEXT    NOT NULL,
    verified         INTEGER NOT NULL,
    finished_at      TEXT    NOT NULL,
    report_uri       TEXT    NOT NULL,
    plan             TEXT    NOT NULL,
    shard            TEXT,
    recorded_at      TEXT    NOT NULL,
    root_claimed     INTEGER,
    PRIMARY KEY (report_sha256, bundle_root)
);
CREATE INDEX IF NOT EXISTS drill_verdicts_by_root ON drill_verdicts (bundle_root, finished_at);
CREATE TABLE IF NOT EXISTS purge_runs (
    candidate_id     TEXT    PRIMARY KEY,
    run_id           TEXT    NOT NULL,
    host             TEXT    NOT NULL,
    pid              INTEGER NOT NULL,
    started_at       TEXT    NOT NULL,
    heartbeat_at     TEXT    NOT NULL
);
";

/// Everything that can go wrong in the registry. Each variant means "could not decide": do not delete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The registry database could not be opened or created.
    #[error("cannot open the registry {uri}")]
    Open {
        /// The registry URI as configured.
        uri: String,
        /// The database error.
        #[source]
        source: sqlx::Error,
    },
    /// A statement failed, or a stored row could not be read back.
    #[error("registry operation {op} failed")]
    Query {
        /// The registry operation (`lease_add`, `holds`, …).
        op: &'static str,
        /// The database error.
        #[source]
        source: sqlx::Error,
    },
    /// A lease, hold or writer id that the registry does not have.
    #[error("{what} {id} does not exist in the registry")]
    NotFound {
        /// `lease`, `hold` or `writer`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// A lease was already released, a hold already cleared, or a writer already ended.
    #[error("{what} {id} has already ended")]
    AlreadyEnded {
        /// `lease`, `hold` or `writer`.
        what: &'static str,
        /// The id asked for.
        id: String,
    },
    /// An argument breaks a rule.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The argument or field (`table_uuid`, `expires_at`, `scope`, `registry.uri`, …).
        field: &'static str,
        /// The rule it breaks.
        reason: String,
    },
    /// A governance decision whose version is not above the latest applied one.
    #[error("decision version {version} is not newer than the latest applied version {latest}; refused")]
    VersionNotNewer {
        /// The version offered.
        version: i64,
        /// The latest applied version.
        latest: i64,
    },
    /// The registry file was written by a newer lakedrill.
    #[error("registry schema version {found} is newer than the supported version {supported}; upgrade lakedrill")]
    SchemaTooNew {
        /// The version in the file.
        found: i64,
        /// The newest version this build understands.
        supported: i64,
    },
}

impl From<RegistryError> for crate::Error {
    /// A missing record is not found, a refused change is bad input, anything else is the database.
    fn from(e: RegistryError) -> Self {
        let kind = match e {
            RegistryError::NotFound { .. } => crate::ErrorKind::NotFound,
            RegistryError::AlreadyEnded { .. } | RegistryError::Invalid { .. } => crate::ErrorKind::BadInput,
            _ => crate::ErrorKind::Storage,
        };
        crate::Error::module(kind, e)
    }
}

impl From<HoldScopeError> for RegistryError {
    fn from(e: HoldScopeError) -> Self {
        RegistryError::Invalid {
            field: "scope",
            reason: e.0,
        }
    }
}

/// What a change did; stored as snake case text in the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// [`Registry::lease_add`].
    LeaseAdded,
    /// [`Registry::lease_release`].
    LeaseReleased,
    /// [`Registry::hold_set`].
    HoldSet,
    /// [`Registry::hold_clear`].
    HoldCleared,
    /// [`Registry::writer_begin`].
    WriterBegun,
    /// [`Registry::writer_end`].
    WriterEnded,
    /// [`Registry::checkpoint_add`].
    CheckpointAdded,
    /// [`Registry::set_deleter_stopped`] with `true`.
    DeleterStopped,
    /// [`Registry::set_deleter_stopped`] with `false`.
    DeleterStarted,
    /// A candidate's state changed.
    CandidateState,
    /// A purge was refused at the acceptance point.
    PurgeRefused,
    /// A deletion receipt was recorded.
    ReceiptRecorded,
    /// A table's rollout stage changed.
    RolloutStageSet,
    /// A governance decision was applied.
    DecisionApplied,
    /// A candidate's quarantine was extended.
    QuarantineExtended,
    /// A quarantined candidate was re-judged at a later table generation ([`Registry::candidate_rebase`]).
    CandidateRebased,
    /// A purge run claimed a candidate ([`Registry::purge_claim`]).
    PurgeRunClaimed,
    /// A purge run let a candidate go ([`Registry::purge_release`]).
    PurgeRunReleased,
    /// A chain's head was anchored ([`Registry::chain_anchor`]).
    ChainAnchored,
    /// A drill report's verdicts per bundle root were recorded ([`Registry::drill_record`]).
    DrillRecorded,
}

impl EventKind {
    const ALL: [EventKind; 20] = [
        EventKind::DrillRecorded,
        EventKind::ChainAnchored,
        EventKind::CandidateRebased,
        EventKind::PurgeRunClaimed,
        EventKind::PurgeRunReleased,
        EventKind::RolloutStageSet,
        EventKind::DecisionApplied,
        EventKind::QuarantineExtended,
        EventKind::LeaseAdded,
        EventKind::LeaseReleased,
        EventKind::HoldSet,
        EventKind::HoldCleared,
        EventKind::WriterBegun,
        EventKind::WriterEnded,
        EventKind::CheckpointAdded,
        EventKind::DeleterStopped,
        EventKind::DeleterStarted,
        EventKind::CandidateState,
        EventKind::PurgeRefused,
        EventKind::ReceiptRecorded,
    ];

    /// The stored name (`lease_added`, `hold_cleared`, …).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::LeaseAdded => "lease_added",
            EventKind::LeaseReleased => "lease_released",
            EventKind::HoldSet => "hold_set",
            EventKind::HoldCleared => "hold_cleared",
            EventKind::WriterBegun => "writer_begun",
            EventKind::WriterEnded => "writer_ended",
            EventKind::CheckpointAdded => "checkpoint_added",
            EventKind::CandidateState => "candidate_state",
            EventKind::PurgeRefused => "purge_refused",
            EventKind::ReceiptRecorded => "receipt_recorded",
            EventKind::DeleterStopped => "deleter_stopped",
            EventKind::DeleterStarted => "deleter_started",
            EventKind::RolloutStageSet => "rollout_stage_set",
            EventKind::DecisionApplied => "decision_applied",
            EventKind::QuarantineExtended => "quarantine_extended",
            EventKind::CandidateRebased => "candidate_rebased",
            EventKind::PurgeRunClaimed => "purge_run_claimed",
            EventKind::PurgeRunReleased => "purge_run_released",
            EventKind::ChainAnchored => "chain_anchored",
            EventKind::DrillRecorded => "drill_recorded",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the audit log: one per change, in generation order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The registry generation the change produced.
    pub generation: i64,
    /// The `now` the change was made with.
    pub at: DateTime<Utc>,
    /// What the change did.
    pub kind: EventKind,
    /// The table, or `None` for registry-wide changes (the deleter switch).
    pub table_uuid: Option<String>,
    /// The record after the change (a [`crate::registry::Lease`], [`crate::registry::Hold`], … as JSON).
    pub detail: serde_json::Value,
}

/// A handle on the registry database. Cheap to clone; clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Registry {
    pub(super) pool: AnyPool,
    pub(super) dialect: Dialect,
    /// Write transactions begun through this handle and its clones (the purge reports it, #24).
    writes: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Registry {
    /// Opens the registry at `uri`, creating the schema if it is missing:
    ///
    /// - `sqlite:PATH` or `sqlite://PATH`: a file, created if missing. A relative `PATH` is relative to the
    ///   working directory; the parent directory must exist.
    /// - `postgres://USER@HOST:PORT/DATABASE` (or `postgresql://`): the tables live in the connection's current
    ///   schema (`search_path`; `?options=-c%20search_path%3DNAME` picks another). The database must exist.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a URI that is neither (including `:memory:`, query parameters on a
    /// SQLite path, and a password in a PostgreSQL URL), [`RegistryError::Open`] when the database cannot be
    /// opened or created or the schema cannot be written, and [`RegistryError::SchemaTooNew`] when a newer
    /// lakedrill wrote it.
    pub async fn open(uri: &str) -> Result<Registry, RegistryError> {
        let target = parse_uri(uri)?;
        let open_err = |source| RegistryError::Open {
            uri: uri.to_owned(),
            source,
        };
        let dialect = target.dialect();
        let url = match target {
            DbUri::Sqlite { path, .. } => db::sqlite_url(path, true),
            DbUri::Postgres(url) => url.to_owned(),
        };
        let pool = db::connect(&url, dialect, &POOL).await.map_err(open_err)?;
        let registry = Registry {
            pool,
            dialect,
            writes: std::sync::Arc::default(),
        };
        registry.init_schema().await.map_err(|e| match e {
            RegistryError::Query { source, .. } => open_err(source),
            other => other,
        })?;
        Ok(registry)
    }

    /// Creates, checks or migrates the schema in one write transaction, so that processes opening a fresh
    /// database at once do not race. A newer schema is detected before anything is written.
    pub(super) async fn init_schema(&self) -> Result<(), RegistryError> {
        const OP: &str = "open";
        let mut tx = self.begin_write(OP).await?;
        let exists: i64 = sqlx::query_scalar(self.dialect.count_tables())
            .bind("registry_state")
            .fetch_one(&mut *tx)
            .await
            .map_err(query(OP))?;
        if exists > 0 {
            let found: Option<i64> = sqlx::query_scalar("SELECT schema_version FROM registry_state WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await
                .map_err(query(OP))?;
            match found {
                Some(found) if found > SCHEMA_VERSION => {
                    return Err(RegistryError::SchemaTooNew {
                        found,
                        supported: SCHEMA_VERSION,
                    });
                }
                Some(found) if found < 1 => {
                    return Err(RegistryError::Invalid {
                        field: "schema_version",
                        reason: format!("the registry says schema version {found}, which never existed"),
                    });
                }
                _ => {}
            }
        }
        // One statement at a time: `sqlx::raw_sql` would make `open`'s future not `Send` (a higher-ranked
        // lifetime error in `tokio::spawn`). No statement of SCHEMA contains a `;`.
        let schema = self.dialect.ddl(SCHEMA);
        for statement in schema.split(';').filter(|s| !s.trim().is_empty()) {
            sqlx::query(statement).execute(&mut *tx).await.map_err(query(OP))?;
        }
        sqlx::query(
            "INSERT INTO registry_state (id, schema_version, generation) VALUES (1, $1, 0) ON CONFLICT DO NOTHING",
        )
        .bind(SCHEMA_VERSION)
        .execute(&mut *tx)
        .await
        .map_err(query(OP))?;
        // Migration 1 → 2 only adds tables (created above); every table starts in `report-only`.
        // Migration 4 → 5 only adds `drill_verdicts` (created above, empty: drills before it recorded nothing).
        // Migration 2 → 3 adds `generation` to writers and checkpoints (only SQLite files can be older than 3).
        for table in ["writers", "checkpoints"] {
            let has: i64 = sqlx::query_scalar(self.dialect.count_columns())
                .bind(table)
                .bind("generation")
                .fetch_one(&mut *tx)
                .await
                .map_err(query(OP))?;
            if has == 0 {
                let add = format!("ALTER TABLE {table} ADD COLUMN generation INTEGER");
                sqlx::query(&self.dialect.ddl(&add))
                    .execute(&mut *tx)
                    .await
                    .map_err(query(OP))?;
                if self.dialect == Dialect::Sqlite {
                    // Rows never deleted: the k-th row has rowid k, and the change that added it had a
                    // generation of at least k, so every later row's generation is above every rowid and the
                    // order is kept.
                    sqlx::query(&format!(
                        "UPDATE {table} SET generation = rowid WHERE generation IS NULL"
                    ))
                    .execute(&mut *tx)
                    .await
                    .map_err(query(OP))?;
                }
            }
        }
        // Migration 3 → 4 adds `forced` and `overrode` to rollout changes (a version-3 build would not record an
        // override of the rollout rules). Migration 5 → 6 adds `root_claimed` to drill verdicts; the rows before it
        // keep NULL (not known whether their root was verified or only claimed).
        for (table, column, ty) in [
            ("rollout_changes", "forced", "INTEGER"),
            ("rollout_changes", "overrode", "TEXT"),
            ("drill_verdicts", "root_claimed", "INTEGER"),
        ] {
            let has: i64 = sqlx::query_scalar(self.dialect.count_columns())
                .bind(table)
                .bind(column)
                .fetch_one(&mut *tx)
                .await
                .map_err(query(OP))?;
            if has == 0 {
                let add = format!("ALTER TABLE {table} ADD COLUMN {column} {ty}");
                sqlx::query(&self.dialect.ddl(&add))
                    .execute(&mut *tx)
                    .await
                    .map_err(query(OP))?;
            }
        }
        sqlx::query("UPDATE registry_state SET schema_version = $1 WHERE id = 1 AND schema_version < $2")
            .bind(SCHEMA_VERSION)
            .bind(SCHEMA_VERSION)
            .execute(&mut *tx)
            .await
            .map_err(query(OP))?;
        tx.commit().await.map_err(query(OP))
    }

    /// Closes the pool, waiting for connections in use to be returned. Dropping every clone does the same
    /// without waiting.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Whether [`Registry::close`] was called on this handle or a clone of it.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.pool.is_closed()
    }

    /// The registry generation: the number of changes ever made (0 for a fresh registry).
    ///
    /// # Errors
    ///
    /// [`RegistryError::Query`] when the database cannot be read.
    pub async fn generation(&self) -> Result<i64, RegistryError> {
        sqlx::query_scalar("SELECT generation FROM registry_state WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(query("generation"))
    }

    // ----- events -------------------------------------------------------------------------------------------

    /// The table's events, in generation order.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read or holds a malformed row.
    pub async fn events(&self, table_uuid: &str) -> Result<Vec<Event>, RegistryError> {
        self.table_rows(
            "events",
            "SELECT * FROM events WHERE table_uuid = $1 ORDER BY generation",
            table_uuid,
            event_from_row,
        )
        .await
    }

    /// Every event of the registry, registry-wide ones (the deleter switch) included, in generation order.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Query`] when the database cannot be read or holds a malformed row.
    pub async fn all_events(&self) -> Result<Vec<Event>, RegistryError> {
        self.rows(
            "all_events",
            "SELECT * FROM events ORDER BY generation",
            &[],
            event_from_row,
        )
        .await
    }

    /// Every row `sql` selects with `binds` bound to `$1`, `$2`, …, each read by `read`: the shape of every
    /// list accessor. A malformed row fails the whole read.
    pub(super) async fn rows<T>(
        &self,
        op: &'static str,
        sql: &'static str,
        binds: &[&str],
        read: impl Fn(&AnyRow) -> Result<T, sqlx::Error>,
    ) -> Result<Vec<T>, RegistryError> {
        let mut q = sqlx::query(sql);
        for value in binds {
            q = q.bind(*value);
        }
        // Each row read as it arrives: a million rows held as database rows first took ~430 B each (#24).
        use futures::TryStreamExt;
        let mut rows = q.fetch(&self.pool);
        let mut out = Vec::new();
        while let Some(row) = rows.try_next().await.map_err(query(op))? {
            out.push(read(&row).map_err(query(op))?);
        }
        Ok(out)
    }

    /// Runs `read` on a connection from the pool: the shape of every accessor that reads one record, counter
    /// or switch with the reader that write transactions use too.
    pub(super) async fn read<T>(
        &self,
        op: &'static str,
        read: impl AsyncFnOnce(&mut AnyConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, RegistryError> {
        let mut conn = self.pool.acquire().await.map_err(query(op))?;
        read(&mut conn).await.map_err(query(op))
    }

    /// [`Registry::rows`] for the rows of one table, `$1` being its UUID in canonical form.
    pub(super) async fn table_rows<T>(
        &self,
        op: &'static str,
        sql: &'static str,
        table_uuid: &str,
        read: impl Fn(&AnyRow) -> Result<T, sqlx::Error>,
    ) -> Result<Vec<T>, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.rows(op, sql, &[&table_uuid], read).await
    }

    /// Starts a read-only transaction over one snapshot of the registry ([`Dialect::begin_snapshot`]): what several
    /// statements read in it is of one version of the database.
    pub(super) async fn read_snapshot(
        &self,
        op: &'static str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, RegistryError> {
        self.pool
            .begin_with(self.dialect.begin_snapshot())
            .await
            .map_err(query(op))
    }

    /// Starts a write transaction that holds the database-wide write lock from its start (SQLite's
    /// `BEGIN IMMEDIATE`, a PostgreSQL advisory lock: [`Dialect::begin_write`]), so that the read-modify-write
    /// of a change cannot interleave with another process's.
    pub(super) async fn begin_write(
        &self,
        op: &'static str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Any>, RegistryError> {
        self.writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let started = std::time::Instant::now();
        let mut told = false;
        loop {
            match self.try_begin_write().await {
                Err(e) if lock_busy(self.dialect, &e) && started.elapsed() < WRITE_WAIT => {
                    if !told {
                        // Said once: a protection that waits here lands as soon as the batch holding the lock ends.
                        eprintln!(
                            "registry: {op}: waiting for the write lock, which another lakedrill holds (a purge \
                             batch holds it while its deletes are sent); waiting up to {} minutes",
                            WRITE_WAIT.as_secs() / 60
                        );
                        told = true;
                    }
                }
                other => return other.map_err(query(op)),
            }
        }
    }

    /// One attempt at [`Registry::begin_write`], waiting up to [`BUSY_TIMEOUT`].
    async fn try_begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        let mut tx = self.pool.begin_with(self.dialect.begin_write()).await?;
        if let Some(lock) = self.dialect.write_lock() {
            sqlx::query(lock).bind(PG_WRITE_LOCK_KEY).execute(&mut *tx).await?;
        }
        Ok(tx)
    }
    /// How many write transactions this handle and its clones have begun (each a registry transaction: the
    /// purge's "registry transactions" figure).
    #[must_use]
    pub fn write_transactions(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts a change: a write transaction ([`Registry::begin_write`]) with the registry generation already
    /// bumped.
    pub(super) async fn change(&self, op: &'static str) -> Result<Change, RegistryError> {
        let mut tx = self.begin_write(op).await?;
        let generation = bump_generation(&mut tx).await.map_err(query(op))?;
        Ok(Change { tx, generation, op })
    }
}

/// Whether `e` says the write lock was not had within [`BUSY_TIMEOUT`]: SQLite's `SQLITE_BUSY` ("database is
/// locked", extended codes included) or PostgreSQL's `lock_not_available` (`55P03`, `lock_timeout`).
fn lock_busy(dialect: crate::io::db::Dialect, e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => busy_code(dialect, d.code().as_deref(), d.message()),
        _ => false,
    }
}

/// [`lock_busy`] on an error's code and message. SQLite's codes are numbers whose low byte is the primary code
/// (`SQLITE_BUSY` = 5; 261, 517, 773 are its extended forms); PostgreSQL's are five-character SQLSTATEs, of which
/// only `55P03` is busy. The numeric rule applied to a SQLSTATE took `42501` (insufficient privilege: 0xA605) for
/// busy, and a registry user without the right retried for 30 minutes.
fn busy_code(dialect: crate::io::db::Dialect, code: Option<&str>, message: &str) -> bool {
    let code = code.unwrap_or_default();
    match dialect {
        crate::io::db::Dialect::Postgres => code == "55P03",
        crate::io::db::Dialect::Sqlite => {
            code.parse::<i32>().is_ok_and(|c| c & 0xff == 5) || message.contains("database is locked")
        }
    }
}

/// One change in progress. Dropping it without [`Change::commit`] rolls everything back, the generation bump
/// included, so a refused change (unknown id, already ended) leaves no trace.
pub(super) struct Change {
    pub(super) tx: sqlx::Transaction<'static, sqlx::Any>,
    pub(super) generation: i64,
    pub(super) op: &'static str,
}

impl Change {
    /// Appends the change's event and commits.
    pub(super) async fn commit<T: Serialize + Sync>(
        mut self,
        now: DateTime<Utc>,
        kind: EventKind,
        table_uuid: Option<&str>,
        detail: &T,
    ) -> Result<(), RegistryError> {
        record_event(&mut self.tx, self.generation, now, kind, table_uuid, detail)
            .await
            .map_err(query(self.op))?;
        self.tx.commit().await.map_err(query(self.op))
    }
}

/// Bumps the registry generation and returns its new value. Must run inside a write transaction.
pub(super) async fn bump_generation(conn: &mut AnyConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("UPDATE registry_state SET generation = generation + 1 WHERE id = 1 RETURNING generation")
        .fetch_one(conn)
        .await
}

/// Appends the event of a change. Must run in the change's transaction.
pub(super) async fn record_event<T: Serialize + Sync>(
    conn: &mut AnyConnection,
    generation: i64,
    at: DateTime<Utc>,
    kind: EventKind,
    table_uuid: Option<&str>,
    detail: &T,
) -> Result<(), sqlx::Error> {
    let detail_json = serde_json::to_string(detail).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query("INSERT INTO events (generation, at, kind, table_uuid, detail_json) VALUES ($1, $2, $3, $4, $5)")
        .bind(generation)
        .bind(fmt_time(at))
        .bind(kind.as_str())
        .bind(table_uuid)
        .bind(detail_json)
        .execute(conn)
        .await?;
    Ok(())
}

pub(super) fn event_from_row(row: &AnyRow) -> Result<Event, sqlx::Error> {
    let kind: String = row.try_get("kind")?;
    let kind = EventKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| decode("kind", format!("unknown event kind {kind:?}")))?;
    Ok(Event {
        generation: row.try_get("generation")?,
        at: time(row, "at")?,
        kind,
        table_uuid: row.try_get("table_uuid")?,
        detail: json(row, "detail_json")?,
    })
}

pub(super) fn time(row: &AnyRow, column: &'static str) -> Result<DateTime<Utc>, sqlx::Error> {
    let text: String = row.try_get(column)?;
    parse_time(column, &text)
}

pub(super) fn opt_time(row: &AnyRow, column: &'static str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let text: Option<String> = row.try_get(column)?;
    text.as_deref().map(|s| parse_time(column, s)).transpose()
}

pub(super) fn parse_time(column: &'static str, text: &str) -> Result<DateTime<Utc>, sqlx::Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| decode(column, e))
}

/// The one row `sql` selects with `key` bound to `$1`, read by `read`, or `None`.
pub(super) async fn optional_row<T>(
    conn: &mut AnyConnection,
    sql: &'static str,
    key: &str,
    read: fn(&AnyRow) -> Result<T, sqlx::Error>,
) -> Result<Option<T>, sqlx::Error> {
    let row = sqlx::query(sql).bind(key).fetch_optional(conn).await?;
    row.as_ref().map(read).transpose()
}

/// A JSON text column, parsed.
pub(super) fn json<T: DeserializeOwned>(row: &AnyRow, column: &'static str) -> Result<T, sqlx::Error> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| decode(column, e))
}

/// A stored value that the column's type cannot hold (a malformed row).
pub(super) fn decode(column: &str, source: impl Into<sqlx::error::BoxDynError>) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: source.into(),
    }
}

/// RFC 3339 in UTC with nine fraction digits: exact, and fixed width so that SQL text order is time order.
pub(super) fn fmt_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

pub(super) fn query(op: &'static str) -> impl FnOnce(sqlx::Error) -> RegistryError {
    move |source| RegistryError::Query { op, source }
}

pub(super) fn require_text(field: &'static str, value: &str) -> Result<(), RegistryError> {
    if value.trim().is_empty() {
        return Err(RegistryError::Invalid {
            field,
            reason: "must not be empty".to_owned(),
        });
    }
    Ok(())
}

/// Parses a table UUID in any form the `uuid` crate accepts and returns the lowercase hyphenated form, so that
/// spellings of one table never split its protections.
pub(super) fn canonical_table_uuid(table_uuid: &str) -> Result<String, RegistryError> {
    uuid::Uuid::parse_str(table_uuid.trim())
        .map(|u| u.hyphenated().to_string())
        .map_err(|e| RegistryError::Invalid {
            field: "table_uuid",
            reason: format!("{table_uuid:?} is not a UUID ({e})"),
        })
}

/// `sqlite:PATH`, `sqlite://PATH` or `postgres://…` → the database to open.
pub(super) fn parse_uri(uri: &str) -> Result<DbUri<'_>, RegistryError> {
    let invalid = |reason: &str| RegistryError::Invalid {
        field: "registry.uri",
        reason: format!("{uri:?}: {reason}"),
    };
    let target = db::parse_uri(uri).map_err(|reason| invalid(&reason))?;
    if let DbUri::Sqlite { path, query } = target {
        if path == ":memory:" || path.starts_with("file::memory:") {
            return Err(invalid(
                "an in-memory registry would vanish with its process and protect nothing",
            ));
        }
        if query.is_some() {
            return Err(invalid(
                "query parameters are not supported; lakedrill sets the connection options itself",
            ));
        }
    }
    Ok(target)
}

/// How many objects of `table_uuid`'s candidates are `DELETE_UNKNOWN` (the candidates' own states aside: an
/// uncertain delete can sit under a `PROTECTED` or `DELETED` candidate), read on `conn`.
pub(super) async fn read_table_unknowns(conn: &mut sqlx::AnyConnection, table_uuid: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM object_states o JOIN candidates c ON c.candidate_id = o.candidate_id \
         WHERE c.table_uuid = $1 AND o.state = 'DELETE_UNKNOWN'",
    )
    .bind(table_uuid)
    .fetch_one(conn)
    .await
}

#[cfg(test)]
mod busy_tests {
    use super::busy_code;
    use crate::io::db::Dialect;

    #[test]
    fn only_a_busy_code_of_the_registrys_own_database_is_busy() {
        for code in ["5", "261", "517", "773"] {
            assert!(busy_code(Dialect::Sqlite, Some(code), ""), "{code}");
        }
        assert!(busy_code(Dialect::Sqlite, None, "database is locked"));
        assert!(!busy_code(
            Dialect::Sqlite,
            Some("8"),
            "attempt to write a readonly database"
        ));
        assert!(busy_code(
            Dialect::Postgres,
            Some("55P03"),
            "canceling statement due to lock timeout"
        ));
        for code in ["42501", "28P01", "40001", "53300"] {
            assert!(!busy_code(Dialect::Postgres, Some(code), "permission denied"), "{code}");
        }
    }
}
