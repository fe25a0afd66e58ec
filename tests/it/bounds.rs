//! Issue 16, points 5, 7 and 8: metadata size bombs, unreadable retained snapshots and a widened table
//! location are each refused with exit 2 naming the object, never planned over.
// See: issue 16 (safety holes found by attacking the deleter and the verifier).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::governance::{Gov, python};
use crate::util::{copy_tree, interop, lakedrill_in, sql_text, tmpdir};

/// A copy of an interop table whose folder also holds a `lakedrill.toml` limiting metadata to `limit` bytes.
fn limited_table(into: &Path, limit: u64) -> PathBuf {
    let src = interop().join("tree-31f6b388/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table");
    let dst = into.join("t");
    copy_tree(&src, &dst);
    std::fs::write(
        into.join("lakedrill.toml"),
        format!("[storage]\nmax_metadata_bytes = {limit}\n"),
    )
    .unwrap();
    dst
}

#[test]
fn the_default_metadata_limit_is_512_mib() {
    let o = lakedrill::config::Config::default().storage_options();
    assert_eq!(o.max_metadata_bytes, 512 * 1024 * 1024);
    assert_eq!(lakedrill::io::store::DEFAULT_MAX_METADATA_BYTES, 512 * 1024 * 1024);
}

/// A gzip metadata file of a few KiB that expands past the limit: `inspect` stops decompressing at the
/// limit and exits 2 naming the file and the limit. The bomb is streamed through the encoder, never held.
#[test]
fn r016_a_gzip_metadata_bomb_exits_2_naming_the_file_and_the_limit() {
    let tmp = tmpdir();
    let t = limited_table(tmp.path(), 1 << 20);
    let orig = std::fs::read_to_string(t.join("metadata/v9.metadata.json")).unwrap();
    let bomb = t.join("metadata/v10.gz.metadata.json");
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&bomb).unwrap(), flate2::Compression::best());
    // Valid metadata up to its last brace, then 8 MiB of spaces: under any limit it would parse.
    let body = orig.trim_end().strip_suffix('}').unwrap();
    gz.write_all(body.as_bytes()).unwrap();
    let spaces = vec![b' '; 64 << 10];
    for _ in 0..128 {
        gz.write_all(&spaces).unwrap();
    }
    gz.write_all(b"}").unwrap();
    gz.finish().unwrap();
    assert!(std::fs::metadata(&bomb).unwrap().len() < (1 << 20));
    let r = lakedrill_in(
        tmp.path(),
        &["inspect", "snapshots", "--metadata", bomb.to_str().unwrap()],
    );
    r.expect_code(2);
    assert!(
        r.stderr.contains("v10.gz.metadata.json")
            && r.stderr.contains("1048576")
            && r.stderr.contains("max_metadata_bytes"),
        "{}",
        r.stderr
    );
}

/// Raw metadata over the limit (a JSON prefix and then spaces) is refused before it is read whole.
#[test]
fn r016_raw_metadata_over_the_limit_exits_2_naming_the_file_and_the_limit() {
    let tmp = tmpdir();
    let t = limited_table(tmp.path(), 1 << 20);
    let orig = std::fs::read_to_string(t.join("metadata/v9.metadata.json")).unwrap();
    let big = t.join("metadata/v10.metadata.json");
    let body = orig.trim_end().strip_suffix('}').unwrap();
    std::fs::write(&big, format!("{body}{}}}", " ".repeat(2 << 20))).unwrap();
    let r = lakedrill_in(
        tmp.path(),
        &["inspect", "snapshots", "--metadata", big.to_str().unwrap()],
    );
    r.expect_code(2);
    assert!(
        r.stderr.contains("v10.metadata.json") && r.stderr.contains("1048576"),
        "{}",
        r.stderr
    );
    // The same file under the limit (as the table folder's current metadata) is read as before.
    let ok = lakedrill_in(
        tmp.path(),
        &[
            "inspect",
            "snapshots",
            "--metadata",
            t.join("metadata/v9.metadata.json").to_str().unwrap(),
        ],
    );
    ok.expect_code(0);
}

/// The current metadata file of the Gov fixture's table, as a local path.
pub fn current_metadata(g: &Gov) -> PathBuf {
    let db = format!("sqlite://{}?mode=ro", g.dir.join("fx/catalog.db").display());
    let loc = sql_text(
        &db,
        "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = 'pyfix' AND table_namespace = 'db' AND table_name = 'retention'",
    )
    .unwrap();
    PathBuf::from(loc.trim_start_matches("file://"))
}

