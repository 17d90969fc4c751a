"""Taproot's own export and the original Taproot's backup (the `taproot/1` envelope of
SPEC §7), or a bare JSON array of memory records."""

from collections.abc import Iterator
from typing import Any

import ijson

from memories.portability.importers import jsontext
from memories.portability.importers.base import BadFile, Entry, Source, check_utf8, without_bom
from memories.quoting import shown

EXPORT_FORMAT = "taproot/1"
MEMORY_PREFIX = "mem:"
CLOSING_PREFIX = "close:"
SHAPES = (
    "an export envelope (an object with an 'entries' list of {key, value, metadata}) or a "
    "JSON array of memory records"
)
IGNORED_KEYS = "other keys"


class TaprootFile(Source):
    name = "taproot"

    def __init__(self, data: Any) -> None:
        """`data`: the file's bytes, or its JSON already parsed (a list or a dict)."""
        super().__init__()
        self._where = "it"  # what a parse error is in
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        if isinstance(data, bytes):
            check_utf8(data)
            data = without_bom(data)
        self.data = data

    def entries(self) -> Iterator[Entry]:
        self.left_out.clear()
        if isinstance(self.data, bytes):
            yield from self._stream(self.data)
        else:
            yield from self._parsed(self.data)

    # Parsed JSON, as a test or a caller may hand it over.

    def _parsed(self, data: Any) -> Iterator[Entry]:
        if isinstance(data, list):
            for index, value in enumerate(data, start=1):
                yield self._array_item(index, value)
        elif isinstance(data, dict) and isinstance(data.get("entries"), list):
            _check_format(data.get("format", EXPORT_FORMAT))
            for index, entry in enumerate(data["entries"], start=1):
                if found := self._entry(index, entry):
                    yield found
        else:
            raise BadFile(f"it is not one of the shapes Taproot reads: {SHAPES}")

    # The file's bytes, read a record at a time.

    def _stream(self, data: bytes) -> Iterator[Entry]:
        stream = jsontext.events(data)
        self._where = "it"
        try:
            event, _ = next(stream, ("", None))
            if event == "start_array":
                for index, (item_event, value) in enumerate(_items(stream), start=1):
                    self._where = f"record {index}"
                    item = jsontext.build((item_event, value), stream, self._where)
                    yield self._array_item(index, item)
            elif event == "start_map":
                yield from self._envelope(stream)
            elif event:
                raise BadFile(f"it is not one of the shapes Taproot reads: {SHAPES}")
            else:
                raise BadFile("it is empty")
            self._where = "it"
            for _ in stream:  # the parser finds anything after the value
                pass
        except (ijson.JSONError, ValueError) as error:
            raise BadFile(f"{self._where} holds {jsontext.parse_problem(error)}") from None

    def _envelope(self, stream: Iterator[tuple[str, Any]]) -> Iterator[Entry]:
        seen_entries = False
        fmt: Any = EXPORT_FORMAT
        while True:
            event, key = next(stream)
            if event == "end_map":
                break
            event, value = next(stream)
            if key == "entries" and event == "start_array":
                seen_entries = True
                _check_format(fmt)
                for index, (item_event, item_value) in enumerate(_items(stream), start=1):
                    self._where = f"entry {index}"
                    entry = jsontext.build((item_event, item_value), stream, self._where)
                    if found := self._entry(index, entry):
                        yield found
            elif key == "format":
                fmt = jsontext.build((event, value), stream, "the format") if event else value
                _check_format(fmt)
            else:
                jsontext.skip(event, stream)
        if not seen_entries:
            raise BadFile(f"it is not one of the shapes Taproot reads: {SHAPES}")

    # One record.

    def _array_item(self, index: int, value: Any) -> Entry:
        label = _record_label(index, value)
        if not isinstance(value, dict):
            raise BadFile(f"{label} is not an object")
        return Entry("memory", label, value)

    def _entry(self, index: int, entry: Any) -> Entry | None:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise BadFile(f"entry {index} is not an object with a text 'key'")
        key: str = entry["key"]
        label = f"entry {index} ({shown(key)})"
        if key.startswith(MEMORY_PREFIX):
            return Entry("memory", label, _value(entry, label), key[len(MEMORY_PREFIX) :])
        if key.startswith(CLOSING_PREFIX):
            return Entry("closing", label, _value(entry, label), key[len(CLOSING_PREFIX) :])
        # Sessions, backups and anything else the original kept in the same namespace.
        self.left_out[IGNORED_KEYS] += 1
        return None


def _items(stream: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """The first event of each item of the array whose start was just read."""
    while True:
        event, value = next(stream)
        if event == "end_array":
            return
        yield event, value


def _check_format(fmt: Any) -> None:
    if fmt != EXPORT_FORMAT:
        raise BadFile(
            f"its format is {shown(fmt)}; this version reads {EXPORT_FORMAT!r} and "
            "backups of the original Taproot"
        )


def _record_label(index: int, value: Any) -> str:
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return f"record {index} (id {shown(value['id'])})"
    return f"record {index}"


def _value(entry: dict[str, Any], label: str) -> dict[str, Any]:
    value = entry.get("value")
    if isinstance(value, str):
        # Cloudflare KV hands values back as text unless asked for JSON.
        try:
            value = jsontext.loads(value, label)
        except ValueError:
            value = None
    if not isinstance(value, dict):
        raise BadFile(f"{label} has no record object as its value")
    return value
