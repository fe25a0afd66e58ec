//! w. The weekly drill: `lakedrill drill run` of a quarantine drill sampling 30 bundles, each restored and
//! verified deeply (every data file hashed and its Parquet footer read), against `b3sum` over the same data
//! files, warm cache, best of [`super::RUNS`] each.
//!
//! `LAKEDRILL_BENCH_DRILL_BUNDLES` tables (default 30) of one snapshot each, of two Parquet files of
//! `LAKEDRILL_BENCH_DRILL_FILE_MIB` MiB (default 32: 1.9 GiB in all), uncompressed rows of pseudo-random text; each
//! snapshot sealed by [`lakedrill::bundle::seal`] into one bundle folder. The drill is the release binary, a
//! subprocess, with its own start, signature checks, sampling and signed report: the whole weekly job. It runs twice
//! per round: one bundle at a time (the default) and `LAKEDRILL_BENCH_DRILL_PARALLEL` (default 4) side by side
//! (`parallel_bundles`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use lakedrill::io::store::{Storage, StorageOptions};
use lakedrill::table::{Table, TableSource};

use super::{BenchResult, RUNS, bench_config, data_file, env_usize, fill_pseudo_random, run_b3sum, warm_cache};

const LAKEDRILL: &str = env!("CARGO_BIN_EXE_lakedrill");
/// Bytes of text per row: a file is a few hundred rows.
const ROW_BYTES: usize = 64 * 1024;

/// The demo schema's fields with their Iceberg field ids (what the table the files are appended to declares).
fn arrow_schema() -> Arc<ArrowSchema> {
    let id = |n: &str| std::collections::HashMap::from([("PARQUET:field_id".to_owned(), n.to_owned())]);
    Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false).with_metadata(id("1")),
        Field::new("region", DataType::Utf8, false).with_metadata(id("2")),
        Field::new("amount", DataType::Float64, true).with_metadata(id("3")),
    ]))
}

/// One uncompressed Parquet file of `rows` rows, each `region` [`ROW_BYTES`] of pseudo-random letters.
fn parquet_file(rows: usize, seed: u64) -> BenchResult<Vec<u8>> {
    let mut raw = vec![0_u8; ROW_BYTES];
    let mut text = Vec::with_capacity(rows);
    for r in 0..rows {
        fill_pseudo_random(&mut raw, seed ^ (r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        text.push(raw.iter().map(|b| char::from(b'a' + b % 26)).collect::<String>());
    }
    let schema = arrow_schema();
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int64Array::from_iter_values(0..rows as i64)),
            Arc::new(StringArray::from(text)),
            Arc::new(Float64Array::from(vec![1.0; rows])),
        ],
    )?;
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None)?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

