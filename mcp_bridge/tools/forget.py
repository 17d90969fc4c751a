"""taproot_forget: archive, unarchive, delete, or compress several memories into one."""

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge.messages import say, skipped_prefixes
from mcp_bridge.toolkit import (
    Reply,
    ToolDefinition,
    ToolParams,
    hints,
    read_category,
    reading,
    speaking,
    warned,
)
from memories import services
from memories.errors import InvalidInput, TooFewToCompress
from memories.limits import MAX_CONTENT, MAX_GIST, MAX_REASON, MAX_RECALL_IDS
from memories.models import User
from memories.quoting import shown
from memories.refs import Resolved
from memories.vocabulary import CATEGORY_VALUES

FORGET_ACTIONS = ("archive", "unarchive", "delete", "compress")


def _action(value: object) -> str:
    folded = value.strip().lower() if isinstance(value, str) else None
    if folded not in FORGET_ACTIONS:
        raise InvalidInput(
            f"action must be one of {', '.join(FORGET_ACTIONS)} (got {shown(value)})."
        )
    return folded


class ForgetParams(ToolParams):
    """The action is read here; the other arguments as sent, for the action to read."""

    required = ("action",)

    action: Annotated[
        str,
        arg.choice(
            FORGET_ACTIONS,
            "archive: hide from reflect and recall, keep the record. unarchive: bring it back. "
            "delete: remove for good. compress: replace several memories with one you write.",
        ),
        reading(_action),
    ]
    memory_id: Annotated[
        arg.Text,
        arg.text(
            "The memory to archive, unarchive or delete, by its id as shown in the catalog "
            "or whole (not for compress)."
        ),
    ] = None
    reason: Annotated[
        arg.Text, arg.text("Why; stored with an archived memory.", max_length=MAX_REASON)
    ] = None
    ids: Annotated[
        object,
        arg.string_list(
            "compress only: two or more ids of your live memories to combine (as shown in "
            "the catalog, or whole).",
            max_items=MAX_RECALL_IDS,
        ),
    ] = None
    content: Annotated[
        arg.Text,
        arg.text("compress only: the full text of the combined memory.", max_length=MAX_CONTENT),
    ] = None
    gist: Annotated[
        arg.Text, arg.text("compress only: its one-line gist.", max_length=MAX_GIST)
    ] = None
    category: Annotated[
        arg.Text,
        arg.choice(
            CATEGORY_VALUES,
            "compress only: the combined memory's category; needed when the originals differ.",
        ),
    ] = None


@speaking()
def forget(*, owner: User, now: datetime | None = None, **sent: object) -> Reply:
    """One entry point for the tool's four actions."""
    given = ForgetParams.read(sent)
    folded = given.action
    if folded == "compress":
        return compress(
            owner=owner,
            ids=given.ids,
            content=given.content,
            gist=given.gist,
            category=given.category,
            reason=given.reason,
            now=now,
        )
    memory_id = given.memory_id
    if memory_id is None:
        raise InvalidInput(f"action {folded!r} needs memory_id: the id of one of your memories.")
    if folded == "archive":
        return archive(owner=owner, memory_id=memory_id, reason=given.reason, now=now)
    if folded == "unarchive":
        return unarchive(owner=owner, memory_id=memory_id, now=now)
    pk = services.delete(owner=owner, memory_id=read.memory_ref(memory_id))
    return {"status": "ok", "action": "deleted", "memory_id": str(pk)}


@speaking()
def archive(
    *, owner: User, memory_id: object, reason: object = None, now: datetime | None = None
) -> Reply:
    clean_reason = read.optional_text(reason, field="reason", limit=MAX_REASON)
    done = services.archive(
        owner=owner, memory_id=read.memory_ref(memory_id), reason=clean_reason, now=now
    )
    if not done.changed:
        return {
            "status": "ok",
            "action": "archived",
            "memory_id": str(done.memory.pk),
            "changed": False,
            "message": "This memory was already archived; nothing changed.",
        }
    return {
        "status": "ok",
        "action": "archived",
        "memory_id": str(done.memory.pk),
        "changed": True,
        "reason": clean_reason,
    }


@speaking()
def unarchive(*, owner: User, memory_id: object, now: datetime | None = None) -> Reply:
    done = services.unarchive(owner=owner, memory_id=read.memory_ref(memory_id), now=now)
    reply: Reply = {
        "status": "ok",
        "action": "unarchived",
        "memory_id": str(done.memory.pk),
        "changed": done.changed,
    }
    if not done.changed:
        reply["message"] = "This memory is not archived; nothing changed."
    return reply


@speaking()
def compress(
    *,
    owner: User,
    ids: object = None,
    content: object = None,
    gist: object = None,
    category: object = None,
    reason: object = None,
    now: datetime | None = None,
) -> Reply:
    """taproot_forget(action="compress")."""
    if ids is None:
        raise InvalidInput("compress needs ids: two or more of your live memory ids.")
    id_list = read.coerce_id_list(ids, field="ids", max_items=MAX_RECALL_IDS)
    try:
        warnings: list[str] = []
        clean_content = read.require_text(content, field="content", limit=MAX_CONTENT)
        clean_gist = read.require_text(read.trimmed(gist), field="gist", limit=MAX_GIST)
        clean_category = None if category is None else read_category(category, warnings)
        clean_reason = read.optional_text(reason, field="reason", limit=MAX_REASON)
        done = services.compress(
            owner=owner,
            memory_ids=id_list.refs(),
            content=clean_content,
            gist=clean_gist,
            category=clean_category,
            reason=clean_reason,
            now=now,
        )
    except TooFewToCompress as too_few:
        need = say(too_few)
        if skipped := _skipped_ids(too_few.resolved, id_list.prefixes):
            need = f"{need} {skipped}"
        raise InvalidInput(need) from None
    if skipped := _skipped_ids(done.skipped, id_list.prefixes):
        warnings.insert(0, skipped)
    memory = done.memory
    reply = {
        "status": "ok",
        "action": "compressed",
        "memory_id": str(memory.pk),
        "archived": [str(m.pk) for m in done.originals],
        "category": memory.category,
        "salience": memory.salience,
        "core": memory.core,
        "compression_level": memory.compression_level,
    }
    return warned(reply, warnings)


def _skipped_ids(resolved: Resolved, sent: Mapping[str, object]) -> str:
    if resolved.ambiguous or resolved.unknown:
        return skipped_prefixes("ids", resolved, sent)
    return ""


TOOL = ToolDefinition(
    name="taproot_forget",
    position=5,
    title="Archive, delete or compress",
    description=(
        "Retire memories that are no longer true or useful. action=archive hides one "
        "from reflect and recall but keeps it, with your reason; unarchive brings it "
        "back; delete removes it for good (prefer archive unless the user asks for "
        "deletion); compress combines two or more related memories (ids) into one you "
        "write (content, gist, and category if theirs differ) and archives the "
        "originals. Returns {status, action, memory_id, ...}; for compress, memory_id "
        "is the new memory and archived lists the originals."
    ),
    annotations=hints(read_only=False, destructive=True),
    handler=forget,
    params=ForgetParams,
)
