//! Other object stores (issue 21, point 3): `az://` on Azurite and `gs://` on fake-gcs-server, both started by
//! scripts/test.sh, through object_store's own Azure and GCS clients.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::governance::python;
use crate::util::{expected, generated, lakedrill_in, pyfix_config, tmpdir};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run the tests with scripts/test.sh"))
}

/// A working folder with the PyIceberg fixtures' catalog, a `dr` catalog for recoveries, a registry and a key.
fn site(dir: &Path) {
    let cfg = pyfix_config(dir);
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "[catalog.dr]\ntype = \"sql\"\nuri = \"sqlite:{d}/dr.db\"\n[registry]\nuri = \"sqlite:{d}/registry.db\"\n",
        d = dir.display()
    ));
    std::fs::write(&cfg, text).unwrap();
    lakedrill_in(dir, &["keygen", "--name", "st-TEST-ONLY", "--dir", "keys"]).expect_code(0);
    std::fs::create_dir_all(dir.join("trust")).unwrap();
    std::fs::copy(dir.join("keys/st-TEST-ONLY.pub"), dir.join("trust/st-TEST-ONLY.pub")).unwrap();
}

fn current_rows() -> Value {
    let exp = expected("db.events");
    exp["row_counts"][exp["current_snapshot_id"].to_string()].clone()
}

