"""A few model clients per process, however many steps ask at once; each thread keeps one; quiet."""

import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agents import llm


def test_twenty_steps_asking_at_once_share_a_few_clients_and_each_keeps_its_own() -> None:
    llm._clients.cache_clear()
    barrier = threading.Barrier(20)
    asked: list[tuple[object, object]] = []

    def ask() -> None:
        barrier.wait()
        asked.append((llm.client(), llm.client()))

    asking = [threading.Thread(target=ask) for _ in range(20)]
    for thread in asking:
        thread.start()
    for thread in asking:
        thread.join()

    assert len(asked) == 20
    assert all(first is again for first, again in asked)  # a thread keeps its client
    # Handed out in turn: every client serves some of the threads; all were built once.
    assert len({id(first) for first, _ in asked}) == llm.CLIENTS_PER_PROCESS
    assert llm._clients.cache_info().misses == 1


def test_the_clients_share_one_tls_context_and_keep_the_sdks_settings() -> None:
    llm._clients.cache_clear()
    clients = llm._clients("https://models.example/v1", "key", 7.5)

    contexts = {id(c._client._transport._pool._ssl_context) for c in clients}  # type: ignore[attr-defined]
    assert len(contexts) == 1
    assert all(c.timeout == 7.5 and c.max_retries == 1 for c in clients)
    assert all(str(c.base_url) == "https://models.example/v1/" for c in clients)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"


def test_a_model_that_does_not_answer_within_the_timeout_is_unavailable(
    settings: Any, silent_server: str
) -> None:
    settings.OFFLINE_MODEL = False
    settings.OPENAI_BASE_URL = silent_server
    settings.OPENAI_API_KEY = "key"
    settings.OPENAI_TIMEOUT_S = 0.2
    llm._clients.cache_clear()
    try:
        # A retryable error for the step's task, not a thread stuck in its model call.
        with pytest.raises(llm.ModelUnavailable, match="model unavailable"):
            llm.complete(messages=[{"role": "user", "content": "hi"}], tools=[])
    finally:
        llm._clients.cache_clear()


def test_a_model_call_writes_no_log_line_of_its_http_library() -> None:
    # The logger of the library the SDK actually sends through (it moved from httpx to httpx2).
    http_client = type(llm.client()._client)  # the SDK's subclass of the library's Client
    library = next(c.__module__ for c in http_client.__mro__ if not c.__module__.startswith("openai"))
    library = library.split(".")[0]
    assert library in ("httpx", "httpx2")
    assert logging.getLogger(library).getEffectiveLevel() >= logging.WARNING
    assert logging.getLogger(f"{library}._client").getEffectiveLevel() >= logging.WARNING


def test_a_reply_is_read_from_the_chat_completion_json() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": ""}}
    other = {"id": "call_2", "type": "custom", "custom": {"name": "grep", "input": "x"}}
    data = {
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call, other]}}],
    }
    # Only function calls are the agent's; no arguments reads as an empty object.
    assert llm.reply_from(data) == llm.ModelReply(
        content=None, tool_calls=[llm.ToolCall(id="call_1", name="lookup_order", arguments="{}")], model="m"
    )
    text = {"model": "m", "choices": [{"message": {"role": "assistant", "content": "Done."}}]}
    assert llm.reply_from(text) == llm.ModelReply(content="Done.", tool_calls=[], model="m")


@pytest.mark.parametrize(
    "data",
    [
        {"choices": []},
        {"error": {"message": "overloaded"}},
        "<html>gateway</html>",
        None,
        {"choices": [{"message": {"tool_calls": [{"type": "function"}]}}]},
        {"choices": [{"message": {"tool_calls": "lookup_order"}}]},
    ],
)
def test_a_server_that_answers_something_else_is_a_clear_error(data: object) -> None:
    with pytest.raises(llm.MalformedReply, match="not a chat completion"):
        llm.reply_from(data)
