"""Every trained comparison the course makes, over three seeds, as one table (lesson 01b on).

    python -m course_lib.variants            # train every variant, write data/variants.json
    python -m course_lib.variants --jobs 2   # two at a time, one torch thread each
    python -m course_lib.variants --missing  # train only variants not yet in the file
    python -m course_lib.variants --save     # train and ship the models of CHECKPOINTS
    python -m course_lib.variant_screens 4000 base,no-positions screen.json [--lr 0.01]
                                             # a screen: those variants at 4,000 steps (or
                                             # another learning rate), the rows they complete
                                             # beside the stored table's
    python -m course_lib.train               # the same models, then lesson 11b's stand-in

Each variant is one model with one thing changed (D = 64, 4 heads, d_ff = 256, two layers,
RoPE), trained for 2,000 AdamW steps of 32 lines from each seed on the toy language of
course_lib.language. A run is measured as excess loss: its loss minus the exact floor, over
every prediction and over each skill's own, on the validation split (inside the trained
length) and on the long split's predictions made at positions 32-126 (beyond it), the
splits of data/language/ (course_lib.corpus). A row compares variants on one skill and
overall; it holds when every gap it claims is at least three times the larger of the two
variants' seed ranges. The lessons are to read the file rather than train these themselves.
`--markdown` prints the table.
"""

import argparse
import json
import time
from dataclasses import asdict, dataclass, fields, replace
from multiprocessing import get_context
from pathlib import Path

import torch

import course_lib
from course_lib import corpus, heads, language
from course_lib.model import CHECKPOINT_DIR, ModelConfig, TinyTransformer
from course_lib.paths import DATA_DIR
from course_lib.train import TrainConfig, token_losses, train

RESULTS = DATA_DIR / "variants.json"
SEEDS = (0, 1, 2)
SEQ_LEN, LONG_LEN = corpus.SEQ_LEN, corpus.LONG_LEN
BASE = ModelConfig(vocab_size=len(language.VOCAB), max_len=LONG_LEN)
RECIPE = TrainConfig(steps=2000, eval_every=50)  # validated often, to time the copy forming
BARE = {"residual": False, "norm": "none"}  # a block without residuals and normalisation
ONE_LAYER = replace(BASE, num_layers=1)
# lesson 14: SwiGLU's hidden width that brings its parameters nearest the base's d_ff = 256
# GELU layer (3 D h weights against 2 D 256 + 256 + D): 174 without the attention's biases
# and with RMSNorm (a block 64 parameters short), 172 alone (64 short)
LLAMA = {"norm": "rms", "ff": "swiglu", "d_ff": 174, "bias": False}

VARIANTS: dict[str, ModelConfig] = {
    "base": BASE,
    **{f"heads-{h}": replace(BASE, num_heads=h) for h in (1, 2, 8)},
    **{f"1-layer-heads-{h}": replace(BASE, num_layers=1, num_heads=h) for h in (1, 2, 4, 8)},
    # at one layer a query has one look per head and one feed-forward layer after it
    "1-layer-no-feed-forward": replace(ONE_LAYER, d_ff=0),
    "1-layer-no-positions": replace(ONE_LAYER, positional="none"),
    "1-layer-sinusoidal": replace(ONE_LAYER, positional="sinusoidal"),
    # one head of width 128: unscaled, its scores start 128 ** 0.5 ~ 11 times too spread
    "1-layer-width-128": replace(ONE_LAYER, d_model=128, num_heads=1, d_ff=512),
    "1-layer-width-128-no-scale": replace(
        ONE_LAYER, d_model=128, num_heads=1, d_ff=512, scale=False
    ),
    "no-feed-forward": replace(BASE, d_ff=0),
    "sinusoidal": replace(BASE, positional="sinusoidal"),
    "no-positions": replace(BASE, positional="none"),
    # GPT-2's learned table: lines of 32 tokens read positions 0-30 (the token at 31 is only
    # predicted), so rows 31-127 keep their random start, shrunk only by weight decay
    "learned-positions": replace(BASE, positional="learned"),
    "heads-1-no-scale": replace(BASE, num_heads=1, scale=False),
    **{f"layers-{n}": replace(BASE, num_layers=n) for n in (1, 4)},
    **{f"layers-{n}-bare": replace(BASE, num_layers=n, **BARE) for n in (1, 2, 4)},
    # the head reuses the token embedding's (V, D) matrix: V * D fewer parameters
    "tied": replace(BASE, tied=True),
    # lesson 14: the block of Llama-style models, and each of its two changes alone
    "llama-block": replace(BASE, **LLAMA),
    "rms-norm": replace(BASE, norm="rms"),
    "swiglu": replace(BASE, ff="swiglu", d_ff=172),
    # lesson 13c: the four query heads share 2 key/value heads, or 1 (multi-query attention)
    **{f"kv-heads-{n}": replace(BASE, num_kv_heads=n) for n in (1, 2)},
}
VARIANTS["layers-2"] = BASE  # names for one config share its runs: each trains once


