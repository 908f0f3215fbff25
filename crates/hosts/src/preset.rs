//! How each agent host is started for one cell: its non-interactive mode, an MCP configuration
//! naming the cell's proxy, its model API pointed at the stub, a throwaway HOME, and its
//! switches for telemetry, update checks and tool search off.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::stub::Api;

/// The name the MCP server is given in every host's configuration.
pub const SERVER_NAME: &str = "mcpscope";

/// The prompt a host gets when none is given.
pub const DEFAULT_PROMPT: &str =
    "Call the MCP tool once with the given arguments, then report its result in one line.";

/// The model Gemini CLI is pinned to, past its router.
const GEMINI_MODEL: &str = "gemini-2.5-flash";

/// An agent host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// Claude Code (`claude -p`), Anthropic Messages.
    ClaudeCode,
    /// OpenAI Codex CLI (`codex exec`), OpenAI Responses.
    Codex,
    /// Gemini CLI (`gemini -p`), Gemini `streamGenerateContent`.
    GeminiCli,
    /// Any other host: its command (with `{url}` and `{model_url}`) and the API it speaks.
    Custom {
        /// The model API.
        api: Api,
        /// The command.
        command: Vec<String>,
    },
}

impl Host {
    /// Parses `claude-code`, `codex`, `gemini-cli` (`custom` needs its command: see
    /// [`Host::custom`]).
    pub fn parse(name: &str) -> Result<Host, String> {
        match name {
            "claude-code" | "claude" => Ok(Host::ClaudeCode),
            "codex" => Ok(Host::Codex),
            "gemini-cli" | "gemini" => Ok(Host::GeminiCli),
            other => Err(format!(
                "unknown host {other:?} (claude-code, codex, gemini-cli or custom)"
            )),
        }
    }

    /// A custom host speaking `api` (`anthropic`, `openai-responses`, `openai-chat`, `gemini`).
    pub fn custom(api: &str, command: Vec<String>) -> Result<Host, String> {
        let api = match api {
            "anthropic" => Api::Anthropic,
            "openai-responses" => Api::OpenAiResponses,
            "openai-chat" => Api::OpenAiChat,
            "gemini" => Api::Gemini,
            other => {
                return Err(format!(
                    "unknown model API {other:?} (anthropic, openai-responses, openai-chat or gemini)"
                ));
            }
        };
        if command.is_empty() {
            return Err("--host custom needs the host's command after `--`".into());
        }
        Ok(Host::Custom { api, command })
    }

    /// Its name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
            Host::GeminiCli => "gemini-cli",
            Host::Custom { .. } => "custom",
        }
    }

    /// The model API it speaks.
    pub fn api(&self) -> Api {
        match self {
            Host::ClaudeCode => Api::Anthropic,
            Host::Codex => Api::OpenAiResponses,
            Host::GeminiCli => Api::Gemini,
            Host::Custom { api, .. } => *api,
        }
    }

    /// The program run when `--host-bin` is not given.
    pub fn default_bin(&self) -> Option<&str> {
        match self {
            Host::ClaudeCode => Some("claude"),
            Host::Codex => Some("codex"),
            Host::GeminiCli => Some("gemini"),
            Host::Custom { command, .. } => command.first().map(String::as_str),
        }
    }
}

/// Everything a cell's host launch needs to know.
#[derive(Debug, Clone)]
pub struct Cell<'a> {
    /// The program (`--host-bin`, or the default on PATH).
    pub bin: &'a str,
    /// The prompt.
    pub prompt: &'a str,
    /// The MCP server URL (the cell's proxy).
    pub mcp_url: &'a str,
    /// The stub's base URL, `http://127.0.0.1:PORT`.
    pub model_url: &'a str,
    /// The tool the host is to call (for permissions).
    pub tool: &'a str,
    /// The throwaway HOME (exists, empty).
    pub home: &'a Path,
}

/// A host's command line and environment for one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The whole environment (the host gets nothing else).
    pub env: Vec<(String, String)>,
}

/// A dummy credential: hosts insist on one; the stub ignores it.
const DUMMY_KEY: &str = "mcpscope-model-stub-key";

