"""JSON text from outside (a request body, the state editor, a model's tool-call arguments, a
file given to a command), read with one bound on how deeply it nests.

Python's parser raises RecursionError, not ValueError, near 1,000 levels, and the code that
walks a value (validation, diffs, the checks at the edge) reaches the recursion limit sooner:
each was a 500 or a traceback. No state Gatehouse stores nests anywhere near MAX_DEPTH."""

import json
import math
from typing import Any

MAX_DEPTH = 100


class NotFinite(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(f"{constant} is not a JSON number")


def _refuse(constant: str) -> Any:
    raise NotFinite(constant)


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # 1e999
        raise NotFinite(text)
    return number


_DECODER = json.JSONDecoder(parse_constant=_refuse, parse_float=_finite)


class TooDeep(ValueError):
    def __init__(self) -> None:
        super().__init__(f"the JSON nests deeper than {MAX_DEPTH} levels")


def loads(text: str | bytes) -> Any:
    """json.loads, and a ValueError for a document nested deeper than MAX_DEPTH or holding NaN or
    Infinity (which Python reads and no JSON parser elsewhere does), as for any other JSON that
    cannot be read: a syntax error, an integer of over 4,300 digits."""
    if isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    try:
        value = _DECODER.decode(text)
    except RecursionError as exc:
        raise TooDeep from exc
    # Fewer brackets than the bound cannot nest past it: most documents skip the walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise TooDeep
    return value


def depth(value: Any) -> int:
    """How many arrays and objects deep the value nests (0 for a string or a number)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest
