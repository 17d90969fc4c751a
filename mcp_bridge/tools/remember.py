"""taproot_remember: store a memory, or update one by its id."""

from datetime import datetime
from typing import Annotated, Any

from mcp_bridge import arguments as arg
from mcp_bridge import coercion as read
from mcp_bridge import embedding
from mcp_bridge.messages import skipped_prefixes
from mcp_bridge.toolkit import (
    SALIENCE,
    CategoryArg,
    Reply,
    ToolDefinition,
    ToolParams,
    hints,
    read_category,
    read_salience,
    resolve_memory_id,
    speaking,
    warned,
    with_reflect_hint,
)
from memories import services
from memories.errors import DomainError, InvalidInput
from memories.indexing import Vectors
from memories.limits import MAX_CONTENT, MAX_GIST, MAX_ITEM_LENGTH, MAX_LINKS, MAX_LIST_ITEMS
from memories.models import ChangeSource, EpistemicStatus, Memory, User
from memories.refs import IdPrefix, MemoryRef
from memories.services import MemoryDraft, Remembered
from memories.vocabulary import CATEGORY_VALUES, EPISTEMIC_VALUES

GIST_WHY = (
    "A new memory needs a gist now: one line of about 15 words that stands for it in the "
    "catalog loaded at the start of every conversation. It is cheapest to write while the "
    "memory is fresh."
)
# Free-text references: blank clears one.
REFERENCES = ("provenance", "conversation_id", "transcript_ref", "conversation_url")


def _words(description: str) -> arg.Sent:
    return arg.string_list(description, max_items=MAX_LIST_ITEMS, max_length=MAX_ITEM_LENGTH)


class RememberParams(ToolParams):
    category: CategoryArg = None
    content: Annotated[
        arg.Text,
        arg.text(
            "The memory in full, written so that a later conversation understands it "
            "without this one. Required when creating.",
            max_length=MAX_CONTENT,
        ),
    ] = None
    gist: Annotated[
        arg.Text,
        arg.text(
            "One line of about 15 words that stands for the memory in the catalog. Required "
            "when creating: write it now, while the context is fresh.",
            max_length=MAX_GIST,
        ),
    ] = None
    salience: Annotated[arg.Text, SALIENCE] = None
    core: Annotated[
        object,
        arg.boolean(
            "Load this memory in full at the start of every conversation. Keep that tier small."
        ),
    ] = None
    epistemic_status: Annotated[
        arg.Text,
        arg.choice(
            EPISTEMIC_VALUES,
            "How sure this is: observed (seen directly), inferred, replicated (confirmed "
            "again), contested, unvalidated (the default).",
        ),
    ] = None
    provenance: Annotated[arg.Text, arg.text("Where this came from, if that matters later.")] = None
    tags: Annotated[object, _words("Short labels for filtering with taproot_recall(tags=...).")] = (
        None
    )
    linked_memories: Annotated[
        object,
        arg.string_list(
            "Ids of your related memories (as shown in the catalog, or whole).",
            max_items=MAX_LINKS,
        ),
    ] = None
    conversation_id: Annotated[
        arg.Text, arg.text("An identifier of this conversation, if you have one.")
    ] = None
    transcript_ref: Annotated[
        arg.Text, arg.text("A reference to a transcript, if there is one.")
    ] = None
    conversation_url: Annotated[arg.Text, arg.text("The URL of this conversation, if known.")] = (
        None
    )
    search_keywords: Annotated[
        object,
        _words("Extra words a later search should find this memory by (synonyms, names)."),
    ] = None
    update_id: Annotated[
        arg.Text,
        arg.text(
            "Give the id of an existing memory (as shown in the catalog, or whole) to update "
            "it instead of creating a new one; only the fields you send change, and none "
            "other is required."
        ),
    ] = None

    def update_ref(self) -> object:
        """update_id as sent, or None when left out or blank (models send "" for an
        argument they mean to leave out)."""
        if isinstance(self.update_id, str) and not self.update_id.strip():
            return None
        return self.update_id


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
    params = RememberParams.read(sent)
    update_id = params.update_ref()
    # Refused here, before the other arguments, when it names no memory or several.
    update = None if update_id is None else resolve_memory_id(owner, update_id, field="update_id")
    given, warnings, malformed = _read_draft(params, creating=update is None)
    done = services.remember(
        owner=owner,
        draft=MemoryDraft(**given),
        update=update,
        source=source,
        now=now,
        vectors=vectors,
    )
    warnings.extend(_remember_warnings(done, malformed, given.get("linked_memories", [])))
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
    try:
        params = RememberParams.read(sent)
        if params.update_ref() is not None:
            return []
        given, _, _ = _read_draft(params, creating=True)
        return [Memory(**MemoryDraft(**given).given())]
    except (InvalidInput, DomainError):
        return []


