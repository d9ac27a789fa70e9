"""Lesson 02a_attention's claims, each checked against torch or against a hand-derived answer:
the line and its verb, the head built by hand step by step, the causal mask and what it does to
the verb's weights (the lesson's prediction), and that a later token never changes an earlier
output."""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_lib import attention_demos, corpus, language
from course_lib.attention import causal_mask, scaled_dot_product_attention
from helpers import lesson_code, lesson_markdown

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02a_attention.ipynb"
W_Q = torch.tensor([[0.0, 0, 0, 4], [0, 0, 0, -4]])
W_K = torch.tensor([[1.0, 1, 0, 0], [0, 0, 1, 0]])
W_V = torch.tensor([[-1.0, 1, 0, 0]])
VERB = 5


def head(ids):
    x = attention_demos.feature_embedding()[ids]  # (T, 4)
    return x @ W_Q.T, x @ W_K.T, x @ W_V.T


@pytest.fixture(scope="module")
def tokens():
    return attention_demos.lesson_line()


# ---------------------------------------------------------------- the line


def test_the_verb_agrees_with_its_subject_five_tokens_back_past_two_plural_nouns(tokens):
    assert len(tokens) == 12
    assert tokens[0] == "Cat" and tokens[VERB] == "eats" and tokens[-1] == "Cats"
    assert tokens[VERB] in language.VERB_FORMS  # the singular form
    between = [t for t in tokens[1:VERB] if t in language.NOUNS]
    assert between == ["dogs", "dogs"]  # two plural nouns
    assert tokens[VERB - 1] == "dogs"  # the noun just before the verb
    assert tokens[-1] in language.SUBJECTS  # the next sentence's subject, plural
    # position 5 is scored on token 6, the object, whose number is plural when exactly one of
    # the subject and the noun before the verb is (a rule lesson 01 does not state, so 02a
    # states it as new): Cat singular, dogs plural
    assert tokens[VERB] in language.TAKES_OBJECT and tokens[VERB + 1] == "cats"
    text = lesson_markdown(NOTEBOOK)
    for said in ("five tokens back", "past two plural nouns", "`Cat` at position 0",
                 "position 5's output predicts the object, `cats`",
                 "not shown before: plural when exactly one of the two is plural",
                 "the subject's number, read past two plural nouns,",
                 "which the object needs"):  # fmt: skip
        assert said in text, said


def test_the_embedding_by_hand_has_the_four_features_it_says():
    E = attention_demos.feature_embedding()
    assert E.shape == (len(corpus.VOCAB), 4)
    row = {token: E[i].tolist() for token, i in corpus.TOKEN_ID.items()}
    assert row["Cat"] == [1, 0, 0, 0] and row["Fishes"] == [0, 1, 0, 0]
    assert row["dogs"] == [0, 0, 1, 0] and row["fish"] == [0, 0, 1, 0]
    assert row["eats"] == [0, 0, 0, 1] and row["sing"] == [0, 0, 0, 1]
    for none in ("near", "(", "]", ".dcc", "la"):  # marks, prepositions, brackets, syllables
        assert row[none] == [0, 0, 0, 0], none


# ---------------------------------------------------------------- the head by hand


def test_one_query_step_by_step_is_row_5_of_the_whole_map(tokens):
    q, k, v = head(corpus.encode(tokens))
    scores = torch.stack([q[VERB] @ k[s] for s in range(12)])
    assert scores.tolist() == [4, 0, -4, 0, -4, 0, -4, 0, -4, 0, 0, 4]
    weights = torch.softmax(scores / math.sqrt(2), dim=-1)
    # e^(4/sqrt 2) over 2 e^(4/sqrt 2) + 6 + 4 e^(-4/sqrt 2): 0.422 on each subject
    both = math.exp(4 / math.sqrt(2))
    assert round(both / (2 * both + 6 + 4 / both), 3) == 0.422
    assert round(weights[0].item(), 3) == round(weights[11].item(), 3) == 0.422
    out = sum(weights[s] * v[s] for s in range(12))
    assert f"{out.item():.2f}" == "0.00"  # -1 and +1 cancel, exactly
    course_out, course_weights = scaled_dot_product_attention(q, k, v)
    assert_close(course_weights[VERB], weights)
    assert_close(course_out[VERB], out)
    assert_close(course_out, F.scaled_dot_product_attention(q, k, v))
    others = torch.cat([course_weights[:VERB], course_weights[VERB + 1 :]])  # (11, 12)
    assert_close(others, torch.full((11, 12), 1 / 12))  # a query (0, 0): every key alike
    assert "each with weight 0.422" in lesson_markdown(NOTEBOOK)


