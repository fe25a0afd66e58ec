//! The context every operation runs over: configuration, storage, fault hooks, clock, and the pools
//! (registry, catalogs) and the implementation digest its commands share.
//!
//! Built once per command by `cli::run` (the lab builds one over a fault store); nothing below
//! `ops` sees it: lower wings take the storage, the registry or `now` they need as arguments.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::io::catalog::{Catalog, TableIdent};
use crate::io::store::Storage;
use crate::table::{Table, TableSource};

/// What every command that reads a table needs.
///
/// It owns the connection pools its commands open ([`Context::registry`], [`Context::catalog`]);
/// [`Context::close`] closes them, and the binary calls it after every command, failed or not, before the async runtime shuts down.
#[derive(Debug)]
pub struct Context {
    /// The configuration.
    pub config: Config,
    /// The storage layer.
    pub storage: Storage,
    /// Fault-injection hooks; inert (the default) everywhere but in `drill faults`' scratch lakehouse.
    pub hooks: crate::ops::hooks::Hooks,
    /// The registries opened through this context, by URI (one pool each).
    registries: std::sync::Mutex<std::collections::HashMap<String, crate::registry::Registry>>,
    /// The SQL catalogs opened through this context, by configuration section (one pool each).
    catalogs: std::sync::Mutex<std::collections::HashMap<String, crate::io::catalog::Catalog>>,
    /// Where every operation reads the time (the system clock but in tests).
    pub clock: Arc<dyn Clock>,
    /// The implementation digest, computed on first use.
    digest: std::sync::OnceLock<String>,
    /// The implementation digest being computed on a thread of its own
    /// ([`Context::implementation_digest_in_background`]).
    digest_task: std::sync::Mutex<Option<std::thread::JoinHandle<Result<String>>>>,
}

impl Context {
    /// A context from a configuration.
    #[must_use]
    pub fn new(config: Config) -> Self {
        let storage = Storage::new(config.storage_options());
        Self::with_storage(config, storage)
    }

    /// A context on the given storage (the fault matrix puts a fault layer in it).
    #[must_use]
    pub fn with_storage(config: Config, storage: Storage) -> Self {
        Self {
            config,
            storage,
            hooks: crate::ops::hooks::Hooks::default(),
            registries: std::sync::Mutex::default(),
            catalogs: std::sync::Mutex::default(),
            clock: Arc::new(SystemClock),
            digest: std::sync::OnceLock::new(),
            digest_task: std::sync::Mutex::default(),
        }
    }

    /// The same context reading time from `clock` (tests drive time through it).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Now, from the context's clock.
    #[must_use]
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// SHA-256 of the running binary, read once per context.
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the binary cannot be read.
    pub fn implementation_digest(&self) -> Result<String> {
        if let Some(d) = self.digest.get() {
            return Ok(d.clone());
        }
        let started = lock(&self.digest_task).take();
        let d = match started.map(std::thread::JoinHandle::join) {
            Some(Ok(d)) => d?,
            // The thread could not finish (it panicked): computed here, where an error names the binary.
            Some(Err(_)) | None => implementation_digest()?,
        };
        Ok(self.digest.get_or_init(|| d).clone())
    }

    /// Starts computing the implementation digest on a thread of its own, for a command that needs it only at its
    /// end (a drill signs it into its report): the binary is hashed while the command works. Nothing happens when
    /// it is known or already being computed, or when no thread can be started (it is then computed when asked).
    pub fn implementation_digest_in_background(&self) {
        let mut task = lock(&self.digest_task);
        if self.digest.get().is_some() || task.is_some() {
            return;
        }
        *task = std::thread::Builder::new()
            .name("implementation-digest".into())
            .spawn(implementation_digest)
            .ok();
    }

