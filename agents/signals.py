"""Signals the runtime sends, so upper layers (approvals) react without being imported here.

gates_opened is sent inside the step's transaction (receivers write rows atomically with the
checkpoint); thread_changed is sent after commit (receivers push to browsers).
"""

from django.dispatch import Signal

# kwargs: thread_id: str, agent: str, checkpoint: CheckpointData, gates: list[Gate]
gates_opened = Signal()

# kwargs: thread_id: str, checkpoint_id: str | None, status: str; resent=True when a commit's
# follow-up is sent again because it may have been lost (agents.runtime.run_step)
thread_changed = Signal()

# kwargs: thread_id: str, checkpoint_id: str | None, reason: str
# Sent inside the transaction when the head moves past open gates (edit, fork, cancel).
gates_superseded = Signal()
