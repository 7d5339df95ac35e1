"""Pages hold up with a year of data: their queries do not grow with their rows, and a long list
comes a page at a time with a way to the next."""

import asyncio
import re
from typing import Any

import pytest
import websockets
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from checkpoints import diff as diff_module
from checkpoints.backends import get_backend
from checkpoints.backends.base import NewCheckpoint
from checkpoints.diff import diff_values
from checkpoints.models import CheckpointSource, ThreadStatus
from tests.factories import make_gate, make_user
from tests.test_live_push import session_cookie

pytestmark = pytest.mark.django_db


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def add_steps(thread_id: str, count: int) -> list[str]:
    """`count` more checkpoints on the thread's head, each saying one more thing; their ids."""
    backend = get_backend()
    head = backend.get(thread_id=thread_id)
    values, ids = head.values, []
    for n in range(count):
        values = {**values, "messages": [*values["messages"], {"role": "assistant", "content": f"step {n}"}]}
        head = backend.put(
            thread_id=thread_id,
            parent_id=head.id,
            expected_head=head.id,
            status=ThreadStatus.WAITING,
            checkpoint=NewCheckpoint(values=values, source=CheckpointSource.STEP, node="model"),
        )
        ids.append(head.id)
    return ids


def test_a_diff_of_a_long_conversation_compares_only_the_messages_that_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[int, int]] = []
    real = diff_module.DeepDiff

    def spy(old: Any, new: Any, **options: Any) -> Any:
        compared.append((len(old.get("messages", [])), len(new.get("messages", []))))
        return real(old, new, **options)

    monkeypatch.setattr(diff_module, "DeepDiff", spy)
    old: dict[str, Any] = {
        "messages": [{"role": "user", "content": f"message {n}"} for n in range(2000)],
        "n": 1,
    }
    new = {
        "messages": [
            *old["messages"][:700],
            {"role": "user", "content": "edited"},
            *old["messages"][701:],
            {"role": "assistant", "content": "new"},
        ],
        "n": 1.0,  # equal to Python, a type change to the diff
    }

    changes = diff_values(old, new)

    assert [(c.kind, c.path, c.old, c.new) for c in changes] == [
        ("changed", "messages[700].content", "message 700", "edited"),
        ("added", "messages[2000]", None, {"role": "assistant", "content": "new"}),
        ("changed", "n", 1, 1.0),
    ]
    assert compared == [(1, 2)]  # the edited message and the new one, not 2,000 pairs


def test_a_diff_keeps_lists_of_plain_values_whole() -> None:
    old = {"tags": ["a", "b", "c"], "messages": [{"n": 1}, {"n": 2}]}
    new = {"tags": ["a", "x", "b", "c"], "messages": [{"n": 1}, {"n": True}]}

    changes = diff_values(old, new)

    assert [(c.kind, c.path) for c in changes] == [("changed", "messages[1].n"), ("added", "tags[1]")]


@pytest.mark.parametrize("page", ["thread", "checkpoint"])
def test_a_long_history_shows_one_page_and_links_to_the_older_checkpoints(page: str) -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    ids = add_steps(request_.thread_id, 105)  # 107 checkpoints with the gate's two
    url = (
        f"/threads/{request_.thread_id}/"
        if page == "thread"
        else f"/threads/{request_.thread_id}/checkpoints/{ids[-1]}/"
    )
    client = client_for(olga)

    first = client.get(url).content.decode()
    shown = re.findall(r'data-step="(\d+)"', first)
    older = re.search(r'href="\?history_before=([0-9a-f-]+)"', first)

    assert len(shown) == 100 and shown[0] == "7" and shown[-1] == "106"  # drawn oldest first
    assert older is not None and older.group(1) == ids[5]  # the oldest shown: step 7
    rest = client.get(url, {"history_before": older.group(1)}).content.decode()
    assert re.findall(r'data-step="(\d+)"', rest) == ["0", "1", "2", "3", "4", "5", "6"]
    assert 'href="?history_before=' not in rest and 'href="?">Newest checkpoints' in rest


def test_an_older_history_page_after_no_checkpoint_of_the_thread_is_not_found() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    other = make_gate()
    client = client_for(olga)

    for before in ("not-a-checkpoint", str(other.checkpoint_id), "x" * 5000):
        assert client.get(f"/threads/{request_.thread_id}/", {"history_before": before}).status_code == 404


def test_the_thread_page_reads_the_same_queries_however_long_its_history() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    client = client_for(olga)
    url = f"/threads/{request_.thread_id}/"

    def queries() -> int:
        client.get(url)  # the session and caches warm
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    add_steps(request_.thread_id, 20)
    few = queries()
    add_steps(request_.thread_id, 40)
    assert queries() == few


