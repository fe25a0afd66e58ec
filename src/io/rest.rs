//! Iceberg REST catalogs (`[catalog.NAME] type = "rest"`): the REST catalog protocol's few requests lakedrill
//! needs, sent with the `reqwest` client object_store already builds and the iceberg crate's serde types.
//!
//! Why not `iceberg-catalog-rest`: lakedrill commits ref and snapshot changes (quarantine tags, the purge's
//! snapshot removal, `rollback`, `set-current`, `quarantine release`) with requirements of its own choosing, and
//! a concurrent writer must make such a commit fail, never be re-applied on top. The crate (0.10) sends commits
//! only through `Transaction`, which has no ref or snapshot-removal action, retries conflicts by re-applying, and
//! whose `TableCommit` cannot be built outside the crate; its HTTP client is private. The protocol requests are
//! small and stable: `GET /v1/config`, the OAuth2 client-credentials exchange, `GET` (load) and `POST` (commit)
//! of `/v1/{prefix}/namespaces/{ns}/tables/{table}`, and the namespace and table listings.
//!
//! A commit is built from the metadata lakedrill computed: the difference to the catalog's current metadata must
//! be refs set or removed and snapshots removed (anything else is refused, naming it), sent as
//! `set-snapshot-ref` / `remove-snapshot-ref` / `remove-snapshots` updates with the requirements
//! `assert-table-uuid` and `assert-ref-snapshot-id` for every ref of the current metadata (and "absent" for every
//! ref it creates): any concurrent change to a ref makes the server answer 409, reported as a lost race.
//! Secrets (the OAuth2 client secret or the bearer token, read from the environment variable `auth_env` names)
//! never appear in errors or output.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::spec::TableMetadata;
use iceberg::{TableRequirement, TableUpdate};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::config::CatalogConfig;
use crate::error::{Error, Result};
use crate::io::ident::TableIdent;

