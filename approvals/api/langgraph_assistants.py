"""/info and the assistants of the LangGraph server API: one per registered `LangGraphAgent`,
graph_id = its name."""

from typing import Any

from django.http import HttpRequest

from agents.adapters.langgraph_agent import LangGraphAgent
from approvals.actions.langgraph_runs import langgraph_agent, langgraph_agents
from approvals.api.langgraph_api import SearchIn, api
from approvals.http import AuthedRequest

FLAGS = {
    "assistants": True,
    "crons": False,
    "langsmith": False,  # no run is traced to LangSmith (a run's langsmith_tracer is refused)
    "langsmith_tracing_replicas": False,
    "langsmith_tracing_session_on_runs": False,
    # A resume that answers no waiting interrupt is always refused, and changes nothing.
    "strict_resume": True,
}
"""The flags LangGraph's server answers at /info, each as this server serves it."""


class AssistantSearchIn(SearchIn):
    graph_id: str | None = None


def _assistant(agent: LangGraphAgent) -> dict[str, Any]:
    return {
        "assistant_id": agent.name,
        "graph_id": agent.name,
        "name": agent.name,
        "description": agent.description,
        "config": {},
        "context": {},
        "metadata": {},
        "version": 1,
        "created_at": None,
        "updated_at": None,
    }


@api.get("/info", auth=None)
def info(request: HttpRequest) -> Any:
    """What the server offers, as LangGraph's server tells its clients (Agent Inbox asks)."""
    return {"version": api.version, "flags": FLAGS}


@api.post("/assistants/search")
def search_assistants(request: AuthedRequest, body: AssistantSearchIn) -> Any:
    agents = langgraph_agents()
    if body.graph_id:
        agents = [a for a in agents if a.name == body.graph_id]
    return [_assistant(a) for a in agents[body.offset : body.offset + body.limit]]


@api.get("/assistants/{assistant_id}")
def get_assistant(request: AuthedRequest, assistant_id: str) -> Any:
    return _assistant(langgraph_agent(assistant_id))
