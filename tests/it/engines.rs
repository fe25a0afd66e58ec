//! Iceberg Java (Spark) and DuckDB as second and third readers: a table lakedrill recovered must read in both
//! engines with the row counts recorded when Spark wrote the source (`oracle.json`'s `snapshot_row_counts`).

use std::path::PathBuf;

use serde_json::Value;

use crate::oracle::oracle_table;
use crate::util::{engine_counts, lakedrill_in, tmpdir};

/// A working folder with a key pair and its own registry.
struct Site {
    tmp: tempfile::TempDir,
    key: PathBuf,
    /// The key `purge` signs with: never the drills' key.
    deleter: PathBuf,
    trust: PathBuf,
}

impl Site {
    fn new() -> Site {
        let tmp = tmpdir();
        let dir = tmp.path();
        std::fs::write(
            dir.join("lakedrill.toml"),
            format!("[registry]\nuri = \"sqlite:{}/registry.db\"\n", dir.display()),
        )
        .unwrap();
        let keys = dir.join("keys");
        let r = lakedrill_in(
            dir,
            &[
                "--json",
                "keygen",
                "--name",
                "engines-TEST-ONLY",
                "--dir",
                keys.to_str().unwrap(),
            ],
        )
        .expect_code(0)
        .json();
        // A trust folder of public keys only.
        let trust = dir.join("trust");
        std::fs::create_dir_all(&trust).unwrap();
        let public = PathBuf::from(r["public_key"].as_str().unwrap());
        std::fs::copy(&public, trust.join(public.file_name().unwrap())).unwrap();
        let d = lakedrill_in(
            dir,
            &[
                "--json",
                "keygen",
                "--name",
                "engines-deleter",
                "--dir",
                keys.to_str().unwrap(),
            ],
        )
        .expect_code(0)
        .json();
        let public = PathBuf::from(d["public_key"].as_str().unwrap());
        std::fs::copy(&public, trust.join(public.file_name().unwrap())).unwrap();
        Site {
            key: PathBuf::from(r["private_key"].as_str().unwrap()),
            deleter: PathBuf::from(d["private_key"].as_str().unwrap()),
            trust,
            tmp,
        }
    }

    /// Configures the table's JDBC catalog as `jc` (and this site's registry).
    fn jdbc_catalog(&self, t: &Value) {
        let db = t["catalog_db"].as_str().unwrap().to_owned();
        let catalog = t["catalog_name"].as_str().unwrap().to_owned();
        std::fs::write(
            self.tmp.path().join("lakedrill.toml"),
            format!(
                "[catalog.jc]\ntype = \"sql\"\nuri = \"sqlite:{db}\"\nname = \"{catalog}\"\n[registry]\nuri = \"sqlite:{}/registry.db\"\n",
                self.tmp.path().display()
            ),
        )
        .unwrap();
    }

    fn path(&self, rel: &str) -> String {
        self.tmp.path().join(rel).to_str().unwrap().to_owned()
    }

    /// Backs up one snapshot of the table and recovers it into `rec/<label>`: the recovery's JSON.
    fn backup_and_recover(&self, metadata: &str, snapshot_id: i64, label: &str) -> Value {
        let dir = self.tmp.path();
        let sid = snapshot_id.to_string();
        let b = lakedrill_in(
            dir,
            &[
                "--json",
                "backup",
                "--metadata",
                metadata,
                "--snapshot-id",
                &sid,
                "--key",
                self.key.to_str().unwrap(),
                "--to",
                &self.path("backups"),
            ],
        )
        .expect_code(0)
        .json();
        lakedrill_in(
            dir,
            &[
                "--json",
                "recover",
                "--from",
                b["bundle_uri"].as_str().unwrap(),
                "--trust",
                self.trust.to_str().unwrap(),
                "--into",
                &self.path(&format!("rec/{label}")),
            ],
        )
        .expect_code(0)
        .json()
    }
}