async def remember_ahead(**sent: object) -> dict[str, Any]:
    return {"vectors": await embedding.memory_vectors(remembered_ahead(**sent))}


def _read_draft(
    params: RememberParams, *, creating: bool
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The draft's fields as given, the warnings reading them gave, and the links that are
    neither ids nor prefixes."""
    warnings: list[str] = []
    given = _texts(params, creating, warnings)
    given |= _settings(params, warnings)
    for name in REFERENCES:
        value = getattr(params, name)
        if value is not None:
            # Blank clears it: "" in the draft.
            given[name] = read.optional_text(value, field=name) or ""
    if params.tags is not None:
        given["tags"] = read.coerce_string_list(params.tags, field="tags")
    if params.search_keywords is not None:
        given["search_keywords"] = read.coerce_string_list(
            params.search_keywords, field="search_keywords"
        )
    malformed: list[str] = []
    if params.linked_memories is not None:
        links = read.coerce_id_strings(
            params.linked_memories, field="linked_memories", max_items=MAX_LINKS
        )
        given["linked_memories"], malformed = _link_refs(links)
    if not creating and not given:
        raise InvalidInput(
            "Nothing to update: send update_id together with the fields to change "
            "(only those change)."
        )
    return given, warnings, malformed


def _texts(params: RememberParams, creating: bool, warnings: list[str]) -> dict[str, Any]:
    """Category, content and gist as given; each is required when creating."""
    given: dict[str, Any] = {}
    if params.category is not None:
        given["category"] = read_category(params.category, warnings)
    elif creating:
        raise InvalidInput(
            f"category is required when creating a memory: one of {', '.join(CATEGORY_VALUES)}."
        )
    if params.content is not None:
        why = "" if creating else "Leave content out to keep the memory's content as it is."
        given["content"] = read.require_text(
            params.content, field="content", limit=MAX_CONTENT, why=why
        )
    elif creating:
        raise InvalidInput(
            "content is required when creating a memory: the memory in full, as non-blank text."
        )
    if params.gist is not None:
        given["gist"] = read.require_text(
            read.trimmed(params.gist), field="gist", limit=MAX_GIST, why=GIST_WHY
        )
    elif creating:
        raise InvalidInput(f"gist is required when creating a memory. {GIST_WHY}")
    return given


def _settings(params: RememberParams, warnings: list[str]) -> dict[str, Any]:
    """Salience, core and epistemic status, as far as given."""
    given: dict[str, Any] = {}
    if params.salience is not None:
        given["salience"] = read_salience(params.salience, warnings)
    if params.core is not None:
        given["core"] = read.coerce_bool(params.core, field="core")
    if params.epistemic_status is not None:
        given["epistemic_status"] = EpistemicStatus(
            read.coerce_epistemic_status(params.epistemic_status)
        )
    return given


def _link_refs(links: list[str]) -> tuple[list[MemoryRef], list[str]]:
    """The links that are ids or prefixes (each once), and those that are neither."""
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
    return refs, malformed


def _remember_warnings(done: Remembered, malformed: list[str], links: list[MemoryRef]) -> list[str]:
    warnings: list[str] = []
    if done.skipped_links.ambiguous or done.skipped_links.unknown:
        written = {ref.hex: ref.written for ref in links if isinstance(ref, IdPrefix)}
        warnings.append(skipped_prefixes("linked_memories", done.skipped_links, written))
    dropped = [*malformed, *map(str, done.dropped_links)]
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