@dataclass(frozen=True)
class Row:
    """One comparison: each (better, worse) pair is a claim, on `skill` and overall
    (lesson 01b)."""

    name: str
    lesson: str
    skill: str
    pairs: tuple[tuple[str, str], ...]
    split: str = "valid"  # "valid" or "long" (positions 32-126 of data/language/long.txt)


ROWS = (
    Row("several heads at one layer", "04b", "mark",
        (("1-layer-heads-4", "1-layer-heads-1"), ("1-layer-heads-8", "1-layer-heads-1"))),
    Row("two heads against one, at one layer", "04b", "mark",
        (("1-layer-heads-2", "1-layer-heads-1"),)),
    Row("several heads at two layers", "04b", "mark", (("base", "heads-1"),)),
    Row("the feed-forward layer, at one layer", "09", "object",
        (("1-layer-heads-4", "1-layer-no-feed-forward"),)),
    Row("the feed-forward layer", "09", "object", (("base", "no-feed-forward"),)),
    Row("positions, inside the trained length, at one layer", "06", "song",
        (("1-layer-heads-4", "1-layer-no-positions"),
         ("1-layer-sinusoidal", "1-layer-no-positions"))),
    Row("positions, inside the trained length", "06", "song",
        (("base", "no-positions"), ("sinusoidal", "no-positions"))),
    Row("positions, beyond the trained length", "07b", "song",
        (("base", "sinusoidal"), ("no-positions", "sinusoidal")), split="long"),
    Row("RoPE against no positions, beyond the trained length", "07b", "song",
        (("base", "no-positions"),), split="long"),
    # issue 26: learned absolute positions (GPT-2) beside RoPE, sinusoidal and none
    Row("learned positions against none, inside the trained length", "07b", "song",
        (("learned-positions", "no-positions"),)),
    Row("RoPE and no positions against learned positions, beyond the trained length", "07b",
        "song", (("base", "learned-positions"), ("no-positions", "learned-positions")),
        split="long"),
    Row("the 1/sqrt(d) scale at head width 64", "03b", "mark", (("heads-1", "heads-1-no-scale"),)),
    Row("the 1/sqrt(d) scale at head width 128, one layer", "03b", "object",
        (("1-layer-width-128", "1-layer-width-128-no-scale"),)),
    Row("residuals and normalisation at depth 4", "08", "all", (("layers-4", "layers-4-bare"),)),
    Row("residuals and normalisation at depth 2", "08", "all", (("layers-2", "layers-2-bare"),)),
    Row("a skill that needs two layers", "11b", "induction", (("layers-2", "layers-1"),)),
    # the head tied to the embedding, V * D fewer weights: Press and Wolf (2017) found it better
    Row("the output layer tied to the embedding", "01b", "all",
        (("tied", "base"),)),
    # lesson 14: the gate multiplies two projections of a token, so the object's verb form
    # (a non-linear function of two nouns) is where SwiGLU could differ
    Row("the Llama-style block at equal parameters", "14", "object", (("llama-block", "base"),)),
    Row("SwiGLU against GELU at equal parameters", "14", "object", (("swiglu", "base"),)),
    Row("RMSNorm against layer norm", "14", "all", (("rms-norm", "base"),)),
    # added after the runs above showed SwiGLU's gap on the mark: a lead, not a prediction
    Row("SwiGLU on the mark (seen after the runs)", "14", "mark",
        (("swiglu", "base"), ("llama-block", "base"))),
    # lesson 13c: a key/value head per query head against fewer (a cache 2 or 4 times smaller)
    Row("four key/value heads against two", "13c", "all", (("base", "kv-heads-2"),)),
    Row("four key/value heads against one", "13c", "all", (("base", "kv-heads-1"),)),
    # added after the runs above: kv-heads-2's copy positions lagged on every seed
    Row("fewer key/value heads on the copy (seen after the runs)", "13c", "induction",
        (("base", "kv-heads-2"), ("base", "kv-heads-1"))),
)  # fmt: skip

