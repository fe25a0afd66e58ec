//! Policy, registry, plan, quarantine and the deleter, end to end on fresh PyIceberg tables.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{Run, block_on, fresh_postgres_database, lakedrill_in, sql_text, tmpdir};

/// The example of DESIGN §3 with the 8 hex digits of the UUID a `table` binding needs (#23 point 5).
const EXAMPLE: &str = lakedrill::govern::policy::EXAMPLE;

/// A fresh `db.retention` table in its own catalog and registry, a key, a policy.
pub struct Gov {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub policy: PathBuf,
    /// `s3://bucket/prefix` when the table lives on the test S3 server.
    warehouse: Option<String>,
    /// Where the catalog and the registry live.
    backend: Backend,
    /// The catalog database's URI.
    catalog_uri: String,
}

/// The database of a fixture's SQL catalog and registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `fx/catalog.db` as PyIceberg wrote it, and `registry.db`.
    Sqlite,
    /// A fresh PostgreSQL database (from `LAKEDRILL_TEST_PG_URI`) holding both: the PyIceberg table is
    /// registered in an iceberg SQL catalog there (created by iceberg-catalog-sql), and `fx/catalog.db` is
    /// deleted, so that nothing can read the table through SQLite any more.
    Postgres,
}

const CURRENT_LOCATION: &str = "SELECT metadata_location FROM iceberg_tables \
     WHERE catalog_name = 'pyfix' AND table_namespace = 'db' AND table_name = 'retention'";

/// The key `purge` signs with in these fixtures: never the key that signs the drills.
pub const DELETER_KEY: &str = "keys/deleter-TEST-ONLY.key";
pub const T: [&str; 4] = ["--catalog", "rt", "--table", "db.retention"];

pub(crate) fn python() -> String {
    std::env::var("LAKEDRILL_TEST_PYTHON").expect("LAKEDRILL_TEST_PYTHON: run scripts/test.sh")
}

impl Gov {
    /// A fixture whose table is in rollout stage `test` (its policy declares `regulatedData: false`), so
    /// that the deleter may purge it.
    pub fn new(policy_extra: &str) -> Gov {
        Gov::with_warehouse(policy_extra, None)
    }

    /// [`Gov::new`] with the catalog and the registry on `backend`.
    pub fn new_on(policy_extra: &str, backend: Backend) -> Gov {
        let g = Gov::report_only_on(&format!("regulatedData: false\n{policy_extra}"), None, backend);
        g.set_stage("test", "integration test fixture: generated rows, no regulated data")
            .expect_code(0);
        g
    }

    pub fn with_warehouse(policy_extra: &str, warehouse: Option<String>) -> Gov {
        let g = Gov::report_only(&format!("regulatedData: false\n{policy_extra}"), warehouse);
        g.set_stage("test", "integration test fixture: generated rows, no regulated data")
            .expect_code(0);
        g
    }

    /// `rollout set db.retention STAGE --reason R --policy <the fixture's policy> --force`: a fixture table is
    /// minutes old, never two weeks in report-only (the rollout rules are tested in `rollout.rs`).
    pub fn set_stage(&self, stage: &str, reason: &str) -> Run {
        self.run(&[
            "--json",
            "rollout",
            "set",
            "db.retention",
            stage,
            "--catalog",
            "rt",
            "--reason",
            reason,
            "--by",
            "it-tests",
            "--policy",
            self.policy.to_str().unwrap(),
            "--force",
        ])
    }

    /// `rollout set db.retention test --policy POLICY --force`: binds another policy file to the table, as an
    /// operator changing the policy does (purge, quarantine and reconcile refuse any policy but the bound one).
    pub fn bind_policy(&self, policy: &str) -> Run {
        self.run(&[
            "--json",
            "rollout",
            "set",
            "db.retention",
            "test",
            "--catalog",
            "rt",
            "--reason",
            "the policy changed",
            "--by",
            "it-tests",
            "--policy",
            policy,
            "--force",
        ])
    }

    /// Writes the fixture's policy file and binds it to the table again ([`Gov::bind_policy`]).
    pub fn write_policy(&self, text: &str) {
        std::fs::write(&self.policy, text).unwrap();
        self.bind_policy(self.policy.to_str().unwrap()).expect_code(0);
    }

    /// A fixture whose table is left in the default rollout stage, `report-only`.
    pub fn report_only(policy_extra: &str, warehouse: Option<String>) -> Gov {
        Gov::report_only_on(policy_extra, warehouse, Backend::Sqlite)
    }

    /// [`Gov::report_only`] with the catalog and the registry on `backend`.
    pub fn report_only_on(policy_extra: &str, warehouse: Option<String>, backend: Backend) -> Gov {
        let tmp = tmpdir();
        let dir = tmp.path().to_path_buf();
        let generator = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gen/make_tables.py");
        let mut cmd = Command::new(python());
        cmd.arg(&generator).arg("--retention");
        if let Some(w) = &warehouse {
            cmd.arg("--warehouse").arg(w);
        }
        let out = cmd.arg(dir.join("fx")).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        // The policy binds the table by name and UUID (#23 point 5), read from the metadata PyIceberg wrote.
        let binding = crate::util::table_binding(
            "retention",
            &sql_text(
                &format!("sqlite://{}?mode=ro", dir.join("fx/catalog.db").display()),
                CURRENT_LOCATION,
            )
            .expect("PyIceberg registered db.retention"),
        );
        let (catalog_uri, registry_uri) = match backend {
            Backend::Sqlite => (
                format!("sqlite:{}", dir.join("fx/catalog.db").display()),
                format!("sqlite:{}", dir.join("registry.db").display()),
            ),
            Backend::Postgres => {
                assert!(warehouse.is_none(), "the PostgreSQL fixture is on local storage");
                let pg = fresh_postgres_database();
                let sqlite = format!("sqlite://{}?mode=ro", dir.join("fx/catalog.db").display());
                let md = sql_text(&sqlite, CURRENT_LOCATION).expect("PyIceberg registered db.retention");
                let cfg = lakedrill::config::CatalogConfig {
                    kind: "sql".to_owned(),
                    uri: pg.clone(),
                    warehouse: Some(format!("file://{}", dir.join("fx/warehouse").display())),
                    name: Some("pyfix".to_owned()),
                    ..Default::default()
                };
                let ident: lakedrill::io::catalog::TableIdent = "db.retention".parse().unwrap();
                let storage = lakedrill::io::store::Storage::new(lakedrill::config::StorageOptions::default());
                block_on(lakedrill::ops::materialize::register(
                    &storage,
                    &cfg,
                    "rt",
                    &ident,
                    &md,
                    "file:///unused",
                ))
                .unwrap();
                assert_eq!(sql_text(&pg, CURRENT_LOCATION).as_deref(), Some(md.as_str()));
                std::fs::remove_file(dir.join("fx/catalog.db")).unwrap();
                (pg.clone(), pg)
            }
        };
        std::fs::write(
            dir.join("lakedrill.toml"),
            format!(
                "[catalog.rt]\ntype = \"sql\"\nuri = \"{catalog_uri}\"\nname = \"pyfix\"\n[registry]\nuri = \"{registry_uri}\"\n"
            ),
        )
        .unwrap();
        let policy = dir.join("policy.yaml");
        // Before #23 point 5 an unpinned policy let any build purge; the fixture says so explicitly now, unless the
        // test pins a build itself.
        let any_build = if policy_extra.contains("reclamationImplementationDigest") {
            ""
        } else {
            "reclamationImplementationDigest: any\n"
        };
        std::fs::write(
            &policy,
            format!(
                "schema: lakehouseRetentionPolicy.v1\ntable: {binding}\nprotectedRefs: [main]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n{any_build}{policy_extra}"
            ),
        )
        .unwrap();
        lakedrill_in(&dir, &["keygen", "--name", "gov-TEST-ONLY", "--dir", "keys"]).expect_code(0);
        // The deleter signs with a key of its own: `purge` never accepts evidence signed by its `--key`.
        lakedrill_in(&dir, &["keygen", "--name", "deleter-TEST-ONLY", "--dir", "keys"]).expect_code(0);
        // A trust folder of public keys only (keys/ also holds the private key, which gives a warning).
        std::fs::create_dir_all(dir.join("keys/trust")).unwrap();
        std::fs::copy(
            dir.join("keys/gov-TEST-ONLY.pub"),
            dir.join("keys/trust/gov-TEST-ONLY.pub"),
        )
        .unwrap();
        std::fs::copy(
            dir.join("keys/deleter-TEST-ONLY.pub"),
            dir.join("keys/trust/deleter-TEST-ONLY.pub"),
        )
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100)); // past minSnapshotAge
        Gov {
            _tmp: tmp,
            dir,
            policy,
            warehouse,
            backend,
            catalog_uri,
        }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        lakedrill_in(&self.dir, args)
    }

    pub fn on_table(&self, args: &[&str]) -> Run {
        let mut a = args.to_vec();
        a.extend(T);
        self.run(&a)
    }

    pub fn plan(&self) -> Value {
        self.on_table(&["--json", "plan", "--policy", self.policy.to_str().unwrap()])
            .expect_code(0)
            .json()
    }

    pub fn candidate(&self) -> Value {
        self.plan()["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "expired-snapshots")
            .cloned()
            .expect("a candidate")
    }

    pub fn quarantine(&self, id: &str, mode: &str) -> Run {
        self.on_table(&self.quarantine_args(id, mode))
    }

    /// `--json quarantine ID` with the fixture's policy, key and bundles folder, in `mode` (without the table).
    pub fn quarantine_args<'a>(&'a self, id: &'a str, mode: &'a str) -> Vec<&'a str> {
        vec![
            "--json",
            "quarantine",
            id,
            "--policy",
            self.policy.to_str().unwrap(),
            "--key",
            "keys/gov-TEST-ONLY.key",
            "--bundles",
            "bundles",
            "--mode",
            mode,
        ]
    }

    pub fn drill(&self, bundles: &str) -> PathBuf {
        let plan = self.dir.join(format!("drill-{bundles}.toml"));
        std::fs::write(
            &plan,
            format!("name = \"weekly-{bundles}\"\nkind = \"quarantine\"\nbundles = \"{bundles}\"\ntrust = \"keys\"\nkey = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\n"),
        )
        .unwrap();
        let r = self
            .run(&["--json", "drill", "run", plan.to_str().unwrap()])
            .expect_code(0)
            .json();
        PathBuf::from(r["report"].as_str().unwrap().trim_start_matches("file://"))
    }

    /// The arguments of `purge` for this fixture (the table arguments are added by the runner).
    pub fn purge_args<'a>(&'a self, id: &'a str, evidence: Option<&'a Path>) -> Vec<&'a str> {
        let mut a = vec![
            "--json",
            "purge",
            id,
            "--policy",
            self.policy.to_str().unwrap(),
            "--trust",
            "keys",
            "--key",
            DELETER_KEY,
            "--receipts",
            "receipts",
        ];
        if let Some(e) = evidence {
            a.extend(["--evidence", e.to_str().unwrap()]);
        }
        a
    }

    /// How many of candidate `c`'s objects are on disk under the table root.
    pub fn present(&self, c: &Value) -> usize {
        c["objects"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| self.table_root().join(o["path"].as_str().unwrap()).exists())
            .count()
    }

    /// `reconcile ID` with the fixture's policy, key, receipts and trust store (whose deleter keys verify the
    /// purge's signed inventory archive).
    pub fn reconcile(&self, id: &str) -> Run {
        self.on_table(&[
            "--json",
            "reconcile",
            id,
            "--policy",
            self.policy.to_str().unwrap(),
            "--key",
            "keys/gov-TEST-ONLY.key",
            "--receipts",
            "receipts",
            "--trust",
            "keys",
        ])
    }

    /// The arguments of `lease add` on `snapshot` until `expires_in`, for a reader "training" of owner "ml" under
    /// this fixture's policy (the table arguments are added by the runner).
    pub fn lease_add_args<'a>(&'a self, snapshot: &'a str, expires_in: &'a str) -> Vec<&'a str> {
        vec![
            "--json",
            "lease",
            "add",
            "--policy",
            self.policy.to_str().unwrap(),
            "--snapshot-id",
            snapshot,
            "--purpose",
            "training",
            "--owner",
            "ml",
            "--expires-in",
            expires_in,
        ]
    }

    /// `audit verify REPORT --trust keys` exits 0 with `VERIFIED`.
    pub fn assert_audit_verified(&self, report: &str) {
        let a = self.run(&["--json", "audit", "verify", report, "--trust", "keys"]);
        a.expect_code(0);
        assert_eq!(a.json()["status"], "VERIFIED", "{}", a.stdout);
    }

    pub fn purge(&self, id: &str, evidence: Option<&Path>, extra: &[&str]) -> Run {
        let mut a = self.purge_args(id, evidence);
        a.extend(extra);
        self.on_table(&a)
    }

    /// Runs Python with `t` = the table loaded through the catalog by PyIceberg. On PostgreSQL (PyIceberg
    /// has no PostgreSQL driver in the test venv) `t` is the metadata file the catalog row names now, read
    /// with `StaticTable`: the same table PyIceberg's catalog would load.
    pub fn py(&self, code: &str) -> String {
        let wh = self
            .warehouse
            .clone()
            .unwrap_or_else(|| format!("file://{}", self.dir.join("fx/warehouse").display()));
        let load = match self.backend {
            Backend::Sqlite => format!(
                "from pyiceberg.catalog.sql import SqlCatalog\n\
                 c = SqlCatalog('pyfix', uri='sqlite:///{db}', warehouse='{wh}', **props)\nt = c.load_table('db.retention')",
                db = self.dir.join("fx/catalog.db").display(),
            ),
            Backend::Postgres => format!(
                "from pyiceberg.table import StaticTable\nt = StaticTable.from_metadata('{}', props)",
                sql_text(&self.catalog_uri, CURRENT_LOCATION).expect("db.retention in the PostgreSQL catalog")
            ),
        };
        let script = format!(
            "import os\n\
             props = {{'s3.endpoint': os.environ.get('LAKEDRILL_TEST_S3_ENDPOINT', ''), 's3.access-key-id': 'testing', 's3.secret-access-key': 'testing', 's3.region': 'us-east-1'}}\n\
             {load}\n{code}\n",
        );
        let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
        assert!(out.status.success(), "python: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub fn table_root(&self) -> PathBuf {
        self.dir.join("fx/warehouse/db/retention")
    }

    /// Asserts that every object of candidate `c` is still in the table (nothing was deleted).
    pub fn assert_all_present(&self, c: &Value) {
        let root = self.table_root();
        for o in c["objects"].as_array().unwrap() {
            assert!(root.join(o["path"].as_str().unwrap()).exists(), "{o} was deleted");
        }
    }

    /// plan → quarantine (tag mode) → drill → purge, with bundles, reports and receipts under `vault`
    /// (any storage URI). Returns (candidate, quarantine output, purge output).
    pub fn chain(&self, vault: &str) -> (Value, Value, Value) {
        let c = self.candidate();
        let id = c["candidate_id"].as_str().unwrap().to_owned();
        let bundles = format!("{vault}/bundles");
        let policy = self.policy.to_str().unwrap();
        let key = "keys/gov-TEST-ONLY.key";
        let q = self
            .on_table(&[
                "--json",
                "quarantine",
                &id,
                "--policy",
                policy,
                "--key",
                key,
                "--bundles",
                &bundles,
            ])
            .expect_code(0)
            .json();
        let plan = self.dir.join("drill-chain.toml");
        let text = format!(
            "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"{bundles}\"\ntrust = \"keys\"\nkey = \"{key}\"\nreports = \"{vault}/reports\"\n"
        );
        std::fs::write(&plan, text).unwrap();
        let report = self
            .run(&["--json", "drill", "run", plan.to_str().unwrap()])
            .expect_code(0)
            .json()["report"]
            .as_str()
            .unwrap()
            .to_owned();
        let receipts = format!("{vault}/receipts");
        let args = [
            "--json",
            "purge",
            &id,
            "--policy",
            policy,
            "--trust",
            "keys",
            "--key",
            DELETER_KEY,
            "--receipts",
            &receipts,
            "--evidence",
            &report,
        ];
        let r = self.on_table(&args).expect_code(0).json();
        assert_eq!(r["status"], "VERIFIED", "{r}");
        (c, q, r)
    }

    /// Quarantine (tag mode) + drill: returns (candidate, evidence).
    pub fn quarantined(&self) -> (Value, PathBuf) {
        let c = self.candidate();
        self.quarantine(c["candidate_id"].as_str().unwrap(), "tag")
            .expect_code(0);
        let ev = self.drill("bundles");
        (c, ev)
    }
}

