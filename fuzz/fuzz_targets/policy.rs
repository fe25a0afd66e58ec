//! lakehouseRetentionPolicy.v1 documents (YAML).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = lakedrill::govern::policy::parse(data, "fuzz.yaml");
});
