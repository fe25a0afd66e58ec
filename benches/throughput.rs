//! Seal and restore throughput next to `b3sum` and `restic check --read-data`, over the same data
//! files, in the same run.
//!
//! `cargo bench --bench throughput` (or `scripts/bench.sh`, which installs `b3sum` first). It
//! writes `LAKEDRILL_BENCH_FILES` files (default 64) of `LAKEDRILL_BENCH_FILE_MIB` MiB each
//! (default 16) of pseudo-random bytes under a fresh temporary folder, registers them as the data
//! files of one snapshot of a real Iceberg table (SQL catalog on SQLite, `iceberg` crate), warms the
//! page cache, and then times, in this order and three times each (best run kept):
//!
//! 1. `b3sum --no-names <files>`, the reference;
//! 2. [`lakedrill::bundle::seal`] of the snapshot, into a fresh bundle folder each run;
//! 3. [`lakedrill::bundle::verify`] of the bundle (not `--deep`: sizes and BLAKE3 only);
//! 4. when `restic` is on `PATH`: `restic backup` of the same data files into a fresh repository
//!    (not timed), then `restic check --read-data` (target: restore ≥ 3× faster).
//!
//! It prints the throughput of each and the ratios to `b3sum`, with the verdict against the
//! target (≥ 0.9× `b3sum`, warm cache). The verdict is printed, not enforced: the exit status is
//! 0 whatever the ratios, 2 when the measurement could not be made (no `b3sum` on `PATH`, a seal
//! with findings, a bundle that does not verify, an I/O error). `LAKEDRILL_BENCH_IO_CONCURRENCY`
//! sets [`lakedrill::io::store::StorageOptions::io_concurrency`] (default: the library's).
//!
//! The files are not Parquet (a deep verify would report them unreadable); seal and non-deep verify
//! read only sizes and digests of data files, so their content does not change what is measured.
//! Throughput is computed over the data files' bytes only, for all three tools.
//!
//! `LAKEDRILL_BENCH_KEEP=1` keeps the generated data (the folder is printed) for profiling.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Struct};
use lakedrill::bundle::{self, BundlePredicate, RestoreStatus, VerifyOptions};
use lakedrill::config::{CatalogConfig, Config};
use lakedrill::evidence::keys::{PublicKey, SigningKey, TrustStore};
use lakedrill::io::store::{Storage, StorageOptions};
use lakedrill::table::{Table, TableSource};

#[path = "throughput/weekly_drill.rs"]
mod weekly_drill;

type BenchResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The target of the acceptance criterion: seal and restore at ≥ 0.9× `b3sum`.
const TARGET_RATIO: f64 = 0.9;
/// restore must verify at least this many times faster than `restic check --read-data`.
const RESTIC_TARGET: f64 = 3.0;
/// Runs per tool; the best (shortest) is kept.
const RUNS: usize = 3;
const CATALOG_SECTION: &str = "bench";

fn env_usize(name: &str, default: usize) -> BenchResult<usize> {
    match std::env::var(name) {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name}={v:?}: expected a positive integer").into()),
        },
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(e) => Err(format!("{name}: {e}").into()),
    }
}