/// Rewrites the `manifest_length` of the first entry of a manifest list.
fn set_manifest_length(list: &Path, value: i64) -> String {
    use apache_avro::types::Value as Avro;
    let bytes = std::fs::read(list).unwrap();
    let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
    let schema = reader.writer_schema().clone();
    let meta = reader.user_metadata().clone();
    let mut writer = apache_avro::Writer::new(&schema, Vec::new());
    for (k, v) in &meta {
        writer.add_user_metadata(k.clone(), v).unwrap();
    }
    let mut manifest = String::new();
    for (i, v) in reader.enumerate() {
        let mut v = v.unwrap();
        if let (0, Avro::Record(fields)) = (i, &mut v) {
            for (n, f) in fields.iter_mut() {
                match (n.as_str(), &*f) {
                    ("manifest_length", _) => *f = Avro::Long(value),
                    ("manifest_path", Avro::String(p)) => manifest.clone_from(p),
                    _ => {}
                }
            }
        }
        writer.append(v).unwrap();
    }
    std::fs::write(list, writer.into_inner().unwrap()).unwrap();
    manifest
}

/// The manifest list of a snapshot, as a local path.
fn manifest_list(md: &Value, snapshot_id: i64) -> PathBuf {
    let s = md["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["snapshot-id"] == snapshot_id)
        .unwrap();
    PathBuf::from(s["manifest-list"].as_str().unwrap().trim_start_matches("file://"))
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap()
}

/// A retained snapshot (the current one) whose manifest list records a manifest length of 10^15, -1 or 0:
/// `plan` cannot decide and exits 2 naming the manifest and the snapshot; `quarantine` of a candidate
/// planned before the damage refuses the same way.
#[test]
fn r016_plan_exits_2_naming_the_unreadable_layer_of_a_retained_snapshot() {
    let g = Gov::new("");
    let candidate = g.candidate();
    let id = candidate["candidate_id"].as_str().unwrap().to_owned();
    let md_path = current_metadata(&g);
    let md: Value = serde_json::from_slice(&std::fs::read(&md_path).unwrap()).unwrap();
    let current = md["current-snapshot-id"].as_i64().unwrap();
    let list = manifest_list(&md, current);
    let orig = std::fs::read(&list).unwrap();
    for len in [1_000_000_000_000_000_i64, -1, 0] {
        let manifest = set_manifest_length(&list, len);
        let r = g.on_table(&["plan", "--policy", g.policy.to_str().unwrap()]);
        r.expect_code(2);
        assert!(
            r.stderr.contains(file_name(&manifest))
                && r.stderr.contains(file_name(list.to_str().unwrap()))
                && r.stderr.contains(&current.to_string()),
            "manifest_length {len}: {}",
            r.stderr
        );
        let q = g.quarantine(&id, "tag");
        q.expect_code(2);
        assert!(
            q.stderr.contains(file_name(&manifest)) && q.stderr.contains(&current.to_string()),
            "manifest_length {len}: {}",
            q.stderr
        );
        std::fs::write(&list, &orig).unwrap();
    }
    g.plan();
}

/// See: the review of 2026-12-07 (rs), item 6. A manifest replaced by an object longer than the manifest list
/// records was read whole before its length was compared (a 30 GB object at a manifest's path ran plan, the
/// gates and quarantine out of memory). Now it is refused as soon as the store says how long it is, naming it:
/// `plan` and `inspect files` (which reads through `Table::read_manifest`, as backups do) exit 2, and a 64 GiB
/// (sparse) object at the path is refused the same way, at once.
#[test]
fn a_manifest_longer_than_recorded_is_refused_before_it_is_read_whole() {
    let g = Gov::new("");
    let md_path = current_metadata(&g);
    let md: Value = serde_json::from_slice(&std::fs::read(&md_path).unwrap()).unwrap();
    let current = md["current-snapshot-id"].as_i64().unwrap();
    let list = manifest_list(&md, current);
    let orig = std::fs::read(&list).unwrap();
    let manifest = set_manifest_length(&list, 0);
    std::fs::write(&list, &orig).unwrap();
    let path = PathBuf::from(manifest.trim_start_matches("file://"));
    let recorded = std::fs::metadata(&path).unwrap().len();
    let longer = format!("longer than the {recorded} the manifest list records");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"0123456789")
        .unwrap();
    for grown in [recorded + 10, 64 << 30] {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(grown)
            .unwrap();
        let r = g.on_table(&["plan", "--policy", g.policy.to_str().unwrap()]);
        r.expect_code(2);
        assert!(
            r.stderr.contains(file_name(&manifest)) && r.stderr.contains(&longer),
            "{grown} bytes: {}",
            r.stderr
        );
        let t = g.on_table(&["inspect", "files"]);
        t.expect_code(2);
        assert!(
            t.stderr.contains(file_name(&manifest)) && t.stderr.contains(&longer),
            "{grown} bytes: {}",
            t.stderr
        );
    }
}

