"""`seed_demo` (what `make run` runs first): the demo users, their passwords printed, and an
admin's later changes to them never undone by a restart."""

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def var_dir(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    settings.VAR_DIR = tmp_path
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    return tmp_path


def seed() -> dict[str, str]:
    """Run seed_demo; the password column of what it printed, by username."""
    out = StringIO()
    call_command("seed_demo", stdout=out)
    header, *rows = out.getvalue().splitlines()
    assert header.split() == ["username", "password", "role"]
    return {row.split()[0]: row[11:].rsplit(" ", 1)[0].strip() for row in rows}


def test_it_creates_one_user_per_role_and_prints_passwords_that_log_in(var_dir: Path) -> None:
    printed = seed()

    assert list(printed) == ["reviewer", "operator", "admin"]
    for name, password in printed.items():
        user = authenticate(username=name, password=password)
        assert user is not None and [g.name for g in user.groups.all()] == [name]
    assert User.objects.get(username="admin").is_superuser  # admin reaches Django admin
    assert not User.objects.get(username="operator").is_staff
    # Kept, so the next `make run` prints the same ones.
    assert json.loads((var_dir / "demo_passwords.json").read_text()) == printed
    assert seed() == printed


def test_demo_password_chooses_one_password_for_all_three(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "correct horse")

    assert set(seed().values()) == {"correct horse"}
    assert authenticate(username="reviewer", password="correct horse") is not None


def test_a_restart_leaves_a_changed_password_and_a_deactivated_user_as_an_admin_left_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = seed()
    reviewer, admin = User.objects.get(username="reviewer"), User.objects.get(username="admin")
    reviewer.set_password("only rita knows")
    reviewer.save()
    admin.is_active = False  # the demo superuser, switched off in a deployment
    admin.save()

    printed = seed()

    assert authenticate(username="reviewer", password="only rita knows") is not None
    assert not User.objects.get(username="admin").is_active
    assert printed == {
        "reviewer": "(changed since; set DEMO_PASSWORD to reset it)",
        "operator": first["operator"],
        "admin": "(deactivated)",
    }
    monkeypatch.setenv("DEMO_PASSWORD", "reset on purpose")  # a deliberate reset does reset
    assert seed()["reviewer"] == "reset on purpose"
    assert authenticate(username="reviewer", password="reset on purpose") is not None


# After a run with DEMO_PASSWORD, a later run without it tells the truth about the passwords that
# one set: still the chosen one, not "changed since".
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
