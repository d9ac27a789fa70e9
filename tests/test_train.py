import json
import os
from itertools import pairwise
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib import capstone, corpus, train, variants
from course_lib.model import CHECKPOINT_DIR, TinyTransformer

V = len(corpus.VOCAB)


@pytest.fixture(scope="module")
def splits():
    return corpus.load_split("train")[:512], corpus.load_split("valid")[:64]


def tiny_model():
    return TinyTransformer(V, 32, 2, 64, 1, 32)


def test_loss_falls_on_a_short_run(splits):
    train_ids, valid_ids = splits
    model = tiny_model()
    start = train.evaluate(model, valid_ids)
    config = train.TrainConfig(steps=60, batch_size=16, warmup_steps=10, eval_every=20)
    history = train.train(model, train_ids, valid_ids, config, progress=False)
    # measured over seeds 0-2: 4.84-4.90 nats at random (ln 104 = 4.64), 2.78 after 60 steps
    assert start > 4.3
    assert history.val_loss[-1] < start - 1.5
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
        "course_lib/exercises/lesson11b_train_your_model/__init__.py",
        "course_lib/exercises/lesson11b_train_your_model/train_loop.py",
        "notebooks/11b_train_your_model.ipynb",
        "tests/test_exercises_lesson11b_train_your_model.py",
        # a learner's loop in lesson 11 before its split (tests/test_mywork.py)
        "tests/fixtures/workspace_before_the_split_of_11/11_build_and_train.ipynb",
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


# ---------------------------------------------------------------- rebuilding the shipped files


def test_the_shipped_checkpoints_are_every_file_in_data_checkpoints():
    names = train.shipped_checkpoints()
    assert names[-1] == train.STAND_IN  # last: lesson 11's run reads the base model
    assert sorted(names) == sorted(path.stem for path in CHECKPOINT_DIR.glob("*.pt"))
    cards = sorted(path.stem for path in CHECKPOINT_DIR.glob("*.json"))
    assert cards == sorted(names[:-1])  # a card beside every trained variant
    assert CHECKPOINT_DIR / f"{train.STAND_IN}.pt" == capstone.STAND_IN


def test_main_writes_the_data_then_every_checkpoint(monkeypatch, capsys):
    done = []
    monkeypatch.setattr(corpus, "write_data", lambda: done.append("data") or [Path("x.txt")])
    monkeypatch.setattr(train, "rebuild", lambda names, jobs, say: done.append((names, jobs)))
    train.main(["--data"])
    assert done == ["data", (None, 1)] and "wrote x.txt" in capsys.readouterr().out
    done.clear()
    train.main(["lang-base-s1", "--jobs", "2"])
    assert done == [(["lang-base-s1"], 2)]  # the data only when asked for


def test_help_lists_every_checkpoint(capsys):
    with pytest.raises(SystemExit):
        train.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--data" in text and "data/language/" in text
    for name in train.shipped_checkpoints():
        assert name.split("-")[-1] in text


def test_rebuild_names_what_it_cannot_build(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="names: expected some of lang-base-s0, .*got 'rope-h4'"):
        train.rebuild(["rope-h4"], tmp_path)
    monkeypatch.setattr(train, "ROOT", tmp_path)  # as installed: no tools/ beside the package
    with pytest.raises(FileNotFoundError, match="lesson11-stand-in: .*rebuild it from a clone"):
        train.rebuild([train.STAND_IN], tmp_path)


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# the shipped weights were trained on this CPU's own kernels: bit for bit only there
ON_ITS_OWN_KERNELS = pytest.mark.skipif(
    bool(os.environ.get("ATEN_CPU_CAPABILITY")),
    reason="bit-for-bit weights hold on the CPU's own kernel path; this run forces another",
)


@pytest.mark.retrains
@ON_ITS_OWN_KERNELS
def test_a_rebuilt_variant_is_the_shipped_one(tmp_path):
    """The cheapest shipped variant trained again from its seed as `python -m course_lib.train`
    trains it (about 45 s): on this kernel path the same weights, bit for bit, and the same
    card (the cards carry no timings)."""
    name = variants.checkpoint_name("1-layer-heads-1", 0)
    train.rebuild([name], tmp_path, say=lambda line: None)
    rebuilt, shipped = (torch.load(d / f"{name}.pt", weights_only=True)
                        for d in (tmp_path, CHECKPOINT_DIR))  # fmt: skip
    assert _same_state(rebuilt, shipped)
    card = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    assert card == variants.trained_card("1-layer-heads-1", 0)


@pytest.mark.retrains
@ON_ITS_OWN_KERNELS
def test_a_rebuilt_stand_in_is_the_shipped_one(tmp_path):
    """Lesson 11 run again by its tool, as `python -m course_lib.train` runs it (about 2
    minutes): the final weights and every saved step the same as the shipped stand-in's."""
    train.rebuild([train.STAND_IN], tmp_path, say=lambda line: None)
    rebuilt = torch.load(tmp_path / f"{train.STAND_IN}.pt", weights_only=True)
    shipped = torch.load(capstone.STAND_IN, weights_only=True)
    gap = max(float((rebuilt["model"][k] - v).abs().max()) for k, v in shipped["model"].items())
    assert gap == 0, (
        f"lesson 11 as it is now trains weights up to {gap:.2g} away from the shipped stand-in's: "
        f"write it again (python -m course_lib.train {train.STAND_IN})"
    )
    assert _same_state(rebuilt["model"], shipped["model"])
    assert sorted(rebuilt["steps"]) == sorted(shipped["steps"])
    assert all(_same_state(rebuilt["steps"][s], shipped["steps"][s]) for s in shipped["steps"])
