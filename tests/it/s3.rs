//! The same answers through `s3://` on the local S3-compatible server started by scripts/test.sh.
//! Without the server these tests fail; they never skip.

use std::path::Path;

use lakedrill::io::store::{Storage, StorageOptions};

use crate::util::{expected, generated, lakedrill, project};

fn bucket() -> String {
    let endpoint = std::env::var("LAKEDRILL_TEST_S3_ENDPOINT").unwrap_or_else(|_| {
        panic!("LAKEDRILL_TEST_S3_ENDPOINT is not set: run the tests with scripts/test.sh, which starts the S3 server")
    });
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "the S3 test server must be on loopback: {endpoint}"
    );
    std::env::var("LAKEDRILL_TEST_S3_BUCKET").unwrap_or_else(|_| "lakedrill-test".into())
}

/// Uploads a local folder to `s3://bucket/prefix` through lakedrill's own storage layer.
pub async fn upload(dir: &Path, prefix: &str) {
    let storage = Storage::new(StorageOptions::default());
    let base = format!("s3://{}/{prefix}", bucket());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_str().unwrap().to_owned();
                storage
                    .put(
                        &format!("{base}/{rel}"),
                        bytes::Bytes::from(std::fs::read(e.path()).unwrap()),
                    )
                    .await
                    .unwrap();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_through_s3_matches_pyiceberg() {
    let exp = expected("db.events");
    let prefix = format!("it-{}/events", uuid::Uuid::new_v4());
    upload(&generated().join("warehouse/db/events"), &prefix).await;
    let root = format!("s3://{}/{prefix}", bucket());
    let md_name = exp["metadata_location"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let md = format!("{root}/metadata/{md_name}");
    let snaps = tokio::task::spawn_blocking(move || {
        lakedrill(&[
            "--json",
            "inspect",
            "snapshots",
            "--metadata",
            &md,
            "--table-root",
            &root,
        ])
    })
    .await
    .unwrap();
    let snaps = snaps.expect_code(0).json();
    let keys = [
        "snapshot_id",
        "parent_id",
        "sequence_number",
        "timestamp_ms",
        "operation",
        "manifest_list",
    ];
    assert_eq!(
        project(&snaps["snapshots"], &keys, "snapshot_id"),
        project(&exp["snapshots"], &keys, "snapshot_id")
    );

    let root = format!("s3://{}/{prefix}", bucket());
    let md = format!("{root}/metadata/{md_name}");
    let files = tokio::task::spawn_blocking(move || {
        lakedrill(&["--json", "inspect", "files", "--metadata", &md, "--table-root", &root])
    })
    .await
    .unwrap()
    .expect_code(0)
    .json();
    let cur = exp["current_snapshot_id"].to_string();
    let fkeys = ["content", "file_path", "file_size_in_bytes", "record_count", "spec_id"];
    assert_eq!(
        project(&files["files"], &fkeys, "file_path"),
        project(&exp["files"][&cur], &fkeys, "file_path")
    );

    // Without --table-root the written file:// location does not hold the S3 metadata file: refused.
    let md = format!("s3://{}/{prefix}/metadata/{md_name}", bucket());
    let r = tokio::task::spawn_blocking(move || lakedrill(&["inspect", "snapshots", "--metadata", &md]))
        .await
        .unwrap();
    r.expect_code(2);
    assert!(r.stderr.contains("--table-root"), "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_errors_name_the_object() {
    let uri = format!("s3://{}/it-missing-{}/v1.metadata.json", bucket(), uuid::Uuid::new_v4());
    let u = uri.clone();
    let r = tokio::task::spawn_blocking(move || lakedrill(&["inspect", "snapshots", "--metadata", &u]))
        .await
        .unwrap();
    r.expect_code(2);
    assert!(
        r.stderr.contains(&uri) && r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );
}
