"""earlier_work: a later lesson gets the learner's own functions, or the course's for a stub."""

from pathlib import Path

import nbformat
import pytest
import torch
from nbformat.v4 import new_code_cell, new_notebook

from course_lib.exercises import by_name, lesson_label
from course_lib.mywork import collect, earlier_work

ROOT_TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.path_independent

SOLUTION = {"nbgrader": {"solution": True, "grade_id": "x"}}


def home(exercise: str) -> str:
    """The notebook file that holds `exercise` today ("01_attention_qkv.ipynb")."""
    return by_name(exercise).lesson + ".ipynb"


def lesson(folder, name, *cells):
    """A lesson notebook whose exercise cells are (source, is_exercise) pairs."""
    nb = new_notebook(
        cells=[
            new_code_cell(source, metadata=SOLUTION if exercise else {})
            for source, exercise in cells
        ]
    )
    nbformat.write(nb, folder / name)


def test_a_stub_becomes_the_courses_function_and_says_so(tmp_path, capsys):
    lesson(
        tmp_path, home("attention"),
        ("%matplotlib inline\nimport torch", False),
        ("def attention(q, k, v, mask=None):\n    # YOUR CODE HERE\n"
         '    raise NotImplementedError("Exercise attention: write your code here")', True),
    )  # fmt: skip
    mine = earlier_work("attention", folder=tmp_path)
    assert mine.attention is by_name("attention").reference
    assert (
        f"attention  lesson {lesson_label(by_name('attention').lesson)}: the course's "
        "(yours is not written yet)" in capsys.readouterr().out
    )


def test_the_learners_own_function_is_used_and_later_ones_find_earlier_ones(tmp_path):
    lesson(
        tmp_path, home("attention"),
        ("import math\nimport torch\nprint('this cell is not run')", False),
        ("def attention(q, k, v, mask=None):\n"
         "    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)\n"
         "    return w @ v * 0 + 7, w\n"
         "print('neither is this line')", True),
    )  # fmt: skip
    lesson(
        tmp_path, home("split_heads"),
        ("def split_heads(x, num_heads):\n    return ('mine', attention)", True),
    )  # fmt: skip
    work = collect(["split_heads", "attention"], tmp_path)
    q = torch.ones(2, 3)
    assert torch.equal(work.functions["attention"](q, q, q)[0], torch.full((2, 3), 7.0))
    tag, inner = work.functions["split_heads"](None, 2)
    assert tag == "mine" and inner is work.functions["attention"]  # lesson 01's, not the course's
    assert work.origin == {
        "split_heads": f"lesson {lesson_label(by_name('split_heads').lesson)}: yours",
        "attention": f"lesson {lesson_label(by_name('attention').lesson)}: yours",
    }


def test_a_syntax_error_or_a_missing_lesson_falls_back_to_the_course(tmp_path):
    lesson(tmp_path, home("attention"), ("def attention(q, k, v, mask=None):\n    return (", True))
    work = collect(["attention", "make_causal_mask"], tmp_path)
    assert work.functions["attention"] is by_name("attention").reference
    assert "syntax error" in work.origin["attention"]
    assert "no definition of yours found" in work.origin["make_causal_mask"]


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="names: expected exercise names"):
        collect(["not_an_exercise"], ".")


def test_a_folder_without_the_earlier_lessons_gets_the_courses_functions(tmp_path):
    # nbgrader grades one lesson in a folder of its own: lesson 01 is not beside lesson 03
    work = collect(["attention", "split_heads"], tmp_path)
    assert work.functions["attention"] is by_name("attention").reference
    assert work.functions["split_heads"] is by_name("split_heads").reference
    assert work.origin["attention"].endswith("no definition of yours found in this folder)")


# ---------------------------------------------------------------- lesson keys and files


def test_lesson_keys_are_the_notebooks_names_and_copies_of_them():
    from course_lib.exercises import LESSONS, lesson_key

    assert lesson_key("08_transformer_block") == "08_transformer_block"
    assert lesson_key("05_transformer_block") is None  # a former lesson (FORMER), not a key
    assert lesson_key("05_encoder_decoder") == "05_encoder_decoder"
    assert lesson_key("05_encoder_decoder-Copy1") == "05_encoder_decoder"
    assert lesson_key("05_encoder_decoder (1)") == "05_encoder_decoder"
    assert lesson_key("05_encoder_decoders") is None  # another name, not a copy
    assert lesson_key("07_rope") is None and lesson_key("notes") is None
    assert list(LESSONS) == sorted(LESSONS)  # keys sort as their notebooks do: course order


