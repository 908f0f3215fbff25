//! `mcpscope wrap` and `unwrap`: a host's MCP configuration rewritten so that each stdio server
//! starts behind `mcpscope stdio --name NAME --`, and put back.
//!
//! Where each host keeps its servers ([`ConfigHost`]): Claude Code in `~/.claude.json`
//! (`mcpServers`, and each project's `projects.<dir>.mcpServers`) or a project's `.mcp.json`;
//! Claude Desktop in `claude_desktop_config.json` (`mcpServers`); Cursor in `~/.cursor/mcp.json`
//! or a project's `.cursor/mcp.json` (`mcpServers`); VS Code in the user's `mcp.json` or a
//! workspace's `.vscode/mcp.json` (`servers`, each with a `type`).
//!
//! The file is changed in place, value by value: only a wrapped server's `command` and `args`
//! change, every other byte (key order, whitespace, comments-free formatting, string escapes,
//! number spelling) stays as it was. Before the first change the file is copied next to itself
//! (`FILE.mcpscope-backup`, 0600, never through a link); the new text replaces the file in one
//! rename, with the file's own permissions. `unwrap` takes the wrappers out again: when nothing
//! else changed, the result is the backup, byte for byte, and the backup is removed; when the
//! host (or the user) changed the file since, only the wrappers are taken out, the other
//! changes stay, and the backup is kept.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::jsonspan::{self, Member, Node};

mod file;

pub use file::Written;
use file::{read_config, refuse_read_only, replace_file, write_new};

/// A host whose MCP configuration `wrap` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigHost {
    /// Claude Code: `~/.claude.json` or a project's `.mcp.json`.
    ClaudeCode,
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Cursor: `~/.cursor/mcp.json` or a project's `.cursor/mcp.json`.
    Cursor,
    /// VS Code: the user's `mcp.json` or a workspace's `.vscode/mcp.json`.
    VsCode,
}

impl ConfigHost {
    /// Parses `claude-code`, `claude-desktop`, `cursor` or `vscode`.
    pub fn parse(name: &str) -> Result<ConfigHost, String> {
        match name {
            "claude-code" | "claude" => Ok(ConfigHost::ClaudeCode),
            "claude-desktop" => Ok(ConfigHost::ClaudeDesktop),
            "cursor" => Ok(ConfigHost::Cursor),
            "vscode" | "code" => Ok(ConfigHost::VsCode),
            other => Err(format!(
                "unknown host {other:?} (claude-code, claude-desktop, cursor or vscode)"
            )),
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            ConfigHost::ClaudeCode => "claude-code",
            ConfigHost::ClaudeDesktop => "claude-desktop",
            ConfigHost::Cursor => "cursor",
            ConfigHost::VsCode => "vscode",
        }
    }

    /// The key of the object that names its servers.
    fn servers_key(self) -> &'static str {
        match self {
            ConfigHost::VsCode => "servers",
            _ => "mcpServers",
        }
    }

    /// The command that starts the host, for the `mcpscope run` line printed for HTTP servers.
    pub fn start_command(self) -> &'static str {
        match self {
            ConfigHost::ClaudeCode => "claude",
            ConfigHost::ClaudeDesktop if cfg!(target_os = "macos") => {
                "/Applications/Claude.app/Contents/MacOS/Claude"
            }
            ConfigHost::ClaudeDesktop if cfg!(windows) => "Claude.exe",
            ConfigHost::ClaudeDesktop => "claude-desktop",
            ConfigHost::Cursor => "cursor",
            ConfigHost::VsCode => "code",
        }
    }

    /// The host's own (user-wide) configuration file on this system, from `HOME` (and
    /// `CLAUDE_CONFIG_DIR`, `XDG_CONFIG_HOME`, `APPDATA` where the host reads them).
    pub fn default_config(self) -> Result<PathBuf, ConfigError> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let home = || {
            var("HOME")
                .or_else(|| var("USERPROFILE"))
                .map(PathBuf::from)
                .ok_or_else(|| {
                    ConfigError::Refused(
                        "HOME is not set: name the host's configuration file with --config".into(),
                    )
                })
        };
        // Where desktop applications keep their settings: Application Support, %APPDATA%, or
        // the XDG configuration directory.
        let app_config = || -> Result<PathBuf, ConfigError> {
            if cfg!(target_os = "macos") {
                return Ok(home()?.join("Library/Application Support"));
            }
            if cfg!(windows)
                && let Some(appdata) = var("APPDATA")
            {
                return Ok(PathBuf::from(appdata));
            }
            match var("XDG_CONFIG_HOME") {
                Some(dir) => Ok(PathBuf::from(dir)),
                None => Ok(home()?.join(".config")),
            }
        };
        Ok(match self {
            ConfigHost::ClaudeCode => match var("CLAUDE_CONFIG_DIR") {
                Some(dir) => PathBuf::from(dir).join(".claude.json"),
                None => home()?.join(".claude.json"),
            },
            ConfigHost::ClaudeDesktop => app_config()?.join("Claude/claude_desktop_config.json"),
            ConfigHost::Cursor => home()?.join(".cursor/mcp.json"),
            ConfigHost::VsCode => app_config()?.join("Code/User/mcp.json"),
        })
    }
}

