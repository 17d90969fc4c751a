"""taproot_remember: store a memory, or update one by its id."""

import functools
from datetime import datetime
from typing import Annotated, Any, NamedTuple, Self

from pydantic import BeforeValidator, ValidationInfo, model_validator

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge import embedding
from mcp_bridge.messages import skipped_prefixes
from mcp_bridge.toolkit import (
    CATEGORY,
    SALIENCE,
    WARNINGS,
    Reply,
    ToolDefinition,
    ToolParams,
    context_of,
    given,
    hints,
    read_category,
    read_salience,
    reading,
    reading_warned,
    resolve_memory_id,
    speaking,
    warned,
    with_reflect_hint,
)
from memories import services
from memories.errors import DomainError, InvalidInput
from memories.limits import MAX_CONTENT, MAX_GIST, MAX_ITEM_LENGTH, MAX_LINKS, MAX_LIST_ITEMS
from memories.models import Category, ChangeSource, EpistemicStatus, Memory, Salience, User
from memories.recall import Vectors
from memories.refs import IdPrefix, MemoryRef
from memories.services import MemoryDraft, Remembered
from memories.vocabulary import CATEGORY_VALUES, EPISTEMIC_VALUES

GIST_WHY = (
    "A new memory needs a gist now: one line of about 15 words that stands for it in the "
    "catalog loaded at the start of every conversation. It is cheapest to write while the "
    "memory is fresh."
)
CREATING = "creating"


def _words(description: str) -> arg.Sent:
    return arg.string_list(description, max_items=MAX_LIST_ITEMS, max_length=MAX_ITEM_LENGTH)


class Links(NamedTuple):
    refs: list[MemoryRef]  # the links that are ids or prefixes, each once
    malformed: list[str]  # those that are neither


def _creating(info: ValidationInfo) -> bool:
    return bool(context_of(info, CREATING))


def _category(value: object, info: ValidationInfo) -> Category | None:
    if value is not None:
        warnings = context_of(info, WARNINGS)
        assert isinstance(warnings, list)
        return read_category(value, warnings)
    if _creating(info):
        raise InvalidInput(
            f"category is required when creating a memory: one of {', '.join(CATEGORY_VALUES)}."
        )
    return None


def _content(value: object, info: ValidationInfo) -> str | None:
    if value is not None:
        why = "" if _creating(info) else "Leave content out to keep the memory's content as it is."
        return read.require_text(value, field="content", limit=MAX_CONTENT, why=why)
    if _creating(info):
        raise InvalidInput(
            "content is required when creating a memory: the memory in full, as non-blank text."
        )
    return None


def _gist(value: object, info: ValidationInfo) -> str | None:
    if value is not None:
        return read.require_text(read.trimmed(value), field="gist", limit=MAX_GIST, why=GIST_WHY)
    if _creating(info):
        raise InvalidInput(f"gist is required when creating a memory. {GIST_WHY}")
    return None


def _reference(value: object, info: ValidationInfo) -> str | None:
    if value is None:
        return None
    assert info.field_name is not None
    # Blank clears it: "" in the draft.
    return read.optional_text(value, field=info.field_name) or ""


def _word_list(value: object, info: ValidationInfo) -> list[str] | None:
    if value is None:
        return None
    assert info.field_name is not None
    return read.coerce_string_list(value, field=info.field_name)


def _links(value: object) -> Links:
    links = read.coerce_id_strings(value, field="linked_memories", max_items=MAX_LINKS)
    refs: list[MemoryRef] = []
    malformed: list[str] = []
    for link in links:
        parsed = read.parse_memory_ref(link)
        if parsed is None:
            malformed.append(link)
        elif isinstance(parsed, str):
            if all(not (isinstance(r, IdPrefix) and r.hex == parsed) for r in refs):
                refs.append(IdPrefix(parsed, link))
        elif parsed not in refs:
            refs.append(parsed)
    return Links(refs, malformed)


def _blank_as_none(value: object) -> object:
    if isinstance(value, str) and not value.strip():
        return None  # models send "" for an argument they mean to leave out
    return value


Reference = BeforeValidator(_reference)
WordList = BeforeValidator(_word_list)


