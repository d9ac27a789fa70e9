"""The variant table (course_lib/variants.py): its verdicts, its runs, and the shipped file."""

import json
from dataclasses import replace

import pytest

from course_lib import language, variant_screens, variants
from course_lib.model import ModelConfig


def _run(variant, seed, valid, long=None):
    return {"variant": variant, "seed": seed, "valid": valid, "long": long or valid}


def test_a_claim_holds_only_when_the_gap_is_three_seed_ranges():
    runs = [_run("base", s, {"all": 0.010 + 0.001 * s, "mark": 0.0}) for s in range(3)]
    runs += [_run("heads-1", s, {"all": 0.020 + 0.002 * s, "mark": 0.5}) for s in range(3)]
    claim = variants._gap({"base": runs[:3], "heads-1": runs[3:]}, "base", "heads-1", "valid",
                          "all")  # fmt: skip
    # means 0.011 and 0.022; the larger range is 0.004, so the bar is 0.012 > the gap 0.011
    assert claim["gap"] == pytest.approx(0.011) and claim["bar"] == pytest.approx(0.012)
    assert not claim["holds"]
    runs[5]["valid"]["all"] = 0.023  # range 0.003: bar 0.009 < gap 0.0103
    assert variants._gap({"base": runs[:3], "heads-1": runs[3:]}, "base", "heads-1", "valid",
                         "all")["holds"]  # fmt: skip


def test_jump_step_is_where_the_copy_loss_passes_half_way():
    curve = [
        [50, 2.0, 0.05, 0.04],
        [100, 1.9, 0.08, 0.04],
        [150, 0.4, 0.5, 0.05],
        [200, 0.1, 0.9, 0.05],
    ]
    assert variants.jump_step(curve) == 150  # half-way between 2.0 and 0.1 is 1.05


def test_each_claim_compares_variants_that_differ_in_the_piece_it_names():
    for row in variants.ROWS:
        assert row.skill in ("all", *language.SKILLS)
        for better, worse in row.pairs:
            a, b = variants.VARIANTS[better], variants.VARIANTS[worse]
            changed = {k for k in vars(a) if getattr(a, k) != getattr(b, k)}
            # one setting, or residuals and normalisation together, or SwiGLU with its
            # equal-parameter width, alone or in the Llama-style block (lesson 14)
            together = ({"residual", "norm"}, {"ff", "d_ff"}, {"norm", "ff", "d_ff", "bias"})
            assert changed and (len(changed) == 1 or changed in together), row


def test_a_config_stored_before_a_field_existed_keeps_its_runs(tmp_path, monkeypatch):
    # data/variants.json was written before ModelConfig had `tied`: its configs lack it, and
    # --missing must keep their runs (the field at its default) and train only the new ones
    stored = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    for config in stored["configs"].values():
        config.pop("tied", None)
    stored["runs"] = [r for r in stored["runs"] if r["variant"] in ("base", "heads-1")]
    del stored["configs"]["tied"]
    path = tmp_path / "variants.json"
    path.write_text(json.dumps(stored), encoding="utf-8")
    monkeypatch.setattr(variants, "RESULTS", path)
    kept = variants.stored_runs(["base", "heads-1", "tied"])
    assert {(r["variant"], r["seed"]) for r in kept} == {
        (name, seed) for name in ("base", "heads-1") for seed in variants.SEEDS
    }


@pytest.mark.retrains
def test_a_short_run_reports_every_skill_on_both_splits(monkeypatch):
    monkeypatch.setattr(variants, "RECIPE", replace(variants.RECIPE, steps=4, eval_every=2))
    run = variants.train_run("layers-1", 0, curve=True)
    assert set(run["valid"]) == set(run["long"]) == {"all", *language.SKILLS}
    assert [point[0] for point in run["curve"]] == [2, 4]
    assert all(0 <= p <= 1 for point in run["curve"] for p in point[2:])
    assert run["valid"]["all"] > 1.0  # four steps learn almost nothing


@pytest.fixture(scope="module")
def table():
    return json.loads(variants.RESULTS.read_text(encoding="utf-8"))


def test_the_shipped_table_has_three_seeds_of_every_variant(table):
    assert table["seeds"] == list(variants.SEEDS)
    seeds = {}
    for run in table["runs"]:
        seeds.setdefault(run["variant"], []).append(run["seed"])
    assert seeds == {name: list(variants.SEEDS) for name in variants.VARIANTS}
    assert set(table["parameters"]) == set(variants.VARIANTS)


def test_the_shipped_verdicts_follow_from_the_shipped_runs(table):
    assert table["rows"] == json.loads(json.dumps(variants.verdicts(table["runs"])))
    assert table["induction_jump_steps"] == [
        variants.jump_step(run["curve"]) for run in table["runs"]
        if "curve" in run and run["variant"] == "base"
    ]  # fmt: skip


@pytest.mark.slow
def test_the_shipped_floor_is_the_languages(table):
    for split in ("valid", "long"):
        assert table["floor"][split] == pytest.approx(variants.split_floor(split), abs=1e-5)


@pytest.mark.slow  # every shipped model on both splits
def test_a_shipped_trained_variant_is_the_tables_run():
    # the lessons study these models: each must be the run the table reports, its card
    # carrying the floor of each split it reports its excess on
    table = json.loads(variants.RESULTS.read_text(encoding="utf-8"))
    floor = variants.card_floor()
    for variant, seeds in variants.CHECKPOINTS.items():
        for seed in seeds:
            model = variants.load_trained(variant, seed)
            card = variants.trained_card(variant, seed)
            assert not model.training and card["floor"] == floor
            assert variants._same_config(table["configs"][variant], ModelConfig(**card["config"]))
            (run,) = [r for r in table["runs"] if (r["variant"], r["seed"]) == (variant, seed)]
            for split in ("valid", "long"):
                measured = variants.excess_loss(model, split)
                for skill, value in run[split].items():
                    assert measured[skill] == pytest.approx(value, abs=2e-5), (seed, split, skill)
                    assert card["excess"][split][skill] == value


