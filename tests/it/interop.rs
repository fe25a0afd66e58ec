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
