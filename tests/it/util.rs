//! Shared helpers: fixture locations, running the binary, JSON access.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The output of one run of the binary.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The stdout as JSON (panics with the whole output when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }

    /// Asserts the exit code, showing the output on failure.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs `lakedrill ARGS` in `cwd` (a temp dir by default, so no stray lakedrill.toml is read).
pub fn lakedrill_in(cwd: &Path, args: &[&str]) -> Run {
    lakedrill_in_env(cwd, args, &[])
}

/// [`lakedrill_in`] with extra environment variables (failpoints).
pub fn lakedrill_in_env(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_lakedrill"))
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .output()
        .expect("run lakedrill");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| panic!("lakedrill {args:?} was killed by a signal"));
    assert_ne!(
        code,
        101,
        "lakedrill {args:?} panicked:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Run {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A temporary directory whose path has no hidden component (pyarrow skips those).
pub fn tmpdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("lakedrill-it-").tempdir().unwrap()
}

/// Runs `lakedrill ARGS` in a fresh temporary directory.
pub fn lakedrill(args: &[&str]) -> Run {
    let dir = crate::util::tmpdir();
    lakedrill_in(dir.path(), args)
}

/// The PyIceberg-generated fixtures (made by scripts/test.sh).
pub fn generated() -> PathBuf {
    let dir = std::env::var("LAKEDRILL_TEST_FIXTURES").unwrap_or_else(|_| {
        panic!("LAKEDRILL_TEST_FIXTURES is not set: run the tests with scripts/test.sh, which generates the PyIceberg tables")
    });
    let p = PathBuf::from(dir);
    assert!(
        p.join("catalog.db").exists(),
        "{} has no catalog.db: run scripts/test.sh",
        p.display()
    );
    p
}

/// The expected answers PyIceberg gave for a generated table (`db.events` …).
pub fn expected(table: &str) -> Value {
    let p = generated().join("expected").join(format!("{table}.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// The committed Spark/Java interop tables.
pub fn interop() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/duckdb-iceberg")
}

/// Copies a directory tree (fixtures are read-only; copies are writable).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            let mut perm = std::fs::metadata(&target).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perm.set_readonly(false);
            std::fs::set_permissions(&target, perm).unwrap();
        }
    }
}

/// A config file declaring the generated PyIceberg catalog as `pyfix`.
pub fn pyfix_config(dir: &Path) -> PathBuf {
    let fx = generated();
    let cfg = dir.join("lakedrill.toml");
    std::fs::write(
        &cfg,
        format!(
            "[catalog.pyfix]\ntype = \"sql\"\nuri = \"sqlite:{}\"\nwarehouse = \"file://{}\"\n",
            fx.join("catalog.db").display(),
            fx.join("warehouse").display()
        ),
    )
    .unwrap();
    cfg
}

/// Keeps only `keys` of each object in an array, sorted by `sort_key`.
pub fn project(rows: &Value, keys: &[&str], sort_key: &str) -> Vec<Value> {
    let mut v: Vec<Value> = rows
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {rows}"))
        .iter()
        .map(|r| {
            Value::Object(
                keys.iter()
                    .map(|k| ((*k).to_owned(), r.get(*k).cloned().unwrap_or(Value::Null)))
                    .collect(),
            )
        })
        .collect();
    v.sort_by_key(|r| r[sort_key].to_string());
    v
}