/// Why `wrap` or `unwrap` did nothing.
#[derive(Debug)]
pub enum ConfigError {
    /// The file is not one it understands or may touch (not JSON, an unexpected shape, a
    /// symbolic link, changed in a way that cannot be undone): a usage error. The file is as it
    /// was.
    Refused(String),
    /// Reading or writing failed.
    Io(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Refused(why) | ConfigError::Io(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ConfigError {}

/// What became of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerChange {
    /// Now started behind the shim: its new command line.
    Wrapped(Vec<String>),
    /// Already started behind the shim; left as it is.
    AlreadyWrapped,
    /// An HTTP server, left as it is (the forward proxy observes it: `mcpscope run`).
    Http(String),
    /// Neither stdio nor HTTP (`type` says what); left as it is.
    Other(String),
    /// Its wrapper taken out: its own command line again.
    Unwrapped(Vec<String>),
    /// Not wrapped; left as it is.
    NotWrapped,
}

/// One server of the file and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLine {
    /// Where it is listed (`mcpServers`, `projects./dir.mcpServers`).
    pub table: String,
    /// Its name.
    pub name: String,
    /// What became of it.
    pub change: ServerChange,
}

/// What `wrap` did.
#[derive(Debug)]
pub struct Wrapped {
    /// Every server of the file.
    pub servers: Vec<ServerLine>,
    /// Whether the file was rewritten.
    pub changed: bool,
    /// The backup: written now, or kept from an earlier `wrap`.
    pub backup: Option<PathBuf>,
    /// How the file was rewritten, when it was.
    pub written: Option<Written>,
}

/// How `unwrap` put the file back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// The file is the backup again, byte for byte; the backup was removed.
    Exactly,
    /// The file changed since `wrap`: only the wrappers were taken out, the other changes kept,
    /// and the backup kept.
    WrappersRemoved,
}

/// What `unwrap` did.
#[derive(Debug)]
pub struct Unwrapped {
    /// Every server of the file.
    pub servers: Vec<ServerLine>,
    /// How the file was put back.
    pub restored: Restored,
    /// The backup.
    pub backup: PathBuf,
    /// How the file was rewritten, when it was.
    pub written: Option<Written>,
}

/// The backup of `path`: `FILE.mcpscope-backup` next to it.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".mcpscope-backup");
    path.with_file_name(name)
}

/// Wraps every stdio server of the host's file `path` that is not wrapped yet, starting it as
/// `SHIM stdio --name NAME -- COMMAND ARGS…`.
pub fn wrap(host: ConfigHost, path: &Path, shim: &Path) -> Result<Wrapped, ConfigError> {
    let original = read_config(path)?;
    let config = Config::parse(host, path, &original)?;
    let shim = shim
        .to_str()
        .ok_or_else(|| ConfigError::Refused(format!("{} is not UTF-8", shim.display())))?;
    let mut servers = Vec::new();
    let mut edits = Vec::new();
    for (table, name, entry) in config.servers()? {
        let change = match classify(&config, &name, entry)? {
            Kind::Stdio(stdio) if stdio.wrapped.is_some() => ServerChange::AlreadyWrapped,
            Kind::Stdio(stdio) => {
                let line = wrap_edits(&config, &name, &stdio, shim, &mut edits)?;
                ServerChange::Wrapped(line)
            }
            Kind::Http(url) => ServerChange::Http(url),
            Kind::Other(why) => ServerChange::Other(why),
        };
        servers.push(ServerLine {
            table: table.label(),
            name,
            change,
        });
    }
    let backup = backup_path(path);
    let backup_exists = std::fs::symlink_metadata(&backup).is_ok();
    if edits.is_empty() {
        return Ok(Wrapped {
            servers,
            changed: false,
            backup: backup_exists.then_some(backup),
            written: None,
        });
    }
    let already = servers
        .iter()
        .any(|s| s.change == ServerChange::AlreadyWrapped);
    if backup_exists && !already {
        return Err(ConfigError::Refused(format!(
            "{} exists from an earlier wrap, but {} holds no wrapped server: move the backup \
             away (it is the file as it was before that wrap), then wrap again; nothing was changed",
            backup.display(),
            path.display()
        )));
    }
    let text = config.apply(edits)?;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        refuse_read_only(path, &meta.permissions())?;
    }
    if !backup_exists {
        write_new(&backup, &original)?;
    }
    let written = replace_file(path, &original, text.as_bytes())?;
    Ok(Wrapped {
        servers,
        changed: true,
        backup: Some(backup),
        written: Some(written),
    })
}

