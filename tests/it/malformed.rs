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
/// in exit 0 (a flipped bit that changed nothing lakedrill reads) or 2 (refused), and `lakedrill_in` fails on
/// exit 101. A truncation is always refused: a metadata file cut short is not JSON, and a manifest list cut short
/// either ends inside a block (its framing) or loses manifests the snapshot's summary totals count (before, a list
/// cut at a block boundary read as fewer manifests, exit 0).
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
        // The list is snapshot 3119545726281138740's: its files are what reads it.
        let mut args = vec!["inspect", "files", "--metadata", t.to_str().unwrap()];
        if i % 2 == 1 {
            args.extend(["--snapshot-id", "3119545726281138740"]);
        }
        let r = lakedrill(&args);
        if i % 4 < 2 {
            assert_eq!(
                r.code, 2,
                "run {i}: truncated to {n} bytes, exit {}\n{}",
                r.code, r.stderr
            );
        } else {
            assert!(r.code == 0 || r.code == 2, "run {i}: exit {}\n{}", r.code, r.stderr);
        }
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

/// The Spark-written v3 deletion-vector table of the fixtures, copied to `dir/t`: its folder and its address
/// (`--metadata …/v6.metadata.json --table-root …`).
fn v3_copy(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/lakedrill-spark/v3_dv");
    let root = dir.join("t");
    copy_tree(&src, &root);
    let addr = vec![
        "--metadata".to_owned(),
        root.join("metadata/v6.metadata.json").display().to_string(),
        "--table-root".to_owned(),
        root.display().to_string(),
    ];
    (root, addr)
}

/// The v3 table's current snapshot.
const V3_CURRENT: &str = "2945519146151961459";

/// A policy for the copied table `t` whose metadata file is `metadata`, in `dir`.
pub(crate) fn policy_for(dir: &Path, name: &str, metadata: &Path) -> std::path::PathBuf {
    let policy = dir.join("p.yaml");
    let binding = crate::util::table_binding(name, &metadata.display().to_string());
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

/// Sets the modification time of every file under `dir` three days back: any file no snapshot references is then
/// old enough to be an orphan candidate.
pub(crate) fn backdate(dir: &Path) {
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(3 * 86_400);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            backdate(&p);
        } else {
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(then)
                .unwrap();
        }
    }
}

/// The datum count of the first block of the Avro file `path` set to `count`, written in as many bytes as the old
/// one (a flipped bit: the file keeps its length); returns the old count.
fn set_first_block_count(path: &Path, count: i64) -> i64 {
    fn long(b: &[u8], at: &mut usize) -> i64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let x = b[*at];
            *at += 1;
            v |= u64::from(x & 0x7f) << shift;
            shift += 7;
            if x & 0x80 == 0 {
                break;
            }
        }
        #[allow(clippy::cast_possible_wrap)]
        let v = ((v >> 1) as i64) ^ -((v & 1) as i64);
        v
    }
    let mut b = std::fs::read(path).unwrap();
    let mut at = 4;
    loop {
        let mut n = long(&b, &mut at);
        if n == 0 {
            break;
        }
        if n < 0 {
            n = -n;
            long(&b, &mut at);
        }
        for _ in 0..2 * n {
            let len = usize::try_from(long(&b, &mut at)).unwrap();
            at += len;
        }
    }
    at += 16;
    let start = at;
    let old = long(&b, &mut at);
    assert!(
        (0..64).contains(&count) && (0..64).contains(&old),
        "one-byte counts only"
    );
    #[allow(clippy::cast_sign_loss)]
    let zigzag = (count << 1) as u8;
    b[start] = zigzag;
    let len = b.len();
    std::fs::write(path, &b).unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), len as u64);
    old
}

