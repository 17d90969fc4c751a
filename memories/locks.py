"""A lock the database did not grant in time: busy, not broken.

SQLite has one write lock; a write that waits for it longer than the connection's busy
timeout fails with "database is locked". PostgreSQL fails a statement whose lock_timeout
passed with SQLSTATE 55P03. Either way the server is busy rather than broken, and the
same call a moment later goes through: each interface says so in its own words.
"""

from django.db import OperationalError

_SQLITE_LOCKED = ("database is locked", "database table is locked")
_LOCK_NOT_AVAILABLE = "55P03"


def is_lock_timeout(error: BaseException) -> bool:
    if not isinstance(error, OperationalError):
        return False
    return str(error).startswith(_SQLITE_LOCKED) or (
        getattr(error.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE
    )
