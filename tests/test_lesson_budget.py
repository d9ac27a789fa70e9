"""tools/lesson_budget.py: the run-time budget every lesson must keep (issue 23)."""

import pytest

from tools.lesson_budget import budget, over_budget

pytestmark = pytest.mark.path_independent


def test_a_lesson_gets_20_s_and_the_capstone_60_s():
    assert budget("03_multihead") == 20.0
    assert budget("11b_train_your_model") == 60.0


def test_lesson_11_trains_the_learners_model_live_on_the_capstones_budget():
    assert budget("11b_train_your_model") == 60.0
    assert budget("12_read_your_model") == 20.0


def test_only_the_notebooks_over_their_budget_are_named():
    times = {"01_attention_qkv": 20.0, "02_scaling": 20.5, "11b_train_your_model": 59.0}
    assert over_budget(times) == ["02_scaling: 20.5 s of cells, budget 20 s"]
    assert over_budget({"11b_train_your_model": 61.2}) == [
        "11b_train_your_model: 61.2 s of cells, budget 60 s"
    ]
    assert over_budget({}) == []


def test_two_lessons_with_one_number_keep_their_own_budgets():
    # 05_encoder_decoder and 05_transformer_block: summed by stem (conftest.py), never by number
    times = {"05_encoder_decoder": 12.0, "05_transformer_block": 12.0}
    assert over_budget(times) == []  # 24 s for "05" would be over, but each is its own lesson
    assert over_budget({**times, "05_encoder_decoder": 21.0}) == [
        "05_encoder_decoder: 21.0 s of cells, budget 20 s"
    ]
