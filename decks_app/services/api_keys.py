"""API keys for `/v1/*` (DESIGN §8): every request needs `Authorization: Bearer <key>`.

Keys are created with `gambit keys create NAME` (printed once; only a sha256 digest is
stored) or given in the environment as `GAMBIT_API_KEYS` (comma-separated), which suits a
container or CI. There is no key-less mode: a deck runs code, so the endpoint is never open.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from django.utils import timezone

from decks_app.models import ApiKey

KEY_PREFIX = "gk-"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(name: str) -> tuple[ApiKey, str]:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKey.objects.create(name=name[:100], digest=_digest(key), prefix=key[:10])
    return record, key


def check_key(key: str | None) -> bool:
    if not key:
        return False
    for allowed in filter(
        None, (k.strip() for k in os.environ.get("GAMBIT_API_KEYS", "").split(","))
    ):
        if hmac.compare_digest(allowed, key):
            return True
    record = ApiKey.objects.filter(digest=_digest(key), revoked=False).first()
    if record is None:
        return False
    ApiKey.objects.filter(pk=record.pk).update(last_used_at=timezone.now())
    return True


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