/// Takes out the wrappers `wrap` put in the host's file `path`, from its backup.
pub fn unwrap(host: ConfigHost, path: &Path) -> Result<Unwrapped, ConfigError> {
    let backup = backup_path(path);
    let current = read_config(path)?;
    let before = match read_config(&backup) {
        Ok(bytes) => bytes,
        Err(ConfigError::Io(_)) if std::fs::symlink_metadata(&backup).is_err() => {
            return Err(ConfigError::Refused(format!(
                "there is no backup {}: {} was not wrapped by `mcpscope wrap` (or was unwrapped \
                 already); nothing was changed",
                backup.display(),
                path.display()
            )));
        }
        Err(e) => return Err(e),
    };
    let config = Config::parse(host, path, &current).map_err(|e| {
        ConfigError::Refused(format!(
            "{e}; it changed since wrap and cannot be unwrapped; {} holds it as it was before wrap",
            backup.display()
        ))
    })?;
    let earlier = Config::parse(host, &backup, &before)?;
    let mut servers = Vec::new();
    let mut edits = Vec::new();
    for (table, name, entry) in config.servers()? {
        let Kind::Stdio(stdio) = classify(&config, &name, entry)? else {
            servers.push(ServerLine {
                table: table.label(),
                name,
                change: ServerChange::NotWrapped,
            });
            continue;
        };
        let was = earlier.find(&table, &name);
        let wrapped_before = match was {
            Some(entry) => {
                matches!(classify(&earlier, &name, entry)?, Kind::Stdio(s) if s.wrapped.is_some())
            }
            None => false,
        };
        let change = match &stdio.wrapped {
            Some(wrapper) if !wrapped_before => {
                let line = unwrap_edits(&config, &stdio, wrapper, was.map(|e| (&earlier, e)))
                    .map(|(line, mut these)| {
                        edits.append(&mut these);
                        line
                    })
                    .map_err(|why| {
                        ConfigError::Refused(format!(
                            "{}: server {name:?} changed since wrap and cannot be unwrapped \
                             ({why}); nothing was changed; {} holds the file as it was before wrap",
                            path.display(),
                            backup.display()
                        ))
                    })?;
                ServerChange::Unwrapped(line)
            }
            Some(_) => ServerChange::AlreadyWrapped,
            None => ServerChange::NotWrapped,
        };
        servers.push(ServerLine {
            table: table.label(),
            name,
            change,
        });
    }
    let text = config.apply(edits)?;
    let restored = if text.as_bytes() == before.as_slice() {
        Restored::Exactly
    } else {
        Restored::WrappersRemoved
    };
    let mut written = None;
    if text.as_bytes() != current.as_slice() {
        let bytes = match restored {
            Restored::Exactly => before.as_slice(),
            Restored::WrappersRemoved => text.as_bytes(),
        };
        written = Some(replace_file(path, &current, bytes)?);
    }
    if restored == Restored::Exactly {
        std::fs::remove_file(&backup)
            .map_err(|e| ConfigError::Io(format!("{}: {e}", backup.display())))?;
    }
    Ok(Unwrapped {
        servers,
        restored,
        backup,
        written,
    })
}

/// Where a table of servers lies: the keys from the root to it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TablePath(Vec<String>);

impl TablePath {
    fn label(&self) -> String {
        self.0.join(".")
    }
}

