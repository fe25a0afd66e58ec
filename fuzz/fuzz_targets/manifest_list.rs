//! Manifest lists (Avro), as format v1 and v2.
//!
//! As in the `manifest` target, panics that lakedrill catches (`table::parse_manifest_list`) are not
//! findings; a panic that escapes still aborts the run with its reproducer.
#![no_main]
use iceberg::spec::FormatVersion;
libfuzzer_sys::fuzz_target!(init: std::panic::set_hook(Box::new(|_| {})), |data: &[u8]| {
    for v in [FormatVersion::V1, FormatVersion::V2] {
        let _ = lakedrill::table::parse_manifest_list("fuzz://snap.avro", data, v);
    }
});