def test_a_trained_variant_that_is_not_shipped_is_named():
    shipped = ", ".join(variants.CHECKPOINTS)
    with pytest.raises(ValueError, match=f"variant: expected one of {shipped}, got 'heads-1'"):
        variants.load_trained("heads-1", 0)
    with pytest.raises(ValueError, match="seed: expected one of 0 .*'1-layer-heads-4'.* got 1"):
        variants.load_trained("1-layer-heads-4", 1)  # lesson 04b ships seed 0 only
    with pytest.raises(ValueError, match="seed: expected one of 0, 1, 2 .* got 7"):
        variants.trained_card("base", 7)


@pytest.mark.slow
def test_a_screen_trains_only_its_variants_and_checks_the_rows_they_complete():
    before = variants.RESULTS.read_bytes()
    # "layers-2" is another name of "base": it is trained once, under "base"
    screened = variant_screens.screen(["1-layer-heads-1", "1-layer-heads-2"], steps=3)
    assert variants.RESULTS.read_bytes() == before  # the shipped table is left alone
    assert screened["recipe"]["steps"] == 3 and screened["seeds"] == list(variants.SEEDS)
    assert sorted((r["variant"], r["seed"]) for r in screened["runs"]) == [
        (name, seed) for name in ("1-layer-heads-1", "1-layer-heads-2") for seed in variants.SEEDS
    ]
    # the one row both complete, checked as the table checks its rows
    assert [row["name"] for row in screened["rows"]] == ["two heads against one, at one layer"]
    assert screened["rows"] == variants.verdicts(screened["runs"], [variants.ROWS[1]])
    # a run of the screen is the run train_run makes with those steps, on one thread
    again = variants.train_run("1-layer-heads-2", 1, steps=3)
    assert again["valid"] == next(
        r["valid"] for r in screened["runs"] if (r["variant"], r["seed"]) == ("1-layer-heads-2", 1)
    )
    text = variant_screens.compared(screened, variants.stored_table())
    assert "| gap, 3 steps |" in text and "gap, 2,000 steps |" in text


def test_a_screen_names_a_bad_variant_or_step_count():
    with pytest.raises(
        ValueError, match="names: expected variants of course_lib.variants.VARIANTS, got 'bass'"
    ):
        variant_screens.screen(["bass"], steps=10)
    with pytest.raises(ValueError, match="steps: expected a positive int, got 0"):
        variant_screens.screen(["base"], steps=0)
    for lr in (0, -0.01, 3.0, "0.01", True):
        with pytest.raises(ValueError, match="lr: expected a learning rate between 0 and 1"):
            variant_screens.screen(["base"], steps=10, lr=lr)


def test_a_screen_is_labelled_by_what_it_changes():
    table = variants.stored_table()
    recipe = table["recipe"]
    label = variant_screens.label
    assert label({**recipe, "steps": 4000}, table) == "4,000 steps"
    assert label({**recipe, "lr": 0.01}, table) == "learning rate 0.01"
    assert label({**recipe, "steps": 500, "lr": 0.001}, table) == (
        "500 steps and learning rate 0.001"
    )
    assert label(recipe, {"recipe": {**recipe, "lr": 0.01}}) == "learning rate 0.003"


@pytest.mark.slow
def test_a_learning_rate_screen_trains_at_that_rate():
    screened = variant_screens.screen(["1-layer-heads-1", "1-layer-heads-2"], steps=3, lr=0.01)
    assert screened["recipe"]["lr"] == 0.01 and screened["recipe"]["steps"] == 3
    again = variants.train_run("1-layer-heads-2", 2, steps=3, lr=0.01)
    assert again["valid"] == next(
        r["valid"] for r in screened["runs"] if (r["variant"], r["seed"]) == ("1-layer-heads-2", 2)
    )
    assert again["valid"] != variants.train_run("1-layer-heads-2", 2, steps=3)["valid"]
    text = variant_screens.compared(screened, variants.stored_table())
    assert "| gap, 3 steps and learning rate 0.01 |" in text and "gap, 2,000 steps and" in text


def test_a_screen_aliases_a_config_trained_under_its_first_name():
    runs = [{"variant": "base", "seed": s, "valid": {}, "long": {}} for s in variants.SEEDS]
    named = {(r["variant"], r["seed"]) for r in variants._with_aliases(runs)}
    assert ("layers-2", 0) in named and ("base", 2) in named
    assert not any(r["variant"] == "heads-1" for r in variants._with_aliases(runs))


def test_each_kept_screen_checks_its_rows_from_its_own_runs():
    from benchmarks.__main__ import SCREENS

    screens = sorted(SCREENS.glob("*.json"))
    assert screens, "benchmarks/screens/ holds the 4,000-step screen"
    for path in screens:
        screened = json.loads(path.read_text(encoding="utf-8"))
        names = {row["name"] for row in screened["rows"]}
        rows = [row for row in variants.ROWS if row.name in names]
        checked = json.dumps(variants.verdicts(screened["runs"], rows))  # as stored, NaN too
        assert json.dumps(screened["rows"]) == checked, path.name
        assert len(screened["runs"]) >= 3 * len({r["variant"] for r in screened["runs"]})
        assert screened["recipe"] == {
            **screened["recipe"],
            **{k: v for k, v in variants.stored_table()["recipe"].items()
               if k not in ("steps", "lr")},
        }, "a screen changes the steps or the learning rate only"  # fmt: skip
