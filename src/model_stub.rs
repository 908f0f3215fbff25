//! `mcpscope model-stub`: the scripted model endpoint alone, printing every request it saw.

use std::io::Write;

use mcpscope_engine::UsageError;
use mcpscope_hosts::stub::{self, Options, Serves};

use crate::cli::ModelStubArgs;

/// Runs the stub until interrupted.
pub async fn run(args: &ModelStubArgs) -> anyhow::Result<()> {
    if !args.listen.is_loopback() {
        return Err(UsageError(format!(
            "model-stub listens on loopback only, not {}",
            args.listen.0
        ))
        .into());
    }
    let serves = Serves::parse(&args.api).map_err(UsageError)?;
    let tool_args = mcpscope_hosts::stub::parse_tool_args(&args.tool_args)?;
    let stub = stub::start(Options {
        listen: args.listen.0,
        serves,
        tool: args.tool.clone(),
        tool_args,
    })
    .await
    .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen.0))?;
    crate::say!(
        "mcpscope model-stub: {} ({}), calling {}",
        stub.url(),
        args.api,
        args.tool
            .as_deref()
            .unwrap_or("the first offered mcp__ tool")
    );
    let mut printed = 0;
    let print = async {
        loop {
            stub.log.wait_beyond(printed).await;
            let new = stub.log.since(printed);
            printed += new.len();
            let mut out = std::io::stdout().lock();
            for seen in new {
                let line = if args.json {
                    seen.json().to_string()
                } else {
                    seen.line()
                };
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    return;
                }
            }
        }
    };
    tokio::select! {
        () = print => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    stub.shutdown();
    Ok(())
}

//END