# variants whose trained models are shipped (data/checkpoints/lang-VARIANT-sSEED.pt and .json),
# so a lesson can study a trained model without training one: the runs of the table, exactly.
# Lesson 07b reads the position variants' losses position by position past the trained length.
CHECKPOINTS = {
    "base": SEEDS,
    # lesson 04b: what each head of a one-layer model reads when it predicts the mark
    **{f"1-layer-heads-{h}": (0,) for h in (1, 2, 4, 8)},
    **{variant: SEEDS for variant in ("sinusoidal", "no-positions", "learned-positions")},
}


def load_split(name: str) -> torch.Tensor:
    """The toy language's split `name` as ids (N, T): data/language/ (course_lib.corpus)
    (lesson 01b)."""
    return corpus.load_split(name)


def floored_split(name: str):
    """(ids, floor, skills) of split `name`: see language.floor_losses (lesson 01b)."""
    return corpus.floored_split(name)


def excess_loss(model, split: str) -> dict[str, float]:
    """Loss minus floor on a split, overall and per skill; on "long" only the predictions made
    beyond the trained length count (lesson 01b)."""
    return corpus.excess_loss(token_losses(model, corpus.load_split(split)), split)


def split_floor(split: str) -> dict[str, float]:
    """A split's floor, overall and per skill, in nats per prediction (lesson 01b)."""
    return corpus.split_floor(split)


def train_run(variant: str, seed: int, *, curve: bool = False, **changes) -> dict:
    """Train one variant from `seed` with the capstone's recipe, `changes` to it where given
    (a screen's steps=4000 or lr=0.01); return its measurements (lesson 01b)."""
    return _trained(variant, seed, curve=curve, **changes)[1]


def _trained(variant: str, seed: int, *, curve: bool, **changes) -> tuple[TinyTransformer, dict]:
    torch.set_num_threads(1)
    recipe = replace(RECIPE, seed=seed, **changes)  # a screen's steps or lr
    config = VARIANTS[variant]
    train_ids = load_split("train")
    valid_ids, valid_floor, valid_skills = floored_split("valid")
    found = [(b, q, k) for b, row in enumerate(valid_ids.tolist())
             for q, k in language.copy_pairs([language.VOCAB[i] for i in row])]  # fmt: skip
    pairs = torch.tensor(found).T  # (3, P): sequence, query, key
    course_lib.set_seed(seed)
    model = TinyTransformer.from_config(config)
    points = []
    measuring = [0.0]  # CPU seconds spent recording the curve, not counted as training

    def record(step, m):
        began = time.process_time()
        losses = token_losses(m, valid_ids)
        excess = language.excess_by_skill(losses, valid_floor, valid_skills)
        weights = heads.attention_weights(m, valid_ids)
        b, q, k = pairs
        copy = float(weights[-1][b, :, q, k].mean(0).max())
        repeat = float(heads.repeat_induction_score(m).max())
        points.append([step, round(excess["induction"], 4), round(copy, 4), round(repeat, 4)])
        measuring[0] += time.process_time() - began

    start = time.process_time()
    train(model, train_ids, valid_ids, recipe, progress=False,
          callback=record if curve else None)  # fmt: skip
    cpu_s = round(time.process_time() - start - measuring[0], 1)
    result = {"variant": variant, "seed": seed, "cpu_s": cpu_s}
    result.update({split: _round(excess_loss(model, split)) for split in ("valid", "long")})
    if curve:
        # [step, excess on copy positions, best last-layer head's mass from a repeated preposition
        # to the noun after its first use, best head's score on repeated random tokens]
        result["curve"] = points
    return model, result


