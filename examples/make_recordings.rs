//! Makes the sample recordings in `recordings/` (see `mcpscope_testkit::scenario`).
//! Run by `scripts/make-recordings.sh`.
//!
//! Usage: `cargo run --example make_recordings -- [OUT_DIR] [SCENARIO...]`

use std::path::PathBuf;

use anyhow::Context;
use mcpscope_testkit::scenario::{SCENARIOS, record};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| "recordings".into()));
    let chosen: Vec<String> = args.collect();
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    for name in SCENARIOS {
        if chosen.is_empty() || chosen.iter().any(|c| c == name) {
            record(name, &out)
                .await
                .with_context(|| format!("scenario {name}"))?;
        }
    }
    Ok(())
}
