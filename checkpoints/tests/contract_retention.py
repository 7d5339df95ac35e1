"""Contract: pruning keeps the head, what is protected and what they need; relinks the rest."""

from datetime import timedelta
from typing import Any

from django.utils import timezone

from checkpoints.tests.helpers import THREAD, conversation, ids, message, start, write
from checkpoints.tests.hooks import Hooks


class RetentionContract(Hooks):
    def test_prune_keeps_the_newest_and_every_kept_checkpoint_still_loads(self, backend: Any) -> None:
        written = conversation(backend, items=10, size=100)

        result = backend.prune(thread_id=THREAD, keep_last=3)

        assert (result.checkpoints, ids(backend.history(thread_id=THREAD))) == (7, ids(written[:-4:-1]))
        for checkpoint in written[-3:]:
            assert backend.get(thread_id=THREAD, checkpoint_id=checkpoint.id).values == checkpoint.values
        assert backend.get_thread(thread_id=THREAD).head_id == written[-1].id

    def test_prune_relinks_the_oldest_kept_checkpoint_to_no_parent(self, backend: Any) -> None:
        written = conversation(backend, items=5, size=10)

        backend.prune(thread_id=THREAD, keep_last=2)

        kept = {c.id: c.parent_id for c in backend.history(thread_id=THREAD)}
        assert kept == {written[-1].id: written[-2].id, written[-2].id: None}

    def test_prune_never_deletes_the_head(self, backend: Any) -> None:
        written = conversation(backend, items=4, size=10)
        fork = write(backend, written[0], {"messages": []}, head=written[-1].id)

        backend.prune(thread_id=THREAD, keep_last=0)

        assert ids(backend.history(thread_id=THREAD)) == [fork.id]
        assert backend.get(thread_id=THREAD).values == {"messages": []}

    def test_prune_keeps_protected_checkpoints_and_links_their_children_to_them(self, backend: Any) -> None:
        written = conversation(backend, items=8, size=10)

        backend.prune(thread_id=THREAD, keep_last=2, protected=[written[2].id])

        kept = {c.id: c.parent_id for c in backend.history(thread_id=THREAD)}
        assert kept == {written[-1].id: written[-2].id, written[-2].id: written[2].id, written[2].id: None}
        assert backend.get(thread_id=THREAD, checkpoint_id=written[2].id).values == written[2].values

    def test_prune_deletes_checkpoints_older_than_the_cutoff(self, backend: Any) -> None:
        written = conversation(backend, items=5, size=10)
        long_ago = timezone.now() - timedelta(days=30)
        for checkpoint in written[:3]:
            self.backdate(backend, THREAD, checkpoint.id, long_ago)

        result = backend.prune(thread_id=THREAD, older_than=timezone.now() - timedelta(days=7))

        assert result.checkpoints == 3
        assert ids(backend.history(thread_id=THREAD)) == ids(written[:2:-1])

    def test_an_old_head_survives_its_ttl(self, backend: Any) -> None:
        _, head = start(backend)
        self.backdate(backend, THREAD, head.id, timezone.now() - timedelta(days=30))

        assert backend.prune(thread_id=THREAD, older_than=timezone.now()).checkpoints == 0
        assert backend.get(thread_id=THREAD).id == head.id

    def test_prune_frees_the_values_only_pruned_checkpoints_held(self, backend: Any) -> None:
        written = conversation(backend, items=6, size=2000)
        short = write(backend, written[-1], {"messages": [message(50)]})
        before = backend.storage_bytes(thread_id=THREAD)

        result = backend.prune(thread_id=THREAD, keep_last=1)

        assert result.values == 6  # the six messages nothing kept holds any more
        assert backend.storage_bytes(thread_id=THREAD) < before - 6 * 2000
        assert backend.get(thread_id=THREAD).values == short.values

    def test_prune_keeps_the_values_kept_checkpoints_share(self, backend: Any) -> None:
        written = conversation(backend, items=6, size=100)

        result = backend.prune(thread_id=THREAD, keep_last=1)

        assert result.values == 0  # the head's list holds every item
        assert backend.get(thread_id=THREAD).values == written[-1].values

    def test_prune_deletes_the_pending_writes_of_pruned_checkpoints(self, backend: Any) -> None:
        written = conversation(backend, items=3, size=10)
        backend.put_write(thread_id=THREAD, checkpoint_id=written[0].id, task_id="t", kind="result", value=1)

        backend.prune(thread_id=THREAD, keep_last=1)

        assert backend.get_writes(thread_id=THREAD, checkpoint_id=written[0].id) == {}

    def test_prune_with_no_limits_deletes_nothing(self, backend: Any) -> None:
        written = conversation(backend, items=3, size=10)

        assert backend.prune(thread_id=THREAD).checkpoints == 0
        assert len(backend.history(thread_id=THREAD)) == len(written)

    def test_prune_candidates_are_the_threads_with_something_to_prune(self, backend: Any) -> None:
        conversation(backend, items=4, size=10)
        start(backend, "thread-2", agent="refunds")
        start(backend, "thread-3", agent="outreach")

        assert backend.agents() == ["outreach", "refunds"]
        assert backend.prune_candidates(agent="refunds", keep_last=2) == [THREAD]
        assert backend.prune_candidates(agent="refunds", older_than=timezone.now() + timedelta(days=1)) == [
            THREAD
        ]
