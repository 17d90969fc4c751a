"""What every tool module (mcp_bridge.tools) is built from: its parameter model, its
definition, and the helpers its handler shares with the others.

A tool is a `ToolParams` model (each field's `Annotated` metadata from
mcp_bridge.arguments says what tools/list advertises for it), a handler that takes the
token's owner and the arguments by name and returns the reply, and a `ToolDefinition`
naming both. The definition makes the SDK's tool from the model: the tool function's
signature is the model's fields, so the input schema is generated from the one model.
Every call goes through `run_tool` (mcp_bridge.replies), the one dispatch point.
"""

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import (
    Annotated,
    Any,
    ClassVar,
    ParamSpec,
    Self,
    TypeAlias,
    TypeVar,
    get_args,
    get_type_hints,
)

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge.auth import token_loads
from mcp_bridge.messages import say
from mcp_bridge.replies import Service, run_tool
from memories import services, shortids
from memories.conf import reflect_nudge_hours
from memories.errors import DomainError, InvalidInput
from memories.models import Category, Salience, User
from memories.services import ReflectDue
from memories.vocabulary import CATEGORY_VALUES, SALIENCE_VALUES

P = ParamSpec("P")
R = TypeVar("R")

Reply = dict[str, Any]

REFLECT_HINTS = {
    ReflectDue.NEVER_LOADED: (
        "Call taproot_reflect before going on: your memory of this user has not been loaded yet."
    ),
    ReflectDue.CLOSED_SINCE: (
        "Call taproot_reflect before going on: a conversation has closed since your memory "
        "was last loaded, so this one has not loaded it."
    ),
    ReflectDue.STALE: (
        "Call taproot_reflect before going on: your memory was last loaded more than {hours} "
        "hours ago, probably in another conversation."
    ),
}

# --- parameter types several tools share -------------------------------------------------

CATEGORY = arg.choice(
    CATEGORY_VALUES,
    "identity: who you are and how you work. relationship: who the user is and how you "
    "work together. active_thread: ongoing projects and open questions. episodic: "
    "events, what happened when. error: mistakes and their corrections.",
)
SALIENCE = arg.choice(
    SALIENCE_VALUES,
    "How much this matters. High-salience memories stay in the catalog however old.",
)
CategoryArg: TypeAlias = Annotated[arg.Text, CATEGORY]
MemoryIdArg: TypeAlias = Annotated[
    arg.Text,
    arg.text(
        "A memory id as shown in the catalog (its first 8 or more characters) or the whole "
        "id a tool returned."
    ),
]


class ToolParams(BaseModel):
    """A tool's parameters, in the order they are read (the first refusal is the one
    told), which is the order tools/list shows them unless `listed` says otherwise.

    Each field is `Annotated` with what tools/list advertises for it (mcp_bridge.arguments)
    and, when the tool reads it from what was sent, a `reading(...)` validator that does
    so leniently (legacy names, numbers as text, JSON-encoded lists) with today's
    warnings and refusals. A field without one holds the value as sent. A left-out
    argument is read as None; unknown ones are dropped here (run_tool names them).
    """

    model_config = ConfigDict(frozen=True)

    # The arguments a tool needs: optional to the SDK so that a missing one gets the
    # tool's own error reply, and marked required in the advertised schema.
    required: ClassVar[tuple[str, ...]] = ()
    # The order tools/list shows the fields in, when it is not the order they are read in.
    listed: ClassVar[tuple[str, ...]] = ()

    _warnings: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _left_out_is_none(cls, data: object) -> object:
        if isinstance(data, Mapping):
            return {name: data.get(name) for name in cls.model_fields}
        return data

    @classmethod
    def read(cls, sent: Mapping[str, object], **context: object) -> Self:
        """The arguments as read; `context` is what the readers may consult."""
        warnings: list[str] = []
        params = cls.model_validate(dict(sent), context={**context, WARNINGS: warnings})
        params._warnings = warnings
        return params

    @property
    def warnings(self) -> list[str]:
        """What reading the arguments warned of, in the order of the fields."""
        return list(self._warnings)

    @classmethod
    def signature(cls) -> inspect.Signature:
        """The tool function's signature as the SDK reads it: the context, then each field
        as sent, with the schema it advertises and None as its default.

        Text is `str` to the SDK on purpose: it JSON-decodes string values of any other
        type (see mcp_bridge.arguments)."""
        fields = []
        hints = get_type_hints(cls, include_extras=True)
        names = cls.listed or tuple(cls.model_fields)
        assert sorted(names) == sorted(cls.model_fields), f"{cls.__name__}.listed: {names}"
        for name in names:
            hint = hints[name]
            (sent,) = [meta for meta in get_args(hint)[1:] if isinstance(meta, arg.Sent)]
            base = arg.Text if sent.schema["type"] == "string" else object
            annotation = Annotated[base, sent]  # type: ignore[valid-type]
            fields.append(
                inspect.Parameter(
                    name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=None
                )
            )
        ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
        return inspect.Signature([ctx, *fields], return_annotation=CallToolResult)