#[test]
fn policy_check_accepts_a_uuid_bound_example_and_names_bad_fields() {
    let tmp = tmpdir();
    let p = tmp.path().join("p.yaml");
    std::fs::write(&p, EXAMPLE).unwrap();
    let r = lakedrill_in(tmp.path(), &["--json", "policy", "check", p.to_str().unwrap()])
        .expect_code(0)
        .json();
    assert_eq!(
        r["digest"].as_str().unwrap(),
        lakedrill::evidence::sha256_hex(EXAMPLE.as_bytes())
    );
    for (bad, field) in [
        (
            EXAMPLE.replace("orphanSafetyInterval: 12h", "orphanSafetyInterval: 5h"),
            "orphanSafetyInterval",
        ),
        (
            EXAMPLE.replace("minSnapshotAge: 30d", "minSnapshotAge: 30"),
            "minSnapshotAge",
        ),
        (
            EXAMPLE.replace("maxReaderLease: 14d", "maxReaderLease: 2w"),
            "maxReaderLease",
        ),
        (format!("{EXAMPLE}surprise: 1\n"), "surprise"),
        (
            EXAMPLE.replace("lakehouseRetentionPolicy.v1", "lakehouseRetentionPolicy.v2"),
            "schema",
        ),
        // #23 point 5: a bare name, and DESIGN's 4-digit prefix, do not bind a table.
        (
            EXAMPLE.replace("orders/7f31a2b4...", "orders"),
            "field table: must bind the table's UUID",
        ),
        (
            EXAMPLE.replace("orders/7f31a2b4...", "orders/7f31..."),
            "field table: the UUID prefix must have at least 8",
        ),
    ] {
        std::fs::write(&p, &bad).unwrap();
        let r = lakedrill_in(tmp.path(), &["policy", "check", p.to_str().unwrap()]);
        r.expect_code(2);
        assert!(r.stderr.contains(field), "{field}: {}", r.stderr);
    }
}

#[test]
fn plan_is_report_only_and_never_lists_a_retained_object() {
    let g = Gov::new("");
    let before = std::fs::read(g.dir.join("fx/catalog.db")).unwrap();
    let plan = g.plan();
    assert_eq!(
        std::fs::read(g.dir.join("fx/catalog.db")).unwrap(),
        before,
        "plan changed the catalog"
    );
    for k in [
        "table_generation",
        "protected_ref_root",
        "lease_watermark",
        "hold_generation",
        "protection_generation",
        "protected",
        "candidates",
        "plain_expire",
        "differences",
    ] {
        assert!(plan.get(k).is_some(), "missing {k}: {plan}");
    }
    let c = g.candidate();
    let candidate_paths: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(!candidate_paths.is_empty());
    // Nothing reachable from a retained snapshot (its manifest list, manifests and live files).
    for p in plan["protected"].as_array().unwrap() {
        let id = p["snapshot_id"].to_string();
        let files = g
            .on_table(&["--json", "inspect", "files", "--snapshot-id", &id])
            .expect_code(0)
            .json();
        let mans = g
            .on_table(&["--json", "inspect", "manifests", "--snapshot-id", &id])
            .expect_code(0)
            .json();
        let snaps = g.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json();
        let ml = snaps["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["snapshot_id"].as_i64() == id.parse::<i64>().ok())
            .unwrap()["manifest_list"]
            .as_str()
            .unwrap()
            .to_owned();
        let reachable: Vec<String> = files["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["file_path"].as_str().unwrap().to_owned())
            .chain(
                mans["manifests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["path"].as_str().unwrap().to_owned()),
            )
            .chain([ml])
            .collect();
        for path in &candidate_paths {
            assert!(
                !reachable.iter().any(|r| r.ends_with(&format!("/{path}"))),
                "{path} is reachable from retained snapshot {id}"
            );
        }
    }
    // Plain expire_snapshots is shown beside it, with the differences explained.
    assert!(!plan["plain_expire"]["snapshot_ids"].as_array().unwrap().is_empty());
    let human = g
        .on_table(&["plan", "--policy", g.policy.to_str().unwrap()])
        .expect_code(0)
        .stdout
        .clone();
    assert!(human.contains("plain expire_snapshots"), "{human}");
}

#[test]
fn leases_holds_and_checkpoints_protect_snapshots_by_name() {
    let g = Gov::new("");
    let c = g.candidate();
    let victim = c["snapshot_ids"][0].as_i64().unwrap().to_string();
    let n = c["snapshot_ids"].as_array().unwrap().len();
    let policy = g.policy.to_str().unwrap();
    // Beyond maxReaderLease: a request the policy refuses (exit 1, as the README's exit-code table says), nothing
    // recorded; on a snapshot that does not exist, or with a malformed duration: bad input (exit 2).
    let r = g.on_table(&g.lease_add_args(&victim, "15d"));
    let refused = r.expect_code(1).json();
    assert_eq!(refused["status"], "REFUSED", "{refused}");
    assert_eq!(refused["max_reader_lease"], "14d", "{refused}");
    assert!(
        refused["reason"].as_str().unwrap().contains("maxReaderLease (14d)"),
        "{refused}"
    );
    let leases = g.on_table(&["--json", "lease", "list"]).expect_code(0).json();
    assert_eq!(leases["leases"].as_array().unwrap().len(), 0, "{leases}");
    // The duration error names the flag once (it said `--expires-in: field --expires-in: …`).
    let r = g.on_table(&g.lease_add_args(&victim, "30x"));
    r.expect_code(2);
    assert_eq!(r.stdout.matches("--expires-in").count(), 1, "{}", r.stdout);
    assert!(r.stdout.contains("has an unknown unit"), "{}", r.stdout);
    g.on_table(&[
        "lease",
        "add",
        "--policy",
        policy,
        "--snapshot-id",
        "42",
        "--purpose",
        "p",
        "--owner",
        "o",
        "--expires-in",
        "1d",
    ])
    .expect_code(2);
    // A lease takes the snapshot (and what only it reaches) out of the candidates…
    let lease = g.on_table(&g.lease_add_args(&victim, "1d")).expect_code(0).json();
    let after = g.plan();
    let ids: Vec<String> = after["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["snapshot_ids"].as_array().unwrap().iter().map(|v| v.to_string()))
        .collect();
    assert!(!ids.contains(&victim), "{after}");
    assert!(
        after["protected"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["snapshot_id"].as_i64() == victim.parse::<i64>().ok()
                && p["reasons"].to_string().contains("lease:"))
    );
    assert!(after["differences"].to_string().contains("lease:"), "{after}");
    assert_eq!(after["lease_watermark"], 1);
    // … and releasing it brings them back.
    g.run(&["lease", "release", lease["lease_id"].as_str().unwrap()])
        .expect_code(0);
    assert_eq!(g.candidate()["snapshot_ids"].as_array().unwrap().len(), n);
    // A hold on the snapshot does the same, and bumps the hold generation.
    let hold = g
        .on_table(&[
            "--json",
            "hold",
            "set",
            "--scope",
            &format!("snapshot:{victim}"),
            "--reason",
            "audit",
        ])
        .expect_code(0)
        .json();
    assert_eq!(hold["hold_generation"], 1);
    assert!(!g.plan()["candidates"].to_string().contains(&victim));
    g.run(&["hold", "clear", hold["hold_id"].as_str().unwrap()])
        .expect_code(0);
    assert!(g.plan()["candidates"].to_string().contains(&victim));
    // A checkpoint too, and it moves the protection generation (no checkpoint or writer before: 0).
    assert_eq!(g.plan()["protection_generation"], 0);
    g.on_table(&["checkpoint", "add", "--snapshot-id", &victim])
        .expect_code(0);
    let after = g.plan();
    assert!(!after["candidates"].to_string().contains(&victim));
    assert!(after["protection_generation"].as_i64().unwrap() > 0, "{after}");
    // A table hold protects everything.
    g.on_table(&["hold", "set", "--scope", "table", "--reason", "litigation"])
        .expect_code(0);
    assert_eq!(g.plan()["candidates"].as_array().unwrap().len(), 0);
}

#[test]
fn orphans_respect_the_safety_interval_and_writer_prefixes() {
    let g = Gov::new("");
    let root = g.table_root();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 86_400);
    let mk = |rel: &str, mtime: std::time::SystemTime| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"uncommitted bytes").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
    };
    mk("data/old-orphan.parquet", old);
    mk("data/young-orphan.parquet", std::time::SystemTime::now());
    mk("data/staging/writer-1/part-0.parquet", old);
    // A sibling table whose name extends this one's is never part of it.
    let sibling = g.dir.join("fx/warehouse/db/retention_v2/data/x.parquet");
    std::fs::create_dir_all(sibling.parent().unwrap()).unwrap();
    std::fs::write(&sibling, b"x").unwrap();
    g.on_table(&["writer", "begin", "--prefix", "data/staging/writer-1"])
        .expect_code(0);
    let plan = g.plan();
    let orphans: Vec<String> = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "orphans")
        .flat_map(|c| {
            c["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["path"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(orphans, vec!["data/old-orphan.parquet".to_owned()], "{plan}");
    assert!(plan["differences"].to_string().contains("writer:"), "{plan}");
}

#[test]
fn quarantine_in_tag_mode_is_visible_to_pyiceberg_and_keeps_the_current_snapshot() {
    let g = Gov::new("");
    let before = g.py("print(t.scan().to_arrow().num_rows, t.metadata.current_snapshot_id)");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let q = g.quarantine(id, "tag").expect_code(0).json();
    assert_eq!(q["candidate"]["state"], "QUARANTINED");
    assert_eq!(
        g.py("print(t.scan().to_arrow().num_rows, t.metadata.current_snapshot_id)"),
        before
    );
    let refs = g.py("print(sorted((k, v.snapshot_id) for k, v in t.metadata.refs.items()))");
    for sid in c["snapshot_ids"].as_array().unwrap() {
        assert!(
            refs.contains(&format!("('quarantine/{id}/{sid}', {sid})"))
                || refs.contains(&format!("('quarantine/{id}', {sid})")),
            "{refs}"
        );
    }
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "QUARANTINED");
    // The candidate's own tags do not change its eligibility: a re-plan does not propose it twice,
    // and quarantining again is refused, naming the state it is in (not "re-plan", which would not bring it back).
    let again = g.quarantine(id, "tag").expect_code(1).json();
    let reason = again["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("{id} is already QUARANTINED")), "{again}");
    assert!(!reason.contains("re-plan"), "{again}");
}

#[test]
fn quarantine_in_bundle_mode_removes_the_snapshots_and_a_bundle_brings_one_back() {
    let g = Gov::new("");
    let before = g.py("print(t.scan().to_arrow().num_rows)");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let q = g.quarantine(id, "bundle").expect_code(0).json();
    let ids = g.py("print(sorted(s.snapshot_id for s in t.metadata.snapshots))");
    for sid in c["snapshot_ids"].as_array().unwrap() {
        assert!(!ids.contains(&sid.to_string()), "{ids}");
    }
    assert_eq!(g.py("print(t.scan().to_arrow().num_rows)"), before);
    // The runbook brings one back from its verified bundle and makes it current.
    let bundle = q["bundles"][0]["uri"].as_str().unwrap();
    let sid = q["bundles"][0]["snapshot_id"].to_string();
    g.on_table(&["set-current", "--from-bundle", bundle, "--trust", "keys"])
        .expect_code(0);
    assert_eq!(g.py("print(t.metadata.current_snapshot_id)"), sid);
}

/// A snapshot whose schema the table's metadata no longer holds as the bundle has it (here: schema 0's first column
/// renamed in a new generation, as a writer replacing the metadata would) is refused (exit 2, naming the schema):
/// added back, it would be read with a schema it was not written with. Before, it was committed.
#[test]
fn set_current_from_a_bundle_whose_schema_the_table_no_longer_holds_is_refused() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let q = g.quarantine(id, "bundle").expect_code(0).json();
    let bundle = q["bundles"][0]["uri"].as_str().unwrap();
    let head = g.py("print(t.metadata.current_snapshot_id)");
    let db = g.dir.join("fx/catalog.db");
    g.py(&format!(
        "import json, os, sqlite3, uuid\n\
         old = t.metadata_location\npath = old.removeprefix('file://')\nmd = json.load(open(path))\n\
         for s in md['schemas']:\n    s['fields'][0]['name'] += '_renamed'\n\
         n = int(os.path.basename(path).split('-')[0]) + 1\n\
         new = os.path.join(os.path.dirname(path), f'{{n:05d}}-{{uuid.uuid4()}}.metadata.json')\n\
         json.dump(md, open(new, 'w'))\n\
         con = sqlite3.connect('{}')\n\
         con.execute(\"UPDATE iceberg_tables SET metadata_location = ? WHERE table_name = 'retention'\", ('file://' + new if old.startswith('file://') else new,))\n\
         con.commit()",
        db.display()
    ));
    let r = g.on_table(&["--json", "set-current", "--from-bundle", bundle, "--trust", "keys"]);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 2, "{text}");
    assert!(
        text.contains("was written with schema 0") && text.contains("no longer holds"),
        "{text}"
    );
    assert_eq!(g.py("print(t.metadata.current_snapshot_id)"), head, "nothing committed");
}

/// See: the review of 2026-12-07 (no test had a table without snapshots). A table that holds no snapshot (a
/// `REPLACE TABLE` whose old snapshots all expired; here: every snapshot and ref dropped from the metadata in a new
/// generation) is serialized without its `snapshots` array: `set-current --from-bundle` stopped with exit 2 ("metadata
/// without a snapshots array") where the bundled snapshot should come back as the table's first. It is committed
/// now: the snapshot is the table's only one and current, and reads as it was sealed.
#[test]
fn set_current_from_a_bundle_on_a_table_without_snapshots_takes_the_snapshot_as_its_first() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let rows: std::collections::BTreeMap<i64, String> = c["snapshot_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let s = s.as_i64().unwrap();
            (s, g.py(&format!("print(t.scan(snapshot_id={s}).to_arrow().num_rows)")))
        })
        .collect();
    let q = g.quarantine(id, "bundle").expect_code(0).json();
    let bundle = q["bundles"][0]["uri"].as_str().unwrap();
    let sid = q["bundles"][0]["snapshot_id"].as_i64().unwrap();
    let db = g.dir.join("fx/catalog.db");
    g.py(&format!(
        "import json, os, sqlite3, uuid\n\
         old = t.metadata_location\npath = old.removeprefix('file://')\nmd = json.load(open(path))\n\
         md['snapshots'] = []\nmd['refs'] = {{}}\nmd['snapshot-log'] = []\nmd['current-snapshot-id'] = -1\n\
         md['statistics'] = []\nmd['partition-statistics'] = []\n\
         n = int(os.path.basename(path).split('-')[0]) + 1\n\
         new = os.path.join(os.path.dirname(path), f'{{n:05d}}-{{uuid.uuid4()}}.metadata.json')\n\
         json.dump(md, open(new, 'w'))\n\
         con = sqlite3.connect('{}')\n\
         con.execute(\"UPDATE iceberg_tables SET metadata_location = ? WHERE table_name = 'retention'\", ('file://' + new if old.startswith('file://') else new,))\n\
         con.commit()",
        db.display()
    ));
    assert_eq!(
        g.py("print(len(t.metadata.snapshots), t.metadata.current_snapshot_id, len(t.metadata.refs))"),
        "0 None 0"
    );
    let r = g.on_table(&["--json", "set-current", "--from-bundle", bundle, "--trust", "keys"]);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "{text}");
    let out = r.json();
    assert_eq!(out["status"], "COMMITTED", "{out}");
    assert_eq!(out["from_snapshot_id"], Value::Null, "{out}");
    assert_eq!(out["to_snapshot_id"], sid, "{out}");
    assert_eq!(
        g.py("print([s.snapshot_id for s in t.metadata.snapshots], t.metadata.current_snapshot_id, sorted(t.metadata.refs))"),
        format!("[{sid}] {sid} ['main']")
    );
    assert_eq!(
        g.py("print(t.scan().to_arrow().num_rows)"),
        rows[&sid],
        "it reads as it was sealed"
    );
}

