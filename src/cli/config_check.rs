//! `lakedrill config check` and the per-command defaults of `lakedrill.toml`.
//!
//! The check reads the configuration file strictly (unknown fields are errors, as for every command) and
//! then looks at what each setting points to: catalogs (type, database URL, the database file, the
//! warehouse URI), storage (`[storage.s3]` keys must be object_store `AmazonS3ConfigKey` names), the
//! registry URL, the signing key and the trust store (they must load; the key is never printed), and the
//! `[defaults.*]` tables (each must name a subcommand and one of its value-taking options).
//!
//! **Credentials never live in the file.** A key that looks like a secret (`secret`, `password`, `token`,
//! `access_key`, `credential`, …, in any table) or a URL with a password in it is refused by every command,
//! not only by the check: S3 credentials come from the `AWS_*` environment variables or the standard AWS
//! chain (profile, web identity, instance/container metadata), which object_store reads itself.
//!
//! Defaults work by changing clap's defaults before parsing ([`apply_defaults`]): a value on the command
//! line always wins, and `--help` shows the default that is in force. Flags without a value (`--deep`,
//! `--dry-run`) cannot be defaulted, so a config file can never turn a dry run into a real purge.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::report::output::{Outcome, Verdict};

pub use crate::config::secret_problems;

/// Applies `[keys]` and `[defaults.*]` of `config` to the command-line definition as clap defaults.
///
/// `[keys] signing_key` becomes the default of every required `--key`, `[keys] trust` of every `--trust`; a
/// `[defaults."drill run"]` table sets defaults of `drill run`'s options by their long names (`-` or `_`).
/// Returns the changed definition and the problems found (unknown command or option, a flag without a
/// value, a global option, a value that is not a string or number).
#[must_use]
pub fn apply_defaults(mut cmd: clap::Command, config: &Config) -> (clap::Command, Vec<String>) {
    let mut problems = Vec::new();
    let mut keyed: Vec<(&str, String, bool)> = Vec::new();
    // (option, value, only where the option is required). An optional `--key` changes what a command does (a
    // `restore --shard` signs its share and writes it, `undelete` seals its receipts, `drill faults` signs a
    // report): a configured key must not switch that on, so it defaults only the `--key`s a command cannot run
    // without. A trust folder only adds verification: it defaults every `--trust`.
    if let Some(k) = &config.keys.signing_key {
        keyed.push(("key", k.display().to_string(), true));
    }
    if let Some(t) = &config.keys.trust {
        keyed.push(("trust", t.display().to_string(), false));
    }
    if !keyed.is_empty() {
        cmd = map_all_subcommands(cmd, &|c| {
            let mut c = c;
            for (long, v, only_required) in &keyed {
                let id = c
                    .get_arguments()
                    .find(|a| {
                        a.get_long() == Some(*long) && !a.is_global_set() && (!*only_required || a.is_required_set())
                    })
                    .map(|a| a.get_id().clone());
                if let Some(id) = id {
                    let v = v.clone();
                    c = c.mut_arg(id, |a| a.required(false).default_value(v));
                }
            }
            c
        });
    }
    for (name, table) in &config.defaults {
        let path: Vec<&str> = name.split_whitespace().collect();
        if path.is_empty() || !has_subcommand(&cmd, &path) {
            problems.push(format!(
                "defaults.{name:?}: no such command (use the command as typed, e.g. [defaults.\"drill run\"])"
            ));
            continue;
        }
        for (key, value) in table {
            let long = key.replace('_', "-");
            let v = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                _ => {
                    problems.push(format!(
                        "defaults.{name:?}.{key}: only strings and numbers can be defaults (flags cannot)"
                    ));
                    continue;
                }
            };
            let Some(target) = find_subcommand(&cmd, &path) else {
                continue;
            };
            let Some(arg) = target.get_arguments().find(|a| a.get_long() == Some(long.as_str())) else {
                problems.push(format!("defaults.{name:?}.{key}: `{name}` has no option --{long}"));
                continue;
            };
            if arg.is_global_set() {
                problems.push(format!(
                    "defaults.{name:?}.{key}: --{long} is a global option and cannot be defaulted per command"
                ));
                continue;
            }
            if !arg.get_action().takes_values() {
                problems.push(format!(
                    "defaults.{name:?}.{key}: --{long} is a flag without a value; flags are never defaulted from the configuration"
                ));
                continue;
            }
            let id = arg.get_id().clone();
            cmd = mut_path(cmd, &path, &move |c| {
                c.mut_arg(id.clone(), |a| a.required(false).default_value(v.clone()))
            });
        }
    }
    (cmd, problems)
}