/// A seal → drill → backup → recover round trip with every bundle, report, backup and recovered table on Azure
/// Blob Storage (Azurite); the recovered table is then read, sealed and deeply verified from there.
#[test]
fn seal_drill_backup_recover_round_trip_on_azure_blob_storage() {
    let tmp = tmpdir();
    let dir = tmp.path();
    site(dir);
    let base = format!(
        "az://{}/rt-{}",
        env("LAKEDRILL_TEST_AZURE_CONTAINER"),
        uuid::Uuid::new_v4()
    );
    let key = "keys/st-TEST-ONLY.key";
    let t = ["--catalog", "pyfix", "--table", "db.events"];
    let mut args = vec!["--json", "seal", "--ref", "main", "--key", key, "--out"];
    let bundles = format!("{base}/bundles");
    args.push(&bundles);
    args.extend(t);
    let s = lakedrill_in(dir, &args).expect_code(0).json();
    assert!(s["uri"].as_str().unwrap().starts_with(&bundles), "{s}");
    std::fs::write(
        dir.join("drill.toml"),
        format!(
            "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"{bundles}\"\ntrust = \"trust\"\nkey = \"{key}\"\nreports = \"{base}/reports\"\n"
        ),
    )
    .unwrap();
    let d = lakedrill_in(dir, &["--json", "drill", "run", "drill.toml"])
        .expect_code(0)
        .json();
    let report = d["report"].as_str().unwrap().to_owned();
    assert!(report.starts_with(&format!("{base}/reports/weekly/")), "{d}");
    assert_eq!(d["predicate"]["summary"]["gate"], "PASS", "{d}");
    let a = lakedrill_in(dir, &["--json", "audit", "verify", &report, "--trust", "trust"])
        .expect_code(0)
        .json();
    assert_eq!(a["status"], "VERIFIED", "{a}");

    let backups = format!("{base}/backups");
    let mut args = vec!["--json", "backup", "--ref", "main", "--key", key, "--to", &backups];
    args.extend(t);
    let b = lakedrill_in(dir, &args).expect_code(0).json();
    let bundle = b["bundle_uri"].as_str().unwrap().to_owned();
    assert!(bundle.starts_with(&backups), "{b}");
    let into = format!("{base}/recovered");
    let r = lakedrill_in(
        dir,
        &[
            "--json",
            "recover",
            "--from",
            &bundle,
            "--trust",
            "trust",
            "--into",
            &into,
            "--catalog",
            "dr",
            "--table",
            "dr.events",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(r["status"], "RESTORE_VERIFIED", "{r}");
    assert_eq!(r["rows_scanned"], current_rows(), "{r}");
    assert!(r["metadata_location"].as_str().unwrap().starts_with(&into), "{r}");

    // The recovered table lives on Azure: read, sealed and verified deeply from there.
    let dr = ["--catalog", "dr", "--table", "dr.events"];
    let mut args = vec!["--json", "inspect", "snapshots"];
    args.extend(dr);
    let snaps = lakedrill_in(dir, &args).expect_code(0).json();
    assert!(
        snaps["metadata_location"].as_str().unwrap().starts_with(&into),
        "{snaps}"
    );
    let mut args = vec![
        "--json",
        "seal",
        "--ref",
        "main",
        "--key",
        key,
        "--out",
        "local-bundles",
    ];
    args.extend(dr);
    let s2 = lakedrill_in(dir, &args).expect_code(0).json();
    let v = lakedrill_in(
        dir,
        &[
            "--json",
            "restore",
            s2["uri"].as_str().unwrap(),
            "--trust",
            "trust",
            "--deep",
        ],
    )
    .expect_code(0)
    .json();
    assert_eq!(v["status"], "RESTORE_VERIFIED", "{v}");
}

/// `gs://` on fake-gcs-server: a copy of a PyIceberg table uploaded there is inspected, sealed and deeply verified
/// from Google Cloud Storage, and a drill over its bundle passes reading every data file from there. (Writes to
/// `gs://` are not tested: this emulator answers object_store's XML-API upload, `PUT /<bucket>/<object>`, with
/// `400 invalid uploadType`; see the README's status table.)
#[test]
fn a_table_on_google_cloud_storage_is_read_sealed_and_drilled() {
    let tmp = tmpdir();
    let dir = tmp.path();
    site(dir);
    let bucket = env("LAKEDRILL_TEST_GCS_BUCKET");
    let prefix = format!("t-{}", uuid::Uuid::new_v4());
    let table = generated().join("warehouse/db/events");
    // Upload through the emulator's JSON API (which it implements), file by file.
    let script = format!(
        "import os, urllib.request, urllib.parse\nroot = '{root}'\nfor d, _, fs in os.walk(root):\n\
         \x20   for f in fs:\n\
         \x20       p = os.path.join(d, f)\n\
         \x20       name = '{prefix}/' + os.path.relpath(p, root)\n\
         \x20       url = os.environ['LAKEDRILL_TEST_GCS_ENDPOINT'] + '/upload/storage/v1/b/{bucket}/o?uploadType=media&name=' + urllib.parse.quote(name, safe='')\n\
         \x20       urllib.request.urlopen(urllib.request.Request(url, data=open(p, 'rb').read(), method='POST')).read()\n",
        root = table.display()
    );
    let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exp = expected("db.events");
    let md_name = exp["metadata_location"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let root = format!("gs://{bucket}/{prefix}");
    let md = format!("{root}/metadata/{md_name}");
    let t = ["--metadata", md.as_str(), "--table-root", root.as_str()];
    let mut args = vec!["--json", "inspect", "snapshots"];
    args.extend(t);
    let snaps = lakedrill_in(dir, &args).expect_code(0).json();
    assert_eq!(
        snaps["snapshots"].as_array().unwrap().len(),
        exp["snapshots"].as_array().unwrap().len(),
        "{snaps}"
    );
    let mut args = vec![
        "--json",
        "seal",
        "--ref",
        "main",
        "--key",
        "keys/st-TEST-ONLY.key",
        "--out",
        "bundles",
    ];
    args.extend(t);
    let s = lakedrill_in(dir, &args).expect_code(0).json();
    let mut args = vec![
        "--json",
        "restore",
        s["uri"].as_str().unwrap(),
        "--trust",
        "trust",
        "--deep",
    ];
    args.extend(["--table-root", root.as_str()]);
    let v = lakedrill_in(dir, &args).expect_code(0).json();
    assert_eq!(v["status"], "RESTORE_VERIFIED", "{v}");
    assert!(v["objects_verified"].as_u64().unwrap() > 3, "{v}");
    // The bundle's inventory names the gs:// objects: a drill verifies them there.
    std::fs::write(
        dir.join("drill.toml"),
        "name = \"weekly\"\nkind = \"quarantine\"\nbundles = \"bundles\"\ntrust = \"trust\"\nkey = \"keys/st-TEST-ONLY.key\"\nreports = \"reports\"\n",
    )
    .unwrap();
    let d = lakedrill_in(dir, &["--json", "drill", "run", "drill.toml"])
        .expect_code(0)
        .json();
    assert_eq!(d["predicate"]["summary"]["gate"], "PASS", "{d}");
}