/// See: the review of 2026-12-07, item 2. One flipped bit takes the datum count of a manifest's only block from 1
/// to 0; the file keeps its length, so the manifest list's length check passes. apache-avro reads a count of 0 as
/// the end of the file, and the fast decoder's refusal (bytes left in the block) fell back to it: `inspect files`
/// exited 0 listing none of the manifest's files, and `plan` proposed the current snapshot's file as an orphan.
/// Now both exit 2 naming the manifest, and nothing is proposed.
#[test]
fn a_manifest_block_count_lowered_to_zero_is_refused_and_nothing_is_proposed() {
    let tmp = crate::util::tmpdir();
    let (root, addr) = v3_copy(tmp.path());
    let m1 = root.join("metadata/d27c4e91-5196-478e-989f-02147492ac35-m1.avro");
    assert_eq!(set_first_block_count(&m1, 0), 1);
    backdate(&root);
    let policy = policy_for(tmp.path(), "t", &root.join("metadata/v6.metadata.json"));
    let with = |args: &[&str]| {
        let mut all: Vec<&str> = vec!["--json"];
        all.extend(args);
        all.extend(addr.iter().map(String::as_str));
        lakedrill(&all)
    };
    let r = with(&["inspect", "files", "--snapshot-id", V3_CURRENT]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("-m1.avro") && r.stderr.contains("datum"),
        "{}",
        r.stderr
    );
    let r = with(&["plan", "--policy", policy.to_str().unwrap()]);
    r.expect_code(2);
    assert!(r.stderr.contains("-m1.avro"), "{}", r.stderr);
    assert!(!r.stdout.contains("candidate_id"), "{}", r.stdout);
}

/// The same lowered count in the current snapshot's manifest list (5 manifests in one block, read as 4): refused
/// by the walk and by `inspect`, naming the list.
#[test]
fn a_manifest_list_block_count_lowered_by_one_is_refused() {
    let tmp = crate::util::tmpdir();
    let (root, addr) = v3_copy(tmp.path());
    let list = root.join("metadata/snap-2945519146151961459-1-d27c4e91-5196-478e-989f-02147492ac35.avro");
    assert_eq!(set_first_block_count(&list, 4), 5);
    backdate(&root);
    let policy = policy_for(tmp.path(), "t", &root.join("metadata/v6.metadata.json"));
    for args in [
        vec!["inspect", "manifests", "--snapshot-id", V3_CURRENT],
        vec!["plan", "--policy", policy.to_str().unwrap()],
    ] {
        let mut all = args.clone();
        all.extend(addr.iter().map(String::as_str));
        let r = lakedrill(&all);
        r.expect_code(2);
        assert!(r.stderr.contains("snap-2945519146151961459"), "{args:?}: {}", r.stderr);
    }
}

/// See: the review of 2026-12-07, item 3. A manifest list has no length recorded anywhere, and one cut right after
/// its header decodes cleanly as no manifests: `plan` exited 0 proposing the current snapshot's data files and
/// manifests as orphans. The snapshot summary's totals are what the list must reach: exit 2 naming the snapshot
/// and the list, and nothing proposed. A list cut inside a block is refused by its framing (the file must end
/// right after a whole block).
#[test]
fn a_manifest_list_cut_after_its_header_or_inside_a_block_is_refused() {
    let tmp = crate::util::tmpdir();
    let (root, addr) = v3_copy(tmp.path());
    let list = root.join("metadata/snap-2945519146151961459-1-d27c4e91-5196-478e-989f-02147492ac35.avro");
    let whole = std::fs::read(&list).unwrap();
    let policy = policy_for(tmp.path(), "t", &root.join("metadata/v6.metadata.json"));
    // The header ends with the sync marker that also ends the file's last block.
    let sync = &whole[whole.len() - 16..];
    let header = whole.windows(16).position(|w| w == sync).unwrap() + 16;
    for (cut, needle) in [(header, "total-"), (whole.len() - 1, "cut short")] {
        std::fs::write(&list, &whole[..cut]).unwrap();
        backdate(&root);
        for args in [
            vec!["inspect", "files", "--snapshot-id", V3_CURRENT],
            vec!["--json", "plan", "--policy", policy.to_str().unwrap()],
        ] {
            let mut all = args.clone();
            all.extend(addr.iter().map(String::as_str));
            let r = lakedrill(&all);
            r.expect_code(2);
            assert!(
                r.stderr.contains("snap-2945519146151961459") && r.stderr.contains(needle),
                "cut at {cut}: {args:?}: {}",
                r.stderr
            );
            assert!(!r.stdout.contains("candidate_id"), "{}", r.stdout);
        }
    }
}