def test_lesson_file_finds_each_lesson_by_its_key(tmp_path):
    from course_lib.exercises import lesson_file

    for name in ("05_encoder_decoder.ipynb", "08_transformer_block.ipynb",
                 "08_transformer_block-Copy1.ipynb", "06_capstone.ipynb"):  # fmt: skip
        lesson(tmp_path, name, ("x = 1", False))
    assert lesson_file(tmp_path, "08_transformer_block").name == "08_transformer_block.ipynb"
    assert lesson_file(tmp_path, "05_encoder_decoder").name == "05_encoder_decoder.ipynb"
    assert lesson_file(tmp_path, "06_sinusoidal_and_rope") is None
    with pytest.raises(ValueError, match="key: expected one of"):
        lesson_file(tmp_path, "05")


def test_earlier_work_reads_each_lesson_from_its_own_notebook(tmp_path):
    # 05_encoder_decoder sorted before 05_transformer_block (today 08 and 09): a glob of 05_*
    # once picked it for the block's exercises and found none of them
    lesson(
        tmp_path, home("cross_attention"),
        ("def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):\n"
         "    return 'mine: cross'", True),
    )  # fmt: skip
    lesson(
        tmp_path, home("feed_forward"),
        ("def feed_forward(x, lin1, lin2):\n    return 'mine: ff'", True),
    )  # fmt: skip
    work = collect(["feed_forward", "cross_attention"], tmp_path)
    assert work.origin == {
        "feed_forward": f"lesson {lesson_label(by_name('feed_forward').lesson)}: yours",
        "cross_attention": f"lesson {lesson_label(by_name('cross_attention').lesson)}: yours",
    }
    assert work.functions["cross_attention"](*[None] * 6) == "mine: cross"
    assert work.functions["feed_forward"](None, None, None) == "mine: ff"


def test_a_workspace_made_from_todays_lessons_maps_every_exercise_to_its_notebook(tmp_path):
    from course_lib.exercises import all_exercises, lesson_file
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    prepare(LESSONS_DIR, tmp_path)
    for exercise in all_exercises():
        path = lesson_file(tmp_path, exercise.lesson)
        assert path is not None, exercise.name
        text = path.read_text()
        assert f"def {exercise.name}(" in text or f"class {exercise.name}(" in text, (
            exercise.name,
            path.name,
        )
    work = collect(["cross_attention", "decoder_layer"], tmp_path)
    assert work.origin == {
        "cross_attention": "lesson 05: the course's (yours is not written yet)",
        "decoder_layer": "lesson 05: the course's (yours is not written yet)",
    }


# ---------------------------------------------------------------- lessons that replaced others


def test_a_renamed_lesson_finds_your_work_in_its_former_file(tmp_path, monkeypatch):
    # a workspace keeps the earlier file, with the learner's function in it; the new lesson
    # arrives beside it with a stub, or with the learner's own newer version
    from course_lib import exercises

    monkeypatch.setitem(exercises.FORMER, "05_encoder_decoder", ("03_cross",))
    lesson(
        tmp_path, "03_cross.ipynb",
        ("def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):\n"
         "    return 'mine, before'", True),
    )  # fmt: skip
    lesson(
        tmp_path, "05_encoder_decoder.ipynb",
        ("def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):\n"
         "    raise NotImplementedError('cross_attention')\n"
         "def decoder_layer(x, memory, parts, num_heads):\n    return 'mine, now'", True),
    )  # fmt: skip
    assert [p.name for p in exercises.former_files(tmp_path, "05_encoder_decoder")] == [
        "03_cross.ipynb"
    ]
    work = collect(["cross_attention", "decoder_layer"], tmp_path)
    assert work.origin == {
        "cross_attention": "lesson 05: yours in 03_cross.ipynb",
        "decoder_layer": "lesson 05: yours",
    }
    assert work.functions["cross_attention"](*[None] * 6) == "mine, before"
    # written again in the new lesson, the new version wins
    lesson(
        tmp_path, "05_encoder_decoder.ipynb",
        ("def cross_attention(x, memory, q_proj, kv_proj, out, num_heads, mask=None):\n"
         "    return 'mine, now'", True),
    )  # fmt: skip
    work = collect(["cross_attention"], tmp_path)
    assert work.origin == {"cross_attention": "lesson 05: yours"}
    assert work.functions["cross_attention"](*[None] * 6) == "mine, now"


def test_every_former_name_is_no_lesson_of_todays(tmp_path):
    from course_lib.exercises import FORMER, LESSONS, lesson_key

    for key, former in FORMER.items():
        assert key in LESSONS
        for stem in former:
            assert stem not in LESSONS and lesson_key(stem) is None, stem


