//! Manifest lists (Avro), as format v1 and v2.
#![no_main]
use iceberg::spec::FormatVersion;
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for v in [FormatVersion::V1, FormatVersion::V2] {
        let _ = lakedrill::table::parse_manifest_list("fuzz://snap.avro", data, v);
    }
});