/// Verifies a signed report the way an auditor without lakedrill would: with `scripts/verify_report.py`
/// (Python `cryptography` alone) and with `openssl pkeyutl -verify -rawin` over the DSSE PAE. `scratch` holds
/// the PAE and signature files OpenSSL reads.
pub fn verify_with_standard_tools(report: &Path, pubkey: &Path, scratch: &Path) {
    use base64::Engine;
    let py = std::env::var("LAKEDRILL_TEST_PYTHON").expect("LAKEDRILL_TEST_PYTHON: run scripts/test.sh");
    let out = Command::new(py)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/verify_report.py"))
        .arg(report)
        .arg(pubkey)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "verify_report.py: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let env: Value = serde_json::from_slice(&std::fs::read(report).unwrap()).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let body = b64.decode(env["payload"].as_str().unwrap()).unwrap();
    let pae = lakedrill::evidence::pae(env["payloadType"].as_str().unwrap(), &body);
    std::fs::write(scratch.join("pae.bin"), pae).unwrap();
    std::fs::write(
        scratch.join("sig.bin"),
        b64.decode(env["signatures"][0]["sig"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    let out = Command::new("openssl")
        .args(["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey"])
        .arg(pubkey)
        .arg("-in")
        .arg(scratch.join("pae.bin"))
        .arg("-sigfile")
        .arg(scratch.join("sig.bin"))
        .output()
        .expect("openssl must be installed");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a future to completion on a fresh single-threaded runtime (the tests themselves are sync).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// A fresh PostgreSQL database (`CREATE DATABASE t_<uuid>` on the server of `LAKEDRILL_TEST_PG_URI`, which
/// scripts/test.sh starts), as a URI. Panics when the variable is unset or the server cannot be reached: a
/// PostgreSQL test never passes without PostgreSQL.
pub fn fresh_postgres_database() -> String {
    use sqlx::Connection;
    let admin = std::env::var("LAKEDRILL_TEST_PG_URI").unwrap_or_else(|_| {
        panic!("LAKEDRILL_TEST_PG_URI is not set: run the tests with scripts/test.sh, which starts PostgreSQL")
    });
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    block_on(async {
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {admin} (LAKEDRILL_TEST_PG_URI): {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name} on {admin}: {e}"));
        conn.close().await.unwrap();
    });
    let mut url = url::Url::parse(&admin).unwrap();
    url.set_path(&name);
    url.to_string()
}

/// The first column of the first row of `sql` on the database at `uri` (SQLite or PostgreSQL), as text.
pub fn sql_text(uri: &str, sql: &str) -> Option<String> {
    block_on(async {
        sqlx::any::install_default_drivers();
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(uri)
            .await
            .unwrap_or_else(|e| panic!("cannot open {uri}: {e}"));
        sqlx::query_scalar::<_, Option<String>>(sql)
            .fetch_optional(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql} on {uri}: {e}"))
            .flatten()
    })
}

/// Runs `sql` with the text parameters `binds` ($1, $2, … in order) on the database at `uri` (SQLite or
/// PostgreSQL): how the tests play an attacker who can write the registry.
pub fn sql_exec(uri: &str, sql: &str, binds: &[&str]) {
    block_on(async {
        sqlx::any::install_default_drivers();
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(uri)
            .await
            .unwrap_or_else(|e| panic!("cannot open {uri}: {e}"));
        let mut q = sqlx::query(sql);
        for b in binds {
            q = q.bind(*b);
        }
        q.execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql} on {uri}: {e}"));
    });
}

/// Row counts of a table as Iceberg Java (Spark) and DuckDB read it from `metadata_location`: per snapshot for
/// both engines, per ref for Spark. Asks the reader service `tests/gen/engine_reader.py` that scripts/test.sh
/// starts (`LAKEDRILL_TEST_ENGINE_READER=127.0.0.1:PORT`); panics naming the engine's error when a read fails
/// or the service cannot be reached.
pub fn engine_counts(metadata_location: &str, snapshot_ids: &[i64], refs: &[&str]) -> Value {
    use std::io::{Read, Write};
    let addr = std::env::var("LAKEDRILL_TEST_ENGINE_READER")
        .expect("LAKEDRILL_TEST_ENGINE_READER is unset: run scripts/test.sh, which starts the Spark/DuckDB reader");
    let body = serde_json::json!({
        "metadata_location": metadata_location,
        "snapshot_ids": snapshot_ids,
        "refs": refs,
        "engines": ["spark", "duckdb"],
    })
    .to_string();
    let mut s =
        std::net::TcpStream::connect(&addr).unwrap_or_else(|e| panic!("cannot reach the engine reader at {addr}: {e}"));
    s.set_read_timeout(Some(std::time::Duration::from_secs(600))).unwrap();
    write!(
        s,
        "POST /counts HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp)
        .unwrap_or_else(|e| panic!("engine reader at {addr}: {e}"));
    let (head, json) = resp
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("engine reader: malformed answer {resp:?}"));
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("engine reader: {e}: {json}"));
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "engine reader failed on {metadata_location}: {}",
        v["error"]
    );
    v
}

/// Asserts that Spark (Iceberg Java) and DuckDB read snapshot `snapshot_id` of the table at `metadata_location`
/// (a table lakedrill recovered or restored) with `rows` rows.
#[track_caller]
pub fn assert_engines_read(metadata_location: &str, snapshot_id: i64, rows: u64) {
    let md = metadata_location.trim_start_matches("file://");
    let got = engine_counts(md, &[snapshot_id], &[]);
    for engine in ["spark", "duckdb"] {
        assert_eq!(
            got[engine]["snapshots"][snapshot_id.to_string()].as_u64(),
            Some(rows),
            "{engine} reads snapshot {snapshot_id} of {md}: {got}"
        );
    }
}

/// The `table-uuid` of the table whose metadata file is `metadata` (a local path or a `file://`/`s3://` URI;
/// S3 through the `AWS_*` settings scripts/test.sh exports): what a policy's `table` binding must name.
pub fn table_uuid(metadata: &str) -> String {
    let uri = lakedrill::model::location::canonical_uri(metadata).unwrap();
    let storage = lakedrill::io::store::Storage::new(lakedrill::config::StorageOptions::default());
    let bytes = block_on(storage.get(&uri))
        .unwrap_or_else(|e| panic!("read {uri}: {e:#}"))
        .bytes;
    let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{uri} is not metadata JSON: {e}"));
    v["table-uuid"]
        .as_str()
        .unwrap_or_else(|| panic!("{uri} has no table-uuid"))
        .to_owned()
}

/// A policy's `table` binding for the table whose metadata file is `metadata`: `NAME/UUID` (#23 point 5).
pub fn table_binding(name: &str, metadata: &str) -> String {
    format!("{name}/{}", table_uuid(metadata))
}

/// `policy` with its `table:` line replaced by `table: BINDING` (a policy for another table).
pub fn rebind_policy(policy: &str, binding: &str) -> String {
    policy
        .lines()
        .map(|l| {
            if l.starts_with("table: ") {
                format!("table: {binding}")
            } else {
                l.to_owned()
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// Each snapshot's commit time (epoch ms) and the current snapshot, from `inspect snapshots --json`.
pub fn commit_times_of(v: &Value) -> (std::collections::BTreeMap<i64, i64>, i64) {
    let commits = v["snapshots"]
        .as_array()
        .unwrap_or_else(|| panic!("no snapshots: {v}"))
        .iter()
        .map(|s| (s["snapshot_id"].as_i64().unwrap(), s["timestamp_ms"].as_i64().unwrap()))
        .collect();
    (commits, v["current_snapshot_id"].as_i64().unwrap())
}

/// A bundle's inventory entries as JSON: the lines of its inventory member (`inventory.jsonl`), or the inline
/// inventory of a bundle sealed before the member existed.
pub fn bundle_inventory(bundle: &Path) -> Vec<Value> {
    let member = bundle.join(lakedrill::bundle::INVENTORY_MEMBER);
    if member.exists() {
        return std::fs::read_to_string(&member)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    }
    let st = lakedrill::evidence::peek_unverified(&std::fs::read(bundle.join("bundle.dsse.json")).unwrap()).unwrap();
    st["predicate"]["inventory"].as_array().unwrap().clone()
}

/// Writes `inventory` (any order) as the bundle's inventory member and points the statement `st` at it: its
/// `inventory_member`, `objects`, `bundle_root` and subject digests, as sealing would have written them. The caller
/// re-signs `st`, so that only the change to the entries is tested.
pub fn rewrite_inventory(bundle: &Path, st: &mut Value, inventory: &[Value]) {
    let mut entries: Vec<lakedrill::bundle::InventoryEntry> = inventory
        .iter()
        .map(|e| serde_json::from_value(e.clone()).unwrap())
        .collect();
    entries.sort_by(|a, b| (a.layer, &a.path).cmp(&(b.layer, &b.path)));
    let mut w = lakedrill::evidence::inventory::MemberWriter::new();
    for e in &entries {
        w.push(e).unwrap();
    }
    std::fs::write(bundle.join(lakedrill::bundle::INVENTORY_MEMBER), w.take()).unwrap();
    let (canonical, member) = w.finish();
    let p = &mut st["predicate"];
    p.as_object_mut().unwrap().remove("inventory");
    p["inventory_member"] = serde_json::to_value(&member).unwrap();
    p["objects"] = Value::from(entries.len());
    p["bundle_root"] = Value::String(canonical.root.clone());
    st["subject"][0]["digest"]["blake3"] = Value::String(canonical.root);
    st["subject"][0]["digest"]["sha256"] = Value::String(canonical.sha256);
}
