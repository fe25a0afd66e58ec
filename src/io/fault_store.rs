//! A fault-injecting `object_store` layer for `lakedrill drill faults`.
//!
//! [`FaultStore`] wraps any [`ObjectStore`] and, when its shared [`FaultState`] says so, behaves like
//! the object stores that lose data in practice: a listing that lags behind writes, a replica that keeps
//! serving an object after it was deleted, a delete whose response is lost although the delete took
//! effect, a 5xx before a delete is sent, and 412 (precondition failed) on conditional writes. Every
//! injected fault is counted, so that a scenario can show it actually happened.
//!
//! The layer is only installed by [`crate::lab::faults`] on the storage of its own scratch lakehouse
//! ([`crate::io::store::Storage::with_layer`]); production commands never build it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// What the fault layer currently does, shared by every store it wraps.
#[derive(Debug, Default)]
pub struct FaultState {
    /// Listings hide objects under this path prefix modified at or after this time (an eventually
    /// consistent listing).
    hide_listed_after: Mutex<Option<(String, DateTime<Utc>)>>,
    /// Every K-th delete takes effect but its response is lost (0 = off).
    lose_delete_every: AtomicU64,
    /// Every K-th delete fails with a 503 before it is sent (0 = off).
    fail_delete_every: AtomicU64,
    /// Create-only writes of paths containing this text fail with 412 (a racing writer won).
    fail_conditional_puts: Mutex<Option<String>>,
    /// Deleted objects stay readable (HEAD/GET) until [`FaultState::catch_up`]: a lagging replica.
    lagging_replica: AtomicBool,
    stale: Mutex<HashMap<Path, (ObjectMeta, Option<Bytes>)>>,
    deletes: AtomicU64,
    injected: Mutex<HashMap<&'static str, u64>>,
}

impl FaultState {
    /// A layer that injects nothing until told to.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Listings hide every object under the store path `prefix` modified at or after `t` (`None`: consistent
    /// listings again).
    pub fn hide_listed_after(&self, t: Option<(String, DateTime<Utc>)>) {
        if let Ok(mut h) = self.hide_listed_after.lock() {
            *h = t;
        }
    }

    /// Every `k`-th delete takes effect but reports an error (0 = off).
    pub fn lose_delete_responses(&self, k: u64) {
        self.lose_delete_every.store(k, Ordering::SeqCst);
    }

    /// Every `k`-th delete fails with a 503 before it is sent (0 = off).
    pub fn fail_deletes(&self, k: u64) {
        self.fail_delete_every.store(k, Ordering::SeqCst);
    }

    /// Create-only writes of paths containing `matching` fail with 412 Precondition Failed (`None`: off).
    pub fn fail_conditional_puts(&self, matching: Option<&str>) {
        if let Ok(mut m) = self.fail_conditional_puts.lock() {
            *m = matching.map(str::to_owned);
        }
    }

    /// Reads are served by a replica that lags behind deletes.
    pub fn lagging_replica(&self, on: bool) {
        self.lagging_replica.store(on, Ordering::SeqCst);
    }

    /// The lagging replica catches up: deleted objects are gone from reads.
    pub fn catch_up(&self) {
        if let Ok(mut s) = self.stale.lock() {
            s.clear();
        }
    }

    /// Switches every fault off (stale replica entries are dropped).
    pub fn clear(&self) {
        self.hide_listed_after(None);
        self.lose_delete_responses(0);
        self.fail_deletes(0);
        self.fail_conditional_puts(None);
        self.lagging_replica(false);
        self.catch_up();
    }

    /// How many faults of each kind were injected so far.
    #[must_use]
    pub fn injected(&self) -> HashMap<&'static str, u64> {
        self.injected.lock().map(|m| m.clone()).unwrap_or_default()
    }

    fn count(&self, kind: &'static str) {
        if let Ok(mut m) = self.injected.lock() {
            *m.entry(kind).or_default() += 1;
        }
    }

    fn stale_copy(&self, p: &Path) -> Option<(ObjectMeta, Option<Bytes>)> {
        if !self.lagging_replica.load(Ordering::SeqCst) {
            return None;
        }
        self.stale.lock().ok().and_then(|s| s.get(p).cloned())
    }
}

/// What the fault layer does to one key of a delete request sent around object_store (the deleter's S3
/// `DeleteObjects` batches and `If-Match` deletes are presigned requests the layer cannot wrap; the storage asks
/// the state instead, see [`crate::io::store::Storage::with_fault_layer`]). One count with the layer's own deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyFault {
    /// Sent and answered as the provider answers.
    None,
    /// Not sent: answered with an injected 503 (nothing deleted).
    Refuse,
    /// Sent and deleted, but its answer is lost.
    LoseAnswer,
}

