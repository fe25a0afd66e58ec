//! The configuration file, `lakedrill.toml` by default.
//!
//! ```toml
//! [storage]
//! io_concurrency = 16
//! max_metadata_bytes = 536870912   # a bigger metadata file (raw or decompressed) is refused; default 512 MiB
//! s3_delete_objects = true          # purge on S3 with DeleteObjects (per-key ETag); false: one If-Match delete each
//! s3_recheck_by_listing = false     # true: re-check a purge batch on S3 with one listing, not a HEAD per object
//! purge_batch_objects = 1000        # objects per purge batch (1..=10000): checks, two registry transactions each
//! [storage.s3]            # any object_store AmazonS3ConfigKey, on top of AWS_* variables
//! endpoint = "http://127.0.0.1:9000"
//! allow_http = "true"
//! region = "us-east-1"
//!
//! [catalog.lake]
//! type = "sql"
//! uri = "sqlite:/srv/lake/catalog.db"   # also sqlite:///abs/path as PyIceberg writes it,
//!                                       # or postgres://lakedrill@db.internal:5432/lake
//! warehouse = "file:///srv/lake/warehouse"
//! name = "lake"                         # catalog_name stored in the database; default: section name
//!
//! [registry]
//! uri = "postgres://lakedrill@db.internal:5432/lakedrill"   # default: sqlite:lakedrill-registry.db
//! ```
//!
//! `[keys]` (signing key and trust store) and `[defaults."<command>"]` tables set command-line defaults
//! ([`crate::cli::config_check::apply_defaults`]); the README documents every field.
//!
//! Unknown fields are errors: a misspelt setting must never be ignored silently. A secret-looking key or a
//! URL with a password is refused ([`secret_problems`]): credentials come from the
//! environment or the AWS chain only.
//! A missing default file is an empty configuration; a missing file named with `--config` is an
//! error.

use std::collections::BTreeMap;
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Storage settings.
    #[serde(default)]
    pub storage: StorageConfig,
    /// Declared catalogs by name.
    #[serde(default)]
    pub catalog: BTreeMap<String, CatalogConfig>,
    /// The registry.
    #[serde(default)]
    pub registry: RegistryConfig,
    /// Signing key and trust store used when a command's `--key` / `--trust` is not given.
    #[serde(default)]
    pub keys: KeysConfig,
    /// The plain maintenance job each table is compared with: `[baseline."<table>"]` (the table's name as
    /// `plan` prints it, or its UUID), below the command-line options.
    #[serde(default)]
    pub baseline: BTreeMap<String, BaselineConfig>,
    /// Defaults per command: `[defaults."drill run"] metrics_file = "…"` (see [`crate::cli::config_check`]).
    #[serde(default)]
    pub defaults: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// `[rollout]`: the rollout rules' settings.
    #[serde(default)]
    pub rollout: RolloutConfig,
    /// `[[summary_excess."<table-uuid>"]]`: summary totals a writer is known to have left too high, accepted
    /// exactly (see [`SummaryExcessConfig`]).
    #[serde(default)]
    pub summary_excess: BTreeMap<String, Vec<SummaryExcessConfig>>,
    /// Progress lines on stderr (set from `-q`, not from the file).
    #[serde(skip)]
    pub progress: bool,
}

/// One `[[summary_excess."<table-uuid>"]]` entry: the operator's statement that from the snapshot committed at
/// `since` on, the table's snapshot summaries carry `total` exactly `excess` above what their manifests hold,
/// because a writer over-counted it once (the totals are carried from commit to commit). Only that exact excess
/// is accepted, on `snapshot` and the snapshots descending from it: a manifest list that loses entries later
/// changes the excess and is refused again ([`crate::table::counts::check_snapshot_totals`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryExcessConfig {
    /// The first snapshot that carries the excess: only it and the snapshots descending from it are covered.
    pub snapshot: i64,
    /// Its commit time (RFC 3339): what covers its descendants once it has left the metadata.
    pub since: String,
    /// `total-data-files`, `total-delete-files` or `total-records`.
    pub total: String,
    /// How far above the manifests' count the total is (at least 1).
    pub excess: u64,
    /// Why it is accepted (the writer, its bug); printed by every `plan` of the table.
    pub reason: String,
}

