"""How a LangGraph checkpoint's channel values are stored, in plain Python.

- A list channel (messages) is a persistent list: one row per item, keyed by the list's hash
  chain up to it, so appending to the parent's list stores only the new items and a fork
  shares its prefix. Items are serialized one by one with the saver's serde.
- Any other channel is content-addressed: one row keyed by the SHA-256 of its serialized
  bytes, written once per thread however many checkpoints hold it; a short one (a counter) is
  held in the checkpoint's refs instead.
- A list item's row holds no bytes, only REF + the content key of the item, and a pending write
  of a list (what a node returns for `messages`) is REF + its items' content keys: the message a
  node wrote and the same message in the next checkpoint's list are one row.
- Stored bytes are zlib-compressed where that makes them smaller, or sealed when encrypting.
"""

import base64
import binascii
import hashlib
import zlib
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from checkpoints.digest import KEY_BYTES, LIST_SEED, decode_digest, encode_digest
from checkpoints.storage.crypto import Sealer

VALUE, LIST, INLINE = "v", "l", "i"
INLINE_UP_TO = 32
"""A value's serialized bytes up to this long live in its checkpoint's refs (a counter, a flag)
rather than in a row of their own."""
REF = b"\0"
"""Prefix of stored data that names content rows instead of holding bytes (serde bytes begin with
a type name, Fernet tokens with "gAAAA": neither with NUL)."""

PACKED = b"\1"
"""Prefix of zlib-compressed bytes. Postgres compresses only rows over 2 KB (it does so for
PostgresSaver's whole-list rows); a message is a row of its own and smaller."""
PACK_FROM = 128
"""Shorter bytes are stored as they are: zlib saves little on them."""


class Tampered(Exception):
    """Stored bytes do not match their digest, or a row is missing."""


def pack(sealer: Sealer, plain: bytes) -> bytes:
    """What is stored for plain bytes: sealed when encrypting, else zlib-compressed when that is
    smaller. Sealed bytes are never compressed first: an item's length would tell of its content."""
    if sealer.encrypts:
        return sealer.seal_bytes(plain)
    if len(plain) >= PACK_FROM and len(packed := PACKED + _compress(plain)) < len(plain):
        return packed
    return plain


def _compress(plain: bytes) -> bytes:
    # A window no wider than the input and a small hash table: zlib's defaults (32 KB, memLevel 8)
    # take longer to set up (~60 µs) than a message takes to compress, for the same output.
    packer = zlib.compressobj(6, zlib.DEFLATED, max(9, min(15, len(plain).bit_length())), 2)
    return packer.compress(plain) + packer.flush()


def unpack(sealer: Sealer, stored: bytes) -> bytes:
    """The plain bytes of pack()'s result (or of bytes stored before compression)."""
    if not stored.startswith(PACKED):
        return sealer.open_bytes(stored)
    try:
        return zlib.decompress(stored[1:])
    except zlib.error as exc:
        raise Tampered("stored bytes do not decompress") from exc


def encode(serde: SerializerProtocol, value: Any) -> bytes:
    """The serde's typed bytes as one blob: b"<type>\\0<payload>" (never a Fernet token's prefix)."""
    type_, payload = serde.dumps_typed(value)
    return type_.encode() + b"\0" + payload


def decode(serde: SerializerProtocol, plain: bytes) -> Any:
    type_, _, payload = plain.partition(b"\0")
    return serde.loads_typed((type_.decode(), payload))


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@dataclass(frozen=True)
class BlobRow:
    key: bytes
    prev: bytes | None
    data: bytes


@dataclass
class Chain:
    """A stored list as the writer of the next checkpoint needs it."""

    items: list[Any]
    """The objects last written or loaded (compared by identity first)."""
    keys: list[bytes]
    """The full chain digest up to and including each item."""

    @property
    def digest(self) -> bytes:
        return self.keys[-1] if self.keys else LIST_SEED


def shared_prefix(serde: SerializerProtocol, old: Chain, new: list[Any]) -> int:
    """How many leading items of `new` the stored list already holds. The same object counts as
    unchanged (LangGraph's reducers build new lists of the same messages, never mutating them);
    another object is compared by its serialized bytes, so 1 and True never pass for each other."""
    for i in range(min(len(old.items), len(new))):
        if old.items[i] is new[i]:
            continue
        prev = old.keys[i - 1] if i else LIST_SEED
        if sha256(prev + encode(serde, new[i])) != old.keys[i]:
            return i
    return min(len(old.items), len(new))


def grow(
    serde: SerializerProtocol, sealer: Sealer, old: Chain | None, new: list[Any]
) -> tuple[Chain, list[BlobRow]]:
    """The chain of `new`, and the rows it adds to `old`'s."""
    shared = shared_prefix(serde, old, new) if old is not None else 0
    keys = old.keys[:shared] if old is not None else []
    rows = []
    for item in new[shared:]:
        plain = encode(serde, item)
        prev = keys[-1] if keys else None
        keys.append(sha256((prev or LIST_SEED) + plain))
        content = content_row(sealer, plain)
        rows.append(content)
        rows.append(BlobRow(keys[-1][:KEY_BYTES], prev[:KEY_BYTES] if prev else None, REF + content.key))
    return Chain(items=list(new), keys=keys), rows


def content_row(sealer: Sealer, plain: bytes) -> BlobRow:
    return BlobRow(sha256(plain)[:KEY_BYTES], None, pack(sealer, plain))


def write_rows(serde: SerializerProtocol, sealer: Sealer, value: Any) -> tuple[bytes, bytes, list[BlobRow]]:
    """A pending write's stored data, the bytes its digest covers, and the content rows it names
    (a list's items, stored once and shared with the list channel they are appended to)."""
    if type(value) is not list:
        plain = encode(serde, value)
        return pack(sealer, plain), plain, []
    rows = [content_row(sealer, encode(serde, item)) for item in value]
    data = REF + b"".join(r.key for r in rows)
    return data, data, rows