/// A SQL catalog's compare-and-set whose answer is lost (the connection failed after the `UPDATE` reached the
/// database): lakedrill reads the row again. A bundle-mode quarantine whose update was applied is taken as
/// committed (the snapshots out of the table, the bundle kept, `QUARANTINED`); one whose update the row does not
/// show exits 2, keeps and records its bundle and sends the candidate to `PROTECTED`, the table unchanged. Before,
/// any failed statement was read as "nothing was committed" and the quarantine deleted its bundles, also when the
/// update had been applied.
#[test]
fn a_sql_catalog_commit_whose_answer_is_lost_is_settled_from_the_catalog_row() {
    let bundles_of = |g: &Gov| -> usize {
        std::fs::read_dir(g.dir.join("bundles"))
            .map(|d| {
                d.filter(|e| e.as_ref().unwrap().path().join("bundle.dsse.json").exists())
                    .count()
            })
            .unwrap_or(0)
    };
    let snapshots = |g: &Gov| g.py("print(sorted(s.snapshot_id for s in t.metadata.snapshots))");
    // Applied, answer lost: taken as committed.
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let mut args = g.quarantine_args(id, "bundle");
    args.extend(T);
    let q = crate::util::lakedrill_in_env(&g.dir, &args, &[("LAKEDRILL_FAILPOINTS", "catalog-answer-lost=1")]);
    let text = format!("{}{}", q.stdout, q.stderr);
    assert_eq!(q.code, 0, "{text}");
    assert_eq!(q.json()["status"], "QUARANTINED", "{text}");
    assert!(text.contains("taken as committed"), "{text}");
    assert_eq!(
        Some(bundles_of(&g)),
        q.json()["bundles"].as_array().map(Vec::len),
        "the bundles are kept: {text}"
    );
    let ids = snapshots(&g);
    for sid in c["snapshot_ids"].as_array().unwrap() {
        assert!(!ids.contains(&sid.to_string()), "the snapshot left the table: {ids}");
    }
    // Not applied, no answer: unknown, exit 2, the bundle kept and recorded, the candidate PROTECTED.
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let before = snapshots(&g);
    let mut args = g.quarantine_args(id, "bundle");
    args.extend(T);
    let q = crate::util::lakedrill_in_env(
        &g.dir,
        &args,
        &[("LAKEDRILL_FAILPOINTS", "catalog-update-unanswered=1")],
    );
    let text = format!("{}{}", q.stdout, q.stderr);
    assert_eq!(q.code, 2, "{text}");
    assert!(
        text.contains("outcome is unknown") && text.contains("PROTECTED"),
        "{text}"
    );
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    let cand = &st["candidates"][0]["candidate"];
    assert_eq!(cand["state"], "PROTECTED", "{st}");
    assert_eq!(cand["quarantine"]["commit_outcome"], "unknown", "{st}");
    assert!(bundles_of(&g) > 0, "the bundles are kept: {text}");
    assert_eq!(
        Some(bundles_of(&g)),
        cand["quarantine"]["bundles"].as_array().map(Vec::len),
        "and recorded: {st}"
    );
    assert_eq!(snapshots(&g), before, "the update never ran");
}

/// The purge's SQL-catalog commit whose answer is lost after it was applied: the row read again names the new
/// metadata, the commit counts as made and the purge deletes its inventory (`VERIFIED`). One the row does not show
/// deletes nothing, exits 2 and protects the candidate (the update may still land).
#[test]
fn a_purge_whose_sql_catalog_answer_is_lost_settles_it_from_the_row_before_any_delete() {
    for (spec, code) in [("catalog-update-unanswered=1", 2), ("catalog-answer-lost=1", 0)] {
        let g = Gov::new("");
        let (c, ev) = g.quarantined();
        let id = c["candidate_id"].as_str().unwrap();
        let n = c["objects"].as_array().unwrap().len();
        let mut args = g.purge_args(id, Some(&ev));
        args.extend(T);
        let p = crate::util::lakedrill_in_env(&g.dir, &args, &[("LAKEDRILL_FAILPOINTS", spec)]);
        let text = format!("{}{}", p.stdout, p.stderr);
        assert_eq!(p.code, code, "{spec}: {text}");
        let st = g.run(&["--json", "status", id]).expect_code(0).json();
        let state = &st["candidates"][0]["candidate"]["state"];
        if code == 2 {
            assert!(text.contains("outcome is unknown"), "{spec}: {text}");
            assert_eq!(g.present(&c), n, "{spec}: nothing deleted: {text}");
            assert_eq!(state, "PROTECTED", "{spec}: {st}");
        } else {
            assert!(text.contains("taken as committed"), "{spec}: {text}");
            assert_eq!(p.json()["status"], "VERIFIED", "{spec}: {text}");
            assert_eq!(g.present(&c), 0, "{spec}: {text}");
            assert_eq!(state, "VERIFIED", "{spec}: {st}");
        }
    }
}

