//! Command-line interface.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use mcpscope_engine::fault::spec::parse_timeout;

/// A terminal debugger for MCP Streamable HTTP sessions: which stream owns which pending call,
/// and when it died.
#[derive(Debug, Parser)]
#[command(
    name = "mcpscope",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run (default: the proxy).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Proxy options (when no subcommand is given).
    #[command(flatten)]
    pub proxy: ProxyArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a small built-in MCP server for experiments.
    ServeTest(ServeTestArgs),
    /// Start the test server, the proxy and the TUI, and drive a scripted client into a failure.
    Demo(DemoArgs),
    /// Open a recording in the viewer, or serve it as a mock upstream.
    Replay(ReplayArgs),
    /// Check recordings for calls that went wrong; exit 1 if any did (for CI).
    Check(CheckArgs),
    /// Write a recording as HAR, OTLP/JSON traces, a Mermaid diagram or a Markdown table.
    Export(ExportArgs),
    /// Rewrite a recording (version 1 or 2) in the current format, version 2.
    Convert(ConvertArgs),
    /// Run a client command through every stream death and judge how it reacts; exit 1 if it
    /// has a defect.
    Matrix(Box<mcpscope_matrix::MatrixArgs>),
    /// Open a live view of a running session (a proxy of this user), or list them.
    Attach(AttachArgs),
    /// Run a stdio MCP server as a transparent shim: its stdin, stdout and stderr pass through
    /// unchanged, its traffic is recorded, its exit code is ours.
    Stdio(StdioArgs),
    /// Save the index of recordings ahead of time, so that the viewer opens them at once.
    Index(IndexArgs),
    /// Run the scripted model endpoint alone (for testing an agent host by hand): it calls the
    /// offered MCP tool once, then finishes, and prints every request it saw.
    ModelStub(ModelStubArgs),
    /// Compare two recordings (or a baseline and a recording): tools, resources, prompts,
    /// capabilities, revision, and per tool calls, errors, latency and context cost; with
    /// --exit-code, exit 1 when the server's definitions drifted.
    Diff(DiffArgs),
    /// Print the local CA's certificate path and SHA-256 fingerprint (created on first use),
    /// the CA that forward-proxy mode (`--forward`) issues its certificates with.
    Ca(CaArgs),
    /// Print the environment a shell needs to send its programs through `mcpscope --forward`
    /// (`eval "$(mcpscope env)"`).
    Env(EnvArgs),
    /// Start the forward proxy and run a command through it (its proxy and CA environment set),
    /// until the command ends; its exit code is ours.
    Run(Box<RunArgs>),
    /// Start each stdio MCP server of a host's configuration behind `mcpscope stdio --name
    /// NAME --` (a backup is written first; HTTP servers are left alone); run again, it changes
    /// nothing.
    Wrap(WrapArgs),
    /// Take out what `wrap` put in a host's configuration: the file is the backup again, byte for
    /// byte, when nothing else changed since.
    Unwrap(WrapArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
    /// Print the manual page (roff) to stdout: `mcpscope man | man -l -`.
    Man,
    /// Print a reference chapter of the book (Markdown) to stdout: `cli` (every command and
    /// option) or `keys` (the TUI's keys), from the same definitions the binary uses.
    #[command(hide = true)]
    Reference(ReferenceArgs),
}

/// `mcpscope reference`.
#[derive(Debug, clap::Args)]
pub struct ReferenceArgs {
    /// Which chapter: cli or keys.
    #[arg(value_enum)]
    pub chapter: ReferenceChapter,
}

/// The generated chapters of the book.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ReferenceChapter {
    /// Every command and option.
    Cli,
    /// The TUI's keys.
    Keys,
}

/// Where to listen: a port, or host:port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen(pub SocketAddr);

impl std::str::FromStr for Listen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(port) = s.parse::<u16>() {
            return Ok(Listen(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                port,
            )));
        }
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Listen(addr));
        }
        if let Some(port) = s.strip_prefix("localhost:") {
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("bad port in {s:?}"))?;
            return Ok(Listen(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                port,
            )));
        }
        Err(format!(
            "expected a port (9000) or host:port (127.0.0.1:9000), got {s:?}"
        ))
    }
}

impl Listen {
    /// Whether the address is loopback.
    pub fn is_loopback(&self) -> bool {
        self.0.ip().is_loopback()
    }
}