def test_a_former_file_that_two_lessons_replaced_is_read_once(tmp_path):
    # 05_transformer_block became 08_transformer_block and 09_feed_forward; read again for 09,
    # the old file would undo the learner's newer prenorm_block written in 08
    lesson(
        tmp_path, "05_transformer_block.ipynb",
        ("def feed_forward(x, lin1, lin2):\n    return 'mine, in 05'\n"
         "def prenorm_block(x, attn, ff, norm1, norm2):\n    return 'mine, in 05'", True),
    )  # fmt: skip
    lesson(
        tmp_path, "08_transformer_block.ipynb",
        ("def prenorm_block(x, attn, ff, norm1, norm2):\n    return 'mine, in 08'", True),
    )  # fmt: skip
    lesson(
        tmp_path, "09_feed_forward.ipynb",
        ("def feed_forward(x, lin1, lin2):\n    raise NotImplementedError('feed_forward')", True),
    )  # fmt: skip
    work = collect(["prenorm_block", "feed_forward"], tmp_path)
    assert work.functions["prenorm_block"](*[None] * 5) == "mine, in 08"
    assert work.functions["feed_forward"](None, None, None) == "mine, in 05"
    assert work.origin == {
        "prenorm_block": "lesson 08: yours",
        "feed_forward": "lesson 09: yours in 05_transformer_block.ipynb",
    }


# ---------------------------------------------------------------- a workspace from before the move

BEFORE_THE_MOVE = ROOT_TESTS / "fixtures" / "workspace_before_the_move"
# each exercise that kept its name when its lesson moved, and the file it lived in before
MOVED = {
    "make_causal_mask": "01_attention_qkv", "attention": "01_attention_qkv",
    "split_heads": "03_multihead", "merge_heads": "03_multihead", "multihead": "03_multihead",
    "sinusoidal_encoding": "04_positional_encoding", "rotate_pair": "04_positional_encoding",
    "rope_score": "04_positional_encoding", "rope_heads": "04_positional_encoding",
    "feed_forward": "05_transformer_block", "prenorm_block": "05_transformer_block",
    "layer_norm": "05_transformer_block", "MyTransformer": "06_capstone_train_tiny_transformer",
}  # fmt: skip


