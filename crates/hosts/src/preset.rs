//! How each agent host is started for one cell: its non-interactive mode, an MCP configuration
//! naming the cell's proxy, its model API pointed at the stub, a throwaway HOME, and its
//! switches for telemetry, update checks and tool search off. A host is data: a preset file
//! (TOML; the shipped ones are `hosts/*.toml`, a user's are in `~/.config/mcpscope/hosts/`, or
//! any file named with `--host-file`), or a custom command given on the command line.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;

use crate::stub::Api;

/// The name the MCP server is given in every host's configuration.
pub const SERVER_NAME: &str = "mcpscope";

/// The prompt a host gets when none is given.
pub const DEFAULT_PROMPT: &str =
    "Call the MCP tool once with the given arguments, then report its result in one line.";

/// The presets shipped with mcpscope (`hosts/` in the repository).
const SHIPPED: &[(&str, &str)] = &[
    (
        "claude-code.toml",
        include_str!("../presets/claude-code.toml"),
    ),
    ("codex.toml", include_str!("../presets/codex.toml")),
    (
        "gemini-cli.toml",
        include_str!("../presets/gemini-cli.toml"),
    ),
    ("qwen-code.toml", include_str!("../presets/qwen-code.toml")),
    ("opencode.toml", include_str!("../presets/opencode.toml")),
    ("cline.toml", include_str!("../presets/cline.toml")),
    ("kimi-cli.toml", include_str!("../presets/kimi-cli.toml")),
];

/// A file a preset writes into the cell's HOME.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HomeFile {
    /// Its path, relative to HOME (a template).
    pub path: String,
    /// Its text (a template).
    pub text: String,
}

/// A preset file, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetText {
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
    description: String,
    api: String,
    bin: String,
    #[serde(default)]
    install: Option<String>,
    #[serde(default)]
    needs: Vec<String>,
    tool_name: String,
    argv: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    files: Vec<HomeFile>,
    #[serde(default)]
    idle_timeout_env: Option<String>,
    #[serde(default)]
    idle_timeout_default_ms: Option<u64>,
}

/// Where a host's definition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Shipped with mcpscope.
    Shipped,
    /// A preset file (the user's, or `--host-file`).
    File(PathBuf),
    /// `--host custom` and its command.
    Command,
}

/// An agent host: how it is started for a cell, and what it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Its name in reports (`claude-code`).
    pub name: String,
    /// Other names `--host` accepts.
    pub aliases: Vec<String>,
    /// One line on what it is.
    pub description: String,
    /// The model API it speaks.
    pub api: Api,
    /// The program run when `--host-bin` is not given (found on PATH).
    pub bin: String,
    /// How to install it.
    pub install: Option<String>,
    /// What it needs besides itself (`Node.js 22 or later`).
    pub needs: Vec<String>,
    /// How it names an MCP tool to the model (a template: `mcp__{server}__{tool}`).
    pub tool_name: String,
    /// Its command line (templates; the first is usually `{bin}`).
    pub argv: Vec<String>,
    /// Its environment besides the cell's own (templates).
    pub env: BTreeMap<String, String>,
    /// The files it finds in its HOME.
    pub files: Vec<HomeFile>,
    /// The environment variable that sets its idle timeout for a tool call, in ms (Claude
    /// Code's `CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT`): the matrix sets it in the cases about slow
    /// calls.
    pub idle_timeout_env: Option<String>,
    /// The value of `{idle_timeout_ms}` in cells that set no idle timeout (the host's own
    /// default), for a host whose timeout is set in a file rather than a variable.
    pub idle_timeout_default_ms: Option<u64>,
    /// Where it was defined.
    pub source: Source,
}

/// Parses a model API's name.
pub fn parse_api(name: &str) -> Result<Api, String> {
    match name {
        "anthropic" => Ok(Api::Anthropic),
        "openai-responses" => Ok(Api::OpenAiResponses),
        "openai-chat" => Ok(Api::OpenAiChat),
        "gemini" => Ok(Api::Gemini),
        other => Err(format!(
            "unknown model API {other:?} (anthropic, openai-responses, openai-chat or gemini)"
        )),
    }
}

/// The directory of the user's presets: `$XDG_CONFIG_HOME/mcpscope/hosts` (an absolute
/// `XDG_CONFIG_HOME`), else `$HOME/.config/mcpscope/hosts`.
pub fn user_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".config"),
    };
    Some(base.join("mcpscope").join("hosts"))
}

