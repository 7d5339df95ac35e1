from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from agents import checks  # noqa: F401  (registers the startup checks)
        from agents.registry import autodiscover

        autodiscover()
