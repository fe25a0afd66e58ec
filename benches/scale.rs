//! Metadata walks and memory at scale, and restore against per-request latency (issue: performance).
//!
//! `cargo bench --bench scale` (or `scripts/bench.sh`). Each figure is printed with its baseline,
//! measured in the same run, and the ratio:
//!
//! * **c. `plan` vs PyIceberg.** A table with `LAKEDRILL_BENCH_SNAPSHOTS` snapshots (default 1,000)
//!   of `LAKEDRILL_BENCH_FILES_PER_SNAPSHOT` data files each (default 100: 100,000 files) is written
//!   with the `iceberg` crate (SQL catalog on SQLite, one `fast_append` per snapshot), its data files of 1 KiB
//!   created (plan lists the table folder). Then
//!   `lakedrill plan` (the release binary, a subprocess) and PyIceberg's `inspect.all_files()` (the
//!   Python of `LAKEDRILL_BENCH_PYTHON`, default `target/test-venv/bin/python`) run on it under GNU
//!   `time`, which reports wall time and peak RSS. Target: plan ≥ 10× faster, ≤ ½ the RSS.
//! * **d. restore behind latency.** `LAKEDRILL_BENCH_SMALL_OBJECTS` (default 10,000) objects of 4 KiB
//!   are sealed, copied into an in-memory store wrapped in `object_store`'s `ThrottledStore` adding
//!   20 ms per GET, and the bundle is verified with its data read from there. The bound is
//!   `io_concurrency ÷ 20 ms` objects per second. Target: ≥ 80 % of the bound.
//! * **e. plan and seal at 100k, 300k and 1M data files** (`LAKEDRILL_BENCH_SCALES`, comma-separated;
//!   10M is `LAKEDRILL_BENCH_SCALES=1000000,10000000`, ~45 min and ~45 GB of disk for 10M 8-byte files)
//!   in one current snapshot each, written as appends of `LAKEDRILL_BENCH_FILES_PER_MANIFEST` files (default
//!   100,000; one manifest and one folder each, so 1M files are 10 appends): wall time and peak RSS of
//!   `lakedrill plan`, `lakedrill seal` and `lakedrill restore` of the sealed bundle (subprocesses). Seal
//!   needs the files: they are created (8 bytes each). Targets: ≤ 512 MiB peak RSS at 1M files for each,
//!   ≤ 4 GiB at 10M, and time per file within 1.5× of the smallest scale's. At the
//!   largest scale (or `LAKEDRILL_BENCH_SHARD_SCALE`) the restore runs again in 4 shares (`restore --shard I/4`),
//!   each alone (the work of each of 4 machines) and all 4 side by side on this machine. Target: the longest
//!   share ≥ 3× faster than the unsharded restore.
//!
//! * **f. purge on the local filesystem** at `LAKEDRILL_BENCH_PURGE_SCALES` objects (default 5,000 and
//!   100,000): a table of N one-row Parquet files (iceberg crate), withdrawn by a PyIceberg `delete()`
//!   after the table's own retention was set to expire history at once; `plan` proposes the expired
//!   snapshot (N data files, its manifest and manifest list), `quarantine` seals it, a quarantine drill
//!   signs the evidence, and `lakedrill purge` (measured) deletes it. Printed: time and RSS per object,
//!   registry transactions (the purge reports them), and a kill-and-resume run at
//!   `LAKEDRILL_BENCH_PURGE_KILL_SCALE` objects (default: the largest scale) killed between batches,
//!   after a batch's intents and inside a batch, whose summary must equal the inventory and pass `audit
//!   verify`. Targets: time per object at 100k within 1.2x of 5k, 100k in <= 60 s, <= 1 registry
//!   transaction per 1,000 objects per state change, <= 512 MiB at 1M.
//!
//! * **h. purge on S3** (SeaweedFS `weed mini` from the tests' venv, or `LAKEDRILL_BENCH_WEED`, started on free
//!   loopback ports): the f purge of `LAKEDRILL_BENCH_S3_OBJECTS` one-row Parquet files (default 100,000) put on
//!   S3 and appended by PyIceberg, three times on fresh tables: with `DeleteObjects` batches (a listing re-checks
//!   each batch), with one conditional `DELETE` and one `HEAD` per object, and with batches of 10,000 objects
//!   (their 10 requests in flight at once) behind `tests/gen/s3_count_proxy.py --delay-ms 20`, which only the
//!   purge talks through. Printed: the whole purge and, from the purge's own `requests`, the wall time of its
//!   delete requests and of its re-checks. Targets: batch ≥ 20× faster than single; behind 20 ms, the delete
//!   requests at ≥ 80 % of 10 requests × 1,000 keys ÷ 20 ms.
//!
//! * **g. `plan` on histories written by the engines** (only with `LAKEDRILL_BENCH_ONLY=g`: writing them takes
//!   ~40 min): `benches/engine_histories.py` writes `LAKEDRILL_BENCH_ENGINE_SNAPSHOTS` (default 1,000) appends of
//!   `LAKEDRILL_BENCH_ENGINE_FILES_PER_SNAPSHOT` (default 100) one-row data files with PyIceberg and with Spark
//!   (Iceberg Java 1.9.2, JDBC catalog on the same SQLite layout), or takes them from
//!   `LAKEDRILL_BENCH_ENGINE_HISTORIES` (`DIR/pyiceberg`, `DIR/spark`, written by the script before). On each:
//!   `lakedrill plan` vs PyIceberg `inspect.all_files()`, each the best of `LAKEDRILL_BENCH_ENGINE_RUNS` (default 3;
//!   peak RSS the highest of the runs; targets ≥ 25×, RSS ≤ ½) and vs Iceberg Java's
//!   `expire_snapshots` procedure through Spark (procedure time; JVM start and table registration reported
//!   apart; target ≥ 20×).
//!
//! `LAKEDRILL_BENCH_KEEP=1` keeps the generated data (the folder is printed) for profiling;
//! `LAKEDRILL_BENCH_WRAP` runs every measured command under a profiler (`heaptrack -o DIR/run`), whose own time
//! and memory then count too.
//!
//! Nothing here is asserted: the verdicts are printed. Exit 0 after measuring, 2 when something
//! could not be measured (a tool missing, a subprocess failing).

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, NestedField, PrimitiveType, Schema, Struct, Type,
};
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableCreation};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};

