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
//!   (schema version 2, see the `rollout` submodule);
//! - an append-only **event log** of every change above.
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
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AnyPool, Row};

use crate::io::db::{self, DbUri, Dialect, PoolSettings};

mod rollout;
pub use rollout::{
    DecisionRecord, GovernanceHoldChange, NewDecision, ObservationRecord, QuarantineExtension, RolloutChange,
    RolloutRecord, RolloutStage,
};

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

/// A request for a new reader lease; see [`Registry::lease_add`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewLease {
    /// The table's UUID.
    pub table_uuid: String,
    /// The snapshot the reader pins.
    pub snapshot_id: i64,
    /// Why the reader needs it (free text, required).
    pub purpose: String,
    /// Who holds the lease (free text, required).
    pub owner: String,
    /// When the lease lapses; must be after `now`.
    pub expires_at: DateTime<Utc>,
}

/// A reader lease (`snapshotLease`) as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The lease id (UUID v4).
    pub lease_id: String,
    /// The table's UUID (canonical form).
    pub table_uuid: String,
    /// The pinned snapshot.
    pub snapshot_id: i64,
    /// Why the reader needs the snapshot.
    pub purpose: String,
    /// Who holds the lease.
    pub owner: String,
    /// When the lease lapses.
    pub expires_at: DateTime<Utc>,
    /// The registry generation of the change that added the lease.
    pub reader_generation: i64,
    /// When the lease was added.
    pub created_at: DateTime<Utc>,
    /// When the lease was released, if it was.
    pub released_at: Option<DateTime<Utc>>,
    /// Not released and `expires_at` after the `now` the lease was read with.
    pub active: bool,
}

/// The lease state of one table that the deleter gate compares; see [`Registry::lease_watermark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseWatermark {
    /// Bumped by every lease change (add or release) of the table; 0 if there never was one.
    pub counter: i64,
    /// The latest `expires_at` among the table's leases that are not released (it may lie in the past).
    pub latest_expires_at: Option<DateTime<Utc>>,
}

pub use crate::model::object::{HoldScope, HoldScopeError};

impl From<HoldScopeError> for RegistryError {
    fn from(e: HoldScopeError) -> Self {
        RegistryError::Invalid {
            field: "scope",
            reason: e.0,
        }
    }
}

/// A legal hold as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The hold id (UUID v4).
    pub hold_id: String,
    /// The table's UUID (canonical form).
    pub table_uuid: String,
    /// What the hold protects.
    pub scope: HoldScope,
    /// Why (free text, required).
    pub reason: String,
    /// The table's hold generation right after this hold was set.
    pub hold_generation: i64,
    /// When the hold was set.
    pub set_at: DateTime<Utc>,
    /// When the hold was cleared, if it was.
    pub cleared_at: Option<DateTime<Utc>>,
    /// Not cleared. Holds do not expire.
    pub active: bool,
}

/// An in-flight writer as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    /// The writer id (UUID v4).
    pub writer_id: String,
    /// The table's UUID (canonical form).
    pub table_uuid: String,
    /// The staging prefix, as the caller wrote it; nothing under it is ever a candidate while the writer is open.
    pub prefix: String,
    /// When the writer began.
    pub started_at: DateTime<Utc>,
    /// When the writer ended, if it did.
    pub ended_at: Option<DateTime<Utc>>,
    /// Not ended. `maxWriterDuration` is not applied here.
    pub open: bool,
}

/// A declared disaster-recovery point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The checkpoint id (UUID v4).
    pub checkpoint_id: String,
    /// The table's UUID (canonical form).
    pub table_uuid: String,
    /// The snapshot that backups must be able to restore.
    pub snapshot_id: i64,
    /// The recovery point's time.
    pub at: DateTime<Utc>,
    /// When the checkpoint was declared.
    pub created_at: DateTime<Utc>,
}

/// The global deleter switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleterSwitch {
    /// When true, no deleter may accept a delete.
    pub stopped: bool,
    /// The reason given with the last change (empty if never changed).
    pub reason: String,
    /// When it was last changed, if ever.
    pub changed_at: Option<DateTime<Utc>>,
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

