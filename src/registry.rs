//! The registry: reader leases, legal holds, in-flight writers, DR checkpoints and the deleter switch.
//!
//! lakedrill protects snapshots by name, not by time windows. Everything that names something to keep lives
//! here, in one database that several lakedrill processes share: a `SQLite` file (`[registry] uri =
//! "sqlite:PATH"`, the default) or a PostgreSQL database (`uri = "postgres://USER@HOST:PORT/DATABASE"`):
//!
//! - **leases** (`snapshotLease`): a reader pins one snapshot until `expires_at` or until it releases the lease;
//! - **holds**: a legal hold on a whole table, one snapshot, or a path prefix, until it is cleared;
//! - **writers**: an in-flight writer's staging prefix, until the writer ends;
//! - **DR checkpoints**: declared recovery points (snapshot id + time);
//! - the **deleter switch**: an operator's global stop for every deleter;
//! - **rollout stages**, **governance decisions**, **quarantine extensions** and **rollout observations**
//!   (schema version 2);
//! - **candidates** and their objects' states, the deleter's **purge runs** and write-once **receipts**;
//! - an append-only **event log** of every change above.
//!
//! # Layout
//!
//! One file per record family, each adding its own `impl Registry` block; every public item is re-exported
//! here, so callers name `crate::registry::X` only. This face holds what every family shares: [`Registry`]
//! (open, schema, migrations), [`RegistryError`], the change transaction and the event log, the time and row
//! helpers. `registry/protections.rs` holds leases, holds, writers, DR checkpoints and the deleter switch;
//! `registry/rollout.rs` rollout stages, governance decisions and observations; `registry/candidates.rs`
//! candidates, their states, quarantine extensions and the acceptance point; `registry/purge_runs.rs` purge
//! claims and batches, receipts and object transitions. A family file uses the face and the families before it
//! in that order, never one after it. The registry wing may use `io` (the database connection), `model`,
//! `govern` and the ground (`safety`, `error`); nothing in it reads the clock or the object store.
//!
//! # Guarantees
//!
//! - Every change runs in one transaction that holds a database-wide write lock from its start, so concurrent
//!   processes serialize on it (waiting up to [`BUSY_TIMEOUT`]) and no update is lost: on `SQLite` a
//!   `BEGIN IMMEDIATE` transaction on a WAL database with `synchronous = FULL` (a committed hold survives a
//!   power cut); on PostgreSQL a `READ COMMITTED` transaction that first takes a transaction-scoped advisory
//!   lock. Both run the same statements through sqlx's `Any` driver and store the same types (times as RFC 3339
//!   text, integers as 64-bit, text compared in byte order), so both answer every query alike.
//! - Every change bumps the monotonic **registry generation** by exactly one and appends one event row carrying
//!   that generation, in the same transaction. The generation never goes back and has no gaps.
//! - Every lease change (add or release) bumps the table's **lease watermark counter**; every hold change
//!   (set or clear) bumps the table's **hold generation**. Both are per table, monotonic, and start at 0.
//!   The deleter gate compares them (compare-and-swap) to detect a lease or a hold racing a delete
//!   (DESIGN §1, §6 "a hold racing the delete CAS").
//! - Table UUIDs are parsed and stored in canonical lowercase hyphenated form, so a hold set under
//!   `7F31…` protects the table that a later query spells `7f31…`.
//! - Time is never read here: every operation takes `now`, which the caller gets from its `Clock`.
//!
//! # What it does not do
//!
//! - It does not check that a snapshot exists, that a lease is within `maxReaderLease`, or that a writer is within
//!   `maxWriterDuration`: those rules belong to the policy and the caller applies them before calling.
//! - It does not expire anything by itself: an expired lease stays in the file with `active = false`, and an
//!   overdue writer stays open until someone ends it. Nothing is ever deleted from the registry.
//! - It does not decide what is deletable, and it does not resolve table names or UUID prefixes.
//! - It does not support an in-memory database: a registry that vanishes with its process protects nothing.
//! - It does not create a PostgreSQL database or role, and takes no password from its URI (`PGPASSWORD` or
//!   `~/.pgpass` supply one).

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AnyPool, Row};

use crate::io::db::{self, DbUri, Dialect, PoolSettings};

mod candidates;
mod protections;
mod purge_runs;
mod rollout;