/// The summary totals [`SummaryExcessConfig::total`] may name.
pub const SUMMARY_TOTALS: [&str; 3] = ["total-data-files", "total-delete-files", "total-records"];

/// `[storage]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// The most storage requests in flight at once.
    pub io_concurrency: Option<NonZeroUsize>,
    /// S3 settings (object_store `AmazonS3ConfigKey` names).
    #[serde(default)]
    pub s3: BTreeMap<String, String>,
    /// Google Cloud Storage settings for `gs://` (object_store `GoogleConfigKey` names).
    #[serde(default)]
    pub gcs: BTreeMap<String, String>,
    /// Azure Blob Storage settings for `az://` (object_store `AzureConfigKey` names).
    #[serde(default)]
    pub azure: BTreeMap<String, String>,
    /// The most bytes a table metadata file may have, raw or decompressed; default 512 MiB
    /// ([`crate::io::store::DEFAULT_MAX_METADATA_BYTES`]).
    pub max_metadata_bytes: Option<NonZeroU64>,
    /// Purge S3 objects with batch `DeleteObjects` requests (each key with its expected ETag); `false` sends one
    /// conditional `DeleteObject` (`If-Match`) per object, for providers that do not check per-key ETags in
    /// batches. Default `true`; a provider that answers `NotImplemented` gets single deletes either way.
    pub s3_delete_objects: Option<bool>,
    /// Re-check the objects of a purge batch on S3 after their deletes with one listing of the batch's key range
    /// (`ListObjectsV2` from just before its smallest key, 1,000 keys a page) instead of one `HEAD` each. Default
    /// `false`: a HEAD asks what a reader gets, and a read replica that still serves a deleted object keeps it
    /// `DELETE_UNKNOWN` (`drill faults` scenario `lagging-replica`); a listing does not see such a replica. `true`
    /// on a provider whose reads and listings are strongly consistent with its deletes (AWS S3): about one request
    /// per 1,000 objects instead of one per object (a listing that comes back out of key order is not trusted:
    /// its objects are HEADed).
    pub s3_recheck_by_listing: Option<bool>,
    /// Objects per purge batch, 1 to 10,000 (default 1,000: one `DeleteObjects` request on S3; a larger batch
    /// is sent as several requests of 1,000 keys, `io_concurrency` at once). Every batch re-checks holds,
    /// leases, the stop switch, the rollout stage and the run's claim inside the registry's write lock and
    /// holds that lock while its requests go out: a smaller batch lets a hold in sooner, a larger one pays those
    /// checks and its two registry transactions less often.
    pub purge_batch_objects: Option<NonZeroUsize>,
}

/// The least days of report-only observations a table needs before rollout stage `test` (seed 001: two weeks of
/// report-only comparison); `[rollout] min_report_only_days` may only raise it.
pub const MIN_REPORT_ONLY_DAYS: u32 = 14;

/// `[rollout]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutConfig {
    /// Days of report-only observations a table needs before `test`: 14 (the default) or more, never fewer.
    pub min_report_only_days: Option<u32>,
}

/// `[registry]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// `sqlite:PATH` or `postgres://USER@HOST:PORT/DATABASE`; default `sqlite:lakedrill-registry.db` beside the
    /// configuration file (a relative path is the file's neighbour; without a file, the current directory's).
    pub uri: Option<String>,
}

/// `[keys]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysConfig {
    /// The signing key (PKCS#8 PEM file): the default of every required `--key` (an optional `--key` changes what
    /// a command does, so it is never defaulted).
    pub signing_key: Option<std::path::PathBuf>,
    /// The trust store (folder of `.pub` files): the default of every `--trust`.
    pub trust: Option<std::path::PathBuf>,
}

/// `[baseline."<table>"]`: Iceberg's `expire_snapshots(older_than, retain_last)` and
/// `remove_orphan_files(older_than)` as the operator's job runs them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineConfig {
    /// A duration before now (`7d`) or an RFC 3339 time.
    pub older_than: Option<String>,
    /// At least 1.
    pub retain_last: Option<i64>,
    /// A duration before now or an RFC 3339 time.
    pub orphans_older_than: Option<String>,
}

