import math
from itertools import pairwise
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib import data, train
from course_lib.model import PRETRAINED, ModelConfig, TinyTransformer
from helpers import built_checkpoint

V = len(data.VOCAB)


@pytest.fixture(scope="module")
def splits():
    return data.load_split("train")[:512], data.load_split("valid")[:64]


def tiny_model():
    return TinyTransformer(V, 32, 2, 64, 1, 32)


def test_loss_falls_on_a_short_run(splits):
    train_ids, valid_ids = splits
    model = tiny_model()
    start = train.evaluate(model, valid_ids)
    config = train.TrainConfig(steps=60, batch_size=16, warmup_steps=10, eval_every=20)
    history = train.train(model, train_ids, valid_ids, config, progress=False)
    # measured: 4.12 nats at random (ln 53 = 3.97), 2.50 after 60 steps
    assert start > 3.5
    assert history.val_loss[-1] < start - 1.0
    assert history.val_loss[0] > history.val_loss[-1]


def test_history_records_every_step_and_every_block(splits):
    train_ids, valid_ids = splits
    model = TinyTransformer(V, 32, 2, 64, 3, 32)
    config = train.TrainConfig(steps=12, batch_size=4, warmup_steps=3, eval_every=5)
    history = train.train(model, train_ids, valid_ids, config, progress=False)
    assert history.step == list(range(12))
    assert len(history.train_loss) == len(history.lr) == 12
    assert len(history.grad_norm) == 12 and all(len(g) == 3 for g in history.grad_norm)
    assert all(g > 0 for row in history.grad_norm for g in row)
    assert history.val_step == [4, 9, 11]
    assert history.wall_time > 0
    assert not model.training


def test_training_is_deterministic_for_a_seed(splits):
    train_ids, valid_ids = splits
    config = train.TrainConfig(steps=8, batch_size=4, eval_every=8)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        runs.append(train.train(tiny_model(), train_ids, valid_ids, config, progress=False))
    assert runs[0].train_loss == runs[1].train_loss


def test_gradient_norms_are_recorded_before_clipping(splits):
    train_ids, valid_ids = splits
    norms = {}
    for clip in (None, 1e-6):
        torch.manual_seed(0)
        config = train.TrainConfig(steps=1, batch_size=4, warmup_steps=1, grad_clip=clip)
        history = train.train(tiny_model(), train_ids, valid_ids, config, progress=False)
        norms[clip] = history.grad_norm
    assert norms[None] == norms[1e-6]
    assert min(norms[1e-6][0]) > 1e-3  # far above the clip: the raw norm, not the clipped one


def test_learning_rate_warms_up_then_decays_to_a_tenth():
    config = train.TrainConfig(steps=100, lr=1e-3, warmup_steps=10)
    lrs = [train.learning_rate(s, config) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4)
    assert lrs[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in pairwise(lrs[9:]))
    assert train.learning_rate(100, config) == pytest.approx(1e-4)


def test_batches_draw_rows_with_the_generator_in_order(splits):
    train_ids, _ = splits
    drawn = train.batches(train_ids, 5, torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        rows = torch.randint(len(train_ids), (5,), generator=g)
        assert torch.equal(next(drawn), train_ids[rows])
    with pytest.raises(TypeError, match="generator"):
        next(train.batches(train_ids, 5, 3))


def test_train_is_train_step_on_batches(splits):
    """train() is train_step over batches(): the same losses, norms and weights, bit for bit."""
    train_ids, valid_ids = splits
    config = train.TrainConfig(steps=6, batch_size=4, warmup_steps=2, eval_every=6)
    torch.manual_seed(1)
    model = tiny_model()
    by_hand = tiny_model()
    by_hand.load_state_dict(model.state_dict())
    history = train.train(model, train_ids, valid_ids, config, progress=False)
    optimizer = torch.optim.AdamW(by_hand.parameters(), lr=config.lr, weight_decay=0.01)
    drawn = train.batches(train_ids, config.batch_size, torch.Generator().manual_seed(0))
    results = [
        train.train_step(by_hand.train(), optimizer, next(drawn), step, config)
        for step in range(config.steps)
    ]
    assert [r.loss for r in results] == history.train_loss
    assert [r.grad_norms for r in results] == history.grad_norm
    after = by_hand.state_dict()
    assert all(torch.equal(after[k], v) for k, v in model.state_dict().items())


def test_the_batch_sampler_is_written_once():
    """train.batches is the one sampler: the lessons, their checkers and tests call it. Lesson
    11 alone has the learner write it again, inside their own training loop: its exercise, its
    learner-style wrong versions and its solution hold it on purpose."""
    root = Path(__file__).resolve().parent.parent
    sampler = "randint(len(train_ids)"
    found = [
        str(path.relative_to(root))
        for folder in ("course_lib", "tests", "notebooks", "tools", "benchmarks")
        for path in sorted((root / folder).rglob("*"))
        if path.suffix in (".py", ".ipynb")
        and sampler in path.read_text(encoding="utf-8")
        and path.name != "test_train.py"
    ]
    lesson11 = {
        "course_lib/exercises/lesson11/__init__.py",
        "course_lib/exercises/lesson11/train_loop.py",
        "notebooks/11_build_and_train.ipynb",
        "tests/test_exercises_lesson11.py",
    }
    assert [f for f in found if f not in lesson11] == ["course_lib/train.py"]


def test_loss_by_position_matches_torch_cross_entropy(splits):
    _, valid_ids = splits
    model = tiny_model().eval()
    ids = valid_ids[:10]
    with torch.no_grad():
        logits = model(ids[:, :-1])
    expected = torch.stack(
        [F.cross_entropy(logits[:, t], ids[:, t + 1]) for t in range(ids.shape[1] - 1)]
    )
    assert_close(train.loss_by_position(model, ids, batch_size=3), expected)
    assert train.evaluate(model, ids) == pytest.approx(float(expected.mean()), rel=1e-5)
    assert_close(train.lm_loss(model, ids), expected.mean())


def test_recipes_cover_every_shipped_name():
    assert tuple(train.RECIPES) == PRETRAINED
    widths = {config.d_model for config, _ in train.RECIPES.values()}
    assert widths == {64}


def test_build_checkpoint_writes_a_loadable_state_dict_and_card(tmp_path, monkeypatch):
    config = ModelConfig(V, d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=data.LONG_LEN)
    quick = train.TrainConfig(steps=3, batch_size=4, eval_every=3)
    card, _ = built_checkpoint("rope-h4", config, quick, tmp_path, monkeypatch)
    lengths = card["length_generalisation"]
    assert lengths["train_len"] == data.SEQ_LEN and lengths["eval_len"] == 4 * data.SEQ_LEN
    assert len(lengths["loss_by_position"]) == 4 * data.SEQ_LEN - 1
    assert set(card["detectors"]) == {"previous", "bracket", "subject"}
    assert all(math.isfinite(x) for x in lengths["loss_by_position"])
    with pytest.raises(ValueError, match="rope-h1"):
        train.build_checkpoint("rope-h16", tmp_path)