/// An expirable snapshot whose layers cannot be read is named in the plan's warnings.
#[test]
fn r016_plan_names_the_unreadable_layer_of_an_expirable_snapshot() {
    let g = Gov::new("");
    let candidate = g.candidate();
    let expirable = candidate["snapshot_ids"][0].as_i64().unwrap();
    let md_path = current_metadata(&g);
    let md: Value = serde_json::from_slice(&std::fs::read(&md_path).unwrap()).unwrap();
    let list = manifest_list(&md, expirable);
    let manifest = set_manifest_length(&list, -1);
    let p = g.plan();
    let warnings = p["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains(&expirable.to_string()) && w.contains(file_name(&manifest))
        }),
        "{warnings:?}"
    );
}

/// Sets the `location` of the table's current metadata file.
pub fn set_location(md_path: &Path, location: &str) {
    let mut md: Value = serde_json::from_slice(&std::fs::read(md_path).unwrap()).unwrap();
    md["location"] = Value::String(location.to_owned());
    std::fs::write(md_path, serde_json::to_vec(&md).unwrap()).unwrap();
}

/// Metadata whose `location` was widened to the lakehouse root (which holds the registry, the catalog
/// database and the keys): `plan` refuses with exit 2 naming the table location and what it contains.
#[test]
fn r016_a_table_location_holding_lakedrills_state_is_refused() {
    let g = Gov::new("");
    let md_path = current_metadata(&g);
    let root = format!("file://{}", g.dir.display());
    set_location(&md_path, &root);
    let r = g.on_table(&["plan", "--policy", g.policy.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains(&root) && r.stderr.contains("registry.db") && r.stderr.contains("catalog.db"),
        "{}",
        r.stderr
    );
}

/// A table location that holds another table of the catalog is refused naming that table.
#[test]
fn r016_a_table_location_holding_another_table_is_refused() {
    let g = Gov::new("");
    let md_path = current_metadata(&g);
    let other = g.dir.join("fx/warehouse/db/other/metadata/00000-other.metadata.json");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy(&md_path, &other).unwrap();
    set_location(
        &other,
        &format!("file://{}", g.dir.join("fx/warehouse/db/other").display()),
    );
    let script = format!(
        "import sqlite3\nc = sqlite3.connect('{}')\nc.execute(\"INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location) VALUES ('pyfix', 'db', 'other', 'file://{}')\")\nc.commit()\n",
        g.dir.join("fx/catalog.db").display(),
        other.display()
    );
    let out = Command::new(python()).arg("-c").arg(script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let warehouse = format!("file://{}", g.dir.join("fx/warehouse").display());
    set_location(&md_path, &warehouse);
    let r = g.on_table(&["plan", "--policy", g.policy.to_str().unwrap()]);
    r.expect_code(2);
    assert!(
        r.stderr.contains(&warehouse) && r.stderr.contains("db.other"),
        "{}",
        r.stderr
    );
}

/// After quarantine and a passing drill, the current snapshot's manifest list is damaged: `purge` refuses
/// (its independent closure check cannot know what the retained snapshot reaches) naming the snapshot and the
/// manifest, and deletes nothing.
#[test]
fn r016_purge_refuses_naming_the_unreadable_layer_of_a_retained_snapshot() {
    let g = Gov::new("");
    let (c, ev) = g.quarantined();
    let id = c["candidate_id"].as_str().unwrap();
    let md_path = current_metadata(&g);
    let md: Value = serde_json::from_slice(&std::fs::read(&md_path).unwrap()).unwrap();
    let current = md["current-snapshot-id"].as_i64().unwrap();
    let manifest = set_manifest_length(&manifest_list(&md, current), -1);
    let r = g.purge(id, Some(&ev), &[]);
    assert_eq!(r.code, 2, "cannot decide: {}{}", r.stdout, r.stderr);
    let out = format!("{}{}", r.stdout, r.stderr);
    assert!(
        out.contains(file_name(&manifest)) && out.contains(&current.to_string()),
        "{out}"
    );
    for o in c["objects"].as_array().unwrap() {
        let p = g.table_root().join(o["path"].as_str().unwrap());
        assert!(p.exists(), "{} was deleted", p.display());
    }
}

/// A bundle's byte copies are not signed, only their inventory entries: a manifest copy grown to 64 GiB (sparse) is
/// read no further than one byte past its signed size and is a finding naming it (exit 1), never read whole.
#[test]
fn a_huge_manifest_copy_is_a_finding_and_is_never_read_whole() {
    let s = crate::drill::sealed_pos_table();
    let m = crate::drill::manifest_copy(&s);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&m)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let v = crate::drill::restore(s.bundle.to_str().unwrap(), &s.trust, &[])
        .expect_code(1)
        .json();
    assert_eq!(v["status"], "FAILED", "{v}");
    let f = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "COPY_DIGEST_MISMATCH")
        .unwrap_or_else(|| panic!("want COPY_DIGEST_MISMATCH: {v}"));
    let member = format!("copies/{}", m.file_name().unwrap().to_str().unwrap());
    assert!(f["expected"].as_str().unwrap().contains(&member), "{f}");
    assert!(
        f["actual"].as_str().unwrap().contains("68719476736 bytes or more"),
        "{f}"
    );
}
