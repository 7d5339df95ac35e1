"""Start threads, record decisions, resume after gates."""

import json
import uuid
from typing import Any

import pydantic
from django.conf import settings
from django.db import transaction

from agents.dispatch import after_commit
from agents.graph import Agent
from agents.registry import registry
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, NewCheckpoint, ThreadData
from checkpoints.ids import THREAD_ID_RULE, is_valid_tenant, is_valid_thread_id
from checkpoints.models import CheckpointSource, ThreadStatus
from checkpoints.store import TENANT_METADATA_KEY


class InvalidInput(ValueError):
    """Bad input from a user; `errors` maps field names to messages. Nothing was changed."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def check_start_thread(*, agent: str, text: str, thread_id: str | None, tenant: str | None = None) -> Agent:
    """Validate a request to start a thread; return the agent."""
    errors = {}
    if agent not in registry.names():
        errors["agent"] = f"unknown agent {agent!r}; choose one of: {', '.join(registry.names())}"
    if problem := input_problem(text):
        errors["input"] = problem
    if thread_id is not None and not is_valid_thread_id(thread_id):
        errors["thread_id"] = THREAD_ID_RULE
    if tenant is not None and not is_valid_tenant(tenant):
        errors["tenant"] = THREAD_ID_RULE
    if errors:
        raise InvalidInput(errors)
    return registry.get(agent)


def input_problem(text: str) -> str:
    """What is wrong with a user message (empty, over MAX_INPUT_CHARS), or "" if nothing."""
    if not text.strip():
        return "must not be empty"
    if len(text) > settings.MAX_INPUT_CHARS:
        return f"is {len(text):,} characters; the limit is {settings.MAX_INPUT_CHARS:,}"
    return ""


def check_input_text(text: str) -> str:
    """Validate a user message, at start or to continue a thread; return it."""
    if problem := input_problem(text):
        raise InvalidInput({"input": problem})
    return text


def check_state(agent: Agent, values: Any) -> dict[str, Any]:
    """Validate a whole state against the agent's schema; return it as stored JSON."""
    if not isinstance(values, dict):
        raise InvalidInput({"values": "must be a JSON object"})
    size = len(json.dumps(values))
    if size > settings.MAX_STATE_BYTES:
        raise InvalidInput({"values": f"is {size:,} bytes; the limit is {settings.MAX_STATE_BYTES:,}"})
    try:
        valid = agent.state.model_validate(values).model_dump(mode="json")
    except pydantic.ValidationError as exc:
        raise InvalidInput(
            {".".join(str(p) for p in e["loc"]) or "values": e["msg"] for e in exc.errors()}
        ) from exc
    if errors := agent.state_errors(valid):
        raise InvalidInput(errors)
    return valid


def do_start_thread(
    *, agent: Agent, text: str, thread_id: str | None, actor: str, tenant: str | None = None
) -> tuple[ThreadData, CheckpointData]:
    """Create a thread with an input checkpoint and enqueue its first step on commit; return
    both, so a caller can answer with them without reading them back. Without a tenant the
    thread shares its agent's store namespace (checkpoints.store.tenant_of)."""
    thread_id = thread_id or f"{agent.name}-{uuid.uuid4().hex[:12]}"
    metadata: dict[str, Any] = {"offline_model": bool(settings.OFFLINE_MODEL)}
    if tenant:
        metadata[TENANT_METADATA_KEY] = tenant
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
            metadata=metadata,
        )
        after_commit(thread_id=thread.id, checkpoint_id=first.id, status=ThreadStatus.RUNNING)
    return thread, first
