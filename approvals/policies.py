"""Policies' CEL conditions: checked when saved, compiled once per text, evaluated at a gate.

Conditions run in a CEL interpreter (`common-expression-language`), never Python `eval`: they
read the variables below and nothing else. A condition that fails at evaluation (a missing
field, a wrong type, macros too costly for the lists the call brings) fails safe: it is logged
and no later policy decides the call, a person does.

    args     the proposed arguments of the call
    agent    the agent's name            tool    the gated tool's name
    thread   {id, tenant, metadata}      now     the time (a CEL timestamp)
    effects  this thread's calls of the tool that ran or are approved to run (one approved
             earlier at the same gate too): {count, sum: {arg: total}, args: [...]}
"""

import logging
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import cel
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from approvals import policy_cache
from approvals.cel_scope import (
    BUILTIN_NAMES,
    FUNCTIONS,
    MACROS,
    NAME,
    TOKEN,
    called_functions,
    did_you_mean,
    explain_failure,
    free_names,
    read_path,
    syntax_error,
)
from approvals.models import Policy, PolicyAction

log = logging.getLogger(__name__)

MAX_WHEN_CHARS = 2000
MAX_APPROVERS = 10
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
VARIABLES = ("args", "agent", "tool", "thread", "effects", "now")


@lru_cache(maxsize=4096)
def compiled(when: str) -> Any:
    """The compiled program of a condition (cached by its text: an edit compiles anew)."""
    return cel.compile(when)


def _sample_context() -> Any:
    return cel.Context(
        variables={
            "args": {},
            "agent": "",
            "tool": "",
            "thread": {"id": "", "tenant": "", "metadata": {}},
            "effects": {"count": 0, "sum": {}, "args": []},
            "now": timezone.now(),
        }
    )


MAX_MACRO_DEPTH = 2  # `.all/.exists/.map/...` inside another's inside another's: refused
MAX_MACRO_COST = 5_000  # estimated iterations; 300 x 300 through .map took about 3 s
UNKNOWN_LIST_SIZE = 50  # a list the condition reads (effects.args, an argument): its size unknown


def _macro_cost(
    when: str, *, unknown: int = UNKNOWN_LIST_SIZE, values: dict[str, Any] | None = None
) -> tuple[int, int]:
    """(deepest nesting of comprehension macros, estimated iterations): a macro over a list
    runs once per element, and a nested one that many times over. A list the condition reads
    counts as `unknown` elements. With the call's `values`, a list or map read inside a macro
    counts its length each time the macro's body runs: the interpreter copies it at every read
    (`x in args.b` inside `args.a.all(...)` over two 20,000-item lists took 28 s)."""
    plan = _macro_plan(when)
    macros = [chain for chain, path in plan if not path]
    cost = sum(math.prod(size or unknown for size in chain) for chain in macros)
    if values is not None:
        reads = ((chain, _length(values, path)) for chain, path in plan if path)
        cost += sum(math.prod(size or unknown for size in chain) * length for chain, length in reads)
    return max((len(chain) for chain in macros), default=0), cost


@lru_cache(maxsize=4096)
def _macro_plan(when: str) -> tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]:
    """Each macro's receiver sizes, from the outermost macro around it in (a list literal's
    elements, or 0 for a list only known when the condition runs), with the path (); and each
    variable's path read in a macro's body, with the sizes of the macros around it. Cached:
    gates ask it."""
    tokens = [m.group() for m in TOKEN.finditer(when) if m.lastgroup != "skip"]
    opened: list[int] = []  # the token index of each open bracket
    macros: list[tuple[int, tuple[int, ...]]] = []  # (bracket depth its call opened, sizes)
    plan: list[tuple[tuple[int, ...], tuple[str, ...]]] = []
    for i, token in enumerate(tokens):
        if token in "([{":
            opened.append(i)
            if i >= 2 and tokens[i - 2] == "." and tokens[i - 1] in MACROS and token == "(":
                chain = (*(macros[-1][1] if macros else ()), _receiver_size(tokens, i - 3))
                macros.append((len(opened), chain))
                plan.append((chain, ()))
        elif token in ")]}" and opened:
            if macros and macros[-1][0] == len(opened):
                macros.pop()
            opened.pop()
        elif macros and token in VARIABLES and tokens[i - 1 : i] != ["."] and (path := read_path(tokens, i)):
            plan.append((macros[-1][1], path))
    return tuple(plan)