/// `[catalog.NAME]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// Catalog type: `sql` (the JDBC schema in SQLite or PostgreSQL) or `rest` (an Iceberg REST catalog).
    #[serde(rename = "type")]
    pub kind: String,
    /// `sql`: database URL, `sqlite:PATH`, `sqlite:///PATH` or `postgres://USER@HOST:PORT/DATABASE`.
    /// `rest`: the catalog's base URL (`https://catalog.example/api/catalog`; `/v1/...` is appended).
    pub uri: String,
    /// `sql`: warehouse location (storage URI) for tables created or registered through this catalog.
    /// `rest`: the `warehouse` sent to `GET /v1/config` (a warehouse name, or for S3 Tables a table bucket).
    pub warehouse: Option<String>,
    /// `sql`: the `catalog_name` stored in the database rows; default: the section name.
    pub name: Option<String>,
    /// `rest`: how lakedrill authenticates: `oauth2` (OAuth2 client credentials `CLIENT_ID:CLIENT_SECRET`,
    /// exchanged at `<uri>/v1/oauth/tokens` or `oauth2_server_uri` for a bearer token), `bearer` (a token sent as
    /// is) or `none` (the default). The secret itself never lives in this file: it is read from the environment
    /// variable `auth_env` names.
    pub auth: Option<String>,
    /// `rest`: the environment variable holding the secret of `auth` (default
    /// `LAKEDRILL_CATALOG_<SECTION>_AUTH`, the section upper-cased with `-` as `_`).
    pub auth_env: Option<String>,
    /// `rest`: the OAuth2 scope asked for with `credential` (default `catalog`).
    pub scope: Option<String>,
    /// `rest`: where `credential` is exchanged, when not at `<uri>/v1/oauth/tokens`.
    pub oauth2_server_uri: Option<String>,
    /// `rest`: the path prefix (`/v1/<prefix>/namespaces/...`); default: what `GET /v1/config` says.
    pub prefix: Option<String>,
    /// `rest`: extra HTTP headers sent with every request (`X-Iceberg-Access-Delegation`, …).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `rest`: how `recover --into` / `restore --into` register a recovered table: `rest` (the default: the
    /// protocol's `POST /v1/{prefix}/namespaces/{ns}/register`) or `s3tables` (the S3 Tables API's
    /// `CreateTable` with the full metadata, at the `[storage.s3]` endpoint; for SeaweedFS, whose `register`
    /// serves a table without its snapshots). Either way the table is loaded back and must match.
    pub register: Option<String>,
    /// `rest`: seconds to wait for a connection to the catalog (and the OAuth2 endpoint) before giving up
    /// (default [`CatalogConfig::DEFAULT_CONNECT_TIMEOUT_SECS`]). A connection never made sent nothing.
    pub connect_timeout_secs: Option<u64>,
    /// `rest`: seconds one request may take from sending to the end of its answer (default
    /// [`CatalogConfig::DEFAULT_REQUEST_TIMEOUT_SECS`]). A catalog that accepts a request and never answers
    /// must not hold the registry's write lock, which a purge's commit is made under, for ever; a commit that
    /// times out after it was sent has an unknown outcome and is settled by reading the table again.
    pub request_timeout_secs: Option<u64>,
}

impl CatalogConfig {
    /// The default of `connect_timeout_secs`.
    pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;
    /// The default of `request_timeout_secs`.
    pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 120;

    /// The environment variable holding a REST catalog's secret (`auth_env`, or
    /// `LAKEDRILL_CATALOG_<SECTION>_AUTH`).
    #[must_use]
    pub fn auth_env_name(&self, section: &str) -> String {
        self.auth_env.clone().unwrap_or_else(|| {
            format!(
                "LAKEDRILL_CATALOG_{}_AUTH",
                section.to_ascii_uppercase().replace(['-', '.'], "_")
            )
        })
    }
}

