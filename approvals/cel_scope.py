"""What a CEL condition reads and calls, and why it failed, in words an admin reads.

The CEL interpreter lists every name a program reads (`Program.variables()`), a macro's own
variable included: `effects.args.exists(a, a.amount_cents > 0)` reads `a`. A policy may use
that `a` inside its macro and nowhere else, so this scans the text's tokens for the names read
where no enclosing macro binds them. The text has compiled, so only valid CEL is scanned.

The interpreter's own errors name a key or a function, not where the condition read it
(`args.to.matches(...)` on a call whose `to` is null says "Undefined variable or function:
'matches'"): explain_failure says which argument or field, and of what type."""

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Strings (raw, bytes, triple-quoted), comments, numbers and spaces are skipped: a string may
# hold a macro's text. Every other token is a name or one character.
TOKEN = re.compile(
    r"""(?P<skip>(?:[rR][bB]?|[bB][rR])(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n]*"|'[^'\n]*')"""
    r"""|[bB]?(?:\"\"\"(?:\\[\s\S]|[\s\S])*?\"\"\"|'''(?:\\[\s\S]|[\s\S])*?'''"""
    r"""|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')"""
    r"""|//[^\n]*|0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[uU]?|\s+)"""
    r"""|[A-Za-z_]\w*|.""",
)
NAME = re.compile(r"[A-Za-z_]\w*")


def free_names(text: str) -> set[str]:
    """The names read in text where no enclosing macro binds them (field names excluded)."""
    tokens = [m.group() for m in TOKEN.finditer(text) if m.lastgroup != "skip"]
    free: set[str] = set()
    bound: list[tuple[str, int]] = []  # (name, the paren depth its macro's call opened)
    depth = 0
    for i, token in enumerate(tokens):
        if token in "([{":
            depth += 1
        elif token in ")]}":
            depth -= 1
            bound = [(name, opened) for name, opened in bound if opened <= depth]
        elif _is_macro(tokens, i):  # `.exists(a, ...)`: `a` is bound until its `)`
            bound.append((tokens[i + 2], depth + 1))
        elif _is_read(tokens, i) and token not in {name for name, _ in bound}:
            free.add(token)
    return free


def _is_macro(tokens: list[str], i: int) -> bool:
    """Whether tokens[i] names a macro that binds a variable: `.` name `(` variable `,`."""
    return (
        0 < i < len(tokens) - 3
        and tokens[i - 1] == "."
        and tokens[i] in MACROS
        and tokens[i + 1] == "("
        and tokens[i + 3] == ","
    )


def _is_read(tokens: list[str], i: int) -> bool:
    """Whether tokens[i] is a name read: not a field (after `.`), not a macro's variable."""
    return bool(NAME.fullmatch(tokens[i])) and tokens[i - 1 : i] != ["."] and not _is_macro(tokens, i - 2)


# Names CEL reads as values without a variable of ours: type names (`type(x) == string`) and
# the optional library (`optional.of(x)`).
BUILTIN_NAMES = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "optional"}
)
_TIME_PARTS = ("FullYear", "Month", "Date", "DayOfMonth", "DayOfWeek", "DayOfYear")
_CLOCK_PARTS = ("Hours", "Minutes", "Seconds", "Milliseconds")
# What each function of the interpreter (`common-expression-language`: standard CEL, without
# the string extensions such as lowerAscii or split) is called on.
RECEIVERS: dict[str, str] = {
    **dict.fromkeys(("matches", "startsWith", "endsWith", "contains"), "a string"),
    "size": "a string, list or map",
    **{f"get{part}": "a timestamp" for part in _TIME_PARTS},
    **{f"get{part}": "a timestamp or duration" for part in _CLOCK_PARTS},
    **dict.fromkeys(("hasValue", "value", "orValue", "or"), "an optional"),
}
FUNCTIONS = frozenset(
    {*RECEIVERS, "int", "uint", "double", "string", "bytes", "type", "dyn", "duration", "timestamp"}
    | {"of", "none", "ofNonZeroValue"}  # optional.of(...), ...
)


