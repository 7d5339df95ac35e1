"""Contract: values stored once, lists shared by forks, every byte checked on load."""

import random
from typing import Any

import pytest

from checkpoints.backends.base import CheckpointData, CheckpointNotFound, CorruptCheckpoint
from checkpoints.digest import canonical_json, list_digest, row_key, sha256
from checkpoints.tests.helpers import THREAD, conversation, ids, message, start, write
from checkpoints.tests.hooks import Hooks

ITEM = 2000


class StorageContract(Hooks):
    # --- each value written once -------------------------------------------------------

    def test_appending_to_a_list_stores_only_the_new_item(self, backend: Any) -> None:
        head = conversation(backend, items=20)[-1]
        before = backend.storage_bytes(thread_id=THREAD)

        write(backend, head, {"messages": [*head.values["messages"], message(20)]})

        grew = backend.storage_bytes(thread_id=THREAD) - before
        assert ITEM < grew < 2 * ITEM  # one item and a checkpoint row, not twenty items

    def test_storage_grows_linearly_with_the_thread(self, backend: Any) -> None:
        conversation(backend, items=10)
        ten = backend.storage_bytes(thread_id=THREAD)
        backend.delete_thread(thread_id=THREAD)
        conversation(backend, items=40)

        assert backend.storage_bytes(thread_id=THREAD) < 4.5 * ten

    def test_an_unchanged_value_is_stored_once(self, backend: Any) -> None:
        notes = {"notes": "y" * 5000}
        _, head = start(backend, values={"scratch": notes, "step": 0})
        before = backend.storage_bytes(thread_id=THREAD)

        for step in range(1, 6):
            head = write(backend, head, {"scratch": notes, "step": step})

        assert backend.storage_bytes(thread_id=THREAD) - before < 5000
        assert backend.get(thread_id=THREAD).values == {"scratch": notes, "step": 5}

    def test_a_fork_shares_its_parents_items(self, backend: Any) -> None:
        written = conversation(backend, items=20)
        origin, head = written[10], written[-1]
        before = backend.storage_bytes(thread_id=THREAD)

        fork = write(backend, origin, {"messages": [*origin.values["messages"], message(99)]}, head=head.id)

        assert ITEM < backend.storage_bytes(thread_id=THREAD) - before < 2 * ITEM
        assert backend.get(thread_id=THREAD).values == fork.values
        assert backend.get(thread_id=THREAD, checkpoint_id=head.id).values == head.values

    def test_an_edit_in_the_middle_shares_the_items_before_it(self, backend: Any) -> None:
        head = conversation(backend, items=20)[-1]
        edited = [*head.values["messages"]]
        edited[15] = {**edited[15], "content": "edited by a human"}
        before = backend.storage_bytes(thread_id=THREAD)

        written = write(backend, head, {"messages": edited})

        assert backend.storage_bytes(thread_id=THREAD) - before < 5.5 * ITEM  # items 15..19, not 20
        assert backend.get(thread_id=THREAD, checkpoint_id=written.id).values == {"messages": edited}
        assert backend.get(thread_id=THREAD, checkpoint_id=head.id).values == head.values

    def test_a_shortened_list_loads_short_and_grows_again(self, backend: Any) -> None:
        head = conversation(backend, items=6)[-1]
        short = write(backend, head, {"messages": head.values["messages"][:3]})
        longer = write(backend, short, {"messages": [*short.values["messages"], message(7)]})

        assert backend.get(thread_id=THREAD, checkpoint_id=short.id).values == short.values
        assert backend.get(thread_id=THREAD).values["messages"] == [*head.values["messages"][:3], message(7)]
        assert backend.get(thread_id=THREAD, checkpoint_id=longer.id).values == longer.values

    def test_a_number_that_becomes_an_equal_boolean_or_float_is_stored_as_it_is_now(
        self, backend: Any
    ) -> None:
        _, head = start(backend, values={"items": [{"n": 1}, {"n": 0}, {"n": 2}]})

        flag = write(backend, head, {"items": [{"n": True}, {"n": 0}, {"n": 2}]})
        real = write(backend, flag, {"items": [{"n": True}, {"n": 0.0}, {"n": 2}]})

        items = backend.get(thread_id=THREAD, checkpoint_id=real.id).values["items"]
        assert [type(item["n"]) for item in items] == [bool, float, int]
        assert backend.get(thread_id=THREAD, checkpoint_id=flag.id).values == flag.values

    def test_changing_values_in_place_after_a_write_is_stored_by_the_next_write(self, backend: Any) -> None:
        values = {"messages": [message(0, 10), message(1, 10)]}
        _, head = start(backend, values=values)
        head = write(backend, head, values)

        values["messages"][0]["content"] = "changed in place"
        written = write(backend, head, values)

        assert backend.get(thread_id=THREAD, checkpoint_id=written.id).values["messages"][0]["content"] == (
            "changed in place"
        )

    def test_values_returned_by_get_are_the_callers_to_change(self, backend: Any) -> None:
        head = conversation(backend, items=3, size=10)[-1]
        loaded = backend.get(thread_id=THREAD)

        loaded.values["messages"][0]["content"] = "scribbled"

        assert backend.get(thread_id=THREAD).values == head.values

    def test_every_checkpoint_of_a_much_forked_thread_loads_its_own_values(self, backend: Any) -> None:
        rng = random.Random(7)
        _, first = start(backend, values={"messages": [], "scratch": {}, "turn": 0})
        written: list[CheckpointData] = [first]
        head = first
        for turn in range(1, 60):
            parent = rng.choice(written) if rng.random() < 0.2 else head
            head = write(backend, parent, _mutate(parent.values, rng, turn), head=head.id)
            written.append(head)

        for checkpoint in written:
            assert backend.get(thread_id=THREAD, checkpoint_id=checkpoint.id).values == checkpoint.values

    def test_size_bytes_is_the_size_of_the_states_canonical_json(self, backend: Any) -> None:
        head = conversation(backend, items=4, size=50)[-1]
        values = {"messages": head.values["messages"], "scratch": {"plan": "é" * 80}, "turn": 4}

        written = write(backend, head, values)

        assert written.size_bytes == len(canonical_json(values).encode())
        assert backend.get(thread_id=THREAD).size_bytes == written.size_bytes

    def test_the_digest_matches_one_computed_from_the_whole_state(self, backend: Any) -> None:
        head = conversation(backend, items=5, size=30)[-1]

        loaded = backend.get(thread_id=THREAD, checkpoint_id=head.id)

        assert backend.verify(loaded) == loaded
        assert loaded.digest == head.digest

    # --- integrity ----------------------------------------------------------------------

    def test_a_tampered_list_item_is_refused_by_every_checkpoint_holding_it(self, backend: Any) -> None:
        written = conversation(backend, items=6, size=30)
        items = written[-1].values["messages"]
        self.tamper(
            backend,
            THREAD,
            row_key(list_digest(items[:3])),
            canonical_json({**items[2], "content": "forged"}),
        )

        for checkpoint in written[2:]:
            with pytest.raises(CorruptCheckpoint) as excinfo:
                backend.get(thread_id=THREAD, checkpoint_id=checkpoint.id)
            assert (excinfo.value.thread_id, excinfo.value.checkpoint_id) == (THREAD, checkpoint.id)
        assert backend.get(thread_id=THREAD, checkpoint_id=written[1].id) == written[1]

    def test_a_tampered_stored_value_is_refused(self, backend: Any) -> None:
        scratch = {"plan": "p" * 200}
        _, first = start(backend, values={"scratch": scratch})
        second = write(backend, first, {"scratch": {"plan": "q" * 200}})
        self.tamper(
            backend,
            THREAD,
            row_key(sha256(canonical_json(scratch).encode())),
            canonical_json({"plan": "forged"}),
        )

        with pytest.raises(CorruptCheckpoint, match=first.id):
            backend.get(thread_id=THREAD, checkpoint_id=first.id)
        assert backend.get(thread_id=THREAD) == second

    def test_tampering_with_a_list_items_data_to_garbage_is_refused(self, backend: Any) -> None:
        head = conversation(backend, items=3, size=30)[-1]
        self.tamper(backend, THREAD, row_key(list_digest(head.values["messages"][:1])), "not json at all")

        with pytest.raises(CorruptCheckpoint):
            backend.get(thread_id=THREAD)

    @pytest.mark.parametrize("which", ["a list item", "a stored value"])
    def test_a_checkpoint_missing_a_stored_row_is_refused_naming_it(self, backend: Any, which: str) -> None:
        scratch = {"plan": "p" * 200}
        messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
        _, first = start(backend, values={"scratch": scratch, "messages": messages[:1]})
        head = write(backend, first, {"scratch": scratch, "messages": messages})
        keys = {
            "a list item": list_digest(messages[:1]),
            "a stored value": sha256(canonical_json(scratch).encode()),
        }
        self.delete_row(backend, THREAD, row_key(keys[which]))

        # Refused like a tampered row (the runtime fails such a thread rather than re-send it).
        with pytest.raises(CorruptCheckpoint) as excinfo:
            backend.get(thread_id=THREAD)
        assert (excinfo.value.thread_id, excinfo.value.checkpoint_id) == (THREAD, head.id)

    def test_values_are_stored_as_canonical_json_without_keys(self, backend: Any) -> None:
        head = conversation(backend, items=3, size=30)[-1]

        stored = self.stored_values(backend, THREAD)

        assert set(stored.values()) >= {canonical_json(m) for m in head.values["messages"]}

    # --- history ------------------------------------------------------------------------

    def test_history_lists_newest_first_without_values(self, backend: Any) -> None:
        written = conversation(backend, items=8, size=10)

        page = backend.history(thread_id=THREAD, limit=3)

        assert ids(page) == ids(written[::-1][:3])
        assert not hasattr(page[0], "values")
        assert page[0].digest == written[-1].digest

    def test_history_pages_back_from_a_checkpoint(self, backend: Any) -> None:
        written = conversation(backend, items=8, size=10)

        page = backend.history(thread_id=THREAD, limit=3, before=written[5].id)

        assert ids(page) == ids(written[4:1:-1])

    def test_history_from_an_unknown_checkpoint_raises_checkpoint_not_found(self, backend: Any) -> None:
        conversation(backend, items=2, size=10)

        with pytest.raises(CheckpointNotFound):
            backend.history(thread_id=THREAD, before="00000000-0000-4000-8000-000000000000")

    def test_delete_thread_removes_its_stored_values(self, backend: Any) -> None:
        conversation(backend, items=3, size=10)

        backend.delete_thread(thread_id=THREAD)

        assert self.stored_values(backend, THREAD) == {}


def _mutate(values: dict[str, Any], rng: random.Random, turn: int) -> dict[str, Any]:
    """A random next state: append, edit in the middle, cut, or change a number's type."""
    messages = [*values["messages"]]
    roll = rng.random()
    if roll < 0.5 or not messages:
        messages.append({"id": f"m{turn}", "content": f"turn {turn}", "n": turn})
    elif roll < 0.7:
        i = rng.randrange(len(messages))
        messages[i] = {**messages[i], "content": f"edited at {turn}"}
    elif roll < 0.85:
        messages = messages[: rng.randrange(len(messages))]
    else:
        i = rng.randrange(len(messages))
        messages[i] = {**messages[i], "n": float(messages[i]["n"])}
    return {"messages": messages, "scratch": {"turn": turn, "note": "s" * rng.randrange(100)}, "turn": turn}