/// `uri` with a relative SQLite path (`sqlite:PATH`, `sqlite://PATH`) made absolute under `base`; any other URI
/// as it is.
fn anchored_sqlite(uri: &str, base: &Path) -> String {
    let Some(rest) = uri.strip_prefix("sqlite://").or_else(|| uri.strip_prefix("sqlite:")) else {
        return uri.to_owned();
    };
    let (file, query) = rest.split_once('?').map_or((rest, None), |(f, q)| (f, Some(q)));
    if file.is_empty() || file.starts_with('/') || file.starts_with(':') {
        return uri.to_owned();
    }
    let joined = base.join(file);
    match query {
        Some(q) => format!("sqlite:{}?{q}", joined.display()),
        None => format!("sqlite:{}", joined.display()),
    }
}

impl SummaryExcessConfig {
    /// Checks the entry (`i` of table `uuid`) and returns `since` in milliseconds since the epoch.
    ///
    /// # Errors
    /// A sentence naming the setting and the rule it breaks.
    pub fn since_ms(&self, uuid: &str, i: usize) -> std::result::Result<i64, String> {
        let at = format!("summary_excess.\"{uuid}\"[{i}]");
        if uuid.parse::<uuid::Uuid>().is_err() {
            return Err(format!(
                "summary_excess.\"{uuid}\": the key must be the table's UUID (as `plan` prints it)"
            ));
        }
        if !SUMMARY_TOTALS.contains(&self.total.as_str()) {
            return Err(format!(
                "{at}.total = {:?}: must be one of {}",
                self.total,
                SUMMARY_TOTALS.join(", ")
            ));
        }
        if self.excess == 0 {
            return Err(format!("{at}.excess = 0: must be at least 1"));
        }
        if self.reason.trim().is_empty() {
            return Err(format!(
                "{at}.reason is empty: say which writer over-counted and why the excess is safe to accept"
            ));
        }
        chrono::DateTime::parse_from_rfc3339(&self.since)
            .map(|t| t.timestamp_millis())
            .map_err(|e| format!("{at}.since = {:?}: not an RFC 3339 time ({e})", self.since))
    }
}

