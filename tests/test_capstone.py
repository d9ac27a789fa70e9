"""course_lib.capstone: lesson 11's saved run read back for lesson 12, or the stand-in, and
saying which."""

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
    assert sorted(run.steps) == list(range(50, 601, 50))
    for name, tensor in stand_in.model.state_dict().items():
        assert torch.equal(run.model.state_dict()[name], tensor)
    assert not run.model.training


def test_your_file_is_read_with_its_steps(tmp_path, stand_in):
    model = variants.load_trained("base", 1)  # any model with the base model's names
    steps = {50: variants.load_trained("base", 2).state_dict(), 100: model.state_dict()}
    torch.save({"model": model.state_dict(), "steps": steps}, tmp_path / "mine.pt")
    run = capstone.load_run(tmp_path / "mine.pt")
    assert run.source == "your model from mine.pt, trained in lesson 11"
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
