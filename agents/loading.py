"""Reading a stored state. Every reader (the step, the API, pages, fork, edit, diffs, replay)
goes through here, so a checkpoint stored at an older schema version is always seen at its
agent's current one, never in the shape it was stored in."""

import dataclasses
import logging
from typing import Any

from agents.graph import Agent
from agents.registry import UnknownAgent, registry
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData

logger = logging.getLogger(__name__)


def load_checkpoint(
    *, thread_id: str, checkpoint_id: str | None = None, agent: str | None = None
) -> CheckpointData:
    """Load a checkpoint (the head by default) with its values at its agent's current schema
    version. Pass the thread's agent name when known, to save a query."""
    backend = get_backend()
    checkpoint = backend.get(thread_id=thread_id, checkpoint_id=checkpoint_id)
    return upgraded(checkpoint, agent=agent or backend.get_thread(thread_id=thread_id).agent)


def upgraded(checkpoint: CheckpointData, *, agent: str) -> CheckpointData:
    """The checkpoint with its values upgraded. An unknown agent's, or one whose upgrade fails,
    is shown as stored (logged): a page must still render; writes then validate and refuse it."""
    try:
        definition = registry.get(agent)
        values = upgraded_values(definition, checkpoint.values, schema_version=checkpoint.schema_version)
    except UnknownAgent:
        return checkpoint
    except Exception:
        logger.warning(
            "checkpoint %s of thread %s cannot be upgraded from schema version %s",
            checkpoint.id,
            checkpoint.thread_id,
            checkpoint.schema_version,
            exc_info=True,
        )
        return checkpoint
    if values is checkpoint.values:
        return checkpoint
    return dataclasses.replace(checkpoint, values=values, schema_version=definition.state.schema_version)


def upgraded_values(agent: Agent, values: dict[str, Any], *, schema_version: int) -> dict[str, Any]:
    """Values stored at schema_version, brought to the agent's current version (the same object
    when already current). Raises when an upgrade is missing or fails."""
    if schema_version >= agent.state.schema_version:
        return values
    return agent.state.upgrade(values, from_version=schema_version)
