//! Bad input exits 2 naming the object, never panics; paths outside the table are never opened.

use std::path::Path;

use crate::util::{copy_tree, interop, lakedrill};

fn apache(name: &str) -> String {
    interop()
        .parent()
        .unwrap()
        .join("apache-iceberg/metadata-only")
        .join(name)
        .display()
        .to_string()
}

fn pos_table(into: &Path) -> std::path::PathBuf {
    let src = interop().join("tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table");
    let dst = into.join("t");
    copy_tree(&src, &dst);
    dst
}

#[test]
fn rejected_metadata_documents_name_the_file() {
    for (file, needle) in [
        ("TableMetadataUnsupportedVersion.json", "format-version"),
        (
            "TableMetadataV2CurrentSchemaNotFound.json",
            "TableMetadataV2CurrentSchemaNotFound.json",
        ),
    ] {
        let p = apache(file);
        let r = lakedrill(&["inspect", "snapshots", "--metadata", &p, "--table-root", "/tmp/nowhere"]);
        r.expect_code(2);
        assert!(
            r.stderr.contains(file) && r.stderr.contains(needle),
            "{file}: {}",
            r.stderr
        );
    }
}

#[test]
fn invalid_json_and_missing_files_exit_2_naming_the_object() {
    let tmp = crate::util::tmpdir();
    let bad = tmp.path().join("metadata").join("v1.metadata.json");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::write(&bad, b"{ not json").unwrap();
    let r = lakedrill(&["inspect", "snapshots", "--metadata", bad.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("v1.metadata.json") && r.stderr.contains("invalid JSON"),
        "{}",
        r.stderr
    );

    let missing = tmp.path().join("nope.metadata.json");
    let r = lakedrill(&["inspect", "snapshots", "--metadata", missing.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("nope.metadata.json") && r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_truncated_manifest_exits_2_naming_it() {
    let tmp = crate::util::tmpdir();
    let t = pos_table(tmp.path());
    let m = t.join("metadata/355a32d2-0d4f-4da3-8019-f0b782863350-m1.avro");
    let bytes = std::fs::read(&m).unwrap();
    std::fs::write(&m, &bytes[..bytes.len() / 2]).unwrap();
    let r = lakedrill(&["inspect", "files", "--metadata", t.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("355a32d2-0d4f-4da3-8019-f0b782863350-m1.avro"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_missing_manifest_list_exits_2_naming_it() {
    let tmp = crate::util::tmpdir();
    let t = pos_table(tmp.path());
    let ml = t.join("metadata/snap-3119545726281138740-1-e3f073e1-20d8-4831-b927-86100e4ad98c.avro");
    std::fs::remove_file(&ml).unwrap();
    let r = lakedrill(&[
        "inspect",
        "manifests",
        "--metadata",
        t.to_str().unwrap(),
        "--snapshot-id",
        "3119545726281138740",
    ]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("snap-3119545726281138740") && r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_path_outside_the_table_is_refused_and_never_opened() {
    let tmp = crate::util::tmpdir();
    let t = pos_table(tmp.path());
    // A secret next to the table that a hostile manifest-list path points at.
    std::fs::write(tmp.path().join("secret.avro"), b"not for you").unwrap();
    let md = t.join("metadata/v9.metadata.json");
    let text = std::fs::read_to_string(&md).unwrap();
    let loc = "data/iceberg/generated_spec2_0_001/pyspark_iceberg_table";
    let hostile = text.replacen(
        &format!("\"{loc}/metadata/snap-"),
        &format!("\"{loc}/../../../../../secret.avro#/snap-"),
        1,
    );
    assert_ne!(hostile, text);
    std::fs::write(&md, hostile).unwrap();
    let r = lakedrill(&["--json", "inspect", "snapshots", "--metadata", t.to_str().unwrap()]);
    r.expect_code(0);
    let snaps = r.json();
    let bad = snaps["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["manifest_list"].as_str().unwrap().contains("secret"))
        .unwrap();
    let id = bad["snapshot_id"].to_string();
    let r = lakedrill(&[
        "inspect",
        "files",
        "--metadata",
        t.to_str().unwrap(),
        "--snapshot-id",
        &id,
    ]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("PATH_OUTSIDE_TABLE") && r.stderr.contains("secret.avro"),
        "{}",
        r.stderr
    );
}

/// Truncations and bit flips of a metadata file and a manifest list never panic: every run ends
/// in exit 0 (the change was harmless) or 2 (refused), and `lakedrill_in` fails on exit 101.
/// The manifest list the fuzzer found (fuzz/regressions/manifest-list-huge-allocation) made the Avro decoder
/// reserve 10 GB. With lakedrill's allocation bound it is refused naming the file even when the process may
/// not map more than 4 GiB (`ulimit -v`), and the panic input of the same run is a clear error as well.
#[test]
fn the_fuzzed_manifest_list_is_refused_within_bounded_memory() {
    let tmp = crate::util::tmpdir();
    let t = pos_table(tmp.path());
    let ml = t.join("metadata/snap-3119545726281138740-1-e3f073e1-20d8-4831-b927-86100e4ad98c.avro");
    let repro = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/manifest-list-huge-allocation");
    std::fs::copy(&repro, &ml).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_lakedrill"))
        .args(["inspect", "manifests", "--metadata"])
        .arg(&t)
        .args(["--snapshot-id", "3119545726281138740"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("snap-3119545726281138740") && stderr.contains("manifest list"),
        "{stderr}"
    );
    assert!(!stderr.contains("memory allocation"), "{stderr}");
}

#[test]
fn fuzzed_metadata_and_manifest_lists_never_panic() {
    let tmp = crate::util::tmpdir();
    let t = pos_table(tmp.path());
    let md = t.join("metadata/v9.metadata.json");
    let ml = t.join("metadata/snap-3119545726281138740-1-e3f073e1-20d8-4831-b927-86100e4ad98c.avro");
    let md_orig = std::fs::read(&md).unwrap();
    let ml_orig = std::fs::read(&ml).unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for i in 0..24 {
        let (path, orig) = if i % 2 == 0 { (&md, &md_orig) } else { (&ml, &ml_orig) };
        let mut bytes = orig.clone();
        let n = usize::try_from(next() % bytes.len() as u64).unwrap();
        if i % 4 < 2 {
            bytes.truncate(n);
        } else {
            bytes[n] ^= 1 << (next() % 8);
        }
        std::fs::write(path, &bytes).unwrap();
        let r = lakedrill(&["inspect", "files", "--metadata", t.to_str().unwrap()]);
        assert!(r.code == 0 || r.code == 2, "run {i}: exit {}\n{}", r.code, r.stderr);
        std::fs::write(path, orig).unwrap();
    }
}

#[test]
fn refs_that_differ_only_by_case_are_reported_and_never_picked() {
    let tmp = crate::util::tmpdir();
    let t = pos_table(tmp.path());
    let md = t.join("metadata/v9.metadata.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&md).unwrap()).unwrap();
    let main = v["refs"]["main"]["snapshot-id"].clone();
    v["refs"]["Audit-Q2"] = serde_json::json!({"snapshot-id": main, "type": "tag"});
    v["refs"]["audit-q2"] = serde_json::json!({"snapshot-id": main, "type": "tag"});
    std::fs::write(&md, serde_json::to_vec(&v).unwrap()).unwrap();
    let dir = t.to_str().unwrap();
    let refs = lakedrill(&["--json", "inspect", "refs", "--metadata", dir])
        .expect_code(0)
        .json();
    assert_eq!(refs["ambiguous_names"], serde_json::json!([["Audit-Q2", "audit-q2"]]));
    for name in ["Audit-Q2", "audit-q2"] {
        let r = lakedrill(&["resolve", "--metadata", dir, "--ref", name]);
        r.expect_code(2);
        assert!(r.stderr.contains("ambiguous"), "{}", r.stderr);
    }
    let r = lakedrill(&["resolve", "--metadata", dir, "--ref", "AUDIT-Q2"]);
    r.expect_code(2);
    assert!(r.stderr.contains("differ only by case"), "{}", r.stderr);
    lakedrill(&["resolve", "--metadata", dir, "--ref", "main"]).expect_code(0);
}