/// Options of the proxy.
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// Port or host:port to listen on (binds 127.0.0.1 when only a port is given).
    #[arg(long, default_value = "9000")]
    pub listen: Listen,
    /// The MCP server's URL (http:// or https://), e.g. http://127.0.0.1:8765/mcp.
    #[arg(long)]
    pub upstream: Option<String>,
    /// Print one readable line per notable change instead of the TUI.
    #[arg(long)]
    pub headless: bool,
    /// Print one JSON object per line per notable change (implies --headless).
    #[arg(long)]
    pub json: bool,
    /// Where the recording goes.
    #[command(flatten)]
    pub recording: RecordArgs,
    /// Calls the view holds in full in memory; older answered calls become compact rows whose
    /// detail is read back from the recording when opened (pending, orphaned and failed calls
    /// are always held).
    #[arg(long, value_name = "N", default_value_t = mcpscope_engine::model::Retention::DEFAULT_KEEP_CALLS)]
    pub keep: usize,
    /// Keep secrets (credentials, tokens, keys) in recordings and on screen.
    #[arg(long)]
    pub no_redact: bool,
    /// Also redact this header's value (repeatable; Authorization, Cookie, X-Api-Key and any
    /// header named like a token, secret, key, auth or session already are).
    #[arg(long = "redact-header", value_name = "NAME")]
    pub redact_headers: Vec<String>,
    /// Also redact this query or form parameter's value (repeatable).
    #[arg(long = "redact-query", value_name = "NAME")]
    pub redact_query: Vec<String>,
    /// Also redact this JSON key's value wherever it appears in a body (repeatable).
    #[arg(long = "redact-json", value_name = "KEY")]
    pub redact_json: Vec<String>,
    /// Accept any TLS certificate from the upstream (dangerous).
    #[arg(long)]
    pub insecure: bool,
    /// Allow listening on a non-loopback address (the Host guard stays: list the names remote
    /// clients use with --allow-host).
    #[arg(long)]
    pub allow_remote: bool,
    /// A Host name remote clients may use besides loopback ones, `name` or `name:port`
    /// (repeatable).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// An Origin a web page may call the proxy from besides loopback ones, e.g.
    /// https://app.example (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Forward the client's Host and Origin to the upstream unguarded (the proxy's own
    /// DNS-rebinding guard is off), to check the server's own protection; loopback --listen only.
    #[arg(long, conflicts_with = "allow_remote")]
    pub pass_host: bool,
    /// A request body larger than this many bytes gets a 413 with a JSON-RPC error naming the
    /// limit.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    pub max_request_body: usize,
    /// An SSE line or event's data larger than this many bytes is not decoded: the stream is
    /// flagged (`invalid_message`) and its bytes forwarded unchanged.
    #[arg(long, value_name = "BYTES", default_value_t = mcpscope_engine::wire::sse::DEFAULT_MAX_EVENT_BYTES)]
    pub max_sse_event: usize,
    /// A client's request head must arrive within this [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub request_head_timeout: Option<Duration>,
    /// A client's request body must arrive within this, or it gets a 408 [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub request_body_timeout: Option<Duration>,
    /// A client connection with no exchange in flight is closed after this (an open SSE
    /// stream is an exchange in flight) [default: 120s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub idle_timeout: Option<Duration>,
    /// Connecting to the upstream must succeed within this, or the client gets a 504
    /// [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub connect_timeout: Option<Duration>,
    /// The upstream's response head must arrive within this, or the client gets a 504; a
    /// response that has started is never cut [default: 120s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub response_head_timeout: Option<Duration>,
    /// Colour theme: a built-in name (dark, light, high-contrast) or a path to a TOML file.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// Send a span per call, as calls finish, to this OTLP/HTTP traces endpoint (protobuf),
    /// e.g. http://127.0.0.1:4318/v1/traces. A slow or absent collector only loses spans.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics: a port or host:port (binds 127.0.0.1
    /// when only a port is given; another address needs --allow-remote, and the Host guard of
    /// --allow-host applies).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<Listen>,
    /// Arm a fault rule at start (repeatable); see docs/faults.md for the grammar.
    #[arg(long = "fault", value_name = "SPEC")]
    pub faults: Vec<String>,
    /// Arm the fault rules of a TOML file.
    #[arg(long = "faults", value_name = "FILE")]
    pub faults_file: Option<PathBuf>,
    /// Do not publish this session for `mcpscope attach` (by default it listens on a socket in
    /// the user's runtime directory that only this user can open).
    #[arg(long)]
    pub no_publish: bool,
    /// A name for this session, shown by `mcpscope attach --list` and accepted by
    /// `mcpscope attach NAME`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// When a call's SSE stream dies before its response and the client cannot resume it,
    /// answer the call with a JSON-RPC error (code -32000) naming the death, then end the
    /// stream cleanly, instead of passing the death on.
    #[arg(long)]
    pub rescue: bool,
    /// Forward-proxy mode: be the HTTP(S) proxy of the client (`HTTPS_PROXY`; see `mcpscope
    /// env`) instead of standing for one `--upstream`; every server keeps its own URL.
    #[arg(long, conflicts_with_all = ["upstream", "pass_host"])]
    pub forward: bool,
    /// With --forward: intercept TLS to this host only, `name` or `name:port` (repeatable);
    /// CONNECTs to other hosts are tunnelled blind and only counted [default: every host].
    #[arg(long = "intercept", value_name = "HOST[:PORT]", requires = "forward")]
    pub intercept: Vec<String>,
    /// With --forward --allow-remote: let remote clients reach servers on this machine's
    /// loopback too (refused by default: they are not meant to be reachable from outside).
    #[arg(long, requires_all = ["forward", "allow_remote"])]
    pub allow_remote_loopback: bool,
    /// Trust the certificates of this PEM file for upstream TLS, besides the Web PKI roots
    /// (repeatable).
    #[arg(long = "ca-file", value_name = "FILE")]
    pub ca_files: Vec<PathBuf>,
}

