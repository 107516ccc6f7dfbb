//! The OpenAPI 3.1 document, written from the mounted route table plus hand-kept schemas for
//! the request and error shapes. The verdict's own schema is the planner's `Verdict` type,
//! described here at the level clients depend on. Snapshot-tested: an API change shows up in
//! review.

use serde_json::{Value, json};

use crate::routes::RouteInfo;

pub fn document(routes: &[RouteInfo]) -> Value {
    let mut paths = serde_json::Map::new();
    for route in routes {
        let operation = operation(route);
        let entry = paths.entry(route.path.to_owned()).or_insert_with(|| json!({}));
        if let Some(map) = entry.as_object_mut() {
            map.insert(route.method.to_ascii_lowercase(), operation);
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "preflight",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "What a model checkpoint is, whether it is fully understood, and what it takes to serve it — from metadata alone."
        },
        "paths": paths,
        "components": { "schemas": schemas() },
    })
}

fn error_responses() -> Value {
    let error = json!({ "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } });
    let with = |description: &str| {
        let mut e = error.clone();
        e["description"] = json!(description);
        e
    };
    json!({
        "400": with("Bad input: malformed body, source spec, options or checkpoint"),
        "401": with("Gated upstream repo and no (valid) token"),
        "403": with("Gated repo without access, or a local path refused (public profile, or a file outside the local roots)"),
        "404": with("No such repo, revision or file"),
        "408": with("The request body did not arrive within the body timeout"),
        "413": with("Request body, checkpoint headers or Hub requests over the per-plan limit"),
        "429": with("Over capacity (Retry-After says when to come back)"),
        "502": with("The Hub failed"),
        "504": with("The Hub was too slow"),
    })
}

fn operation(route: &RouteInfo) -> Value {
    let ok = |schema: Value, media: &str| json!({ "200": { "description": "OK", "content": { media: { "schema": schema } } } });
    match (route.method, route.path) {
        ("POST", "/v1/plan") => {
            let mut responses = ok(json!({ "$ref": "#/components/schemas/Verdict" }), "application/json");
            if let (Some(r), Some(e)) = (responses.as_object_mut(), error_responses().as_object()) {
                r.extend(e.clone());
            }
            json!({
                "summary": route.summary,
                "operationId": "plan",
                "security": [{}, { "hubToken": [] }],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/PlanRequest" } } } },
                "responses": responses,
            })
        }
        ("GET", "/metrics") => {
            json!({ "summary": route.summary, "responses": ok(json!({ "type": "string" }), "text/plain") })
        }
        ("GET", "/") => json!({ "summary": route.summary, "responses": ok(json!({ "type": "string" }), "text/html") }),
        ("GET", "/v1/health") => {
            json!({ "summary": route.summary, "responses": ok(json!({ "$ref": "#/components/schemas/Health" }), "application/json") })
        }
        _ => json!({ "summary": route.summary, "responses": ok(json!({ "type": "object" }), "application/json") }),
    }
}

fn schemas() -> Value {
    json!({
        "PlanRequest": {
            "type": "object",
            "required": ["sources"],
            "additionalProperties": false,
            "properties": {
                "sources": { "type": "array", "minItems": 1, "maxItems": crate::pipeline::MAX_SOURCES, "items": { "type": "string", "examples": ["hf://Qwen/Qwen3-8B", "hf://org/name@<40-hex commit>", "hf://org/name/file.gguf"] } },
                "options": { "type": "object", "description": "Plan options (memory planning); see docs/memory.md" }
            }
        },
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": { "error": { "type": "object", "required": ["code", "message"], "properties": { "code": { "type": "string" }, "message": { "type": "string" }, "field": { "type": "string", "description": "The option at fault, for invalid_options" } } } }
        },
        "Health": {
            "type": "object",
            "properties": { "status": { "type": "string" }, "uptime_seconds": { "type": "integer" }, "requests_served": { "type": "integer" } }
        },
        "Artifact": {
            "type": "object",
            "description": "One planned artifact (docs/design.md §3); only its source block is spelled out here",
            "properties": {
                "name": { "type": "string" },
                "source": { "$ref": "#/components/schemas/Source" },
                "format": { "type": "string", "enum": ["safetensors", "gguf"] }
            }
        },
        "Source": {
            "type": "object",
            "description": "Where the artifact came from, as this request names it, and what it asks of whoever downloads it; null is unknown (a local folder has no card or gating)",
            "required": ["spec", "pinned", "license", "gated", "remote_code", "download_bytes"],
            "properties": {
                "spec": { "type": "string" },
                "repo": { "type": "string" },
                "revision": { "type": "string" },
                "commit": { "type": "string" },
                "pinned": { "type": "boolean" },
                "license": { "type": ["string", "null"], "description": "The model card's license (the Hub's cardData.license)" },
                "license_name": { "type": "string", "description": "The card's license_name, which licence `other` stands for" },
                "gated": { "description": "The Hub's gating", "oneOf": [{ "type": "boolean", "const": false }, { "type": "string", "enum": ["auto", "manual"] }, { "type": "null" }] },
                "remote_code": {
                    "type": "object",
                    "description": "config.json's auto_map: modules of the repo's own that loading with trust_remote_code imports",
                    "required": ["required"],
                    "properties": {
                        "required": { "type": "boolean" },
                        "modules": { "type": "array", "items": { "type": "object", "required": ["file", "present", "classes"], "properties": { "file": { "type": "string" }, "repo": { "type": "string" }, "present": { "type": "boolean" }, "classes": { "type": "array", "items": { "type": "string" } } } } }
                    }
                },
                "download_bytes": { "type": ["integer", "null"], "description": "The weight files the plan reads and the files an engine reads beside them" }
            }
        },
        "Verdict": {
            "type": "object",
            "required": ["schema", "planner", "admissible", "summary", "artifacts", "staging", "serving"],
            "properties": {
                "schema": { "type": "string" },
                "planner": { "type": "object", "properties": { "version": { "type": "string" }, "semantics_version": { "type": "integer" } } },
                "admissible": { "type": "boolean" },
                "summary": { "type": "object", "properties": { "blocking": { "type": "integer" }, "warnings": { "type": "integer" }, "info": { "type": "integer" } } },
                "artifacts": { "type": "array", "items": { "$ref": "#/components/schemas/Artifact" } },
                "staging": { "type": "array", "items": { "type": "object" } },
                "memory": { "type": "object" },
                "serving": { "type": "object", "properties": { "cached": { "type": "boolean" }, "cacheable": { "type": "boolean" }, "profile": { "type": "string" } } }
            }
        }
    })
}