impl Host {
    /// A preset from its TOML text (`origin` names it in errors).
    pub fn from_toml(text: &str, source: Source, origin: &str) -> Result<Host, String> {
        let preset: PresetText =
            toml::from_str(text).map_err(|e| format!("the host preset {origin}: {e}"))?;
        let api = parse_api(&preset.api).map_err(|e| format!("the host preset {origin}: {e}"))?;
        if preset.argv.is_empty() {
            return Err(format!("the host preset {origin}: `argv` is empty"));
        }
        for file in &preset.files {
            let path = Path::new(&file.path);
            if !path.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(format!(
                    "the host preset {origin}: the file {:?} must be a relative path inside HOME",
                    file.path
                ));
            }
        }
        let uses_idle = preset
            .argv
            .iter()
            .chain(preset.env.values())
            .chain(preset.files.iter().map(|f| &f.text))
            .any(|t| t.contains("{idle_timeout_ms}"));
        if uses_idle && preset.idle_timeout_default_ms.is_none() {
            return Err(format!(
                "the host preset {origin}: it names {{idle_timeout_ms}}, so it needs \
                 `idle_timeout_default_ms` (the host's own default)"
            ));
        }
        Ok(Host {
            name: preset.name,
            aliases: preset.aliases,
            description: preset.description,
            api,
            bin: preset.bin,
            install: preset.install,
            needs: preset.needs,
            tool_name: preset.tool_name,
            argv: preset.argv,
            env: preset.env,
            files: preset.files,
            idle_timeout_env: preset.idle_timeout_env,
            idle_timeout_default_ms: preset.idle_timeout_default_ms,
            source,
        })
    }

    /// The preset in the file at `path` (`--host-file`).
    pub fn from_file(path: &Path) -> Result<Host, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the host preset {}: {e}", path.display()))?;
        Host::from_toml(
            &text,
            Source::File(path.to_path_buf()),
            &path.display().to_string(),
        )
    }

    /// The shipped presets.
    pub fn shipped() -> Vec<Host> {
        SHIPPED
            .iter()
            .filter_map(|(file, text)| {
                Host::from_toml(text, Source::Shipped, file)
                    .map_err(|e| tracing::error!("{e}"))
                    .ok()
            })
            .collect()
    }

    /// Every preset `--host` can name: the user's (in [`user_dir`]; one named like a shipped
    /// one replaces it), then the shipped ones; and what was wrong with any that could not be
    /// read.
    pub fn all() -> (Vec<Host>, Vec<String>) {
        let mut hosts = Vec::new();
        let mut problems = Vec::new();
        if let Some(dir) = user_dir()
            && let Ok(entries) = std::fs::read_dir(&dir)
        {
            let mut paths: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            paths.sort();
            for path in paths {
                match Host::from_file(&path) {
                    Ok(host) => hosts.push(host),
                    Err(e) => problems.push(e),
                }
            }
        }
        for host in Host::shipped() {
            if !hosts.iter().any(|h: &Host| h.name == host.name) {
                hosts.push(host);
            }
        }
        (hosts, problems)
    }

    /// The preset `--host NAME` names (its name or an alias).
    pub fn find(name: &str) -> Result<Host, String> {
        let (hosts, problems) = Host::all();
        if let Some(host) = hosts
            .iter()
            .find(|h| h.name == name || h.aliases.iter().any(|a| a == name))
        {
            return Ok(host.clone());
        }
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        let mut message = format!(
            "unknown host {name:?} (presets: {}; or custom, or --host-file PATH)",
            names.join(", ")
        );
        for problem in problems {
            message.push_str(&format!("\n{problem}"));
        }
        Err(message)
    }

    /// A custom host speaking `api` (`anthropic`, `openai-responses`, `openai-chat`, `gemini`):
    /// its command (with `{url}` and `{model_url}`), and both URLs in its environment
    /// (`MCPSCOPE_MCP_URL`, `MCPSCOPE_MODEL_URL`).
    pub fn custom(api: &str, command: Vec<String>) -> Result<Host, String> {
        let api = parse_api(api)?;
        let Some(bin) = command.first().cloned() else {
            return Err("--host custom needs the host's command after `--`".into());
        };
        let mut argv = command;
        argv[0] = "{bin}".into();
        Ok(Host {
            name: "custom".into(),
            aliases: Vec::new(),
            description: "a command given after `--`".into(),
            api,
            bin,
            install: None,
            needs: Vec::new(),
            tool_name: "{tool}".into(),
            argv,
            env: BTreeMap::from([
                ("MCPSCOPE_MCP_URL".into(), "{url}".into()),
                ("MCPSCOPE_MODEL_URL".into(), "{model_url}".into()),
            ]),
            files: Vec::new(),
            idle_timeout_env: None,
            idle_timeout_default_ms: None,
            source: Source::Command,
        })
    }

    /// How it names `tool` of the MCP server to the model.
    pub fn tool_name_of(&self, tool: &str) -> String {
        self.tool_name
            .replace("{server}", SERVER_NAME)
            .replace("{tool}", tool)
    }

    /// Where its program is, when `--host-bin` does not say: the first `bin` on PATH.
    pub fn installed(&self) -> Option<PathBuf> {
        let bin = Path::new(&self.bin);
        if bin.components().count() > 1 {
            return bin.is_file().then(|| bin.to_path_buf());
        }
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(bin))
            .find(|p| p.is_file())
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
    /// The idle timeout the cell's case sets for the host, ms (`{idle_timeout_ms}`; the
    /// preset's `idle_timeout_default_ms` when `None`).
    pub idle_timeout_ms: Option<u64>,
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

