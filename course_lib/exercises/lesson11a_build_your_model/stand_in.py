"""What earlier_work("MyTransformer") hands lesson 11b where the learner's class is not written
yet: a class with MyTransformer's arguments that builds the course's model."""

from course_lib import corpus
from course_lib.model import TinyTransformer

ARGUMENTS = ("vocab_size", "d_model", "num_heads", "d_ff", "num_layers")
MAX_LEN = corpus.LONG_LEN  # the longest sequence a case feeds (the base model's max_len)


class StandIn(TinyTransformer):
    """The course's TinyTransformer built from MyTransformer's five arguments (lesson 11a)."""

    def __init__(self, vocab_size, d_model, num_heads, d_ff, num_layers):
        sizes = dict(vocab_size=vocab_size, d_model=d_model, num_heads=num_heads, d_ff=d_ff,
                     num_layers=num_layers)  # fmt: skip
        super().__init__(**sizes, max_len=MAX_LEN)