impl Config {
    /// Reads a configuration file. `explicit` says whether the user named it (then it must exist).
    ///
    /// # Errors
    /// [`Error::Config`] naming the file and the field.
    pub fn load(path: &Path, explicit: bool) -> Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Config::default());
            }
            Err(e) => return Err(Error::io("read configuration file", path, e)),
        };
        let raw: toml::Table = toml::from_str(&text).map_err(|e| Error::Config {
            file: path.display().to_string(),
            reason: e.to_string(),
        })?;
        // Credentials come from the environment or the AWS chain only; a file that holds one is refused
        // before anything else is read from it.
        if let Some(reason) = secret_problems(&raw).into_iter().next() {
            return Err(Error::Config {
                file: path.display().to_string(),
                reason,
            });
        }
        let mut cfg: Config = toml::from_str(&text).map_err(|e| Error::Config {
            file: path.display().to_string(),
            reason: e.to_string(),
        })?;
        // A relative SQLite path (the registry's, the default one included, or a SQL catalog's) is the file's
        // neighbour, not the working directory's: the same `--config` run from another folder must reach the
        // same registry, or its leases, holds and checkpoints would protect nothing there.
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
        let base = std::path::absolute(folder.unwrap_or_else(|| Path::new(".")))
            .map_err(|e| Error::io("resolve the configuration file's folder", path, e))?;
        cfg.registry.uri = Some(anchored_sqlite(&cfg.registry_uri(), &base));
        for c in cfg.catalog.values_mut() {
            c.uri = anchored_sqlite(&c.uri, &base);
        }
        if let Some(n) = cfg.storage.purge_batch_objects
            && n.get() > MAX_PURGE_BATCH_OBJECTS
        {
            return Err(Error::Config {
                file: path.display().to_string(),
                reason: format!(
                    "storage.purge_batch_objects = {n}: at most {MAX_PURGE_BATCH_OBJECTS} (a batch holds the \
                     registry's write lock while its requests go out)"
                ),
            });
        }
        for (uuid, entries) in &cfg.summary_excess {
            for (i, e) in entries.iter().enumerate() {
                if let Err(reason) = e.since_ms(uuid, i) {
                    return Err(Error::Config {
                        file: path.display().to_string(),
                        reason,
                    });
                }
            }
        }
        if let Some(d) = cfg.rollout.min_report_only_days
            && i64::from(d) < i64::from(MIN_REPORT_ONLY_DAYS)
        {
            return Err(Error::Config {
                file: path.display().to_string(),
                reason: format!(
                    "rollout.min_report_only_days = {d}: at least {MIN_REPORT_ONLY_DAYS} (the report-only period can only be made longer)"
                ),
            });
        }
        for (name, c) in &cfg.catalog {
            let bad = |reason: String| Error::Config {
                file: path.display().to_string(),
                reason,
            };
            match c.kind.as_str() {
                "sql" => {
                    for (key, set) in [
                        ("auth", c.auth.is_some()),
                        ("auth_env", c.auth_env.is_some()),
                        ("scope", c.scope.is_some()),
                        ("oauth2_server_uri", c.oauth2_server_uri.is_some()),
                        ("prefix", c.prefix.is_some()),
                        ("headers", !c.headers.is_empty()),
                        ("register", c.register.is_some()),
                    ] {
                        if set {
                            return Err(bad(format!(
                                "catalog.{name}.{key}: only a \"rest\" catalog takes it (this one is \"sql\")"
                            )));
                        }
                    }
                }
                "rest" => {
                    if !(c.uri.starts_with("http://") || c.uri.starts_with("https://")) {
                        return Err(bad(format!(
                            "catalog.{name}.uri = {:?}: a REST catalog's uri is its http:// or https:// base URL",
                            c.uri
                        )));
                    }
                    if let Some(a) = c.auth.as_deref().filter(|a| !["oauth2", "bearer", "none"].contains(a)) {
                        return Err(bad(format!(
                            "catalog.{name}.auth = {a:?}: \"oauth2\", \"bearer\" or \"none\""
                        )));
                    }
                    if c.name.is_some() {
                        return Err(bad(format!(
                            "catalog.{name}.name: only a \"sql\" catalog takes it (the REST catalog names its tables)"
                        )));
                    }
                    if let Some(r) = c.register.as_deref().filter(|r| !["rest", "s3tables"].contains(r)) {
                        return Err(bad(format!(
                            "catalog.{name}.register = {r:?}: \"rest\" (the REST protocol's register) or \"s3tables\" \
                             (the S3 Tables API's CreateTable)"
                        )));
                    }
                }
                other => {
                    return Err(bad(format!("catalog.{name}.type = {other:?}: \"sql\" or \"rest\"")));
                }
            }
        }
        Ok(cfg)
    }

    /// Storage options derived from `[storage]`.
    #[must_use]
    pub fn storage_options(&self) -> StorageOptions {
        let mut o = StorageOptions {
            s3: self.storage.s3.clone(),
            gcs: self.storage.gcs.clone(),
            azure: self.storage.azure.clone(),
            progress: self.progress,
            ..StorageOptions::default()
        };
        if let Some(n) = self.storage.io_concurrency {
            o.io_concurrency = n;
        }
        if let Some(n) = self.storage.max_metadata_bytes {
            o.max_metadata_bytes = n.get();
        }
        if let Some(b) = self.storage.s3_delete_objects {
            o.s3_delete_objects = b;
        }
        if let Some(b) = self.storage.s3_recheck_by_listing {
            o.s3_recheck_by_listing = b;
        }
        if let Some(n) = self.storage.purge_batch_objects {
            o.purge_batch_objects = n.get().min(MAX_PURGE_BATCH_OBJECTS);
        }
        o
    }

    /// The registry URI.
    #[must_use]
    pub fn registry_uri(&self) -> String {
        self.registry
            .uri
            .clone()
            .unwrap_or_else(|| "sqlite:lakedrill-registry.db".to_owned())
    }

    /// The catalog declared under `name`.
    ///
    /// # Errors
    /// [`Error::Config`] when no such catalog is declared.
    pub fn catalog(&self, name: &str) -> Result<&CatalogConfig> {
        self.catalog.get(name).ok_or_else(|| Error::Config {
            file: "--catalog".into(),
            reason: format!(
                "no catalog {name:?} is declared in the configuration (declared: {:?})",
                self.catalog.keys().collect::<Vec<_>>()
            ),
        })
    }
}
/// What a [`crate::io::store::Storage`] needs to know beyond the URIs themselves.
#[derive(Debug, Clone)]
pub struct StorageOptions {
    /// Extra settings for S3 (`endpoint`, `allow_http`, `region`, `access_key_id`, …),
    /// applied on top of the standard `AWS_*` environment variables.
    pub s3: BTreeMap<String, String>,
    /// Extra settings for `gs://` (`[storage.gcs]`), on top of the `GOOGLE_*` environment variables.
    pub gcs: BTreeMap<String, String>,
    /// Extra settings for `az://` (`[storage.azure]`), on top of the `AZURE_*` environment variables.
    pub azure: BTreeMap<String, String>,
    /// The most requests in flight at once, across all objects.
    pub io_concurrency: NonZeroUsize,
    /// Print progress lines on stderr during long runs (sealing, verifying).
    pub progress: bool,
    /// The most bytes a table metadata file may have, raw or decompressed (`[storage] max_metadata_bytes`,
    /// default [`DEFAULT_MAX_METADATA_BYTES`]). A bigger one is refused naming it, before it is read whole.
    pub max_metadata_bytes: u64,
    /// Purge S3 objects with `DeleteObjects` batches (`[storage] s3_delete_objects`, default `true`).
    pub s3_delete_objects: bool,
    /// Re-check purge batches on S3 by listing (`[storage] s3_recheck_by_listing`, default `false`).
    pub s3_recheck_by_listing: bool,
    /// Objects per purge batch (`[storage] purge_batch_objects`, default [`DEFAULT_PURGE_BATCH_OBJECTS`], at
    /// most [`MAX_PURGE_BATCH_OBJECTS`]).
    pub purge_batch_objects: usize,
}

