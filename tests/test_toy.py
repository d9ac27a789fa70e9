"""course_lib.toy: random embeddings for a toy sentence and untrained projections."""

import pytest
import torch

from course_lib.toy import project_qkv, toy_embeddings

WORDS = ["the", "cat", "chased", "the", "mouse"]


def test_repeated_words_share_an_embedding_and_projections_keep_scale(measure):
    x = toy_embeddings(WORDS, 16)
    assert x.shape == (5, 16)
    assert torch.equal(x[0], x[3])  # "the" twice
    assert not torch.equal(x[0], x[1])
    with pytest.raises(TypeError, match="words"):
        toy_embeddings("the cat")
    # N(0, 1/D) weights keep q, k, v entries at about the variance of x's; over seeds 0-4 and
    # the native/generic/AVX2 paths 0.989 .. 1.018, same on every path (D=64 -> d=32 spread
    # 0.937 .. 1.064: too near the bars, so the projection is wider)
    for seed in range(5):
        big = torch.randn(4000, 256, generator=torch.Generator().manual_seed(seed))
        for part in project_qkv(big, 64, seed=seed):
            assert part.shape == (4000, 64)
            assert 0.9 < measure("q, k, v entry variance", part.var().item()) < 1.1
