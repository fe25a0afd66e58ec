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
        let r = lakedrill_in(dir, &["--json", "keygen", "--name", "engines-TEST-ONLY", "--dir", keys.to_str().unwrap()])
            .expect_code(0)
            .json();
        // A trust folder of public keys only.
        let trust = dir.join("trust");
        std::fs::create_dir_all(&trust).unwrap();
        let public = PathBuf::from(r["public_key"].as_str().unwrap());
        std::fs::copy(&public, trust.join(public.file_name().unwrap())).unwrap();
        Site {
            key: PathBuf::from(r["private_key"].as_str().unwrap()),
            trust,
            tmp,
        }
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
                    failures.push(format!("{name} snapshot {sid} recovered to {rec_md}: {engine} reads {n}, Spark wrote {want}"));
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