/// The deep verify of `set-current --from-bundle` reads the bundle's copies
/// of the metadata layers, not the table's: with the snapshot's manifest list gone from the table (as a finished
/// purge leaves it) the snapshot came back pointing at nothing (exit 0). Refused now, naming the file, and nothing
/// is committed.
#[test]
fn set_current_from_a_bundle_whose_manifest_list_left_the_table_is_refused() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    let q = g.quarantine(id, "bundle").expect_code(0).json();
    let bundle = q["bundles"][0]["uri"].as_str().unwrap();
    let sid = q["bundles"][0]["snapshot_id"].as_i64().unwrap();
    // PyIceberg names a manifest list `snap-<snapshot id>-…`.
    let list = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["layer"] == "manifest_list")
        .map(|o| o["path"].as_str().unwrap())
        .find(|p| p.contains(&format!("snap-{sid}-")))
        .unwrap_or_else(|| panic!("the manifest list of {sid} among the candidate's objects: {c}"));
    std::fs::remove_file(g.table_root().join(list)).unwrap();
    let current = g.py("print(t.metadata.current_snapshot_id)");
    let r = g.on_table(&["--json", "set-current", "--from-bundle", bundle, "--trust", "keys"]);
    let v = r.expect_code(1).json();
    assert_eq!(v["status"], "REFUSED", "{v}");
    let named = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["kind"] == "OBJECT_MISSING" && f["path"].as_str().unwrap().ends_with(list));
    assert!(named, "the missing manifest list {list} is named: {v}");
    assert_eq!(
        g.py("print(t.metadata.current_snapshot_id)"),
        current,
        "nothing was committed"
    );
    assert!(
        !g.py("print(sorted(s.snapshot_id for s in t.metadata.snapshots))")
            .contains(&sid.to_string()),
        "snapshot {sid} stays out of the table"
    );
    // A cold-backup bundle is `recover`'s: its deep verify read the backup store, not the table.
    let b = g
        .on_table(&["--json", "backup", "--key", "keys/gov-TEST-ONLY.key", "--to", "backups"])
        .expect_code(0)
        .json();
    let r = g.on_table(&[
        "--json",
        "set-current",
        "--from-bundle",
        b["bundle_uri"].as_str().unwrap(),
        "--trust",
        "keys",
    ]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("cold-backup bundle") && r.stderr.contains("`recover`"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_commit_between_plan_and_quarantine_makes_quarantine_refuse() {
    let g = Gov::new("");
    let c = g.candidate();
    g.py("import pyarrow as pa\nt.append(pa.table({'id': pa.array([999], pa.int64()), 'category': pa.array(['z']), 'value': pa.array([1.0])}))");
    let r = g.quarantine(c["candidate_id"].as_str().unwrap(), "tag");
    assert_eq!(r.expect_code(1).json()["status"], "REFUSED");
}

#[test]
fn plan_quarantine_drill_purge_deletes_exactly_the_inventory() {
    plan_quarantine_drill_purge_on(Backend::Sqlite);
}

/// The same spine with the catalog and the registry in PostgreSQL: every catalog read and commit (stage,
/// plan, tag-mode quarantine, purge) and every registry change go to the server.
#[test]
fn plan_quarantine_drill_purge_deletes_exactly_the_inventory_on_postgres() {
    plan_quarantine_drill_purge_on(Backend::Postgres);
}

/// Python printing, for every ref but the quarantine tags, its name and the rows a PyIceberg scan of it reads.
const READ_EVERY_REF: &str = "for name, r in sorted(t.metadata.refs.items()):\n    \
     if not name.startswith('quarantine/'):\n        \
     print(name, t.scan(snapshot_id=r.snapshot_id).to_arrow().num_rows)";

fn plan_quarantine_drill_purge_on(backend: Backend) {
    let g = Gov::new_on("", backend);
    let start = sql_text(&g.catalog_uri, CURRENT_LOCATION).unwrap();
    let v = g.run(&["--json", "config", "check"]).expect_code(0).json();
    assert_eq!(v["status"], "VALID", "{v}");
    let rows = g.py("print(t.scan().to_arrow().num_rows, sorted(t.metadata.refs))");
    let ref_rows = g.py(READ_EVERY_REF);
    for r in ["main", "audit-q2", "what-if"] {
        assert!(ref_rows.contains(&format!("{r} ")), "{ref_rows}");
    }
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    // Dry run: every check, nothing changes.
    let dry = g.purge(id, Some(&ev), &["--dry-run"]).expect_code(0).json();
    assert_eq!(dry["status"], "DRY_RUN");
    let root = g.table_root();
    let paths: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(paths.iter().all(|p| root.join(p).exists()));
    // Purge.
    let all_before: Vec<PathBuf> = walk(&root);
    let r = g.purge(id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    let all_after: Vec<PathBuf> = walk(&root);
    let deleted: Vec<String> = all_before
        .iter()
        .filter(|p| !all_after.contains(p))
        .map(|p| p.strip_prefix(&root).unwrap().to_str().unwrap().to_owned())
        .collect();
    let mut expected = paths.clone();
    expected.sort();
    let mut deleted_sorted = deleted.clone();
    deleted_sorted.sort();
    assert_eq!(
        deleted_sorted, expected,
        "zero difference between the inventory and the deleted set"
    );
    // See: issue 18 point 5 — the purge deletes data, not only metadata: the fixture's second overwrite
    // leaves the first version of the last append's Parquet file reachable only from an expiring snapshot.
    let data: Vec<&str> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["layer"] == "data")
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    assert!(!data.is_empty(), "the candidate holds a data file: {c}");
    for p in &data {
        assert!(p.ends_with(".parquet"), "{p}");
        assert!(deleted.iter().any(|d| d.as_str() == *p), "data file {p} was deleted");
        assert!(!root.join(p).exists(), "{p} is gone");
    }
    // The table, its tag and its branch still read in PyIceberg (the quarantine tags are gone), down to the
    // data: every retained ref scans, with the rows it had before the purge.
    assert_eq!(
        g.py("print(t.scan().to_arrow().num_rows, sorted(t.metadata.refs))"),
        rows
    );
    assert_eq!(
        g.py(READ_EVERY_REF),
        ref_rows,
        "every retained ref reads the rows it read before"
    );
    pyiceberg_reads_everything(&g);
    // One confirmed receipt per deleted object, and a signed summary that says it equals the inventory.
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "VERIFIED");
    let summary = PathBuf::from(r["summary"].as_str().unwrap().trim_start_matches("file://"));
    let env: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    use base64::Engine;
    let payload: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["predicate"]["equals_inventory"], true);
    assert_eq!(payload["predicate"]["deleted"].as_array().unwrap().len(), paths.len());
    assert!(payload["predicate"]["receipts"].as_u64().unwrap() >= 2 * paths.len() as u64);
    // A second purge is refused: nothing is deleted twice.
    g.purge(id, Some(&ev), &[]).expect_code(1);
    // The quarantine tags were committed to this catalog and removed again: two commits past the start.
    let end = sql_text(&g.catalog_uri, CURRENT_LOCATION).unwrap();
    assert_ne!(end, start, "the catalog row never moved");
    if backend == Backend::Postgres {
        // Nothing fell back to SQLite files.
        assert!(!g.dir.join("fx/catalog.db").exists());
        assert!(!g.dir.join("registry.db").exists());
        assert!(!g.dir.join("lakedrill-registry.db").exists());
        let events = sql_text(&g.catalog_uri, "SELECT CAST(COUNT(*) AS TEXT) FROM events").unwrap();
        assert!(
            events.parse::<u32>().unwrap() > 3,
            "registry events in PostgreSQL: {events}"
        );
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

pub fn refused_with(r: &Run, needle: &str) {
    let v = r.expect_code(1).json();
    assert_eq!(v["status"], "REFUSED", "{v}");
    assert!(v["reasons"].to_string().contains(needle), "want {needle:?}: {v}");
}

#[test]
fn purge_refuses_without_valid_fresh_matching_evidence() {
    let g = Gov::new("evidenceMaxAge: 1h\n");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    refused_with(&g.purge(id, None, &[]), "no evidence");
    // Signed by a key the trust store does not hold.
    let other = tmpdir();
    lakedrill_in(other.path(), &["keygen", "--name", "rogue-TEST-ONLY", "--dir", "k"]).expect_code(0);
    let bytes = std::fs::read(&ev).unwrap();
    let env: Value = serde_json::from_slice(&bytes).unwrap();
    use base64::Engine;
    let payload = base64::engine::general_purpose::STANDARD
        .decode(env["payload"].as_str().unwrap())
        .unwrap();
    let rogue = lakedrill::evidence::keys::load_signing_key(&other.path().join("k/rogue-TEST-ONLY.key")).unwrap();
    let forged = g.dir.join("forged.dsse.json");
    std::fs::write(
        &forged,
        lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, &payload, &rogue).to_json_bytes(),
    )
    .unwrap();
    refused_with(&g.purge(id, Some(&forged), &[]), "UNTRUSTED_KEY");
    // Stale: finished long ago (re-signed with the trusted key, so only the age is wrong).
    let mut st: Value = serde_json::from_slice(&payload).unwrap();
    st["predicate"]["finished_at"] = Value::String("2020-01-01T00:00:00.000Z".into());
    let key = lakedrill::evidence::keys::load_signing_key(&g.dir.join("keys/gov-TEST-ONLY.key")).unwrap();
    let stale = g.dir.join("stale.dsse.json");
    std::fs::write(
        &stale,
        lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, st.to_string().as_bytes(), &key).to_json_bytes(),
    )
    .unwrap();
    refused_with(&g.purge(id, Some(&stale), &[]), "stale");
    // A merged report is as old as its oldest shard: fresh at its end, started long ago, it is stale too.
    let mut merged: Value = serde_json::from_slice(&payload).unwrap();
    merged["predicate"]["started_at"] = Value::String("2020-01-01T00:00:00.000Z".into());
    merged["predicate"]["merged_from"] = Value::Array(Vec::new());
    let old_shard = g.dir.join("old-shard.dsse.json");
    std::fs::write(
        &old_shard,
        lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, merged.to_string().as_bytes(), &key)
            .to_json_bytes(),
    )
    .unwrap();
    refused_with(&g.purge(id, Some(&old_shard), &[]), "its oldest shard started");
    // The weekly gate ages a merged report as the deleter does: the same merged report with its own start passes
    // the gate, and with its oldest shard started long ago it fails it.
    let weekly_of = |merged: &Value| {
        let folder = g.dir.join("merged-reports/weekly");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("merged.dsse.json"),
            lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, merged.to_string().as_bytes(), &key)
                .to_json_bytes(),
        )
        .unwrap();
        crate::gates::gate(
            &crate::gates::gates_reading(&g, "merged-reports").json(),
            "weekly_restores",
        )
        .clone()
    };
    let mut fresh_merge: Value = serde_json::from_slice(&payload).unwrap();
    fresh_merge["predicate"]["merged_from"] = Value::Array(Vec::new());
    let fresh_gate = weekly_of(&fresh_merge);
    assert_eq!(fresh_gate["status"], "PASS", "{fresh_gate}");
    assert_eq!(fresh_gate["figures"]["merged"], true, "{fresh_gate}");
    let old_gate = weekly_of(&merged);
    assert_eq!(old_gate["status"], "FAIL", "{old_gate}");
    assert!(
        old_gate["detail"]
            .as_str()
            .unwrap()
            .contains("merged from shards started 2020-01-01T00:00:00.000Z"),
        "{old_gate}"
    );
    // Evidence for other bundle roots.
    let mut other_roots: Value = serde_json::from_slice(&payload).unwrap();
    for r in other_roots["predicate"]["results"].as_array_mut().unwrap() {
        r["bundle_root"] = Value::String("0".repeat(64));
    }
    for s in other_roots["subject"].as_array_mut().unwrap() {
        s["digest"]["blake3"] = Value::String("0".repeat(64));
    }
    let wrong = g.dir.join("wrong.dsse.json");
    std::fs::write(
        &wrong,
        lakedrill::evidence::sign(
            lakedrill::evidence::PAYLOAD_TYPE,
            other_roots.to_string().as_bytes(),
            &key,
        )
        .to_json_bytes(),
    )
    .unwrap();
    refused_with(&g.purge(id, Some(&wrong), &[]), "RESTORE_VERIFIED");
    // Signed by the purge's own key (the drills' key given as --key): refused, whatever the trust folder holds.
    let mut own = g.purge_args(id, Some(&ev));
    let at = own.iter().position(|a| *a == DELETER_KEY).unwrap();
    own[at] = "keys/gov-TEST-ONLY.key";
    refused_with(&g.on_table(&own), "the purge's own key");
    // The same behind a merge: a shard report signed by the purge's own key, merged under the drills' key, is
    // refused for that shard (the merged report's own signature is not the deleter's).
    let shard_plan = g.dir.join("drill-deleter-shard.toml");
    std::fs::write(
        &shard_plan,
        format!(
            "name = \"deleter-shard\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"keys\"\nkey = \"{DELETER_KEY}\"\nreports = \"reports\"\n"
        ),
    )
    .unwrap();
    let shard = g
        .run(&["--json", "drill", "run", shard_plan.to_str().unwrap(), "--shard", "0/1"])
        .expect_code(0)
        .json();
    let merged_ev = g
        .run(&[
            "--json",
            "report",
            "merge",
            shard["report"].as_str().unwrap(),
            "--key",
            "keys/gov-TEST-ONLY.key",
            "--trust",
            "keys",
            "--reports",
            "reports",
        ])
        .expect_code(0)
        .json();
    let merged_ev = PathBuf::from(merged_ev["report"].as_str().unwrap().trim_start_matches("file://"));
    refused_with(&g.purge(id, Some(&merged_ev), &[]), "the purge's own key");
    // A roles file that does not give the drills' key the drill role: refused, naming the file.
    let roles = g.dir.join("keys/roles.toml");
    std::fs::write(
        &roles,
        "seal = [\"gov-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    refused_with(&g.purge(id, Some(&ev), &[]), "roles.toml does not give the drill role");
    // The weekly gate reads it the same way: the report is one it cannot verify.
    let gates = crate::gates::gates(&g).json();
    let weekly = crate::gates::gate(&gates, "weekly_restores");
    assert_eq!(weekly["status"], "FAIL", "{weekly}");
    assert!(
        weekly["detail"]
            .as_str()
            .unwrap()
            .contains("do not verify under the trust folder's keys"),
        "{weekly}"
    );
    assert!(
        weekly["figures"]["unverified_reports"]
            .to_string()
            .contains(ev.file_name().unwrap().to_str().unwrap()),
        "{weekly}"
    );
    // One that gives the drills' key no seal role: its bundles no longer verify.
    std::fs::write(
        &roles,
        "drill = [\"gov-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    refused_with(&g.purge(id, Some(&ev), &[]), "seal role");
    // One key with both drill and deleter: the trust folder is refused (exit 2), naming the file.
    std::fs::write(
        &roles,
        "drill = [\"deleter-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    let both = g.purge(id, Some(&ev), &[]);
    both.expect_code(2);
    assert!(
        both.stderr.contains("roles.toml") && both.stderr.contains("both drill and deleter"),
        "{}",
        both.stderr
    );
    // One that gives the purge's own key no deleter role: what it would sign would verify nowhere (exit 2, before
    // anything is judged), naming the key and the file.
    std::fs::write(&roles, "seal = [\"gov-TEST-ONLY\"]\ndrill = [\"gov-TEST-ONLY\"]\n").unwrap();
    let no_deleter = g.purge(id, Some(&ev), &[]);
    no_deleter.expect_code(2);
    assert!(
        no_deleter.stderr.contains("roles.toml")
            && no_deleter.stderr.contains("deleter role")
            && no_deleter.stderr.contains(DELETER_KEY),
        "{}",
        no_deleter.stderr
    );
    // Every refusal is recorded; the candidate is still quarantined and nothing was deleted.
    g.assert_all_present(&c);
    // Each key in its role: accepted.
    std::fs::write(
        &roles,
        "seal = [\"gov-TEST-ONLY\"]\ndrill = [\"gov-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    g.purge(id, Some(&ev), &["--dry-run"]).expect_code(0);
}

/// The signed purge summary's predicate (read without verifying: the tests of the summary's signature are
/// elsewhere).
fn summary_of(g: &Gov, purge: &Value) -> Value {
    let uri = purge["summary"].as_str().expect("a summary");
    let path = uri
        .strip_prefix("file://")
        .map_or_else(|| g.dir.join(uri), PathBuf::from);
    let bytes = std::fs::read(&path).unwrap();
    lakedrill::evidence::peek_unverified(&bytes).unwrap()["predicate"].clone()
}

/// Every snapshot the table still has and every ref, read by PyIceberg down to the data.
fn pyiceberg_reads_everything(g: &Gov) {
    let out = g.py(
        "n = 0\nfor s in t.metadata.snapshots:\n    t.scan(snapshot_id=s.snapshot_id).to_arrow()\n    n += 1\n\
         for name, r in t.metadata.refs.items():\n    t.scan(snapshot_id=r.snapshot_id).to_arrow()\nprint('read', n)",
    );
    assert!(out.contains("read "), "{out}");
}

#[test]
fn purge_rebases_when_the_world_changed() {
    // A hold set after quarantine on an unrelated prefix bumps the hold generation: the purge re-judges the
    // candidate at the current generation, records the rebase in its signed summary and deletes the inventory.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    g.on_table(&[
        "hold",
        "set",
        "--scope",
        "prefix:data/unrelated",
        "--reason",
        "late hold",
    ])
    .expect_code(0);
    let p = g.purge(id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    let s = summary_of(&g, &p);
    assert_eq!(s["rebases"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(s["equals_inventory"], true, "{s}");
    let root = g.table_root();
    assert!(
        c["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| !root.join(o["path"].as_str().unwrap()).exists()),
        "every object of the inventory is deleted"
    );
    pyiceberg_reads_everything(&g);

    // A new commit to the table (a PyIceberg append), and separately a new tag on the current snapshot.
    for change in [
        "import pyarrow as pa\nt.append(pa.table({'id': pa.array([999], pa.int64()), 'category': pa.array(['z']), 'value': pa.array([1.0])}))",
        "t.manage_snapshots().create_tag(t.metadata.current_snapshot_id, 'late-tag').commit()",
    ] {
        let g = Gov::new("");
        let (c, ev) = g.quarantined();
        let id = c["candidate_id"].as_str().unwrap();
        g.py(change);
        let dry = g.purge(id, Some(&ev), &["--dry-run"]).expect_code(0).json();
        assert_eq!(dry["status"], "DRY_RUN", "{dry}");
        let p = g.purge(id, Some(&ev), &[]).expect_code(0).json();
        assert_eq!(p["status"], "VERIFIED", "{p}");
        let s = summary_of(&g, &p);
        let rebase = &s["rebases"][0];
        assert_ne!(
            rebase["from"]["metadata_location"], rebase["to"]["metadata_location"],
            "{s}"
        );
        pyiceberg_reads_everything(&g);
    }

    // A lease on one of the candidate's own snapshots: nothing that snapshot reaches is deleted.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let sid = c["snapshot_ids"][0].to_string();
    g.on_table(&[
        "lease",
        "add",
        "--policy",
        g.policy.to_str().unwrap(),
        "--snapshot-id",
        &sid,
        "--purpose",
        "p",
        "--owner",
        "o",
        "--expires-in",
        "1d",
    ])
    .expect_code(0);
    let r = g.purge(id, Some(&ev), &[]);
    let v = r.json();
    if c["snapshot_ids"].as_array().unwrap().len() == 1 {
        refused_with(&r, "now PROTECTED");
    } else {
        assert_eq!(v["status"], "VERIFIED", "{v}");
    }
    let out = g.py(&format!("print(len(t.scan(snapshot_id={sid}).to_arrow()))"));
    assert!(!out.trim().is_empty(), "the leased snapshot {sid} still reads: {out}");

    // A new ref on one of the candidate's snapshots: the purge rebases, that snapshot's objects leave the
    // candidate as PROTECTED, the rest is deleted, and PyIceberg still reads the tagged snapshot.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let sid = c["snapshot_ids"][0].to_string();
    g.py(&format!("t.manage_snapshots().create_tag({sid}, 'keep-this').commit()"));
    let r = g.purge(id, Some(&ev), &[]);
    if c["snapshot_ids"].as_array().unwrap().len() == 1 {
        refused_with(&r, "now PROTECTED");
        let st = g.run(&["--json", "status", id]).expect_code(0).json();
        assert_eq!(st["candidates"][0]["candidate"]["state"], "PROTECTED");
    } else {
        let v = r.expect_code(0).json();
        assert_eq!(v["status"], "VERIFIED", "{v}");
        let kept = v["objects"]["PROTECTED"].as_array().unwrap();
        assert!(
            kept.iter()
                .any(|p| p.as_str().unwrap().contains(&format!("snap-{sid}-"))),
            "the tagged snapshot's manifest list is kept: {v}"
        );
        let s = summary_of(&g, &v);
        assert!(s["rebases"][0]["released_snapshots"].to_string().contains(&sid), "{s}");
        for p in kept {
            assert!(g.table_root().join(p.as_str().unwrap()).exists(), "{p} is still there");
        }
    }
    let out = g.py(&format!("print(len(t.scan(snapshot_id={sid}).to_arrow()))"));
    assert!(!out.trim().is_empty(), "the tagged snapshot {sid} still reads: {out}");

    // A stopped deleter.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    g.run(&["deleter", "stop", "--reason", "incident 42"]).expect_code(0);
    refused_with(&g.purge(id, Some(&ev), &[]), "incident 42");
    g.run(&["deleter", "start"]).expect_code(0);
    assert_eq!(g.purge(id, Some(&ev), &[]).expect_code(0).json()["status"], "VERIFIED");
}

/// Runs the binary with failpoints; returns (exit code or None when killed, stdout).
pub fn with_failpoints(g: &Gov, spec: &str, args: &[&str]) -> Option<i32> {
    let mut a = args.to_vec();
    a.extend(T);
    let out = Command::new(env!("CARGO_BIN_EXE_lakedrill"))
        .args(&a)
        .current_dir(&g.dir)
        .env("LAKEDRILL_FAILPOINTS", spec)
        .output()
        .unwrap();
    out.status.code()
}

#[test]
fn lost_responses_and_5xx_end_in_delete_unknown_that_reconcile_settles() {
    for spec in ["lose-every=2", "error-every=2"] {
        let g = Gov::new("maxUnreconciledUnknowns: 0\n");
        let (c, ev) = g.quarantined();
        let id = c["candidate_id"].as_str().unwrap();
        let n = c["objects"].as_array().unwrap().len();
        let policy = g.policy.to_str().unwrap();
        let code = with_failpoints(&g, spec, &g.purge_args(id, Some(&ev)));
        assert_eq!(code, Some(1), "{spec}");
        let st = g.run(&["--json", "status", id]).expect_code(0).json();
        assert_eq!(
            st["candidates"][0]["candidate"]["state"], "DELETE_UNKNOWN",
            "{spec}: {st}"
        );
        let unknown = st["candidates"][0]["object_counts"]["DELETE_UNKNOWN"].as_u64().unwrap();
        assert_eq!(unknown as usize, n / 2, "{spec}: every 2nd delete is uncertain");
        assert_eq!(
            st["candidates"][0]["object_counts"]["VERIFIED"].as_u64().unwrap() as usize,
            n - n / 2
        );
        // None is counted as deleted without a re-check: reconcile settles them.
        let r = g
            .on_table(&[
                "--json",
                "reconcile",
                id,
                "--policy",
                policy,
                "--key",
                "keys/gov-TEST-ONLY.key",
                "--receipts",
                "receipts",
                "--trust",
                "keys",
            ])
            .expect_code(0)
            .json();
        assert_eq!(r["status"], "VERIFIED", "{spec}: {r}");
        let root = g.table_root();
        assert!(
            c["objects"]
                .as_array()
                .unwrap()
                .iter()
                .all(|o| !root.join(o["path"].as_str().unwrap()).exists())
        );
    }
}

#[test]
fn a_purge_killed_at_several_points_resumes_without_losing_a_receipt() {
    for kill_after in [1, 3] {
        let g = Gov::new("");
        let (c, ev) = g.quarantined();
        let id = c["candidate_id"].as_str().unwrap();
        let n = c["objects"].as_array().unwrap().len();
        assert!(n > kill_after);
        let args = g.purge_args(id, Some(&ev));
        let code = with_failpoints(&g, &format!("abort-after={kill_after}"), &args);
        assert_eq!(code, None, "the process was killed");
        let st = g.run(&["--json", "status", id]).expect_code(0).json();
        assert_eq!(st["candidates"][0]["candidate"]["state"], "DELETE_APPROVED");
        // Re-running resumes: the interrupted object is re-checked, not deleted blindly.
        let r = g.purge(id, Some(&ev), &[]).expect_code(0).json();
        assert_eq!(r["status"], "VERIFIED", "{r}");
        assert_eq!(r["objects"]["VERIFIED"].as_array().unwrap().len(), n);
        let receipts = std::fs::read_dir(g.dir.join("receipts").join(id)).unwrap().count();
        assert!(receipts >= 2, "archive and summary are written");
        // What the killed run recorded but never sealed was sealed by the resume: the receipts chain and the
        // registry agree (#23 point 4).
        g.assert_audit_verified(r["summary"].as_str().unwrap());
        let root = g.table_root();
        assert!(
            c["objects"]
                .as_array()
                .unwrap()
                .iter()
                .all(|o| !root.join(o["path"].as_str().unwrap()).exists())
        );
    }
}

/// The purge's receipts are sealed per registry batch into a signed chain whose head the summary carries (#23
/// point 4): the untouched summary verifies; one receipt row edited in the registry, a row added, or a batch file
/// removed each make `audit verify` of the summary exit 1 naming it.
#[test]
fn purge_receipts_are_chained_and_signed_and_an_edited_registry_row_fails_the_audit() {
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let r = g.purge(id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    let summary = summary_of(&g, &r);
    let folder = g.dir.join("receipts").join(id);
    let mut batches: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("batch-"))
        .collect();
    batches.sort();
    // An intent batch and a confirmation batch at least, linked, their count and head in the summary.
    assert!(batches.len() >= 2, "{batches:?}");
    assert_eq!(summary["receipt_batches"], batches.len() as u64, "{summary}");
    let last = std::fs::read(batches.last().unwrap()).unwrap();
    assert_eq!(
        summary["receipts_head"].as_str().unwrap(),
        lakedrill::evidence::sha256_hex(&last)
    );
    let mut sealed = 0;
    let mut previous: Option<String> = None;
    for b in &batches {
        let bytes = std::fs::read(b).unwrap();
        let p = lakedrill::evidence::peek_unverified(&bytes).unwrap()["predicate"].clone();
        assert_eq!(p["previous"].as_str().map(str::to_owned), previous, "{}", b.display());
        sealed += p["receipts"].as_array().unwrap().len() as u64;
        previous = Some(lakedrill::evidence::sha256_hex(&bytes));
    }
    assert_eq!(summary["receipts"].as_u64(), Some(sealed), "{summary}");
    let summary_file = r["summary"].as_str().unwrap().to_owned();
    let audit = |g: &Gov| g.run(&["--json", "audit", "verify", &summary_file, "--trust", "keys"]);
    let a = audit(&g);
    a.expect_code(0);
    assert_eq!(a.json()["status"], "VERIFIED", "{}", a.stdout);
    // One receipt row edited in the registry: the signed copy differs.
    let db = g.dir.join("registry.db");
    let sql = |stmt: &str| {
        g.py(&format!(
            "import sqlite3\nc = sqlite3.connect('{}')\nn = c.execute(\"{stmt}\").rowcount\nc.commit()\nprint(n)",
            db.display()
        ))
    };
    assert_eq!(
        sql(
            "UPDATE receipts SET receipt_json = replace(receipt_json, 'deleted', 'kept') WHERE rowid = (SELECT MAX(rowid) FROM receipts WHERE receipt_json LIKE '%confirmed%')"
        ),
        "1"
    );
    let a = audit(&g);
    a.expect_code(1);
    let v = a.json();
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["check"] == "RECEIPTS_MISMATCH"
                && f["detail"].as_str().unwrap().contains("differs from its signed copy")),
        "{v}"
    );
    sql("UPDATE receipts SET receipt_json = replace(receipt_json, 'kept', 'deleted')");
    audit(&g).expect_code(0);
    // A row added that no batch seals.
    sql(&format!(
        "INSERT INTO receipts (candidate_id, path, attempt, receipt_json, created_at) VALUES ('{id}', 'data/forged.parquet', 1, '{{}}', '2026-01-01T00:00:00Z')"
    ));
    let a = audit(&g);
    a.expect_code(1);
    assert!(
        a.stdout.contains("data/forged.parquet attempt 1 is in no signed batch"),
        "{}",
        a.stdout
    );
    sql("DELETE FROM receipts WHERE path = 'data/forged.parquet'");
    audit(&g).expect_code(0);
    // A batch file removed: the chain no longer reaches the summary's head.
    std::fs::rename(&batches[0], g.dir.join("aside.dsse.json")).unwrap();
    let a = audit(&g);
    a.expect_code(1);
    assert!(a.stdout.contains("RECEIPTS_CHAIN_BROKEN"), "{}", a.stdout);
}

/// The whole chain on the local S3 server with a versioned bucket: the deletes leave delete markers
/// (marker-only, the policy's default), receipts carry the version IDs, and the table still reads.
#[test]
fn plan_quarantine_drill_purge_on_a_versioned_s3_bucket() {
    let bucket = std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh");
    let prefix = format!("gov-{}", uuid::Uuid::new_v4());
    let g = Gov::with_warehouse("", Some(format!("s3://{bucket}/{prefix}")));
    let rows = g.py("print(t.scan().to_arrow().num_rows, sorted(t.metadata.refs))");
    let (c, _, _) = g.chain(&format!("s3://{bucket}/{prefix}-vault"));
    let id = c["candidate_id"].as_str().unwrap();
    assert_eq!(
        g.py("print(t.scan().to_arrow().num_rows, sorted(t.metadata.refs))"),
        rows
    );
    // Every deleted key is behind a delete marker, its old version kept (marker-only deletes): the data
    // files among them too (the fixture's candidate holds one).
    assert!(
        c["objects"].as_array().unwrap().iter().any(|o| o["layer"] == "data"),
        "{c}"
    );
    let keys: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| format!("{prefix}/db/retention/{}", o["path"].as_str().unwrap()))
        .collect();
    let listing = g.py(&format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url=os.environ['LAKEDRILL_TEST_S3_ENDPOINT'], aws_access_key_id='testing', aws_secret_access_key='testing', region_name='us-east-1')\n\
         v = s3.list_object_versions(Bucket='{bucket}', Prefix='{prefix}/db/retention/')\n\
         print(sorted(m['Key'] for m in v.get('DeleteMarkers', []) if m['IsLatest']))\n\
         print(sorted(x['Key'] for x in v.get('Versions', [])))"
    ));
    let mut lines = listing.lines();
    let markers = lines.next().unwrap();
    let versions = lines.next().unwrap();
    for k in &keys {
        assert!(markers.contains(k.as_str()), "{k} has no delete marker: {markers}");
        assert!(versions.contains(k.as_str()), "{k} lost its old version: {versions}");
    }
    // The receipts name the version each delete hid.
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "VERIFIED");
    let db = g.dir.join("registry.db");
    let out = Command::new(python())
        .arg("-c")
        .arg(format!(
            "import sqlite3, json\nc = sqlite3.connect('{}')\nrs = [json.loads(r[0]) for r in c.execute(\"select receipt_json from receipts where receipt_json like '%\\\"confirmed\\\"%'\")]\nprint(len(rs), all(r['version_id'] and r['delete_marker'] and r['recheck'] == 'absent' for r in rs))",
            db.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{} True", keys.len()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Recovery behind delete markers: after a marker-only purge, `undelete` removes the markers, the
/// objects verify against the bundles, and the runbook brings a purged snapshot back into the table.
/// With `objectVersioning: permanent` the exact versions are deleted and nothing is left to undelete.
/// A purge killed mid-batch on a versioned bucket (one delete out, unanswered), then a hold: the candidate is
/// `PROTECTED`, its unanswered deletes `DELETE_UNKNOWN`; `reconcile` finds the one that took effect (`VERIFIED`) and
/// puts the rest back to `PROTECTED`; `undelete` brings that one back and moves it out of `VERIFIED` too, although
/// the candidate was `PROTECTED` already (before, its own move was a no-op and the object stayed `VERIFIED`: the
/// registry said deleted of a present file, and no plan kept it from becoming an orphan candidate).
#[test]
fn undelete_of_a_protected_candidate_moves_what_it_brings_back_out_of_verified() {
    let bucket = std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh");
    let prefix = format!("undel-prot-{}", uuid::Uuid::new_v4());
    let g = Gov::with_warehouse("", Some(format!("s3://{bucket}/{prefix}")));
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let n = c["objects"].as_array().unwrap().len();
    // One single delete at a time: the kill after the first leaves exactly one gone.
    let cfg = g.dir.join("lakedrill.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}[storage]\nio_concurrency = 1\ns3_delete_objects = false\n"),
    )
    .unwrap();
    assert_eq!(with_failpoints(&g, "abort-after=1", &g.purge_args(id, Some(&ev))), None);
    let count = |state: &str| -> usize {
        let st = g.run(&["--json", "status", id]).expect_code(0).json();
        st["candidates"][0]["object_counts"][state].as_u64().unwrap_or(0) as usize
    };
    g.on_table(&["--json", "hold", "set", "--scope", "table", "--reason", "litigation 12"])
        .expect_code(0);
    assert!(count("DELETE_UNKNOWN") >= 1, "the unanswered deletes are uncertain");
    let r = g.reconcile(id);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(count("VERIFIED"), 1, "the one delete that took effect: {}", r.stdout);
    assert_eq!(count("PROTECTED"), n - 1);
    let u = g
        .on_table(&["--json", "undelete", id, "--trust", "keys"])
        .expect_code(0)
        .json();
    assert_eq!(u["status"], "UNDELETED", "{u}");
    assert_eq!(count("VERIFIED"), 0, "nothing present is recorded deleted");
    assert_eq!(count("PROTECTED"), n);
}

/// See: the review of 2026-12-07. An undelete that could not bring back every object (one object's versions gone
/// for good, as a lifecycle rule removes them) ended INCOMPLETE with its candidate still `VERIFIED`: a plan skips a
/// `VERIFIED` candidate whole, so the objects it did bring back looked unreferenced, orphans to be. The candidate is
/// now `PROTECTED` as soon as one object came back; the object still gone stays `VERIFIED`.
#[test]
fn an_incomplete_undelete_protects_the_candidate_of_the_objects_it_brought_back() {
    let bucket = std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh");
    let prefix = format!("undel-part-{}", uuid::Uuid::new_v4());
    let g = Gov::with_warehouse("", Some(format!("s3://{bucket}/{prefix}")));
    let (c, _, r) = g.chain(&format!("s3://{bucket}/{prefix}-vault"));
    assert_eq!(r["status"], "VERIFIED", "{r}");
    let id = c["candidate_id"].as_str().unwrap();
    let n = c["objects"].as_array().unwrap().len();
    assert!(n >= 2, "{c}");
    let location = g.py("print(t.location())");
    let key = format!(
        "{}/{}",
        location.trim_start_matches(&format!("s3://{bucket}/")),
        c["objects"][0]["path"].as_str().unwrap()
    );
    g.py(&format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url=os.environ['LAKEDRILL_TEST_S3_ENDPOINT'], aws_access_key_id='testing', aws_secret_access_key='testing', region_name='us-east-1')\n\
         r = s3.list_object_versions(Bucket='{bucket}', Prefix='{key}')\n\
         for v in r.get('Versions', []) + r.get('DeleteMarkers', []):\n    \
             if v['Key'] == '{key}': s3.delete_object(Bucket='{bucket}', Key='{key}', VersionId=v['VersionId'])"
    ));
    let u = g.on_table(&["--json", "undelete", id, "--trust", "keys"]);
    let v = u.expect_code(1).json();
    assert_eq!(v["status"], "INCOMPLETE", "{v}");
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "PROTECTED", "{st}");
    let counts = &st["candidates"][0]["object_counts"];
    assert_eq!(
        (counts["VERIFIED"].as_u64(), counts["PROTECTED"].as_u64()),
        (Some(1), Some(n as u64 - 1)),
        "{st}"
    );
}

