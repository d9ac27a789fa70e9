"""Lesson 10's exercise: generate, with temperature, greedy decoding and top-k.

The learner's tokens are compared with course_lib.model.generate's for the same seed on every
case (GENERATE). Beside that, `run_generate` checks the contract's promises on its own, with no
generate of the course's involved: at temperature 0 every new token is the argmax of the
model's logits at its position, read from one pass of the model over the whole output; with
top_k every new token is among the k largest of those logits; the same seed gives the same
tokens; and each bad argument raises a ValueError or TypeError that names it. A generate that
calls the course's sampler (model.generate, model.next_token or kv_cache.generate_cached),
however it reached it, fails (`forbidden`).
"""

import torch

from course_lib import kv_cache
from course_lib import model as course_model
from course_lib.corpus import load_split
from course_lib.exercises.core import FAILED, PASSED, Bug, Case, Exercise, Verdict, run
from course_lib.exercises.stub import attempt
from course_lib.model import ModelConfig, TinyTransformer, generate
from course_lib.runtime import one_thread

V = 104  # the toy language's vocabulary


def generate_reference(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
    """The course's generate, the check's reference (lesson 10)."""
    return generate(model, prompt, num_tokens, temperature=temperature, top_k=top_k, seed=seed)


def _models() -> dict:
    """The shipped base model of seed 0, and a random one that reads at most 8 tokens."""
    from course_lib.variants import load_trained

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10)
        short = TinyTransformer.from_config(
            ModelConfig(vocab_size=V, d_model=32, num_heads=2, d_ff=64, num_layers=1, max_len=8)
        ).eval()
    return {"base": load_trained("base", 0), "short": short}


def _prompt(B, T, first=0):
    return load_split("valid")[first : first + B, :T]  # line starts of the toy language


def _cases() -> list[Case]:
    m = _models()
    base, short = m["base"], m["short"]
    return [
        Case((base, _prompt(2, 4), 10), label="base, 2 prompts of 4 tokens, temperature 1, seed 0"),
        Case(
            (base, _prompt(3, 6, 5), 12),
            {"temperature": 0.7, "seed": 3},
            label="base, temperature 0.7, seed 3",
        ),
        Case(
            (base, _prompt(2, 5, 9), 12),
            {"temperature": 1.6, "seed": 1},
            label="base, temperature 1.6, seed 1",
        ),
        Case((base, _prompt(2, 4, 2), 12), {"temperature": 0}, label="temperature 0: greedy"),
        Case(
            (base, _prompt(3, 4, 7), 12),
            {"top_k": 3, "seed": 2},
            label="top_k 3 at temperature 1, seed 2",
        ),
        Case(
            (base, _prompt(2, 3, 11), 10),
            {"temperature": 1.5, "top_k": 1, "seed": 4},
            label="top_k 1 at temperature 1.5: only the most likely token is left",
        ),
        Case(
            (base, _prompt(2, 4, 13), 8),
            {"top_k": V, "seed": 5},
            label="top_k equal to the vocabulary: every token kept",
        ),
        Case(
            (short, _prompt(2, 12, 20), 6),
            {"seed": 6},
            label="a model that reads at most 8 tokens, a prompt of 12",
        ),
        Case(
            (short, _prompt(1, 5, 30), 9),
            {"temperature": 0.5, "seed": 7},
            label="a model that reads at most 8 tokens, a prompt of 5 grown past 8",
        ),
    ]


# ---------------------------------------------------------------- the mistakes


def _generate(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0,
              scale="divide", greedy=True, topk="mask", crop="end", reseed=False,
              softmax_dim=-1, row=-1, keep_prompt=True, draw="multinomial"):  # fmt: skip
    """generate written out, with the switches a wrong version needs."""
    generator = torch.Generator().manual_seed(seed)
    max_len = model.config.max_len
    ids = prompt
    with torch.no_grad():
        for _ in range(num_tokens):
            if reseed:
                generator = torch.Generator().manual_seed(seed)
            window = {"end": ids[:, -max_len:], "start": ids[:, :max_len], "none": ids}[crop]
            logits = model(window)[:, row]  # (B, V)
            kept = None
            if top_k is not None:
                if topk == "plus_one":
                    kth = torch.sort(logits, dim=-1, descending=True).values[:, top_k : top_k + 1]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                elif topk == "mask":
                    kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                else:  # draw among the k kept values, in sorted order
                    kept = torch.topk(logits, top_k, dim=-1)
                    logits = kept.values  # (B, k)
            if temperature == 0 and greedy:
                new = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                scaled = logits * temperature if scale == "multiply" else logits / temperature
                probs = torch.softmax(scaled, dim=softmax_dim)
                if draw == "categorical":
                    new = torch.distributions.Categorical(probs=probs).sample()[:, None]
                else:
                    new = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
            if kept is not None and topk == "sorted":
                new = kept.indices.gather(-1, new)  # back to token ids
            ids = torch.cat([ids, new], dim=1)
    return ids if keep_prompt else ids[:, prompt.shape[1] :]