def test_a_workspace_made_before_the_move_keeps_the_learners_work(tmp_path):
    """A workspace made from the lessons before December 2026, each exercise written (the
    fixture holds those lessons' exercise cells with their solutions, as a learner left them),
    then updated: the new lessons arrive beside the old files with stubs, never over them, and
    earlier_work finds every exercise of the learner's in the file it was written in."""
    from course_lib.exercises import FORMER
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    for path in BEFORE_THE_MOVE.glob("*.ipynb"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    old = {p.name: p.read_bytes() for p in tmp_path.glob("*.ipynb")}
    written = prepare(LESSONS_DIR, tmp_path)
    assert {p.name for p in written}.isdisjoint(old)  # the new lessons arrive as new files
    assert all((tmp_path / name).read_bytes() == data for name, data in old.items())
    assert set(MOVED.values()) <= {s for stems in FORMER.values() for s in stems}
    work = collect(list(MOVED), tmp_path)
    for name, stem in MOVED.items():
        lesson = lesson_label(by_name(name).lesson)
        assert work.origin[name] == f"lesson {lesson}: yours in {stem}.ipynb", work.origin[name]
        assert work.functions[name] is not by_name(name).reference
    q, k, v = torch.randn(3, 2, 5, 4).unbind(0)
    ours, theirs = work.functions["attention"](q, k, v)[0], by_name("attention").reference(q, k, v)
    assert torch.allclose(ours, theirs[0], atol=1e-6)


# ---------------------------------------------------------------- lesson 02 split into 02a and 02b

BEFORE_THE_02_SPLIT = ROOT_TESTS / "fixtures" / "workspace_before_the_02_split"


def test_a_workspace_holding_lesson_02_keeps_the_learners_work_for_02a_and_02b(tmp_path):
    """A workspace copy of the old 02_attention_and_masks (the learner copy of main before the
    split) with make_causal_mask and attention written by the learner, then updated: 02a and
    02b arrive beside it with stubs, and earlier_work finds the learner's functions of both
    halves in the old file, the course's for the two left unwritten."""
    from course_lib.exercises import FORMER
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_02_SPLIT / "02_attention_and_masks.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"02a_attention.ipynb", "02b_attention_in_batches.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()  # never written over
    assert "02_attention_and_masks" in FORMER["02a_attention"]
    assert "02_attention_and_masks" in FORMER["02b_attention_in_batches"]
    names = ["make_causal_mask", "qkv_projection", "attention", "padding_mask"]
    work = collect(names, tmp_path)
    assert work.origin == {
        "make_causal_mask": "lesson 02a: yours in 02_attention_and_masks.ipynb",
        "qkv_projection": "lesson 02a: the course's (yours is not written yet)",
        "attention": "lesson 02b: yours in 02_attention_and_masks.ipynb",
        "padding_mask": "lesson 02b: the course's (yours is not written yet)",
    }
    for name in ("make_causal_mask", "attention"):
        assert work.functions[name] is not by_name(name).reference, name
    assert torch.equal(work.functions["make_causal_mask"](5), torch.ones(5, 5).tril().bool())
    q, k, v = torch.randn(3, 2, 5, 4).unbind(0)
    mask = torch.ones(5, 5).tril().bool()
    ours = work.functions["attention"](q, k, v, mask)[0]
    assert torch.allclose(ours, by_name("attention").reference(q, k, v, mask)[0], atol=1e-6)
    # written again in the new halves, the new versions win
    for stem, name, body in (
        ("02a_attention", "make_causal_mask", "def make_causal_mask(T):\n    return 'in 02a'"),
        ("02b_attention_in_batches", "attention",
         "def attention(q, k, v, mask=None):\n    return 'in 02b'"),
    ):  # fmt: skip
        path = tmp_path / f"{stem}.ipynb"
        notebook = nbformat.read(path, as_version=4)
        (cell,) = [
            c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == name
        ]
        cell.source = body
        nbformat.write(notebook, path)
    work = collect(["make_causal_mask", "attention"], tmp_path)
    assert work.origin == {
        "make_causal_mask": "lesson 02a: yours",
        "attention": "lesson 02b: yours",
    }
    assert work.functions["make_causal_mask"](3) == "in 02a"
    assert work.functions["attention"](None, None, None) == "in 02b"


# ---------------------------------------------------------------- lesson 11 split into 11a and 11b

BEFORE_THE_SPLIT_OF_11 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_11"


def test_your_class_of_lesson_11a_reaches_lesson_11b_working():
    """MyTransformer's forward calls `mine.multihead` and the rest: earlier_work hands out the
    class with lesson 11a's own `mine`, and a later notebook's `mine` does not replace it."""
    from course_lib import variants
    from course_lib.exercises.lesson11a_build_your_model import run_model
    from course_lib.paths import LESSONS_DIR

    work = collect(["MyTransformer", "forward_with_cache"], LESSONS_DIR)  # reads up to 13
    assert work.origin["MyTransformer"] == "lesson 11a: yours"
    cls = work.functions["MyTransformer"]
    assert isinstance(cls, type) and cls.__name__ == "MyTransformer"
    shipped = variants.load_trained("base", 0)
    model = cls(**{n: getattr(variants.BASE, n) for n in ("vocab_size", "d_model", "num_heads",
                                                          "d_ff", "num_layers")})  # fmt: skip
    model.load_state_dict(shipped.state_dict())
    ids = torch.arange(12).reshape(2, 6)
    with torch.no_grad():
        assert torch.allclose(model.eval()(ids), shipped(ids), atol=1e-4)
    assert run_model(cls).passed


def test_a_class_not_written_yet_gets_the_courses_stand_in(tmp_path):
    """A learner's workspace (stubs): lesson 11b gets a class with MyTransformer's arguments,
    the course's model, which lesson 11a's check refuses, so 11b says the course's stands in."""
    from course_lib import capstone, variants
    from course_lib.exercises.lesson11a_build_your_model import StandIn, run_model
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    prepare(LESSONS_DIR, tmp_path)
    work = collect(["MyTransformer"], tmp_path)
    assert work.origin == {"MyTransformer": "lesson 11a: the course's (yours is not written yet)"}
    assert work.functions["MyTransformer"] is StandIn
    weights = variants.load_trained("base", 0).state_dict()
    assert not run_model(StandIn).passed
    _, whose = capstone.your_model(StandIn, False, weights)
    assert whose == "the course's TinyTransformer (your MyTransformer has not passed its check)"
    model = StandIn(104, 64, 4, 256, 2)
    model.load_state_dict(weights)  # strict: the base model's names and shapes


def test_a_workspace_holding_lesson_11_before_its_split_keeps_the_learners_work(tmp_path):
    """The fixture is lesson 11 before the split (git show of its last version) with the
    learner's own MyTransformer and train_loop in it, no markers; 11a and 11b arrive beside it
    with stubs, and earlier_work finds both in the old file, each working with that file's
    `mine`."""
    from course_lib.exercises import FORMER
    from course_lib.exercises.lesson11a_build_your_model import run_model
    from course_lib.exercises.lesson11b_train_your_model import run_loop
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_11 / "11_build_and_train.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = prepare(LESSONS_DIR, tmp_path)
    assert {"11a_build_your_model.ipynb", "11b_train_your_model.ipynb"} <= {p.name for p in written}
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    assert "11_build_and_train" in FORMER["11a_build_your_model"]
    assert FORMER["11b_train_your_model"] == ("11_build_and_train",)
    work = collect(["MyTransformer", "train_loop"], tmp_path)
    assert work.origin == {
        "MyTransformer": "lesson 11a: yours in 11_build_and_train.ipynb",
        "train_loop": "lesson 11b: yours in 11_build_and_train.ipynb",
    }
    for name in ("MyTransformer", "train_loop"):
        assert work.functions[name] is not by_name(name).reference
    assert "My model" in work.functions["MyTransformer"].__doc__
    assert work.functions["train_loop"].__doc__.startswith("My loop")
    assert run_model(work.functions["MyTransformer"]).passed
    assert run_loop(work.functions["train_loop"]).passed


# ---------------------------------------------------------------- lesson 03 before its split

BEFORE_THE_SPLIT_OF_03 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_03"


def test_a_workspace_holding_lesson_03_before_its_split_keeps_the_learners_work(tmp_path):
    """03_scaling (from main before the split, each exercise written the learner's own way)
    became 03a_why_scale (softmax_jacobian) and 03b_scale_in_models (score_variance): the
    halves arrive beside it with stubs, and earlier_work finds each exercise in the old file."""
    from course_lib.exercises import FORMER
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_03 / "03_scaling.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"03a_why_scale.ipynb", "03b_scale_in_models.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    assert "03_scaling" in FORMER["03a_why_scale"] and "03_scaling" in FORMER["03b_scale_in_models"]
    for name in ("softmax_jacobian", "score_variance"):  # each asked for alone, then together
        work = collect([name], tmp_path)
        assert work.origin[name].endswith(": yours in 03_scaling.ipynb"), work.origin[name]
    work = collect(["softmax_jacobian", "score_variance"], tmp_path)
    assert work.origin == {
        "softmax_jacobian": "lesson 03a: yours in 03_scaling.ipynb",
        "score_variance": "lesson 03b: yours in 03_scaling.ipynb",
    }
    for name in ("softmax_jacobian", "score_variance"):
        assert work.functions[name].__doc__ == "Mine, written in lesson 03 before it was split."
    scores = torch.randn(3, 5)
    torch.testing.assert_close(work.functions["softmax_jacobian"](scores),
                               by_name("softmax_jacobian").reference(scores))  # fmt: skip
    assert work.functions["score_variance"](128, 128) == pytest.approx(14.445, abs=1e-3)
    # written again in its new lesson, the learner's newer version wins
    nb = nbformat.read(tmp_path / "03b_scale_in_models.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def score_variance("))
    cell.source = "def score_variance(d_model, d_k, bias=True):\n    return 'mine, in 03b'"
    nbformat.write(nb, tmp_path / "03b_scale_in_models.ipynb")
    work = collect(["softmax_jacobian", "score_variance"], tmp_path)
    assert work.origin["score_variance"] == "lesson 03b: yours"
    assert work.functions["score_variance"](1, 1) == "mine, in 03b"
    assert work.origin["softmax_jacobian"] == "lesson 03a: yours in 03_scaling.ipynb"


