import json
from typing import Any


def dumps(value: Any) -> str:
    """The one serialisation of every reply: compact, UTF-8 text kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
