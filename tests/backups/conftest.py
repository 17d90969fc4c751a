import shutil
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from oauth2_provider.models import RefreshToken

from memories.models import Category, Salience
from memories.services import MemoryDraft, archive, close, promote, remember, take_snapshot
from tests.backups.support import create_postgres_database, drop_postgres_database
from tests.conftest import NOW, is_postgres, require_tool
from tests.live_server import test_database_url
from tests.mcp.tokens import make_access_token, make_application


@pytest.fixture(autouse=True)
def _postgres_client_tools() -> None:
    if is_postgres():
        for program in ("pg_dump", "pg_restore", "psql"):
            require_tool(shutil.which(program) is not None, f"{program} is not installed")


@pytest.fixture
def store(user: Any, other_user: Any) -> dict[str, Any]:
    """Something in every kind of table: two accounts, memories (one archived, one
    promoted, so with a revision), closings, a snapshot, an OAuth client with an access
    token and a refresh token."""
    kept = remember(
        owner=user,
        draft=MemoryDraft(
            category=Category.IDENTITY,
            content="Speaks plainly; <b>prefers</b> short answers ☕",
            gist="Prefers short answers",
            tags=["style"],
        ),
        now=NOW,
    ).memory
    promote(owner=user, memory_id=kept.pk, core=True, salience=Salience.HIGH, now=NOW)
    gone = remember(
        owner=user,
        draft=MemoryDraft(category=Category.EPISODIC, content="Sold the bicycle", gist="Bicycle"),
        now=NOW,
    ).memory
    archive(owner=user, memory_id=gone.pk, reason="old news", now=NOW)
    theirs = remember(
        owner=other_user,
        draft=MemoryDraft(category=Category.RELATIONSHIP, content="Calls on Sundays", gist="Calls"),
        now=NOW,
    ).memory
    close(owner=user, reflection="We planned the compost section.", now=NOW)
    take_snapshot(owner_id=user.pk, reason="before-import", now=NOW)
    client = make_application(name="Claude", user=user)
    token = make_access_token(
        user, resource="http://127.0.0.1:8000/mcp", application=client, expires_in=timedelta(days=1)
    )
    RefreshToken.objects.create(
        user=user, application=client, token="refresh-value", access_token=None
    )
    return {"kept": kept, "gone": gone, "theirs": theirs, "client": client, "token": token}


@pytest.fixture
def empty_database(tmp_path: Any) -> Iterator[str]:
    """DATABASE_URL of a new, empty database of the test database's kind."""
    if not is_postgres():
        yield f"sqlite:///{tmp_path / 'restored.sqlite3'}"
        return
    url = f"{test_database_url()}_restored"
    create_postgres_database(url)
    try:
        yield url
    finally:
        connection.close()
        drop_postgres_database(url)
