"""Agent Inbox runs in the reviewer's browser, on an origin of its own, and calls /langgraph there
with the token in x-api-key. A page on another origin, in chromium, calls the API as it does:
/langgraph answers it; the rest of Gatehouse (its own API, its pages) does not, and no origin
may send the browser's cookies."""

import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from approvals.actions.tokens import do_create_token
from tests.browser import browser_fixture, log_in, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# What the page runs: LangGraph's JS client sends these requests (threads.search first).
CALL = """async ([url, headers, credentials]) => {
  try {
    const response = await fetch(url, {method: "POST", headers, credentials, body: "{}"});
    return {status: response.status, body: await response.text()};
  } catch (error) {
    return {error: String(error)};  // the browser refused to show the answer to this origin
  }
}"""


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def other_origin(tmp_path: Path) -> Iterator[str]:
    """A page served from another origin (localhost, not 127.0.0.1, and another port)."""
    (tmp_path / "index.html").write_text("<!doctype html><title>Agent Inbox stand-in</title>")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://localhost:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def call(page: Page, url: str, headers: dict[str, str], credentials: str = "omit") -> dict[str, Any]:
    return page.evaluate(CALL, [url, headers, credentials])


def test_a_page_on_another_origin_calls_the_langgraph_api_with_a_token_and_nothing_else(
    page: Page, live_server_url: str, other_origin: str
) -> None:
    ada = make_user("ada", "admin")
    token = do_create_token(user=ada, name="agent inbox")
    log_in(page, live_server_url, "ada")  # the browser holds a Gatehouse session cookie too
    page.goto(other_origin)
    json_with_token = {"content-type": "application/json", "x-api-key": token}

    # The preflight passes and the answer reaches the page.
    found = call(page, f"{live_server_url}/langgraph/threads/search", json_with_token)
    assert found == {"status": 200, "body": "[]"}

    # Without the token the answer is the API's own 401 (no cookie stands in for it).
    no_token = call(page, f"{live_server_url}/langgraph/threads/search", {"content-type": "application/json"})
    assert no_token == {"status": 401, "body": '{"detail": "Unauthorized"}'}
    # Not with the browser's cookies, and not Gatehouse's own API: the browser refuses both.
    assert "error" in call(page, f"{live_server_url}/langgraph/threads/search", json_with_token, "include")
    bearer = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    assert "error" in call(page, f"{live_server_url}/api/threads", bearer)
