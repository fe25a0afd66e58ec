//! Protections: reader leases, legal holds, in-flight writers, DR checkpoints and the deleter switch, with the
//! per-table counters (lease watermark, hold generation) and the [`TableStamp`] the deleter gate compares.
//!
//! Every change here is one registry change ([`Registry`]'s `change`): a new generation and one event. A
//! lease, hold or writer ends once ([`RegistryError::AlreadyEnded`] after that) and is never deleted. The
//! readers of the counters and of the switch are shared with the acceptance point (`candidates`), the purge
//! batches (`purge_runs`) and the holds of governance decisions (`rollout`), which read them inside their
//! own transactions.
//!
//! It does not check a lease against `maxReaderLease` or a writer against `maxWriterDuration` (the caller
//! applies the policy), and it does not decide what a hold covers. It uses only the face (`super`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::base::{
    Change, EventKind, Registry, RegistryError, canonical_table_uuid, decode, fmt_time, opt_time, parse_time, query,
    require_text, time,
};
use crate::model::location::TableLocation;
use crate::model::object::HoldScope;

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

impl Registry {
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
        self.table_rows(
            "leases",
            "SELECT * FROM leases WHERE table_uuid = $1 ORDER BY reader_generation",
            table_uuid,
            |row| lease_from_row(row, now),
        )
        .await
    }

    /// The table's lease watermark: its lease change counter and the latest `expires_at` among its leases that
    /// are not released.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read.
    pub async fn lease_watermark(&self, table_uuid: &str) -> Result<LeaseWatermark, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("lease_watermark", async |conn| {
            read_lease_watermark(conn, &table_uuid).await
        })
        .await
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
        insert_hold(&mut change.tx, &hold).await.map_err(query(OP))?;
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
        // A hold a signed governance decision set is cleared only by a later decision turning its key off: one
        // unsigned command must not undo it.
        let key: Option<String> = sqlx::query_scalar("SELECT hold_key FROM governance_holds WHERE hold_id = $1")
            .bind(hold_id)
            .fetch_optional(&mut *change.tx)
            .await
            .map_err(query(OP))?;
        if let Some(key) = key {
            return Err(RegistryError::Invalid {
                field: "hold_id",
                reason: format!(
                    "hold {hold_id} was set by a signed governance decision (hold key {key:?}); only a later decision \
                     that turns {key:?} off clears it (`decision apply`)"
                ),
            });
        }
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
        self.table_rows("holds", HOLDS_OF_TABLE, table_uuid, hold_from_row)
            .await
    }

    /// The table's hold generation: the number of hold changes (sets and clears) it ever had.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read.
    pub async fn hold_generation(&self, table_uuid: &str) -> Result<i64, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("hold_generation", async |conn| {
            read_hold_generation(conn, &table_uuid).await
        })
        .await
    }

    /// The table's protection generation: the registry generation of its newest DR checkpoint or writer (0 when
    /// it has none). It moves when a checkpoint is declared or a writer begins, never back (their rows are kept
    /// when a writer ends): the world stamp's fifth counter, beside the lease watermark and the hold generation.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Invalid`] for a malformed table UUID, [`RegistryError::Query`] when the database cannot
    /// be read.
    pub async fn protection_generation(&self, table_uuid: &str) -> Result<i64, RegistryError> {
        let table_uuid = canonical_table_uuid(table_uuid)?;
        self.read("protection_generation", async |conn| {
            read_protection_generation(conn, &table_uuid).await
        })
        .await
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
        self.table_rows(
            "writers",
            "SELECT * FROM writers WHERE table_uuid = $1 ORDER BY started_at, generation",
            table_uuid,
            writer_from_row,
        )
        .await
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
        self.table_rows(
            "checkpoints",
            "SELECT * FROM checkpoints WHERE table_uuid = $1 ORDER BY at, generation",
            table_uuid,
            checkpoint_from_row,
        )
        .await
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
        self.read("deleter_switch", async |conn| read_deleter_switch(conn).await)
            .await
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

    // ----- stamps -------------------------------------------------------------------------------------------

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
        let mut tx = self.read_snapshot(OP).await?;
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
pub(super) enum Counter {
    Lease,
    Hold,
}

/// Bumps a per-table counter (creating the table's row at 0 first) and returns its new value.
pub(super) async fn bump_table_counter(
    conn: &mut AnyConnection,
    table_uuid: &str,
    counter: Counter,
) -> Result<i64, sqlx::Error> {
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

pub(super) async fn read_lease_watermark(
    conn: &mut AnyConnection,
    table_uuid: &str,
) -> Result<LeaseWatermark, sqlx::Error> {
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

pub(super) async fn read_hold_generation(conn: &mut AnyConnection, table_uuid: &str) -> Result<i64, sqlx::Error> {
    let found: Option<i64> = sqlx::query_scalar("SELECT hold_generation FROM table_counters WHERE table_uuid = $1")
        .bind(table_uuid)
        .fetch_optional(conn)
        .await?;
    Ok(found.unwrap_or(0))
}

pub(super) async fn read_protection_generation(conn: &mut AnyConnection, table_uuid: &str) -> Result<i64, sqlx::Error> {
    let found: Option<i64> = sqlx::query_scalar(
        "SELECT MAX(g) FROM (SELECT MAX(generation) AS g FROM checkpoints WHERE table_uuid = $1 \
         UNION ALL SELECT MAX(generation) AS g FROM writers WHERE table_uuid = $1) AS newest",
    )
    .bind(table_uuid)
    .fetch_one(conn)
    .await?;
    Ok(found.unwrap_or(0))
}

/// The DR checkpoints and open writers of the table newer than protection generation `since` that cover a
/// candidate of snapshots `ids` and objects `paths` (relative to `location`), each named: a checkpoint on one of the
/// snapshots, a writer whose prefix (relative, or a URI under the table root) covers one of the objects. A writer
/// elsewhere on the table, or one that ended, covers nothing.
pub(super) async fn covering_new_protections(
    conn: &mut AnyConnection,
    table_uuid: &str,
    since: i64,
    ids: &[i64],
    paths: &[&str],
    location: &TableLocation,
) -> Result<Vec<String>, sqlx::Error> {
    let checkpoints: Vec<(String, i64)> =
        sqlx::query_as("SELECT checkpoint_id, snapshot_id FROM checkpoints WHERE table_uuid = $1 AND generation > $2")
            .bind(table_uuid)
            .bind(since)
            .fetch_all(&mut *conn)
            .await?;
    let writers: Vec<(String, String)> = sqlx::query_as(
        "SELECT writer_id, prefix FROM writers WHERE table_uuid = $1 AND generation > $2 AND ended_at IS NULL",
    )
    .bind(table_uuid)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    Ok(checkpoints
        .iter()
        .filter(|(_, s)| ids.contains(s))
        .map(|(c, s)| format!("DR checkpoint {c} on snapshot {s}"))
        .chain(
            writers
                .iter()
                .filter(|(_, p)| prefix_covers(location, p, paths))
                .map(|(w, p)| format!("writer {w} on prefix {p}")),
        )
        .collect())
}

/// Whether the registry prefix `written` (a hold's or a writer's) covers one of `paths`, relative to `location`.
/// A prefix that cannot be related to the table (stored before such prefixes were refused) covers them all.
pub(super) fn prefix_covers(location: &TableLocation, written: &str, paths: &[&str]) -> bool {
    location
        .relative_prefix(written)
        .is_none_or(|p| paths.iter().any(|o| crate::govern::closure::under(o, &p)))
}

pub(super) async fn read_deleter_switch(conn: &mut AnyConnection) -> Result<DeleterSwitch, sqlx::Error> {
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

/// Every hold of a table (`$1`), cleared ones included, oldest first.
pub(super) const HOLDS_OF_TABLE: &str = "SELECT * FROM holds WHERE table_uuid = $1 ORDER BY hold_generation";

/// Inserts a new hold (not cleared), set at `hold.set_at`.
pub(super) async fn insert_hold(conn: &mut AnyConnection, hold: &Hold) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO holds (hold_id, table_uuid, scope, reason, hold_generation, set_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&hold.hold_id)
    .bind(&hold.table_uuid)
    .bind(hold.scope.to_string())
    .bind(&hold.reason)
    .bind(hold.hold_generation)
    .bind(fmt_time(hold.set_at))
    .execute(conn)
    .await?;
    Ok(())
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

pub(super) fn hold_from_row(row: &AnyRow) -> Result<Hold, sqlx::Error> {
    let scope: String = row.try_get("scope")?;
    let scope = scope.parse::<HoldScope>().map_err(|e| decode("scope", e))?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::registry::tests::{Backend, T1, T2, fresh_on, new_lease, on_both_backends, t};

    /// A stored prefix is read relative to the table location; one that cannot be related to the table (stored
    /// before `hold set` and `writer begin` refused them) covers every object: the registry errs on protecting.
    #[test]
    fn stored_prefixes_relate_to_the_table_or_cover_everything() {
        let loc = TableLocation::new("s3://b/wh/t", "s3://b/wh/t".into(), "m").unwrap();
        let paths = ["data/x/a.parquet", "metadata/snap-1.avro"];
        assert!(prefix_covers(&loc, "data/x", &paths));
        assert!(prefix_covers(&loc, "s3://b/wh/t/data/", &paths));
        assert!(!prefix_covers(&loc, "data/y", &paths));
        assert!(!prefix_covers(&loc, "s3://b/wh/t/data/y", &paths));
        for unrelated in ["/etc", "../other", "s3://b/wh/other/data", "."] {
            assert!(prefix_covers(&loc, unrelated, &paths), "{unrelated}");
        }
    }

    on_both_backends!(
        lease_round_trip_active_and_release,
        lease_add_refuses_invalid_input,
        table_uuid_spellings_are_one_table,
        lease_watermark_bumps_on_add_and_release,
        hold_round_trip_and_generation_per_table,
        writer_round_trip,
        checkpoint_round_trip,
        deleter_switch_round_trip,
        writers_and_checkpoints_with_equal_times_keep_insertion_order,
    );

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
}
