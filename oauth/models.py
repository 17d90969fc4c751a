"""What Taproot keeps beside django-oauth-toolkit's own tables."""

from django.conf import settings
from django.db import models


class ExchangedCode(models.Model):
    """An authorization code that has been exchanged, and the tokens it gave.

    django-oauth-toolkit deletes a code's grant when the code is exchanged and keeps
    nothing that leads from a token back to it. RFC 6749 §4.1.2 asks that a code presented
    twice also revoke what it gave, so the exchange records it here, in the transaction
    that saves the tokens. Only the code's SHA-256 is kept, never the code. The record goes
    when its client does (cleanup_oauth_clients).
    """

    code_checksum = models.CharField(max_length=64, unique=True)
    application = models.ForeignKey(
        "oauth2_provider.Application", on_delete=models.CASCADE, related_name="+"
    )
    access_token = models.ForeignKey(
        "oauth2_provider.AccessToken",
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Rotation hands each new refresh token its predecessor's family, so the family reaches
    # every token that descends from this code.
    token_family = models.UUIDField(null=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Exchanged code #{self.pk}"


class LoginFailure(models.Model):
    """A failed sign-in, kept to slow down guessing one account from many addresses
    (taproot_site.login) and to tell the owner about it when they next sign in. The
    address is the network: an IPv6 /64 counts as one, since one host holds all of it."""

    username = models.CharField(max_length=150)
    network = models.CharField(max_length=64, blank=True)
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["username", "at"])]

    def __str__(self) -> str:
        return f"{self.username} from {self.network or 'an unknown address'} at {self.at}"


class ClientCall(models.Model):
    """One MCP tool call a client made for a user, kept so the person can see what Claude
    last did (the clients page). Only the last CALLS_KEPT per user and client stay
    (oauth.activity); never arguments, replies or token material."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(
        "oauth2_provider.Application", on_delete=models.CASCADE, related_name="+"
    )
    called_at = models.DateTimeField()
    tool = models.CharField(max_length=64)
    ok = models.BooleanField()

    class Meta:
        indexes = [models.Index(fields=["user", "application", "id"])]

    def __str__(self) -> str:
        return f"{self.tool} at {self.called_at} ({'ok' if self.ok else 'error'})"


class RefusalReason(models.TextChoices):
    EXPIRED = "expired", "its access token had expired"
    INACTIVE = "inactive", "this account is deactivated"
    WRONG_RESOURCE = "wrong_resource", "its token was issued for another server address"


class ClientRefusal(models.Model):
    """The last time /mcp refused a client's token for a user, and why. Only refusals
    whose token still names its user are kept: a revoked or unknown token names nobody."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(
        "oauth2_provider.Application", on_delete=models.CASCADE, related_name="+"
    )
    refused_at = models.DateTimeField()
    reason = models.CharField(max_length=20, choices=RefusalReason.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "application"], name="one_refusal_per_client")
        ]

    def __str__(self) -> str:
        return f"Refused at {self.refused_at}: {self.get_reason_display()}"