/// Runs `lakedrill ARGS` in `root`; exit 0 expected; returns its stdout.
fn lakedrill(root: &Path, args: &[&str]) -> BenchResult<String> {
    let out = Command::new(LAKEDRILL)
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "lakedrill {args:?} ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// w: prints the drill against `b3sum`; target ≥ 1.0×.
pub async fn bench_weekly_drill(base: &Path) -> BenchResult<()> {
    let bundles = env_usize("LAKEDRILL_BENCH_DRILL_BUNDLES", 30)?;
    let file_mib = env_usize("LAKEDRILL_BENCH_DRILL_FILE_MIB", 32)?;
    let rows = (file_mib << 20).div_ceil(ROW_BYTES);
    let root = base.join("weekly");
    std::fs::create_dir_all(&root)?;
    lakedrill(&root, &["-q", "keygen", "--name", "bench", "--dir", "keys"])?;
    std::fs::create_dir_all(root.join("trust"))?;
    std::fs::copy(root.join("keys/bench.pub"), root.join("trust/bench.pub"))?;
    let key = lakedrill::evidence::keys::load_signing_key(&root.join("keys/bench.key"))?;
    let storage = Storage::new(StorageOptions::default());
    let db = root.join("catalog.db");
    let warehouse = root.join("warehouse");
    let config = bench_config(&db, &warehouse);
    let out = lakedrill::model::location::canonical_uri(&root.join("bundles").display().to_string())?;
    eprintln!("bench: w. {bundles} tables of 2 Parquet files of {file_mib} MiB, each snapshot sealed");
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut data_bytes = 0_u64;
    for t in 0..bundles {
        let name = format!("w{t:02}");
        let dir = warehouse.join("bench").join(&name);
        std::fs::create_dir_all(dir.join("data"))?;
        let mut files = Vec::new();
        for f in 0..2 {
            let body = parquet_file(rows, (t * 2 + f) as u64 + 1)?;
            let p = dir.join(format!("data/part-{f}.parquet"));
            std::fs::write(&p, &body)?;
            data_bytes += body.len() as u64;
            files.push(data_file(&p, rows as u64, body.len() as u64)?);
            paths.push(p);
        }
        lakedrill::lab::demo::create_table_with_data_files(
            &db,
            &warehouse,
            "bench",
            &name,
            &format!("file://{}", dir.display()),
            files,
        )
        .await?;
        let source = TableSource::Catalog {
            catalog: super::CATALOG_SECTION.into(),
            table: format!("bench.{name}"),
            table_root: None,
        };
        let table = Table::load(&storage, &config, &source).await?;
        let id = table.metadata().current_snapshot_id().ok_or("no snapshot")?;
        lakedrill::bundle::seal(&table, &storage, id, &key, &out, chrono::Utc::now())
            .await?
            .map_err(|f| format!("w: seal of {name} reported findings: {f:?}"))?;
    }
    let parallel = env_usize("LAKEDRILL_BENCH_DRILL_PARALLEL", 4)?;
    let plan = |name: &str, extra: &str| {
        std::fs::write(
            root.join(format!("{name}.toml")),
            format!(
                "name = \"bench-{name}\"\nkind = \"quarantine\"\nbundles = \"bundles\"\nsample = {bundles}\n\
                 trust = \"trust\"\nkey = \"keys/bench.key\"\nreports = \"reports\"\n{extra}"
            ),
        )
    };
    plan("weekly", "")?;
    plan("weekly-side", &format!("parallel_bundles = {parallel}\n"))?;
    warm_cache(&paths)?;
    eprintln!("bench: w. b3sum x{RUNS}, drill run x{RUNS} one bundle at a time and {parallel} side by side");
    let mut b3 = Duration::MAX;
    let mut drills = [Duration::MAX; 2];
    let mut restored = 0;
    for _ in 0..RUNS {
        b3 = b3.min(run_b3sum(&paths)?.0);
        for (best, plan) in drills.iter_mut().zip(["weekly.toml", "weekly-side.toml"]) {
            let start = Instant::now();
            let report = lakedrill(&root, &["--json", "-q", "drill", "run", plan])?;
            *best = (*best).min(start.elapsed());
            let r: serde_json::Value = serde_json::from_str(&report)?;
            // Exit 0 (checked by `lakedrill`): every sampled bundle restored and verified.
            let results = r["predicate"]["results"].as_array().map_or(0, Vec::len);
            if results < bundles {
                return Err(format!("w: the drill {plan} did not pass on {bundles} bundles: {report}").into());
            }
            restored = results;
        }
    }
    let gib = data_bytes as f64 / f64::from(1_u32 << 30);
    println!();
    println!(
        "w. weekly drill: `drill run` of {restored} quarantine bundles (restore + deep checks: every data file hashed, \
         its Parquet footer read), {} data files, {gib:.2} GiB, warm cache, best of {RUNS}",
        paths.len()
    );
    for (drill, how) in drills
        .iter()
        .zip(["one bundle at a time", &format!("parallel_bundles = {parallel}")])
    {
        let ratio = b3.as_secs_f64() / drill.as_secs_f64();
        println!(
            "   drill ({how}) {:.3} s ({:.2} GB/s) vs b3sum {:.3} s ({:.2} GB/s): {ratio:.2}x: {} (target >= 1.0x)",
            drill.as_secs_f64(),
            data_bytes as f64 / 1e9 / drill.as_secs_f64(),
            b3.as_secs_f64(),
            data_bytes as f64 / 1e9 / b3.as_secs_f64(),
            if ratio >= 1.0 { "PASS" } else { "FAIL" }
        );
    }
    Ok(())
}
