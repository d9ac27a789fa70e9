"""TinyTransformer: a causal language model made of the course's own blocks (lesson 11a)."""

from dataclasses import asdict, dataclass

import torch
from torch import nn

from course_lib._validation import one_of, positive_int
from course_lib.attention import causal_mask
from course_lib.block import TransformerBlock, make_norm
from course_lib.paths import DATA_DIR
from course_lib.positional import RotaryEmbedding, sinusoidal_encoding
from course_lib.runtime import evaluating

POSITIONAL = ("rope", "sinusoidal", "none", "learned")
CHECKPOINT_DIR = DATA_DIR / "checkpoints"  # the shipped models (course_lib.variants, capstone)


@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild a TinyTransformer; saved in each checkpoint's card
    (lesson 11a)."""

    vocab_size: int  # V, number of token ids
    d_model: int = 64  # D, width of the residual stream
    num_heads: int = 4  # H; each head is d = D / H wide
    d_ff: int = 256  # hidden width of each block's feed-forward layer
    num_layers: int = 2  # number of TransformerBlocks
    max_len: int = 128  # longest sequence the model accepts
    # "rope", "sinusoidal" (added to the embeddings), "learned" (a trained (max_len, D) table
    # added to them, as GPT-2) or "none"
    positional: str = "rope"
    norm: str = "layer"  # "layer", "batch" or "none", as in TransformerBlock
    prenorm: bool = True  # pre-norm blocks (the modern default) or post-norm
    scale: bool = True  # scores q.k / sqrt(d); False trains without the scale (lesson 03b)
    residual: bool = True  # False drops every block's "x +", for the variant table (lesson 08)
    tied: bool = False  # the head reuses the embedding's matrix (lesson 01b_loss_and_floor)
    ff: str = "gelu"  # "gelu" (Linear, GELU, Linear) or "swiglu", hidden width d_ff (lesson 14)
    bias: bool = True  # False: attention projections without biases, as in Llama (lesson 14)
    # key/value heads shared by groups of query heads; None: one per query head (lesson 13c)
    num_kv_heads: int | None = None


def check_ids(name: str, ids, vocab_size: int, max_len: int | None = None) -> None:
    """A (B, T) int64 tensor of T >= 1 ids in [0, vocab_size), at most max_len long if given
    (lesson 11a)."""
    if not isinstance(ids, torch.Tensor) or ids.dtype != torch.long or ids.dim() != 2:
        got = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"{name}: expected a (B, T) tensor of int64 token ids, got {got}")
    B, T = ids.shape
    if max_len is not None and T > max_len:
        raise ValueError(f"{name}: expected at most max_len = {max_len} tokens, got {T}")
    if T == 0 or ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"{name}: expected T >= 1 ids in [0, {vocab_size}), got shape {(B, T)}")


class TinyTransformer(nn.Module):
    """Token embedding, position scheme, causal TransformerBlocks, final norm, LM head (lesson 11a).

    forward(idx) maps ids (B, T) to next-token logits (B, T, V); position t only sees 0..t.
    With return_weights=True it also returns one (B, H, T, T) attention tensor per layer.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        num_heads: int,
        d_ff: int,
        num_layers: int,
        max_len: int,
        *,
        positional: str = "rope",
        norm: str = "layer",
        prenorm: bool = True,
        scale: bool = True,
        residual: bool = True,
        tied: bool = False,
        ff: str = "gelu",
        bias: bool = True,
        num_kv_heads: int | None = None,
    ):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("num_layers", num_layers)):
            positive_int(name, value)
        positive_int("max_len", max_len)
        one_of("positional", positional, POSITIONAL)
        self.config = ModelConfig(
            vocab_size, d_model, num_heads, d_ff, num_layers, max_len, positional, norm, prenorm,
            scale, residual, tied, ff, bias, num_kv_heads,
        )  # fmt: skip
        self.embed = nn.Embedding(vocab_size, d_model)
        # RoPE has no weights, so one instance (and one cos/sin table) serves every block
        rope = (
            RotaryEmbedding(d_model // num_heads, max_len=max_len) if positional == "rope" else None
        )
        # built once and sliced to (T, T) in forward; like pe, not saved with the weights
        self.register_buffer("causal", causal_mask(max_len), persistent=False)  # (L, L)
        if positional == "sinusoidal":
            # not a parameter and not saved: rebuilt from the formula on load
            self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
        self.blocks = nn.ModuleList(
            # forward checks idx once; the blocks skip their checks (check_mask syncs the host)
            TransformerBlock(
                d_model,
                num_heads,
                d_ff,
                norm=norm,
                prenorm=prenorm,
                residual=residual,
                rope=rope,
                scale=scale,
                check_inputs=False,
                ff=ff,
                bias=bias,
                num_kv_heads=num_kv_heads,
            )  # fmt: skip
            for _ in range(num_layers)
        )
        self.norm = make_norm(norm, d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tied:  # one (V, D) matrix both reads tokens in and scores them out
            self.head.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.1)  # same order as the sinusoids' 0.1..1
        if positional == "learned":  # a row per position, trained like the token embedding
            self.pos = nn.Embedding(max_len, d_model)
            nn.init.normal_(self.pos.weight, std=0.1)

    @classmethod
    def from_config(cls, config: ModelConfig) -> "TinyTransformer":
        """Build the model a ModelConfig describes (lesson 11a)."""
        kwargs = asdict(config)
        keywords = ("positional", "norm", "prenorm", "scale", "residual", "tied", "ff", "bias",
                    "num_kv_heads")  # fmt: skip
        positional = {k: kwargs.pop(k) for k in keywords}
        return cls(**kwargs, **positional)

    def forward(self, idx: torch.Tensor, return_weights: bool = False):
        check_ids("idx", idx, self.config.vocab_size, self.config.max_len)
        B, T = idx.shape
        x = self.embed(idx)  # (B, T, D)
        if self.config.positional == "sinusoidal":
            x = x + self.pe[:T]  # (B, T, D) + (T, D)
        elif self.config.positional == "learned":
            x = x + self.pos.weight[:T]  # (B, T, D) + (T, D)
        mask = self.causal[:T, :T]  # (T, T)
        weights = []
        for block in self.blocks:
            if return_weights:
                x, w = block(x, mask, return_weights=True)  # (B, T, D), (B, H, T, T)
                weights.append(w)
            else:
                x = block(x, mask)  # (B, T, D)
        logits = self.head(self.norm(x))  # (B, T, V)
        return (logits, weights) if return_weights else logits


# ---------------------------------------------------------------- sampling (lesson 10)


def check_sampling(prompt, num_tokens, temperature, top_k=None, vocab_size=None) -> None:
    """The argument checks generate and the cached generate share (lessons 10 and 13)."""
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2:
        got = tuple(prompt.shape) if isinstance(prompt, torch.Tensor) else type(prompt).__name__
        raise ValueError(f"prompt: expected a (B, T0) tensor of token ids, got {got}")
    if prompt.numel() == 0:
        raise ValueError(
            f"prompt: expected at least one token in each of at least one row, got shape "
            f"{tuple(prompt.shape)}"
        )
    positive_int("num_tokens", num_tokens)
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise TypeError(f"temperature: expected a number, got {type(temperature).__name__}")
    if not temperature >= 0:
        raise ValueError(f"temperature: expected a number >= 0 (0 is greedy), got {temperature}")
    if top_k is not None:
        positive_int("top_k", top_k)
        if vocab_size is not None and top_k > vocab_size:
            raise ValueError(
                f"top_k: expected at most the vocabulary size {vocab_size}, got {top_k}"
            )


def next_token(logits, temperature, top_k, generator) -> torch.Tensor:
    """One id (B, 1) from the last position's logits (B, V): the largest at temperature 0,
    else drawn from softmax(logits / temperature) over the top_k largest logits (all of them
    when top_k is None), with one torch.multinomial call over the whole vocabulary (lesson 10)."""
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))  # ties with the k-th stay
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    probs = torch.softmax(logits / temperature, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


@torch.no_grad()
def generate(
    model,
    prompt: torch.Tensor,
    num_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """Extend prompt ids (B, T0) by num_tokens tokens, one at a time (lesson 10).

    Each step feeds the last max_len tokens of the sequence so far (a longer prompt keeps its
    last max_len, as nanoGPT crops) and picks the next id at the last position with
    next_token: greedy at temperature 0, else sampled from softmax(logits / temperature),
    over the top_k most likely ids when top_k is given. Returns (B, T0 + num_tokens).
    """
    check_sampling(prompt, num_tokens, temperature, top_k, model.config.vocab_size)
    generator = torch.Generator().manual_seed(seed)
    ids = prompt
    with evaluating(model):
        for _ in range(num_tokens):
            logits = model(ids[:, -model.config.max_len :])[:, -1]  # (B, V)
            ids = torch.cat([ids, next_token(logits, temperature, top_k, generator)], dim=1)
    return ids
