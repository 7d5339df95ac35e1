"""The registry of agents. Apps declare agents in an `agents.py` module, found at startup."""

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules

from agents.graph import Agent


class UnknownAgent(LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"Unknown agent {name!r}; registered agents: {', '.join(known) or 'none'}.")
        self.name = name


class AgentRegistry:
    def __init__(self) -> None:
        self._agents: dict[str, Agent] = {}

    def register(self, agent: Agent) -> Agent:
        if not isinstance(agent, Agent):
            raise ImproperlyConfigured(f"register() takes an Agent, got {type(agent).__name__}")
        if agent.name in self._agents and self._agents[agent.name] is not agent:
            raise ImproperlyConfigured(f"An agent named {agent.name!r} is already registered.")
        self._agents[agent.name] = agent
        return agent

    def unregister(self, name: str) -> None:
        self._agents.pop(name, None)

    def get(self, name: str) -> Agent:
        try:
            return self._agents[name]
        except KeyError as exc:
            raise UnknownAgent(name, self.names()) from exc

    def names(self) -> list[str]:
        return sorted(self._agents)

    def all(self) -> list[Agent]:
        return [self._agents[name] for name in self.names()]


registry = AgentRegistry()
register = registry.register


def autodiscover() -> None:
    autodiscover_modules("agents", register_to=None)