pub use candidates::{Acceptance, CandidateRecord, QuarantineExtension, State, WorldStamp};
pub use protections::{Checkpoint, DeleterSwitch, Hold, Lease, LeaseWatermark, NewLease, TableStamp, Writer};
pub use purge_runs::{ObjectState, PurgeBaseline, PurgeBatch, PurgeRun, ReceiptRow};
pub use rollout::{
    DecisionRecord, GovernanceHoldChange, NewDecision, ObservationRecord, RolloutChange, RolloutRecord, RolloutStage,
};

pub use crate::model::object::{HoldScope, HoldScopeError};

/// The schema version this build writes and understands.
/// Version 2 added rollout stages, governance decisions, quarantine extensions and rollout observations. A
/// version-1 build must not open a version-2 file: it would ignore `report-only` stages and purge.
/// Version 3 added `generation` to writers and checkpoints: the explicit insertion order that replaced
/// SQLite's `rowid` when PostgreSQL was added. A version-2 build would leave it empty.
pub const SCHEMA_VERSION: i64 = 3;

/// The key of the PostgreSQL advisory lock every registry change takes ([`Dialect::write_lock`]): the ASCII
/// bytes of `lakedril`. Advisory locks are per database, so registries in several schemas of one database
/// share it (they serialize, they do not conflict).
const PG_WRITE_LOCK_KEY: i64 = 0x6c61_6b65_6472_696c;

/// How long a change waits for another process's write transaction before it fails.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the deleter leaves the SQLite write lock free between two batches ([`Registry::yield_to_writers`]):
/// longer than the longest sleep of SQLite's busy handler (100 ms), so a waiting writer always gets in.
pub const WRITER_GAP: Duration = Duration::from_millis(120);

/// Connections per [`Registry`] (per process). Writers are serialized anyway; more would only add waiting.
const MAX_CONNECTIONS: u32 = 4;

/// Per-connection settings. SQLite: WAL, `synchronous = FULL`, and [`BUSY_TIMEOUT`] for the write lock.
/// See: <https://www.sqlite.org/pragma.html#pragma_synchronous> — NORMAL in WAL mode may lose the last commits
/// on power loss; a lost hold is a lost protection. PostgreSQL: [`BUSY_TIMEOUT`] as `lock_timeout`, so a change
/// waits for the write lock as long as on SQLite (commits are durable with the default `synchronous_commit`).
const POOL: PoolSettings = PoolSettings {
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
const SCHEMA: &str = "
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
    policy_digest    TEXT
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
    /// A purge run claimed a candidate ([`Registry::purge_claim`]).
    PurgeRunClaimed,
    /// A purge run let a candidate go ([`Registry::purge_release`]).
    PurgeRunReleased,
}

