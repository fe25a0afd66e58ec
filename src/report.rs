//! Rendering what the operations found: the command outcome and progress ([`output`]), the HTML
//! drill report, Prometheus metrics.
//!
//! Renders only: reaches no storage. May use `govern`, `evidence`, `model` and the ground.

pub mod html;
pub mod metrics;
pub mod output;