fn find_subcommand<'a>(cmd: &'a clap::Command, path: &[&str]) -> Option<&'a clap::Command> {
    let mut c = cmd;
    for p in path {
        c = c.find_subcommand(p)?;
    }
    Some(c)
}

fn has_subcommand(cmd: &clap::Command, path: &[&str]) -> bool {
    find_subcommand(cmd, path).is_some()
}

fn mut_path(cmd: clap::Command, path: &[&str], f: &dyn Fn(clap::Command) -> clap::Command) -> clap::Command {
    match path.split_first() {
        None => f(cmd),
        Some((first, rest)) => {
            let first = (*first).to_owned();
            cmd.mut_subcommand(first, |c| mut_path(c, rest, f))
        }
    }
}

fn map_all_subcommands(cmd: clap::Command, f: &dyn Fn(clap::Command) -> clap::Command) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    let mut cmd = f(cmd);
    for n in names {
        cmd = cmd.mut_subcommand(n, |c| map_all_subcommands(c, f));
    }
    cmd
}

/// One problem found by `config check`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The setting (`catalog.lake.uri`, `keys.trust`, …).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

/// What `config check` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigReport {
    /// The file checked.
    pub file: String,
    /// Whether the file exists (a missing default file is an empty configuration).
    pub exists: bool,
    /// `VALID` or `INVALID`.
    pub status: String,
    /// Problems, empty when valid.
    pub problems: Vec<ConfigProblem>,
    /// Declared catalogs by name: {type, uri, warehouse, catalog_name}.
    pub catalogs: BTreeMap<String, serde_json::Value>,
    /// The registry URL in force.
    pub registry: String,
    /// `[keys]`: signing key path and key id, trust folder and trusted key ids.
    pub keys: serde_json::Value,
    /// `[defaults.*]` as given.
    pub defaults: BTreeMap<String, BTreeMap<String, String>>,
}