impl EventKind {
    const ALL: [EventKind; 17] = [
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
            EventKind::PurgeRunClaimed => "purge_run_claimed",
            EventKind::PurgeRunReleased => "purge_run_released",
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
    /// The record after the change (a [`Lease`], [`Hold`], … as JSON).
    pub detail: serde_json::Value,
}

/// A handle on the registry database. Cheap to clone; clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Registry {
    pool: AnyPool,
    dialect: Dialect,
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
        let registry = Registry { pool, dialect };
        registry.init_schema().await.map_err(|e| match e {
            RegistryError::Query { source, .. } => open_err(source),
            other => other,
        })?;
        Ok(registry)
    }

    /// Creates, checks or migrates the schema in one write transaction, so that processes opening a fresh
    /// database at once do not race. A newer schema is detected before anything is written.
    async fn init_schema(&self) -> Result<(), RegistryError> {
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
    async fn rows<T>(
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
        let rows = q.fetch_all(&self.pool).await.map_err(query(op))?;
        rows.iter().map(read).collect::<Result<_, _>>().map_err(query(op))
    }

    /// Runs `read` on a connection from the pool: the shape of every accessor that reads one record, counter
    /// or switch with the reader that write transactions use too.
    async fn read<T>(
        &self,
        op: &'static str,
        read: impl AsyncFnOnce(&mut AnyConnection) -> Result<T, sqlx::Error>,
    ) -> Result<T, RegistryError> {
        let mut conn = self.pool.acquire().await.map_err(query(op))?;
        read(&mut conn).await.map_err(query(op))
    }

    /// [`Registry::rows`] for the rows of one table, `$1` being its UUID in canonical form.
    async fn table_rows<T>(
        &self,
        op: &'static str,
        sql: &'static str,
        table_uuid: &str,
        read: impl Fn(&AnyRow) -> Result<T, sqlx::Error>,
    ) -> Result<Vec<T>, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.rows(op, sql, &[&table_uuid], read).await
    }

    /// Starts a write transaction that holds the database-wide write lock from its start (SQLite's
    /// `BEGIN IMMEDIATE`, a PostgreSQL advisory lock: [`Dialect::begin_write`]), so that the read-modify-write
    /// of a change cannot interleave with another process's.
    async fn begin_write(&self, op: &'static str) -> Result<sqlx::Transaction<'static, sqlx::Any>, RegistryError> {
        let mut tx = self
            .pool
            .begin_with(self.dialect.begin_write())
            .await
            .map_err(query(op))?;
        if let Some(lock) = self.dialect.write_lock() {
            sqlx::query(lock)
                .bind(PG_WRITE_LOCK_KEY)
                .execute(&mut *tx)
                .await
                .map_err(query(op))?;
        }
        Ok(tx)
    }
    /// Starts a change: a write transaction ([`Registry::begin_write`]) with the registry generation already
    /// bumped.
    async fn change(&self, op: &'static str) -> Result<Change, RegistryError> {
        let mut tx = self.begin_write(op).await?;
        let generation = bump_generation(&mut tx).await.map_err(query(op))?;
        Ok(Change { tx, generation, op })
    }
}

/// One change in progress. Dropping it without [`Change::commit`] rolls everything back, the generation bump
/// included, so a refused change (unknown id, already ended) leaves no trace.
struct Change {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    generation: i64,
    op: &'static str,
}

