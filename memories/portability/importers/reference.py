"""The MCP reference memory server (`@modelcontextprotocol/server-memory`): a JSONL file,
one knowledge-graph item a line, as its saveGraph writes them:
{"type":"entity","name":…,"entityType":…,"observations":[…]} and
{"type":"relation","from":…,"to":…,"relationType":…}.

One memory per entity: its name and type as the gist, every observation in the content,
the type as a tag; each relation kept both as a readable line in the content of the
entities at its two ends ("Maya co-writes Garden_Book") and as linked_memories between
their memories, when both are in the file.
"""

import io
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from memories.portability.importers import jsontext
from memories.portability.importers.base import (
    BadFile,
    Entry,
    Source,
    check_utf8,
    derived_id,
    provenance,
    without_bom,
)
from memories.portability.importers.text import fitted_gist
from memories.quoting import shown

NAME = "reference-memory"
OTHER_LINES = "lines that are neither an entity nor a relation"
DANGLING = "relations to an entity not in the file (kept as text)"


class ReferenceMemory(Source):
    name = NAME
    repeats_refused = False  # the same entity written twice is one memory
    default_category = "relationship"

    def __init__(self, data: bytes, *, owner_id: int) -> None:
        super().__init__()
        check_utf8(data)
        self.data = without_bom(data)
        self.owner_id = owner_id

    def _items(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for number, line in enumerate(io.BytesIO(self.data), start=1):
            if not line.strip():
                continue
            label = f"line {number}"
            try:
                item = jsontext.loads(line, label)
            except ValueError as error:
                raise BadFile(
                    f"{label} is not JSON ({jsontext.parse_problem(error)}); every line of "
                    "a reference memory file is one JSON object"
                ) from None
            if not isinstance(item, dict):
                raise BadFile(f"{label} is not a JSON object")
            yield number, item

    def entries(self) -> Iterator[Entry]:
        self.left_out.clear()
        names: set[str] = set()
        every: list[tuple[str, str, str]] = []
        for number, item in self._items():
            if item.get("type") == "entity":
                names.add(_text(item, "name", number))
            elif item.get("type") == "relation":
                every.append(
                    (
                        _text(item, "from", number),
                        _text(item, "relationType", number),
                        _text(item, "to", number),
                    )
                )
        relations: defaultdict[str, list[tuple[str, str, str]]] = defaultdict(list)
        for relation in every:
            start, _, end = relation
            relations[start].append(relation)
            if end != start:
                relations[end].append(relation)
            if start not in names or end not in names:
                self.left_out[DANGLING] += 1
        for number, item in self._items():
            if item.get("type") == "entity":
                yield self._entity(number, item, names, relations)
            elif item.get("type") != "relation":
                self.left_out[OTHER_LINES] += 1

    def _entity(
        self,
        number: int,
        item: dict[str, Any],
        names: set[str],
        relations: dict[str, list[tuple[str, str, str]]],
    ) -> Entry:
        name = _text(item, "name", number)
        entity_type = item.get("entityType")
        entity_type = entity_type.strip() if isinstance(entity_type, str) else ""
        observations = item.get("observations", [])
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            raise BadFile(
                f"line {number} (entity {shown(name)}) has observations that are not a list "
                "of texts"
            )
        heading = f"{name} ({entity_type})" if entity_type else name
        lines = [heading]
        lines += [f"- {o.strip()}" for o in observations if o.strip()]
        held = relations.get(name, [])
        if held:
            lines.append("Relations:")
            lines += [f"- {start} {kind} {end}" for start, kind, end in held]
        links = list(
            dict.fromkeys(
                derived_id(self.owner_id, NAME, other)
                for start, _, end in held
                for other in (start, end)
                if other != name and other in names
            )
        )
        return Entry(
            "memory",
            f"line {number} (entity {shown(name)})",
            {
                "id": derived_id(self.owner_id, NAME, name),
                "content": "\n".join(lines),
                "gist": fitted_gist(heading),
                "tags": [entity_type] if entity_type else [],
                "linked_memories": links,
                "provenance": provenance(NAME, entity=name, entity_type=entity_type or None),
            },
        )


def _text(item: dict[str, Any], key: str, number: int) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadFile(f"line {number} has no {key} (it must be non-blank text)")
    return value.strip()
