"""course_lib.capstone: lesson 11's saved run read back for lesson 12, or the stand-in, and
saying which."""

from dataclasses import replace

import pytest
import torch

from course_lib import capstone, corpus, train, variants


@pytest.fixture(scope="module")
def stand_in():
    return capstone.stand_in()


def test_a_missing_file_gives_the_stand_in_and_says_so(tmp_path, stand_in):
    run = capstone.load_run(tmp_path / "my_model_11.pt")
    assert run.source.startswith("my_model_11.pt is not in this folder")
    assert "the course's stand-in" in run.source
    assert sorted(run.steps) == list(range(0, 601, 50))
    for name, tensor in stand_in.model.state_dict().items():
        assert torch.equal(run.model.state_dict()[name], tensor)
    assert not run.model.training


def test_your_file_is_read_with_its_steps_and_says_who_trained_it(tmp_path, stand_in):
    model = variants.load_trained("base", 1)  # any model with the base model's names
    steps = {50: variants.load_trained("base", 2).state_dict(), 100: model.state_dict()}
    trained_by = {"class": "the course's TinyTransformer (your MyTransformer has not passed its "
                  "check)", "loop": "your train_loop"}  # fmt: skip
    torch.save({"model": model.state_dict(), "steps": steps, "trained_by": trained_by},
               tmp_path / "mine.pt")  # fmt: skip
    run = capstone.load_run(tmp_path / "mine.pt")
    assert run.source == (
        "your model from mine.pt, saved by lesson 11b: the course's TinyTransformer (your "
        "MyTransformer has not passed its check), trained by your train_loop"
    )
    assert torch.equal(run.model.head.weight, model.head.weight)
    assert sorted(run.steps) == [50, 100]
    assert torch.equal(run.at(50).head.weight, variants.load_trained("base", 2).head.weight)
    with pytest.raises(ValueError, match=r"step: expected one of \[50, 100\], got 75"):
        run.at(75)


def test_a_bare_state_dict_is_your_model_with_the_stand_ins_steps(tmp_path, stand_in):
    model = variants.load_trained("base", 1)
    torch.save(model.state_dict(), tmp_path / "old.pt")  # lesson 11 before it kept its steps
    run = capstone.load_run(tmp_path / "old.pt")
    assert torch.equal(run.model.head.weight, model.head.weight)
    assert "holds no steps" in run.source and sorted(run.steps) == sorted(stand_in.steps)


@pytest.mark.parametrize("content", [b"half a file", None])
def test_a_file_that_cannot_be_read_gives_the_stand_in(tmp_path, content):
    path = tmp_path / "my_model_11.pt"
    if content is None:  # another model's weights
        torch.save({"model": {"embed.weight": torch.zeros(3, 3)}}, path)
    else:
        path.write_bytes(content)
    run = capstone.load_run(path)
    assert run.source.startswith("my_model_11.pt could not be read (")
    assert "\n" not in run.source and len(run.source) < 330


def test_read_step_is_the_models_attention_and_its_token_losses(stand_in):
    from course_lib import heads

    ids = corpus.load_split("valid")[:20]
    weights, losses = capstone.read_step(stand_in.model, ids)
    for got, want in zip(weights, heads.attention_weights(stand_in.model, ids), strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(losses, train.token_losses(stand_in.model, ids))


def test_a_file_saved_before_lesson_11_recorded_who_trained_it_says_so(tmp_path):
    model = variants.load_trained("base", 1)
    torch.save({"model": model.state_dict(), "steps": {50: model.state_dict()}}, tmp_path / "a.pt")
    source = capstone.load_run(tmp_path / "a.pt").source
    assert source == ("your model from a.pt, saved by lesson 11b: whose class and loop trained it "
                      "is not recorded (the file is older)")  # fmt: skip


class _Tiny(torch.nn.Module):
    """A stand-in for a learner's class: the course's model inside, for these tests only."""

    def __init__(self, **sizes):
        super().__init__()
        from course_lib.model import TinyTransformer

        self.inner = TinyTransformer(**sizes, max_len=32)

    def forward(self, idx):
        return self.inner(idx)


def test_your_model_is_your_class_only_once_it_passed():
    from course_lib.model import TinyTransformer

    sizes = dict(vocab_size=104, d_model=16, num_heads=2, d_ff=32, num_layers=1)
    config = replace(variants.BASE, **sizes, max_len=32)
    weights = {f"inner.{k}": v for k, v in TinyTransformer.from_config(config).state_dict().items()}
    model, whose = capstone.your_model(_Tiny, True, weights, config)
    assert type(model) is _Tiny and whose == "your MyTransformer"
    course = TinyTransformer.from_config(config).state_dict()
    model, whose = capstone.your_model(_Tiny, False, course, config)
    assert type(model) is TinyTransformer
    assert whose == "the course's TinyTransformer (your MyTransformer has not passed its check)"


def test_train_live_measures_the_start_and_every_callback_and_records_who_trained():
    from course_lib.model import TinyTransformer

    config = replace(variants.BASE, d_model=16, d_ff=32, num_layers=1, max_len=32)
    model = TinyTransformer.from_config(config)
    valid = corpus.load_split("valid")  # (400, 32): the excess is read against its floor
    recipe = train.TrainConfig(steps=4, batch_size=4, warmup_steps=2, eval_every=2)
    calls = []

    def loop(m, train_ids, cfg, callback):
        for step in (2, 4):
            callback(step, m)
            calls.append(step)
        return [1.0] * cfg.steps

    run = capstone.train_live(model, "your MyTransformer", loop, valid[:50], valid, recipe)
    assert sorted(run.curve) == sorted(run.steps) == [0, 2, 4] and calls == [2, 4]
    assert run.trained_by == {"class": "your MyTransformer", "loop": "your train_loop"}
    assert capstone.trained_by_words(run.trained_by) == (
        "your MyTransformer, trained by your train_loop"
    )
    run = capstone.train_live(model, "x", None, valid[:50], valid, recipe)  # the course's loop
    assert sorted(run.curve) == [0, 2, 4] and len(run.losses) == 4
    assert run.trained_by["loop"].startswith("the course's train.train (your train_loop")


def test_the_copy_curves_and_their_steps():
    curves = capstone.shipped_copy_curves()
    assert sorted(curves) == [0, 1, 2] and all(c[0][0] == 50 for c in curves.values())
    assert capstone.first_within([(0, 1.0), (50, 0.3), (100, 0.1)]) == 100
    assert capstone.first_within([(0, 1.0)]) is None
    assert capstone.largest_drop([(0, 5.0), (150, 1.0), (200, 0.9), (250, 0.2)], after=150) == (
        250,
        pytest.approx(0.7),
    )