# ---------------------------------------------------------------- lesson 15 before its split

BEFORE_THE_SPLIT_OF_15 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_15"


def test_a_workspace_holding_lesson_15_before_its_split_keeps_the_learners_work(tmp_path):
    """15_sliding_window (main's learner copy, both exercises written the learner's own way)
    became 15a_sliding_window (both exercises) and 15b_attention_sinks (none): the halves
    arrive beside it, and earlier_work finds each exercise in the old file."""
    from course_lib.exercises import FORMER
    from course_lib.exercises.core import run
    from course_lib.exercises.lesson15a_sliding_window import ATTEND_ROLLING, SLIDING_WINDOW_MASK
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_15 / "15_sliding_window.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"15a_sliding_window.ipynb", "15b_attention_sinks.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    assert FORMER["15a_sliding_window"] == FORMER["15b_attention_sinks"] == ("15_sliding_window",)
    names = ["sliding_window_mask", "attend_rolling"]
    work = collect(names, tmp_path)
    assert work.origin == {name: "lesson 15a: yours in 15_sliding_window.ipynb" for name in names}
    for name in names:
        assert work.functions[name].__doc__ == "Mine, written in lesson 15 before it was split."
    assert run(SLIDING_WINDOW_MASK, work.functions["sliding_window_mask"]).passed
    assert run(ATTEND_ROLLING, work.functions["attend_rolling"]).passed
    # written again in its new lesson, the learner's newer version wins
    nb = nbformat.read(tmp_path / "15a_sliding_window.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def sliding_window_mask("))
    cell.source = "def sliding_window_mask(T, window, sinks=0):\n    return 'mine, in 15a'"
    nbformat.write(nb, tmp_path / "15a_sliding_window.ipynb")
    work = collect(names, tmp_path)
    assert work.origin["sliding_window_mask"] == "lesson 15a: yours"
    assert work.functions["sliding_window_mask"](1, 1) == "mine, in 15a"
    assert work.origin["attend_rolling"] == "lesson 15a: yours in 15_sliding_window.ipynb"


# ---------------------------------------------------------------- lesson 17 before its split

BEFORE_THE_SPLIT_OF_17 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_17"


