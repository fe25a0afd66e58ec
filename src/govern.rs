//! The rules of deletion, pure: the retention policy, the non-deletable closure and the
//! candidate plan, the governance decision document.
//!
//! Synchronous and I/O-free: no storage, no registry, no async, no tokio. May use `evidence`,
//! `model` and the ground.

pub mod baseline;
pub mod closure;
pub mod compare;
pub mod decision;
pub mod input;
pub mod policy;
