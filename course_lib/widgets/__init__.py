"""Explorers: controls that re-run a bit of course math and redraw its picture live.

One module per lesson, named after its notebook where the lesson has moved to the published
order (`lesson02b_attention_in_batches`, `lesson12_read_your_model`, ...), on a small shared base
(`base`: the Explorer class, its readout line, `state()` and `settings()`, the control helpers
and ConceptCheck), and `ticks`, the tick labels stamped from cached pictures that lessons
04b_when_heads_help and 12 share (TickStamp). Lessons import from here:
`from course_lib.widgets import ScalingExplorer, ConceptCheck`.
"""

from course_lib.widgets.base import ConceptCheck, Explorer
from course_lib.widgets.lesson00 import SoftmaxExplorer
from course_lib.widgets.lesson01b_loss_and_floor import NextTokenExplorer
from course_lib.widgets.lesson02b_attention_in_batches import AttentionExplorer
from course_lib.widgets.lesson03a_why_scale import ScalingExplorer
from course_lib.widgets.lesson04b_when_heads_help import HeadsExplorer, heads_examples
from course_lib.widgets.lesson05_encoder_decoder import CrossAttentionExplorer
from course_lib.widgets.lesson06_sinusoidal_and_rope import PositionExplorer, RopeExplorer
from course_lib.widgets.lesson08_transformer_block import BlockExplorer
from course_lib.widgets.lesson09_feed_forward import ActivationExplorer
from course_lib.widgets.lesson10 import SamplingExplorer
from course_lib.widgets.lesson12_read_your_model import (
    TRAINED_EXAMPLES,
    TYPED_SAMPLES,
    KnockoutExplorer,
    TrainedHeadsExplorer,
    fresh_sentences,
)
from course_lib.widgets.lesson13c_grouped_query_attention import KVCostExplorer
from course_lib.widgets.lesson15a_sliding_window import WindowExplorer
from course_lib.widgets.lesson16b_yarn_compared import RopeScalingExplorer
from course_lib.widgets.lesson17a_online_softmax import TileExplorer

# every explorer, in lesson order
EXPLORERS = (
    SoftmaxExplorer,
    NextTokenExplorer,
    AttentionExplorer,
    ScalingExplorer,
    HeadsExplorer,
    CrossAttentionExplorer,
    PositionExplorer,
    RopeExplorer,
    BlockExplorer,
    ActivationExplorer,
    SamplingExplorer,
    TrainedHeadsExplorer,
    KnockoutExplorer,
    KVCostExplorer,
    WindowExplorer,
    RopeScalingExplorer,
    TileExplorer,
)

__all__ = [
    "EXPLORERS",
    "TRAINED_EXAMPLES",
    "TYPED_SAMPLES",
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
    "fresh_sentences",
    "heads_examples",
]
