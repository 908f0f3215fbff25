//! placeholder
use crate::Folded;
/// x
pub fn build(_folded: &Folded) -> serde_json::Value {
    serde_json::Value::Null
}
