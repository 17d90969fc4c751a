"""Looking up the account a management command acts for."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from memories.quoting import shown


def user_named(username: str) -> Any:
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(
            f"No account is named {shown(username)}. List accounts in the admin, or create one "
            "with `manage.py createsuperuser`."
        )
    return user
