//! Keys, sealed bundles, restore verification, drills and audits, end to end through the binary.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{copy_tree, expected, generated, interop, lakedrill, lakedrill_in, tmpdir};

/// A test key pair in `dir/keys` (name marks it as test-only).
pub(crate) fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let keys = dir.join(format!("keys-{name}"));
    let r = lakedrill(&["--json", "keygen", "--name", name, "--dir", keys.to_str().unwrap()])
        .expect_code(0)
        .json();
    (PathBuf::from(r["private_key"].as_str().unwrap()), keys)
}

pub(crate) fn seal(addr: &[&str], snapshot: i64, key: &Path, out: &Path) -> crate::util::Run {
    let id = snapshot.to_string();
    let mut args = vec!["--json", "seal"];
    args.extend(addr);
    args.extend([
        "--snapshot-id",
        &id,
        "--key",
        key.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    lakedrill(&args)
}

pub(crate) fn restore(bundle: &str, trust: &Path, extra: &[&str]) -> crate::util::Run {
    let mut args = vec!["--json", "restore", bundle, "--trust", trust.to_str().unwrap()];
    args.extend(extra);
    lakedrill(&args)
}

fn snapshot_ids(addr: &[&str]) -> Vec<i64> {
    let mut args = vec!["--json", "inspect", "snapshots"];
    args.extend(addr);
    lakedrill(&args).expect_code(0).json()["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot_id"].as_i64().unwrap())
        .collect()
}

fn finding_kinds(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn keygen_writes_a_private_key_0600_and_never_overwrites() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tmpdir();
    let (key, keys) = keygen(tmp.path(), "unit-TEST-ONLY");
    assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(keys.join("unit-TEST-ONLY.pub").exists());
    let before = std::fs::read(&key).unwrap();
    let r = lakedrill(&["keygen", "--name", "unit-TEST-ONLY", "--dir", keys.to_str().unwrap()]);
    r.expect_code(2);
    assert!(r.stderr.contains("unit-TEST-ONLY.key"), "{}", r.stderr);
    assert_eq!(std::fs::read(&key).unwrap(), before);
    assert!(!r.stdout.contains("PRIVATE") && !r.stderr.contains("PRIVATE"));
}

#[test]
fn every_snapshot_of_generated_and_interop_tables_seals_and_restores_deeply() {
    let tmp = tmpdir();
    let (key, trust) = keygen(tmp.path(), "seal-TEST-ONLY");
    let out = tmp.path().join("bundles");
    let mut addrs: Vec<Vec<String>> = ["db.events", "db.legacy"]
        .iter()
        .map(|t| {
            vec![
                "--metadata".to_owned(),
                expected(t)["metadata_location"].as_str().unwrap().to_owned(),
            ]
        })
        .collect();
    for case in [
        "spark-v2-position-deletes",
        "spark-v1",
        "java-v2-equality-deletes-partitioned",
        "spark-v2-relative-location",
        "spark-v2-equality-deletes-broken-history",
    ] {
        let exp: Value =
            serde_json::from_slice(&std::fs::read(interop().join("expected").join(format!("{case}.json"))).unwrap())
                .unwrap();
        addrs.push(vec![
            "--metadata".to_owned(),
            interop()
                .join(exp["table_root"].as_str().unwrap())
                .display()
                .to_string(),
        ]);
    }
    let mut sealed = 0;
    for addr in &addrs {
        let addr: Vec<&str> = addr.iter().map(String::as_str).collect();
        for id in snapshot_ids(&addr) {
            let r = seal(&addr, id, &key, &out);
            if id == 7_342_794_868_382_145_167 {
                // The historic snapshot whose manifest list is missing upstream cannot be sealed.
                r.expect_code(2);
                assert!(
                    r.stderr.contains("snap-7342794868382145167-1-34f7dec7") && r.stderr.contains("does not exist"),
                    "{}",
                    r.stderr
                );
                continue;
            }
            let s = r.expect_code(0).json();
            let bundle = s["uri"].as_str().unwrap();
            let v = restore(bundle, &trust, &["--deep"]).expect_code(0).json();
            assert_eq!(v["status"], "RESTORE_VERIFIED", "{v}");
            assert_eq!(v["objects_verified"], s["objects"], "{v}");
            assert_eq!(v["bytes_verified"], s["bytes"], "{v}");
            assert_eq!(v["bundle_root"], s["bundle_root"]);
            sealed += 1;
        }
    }
    assert!(sealed >= 30, "only {sealed} snapshots sealed");
}

/// A copy of the Spark position-deletes table, a key, and a sealed bundle of its current snapshot.
pub(crate) struct Sealed {
    _tmp: tempfile::TempDir,
    table: PathBuf,
    pub(crate) trust: PathBuf,
    key: PathBuf,
    pub(crate) bundle: PathBuf,
    seal: Value,
}

pub(crate) fn sealed_pos_table() -> Sealed {
    let tmp = tmpdir();
    let table = tmp.path().join("t");
    copy_tree(
        &interop().join("tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table"),
        &table,
    );
    let (key, trust) = keygen(tmp.path(), "fault-TEST-ONLY");
    let addr = ["--metadata", table.to_str().unwrap()];
    let id = snapshot_ids(&addr).last().copied().unwrap();
    let current = lakedrill(&[
        "--json",
        "resolve",
        "--metadata",
        table.to_str().unwrap(),
        "--ref",
        "main",
    ])
    .expect_code(0)
    .json();
    assert_eq!(current["snapshot_id"].as_i64(), Some(id));
    let seal = seal(&addr, id, &key, &tmp.path().join("bundles")).expect_code(0).json();
    let bundle = PathBuf::from(seal["uri"].as_str().unwrap().trim_start_matches("file://"));
    Sealed {
        _tmp: tmp,
        table,
        trust,
        key,
        bundle,
        seal,
    }
}

fn data_file(s: &Sealed, content: &str) -> PathBuf {
    let files = lakedrill(&["--json", "inspect", "files", "--metadata", s.table.to_str().unwrap()])
        .expect_code(0)
        .json();
    let f = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["content"] == content)
        .unwrap();
    let rel = f["file_path"]
        .as_str()
        .unwrap()
        .strip_prefix("data/iceberg/generated_spec2_0_001/pyspark_iceberg_table/")
        .unwrap();
    s.table.join(rel)
}

fn expect_finding(s: &Sealed, trust: &Path, kind: &str) -> Value {
    let r = restore(s.bundle.to_str().unwrap(), trust, &["--deep"]);
    let v = r.expect_code(1).json();
    assert_eq!(v["status"], "FAILED");
    assert!(finding_kinds(&v).contains(&kind.to_owned()), "want {kind}: {v}");
    v
}

/// A bundle envelope over `max_metadata_bytes` is refused naming it and the limit (exit 2) before it is read whole
/// (review of 2026-12-07, R1-7: a file of gigabytes dropped in as an envelope was read into memory by every drill of
/// the folder). Within the limit it verifies.
#[test]
fn a_bundle_envelope_over_the_metadata_limit_is_refused_naming_it() {
    let s = sealed_pos_table();
    let size = std::fs::metadata(s.bundle.join("bundle.dsse.json")).unwrap().len();
    let config = s.bundle.parent().unwrap().join("limited.toml");
    let bundle = s.bundle.to_str().unwrap();
    for (limit, code) in [(size - 1, 2), (1 << 20, 0)] {
        std::fs::write(&config, format!("[storage]\nmax_metadata_bytes = {limit}\n")).unwrap();
        let r = lakedrill(&[
            "--config",
            config.to_str().unwrap(),
            "--json",
            "restore",
            bundle,
            "--trust",
            s.trust.to_str().unwrap(),
        ]);
        r.expect_code(code);
        if code == 2 {
            assert!(
                r.stderr.contains("bundle.dsse.json") && r.stderr.contains("max_metadata_bytes"),
                "{}",
                r.stderr
            );
        }
    }
}

