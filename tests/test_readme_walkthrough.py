"""The README walked as a new user walks it, where that walk found the product breaking a promise:
`WEB_HOST` set to the machine's address (README, "Pointing at Postgres and Redis") leaves the
offline model reachable; every error of the HTTP API has the shape its section shows,
`{"detail": ..., "errors": ...}`; a setting the README names that cannot work (a key that is no
Fernet key, a notifier that cannot send) fails `manage.py check`, which `make run`'s migrate runs;
a bad agent definition fails it with a message a person can read ("Defining an agent"); and
`manage.py export_thread` without the key its thread was stored with says so."""

import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings

from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.state import State
from agents.tools import Approval, tool
from approvals.actions.tokens import do_create_token
from checkpoints.models import Thread
from tests.factories import make_gate, make_user, settings_read_with
from tests.live import (
    LiveServices,
    Workers,
    free_port,
    http_get,
    live_workers,
    reach,
    start_thread,
    wait_for,
    worker_node,
)

OFFLINE_DEFAULTS = {"OPENAI_API_KEY": None, "OPENAI_BASE_URL": None, "GATEHOUSE_BASE_URL": None}


@pytest.mark.parametrize(
    ("web_host", "reached_at"),
    [
        ("192.0.2.7", "http://192.0.2.7:8080"),  # the machine's address: the server answers only there
        ("fd00::2", "http://[fd00::2]:8080"),
        ("0.0.0.0", "http://127.0.0.1:8080"),  # every address, loopback included
        ("::", "http://127.0.0.1:8080"),
        (None, "http://127.0.0.1:8080"),
    ],
)
def test_the_offline_model_is_called_where_web_host_makes_the_web_server_listen(
    monkeypatch: pytest.MonkeyPatch, web_host: str | None, reached_at: str
) -> None:
    read = settings_read_with(monkeypatch, WEB_HOST=web_host, PORT="8080", **OFFLINE_DEFAULTS)

    assert read["OPENAI_BASE_URL"] == f"{reached_at}/offline/v1"
    assert read["GATEHOUSE_BASE_URL"] == reached_at  # notifications' links reach it too


def http_ok(url: str) -> bool:
    try:
        return http_get(url)[0] == 200
    except OSError:
        return False


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_serve_on_one_address_runs_a_thread_to_its_gate_on_its_own_offline_model(
    workers: Workers, live_services: LiveServices
) -> None:
    # `WEB_HOST=<the machine's address> make run`: 127.0.0.2 answers on this host, 127.0.0.1 not.
    port = free_port()
    env = {name: value for name, value in live_services.env.items() if name != "OPENAI_BASE_URL"}
    host = LiveServices(url=f"http://127.0.0.2:{port}", env=env)
    command = [sys.executable, "manage.py", "serve", "--only", "web,workers"]
    settings_env = {"WEB_HOST": "127.0.0.2", "ALLOWED_HOSTS": "127.0.0.2", "PORT": str(port)}
    settings_env |= {"STEP_WORKERS": "1", "STEP_CONCURRENCY": "4"}
    serve = host.spawn("serve-web-host", command, settings_env)
    try:
        wait_for(
            lambda: http_ok(f"{host.url}/healthz") and worker_node("worker1") in live_workers(),
            timeout=60,
            interval=0.3,
            message=f"serve's web server and worker\n{host.log_tail(serve)}",
        )
        thread_id = start_thread("Please refund order ORD-1001")
        reach(thread_id, "waiting", reconcile=False)  # two model calls, on serve's own web server
        output = host.log_tail(serve, lines=10_000)
    finally:
        host.stop_all()

    assert f"Gatehouse is up: http://127.0.0.2:{port}/" in output
    assert Thread.objects.get(pk=thread_id).status == "waiting"


