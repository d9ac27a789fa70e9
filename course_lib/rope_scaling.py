"""RoPE scaling: running a RoPE model on longer sequences than it was trained on (lessons 16a
and 16b).

    python -m course_lib.rope_scaling    # measure the grid again, write data/rope_scaling.json

A RoPE model trained on sequences of L tokens has only met the angles p * theta_i for p < L.
The three methods here change the frequencies theta_i (and YaRN the attention's temperature)
so that a longer sequence turns each pair through angles nearer those it was trained on:

- position interpolation (Chen et al. 2023): every frequency divided by the factor s, so
  position p turns as p / s did;
- NTK-aware scaling (bloc97 2023): the base multiplied by s ** (d / (d - 2)), which leaves
  the fastest pair as it was and divides the slowest by exactly s;
- YaRN (Peng et al. 2023): pair i interpolated or left alone by how many turns r_i = L /
  wavelength_i it makes within the trained length (a linear ramp from r = alpha to r = beta),
  and every score multiplied by (0.1 ln s + 1) ** 2, put into the cos and sin tables so
  that q and k each carry one factor 0.1 ln s + 1, as the paper's code does.

`with_frequencies(model, freqs, scale)` returns a copy of a TinyTransformer whose RoPE tables
are cos(p theta'_i) * scale and sin(p theta'_i) * scale; the weights are untouched.
The grid of measured excess losses (three shipped seeds, each method, several factors, by
position) is written by `main` and read by `load_grid`: the lesson measures one seed live and
reads the others, since one pass over the long split takes about half a second.
"""

import argparse
import copy
import json
import math

import torch

from course_lib import corpus
from course_lib._validation import one_of, positive_int
from course_lib.paths import DATA_DIR
from course_lib.positional import RotaryEmbedding
from course_lib.train import token_losses

METHODS = ("none", "pi", "ntk", "yarn")
NAMES = {
    "none": "as trained",
    "pi": "position interpolation",
    "ntk": "NTK-aware",
    "yarn": "YaRN",
}
BASE = 10000.0  # the course's RoPE base (lesson 06)
TRAINED_LEN = corpus.SEQ_LEN  # L: the length the shipped models were trained on
YARN_ALPHA, YARN_BETA = 1.0, 32.0  # the YaRN paper's boundaries for Llama, in turns per L
FACTORS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)  # the grid's scaling factors s
SEEDS = (0, 1, 2)
# tried after the paper's YaRN boundaries measured like interpolation on these models (so a
# lead, not a prediction): boundaries at the scale of a 32-token trained length, and YaRN's
# temperature alone (RoPE's own frequencies, cos and sin times 0.1 ln s + 1)
TRIED = {
    "yarn, alpha 0.5, beta 4": {"alpha": 0.5, "beta": 4.0},
    "yarn, alpha 0.25, beta 1": {"alpha": 0.25, "beta": 1.0},
    "temperature alone": None,
}
TRIED_FACTORS = (2.0, 4.0)
GRID = DATA_DIR / "rope_scaling.json"


def _factor(factor) -> float:
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        raise TypeError(f"factor: expected a number >= 1, got {type(factor).__name__}")
    if not factor >= 1:
        raise ValueError(f"factor: expected a number >= 1, got {factor}")
    return float(factor)


def _even(d) -> int:
    positive_int("d", d)
    if d % 2 or d < 4:
        raise ValueError(f"d: expected an even head width of at least 4, got {d}")
    return d


def frequencies(d: int, base: float = BASE) -> torch.Tensor:
    """(d/2,) float64: RoPE's theta_i = base ** (-2i / d), the fastest pair first (lesson 16a;
    RoPE itself is lesson 06's)."""
    _even(d)
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)


def wavelengths(freqs: torch.Tensor) -> torch.Tensor:
    """(d/2,): the positions pair i takes to turn once, 2 pi / theta_i (lesson 16a)."""
    return 2 * math.pi / freqs


def angles_of(freqs: torch.Tensor, max_len: int) -> torch.Tensor:
    """(max_len, d/2) float64: angle p * freqs[i] of pair i at positions p = 0 .. max_len - 1
    (lesson 16a)."""
    positive_int("max_len", max_len)
    return torch.arange(max_len, dtype=torch.float64)[:, None] * freqs.double()[None, :]