impl Change {
    /// Appends the change's event and commits.
    async fn commit<T: Serialize + Sync>(
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
async fn bump_generation(conn: &mut AnyConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("UPDATE registry_state SET generation = generation + 1 WHERE id = 1 RETURNING generation")
        .fetch_one(conn)
        .await
}

/// Appends the event of a change. Must run in the change's transaction.
async fn record_event<T: Serialize + Sync>(
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

fn event_from_row(row: &AnyRow) -> Result<Event, sqlx::Error> {
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

fn time(row: &AnyRow, column: &'static str) -> Result<DateTime<Utc>, sqlx::Error> {
    let text: String = row.try_get(column)?;
    parse_time(column, &text)
}

fn opt_time(row: &AnyRow, column: &'static str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let text: Option<String> = row.try_get(column)?;
    text.as_deref().map(|s| parse_time(column, s)).transpose()
}

fn parse_time(column: &'static str, text: &str) -> Result<DateTime<Utc>, sqlx::Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| decode(column, e))
}

/// The one row `sql` selects with `key` bound to `$1`, read by `read`, or `None`.
async fn optional_row<T>(
    conn: &mut AnyConnection,
    sql: &'static str,
    key: &str,
    read: fn(&AnyRow) -> Result<T, sqlx::Error>,
) -> Result<Option<T>, sqlx::Error> {
    let row = sqlx::query(sql).bind(key).fetch_optional(conn).await?;
    row.as_ref().map(read).transpose()
}

/// A JSON text column, parsed.
fn json<T: DeserializeOwned>(row: &AnyRow, column: &'static str) -> Result<T, sqlx::Error> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|e| decode(column, e))
}

/// A stored value that the column's type cannot hold (a malformed row).
fn decode(column: &str, source: impl Into<sqlx::error::BoxDynError>) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: source.into(),
    }
}

/// RFC 3339 in UTC with nine fraction digits: exact, and fixed width so that SQL text order is time order.
fn fmt_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn query(op: &'static str) -> impl FnOnce(sqlx::Error) -> RegistryError {
    move |source| RegistryError::Query { op, source }
}

fn require_text(field: &'static str, value: &str) -> Result<(), RegistryError> {
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
fn canonical_table_uuid(table_uuid: &str) -> Result<String, RegistryError> {
    uuid::Uuid::parse_str(table_uuid.trim())
        .map(|u| u.hyphenated().to_string())
        .map_err(|e| RegistryError::Invalid {
            field: "table_uuid",
            reason: format!("{table_uuid:?} is not a UUID ({e})"),
        })
}

/// `sqlite:PATH`, `sqlite://PATH` or `postgres://…` → the database to open.
fn parse_uri(uri: &str) -> Result<DbUri<'_>, RegistryError> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    //! The registry-wide tests (open, schema and migrations, the event log and generation, concurrency across
    //! registries and processes) and the fixtures every family's tests share: each `tests` module of a family
    //! file uses them through `crate::registry::tests`.

    use super::*;
    use chrono::TimeZone;

    pub(super) const T1: &str = "7f31c0de-0000-4000-8000-000000000001";
    pub(super) const T2: &str = "7f31c0de-0000-4000-8000-000000000002";

    pub(super) fn t(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    pub(super) fn new_lease(table: &str, snapshot_id: i64, expires_at: DateTime<Utc>) -> NewLease {
        NewLease {
            table_uuid: table.to_owned(),
            snapshot_id,
            purpose: "nightly report".to_owned(),
            owner: "bi@example.com".to_owned(),
            expires_at,
        }
    }

    pub(super) fn stamp() -> WorldStamp {
        WorldStamp {
            metadata_location: "m1".into(),
            metadata_blake3: "b1".into(),
            protected_ref_root: "r1".into(),
            lease_watermark: 0,
            hold_generation: 0,
        }
    }

    pub(super) async fn fresh() -> (tempfile::TempDir, String, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("sqlite:{}", dir.path().join("registry.db").display());
        let registry = Registry::open(&uri).await.unwrap();
        (dir, uri, registry)
    }

    /// Where a test's registry lives.
    #[derive(Clone, Copy)]
    pub(super) enum Backend {
        Sqlite,
        Postgres,
    }

    /// A fresh registry: a new SQLite file, or a new PostgreSQL database ([`crate::io::db::fresh_postgres_database`],
    /// which fails loudly without `LAKEDRILL_TEST_PG_URI`).
    pub(super) async fn fresh_on(backend: Backend) -> (Option<tempfile::TempDir>, String, Registry) {
        match backend {
            Backend::Sqlite => {
                let (dir, uri, registry) = fresh().await;
                (Some(dir), uri, registry)
            }
            Backend::Postgres => {
                let uri = crate::io::db::fresh_postgres_database().await;
                let registry = Registry::open(&uri).await.unwrap();
                (None, uri, registry)
            }
        }
    }

    /// Runs each named `async fn NAME(Backend)` as two tests, `NAME::sqlite` and `NAME::postgres`. The caller
    /// has `Backend` in scope.
    macro_rules! on_both_backends {
        ($($name:ident),* $(,)?) => {$(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name(super::Backend::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name(super::Backend::Postgres).await;
                }
            }
        )*};
    }
    pub(super) use on_both_backends;

    on_both_backends!(
        open_refuses_a_newer_schema,
        generation_increases_and_every_change_is_an_event,
        records_serialize_snake_case_rfc3339,
        times_round_trip_exactly,
        a_version_1_registry_is_migrated_to_version_2_on_open,
        concurrent_registries_lose_no_update,
    );

    #[tokio::test]
    async fn open_creates_and_reopens_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let uri = format!("sqlite://{}", path.display());
        let r = Registry::open(&uri).await.unwrap();
        assert_eq!(r.generation().await.unwrap(), 0);
        r.hold_set(T1, HoldScope::Table, "litigation", t(0)).await.unwrap();
        r.close().await;
        assert!(path.exists());
        let r = Registry::open(&format!("sqlite:{}", path.display())).await.unwrap();
        assert_eq!(r.generation().await.unwrap(), 1);
        assert_eq!(r.holds(T1).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn open_refuses_bad_uris() {
        for uri in [
            "postgres://x",
            "sqlite:",
            "sqlite::memory:",
            "sqlite://r.db?mode=rwc",
            "r.db",
        ] {
            let err = Registry::open(uri).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    RegistryError::Invalid {
                        field: "registry.uri",
                        ..
                    }
                ),
                "{uri}: {err}"
            );
        }
        let err = Registry::open("sqlite:/nonexistent-dir-lakedrill/r.db")
            .await
            .unwrap_err();
        assert!(matches!(err, RegistryError::Open { .. }), "{err}");
    }

    /// Makes the registry claim schema version `version`, as an older or newer lakedrill would have left it.
    async fn set_schema_version(r: &Registry, version: i64) {
        sqlx::query("UPDATE registry_state SET schema_version = $1")
            .bind(version)
            .execute(&r.pool)
            .await
            .unwrap();
    }

    /// Closes `r` and opens `uri` again, which must migrate it to [`SCHEMA_VERSION`].
    async fn reopen_migrated(r: Registry, uri: &str) -> Registry {
        r.close().await;
        let r = Registry::open(uri).await.unwrap();
        let v: i64 = sqlx::query_scalar("SELECT schema_version FROM registry_state")
            .fetch_one(&r.pool)
            .await
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        r
    }

    async fn open_refuses_a_newer_schema(b: Backend) {
        let (_dir, uri, r) = fresh_on(b).await;
        set_schema_version(&r, 99).await;
        r.close().await;
        let err = Registry::open(&uri).await.unwrap_err();
        assert!(
            matches!(
                err,
                RegistryError::SchemaTooNew {
                    found: 99,
                    supported: SCHEMA_VERSION
                }
            ),
            "{err}"
        );
    }

    async fn generation_increases_and_every_change_is_an_event(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let mut seen = vec![r.generation().await.unwrap()];
        let lease = r.lease_add(&new_lease(T1, 1, t(60)), t(0)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.lease_release(&lease.lease_id, t(1)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        let hold = r.hold_set(T1, HoldScope::Table, "legal", t(2)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.hold_clear(&hold.hold_id, t(3)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        let w = r.writer_begin(T1, "p/", t(4)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.writer_end(&w.writer_id, t(5)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.checkpoint_add(T1, 1, t(0), t(6)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        r.set_deleter_stopped(true, "x", t(7)).await.unwrap();
        seen.push(r.generation().await.unwrap());
        assert_eq!(seen, (0..=8).collect::<Vec<i64>>());
        assert_eq!(r.generation().await.unwrap(), 8);

        let events = r.events(T1).await.unwrap();
        let summary: Vec<_> = events.iter().map(|e| (e.generation, e.kind, e.at)).collect();
        assert_eq!(
            summary,
            vec![
                (1, EventKind::LeaseAdded, t(0)),
                (2, EventKind::LeaseReleased, t(1)),
                (3, EventKind::HoldSet, t(2)),
                (4, EventKind::HoldCleared, t(3)),
                (5, EventKind::WriterBegun, t(4)),
                (6, EventKind::WriterEnded, t(5)),
                (7, EventKind::CheckpointAdded, t(6)),
            ]
        );
        assert_eq!(events[0].detail["lease_id"], serde_json::json!(lease.lease_id));
        assert_eq!(events[2].detail["scope"], serde_json::json!("table"));
        assert_eq!(r.all_events().await.unwrap().len(), 8);

        let stamp = r.table_stamp(T1).await.unwrap();
        assert_eq!(
            stamp,
            TableStamp {
                generation: 8,
                lease_watermark: LeaseWatermark {
                    counter: 2,
                    latest_expires_at: None
                },
                hold_generation: 2,
                deleter_stopped: true,
            }
        );
    }

    async fn records_serialize_snake_case_rfc3339(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let lease = r.lease_add(&new_lease(T1, 42, t(60)), t(0)).await.unwrap();
        let json = serde_json::to_value(&lease).unwrap();
        assert_eq!(json["expires_at"], serde_json::json!("2025-06-01T01:00:00Z"));
        assert_eq!(json["reader_generation"], serde_json::json!(1));
        assert_eq!(json["released_at"], serde_json::Value::Null);
        let back: Lease = serde_json::from_value(json).unwrap();
        assert_eq!(back, lease);
        let event = &r.events(T1).await.unwrap()[0];
        assert_eq!(
            serde_json::to_value(event).unwrap()["kind"],
            serde_json::json!("lease_added")
        );
    }

    async fn times_round_trip_exactly(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let now = t(0) + chrono::Duration::nanoseconds(123_456_789);
        let lease = r
            .lease_add(&new_lease(T1, 1, now + chrono::Duration::nanoseconds(1)), now)
            .await
            .unwrap();
        assert_eq!(r.leases(T1, now).await.unwrap(), vec![lease]);
    }

    /// Several registries on one file, as several processes would have, racing lease and hold changes.
    async fn concurrent_registries_lose_no_update(b: Backend) {
        const INSTANCES: usize = 4;
        const PER_INSTANCE: usize = 25;
        let (_dir, uri, first) = fresh_on(b).await;
        let initial = first.generation().await.unwrap();
        let mut registries = vec![first];
        for _ in 1..INSTANCES {
            registries.push(Registry::open(&uri).await.unwrap());
        }
        let mut tasks = tokio::task::JoinSet::new();
        for (i, r) in registries.iter().enumerate() {
            for j in 0..PER_INSTANCE {
                let r = r.clone();
                tasks.spawn(async move {
                    let snapshot = i64::try_from(i * PER_INSTANCE + j).unwrap();
                    r.lease_add(&new_lease(T1, snapshot, t(60)), t(0)).await.unwrap();
                    r.hold_set(T1, HoldScope::Snapshot(snapshot), "race", t(0))
                        .await
                        .unwrap();
                });
            }
        }
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
        let changes = i64::try_from(2 * INSTANCES * PER_INSTANCE).unwrap();
        let r = &registries[0];
        let leases = r.leases(T1, t(0)).await.unwrap();
        assert_eq!(leases.len(), INSTANCES * PER_INSTANCE);
        assert_eq!(r.generation().await.unwrap(), initial + changes);
        assert_eq!(
            r.hold_generation(T1).await.unwrap(),
            i64::try_from(INSTANCES * PER_INSTANCE).unwrap()
        );
        assert_eq!(
            r.lease_watermark(T1).await.unwrap().counter,
            i64::try_from(INSTANCES * PER_INSTANCE).unwrap()
        );
        // Every change got its own generation, with no gaps.
        let generations: Vec<i64> = r.events(T1).await.unwrap().iter().map(|e| e.generation).collect();
        assert_eq!(generations, (initial + 1..=initial + changes).collect::<Vec<_>>());
        let mut reader_generations: Vec<i64> = leases.iter().map(|l| l.reader_generation).collect();
        reader_generations.dedup();
        assert_eq!(reader_generations.len(), INSTANCES * PER_INSTANCE);
    }

    /// Processes that find no file yet and create it at once must agree on one schema and one generation.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_opens_agree() {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("sqlite:{}", dir.path().join("fresh.db").display());
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..4_i64 {
            let uri = uri.clone();
            tasks.spawn(async move {
                let r = Registry::open(&uri).await.unwrap();
                r.hold_set(T1, HoldScope::Snapshot(i), "first", t(0)).await.unwrap();
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
        let r = Registry::open(&uri).await.unwrap();
        assert_eq!(r.generation().await.unwrap(), 4);
        assert_eq!(r.hold_generation(T1).await.unwrap(), 4);
    }

    /// Callers spawn registry calls on tokio tasks, so every public future must be `Send`. Compile-time only.
    #[allow(dead_code)]
    fn public_futures_are_send(r: &Registry, new: &NewLease, now: DateTime<Utc>) {
        fn send<T: Send>(_: T) {}
        send(Registry::open("sqlite:x"));
        send(r.generation());
        send(r.lease_add(new, now));
        send(r.lease_release("id", now));
        send(r.leases(T1, now));
        send(r.lease_watermark(T1));
        send(r.hold_set(T1, HoldScope::Table, "r", now));
        send(r.hold_clear("id", now));
        send(r.holds(T1));
        send(r.hold_generation(T1));
        send(r.writer_begin(T1, "p", now));
        send(r.writer_end("id", now));
        send(r.writers(T1));
        send(r.checkpoint_add(T1, 1, now, now));
        send(r.checkpoints(T1));
        send(r.deleter_stopped());
        send(r.set_deleter_stopped(true, "r", now));
        send(r.events(T1));
        send(r.all_events());
        send(r.table_stamp(T1));
    }

    const CHILD_ENV: &str = "LAKEDRILL_REGISTRY_TEST_CHILD_URI";
    const CHILD_LEASES: usize = 20;

    /// The body of a child process for [`separate_processes_lose_no_update`]; does nothing when run normally.
    #[tokio::test]
    async fn child_process_adds_leases() {
        let Ok(uri) = std::env::var(CHILD_ENV) else { return };
        let r = Registry::open(&uri).await.unwrap();
        for i in 0..CHILD_LEASES {
            r.lease_add(&new_lease(T2, i64::try_from(i).unwrap(), t(60)), t(0))
                .await
                .unwrap();
            r.hold_set(T2, HoldScope::Table, "child", t(0)).await.unwrap();
        }
    }

    /// Two real OS processes (this test binary, re-executed) and this one race on one registry file.
    #[tokio::test]
    async fn separate_processes_lose_no_update() {
        if std::env::var_os(CHILD_ENV).is_some() {
            return;
        }
        let (_dir, uri, r) = fresh().await;
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args([
                        "registry::tests::child_process_adds_leases",
                        "--exact",
                        "--test-threads=1",
                    ])
                    .env(CHILD_ENV, &uri)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for i in 0..CHILD_LEASES {
            r.lease_add(&new_lease(T2, i64::try_from(i).unwrap(), t(60)), t(0))
                .await
                .unwrap();
            r.hold_set(T2, HoldScope::Table, "parent", t(0)).await.unwrap();
        }
        for mut child in children {
            let status = tokio::task::spawn_blocking(move || child.wait())
                .await
                .unwrap()
                .unwrap();
            assert!(status.success(), "child failed: {status}");
        }
        let n = i64::try_from(3 * CHILD_LEASES).unwrap();
        assert_eq!(r.leases(T2, t(0)).await.unwrap().len(), 3 * CHILD_LEASES);
        assert_eq!(r.generation().await.unwrap(), 2 * n);
        assert_eq!(r.hold_generation(T2).await.unwrap(), n);
        assert_eq!(r.lease_watermark(T2).await.unwrap().counter, n);
    }

    async fn a_version_1_registry_is_migrated_to_version_2_on_open(b: Backend) {
        let (_dir, uri, r) = fresh_on(b).await;
        set_schema_version(&r, 1).await;
        sqlx::query("DROP TABLE rollout_stages").execute(&r.pool).await.unwrap();
        let r = reopen_migrated(r, &uri).await;
        assert_eq!(
            r.rollout_stage("7f31a2b4-09c1-4d5e-9f00-000000000005")
                .await
                .unwrap()
                .stage,
            RolloutStage::ReportOnly
        );
    }

    /// A version-2 file (writers and checkpoints without `generation`) keeps its order after the migration,
    /// and rows added afterwards come after it. SQLite only: no PostgreSQL registry predates version 3.
    #[tokio::test]
    async fn a_version_2_registry_is_migrated_to_version_3_keeping_insertion_order() {
        let (_dir, uri, r) = fresh().await;
        let mut before = Vec::new();
        for i in 0..3 {
            before.push(r.writer_begin(T1, &format!("p{}/", 9 - i), t(0)).await.unwrap());
            r.hold_set(T1, HoldScope::Table, "more changes than rows", t(0))
                .await
                .unwrap();
        }
        let early = r.checkpoint_add(T1, 1, t(0), t(1)).await.unwrap();
        for table in ["writers", "checkpoints"] {
            sqlx::query(&format!("ALTER TABLE {table} DROP COLUMN generation"))
                .execute(&r.pool)
                .await
                .unwrap();
        }
        set_schema_version(&r, 2).await;
        let r = reopen_migrated(r, &uri).await;
        let after = r.writer_begin(T1, "p0/", t(0)).await.unwrap();
        before.push(after);
        assert_eq!(r.writers(T1).await.unwrap(), before);
        let late = r.checkpoint_add(T1, 0, t(0), t(1)).await.unwrap();
        assert_eq!(r.checkpoints(T1).await.unwrap(), vec![early, late]);
    }

    /// A server that refuses connections is reported at once with its cause, not after the pool's timeout.
    #[tokio::test]
    async fn an_unreachable_postgres_server_is_reported_with_its_cause() {
        let started = std::time::Instant::now();
        let err = Registry::open("postgres://lakedrill@127.0.0.1:1/nope")
            .await
            .unwrap_err();
        assert!(matches!(err, RegistryError::Open { .. }), "{err}");
        let cause = std::error::Error::source(&err).unwrap().to_string();
        assert!(cause.contains("refused"), "{cause}");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    }
}
