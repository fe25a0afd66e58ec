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
//! be snapshots added back (`set-current --from-bundle`, judged by [`add_snapshot_refusal`]), refs set or removed
//! and snapshots removed (anything else is refused, naming it), sent as `add-snapshot` / `set-snapshot-ref` /
//! `remove-snapshot-ref` / `remove-snapshots` updates with the requirements
//! `assert-table-uuid` and `assert-ref-snapshot-id` for every ref of the current metadata (and "absent" for every
//! ref it creates): any concurrent change to a ref makes the server answer 409, reported as a lost race. A 200
//! counts as the commit made only when it names a new metadata location whose metadata carries every change
//! sent; only 409, 400, 401, 403 and 404 count as "not applied"; every other answer is settled by reading the
//! table again. The HTTP client follows no redirect (a commit's `POST` redirected by 301/302/303 would become
//! a `GET` whose 200 is the unchanged table) and has connect and request timeouts (`connect_timeout_secs`,
//! `request_timeout_secs`).
//! Secrets (the OAuth2 client secret or the bearer token, read from the environment variable `auth_env` names)
//! never appear in errors or output.

use std::collections::BTreeMap;
use std::sync::Arc;

use iceberg::spec::TableMetadata;

use crate::io::metadata::FullMetadata;
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
    auth: Arc<Mutex<Option<Token>>>,
    credential: Option<(String, String)>,
    scope: String,
    token_uri: String,
    auth_var: String,
    warehouse: Option<String>,
    register: Option<String>,
    /// The most bytes of one answer: `max_metadata_bytes` plus [`ANSWER_SLACK`].
    max_answer: u64,
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
    /// Seconds the token is valid for (RFC 6749 section 5.1, optional).
    #[serde(default)]
    expires_in: Option<u64>,
}

/// The bearer token sent with every request, and when an OAuth2 token should be fetched again.
#[derive(Clone)]
struct Token {
    value: String,
    /// `None`: a configured bearer token, or an OAuth2 token without `expires_in` (fetched again after a 401).
    refresh_at: Option<std::time::Instant>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("refresh_at", &self.refresh_at)
            .finish()
    }
}

