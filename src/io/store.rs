//! Every byte lakedrill reads or writes goes through this module.
//!
//! [`Storage`] turns canonical storage URIs (see [`crate::model::location`]) into `object_store`
//! calls: `file://` on the local filesystem, `s3://` on Amazon S3 or any S3-compatible server,
//! `memory://` for tests. It owns the limits that keep a run polite to the store: a named bound
//! on concurrent requests ([`StorageOptions::io_concurrency`]) and the retry policy of the S3
//! client. Every error it returns names the URI of the object.
//!
//! It does not interpret bytes (that is the job of the pure modules) and it never deletes:
//! deletion belongs to the deleter's plan, not to readers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tokio::sync::Semaphore;

use crate::error::{Error, Result};

pub use crate::config::{DEFAULT_MAX_METADATA_BYTES, StorageOptions};

pub mod s3;

/// Delete requests sent by one [`Storage`], by kind (the purge report states them; tests count them).
#[derive(Debug, Default)]
struct RequestCounters {
    delete_objects: std::sync::atomic::AtomicU64,
    single_deletes: std::sync::atomic::AtomicU64,
    recheck_listings: std::sync::atomic::AtomicU64,
    recheck_heads: std::sync::atomic::AtomicU64,
    deletes_wall_us: std::sync::atomic::AtomicU64,
    rechecks_wall_us: std::sync::atomic::AtomicU64,
}

/// The delete requests a [`Storage`] has sent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct RequestCounts {
    /// S3 `DeleteObjects` requests (each up to [`s3::MAX_DELETE_OBJECTS_KEYS`] keys).
    pub delete_objects: u64,
    /// Single-object delete requests (S3 `DeleteObject`, or object_store deletes elsewhere).
    pub single_deletes: u64,
    /// Listings that re-checked deleted objects ([`Storage::list_presence`]; each reads one or more pages).
    pub recheck_listings: u64,
    /// Objects re-checked one at a time after their delete (a HEAD, or a stat on a filesystem).
    pub recheck_heads: u64,
    /// Wall-clock microseconds the purge spent waiting for its delete requests (each batch's requests in flight
    /// together, the batches one after another): the request phase alone, without the registry, the receipts
    /// or the re-checks, so that batch and single deletes compare on what differs between them.
    pub deletes_wall_us: u64,
    /// Wall-clock microseconds the purge spent re-checking deleted objects (listings or HEADs).
    pub rechecks_wall_us: u64,
}

/// What the store says about one object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectInfo {
    /// Canonical storage URI.
    pub uri: String,
    /// Size in bytes.
    pub size: u64,
    /// The store's ETag, when it gives one.
    pub e_tag: Option<String>,
    /// The object version, on versioned stores.
    pub version: Option<String>,
    /// Last modification time.
    pub last_modified: DateTime<Utc>,
}

/// One version (or delete marker) of an object on a versioned bucket.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectVersion {
    /// The version id.
    pub version_id: String,
    /// Whether it is the current version.
    pub is_latest: bool,
    /// Whether it is a delete marker.
    pub is_delete_marker: bool,
    /// Size (0 for markers).
    pub size: u64,
}

/// An object's bytes as read.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// What the store said about it.
    pub info: ObjectInfo,
    /// The whole content.
    pub bytes: Bytes,
}

/// What [`Storage::get_within`] found.
#[derive(Debug, Clone)]
pub enum Within {
    /// The whole object, at most the bound.
    Read(Fetched),
    /// The object is over the bound; it was not read whole.
    Over {
        /// Its size as the store reported it, or the bytes read before it passed the bound.
        size: u64,
    },
}

/// An object hashed while streaming, so memory does not grow with its size.
#[derive(Debug, Clone)]
pub struct Hashed {
    /// What the store said about it.
    pub info: ObjectInfo,
    /// Bytes actually read.
    pub bytes_read: u64,
    /// BLAKE3 of the content, lowercase hex.
    pub blake3: String,
}

/// The storage layer: a cache of `object_store` clients plus the request limit.
pub struct Storage {
    options: StorageOptions,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    s3: Mutex<HashMap<String, Arc<object_store::aws::AmazonS3>>>,
    /// One HTTP client (one connection pool) for the presigned S3 requests object_store does not send itself
    /// (conditional and batch deletes, versions): a client per request opened a connection per request. Built on
    /// first use: building one reads and parses the system's root certificates (~450 files here, about a tenth of
    /// a 1,000-snapshot `plan` on a local table that never sends a request).
    http: std::sync::OnceLock<reqwest::Client>,
    limit: Arc<Semaphore>,
    deletes: std::sync::atomic::AtomicU64,
    requests: RequestCounters,
    failpoints: Failpoints,
    layer: Option<Layer>,
    faults: Option<Arc<crate::io::fault_store::FaultState>>,
}

/// Wraps every client a [`Storage`] builds (the fault layer of `drill faults`).
pub type Layer = Arc<dyn Fn(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> + Send + Sync>;

/// Test-only fault injection for deletes and races, from `LAKEDRILL_FAILPOINTS`
/// (`error-every=K,lose-every=K,abort-after=N,abort-at-batch=K,abort-after-intent=K,delay-ms=MS,
/// catalog-commit-delay-ms=MS,protection-delay-ms=MS,purge-plan-delay-ms=MS,orphan-hold-delay-ms=MS,orphan-take-out-delay-ms=MS,
/// purge-intent-delay-ms=MS,purge-finish-delay-ms=MS,quarantine-committed-delay-ms=MS,orphan-remove-delay-ms=MS,
/// orphan-renamed-delay-ms=MS,release-write-delay-ms=MS,put-back-rebase-delay-ms=MS,purge-archive-delay-ms=MS,
/// purge-rebase-delay-ms=MS,purge-rebase-recorded-delay-ms=MS,claim-heartbeat-ms=MS,
/// catalog-answer-lost=1,catalog-update-unanswered=1,release-lock-end-fails=1,quarantine-lock-end-fails=1,
/// quarantine-record-fails=1,s3-conditions-ignored=1`). Used by the crash,
/// DELETE_UNKNOWN, hold-during-purge and protection-race tests and the purge benchmark's kills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failpoints {
    /// Every K-th delete fails with an injected 503 before it is sent.
    pub error_every: Option<u64>,
    /// Every K-th delete takes effect but its response is lost.
    pub lose_every: Option<u64>,
    /// The process aborts right after the N-th delete took effect.
    pub abort_after: Option<u64>,
    /// Every delete waits this many milliseconds before it is sent (a slow store).
    pub delay_ms: Option<u64>,
    /// The process aborts when purge batch K is about to begin: batches 1..K-1 are committed and sealed, and
    /// nothing of batch K is recorded (a kill between batches).
    pub abort_at_batch: Option<u64>,
    /// The process aborts right after purge batch K recorded its intents (committed and sealed), before any of
    /// its delete requests is sent.
    pub abort_after_intent: Option<u64>,
    /// The purge waits this many milliseconds before each try of its catalog commit (a slow catalog: a lease or
    /// hold can land between the acceptance and the commit).
    pub catalog_commit_delay_ms: Option<u64>,
    /// `lease add`, `hold set` and `checkpoint add` wait this many milliseconds between reading the table and
    /// writing the registry (a purge can commit in between).
    pub protection_delay_ms: Option<u64>,
    /// The purge waits this many milliseconds after reading the table's world and before judging the candidate
    /// (a lease can land in between).
    pub purge_plan_delay_ms: Option<u64>,
    /// `quarantine o-…` waits this many milliseconds after reading (and copying) the orphans and before it reads
    /// the table and the registry again to relate them (a late commit, a writer or a hold can land in between).
    pub orphan_hold_delay_ms: Option<u64>,
    /// `quarantine o-…` waits this many milliseconds after its bundle is written and before the first file leaves
    /// the table (a late commit can land after its last check).
    pub orphan_take_out_delay_ms: Option<u64>,
    /// The purge waits this many milliseconds after each batch recorded its intents, before it checks the
    /// registry again and sends them (a hold or the stop switch can land in between).
    pub purge_intent_delay_ms: Option<u64>,
    /// The purge waits this many milliseconds after its last batch, before it settles the candidate's state and
    /// signs its summary (another run can take its claim over in between).
    pub purge_finish_delay_ms: Option<u64>,
    /// `quarantine c-…` waits this many milliseconds right after its catalog commit succeeded, before it records
    /// anything (a hold, lease, checkpoint, writer or decision can land in between).
    pub quarantine_committed_delay_ms: Option<u64>,
    /// `quarantine o-…` waits this many milliseconds after a held file's last hash and before its removal (on
    /// the local filesystem: before it is renamed aside); a writer can rewrite the file in between.
    pub orphan_remove_delay_ms: Option<u64>,
    /// `quarantine o-…` on the local filesystem waits this many milliseconds after a held file was renamed aside
    /// and before it is hashed again and removed (a run killed there leaves the private name).
    pub orphan_renamed_delay_ms: Option<u64>,
    /// `quarantine release` and `restore --put-back` wait this many milliseconds once they hold the candidate's
    /// claim (and put back any orphans), before their first catalog or registry write (another run can take their
    /// claim over in between).
    pub release_write_delay_ms: Option<u64>,
    /// A `plan` or `purge` putting back held orphans of a quarantined candidate (a late commit, a writer or a hold
    /// covers them) waits this many milliseconds once the files are back, before it rebases the candidate without
    /// them (its stamp or state can move in between).
    pub put_back_rebase_delay_ms: Option<u64>,
    /// Pause of a purge run once it claimed the candidate, before it reads the record it archives and deletes.
    pub purge_archive_delay_ms: Option<u64>,
    /// A purge that re-judged its approved candidate at a new table generation waits this many milliseconds right
    /// before it records the rebase (after its last claim check): its claim can be taken over in between, and the
    /// registry then refuses the rebase.
    pub purge_rebase_delay_ms: Option<u64>,
    /// A purge that recorded its rebase waits this many milliseconds before it reads the rebased row back (a test
    /// edits the row there).
    pub purge_rebase_recorded_delay_ms: Option<u64>,
    /// A run holding a candidate's claim (quarantine, purge, reconcile, undelete) renews its heartbeat every this
    /// many milliseconds instead of every `CLAIM_HEARTBEAT_SECS` (60) seconds (so that a test sees a renewal
    /// without waiting).
    pub claim_heartbeat_ms: Option<u64>,
    /// `set-current --from-bundle` waits this many milliseconds after it found every object of the snapshot in the
    /// table and before its catalog commit (a purge can run in between).
    pub set_current_commit_delay_ms: Option<u64>,
    /// `restore --into` and `recover` wait this many milliseconds after the bundle verified and before `rebuild`
    /// copies its objects (an object can change in between).
    pub rebuild_copy_delay_ms: Option<u64>,
    /// A protection (`lease add`, `hold set`, `checkpoint add`, `writer begin`) waits this many milliseconds after
    /// it was recorded and listed the candidates it covers, before it moves them (one can move on in between).
    pub protect_covered_delay_ms: Option<u64>,
    /// A SQL catalog's compare-and-set `UPDATE` runs, and its answer is lost (as a connection dropped after the
    /// statement reached the database): `catalog-answer-lost=1`.
    pub catalog_answer_lost: Option<u64>,
    /// A SQL catalog's compare-and-set `UPDATE` fails without an answer and is not applied (as a connection
    /// dropped before the statement reached the database): `catalog-update-unanswered=1`.
    pub catalog_update_unanswered: Option<u64>,
    /// `quarantine release` cannot end the registry lock it made its catalog commit under: the lock's transaction
    /// is rolled back and an injected error returned in place of its commit, after the catalog answered (as a
    /// registry connection dropped right then): `release-lock-end-fails=1`.
    pub release_lock_end_fails: Option<u64>,
    /// A snapshot quarantine cannot end the registry lock it made its catalog commit under (as
    /// `release-lock-end-fails` for `quarantine release`): `quarantine-lock-end-fails=1`.
    pub quarantine_lock_end_fails: Option<u64>,
    /// A snapshot quarantine whose catalog commit landed and whose record was written cannot move the candidate
    /// on: both the move to `QUARANTINED` and the fallback move to `PROTECTED` fail with an injected registry
    /// error (as a registry that stopped answering right after the record): `quarantine-record-fails=1`.
    pub quarantine_record_fails: Option<u64>,
    /// The S3 delete-condition probe reports both conditions ignored, whatever the server answered (a provider
    /// that ignores them; the probe itself still runs): `s3-conditions-ignored=1`.
    pub s3_conditions_ignored: Option<u64>,
}

