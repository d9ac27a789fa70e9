"""Lesson 05_encoder_decoder's task: an encoder-decoder learns to reverse a short sentence.

A sentence is LENGTH words drawn at random (with repeats) from WORDS. The decoder reads the
start mark and then the reversed sentence, one position behind what it must write: from
`<s> w7 w6 ... w0` it learns to write `w7 w6 ... w0 </s>`. Random words leave the model no
grammar to lean on: the only way to the right word is to find its place in the source, which
for output position i is source position LENGTH - 1 - i, the anti-diagonal of the
cross-attention map.

`train_reversal` trains a model through the learner's pieces (course_lib.seq2seq.Pieces) with
Adam, and records, at the steps it is asked to, the held-out accuracy of greedy decoding and
the cross-attention maps of a few held-out sentences (what the lesson's explorer shows).
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from course_lib._validation import positive_int
from course_lib.attention import causal_mask
from course_lib.runtime import one_thread
from course_lib.seq2seq import EncoderDecoder, Pieces, Seq2SeqConfig, course_pieces, run_pieces

WORDS = ("dog", "cat", "bird", "fish", "near", "with", "eats", "sees", "hears", "sings", "la", "mi")
START, END = "<s>", "</s>"
VOCAB = (*WORDS, START, END)
START_ID, END_ID = VOCAB.index(START), VOCAB.index(END)
LENGTH = 8  # words in every source sentence
HELD_OUT = 500  # held-out sentences, drawn from their own seed
RECORD_STEPS = (0, 10, 20, 30, 40, 60, 80, 100, 150)  # where train_reversal records
PROBES = 4  # held-out sentences whose cross-attention maps are recorded


def config() -> Seq2SeqConfig:
    """The lesson's model: D = 32, 2 heads, 1 encoder layer, 2 decoder layers."""
    return Seq2SeqConfig(vocab_size=len(VOCAB), source_length=LENGTH, output_length=LENGTH + 1)


def reversal_batch(n: int, generator: torch.Generator, exclude=frozenset()):
    """(source (n, LENGTH), decoder_in (n, LENGTH + 1), target (n, LENGTH + 1)) of n random
    sentences: decoder_in is the start mark and the reversed sentence, target the reversed
    sentence and the end mark. A sentence in `exclude` (a set of tuples of ids) is drawn
    again: the training batches never hold a held-out sentence."""
    positive_int("n", n)
    source = torch.randint(len(WORDS), (n, LENGTH), generator=generator)  # (n, T)
    for row in range(n):
        while tuple(source[row].tolist()) in exclude:
            source[row] = torch.randint(len(WORDS), (LENGTH,), generator=generator)
    reversed_ = source.flip(1)  # (n, T)
    decoder_in = torch.cat([torch.full((n, 1), START_ID), reversed_], dim=1)  # (n, T + 1)
    target = torch.cat([reversed_, torch.full((n, 1), END_ID)], dim=1)  # (n, T + 1)
    return source, decoder_in, target


def held_out(seed: int = 0):
    """The held-out sentences (HELD_OUT of them) as reversal_batch gives them; their seed is
    1000 + seed, the training batches' seed itself."""
    return reversal_batch(HELD_OUT, torch.Generator().manual_seed(1000 + seed))


def words(ids) -> list[str]:
    """Token ids (T,) as their words."""
    return [VOCAB[i] for i in torch.as_tensor(ids).tolist()]