/// `lakedrill config check`: validates the configuration file and what it points to.
///
/// # Errors
/// [`Error::Io`] (exit 2, naming the file) when the file exists but cannot be read, or when a `--config` file given
/// on the command line does not exist (as every other command refuses it); every problem with its contents is a
/// finding (exit 1). A missing default `./lakedrill.toml` is the built-in defaults, `VALID`.
pub fn check(path: &Path, explicit: bool, cli: &clap::Command) -> Result<Outcome> {
    let mut problems = Vec::new();
    let mut p = |field: &str, reason: String| {
        problems.push(ConfigProblem {
            field: field.to_owned(),
            reason,
        });
    };
    let exists = path.exists();
    if explicit && !exists {
        // Not `INVALID (no file: built-in defaults)`: no command would run on built-in defaults with this flag.
        std::fs::metadata(path).map_err(|e| Error::io("read configuration file", path, e))?;
    }
    let cfg = if exists {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("read configuration file", path, e))?;
        match toml::from_str::<toml::Table>(&text) {
            Err(e) => {
                p("(file)", format!("not valid TOML: {e}"));
                None
            }
            Ok(raw) => {
                let secrets = secret_problems(&raw);
                for s in &secrets {
                    let (field, reason) = s.split_once(": ").unwrap_or(("(file)", s));
                    p(field, reason.to_owned());
                }
                if secrets.is_empty() {
                    match Config::load(path, true) {
                        Ok(c) => Some(c),
                        Err(e) => {
                            p("(file)", format!("{:#}", e));
                            None
                        }
                    }
                } else {
                    None
                }
            }
        }
    } else {
        Some(Config::default())
    };
    let mut catalogs = BTreeMap::new();
    let mut keys = serde_json::json!({});
    let mut defaults = BTreeMap::new();
    let mut registry = String::new();
    if let Some(cfg) = &cfg {
        for k in cfg.storage.s3.keys() {
            if object_store::aws::AmazonS3ConfigKey::from_str(k).is_err() {
                p(
                    &format!("storage.s3.{k}"),
                    "not an object_store AmazonS3ConfigKey name (e.g. endpoint, region, allow_http, bucket)".into(),
                );
            }
        }
        for k in cfg.storage.gcs.keys() {
            if object_store::gcp::GoogleConfigKey::from_str(k).is_err() {
                p(
                    &format!("storage.gcs.{k}"),
                    "not an object_store GoogleConfigKey name".into(),
                );
            }
        }
        for k in cfg.storage.azure.keys() {
            if object_store::azure::AzureConfigKey::from_str(k).is_err() {
                p(
                    &format!("storage.azure.{k}"),
                    "not an object_store AzureConfigKey name".into(),
                );
            }
        }
        for (name, c) in &cfg.catalog {
            let field = format!("catalog.{name}");
            if c.kind == "rest" {
                // Offline: whether the endpoint answers and accepts the secret is for the first command that
                // opens it. The secret is never shown, only whether its variable is set.
                let var = c.auth_env_name(name);
                let auth = c.auth.clone().unwrap_or_else(|| "none".to_owned());
                if auth != "none" && std::env::var_os(&var).is_none() {
                    p(
                        &format!("{field}.auth"),
                        format!("{auth} needs its secret in the environment variable {var}, which is not set"),
                    );
                }
                catalogs.insert(
                    name.clone(),
                    serde_json::json!({"type": "rest", "uri": c.uri, "warehouse": c.warehouse, "prefix": c.prefix,
                                       "auth": auth, "auth_env": var, "auth_env_set": std::env::var_os(&var).is_some()}),
                );
                continue;
            }
            catalogs.insert(
                name.clone(),
                serde_json::json!({"type": c.kind, "uri": c.uri, "warehouse": c.warehouse,
                                   "catalog_name": c.name.clone().unwrap_or_else(|| name.clone())}),
            );
            if crate::io::db::is_postgres(&c.uri) {
                if let Err(reason) = crate::io::db::parse_uri(&c.uri) {
                    p(&format!("{field}.uri"), format!("{:?}: {reason}", c.uri));
                }
            } else {
                match sqlite_path(&c.uri) {
                    None => p(
                        &format!("{field}.uri"),
                        format!(
                            "{:?}: expected sqlite:PATH, sqlite:///PATH or postgres://USER@HOST:PORT/DATABASE",
                            c.uri
                        ),
                    ),
                    Some(db) if !Path::new(&db).exists() => {
                        p(
                            &format!("{field}.uri"),
                            format!("the catalog database {db} does not exist"),
                        );
                    }
                    Some(_) => {}
                }
            }
            if let Some(w) = &c.warehouse
                && let Err(e) = crate::model::location::canonical_uri(w)
            {
                p(&format!("{field}.warehouse"), format!("{:#}", e));
            }
        }
        registry = cfg.registry_uri();
        if crate::io::db::is_postgres(&registry) {
            // Checked offline: whether the server answers is for the first command that opens it.
            if let Err(reason) = crate::io::db::parse_uri(&registry) {
                p("registry.uri", format!("{registry:?}: {reason}"));
            }
        } else {
            match sqlite_path(&registry) {
                None => p(
                    "registry.uri",
                    format!("{registry:?}: expected sqlite:PATH, sqlite:///PATH or postgres://USER@HOST:PORT/DATABASE"),
                ),
                Some(db) => {
                    let parent = Path::new(&db).parent().filter(|d| !d.as_os_str().is_empty());
                    if parent.is_some_and(|d| !d.is_dir()) {
                        p("registry.uri", format!("the folder of {db} does not exist"));
                    }
                }
            }
        }
        if let Some(k) = &cfg.keys.signing_key {
            match crate::evidence::keys::load_signing_key(k) {
                Ok(key) => keys["signing_key"] = serde_json::json!({"path": k, "keyid": key.keyid()}),
                Err(e) => p("keys.signing_key", format!("{:#}", Error::from(e))),
            }
        }
        if let Some(t) = &cfg.keys.trust {
            match crate::evidence::keys::TrustStore::load_dir(t) {
                Ok(ts) => {
                    keys["trust"] = serde_json::json!({"path": t,
                        "keyids": ts.keys().iter().map(|k| k.keyid().to_owned()).collect::<Vec<_>>()});
                }
                Err(e) => p("keys.trust", format!("{:#}", Error::from(e))),
            }
        }
        let (_, dproblems) = apply_defaults(cli.clone(), cfg);
        for d in dproblems {
            let (field, reason) = d.split_once(": ").unwrap_or(("defaults", &d));
            p(field, reason.to_owned());
        }
        for (name, t) in &cfg.defaults {
            defaults.insert(
                name.clone(),
                t.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
                    .collect(),
            );
        }
    }
    let status = if problems.is_empty() { "VALID" } else { "INVALID" };
    let report = ConfigReport {
        file: path.display().to_string(),
        exists,
        status: status.into(),
        problems,
        catalogs,
        registry,
        keys,
        defaults,
    };
    let mut human = format!(
        "{}: {}{}\n",
        report.file,
        status,
        if exists { "" } else { " (no file: built-in defaults)" }
    );
    for pr in &report.problems {
        human.push_str(&format!("  {}: {}\n", pr.field, pr.reason));
    }
    if report.problems.is_empty() {
        human.push_str(&format!(
            "  catalogs: {:?}\n  registry: {}\n",
            report.catalogs.keys().collect::<Vec<_>>(),
            report.registry
        ));
    }
    Outcome::new(
        if report.problems.is_empty() {
            Verdict::Ok
        } else {
            Verdict::Findings
        },
        &report,
        human,
    )
}

