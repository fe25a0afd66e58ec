//! Iceberg REST catalogs (issue 21, point 1) on SeaweedFS's REST catalog (scripts/test.sh), with tables PyIceberg
//! creates and writes through it (tests/gen/make_rest_table.py): lakedrill reads, plans, quarantines, drills,
//! purges, rolls back and releases through the REST catalog, and PyIceberg sees every commit.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::governance::python;
use crate::s3_deleter::CountingProxy;
use crate::util::{Run, block_on, lakedrill_in, tmpdir};

fn rest_uri() -> String {
    std::env::var("LAKEDRILL_TEST_REST_URI").expect("LAKEDRILL_TEST_REST_URI: run scripts/test.sh")
}

fn s3_endpoint() -> String {
    std::env::var("LAKEDRILL_TEST_S3_ENDPOINT").expect("LAKEDRILL_TEST_S3_ENDPOINT: run scripts/test.sh")
}

/// One PyIceberg-written REST table in its own table bucket, a configuration naming it `[catalog.rest]`, a
/// registry, a key and a policy.
struct RestFx {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    /// What PyIceberg saw when it wrote the table.
    fx: Value,
    policy: PathBuf,
}

const T: [&str; 4] = ["--catalog", "rest", "--table", "db.events"];

impl RestFx {
    fn new() -> RestFx {
        RestFx::with(&[])
    }

    /// The fixture with `gen_args` after make_rest_table.py's own (`FORMAT_VERSION [no-last-append]`).
    fn with(gen_args: &[&str]) -> RestFx {
        let tmp = tmpdir();
        let dir = tmp.path().to_path_buf();
        let bucket = format!("rest-{}", uuid::Uuid::new_v4());
        let gen_script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gen/make_rest_table.py");
        let out = Command::new(python())
            .arg(gen_script)
            .arg(rest_uri())
            .arg(s3_endpoint())
            .arg(&bucket)
            .arg(dir.join("fx.json"))
            .args(gen_args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let fx: Value = serde_json::from_slice(&std::fs::read(dir.join("fx.json")).unwrap()).unwrap();
        std::fs::write(
            dir.join("lakedrill.toml"),
            format!(
                "[catalog.rest]\ntype = \"rest\"\nuri = \"{}\"\nwarehouse = \"{bucket}\"\nauth = \"oauth2\"\nauth_env = \"LAKEDRILL_TEST_REST_SECRET\"\nregister = \"s3tables\"\n[registry]\nuri = \"sqlite:{}\"\n",
                rest_uri(),
                dir.join("registry.db").display()
            ),
        )
        .unwrap();
        let policy = dir.join("p.yaml");
        let binding = crate::util::table_binding("events", fx["metadata_location"].as_str().unwrap());
        std::fs::write(
            &policy,
            format!(
                "schema: lakehouseRetentionPolicy.v1\ntable: {binding}\nprotectedRefs: [main]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\nregulatedData: false\nreclamationImplementationDigest: any\n"
            ),
        )
        .unwrap();
        let r = lakedrill_in(&dir, &["keygen", "--name", "rest", "--dir", "keys"]);
        r.expect_code(0);
        std::fs::create_dir_all(dir.join("trust")).unwrap();
        std::fs::copy(dir.join("keys/rest.pub"), dir.join("trust/rest.pub")).unwrap();
        // The deleter's own key: `purge` never accepts evidence signed by its `--key`.
        lakedrill_in(&dir, &["keygen", "--name", "rest-deleter", "--dir", "keys"]).expect_code(0);
        std::fs::copy(dir.join("keys/rest-deleter.pub"), dir.join("trust/rest-deleter.pub")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100)); // past minSnapshotAge
        RestFx {
            _tmp: tmp,
            dir,
            fx,
            policy,
        }
    }

    fn run(&self, args: &[&str]) -> Run {
        lakedrill_in(&self.dir, args)
    }

    fn on_table(&self, args: &[&str]) -> Run {
        let mut a = args.to_vec();
        a.extend(T);
        self.run(&a)
    }

    /// A Python script running `code` with `t` = the table loaded through the REST catalog by PyIceberg.
    fn py_script(&self, code: &str) -> String {
        format!(
            "import os\nfrom pyiceberg.catalog.rest import RestCatalog\n\
             k, s = os.environ['AWS_ACCESS_KEY_ID'], os.environ['AWS_SECRET_ACCESS_KEY']\n\
             cat = RestCatalog('rest', **{{'uri': '{}', 'credential': f'{{k}}:{{s}}', 'warehouse': '{}', 's3.endpoint': '{}', 's3.access-key-id': k, 's3.secret-access-key': s, 's3.region': 'us-east-1'}})\n\
             t = cat.load_table('db.events')\n{code}\n",
            rest_uri(),
            self.fx["warehouse"].as_str().unwrap(),
            s3_endpoint()
        )
    }

