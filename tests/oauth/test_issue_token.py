"""`manage.py issue_token`: a token for local clients that /mcp accepts for that user."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_bridge.auth import find_access_token
from oauth.tokens import LOCAL_APPLICATION_NAME
from tests.store import unchanged


def issue(**options):
    out, err = StringIO(), StringIO()
    call_command("issue_token", stdout=out, stderr=err, **options)
    return out.getvalue().strip(), err.getvalue()


@pytest.mark.django_db
def test_the_token_is_printed_once_and_stored_only_as_a_checksum(user, settings):
    raw, note = issue(user="alice", days=7)
    assert raw and "\n" not in raw
    assert "shown only now" in note
    stored = get_access_token_model().objects.get()
    assert stored.token == ""
    assert raw not in stored.token_checksum
    assert stored.resource == [settings.TAPROOT_MCP_URL]
    assert stored.scope == "mcp"
    access = find_access_token(raw)
    assert access is not None
    assert access.subject == str(user.pk)


@pytest.mark.django_db
def test_tokens_for_one_user_share_one_local_application(user):
    issue(user="alice")
    issue(user="alice")
    assert get_access_token_model().objects.count() == 2
    assert get_application_model().objects.filter(name=LOCAL_APPLICATION_NAME).count() == 1


@pytest.mark.django_db
def test_unknown_inactive_users_and_silly_lifetimes_are_refused(user, django_user_model):
    with unchanged(), pytest.raises(CommandError, match="No user named 'nobody'"):
        issue(user="nobody")
    with unchanged(), pytest.raises(CommandError, match="between 1 and 366"):
        issue(user="alice", days=0)
    django_user_model.objects.create_user(username="gone", is_active=False)
    with unchanged(), pytest.raises(CommandError, match="inactive"):
        issue(user="gone")
    assert not get_access_token_model().objects.exists()
