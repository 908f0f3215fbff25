//! The tools, prompts and resources the official conformance suite
//! (`@modelcontextprotocol/conformance`, `conformance server`) calls: the `test_*` tools,
//! the `test://` resources and the `test_*` prompts, with the contents its checks expect.

use serde_json::{Value, json};

/// A 1×1 red PNG.
pub(crate) const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
pub(crate) const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The resource `poke` announces as updated (its text is the counter).
pub(crate) const COUNTER_URI: &str = "mcpscope://counter";

fn tool(name: &str, description: &str, schema: Value) -> Value {
    json!({"name": name, "description": description, "inputSchema": schema})
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, description: &str) -> Value {
    json!({"type": "object", "properties": {name: {"type": "string", "description": description}}, "required": [name]})
}

/// The conformance tools, for `tools/list`.
pub(crate) fn tools() -> Vec<Value> {
    vec![
        tool("test_simple_text", "Returns one text block.", no_args()),
        tool(
            "test_image_content",
            "Returns one PNG image block.",
            no_args(),
        ),
        tool(
            "test_audio_content",
            "Returns one WAV audio block.",
            no_args(),
        ),
        tool(
            "test_embedded_resource",
            "Returns one embedded text resource.",
            no_args(),
        ),
        tool(
            "test_multiple_content_types",
            "Returns text, an image and an embedded resource.",
            no_args(),
        ),
        tool(
            "test_tool_with_logging",
            "Sends three log messages on the request's stream, then returns.",
            no_args(),
        ),
        tool(
            "test_tool_with_progress",
            "Sends progress 0, 50 and 100 of 100 for the request's progress token, then returns.",
            no_args(),
        ),
        tool(
            "test_error_handling",
            "Always fails (a tool result with isError).",
            no_args(),
        ),
        tool(
            "test_reconnection",
            "Closes its SSE stream after the priming event and answers on the resumed stream (2025-11-25 polling).",
            no_args(),
        ),
        tool(
            "test_sampling",
            "Asks the client for an LLM completion of `prompt` (sampling/createMessage).",
            string_arg("prompt", "The prompt to send to the LLM"),
        ),
        tool(
            "test_elicitation",
            "Asks the user for a `response` string (elicitation/create).",
            string_arg("message", "The message to show the user"),
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Asks for a form whose fields all have defaults (SEP-1034).",
            no_args(),
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Asks for a form with the five enum shapes (SEP-1330).",
            no_args(),
        ),
        json!({
            "name": "json_schema_2020_12_tool",
            "description": "Takes arguments described with JSON Schema 2020-12 features ($schema, $defs, $ref).",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
                "additionalProperties": false
            }
        }),
    ]
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn content(blocks: Vec<Value>) -> Value {
    json!({"content": blocks})
}

/// The result of a conformance tool that needs nothing from the client or the stream, if `name`
/// is one.
pub(crate) fn plain_tool(name: &str, args: &Value) -> Option<Value> {
    let image = json!({"type": "image", "data": PNG, "mimeType": "image/png"});
    Some(match name {
        "test_simple_text" => content(vec![text("This is a simple text response for testing.")]),
        "test_image_content" => content(vec![image]),
        "test_audio_content" => content(vec![
            json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"}),
        ]),
        "test_embedded_resource" => content(vec![json!({"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."}})]),
        "test_multiple_content_types" => content(vec![
            text("Multiple content types test:"),
            image,
            json!({"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}),
        ]),
        "test_error_handling" => {
            json!({"content": [text("This tool intentionally returns an error for testing")], "isError": true})
        }
        "json_schema_2020_12_tool" => content(vec![text(&format!(
            "JSON Schema 2020-12 tool called with: {args}"
        ))]),
        _ => return None,
    })
}

/// What a conformance tool asks the client for: `(key, method, params)`, if it asks.
pub(crate) fn client_request(
    name: &str,
    args: &Value,
) -> Option<(&'static str, &'static str, Value)> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Some(match name {
        "test_sampling" => (
            "sampling",
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": arg("prompt")}}], "maxTokens": 100}),
        ),
        "test_elicitation" => (
            "elicitation",
            "elicitation/create",
            json!({"message": arg("message"), "requestedSchema": {"type": "object",
                "properties": {"response": {"type": "string", "description": "User's response"}},
                "required": ["response"]}}),
        ),
        "test_elicitation_sep1034_defaults" => (
            "defaults",
            "elicitation/create",
            json!({"message": "Please review and update the form fields with defaults",
                "requestedSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}
                }, "required": []}}),
        ),
        "test_elicitation_sep1330_enums" => (
            "enums",
            "elicitation/create",
            json!({"message": "Please select options from the enum fields",
                "requestedSchema": {"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                        {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3,
                        "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3,
                        "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
                }, "required": []}}),
        ),
        _ => return None,
    })
}

