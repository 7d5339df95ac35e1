"""What a run of the LangGraph server API may ask: its body (`RunIn`), the options this server
carries out, those it refuses (a 422 naming them: nothing is started), the checkpoint a client
names, and the ids a run's `config` may carry (anything else it sets is refused)."""

from typing import Any, Literal

from langgraph.pregel import Pregel
from ninja import Schema
from pydantic import ConfigDict

from agents.actions import InvalidInput
from approvals.api.langgraph_stream import STREAM_MODES

Stateless = Literal["wait", "background"]
"""How a client runs a stateless run: waits for it (runs.wait, runs.stream), or not (runs.create)."""
NO_CHECKPOINT_YET = "a stateless run starts a new thread, which has no checkpoint yet; nothing was done"
NOT_SERVED = "not served by this server; nothing was done"
DURABILITIES = ("sync", "async", "exit")
UNSERVED_RUN_OPTIONS = (
    "interrupt_before",
    "interrupt_after",
    "webhook",
    "after_seconds",
    "context",
    "feedback_keys",
    "langsmith_tracer",
)
"""Refused when given: a run that ignored them would not stop where (or report when) the client
asked, nor run with the context the graph was meant to read, nor leave the feedback or traces
the client would look for in LangSmith."""


class RunIn(Schema):
    """A run's body as LangGraph's client sends it (it leaves out what is None). A field this
    server does not know is a 422 naming it, as an option it does not serve is."""

    model_config = ConfigDict(extra="forbid")

    assistant_id: str
    input: Any = None
    command: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    checkpoint_id: str | None = None
    metadata: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    multitask_strategy: str | None = None
    if_not_exists: str | None = None
    stream_mode: str | list[str] = "values"
    # The client sends these two on every create and stream (False): only False is served.
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    durability: str | None = None
    checkpoint_during: bool | None = None
    on_completion: str | None = None
    on_disconnect: str | None = None
    # A resume that answers no waiting interrupt is always refused here (nothing changes): what
    # True asks; False would have it ignored instead, and gets the refusal.
    strict_resume: bool | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    webhook: Any = None
    after_seconds: Any = None
    context: Any = None
    feedback_keys: Any = None
    langsmith_tracer: Any = None


def stream_modes(body: RunIn) -> set[str]:
    """The stream modes a run names, each one served (a 422 otherwise)."""
    modes = {body.stream_mode} if isinstance(body.stream_mode, str) else set(body.stream_mode)
    if not modes or modes - STREAM_MODES:
        raise InvalidInput({"stream_mode": "served: 'values', 'updates', 'messages-tuple' and 'events'"})
    return modes


def joined_stream_modes(
    given: list[str] | None, *, cancel_on_disconnect: bool, last_event_id: str | None
) -> set[str]:
    """The stream modes runs.join_stream asks (a run's own default, "values", when it names none),
    each one served; refused, all at once, what a join would not carry out as asked."""
    refused = {}
    if cancel_on_disconnect:  # as a run's on_disconnect "cancel": a dropped connection would end it
        refused["cancel_on_disconnect"] = _not_served("a run goes on without its client")
    if last_event_id:
        refused["Last-Event-ID"] = _not_served("no stream is kept to replay")
    modes = {mode for mode in given or [] if mode} or {"values"}  # the client sends "" for none
    if modes - STREAM_MODES:
        refused["stream_mode"] = "served: 'values', 'updates', 'messages-tuple' and 'events'"
    if refused:
        raise InvalidInput(refused)
    return modes