/// Where a `*-delay-ms` failpoint of [`Failpoints`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayPoint {
    /// Before each try of the purge's catalog commit.
    CatalogCommit,
    /// Between a protection's table read and its registry write.
    Protection,
    /// After the purge read the table's world (its stamp, leases and holds), before it judges the candidate.
    PurgePlanRead,
    /// After an orphan quarantine read and copied its files, before it relates them to the table and registry.
    OrphanHold,
    /// After an orphan quarantine wrote its bundle, before the first file leaves the table.
    OrphanTakeOut,
    /// After a purge batch (or a reconcile) recorded its delete intents, before its second check and its requests.
    PurgeIntent,
    /// After a purge's last batch, before it settles the candidate and signs its summary.
    PurgeFinish,
    /// After a snapshot quarantine's catalog commit succeeded, before it records the quarantine.
    QuarantineCommitted,
    /// After a held orphan's last hash, before its removal (local: before it is renamed aside).
    OrphanRemove,
    /// After a held local orphan was renamed aside, before it is hashed again and removed.
    OrphanRenamed,
    /// After `quarantine release` or `restore --put-back` claimed the candidate, before its first catalog or
    /// registry write.
    ReleaseWrite,
    /// After a plan's or purge's put-back of a quarantined candidate's files, before it rebases the candidate.
    PutBackRebase,
    /// After a purge run claimed the candidate, before it reads the record it archives and deletes.
    PurgeArchive,
    /// After a purge re-judged its approved candidate at a new table generation, right before it records the rebase.
    PurgeRebase,
    /// After a purge recorded its rebase, before it reads the rebased row back.
    PurgeRebaseRecorded,
    /// After `set-current --from-bundle` found the snapshot's objects in the table, before its catalog commit.
    SetCurrentCommit,
    /// After a bundle verified, before `rebuild` copies its objects (`restore --into`, `recover`).
    RebuildCopy,
    /// After a protection was recorded and listed the candidates it covers, before it moves them to `PROTECTED`.
    ProtectCovered,
}

impl Failpoints {
    /// Reads `LAKEDRILL_FAILPOINTS`; unknown keys are ignored with a warning.
    #[must_use]
    pub fn from_env() -> Self {
        let mut f = Failpoints::default();
        let Ok(spec) = std::env::var("LAKEDRILL_FAILPOINTS") else {
            return f;
        };
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let v = v.parse::<u64>().ok().filter(|v| *v > 0);
            match k {
                "error-every" => f.error_every = v,
                "lose-every" => f.lose_every = v,
                "abort-after" => f.abort_after = v,
                "delay-ms" => f.delay_ms = v,
                "abort-at-batch" => f.abort_at_batch = v,
                "abort-after-intent" => f.abort_after_intent = v,
                "catalog-commit-delay-ms" => f.catalog_commit_delay_ms = v,
                "protection-delay-ms" => f.protection_delay_ms = v,
                "purge-plan-delay-ms" => f.purge_plan_delay_ms = v,
                "orphan-hold-delay-ms" => f.orphan_hold_delay_ms = v,
                "orphan-take-out-delay-ms" => f.orphan_take_out_delay_ms = v,
                "purge-intent-delay-ms" => f.purge_intent_delay_ms = v,
                "purge-finish-delay-ms" => f.purge_finish_delay_ms = v,
                "quarantine-committed-delay-ms" => f.quarantine_committed_delay_ms = v,
                "claim-heartbeat-ms" => f.claim_heartbeat_ms = v,
                "orphan-remove-delay-ms" => f.orphan_remove_delay_ms = v,
                "orphan-renamed-delay-ms" => f.orphan_renamed_delay_ms = v,
                "release-write-delay-ms" => f.release_write_delay_ms = v,
                "put-back-rebase-delay-ms" => f.put_back_rebase_delay_ms = v,
                "purge-archive-delay-ms" => f.purge_archive_delay_ms = v,
                "purge-rebase-delay-ms" => f.purge_rebase_delay_ms = v,
                "purge-rebase-recorded-delay-ms" => f.purge_rebase_recorded_delay_ms = v,
                "set-current-commit-delay-ms" => f.set_current_commit_delay_ms = v,
                "rebuild-copy-delay-ms" => f.rebuild_copy_delay_ms = v,
                "protect-covered-delay-ms" => f.protect_covered_delay_ms = v,
                "catalog-answer-lost" => f.catalog_answer_lost = v,
                "catalog-update-unanswered" => f.catalog_update_unanswered = v,
                "release-lock-end-fails" => f.release_lock_end_fails = v,
                "quarantine-lock-end-fails" => f.quarantine_lock_end_fails = v,
                "quarantine-record-fails" => f.quarantine_record_fails = v,
                "s3-conditions-ignored" => f.s3_conditions_ignored = v,
                _ => eprintln!("lakedrill: ignoring unknown failpoint {k:?}"),
            }
        }
        f
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("io_concurrency", &self.options.io_concurrency)
            .finish_non_exhaustive()
    }
}

/// The retry policy of every cloud client (S3, GCS, Azure): five retries within two minutes.
fn retry() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(120),
        ..Default::default()
    }
}

fn map_err(op: &'static str, uri: &str, e: object_store::Error) -> Error {
    match e {
        object_store::Error::NotFound { .. } => Error::NotFound { uri: uri.to_owned() },
        // A create-only write answered 412 Precondition Failed (S3 `If-None-Match: *`): the key exists.
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            Error::AlreadyExists { uri: uri.to_owned() }
        }
        source => Error::Storage {
            op,
            uri: uri.to_owned(),
            source: Box::new(source),
        },
    }
}

/// The error of an object over a size limit: it names the object, its size (or the bytes read when it was
/// refused) and the limit with the setting that raises it.
#[must_use]
pub fn over_limit(uri: &str, what: &str, size: u64, max: u64) -> Error {
    Error::corrupt(
        uri,
        format!(
            "{what} is {size} bytes or more, over the limit of {max} bytes (`max_metadata_bytes` under [storage] in the configuration)"
        ),
    )
}

impl Storage {
    /// A storage layer with the given options.
    #[must_use]
    pub fn new(options: StorageOptions) -> Self {
        // Every command builds a storage before it can read an Avro file: bound the decoder here, before the
        // first decode anywhere in the process (the bound is process-wide and set once).
        crate::io::avro::bound_avro_allocations();
        let permits = options.io_concurrency.get();
        Self {
            options,
            stores: Mutex::new(HashMap::new()),
            s3: Mutex::new(HashMap::new()),
            http: std::sync::OnceLock::new(),
            limit: Arc::new(Semaphore::new(permits)),
            deletes: std::sync::atomic::AtomicU64::new(0),
            requests: RequestCounters::default(),
            failpoints: Failpoints::from_env(),
            layer: None,
            faults: None,
        }
    }

    /// A storage whose every client is wrapped by `layer`; `drill faults` uses it to put
    /// [`crate::io::fault_store::FaultStore`] in front of its scratch lakehouse. The versioned S3 operations
    /// (list versions, delete a version) go around the layer.
    #[must_use]
    pub fn with_layer(options: StorageOptions, layer: Layer) -> Self {
        let mut s = Self::new(options);
        s.layer = Some(layer);
        s
    }

    /// A storage whose every client is wrapped by a [`crate::io::fault_store::FaultStore`] on `state`, and whose
    /// S3 delete requests (which go around object_store clients) take their faults from the same `state`
    /// (`drill faults`).
    #[must_use]
    pub fn with_fault_layer(options: StorageOptions, state: Arc<crate::io::fault_store::FaultState>) -> Self {
        let layer_state = Arc::clone(&state);
        let mut s = Self::with_layer(
            options,
            Arc::new(move |inner| Arc::new(crate::io::fault_store::FaultStore::new(inner, Arc::clone(&layer_state)))),
        );
        s.faults = Some(state);
        s
    }

    /// A storage whose `memory:///` URIs are served by `store` instead of a fresh in-memory store
    /// (benchmarks wrap one in `object_store`'s `ThrottledStore` to add per-request latency).
    #[must_use]
    pub fn with_memory_store(options: StorageOptions, store: Arc<dyn ObjectStore>) -> Self {
        let s = Self::new(options);
        if let Ok(mut m) = s.stores.lock() {
            m.insert("memory".to_owned(), store);
        }
        s
    }

    /// The purge-batch failpoints of `LAKEDRILL_FAILPOINTS` (test-only): aborts the process at the start of
    /// batch `batch` (`abort-at-batch`) or, with `intent_recorded`, once its intents are committed
    /// (`abort-after-intent`). Batches count from 1 within one run.
    pub fn failpoint_purge_batch(&self, batch: u64, intent_recorded: bool) {
        let (point, at) = if intent_recorded {
            ("abort-after-intent", self.failpoints.abort_after_intent)
        } else {
            ("abort-at-batch", self.failpoints.abort_at_batch)
        };
        if at == Some(batch) {
            eprintln!("lakedrill: failpoint {point}={batch}: aborting the process");
            std::process::abort();
        }
    }

    /// The SQL-catalog answer failpoints of `LAKEDRILL_FAILPOINTS` (test-only): whether a compare-and-set
    /// `UPDATE`'s answer is lost after it ran (`catalog-answer-lost`), or the statement fails unanswered without
    /// running (`catalog-update-unanswered`).
    #[must_use]
    pub fn failpoint_catalog_answer(&self) -> (bool, bool) {
        (
            self.failpoints.catalog_answer_lost.is_some(),
            self.failpoints.catalog_update_unanswered.is_some(),
        )
    }

    /// The `release-lock-end-fails` failpoint of `LAKEDRILL_FAILPOINTS` (test-only): whether `quarantine release`
    /// fails to end the registry lock of its catalog commit (the lock is rolled back, an injected error returned).
    #[must_use]
    pub fn failpoint_release_lock_end_fails(&self) -> bool {
        self.failpoints.release_lock_end_fails.is_some()
    }

    /// The `quarantine-lock-end-fails` failpoint of `LAKEDRILL_FAILPOINTS` (test-only): whether a snapshot
    /// quarantine fails to end the registry lock of its catalog commit (the lock is rolled back, an injected error
    /// returned).
    #[must_use]
    pub fn failpoint_quarantine_lock_end_fails(&self) -> bool {
        self.failpoints.quarantine_lock_end_fails.is_some()
    }

    /// The `quarantine-record-fails` failpoint of `LAKEDRILL_FAILPOINTS` (test-only): whether a snapshot quarantine
    /// whose commit landed and is recorded fails to move the candidate to `QUARANTINED` and to `PROTECTED`.
    #[must_use]
    pub fn failpoint_quarantine_record_fails(&self) -> bool {
        self.failpoints.quarantine_record_fails.is_some()
    }

    /// The `claim-heartbeat-ms` failpoint (test-only): how often a run renews its claim on a candidate, when set.
    #[must_use]
    pub fn failpoint_claim_heartbeat(&self) -> Option<std::time::Duration> {
        self.failpoints.claim_heartbeat_ms.map(std::time::Duration::from_millis)
    }