/// A seal finding its bundle folder there already (a quarantine retried after it sealed) read the envelope standing
/// there whole, and so the inventory member's claim of an interrupted seal; `audit verify` of a bundle read the
/// retirement record beside it whole (review of 2026-12-07, bounded reads). A file of gigabytes under one of those
/// names was held in memory. Each is now read within `max_metadata_bytes`: one over it is refused naming it and the
/// limit (exit 2), not read whole.
#[test]
fn a_planted_envelope_claim_or_retirement_record_over_the_metadata_limit_is_refused_naming_it() {
    let s = sealed_pos_table();
    let config = s.bundle.parent().unwrap().join("limited.toml");
    std::fs::write(&config, "[storage]\nmax_metadata_bytes = 1048576\n").unwrap();
    let id = s.seal["snapshot_id"].as_i64().unwrap().to_string();
    let out = s.bundle.parent().unwrap().to_str().unwrap().to_owned();
    let reseal = || {
        lakedrill(&[
            "--config",
            config.to_str().unwrap(),
            "--json",
            "seal",
            "--metadata",
            s.table.to_str().unwrap(),
            "--snapshot-id",
            &id,
            "--key",
            s.key.to_str().unwrap(),
            "--out",
            &out,
        ])
    };
    let refused = |r: crate::util::Run, file: &str| {
        assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
        let said = format!("{}{}", r.stdout, r.stderr);
        assert!(
            said.contains(file) && said.contains("max_metadata_bytes"),
            "names {file} and the limit: {said}"
        );
    };
    let plant = |path: &Path| -> Vec<u8> {
        let held = std::fs::read(path).unwrap_or_default();
        let _ = std::fs::remove_file(path);
        std::fs::File::create(path).unwrap().set_len(8 << 20).unwrap();
        held
    };
    // Sealed again as it stands: the same bundle, nothing written.
    reseal().expect_code(0);

    let envelope = s.bundle.join("bundle.dsse.json");
    let held = plant(&envelope);
    refused(reseal(), "bundle.dsse.json");

    // An interrupted seal (no envelope) whose claim on the inventory member is a huge file.
    std::fs::remove_file(&envelope).unwrap();
    let claim = s.bundle.join("inventory.sha256");
    assert!(claim.exists(), "the seal claimed its inventory member");
    let claimed = plant(&claim);
    refused(reseal(), "inventory.sha256");
    std::fs::write(&claim, claimed).unwrap();
    std::fs::write(&envelope, held).unwrap();

    // A retirement record beside the bundle.
    let record = s.bundle.join("retired.dsse.json");
    plant(&record);
    refused(
        lakedrill(&[
            "--config",
            config.to_str().unwrap(),
            "--json",
            "audit",
            "verify",
            envelope.to_str().unwrap(),
            "--trust",
            s.trust.to_str().unwrap(),
        ]),
        "retired.dsse.json",
    );
}