/// The registry counters of one table, read in one transaction, for the deleter gate's compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStamp {
    /// The registry generation.
    pub generation: i64,
    /// The table's lease watermark.
    pub lease_watermark: LeaseWatermark,
    /// The table's hold generation.
    pub hold_generation: i64,
    /// The global deleter switch.
    pub deleter_stopped: bool,
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

    // ----- leases -------------------------------------------------------------------------------------------

    /// Adds a reader lease on `new.snapshot_id`. The lease id is a fresh UUID v4; `reader_generation` is the
    /// registry generation of this change. Bumps the table's lease watermark counter.
    ///
    /// The caller has already checked that the snapshot exists and that the lease fits `maxReaderLease`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, an empty purpose or owner, or an `expires_at` not
    /// after `now`; [`RegistryError::Query`] when the change cannot be committed.
    pub async fn lease_add(&self, new: &NewLease, now: DateTime<Utc>) -> Result<Lease, RegistryError> {
        const OP: &str = "lease_add";
        let table_uuid = canonical_table_uuid(&new.table_uuid)?;
        require_text("purpose", &new.purpose)?;
        require_text("owner", &new.owner)?;
        if new.expires_at <= now {
            return Err(RegistryError::Invalid {
                field: "expires_at",
                reason: format!("{} is not after now ({})", fmt_time(new.expires_at), fmt_time(now)),
            });
        }
        let mut change = self.change(OP).await?;
        bump_table_counter(&mut change.tx, &table_uuid, Counter::Lease)
            .await
            .map_err(query(OP))?;
        let lease = Lease {
            lease_id: uuid::Uuid::new_v4().to_string(),
            table_uuid,
            snapshot_id: new.snapshot_id,
            purpose: new.purpose.clone(),
            owner: new.owner.clone(),
            expires_at: new.expires_at,
            reader_generation: change.generation,
            created_at: now,
            released_at: None,
            active: true,
        };
        sqlx::query(
            "INSERT INTO leases (lease_id, table_uuid, snapshot_id, purpose, owner, expires_at, reader_generation, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&lease.lease_id)
        .bind(&lease.table_uuid)
        .bind(lease.snapshot_id)
        .bind(&lease.purpose)
        .bind(&lease.owner)
        .bind(fmt_time(lease.expires_at))
        .bind(lease.reader_generation)
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        change
            .commit(now, EventKind::LeaseAdded, Some(&lease.table_uuid), &lease)
            .await?;
        Ok(lease)
    }

    /// Releases a lease (sets `released_at = now`) and bumps its table's lease watermark counter. An expired
    /// lease can still be released.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotFound`] for an unknown id, [`RegistryError::AlreadyEnded`] when the lease was
    /// already released, [`RegistryError::Query`] when the change cannot be committed.
    pub async fn lease_release(&self, lease_id: &str, now: DateTime<Utc>) -> Result<Lease, RegistryError> {
        const OP: &str = "lease_release";
        let mut change = self.change(OP).await?;
        let row = end_record(&mut change, EndedRecord::LEASE, lease_id, now).await?;
        let mut lease = lease_from_row(&row, now).map_err(query(OP))?;
        bump_table_counter(&mut change.tx, &lease.table_uuid, Counter::Lease)
            .await
            .map_err(query(OP))?;
        lease.released_at = Some(now);
        lease.active = false;
        change
            .commit(now, EventKind::LeaseReleased, Some(&lease.table_uuid), &lease)
            .await?;
        Ok(lease)
    }

    /// Every lease of the table ever added, released and expired ones included, oldest first, with `active`
    /// computed against `now`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read or holds a malformed row.
    pub async fn leases(&self, table_uuid: &str, now: DateTime<Utc>) -> Result<Vec<Lease>, RegistryError> {
        const OP: &str = "leases";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM leases WHERE table_uuid = $1 ORDER BY reader_generation")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter()
            .map(|row| lease_from_row(row, now).map_err(query(OP)))
            .collect()
    }

    /// The table's lease watermark: its lease change counter and the latest `expires_at` among its leases that
    /// are not released.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read.
    pub async fn lease_watermark(&self, table_uuid: &str) -> Result<LeaseWatermark, RegistryError> {
        const OP: &str = "lease_watermark";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let mut conn = self.pool.acquire().await.map_err(query(OP))?;
        read_lease_watermark(&mut conn, &table_uuid).await.map_err(query(OP))
    }

    // ----- holds --------------------------------------------------------------------------------------------

    /// Sets a legal hold and bumps the table's hold generation.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, an empty reason or an empty prefix;
    /// [`RegistryError::Query`] when the change cannot be committed.
    pub async fn hold_set(
        &self,
        table_uuid: &str,
        scope: HoldScope,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<Hold, RegistryError> {
        const OP: &str = "hold_set";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        require_text("reason", reason)?;
        if let HoldScope::Prefix(path) = &scope {
            require_text("scope", path)?;
        }
        let mut change = self.change(OP).await?;
        let hold_generation = bump_table_counter(&mut change.tx, &table_uuid, Counter::Hold)
            .await
            .map_err(query(OP))?;
        let hold = Hold {
            hold_id: uuid::Uuid::new_v4().to_string(),
            table_uuid,
            scope,
            reason: reason.to_owned(),
            hold_generation,
            set_at: now,
            cleared_at: None,
            active: true,
        };
        sqlx::query(
            "INSERT INTO holds (hold_id, table_uuid, scope, reason, hold_generation, set_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&hold.hold_id)
        .bind(&hold.table_uuid)
        .bind(hold.scope.to_string())
        .bind(&hold.reason)
        .bind(hold.hold_generation)
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        change
            .commit(now, EventKind::HoldSet, Some(&hold.table_uuid), &hold)
            .await?;
        Ok(hold)
    }

    /// Clears a legal hold (sets `cleared_at = now`) and bumps its table's hold generation.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotFound`] for an unknown id, [`RegistryError::AlreadyEnded`] when the hold was already
    /// cleared, [`RegistryError::Query`] when the change cannot be committed.
    pub async fn hold_clear(&self, hold_id: &str, now: DateTime<Utc>) -> Result<Hold, RegistryError> {
        const OP: &str = "hold_clear";
        let mut change = self.change(OP).await?;
        let row = end_record(&mut change, EndedRecord::HOLD, hold_id, now).await?;
        let mut hold = hold_from_row(&row).map_err(query(OP))?;
        bump_table_counter(&mut change.tx, &hold.table_uuid, Counter::Hold)
            .await
            .map_err(query(OP))?;
        hold.cleared_at = Some(now);
        hold.active = false;
        change
            .commit(now, EventKind::HoldCleared, Some(&hold.table_uuid), &hold)
            .await?;
        Ok(hold)
    }

    /// Every hold of the table ever set, cleared ones included, oldest first.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read or holds a malformed row.
    pub async fn holds(&self, table_uuid: &str) -> Result<Vec<Hold>, RegistryError> {
        const OP: &str = "holds";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM holds WHERE table_uuid = $1 ORDER BY hold_generation")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter().map(|row| hold_from_row(row).map_err(query(OP))).collect()
    }

    /// The table's hold generation: the number of hold changes (sets and clears) it ever had.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read.
    pub async fn hold_generation(&self, table_uuid: &str) -> Result<i64, RegistryError> {
        const OP: &str = "hold_generation";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let mut conn = self.pool.acquire().await.map_err(query(OP))?;
        read_hold_generation(&mut conn, &table_uuid).await.map_err(query(OP))
    }

    // ----- writers ------------------------------------------------------------------------------------------

    /// Registers an in-flight writer and its staging prefix.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID or an empty prefix, [`RegistryError::Query`] when
    /// the change cannot be committed.
    pub async fn writer_begin(
        &self,
        table_uuid: &str,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Writer, RegistryError> {
        const OP: &str = "writer_begin";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        require_text("prefix", prefix)?;
        let mut change = self.change(OP).await?;
        let writer = Writer {
            writer_id: uuid::Uuid::new_v4().to_string(),
            table_uuid,
            prefix: prefix.to_owned(),
            started_at: now,
            ended_at: None,
            open: true,
        };
        sqlx::query(
            "INSERT INTO writers (writer_id, table_uuid, prefix, started_at, generation) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&writer.writer_id)
        .bind(&writer.table_uuid)
        .bind(&writer.prefix)
        .bind(fmt_time(now))
        .bind(change.generation)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        change
            .commit(now, EventKind::WriterBegun, Some(&writer.table_uuid), &writer)
            .await?;
        Ok(writer)
    }

    /// Ends an in-flight writer (sets `ended_at = now`).
    ///
    /// # Errors
    ///
    /// [`RegistryError::NotFound`] for an unknown id, [`RegistryError::AlreadyEnded`] when the writer already
    /// ended, [`RegistryError::Query`] when the change cannot be committed.
    pub async fn writer_end(&self, writer_id: &str, now: DateTime<Utc>) -> Result<Writer, RegistryError> {
        const OP: &str = "writer_end";
        let mut change = self.change(OP).await?;
        let row = end_record(&mut change, EndedRecord::WRITER, writer_id, now).await?;
        let mut writer = writer_from_row(&row).map_err(query(OP))?;
        writer.ended_at = Some(now);
        writer.open = false;
        change
            .commit(now, EventKind::WriterEnded, Some(&writer.table_uuid), &writer)
            .await?;
        Ok(writer)
    }

    /// Every writer of the table ever registered, ended ones included, oldest first.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read or holds a malformed row.
    pub async fn writers(&self, table_uuid: &str) -> Result<Vec<Writer>, RegistryError> {
        const OP: &str = "writers";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM writers WHERE table_uuid = $1 ORDER BY started_at, generation")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter().map(|row| writer_from_row(row).map_err(query(OP))).collect()
    }

    // ----- DR checkpoints -----------------------------------------------------------------------------------

    /// Declares a disaster-recovery point: `snapshot_id` as of `at`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID or an `at` after `now` (a recovery point cannot lie
    /// in the future); [`RegistryError::Query`] when the change cannot be committed.
    pub async fn checkpoint_add(
        &self,
        table_uuid: &str,
        snapshot_id: i64,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Checkpoint, RegistryError> {
        const OP: &str = "checkpoint_add";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        if at > now {
            return Err(RegistryError::Invalid {
                field: "at",
                reason: format!("the recovery point {} is after now ({})", fmt_time(at), fmt_time(now)),
            });
        }
        let mut change = self.change(OP).await?;
        let checkpoint = Checkpoint {
            checkpoint_id: uuid::Uuid::new_v4().to_string(),
            table_uuid,
            snapshot_id,
            at,
            created_at: now,
        };
        sqlx::query(
            "INSERT INTO checkpoints (checkpoint_id, table_uuid, snapshot_id, at, created_at, generation) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&checkpoint.checkpoint_id)
        .bind(&checkpoint.table_uuid)
        .bind(checkpoint.snapshot_id)
        .bind(fmt_time(at))
        .bind(fmt_time(now))
        .bind(change.generation)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        change
            .commit(
                now,
                EventKind::CheckpointAdded,
                Some(&checkpoint.table_uuid),
                &checkpoint,
            )
            .await?;
        Ok(checkpoint)
    }

    /// Every DR checkpoint of the table, ordered by `at`.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read or holds a malformed row.
    pub async fn checkpoints(&self, table_uuid: &str) -> Result<Vec<Checkpoint>, RegistryError> {
        const OP: &str = "checkpoints";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM checkpoints WHERE table_uuid = $1 ORDER BY at, generation")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter()
            .map(|row| checkpoint_from_row(row).map_err(query(OP)))
            .collect()
    }

    // ----- deleter switch -----------------------------------------------------------------------------------

    /// Whether the operator has stopped every deleter.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Query`] when the database cannot be read.
    pub async fn deleter_stopped(&self) -> Result<bool, RegistryError> {
        Ok(self.deleter_switch().await?.stopped)
    }

    /// The deleter switch with its reason and time of last change.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Query`] when the database cannot be read.
    pub async fn deleter_switch(&self) -> Result<DeleterSwitch, RegistryError> {
        const OP: &str = "deleter_switch";
        let mut conn = self.pool.acquire().await.map_err(query(OP))?;
        read_deleter_switch(&mut conn).await.map_err(query(OP))
    }

    /// Stops (`true`) or restarts (`false`) every deleter. Setting the state it already has is still recorded,
    /// as an operator's act with its reason.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for an empty reason, [`RegistryError::Query`] when the change cannot be
    /// committed.
    pub async fn set_deleter_stopped(
        &self,
        stopped: bool,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<DeleterSwitch, RegistryError> {
        const OP: &str = "set_deleter_stopped";
        require_text("reason", reason)?;
        let mut change = self.change(OP).await?;
        sqlx::query(
            "UPDATE registry_state SET deleter_stopped = $1, deleter_reason = $2, deleter_changed_at = $3 WHERE id = 1",
        )
        .bind(i64::from(stopped))
        .bind(reason)
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let switch = DeleterSwitch {
            stopped,
            reason: reason.to_owned(),
            changed_at: Some(now),
        };
        let kind = if stopped {
            EventKind::DeleterStopped
        } else {
            EventKind::DeleterStarted
        };
        change.commit(now, kind, None, &switch).await?;
        Ok(switch)
    }

    // ----- events and stamps --------------------------------------------------------------------------------

    /// The table's events, in generation order.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read or holds a malformed row.
    pub async fn events(&self, table_uuid: &str) -> Result<Vec<Event>, RegistryError> {
        const OP: &str = "events";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM events WHERE table_uuid = $1 ORDER BY generation")
            .bind(&table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter().map(|row| event_from_row(row).map_err(query(OP))).collect()
    }

    /// Every event of the registry, registry-wide ones (the deleter switch) included, in generation order.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Query`] when the database cannot be read or holds a malformed row.
    pub async fn all_events(&self) -> Result<Vec<Event>, RegistryError> {
        const OP: &str = "all_events";
        let rows = sqlx::query("SELECT * FROM events ORDER BY generation")
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter().map(|row| event_from_row(row).map_err(query(OP))).collect()
    }

    /// The registry generation, the table's lease watermark and hold generation, and the deleter switch, read
    /// in one transaction so that they describe one moment.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read.
    pub async fn table_stamp(&self, table_uuid: &str) -> Result<TableStamp, RegistryError> {
        const OP: &str = "table_stamp";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let mut tx = self
            .pool
            .begin_with(self.dialect.begin_snapshot())
            .await
            .map_err(query(OP))?;
        let generation: i64 = sqlx::query_scalar("SELECT generation FROM registry_state WHERE id = 1")
            .fetch_one(&mut *tx)
            .await
            .map_err(query(OP))?;
        let lease_watermark = read_lease_watermark(&mut tx, &table_uuid).await.map_err(query(OP))?;
        let hold_generation = read_hold_generation(&mut tx, &table_uuid).await.map_err(query(OP))?;
        let deleter_stopped = read_deleter_switch(&mut tx).await.map_err(query(OP))?.stopped;
        tx.commit().await.map_err(query(OP))?;
        Ok(TableStamp {
            generation,
            lease_watermark,
            hold_generation,
            deleter_stopped,
        })
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

/// A kind of record that ends (a lease is released, a hold cleared, a writer ended). The names are
/// fixed identifiers of the schema, never user input.
struct EndedRecord {
    what: &'static str,
    select: &'static str,
    update: &'static str,
    ended_column: &'static str,
}

impl EndedRecord {
    const LEASE: EndedRecord = EndedRecord {
        what: "lease",
        select: "SELECT * FROM leases WHERE lease_id = $1",
        update: "UPDATE leases SET released_at = $1 WHERE lease_id = $2",
        ended_column: "released_at",
    };
    const HOLD: EndedRecord = EndedRecord {
        what: "hold",
        select: "SELECT * FROM holds WHERE hold_id = $1",
        update: "UPDATE holds SET cleared_at = $1 WHERE hold_id = $2",
        ended_column: "cleared_at",
    };
    const WRITER: EndedRecord = EndedRecord {
        what: "writer",
        select: "SELECT * FROM writers WHERE writer_id = $1",
        update: "UPDATE writers SET ended_at = $1 WHERE writer_id = $2",
        ended_column: "ended_at",
    };
}

/// Ends one record inside `change`: refuses an unknown id or one already ended, then stamps its end
/// time with `now`. Returns the row as it was before the change.
async fn end_record(
    change: &mut Change,
    kind: EndedRecord,
    id: &str,
    now: DateTime<Utc>,
) -> Result<AnyRow, RegistryError> {
    let op = change.op;
    let row = sqlx::query(kind.select)
        .bind(id)
        .fetch_optional(&mut *change.tx)
        .await
        .map_err(query(op))?
        .ok_or_else(|| RegistryError::NotFound {
            what: kind.what,
            id: id.to_owned(),
        })?;
    let ended: Option<String> = row.try_get(kind.ended_column).map_err(query(op))?;
    if ended.is_some() {
        return Err(RegistryError::AlreadyEnded {
            what: kind.what,
            id: id.to_owned(),
        });
    }
    sqlx::query(kind.update)
        .bind(fmt_time(now))
        .bind(id)
        .execute(&mut *change.tx)
        .await
        .map_err(query(op))?;
    Ok(row)
}

/// Which per-table counter to bump.
#[derive(Clone, Copy)]
enum Counter {
    Lease,
    Hold,
}

/// Bumps the registry generation and returns its new value. Must run inside a write transaction.
async fn bump_generation(conn: &mut AnyConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("UPDATE registry_state SET generation = generation + 1 WHERE id = 1 RETURNING generation")
        .fetch_one(conn)
        .await
}

/// Bumps a per-table counter (creating the table's row at 0 first) and returns its new value.
async fn bump_table_counter(conn: &mut AnyConnection, table_uuid: &str, counter: Counter) -> Result<i64, sqlx::Error> {
    let sql = match counter {
        Counter::Lease => {
            "INSERT INTO table_counters (table_uuid, lease_counter) VALUES ($1, 1) \
             ON CONFLICT (table_uuid) DO UPDATE SET lease_counter = table_counters.lease_counter + 1 RETURNING lease_counter"
        }
        Counter::Hold => {
            "INSERT INTO table_counters (table_uuid, hold_generation) VALUES ($1, 1) \
             ON CONFLICT (table_uuid) DO UPDATE SET hold_generation = table_counters.hold_generation + 1 \
             RETURNING hold_generation"
        }
    };
    sqlx::query_scalar(sql).bind(table_uuid).fetch_one(conn).await
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

async fn read_lease_watermark(conn: &mut AnyConnection, table_uuid: &str) -> Result<LeaseWatermark, sqlx::Error> {
    let row = sqlx::query(
        "SELECT \
           (SELECT lease_counter FROM table_counters WHERE table_uuid = $1) AS counter, \
           (SELECT MAX(expires_at) FROM leases WHERE table_uuid = $1 AND released_at IS NULL) AS latest",
    )
    .bind(table_uuid)
    .fetch_one(conn)
    .await?;
    let counter: Option<i64> = row.try_get("counter")?;
    let latest: Option<String> = row.try_get("latest")?;
    Ok(LeaseWatermark {
        counter: counter.unwrap_or(0),
        latest_expires_at: latest.as_deref().map(|s| parse_time("expires_at", s)).transpose()?,
    })
}

async fn read_hold_generation(conn: &mut AnyConnection, table_uuid: &str) -> Result<i64, sqlx::Error> {
    let found: Option<i64> = sqlx::query_scalar("SELECT hold_generation FROM table_counters WHERE table_uuid = $1")
        .bind(table_uuid)
        .fetch_optional(conn)
        .await?;
    Ok(found.unwrap_or(0))
}

async fn read_deleter_switch(conn: &mut AnyConnection) -> Result<DeleterSwitch, sqlx::Error> {
    let row =
        sqlx::query("SELECT deleter_stopped, deleter_reason, deleter_changed_at FROM registry_state WHERE id = 1")
            .fetch_one(conn)
            .await?;
    let stopped: i64 = row.try_get("deleter_stopped")?;
    Ok(DeleterSwitch {
        stopped: stopped != 0,
        reason: row.try_get("deleter_reason")?,
        changed_at: opt_time(&row, "deleter_changed_at")?,
    })
}

fn lease_from_row(row: &AnyRow, now: DateTime<Utc>) -> Result<Lease, sqlx::Error> {
    let expires_at = time(row, "expires_at")?;
    let released_at = opt_time(row, "released_at")?;
    Ok(Lease {
        lease_id: row.try_get("lease_id")?,
        table_uuid: row.try_get("table_uuid")?,
        snapshot_id: row.try_get("snapshot_id")?,
        purpose: row.try_get("purpose")?,
        owner: row.try_get("owner")?,
        expires_at,
        reader_generation: row.try_get("reader_generation")?,
        created_at: time(row, "created_at")?,
        released_at,
        active: released_at.is_none() && expires_at > now,
    })
}

fn hold_from_row(row: &AnyRow) -> Result<Hold, sqlx::Error> {
    let scope: String = row.try_get("scope")?;
    let scope = scope.parse::<HoldScope>().map_err(|e| sqlx::Error::ColumnDecode {
        index: "scope".to_owned(),
        source: Box::new(e),
    })?;
    let cleared_at = opt_time(row, "cleared_at")?;
    Ok(Hold {
        hold_id: row.try_get("hold_id")?,
        table_uuid: row.try_get("table_uuid")?,
        scope,
        reason: row.try_get("reason")?,
        hold_generation: row.try_get("hold_generation")?,
        set_at: time(row, "set_at")?,
        cleared_at,
        active: cleared_at.is_none(),
    })
}

fn writer_from_row(row: &AnyRow) -> Result<Writer, sqlx::Error> {
    let ended_at = opt_time(row, "ended_at")?;
    Ok(Writer {
        writer_id: row.try_get("writer_id")?,
        table_uuid: row.try_get("table_uuid")?,
        prefix: row.try_get("prefix")?,
        started_at: time(row, "started_at")?,
        ended_at,
        open: ended_at.is_none(),
    })
}

fn checkpoint_from_row(row: &AnyRow) -> Result<Checkpoint, sqlx::Error> {
    Ok(Checkpoint {
        checkpoint_id: row.try_get("checkpoint_id")?,
        table_uuid: row.try_get("table_uuid")?,
        snapshot_id: row.try_get("snapshot_id")?,
        at: time(row, "at")?,
        created_at: time(row, "created_at")?,
    })
}

fn event_from_row(row: &AnyRow) -> Result<Event, sqlx::Error> {
    let kind: String = row.try_get("kind")?;
    let kind = EventKind::ALL
        .into_iter()
        .find(|k| k.as_str() == kind)
        .ok_or_else(|| sqlx::Error::ColumnDecode {
            index: "kind".to_owned(),
            source: format!("unknown event kind {kind:?}").into(),
        })?;
    let detail: String = row.try_get("detail_json")?;
    let detail = serde_json::from_str(&detail).map_err(|e| sqlx::Error::ColumnDecode {
        index: "detail_json".to_owned(),
        source: Box::new(e),
    })?;
    Ok(Event {
        generation: row.try_get("generation")?,
        at: time(row, "at")?,
        kind,
        table_uuid: row.try_get("table_uuid")?,
        detail,
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
        .map_err(|e| sqlx::Error::ColumnDecode {
            index: column.to_owned(),
            source: Box::new(e),
        })
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

// ----- candidate and object states ----------------------------------------------------------------------------

/// The states of DESIGN §1. Candidates and their objects move only along legal transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Seen in a listing or a plan, not yet judged.
    Discovered,
    /// Reachable only from expirable snapshots (or an old orphan): may be quarantined.
    UnreferencedEligible,
    /// Sealed in bundles (and tagged or removed from the metadata).
    Quarantined,
    /// Signed drill evidence covers every bundle root.
    RestoreVerified,
    /// The deleter's acceptance point passed; deletes may start.
    DeleteApproved,
    /// The store acknowledged the delete.
    Deleted,
    /// A re-check confirmed the delete.
    Verified,
    /// A lease, hold, writer, checkpoint or ref covers it: out of the candidate set.
    Protected,
    /// The outcome of a delete is not known for certain: must be reconciled.
    DeleteUnknown,
}

impl State {
    /// The stored name (`QUARANTINED` …).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::Discovered => "DISCOVERED",
            State::UnreferencedEligible => "UNREFERENCED_ELIGIBLE",
            State::Quarantined => "QUARANTINED",
            State::RestoreVerified => "RESTORE_VERIFIED",
            State::DeleteApproved => "DELETE_APPROVED",
            State::Deleted => "DELETED",
            State::Verified => "VERIFIED",
            State::Protected => "PROTECTED",
            State::DeleteUnknown => "DELETE_UNKNOWN",
        }
    }

    fn parse(s: &str) -> Option<State> {
        [
            State::Discovered,
            State::UnreferencedEligible,
            State::Quarantined,
            State::RestoreVerified,
            State::DeleteApproved,
            State::Deleted,
            State::Verified,
            State::Protected,
            State::DeleteUnknown,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }

    /// Whether `self → to` is a legal transition.
    #[must_use]
    pub fn can_move_to(self, to: State) -> bool {
        use State::{
            DeleteApproved, DeleteUnknown, Deleted, Discovered, Protected, Quarantined, RestoreVerified,
            UnreferencedEligible, Verified,
        };
        matches!(
            (self, to),
            (Discovered, UnreferencedEligible | Protected)
                | (UnreferencedEligible, Quarantined | Protected)
                | (Quarantined, RestoreVerified | DeleteApproved | Protected)
                | (RestoreVerified, DeleteApproved | Protected)
                // A mismatch found after approval, before any delete, sends it back for re-planning.
                | (DeleteApproved, Deleted | DeleteUnknown | Quarantined | Protected)
                | (Deleted, Verified | DeleteUnknown)
                // `undelete` brought the objects back from their delete markers.
                | (Verified, Protected)
                | (DeleteUnknown, Deleted | Verified)
        )
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the deleter compares at its acceptance point (DESIGN §2): recorded at plan and quarantine time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldStamp {
    /// The table's metadata location.
    pub metadata_location: String,
    /// BLAKE3 of that metadata file.
    pub metadata_blake3: String,
    /// BLAKE3 over the table's refs (the candidate's own quarantine tags excluded) and the policy's protected refs.
    pub protected_ref_root: String,
    /// The table's lease watermark counter.
    pub lease_watermark: i64,
    /// The table's hold generation.
    pub hold_generation: i64,
}

/// A candidate as the registry keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    /// Candidate id.
    pub candidate_id: String,
    /// Table UUID.
    pub table_uuid: String,
    /// State.
    pub state: State,
    /// The planned candidate (snapshot ids, exact inventory, root).
    pub candidate: serde_json::Value,
    /// The world at plan time, or after the quarantine commit.
    pub stamp: WorldStamp,
    /// Quarantine details (mode, bundles, tags).
    pub quarantine: Option<serde_json::Value>,
    /// Why the last transition happened.
    pub reason: String,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last transition.
    pub updated_at: DateTime<Utc>,
}

/// One object's state within a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectState {
    /// Path relative to the table location.
    pub path: String,
    /// State.
    pub state: State,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A recorded receipt (write-once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiptRow {
    /// Candidate.
    pub candidate_id: String,
    /// Object path.
    pub path: String,
    /// Attempt number, from 1.
    pub attempt: i64,
    /// The receipt as the deleter wrote it.
    pub receipt: serde_json::Value,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// The acceptance point's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acceptance {
    /// Moved to `DELETE_APPROVED`.
    Approved,
    /// Refused, with every reason.
    Refused(Vec<String>),
}

fn candidate_from_row(row: &AnyRow) -> Result<CandidateRecord, sqlx::Error> {
    let json = |col: &'static str, text: String| {
        serde_json::from_str::<serde_json::Value>(&text).map_err(|e| sqlx::Error::ColumnDecode {
            index: col.to_owned(),
            source: Box::new(e),
        })
    };
    let state: String = row.try_get("state")?;
    let stamp: String = row.try_get("stamp_json")?;
    let quarantine: Option<String> = row.try_get("quarantine_json")?;
    Ok(CandidateRecord {
        candidate_id: row.try_get("candidate_id")?,
        table_uuid: row.try_get("table_uuid")?,
        state: State::parse(&state).ok_or_else(|| sqlx::Error::ColumnDecode {
            index: "state".into(),
            source: format!("unknown state {state}").into(),
        })?,
        candidate: json("candidate_json", row.try_get("candidate_json")?)?,
        stamp: serde_json::from_str(&stamp).map_err(|e| sqlx::Error::ColumnDecode {
            index: "stamp_json".into(),
            source: Box::new(e),
        })?,
        quarantine: quarantine.map(|q| json("quarantine_json", q)).transpose()?,
        reason: row.try_get("reason")?,
        created_at: parse_time("created_at", &row.try_get::<String, _>("created_at")?)?,
        updated_at: parse_time("updated_at", &row.try_get::<String, _>("updated_at")?)?,
    })
}

async fn read_candidate(conn: &mut AnyConnection, id: &str) -> Result<Option<CandidateRecord>, sqlx::Error> {
    let row = sqlx::query("SELECT * FROM candidates WHERE candidate_id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(candidate_from_row).transpose()
}

impl Registry {
    /// Records a planned candidate in `UNREFERENCED_ELIGIBLE` with the world stamp of its plan. A candidate
    /// id already known is returned as it is (ids bind the table generation, so the same id is the same plan).
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for a malformed table UUID; [`RegistryError::Query`].
    pub async fn candidate_record(
        &self,
        table_uuid: &str,
        candidate_id: &str,
        candidate: &serde_json::Value,
        stamp: &WorldStamp,
        objects: &[String],
        now: DateTime<Utc>,
    ) -> Result<CandidateRecord, RegistryError> {
        const OP: &str = "candidate_record";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        {
            let mut conn = self.pool.acquire().await.map_err(query(OP))?;
            if let Some(existing) = read_candidate(&mut conn, candidate_id).await.map_err(query(OP))? {
                return Ok(existing);
            }
        }
        let mut change = self.change(OP).await?;
        let stamp_json = serde_json::to_string(stamp).map_err(|e| query(OP)(sqlx::Error::Encode(Box::new(e))))?;
        sqlx::query(
            "INSERT INTO candidates (candidate_id, table_uuid, state, candidate_json, stamp_json, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .bind(candidate_id)
        .bind(&table_uuid)
        .bind(State::UnreferencedEligible.as_str())
        .bind(candidate.to_string())
        .bind(stamp_json)
        .bind(fmt_time(now))
        .bind(fmt_time(now))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        for path in objects {
            sqlx::query(
                "INSERT INTO object_states (candidate_id, path, state, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(candidate_id)
            .bind(path)
            .bind(State::UnreferencedEligible.as_str())
            .bind(fmt_time(now))
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        }
        let detail = serde_json::json!({"candidate_id": candidate_id, "to": State::UnreferencedEligible});
        change
            .commit(now, EventKind::CandidateState, Some(&table_uuid), &detail)
            .await?;
        self.candidate(candidate_id).await
    }

    /// A candidate by id.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate(&self, candidate_id: &str) -> Result<CandidateRecord, RegistryError> {
        const OP: &str = "candidate";
        let mut conn = self.pool.acquire().await.map_err(query(OP))?;
        read_candidate(&mut conn, candidate_id)
            .await
            .map_err(query(OP))?
            .ok_or_else(|| RegistryError::NotFound {
                what: "candidate",
                id: candidate_id.to_owned(),
            })
    }

    /// Every candidate of a table, oldest first.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn candidates(&self, table_uuid: &str) -> Result<Vec<CandidateRecord>, RegistryError> {
        const OP: &str = "candidates";
        let table_uuid = canonical_table_uuid(table_uuid)?;
        let rows = sqlx::query("SELECT * FROM candidates WHERE table_uuid = $1 ORDER BY created_at, candidate_id")
            .bind(table_uuid)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter()
            .map(candidate_from_row)
            .collect::<Result<_, _>>()
            .map_err(query(OP))
    }

    /// Moves a candidate (and its objects not yet past it) to `to`, if the move is legal from its current
    /// state; optionally stores new quarantine details and a new world stamp.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for an illegal transition (naming both states); [`RegistryError::NotFound`].
    pub async fn candidate_transition(
        &self,
        candidate_id: &str,
        to: State,
        reason: &str,
        quarantine: Option<&serde_json::Value>,
        stamp: Option<&WorldStamp>,
        now: DateTime<Utc>,
    ) -> Result<CandidateRecord, RegistryError> {
        const OP: &str = "candidate_transition";
        let mut change = self.change(OP).await?;
        let current = read_candidate(&mut change.tx, candidate_id)
            .await
            .map_err(query(OP))?
            .ok_or_else(|| RegistryError::NotFound {
                what: "candidate",
                id: candidate_id.to_owned(),
            })?;
        if !current.state.can_move_to(to) {
            return Err(RegistryError::Invalid {
                field: "state",
                reason: format!("candidate {candidate_id} cannot move from {} to {to}", current.state),
            });
        }
        sqlx::query(
            "UPDATE candidates SET state = $1, reason = $2, updated_at = $3, \
             quarantine_json = COALESCE($4, quarantine_json), stamp_json = COALESCE($5, stamp_json) WHERE candidate_id = $6",
        )
        .bind(to.as_str())
        .bind(reason)
        .bind(fmt_time(now))
        .bind(quarantine.map(ToString::to_string))
        .bind(stamp.map(|s| serde_json::to_string(s).unwrap_or_default()))
        .bind(candidate_id)
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        // Objects follow the candidate through the pre-deletion states.
        if matches!(
            to,
            State::Quarantined | State::RestoreVerified | State::DeleteApproved | State::Protected
        ) {
            sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND state = $4")
                .bind(to.as_str())
                .bind(fmt_time(now))
                .bind(candidate_id)
                .bind(current.state.as_str())
                .execute(&mut *change.tx)
                .await
                .map_err(query(OP))?;
        }
        let detail =
            serde_json::json!({"candidate_id": candidate_id, "from": current.state, "to": to, "reason": reason});
        let table = current.table_uuid.clone();
        change
            .commit(now, EventKind::CandidateState, Some(&table), &detail)
            .await?;
        self.candidate(candidate_id).await
    }

    /// The acceptance point: in one write transaction, checks the candidate's state, the deleter switch, the
    /// unreconciled-unknowns limit, and compares the recorded world stamp with `current_table` (table
    /// generation and protected-ref root, read by the caller from the catalog) and with the registry's own
    /// lease watermark and hold generation read inside the transaction. On success the candidate moves to
    /// `DELETE_APPROVED`; on any mismatch the refusal and every reason are recorded and returned. With
    /// `dry_run` the same checks run and nothing is written.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`]; [`RegistryError::Query`].
    pub async fn candidate_accept(
        &self,
        candidate_id: &str,
        current_table: &WorldStamp,
        max_unknowns: u32,
        extra_refusals: Vec<String>,
        dry_run: bool,
        now: DateTime<Utc>,
    ) -> Result<Acceptance, RegistryError> {
        const OP: &str = "candidate_accept";
        let mut change = self.change(OP).await?;
        let rec = read_candidate(&mut change.tx, candidate_id)
            .await
            .map_err(query(OP))?
            .ok_or_else(|| RegistryError::NotFound {
                what: "candidate",
                id: candidate_id.to_owned(),
            })?;
        let mut reasons = extra_refusals;
        if !matches!(rec.state, State::Quarantined | State::RestoreVerified) {
            reasons.push(format!(
                "candidate is {}, not QUARANTINED or RESTORE_VERIFIED",
                rec.state
            ));
        }
        let switch = read_deleter_switch(&mut change.tx).await.map_err(query(OP))?;
        if switch.stopped {
            reasons.push(format!("the deleter is stopped ({})", switch.reason));
        }
        // Read in the acceptance transaction, so that a stage change or an extension racing the purge wins.
        let stage = rollout::read_stage(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        if stage.stage == RolloutStage::ReportOnly {
            reasons.push(format!(
                "the table is in rollout stage report-only ({}); `lakedrill rollout set` moves it to a stage that deletes",
                if stage.changed_at.is_some() { stage.reason.as_str() } else { "the default for every table" }
            ));
        }
        if let Some(not_before) = rollout::read_not_before(&mut change.tx, candidate_id)
            .await
            .map_err(query(OP))?
            && now < not_before
        {
            reasons.push(format!(
                "the quarantine was extended: no purge before {}",
                not_before.to_rfc3339_opts(SecondsFormat::Secs, true)
            ));
        }
        let watermark = read_lease_watermark(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        let holds = read_hold_generation(&mut change.tx, &rec.table_uuid)
            .await
            .map_err(query(OP))?;
        let unknowns: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM object_states o JOIN candidates c ON c.candidate_id = o.candidate_id \
             WHERE c.table_uuid = $1 AND o.state = 'DELETE_UNKNOWN'",
        )
        .bind(&rec.table_uuid)
        .fetch_one(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let s = &rec.stamp;
        if (s.metadata_location != current_table.metadata_location
            || s.metadata_blake3 != current_table.metadata_blake3)
            && !crate::safety::weakened(crate::safety::Check::TableGenerationCas)
        {
            reasons.push(format!(
                "the table changed: generation {} (blake3 {}) is now {} (blake3 {})",
                s.metadata_location, s.metadata_blake3, current_table.metadata_location, current_table.metadata_blake3
            ));
        }
        if s.protected_ref_root != current_table.protected_ref_root {
            reasons.push(format!(
                "the refs changed: protected-ref root {} is now {}",
                s.protected_ref_root, current_table.protected_ref_root
            ));
        }
        if s.lease_watermark != watermark.counter && !crate::safety::weakened(crate::safety::Check::LeaseWatermarkCas) {
            reasons.push(format!(
                "leases changed: lease watermark {} is now {}",
                s.lease_watermark, watermark.counter
            ));
        }
        if s.hold_generation != holds && !crate::safety::weakened(crate::safety::Check::HoldGenerationCas) {
            reasons.push(format!(
                "holds changed: hold generation {} is now {holds}",
                s.hold_generation
            ));
        }
        if unknowns > i64::from(max_unknowns) {
            reasons.push(format!(
                "{unknowns} DELETE_UNKNOWN objects await reconciliation (limit {max_unknowns})"
            ));
        }
        let table = rec.table_uuid.clone();
        if dry_run {
            // Dropping the transaction rolls it back: a dry run changes nothing.
            return Ok(if reasons.is_empty() {
                Acceptance::Approved
            } else {
                Acceptance::Refused(reasons)
            });
        }
        if reasons.is_empty() {
            sqlx::query("UPDATE candidates SET state = $1, reason = $2, updated_at = $3 WHERE candidate_id = $4")
                .bind(State::DeleteApproved.as_str())
                .bind("acceptance point passed")
                .bind(fmt_time(now))
                .bind(candidate_id)
                .execute(&mut *change.tx)
                .await
                .map_err(query(OP))?;
            sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND state IN ('QUARANTINED', 'RESTORE_VERIFIED')")
                .bind(State::DeleteApproved.as_str())
                .bind(fmt_time(now))
                .bind(candidate_id)
                .execute(&mut *change.tx)
                .await
                .map_err(query(OP))?;
            let detail =
                serde_json::json!({"candidate_id": candidate_id, "from": rec.state, "to": State::DeleteApproved});
            change
                .commit(now, EventKind::CandidateState, Some(&table), &detail)
                .await?;
            Ok(Acceptance::Approved)
        } else {
            let detail = serde_json::json!({"candidate_id": candidate_id, "reasons": reasons});
            change
                .commit(now, EventKind::PurgeRefused, Some(&table), &detail)
                .await?;
            Ok(Acceptance::Refused(reasons))
        }
    }

    /// The objects of a candidate and their states, by path.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn object_states(&self, candidate_id: &str) -> Result<Vec<ObjectState>, RegistryError> {
        const OP: &str = "object_states";
        let rows =
            sqlx::query("SELECT path, state, updated_at FROM object_states WHERE candidate_id = $1 ORDER BY path")
                .bind(candidate_id)
                .fetch_all(&self.pool)
                .await
                .map_err(query(OP))?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get("state")?;
                Ok(ObjectState {
                    path: r.try_get("path")?,
                    state: State::parse(&state).ok_or_else(|| sqlx::Error::ColumnDecode {
                        index: "state".into(),
                        source: format!("unknown state {state}").into(),
                    })?,
                    updated_at: parse_time("updated_at", &r.try_get::<String, _>("updated_at")?)?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(query(OP))
    }

    /// Moves one object to `to` (legal transitions only), recording the change before the caller acts on it.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for an illegal transition; [`RegistryError::NotFound`].
    pub async fn object_transition(
        &self,
        candidate_id: &str,
        path: &str,
        to: State,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        const OP: &str = "object_transition";
        let mut tx = self.begin_write(OP).await?;
        set_object_state(&mut tx, candidate_id, path, to, now, OP).await?;
        tx.commit().await.map_err(query(OP))
    }

    /// Records a receipt, write-once: a second receipt for the same attempt is refused by the primary key.
    /// Returns the attempt number.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn receipt_add(
        &self,
        candidate_id: &str,
        path: &str,
        receipt: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<i64, RegistryError> {
        const OP: &str = "receipt_add";
        let mut tx = self.begin_write(OP).await?;
        let attempt = insert_receipt(&mut tx, candidate_id, path, receipt, now)
            .await
            .map_err(query(OP))?;
        tx.commit().await.map_err(query(OP))?;
        Ok(attempt)
    }

    /// Every receipt of a candidate, by path then attempt.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn receipts(&self, candidate_id: &str) -> Result<Vec<ReceiptRow>, RegistryError> {
        const OP: &str = "receipts";
        let rows = sqlx::query("SELECT * FROM receipts WHERE candidate_id = $1 ORDER BY path, attempt")
            .bind(candidate_id)
            .fetch_all(&self.pool)
            .await
            .map_err(query(OP))?;
        rows.iter()
            .map(|r| {
                let j: String = r.try_get("receipt_json")?;
                Ok(ReceiptRow {
                    candidate_id: r.try_get("candidate_id")?,
                    path: r.try_get("path")?,
                    attempt: r.try_get("attempt")?,
                    receipt: serde_json::from_str(&j).map_err(|e| sqlx::Error::ColumnDecode {
                        index: "receipt_json".into(),
                        source: Box::new(e),
                    })?,
                    created_at: parse_time("created_at", &r.try_get::<String, _>("created_at")?)?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(query(OP))
    }
}

/// Moves one object to `to` inside `tx` (legal transitions only; a no-op when it is already there).
async fn set_object_state(
    tx: &mut AnyConnection,
    candidate_id: &str,
    path: &str,
    to: State,
    now: DateTime<Utc>,
    op: &'static str,
) -> Result<(), RegistryError> {
    let cur: Option<String> =
        sqlx::query_scalar("SELECT state FROM object_states WHERE candidate_id = $1 AND path = $2")
            .bind(candidate_id)
            .bind(path)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(op))?;
    let Some(cur) = cur.as_deref().and_then(State::parse) else {
        return Err(RegistryError::NotFound {
            what: "object",
            id: format!("{candidate_id}:{path}"),
        });
    };
    if cur == to {
        return Ok(());
    }
    if !cur.can_move_to(to) {
        return Err(RegistryError::Invalid {
            field: "state",
            reason: format!("object {path} of {candidate_id} cannot move from {cur} to {to}"),
        });
    }
    sqlx::query("UPDATE object_states SET state = $1, updated_at = $2 WHERE candidate_id = $3 AND path = $4")
        .bind(to.as_str())
        .bind(fmt_time(now))
        .bind(candidate_id)
        .bind(path)
        .execute(&mut *tx)
        .await
        .map_err(query(op))?;
    Ok(())
}

/// Inserts a receipt (write-once: the next attempt number of its object) with its own registry generation and
/// `receipt_recorded` event, inside `tx`. Returns the attempt number.
async fn insert_receipt(
    tx: &mut AnyConnection,
    candidate_id: &str,
    path: &str,
    receipt: &serde_json::Value,
    now: DateTime<Utc>,
) -> Result<i64, sqlx::Error> {
    let generation = bump_generation(&mut *tx).await?;
    let attempt: i64 = sqlx::query_scalar("SELECT COUNT(*) + 1 FROM receipts WHERE candidate_id = $1 AND path = $2")
        .bind(candidate_id)
        .bind(path)
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO receipts (candidate_id, path, attempt, receipt_json, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(candidate_id)
    .bind(path)
    .bind(attempt)
    .bind(receipt.to_string())
    .bind(fmt_time(now))
    .execute(&mut *tx)
    .await?;
    let table: Option<String> = sqlx::query_scalar("SELECT table_uuid FROM candidates WHERE candidate_id = $1")
        .bind(candidate_id)
        .fetch_optional(&mut *tx)
        .await?;
    let detail = serde_json::json!({"candidate_id": candidate_id, "path": path, "attempt": attempt});
    record_event(
        &mut *tx,
        generation,
        now,
        EventKind::ReceiptRecorded,
        table.as_deref(),
        &detail,
    )
    .await?;
    Ok(attempt)
}

/// What a purge run started from: the values a batch of its deletes must still find in the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeBaseline {
    /// The table.
    pub table_uuid: String,
    /// The run holding the candidate's claim.
    pub run_id: String,
    /// The table's hold generation when the run began deleting.
    pub hold_generation: i64,
    /// The table's lease counter when the run began deleting.
    pub lease_watermark: i64,
}

/// One batch of a purge run's deletes, holding the registry's write lock from [`Registry::purge_batch`] to
/// [`PurgeBatch::commit`].
///
/// While a batch is open no other change can commit — no hold, lease, stop switch, rollout stage or claim —
/// so every delete request sent inside it was sent while the checks made at its start still held: a hold that
/// is set meanwhile waits for the batch and is seen by the next one. Dropping the batch rolls back what it
/// recorded. **Never call another [`Registry`] method that writes while a batch is open**: it would wait for
/// this lock (on PostgreSQL, forever).
pub struct PurgeBatch {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    /// The hold generation read inside the lock (equal to the baseline's).
    pub hold_generation: i64,
}

impl PurgeBatch {
    /// Records a receipt inside the batch; see [`Registry::receipt_add`].
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn receipt(
        &mut self,
        candidate_id: &str,
        path: &str,
        receipt: &serde_json::Value,
        now: DateTime<Utc>,
    ) -> Result<i64, RegistryError> {
        insert_receipt(&mut self.tx, candidate_id, path, receipt, now)
            .await
            .map_err(query("purge_batch_receipt"))
    }

    /// Moves one object inside the batch; see [`Registry::object_transition`].
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] for an illegal transition; [`RegistryError::NotFound`].
    pub async fn object_transition(
        &mut self,
        candidate_id: &str,
        path: &str,
        to: State,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        set_object_state(&mut self.tx, candidate_id, path, to, now, "purge_batch_transition").await
    }

    /// Commits everything the batch recorded and lets the lock go.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn commit(self) -> Result<(), RegistryError> {
        self.tx.commit().await.map_err(query("purge_batch_commit"))
    }
}

/// The process running the purge of a candidate (at most one at a time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeRun {
    /// Unique per run.
    pub run_id: String,
    /// Host name of the process.
    pub host: String,
    /// Process id on that host.
    pub pid: i64,
    /// When the run claimed the candidate.
    pub started_at: DateTime<Utc>,
    /// Last sign of life (every batch of deletes).
    pub heartbeat_at: DateTime<Utc>,
}

fn read_purge_run(r: &AnyRow) -> Result<PurgeRun, sqlx::Error> {
    Ok(PurgeRun {
        run_id: r.try_get("run_id")?,
        host: r.try_get("host")?,
        pid: r.try_get("pid")?,
        started_at: parse_time("started_at", &r.try_get::<String, _>("started_at")?)?,
        heartbeat_at: parse_time("heartbeat_at", &r.try_get::<String, _>("heartbeat_at")?)?,
    })
}

impl Registry {
    /// The run holding a candidate's purge, if any.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_run(&self, candidate_id: &str) -> Result<Option<PurgeRun>, RegistryError> {
        const OP: &str = "purge_run";
        let row = sqlx::query("SELECT * FROM purge_runs WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(query(OP))?;
        row.as_ref().map(read_purge_run).transpose().map_err(query(OP))
    }

    /// Claims a candidate's purge for `me`, in one registry transaction: granted when no run holds it, when
    /// `me` already does, or when the holder is exactly `take_over` (a run the caller found dead or silent).
    /// Otherwise the holder is returned and nothing changes: two purges of one candidate never run at once.
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_claim(
        &self,
        candidate_id: &str,
        me: &PurgeRun,
        take_over: Option<&str>,
    ) -> Result<Result<(), PurgeRun>, RegistryError> {
        const OP: &str = "purge_claim";
        let mut change = self.change(OP).await?;
        let held = sqlx::query("SELECT * FROM purge_runs WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(OP))?
            .as_ref()
            .map(read_purge_run)
            .transpose()
            .map_err(query(OP))?;
        if let Some(h) = &held
            && h.run_id != me.run_id
            && take_over != Some(h.run_id.as_str())
        {
            return Ok(Err(h.clone()));
        }
        sqlx::query(
            "INSERT INTO purge_runs (candidate_id, run_id, host, pid, started_at, heartbeat_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (candidate_id) DO UPDATE SET run_id = $2, host = $3, \
             pid = $4, started_at = $5, heartbeat_at = $6",
        )
        .bind(candidate_id)
        .bind(&me.run_id)
        .bind(&me.host)
        .bind(me.pid)
        .bind(fmt_time(me.started_at))
        .bind(fmt_time(me.heartbeat_at))
        .execute(&mut *change.tx)
        .await
        .map_err(query(OP))?;
        let table: Option<String> = sqlx::query_scalar("SELECT table_uuid FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        let took_over = held.filter(|h| h.run_id != me.run_id);
        let detail = serde_json::json!({"candidate_id": candidate_id, "run": me, "took_over": took_over});
        change
            .commit(me.started_at, EventKind::PurgeRunClaimed, table.as_deref(), &detail)
            .await?;
        Ok(Ok(()))
    }

    /// Opens a batch of deletes for the run `base.run_id` of `candidate_id`: takes the registry's write lock
    /// and, inside it, checks that the run still holds the candidate's claim, the deleter is not stopped, the
    /// table's rollout stage deletes, its hold generation and lease counter are the baseline's, and the
    /// candidate is not `PROTECTED`; it records the run's heartbeat. Returns the open batch, or every reason
    /// to halt (nothing written then).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_batch(
        &self,
        candidate_id: &str,
        base: &PurgeBaseline,
        now: DateTime<Utc>,
    ) -> Result<Result<PurgeBatch, Vec<String>>, RegistryError> {
        const OP: &str = "purge_batch";
        let mut tx = self.begin_write(OP).await?;
        let mut halt = Vec::new();
        let run: Option<String> = sqlx::query_scalar("SELECT run_id FROM purge_runs WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(OP))?;
        if run.as_deref() != Some(base.run_id.as_str()) {
            halt.push("another purge run took this candidate over: no further deletes here".to_owned());
        }
        let switch = read_deleter_switch(&mut tx).await.map_err(query(OP))?;
        if switch.stopped {
            halt.push(format!(
                "the deleter was stopped ({}); `lakedrill deleter start` to resume",
                switch.reason
            ));
        }
        let stage = rollout::read_stage(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        if !stage.stage.allows_deletes() {
            halt.push(
                "the table was moved to rollout stage report-only during the purge: no further deletes".to_owned(),
            );
        }
        let hold_generation = read_hold_generation(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        if hold_generation != base.hold_generation && !crate::safety::weakened(crate::safety::Check::HoldCheckPerBatch)
        {
            let rows = sqlx::query("SELECT * FROM holds WHERE table_uuid = $1 ORDER BY hold_generation")
                .bind(&base.table_uuid)
                .fetch_all(&mut *tx)
                .await
                .map_err(query(OP))?;
            let mut named = Vec::new();
            for row in &rows {
                let h = hold_from_row(row).map_err(query(OP))?;
                if h.hold_generation > base.hold_generation {
                    named.push(format!(
                        "hold {} (scope {}, reason {:?}) set at {}",
                        h.hold_id,
                        h.scope,
                        h.reason,
                        h.set_at.to_rfc3339_opts(SecondsFormat::Secs, true)
                    ));
                }
            }
            halt.push(format!(
                "a legal hold changed during the purge (hold generation {} is now {hold_generation}: {}): no further \
                 deletes",
                base.hold_generation,
                if named.is_empty() {
                    "a hold was cleared".to_owned()
                } else {
                    named.join("; ")
                }
            ));
        }
        let leases = read_lease_watermark(&mut tx, &base.table_uuid)
            .await
            .map_err(query(OP))?;
        if leases.counter != base.lease_watermark {
            halt.push(format!(
                "leases changed during the purge (lease watermark {} is now {}): no further deletes",
                base.lease_watermark, leases.counter
            ));
        }
        let state: Option<String> = sqlx::query_scalar("SELECT state FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(query(OP))?;
        if state.as_deref() == Some(State::Protected.as_str()) {
            halt.push("the candidate became PROTECTED during the purge: no further deletes".to_owned());
        }
        if !halt.is_empty() {
            return Ok(Err(halt));
        }
        sqlx::query("UPDATE purge_runs SET heartbeat_at = $1 WHERE candidate_id = $2 AND run_id = $3")
            .bind(fmt_time(now))
            .bind(candidate_id)
            .bind(&base.run_id)
            .execute(&mut *tx)
            .await
            .map_err(query(OP))?;
        Ok(Ok(PurgeBatch { tx, hold_generation }))
    }

    /// Lets other writers in between two [`PurgeBatch`]es. PostgreSQL queues advisory-lock waiters, so nothing
    /// is needed there; SQLite's busy handler polls a waiting writer at most every 100 ms, so a deleter that
    /// takes the lock again at once could keep a `hold set` waiting for the whole purge (and fail it after
    /// [`BUSY_TIMEOUT`]). On SQLite this pauses [`WRITER_GAP`] without holding the lock.
    pub async fn yield_to_writers(&self) {
        if self.dialect == Dialect::Sqlite {
            tokio::time::sleep(WRITER_GAP).await;
        }
    }

    /// Records a sign of life of the run holding a candidate (no event; a no-op for another run).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_heartbeat(
        &self,
        candidate_id: &str,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        const OP: &str = "purge_heartbeat";
        sqlx::query("UPDATE purge_runs SET heartbeat_at = $1 WHERE candidate_id = $2 AND run_id = $3")
            .bind(fmt_time(now))
            .bind(candidate_id)
            .bind(run_id)
            .execute(&self.pool)
            .await
            .map_err(query(OP))?;
        Ok(())
    }

    /// Lets a candidate go at the end of a run (a no-op when another run holds it).
    ///
    /// # Errors
    /// [`RegistryError::Query`].
    pub async fn purge_release(
        &self,
        candidate_id: &str,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), RegistryError> {
        const OP: &str = "purge_release";
        let mut change = self.change(OP).await?;
        let n = sqlx::query("DELETE FROM purge_runs WHERE candidate_id = $1 AND run_id = $2")
            .bind(candidate_id)
            .bind(run_id)
            .execute(&mut *change.tx)
            .await
            .map_err(query(OP))?
            .rows_affected();
        if n == 0 {
            return Ok(());
        }
        let table: Option<String> = sqlx::query_scalar("SELECT table_uuid FROM candidates WHERE candidate_id = $1")
            .bind(candidate_id)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        let detail = serde_json::json!({"candidate_id": candidate_id, "run_id": run_id});
        change
            .commit(now, EventKind::PurgeRunReleased, table.as_deref(), &detail)
            .await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    const T1: &str = "7f31c0de-0000-4000-8000-000000000001";
    const T2: &str = "7f31c0de-0000-4000-8000-000000000002";

    fn t(minutes: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap() + chrono::Duration::minutes(minutes)
    }

    fn new_lease(table: &str, snapshot_id: i64, expires_at: DateTime<Utc>) -> NewLease {
        NewLease {
            table_uuid: table.to_owned(),
            snapshot_id,
            purpose: "nightly report".to_owned(),
            owner: "bi@example.com".to_owned(),
            expires_at,
        }
    }

    async fn fresh() -> (tempfile::TempDir, String, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("sqlite:{}", dir.path().join("registry.db").display());
        let registry = Registry::open(&uri).await.unwrap();
        (dir, uri, registry)
    }

    /// Where a test's registry lives.
    #[derive(Clone, Copy)]
    enum Backend {
        Sqlite,
        Postgres,
    }

    /// A fresh registry: a new SQLite file, or a new PostgreSQL database ([`crate::io::db::fresh_postgres_database`],
    /// which fails loudly without `LAKEDRILL_TEST_PG_URI`).
    async fn fresh_on(backend: Backend) -> (Option<tempfile::TempDir>, String, Registry) {
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

    /// Runs each named `async fn NAME(Backend)` as two tests, `NAME::sqlite` and `NAME::postgres`.
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

    on_both_backends!(
        open_refuses_a_newer_schema,
        lease_round_trip_active_and_release,
        lease_add_refuses_invalid_input,
        table_uuid_spellings_are_one_table,
        lease_watermark_bumps_on_add_and_release,
        hold_round_trip_and_generation_per_table,
        writer_round_trip,
        checkpoint_round_trip,
        deleter_switch_round_trip,
        generation_increases_and_every_change_is_an_event,
        records_serialize_snake_case_rfc3339,
        times_round_trip_exactly,
        the_state_machine_refuses_illegal_moves_and_acceptance_checks_the_world,
        report_only_is_the_default_and_refuses_acceptance_until_a_recorded_stage_change,
        decisions_are_monotonic_kept_and_turn_holds_on_and_off,
        a_quarantine_extension_refuses_acceptance_until_it_passes,
        a_version_1_registry_is_migrated_to_version_2_on_open,
        concurrent_registries_lose_no_update,
        writers_and_checkpoints_with_equal_times_keep_insertion_order,
        observations_get_increasing_ids_and_filter_by_time,
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

    async fn open_refuses_a_newer_schema(b: Backend) {
        let (_dir, uri, r) = fresh_on(b).await;
        sqlx::query("UPDATE registry_state SET schema_version = 99")
            .execute(&r.pool)
            .await
            .unwrap();
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

    async fn lease_round_trip_active_and_release(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let lease = r.lease_add(&new_lease(T1, 42, t(60)), t(0)).await.unwrap();
        assert_eq!(lease.reader_generation, 1);
        assert!(lease.active);
        uuid::Uuid::parse_str(&lease.lease_id).unwrap();

        let listed = r.leases(T1, t(30)).await.unwrap();
        assert_eq!(listed, vec![lease.clone()]);
        // Expired at exactly expires_at, and later.
        assert!(!r.leases(T1, t(60)).await.unwrap()[0].active);
        assert!(!r.leases(T1, t(61)).await.unwrap()[0].active);
        assert!(r.leases(T2, t(0)).await.unwrap().is_empty());

        let released = r.lease_release(&lease.lease_id, t(10)).await.unwrap();
        assert_eq!(released.released_at, Some(t(10)));
        assert!(!released.active);
        let listed = r.leases(T1, t(20)).await.unwrap();
        assert_eq!(listed, vec![released]);

        let err = r.lease_release(&lease.lease_id, t(11)).await.unwrap_err();
        assert!(matches!(&err, RegistryError::AlreadyEnded { what: "lease", id } if *id == lease.lease_id));
        assert!(err.to_string().contains(&lease.lease_id));
        let err = r.lease_release("no-such-lease", t(11)).await.unwrap_err();
        assert!(matches!(&err, RegistryError::NotFound { what: "lease", id } if id == "no-such-lease"));
        assert!(err.to_string().contains("no-such-lease"));
        // Failed changes do not bump anything.
        assert_eq!(r.generation().await.unwrap(), 2);
    }

    async fn lease_add_refuses_invalid_input(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let err = r.lease_add(&new_lease(T1, 1, t(0)), t(0)).await.unwrap_err();
        assert!(
            matches!(
                err,
                RegistryError::Invalid {
                    field: "expires_at",
                    ..
                }
            ),
            "{err}"
        );
        let err = r.lease_add(&new_lease("orders", 1, t(5)), t(0)).await.unwrap_err();
        assert!(
            matches!(
                err,
                RegistryError::Invalid {
                    field: "table_uuid",
                    ..
                }
            ),
            "{err}"
        );
        let mut bad = new_lease(T1, 1, t(5));
        bad.owner = "  ".to_owned();
        let err = r.lease_add(&bad, t(0)).await.unwrap_err();
        assert!(matches!(err, RegistryError::Invalid { field: "owner", .. }), "{err}");
        assert_eq!(r.generation().await.unwrap(), 0);
    }

    async fn table_uuid_spellings_are_one_table(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        r.hold_set(&T1.to_uppercase(), HoldScope::Table, "legal", t(0))
            .await
            .unwrap();
        let holds = r.holds(&T1.replace('-', "")).await.unwrap();
        assert_eq!(holds.len(), 1);
        assert_eq!(holds[0].table_uuid, T1);
        assert_eq!(r.hold_generation(T1).await.unwrap(), 1);
    }

    async fn lease_watermark_bumps_on_add_and_release(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        assert_eq!(
            r.lease_watermark(T1).await.unwrap(),
            LeaseWatermark {
                counter: 0,
                latest_expires_at: None
            }
        );
        let a = r.lease_add(&new_lease(T1, 1, t(60)), t(0)).await.unwrap();
        let w1 = r.lease_watermark(T1).await.unwrap();
        assert_eq!(
            w1,
            LeaseWatermark {
                counter: 1,
                latest_expires_at: Some(t(60))
            }
        );
        r.lease_add(&new_lease(T1, 2, t(30)), t(0)).await.unwrap();
        assert_eq!(
            r.lease_watermark(T1).await.unwrap(),
            LeaseWatermark {
                counter: 2,
                latest_expires_at: Some(t(60))
            }
        );
        r.lease_release(&a.lease_id, t(1)).await.unwrap();
        assert_eq!(
            r.lease_watermark(T1).await.unwrap(),
            LeaseWatermark {
                counter: 3,
                latest_expires_at: Some(t(30))
            }
        );
        // Other tables and other kinds of change leave it alone.
        r.lease_add(&new_lease(T2, 9, t(90)), t(0)).await.unwrap();
        r.hold_set(T1, HoldScope::Snapshot(1), "legal", t(2)).await.unwrap();
        assert_eq!(r.lease_watermark(T1).await.unwrap().counter, 3);
        assert_eq!(r.lease_watermark(T2).await.unwrap().counter, 1);
    }

    async fn hold_round_trip_and_generation_per_table(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        assert_eq!(r.hold_generation(T1).await.unwrap(), 0);
        let h1 = r.hold_set(T1, HoldScope::Snapshot(7), "case 123", t(0)).await.unwrap();
        assert_eq!(h1.hold_generation, 1);
        let h2 = r
            .hold_set(T1, "prefix:s3://b/t/data/2024/".parse().unwrap(), "case 124", t(1))
            .await
            .unwrap();
        assert_eq!(h2.hold_generation, 2);
        assert_eq!(r.hold_generation(T2).await.unwrap(), 0);
        // Leases, writers and checkpoints do not move the hold generation.
        r.lease_add(&new_lease(T1, 7, t(60)), t(2)).await.unwrap();
        r.writer_begin(T1, "s3://b/t/_staging/w1/", t(2)).await.unwrap();
        r.checkpoint_add(T1, 7, t(0), t(2)).await.unwrap();
        assert_eq!(r.hold_generation(T1).await.unwrap(), 2);

        let cleared = r.hold_clear(&h1.hold_id, t(3)).await.unwrap();
        assert!(!cleared.active);
        assert_eq!(cleared.cleared_at, Some(t(3)));
        assert_eq!(r.hold_generation(T1).await.unwrap(), 3);
        assert_eq!(r.hold_generation(T2).await.unwrap(), 0);

        let holds = r.holds(T1).await.unwrap();
        assert_eq!(holds, vec![cleared, h2]);
        let err = r.hold_clear(&h1.hold_id, t(4)).await.unwrap_err();
        assert!(matches!(err, RegistryError::AlreadyEnded { what: "hold", .. }), "{err}");
        let err = r.hold_clear("nope", t(4)).await.unwrap_err();
        assert!(matches!(err, RegistryError::NotFound { what: "hold", .. }), "{err}");
        assert_eq!(r.hold_generation(T1).await.unwrap(), 3);
    }

    #[test]
    fn hold_scope_parses_and_displays() {
        for (text, scope) in [
            ("table", HoldScope::Table),
            ("snapshot:123", HoldScope::Snapshot(123)),
            ("snapshot:-5", HoldScope::Snapshot(-5)),
            ("prefix:s3://b/t/data/", HoldScope::Prefix("s3://b/t/data/".to_owned())),
            ("prefix:a:b", HoldScope::Prefix("a:b".to_owned())),
        ] {
            assert_eq!(text.parse::<HoldScope>().unwrap(), scope);
            assert_eq!(scope.to_string(), text);
            assert_eq!(serde_json::to_string(&scope).unwrap(), format!("\"{text}\""));
        }
        for bad in [
            "",
            "Table",
            "snapshot:",
            "snapshot:x1",
            "prefix:",
            "prefix:  ",
            "path:/x",
        ] {
            let err = bad.parse::<HoldScope>().unwrap_err();
            assert!(
                matches!(
                    RegistryError::from(err.clone()),
                    RegistryError::Invalid { field: "scope", .. }
                ),
                "{bad}: {err}"
            );
        }
        assert!(
            "snapshot:x"
                .parse::<HoldScope>()
                .unwrap_err()
                .to_string()
                .contains("not an integer")
        );
        assert!(serde_json::from_str::<HoldScope>("\"bogus\"").is_err());
    }

    async fn writer_round_trip(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let w = r.writer_begin(T1, "s3://b/t/_staging/w1/", t(0)).await.unwrap();
        assert!(w.open);
        assert_eq!(r.writers(T1).await.unwrap(), vec![w.clone()]);
        let ended = r.writer_end(&w.writer_id, t(5)).await.unwrap();
        assert!(!ended.open);
        assert_eq!(ended.ended_at, Some(t(5)));
        assert_eq!(r.writers(T1).await.unwrap(), vec![ended]);
        assert!(matches!(
            r.writer_end(&w.writer_id, t(6)).await,
            Err(RegistryError::AlreadyEnded { .. })
        ));
        assert!(matches!(
            r.writer_end("nope", t(6)).await,
            Err(RegistryError::NotFound { what: "writer", .. })
        ));
        assert!(matches!(
            r.writer_begin(T1, "", t(0)).await,
            Err(RegistryError::Invalid { field: "prefix", .. })
        ));
    }

    async fn checkpoint_round_trip(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let late = r.checkpoint_add(T1, 2, t(10), t(20)).await.unwrap();
        let early = r.checkpoint_add(T1, 1, t(5), t(20)).await.unwrap();
        assert_eq!(r.checkpoints(T1).await.unwrap(), vec![early, late]);
        assert!(r.checkpoints(T2).await.unwrap().is_empty());
        let err = r.checkpoint_add(T1, 3, t(30), t(20)).await.unwrap_err();
        assert!(matches!(err, RegistryError::Invalid { field: "at", .. }), "{err}");
    }

    async fn deleter_switch_round_trip(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        assert!(!r.deleter_stopped().await.unwrap());
        r.set_deleter_stopped(true, "incident 77", t(0)).await.unwrap();
        assert!(r.deleter_stopped().await.unwrap());
        let switch = r.deleter_switch().await.unwrap();
        assert_eq!(
            switch,
            DeleterSwitch {
                stopped: true,
                reason: "incident 77".to_owned(),
                changed_at: Some(t(0))
            }
        );
        r.set_deleter_stopped(false, "resolved", t(1)).await.unwrap();
        assert!(!r.deleter_stopped().await.unwrap());
        let events = r.all_events().await.unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![EventKind::DeleterStopped, EventKind::DeleterStarted]);
        assert_eq!(events[0].table_uuid, None);
        assert!(r.events(T1).await.unwrap().is_empty());
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

    fn stamp() -> WorldStamp {
        WorldStamp {
            metadata_location: "m1".into(),
            metadata_blake3: "b1".into(),
            protected_ref_root: "r1".into(),
            lease_watermark: 0,
            hold_generation: 0,
        }
    }

    async fn the_state_machine_refuses_illegal_moves_and_acceptance_checks_the_world(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = Utc::now();
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000001";
        reg.rollout_set(table, "t", &RolloutStage::Test, "unit test", "tests", None, now)
            .await
            .unwrap();
        let a = reg
            .candidate_record(
                table,
                "c-a",
                &serde_json::json!({}),
                &stamp(),
                &["x".into(), "y".into()],
                now,
            )
            .await
            .unwrap();
        assert_eq!(a.state, State::UnreferencedEligible);
        // Not quarantined yet: no jump to DELETE_APPROVED, and acceptance refuses.
        assert!(
            reg.candidate_transition("c-a", State::DeleteApproved, "", None, None, now)
                .await
                .is_err()
        );
        let refused = reg
            .candidate_accept("c-a", &stamp(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(refused, Acceptance::Refused(ref r) if r[0].contains("not QUARANTINED")),
            "{refused:?}"
        );
        reg.candidate_transition("c-a", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        // A changed world is refused, reason by reason; a dry run writes nothing.
        let mut moved = stamp();
        moved.metadata_blake3 = "b2".into();
        moved.protected_ref_root = "r2".into();
        let r = reg
            .candidate_accept("c-a", &moved, 0, vec![], false, now)
            .await
            .unwrap();
        assert!(matches!(r, Acceptance::Refused(ref v) if v.len() == 2), "{r:?}");
        reg.hold_set(table, HoldScope::Prefix("data/x".into()), "late", now)
            .await
            .unwrap();
        let r = reg
            .candidate_accept("c-a", &stamp(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v.iter().any(|x| x.contains("holds changed"))),
            "{r:?}"
        );
        let mut held = stamp();
        held.hold_generation = 1;
        reg.candidate_transition("c-a", State::Quarantined, "re-stamped", None, Some(&held), now)
            .await
            .unwrap_err();
        // Unreconciled unknowns on another candidate of the table block new work beyond the limit.
        reg.candidate_record(table, "c-b", &serde_json::json!({}), &held, &["z".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-b", State::Quarantined, "", None, None, now)
            .await
            .unwrap();
        assert_eq!(
            reg.candidate_accept("c-b", &held, 0, vec![], true, now).await.unwrap(),
            Acceptance::Approved
        );
        assert_eq!(
            reg.candidate("c-b").await.unwrap().state,
            State::Quarantined,
            "a dry run changes nothing"
        );
        assert_eq!(
            reg.candidate_accept("c-b", &held, 0, vec![], false, now).await.unwrap(),
            Acceptance::Approved
        );
        reg.object_transition("c-b", "z", State::DeleteUnknown, now)
            .await
            .unwrap();
        reg.candidate_record(table, "c-c", &serde_json::json!({}), &held, &["w".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-c", State::Quarantined, "", None, None, now)
            .await
            .unwrap();
        let r = reg.candidate_accept("c-c", &held, 0, vec![], false, now).await.unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v.iter().any(|x| x.contains("DELETE_UNKNOWN"))),
            "{r:?}"
        );
        assert_eq!(
            reg.candidate_accept("c-c", &held, 1, vec![], false, now).await.unwrap(),
            Acceptance::Approved
        );
        // Receipts are write-once rows, numbered per object.
        assert_eq!(
            reg.receipt_add("c-b", "z", &serde_json::json!({"phase": "requested"}), now)
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            reg.receipt_add("c-b", "z", &serde_json::json!({"phase": "confirmed"}), now)
                .await
                .unwrap(),
            2
        );
        assert_eq!(reg.receipts("c-b").await.unwrap().len(), 2);
        // Refusals are recorded as events.
        assert!(
            reg.events(table)
                .await
                .unwrap()
                .iter()
                .any(|e| e.kind == EventKind::PurgeRefused)
        );
    }

    async fn report_only_is_the_default_and_refuses_acceptance_until_a_recorded_stage_change(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = Utc::now();
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000002";
        assert_eq!(reg.rollout_stage(table).await.unwrap().stage, RolloutStage::ReportOnly);
        reg.candidate_record(table, "c-r", &serde_json::json!({}), &stamp(), &["x".into()], now)
            .await
            .unwrap();
        reg.candidate_transition("c-r", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        let r = reg
            .candidate_accept("c-r", &stamp(), 0, vec![], false, now)
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v.len() == 1 && v[0].contains("report-only")),
            "{r:?}"
        );
        let c = reg
            .rollout_set(
                table,
                "orders",
                &"cohort:emea-1".parse().unwrap(),
                "wave 1",
                "alice",
                Some("d1"),
                now,
            )
            .await
            .unwrap();
        assert_eq!(
            (c.from.clone(), c.to.clone()),
            (RolloutStage::ReportOnly, RolloutStage::Cohort("emea-1".into()))
        );
        assert_eq!(
            reg.candidate_accept("c-r", &stamp(), 0, vec![], false, now)
                .await
                .unwrap(),
            Acceptance::Approved
        );
        reg.rollout_set(table, "orders", &RolloutStage::ReportOnly, "incident", "bob", None, now)
            .await
            .unwrap();
        let h = reg.rollout_history(table).await.unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!((h[1].reason.as_str(), h[1].changed_by.as_str()), ("incident", "bob"));
        let kinds: Vec<EventKind> = reg.events(table).await.unwrap().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds.iter().filter(|k| **k == EventKind::RolloutStageSet).count(), 2);
        for bad in ["cohort:", "cohort:a b", "prod", "REPORT-ONLY"] {
            assert!(bad.parse::<RolloutStage>().is_err(), "{bad}");
        }
    }

    async fn decisions_are_monotonic_kept_and_turn_holds_on_and_off(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = Utc::now();
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000003";
        let doc = serde_json::json!({"any": "document"});
        let d = |version: i64, on: bool| NewDecision {
            version,
            table_uuid: table,
            issuer: "gov",
            keyid: "k",
            envelope_sha256: "e",
            decision: &doc,
            holds: vec![(
                "case".into(),
                on.then(|| (HoldScope::Snapshot(7), "litigation".to_owned())),
            )],
        };
        let (_, ch) = reg.decision_apply(&d(3, true), now).await.unwrap();
        assert_eq!(ch[0].action, "set");
        assert_eq!(reg.hold_generation(table).await.unwrap(), 1);
        let (_, ch) = reg.decision_apply(&d(4, true), now).await.unwrap();
        assert_eq!(ch[0].action, "unchanged");
        for v in [4, 2] {
            let e = reg.decision_apply(&d(v, false), now).await.unwrap_err();
            assert!(matches!(e, RegistryError::VersionNotNewer { latest: 4, .. }), "{e}");
        }
        assert!(
            reg.holds(table).await.unwrap()[0].active,
            "a refused decision changes nothing"
        );
        let (_, ch) = reg.decision_apply(&d(5, false), now).await.unwrap();
        assert_eq!(ch[0].action, "cleared");
        assert!(!reg.holds(table).await.unwrap()[0].active);
        assert_eq!(reg.hold_generation(table).await.unwrap(), 2);
        let versions: Vec<i64> = reg.decisions(table).await.unwrap().iter().map(|d| d.version).collect();
        assert_eq!(versions, vec![3, 4, 5]);
        assert_eq!(reg.decision_latest_version().await.unwrap(), Some(5));
    }

    async fn a_quarantine_extension_refuses_acceptance_until_it_passes(b: Backend) {
        let (_d, _u, reg) = fresh_on(b).await;
        let now = t(0);
        let table = "7f31a2b4-09c1-4d5e-9f00-000000000004";
        reg.rollout_set(table, "t", &RolloutStage::Enabled, "unit test", "tests", None, now)
            .await
            .unwrap();
        reg.candidate_record(table, "c-e", &serde_json::json!({}), &stamp(), &["x".into()], now)
            .await
            .unwrap();
        assert!(
            reg.quarantine_extend("c-e", chrono::Duration::hours(1), "early", now)
                .await
                .is_err()
        );
        reg.candidate_transition("c-e", State::Quarantined, "sealed", None, None, now)
            .await
            .unwrap();
        let e1 = reg
            .quarantine_extend("c-e", chrono::Duration::hours(1), "look", now)
            .await
            .unwrap();
        let e2 = reg
            .quarantine_extend("c-e", chrono::Duration::hours(2), "look more", now)
            .await
            .unwrap();
        assert_eq!(e2.not_before, e1.not_before + chrono::Duration::hours(2));
        let r = reg
            .candidate_accept("c-e", &stamp(), 0, vec![], true, now + chrono::Duration::hours(2))
            .await
            .unwrap();
        assert!(
            matches!(r, Acceptance::Refused(ref v) if v[0].contains("extended")),
            "{r:?}"
        );
        assert_eq!(
            reg.candidate_accept("c-e", &stamp(), 0, vec![], true, e2.not_before)
                .await
                .unwrap(),
            Acceptance::Approved
        );
    }

    async fn a_version_1_registry_is_migrated_to_version_2_on_open(b: Backend) {
        let (_dir, uri, r) = fresh_on(b).await;
        sqlx::query("UPDATE registry_state SET schema_version = 1")
            .execute(&r.pool)
            .await
            .unwrap();
        sqlx::query("DROP TABLE rollout_stages").execute(&r.pool).await.unwrap();
        r.close().await;
        let r = Registry::open(&uri).await.unwrap();
        let v: i64 = sqlx::query_scalar("SELECT schema_version FROM registry_state")
            .fetch_one(&r.pool)
            .await
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        assert_eq!(
            r.rollout_stage("7f31a2b4-09c1-4d5e-9f00-000000000005")
                .await
                .unwrap()
                .stage,
            RolloutStage::ReportOnly
        );
    }

    async fn writers_and_checkpoints_with_equal_times_keep_insertion_order(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let mut writers = Vec::new();
        let mut checkpoints = Vec::new();
        for i in 0..5 {
            writers.push(r.writer_begin(T1, &format!("p{}/", 9 - i), t(0)).await.unwrap());
            checkpoints.push(r.checkpoint_add(T1, 10 - i, t(0), t(1)).await.unwrap());
        }
        assert_eq!(r.writers(T1).await.unwrap(), writers);
        assert_eq!(r.checkpoints(T1).await.unwrap(), checkpoints);
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
        sqlx::query("UPDATE registry_state SET schema_version = 2")
            .execute(&r.pool)
            .await
            .unwrap();
        r.close().await;
        let r = Registry::open(&uri).await.unwrap();
        let v: i64 = sqlx::query_scalar("SELECT schema_version FROM registry_state")
            .fetch_one(&r.pool)
            .await
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        let after = r.writer_begin(T1, "p0/", t(0)).await.unwrap();
        before.push(after);
        assert_eq!(r.writers(T1).await.unwrap(), before);
        let late = r.checkpoint_add(T1, 0, t(0), t(1)).await.unwrap();
        assert_eq!(r.checkpoints(T1).await.unwrap(), vec![early, late]);
    }

    async fn observations_get_increasing_ids_and_filter_by_time(b: Backend) {
        let (_dir, _uri, r) = fresh_on(b).await;
        let first = r.observation_add(T1, &serde_json::json!({"n": 1}), t(0)).await.unwrap();
        let second = r
            .observation_add(T1, &serde_json::json!({"n": 2}), t(10))
            .await
            .unwrap();
        r.observation_add(T2, &serde_json::json!({"n": 3}), t(10))
            .await
            .unwrap();
        assert!(second > first, "{first} then {second}");
        let seen = r.observations(T1, t(5)).await.unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].observation_id, second);
        assert_eq!(seen[0].report, serde_json::json!({"n": 2}));
        assert_eq!(r.observations(T1, t(0)).await.unwrap().len(), 2);
        // Observations are not changes: the generation does not move.
        assert_eq!(r.generation().await.unwrap(), 0);
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