#[test]
fn undelete_recovers_objects_behind_delete_markers_and_permanent_mode_deletes_versions() {
    let bucket = std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh");
    for permanent in [false, true] {
        let prefix = format!("undel-{}", uuid::Uuid::new_v4());
        let extra = if permanent { "objectVersioning: permanent\n" } else { "" };
        let g = Gov::with_warehouse(extra, Some(format!("s3://{bucket}/{prefix}")));
        let (c, q, _) = g.chain(&format!("s3://{bucket}/{prefix}-vault"));
        let id = c["candidate_id"].as_str().unwrap();
        let u = g.on_table(&["--json", "undelete", id, "--trust", "keys"]);
        if permanent {
            let v = u.expect_code(1).json();
            assert_eq!(v["status"], "INCOMPLETE");
            assert!(v["objects"].to_string().contains("deleted permanently"), "{v}");
            continue;
        }
        let v = u.expect_code(0).json();
        assert_eq!(v["status"], "UNDELETED", "{v}");
        assert!(
            v["objects"].as_array().unwrap().iter().all(|o| o["verified"] == true),
            "{v}"
        );
        let st = g.run(&["--json", "status", id]).expect_code(0).json();
        assert_eq!(st["candidates"][0]["candidate"]["state"], "PROTECTED");
        // A purged snapshot comes back into the table from its bundle, and PyIceberg reads it.
        let b = &q["bundles"][0];
        g.on_table(&[
            "set-current",
            "--from-bundle",
            b["uri"].as_str().unwrap(),
            "--trust",
            "keys",
        ])
        .expect_code(0);
        assert_eq!(
            g.py("print(t.metadata.current_snapshot_id)"),
            b["snapshot_id"].to_string()
        );
        g.py("t.scan().to_arrow()");
    }
}

