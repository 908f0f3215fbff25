//! placeholder
use crate::{Error, Folded};
/// x
pub fn build(_folded: &Folded, _call: Option<usize>) -> Result<String, Error> {
    Ok(String::new())
}