def _wrong(**switches):
    def wrong(model, prompt, num_tokens, *, temperature=1.0, top_k=None, seed=0):
        return _generate(model, prompt, num_tokens, temperature=temperature, top_k=top_k,
                         seed=seed, **switches)  # fmt: skip

    return wrong


IDEA = "the sections 'Four ways to choose a token' and 'Exercise: generate' (its contract)"

GENERATE = Exercise(
    name="generate",
    lesson="10_sampling_and_cost",
    reference=generate_reference,
    cases=_cases,
    idea=IDEA,
    bugs=(
        Bug(
            "temperature_multiplied",
            _wrong(scale="multiply"),
            "your tokens are right at temperature 1 and wrong at other temperatures",
            "the logits are divided by the temperature, not multiplied: a temperature below 1 "
            "makes the distribution sharper, so the logits must grow.",
        ),
        Bug(
            "zero_temperature_divides",
            _wrong(greedy=False),
            "at temperature 0 you divide by 0, and the probabilities come out NaN",
            "temperature 0 is the limit where all the probability goes to the largest logit: "
            "greedy decoding. Treat it as its own case and take the argmax of the logits, with "
            "no softmax and no draw.",
        ),
        Bug(
            "top_k_index_not_mapped",
            _wrong(topk="indices"),
            "with top_k your new tokens are small numbers below k: positions in the top-k "
            "list, not token ids",
            "torch.topk gives values and indices; a draw over the k values returns a place "
            "in that list (0 .. k - 1). The contract draws over the whole vocabulary instead: "
            "set every logit below the k-th largest to -inf and keep the (B, V) shape.",
        ),
        Bug(
            "top_k_sorted_draw",
            _wrong(topk="sorted"),
            "with top_k your tokens are among the k most likely, but not the ones the seed draws",
            "you draw among the k kept tokens in their sorted order and map the place back to "
            "a token: a right sampler, but the same random number then lands on another token. "
            "The contract draws over the whole vocabulary, every logit below the k-th largest "
            "set to -inf, so that one seed gives one text.",
        ),
        Bug(
            "top_k_plus_one",
            _wrong(topk="plus_one"),
            "with top_k your tokens now and then fall outside the k most likely",
            "the threshold is the k-th largest logit, at index k - 1 of the sorted logits "
            "(torch.topk(logits, k).values[:, -1]); index k keeps k + 1 tokens.",
        ),
        Bug(
            "cropped_at_the_start",
            _wrong(crop="start"),
            "your tokens are right while the sequence fits the model, wrong once it is longer "
            "than max_len",
            "you keep the first max_len tokens; the next token follows the last ones. Feed the "
            "last max_len tokens, ids[:, -max_len:].",
        ),
        Bug(
            "not_cropped",
            _wrong(crop="none"),
            "the model refuses a sequence longer than its max_len",
            "the model reads at most model.config.max_len tokens. Feed it the last max_len "
            "tokens of the sequence so far, as nanoGPT does; the tokens before them are "
            "forgotten.",
        ),
        Bug(
            "reseeded_every_step",
            _wrong(reseed=True),
            "your first new token is right, the later ones are not",
            "you make a new generator, seeded with seed, at every step, so every step draws "
            "the same random number. Make one before the loop and let each draw move it on.",
        ),
        Bug(
            "softmax_over_the_batch",
            _wrong(softmax_dim=0),
            "your probabilities are taken across the prompts, not across the vocabulary",
            "the logits of the last position are (B, V): the softmax runs over the last "
            "dimension, the tokens, so each prompt's row sums to 1.",
        ),
        Bug(
            "first_position",
            _wrong(row=0),
            "your tokens follow the first token of the sequence, not the last",
            "model(ids) gives logits (B, T, V), one row per position, each predicting the "
            "token after it: the next token comes from the last row, logits[:, -1].",
        ),
        Bug(
            "new_tokens_only",
            _wrong(keep_prompt=False),
            "you return the new tokens only",
            "generate returns the prompt followed by the new tokens, (B, T0 + num_tokens).",
        ),
    ),
    hints=(
        "Try your generate at temperature 0 on one prompt with 3 new tokens, and compare each "
        "new token with the argmax of model(ids)[:, -1] for the sequence before it: the first "
        "one that differs tells you which step to look at.",
        "Each step: the last max_len tokens through the model, the last row of logits, top-k "
        "(every logit below the k-th largest set to -inf), then argmax at temperature 0, else "
        "one torch.multinomial draw from softmax(logits / temperature).",
    ),
    # the course's sampler, whole or one step of it: a generate built on them checks nothing
    forbidden=(
        (course_model, "generate"),
        (course_model, "next_token"),
        (kv_cache, "generate_cached"),
    ),
    forbidden_hint="course_lib.model.generate is the course's sampler, the function the "
    "check compares yours with; its next_token picks one token the same way, and lesson 13b's "
    "generate_cached gives the same tokens. A generate built on any of them checks nothing "
    "of yours: write the loop, the top-k cut and the draw yourself.",
)


