//! A map written as a list of `[key, value]` pairs: for the model's maps whose keys are tuples,
//! which JSON objects cannot hold (`#[serde(with = "pairs")]`).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Writes the map as a sequence of pairs.
pub(crate) fn serialize<K, V, H, S>(
    map: &HashMap<K, V, H>,
    serializer: S,
) -> Result<S::Ok, S::Error>
where
    K: Serialize,
    V: Serialize,
    S: Serializer,
{
    serializer.collect_seq(map.iter())
}

/// Reads a sequence of pairs back into a map.
pub(crate) fn deserialize<'de, K, V, H, D>(deserializer: D) -> Result<HashMap<K, V, H>, D::Error>
where
    K: Deserialize<'de> + Eq + Hash,
    H: BuildHasher + Default,
    V: Deserialize<'de>,
    D: Deserializer<'de>,
{
    Vec::<(K, V)>::deserialize(deserializer).map(|pairs| pairs.into_iter().collect())
}
