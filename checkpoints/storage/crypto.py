"""Encryption at rest with Fernet (cryptography): CHECKPOINT_ENCRYPTION_KEY, comma-separated.

The first key encrypts, every key decrypts, so keys rotate by prepending a new one and
running `manage.py rotate_checkpoint_key`. Stored data is text: canonical JSON, or a Fernet
token, which always begins with "gAAAA" (its version byte 0x80) where JSON never begins
with "g", so plaintext and ciphertext live side by side while a key is being introduced.
"""

from functools import lru_cache
from itertools import repeat

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

TOKEN_PREFIX = "gAAAA"


class SealError(Exception):
    """Stored data could not be decrypted: no key, the wrong key, or tampered ciphertext."""


def failed_decryption(exc: BaseException | None) -> bool:
    """Whether a SealError is `exc` or among its causes (a store wraps it in its own error)."""
    while exc is not None:
        if isinstance(exc, SealError):
            return True
        exc = exc.__cause__
    return False


def is_sealed(stored: str) -> bool:
    return stored.startswith(TOKEN_PREFIX)


class Sealer:
    """Encrypt (seal) and decrypt (open) stored bytes; a no-op without keys."""

    def __init__(self, keys: list[str]) -> None:
        try:
            self._fernet = MultiFernet([Fernet(key) for key in keys]) if keys else None
        except ValueError as exc:
            raise ImproperlyConfigured(
                "CHECKPOINT_ENCRYPTION_KEY must be comma-separated Fernet keys "
                "(make one with `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            ) from exc

    @property
    def encrypts(self) -> bool:
        return self._fernet is not None

    def seal(self, plain: str) -> str:
        if self._fernet is None:
            return plain
        return self._fernet.encrypt(plain.encode()).decode()

    def open(self, stored: str) -> str:
        if not is_sealed(stored):
            return stored
        if self._fernet is None:
            # A configuration error, not corruption: say so rather than "tampered".
            raise ImproperlyConfigured(
                "stored checkpoint data is encrypted but CHECKPOINT_ENCRYPTION_KEY is not set"
            )
        try:
            return self._fernet.decrypt(stored.encode()).decode()
        except InvalidToken as exc:
            raise SealError("the data failed decryption (wrong key or tampered)") from exc

    def seal_bytes(self, plain: bytes) -> bytes:
        return plain if self._fernet is None else self._fernet.encrypt(plain)

    def open_bytes(self, stored: bytes) -> bytes:
        """Decrypt a token from seal_bytes; other bytes pass through (callers' plaintext never
        begins with the token prefix: checkpoints.langgraph prefixes a serde type name)."""
        return self._open_token(stored) if stored.startswith(TOKEN_PREFIX.encode()) else stored

    def _open_token(self, stored: bytes) -> bytes:
        if self._fernet is None:
            raise ImproperlyConfigured(
                "stored checkpoint data is encrypted but CHECKPOINT_ENCRYPTION_KEY is not set"
            )
        try:
            return self._fernet.decrypt(stored)
        except InvalidToken as exc:
            raise SealError("the data failed decryption (wrong key or tampered)") from exc

    def open_all(self, stored: list[str]) -> list[str]:
        """Decrypt what is encrypted; plaintext passes through (a list without a copy)."""
        if self._fernet is None and not any(map(str.startswith, stored, repeat(TOKEN_PREFIX))):
            return stored
        return [self.open(item) for item in stored]

    def reseal(self, stored: str) -> str:
        """Re-encrypt with the first key; plaintext gets encrypted, nothing changes without keys."""
        if self._fernet is None:
            return stored
        if not is_sealed(stored):
            return self.seal(stored)
        try:
            return self._fernet.rotate(stored.encode()).decode()
        except InvalidToken as exc:
            raise SealError("the data failed decryption (wrong key or tampered)") from exc


@lru_cache(maxsize=8)
def _sealer_for(keys: str) -> Sealer:
    return Sealer([key.strip() for key in keys.split(",") if key.strip()])


def current_sealer() -> Sealer:
    """The sealer for the configured keys (read on every call, so settings overrides apply)."""
    return _sealer_for(getattr(settings, "CHECKPOINT_ENCRYPTION_KEY", "") or "")