/// Options of `model-stub`.
#[derive(Debug, Clone, Args)]
pub struct ModelStubArgs {
    /// Port or host:port to listen on (binds 127.0.0.1 when only a port is given).
    #[arg(long, default_value = "8766")]
    pub listen: Listen,
    /// Which model API to answer: anthropic, openai (Responses and Chat Completions), gemini,
    /// or all (each on its own paths).
    #[arg(long, value_name = "API", default_value = "all")]
    pub api: String,
    /// The MCP tool to call (as hosts name it, e.g. `mcp__SERVER__TOOL`, or just TOOL)
    /// [default: the first offered tool named `mcp__…`].
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// The call's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub tool_args: String,
    /// Print one JSON object per request instead of a line.
    #[arg(long)]
    pub json: bool,
}

/// Options of `serve-test`.
#[derive(Debug, Clone, Args)]
pub struct ServeTestArgs {
    /// Port or host:port to listen on.
    #[arg(long, default_value = "8765")]
    pub listen: Listen,
    /// Answer requests with application/json instead of SSE streams.
    #[arg(long)]
    pub json_responses: bool,
    /// Do not put `id:` fields on SSE events (no resumption possible).
    #[arg(long)]
    pub no_event_ids: bool,
    /// The `retry:` hint (ms) of the priming event of 2025-11-25 streams; 0 sends none.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub retry_ms: u64,
    /// Seconds of silence after which an idle SSE stream gets a `: keep-alive` comment; 0
    /// sends none (an idle stream is then silent on the wire).
    #[arg(long, value_name = "SECONDS", default_value_t = 15)]
    pub keepalive: u64,
}

/// Options of `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Print readable lines instead of the TUI.
    #[arg(long)]
    pub headless: bool,
    /// Print JSON lines instead of the TUI.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many seconds (default: run until quit).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Colour theme.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// Calls the view holds in full in memory; older answered calls become compact rows whose
    /// detail is read back from the recording when opened (pending, orphaned and failed calls
    /// are always held).
    #[arg(long, value_name = "N", default_value_t = mcpscope_engine::model::Retention::DEFAULT_KEEP_CALLS)]
    pub keep: usize,
}

