"""Tools are plain typed Python functions; their argument schema comes from the signature."""

import copy
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, get_type_hints

import pydantic
from django.db import models

from checkpoints import json_text
from checkpoints.storable_text import first_problem

if TYPE_CHECKING:
    from checkpoints.store import Store


class Decision(models.TextChoices):
    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    RESPOND = "respond"


_QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
MAX_EXPIRY_S = 10 * 365 * 86400


@dataclass(frozen=True)
class Expiry:
    """What happens to a request nobody decides within `after_s` seconds.

    `Expiry(3600, "reject", reason="...")` rejects it and the agent reads the reason as the tool's
    result; `Expiry(900, "escalate", to_queue="supervisors")` moves it to another queue.
    """

    after_s: float
    action: Literal["reject", "escalate"] = "reject"
    reason: str = ""
    """For reject: what the agent is told. For escalate: shown to reviewers of the new queue."""
    to_queue: str = ""

    def __post_init__(self) -> None:
        # NaN fails the comparison too; a deadline past year 9999 cannot be stored.
        if not (isinstance(self.after_s, int | float) and 0 < self.after_s <= MAX_EXPIRY_S):
            raise ValueError(
                f"Expiry.after_s must be a positive number of seconds, at most {MAX_EXPIRY_S:,} (ten "
                f"years), got {self.after_s!r}"
            )
        if self.action not in ("reject", "escalate"):
            raise ValueError(f"Expiry.action must be 'reject' or 'escalate', got {self.action!r}")
        if self.action == "escalate" and not _QUEUE_NAME.match(self.to_queue):
            raise ValueError(f"Expiry(action='escalate') needs to_queue, a queue name; got {self.to_queue!r}")


@dataclass(frozen=True)
class Approval:
    """A gate: the runtime stops before the tool runs until a reviewer decides."""

    queue: str = "default"
    decisions: tuple[Decision, ...] = (Decision.APPROVE, Decision.EDIT, Decision.REJECT, Decision.RESPOND)
    description: str | Callable[[dict[str, Any]], str] = ""
    """Markdown shown to the reviewer: a template whose `{arg}` placeholders are filled from the
    arguments, or a function of the arguments."""
    expiry: Expiry | None = None
    """None (the default): the request stays pending until someone decides it."""
    summary: str | Callable[[dict[str, Any]], str] = ""
    """One plain-text line for the inbox ("Refund $129.99 to Grace Hopper"): a `{arg}` template or
    a function of the arguments. Empty: the tool's name and its arguments."""
    render: str | Callable[[dict[str, Any]], str] = ""
    """How a decision page shows the arguments: a template name (rendered with `args`), or a
    function of the arguments returning markdown. Empty: each argument on its own line."""
    consequential: bool = False
    """Moves money or reaches people: approving it from the keyboard asks to confirm."""

    def describe(self, args: dict[str, Any]) -> str:
        unfilled = self.description if isinstance(self.description, str) else ""
        return _fill(self.description, args, unfilled=unfilled)

    def summarize(self, args: dict[str, Any]) -> str:
        """The declared summary line, or "" (the caller falls back to a generic one)."""
        return " ".join(_fill(self.summary, args, unfilled="").split())

    @property
    def editable(self) -> bool:
        return Decision.EDIT in self.decisions


def _fill(template: str | Callable[[dict[str, Any]], str], args: dict[str, Any], *, unfilled: str) -> str:
    """A `{arg}` template or a function of the arguments, filled from them. Arguments that do
    not fit (a model's odd proposal) give "" for a function and `unfilled` for a template."""
    if callable(template):
        try:
            return str(template(args))
        except (KeyError, TypeError, ValueError, AttributeError):
            return ""
    try:
        return template.format(**args)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):  # TypeError: "{note:.40}" of None
        return unfilled


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know about where it runs."""

    thread_id: str
    checkpoint_id: str
    tool_call_id: str

    @property
    def idempotency_key(self) -> str:
        """Stable across re-runs of the same call: pass it to external systems."""
        return f"{self.thread_id}:{self.checkpoint_id}:{self.tool_call_id}"

    @property
    def store(self) -> "Store":
        """Cross-thread memory of this thread's tenant: its metadata's "tenant", else its agent."""
        from checkpoints.store import store_for_thread

        return store_for_thread(thread_id=self.thread_id)


class ToolArgumentsError(ValueError):
    """Arguments failed the tool's schema; `errors` maps field names to plain sentences."""

    def __init__(self, tool: str, errors: dict[str, str]) -> None:
        detail = "; ".join(errors.values())
        super().__init__(f"Invalid arguments for {tool}: {detail}")
        self.errors = errors


