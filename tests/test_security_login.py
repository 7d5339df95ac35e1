"""Failed logins are throttled per username and per address (config/login_throttle.py), in the
shared Redis cache; right passwords never count, and API tokens are never throttled."""

import contextlib
import logging
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from approvals.actions.tokens import do_create_token
from tests.factories import make_user, settings_read_with
from tests.live import LiveServices, free_port

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("redis_ready")]

PASSWORD = "pw-for-tests-only"


def fresh_name() -> str:
    # Counters live in Redis beyond one run: every test uses names and addresses of its own.
    return f"u{uuid.uuid4().hex[:10]}"


def fresh_ip() -> str:
    return "10." + ".".join(str(random.randint(0, 255)) for _ in range(3))


def log_in(username: str, password: str, *, ip: str, path: str = "/login/") -> tuple[Client, Any]:
    client = Client(REMOTE_ADDR=ip)
    response = client.post(path, {"username": username, "password": password})
    return client, response


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_five_failures_for_a_username_refuse_even_the_right_password_but_not_its_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rita = make_user(fresh_name(), "reviewer")
    ip = fresh_ip()
    with caplog.at_level(logging.WARNING, logger="config.login_throttle"):
        for _ in range(5):
            client, response = log_in(rita.username, "wrong", ip=ip)
            assert response.status_code == 200 and not logged_in(client)
        failed = [r.getMessage() for r in caplog.records if "login failed" in r.getMessage()]
        assert failed == [f"login failed username={rita.username!r} ip={ip}"] * 5  # in the process log
        client, response = log_in(rita.username, PASSWORD, ip=ip)
    assert response.status_code == 429
    assert not logged_in(client)
    assert "Too many failed logins" in response.content.decode()
    assert any("login refused" in r.getMessage() and rita.username in r.getMessage() for r in caplog.records)
    # Another address is refused too (the username is locked), other users on this address are not.
    assert log_in(rita.username, PASSWORD, ip=fresh_ip())[1].status_code == 429
    other = make_user(fresh_name(), "reviewer")
    client, response = log_in(other.username, PASSWORD, ip=ip)
    assert response.status_code == 302 and logged_in(client)
    # API tokens are not throttled.
    token = do_create_token(user=rita, name="tests")
    assert Client().get("/api/threads", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


def test_twenty_failures_from_one_address_refuse_every_username_there() -> None:
    ip = fresh_ip()
    for _ in range(20):
        assert log_in(fresh_name(), "wrong", ip=ip)[1].status_code == 200
    rita = make_user(fresh_name(), "reviewer")
    client, response = log_in(rita.username, PASSWORD, ip=ip)
    assert response.status_code == 429 and not logged_in(client)
    client, response = log_in(rita.username, PASSWORD, ip=fresh_ip())
    assert response.status_code == 302 and logged_in(client)


def test_right_passwords_never_count_and_reset_the_usernames_failures() -> None:
    rita = make_user(fresh_name(), "reviewer")
    ip = fresh_ip()
    for _ in range(3):
        for _ in range(4):
            log_in(rita.username, "wrong", ip=ip)
        assert log_in(rita.username, PASSWORD, ip=ip)[1].status_code == 302
    for _ in range(25):  # the test helpers log in many times, always with the right password
        client, response = log_in(rita.username, PASSWORD, ip=ip)
        assert response.status_code == 302 and logged_in(client)


def test_the_refusal_ends_with_the_window(settings: Any) -> None:
    settings.LOGIN_FAILURE_WINDOW_S = 1
    rita = make_user(fresh_name(), "reviewer")
    ip = fresh_ip()
    for _ in range(5):
        log_in(rita.username, "wrong", ip=ip)
    assert log_in(rita.username, PASSWORD, ip=ip)[1].status_code == 429
    time.sleep(1.2)
    client, response = log_in(rita.username, PASSWORD, ip=ip)
    assert response.status_code == 302 and logged_in(client)


def test_the_admin_login_is_throttled_like_the_login_page() -> None:
    ada: User = make_user(fresh_name(), "admin")
    ada.is_staff = ada.is_superuser = True
    ada.save()
    ip = fresh_ip()
    for _ in range(5):
        log_in(ada.username, "wrong", ip=ip, path="/admin/login/")
    client, response = log_in(ada.username, PASSWORD, ip=ip, path="/admin/login/")
    assert not logged_in(client)
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()


def test_the_admin_role_not_is_staff_lets_a_user_into_django_admin() -> None:
    ada = make_user(fresh_name(), "admin")  # in the admin group only: not staff, not superuser
    staff = make_user(fresh_name(), "reviewer")
    staff.is_staff = True
    staff.save()

    admin_client, answer = log_in(ada.username, PASSWORD, ip=fresh_ip(), path="/admin/login/")
    staff_client, refused = log_in(staff.username, PASSWORD, ip=fresh_ip(), path="/admin/login/")

    assert answer.status_code == 302 and logged_in(admin_client)
    assert admin_client.get("/admin/approvals/policy/").status_code == 200
    assert '<a href="/admin/">Admin</a>' in admin_client.get("/").content.decode()  # the top bar's link
    assert refused.status_code == 200 and not logged_in(staff_client)
    reviewer = Client()
    reviewer.force_login(staff)
    assert reviewer.get("/admin/").status_code == 302  # to the admin's login page
    assert '<a href="/admin/">Admin</a>' not in reviewer.get("/").content.decode()


def test_with_the_cache_unreachable_logins_still_work_and_nothing_is_a_500(settings: Any) -> None:
    # Availability over throttling: a Redis outage must not lock everyone out.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"socket_connect_timeout": 0.2},
        }
    }
    rita = make_user(fresh_name(), "reviewer")
    ip = fresh_ip()
    for _ in range(6):
        assert log_in(rita.username, "wrong", ip=ip)[1].status_code == 200
    client, response = log_in(rita.username, PASSWORD, ip=ip)
    assert response.status_code == 302 and logged_in(client)


