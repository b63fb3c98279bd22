"""Signed snapshots: an HMAC-SHA256 over a snapshot's canonical JSON, so a server can trust what it issued.

A snapshot that crosses a process or a network is untrusted input. Every env validates a restored
state (docs/design.md "Snapshots"), but a state that is well formed and consistent can still be
one the client never reached. A server that signs the snapshots it hands out (``state``) and
refuses unsigned or altered ones (``reset``) restores only episodes it played itself::

    key = resolve_key(None)                   # $GACA_SNAPSHOT_KEY, else a random key
    signed = sign(snapshot.to_dict(), key)    # the dict plus "signature": 64 hex digits
    plain = verify(signed, key)               # the dict without "signature"; ValueError if altered

The signature covers every field of the snapshot dict except ``signature`` itself, written as
canonical JSON (sorted keys, no spaces, UTF-8), so the dict may travel through any JSON encoder
that keeps its values. Nothing here keeps state: a key is a value its owner passes around.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from typing import Any

SIGNATURE_FIELD = "signature"
KEY_ENV_VAR = "GACA_SNAPSHOT_KEY"
MIN_KEY_BYTES = 16
_KEY_HINT = "generate one with: python -c 'import secrets; print(secrets.token_hex(32))'"


def new_key() -> bytes:
    """A fresh random key (32 bytes from :mod:`secrets`)."""
    return secrets.token_bytes(32)


def resolve_key(key: str | bytes | None, environ: Mapping[str, str] | None = None) -> bytes:
    """The signing key a server uses: ``key`` if given, else ``$GACA_SNAPSHOT_KEY``, else a random one.

    A random key lives as long as the server that drew it: its snapshots restore on that server
    only. Servers that must accept each other's snapshots (several processes or nodes of one
    deployment) share a deployment key, given as ``key`` or in the environment variable.

    Args:
        key: a deployment key (a str is read as UTF-8), or None.
        environ: where to look for ``GACA_SNAPSHOT_KEY`` (default ``os.environ``).

    Returns:
        The key as bytes.

    Raises:
        ValueError: for a key shorter than 16 bytes, or one that is neither str nor bytes.
    """
    source = "snapshot key"
    if key is None:
        key = (os.environ if environ is None else environ).get(KEY_ENV_VAR) or None
        source = f"${KEY_ENV_VAR}"
        if key is None:
            return new_key()
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes):
        raise ValueError(f"{source} must be a str or bytes, got {type(key).__name__}")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{source} must have at least {MIN_KEY_BYTES} bytes, got {len(key)}; {_KEY_HINT}")
    return key


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes: sorted keys, no spaces, UTF-8, no NaN or infinity.

    Raises:
        ValueError: if ``value`` holds something JSON cannot carry (NaN, a non-JSON type).
    """
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"a signed snapshot must hold JSON values only: {e}") from e
    return text.encode("utf-8")


def _digest(snapshot: Mapping[str, Any], key: bytes) -> str:
    body = {k: v for k, v in snapshot.items() if k != SIGNATURE_FIELD}
    return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()


def sign(snapshot: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """``snapshot`` (an ``EnvSnapshot.to_dict()`` value) with a ``signature`` field for ``key``.

    An existing signature is replaced.

    Raises:
        ValueError: if ``snapshot`` is not a mapping or holds non-JSON values.
    """
    if not isinstance(snapshot, Mapping):
        raise ValueError(f"a snapshot to sign must be a dict, got {type(snapshot).__name__}")
    body = {k: v for k, v in snapshot.items() if k != SIGNATURE_FIELD}
    return {**body, SIGNATURE_FIELD: _digest(body, key)}


def is_signed(snapshot: Any) -> bool:
    """Whether ``snapshot`` is a mapping with a ``signature`` field (not whether the signature is good)."""
    return isinstance(snapshot, Mapping) and snapshot.get(SIGNATURE_FIELD) is not None


def verify(snapshot: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """Checks ``snapshot``'s signature against ``key``; returns the snapshot without it.

    Raises:
        ValueError: if ``snapshot`` is not a mapping, has no signature, or its signature does not
            match its fields (altered, or signed by another server or key). The message says
            nothing about the key or the expected signature.
    """
    if not isinstance(snapshot, Mapping):
        raise ValueError(f"a signed snapshot must be a dict, got {type(snapshot).__name__}")
    signature = snapshot.get(SIGNATURE_FIELD)
    if signature is None:
        raise ValueError(
            "snapshot field signature is missing: this server restores only the snapshots it signed; "
            "save the episode on this server (its state) and restore that"
        )
    expected = _digest(snapshot, key).encode("ascii")
    if not isinstance(signature, str) or not hmac.compare_digest(signature.encode("utf-8"), expected):
        raise ValueError(
            "snapshot field signature does not match the snapshot: it was altered, or signed by another server "
            "or key; restore a snapshot this server (or one sharing its snapshot key) saved, unchanged"
        )
    return {k: v for k, v in snapshot.items() if k != SIGNATURE_FIELD}
