//! The lean Avro decoder of whole-history walks and sealing (`scan.rs`): its own container framing, bounded
//! inflate and `serde_avro_fast` datums, as manifest lists (v1, v2) and as manifests. `FastOnly` keeps the
//! iceberg parser out of the way, so every input exercises the fast path; panics it catches are not findings
//! (silent hook, as in the `manifest` target), a panic that escapes aborts with its reproducer.
#![no_main]
use iceberg::spec::FormatVersion;
use lakedrill::table::scan::{self, Decoder};
libfuzzer_sys::fuzz_target!(init: std::panic::set_hook(Box::new(|_| {})), |data: &[u8]| {
    for v in [FormatVersion::V1, FormatVersion::V2] {
        let _ = scan::manifest_list_entries("fuzz://snap.avro", data, v, Decoder::FastOnly);
    }
    let mut n = 0usize;
    let _ = scan::live_files(
        "fuzz://m0.avro",
        data,
        Decoder::FastOnly,
        |_| {
            n += 1;
            Ok(())
        },
        || n = 0,
    );
});