def test_a_workspace_holding_lesson_17_before_its_split_keeps_the_learners_work(tmp_path):
    """17_tiled_attention (the learner's copy from main before the split, each exercise written
    the learner's own way) became 17a_online_softmax (online_attention) and
    17b_tiled_memory_and_backward (tiled_backward): the halves arrive beside it with stubs,
    and earlier_work finds each exercise in the old file."""
    from course_lib.exercises import FORMER
    from course_lib.exercises.lesson17a_online_softmax import run_online
    from course_lib.exercises.lesson17b_tiled_memory_and_backward import run_backward
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_17 / "17_tiled_attention.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"17a_online_softmax.ipynb", "17b_tiled_memory_and_backward.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    assert (
        FORMER["17a_online_softmax"]
        == FORMER["17b_tiled_memory_and_backward"]
        == ("17_tiled_attention",)
    )
    for name in ("online_attention", "tiled_backward"):  # each asked for alone, then together
        work = collect([name], tmp_path)
        assert work.origin[name].endswith(": yours in 17_tiled_attention.ipynb"), work.origin[name]
    work = collect(["online_attention", "tiled_backward"], tmp_path)
    assert work.origin == {
        "online_attention": "lesson 17a: yours in 17_tiled_attention.ipynb",
        "tiled_backward": "lesson 17b: yours in 17_tiled_attention.ipynb",
    }
    for name in ("online_attention", "tiled_backward"):
        assert work.functions[name].__doc__ == "Mine, written in lesson 17 before it was split."
    assert run_online(work.functions["online_attention"]).passed
    assert run_backward(work.functions["tiled_backward"]).passed
    # written again in its new lesson, the learner's newer version wins
    nb = nbformat.read(tmp_path / "17b_tiled_memory_and_backward.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def tiled_backward("))
    cell.source = (
        "def tiled_backward(q, k, v, out, lse, grad_out, mask=None, tile_size=64):\n"
        "    return 'mine, in 17b'"
    )
    nbformat.write(nb, tmp_path / "17b_tiled_memory_and_backward.ipynb")
    work = collect(["online_attention", "tiled_backward"], tmp_path)
    assert work.origin["tiled_backward"] == "lesson 17b: yours"
    assert work.functions["tiled_backward"](*[None] * 6) == "mine, in 17b"
    assert work.origin["online_attention"] == "lesson 17a: yours in 17_tiled_attention.ipynb"


def test_an_online_attention_not_written_stands_in_as_the_courses_tile_loop(tmp_path):
    """Lesson 17b measures the memory of a loop over tiles: for an online_attention not written,
    earlier_work hands out the course's tiled_attention, not torch's kernel (the check's
    reference), and says it is the course's."""
    from course_lib.paths import LESSONS_DIR
    from course_lib.tiled_attention import tiled_attention
    from course_lib.workspace import prepare

    prepare(LESSONS_DIR, tmp_path)
    work = collect(["online_attention"], tmp_path)
    assert work.functions["online_attention"] is tiled_attention
    assert work.origin["online_attention"] == "lesson 17a: the course's (yours is not written yet)"


# ---------------------------------------------------------------- lesson 04 before its split

BEFORE_THE_SPLIT_OF_04 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_04"
HEADS = ("split_heads", "merge_heads", "multihead")


def test_a_workspace_holding_lesson_04_before_its_split_keeps_the_learners_work(tmp_path):
    """04_multihead (the learner copy of main before the split, each exercise written the
    learner's own way) became 04a_multihead_layer (split_heads, merge_heads, multihead) and
    04b_when_heads_help (no exercise; its explorer takes multihead through earlier_work): the
    halves arrive beside it with stubs, and earlier_work finds every exercise in the old file."""
    from course_lib.exercises import FORMER, LESSONS
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_04 / "04_multihead.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"04a_multihead_layer.ipynb", "04b_when_heads_help.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()  # never written over
    assert all("04_multihead" in FORMER[key] for key in LESSONS if key.startswith("04"))
    assert {by_name(name).lesson for name in HEADS} == {"04a_multihead_layer"}
    work = collect(list(HEADS), tmp_path)
    assert work.origin == {name: "lesson 04a: yours in 04_multihead.ipynb" for name in HEADS}
    for name in HEADS:
        assert work.functions[name].__doc__ == "Mine, written in lesson 04 before it was split."
    # the learner's multihead, with the learner's split and merge, matches the course's
    D, H = 12, 3
    x, qkv, out = torch.randn(2, 5, D), torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
    with torch.no_grad():
        torch.testing.assert_close(work.functions["multihead"](x, qkv, out, H),
                                   by_name("multihead").reference(x, qkv, out, H))  # fmt: skip
    # written again in lesson 04a, the learner's newer version wins; 04b reads nothing again
    nb = nbformat.read(tmp_path / "04a_multihead_layer.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def split_heads("))
    cell.source = (
        "def split_heads(x, num_heads):\n    return 'mine, in 04a'\n\n\n"
        "def merge_heads(y):\n    raise NotImplementedError('merge_heads')"
    )
    nbformat.write(nb, tmp_path / "04a_multihead_layer.ipynb")
    work = collect(list(HEADS), tmp_path)
    assert work.origin["split_heads"] == "lesson 04a: yours"
    assert work.functions["split_heads"](None, 1) == "mine, in 04a"
    assert work.origin["merge_heads"] == "lesson 04a: yours in 04_multihead.ipynb"


