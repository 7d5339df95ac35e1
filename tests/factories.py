"""Users, tokens, gates, an API client, and settings as a process would read them, for tests."""

import json
import runpy
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.db import transaction

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, Queue
from approvals.roles import ensure_roles


def make_user(
    username: str, *roles: str, password: str = "pw-for-tests-only", queues: tuple[str, ...] = ()
) -> User:
    """A user in the role groups. `queues`: also a member of each queue's "<queue>-team" group,
    which restricts that queue to its team (queues are open to every reviewer until restricted)."""
    ensure_roles()
    user = User.objects.create_user(username=username, password=password)
    user.groups.add(*Group.objects.filter(name__in=roles))
    for name in queues:
        team, _ = Group.objects.get_or_create(name=f"{name}-team")
        queue, _ = Queue.objects.get_or_create(name=name)
        queue.groups.add(team)
        user.groups.add(team)
    return user


@dataclass
class Api:
    """A bearer-token client for the HTTP API of a live server."""

    base_url: str
    token: str

    def _client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url + "/api", timeout=10, headers={"Authorization": f"Bearer {self.token}"}
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        with self._client() as client:
            return client.get(path, params=params)

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        with self._client() as client:
            return client.post(path, json=body)

    def thread(self, thread_id: str) -> dict[str, Any]:
        response = self.get(f"/threads/{thread_id}")
        assert response.status_code == 200, response.text
        return response.json()


def api_for(user: User, base_url: str) -> Api:
    return Api(base_url=base_url, token=do_create_token(user=user, name="tests"))


def refunds_at_one_gate(amounts: list[int], *, thread_id: str = "") -> list[ApprovalRequest]:
    """One model message calling the refunds agent's issue_refund once per amount: its gates open
    together, at one checkpoint, through the gate protocol as the runtime opens them (their
    requests open where the gate says, and policies apply); on a new thread, or as the next step
    of `thread_id`."""
    from agents.registry import registry
    from checkpoints.backends import get_backend
    from checkpoints.backends.base import NewCheckpoint
    from checkpoints.models import CheckpointSource, ThreadStatus

    definition, backend = registry.get("refunds"), get_backend()
    calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:8]}",
            "type": "function",
            "function": {
                "name": "issue_refund",
                "arguments": json.dumps({"order_id": "ORD-1001", "amount_cents": cents}),
            },
        }
        for cents in amounts
    ]
    with transaction.atomic():
        if thread_id:
            backend.lock_thread(thread_id=thread_id)
            head = backend.get(thread_id=thread_id)
            parent, before = head.id, head.values
        else:
            before = definition.initial_values("Refund my orders")
            thread, first = backend.create_thread(
                thread_id=f"refunds-{uuid.uuid4().hex[:8]}",
                agent="refunds",
                status=ThreadStatus.RUNNING,
                first=NewCheckpoint(values=before, source=CheckpointSource.INPUT, next=["model"]),
            )
            thread_id, parent = thread.id, first.id
        asked = {
            "id": f"msg_{uuid.uuid4().hex[:8]}",
            "role": "assistant",
            "content": None,
            "tool_calls": calls,
        }
        values = {**before, "messages": [*before["messages"], asked]}
        opened = definition.pending_gates(definition.state.model_validate(values), "tools")
        gate = _gate_checkpoint(
            thread_id=thread_id, agent="refunds", parent=parent, values=values, opened=opened
        )
    return list(ApprovalRequest.objects.filter(checkpoint_id=gate).order_by("id"))


def make_gate(
    *,
    agent: str = "refunds",
    action: str = "issue_refund",
    args: dict[str, Any] | None = None,
    user_input: str = "Please refund order ORD-1001",
    model_text: str | None = None,
    description: str = "",
    thread_id: str = "",
) -> ApprovalRequest:
    """A thread waiting at a gate, built through the real backend and the gate protocol (no
    worker): the user's input, then the model's message (`model_text`, if any) calling `action`.
    The gate is the one the agent itself derives from that state, as the runtime's would be."""
    from dataclasses import replace

    from agents.registry import registry
    from checkpoints.backends import get_backend
    from checkpoints.backends.base import NewCheckpoint
    from checkpoints.models import CheckpointSource, ThreadStatus

    args = args if args is not None else {"order_id": "ORD-1001", "amount_cents": 4250}
    definition = registry.get(agent)
    call_id = f"call_{uuid.uuid4().hex[:8]}"
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": action, "arguments": json.dumps(args)},
    }
    first_values = definition.initial_values(user_input)
    assistant = {"id": "msg_a", "role": "assistant", "content": model_text, "tool_calls": [call]}
    values = {**first_values, "messages": [*first_values["messages"], assistant]}
    opened = definition.pending_gates(definition.state.model_validate(values), "tools")
    assert [g.key for g in opened] == [call_id], f"{agent}.{action}({args}) opens no gate"
    if description:
        opened = [replace(opened[0], description=description)]
    backend = get_backend()
    with transaction.atomic():
        thread, first = backend.create_thread(
            thread_id=thread_id or f"{agent}-{uuid.uuid4().hex[:8]}",
            agent=agent,
            status=ThreadStatus.RUNNING,
            first=NewCheckpoint(values=first_values, source=CheckpointSource.INPUT, next=["model"]),
        )
        gate = _gate_checkpoint(
            thread_id=thread.id, agent=agent, parent=first.id, values=values, opened=opened
        )
    return ApprovalRequest.objects.get(checkpoint_id=gate)


def _gate_checkpoint(
    *, thread_id: str, agent: str, parent: str, values: dict[str, Any], opened: list[Any]
) -> str:
    """The model's step after `parent`, holding `values` and waiting at the gates `opened`, written
    and its requests opened through the gate protocol, as the runtime does; its id."""
    from agents import gates
    from checkpoints.backends import get_backend
    from checkpoints.backends.base import NewCheckpoint
    from checkpoints.models import CheckpointSource, ThreadStatus

    gate = get_backend().put(
        thread_id=thread_id,
        parent_id=parent,
        expected_head=parent,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(
            values=values,
            source=CheckpointSource.STEP,
            next=["tools"],
            node="model",
            metadata=gates.gate_metadata(opened),
        ),
    )
    gates.open_gates(thread_id=thread_id, agent=agent, checkpoint=gate, gates=opened)
    return gate.id


def settings_read_with(monkeypatch: pytest.MonkeyPatch, **env: str | None) -> dict[str, Any]:
    """config/settings.py's names as a process started with this environment reads them (None
    unsets a variable); this process's settings are untouched."""
    for name, value in env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return runpy.run_path(str(settings.BASE_DIR / "config" / "settings.py"))
