"""manage.py ensure_admin: the first account, from the environment, a terminal, or generated."""

import io
import re
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from memories.management.commands import ensure_admin

pytestmark = pytest.mark.django_db


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO())


@pytest.fixture
def no_admin_variables(monkeypatch):
    monkeypatch.delenv("TAPROOT_ADMIN_USER", raising=False)
    monkeypatch.delenv("TAPROOT_ADMIN_PASSWORD", raising=False)


def run() -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ensure_admin", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def superusers() -> list:
    return list(get_user_model().objects.filter(is_superuser=True))


def test_the_environment_names_the_first_account(monkeypatch, no_terminal):
    monkeypatch.setenv("TAPROOT_ADMIN_USER", " operator ")
    monkeypatch.setenv("TAPROOT_ADMIN_PASSWORD", "a-chosen-pass-phrase")

    out, _ = run()

    (admin,) = superusers()
    assert admin.username == "operator"
    assert admin.is_staff
    assert admin.check_password("a-chosen-pass-phrase")
    assert "operator" in out
    assert "a-chosen-pass-phrase" not in out  # a password the operator chose is not echoed


def test_nothing_happens_when_a_superuser_exists(monkeypatch, no_terminal, django_user_model):
    django_user_model.objects.create_superuser(username="root", password="pw-root-123")
    monkeypatch.setenv("TAPROOT_ADMIN_USER", "operator")
    monkeypatch.setenv("TAPROOT_ADMIN_PASSWORD", "a-chosen-pass-phrase")

    assert run() == ("", "")
    assert [u.username for u in django_user_model.objects.all()] == ["root"]


def test_without_a_terminal_a_password_is_generated_and_printed_once(
    no_admin_variables, no_terminal
):
    out, _ = run()

    (admin,) = superusers()
    assert admin.username == "admin"
    shown = re.findall(r"shown only now: (\S+)", out)
    assert len(shown) == 1
    assert len(shown[0]) >= 20
    assert admin.check_password(shown[0])
    assert out.count(shown[0]) == 1
    # Later runs find the account and never show a password again.
    assert run() == ("", "")


def test_a_user_name_without_a_password_gets_a_generated_one(monkeypatch, no_terminal):
    monkeypatch.setenv("TAPROOT_ADMIN_USER", "ops")
    monkeypatch.delenv("TAPROOT_ADMIN_PASSWORD", raising=False)

    out, _ = run()

    (admin,) = superusers()
    assert admin.username == "ops"
    (password,) = re.findall(r"shown only now: (\S+)", out)
    assert admin.check_password(password)


def test_on_a_terminal_it_asks_until_the_password_is_confirmed_and_acceptable(
    monkeypatch, no_admin_variables
):
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "  carol  ")
    answers = iter(
        [
            "first-long-phrase-1",
            "does-not-match-it-2",  # mismatch: asked again
            "password",
            "password",  # too common and short: asked again
            "kettle-orbit-lantern-42",
            "kettle-orbit-lantern-42",
        ]
    )
    monkeypatch.setattr(ensure_admin.getpass, "getpass", lambda prompt: next(answers))

    out, err = run()

    (admin,) = superusers()
    assert admin.username == "carol"
    assert admin.check_password("kettle-orbit-lantern-42")
    assert "do not match" in err
    assert "too common" in err
    assert "kettle-orbit-lantern-42" not in out
    assert next(answers, None) is None


def test_on_a_terminal_an_empty_name_means_admin(monkeypatch, no_admin_variables):
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "")
    monkeypatch.setattr(ensure_admin.getpass, "getpass", lambda prompt: "kettle-orbit-lantern-42")

    run()

    (admin,) = superusers()
    assert admin.username == "admin"


def test_a_name_held_by_an_ordinary_account_is_refused(monkeypatch, no_terminal, user):
    monkeypatch.setenv("TAPROOT_ADMIN_USER", user.username)
    monkeypatch.setenv("TAPROOT_ADMIN_PASSWORD", "a-chosen-pass-phrase")

    with pytest.raises(CommandError, match="not a superuser"):
        run()

    user.refresh_from_db()
    assert not user.is_superuser
    assert user.check_password("pw-alice-123")
    assert superusers() == []
