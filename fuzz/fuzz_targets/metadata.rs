//! Table metadata JSON (plain or gzip): parsed or refused, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = lakedrill::table::parse_metadata("fuzz://metadata.json", data, lakedrill::io::store::DEFAULT_MAX_METADATA_BYTES);
});