/// How long before its `expires_in` ends an OAuth2 token is fetched again: a commit is never sent with a token
/// about to expire (a sent commit is never sent twice, so a 401 on it cannot be mended by a retry).
const TOKEN_MARGIN: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest `expires_in` lakedrill schedules a refresh for; a token said to live longer (Iceberg servers
/// answer `Long.MAX_VALUE` seconds for tokens that do not expire) is fetched again only after a 401.
const TOKEN_REFRESH_CAP: std::time::Duration = std::time::Duration::from_secs(366 * 24 * 3600);

/// When an OAuth2 token fetched at `now` and valid for `expires_in` seconds is fetched again: [`TOKEN_MARGIN`]
/// before it ends, or after half its life when that is shorter; `None` (no scheduled refresh, only the one after
/// a 401) for a life over [`TOKEN_REFRESH_CAP`] or one past what the clock can represent. Before, a huge
/// `expires_in` overflowed `Instant + Duration` and panicked while the catalog was opened.
fn refresh_at(now: std::time::Instant, expires_in: u64) -> Option<std::time::Instant> {
    let valid = std::time::Duration::from_secs(expires_in);
    if valid > TOKEN_REFRESH_CAP {
        return None;
    }
    now.checked_add(
        valid
            .checked_sub(TOKEN_MARGIN)
            .filter(|d| *d >= valid / 2)
            .unwrap_or(valid / 2),
    )
}

/// Bytes a REST answer may have beyond `max_metadata_bytes` (`[storage]`): a load-table answer holds one
/// metadata document plus its location and config; every other answer is far smaller.
const ANSWER_SLACK: u64 = 1 << 20;

/// Why an answer's body was not read ([`read_capped`]).
enum BodyFailure {
    /// It is over the bound: its length as announced, or the bytes read before it passed the bound.
    Over(u64),
    /// The transport failed while it was read.
    Read(reqwest::Error),
}

/// Reads an answer's body of at most `max` bytes: one announced longer is refused before it is read, one that
/// turns out longer as soon as the bytes read pass `max`; it is never held whole.
async fn read_capped(mut resp: reqwest::Response, max: u64) -> std::result::Result<bytes::Bytes, BodyFailure> {
    if let Some(n) = resp.content_length().filter(|n| *n > max) {
        return Err(BodyFailure::Over(n));
    }
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyFailure::Read)? {
        let len = (buf.len() + chunk.len()) as u64;
        if len > max {
            return Err(BodyFailure::Over(len));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(bytes::Bytes::from(buf))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct LoadTableResponse {
    metadata_location: Option<String>,
    /// Read as JSON first: its refs as written (the iceberg crate's model of a v1 table holds only `main`).
    metadata: serde_json::Value,
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

/// The most pages lakedrill reads of one listing (namespaces under one parent, tables of one namespace).
const MAX_PAGES: usize = 100_000;

/// The page tokens of one paginated listing so far: a server that hands out a token again, or more than
/// [`MAX_PAGES`] pages, would keep lakedrill listing for ever (the listing feeds the plan's containment check,
/// which plans only when every catalog could be listed whole).
#[derive(Default)]
struct Pages {
    seen: std::collections::HashSet<String>,
}

impl Pages {
    /// Records the `next-page-token` of the page just read; why the listing must stop, if it must.
    fn next(&mut self, token: Option<&str>) -> std::result::Result<(), String> {
        let Some(t) = token.filter(|t| !t.is_empty()) else {
            return Ok(());
        };
        if self.seen.len() + 1 >= MAX_PAGES {
            return Err(format!(
                "the catalog answered {MAX_PAGES} pages and names another; the listing cannot be completed"
            ));
        }
        if !self.seen.insert(t.to_owned()) {
            return Err(format!(
                "the catalog handed out the next-page-token {:?} a second time (it would be listed for ever); the \
                 listing cannot be completed",
                t.chars().take(100).collect::<String>()
            ));
        }
        Ok(())
    }
}

/// A request that got no answer ([`RestCatalog::send_raw`]).
#[derive(Debug)]
struct SendFailure {
    /// Whether the request may have reached the server (anything but a failure to connect).
    sent: bool,
    /// What failed, the URL named, no secret.
    why: String,
}

/// A table loaded through the catalog: its metadata location and the metadata the catalog returned.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The current metadata location.
    pub metadata_location: String,
    /// The current metadata, with every ref as written.
    pub metadata: FullMetadata,
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
    /// credential, exchanges it for a token. Every answer read from it later is bounded by `max_metadata_bytes`
    /// (`[storage]`, the bound of a metadata file: a load-table answer carries one) plus 1 MiB.
    ///
    /// # Errors
    /// [`Error::Catalog`] naming the catalog: unreachable, refused credentials (HTTP 401/403), an answer that is
    /// not the protocol's or is over the bound (naming the URL).
    pub async fn open(section: &str, cfg: &CatalogConfig, max_metadata_bytes: u64) -> Result<Self> {
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
            Some("bearer") => (
                None,
                Some(Token {
                    value: secret()?,
                    refresh_at: None,
                }),
            ),
            _ => (None, None),
        };
        let seconds = |name: &str, v: Option<u64>, default: u64| match v {
            Some(0) => Err(err(format!("catalog.{section}.{name} must be at least 1 (seconds)"))),
            Some(n) => Ok(std::time::Duration::from_secs(n)),
            None => Ok(std::time::Duration::from_secs(default)),
        };
        // Redirects are never followed: reqwest would turn a commit's POST answered 301/302/303 into a GET
        // without its body, whose 200 (the table unchanged) would read as the commit's answer; and the OAuth2
        // form carries the client secret. Timeouts: a catalog that accepts a request and never answers must not
        // keep the registry's write lock (a purge commits under it) for ever.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(seconds(
                "connect_timeout_secs",
                cfg.connect_timeout_secs,
                CatalogConfig::DEFAULT_CONNECT_TIMEOUT_SECS,
            )?)
            .timeout(seconds(
                "request_timeout_secs",
                cfg.request_timeout_secs,
                CatalogConfig::DEFAULT_REQUEST_TIMEOUT_SECS,
            )?)
            .build()
            .map_err(|e| err(format!("cannot build the HTTP client: {}", without_url(&e))))?;
        let mut cat = Self {
            section: section.to_owned(),
            token_uri: cfg
                .oauth2_server_uri
                .clone()
                .unwrap_or_else(|| format!("{base}/v1/oauth/tokens")),
            base,
            prefix: cfg.prefix.clone(),
            headers: cfg.headers.clone(),
            client,
            auth: Arc::new(Mutex::new(token)),
            credential,
            scope: cfg.scope.clone().unwrap_or_else(|| "catalog".to_owned()),
            auth_var: var.clone(),
            warehouse: cfg.warehouse.clone(),
            register: cfg.register.clone(),
            max_answer: max_metadata_bytes.saturating_add(ANSWER_SLACK),
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
        if (300..400).contains(&status) {
            return Err(self.err(format!(
                "the OAuth2 endpoint {} answered HTTP {status}, a redirect{}: lakedrill does not follow redirects \
                 (the form carries the client secret); set catalog.{}.oauth2_server_uri to the endpoint itself",
                self.token_uri,
                location_of(&resp),
                self.section
            )));
        }
        let body = match read_capped(resp, self.max_answer).await {
            Ok(b) => b,
            Err(BodyFailure::Over(n)) => return Err(self.over(&format!("POST {}", self.token_uri), n)),
            Err(BodyFailure::Read(_)) => bytes::Bytes::new(),
        };
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
        let refresh_at = t.expires_in.and_then(|s| refresh_at(std::time::Instant::now(), s));
        *self.auth.lock().await = Some(Token {
            value: t.access_token,
            refresh_at,
        });
        Ok(())
    }

    /// Fetches the OAuth2 token again when its `expires_in` is (nearly) over; nothing for other credentials.
    async fn fresh_token(&self) -> Result<()> {
        if self.credential.is_none() {
            return Ok(());
        }
        let due = match self.auth.lock().await.as_ref() {
            Some(t) => t.refresh_at.is_some_and(|at| std::time::Instant::now() >= at),
            None => true,
        };
        if due {
            self.fetch_token().await?;
        }
        Ok(())
    }

    /// One request that changes nothing or may be sent twice (reads, listings, namespace creation,
    /// registration): the bearer token and the configured headers are added, an OAuth2 token is fetched again
    /// when it has expired and once more after a 401 (then the request is sent again). Returns the status and
    /// the body. Commits go through [`RestCatalog::send_raw`] and are never sent twice.
    ///
    /// A redirect (3xx) is an error naming the URL: lakedrill follows none.
    async fn send(&self, method: reqwest::Method, url: &str, json: Option<Vec<u8>>) -> Result<(u16, bytes::Bytes)> {
        self.fresh_token().await?;
        let mut answer = self
            .send_raw(method.clone(), url, json.clone())
            .await
            .map_err(|f| self.err(f.why))?;
        if answer.0 == 401 && self.credential.is_some() {
            // The token may have been revoked or expired early: one new token, one more try.
            self.fetch_token().await?;
            answer = self
                .send_raw(method.clone(), url, json)
                .await
                .map_err(|f| self.err(f.why))?;
        }
        if (300..400).contains(&answer.0) {
            return Err(self.err(format!(
                "{method} {url}: HTTP {}, a redirect: lakedrill does not follow redirects from a REST catalog \
                 (set catalog.{}.uri to the address the catalog answers at)",
                answer.0, self.section
            )));
        }
        Ok(answer)
    }

    /// [`RestCatalog::send`], with a failure telling whether the request may have reached the server: only a
    /// failure to connect (or to build the request) means it did not; a timeout, a connection broken after the
    /// request went out or an answer that cannot be read may follow a request the server acted on.
    async fn send_raw(
        &self,
        method: reqwest::Method,
        url: &str,
        json: Option<Vec<u8>>,
    ) -> std::result::Result<(u16, bytes::Bytes), SendFailure> {
        let mut req = self.client.request(method.clone(), url);
        for (k, v) in &self.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        if let Some(t) = self.auth.lock().await.as_ref() {
            req = req.header("authorization", format!("Bearer {}", t.value));
        }
        if let Some(b) = json {
            req = req.header("content-type", "application/json").body(b);
        }
        let timed_out = |e: &reqwest::Error| {
            if e.is_timeout() {
                format!(
                    " (timed out: see catalog.{}.connect_timeout_secs and request_timeout_secs)",
                    self.section
                )
            } else {
                String::new()
            }
        };
        let resp = req.send().await.map_err(|e| SendFailure {
            sent: !(e.is_connect() || e.is_builder()),
            why: format!("cannot reach {method} {url}: {}{}", without_url(&e), timed_out(&e)),
        })?;
        let status = resp.status().as_u16();
        let body = read_capped(resp, self.max_answer).await.map_err(|f| SendFailure {
            sent: true,
            why: match f {
                BodyFailure::Read(e) => format!(
                    "{method} {url}: unreadable answer (HTTP {status}): {}{}",
                    without_url(&e),
                    timed_out(&e)
                ),
                BodyFailure::Over(n) => self.over_text(&format!("{method} {url}"), n),
            },
        })?;
        Ok((status, body))
    }

    /// An answer over [`RestCatalog::max_answer`] bytes, refused before it is read whole.
    fn over_text(&self, what: &str, n: u64) -> String {
        format!(
            "{what}: the answer is {n} bytes or more, over the limit of {} bytes (`max_metadata_bytes` under \
             [storage] in the configuration, plus {ANSWER_SLACK} for the rest of the answer): not read",
            self.max_answer
        )
    }

    fn over(&self, what: &str, n: u64) -> Error {
        self.err(self.over_text(what, n))
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
        let ns: Vec<String> = ident.namespace.iter().map(|l| segment(l)).collect();
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
        let metadata = FullMetadata::from_json_value(&metadata_location, &r.metadata).map_err(|e| {
            self.err(format!(
                "load table {ident}: not a LoadTableResult ({})",
                e.with_causes()
            ))
        })?;
        Ok(Loaded {
            metadata_location,
            metadata,
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
            let mut pages = Pages::default();
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
                let what = match &parent {
                    Some(p) => format!("list namespaces under {}", p.join(".")),
                    None => "list namespaces".to_owned(),
                };
                pages
                    .next(r.next_page_token.as_deref())
                    .map_err(|why| self.err(format!("{what}: {why}")))?;
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
            let mut pages = Pages::default();
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
                pages
                    .next(r.next_page_token.as_deref())
                    .map_err(|why| self.err(format!("list tables of namespace {}: {why}", ns.join("."))))?;
                for id in r.identifiers {
                    let ident = TableIdent {
                        namespace: id.namespace,
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
    /// [`Error::Catalog`] only when nothing changed: the table moved since `expected`, the server refused a
    /// requirement (409: the commit lost the race) or the request in a way Iceberg defines as not applied
    /// (400, 401, 403, 404; a 400 to a commit adding a snapshot back says what Iceberg's metadata builders take),
    /// the server could not be reached (no connection made), or `new` differs from the current metadata in more
    /// than snapshots added back, refs and removed snapshots, or adds one [`add_snapshot_refusal`] refuses.
    /// [`Error::Corrupt`] when a commit that added a snapshot landed with the table's last-sequence-number or
    /// next-row-id lowered.
    ///
    /// [`Error::CommitUnknown`] when the commit was sent and its outcome is unknown (the REST spec's 500, 502 and
    /// 504, any other 5xx, a 2xx other than 200, a redirect — never followed —, any other 4xx, a connection
    /// broken or timed out after the request went out, a 200 whose body cannot be read, names no new metadata
    /// location or answers with metadata that does not carry every change sent) and reading the table again
    /// does not show it applied: it may have been, or be later. When the table read again carries every change
    /// of the commit, the commit is taken as landed (and checked as below) and its location is that
    /// generation's.
    ///
    /// A REST server applies the updates to the table as it is when the commit arrives, and requirements can
    /// only pin refs lakedrill knows of: a ref another writer created between lakedrill's read and its commit
    /// on a snapshot the commit removes is silently dropped by the server (Iceberg's metadata builder removes
    /// refs to removed snapshots). So the answer is checked: when the new metadata's log shows another commit
    /// in between, that generation is read, and refs it had on a removed snapshot (dropped, or moved on to a
    /// snapshot of their own), or a snapshot lakedrill did not know descending from a removed one, are an
    /// [`Error::Corrupt`] naming them (the caller must not delete anything). Any failure of that check is an
    /// [`Error::Corrupt`] as well.
    pub async fn commit(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        expected: &str,
        new: &FullMetadata,
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
        let adds = updates.iter().any(|u| matches!(u, TableUpdate::AddSnapshot { .. }));
        let removed: std::collections::BTreeSet<i64> = current
            .metadata
            .metadata()
            .snapshots()
            .map(|s| s.snapshot_id())
            .filter(|id| new.metadata().snapshot_by_id(*id).is_none())
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({
            "identifier": {"namespace": ident.namespace, "name": ident.name},
            "requirements": requirements,
            "updates": updates,
        }))
        .map_err(|e| Error::Internal(format!("encode a REST commit: {e}")))?;
        // The token is renewed before the commit goes out, never after: a sent commit is not sent again.
        self.fresh_token().await?;
        let answered = match self
            .send_raw(reqwest::Method::POST, &self.table_url(ident), Some(body))
            .await
        {
            // A 200 counts only with the commit in it: a new metadata location whose metadata carries every
            // change sent. Anything else (the unchanged table, as a redirect followed as a GET would give) is
            // settled by reading the table again, never taken as made.
            Ok((200, body)) => match serde_json::from_slice::<LoadTableResponse>(&body) {
                Ok(LoadTableResponse {
                    metadata_location: Some(loc),
                    metadata,
                }) => match FullMetadata::from_json_value(&loc, &metadata) {
                    _ if same_location(&loc, expected) => Err(format!(
                        "commit to {ident}: HTTP 200, but the answer names the generation the commit was built \
                             on ({loc}), not a new one"
                    )),
                    Err(e) => Err(format!(
                        "commit to {ident}: HTTP 200, but the metadata it answers with ({loc}) cannot be read ({})",
                        e.with_causes()
                    )),
                    Ok(metadata) => match carries(&current.metadata, new, &metadata) {
                        Err(missing) => Err(format!(
                            "commit to {ident}: HTTP 200, but the metadata it answers with ({loc}) does not carry \
                                 the commit ({missing})"
                        )),
                        Ok(()) => Ok((loc, metadata)),
                    },
                },
                Ok(_) => Err(format!(
                    "commit to {ident}: HTTP 200, but the answer names no metadata location"
                )),
                Err(e) => Err(format!(
                    "commit to {ident}: HTTP 200, but the answer cannot be read ({e})"
                )),
            },
            Ok((409, _)) => {
                return Err(self.err(format!(
                    "commit to {ident} refused (HTTP 409): a requirement failed, another writer committed first: \
                     the commit lost the race, nothing changed"
                )));
            }
            // The answers Iceberg defines as "not applied" for a commit: 400 (malformed), 401 and 403 (refused
            // credentials), 404 (no such table), besides 409 above.
            // See: apache/iceberg core/src/main/java/org/apache/iceberg/rest/ErrorHandlers.java (CommitErrorHandler
            // and DefaultErrorHandler), and the REST spec's `updateTable` responses.
            Ok((status @ (400 | 401 | 403 | 404), body)) => {
                let refused = self.refusal(&format!("commit to {ident}"), status, &body);
                if status != 400 || !adds {
                    return Err(refused);
                }
                // The server's builder refused the snapshot added back: said with what that means.
                return Err(self.err(format!(
                    "{}; nothing changed. The catalog refused to add the snapshot back: a REST server applies \
                     `add-snapshot` with Iceberg's metadata builder, which takes only a snapshot newer than the \
                     table's last commit (a sequence number above its last-sequence-number, or no parent; a \
                     timestamp not more than a minute before its last update; v3: a first-row-id not below its \
                     next-row-id), as new writes are. `restore --into` brings the snapshot back as a new table",
                    refused
                        .to_string()
                        .trim_start_matches(&format!("catalog {}: ", self.section))
                )));
            }
            // Everything else may have been applied: any 5xx (the spec's 500/502/504 "the commit state is
            // unknown"), a 2xx other than 200 (the spec defines none for a commit), a redirect (never followed:
            // where it leads, the commit may or may not have gone), any other 4xx (a gateway's 408 or 429 says
            // nothing of what its upstream did).
            Ok((status, body)) => {
                let what = match status {
                    200..=299 => format!("commit to {ident}: HTTP {status}, not the 200 and table of a commit made"),
                    300..=399 => format!(
                        "commit to {ident}: HTTP {status}, a redirect (not followed: lakedrill never sends a commit twice)"
                    ),
                    _ => self.refusal(&format!("commit to {ident}"), status, &body).to_string(),
                };
                Err(what)
            }
            Err(f) if !f.sent => return Err(self.err(f.why)),
            Err(f) => Err(f.why),
        };
        let (loc, result) = match answered {
            Ok(a) => a,
            Err(why) => {
                return self
                    .settle(storage, ident, (expected, &current.metadata), new, &removed, &why)
                    .await;
            }
        };
        if !removed.is_empty() {
            self.check_nothing_dropped(storage, ident, (expected, &current.metadata), &loc, &result, &removed)
                .await?;
        }
        if adds {
            self.check_counters(ident, &current.metadata, &loc, &result)?;
        }
        Ok(loc)
    }

    /// After a commit that added snapshots back, landed at `committed` with `result`: an
    /// [`Error::Corrupt`] when the server lowered the table's last-sequence-number or next-row-id
    /// ([`counters_lowered`]): nothing may be written on that table until they are mended.
    fn check_counters(
        &self,
        ident: &TableIdent,
        before: &FullMetadata,
        committed: &str,
        result: &FullMetadata,
    ) -> Result<()> {
        match counters_lowered(before.metadata(), result.metadata()) {
            None => Ok(()),
            Some(why) => Err(Error::corrupt(
                committed,
                format!(
                    "catalog {}: the commit adding a snapshot back to {ident} landed, but {why}. Stop writers to the \
                     table and mend its metadata before any further commit",
                    self.section
                ),
            )),
        }
    }

    /// After a commit whose outcome is unknown (`why`): reads the table again, and when it carries every change
    /// of the commit takes it as landed (running the dropped-ref check over the generations since `expected`),
    /// returning the location read; otherwise [`Error::CommitUnknown`].
    async fn settle(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        (expected, before): (&str, &FullMetadata),
        new: &FullMetadata,
        removed: &std::collections::BTreeSet<i64>,
        why: &str,
    ) -> Result<String> {
        let unknown = |more: String| Error::CommitUnknown {
            catalog: self.section.clone(),
            table: ident.to_string(),
            reason: format!("{why}; {more}"),
        };
        let now = match self.load(ident).await {
            Ok(now) => now,
            Err(e) => {
                return Err(unknown(format!(
                    "the table could not be read again to see whether it carries the commit ({})",
                    e.with_causes()
                )));
            }
        };
        if let Err(missing) = carries(before, new, &now.metadata) {
            return Err(unknown(format!(
                "the table, read again at {}, does not carry it ({missing}): it may not have been applied, or may \
                 still be",
                now.metadata_location
            )));
        }
        crate::error::warn(format!(
            "catalog {}: the commit to {ident} got no clear answer ({why}), but the table read again at {} carries \
             it: taken as committed",
            self.section, now.metadata_location
        ));
        if !removed.is_empty() {
            self.check_nothing_dropped(
                storage,
                ident,
                (expected, before),
                &now.metadata_location,
                &now.metadata,
                removed,
            )
            .await?;
        }
        if new
            .metadata()
            .snapshots()
            .any(|s| before.metadata().snapshot_by_id(s.snapshot_id()).is_none())
        {
            self.check_counters(ident, before, &now.metadata_location, &now.metadata)?;
        }
        Ok(now.metadata_location)
    }
}

/// Whether two metadata locations name the same file (as written, or canonical).
fn same_location(a: &str, b: &str) -> bool {
    a == b
        || crate::model::location::canonical_uri(a)
            .ok()
            .is_some_and(|x| crate::model::location::canonical_uri(b).ok().as_ref() == Some(&x))
}

/// `, to <where>` for a redirect's `Location` header (without its query, which could carry a token).
fn location_of(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(|l| format!(", to {}", l.split('?').next().unwrap_or_default()))
        .unwrap_or_default()
}

/// Whether `now` carries every change the commit from `before` to `new` makes (the snapshots it adds there, with
/// their manifest lists, the refs it sets at their snapshots, the refs it removes absent, the snapshots it removes
/// absent); otherwise the first one missing. `now` must be the table judged, by its UUID: a table dropped and
/// created again under the same name carries any removal trivially (it has none of the snapshots), and its
/// answer says nothing about the commit.
fn carries(before: &FullMetadata, new: &FullMetadata, now: &FullMetadata) -> std::result::Result<(), String> {
    let (_, updates) = commit_request(before, new)?;
    let (judged, read) = (before.metadata().uuid(), now.metadata().uuid());
    if read != judged {
        return Err(format!(
            "its table-uuid is {read}, not {judged}: another table under the same name (dropped and created again)"
        ));
    }
    let refs = now.refs();
    for u in &updates {
        match u {
            TableUpdate::SetSnapshotRef { ref_name, reference } => {
                let at = refs.get(ref_name).map(|r| r.snapshot_id);
                if at != Some(reference.snapshot_id) {
                    return Err(format!(
                        "ref {ref_name} is at {} instead of {}",
                        at.map_or_else(|| "nothing".to_owned(), |id| id.to_string()),
                        reference.snapshot_id
                    ));
                }
            }
            TableUpdate::RemoveSnapshotRef { ref_name } => {
                if refs.contains_key(ref_name) {
                    return Err(format!("ref {ref_name} is still there"));
                }
            }
            TableUpdate::RemoveSnapshots { snapshot_ids } => {
                if let Some(id) = snapshot_ids
                    .iter()
                    .find(|id| now.metadata().snapshot_by_id(**id).is_some())
                {
                    return Err(format!("snapshot {id} is still there"));
                }
            }
            TableUpdate::AddSnapshot { snapshot } => {
                let at = now.metadata().snapshot_by_id(snapshot.snapshot_id());
                if at.map(|s| s.manifest_list()) != Some(snapshot.manifest_list()) {
                    return Err(format!("snapshot {} is not there", snapshot.snapshot_id()));
                }
            }
            other => return Err(format!("an update lakedrill does not send: {other:?}")),
        }
    }
    Ok(())
}

/// What a commit that removed `removed` from `before` lost through concurrent commits (pure): in each
/// generation `between` (location, metadata) lakedrill's read and `result`, a ref lakedrill did not know on a
/// removed snapshot that `result` does not have at that snapshot (dropped by the server, or moved on to a
/// snapshot of its own); and in `result`, a snapshot lakedrill did not know whose parents, followed through
/// snapshots it did not know, reach a removed snapshot (it may reuse that snapshot's manifests and files).
fn dropped_refs(
    before: &FullMetadata,
    removed: &std::collections::BTreeSet<i64>,
    between: &[(&str, &FullMetadata)],
    result: &FullMetadata,
) -> std::result::Result<Vec<String>, String> {
    let known: std::collections::BTreeSet<&String> = before.refs().keys().collect();
    let result_refs = result.refs();
    let mut dropped = Vec::new();
    for (m, md) in between {
        for (name, r) in md.refs() {
            // Refs lakedrill read were pinned by requirements or removed on purpose; only new ones count.
            if removed.contains(&r.snapshot_id)
                && !known.contains(name)
                && result_refs.get(name).map(|x| x.snapshot_id) != Some(r.snapshot_id)
            {
                let now = result_refs
                    .get(name)
                    .map_or_else(|| "dropped".to_owned(), |x| format!("now at {}", x.snapshot_id));
                dropped.push(format!("{name} -> {} (in {m}; {now})", r.snapshot_id));
            }
        }
    }
    // Parents of every snapshot seen in a generation after lakedrill's read.
    let mut parent: BTreeMap<i64, Option<i64>> = BTreeMap::new();
    for md in between.iter().map(|(_, md)| *md).chain([result]) {
        for s in md.metadata().snapshots() {
            parent.insert(s.snapshot_id(), s.parent_snapshot_id());
        }
    }
    let (before, result) = (before.metadata(), result.metadata());
    for s in result.snapshots() {
        if before.snapshot_by_id(s.snapshot_id()).is_some() {
            continue;
        }
        let mut at = s.parent_snapshot_id();
        // Bounded by the snapshots seen: a parent cycle in a broken metadata file ends the walk.
        for _ in 0..=parent.len() {
            let Some(p) = at else { break };
            if removed.contains(&p) {
                dropped.push(format!(
                    "snapshot {} (new, descends from removed snapshot {p})",
                    s.snapshot_id()
                ));
                break;
            }
            if before.snapshot_by_id(p).is_some() {
                break;
            }
            at = parent.get(&p).copied().flatten();
        }
    }
    dropped.sort();
    dropped.dedup();
    Ok(dropped)
}

impl RestCatalog {
    /// After a commit that removed `removed` from `before`, the generation at `expected`: when the new
    /// metadata's log names another generation as its parent, the commits in between are read and what they
    /// made on the removed snapshots that the result lost is refused ([`dropped_refs`], [`RestCatalog::commit`]).
    /// Every failure here is an [`Error::Corrupt`]: what cannot be checked is not deleted.
    async fn check_nothing_dropped(
        &self,
        storage: &crate::io::store::Storage,
        ident: &TableIdent,
        (expected, before): (&str, &FullMetadata),
        committed: &str,
        result: &FullMetadata,
        removed: &std::collections::BTreeSet<i64>,
    ) -> Result<()> {
        let undecided = |why: String| {
            Error::corrupt(
                committed,
                format!(
                    "catalog {}: the commit to {ident} removed snapshots {removed:?}, but {why}, so whether a \
                     concurrent commit referenced them cannot be decided; nothing was deleted",
                    self.section
                ),
            )
        };
        let same = |a: &str| {
            a == expected
                || crate::model::location::canonical_uri(a).ok() == crate::model::location::canonical_uri(expected).ok()
        };
        let log: Vec<&str> = result
            .metadata()
            .metadata_log()
            .iter()
            .map(|m| m.metadata_file.as_str())
            .collect();
        let Some(parent) = log.last() else {
            return Err(undecided("its metadata has no metadata-log".to_owned()));
        };
        if same(parent) {
            return Ok(());
        }
        // Every generation after the one lakedrill read (all of them, when the log does not reach back to it).
        let start = log.iter().rposition(|m| same(m)).map_or(0, |i| i + 1);
        let mut between = Vec::new();
        for m in &log[start..] {
            let read = async {
                let uri = crate::model::location::canonical_uri(m)?;
                let max = storage.options().max_metadata_bytes;
                let bytes = storage.get_bounded(&uri, max, "table metadata").await?.bytes;
                // With its refs as written (a v1 table's too).
                crate::io::metadata::parse_full_metadata(&uri, &bytes, max)
            };
            let md = read.await.map_err(|e| {
                undecided(format!(
                    "generation {m} between lakedrill's read and the commit cannot be read ({})",
                    e.with_causes()
                ))
            })?;
            between.push(((*m).to_owned(), md));
        }
        let between: Vec<(&str, &FullMetadata)> = between.iter().map(|(m, md)| (m.as_str(), md)).collect();
        let dropped = dropped_refs(before, removed, &between, result).map_err(undecided)?;
        if dropped.is_empty() {
            return Ok(());
        }
        Err(Error::corrupt(
            committed,
            format!(
                "catalog {}: another writer committed to {ident} between lakedrill's read ({expected}) and its \
                 commit, creating ref(s) or snapshot(s) on snapshots the commit removed; the server applied the \
                 removal on top and the result lost them: {}. Nothing was deleted: the snapshots' files and \
                 quarantine bundles are intact (restore a bundle with `lakedrill restore`, then re-create the refs)",
                self.section,
                dropped.join(", ")
            ),
        ))
    }

    fn namespace_url(&self, ident: &TableIdent) -> String {
        let ns: Vec<String> = ident.namespace.iter().map(|l| segment(l)).collect();
        format!("{}/namespaces/{}", self.v1(), ns.join("%1F"))
    }

    /// Creates the namespace of `ident` when the catalog does not have it.
    async fn ensure_namespace(&self, ident: &TableIdent) -> Result<()> {
        let shown = ident.namespace_display();
        let (status, body) = self
            .send(reqwest::Method::GET, &self.namespace_url(ident), None)
            .await?;
        match status {
            200 => return Ok(()),
            404 => {}
            _ => return Err(self.refusal(&format!("load namespace {shown}"), status, &body)),
        }
        let req = serde_json::json!({"namespace": ident.namespace, "properties": {}});
        let (status, body) = self
            .send(
                reqwest::Method::POST,
                &format!("{}/namespaces", self.v1()),
                Some(req.to_string().into_bytes()),
            )
            .await?;
        match status {
            200 | 409 => Ok(()),
            _ => Err(self.refusal(&format!("create namespace {shown}"), status, &body)),
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
        self.ensure_namespace(ident).await?;
        match self.register.as_deref().unwrap_or("rest") {
            "s3tables" => self.register_s3tables(storage, ident, md_location).await?,
            _ => {
                let req = serde_json::json!({"name": ident.name, "metadata-location": md_location});
                let (status, body) = self
                    .send(
                        reqwest::Method::POST,
                        &format!("{}/register", self.namespace_url(ident)),
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
            "namespace": ident.namespace,
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
fn same_table(md: &TableMetadata, served: &FullMetadata) -> std::result::Result<(), String> {
    let (served_refs, served) = (served.refs(), served.metadata());
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
    // What lakedrill registers is a recovered table with `main` alone (`materialize`), so the crate's refs of it
    // are all of them; what the catalog serves is read as written.
    let ids_of = |refs: &BTreeMap<String, iceberg::spec::SnapshotReference>| -> BTreeMap<String, i64> {
        refs.iter().map(|(n, r)| (n.clone(), r.snapshot_id)).collect()
    };
    let (registered, served) = (ids_of(&refs_of(md)?), ids_of(served_refs));
    if registered != served {
        return Err(format!("refs {served:?} instead of {registered:?}"));
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

/// Why the REST protocol's `add-snapshot` of `snap` (a snapshot coming back from a bundle, with the sequence number
/// it was committed with) may not be sent to a table at `current`, if it may not (pure).
///
/// A REST server applies `add-snapshot` with Iceberg's metadata builder (Java `TableMetadata.Builder.addSnapshot`,
/// Go `MetadataBuilder.AddSnapshot`, Rust `TableMetadataBuilder::add_snapshot`), which sets the table's
/// `last-sequence-number` to the added snapshot's. A snapshot of a format-v2+ table whose sequence number is below
/// the table's would lower it, and the next commit would hand out sequence numbers already in use (delete files
/// would apply to the wrong data files): refused here, whatever the server would do. Its sequence number cannot be
/// changed either: its manifest list and manifests were written with it. One above the table's is no snapshot of
/// this table's history. Equal (the snapshot was the table's last commit) is sent; the builders then refuse a
/// snapshot that has a parent (the server's answer names it), and a server that takes it keeps the table's
/// `last-sequence-number`.
#[must_use]
pub fn add_snapshot_refusal(current: &TableMetadata, snap: &iceberg::spec::Snapshot) -> Option<String> {
    if current.format_version() < iceberg::spec::FormatVersion::V2 {
        return None;
    }
    let (id, seq, last) = (
        snap.snapshot_id(),
        snap.sequence_number(),
        current.last_sequence_number(),
    );
    match seq.cmp(&last) {
        std::cmp::Ordering::Greater => Some(format!(
            "snapshot {id} has sequence number {seq}, above the table's last-sequence-number {last}: it is no \
             snapshot of this table's history"
        )),
        std::cmp::Ordering::Less => Some(format!(
            "snapshot {id} cannot be added back through a REST catalog: its sequence number {seq} is below the \
             table's last-sequence-number {last} (commits were made after it), and a REST server applies \
             `add-snapshot` with Iceberg's metadata builder, which sets last-sequence-number to the added \
             snapshot's: it would go down to {seq} and later commits would reuse sequence numbers (the snapshot's \
             own cannot change: its manifest list and manifests carry it). Nothing was committed; `restore --into` \
             brings the snapshot back as a new table"
        )),
        std::cmp::Ordering::Equal => None,
    }
}

/// Why the metadata a commit that added snapshots produced (`after`) is not safe to write on, compared with
/// `before` (pure): its `last-sequence-number` or (v3) `next-row-id` went down, so sequence numbers or row ids
/// would be handed out again.
fn counters_lowered(before: &TableMetadata, after: &TableMetadata) -> Option<String> {
    if after.last_sequence_number() < before.last_sequence_number() {
        return Some(format!(
            "its last-sequence-number went down from {} to {}: the next commit would reuse sequence numbers",
            before.last_sequence_number(),
            after.last_sequence_number()
        ));
    }
    if after.next_row_id() < before.next_row_id() {
        return Some(format!(
            "its next-row-id went down from {} to {}: row ids would be handed out again",
            before.next_row_id(),
            after.next_row_id()
        ));
    }
    None
}

/// The requirements and updates that turn `current` into `new` (pure): snapshots added (`add-snapshot`, each
/// judged by [`add_snapshot_refusal`]), refs set or removed, snapshots removed. Any other difference is refused
/// with its name.
///
/// # Errors
/// A sentence naming what differs beyond added snapshots, refs and removed snapshots, or why a snapshot may not be
/// added.
pub fn commit_request(
    current: &FullMetadata,
    new: &FullMetadata,
) -> std::result::Result<(Vec<TableRequirement>, Vec<TableUpdate>), String> {
    let (current_refs, new_refs) = (current.refs(), new.refs());
    let (current, new) = (current.metadata(), new.metadata());
    let same = |what: &str, eq: bool| {
        if eq {
            Ok(())
        } else {
            Err(format!(
                "{what} changed: only snapshots added back, refs and snapshot removals are committed through a REST \
                 catalog"
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
    // Snapshots added (`set-current --from-bundle`): sent first, so that the refs set after them may name them.
    let mut added: Vec<&iceberg::spec::SnapshotRef> = new
        .snapshots()
        .filter(|s| current.snapshot_by_id(s.snapshot_id()).is_none())
        .collect();
    added.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()));
    let mut updates = Vec::new();
    for s in added {
        if let Some(why) = add_snapshot_refusal(current, s) {
            return Err(why);
        }
        updates.push(TableUpdate::AddSnapshot {
            snapshot: s.as_ref().clone(),
        });
    }
    let mut requirements = vec![TableRequirement::UuidMatch { uuid: current.uuid() }];
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata with `snapshots` (id, parent) and `refs` (name, snapshot, branch?); main's target is current.
    fn md(snapshots: &[(i64, Option<i64>)], refs: &[(&str, i64, bool)]) -> FullMetadata {
        let snaps: Vec<serde_json::Value> = snapshots
            .iter()
            .enumerate()
            .map(|(i, (id, parent))| {
                serde_json::json!({"snapshot-id": id, "parent-snapshot-id": parent, "sequence-number": i + 1,
                    "timestamp-ms": 1_700_000_000_000_i64 + i64::try_from(i).unwrap(),
                    "manifest-list": format!("s3://b/t/metadata/snap-{id}.avro"),
                    "summary": {"operation": "append"}, "schema-id": 0})
            })
            .collect();
        let r: serde_json::Map<String, serde_json::Value> = refs
            .iter()
            .map(|(n, id, branch)| {
                (
                    (*n).to_owned(),
                    serde_json::json!({"snapshot-id": id, "type": if *branch { "branch" } else { "tag" }}),
                )
            })
            .collect();
        let main = refs.iter().find(|(n, _, _)| *n == "main").map(|(_, id, _)| *id);
        let doc = serde_json::json!({
            "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://b/t",
            "last-sequence-number": snapshots.len(), "last-updated-ms": 1_700_000_000_000_i64, "last-column-id": 1,
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": false, "type": "long"}]}],
            "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
            "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
            "current-snapshot-id": main, "snapshots": snaps, "refs": r, "snapshot-log": [], "metadata-log": []
        });
        FullMetadata::from_json_value("md", &doc).unwrap()
    }

    /// Lakedrill read 1 <- 2 (main) and 3 (child of 1, unreferenced), and removes 3.
    fn before() -> FullMetadata {
        md(&[(1, None), (2, Some(1)), (3, Some(1))], &[("main", 2, true)])
    }

    /// [`before`], for the hostile-server tests.
    pub(super) fn before_for_hostile() -> FullMetadata {
        before()
    }

    fn removed(ids: &[i64]) -> std::collections::BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    /// See: the 2026-12-06 review, finding 2. Between lakedrill's read and the server applying its removal of S = 3,
    /// a writer creates branch b at S, then appends to b (4, parent S, which may reuse S's manifests). The result
    /// still has a ref named b, now at 4: before, only a ref gone by name was flagged, and this passed.
    #[test]
    fn a_new_ref_moved_off_a_removed_snapshot_and_its_new_snapshot_are_flagged() {
        let b = before();
        let at_s = md(
            &[(1, None), (2, Some(1)), (3, Some(1))],
            &[("main", 2, true), ("b", 3, true)],
        );
        let appended = md(
            &[(1, None), (2, Some(1)), (3, Some(1)), (4, Some(3))],
            &[("main", 2, true), ("b", 4, true)],
        );
        let result = md(
            &[(1, None), (2, Some(1)), (4, Some(3))],
            &[("main", 2, true), ("b", 4, true)],
        );
        let between = [("v2.metadata.json", &at_s), ("v3.metadata.json", &appended)];
        let dropped = dropped_refs(&b, &removed(&[3]), &between, &result).unwrap();
        assert_eq!(
            dropped,
            vec![
                "b -> 3 (in v2.metadata.json; now at 4)".to_owned(),
                "snapshot 4 (new, descends from removed snapshot 3)".to_owned()
            ]
        );
        // The same branch and snapshot made in one commit: no generation has b at S, the new snapshot is flagged.
        let dropped = dropped_refs(&b, &removed(&[3]), &[("v2.metadata.json", &appended)], &result).unwrap();
        assert_eq!(
            dropped,
            vec!["snapshot 4 (new, descends from removed snapshot 3)".to_owned()]
        );
        // Through a new snapshot lakedrill did not know either (5 <- 4 <- S).
        let deeper = md(
            &[(1, None), (2, Some(1)), (4, Some(3)), (5, Some(4))],
            &[("main", 2, true), ("b", 5, true)],
        );
        let dropped = dropped_refs(&b, &removed(&[3]), &[], &deeper).unwrap();
        assert_eq!(
            dropped,
            vec![
                "snapshot 4 (new, descends from removed snapshot 3)".to_owned(),
                "snapshot 5 (new, descends from removed snapshot 3)".to_owned()
            ]
        );
    }

    /// A ref dropped with the removed snapshot (the case the check was written for) is still flagged; an append to
    /// main meanwhile, and a removed ancestor of main's history, are not.
    #[test]
    fn a_dropped_ref_is_flagged_and_ordinary_appends_are_not() {
        let b = before();
        let tagged = md(
            &[(1, None), (2, Some(1)), (3, Some(1))],
            &[("main", 2, true), ("keep-me", 3, false)],
        );
        let result = md(&[(1, None), (2, Some(1))], &[("main", 2, true)]);
        assert_eq!(
            dropped_refs(&b, &removed(&[3]), &[("v2.metadata.json", &tagged)], &result).unwrap(),
            vec!["keep-me -> 3 (in v2.metadata.json; dropped)".to_owned()]
        );
        let appended = md(
            &[(1, None), (2, Some(1)), (3, Some(1)), (4, Some(2))],
            &[("main", 4, true)],
        );
        let result = md(&[(1, None), (2, Some(1)), (4, Some(2))], &[("main", 4, true)]);
        assert!(
            dropped_refs(&b, &removed(&[3]), &[("v2.metadata.json", &appended)], &result)
                .unwrap()
                .is_empty()
        );
        // Expiring main's oldest ancestor (1) while main moves on: 4's parent is 2, which lakedrill knew.
        let result = md(&[(2, Some(1)), (3, Some(1)), (4, Some(2))], &[("main", 4, true)]);
        assert!(
            dropped_refs(&b, &removed(&[1]), &[("v2.metadata.json", &appended)], &result)
                .unwrap()
                .is_empty()
        );
    }

    /// After an unknown outcome the table read again carries the commit only with every change in it.
    #[test]
    fn carries_needs_every_change_of_the_commit() {
        let b = before();
        let tagged = md(
            &[(1, None), (2, Some(1)), (3, Some(1))],
            &[("main", 2, true), ("q", 3, false)],
        );
        let gone = md(&[(1, None), (2, Some(1))], &[("main", 2, true)]);
        // Tag mode: the tag at its snapshot.
        assert_eq!(carries(&b, &tagged, &tagged), Ok(()));
        assert_eq!(
            carries(&b, &tagged, &b),
            Err("ref q is at nothing instead of 3".to_owned())
        );
        let elsewhere = md(
            &[(1, None), (2, Some(1)), (3, Some(1))],
            &[("main", 2, true), ("q", 2, false)],
        );
        assert_eq!(
            carries(&b, &tagged, &elsewhere),
            Err("ref q is at 2 instead of 3".to_owned())
        );
        // Bundle mode and the purge: the snapshot and its refs gone.
        assert_eq!(carries(&b, &gone, &gone), Ok(()));
        assert_eq!(carries(&b, &gone, &b), Err("snapshot 3 is still there".to_owned()));
        assert_eq!(carries(&tagged, &gone, &tagged), Err("ref q is still there".to_owned()));
        // Later commits by others on top do not hide it.
        let later = md(&[(1, None), (2, Some(1)), (4, Some(2))], &[("main", 4, true)]);
        assert_eq!(carries(&b, &gone, &later), Ok(()));
    }

    /// See: the review of 2026-12-07 (rs), item 2. After an unknown outcome the table read again by name carried a
    /// removal-only commit trivially when it was another table (dropped and created again under the name: none
    /// of the snapshots is in it), and the commit was taken as landed. Now a table of another UUID carries nothing.
    #[test]
    fn a_table_created_again_under_the_name_does_not_carry_the_commit() {
        let b = before();
        let gone = md(&[(1, None), (2, Some(1))], &[("main", 2, true)]);
        let mut doc = serde_json::to_value(md(&[(7, None)], &[("main", 7, true)]).metadata()).unwrap();
        doc["table-uuid"] = serde_json::json!("0b7d7a2e-6a43-4c8e-9a55-3f1f0e1f7a10");
        let recreated = FullMetadata::from_json_value("v1.json", &doc).unwrap();
        assert_eq!(
            carries(&b, &gone, &recreated),
            Err(
                "its table-uuid is 0b7d7a2e-6a43-4c8e-9a55-3f1f0e1f7a10, not 9c12d441-03fe-4693-9a96-a0705ddf69c1: \
                 another table under the same name (dropped and created again)"
                    .to_owned()
            )
        );
        // Tag mode too: the new table happens to have the tag at the same id.
        let tagged = md(
            &[(1, None), (2, Some(1)), (3, Some(1))],
            &[("main", 2, true), ("q", 3, false)],
        );
        let mut doc = serde_json::to_value(tagged.metadata()).unwrap();
        doc["table-uuid"] = serde_json::json!("0b7d7a2e-6a43-4c8e-9a55-3f1f0e1f7a10");
        doc["refs"] =
            serde_json::json!({"main": {"snapshot-id": 2, "type": "branch"}, "q": {"snapshot-id": 3, "type": "tag"}});
        let same_shape = FullMetadata::from_json_value("v1.json", &doc).unwrap();
        assert!(carries(&b, &tagged, &same_shape).is_err());
    }

    /// `set-current --from-bundle` adds a snapshot back to the metadata: through a REST catalog the commit is
    /// `add-snapshot` (the snapshot as it was, its sequence number kept) before `set-snapshot-ref main` to it, with
    /// the table's UUID and every ref as read pinned; the answer carries it only with the snapshot in it. Before,
    /// it was refused ("REST catalogs cannot take a snapshot back from a bundle yet").
    #[test]
    fn a_snapshot_added_back_is_sent_as_add_snapshot_then_the_ref_with_every_ref_pinned() {
        // 3 (child of 1, sequence number 3, the last) left the metadata; main at 2, a tag on 1.
        let gone = md(&[(1, None), (2, Some(1))], &[("main", 2, true), ("audit", 1, false)]);
        let back = md(
            &[(1, None), (2, Some(1)), (3, Some(1))],
            &[("main", 3, true), ("audit", 1, false)],
        );
        let mut doc = serde_json::to_value(gone.metadata()).unwrap();
        doc["last-sequence-number"] = serde_json::json!(3);
        doc["refs"] = serde_json::json!({"main": {"snapshot-id": 2, "type": "branch"}, "audit": {"snapshot-id": 1, "type": "tag"}});
        let gone = FullMetadata::from_json_value("v5.json", &doc).unwrap();
        let (requirements, updates) = commit_request(&gone, &back).unwrap();
        let body = serde_json::to_value(serde_json::json!({"requirements": requirements, "updates": updates})).unwrap();
        assert_eq!(
            body["requirements"],
            serde_json::json!([
                {"type": "assert-table-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
                {"type": "assert-ref-snapshot-id", "ref": "audit", "snapshot-id": 1},
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 2}
            ]),
            "{body}"
        );
        let updates = body["updates"].as_array().unwrap();
        assert_eq!(updates.len(), 2, "{body}");
        assert_eq!(updates[0]["action"], "add-snapshot", "{body}");
        assert_eq!(updates[0]["snapshot"]["snapshot-id"], 3, "{body}");
        assert_eq!(updates[0]["snapshot"]["parent-snapshot-id"], 1, "{body}");
        assert_eq!(updates[0]["snapshot"]["sequence-number"], 3, "kept as it was: {body}");
        assert_eq!(
            updates[0]["snapshot"]["manifest-list"], "s3://b/t/metadata/snap-3.avro",
            "{body}"
        );
        assert_eq!(updates[1]["action"], "set-snapshot-ref", "{body}");
        assert_eq!(updates[1]["ref-name"], "main", "{body}");
        assert_eq!(updates[1]["snapshot-id"], 3, "{body}");
        // The table read again carries the commit only with the snapshot back in it.
        assert_eq!(carries(&gone, &back, &back), Ok(()));
        let moved_only = md(&[(1, None), (2, Some(1))], &[("main", 2, true), ("audit", 1, false)]);
        assert_eq!(
            carries(&gone, &back, &moved_only),
            Err("snapshot 3 is not there".to_owned())
        );
    }

    /// A snapshot whose sequence number is below the table's last-sequence-number is never sent: the server's
    /// metadata builder would lower last-sequence-number to it. One above it is no snapshot of the table. A v1
    /// table has no sequence numbers to guard.
    #[test]
    fn a_snapshot_below_the_last_sequence_number_is_refused_before_it_is_sent() {
        let gone = md(&[(1, None), (2, Some(1)), (4, Some(2))], &[("main", 4, true)]);
        let mut doc = serde_json::to_value(gone.metadata()).unwrap();
        doc["last-sequence-number"] = serde_json::json!(4);
        let gone = FullMetadata::from_json_value("v6.json", &doc).unwrap();
        // 3: sequence number 3, parent 1.
        let back = md(
            &[(1, None), (2, Some(1)), (3, Some(1)), (4, Some(2))],
            &[("main", 3, true)],
        );
        let why = commit_request(&gone, &back).map(|_| ()).unwrap_err();
        assert!(
            why.contains("snapshot 3 cannot be added back through a REST catalog")
                && why.contains("sequence number 3 is below the table's last-sequence-number 4")
                && why.contains("restore --into"),
            "{why}"
        );
        let snap = |seq: i64| {
            iceberg::spec::Snapshot::builder()
                .with_snapshot_id(9)
                .with_parent_snapshot_id(None)
                .with_sequence_number(seq)
                .with_timestamp_ms(1_700_000_000_000)
                .with_manifest_list("s3://b/t/metadata/snap-9.avro")
                .with_summary(iceberg::spec::Summary {
                    operation: iceberg::spec::Operation::Append,
                    additional_properties: std::collections::HashMap::new(),
                })
                .build()
        };
        // Without a parent too: the builders would still set last-sequence-number to it.
        assert!(add_snapshot_refusal(gone.metadata(), &snap(2)).is_some());
        assert!(
            add_snapshot_refusal(gone.metadata(), &snap(5))
                .is_some_and(|w| w.contains("above the table's last-sequence-number 4"))
        );
        assert_eq!(add_snapshot_refusal(gone.metadata(), &snap(4)), None);
        let mut v1 = serde_json::to_value(gone.metadata()).unwrap();
        v1["format-version"] = serde_json::json!(1);
        v1["last-sequence-number"] = serde_json::json!(0);
        v1["schema"] = v1["schemas"][0].clone();
        v1["partition-spec"] = serde_json::json!([]);
        for s in v1["snapshots"].as_array_mut().unwrap() {
            s.as_object_mut().unwrap().remove("sequence-number");
        }
        let v1 = FullMetadata::from_json_value("v1.json", &v1).unwrap();
        assert_eq!(add_snapshot_refusal(v1.metadata(), &snap(0)), None);
    }

    /// A server that lowered last-sequence-number or next-row-id while adding a snapshot back is caught.
    #[test]
    fn a_lowered_last_sequence_number_after_adding_a_snapshot_is_caught() {
        let small = md(&[(1, None)], &[("main", 1, true)]);
        let mut d2 = serde_json::to_value(small.metadata()).unwrap();
        d2["last-sequence-number"] = serde_json::json!(5);
        let high = FullMetadata::from_json_value("v8.json", &d2).unwrap();
        assert_eq!(
            counters_lowered(high.metadata(), small.metadata()),
            Some(
                "its last-sequence-number went down from 5 to 1: the next commit would reuse sequence numbers"
                    .to_owned()
            )
        );
        assert_eq!(counters_lowered(small.metadata(), high.metadata()), None);
    }

    /// See: the review of 2026-12-07, item 1. A format-v1 table's refs are in its JSON, not in the iceberg crate's
    /// model of it (`main` alone): a commit tagging a snapshot of such a table pins every ref read and sends the tag.
    /// Computed from the model, it pinned `main` alone and found nothing to send: the commit "succeeded" with no tag.
    #[test]
    fn a_commit_on_a_v1_table_pins_its_refs_and_sends_the_tag_it_sets() {
        let snapshot = |id: i64, parent: Option<i64>| {
            serde_json::json!({"snapshot-id": id, "parent-snapshot-id": parent, "timestamp-ms": 1_700_000_000_000_i64 + id,
                "manifest-list": format!("s3://b/t/metadata/snap-{id}.avro"), "summary": {"operation": "append"}})
        };
        let doc = serde_json::json!({
            "format-version": 1, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://b/t",
            "last-updated-ms": 1_700_000_000_009_i64, "last-column-id": 1,
            "schema": {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "required": false, "type": "long"}]},
            "partition-spec": [], "properties": {}, "current-snapshot-id": 2,
            "refs": {"main": {"snapshot-id": 2, "type": "branch"}, "audit": {"snapshot-id": 1, "type": "tag"}},
            "snapshots": [snapshot(1, None), snapshot(2, Some(1))],
            "snapshot-log": [], "metadata-log": []
        });
        let current = FullMetadata::from_json_value("v1.json", &doc).unwrap();
        let mut tagged_doc = doc.clone();
        tagged_doc["refs"]["quarantine/c-1"] = serde_json::json!({"snapshot-id": 1, "type": "tag"});
        let tagged = FullMetadata::from_json_value("v2.json", &tagged_doc).unwrap();
        let (requirements, updates) = commit_request(&current, &tagged).unwrap();
        let pinned: Vec<String> = requirements
            .iter()
            .filter_map(|r| match r {
                TableRequirement::RefSnapshotIdMatch { r#ref, .. } => Some(r#ref.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(pinned, ["audit", "main", "quarantine/c-1"]);
        assert!(
            matches!(&updates[..], [TableUpdate::SetSnapshotRef { ref_name, reference }]
                if ref_name == "quarantine/c-1" && reference.snapshot_id == 1),
            "{updates:?}"
        );
        // And the table read again carries it only with the tag in its JSON.
        assert_eq!(carries(&current, &tagged, &tagged), Ok(()));
        assert!(carries(&current, &tagged, &current).is_err());
    }
}

/// The answers no real catalog gives (a token that never expires as `Long.MAX_VALUE`, answers over the bound,
/// a page token handed out again), from a loopback HTTP server: a test double of a hostile server.
#[cfg(test)]
mod hostile {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// What the server answers to a request: status, body, whether to announce its length.
    type Answer = (u16, Vec<u8>, bool);

    /// A loopback HTTP/1.1 server answering each request (method, path with query) with `answer`, one
    /// connection per request; returns its base URL.
    fn serve(answer: impl Fn(&str, &str) -> Answer + Send + 'static) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut head = Vec::new();
                let mut byte = [0_u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if conn.read(&mut byte).unwrap_or(0) == 0 {
                        break;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let mut first = text.split_whitespace();
                let (method, path) = (first.next().unwrap_or_default(), first.next().unwrap_or_default());
                let len: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0);
                let mut body = vec![0; len];
                let _ = conn.read_exact(&mut body);
                let (status, body, announced) = answer(method, path);
                let length = if announced {
                    format!("content-length: {}\r\n", body.len())
                } else {
                    String::new()
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{length}connection: close\r\n\r\n"
                );
                let _ = conn.write_all(&body);
            }
        });
        base
    }

    fn json(status: u16, v: &serde_json::Value) -> Answer {
        (status, v.to_string().into_bytes(), true)
    }

    async fn open(base: &str, max_metadata_bytes: u64) -> RestCatalog {
        let cfg = CatalogConfig {
            kind: "rest".to_owned(),
            uri: base.to_owned(),
            request_timeout_secs: Some(20),
            ..Default::default()
        };
        RestCatalog::open("hostile", &cfg, max_metadata_bytes).await.unwrap()
    }

    /// See: the review of 2026-12-07 (rs), item 1. Iceberg servers answer `expires_in` = `Long.MAX_VALUE` for a
    /// token that does not expire: `Instant::now() + 2^63 s` overflowed and panicked while the catalog was
    /// opened. Now such a token (any over a year) has no scheduled refresh (it is fetched again after a 401).
    #[tokio::test]
    async fn a_token_that_never_expires_is_taken_without_a_scheduled_refresh() {
        let base = serve(|method, path| match (method, path) {
            ("POST", "/v1/oauth/tokens") => json(
                200,
                &serde_json::json!({"access_token": "t", "token_type": "bearer", "expires_in": 9_223_372_036_854_775_807_u64}),
            ),
            _ => json(200, &serde_json::json!({})),
        });
        let mut cat = open(&base, 1 << 20).await;
        cat.credential = Some(("id".to_owned(), "secret".to_owned()));
        cat.fetch_token().await.unwrap();
        let token = cat.auth.lock().await.clone().unwrap();
        assert_eq!(token.value, "t");
        assert_eq!(token.refresh_at, None);
        let now = std::time::Instant::now();
        assert_eq!(refresh_at(now, u64::MAX), None);
        assert_eq!(refresh_at(now, 400 * 24 * 3600), None);
        assert_eq!(refresh_at(now, 3600), Some(now + std::time::Duration::from_secs(3540)));
        assert_eq!(refresh_at(now, 100), Some(now + std::time::Duration::from_secs(50)));
    }

    /// See: the review of 2026-12-07 (rs), item 3. A load-table answer was read whole, however large, and its
    /// metadata parsed without `max_metadata_bytes`. Now an answer over that bound plus 1 MiB is refused naming
    /// the URL and the limit: announced longer (refused before it is read), or streamed without a length.
    #[tokio::test]
    async fn an_answer_over_the_metadata_bound_is_refused_naming_the_url() {
        let mut doc = serde_json::to_value(tests::before_for_hostile().metadata()).unwrap();
        doc["properties"] = serde_json::json!({"pad": "x".repeat(1_200_000)});
        let answer = serde_json::json!({"metadata-location": "s3://b/t/metadata/v1.metadata.json", "metadata": doc})
            .to_string()
            .into_bytes();
        let base = serve(move |_, path| match path {
            "/v1/namespaces/db/tables/announced" => (200, answer.clone(), true),
            "/v1/namespaces/db/tables/streamed" => (200, answer.clone(), false),
            _ => json(200, &serde_json::json!({})),
        });
        let cat = open(&base, 100_000).await;
        for name in ["announced", "streamed"] {
            let ident: TableIdent = format!("db.{name}").parse().unwrap();
            let err = cat.load(&ident).await.unwrap_err().to_string();
            assert!(
                err.contains(&format!("GET {base}/v1/namespaces/db/tables/{name}"))
                    && err.contains("over the limit of 1148576 bytes")
                    && err.contains("max_metadata_bytes"),
                "{err}"
            );
        }
        // Within the bound, the same answer loads.
        let cat = open(&base, 2 << 20).await;
        cat.load(&"db.streamed".parse().unwrap()).await.unwrap();
    }

    /// See: the review of 2026-12-07 (rs), item 4. A server handing out the same `next-page-token` again kept
    /// the listing (and the plan's containment check waiting on it) going for ever. Now the listing stops with
    /// an error naming the catalog, the listing and the token.
    #[tokio::test]
    async fn a_page_token_handed_out_again_stops_the_listing() {
        let namespaces = serve(|_, path| match path.split('?').next().unwrap_or_default() {
            "/v1/namespaces" => json(
                200,
                &serde_json::json!({"namespaces": [["db"]], "next-page-token": "again"}),
            ),
            _ => json(200, &serde_json::json!({})),
        });
        let tables = serve(|_, path| match path.split('?').next().unwrap_or_default() {
            "/v1/namespaces" => json(200, &serde_json::json!({"namespaces": [["db"]]})),
            "/v1/namespaces/db/tables" => {
                json(200, &serde_json::json!({"identifiers": [], "next-page-token": "again"}))
            }
            _ => json(200, &serde_json::json!({})),
        });
        for (base, what) in [
            (namespaces, "list namespaces: "),
            (tables, "list tables of namespace db: "),
        ] {
            let cat = open(&base, 1 << 20).await;
            let listed = tokio::time::timeout(std::time::Duration::from_secs(60), cat.tables())
                .await
                .expect("the listing ended");
            let err = listed.unwrap_err().to_string();
            assert!(
                err.starts_with("catalog hostile: ")
                    && err.contains(what)
                    && err.contains(r#"next-page-token "again" a second time"#),
                "{err}"
            );
        }
    }
}