    /// The catalog `[catalog.<section>]` (SQL or REST), opened on first use and shared by later calls on this context
    /// (one pool, closed by [`Context::close`]).
    ///
    /// # Errors
    /// [`crate::Error::Config`] for an undeclared catalog; [`crate::io::catalog::Catalog::open`] errors.
    pub async fn catalog(&self, section: &str) -> Result<crate::io::catalog::Catalog> {
        if let Some(c) = lock(&self.catalogs).get(section) {
            return Ok(c.clone());
        }
        let opened = Box::pin(crate::io::catalog::Catalog::open(
            section,
            self.config.catalog(section)?,
            self.storage.options().max_metadata_bytes,
        ))
        .await?;
        // Two tasks may have opened it at once: keep the first, close the other.
        let (kept, spare) = {
            let mut map = lock(&self.catalogs);
            match map.get(section) {
                Some(first) => (first.clone(), Some(opened)),
                None => {
                    map.insert(section.to_owned(), opened.clone());
                    (opened, None)
                }
            }
        };
        if let Some(spare) = spare {
            Box::pin(spare.close()).await;
        }
        Ok(kept)
    }

    /// The registry of the configuration (`[registry] uri`), opened on first use and shared by every later
    /// call on this context (a clone of one handle: one pool, closed by [`Context::close`]).
    ///
    /// # Errors
    /// Registry open errors.
    pub async fn registry(&self) -> Result<crate::registry::Registry> {
        let uri = self.config.registry_uri();
        if let Some(r) = lock(&self.registries).get(&uri) {
            return Ok(r.clone());
        }
        // Boxed: the open future is large in debug builds, and every command awaits this one.
        let opened = Box::pin(crate::registry::Registry::open(&uri)).await?;
        // Two tasks may have opened it at once: keep the first, close the other.
        let (kept, spare) = {
            let mut map = lock(&self.registries);
            match map.get(&uri) {
                Some(first) => (first.clone(), Some(opened)),
                None => {
                    map.insert(uri, opened.clone());
                    (opened, None)
                }
            }
        };
        if let Some(spare) = spare {
            Box::pin(spare.close()).await;
        }
        Ok(kept)
    }

    /// Closes every registry pool this context opened, waiting for connections in use to come back. Call it
    /// before the async runtime ends: a pool left to the runtime's shutdown is where sqlx 0.8 can hang
    /// (see `db::connect`, sqlx#3645). A later [`Context::registry`] opens a new pool.
    pub async fn close(&self) {
        let registries: Vec<_> = lock(&self.registries).drain().map(|(_, r)| r).collect();
        for r in registries {
            r.close().await;
        }
        let catalogs: Vec<_> = lock(&self.catalogs).drain().map(|(_, c)| c).collect();
        for c in catalogs {
            c.close().await;
        }
    }

    /// Loads the table a command addresses.
    ///
    /// # Errors
    /// See [`Table::load`].
    pub async fn table(&self, source: &TableSource) -> Result<Table> {
        Table::load(&self.storage, &self.config, source).await
    }

    /// Loads a table through its catalog, for a commit.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the table is not addressed through a catalog; load errors.
    pub async fn catalog_table(&self, source: &TableSource) -> Result<(Table, Catalog, TableIdent)> {
        let TableSource::Catalog { catalog, table, .. } = source else {
            return Err(Error::invalid(
                "table",
                "this command commits to the table: address it with --catalog NAME --table NS.TABLE",
            ));
        };
        let ident: TableIdent = table.parse()?;
        let cat = self.catalog(catalog).await?;
        let t = self.table(source).await?;
        Ok((t, cat, ident))
    }
}

/// Locks one of the context's pool maps; a panic elsewhere while it was held does not make it unusable.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// SHA-256 of the running binary (the implementation digest of drill reports).
///
/// # Errors
/// [`crate::Error::Io`] when the binary cannot be read.
pub fn implementation_digest() -> Result<String> {
    let exe = std::env::current_exe().map_err(|e| crate::Error::io("locate the running binary", "lakedrill", e))?;
    // Streamed: the binary is tens of MB, and reading it whole was the purge's largest allocation (#24).
    let mut file = std::fs::File::open(&exe).map_err(|e| crate::Error::io("read the running binary", &exe, e))?;
    // In reads of 1 MiB: `std::io::copy`'s 8 KiB buffer made eight thousand reads of a 64 MB binary.
    let mut hasher = <sha2::Sha256 as sha2::Digest>::new();
    let mut buf = vec![0_u8; 1 << 20];
    loop {
        let n = match std::io::Read::read(&mut file, &mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(crate::Error::io("read the running binary", &exe, e)),
        };
        if n == 0 {
            break;
        }
        sha2::Digest::update(&mut hasher, &buf[..n]);
    }
    Ok(hex::encode(sha2::Digest::finalize(hasher)))
}
