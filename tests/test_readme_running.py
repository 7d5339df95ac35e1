"""The README's "Running it": the promises of its settings table and of "The offline model" that
no other test drives. The offline model's delay cap is one number, the one its setting's range
states; a resend delay the retries could outlast fails the check; a thread stops at
MAX_STEPS_PER_THREAD with the reason; the offline model answers ahead of Django's middleware."""

import json

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from agents.offline.server import PATH, delay_for, signed_delay
from approvals.checks import notify_retry_cap_s
from checkpoints.models import Thread
from tests.factories import settings_read_with
from tests.live import Workers, reach, start_thread


def test_the_offline_model_caps_every_delay_at_the_largest_its_setting_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cap = settings.OFFLINE_MODEL_MAX_DELAY_MS
    assert settings_read_with(monkeypatch, OFFLINE_MODEL_DELAY_MS=str(cap))["OFFLINE_MODEL_DELAY_MS"] == cap
    with pytest.raises(ImproperlyConfigured, match=f"from 0 to {cap}"):
        settings_read_with(monkeypatch, OFFLINE_MODEL_DELAY_MS=str(cap + 1))

    assert delay_for(signed_delay(cap * 10)) == cap  # a signed worker's delay, cut to the cap
    with override_settings(OFFLINE_MODEL_MAX_DELAY_MS=500, OFFLINE_MODEL_DELAY_MS=0):
        # The server reads the cap from settings: nothing else holds the number.
        assert delay_for(signed_delay(900)) == 500
        assert delay_for(signed_delay(300)) == 300


def through_the_web_server(path: str, body: bytes) -> httpx.Response:
    """POST through the ASGI application the web server serves (routing included)."""
    from config.asgi import application

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post(path, content=body, headers={"Content-Type": "application/json"})

    return async_to_sync(send)()


@pytest.mark.django_db
def test_the_offline_model_answers_ahead_of_djangos_middleware() -> None:
    chat = {"model": "gatehouse-offline", "messages": [{"role": "user", "content": "hi"}]}
    body = json.dumps(chat).encode()

    offline = through_the_web_server(PATH, body)
    django = through_the_web_server("/api/threads", body)

    assert offline.status_code == 200 and offline.json()["object"] == "chat.completion"
    # Django's middleware marks every answer it passes (clickjacking, sniffing): the model's has none.
    marks = {"X-Frame-Options", "X-Content-Type-Options"}
    assert marks <= {k.title() for k in django.headers}
    assert not marks & {k.title() for k in offline.headers}


def test_a_resend_delay_the_longest_retry_backoff_reaches_fails_the_check() -> None:
    with (
        override_settings(NOTIFY_RESEND_AFTER_S=notify_retry_cap_s()),
        pytest.raises(SystemCheckError, match=r"approvals\.E002.*NOTIFY_RESEND_AFTER_S"),
    ):
        call_command("check")
    with override_settings(NOTIFY_RESEND_AFTER_S=notify_retry_cap_s() + 1):
        call_command("check")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_thread_that_reaches_max_steps_per_thread_is_failed_with_the_reason(workers: Workers) -> None:
    # A refunds run takes three steps to its gate: the model's lookup, the lookup, the refund call.
    workers.start("max-steps", {"MAX_STEPS_PER_THREAD": "2"})

    thread_id = start_thread("Please refund order ORD-1001")
    reach(thread_id, "failed")

    thread = Thread.objects.get(pk=thread_id)
    assert thread.error == "stopped after 2 steps (MAX_STEPS_PER_THREAD)"
    assert thread.head is not None and thread.head.step == 2


def test_csrf_trusted_origins_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    origins = " https://gatehouse.example.com, https://b.example ,"
    read = settings_read_with(monkeypatch, CSRF_TRUSTED_ORIGINS=origins)

    assert read["CSRF_TRUSTED_ORIGINS"] == ["https://gatehouse.example.com", "https://b.example"]