class RememberParams(ToolParams):
    """Read for creating a memory, or for updating one when the context says `creating`
    is false (update_id, resolved first, named one)."""

    listed = (
        "category",
        "content",
        "gist",
        "salience",
        "core",
        "epistemic_status",
        "provenance",
        "tags",
        "linked_memories",
        "conversation_id",
        "transcript_ref",
        "conversation_url",
        "search_keywords",
        "update_id",
    )

    category: Annotated[Category | None, CATEGORY, BeforeValidator(_category)]
    content: Annotated[
        str | None,
        arg.text(
            "The memory in full, written so that a later conversation understands it "
            "without this one. Required when creating.",
            max_length=MAX_CONTENT,
        ),
        BeforeValidator(_content),
    ]
    gist: Annotated[
        str | None,
        arg.text(
            "One line of about 15 words that stands for the memory in the catalog. Required "
            "when creating: write it now, while the context is fresh.",
            max_length=MAX_GIST,
        ),
        BeforeValidator(_gist),
    ]
    salience: Annotated[Salience | None, SALIENCE, reading_warned(read_salience)]
    core: Annotated[
        bool | None,
        arg.boolean(
            "Load this memory in full at the start of every conversation. Keep that tier small."
        ),
        reading(given(functools.partial(read.coerce_bool, field="core"))),
    ]
    epistemic_status: Annotated[
        EpistemicStatus | None,
        arg.choice(
            EPISTEMIC_VALUES,
            "How sure this is: observed (seen directly), inferred, replicated (confirmed "
            "again), contested, unvalidated (the default).",
        ),
        reading(given(lambda value: EpistemicStatus(read.coerce_epistemic_status(value)))),
    ]
    provenance: Annotated[
        str | None, arg.text("Where this came from, if that matters later."), Reference
    ]
    conversation_id: Annotated[
        str | None, arg.text("An identifier of this conversation, if you have one."), Reference
    ]
    transcript_ref: Annotated[
        str | None, arg.text("A reference to a transcript, if there is one."), Reference
    ]
    conversation_url: Annotated[
        str | None, arg.text("The URL of this conversation, if known."), Reference
    ]
    tags: Annotated[
        list[str] | None,
        _words("Short labels for filtering with taproot_recall(tags=...)."),
        WordList,
    ]
    search_keywords: Annotated[
        list[str] | None,
        _words("Extra words a later search should find this memory by (synonyms, names)."),
        WordList,
    ]
    linked_memories: Annotated[
        Links | None,
        arg.string_list(
            "Ids of your related memories (as shown in the catalog, or whole).",
            max_items=MAX_LINKS,
        ),
        reading(given(_links)),
    ]
    update_id: Annotated[
        str | None,
        arg.text(
            "Give the id of an existing memory (as shown in the catalog, or whole) to update "
            "it instead of creating a new one; only the fields you send change, and none "
            "other is required."
        ),
        reading(_blank_as_none),
    ]

    @model_validator(mode="after")
    def _something_to_update(self, info: ValidationInfo) -> Self:
        if not _creating(info) and not self.draft():
            raise InvalidInput(
                "Nothing to update: send update_id together with the fields to change "
                "(only those change)."
            )
        return self

    def draft(self) -> dict[str, Any]:
        """The memory's fields as given (those left out are not)."""
        given = {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name != "update_id" and getattr(self, name) is not None
        }
        if self.linked_memories is not None:
            given["linked_memories"] = self.linked_memories.refs
        return given


@speaking("update_id")
def remember(
    *,
    owner: User,
    source: ChangeSource = ChangeSource.TOOL,
    now: datetime | None = None,
    vectors: Vectors | None = None,
    **sent: object,
) -> Reply:
    """`sent`: the tool's arguments as sent; `vectors`: the new memory's, embedded ahead
    (mcp_bridge.embedding)."""
    update_id = _blank_as_none(sent.get("update_id"))
    # Refused here, before the other arguments, when it names no memory or several.
    update = None if update_id is None else resolve_memory_id(owner, update_id, field="update_id")
    params = RememberParams.read(sent, **{CREATING: update is None})
    given = params.draft()
    done = services.remember(
        owner=owner,
        draft=MemoryDraft(**given),
        update=update,
        source=source,
        now=now,
        vectors=vectors,
    )
    links = params.linked_memories or Links([], [])
    warnings = [*params.warnings, *_remember_warnings(done, links)]
    memory = done.memory
    reply = {
        "status": "ok",
        "action": "created" if done.created else "updated",
        "memory_id": str(memory.pk),
        "category": memory.category,
        "core": memory.core,
    }
    if done.already_stored:
        reply["already_stored"] = True
    return with_reflect_hint(warned(reply, warnings), owner, now=now)


def remembered_ahead(**sent: object) -> list[Memory]:
    """The memory a taproot_remember call would create, unsaved, for embedding ahead of
    it (read exactly as `remember` reads it); none for an update or a refused call."""
    if _blank_as_none(sent.get("update_id")) is not None:
        return []
    try:
        given = RememberParams.read(sent, **{CREATING: True}).draft()
        return [Memory(**MemoryDraft(**given).given())]
    except (InvalidInput, DomainError):
        return []


async def remember_ahead(**sent: object) -> dict[str, Any]:
    return {"vectors": await embedding.memory_vectors(remembered_ahead(**sent))}


def _remember_warnings(done: Remembered, links: Links) -> list[str]:
    warnings: list[str] = []
    if done.skipped_links.ambiguous or done.skipped_links.unknown:
        written = {ref.hex: ref.written for ref in links.refs if isinstance(ref, IdPrefix)}
        warnings.append(skipped_prefixes("linked_memories", done.skipped_links, written))
    dropped = [*links.malformed, *map(str, done.dropped_links)]
    if dropped:
        warnings.append(
            "linked_memories: dropped ids that are not your memories: " + ", ".join(dropped)
        )
    if done.duplicate is not None:
        warnings.append(
            f"A live memory with the same {done.duplicate.same} already exists: "
            f"{done.duplicate.memory_id}. If this is the same thing, update that one with "
            "update_id instead."
        )
    return warnings


TOOL = ToolDefinition(
    name="taproot_remember",
    position=2,
    title="Remember",
    description=(
        "Store a memory as soon as something worth keeping comes up: a fact about the "
        "user, a preference, a decision, a correction, progress on a project. Do not "
        "save it all up for the end. Write the gist now, one line of about 15 words: it "
        "is what later conversations see in the catalog. To change a memory instead of "
        "adding a near-copy, pass its id as update_id with just the fields to change; "
        "only the fields you send change, so category and content are required only "
        "when creating. Returns {status, action: created|updated, memory_id, category, "
        "core, already_stored?, warnings?, reflect_hint?}; already_stored means this call "
        "repeated one you just made and nothing new was written; a warning names an "
        "existing memory with the same gist or content, and reflect_hint asks you to "
        "call taproot_reflect when your memory has not been loaded in this conversation."
    ),
    annotations=hints(read_only=False),
    handler=remember,
    params=RememberParams,
    ahead=remember_ahead,
)