# ---------------------------------------------------------------- lesson 16 before its split

BEFORE_THE_SPLIT_OF_16 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_16"


def test_a_workspace_holding_lesson_16_before_its_split_keeps_the_learners_work(tmp_path):
    """16_longer_than_trained (the learner copy from main before the split, pi_angles and
    yarn_frequencies written the learner's own way, ntk_frequencies left a stub) became
    16a_interpolation_and_ntk (pi_angles, ntk_frequencies) and 16b_yarn_compared
    (yarn_frequencies): the halves arrive beside it with stubs, and earlier_work finds each
    written exercise in the old file, and the course's for the one never written."""
    from course_lib.exercises import FORMER
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_16 / "16_longer_than_trained.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"16a_interpolation_and_ntk.ipynb", "16b_yarn_compared.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    for key in ("16a_interpolation_and_ntk", "16b_yarn_compared"):
        assert FORMER[key] == ("16_longer_than_trained",)
    names = ["pi_angles", "ntk_frequencies", "yarn_frequencies"]
    for name in ("pi_angles", "yarn_frequencies"):  # each asked for alone
        work = collect([name], tmp_path)
        assert work.origin[name].endswith(": yours in 16_longer_than_trained.ipynb"), work.origin
    work = collect(names, tmp_path)
    assert work.origin["pi_angles"] == "lesson 16a: yours in 16_longer_than_trained.ipynb"
    assert work.origin["yarn_frequencies"] == "lesson 16b: yours in 16_longer_than_trained.ipynb"
    assert work.origin["ntk_frequencies"].startswith("lesson 16a: the course's")
    for name in ("pi_angles", "yarn_frequencies"):
        assert work.functions[name].__doc__ == "Mine, written in lesson 16 before it was split."
        torch.testing.assert_close(
            work.functions[name](*by_name(name).case_list()[0].args),
            by_name(name).reference(*by_name(name).case_list()[0].args),
        )
    # written again in its new lesson, the learner's newer version wins
    nb = nbformat.read(tmp_path / "16b_yarn_compared.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def yarn_frequencies("))
    cell.source = (
        "def yarn_frequencies(d, factor, trained_len, *args, **kwargs):\n    return 'in 16b'"
    )
    nbformat.write(nb, tmp_path / "16b_yarn_compared.ipynb")
    work = collect(names, tmp_path)
    assert work.origin["yarn_frequencies"] == "lesson 16b: yours"
    assert work.functions["yarn_frequencies"](16, 4.0, 32) == "in 16b"
    assert work.origin["pi_angles"] == "lesson 16a: yours in 16_longer_than_trained.ipynb"


# ---------------------------------------------------------------- lesson 01 before its split

BEFORE_THE_SPLIT_OF_01 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_01"


def test_a_workspace_holding_lesson_01_before_its_split_keeps_the_learners_work(tmp_path):
    """01_language_and_loss (from main before the split, token_embedding and the loss written
    the learner's own way, output_layer left a stub) became 01a_language_and_tokens
    (token_embedding, output_layer) and 01b_loss_and_floor (next_token_cross_entropy): the
    halves arrive beside it with stubs, and earlier_work finds each exercise of either half in
    the old file, the course's for the one left unwritten."""
    from course_lib.exercises import FORMER
    from course_lib.exercises.core import run
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_01 / "01_language_and_loss.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"01a_language_and_tokens.ipynb", "01b_loss_and_floor.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()  # never written over
    assert FORMER["01a_language_and_tokens"] == ("01_language_and_loss",)
    assert FORMER["01b_loss_and_floor"] == ("01_language_and_loss",)
    names = ["token_embedding", "output_layer", "next_token_cross_entropy"]
    for name in ("token_embedding", "next_token_cross_entropy"):  # alone, then together
        work = collect([name], tmp_path)
        assert work.origin[name].endswith(": yours in 01_language_and_loss.ipynb"), name
    work = collect(names, tmp_path)
    assert work.origin == {
        "token_embedding": "lesson 01a: yours in 01_language_and_loss.ipynb",
        "output_layer": "lesson 01a: the course's (yours is not written yet)",
        "next_token_cross_entropy": "lesson 01b: yours in 01_language_and_loss.ipynb",
    }
    assert work.functions["output_layer"] is by_name("output_layer").reference
    for name in ("token_embedding", "next_token_cross_entropy"):
        fn = work.functions[name]
        assert fn.__doc__ == "Mine, written in lesson 01 before it was split.", name
        assert run(by_name(name), fn).passed, name
    # written again in its new lesson, the learner's newer version wins
    path = tmp_path / "01b_loss_and_floor.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def next_token_cross_entropy("))
    cell.source = "def next_token_cross_entropy(logits, ids):\n    return 'mine, in 01b'"
    nbformat.write(nb, path)
    work = collect(names, tmp_path)
    assert work.origin["next_token_cross_entropy"] == "lesson 01b: yours"
    assert work.functions["next_token_cross_entropy"](None, None) == "mine, in 01b"
    assert work.origin["token_embedding"] == "lesson 01a: yours in 01_language_and_loss.ipynb"


