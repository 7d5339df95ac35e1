"""An edit naming an argument the tool does not take is a 400 naming it, for every example agent
written with another framework (the OpenAI Agents SDK's argument model ignored unknown keys: the
edit was approved with them dropped). Over the HTTP API with a real Celery worker and the
offline model."""

from typing import Any

import pytest

from agents.examples.models import Refund
from tests.factories import Api, api_for, make_user
from tests.test_refunds_flow import gate

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = ["refunds", "refunds_pydantic_ai", "refunds_langgraph", "refunds_openai_agents"]


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


@pytest.mark.parametrize("agent", AGENTS)
def test_an_edit_with_an_argument_the_tool_lacks_is_a_400_naming_it(api: Api, agent: str) -> None:
    thread_id, approval = gate(api, agent, "Please refund order ORD-1002")

    response = api.post(
        f"/approvals/{approval['id']}/decision",
        {"decision": "edit", "args": {"order_id": "ORD-1002", "amount_cents": 5000, "zzz": 1}},
    )

    assert response.status_code == 400, response.text
    assert "is not an argument of this tool" in response.json()["errors"]["args.zzz"]
    thread = api.thread(thread_id)
    assert thread["status"] == "waiting"
    assert [a["id"] for a in thread["pending_approvals"]] == [approval["id"]]
    assert Refund.objects.count() == 0
