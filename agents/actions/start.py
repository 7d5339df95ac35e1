"""Start threads, record decisions, resume after gates."""

import json
import re
import uuid
from typing import Any

import pydantic
from django.conf import settings
from django.db import transaction

from agents.graph import Agent
from agents.registry import registry
from agents.runtime import DECISION_PREFIX, after_commit
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint, ThreadData
from checkpoints.models import CheckpointSource, ThreadStatus

THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$")


class InvalidInput(ValueError):
    """Bad input from a user; `errors` maps field names to messages. Nothing was changed."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def check_start_thread(*, agent: str, text: str, thread_id: str | None) -> Agent:
    """Validate a request to start a thread; return the agent."""
    errors = {}
    if agent not in registry.names():
        errors["agent"] = f"unknown agent {agent!r}; choose one of: {', '.join(registry.names())}"
    if not text.strip():
        errors["input"] = "must not be empty"
    elif len(text) > settings.MAX_INPUT_CHARS:
        errors["input"] = f"is {len(text)} characters; the limit is {settings.MAX_INPUT_CHARS}"
    if thread_id is not None and not THREAD_ID.match(thread_id):
        errors["thread_id"] = (
            "use 1-100 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
        )
    if errors:
        raise InvalidInput(errors)
    return registry.get(agent)


def check_state(agent: Agent, values: Any) -> dict[str, Any]:
    """Validate a whole state against the agent's schema; return it as stored JSON."""
    if not isinstance(values, dict):
        raise InvalidInput({"values": "must be a JSON object"})
    size = len(json.dumps(values))
    if size > settings.MAX_STATE_BYTES:
        raise InvalidInput({"values": f"is {size:,} bytes; the limit is {settings.MAX_STATE_BYTES:,}"})
    try:
        return agent.state.model_validate(values).model_dump(mode="json")
    except pydantic.ValidationError as exc:
        raise InvalidInput(
            {".".join(str(p) for p in e["loc"]) or "values": e["msg"] for e in exc.errors()}
        ) from exc


def do_start_thread(*, agent: Agent, text: str, thread_id: str | None, actor: str) -> ThreadData:
    """Create a thread with an input checkpoint and enqueue its first step on commit."""
    thread_id = thread_id or f"{agent.name}-{uuid.uuid4().hex[:12]}"
    with transaction.atomic():
        thread, first = get_backend().create_thread(
            thread_id=thread_id,
            agent=agent.name,
            first=NewCheckpoint(
                values=agent.initial_values(text),
                source=CheckpointSource.INPUT,
                next=[agent.start],
                created_by=actor,
                schema_version=agent.state.schema_version,
            ),
            status=ThreadStatus.RUNNING,
            metadata={"offline_model": bool(settings.OFFLINE_MODEL)},
        )
        after_commit(thread_id=thread.id, checkpoint_id=first.id, status=ThreadStatus.RUNNING)
    return thread


def do_record_decision(*, thread_id: str, checkpoint_id: str, key: str, decision: dict[str, Any]) -> None:
    """Store a human decision for the gate `key` at a checkpoint, for the resuming step to apply.
    Call inside the deciding transaction, with the thread locked."""
    get_backend().put_write(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        task_id=DECISION_PREFIX + key,
        kind="decision",
        value=decision,
    )


def do_resume_after_gates(*, thread_id: str, checkpoint_id: str) -> bool:
    """Set a waiting thread running again from checkpoint_id once every gate there is decided.
    Call inside the deciding transaction; the step is enqueued on commit."""
    resumed = get_backend().set_status(
        thread_id=thread_id, status=ThreadStatus.RUNNING, expected_head=checkpoint_id
    )
    if resumed:
        after_commit(thread_id=thread_id, checkpoint_id=checkpoint_id, status=ThreadStatus.RUNNING)
    return resumed
