"""One model client per process, however many steps ask for it at once."""

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
