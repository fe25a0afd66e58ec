//! The deleter on a real S3 server: SeaweedFS (scripts/test.sh), which checks per-key ETags in `DeleteObjects`,
//! writes delete markers and answers with its own `DeleteMarker`/`VersionId` fields. The requests lakedrill
//! sends are counted by a proxy in front of the server (tests/gen/s3_count_proxy.py), not by lakedrill itself.
//!
//! moto stays in the suite for one test only: it deletes a key in `DeleteObjects` although the key's ETag does
//! not match, which is why no deleter test here relies on it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::deleter_safety::add_bulk_files;
use crate::governance::{Gov, T, python};
use crate::util::{block_on, sql_text};

fn bucket() -> String {
    std::env::var("LAKEDRILL_TEST_S3_BUCKET").expect("LAKEDRILL_TEST_S3_BUCKET: run scripts/test.sh")
}

fn seaweed() -> String {
    std::env::var("LAKEDRILL_TEST_S3_ENDPOINT").expect("LAKEDRILL_TEST_S3_ENDPOINT: run scripts/test.sh")
}

/// The counting proxy, killed on drop.
pub struct CountingProxy {
    child: Child,
    pub endpoint: String,
    log: PathBuf,
}

impl CountingProxy {
    /// Starts the proxy in front of `upstream`, logging to `dir/proxy.log`, with `flags`
    /// (`--no-delete-objects`).
    pub fn start(upstream: &str, dir: &Path, flags: &[&str]) -> CountingProxy {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gen/s3_count_proxy.py");
        let port_file = dir.join("proxy.port");
        let log = dir.join("proxy.log");
        let child = Command::new(python())
            .arg(script)
            .arg(upstream)
            .arg(&port_file)
            .arg(&log)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                break p;
            }
            assert!(started.elapsed().as_secs() < 30, "the counting proxy did not start");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        CountingProxy {
            child,
            endpoint: format!("http://127.0.0.1:{}", port.trim()),
            log,
        }
    }

    /// Every request so far: (unix time, method, path and query).
    pub fn requests(&self) -> Vec<(f64, String, String)> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let mut p = l.splitn(3, ' ');
                Some((p.next()?.parse().ok()?, p.next()?.to_owned(), p.next()?.to_owned()))
            })
            .collect()
    }

    /// `DeleteObjects` requests (`POST /?delete`) and single `DELETE` requests so far.
    pub fn deletes(&self) -> (Vec<f64>, usize) {
        let r = self.requests();
        let batch = r
            .iter()
            .filter(|(_, m, p)| m == "POST" && (p.contains("?delete") || p.contains("&delete")))
            .map(|(t, _, _)| *t)
            .collect();
        let single = r.iter().filter(|(_, m, _)| m == "DELETE").count();
        (batch, single)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A table of its own on SeaweedFS (through a counting proxy) for orphan tests: S3 cannot backdate an object, so
/// the policy's ages are short (`maxWriterDuration: 1s`, `orphanSafetyInterval: 2s`). Returns the fixture, the
/// proxy and the table's key prefix in the bucket.
fn orphans_on_seaweed(name: &str) -> (Gov, CountingProxy, String) {
    orphans_on_seaweed_with(name, "", &[])
}

/// [`orphans_on_seaweed`] with `storage` added to `[storage]` and flags for the proxy.
fn orphans_on_seaweed_with(name: &str, storage: &str, flags: &[&str]) -> (Gov, CountingProxy, String) {
    let (g, proxy) = on_seaweed_with(&format!("{name}-{}", uuid::Uuid::new_v4()), storage, "", flags);
    let text = std::fs::read_to_string(&g.policy)
        .unwrap()
        .replace("maxWriterDuration: 6h", "maxWriterDuration: 1s")
        .replace("orphanSafetyInterval: 12h", "orphanSafetyInterval: 2s");
    g.write_policy(&text);
    let loc = g.py("print(t.location())");
    let prefix = loc.trim_start_matches(&format!("s3://{}/", bucket())).to_owned();
    (g, proxy, prefix)
}

/// A fresh fixture table on the SeaweedFS bucket whose lakedrill configuration talks to S3 through `proxy`
/// (PyIceberg writes directly), with `storage` added to `[storage]`.
fn on_seaweed(prefix: &str, storage: &str, policy_extra: &str) -> (Gov, CountingProxy) {
    on_seaweed_with(prefix, storage, policy_extra, &[])
}

/// [`on_seaweed`] with flags for the proxy.
fn on_seaweed_with(prefix: &str, storage: &str, policy_extra: &str, flags: &[&str]) -> (Gov, CountingProxy) {
    let g = Gov::with_warehouse(policy_extra, Some(format!("s3://{}/{prefix}", bucket())));
    let proxy = CountingProxy::start(&seaweed(), &g.dir, flags);
    let cfg = g.dir.join("lakedrill.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "[storage]\n{storage}\n[storage.s3]\nendpoint = \"{}\"\n",
        proxy.endpoint
    ));
    std::fs::write(&cfg, text).unwrap();
    (g, proxy)
}