#[test]
fn rollback_only_to_ancestors_and_set_current_to_a_tag_are_catalog_commits_pyiceberg_sees() {
    let g = Gov::new("");
    let hist = g.on_table(&["--json", "inspect", "history"]).expect_code(0).json();
    let rows = hist["history"].as_array().unwrap();
    let ancestor = rows[rows.len() - 3]["snapshot_id"].to_string();
    g.on_table(&["rollback", "--to", &ancestor]).expect_code(0);
    assert_eq!(g.py("print(t.metadata.current_snapshot_id)"), ancestor);
    // The snapshot that was current before is no longer an ancestor: rollback refuses it.
    let newest = rows[rows.len() - 1]["snapshot_id"].to_string();
    let r = g.on_table(&["--json", "rollback", "--to", &newest]);
    assert!(
        r.expect_code(1).json()["reason"]
            .as_str()
            .unwrap()
            .contains("not an ancestor")
    );
    // set-current jumps anywhere, here to the tag, as Iceberg's set_current_snapshot does.
    g.on_table(&["set-current", "--snapshot-id", &newest]).expect_code(0);
    g.on_table(&["set-current", "--ref", "audit-q2"]).expect_code(0);
    assert_eq!(
        g.py("print(t.metadata.current_snapshot_id == t.metadata.refs['audit-q2'].snapshot_id)"),
        "True"
    );
    // Through a metadata file there is no catalog to commit to.
    let md = g.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json()["metadata_location"]
        .as_str()
        .unwrap()
        .to_owned();
    g.run(&["rollback", "--metadata", &md, "--to", &ancestor])
        .expect_code(2);
}

