"""Which functions a learner's function called while a check ran it (the exercise core's
`forbidden`, `forbidden_earlier` and `forbidden_keywords`): Python functions by their code,
built-ins by identity, a torch function's keyword argument through torch's function-override
mode, so a function is recognised however it was reached."""

import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from course_lib.paths import PACKAGE


class _KeywordWatch(TorchFunctionMode):
    """Record a call of a watched torch function with its keyword set to a true value, made
    from code outside course_lib, as the label given for it."""

    def __init__(self, watched: dict, called: list):
        super().__init__()
        self.watched, self.called = watched, called  # {label: (function, keyword)}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for label, (function, keyword) in self.watched.items():
            if func is function and kwargs.get(keyword):
                if not in_course(sys._getframe(1).f_code.co_filename):  # the caller's file
                    self.called.append(label)
        return func(*args, **kwargs)


@contextmanager
def watching(functions: dict, names=(), keywords=None):
    """Record each call of the functions given as {label: function}, and of any Python
    function outside course_lib whose name is in `names` (a learner's), while the block runs;
    yield the list of their labels (a name as it is), in the order called.

    A call is recognised by the function itself, not by the name it is reached through: a
    Python function by its code, a built-in by identity. So `from torch.autograd import grad`
    before the call, a course function that calls a watched one inside, or the course's own
    version handed back by earlier_work, is caught too. A tensor's method (`x.softmax(-1)`),
    listed as (torch.Tensor, "softmax"), is recognised by the method its class defines.
    `keywords` ({label: (function, keyword)}) records a torch function called with that
    keyword set, under its label.
    """
    targets = {id(getattr(f, "__code__", f)): label for label, f in functions.items()}
    names = frozenset(names)
    called = []

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            label = targets.get(id(code))
            if label is None and code.co_name in names and not in_course(code.co_filename):
                label = code.co_name
        elif event == "c_call":
            label = targets.get(id(arg))
            owner = getattr(arg, "__self__", None)
            if label is None and isinstance(owner, torch.Tensor):
                label = targets.get(id(getattr(type(owner), arg.__name__, None)))
        else:
            return
        if label is not None:
            called.append(label)

    before = sys.getprofile()
    sys.setprofile(profile if targets or names else before)
    try:
        with _KeywordWatch(keywords, called) if keywords else nullcontext():
            yield called
    finally:
        sys.setprofile(before)


COURSE_DIR = str(PACKAGE)


def in_course(filename: str) -> bool:
    """Whether code compiled from `filename` is course_lib's own."""
    return str(Path(filename).resolve()).startswith(COURSE_DIR)