#[test]
fn a_flipped_byte_in_a_data_file_is_a_digest_mismatch() {
    let s = sealed_pos_table();
    let f = data_file(&s, "data");
    let mut b = std::fs::read(&f).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 0x01;
    std::fs::write(&f, &b).unwrap();
    let v = expect_finding(&s, &s.trust, "DIGEST_MISMATCH");
    assert!(
        v["findings"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with(f.file_name().unwrap().to_str().unwrap())
    );
}

#[test]
fn a_deleted_data_file_and_a_deleted_delete_file_are_missing_objects() {
    let s = sealed_pos_table();
    std::fs::remove_file(data_file(&s, "data")).unwrap();
    std::fs::remove_file(data_file(&s, "position_deletes")).unwrap();
    let v = expect_finding(&s, &s.trust, "OBJECT_MISSING");
    assert_eq!(
        finding_kinds(&v).iter().filter(|k| *k == "OBJECT_MISSING").count(),
        2,
        "{v}"
    );
}

#[test]
fn a_grown_data_file_is_a_size_mismatch() {
    let s = sealed_pos_table();
    let f = data_file(&s, "data");
    let mut b = std::fs::read(&f).unwrap();
    b.extend_from_slice(b"appended");
    std::fs::write(&f, &b).unwrap();
    expect_finding(&s, &s.trust, "SIZE_MISMATCH");
}

pub(crate) fn manifest_copy(s: &Sealed) -> PathBuf {
    let inventory = crate::util::bundle_inventory(&s.bundle);
    let m = inventory.iter().find(|e| e["layer"] == "manifest").unwrap();
    s.bundle.join(m["copy"].as_str().unwrap())
}

fn read_statement(envelope: &Path) -> Value {
    use base64::Engine;
    let env: Value = serde_json::from_slice(&std::fs::read(envelope).unwrap()).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn an_altered_or_missing_manifest_copy_is_found() {
    let s = sealed_pos_table();
    let m = manifest_copy(&s);
    let mut b = std::fs::read(&m).unwrap();
    b[10] ^= 0x20;
    std::fs::write(&m, &b).unwrap();
    expect_finding(&s, &s.trust, "COPY_DIGEST_MISMATCH");
    std::fs::remove_file(&m).unwrap();
    expect_finding(&s, &s.trust, "COPY_MISSING");
}

// See: issue 24, points 1 and 2 — the inventory is a separate member, bound to the signed predicate by its digests.
#[test]
fn the_inventory_is_a_member_bound_by_its_digests_and_an_altered_or_missing_one_fails() {
    let s = sealed_pos_table();
    let env_path = s.bundle.join("bundle.dsse.json");
    let st = read_statement(&env_path);
    let p = &st["predicate"];
    // The envelope names the member and carries no inventory inline.
    assert!(p.get("inventory").is_none(), "{p}");
    let member_path = s.bundle.join("inventory.jsonl");
    let member = std::fs::read(&member_path).unwrap();
    assert_eq!(p["inventory_member"]["name"], "inventory.jsonl");
    assert_eq!(p["inventory_member"]["bytes"].as_u64(), Some(member.len() as u64));
    assert_eq!(p["inventory_member"]["objects"], p["objects"]);
    assert_eq!(
        p["inventory_member"]["sha256"].as_str().unwrap(),
        lakedrill::evidence::sha256_hex(&member)
    );
    assert_eq!(
        p["inventory_member"]["blake3"].as_str().unwrap(),
        blake3::hash(&member).to_hex().as_str()
    );
    // With standard tools: the signature, the member's size, lines and SHA-256, and the subject's SHA-256 over the
    // canonical lines recomputed by Python from the member (scripts/verify_report.py), and `sha256sum`.
    crate::util::verify_with_standard_tools(&env_path, &s.trust.join("fault-TEST-ONLY.pub"), s._tmp.path());
    let out = std::process::Command::new("sha256sum")
        .arg(&member_path)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(p["inventory_member"]["sha256"].as_str().unwrap()),
        "{out:?}"
    );
    restore(s.bundle.to_str().unwrap(), &s.trust, &["--deep"]).expect_code(0);

    // One byte of one entry's uri changed (not part of the root): the member no longer has its signed digests.
    let text = String::from_utf8(member.clone()).unwrap();
    let altered = text.replacen("file://", "file:/", 1);
    assert_eq!(altered.len() + 1, text.len());
    std::fs::write(&member_path, &altered).unwrap();
    let v = expect_finding(&s, &s.trust, "COPY_DIGEST_MISMATCH");
    let f = &v["findings"][0];
    assert_eq!(f["path"], "inventory.jsonl", "{v}");
    assert!(f["actual"].as_str().unwrap().contains("bytes"), "{v}");
    assert_eq!(v["objects_verified"], 0, "{v}");
    // The same size, one hex digit of a digest changed.
    let mut swapped = member.clone();
    let at = text.find("\"blake3\":\"").unwrap() + "\"blake3\":\"".len();
    swapped[at] = if swapped[at] == b'a' { b'b' } else { b'a' };
    std::fs::write(&member_path, &swapped).unwrap();
    let v = expect_finding(&s, &s.trust, "COPY_DIGEST_MISMATCH");
    assert!(
        v["findings"][0]["actual"].as_str().unwrap().contains("inventory.jsonl"),
        "{v}"
    );
    // Gone: COPY_MISSING, and the deleter's and recover's reads refuse it by name.
    std::fs::remove_file(&member_path).unwrap();
    let v = expect_finding(&s, &s.trust, "COPY_MISSING");
    assert!(v["findings"][0]["actual"].as_str().unwrap().contains("missing"), "{v}");
    // Back: verified again.
    std::fs::write(&member_path, &member).unwrap();
    restore(s.bundle.to_str().unwrap(), &s.trust, &["--deep"]).expect_code(0);

    // A re-signed predicate that also carries an inventory inline is refused: one or the other.
    let mut both = st.clone();
    both["predicate"]["inventory"] = Value::Array(crate::util::bundle_inventory(&s.bundle));
    resign(&s, "application/vnd.in-toto+json", &both);
    let v = expect_finding(&s, &s.trust, "COPY_DIGEST_MISMATCH");
    assert!(
        v["findings"][0]["actual"]
            .as_str()
            .unwrap()
            .contains("one or the other"),
        "{v}"
    );
}

#[test]
fn a_bundle_signed_by_an_untrusted_key_fails() {
    let s = sealed_pos_table();
    let other = tmpdir();
    let (_, other_trust) = keygen(other.path(), "other-TEST-ONLY");
    let v = expect_finding(&s, &other_trust, "BUNDLE_SIGNATURE");
    assert!(v["findings"][0]["actual"].as_str().unwrap().contains("trust"), "{v}");
}

/// Re-signs a modified statement with the bundle's own (trusted) key, so only the modification is tested.
fn resign(s: &Sealed, payload_type: &str, statement: &Value) {
    let key = lakedrill::evidence::keys::load_signing_key(&s.key).unwrap();
    let env = lakedrill::evidence::sign(payload_type, statement.to_string().as_bytes(), &key);
    std::fs::write(s.bundle.join("bundle.dsse.json"), env.to_json_bytes()).unwrap();
}

/// A validly signed predicate whose object count is absurd (a signer's bug) is a finding (exit 1): the verifier
/// reserved room for that many objects before checking the count against the inventory, and aborted (review of
/// 2026-12-07, R1-8: "capacity overflow", exit 2 at best).
#[test]
fn a_signed_object_count_beyond_reason_is_a_finding_not_an_abort() {
    let s = sealed_pos_table();
    let mut st = read_statement(&s.bundle.join("bundle.dsse.json"));
    st["predicate"]["objects"] = Value::from(u64::MAX / 2);
    resign(&s, "application/vnd.in-toto+json", &st);
    let r = restore(s.bundle.to_str().unwrap(), &s.trust, &["--deep"]);
    let v = r.expect_code(1).json();
    assert_eq!(v["status"], "FAILED", "{v}");
    assert!(r.stdout.contains("objects") || r.stdout.contains("inventory"), "{v}");
}

#[test]
fn a_changed_payload_type_or_subject_fails_even_when_re_signed() {
    let s = sealed_pos_table();
    let env_path = s.bundle.join("bundle.dsse.json");
    let original = std::fs::read(&env_path).unwrap();
    let st = read_statement(&env_path);

    // Tampered payload type without re-signing: the signature no longer covers it.
    let mut env: Value = serde_json::from_slice(&original).unwrap();
    env["payloadType"] = Value::String("application/json".into());
    std::fs::write(&env_path, serde_json::to_vec(&env).unwrap()).unwrap();
    expect_finding(&s, &s.trust, "BUNDLE_SIGNATURE");

    // Validly signed, wrong payload type.
    resign(&s, "application/json", &st);
    let v = expect_finding(&s, &s.trust, "BUNDLE_SIGNATURE");
    assert!(
        v["findings"][0]["actual"]
            .as_str()
            .unwrap()
            .contains("application/json"),
        "{v}"
    );

    // Validly signed, subject that does not match the inventory.
    let mut bad = st.clone();
    bad["subject"][0]["digest"]["sha256"] = Value::String("0".repeat(64));
    resign(&s, "application/vnd.in-toto+json", &bad);
    expect_finding(&s, &s.trust, "SUBJECT_MISMATCH");

    // Back to the original bytes: verified again.
    std::fs::write(&env_path, &original).unwrap();
    restore(s.bundle.to_str().unwrap(), &s.trust, &["--deep"]).expect_code(0);
}

#[test]
fn an_inventory_path_outside_the_table_is_never_opened() {
    let s = sealed_pos_table();
    let env_path = s.bundle.join("bundle.dsse.json");
    let mut st = read_statement(&env_path);
    // Point a data entry at a file outside the table, and make that file exist with the right bytes.
    let secret = s.table.parent().unwrap().join("secret.parquet");
    let mut inv = crate::util::bundle_inventory(&s.bundle);
    let e = inv.iter_mut().find(|e| e["layer"] == "data").unwrap();
    let orig = PathBuf::from(e["uri"].as_str().unwrap().trim_start_matches("file://"));
    std::fs::copy(&orig, &secret).unwrap();
    e["path"] = Value::String("data/iceberg/generated_spec2_0_001/pyspark_iceberg_table/../../secret.parquet".into());
    e["uri"] = Value::String(format!("file://{}", secret.display()));
    crate::util::rewrite_inventory(&s.bundle, &mut st, &inv);
    resign(&s, "application/vnd.in-toto+json", &st);
    // Make the secret unreadable: if lakedrill opened it, the finding would be READ_FAILED instead.
    std::fs::remove_file(&secret).unwrap();
    std::fs::create_dir(&secret).unwrap();
    let v = expect_finding(&s, &s.trust, "PATH_OUTSIDE_TABLE");
    assert!(
        !finding_kinds(&v).contains(&"READ_FAILED".to_owned())
            && !finding_kinds(&v).contains(&"OBJECT_MISSING".to_owned()),
        "{v}"
    );
}

/// A zigzag varint of Avro at `at`, which is moved past it.
fn avro_long(b: &[u8], at: &mut usize) -> i64 {
    let (mut n, mut shift) = (0u64, 0);
    loop {
        let x = b[*at];
        *at += 1;
        n |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (n >> 1) as i64 ^ -((n & 1) as i64)
}

fn put_avro_long(v: i64, out: &mut Vec<u8>) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A deflate Avro container file with `edit` applied to each block's decoded bytes: the header (schema and
/// metadata) is kept byte for byte, each block is compressed again and its size rewritten.
fn edit_avro_blocks(bytes: &[u8], edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    use std::io::{Read as _, Write as _};
    let mut at = 4;
    loop {
        let mut count = avro_long(bytes, &mut at);
        if count == 0 {
            break;
        }
        if count < 0 {
            count = -count;
            avro_long(bytes, &mut at);
        }
        for _ in 0..count * 2 {
            let len = avro_long(bytes, &mut at) as usize;
            at += len;
        }
    }
    at += 16;
    let mut out = bytes[..at].to_vec();
    while at < bytes.len() {
        let start = at;
        avro_long(bytes, &mut at);
        let count = bytes[start..at].to_vec();
        let size = avro_long(bytes, &mut at) as usize;
        let mut raw = Vec::new();
        flate2::read::DeflateDecoder::new(&bytes[at..at + size])
            .read_to_end(&mut raw)
            .unwrap();
        at += size;
        edit(&mut raw);
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw).unwrap();
        let z = z.finish().unwrap();
        out.extend_from_slice(&count);
        put_avro_long(z.len() as i64, &mut out);
        out.extend_from_slice(&z);
        out.extend_from_slice(&bytes[at..at + 16]);
        at += 16;
    }
    out
}

/// A live manifest entry outside the table location is never opened; when the inventory does not hold it either,
/// it is still a finding naming it (it was skipped as if the inventory check would report it, which judges only
/// what the inventory holds).
#[test]
fn a_manifest_entry_outside_the_table_and_absent_from_the_inventory_is_a_finding() {
    let s = sealed_pos_table();
    let env_path = s.bundle.join("bundle.dsse.json");
    let mut st = read_statement(&env_path);
    let mut inv = crate::util::bundle_inventory(&s.bundle);
    // Every data manifest's files moved to a sibling folder of the table (a path of the same length: only the
    // paths change), the copies re-hashed into the inventory and the bundle re-signed.
    let (inside, outside) = (
        b"pyspark_iceberg_table/data/".as_slice(),
        b"pyspark_iceberg_tabl_/data/".as_slice(),
    );
    let mut edited = 0;
    for e in inv.iter_mut().filter(|e| e["layer"] == "manifest") {
        let old = std::fs::read(s.bundle.join(e["copy"].as_str().unwrap())).unwrap();
        if !old.windows(12).any(|w| w == b"content\x08data") {
            continue;
        }
        let new = edit_avro_blocks(&old, |raw| {
            while let Some(i) = raw.windows(inside.len()).position(|w| w == inside) {
                raw[i..i + inside.len()].copy_from_slice(outside);
            }
        });
        let b3 = blake3::hash(&new).to_hex().to_string();
        std::fs::write(s.bundle.join(format!("copies/{b3}")), &new).unwrap();
        e["blake3"] = Value::String(b3.clone());
        e["size"] = Value::from(new.len());
        e["copy"] = Value::String(format!("copies/{b3}"));
        edited += 1;
    }
    assert!(edited > 0, "no data manifest in {inv:?}");
    crate::util::rewrite_inventory(&s.bundle, &mut st, &inv);
    resign(&s, "application/vnd.in-toto+json", &st);
    let v = restore(s.bundle.to_str().unwrap(), &s.trust, &[]).expect_code(1).json();
    let named: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"].as_str().unwrap().contains("pyspark_iceberg_tabl_/data/"))
        .collect();
    assert!(
        !named.is_empty()
            && named
                .iter()
                .all(|f| f["kind"] == "LAYER_MISSING" || f["kind"] == "PATH_OUTSIDE_TABLE"),
        "want a finding naming the outside path: {v}"
    );
    assert!(!finding_kinds(&v).contains(&"COPY_DIGEST_MISMATCH".to_owned()), "{v}");
}

/// `restore --shard I/N` matches the bundled manifests against its own objects only (#24): an inventory that
/// lacks an object a manifest names, holds one no manifest names, and declares another size than its manifest
/// gives findings that each come from exactly one share, and the shares' findings and counts together are
/// those of the whole restore.
#[test]
fn each_share_reports_the_manifest_mismatches_of_its_own_objects_and_the_shares_add_up_to_the_whole() {
    let s = sealed_pos_table();
    let env_path = s.bundle.join("bundle.dsse.json");
    let mut st = read_statement(&env_path);
    let mut inv = crate::util::bundle_inventory(&s.bundle);
    let dropped = inv.remove(inv.iter().position(|e| e["layer"] == "data").unwrap());
    // An object no manifest names: a copy of the dropped data file under another name, there in storage.
    let mut extra = dropped.clone();
    for field in ["path", "uri"] {
        let v = dropped[field].as_str().unwrap().replace(".parquet", "-extra.parquet");
        extra[field] = Value::String(v);
    }
    std::fs::copy(
        dropped["uri"].as_str().unwrap().trim_start_matches("file://"),
        extra["uri"].as_str().unwrap().trim_start_matches("file://"),
    )
    .unwrap();
    inv.push(extra.clone());
    let del = inv.iter_mut().find(|e| e["layer"] == "position_deletes").unwrap();
    del["size"] = Value::from(del["size"].as_u64().unwrap() + 1);
    let resized = del["path"].as_str().unwrap().to_owned();
    crate::util::rewrite_inventory(&s.bundle, &mut st, &inv);
    resign(&s, "application/vnd.in-toto+json", &st);

    let b = s.bundle.to_str().unwrap();
    let found = |v: &Value| -> Vec<(String, String)> {
        let mut f: Vec<(String, String)> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["kind"].as_str().unwrap().to_owned(),
                    f["path"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        f.sort();
        f
    };
    let whole = restore(b, &s.trust, &[]).expect_code(1).json();
    let want = found(&whole);
    for (kind, path) in [
        ("LAYER_MISSING", dropped["path"].as_str().unwrap()),
        ("EXTRA_OBJECT", extra["path"].as_str().unwrap()),
        ("SIZE_MISMATCH", resized.as_str()),
    ] {
        assert!(
            want.contains(&(kind.to_owned(), path.to_owned())),
            "{kind} {path}: {whole}"
        );
    }
    let mut shares = Vec::new();
    let mut verified = 0;
    for i in 0..4 {
        let r = restore(b, &s.trust, &["--shard", &format!("{i}/4")]);
        let code = r.code;
        let v = r.json();
        assert_eq!(code == 0, v["findings"].as_array().unwrap().is_empty(), "{v}");
        verified += v["objects_verified"].as_u64().unwrap();
        shares.extend(found(&v));
    }
    shares.sort();
    assert_eq!(shares, want, "the shares' findings, each once, are the whole restore's");
    assert_eq!(Some(verified), whole["objects_verified"].as_u64(), "{whole}");
}

#[test]
fn sealing_refuses_missing_data_wrong_sizes_truncated_manifests_and_missing_lists() {
    let s = sealed_pos_table();
    let addr = ["--metadata", s.table.to_str().unwrap()];
    let id = s.seal["snapshot_id"].as_i64().unwrap();
    let out = s.table.parent().unwrap().join("more-bundles");
    // A data file that grew: its size disagrees with the manifest entry.
    let f = data_file(&s, "data");
    let orig = std::fs::read(&f).unwrap();
    let mut grown = orig.clone();
    grown.push(0);
    std::fs::write(&f, &grown).unwrap();
    let r = seal(&addr, id, &s.key, &out);
    assert_eq!(r.expect_code(1).json()["findings"][0]["kind"], "SIZE_MISMATCH");
    // A missing data file.
    std::fs::remove_file(&f).unwrap();
    let r = seal(&addr, id, &s.key, &out);
    assert_eq!(r.expect_code(1).json()["findings"][0]["kind"], "OBJECT_MISSING");
    assert!(!out.exists(), "a refused seal writes nothing");
    std::fs::write(&f, &orig).unwrap();
    // A truncated manifest.
    let m = s.table.join("metadata/7c6f85be-3a33-4e3a-817d-7839fa44ff07-m0.avro");
    let mb = std::fs::read(&m).unwrap();
    std::fs::write(&m, &mb[..mb.len() - 100]).unwrap();
    let r = seal(&addr, id, &s.key, &out);
    r.expect_code(2);
    assert!(
        r.stderr.contains("7c6f85be-3a33-4e3a-817d-7839fa44ff07-m0.avro"),
        "{}",
        r.stderr
    );
    std::fs::write(&m, &mb).unwrap();
    // A missing manifest list.
    let ml = s
        .table
        .join("metadata/snap-3119545726281138740-1-e3f073e1-20d8-4831-b927-86100e4ad98c.avro");
    std::fs::remove_file(&ml).unwrap();
    let r = seal(&addr, 3_119_545_726_281_138_740, &s.key, &out);
    r.expect_code(2);
    assert!(r.stderr.contains("snap-3119545726281138740"), "{}", r.stderr);
}

#[test]
fn restore_reads_a_relocated_copy_with_table_root() {
    let s = sealed_pos_table();
    let moved = s.table.parent().unwrap().join("moved");
    std::fs::rename(&s.table, &moved).unwrap();
    let r = restore(s.bundle.to_str().unwrap(), &s.trust, &[]);
    assert!(finding_kinds(&r.expect_code(1).json()).contains(&"OBJECT_MISSING".to_owned()));
    restore(
        s.bundle.to_str().unwrap(),
        &s.trust,
        &["--deep", "--table-root", moved.to_str().unwrap()],
    )
    .expect_code(0);
}

/// Each finding of `r` is `kind` and names the object read (`uri`, under `root`) beside the path the metadata
/// writes (`path`, which ends with the same table-relative part and is not under `root`).
fn assert_read_under(r: &Value, kind: &str, root: &Path) {
    let root = format!("file://{}/", root.display());
    let findings = r["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{r}");
    for f in findings {
        assert_eq!(f["kind"], kind, "{f}");
        let uri = f["uri"]
            .as_str()
            .unwrap_or_else(|| panic!("names the object read: {f}"));
        let rel = uri
            .strip_prefix(&root)
            .unwrap_or_else(|| panic!("read under {root}: {f}"));
        let path = f["path"].as_str().unwrap();
        assert!(path.ends_with(rel) && !path.starts_with(&root), "{f}");
    }
}

// See: new-user review, finding 1: with `--table-root` (and for a bundle sealed with one) findings named the path
// the metadata writes, not the object that was read and was missing.
#[test]
fn findings_name_the_object_read_beside_the_path_written() {
    let s = sealed_pos_table();
    let tmp = tmpdir();
    let nowhere = tmp.path().join("nowhere");
    // restore --table-root: every data file is missing under the root given, and each finding says so.
    let r = restore(
        s.bundle.to_str().unwrap(),
        &s.trust,
        &["--table-root", nowhere.to_str().unwrap()],
    )
    .expect_code(1)
    .json();
    assert_read_under(&r, "OBJECT_MISSING", &nowhere);
    let human = lakedrill(&[
        "restore",
        s.bundle.to_str().unwrap(),
        "--trust",
        s.trust.to_str().unwrap(),
        "--table-root",
        nowhere.to_str().unwrap(),
    ]);
    human.expect_code(1);
    assert!(
        human
            .stdout
            .contains(&format!("OBJECT_MISSING file://{}/", nowhere.display())),
        "{}",
        human.stdout
    );

    // A bundle sealed from a copy with --table-root, restored as a drill does (the bundle says where): the files
    // removed from the copy are named in the copy.
    let copy = tmp.path().join("copy");
    copy_tree(&s.table, &copy);
    let id = s.seal["snapshot_id"].as_i64().unwrap();
    let md = [
        "--metadata",
        s.table.to_str().unwrap(),
        "--table-root",
        copy.to_str().unwrap(),
    ];
    let sealed = seal(&md, id, &s.key, &tmp.path().join("bundles")).expect_code(0).json();
    std::fs::remove_dir_all(copy.join("data")).unwrap();
    let r = restore(sealed["uri"].as_str().unwrap(), &s.trust, &[])
        .expect_code(1)
        .json();
    assert_read_under(&r, "OBJECT_MISSING", &copy);

    // seal --table-root of that copy again: refused, naming the objects read.
    let r = seal(&md, id, &s.key, &tmp.path().join("bundles")).expect_code(1).json();
    assert_eq!(r["status"], "REFUSED", "{r}");
    assert_read_under(&r, "OBJECT_MISSING", &copy);
}

/// The last progress line `label` printed on stderr.
fn last_progress<'a>(stderr: &'a str, label: &str) -> &'a str {
    stderr
        .lines()
        .rev()
        .find(|l| l.starts_with(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no {label} progress in {stderr}"))
}

// See: new-user review, finding 2: progress said `12/12 objects` where the result said 18 (the metadata layers were
// not counted), and a restore whose every object was missing still showed `12/12` as if done.
#[test]
fn progress_counts_what_the_result_counts_and_shows_failures() {
    let s = sealed_pos_table();
    let tmp = tmpdir();
    let addr = ["--metadata", s.table.to_str().unwrap()];
    let id = s.seal["snapshot_id"].as_i64().unwrap();
    let sealed = seal(&addr, id, &s.key, &tmp.path().join("bundles"));
    sealed.expect_code(0);
    let (j, n) = (sealed.json(), s.seal["objects"].as_u64().unwrap());
    assert_eq!(
        last_progress(&sealed.stderr, "seal"),
        format!("seal: {n}/{n} objects, {} bytes", j["bytes"])
    );

    let ok = restore(s.bundle.to_str().unwrap(), &s.trust, &[]);
    ok.expect_code(0);
    let r = ok.json();
    assert_eq!(r["objects_verified"].as_u64(), Some(n), "{r}");
    assert_eq!(
        last_progress(&ok.stderr, "verify"),
        format!("verify: {n}/{n} objects, {} bytes", r["bytes_verified"])
    );

    // Every data and delete object missing: counted as checked and failed, the bytes are the verified ones.
    let nowhere = tmp.path().join("nowhere");
    let bad = restore(
        s.bundle.to_str().unwrap(),
        &s.trust,
        &["--table-root", nowhere.to_str().unwrap()],
    );
    bad.expect_code(1);
    let r = bad.json();
    let failed = r["findings"].as_array().unwrap().len() as u64;
    assert_eq!(r["objects_verified"].as_u64(), Some(n - failed), "{r}");
    assert_eq!(
        last_progress(&bad.stderr, "verify"),
        format!(
            "verify: {n}/{n} objects ({failed} failed), {} bytes",
            r["bytes_verified"]
        )
    );
}

fn write_plan(dir: &Path, bundles: &Path, trust: &Path, key: &Path, seed: u64) -> PathBuf {
    let plan = dir.join("weekly.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"weekly-quarantine\"\nkind = \"quarantine\"\nbundles = \"{}\"\nsample = 30\nseed = {seed}\ntrust = \"{}\"\nkey = \"{}\"\nreports = \"{}\"\n",
            bundles.display(),
            trust.display(),
            key.display(),
            dir.join("reports").display()
        ),
    )
    .unwrap();
    plan
}

#[test]
fn a_weekly_drill_of_30_bundles_signs_a_verifiable_chained_report() {
    let tmp = tmpdir();
    let (key, trust) = keygen(tmp.path(), "drill-TEST-ONLY");
    let bundles = tmp.path().join("bundles");
    let md = expected("db.many")["metadata_location"].as_str().unwrap().to_owned();
    let addr = ["--metadata", md.as_str()];
    let ids = snapshot_ids(&addr);
    assert!(ids.len() >= 32);
    let mut uris = Vec::new();
    for id in &ids {
        uris.push(
            seal(&addr, *id, &key, &bundles).expect_code(0).json()["uri"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let plan = write_plan(tmp.path(), &bundles, &trust, &key, 20_261_129);
    let first = lakedrill_in(tmp.path(), &["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0)
        .json();
    let p = &first["predicate"];
    assert_eq!(p["summary"]["gate"], "PASS");
    assert_eq!(p["summary"]["passed"], 30);
    assert_eq!(p["sample"]["seed"], 20_261_129);
    assert_eq!(p["sample"]["population"], ids.len());
    assert_eq!(p["sample"]["selected"].as_array().unwrap().len(), 30);
    let mut distinct: Vec<&str> = p["sample"]["selected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 30, "sampled without replacement");
    assert_eq!(p["previous_report"], Value::Null);
    assert_eq!(p["drill"]["implementation_digest"].as_str().unwrap().len(), 64);
    // A quarantine bundle declares no recovery point: no RPO, but its history age behind the live head (the
    // current snapshot of db.many's newest metadata file).
    let mut args = vec!["--json", "inspect", "snapshots"];
    args.extend(addr);
    let snaps = lakedrill(&args).expect_code(0).json();
    let commits: std::collections::BTreeMap<i64, i64> = snaps["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["snapshot_id"].as_i64().unwrap(), s["timestamp_ms"].as_i64().unwrap()))
        .collect();
    let head = snaps["current_snapshot_id"].as_i64().unwrap();
    let mut oldest = 0.0_f64;
    for r in p["results"].as_array().unwrap() {
        assert_eq!(r["status"], "RESTORE_VERIFIED");
        assert!(r["rto_seconds"].as_f64().unwrap() >= 0.0);
        assert_eq!(r["rpo_seconds"], Value::Null, "{r}");
        let snap = r["snapshot_id"].as_i64().unwrap();
        let want = (commits[&head] - commits[&snap]) as f64 / 1000.0;
        assert_eq!(r["history_age_seconds"].as_f64(), Some(want), "{r}");
        let basis = r["history_age_basis"].as_str().unwrap();
        assert!(
            basis.starts_with(&format!("live head snapshot {head} committed ")),
            "{basis}"
        );
        oldest = oldest.max(want);
    }
    assert!(oldest > 0.0, "30 bundles of 32+ commits: some are behind the head");
    let report1 = PathBuf::from(first["report"].as_str().unwrap().trim_start_matches("file://"));
    assert!(
        report1.with_extension("").with_extension("txt").exists() || report1.to_str().unwrap().ends_with(".dsse.json")
    );

    // The generic tools (Python `cryptography` alone, OpenSSL over the PAE) verify it with nothing but the
    // public key.
    let pubkey = trust.join("drill-TEST-ONLY.pub");
    crate::util::verify_with_standard_tools(&report1, &pubkey, tmp.path());
    lakedrill(&[
        "audit",
        "verify",
        report1.to_str().unwrap(),
        "--trust",
        trust.to_str().unwrap(),
    ])
    .expect_code(0);
    // The selection recomputes from the recorded population and seed with the named sampler: a report re-signed
    // by another trusted key with another seed, or with a bundle dropped from its population, is a selection
    // mismatch.
    let st = lakedrill::evidence::peek_unverified(&std::fs::read(&report1).unwrap()).unwrap();
    assert_eq!(
        st["predicate"]["sample"]["sampler"],
        lakedrill::evidence::sample::SAMPLER
    );
    let (other_key, other_trust) = keygen(&tmp.path().join("other"), "other-TEST-ONLY");
    std::fs::copy(
        other_trust.join("other-TEST-ONLY.pub"),
        trust.join("other-TEST-ONLY.pub"),
    )
    .unwrap();
    let signer = lakedrill::evidence::keys::load_signing_key(&other_key).unwrap();
    // The population lists each bundle's root, and each drilled bundle's root is the one it lists.
    let sample = &st["predicate"]["sample"];
    let ids = sample["population_ids"].as_array().unwrap();
    let roots = sample["population_roots"].as_array().unwrap();
    assert_eq!(ids.len(), roots.len(), "{sample}");
    for r in st["predicate"]["results"].as_array().unwrap() {
        let at = ids.iter().position(|id| *id == r["bundle_id"]).unwrap();
        assert_eq!(roots[at], r["bundle_root"], "{r}");
        assert!(
            r["bundle_id"]
                .as_str()
                .unwrap()
                .ends_with(&roots[at].as_str().unwrap()[..16]),
            "{r}"
        );
    }
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit, &str); 3] = [
        (
            "seed",
            |st| st["predicate"]["sample"]["seed"] = Value::from(7_u64),
            "SAMPLE_MISMATCH",
        ),
        (
            "root",
            |st| {
                // The root listed for the first drilled bundle is another one.
                let first = st["predicate"]["results"][0]["bundle_id"].clone();
                let sample = &mut st["predicate"]["sample"];
                let at = sample["population_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .position(|id| *id == first)
                    .unwrap();
                sample["population_roots"][at] = Value::String("0".repeat(64));
            },
            "population lists its root as 0000",
        ),
        (
            "population",
            |st| {
                let sample = &mut st["predicate"]["sample"];
                let selected: Vec<String> = sample["selected"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect();
                let ids = sample["population_ids"].as_array_mut().unwrap();
                let dropped = ids
                    .iter()
                    .position(|v| !selected.contains(&v.as_str().unwrap().to_owned()))
                    .unwrap();
                ids.remove(dropped);
                sample["population_roots"].as_array_mut().unwrap().remove(dropped);
                sample["population"] = Value::from(sample["population_ids"].as_array().unwrap().len());
            },
            "SAMPLE_MISMATCH",
        ),
    ];
    for (what, edit, kind) in edits {
        let mut edited = st.clone();
        edit(&mut edited);
        let out = tmp.path().join(format!("resigned-{what}.dsse.json"));
        std::fs::write(
            &out,
            lakedrill::evidence::sign(
                lakedrill::evidence::PAYLOAD_TYPE,
                edited.to_string().as_bytes(),
                &signer,
            )
            .to_json_bytes(),
        )
        .unwrap();
        let a = lakedrill(&[
            "--json",
            "audit",
            "verify",
            out.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
        ]);
        a.expect_code(1);
        assert!(a.stdout.contains(kind), "{what}: want {kind}: {}", a.stdout);
    }
    std::fs::remove_file(trust.join("other-TEST-ONLY.pub")).unwrap();

    // A second run chains to the first.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second = lakedrill_in(tmp.path(), &["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0)
        .json();
    let sha1 = lakedrill::evidence::sha256_hex(&std::fs::read(&report1).unwrap());
    assert_eq!(second["predicate"]["previous_report"], Value::String(sha1));
    let report2 = PathBuf::from(second["report"].as_str().unwrap().trim_start_matches("file://"));
    let a = lakedrill(&[
        "--json",
        "audit",
        "verify",
        report2.to_str().unwrap(),
        "--trust",
        trust.to_str().unwrap(),
        "--chain",
    ])
    .expect_code(0)
    .json();
    assert_eq!(a["reports_checked"], 2);
    // --chain with a report that is not there exits 2 naming it, however well the rest of its folder verifies
    // (it said VERIFIED, reports_checked 2, for a mistyped name, and VERIFIED over 0 reports in an empty folder).
    let missing = report2.with_file_name("20990101T000000.000Z.dsse.json");
    let empty = tmp.path().join("no-reports-here");
    std::fs::create_dir_all(&empty).unwrap();
    for named in [missing, empty.join(report2.file_name().unwrap())] {
        let r = lakedrill(&[
            "audit",
            "verify",
            named.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--chain",
        ]);
        r.expect_code(2);
        assert!(
            r.stderr.contains(named.file_name().unwrap().to_str().unwrap()) && r.stderr.contains("does not exist"),
            "{}",
            r.stderr
        );
    }

    // A report of another plan, signed by the drill key, as the chain's newest file: the next run refuses to link to
    // it (exit 2 naming it and both plans); it linked, and every later drill forked from it.
    {
        use base64::Engine as _;
        let env: Value = serde_json::from_slice(&std::fs::read(&report2).unwrap()).unwrap();
        let payload = base64::engine::general_purpose::STANDARD
            .decode(env["payload"].as_str().unwrap())
            .unwrap();
        let mut st: Value = serde_json::from_slice(&payload).unwrap();
        st["predicate"]["drill"]["plan"] = Value::String("another-plan".into());
        let k = lakedrill::evidence::keys::load_signing_key(&key).unwrap();
        let foreign = report2.with_file_name("zzzz.dsse.json");
        std::fs::write(
            &foreign,
            lakedrill::evidence::sign(lakedrill::evidence::PAYLOAD_TYPE, st.to_string().as_bytes(), &k).to_json_bytes(),
        )
        .unwrap();
        let r = lakedrill_in(tmp.path(), &["drill", "run", plan.to_str().unwrap()]);
        r.expect_code(2);
        assert!(
            r.stderr.contains("zzzz.dsse.json") && r.stderr.contains("another-plan"),
            "{}",
            r.stderr
        );
        std::fs::remove_file(&foreign).unwrap();
    }

    // Changing any byte of a report makes verification fail (sampled positions, all kinds of bytes).
    let orig = std::fs::read(&report1).unwrap();
    for pos in (0..orig.len()).step_by(orig.len() / 40 + 1).chain([orig.len() - 1]) {
        let mut b = orig.clone();
        b[pos] = if b[pos] == b' ' { b'\t' } else { b[pos] ^ 0x01 };
        std::fs::write(&report1, &b).unwrap();
        let r = lakedrill(&[
            "audit",
            "verify",
            report1.to_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
        ]);
        assert_eq!(
            r.code, 1,
            "byte {pos} changed and the report still verified: {}",
            r.stdout
        );
    }
    std::fs::write(&report1, &orig).unwrap();
    // The chain notices a removed report.
    std::fs::remove_file(&report1).unwrap();
    let r = lakedrill(&[
        "--json",
        "audit",
        "verify",
        report2.to_str().unwrap(),
        "--trust",
        trust.to_str().unwrap(),
        "--chain",
    ]);
    assert!(r.expect_code(1).json()["findings"][0]["check"] == "CHAIN_BROKEN");

    // A drill that samples a corrupted object fails its gate.
    let victim = PathBuf::from(uris[0].trim_start_matches("file://"));
    let data = crate::util::bundle_inventory(&victim)
        .iter()
        .find(|e| e["layer"] == "data")
        .unwrap()["uri"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_owned();
    // db.many is read by this test only; the byte is restored right after the run.
    let mut b = std::fs::read(&data).unwrap();
    let saved = b.clone();
    let n = b.len() / 2;
    b[n] ^= 0xff;
    std::fs::write(&data, &b).unwrap();
    let plan_all = write_plan(tmp.path(), &bundles, &trust, &key, 7);
    let r = lakedrill_in(tmp.path(), &["--json", "drill", "run", plan_all.to_str().unwrap()]);
    std::fs::write(&data, &saved).unwrap();
    let fail = r.expect_code(1).json();
    assert_eq!(fail["predicate"]["summary"]["gate"], "FAIL");
    assert!(fail["predicate"]["summary"]["failed"].as_u64().unwrap() >= 1);
    let _ = generated();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rto_comes_from_the_injected_clock() {
    use lakedrill::clock::TestClock;
    let tmp = tmpdir();
    let (key, trust) = keygen(tmp.path(), "clock-TEST-ONLY");
    let bundles = tmp.path().join("bundles");
    let md = expected("db.legacy")["metadata_location"].as_str().unwrap().to_owned();
    for id in snapshot_ids(&["--metadata", &md]) {
        seal(&["--metadata", &md], id, &key, &bundles).expect_code(0);
    }
    let plan = write_plan(tmp.path(), &bundles, &trust, &key, 1);
    let storage = lakedrill::io::store::Storage::new(lakedrill::io::store::StorageOptions::default());
    // Every clock read advances 1.5 s: each item's RTO is exactly one step.
    let clock = TestClock::new(1_800_000_000_000, 1500);
    let o = lakedrill::ops::drill::run(&storage, &plan, &clock, &|| Ok("0".repeat(64)))
        .await
        .unwrap();
    assert_eq!(o.predicate.summary.gate, "PASS");
    for r in &o.predicate.results {
        assert!((r.rto_seconds - 1.5).abs() < 1e-9, "{}", r.rto_seconds);
    }
    assert_eq!(o.predicate.started_at, "2027-01-15T08:00:00.000Z");
}

/// `parallel_bundles` verifies bundles side by side: the same results, in the same (sample) order, as one at a time;
/// the report says how many ran at once, and each RTO is still its own bundle's start to end. A plan asking for 0,
/// or a cold-backup plan asking for any, is refused naming the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_verified_side_by_side_give_the_results_of_one_at_a_time() {
    use lakedrill::clock::TestClock;
    let tmp = tmpdir();
    let (key, trust) = keygen(tmp.path(), "parallel-TEST-ONLY");
    let bundles = tmp.path().join("bundles");
    let md = expected("db.legacy")["metadata_location"].as_str().unwrap().to_owned();
    let ids = snapshot_ids(&["--metadata", &md]);
    assert!(ids.len() >= 2, "{ids:?}");
    for id in ids {
        seal(&["--metadata", &md], id, &key, &bundles).expect_code(0);
    }
    let plan = write_plan(tmp.path(), &bundles, &trust, &key, 1);
    let storage = lakedrill::io::store::Storage::new(lakedrill::io::store::StorageOptions::default());
    let digest = || Ok("0".repeat(64));
    let clock = TestClock::new(1_800_000_000_000, 1500);
    let one = lakedrill::ops::drill::run(&storage, &plan, &clock, &digest)
        .await
        .unwrap();
    let text = std::fs::read_to_string(&plan).unwrap();
    std::fs::write(&plan, format!("{text}parallel_bundles = 3\n")).unwrap();
    let side = lakedrill::ops::drill::run(&storage, &plan, &clock, &digest)
        .await
        .unwrap();
    let fields = |o: &lakedrill::ops::drill::DrillOutcome| -> Vec<(String, String, usize, u64, Option<String>)> {
        o.predicate
            .results
            .iter()
            .map(|r| {
                (
                    r.bundle_id.clone(),
                    format!("{:?}", r.status),
                    r.objects_verified,
                    r.bytes_verified,
                    r.bundle_root.clone(),
                )
            })
            .collect()
    };
    assert_eq!(fields(&side), fields(&one));
    assert!(fields(&one).len() >= 2);
    assert_eq!(side.predicate.summary.gate, "PASS");
    assert_eq!(one.predicate.drill.parallel_bundles, None);
    assert_eq!(side.predicate.drill.parallel_bundles, Some(3));
    // Each RTO spans its own two clock reads (one step apart when alone; more steps when reads interleave).
    for r in &one.predicate.results {
        assert!((r.rto_seconds - 1.5).abs() < 1e-9, "{}", r.rto_seconds);
    }
    for r in &side.predicate.results {
        assert!(r.rto_seconds >= 1.5 - 1e-9, "{}", r.rto_seconds);
    }
    std::fs::write(&plan, format!("{text}parallel_bundles = 0\n")).unwrap();
    let e = lakedrill::ops::drill::load_plan(&plan).unwrap_err().to_string();
    assert!(
        e.contains("parallel_bundles must be at least 1") && e.contains("weekly.toml"),
        "{e}"
    );
    let cold = tmp.path().join("cold.toml");
    std::fs::write(
        &cold,
        format!(
            "name = \"cold\"\nkind = \"cold-backup\"\nbackups = \"{}\"\ntarget = \"{}\"\ntrust = \"{}\"\nkey = \"{}\"\nparallel_bundles = 2\n",
            bundles.display(),
            tmp.path().join("scratch").display(),
            trust.display(),
            key.display()
        ),
    )
    .unwrap();
    let e = lakedrill::ops::drill::load_plan(&cold).unwrap_err().to_string();
    assert!(e.contains("`parallel_bundles` belongs to quarantine drills"), "{e}");
}

#[test]
fn restore_into_materializes_a_registered_table_pyiceberg_can_query() {
    let tmp = tmpdir();
    let (key, trust) = keygen(tmp.path(), "into-TEST-ONLY");
    let exp = expected("db.events");
    let md = exp["metadata_location"].as_str().unwrap();
    // A historic snapshot of the evolved, partitioned table.
    let id = exp["snapshots"].as_array().unwrap()[3]["snapshot_id"].as_i64().unwrap();
    let s = seal(&["--metadata", md], id, &key, &tmp.path().join("bundles"))
        .expect_code(0)
        .json();
    std::fs::write(tmp.path().join("restored.db"), b"").unwrap();
    std::fs::write(
        tmp.path().join("lakedrill.toml"),
        format!(
            "[catalog.restored]\ntype = \"sql\"\nuri = \"sqlite:{0}/restored.db\"\nwarehouse = \"file://{0}/wh\"\n",
            tmp.path().display()
        ),
    )
    .unwrap();
    let into = tmp.path().join("wh/db/events_restored");
    let r = lakedrill_in(
        tmp.path(),
        &[
            "--json",
            "restore",
            s["uri"].as_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--catalog",
            "restored",
            "--table",
            "db.events_restored",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(r["status"], "RESTORED");
    let rows = exp["row_counts"][id.to_string()].as_u64().unwrap();
    crate::util::assert_engines_read(r["metadata_location"].as_str().unwrap(), id, rows);
    // Every path of the restored table is under the new location.
    let files = lakedrill_in(
        tmp.path(),
        &[
            "--json",
            "inspect",
            "files",
            "--catalog",
            "restored",
            "--table",
            "db.events_restored",
        ],
    )
    .expect_code(0)
    .json();
    assert!(!files["files"].as_array().unwrap().is_empty());
    for f in files["files"].as_array().unwrap() {
        assert!(
            f["file_path"]
                .as_str()
                .unwrap()
                .starts_with(&format!("file://{}", into.display())),
            "{f}"
        );
    }
    // PyIceberg queries it and sees the rows that snapshot had.
    let py = std::env::var("LAKEDRILL_TEST_PYTHON").expect("LAKEDRILL_TEST_PYTHON: run scripts/test.sh");
    let out = std::process::Command::new(py)
        .arg("-c")
        .arg(format!(
            "from pyiceberg.catalog.sql import SqlCatalog\nc = SqlCatalog('restored', uri='sqlite:///{0}/restored.db', warehouse='file://{0}/wh')\nprint(c.load_table('db.events_restored').scan().to_arrow().num_rows)",
            tmp.path().display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        exp["row_counts"][id.to_string()].to_string()
    );
    // The restored table is itself sealable and verifies, and a second restore into the same place is refused.
    // (sealing through a catalog reads the configuration of the working directory)
    let s2 = lakedrill_in(
        tmp.path(),
        &[
            "--json",
            "seal",
            "--catalog",
            "restored",
            "--table",
            "db.events_restored",
            "--ref",
            "main",
            "--key",
            key.to_str().unwrap(),
            "--out",
            tmp.path().join("bundles2").to_str().unwrap(),
        ],
    )
    .expect_code(0)
    .json();
    restore(s2["uri"].as_str().unwrap(), &trust, &["--deep"]).expect_code(0);
    lakedrill_in(
        tmp.path(),
        &[
            "restore",
            s["uri"].as_str().unwrap(),
            "--trust",
            trust.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
            "--catalog",
            "restored",
            "--table",
            "db.other",
        ],
    )
    .expect_code(2);
}

#[test]
fn restore_into_rewrites_position_deletes_and_pyiceberg_reads_the_upstream_count() {
    let s = sealed_pos_table();
    let dir = s.table.parent().unwrap();
    let target = dir.join("wh/restored");
    std::fs::write(
        dir.join("lakedrill.toml"),
        format!(
            "[catalog.c]\ntype = \"sql\"\nuri = \"sqlite:{0}/c.db?mode=rwc\"\nwarehouse = \"file://{0}/wh\"\n",
            dir.display()
        ),
    )
    .unwrap();
    let r = lakedrill_in(
        dir,
        &[
            "--json",
            "restore",
            s.bundle.to_str().unwrap(),
            "--trust",
            s.trust.to_str().unwrap(),
            "--into",
            target.to_str().unwrap(),
            "--catalog",
            "c",
            "--table",
            "db.t",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(r["position_deletes_rewritten"], 3, "{r}");
    let exp: Value =
        serde_json::from_slice(&std::fs::read(interop().join("expected/spark-v2-position-deletes.json")).unwrap())
            .unwrap();
    let py = std::env::var("LAKEDRILL_TEST_PYTHON").expect("LAKEDRILL_TEST_PYTHON: run scripts/test.sh");
    let out = std::process::Command::new(py)
        .arg("-c")
        .arg(format!(
            "from pyiceberg.catalog.sql import SqlCatalog\nc = SqlCatalog('c', uri='sqlite:///{0}/c.db', warehouse='file://{0}/wh')\nt = c.load_table('db.t')\nprint(t.scan().to_arrow().num_rows, t.metadata.table_uuid != None)",
            dir.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{} True", exp["current_row_count_independent"])
    );
    crate::util::assert_engines_read(
        r["metadata_location"].as_str().unwrap(),
        r["snapshot_id"].as_i64().unwrap(),
        exp["current_row_count_independent"].as_u64().unwrap(),
    );
}

/// #23 point 2: a quarantine drill records no RPO (a bundle declares no recovery point) but the history its
/// bundle preserves: the live head's commit time minus the bundle snapshot's, in the signed report and the
/// human one. A later commit to the table makes every bundle older by exactly the new head's lead.
#[test]
fn a_quarantine_drill_reports_how_much_history_each_bundle_preserves() {
    let g = crate::governance::Gov::new("");
    let (_, ev) = g.quarantined();
    let results = |report: &Path| -> Vec<Value> {
        let st = lakedrill::evidence::peek_unverified(&std::fs::read(report).unwrap()).unwrap();
        st["predicate"]["results"].as_array().unwrap().clone()
    };
    let (commits, head) = crate::gates::commit_times(&g);
    let first = results(&ev);
    assert!(!first.is_empty());
    let txt = std::fs::read_to_string(ev.to_str().unwrap().replace(".dsse.json", ".txt")).unwrap();
    for r in &first {
        assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
        assert_eq!(r["rpo_seconds"], Value::Null, "{r}");
        let snap = r["snapshot_id"].as_i64().unwrap();
        let age = (commits[&head] - commits[&snap]) as f64 / 1000.0;
        // The candidate's snapshots expired: they are behind the head.
        assert!(age > 0.0, "{r}");
        assert_eq!(r["history_age_seconds"].as_f64(), Some(age), "{r}");
        let basis = r["history_age_basis"].as_str().unwrap();
        assert!(
            basis.starts_with(&format!("live head snapshot {head} committed ")),
            "{basis}"
        );
        assert!(
            basis.contains("/metadata/") && basis.ends_with(".metadata.json"),
            "{basis}"
        );
        assert!(
            txt.contains(&format!("history age {age:.3}s  (live head snapshot {head}")),
            "{txt}"
        );
    }

    // A commit after the quarantine: the next drill measures against the new head.
    g.py("import pyarrow as pa\nt.append(pa.table({'id': pa.array([999], pa.int64()), 'category': pa.array(['z']), 'value': pa.array([1.0])}))");
    let (commits, new_head) = crate::gates::commit_times(&g);
    assert_ne!(new_head, head);
    let lead = (commits[&new_head] - commits[&head]) as f64 / 1000.0;
    assert!(lead > 0.0);
    let second = results(&g.drill("bundles"));
    for r in &second {
        let before = first.iter().find(|x| x["bundle_id"] == r["bundle_id"]).unwrap();
        let was = before["history_age_seconds"].as_f64().unwrap();
        let now = r["history_age_seconds"].as_f64().unwrap();
        assert!((now - (was + lead)).abs() < 1e-6, "{was} + {lead} != {now}: {r}");
        assert!(
            r["history_age_basis"]
                .as_str()
                .unwrap()
                .starts_with(&format!("live head snapshot {new_head} ")),
            "{r}"
        );
    }
}

/// Every snapshot of the interop table sealed into `dir/bundles`, and a drill plan over them with `max_bundle_age`
/// = `age`: the snapshot ids, the bundle folders (in that order) and the plan.
fn aged_plan(dir: &Path, age: &str) -> (Vec<i64>, Vec<PathBuf>, PathBuf) {
    let (key, trust) = keygen(dir, "aged-TEST-ONLY");
    let bundles = dir.join("bundles");
    let table = dir.join("t");
    copy_tree(
        &interop().join("tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table"),
        &table,
    );
    let addr = ["--metadata", table.to_str().unwrap()];
    let ids = snapshot_ids(&addr);
    let dirs = ids
        .iter()
        .map(|id| {
            let sealed = seal(&addr, *id, &key, &bundles).expect_code(0).json();
            PathBuf::from(sealed["uri"].as_str().unwrap().trim_start_matches("file://"))
        })
        .collect();
    let plan = write_plan(dir, &bundles, &trust, &key, 1);
    let mut text = std::fs::read_to_string(&plan).unwrap();
    text.push_str(&format!("max_bundle_age = \"{age}\"\n"));
    std::fs::write(&plan, text).unwrap();
    (ids, dirs, plan)
}

/// A plan whose `max_bundle_age` leaves out every bundle says that the bundles are there but all older than that age
/// (it said the folder held no bundle at all, `no */bundle.dsse.json`), and still exits 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_all_older_than_max_bundle_age_are_named_as_such() {
    use lakedrill::clock::TestClock;
    let tmp = tmpdir();
    let (ids, _, plan) = aged_plan(tmp.path(), "1s");
    let storage = lakedrill::io::store::Storage::new(lakedrill::io::store::StorageOptions::default());
    // The drill starts on 2100-01-01: every bundle was sealed more than a second before.
    let err = lakedrill::ops::drill::run(&storage, &plan, &TestClock::new(4_102_444_800_000, 1), &|| {
        Ok("0".repeat(64))
    })
    .await
    .unwrap_err();
    let msg = format!("{err:#}");
    assert_eq!(err.kind(), lakedrill::error::ErrorKind::BadInput, "{msg}");
    assert!(
        msg.contains(&format!(
            "{} bundle(s) are there, but all are older than max_bundle_age = \"1s\"",
            ids.len()
        )) && !msg.contains("no */bundle.dsse.json"),
        "{msg}"
    );
}

/// A bundle whose envelope states no readable sealed time (corrupt, truncated) stays in a `max_bundle_age` plan's
/// population and fails the drill naming it: it was left out silently, so the drill passed over the others and
/// neither the report nor the registry recorded a failure of that bundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_without_a_readable_sealed_time_is_drilled_and_fails_not_aged_out() {
    use lakedrill::clock::TestClock;
    let tmp = tmpdir();
    let (ids, dirs, plan) = aged_plan(tmp.path(), "36500d");
    assert!(ids.len() >= 2, "the table has {} snapshots", ids.len());
    // One envelope truncated: its sealed time cannot be read.
    let victim = dirs[0].join("bundle.dsse.json");
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let storage = lakedrill::io::store::Storage::new(lakedrill::io::store::StorageOptions::default());
    let out = lakedrill::ops::drill::run(&storage, &plan, &TestClock::new(4_102_444_800_000, 1), &|| {
        Ok("0".repeat(64))
    })
    .await
    .unwrap();
    let p = serde_json::to_value(&out.predicate).unwrap();
    assert_eq!(p["summary"]["gate"], "FAIL", "{p:#}");
    let name = dirs[0].file_name().unwrap().to_str().unwrap();
    let failed: Vec<&Value> = p["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] != "RESTORE_VERIFIED")
        .collect();
    assert_eq!(failed.len(), 1, "{p:#}");
    assert!(failed[0].to_string().contains(name), "{p:#}");
    assert_eq!(p["results"].as_array().unwrap().len(), ids.len(), "{p:#}");
}

/// Commands that read a bundle's predicate without restoring it (`restore --put-back`, `set-current
/// --from-bundle`'s metadata copy, `recover`, `audit verify` of a retired bundle) checked only its signature: a
/// seal-signed statement whose root is not its inventory's, or that is no bundle statement at all, was read as a
/// bundle (an audit of a retired bundle said VERIFIED). Now they check the statement type, the root recomputed
/// from the inventory and the subject, as `restore` does, and refuse naming what differs. `restore --put-back`
/// refused such a bundle with exit 2 ("could not decide"); a bundle that was read and does not verify is a finding
/// (exit 1, README "Exit codes"), as `restore` reports it; only a bundle that cannot be read stays exit 2.
#[test]
fn a_signed_bundle_whose_root_is_not_its_inventorys_is_refused_by_every_reader() {
    let s = sealed_pos_table();
    let env_path = s.bundle.join("bundle.dsse.json");
    let original = std::fs::read(&env_path).unwrap();
    let st = read_statement(&env_path);
    let bundle = s.bundle.to_str().unwrap();
    let put_back = |trust: &Path| {
        lakedrill(&[
            "--json",
            "restore",
            bundle,
            "--trust",
            trust.to_str().unwrap(),
            "--put-back",
        ])
    };
    // A bundle that was read and does not verify is a finding (exit 1, README "Exit codes"), as `restore` reports
    // it, with the bundle and the reason in the document; nothing is put back.
    let not_verified = |r: &crate::util::Run, reason: &str| {
        r.expect_code(1);
        let v = r.json();
        assert_eq!(v["status"], "NOT_VERIFIED", "{v}");
        assert!(v["bundle"].as_str().unwrap().ends_with(bundle), "{v}");
        assert!(v["reason"].as_str().unwrap().contains(reason), "{v}");
    };
    // Another root, signed by the bundle's own (trusted) seal key, subject and predicate agreeing with each other.
    let mut other = st.clone();
    let fake = "ab".repeat(32);
    other["predicate"]["bundle_root"] = Value::String(fake.clone());
    other["subject"][0]["digest"]["blake3"] = Value::String(fake.clone());
    resign(&s, "application/vnd.in-toto+json", &other);
    let r = put_back(&s.trust);
    not_verified(&r, "bundle root");
    assert!(r.json()["reason"].as_str().unwrap().contains(&fake), "{}", r.stdout);
    // Another statement type, validly signed.
    let mut kind = st.clone();
    kind["predicateType"] = Value::String("https://example.com/not-a-bundle/v1".into());
    resign(&s, "application/vnd.in-toto+json", &kind);
    not_verified(&put_back(&s.trust), "not a bundle");
    // The bundle as sealed, checked against a trust folder without its key: an untrusted signature.
    std::fs::write(&env_path, &original).unwrap();
    let tmp = tmpdir();
    let (_, stranger) = keygen(tmp.path(), "stranger-TEST-ONLY");
    not_verified(&put_back(&stranger), "bundle signature");
    // What cannot be read stays "could not decide" (exit 2): a bundle folder without its envelope.
    std::fs::remove_file(&env_path).unwrap();
    let r = put_back(&s.trust);
    r.expect_code(2);
    assert!(
        r.json()["error"].as_str().unwrap().contains("bundle.dsse.json"),
        "{}",
        r.stdout
    );
}
