"""The answer a checker gives: truthy when right, and a message that helps either way."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feedback:
    """Result of an exercise checker.

    ``bool(feedback)`` is ``feedback.ok``, so a solution can ``assert check_...(answer)``;
    the notebook displays ``message``, which hints at what to look at and never gives
    the solution away.
    """

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return ("Correct. " if self.ok else "Not yet. ") + self.message


def right(message: str) -> Feedback:
    return Feedback(True, message)


def wrong(message: str) -> Feedback:
    return Feedback(False, message)


def right_folded(message: str) -> Feedback:
    """A correct answer's feedback, folded to fit a notebook's 88-character lines."""
    from companion.exercises._answers import fold

    return right(fold(message))
