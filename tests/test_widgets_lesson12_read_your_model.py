"""Lesson 12's explorers driven from plain Python: TrainedHeadsExplorer draws the attention of
the saved step chosen, with the detectors' cells marked; KnockoutExplorer draws the excess
table it was given and the lines the learner's generate writes with a head knocked out."""

import pytest
import torch

from course_lib import capstone, corpus
from course_lib.model import generate
from course_lib.widgets import KnockoutExplorer, TrainedHeadsExplorer
from course_lib.widgets.lesson12_read_your_model import TRAINED_EXAMPLES
from helpers import picture, set_controls, stub

pytestmark = pytest.mark.explorers


@pytest.fixture(scope="module")
def run():
    return capstone.stand_in()


@pytest.fixture(scope="module")
def heads_explorer(run):
    return TrainedHeadsExplorer(run)


@pytest.mark.parametrize("step", [250, 300])
def test_the_map_is_the_chosen_steps_attention(heads_explorer, run, step):
    state = set_controls(heads_explorer, example="the copy", step=step, layer=1, head=3, query=27)
    ids = corpus.encode(TRAINED_EXAMPLES["the copy"])[None]
    with torch.no_grad():
        _, weights = run.at(step)(ids, return_weights=True)
    want = weights[1][0, 3]  # (T, T)
    assert state["weights"] == pytest.approx(want.numpy(), abs=1e-6)
    assert state["bars"] == pytest.approx(want[27].tolist(), abs=1e-6)
    assert state["query"] == 27 and f"after step {step}, layer 1, head 3" in state["readout"]
    assert f"after step {step}" in heads_explorer.describe()  # the picture names its setting


def test_the_copy_head_forms_between_250_and_300_on_the_copy_line(heads_explorer):
    before = set_controls(heads_explorer, example="the copy", step=250, layer=1, head=3, query=27)
    after = set_controls(heads_explorer, step=300)
    assert before["bars"][2] < 0.1 < 0.9 < after["bars"][2]  # the second `with` -> `dog`
    set_controls(heads_explorer, step=600)


def test_the_marks_are_the_detectors_pairs(heads_explorer):
    state = set_controls(heads_explorer, example="the copy")
    tokens = TRAINED_EXAMPLES["the copy"].split()
    for job, find in corpus.DETECTORS.items():
        assert sorted(state["marks"][job]) == sorted(find(tokens)), job


def test_a_typed_line_is_shown_and_a_word_outside_the_vocabulary_is_named(heads_explorer):
    before = picture(heads_explorer)
    state = set_controls(
        heads_explorer, sentence="Dogs near cat chase cats [ birds ] .cbc Cats near cat"
    )
    assert state["tokens"][-3:] == ["Cats", "near", "cat"] and "your line" in state["message"]
    assert picture(heads_explorer) != before
    state = set_controls(heads_explorer, sentence="Dogs chase the cat .")
    assert "Not shown" in state["message"] and "'the'" in state["message"]
    assert state["tokens"][-1] == "cat"  # the previous line stays
    set_controls(heads_explorer, sentence="", example="the song")
    set_controls(heads_explorer, example="the copy")


