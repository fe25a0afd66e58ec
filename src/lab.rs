//! The lab: a scratch lakehouse built on the local file system, the demo, and the fault matrix
//! that runs the real operations against a storage with injected faults.
//!
//! Reaches production code only through [`crate::ops`] and the context's hooks; production
//! commands never build anything from here.

pub mod demo;
pub mod faults;