/// A host's file, read and scanned.
struct Config<'a> {
    host: ConfigHost,
    path: &'a Path,
    /// A UTF-8 byte order mark before the JSON, kept as it was.
    bom: &'a str,
    /// The JSON text.
    text: &'a str,
    root: Node,
}

/// A change to the text: these bytes become this text.
type Edit = (std::ops::Range<usize>, String);

impl<'a> Config<'a> {
    fn parse(host: ConfigHost, path: &'a Path, bytes: &'a [u8]) -> Result<Config<'a>, ConfigError> {
        let shown = path.display();
        let whole = std::str::from_utf8(bytes)
            .map_err(|_| ConfigError::Refused(format!("{shown} is not UTF-8 text")))?;
        let (bom, text) = match whole.strip_prefix('\u{feff}') {
            Some(rest) => (&whole[..whole.len() - rest.len()], rest),
            None => ("", whole),
        };
        if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
            return Err(ConfigError::Refused(format!(
                "{shown} is not JSON ({e}){}; nothing was changed",
                if host == ConfigHost::VsCode {
                    " — VS Code allows comments and trailing commas in mcp.json, which mcpscope \
                     does not rewrite"
                } else {
                    ""
                }
            )));
        }
        let root = jsonspan::scan(text)
            .ok_or_else(|| ConfigError::Refused(format!("{shown}: unexpected JSON text")))?;
        if !matches!(root, Node::Object { .. }) {
            return Err(ConfigError::Refused(format!(
                "{shown} is not a JSON object, so not a {} configuration; nothing was changed",
                host.name()
            )));
        }
        Ok(Config {
            host,
            path,
            bom,
            text,
            root,
        })
    }

    fn shape_error(&self, what: String) -> ConfigError {
        ConfigError::Refused(format!(
            "{}: {what}, not what a {} configuration holds; nothing was changed",
            self.path.display(),
            self.host.name()
        ))
    }

    /// The tables of servers: the host's key at the root, and for Claude Code each project's.
    fn tables(&self) -> Result<Vec<(TablePath, &Node)>, ConfigError> {
        let key = self.host.servers_key();
        let root = &self.root;
        let mut found: Vec<(Vec<String>, &Node)> = Vec::new();
        if let Some(member) = root.member(key) {
            found.push((vec![key.to_string()], &member.value));
        }
        if self.host == ConfigHost::ClaudeCode
            && let Some(projects) = root.member("projects")
            && let Node::Object { members, .. } = &projects.value
        {
            for project in members {
                if let Some(member) = project.value.member(key) {
                    found.push((
                        vec!["projects".into(), project.key.clone(), key.into()],
                        &member.value,
                    ));
                }
            }
        }
        if found.is_empty()
            && self.host == ConfigHost::VsCode
            && root.member("mcpServers").is_some()
        {
            return Err(self.shape_error(
                "it lists `mcpServers` but no `servers` (VS Code's key): another host's file?"
                    .into(),
            ));
        }
        if found.is_empty() && self.host != ConfigHost::VsCode && root.member("servers").is_some() {
            return Err(self.shape_error(
                "it lists `servers` but no `mcpServers`: VS Code's file (--host vscode)?".into(),
            ));
        }
        let mut tables = Vec::new();
        for (path, node) in found {
            if !matches!(node, Node::Object { .. }) {
                return Err(
                    self.shape_error(format!("`{}` is not an object of servers", path.join(".")))
                );
            }
            tables.push((TablePath(path), node));
        }
        Ok(tables)
    }

    /// Every server: its table, name and entry.
    fn servers(&self) -> Result<Vec<(TablePath, String, &Member)>, ConfigError> {
        let mut all = Vec::new();
        for (table, node) in self.tables()? {
            if let Node::Object { members, .. } = node {
                for member in members {
                    all.push((table.clone(), member.key.clone(), member));
                }
            }
        }
        Ok(all)
    }

    /// The server `name` in the table at `table`, if the file has it.
    fn find(&self, table: &TablePath, name: &str) -> Option<&Member> {
        let mut node = &self.root;
        for key in &table.0 {
            node = &node.member(key)?.value;
        }
        node.member(name)
    }

    fn raw(&self, node: &Node) -> &str {
        self.text.get(node.span()).unwrap_or_default()
    }

    fn string(&self, node: &Node) -> Option<String> {
        match node {
            Node::Scalar { .. } => serde_json::from_str::<String>(self.raw(node)).ok(),
            _ => None,
        }
    }

    /// The text with `edits` made (they never overlap), checked to be JSON still.
    fn apply(&self, mut edits: Vec<Edit>) -> Result<String, ConfigError> {
        edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
        let mut text = self.text.to_string();
        let mut limit = text.len();
        for (range, with) in edits {
            if range.end > limit || range.start > range.end {
                return Err(ConfigError::Io("overlapping changes (a bug)".into()));
            }
            limit = range.start;
            text.replace_range(range, &with);
        }
        if serde_json::from_str::<serde_json::Value>(&text).is_err() {
            return Err(ConfigError::Io(format!(
                "{}: the rewritten text would not be JSON (a bug); nothing was changed",
                self.path.display()
            )));
        }
        Ok(format!("{}{text}", self.bom))
    }
}

