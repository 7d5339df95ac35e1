"""`seed_demo` after a run with DEMO_PASSWORD: a later run without it tells the truth about the
passwords that one set (README, "Two commands"): still the chosen one, not "changed since"."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User

from approvals.tests.test_seed_demo import seed

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def var_dir(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    settings.VAR_DIR = tmp_path
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    return tmp_path


def test_a_password_demo_password_set_is_shown_as_such_until_someone_changes_it(
    monkeypatch: pytest.MonkeyPatch, var_dir: Path
) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "demopass")
    assert set(seed().values()) == {"demopass"}
    monkeypatch.delenv("DEMO_PASSWORD")

    printed = seed()

    assert printed == dict.fromkeys(["reviewer", "operator", "admin"], "(set by DEMO_PASSWORD)")
    assert authenticate(username="operator", password="demopass") is not None  # left as it was
    assert "demopass" not in "".join(p.read_text() for p in var_dir.iterdir())  # never on disk

    reviewer = User.objects.get(username="reviewer")
    reviewer.set_password("only rita knows")
    reviewer.save()
    assert seed()["reviewer"] == "(changed since; set DEMO_PASSWORD to reset it)"


def test_a_user_created_afresh_shows_its_generated_password_again(
    monkeypatch: pytest.MonkeyPatch, var_dir: Path
) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "demopass")
    seed()
    monkeypatch.delenv("DEMO_PASSWORD")
    User.objects.filter(username="operator").delete()  # a new database, say, for one of them

    printed = seed()

    generated = json.loads((var_dir / "demo_passwords.json").read_text())
    assert printed["operator"] == generated["operator"]
    assert printed["reviewer"] == "(set by DEMO_PASSWORD)"
    assert seed() == printed


def test_a_damaged_record_costs_only_the_note(monkeypatch: pytest.MonkeyPatch, var_dir: Path) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "demopass")
    seed()
    monkeypatch.delenv("DEMO_PASSWORD")
    (var_dir / "demo_password_set.json").write_text("{not json")

    assert seed()["admin"] == "(changed since; set DEMO_PASSWORD to reset it)"
