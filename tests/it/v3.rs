//! Iceberg format v3 with deletion vectors, end to end through the binary: `inspect files` lists the
//! vectors' fields, every snapshot seals and deep-restores, a Puffin file is one object, a changed blob or
//! an edited `record_count` is a `DELETION_VECTOR_INVALID` finding, and encrypted metadata exits 2.
//!
//! Two sources: the small Spark-written table checked in under
//! `tests/fixtures/interop/lakedrill-spark/v3_dv` (see its `SOURCES.md`), and the `v3_dv` table that
//! `scripts/test.sh` writes with Spark into `$LAKEDRILL_TEST_SPARK_FIXTURES` (listed in its `oracle.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::drill::{keygen, restore, seal};
use crate::util::{copy_tree, lakedrill, tmpdir};

/// The checked-in table's folder.
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/lakedrill-spark/v3_dv")
}

const CURRENT: i64 = 2_945_519_146_151_961_459;
/// The Puffin file of the first delete: six vectors, five still live at the current snapshot.
const SHARED_PUFFIN: &str = "00000-11-5ecc272b-d84d-44d2-b6c6-c9db9fc51901-00001-deletes.puffin";

/// `--metadata M --table-root ROOT` for a table folder (the metadata names `/tmp/v3wh/db/t`).
fn addr(root: &Path, metadata: &str) -> Vec<String> {
    vec![
        "--metadata".into(),
        root.join("metadata").join(metadata).display().to_string(),
        "--table-root".into(),
        root.display().to_string(),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn run(addr: &[String], args: &[&str]) -> crate::util::Run {
    let mut all: Vec<&str> = vec!["--json"];
    all.extend(args);
    all.extend(strs(addr));
    lakedrill(&all)
}

fn snapshot_ids(addr: &[String]) -> Vec<i64> {
    run(addr, &["inspect", "snapshots"]).expect_code(0).json()["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot_id"].as_i64().unwrap())
        .collect()
}

fn files(addr: &[String], snapshot: i64) -> Vec<Value> {
    run(addr, &["inspect", "files", "--snapshot-id", &snapshot.to_string()])
        .expect_code(0)
        .json()["files"]
        .as_array()
        .unwrap()
        .clone()
}

fn public_keys(keys: &Path) -> PathBuf {
    let trust = keys.join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    for e in std::fs::read_dir(keys).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pub") {
            std::fs::copy(&p, trust.join(p.file_name().unwrap())).unwrap();
        }
    }
    trust
}

/// Seals every snapshot and deep-restores each bundle: all `RESTORE_VERIFIED`; each seal's object count
/// and bytes are those of the distinct paths `inspect files` lists (a Puffin file once). Returns the
/// bundles by snapshot.
fn seal_and_restore_all(addr: &[String], scratch: &Path) -> BTreeMap<i64, String> {
    let (key, keys) = keygen(scratch, "v3-TEST-ONLY");
    let trust = public_keys(&keys);
    let ids = snapshot_ids(addr);
    assert!(ids.len() >= 3, "{ids:?}");
    let mut bundles = BTreeMap::new();
    for id in ids {
        let live = files(addr, id);
        let distinct: BTreeMap<&str, u64> = live
            .iter()
            .map(|f| {
                (
                    f["file_path"].as_str().unwrap(),
                    f["file_size_in_bytes"].as_u64().unwrap(),
                )
            })
            .collect();
        let s = seal(&strs(addr), id, &key, &scratch.join("bundles"))
            .expect_code(0)
            .json();
        let manifests = run(addr, &["inspect", "manifests", "--snapshot-id", &id.to_string()])
            .expect_code(0)
            .json()["manifests"]
            .as_array()
            .unwrap()
            .len();
        // metadata.json + manifest list + manifests + each distinct file.
        assert_eq!(
            s["objects"].as_u64().unwrap() as usize,
            2 + manifests + distinct.len(),
            "{id}: {s}"
        );
        let r = restore(
            s["uri"].as_str().unwrap(),
            &trust,
            &["--deep", "--table-root", &addr[3]],
        )
        .expect_code(0)
        .json();
        assert_eq!(r["status"], "RESTORE_VERIFIED", "{id}: {r}");
        let data_bytes: u64 = distinct.values().sum();
        assert!(r["bytes_verified"].as_u64().unwrap() >= data_bytes, "{id}: {r}");
        bundles.insert(id, s["uri"].as_str().unwrap().to_owned());
    }
    bundles
}

