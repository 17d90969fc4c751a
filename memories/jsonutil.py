import json
from typing import Any


def dumps(value: Any) -> str:
    """The one serialisation of every reply: compact, UTF-8 text kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_list(text: str) -> list[Any] | None:
    """The list a stripped text holds as a JSON array, or None when it holds none."""
    if not text.startswith("["):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays nested too deep
        return None
    return parsed if isinstance(parsed, list) else None
