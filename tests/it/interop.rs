//! The Spark- and Java-written tables of `tests/fixtures/interop` against their expected files,
//! position and equality delete files included.

use serde_json::Value;

use crate::util::{interop, lakedrill};

const CASES: [&str; 5] = [
    "spark-v2-position-deletes",
    "spark-v1",
    "java-v2-equality-deletes-partitioned",
    "spark-v2-equality-deletes-broken-history",
    "spark-v2-relative-location",
];

fn expected(case: &str) -> Value {
    serde_json::from_slice(&std::fs::read(interop().join("expected").join(format!("{case}.json"))).unwrap()).unwrap()
}

fn table_dir(exp: &Value) -> String {
    interop()
        .join(exp["table_root"].as_str().unwrap())
        .display()
        .to_string()
}

/// A path as written, relative to the table location.
fn rel(exp: &Value, written: &str) -> String {
    let loc = exp["location_in_metadata"].as_str().unwrap().trim_start_matches("./");
    written
        .trim_start_matches("./")
        .strip_prefix(loc)
        .unwrap_or_else(|| panic!("{written} not under {loc}"))
        .trim_start_matches('/')
        .to_owned()
}

#[test]
fn interop_tables_match_their_expected_files() {
    for case in CASES {
        let exp = expected(case);
        let dir = table_dir(&exp);
        let snaps = lakedrill(&["--json", "inspect", "snapshots", "--metadata", &dir])
            .expect_code(0)
            .json();
        assert_eq!(snaps["current_snapshot_id"], exp["current_snapshot_id"], "{case}");
        assert!(
            snaps["metadata_location"]
                .as_str()
                .unwrap()
                .ends_with(exp["current_metadata_file"].as_str().unwrap()),
            "{case}"
        );
        let got = snaps["snapshots"].as_array().unwrap();
        let want = exp["snapshots"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{case}: snapshot count");
        for w in want {
            let g = got
                .iter()
                .find(|g| g["snapshot_id"] == w["snapshot_id"])
                .unwrap_or_else(|| panic!("{case}: {} missing", w["snapshot_id"]));
            for k in [
                "parent_id",
                "sequence_number",
                "timestamp_ms",
                "operation",
                "manifest_list",
            ] {
                if k == "manifest_list" {
                    assert_eq!(rel(&exp, g[k].as_str().unwrap()), w[k].as_str().unwrap(), "{case}: {k}");
                } else if k == "sequence_number" && w[k].is_null() {
                    // v1 has no sequence numbers; like PyIceberg, lakedrill reports the implied 0.
                    assert_eq!(g[k], 0, "{case}: {k} of {}", w["snapshot_id"]);
                } else {
                    assert_eq!(g[k], w[k], "{case}: {k} of {}", w["snapshot_id"]);
                }
            }
        }
        // Refs.
        let refs = lakedrill(&["--json", "inspect", "refs", "--metadata", &dir])
            .expect_code(0)
            .json();
        for (name, r) in exp["refs"].as_object().unwrap() {
            let g = refs["refs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["name"] == *name)
                .unwrap_or_else(|| panic!("{case}: ref {name}"));
            assert_eq!(g["snapshot_id"], r["snapshot-id"], "{case}: ref {name}");
            assert_eq!(g["type"], r["type"], "{case}: ref {name}");
        }
        // Snapshot log.
        let hist = lakedrill(&["--json", "inspect", "history", "--metadata", &dir])
            .expect_code(0)
            .json();
        let got: Vec<(i64, i64)> = hist["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["made_current_at_ms"].as_i64().unwrap(),
                    h["snapshot_id"].as_i64().unwrap(),
                )
            })
            .collect();
        let want: Vec<(i64, i64)> = exp["snapshot_log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h["timestamp-ms"].as_i64().unwrap(), h["snapshot-id"].as_i64().unwrap()))
            .collect();
        assert_eq!(got, want, "{case}: snapshot log");
        // Live data and delete files of every snapshot whose manifest list exists.
        for w in want_snapshots(&exp) {
            let id = w["snapshot_id"].to_string();
            let run = lakedrill(&["--json", "inspect", "files", "--metadata", &dir, "--snapshot-id", &id]);
            let ml = w["manifest_list"].as_str().unwrap();
            let missing = exp["files_referenced_but_missing"].as_array().is_some_and(|m| {
                m.iter()
                    .any(|x| x.as_str() == Some(ml) || x["path"].as_str() == Some(ml))
            });
            if missing {
                run.expect_code(2);
                assert!(
                    run.stderr.contains(ml) && run.stderr.contains(&id),
                    "{case}: {}",
                    run.stderr
                );
                continue;
            }
            let files = run.expect_code(0).json();
            let mut got: Vec<(String, String, u64, u64)> = files["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["content"].as_str().unwrap().to_owned(),
                        rel(&exp, f["file_path"].as_str().unwrap()),
                        f["file_size_in_bytes"].as_u64().unwrap(),
                        f["record_count"].as_u64().unwrap(),
                    )
                })
                .collect();
            let mut want: Vec<(String, String, u64, u64)> = w["data_files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        "data".to_owned(),
                        f["path"].as_str().unwrap().to_owned(),
                        f["file_size_in_bytes"].as_u64().unwrap(),
                        f["record_count"].as_u64().unwrap(),
                    )
                })
                .chain(w["delete_files"].as_array().unwrap().iter().map(|f| {
                    let content = if f["content"] == 1 {
                        "position_deletes"
                    } else {
                        "equality_deletes"
                    };
                    (
                        content.to_owned(),
                        f["path"].as_str().unwrap().to_owned(),
                        f["file_size_in_bytes"].as_u64().unwrap(),
                        f["record_count"].as_u64().unwrap(),
                    )
                }))
                .collect();
            got.sort();
            want.sort();
            assert_eq!(got, want, "{case}: files of {id}");
        }
    }
}

