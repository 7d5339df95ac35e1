"""Where a run or an update of the LangGraph server API says to go on from: the checkpoint a
client names, and the ids a run's `config` may carry (anything else it sets is refused)."""

from typing import Any

from agents.actions import InvalidInput

SERVED_CONFIGURABLE = ("thread_id", "checkpoint_id", "checkpoint_ns")
"""What a run's config may name: its thread and checkpoint (LangGraph's own clients send them)."""


def config_checkpoint(config: dict[str, Any] | None, *, thread_id: str) -> str | None:
    """The checkpoint a run's config names. Anything else it sets (a `recursion_limit`, tags, a
    `configurable` value the graph would read) is refused: the run would go on without it."""
    given = {k: v for k, v in (config or {}).items() if v not in (None, "", [], {})}
    configurable = given.pop("configurable", {})
    if not isinstance(configurable, dict):
        raise InvalidInput({"config.configurable": "an object"})
    ids = {k: v for k, v in configurable.items() if v not in (None, "")}  # checkpoint_ns "": the root graph
    unserved = [f"config.{k}" for k in given] + [
        f"config.configurable.{k}" for k in ids if k not in SERVED_CONFIGURABLE
    ]
    if unserved:
        raise InvalidInput({name: "not served by this server; nothing was done" for name in unserved})
    if ids.get("thread_id", thread_id) != thread_id:
        raise InvalidInput({"config.configurable.thread_id": "another thread than the run's"})
    if "checkpoint_ns" in ids:
        raise InvalidInput({"config.configurable.checkpoint_ns": "only the graph's own ('') is served"})
    checkpoint_id = ids.get("checkpoint_id")
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise InvalidInput({"config.configurable.checkpoint_id": "a checkpoint id"})
    return checkpoint_id


def named_checkpoint(checkpoint_id: str | None, checkpoint: dict[str, Any] | None) -> str | None:
    """The checkpoint a client names: an id, or a state's `checkpoint` as this server returned it."""
    given = checkpoint or {}
    return checkpoint_id or given.get("gatehouse_checkpoint") or given.get("checkpoint_id") or None