def past_trained(angles: torch.Tensor, distance: int, trained_len: int = TRAINED_LEN) -> dict:
    """{pair i: angles[distance, i] / the largest angle pair i reached in training}, for the
    pairs that turn past it at `distance`: training reached (trained_len - 2) theta_i, and a pair
    that went a full turn or more has met every angle, so it never appears (lesson 16b)."""
    reach = (trained_len - 2) * frequencies(2 * angles.shape[1])  # (d/2,)
    at = angles[distance].double()  # (d/2,)
    return {
        i: float(at[i] / reach[i])
        for i in range(len(reach))
        if reach[i] < 2 * math.pi and at[i] > reach[i]
    }


def yarn_ramp(
    d: int, trained_len: int = TRAINED_LEN, alpha: float = YARN_ALPHA, beta: float = YARN_BETA,
    base: float = BASE,
) -> torch.Tensor:  # fmt: skip
    """(d/2,) float64 gamma_i in [0, 1]: 0 interpolates pair i, 1 leaves it as trained. r_i
    = trained_len / wavelength_i turns in the trained length; gamma rises linearly from 0 at
    r = alpha to 1 at r = beta (lesson 16b)."""
    positive_int("trained_len", trained_len)
    if not beta > alpha:
        raise ValueError(f"beta: expected a number above alpha = {alpha}, got {beta}")
    turns = trained_len / wavelengths(frequencies(d, base))  # (d/2,)
    return ((turns - alpha) / (beta - alpha)).clamp(0.0, 1.0)


def scaled_frequencies(method: str, factor: float, d: int, *, trained_len: int = TRAINED_LEN,
                       alpha: float = YARN_ALPHA, beta: float = YARN_BETA,
                       base: float = BASE) -> torch.Tensor:  # fmt: skip
    """(d/2,) float64: the frequencies theta'_i of `method` at scaling factor s (lesson 16a)."""
    one_of("method", method, METHODS)
    s = _factor(factor)
    theta = frequencies(d, base)
    if method == "pi":
        return theta / s
    if method == "ntk":
        return frequencies(d, base * s ** (d / (d - 2)))
    if method == "yarn":
        gamma = yarn_ramp(d, trained_len, alpha, beta, base)
        return (1 - gamma) * theta / s + gamma * theta
    return theta


def attention_scale(method: str, factor: float) -> float:
    """What cos and sin are multiplied by: YaRN's 0.1 ln s + 1 (so the scores get its
    square), 1 for the other methods (lesson 16b)."""
    one_of("method", method, METHODS)
    s = _factor(factor)
    return 0.1 * math.log(s) + 1.0 if method == "yarn" else 1.0


def _ropes(model) -> list[RotaryEmbedding]:
    found = {id(m): m for m in model.modules() if isinstance(m, RotaryEmbedding)}
    if not found:
        raise ValueError("model: expected a model with RoPE (a RotaryEmbedding), found none")
    return list(found.values())


