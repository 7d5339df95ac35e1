"""Small promises a careful user trips on: a 405 under /api is JSON like its other errors; serve's
"log in with" names passwords that log in; a float setting that is not a number is a clear
configuration error; a checkpoint the configured key cannot open says so; recent decisions list
by when they were decided."""

import json
import re
import threading
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import authenticate
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client
from langgraph.checkpoint.base import empty_checkpoint

from agents.management.commands.serve import Command as Serve
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.tokens import do_create_token
from checkpoints.backends import get_backend
from checkpoints.backends.base import CorruptCheckpoint
from checkpoints.langgraph import GatehouseSaver
from checkpoints.models import LangGraphCheckpoint, StoredValue
from tests.factories import make_gate, make_user, settings_read_with

UNDECRYPTABLE = "could not be decrypted with the configured CHECKPOINT_ENCRYPTION_KEY"


def admins_api() -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})


@pytest.mark.django_db
def test_a_method_an_api_address_does_not_serve_is_a_json_405_that_keeps_its_allow_header() -> None:
    response = admins_api().delete("/api/approvals")

    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response["Allow"] == "GET"
    body = response.json()
    assert set(body) == {"detail", "errors"} and body["errors"] is None and "GET" in body["detail"]
    # /langgraph keeps LangGraph's shape (no `errors`), as before.
    langgraph = Client().delete("/langgraph/info")
    assert (langgraph.status_code, langgraph["Allow"], set(langgraph.json())) == (405, "GET", {"detail"})


@pytest.mark.django_db
def test_after_a_run_with_demo_password_serve_sends_people_to_passwords_that_log_in(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("DEMO_PASSWORD", "demopass")
    call_command("seed_demo", stdout=StringIO())
    monkeypatch.delenv("DEMO_PASSWORD")
    printed = StringIO()
    call_command("seed_demo", stdout=printed)  # make run's next start, without DEMO_PASSWORD

    said = StringIO()
    serve = Serve(stdout=said)
    serve.output_lock = threading.Lock()
    serve.announce()

    [login] = [line for line in said.getvalue().splitlines() if "Log in as" in line]
    # Any file it names holds passwords that log in (the generated ones no longer do).
    for path in re.findall(r"\S+\.json", login):
        for name, password in json.loads(Path(path).read_text()).items():
            assert authenticate(username=name, password=password) is not None, login
    assert "seed_demo" in login
    assert "(set by DEMO_PASSWORD)" in printed.getvalue()  # what seed_demo printed, true
    assert authenticate(username="reviewer", password="demopass") is not None


@pytest.mark.parametrize(
    "name", ["DECISION_UNDO_S", "NOTIFY_RETRY_BASE_S", "OPENAI_TIMEOUT_S", "LANGGRAPH_RUN_WAIT_S"]
)
def test_a_float_setting_that_is_not_a_number_is_a_configuration_error_naming_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ImproperlyConfigured, match=f"{name} must be a number, got 'soon'"):
        settings_read_with(monkeypatch, **{name: "soon"})
    with pytest.raises(ImproperlyConfigured, match=f"{name} must be a number, got 'nan'"):
        settings_read_with(monkeypatch, **{name: "nan"})
    assert settings_read_with(monkeypatch, **{name: "2.5"})[name] == 2.5


def langgraph_checkpoint(saver: GatehouseSaver, thread_id: str) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"note": "x" * 100}
    checkpoint["channel_versions"] = {"note": 1}
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"note": 1})


def read_langgraph(config: Any) -> None:
    saver = GatehouseSaver()  # a fresh one: nothing it read before is cached
    try:
        saver.get_tuple(config)
    finally:
        saver.close()


@pytest.mark.django_db(transaction=True)
def test_a_checkpoint_the_configured_key_cannot_open_says_so_and_a_tampered_one_is_still_corrupt(
    settings: Any,
) -> None:
    key_a, key_b = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CHECKPOINT_ENCRYPTION_KEY = key_a
    gate = make_gate()
    saver = GatehouseSaver()
    try:
        config = langgraph_checkpoint(saver, "lg-keyed")
    finally:
        saver.close()

    settings.CHECKPOINT_ENCRYPTION_KEY = key_b  # the process is given another key
    with pytest.raises(CorruptCheckpoint, match=UNDECRYPTABLE):
        get_backend().get(thread_id=gate.thread_id)
    with pytest.raises(CorruptCheckpoint, match=UNDECRYPTABLE):
        read_langgraph(config)

    # With the right key, altered data is still refused as corrupt.
    settings.CHECKPOINT_ENCRYPTION_KEY = key_a
    rows = StoredValue.objects.filter(thread_id=gate.thread_id)
    forged = Fernet(key_a.encode()).encrypt(b'{"role":"user","content":"forged"}').decode()
    assert rows.filter(key=rows.values_list("key", flat=True)[0]).update(data=forged) == 1
    with pytest.raises(CorruptCheckpoint, match="failed its SHA-256 digest check"):
        get_backend().get(thread_id=gate.thread_id)
    row = LangGraphCheckpoint.objects.get(thread_id="lg-keyed")
    header = bytearray(bytes(row.header))
    header[-5] ^= 1
    LangGraphCheckpoint.objects.filter(pk=row.pk).update(header=bytes(header))
    with pytest.raises(CorruptCheckpoint):
        read_langgraph(config)


@pytest.mark.django_db
def test_decided_requests_list_newest_decision_first_and_page_in_that_order() -> None:
    api, rita = admins_api(), make_user("rita", "reviewer")
    first, second, third = make_gate(), make_gate(), make_gate()  # raised in this order
    for request_ in (second, third, first):  # decided in this one
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    waiting, later = make_gate(), make_gate()

    def listed(**params: Any) -> list[int]:
        response = api.get("/api/approvals", params)
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()]

    assert listed(status="approved") == [first.pk, third.pk, second.pk]
    # Each says when it was decided, the time the list is ordered by.
    decided = [r["decided_at"] for r in api.get("/api/approvals", {"status": "approved"}).json()]
    assert None not in decided and decided == sorted(decided, reverse=True)
    assert [r["decided_at"] for r in api.get("/api/approvals").json()] == [None, None]
    assert listed(status="approved", before=first.pk) == [third.pk, second.pk]
    assert listed(status="approved", before=third.pk, limit=1) == [second.pk]
    assert listed(status="approved", after=second.pk) == [first.pk, third.pk]
    assert listed() == [waiting.pk, later.pk]  # pending keeps the queue's order
    # A request with no decision has no place among decisions: a clear 400, not a wrong page.
    refused = api.get("/api/approvals", {"status": "approved", "before": str(waiting.pk)})
    assert refused.status_code == 400 and set(refused.json()["errors"]) == {"before"}
