//! Drill reports past the signature: the fuzzed bytes are the statement, signed with a trusted
//! key, so the auditor's predicate checks (gate, chain, results) see arbitrary content.
#![no_main]
use lakedrill::evidence::keys::{PublicKey, SigningKey, TrustStore};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let key = SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]));
    let Ok(trust) = TrustStore::from_keys(vec![PublicKey::new("fuzz", "fuzz.pub", key.verifying_key())]) else {
        return;
    };
    let env = lakedrill::evidence::sign("application/vnd.in-toto+json", data, &key);
    let mut findings = Vec::new();
    let _ = lakedrill::ops::audit::check_report("fuzz.dsse.json", &env.to_json_bytes(), &trust, &mut findings);
});