def write_keys(data: bytes) -> list[bytes]:
    """The content keys a stored write names ([] for a write that holds its bytes)."""
    if not data.startswith(REF):
        return []
    return [data[i : i + KEY_BYTES] for i in range(1, len(data), KEY_BYTES)]


def read_write(
    data: bytes, blobs: dict[bytes, tuple[bytes | None, bytes]], *, serde: SerializerProtocol, sealer: Sealer
) -> tuple[bytes, Any]:
    """(the bytes its digest covers, the value) of a stored write; raise Tampered if an item is
    missing or does not match its key."""
    if not data.startswith(REF):
        plain = unpack(sealer, data)
        return plain, decode(serde, plain)
    items = []
    for key in write_keys(data):
        if key not in blobs:
            raise Tampered("a pending write's item is missing")
        plain = unpack(sealer, blobs[key][1])
        if sha256(plain)[:KEY_BYTES] != key:
            raise Tampered("a pending write's item does not match its key")
        items.append(decode(serde, plain))
    return data, items


def stored_value(sealer: Sealer, plain: bytes) -> tuple[list[Any], BlobRow | None]:
    """A value's ref, and the row that holds it: a short value is held in the ref itself (the
    checkpoint's digest covers it), unless encrypting."""
    if len(plain) <= INLINE_UP_TO and not sealer.encrypts:
        return [INLINE, base64.b64encode(plain).decode()], None
    digest = sha256(plain)
    return [VALUE, encode_digest(digest)], BlobRow(digest[:KEY_BYTES], None, pack(sealer, plain))


def inherited_ref(sealer: Sealer, ref: list[Any]) -> tuple[list[Any], BlobRow | None]:
    """A parent's ref as a child that did not change the value holds it, and the row to add: a
    value held in the parent's refs was written before a key was set, so when encrypting it moves
    into a sealed row rather than being copied into a new checkpoint in plain."""
    if ref[0] != INLINE or not sealer.encrypts:
        return ref, None
    return stored_value(sealer, inline_bytes(ref))


def inline_bytes(ref: list[Any]) -> bytes:
    """The serialized bytes a ref holds (raise Tampered if they are not base64)."""
    try:
        return base64.b64decode(ref[1], validate=True)
    except (binascii.Error, TypeError, IndexError) as exc:
        raise Tampered("a value held in a checkpoint's refs is malformed") from exc


def digest_refs(refs: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The refs as a checkpoint's digest covers them: a value held in its ref counts as the
    digest of its bytes, like a stored one, so moving it into a row keeps the digest."""
    return {
        name: [VALUE, encode_digest(sha256(inline_bytes(ref)))] if ref[0] == INLINE else ref
        for name, ref in refs.items()
    }


def list_ref(chain: Chain) -> list[Any]:
    return [LIST, encode_digest(chain.digest), len(chain.keys)]


def starts(refs: dict[str, list[Any]]) -> list[bytes]:
    """The row keys a checkpoint's values are read from (values, and list tails)."""
    return [
        decode_digest(ref[1])[:KEY_BYTES]
        for ref in refs.values()
        if ref[0] == VALUE or (ref[0] == LIST and ref[2])
    ]


def read_values(
    refs: dict[str, list[Any]],
    rows: dict[bytes, tuple[bytes | None, bytes]],
    *,
    serde: SerializerProtocol,
    sealer: Sealer,
) -> tuple[dict[str, Any], dict[str, Chain], dict[str, bytes]]:
    """Decode every channel, checking each value and each list's chain; raise Tampered on a mismatch.
    Returns the values, the lists' chains and the other values' serialized bytes."""
    values: dict[str, Any] = {}
    chains: dict[str, Chain] = {}
    plains: dict[str, bytes] = {}
    try:
        for name, ref in refs.items():
            if ref[0] == INLINE:
                plains[name] = inline_bytes(ref)
                values[name] = decode(serde, plains[name])
                continue
            digest = decode_digest(ref[1])
            if ref[0] == VALUE:
                plain = unpack(sealer, rows[digest[:KEY_BYTES]][1])
                if sha256(plain) != digest:
                    raise Tampered(f"channel {name!r} does not match its digest")
                values[name], plains[name] = decode(serde, plain), plain
                continue
            chain = _read_chain(rows, tail=digest, length=int(ref[2]), serde=serde, sealer=sealer)
            values[name], chains[name] = list(chain.items), chain
    except KeyError as exc:
        raise Tampered("a stored value is missing") from exc
    except Exception as exc:  # decryption, a malformed reference or payload
        if isinstance(exc, Tampered):
            raise
        raise Tampered(str(exc)) from exc
    return values, chains, plains


def _read_chain(
    rows: dict[bytes, tuple[bytes | None, bytes]],
    *,
    tail: bytes,
    length: int,
    serde: SerializerProtocol,
    sealer: Sealer,
) -> Chain:
    stored: list[bytes] = []
    key = tail[:KEY_BYTES] if length else None
    while key is not None:
        if len(stored) == length:
            raise Tampered("a list is longer than recorded")
        key, data = rows[key]
        if data.startswith(REF):
            raise Tampered("a list item's content is missing")
        stored.append(data)
    stored.reverse()
    keys, digest = [], LIST_SEED
    plains = [unpack(sealer, data) for data in stored]
    for plain in plains:
        digest = sha256(digest + plain)
        keys.append(digest)
    if len(keys) != length or (keys and keys[-1] != tail):
        raise Tampered("a list does not match its chain digest")
    return Chain(items=[decode(serde, plain) for plain in plains], keys=keys)
