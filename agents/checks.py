"""Startup checks: a bad agent definition, or a step that could outlive its broker message,
fails `manage.py check` with a clear message."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from agents.registry import registry

MODEL_TRIES = 2  # a model call and its one retry (agents.llm: max_retries=1)


@register("agents")
def check_agents(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Error(f"Agent {agent.name!r}: {problem}", obj=agent, id="agents.E001")
        for agent in registry.all()
        for problem in agent.definition_errors()
    ]


@register("agents")
def check_step_chain(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A step task chains its thread's steps for up to STEP_CHAIN_S, then finishes the step it is
    in, whose model call may take OPENAI_TIMEOUT_S twice: all of it must end before the broker
    delivers the task again (visibility_timeout), or a second worker takes the same task, finds
    the thread's lease held, and the step's task is retried while the first still runs it."""
    longest = settings.STEP_CHAIN_S + MODEL_TRIES * settings.OPENAI_TIMEOUT_S
    visibility_timeout = settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    if longest < visibility_timeout:
        return []
    return [
        Error(
            f"A step task may run {longest:g} s (STEP_CHAIN_S {settings.STEP_CHAIN_S} + "
            f"{MODEL_TRIES} x OPENAI_TIMEOUT_S {settings.OPENAI_TIMEOUT_S:g}), not less than the "
            f"broker's visibility_timeout ({visibility_timeout:g} s): Redis would deliver it "
            "again while it runs.",
            hint="Lower STEP_CHAIN_S or OPENAI_TIMEOUT_S, or raise CELERY_VISIBILITY_TIMEOUT.",
            id="agents.E002",
        )
    ]
