from django.db import models
from rest_framework_api_key.models import APIKey


class KeyScope(models.TextChoices):
    PARTNER = "partner", "Partner system"
    SHOP = "shop", "Shop"


class ApiKeyScope(models.Model):
    """Which operations an API key may call: the partner system's or the shop's.

    A key without a row is a partner key (every key made before scopes existed is one).
    """

    api_key = models.OneToOneField(
        APIKey, on_delete=models.CASCADE, primary_key=True, related_name="scope"
    )
    scope = models.CharField(max_length=16, choices=KeyScope.choices, default=KeyScope.PARTNER)

    class Meta:
        verbose_name = "API key scope"

    def __str__(self) -> str:
        return self.scope


def key_scope(api_key: APIKey) -> str:
    """The scope of a key (partner when it has no scope row)."""
    try:
        return api_key.scope.scope
    except ApiKeyScope.DoesNotExist:
        return KeyScope.PARTNER


class AuthFailureCount(models.Model):
    """Requests with an invalid API key from one address in one window of AUTH_FAILURE_RATE.

    In the database the service already has, so that the limit holds once for every worker
    process and every app server, and survives a worker's restart.
    """

    address = models.CharField(max_length=64)
    # The window's number: its start in seconds divided by the rate's period.
    period = models.BigIntegerField()
    failures = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = (
            models.UniqueConstraint(fields=("address", "period"), name="auth_failure_window"),
        )
        verbose_name = "authentication failure count"

    def __str__(self) -> str:
        return f"{self.address}: {self.failures}"
