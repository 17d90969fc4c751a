"""Display helpers for the consent page."""

import re
from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# After a run of slashes and after each dot: where a URL or host name reads well broken.
_WRAP_POINT = re.compile(r"(/+|\.)")


@register.filter
def wrap_points(value: Any) -> SafeString:
    """The text escaped, with a line-break opportunity (<wbr>) at each wrap point, so a
    narrow screen breaks a URL there rather than in the middle of a word. Safe to mark:
    escaping comes first and leaves no slash or dot for the inserted tags to split."""
    return mark_safe(_WRAP_POINT.sub(r"\1<wbr>", str(conditional_escape(value))))
