"""Tool parameters that the SDK passes through untouched and advertises precisely.

The SDK validates typed parameters itself before a tool runs, answering in plain text
and refusing values the project would coerce (legacy categories, "3" for high,
double-encoded lists). So every parameter here accepts anything, and its JSON schema
(enum, bounds, description) is declared with `WithJsonSchema`; memories.validation
does the real checking and the tools answer in the project's JSON error shape.

Text parameters are annotated `str` on purpose: the SDK JSON-decodes string values of
non-`str` parameters, which would turn a memory whose content happens to be JSON into
an object.
"""

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema


def _as_sent(value: Any) -> Any:
    return value


_AS_SENT = PlainValidator(_as_sent)


def text(description: str, *, max_length: int | None = None, fmt: str | None = None) -> Any:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if max_length is not None:
        schema["maxLength"] = max_length
    if fmt is not None:
        schema["format"] = fmt
    return Annotated[str, _AS_SENT, WithJsonSchema(schema)]


def choice(values: Sequence[str], description: str) -> Any:
    schema = {"type": "string", "enum": list(values), "description": description}
    return Annotated[str, _AS_SENT, WithJsonSchema(schema)]


def string_list(
    description: str, *, max_items: int, max_length: int | None = None, fmt: str | None = None
) -> Any:
    items: dict[str, Any] = {"type": "string"}
    if max_length is not None:
        items["maxLength"] = max_length
    if fmt is not None:
        items["format"] = fmt
    schema = {"type": "array", "items": items, "maxItems": max_items, "description": description}
    return Annotated[Any, _AS_SENT, WithJsonSchema(schema)]


def boolean(description: str) -> Any:
    return Annotated[Any, _AS_SENT, WithJsonSchema({"type": "boolean", "description": description})]


def integer(description: str, *, minimum: int, maximum: int, default: int | None = None) -> Any:
    schema: dict[str, Any] = {
        "type": "integer",
        "minimum": minimum,
        "maximum": maximum,
        "description": description,
    }
    if default is not None:
        schema["default"] = default
    return Annotated[Any, _AS_SENT, WithJsonSchema(schema)]


def tidy_input_schema(schema: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    """Drop what pydantic adds to every optional field ("default": null, a title) and
    mark the arguments a tool needs: they are optional to the SDK only so that a
    missing one gets the project's own error reply."""
    properties = {}
    for name, field_schema in schema.get("properties", {}).items():
        cleaned = {k: v for k, v in field_schema.items() if k != "title"}
        if cleaned.get("default", 0) is None:
            del cleaned["default"]
        properties[name] = cleaned
    tidy: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        tidy["required"] = list(required)
    return tidy
