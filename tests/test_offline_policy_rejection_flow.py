"""A call a deny policy rejected, reported by the offline model as the policy's automatic
rejection, not a reviewer's answer: the README's allow-list policy end to end (gate, policy, tool
result, reply). The steps run in this process; the offline model is the live server's."""

from typing import Any

import pytest

from agents import runtime
from agents.actions.start import do_start_thread
from agents.registry import registry
from agents.tests.test_offline_policy_rejection import DENIED
from approvals.actions.policies import do_create_policy
from approvals.tests.helpers import steps_sent
from approvals.tests.test_policies import ALLOWED_DOMAINS
from checkpoints.backends import get_backend
from checkpoints.models import ThreadStatus


@pytest.mark.django_db(transaction=True)
def test_the_outreach_agent_credits_a_deny_policy_not_a_reviewer(
    live_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's allow-list policy, end to end: gate, policy, tool result, reply (the steps
    run in this process, the offline model is the live server's)."""
    steps_sent(monkeypatch)  # the steps run below, not in a worker
    do_create_policy(
        actor=None,
        fields={
            "name": "allowed domains",
            "tool": "send_email",
            "when": ALLOWED_DOMAINS,
            "action": "deny",
            "message": "We only write to customers' own domains.",
        },
    )
    thread, _ = do_start_thread(
        agent=registry.get("outreach"),
        text="Email eve@evil.net about the launch",
        thread_id=None,
        actor="olga",
    )
    backend = get_backend()
    for _ in range(10):
        head: Any = backend.get_thread(thread_id=thread.id)
        if head.status != ThreadStatus.RUNNING:
            break
        runtime.run_step(thread_id=thread.id, checkpoint_id=head.head_id, worker="w-test")

    messages = backend.get(thread_id=thread.id).values["messages"]
    assert messages[-2]["content"] == DENIED  # what the tool message says
    assert messages[-1]["content"] == (
        "I did not send the email: policy 'allowed domains' v1 rejected it automatically. "
        "We only write to customers' own domains."
    )
    assert "reviewer" not in messages[-1]["content"]
