//! Bytes and rows: object storage ([`store`], the only module that talks to `object_store`), the
//! fault layer the lab installs in it, SQL databases, catalogs, and the bridge that hands our
//! storage to the iceberg crate.
//!
//! Knows objects, rows and catalog pointers, not Iceberg semantics. May use `model` and the ground.

pub mod avro;
pub mod catalog;
pub(crate) mod db;
pub mod fault_store;
pub mod iceberg_io;
pub mod ident;
pub mod metadata;
pub mod rest;
pub mod store;
