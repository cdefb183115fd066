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
