//! Many processes writing the registry at once lose nothing.

use std::process::{Command, Stdio};

use crate::util::{copy_tree, fresh_postgres_database, interop, lakedrill_in, tmpdir};

/// The registry in the default SQLite file of the working directory.
#[test]
fn many_processes_adding_leases_and_holds_at_once_lose_nothing() {
    many_processes_lose_nothing(None);
}

/// The registry in a fresh PostgreSQL database: the advisory write lock serializes the processes.
#[test]
fn many_processes_adding_leases_and_holds_at_once_lose_nothing_on_postgres() {
    many_processes_lose_nothing(Some(fresh_postgres_database()));
}

fn many_processes_lose_nothing(registry: Option<String>) {
    let tmp = tmpdir();
    let dir = tmp.path();
    if let Some(uri) = &registry {
        std::fs::write(dir.join("lakedrill.toml"), format!("[registry]\nuri = \"{uri}\"\n")).unwrap();
    }
    let table = dir.join("t");
    copy_tree(
        &interop().join("tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table"),
        &table,
    );
    let current = table.join("metadata/v1.metadata.json").display().to_string();
    std::fs::write(
        dir.join("policy.yaml"),
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: {}\nprotectedRefs: [main]\nminSnapshotAge: 1s\nmaxReaderLease: 14d\n\
             maxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n",
            crate::util::table_binding("t", &current)
        ),
    )
    .unwrap();
    let t = table.to_str().unwrap();
    let snap = lakedrill_in(dir, &["--json", "resolve", "--metadata", t, "--ref", "main"])
        .expect_code(0)
        .json()["snapshot_id"]
        .as_i64()
        .unwrap()
        .to_string();
    const N: usize = 16;
    let mut children = Vec::new();
    for i in 0..N {
        let purpose = format!("reader-{i}");
        let reason = format!("case-{i}");
        let scope = format!("snapshot:{snap}");
        let lease: Vec<&str> = vec![
            "-q",
            "lease",
            "add",
            "--metadata",
            t,
            "--policy",
            "policy.yaml",
            "--snapshot-id",
            &snap,
            "--purpose",
            &purpose,
            "--owner",
            "it",
            "--expires-in",
            "1d",
        ];
        let hold: Vec<&str> = vec![
            "-q",
            "hold",
            "set",
            "--metadata",
            t,
            "--scope",
            &scope,
            "--reason",
            &reason,
        ];
        for args in [lease, hold] {
            children.push(
                Command::new(env!("CARGO_BIN_EXE_lakedrill"))
                    .args(&args)
                    .current_dir(dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
            );
        }
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let leases = lakedrill_in(dir, &["--json", "lease", "list", "--metadata", t])
        .expect_code(0)
        .json();
    let holds = lakedrill_in(dir, &["--json", "hold", "list", "--metadata", t])
        .expect_code(0)
        .json();
    let purposes: std::collections::BTreeSet<&str> = leases["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["purpose"].as_str().unwrap())
        .collect();
    assert_eq!(purposes.len(), N, "{leases}");
    let gens: std::collections::BTreeSet<i64> = holds["holds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["hold_generation"].as_i64().unwrap())
        .collect();
    assert_eq!(gens.len(), N, "every hold got its own generation: {holds}");
    assert_eq!(
        *gens.iter().max().unwrap() - *gens.iter().min().unwrap(),
        (N - 1) as i64
    );
    assert_eq!(
        dir.join("lakedrill-registry.db").exists(),
        registry.is_none(),
        "the registry is where the configuration says"
    );
}
