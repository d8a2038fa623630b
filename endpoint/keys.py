"""API keys for `/v1/*` (docs/endpoint.md, "Keys"): every request needs `Authorization:
Bearer <key>`.

Keys are created with `gambit keys create NAME` (printed once; only a sha256 digest is
stored) or given in the environment as `GAMBIT_API_KEYS` (comma-separated), which suits a
container or CI. There is no key-less mode: a deck runs code, so the endpoint is never open.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import os
import secrets

from django.utils import timezone
from django.utils.crypto import salted_hmac

from endpoint.models import ApiKey

KEY_PREFIX = "gk-"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(name: str) -> tuple[ApiKey, str]:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKey.objects.create(name=name[:100], digest=_digest(key), prefix=key[:10])
    return record, key


# `last_used_at` is written at most this often per key (a write per call would put every
# call behind the database's write lock).
TOUCH_EVERY = dt.timedelta(seconds=60)


def environment_key(key: str | None) -> bool:
    """A key from `GAMBIT_API_KEYS` (no database involved)."""
    if not key:
        return False
    allowed = (k.strip() for k in os.environ.get("GAMBIT_API_KEYS", "").split(","))
    return any(hmac.compare_digest(a, key) for a in allowed if a)


def stored_key(key: str | None) -> ApiKey | None:
    """The active key record for `key` (a read only), or None."""
    if not key:
        return None
    return (
        ApiKey.objects.filter(digest=_digest(key), revoked=False).only("pk", "last_used_at").first()
    )


def touch(record: ApiKey) -> None:
    """Note that `record` was used (unless that was noted less than a minute ago)."""
    now = timezone.now()
    if record.last_used_at is None or now - record.last_used_at >= TOUCH_EVERY:
        ApiKey.objects.filter(pk=record.pk).update(last_used_at=now)


def owner(key: str, record: ApiKey | None) -> str:
    """Who a call belongs to: the stored key's id (`key-...`), or for a key of
    `GAMBIT_API_KEYS` an HMAC of it under the server's secret key (`env-<24 hex>`; the key
    itself, which may be short, is never stored). Responses and routed sessions are kept
    per owner: one key cannot read, continue or delete another's."""
    if record is not None:
        return record.id
    return "env-" + salted_hmac("gambit.api_keys.owner", key, algorithm="sha256").hexdigest()[:24]


def check_key(key: str | None) -> bool:
    if environment_key(key):
        return True
    record = stored_key(key)
    if record is None:
        return False
    touch(record)
    return True


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