def _length(values: dict[str, Any], path: tuple[str, ...]) -> int:
    """The length of the list or map at path in values (0 for anything else, or nothing)."""
    value: Any = values
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return len(value) if isinstance(value, list | tuple | dict) else 0


def _receiver_size(tokens: list[str], end: int) -> int:
    """The elements of the list literal that is a macro's receiver ending at tokens[end] (at
    least one), or 0 for a list known only when the condition runs (one it reads, or computes
    in parentheses or by a call, as `.map(...)`)."""
    if end < 0 or tokens[end] not in "]}":
        return 0
    depth, start = 0, end
    while start >= 0:  # back to the bracket that opens the receiver
        depth += tokens[start] in ")]}"
        depth -= tokens[start] in "([{"
        if depth == 0:
            break
        start -= 1
    if start > 0 and (NAME.fullmatch(tokens[start - 1]) or tokens[start - 1] in ")]"):
        return 0  # an index (`args.lists[0]`), not a literal
    span = tokens[start : end + 1]
    elements = sum(1 for t in span if t == "[") + sum(1 for t in span if t == ",")
    return max(elements, 1)


def _largest_list(value: Any) -> int:
    """The most elements of any list or map in value, however deep (a macro iterates either)."""
    largest, stack = 0, [value]
    while stack:  # not recursive: the arguments may nest deeper than Python's stack allows
        item = stack.pop()
        if isinstance(item, dict):
            largest = max(largest, len(item))
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            largest = max(largest, len(item))
            stack.extend(item)
    return largest


def condition_error(when: str) -> str:
    """Why a condition cannot be used ("" when it can): a CEL syntax error, or a name that is
    neither a variable above nor a CEL function."""
    if not when.strip():
        return "Write a condition; `true` matches every call."
    if len(when) > MAX_WHEN_CHARS:
        return f"The condition is {len(when)} characters; the limit is {MAX_WHEN_CHARS}."
    try:
        program = compiled(when)
    except Exception as exc:
        return syntax_error(str(exc))
    # Checked before the sample run below: a nest of macros over long lists takes seconds.
    depth, cost = _macro_cost(when)
    if depth > MAX_MACRO_DEPTH:
        return f"The condition nests {depth} macros (all, exists, map, ...); the limit is {MAX_MACRO_DEPTH}."
    if cost > MAX_MACRO_COST:
        return (
            f"The condition's macros would run about {cost:,} times per call; the limit is "
            f"{MAX_MACRO_COST:,}. Use shorter lists, or fewer macros inside macros."
        )
    # Read from the program, not found by running it: `false && typo` never evaluates `typo`.
    # A macro's own variable is known where the macro binds it, and nowhere else.
    unknown = (set(program.variables()) - set(VARIABLES) - BUILTIN_NAMES) & free_names(when)
    if unknown:
        names = ", ".join(f"{n}{did_you_mean(n, VARIABLES)}" for n in sorted(unknown))
        return f"CEL error: unknown variable {names}. The variables are: {', '.join(VARIABLES)}."
    if functions := called_functions(program.functions()):
        name, hint = functions[0], did_you_mean(functions[0], FUNCTIONS)
        return f"CEL error: {name}() is not a function of this CEL interpreter{hint}."
    sample = _sample_context()
    try:
        program.execute(sample)
    except RuntimeError as exc:  # a function on what it does not take; missing fields are fine here
        if "Undefined variable or function" in str(exc):
            return f"CEL error: {explain_failure(when, exc, sample.variables)}"
    except Exception:  # a sample without fields may fail any other way
        pass
    return ""