fn base_env(home: &Path) -> Vec<(String, String)> {
    let home_text = home.display().to_string();
    let mut env = vec![
        ("HOME".to_string(), home_text.clone()),
        ("XDG_CONFIG_HOME".into(), format!("{home_text}/.config")),
        ("XDG_CACHE_HOME".into(), format!("{home_text}/.cache")),
        ("XDG_DATA_HOME".into(), format!("{home_text}/.local/share")),
        ("XDG_STATE_HOME".into(), format!("{home_text}/.local/state")),
        ("TMPDIR".into(), format!("{home_text}/tmp")),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("CI".into(), "1".into()),
    ];
    for name in ["PATH", "LANG", "LC_ALL"] {
        if let Ok(value) = std::env::var(name) {
            env.push((name.to_string(), value));
        }
    }
    env
}

fn pairs(items: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<Vec<_>>()
        .into_iter()
}

fn write(path: PathBuf, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// The host's launch for one cell; writes its configuration files into `cell.home`.
pub fn launch(host: &Host, cell: &Cell<'_>) -> anyhow::Result<Launch> {
    std::fs::create_dir_all(cell.home.join("tmp"))?;
    let mut env = base_env(cell.home);
    let argv = match host {
        Host::ClaudeCode => {
            let config =
                json!({"mcpServers": {SERVER_NAME: {"type": "http", "url": cell.mcp_url}}});
            env.extend(pairs(&[
                ("ANTHROPIC_BASE_URL", cell.model_url),
                ("ANTHROPIC_API_KEY", DUMMY_KEY),
                // Without it the MCP tools hide behind a tool search the stub never does.
                ("ENABLE_TOOL_SEARCH", "false"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                ("DISABLE_BUG_COMMAND", "1"),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ("CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "1"),
            ]));
            env.push((
                "CLAUDE_CONFIG_DIR".into(),
                cell.home.join(".claude").display().to_string(),
            ));
            vec![
                cell.bin.to_string(),
                "-p".into(),
                cell.prompt.to_string(),
                "--strict-mcp-config".into(),
                "--mcp-config".into(),
                config.to_string(),
                "--allowedTools".into(),
                format!("mcp__{SERVER_NAME}__{}", cell.tool),
            ]
        }
        Host::Codex => {
            let codex_home = cell.home.join(".codex");
            write(
                codex_home.join("config.toml"),
                &format!(
                    "model = \"mcpscope-model-stub\"\nmodel_provider = \"mcpscope\"\n\
                     approval_policy = \"never\"\nsandbox_mode = \"read-only\"\n\
                     check_for_update_on_startup = false\n\n\
                     [model_providers.mcpscope]\nname = \"mcpscope model stub\"\n\
                     base_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n\
                     request_max_retries = 0\nstream_max_retries = 0\n\n\
                     [mcp_servers.{SERVER_NAME}]\nurl = \"{}\"\n\n\
                     [analytics]\nenabled = false\n\n[otel]\nexporter = \"none\"\n",
                    cell.model_url, cell.mcp_url
                ),
            )?;
            env.extend(pairs(&[
                ("OPENAI_API_KEY", DUMMY_KEY),
                ("OPENAI_BASE_URL", &format!("{}/v1", cell.model_url)),
                ("CODEX_HOME", &codex_home.display().to_string()),
            ]));
            vec![
                cell.bin.to_string(),
                "exec".into(),
                "--skip-git-repo-check".into(),
                cell.prompt.to_string(),
            ]
        }
        Host::GeminiCli => {
            let settings = json!({
                "mcpServers": {SERVER_NAME: {"httpUrl": cell.mcp_url, "trust": true}},
                "telemetry": {"enabled": false},
                "privacy": {"usageStatisticsEnabled": false},
                "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                "security": {"auth": {"selectedType": "gemini-api-key"}},
            });
            write(
                cell.home.join(".gemini/settings.json"),
                &serde_json::to_string_pretty(&settings)?,
            )?;
            env.extend(pairs(&[
                ("GEMINI_API_KEY", DUMMY_KEY),
                ("GOOGLE_GEMINI_BASE_URL", cell.model_url),
                ("GEMINI_CLI_NO_RELAUNCH", "true"),
                ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ]));
            // The model pinned: in `-p` mode Gemini CLI otherwise first asks a router model
            // (with no tools offered) which model to use.
            vec![
                cell.bin.to_string(),
                "-m".into(),
                GEMINI_MODEL.into(),
                "-p".into(),
                cell.prompt.to_string(),
                "--yolo".into(),
            ]
        }
        Host::Custom { command, .. } => {
            env.extend(pairs(&[
                ("MCPSCOPE_MCP_URL", cell.mcp_url),
                ("MCPSCOPE_MODEL_URL", cell.model_url),
            ]));
            command
                .iter()
                .map(|a| {
                    a.replace("{url}", cell.mcp_url)
                        .replace("{model_url}", cell.model_url)
                })
                .collect()
        }
    };
    Ok(Launch { argv, env })
}

/// The version a host prints for `--version` (its first token that starts with a digit), run
/// with `env` (the sandbox's, never the machine's own network).
pub fn version(bin: &str, env: &[(String, String)]) -> Option<String> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.trim_end_matches([',', ')']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(home: &Path) -> Cell<'_> {
        Cell {
            bin: "/opt/claude",
            prompt: "go",
            mcp_url: "http://127.0.0.1:1/mcp",
            model_url: "http://127.0.0.1:2",
            tool: "slow",
            home,
        }
    }

    fn env_of<'a>(launch: &'a Launch, name: &str) -> Option<&'a str> {
        launch
            .env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn claude_code_gets_the_proxy_the_stub_and_no_tool_search() {
        let home = tempfile::tempdir().expect("tempdir");
        let launch = launch(&Host::ClaudeCode, &cell(home.path())).expect("launch");
        assert_eq!(launch.argv[..3], ["/opt/claude", "-p", "go"]);
        let config = launch
            .argv
            .iter()
            .position(|a| a == "--mcp-config")
            .map(|i| launch.argv[i + 1].clone())
            .expect("--mcp-config");
        let config: serde_json::Value = serde_json::from_str(&config).expect("json");
        assert_eq!(
            config["mcpServers"]["mcpscope"],
            json!({"type": "http", "url": "http://127.0.0.1:1/mcp"})
        );
        assert!(launch.argv.contains(&"--strict-mcp-config".to_string()));
        assert!(launch.argv.contains(&"mcp__mcpscope__slow".to_string()));
        assert_eq!(
            env_of(&launch, "ANTHROPIC_BASE_URL"),
            Some("http://127.0.0.1:2")
        );
        assert_eq!(env_of(&launch, "ENABLE_TOOL_SEARCH"), Some("false"));
        assert_eq!(
            env_of(&launch, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"),
            Some("1")
        );
        assert_eq!(
            env_of(&launch, "HOME"),
            Some(home.path().display().to_string().as_str())
        );
    }

    #[test]
    fn custom_hosts_get_both_urls_substituted() {
        let home = tempfile::tempdir().expect("tempdir");
        let host = Host::custom(
            "openai-chat",
            vec!["h".into(), "--mcp={url}".into(), "{model_url}/v1".into()],
        )
        .expect("host");
        let launch = launch(&host, &cell(home.path())).expect("launch");
        assert_eq!(
            launch.argv,
            ["h", "--mcp=http://127.0.0.1:1/mcp", "http://127.0.0.1:2/v1"]
        );
        assert!(Host::custom("cobol", vec!["h".into()]).is_err());
        assert!(Host::custom("gemini", vec![]).is_err());
    }

    #[test]
    fn codex_and_gemini_get_their_configuration_files() {
        let home = tempfile::tempdir().expect("tempdir");
        launch(&Host::Codex, &cell(home.path())).expect("codex");
        let toml = std::fs::read_to_string(home.path().join(".codex/config.toml")).expect("toml");
        assert!(
            toml.contains("base_url = \"http://127.0.0.1:2/v1\""),
            "{toml}"
        );
        assert!(toml.contains("url = \"http://127.0.0.1:1/mcp\""), "{toml}");
        launch(&Host::GeminiCli, &cell(home.path())).expect("gemini");
        let settings =
            std::fs::read_to_string(home.path().join(".gemini/settings.json")).expect("json");
        assert!(
            settings.contains("\"httpUrl\": \"http://127.0.0.1:1/mcp\""),
            "{settings}"
        );
    }
}