/// The most objects in one purge batch (on S3: ten `DeleteObjects` requests of 1,000 keys, sent concurrently).
pub const MAX_PURGE_BATCH_OBJECTS: usize = 10_000;

/// The default objects per purge batch: one S3 `DeleteObjects` request.
pub const DEFAULT_PURGE_BATCH_OBJECTS: usize = 1000;

/// The default of [`StorageOptions::max_metadata_bytes`]: 512 MiB, far above any real metadata file (a table
/// of 10,000 snapshots writes a few tens of MiB) and far below what would exhaust a host.
pub const DEFAULT_MAX_METADATA_BYTES: u64 = 512 << 20;

impl Default for StorageOptions {
    fn default() -> Self {
        Self {
            s3: BTreeMap::new(),
            gcs: BTreeMap::new(),
            azure: BTreeMap::new(),
            io_concurrency: NonZeroUsize::new(16).unwrap_or(NonZeroUsize::MIN),
            progress: false,
            max_metadata_bytes: DEFAULT_MAX_METADATA_BYTES,
            s3_delete_objects: true,
            s3_recheck_by_listing: false,
            purge_batch_objects: DEFAULT_PURGE_BATCH_OBJECTS,
        }
    }
}

/// Words that mark a configuration key as a secret (compared case-insensitively, `-` read as `_`).
const SECRET_WORDS: &[&str] = &[
    "secret",
    "master_key",
    "customer_key",
    "encryption_key",
    "password",
    "passwd",
    "token",
    "credential",
    "access_key",
    "accesskey",
    "api_key",
    "apikey",
    "private_key",
    "sas_key",
    "account_key",
];

/// Problems with secrets in a parsed configuration tree: secret-looking keys and URLs with passwords.
#[must_use]
pub fn secret_problems(raw: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    walk_secrets(raw, "", &mut out);
    out
}