/// Fills `buf` with xorshift64* output: fast, and incompressible enough for a hash benchmark.
fn fill_pseudo_random(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let word = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

/// Whether a path has a component starting with `.` (some tools treat those as hidden; CRATE-NOTES).
fn has_hidden_component(p: &Path) -> bool {
    p.components()
        .any(|c| matches!(c, std::path::Component::Normal(s) if s.to_string_lossy().starts_with('.')))
}

/// `restic version`, or `None` when it is not on `PATH`.
fn restic_version() -> Option<String> {
    let out = Command::new("restic").arg("version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One restic command against `repo` (password from the environment, fixed for the bench).
fn restic(repo: &Path, args: &[&str]) -> BenchResult<()> {
    let out = Command::new("restic")
        .arg("--repo")
        .arg(repo)
        .args(args)
        .env("RESTIC_PASSWORD", "lakedrill-bench")
        .env("RESTIC_CACHE_DIR", repo.with_extension("cache"))
        .stdout(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(format!("restic {args:?} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}

/// `b3sum --version`, or `None` when it is not on `PATH`.
fn b3sum_version() -> Option<String> {
    let out = Command::new("b3sum").arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// One `b3sum --no-names` run over `files`; returns its wall time and the digests it printed.
fn run_b3sum(files: &[PathBuf]) -> BenchResult<(Duration, Vec<String>)> {
    let start = Instant::now();
    let out = Command::new("b3sum")
        .arg("--no-names")
        .args(files)
        .stderr(Stdio::inherit())
        .output()?;
    let elapsed = start.elapsed();
    if !out.status.success() {
        return Err(format!("b3sum failed: {}", out.status).into());
    }
    let digests = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    if digests.len() != files.len() {
        return Err(format!("b3sum printed {} digests for {} files", digests.len(), files.len()).into());
    }
    Ok((elapsed, digests))
}

/// The manifest entry of the local data file `path`: `rows` rows, `size` bytes, unpartitioned.
fn data_file(path: &Path, rows: u64, size: u64) -> BenchResult<iceberg::spec::DataFile> {
    Ok(DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(format!("file://{}", path.display()))
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::empty())
        .partition_spec_id(0)
        .record_count(rows)
        .file_size_in_bytes(size)
        .build()?)
}

/// Writes the data files, creates the table and returns (data files, catalog config, data bytes).
async fn build_table(root: &Path, files: usize, file_bytes: usize) -> BenchResult<(Vec<PathBuf>, Config, u64)> {
    let warehouse = root.join("warehouse");
    let table_dir = warehouse.join("bench").join("throughput");
    let data_dir = table_dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let location = format!("file://{}", table_dir.display());
    let mut buf = vec![0u8; file_bytes];
    let mut paths = Vec::with_capacity(files);
    let mut data_files = Vec::with_capacity(files);
    for i in 0..files {
        fill_pseudo_random(
            &mut buf,
            0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
        );
        let path = data_dir.join(format!("part-{i:05}.bin"));
        std::fs::write(&path, &buf)?;
        // Not real rows: non-deep seal and verify never compare row counts with content.
        data_files.push(data_file(&path, file_bytes as u64 / 8, file_bytes as u64)?);
        paths.push(path);
    }
    let db = root.join("catalog.db");
    lakedrill::lab::demo::create_table_with_data_files(&db, &warehouse, "bench", "throughput", &location, data_files)
        .await?;
    Ok((paths, bench_config(&db, &warehouse), (files * file_bytes) as u64))
}

/// A configuration whose catalog `bench` is the SQL catalog at `db` with its warehouse.
fn bench_config(db: &Path, warehouse: &Path) -> Config {
    let mut config = Config::default();
    config.catalog.insert(
        CATALOG_SECTION.to_owned(),
        CatalogConfig {
            kind: "sql".into(),
            uri: format!("sqlite:{}", db.display()),
            warehouse: Some(format!("file://{}", warehouse.display())),
            // create_table_with_data_files writes to the catalog named `demo`.
            name: Some("demo".into()),
            ..Default::default()
        },
    );
    config
}

/// Reads every file once so that all three tools start from a warm page cache.
fn warm_cache(files: &[PathBuf]) -> BenchResult<()> {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    for p in files {
        let mut f = std::fs::File::open(p)?;
        while f.read(&mut buf)? > 0 {}
    }
    Ok(())
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e9 / d.as_secs_f64()
}

fn verdict(ratio: f64) -> &'static str {
    if ratio >= TARGET_RATIO { "PASS" } else { "FAIL" }
}

async fn bench(root: &Path) -> BenchResult<()> {
    // LAKEDRILL_BENCH_ONLY=w: the weekly drill alone.
    if std::env::var("LAKEDRILL_BENCH_ONLY").is_ok_and(|o| o == "w") {
        return weekly_drill::bench_weekly_drill(root).await;
    }
    let files = env_usize("LAKEDRILL_BENCH_FILES", 64)?;
    let file_mib = env_usize("LAKEDRILL_BENCH_FILE_MIB", 16)?;
    let mut storage_options = StorageOptions::default();
    if let Ok(v) = std::env::var("LAKEDRILL_BENCH_IO_CONCURRENCY") {
        storage_options.io_concurrency = v
            .trim()
            .parse::<NonZeroUsize>()
            .map_err(|e| format!("LAKEDRILL_BENCH_IO_CONCURRENCY={v:?}: {e}"))?;
    }
    let io_concurrency = storage_options.io_concurrency;
    let file_bytes = file_mib
        .checked_mul(1 << 20)
        .ok_or("LAKEDRILL_BENCH_FILE_MIB is too large")?;

    eprintln!(
        "bench: writing {files} files of {file_mib} MiB under {}",
        root.display()
    );
    let (paths, config, data_bytes) = build_table(root, files, file_bytes).await?;
    let storage = Storage::new(storage_options);
    let source = TableSource::Catalog {
        catalog: CATALOG_SECTION.into(),
        table: "bench.throughput".into(),
        table_root: None,
    };
    let table = Table::load(&storage, &config, &source).await?;
    let snapshot_id = table
        .metadata()
        .current_snapshot_id()
        .ok_or("the bench table has no snapshot")?;
    let key = SigningKey::generate();
    let trust = TrustStore::from_keys(vec![PublicKey::new("bench", "bench.pub", key.verifying_key())])?;

    eprintln!("bench: warming the page cache");
    warm_cache(&paths)?;

    eprintln!("bench: b3sum x{RUNS}");
    let mut b3_best = Duration::MAX;
    let mut b3_digests = Vec::new();
    for _ in 0..RUNS {
        let (d, digests) = run_b3sum(&paths)?;
        b3_best = b3_best.min(d);
        b3_digests = digests;
    }

    eprintln!("bench: seal x{RUNS}");
    let mut seal_best = Duration::MAX;
    let mut bundle_uri = String::new();
    for run in 0..RUNS {
        let out =
            lakedrill::model::location::canonical_uri(&root.join(format!("bundles-{run}")).display().to_string())?;
        let start = Instant::now();
        let sealed = bundle::seal(&table, &storage, snapshot_id, &key, &out, chrono::Utc::now()).await?;
        let d = start.elapsed();
        let report = sealed.map_err(|f| format!("seal reported findings: {f:?}"))?;
        if report.bytes < data_bytes {
            return Err(format!(
                "seal covered {} bytes, fewer than the {data_bytes} data bytes",
                report.bytes
            )
            .into());
        }
        seal_best = seal_best.min(d);
        bundle_uri = report.uri;
    }

    eprintln!("bench: restore (verify, not deep) x{RUNS}");
    let mut verify_best = Duration::MAX;
    let opts = VerifyOptions::default();
    for _ in 0..RUNS {
        let start = Instant::now();
        let report = bundle::verify(&storage, &bundle_uri, &trust, &opts).await?;
        let d = start.elapsed();
        if report.status != RestoreStatus::RestoreVerified || report.bytes_verified < data_bytes {
            return Err(format!("the bundle did not verify: {:?}", report.findings).into());
        }
        verify_best = verify_best.min(d);
    }

    // Same data, same digests: lakedrill's inventory must agree with b3sum file for file.
    let envelope = storage
        .get(&lakedrill::model::location::join(&bundle_uri, bundle::ENVELOPE_FILE))
        .await?;
    let statement = lakedrill::evidence::verify(&envelope.bytes, &trust).map_err(|e| e.to_string())?;
    let mut predicate: BundlePredicate = serde_json::from_value(statement.predicate().clone())?;
    // The inventory is a member of the bundle (read and checked against the digests the predicate signs).
    bundle::load_inventory(&storage, &bundle_uri, &mut predicate)
        .await?
        .map_err(|(kind, why)| format!("the bundle's inventory: {kind:?}: {why}"))?;
    let sealed_digests: BTreeSet<&str> = predicate
        .inventory
        .iter()
        .filter(|e| !e.layer.is_metadata())
        .map(|e| e.blake3.as_str())
        .collect();
    let b3_set: BTreeSet<&str> = b3_digests.iter().map(String::as_str).collect();
    if sealed_digests != b3_set {
        return Err("the digests in the bundle differ from b3sum's".into());
    }

    // restic check --read-data over a restic repository holding the same bytes (when restic is there).
    let restic = match restic_version() {
        None => {
            eprintln!("bench: restic is not on PATH (scripts/bench.sh installs it); its figure is skipped");
            None
        }
        Some(v) => {
            eprintln!("bench: restic backup of the data, then restic check --read-data x{RUNS}");
            let repo = root.join("restic-repo");
            let data_dir = paths
                .first()
                .and_then(|p| p.parent())
                .ok_or("no data files")?
                .to_path_buf();
            restic(&repo, &["init"])?;
            restic(&repo, &["backup", "--quiet", &data_dir.display().to_string()])?;
            let mut best = Duration::MAX;
            for _ in 0..RUNS {
                let start = Instant::now();
                restic(&repo, &["check", "--read-data"])?;
                best = best.min(start.elapsed());
            }
            Some((v, best))
        }
    };

    let b3 = gbps(data_bytes, b3_best);
    let seal = gbps(data_bytes, seal_best);
    let verify = gbps(data_bytes, verify_best);
    let seal_ratio = seal / b3;
    let verify_ratio = verify / b3;
    println!();
    println!(
        "lakedrill throughput: {files} files x {file_mib} MiB = {data_bytes} data bytes ({:.2} GiB), warm cache, best of {RUNS}",
        data_bytes as f64 / f64::from(1u32 << 30)
    );
    println!(
        "io_concurrency {io_concurrency}, {} CPUs, {}",
        std::thread::available_parallelism().map_or(0, NonZeroUsize::get),
        b3sum_version().unwrap_or_default()
    );
    println!();
    println!(
        "{:<24} {:>10} {:>10} {:>10}  verdict",
        "", "best (s)", "GB/s", "x b3sum"
    );
    println!(
        "{:<24} {:>10.3} {:>10.2} {:>10}",
        "b3sum --no-names",
        b3_best.as_secs_f64(),
        b3,
        "1.00"
    );
    println!(
        "{:<24} {:>10.3} {:>10.2} {:>10.2}  {} (target >= {TARGET_RATIO}x)",
        "seal",
        seal_best.as_secs_f64(),
        seal,
        seal_ratio,
        verdict(seal_ratio)
    );
    println!(
        "{:<24} {:>10.3} {:>10.2} {:>10.2}  {} (target >= {TARGET_RATIO}x)",
        "restore (verify)",
        verify_best.as_secs_f64(),
        verify,
        verify_ratio,
        verdict(verify_ratio)
    );
    if let Some((v, best)) = &restic {
        let r = gbps(data_bytes, *best);
        let speedup = verify / r;
        println!(
            "{:<24} {:>10.3} {:>10.2} {:>10.2}  restore is {speedup:.2}x restic: {} (target >= {RESTIC_TARGET}x)",
            "restic check --read-data",
            best.as_secs_f64(),
            r,
            r / b3,
            if speedup >= RESTIC_TARGET { "PASS" } else { "FAIL" }
        );
        println!("  ({v})");
    }
    println!();
    let overall = if seal_ratio >= TARGET_RATIO && verify_ratio >= TARGET_RATIO {
        "PASS"
    } else {
        "FAIL"
    };
    println!("verdict: {overall} (seal {seal_ratio:.2}x, restore {verify_ratio:.2}x b3sum; target >= {TARGET_RATIO}x)");
    weekly_drill::bench_weekly_drill(root).await
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and any filter); this benchmark takes no arguments.
    if b3sum_version().is_none() {
        eprintln!(
            "bench: `b3sum` is not on PATH; install it with `cargo install b3sum --locked` (or run scripts/bench.sh)"
        );
        return ExitCode::from(2);
    }
    let base = std::env::temp_dir();
    let dir = match tempfile::Builder::new().prefix("lakedrill-bench-").tempdir_in(&base) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bench: cannot create a temporary folder under {}: {e}", base.display());
            return ExitCode::from(2);
        }
    };
    let root = match dir.path().canonicalize() {
        Ok(p) if !has_hidden_component(&p) => p,
        Ok(p) => {
            eprintln!(
                "bench: {} has a hidden path component; set TMPDIR to another folder",
                p.display()
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("bench: cannot resolve {}: {e}", dir.path().display());
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bench: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = rt.block_on(bench(&root));
    if std::env::var_os("LAKEDRILL_BENCH_KEEP").is_some() {
        eprintln!("bench: LAKEDRILL_BENCH_KEEP: the data stay in {}", dir.keep().display());
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::from(2)
        }
    }
}