impl FaultState {
    /// The fault for the next key deleted around the layer.
    pub fn next_delete(&self) -> KeyFault {
        let n = self.deletes.fetch_add(1, Ordering::SeqCst) + 1;
        let fail = self.fail_delete_every.load(Ordering::SeqCst);
        if fail > 0 && n.is_multiple_of(fail) {
            self.count("delete_503");
            return KeyFault::Refuse;
        }
        let lose = self.lose_delete_every.load(Ordering::SeqCst);
        if lose > 0 && n.is_multiple_of(lose) {
            self.count("lost_delete_response");
            return KeyFault::LoseAnswer;
        }
        KeyFault::None
    }

    /// Whether deleted objects stay readable (a lagging replica): then the storage hands each deleted object's
    /// last content to [`FaultState::remember_deleted`].
    #[must_use]
    pub fn lagging(&self) -> bool {
        self.lagging_replica.load(Ordering::SeqCst)
    }

    /// Keeps serving `p` as `meta`/`bytes` until [`FaultState::catch_up`].
    pub fn remember_deleted(&self, p: Path, meta: ObjectMeta, bytes: Option<Bytes>) {
        if let Ok(mut s) = self.stale.lock() {
            s.insert(p, (meta, bytes));
            self.count("stale_replica_entry");
        }
    }
}

fn injected(source: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "fault-layer",
        source: source.to_owned().into(),
    }
}

/// An [`ObjectStore`] that injects the faults its [`FaultState`] asks for.
#[derive(Debug)]
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    state: Arc<FaultState>,
}

impl FaultStore {
    /// Wraps `inner`.
    #[must_use]
    pub fn new(inner: Arc<dyn ObjectStore>, state: Arc<FaultState>) -> Self {
        Self { inner, state }
    }

    async fn delete_one(inner: Arc<dyn ObjectStore>, state: Arc<FaultState>, p: Path) -> Result<Path> {
        let n = state.deletes.fetch_add(1, Ordering::SeqCst) + 1;
        let fail = state.fail_delete_every.load(Ordering::SeqCst);
        if fail > 0 && n.is_multiple_of(fail) {
            state.count("delete_503");
            return Err(injected("injected 503 Service Unavailable (nothing was deleted)"));
        }
        let before = if state.lagging_replica.load(Ordering::SeqCst) {
            match inner.get(&p).await {
                Ok(r) => {
                    let meta = r.meta.clone();
                    Some((meta, r.bytes().await.ok()))
                }
                Err(_) => None,
            }
        } else {
            None
        };
        inner.delete(&p).await?;
        if let Some(copy) = before
            && let Ok(mut s) = state.stale.lock()
        {
            s.insert(p.clone(), copy);
            state.count("stale_replica_entry");
        }
        let lose = state.lose_delete_every.load(Ordering::SeqCst);
        if lose > 0 && n.is_multiple_of(lose) {
            state.count("lost_delete_response");
            return Err(injected("injected lost response (the delete took effect)"));
        }
        Ok(p)
    }
}

impl std::fmt::Display for FaultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        let racing = self
            .state
            .fail_conditional_puts
            .lock()
            .ok()
            .and_then(|m| m.clone())
            .is_some_and(|m| location.as_ref().contains(&m));
        if matches!(opts.mode, PutMode::Create) && racing {
            self.state.count("put_412");
            return Err(object_store::Error::Precondition {
                path: location.to_string(),
                source: "injected 412 Precondition Failed (a racing writer won)".into(),
            });
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if let Some((meta, bytes)) = self.state.stale_copy(location) {
            self.state.count("stale_read");
            let bytes = bytes.unwrap_or_default();
            let range = 0..meta.size;
            let payload = futures::stream::once(async move { Ok(bytes) }).boxed();
            return Ok(GetResult {
                payload: GetResultPayload::Stream(payload),
                meta,
                range,
                attributes: object_store::Attributes::default(),
                extensions: Default::default(),
            });
        }
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        let inner = Arc::clone(&self.inner);
        let state = Arc::clone(&self.state);
        locations
            .and_then(move |p| Self::delete_one(Arc::clone(&inner), Arc::clone(&state), p))
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let hide = self.state.hide_listed_after.lock().ok().and_then(|h| h.clone());
        let state = Arc::clone(&self.state);
        self.inner
            .list(prefix)
            .try_filter(move |m| {
                let hidden = hide
                    .as_ref()
                    .is_some_and(|(p, t)| m.location.as_ref().starts_with(p.as_str()) && m.last_modified >= *t);
                if hidden {
                    state.count("hidden_from_listing");
                }
                futures::future::ready(!hidden)
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
