"""One model client per process, however many steps ask for it at once, and quiet."""

import logging
import threading

from agents import llm


def test_twenty_steps_asking_at_once_share_one_client() -> None:
    llm._client.cache_clear()
    barrier = threading.Barrier(20)
    clients: list[object] = []

    def ask() -> None:
        barrier.wait()
        clients.append(llm.client())

    asking = [threading.Thread(target=ask) for _ in range(20)]
    for thread in asking:
        thread.start()
    for thread in asking:
        thread.join()

    assert len(clients) == 20
    assert len({id(client) for client in clients}) == 1


def test_a_model_call_writes_no_log_line_of_its_http_library() -> None:
    # The logger of the library the SDK actually sends through (it moved from httpx to httpx2).
    http_client = type(llm.client()._client)  # the SDK's subclass of the library's Client
    library = next(c.__module__ for c in http_client.__mro__ if not c.__module__.startswith("openai"))
    library = library.split(".")[0]
    assert library in ("httpx", "httpx2")
    assert logging.getLogger(library).getEffectiveLevel() >= logging.WARNING
    assert logging.getLogger(f"{library}._client").getEffectiveLevel() >= logging.WARNING
