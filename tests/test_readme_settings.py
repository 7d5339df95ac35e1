"""The README's table of environment variables: each default it states in code font is the
default config/settings.py reads when the variable is unset."""

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from tests.factories import settings_read_with

# Read into other settings, each tested where it acts: tests/test_langgraph_cors_origins.py,
# and the prepared statements by the Postgres suite itself.
DERIVED = {"LANGGRAPH_CORS_ORIGINS", "DB_PREPARED_STATEMENTS"}
# Variables read under another name, or into another setting.
READ_AS = {
    "CELERY_VISIBILITY_TIMEOUT": lambda read: read["CELERY_BROKER_TRANSPORT_OPTIONS"]["visibility_timeout"],
    "GATEHOUSE_VAR_DIR": lambda read: f"{read['VAR_DIR'].relative_to(read['BASE_DIR'])}/",
    "DEBUG": lambda read: str(int(read["DEBUG"])),
    "LOG_LEVEL": lambda read: read["LOGGING"]["root"]["level"],
}


def stated_defaults() -> Iterator[tuple[str, str]]:
    """(variable, default) for each row whose defaults are all in code font, one per variable."""
    readme = (settings.BASE_DIR / "README.md").read_text()
    table = readme.split("| variable | default | meaning |", 1)[1].split("\n\n", 1)[0]
    for line in table.splitlines()[2:]:
        names, defaults = [cell.strip() for cell in line.strip("|").split(" | ")][:2]
        variables = re.findall(r"`([A-Z_]+)`", names)
        values = [d.strip() for d in defaults.split(", ")]
        if len(variables) == len(values) and all(re.fullmatch(r"`[^`]*`", v) for v in values):
            yield from ((n, v.strip("`")) for n, v in zip(variables, values, strict=True) if n not in DERIVED)


def as_written(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_every_default_the_readme_states_is_the_one_settings_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    stated = dict(stated_defaults())
    # PYTEST_VERSION unset too: the suite's own DECISION_UNDO_S default is 0.
    read = settings_read_with(monkeypatch, PYTEST_VERSION=None, **dict.fromkeys(stated))

    assert len(stated) >= 20  # the table, not a parse that found nothing
    shown = {name: READ_AS[name](read) if name in READ_AS else read[name] for name in stated}
    assert {name: as_written(value) for name, value in shown.items()} == stated