# ---------------------------------------------------------------- the contract's promises

BAD_ARGUMENTS = (  # (what is wrong, the parameter its error must name, kwargs)
    ("a negative temperature", "temperature", {"temperature": -0.5}),
    ("top_k 0", "top_k", {"top_k": 0}),
    ("top_k above the vocabulary size", "top_k", {"top_k": V + 1}),
    ("a prompt of no tokens", "prompt", {"prompt": torch.zeros(2, 0, dtype=torch.long)}),
)


def _fail(message, cause, bug) -> Verdict:
    return Verdict(False, f"generate: {message}", (cause, f"See {IDEA}."), FAILED, bug)


def promises(fn) -> Verdict | None:
    """The contract's promises, checked without the course's generate: None when all hold
    (lesson 10)."""
    model = _models()["base"]
    prompt = _prompt(4, 4, 40)
    greedy = fn(model, prompt, 16, temperature=0)
    with torch.no_grad():
        logits = model(greedy)[:, 3:-1]  # (B, 16, V): the logits that chose each new token
    if not torch.equal(greedy[:, 4:], logits.argmax(dim=-1)):
        return _fail(
            "at temperature 0 your tokens are not always the model's most likely next token",
            "greedy decoding takes the argmax of the logits at each step; read from one pass "
            "of the model over your output, each new token should be the largest logit of "
            "the position before it.",
            "not greedy",
        )
    if not torch.equal(fn(model, prompt, 16, temperature=0), greedy):
        return _fail(
            "at temperature 0 two calls gave different tokens",
            "greedy decoding draws nothing: the same prompt gives the same tokens.",
            "not greedy",
        )
    sampled = fn(model, prompt, 16, top_k=3, seed=9)
    with torch.no_grad():
        logits = model(sampled)[:, 3:-1]  # (B, 16, V)
    allowed = torch.topk(logits, 3, dim=-1).indices  # (B, 16, 3)
    if not (allowed == sampled[:, 4:, None]).any(-1).all():
        return _fail(
            "with top_k = 3 a new token fell outside the model's 3 most likely",
            "keep the k largest logits at each step and set the others to -inf before the "
            "softmax, so that the others have probability 0.",
            "outside top k",
        )
    again = fn(model, prompt, 16, top_k=3, seed=9)
    if not torch.equal(again, sampled):
        return _fail("the same seed gave different tokens", "make one torch.Generator seeded "
                     "with seed at the start of each call and draw every token with it.",
                     "not reproducible")  # fmt: skip
    for what, name, change in BAD_ARGUMENTS:
        kwargs = {"temperature": 1.0, "top_k": None, "seed": 0, **change}
        given = kwargs.pop("prompt", prompt)
        try:
            fn(model, given, 4, **kwargs)
        except (ValueError, TypeError) as err:
            if name not in str(err):
                return _fail(
                    f"{what} raised {type(err).__name__}: {err}, which does not name `{name}`",
                    f"start the message with the parameter's name, what you expected and what "
                    f'you got, e.g. "{name}: expected ..., got ...".',
                    "error unnamed",
                )
            continue
        except Exception as err:  # noqa: BLE001 (any other error is the learner's to fix)
            return _fail(
                f"{what} raised {type(err).__name__}: {err}",
                f"check {name} at the start of generate and raise a ValueError (a TypeError "
                f"for a wrong type) whose message names `{name}`.",
                "error unclear",
            )
        return _fail(
            f"{what} ran without an error",
            f"check {name} at the start of generate and raise a ValueError whose message names "
            f"`{name}`, what you expected and what you got.",
            "no error",
        )
    return None


def run_generate(fn) -> Verdict:
    """Check a generate: its tokens against the course's on every case, then the contract's
    promises on their own (greedy, top-k, a fixed seed, errors), on one torch thread (lesson 10)."""
    with one_thread():
        verdict = run(GENERATE, fn)
        if not verdict.passed:
            return verdict
        tried = attempt("generate", promises, fn)
        if tried.error is not None:
            return _fail(f"checking the contract raised {type(tried.error).__name__}: "
                         f"{tried.error}", GENERATE.hints[1], None)  # fmt: skip
        if tried.value is not None:
            return tried.value
    cases = len(GENERATE.case_list())
    return Verdict(
        True,
        f"generate: passed all {cases} cases, greedy and top-k read from the model itself, "
        "a fixed seed and every bad argument. Well done!",
        (),
        PASSED,
    )
