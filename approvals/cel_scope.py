"""Which names a CEL condition reads outside the macros that bind them.

The CEL interpreter lists every name a program reads (`Program.variables()`), a macro's own
variable included: `effects.args.exists(a, a.amount_cents > 0)` reads `a`. A policy may use
that `a` inside its macro and nowhere else, so this scans the text's tokens for the names read
where no enclosing macro binds them. The text has compiled, so only valid CEL is scanned."""

import re

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