fn write(path: PathBuf, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// A template with the cell's values in place of its placeholders, in one pass (a value that
/// holds a placeholder's name, a prompt saying `{url}`, stays as it is).
fn fill(template: &str, cell: &Cell<'_>, idle_default: Option<u64>) -> String {
    let home = cell.home.display().to_string();
    let idle = cell
        .idle_timeout_ms
        .or(idle_default)
        .map(|ms| ms.to_string());
    let value = |name: &str| match name {
        "idle_timeout_ms" => idle.as_deref(),
        "bin" => Some(cell.bin),
        "prompt" => Some(cell.prompt),
        "url" => Some(cell.mcp_url),
        "model_url" => Some(cell.model_url),
        "home" => Some(home.as_str()),
        "server" => Some(SERVER_NAME),
        "tool" => Some(cell.tool),
        "key" => Some(DUMMY_KEY),
        _ => None,
    };
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let name_end = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(after.len());
        match (
            value(&after[..name_end]),
            after[name_end..].starts_with('}'),
        ) {
            (Some(v), true) => {
                out.push_str(v);
                rest = &after[name_end + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The host's launch for one cell; writes its configuration files into `cell.home`.
pub fn launch(host: &Host, cell: &Cell<'_>) -> anyhow::Result<Launch> {
    std::fs::create_dir_all(cell.home.join("tmp"))?;
    let mut env = base_env(cell.home);
    for (name, value) in &host.env {
        env.retain(|(k, _)| k != name);
        env.push((
            name.clone(),
            fill(value, cell, host.idle_timeout_default_ms),
        ));
    }
    for file in &host.files {
        write(
            cell.home
                .join(fill(&file.path, cell, host.idle_timeout_default_ms)),
            &fill(&file.text, cell, host.idle_timeout_default_ms),
        )?;
    }
    let argv = host
        .argv
        .iter()
        .map(|a| fill(a, cell, host.idle_timeout_default_ms))
        .collect();
    Ok(Launch { argv, env })
}

/// The version a host prints for `--version` (its first token that starts with a digit), run
/// with `env` (the sandbox's, never the machine's own network).
pub fn version(bin: &str, env: &[(String, String)]) -> Option<String> {
    use std::io::Read;
    let mut child = std::process::Command::new(bin)
        .arg("--version")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // A host that hangs on --version must not hang the matrix: it gets VERSION_PATIENCE.
    let deadline = std::time::Instant::now() + VERSION_PATIENCE;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    text.split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.trim_end_matches([',', ')']).to_string())
}

/// How long a host's `--version` may take.
const VERSION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cell(home: &Path) -> Cell<'_> {
        Cell {
            bin: "/opt/claude",
            prompt: "go",
            mcp_url: "http://127.0.0.1:1/mcp",
            model_url: "http://127.0.0.1:2",
            tool: "slow",
            home,
            idle_timeout_ms: None,
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
        let host = Host::find("claude-code").expect("shipped");
        let launch = launch(&host, &cell(home.path())).expect("launch");
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
        // The program is the cell's (the command's own, unless --host-bin names another).
        assert_eq!(host.bin, "h");
        let mut custom_cell = cell(home.path());
        custom_cell.bin = &host.bin;
        let launch = launch(&host, &custom_cell).expect("launch");
        assert_eq!(
            launch.argv,
            ["h", "--mcp=http://127.0.0.1:1/mcp", "http://127.0.0.1:2/v1"]
        );
        assert!(Host::custom("cobol", vec!["h".into()]).is_err());
        assert!(Host::custom("gemini", vec![]).is_err());
        assert_eq!(
            env_of(&launch, "MCPSCOPE_MODEL_URL"),
            Some("http://127.0.0.1:2")
        );
    }

    #[test]
    fn every_shipped_preset_reads_and_names_a_program() {
        let shipped = Host::shipped();
        assert_eq!(
            shipped.len(),
            SHIPPED.len(),
            "a shipped preset did not read"
        );
        for host in &shipped {
            assert!(!host.bin.is_empty() && host.argv[0] == "{bin}", "{host:?}");
            assert_eq!(Host::find(&host.name).expect("found").name, host.name);
        }
        assert_eq!(Host::find("claude").expect("alias").name, "claude-code");
        let unknown = Host::find("nope").expect_err("unknown");
        assert!(
            unknown
                .contains("claude-code, codex, gemini-cli, qwen-code, opencode, cline, kimi-cli"),
            "{unknown}"
        );
        // Every file of the presets folder is shipped.
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("presets");
        let mut files: Vec<String> = std::fs::read_dir(&folder)
            .expect("presets folder")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".toml"))
            .collect();
        files.sort();
        let mut shipped: Vec<String> = SHIPPED.iter().map(|(f, _)| f.to_string()).collect();
        shipped.sort();
        assert_eq!(files, shipped);
    }

    #[test]
    fn an_idle_timeout_in_a_file_is_the_cases_or_the_hosts_own_default() {
        let text = r#"
name = "t"
description = "d"
api = "openai-chat"
bin = "t"
tool_name = "{tool}"
argv = ["{bin}"]
[[files]]
path = "c.toml"
text = "timeout = {idle_timeout_ms}"
"#;
        let refused = Host::from_toml(text, Source::Shipped, "t.toml").expect_err("no default");
        assert!(refused.contains("idle_timeout_default_ms"), "{refused}");
        let host = Host::from_toml(
            &text.replace("argv = [", "idle_timeout_default_ms = 60000\nargv = ["),
            Source::Shipped,
            "t.toml",
        )
        .expect("reads");
        for (set, want) in [(None, "timeout = 60000"), (Some(10_000), "timeout = 10000")] {
            let home = tempfile::tempdir().expect("tempdir");
            let cell = Cell {
                idle_timeout_ms: set,
                ..cell(home.path())
            };
            launch(&host, &cell).expect("launch");
            let written = std::fs::read_to_string(home.path().join("c.toml")).expect("file");
            assert_eq!(written, want);
        }
    }

    #[test]
    fn a_preset_file_is_checked_before_it_is_used() {
        let text = |extra: &str| {
            format!(
                "name = \"h\"\ndescription = \"d\"\napi = \"openai-chat\"\nbin = \"h\"\n\
                 tool_name = \"{{tool}}\"\nargv = [\"{{bin}}\"]\n{extra}"
            )
        };
        assert!(Host::from_toml(&text(""), Source::Command, "t").is_ok());
        let escape = text("[[files]]\npath = \"../outside\"\ntext = \"x\"\n");
        let e = Host::from_toml(&escape, Source::Command, "t").expect_err("refused");
        assert!(e.contains("relative path inside HOME"), "{e}");
        let e =
            Host::from_toml(&text("colour = 1\n"), Source::Command, "t").expect_err("unknown key");
        assert!(e.contains("colour"), "{e}");
        let e = Host::from_toml(
            &text("").replace("openai-chat", "cobol"),
            Source::Command,
            "t",
        )
        .expect_err("bad api");
        assert!(e.contains("unknown model API"), "{e}");
    }

    #[test]
    fn placeholders_are_filled_once_and_unknown_braces_stay() {
        let home = tempfile::tempdir().expect("tempdir");
        let mut c = cell(home.path());
        c.prompt = "say {url} and {tool}";
        assert_eq!(
            fill("{prompt} {nope} {\"a\": 1} {tool}", &c, None),
            "say {url} and {tool} {nope} {\"a\": 1} slow"
        );
    }

    #[test]
    fn codex_and_gemini_get_their_configuration_files() {
        let home = tempfile::tempdir().expect("tempdir");
        let codex = Host::find("codex").expect("shipped");
        launch(&codex, &cell(home.path())).expect("codex");
        let toml = std::fs::read_to_string(home.path().join(".codex/config.toml")).expect("toml");
        assert!(
            toml.contains("base_url = \"http://127.0.0.1:2/v1\""),
            "{toml}"
        );
        assert!(toml.contains("url = \"http://127.0.0.1:1/mcp\""), "{toml}");
        let gemini = Host::find("gemini-cli").expect("shipped");
        let launch = launch(&gemini, &cell(home.path())).expect("gemini");
        assert_eq!(launch.argv[1..3], ["-m", "gemini-2.5-flash"]);
        let settings =
            std::fs::read_to_string(home.path().join(".gemini/settings.json")).expect("json");
        assert!(
            settings.contains("\"httpUrl\": \"http://127.0.0.1:1/mcp\""),
            "{settings}"
        );
    }
}