#[test]
fn v3_inspect_files_lists_deletion_vector_fields() {
    let a = addr(&fixture(), "v6.metadata.json");
    let live = files(&a, CURRENT);
    let dvs: Vec<&Value> = live.iter().filter(|f| f["file_format"] == "PUFFIN").collect();
    assert_eq!(dvs.len(), 6, "{live:#?}");
    for dv in &dvs {
        assert_eq!(dv["content"], "position_deletes");
        let referenced = dv["referenced_data_file"].as_str().unwrap();
        assert!(
            live.iter()
                .any(|f| f["content"] == "data" && f["file_path"] == referenced),
            "{referenced} is not a live data file"
        );
        assert!(dv["content_offset"].as_i64().unwrap() >= 4, "{dv}");
        assert!(dv["content_size_in_bytes"].as_i64().unwrap() > 12, "{dv}");
    }
    let shared: Vec<&&Value> = dvs
        .iter()
        .filter(|f| f["file_path"].as_str().unwrap().ends_with(SHARED_PUFFIN))
        .collect();
    assert_eq!(shared.len(), 5, "five live vectors in one Puffin file");
    // Distinct blobs, each data file referenced once.
    let mut offsets: Vec<i64> = shared.iter().map(|f| f["content_offset"].as_i64().unwrap()).collect();
    offsets.dedup();
    assert_eq!(offsets.len(), 5);
    for f in live.iter().filter(|f| f["content"] == "data") {
        assert_eq!(f["file_format"], "PARQUET");
        assert!(f["referenced_data_file"].is_null());
    }
    // The human table carries the columns too.
    let mut args = vec!["inspect", "files"];
    args.extend(strs(&a));
    let human = lakedrill(&args).expect_code(0).stdout.clone();
    for col in [
        "file_format",
        "referenced_data_file",
        "content_offset",
        "content_size_in_bytes",
    ] {
        assert!(human.contains(col), "{human}");
    }
    assert!(human.contains("PUFFIN"), "{human}");
}

#[test]
fn v3_every_snapshot_seals_and_deep_restores_verified() {
    let tmp = tmpdir();
    seal_and_restore_all(&addr(&fixture(), "v6.metadata.json"), tmp.path());
}

/// Flips a bitmap byte of the shared Puffin file's blob at offset 4 (44 bytes: length, magic, the bitmap
/// from 12, the CRC at 44), live at every snapshot from the first delete on.
fn flip_shared_blob_byte(root: &Path) -> String {
    let p = root.join("data").join(SHARED_PUFFIN);
    let mut b = std::fs::read(&p).unwrap();
    b[20] ^= 0x01;
    std::fs::write(&p, b).unwrap();
    format!("/tmp/v3wh/db/t/data/{SHARED_PUFFIN}")
}

fn dv_findings(r: &Value) -> Vec<&Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "DELETION_VECTOR_INVALID")
        .collect()
}

#[test]
fn v3_flipped_blob_byte_refuses_seal_and_fails_deep_restore_of_a_healthy_bundle() {
    let tmp = tmpdir();
    let root = tmp.path().join("t");
    copy_tree(&fixture(), &root);
    let a = addr(&root, "v6.metadata.json");
    let (key, keys) = keygen(tmp.path(), "v3-TEST-ONLY");
    let trust = public_keys(&keys);
    let healthy = seal(&strs(&a), CURRENT, &key, &tmp.path().join("bundles"))
        .expect_code(0)
        .json();
    let puffin = flip_shared_blob_byte(&root);
    // Same size: only the vector checks can tell.
    let refused = seal(&strs(&a), CURRENT, &key, &tmp.path().join("bundles2"))
        .expect_code(1)
        .json();
    let f = dv_findings(&refused);
    assert_eq!(f.len(), 1, "{refused}");
    assert_eq!(f[0]["path"], puffin.as_str());
    assert!(
        f[0]["expected"]
            .as_str()
            .unwrap()
            .starts_with("blob at offset 4, check crc"),
        "{refused}"
    );
    let r = restore(
        healthy["uri"].as_str().unwrap(),
        &trust,
        &["--deep", "--table-root", &a[3]],
    )
    .expect_code(1)
    .json();
    assert_eq!(r["status"], "FAILED");
    let f = dv_findings(&r);
    assert_eq!(f.len(), 1, "{r}");
    assert_eq!(f[0]["path"], puffin.as_str());
    assert!(
        f[0]["expected"]
            .as_str()
            .unwrap()
            .starts_with("blob at offset 4, check crc"),
        "{r}"
    );
    // Without --deep the digest alone tells (the blob is not named).
    let r = restore(healthy["uri"].as_str().unwrap(), &trust, &["--table-root", &a[3]])
        .expect_code(1)
        .json();
    assert!(dv_findings(&r).is_empty(), "{r}");
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "DIGEST_MISMATCH")
    );
}

