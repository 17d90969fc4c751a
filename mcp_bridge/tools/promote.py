"""taproot_promote: move a memory into or out of the core tier, or set its salience."""

from datetime import datetime
from typing import Annotated

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge.toolkit import (
    MemoryIdArg,
    Reply,
    SalienceArg,
    ToolDefinition,
    ToolParams,
    hints,
    read_salience,
    speaking,
    warned,
)
from memories import services
from memories.errors import InvalidInput
from memories.models import Memory, Salience, User


class PromoteParams(ToolParams):
    required = ("memory_id",)

    memory_id: MemoryIdArg = None
    core: Annotated[
        object,
        arg.boolean(
            "true: load in full at the start of every conversation; false: back to the catalog."
        ),
    ] = None
    salience: SalienceArg = None


def _curation(given: PromoteParams, warnings: list[str]) -> tuple[bool | None, Salience | None]:
    if given.core is None and given.salience is None:
        raise InvalidInput("Give core (true or false) and/or salience (high, medium or low).")
    clean_core = None if given.core is None else read.coerce_bool(given.core, field="core")
    clean_salience = None if given.salience is None else read_salience(given.salience, warnings)
    return clean_core, clean_salience


@speaking()
def promote(*, owner: User, now: datetime | None = None, **sent: object) -> Reply:
    given = PromoteParams.read(sent)
    warnings: list[str] = []
    clean_core, clean_salience = _curation(given, warnings)
    memory = services.promote(
        owner=owner,
        memory_id=read.memory_ref(given.memory_id),
        core=clean_core,
        salience=clean_salience,
        now=now,
    )
    return warned(curated(memory), warnings)


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