    /// The `*-delay-ms` failpoints of `LAKEDRILL_FAILPOINTS` (test-only): waits at `point` for as long as its
    /// failpoint says (not at all without one), or until the file `LAKEDRILL_FAILPOINT_RELEASE` names exists, or
    /// that file's name followed by `.` and the failpoint's name (`go.purge-archive-delay-ms`: a test releases one
    /// pause of a run and holds it at the next). It says on stderr that it waits, so that a test knows the process
    /// got there.
    pub async fn failpoint_delay(&self, point: DelayPoint) {
        let (name, ms) = match point {
            DelayPoint::CatalogCommit => ("catalog-commit-delay-ms", self.failpoints.catalog_commit_delay_ms),
            DelayPoint::Protection => ("protection-delay-ms", self.failpoints.protection_delay_ms),
            DelayPoint::PurgePlanRead => ("purge-plan-delay-ms", self.failpoints.purge_plan_delay_ms),
            DelayPoint::OrphanHold => ("orphan-hold-delay-ms", self.failpoints.orphan_hold_delay_ms),
            DelayPoint::OrphanTakeOut => ("orphan-take-out-delay-ms", self.failpoints.orphan_take_out_delay_ms),
            DelayPoint::PurgeIntent => ("purge-intent-delay-ms", self.failpoints.purge_intent_delay_ms),
            DelayPoint::PurgeFinish => ("purge-finish-delay-ms", self.failpoints.purge_finish_delay_ms),
            DelayPoint::QuarantineCommitted => (
                "quarantine-committed-delay-ms",
                self.failpoints.quarantine_committed_delay_ms,
            ),
            DelayPoint::SetCurrentCommit => (
                "set-current-commit-delay-ms",
                self.failpoints.set_current_commit_delay_ms,
            ),
            DelayPoint::RebuildCopy => ("rebuild-copy-delay-ms", self.failpoints.rebuild_copy_delay_ms),
            DelayPoint::ProtectCovered => ("protect-covered-delay-ms", self.failpoints.protect_covered_delay_ms),
            DelayPoint::OrphanRemove => ("orphan-remove-delay-ms", self.failpoints.orphan_remove_delay_ms),
            DelayPoint::OrphanRenamed => ("orphan-renamed-delay-ms", self.failpoints.orphan_renamed_delay_ms),
            DelayPoint::ReleaseWrite => ("release-write-delay-ms", self.failpoints.release_write_delay_ms),
            DelayPoint::PutBackRebase => ("put-back-rebase-delay-ms", self.failpoints.put_back_rebase_delay_ms),
            DelayPoint::PurgeArchive => ("purge-archive-delay-ms", self.failpoints.purge_archive_delay_ms),
            DelayPoint::PurgeRebase => ("purge-rebase-delay-ms", self.failpoints.purge_rebase_delay_ms),
            DelayPoint::PurgeRebaseRecorded => (
                "purge-rebase-recorded-delay-ms",
                self.failpoints.purge_rebase_recorded_delay_ms,
            ),
        };
        let Some(ms) = ms else { return };
        eprintln!("lakedrill: failpoint {name}={ms}: waiting");
        let release: Vec<std::path::PathBuf> = std::env::var_os("LAKEDRILL_FAILPOINT_RELEASE")
            .map(|p| {
                let mut one = p.clone();
                one.push(format!(".{name}"));
                vec![std::path::PathBuf::from(p), std::path::PathBuf::from(one)]
            })
            .unwrap_or_default();
        let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        while std::time::Instant::now() < until && !release.iter().any(|p| p.exists()) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The options this storage was built with.
    pub fn options(&self) -> &StorageOptions {
        &self.options
    }

    /// The `object_store` client and object path for a canonical URI.
    ///
    /// # Errors
    /// [`Error::BadUri`] for an unsupported scheme or an S3 client that cannot be configured.
    pub fn resolve(&self, uri: &str) -> Result<(Arc<dyn ObjectStore>, Path)> {
        let bad = |reason: String| Error::BadUri {
            uri: uri.to_owned(),
            reason,
        };
        let (key, path) = if let Some(rest) = uri.strip_prefix("file:///") {
            ("file".to_owned(), rest)
        } else if let Some(rest) = uri.strip_prefix("s3://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            (format!("s3://{bucket}"), key)
        } else if let Some(rest) = uri.strip_prefix("gs://") {
            let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
            (format!("gs://{bucket}"), key)
        } else if let Some(rest) = uri.strip_prefix("az://") {
            let (container, key) = rest.split_once('/').unwrap_or((rest, ""));
            (format!("az://{container}"), key)
        } else if let Some(rest) = uri.strip_prefix("memory:///") {
            ("memory".to_owned(), rest)
        } else {
            return Err(bad(
                "not a canonical storage URI (file:///, s3://, gs://, az://, memory:///)".into(),
            ));
        };
        let path = Path::parse(path).map_err(|e| bad(e.to_string()))?;
        let mut stores = self
            .stores
            .lock()
            .map_err(|_| Error::Internal("storage client cache poisoned".into()))?;
        if let Some(store) = stores.get(&key) {
            return Ok((Arc::clone(store), path));
        }
        let store: Arc<dyn ObjectStore> = if key == "file" {
            Arc::new(object_store::local::LocalFileSystem::new())
        } else if key == "memory" {
            Arc::new(object_store::memory::InMemory::new())
        } else if let Some(bucket) = key.strip_prefix("gs://") {
            // Credentials and endpoint from the standard GOOGLE_* variables (a service account file, ADC).
            let mut builder = object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry());
            for (k, v) in &self.options.gcs {
                let cfg: object_store::gcp::GoogleConfigKey = k
                    .parse()
                    .map_err(|e: object_store::Error| bad(format!("GCS setting {k}: {e}")))?;
                builder = builder.with_config(cfg, v.clone());
            }
            Arc::new(builder.build().map_err(|e| bad(format!("GCS client: {e}")))?)
        } else if let Some(container) = key.strip_prefix("az://") {
            // Account, credentials and endpoint from the standard AZURE_* variables (also the emulator switch).
            let mut builder = object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_container_name(container)
                .with_retry(retry());
            for (k, v) in &self.options.azure {
                let cfg: object_store::azure::AzureConfigKey = k
                    .parse()
                    .map_err(|e: object_store::Error| bad(format!("Azure setting {k}: {e}")))?;
                builder = builder.with_config(cfg, v.clone());
            }
            Arc::new(builder.build().map_err(|e| bad(format!("Azure client: {e}")))?)
        } else {
            let bucket = key.trim_start_matches("s3://");
            let mut builder = object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry());
            for (k, v) in &self.options.s3 {
                let cfg: object_store::aws::AmazonS3ConfigKey = k
                    .parse()
                    .map_err(|e: object_store::Error| bad(format!("S3 setting {k}: {e}")))?;
                builder = builder.with_config(cfg, v.clone());
            }
            let s3 = Arc::new(builder.build().map_err(|e| bad(format!("S3 client: {e}")))?);
            if let Ok(mut m) = self.s3.lock() {
                m.insert(key.clone(), Arc::clone(&s3));
            }
            s3
        };
        let store = match &self.layer {
            Some(wrap) => wrap(store),
            None => store,
        };
        stores.insert(key, Arc::clone(&store));
        Ok((store, path))
    }

    fn info(uri: &str, meta: &object_store::ObjectMeta) -> ObjectInfo {
        ObjectInfo {
            uri: uri.to_owned(),
            size: meta.size,
            e_tag: meta.e_tag.clone(),
            version: meta.version.clone(),
            last_modified: meta.last_modified,
        }
    }

    async fn permit(&self) -> Result<tokio::sync::OwnedSemaphorePermit> {
        Arc::clone(&self.limit)
            .acquire_owned()
            .await
            .map_err(|_| Error::Internal("storage request limit closed".into()))
    }

    /// Reads a whole object.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI.
    pub async fn get(&self, uri: &str) -> Result<Fetched> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        let res = store.get(&path).await.map_err(|e| map_err("read", uri, e))?;
        let info = Self::info(uri, &res.meta);
        let bytes = res.bytes().await.map_err(|e| map_err("read", uri, e))?;
        Ok(Fetched { info, bytes })
    }

    /// Reads a whole object of at most `max` bytes: one over it is refused as soon as its size is known (the
    /// store's answer to the read) or, should it grow while read, as soon as the bytes read pass `max`; it is
    /// never held whole. `what` names it in the error (`table metadata`).
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI; [`Error::Corrupt`] naming the URI and the
    /// limit when it is over `max` bytes.
    pub async fn get_bounded(&self, uri: &str, max: u64, what: &str) -> Result<Fetched> {
        match self.get_within(uri, max).await? {
            Within::Read(f) => Ok(f),
            Within::Over { size } => Err(over_limit(uri, what, size, max)),
        }
    }

    /// [`Storage::get_bounded`] without the error: an object over `max` bytes is [`Within::Over`], with the
    /// size it was found to have (at least), and is never held whole. For callers to whom a larger object is a
    /// finding (a bundle's byte copy larger than its signed size), not a reason to stop.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI.
    pub async fn get_within(&self, uri: &str, max: u64) -> Result<Within> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        let res = store.get(&path).await.map_err(|e| map_err("read", uri, e))?;
        let info = Self::info(uri, &res.meta);
        if info.size > max {
            return Ok(Within::Over { size: info.size });
        }
        let mut stream = res.into_stream();
        let mut buf = Vec::with_capacity(usize::try_from(info.size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| map_err("read", uri, e))?;
            if (buf.len() + chunk.len()) as u64 > max {
                return Ok(Within::Over {
                    size: (buf.len() + chunk.len()) as u64,
                });
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Within::Read(Fetched {
            info,
            bytes: Bytes::from(buf),
        }))
    }

    /// [`Storage::get_bounded`], `None` when the object does not exist.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the URI; [`Error::Corrupt`] naming the URI and the limit when it is over `max`
    /// bytes (it is never read whole).
    pub async fn get_opt_bounded(&self, uri: &str, max: u64, what: &str) -> Result<Option<Fetched>> {
        match self.get_bounded(uri, max, what).await {
            Ok(f) => Ok(Some(f)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads a whole object, `None` when it does not exist.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the URI.
    pub async fn get_opt(&self, uri: &str) -> Result<Option<Fetched>> {
        match self.get(uri).await {
            Ok(f) => Ok(Some(f)),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads a whole object in one request, as pieces of about `piece` bytes handed out in order (the last may be
    /// shorter): an object larger than memory should hold is read once, consistently (one GET, or one open file),
    /// and never held whole. A local file is read `piece` bytes at a time from the handle opened for it (a stream
    /// would come in 8 KiB reads, each its own blocking task); a remote body's chunks are gathered into pieces.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI (at the start, or from the stream while read).
    pub async fn get_pieces(
        &self,
        uri: &str,
        piece: usize,
    ) -> Result<(ObjectInfo, futures::stream::BoxStream<'static, Result<Bytes>>)> {
        let (store, path) = self.resolve(uri)?;
        let permit = self.permit().await?;
        let res = store.get(&path).await.map_err(|e| map_err("read", uri, e))?;
        let info = Self::info(uri, &res.meta);
        let piece = piece.max(1);
        let named: Arc<str> = Arc::from(uri);
        let pieces = match res.payload {
            object_store::GetResultPayload::File(file, _) => {
                futures::stream::try_unfold((file, info.size, permit), move |(mut file, left, permit)| {
                    let named = Arc::clone(&named);
                    async move {
                        if left == 0 {
                            return Ok(None);
                        }
                        let want = usize::try_from(left).unwrap_or(usize::MAX).min(piece);
                        let read = tokio::task::spawn_blocking(move || {
                            use std::io::Read as _;
                            let mut buf = Vec::with_capacity(want);
                            (&mut file).take(want as u64).read_to_end(&mut buf).map(|_| (file, buf))
                        })
                        .await
                        .map_err(|e| Error::Internal(format!("read task for {named}: {e}")))?;
                        let (file, buf) = read.map_err(|e| {
                            let source = Box::new(e);
                            map_err(
                                "read",
                                &named,
                                object_store::Error::Generic {
                                    store: "LocalFileSystem",
                                    source,
                                },
                            )
                        })?;
                        if buf.is_empty() {
                            return Err(Error::corrupt(
                                &*named,
                                format!("ended {left} bytes before the size the store reported when it was opened"),
                            ));
                        }
                        let left = left - buf.len() as u64;
                        Ok(Some((Bytes::from(buf), (file, left, permit))))
                    }
                })
                .boxed()
            }
            object_store::GetResultPayload::Stream(stream) => {
                let first = usize::try_from(info.size).unwrap_or(usize::MAX).min(piece);
                futures::stream::try_unfold(Some((stream, permit)), move |state| {
                    let named = Arc::clone(&named);
                    async move {
                        let Some((mut stream, permit)) = state else {
                            return Ok(None);
                        };
                        let mut buf = Vec::with_capacity(first);
                        while buf.len() < piece {
                            match stream.next().await {
                                Some(chunk) => buf.extend_from_slice(&chunk.map_err(|e| map_err("read", &named, e))?),
                                None if buf.is_empty() => return Ok(None),
                                None => return Ok(Some((Bytes::from(buf), None))),
                            }
                        }
                        Ok(Some((Bytes::from(buf), Some((stream, permit)))))
                    }
                })
                .boxed()
            }
        };
        Ok((info, pieces))
    }

    /// Reads a byte range of an object.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI.
    pub async fn get_range(&self, uri: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        store.get_range(&path, range).await.map_err(|e| map_err("read", uri, e))
    }

    /// Renames the local file at `from` to `to` (both `file://` URIs in one folder) in one step (`rename(2)`):
    /// from that moment the old path no longer leads to the file, and a writer that creates the old path again
    /// creates another file. `to` must be a name no one else uses (it is replaced). Only for the local filesystem:
    /// an object store has no atomic rename.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `from` is gone; [`Error::Io`] naming the path otherwise; [`Error::BadUri`] for a
    /// URI that is not local.
    pub async fn local_rename(&self, from: &str, to: &str) -> Result<()> {
        let (a, b) = (local_path(from)?, local_path(to)?);
        let _permit = self.permit().await?;
        let uri = from.to_owned();
        tokio::task::spawn_blocking(move || match std::fs::rename(&a, &b) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotFound { uri }),
            Err(e) => Err(Error::io("rename", a, e)),
        })
        .await
        .map_err(|e| Error::Internal(format!("rename task for {from}: {e}")))?
    }

    /// Renames the local file at `from` to `to` unless `to` exists: `Ok(false)`, and nothing changes, when it
    /// does. Made as a hard link at `to` (which the filesystem refuses, in one step, when the name is taken) and
    /// the removal of `from`, so that a file another writer created at `to` meanwhile is never replaced.
    ///
    /// # Errors
    /// [`Error::NotFound`] when `from` is gone; [`Error::Io`] naming the path otherwise (a filesystem without
    /// hard links); [`Error::BadUri`] for a URI that is not local.
    pub async fn local_rename_no_clobber(&self, from: &str, to: &str) -> Result<bool> {
        let (a, b) = (local_path(from)?, local_path(to)?);
        let _permit = self.permit().await?;
        let uri = from.to_owned();
        tokio::task::spawn_blocking(move || {
            match std::fs::hard_link(&a, &b) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::NotFound { uri }),
                Err(e) => return Err(Error::io("link", b, e)),
            }
            std::fs::remove_file(&a).map_err(|e| Error::io("remove the old name after its link", a, e))?;
            Ok(true)
        })
        .await
        .map_err(|e| Error::Internal(format!("rename task for {from}: {e}")))?
    }

    /// Metadata of an object, `None` when it does not exist.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the URI.
    pub async fn head(&self, uri: &str) -> Result<Option<ObjectInfo>> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        match store.head(&path).await {
            Ok(meta) => Ok(Some(Self::info(uri, &meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(map_err("stat", uri, e)),
        }
    }

    /// Streams an object through BLAKE3; memory use does not depend on the object's size.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI.
    pub async fn hash(&self, uri: &str) -> Result<Hashed> {
        self.hash_version(uri, None).await
    }

    /// What the store says about one version of an object (`None`: the current one), `None` when that version
    /// does not exist (deleted for good, or never written).
    ///
    /// # Errors
    /// [`Error::Storage`] naming the URI and the version.
    pub async fn head_version(&self, uri: &str, version: Option<&str>) -> Result<Option<ObjectInfo>> {
        let Some(v) = version else {
            return self.head(uri).await;
        };
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        let opts = object_store::GetOptions {
            head: true,
            version: Some(v.to_owned()),
            ..Default::default()
        };
        match store.get_opts(&path, opts).await {
            Ok(res) => Ok(Some(Self::info(uri, &res.meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(map_err("stat version", &format!("{uri} (version {v})"), e)),
        }
    }

    /// Streams one version of an object (`None`: the current one) through BLAKE3, as [`Storage::hash`] does.
    ///
    /// # Errors
    /// [`Error::NotFound`] or [`Error::Storage`], naming the URI (and the version).
    pub async fn hash_version(&self, uri: &str, version: Option<&str>) -> Result<Hashed> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        let named = match version {
            Some(v) => format!("{uri} (version {v})"),
            None => uri.to_owned(),
        };
        let opts = object_store::GetOptions {
            version: version.map(ToOwned::to_owned),
            ..Default::default()
        };
        let res = store
            .get_opts(&path, opts)
            .await
            .map_err(|e| map_err("read", &named, e))?;
        let info = Self::info(uri, &res.meta);
        let mut stream = match res.payload {
            // A local file is hashed in one blocking task, memory-mapped (blake3 `update_mmap`; it
            // reads files under 16 KiB instead). As a stream it would come in 8 KiB chunks, each read
            // by its own `spawn_blocking` call (object_store `GetResult::into_stream`): 0.17x b3sum
            // against 1.0x this way, 0.7x with `update_reader` (benches/throughput.rs). Files are
            // hashed in parallel by the callers' bounded fan-out.
            // Danger: a file truncated while it is mapped kills the process with SIGBUS. Iceberg
            // data files are written once; a crash exits non-zero, which still means "do not delete".
            // A file under 16 KiB (which `update_mmap` would read through a zeroed 64 KiB buffer after opening it
            // again) is read whole from the handle object_store opened, into a buffer of its size (#24: a million
            // small files spent more time zeroing buffers than hashing).
            object_store::GetResultPayload::File(mut file, local_path) => {
                const SMALL: u64 = 16 << 10;
                const LARGE: u64 = 4 << 20;
                let size = info.size;
                let (read, digest) = tokio::task::spawn_blocking(move || {
                    let mut hasher = blake3::Hasher::new();
                    if size < SMALL {
                        use std::io::Read as _;
                        let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0) + 1);
                        file.read_to_end(&mut buf)?;
                        hasher.update(&buf);
                    } else if size < LARGE {
                        drop(file);
                        hasher.update_mmap(&local_path)?;
                    } else {
                        // A large file is hashed on every core (rayon's pool, shared with the other files in
                        // flight): a drill of bundles with a few large files each hashed them one core each,
                        // at half b3sum's rate on two cores (`benches/throughput.rs` w).
                        drop(file);
                        hasher.update_mmap_rayon(&local_path)?;
                    }
                    Ok::<_, std::io::Error>((hasher.count(), hasher.finalize()))
                })
                .await
                .map_err(|e| Error::Internal(format!("hash task for {uri}: {e}")))?
                .map_err(|e| {
                    let source = Box::new(e);
                    map_err(
                        "read",
                        uri,
                        object_store::Error::Generic {
                            store: "LocalFileSystem",
                            source,
                        },
                    )
                })?;
                return Ok(Hashed {
                    info,
                    bytes_read: read,
                    blake3: digest.to_hex().to_string(),
                });
            }
            object_store::GetResultPayload::Stream(stream) => stream,
        };
        // Hashing is CPU work and stays off the async workers: chunks are gathered into buffers of
        // up to 1 MiB (bounded memory whatever the object's size) and each buffer is hashed on the
        // rayon pool while the next reads are in flight (tokio's spawn_blocking docs point CPU work at rayon).
        const BUFFER: usize = 1 << 20;
        let hash_on_rayon = |mut hasher: blake3::Hasher, buf: Vec<u8>| async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            rayon::spawn(move || {
                hasher.update(&buf);
                let _ = tx.send(hasher);
            });
            rx.await
                .map_err(|_| Error::Internal(format!("hash task for {uri} ended without a result")))
        };
        let mut hasher = blake3::Hasher::new();
        let mut read = 0u64;
        let mut buf: Vec<u8> = Vec::with_capacity(BUFFER);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| map_err("read", uri, e))?;
            read += chunk.len() as u64;
            buf.extend_from_slice(&chunk);
            if buf.len() >= BUFFER {
                hasher = hash_on_rayon(hasher, std::mem::replace(&mut buf, Vec::with_capacity(BUFFER))).await?;
            }
        }
        if !buf.is_empty() {
            hasher = hash_on_rayon(hasher, buf).await?;
        }
        Ok(Hashed {
            info,
            bytes_read: read,
            blake3: hasher.finalize().to_hex().to_string(),
        })
    }

    /// Writes an object only if it does not exist yet (write-once).
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when it exists; [`Error::Storage`] otherwise.
    pub async fn put_new(&self, uri: &str, bytes: Bytes) -> Result<ObjectInfo> {
        self.put_mode(uri, bytes, PutMode::Create).await
    }

    /// Writes (or replaces) an object.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the URI.
    pub async fn put(&self, uri: &str, bytes: Bytes) -> Result<ObjectInfo> {
        self.put_mode(uri, bytes, PutMode::Overwrite).await
    }

    /// Writes (or replaces) an object from chunks made one at a time by `next` (`None`: the end), so that a large
    /// object is never held whole: one request while it is small, a multipart upload once it passes 8 MiB
    /// (object_store's `BufWriter`). Returns its size.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the URI (the upload is aborted), or the error `next` returned.
    pub async fn put_chunks(&self, uri: &str, mut next: impl FnMut() -> Option<Result<Bytes>>) -> Result<u64> {
        use tokio::io::AsyncWriteExt as _;
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        let mut w = object_store::buffered::BufWriter::with_capacity(store, path, 8 << 20);
        let mut size = 0u64;
        let written: Result<()> = async {
            while let Some(chunk) = next() {
                let chunk = chunk?;
                size += chunk.len() as u64;
                w.put(chunk).await.map_err(|e| map_err("write", uri, e))?;
            }
            w.shutdown().await.map_err(|e| {
                let source = Box::new(e);
                map_err(
                    "write",
                    uri,
                    object_store::Error::Generic {
                        store: "upload",
                        source,
                    },
                )
            })
        }
        .await;
        if let Err(e) = written {
            let _ = w.abort().await;
            return Err(e);
        }
        Ok(size)
    }

    async fn put_mode(&self, uri: &str, bytes: Bytes, mode: PutMode) -> Result<ObjectInfo> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        let size = bytes.len() as u64;
        let res = store
            .put_opts(
                &path,
                PutPayload::from_bytes(bytes),
                PutOptions {
                    mode,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| map_err("write", uri, e))?;
        Ok(ObjectInfo {
            uri: uri.to_owned(),
            size,
            e_tag: res.e_tag,
            version: res.version,
            last_modified: crate::clock::Clock::now(&crate::clock::SystemClock),
        })
    }

    /// Deletes one object. Only the deleter calls this, and only for objects of an approved inventory.
    ///
    /// `LAKEDRILL_FAILPOINTS` (test-only, see [`Failpoints`]) can make a delete fail before it is sent,
    /// lose its response after it took effect, or abort the process after a number of deletes; a
    /// failpoint can only make the deleter less certain, never delete more.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the object is already absent; [`Error::NotSent`] when its URI cannot be resolved
    /// (nothing was asked of the store); [`Error::Storage`] otherwise.
    pub async fn delete(&self, uri: &str) -> Result<()> {
        let (store, path) = self.resolve(uri).map_err(|e| Error::not_sent("delete", uri, e))?;
        let _permit = self.permit().await.map_err(|e| Error::not_sent("delete", uri, e))?;
        let n = self.delete_failpoint_before(uri).await?;
        self.requests
            .single_deletes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        store.delete(&path).await.map_err(|e| map_err("delete", uri, e))?;
        self.delete_failpoint_after(uri, n)
    }

    /// Removes a probe object lakedrill itself just wrote (never a table file: a clock probe): no failpoint
    /// applies and it is not counted among the deleter's requests.
    ///
    /// # Errors
    /// [`Error::Storage`] naming it.
    pub async fn delete_probe(&self, uri: &str) -> Result<()> {
        let (store, path) = self.resolve(uri)?;
        let _permit = self.permit().await?;
        store.delete(&path).await.map_err(|e| map_err("delete", uri, e))
    }

    /// The delete requests sent so far through this storage, by kind.
    #[must_use]
    pub fn request_counts(&self) -> RequestCounts {
        use std::sync::atomic::Ordering::SeqCst;
        RequestCounts {
            delete_objects: self.requests.delete_objects.load(SeqCst),
            single_deletes: self.requests.single_deletes.load(SeqCst),
            recheck_listings: self.requests.recheck_listings.load(SeqCst),
            recheck_heads: self.requests.recheck_heads.load(SeqCst),
            deletes_wall_us: self.requests.deletes_wall_us.load(SeqCst),
            rechecks_wall_us: self.requests.rechecks_wall_us.load(SeqCst),
        }
    }

    /// Adds the wall-clock time of one batch's delete requests (`recheck: false`) or its re-checks (`true`) to
    /// [`RequestCounts`].
    pub fn note_request_phase(&self, recheck: bool, took: std::time::Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let counter = if recheck {
            &self.requests.rechecks_wall_us
        } else {
            &self.requests.deletes_wall_us
        };
        counter.fetch_add(us, std::sync::atomic::Ordering::SeqCst);
    }

    /// [`Storage::head_version`] for the re-check after a delete, counted in [`RequestCounts::recheck_heads`].
    ///
    /// # Errors
    /// As [`Storage::head_version`].
    pub async fn recheck_head(&self, uri: &str, version: Option<&str>) -> Result<Option<ObjectInfo>> {
        self.requests
            .recheck_heads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.head_version(uri, version).await
    }

    /// Which of `uris` exist now, found by one listing instead of one HEAD each (#24: a purge re-checks every
    /// object after its delete, and 1,000 HEADs per `DeleteObjects` request were most of an S3 purge's requests).
    /// The keys are listed in key order from just before the smallest (S3 `StartAfter`) under their common
    /// folder, until past the largest. Answers, in the order of `uris`: `Some(Some(info))` listed (present),
    /// `Some(None)` absent (the listing passed its key without it), `None` not decided, for the caller to HEAD:
    /// every key when the URIs are not all of one store and bucket, or the listing came back out of key order
    /// (only S3's listing is ordered; call this only there); the keys beyond where the listing stopped after
    /// passing `budget` objects that are not in `uris`.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the folder listed.
    pub async fn list_presence(&self, uris: &[&str], budget: usize) -> Result<Vec<Option<Option<ObjectInfo>>>> {
        let mut out: Vec<Option<Option<ObjectInfo>>> = vec![None; uris.len()];
        let Some(first) = uris.first() else {
            return Ok(out);
        };
        let (store, first_path) = self.resolve(first)?;
        let base = first.strip_suffix(first_path.as_ref()).unwrap_or(first).to_owned();
        // (key, index in `uris`), sorted by key as S3 lists them (UTF-8 byte order).
        let mut keys: Vec<(String, usize)> = Vec::with_capacity(uris.len());
        for (i, uri) in uris.iter().enumerate() {
            let (_, path) = self.resolve(uri)?;
            if uri.strip_suffix(path.as_ref()) != Some(base.as_str()) {
                return Ok(out);
            }
            keys.push((path.as_ref().to_owned(), i));
        }
        keys.sort_unstable();
        let (lowest, highest) = (keys[0].0.clone(), keys[keys.len() - 1].0.clone());
        // The folder every key is under, and a start strictly before the smallest key.
        let mut common = lowest.bytes().zip(highest.bytes()).take_while(|(a, b)| a == b).count();
        // Keys that share the first byte of a multi-byte character (`é`, `è`) part inside it.
        while !lowest.is_char_boundary(common) {
            common -= 1;
        }
        let folder = lowest[..common].rfind('/').map(|at| &lowest[..at]);
        let mut cut = lowest.clone();
        cut.pop();
        let offset = Path::parse(&cut).ok().filter(|o| o.as_ref() < lowest.as_str());
        let prefix = match folder.map(Path::parse).transpose() {
            Ok(p) => p,
            Err(_) => return Ok(out),
        };
        self.requests
            .recheck_listings
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _permit = self.permit().await?;
        let mut listed = match &offset {
            Some(o) => store.list_with_offset(prefix.as_ref(), o),
            None => store.list(prefix.as_ref()),
        };
        let named = || format!("{base}{}", folder.unwrap_or_default());
        let mut next = 0_usize; // keys[..next] are decided
        let mut previous: Option<String> = None;
        let mut foreign = 0_usize;
        loop {
            let meta = match listed.try_next().await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => return Err(map_err("list", &named(), e)),
            };
            let at = meta.location.as_ref().to_owned();
            if previous.as_deref().is_some_and(|p| p >= at.as_str()) {
                // Not in key order: nothing can be concluded from what was not seen.
                return Ok(vec![None; uris.len()]);
            }
            // Every key before this one that was not listed is absent.
            while next < keys.len() && keys[next].0 < at {
                out[keys[next].1] = Some(None);
                next += 1;
            }
            let matched = next;
            while next < keys.len() && keys[next].0 == at {
                out[keys[next].1] = Some(Some(Self::info(uris[keys[next].1], &meta)));
                next += 1;
            }
            if next == matched {
                foreign += 1;
            }
            if next == keys.len() {
                return Ok(out);
            }
            if foreign > budget {
                // Stopped here: what lies beyond is not decided.
                return Ok(out);
            }
            previous = Some(at);
        }
        // The listing ended: every key not listed is absent, up to the first key the bucket holds beyond the
        // last one listed (one more request: object_store ends a listing at a page without a continuation token,
        // even one marked truncated). Keys from there on are not decided.
        drop(_permit);
        let listed_prefix = prefix.as_ref().map_or_else(String::new, |p| format!("{}/", p.as_ref()));
        let after = previous.as_deref().or(offset.as_ref().map(|o| o.as_ref()));
        let beyond = if self.s3_listing_checked(first) {
            self.s3_first_key_after(first, &listed_prefix, after).await?
        } else {
            None
        };
        for (key, i) in &keys[next..] {
            if beyond.as_deref().is_some_and(|b| key.as_str() >= b) {
                break;
            }
            out[*i] = Some(None);
        }
        Ok(out)
    }

    /// Lists every object under a prefix URI (recursively), sorted by URI.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the prefix.
    pub async fn list(&self, prefix_uri: &str) -> Result<Vec<ObjectInfo>> {
        let mut out = self.list_map(prefix_uri, Some).await?;
        out.sort_by(|a, b| a.uri.cmp(&b.uri));
        Ok(out)
    }

    /// Lists every object under a prefix URI (recursively) like [`Storage::list`], handing each to `each` as the
    /// store yields it and keeping what `each` returns, in the store's order (not sorted). Nothing else of the
    /// listing is held: a caller that needs only part of each entry (`plan`'s table listing: a relative path, a
    /// size and a time) never holds the store's records and the full [`ObjectInfo`]s of every object beside it.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the prefix.
    pub async fn list_map<T>(&self, prefix_uri: &str, mut each: impl FnMut(ObjectInfo) -> Option<T>) -> Result<Vec<T>> {
        let (store, path) = self.resolve(prefix_uri)?;
        let base = prefix_uri.strip_suffix(path.as_ref()).unwrap_or(prefix_uri).to_owned();
        let sep = if base.ends_with('/') { "" } else { "/" };
        let _permit = self.permit().await?;
        let prefix = if path.as_ref().is_empty() { None } else { Some(&path) };
        let mut metas = if self.walks_itself(prefix_uri) {
            local_list(&path)
        } else {
            store.list(prefix)
        };
        // On S3, keys come in byte order: one that does not follow the one before means pages repeated (a
        // provider repeating its continuation token would list for ever) or went back; and where the listing
        // ends, one more request checks that nothing lies beyond ([`Storage::s3_first_key_after`]).
        let checked = self.s3_listing_checked(prefix_uri);
        let mut last: Option<String> = None;
        let mut out = Vec::new();
        loop {
            match metas.try_next().await {
                Ok(Some(m)) => {
                    if checked {
                        let key = m.location.as_ref();
                        if let Some(l) = last.as_deref().filter(|l| *l >= key) {
                            return Err(Self::s3_listing_went_back(prefix_uri, l, key));
                        }
                        last = Some(key.to_owned());
                    }
                    let info = ObjectInfo {
                        uri: format!("{base}{sep}{}", m.location),
                        size: m.size,
                        e_tag: m.e_tag,
                        version: m.version,
                        last_modified: m.last_modified,
                    };
                    out.extend(each(info));
                }
                Ok(None) => break,
                // A prefix that does not exist lists nothing (whatever was yielded before it is dropped).
                Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
                Err(e) => return Err(map_err("list", prefix_uri, e)),
            }
        }
        drop(_permit);
        if checked {
            let listed_prefix = if path.as_ref().is_empty() {
                String::new()
            } else {
                format!("{}/", path.as_ref())
            };
            self.s3_listing_reached_its_end(prefix_uri, &listed_prefix, last.as_deref())
                .await?;
        }
        Ok(out)
    }

    /// Whether a listing under `uri` walks the local folder itself ([`local_list`], [`Storage::list_deferred`])
    /// rather than through object_store: a `file://` URI on a storage without a fault layer (`drill faults` lists
    /// through its layer, so that its faults apply).
    fn walks_itself(&self, uri: &str) -> bool {
        uri.starts_with("file:///") && self.layer.is_none()
    }

    /// Lists every object under a prefix URI (recursively) as its path relative to the prefix and its size and
    /// modification time (epoch ms), handed to `each` in the store's order. On the local filesystem the stat of
    /// a plain file (not a symlink, a UTF-8 name) is **deferred**: `each` gets `None` for it, and the caller
    /// stats those it needs with [`Storage::stat_deferred`]. The entries are what [`Storage::list_map`] lists
    /// (the same walk, names and skipped entries); a deferred file removed before its stat is still listed here.
    /// Other stores list sizes and times with the names: nothing is deferred.
    ///
    /// Why: `plan` needs the time and size only of objects the table's current snapshot does not reference (a
    /// data file's `statx` was 16 % of plan's CPU on a 1,000-snapshot Spark-written history, and at 10M files
    /// the stats read inodes from the disk).
    ///
    /// # Errors
    /// [`Error::Storage`] naming the prefix.
    pub async fn list_deferred<T: Send + 'static>(
        &self,
        prefix_uri: &str,
        mut each: impl FnMut(String, Option<(u64, i64)>) -> T + Send + 'static,
    ) -> Result<Vec<T>> {
        if !self.walks_itself(prefix_uri) {
            return self
                .list_map(prefix_uri, move |o| {
                    let rel = o.uri.strip_prefix(prefix_uri)?.trim_start_matches('/').to_owned();
                    Some(each(rel, Some((o.size, o.last_modified.timestamp_millis()))))
                })
                .await;
        }
        let (_, path) = self.resolve(prefix_uri)?;
        let _permit = self.permit().await?;
        let walked = tokio::task::spawn_blocking(move || local_list_deferred(&path, each))
            .await
            .map_err(|e| Error::Internal(format!("the listing of {prefix_uri} failed: {e}")))?;
        match walked {
            Ok(out) => Ok(out),
            Err(object_store::Error::NotFound { .. }) => Ok(Vec::new()),
            Err(e) => Err(map_err("list", prefix_uri, e)),
        }
    }

    /// The size and modification time (epoch ms) of each path (relative to `prefix_uri`) whose stat
    /// [`Storage::list_deferred`] deferred, in the order given, stat'ed in parallel; `None` for a file gone
    /// since (what the listing would have skipped). Stats what the listing would have: the file itself, not a
    /// link's target.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the file that could not be stat'ed; [`Error::Internal`] for a prefix that is not
    /// local (nothing is deferred there).
    pub async fn stat_deferred(&self, prefix_uri: &str, rels: Vec<String>) -> Result<Vec<Option<(u64, i64)>>> {
        if rels.is_empty() {
            return Ok(Vec::new());
        }
        if !self.walks_itself(prefix_uri) {
            return Err(Error::Internal(format!(
                "deferred stats asked of {prefix_uri}, which is not a local folder"
            )));
        }
        let (_, path) = self.resolve(prefix_uri)?;
        let _permit = self.permit().await?;
        let prefix = prefix_uri.to_owned();
        tokio::task::spawn_blocking(move || {
            use rayon::prelude::*;
            let folder = format!("/{}", path.as_ref());
            rels.par_iter()
                .with_min_len(64)
                .map(|rel| {
                    let file = std::path::Path::new(&folder).join(rel);
                    let failed = |e: std::io::Error| {
                        let source = object_store::Error::Generic {
                            store: "LocalFileSystem",
                            source: Box::new(e),
                        };
                        map_err("stat", &format!("{prefix}/{rel}"), source)
                    };
                    match std::fs::symlink_metadata(&file) {
                        Ok(meta) => {
                            let modified = meta.modified().map_err(failed)?;
                            Ok(Some((meta.len(), DateTime::<Utc>::from(modified).timestamp_millis())))
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                        Err(e) => Err(failed(e)),
                    }
                })
                .collect()
        })
        .await
        .map_err(|e| Error::Internal(format!("the stats under {prefix_uri} failed: {e}")))?
    }
}