/// Every snapshot of each table, backed up and recovered to a new location, reads in Spark and in DuckDB with
/// the row count Spark recorded for it when it wrote the source.
fn recovered_tables_read_in_both_engines(tables: &[&str]) {
    let site = Site::new();
    let mut failures = Vec::new();
    for name in tables {
        let t = oracle_table(name);
        let md = t["metadata_location"].as_str().unwrap();
        let counts = t["snapshot_row_counts"].as_object().unwrap();
        assert!(!counts.is_empty(), "{name}: no recorded counts");
        for (sid, want) in counts {
            let id: i64 = sid.parse().unwrap();
            let r = site.backup_and_recover(md, id, &format!("{name}-{sid}"));
            assert_eq!(r["status"], "RESTORE_VERIFIED", "{name} snapshot {sid}: {r}");
            let rec_md = r["metadata_location"].as_str().unwrap();
            let got = engine_counts(rec_md, &[id], &[]);
            for engine in ["spark", "duckdb"] {
                let n = &got[engine]["snapshots"][sid];
                if n != want {
                    failures.push(format!(
                        "{name} snapshot {sid} recovered to {rec_md}: {engine} reads {n}, Spark wrote {want}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn recovered_v2_merge_on_read_tables_read_in_spark_and_duckdb_with_the_recorded_counts() {
    recovered_tables_read_in_both_engines(&["v2_mor", "jdbc_v2"]);
}

/// Format v3: the Puffin footers name the recovered data files, row lineage is kept, and both engines apply the
/// deletion vectors with the recorded counts.
#[test]
fn recovered_v3_tables_with_deletion_vectors_read_in_spark_and_duckdb_with_the_recorded_counts() {
    recovered_tables_read_in_both_engines(&["v3_dv"]);
}

/// A table of `oracle.json`'s `purge_tables` (Spark-written, in the JDBC catalog, for tests that change it).
fn purge_table(name: &str) -> Value {
    crate::oracle::oracle()["purge_tables"]
        .as_array()
        .expect("oracle.json lists purge_tables")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no purge table {name} in oracle.json"))
        .clone()
}

/// The metadata file the JDBC catalog names now for the table, as a path.
fn current_metadata(t: &Value) -> String {
    let (db, catalog) = (t["catalog_db"].as_str().unwrap(), t["catalog_name"].as_str().unwrap());
    let (ns, table) = t["identifier"].as_str().unwrap().rsplit_once('.').unwrap();
    crate::util::sql_text(
        &format!("sqlite:{db}?mode=ro"),
        &format!(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = '{catalog}' AND table_namespace = '{ns}' AND table_name = '{table}'"
        ),
    )
    .unwrap()
    .trim_start_matches("file://")
    .to_owned()
}

/// A Spark-written table of the JDBC catalog taken through lakedrill's whole chain — plan, quarantine, weekly
/// drill, purge — after which Spark and DuckDB read every ref and every retained snapshot with the counts Spark
/// recorded when it wrote them, and the purged data and delete files are gone.
fn purge_then_read(name: &str) {
    let t = purge_table(name);
    let site = Site::new();
    let dir = site.tmp.path();
    site.jdbc_catalog(&t);
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: {}\nprotectedRefs: [main]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\nregulatedData: false\nreclamationImplementationDigest: any\n",
            crate::util::table_binding(name, t["metadata_location"].as_str().unwrap())
        ),
    )
    .unwrap();
    let ident = t["identifier"].as_str().unwrap();
    let p = policy.to_str().unwrap();
    let key = site.key.to_str().unwrap().to_owned();
    let trust = site.trust.to_str().unwrap().to_owned();
    let deleter = site.deleter.to_str().unwrap().to_owned();
    let run = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--catalog", "jc", "--table", ident]);
        lakedrill_in(dir, &a)
    };
    lakedrill_in(
        dir,
        &[
            "rollout",
            "set",
            ident,
            "test",
            "--catalog",
            "jc",
            "--reason",
            "Spark-written test table",
            "--policy",
            p,
            "--force",
        ],
    )
    .expect_code(0);
    let plan = run(&["--json", "plan", "--policy", p]).expect_code(0).json();
    let c = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")
        .unwrap_or_else(|| panic!("{name}: no expired-snapshots candidate: {plan}"))
        .clone();
    let id = c["candidate_id"].as_str().unwrap();
    let root = PathBuf::from(t["table_root"].as_str().unwrap());
    let content: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| ["data", "position_deletes", "equality_deletes"].contains(&o["layer"].as_str().unwrap()))
        .map(|o| o["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        content.iter().any(|p| p.ends_with(".parquet")) && content.len() >= 2,
        "{name}: the candidate should hold data and delete files: {c}"
    );
    run(&[
        "--json",
        "quarantine",
        id,
        "--policy",
        p,
        "--key",
        &key,
        "--bundles",
        "bundles",
    ])
    .expect_code(0);
    let drill = dir.join("weekly.toml");
    std::fs::write(
        &drill,
        format!("name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"{trust}\"\nkey = \"{key}\"\nreports = \"reports\"\n"),
    )
    .unwrap();
    let report = lakedrill_in(dir, &["--json", "drill", "run", drill.to_str().unwrap()])
        .expect_code(0)
        .json()["report"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = run(&[
        "--json",
        "purge",
        id,
        "--policy",
        p,
        "--trust",
        &trust,
        "--key",
        &deleter,
        "--receipts",
        "receipts",
        "--evidence",
        &report,
    ])
    .expect_code(0)
    .json();
    assert_eq!(r["status"], "VERIFIED", "{name}: {r}");
    for f in &content {
        assert!(
            !root.join(f).exists(),
            "{name}: {f} was in the purged inventory but is still there"
        );
    }
    // What the catalog names now, read by Spark and DuckDB.
    let md = current_metadata(&t);
    let doc: Value = serde_json::from_slice(&std::fs::read(&md).unwrap()).unwrap();
    let kept: Vec<i64> = doc["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot-id"].as_i64().unwrap())
        .collect();
    let purged: Vec<i64> = c["snapshot_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert!(
        purged.iter().all(|id| !kept.contains(id)),
        "{name}: purged snapshots still listed: {kept:?}"
    );
    let refs: Vec<String> = doc["refs"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|r| !r.starts_with("lakedrill"))
        .cloned()
        .collect();
    let ref_names: Vec<&str> = refs.iter().map(String::as_str).collect();
    assert!(
        ref_names.contains(&"kept-by-tag") && ref_names.contains(&"dev"),
        "{name}: {refs:?}"
    );
    let got = engine_counts(&md, &kept, &ref_names);
    let mut failures = Vec::new();
    for id in &kept {
        let want = &t["snapshot_row_counts"][id.to_string()];
        for engine in ["spark", "duckdb"] {
            let n = &got[engine]["snapshots"][id.to_string()];
            if n != want {
                failures.push(format!(
                    "{name} snapshot {id} after purge: {engine} reads {n}, Spark wrote {want}"
                ));
            }
        }
    }
    for r in &ref_names {
        let (want, n) = (&t["ref_row_counts"][*r], &got["spark"]["refs"][*r]);
        if n != want {
            failures.push(format!(
                "{name} ref {r} after purge: Spark reads {n}, Spark wrote {want}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn after_purging_a_spark_written_v2_table_spark_and_duckdb_read_every_ref_and_retained_snapshot() {
    purge_then_read("purge_v2");
}

#[test]
fn after_purging_a_spark_written_v3_table_spark_and_duckdb_read_every_ref_and_retained_snapshot() {
    purge_then_read("purge_v3");
}

/// `restore --into` of the v3 table's current snapshot (a new table in a catalog): Spark and DuckDB read it with
/// the recorded count, deletion vectors applied.
#[test]
fn a_v3_snapshot_restored_into_a_new_table_reads_in_spark_and_duckdb_with_the_recorded_count() {
    let site = Site::new();
    let dir = site.tmp.path();
    std::fs::write(
        dir.join("lakedrill.toml"),
        format!(
            "[catalog.dr]\ntype = \"sql\"\nuri = \"sqlite:{d}/dr.db\"\nwarehouse = \"file://{d}/rec\"\n[registry]\nuri = \"sqlite:{d}/registry.db\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let t = oracle_table("v3_dv");
    let md = t["metadata_location"].as_str().unwrap();
    let doc: Value = serde_json::from_slice(&std::fs::read(md).unwrap()).unwrap();
    let head = doc["current-snapshot-id"].as_i64().unwrap();
    let s = lakedrill_in(
        dir,
        &[
            "--json",
            "seal",
            "--metadata",
            md,
            "--snapshot-id",
            &head.to_string(),
            "--key",
            site.key.to_str().unwrap(),
            "--out",
            &site.path("bundles"),
        ],
    )
    .expect_code(0)
    .json();
    let r = lakedrill_in(
        dir,
        &[
            "--json",
            "restore",
            s["uri"].as_str().unwrap(),
            "--trust",
            site.trust.to_str().unwrap(),
            "--into",
            &site.path("rec/v3"),
            "--catalog",
            "dr",
            "--table",
            "db.v3",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(r["status"], "RESTORED", "{r}");
    let rec_md = r["metadata_location"].as_str().unwrap();
    let got = engine_counts(rec_md, &[head], &["main"]);
    let want = &t["snapshot_row_counts"][head.to_string()];
    for engine in ["spark", "duckdb"] {
        assert_eq!(
            &got[engine]["snapshots"][head.to_string()],
            want,
            "{engine} reads the restored table: {got}"
        );
    }
    assert_eq!(&got["spark"]["refs"]["main"], want, "{got}");
}

/// Format v3 row lineage through `rollback`: moving main back to an ancestor keeps `next-row-id` (row ids are
/// never handed out twice), and Spark and DuckDB read the rolled-back main with that snapshot's recorded count.
#[test]
fn rolling_a_v3_table_back_keeps_next_row_id_and_spark_and_duckdb_read_the_ancestor() {
    let t = purge_table("rollback_v3");
    let site = Site::new();
    site.jdbc_catalog(&t);
    let before: Value = serde_json::from_slice(&std::fs::read(current_metadata(&t)).unwrap()).unwrap();
    let next_row_id = before["next-row-id"].as_i64().expect("a v3 table has next-row-id");
    let head = before["current-snapshot-id"].as_i64().unwrap();
    let parent = before["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["snapshot-id"].as_i64() == Some(head))
        .and_then(|s| s["parent-snapshot-id"].as_i64())
        .unwrap();
    let ident = t["identifier"].as_str().unwrap();
    let r = lakedrill_in(
        site.tmp.path(),
        &[
            "--json",
            "rollback",
            "--to",
            &parent.to_string(),
            "--catalog",
            "jc",
            "--table",
            ident,
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(r["to_snapshot_id"].as_i64(), Some(parent), "{r}");
    let md = current_metadata(&t);
    let after: Value = serde_json::from_slice(&std::fs::read(&md).unwrap()).unwrap();
    assert_eq!(after["current-snapshot-id"].as_i64(), Some(parent));
    assert_eq!(after["next-row-id"].as_i64(), Some(next_row_id), "next-row-id is kept");
    let got = engine_counts(&md, &[parent], &["main"]);
    let want = &t["snapshot_row_counts"][parent.to_string()];
    for engine in ["spark", "duckdb"] {
        assert_eq!(&got[engine]["snapshots"][parent.to_string()], want, "{engine}: {got}");
    }
    assert_eq!(&got["spark"]["refs"]["main"], want, "{got}");
}
