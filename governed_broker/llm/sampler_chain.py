"""What llama.cpp's sampler draws a token from, given the model's raw probabilities.

A run does not draw from the model's distribution renormalised over the tokens the reply's
grammar allows. llama.cpp's common sampler (the server the embedded backend runs in-process,
and ``llama-server``) takes three steps:

1. its chain over the whole vocabulary: top-k, top-p, min-p, then the temperature (llama.cpp's
   default order; its penalties, DRY, typical-p, XTC and top-n-sigma samplers are off by
   default, and the framework never sets them);
2. a draw from what the chain kept; if the grammar allows that token, it is written;
3. otherwise the grammar first, then the chain over the allowed tokens, and a new draw.

So an allowed token ``t`` is written with probability ``c(t) + R * g(t)``: ``c`` the chain's
distribution over the whole vocabulary, ``R`` its mass on tokens the grammar forbids, ``g`` the
chain's distribution over the allowed tokens alone. With temperature 1 and no truncation this
is the raw distribution renormalised over the allowed tokens (``readout.UnderGrammar``). At
temperature 0.7 with llama.cpp's truncation it is sharper: measured on the embedded 0.5B model,
the readout's own sampled accounts wrote threat labels of mean rank 0.78 where the
renormalised distributions expected 1.01 (120 accounts; docs/validity.md).

The chain sees the tokens read (the top ``k`` of the whole vocabulary) and their unseen rest.
Truncation decides on the tokens read: a token not read is less probable than every token read,
so min-p or top-k cut it whenever they cut the least probable token read; where they do not
(``keeps_unseen``), a readout counts that rest as unread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from governed_broker.llm.base import LLMRequest

#: llama.cpp's sampling defaults (common/common.h), which a request leaves in place when it does
#: not set them; the same as models.yaml's note on the catalogue's sampling. source: the
#: llama.cpp server documentation (``top_k`` 40, ``top_p`` 0.95, ``min_p`` 0.05).
LLAMA_CPP_TOP_K = 40
LLAMA_CPP_TOP_P = 0.95
LLAMA_CPP_MIN_P = 0.05


@dataclass(frozen=True)
class LlamaCppSampler:
    """llama.cpp's common sampler under a grammar (see the module docstring).

    Attributes:
        temperature: Sampling temperature (0: the most probable allowed token).
        top_k: Tokens kept by top-k (0: no cut).
        top_p: Nucleus share kept (1: no cut).
        min_p: Share of the most probable token's probability below which a token is cut
            (0: no cut).
    """

    temperature: float
    top_k: int = LLAMA_CPP_TOP_K
    top_p: float = LLAMA_CPP_TOP_P
    min_p: float = LLAMA_CPP_MIN_P

    @classmethod
    def of(cls, request: LLMRequest) -> LlamaCppSampler:
        """The sampler a request is drawn with (llama.cpp's defaults where it sets none)."""
        return cls(request.temperature,
                   LLAMA_CPP_TOP_K if request.top_k is None else request.top_k,
                   LLAMA_CPP_TOP_P if request.top_p is None else request.top_p,
                   LLAMA_CPP_MIN_P if request.min_p is None else request.min_p)

    def allowed_shares(self, allowed: Sequence[float], forbidden: Sequence[float],
                       unseen: float) -> list[float]:
        """The probability that each allowed token read is the one written.

        Args:
            allowed: Raw probabilities of the allowed tokens read.
            forbidden: Raw probabilities of the forbidden tokens read.
            unseen: Raw probability of the tokens not read.

        Returns:
            One share per allowed token (they sum to 1 unless an unseen allowed token is kept).
        """
        everything = [*allowed, *forbidden]
        first = self._chain(everything, unseen)
        refused = sum(first[len(allowed):])
        second = self._chain(allowed, 0.0)
        return [first[i] + refused * second[i] for i in range(len(allowed))]

    def keeps_unseen(self, allowed: Sequence[float], forbidden: Sequence[float],
                     unseen: float) -> bool:
        """Whether the chain may keep a token not read (whose share is then unknown)."""
        everything = [*allowed, *forbidden]
        return (unseen > 0.0 and self._open(everything, unseen)) or self._open(allowed, 0.0)

    def _kept(self, probs: Sequence[float], unseen: float) -> list[int]:
        """Indices the chain's truncation keeps, most probable first."""
        order = sorted(range(len(probs)), key=lambda i: -probs[i])
        if self.temperature <= 0.0:
            return order[:1]
        if self.top_k > 0:
            order = order[:self.top_k]
        total = sum(probs[i] for i in order) + unseen
        kept, cum = [], 0.0
        for i in order:
            kept.append(i)
            cum += probs[i] / total
            if cum >= self.top_p:
                break
        floor = self.min_p * probs[kept[0]]
        return [i for i in kept if probs[i] >= floor]

    def _open(self, probs: Sequence[float], unseen: float) -> bool:
        """Whether tokens beyond ``probs`` would pass the truncation too."""
        if not probs or self.temperature <= 0.0:
            return False
        if 0 < self.top_k <= len(probs):
            return False
        if len(self._kept(probs, unseen)) < len(probs):
            return False  # truncation cut a token read, so it cuts every less probable one
        return sum(probs) / (sum(probs) + unseen) < self.top_p

    def _chain(self, probs: Sequence[float], unseen: float) -> list[float]:
        """Each token's share after the chain (0 where truncation cut it)."""
        out = [0.0] * len(probs)
        kept = self._kept(probs, unseen) if probs else []
        if not kept:
            return out
        if self.temperature <= 0.0:
            out[kept[0]] = 1.0
            return out
        top = max(probs[i] for i in kept)
        weights = {i: (probs[i] / top) ** (1.0 / self.temperature) for i in kept}
        total = sum(weights.values())
        for i, w in weights.items():
            out[i] = w / total
        return out