def test_the_live_server_counts_a_failure_against_the_socket_address_not_x_forwarded_for(
    live_server_url: str,
) -> None:
    # Were X-Forwarded-For believed (uvicorn believes it from 127.0.0.1 unless told not to), anyone
    # could make each attempt come from a fresh address and never meet the per-address limit.
    forged = fresh_ip()
    with counted_failure(live_server_url, forwarded_for=forged) as counted_as:
        assert counted_as == "127.0.0.1"


def test_behind_a_trusted_proxy_a_failure_counts_against_the_address_it_forwards(
    live_services: LiveServices, settings: Any
) -> None:
    settings.FORWARDED_ALLOW_IPS = "127.0.0.1"  # the proxy: this test, on the same host
    port = free_port()
    proxied = live_services.start_web(port, name="web-proxied")
    try:
        client = fresh_ip()
        with counted_failure(f"http://127.0.0.1:{port}", forwarded_for=client) as counted_as:
            assert counted_as == client
    finally:
        live_services.stop(proxied)


@pytest.mark.django_db(transaction=True)  # the live server logs in a user this test made
@pytest.mark.parametrize("trusted", [True, False], ids=["from a trusted proxy", "from anyone else"])
def test_x_forwarded_proto_is_believed_only_from_a_trusted_proxy(
    live_services: LiveServices, settings: Any, trusted: bool
) -> None:
    # Behind an HTTPS proxy the request must count as https, or every form post fails its CSRF
    # origin check; from anyone else the header is ignored.
    settings.FORWARDED_ALLOW_IPS = "127.0.0.1" if trusted else ""
    rita = make_user(fresh_name(), "reviewer")
    port = free_port()
    web = live_services.start_web(port, name="web-https", extra_env={"SECURE_COOKIES": "1"})
    try:
        https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": fresh_ip()}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, headers=https) as browser:
            token = browser.get("/login/").cookies["csrftoken"]
            origin = f"https://127.0.0.1:{port}"
            response = browser.post(
                "/login/",
                data={"username": rita.username, "password": PASSWORD, "csrfmiddlewaretoken": token},
                headers={"Origin": origin, "Referer": f"{origin}/login/", "Cookie": f"csrftoken={token}"},
            )
    finally:
        live_services.stop(web)

    if trusted:
        assert response.status_code == 302
        assert "secure" in response.headers["set-cookie"].lower()
    else:
        assert response.status_code == 403  # an https origin on what the server sees as http


@contextlib.contextmanager
def counted_failure(url: str, *, forwarded_for: str) -> Iterator[str]:
    """Fail one login on the live server with this X-Forwarded-For; yield the address it counted
    against (of the two candidates), and take the failure back afterwards."""
    own_key, forwarded_key = "login-failures:ip:127.0.0.1", f"login-failures:ip:{forwarded_for}"
    before = cache.get(own_key, 0)
    with httpx.Client(base_url=url, timeout=10) as browser:
        browser.get("/login/")
        form = {"username": fresh_name(), "password": "wrong"}
        form["csrfmiddlewaretoken"] = browser.cookies["csrftoken"]
        response = browser.post("/login/", data=form, headers={"X-Forwarded-For": forwarded_for})
    assert response.status_code == 200 and "username and password didn" in response.text
    counted = {"127.0.0.1": cache.get(own_key, 0) - before, forwarded_for: cache.get(forwarded_key, 0)}
    try:
        assert sorted(counted.values()) == [0, 1], counted
        yield max(counted, key=lambda address: counted[address])
    finally:
        if counted["127.0.0.1"]:
            cache.decr(own_key)  # other live tests log in from 127.0.0.1 too


def test_a_deployment_hashes_passwords_with_djangos_default_only_the_suite_with_md5(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployed = settings_read_with(monkeypatch, PYTEST_VERSION=None)
    under_pytest = settings_read_with(monkeypatch, PYTEST_VERSION="8")

    assert "PASSWORD_HASHERS" not in deployed  # Django's: PBKDF2 first
    assert under_pytest["PASSWORD_HASHERS"] == ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_a_failed_login_keeps_the_username_typed_and_escapes_it() -> None:
    name = fresh_name() + '"><b>'
    make_user(name, "reviewer")

    _, response = log_in(name, "not-the-password", ip=fresh_ip())

    page = response.content.decode()
    assert "match" in page  # the form's error
    assert f'value="{name.replace(chr(34), "&quot;").replace("<", "&lt;").replace(">", "&gt;")}"' in page
