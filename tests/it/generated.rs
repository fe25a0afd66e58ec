//! `inspect` and `resolve` against PyIceberg's own answers on freshly generated tables, read
//! directly by metadata file and through the PyIceberg SqlCatalog database.

use serde_json::Value;

use crate::util::{expected, lakedrill, lakedrill_in, project, pyfix_config};

const TABLES: [&str; 3] = ["db.events", "db.legacy", "db.empty"];

fn by_metadata(exp: &Value) -> Vec<String> {
    vec![
        "--metadata".into(),
        exp["metadata_location"].as_str().unwrap().to_owned(),
    ]
}

fn inspect(addr: &[String], cwd: &std::path::Path, what: &str, extra: &[&str]) -> Value {
    let mut args: Vec<&str> = vec!["--json", "inspect", what];
    args.extend(addr.iter().map(String::as_str));
    args.extend(extra);
    lakedrill_in(cwd, &args).expect_code(0).json()
}

fn check_table(table: &str, addr: &[String], cwd: &std::path::Path) {
    let exp = expected(table);
    let snaps = inspect(addr, cwd, "snapshots", &[]);
    let keys = [
        "snapshot_id",
        "parent_id",
        "sequence_number",
        "timestamp_ms",
        "operation",
        "manifest_list",
        "summary",
    ];
    assert_eq!(
        project(&snaps["snapshots"], &keys, "snapshot_id"),
        project(&exp["snapshots"], &keys, "snapshot_id"),
        "{table}: snapshots"
    );
    assert_eq!(
        snaps["current_snapshot_id"], exp["current_snapshot_id"],
        "{table}: current snapshot"
    );

    let refs = inspect(addr, cwd, "refs", &[]);
    let rkeys = [
        "name",
        "type",
        "snapshot_id",
        "max_ref_age_ms",
        "max_snapshot_age_ms",
        "min_snapshots_to_keep",
    ];
    assert_eq!(
        project(&refs["refs"], &rkeys, "name"),
        project(&exp["refs"], &rkeys, "name"),
        "{table}: refs"
    );

    let hist = inspect(addr, cwd, "history", &[]);
    assert_eq!(hist["history"], exp["history"], "{table}: history");

    let fkeys = ["content", "file_path", "file_size_in_bytes", "record_count", "spec_id"];
    let mkeys = [
        "path",
        "length",
        "content",
        "added_snapshot_id",
        "added_files_count",
        "existing_files_count",
        "deleted_files_count",
    ];
    let files = exp["files"].as_object().unwrap();
    assert_eq!(
        files.len(),
        exp["snapshots"].as_array().unwrap().len(),
        "{table}: every snapshot has expected files"
    );
    for (id, want) in files {
        let got = inspect(addr, cwd, "files", &["--snapshot-id", id]);
        assert_eq!(
            project(&got["files"], &fkeys, "file_path"),
            project(want, &fkeys, "file_path"),
            "{table}: files of {id}"
        );
        let got = inspect(addr, cwd, "manifests", &["--snapshot-id", id]);
        assert_eq!(
            project(&got["manifests"], &mkeys, "path"),
            project(&exp["manifests"][id], &mkeys, "path"),
            "{table}: manifests of {id}"
        );
    }
    // The current snapshot is the default.
    if let Some(cur) = exp["current_snapshot_id"].as_i64() {
        let got = inspect(addr, cwd, "files", &[]);
        assert_eq!(got["snapshot_id"].as_i64(), Some(cur));
        assert_eq!(
            project(&got["files"], &fkeys, "file_path"),
            project(&files[&cur.to_string()], &fkeys, "file_path")
        );
    } else {
        assert_eq!(inspect(addr, cwd, "files", &[])["files"], Value::Array(vec![]));
    }
    // Refs resolve to what PyIceberg says they point at.
    for r in exp["refs"].as_array().unwrap() {
        let mut args: Vec<&str> = vec!["--json", "resolve"];
        args.extend(addr.iter().map(String::as_str));
        args.extend(["--ref", r["name"].as_str().unwrap()]);
        assert_eq!(
            lakedrill_in(cwd, &args).expect_code(0).json()["snapshot_id"],
            r["snapshot_id"]
        );
    }
    // Time travel: PyIceberg's snapshot_as_of_timestamp at, just before and just after every log entry.
    for probe in exp["as_of"].as_array().unwrap() {
        let t = probe["timestamp_ms"].to_string();
        let mut args: Vec<&str> = vec!["--json", "resolve"];
        args.extend(addr.iter().map(String::as_str));
        args.extend(["--as-of", &t]);
        let run = lakedrill_in(cwd, &args);
        match probe["snapshot_id"].as_i64() {
            Some(id) => assert_eq!(
                run.expect_code(0).json()["snapshot_id"].as_i64(),
                Some(id),
                "{table}: as of {t}"
            ),
            None => {
                run.expect_code(2);
                assert!(run.stderr.contains("--as-of"), "{}", run.stderr);
            }
        }
    }
}

