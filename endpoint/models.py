"""The endpoint's own data: API keys for `/v1/*` (its conversations are simulator sessions)."""

from __future__ import annotations

from django.db import models

from gambit.core import new_id


def new_api_key_id() -> str:
    return new_id("key")


class ApiKey(models.Model):
    """A key for `/v1/*`. Only a hash of the key is stored; the key is shown once."""

    id = models.CharField(primary_key=True, max_length=40, default=new_api_key_id)
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the key")
    prefix = models.CharField(
        max_length=16, help_text="the key's first characters, to tell keys apart"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