/// A policy for the copied table `t` in `dir`.
fn write_policy(dir: &Path) -> PathBuf {
    let policy = dir.join("p.yaml");
    let binding = crate::util::table_binding("t", &fixture().join("metadata/v6.metadata.json").display().to_string());
    std::fs::write(
        &policy,
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: {binding}\nprotectedRefs: [main]\nminSnapshotAge: 1s\n\
             maxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n"
        ),
    )
    .unwrap();
    policy
}

/// Edits the current metadata as `edit` says, in a copy, and returns the copy's address.
fn edited_metadata(tmp: &Path, edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let root = tmp.join("t");
    copy_tree(&fixture(), &root);
    let p = root.join("metadata/v6.metadata.json");
    let mut md: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut md);
    std::fs::write(&p, serde_json::to_vec(&md).unwrap()).unwrap();
    addr(&root, "v6.metadata.json")
}

#[test]
fn v3_encrypted_metadata_exits_2_naming_encryption() {
    let keys_edit = |md: &mut Value| {
        md["encryption-keys"] = serde_json::json!([
            {"key-id": "k1", "encrypted-key-metadata": "AAAA", "encrypted-by-id": "kms-1"}
        ]);
    };
    let key_id_edit = |md: &mut Value| {
        md["snapshots"].as_array_mut().unwrap().last_mut().unwrap()["key-id"] = "k1".into();
    };
    for (name, edit) in [
        ("encryption-keys", &keys_edit as &dyn Fn(&mut Value)),
        ("snapshot key-id", &key_id_edit),
    ] {
        let tmp = tmpdir();
        let a = edited_metadata(tmp.path(), edit);
        let (key, _) = keygen(tmp.path(), "v3-TEST-ONLY");
        let policy = write_policy(tmp.path());
        let runs = [
            ("seal", seal(&strs(&a), CURRENT, &key, &tmp.path().join("b"))),
            ("plan", run(&a, &["plan", "--policy", policy.to_str().unwrap()])),
            ("inspect", run(&a, &["inspect", "files"])),
        ];
        for (cmd, r) in runs {
            r.expect_code(2);
            let said = format!("{}{}", r.stdout, r.stderr);
            assert!(said.contains("encryption"), "{name}: {cmd}: {said}");
            assert!(
                said.contains("f52e5c4a-ffac-42de-a819-aafed6372eec"),
                "{name}: {cmd}: the table is named: {said}"
            );
        }
    }
}

/// The Spark-written `v3_dv` table of this run (`scripts/test.sh` writes it); fails when the variable or the
/// table is missing: tests never skip.
fn spark_v3_table() -> (Vec<String>, Value) {
    let dir = std::env::var("LAKEDRILL_TEST_SPARK_FIXTURES").unwrap_or_else(|_| {
        panic!("LAKEDRILL_TEST_SPARK_FIXTURES is not set: run the suite through scripts/test.sh, which writes the Spark tables")
    });
    let oracle_path = Path::new(&dir).join("oracle.json");
    let oracle: Value = serde_json::from_slice(
        &std::fs::read(&oracle_path).unwrap_or_else(|e| panic!("{}: {e}", oracle_path.display())),
    )
    .unwrap();
    let t = oracle["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "v3_dv")
        .unwrap_or_else(|| panic!("{}: no table named v3_dv", oracle_path.display()))
        .clone();
    assert_eq!(t["format_version"], 3, "{t}");
    let a = vec![
        "--metadata".into(),
        t["metadata_location"].as_str().unwrap().to_owned(),
        "--table-root".into(),
        t["table_root"].as_str().unwrap().to_owned(),
    ];
    (a, t)
}

#[test]
fn v3_spark_table_of_this_run_seals_and_deep_restores_every_snapshot() {
    let (a, t) = spark_v3_table();
    let ids = snapshot_ids(&a);
    if let Some(counts) = t["snapshot_row_counts"].as_object() {
        for id in counts.keys() {
            assert!(
                ids.contains(&id.parse().unwrap()),
                "oracle snapshot {id} not listed: {ids:?}"
            );
        }
    }
    let dvs: usize = ids
        .iter()
        .map(|id| files(&a, *id).iter().filter(|f| f["file_format"] == "PUFFIN").count())
        .sum();
    assert!(dvs > 0, "the v3_dv table has no deletion vectors");
    let tmp = tmpdir();
    seal_and_restore_all(&a, tmp.path());
}

fn field<'a>(record: &'a mut apache_avro::types::Value, name: &str) -> &'a mut apache_avro::types::Value {
    let apache_avro::types::Value::Record(fields) = record else {
        panic!("not a record: {record:?}")
    };
    &mut fields.iter_mut().find(|(n, _)| n == name).unwrap().1
}

