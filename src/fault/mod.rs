//! Fault injection: rules, their grammar, and the control a view uses.

pub mod control;
pub mod plan;

pub use control::{FaultChoice, FaultControl};
pub use plan::{Fault, Plan, Planner, RequestInfo, Trigger};