fn walk_secrets(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in t {
        let field = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let norm = k.to_ascii_lowercase().replace('-', "_");
        if let Some(w) = SECRET_WORDS.iter().find(|w| norm.contains(**w)) {
            out.push(format!(
                "{field}: looks like a credential ({w:?}); lakedrill never reads credentials from its configuration \
                 file — set them in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) \
                 or use the standard AWS chain (profile, web identity, instance role), and remove this key"
            ));
            continue;
        }
        match v {
            toml::Value::Table(t) => walk_secrets(t, &field, out),
            toml::Value::String(s) => {
                if let Ok(u) = url::Url::parse(s) {
                    // A password in the authority, or in the query (sqlx reads `?password=`, and `sslpassword`).
                    let in_query = u.query_pairs().find(|(q, _)| {
                        let q = q.to_ascii_lowercase().replace('-', "_");
                        SECRET_WORDS.iter().any(|w| q.contains(*w))
                    });
                    if u.password().is_some() {
                        out.push(format!(
                            "{field}: the URL carries a password; put credentials in the environment, not in the file"
                        ));
                    } else if let Some((q, _)) = in_query {
                        out.push(format!(
                            "{field}: the URL carries a credential in its query ({q}=…); put credentials in the \
                             environment (PGPASSWORD, ~/.pgpass), not in the file"
                        ));
                    }
                }
                // A header that carries a credential (`Authorization`, `X-Api-Key`): the value is the secret.
                let header = prefix.ends_with(".headers") || prefix == "headers";
                if header && (norm == "authorization" || norm == "proxy_authorization" || norm.contains("cookie")) {
                    out.push(format!(
                        "{field}: an HTTP header carrying a credential; use the catalog's `auth` with its secret in \
                         the environment (`auth_env`), not a header in the file"
                    ));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config> {
        let dir = tempfile::tempdir().map_err(|e| Error::Internal(e.to_string()))?;
        let path = dir.path().join("lakedrill.toml");
        std::fs::write(&path, text).map_err(|e| Error::io("write", &path, e))?;
        Config::load(&path, true)
    }

    /// The same `--config` run from two folders reached two registries: the default `lakedrill-registry.db` (and
    /// any relative `sqlite:` path) was the working directory's, so a lease added from one folder protected nothing
    /// in a plan run from the other. Relative SQLite paths are now the configuration file's neighbours.
    #[test]
    fn relative_sqlite_paths_are_the_configuration_files_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lakedrill.toml");
        let base = std::path::absolute(dir.path()).unwrap();
        std::fs::write(
            &path,
            "[catalog.c]\ntype = \"sql\"\nuri = \"sqlite:cat/c.db?mode=rw\"\nwarehouse = \"/w\"\n",
        )
        .unwrap();
        let cfg = Config::load(&path, true).unwrap();
        assert_eq!(
            cfg.registry_uri(),
            format!("sqlite:{}", base.join("lakedrill-registry.db").display())
        );
        assert_eq!(
            cfg.catalog["c"].uri,
            format!("sqlite:{}?mode=rw", base.join("cat/c.db").display())
        );
        std::fs::write(&path, "[registry]\nuri = \"sqlite://reg/r.db\"\n").unwrap();
        assert_eq!(
            Config::load(&path, true).unwrap().registry_uri(),
            format!("sqlite:{}", base.join("reg/r.db").display())
        );
        for kept in ["sqlite:/abs/r.db", "sqlite:///abs/r.db", "postgres://u@h:5432/db"] {
            std::fs::write(&path, format!("[registry]\nuri = \"{kept}\"\n")).unwrap();
            assert_eq!(Config::load(&path, true).unwrap().registry_uri(), kept);
        }
    }

    #[test]
    fn purge_batch_objects_defaults_to_one_delete_objects_request_and_refuses_more_than_ten() {
        let default = load("").map(|c| c.storage_options().purge_batch_objects);
        assert_eq!(default.ok(), Some(DEFAULT_PURGE_BATCH_OBJECTS));
        let set = load("[storage]\npurge_batch_objects = 64\n").map(|c| c.storage_options().purge_batch_objects);
        assert_eq!(set.ok(), Some(64));
        match load("[storage]\npurge_batch_objects = 10001\n") {
            Err(Error::Config { reason, .. }) => {
                assert!(reason.contains("storage.purge_batch_objects = 10001"), "{reason}");
            }
            other => panic!("10,001 objects per batch was accepted: {other:?}"),
        }
        assert!(
            load("[storage]\npurge_batch_objects = 0\n").is_err(),
            "0 objects per batch"
        );
    }
}
