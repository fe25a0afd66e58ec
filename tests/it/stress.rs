//! Every pipeline command ends: run many times, none may run past its timeout (issue 16 point 6, a process
//! that spun at exit in sqlx's pool maintenance task). `scripts/stress.sh N` is the long version (500 runs of
//! each command); this is the small one the suite runs.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One invocation under a timeout: the exit code, stdout and stderr, or a failure when it ran past the
/// timeout (it is killed then).
pub fn run_with_timeout(cwd: &Path, args: &[&str], timeout: Duration) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lakedrill"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lakedrill");
    // Drained on threads, so that a full pipe never blocks the child.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > timeout {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "lakedrill {args:?} ran past its timeout of {timeout:?} and was killed\nstderr:\n{}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = status
        .code()
        .unwrap_or_else(|| panic!("lakedrill {args:?} was killed by a signal: {status}"));
    (code, out.join().unwrap(), err.join().unwrap())
}

/// See: issue 16 point 6 — `quarantine` printed its JSON, released its claim and spun for 6 minutes.
#[test]
fn r16_pipeline_commands_end_within_their_timeout() {
    let tmp = crate::util::tmpdir();
    let dir = tmp.path().join("lake");
    let (code, out, err) = run_with_timeout(
        tmp.path(),
        &["--json", "-q", "demo", "--dir", dir.to_str().unwrap()],
        Duration::from_secs(600),
    );
    assert_eq!(code, 0, "demo\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let candidate = doc["plan"]["candidates"][0]["candidate_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let report = doc["drill"]["report"].as_str().unwrap().to_owned();
    let t = ["--catalog", "demo", "--table", "sales.orders"];
    let with_table = |args: &[&str]| -> Vec<String> { args.iter().chain(t.iter()).map(|s| (*s).to_owned()).collect() };
    let commands: Vec<Vec<String>> = vec![
        with_table(&["--json", "plan", "--policy", "policy.yaml"]),
        with_table(&[
            "--json",
            "quarantine",
            &candidate,
            "--policy",
            "policy.yaml",
            "--key",
            "keys/demo-drill.key",
            "--bundles",
            "bundles",
        ]),
        vec![
            "--json".into(),
            "drill".into(),
            "run".into(),
            "drills/weekly-quarantine.toml".into(),
        ],
        with_table(&[
            "--json",
            "purge",
            &candidate,
            "--policy",
            "policy.yaml",
            "--trust",
            "keys/trust",
            "--key",
            "keys/demo-deleter.key",
            "--receipts",
            "receipts",
            "--evidence",
            &report,
            "--dry-run",
        ]),
        vec![
            "--json".into(),
            "audit".into(),
            "verify".into(),
            report.clone(),
            "--trust".into(),
            "keys/trust".into(),
        ],
        with_table(&[
            "--json",
            "gates",
            "--policy",
            "policy.yaml",
            "--trust",
            "keys/trust",
            "--reports",
            "reports",
        ]),
        with_table(&["--json", "hold", "list"]),
    ];
    let runs = 21;
    for i in 0..runs {
        let args = &commands[i % commands.len()];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = run_with_timeout(&dir, &args, Duration::from_secs(120));
        // The verdict may be anything a command can give (a second quarantine of a purged candidate is
        // refused); what is tested is that it ends, with one JSON document.
        assert!((0..=2).contains(&code), "run {i}: {args:?} exited {code}\n{err}");
        let doc: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("run {i}: {args:?}: stdout is not one JSON document ({e}):\n{out}\n{err}"));
        assert!(doc.is_object(), "run {i}: {args:?}: {doc}");
        // The demo keeps its trust folder free of private keys: no command warns about one.
        assert!(!err.contains("holds a private key"), "run {i}: {args:?}: {err}");
    }
}