/// Options of `replay`.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// The recording (JSON Lines).
    pub file: PathBuf,
    /// Serve the recording as a mock upstream instead of viewing it.
    #[arg(long)]
    pub serve: bool,
    /// With --serve: port or host:port to listen on.
    #[arg(long, default_value = "9000")]
    pub listen: Listen,
    /// Playback speed: 1 = recorded pacing, 10 = ten times faster, 0 = as fast as possible
    /// (default: 1 for --serve, 0 for headless output).
    #[arg(long)]
    pub speed: Option<f64>,
    /// Print the replayed notices as readable lines instead of the viewer.
    #[arg(long)]
    pub headless: bool,
    /// Print the replayed notices as JSON lines instead of the viewer.
    #[arg(long)]
    pub json: bool,
    /// Colour theme.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// Calls the view holds in full in memory; older answered calls become compact rows whose
    /// detail is read back from the recording when opened (pending, orphaned and failed calls
    /// are always held).
    #[arg(long, value_name = "N", default_value_t = mcpscope_engine::model::Retention::DEFAULT_KEEP_CALLS)]
    pub keep: usize,
    /// Neither read nor write the recording's saved index (see `mcpscope index`).
    #[arg(long)]
    pub no_index_cache: bool,
    /// Open the viewer at this moment (RFC 3339, e.g. a matrix cell's death), paused.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Options of `check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The recordings (JSON Lines).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Comma-separated rules that fail a recording (every rule is named in the help).
    #[arg(long, value_name = "LIST", default_value = mcpscope_analysis::check::DEFAULT_FAIL_ON,
          help = mcpscope_analysis::check::Rule::fail_on_help())]
    pub fail_on: String,
    /// Also write JUnit XML here: a testsuite per recording, a testcase per call.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print one JSON object per recording instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write SARIF 2.1.0 here: a result per finding, located at its recording line.
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
}

/// Options of `export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The recording (JSON Lines).
    pub file: PathBuf,
    /// Output format: har, otlp, mermaid or markdown.
    #[arg(long, value_name = "FORMAT")]
    pub format: String,
    /// With --format mermaid: only the call with this number (as the calls table numbers them).
    #[arg(long, value_name = "N")]
    pub call: Option<usize>,
}

/// `mcpscope convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The recording to read.
    pub input: PathBuf,
    /// The file to write (created 0600; refused if it exists, unless --overwrite).
    pub output: PathBuf,
    /// Replace OUTPUT if it exists (never through a symbolic link).
    #[arg(long)]
    pub overwrite: bool,
}

/// Options of `attach`.
#[derive(Debug, Clone, Args)]
pub struct AttachArgs {
    /// The session: its process id, name, or listen address or port (default: the only one).
    pub session: Option<String>,
    /// List the live sessions and exit.
    #[arg(long)]
    pub list: bool,
    /// Print one readable line per notable change instead of the TUI.
    #[arg(long)]
    pub headless: bool,
    /// Print one JSON object per line per notable change, as the proxy's --json does.
    #[arg(long)]
    pub json: bool,
    /// Colour theme.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
}

/// Options of `completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_a_port_or_host_port() {
        assert_eq!(
            "9000".parse::<Listen>().map(|l| l.0.to_string()),
            Ok("127.0.0.1:9000".into())
        );
        assert_eq!(
            "[::1]:9".parse::<Listen>().map(|l| l.0.to_string()),
            Ok("[::1]:9".into())
        );
        assert!(
            "0.0.0.0:9"
                .parse::<Listen>()
                .is_ok_and(|l| !l.is_loopback())
        );
        assert!("nope".parse::<Listen>().is_err());
    }

    #[test]
    fn subcommands_parse() {
        let cli = Cli::try_parse_from(["mcpscope", "replay", "x.jsonl", "--serve"]).expect("parse");
        assert!(matches!(
            cli.command,
            Some(Command::Replay(ReplayArgs { serve: true, .. }))
        ));
        let cli = Cli::try_parse_from(["mcpscope", "--upstream", "http://h/mcp", "--json"])
            .expect("parse");
        assert!(cli.proxy.json && cli.command.is_none());
        // Remote clients reach loopback servers only when both flags say so.
        assert!(Cli::try_parse_from(["mcpscope", "--allow-remote-loopback"]).is_err());
        assert!(Cli::try_parse_from(["mcpscope", "--forward", "--allow-remote-loopback"]).is_err());
        let cli = Cli::try_parse_from([
            "mcpscope",
            "--forward",
            "--allow-remote",
            "--allow-remote-loopback",
        ])
        .expect("parse");
        assert!(cli.proxy.allow_remote_loopback);
    }

    #[test]
    fn timeouts_parse_as_durations() {
        let cli = Cli::try_parse_from([
            "mcpscope",
            "--idle-timeout",
            "500ms",
            "--connect-timeout",
            "2s",
        ])
        .expect("parse");
        assert_eq!(cli.proxy.idle_timeout, Some(Duration::from_millis(500)));
        assert_eq!(cli.proxy.connect_timeout, Some(Duration::from_secs(2)));
        assert!(Cli::try_parse_from(["mcpscope", "--idle-timeout", "0"]).is_err());
        let plain = Cli::try_parse_from(["mcpscope", "--idle-timeout", "10"]).expect("parse");
        assert_eq!(plain.proxy.idle_timeout, Some(Duration::from_secs(10)));
    }
}