def check_policy_fields(*, when: str, action: str, queue: str, approvers: int) -> None:
    """Raise ValidationError (by field) unless the policy can be saved as it is."""
    errors: dict[str, str] = {}
    if error := condition_error(when or ""):
        errors["when"] = error
    if action == PolicyAction.ROUTE and not QUEUE_NAME.match(queue or ""):
        errors["queue"] = "Route needs a queue: lowercase letters, digits, '-' or '_'."
    if action == PolicyAction.REQUIRE and not 1 <= (approvers or 0) <= MAX_APPROVERS:
        errors["approvers"] = f"Require needs between 1 and {MAX_APPROVERS} approvers."
    if errors:
        raise ValidationError(errors)


@dataclass(frozen=True)
class Rule:
    """A policy as it stands when a gate opens."""

    id: int
    name: str
    version: int
    when: str
    action: str
    queue: str
    approvers: int
    groups: tuple[str, ...]
    message: str
    agent: str = ""
    thread_id: str = ""
    until: datetime | None = None
    order: int = 0
    tool: str = ""
    enabled: bool = True
    created_at: datetime | None = None

    @property
    def label(self) -> str:
        return f"'{self.name}' v{self.version}"

    @property
    def standing(self) -> bool:
        """A standing decision: an approval scoped to one thread (a reviewer's "keep approving")."""
        return bool(self.thread_id) and self.action == PolicyAction.APPROVE

    @property
    def precedence(self) -> tuple[bool, int, int]:
        """Where it is tried: every other policy by order, then the standing decisions by order.
        A standing decision only decides what would otherwise go to a person, whatever order an
        admin gives a policy; an admin's deny, route or require scoped to one thread is no
        standing decision and keeps its order (after them, a policy for all threads with a
        higher order approved what the admin meant to stop on that thread)."""
        return (self.standing, self.order, self.id)

    def applies(self, *, agent: str, thread_id: str, now: datetime) -> bool:
        """Whether the rule covers a call by `agent` on the thread at `now` (its tool aside). A
        standing decision also needs made_on, which asks the thread's age (a query)."""
        return (
            self.agent in ("", agent)
            and self.thread_id in ("", thread_id)
            and (self.until is None or self.until > now)
        )

    def made_on(self, *, thread_created: datetime) -> bool:
        """Whether a standing decision was made on this thread, not on an older one of the same
        id: a deleted thread's id may be used again, by a thread nobody reviewed. That thread is
        newer than the decision (one on a thread is made after the thread was created)."""
        return not self.thread_id or (self.created_at is not None and thread_created <= self.created_at)


RULE_COLUMNS = (
    *("id", "name", "version", "when", "action", "queue", "approvers", "message"),
    *("agent", "thread_id", "until", "order", "created_at"),
)


def rules_for(
    *, agent: str, tool: str, thread_id: str, now: datetime | None = None, fresh: bool = False
) -> list[Rule]:
    """The enabled policies that apply to a call of `tool` by `agent` on the thread, in order;
    `fresh`: read from the database, not this process's cache."""
    now = now or timezone.now()
    rules = load_rules(tool) if fresh else tool_rules(tool)
    return [r for r in rules if r.applies(agent=agent, thread_id=thread_id, now=now)]


def tool_rules(tool: str) -> list[Rule]:
    """Every enabled policy of the tool, in order (standing decisions of all threads included):
    cached in this process until a policy changes."""
    return policy_cache.cached(tool, load=load_rules)