/// [`Storage::list_deferred`] on the local filesystem, on the calling (blocking) thread: [`local_list`]'s walk
/// and entries, with the stat of a plain file deferred (`None`) and the path relative to `prefix`.
fn local_list_deferred<T>(
    prefix: &Path,
    mut each: impl FnMut(String, Option<(u64, i64)>) -> T,
) -> object_store::Result<Vec<T>> {
    use object_store::path::PathPart;
    let root = std::path::PathBuf::from(format!("/{}", prefix.as_ref()));
    let relative = |location: &str| -> Option<String> {
        location
            .strip_prefix(prefix.as_ref())
            .map(|r| r.trim_start_matches('/').to_owned())
    };
    // Whether each folder on the way down to the current entry (by depth) is a segment `Path::parse` takes: a
    // file's path is then checked by its name alone (parsing every whole path was a third of the walk's CPU).
    let mut folders: Vec<bool> = Vec::new();
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root).min_depth(1).follow_links(true) {
        let plain = match &entry {
            Ok(e) if e.file_type().is_dir() => {
                folders.truncate(e.depth() - 1);
                folders.push(e.file_name().to_str().is_some_and(|n| PathPart::parse(n).is_ok()));
                continue;
            }
            Ok(e) if e.file_type().is_file() && !e.path_is_symlink() => e
                .path()
                .to_str()
                .zip(e.file_name().to_str())
                .map(|(p, name)| (p, name, e.depth())),
            _ => None,
        };
        if let Some((p, name, depth)) = plain {
            let valid =
                folders.get(..depth - 1).is_some_and(|f| f.iter().all(|ok| *ok)) && PathPart::parse(name).is_ok();
            let rel = if valid {
                p.strip_prefix('/').and_then(relative)
            } else {
                // What object_store says of it: its error for the path's first bad segment.
                relative(Path::parse(p)?.as_ref())
            };
            if staging_name(name) {
                continue;
            }
            if let Some(rel) = rel {
                out.push(each(rel, None));
            }
        } else if let Some(meta) = local_entry(entry, None)?
            && let Some(rel) = relative(meta.location.as_ref())
        {
            out.push(each(rel, Some((meta.size, meta.last_modified.timestamp_millis()))));
        }
    }
    Ok(out)
}

