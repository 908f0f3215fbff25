//! Fault injection: rules, their grammar, and the control a view uses.

pub mod control;
pub mod controller;
pub mod file;
pub mod plan;
pub mod rules;
pub mod spec;

pub use control::{FaultChoice, FaultControl};
pub use controller::{Controller, controller, install, load};
pub use plan::{Fault, Plan, Planner, RequestInfo, Trigger};
pub use rules::{Repeat, Rule, RuleEngine};
pub use spec::SpecError;
