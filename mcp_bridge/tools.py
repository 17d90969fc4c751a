"""The eight Taproot tools (SPEC §4): what Claude sees, and a thin call into their handlers.

Each tool passes its arguments as sent to mcp_bridge.handlers, which reads them into the
services' values and answers in the tools' words.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeAlias

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations

from mcp_bridge import arguments as arg
from mcp_bridge import embedding, handlers
from mcp_bridge.auth import token_client
from mcp_bridge.handlers import FORGET_ACTIONS
from mcp_bridge.replies import run_tool
from memories import services
from memories.limits import (
    DEFAULT_RECALL_LIMIT,
    MAX_CONTENT,
    MAX_GIST,
    MAX_ITEM_LENGTH,
    MAX_LINKS,
    MAX_LIST_ITEMS,
    MAX_REASON,
    MAX_RECALL_IDS,
    MAX_RECALL_LIMIT,
    MAX_REFLECTION,
    MAX_TITLE,
)
from memories.vocabulary import CATEGORY_VALUES, EPISTEMIC_VALUES, SALIENCE_VALUES

# --- parameter types -----------------------------------------------------------------

Category: TypeAlias = Annotated[
    arg.Text,
    arg.choice(
        CATEGORY_VALUES,
        "identity: who you are and how you work. relationship: who the user is and how you "
        "work together. active_thread: ongoing projects and open questions. episodic: "
        "events, what happened when. error: mistakes and their corrections.",
    ),
]
Salience: TypeAlias = Annotated[
    arg.Text,
    arg.choice(
        SALIENCE_VALUES,
        "How much this matters. High-salience memories stay in the catalog however old.",
    ),
]
MemoryId: TypeAlias = Annotated[
    arg.Text,
    arg.text(
        "A memory id as shown in the catalog (its first 8 or more characters) or the whole "
        "id a tool returned."
    ),
]


# --- the tools -----------------------------------------------------------------------


def reflect_text(*, owner: Any) -> str:
    """The payload, recorded as loaded by the token's client (status and the dashboard
    preview build it without this)."""
    client_id, client_name = token_client()
    services.record_reflect(owner=owner, client_id=client_id, client_name=client_name)
    return services.reflect(owner=owner).text


async def taproot_reflect(ctx: Context) -> CallToolResult:
    return await run_tool(ctx, "taproot_reflect", reflect_text)


async def taproot_remember(
    ctx: Context,
    category: Category = None,
    content: Annotated[
        arg.Text,
        arg.text(
            "The memory in full, written so that a later conversation understands it "
            "without this one. Required when creating.",
            max_length=MAX_CONTENT,
        ),
    ] = None,
    gist: Annotated[
        arg.Text,
        arg.text(
            "One line of about 15 words that stands for the memory in the catalog. Required "
            "when creating: write it now, while the context is fresh.",
            max_length=MAX_GIST,
        ),
    ] = None,
    salience: Salience = None,
    core: Annotated[
        Any,
        arg.boolean(
            "Load this memory in full at the start of every conversation. Keep that tier small."
        ),
    ] = None,
    epistemic_status: Annotated[
        arg.Text,
        arg.choice(
            EPISTEMIC_VALUES,
            "How sure this is: observed (seen directly), inferred, replicated (confirmed "
            "again), contested, unvalidated (the default).",
        ),
    ] = None,
    provenance: Annotated[
        arg.Text, arg.text("Where this came from, if that matters later.")
    ] = None,
    tags: Annotated[
        Any,
        arg.string_list(
            "Short labels for filtering with taproot_recall(tags=...).",
            max_items=MAX_LIST_ITEMS,
            max_length=MAX_ITEM_LENGTH,
        ),
    ] = None,
    linked_memories: Annotated[
        Any,
        arg.string_list(
            "Ids of your related memories (as shown in the catalog, or whole).",
            max_items=MAX_LINKS,
        ),
    ] = None,
    conversation_id: Annotated[
        arg.Text, arg.text("An identifier of this conversation, if you have one.")
    ] = None,
    transcript_ref: Annotated[
        arg.Text, arg.text("A reference to a transcript, if there is one.")
    ] = None,
    conversation_url: Annotated[
        arg.Text, arg.text("The URL of this conversation, if known.")
    ] = None,
    search_keywords: Annotated[
        Any,
        arg.string_list(
            "Extra words a later search should find this memory by (synonyms, names).",
            max_items=MAX_LIST_ITEMS,
            max_length=MAX_ITEM_LENGTH,
        ),
    ] = None,
    update_id: Annotated[
        arg.Text,
        arg.text(
            "Give the id of an existing memory (as shown in the catalog, or whole) to update "
            "it instead of creating a new one; only the fields you send change, and none "
            "other is required."
        ),
    ] = None,
) -> CallToolResult:
    arguments = {
        "category": category,
        "content": content,
        "gist": gist,
        "salience": salience,
        "core": core,
        "epistemic_status": epistemic_status,
        "provenance": provenance,
        "tags": tags,
        "linked_memories": linked_memories,
        "conversation_id": conversation_id,
        "transcript_ref": transcript_ref,
        "conversation_url": conversation_url,
        "search_keywords": search_keywords,
        "update_id": update_id,
    }

    async def ahead() -> dict[str, Any]:
        created = handlers.remembered_ahead(**arguments)
        return {"vectors": await embedding.memory_vectors(created)}

    return await run_tool(ctx, "taproot_remember", handlers.remember, ahead=ahead, **arguments)


async def taproot_recall(
    ctx: Context,
    query: Annotated[
        arg.Text,
        arg.text(
            "Words that would appear in the memory. Results are ranked by how well they match "
            "first; importance and how often and recently a memory was used order close "
            "matches."
        ),
    ] = None,
    category: Category = None,
    ids: Annotated[
        Any,
        arg.string_list(
            "Memory ids to load in full, as catalog lines show them (e.g. a002ab76) or whole.",
            max_items=MAX_RECALL_IDS,
        ),
    ] = None,
    tags: Annotated[
        Any,
        arg.string_list(
            "Only memories carrying all of these tags.",
            max_items=MAX_LIST_ITEMS,
            max_length=MAX_ITEM_LENGTH,
        ),
    ] = None,
    since: Annotated[
        arg.Text,
        arg.text(
            "Only memories updated on or after this ISO-8601 date-time, e.g. 2026-01-31T00:00:00Z.",
            fmt="date-time",
        ),
    ] = None,
    limit: Annotated[
        Any,
        arg.integer(
            f"How many memories to return at most (default {DEFAULT_RECALL_LIMIT}, or the number "
            "of ids given).",
            minimum=1,
            maximum=MAX_RECALL_LIMIT,
        ),
    ] = None,
) -> CallToolResult:
    async def ahead() -> dict[str, Any]:
        text = query if isinstance(query, str) else ""
        return {"query_vector": await embedding.query_vector(text)}

    return await run_tool(
        ctx,
        "taproot_recall",
        handlers.recall,
        ahead=ahead,
        query=query,
        category=category,
        ids=ids,
        tags=tags,
        since=since,
        limit=limit,
    )


async def taproot_promote(
    ctx: Context,
    memory_id: MemoryId = None,
    core: Annotated[
        Any,
        arg.boolean(
            "true: load in full at the start of every conversation; false: back to the catalog."
        ),
    ] = None,
    salience: Salience = None,
) -> CallToolResult:
    return await run_tool(
        ctx,
        "taproot_promote",
        handlers.promote,
        memory_id=memory_id,
        core=core,
        salience=salience,
    )


async def taproot_forget(
    ctx: Context,
    action: Annotated[
        arg.Text,
        arg.choice(
            FORGET_ACTIONS,
            "archive: hide from reflect and recall, keep the record. unarchive: bring it back. "
            "delete: remove for good. compress: replace several memories with one you write.",
        ),
    ] = None,
    memory_id: Annotated[
        arg.Text,
        arg.text(
            "The memory to archive, unarchive or delete, by its id as shown in the catalog "
            "or whole (not for compress)."
        ),
    ] = None,
    reason: Annotated[
        arg.Text, arg.text("Why; stored with an archived memory.", max_length=MAX_REASON)
    ] = None,
    ids: Annotated[
        Any,
        arg.string_list(
            "compress only: two or more ids of your live memories to combine (as shown in "
            "the catalog, or whole).",
            max_items=MAX_RECALL_IDS,
        ),
    ] = None,
    content: Annotated[
        arg.Text,
        arg.text("compress only: the full text of the combined memory.", max_length=MAX_CONTENT),
    ] = None,
    gist: Annotated[
        arg.Text, arg.text("compress only: its one-line gist.", max_length=MAX_GIST)
    ] = None,
    category: Annotated[
        arg.Text,
        arg.choice(
            CATEGORY_VALUES,
            "compress only: the combined memory's category; needed when the originals differ.",
        ),
    ] = None,
) -> CallToolResult:
    return await run_tool(
        ctx,
        "taproot_forget",
        handlers.forget,
        action=action,
        memory_id=memory_id,
        reason=reason,
        ids=ids,
        content=content,
        gist=gist,
        category=category,
    )


async def taproot_close(
    ctx: Context,
    reflection: Annotated[
        arg.Text,
        arg.text(
            "What happened in this conversation, what matters for next time, what is left open.",
            max_length=MAX_REFLECTION,
        ),
    ] = None,
    conversation_title: Annotated[
        arg.Text, arg.text("A short title for the conversation.", max_length=MAX_TITLE)
    ] = None,
    conversation_url: Annotated[
        arg.Text, arg.text("The URL of the conversation, if known.")
    ] = None,
) -> CallToolResult:
    return await run_tool(
        ctx,
        "taproot_close",
        handlers.close,
        reflection=reflection,
        conversation_title=conversation_title,
        conversation_url=conversation_url,
    )


async def taproot_migrate(ctx: Context) -> CallToolResult:
    return await run_tool(ctx, "taproot_migrate", handlers.migrate)


async def taproot_status(ctx: Context) -> CallToolResult:
    return await run_tool(ctx, "taproot_status", handlers.status)


# --- what tools/list shows ---------------------------------------------------------


@dataclass(frozen=True)
class ToolDefinition:
    fn: Callable[..., Any]
    title: str
    description: str
    annotations: ToolAnnotations
    required: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def to_tool(self) -> Tool:
        tool = Tool.from_function(
            self.fn,
            name=self.name,
            title=self.title,
            description=self.description,
            annotations=self.annotations,
            meta=self.meta or None,
            structured_output=False,
        )
        return tool.model_copy(
            update={"parameters": arg.tidy_input_schema(tool.parameters, self.required)}
        )


def _hints(
    *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


DEFINITIONS: list[ToolDefinition] = [
    ToolDefinition(
        taproot_reflect,
        title="Load memory",
        description=(
            "Call this first, at the start of every conversation, before you answer: it "
            "loads who you are and who you are talking to. Returns JSON with core_memories "
            "(the always-loaded tier, in full, by category), core_overflow (core memories "
            "that did not fit in full, as lines), catalog (by category, one line per other "
            "memory the budget holds, important then recent ones first, under month "
            "headings: [id] gist, [high] when important), how many memories the "
            "catalog leaves out, and the latest closing reflections; it never exceeds its "
            "token budget. Ids are short: every tool takes them as shown. Load the full text "
            "behind any line with taproot_recall(ids=[...]). Takes no arguments and changes "
            "no memory."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        meta={"anthropic/alwaysLoad": True},
    ),
    ToolDefinition(
        taproot_remember,
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
        annotations=_hints(read_only=False),
    ),
    ToolDefinition(
        taproot_recall,
        title="Recall",
        description=(
            "Bring back memories in full when the conversation touches something you may "
            "have stored: by ids from catalog lines, by query (words the memory would "
            "contain), by category, tags (all must match) or since. Filters combine; with "
            "a query only memories that match it are returned, best first. Reaches "
            "everything, including memories the catalog leaves out. Returns {status, "
            "count, results, warnings?} with every field of each memory and its "
            "activation_score (and reflect_hint?, as for taproot_remember); ids that are "
            "malformed, ambiguous or name no live memory of yours are skipped and named in "
            "warnings. Changes no memory: it only records that the recalled ones were used, "
            "which orders future results and keeps them in the catalog; archived ones never "
            "come back."
        ),
        # Recording use is bookkeeping, like a file's access time; a write hint would make
        # Claude.ai ask the person before every recall.
        annotations=_hints(read_only=True),
    ),
    ToolDefinition(
        taproot_promote,
        title="Promote or demote",
        description=(
            "Curate the tier loaded in full at every start: core=true moves a memory into "
            "it, core=false moves it back to the catalog; salience (high, medium, low) sets "
            "how much it matters. Keep the core tier small: who you are, who the user is, "
            "standing corrections, live threads. Counts as an update of the memory. "
            "Returns {status, memory_id, core, salience}."
        ),
        annotations=_hints(read_only=False, idempotent=True),
        required=("memory_id",),
    ),
    ToolDefinition(
        taproot_forget,
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
        annotations=_hints(read_only=False, destructive=True),
        required=("action",),
    ),
    ToolDefinition(
        taproot_close,
        title="Close the conversation",
        description=(
            "At the end of a conversation, or when the user says goodbye, store a short "
            "closing reflection: what happened, what matters next time, what is left open. "
            "The newest closings are shown by taproot_reflect at the start of the next "
            'conversation. Returns {status, action: "closed", reflection_id, message}.'
        ),
        annotations=_hints(read_only=False),
        required=("reflection",),
    ),
    ToolDefinition(
        taproot_migrate,
        title="Repair the store",
        description=(
            "Bring the user's stored memories up to the current format, for a store carried "
            "over from an older Taproot or an import: legacy category names and numeric "
            "salience become the current values, tags and keywords written as text become "
            "lists, and memories without a gist get one made from their first sentence. A "
            "snapshot of the affected records is taken first; content is never changed; a "
            "second run changes nothing. Returns {status, migrated, already_migrated, total, "
            "snapshot_id, category_counts_before, category_counts_after}."
        ),
        annotations=_hints(read_only=False, idempotent=True),
    ),
    ToolDefinition(
        taproot_status,
        title="Store status",
        description=(
            "How the memory store looks: live memories by category, archived and closing "
            "counts, the size of the core tier, catalog lines shown and left out, the size "
            "of the taproot_reflect payload against its token budget, when taproot_reflect "
            "was last called (last_reflect_at, reflects_last_7_days), suggested promotions, "
            "demotions and archiving (never applied by themselves: ask the user first), and "
            "any warnings. Takes no arguments and changes nothing."
        ),
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    ),
]
