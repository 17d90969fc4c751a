"""JSON read one record at a time, within bounds, so that what an import holds does not
grow with the file: no record of more than MAX_RECORD_VALUES values or nested more than
MAX_NESTING levels, and every number finite and of a size a database stores (64 bits).

ijson's C parser (yajl) is fast but turns a lone surrogate escape ("\\ud800") into "?",
which would change the text silently; a file that holds any surrogate escape is read by
ijson's Python parser instead (slower, exact), and the lone half is then refused like any
text no database can store.
"""

import io
import math
import re
from collections.abc import Iterator
from typing import Any

import ijson

from memories.portability.importers.base import BadFile

MAX_NESTING = 100
TOO_DEEP = f"nests lists or objects more than {MAX_NESTING} levels deep"
# Far more than any record within the limits holds (a few hundred values), and enough for
# one that older imports filled beyond them (100,000 links); one record in memory stays a
# few megabytes.
MAX_RECORD_VALUES = 200_000
# The largest whole number every supported database stores.
MAX_INTEGER = 2**63 - 1
# Bytes the parser reads at once. yajl re-reads a value that spans its buffers from the
# value's start on each one (a 50 MB text took a minute in ijson's default 64 KB buffers,
# two seconds in these), and it turns a whole buffer into events before handing any over
# (a buffer of the file whole would hold every value of it at once).
PARSE_BUFFER = 1 << 20
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def _backend(data: bytes) -> Any:
    if not _SURROGATE_ESCAPE.search(data):
        try:
            return ijson.get_backend("yajl2_c")
        except ImportError:  # a platform without the compiled parser
            pass
    return ijson.get_backend("python")


def events(data: bytes) -> Iterator[tuple[str, Any]]:
    """ijson's (event, value) for the JSON text `data`. (Its parse() would also give each
    event's path, which costs time and memory in proportion to the depth: quadratic for a
    deeply nested file.)"""
    backend = _backend(data)
    return iter(backend.basic_parse(io.BytesIO(data), use_float=True, buf_size=PARSE_BUFFER))


def parse_problem(error: Exception) -> str:
    """What a parser's complaint means, in words for the person who sent the file."""
    text = str(error).splitlines()[0] if str(error).strip() else ""
    if not text:
        return "text that is not JSON"
    if "integer overflow" in text or "integer string conversion" in text:
        return "a whole number too large to store (more than 19 digits)"
    if "floating point" in text or "overflow" in text:
        return "a number too large to be stored (such as 1e999)"
    return f"text that is not JSON ({text.removeprefix('parse error: ')})"


class _Builder:
    """Builds one value from its events, counting them."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.count = 0
        self.stack: list[Any] = []
        self.keys: list[str | None] = []
        self.value: Any = None
        self.done = False

    def add(self, event: str, value: Any) -> None:
        self.count += 1
        if self.count > MAX_RECORD_VALUES:
            raise BadFile(
                f"{self.label} holds more than {MAX_RECORD_VALUES:,} values; no memory "
                "within the limits holds more than a few hundred"
            )
        if event in ("start_map", "start_array"):
            if len(self.stack) >= MAX_NESTING:
                raise BadFile(f"{self.label} {TOO_DEEP}")
            container: Any = {} if event == "start_map" else []
            self._put(container)
            self.stack.append(container)
            self.keys.append(None)
        elif event in ("end_map", "end_array"):
            self.stack.pop()
            self.keys.pop()
            if not self.stack:
                self.done = True
        elif event == "map_key":
            self.keys[-1] = value
        else:
            if event == "number":
                _check_number(value, self.label, self._field())
            self._put(value)
            if not self.stack:
                self.done = True

    def _field(self) -> str:
        return next((key for key in self.keys[1:2] if key), "a value")

    def _put(self, value: Any) -> None:
        if not self.stack:
            self.value = value
        elif isinstance(self.stack[-1], dict):
            self.stack[-1][self.keys[-1]] = value
        else:
            self.stack[-1].append(value)


def _check_number(value: Any, label: str, field: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise BadFile(f"{label} has a number too large to be stored in {field}")
    if isinstance(value, int) and abs(value) > MAX_INTEGER:
        raise BadFile(f"{label} has a whole number too large to store in {field}")


def build(first: tuple[str, Any], rest: Iterator[tuple[str, Any]], label: str) -> Any:
    """The value whose first event is `first`, built from the events that follow it."""
    builder = _Builder(label)
    builder.add(*first)
    while not builder.done:
        builder.add(*next(rest))
    return builder.value


def skip(first: str, rest: Iterator[tuple[str, Any]]) -> None:
    """Pass over a value without building it."""
    if first not in ("start_map", "start_array"):
        return
    depth = 1
    while depth:
        event, _ = next(rest)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1


def loads(text: str | bytes, label: str) -> Any:
    """One JSON value (a line of a JSONL file, or a value a record keeps as JSON text),
    read within the same bounds; ValueError when it is not JSON."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    stream = events(data)
    try:
        result = build(next(stream), stream, label)
        for _ in stream:  # anything after the value makes the text not JSON
            raise ValueError("more than one value")
    except ijson.JSONError as error:
        raise ValueError(str(error)) from None
    except ValueError as error:
        raise ValueError(str(error)) from None
    except StopIteration:
        raise ValueError("empty") from None
    return result