/// Whether a file name is an upload's staging file (`name#123`), which object_store's local listing skips.
fn staging_name(name: &str) -> bool {
    name.split_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether object_store's local listing lists a file at `location`: it has a name, and the name is not an
/// upload's staging file (`name#123`).
fn listed_name(location: &Path) -> bool {
    location.filename().is_some_and(|f| !staging_name(f))
}

/// What `object_store`'s `LocalFileSystem::list` yields for `prefix` (relative to the filesystem root, as
/// [`Storage`]'s local client is), with one `statx` per file instead of three. object_store walks with
/// `walkdir` following symlinks, then for each entry stats its path without following links (to skip a broken
/// link, which the walk already skipped), stats it again to ask whether it is a file (which the walk's entry
/// already tells: for a followed link, its target's type), and a third time for its metadata. On a table of
/// 100k files the three were half of `plan`'s system time (`benches/RESULTS.md`, g). Everything else is
/// object_store's: the same walk (order, symlinks followed, loops refused), the same locations (what
/// [`Path::from_absolute_path`] gives), the same skipped names (an upload's `name#123` staging file), the same
/// metadata and ETag (inode, mtime in µs, size), a missing entry skipped, a name that is not UTF-8 or holds a
/// control character refused. Tests compare it with object_store's listing on the same folder.
///
/// How it runs: one blocking thread reads the folders (sequential by nature) 1,024 entries at a time and hands
/// each chunk's stats to the rayon pool at once, so the next chunk is read while they run; at most
/// [`LISTING_CHUNKS_IN_FLIGHT`] chunks wait for the stream's reader. On Linux a file is stat'ed by its name in
/// its folder, opened once per chunk (`O_PATH`), instead of by its whole path resolved from `/` again (that
/// lookup was a tenth of `plan`'s CPU on an engine-written history). A walker that fails ends the stream with
/// an error, never with a shorter listing.
fn local_list(prefix: &Path) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
    const CHUNK: usize = 1024;
    type Chunk = Vec<object_store::Result<object_store::ObjectMeta>>;
    let generic = |what: &str, source: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
        store: "LocalFileSystem",
        source: format!("{what}: {source}").into(),
    };
    let root = std::path::PathBuf::from(format!("/{}", prefix.as_ref()));
    let (send, chunks) = tokio::sync::mpsc::channel::<tokio::sync::oneshot::Receiver<Chunk>>(LISTING_CHUNKS_IN_FLIGHT);
    let walker = tokio::task::spawn_blocking(move || {
        use rayon::prelude::*;
        let mut walk = walkdir::WalkDir::new(root).min_depth(1).follow_links(true).into_iter();
        loop {
            let entries: Vec<_> = walk.by_ref().take(CHUNK).collect();
            if entries.is_empty() {
                return;
            }
            let last = entries.len() < CHUNK;
            let entries = with_folders(entries);
            let (done, stats) = tokio::sync::oneshot::channel();
            // A reader that went away (the listing was dropped) stops the walk.
            if send.blocking_send(stats).is_err() {
                return;
            }
            rayon::spawn(move || {
                let chunk: Chunk = entries
                    .into_par_iter()
                    .with_min_len(64)
                    .filter_map(|(entry, folder)| local_entry(entry, folder.as_deref()).transpose())
                    .collect();
                let _ = done.send(chunk);
            });
            if last {
                return;
            }
        }
    });
    let state = (chunks, Some(walker), std::collections::VecDeque::new());
    futures::stream::try_unfold(state, move |(mut chunks, mut walker, mut chunk)| async move {
        loop {
            match chunk.pop_front() {
                Some(Err(e)) => return Err(e),
                Some(Ok(meta)) => return Ok(Some((meta, (chunks, walker, chunk)))),
                None => {}
            }
            match chunks.recv().await {
                Some(stats) => {
                    chunk = stats
                        .await
                        .map_err(|e| generic("the stats of a listing chunk were lost", Box::new(e)))?
                        .into();
                }
                None => {
                    // The walk ended: by finishing, or by failing (then the listing fails too).
                    if let Some(w) = walker.take() {
                        w.await.map_err(|e| generic("the listing's walk failed", Box::new(e)))?;
                    }
                    return Ok(None);
                }
            }
        }
    })
    .boxed()
}