/// A union's value (`["null", T]`), or the value itself.
fn unboxed(v: &apache_avro::types::Value) -> &apache_avro::types::Value {
    match v {
        apache_avro::types::Value::Union(_, inner) => inner,
        other => other,
    }
}

/// Rewrites an Avro container file record by record with `edit` (same schema and user metadata, no codec);
/// returns the new length, or `None` when `edit` changed nothing (the file is left as it was).
fn rewrite_avro(path: &Path, mut edit: impl FnMut(&mut apache_avro::types::Value) -> bool) -> Option<u64> {
    let bytes = std::fs::read(path).unwrap();
    let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
    let schema = reader.writer_schema().clone();
    let metadata = reader.user_metadata().clone();
    let mut records: Vec<apache_avro::types::Value> = reader.map(Result::unwrap).collect();
    let mut changed = false;
    for r in &mut records {
        changed |= edit(r);
    }
    if !changed {
        return None;
    }
    let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), apache_avro::Codec::Null);
    for (k, v) in metadata {
        w.add_user_metadata(k, v).unwrap();
    }
    for r in records {
        w.append(r).unwrap();
    }
    let out = w.into_inner().unwrap();
    std::fs::write(path, &out).unwrap();
    Some(out.len() as u64)
}

#[test]
fn v3_edited_deletion_vector_record_count_is_a_finding() {
    let tmp = tmpdir();
    let root = tmp.path().join("t");
    copy_tree(&fixture(), &root);
    let a = addr(&root, "v6.metadata.json");
    let local = |written: &str| root.join(written.strip_prefix("/tmp/v3wh/db/t/").unwrap());
    let md: Value = serde_json::from_slice(&std::fs::read(root.join("metadata/v6.metadata.json")).unwrap()).unwrap();
    let snapshot = md["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["snapshot-id"] == CURRENT)
        .unwrap();
    let list = local(snapshot["manifest-list"].as_str().unwrap());
    // The vector at offset 4 of the shared Puffin file: 2 positions; the manifest is made to say 3, and its list
    // entry's rows count for the entry's status one more, as a writer that wrote that count would.
    let mut lengths = BTreeMap::new();
    let mut status = None;
    let entries: Vec<String> = {
        let bytes = std::fs::read(&list).unwrap();
        apache_avro::Reader::new(&bytes[..])
            .unwrap()
            .map(|r| {
                let mut r = r.unwrap();
                let apache_avro::types::Value::String(p) = field(&mut r, "manifest_path").clone() else {
                    panic!()
                };
                p
            })
            .collect()
    };
    for m in &entries {
        let edited = rewrite_avro(&local(m), |e| {
            let df = field(e, "data_file");
            let is_target = matches!(unboxed(field(df, "file_path")), apache_avro::types::Value::String(p) if p.ends_with(SHARED_PUFFIN))
                && matches!(unboxed(field(df, "content_offset")), apache_avro::types::Value::Long(4));
            if is_target && let apache_avro::types::Value::Long(n) = field(df, "record_count") {
                assert_eq!(*n, 2);
                *n = 3;
                if let apache_avro::types::Value::Int(s) = field(e, "status") {
                    status = Some(*s);
                }
                return true;
            }
            false
        });
        if let Some(len) = edited {
            lengths.insert(m.clone(), len);
        }
    }
    assert_eq!(lengths.len(), 1, "one manifest holds the vector");
    rewrite_avro(&list, |m| {
        let apache_avro::types::Value::String(p) = field(m, "manifest_path").clone() else {
            panic!()
        };
        match (lengths.get(&p), field(m, "manifest_length")) {
            (Some(len), apache_avro::types::Value::Long(l)) => {
                *l = i64::try_from(*len).unwrap();
                let rows = match status {
                    Some(0) => "existing_rows_count",
                    Some(1) => "added_rows_count",
                    other => panic!("the vector's entry has status {other:?}"),
                };
                let apache_avro::types::Value::Long(n) = field(m, rows) else {
                    panic!("{rows} is a long")
                };
                *n += 1;
                true
            }
            _ => false,
        }
    })
    .unwrap();
    let live = files(&a, CURRENT);
    assert!(
        live.iter().any(|f| f["content_offset"] == 4
            && f["record_count"] == 3
            && f["file_path"].as_str().unwrap().ends_with(SHARED_PUFFIN)),
        "the edit took: {live:#?}"
    );
    let (key, _) = keygen(tmp.path(), "v3-TEST-ONLY");
    let refused = seal(&strs(&a), CURRENT, &key, &tmp.path().join("b"))
        .expect_code(1)
        .json();
    let f = dv_findings(&refused);
    assert_eq!(f.len(), 1, "{refused}");
    assert!(f[0]["path"].as_str().unwrap().ends_with(SHARED_PUFFIN), "{refused}");
    assert_eq!(
        f[0]["expected"], "blob at offset 4, check cardinality: 3 (the manifest's record_count)",
        "{refused}"
    );
    assert_eq!(f[0]["actual"], "2");
}

#[test]
fn v3_row_ids_past_next_row_id_are_a_deep_restore_finding() {
    let tmp = tmpdir();
    // The appends took ids [0, 30); a metadata file that says the next id is 25 would hand out 25..29 again.
    let a = edited_metadata(tmp.path(), |md| {
        assert_eq!(md["next-row-id"], 30);
        md["next-row-id"] = 25.into();
    });
    let (key, keys) = keygen(tmp.path(), "v3-TEST-ONLY");
    let trust = public_keys(&keys);
    let s = seal(&strs(&a), CURRENT, &key, &tmp.path().join("b"))
        .expect_code(0)
        .json();
    let r = restore(s["uri"].as_str().unwrap(), &trust, &["--deep", "--table-root", &a[3]])
        .expect_code(1)
        .json();
    let lineage: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "ROW_LINEAGE_INVALID")
        .collect();
    assert!(!lineage.is_empty(), "{r}");
    // The third append's snapshot range [20, 30) is named, with the metadata file as its path.
    assert!(
        lineage.iter().any(|f| f["expected"]
            .as_str()
            .unwrap()
            .contains("snapshot 4859039390790457476 below next-row-id 25")
            && f["actual"] == "[20, 30)"),
        "{r}"
    );
    assert!(lineage.iter().all(|f| f["kind"] == "ROW_LINEAGE_INVALID"));
    // Without --deep the lineage is not checked.
    let r = restore(s["uri"].as_str().unwrap(), &trust, &["--table-root", &a[3]])
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
}