/// A stdio server's entry.
struct Stdio<'a> {
    command: &'a Member,
    args: Option<(&'a Member, &'a [Node])>,
    /// Set when it already starts behind the shim.
    wrapped: Option<Wrapper>,
}

/// Where a wrapped server's own command line is in its `args`.
struct Wrapper {
    /// The index of `--`.
    separator: usize,
}

enum Kind<'a> {
    Stdio(Stdio<'a>),
    Http(String),
    Other(String),
}

/// What a server entry is: stdio (a `command`, `type` absent or `stdio`), HTTP (a `url`, or
/// `type` `http`/`sse`/`streamable-http`), or something else; an entry that is none of these is
/// refused.
fn classify<'a>(
    config: &Config<'_>,
    name: &str,
    entry: &'a Member,
) -> Result<Kind<'a>, ConfigError> {
    let value = &entry.value;
    if !matches!(value, Node::Object { .. }) {
        return Err(config.shape_error(format!("server {name:?} is not an object")));
    }
    let kind = value.member("type").map(|m| config.string(&m.value));
    let kind = match kind {
        Some(None) => {
            return Err(config.shape_error(format!("server {name:?} has a non-string `type`")));
        }
        Some(Some(kind)) => Some(kind),
        None => None,
    };
    let url = value.member("url").and_then(|m| config.string(&m.value));
    match kind.as_deref() {
        Some("http" | "sse" | "streamable-http" | "streamableHttp" | "streamable_http") => {
            return Ok(Kind::Http(url.unwrap_or_default()));
        }
        None if url.is_some() => return Ok(Kind::Http(url.unwrap_or_default())),
        Some("stdio") | None => {}
        Some(other) => return Ok(Kind::Other(format!("type {other:?}"))),
    }
    let Some(command) = value.member("command") else {
        return Err(config.shape_error(format!("server {name:?} has neither `command` nor `url`")));
    };
    let Some(program) = config.string(&command.value) else {
        return Err(config.shape_error(format!("server {name:?} has a non-string `command`")));
    };
    let args = match value.member("args") {
        None => None,
        Some(member) => match &member.value {
            Node::Array { items, .. } if items.iter().all(|i| config.string(i).is_some()) => {
                Some((member, items.as_slice()))
            }
            _ => {
                return Err(
                    config.shape_error(format!("server {name:?} has `args` that are not strings"))
                );
            }
        },
    };
    let is_shim = Path::new(&program)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "mcpscope" || n == "mcpscope.exe");
    let wrapped = match args {
        Some((_, items))
            if is_shim
                && items.first().and_then(|i| config.string(i)).as_deref() == Some("stdio") =>
        {
            Some(Wrapper {
                separator: separator(config, items),
            })
        }
        _ => None,
    };
    Ok(Kind::Stdio(Stdio {
        command,
        args,
        wrapped,
    }))
}

/// Where `-- COMMAND` starts in a wrapped server's `args` (`stdio --name=NAME -- …`, or the
/// older `stdio --name NAME -- …`, whose NAME may itself be `--`); past the end when absent.
fn separator(config: &Config<'_>, items: &[Node]) -> usize {
    let words: Vec<Option<String>> = items.iter().map(|i| config.string(i)).collect();
    let mut at = 1;
    while at < words.len() {
        match words[at].as_deref() {
            Some("--") => return at,
            Some("--name") => at += 2,
            _ => at += 1,
        }
    }
    words.len()
}