/// boto3 against SeaweedFS before any fixture exists: `code` runs with `s3` (a client); returns its stdout.
fn boto_bare(code: &str) -> String {
    let out = Command::new(python())
        .arg("-c")
        .arg(format!(
            "import os, boto3\ns3 = boto3.client('s3', endpoint_url=os.environ['LAKEDRILL_TEST_S3_ENDPOINT'], aws_access_key_id='testing', aws_secret_access_key='testing', region_name='us-east-1')\n{code}"
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The receipts of `phase` for candidate `id`, from the registry.
fn receipts(g: &Gov, id: &str, phase: &str) -> Vec<Value> {
    let db = g.dir.join("registry.db");
    let out = Command::new(python())
        .arg("-c")
        .arg(format!(
            "import sqlite3, json\nc = sqlite3.connect('{}')\nprint(json.dumps([json.loads(r[0]) for r in c.execute(\"select receipt_json from receipts where candidate_id = '{id}'\")]))",
            db.display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    all.into_iter().filter(|r| r["phase"] == phase).collect()
}

/// boto3 against SeaweedFS: `code` runs with `s3` (a client) and `bucket` defined; returns its stdout.
fn boto(g: &Gov, code: &str) -> String {
    g.py(&format!(
        "import boto3\ns3 = boto3.client('s3', endpoint_url=os.environ['LAKEDRILL_TEST_S3_ENDPOINT'], aws_access_key_id='testing', aws_secret_access_key='testing', region_name='us-east-1')\nbucket = '{}'\n{code}",
        bucket()
    ))
}

/// Acceptance of issue 20: a purge of 3,000 objects on a versioned bucket sends at most 3 `DeleteObjects`
/// requests and no single delete (counted by the proxy); every receipt quotes the provider's own
/// `DeleteMarker`/`DeleteMarkerVersionId`, and those are the markers the bucket lists; `undelete` brings every
/// object back from behind its marker, verified against the bundles. With `purge_batch_objects = 3000` (#24)
/// the three requests go out concurrently inside one registry batch: every confirmation has the same request
/// time.
#[test]
fn a_purge_of_3000_objects_is_3_delete_objects_requests_and_receipts_quote_the_provider() {
    let prefix = format!("batch-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed(&prefix, "purge_batch_objects = 3100\ns3_recheck_by_listing = true", "");
    add_bulk_files(&g, 2990);
    let (c, _, r) = g.chain(&format!("s3://{}/{prefix}-vault", bucket()));
    let id = c["candidate_id"].as_str().unwrap();
    let n = c["objects"].as_array().unwrap().len();
    assert!(
        (3000..=3000 + 20).contains(&n),
        "the candidate holds ~3,000 objects: {n}"
    );
    let (batches, singles) = proxy.deletes();
    assert!(
        !batches.is_empty() && batches.len() <= n.div_ceil(1000),
        "{} DeleteObjects requests for {n} objects",
        batches.len()
    );
    assert_eq!(singles, 0, "no single delete request");
    // lakedrill's own count agrees with the proxy's.
    assert_eq!(r["requests"]["delete_objects"], batches.len(), "{r}");
    assert_eq!(r["requests"]["single_deletes"], 0, "{r}");
    assert_eq!(r["objects"]["VERIFIED"].as_array().unwrap().len(), n, "{r}");
    // Marker-only: the purge says how long `undelete` can bring them back; this bucket has no lifecycle rule.
    assert!(
        r["undelete_window"]["rule"].is_null() && r["undelete_window"]["unknown"].is_null(),
        "{r}"
    );
    // With `s3_recheck_by_listing` the re-check after the deletes is one listing of the batch's key range (#24),
    // not a HEAD per object: the proxy sees its pages as ListObjectsV2 requests starting after a key, about one
    // per 1,000 objects. (By default each object is HEADed: the other S3 deleter tests and the fault matrix's
    // lagging replica.) Not counted: the one-key requests that check a listing reached its end.
    assert_eq!(r["requests"]["recheck_heads"], 0, "{r}");
    assert_eq!(r["requests"]["recheck_listings"], 1, "{r}");
    let pages = proxy
        .requests()
        .iter()
        .filter(|(_, m, p)| {
            m == "GET" && p.contains("list-type=2") && p.contains("start-after=") && !p.contains("max-keys=1")
        })
        .count();
    assert!(
        (1..=n.div_ceil(1000) + 2).contains(&pages),
        "{pages} listing pages re-checked {n} objects"
    );

    // Each confirmation quotes the provider: method, DeleteMarker, DeleteMarkerVersionId, request id.
    let confirmed = receipts(&g, id, "confirmed");
    assert_eq!(confirmed.len(), n);
    let batch_times: std::collections::BTreeSet<&str> =
        confirmed.iter().filter_map(|rc| rc["requested_at"].as_str()).collect();
    assert_eq!(
        batch_times.len(),
        1,
        "one registry batch sent every request: {batch_times:?}"
    );
    let mut markers = std::collections::BTreeMap::new();
    for rc in &confirmed {
        assert_eq!(rc["method"], "s3-delete-objects", "{rc}");
        assert_eq!(
            rc["expected_from"], "bundle",
            "the ETag condition is the sealed ETag: {rc}"
        );
        assert!(rc["e_tag"].as_str().is_some_and(|e| !e.is_empty()), "{rc}");
        assert_eq!(rc["provider"]["deleted"], true, "{rc}");
        assert_eq!(rc["delete_marker"], true, "{rc}");
        assert_eq!(rc["provider"]["http_status"], 200, "{rc}");
        assert!(rc["provider"]["request_id"].as_str().is_some(), "{rc}");
        assert_eq!(rc["recheck"], "absent", "{rc}");
        let marker = rc["delete_marker_version_id"].as_str().expect("DeleteMarkerVersionId");
        markers.insert(
            format!("{prefix}/db/retention/{}", rc["key"].as_str().unwrap()),
            marker.to_owned(),
        );
    }
    // The markers the receipts name are the ones the bucket lists as the latest version of each key.
    let listed: std::collections::BTreeMap<String, String> = serde_json::from_str(&boto(
        &g,
        &format!(
            "import json\nm = {{}}\nfor page in s3.get_paginator('list_object_versions').paginate(Bucket=bucket, Prefix='{prefix}/db/retention/'):\n\
             \x20   for d in page.get('DeleteMarkers', []):\n\
             \x20       if d['IsLatest']:\n\
             \x20           m[d['Key']] = d['VersionId']\n\
             print(json.dumps(m))"
        ),
    ))
    .unwrap();
    for (k, v) in &markers {
        assert_eq!(listed.get(k), Some(v), "{k}: the receipt's marker is not the bucket's");
    }

    // Everything comes back from behind its marker and matches the bundles.
    let u = g
        .on_table(&["--json", "undelete", id, "--trust", "keys"])
        .expect_code(0)
        .json();
    assert_eq!(u["status"], "UNDELETED");
    let objects = u["objects"].as_array().unwrap();
    assert_eq!(objects.len(), n);
    assert!(objects.iter().all(|o| o["verified"] == true), "{u}");
    g.py("t.scan().to_arrow()");
}

/// Overwrites one data file of candidate `c` (of the table under `prefix`) with other bytes of the same size
/// (checked), as a writer reusing its path would; returns its path in the table, its S3 key and its size.
fn overwrite_a_data_file(g: &Gov, c: &Value, prefix: &str) -> (String, String, String) {
    let data = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["layer"] == "data")
        .expect("the candidate holds a data file")["path"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = format!("{prefix}/db/retention/{data}");
    let sizes = boto(
        g,
        &format!(
            "b = s3.get_object(Bucket=bucket, Key='{key}')['Body'].read()\n\
             s3.put_object(Bucket=bucket, Key='{key}', Body=bytes(255 - x for x in b))\n\
             print(len(b), s3.head_object(Bucket=bucket, Key='{key}')['ContentLength'])"
        ),
    );
    let (before, after) = sizes.split_once(' ').unwrap();
    assert_eq!(before, after, "the overwrite keeps the size");
    (data, key, before.to_owned())
}

/// An object overwritten between quarantine and purge with bytes of the same size (so that only its ETag
/// tells) is not deleted, neither by a `DeleteObjects` batch nor by single `If-Match` deletes
/// (`[storage] s3_delete_objects = false`): the provider refuses the key (`PreconditionFailed`), the object
/// keeps its new bytes and ends `DELETE_UNKNOWN`, every other object is deleted. `reconcile` keeps it too.
#[test]
fn an_object_overwritten_since_quarantine_is_refused_by_the_provider_and_ends_delete_unknown() {
    for (storage, method, policy) in [
        ("", "s3-delete-objects", ""),
        ("s3_delete_objects = false", "s3-delete-object-if-match", ""),
        ("", "s3-delete-objects", "objectVersioning: permanent\n"),
    ] {
        let prefix = format!("etag-{}", uuid::Uuid::new_v4());
        let (g, proxy) = on_seaweed(&prefix, storage, policy);
        let (c, ev) = g.quarantined();
        let id = c["candidate_id"].as_str().unwrap();
        // Same size, other bytes: the size check cannot see it, the ETag condition must.
        let (data, key, before) = overwrite_a_data_file(&g, &c, &prefix);
        let mut args = g.purge_args(id, Some(&ev));
        args.extend(T);
        let p = g.run(&args).expect_code(1).json();
        assert_eq!(p["status"], "DELETE_UNKNOWN", "{storage}: {p}");
        // SeaweedFS honours both conditions (the run's probe asked): no object is read before its delete.
        assert_eq!(
            p["delete_conditions"],
            serde_json::json!({"delete_objects": true, "if_match": true, "error": null, "head_before_delete": false}),
            "{p}"
        );
        assert_eq!(p["objects"]["DELETE_UNKNOWN"], serde_json::json!([data]), "{p}");
        let n = c["objects"].as_array().unwrap().len();
        assert_eq!(p["objects"]["VERIFIED"].as_array().unwrap().len(), n - 1, "{p}");
        let rc = receipts(&g, id, "confirmed")
            .into_iter()
            .find(|r| r["key"] == data.as_str())
            .unwrap();
        assert_eq!(rc["method"], method, "{rc}");
        if policy.is_empty() {
            assert_eq!(rc["provider"]["deleted"], false, "{rc}");
            assert_eq!(rc["provider"]["code"], "PreconditionFailed", "{rc}");
            assert!(
                rc["provider_result"]
                    .as_str()
                    .unwrap()
                    .contains("changed since quarantine"),
                "{rc}"
            );
        } else {
            // Permanent mode: the request names the sealed version and its ETag, so exactly those bytes may go;
            // the newer version written since quarantine is never touched, and the re-check finds the object
            // present: DELETE_UNKNOWN, for a human.
            assert!(rc["recheck"].as_str().unwrap().starts_with("present"), "{rc}");
            assert_eq!(rc["permanent"], true, "{rc}");
            // Every other key lost exactly its recorded version: no version and no delete marker of it is left,
            // and the provider's VersionId in each answer is the version sealed in the bundle.
            let gone: Vec<Value> = receipts(&g, id, "confirmed")
                .into_iter()
                .filter(|r| r["key"] != data.as_str())
                .collect();
            for r in &gone {
                assert_eq!(r["permanent"], true, "{r}");
                assert_eq!(r["provider"]["version_id"], r["version_id"], "{r}");
                assert!(r["delete_marker"] != true, "{r}");
            }
            let keys: Vec<String> = gone
                .iter()
                .map(|r| format!("{prefix}/db/retention/{}", r["key"].as_str().unwrap()))
                .collect();
            let left = boto(
                &g,
                &format!(
                    "v = s3.list_object_versions(Bucket=bucket, Prefix='{prefix}/db/retention/')\n\
                     keys = {keys:?}\n\
                     print(sum(1 for x in v.get('Versions', []) + v.get('DeleteMarkers', []) if x['Key'] in keys))"
                ),
            );
            assert_eq!(left, "0", "a version or marker of a purged key is left");
        }
        let (batches, singles) = proxy.deletes();
        if method == "s3-delete-objects" {
            assert_eq!((batches.len(), singles), (1, 0), "one DeleteObjects request");
        } else {
            assert_eq!((batches.len(), singles), (0, n), "one If-Match delete per object");
        }
        // reconcile re-checks and keeps the condition: the object stays, still DELETE_UNKNOWN.
        let r = g
            .on_table(&[
                "--json",
                "reconcile",
                id,
                "--key",
                "keys/gov-TEST-ONLY.key",
                "--receipts",
                "receipts",
                "--trust",
                "keys",
                "--policy",
                g.policy.to_str().unwrap(),
            ])
            .expect_code(1)
            .json();
        assert_eq!(r["status"], "DELETE_UNKNOWN", "{r}");
        let still = boto(
            &g,
            &format!("b = s3.get_object(Bucket=bucket, Key='{key}')['Body'].read()\nprint(len(b), b[:4] != b'PAR1')"),
        );
        assert_eq!(still, format!("{before} True"), "the overwritten bytes are still there");
    }
}

/// A provider that answers `DeleteObjects` with `NotImplemented` (the proxy plays one in front of SeaweedFS) gets
/// single `If-Match` deletes: nothing is lost, every object is deleted and its receipt says how.
#[test]
fn a_provider_without_delete_objects_gets_single_conditional_deletes() {
    let prefix = format!("nobatch-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed_with(&prefix, "", "", &["--no-delete-objects"]);
    let (c, _, r) = g.chain(&format!("s3://{}/{prefix}-vault", bucket()));
    let id = c["candidate_id"].as_str().unwrap();
    let n = c["objects"].as_array().unwrap().len();
    let (batches, singles) = proxy.deletes();
    assert_eq!(
        (batches.len(), singles),
        (1, n),
        "one refused DeleteObjects, then one DELETE per object"
    );
    assert_eq!(r["requests"]["single_deletes"], n, "{r}");
    for rc in receipts(&g, id, "confirmed") {
        assert_eq!(rc["method"], "s3-delete-object-if-match", "{rc}");
        assert_eq!(rc["provider"]["http_status"], 204, "{rc}");
        assert_eq!(rc["delete_marker"], true, "{rc}");
        assert_eq!(rc["recheck"], "absent", "{rc}");
    }
}

/// A legal hold set while a batched purge runs: no `DeleteObjects` request reaches the server after the hold
/// committed (the proxy's clock against the moment `hold set` returned), and the purge halts naming it.
#[test]
fn a_hold_set_during_a_batched_s3_purge_lets_no_delete_objects_request_out_after_it() {
    let prefix = format!("hold-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed(&prefix, "", "");
    add_bulk_files(&g, 2100);
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let n = c["objects"].as_array().unwrap().len();
    assert!(n > 2000, "three batches: {n}");
    let mut args = g.purge_args(&id, Some(&ev));
    args.extend(T);
    // Each delete request waits 1.5 s before it is sent (inside the batch's registry lock).
    let child = Command::new(env!("CARGO_BIN_EXE_lakedrill"))
        .args(&args)
        .current_dir(&g.dir)
        .env("LAKEDRILL_FAILPOINTS", "delay-ms=1500")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let registry = format!("sqlite:{}", g.dir.join("registry.db").display());
    let confirmed = format!(
        "SELECT CAST(COUNT(*) AS TEXT) FROM receipts WHERE candidate_id = '{id}' AND receipt_json LIKE '%\"phase\":\"confirmed\"%'"
    );
    let started = std::time::Instant::now();
    while sql_text(&registry, &confirmed)
        .unwrap_or_default()
        .parse::<usize>()
        .unwrap_or(0)
        < 1000
    {
        assert!(started.elapsed().as_secs() < 300, "the first batch never completed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    g.on_table(&["--json", "hold", "set", "--scope", "table", "--reason", "litigation 20"])
        .expect_code(0);
    let held_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let out = child.wait_with_output().unwrap();
    let p: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["status"], "HALTED", "{p}");
    let (batches, singles) = proxy.deletes();
    assert_eq!(singles, 0);
    assert!(
        (1..=2).contains(&batches.len()),
        "the purge halted before its last batch: {batches:?}"
    );
    assert!(
        batches.iter().all(|t| *t < held_at),
        "a DeleteObjects request reached the server after the hold: {batches:?} vs {held_at}"
    );
    // Objects of batches sent are VERIFIED, the rest PROTECTED (never sent).
    let st = g.run(&["--json", "status", &id]).expect_code(0).json();
    let count = |state: &str| {
        st["candidates"][0]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["state"] == state)
            .count()
    };
    assert_eq!(count("VERIFIED") + count("PROTECTED"), n, "{st}");
    assert!(count("VERIFIED") >= 1000 && count("PROTECTED") >= n - 2000, "{st}");
}

/// Where the provider ignores a delete's ETag condition (moto in `DeleteObjects`; played here on SeaweedFS by the
/// failpoint `s3-conditions-ignored`, which only changes what the run's real probe reports), the request alone
/// would not spare an object overwritten since quarantine with bytes of the same size: every object is read
/// before its delete instead, the overwritten one is not sent (DELETE_UNKNOWN, "changed since quarantine", its new
/// bytes kept), the others are deleted.
#[test]
fn where_the_provider_ignores_delete_conditions_every_object_is_read_before_its_delete() {
    let prefix = format!("noetag-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed(&prefix, "", "");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let (data, key, _) = overwrite_a_data_file(&g, &c, &prefix);
    let mut args = g.purge_args(id, Some(&ev));
    args.extend(T);
    let p = crate::util::lakedrill_in_env(&g.dir, &args, &[("LAKEDRILL_FAILPOINTS", "s3-conditions-ignored=1")])
        .expect_code(1)
        .json();
    assert_eq!(p["status"], "DELETE_UNKNOWN", "{p}");
    assert_eq!(p["delete_conditions"]["head_before_delete"], true, "{p}");
    assert_eq!(p["objects"]["DELETE_UNKNOWN"], serde_json::json!([data]), "{p}");
    let n = c["objects"].as_array().unwrap().len();
    assert_eq!(p["objects"]["VERIFIED"].as_array().unwrap().len(), n - 1, "{p}");
    let rc = receipts(&g, id, "confirmed")
        .into_iter()
        .find(|r| r["key"] == data.as_str())
        .unwrap();
    assert!(
        rc["provider_result"]
            .as_str()
            .unwrap()
            .contains("changed since quarantine"),
        "{rc}"
    );
    let still = boto(
        &g,
        &format!("print(len(s3.get_object(Bucket=bucket, Key='{key}')['Body'].read()))"),
    );
    assert!(
        still.parse::<u64>().unwrap() > 0,
        "the overwritten object is still there"
    );
    // One DeleteObjects request for the others; the probe's own requests are apart.
    let (batches, singles) = proxy.deletes();
    assert_eq!((batches.len(), singles), (1, 0));
    assert!(
        proxy.requests().iter().any(|(_, m, _)| m.starts_with("PROBE-")),
        "the probe ran"
    );
}

/// Why the deleter is tested on SeaweedFS and not on moto alone: moto 5.2.5 deletes a key in `DeleteObjects`
/// although the key's ETag does not match; SeaweedFS refuses it with `PreconditionFailed` and keeps it.
#[test]
fn moto_ignores_a_wrong_per_key_etag_in_delete_objects_seaweedfs_refuses_it() {
    let moto =
        std::env::var("LAKEDRILL_TEST_MOTO_ENDPOINT").expect("LAKEDRILL_TEST_MOTO_ENDPOINT: run scripts/test.sh");
    for (server, endpoint) in [("moto", moto), ("SeaweedFS", seaweed())] {
        let mut options = lakedrill::config::StorageOptions::default();
        options.s3.insert("endpoint".into(), endpoint);
        let s = lakedrill::io::store::Storage::new(options);
        let uri = format!("s3://{}/etag-case-{}/x.bin", bucket(), uuid::Uuid::new_v4());
        block_on(async {
            let put = s
                .put(&uri, bytes::Bytes::from_static(b"the object as sealed"))
                .await
                .unwrap();
            assert!(put.e_tag.is_some(), "{server}: an ETag");
            let key = lakedrill::io::store::s3::DeleteKey {
                uri: uri.clone(),
                e_tag: Some("\"00000000000000000000000000000000\"".into()),
                version_id: None,
            };
            // The deleter's probe finds out the same, and leaves no version or marker of its object behind.
            let probe = format!(
                "s3://{}/etag-case-{}/.lakedrill-probe/p",
                bucket(),
                uuid::Uuid::new_v4()
            );
            let found = s.s3_delete_conditions(&probe).await.unwrap();
            assert_eq!(found.delete_objects, server != "moto", "{server}: {found:?}");
            assert!(
                s.s3_versions(&probe).await.unwrap().is_empty(),
                "{server}: the probe left versions"
            );
            assert!(s.head(&probe).await.unwrap().is_none(), "{server}");
            let answers = s.s3_delete_objects(std::slice::from_ref(&key)).await.unwrap().unwrap();
            let a = &answers[&uri];
            let present = s.head(&uri).await.unwrap().is_some();
            if server == "moto" {
                // The false pass: the key is reported deleted and is gone although its ETag differs.
                assert!(a.deleted && !present, "moto changed: {a:?}, present {present}");
            } else {
                assert!(
                    !a.deleted && a.precondition_failed() && present,
                    "{a:?}, present {present}"
                );
                // With the right ETag the same request deletes it (a delete marker on the versioned bucket).
                let right = lakedrill::io::store::s3::DeleteKey {
                    e_tag: put.e_tag.clone(),
                    ..key
                };
                let answers = s.s3_delete_objects(&[right]).await.unwrap().unwrap();
                let a = &answers[&uri];
                assert!(a.deleted && a.delete_marker == Some(true), "{a:?}");
                assert!(a.delete_marker_version_id.is_some(), "{a:?}");
                assert!(s.head(&uri).await.unwrap().is_none());
            }
        });
    }
}

/// Issue 20, point 2: with `evidenceRetention` in the policy and `[evidence_retention]` in the drill plan, the
/// signed drill report, the inventory archive, the purge summary and the retirement records land on the
/// Object Lock bucket locked (GOVERNANCE, one day); removing the locked version with the plain S3 API fails;
/// `audit verify` prints each file's lock (of every kind: reports, archives, summaries, retirement records,
/// bundles, decisions) and flags a copy that carries none, a bundle or decision on the lock bucket without a
/// retention, and an inventory archive whose retention was shortened. A location that cannot hold
/// locked files is refused before anything runs.
#[test]
fn evidence_is_written_under_object_lock_and_audit_verify_reports_the_lock() {
    let lock_bucket =
        std::env::var("LAKEDRILL_TEST_S3_LOCK_BUCKET").expect("LAKEDRILL_TEST_S3_LOCK_BUCKET: run scripts/test.sh");
    let prefix = format!("lock-{}", uuid::Uuid::new_v4());
    let g = Gov::with_warehouse(
        "evidenceRetention:\n  mode: governance\n  period: 1d\n",
        Some(format!("s3://{}/{prefix}", bucket())),
    );
    let vault = format!("s3://{lock_bucket}/{prefix}");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let policy = g.policy.to_str().unwrap().to_owned();
    let key = "keys/gov-TEST-ONLY.key";
    let bundles = format!("{vault}/bundles");
    g.on_table(&[
        "--json",
        "quarantine",
        &id,
        "--policy",
        &policy,
        "--key",
        key,
        "--bundles",
        &bundles,
    ])
    .expect_code(0);
    let plan_text = |reports: &str| {
        format!(
            "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"{bundles}\"\ntrust = \"keys\"\nkey = \"{key}\"\nreports = \"{reports}\"\n[evidence_retention]\nmode = \"governance\"\nperiod = \"1d\"\n"
        )
    };
    // Reports that must be locked cannot go to a local folder: refused before the drill runs.
    let local = g.dir.join("drill-local.toml");
    std::fs::write(&local, plan_text("reports")).unwrap();
    let r = g.run(&["--json", "drill", "run", local.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("Object Lock") && r.stderr.contains("reports"),
        "{}",
        r.stderr
    );
    // Nor to a bucket without Object Lock.
    let unlocked = g.dir.join("drill-unlocked.toml");
    std::fs::write(&unlocked, plan_text(&format!("s3://{}/{prefix}-reports", bucket()))).unwrap();
    let r = g.run(&["--json", "drill", "run", unlocked.to_str().unwrap()]);
    r.expect_code(2);
    assert!(r.stderr.contains("no Object Lock configuration"), "{}", r.stderr);

    let plan = g.dir.join("drill-lock.toml");
    std::fs::write(&plan, plan_text(&format!("{vault}/reports"))).unwrap();
    let d = g
        .run(&["--json", "drill", "run", plan.to_str().unwrap()])
        .expect_code(0)
        .json();
    let report = d["report"].as_str().unwrap().to_owned();
    // `purge` of the candidate with `receipts` and `evidence`.
    let purge = |receipts: &str, evidence: &str| {
        let mut args = vec![
            "--json",
            "purge",
            &id,
            "--policy",
            &policy,
            "--trust",
            "keys",
            "--key",
            crate::governance::DELETER_KEY,
            "--receipts",
            receipts,
            "--evidence",
            evidence,
        ];
        args.extend(T);
        g.run(&args)
    };
    // A purge whose receipts could not be locked is refused (exit 2) before acceptance.
    let r = purge("receipts", &report);
    r.expect_code(2);
    assert!(r.stderr.contains("Object Lock"), "{}", r.stderr);
    let st = g.run(&["--json", "status", &id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "QUARANTINED", "{st}");
    let receipts = format!("{vault}/receipts");
    // The same signed report copied where it is not locked (a local plan folder): it does not count.
    let copy = g.dir.join("reports/weekly").join(report.rsplit('/').next().unwrap());
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    let bytes = boto(
        &g,
        &format!(
            "import sys\nsys.stdout.write(s3.get_object(Bucket='{lock_bucket}', Key='{}')['Body'].read().decode())",
            report.strip_prefix(&format!("s3://{lock_bucket}/")).unwrap()
        ),
    );
    std::fs::write(&copy, format!("{bytes}\n")).unwrap();
    let r = purge(&receipts, copy.to_str().unwrap()).expect_code(1).json();
    assert!(r["reasons"].to_string().contains("is not under Object Lock"), "{r}");
    let p = purge(&receipts, &report).expect_code(0).json();
    assert_eq!(p["status"], "VERIFIED", "{p}");
    let summary = p["summary"].as_str().unwrap().to_owned();

    // Every evidence file is locked, with a retain-until about a day ahead; its locked version cannot be deleted.
    let key_of = |uri: &str| uri.strip_prefix(&format!("s3://{lock_bucket}/")).unwrap().to_owned();
    let inventory = format!("{receipts}/{id}/inventory.dsse.json");
    let retirements: Vec<String> = boto(
        &g,
        &format!(
            "r = s3.list_objects_v2(Bucket='{lock_bucket}', Prefix='{prefix}/bundles/')\nprint(' '.join(o['Key'] for o in r.get('Contents', []) if o['Key'].endswith('retired.dsse.json')))"
        ),
    )
    .split_whitespace()
    .map(ToOwned::to_owned)
    .collect();
    assert!(!retirements.is_empty(), "retirement records were written");
    let mut files = vec![key_of(&report), key_of(&summary), key_of(&inventory)];
    files.extend(retirements);
    for k in &files {
        let out = boto(
            &g,
            &format!(
                "import datetime\nh = s3.head_object(Bucket='{lock_bucket}', Key='{k}')\n\
                 left = h['ObjectLockRetainUntilDate'] - datetime.datetime.now(datetime.timezone.utc)\n\
                 print(h.get('ObjectLockMode'), 0.9 < left.total_seconds() / 86400 <= 1.0)\n\
                 try:\n\
                 \x20   s3.delete_object(Bucket='{lock_bucket}', Key='{k}', VersionId=h['VersionId'])\n\
                 \x20   print('deleted')\n\
                 except Exception as e:\n\
                 \x20   print('refused', type(e).__name__)"
            ),
        );
        let mut lines = out.lines();
        assert_eq!(lines.next(), Some("GOVERNANCE True"), "{k}: {out}");
        assert!(lines.next().unwrap_or_default().starts_with("refused"), "{k}: {out}");
    }

    // audit verify prints the lock of the report and of the purge summary.
    for file in [&report, &summary] {
        let a = g
            .run(&["--json", "audit", "verify", file, "--trust", "keys"])
            .expect_code(0)
            .json();
        assert_eq!(a["status"], "VERIFIED", "{a}");
        assert_eq!(a["locks"][0]["mode"], "GOVERNANCE", "{a}");
        assert!(a["locks"][0]["retain_until"].as_str().is_some(), "{a}");
        let human = g.run(&["audit", "verify", file, "--trust", "keys"]);
        human.expect_code(0);
        assert!(
            human.stdout.contains("lock ") && human.stdout.contains("GOVERNANCE until"),
            "{}",
            human.stdout
        );
    }
    // A copy of the report written without a lock (as anyone with write access could) is flagged.
    let copy = format!("{prefix}/reports/weekly/copy.dsse.json");
    boto(
        &g,
        &format!(
            "b = s3.get_object(Bucket='{lock_bucket}', Key='{}')['Body'].read()\ns3.put_object(Bucket='{lock_bucket}', Key='{copy}', Body=b)",
            key_of(&report)
        ),
    );
    let a = g
        .run(&[
            "--json",
            "audit",
            "verify",
            &format!("s3://{lock_bucket}/{copy}"),
            "--trust",
            "keys",
        ])
        .expect_code(1)
        .json();
    assert_eq!(a["findings"][0]["check"], "EVIDENCE_NOT_LOCKED", "{a}");
    assert!(a["locks"][0]["mode"].is_null(), "{a}");

    // Every other kind on S3 has its lock read too: a retirement record (locked) shows its lock and verifies; a
    // bundle envelope and a governance decision on the Object Lock bucket without a retention are flagged.
    let audit = |uri: &str, code: i32| {
        g.run(&["--json", "audit", "verify", uri, "--trust", "keys"])
            .expect_code(code)
            .json()
    };
    let retired = format!("s3://{lock_bucket}/{}", files[3]);
    let a = audit(&retired, 0);
    assert_eq!(a["locks"][0]["mode"], "GOVERNANCE", "{a}");
    let bundle = retired.replace("retired.dsse.json", "bundle.dsse.json");
    let a = audit(&bundle, 1);
    assert_eq!(a["findings"][0]["check"], "EVIDENCE_NOT_LOCKED", "{a}");
    assert!(
        a["findings"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("Object Lock enabled"),
        "{a}"
    );
    assert_eq!(a["locks"][0]["file"], bundle.as_str(), "{a}");
    let doc = g.dir.join("decision.json");
    std::fs::write(
        &doc,
        serde_json::json!({"schema": "lakedrillGovernanceDecision.v1", "version": 1,
            "issuer": "governance@example.test", "issued_at": "2026-11-29T10:00:00Z",
            "table_uuid": g.py("print(t.metadata.table_uuid)"),
            "legal_holds": [{"key": "case-1", "state": "on", "scope": "table", "reason": "litigation 1"}]})
        .to_string(),
    )
    .unwrap();
    g.run(&[
        "decision",
        "sign",
        doc.to_str().unwrap(),
        "--key",
        key,
        "--out",
        "decision.dsse.json",
    ])
    .expect_code(0);
    let decision_key = format!("{prefix}/decisions/decision.dsse.json");
    boto(
        &g,
        &format!(
            "s3.put_object(Bucket='{lock_bucket}', Key='{decision_key}', Body=open('{}', 'rb').read())",
            g.dir.join("decision.dsse.json").display()
        ),
    );
    let a = audit(&format!("s3://{lock_bucket}/{decision_key}"), 1);
    assert_eq!(a["findings"][0]["check"], "EVIDENCE_NOT_LOCKED", "{a}");

    // The inventory archive verifies with its lock; its retention shortened (GOVERNANCE allows that with the
    // bypass permission) falls short of the archive's claimed evidenceRetention, read from when it was written.
    let a = audit(&inventory, 0);
    assert_eq!(a["locks"][0]["mode"], "GOVERNANCE", "{a}");
    boto(
        &g,
        &format!(
            "import datetime
s3.put_object_retention(Bucket='{lock_bucket}', Key='{}', BypassGovernanceRetention=True, \
             Retention={{'Mode': 'GOVERNANCE', 'RetainUntilDate': datetime.datetime.now(datetime.timezone.utc) + \
             datetime.timedelta(hours=1)}})",
            key_of(&inventory)
        ),
    );
    let a = audit(&inventory, 1);
    assert_eq!(a["findings"][0]["check"], "EVIDENCE_NOT_LOCKED", "{a}");
    assert!(a["findings"][0]["detail"].as_str().unwrap().contains("before"), "{a}");
}

/// The resume of an interrupted permanent delete on a provider that ignores `versionId` (the proxy writes a
/// delete marker instead, and keeps the sealed version): the first run sent its `DeleteObjects` (every key got a
/// marker) and died before recording the answers (`abort-after=1`). A plain `purge` resumes: each object has an
/// unanswered intent and is read first. That read was a HEAD of the current object, which the marker hides, so
/// every object was settled "absent at re-check after an interrupted request" and went VERIFIED, every sealed
/// version still in the bucket. Now the read asks for the sealed version: present, it is deleted again (the
/// provider writes another marker) and stays DELETE_UNKNOWN.
#[test]
fn a_resumed_permanent_delete_under_a_provider_that_ignores_the_version_is_never_verified() {
    for storage in ["", "s3_delete_objects = false"] {
        let r = resumed_permanent_delete("ignorev-resume", storage, &["--ignore-version-deletes"], |_, _| {});
        let (g, id) = (&r.g, r.id.as_str());
        assert!(
            receipts(g, id, "confirmed")
                .iter()
                .all(|r| r["provider_result"] != "absent at re-check after an interrupted request"),
            "{storage}: no object settled by a HEAD of its marker"
        );
        // Every sealed version is still there.
        let v = versions_of(g, &r.prefix, &r.keys());
        for k in r.keys() {
            assert_eq!(v[k][0], 1, "{storage}: {k}: {v}");
        }
    }
}

/// Review R3-2: the same interrupted permanent delete, but of objects whose bundle sealed no version (the proxy
/// hides `x-amz-version-id` from reads, so the seal's GETs record none; its HEADs keep it). The first run reads
/// each object's version with a HEAD, names it in its requests (the proxy writes a marker instead) and is killed
/// before any answer is recorded. The resume knows no version to ask for: the current object is absent under the
/// marker, which says nothing of the version the request named. Before the fix every object was settled
/// "absent at re-check after an interrupted request" and went VERIFIED, every version still in the bucket; now
/// each goes DELETE_UNKNOWN, for `reconcile` to settle by the version its intent receipt recorded.
#[test]
fn a_resumed_permanent_delete_of_objects_sealed_without_a_version_is_never_verified_when_the_object_is_absent() {
    for storage in ["", "s3_delete_objects = false"] {
        let r = resumed_permanent_delete(
            "unsealedv-resume",
            storage,
            &["--ignore-version-deletes", "--hide-get-versions"],
            |g, id| {
                let requested = receipts(g, id, "requested");
                assert!(!requested.is_empty(), "{storage}: the first run recorded its intents");
                assert!(
                    requested.iter().all(|r| r["version_id"].is_string()),
                    "{storage}: each request named the version its HEAD read: {requested:?}"
                );
            },
        );
        let (g, id) = (&r.g, r.id.as_str());
        let settled: Vec<Value> = receipts(g, id, "confirmed")
            .into_iter()
            .filter(|r| r["provider_result"].as_str().is_some_and(|s| s.contains("not sealed")))
            .collect();
        assert!(
            !settled.is_empty(),
            "{storage}: the objects whose request went out are settled as unknown, naming the unsealed version: {:?}",
            receipts(g, id, "confirmed")
        );
        let v = versions_of(g, &r.prefix, &r.keys());
        for k in r.keys() {
            assert_eq!(v[k][0], 1, "{storage}: {k}: every version is still there: {v}");
        }
    }
}

/// What [`resumed_permanent_delete`] leaves: the fixture, its proxy, the candidate, the table prefix, its keys.
struct Resumed {
    g: Gov,
    _proxy: CountingProxy,
    id: String,
    prefix: String,
    keys: Vec<String>,
}

impl Resumed {
    fn keys(&self) -> Vec<&str> {
        self.keys.iter().map(String::as_str).collect()
    }
}

/// A permanent-mode purge on SeaweedFS behind the counting proxy started with `flags`, killed after its first
/// delete request went out and before any answer was recorded (checked: no answer, a marker written), then
/// `between(g, candidate)`, then resumed plainly; the resume was checked to exit 1 with every object
/// DELETE_UNKNOWN and none VERIFIED.
fn resumed_permanent_delete(tag: &str, storage: &str, flags: &[&str], between: impl Fn(&Gov, &str)) -> Resumed {
    let prefix = format!("{tag}-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed_with(&prefix, storage, "objectVersioning: permanent\n", flags);
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let n = c["objects"].as_array().unwrap().len();
    let keys: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| format!("db/retention/{}", o["path"].as_str().unwrap()))
        .collect();
    let r = Resumed {
        g,
        _proxy: proxy,
        id,
        prefix,
        keys,
    };
    let (g, id) = (&r.g, r.id.as_str());
    assert_eq!(
        crate::governance::with_failpoints(g, "abort-after=1", &g.purge_args(id, Some(&ev))),
        None,
        "{storage}"
    );
    assert!(receipts(g, id, "confirmed").is_empty(), "{storage}: no answer recorded");
    let marked = versions_of(g, &r.prefix, &r.keys());
    assert!(
        r.keys().iter().any(|k| marked[*k][1].as_u64().unwrap() > 0),
        "{storage}: the request went out and the proxy wrote a marker: {marked}"
    );
    between(g, id);
    // The plain resume.
    let mut args = g.purge_args(id, None);
    args.extend(T);
    let p = g.run(&args);
    let text = format!("{}{}", p.stdout, p.stderr);
    assert_eq!(p.code, 1, "{storage}: {text}");
    let p = p.json();
    assert_eq!(p["status"], "DELETE_UNKNOWN", "{storage}: {p}");
    assert!(
        p["objects"]["VERIFIED"].as_array().is_none_or(Vec::is_empty),
        "{storage}: nothing is VERIFIED while its version is in the bucket: {p}"
    );
    assert_eq!(
        p["objects"]["DELETE_UNKNOWN"].as_array().unwrap().len(),
        n,
        "{storage}: {p}"
    );
    r
}

/// Versions and delete markers of each key under the table location on SeaweedFS: key → (versions, markers).
fn versions_of(g: &Gov, prefix: &str, keys: &[&str]) -> Value {
    let list = keys.iter().map(|k| format!("'{k}'")).collect::<Vec<_>>().join(", ");
    let out = boto(
        g,
        &format!(
            "import json\nout = {{}}\nfor k in [{list}]:\n    r = s3.list_object_versions(Bucket=bucket, Prefix='{prefix}/' + k)\n    \
             out[k] = [len([v for v in r.get('Versions', []) if v['Key'] == '{prefix}/' + k]), len([m for m in r.get('DeleteMarkers', []) if m['Key'] == '{prefix}/' + k])]\nprint(json.dumps(out))"
        ),
    );
    serde_json::from_str(&out).unwrap()
}

/// A bucket lifecycle rule ends what lakedrill holds: `quarantine o-…` reads the bucket's lifecycle configuration
/// (SeaweedFS keeps it as S3 does) and holds orphans behind delete markers only when no rule that may apply to them
/// removes their versions before the policy's `minQuarantinePeriod`, and as copies in an S3 `orphanQuarantine` only
/// when no `Expiration` there removes the copies sooner. Under a 7-day minimum: a 1-day rule refuses (naming the
/// rule, the bucket and the first file; nothing hidden) without an `orphanQuarantine`; a 30-day rule holds behind
/// markers with the rule and its end recorded, and `quarantine extend` past that end is refused (and past the end of
/// a rule shortened since, which it reads again; rules it cannot read only warn); a 1-day rule on the
/// copies refuses the copy hold too (nothing written), a 30-day one allows it. A lifecycle configuration the
/// credentials may not read (403, by the proxy) is no marker hold either. Without a minimum the 1-day rule allows
/// the marker hold and is recorded, and a marker-only purge reports that rule as its undelete window. A rule on
/// another prefix does not count.
#[test]
fn bucket_lifecycle_rules_decide_how_orphans_are_held_and_how_long() {
    let lc_bucket = format!("lakedrill-lc-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let rules = |marker_days: u32, copy_days: u32| {
        format!(
            "s3.put_bucket_lifecycle_configuration(Bucket='{lc_bucket}', LifecycleConfiguration={{'Rules': [\n\
             {{'ID': 'elsewhere', 'Status': 'Enabled', 'Filter': {{'Prefix': 'other/'}}, 'NoncurrentVersionExpiration': {{'NoncurrentDays': 1}}}},\n\
             {{'ID': 'expire-copies', 'Status': 'Enabled', 'Filter': {{'Prefix': 'vault-q/'}}, 'Expiration': {{'Days': {copy_days}}}}},\n\
             {{'ID': 'expire-noncurrent', 'Status': 'Enabled', 'Filter': {{'Prefix': 't/'}}, 'NoncurrentVersionExpiration': {{'NoncurrentDays': {marker_days}}}}}]}})"
        )
    };
    boto_bare(&format!(
        "s3.create_bucket(Bucket='{lc_bucket}')\ns3.put_bucket_versioning(Bucket='{lc_bucket}', VersioningConfiguration={{'Status': 'Enabled'}})\n{}",
        rules(1, 1)
    ));
    let g = Gov::with_warehouse("minQuarantinePeriod: 7d\n", Some(format!("s3://{lc_bucket}/t")));
    let cfg = g.dir.join("lakedrill.toml");
    let base_cfg = std::fs::read_to_string(&cfg).unwrap();
    let endpoint = |e: &str| std::fs::write(&cfg, format!("{base_cfg}[storage.s3]\nendpoint = \"{e}\"\n")).unwrap();
    endpoint(&seaweed());
    let policy = std::fs::read_to_string(&g.policy)
        .unwrap()
        .replace("maxWriterDuration: 6h", "maxWriterDuration: 1s")
        .replace("orphanSafetyInterval: 12h", "orphanSafetyInterval: 2s");
    g.write_policy(&policy);
    let loc = g.py("print(t.location())");
    let prefix = loc.trim_start_matches(&format!("s3://{lc_bucket}/")).to_owned();
    assert!(prefix.starts_with("t/"), "{loc}");
    let stray = |name: &str| {
        boto_bare(&format!(
            "s3.put_object(Bucket='{lc_bucket}', Key='{prefix}/data/{name}', Body=b'PAR1 {name} PAR1')"
        ));
        std::thread::sleep(std::time::Duration::from_secs(3));
    };
    let versions = |name: &str| -> (usize, usize) {
        let out = boto_bare(&format!(
            "k = '{prefix}/data/{name}'\nr = s3.list_object_versions(Bucket='{lc_bucket}', Prefix=k)\n\
             print(len([v for v in r.get('Versions', []) if v['Key'] == k]), len([m for m in r.get('DeleteMarkers', []) if m['Key'] == k]))"
        ));
        let mut n = out.split_whitespace().map(|x| x.parse::<usize>().unwrap());
        (n.next().unwrap(), n.next().unwrap())
    };
    let copies = || -> usize {
        boto_bare(&format!(
            "print(s3.list_objects_v2(Bucket='{lc_bucket}', Prefix='vault-q/').get('KeyCount', 0))"
        ))
        .trim()
        .parse()
        .unwrap()
    };
    let candidate = || {
        let c = crate::orphans::orphan_candidate(&g.plan());
        c["candidate_id"].as_str().unwrap().to_owned()
    };
    let refused = |id: &str, parts: &[&str]| {
        let r = g.quarantine(id, "tag");
        r.expect_code(1);
        for part in parts {
            assert!(r.stdout.contains(part), "{part}: {}", r.stdout);
        }
        assert!(!r.stdout.contains("elsewhere"), "{}", r.stdout);
    };

    // 1 day < 7 days, no orphanQuarantine: refused naming the rule, the bucket, the first file and the minimum.
    stray("a.parquet");
    let id = candidate();
    let first = format!("s3://{lc_bucket}/{prefix}/data/a.parquet");
    refused(
        &id,
        &[
            "expire-noncurrent",
            &lc_bucket,
            "1 of the 1 held file(s)",
            &first,
            "minQuarantinePeriod",
            "orphanQuarantine",
        ],
    );
    assert_eq!(versions("a.parquet"), (1, 0));
    // A configuration the credentials may not read: how long a marker holds is unknown, no marker hold either.
    let proxy = CountingProxy::start(&seaweed(), &g.dir, &["--no-lifecycle"]);
    endpoint(&proxy.endpoint);
    refused(
        &id,
        &["could not be read", "s3:GetLifecycleConfiguration", "AccessDenied"],
    );
    assert_eq!(versions("a.parquet"), (1, 0));
    endpoint(&seaweed());

    // 30 days ≥ 7 days: held behind a delete marker; the record names the rule and when it ends the hold, and the
    // quarantine cannot be extended past that.
    boto_bare(&rules(30, 1));
    let q = g.quarantine(&candidate(), "tag").expect_code(0).json();
    let id = q["candidate"]["candidate_id"].as_str().unwrap().to_owned();
    let held = &q["candidate"]["quarantine"];
    assert_eq!(held["hold"], "delete-marker", "{q}");
    assert_eq!(held["hold_lifecycle_rule"]["rule_id"], "expire-noncurrent", "{q}");
    assert_eq!(held["hold_lifecycle_rule"]["noncurrent_days"], 30, "{q}");
    assert!(held["hold_reason"].as_str().unwrap().contains("30d"), "{q}");
    let since = chrono::DateTime::parse_from_rfc3339(held["quarantined_at"].as_str().unwrap()).unwrap();
    let ends = chrono::DateTime::parse_from_rfc3339(held["hold_ends_at"].as_str().unwrap()).unwrap();
    assert_eq!(ends - since, chrono::Duration::days(30), "{q}");
    assert_eq!(versions("a.parquet"), (1, 1));
    let extend = |by: &str| g.run(&["--json", "quarantine", "extend", &id, "--by", by, "--reason", "audit"]);
    let r = extend("40d").expect_code(1).json();
    assert_eq!(r["status"], "REFUSED", "{r}");
    assert!(
        r["reasons"][0]
            .as_str()
            .unwrap()
            .contains("lifecycle rule expire-noncurrent"),
        "{r}"
    );
    assert_eq!(extend("10d").expect_code(0).json()["status"], "EXTENDED");
    let held_30 = id.clone();

    // 1 day again, with an orphanQuarantine on this bucket whose copies a 1-day rule expires: no hold at all, and
    // no copy written. With 30 days on the copies: held as write-once copies, that rule recorded.
    boto_bare(&rules(1, 1));
    g.write_policy(&format!("{policy}orphanQuarantine: s3://{lc_bucket}/vault-q\n"));
    stray("b.parquet");
    let id = candidate();
    refused(
        &id,
        &[
            "the copies cannot be held either",
            "expire-copies",
            "expires objects",
            "minQuarantinePeriod",
        ],
    );
    assert_eq!((versions("b.parquet"), copies()), ((1, 0), 0));
    boto_bare(&rules(1, 30));
    let q = g.quarantine(&id, "tag").expect_code(0).json();
    let held = &q["candidate"]["quarantine"];
    assert_eq!(held["hold"], "quarantine-copy", "{q}");
    assert_eq!(held["hold_lifecycle_rule"]["rule_id"], "expire-copies", "{q}");
    let reason = held["hold_reason"].as_str().unwrap();
    assert!(
        reason.contains("expire-noncurrent") && reason.contains("write-once copies"),
        "{q}"
    );
    assert_eq!(copies(), 1, "{q}");

    // Without minQuarantinePeriod, the 1-day rule allows the marker hold, recorded.
    let no_min = policy.replace("minQuarantinePeriod: 7d\n", "");
    g.write_policy(&no_min);
    stray("c.parquet");
    let q = g.quarantine(&candidate(), "tag").expect_code(0).json();
    let held = &q["candidate"]["quarantine"];
    assert_eq!(held["hold"], "delete-marker", "{q}");
    assert_eq!(held["hold_lifecycle_rule"]["noncurrent_days"], 1, "{q}");
    // `plan` warns of a hold ending within 7 days, and of one ending before a minQuarantinePeriod bound since lets
    // a purge take it; the holds that end in 30 days are not named.
    let c_id = q["candidate"]["candidate_id"].as_str().unwrap().to_owned();
    let warnings = |about: &str| -> Vec<String> {
        g.plan()["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_owned())
            .filter(|w| w.contains("ends its hold") && w.contains(&format!("orphan candidate {about}:")))
            .collect()
    };
    let warned = |about: &str, needle: &str| {
        let w = warnings(about);
        assert!(w.len() == 1 && w[0].contains(needle), "{about}: {w:?}");
        w[0].clone()
    };
    warned(&c_id, "expire-noncurrent ends its hold");
    g.write_policy(&policy);
    warned(&c_id, "before the policy's minQuarantinePeriod lets a purge take it");
    // The marker hold recorded under the 30-day rule: the rule was shortened to a day since, which its record
    // does not know. Every plan reads the rules again and names the rule, its bucket and that it was read now; the
    // copy hold, whose 30-day rule stands, is not named.
    let w = warned(&held_30, "before the policy's minQuarantinePeriod lets a purge take it");
    assert!(
        w.contains("expire-noncurrent") && w.contains(&lc_bucket) && w.contains("read now"),
        "{w}"
    );
    assert!(warnings(&id).is_empty(), "{:?}", warnings(&id));
    // `quarantine extend` reads the rules again too: extended by a day (to 11 days from now, inside the 30 days
    // recorded), the hold the 1-day rule read now ends is refused, naming that rule as read now.
    let extend_30 = |by: &str| {
        g.run(&[
            "--json",
            "quarantine",
            "extend",
            &held_30,
            "--by",
            by,
            "--reason",
            "audit",
        ])
    };
    let r = extend_30("1d").expect_code(1).json();
    let why = r["reasons"][0].as_str().unwrap();
    assert!(
        r["status"] == "REFUSED"
            && why.contains("expire-noncurrent")
            && why.contains(&lc_bucket)
            && why.contains("read now"),
        "{r}"
    );
    // Credentials that may not read the rules now: named, with the candidates it leaves unjudged.
    let proxy = CountingProxy::start(&seaweed(), &g.dir, &["--no-lifecycle"]);
    endpoint(&proxy.endpoint);
    // An extension only postpones a purge: rules that cannot be read do not stop it, it warns naming the bucket.
    let r = extend_30("1d").expect_code(0).json();
    let w = r["warnings"][0].as_str().unwrap_or_default();
    assert!(
        r["status"] == "EXTENDED" && w.contains("could not be read now") && w.contains(&lc_bucket),
        "{r}"
    );
    let w: Vec<String> = g.plan()["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .filter(|w| w.contains("could not be read now"))
        .collect();
    assert!(
        w.len() == 1 && w[0].contains(&lc_bucket) && w[0].contains(&held_30) && w[0].contains(&c_id),
        "{w:?}"
    );
    endpoint(&seaweed());
    g.write_policy(&no_min);

    // A marker-only purge of a snapshot candidate on this bucket says how long `undelete` can bring its objects
    // back: the 1-day rule's window. Bundles beside the orphan bundles above: the weekly gate wants every
    // quarantined bundle drilled.
    let (_, _, r) = g.chain(g.dir.to_str().unwrap());
    assert_eq!(r["status"], "VERIFIED", "{r}");
    assert_eq!(r["undelete_window"]["rule"]["rule_id"], "expire-noncurrent", "{r}");
    assert_eq!(r["undelete_window"]["days"], 1, "{r}");
}

/// Folder markers (zero-byte objects whose key ends with `/`, as the S3 console and Hadoop S3A write them) are
/// listed without the slash: `t/data/` as `data`, `t/` as the table root itself. They are unreferenced and old, and
/// were proposed as orphans; the quarantine then read `t/data`, found nothing and refused the whole candidate
/// ("gone since the plan"), plan after plan. Now they are kept (kept_unreferenced says why), never removed, and the
/// table's real stray file is quarantined.
#[test]
fn folder_marker_keys_are_never_orphans_and_do_not_stop_an_orphan_quarantine() {
    let (g, _proxy, prefix) = orphans_on_seaweed("orphans-folder-markers");
    boto(
        &g,
        &format!(
            "for k, b in [('data/stray.parquet', b'PAR1 stray PAR1'), ('', b''), ('data/', b''), ('empty/', b'')]:\n    \
             s3.put_object(Bucket=bucket, Key='{prefix}/' + k, Body=b)"
        ),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let plan = g.plan();
    let c = crate::orphans::orphan_candidate(&plan);
    assert_eq!(crate::orphans::object_paths(&c), ["data/stray.parquet"], "{c}");
    for marker in ["data", "empty"] {
        let why = crate::orphans::reasons_of(&plan["kept_unreferenced"], marker);
        assert!(why[0].starts_with("folder-marker: "), "{marker}: {why:?}");
    }
    let q = g
        .quarantine(c["candidate_id"].as_str().unwrap(), "tag")
        .expect_code(0)
        .json();
    assert_eq!(q["candidate"]["state"], "QUARANTINED", "{q}");
    let left = boto(
        &g,
        &format!(
            "print(sorted(o['Key'][len('{prefix}/'):] for o in s3.list_objects_v2(Bucket=bucket, Prefix='{prefix}/')['Contents'] if o['Size'] == 0))"
        ),
    );
    assert_eq!(left.trim(), "['', 'data/', 'empty/']", "the markers stay");
}

/// The orphan take-out's delete is conditional on the ETag read (`If-Match`), so that a file overwritten since is
/// never hidden or removed; it is sent only where the provider is known to honour that. Where the probe says it
/// does not (played on SeaweedFS by the failpoint `s3-conditions-ignored`, which changes only what the real probe
/// reports), every file stays in place, visible and without a marker, and the candidate ends (nothing of it is
/// held: RELEASED), its record saying why.
/// Quarantined again where the provider honours it, the same file is hidden behind a marker.
#[test]
fn the_orphan_take_out_stays_in_place_where_the_provider_ignores_if_match() {
    let (g, proxy, prefix) = orphans_on_seaweed("orphans-if-match");
    boto(
        &g,
        &format!("s3.put_object(Bucket=bucket, Key='{prefix}/data/stray.parquet', Body=b'PAR1 stray PAR1')"),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let versions = || {
        boto(
            &g,
            &format!(
                "k = '{prefix}/data/stray.parquet'\nr = s3.list_object_versions(Bucket=bucket, Prefix=k)\n\
                 print(len(r.get('Versions', [])), len(r.get('DeleteMarkers', [])))"
            ),
        )
        .trim()
        .to_owned()
    };
    let id = |p: &Value| {
        crate::orphans::orphan_candidate(p)["candidate_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let first = id(&g.plan());
    let mut args = g.quarantine_args(&first, "tag");
    args.extend(T);
    let q = crate::util::lakedrill_in_env(&g.dir, &args, &[("LAKEDRILL_FAILPOINTS", "s3-conditions-ignored=1")]);
    let text = format!("{}{}", q.stdout, q.stderr);
    assert!(
        text.contains("does not honour If-Match") && text.contains("stays in place"),
        "{text}"
    );
    assert_eq!(versions(), "1 0", "the file is neither hidden nor removed: {text}");
    let status = g.run(&["--json", "status", &first]).expect_code(0).json();
    let c = &status["candidates"][0]["candidate"];
    assert_eq!(c["state"], "RELEASED", "{status}");
    assert!(
        c["quarantine"]["stayed_in_place"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("does not honour If-Match"),
        "{status}"
    );
    assert!(
        proxy.requests().iter().any(|(_, m, _)| m.starts_with("PROBE-")),
        "the probe ran"
    );
    let second = id(&g.plan());
    let q = g.quarantine(&second, "tag").expect_code(0).json();
    assert_eq!(q["candidate"]["state"], "QUARANTINED", "{q}");
    assert_eq!(versions(), "1 1", "held behind a delete marker: {q}");
}

/// Orphans on a versioned bucket (SeaweedFS): `quarantine o-…` hides them behind delete markers (the version
/// stays, checked); the orphan bundle verifies against those versions; `restore --put-back` removes the markers
/// and the files are back byte for byte; quarantined again under a new id, drilled and purged through the
/// acceptance point, their versions are gone for good with receipts quoting the provider, and the hidden `.crc`
/// sidecar is never touched. Deleting the version behind a marker makes a drill FAIL naming the file.
#[test]
fn orphans_on_a_versioned_bucket_hide_behind_delete_markers_come_back_byte_for_byte_and_purge_their_versions() {
    // A prefix of its own: files another run left at a shared location would be this table's orphans too.
    let (g, _proxy, prefix) = orphans_on_seaweed("orphans-markers");
    boto(
        &g,
        &format!(
            "for k, b in [('data/stray-a.parquet', b'PAR1 stray a PAR1'), ('data/stray-b.parquet', b'PAR1 stray b PAR1'), ('data/.stray-a.parquet.crc', b'crc')]:\n    \
             s3.put_object(Bucket=bucket, Key='{prefix}/' + k, Body=b)\n\
             keys = [o['Key'] for o in s3.list_objects_v2(Bucket=bucket, Prefix='{prefix}/metadata/')['Contents']]\n\
             m = [k for k in keys if k.endswith('.avro') and '/snap-' not in k][0]\n\
             s3.copy_object(Bucket=bucket, Key='{prefix}/metadata/merge-leftover-m0.avro', CopySource={{'Bucket': bucket, 'Key': m}})\n\
             j = sorted(k for k in keys if k.endswith('.metadata.json'))[-1]\n\
             s3.copy_object(Bucket=bucket, Key='{prefix}/metadata/00000-dropped-from-log.metadata.json', CopySource={{'Bucket': bucket, 'Key': j}})"
        ),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    // An uncommitted writer's files, a manifest left by a merge, a metadata JSON dropped from the log.
    let strays = [
        "data/stray-a.parquet",
        "data/stray-b.parquet",
        "metadata/00000-dropped-from-log.metadata.json",
        "metadata/merge-leftover-m0.avro",
    ];
    let each = |versions: u32, markers: u32| -> Value {
        strays
            .iter()
            .map(|k| ((*k).to_owned(), serde_json::json!([versions, markers])))
            .collect()
    };
    let (orphans, paths) = (crate::orphans::orphan_candidate, crate::orphans::object_paths);
    let bodies = || {
        boto(
            &g,
            &format!(
                "print([s3.get_object(Bucket=bucket, Key='{prefix}/' + k)['Body'].read().decode() for k in ['data/stray-a.parquet', 'data/stray-b.parquet']])"
            ),
        )
    };
    let plan = g.plan();
    let c = orphans(&plan);
    assert_eq!(paths(&c), strays, "{c}");
    // Plain remove_orphan_files at the same age (Iceberg Java's set, by the oracle test) takes exactly these.
    let mut plain: Vec<String> = plan["plain_orphans"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    plain.sort();
    assert_eq!(plain, strays, "{plan}");
    let q = g
        .quarantine(c["candidate_id"].as_str().unwrap(), "tag")
        .expect_code(0)
        .json();
    assert_eq!(q["candidate"]["quarantine"]["hold"], "delete-marker", "{q}");
    assert_eq!(versions_of(&g, &prefix, &strays), each(1, 1));
    let bundle = q["bundles"][0]["uri"].as_str().unwrap().to_owned();
    let r = g
        .run(&["--json", "restore", &bundle, "--trust", "keys"])
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    // Put back by an operator: the markers go, the same versions are current, byte for byte.
    let r = g
        .run(&["--json", "restore", &bundle, "--trust", "keys", "--put-back"])
        .expect_code(0)
        .json();
    assert_eq!(r["status"], "PUT_BACK", "{r}");
    assert_eq!(bodies(), "['PAR1 stray a PAR1', 'PAR1 stray b PAR1']");
    assert_eq!(versions_of(&g, &prefix, &strays), each(1, 0));

    // Again, under a new candidate id: quarantined, drilled, purged for good.
    let c = orphans(&g.plan());
    assert_eq!(paths(&c), strays, "{c}");
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    g.quarantine(&id, "tag").expect_code(0);
    let ev = g.drill("bundles");
    let r = g.purge(&id, Some(&ev), &[]).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    let mut deleted: Vec<String> = r["objects"]["VERIFIED"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    deleted.sort();
    assert_eq!(deleted, strays, "{r}");
    let v = versions_of(&g, &prefix, &strays);
    for k in strays {
        assert_eq!(v[k][0], 0, "{k}: {v}");
    }
    for rc in receipts(&g, &id, "confirmed") {
        assert_eq!(rc["provider_result"], "deleted", "{rc}");
        assert_eq!(rc["permanent"], true, "{rc}");
        assert!(rc["version_id"].as_str().is_some_and(|v| !v.is_empty()), "{rc}");
    }
    assert_eq!(
        versions_of(&g, &prefix, &["data/.stray-a.parquet.crc"])["data/.stray-a.parquet.crc"][0],
        1
    );

    // One more: its version deleted behind the marker, the drill FAILS naming it.
    boto(
        &g,
        &format!("s3.put_object(Bucket=bucket, Key='{prefix}/data/stray-c.parquet', Body=b'PAR1 stray c PAR1')"),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let c = orphans(&g.plan());
    assert_eq!(paths(&c), vec!["data/stray-c.parquet".to_owned()], "{c}");
    g.quarantine(c["candidate_id"].as_str().unwrap(), "tag").expect_code(0);
    boto(
        &g,
        &format!(
            "k = '{prefix}/data/stray-c.parquet'\nfor v in s3.list_object_versions(Bucket=bucket, Prefix=k).get('Versions', []):\n    \
             s3.delete_object(Bucket=bucket, Key=k, VersionId=v['VersionId'])"
        ),
    );
    let plan = g.dir.join("drill-bundles.toml");
    let r = g.run(&["--json", "drill", "run", plan.to_str().unwrap()]);
    r.expect_code(1);
    assert!(
        r.stdout.contains("data/stray-c.parquet") && r.stdout.contains("OBJECT_MISSING"),
        "{}",
        r.stdout
    );
}

/// `undelete` only undoes a purge that can delete no more. A marker-only purge on a versioned bucket whose
/// responses were lost (every second single delete: each took effect, its answer never came) ends
/// `DELETE_UNKNOWN`: `undelete` is refused (exit 1, naming the state and `reconcile`) and every object stays behind
/// its delete marker. Before, it brought them back (exit 0, UNDELETED), and `reconcile` then deleted the
/// `DELETE_UNKNOWN` ones again and signed a summary calling every object deleted. Once `reconcile` settled the
/// purge (VERIFIED), `undelete` brings every object back, and a `reconcile` of the undeleted (`PROTECTED`)
/// candidate is refused, deleting nothing and signing nothing.
#[test]
fn undelete_of_a_delete_unknown_purge_waits_for_reconcile_and_reconcile_leaves_an_undeleted_candidate_alone() {
    let prefix = format!("undel-unknown-{}", uuid::Uuid::new_v4());
    let (g, _proxy) = on_seaweed(&prefix, "s3_delete_objects = false", "");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let keys: Vec<String> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| format!("{prefix}/db/retention/{}", o["path"].as_str().unwrap()))
        .collect();
    let present = || -> usize {
        let listed: Vec<String> = serde_json::from_str(&boto(
            &g,
            &format!(
                "import json\nk = []\nfor page in s3.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix='{prefix}/db/retention/'):\n\
                 \x20   k.extend(o['Key'] for o in page.get('Contents', []))\n\
                 print(json.dumps(k))"
            ),
        ))
        .unwrap();
        keys.iter().filter(|k| listed.contains(k)).count()
    };
    assert_eq!(
        crate::governance::with_failpoints(&g, "lose-every=2", &g.purge_args(id, Some(&ev))),
        Some(1)
    );
    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "DELETE_UNKNOWN", "{st}");
    assert_eq!(present(), 0, "every delete took effect; only answers were lost");
    let undelete = || g.on_table(&["--json", "undelete", id, "--trust", "keys"]);
    let u = undelete();
    assert_eq!(u.code, 1, "{}{}", u.stdout, u.stderr);
    let u = u.json();
    assert_eq!(u["status"], "REFUSED", "{u}");
    let reason = u["reason"].as_str().unwrap();
    assert!(
        reason.contains("DELETE_UNKNOWN") && reason.contains("reconcile"),
        "names the state and what to do: {u}"
    );
    assert_eq!(present(), 0, "nothing was brought back");
    // reconcile settles the purge; then undelete brings every object back.
    let r = g.reconcile(id).expect_code(0).json();
    assert_eq!(r["status"], "VERIFIED", "{r}");
    let u = undelete().expect_code(0).json();
    assert_eq!(u["status"], "UNDELETED", "{u}");
    assert!(
        u["objects"].as_array().unwrap().iter().all(|o| o["verified"] == true),
        "{u}"
    );
    assert_eq!(present(), keys.len());
    // The undeleted candidate is PROTECTED: reconcile has nothing to settle, deletes nothing, signs nothing.
    let r = g.reconcile(id);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let r = r.json();
    assert_eq!(r["status"], "REFUSED", "{r}");
    assert!(r["summary"].is_null(), "{r}");
    assert_eq!(present(), keys.len(), "every object stays");
}

/// A provider that ignores `versionId` in deletes (the proxy plays one in front of SeaweedFS): asked to delete
/// the sealed version of each key, it writes a delete marker on top instead and answers `DeleteMarker = true`
/// with the marker's version, in `DeleteObjects` and in a single `DELETE ?versionId=`. A permanent purge took
/// that for the version's delete and re-checked with a HEAD of the current object (404 under the marker): every
/// object VERIFIED while every sealed version was still in the bucket. Now the answer must name the version asked
/// for and no marker, and the re-check asks for the version: nothing is VERIFIED and every sealed version is
/// still listed.
#[test]
fn a_provider_that_writes_a_delete_marker_instead_of_deleting_the_version_is_never_verified() {
    for storage in ["", "s3_delete_objects = false"] {
        let prefix = format!("ignorev-{}", uuid::Uuid::new_v4());
        let (g, proxy) = on_seaweed_with(
            &prefix,
            storage,
            "objectVersioning: permanent\n",
            &["--ignore-version-deletes"],
        );
        let (c, ev) = g.quarantined();
        let id = c["candidate_id"].as_str().unwrap();
        let mut args = g.purge_args(id, Some(&ev));
        args.extend(T);
        let p = g.run(&args);
        let text = format!("{}{}", p.stdout, p.stderr);
        let n = c["objects"].as_array().unwrap().len();
        assert_eq!(
            proxy.requests().iter().filter(|(_, m, _)| m == "MARKER").count(),
            n,
            "{storage}: the proxy wrote a marker for every key: {:?}",
            proxy.requests()
        );
        assert_eq!(p.code, 1, "{storage}: {text}");
        let p = p.json();
        assert_eq!(p["status"], "DELETE_UNKNOWN", "{storage}: {p}");
        assert!(
            p["objects"]["VERIFIED"].as_array().is_none_or(Vec::is_empty),
            "{storage}: {p}"
        );
        assert_eq!(
            p["objects"]["DELETE_UNKNOWN"].as_array().unwrap().len(),
            n,
            "{storage}: {p}"
        );
        for r in receipts(&g, id, "confirmed") {
            assert!(
                r["provider_result"].as_str().unwrap().contains("DeleteMarker = true"),
                "{storage}: {r}"
            );
        }
        // Every sealed version is still in the bucket, under its marker.
        let keys: Vec<String> = c["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| format!("db/retention/{}", o["path"].as_str().unwrap()))
            .collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let v = versions_of(&g, &prefix, &keys);
        for k in &keys {
            assert_eq!(v[*k], serde_json::json!([1, 1]), "{storage}: {k}: {v}");
        }
    }
}

/// A provider that cuts a listing short (a page of 3 keys marked truncated, without a continuation token, as
/// ListObjects V1 providers answer V2 requests): object_store ends the listing there without reading
/// `IsTruncated`, and the plan took the first keys for the whole table, so whatever it did not see (another
/// table's metadata nested under this one, the files a later page names) could not keep anything. Now the end of
/// every S3 listing is checked with one request for the first key after the last one listed: the plan is refused
/// (exit 2) naming the listing and the key beyond it, and nothing is proposed.
#[test]
fn a_listing_cut_short_without_a_continuation_token_is_refused_not_read_as_the_whole_table() {
    let (g, proxy, prefix) = orphans_on_seaweed_with(
        "orphans-cut-listing",
        "",
        &["--truncate-listings", "3", "^(?!.*max-keys=1)"],
    );
    boto(
        &g,
        &format!("s3.put_object(Bucket=bucket, Key='{prefix}/data/stray.parquet', Body=b'PAR1 stray PAR1')"),
    );
    std::thread::sleep(std::time::Duration::from_secs(3));
    let r = g.on_table(&["--json", "plan", "--policy", g.policy.to_str().unwrap()]);
    let text = format!("{}{}", r.stdout, r.stderr);
    assert!(
        proxy.requests().iter().any(|(_, m, _)| m == "TRUNCATED"),
        "the proxy cut a listing: {:?}",
        proxy.requests()
    );
    assert_eq!(r.code, 2, "{text}");
    assert!(
        text.contains("cut the listing short") && text.contains(&prefix),
        "{text}"
    );
}

/// The purge's re-check by listing (`s3_recheck_by_listing`) concluded that every key of the batch the listing
/// did not reach was absent once the listing ended, also where the provider had cut it short: a delete that
/// never took effect would be VERIFIED. Now keys past the first key the bucket holds beyond the listing are not
/// decided by it and are HEADed. Through a proxy cutting every re-check page to one key, the purge still ends
/// VERIFIED, and the objects past the cut were HEADed (none before the fix).
#[test]
fn the_recheck_by_listing_decides_nothing_past_where_a_provider_cut_it_short() {
    let prefix = format!("cut-recheck-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed_with(
        &prefix,
        "s3_recheck_by_listing = true",
        "",
        &["--truncate-listings", "1", "start-after=(?!.*max-keys=1)"],
    );
    let (c, _, r) = g.chain(&format!("s3://{}/{prefix}-vault", bucket()));
    let n = c["objects"].as_array().unwrap().len();
    assert!(n >= 3, "{c}");
    assert!(
        proxy.requests().iter().any(|(_, m, _)| m == "TRUNCATED"),
        "the proxy cut a re-check listing: {:?}",
        proxy.requests()
    );
    assert_eq!(r["objects"]["VERIFIED"].as_array().unwrap().len(), n, "{r}");
    assert!(
        r["requests"]["recheck_heads"].as_u64().is_some_and(|h| h >= 1),
        "the keys past the cut were HEADed: {r}"
    );
}

/// Review R3-5: an `undelete` whose check of an object fails after it removed the object's delete marker left the
/// object `VERIFIED` (deleted) in the registry although the marker was gone. Two objects of a marker-only purge:
/// one deleted again by another client after a new version was written at its key (the undelete removes that
/// client's marker and finds bytes that differ from the bundle), and one whose reads the credentials of the undelete
/// may not make (the proxy answers 403 to its HEAD and GET: the check after the removal fails with an error). Both
/// markers are removed; both objects are `PROTECTED` (possibly back), none stays `VERIFIED`. Before the fix the
/// first stayed `VERIFIED` and the error of the second aborted the undelete with it `VERIFIED` too.
#[test]
fn an_undelete_whose_check_fails_after_a_marker_removal_protects_the_object() {
    let prefix = format!("undel-checkfail-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed(&prefix, "", "");
    let (c, _, r) = g.chain(&format!("s3://{}/{prefix}-vault", bucket()));
    assert_eq!(r["status"], "VERIFIED", "{r}");
    let id = c["candidate_id"].as_str().unwrap();
    let paths: Vec<&str> = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .collect();
    let n = paths.len();
    assert!(n >= 2, "{c}");
    let (differs, unreadable) = (paths[0], paths[1]);
    let key = |p: &str| format!("{prefix}/db/retention/{p}");
    // Another client writes other bytes at the first key and deletes them (a marker on top of its version).
    boto(
        &g,
        &format!(
            "s3.put_object(Bucket=bucket, Key='{k}', Body=b'other bytes')\ns3.delete_object(Bucket=bucket, Key='{k}')",
            k = key(differs)
        ),
    );
    // The undelete goes through a proxy that forbids every read of the second key.
    // (By its file name, which is unique, as the request path carries it: a regex of its characters escaped.)
    let name = unreadable.rsplit('/').next().unwrap();
    let forbid: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() {
                ch.to_string()
            } else {
                format!("\\{ch}")
            }
        })
        .chain(std::iter::once("$".to_owned()))
        .collect();
    let p2 = g.dir.join("p2");
    std::fs::create_dir_all(&p2).unwrap();
    let proxy2 = CountingProxy::start(&seaweed(), &p2, &["--forbid-reads", &forbid]);
    let cfg = g.dir.join("lakedrill.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text.replace(&proxy.endpoint, &proxy2.endpoint);
    std::fs::write(&cfg, text).unwrap();

    let u = g.on_table(&["--json", "undelete", id, "--trust", "keys"]);
    let out = format!("{}{}", u.stdout, u.stderr);
    let u = u.expect_code(1).json();
    assert_eq!(u["status"], "INCOMPLETE", "{out}");
    let of = |p: &str| {
        u["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["key"] == p)
            .cloned()
            .unwrap_or_else(|| panic!("{p} in {u}"))
    };
    let d = of(differs);
    assert!(d["action"].as_str().unwrap().contains("removed"), "{d}");
    assert_eq!(d["verified"], false, "{d}");
    assert!(d["check"].as_str().unwrap().contains("differs from the bundle"), "{d}");
    let x = of(unreadable);
    assert!(x["action"].as_str().unwrap().contains("removed"), "{x}");
    assert_eq!(x["verified"], false, "{x}");
    assert!(x["check"].as_str().unwrap().contains("could not be checked"), "{x}");
    assert!(
        proxy2.requests().iter().any(|(_, m, _)| m == "FORBIDDEN"),
        "the check's read was refused: {:?}",
        proxy2.requests()
    );

    let st = g.run(&["--json", "status", id]).expect_code(0).json();
    assert_eq!(st["candidates"][0]["candidate"]["state"], "PROTECTED", "{st}");
    let counts = &st["candidates"][0]["object_counts"];
    assert_eq!(
        counts["VERIFIED"].as_u64().unwrap_or(0),
        0,
        "nothing possibly back is VERIFIED: {st}"
    );
    assert_eq!(counts["PROTECTED"].as_u64(), Some(n as u64), "{st}");
    // The second object's marker is gone: its sealed version is current again.
    let v = versions_of(&g, &prefix, &[&format!("db/retention/{unreadable}")]);
    assert_eq!(
        v[format!("db/retention/{unreadable}")],
        serde_json::json!([1, 0]),
        "{v}"
    );
}

/// Review R1-5: a deep verification whose read of an object fails with a store error (not a missing object) said
/// only "storage error" in its `READ_FAILED` finding, so a forbidden or throttled read could not be told from
/// another. A quarantined table on SeaweedFS, drilled through a proxy that answers 403 to every read of one data
/// file: the drill fails that bundle with a `READ_FAILED` finding on the file that names the operation, the
/// object and the store's answer.
#[test]
fn a_read_failed_finding_names_the_operation_and_the_stores_reason() {
    let prefix = format!("readfailed-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed(&prefix, "", "");
    let c = g.candidate();
    let id = c["candidate_id"].as_str().unwrap();
    g.quarantine(id, "tag").expect_code(0);
    let data = c["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["path"].as_str().unwrap())
        .find(|p| p.ends_with(".parquet"))
        .expect("a candidate data file");
    // The drill reads through a proxy that forbids every read of that file (by its unique file name).
    let name = data.rsplit('/').next().unwrap();
    let forbid: String = name
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() {
                ch.to_string()
            } else {
                format!("\\{ch}")
            }
        })
        .chain(std::iter::once("$".to_owned()))
        .collect();
    let p2 = g.dir.join("p2");
    std::fs::create_dir_all(&p2).unwrap();
    let proxy2 = CountingProxy::start(&seaweed(), &p2, &["--forbid-reads", &forbid]);
    let cfg = g.dir.join("lakedrill.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace(&proxy.endpoint, &proxy2.endpoint)).unwrap();
    let plan = g.dir.join("drill-bundles.toml");
    std::fs::write(
        &plan,
        "name = \"weekly-bundles\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"keys\"\nkey = \"keys/gov-TEST-ONLY.key\"\nreports = \"reports\"\n",
    )
    .unwrap();
    let r = g.run(&["--json", "drill", "run", plan.to_str().unwrap()]);
    let out = format!("{}{}", r.stdout, r.stderr);
    let r = r.expect_code(1).json();
    assert!(
        proxy2.requests().iter().any(|(_, m, _)| m == "FORBIDDEN"),
        "the read was refused: {:?}",
        proxy2.requests()
    );
    let read_failed: Vec<&Value> = r["predicate"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|x| x["findings"].as_array().unwrap())
        .filter(|f| f["kind"] == "READ_FAILED")
        .collect();
    assert_eq!(read_failed.len(), 1, "{out}");
    let f = read_failed[0];
    let uri = format!("s3://{}/{prefix}/db/retention/{data}", bucket());
    assert_eq!(f["path"], uri.as_str(), "{f}");
    let actual = f["actual"].as_str().unwrap();
    assert_ne!(actual, "storage error", "{f}");
    assert!(
        actual.starts_with(&format!("cannot read {uri}: ")),
        "names the operation and the object: {f}"
    );
    assert!(
        actual.contains("403 Forbidden") && actual.contains("AccessDenied"),
        "names the store's answer: {f}"
    );
}

// Review V3: the client of the deleter's own S3 requests followed redirects. A provider or gateway answering a
// single `DELETE` with `303 See Other` to the same URL got a GET of the object, whose `200` (the object's bytes,
// read whole) the deleter took as "deleted" and quoted in the receipt as the provider's delete answer. Redirects are
// answers now, never followed: the redirected delete is no delete (its receipt quotes the 303), the object, still
// there, is not counted deleted, and no GET of it was sent.
#[test]
fn a_redirected_delete_is_not_followed_nor_taken_as_a_delete() {
    let prefix = format!("redirect-{}", uuid::Uuid::new_v4());
    let (g, proxy) = on_seaweed_with(
        &prefix,
        "",
        "",
        &["--no-delete-objects", "--redirect-delete", r"\.parquet$"],
    );
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap().to_owned();
    let mut args = g.purge_args(&id, Some(&ev));
    args.extend(T);
    let r = g.run(&args);
    let out = format!("{}\n{}", r.stdout, r.stderr);
    let requests = proxy.requests();
    assert!(
        requests.iter().any(|(_, m, _)| m == "REDIRECTED"),
        "a delete was redirected: {requests:?}\n{out}"
    );
    let first = requests
        .iter()
        .position(|(_, m, p)| m == "DELETE" && p.split('?').next().is_some_and(|p| p.ends_with(".parquet")))
        .unwrap_or_else(|| panic!("a DELETE of a data file: {requests:?}"));
    let key = requests[first].2.split('?').next().unwrap().to_owned();
    assert!(
        !requests[first + 1..]
            .iter()
            .any(|(_, m, p)| m == "GET" && p.split('?').next() == Some(key.as_str())),
        "no GET of {key} followed the redirect: {requests:?}"
    );
    let name = key.rsplit('/').next().unwrap().to_owned();
    for rc in receipts(&g, &id, "confirmed") {
        if rc.to_string().contains(&name) {
            assert_ne!(
                rc["provider"]["http_status"], 200,
                "the GET's 200 is no delete answer: {rc}"
            );
        }
    }
    assert_eq!(r.code, 1, "{out}");
    let p: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(p["status"], "DELETE_UNKNOWN", "{p}");
    let unknown = p["objects"]["DELETE_UNKNOWN"].as_array().unwrap();
    assert!(
        unknown.len() == 1 && unknown[0].as_str().is_some_and(|u| u.ends_with(&name)),
        "the redirected object alone is uncertain: {p}"
    );
    let object_key = key.trim_start_matches('/').split_once('/').unwrap().1;
    let still = boto(
        &g,
        &format!("print(s3.head_object(Bucket=bucket, Key='{object_key}')['ContentLength'] > 0)"),
    );
    assert_eq!(still.trim(), "True", "{key} is still there");
}