def greedy_reverse(
    model: EncoderDecoder, source, pieces: Pieces | None = None, *, memory_mask=None
):
    """What the model writes for each source (n, LENGTH), one token at a time, each chosen as
    the most likely and fed back in: (n, LENGTH + 1) ids, the end mark included."""
    pieces = course_pieces() if pieces is None else pieces
    written = torch.full((source.shape[0], 1), START_ID)  # (n, 1)
    with torch.no_grad():
        for _ in range(LENGTH + 1):
            mask = memory_mask
            if mask is not None and mask.dim() >= 2 and mask.shape[-2] > 1:
                mask = mask[..., : written.shape[1], :]  # the rows of the queries so far
            logits = run_pieces(model, source, written, pieces, memory_mask=mask)
            written = torch.cat([written, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return written[:, 1:]  # (n, T + 1)


def accuracy_by_position(written, target) -> torch.Tensor:
    """(LENGTH + 1,) share of sentences right at each output position."""
    return (written == target).double().mean(dim=0)


def anti_diagonal_weight(weights) -> torch.Tensor:
    """Mean cross-attention weight on the anti-diagonal, output position i on source position
    LENGTH - 1 - i (i < LENGTH; the end mark's row has no word to find), over every other axis
    but the heads: weights (..., H, LENGTH + 1, LENGTH) -> (H,)."""
    T = weights.shape[-1]
    rows = torch.arange(T)
    on = weights[..., rows, T - 1 - rows]  # (..., H, T)
    return on.transpose(-2, -1).reshape(-1, weights.shape[-3]).double().mean(dim=0)


def causal_cross_mask() -> torch.Tensor:
    """(LENGTH + 1, LENGTH) bool: output position i may see source positions 0..i, as if the
    cross-attention were given a causal mask (the lesson's experiment)."""
    return causal_mask(LENGTH + 1)[:, :LENGTH]


@dataclass
class ReversalRun:
    """What one training run recorded, at each step of `steps`."""

    steps: list = field(default_factory=list)
    loss: list = field(default_factory=list)  # held-out loss (each next word given the true ones)
    accuracy: list = field(default_factory=list)  # share of held-out words right (end mark aside)
    anti_diagonal: list = field(default_factory=list)  # (layers, H) per recorded step
    maps: list = field(default_factory=list)  # (PROBES, layers, H, T + 1, T) per step
    written: list = field(default_factory=list)  # (PROBES, T + 1) ids the model wrote
    probes: torch.Tensor | None = None  # (PROBES, T) the probe sentences
    chance: float = 1 / LENGTH  # the weight on one source word of a uniform row


def _measure(model, pieces, run: ReversalRun, step: int, checks) -> None:
    source, decoder_in, target = checks
    with torch.no_grad():
        written = greedy_reverse(model, source, pieces)
        maps = []
        logits = run_pieces(model, source, decoder_in, pieces, record=maps)  # (n, T + 1, V)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
    weights = torch.stack(maps, dim=1)  # (n, layers, H, T + 1, T)
    run.steps.append(step)
    run.loss.append(float(loss))
    run.accuracy.append(float((written[:, :LENGTH] == target[:, :LENGTH]).double().mean()))
    run.anti_diagonal.append(
        torch.stack([anti_diagonal_weight(weights[:, i]) for i in range(weights.shape[1])])
    )
    run.maps.append(weights[:PROBES].clone())
    run.written.append(written[:PROBES].clone())


def train_reversal(
    model: EncoderDecoder,
    pieces: Pieces | None = None,
    *,
    steps: int = 150,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    record_steps=RECORD_STEPS,
) -> ReversalRun:
    """Train model to reverse sentences for `steps` Adam steps on fresh random batches, its
    forward computed through `pieces`; record at each of record_steps (lesson
    05_encoder_decoder). The loss is cross-entropy over the vocabulary at every output
    position, averaged. Runs on one thread: the sizes are tiny."""
    positive_int("steps", steps)
    positive_int("batch_size", batch_size)
    if not (isinstance(lr, float) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: expected a positive float, got {lr!r}")
    if any(s < 0 or s > steps for s in record_steps):
        raise ValueError(f"record_steps: expected steps in 0..{steps}, got {tuple(record_steps)}")
    pieces = course_pieces() if pieces is None else pieces
    generator = torch.Generator().manual_seed(seed)
    checks = held_out(seed)
    exclude = set(map(tuple, checks[0].tolist()))
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    run = ReversalRun(probes=checks[0][:PROBES].clone())
    with one_thread():
        for step in range(steps + 1):
            if step in record_steps:
                _measure(model, pieces, run, step, checks)
            if step == steps:
                break
            source, decoder_in, target = reversal_batch(batch_size, generator, exclude)
            logits = run_pieces(model, source, decoder_in, pieces)  # (B, T + 1, V)
            loss_t = F.cross_entropy(logits.flatten(0, 1), target.flatten())
            optimiser.zero_grad()
            loss_t.backward()
            optimiser.step()
    return run


def new_model(seed: int = 0) -> EncoderDecoder:
    """The lesson's untrained model, its weights drawn from `seed` (the global seed untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return EncoderDecoder(config())


def trained_run(seed: int = 0, pieces: Pieces | None = None) -> tuple[EncoderDecoder, ReversalRun]:
    """(model, run): the lesson's model built from `seed` and trained as the lesson trains it."""
    model = new_model(seed)
    return model, train_reversal(model, pieces, seed=seed)


def held_out_seen_in_training(seed: int = 0, steps: int = 150, batch_size: int = 64) -> int:
    """How many held-out sentences also appear among the training batches of train_reversal
    with these settings (drawn again from the same seed)."""
    generator = torch.Generator().manual_seed(seed)
    held = set(map(tuple, held_out(seed)[0].tolist()))
    seen = set()
    for _ in range(steps):
        seen.update(map(tuple, reversal_batch(batch_size, generator, held)[0].tolist()))
    return len(held & seen)


def your_pieces(
    model: EncoderDecoder,
    *,
    multihead,
    cross_attention,
    decoder_layer,
    atol: float = 1e-4,
    quiet: bool = False,
) -> Pieces:
    """The pieces to train with: each of yours that runs and gives the course's logits (within
    atol, on a few held-out sentences through the untrained model), the course's for the rest.
    Prints one line per piece saying whose it is and why (lesson 05_encoder_decoder)."""
    from course_lib.exercises.stub import attempt

    course = course_pieces()
    source, decoder_in, _ = held_out()
    source, decoder_in = source[:8], decoder_in[:8]
    with torch.no_grad():
        expected = run_pieces(model, source, decoder_in, course)  # (8, T + 1, V)
    chosen, lines = {}, []
    for name, yours in (
        ("multihead", multihead),
        ("cross_attention", cross_attention),
        ("decoder_layer", decoder_layer),
    ):
        trial = Pieces(**{**course.__dict__, name: yours})
        with torch.no_grad():
            tried = attempt(name, run_pieces, model, source, decoder_in, trial)
        if not tried.ran:
            chosen[name], why = getattr(course, name), f"the course's ({tried.reason})"
        else:
            gap = float((tried.value - expected).abs().max())
            if not gap <= atol:  # NaN too
                chosen[name] = getattr(course, name)
                why = (
                    f"the course's (yours gives logits {gap:.3g} away from the course's: "
                    "its check above says why)"
                )
            else:
                chosen[name], why = yours, "yours"
        lines.append(f"{name:15s}  {why}")
    if not quiet:
        print("\n".join(lines))
    return Pieces(**chosen)
