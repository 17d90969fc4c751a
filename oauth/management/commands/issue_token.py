from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memories.quoting import shown
from oauth.resource import mcp_resource_url
from oauth.tokens import issue_access_token

MAX_DAYS = 366


class Command(BaseCommand):
    help = (
        "Issue an access token for the /mcp endpoint that acts for one user, for local MCP "
        "clients and scripts. The token is printed once; only its checksum is stored."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--user", required=True, help="Username the token acts for.")
        parser.add_argument(
            "--days",
            type=int,
            default=30,
            help=f"Days until it expires (1-{MAX_DAYS}; default 30).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["days"]
        if not 1 <= days <= MAX_DAYS:
            raise CommandError(f"--days must be between 1 and {MAX_DAYS} (got {days}).")
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: options["user"]}).first()
        if user is None:
            raise CommandError(f"No user named {shown(options['user'])}.")
        if not user.is_active:
            raise CommandError(
                f"User {options['user']!r} is inactive; /mcp would refuse the token."
            )
        raw, token = issue_access_token(user, days=days)
        self.stderr.write(
            f"Access token for {options['user']} on {mcp_resource_url()}, valid until "
            f"{token.expires:%Y-%m-%d %H:%M} UTC. It is shown only now; send it as "
            "'Authorization: Bearer <token>'. Revoke it in the admin (Access tokens)."
        )
        self.stdout.write(raw)
