//! The arguments of `mcpscope matrix`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Options of `matrix`.
#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// The client command and its arguments; `{url}` is replaced by the proxy's URL (with
    /// --forward, by the server's own URL).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Run each cell's proxy as a forward proxy: the client gets the server's own URL and
    /// reaches it through `HTTPS_PROXY`/`HTTP_PROXY` (set for it, with the local CA trusted),
    /// as `mcpscope run` does.
    #[arg(long)]
    pub forward: bool,
    /// With --forward, trust the certificates of this PEM file for upstream TLS, besides the
    /// Web PKI roots (repeatable).
    #[arg(long = "ca-file", value_name = "FILE", requires = "forward")]
    pub ca_files: Vec<PathBuf>,
    /// Comma-separated cases to run (default: all; see --list).
    #[arg(long, value_name = "LIST")]
    pub cases: Option<String>,
    /// Leave out the cases about slow calls (progress-keeps-alive, silent-slow: 30 s and 45 s
    /// each) when --cases is not given.
    #[arg(long)]
    pub quick: bool,
    /// Print the cases and exit.
    #[arg(long)]
    pub list: bool,
    /// How long the client may sit idle after the stream death (or, in the healthy control,
    /// after its call) before it is judged hung. Only idle time counts: time in which its
    /// processes ran or waited for a CPU does not, up to four timeouts, past which the cell is
    /// inconclusive.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = mcpscope_engine::fault::spec::parse_timeout)]
    pub timeout: Duration,
    /// How long the client may take from its start until it sends the call (and the fault
    /// fires); a cell past it is inconclusive, never a defect.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = mcpscope_engine::fault::spec::parse_timeout)]
    pub startup_timeout: Duration,
    /// The fault hits the first tools/call of this tool (default: of any tool).
    #[arg(long, value_name = "NAME", conflicts_with = "method")]
    pub tool: Option<String>,
    /// The fault hits the first request of this method.
    #[arg(long, value_name = "METHOD")]
    pub method: Option<String>,
    /// The MCP server to use (default: a built-in test server per cell, set up for its case).
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,
    /// Start your own Streamable HTTP server for each cell instead of the built-in one: its
    /// command line (split into words as a shell does), where `{port}` is the cell's port; with
    /// --host it runs inside the cell's loopback-only network namespace. The cases that need the
    /// built-in server's own setup are skipped, as with --upstream.
    #[arg(long, value_name = "COMMAND", conflicts_with = "upstream")]
    pub server_command: Option<String>,
    /// The MCP endpoint's path on --server-command's port.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/mcp",
        requires = "server_command"
    )]
    pub server_path: String,
    /// Print one JSON object per cell instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Plain progress lines and the table at the end, even on a terminal (where the matrix
    /// otherwise shows its grid filling in live).
    #[arg(long)]
    pub plain: bool,
    /// Also write JUnit XML here: a test case per cell, a failure per defect.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown table for a bug report here.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Keep each cell's recording here as CASE.jsonl (open one with `mcpscope replay`).
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<PathBuf>,
    /// How many cells run at once [default: the machine's cores].
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Run every cell's proxy with --rescue.
    #[arg(long)]
    pub rescue: bool,
    /// Drive an agent host instead of a client command: a preset's name (see --hosts:
    /// claude-code, codex, gemini-cli, qwen-code, or one of yours in ~/.config/mcpscope/hosts/), or custom
    /// (its command after `--`, with `{url}` and `{model_url}`). Its model API goes to a
    /// built-in scripted model; everything runs in a loopback-only network namespace.
    #[arg(long, value_name = "HOST", group = "agent_host")]
    pub host: Option<String>,
    /// Drive the agent host this preset file (TOML, as in hosts/) describes.
    #[arg(long, value_name = "PATH", group = "agent_host")]
    pub host_file: Option<PathBuf>,
    /// Print the host presets (what each needs, whether its program is on PATH) and exit.
    #[arg(long)]
    pub hosts: bool,
    /// The host's program [default: the preset's, found on PATH]. Given several times, the
    /// whole matrix runs once per program (a version sweep), one column each.
    #[arg(long, value_name = "PATH", requires = "agent_host")]
    pub host_bin: Vec<String>,
    /// The prompt the host is given.
    #[arg(long, value_name = "TEXT", requires = "agent_host")]
    pub prompt: Option<String>,
    /// The model API a `--host custom` speaks: anthropic, openai-responses, openai-chat, gemini.
    #[arg(long, value_name = "API", requires = "agent_host")]
    pub model_api: Option<String>,
    /// The arguments the model asks the host to call the tool with, a JSON object [default:
    /// 3 steps 150 ms apart for the built-in server's `slow`, else `{}`].
    #[arg(long, value_name = "JSON", requires = "agent_host")]
    pub tool_args: Option<String>,
}
