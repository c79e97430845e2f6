"""Tripwires on upstream behaviour that a notebook teaches as a fact.

Each test checks one behaviour of Keras or TensorFlow that a notebook states (and often shows).
When an upgrade changes it, the test fails with a message naming the notebook and section to
rewrite, so the lesson is updated instead of silently becoming wrong.
"""

from __future__ import annotations


def lesson(notebook: str, section: str, fact: str) -> str:
    """The failure message: which lesson to update, and what it says."""
    return f"upstream changed: {notebook}, section '{section}' teaches that {fact}. Update the lesson."


# --------------------------------------------------------------------------- 02 gradient accumulation


# --------------------------------------------------------------------------- 04 validation queues


# --------------------------------------------------------------------------- 05 network snapshots
