"""Retries store once: Claude.ai reports some answered calls as failed and sends them again,
sometimes while the first is still running. A create that repeats, field for field, one the
same account stored within the retry window returns what was stored and writes nothing.

Every retry-safe write calls `hold` first thing inside its write transaction, then looks for
its twin: on PostgreSQL a transaction-scoped advisory lock, keyed on the account and the
fields, makes identical calls wait for each other (different calls never do); SQLite begins
every write transaction IMMEDIATE, so writers are already one at a time.
"""

import hashlib
import json
from datetime import datetime
from typing import Any

from django.db import connection

from memories.conf import retry_window
from memories.models import User


def hold(owner: User, kind: str, fields: dict[str, Any]) -> None:
    """Make identical `kind` writes of the owner's wait for each other until this
    transaction ends. Call inside the write transaction, before looking for a twin."""
    if connection.vendor != "postgresql":
        return
    text = json.dumps([kind, str(owner.pk), fields], sort_keys=True, default=str)
    key = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def since(now: datetime) -> datetime | None:
    """The earliest a twin may have been stored; None when retries are not matched."""
    window = retry_window()
    return now - window if window else None