def with_angles(model, angles: torch.Tensor, scale: float = 1.0):
    """A copy of `model` whose RoPE turns pair i of position p by angles[p, i], its cos and sin
    multiplied by `scale`; angles (max_len, d/2), one row per position the model accepts. The
    model itself and its weights are unchanged (lesson 16a)."""
    ropes = _ropes(model)
    shape = (ropes[0].max_len, ropes[0].d_head // 2)
    if not isinstance(angles, torch.Tensor) or tuple(angles.shape) != shape:
        got = tuple(angles.shape) if isinstance(angles, torch.Tensor) else type(angles).__name__
        raise ValueError(f"angles: expected a {shape} tensor (max_len, d/2), got {got}")
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0:
        raise ValueError(f"scale: expected a number > 0, got {scale!r}")
    new = copy.deepcopy(model)
    for rope in _ropes(new):  # one RotaryEmbedding shared by every block: its tables once
        rope.cos.copy_(angles.double().cos() * scale)
        rope.sin.copy_(angles.double().sin() * scale)
    return new


def with_frequencies(model, freqs: torch.Tensor, scale: float = 1.0):
    """A copy of `model` whose RoPE turns pair i of position p by p * freqs[i], its cos and
    sin multiplied by `scale` (lesson 16a)."""
    rope = _ropes(model)[0]
    half = rope.d_head // 2
    if not isinstance(freqs, torch.Tensor) or tuple(freqs.shape) != (half,):
        got = tuple(freqs.shape) if isinstance(freqs, torch.Tensor) else type(freqs).__name__
        raise ValueError(f"freqs: expected a ({half},) tensor, one per pair, got {got}")
    return with_angles(model, angles_of(freqs, rope.max_len), scale)


def scaled_model(model, method: str, factor: float, **yarn):
    """`model` with RoPE scaled by `method` at `factor`, the course's own version (lesson 16b)."""
    d = _ropes(model)[0].d_head
    freqs = scaled_frequencies(method, factor, d, **yarn)
    return with_frequencies(model, freqs, attention_scale(method, factor))


def excess_by_position(model, split: str = "long") -> torch.Tensor:
    """(T - 1,) float64: the model's mean loss minus the floor at each prediction position of
    `split`, over its lines (lesson 16a)."""
    ids, _, _ = corpus.floored_split(split)
    with torch.no_grad():
        losses = token_losses(model, ids)  # (N, T - 1)
    return corpus.excess_by_position(losses, split)  # (T - 1,)


def summary(excess: torch.Tensor, trained_len: int = TRAINED_LEN) -> dict[str, float]:
    """Mean excess at positions 0 .. L - 2 (the predictions a training line holds), L .. 2L - 1,
    2L .. the end, and L .. the end, as corpus.excess_loss counts "beyond" (lesson 16a)."""
    L = trained_len
    return {
        "inside": float(excess[: L - 1].mean()),
        "to 2L": float(excess[L : 2 * L].mean()),
        "beyond 2L": float(excess[2 * L :].mean()),
        "beyond L": float(excess[L:].mean()),
    }


def measure_grid(load, seeds=SEEDS, factors=FACTORS) -> dict:
    """{"factors", "runs": {seed: {method: {factor: excess by position}}}}: every method at
    every factor on each seed's model load(seed); "none" at factor 1 only (lesson 16b)."""
    runs = {}
    for seed in seeds:
        model = load(seed)
        found = {"none": {"1": _rounded(excess_by_position(model))}}
        for method in METHODS[1:]:
            found[method] = {
                f"{s:g}": _rounded(excess_by_position(scaled_model(model, method, s)))
                for s in factors
                if s > 1
            }
        for name, boundaries in TRIED.items():
            found[name] = {}
            for s in TRIED_FACTORS:
                if boundaries is None:
                    tried = with_frequencies(model, frequencies(_ropes(model)[0].d_head),
                                             attention_scale("yarn", s))  # fmt: skip
                else:
                    tried = scaled_model(model, "yarn", s, **boundaries)
                found[name][f"{s:g}"] = _rounded(excess_by_position(tried))
        runs[str(seed)] = found
    return {
        "trained_len": TRAINED_LEN,
        "yarn": {"alpha": YARN_ALPHA, "beta": YARN_BETA},
        "factors": [s for s in factors if s > 1],
        "tried": {
            name: {"boundaries": b, "factors": list(TRIED_FACTORS)} for name, b in TRIED.items()
        },  # fmt: skip
        "runs": runs,
    }


def _rounded(excess: torch.Tensor) -> list[float]:
    return [round(float(x), 4) for x in excess]


def load_grid(path=GRID) -> dict:
    """The stored grid that `python -m course_lib.rope_scaling` writes (lesson 16a)."""
    return json.loads(path.read_text(encoding="utf-8"))


def grid_excess(grid: dict, seed: int, method: str, factor: float) -> torch.Tensor:
    """(T - 1,) float64: the stored excess by position of one seed, method (or tried setting)
    and factor (lesson 16a)."""
    one_of("method", method, METHODS + tuple(TRIED))
    runs = grid["runs"][str(seed)][method]
    key = "1" if method == "none" else f"{_factor(factor):g}"
    if key not in runs:
        raise ValueError(f"factor: expected one of {', '.join(runs)} for {method!r}, got {factor}")
    return torch.tensor(runs[key], dtype=torch.float64)


def main(argv=None) -> None:
    """Measure the grid on the three base models and write it (lesson 16b)."""
    from course_lib import variants

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(GRID))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    grid = measure_grid(lambda seed: variants.load_trained("base", seed))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(grid, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
