//! Manifests (Avro).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = lakedrill::table::parse_manifest("fuzz://m0.avro", data);
});
