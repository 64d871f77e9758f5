"""The answer a checker gives: truthy when right, and a message that helps either
way."""

from __future__ import annotations

import functools
import inspect
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
        """One line (but for a right answer's folded message): the grader's CSV."""
        return ("Correct. " if self.ok else "Not yet. ") + _sentence(self.message)

    def __str__(self) -> str:
        """As a notebook shows it, folded to lines of at most 88 characters, so that
        ``print(feedback)`` reads the same."""
        from companion.exercises._answers import fold

        prefix = "Correct. " if self.ok else "Not yet. "
        return prefix + fold(_sentence(self.message))

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """How a notebook shows it: folded to lines of at most 88 characters."""
        printer.text(str(self))


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


def checker(fn=None, *, none_is_an_answer: bool = False):
    """Decorate a ``check_...`` function: an argument still ``...`` (the student
    edition's stub) or ``None`` gets a message saying so instead of a diagnosis; a wrong
    answer in half precision is told so (its rounding may be what is wrong); an error
    inside the checker becomes a message instead of an exception.

    ``none_is_an_answer=True`` leaves ``None`` to the checker, for an exercise whose
    answer comes from a function that may rightly return None.
    """
    if fn is None:
        return functools.partial(checker, none_is_an_answer=none_is_an_answer)
    from companion.exercises._answers import half_precision_note, unanswered

    names = list(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def check(*args, **kwargs):
        given = list(zip(names, args)) + list(kwargs.items())
        for name, value in given:
            if value is None and none_is_an_answer:
                continue
            who = f"the answer passed to {fn.__name__}"
            if len(names) > 1:
                who = f"`{name}`"
            problem = unanswered(value, who)
            if problem is not None:
                return wrong(problem)
        try:
            feedback = fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - a checker never raises
            return wrong(
                f"The checker could not read this answer ({type(err).__name__}: {err})"
            )
        if not feedback and "float16" not in feedback.message:  # bfloat16 too
            note = half_precision_note(tuple(args) + tuple(kwargs.values()))
            if note:
                return Feedback(False, feedback.message + note)
        return feedback

    return check
