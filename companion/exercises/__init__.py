"""Checkers for the chapters' exercises: ``check_...(answer)`` returns a
:class:`Feedback`.

A checker never raises on a wrong answer (wrong shapes and types included); it says
what is off and what to look at. Each chapter's checkers live in ``chNN.py``.
"""

from companion.exercises._feedback import Feedback
from companion.exercises.ch01 import *  # noqa: F401,F403
from companion.exercises.ch02 import *  # noqa: F401,F403
from companion.exercises.ch03 import *  # noqa: F401,F403
from companion.exercises.ch04 import *  # noqa: F401,F403
from companion.exercises.ch05 import *  # noqa: F401,F403
from companion.exercises.ch06 import *  # noqa: F401,F403
from companion.exercises.ch07 import *  # noqa: F401,F403
from companion.exercises.ch08 import *  # noqa: F401,F403
from companion.exercises.ch09 import *  # noqa: F401,F403
from companion.exercises.ch10 import *  # noqa: F401,F403
from companion.exercises.ch11 import *  # noqa: F401,F403
from companion.exercises.ch12 import *  # noqa: F401,F403
from companion.exercises.ch13 import *  # noqa: F401,F403
from companion.exercises.ch14 import *  # noqa: F401,F403
from companion.exercises.ch15 import *  # noqa: F401,F403
from companion.exercises.ch16 import *  # noqa: F401,F403
from companion.exercises.ch17 import *  # noqa: F401,F403
from companion.exercises.ch18 import *  # noqa: F401,F403
from companion.exercises.registry import (  # noqa: E402 - needs the checkers above
    EXERCISES,
    Exercise,
)