fn want_snapshots(exp: &Value) -> Vec<Value> {
    exp["snapshots"].as_array().unwrap().clone()
}

#[test]
fn delete_files_of_both_kinds_are_listed() {
    let pos = table_dir(&expected("spark-v2-position-deletes"));
    let files = lakedrill(&["--json", "inspect", "files", "--metadata", &pos])
        .expect_code(0)
        .json();
    assert!(
        files["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["content"] == "position_deletes")
    );
    let eq = table_dir(&expected("java-v2-equality-deletes-partitioned"));
    let files = lakedrill(&["--json", "inspect", "files", "--metadata", &eq])
        .expect_code(0)
        .json();
    assert!(
        files["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["content"] == "equality_deletes")
    );
}

#[test]
fn broken_history_names_the_missing_manifest_list_while_current_reads() {
    let exp = expected("spark-v2-equality-deletes-broken-history");
    let dir = table_dir(&exp);
    lakedrill(&["inspect", "files", "--metadata", &dir]).expect_code(0);
    let r = lakedrill(&[
        "inspect",
        "files",
        "--metadata",
        &dir,
        "--snapshot-id",
        "7342794868382145167",
    ]);
    r.expect_code(2);
    assert!(r.stderr.contains("snap-7342794868382145167-1-34f7dec7"), "{}", r.stderr);
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
}

#[test]
fn a_metadata_file_with_explicit_table_root_reads_the_same() {
    let exp = expected("spark-v2-relative-location");
    let dir = table_dir(&exp);
    let md = format!("{dir}/{}", exp["current_metadata_file"].as_str().unwrap());
    let a = lakedrill(&["--json", "inspect", "files", "--metadata", &md, "--table-root", &dir])
        .expect_code(0)
        .json();
    let b = lakedrill(&["--json", "inspect", "files", "--metadata", &dir])
        .expect_code(0)
        .json();
    assert_eq!(a["files"], b["files"]);
    assert!(!a["files"].as_array().unwrap().is_empty());
}

/// The first snapshot and the current one of the Spark-written format-v1 table below.
const V1_FIRST: i64 = 9_145_725_745_960_929_259;
const V1_CURRENT: i64 = 4_407_328_776_463_037_310;

/// The Spark-written format-v1 table of the fixtures copied to `dir/t`, with a tag `audit` and a branch `dev` (with
/// retention fields) on its first snapshot in its current metadata, `refs` as Spark writes them in v1 metadata
/// (apache/iceberg-rust#3693). Returns the table folder and the current metadata file.
fn v1_table_with_refs(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = interop().join("tree-31f6b388/data/iceberg/generated_spec1_0_001/pyspark_iceberg_table");
    let root = dir.join("t");
    crate::util::copy_tree(&src, &root);
    let md = root.join("metadata/v9.metadata.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&md).unwrap()).unwrap();
    assert_eq!(v["format-version"], 1);
    assert_eq!(v["current-snapshot-id"], V1_CURRENT);
    v["refs"]["audit"] =
        serde_json::json!({"snapshot-id": V1_FIRST, "type": "tag", "max-ref-age-ms": 864_000_000_000_i64});
    v["refs"]["dev"] = serde_json::json!({"snapshot-id": V1_FIRST, "type": "branch", "min-snapshots-to-keep": 1});
    std::fs::write(&md, serde_json::to_vec(&v).unwrap()).unwrap();
    (root, md)
}

/// `inspect refs` rows by name: (snapshot id, type).
fn refs_by_name(refs: &Value) -> std::collections::BTreeMap<String, (i64, String)> {
    refs["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                (
                    r["snapshot_id"].as_i64().unwrap(),
                    r["type"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

/// See: the review of 2026-12-07, item 1. The iceberg crate reads a v1 table's refs as `main` alone, so a tag and a
/// branch Spark made on a v1 table were invisible: `inspect refs` listed main only and `plan` proposed their
/// snapshot, with its data files, in the expired-snapshots candidate. Now both read `refs` from the JSON.
#[test]
fn tags_and_branches_of_a_v1_table_are_listed_and_keep_their_snapshot() {
    let tmp = crate::util::tmpdir();
    let (root, md) = v1_table_with_refs(tmp.path());
    let dir = root.to_str().unwrap();
    let refs = lakedrill(&["--json", "inspect", "refs", "--metadata", dir])
        .expect_code(0)
        .json();
    let by_name = refs_by_name(&refs);
    assert_eq!(by_name["audit"], (V1_FIRST, "tag".to_owned()), "{refs}");
    assert_eq!(by_name["dev"], (V1_FIRST, "branch".to_owned()), "{refs}");
    assert_eq!(by_name["main"], (V1_CURRENT, "branch".to_owned()), "{refs}");
    let audit = refs["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "audit")
        .unwrap();
    assert_eq!(audit["max_ref_age_ms"], 864_000_000_000_i64, "{refs}");
    let dev = refs["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "dev")
        .unwrap();
    assert_eq!(dev["min_snapshots_to_keep"], 1, "{refs}");

    let policy = crate::malformed::policy_for(tmp.path(), "t", &md);
    let plan = lakedrill(&[
        "--json",
        "plan",
        "--policy",
        policy.to_str().unwrap(),
        "--metadata",
        dir,
    ])
    .expect_code(0)
    .json();
    for c in plan["candidates"].as_array().unwrap() {
        assert!(
            !c["snapshot_ids"].as_array().unwrap().contains(&V1_FIRST.into()),
            "the tagged snapshot is proposed: {c}"
        );
    }
    let kept = plan["protected"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["snapshot_id"] == V1_FIRST)
        .unwrap_or_else(|| panic!("{}", plan["protected"]));
    let reasons: Vec<&str> = kept["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        reasons.contains(&"ref:audit") && reasons.contains(&"ref:dev"),
        "{reasons:?}"
    );
}

/// The v1 table above registered in a fresh SQLite catalog `c` as `db.t` (its metadata file renamed to the catalog
/// naming scheme), with a registry, a policy and a key: the folder holding `lakedrill.toml`, and the policy.
fn v1_catalog_table(dir: &std::path::Path) -> std::path::PathBuf {
    let (root, md) = v1_table_with_refs(dir);
    let named = root.join("metadata/00009-1d0f4bc0-65a5-4b1c-8a4e-2fd0dbd3b1c4.metadata.json");
    std::fs::rename(&md, &named).unwrap();
    let catalog = format!("sqlite:{}", dir.join("catalog.db").display());
    let cfg = lakedrill::config::CatalogConfig {
        kind: "sql".to_owned(),
        uri: catalog.clone(),
        warehouse: Some(format!("file://{}", dir.display())),
        name: Some("c".to_owned()),
        ..Default::default()
    };
    let ident: lakedrill::io::catalog::TableIdent = "db.t".parse().unwrap();
    let storage = lakedrill::io::store::Storage::new(lakedrill::config::StorageOptions::default());
    crate::util::block_on(lakedrill::ops::materialize::register(
        &storage,
        &cfg,
        "c",
        &ident,
        &format!("file://{}", named.display()),
        "file:///unused",
    ))
    .unwrap();
    std::fs::write(
        dir.join("lakedrill.toml"),
        format!(
            "[catalog.c]\ntype = \"sql\"\nuri = \"{catalog}\"\nname = \"c\"\n[registry]\nuri = \"sqlite:{}\"\n",
            dir.join("registry.db").display()
        ),
    )
    .unwrap();
    crate::malformed::policy_for(dir, "t", &named)
}

/// The current metadata JSON of `db.t` in catalog `c` (read from the catalog row).
fn current_metadata(dir: &std::path::Path) -> Value {
    let loc = crate::util::sql_text(
        &format!("sqlite://{}?mode=ro", dir.join("catalog.db").display()),
        "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = 'c' AND table_name = 't'",
    )
    .unwrap();
    let path = loc.trim_start_matches("file://");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// See: the review of 2026-12-07, item 1. lakedrill's commits wrote the iceberg crate's JSON of its model, which
/// for a v1 table has no `refs`: every commit dropped the table's tags and branches for every engine, and the
/// quarantine's own tags were never stored. A rollback, a tag-mode quarantine and its release on a v1 table now
/// keep `audit` and `dev`, the quarantine's tags are in the table, and the metadata stays format v1.
#[test]
fn commits_on_a_v1_table_keep_its_refs_and_store_the_quarantine_tags() {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path();
    let policy = v1_catalog_table(dir);
    let p = policy.to_str().unwrap();
    let t = ["--catalog", "c", "--table", "db.t"];
    let with_t = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(t);
        crate::util::lakedrill_in(dir, &a)
    };
    let refs = || refs_by_name(&with_t(&["--json", "inspect", "refs"]).expect_code(0).json());
    let assert_kept = |when: &str| {
        let md = current_metadata(dir);
        assert_eq!(md["format-version"], 1, "{when}");
        assert_eq!(md["refs"]["audit"]["snapshot-id"], V1_FIRST, "{when}: {}", md["refs"]);
        assert_eq!(md["refs"]["audit"]["max-ref-age-ms"], 864_000_000_000_i64, "{when}");
        assert_eq!(md["refs"]["dev"]["snapshot-id"], V1_FIRST, "{when}: {}", md["refs"]);
        assert_eq!(md["refs"]["dev"]["type"], "branch", "{when}");
        let r = refs();
        assert!(r.contains_key("audit") && r.contains_key("dev"), "{when}: {r:?}");
        md
    };
    assert_kept("registered");

    // A rollback of main to its parent: a commit through the runbook.
    let parent = 1_692_767_036_460_164_714_i64;
    with_t(&["--json", "rollback", "--to", &parent.to_string()]).expect_code(0);
    let md = assert_kept("after the rollback");
    assert_eq!(md["current-snapshot-id"], parent);
    assert_eq!(md["refs"]["main"]["snapshot-id"], parent);

    // A quarantine in tag mode: its tags are stored beside the table's own.
    crate::util::lakedrill_in(dir, &["keygen", "--name", "gov-TEST-ONLY", "--dir", "keys"]).expect_code(0);
    std::thread::sleep(std::time::Duration::from_millis(1100)); // past minSnapshotAge
    let plan = with_t(&["--json", "plan", "--policy", p]).expect_code(0).json();
    let candidate = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")
        .unwrap_or_else(|| panic!("{plan}"))
        .clone();
    let id = candidate["candidate_id"].as_str().unwrap();
    assert!(
        !candidate["snapshot_ids"].as_array().unwrap().contains(&V1_FIRST.into()),
        "{candidate}"
    );
    with_t(&[
        "--json",
        "quarantine",
        id,
        "--policy",
        p,
        "--key",
        "keys/gov-TEST-ONLY.key",
        "--bundles",
        "bundles",
        "--mode",
        "tag",
    ])
    .expect_code(0);
    let md = assert_kept("after the quarantine");
    let tags: Vec<&String> = md["refs"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("quarantine/"))
        .collect();
    assert_eq!(
        tags.len(),
        candidate["snapshot_ids"].as_array().unwrap().len(),
        "{}",
        md["refs"]
    );
    assert!(refs().keys().any(|k| k.starts_with("quarantine/")));

    // Its release takes its own tags out and nothing else.
    with_t(&["--json", "quarantine", "release", id, "--reason", "test"]).expect_code(0);
    let md = assert_kept("after the release");
    assert!(
        !md["refs"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("quarantine/")),
        "{}",
        md["refs"]
    );
}