/// A writer that left a summary total too high (carried into every later snapshot) made every plan of the table
/// exit 2 forever, with no way for an operator who knows the bug to go on. `[[summary_excess."<uuid>"]]` accepts
/// exactly that excess from the first snapshot that carries it: the plan goes on and says so; another excess, a
/// list that loses manifests under the accepted excess, or a malformed entry is still refused.
#[test]
fn a_summary_total_left_too_high_is_accepted_only_as_exactly_the_configured_excess() {
    let tmp = crate::util::tmpdir();
    let (root, addr) = v3_copy(tmp.path());
    let metadata = root.join("metadata/v6.metadata.json");
    let policy = policy_for(tmp.path(), "t", &metadata);
    // From the third snapshot on, total-data-files is 2 above what the manifests hold.
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&metadata).unwrap()).unwrap();
    let first_ms = doc["snapshots"][2]["timestamp-ms"].as_i64().unwrap();
    let first_id = doc["snapshots"][2]["snapshot-id"].as_i64().unwrap();
    for s in doc["snapshots"].as_array_mut().unwrap() {
        if s["timestamp-ms"].as_i64().unwrap() >= first_ms {
            let t: u64 = s["summary"]["total-data-files"].as_str().unwrap().parse().unwrap();
            s["summary"]["total-data-files"] = serde_json::Value::String((t + 2).to_string());
        }
    }
    std::fs::write(&metadata, serde_json::to_vec(&doc).unwrap()).unwrap();
    backdate(&root);
    let uuid = crate::util::table_uuid(metadata.to_str().unwrap());
    let since = chrono::DateTime::from_timestamp_millis(first_ms).unwrap().to_rfc3339();
    let plan = |config: Option<&str>| {
        let cfg = tmp.path().join("lakedrill.toml");
        std::fs::write(&cfg, config.unwrap_or("")).unwrap();
        let mut all = vec![
            "--config",
            cfg.to_str().unwrap(),
            "--json",
            "plan",
            "--policy",
            policy.to_str().unwrap(),
        ];
        all.extend(addr.iter().map(String::as_str));
        lakedrill(&all)
    };
    let entry_of = |snapshot: i64, since: &str, total: &str, excess: u64| {
        format!(
            "[[summary_excess.\"{uuid}\"]]\nsnapshot = {snapshot}\nsince = \"{since}\"\ntotal = \"{total}\"\nexcess = {excess}\nreason = \"writer X over-counted a rewrite\"\n"
        )
    };
    let entry = |since: &str, total: &str, excess: u64| entry_of(first_id, since, total, excess);
    // Without the setting: exit 2, naming the total and the setting that would accept it.
    let r = plan(None);
    r.expect_code(2);
    assert!(
        r.stderr.contains("total-data-files of 8")
            && r.stderr.contains(&format!("[[summary_excess.\"{uuid}\"]]"))
            && r.stderr.contains("excess = 2"),
        "{}",
        r.stderr
    );
    // Exactly the excess, from the first snapshot that carries it: the plan goes on and says so (the key spelt in
    // capitals names the same table).
    let r = plan(Some(
        &entry(&since, "total-data-files", 2).replace(&uuid, &uuid.to_uppercase()),
    ));
    r.expect_code(0);
    let r = plan(Some(&entry(&since, "total-data-files", 2)));
    r.expect_code(0);
    let out: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(
        out["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains(&format!("summary_excess.\"{uuid}\"[0]"))
            && w.as_str().unwrap().contains("writer X over-counted")),
        "{}",
        r.stdout
    );
    // Another excess, a first snapshot the current one does not descend from (its line reaches a snapshot
    // committed before the entry's time first), or another total: still refused.
    for (config, needle) in [
        (entry(&since, "total-data-files", 3), "accepts an excess of exactly 3"),
        (entry_of(12_345, &since, "total-data-files", 2), "excess = 2"),
        (entry(&since, "total-records", 2), "total-data-files of 8"),
    ] {
        let r = plan(Some(&config));
        r.expect_code(2);
        assert!(r.stderr.contains(needle), "{config}: {}", r.stderr);
    }
    // Malformed entries are refused naming the setting.
    for (config, needle) in [
        (entry(&since, "total-data-files", 0), "excess = 0"),
        (entry(&since, "total-files", 2), "must be one of"),
        (entry("yesterday", "total-data-files", 2), "not an RFC 3339 time"),
        (
            entry(&since, "total-data-files", 2).replace(&uuid, "orders"),
            "must be the table's UUID",
        ),
    ] {
        let r = plan(Some(&config));
        r.expect_code(2);
        assert!(
            r.stderr.contains(needle) && r.stderr.contains("summary_excess"),
            "{config}: {}",
            r.stderr
        );
    }
    // Under the accepted excess, a current manifest list that loses its manifests is still refused.
    let list = root.join("metadata/snap-2945519146151961459-1-d27c4e91-5196-478e-989f-02147492ac35.avro");
    let whole = std::fs::read(&list).unwrap();
    let sync = &whole[whole.len() - 16..];
    let header = whole.windows(16).position(|w| w == sync).unwrap() + 16;
    std::fs::write(&list, &whole[..header]).unwrap();
    backdate(&root);
    let r = plan(Some(&entry(&since, "total-data-files", 2)));
    r.expect_code(2);
    assert!(
        r.stderr.contains("snap-2945519146151961459") && r.stderr.contains("accepts an excess of exactly 2"),
        "{}",
        r.stderr
    );
    assert!(!r.stdout.contains("candidate_id"), "{}", r.stdout);
}

