//! Agent hosts for `mcpscope matrix --host`: the scripted model endpoint they talk to
//! ([`stub`]), how each host is started ([`preset`]), and the loopback-only network namespace
//! every host runs in ([`sandbox`]); and `wrap`/`unwrap` of a host's MCP configuration ([`wrap`]).

mod jsonspan;
pub mod preset;
pub mod sandbox;
pub mod stub;
pub mod wrap;