/// `rollback --to` and `set-current` of the snapshot `main` already points at commit nothing: no new metadata
/// file, the table's generation stays (it wrote one, which moved the generation and made pending purges rebase).
#[test]
fn rollback_and_set_current_to_the_current_snapshot_commit_nothing() {
    let g = Gov::new("");
    let location = |g: &Gov| {
        g.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json()["metadata_location"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let before = location(&g);
    let current = g.py("print(t.metadata.current_snapshot_id)");
    let r = g
        .on_table(&["--json", "rollback", "--to", &current])
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "ALREADY_CURRENT", "{r}");
    assert_eq!(r["to_snapshot_id"].to_string(), current, "{r}");
    assert_eq!(r["metadata_location"], before.as_str(), "{r}");
    let r = g.on_table(&["rollback", "--to", &current]);
    assert!(
        r.expect_code(0)
            .stdout
            .contains("already the current snapshot; nothing committed"),
        "{}",
        r.stdout
    );
    for args in [["--snapshot-id", current.as_str()], ["--ref", "main"]] {
        let mut a = vec!["--json", "set-current"];
        a.extend(args);
        let r = g.on_table(&a).expect_code(0).json();
        assert_eq!(r["status"], "ALREADY_CURRENT", "{r}");
    }
    assert_eq!(location(&g), before);
}

/// On the PyIceberg table with a branch, a tag, a rollback and expired snapshots (read-only: plan changes
/// nothing), nothing a retained snapshot reaches is ever a candidate.
#[test]
fn plan_on_a_table_with_rollback_and_expired_snapshots_keeps_every_retained_object() {
    let tmp = tmpdir();
    crate::util::pyfix_config(tmp.path());
    let cfg = tmp.path().join("lakedrill.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "[registry]\nuri = \"sqlite:{}\"\n",
        tmp.path().join("registry.db").display()
    ));
    std::fs::write(&cfg, text).unwrap();
    let policy = tmp.path().join("p.yaml");
    let exp = crate::util::expected("db.events");
    std::fs::write(
        &policy,
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: events/{}\nprotectedRefs: [main]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n",
            exp["table_uuid"].as_str().unwrap()
        ),
    )
    .unwrap();
    let t = ["--catalog", "pyfix", "--table", "db.events"];
    let mut args = vec!["--json", "plan", "--policy", policy.to_str().unwrap()];
    args.extend(t);
    let plan = lakedrill_in(tmp.path(), &args).expect_code(0).json();
    let retained: Vec<String> = plan["protected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["snapshot_id"].to_string())
        .collect();
    // Every ref head and every ancestor of main is retained here (the table keeps 5 days of history).
    for r in exp["refs"].as_array().unwrap() {
        assert!(retained.contains(&r["snapshot_id"].to_string()), "{}", r["name"]);
    }
    let mut reachable = std::collections::BTreeSet::new();
    for id in &retained {
        for f in exp["files"][id].as_array().unwrap() {
            reachable.insert(f["file_path"].as_str().unwrap().to_owned());
        }
        for m in exp["manifests"][id].as_array().unwrap() {
            reachable.insert(m["path"].as_str().unwrap().to_owned());
        }
    }
    let mut candidates = 0;
    for c in plan["candidates"].as_array().unwrap() {
        for o in c["objects"].as_array().unwrap() {
            let rel = o["path"].as_str().unwrap();
            assert!(
                !reachable.iter().any(|r| r.ends_with(&format!("/{rel}"))),
                "{rel} is reachable from a retained snapshot"
            );
            candidates += 1;
        }
    }
    // The rolled-back snapshot that is no ancestor of main (and no ref head) is the one expirable snapshot.
    let non_ancestors: Vec<String> = exp["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["is_current_ancestor"] == false)
        .map(|h| h["snapshot_id"].to_string())
        .collect();
    let expirable: Vec<String> = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "expired-snapshots")
        .flat_map(|c| c["snapshot_ids"].as_array().unwrap().iter().map(ToString::to_string))
        .collect();
    assert!(
        !expirable.is_empty() && expirable.iter().all(|e| non_ancestors.contains(e)),
        "{expirable:?} vs {non_ancestors:?}"
    );
    assert!(candidates > 0);
}

/// Runs `lakedrill ARGS` on the fixture's table in `n` processes started together; returns (exit code, stdout).
fn at_once(g: &Gov, args: &[&str], n: usize) -> Vec<(i32, Value)> {
    let mut a: Vec<&str> = args.to_vec();
    a.extend(T);
    let children: Vec<_> = (0..n)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_lakedrill"))
                .args(&a)
                .current_dir(&g.dir)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let code = out.status.code().expect("killed by a signal");
            assert!(
                code == 0 || code == 1,
                "exit {code}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            (code, serde_json::from_slice(&out.stdout).unwrap())
        })
        .collect()
}

/// Two quarantines of one candidate at once: one wins, the other refuses; then two purges at once: one
/// deletes the inventory, the other refuses, and the receipts show one run.
#[test]
fn two_quarantines_or_two_purges_of_one_candidate_at_once_one_wins() {
    let g = Gov::new("");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let policy = g.policy.to_str().unwrap().to_owned();
    let key = "keys/gov-TEST-ONLY.key";
    let q = at_once(
        &g,
        &[
            "--json",
            "quarantine",
            &id,
            "--policy",
            &policy,
            "--key",
            key,
            "--bundles",
            "vault/bundles",
        ],
        2,
    );
    let codes: Vec<i32> = q.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{q:#?}");
    assert_eq!(codes.iter().filter(|c| **c == 1).count(), 1, "{q:#?}");
    let st = g.run(&["--json", "status", &id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "QUARANTINED", "{st:#}");
    // The table carries the winner's tags only.
    let refs = g.py("print(sorted(r for r in t.metadata.refs if r.startswith('quarantine/')))");
    let winner = &q.iter().find(|(c, _)| *c == 0).unwrap().1;
    for tag in winner["candidate"]["quarantine"]["tags"].as_array().unwrap() {
        assert!(refs.contains(tag["name"].as_str().unwrap()), "{refs} / {winner:#}");
    }
    let plan = g.dir.join("drill-race.toml");
    std::fs::write(
        &plan,
        format!("name = \"race\"\nkind = \"quarantine\"\nbundles = \"vault/bundles\"\ntrust = \"keys\"\nkey = \"{key}\"\nreports = \"vault/reports\"\n"),
    )
    .unwrap();
    let d = g
        .run(&["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0)
        .json();
    let report = d["report"].as_str().unwrap().to_owned();
    let purge_args = [
        "--json",
        "purge",
        &id,
        "--policy",
        &policy,
        "--trust",
        "keys",
        "--key",
        DELETER_KEY,
        "--receipts",
        "vault/receipts",
        "--evidence",
        &report,
    ];
    // A live run holding the candidate (this very test process) makes a purge refuse, naming it.
    let registry = format!("sqlite:{}", g.dir.join("registry.db").display());
    let holder = |pid: u32| lakedrill::registry::PurgeRun {
        run_id: format!("run-of-{pid}"),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap()
            .trim()
            .to_owned(),
        pid: i64::from(pid),
        started_at: chrono::Utc::now(),
        heartbeat_at: chrono::Utc::now(),
    };
    let claim = |run: lakedrill::registry::PurgeRun| {
        crate::util::block_on(async {
            let r = lakedrill::registry::Registry::open(&registry).await.unwrap();
            r.purge_claim(&id, &run, None).await.unwrap().unwrap();
        })
    };
    claim(holder(std::process::id()));
    let r = g.on_table(&purge_args).expect_code(1).json();
    assert!(
        r["reasons"].to_string().contains("another quarantine or purge of"),
        "{r:#}"
    );
    // … and so does a reconcile, which would settle objects under the running purge's feet.
    let r = g
        .on_table(&[
            "--json",
            "reconcile",
            &id,
            "--policy",
            &policy,
            "--key",
            key,
            "--receipts",
            "vault/receipts",
        ])
        .expect_code(1)
        .json();
    assert_eq!(r["status"], "REFUSED", "{r:#}");
    // A run whose process is gone is taken over: a finished child's pid is dead.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    crate::util::block_on(async {
        let r = lakedrill::registry::Registry::open(&registry).await.unwrap();
        r.purge_release(&id, &format!("run-of-{}", std::process::id()), chrono::Utc::now())
            .await
            .unwrap();
    });
    claim(holder(dead));
    let p = at_once(&g, &purge_args, 2);
    let statuses: Vec<&str> = p.iter().map(|(_, v)| v["status"].as_str().unwrap()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == "VERIFIED").count(), 1, "{p:#?}");
    assert_eq!(statuses.iter().filter(|s| **s == "REFUSED").count(), 1, "{p:#?}");
    let st = g.run(&["--json", "status", &id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "VERIFIED", "{st:#}");
    // The winner took the dead run over and let the candidate go at the end.
    crate::util::block_on(async {
        let r = lakedrill::registry::Registry::open(&registry).await.unwrap();
        assert!(r.purge_run(&id).await.unwrap().is_none());
        let events = r.all_events().await.unwrap();
        let claimed: Vec<_> = events
            .iter()
            .filter(|e| e.kind == lakedrill::registry::EventKind::PurgeRunClaimed)
            .collect();
        assert!(
            claimed.iter().any(|e| e.detail["took_over"]["pid"] == i64::from(dead)),
            "{claimed:#?}"
        );
    });
}

#[test]
fn an_object_overwritten_since_quarantine_is_not_deleted_and_ends_delete_unknown() {
    // The deleter deletes only bytes it sealed: a data file of the candidate rewritten with other bytes after
    // quarantine (a different size) is left in place, DELETE_UNKNOWN, and `reconcile` does not delete it either.
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let data = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["layer"] == "data")
        .expect("the candidate holds a data file");
    let path = g.table_root().join(data["path"].as_str().unwrap());
    std::fs::write(&path, b"overwritten after quarantine").unwrap();
    let p = g.purge(id, Some(&ev), &[]).json();
    assert_eq!(p["status"], "DELETE_UNKNOWN", "{p}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"overwritten after quarantine",
        "the new bytes are kept"
    );
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert!(
        st.to_string().contains("DELETE_UNKNOWN"),
        "the object is DELETE_UNKNOWN: {st}"
    );
    g.run(&[
        "--json",
        "reconcile",
        id,
        "--policy",
        g.policy.to_str().unwrap(),
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--trust",
        "keys",
    ]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"overwritten after quarantine",
        "reconcile does not delete it"
    );
    // Every other object of the inventory is deleted.
    let others = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["path"] != data["path"]);
    for o in others {
        assert!(!g.table_root().join(o["path"].as_str().unwrap()).exists(), "{o}");
    }
}

/// The policy's `formatVersion`, `catalog` and `legalHoldGeneration` bind (#23 point 5): a policy for another format
/// version or another catalog, or one that requires more hold changes than the registry has seen, refuses `plan`
/// (exit 2 naming the field); matching values plan.
#[test]
fn a_policy_for_another_format_catalog_or_hold_generation_refuses_plan_naming_the_field() {
    let g = Gov::new("");
    let base = std::fs::read_to_string(&g.policy).unwrap();
    let version = g.py("print(t.metadata.format_version)");
    let other = if version == "2" { "3" } else { "2" };
    let cases = [
        (format!("{base}formatVersion: {other}\n"), "formatVersion"),
        (format!("{base}catalog: elsewhere\n"), "catalog"),
        (
            base.replace("legalHoldGeneration: 0", "legalHoldGeneration: 3"),
            "legalHoldGeneration",
        ),
    ];
    for (text, field) in cases {
        let p = g.dir.join(format!("p-{field}.yaml"));
        std::fs::write(&p, text).unwrap();
        let r = g.on_table(&["plan", "--policy", p.to_str().unwrap()]);
        r.expect_code(2);
        assert!(r.stderr.contains(&format!("field {field}")), "{field}: {}", r.stderr);
    }
    let p = g.dir.join("p-ok.yaml");
    std::fs::write(&p, format!("{base}formatVersion: {version}\ncatalog: rt\n")).unwrap();
    g.on_table(&["plan", "--policy", p.to_str().unwrap()]).expect_code(0);
}

/// The `table` binding requires the table's UUID (#23 point 5): a bare name, a prefix of fewer than 8 hex digits,
/// or another table's UUID under the right name refuse `plan` (exit 2 naming the field `table`). `purge` holds a
/// candidate to the same bindings: a policy for another format version, or without the UUID, exits 2 naming the
/// field, and nothing is deleted.
#[test]
fn a_policy_without_the_tables_uuid_refuses_plan_and_purge_naming_the_field() {
    let g = Gov::new("");
    let base = std::fs::read_to_string(&g.policy).unwrap();
    let line = base.lines().find(|l| l.starts_with("table: ")).unwrap().to_owned();
    let uuid = line.trim_start_matches("table: retention/").to_owned();
    assert_eq!(uuid.len(), 36, "the fixture binds the whole UUID: {line}");
    let other = if uuid.starts_with('0') { "1" } else { "0" };
    let cases = [
        ("table: retention".to_owned(), "must bind the table's UUID"),
        (format!("table: retention/{}...", &uuid[..7]), "at least 8 hex digits"),
        (
            format!("table: retention/{other}{}", &uuid[1..]),
            "the policy is bound to",
        ),
    ];
    for (binding, why) in &cases {
        let p = g.dir.join("p-table.yaml");
        std::fs::write(&p, base.replace(&line, binding)).unwrap();
        let r = g.on_table(&["plan", "--policy", p.to_str().unwrap()]);
        r.expect_code(2);
        assert!(r.stderr.contains("field table: "), "{binding}: {}", r.stderr);
        assert!(r.stderr.contains(why), "{binding}: {}", r.stderr);
        // A binding that does not parse: plan has the table, and says which UUID to bind.
        if !why.starts_with("the policy is bound") {
            assert!(
                r.stderr
                    .contains(&format!("has UUID {uuid}: bind it as `table: NAME/{}...`", &uuid[..8])),
                "{binding}: {}",
                r.stderr
            );
        }
    }
    // The UUID alone (no name) binds too.
    let p = g.dir.join("p-uuid.yaml");
    std::fs::write(&p, base.replace(&line, &format!("table: {}...", &uuid[..8]))).unwrap();
    g.on_table(&["plan", "--policy", p.to_str().unwrap()]).expect_code(0);

    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let version = g.py("print(t.metadata.format_version)");
    let wrong_format = g.dir.join("p-format.yaml");
    let v = if version == "2" { "3" } else { "2" };
    std::fs::write(&wrong_format, format!("{base}formatVersion: {v}\n")).unwrap();
    let bare = g.dir.join("p-bare.yaml");
    std::fs::write(&bare, base.replace(&line, "table: retention")).unwrap();
    for (policy, field) in [(&wrong_format, "formatVersion"), (&bare, "table")] {
        let mut args = g.purge_args(id, Some(&ev));
        let i = args.iter().position(|a| *a == "--policy").unwrap();
        args[i + 1] = policy.to_str().unwrap();
        let r = g.on_table(&args);
        r.expect_code(2);
        assert!(r.stderr.contains(&format!("field {field}")), "{field}: {}", r.stderr);
    }
    for o in c["objects"].as_array().unwrap() {
        assert!(g.table_root().join(o["path"].as_str().unwrap()).exists(), "{o}");
    }
    // The fixture's own policy purges.
    assert_eq!(g.purge(id, Some(&ev), &[]).expect_code(0).json()["status"], "VERIFIED");
}