#[test]
fn v3_plan_counts_a_puffin_file_of_several_vectors_once() {
    let tmp = tmpdir();
    // main rolled back to the last append: both deletes become expirable, with both Puffin files (one of them
    // named by six vector entries of one manifest).
    let a = edited_metadata(tmp.path(), |md| {
        md["current-snapshot-id"] = 4_859_039_390_790_457_476_i64.into();
        md["refs"] = serde_json::json!({"main": {"snapshot-id": 4_859_039_390_790_457_476_i64, "type": "branch"}});
    });
    let policy = write_policy(tmp.path());
    let plan = run(&a, &["plan", "--policy", policy.to_str().unwrap()])
        .expect_code(0)
        .json();
    let c = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "expired-snapshots")
        .unwrap_or_else(|| panic!("{plan}"));
    let objects = c["objects"].as_array().unwrap();
    let mut paths: Vec<&str> = objects.iter().map(|o| o["path"].as_str().unwrap()).collect();
    let n = paths.len();
    paths.sort_unstable();
    paths.dedup();
    assert_eq!(paths.len(), n, "an object twice: {c}");
    let puffins: Vec<&&str> = paths.iter().filter(|p| p.ends_with(".puffin")).collect();
    assert_eq!(puffins.len(), 2, "{c}");
    assert!(puffins.iter().any(|p| p.ends_with(SHARED_PUFFIN)));
    let bytes: u64 = objects.iter().map(|o| o["size"].as_u64().unwrap()).sum();
    assert_eq!(c["bytes"].as_u64().unwrap(), bytes, "{c}");
    let shared = objects
        .iter()
        .find(|o| o["path"].as_str().unwrap().ends_with(SHARED_PUFFIN))
        .unwrap();
    assert_eq!(
        shared["size"].as_u64().unwrap(),
        std::fs::metadata(fixture().join("data").join(SHARED_PUFFIN))
            .unwrap()
            .len()
    );
    let plain = plan["plain_expire"]["objects"].as_array().unwrap();
    assert_eq!(
        plain
            .iter()
            .filter(|o| o.as_str().unwrap().ends_with(".puffin"))
            .count(),
        2,
        "{plan}"
    );
}

