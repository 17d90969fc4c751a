"""Whatever JSON object a client sends as arguments, every tool answers with one JSON text
holding a status, never a protocol error, a 5xx or a crash; a refused call changes nothing."""

import uuid
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.mcp.client import decode
from tests.store import store_state

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.server]

PARAMETERS = {
    "taproot_reflect": [],
    "taproot_status": [],
    "taproot_migrate": [],
    "taproot_remember": [
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
    ],
    "taproot_recall": ["query", "category", "ids", "tags", "since", "limit"],
    "taproot_promote": ["memory_id", "core", "salience"],
    "taproot_forget": ["action", "memory_id", "reason", "ids", "content", "gist", "category"],
    "taproot_close": ["reflection", "conversation_title", "conversation_url"],
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def arguments_for(tool: str, memory_ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects mixing the tool's own argument names with stray ones, and values that are
    sometimes plausible (so calls also succeed) and often anything at all."""
    plausible = st.sampled_from(
        [
            "identity",
            "episodic",
            "event",
            "high",
            "3",
            "archive",
            "unarchive",
            "compress",
            "delete",
            "true",
            "A memory worth keeping.",
            "2026-01-01T00:00:00Z",
            "5",
            *memory_ids,
            str(uuid.uuid4()),
        ]
    ) | st.lists(st.sampled_from(memory_ids), max_size=3)
    names = st.sampled_from(PARAMETERS[tool]) if PARAMETERS[tool] else st.nothing()
    values = plausible | json_values
    anything = st.dictionaries(names | st.text(max_size=12), values, max_size=6)
    # A valid call with one or two arguments replaced: reaches deeper than pure noise.
    base = valid_arguments(tool, memory_ids)
    near_valid = st.dictionaries(names | st.text(max_size=12), values, max_size=2).map(
        lambda changes: {**base, **changes}
    )
    return anything | near_valid


def valid_arguments(tool: str, memory_ids: list[str]) -> dict[str, Any]:
    return {
        "taproot_remember": {
            "category": "episodic",
            "content": "Seen by hypothesis.",
            "gist": "Seen",
        },
        "taproot_recall": {"query": "kites", "limit": 3},
        "taproot_promote": {"memory_id": memory_ids[0], "salience": "high"},
        "taproot_forget": {"action": "archive", "memory_id": memory_ids[2], "reason": "test"},
        "taproot_close": {"reflection": "Done for now.", "conversation_title": "Test"},
    }.get(tool, {})


@pytest.fixture
def memory_ids(make_memory: Any, other_user: Any) -> list[str]:
    """A small store to aim at: live, core, archived, drifted, and one of Bob's."""
    now = timezone.now()
    memories = [
        make_memory(created_at=now, updated_at=now, content="Kites over the bay."),
        make_memory(created_at=now, updated_at=now, core=True, category="identity"),
        make_memory(created_at=now, updated_at=now, category="episodic", tags=["trip"]),
        make_memory(archived_at=now),
        make_memory(category="event", salience="3"),
        make_memory(owner=other_user),
    ]
    return [str(m.pk) for m in memories]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_arguments_always_get_a_json_answer_and_refusals_change_nothing(
    data, eras, memory_ids, server
):
    log_start = len(server.log())
    # Every tool in every example, so none is left to chance.
    for tool in sorted(PARAMETERS):
        arguments = data.draw(arguments_for(tool, memory_ids), label=tool)
        mcp = data.draw(st.sampled_from(eras), label="era")
        before = store_state()
        result = mcp.call(tool, arguments)
        body = decode(result)
        event(f"{tool}: {'refused' if result.is_error else 'ok'}")
        if result.is_error:
            assert body == {"status": "error", "message": body["message"]}
            assert body["message"]
            assert store_state() == before
        else:
            assert body["status"] == "ok"
    log = server.log()[log_start:]
    assert "failed unexpectedly" not in log
    assert "Traceback" not in log