def check_run_options(body: RunIn, *, graph: Pregel, stateless: bool = False) -> None:
    """Refuse, all at once, every option of the run this server would not carry out as asked.
    `stateless`: the run makes its own thread (runs.wait, runs.stream or runs.create on None)."""
    given = [name for name in UNSERVED_RUN_OPTIONS if getattr(body, name) not in (None, [], "", {})]
    refused = dict.fromkeys(given, NOT_SERVED)
    if stateless:
        refused.update(_stateless_refusals(body))
    elif body.on_completion not in (None, "keep"):  # "delete" is for stateless runs
        refused["on_completion"] = _not_served("only 'keep' is on a thread's run: threads are kept")
    if body.multitask_strategy not in (None, "reject"):
        refused["multitask_strategy"] = _not_served("only 'reject' is: a run on a busy thread is a 409")
    if body.if_not_exists not in (None, "create", "reject"):
        refused["if_not_exists"] = "'create' or 'reject'; nothing was done"
    # Every step is checkpointed before the next begins ("sync"): "async" and "exit" (and the
    # deprecated checkpoint_during, either way) ask for less, and a stronger one breaks no promise.
    if body.durability not in (None, *DURABILITIES):
        refused["durability"] = "one of 'sync', 'async', 'exit'; nothing was done"
    # "cancel" would end the thread for good (as runs.cancel does) when the client goes away: a
    # dropped connection would, and a wait cannot even see its client leave.
    if body.on_disconnect not in (None, "continue"):
        refused["on_disconnect"] = _not_served("only 'continue' is: a run goes on without its client")
    # On a graph with no subgraphs there is nothing more to stream; on one with, it is not streamed.
    if body.stream_subgraphs and any(True for _ in graph.get_subgraphs()):
        refused["stream_subgraphs"] = _not_served("this graph's subgraphs are not streamed")
    if body.stream_resumable:
        refused["stream_resumable"] = _not_served("no stream is kept to replay")
    if refused:
        raise InvalidInput(refused)
    stream_modes(body)


def _stateless_refusals(body: RunIn) -> dict[str, str]:
    """What a stateless run may not ask: a resume or a checkpoint (its thread is new: there is no
    interrupt to answer, no checkpoint to name), or an on_completion but "delete" or "keep"."""
    refused = {}
    if body.on_completion not in (None, "delete", "keep"):
        refused["on_completion"] = "'delete' or 'keep'; nothing was done"
    if body.command is not None:
        refused["command"] = (
            "a stateless run starts a new thread: resume an interrupt on its thread; nothing was done"
        )
    if body.checkpoint or body.checkpoint_id:
        named = "checkpoint" if body.checkpoint else "checkpoint_id"
        refused[named] = NO_CHECKPOINT_YET
    return refused


def _not_served(why: str) -> str:
    return f"not served by this server ({why}); nothing was done"


def check_cancel_action(action: str) -> None:
    """runs.cancel's `action`: "interrupt" is served; "rollback" would delete the run's
    checkpoints, which the ledger and the reviewers' decisions point at."""
    if action == "rollback":
        raise InvalidInput({"action": _not_served("'rollback': checkpoints are kept")})
    if action != "interrupt":
        raise InvalidInput({"action": "'interrupt' or 'rollback'; nothing was done"})


SERVED_CONFIGURABLE = ("thread_id", "checkpoint_id", "checkpoint_ns")
"""What a run's config may name: its thread and checkpoint (LangGraph's own clients send them)."""


def config_checkpoint(config: dict[str, Any] | None, *, thread_id: str) -> str | None:
    """The checkpoint a run's config names. Anything else it sets (a `recursion_limit`, tags, a
    `configurable` value the graph would read) is refused: the run would go on without it."""
    given = {k: v for k, v in (config or {}).items() if v not in (None, "", [], {})}
    configurable = given.pop("configurable", {})
    if not isinstance(configurable, dict):
        raise InvalidInput({"config.configurable": "an object"})
    ids = {k: v for k, v in configurable.items() if v not in (None, "")}  # checkpoint_ns "": the root graph
    unserved = [f"config.{k}" for k in given] + [
        f"config.configurable.{k}" for k in ids if k not in SERVED_CONFIGURABLE
    ]
    if unserved:
        raise InvalidInput({name: NOT_SERVED for name in unserved})
    if ids.get("thread_id", thread_id) != thread_id:
        raise InvalidInput(
            {"config.configurable.thread_id": "another thread than the run's; nothing was done"}
        )
    if "checkpoint_ns" in ids:
        raise InvalidInput({"config.configurable.checkpoint_ns": "only the graph's own ('') is served"})
    checkpoint_id = ids.get("checkpoint_id")
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise InvalidInput({"config.configurable.checkpoint_id": "a checkpoint id"})
    return checkpoint_id


def named_checkpoint(checkpoint_id: str | None, checkpoint: dict[str, Any] | None) -> str | None:
    """The checkpoint a client names: an id, or a state's `checkpoint` as this server returned it."""
    given = checkpoint or {}
    return checkpoint_id or given.get("gatehouse_checkpoint") or given.get("checkpoint_id") or None
