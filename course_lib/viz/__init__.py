"""Pictures: tensors in, matplotlib Figures out. Nothing here changes a tensor.

Figures are made with matplotlib.figure.Figure, not pyplot, so they are never shown twice
and never pile up in pyplot's list of open figures; a notebook shows one by ending a cell
with it. Lessons write `from course_lib import viz` and call `viz.attention_heatmap(...)`;
each name lives in one module of this package:

- `style`: DPI, the colour policy (PALETTE, COLOURS, MARKERS, LINE_STYLES, LINE_MARKERS,
  meaning, colour), new_figure, and draw_attention, which lessons 01 and 02 share;
- `render`: to_png (a Figure) and canvas_png (an explorer's canvas) as PNG bytes;
- `lesson01a_language_and_tokens` ... `lesson17b_tiled_memory_and_backward`: each lesson's
  figures and the constants they draw with, in lesson order; a lesson that has moved to the
  published order has a module named after its notebook (`lesson02a_attention`,
  `lesson03a_why_scale`, ...).

The explorers' own drawing machinery (TickStamp) lives with them, in course_lib.widgets.ticks.
"""

from course_lib.viz.lesson01a_language_and_tokens import (
    next_token_figure,
)
from course_lib.viz.lesson02a_attention import attention_heatmap
from course_lib.viz.lesson02b_attention_in_batches import draw_weight_bars, padding_figure
from course_lib.viz.lesson03a_why_scale import REFERENCE_STYLES, curve_panels, training_figure
from course_lib.viz.lesson03b_scale_in_models import excess_rows_figure
from course_lib.viz.lesson04b_when_heads_help import (
    NOUN_ROWS,
    WEIGHT_TICKS,
    draw_head_map,
    noun_weights_figure,
    set_token_ticks,
    weight_norm,
)
from course_lib.viz.lesson05_encoder_decoder import (
    cross_map_figure,
    draw_cross_map,
    encoder_decoder_diagram,
    reversal_training_figure,
    visibility_figure,
)
from course_lib.viz.lesson06_sinusoidal_and_rope import (
    cosine_scale,
    encoding_heatmap,
    pair_arrow,
    rotated_pair_figure,
    setup_pair_axes,
    similarity_figure,
    turned_basis_figure,
)
from course_lib.viz.lesson07b_positions_past_training import drift_figure, length_figure
from course_lib.viz.lesson08_transformer_block import (
    GRAD_LIMITS,
    SCALE_LIMITS,
    block_diagram,
    depth_profile_figure,
    draw_block_diagram,
    pin_to_limits,
    pinned_points,
    seed_dots_figure,
    setup_depth_axes,
)
from course_lib.viz.lesson10 import time_figure, tradeoff_figure
from course_lib.viz.lesson11b_train_your_model import (
    copy_forming_figure,
    schedule_figure,
    skill_curves_figure,
)
from course_lib.viz.lesson12_read_your_model import (
    RISE_TICKS,
    detector_figure,
    forming_figure,
    knockout_figure,
    rise_norm,
)
from course_lib.viz.lesson13a_what_generation_recomputes import token_costs_figure
from course_lib.viz.lesson13b_kv_cache import time_per_token_figure
from course_lib.viz.lesson13c_grouped_query_attention import head_groups_figure
from course_lib.viz.lesson14 import bends_figure
from course_lib.viz.lesson15b_attention_sinks import excess_by_position_figure
from course_lib.viz.lesson16a_interpolation_and_ntk import METHOD_STYLES, draw_excess, excess_figure
from course_lib.viz.lesson16b_yarn_compared import angles_figure, draw_angles, excess_panels
from course_lib.viz.lesson17b_tiled_memory_and_backward import memory_figure
from course_lib.viz.render import canvas_png, to_png
from course_lib.viz.style import (
    BLUE,
    COLOURS,
    DPI,
    GREEN,
    LINE_MARKERS,
    LINE_STYLES,
    MARKERS,
    ORANGE,
    PALETTE,
    PURPLE,
    VERMILLION,
    VIRIDIS_DARK,
    colour,
    draw_attention,
    meaning,
    new_figure,
)

# the figure modules, in lesson order (tests/test_colours.py checks every figure in them)
FIGURE_MODULES = ("lesson01a_language_and_tokens", "lesson02a_attention",
                  "lesson02b_attention_in_batches", "lesson03a_why_scale",
                  "lesson03b_scale_in_models", "lesson04b_when_heads_help",
                  "lesson05_encoder_decoder", "lesson06_sinusoidal_and_rope",
                  "lesson07b_positions_past_training",
                  "lesson08_transformer_block", "lesson10", "lesson11b_train_your_model",
                  "lesson12_read_your_model", "lesson13a_what_generation_recomputes",
                  "lesson13b_kv_cache", "lesson13c_grouped_query_attention", "lesson14",
                  "lesson15b_attention_sinks", "lesson16a_interpolation_and_ntk",
                  "lesson16b_yarn_compared", "lesson17b_tiled_memory_and_backward")  # fmt: skip

__all__ = [
    "BLUE",
    "COLOURS",
    "DPI",
    "FIGURE_MODULES",
    "GRAD_LIMITS",
    "GREEN",
    "LINE_MARKERS",
    "LINE_STYLES",
    "MARKERS",
    "NOUN_ROWS",
    "WEIGHT_TICKS",
    "ORANGE",
    "PALETTE",
    "PURPLE",
    "REFERENCE_STYLES",
    "SCALE_LIMITS",
    "VERMILLION",
    "VIRIDIS_DARK",
    "attention_heatmap",
    "bends_figure",
    "block_diagram",
    "canvas_png",
    "colour",
    "cosine_scale",
    "copy_forming_figure",
    "schedule_figure",
    "cross_map_figure",
    "curve_panels",
    "depth_profile_figure",
    "detector_figure",
    "draw_attention",
    "draw_block_diagram",
    "draw_cross_map",
    "draw_head_map",
    "draw_weight_bars",
    "drift_figure",
    "encoder_decoder_diagram",
    "encoding_heatmap",
    "excess_rows_figure",
    "head_groups_figure",
    "length_figure",
    "excess_by_position_figure",
    "forming_figure",
    "knockout_figure",
    "rise_norm",
    "RISE_TICKS",
    "memory_figure",
    "METHOD_STYLES",
    "angles_figure",
    "draw_angles",
    "draw_excess",
    "excess_figure",
    "excess_panels",
    "meaning",
    "new_figure",
    "next_token_figure",
    "padding_figure",
    "noun_weights_figure",
    "pair_arrow",
    "pin_to_limits",
    "pinned_points",
    "reversal_training_figure",
    "rotated_pair_figure",
    "seed_dots_figure",
    "set_token_ticks",
    "setup_depth_axes",
    "setup_pair_axes",
    "similarity_figure",
    "skill_curves_figure",
    "time_figure",
    "time_per_token_figure",
    "to_png",
    "token_costs_figure",
    "tradeoff_figure",
    "turned_basis_figure",
    "training_figure",
    "visibility_figure",
    "weight_norm",
]