/// A format-v1 table written without a `table-uuid` (or naming the nil UUID) has no identity the registry can key
/// it by: every such table would share one, and a lease, hold or candidate of one be taken for another's. Refused
/// naming the field; the same document with its UUID is read.
#[test]
fn a_v1_table_without_a_table_uuid_is_refused_naming_the_field() {
    let tmp = crate::util::tmpdir();
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(apache("TableMetadataV1Valid.json")).unwrap()).unwrap();
    let with = tmp.path().join("with/metadata/v1.metadata.json");
    std::fs::create_dir_all(with.parent().unwrap()).unwrap();
    std::fs::write(&with, serde_json::to_vec(&doc).unwrap()).unwrap();
    let r = lakedrill(&[
        "inspect",
        "snapshots",
        "--metadata",
        with.to_str().unwrap(),
        "--table-root",
        "/tmp/nowhere",
    ]);
    r.expect_code(0);
    for (name, uuid) in [("without", None), ("nil", Some("00000000-0000-0000-0000-000000000000"))] {
        let mut doc = doc.clone();
        match uuid {
            None => drop(doc.as_object_mut().unwrap().remove("table-uuid")),
            Some(u) => doc["table-uuid"] = serde_json::Value::String(u.to_owned()),
        }
        let p = tmp.path().join(name).join("metadata/v1.metadata.json");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, serde_json::to_vec(&doc).unwrap()).unwrap();
        let r = lakedrill(&[
            "inspect",
            "snapshots",
            "--metadata",
            p.to_str().unwrap(),
            "--table-root",
            "/tmp/nowhere",
        ]);
        r.expect_code(2);
        assert!(
            r.stderr.contains("v1.metadata.json") && r.stderr.contains("has no table-uuid"),
            "{name}: {}",
            r.stderr
        );
    }
}