/// The file path of a `sqlite:` URL (`sqlite:PATH`, `sqlite://PATH`, `sqlite:///abs`), query removed.
fn sqlite_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("sqlite:")?;
    let rest = rest.split('?').next().unwrap_or(rest);
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    (!rest.is_empty() && rest != ":memory:").then(|| rest.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_looking_keys_and_url_passwords_are_refused() {
        let raw: toml::Table = toml::from_str(
            "[storage.s3]\nregion = \"x\"\naws_secret_access_key = \"s\"\n[catalog.a]\nuri = \"postgres://u:pw@h/db\"\n[x]\nSession-Token = \"t\"\n",
        )
        .unwrap_or_default();
        let p = secret_problems(&raw);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p.iter().any(|s| s.starts_with("storage.s3.aws_secret_access_key:")));
        assert!(p.iter().any(|s| s.starts_with("catalog.a.uri:")));
        assert!(p.iter().any(|s| s.starts_with("x.Session-Token:")));
        // The review of 2026-12-07 found these passing: a password in the URL's query (sqlx reads it), a bearer
        // token in a catalog header, Azure's `master_key` alias of the account key, an SSE-C key.
        let raw: toml::Table = toml::from_str(
            "[registry]\nuri = \"postgres://u@h/db?password=hunter2\"\n[catalog.r]\nuri = \"postgres://u@h/db?sslpassword=x\"\n\
             [catalog.r.headers]\nAuthorization = \"Bearer abc\"\nX-Iceberg-Access-Delegation = \"vended-credentials\"\n\
             [storage.azure]\nmaster_key = \"k\"\nencryption_key = \"e\"\n[storage.s3]\nsse_customer_key_base64 = \"c\"\n",
        )
        .unwrap_or_default();
        let p = secret_problems(&raw);
        for field in [
            "registry.uri:",
            "catalog.r.uri:",
            "catalog.r.headers.Authorization:",
            "storage.azure.master_key:",
            "storage.azure.encryption_key:",
            "storage.s3.sse_customer_key_base64:",
        ] {
            assert!(p.iter().any(|s| s.starts_with(field)), "{field} in {p:?}");
        }
        assert_eq!(p.len(), 6, "the access-delegation header is no secret: {p:?}");
        let ok: toml::Table = toml::from_str("[keys]\nsigning_key = \"k\"\ntrust = \"keys\"\n").unwrap_or_default();
        assert!(secret_problems(&ok).is_empty());
    }

    /// See: the review of 2026-12-07. `[keys] signing_key` defaulted every `--key`, the optional ones too: a plain
    /// `restore --shard` then signed and wrote its share, `undelete` sealed receipts with a drill key. And a
    /// configured `[keys] trust` did not satisfy clap's `requires = "trust"` (defaults do not count there), so
    /// `set-current --from-bundle` and `gates --since` asked for a `--trust` the configuration gives.
    #[test]
    fn a_configured_key_defaults_only_required_keys_and_a_configured_trust_serves_every_trust() {
        use clap::{CommandFactory, FromArgMatches};
        let cfg = Config {
            keys: crate::config::KeysConfig {
                signing_key: Some("drill.key".into()),
                trust: Some("keys".into()),
            },
            ..Config::default()
        };
        let (cmd, problems) = apply_defaults(crate::cli::Cli::command(), &cfg);
        assert!(problems.is_empty(), "{problems:?}");
        let parse = |args: &[&str]| {
            cmd.clone()
                .try_get_matches_from(std::iter::once("lakedrill").chain(args.iter().copied()))
                .and_then(|m| crate::cli::Cli::from_arg_matches(&m))
                .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        };
        // Optional keys stay unset; the trust folder comes from the configuration.
        match parse(&["restore", "b", "--shard", "0/4"]).command {
            crate::cli::Command::Restore { key, trust, .. } => {
                assert_eq!(key, None);
                assert_eq!(trust, std::path::PathBuf::from("keys"));
            }
            other => panic!("{other:?}"),
        }
        match parse(&["undelete", "c-1", "--metadata", "m.json"]).command {
            crate::cli::Command::Undelete { key, .. } => assert_eq!(key, None),
            other => panic!("{other:?}"),
        }
        // A required key is defaulted.
        match parse(&[
            "quarantine",
            "c-1",
            "--metadata",
            "m.json",
            "--policy",
            "p.yaml",
            "--bundles",
            "b",
        ])
        .command
        {
            crate::cli::Command::Quarantine { key, .. } => assert_eq!(key, Some("drill.key".into())),
            other => panic!("{other:?}"),
        }
        // The configured trust serves the options that need one.
        match parse(&["set-current", "--metadata", "m.json", "--from-bundle", "b"]).command {
            crate::cli::Command::SetCurrent { trust, .. } => assert_eq!(trust, Some("keys".into())),
            other => panic!("{other:?}"),
        }
        match parse(&["gates", "--metadata", "m.json", "--policy", "p.yaml", "--since", "30d"]).command {
            crate::cli::Command::Gates { trust, .. } => assert_eq!(trust, Some("keys".into())),
            other => panic!("{other:?}"),
        }
        // `restore --into` reads the table where its bundle says (it took no relocated root and ignored one).
        let both = [
            "lakedrill",
            "restore",
            "b",
            "--into",
            "x",
            "--catalog",
            "c",
            "--table",
            "n.t",
            "--table-root",
            "r",
        ];
        let e = cmd.clone().try_get_matches_from(both).map(|_| ()).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict, "{e}");
    }

    #[test]
    fn sqlite_paths() {
        assert_eq!(sqlite_path("sqlite:/a/b.db?mode=rwc").as_deref(), Some("/a/b.db"));
        assert_eq!(sqlite_path("sqlite:///a/b.db").as_deref(), Some("/a/b.db"));
        assert_eq!(sqlite_path("sqlite:rel.db").as_deref(), Some("rel.db"));
        assert_eq!(sqlite_path("postgres://h/db"), None);
    }
}
