"""Model fields of the checkpoints app."""

import json
from typing import Any

from django.db import models

from checkpoints.digest import canonical_json
from checkpoints.storage.crypto import current_sealer


class CompactJSONField(models.TextField):
    """JSON kept as compact text: smaller than jsonb for a small document nobody queries."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def get_prep_value(self, value: Any) -> str | None:
        return None if value is None else canonical_json(value)

    def value_to_string(self, obj: models.Model) -> str:
        return canonical_json(self.value_from_object(obj))


def open_json(stored: str) -> Any:
    """The value of an encrypted column's stored text: canonical JSON, or a Fernet token of it."""
    return json.loads(current_sealer().open(stored))


class EncryptedJSONField(models.TextField):
    """A JSON value (an object, a list or null) kept as canonical JSON text, encrypted with
    CHECKPOINT_ENCRYPTION_KEY when one is set. Reads plain and encrypted rows alike, so a key
    can be introduced at any time (`rotate_checkpoint_key` encrypts the rest). The database
    cannot look inside it: filter on other columns."""

    _pyi_private_set_type: Any  # django-stubs: any JSON value in, any out
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else open_json(value)

    def to_python(self, value: Any) -> Any:
        return open_json(value) if isinstance(value, str) else value  # a fixture's text

    def get_prep_value(self, value: Any) -> str | None:
        return None if value is None else current_sealer().seal(canonical_json(value))

    def value_to_string(self, obj: models.Model) -> str:
        return canonical_json(self.value_from_object(obj))


class EncryptedTextField(EncryptedJSONField):
    """Text encrypted like EncryptedJSONField. Stored as a JSON string, so text that happens to
    begin like a Fernet token ("gAAAA") is never mistaken for one."""

    def to_python(self, value: Any) -> Any:
        return value

    def value_to_string(self, obj: models.Model) -> str:
        return str(self.value_from_object(obj))
