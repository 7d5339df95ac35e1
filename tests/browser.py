"""Playwright fixtures: Debian's chromium, headless, one fresh context per test.

The browser is module-scoped: Playwright's sync API keeps an event loop running in this thread
while it is open, and tests outside browser modules must not run beside it.
"""

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from django.db import connection
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from agents.actions import check_start_thread, do_start_thread

T = TypeVar("T")

# Playwright's sync API runs an event loop in this thread; Django's ORM calls in the same test
# are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@pytest.fixture(scope="module", name="browser")
def browser_fixture() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def csp_violations(context: BrowserContext) -> list[str]:
    """Collect every Content-Security-Policy report chromium logs in this context's pages."""
    seen: list[str] = []
    context.on("console", lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None)
    return seen


@pytest.fixture(name="page")
def page_fixture(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    violations = csp_violations(context)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()
    assert violations == [], f"the page broke its Content-Security-Policy: {violations}"


def log_in(page: Page, base_url: str, username: str, password: str = "pw-for-tests-only") -> None:
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def off_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run product code in a plain thread: Playwright's event loop owns this one, and code that
    pushes events (async_to_sync) refuses to run beside a running loop."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn(*args, **kwargs))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result[0]


def start_refund(text: str, agent: str = "refunds") -> str:
    """Start a refunds thread from the test (off Playwright's loop); return its id."""

    def start() -> str:
        definition = check_start_thread(agent=agent, text=text, thread_id=None)
        return do_start_thread(agent=definition, text=text, thread_id=None, actor="test")[0].id

    return off_loop(start)