/// The changes that start the server behind the shim, and its new command line.
fn wrap_edits(
    config: &Config<'_>,
    name: &str,
    stdio: &Stdio<'_>,
    shim: &str,
    edits: &mut Vec<Edit>,
) -> Result<Vec<String>, ConfigError> {
    let text = config.text;
    // `--name=NAME` as one argument: a name that looks like an option (`-x`, `--`,
    // `--record=…`) stays the name.
    let name_arg = format!("--name={name}");
    let name_token =
        serde_json::to_string(&name_arg).map_err(|e| ConfigError::Io(e.to_string()))?;
    let shim_token = serde_json::to_string(shim).map_err(|e| ConfigError::Io(e.to_string()))?;
    // The server's own command token moves into `args` as it was written.
    let command_token = config.raw(&stdio.command.value).to_string();
    let prefix = [
        "\"stdio\"".to_string(),
        name_token,
        "\"--\"".to_string(),
        command_token,
    ];
    let inline = format!("[{}]", prefix.join(", "));
    edits.push((stdio.command.value.span(), shim_token));
    match stdio.args {
        Some((_, items)) if !items.is_empty() => {
            let first = items[0].span().start;
            let open = match &stdio.args {
                Some((member, _)) => member.value.span().start + 1,
                None => first,
            };
            let space = &text[open..first];
            let space = if space.is_empty() { " " } else { space };
            let inserted: String = prefix.iter().map(|p| format!("{p},{space}")).collect();
            edits.push((first..first, inserted));
        }
        Some((member, _)) => edits.push((member.value.span(), inline)),
        None => {
            // A new `args` member after `command`, spaced as `command` is.
            let key = &stdio.command.key_span;
            let before = text[..key.start]
                .trim_end_matches([' ', '\t', '\n', '\r'])
                .len();
            let indent = &text[before..key.start];
            let colon = &text[key.end..stdio.command.value.span().start];
            let end = stdio.command.value.span().end;
            edits.push((end..end, format!(",{indent}\"args\"{colon}{inline}")));
        }
    }
    let mut line = vec![shim.to_string(), "stdio".into(), name_arg, "--".into()];
    line.extend(config.string(&stdio.command.value));
    if let Some((_, items)) = stdio.args {
        line.extend(items.iter().filter_map(|i| config.string(i)));
    }
    Ok(line)
}

/// The changes that take the wrapper out of a server (with its entry in the backup, if it had
/// one), and its own command line; or why it cannot be done.
fn unwrap_edits(
    config: &Config<'_>,
    stdio: &Stdio<'_>,
    wrapper: &Wrapper,
    before: Option<(&Config<'_>, &Member)>,
) -> Result<(Vec<String>, Vec<Edit>), String> {
    let Some((args, items)) = stdio.args else {
        return Err("it has no `args`".into());
    };
    let at = wrapper.separator;
    let Some(program) = items.get(at + 1) else {
        return Err("its `args` no longer hold `-- COMMAND`".into());
    };
    let mut edits = vec![(stdio.command.value.span(), config.raw(program).to_string())];
    let rest = &items[at + 2..];
    if let Some(first_kept) = rest.first() {
        edits.push((
            items[0].span().start..first_kept.span().start,
            String::new(),
        ));
    } else {
        let args_before = before.and_then(|(earlier, entry)| {
            entry
                .value
                .member("args")
                .map(|m| earlier.raw(&m.value).to_string())
        });
        let had_entry = before.is_some();
        // `args` next to `command` (either order, the user's) goes with the comma between.
        let command = stdio.command;
        let (between, removed) = if command.value.span().end <= args.key_span.start {
            (
                command.value.span().end..args.key_span.start,
                command.value.span().end..args.value.span().end,
            )
        } else {
            (
                args.value.span().end..command.key_span.start,
                args.key_span.start..command.key_span.start,
            )
        };
        let adjacent = config
            .text
            .get(between)
            .is_some_and(|text| text.trim_matches([' ', '\t', '\n', '\r']) == ",");
        match args_before {
            Some(raw) => edits.push((args.value.span(), raw)),
            None if had_entry && adjacent => edits.push((removed, String::new())),
            None => edits.push((args.value.span(), "[]".into())),
        }
    }
    let mut line: Vec<String> = vec![config.string(program).unwrap_or_default()];
    line.extend(rest.iter().filter_map(|i| config.string(i)));
    Ok((line, edits))
}
