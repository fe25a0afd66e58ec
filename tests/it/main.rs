//! lakedrill's one integration-test binary. Run it through `scripts/test.sh`, which generates the
//! PyIceberg fixtures and starts the local S3 server; without them the tests that need them fail
//! loudly instead of skipping.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod architecture;
mod backup;
mod bounds;
mod clock;
mod compat;
mod concurrency;
mod confine;
mod deleter_safety;
mod demo;
mod deploy;
mod drill;
mod engines;
mod faults;
mod gates;
mod generated;
mod governance;
mod interop;
mod keys;
mod malformed;
mod operator;
mod oracle;
mod orphans;
mod release;
mod rest;
mod retire;
mod rollout;
mod s3;
mod s3_deleter;
mod scan;
mod soak;
mod stores;
mod stress;
mod util;
mod v3;
