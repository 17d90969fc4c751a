"""Small display helpers for the dashboard templates. None of them marks text safe."""

from typing import Any
from urllib.parse import urlsplit

from django import template

from memories.conf import meaning_model
from memories.vocabulary import category_label as vocabulary_category_label
from memories.vocabulary import home_category as vocabulary_home_category

register = template.Library()


@register.filter
def http_url(value: Any) -> str:
    """The URL when it is an absolute http(s) one (safe to link), else an empty string."""
    if not isinstance(value, str):
        return ""
    url = value.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return url
    return ""


@register.filter
def home_category(value: Any) -> str:
    """The canonical category a (possibly drifted) one is shown as, for colours."""
    return vocabulary_home_category(value)


@register.filter
def category_label(value: Any) -> str:
    return vocabulary_category_label(str(value))


@register.filter
def field_label(value: Any) -> str:
    """A memory field's name as a person reads it ("search keywords")."""
    return str(value).replace("_", " ")


@register.filter
def shown_value(value: Any, field: str = "") -> str:
    """A revision value as a person reads it (a category spelled as everywhere else)."""
    if value is None or value == "":
        return "—"
    if field == "category" and isinstance(value, str):
        return vocabulary_category_label(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) if value else "—"
    return str(value)


@register.simple_tag
def recall_by_meaning() -> str:
    """The model recall by meaning runs on, or that it is off."""
    return meaning_model() or "off (words only)"
