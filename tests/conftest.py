import os
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings

from memories.indexing import refresh_hashes, reindex
from memories.models import Memory
from memories.vocabulary import last_touch_of

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def running_in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require_tool(available: bool, reason: str) -> None:
    """Skip when a tool the test needs is missing, except in CI where that is a failure."""
    if available:
        return
    if running_in_ci():
        pytest.fail(f"{reason} (required when CI=true)")
    pytest.skip(reason)


def is_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    # A file-backed SQLite test database: servers started by tests run in other
    # processes and threads, which cannot see an in-memory database.
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        # One file per pytest process, so parallel runs on one checkout never collide.
        name = settings.BASE_DIR / f".test-db-{os.getpid()}.sqlite3"
        database.setdefault("TEST", {})["NAME"] = str(name)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # Passwords and OAuth client secrets are hashed with Django's default hasher, which
    # is deliberately slow; tests only need hashing to be real, not expensive. The hashes
    # stay PBKDF2, so servers started by tests can check them too.
    settings.PASSWORD_HASHERS = ["tests.hashers.FastPBKDF2PasswordHasher"]


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="alice", password="pw-alice-123")


@pytest.fixture
def other_user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(username="bob", password="pw-bob-123")


@pytest.fixture
def seed_profile(settings: Any) -> None:
    """Recall with the original relevance rule (TAPROOT_RANKING=seed), as the tests written
    for it expect; the index follows, since every memory is written after this."""
    settings.TAPROOT_RANKING = "seed"


@pytest.fixture
def lexical_only(settings: Any) -> None:
    """Recall by words alone (TAPROOT_EMBEDDER=none), for tests of the lexical rule."""
    settings.TAPROOT_EMBEDDER = "none"


@pytest.fixture
def make_memory(user: Any) -> Callable[..., Memory]:
    """Write a memory straight through the ORM (any field, drift included), indexed."""

    def make(**overrides: Any) -> Memory:
        values: dict[str, Any] = {
            "id": uuid.uuid4(),
            "owner": user,
            "category": "episodic",
            "content": "A plain memory.",
            "gist": "A plain memory",
            "salience": "medium",
            "created_at": NOW,
            "updated_at": NOW,
        }
        values.update(overrides)
        memory = Memory(**values)
        memory.last_touched_at = overrides.get(
            "last_touched_at", last_touch_of(memory.updated_at, memory.last_retrieved)
        )
        refresh_hashes(memory)
        memory.save(force_insert=True)
        reindex([memory])
        return memory

    return make


@pytest.fixture
def varied_store(user: Any, make_memory: Callable[..., Memory]) -> None:
    """A store exported in more than two batches, with a batch boundary inside a run of
    equal created_at, and text that JSON escapes: quotes, new lines, control characters,
    non-ASCII."""
    from datetime import timedelta

    from memories.models import Closing
    from memories.services.exporting import EXPORT_BATCH
    from tests.memories.exports import bulk_memories

    bulk_memories(user, EXPORT_BATCH + 50)  # all created at NOW: ties across a boundary
    bulk_memories(user, EXPORT_BATCH, created_at=NOW - timedelta(days=1), tags=["a", "b"])
    make_memory(
        content='Quotes " and \\ backslash,\nnew lines\tand tabs, \x01 control, ☕ — “curly”.',
        gist="Ünïcode ☕",
        tags='drifted "string"',
        search_keywords=[],
        linked_memories=[str(uuid.uuid4())],
        provenance="line one\nline two",
        archived_at=NOW,
        archive_reason="old\nnews",
        created_at=NOW + timedelta(microseconds=1),
    )
    Closing.objects.create(owner=user, reflection="Bye.\nSee you.", created_at=NOW)
    Closing.objects.create(
        owner=user, reflection="Again ☕", conversation_title="T", created_at=NOW
    )


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--screenshots",
        action="store_true",
        help="write screenshots of the dashboard to docs/screenshots/ (browser tests)",
    )


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    # Suites that do not depend on the database backend (browser, conformance,
    # Inspector) run once per CI run: the second pass sets TAPROOT_SKIP_ONCE_PER_RUN.
    if os.environ.get("TAPROOT_SKIP_ONCE_PER_RUN") != "1":
        return
    skip = pytest.mark.skip(reason="runs once per CI run, in the SQLite pass")
    for item in items:
        if item.get_closest_marker("once_per_run"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def live_server_process(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: Any
) -> Any:
    """One uvicorn server for the session, on the test database (see tests/live_server.py)."""
    from tests.live_server import run_server

    with (
        django_db_blocker.unblock(),
        run_server(tmp_dir=tmp_path_factory.mktemp("server")) as server,
    ):
        yield server


# --- MCP client sessions (shared by tests/mcp and tests/oauth) -----------------------


@pytest.fixture(scope="session")
def portal() -> Any:
    """An event loop in a thread, in which tests run the async MCP client (tests/mcp/client.py)."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as portal:
        yield portal