/// Options of `diff`.
#[derive(Debug, Clone, Args)]
pub struct DiffArgs {
    /// Two recordings (A then B), or one with --baseline or --save-baseline.
    #[arg(required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,
    /// Compare this baseline (written by --save-baseline) with the recording.
    #[arg(long, value_name = "FILE", conflicts_with = "save_baseline")]
    pub baseline: Option<PathBuf>,
    /// Write the recording's tools, resources, prompts, capabilities and latency as a baseline
    /// file instead of comparing.
    #[arg(long, value_name = "FILE")]
    pub save_baseline: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print Markdown instead of text.
    #[arg(long)]
    pub markdown: bool,
    /// Exit 1 when the definitions, capabilities or revision differ (0 otherwise).
    #[arg(long)]
    pub exit_code: bool,
}

/// Where a live run records (the proxy, `stdio`).
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// Write the recording here (JSON Lines, mode 0600; default: a new file in ./recordings/).
    #[arg(long, value_name = "PATH", conflicts_with = "no_record")]
    pub record: Option<PathBuf>,
    /// Replace the file given to --record if it exists (it is never written through a link).
    #[arg(long, requires = "record")]
    pub overwrite: bool,
    /// Do not record.
    #[arg(long)]
    pub no_record: bool,
}

/// Options of `stdio`.
#[derive(Debug, Clone, Args)]
pub struct StdioArgs {
    /// Where the recording goes.
    #[command(flatten)]
    pub recording: RecordArgs,
    /// A name for the session (default: the program's file name); the session is
    /// `stdio:NAME:PID`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Write the notices (as `--json` does for the proxy) as JSON lines to stderr, mixed with
    /// the server's own stderr. Never to stdout, which belongs to the server.
    #[arg(long)]
    pub json: bool,
    /// Write the JSON notices to this file (mode 0600, replaced) instead of stderr.
    #[arg(long, value_name = "PATH")]
    pub json_file: Option<PathBuf>,
    /// Keep secrets in the recording (they are hidden by default).
    #[arg(long)]
    pub no_redact: bool,
    /// Do not publish this session for `mcpscope attach` (by default it listens on a socket in
    /// the user's runtime directory that only this user can open).
    #[arg(long)]
    pub no_publish: bool,
    /// The server's command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Options of `ca`.
#[derive(Debug, Clone, Args)]
pub struct CaArgs {
    /// Make a new CA, replacing the old one (clients must trust the new certificate).
    #[arg(long)]
    pub regenerate: bool,
}

/// Options of `env`.
#[derive(Debug, Clone, Args)]
pub struct EnvArgs {
    /// Where the forward proxy listens (as given to `mcpscope --forward --listen`).
    #[arg(long, default_value = "9000")]
    pub listen: Listen,
}

/// Options of `run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Proxy options (`--forward` is implied).
    #[command(flatten)]
    pub proxy: ProxyArgs,
}

/// Options of `wrap` and `unwrap`.
#[derive(Debug, Clone, Args)]
pub struct WrapArgs {
    /// The host: claude-code, claude-desktop, cursor or vscode.
    #[arg(long, value_name = "HOST")]
    pub host: String,
    /// The configuration file (default: the host's user-wide file, e.g. ~/.claude.json,
    /// ~/.cursor/mcp.json); name a project's file here (.mcp.json, .cursor/mcp.json,
    /// .vscode/mcp.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Options of `index`.
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// The recordings (JSON Lines).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Calls the viewer holds in full (as `replay --keep`): the saved models are folded so.
    #[arg(long, value_name = "N", default_value_t = mcpscope_engine::model::Retention::DEFAULT_KEEP_CALLS)]
    pub keep: usize,
}

/// An RFC 3339 time (`2026-12-07T08:00:00.123Z`).
fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .map_err(|e| format!("not an RFC 3339 time ({e}), e.g. 2026-12-07T08:00:00.123Z"))
}
