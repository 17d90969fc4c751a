"""What every reader shares: the records it yields, its refusal, and the checks on the
bytes it is given (their size, UTF-8)."""

import codecs
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.utils.crypto import salted_hmac

from memories.errors import InvalidInput

# Ids of records made from a store without ids of its own: derived from the account and
# the store's own identity of the record (a name, a content hash, a permalink), so the
# same store imported twice gives the same ids, and one account's never meet another's.
IMPORT_NAMESPACE = uuid.UUID("9a4e8f0c-3b7d-5c21-8e6f-2d1a0b9c7e54")
UTF8_BOM = codecs.BOM_UTF8
# Bytes decoded at once while checking a file is UTF-8 (the text itself is not kept).
_CHECK_CHUNK = 1 << 20


class BadFile(InvalidInput):
    """A file (or store) that cannot be imported; nothing was changed."""

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"The file was not imported: {problem}. Nothing was changed; fix the file and "
            "import it again."
        )


@dataclass(frozen=True)
class Entry:
    """One record of the store, in the shape of a Taproot export's value.

    `label` names it in a message ("entry 4 (mem:…)", "line 3 (entity 'Maya')", "note
    garden/soil.md"); `key_id` is the id an envelope's key gives it, when there is one.
    """

    kind: Literal["memory", "closing"]
    label: str
    value: dict[str, Any]
    key_id: str | None = None


class Source:
    """A store to import. `entries()` reads it from the start each time it is called;
    `left_out` counts, after a whole read, what the store holds that is not imported
    (reason -> count: "soft-deleted rows", "other keys"…); `repeats_refused` says whether
    a record id repeated in the file refuses it (Taproot's files: yes; stores whose ids
    Taproot derives: the repeat is the same record written twice, skipped)."""

    name = "taproot"
    repeats_refused = True
    # The category of records whose store says none (the caller's --category wins).
    default_category: str | None = None

    def __init__(self) -> None:
        self.left_out: Counter[str] = Counter()

    def entries(self) -> Iterator[Entry]:
        raise NotImplementedError


def derived_id(owner_id: int, source: str, identity: str) -> str:
    """The id a record of another memory server's store has in the import: the same each
    time the store is read, so importing it twice changes nothing. A name-based UUID
    (version 5) anyone can compute; the import never stores it as it is, but under
    `own_id` (memories.services.importing), which only this server can compute."""
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"{owner_id}\x00{source}\x00{identity}"))


def is_name_based(record_id: uuid.UUID) -> bool:
    """True for an id made from a name (UUID versions 3 and 5): whoever knows the name
    can compute it, as peer stores' ids here, or another system's."""
    return record_id.version in (3, 5)


def own_id(owner_id: int, record_id: uuid.UUID) -> uuid.UUID:
    """The id a name-based record id of a file is stored under in this owner's store: an
    HMAC of the server's secret, the owner and the file's id, as a random-looking UUID
    (version 4 bits). The same every time (importing twice changes nothing), different
    for every owner, and no one without SECRET_KEY can compute it."""
    digest = salted_hmac(
        "taproot.import.own-id", f"{owner_id}\x00{record_id}", algorithm="sha256"
    ).digest()
    return uuid.UUID(bytes=digest[:16], version=4)


def max_import_bytes() -> int:
    return int(settings.TAPROOT_IMPORT_MAX_MB) * 1024 * 1024


def file_too_large(size: int) -> BadFile | None:
    """The refusal of a file of `size` bytes, before anything reads it; None when it fits."""
    limit = int(settings.TAPROOT_IMPORT_MAX_MB)
    if size <= max_import_bytes():
        return None
    return BadFile(
        f"it is {size / 1024 / 1024:,.1f} MB and imports are limited to {limit:,} MB "
        "(TAPROOT_IMPORT_MAX_MB); split the file, or raise the limit on the server"
    )


def check_size(size: int) -> None:
    if refusal := file_too_large(size):
        raise refusal


def check_utf8(data: bytes, what: str = "it") -> None:
    """Refuse bytes that are not UTF-8 text, naming the first byte that is not, without
    keeping the decoded text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise BadFile(f"{what} is UTF-16 text; save it as UTF-8")
    decoder = codecs.getincrementaldecoder("utf-8")()
    for start in range(0, len(data), _CHECK_CHUNK):
        try:
            decoder.decode(data[start : start + _CHECK_CHUNK])
        except UnicodeDecodeError as error:
            raise BadFile(
                f"{what} is not UTF-8 text (byte {start + error.start + 1:,} is not UTF-8); "
                "save it as UTF-8"
            ) from None
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise BadFile(f"{what} is not UTF-8 text (it ends inside a character)") from None


def without_bom(data: bytes) -> bytes:
    return data[len(UTF8_BOM) :] if data.startswith(UTF8_BOM) else data


def provenance(source: str, **details: Any) -> str:
    """The provenance of an imported memory: JSON text naming the store it came from."""
    return json.dumps(
        {"imported_from": source, **{k: v for k, v in details.items() if v is not None}},
        ensure_ascii=False,
        sort_keys=True,
    )
