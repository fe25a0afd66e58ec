//! Iceberg REST catalogs (issue 21, point 1) on SeaweedFS's REST catalog (scripts/test.sh), with tables PyIceberg
//! creates and writes through it (tests/gen/make_rest_table.py): lakedrill reads, plans, quarantines, drills,
//! purges, rolls back and releases through the REST catalog, and PyIceberg sees every commit.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::governance::python;
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
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let fx: Value = serde_json::from_slice(&std::fs::read(dir.join("fx.json")).unwrap()).unwrap();
        std::fs::write(
            dir.join("lakedrill.toml"),
            format!(
                "[catalog.rest]\ntype = \"rest\"\nuri = \"{}\"\nwarehouse = \"{bucket}\"\nauth = \"oauth2\"\nauth_env = \"LAKEDRILL_TEST_REST_SECRET\"\n[registry]\nuri = \"sqlite:{}\"\n",
                rest_uri(),
                dir.join("registry.db").display()
            ),
        )
        .unwrap();
        let policy = dir.join("p.yaml");
        std::fs::write(
            &policy,
            "schema: lakehouseRetentionPolicy.v1\ntable: events\nprotectedRefs: [main]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\nregulatedData: false\n",
        )
        .unwrap();
        let r = lakedrill_in(&dir, &["keygen", "--name", "rest", "--dir", "keys"]);
        r.expect_code(0);
        std::fs::create_dir_all(dir.join("trust")).unwrap();
        std::fs::copy(dir.join("keys/rest.pub"), dir.join("trust/rest.pub")).unwrap();
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

    /// Runs `code` with `t` = the table loaded through the REST catalog by PyIceberg; returns its stdout.
    fn py(&self, code: &str) -> String {
        let script = format!(
            "import os\nfrom pyiceberg.catalog.rest import RestCatalog\n\
             k, s = os.environ['AWS_ACCESS_KEY_ID'], os.environ['AWS_SECRET_ACCESS_KEY']\n\
             cat = RestCatalog('rest', **{{'uri': '{}', 'credential': f'{{k}}:{{s}}', 'warehouse': '{}', 's3.endpoint': '{}', 's3.access-key-id': k, 's3.secret-access-key': s, 's3.region': 'us-east-1'}})\n\
             t = cat.load_table('db.events')\n{code}\n",
            rest_uri(),
            self.fx["warehouse"].as_str().unwrap(),
            s3_endpoint()
        );
        let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
        assert!(out.status.success(), "python: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
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

    fn quarantine(&self, id: &str) -> Value {
        self.on_table(&[
            "--json",
            "quarantine",
            id,
            "--policy",
            self.policy.to_str().unwrap(),
            "--key",
            "keys/rest.key",
            "--bundles",
            "bundles",
        ])
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
    let r = f.run(&[
        "rollout",
        "set",
        "db.events",
        "test",
        "--catalog",
        "rest",
        "--reason",
        "REST test table",
        "--policy",
        f.policy.to_str().unwrap(),
    ]);
    r.expect_code(0);
    f.quarantine(&id);
    assert_eq!(
        f.py(&format!("print(t.metadata.refs['quarantine/{id}'].snapshot_id)")),
        f.fx["orphaned_snapshot_id"].to_string(),
        "PyIceberg sees the quarantine tag"
    );
    std::fs::write(
        f.dir.join("drill.toml"),
        "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"trust\"\nkey = \"keys/rest.key\"\nreports = \"reports\"\n",
    )
    .unwrap();
    let d = f.run(&["--json", "drill", "run", "drill.toml"]).expect_code(0).json();
    let report = d["report"].as_str().unwrap().to_owned();
    // A writer commits between quarantine and purge.
    f.py("import pyarrow as pa\nt.append(pa.table({'id': pa.array([500], pa.int64()), 'category': pa.array(['late']), 'value': pa.array([5.0])}))");
    let p = f
        .on_table(&[
            "--json",
            "purge",
            &id,
            "--policy",
            f.policy.to_str().unwrap(),
            "--trust",
            "trust",
            "--key",
            "keys/rest.key",
            "--receipts",
            "receipts",
            "--evidence",
            &report,
        ])
        .expect_code(0)
        .json();
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
    let keys: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    let present = f.py(&format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', region_name='us-east-1')\nloc = t.location().removeprefix('s3://')\nb, p = loc.split('/', 1)\n\
         n = 0\nfor k in {keys:?}:\n    try:\n        s3.head_object(Bucket=b, Key=p + '/' + k)\n        n += 1\n    except Exception:\n        pass\nprint(n)",
        s3_endpoint()
    ));
    assert_eq!(present, "0", "purged objects still present: {keys:?}");

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
        let cat = lakedrill::io::catalog::Catalog::open("rest", cfg.catalog("rest").unwrap())
            .await
            .unwrap();
        let before = cat.metadata_location(&ident).await.unwrap();
        let uri = lakedrill::model::location::canonical_uri(&before).unwrap();
        let md: iceberg::spec::TableMetadata = serde_json::from_slice(&storage.get(&uri).await.unwrap().bytes).unwrap();
        f.py("import pyarrow as pa\nt.append(pa.table({'id': pa.array([7], pa.int64()), 'category': pa.array(['w']), 'value': pa.array([7.0])}))");
        let new = md
            .clone()
            .into_builder(Some(before.clone()))
            .remove_ref("audit")
            .build()
            .unwrap()
            .metadata;
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
