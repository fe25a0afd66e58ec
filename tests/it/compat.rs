//! Bundles sealed by an earlier release still verify. `tests/fixtures/bundles/` keeps a bundle sealed by the
//! release before the lean (no value tree) verification, with the TEST-ONLY public key that signed it; its
//! README says how it was made. Any change to how bundles are read must keep these tests passing.

use std::path::PathBuf;

use lakedrill::bundle::{BundlePredicate, ENVELOPE_FILE};
use lakedrill::evidence::keys::TrustStore;
use serde_json::Value;

use crate::drill::restore;
use crate::util::{copy_tree, tmpdir};

/// The kept bundle: snapshot 2945519146151961459 of the checked-in v3 table with deletion vectors.
fn kept() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles/2945519146151961459-64fcc4695e4f1796")
}

fn kept_trust() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles/trust")
}

fn v3_table() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop/lakedrill-spark/v3_dv")
}

#[test]
fn a_bundle_sealed_by_the_release_before_lean_verification_still_deep_restores() {
    let bundle = kept();
    let table = v3_table();
    let r = restore(
        bundle.to_str().unwrap(),
        &kept_trust(),
        &["--deep", "--table-root", table.to_str().unwrap()],
    )
    .expect_code(0)
    .json();
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    assert_eq!(r["snapshot_id"], 2_945_519_146_151_961_459_i64, "{r}");
    // Every object of its inventory was verified: the metadata layers from their copies, the rest in storage.
    let envelope: Value = serde_json::from_slice(&std::fs::read(bundle.join(ENVELOPE_FILE)).unwrap()).unwrap();
    let statement = lakedrill::evidence::peek_unverified(&serde_json::to_vec(&envelope).unwrap()).unwrap();
    let objects = statement["predicate"]["inventory"].as_array().unwrap().len() as u64;
    assert!(objects >= 5, "{statement}");
    assert_eq!(r["objects_verified"].as_u64(), Some(objects), "{r}");

    // One changed byte in one data file of a copy of the table fails the same bundle, naming that file.
    let tmp = tmpdir();
    let copy = tmp.path().join("v3_dv");
    copy_tree(&table, &copy);
    let victim = statement["predicate"]["inventory"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["layer"] == "data")
        .unwrap()["path"]
        .as_str()
        .unwrap()
        .rsplit_once("/data/")
        .unwrap()
        .1
        .to_owned();
    let file = copy.join("data").join(&victim);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[4] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();
    let r = restore(
        bundle.to_str().unwrap(),
        &kept_trust(),
        &["--table-root", copy.to_str().unwrap()],
    )
    .expect_code(1)
    .json();
    assert_eq!(r["status"], "FAILED", "{r}");
    let findings = r["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{r}");
    assert_eq!(findings[0]["kind"], "DIGEST_MISMATCH", "{r}");
    assert!(findings[0]["path"].as_str().unwrap().ends_with(&victim), "{r}");
}

#[test]
fn the_typed_predicate_of_the_kept_bundle_is_the_predicate_of_the_full_json_verification() {
    let trust = TrustStore::load_dir(&kept_trust()).unwrap();
    let envelope = std::fs::read(kept().join(ENVELOPE_FILE)).unwrap();
    let full = lakedrill::evidence::verify(&envelope, &trust).unwrap();
    let lean = lakedrill::evidence::verify_payload(&envelope, &trust).unwrap();
    assert_eq!(lean.payload_bytes(), full.payload_bytes());
    assert_eq!(lean.subjects(), full.subjects());
    let typed: BundlePredicate = lean.parse_predicate().unwrap();
    let from_value: BundlePredicate = serde_json::from_value(full.predicate().clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        serde_json::to_value(&from_value).unwrap()
    );
    assert_eq!(typed.inventory.len(), typed.objects);
    assert_eq!(typed.bundle_root, lakedrill::bundle::inventory_root(&typed.inventory));
    // Through storage, as the deleter and recover read it.
    let storage = lakedrill::io::store::Storage::new(lakedrill::io::store::StorageOptions::default());
    let dir = format!("file://{}", kept().display());
    let read = crate::util::block_on(lakedrill::bundle::verified_bundle_predicate(&storage, &dir, &trust)).unwrap();
    assert_eq!(
        serde_json::to_value(&read).unwrap(),
        serde_json::to_value(&typed).unwrap()
    );
}