def test_the_causal_mask_leaves_the_verb_its_own_subject(tokens):
    q, k, v = head(corpus.encode(tokens))
    out, weights = scaled_dot_product_attention(q, k, v, causal_mask(12))
    assert torch.all(weights.triu(1) == 0)
    assert_close(weights.sum(-1), torch.ones(12))
    assert_close(weights[0], torch.eye(12)[0])  # the first token reads only itself
    assert round(weights[VERB, 0].item(), 3) == 0.844
    assert f"{out[VERB].item():.2f}" == "-0.84"
    assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    text = lesson_markdown(NOTEBOOK)
    assert "with weight 0.844" in text and "$-0.84$, says singular" in text


def test_the_mask_finds_the_subject_only_because_the_other_subject_came_later(tokens):
    """The text says the mask's job is to hide later tokens, and that the verb finding its
    subject is a side effect on this line: the competing subject, Cats, stands after the verb.
    With Cats moved before the verb, the mask leaves both subjects and the output is 0 again."""
    ids = corpus.encode(tokens)
    assert tokens.index("Cats") > VERB and [t for t in tokens if t in language.SUBJECTS] == [
        "Cat",
        "Cats",
    ]
    moved = ids.clone()
    moved[[3, 11]] = ids[[11, 3]]  # Cats at position 3, before the verb; 'near' at the end
    out, weights = scaled_dot_product_attention(*head(moved), causal_mask(12))
    assert round(weights[VERB, 0].item(), 3) == round(weights[VERB, 3].item(), 3)
    assert f"{out[VERB].item():.2f}" == "0.00"  # the mask did not pick the verb's subject
    text = lesson_markdown(NOTEBOOK)
    assert "That is the one job of the **causal mask**: query $t$ may read keys $0 \\dots t$, " \
        "never a later token" in text  # fmt: skip
    assert "On this line that is a side effect: the other subject, `Cats`, came after the " \
        "verb" in text and "The mask does not look for subjects" in text  # fmt: skip


def test_a_later_token_never_changes_an_earlier_output_under_the_mask(tokens):
    ids = corpus.encode(tokens)
    for replacement in ("Dog", "Cat", "dogs", "eats", "("):
        changed = ids.clone()
        changed[-1] = corpus.TOKEN_ID[replacement]
        before, after = (scaled_dot_product_attention(*head(i), causal_mask(12))[0]
                         for i in (ids, changed))  # fmt: skip
        assert torch.equal(before[:-1], after[:-1])
    changed[-1] = corpus.TOKEN_ID["Dog"]  # the lesson's change: the verb's output moves
    before = scaled_dot_product_attention(*head(ids))[0]
    after = scaled_dot_product_attention(*head(changed))[0]
    assert (before[:-1] - after[:-1]).abs().max() > 0.5


def test_the_mask_shares_the_blocked_weight_among_the_keys_left(tokens):
    """The prediction's answer: with the mask the verb's weight on Cat is its unmasked weight
    divided by the share keys 0 to 5 held without the mask, about a half."""
    q, k, v = head(corpus.encode(tokens))
    _, unmasked = scaled_dot_product_attention(q, k, v)
    _, masked = scaled_dot_product_attention(q, k, v, causal_mask(12))
    kept = unmasked[VERB, : VERB + 1].sum()
    assert_close(masked[VERB, : VERB + 1], unmasked[VERB, : VERB + 1] / kept)
    assert 0.49 < kept.item() < 0.51  # "about a half"
    assert round(unmasked[VERB, 0].item(), 3) == 0.422 and round(masked[VERB, 0].item(), 3) == 0.844
    text = lesson_markdown(NOTEBOOK)
    assert "Without the mask the verb gave `Cat` weight 0.422" in text
    assert "`Cat`'s 0.422 is divided by the share those keys held without the mask, about a " \
        "half" in text  # fmt: skip
    code = lesson_code(NOTEBOOK)
    assert "predicted_weight = None" in code
    assert "judge_prediction(predicted_weight, on_cat" in code


def test_the_masked_map_hatches_the_blocked_keys_apart_from_a_near_zero_allowed_one(tokens):
    """The masked map's sentence: the verb gives the allowed `dogs` 0.003, which prints as 0.00
    like a blocked key, so the map draws the blocked keys hatched (the figure's own test is in
    test_viz_lesson02a_attention.py)."""
    _, masked = scaled_dot_product_attention(*head(corpus.encode(tokens)), causal_mask(12))
    assert tokens[2] == "dogs" and round(masked[VERB, 2].item(), 3) == 0.003
    assert f"{masked[VERB, 2].item():.2f}" == "0.00"
    assert "as `dogs` does from the verb (0.003, printed 0.00)" in lesson_markdown(NOTEBOOK)
    assert "annot=True, mask=mask," in lesson_code(NOTEBOOK)


def test_the_lesson_uses_no_term_a_later_lesson_introduces():
    text = lesson_markdown(NOTEBOOK).lower()
    assert "padding" not in text.split("**next:**")[0]  # lesson 02b's term
    for later in ("multi-head", "encoder", "decoder", "layer norm", "residual", "feed-forward",
                  "rope", "sinusoidal", "adamw", "checkpoint", "temperature"):  # fmt: skip
        assert later not in text, later
    assert " block " not in f" {text} "