def checkpoint_name(variant: str, seed: int) -> str:
    """The file stem of a shipped trained variant: "lang-base-s0" (lesson 04b)."""
    if variant not in CHECKPOINTS:
        raise ValueError(f"variant: expected one of {', '.join(CHECKPOINTS)}, got {variant!r}")
    if seed not in CHECKPOINTS[variant]:
        seeds = ", ".join(map(str, CHECKPOINTS[variant]))
        raise ValueError(f"seed: expected one of {seeds} (shipped for {variant!r}), got {seed!r}")
    return f"lang-{variant}-s{seed}"


def save_trained(variant: str, seed: int, directory=CHECKPOINT_DIR) -> dict:
    """Train `variant` from `seed` as the table does (its curve too, which the base run records)
    and save its weights and card; return the card (lesson 04b)."""
    name = checkpoint_name(variant, seed)
    model, run = _trained(variant, seed, curve=variant == "base")
    card = {
        "name": name,
        "variant": variant,
        "seed": seed,
        "config": asdict(VARIANTS[variant]),
        "recipe": asdict(replace(RECIPE, seed=seed)),
        "train_len": SEQ_LEN,
        "parameters": _parameters(VARIANTS[variant]),
        "floor": card_floor(),
        "excess": {split: run[split] for split in ("valid", "long")},
        "note": "floor: the least loss any model can reach, per prediction (lesson 01b); excess: "
        "loss minus floor; on long, positions 32-126 only",
        "torch": torch.__version__,
    }
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), directory / f"{name}.pt")
    (directory / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    return card


def card_floor() -> dict[str, dict[str, float]]:
    """The floor of each split a card reports on, overall and per skill (as a card rounds it)
    (lesson 04b)."""
    return {split: _round(split_floor(split)) for split in ("valid", "long")}


def trained_card(variant: str = "base", seed: int = 0) -> dict:
    """The card of a shipped trained variant: config, recipe and its excess losses (lesson 04b)."""
    path = CHECKPOINT_DIR / f"{checkpoint_name(variant, seed)}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def load_trained(variant: str = "base", seed: int = 0) -> TinyTransformer:
    """A shipped trained variant (the run of the table with this seed), in eval mode: a lesson
    studies these instead of training its own (lesson 04b)."""
    card = trained_card(variant, seed)
    model = TinyTransformer.from_config(ModelConfig(**card["config"]))
    path = CHECKPOINT_DIR / f"{card['name']}.pt"
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval()


def _save_job(args):
    return save_trained(*args)


def _gap(runs_by_variant, better, worse, split, skill) -> dict:
    a = [r[split][skill] for r in runs_by_variant[better]]
    b = [r[split][skill] for r in runs_by_variant[worse]]
    gap = sum(b) / len(b) - sum(a) / len(a)
    bar = 3 * max(max(a) - min(a), max(b) - min(b))
    return {"better": better, "worse": worse, "skill": skill, "gap": round(gap, 5),
            "bar": round(bar, 5), "holds": gap >= bar}  # fmt: skip


def verdicts(runs: list[dict], rows=ROWS) -> list[dict]:
    """Each of `rows`' claims checked against the runs: gap of means against 3x the seed range
    (lesson 01b)."""
    by_variant: dict[str, list[dict]] = {}
    for run in runs:
        by_variant.setdefault(run["variant"], []).append(run)
    table = []
    for row in rows:
        claims = [
            _gap(by_variant, better, worse, row.split, skill)
            for better, worse in row.pairs
            for skill in dict.fromkeys((row.skill, "all"))
        ]
        table.append({**asdict(row), "claims": claims, "holds": all(c["holds"] for c in claims)})
    return table


def jump_step(curve: list[list[float]]) -> int:
    """The step that ends the largest fall, by factor, of the copy positions' excess between
    two validations: where the induction circuit forms (the first steps' general fall is
    large in nats but small as a factor) (lesson 11b)."""
    falls = [(b[1] / a[1], b[0]) for a, b in zip(curve, curve[1:], strict=False) if a[1] > 0]
    return min(falls)[1]


def _job(args):
    variant, seed, changes = args  # changes: the recipe's steps or lr, for a screen
    return train_run(variant, seed, curve=variant == "base" and not changes, **changes)


def _first_names() -> dict[ModelConfig, str]:
    """Each config's first name in VARIANTS: the name its runs are trained under."""
    first = {}
    for name, config in VARIANTS.items():
        first.setdefault(config, name)
    return first


def _with_aliases(runs: list[dict]) -> list[dict]:
    """runs, plus a copy of each under every other name of its config ("layers-2" is "base")."""
    first = _first_names()
    trained = {run["variant"] for run in runs}
    return runs + [
        {**run, "variant": name}
        for name, config in VARIANTS.items() if first[config] != name and first[config] in trained
        for run in runs if run["variant"] == first[config]
    ]  # fmt: skip


def main(argv=None) -> None:
    """python -m course_lib.variants, as the module's docstring says (lesson 01b)."""
    parser = argparse.ArgumentParser(description="Train every variant over three seeds.")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (one thread each)")
    parser.add_argument(
        "--markdown", action="store_true", help="print the stored table, train nothing"
    )
    parser.add_argument(
        "--missing",
        action="store_true",
        help="keep the stored runs of every variant whose config and recipe are unchanged "
        "and train only the rest (a run is the same on one thread wherever it is repeated)",
    )
    parser.add_argument(
        "--save",
        action="store_true",
        help="train the variants of CHECKPOINTS and write their weights and cards; nothing else",
    )
    args = parser.parse_args(argv)
    if args.save:
        jobs = [(variant, seed) for variant, seeds in CHECKPOINTS.items() for seed in seeds]
        with get_context("spawn").Pool(args.jobs) as pool:
            for card in pool.imap_unordered(_save_job, jobs):
                print(f"{card['name']}: excess {card['excess']['valid']['all']:.4f}", flush=True)
        return
    if args.markdown:
        print(markdown(json.loads(RESULTS.read_text(encoding="utf-8"))))
        return
    names = list(_first_names().values())
    kept = stored_runs(names) if args.missing else []
    done = {(run["variant"], run["seed"]) for run in kept}
    jobs = [(name, seed, {}) for name in names for seed in SEEDS if (name, seed) not in done]
    with get_context("spawn").Pool(args.jobs) as pool:
        runs = list(kept)
        for run in pool.imap_unordered(_job, jobs):
            runs.append(run)
            print(f"{run['variant']} seed {run['seed']}: {run['cpu_s']} s, "
                  f"excess {run['valid']['all']:.4f}", flush=True)  # fmt: skip
    runs.sort(key=lambda r: (names.index(r["variant"]), r["seed"]))
    runs = _with_aliases(runs)
    table = {
        "recipe": asdict(RECIPE),
        "seeds": list(SEEDS),
        "floor": {split: _round(split_floor(split)) for split in ("valid", "long")},
        "configs": {k: asdict(v) for k, v in VARIANTS.items()},
        "parameters": {k: _parameters(v) for k, v in VARIANTS.items()},
        "runs": runs,
        "rows": verdicts(runs),
        "induction_jump_steps": [jump_step(r["curve"]) for r in runs if "curve" in r][:3],
        "torch": torch.__version__,
    }
    RESULTS.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    for row in table["rows"]:
        print(("holds " if row["holds"] else "FAILS ") + row["name"])


def stored_runs(names: list[str]) -> list[dict]:
    """The runs in data/variants.json that this module would train again unchanged: same
    recipe, seeds and torch, and the variant's config as it is now (lesson 01b)."""
    if not RESULTS.exists():
        return []
    table = json.loads(RESULTS.read_text(encoding="utf-8"))
    if (table["recipe"], table["seeds"], table["torch"]) != (
        asdict(RECIPE),
        list(SEEDS),
        torch.__version__,
    ):
        return []
    same = {n for n in names if _same_config(table["configs"].get(n), VARIANTS[n])}
    return [run for run in table["runs"] if run["variant"] in same]


def _same_config(stored: dict | None, config: ModelConfig) -> bool:
    """A stored config is `config` when every field agrees; a field added to ModelConfig after
    the run (say ff, lesson 14) counts at its default, which leaves the model unchanged."""
    if stored is None or not set(stored) <= {f.name for f in fields(ModelConfig)}:
        return False
    defaults = {f.name: f.default for f in fields(ModelConfig) if f.name != "vocab_size"}
    return {**defaults, **stored} == asdict(config)


def markdown(table: dict) -> str:
    """The stored table's rows as markdown: each claim's gap of means against its bar
    (lesson 01b)."""
    lines = [
        "| row | lesson | better | worse | skill | gap | bar (3x range) | holds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in table["rows"]:
        for c in row["claims"]:
            split = "" if row["split"] == "valid" else " (long)"
            lines.append(
                f"| {row['name']} | {row['lesson']} | {c['better']} | {c['worse']} | "
                f"{c['skill']}{split} | {c['gap']:.4f} | {c['bar']:.4f} | "
                f"{'yes' if c['holds'] else 'no'} |"
            )
    return "\n".join(lines)


def stored_table() -> dict:
    """data/variants.json as a dict: the floor, each variant's parameters, every run's excess
    loss per skill, and each row's claims (lessons 01b and 08)."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def seed_excess(variant: str, split: str = "valid") -> list[dict[str, float]]:
    """Each seed's excess loss of `variant` on `split`, {"all": ..., skill: ...}, in seed order,
    as data/variants.json stores it (lessons 01b and 08)."""
    runs = sorted((r for r in stored_table()["runs"] if r["variant"] == variant),
                  key=lambda r: r["seed"])  # fmt: skip
    if not runs:
        raise ValueError(f"variant: no stored runs of {variant!r}")
    return [r[split] for r in runs]


def excess_table(rows: dict[str, str], skills, split: str = "valid") -> str:
    """A printable table: the floor on each skill, then for each {label: variant} its
    parameters and its excess on each skill, the mean over its seeds (lesson 08)."""
    table = stored_table()
    floor = table["floor"][split]
    width = max(len(label) for label in rows) + 2
    lines = [
        f"{'':{width}s}{'params':>8s}" + "".join(f"{s:>10s}" for s in skills),
        f"{'the floor (nats)':{width + 8}s}" + "".join(f"{floor[s]:10.3f}" for s in skills),
        "excess, mean of 3 seeds:",
    ]
    for label, variant in rows.items():
        runs = seed_excess(variant, split)
        means = "".join(f"{sum(r[s] for r in runs) / len(runs):10.3f}" for s in skills)
        lines.append(f"{label:{width}s}{table['parameters'][variant]:8,d}{means}")
    return "\n".join(lines)


def row_claims(name: str) -> list[dict]:
    """The claims of the stored row `name`, each {"better", "worse", "skill", "gap", "bar",
    "holds"}: a gap of means holds when it is at least 3 times the larger seed range
    (lessons 01b and 08)."""
    for row in stored_table()["rows"]:
        if row["name"] == name:
            return row["claims"]
    raise ValueError(f"name: no stored row {name!r}")


def _round(table: dict) -> dict:
    return {k: round(v, 5) for k, v in table.items()}


def _parameters(config: ModelConfig) -> int:
    return sum(p.numel() for p in TinyTransformer.from_config(config).parameters())


if __name__ == "__main__":
    main()
