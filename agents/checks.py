"""Startup checks: a bad agent definition fails `manage.py check` with a clear message."""

from typing import Any

from django.core.checks import CheckMessage, Error, register

from agents.registry import registry


@register("agents")
def check_agents(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Error(f"Agent {agent.name!r}: {problem}", obj=agent, id="agents.E001")
        for agent in registry.all()
        for problem in agent.definition_errors()
    ]
