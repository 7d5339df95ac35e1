"""Model fields of the checkpoints app."""

import json
from typing import Any

from django.db import models

from checkpoints.digest import canonical_json


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