def called_functions(names: list[str]) -> list[str]:
    """The functions among a program's `functions()` that the interpreter does not have
    (operators, written `_+_`, `@in`, `!_`, are left out)."""
    return [name for name in names if NAME.fullmatch(name) and name not in FUNCTIONS]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """' (did you mean amount_cents?)' for the closest choice, or ''."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


SYNTAX = re.compile(r"<input>:(\d+):(\d+): Syntax error: ([^\n]*)")


def syntax_error(message: str) -> str:
    """A parse error in plain words (where, and what is wrong there), then the library's words
    and its lines pointing at the place (the first error's: the rest follow from it)."""
    found = SYNTAX.search(message)
    if found is None:
        return f"CEL error: {message}"
    line, column, what = found.groups()
    if "'<EOF>'" in what:
        plain = "the condition ends where more was expected (an operand, or a closing bracket)"
    elif what.startswith("token recognition error"):
        bad = what.split("at: ", 1)[-1].strip()[1:-1].strip()  # the library quotes it
        plain = "a quote is not closed" if bad[:1] in ("'", '"') else f"'{bad}' is not valid CEL here"
    elif what.startswith(("mismatched input", "extraneous input")):
        plain = f"{what.split(' ', 2)[2].split(' expecting', 1)[0]} is not expected here"
    else:
        plain = what
    pointer = message[found.end() :].split("ERROR:", 1)[0].strip("\n")
    library = what if len(what) <= 80 else what[:79] + "…"
    where = f"line {line}, column {column}"
    return f"CEL error: Syntax error at {where}: {plain} [CEL: {library}]\n{pointer}".rstrip()


@dataclass(frozen=True)
class Read:
    """A dotted read in a condition: `args.to.matches(` is root args, fields (to,), call matches."""

    root: str
    fields: tuple[str, ...]
    call: str = ""
    indexed: bool = False
    binds: str = ""
    """The variable a macro call binds to each item (`effects.args.exists(a, ...)`: a)."""

    def path(self, upto: int | None = None) -> str:
        return ".".join((self.root, *self.fields[:upto]))


def reads(text: str) -> list[Read]:
    """Every chain of names joined by dots in the text, with the function it calls, if any."""
    tokens = [m.group() for m in TOKEN.finditer(text) if m.lastgroup != "skip"]
    found: list[Read] = []
    i = 0
    while i < len(tokens):
        if not NAME.fullmatch(tokens[i]) or tokens[i - 1 : i] == ["."]:
            i += 1
            continue
        chain = [tokens[i]]
        while tokens[i + 1 : i + 2] == ["."] and i + 2 < len(tokens) and NAME.fullmatch(tokens[i + 2]):
            chain.append(tokens[i + 2])
            i += 2
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        call = chain.pop() if after == "(" else ""
        binds = tokens[i + 2] if call in MACROS and _is_macro(tokens, i) else ""
        if chain:
            found.append(Read(chain[0], tuple(chain[1:]), call=call, indexed=after == "[", binds=binds))
        i += 1
    return found


def read_path(tokens: list[str], start: int) -> tuple[str, ...]:
    """The dotted path read from tokens[start] on (`args.to` of `args.to.size()`); () when it is
    the receiver of a macro (`args.b` of `args.b.exists(...)`), which is iterated, not read."""
    path, i = [tokens[start]], start
    while tokens[i + 1 : i + 2] == ["."] and i + 2 < len(tokens) and NAME.fullmatch(tokens[i + 2]):
        path.append(tokens[i + 2])
        i += 2
    # A call: its receiver is what is read (popped), unless the call is a macro's.
    if tokens[i + 1 : i + 2] == ["("] and path.pop() in MACROS:
        return ()
    return tuple(path)


_MISSING = object()


def _resolve(values: dict[str, Any], read: Read, upto: int | None = None) -> Any:
    value: Any = values.get(read.root, _MISSING)
    for field in read.fields[:upto]:
        if not isinstance(value, dict) or field not in value:
            return _MISSING
        value = value[field]
    return value


def kind(value: Any) -> str:
    """A value's CEL type, in words."""
    if value is None:
        return "null"
    for types, words in KINDS:
        if isinstance(value, types):
            return words
    return type(value).__name__


KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "a bool"),
    (int, "an int"),
    (float, "a double"),
    (str, "a string"),
    ((list, tuple), "a list"),
    (dict, "a map"),
    (datetime, "a timestamp"),
    (timedelta, "a duration"),
)