@dataclass(frozen=True)
class Tool:
    name: str
    fn: Callable[..., Any]
    description: str
    args_model: type[pydantic.BaseModel]
    approval: Approval | None = None
    context_param: str = ""
    """The name of the parameter typed ToolContext, if the function takes one."""

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.args_schema(),
            },
        }

    def args_schema(self) -> dict[str, Any]:
        # A copy: callers may change it, and the model is built every step from these.
        return copy.deepcopy(self._args_schema)

    @cached_property
    def _args_schema(self) -> dict[str, Any]:
        # Built once per tool: pydantic's schema generation cost more than a step's queries.
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Return the arguments coerced to the schema, as JSON, or raise ToolArgumentsError."""
        return self._validated(args).model_dump(mode="json")

    def _validated(self, args: Any) -> pydantic.BaseModel:
        if isinstance(args, str):
            try:
                args = json.loads(args or "{}")
            except json.JSONDecodeError as exc:
                raise ToolArgumentsError(
                    self.name, {"__all__": f"The arguments are not valid JSON ({exc.msg})"}
                ) from exc
        if not isinstance(args, dict):
            raise ToolArgumentsError(self.name, {"__all__": "The arguments must be a JSON object"})
        if problem := unstorable_arguments(args):
            # Refused as the HTTP API refuses such text, before a gate or a result could fail to
            # store it (keys are named by repr: the sentence the model reads holds neither).
            raise ToolArgumentsError(self.name, {"__all__": problem})
        try:
            return self.args_model.model_validate(args)
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(self.name, plain_errors(self.args_model, exc)) from exc

    def invoke(self, args: dict[str, Any], *, context: ToolContext) -> Any:
        """Call the function with its arguments as its signature types them (a date as a date, a
        model as the model; stored as JSON, they are read back through the schema here)."""
        kwargs = dict(self._validated(args))  # its fields, each as validated (not dumped)
        if self.context_param:
            kwargs[self.context_param] = context
        return self.fn(**kwargs)


def plain_errors(model: type[pydantic.BaseModel] | None, exc: pydantic.ValidationError) -> dict[str, str]:
    """Field name -> a sentence a reviewer reads: "Amount must be greater than 0" (the field's
    title if `model` gives one, else its name)."""
    errors: dict[str, str] = {}
    for error in exc.errors():
        path = ".".join(str(p) for p in error["loc"]) or "__all__"
        field = model.model_fields.get(str(error["loc"][0])) if model and error["loc"] else None
        name = (field.title if field else None) or str(error["loc"][-1] if error["loc"] else "")
        label = name.replace("_", " ").capitalize() if name else "The arguments"
        errors.setdefault(path, f"{label} {_plain(error)}")
    return errors


def _plain(error: Any) -> str:
    """Pydantic's message as the end of a sentence whose subject is the field."""
    kind, ctx, msg = error["type"], error.get("ctx") or {}, str(error["msg"])
    sentences = {
        "missing": "is required",
        "extra_forbidden": "is not an argument of this tool",
        "greater_than": "must be greater than {gt}",
        "greater_than_equal": "must be at least {ge}",
        "less_than": "must be less than {lt}",
        "less_than_equal": "must be at most {le}",
        "string_too_long": "must be at most {max_length} characters",
        "string_pattern_mismatch": "is not in the expected form",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "int_type": "must be a whole number",
        "float_parsing": "must be a number",
        "string_type": "must be text",
        "bool_parsing": "must be yes or no",
    }
    if kind == "string_too_short":
        return (
            "must not be empty"
            if ctx.get("min_length") == 1
            else "must be at least {min_length} characters".format(**ctx)
        )
    if kind in sentences:
        try:
            return sentences[kind].format(**ctx)
        except (KeyError, IndexError):
            return sentences[kind].split(" {")[0]
    if kind == "value_error" and "email" in msg:
        return "must be an email address (name@example.com)"
    msg = msg.removeprefix("Value error, ")
    return (
        "must be " + msg[len("Input should be ") :]
        if msg.startswith("Input should be ")
        else msg[:1].lower() + msg[1:]
    )


def _args_model(fn: Callable[..., Any], name: str) -> tuple[type[pydantic.BaseModel], str]:
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param = ""
    for param in inspect.signature(fn).parameters.values():
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            # A tool is called with its arguments by name: *args, **kwargs and positional-only
            # parameters could never be given.
            raise TypeError(f"tool {name!r}: parameter {param.name!r} must be a named parameter")
        if hints.get(param.name) is ToolContext:
            context_param = param.name
            continue
        if param.name not in hints:
            raise TypeError(f"tool {name!r}: parameter {param.name!r} needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (hints[param.name], default)
    config = pydantic.ConfigDict(extra="forbid")
    model = pydantic.create_model(f"{name}_args", __config__=config, **fields)
    return model, context_param


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, approval: Approval | None = None
) -> Any:
    """Turn a typed function into a Tool: `@tool` or `@tool(approval=Approval(queue="refunds"))`."""

    def wrap(func: Callable[..., Any]) -> Tool:
        tool_name = name or func.__name__
        args_model, context_param = _args_model(func, tool_name)
        doc = inspect.getdoc(func) or ""
        return Tool(
            name=tool_name,
            fn=func,
            description=doc,
            args_model=args_model,
            approval=approval,
            context_param=context_param,
        )

    return wrap(fn) if fn is not None else wrap


def unstorable_arguments(arguments: Any) -> str:
    """Why a tool call's arguments (JSON text, or parsed) cannot be stored, "" if they can: a
    lone surrogate or a NUL once parsed (a model can write "\\ud800"), which the tool refuses
    so that no gate opens for them. Text that is not JSON is left to the tool's own check."""
    if isinstance(arguments, str):
        try:
            arguments = json_text.loads(arguments or "{}")
        except ValueError:  # malformed, too deep, NaN, an endless integer
            return ""
    problem = first_problem(arguments, "")
    return f"The arguments cannot be stored: {problem}" if problem else ""