# ---------------------------------------------------------------- lesson 07 before its split

BEFORE_THE_SPLIT_OF_07 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_07"


def test_a_workspace_holding_lesson_07_before_its_split_keeps_the_learners_work(tmp_path):
    """07_rope_in_real_models (the learner's copy from main before the split, both exercises
    written the learner's own way) became 07a_rope_in_a_model (rope_heads, to_rotate_half) and
    07b_positions_past_training (no exercise): the halves arrive beside it, and earlier_work
    finds each exercise in the old file until 07a's own version is written."""
    from course_lib.exercises import FORMER, LESSONS
    from course_lib.exercises.core import run as core_run
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_07 / "07_rope_in_real_models.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {"07a_rope_in_a_model.ipynb", "07b_positions_past_training.ipynb"} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    for key in ("07a_rope_in_a_model", "07b_positions_past_training"):
        assert key in LESSONS and "07_rope_in_real_models" in FORMER[key]
    work = collect(["rope_heads", "to_rotate_half"], tmp_path)
    assert work.origin == {
        "rope_heads": "lesson 07a: yours in 07_rope_in_real_models.ipynb",
        "to_rotate_half": "lesson 07a: yours in 07_rope_in_real_models.ipynb",
    }
    for name in ("rope_heads", "to_rotate_half"):
        assert work.functions[name].__doc__ == "Mine, written in lesson 07 before it was split."
        assert core_run(by_name(name), work.functions[name]).passed, name
    # written again in its new lesson, the learner's newer version wins
    nb = nbformat.read(tmp_path / "07a_rope_in_a_model.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("def to_rotate_half("))
    cell.source = "def to_rotate_half(weight, num_heads):\n    return 'mine, in 07a'"
    nbformat.write(nb, tmp_path / "07a_rope_in_a_model.ipynb")
    work = collect(["rope_heads", "to_rotate_half"], tmp_path)
    assert work.origin["to_rotate_half"] == "lesson 07a: yours"
    assert work.functions["to_rotate_half"](None, 1) == "mine, in 07a"
    assert work.origin["rope_heads"] == "lesson 07a: yours in 07_rope_in_real_models.ipynb"


# ---------------------------------------------------------------- lesson 13 before its split

BEFORE_THE_SPLIT_OF_13 = ROOT_TESTS / "fixtures" / "workspace_before_the_split_of_13"


def test_a_workspace_holding_lesson_13_before_its_split_keeps_the_learners_work(tmp_path):
    """13_kv_cache_and_gqa (the learner's copy from main before the split, each exercise
    written the learner's own way) became 13a (rope_from, attend_cached), 13b
    (forward_with_cache, generate_cached) and 13c (grouped_multihead): the three arrive beside
    it with stubs, and earlier_work finds each exercise in the old file, and each passes."""
    from course_lib.exercises import FORMER, run
    from course_lib.exercises.lesson13b_kv_cache import run_forward
    from course_lib.paths import LESSONS_DIR
    from course_lib.workspace import prepare

    old = BEFORE_THE_SPLIT_OF_13 / "13_kv_cache_and_gqa.ipynb"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    stems = ("13a_what_generation_recomputes", "13b_kv_cache", "13c_grouped_query_attention")
    written = {p.name for p in prepare(LESSONS_DIR, tmp_path)}
    assert {f"{stem}.ipynb" for stem in stems} <= written
    assert (tmp_path / old.name).read_bytes() == old.read_bytes()
    assert all(FORMER[stem] == ("13_kv_cache_and_gqa",) for stem in stems)
    labels = {"rope_from": "13a", "attend_cached": "13a", "forward_with_cache": "13b",
              "generate_cached": "13b", "grouped_multihead": "13c"}  # fmt: skip
    for name in labels:  # each asked for alone
        work = collect([name], tmp_path)
        assert work.origin[name].endswith(": yours in 13_kv_cache_and_gqa.ipynb"), work.origin
    work = collect(list(labels), tmp_path)
    assert work.origin == {
        name: f"lesson {label}: yours in 13_kv_cache_and_gqa.ipynb"
        for name, label in labels.items()
    }
    for name in labels:
        assert work.functions[name].__doc__ == "Mine, written in lesson 13 before it was split."
        verdict_of = run_forward if name == "forward_with_cache" else (
            lambda fn, name=name: run(by_name(name), fn))  # fmt: skip
        assert verdict_of(work.functions[name]).passed, name