def explain_failure(text: str, error: Exception, values: dict[str, Any]) -> str:
    """Why a condition failed on these values, in plain words and naming the argument or field,
    then the library's own words in brackets."""
    detail = _detail(error)
    plain = ""
    if isinstance(error, KeyError) and error.args:
        plain = _missing_field(text, str(error.args[0]), values)
    elif isinstance(error, RuntimeError) and (name := _undefined(str(error))):
        plain = _wrong_receiver(text, name, values)
    elif isinstance(error, TypeError) and "overload" in str(error):
        plain = "an operator or function got values of types it cannot combine (CEL converts none)"
        plain += _seen(text, values)
    elif isinstance(error, ZeroDivisionError):
        plain = f"a division by zero{_seen(text, values)}"
    elif function := re.match(r"Function '(\w+)' error", str(error)):
        plain = f"{function.group(1)}() failed on the value it was given{_seen(text, values)}"
    elif isinstance(error, IndexError):
        lists = [r for r in reads(text) if r.indexed and isinstance(_resolve(values, r), list)]
        sizes = ", ".join(f"{r.path()} has {len(_resolve(values, r))}" for r in lists[:3])
        plain = f"an index is past the end of a list{f' ({sizes})' if sizes else ''}"
    return f"{plain} [CEL: {detail}]" if plain else f"CEL: {detail}"


def _detail(error: Exception) -> str:
    if isinstance(error, KeyError) and error.args:
        return f"no such key: {error.args[0]!r}"
    first = str(error).split(". ", 1)[0].rstrip(".")
    return first if len(first) <= 120 else first[:119] + "…"


def _undefined(message: str) -> str:
    found = re.search(r"Undefined variable or function: '([^']*)'", message)
    return found.group(1) if found else ""


def _missing_field(text: str, key: str, values: dict[str, Any]) -> str:
    for read in reads(text):
        for at, field in enumerate(read.fields):
            parent = _resolve(values, read, at)
            if field == key and isinstance(parent, dict) and key not in parent:
                where = read.path(at)
                has = "the call has no argument" if where == "args" else f"{where} has no field"
                hint = did_you_mean(key, parent) or f"; write has({where}.{key}) && … if it may be left out"
                return f"{where}.{key} is missing: {has} '{key}'{hint}"
    items = {r.binds: r.path() for r in reads(text) if r.binds}  # a macro's variable: its list's item
    for read in reads(text):
        if read.root in items and key in read.fields:
            where = f"{read.root}.{'.'.join(read.fields[: read.fields.index(key)])}".rstrip(".")
            return f"{where}.{key} is missing: an item of {items[read.root]} has no field '{key}'"
    return f"a field '{key}' the condition reads is missing; write has(….{key}) && … if it may be left out"


def _wrong_receiver(text: str, name: str, values: dict[str, Any]) -> str:
    if name not in FUNCTIONS:
        return f"{name}() is not a function of this CEL interpreter{did_you_mean(name, FUNCTIONS)}"
    takes = RECEIVERS.get(name, "")
    for read in reads(text):
        value = _resolve(values, read) if read.call == name else _MISSING
        if value is not _MISSING and kind(value).split(" ")[-1] in takes:  # the arguments are wrong
            return f"{name}() on {read.path()} ({kind(value)}) does not take the arguments given to it"
        if value is not _MISSING:
            needs = f"; {name}() needs {takes}" if takes else ""
            return f"{read.path()} is {kind(value)}{needs}"
    return f"{name}() got a value it does not take{f' (it needs {takes})' if takes else ''}"


def _seen(text: str, values: dict[str, Any]) -> str:
    """The values the condition read, with their types: where the wrong one is."""
    shown: list[str] = []
    for read in reads(text):
        value = _resolve(values, read)
        entry = f"{read.path()} = {json.dumps(value, default=str)[:24]} ({kind(value)})"
        if value is not _MISSING and not isinstance(value, dict | list) and entry not in shown:
            shown.append(entry)
    return f"; it read {', '.join(shown[:4])}" if shown else ""
