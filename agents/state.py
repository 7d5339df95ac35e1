"""Typed agent state: a pydantic model whose fields declare how updates combine (reducers)."""

import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import pydantic

Reducer = Callable[[Any, Any], Any]


def replace(current: Any, update: Any) -> Any:
    """Keep the newest value (the default reducer)."""
    return update


def append(current: list[Any], update: list[Any]) -> list[Any]:
    """Add the update's items after the current ones."""
    return [*current, *update]


def add_messages(current: list[dict[str, Any]], update: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append messages; one whose id is already present replaces it in place (a human edit)."""
    merged = list(current)
    index = {message.get("id"): i for i, message in enumerate(merged)}
    for message in update:
        message = {"id": message.get("id") or new_message_id(), **message}
        if message["id"] in index:
            merged[index[message["id"]]] = message
        else:
            index[message["id"]] = len(merged)
            merged.append(message)
    return merged


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:16]}"


class State(pydantic.BaseModel):
    """Base for agent state. Declare fields with reducers: `Annotated[list[dict], add_messages]`.

    Bump `schema_version` when the fields change; `upgrades[v]` turns values stored at
    version v into values of version v + 1.
    """

    model_config = pydantic.ConfigDict(extra="forbid")
    schema_version: ClassVar[int] = 1
    upgrades: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}

    @classmethod
    def reducers(cls) -> dict[str, Reducer]:
        """Map every field to its reducer (from Annotated metadata; replace by default)."""
        found: dict[str, Reducer] = {}
        for name, info in cls.model_fields.items():
            found[name] = next((m for m in info.metadata if callable(m)), replace)
        return found

    @classmethod
    def apply(cls, values: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
        """Fold an update into stored values with each field's reducer; validate the result."""
        unknown = set(update) - set(cls.model_fields)
        if unknown:
            raise ValueError(f"update has fields the state does not declare: {sorted(unknown)}")
        reducers = cls.reducers()
        merged = dict(values)
        for name, value in update.items():
            merged[name] = reducers[name](merged[name], value) if name in merged else value
        return cls.model_validate(merged).model_dump(mode="json")

    @classmethod
    def upgrade(cls, values: dict[str, Any], *, from_version: int) -> dict[str, Any]:
        """Bring values stored at an older schema version up to the current one."""
        for version in range(from_version, cls.schema_version):
            if version not in cls.upgrades:
                raise ValueError(
                    f"{cls.__name__} has no upgrade from schema version {version} to {version + 1}"
                )
            values = cls.upgrades[version](values)
        return values
