"""One way to write and read timestamps: ISO-8601 in UTC."""

from datetime import UTC, datetime, timedelta


def isoformat(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def day(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def parse_timestamp(value: str) -> datetime:
    """ISO-8601 with a zone (naive values are taken as UTC). Raises ValueError."""
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def micros(moment: datetime) -> int:
    """Whole microseconds since the epoch: an exact sort key (a float timestamp is not)."""
    return (moment - _EPOCH) // _MICROSECOND
