"""taproot_promote: move a memory into or out of the core tier, or set its salience."""

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated

from pydantic import model_validator

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge.toolkit import (
    SALIENCE,
    MemoryIdArg,
    Reply,
    ToolDefinition,
    ToolParams,
    given,
    hints,
    read_salience,
    reading,
    reading_warned,
    speaking,
    warned,
)
from memories import services
from memories.errors import InvalidInput
from memories.models import Memory, Salience, User


class PromoteParams(ToolParams):
    required = ("memory_id",)

    # Read by the service's call (read.memory_ref), after the other two.
    memory_id: MemoryIdArg
    core: Annotated[
        bool | None,
        arg.boolean(
            "true: load in full at the start of every conversation; false: back to the catalog."
        ),
        reading(given(functools.partial(read.coerce_bool, field="core"))),
    ]
    salience: Annotated[Salience | None, SALIENCE, reading_warned(read_salience)]

    @model_validator(mode="before")
    @classmethod
    def _something_to_change(cls, data: object) -> object:
        if isinstance(data, Mapping) and data.get("core") is None and data.get("salience") is None:
            raise InvalidInput("Give core (true or false) and/or salience (high, medium or low).")
        return data


@speaking()
def promote(*, owner: User, now: datetime | None = None, **sent: object) -> Reply:
    given = PromoteParams.read(sent)
    memory = services.promote(
        owner=owner,
        memory_id=read.memory_ref(given.memory_id),
        core=given.core,
        salience=given.salience,
        now=now,
    )
    return warned(curated(memory), given.warnings)


def curated(memory: Memory) -> Reply:
    return {
        "status": "ok",
        "memory_id": str(memory.pk),
        "core": memory.core,
        "salience": memory.salience,
    }


TOOL = ToolDefinition(
    name="taproot_promote",
    position=4,
    title="Promote or demote",
    description=(
        "Curate the tier loaded in full at every start: core=true moves a memory into "
        "it, core=false moves it back to the catalog; salience (high, medium, low) sets "
        "how much it matters. Keep the core tier small: who you are, who the user is, "
        "standing corrections, live threads. Counts as an update of the memory. "
        "Returns {status, memory_id, core, salience}."
    ),
    annotations=hints(read_only=False, idempotent=True),
    handler=promote,
    params=PromoteParams,
)
