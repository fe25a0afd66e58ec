//! The process-wide bound on the Avro decoder's allocations (manifests and manifest lists are Avro).

/// The most the Avro decoder may allocate for one length it reads (a string, bytes, a block, a count of
/// array or map items). Real manifests and manifest lists stay far below it (Avro blocks are ~64 KiB); the
/// decoder's own default, 512 MiB, let a 40-byte fuzzed manifest list reserve 10 GB, because an item count
/// is checked as if it were bytes and then multiplied by the size of a decoded value.
pub const AVRO_MAX_ALLOCATION: usize = 16 << 20;

/// Bounds the Avro decoder's allocations to [`AVRO_MAX_ALLOCATION`] (process-wide, set once, before the
/// first decode). Called by the binary's `main`, by [`crate::io::store::Storage::new`] and by every parse of a
/// manifest or manifest list, so that no decode in the process runs under the decoder's default.
pub fn bound_avro_allocations() {
    let _ = apache_avro::util::max_allocation_bytes(AVRO_MAX_ALLOCATION);
}