WARNINGS = "warnings"


def reading(read: Callable[[object], object]) -> BeforeValidator:
    """`Annotated` metadata: the field is `read(value as sent)`, None when left out."""

    def validate(value: object) -> object:
        return read(value)

    return BeforeValidator(validate)


def reading_warned(read: Callable[[object, list[str]], object]) -> BeforeValidator:
    """Like `reading` for an optional argument (None when left out) whose reading may add
    warnings to the reply."""

    def validate(value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        context = info.context
        assert isinstance(context, dict)
        return read(value, context[WARNINGS])

    return BeforeValidator(validate)


def context_of(info: ValidationInfo, key: str) -> object:
    context = info.context
    assert isinstance(context, dict)
    return context.get(key)


def given[T](read: Callable[[object], T]) -> Callable[[object], T | None]:
    """A reading of an optional argument: None when left out."""

    def read_given(value: object) -> T | None:
        return None if value is None else read(value)

    return read_given


class NoParams(ToolParams):
    pass


def hints(
    *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


@dataclass(frozen=True)
class ToolDefinition:
    """One tool: what tools/list shows and what a call runs. `position` is its place in
    tools/list, which clients see and tests pin."""

    name: str
    position: int
    title: str
    description: str
    annotations: ToolAnnotations
    handler: Service
    params: type[ToolParams] = NoParams
    ahead: Callable[..., Awaitable[Mapping[str, Any]]] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    async def call(self, ctx: Context, **sent: object) -> CallToolResult:
        ahead = None
        if self.ahead is not None:
            ahead = functools.partial(self.ahead, **sent)
        return await run_tool(ctx, self.name, self.handler, ahead=ahead, **sent)

    def to_tool(self) -> Tool:
        async def fn(ctx: Context, **sent: object) -> CallToolResult:
            return await self.call(ctx, **sent)

        fn.__name__ = self.name
        fn.__signature__ = self.params.signature()  # type: ignore[attr-defined]
        tool = Tool.from_function(
            fn,
            name=self.name,
            title=self.title,
            description=self.description,
            annotations=self.annotations,
            meta=self.meta or None,
            structured_output=False,
        )
        schema = arg.tidy_input_schema(tool.parameters, self.params.required)
        return tool.model_copy(update={"parameters": schema})


# --- what handlers share ------------------------------------------------------------------


def speaking(field: str = "memory_id") -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A handler whose services' refusals reach Claude worded by mcp_bridge.messages;
    `field` names the argument an ambiguous id prefix came in."""

    def decorate(handler: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(handler)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return handler(*args, **kwargs)
            except DomainError as error:
                raise InvalidInput(say(error, field=field)) from None

        return wrapper

    return decorate


def resolve_memory_id(owner: User, value: object, *, field: str = "memory_id") -> uuid.UUID:
    """The whole id a single-id argument names: as sent, or the one memory of the owner's
    whose id starts with the prefix sent. A prefix naming none or several is refused."""
    try:
        return shortids.resolve_memory_id(owner, read.memory_ref(value, field=field))
    except DomainError as error:
        raise InvalidInput(say(error, field=field)) from None


def reflect_hint(*, owner: User, now: datetime | None = None) -> str | None:
    """The nudge a remember or recall reply carries while a reflect is due: from the last
    reflect and close read with the request's token, so no query of its own on /mcp."""
    due = services.reflect_due(owner=owner, now=now, known=token_loads(owner))
    if due is None:
        return None
    return REFLECT_HINTS[due].format(hours=reflect_nudge_hours())


def with_reflect_hint(reply: Reply, owner: User, *, now: datetime | None) -> Reply:
    if hint := reflect_hint(owner=owner, now=now):
        reply["reflect_hint"] = hint
    return reply


def warned(reply: Reply, warnings: list[str]) -> Reply:
    if warnings:
        reply["warnings"] = warnings
    return reply


def read_category(value: object, warnings: list[str]) -> Category:
    clean, warning = read.coerce_category(value)
    if warning:
        warnings.append(warning)
    return Category(clean)


def read_salience(value: object, warnings: list[str]) -> Salience:
    clean, warning = read.coerce_salience(value)
    if warning:
        warnings.append(warning)
    return Salience(clean)
