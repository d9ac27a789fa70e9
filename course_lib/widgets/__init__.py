"""Explorers: controls that re-run a bit of course math and redraw its picture live.

One module per lesson (lesson 06 in two: `lesson06`, its trained heads, and
`lesson06_ablation`; lessons 01_language_and_loss and 05_encoder_decoder, which share their
numbers, in `lesson01_language_and_loss` and `lesson05_encoder_decoder`) on a small shared base
(`base`: the Explorer class, its readout line, `state()` and `settings()`, the control helpers
and ConceptCheck), and `ticks`, the tick labels stamped from cached pictures that lessons 03
and 06 share (TickStamp). Lessons import from here:
`from course_lib.widgets import ScalingExplorer, ConceptCheck`.
"""

from course_lib.widgets.base import ConceptCheck, Explorer
from course_lib.widgets.lesson00 import SoftmaxExplorer
from course_lib.widgets.lesson01 import TOY_SENTENCE, AttentionExplorer
from course_lib.widgets.lesson01_language_and_loss import NextTokenExplorer
from course_lib.widgets.lesson02 import ScalingExplorer
from course_lib.widgets.lesson03 import HeadsExplorer, best_detector, heads_examples
from course_lib.widgets.lesson04 import PositionExplorer, RopeExplorer
from course_lib.widgets.lesson05_encoder_decoder import CrossAttentionExplorer
from course_lib.widgets.lesson06 import (
    TRAINED_EXAMPLES,
    TYPED_SAMPLES,
    TrainedHeadsExplorer,
    fresh_sentences,
)
from course_lib.widgets.lesson06_ablation import AblationExplorer, KnockoutExplorer
from course_lib.widgets.lesson08_transformer_block import BlockExplorer
from course_lib.widgets.lesson09_feed_forward import ActivationExplorer
from course_lib.widgets.lesson10 import SamplingExplorer
from course_lib.widgets.lesson13 import KVCostExplorer
from course_lib.widgets.lesson15 import WindowExplorer
from course_lib.widgets.lesson16 import RopeScalingExplorer
from course_lib.widgets.lesson17 import TileExplorer

# every explorer, in lesson order
EXPLORERS = (
    SoftmaxExplorer,
    AttentionExplorer,
    NextTokenExplorer,
    ScalingExplorer,
    HeadsExplorer,
    PositionExplorer,
    RopeExplorer,
    CrossAttentionExplorer,
    TrainedHeadsExplorer,
    AblationExplorer,
    KnockoutExplorer,
    BlockExplorer,
    ActivationExplorer,
    SamplingExplorer,
    KVCostExplorer,
    WindowExplorer,
    RopeScalingExplorer,
    TileExplorer,
)

__all__ = [
    "EXPLORERS",
    "TOY_SENTENCE",
    "TRAINED_EXAMPLES",
    "TYPED_SAMPLES",
    "AblationExplorer",
    "ActivationExplorer",
    "AttentionExplorer",
    "BlockExplorer",
    "ConceptCheck",
    "CrossAttentionExplorer",
    "Explorer",
    "HeadsExplorer",
    "KnockoutExplorer",
    "KVCostExplorer",
    "NextTokenExplorer",
    "PositionExplorer",
    "RopeExplorer",
    "RopeScalingExplorer",
    "SamplingExplorer",
    "ScalingExplorer",
    "SoftmaxExplorer",
    "TileExplorer",
    "WindowExplorer",
    "TrainedHeadsExplorer",
    "best_detector",
    "fresh_sentences",
    "heads_examples",
]