/// An open REST catalog (cheap to clone; one HTTP client and token per catalog).
#[derive(Debug, Clone)]
pub struct RestCatalog {
    section: String,
    base: String,
    prefix: Option<String>,
    headers: BTreeMap<String, String>,
    client: reqwest::Client,
    auth: Arc<Mutex<Option<String>>>,
    credential: Option<(String, String)>,
    scope: String,
    token_uri: String,
    auth_var: String,
    warehouse: Option<String>,
    register: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigResponse {
    #[serde(default)]
    defaults: BTreeMap<String, String>,
    #[serde(default)]
    overrides: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct TokenResponse {
    access_token: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct LoadTableResponse {
    metadata_location: Option<String>,
    metadata: TableMetadata,
}

#[derive(Debug, Deserialize)]
struct ListNamespacesResponse {
    namespaces: Vec<Vec<String>>,
    #[serde(default, rename = "next-page-token")]
    next_page_token: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Identifier {
    namespace: Vec<String>,
    name: String,
}

#[derive(Debug, Deserialize)]
struct ListTablesResponse {
    identifiers: Vec<Identifier>,
    #[serde(default, rename = "next-page-token")]
    next_page_token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorModel {
    message: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorResponse {
    #[serde(default)]
    error: ErrorModel,
}

/// A table loaded through the catalog: its metadata location and the metadata the catalog returned.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The current metadata location.
    pub metadata_location: String,
    /// The current metadata.
    pub metadata: TableMetadata,
}

/// Percent-encodes one path segment (RFC 3986 unreserved characters stay).
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl RestCatalog {
    fn err(&self, reason: impl Into<String>) -> Error {
        Error::Catalog {
            catalog: self.section.clone(),
            reason: reason.into(),
            source: None,
        }
    }

    /// Opens the REST catalog `[catalog.<section>]`: reads `GET /v1/config` (for the prefix) and, with a
    /// credential, exchanges it for a token.
    ///
    /// # Errors
    /// [`Error::Catalog`] naming the catalog: unreachable, refused credentials (HTTP 401/403), an answer that is
    /// not the protocol's.
    pub async fn open(section: &str, cfg: &CatalogConfig) -> Result<Self> {
        let base = cfg.uri.trim_end_matches('/').to_owned();
        let err = |reason: String| Error::Catalog {
            catalog: section.to_owned(),
            reason,
            source: None,
        };
        // The secret comes from the environment, never from the file (README "Configuration").
        let var = cfg.auth_env_name(section);
        let secret = || {
            std::env::var(&var).map_err(|_| {
                err(format!(
                    "catalog.{section}.auth = {:?} needs its secret in the environment variable {var}, which is not set",
                    cfg.auth.as_deref().unwrap_or_default()
                ))
            })
        };
        let (credential, token) = match cfg.auth.as_deref() {
            Some("oauth2") => {
                let s = secret()?;
                let (id, secret) = s
                    .split_once(':')
                    .ok_or_else(|| err(format!("{var} must hold CLIENT_ID:CLIENT_SECRET for OAuth2")))?;
                (Some((id.to_owned(), secret.to_owned())), None)
            }
            Some("bearer") => (None, Some(secret()?)),
            _ => (None, None),
        };
        let mut cat = Self {
            section: section.to_owned(),
            token_uri: cfg
                .oauth2_server_uri
                .clone()
                .unwrap_or_else(|| format!("{base}/v1/oauth/tokens")),
            base,
            prefix: cfg.prefix.clone(),
            headers: cfg.headers.clone(),
            client: reqwest::Client::new(),
            auth: Arc::new(Mutex::new(token)),
            credential,
            scope: cfg.scope.clone().unwrap_or_else(|| "catalog".to_owned()),
            auth_var: var.clone(),
            warehouse: cfg.warehouse.clone(),
            register: cfg.register.clone(),
        };
        if cat.credential.is_some() {
            cat.fetch_token().await?;
        }
        let mut url = format!("{}/v1/config", cat.base);
        if let Some(w) = &cfg.warehouse {
            url.push_str(&format!("?warehouse={}", segment(w)));
        }
        let (status, body) = cat.send(reqwest::Method::GET, &url, None).await?;
        if status != 200 {
            return Err(cat.refusal("GET /v1/config", status, &body));
        }
        let c: ConfigResponse = serde_json::from_slice(&body)
            .map_err(|e| cat.err(format!("GET /v1/config: not a REST catalog configuration ({e})")))?;
        if cat.prefix.is_none() {
            cat.prefix = c
                .overrides
                .get("prefix")
                .or_else(|| c.defaults.get("prefix"))
                .cloned()
                .filter(|p| !p.is_empty());
        }
        Ok(cat)
    }

    /// The catalog's name in the configuration.
    #[must_use]
    pub fn section(&self) -> &str {
        &self.section
    }

    async fn fetch_token(&self) -> Result<()> {
        let Some((id, secret)) = &self.credential else {
            return Ok(());
        };
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("client_id", id)
            .append_pair("client_secret", secret)
            .append_pair("scope", &self.scope)
            .finish();
        let resp = self
            .client
            .post(&self.token_uri)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .map_err(|e| self.err(format!("cannot reach the OAuth2 endpoint {}: {e}", self.token_uri)))?;
        let status = resp.status().as_u16();
        let body = resp.bytes().await.unwrap_or_default();
        if status != 200 {
            return Err(self.err(format!(
                "the OAuth2 endpoint {} refused the client credentials (HTTP {status}): check the secret in {}",
                self.token_uri, self.auth_var
            )));
        }
        let t: TokenResponse = serde_json::from_slice(&body).map_err(|e| {
            self.err(format!(
                "the OAuth2 endpoint {} gave no access token ({e})",
                self.token_uri
            ))
        })?;
        *self.auth.lock().await = Some(t.access_token);
        Ok(())
    }

    /// One request; the bearer token and the configured headers are added. Returns the status and the body.
    async fn send(&self, method: reqwest::Method, url: &str, json: Option<Vec<u8>>) -> Result<(u16, bytes::Bytes)> {
        let mut req = self.client.request(method.clone(), url);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(t) = self.auth.lock().await.as_ref() {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(b) = json {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| self.err(format!("cannot reach {method} {url}: {}", without_url(&e))))?;
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| self.err(format!("{method} {url}: unreadable answer: {}", without_url(&e))))?;
        Ok((status, body))
    }

    fn refusal(&self, what: &str, status: u16, body: &[u8]) -> Error {
        let e: ErrorResponse = serde_json::from_slice(body).unwrap_or_default();
        let detail = match (e.error.kind, e.error.message) {
            (Some(k), Some(m)) => format!("{k}: {m}"),
            (None, Some(m)) => m,
            (Some(k), None) => k,
            (None, None) => String::from_utf8_lossy(body).chars().take(300).collect(),
        };
        let hint = match status {
            401 | 403 => format!(
                " (authentication refused: check catalog.{}.auth and {})",
                self.section, self.auth_var
            ),
            _ => String::new(),
        };
        self.err(format!("{what}: HTTP {status}{hint}: {detail}"))
    }

    fn v1(&self) -> String {
        match &self.prefix {
            Some(p) => format!("{}/v1/{}", self.base, segment(p)),
            None => format!("{}/v1", self.base),
        }
    }

    fn table_url(&self, ident: &TableIdent) -> String {
        let ns: Vec<String> = ident.namespace.split('.').map(segment).collect();
        format!(
            "{}/namespaces/{}/tables/{}",
            self.v1(),
            ns.join("%1F"),
            segment(&ident.name)
        )
    }

    /// Loads a table: its current metadata location and metadata.
    ///
    /// # Errors
    /// [`Error::Catalog`] naming the catalog and the table (absent, refused, unreadable).
    pub async fn load(&self, ident: &TableIdent) -> Result<Loaded> {
        let url = self.table_url(ident);
        let (status, body) = self.send(reqwest::Method::GET, &url, None).await?;
        if status == 404 {
            return Err(self.err(format!("table {ident} does not exist")));
        }
        if status != 200 {
            return Err(self.refusal(&format!("load table {ident}"), status, &body));
        }
        let r: LoadTableResponse = serde_json::from_slice(&body)
            .map_err(|e| self.err(format!("load table {ident}: not a LoadTableResult ({e})")))?;
        let metadata_location = r
            .metadata_location
            .ok_or_else(|| self.err(format!("table {ident} has no metadata location (a staged table?)")))?;
        Ok(Loaded {
            metadata_location,
            metadata: r.metadata,
        })
    }

    /// Whether the catalog has a table of that name (for refusing a registration before anything is written).
    ///
    /// # Errors
    /// [`Error::Catalog`] when the catalog answers neither 200 nor 404.
    pub async fn exists(&self, ident: &TableIdent) -> Result<bool> {
        let url = self.table_url(ident);
        let (status, body) = self.send(reqwest::Method::GET, &url, None).await?;
        match status {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(self.refusal(&format!("look up table {ident}"), status, &body)),
        }
    }

    /// The current metadata location of a table.
    ///
    /// # Errors
    /// See [`RestCatalog::load`].
    pub async fn metadata_location(&self, ident: &TableIdent) -> Result<String> {
        Ok(self.load(ident).await?.metadata_location)
    }

    /// Every table of the catalog (every namespace, nested ones included) with its metadata location.
    ///
    /// # Errors
    /// [`Error::Catalog`] when a listing or a load fails.
    pub async fn tables(&self) -> Result<Vec<(TableIdent, String)>> {
        let mut namespaces = Vec::new();
        let mut todo: Vec<Option<Vec<String>>> = vec![None];
        while let Some(parent) = todo.pop() {
            let mut token: Option<String> = None;
            loop {
                let mut url = format!("{}/namespaces", self.v1());
                let mut q = Vec::new();
                if let Some(p) = &parent {
                    q.push(format!(
                        "parent={}",
                        p.iter().map(|s| segment(s)).collect::<Vec<_>>().join("%1F")
                    ));
                }
                if let Some(t) = &token {
                    q.push(format!("pageToken={}", segment(t)));
                }
                if !q.is_empty() {
                    url.push('?');
                    url.push_str(&q.join("&"));
                }
                let (status, body) = self.send(reqwest::Method::GET, &url, None).await?;
                if status != 200 {
                    return Err(self.refusal("list namespaces", status, &body));
                }
                let r: ListNamespacesResponse = serde_json::from_slice(&body)
                    .map_err(|e| self.err(format!("list namespaces: unreadable answer ({e})")))?;
                for ns in r.namespaces {
                    // A server that ignores `parent` lists the same namespaces again: each is visited once.
                    if !ns.is_empty() && !namespaces.contains(&ns) {
                        todo.push(Some(ns.clone()));
                        namespaces.push(ns);
                    }
                }
                match r.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
        }
        let mut out = Vec::new();
        for ns in namespaces {
            let mut token: Option<String> = None;
            loop {
                let mut url = format!(
                    "{}/namespaces/{}/tables",
                    self.v1(),
                    ns.iter().map(|s| segment(s)).collect::<Vec<_>>().join("%1F")
                );
                if let Some(t) = &token {
                    url.push_str(&format!("?pageToken={}", segment(t)));
                }
                let (status, body) = self.send(reqwest::Method::GET, &url, None).await?;
                if status != 200 {
                    return Err(self.refusal("list tables", status, &body));
                }
                let r: ListTablesResponse = serde_json::from_slice(&body)
                    .map_err(|e| self.err(format!("list tables: unreadable answer ({e})")))?;
                for id in r.identifiers {
                    let ident = TableIdent {
                        namespace: id.namespace.join("."),
                        name: id.name,
                    };
                    let md = self.metadata_location(&ident).await?;
                    out.push((ident, md));
                }
                match r.next_page_token.filter(|t| !t.is_empty()) {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
        }
        Ok(out)
    }

    /// Commits `new` (computed by lakedrill from the metadata at `expected`) as a REST commit with requirements:
    /// see the module documentation. Returns the new metadata location.
    ///
    /// # Errors
    /// [`Error::Catalog`] when the table moved since `expected` or the server refuses a requirement (409: the
    /// commit lost the race, nothing changed), or when `new` differs from the current metadata in more than refs
    /// and removed snapshots.
    ///
    /// A REST server applies the updates to the table as it is when the commit arrives, and requirements can
    /// only pin refs lakedrill knows of: a ref another writer created between lakedrill's read and its commit
    /// on a snapshot the commit removes is silently dropped by the server (Iceberg's metadata builder removes
    /// refs to removed snapshots). So the answer is checked: when the new metadata's log shows another commit
    /// in between, that generation is read, and refs it had on a removed snapshot that are gone now are an
    /// [`Error::Corrupt`] naming them (the caller must not delete anything).
    pub async fn commit(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        expected: &str,
        new: &TableMetadata,
    ) -> Result<String> {
        let current = self.load(ident).await?;
        if current.metadata_location != expected {
            return Err(self.err(format!(
                "table {ident} moved from {expected} to {} since it was read: the commit lost the race",
                current.metadata_location
            )));
        }
        let (requirements, updates) =
            commit_request(&current.metadata, new).map_err(|why| self.err(format!("table {ident}: {why}")))?;
        if updates.is_empty() {
            return Ok(current.metadata_location);
        }
        let body = serde_json::to_vec(&serde_json::json!({
            "identifier": {"namespace": ident.namespace.split('.').collect::<Vec<_>>(), "name": ident.name},
            "requirements": requirements,
            "updates": updates,
        }))
        .map_err(|e| Error::Internal(format!("encode a REST commit: {e}")))?;
        let (status, body) = self
            .send(reqwest::Method::POST, &self.table_url(ident), Some(body))
            .await?;
        match status {
            200 => {
                let r: LoadTableResponse = serde_json::from_slice(&body)
                    .map_err(|e| self.err(format!("commit to {ident}: unreadable answer ({e})")))?;
                let loc = r
                    .metadata_location
                    .ok_or_else(|| self.err(format!("commit to {ident}: the answer names no metadata location")))?;
                let removed: std::collections::BTreeSet<i64> = current
                    .metadata
                    .snapshots()
                    .map(|s| s.snapshot_id())
                    .filter(|id| new.snapshot_by_id(*id).is_none())
                    .collect();
                if !removed.is_empty() {
                    let known: std::collections::BTreeSet<String> = refs_of(&current.metadata)
                        .map_err(|why| self.err(why))?
                        .into_keys()
                        .collect();
                    self.check_nothing_dropped(storage, ident, (expected, &known), &loc, &r.metadata, &removed)
                        .await?;
                }
                Ok(loc)
            }
            409 => Err(self.err(format!(
                "commit to {ident} refused (HTTP 409): a requirement failed, another writer committed first: the \
                 commit lost the race, nothing changed"
            ))),
            _ => Err(self.refusal(&format!("commit to {ident}"), status, &body)),
        }
    }
}

impl RestCatalog {
    /// After a commit that removed `removed` from the generation at `expected` (whose refs were `known`): when
    /// the new metadata's log names another generation as its parent, the commits in between are read and any
    /// ref of theirs lakedrill did not know, on a removed snapshot, that the result no longer has is refused
    /// ([`RestCatalog::commit`]).
    async fn check_nothing_dropped(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        (expected, known): (&str, &std::collections::BTreeSet<String>),
        committed: &str,
        result: &TableMetadata,
        removed: &std::collections::BTreeSet<i64>,
    ) -> Result<()> {
        let same = |a: &str| {
            a == expected
                || crate::model::location::canonical_uri(a).ok() == crate::model::location::canonical_uri(expected).ok()
        };
        let log: Vec<&str> = result.metadata_log().iter().map(|m| m.metadata_file.as_str()).collect();
        let Some(parent) = log.last() else {
            return Err(Error::corrupt(
                committed,
                format!(
                    "catalog {}: the commit to {ident} removed snapshots {removed:?}, but its metadata has no \
                     metadata-log, so whether a concurrent commit referenced them cannot be decided; nothing was \
                     deleted",
                    self.section
                ),
            ));
        };
        if same(parent) {
            return Ok(());
        }
        // Every generation after the one lakedrill read (all of them, when the log does not reach back to it).
        let start = log.iter().rposition(|m| same(m)).map_or(0, |i| i + 1);
        let result_refs = refs_of(result).map_err(|why| self.err(why))?;
        let mut dropped = Vec::new();
        for m in &log[start..] {
            let uri = crate::model::location::canonical_uri(m)?;
            let bytes = storage
                .get_bounded(&uri, storage.options().max_metadata_bytes, "table metadata")
                .await?
                .bytes;
            let between: TableMetadata =
                serde_json::from_slice(&bytes).map_err(|e| Error::corrupt(&uri, format!("not table metadata: {e}")))?;
            for (name, r) in refs_of(&between).map_err(|why| self.err(why))? {
                // Refs lakedrill read were pinned by requirements or removed on purpose; only new ones count.
                if removed.contains(&r.snapshot_id) && !result_refs.contains_key(&name) && !known.contains(&name) {
                    dropped.push(format!("{name} -> {} (in {m})", r.snapshot_id));
                }
            }
        }
        if dropped.is_empty() {
            return Ok(());
        }
        dropped.sort();
        dropped.dedup();
        Err(Error::corrupt(
            committed,
            format!(
                "catalog {}: another writer committed to {ident} between lakedrill's read ({expected}) and its \
                 commit, creating ref(s) on snapshots the commit removed; the server applied the removal on top \
                 and dropped them: {}. Nothing was deleted: the snapshots' files and quarantine bundles are \
                 intact (restore a bundle with `lakedrill restore`, then re-create the refs)",
                self.section,
                dropped.join(", ")
            ),
        ))
    }

    fn namespace_url(&self, namespace: &str) -> String {
        let ns: Vec<String> = namespace.split('.').map(segment).collect();
        format!("{}/namespaces/{}", self.v1(), ns.join("%1F"))
    }

    /// Creates the namespace when the catalog does not have it.
    async fn ensure_namespace(&self, namespace: &str) -> Result<()> {
        let (status, body) = self
            .send(reqwest::Method::GET, &self.namespace_url(namespace), None)
            .await?;
        match status {
            200 => return Ok(()),
            404 => {}
            _ => return Err(self.refusal(&format!("load namespace {namespace}"), status, &body)),
        }
        let req = serde_json::json!({"namespace": namespace.split('.').collect::<Vec<_>>(), "properties": {}});
        let (status, body) = self
            .send(
                reqwest::Method::POST,
                &format!("{}/namespaces", self.v1()),
                Some(req.to_string().into_bytes()),
            )
            .await?;
        match status {
            200 | 409 => Ok(()),
            _ => Err(self.refusal(&format!("create namespace {namespace}"), status, &body)),
        }
    }

    /// Registers the table whose current metadata file is `md_location` as `ident` (the namespace is created
    /// when missing), by the route `register` names, then loads it back: the catalog must serve that metadata
    /// (table UUID, current snapshot, snapshots, refs). A registration served otherwise is dropped again.
    ///
    /// Routes: `rest` (default), the protocol's `POST /v1/{prefix}/namespaces/{ns}/register`; `s3tables`, the S3
    /// Tables API's `CreateTable` with the whole metadata JSON (`metadata.fullMetadata`) for the table bucket
    /// named by `warehouse` (SeaweedFS 4.48 serves a table registered the first way without its snapshots).
    ///
    /// # Errors
    /// [`Error::Catalog`] naming the catalog: the table exists, the server refuses, or it serves something
    /// other than what was registered.
    pub async fn register(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        md_location: &str,
        md: &TableMetadata,
    ) -> Result<()> {
        self.ensure_namespace(&ident.namespace).await?;
        match self.register.as_deref().unwrap_or("rest") {
            "s3tables" => self.register_s3tables(storage, ident, md_location).await?,
            _ => {
                let req = serde_json::json!({"name": ident.name, "metadata-location": md_location});
                let (status, body) = self
                    .send(
                        reqwest::Method::POST,
                        &format!("{}/register", self.namespace_url(&ident.namespace)),
                        Some(req.to_string().into_bytes()),
                    )
                    .await?;
                match status {
                    200 => {}
                    409 => return Err(self.err(format!("register {ident}: the table already exists"))),
                    _ => return Err(self.refusal(&format!("register {ident}"), status, &body)),
                }
            }
        }
        let served = self.load(ident).await?;
        if let Err(why) = same_table(md, &served.metadata) {
            // Leave no table behind that serves other data than the recovered metadata.
            let dropped = self
                .send(reqwest::Method::DELETE, &self.table_url(ident), None)
                .await
                .map(|(s, _)| s == 200 || s == 204)
                .unwrap_or(false);
            return Err(self.err(format!(
                "registered {ident} from {md_location}, but the catalog serves it otherwise ({why}); the \
                 registration was {}. A REST catalog must serve a registered table's metadata file as written{}",
                if dropped {
                    "dropped again"
                } else {
                    "NOT dropped: drop it by hand"
                },
                if self.register.as_deref() == Some("s3tables") {
                    ""
                } else {
                    " (SeaweedFS's register does not: set register = \"s3tables\" for it)"
                }
            )));
        }
        Ok(())
    }

    /// `CreateTable` of the S3 Tables API with the full metadata (SeaweedFS keeps and serves it).
    async fn register_s3tables(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        md_location: &str,
    ) -> Result<()> {
        let bucket = self.warehouse.clone().ok_or_else(|| {
            self.err(format!(
                "catalog.{}.register = \"s3tables\" needs catalog.{}.warehouse = the table bucket's name",
                self.section, self.section
            ))
        })?;
        let uri = crate::model::location::canonical_uri(md_location)?;
        let full: serde_json::Value = serde_json::from_slice(
            &storage
                .get_bounded(&uri, storage.options().max_metadata_bytes, "table metadata")
                .await?
                .bytes,
        )
        .map_err(|e| Error::corrupt(&uri, format!("not a metadata JSON file: {e}")))?;
        let s3t = |op: &'static str, body: serde_json::Value| async move {
            let (status, answer) = storage.s3tables(op, &body).await?;
            if status == 200 {
                Ok(answer)
            } else {
                Err(self.err(format!(
                    "S3 Tables {op} for {ident}: HTTP {status}: {}",
                    String::from_utf8_lossy(&answer).chars().take(300).collect::<String>()
                )))
            }
        };
        let listed: serde_json::Value = serde_json::from_slice(&s3t("ListTableBuckets", serde_json::json!({})).await?)
            .map_err(|e| self.err(format!("S3 Tables ListTableBuckets: unreadable answer ({e})")))?;
        let arn = listed["tableBuckets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|b| b["name"] == bucket.as_str())
            .and_then(|b| b["arn"].as_str())
            .ok_or_else(|| self.err(format!("S3 Tables has no table bucket {bucket:?}")))?
            .to_owned();
        let file = crate::model::location::file_name(md_location);
        let version: Option<u64> = file
            .trim_start_matches('v')
            .split(['-', '.'])
            .next()
            .and_then(|n| n.parse().ok());
        let mut body = serde_json::json!({
            "tableBucketARN": arn,
            "namespace": ident.namespace.split('.').collect::<Vec<_>>(),
            "name": ident.name,
            "format": "ICEBERG",
            "metadata": {"iceberg": {"tableUUID": full["table-uuid"]}, "fullMetadata": full},
            "metadataLocation": md_location,
        });
        if let Some(v) = version {
            body["metadataVersion"] = v.into();
        }
        s3t("CreateTable", body).await?;
        Ok(())
    }
}

/// Whether the catalog serves `served` for the registered `md`: table UUID, current snapshot, the snapshot ids
/// and the refs (name, snapshot) agree; otherwise what differs.
fn same_table(md: &TableMetadata, served: &TableMetadata) -> std::result::Result<(), String> {
    if md.uuid() != served.uuid() {
        return Err(format!("table-uuid {} instead of {}", served.uuid(), md.uuid()));
    }
    if md.current_snapshot_id() != served.current_snapshot_id() {
        return Err(format!(
            "current snapshot {:?} instead of {:?}",
            served.current_snapshot_id(),
            md.current_snapshot_id()
        ));
    }
    let ids = |m: &TableMetadata| {
        m.snapshots()
            .map(|s| s.snapshot_id())
            .collect::<std::collections::BTreeSet<_>>()
    };
    if ids(md) != ids(served) {
        return Err(format!(
            "{} snapshot(s) instead of the {} registered",
            ids(served).len(),
            ids(md).len()
        ));
    }
    let refs = |m: &TableMetadata| -> std::result::Result<BTreeMap<String, i64>, String> {
        Ok(refs_of(m)?.into_iter().map(|(n, r)| (n, r.snapshot_id)).collect())
    };
    if refs(md)? != refs(served)? {
        return Err(format!("refs {:?} instead of {:?}", refs(served)?, refs(md)?));
    }
    Ok(())
}

/// The reqwest error's text without the URL it embeds (a URL could carry a token in its query).
fn without_url(e: &reqwest::Error) -> String {
    let mut e2 = format!("{e}");
    if let Some(u) = e.url() {
        e2 = e2.replace(u.as_str(), "<url>");
    }
    e2
}

/// The refs of a metadata (the iceberg crate keeps them private; its JSON has them), with the `main` a table
/// written without `refs` implies at its current snapshot.
fn refs_of(md: &TableMetadata) -> std::result::Result<BTreeMap<String, iceberg::spec::SnapshotReference>, String> {
    let v = serde_json::to_value(md).map_err(|e| format!("encode metadata: {e}"))?;
    let mut refs: BTreeMap<String, iceberg::spec::SnapshotReference> = match v.get("refs") {
        Some(r) => serde_json::from_value(r.clone()).map_err(|e| format!("unreadable refs: {e}"))?,
        None => BTreeMap::new(),
    };
    if let (false, Some(id)) = (refs.contains_key("main"), md.current_snapshot_id()) {
        refs.insert(
            "main".to_owned(),
            iceberg::spec::SnapshotReference::new(
                id,
                iceberg::spec::SnapshotRetention::Branch {
                    min_snapshots_to_keep: None,
                    max_snapshot_age_ms: None,
                    max_ref_age_ms: None,
                },
            ),
        );
    }
    Ok(refs)
}

/// The requirements and updates that turn `current` into `new` (pure): refs set or removed, snapshots removed.
/// Any other difference is refused with its name.
///
/// # Errors
/// A sentence naming what differs beyond refs and removed snapshots.
pub fn commit_request(
    current: &TableMetadata,
    new: &TableMetadata,
) -> std::result::Result<(Vec<TableRequirement>, Vec<TableUpdate>), String> {
    let same = |what: &str, eq: bool| {
        if eq {
            Ok(())
        } else {
            Err(format!(
                "{what} changed: only refs and snapshot removals are committed through a REST catalog"
            ))
        }
    };
    same("the table uuid", current.uuid() == new.uuid())?;
    same("the location", current.location() == new.location())?;
    same("the format version", current.format_version() == new.format_version())?;
    same(
        "the schemas",
        current.schemas_iter().count() == new.schemas_iter().count()
            && current.current_schema_id() == new.current_schema_id(),
    )?;
    same(
        "the partition specs",
        current.partition_specs_iter().count() == new.partition_specs_iter().count()
            && current.default_partition_spec_id() == new.default_partition_spec_id(),
    )?;
    same("the properties", current.properties() == new.properties())?;
    for s in new.snapshots() {
        if current.snapshot_by_id(s.snapshot_id()).is_none() {
            return Err(format!(
                "snapshot {} is new: adding snapshots through a REST catalog is not supported",
                s.snapshot_id()
            ));
        }
    }
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: current.uuid() }];
    let mut updates = Vec::new();
    let (current_refs, new_refs) = (refs_of(current)?, refs_of(new)?);
    let current_refs: BTreeMap<&String, &iceberg::spec::SnapshotReference> = current_refs.iter().collect();
    let new_refs: BTreeMap<&String, &iceberg::spec::SnapshotReference> = new_refs.iter().collect();
    for (name, r) in &current_refs {
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: (*name).clone(),
            snapshot_id: Some(r.snapshot_id),
        });
        if !new_refs.contains_key(name) {
            updates.push(TableUpdate::RemoveSnapshotRef {
                ref_name: (*name).clone(),
            });
        }
    }
    for (name, r) in &new_refs {
        match current_refs.get(name) {
            Some(old) if old == r => {}
            Some(_) => updates.push(TableUpdate::SetSnapshotRef {
                ref_name: (*name).clone(),
                reference: (*r).clone(),
            }),
            None => {
                requirements.push(TableRequirement::RefSnapshotIdMatch {
                    r#ref: (*name).clone(),
                    snapshot_id: None,
                });
                updates.push(TableUpdate::SetSnapshotRef {
                    ref_name: (*name).clone(),
                    reference: (*r).clone(),
                });
            }
        }
    }
    let removed: Vec<i64> = current
        .snapshots()
        .map(|s| s.snapshot_id())
        .filter(|id| new.snapshot_by_id(*id).is_none())
        .collect();
    if !removed.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots { snapshot_ids: removed });
    }
    Ok((requirements, updates))
}
