from django.apps import AppConfig


class ExamplesConfig(AppConfig):
    name = "agents.examples"
    label = "examples"
    verbose_name = "Example agents"
