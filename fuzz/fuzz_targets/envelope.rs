//! DSSE envelopes as they arrive (signature, payload type, statement), and the same bytes as a
//! drill report for the auditor's checks.
#![no_main]
use lakedrill::evidence::keys::{PublicKey, SigningKey, TrustStore};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let key = SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]));
    let Ok(trust) = TrustStore::from_keys(vec![PublicKey::new("fuzz", "fuzz.pub", key.verifying_key())]) else {
        return;
    };
    let _ = lakedrill::evidence::verify(data, &trust);
    let mut findings = Vec::new();
    let _ = lakedrill::ops::audit::check_report("fuzz.dsse.json", data, &trust, &mut findings);
});