/// Format v3 types the iceberg crate cannot model (`variant`, `geometry`, …) need no reading for reachability:
/// such a table plans, seals and deep-restores; writing it back (`restore --into`, `recover`) is refused naming
/// the column rather than written with a wrong type.
#[test]
fn v3_a_variant_column_plans_and_seals_and_materializing_it_is_refused_naming_the_column() {
    let tmp = tmpdir();
    let a = edited_metadata(tmp.path(), |md| {
        for s in md["schemas"].as_array_mut().unwrap() {
            s["fields"].as_array_mut().unwrap().push(serde_json::json!(
                {"id": 99, "name": "payload", "required": false, "type": "variant"}
            ));
            s["fields"].as_array_mut().unwrap().push(serde_json::json!(
                {"id": 98, "name": "shape", "required": false, "type": "geometry(srid:4326)"}
            ));
        }
    });
    let (key, keys) = keygen(tmp.path(), "v3-TEST-ONLY");
    let policy = write_policy(tmp.path());
    let plan = run(&a, &["plan", "--policy", policy.to_str().unwrap()])
        .expect_code(0)
        .json();
    assert!(!plan["protected"].as_array().unwrap().is_empty(), "{plan}");
    let s = seal(&strs(&a), CURRENT, &key, &tmp.path().join("b"))
        .expect_code(0)
        .json();
    let bundle = s["uri"].as_str().unwrap().to_owned();
    let trust = public_keys(&keys);
    let r = restore(&bundle, &trust, &["--deep", "--table-root", &a[3]])
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    let into = tmp.path().join("rec");
    let r = lakedrill(&[
        "recover",
        "--from",
        &bundle,
        "--trust",
        trust.to_str().unwrap(),
        "--into",
        into.to_str().unwrap(),
    ]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("payload: variant") && r.stderr.contains("shape: geometry"),
        "{}",
        r.stderr
    );
    assert!(
        !into.exists() || std::fs::read_dir(&into).unwrap().next().is_none(),
        "nothing was written"
    );
}

/// `restore --into` registered what it wrote without the check `recover`
/// makes of it (the copy loaded as a reader would, its layers, objects and deletion vectors, a scan): now it runs
/// that check before it registers and reports it as `recover` does.
#[test]
fn v3_restore_into_checks_the_copy_and_its_deletion_vectors_before_it_registers() {
    let tmp = tmpdir();
    let dir = tmp.path();
    std::fs::write(
        dir.join("lakedrill.toml"),
        format!(
            "[catalog.dr]\ntype = \"sql\"\nuri = \"sqlite:{d}/dr.db\"\nwarehouse = \"file://{d}/rec\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let a = addr(&fixture(), "v6.metadata.json");
    let (key, keys) = keygen(dir, "v3-TEST-ONLY");
    let s = seal(&strs(&a), CURRENT, &key, &dir.join("bundles"))
        .expect_code(0)
        .json();
    let trust = public_keys(&keys);
    let into = dir.join("rec/v3");
    let r = crate::util::lakedrill_in(
        dir,
        &[
            "--json",
            "restore",
            s["uri"].as_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--catalog",
            "dr",
            "--table",
            "db.v3",
        ],
    );
    let v = r.expect_code(0).json();
    assert_eq!(v["status"], "RESTORED", "{v}");
    assert!(v["deletion_vectors_checked"].as_u64().unwrap_or(0) > 0, "{v}");
    assert_eq!(v["findings"], serde_json::json!([]), "{v}");
    assert!(
        v["scan"].as_str().is_some_and(|s| s.contains("deletion vectors")),
        "{v}"
    );
}