@pytest.mark.django_db
def test_every_error_of_the_http_api_has_the_readmes_shape() -> None:
    operator = do_create_token(user=make_user("olga", "operator"), name="ci")
    reviewer = do_create_token(user=make_user("rita", "reviewer"), name="ci")
    done = Thread.objects.get(pk=make_gate().thread_id)
    done.status = "done"
    done.save(update_fields=["status"])
    client = Client()

    def call(method: str, path: str, token: str = operator, **extra: object) -> tuple[int, object]:
        auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
        response = getattr(client, method)(f"/api{path}", **auth, **extra)
        return response.status_code, response.json()

    answers = {
        "no token": call("get", "/threads", token=""),
        "unknown address": call("get", "/nosuch"),
        "a reviewer pausing": call("post", f"/threads/{done.pk}/pause", token=reviewer),
        "a status that does not allow it": call("post", f"/threads/{done.pk}/pause"),
        "a checkpoint not in the thread": call("get", f"/threads/{done.pk}/checkpoints/nosuch"),
        "a body that is not JSON": call("post", "/threads", data="not json", content_type="application/json"),
        "a NUL in the query": call("get", "/threads?q=a%00b"),
    }

    assert {what: status for what, (status, _) in answers.items()} == {
        "no token": 401,
        "unknown address": 404,
        "a reviewer pausing": 403,
        "a status that does not allow it": 409,
        "a checkpoint not in the thread": 404,
        "a body that is not JSON": 400,
        "a NUL in the query": 400,
    }
    shapes = {what: sorted(body) for what, (_, body) in answers.items() if isinstance(body, dict)}
    assert shapes == {what: ["detail", "errors"] for what in answers}
    assert answers["a status that does not allow it"][1] == {
        "detail": "Cannot pause a thread that is done; it must be running, waiting.",
        "errors": None,
    }


def test_manage_py_check_refuses_an_encryption_key_that_is_no_fernet_key() -> None:
    with (
        override_settings(CHECKPOINT_ENCRYPTION_KEY="not-a-key"),
        pytest.raises(SystemCheckError, match=r"checkpoints.E001.*CHECKPOINT_ENCRYPTION_KEY must be"),
    ):
        call_command("check")

    with override_settings(CHECKPOINT_ENCRYPTION_KEY=f"{Fernet.generate_key().decode()}, "):
        call_command("check")  # comma-separated keys, as the README writes them


def test_manage_py_check_refuses_a_notifier_that_cannot_send() -> None:
    notifiers = ["approvals.notifiers.emails.EmailNotifier", "approvals.notifiers.webhook.WebhookNotifier"]
    with (
        override_settings(GATEHOUSE_NOTIFIERS=notifiers, NOTIFY_WEBHOOK_URL=""),
        pytest.raises(SystemCheckError) as refused,
    ):
        call_command("check")

    problems = str(refused.value)
    assert "(approvals.E003) GATEHOUSE_NOTIFIERS: cannot import 'approvals.notifiers.emails." in problems
    assert "(approvals.E003) WebhookNotifier needs NOTIFY_WEBHOOK_URL and NOTIFY_WEBHOOK_SECRET" in problems
    ready = {"NOTIFY_WEBHOOK_URL": "https://hooks.example.com/gatehouse", "NOTIFY_WEBHOOK_SECRET": "s"}
    with override_settings(
        GATEHOUSE_NOTIFIERS=["approvals.notifiers.email.EmailNotifier", notifiers[1]], **ready
    ):
        call_command("check")


@pytest.mark.django_db
def test_export_thread_without_the_key_its_thread_was_stored_with_says_so(tmp_path: Path) -> None:
    with override_settings(CHECKPOINT_ENCRYPTION_KEY=Fernet.generate_key().decode()):
        thread_id = make_gate().thread_id

    wrong_key = Fernet.generate_key().decode()
    for key, says in (("", "CHECKPOINT_ENCRYPTION_KEY is not set"), (wrong_key, "Cannot export")):
        with override_settings(CHECKPOINT_ENCRYPTION_KEY=key), pytest.raises(CommandError, match=says):
            call_command("export_thread", thread_id, str(tmp_path / "trace.json"))
    assert not (tmp_path / "trace.json").exists()


class UnreducedMessages(State):
    messages: list[dict[str, object]] = []


@tool(approval=Approval(queue="Faxes!"))
def send_fax(number: str) -> dict[str, str]:
    """Send a fax."""
    return {}


def test_manage_py_check_names_a_bad_agent_in_a_line_a_person_reads() -> None:
    registry.register(ToolAgent(name="fax", state=UnreducedMessages, system_prompt="…", tools=[send_fax]))
    try:
        with pytest.raises(SystemCheckError) as refused:
            call_command("check")
    finally:
        registry.unregister("fax")

    problems = [line for line in str(refused.value).splitlines() if "(agents.E001)" in line]
    assert problems == [
        "agent 'fax': (agents.E001) Agent 'fax': state field 'messages' must be "
        "Annotated[list[dict], add_messages]",
        "agent 'fax': (agents.E001) Agent 'fax': tool 'send_fax': queue 'Faxes!' must match "
        "^[a-z0-9][a-z0-9_-]{0,63}$",
    ]  # not the agent's dataclass repr, its state, nodes and tools, before each