def load_rules(tool: str) -> list[Rule]:
    """Read the tool's enabled policies from the database, in order."""
    rows = list(
        Policy.objects.filter(enabled=True, tool=tool)
        .filter(Q(until__isnull=True) | Q(until__gt=timezone.now()))  # expired standing decisions
        .values_list(*RULE_COLUMNS)
    )
    # Plain rows, not model instances: this runs at every gate. Groups only matter for require.
    groups: dict[int, list[str]] = {}
    required = [r[0] for r in rows if r[4] == PolicyAction.REQUIRE]
    if required:
        through = Policy.groups.through.objects.filter(policy_id__in=required)
        for policy_id, name in through.values_list("policy_id", "group__name"):
            groups.setdefault(policy_id, []).append(name)
    rules = [
        Rule(
            **dict(zip(RULE_COLUMNS, row, strict=True)),  # the columns are the Rule's fields
            groups=tuple(sorted(groups.get(row[0], []))),
            tool=tool,
        )
        for row in rows
    ]
    return sorted(rules, key=lambda r: r.precedence)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def effects_summary(args_done: Iterable[dict[str, Any]], *, current: dict[str, Any]) -> dict[str, Any]:
    """What `effects` holds: how many calls ran, their arguments, and each numeric argument's
    total (0 for each numeric argument of the current call, so `effects.sum.x` always exists)."""
    done = list(args_done)
    sums: dict[str, int | float] = {k: 0 for k, v in current.items() if _is_number(v)}
    for args in done:
        for key, value in args.items():
            if _is_number(value):
                sums[key] = sums.get(key, 0) + value
    return {"count": len(done), "sum": sums, "args": done}


def gate_variables(
    *, args: dict[str, Any], agent: str, tool: str, thread_id: str, metadata: dict[str, Any], effects: Any
) -> dict[str, Any]:
    tenant = metadata.get("tenant") if isinstance(metadata.get("tenant"), str) else ""
    return {
        "args": args,
        "agent": agent,
        "tool": tool,
        "thread": {"id": thread_id, "tenant": tenant, "metadata": metadata},
        "effects": effects,
        "now": timezone.now(),
    }


LEFT_TO_A_PERSON = "Left to a person: "
"""How a request's status_reason starts when a policy could not be evaluated on its call."""


@dataclass(frozen=True)
class Unevaluated:
    """A condition that could not be evaluated on the call. Its arguments come from a model,
    which a prompt may steer: a deny that cannot be evaluated must not let a later approve
    decide, so no later policy decides the call; a person does."""

    rule: Rule | None
    """The policy whose condition failed; None when the call's variables are not CEL values."""
    error: str

    @property
    def reason(self) -> str:
        """Why no policy decided the call, as the request's pages show it."""
        which = f"policy {self.rule.label}" if self.rule else "the policies"
        return f"{LEFT_TO_A_PERSON}{which} could not be evaluated on this call ({self.error})."[:300]


def first_match(
    rules: list[Rule], *, variables: Callable[[bool], dict[str, Any]]
) -> Rule | Unevaluated | None:
    """The first rule whose condition is true, Unevaluated if a condition before it failed to
    evaluate (or would cost too much on this call's lists), or None. `variables(with_effects)`
    builds the context; effects are read only when a condition mentions them (a query)."""
    if not rules:
        return None
    try:
        values = variables(any("effects" in r.when for r in rules))
        context = cel.Context(variables=values)
    except Exception as exc:
        log.exception("policies not evaluated: the call's variables are not CEL values")
        return Unevaluated(rule=None, error=f"its variables are not CEL values: {exc}")
    largest: int | None = None  # the longest list the call brings, measured once if a macro asks
    for rule in rules:
        if _macro_plan(rule.when):
            largest = _largest_list(values) if largest is None else largest
            _, cost = _macro_cost(rule.when, unknown=max(largest, UNKNOWN_LIST_SIZE), values=values)
            if cost > MAX_MACRO_COST:
                return _failed(
                    rule,
                    f"its macros would run about {cost:,} times on this call's lists (a list read "
                    f"inside a macro counts its length each time); the limit is {MAX_MACRO_COST:,}",
                )
        try:
            result = compiled(rule.when).execute(context)
        except Exception as exc:
            return _failed(rule, explain_failure(rule.when, exc, values))
        if result is True:
            return rule
        if not isinstance(result, bool):
            return _failed(rule, f"its condition gave {result!r:.80}, not true or false")
    return None


def _failed(rule: Rule, error: str) -> Unevaluated:
    log.warning(
        "policy %s could not be evaluated, so no later policy decides the call: %s", rule.label, error
    )
    return Unevaluated(rule=rule, error=error)
