"""Test helpers for the inbox: gates whose Approval carries an expiry policy."""

import dataclasses

import pytest

from agents.registry import registry
from agents.tools import Expiry
from approvals.models import ApprovalRequest
from tests.factories import make_gate


def gate_with_expiry(monkeypatch: pytest.MonkeyPatch, expiry: Expiry | None) -> ApprovalRequest:
    """make_gate for refunds' issue_refund, its Approval carrying `expiry` (restored after the test)."""
    agent = registry.get("refunds")
    tool = agent.tool("issue_refund")  # type: ignore[attr-defined]
    patched = dataclasses.replace(tool, approval=dataclasses.replace(tool.approval, expiry=expiry))
    monkeypatch.setitem(agent._tools, "issue_refund", patched)  # type: ignore[attr-defined]
    try:
        return make_gate()
    finally:
        monkeypatch.setitem(agent._tools, "issue_refund", tool)  # type: ignore[attr-defined]