def talk_at_length(request_: Any, *, then_asked: str = "") -> None:
    """Move the request's gate to a new head after 300 lines of the agent's chatter (and the
    person's question `then_asked`, if any)."""
    backend = get_backend()
    head = backend.get(thread_id=request_.thread_id)
    chatter = [{"role": "assistant", "content": f"line {n}"} for n in range(300)]
    asked = [{"role": "user", "content": then_asked}] if then_asked else []
    late = backend.put(
        thread_id=request_.thread_id,
        parent_id=head.id,
        expected_head=head.id,
        status=ThreadStatus.WAITING,
        checkpoint=NewCheckpoint(
            values={**head.values, "messages": [*head.values["messages"], *chatter, *asked]},
            source=CheckpointSource.STEP,
            node="model",
        ),
    )
    request_.checkpoint_id = late.id
    request_.save(update_fields=["checkpoint"])


def test_the_inbox_reads_the_end_of_each_conversation_not_all_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from checkpoints import selectors as checkpoint_selectors

    rita = make_user("rita", "reviewer")
    talk_at_length(make_gate(user_input="Refund the long one"), then_asked="And the parcel?")
    make_gate(user_input="Refund the short one")
    read: list[int] = []
    real = checkpoint_selectors._list_items

    def spy(ranges: list[tuple[str, int, int, int]]) -> Any:
        read.append(sum(high - low for _, _, low, high in ranges))
        return real(ranges)

    monkeypatch.setattr(checkpoint_selectors, "_list_items", spy)

    page = client_for(rita).get("/").content.decode()

    assert "And the parcel?" in page and "Refund the short one" in page
    assert sum(read) <= 40  # the ends of both conversations, not the 300 lines of chatter


def test_the_inbox_quotes_a_question_asked_before_a_long_run_of_chatter() -> None:
    rita = make_user("rita", "reviewer")
    talk_at_length(make_gate(user_input="Refund the patient one"))

    assert "Refund the patient one" in client_for(rita).get("/").content.decode()


def test_a_diff_of_distant_checkpoints_shows_a_page_of_changes_and_links_to_the_next() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    ids = add_steps(request_.thread_id, 250)  # 250 messages more at the head than at the gate
    client = client_for(olga)
    url = f"/threads/{request_.thread_id}/diff/"
    asked = {"from": str(request_.checkpoint_id), "to": ids[-1]}

    first = client.get(url, asked).content.decode()
    later = re.search(r'href="\?([^"]+)" rel="next"', first)

    assert first.count('<tr class="diff-') == 200 and "changes 1\N{EN DASH}200 of 250" in first
    assert later is not None
    rest = client.get(url + "?" + later.group(1).replace("&amp;", "&")).content.decode()
    assert rest.count('<tr class="diff-') == 50 and 'rel="next"' not in rest
    assert "messages[251]" in rest and "step 249" in rest  # the last change, on the last page


@pytest.mark.django_db(transaction=True)
def test_a_thread_page_on_an_older_history_page_stays_there_when_its_thread_moves_on(
    live_server_url: str,
) -> None:
    """The page's socket knows which page of the history it shows: its renders (the catch-up on
    connect, every push after a step) draw that page, not the newest (the reader was sent back)."""
    request_ = make_gate()
    ids = add_steps(request_.thread_id, 105)
    older = ids[5]  # the oldest checkpoint of the newest page: the older page is steps 0-6
    cookie = session_cookie("olga", "operator")
    olga = Client()
    olga.cookies["sessionid"] = cookie
    page = olga.get(f"/threads/{request_.thread_id}/", {"history_before": older})
    assert f"history_before={older}" in page.content.decode()  # the socket's address carries it

    async def first_render(path: str) -> str:
        url = live_server_url.replace("http://", "ws://") + path
        headers = {"Cookie": f"sessionid={cookie}"}
        async with websockets.connect(url, additional_headers=headers, origin=live_server_url) as ws:  # type: ignore[arg-type]
            return str(await asyncio.wait_for(ws.recv(), 10))

    base = f"/ws/threads/{request_.thread_id}/?view=thread"
    rendered = asyncio.run(first_render(f"{base}&history_before={older}"))
    assert re.findall(r'data-step="(\d+)"', rendered) == ["0", "1", "2", "3", "4", "5", "6"]
    # A page checkpoint that is not the thread's: the newest page, not an error.
    newest = asyncio.run(first_render(f"{base}&history_before=not-a-checkpoint"))
    assert len(re.findall(r'data-step="(\d+)"', newest)) == 100
