//! Time is injected (issue 17 point 5): the planner reads `now` from the context's clock, so a test drives it.
//!
//! The same demo table, the same registry and the same policy (`minSnapshotAge: 30d`) are planned twice: at
//! the real time nothing is old enough to expire; on a context whose clock stands 31 days later, the
//! snapshots outside the protected refs become an `expired-snapshots` candidate.

use std::sync::Arc;

use lakedrill::clock::TestClock;
use lakedrill::config::Config;
use lakedrill::ops::context::Context;
use lakedrill::table::TableSource;

use crate::util::{block_on, tmpdir};

fn expired_candidates(ctx: &Context, policy: &std::path::Path) -> usize {
    let source = TableSource::Catalog {
        catalog: "demo".into(),
        table: "sales.orders".into(),
        table_root: None,
    };
    let out = block_on(lakedrill::ops::plan::plan(ctx, &source, policy, &Default::default())).unwrap();
    out.json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "expired-snapshots")
        .count()
}

#[test]
fn the_planner_reads_time_from_the_context_clock() {
    let dir = tmpdir();
    let lake = dir.path().join("lake");
    let builder = Context::new(Config::default());
    block_on(lakedrill::lab::demo::build_lakehouse(&builder, &lake, true)).unwrap();
    block_on(builder.close());
    let config = Config::load(&lake.join("lakedrill.toml"), true).unwrap();
    let orders = TableSource::Catalog {
        catalog: "demo".into(),
        table: "sales.orders".into(),
        table_root: None,
    };
    let reader = Context::new(config.clone());
    let uuid = block_on(reader.table(&orders)).unwrap().metadata().uuid();
    block_on(reader.close());
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        format!(
            "schema: lakehouseRetentionPolicy.v1\ntable: orders/{uuid}\nprotectedRefs: [main]\nminSnapshotAge: 30d\n\
             maxReaderLease: 14d\nmaxWriterDuration: 6h\nlegalHoldGeneration: 0\norphanSafetyInterval: 12h\n"
        ),
    )
    .unwrap();
    let now_ms = chrono::Utc::now().timestamp_millis();

    let today = Context::new(config.clone()).with_clock(Arc::new(TestClock::new(now_ms, 0)));
    assert_eq!(expired_candidates(&today, &policy), 0, "nothing is 30 days old yet");
    // A writer that begins now and is still open 31 days later is a warning then, never silently expired.
    let source = TableSource::Catalog {
        catalog: "demo".into(),
        table: "sales.orders".into(),
        table_root: None,
    };
    block_on(lakedrill::ops::protect::writer_begin(
        &today,
        &source,
        "data/staging/slow",
    ))
    .unwrap();
    let warned = |ctx: &Context| {
        block_on(lakedrill::ops::plan::plan(ctx, &source, &policy, &Default::default()))
            .unwrap()
            .json["warnings"]
            .to_string()
            .contains("longer than maxWriterDuration")
    };
    assert!(!warned(&today), "a writer open for a moment is no warning");
    block_on(today.close());

    let later = Context::new(config).with_clock(Arc::new(TestClock::new(now_ms + 31 * 86_400_000, 0)));
    assert_eq!(
        expired_candidates(&later, &policy),
        1,
        "31 days later by the context's clock, the unprotected snapshots expire"
    );
    assert!(warned(&later), "31 days later the open writer is reported");
    block_on(later.close());
}
