//! Fault injection: rules, their grammar, and the control a view uses.

pub mod control;

pub use control::{FaultChoice, FaultControl};
