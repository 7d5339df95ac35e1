"""Canonical JSON and the SHA-256 digests that guard every checkpoint.

A checkpoint's digest is a hash over per-field digests, so a write hashes only new data:

- a plain value's digest is SHA-256 of its canonical JSON;
- a list's digest is a hash chain over its items: chain(prefix + [item]) =
  SHA-256(chain(prefix) || canonical JSON of item), starting from LIST_SEED for [].

Digests are 32 bytes; stored references spell them in unpadded base64url (43 characters).
"""

import base64
import hashlib
import json
from typing import Any

LIST_SEED = hashlib.sha256(b"[]").digest()
"""The chain digest of the empty list."""

KEY_BYTES = 16
"""Stored rows are keyed by a digest's first 16 bytes: unique enough within a thread (a UUID's
width), and loads still check every full digest."""


# One encoder for every call: json.dumps with options builds a new one each time.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """Serialize deterministically: sorted keys, no whitespace, UTF-8 kept as is."""
    return _ENCODER.encode(value)


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON of value, UTF-8 encoded: what is hashed and stored."""
    return canonical_json(value).encode()


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def chain(prefix: bytes, item: bytes) -> bytes:
    """Extend a list's chain digest by one item, given the item's canonical bytes."""
    return hashlib.sha256(prefix + item).digest()


def row_key(digest: bytes) -> bytes:
    """The key of the row that holds a value or list item with this (chain) digest."""
    return digest[:KEY_BYTES]


def encode_digest(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def decode_digest(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def list_digest(items: list[Any]) -> bytes:
    """The chain digest of a whole list (for checks and imports; writes extend a stored chain)."""
    digest = LIST_SEED
    for item in items:
        digest = chain(digest, canonical_bytes(item))
    return digest


def field_digest(value: Any) -> Any:
    """What a field contributes to its checkpoint's digest: [chain digest, length] for a
    list, else the SHA-256 of the value's canonical JSON (base64url)."""
    if isinstance(value, list):
        return [encode_digest(list_digest(value)), len(value)]
    return encode_digest(sha256(canonical_bytes(value)))


def checkpoint_digest(
    *,
    thread_id: str,
    step: int,
    source: str,
    node: str,
    next: list[str],
    created_by: str,
    schema_version: int,
    metadata: dict[str, Any],
    fields: dict[str, Any],
) -> str:
    """Hash a checkpoint from its header and its per-field digests (see field_digest).

    The parent is left out on purpose: retention re-links a checkpoint to its nearest kept
    ancestor when the one between them is pruned.
    """
    body = {
        "thread": thread_id,
        "step": step,
        "source": str(source),
        "node": node,
        "next": next,
        "created_by": created_by,
        "schema_version": schema_version,
        "metadata": metadata,
        "fields": fields,
    }
    return hashlib.sha256(canonical_bytes(body)).hexdigest()