/// How many chunks of 1,024 stat'ed entries [`local_list`] may hold ahead of its reader.
const LISTING_CHUNKS_IN_FLIGHT: usize = 8;

/// The folder a file entry was read from, open for stats by name (Linux); `None` where the entry is stat'ed by
/// its path (a followed symlink, anything that is not a file, a folder that could not be opened, other systems).
#[cfg(target_os = "linux")]
type FolderFd = rustix::fd::OwnedFd;
#[cfg(not(target_os = "linux"))]
type FolderFd = ();
type Folder = Option<Arc<FolderFd>>;

type WalkEntry = std::result::Result<walkdir::DirEntry, walkdir::Error>;

/// Each entry of one chunk with its [`Folder`], each folder opened once.
fn with_folders(entries: Vec<WalkEntry>) -> Vec<(WalkEntry, Folder)> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, OFlags};
        let mut open: HashMap<std::path::PathBuf, Folder> = HashMap::new();
        entries
            .into_iter()
            .map(|entry| {
                let folder = match &entry {
                    Ok(e) if e.file_type().is_file() && !e.path_is_symlink() => e.path().parent().and_then(|dir| {
                        if let Some(f) = open.get(dir) {
                            return f.clone();
                        }
                        let f =
                            rustix::fs::open(dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
                                .ok()
                                .map(Arc::new);
                        open.insert(dir.to_owned(), f.clone());
                        f
                    }),
                    _ => None,
                };
                (entry, folder)
            })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        entries.into_iter().map(|e| (e, None)).collect()
    }
}

/// Size, inode and modification time of a file entry by its name in `folder` (`statx` without following a
/// link, what the walk's own `symlink_metadata` gives). `None` where that cannot answer for certain (no
/// folder, an error other than a missing file, fields the kernel did not fill): the caller stats the path.
#[cfg(target_os = "linux")]
fn stat_in_folder(
    entry: &walkdir::DirEntry,
    folder: Option<&FolderFd>,
) -> Option<std::io::Result<(u64, u64, std::time::SystemTime)>> {
    use rustix::fs::{AtFlags, StatxFlags};
    let want = StatxFlags::INO | StatxFlags::SIZE | StatxFlags::MTIME;
    match rustix::fs::statx(folder?, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW, want) {
        Ok(st) if StatxFlags::from_bits_retain(st.stx_mask).contains(want) => {
            let t = st.stx_mtime;
            // What std's `Metadata::modified` gives for these seconds and nanoseconds.
            let modified = if t.tv_sec >= 0 {
                std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(t.tv_sec.unsigned_abs(), t.tv_nsec))
            } else {
                std::time::UNIX_EPOCH
                    .checked_sub(std::time::Duration::from_secs(t.tv_sec.unsigned_abs()))
                    .and_then(|s| s.checked_add(std::time::Duration::from_nanos(t.tv_nsec.into())))
            }?;
            Some(Ok((st.stx_ino, st.stx_size, modified)))
        }
        Err(e) if e == rustix::io::Errno::NOENT => Some(Err(std::io::ErrorKind::NotFound.into())),
        _ => None,
    }
}

/// One entry of [`local_list`]'s walk: `None` for what object_store's listing leaves out (folders, anything
/// that is not a file, a missing entry, a staging name), an error where it fails.
fn local_entry(entry: WalkEntry, folder: Option<&FolderFd>) -> object_store::Result<Option<object_store::ObjectMeta>> {
    let generic = |source: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
        store: "LocalFileSystem",
        source,
    };
    let entry = match entry {
        Ok(e) => e,
        Err(e) if e.io_error().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) => return Ok(None),
        Err(e) => return Err(generic(Box::new(e))),
    };
    if !entry.file_type().is_file() {
        return Ok(None);
    }
    // `from_absolute_path` goes through a `file:` URL and back (percent-encoding every name, then decoding it);
    // for a path that is UTF-8 that gives the path itself, parsed as `Path::parse` parses it.
    let location = match entry.path().to_str() {
        Some(p) => Path::parse(p)?,
        None => Path::from_absolute_path(entry.path())?,
    };
    if !listed_name(&location) {
        return Ok(None);
    }
    #[cfg(target_os = "linux")]
    let in_folder = stat_in_folder(&entry, folder);
    #[cfg(not(target_os = "linux"))]
    let in_folder: Option<std::io::Result<(u64, u64, std::time::SystemTime)>> = {
        let _ = folder;
        None
    };
    let (inode, size, modified) = match in_folder {
        Some(Ok(stat)) => stat,
        Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        _ => {
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) if e.io_error().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) => return Ok(None),
                Err(e) => return Err(generic(format!("cannot read the metadata of {location}: {e}").into())),
            };
            let modified = meta.modified().map_err(|e| generic(Box::new(e)))?;
            (std::os::unix::fs::MetadataExt::ino(&meta), meta.len(), modified)
        }
    };
    let micros = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    Ok(Some(object_store::ObjectMeta {
        e_tag: Some(format!("\"{inode:x}-{micros:x}-{size:x}\"")),
        location,
        last_modified: modified.into(),
        size,
        version: None,
    }))
}

/// The symlink rule of the local filesystem (README "Symlinks"): an object under a table root is
/// read, hashed or deleted only if its path **with symlinks resolved** lies under the table root
/// with symlinks resolved. A symlink that stays inside the table is followed; one that leaves it
/// (a data file, a partition folder, a manifest list linked to a copy elsewhere) is reported by
/// [`Confined::escape`] and the caller turns it into a finding or a refusal. Lexical checks
/// ([`crate::model::location`]) cannot see this: `t/data/x.parquet` is under `t/` whatever `t/data` links to.
///
/// Only `file://` URIs are checked; on S3 and in memory there are no symlinks. The check and the
/// later open are two system calls: a link swapped between them is not caught (lakedrill does not
/// defend against a writer racing it on the table's own filesystem).
#[derive(Debug, Clone)]
pub struct Confined {
    /// The root's canonical URI and its local path with symlinks resolved (`None`: not local).
    root: Option<(String, std::path::PathBuf)>,
}

/// The local path of a `file://` URI.
fn local_path(uri: &str) -> Result<std::path::PathBuf> {
    uri.strip_prefix("file://")
        .filter(|p| p.starts_with('/'))
        .map(std::path::PathBuf::from)
        .ok_or_else(|| Error::BadUri {
            uri: uri.to_owned(),
            reason: "not a local file (file:///…): only the local filesystem renames".to_owned(),
        })
}

