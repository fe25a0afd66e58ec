//! Bundles past the signature: the fuzzed bytes are the statement of a bundle signed with a trusted
//! key, verified from an in-memory store (no copies, no data: every check must end in a finding or
//! an error, never a panic, and never open a path outside the table location).
#![no_main]
use lakedrill::bundle::{self, VerifyOptions};
use lakedrill::evidence::keys::{PublicKey, SigningKey, TrustStore};
use lakedrill::io::store::{Storage, StorageOptions};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let key = SigningKey::from(ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]));
    let Ok(trust) = TrustStore::from_keys(vec![PublicKey::new("fuzz", "fuzz.pub", key.verifying_key())]) else {
        return;
    };
    let env = lakedrill::evidence::sign("application/vnd.in-toto+json", data, &key);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    rt.block_on(async {
        let storage = Storage::new(StorageOptions::default());
        if storage
            .put("memory:///b/bundle.dsse.json", bytes::Bytes::from(env.to_json_bytes()))
            .await
            .is_err()
        {
            return;
        }
        // Data objects are read from the (empty) in-memory table root, never from the URIs the fuzzed
        // inventory names.
        let opts = VerifyOptions {
            deep: true,
            table_root: Some("memory:///t".into()),
        };
        let _ = bundle::verify(&storage, "memory:///b", &trust, &opts).await;
    });
});
