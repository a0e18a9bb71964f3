"""The one error a bad input raises."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: the message names the file, field, value and expectation."""
