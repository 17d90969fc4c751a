"""Tool parameters that the SDK passes through untouched and advertises precisely.

The SDK validates typed parameters itself before a tool runs, answering in plain text
and refusing values the project would coerce (legacy categories, "3" for high,
double-encoded lists). So every parameter here accepts anything, and its JSON schema
(enum, bounds, description) is declared with `WithJsonSchema`; mcp_bridge.coercion
does the real reading and the tools answer in the project's JSON error shape.

Tools annotate a parameter `Annotated[Text, text(...)]` (text) or `Annotated[Any,
string_list(...)]` (anything else). Text parameters are `str` to the SDK on purpose: it
JSON-decodes string values of non-`str` parameters, which would turn a memory whose
content happens to be JSON into an object.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, PlainValidator, WithJsonSchema
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

if TYPE_CHECKING:
    # What a text parameter holds when the tool runs: what was sent, or None.
    Text: TypeAlias = str | None
else:
    # Exactly `str` for the SDK, which JSON-decodes string values of any other type.
    Text = str


def _as_sent(value: Any) -> Any:
    return value


_AS_SENT = PlainValidator(_as_sent)


@dataclass(frozen=True)
class Sent:
    """`Annotated` metadata of a parameter: the value reaches the tool as sent, and the
    tool list advertises `schema` for it."""

    schema: dict[str, Any]

    def __get_pydantic_core_schema__(
        self, source_type: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return _AS_SENT.__get_pydantic_core_schema__(source_type, handler)

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return WithJsonSchema(self.schema).__get_pydantic_json_schema__(core_schema, handler)


def text(description: str, *, max_length: int | None = None, fmt: str | None = None) -> Sent:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if max_length is not None:
        schema["maxLength"] = max_length
    if fmt is not None:
        schema["format"] = fmt
    return Sent(schema)


def choice(values: Sequence[str], description: str) -> Sent:
    return Sent({"type": "string", "enum": list(values), "description": description})


def string_list(
    description: str, *, max_items: int, max_length: int | None = None, fmt: str | None = None
) -> Sent:
    items: dict[str, Any] = {"type": "string"}
    if max_length is not None:
        items["maxLength"] = max_length
    if fmt is not None:
        items["format"] = fmt
    return Sent(
        {"type": "array", "items": items, "maxItems": max_items, "description": description}
    )


def boolean(description: str) -> Sent:
    return Sent({"type": "boolean", "description": description})


def integer(description: str, *, minimum: int, maximum: int, default: int | None = None) -> Sent:
    schema: dict[str, Any] = {
        "type": "integer",
        "minimum": minimum,
        "maximum": maximum,
        "description": description,
    }
    if default is not None:
        schema["default"] = default
    return Sent(schema)


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