    /// Runs `code` with `t` = the table loaded through the REST catalog by PyIceberg; returns its stdout.
    fn py(&self, code: &str) -> String {
        let script = self.py_script(code);
        let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
        assert!(out.status.success(), "python: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `rollout set db.events test`: the deleter may run on the table.
    fn enable(&self) {
        self.run(&[
            "rollout",
            "set",
            "db.events",
            "test",
            "--catalog",
            "rest",
            "--reason",
            "REST test table",
            "--policy",
            self.policy.to_str().unwrap(),
            "--force",
        ])
        .expect_code(0);
    }

    /// A weekly quarantine drill over `bundles`; returns its report.
    fn drill(&self) -> String {
        std::fs::write(
            self.dir.join("drill.toml"),
            "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"trust\"\nkey = \"keys/rest.key\"\nreports = \"reports\"\n",
        )
        .unwrap();
        let d = self
            .run(&["--json", "drill", "run", "drill.toml"])
            .expect_code(0)
            .json();
        d["report"].as_str().unwrap().to_owned()
    }

    /// How many of candidate `c`'s objects are in the table bucket, and their paths.
    fn present(&self, c: &Value) -> (usize, Vec<String>) {
        let keys: Vec<String> = c["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["path"].as_str().unwrap().to_owned())
            .collect();
        let n = self.py(&format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1')\nloc = t.location().removeprefix('s3://')\nb, p = loc.split('/', 1)\n\
             n = 0\nfor k in {keys:?}:\n    try:\n        s3.head_object(Bucket=b, Key=p + '/' + k)\n        n += 1\n    except Exception:\n        pass\nprint(n)",
            s3_endpoint()
        ));
        (n.parse().unwrap(), keys)
    }

    fn candidate(&self) -> Value {
        let plan = self
            .on_table(&["--json", "plan", "--policy", self.policy.to_str().unwrap()])
            .expect_code(0)
            .json();
        plan["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "expired-snapshots")
            .cloned()
            .unwrap_or_else(|| panic!("an expired-snapshots candidate: {plan}"))
    }

    /// `quarantine ID` with this fixture's policy, key and bundles (the table arguments are added by the runner).
    fn quarantine_args(&self, id: &str) -> Vec<String> {
        let policy = self.policy.to_str().unwrap();
        [
            "--json",
            "quarantine",
            id,
            "--policy",
            policy,
            "--key",
            "keys/rest.key",
            "--bundles",
            "bundles",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `purge ID` with this fixture's policy, trust, key and receipts and `report` as evidence.
    fn purge_args(&self, id: &str, report: &str) -> Vec<String> {
        let policy = self.policy.to_str().unwrap();
        [
            "--json",
            "purge",
            id,
            "--policy",
            policy,
            "--trust",
            "trust",
            "--key",
            "keys/rest-deleter.key",
            "--receipts",
            "receipts",
            "--evidence",
            report,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `args` on the table, with the configuration file `config` when given.
    fn on_table_with(&self, config: Option<&str>, args: &[String]) -> Run {
        let mut a: Vec<&str> = config.map_or_else(Vec::new, |c| vec!["--config", c]);
        a.extend(args.iter().map(String::as_str));
        self.on_table(&a)
    }

    fn quarantine(&self, id: &str) -> Value {
        self.on_table_with(None, &self.quarantine_args(id))
            .expect_code(0)
            .json()
    }
}

/// The whole chain through the REST catalog: inspect and resolve agree with PyIceberg; plan finds the snapshot
/// PyIceberg orphaned; quarantine's tag, the purge's snapshot removal (after a PyIceberg append landed between
/// quarantine and purge: the purge rebases onto it), `rollback` and `set-current` are REST commits PyIceberg sees;
/// the purged objects are gone from the bucket and the table reads with every row it should have.
#[test]
fn a_rest_table_goes_through_plan_quarantine_drill_purge_rollback_and_pyiceberg_sees_every_commit() {
    let f = RestFx::new();
    let snaps = f.on_table(&["--json", "inspect", "snapshots"]).expect_code(0).json();
    let listed: Vec<i64> = snaps["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot_id"].as_i64().unwrap())
        .collect();
    let mut want: Vec<i64> = f.fx["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    let mut got = listed.clone();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "{snaps}");
    let r = f
        .on_table(&["--json", "resolve", "--ref", "audit"])
        .expect_code(0)
        .json();
    assert_eq!(r["snapshot_id"], f.fx["refs"]["audit"], "{r}");

    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    assert_eq!(
        c["snapshot_ids"],
        serde_json::json!([f.fx["orphaned_snapshot_id"]]),
        "{c}"
    );
    f.enable();
    f.quarantine(&id);
    assert_eq!(
        f.py(&format!("print(t.metadata.refs['quarantine/{id}'].snapshot_id)")),
        f.fx["orphaned_snapshot_id"].to_string(),
        "PyIceberg sees the quarantine tag"
    );
    let report = f.drill();
    // A writer commits between quarantine and purge.
    f.py("import pyarrow as pa\nt.append(pa.table({'id': pa.array([500], pa.int64()), 'category': pa.array(['late']), 'value': pa.array([5.0])}))");
    let p = f.on_table_with(None, &f.purge_args(&id, &report)).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    let rows = f.fx["rows"].as_u64().unwrap() + 1;
    assert_eq!(
        f.py(&format!(
            "print(t.scan().to_arrow().num_rows, {} in [s.snapshot_id for s in t.metadata.snapshots], sorted(t.metadata.refs))",
            f.fx["orphaned_snapshot_id"]
        )),
        format!("{rows} False ['audit', 'main', 'what-if']"),
        "the purge's REST commit removed the snapshot and its tag, the late append is kept"
    );
    // The purged objects are gone from the table bucket.
    let (present, keys) = f.present(&c);
    assert_eq!(present, 0, "purged objects still present: {keys:?}");

    // rollback and set-current are REST commits too.
    let audit = f.fx["refs"]["audit"].to_string();
    let head = f.py("print(t.metadata.current_snapshot_id)");
    f.on_table(&["rollback", "--to", &audit]).expect_code(0);
    assert_eq!(f.py("print(t.metadata.current_snapshot_id)"), audit);
    f.on_table(&["set-current", "--snapshot-id", &head]).expect_code(0);
    assert_eq!(
        f.py("print(t.metadata.current_snapshot_id, t.scan().to_arrow().num_rows)"),
        format!("{head} {rows}")
    );
}

/// `quarantine release` through REST removes the tags in one REST commit (PyIceberg sees none left), and a
/// commit computed from a generation another writer has since replaced fails as a lost race, changing nothing.
#[test]
fn quarantine_release_is_a_rest_commit_and_a_stale_commit_loses_the_race() {
    let f = RestFx::new();
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    f.quarantine(&id);
    f.on_table(&[
        "--json",
        "quarantine",
        "release",
        &id,
        "--reason",
        "not needed after all",
    ])
    .expect_code(0);
    assert_eq!(
        f.py("print(sorted(n for n in t.metadata.refs if n.startswith('quarantine/')))"),
        "[]"
    );

    // The same commit route the commands use, from a generation PyIceberg replaces before it lands.
    let cfg = lakedrill::config::Config::load(&f.dir.join("lakedrill.toml"), true).unwrap();
    let storage = lakedrill::io::store::Storage::new(cfg.storage_options());
    let ident: lakedrill::io::catalog::TableIdent = "db.events".parse().unwrap();
    block_on(async {
        let cat = lakedrill::io::catalog::Catalog::open(
            "rest",
            cfg.catalog("rest").unwrap(),
            storage.options().max_metadata_bytes,
        )
        .await
        .unwrap();
        let before = cat.metadata_location(&ident).await.unwrap();
        let uri = lakedrill::model::location::canonical_uri(&before).unwrap();
        let table = lakedrill::table::Table::from_metadata_uri(&storage, "db.events".into(), &before, &uri, None)
            .await
            .unwrap();
        f.py("import pyarrow as pa\nt.append(pa.table({'id': pa.array([7], pa.int64()), 'category': pa.array(['w']), 'value': pa.array([7.0])}))");
        let new = table.change().remove_ref("audit").build().unwrap();
        let err = cat.commit(&storage, &ident, &before, &new).await.unwrap_err();
        assert!(err.to_string().contains("lost the race"), "{err}");
        assert!(err.to_string().contains("rest"), "names the catalog: {err}");
    });
    assert_eq!(f.py("print('audit' in t.metadata.refs)"), "True", "nothing changed");
}

/// A wrong secret, a missing secret, and an unreachable endpoint each exit 2 naming the catalog; the secret is
/// never printed.
#[test]
fn rest_catalog_errors_name_the_catalog_and_never_print_the_secret() {
    let f = RestFx::new();
    let run_with = |env: &[(&str, &str)], toml_extra: Option<&str>| {
        if let Some(t) = toml_extra {
            std::fs::write(f.dir.join("other.toml"), t).unwrap();
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lakedrill"));
        cmd.current_dir(&f.dir);
        if toml_extra.is_some() {
            cmd.args(["--config", "other.toml"]);
        }
        cmd.args(["inspect", "refs"]).args(T);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    let wrong = "testing:NOT-THE-SECRET-42";
    let out = run_with(&[("LAKEDRILL_TEST_REST_SECRET", wrong)], None);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("catalog rest") && text.contains("401"), "{text}");
    assert!(!text.contains("NOT-THE-SECRET-42"), "the secret was printed: {text}");
    let out = Command::new(env!("CARGO_BIN_EXE_lakedrill"))
        .current_dir(&f.dir)
        .args(["inspect", "refs"])
        .args(T)
        .env_remove("LAKEDRILL_TEST_REST_SECRET")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("LAKEDRILL_TEST_REST_SECRET") && text.contains("not set"),
        "{text}"
    );
    let unreachable = "[catalog.rest]\ntype = \"rest\"\nuri = \"http://127.0.0.1:9\"\nauth = \"none\"\n";
    let out = run_with(&[], Some(unreachable));
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("catalog rest") && text.contains("cannot reach"), "{text}");
    // config check shows the catalog without its secret.
    let v = f.run(&["--json", "config", "check"]).expect_code(0).json();
    assert_eq!(v["catalogs"]["rest"]["auth"], "oauth2", "{v}");
    assert_eq!(v["catalogs"]["rest"]["auth_env_set"], true, "{v}");
    assert!(!v.to_string().contains("testing:testing"), "{v}");
}

impl RestFx {
    /// A configuration like `lakedrill.toml` whose REST catalog is reached through `proxy` (a race proxy).
    fn through(&self, proxy: &CountingProxy, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join("lakedrill.toml")).unwrap();
        std::fs::write(self.dir.join(name), text.replace(&rest_uri(), &proxy.endpoint)).unwrap();
        name.to_owned()
    }

    /// A proxy in front of the REST catalog that runs `code` (PyIceberg, another writer) once, when lakedrill's
    /// first commit to `db.events` arrives: after lakedrill read the table, before its commit reaches the server.
    fn race(&self, name: &str, code: &str) -> CountingProxy {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("writer.py");
        std::fs::write(&script, self.py_script(code)).unwrap();
        CountingProxy::start(
            &rest_uri(),
            &dir,
            &["--race-post", "/namespaces/db/tables/events$", script.to_str().unwrap()],
        )
    }
}

/// Every file under `dir` (none when it does not exist).
fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Whether the race proxy ran its writer, successfully.
fn raced(proxy: &CountingProxy) -> bool {
    proxy.requests().iter().any(|(_, m, p)| m == "RACE" && p == "0")
}

/// Another writer's commit lands inside lakedrill's own commits, through the CLI: after lakedrill read the table
/// and before its commit arrives (a proxy runs PyIceberg at that moment). The quarantine's commit loses the race
/// (HTTP 409); the quarantine judges the candidate on the new generation, finds it as planned and commits its tag
/// over the writer's append (before 2026-12-06 it was refused, exit 1, and its bundles removed). The purge's
/// commit, raced by a writer tagging the candidate's snapshot, deletes nothing: the snapshot, its tag and its files
/// stay, and PyIceberg reads the tagged snapshot's rows.
#[test]
fn a_pyiceberg_commit_inside_lakedrills_rest_commits_makes_them_fail_cleanly_and_nothing_protected_is_deleted() {
    let f = RestFx::new();
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    assert_eq!(c["snapshot_ids"], serde_json::json!([orphaned]), "{c}");
    f.enable();

    // 1. An append lands inside the quarantine commit: the quarantine commits over it.
    let append = "import pyarrow as pa\nt.append(pa.table({'id': pa.array([900], pa.int64()), 'category': pa.array(['racer']), 'value': pa.array([9.0])}))";
    let proxy = f.race("q-race", append);
    let cfg = f.through(&proxy, "raced-q.toml");
    let q = f.on_table_with(Some(&cfg), &f.quarantine_args(&id));
    assert!(
        raced(&proxy),
        "the writer ran inside the commit: {:?}",
        proxy.requests()
    );
    let text = format!("{}{}", q.stdout, q.stderr);
    assert_eq!(q.code, 0, "{text}");
    assert_eq!(q.json()["status"], "QUARANTINED", "{text}");
    assert_eq!(
        f.py("print(sorted((n, r.snapshot_id) for n, r in t.metadata.refs.items() if n.startswith('quarantine/')), t.scan().to_arrow().num_rows)"),
        format!("[('quarantine/{id}', {orphaned})] {}", f.fx["rows"].as_u64().unwrap() + 1),
        "the quarantine tag on the new generation, the writer's append stands"
    );
    drop(proxy);
    let report = f.drill();

    // 2. A writer tags the candidate's snapshot inside the purge's commit.
    let proxy = f.race(
        "p-race",
        &format!("t.manage_snapshots().create_tag({orphaned}, 'keep-me').commit()"),
    );
    let cfg = f.through(&proxy, "raced-p.toml");
    let purge = f.purge_args(&id, &report);
    let p = f.on_table_with(Some(&cfg), &purge);
    assert!(
        raced(&proxy),
        "the writer ran inside the commit: {:?}",
        proxy.requests()
    );
    // SeaweedFS applies the removal over the tag commit and drops the new tag (requirements can only pin refs
    // lakedrill knew); lakedrill sees the commit in between in the metadata log, deletes nothing, protects the
    // candidate and says what the server dropped.
    let text = format!("{}{}", p.stdout, p.stderr);
    p.expect_code(2);
    assert!(
        text.contains("keep-me") && text.contains("Nothing was deleted"),
        "{text}"
    );
    let status = f.run(&["--json", "status", &id]).expect_code(0).json();
    let counts = &status["candidates"][0]["object_counts"];
    assert!(
        counts.as_object().is_some_and(|m| !m.is_empty()
            && m.keys()
                .all(|k| !matches!(k.as_str(), "DELETED" | "VERIFIED" | "DELETE_UNKNOWN"))),
        "no object went to the deleter: {status}"
    );
    assert_eq!(status["candidates"][0]["candidate"]["state"], "PROTECTED", "{status}");
    // A later purge refuses: the candidate is protected for good.
    let again = f.on_table_with(Some(&cfg), &purge);
    assert_eq!(again.code, 1, "{}{}", again.stdout, again.stderr);
    // Every one of the snapshot's files stays, and its quarantine bundle restores it as a table PyIceberg reads.
    let (present, keys) = f.present(&c);
    assert_eq!(present, keys.len(), "{status}");
    let bundle = files_under(&f.dir.join("bundles"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "bundle.dsse.json"))
        .expect("the quarantine bundle");
    let restored_at = format!("s3://{}/db/kept", f.fx["warehouse"].as_str().unwrap());
    let r = f
        .run(&[
            "--json",
            "restore",
            bundle.parent().unwrap().to_str().unwrap(),
            "--trust",
            "trust",
            "--into",
            &restored_at,
            "--table",
            "db.kept",
            "--catalog",
            "rest",
        ])
        .expect_code(0)
        .json();
    assert!(
        r["metadata_location"].as_str().unwrap().starts_with(&restored_at),
        "{r}"
    );
}

/// A REST table whose metadata names a data file outside the table location (PyIceberg's `add_files` of a
/// Parquet file written elsewhere): `plan` exits 2 naming the file and the location, and deletes nothing.
#[test]
fn a_rest_table_whose_metadata_points_outside_its_location_exits_2_naming_the_object() {
    let f = RestFx::new();
    let elsewhere = format!(
        "s3://{}/elsewhere-{}/stray.parquet",
        std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh"),
        uuid::Uuid::new_v4()
    );
    f.py(&format!(
        "import pyarrow as pa, pyarrow.parquet as pq\nfrom pyarrow import fs\n\
         s3 = fs.S3FileSystem(endpoint_override='{}', access_key=k, secret_key=s, region='us-east-1')\n\
         pq.write_table(pa.table({{'id': pa.array([1], pa.int64()), 'category': pa.array(['x']), 'value': pa.array([1.0])}}), '{}', filesystem=s3)\n\
         t.add_files(['{elsewhere}'])",
        s3_endpoint(),
        elsewhere.trim_start_matches("s3://")
    ));
    let r = f.on_table(&["plan", "--policy", f.policy.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains(&elsewhere) && r.stderr.contains(f.fx["location"].as_str().unwrap()),
        "names the object and the location: {}",
        r.stderr
    );
}

/// `recover --into s3://…` and `restore --into s3://…` register the recovered table in the REST catalog (the S3
/// Tables `CreateTable` route, `register = "s3tables"`, which SeaweedFS serves faithfully); PyIceberg reads both
/// through the REST catalog with the original row counts. The protocol's own `register`, which SeaweedFS 4.48
/// serves without snapshots, is refused after the load-back check (exit 2 naming the catalog) and leaves no
/// table behind.
#[test]
fn recovered_tables_register_in_the_rest_catalog_and_pyiceberg_reads_them_there() {
    let f = RestFx::new();
    let bucket = f.fx["warehouse"].as_str().unwrap().to_owned();
    // A second section for the same catalog with the protocol's own register route (the default).
    let text = std::fs::read_to_string(f.dir.join("lakedrill.toml")).unwrap();
    let plain = text
        .replace("[catalog.rest]", "[catalog.rest_plain]")
        .replace("register = \"s3tables\"\n", "")
        .replace("[registry]", "[x]");
    std::fs::write(
        f.dir.join("lakedrill.toml"),
        format!("{text}{}", plain.split("[x]").next().unwrap()),
    )
    .unwrap();
    let rows_now = f.fx["rows"].as_u64().unwrap();
    let b = f
        .on_table(&["--json", "backup", "--key", "keys/rest.key", "--to", "backups"])
        .expect_code(0)
        .json();
    let into = format!("s3://{bucket}/db/recovered");
    let r = f
        .run(&[
            "--json",
            "recover",
            "--from",
            b["bundle_uri"].as_str().unwrap(),
            "--trust",
            "trust",
            "--into",
            &into,
            "--catalog",
            "rest",
            "--table",
            "db.recovered",
        ])
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    assert_eq!(r["registered_as"], "rest.db.recovered", "{r}");

    // A quarantine bundle of the snapshot PyIceberg orphaned, restored as a new table.
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    let orphaned_rows = f.py(&format!("print(t.scan(snapshot_id={orphaned}).to_arrow().num_rows)"));
    let q = f.quarantine(&id);
    let bundle = q["bundles"][0]["uri"].as_str().unwrap().to_owned();
    let restored_at = format!("s3://{bucket}/db/restored");
    f.run(&[
        "--json",
        "restore",
        &bundle,
        "--trust",
        "trust",
        "--into",
        &restored_at,
        "--catalog",
        "rest",
        "--table",
        "db.restored",
    ])
    .expect_code(0);
    let read = |name: &str| {
        f.py(&format!(
            "t = cat.load_table('{name}')\nprint(t.metadata.location, t.scan().to_arrow().num_rows)"
        ))
    };
    assert_eq!(read("db.recovered"), format!("{into} {rows_now}"));
    assert_eq!(read("db.restored"), format!("{restored_at} {orphaned_rows}"));

    // The protocol's register on SeaweedFS: the table comes back without its snapshots, so it is refused and
    // dropped again.
    let plain_at = format!("s3://{bucket}/db/plain");
    let r = f.run(&[
        "--json",
        "recover",
        "--from",
        b["bundle_uri"].as_str().unwrap(),
        "--trust",
        "trust",
        "--into",
        &plain_at,
        "--catalog",
        "rest_plain",
        "--table",
        "db.plain",
    ]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("catalog rest_plain")
            && r.stderr.contains("serves it otherwise")
            && r.stderr.contains("dropped again"),
        "{}",
        r.stderr
    );
    assert_eq!(
        f.py("print(('db', 'plain') in [tuple(i) for i in cat.list_tables('db')])"),
        "False",
        "no table left behind"
    );
}

impl RestFx {
    /// A proxy in front of the REST catalog that loses the answer to lakedrill's first commit to `db.events`
    /// (`--lose-post`, `mode`: `504` and `drop` after forwarding it, `unsent-504` without), running `code` as
    /// another writer first when given (`--race-post`).
    fn lose(&self, name: &str, mode: &str, code: Option<&str>) -> CountingProxy {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let re = "/namespaces/db/tables/events$";
        let mut flags = vec!["--lose-post".to_owned(), re.to_owned(), mode.to_owned()];
        if let Some(code) = code {
            let script = dir.join("writer.py");
            std::fs::write(&script, self.py_script(code)).unwrap();
            flags.extend([
                "--race-post".to_owned(),
                re.to_owned(),
                script.to_str().unwrap().to_owned(),
            ]);
        }
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        CountingProxy::start(&rest_uri(), &dir, &flags)
    }
}

/// Whether the proxy lost an answer in `mode`, and the upstream status it had.
fn lost(proxy: &CountingProxy, mode: &str) -> Option<String> {
    proxy
        .requests()
        .into_iter()
        .find(|(_, m, p)| m == "LOST" && p.starts_with(mode))
        .map(|(_, _, p)| p)
}

/// The bundles (`bundle.dsse.json`) under the fixture's `bundles` folder.
fn bundles_of(f: &RestFx) -> Vec<PathBuf> {
    files_under(&f.dir.join("bundles"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "bundle.dsse.json"))
        .collect()
}

/// A quarantine commit that the catalog applied but whose answer was lost (a gateway's 504 after its upstream
/// committed; the connection dropped after the request went out): the quarantine reads the table again, finds its
/// commit in it (bundle mode: the snapshot gone; tag mode: its tag there), records the quarantine and keeps its
/// bundles. Before 2026-12-06 the lost answer counted as "nothing changed": bundle mode re-judged the candidate on
/// the new generation, found its snapshot gone, refused (exit 1) and deleted the bundles, the only way back to a
/// snapshot the catalog had already dropped.
#[test]
fn a_quarantine_commit_whose_answer_is_lost_is_settled_from_the_table_and_keeps_its_bundles() {
    for (mode, lose) in [("bundle", "504"), ("tag", "drop")] {
        let f = RestFx::new();
        let c = f.candidate();
        let id = c["candidate_id"].as_str().unwrap().to_owned();
        let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
        f.enable();
        let proxy = f.lose("lost", lose, None);
        let cfg = f.through(&proxy, "lost.toml");
        let mut args = f.quarantine_args(&id);
        args.extend(["--mode".to_owned(), mode.to_owned()]);
        let q = f.on_table_with(Some(&cfg), &args);
        let text = format!("{}{}", q.stdout, q.stderr);
        assert_eq!(
            lost(&proxy, lose).as_deref(),
            Some(format!("{lose} 200").as_str()),
            "{mode}: the proxy forwarded the commit and lost its answer: {:?}",
            proxy.requests()
        );
        assert_eq!(q.code, 0, "{mode}: {text}");
        assert_eq!(q.json()["status"], "QUARANTINED", "{mode}: {text}");
        assert!(text.contains("taken as committed"), "{mode}: {text}");
        assert_eq!(bundles_of(&f).len(), 1, "{mode}: the bundle is kept: {text}");
        let status = f.run(&["--json", "status", &id]).expect_code(0).json();
        assert_eq!(status["candidates"][0]["candidate"]["state"], "QUARANTINED", "{status}");
        let seen = f.py(&format!(
            "print({orphaned} in [s.snapshot_id for s in t.metadata.snapshots], \
             sorted(n for n in t.metadata.refs if n.startswith('quarantine/')))"
        ));
        if mode == "bundle" {
            assert_eq!(seen, "False []", "bundle mode: the snapshot left the table");
        } else {
            assert_eq!(
                seen,
                format!("True ['quarantine/{id}']"),
                "tag mode: the tag is in the table"
            );
        }
    }
}

/// A quarantine commit whose answer is lost before the catalog saw it (a gateway's 504 without forwarding): the
/// table read again does not carry it, and lakedrill cannot know whether it will (a gateway may still pass it
/// on). The quarantine exits 2 saying so, keeps the bundles and records them, and the candidate goes to PROTECTED:
/// nothing acts on it, `quarantine release` can take it out. Before 2026-12-06 it was refused as "nothing changed"
/// (exit 1) and the bundles were deleted.
#[test]
fn a_quarantine_commit_of_unknown_outcome_the_table_does_not_show_exits_2_and_keeps_its_bundles() {
    let f = RestFx::new();
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    f.enable();
    let proxy = f.lose("unsent", "unsent-504", None);
    let cfg = f.through(&proxy, "unsent.toml");
    let mut args = f.quarantine_args(&id);
    args.extend(["--mode".to_owned(), "bundle".to_owned()]);
    let q = f.on_table_with(Some(&cfg), &args);
    let text = format!("{}{}", q.stdout, q.stderr);
    assert!(lost(&proxy, "unsent-504").is_some(), "{:?}", proxy.requests());
    assert_eq!(q.code, 2, "{text}");
    assert!(
        text.contains("outcome is unknown") && text.contains("are kept") && text.contains("PROTECTED"),
        "{text}"
    );
    assert!(!text.contains("REFUSED"), "{text}");
    assert_eq!(bundles_of(&f).len(), 1, "the bundle is kept: {text}");
    let status = f.run(&["--json", "status", &id]).expect_code(0).json();
    let cand = &status["candidates"][0]["candidate"];
    assert_eq!(cand["state"], "PROTECTED", "{status}");
    assert_eq!(cand["quarantine"]["commit_outcome"], "unknown", "{status}");
    assert_eq!(
        cand["quarantine"]["bundles"].as_array().map(Vec::len),
        Some(1),
        "the bundle is recorded: {status}"
    );
    assert_eq!(
        f.py(&format!(
            "print({orphaned} in [s.snapshot_id for s in t.metadata.snapshots])"
        )),
        "True",
        "the commit never reached the catalog"
    );
}

/// The purge's catalog commit lands over a writer that tagged the candidate's snapshot meanwhile (the server
/// drops the new tag with the snapshot), and its answer is lost (504). lakedrill reads the table again, finds its
/// commit there and runs the dropped-ref check on it: the tag the server dropped is named, the candidate is
/// PROTECTED and nothing is deleted. Before 2026-12-06 the lost answer sent the purge round its retry, whose
/// rebase found the snapshot gone and deleted its files without the check.
#[test]
fn a_purge_commit_whose_answer_is_lost_is_checked_for_dropped_refs_before_any_delete() {
    let f = RestFx::new();
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    f.enable();
    f.quarantine(&id);
    let report = f.drill();
    let proxy = f.lose(
        "p-lost",
        "504",
        Some(&format!(
            "t.manage_snapshots().create_tag({orphaned}, 'keep-me').commit()"
        )),
    );
    let cfg = f.through(&proxy, "lost-p.toml");
    let p = f.on_table_with(Some(&cfg), &f.purge_args(&id, &report));
    let text = format!("{}{}", p.stdout, p.stderr);
    assert!(
        raced(&proxy),
        "the writer ran inside the commit: {:?}",
        proxy.requests()
    );
    assert_eq!(
        lost(&proxy, "504").as_deref(),
        Some("504 200"),
        "{:?}",
        proxy.requests()
    );
    assert_eq!(p.code, 2, "{text}");
    assert!(
        text.contains("keep-me") && text.contains("Nothing was deleted"),
        "{text}"
    );
    let status = f.run(&["--json", "status", &id]).expect_code(0).json();
    assert_eq!(status["candidates"][0]["candidate"]["state"], "PROTECTED", "{status}");
    let (present, keys) = f.present(&c);
    assert_eq!(present, keys.len(), "every file of the snapshot stays: {status}");
}

impl RestFx {
    /// A proxy in front of the REST catalog with `flags` for lakedrill's first commit to `db.events`.
    fn proxy(&self, name: &str, flags: &[&str]) -> CountingProxy {
        let dir = self.dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        CountingProxy::start(&rest_uri(), &dir, flags)
    }
}

/// The purge's commit is answered `303 See Other` to the same URL (a load balancer), without reaching the
/// catalog. An HTTP client following it sends a GET, whose 200 is the table unchanged: taken as the commit's
/// answer, the purge deleted the candidate's files while its snapshot and tag were still in the table. Now no
/// redirect is followed, a 200 counts only when it carries the commit, and the redirect is an unknown outcome:
/// exit 2, the candidate PROTECTED, every file stays and PyIceberg reads the snapshot.
#[test]
fn a_purge_commit_answered_with_a_redirect_deletes_nothing() {
    let f = RestFx::new();
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    f.enable();
    f.quarantine(&id);
    let report = f.drill();
    let proxy = f.proxy("redirect", &["--redirect-post", "/namespaces/db/tables/events$"]);
    let cfg = f.through(&proxy, "redirect.toml");
    let p = f.on_table_with(Some(&cfg), &f.purge_args(&id, &report));
    let text = format!("{}{}", p.stdout, p.stderr);
    assert!(
        proxy.requests().iter().any(|(_, m, _)| m == "REDIRECTED"),
        "the proxy redirected the commit: {:?}",
        proxy.requests()
    );
    assert_eq!(p.code, 2, "{text}");
    assert!(
        text.contains("303") && text.contains("redirect") && text.contains("outcome is unknown"),
        "{text}"
    );
    let status = f.run(&["--json", "status", &id]).expect_code(0).json();
    assert_eq!(status["candidates"][0]["candidate"]["state"], "PROTECTED", "{status}");
    let (present, keys) = f.present(&c);
    assert_eq!(present, keys.len(), "every file of the snapshot stays: {status}");
    assert_eq!(
        f.py(&format!(
            "print({orphaned} in [s.snapshot_id for s in t.metadata.snapshots], t.scan(snapshot_id={orphaned}).to_arrow().num_rows > 0)"
        )),
        "True True",
        "the snapshot is in the table and reads"
    );
}

/// A table read answered with a redirect, and an OAuth2 token request answered with one (its form carries the
/// client secret), are errors naming the catalog and the URL and saying that redirects are not followed.
#[test]
fn rest_requests_answered_with_a_redirect_are_refused_naming_the_url() {
    let f = RestFx::new();
    let proxy = f.proxy("redirect-get", &["--redirect-get", "/namespaces/db/tables/events$"]);
    let cfg = f.through(&proxy, "get.toml");
    let r = f.on_table(&["--config", &cfg, "inspect", "refs"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("catalog rest")
            && r.stderr.contains("303")
            && r.stderr.contains("does not follow redirects")
            && r.stderr.contains("/namespaces/db/tables/events"),
        "{}",
        r.stderr
    );
    let proxy = f.proxy("redirect-token", &["--redirect-post", "/v1/oauth/tokens$"]);
    let text = std::fs::read_to_string(f.dir.join("lakedrill.toml")).unwrap();
    std::fs::write(
        f.dir.join("token.toml"),
        text.replace(
            "register = \"s3tables\"\n",
            &format!(
                "register = \"s3tables\"\noauth2_server_uri = \"{}/v1/oauth/tokens\"\n",
                proxy.endpoint
            ),
        ),
    )
    .unwrap();
    let r = f.on_table(&["--config", "token.toml", "inspect", "refs"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("catalog rest")
            && r.stderr.contains("303")
            && r.stderr.contains("does not follow redirects")
            && r.stderr.contains("/v1/oauth/tokens"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("testing:testing"), "{}", r.stderr);
}

/// The bundle-mode quarantine's commit reaches the catalog and is applied, but the answer is `204 No Content`
/// (a gateway). Read as "not committed", the quarantine re-judged the candidate on the new generation, found its
/// snapshot gone and discarded its bundles: the snapshot out of the table and its bundles deleted. Now any 2xx
/// but a 200 carrying the commit is settled by reading the table again: it carries the commit, the quarantine
/// stands and keeps its bundle.
#[test]
fn a_quarantine_commit_answered_204_is_settled_from_the_table_and_keeps_its_bundles() {
    let f = RestFx::new();
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    f.enable();
    let proxy = f.proxy("s204", &["--status-post", "/namespaces/db/tables/events$", "204"]);
    let cfg = f.through(&proxy, "s204.toml");
    let mut args = f.quarantine_args(&id);
    args.extend(["--mode".to_owned(), "bundle".to_owned()]);
    let q = f.on_table_with(Some(&cfg), &args);
    let text = format!("{}{}", q.stdout, q.stderr);
    assert!(
        proxy.requests().iter().any(|(_, m, p)| m == "STATUS" && p == "204 200"),
        "the commit was applied and answered 204: {:?}",
        proxy.requests()
    );
    assert_eq!(q.code, 0, "{text}");
    assert_eq!(q.json()["status"], "QUARANTINED", "{text}");
    assert!(
        text.contains("taken as committed") && text.contains("HTTP 204"),
        "{text}"
    );
    assert_eq!(bundles_of(&f).len(), 1, "the bundle is kept: {text}");
    let status = f.run(&["--json", "status", &id]).expect_code(0).json();
    assert_eq!(status["candidates"][0]["candidate"]["state"], "QUARANTINED", "{status}");
    assert_eq!(
        f.py(&format!(
            "print({orphaned} in [s.snapshot_id for s in t.metadata.snapshots])"
        )),
        "False",
        "the commit was applied"
    );
}

/// Inside the purge's commit, another writer stages a snapshot that names one of the candidate's data files and
/// moves no ref (a branch created, `add_files` on it, the branch removed: a write-audit-publish snapshot left to
/// be cherry-picked). Requirements pin only refs, so the server applies the purge's removal on top and keeps the
/// staged snapshot; no ref was dropped and the new snapshot descends from none of the removed ones. The purge
/// deleted on the generation it had judged before the commit, so the staged snapshot lost its data file. Now it
/// sees that the committed generation was not built on the one it judged, re-judges the candidate on it and
/// keeps the data file: the staged snapshot still reads.
#[test]
fn a_snapshot_staged_inside_the_purge_commit_keeps_the_candidate_files_it_names() {
    let f = RestFx::new();
    // An unreferenced snapshot with a data file of its own (an append to a branch since removed): the fixture's
    // expired snapshot only removed a file.
    f.py(
        "import pyarrow as pa\nt.manage_snapshots().create_branch(t.metadata.current_snapshot_id, 'tmp').commit()\n\
         t = cat.load_table('db.events')\n\
         t.append(pa.table({'id': pa.array([77], pa.int64()), 'category': pa.array(['tmp']), 'value': pa.array([7.0])}), branch='tmp')\n\
         t = cat.load_table('db.events')\nt.manage_snapshots().remove_branch('tmp').commit()",
    );
    std::thread::sleep(std::time::Duration::from_millis(1100)); // past minSnapshotAge
    let c = f.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    f.enable();
    f.quarantine(&id);
    let report = f.drill();
    let data = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .find(|p| p.starts_with("data/") && p.ends_with(".parquet"))
        .unwrap_or_else(|| panic!("the candidate holds a data file: {c}"))
        .to_owned();
    let uri = format!("{}/{data}", f.fx["location"].as_str().unwrap().trim_end_matches('/'));
    let staged_file = f.dir.join("staged.txt");
    let proxy = f.race(
        "stage",
        &format!(
            "t.manage_snapshots().create_branch(t.metadata.current_snapshot_id, 'stage').commit()\n\
             t = cat.load_table('db.events')\n\
             t.add_files(['{uri}'], branch='stage')\n\
             t = cat.load_table('db.events')\n\
             staged = t.metadata.refs['stage'].snapshot_id\n\
             t.manage_snapshots().remove_branch('stage').commit()\n\
             open('{}', 'w').write(str(staged))",
            staged_file.display()
        ),
    );
    let cfg = f.through(&proxy, "stage.toml");
    let p = f.on_table_with(Some(&cfg), &f.purge_args(&id, &report));
    let text = format!("{}{}", p.stdout, p.stderr);
    assert!(
        raced(&proxy),
        "the writer ran inside the commit: {:?}",
        proxy.requests()
    );
    let staged = std::fs::read_to_string(&staged_file).unwrap();
    let seen = f.py(&format!(
        "print('stage' in t.metadata.refs, {staged} in [s.snapshot_id for s in t.metadata.snapshots], {} in [s.snapshot_id for s in t.metadata.snapshots])",
        f.fx["orphaned_snapshot_id"]
    ));
    assert_eq!(
        seen, "False True False",
        "the staged snapshot is kept without a ref, the candidate's removed: {text}"
    );
    let still = f.py(&format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1')\nb, k = '{uri}'.removeprefix('s3://').split('/', 1)\n\
         s3.head_object(Bucket=b, Key=k)\nprint(t.scan(snapshot_id={staged}).to_arrow().num_rows > 0)",
        s3_endpoint()
    ));
    assert_eq!(still, "True", "the data file the staged snapshot names is kept: {text}");
    let status = f.run(&["--json", "status", &id]).expect_code(0).json();
    let objects = status["candidates"][0]["object_counts"].to_string();
    assert!(!objects.contains("DELETE_UNKNOWN"), "{status}");
}

/// A catalog that accepts connections and never answers: with `request_timeout_secs = 2` the command gives up
/// after about that long, exit 2 naming the catalog and the timeout. Before, no timeout was set and lakedrill
/// waited for ever (a purge holding the registry's write lock while its commit waited).
#[test]
fn a_catalog_that_never_answers_times_out() {
    let dir = tmpdir();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s); // accepted, never answered
        }
    });
    std::fs::write(
        dir.path().join("lakedrill.toml"),
        format!(
            "[catalog.rest]\ntype = \"rest\"\nuri = \"http://127.0.0.1:{port}\"\nrequest_timeout_secs = 2\n[registry]\nuri = \"sqlite:{}\"\n",
            dir.path().join("registry.db").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lakedrill"))
        .current_dir(dir.path())
        .args(["inspect", "refs"])
        .args(T)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed().as_secs() > 60 {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let status = status.unwrap_or_else(|| panic!("still waiting after 60 s: {text}"));
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(text.contains("catalog rest") && text.contains("timed out"), "{text}");
}

/// The lines of `proxy`'s log whose second field is `what` (TOKEN, EXPIRED, REVOKED), with the rest of the line.
fn logged(proxy: &CountingProxy, what: &str) -> Vec<String> {
    proxy
        .requests()
        .into_iter()
        .filter(|(_, m, _)| m == what)
        .map(|(_, _, rest)| rest)
        .collect()
}

/// The OAuth2 server's tokens live 4 s (the proxy sets `expires_in: 4` and answers 401 to an older token); every
/// request waits 2.1 s. lakedrill fetches a token again once half of a short life has passed (a minute before
/// the end of a long one), so `plan`, whose requests outlast several tokens, never sends an expired token: the
/// proxy issued more than one token and refused none. Before, the token was fetched once per command and the
/// third request after it carried an expired token.
#[test]
fn an_oauth2_token_is_fetched_again_before_its_expires_in_ends() {
    let f = RestFx::new();
    let proxy = f.proxy("token-life", &["--token-life", "4", "--delay-ms", "2100"]);
    let cfg = f.through(&proxy, "token-life.toml");
    let policy = f.policy.to_str().unwrap().to_owned();
    let r = f.on_table_with(Some(&cfg), &["--json", "plan", "--policy", &policy].map(str::to_owned));
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "{text}");
    assert!(
        r.json()["candidates"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["kind"] == "expired-snapshots")),
        "{text}"
    );
    let tokens = logged(&proxy, "TOKEN");
    let catalog_requests = proxy
        .requests()
        .iter()
        .filter(|(_, m, p)| (m == "GET" || m == "POST") && !p.ends_with("/oauth/tokens"))
        .count();
    assert!(
        tokens.len() >= 2 && catalog_requests >= 3,
        "several tokens over several requests: {:?}",
        proxy.requests()
    );
    assert!(
        logged(&proxy, "EXPIRED").is_empty(),
        "no request carried an expired token: {:?}",
        proxy.requests()
    );
}

/// The first token is revoked after its first use (the proxy answers 401 to it from then on). A read answered
/// 401 fetches a new token and is sent once more: the command succeeds on the second token, and the 401 was
/// answered once. Before this was tested, nothing showed a revoked token was mended rather than fatal.
#[test]
fn a_read_answered_401_fetches_a_new_token_and_is_sent_once_more() {
    let f = RestFx::new();
    let proxy = f.proxy("revoked", &["--revoke-first-token"]);
    let cfg = f.through(&proxy, "revoked.toml");
    let policy = f.policy.to_str().unwrap().to_owned();
    let r = f.on_table_with(Some(&cfg), &["--json", "plan", "--policy", &policy].map(str::to_owned));
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "{text}");
    let log = proxy.requests();
    assert_eq!(logged(&proxy, "REVOKED").len(), 1, "{log:?}");
    // The refused request, then a new token, then the same request again.
    let at = log.iter().position(|(_, m, _)| m == "REVOKED").unwrap();
    let refused = &log[at - 1];
    assert_eq!(
        log[at + 1..at + 4]
            .iter()
            .map(|(_, m, p)| (m.as_str(), p.as_str()))
            .collect::<Vec<_>>(),
        [
            ("POST", "/v1/oauth/tokens"),
            ("TOKEN", "2"),
            (refused.1.as_str(), refused.2.as_str())
        ],
        "{log:?}"
    );
}

impl RestFx {
    /// Quarantines the planned candidate in bundle mode (its snapshot leaves the metadata through a REST commit);
    /// returns (candidate id, its bundle's URI).
    fn quarantined_out(&self) -> (String, String) {
        let c = self.candidate();
        let id = c["candidate_id"].as_str().unwrap().to_owned();
        let orphaned = self.fx["orphaned_snapshot_id"].as_i64().unwrap();
        assert_eq!(c["snapshot_ids"], serde_json::json!([orphaned]), "{c}");
        self.enable();
        let mut args = self.quarantine_args(&id);
        args.extend(["--mode".to_owned(), "bundle".to_owned()]);
        let q = self.on_table_with(None, &args).expect_code(0).json();
        assert_eq!(
            self.py(&format!(
                "print({orphaned} in [s.snapshot_id for s in t.metadata.snapshots])"
            )),
            "False",
            "bundle mode took the snapshot out of the metadata: {q}"
        );
        (id, q["bundles"][0]["uri"].as_str().unwrap().to_owned())
    }

    /// `set-current --from-bundle BUNDLE --trust trust` on the table, with the configuration `config` when given.
    fn set_current_from(&self, config: Option<&str>, bundle: &str) -> Run {
        let args = ["--json", "set-current", "--from-bundle", bundle, "--trust", "trust"].map(str::to_owned);
        self.on_table_with(config, &args)
    }

    /// (current snapshot, rows read, whether `id` is in the metadata, refs) as PyIceberg sees them through the
    /// REST catalog.
    fn seen(&self, id: i64) -> String {
        self.py(&format!(
            "print(t.metadata.current_snapshot_id, t.scan().to_arrow().num_rows, \
             {id} in [s.snapshot_id for s in t.metadata.snapshots], sorted(t.metadata.refs))"
        ))
    }
}

/// A snapshot quarantined out of a REST table's metadata (bundle mode) comes back with `set-current --from-bundle`:
/// one REST commit `add-snapshot` + `set-snapshot-ref main` (requirements: the table's UUID and every ref as read),
/// and PyIceberg, through the REST catalog, reads it as current with the rows it had. The table is format v1:
/// SeaweedFS's REST catalog (iceberg-go's metadata builder) takes an old snapshot back only there (the v2 cases are
/// the tests below). Before, the command was refused (exit 2, "REST catalogs cannot take a snapshot back from a
/// bundle yet").
#[test]
fn a_snapshot_quarantined_out_of_a_rest_table_comes_back_from_its_bundle_and_pyiceberg_reads_it() {
    let f = RestFx::with(&["1"]);
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    let (_, bundle) = f.quarantined_out();
    let r = f.set_current_from(None, &bundle);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["status"], "COMMITTED", "{v}");
    assert_eq!(v["to_snapshot_id"], orphaned, "{v}");
    assert_eq!(
        f.seen(orphaned),
        format!("{orphaned} {} True ['audit', 'main', 'what-if']", f.fx["orphaned_rows"]),
        "PyIceberg reads the snapshot back as current, with its rows"
    );
}

/// A snapshot that is not the table's last commit cannot come back through a REST catalog: the server's metadata
/// builder would set last-sequence-number to its (lower) sequence number. lakedrill refuses before sending anything
/// (exit 2, naming the numbers); the table, its refs and the bundle stay as they were.
#[test]
fn a_snapshot_older_than_the_last_commit_is_refused_before_any_rest_commit() {
    let f = RestFx::new();
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    let (_, bundle) = f.quarantined_out();
    let before = f.seen(orphaned);
    let loc = f.py("print(t.metadata_location)");
    let r = f.set_current_from(None, &bundle);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 2, "{text}");
    assert!(
        text.contains("below the table's last-sequence-number") && text.contains("restore --into"),
        "{text}"
    );
    assert_eq!(f.seen(orphaned), before, "nothing changed");
    assert_eq!(f.py("print(t.metadata_location)"), loc, "nothing was committed");
    assert_eq!(bundles_of(&f).len(), 1, "the bundle stays");
}

/// Found by this test: SeaweedFS 4.48's REST catalog refuses `add-snapshot` of a v2 snapshot that has a parent and
/// whose sequence number is not above the table's last-sequence-number (iceberg-go: "can't add snapshot with
/// sequence number N, must be > than last sequence number N"), even when it was the table's last commit. The
/// HTTP 400 exits 2 naming the server's reason and what it means; nothing changed, the bundle stays.
#[test]
fn a_v2_snapshot_the_rest_server_refuses_to_add_back_exits_2_naming_its_reason() {
    let f = RestFx::with(&["2", "no-last-append"]);
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    let (_, bundle) = f.quarantined_out();
    let before = f.seen(orphaned);
    let r = f.set_current_from(None, &bundle);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 2, "{text}");
    assert!(
        text.contains("HTTP 400")
            && text.contains("must be > than last sequence number")
            && text.contains("refused to add the snapshot back"),
        "{text}"
    );
    assert_eq!(f.seen(orphaned), before, "nothing changed");
    assert_eq!(bundles_of(&f).len(), 1, "the bundle stays");
}

/// Another writer commits between lakedrill's read of the table and its `add-snapshot` commit (a proxy runs
/// PyIceberg's append when the commit arrives): the server's `assert-ref-snapshot-id` on main fails (HTTP 409), the
/// command exits 2 as a lost race, nothing of lakedrill's is in the table and the writer's append is kept. Run
/// again, it judges the table anew and brings the snapshot back, the writer's snapshot still in the metadata.
#[test]
fn a_commit_by_another_writer_inside_set_current_from_bundle_makes_it_lose_the_race_and_nothing_is_lost() {
    let f = RestFx::with(&["1"]);
    let orphaned = f.fx["orphaned_snapshot_id"].as_i64().unwrap();
    let (_, bundle) = f.quarantined_out();
    let proxy = f.race(
        "race",
        "import pyarrow as pa\nt.append(pa.table({'id': pa.array([900], pa.int64()), 'category': pa.array(['w']), 'value': pa.array([9.0])}))\nprint(t.current_snapshot().snapshot_id)",
    );
    let cfg = f.through(&proxy, "race.toml");
    let r = f.set_current_from(Some(&cfg), &bundle);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(
        raced(&proxy),
        "the writer ran inside the commit: {:?}",
        proxy.requests()
    );
    assert_eq!(r.code, 2, "{text}");
    assert!(text.contains("HTTP 409") && text.contains("lost the race"), "{text}");
    let rows = f.fx["rows"].as_u64().unwrap() + 1;
    let writer = f.py("print(t.metadata.current_snapshot_id)");
    assert_eq!(
        f.seen(orphaned),
        format!("{writer} {rows} False ['audit', 'main', 'what-if']"),
        "the writer's append is the table's head, the snapshot is not back"
    );
    assert_eq!(bundles_of(&f).len(), 1, "the bundle stays");
    // Again, on the table as it is now.
    let r = f.set_current_from(None, &bundle);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["from_snapshot_id"].to_string(), writer);
    assert_eq!(
        f.py(&format!(
            "print(t.metadata.current_snapshot_id, t.scan().to_arrow().num_rows, {writer} in [s.snapshot_id for s in t.metadata.snapshots])"
        )),
        format!("{orphaned} {} True", f.fx["orphaned_rows"]),
        "the snapshot is back and the writer's snapshot is still in the metadata"
    );
}
