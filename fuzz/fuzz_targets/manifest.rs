//! Manifests (Avro).
//!
//! `table::parse_manifest` turns a panic of the Avro decoder into an error naming the manifest, so a panic
//! it catches is not a finding here: the hook libFuzzer installs (abort on any panic, caught or not) is
//! replaced by a silent one. A panic that escapes lakedrill still ends the run: libfuzzer-sys aborts when
//! the target unwinds, and the reproducer is saved.
#![no_main]
libfuzzer_sys::fuzz_target!(init: std::panic::set_hook(Box::new(|_| {})), |data: &[u8]| {
    let _ = lakedrill::table::parse_manifest("fuzz://m0.avro", data);
});