@pytest.fixture(scope="module")
def knockout_explorer(run):
    from course_lib import ablation

    def yours(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        return generate(model, prompt, num_tokens, temperature=temperature, top_k=top_k,
                        seed=seed)  # fmt: skip

    table = ablation.excess_table(run.model, skills=KnockoutExplorer.SKILLS)
    return KnockoutExplorer(run.model, table, generate=yours), table


def test_the_bars_are_the_chosen_rows_of_the_table(knockout_explorer):
    explorer, (labels, table) = knockout_explorer
    state = set_controls(explorer, head=(1, 3), temperature=0.0)
    row = table[labels.index((1, 3))]
    assert list(state["excess"].values()) == pytest.approx(row.tolist())
    assert state["rise"]["induction"] == pytest.approx(float(row[2] - table[0, 2]))
    assert "layer 1, head 3 out" in state["readout"]
    state = set_controls(explorer, head="none")
    assert state["rise"]["induction"] == 0


def test_the_bar_axis_follows_the_bars_shown(knockout_explorer):
    explorer, (labels, table) = knockout_explorer
    for head in ("none", (1, 3), (0, 2)):
        state = set_controls(explorer, head=head)
        tallest = max(*state["excess"].values(), *state["baseline"].values())
        low, high = state["bar_axis"]
        assert tallest < high <= 1.2 * tallest  # the tallest bar fills most of the height
        assert low <= min(0.0, *state["excess"].values())
    small = set_controls(explorer, head="none")["bar_axis"][1]
    assert small < 0.5 * set_controls(explorer, head=(0, 2))["bar_axis"][1]  # not one axis for all
    set_controls(explorer, head="none")


def test_each_explorer_starts_where_the_lesson_sends_the_learner(run, knockout_explorer):
    heads = TrainedHeadsExplorer(run).values()  # before the copy's jump, on the copy line
    shown = [heads[name] for name in ("example", "step", "layer", "head", "query")]
    assert shown == ["the copy", 250, 1, 3, 27]
    _, table = knockout_explorer
    assert KnockoutExplorer(run.model, table).values()["head"] == (1, 3)


def test_the_heads_picture_names_its_line_and_step(heads_explorer):
    set_controls(heads_explorer, example="the copy", step=300, layer=1, head=3)
    assert heads_explorer.ax_map.get_title().startswith(
        "the copy line: layer 1, head 3, after step 300"
    )
    set_controls(heads_explorer, sentence="Dogs near cat chase cats [ birds ] .cbc Cats near cat")
    assert heads_explorer.ax_map.get_title().startswith("your line: ")
    set_controls(heads_explorer, sentence="", example="the song")
    assert heads_explorer.ax_map.get_title().startswith("the song line: ")
    set_controls(heads_explorer, example="the copy", step=600)


def test_the_lines_are_generate_with_the_head_knocked_out(knockout_explorer, run):
    from course_lib import ablation

    explorer, _ = knockout_explorer
    state = set_controls(explorer, head=(1, 3), temperature=0.0)
    prompts = torch.stack([corpus.encode(p) for p in KnockoutExplorer.PROMPTS])
    with ablation.knockout(run.model, [(1, 3)]):
        want = generate(run.model, prompts, KnockoutExplorer.NUM_TOKENS, temperature=0)
    first = state["lines"][0]
    assert first["prompt"] == KnockoutExplorer.PROMPTS[0]
    assert (first["prompt"] + " " + first["new"]).split() == corpus.to_tokens(want[0])
    assert first["skill"] == "induction" and first["broken"] == 6  # the copy breaks
    assert "written by your generate" in explorer.text_title.get_text()  # in the picture
    set_controls(explorer, head="none")


def test_a_stub_generate_falls_back_to_the_courses_and_says_so(run, knockout_explorer):
    _, table = knockout_explorer
    explorer = KnockoutExplorer(run.model, table, generate=stub)
    assert "the course's generate (yours is not written yet)" in explorer.text_title.get_text()


def test_the_courses_generate_handed_out_by_earlier_work_is_not_called_yours(
    run, knockout_explorer
):
    from course_lib.exercises import by_name

    _, table = knockout_explorer
    explorer = KnockoutExplorer(run.model, table, generate=by_name("generate").reference)
    assert "written by the course's generate" in explorer.text_title.get_text()


def test_the_bars_title_names_the_setting_shown(knockout_explorer):
    explorer, _ = knockout_explorer
    set_controls(explorer, head="none")
    assert explorer.bars_title.get_text() == "each skill's excess, nothing knocked out"
    assert [t.get_text() for t in explorer.values_shown][:1] == [f"{explorer.table[0, 0]:.2f}"]
    set_controls(explorer, head=(0, 2))
    assert explorer.bars_title.get_text() == "each skill's excess, L0 H2 knocked out"
    set_controls(explorer, head="none")


def test_the_query_bars_name_the_querys_token(heads_explorer):
    set_controls(heads_explorer, example="the copy", query=27)
    assert heads_explorer.ax_bars.get_title() == "query 27 'with': its weights over the keys"
    assert heads_explorer.ax_bars.get_xlabel() == "key"
    assert (
        heads_explorer.ax_map.get_xlabel() == "key"
        and heads_explorer.ax_map.get_ylabel() == "query"
    )
