import getpass
import os
import secrets
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = (
        "Make sure the first account (a superuser) exists. Uses TAPROOT_ADMIN_USER and "
        "TAPROOT_ADMIN_PASSWORD when set; otherwise asks on a terminal; otherwise generates "
        "a password and prints it once. Does nothing when a superuser already exists."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        username = os.environ.get("TAPROOT_ADMIN_USER", "").strip()
        password = os.environ.get("TAPROOT_ADMIN_PASSWORD", "")
        interactive = sys.stdin.isatty()
        generated = False
        if not username:
            username = self.ask_username() if interactive else "admin"
        if User.objects.filter(username=username).exists():
            raise CommandError(
                f"An account named {username!r} exists but is not a superuser; "
                "choose another TAPROOT_ADMIN_USER or promote it in the admin."
            )
        if not password:
            if interactive:
                password = self.ask_password(username)
            else:
                password = secrets.token_urlsafe(18)
                generated = True
        User.objects.create_superuser(username=username, password=password)
        self.stdout.write(self.style.SUCCESS(f"Created the first account: {username}"))
        if generated:
            self.stdout.write(
                f"Its password is shown only now: {password}\n"
                "Store it somewhere safe, or change it later with "
                f"`manage.py changepassword {username}`."
            )

    def ask_username(self) -> str:
        return input("Username for the first account [admin]: ").strip() or "admin"

    def ask_password(self, username: str) -> str:
        User = get_user_model()
        while True:
            first = getpass.getpass("Password: ")
            if first != getpass.getpass("Password (again): "):
                self.stderr.write("The passwords do not match; try again.")
                continue
            try:
                validate_password(first, User(username=username))
            except ValidationError as error:
                self.stderr.write(" ".join(error.messages))
                continue
            return first