#[path = "scale/s3_purge.rs"]
mod s3_purge;

type BenchResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const LAKEDRILL: &str = env!("CARGO_BIN_EXE_lakedrill");

fn env_usize(name: &str, default: usize) -> BenchResult<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name}={v:?}: expected a positive integer").into()),
        Err(_) => Ok(default),
    }
}

/// Wall time and peak RSS (KiB) of a subprocess, from GNU time.
struct Measured {
    wall: Duration,
    rss_kib: u64,
    stdout: String,
    /// 0 or 1 (anything else is an error of `measure`).
    code: i32,
}

fn measure(program: &str, args: &[String], cwd: &Path) -> BenchResult<Measured> {
    // LAKEDRILL_BENCH_WRAP: a profiler command line to run each measured command under (its time and RSS are
    // then the profiler's too), e.g. `heaptrack -o /tmp/prof/run`.
    let wrap: Vec<String> = std::env::var("LAKEDRILL_BENCH_WRAP")
        .map(|w| w.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "LAKEDRILL_BENCH %e %M"])
        .args(&wrap)
        .arg(program)
        .args(args)
        .current_dir(cwd)
        .envs(s3_purge::S3_ENV)
        .stdin(Stdio::null())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("LAKEDRILL_BENCH "))
        .ok_or_else(|| format!("{program}: no GNU time line in stderr: {stderr}"))?;
    let mut it = line.split_whitespace().skip(1);
    let wall: f64 = it.next().ok_or("time: no wall")?.parse()?;
    let rss_kib: u64 = it.next().ok_or("time: no rss")?.parse()?;
    // plan and seal exit 0 or 1 (a refusal is still a measured run); anything else is a failure.
    let code = match out.status.code() {
        Some(c @ (0 | 1)) => c,
        _ => return Err(format!("{program} {args:?} failed ({}): {stderr}", out.status).into()),
    };
    Ok(Measured {
        wall: Duration::from_secs_f64(wall),
        rss_kib,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        code,
    })
}

/// [`measure`] run `runs` times: the fastest run's wall time and output, the highest peak RSS of all runs.
fn best_of(runs: usize, program: &str, args: &[String], cwd: &Path) -> BenchResult<Measured> {
    let mut best: Option<Measured> = None;
    for _ in 0..runs.max(1) {
        let m = measure(program, args, cwd)?;
        best = Some(match best {
            Some(b) if b.wall <= m.wall => Measured {
                rss_kib: b.rss_kib.max(m.rss_kib),
                ..b
            },
            Some(b) => Measured {
                rss_kib: b.rss_kib.max(m.rss_kib),
                ..m
            },
            None => m,
        });
    }
    best.ok_or_else(|| "no run".into())
}

async fn catalog(root: &Path) -> BenchResult<iceberg_catalog_sql::SqlCatalog> {
    Ok(SqlCatalogBuilder::default()
        .uri(format!("sqlite:{}?mode=rwc", root.join("catalog.db").display()))
        .warehouse_location(format!("file://{}", root.join("warehouse").display()))
        .sql_bind_style(SqlBindStyle::QMark)
        .with_storage_factory(Arc::new(iceberg::io::LocalFsStorageFactory))
        .load("bench", std::collections::HashMap::new())
        .await?)
}

fn data_file(path: String, size: u64) -> BenchResult<DataFile> {
    Ok(DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(path)
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::empty())
        .partition_spec_id(0)
        .record_count(1)
        .file_size_in_bytes(size)
        .build()?)
}

/// Creates `bench.NAME` and commits `batches` appends; `files(i)` gives the files of append `i`.
async fn make_table(
    root: &Path,
    name: &str,
    batches: usize,
    mut files: impl FnMut(usize, &str) -> BenchResult<Vec<DataFile>>,
) -> BenchResult<()> {
    let cat = catalog(root).await?;
    let ns = NamespaceIdent::new("bench".into());
    if !cat.namespace_exists(&ns).await? {
        cat.create_namespace(&ns, std::collections::HashMap::new()).await?;
    }
    let location = format!("file://{}", root.join("warehouse/bench").join(name).display());
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
        ])
        .build()?;
    let mut table = cat
        .create_table(
            &ns,
            TableCreation::builder()
                .name(name.into())
                .location(location.clone())
                .schema(schema)
                .build(),
        )
        .await?;
    // The policy binds the table's UUID (a bare name is refused).
    std::fs::write(
        root.join(format!("policy-{name}.yaml")),
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: {name}/{}\nprotectedRefs: [main]\nminSnapshotAge: 1s\n\
             maxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n",
            table.metadata().uuid()
        ),
    )?;
    for i in 0..batches {
        let tx = Transaction::new(&table);
        let tx = tx.fast_append().add_data_files(files(i, &location)?).apply(tx)?;
        table = tx.commit(&cat).await?;
        if batches > 10 && (i + 1) % (batches / 10) == 0 {
            eprintln!("bench: {name}: {} of {batches} commits", i + 1);
        }
    }
    Ok(())
}

