//! Governance decision documents (JSON), parsed and validated.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = serde_json::from_slice::<lakedrill::ops::decision::DecisionDoc>(data) {
        let _ = doc.validate();
    }
});
