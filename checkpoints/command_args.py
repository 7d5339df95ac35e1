"""Argument types the management commands share."""

import argparse


def positive_int(text: str) -> int:
    """An argparse type for a count or a batch size: 0 would silently do nothing."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value