/// The tool result made of the client's answer to [`client_request`].
pub(crate) fn answered(name: &str, answer: &Value) -> Value {
    let line = match name {
        "test_sampling" => {
            let said = answer
                .pointer("/content/text")
                .or_else(|| answer.pointer("/content/0/text"))
                .and_then(Value::as_str)
                .unwrap_or("No response");
            format!("LLM response: {said}")
        }
        _ => {
            let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
            let fields = answer.get("content").cloned().unwrap_or_else(|| json!({}));
            let lead = if name == "test_elicitation" {
                "User response"
            } else {
                "Elicitation completed"
            };
            format!("{lead}: action={action}, content={fields}")
        }
    };
    content(vec![text(&line)])
}

/// The capability a client must declare for `method`.
pub(crate) fn capability_for(method: &str) -> &'static str {
    match method {
        "sampling/createMessage" => "sampling",
        "roots/list" => "roots",
        _ => "elicitation",
    }
}

// ---------------------------------------------------------------- resources

/// `resources/list`.
pub(crate) fn resources() -> Value {
    json!([
        {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
         "description": "A static text resource for testing", "mimeType": "text/plain"},
        {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
         "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
        {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
         "description": "A resource clients may subscribe to", "mimeType": "text/plain"},
        {"uri": COUNTER_URI, "name": "counter", "title": "Counter",
         "description": "The peek/poke counter; updated by every poke", "mimeType": "text/plain"}
    ])
}

/// `resources/templates/list`.
pub(crate) fn resource_templates() -> Value {
    json!([{"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
        "description": "A resource template with parameter substitution", "mimeType": "application/json"}])
}

/// The contents of `uri` (`counter` is the current counter), or `None` for an unknown URI.
pub(crate) fn read_resource(uri: &str, counter: i64) -> Option<Value> {
    let one = |mime: &str, body: Value| {
        let mut c = json!({"uri": uri, "mimeType": mime});
        if let (Some(obj), Some(extra)) = (c.as_object_mut(), body.as_object()) {
            obj.extend(extra.clone());
        }
        json!({"contents": [c]})
    };
    match uri {
        "test://static-text" => Some(one(
            "text/plain",
            json!({"text": "This is the content of the static text resource."}),
        )),
        "test://static-binary" => Some(one("image/png", json!({"blob": PNG}))),
        "test://watched-resource" => Some(one(
            "text/plain",
            json!({"text": "Watched resource content"}),
        )),
        COUNTER_URI => Some(one("text/plain", json!({"text": counter.to_string()}))),
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")?;
            let body =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            Some(one("application/json", json!({"text": body.to_string()})))
        }
    }
}

// ---------------------------------------------------------------- prompts

/// `prompts/list`.
pub(crate) fn prompts() -> Value {
    json!([
        {"name": "test_simple_prompt", "title": "Simple Test Prompt", "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments", "description": "A prompt with required arguments",
         "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                       {"name": "arg2", "description": "Second test argument", "required": true}]},
        {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
         "description": "A prompt that includes an embedded resource",
         "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]},
        {"name": "test_prompt_with_image", "title": "Prompt With Image", "description": "A prompt that includes image content"}
    ])
}

/// `prompts/get` of `name` with `args`, or `None` for an unknown prompt.
pub(crate) fn get_prompt(name: &str, args: &Value) -> Option<Value> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let user = |c: Value| json!({"role": "user", "content": c});
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => vec![user(text(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(
                json!({"type": "resource", "resource": {"uri": arg("resourceUri"), "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}}),
            ),
            user(text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(text("Please analyze the image above.")),
        ],
        _ => return None,
    };
    Some(json!({"messages": messages}))
}