/// Anchored chains (#23 point 4): every `drill run` anchors its chain's newest report in the registry, so
/// `audit verify --chain` fails when the newest report is removed (every remaining report still links to the one
/// before it); `--expect-head` checks against an anchor kept elsewhere.
#[test]
fn a_removed_newest_report_fails_the_anchored_chain_and_expect_head_checks_an_outside_anchor() {
    let g = Gov::new("");
    let (_, first) = g.quarantined();
    let newest = g.drill("bundles");
    let folder = newest.parent().unwrap().to_str().unwrap().to_owned();
    let audit = |extra: &[&str]| {
        let mut a = vec![
            "--json",
            "audit",
            "verify",
            folder.as_str(),
            "--trust",
            "keys/trust",
            "--chain",
        ];
        a.extend(extra);
        g.run(&a)
    };
    let v = audit(&[]).expect_code(0).json();
    assert_eq!(
        (v["reports_checked"].as_u64(), v["anchored"].as_str()),
        (Some(2), Some("the registry")),
        "{v}"
    );
    let sha = |p: &Path| lakedrill::evidence::sha256_hex(&std::fs::read(p).unwrap());
    assert_eq!(v["chain_head"], sha(&newest), "{v}");
    // The newest report removed: the rest of the chain still links, the anchor does not match.
    let aside = g.dir.join("aside.dsse.json");
    std::fs::rename(&newest, &aside).unwrap();
    let r = audit(&[]);
    r.expect_code(1);
    assert!(r.stdout.contains("CHAIN_HEAD_MISMATCH"), "{}", r.stdout);
    std::fs::rename(&aside, &newest).unwrap();
    audit(&[]).expect_code(0);
    // An anchor kept elsewhere: the older report's digest is not the head.
    let r = audit(&["--expect-head", &sha(&first)]);
    r.expect_code(1);
    assert!(r.stdout.contains("CHAIN_HEAD_MISMATCH"), "{}", r.stdout);
    audit(&["--expect-head", &sha(&newest)]).expect_code(0);
    g.run(&[
        "audit",
        "verify",
        newest.to_str().unwrap(),
        "--trust",
        "keys/trust",
        "--expect-head",
        "ab",
    ])
    .expect_code(2);
}

/// The candidate's object paths, planned with `lakedrill --config <fixture config>` run from `cwd`.
fn candidate_paths_from(g: &Gov, cwd: &Path) -> Vec<String> {
    let config = g.dir.join("lakedrill.toml");
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--json",
        "plan",
        "--policy",
        g.policy.to_str().unwrap(),
    ];
    args.extend(T);
    let plan = lakedrill_in(cwd, &args).expect_code(0).json();
    let mut paths: Vec<String> = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["objects"].as_array().unwrap().iter())
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    paths.sort();
    paths
}

/// A relative hold prefix is relative to the table location: the hold protects the same files whatever the current
/// directory of the `hold set` and of the later `plan` (it was joined onto the current directory, so a plan run
/// from inside the table read `prefix:data` as `<cwd>/data` and held nothing).
#[test]
fn relative_hold_prefix_holds_the_same_files_from_any_directory() {
    let g = Gov::new("");
    let root = g.table_root();
    let before = candidate_paths_from(&g, &g.dir);
    assert!(before.iter().any(|p| p.starts_with("data/")), "{before:?}");
    let config = g.dir.join("lakedrill.toml");
    let config = config.to_str().unwrap();
    // Set from inside the table's metadata folder: `data` still means `<table>/data`.
    let mut args = vec![
        "--config",
        config,
        "--json",
        "hold",
        "set",
        "--scope",
        "prefix:data",
        "--reason",
        "case 1",
    ];
    args.extend(T);
    lakedrill_in(&root.join("metadata"), &args).expect_code(0);
    let held = candidate_paths_from(&g, &g.dir);
    assert!(held.iter().all(|p| !p.starts_with("data/")), "{held:?}");
    assert!(held.len() < before.len(), "{held:?} vs {before:?}");
    for cwd in [root.clone(), root.join("metadata"), root.join("data"), g.dir.join("fx")] {
        assert_eq!(candidate_paths_from(&g, &cwd), held, "plan run from {}", cwd.display());
    }
}

/// A hold or writer prefix outside the table (an absolute path elsewhere, `..` out of the table) would protect
/// nothing: refused with exit 2 naming the prefix and the table location, and nothing is registered.
#[test]
fn hold_and_writer_prefixes_outside_the_table_are_refused() {
    let g = Gov::new("");
    let root = g.table_root();
    let other = g.dir.join("fx/warehouse/db/other");
    for scope in [
        "prefix:/etc".to_owned(),
        "prefix:../other".to_owned(),
        "prefix:data/../../other".to_owned(),
        format!("prefix:{}", other.display()),
        format!("prefix:file://{}", other.display()),
        format!("prefix:{}", root.display()),
    ] {
        let r = g.on_table(&["hold", "set", "--scope", &scope, "--reason", "case 2"]);
        r.expect_code(2);
        let p = scope.trim_start_matches("prefix:");
        assert!(
            r.stderr.contains(&format!("prefix {p:?}")) && r.stderr.contains("the table location"),
            "{scope}: {}",
            r.stderr
        );
    }
    for prefix in ["/etc", "../x", other.to_str().unwrap()] {
        let r = g.on_table(&["writer", "begin", "--prefix", prefix]);
        r.expect_code(2);
        assert!(
            r.stderr.contains(&format!("prefix {prefix:?}")) && r.stderr.contains("the table location"),
            "{prefix}: {}",
            r.stderr
        );
    }
    let holds = g.on_table(&["--json", "hold", "list"]).expect_code(0).json();
    assert_eq!(holds["holds"].as_array().map(Vec::len), Some(0), "{holds}");
    let writers = g.on_table(&["--json", "writer", "list"]).expect_code(0).json();
    assert_eq!(writers["writers"].as_array().map(Vec::len), Some(0), "{writers}");
    // Under the table, absolute or relative, both are accepted.
    g.on_table(&[
        "hold",
        "set",
        "--scope",
        &format!("prefix:{}/data", root.display()),
        "--reason",
        "case 3",
    ])
    .expect_code(0);
    g.on_table(&["writer", "begin", "--prefix", "data/staging"])
        .expect_code(0);
}

/// The coverage rule (`coverage_weeks`) reads when its plan last drilled each bundle from the plan's own signed
/// reports: with a `roles.toml`, only reports under keys with the drill role count. A report signed by the deleter's
/// key claiming a bundle was drilled does not keep that bundle out of the next drill's coverage picks (before, any
/// trusted key counted, so whoever held the deleter's key could steer which bundles the drills looked at).
#[test]
fn coverage_reads_only_reports_signed_by_drill_keys() {
    let g = Gov::new("");
    g.quarantined();
    std::fs::write(
        g.dir.join("keys/roles.toml"),
        "seal = [\"gov-TEST-ONLY\"]\ndrill = [\"gov-TEST-ONLY\"]\ndeleter = [\"deleter-TEST-ONLY\"]\n",
    )
    .unwrap();
    let (drill, first, population) = coverage_plan(&g);
    // A report by the deleter's key, in the plan's folder (named before the chain's real report: a newest file that
    // does not verify stops the next drill), claiming the next bundle was drilled just now.
    let report = std::path::PathBuf::from(first["report"].as_str().unwrap().trim_start_matches("file://"));
    let env: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut st: Value = serde_json::from_slice(&b64.decode(env["payload"].as_str().unwrap()).unwrap()).unwrap();
    st["predicate"]["results"][0]["bundle_id"] = Value::String(population[1].clone());
    let deleter = lakedrill::evidence::keys::load_signing_key(&g.dir.join(DELETER_KEY)).unwrap();
    std::fs::write(
        report.with_file_name("19700101T000000.000Z.dsse.json"),
        lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, st.to_string().as_bytes(), &deleter)
            .to_json_bytes(),
    )
    .unwrap();
    let second = drill();
    assert_eq!(
        second["predicate"]["sample"]["selected"][0],
        population[1].as_str(),
        "the deleter-signed claim does not count: {}",
        second["predicate"]["sample"]
    );
}

/// Review E8: the coverage rule read when the plan last drilled each bundle from every report under its folder,
/// `shards/` included, while `audit verify --chain` recomputes the picks from the chain's own reports: a shard run
/// never merged moved the next drill's picks, and the honest chain then failed its audit (`SAMPLE_MISMATCH`, exit
/// 1). Both read the chain's own reports now.
#[test]
fn an_unmerged_shard_run_does_not_make_the_coverage_chain_fail_its_audit() {
    let g = Gov::new("");
    g.quarantined();
    let (drill, _first, population) = coverage_plan(&g);
    let plan = g.dir.join("coverage.toml");
    let shard = g
        .run(&["--json", "drill", "run", plan.to_str().unwrap(), "--shard", "0/1"])
        .expect_code(0)
        .json();
    assert!(shard["report"].as_str().unwrap().contains("/shards/"), "{shard}");
    assert_eq!(
        shard["predicate"]["sample"]["selected"][0],
        population[1].as_str(),
        "{shard}"
    );
    let second = drill();
    // The shard's drill is not one of the chain's: the bundle it drilled is still the one due.
    assert_eq!(
        second["predicate"]["sample"]["selected"][0],
        population[1].as_str(),
        "{}",
        second["predicate"]["sample"]
    );
    let a = g
        .run(&[
            "--json",
            "audit",
            "verify",
            "reports/coverage",
            "--trust",
            "keys",
            "--chain",
        ])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");
    assert_eq!(a["reports_checked"], 2, "{a}");
}

/// A drill plan `coverage` on the fixture's bundles (one bundle a run, `coverage_weeks = 1`), a runner of it
/// (expecting exit 0), its first report (which picked the population's first bundle) and the population's ids.
fn coverage_plan(g: &Gov) -> (impl Fn() -> Value + '_, Value, Vec<String>) {
    let plan = g.dir.join("coverage.toml");
    std::fs::write(
        &plan,
        "name = \"coverage\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"keys\"\n\
         key = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\nsample = 1\ncoverage_weeks = 1\n",
    )
    .unwrap();
    let drill = move || {
        g.run(&["--json", "drill", "run", plan.to_str().unwrap()])
            .expect_code(0)
            .json()
    };
    let first = drill();
    let population: Vec<String> = first["predicate"]["sample"]["population_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert!(population.len() >= 3, "{first}");
    assert_eq!(
        first["predicate"]["sample"]["selected"][0],
        population[0].as_str(),
        "{first}"
    );
    (drill, first, population)
}

/// The coverage rule counts a bundle as drilled only by a result that verified it whole: a `--split objects` shard's
/// result (its `object_shard`, one share of the bundle's objects), merged or not, does not keep the bundle out of the
/// next coverage pick; the merged report of all shares does.
#[test]
fn coverage_does_not_count_a_share_of_a_bundles_objects_as_a_drill() {
    let g = Gov::new("");
    g.quarantined();
    let (drill, first, population) = coverage_plan(&g);
    // A shard report of the plan, signed by the drills' key, whose result verified share 0 of 2 of the next bundle's
    // objects (never merged).
    let report = std::path::PathBuf::from(first["report"].as_str().unwrap().trim_start_matches("file://"));
    let env: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut st: Value = serde_json::from_slice(&b64.decode(env["payload"].as_str().unwrap()).unwrap()).unwrap();
    let r = &mut st["predicate"]["results"][0];
    r["bundle_id"] = Value::String(population[1].clone());
    r["object_shard"] = serde_json::json!({
        "index": 0, "count": 2, "objects": 1, "inventory_objects": 2, "root": "0".repeat(64)
    });
    st["predicate"]["shard"] = serde_json::json!({"index": 0, "count": 2, "run_id": "r1", "split": "objects"});
    let shards = report.parent().unwrap().join("shards/r1");
    std::fs::create_dir_all(&shards).unwrap();
    let key = lakedrill::evidence::keys::load_signing_key(&g.dir.join("keys/gov-TEST-ONLY.key")).unwrap();
    std::fs::write(
        shards.join("shard-0-of-2.dsse.json"),
        lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, st.to_string().as_bytes(), &key).to_json_bytes(),
    )
    .unwrap();
    let second = drill();
    assert_eq!(
        second["predicate"]["sample"]["selected"][0],
        population[1].as_str(),
        "a share of a bundle's objects is not a drill of the bundle: {}",
        second["predicate"]["sample"]
    );
}