#[test]
fn inspect_and_resolve_agree_with_pyiceberg_by_metadata_file() {
    let dir = crate::util::tmpdir();
    for t in TABLES {
        check_table(t, &by_metadata(&expected(t)), dir.path());
    }
}

#[test]
fn inspect_and_resolve_agree_with_pyiceberg_through_the_sql_catalog() {
    let dir = crate::util::tmpdir();
    pyfix_config(dir.path());
    for t in TABLES {
        let addr = vec![
            "--catalog".to_owned(),
            "pyfix".to_owned(),
            "--table".to_owned(),
            t.to_owned(),
        ];
        check_table(t, &addr, dir.path());
    }
}

#[test]
fn as_of_edge_cases() {
    let exp = expected("db.events");
    let md = exp["metadata_location"].as_str().unwrap();
    let first = exp["history"][0]["made_current_at_ms"].as_i64().unwrap();
    // Zone-less timestamps are refused with the reason.
    let r = lakedrill(&["resolve", "--metadata", md, "--as-of", "2026-01-01T00:00:00"]);
    r.expect_code(2);
    assert!(r.stderr.contains("no zone offset"), "{}", r.stderr);
    // Before the first snapshot.
    let r = lakedrill(&["resolve", "--metadata", md, "--as-of", &(first - 1).to_string()]);
    r.expect_code(2);
    assert!(r.stderr.contains("before the first snapshot"), "{}", r.stderr);
    // RFC 3339 with an offset equals the same instant in epoch ms.
    let rfc = chrono::DateTime::from_timestamp_millis(first)
        .unwrap()
        .with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).unwrap());
    let a = lakedrill(&[
        "--json",
        "resolve",
        "--metadata",
        md,
        "--as-of",
        &rfc.to_rfc3339_opts(chrono::SecondsFormat::Millis, false),
    ])
    .expect_code(0)
    .json();
    let b = lakedrill(&["--json", "resolve", "--metadata", md, "--as-of", &first.to_string()])
        .expect_code(0)
        .json();
    assert_eq!(a, b);
    // A table without snapshots.
    let empty = expected("db.empty");
    let r = lakedrill(&[
        "resolve",
        "--metadata",
        empty["metadata_location"].as_str().unwrap(),
        "--as-of",
        "4102444800000",
    ]);
    r.expect_code(2);
    assert!(r.stderr.contains("no snapshot"), "{}", r.stderr);
    // A snapshot id that does not exist, a ref that does not exist.
    lakedrill(&["resolve", "--metadata", md, "--snapshot-id", "1"]).expect_code(2);
    let r = lakedrill(&["resolve", "--metadata", md, "--ref", "MAIN"]);
    r.expect_code(2);
    assert!(r.stderr.contains("\"MAIN\""), "{}", r.stderr);
}

#[test]
fn history_marks_rolled_back_snapshots_as_non_ancestors() {
    let exp = expected("db.events");
    let hist = lakedrill(&[
        "--json",
        "inspect",
        "history",
        "--metadata",
        exp["metadata_location"].as_str().unwrap(),
    ])
    .expect_code(0)
    .json();
    let rows = hist["history"].as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["is_current_ancestor"] == Value::Bool(false)),
        "the rollback left a non-ancestor: {hist}"
    );
}