/// `path` with symlinks resolved; for a path (or a tail of it) that does not exist, the longest
/// existing ancestor is resolved and the rest appended, so a missing file under a linked folder
/// still resolves to where the folder points.
fn resolve_existing(path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        match std::fs::canonicalize(&cur) {
            Ok(mut resolved) => {
                for t in tail.iter().rev() {
                    resolved.push(t);
                }
                return Ok(resolved);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let Some(name) = cur.file_name().map(std::ffi::OsStr::to_os_string) else {
                    return Err(e);
                };
                tail.push(name);
                if !cur.pop() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

impl Storage {
    /// The table root `root_uri` with symlinks resolved, for [`Confined::escape`].
    ///
    /// # Errors
    /// [`Error::Io`] when the root's folders cannot be examined.
    pub async fn confine(&self, root_uri: &str) -> Result<Confined> {
        let Some(path) = root_uri.strip_prefix("file://") else {
            return Ok(Confined { root: None });
        };
        let path = std::path::PathBuf::from(path);
        let resolved = tokio::task::spawn_blocking(move || resolve_existing(&path).map_err(|e| (path, e)))
            .await
            .map_err(|e| Error::Internal(format!("resolve task for {root_uri}: {e}")))?
            .map_err(|(p, e)| Error::io("resolve symlinks of the table root", p, e))?;
        Ok(Confined {
            root: Some((root_uri.trim_end_matches('/').to_owned(), resolved)),
        })
    }
}

impl Confined {
    /// `Some(resolved target)` when the local object at `uri`, with symlinks resolved, is not under
    /// the resolved table root; `None` when it is (or is not local). Nothing is opened.
    ///
    /// # Errors
    /// [`Error::Io`] when the object's folders cannot be examined (other than "does not exist").
    pub async fn escape(&self, uri: &str) -> Result<Option<String>> {
        let Some((root_uri, root)) = &self.root else {
            return Ok(None);
        };
        let Some(path) = uri.strip_prefix("file://") else {
            // A non-local object under a local root is not under it.
            return Ok(Some(uri.to_owned()));
        };
        if !crate::model::location::is_under(uri, root_uri) {
            return Ok(Some(uri.to_owned()));
        }
        let path = std::path::PathBuf::from(path);
        let resolved = tokio::task::spawn_blocking(move || resolve_existing(&path).map_err(|e| (path, e)))
            .await
            .map_err(|e| Error::Internal(format!("resolve task for {uri}: {e}")))?
            .map_err(|(p, e)| Error::io("resolve symlinks", p, e))?;
        if resolved.starts_with(root) && resolved != *root {
            Ok(None)
        } else {
            Ok(Some(resolved.display().to_string()))
        }
    }

    /// `Some(resolved path)` when the local object at `uri` reaches its file through a symlink: its path with
    /// symlinks resolved is not the resolved table root joined with its path below the root (a linked folder on
    /// the way or a link as the file itself, whether it stays inside the table or leaves it); `None` when the path
    /// is the file itself (or is not local). A removal through such a path removes another path's file: a
    /// folder `alias` linked to `data` in the same table lists `data/f` twice, and `alias/f` is the same file.
    /// Nothing is opened.
    ///
    /// # Errors
    /// [`Error::Io`] when the object's folders cannot be examined (other than "does not exist").
    pub async fn through_link(&self, uri: &str) -> Result<Option<String>> {
        let Some((root_uri, root)) = &self.root else {
            return Ok(None);
        };
        let Some(rel) = uri
            .strip_prefix(root_uri.as_str())
            .and_then(|r| r.strip_prefix('/'))
            .filter(|r| !r.is_empty() && uri.starts_with("file://"))
        else {
            // Not under the root (or not local under a local root): it cannot be itself below the root.
            return Ok(Some(uri.to_owned()));
        };
        let expected = root.join(rel);
        let path = std::path::PathBuf::from(uri.trim_start_matches("file://"));
        let resolved = tokio::task::spawn_blocking(move || resolve_existing(&path).map_err(|e| (path, e)))
            .await
            .map_err(|e| Error::Internal(format!("resolve task for {uri}: {e}")))?
            .map_err(|(p, e)| Error::io("resolve symlinks", p, e))?;
        Ok((resolved != expected).then(|| resolved.display().to_string()))
    }
}

/// What [`Confined::outside`] found: the listed folders and files (relative to the table root) whose paths with
/// symlinks resolved lie outside the resolved root, each with where it resolves to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outside {
    /// Linked folders that leave the table: everything listed under one is outside.
    pub folders: std::collections::BTreeMap<String, String>,
    /// Linked files that leave the table.
    pub files: std::collections::BTreeMap<String, String>,
    /// Linked folders that stay inside the table, each with where it resolves to (relative to the resolved
    /// root): everything listed under one is listed a second time under its real path.
    pub inside_folders: std::collections::BTreeMap<String, String>,
    /// Linked files that stay inside the table, each with where it resolves to (relative to the resolved root).
    pub inside_files: std::collections::BTreeMap<String, String>,
}

impl Outside {
    /// Where the listed object `rel` resolves to when that is outside the table root: its own link, or the
    /// nearest linked folder above it that leaves the table.
    #[must_use]
    pub fn target(&self, rel: &str) -> Option<String> {
        if let Some(t) = self.files.get(rel) {
            return Some(t.clone());
        }
        if self.folders.is_empty() {
            return None;
        }
        let mut at = rel;
        while let Some((folder, _)) = at.rsplit_once('/') {
            if let Some(t) = self.folders.get(folder) {
                return Some(format!("{t}{}", &rel[folder.len()..]));
            }
            at = folder;
        }
        None
    }

    /// Where the listed object `rel` really is, relative to the table root, when it reaches its file through a
    /// link that stays inside the table: its own link, or the nearest linked folder above it. `None` when `rel`
    /// is its file itself, or when it resolves outside the table ([`Outside::target`]).
    #[must_use]
    pub fn linked(&self, rel: &str) -> Option<String> {
        if self.target(rel).is_some() {
            return None;
        }
        if let Some(t) = self.inside_files.get(rel) {
            return Some(t.clone());
        }
        if self.inside_folders.is_empty() {
            return None;
        }
        let mut at = rel;
        while let Some((folder, _)) = at.rsplit_once('/') {
            if let Some(t) = self.inside_folders.get(folder) {
                return Some(format!("{t}{}", &rel[folder.len()..]));
            }
            at = folder;
        }
        None
    }
}

/// Where a link found by [`Confined::outside`] resolves to.
enum Link {
    /// Outside the resolved root: the resolved path.
    Outside(String),
    /// Under the resolved root: the resolved path relative to it.
    Inside(String),
}

impl Confined {
    /// Which of a table listing's folders and files lie outside the table root once symlinks are resolved (the
    /// listing follows links, so a linked folder's files are listed as the table's). `folders` are the listing's
    /// folders, relative to the root (their ancestors are added here); `files` the listed files that may be links
    /// themselves (on the local filesystem, those listed with their stat). Only what is a link is resolved: one
    /// `lstat` per folder and per such file, so a plan pays a stat per folder, not per file. Nothing is opened;
    /// an entry gone meanwhile is skipped. Not local: nothing is outside.
    ///
    /// # Errors
    /// [`Error::Io`] naming the folder or file that could not be examined.
    pub async fn outside(&self, folders: Vec<String>, files: Vec<String>) -> Result<Outside> {
        let Some((root_uri, resolved_root)) = self.root.clone() else {
            return Ok(Outside::default());
        };
        let Some(base) = root_uri.strip_prefix("file://").map(std::path::PathBuf::from) else {
            return Ok(Outside::default());
        };
        tokio::task::spawn_blocking(move || {
            // A link is outside unless its resolved path is under the resolved root (as `escape`); one under it
            // is inside, with its path below the root.
            let leaves = |path: &std::path::Path| -> std::result::Result<Option<Link>, Error> {
                match std::fs::symlink_metadata(path) {
                    Ok(m) if m.file_type().is_symlink() => {}
                    Ok(_) => return Ok(None),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(Error::io("examine for symlinks", path.to_path_buf(), e)),
                }
                let resolved =
                    resolve_existing(path).map_err(|e| Error::io("resolve symlinks", path.to_path_buf(), e))?;
                Ok(Some(match resolved.strip_prefix(&resolved_root) {
                    Ok(rel) if !rel.as_os_str().is_empty() => match rel.to_str() {
                        Some(rel) => Link::Inside(rel.to_owned()),
                        // A name that is no UTF-8 cannot be a listed path: taken as leaving the table.
                        None => Link::Outside(resolved.display().to_string()),
                    },
                    _ => Link::Outside(resolved.display().to_string()),
                }))
            };
            let mut all = std::collections::BTreeSet::new();
            for f in &folders {
                let mut at = f.as_str();
                while !at.is_empty() && all.insert(at.to_owned()) {
                    at = at.rsplit_once('/').map_or("", |(parent, _)| parent);
                }
            }
            let mut out = Outside::default();
            // Parents sort before their children: below a folder found outside, nothing more is examined.
            for f in all {
                if out.target(&format!("{f}/")).is_some() {
                    continue;
                }
                match leaves(&base.join(&f))? {
                    Some(Link::Outside(t)) => {
                        out.folders.insert(f, t);
                    }
                    Some(Link::Inside(t)) => {
                        out.inside_folders.insert(f, t);
                    }
                    None => {}
                }
            }
            for f in files {
                if out.target(&f).is_some() {
                    continue;
                }
                match leaves(&base.join(&f))? {
                    Some(Link::Outside(t)) => {
                        out.files.insert(f, t);
                    }
                    Some(Link::Inside(t)) => {
                        out.inside_files.insert(f, t);
                    }
                    None => {}
                }
            }
            Ok(out)
        })
        .await
        .map_err(|e| Error::Internal(format!("symlink check of {root_uri}: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of entry object_store's local listing treats apart: nested folders, a link to a file and a
    /// link to a folder inside, a broken link, staging names (`#` and digits) and names that only look like one,
    /// a fifo, an empty folder, names with spaces, `%`, `#` and non-ASCII letters.
    #[tokio::test]
    async fn a_listing_of_many_chunks_is_object_stores_in_its_order_and_can_be_dropped_part_way() {
        // More entries than the chunks the listing holds ahead of its reader (8 × 1,024), in several folders.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        for f in 0..5 {
            let folder = root.join(format!("data/p{f}"));
            std::fs::create_dir_all(&folder).unwrap();
            for i in 0..2_500 {
                std::fs::write(folder.join(format!("f{i}.parquet")), i.to_string()).unwrap();
            }
        }
        let prefix = Path::from_absolute_path(&root).unwrap();
        let key = |m: &object_store::ObjectMeta| (m.location.to_string(), m.size, m.last_modified, m.e_tag.clone());
        let theirs: Vec<_> = object_store::local::LocalFileSystem::new()
            .list(Some(&prefix))
            .map_ok(|m| key(&m))
            .try_collect()
            .await
            .unwrap();
        let ours: Vec<_> = local_list(&prefix).map_ok(|m| key(&m)).try_collect().await.unwrap();
        assert_eq!(ours.len(), 12_500);
        assert_eq!(ours, theirs, "the same entries in the same order");
        // A reader that stops early ends the walk (the runtime would wait for a walker blocked forever).
        let first: Vec<_> = local_list(&prefix).take(10).collect().await;
        assert_eq!(first.len(), 10);
        assert!(first.iter().all(|m| m.is_ok()));
    }

    #[tokio::test]
    async fn the_local_listing_is_object_stores_with_fewer_stats() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("t");
        for d in ["data/a=1", "data/b", "metadata", "empty/inner", "linked-target"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let files = [
            "data/a=1/x.parquet",
            "data/b/y z%20.parquet",
            "data/b/ünï#cødé.parquet",
            "data/b/upload#123",
            "data/b/upload#12a",
            "data/b/trailing#",
            "metadata/v1.metadata.json",
            "linked-target/inside.parquet",
        ];
        for (i, f) in files.iter().enumerate() {
            std::fs::write(root.join(f), vec![b'x'; i * 7 + 1]).unwrap();
        }
        std::os::unix::fs::symlink(root.join("data/a=1/x.parquet"), root.join("data/link.parquet")).unwrap();
        std::os::unix::fs::symlink(root.join("linked-target"), root.join("data/linked")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("data/broken.parquet")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.join("data/fifo"))
            .status()
            .unwrap();
        assert!(fifo.success());

        let prefix = Path::from_absolute_path(&root).unwrap();
        let key = |m: &object_store::ObjectMeta| {
            (
                m.location.to_string(),
                m.size,
                m.last_modified,
                m.e_tag.clone(),
                m.version.clone(),
            )
        };
        let mut theirs: Vec<_> = object_store::local::LocalFileSystem::new()
            .list(Some(&prefix))
            .map_ok(|m| key(&m))
            .try_collect()
            .await
            .unwrap();
        let mut ours: Vec<_> = local_list(&prefix).map_ok(|m| key(&m)).try_collect().await.unwrap();
        theirs.sort();
        ours.sort();
        assert_eq!(ours, theirs);
        let names: Vec<&str> = ours.iter().map(|k| k.0.rsplit('/').next().unwrap()).collect();
        assert_eq!(ours.len(), 9, "{names:?}");
        assert!(
            names.contains(&"upload#12a") && !names.contains(&"upload#123"),
            "{names:?}"
        );
        assert!(
            names.contains(&"inside.parquet") && names.contains(&"link.parquet"),
            "{names:?}"
        );
        // Through Storage: a missing folder lists nothing, and the URIs are the folder's.
        let storage = Storage::new(StorageOptions::default());
        let uri = format!("file://{}", root.display());
        let listed = storage.list(&uri).await.unwrap();
        assert_eq!(listed.len(), 9);
        assert!(listed.iter().all(|o| o.uri.starts_with(&format!("{uri}/"))));
        assert!(storage.list(&format!("{uri}/nothing-here")).await.unwrap().is_empty());

        // The listing with deferred stats lists the same objects; stat'ed afterwards, with the same sizes and
        // times. Links are stat'ed at once; a plain file gone before its stat reads as gone.
        let lean = storage.list_deferred(&uri, |rel, stat| (rel, stat)).await.unwrap();
        let deferred: Vec<String> = lean
            .iter()
            .filter(|(_, s)| s.is_none())
            .map(|(r, _)| r.clone())
            .collect();
        assert_eq!(deferred.len(), 8, "{lean:?}");
        assert!(
            lean.iter().any(|(r, s)| r == "data/link.parquet" && s.is_some()),
            "{lean:?}"
        );
        let stats = storage.stat_deferred(&uri, deferred.clone()).await.unwrap();
        let mut filled: Vec<(String, u64, i64)> = lean
            .iter()
            .map(|(rel, stat)| {
                let (size, ms) =
                    stat.unwrap_or_else(|| stats[deferred.iter().position(|d| d == rel).unwrap()].unwrap());
                (rel.clone(), size, ms)
            })
            .collect();
        let mut expected: Vec<(String, u64, i64)> = listed
            .iter()
            .map(|o| {
                let rel = o.uri.strip_prefix(&format!("{uri}/")).unwrap().to_owned();
                (rel, o.size, o.last_modified.timestamp_millis())
            })
            .collect();
        filled.sort();
        expected.sort();
        assert_eq!(filled, expected);
        std::fs::remove_file(root.join("metadata/v1.metadata.json")).unwrap();
        let after = storage
            .stat_deferred(
                &uri,
                vec!["metadata/v1.metadata.json".into(), "data/a=1/x.parquet".into()],
            )
            .await
            .unwrap();
        assert_eq!(after[0], None);
        assert_eq!(after[1].map(|s| s.0), Some(1));
        assert!(
            storage
                .list_deferred(&format!("{uri}/nothing-here"), |rel, _| rel)
                .await
                .unwrap()
                .is_empty()
        );
        let err = Storage::new(StorageOptions::default())
            .stat_deferred("memory:///t", vec!["a".into()])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("memory:///t"), "{err}");

        // A name object_store cannot hold as a location (a control character; bytes that are not UTF-8) fails
        // both listings.
        for (i, bad) in [b"a\x01b".as_slice(), b"caf\xe9".as_slice()].into_iter().enumerate() {
            let folder = dir.path().join(format!("bad{i}"));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(
                folder.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bad)),
                b"x",
            )
            .unwrap();
            let prefix = Path::from_absolute_path(&folder).unwrap();
            let theirs: object_store::Result<Vec<_>> = object_store::local::LocalFileSystem::new()
                .list(Some(&prefix))
                .try_collect()
                .await;
            let ours: object_store::Result<Vec<_>> = local_list(&prefix).try_collect().await;
            assert!(theirs.is_err() && ours.is_err(), "{bad:?}: {theirs:?} / {ours:?}");
            let uri = format!("file://{}", folder.display());
            let lean = storage.list_deferred(&uri, |rel, _| rel).await;
            assert!(
                lean.as_ref().is_err_and(|e| e.to_string().contains(&uri)),
                "{bad:?}: {lean:?}"
            );
            // The same name as a folder: listing a file under it fails both ways; an empty one lists nothing.
            let under = dir.path().join(format!("bad-folder{i}"));
            let named = under.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bad));
            std::fs::create_dir_all(&named).unwrap();
            let uri = format!("file://{}", under.display());
            let (prefix, plain) = (
                Path::from_absolute_path(&under).unwrap(),
                object_store::local::LocalFileSystem::new(),
            );
            assert_eq!(
                storage.list_deferred(&uri, |rel, _| rel).await.unwrap(),
                Vec::<String>::new()
            );
            assert!(
                plain
                    .list(Some(&prefix))
                    .try_collect::<Vec<_>>()
                    .await
                    .unwrap()
                    .is_empty()
            );
            std::fs::write(named.join("f.parquet"), b"x").unwrap();
            let lean = storage.list_deferred(&uri, |rel, _| rel).await;
            assert!(
                lean.as_ref().is_err_and(|e| e.to_string().contains(&uri)),
                "{bad:?}: {lean:?}"
            );
            assert!(
                plain.list(Some(&prefix)).try_collect::<Vec<_>>().await.is_err(),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn symlinks_are_followed_inside_the_root_and_reported_outside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (table, outside) = (tmp.path().join("t"), tmp.path().join("outside"));
        std::fs::create_dir_all(table.join("data/in")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(table.join("data/in/a"), b"a").unwrap();
        std::fs::write(outside.join("b"), b"b").unwrap();
        std::os::unix::fs::symlink(table.join("data/in/a"), table.join("data/inside-link")).unwrap();
        std::os::unix::fs::symlink(outside.join("b"), table.join("data/file-link")).unwrap();
        std::os::unix::fs::symlink(&outside, table.join("data/folder-link")).unwrap();
        // The root itself is reached through a symlink: that is allowed.
        std::os::unix::fs::symlink(&table, tmp.path().join("alias")).unwrap();
        let s = Storage::new(StorageOptions::default());
        let root = format!("file://{}", tmp.path().join("alias").display());
        let c = s.confine(&root).await.unwrap();
        let at = |rel: &str| format!("{root}/{rel}");
        assert_eq!(c.escape(&at("data/in/a")).await.unwrap(), None);
        assert_eq!(c.escape(&at("data/inside-link")).await.unwrap(), None);
        assert_eq!(c.escape(&at("data/not-yet-written")).await.unwrap(), None);
        let real_outside = std::fs::canonicalize(&outside).unwrap();
        assert_eq!(
            c.escape(&at("data/file-link")).await.unwrap(),
            Some(real_outside.join("b").display().to_string())
        );
        // A missing file under a linked folder still resolves to where the folder points.
        assert_eq!(
            c.escape(&at("data/folder-link/missing")).await.unwrap(),
            Some(real_outside.join("missing").display().to_string())
        );
        assert!(c.escape("file:///elsewhere/x").await.unwrap().is_some());
        // Not local: nothing to resolve.
        let m = s.confine("memory:///t").await.unwrap();
        assert_eq!(m.escape("memory:///t/x").await.unwrap(), None);
    }

    /// A path is its own file only when no link is on its way: a folder or a file linked inside the table, or to
    /// outside it, is "through a link"; the root itself may be reached through one; a missing file under a plain
    /// folder is itself.
    #[tokio::test]
    async fn through_link_tells_a_path_from_the_file_it_reaches() {
        let tmp = tempfile::tempdir().unwrap();
        let (table, outside) = (tmp.path().join("t"), tmp.path().join("outside"));
        std::fs::create_dir_all(table.join("data")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(table.join("data/f"), b"f").unwrap();
        std::os::unix::fs::symlink(table.join("data"), table.join("alias")).unwrap();
        std::os::unix::fs::symlink(table.join("data/f"), table.join("data/file-link")).unwrap();
        std::os::unix::fs::symlink(&outside, table.join("ext")).unwrap();
        std::os::unix::fs::symlink(&table, tmp.path().join("root-alias")).unwrap();
        let s = Storage::new(StorageOptions::default());
        let root = format!("file://{}", tmp.path().join("root-alias").display());
        let at = |rel: &str| format!("{root}/{rel}");
        let c = s.confine(&root).await.unwrap();
        let real = std::fs::canonicalize(&table).unwrap();
        assert_eq!(c.through_link(&at("data/f")).await.unwrap(), None);
        assert_eq!(c.through_link(&at("data/missing")).await.unwrap(), None);
        assert_eq!(
            c.through_link(&at("alias/f")).await.unwrap(),
            Some(real.join("data/f").display().to_string())
        );
        assert_eq!(
            c.through_link(&at("data/file-link")).await.unwrap(),
            Some(real.join("data/f").display().to_string())
        );
        assert!(c.through_link(&at("ext/x")).await.unwrap().is_some());
        assert!(c.through_link("file:///elsewhere/x").await.unwrap().is_some());
        let m = s.confine("memory:///t").await.unwrap();
        assert_eq!(m.through_link("memory:///t/x").await.unwrap(), None);
    }

    /// A listing's folders and files that leave the table root once links are resolved: a linked folder to
    /// outside (and everything under it, whatever its depth), a linked file to outside; a link that stays inside
    /// and plain folders are not; the root reached through a link is allowed.
    #[tokio::test]
    async fn outside_finds_linked_folders_and_files_that_leave_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let (table, outside) = (tmp.path().join("t"), tmp.path().join("outside"));
        std::fs::create_dir_all(table.join("data/in/p=1")).unwrap();
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("sub/b"), b"b").unwrap();
        std::fs::write(outside.join("f"), b"f").unwrap();
        std::os::unix::fs::symlink(&outside, table.join("data/ext")).unwrap();
        std::os::unix::fs::symlink(table.join("data/in"), table.join("data/alias")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), table.join("data/in/file-link")).unwrap();
        std::os::unix::fs::symlink(&table, tmp.path().join("root-alias")).unwrap();
        let s = Storage::new(StorageOptions::default());
        let root = format!("file://{}", tmp.path().join("root-alias").display());
        let c = s.confine(&root).await.unwrap();
        let folders = ["data/in/p=1", "data/ext/sub", "data/alias"].map(String::from).to_vec();
        let files = ["data/in/file-link", "data/in/p=1/gone"].map(String::from).to_vec();
        let o = c.outside(folders, files).await.unwrap();
        let real = std::fs::canonicalize(&outside).unwrap();
        assert_eq!(o.folders.keys().collect::<Vec<_>>(), ["data/ext"]);
        assert_eq!(o.files.keys().collect::<Vec<_>>(), ["data/in/file-link"]);
        assert_eq!(o.target("data/ext/sub/b"), Some(format!("{}/sub/b", real.display())));
        assert_eq!(
            o.target("data/in/file-link"),
            Some(real.join("f").display().to_string())
        );
        assert_eq!(o.target("data/alias/x"), None);
        assert_eq!(o.target("data/in/p=1/x"), None);
        // A link that stays inside: its paths are the same files as their real paths.
        assert_eq!(o.inside_folders.keys().collect::<Vec<_>>(), ["data/alias"]);
        assert_eq!(o.linked("data/alias/p=1/x"), Some("data/in/p=1/x".to_owned()));
        assert_eq!(o.linked("data/in/p=1/x"), None);
        assert_eq!(o.linked("data/ext/sub/b"), None, "outside is not inside");
        let m = s.confine("memory:///t").await.unwrap();
        assert_eq!(
            m.outside(vec!["data".into()], vec![]).await.unwrap(),
            Outside::default()
        );
    }

    /// The re-check by listing (#24): present, absent, undecided past the budget, and nothing concluded from a
    /// listing out of key order or from URIs of two stores.
    #[tokio::test]
    async fn list_presence_decides_only_what_the_ordered_listing_passed() {
        let s = Storage::new(StorageOptions::default());
        for k in [
            "t/data/a1",
            "t/data/a2",
            "t/data/a4",
            "t/data/b/x",
            "t/data/c1",
            "t/data/c3",
            "t/data/\u{e9}",
            "t/meta/m",
        ] {
            s.put(&format!("memory:///{k}"), Bytes::from_static(b"bytes"))
                .await
                .unwrap();
        }
        let u = |k: &str| format!("memory:///t/{k}");
        // Out of order and with a duplicate: answers come back in the order asked.
        let asked = [
            u("data/c3"),
            u("data/a3"),
            u("data/a1"),
            u("data/c2"),
            u("data/a1"),
            u("data/c1"),
        ];
        let uris: Vec<&str> = asked.iter().map(String::as_str).collect();
        let got = s.list_presence(&uris, 1000).await.unwrap();
        let present: Vec<Option<bool>> = got.iter().map(|g| g.as_ref().map(Option::is_some)).collect();
        assert_eq!(
            present,
            [Some(true), Some(false), Some(true), Some(false), Some(true), Some(true)]
        );
        assert_eq!(got[0].as_ref().unwrap().as_ref().unwrap().uri, u("data/c3"));
        assert_eq!(got[0].as_ref().unwrap().as_ref().unwrap().size, 5);
        // Past the last key asked nothing more is read; a key after every listed object is absent.
        let beyond = [u("data/zz")];
        let got = s.list_presence(&[beyond[0].as_str()], 1000).await.unwrap();
        assert_eq!(got, [Some(None)]);
        // A budget of one foreign key: a2 is passed, then a4 (a3 is absent between them) is the second and stops it.
        let asked = [u("data/a1"), u("data/a3"), u("data/c1")];
        let uris: Vec<&str> = asked.iter().map(String::as_str).collect();
        let got = s.list_presence(&uris, 1).await.unwrap();
        let present: Vec<Option<bool>> = got.iter().map(|g| g.as_ref().map(Option::is_some)).collect();
        assert_eq!(
            present,
            [Some(true), Some(false), None],
            "c1 lies beyond the stop: undecided"
        );
        // Keys parting inside a character (é and è share their first byte): listed, not split there.
        let accents = [u("data/\u{e8}"), u("data/\u{e9}")];
        let got = s
            .list_presence(&[accents[0].as_str(), accents[1].as_str()], 1000)
            .await
            .unwrap();
        let present: Vec<Option<bool>> = got.iter().map(|g| g.as_ref().map(Option::is_some)).collect();
        assert_eq!(present, [Some(false), Some(true)]);
        // Two stores: nothing decided.
        let got = s
            .list_presence(&[u("data/a1").as_str(), "file:///t/data/a1"], 1000)
            .await
            .unwrap();
        assert_eq!(got, [None, None]);
        assert_eq!(s.request_counts().recheck_listings, 4);
        assert!(s.list_presence(&[], 1000).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn memory_round_trip_and_write_once() {
        let s = Storage::new(StorageOptions::default());
        s.put_new("memory:///a/b.txt", Bytes::from_static(b"hello"))
            .await
            .unwrap();
        let err = s
            .put_new("memory:///a/b.txt", Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::AlreadyExists { ref uri } if uri == "memory:///a/b.txt"));
        let f = s.get("memory:///a/b.txt").await.unwrap();
        assert_eq!(&f.bytes[..], b"hello");
        let h = s.hash("memory:///a/b.txt").await.unwrap();
        assert_eq!(h.blake3, blake3::hash(b"hello").to_hex().to_string());
        assert_eq!(h.bytes_read, 5);
        let listed = s.list("memory:///a").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].uri, "memory:///a/b.txt");
        assert!(s.head("memory:///a/missing").await.unwrap().is_none());
        let err = s.get("memory:///a/missing").await.unwrap_err();
        assert!(err.to_string().contains("memory:///a/missing"), "{err}");
    }

    /// An object over the bound is answered with its size, not its bytes; one at the bound is read whole.
    #[tokio::test]
    async fn get_within_answers_the_size_of_an_object_over_the_bound() {
        let s = Storage::new(StorageOptions::default());
        s.put_new("memory:///a/data.parquet", Bytes::from_static(b"0123456789"))
            .await
            .unwrap();
        assert!(matches!(
            s.get_within("memory:///a/data.parquet", 4).await.unwrap(),
            Within::Over { size: 10 }
        ));
        let Within::Read(f) = s.get_within("memory:///a/data.parquet", 10).await.unwrap() else {
            panic!("read whole at the bound")
        };
        assert_eq!(&f.bytes[..], b"0123456789");
        let err = s
            .get_bounded("memory:///a/data.parquet", 4, "the test object")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("memory:///a/data.parquet"), "{err}");
        assert!(matches!(
            s.get_within("memory:///a/missing", 4).await,
            Err(Error::NotFound { .. })
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streamed_digest_equals_one_shot_digest_at_buffer_boundaries() {
        let s = Storage::new(StorageOptions::default());
        for size in [0usize, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 12_345] {
            let data: Vec<u8> = (0..size)
                .map(|i| u8::try_from((i * 31 + i / 7) % 251).unwrap())
                .collect();
            let uri = format!("memory:///sizes/{size}");
            s.put(&uri, Bytes::from(data.clone())).await.unwrap();
            let h = s.hash(&uri).await.unwrap();
            assert_eq!(h.bytes_read, size as u64);
            assert_eq!(h.blake3, blake3::hash(&data).to_hex().to_string(), "size {size}");
        }
    }
}
