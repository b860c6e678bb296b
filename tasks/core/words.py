"""Counts in words: "1 node", "2 nodes" (issue 42 item 8: "1 nodes", "1 autoscalers")."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun plural unless the count is one (`plural` when not +s)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
