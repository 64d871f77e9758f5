"""The answer a checker gives: truthy when right, and a message that helps either
way."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feedback:
    """Result of an exercise checker.

    ``bool(feedback)`` is ``feedback.ok``, so a solution can
    ``assert check_...(answer)``; the notebook displays ``message``, which hints at what
    to look at and never gives the solution away.
    """

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return ("Correct. " if self.ok else "Not yet. ") + _sentence(self.message)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """How a notebook shows it: folded to lines of at most 88 characters."""
        from companion.exercises._answers import fold

        prefix = "Correct. " if self.ok else "Not yet. "
        printer.text(prefix + fold(_sentence(self.message)))


def _sentence(message: str) -> str:
    """``message`` with a capital first letter, unless it starts with a name like
    ``w_i``."""
    first = message.split(" ", 1)[0]
    if first.isalpha() and first.islower():
        return message[0].upper() + message[1:]
    return message


def right(message: str) -> Feedback:
    return Feedback(True, message)


def wrong(message: str) -> Feedback:
    return Feedback(False, message)


def right_folded(message: str) -> Feedback:
    """A correct answer's feedback, folded to fit a notebook's 88-character lines."""
    from companion.exercises._answers import fold

    return right(fold(message))