fn write_config(root: &Path) -> BenchResult<()> {
    std::fs::write(
        root.join("lakedrill.toml"),
        format!(
            "[catalog.bench]\ntype = \"sql\"\nuri = \"sqlite:{0}/catalog.db\"\nwarehouse = \"file://{0}/warehouse\"\n\
             [registry]\nuri = \"sqlite:{0}/registry.db\"\n",
            root.display()
        ),
    )?;
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn plan_args(name: &str) -> Vec<String> {
    [
        "--json",
        "-q",
        "plan",
        "--catalog",
        "bench",
        "--table",
        &format!("bench.{name}"),
        "--policy",
        &format!("policy-{name}.yaml"),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// c: plan vs PyIceberg inspect.all_files() on a long history.
async fn bench_history(root: &Path) -> BenchResult<()> {
    let snapshots = env_usize("LAKEDRILL_BENCH_SNAPSHOTS", 1000)?;
    let per = env_usize("LAKEDRILL_BENCH_FILES_PER_SNAPSHOT", 100)?;
    let python = bench_python()?;
    eprintln!("bench: c. writing {snapshots} snapshots x {per} data files");
    // The data files exist, as in a real table: plan lists the table folder for unreferenced files, and a history
    // whose files were only named in the manifests measured 0.4 s where the same table with its files took 2.1 s.
    let data = root.join("warehouse/bench/hist/data");
    std::fs::create_dir_all(&data)?;
    let body = vec![0_u8; 1024];
    make_table(root, "hist", snapshots, |i, loc| {
        (0..per)
            .map(|j| {
                std::fs::write(data.join(format!("s{i:05}-f{j:04}.parquet")), &body)?;
                data_file(format!("{loc}/data/s{i:05}-f{j:04}.parquet"), 1024)
            })
            .collect()
    })
    .await?;
    tokio::time::sleep(Duration::from_millis(1100)).await; // past minSnapshotAge
    eprintln!("bench: c. lakedrill plan");
    let plan = measure(LAKEDRILL, &plan_args("hist"), root)?;
    let doc: serde_json::Value = serde_json::from_str(&plan.stdout)?;
    eprintln!("bench: c. PyIceberg inspect.all_files()");
    let script = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         c = SqlCatalog('bench', uri='sqlite:///{0}/catalog.db', warehouse='file://{0}/warehouse')\n\
         t = c.load_table('bench.hist')\n\
         print(t.inspect.all_files().num_rows)\n",
        root.display()
    );
    let py = measure(&python, &["-c".into(), script], root)?;
    let speedup = py.wall.as_secs_f64() / plan.wall.as_secs_f64();
    let rss_ratio = plan.rss_kib as f64 / py.rss_kib as f64;
    println!();
    println!(
        "c. plan on {snapshots} snapshots x {per} files ({} files) vs PyIceberg inspect.all_files() ({} rows)",
        snapshots * per,
        py.stdout.trim()
    );
    println!("{:<34} {:>10} {:>12}", "", "wall (s)", "peak RSS MiB");
    println!(
        "{:<34} {:>10.2} {:>12.1}",
        "PyIceberg inspect.all_files()",
        py.wall.as_secs_f64(),
        mib(py.rss_kib)
    );
    println!(
        "{:<34} {:>10.2} {:>12.1}   ({} candidates)",
        "lakedrill plan",
        plan.wall.as_secs_f64(),
        mib(plan.rss_kib),
        doc["candidates"].as_array().map_or(0, Vec::len)
    );
    println!(
        "   plan is {speedup:.1}x faster: {} (target >= 10x); RSS {rss_ratio:.2}x PyIceberg's: {} (target <= 0.5x)",
        pass(speedup >= 10.0),
        pass(rss_ratio <= 0.5)
    );
    Ok(())
}

/// g: plan on long histories written by PyIceberg and by Spark (Iceberg Java), not by the iceberg crate, against
/// PyIceberg's `inspect.all_files()` and Iceberg Java's `expire_snapshots` procedure on the same tables.
async fn bench_engines(root: &Path) -> BenchResult<()> {
    let snapshots = env_usize("LAKEDRILL_BENCH_ENGINE_SNAPSHOTS", 1000)?;
    let per = env_usize("LAKEDRILL_BENCH_ENGINE_FILES_PER_SNAPSHOT", 100)?;
    // plan and PyIceberg are each timed best of `runs` (a first run after the other tools is slower: caches).
    let runs = env_usize("LAKEDRILL_BENCH_ENGINE_RUNS", 3)?;
    let python = bench_python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/engine_histories.py");
    let script = script.display().to_string();
    // Writing them takes long (1,000 x 100: ~11 min with PyIceberg, ~31 min with Spark on 2 cores): histories
    // written before by `engine_histories.py write-*` into DIR/pyiceberg and DIR/spark can be given instead.
    let reuse = std::env::var("LAKEDRILL_BENCH_ENGINE_HISTORIES")
        .ok()
        .map(PathBuf::from);
    println!();
    println!("g. plan on histories written by PyIceberg and by Spark (Iceberg Java 1.9.2), and the engines' own tools");
    for writer in ["pyiceberg", "spark"] {
        let dir = match &reuse {
            Some(r) => r.join(writer),
            None => {
                let dir = root.join(writer);
                eprintln!("bench: g. writing {snapshots} snapshots x {per} data files with {writer}");
                let out = Command::new(&python)
                    .args([
                        script.as_str(),
                        &format!("write-{writer}"),
                        &dir.display().to_string(),
                        "--snapshots",
                        &snapshots.to_string(),
                        "--files-per-snapshot",
                        &per.to_string(),
                    ])
                    .stdin(Stdio::null())
                    .output()?;
                if !out.status.success() {
                    return Err(format!(
                        "engine_histories.py write-{writer} failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                    .into());
                }
                dir
            }
        };
        tokio::time::sleep(Duration::from_millis(1100)).await; // past minSnapshotAge
        eprintln!("bench: g. {writer}: lakedrill plan x{runs}");
        let plan = best_of(runs, LAKEDRILL, &plan_args("hist"), &dir)?;
        let doc: serde_json::Value = serde_json::from_str(&plan.stdout)?;
        eprintln!("bench: g. {writer}: PyIceberg inspect.all_files() x{runs}");
        let dir_s = dir.display().to_string();
        let py = best_of(
            runs,
            &python,
            &[
                script.clone(),
                "pyiceberg-all-files".into(),
                dir_s.clone(),
                "bench.hist".into(),
            ],
            &dir,
        )?;
        eprintln!("bench: g. {writer}: Iceberg Java expire_snapshots (Spark)");
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis();
        let out = Command::new(&python)
            .args([
                script.as_str(),
                "spark-expire",
                &dir_s,
                "bench.hist",
                "--older-than-ms",
                &now_ms.to_string(),
            ])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(format!("spark-expire failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let java: serde_json::Value = serde_json::from_str(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .ok_or("spark-expire printed nothing")?,
        )?;
        let procedure = java["procedure_s"].as_f64().ok_or("spark-expire: no procedure_s")?;
        let p = plan.wall.as_secs_f64();
        let speedup = py.wall.as_secs_f64() / p;
        let rss_ratio = plan.rss_kib as f64 / py.rss_kib as f64;
        println!(
            "   {writer}-written, {snapshots} snapshots x {per} files (best of {runs}; Java one run): lakedrill plan \
             {p:.2} s, {:.1} MiB ({} candidates); \
             PyIceberg all_files() {:.2} s, {:.1} MiB ({} rows); Iceberg Java expire_snapshots {procedure:.2} s \
             (JVM start {:.2} s and register_table {:.2} s not counted; {} snapshots expired)",
            mib(plan.rss_kib),
            doc["candidates"].as_array().map_or(0, Vec::len),
            py.wall.as_secs_f64(),
            mib(py.rss_kib),
            py.stdout.trim(),
            java["jvm_start_s"].as_f64().unwrap_or(f64::NAN),
            java["register_s"].as_f64().unwrap_or(f64::NAN),
            java["expired_snapshots"]
        );
        println!(
            "   {writer}: plan vs PyIceberg {speedup:.1}x: {} (target >= 25x), RSS {rss_ratio:.2}x: {} (target <= 0.5x); \
             plan vs expire_snapshots {:.1}x: {} (target >= 20x)",
            pass(speedup >= 25.0),
            pass(rss_ratio <= 0.5),
            procedure / p,
            pass(procedure / p >= 20.0)
        );
    }
    Ok(())
}

/// The Python with PyIceberg (and Spark, for g) that the bench runs: `LAKEDRILL_BENCH_PYTHON`, else the test
/// suite's venv; one that is not there is named (a bare "No such file or directory" from the first script was all
/// a run said before).
fn bench_python() -> BenchResult<String> {
    let (python, from) = match std::env::var("LAKEDRILL_BENCH_PYTHON") {
        Ok(p) => (p, "LAKEDRILL_BENCH_PYTHON"),
        Err(_) => (
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target/test-venv/bin/python")
                .display()
                .to_string(),
            "the test suite's venv",
        ),
    };
    if !Path::new(&python).exists() {
        return Err(format!(
            "the bench's Python {python} ({from}) does not exist: run ./scripts/test.sh once (it makes \
             target/test-venv) or set LAKEDRILL_BENCH_PYTHON to a Python with PyIceberg"
        )
        .into());
    }
    Ok(python)
}

/// d: verify of many small objects behind a store adding 20 ms per GET.
async fn bench_latency(root: &Path) -> BenchResult<()> {
    use lakedrill::bundle::{self, RestoreStatus, VerifyOptions};
    use lakedrill::evidence::keys::{PublicKey, SigningKey, TrustStore};
    use lakedrill::io::store::{Storage, StorageOptions};
    use object_store::throttle::{ThrottleConfig, ThrottledStore};
    let n = env_usize("LAKEDRILL_BENCH_SMALL_OBJECTS", 10_000)?;
    let latency = Duration::from_millis(20);
    eprintln!("bench: d. writing {n} objects of 4 KiB");
    let dir = root.join("small");
    let data = dir.join("data");
    std::fs::create_dir_all(&data)?;
    let mut files = Vec::with_capacity(n);
    let body = vec![7u8; 4096];
    for i in 0..n {
        let p = data.join(format!("o{i:06}.parquet"));
        let mut b = body.clone();
        b[..8].copy_from_slice(&(i as u64).to_le_bytes());
        std::fs::write(&p, &b)?;
        files.push(data_file(format!("file://{}", p.display()), 4096)?);
    }
    let db = root.join("small-catalog.db");
    lakedrill::lab::demo::create_table_with_data_files(
        &db,
        &root.join("small-wh"),
        "bench",
        "small",
        &format!("file://{}", dir.display()),
        files,
    )
    .await?;
    let options = StorageOptions::default();
    let concurrency = options.io_concurrency.get();
    let mut config = lakedrill::config::Config::default();
    config.catalog.insert(
        "b".into(),
        lakedrill::config::CatalogConfig {
            kind: "sql".into(),
            uri: format!("sqlite:{}", db.display()),
            warehouse: None,
            name: Some("demo".into()),
            ..Default::default()
        },
    );
    let local = Storage::new(options.clone());
    let table = lakedrill::table::Table::load(
        &local,
        &config,
        &lakedrill::table::TableSource::Catalog {
            catalog: "b".into(),
            table: "bench.small".into(),
            table_root: None,
        },
    )
    .await?;
    let id = table.metadata().current_snapshot_id().ok_or("no snapshot")?;
    let key = SigningKey::generate();
    let trust = TrustStore::from_keys(vec![PublicKey::new("bench", "bench.pub", key.verifying_key())])?;
    let out = lakedrill::model::location::canonical_uri(&root.join("small-bundles").display().to_string())?;
    let sealed = bundle::seal(&table, &local, id, &key, &out, chrono::Utc::now())
        .await?
        .map_err(|f| format!("seal: {f:?}"))?;
    // The same objects behind 20 ms per request.
    let mem = Arc::new(object_store::memory::InMemory::new());
    let throttled = ThrottledStore::new(
        Arc::clone(&mem),
        ThrottleConfig {
            wait_get_per_call: latency,
            ..ThrottleConfig::default()
        },
    );
    {
        use object_store::ObjectStoreExt;
        for e in std::fs::read_dir(&data)? {
            let p = e?.path();
            let name = p.file_name().ok_or("name")?.to_string_lossy().into_owned();
            mem.put(
                &object_store::path::Path::from(format!("small/data/{name}")),
                std::fs::read(&p)?.into(),
            )
            .await?;
        }
    }
    let storage = Storage::with_memory_store(options, Arc::new(throttled));
    eprintln!(
        "bench: d. verifying {n} objects behind {} ms per GET",
        latency.as_millis()
    );
    let start = Instant::now();
    let r = bundle::verify(
        &storage,
        &sealed.uri,
        &trust,
        &VerifyOptions {
            deep: false,
            table_root: Some("memory:///small".into()),
            shard: None,
        },
    )
    .await?;
    let wall = start.elapsed();
    if r.status != RestoreStatus::RestoreVerified || r.objects_verified < n {
        return Err(format!("d: the bundle did not verify: {:?}", r.findings.first()).into());
    }
    let bound = concurrency as f64 / latency.as_secs_f64();
    let rate = n as f64 / wall.as_secs_f64();
    println!();
    println!(
        "d. restore of {n} objects of 4 KiB, {} ms per GET, io_concurrency {concurrency}",
        latency.as_millis()
    );
    println!(
        "   bound {bound:.0} objects/s; measured {rate:.0} objects/s in {:.2} s = {:.0} % of the bound: {} (target >= 80 %)",
        wall.as_secs_f64(),
        100.0 * rate / bound,
        pass(rate / bound >= 0.8)
    );
    Ok(())
}

/// e: plan and seal at several sizes, one snapshot each.
async fn bench_sizes(root: &Path) -> BenchResult<()> {
    let scales: Vec<usize> = std::env::var("LAKEDRILL_BENCH_SCALES")
        .unwrap_or_else(|_| "100000,300000,1000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<usize>()
                .map_err(|e| format!("LAKEDRILL_BENCH_SCALES: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::new();
    // The sharded restore runs at one scale: LAKEDRILL_BENCH_SHARD_SCALE, default the largest.
    let shard_scale = match std::env::var("LAKEDRILL_BENCH_SHARD_SCALE") {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|e| format!("LAKEDRILL_BENCH_SHARD_SCALE: {e}"))?,
        Err(_) => scales.iter().copied().max().unwrap_or(0),
    };
    let per_manifest = env_usize("LAKEDRILL_BENCH_FILES_PER_MANIFEST", 100_000)?.max(1);
    let mut shards = None;
    for n in scales {
        let name = format!("s{n}");
        eprintln!("bench: e. {n} files: creating them and one snapshot");
        let data = root.join("warehouse/bench").join(&name).join("data");
        // One append (one manifest, one folder) per `per_manifest` files: at 10M files no process, the
        // generator included, holds every DataFile at once, and no folder holds ten million names.
        let appends = n.div_ceil(per_manifest).max(1);
        make_table(root, &name, appends, |i, loc| {
            let part = format!("p{i:04}");
            std::fs::create_dir_all(data.join(&part))?;
            (i * per_manifest..n.min((i + 1) * per_manifest))
                .map(|j| {
                    let p = data.join(&part).join(format!("f{j:08}.parquet"));
                    std::fs::write(&p, j.to_le_bytes())?;
                    data_file(format!("{loc}/data/{part}/f{j:08}.parquet"), 8)
                })
                .collect()
        })
        .await?;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        eprintln!("bench: e. {n} files: plan");
        let plan = measure(LAKEDRILL, &plan_args(&name), root)?;
        eprintln!("bench: e. {n} files: seal");
        ensure_key(root)?;
        let seal = measure(
            LAKEDRILL,
            &[
                "-q",
                "seal",
                "--catalog",
                "bench",
                "--table",
                &format!("bench.{name}"),
                "--key",
                "keys/bench.key",
                "--out",
                &format!("bundles-{name}"),
            ]
            .map(str::to_owned),
            root,
        )?;
        // Restore (verify) of that bundle: the signed envelope, the inventory and every object.
        eprintln!("bench: e. {n} files: restore");
        let bundle = std::fs::read_dir(root.join(format!("bundles-{name}")))?
            .next()
            .ok_or("seal wrote no bundle folder")??
            .path();
        let restore = measure(
            LAKEDRILL,
            &[
                "-q".to_owned(),
                "restore".to_owned(),
                bundle.display().to_string(),
                "--trust".to_owned(),
                "trust".to_owned(),
            ],
            root,
        )?;
        if restore.code != 0 {
            return Err(format!("restore of {} did not verify: {}", bundle.display(), restore.stdout).into());
        }
        if n == shard_scale {
            shards = Some((n, restore.wall, restore_shards(root, &bundle)?));
        }
        // The files are no longer needed (unless the data are kept for profiling).
        if std::env::var_os("LAKEDRILL_BENCH_KEEP").is_none() {
            std::fs::remove_dir_all(&data)?;
        }
        rows.push((n, plan, seal, restore));
    }
    println!();
    println!("e. plan, seal and restore (verify) of one snapshot, time and peak RSS by number of data files");
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "files", "plan (s)", "us/file", "RSS MiB", "seal (s)", "us/file", "RSS MiB", "restore", "us/file", "RSS MiB"
    );
    for (n, p, s, r) in &rows {
        let per = |m: &Measured| m.wall.as_secs_f64() * 1e6 / *n as f64;
        println!(
            "{n:>10} {:>10.2} {:>10.2} {:>10.1} {:>10.2} {:>10.2} {:>10.1} {:>10.2} {:>10.2} {:>10.1}",
            p.wall.as_secs_f64(),
            per(p),
            mib(p.rss_kib),
            s.wall.as_secs_f64(),
            per(s),
            mib(s.rss_kib),
            r.wall.as_secs_f64(),
            per(r),
            mib(r.rss_kib)
        );
    }
    // The targets: <= 512 MiB at up to 1M files, <= 4 GiB above (the 10M figure); the largest scale is judged,
    // and every scale of 1M files or more is printed.
    for (n, p, s, r) in rows
        .iter()
        .filter(|r| r.0 >= 1_000_000 || Some(r.0) == rows.iter().map(|r| r.0).max())
    {
        let (limit, label) = if *n > 1_000_000 {
            (4096, "4 GiB at 10M")
        } else {
            (512, "512 MiB at 1M")
        };
        for (what, m) in [("plan", p), ("seal", s), ("restore", r)] {
            println!(
                "   peak RSS of {what} at {n} files: {:.1} MiB: {} (target <= {label} files)",
                mib(m.rss_kib),
                pass(m.rss_kib <= limit * 1024)
            );
        }
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last())
        && last.0 > first.0
    {
        type Row = (usize, Measured, Measured, Measured);
        type Phase = fn(&Row) -> &Measured;
        let phases: [(&str, Phase); 3] = [("plan", |r| &r.1), ("seal", |r| &r.2), ("restore", |r| &r.3)];
        for (what, phase) in phases {
            let per = |r: &Row| phase(r).wall.as_secs_f64() / r.0 as f64;
            let growth = per(last) / per(first);
            println!(
                "   time per file of {what} at {} vs {} files: {growth:.2}x: {} (target <= 1.5x)",
                last.0,
                first.0,
                pass(growth <= 1.5)
            );
        }
        let all =
            |r: &(usize, Measured, Measured, Measured)| (r.1.wall + r.2.wall + r.3.wall).as_secs_f64() / r.0 as f64;
        let growth = all(last) / all(first);
        println!(
            "   time per file (plan + seal + restore) at {} vs {} files: {growth:.2}x: {} (near-linear: <= 1.5x)",
            last.0,
            first.0,
            pass(growth <= 1.5)
        );
    }
    if let Some((n, whole, s)) = shards {
        let walls: Vec<f64> = s.one_by_one.iter().map(|m| m.wall.as_secs_f64()).collect();
        let sum: f64 = walls.iter().sum();
        let longest = walls.iter().copied().fold(0.0, f64::max);
        println!();
        println!(
            "e. restore of the {n}-file snapshot in 4 shares (restore --shard I/4), each alone, then all 4 at once"
        );
        println!(
            "   unsharded {:.2} s; shares {} s (RSS {} MiB); sum {sum:.2} s; all 4 side by side on this machine {:.2} s",
            whole.as_secs_f64(),
            walls.iter().map(|w| format!("{w:.2}")).collect::<Vec<_>>().join(" / "),
            s.one_by_one
                .iter()
                .map(|m| format!("{:.0}", mib(m.rss_kib)))
                .collect::<Vec<_>>()
                .join(" / "),
            s.side_by_side.as_secs_f64()
        );
        let speedup = whole.as_secs_f64() / longest;
        println!(
            "   4 machines (the longest share) vs 1: {speedup:.2}x: {} (target >= 3x); sum of the shares vs unsharded: {:.2}x",
            pass(speedup >= 3.0),
            sum / whole.as_secs_f64()
        );
    }
    Ok(())
}

/// The four shares of one restore, measured one at a time (what each of 4 machines does) and side by side.
struct Shards {
    one_by_one: Vec<Measured>,
    side_by_side: Duration,
}

fn restore_shards(root: &Path, bundle: &Path) -> BenchResult<Shards> {
    let args = |i: usize| {
        vec![
            "-q".to_owned(),
            "restore".to_owned(),
            bundle.display().to_string(),
            "--trust".to_owned(),
            "trust".to_owned(),
            "--shard".to_owned(),
            format!("{i}/4"),
        ]
    };
    let mut one_by_one = Vec::new();
    for i in 0..4 {
        eprintln!("bench: e. restore share {i}/4");
        let m = measure(LAKEDRILL, &args(i), root)?;
        if m.code != 0 {
            return Err(format!("restore --shard {i}/4 did not verify: {}", m.stdout).into());
        }
        one_by_one.push(m);
    }
    eprintln!("bench: e. restore shares 0..4 side by side");
    let t = Instant::now();
    let children: Vec<_> = (0..4)
        .map(|i| {
            Command::new(LAKEDRILL)
                .args(args(i))
                .current_dir(root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for mut c in children {
        let status = c.wait()?;
        if !status.success() {
            return Err(format!("a restore share side by side failed: {status}").into());
        }
    }
    Ok(Shards {
        one_by_one,
        side_by_side: t.elapsed(),
    })
}

/// `keys/bench.key` and the purge's own `keys/bench-deleter.key` (made once), their public halves alone in
/// `trust/` (`purge` never accepts evidence signed by its own key).
fn ensure_key(root: &Path) -> BenchResult<()> {
    for name in ["bench", "bench-deleter"] {
        if !root.join(format!("keys/{name}.key")).exists() {
            measure(
                LAKEDRILL,
                &["-q", "keygen", "--name", name, "--dir", "keys"].map(str::to_owned),
                root,
            )?;
        }
        std::fs::create_dir_all(root.join("trust"))?;
        std::fs::copy(
            root.join(format!("keys/{name}.pub")),
            root.join(format!("trust/{name}.pub")),
        )?;
    }
    Ok(())
}

/// A Parquet file of one row of the bench schema (`id`, field id 1).
fn parquet_row() -> BenchResult<Vec<u8>> {
    use arrow_array::{Int64Array, RecordBatch};
    use arrow_schema::{DataType, Field, Schema as ArrowSchema};
    let schema = Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false).with_metadata(std::collections::HashMap::from([(
            "PARQUET:field_id".to_owned(),
            "1".to_owned(),
        )])),
    ]));
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(Int64Array::from(vec![1_i64]))])?;
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, schema, None)?;
    w.write(&batch)?;
    w.close()?;
    Ok(buf)
}

/// Runs `lakedrill ARGS` in `root` (not measured) and returns its stdout as JSON; exit 0 or 1 only.
fn lakedrill_json(root: &Path, args: &[&str]) -> BenchResult<serde_json::Value> {
    let out = Command::new(LAKEDRILL)
        .args(args)
        .current_dir(root)
        .envs(s3_purge::S3_ENV)
        .stdin(Stdio::null())
        .output()?;
    if !matches!(out.status.code(), Some(0 | 1)) {
        return Err(format!(
            "lakedrill {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// One purge measurement: the candidate's object count, the purge, and the registry transactions it committed.
struct PurgeRun {
    objects: usize,
    purge: Measured,
    transactions: u64,
    /// Receipts the signed summary counts.
    receipts: u64,
    /// The purge's own account of its delete requests (`requests` of its JSON: counts and wall time).
    requests: serde_json::Value,
}

/// f: a candidate of `n` data files (one append withdrawn by a PyIceberg delete), quarantined, drilled and
/// purged on the local filesystem; `kills` purges are killed first (LAKEDRILL_FAILPOINTS) and resumed.
async fn purge_at(root: &Path, python: &str, n: usize, kills: &[String]) -> BenchResult<PurgeRun> {
    let name = if kills.is_empty() {
        format!("p{n}")
    } else {
        format!("k{n}")
    };
    eprintln!("bench: f. {n} files: creating them, one append and a delete of them all");
    let data = root.join("warehouse/bench").join(&name).join("data");
    std::fs::create_dir_all(&data)?;
    // Drills read every data file's Parquet footer: each file is the same one-row Parquet file.
    let body = parquet_row()?;
    make_table(root, &name, 1, |_, loc| {
        (0..n)
            .map(|j| {
                let p = data.join(format!("f{j:07}.parquet"));
                std::fs::write(&p, &body)?;
                data_file(format!("{loc}/data/f{j:07}.parquet"), body.len() as u64)
            })
            .collect()
    })
    .await?;
    let policy = format!("policy-{name}.yaml");
    let mut text = std::fs::read_to_string(root.join(&policy))?;
    text.push_str("regulatedData: false\nreclamationImplementationDigest: any\n");
    std::fs::write(root.join(&policy), text)?;
    // The withdrawal: a delete of every row, which drops the files from `main` (metadata only), after the table's
    // own retention was set to expire history at once.
    let script = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         c = SqlCatalog('bench', uri='sqlite:///{0}/catalog.db', warehouse='file://{0}/warehouse')\n\
         t = c.load_table('bench.{name}')\n\
         t.transaction().set_properties({{'history.expire.max-snapshot-age-ms': '1'}}).commit_transaction()\n\
         t.delete()\n",
        root.display()
    );
    let out = Command::new(python).args(["-c", &script]).output()?;
    if !out.status.success() {
        return Err(format!("PyIceberg delete: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    purge_candidate(root, "bench", &name, kills, || Ok(())).await
}

/// The governance of a withdrawn table `CATALOG`.`bench.NAME` in `root` (its `lakedrill.toml`, `keys/bench.key`,
/// `trust/` and `policy-NAME.yaml`): plan, quarantine, a quarantine drill, `kills` purges killed first, then the
/// measured purge, whose summary must equal the inventory and pass `audit verify`. `before_purge` runs just
/// before the purges (h puts the store behind latency there).
async fn purge_candidate(
    root: &Path,
    catalog: &str,
    name: &str,
    kills: &[String],
    before_purge: impl FnOnce() -> BenchResult<()>,
) -> BenchResult<PurgeRun> {
    let policy = format!("policy-{name}.yaml");
    tokio::time::sleep(Duration::from_millis(1100)).await; // past minSnapshotAge
    let table = format!("bench.{name}");
    let t = ["--catalog", catalog, "--table", table.as_str()];
    lakedrill_json(
        root,
        &[
            "--json",
            "rollout",
            "set",
            &table,
            "test",
            "--catalog",
            catalog,
            "--reason",
            "benchmark",
            "--policy",
            &policy,
            "--force",
        ],
    )?;
    let mut args = vec!["--json", "-q", "plan", "--policy", &policy];
    args.extend(t);
    let plan = lakedrill_json(root, &args)?;
    let candidate = plan["candidates"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["kind"] == "expired-snapshots"))
        .ok_or_else(|| {
            format!(
                "f: the plan proposed no expired-snapshots candidate (first differences: {})",
                plan["differences"]
                    .as_array()
                    .and_then(|d| d.first())
                    .unwrap_or(&serde_json::Value::Null)
            )
        })?;
    let id = candidate["candidate_id"].as_str().ok_or("candidate id")?.to_owned();
    let objects = candidate["objects"].as_array().map_or(0, Vec::len);
    eprintln!("bench: {name}: quarantine of {objects} objects");
    let bundles = format!("bundles-{name}");
    let mut args = vec![
        "--json",
        "-q",
        "quarantine",
        &id,
        "--policy",
        &policy,
        "--key",
        "keys/bench.key",
        "--bundles",
        &bundles,
    ];
    args.extend(t);
    let q = lakedrill_json(root, &args)?;
    if q["verdict"] == "findings" || q.get("bundles").is_none() {
        return Err(format!("f: quarantine refused: {q}").into());
    }
    let drill = root.join(format!("drill-{name}.toml"));
    std::fs::write(
        &drill,
        format!(
            "name = \"bench-{name}\"\nkind = \"quarantine\"\nbundles = \"{bundles}\"\ntrust = \"trust\"\n\
             key = \"keys/bench.key\"\nreports = \"reports-{name}\"\n"
        ),
    )?;
    eprintln!("bench: {name}: drill");
    let d = lakedrill_json(root, &["--json", "-q", "drill", "run", &drill.display().to_string()])?;
    let evidence = d["report"]
        .as_str()
        .ok_or_else(|| format!("f: drill wrote no report: {d}"))?
        .to_owned();
    let receipts = format!("receipts-{name}");
    let mut purge: Vec<String> = [
        "--json",
        "-q",
        "purge",
        &id,
        "--policy",
        &policy,
        "--trust",
        "trust",
        "--key",
        "keys/bench-deleter.key",
        "--receipts",
        &receipts,
        "--evidence",
        &evidence,
    ]
    .map(str::to_owned)
    .into();
    purge.extend(t.map(str::to_owned));
    before_purge()?;
    for spec in kills {
        eprintln!("bench: {name}: purge killed by {spec}");
        let out = Command::new(LAKEDRILL)
            .args(&purge)
            .current_dir(root)
            .envs(s3_purge::S3_ENV)
            .env("LAKEDRILL_FAILPOINTS", spec)
            .stdin(Stdio::null())
            .output()?;
        if out.status.code().is_some() {
            return Err(format!(
                "f: the purge with {spec} was not killed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stdout)
            )
            .into());
        }
    }
    eprintln!("bench: {name}: purge");
    let m = measure(LAKEDRILL, &purge, root)?;
    let r: serde_json::Value = serde_json::from_str(&m.stdout)?;
    let verified = r["objects"]["VERIFIED"].as_array().map_or(0, Vec::len);
    if r["status"] != "VERIFIED" || verified != objects {
        return Err(format!(
            "f: the purge of {objects} objects ended {} with {verified} verified: {}",
            r["status"], r["reasons"]
        )
        .into());
    }
    let transactions = r["registry_transactions"].as_u64().unwrap_or(0);
    // The signed summary: equal to the inventory, and its receipts chain equal to the registry.
    let summary = r["summary"].as_str().ok_or("f: the purge wrote no summary")?.to_owned();
    let audit = lakedrill_json(root, &["--json", "audit", "verify", &summary, "--trust", "trust"])?;
    if audit["status"] != "VERIFIED" {
        return Err(format!("f: audit verify of {summary}: {}", audit["status"]).into());
    }
    let statement = lakedrill::evidence::peek_unverified(&std::fs::read(summary.trim_start_matches("file://"))?)
        .ok_or("f: the summary is not a signed statement")?;
    let p = &statement["predicate"];
    if p["equals_inventory"] != true || p["deleted"].as_array().map_or(0, Vec::len) != objects {
        return Err(format!("f: the summary of {summary} does not equal the inventory of {objects} objects").into());
    }
    let receipts = p["receipts"].as_u64().unwrap_or(0);
    if receipts < 2 * objects as u64 {
        return Err(format!("f: {receipts} receipts for {objects} objects (an intent and a confirmation each)").into());
    }
    Ok(PurgeRun {
        objects,
        purge: m,
        transactions,
        receipts,
        requests: r["requests"].clone(),
    })
}

async fn bench_purge(root: &Path) -> BenchResult<()> {
    let python = bench_python()?;
    let scales: Vec<usize> = std::env::var("LAKEDRILL_BENCH_PURGE_SCALES")
        .unwrap_or_else(|_| "5000,100000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<usize>()
                .map_err(|e| format!("LAKEDRILL_BENCH_PURGE_SCALES: {e}"))
        })
        .collect::<Result<_, _>>()?;
    ensure_key(root)?;
    let mut rows = Vec::new();
    for &n in &scales {
        rows.push((n, purge_at(root, &python, n, &[]).await?));
    }
    // The same purge killed three times first (between two batches, after a batch's intents, inside a batch
    // after part of its deletes), at LAKEDRILL_BENCH_PURGE_KILL_SCALE objects (default: the largest scale).
    let kill_scale = match std::env::var("LAKEDRILL_BENCH_PURGE_KILL_SCALE") {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .map_err(|e| format!("LAKEDRILL_BENCH_PURGE_KILL_SCALE: {e}"))?,
        Err(_) => scales.iter().copied().max().unwrap_or(0),
    };

    println!();
    println!("f. purge on the local filesystem (one candidate of N data files + its metadata), time and peak RSS");
    println!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>14}",
        "objects", "purge (s)", "us/object", "objects/s", "RSS MiB", "registry txns"
    );
    for (_, r) in &rows {
        let s = r.purge.wall.as_secs_f64();
        println!(
            "{:>10} {:>10.2} {:>10.1} {:>10.0} {:>10.1} {:>14}",
            r.objects,
            s,
            s * 1e6 / r.objects as f64,
            r.objects as f64 / s,
            mib(r.purge.rss_kib),
            r.transactions
        );
    }
    if let (Some((_, small)), Some((_, big))) = (rows.first(), rows.last())
        && big.objects > small.objects
    {
        let per = |r: &PurgeRun| r.purge.wall.as_secs_f64() / r.objects as f64;
        // Every larger scale against the smallest (the target is stated for 100k against 5k).
        for (_, r) in rows.iter().skip(1) {
            let growth = per(r) / per(small);
            println!(
                "   time per object at {} vs {} objects: {growth:.2}x: {} (target <= 1.2x)",
                r.objects,
                small.objects,
                pass(growth <= 1.2)
            );
        }
        if let Some((_, r)) = rows.iter().find(|(_, r)| (100_000..200_000).contains(&r.objects)) {
            println!(
                "   {} objects took {:.1} s: {} (target <= 60 s for 100k)",
                r.objects,
                r.purge.wall.as_secs_f64(),
                pass(r.purge.wall.as_secs_f64() <= 60.0)
            );
        }
        // Two state changes per object (the intent, then the outcome), each written for a whole batch of up to
        // 1,000 objects in one transaction; the rest is per run (claim, acceptance checks, heartbeat, release).
        let batches = big.objects.div_ceil(1000) as u64;
        let per_run = big.transactions.saturating_sub(2 * batches);
        println!(
            "   registry transactions: {} for {} objects = {:.2} per 1,000 objects per state change (2 state changes, \
             {per_run} per run besides): {} (target <= 1 per 1,000 objects per state change)",
            big.transactions,
            big.objects,
            (big.transactions - per_run) as f64 * 1000.0 / big.objects as f64 / 2.0,
            pass(big.transactions <= 2 * batches + 16)
        );
        let verdict = if big.objects >= 1_000_000 {
            pass(big.purge.rss_kib <= 512 * 1024)
        } else {
            "not judged below 1M objects"
        };
        println!(
            "   peak RSS at {} objects: {:.1} MiB: {verdict} (target <= 512 MiB at 1M)",
            big.objects,
            mib(big.purge.rss_kib),
        );
    }
    let kills = ["abort-at-batch=3", "abort-after-intent=1", "abort-after=300"].map(str::to_owned);
    if kill_scale > 0 {
        let k = purge_at(root, &python, kill_scale, &kills).await?;
        println!(
            "   killed by {} in turn, the purge of {} objects resumed and ended VERIFIED: every object deleted and \
             verified, the signed summary equal to the inventory ({} receipts), `audit verify` of it VERIFIED",
            kills.join(", "),
            k.objects,
            k.receipts
        );
    }
    Ok(())
}

async fn bench(root: &Path) -> BenchResult<()> {
    write_config(root)?;
    println!(
        "lakedrill scale benchmark: {} CPUs, binary {LAKEDRILL}",
        std::thread::available_parallelism().map_or(0, NonZeroUsize::get)
    );
    let only = std::env::var("LAKEDRILL_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only.contains('d') {
        bench_latency(root).await?;
    }
    if only.is_empty() || only.contains('c') {
        bench_history(root).await?;
    }
    if only.is_empty() || only.contains('e') {
        bench_sizes(root).await?;
    }
    if only.is_empty() || only.contains('f') {
        bench_purge(root).await?;
    }
    if only.is_empty() || only.contains('h') {
        ensure_key(root)?;
        s3_purge::bench_s3_purge(root, &bench_python()?).await?;
    }
    if only.contains('g') {
        bench_engines(root).await?;
    }
    Ok(())
}

fn main() -> ExitCode {
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("bench: GNU time (/usr/bin/time) is needed for peak RSS; scripts/bench.sh installs it");
        return ExitCode::from(2);
    }
    let dir = match tempfile::Builder::new()
        .prefix("lakedrill-scale-")
        .tempdir_in(std::env::temp_dir())
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bench: cannot create a temporary folder: {e}");
            return ExitCode::from(2);
        }
    };
    let root = match dir.path().canonicalize() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench: {e}");
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
