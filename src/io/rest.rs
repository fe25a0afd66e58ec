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
    pub async fn commit(&self, ident: &TableIdent, expected: &str, new: &TableMetadata) -> Result<String> {
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
                r.metadata_location
                    .ok_or_else(|| self.err(format!("commit to {ident}: the answer names no metadata location")))
            }
            409 => Err(self.err(format!(
                "commit to {ident} refused (HTTP 409): a requirement failed, another writer committed first: the \
                 commit lost the race, nothing changed"
            ))),
            _ => Err(self.refusal(&format!("commit to {ident}"), status, &body)),
        }
    }
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
