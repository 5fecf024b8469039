"""The model's choice distributions, read from its token probabilities.

Every replicate of a vignette sends the same prompt: the model computes one distribution over
each choice and sampling only draws from it. This module reads those distributions directly,
for every field of a reply whose value is one of a fixed list (an ``enum`` of the reply's JSON
schema: the appraisal labels, the decision), from the raw next-token log-probabilities a
backend exposes (``llm.logprobs``). What it does, and why:

* **The path.** A reply is written in order, so a field is read after the text that precedes
  it, at the path's own tokens up to its value. The threat label comes first, after nothing
  generated, so its distribution is the model's, full stop; the coping label and the decision
  follow generated text (the threat label and its reason, ...) and are conditional on it. Two
  readings (``ReadoutSettings.accounts``):

  - *greedy* (``accounts`` 0): along the model's greedy reply under the reply grammar
    (temperature 0: the most probable allowed token at each step). A later field says what
    the model would choose after its most probable account, which may be far from what
    sampled replies choose (each after its own sampled account).
  - *over sampled accounts* (``accounts`` n > 0): along n replies drawn with the request's
    own sampler (temperature, truncation) and n seeds; each field's distribution is the mean
    of its n conditional distributions. That is the marginal a sampled reply's field is drawn
    from, estimated with less variance than counting n sampled values (each account
    contributes a whole distribution, not one draw). Accounts that reach a field after the
    same tokens share one reading of it. Even the threat label, which follows only the JSON
    layout, may follow different tokens: the grammar lets a sampled reply put optional
    whitespace in the layout, and the model's numbers move with it (measured on the embedded
    0.5B model: 1 account of 8 wrote another layout in 14 of 15 vignettes, P(VL) 0.005-0.03
    apart). Each account's distribution is kept, so a card can bound the Monte Carlo error.

  Fields after the last one read are not generated (the reply's closing string is
  constrained to be empty, which changes no allowed token before it).
* **Under the grammar.** At each position the grammar allows only tokens that continue one of
  the allowed values; the raw probabilities (which put 10-20 % on forbidden tokens such as
  ``|`` or ``None``) are renormalised over the allowed tokens, as the constrained sampler does.
* **Whole values, not single tokens.** A value may take several tokens (``VH`` is ``V`` +
  ``H``; ``elevate_house`` and ``elevate_and_insure`` share their first tokens), and one value
  may be spelt by several token sequences (the token ``VL``, or ``V`` then ``L``). The walk
  follows every allowed token: a token that settles the value ends its branch, a token shared
  by several values opens a node read with one more pass, and a value's probability is the sum
  over its token paths of the product of the renormalised conditional probabilities.
* **Not the closing quote.** Once a token settles the value, the grammar forces the rest of
  it and its closing quote; that token is not scored (scoring the quote after ``VL`` would mix
  in the model's wish to write ``VL|M`` and misstate P(VL)). The quote is read only where it
  is a real choice (a value that is a prefix of another).

A source writes a path with its prompt evaluated whole and reads the positions after it from
that same evaluation, so a readout depends only on the request (its seeds), the model and the
source's settings, never on the call before it (``llm.logprobs``). The accounts after the
first reuse the first account's evaluation of their common prompt
(``ReadoutSettings.prompt_reuse``): that evaluation is itself made whole, within the same
readout, so the readout still depends on nothing before it, and a path costs its generated
tokens instead of the whole prompt (measured on the embedded 0.5B model: about 10 of a
path's 14 s are the prompt).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from json.decoder import scanstring
from typing import Any, Protocol

from governed_broker.llm.base import LLMError, LLMRequest
from governed_broker.seeding import child_seed

#: Characters llama.cpp's JSON grammar allows between tokens of structure (its ``space`` rule).
GRAMMAR_SPACE = b" \t\n"
#: How far (natural log) below the most probable allowed token the greedy reply's own token may
#: be read at a field's first position (a server reading the text again may round otherwise).
PATH_TOLERANCE = 0.05


class ReadoutError(LLMError):
    """A distribution cannot be read (the message says why and what to change)."""


@dataclass(frozen=True)
class Token:
    """One token of a model's vocabulary.

    Attributes:
        text: The token's bytes (UTF-8; a token may hold part of a character).
        id: Its id in the model's vocabulary, where the source knows it.
    """

    text: bytes
    id: int | None = None

    def shown(self) -> str:
        """The token as text for people (partial characters replaced)."""
        return self.text.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Candidate:
    """A token a model may write next, with its raw log-probability.

    The log-probability is taken before any grammar, temperature or truncation.
    """

    token: Token
    logprob: float


@dataclass(frozen=True)
class ReplyPath:
    """The path: a model's reply under the grammar (greedy or sampled), token by token.

    Attributes:
        text: The reply.
        tokens: Its tokens, in order (their bytes spell ``text``).
        prompt: The source's own handle on the prompt (token ids, messages), passed back to it.
    """

    text: str
    tokens: tuple[Token, ...]
    prompt: Any = None


class TokenSource(Protocol):
    """What the readout needs of a model (implementations: ``llm.logprobs``)."""

    #: The model and the way it is read, for messages and provenance.
    name: str

    def path(self, request: LLMRequest, reuse_prompt: bool = False) -> ReplyPath:
        """The reply to ``request`` under its ``json_schema``, drawn with its sampling settings.

        Its temperature (0: the greedy reply), truncation (top-k, top-p, min-p) and seed.

        Args:
            request: What to send.
            reuse_prompt: False: the prompt is evaluated whole (no reuse of an earlier call's
                evaluation). True: the source's previous path had this same prompt, and the
                evaluation of it that goes back to a whole one may be reused (a source without
                one ignores it).
        """
        ...

    def top_tokens(self, reply: ReplyPath, prefix: Sequence[Token], k: int
                   ) -> list[Candidate]:
        """The ``k`` most probable next tokens, with raw log-probabilities.

        They follow the prompt of ``reply`` and the tokens ``prefix`` of the reply being
        written.
        """
        ...

    def sampler(self, request: LLMRequest) -> TokenSampler:
        """How the run's backend draws each token of the reply to ``request``.

        Raises:
            ReadoutError: The source cannot say (read the model's view instead).
        """
        ...


class TokenSampler(Protocol):
    """How a token is drawn at one position, from the raw probabilities read there.

    Implementations: ``UNDER_GRAMMAR`` (the model's distribution under the reply's grammar)
    and ``llm.sampler_chain.LlamaCppSampler`` (what llama.cpp's sampler draws from).
    """

    def allowed_shares(self, allowed: Sequence[float], forbidden: Sequence[float],
                       unseen: float) -> list[float]:
        """The probability that each allowed token read is the one written."""
        ...

    def keeps_unseen(self, allowed: Sequence[float], forbidden: Sequence[float],
                     unseen: float) -> bool:
        """Whether a token not read may be written (its share is then unknown)."""
        ...


@dataclass(frozen=True)
class UnderGrammar:
    """The model's own distribution under the grammar.

    The raw probabilities renormalised over the allowed tokens (temperature 1, no truncation;
    what a sampler without either draws from).
    """

    def allowed_shares(self, allowed: Sequence[float], forbidden: Sequence[float],
                       unseen: float) -> list[float]:
        """Each allowed token's share of the allowed mass read."""
        total = sum(allowed)
        return [a / total for a in allowed]

    def keeps_unseen(self, allowed: Sequence[float], forbidden: Sequence[float],
                     unseen: float) -> bool:
        """Always: nothing is truncated."""
        return True


#: The model's distribution under the grammar (``UnderGrammar``).
UNDER_GRAMMAR = UnderGrammar()
#: Most times a sampled account whose reply stops before a field is drawn again (``_draw``).
MAX_REDRAWS = 3

#: What a readout reads: the distribution the run's sampler draws from, or the model's own.
VIEWS = ("sampler", "model")


@dataclass(frozen=True)
class ReadoutSettings:
    """How a distribution is read.

    Attributes:
        top_k: Tokens read at each position (the mass beyond them is reported as unseen).
        max_passes: Most positions read for one field (a guard against a runaway walk).
        accounts: 0: read along the greedy reply; n > 0: along n replies drawn with the
            request's sampler, each field the mean of its n conditional distributions (see
            the module docstring).
        min_path_mass: A token path within a value (``e``, ``l``, ``e``... of ``elevate``)
            whose probability falls below this is not read further, and its mass is counted
            unread: a value spelt by many token sequences (every split of ``elevate_``) would
            otherwise need hundreds of positions (measured: over 200 for the 1.5B model's
            decision after some accounts). 0: read every path among the top ``k``.
        view: ``sampler``: each position's distribution is the one the run's sampler draws
            from (its temperature and truncation, ``TokenSource.sampler``), so the readout
            predicts sampled replies; ``model``: the model's own distribution under the grammar
            (``UNDER_GRAMMAR``: temperature 1, no truncation).
        prompt_reuse: The accounts after the first reuse the first account's evaluation of
            the prompt (``TokenSource.path``); False evaluates it whole for every account
            (the readouts made before the setting existed).
    """

    top_k: int = 20
    max_passes: int = 200
    accounts: int = 0
    min_path_mass: float = 1e-4
    view: str = "sampler"
    prompt_reuse: bool = True

    def __post_init__(self) -> None:
        if (self.top_k < 1 or self.max_passes < 1 or self.accounts < 0
                or not 0.0 <= self.min_path_mass < 1.0):
            raise ValueError(f"readout settings out of range: top_k {self.top_k} and "
                             f"max_passes {self.max_passes} must be >= 1, accounts "
                             f"{self.accounts} >= 0, min_path_mass {self.min_path_mass} in "
                             "[0, 1)")
        if self.view not in VIEWS:
            raise ValueError(f"readout view {self.view!r}: use one of {', '.join(VIEWS)}")


@dataclass(frozen=True)
class Branch:
    """One allowed token at a node: the value it settles, or the node it leads to."""

    token: Token
    logprob: float
    value: str | None = None
    child: Node | None = None


@dataclass(frozen=True)
class Node:
    """One position read within a field's value.

    Attributes:
        prefix: The part of the value (and of the text before it in the same token) already
            written when this position is read ("" at the field's first position).
        branches: The tokens the grammar allows here, among the top ``k``.
        forbidden: The top-``k`` tokens the grammar forbids here (kept, with the branches, so
            that a sampler's truncation can be worked out from the raw probabilities).
        unseen_mass: Raw probability beyond the top ``k`` (one minus their sum).
    """

    prefix: str
    branches: tuple[Branch, ...]
    forbidden: tuple[Candidate, ...]
    unseen_mass: float

    @property
    def forbidden_mass(self) -> float:
        """Raw probability of the top-``k`` tokens the grammar forbids here."""
        return sum(math.exp(c.logprob) for c in self.forbidden)

    @property
    def allowed_mass(self) -> float:
        """Raw probability of the allowed tokens read here."""
        return sum(math.exp(b.logprob) for b in self.branches)

    @property
    def resolved(self) -> bool:
        """Whether some allowed token read here leads to a value.

        A node deep in a branch may have none among the top ``k`` (the model wanted to write
        another word).
        """
        return any(b.child is None or b.child.resolved for b in self.branches)

    def shares(self, sampler: TokenSampler) -> list[float]:
        """The probability that each branch's token is written here (``branches`` order)."""
        return sampler.allowed_shares([math.exp(b.logprob) for b in self.branches],
                                      [math.exp(c.logprob) for c in self.forbidden],
                                      self.unseen_mass)

    def distribution(self, sampler: TokenSampler | None = None) -> dict[str, float]:
        """Probability of each value reachable from here (sums to 1).

        Each allowed token's share (``shares``: by default its share of the allowed mass) times
        the distribution below it, over the tokens that lead to a value (an unresolved
        branch's share goes to the others in proportion).
        """
        sampler = sampler or UNDER_GRAMMAR
        resolved = [(b, share) for b, share in zip(self.branches, self.shares(sampler),
                                                   strict=True)
                    if b.child is None or b.child.resolved]
        total = sum(share for _, share in resolved)
        if total <= 0.0:
            raise ReadoutError(
                f"after {self.prefix!r} the sampler writes only tokens that lead to no value "
                "among those read; read more tokens (a larger top_k)")
        out: dict[str, float] = {}
        for b, share in resolved:
            below = ({b.value: 1.0} if b.child is None
                     else b.child.distribution(sampler))
            for value, p in below.items():
                out[value] = out.get(value, 0.0) + share / total * p  # type: ignore[index]
        return out

    def unresolved_share(self, sampler: TokenSampler | None = None) -> float:
        """The share of the tokens written here on paths that reach no value.

        Such paths reach no value among the tokens read; they are left out of
        ``distribution``.
        """
        sampler = sampler or UNDER_GRAMMAR
        lost = 0.0
        for b, share in zip(self.branches, self.shares(sampler), strict=True):
            if b.child is not None:
                below = b.child.unresolved_share(sampler) if b.child.resolved else 1.0
                lost += share * below
        return lost

    def unread_share(self, sampler: TokenSampler | None = None) -> float:
        """The probability of the field's value (as drawn) that was not read here.

        Tokens beyond the top ``k`` have at most the raw ``unseen_mass``: as a share of the
        allowed mass that is at most ``unseen / (allowed read + unseen)``, and nothing where
        the sampler's truncation provably cuts them (``TokenSampler.keeps_unseen``). Token
        paths that reached no value (``unresolved_share``) add theirs.
        """
        sampler = sampler or UNDER_GRAMMAR
        allowed, unseen = self.allowed_mass, self.unseen_mass
        kept = sampler.keeps_unseen([math.exp(b.logprob) for b in self.branches],
                                    [math.exp(c.logprob) for c in self.forbidden], unseen)
        beyond = unseen / (allowed + unseen) if kept and allowed + unseen > 0 else 0.0
        unresolved = self.unresolved_share(sampler)
        return min(1.0, unresolved + (1.0 - unresolved) * beyond)

    def to_json(self) -> dict[str, Any]:
        """The node and everything below it, as JSON."""
        return {"prefix": self.prefix, "unseen_mass": self.unseen_mass,
                "branches": [{"token": b.token.shown(), "logprob": b.logprob,
                              **({"value": b.value} if b.child is None
                                 else {"child": b.child.to_json()})}
                             for b in self.branches],
                "forbidden": [[c.token.shown(), c.logprob] for c in self.forbidden]}


@dataclass(frozen=True)
class AccountReading:
    """A field read along one sampled account (``ReadoutSettings.accounts``).

    Attributes:
        seed: The seed the account was drawn with.
        value: The value the account itself wrote.
        probabilities: The field's distribution after the account's text (schema order).
        unread: Its probability not read (``Node.unread_share``).
        root: The positions read after the account's text (shared by accounts whose text
            before the field is the same).
    """

    seed: int
    value: str
    probabilities: tuple[float, ...]
    unread: float
    root: Node


@dataclass(frozen=True)
class FieldDistribution:
    """The distribution of one field of the reply.

    Attributes:
        field: The field's path in the reply, e.g. ``threat_appraisal.label``.
        values: The allowed values, in the schema's order.
        probabilities: The probability of each value, same order (sums to 1): over sampled
            accounts, the mean of theirs.
        path_value: The value the (first) path wrote.
        root: The positions read, from the field's first token down (along the first path).
        passes: Positions read (one model evaluation of one token each).
        accounts: Over sampled accounts, the field read along each (empty: the greedy path).
        sampler: How each position's distribution was taken from its raw probabilities
            (``ReadoutSettings.view``).
    """

    field: str
    values: tuple[str, ...]
    probabilities: tuple[float, ...]
    path_value: str
    root: Node
    passes: int
    accounts: tuple[AccountReading, ...] = ()
    sampler: TokenSampler = UNDER_GRAMMAR

    def distribution(self) -> dict[str, float]:
        """Value -> probability, in the schema's order."""
        return dict(zip(self.values, self.probabilities, strict=True))

    @property
    def forbidden_mass(self) -> float:
        """Raw probability the model puts on forbidden tokens at the field's first token."""
        return self.root.forbidden_mass

    @property
    def unseen_mass(self) -> float:
        """Raw probability beyond the tokens read at the field's first token."""
        return self.root.unseen_mass

    @property
    def unread(self) -> float:
        """The probability of the value not read: the mean of the accounts' or the root's."""
        if self.accounts:
            return sum(a.unread for a in self.accounts) / len(self.accounts)
        return self.root.unread_share(self.sampler)

    @property
    def unresolved_mass(self) -> float:
        """Probability (as drawn) of the token paths that reached no allowed value.

        Those paths are left out and the rest renormalised; the mass is small, since such
        paths begin with improbable tokens.
        """
        return self.root.unresolved_share(self.sampler)

    def to_json(self) -> dict[str, Any]:
        """The field's distribution and the masses left out, as JSON."""
        accounts = [{"seed": a.seed, "value": a.value, "unread": a.unread,
                     "distribution": dict(zip(self.values, a.probabilities, strict=True)),
                     "tree": a.root.to_json()}
                    for a in self.accounts]
        return {"field": self.field, "distribution": self.distribution(),
                "path_value": self.path_value, "unread": self.unread,
                "forbidden_mass": self.forbidden_mass, "unseen_mass": self.unseen_mass,
                "unresolved_mass": self.unresolved_mass, "passes": self.passes,
                **({"accounts": accounts} if accounts else {}),
                "tree": self.root.to_json()}


@dataclass(frozen=True)
class ReplyDistributions:
    """Every enumerated field of one request's reply.

    Attributes:
        fields: One readout per field, in reply order.
        path: The reply the fields were read along (the first, over sampled accounts).
        source: The model and how it was read.
        passes: Positions read in all (the paths apart).
        seconds: Wall-clock time of the readout.
        redrawn: Sampled accounts drawn again because their reply stopped before a field
            (``MAX_REDRAWS``).
    """

    fields: tuple[FieldDistribution, ...]
    path: str
    source: str
    passes: int
    seconds: float
    redrawn: int = 0

    def field(self, name: str) -> FieldDistribution:
        """The readout of field ``name`` (e.g. ``decision``)."""
        for f in self.fields:
            if f.field == name:
                return f
        raise KeyError(f"no field {name!r} was read (read: "
                       f"{', '.join(f.field for f in self.fields)})")

    def to_json(self) -> dict[str, Any]:
        """The reply's fields and the cost of reading them, as JSON."""
        return {"source": self.source, "path": self.path, "passes": self.passes,
                "seconds": round(self.seconds, 3), "redrawn": self.redrawn,
                "fields": [f.to_json() for f in self.fields]}


# -- the reply's schema ---------------------------------------------------------------------
def enum_fields(schema: Mapping[str, Any], prefix: str = ""
                ) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each string field of ``schema`` whose value is one of an ``enum``.

    Yields (dotted path, allowed values) in the order of the schema's properties (the order
    the grammar writes them).
    """
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        if isinstance(sub, Mapping) and "enum" in sub:
            values = tuple(sub["enum"])
            if not values or not all(isinstance(v, str) for v in values):
                raise ReadoutError(f"reply schema field {path}: only enums of strings can be "
                                   f"read, got {list(values)!r}")
            yield path, values
        elif isinstance(sub, Mapping) and sub.get("type") == "object":
            yield from enum_fields(sub, f"{path}.")


def path_schema(schema: Mapping[str, Any], last_field: str) -> dict[str, Any]:
    """``schema`` with the free strings after ``last_field``'s property constrained to be empty.

    Each top-level free string property after the one holding ``last_field`` must be empty,
    so that the greedy path stops writing after the last field read.

    The grammar then allows the same tokens as before at every position up to that property's
    string, so no field read is changed.
    """
    top = last_field.split(".")[0]
    names = list(schema.get("properties") or {})
    if top not in names:
        raise ReadoutError(f"reply schema has no property {top!r}")
    properties = dict(schema["properties"])
    for name in names[names.index(top) + 1:]:
        sub = properties[name]
        if isinstance(sub, Mapping) and sub.get("type") == "string" and "enum" not in sub:
            properties[name] = {"type": "string", "maxLength": 0}
    return {**schema, "properties": properties}


# -- where the path writes each value --------------------------------------------------------
@dataclass(frozen=True)
class _Span:
    start: int  # offset of the value's first character (after its opening quote)
    end: int  # offset just after its closing quote
    value: str


def string_spans(text: str) -> dict[str, _Span]:
    """Where each string value of the JSON ``text`` lies, by dotted path.

    A truncated text gives the values before the cut.
    """
    out: dict[str, _Span] = {}
    try:
        _scan(text, 0, "", out)
    except (IndexError, ValueError):
        pass  # a reply cut short (max_tokens): the values before the cut are known
    return out


def _skip(text: str, i: int) -> int:
    while text[i] in " \t\n\r":
        i += 1
    return i


def _scan(text: str, i: int, path: str, out: dict[str, _Span]) -> int:
    i = _skip(text, i)
    c = text[i]
    if c == '"':
        value, end = scanstring(text, i + 1)
        out[path] = _Span(i + 1, end, value)
        return end
    if c in "{[":
        close, n = ("}" if c == "{" else "]"), 0
        i = _skip(text, i + 1)
        while text[i] != close:
            if c == "{":
                key, i = scanstring(text, _skip(text, i) + 1)
                i = _skip(text, i)
                if text[i] != ":":
                    raise ValueError(f"':' expected at {i}")
                name = f"{path}.{key}" if path else key
            else:
                name, n = f"{path}.{n}", n + 1
            i = _skip(text, _scan(text, i + 1 if c == "{" else i, name, out))
            if text[i] == ",":
                i = _skip(text, i + 1)
            elif text[i] != close:
                raise ValueError(f"',' or {close!r} expected at {i}")
        return i + 1
    _, end = json.JSONDecoder().raw_decode(text, i)
    return end


# -- the walk -------------------------------------------------------------------------------
@dataclass
class _Walk:
    """Reading one field: its targets and the passes made."""

    source: TokenSource
    reply: ReplyPath
    field: str
    targets: dict[str, bytes]  # value -> the bytes from the read position to its closing quote
    follower: bytes  # what the grammar writes after the closing quote (b"," or b"}")
    settings: ReadoutSettings
    passes: int = 0

    def consistent(self, written: bytes) -> list[str]:
        """The values ``written`` (bytes from the read position) may still become."""
        out = []
        for value, target in self.targets.items():
            if target.startswith(written):
                out.append(value)
            elif written.startswith(target) and self._follows(written[len(target):]):
                out.append(value)
        return out

    def _follows(self, rest: bytes) -> bool:
        """Whether the grammar allows ``rest`` right after a value's closing quote.

        That is spaces, then the structure's next character, then anything (not checked
        further).
        """
        rest = rest.lstrip(GRAMMAR_SPACE)
        return not rest or rest.startswith(self.follower)

    def node(self, prefix: Sequence[Token], written: bytes, reach: float = 1.0) -> Node:
        """The position after ``prefix``, and below it every allowed token's branch.

        ``reach`` is the probability (under the grammar) of the token path to this position;
        a branch whose path would fall below ``settings.min_path_mass`` is not read further:
        it is left unresolved (its mass is reported as unread, ``Node.unread_share``).
        """
        if self.passes >= self.settings.max_passes:
            raise ReadoutError(
                f"{self.source.name}: field {self.field} needed more than "
                f"{self.settings.max_passes} positions read; lower the readout's top_k or "
                "raise its min_path_mass")
        self.passes += 1
        candidates = self.source.top_tokens(self.reply, prefix, self.settings.top_k)
        kinds = [(c, self.consistent(written + c.token.text)) for c in candidates]
        allowed = sum(math.exp(c.logprob) for c, values in kinds if values)
        branches, forbidden = [], []
        for c, values in kinds:
            text = written + c.token.text
            if not values:
                forbidden.append(c)
            elif len(values) == 1:  # settled: the grammar forces the rest and the quote
                branches.append(Branch(c.token, c.logprob, value=values[0]))
            else:
                below = reach * math.exp(c.logprob) / allowed
                child = (self.node([*prefix, c.token], text, below)
                         if below >= self.settings.min_path_mass
                         else Node(text.decode("utf-8", errors="replace"), (), (), 0.0))
                branches.append(Branch(c.token, c.logprob, child=child))
        shown = written.decode("utf-8", errors="replace")
        seen = sum(math.exp(c.logprob) for c in candidates)
        return Node(shown, tuple(branches), tuple(forbidden), max(0.0, 1.0 - seen))


def _check_on_path(source: TokenSource, field_name: str, root: Node, written: Token,
                   greedy: bool) -> None:
    """The path's own token at the field's first position is one the readout read there.

    A greedy path wrote the most probable allowed token; a sampled path wrote an allowed token
    among those read (or the readout left some allowed mass unread). A source that reads that
    position after other text (a server that starts a new turn instead of continuing the
    reply) would not agree, and its numbers would be wrong.
    """
    best = max(root.branches, key=lambda b: b.logprob)
    mine = next((b for b in root.branches if b.token.text == written.text), None)
    if greedy:
        wrong = mine is None or mine.logprob < best.logprob - PATH_TOLERANCE
    else:
        wrong = mine is None and root.unseen_mass <= 0.0
    if wrong:
        raise ReadoutError(
            f"{source.name}: field {field_name}: the position read does not continue the "
            f"reply (the reply wrote {written.shown()!r}, the position's most probable "
            f"allowed token is {best.token.shown()!r}): the source does not read after the "
            "reply's own text")


def _json_body(value: str) -> bytes:
    """How a value is written inside a JSON string (escaped as the grammar writes it)."""
    return json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")


@dataclass(frozen=True)
class _Position:
    """Where a path reads a field: the token writing the value's first byte, and around it."""

    index: int  # that token's index in the path
    lead: bytes  # the bytes of that token before the value (e.g. the opening quote)
    follower: bytes  # what the grammar writes after the value's closing quote
    value: str  # the value the path wrote

    def key(self, reply: ReplyPath) -> tuple[Any, ...]:
        """The text the field is read after: equal keys, equal distributions."""
        return (tuple((t.id, t.text) for t in reply.tokens[:self.index]), self.lead)


def _position(source: TokenSource, reply: ReplyPath, spans: Mapping[str, _Span],
              field_name: str) -> _Position:
    if field_name not in spans:
        raise ReadoutError(
            f"{source.name}: the reply stops before field {field_name} (is "
            f"llm.max_tokens large enough?): {reply.text[-200:]!r}")
    span = spans[field_name]
    encoded = reply.text.encode("utf-8")
    start = len(reply.text[:span.start].encode("utf-8"))
    after = encoded[len(reply.text[:span.end].encode("utf-8")):].lstrip(GRAMMAR_SPACE)[:1]
    offset, index = 0, 0
    while offset + len(reply.tokens[index].text) <= start:
        offset += len(reply.tokens[index].text)
        index += 1
    return _Position(index, encoded[offset:start], after or b"}", span.value)


def _read_at(source: TokenSource, reply: ReplyPath, at: _Position, field_name: str,
             values: Sequence[str], settings: ReadoutSettings) -> tuple[Node, int]:
    """The tree of a field read at ``at`` along ``reply``, and the passes it took."""
    walk = _Walk(source, reply, field_name,
                 {v: at.lead + _json_body(v) + b'"' for v in values}, at.follower, settings)
    root = walk.node(reply.tokens[:at.index], b"")
    if not root.resolved:
        raise ReadoutError(
            f"{source.name}: field {field_name}: no token path among the "
            f"{settings.top_k} most probable tokens at each position leads to an allowed "
            "value; read more tokens (a larger top_k)")
    return root, walk.passes


def _path_requests(request: LLMRequest, settings: ReadoutSettings,
                   seeds: Sequence[int] | None) -> list[LLMRequest]:
    """The requests of the paths read: the greedy one, or one per sampled account."""
    if request.json_schema is None:
        raise ReadoutError("a readout needs the request's reply schema (json_schema)")
    fields = list(enum_fields(request.json_schema))
    if not fields:
        raise ReadoutError("the reply schema has no field with an enum of allowed values")
    base = replace(request, json_schema=path_schema(request.json_schema, fields[-1][0]))
    if settings.accounts == 0:
        return [replace(base, temperature=0.0, top_p=None, top_k=None, min_p=None)]
    if seeds is None:
        seeds = [child_seed(request.seed, "account", k) for k in range(settings.accounts)]
    if len(seeds) != settings.accounts:
        raise ValueError(f"{len(seeds)} seeds for {settings.accounts} accounts")
    if not request.temperature:
        raise ReadoutError("sampled accounts need the request's sampling temperature (> 0); "
                           "with temperature 0 read the greedy path (accounts 0)")
    return [replace(base, seed=seed) for seed in seeds]


def read_distributions(source: TokenSource, request: LLMRequest,
                       settings: ReadoutSettings | None = None,
                       seeds: Sequence[int] | None = None) -> ReplyDistributions:
    """The distribution of every enumerated field of the reply to ``request``.

    Args:
        source: The model's token probabilities (``llm.logprobs.token_source``).
        request: The request a run would send (its messages and reply schema). Its sampling
            settings draw the sampled accounts; the greedy path does not use them.
        settings: Top-k, guard, the number of sampled accounts (0: the greedy path) and the
            view (the sampler's distribution or the model's).
        seeds: With accounts: each account's seed (default: derived from the request's).

    Raises:
        ReadoutError: No schema, no enumerated field, a reply cut before a field, no allowed
            token among those read, a source that does not read after the path's text, a
            source that cannot say how its backend samples (view ``sampler``).
    """
    settings = settings or ReadoutSettings()
    requests = _path_requests(request, settings, seeds)
    sampler = source.sampler(request) if settings.view == "sampler" else UNDER_GRAMMAR
    fields = list(enum_fields(request.json_schema or {}))
    start = time.perf_counter()
    read: dict[tuple[Any, ...], Node] = {}  # a field's tree by the text it is read after
    passes = {name: 0 for name, _ in fields}
    along: dict[str, list[tuple[int, str, Node]]] = {name: [] for name, _ in fields}
    first: ReplyPath | None = None
    redrawn = 0
    for k, asked in enumerate(requests):
        path_request, reply, spans = _draw(source, asked, [name for name, _ in fields],
                                           settings, first_account=k == 0)
        redrawn += path_request.seed != asked.seed
        first = first or reply
        for name, values in fields:
            at = _position(source, reply, spans, name)
            key = (name, at.key(reply))
            if key not in read:
                read[key], n = _read_at(source, reply, at, name, values, settings)
                passes[name] += n
            _check_on_path(source, name, read[key], reply.tokens[at.index],
                           greedy=path_request.temperature == 0.0)
            along[name].append((path_request.seed, at.value, read[key]))
    assert first is not None  # at least one path
    out = tuple(_field(name, values, along[name], passes[name], settings.accounts > 0, sampler)
                for name, values in fields)
    return ReplyDistributions(out, first.text, source.name, sum(passes.values()),
                              time.perf_counter() - start, redrawn)


def _draw(source: TokenSource, request: LLMRequest, fields: Sequence[str],
          settings: ReadoutSettings, first_account: bool
          ) -> tuple[LLMRequest, ReplyPath, dict[str, _Span]]:
    """A path that writes every field: a sampled one that stops before one is drawn again.

    The grammar lets a sampled reply write layout whitespace without end (measured: one of
    240 draws of the embedded 0.5B model ran into ``llm.max_tokens`` so), which a run's broker
    answers by asking again; here the account is drawn again with a seed derived from its own
    (at most ``MAX_REDRAWS`` times), so it is a draw conditional on reaching the fields, as a
    run's final reply is. The readout counts them (``ReplyDistributions.redrawn``). A greedy
    path that stops is an error: drawing it again writes the same.
    """
    for attempt in range(MAX_REDRAWS + 1):
        asked = request if attempt == 0 else replace(
            request, seed=child_seed(request.seed, "redraw", attempt))
        # the first account evaluates the prompt whole, what follows may reuse it
        reply = source.path(asked, reuse_prompt=settings.prompt_reuse
                            and (attempt > 0 or not first_account))
        if b"".join(t.text for t in reply.tokens) != reply.text.encode("utf-8"):
            raise ReadoutError(f"{source.name}: the reply's tokens do not spell its text")
        spans = string_spans(reply.text)
        if all(name in spans for name in fields) or request.temperature == 0.0:
            return asked, reply, spans
    raise ReadoutError(f"{source.name}: {MAX_REDRAWS + 1} draws of an account stopped before "
                       f"field {next(n for n in fields if n not in spans)} (is llm.max_tokens "
                       f"large enough?): {reply.text[-200:]!r}")


def _field(name: str, values: Sequence[str], along: Sequence[tuple[int, str, Node]],
           passes: int, sampled: bool, sampler: TokenSampler) -> FieldDistribution:
    """A field's distribution: along the one greedy path, or the mean over the accounts."""
    readings = tuple(
        AccountReading(seed, value,
                       tuple(root.distribution(sampler).get(v, 0.0) for v in values),
                       root.unread_share(sampler), root)
        for seed, value, root in along)
    mean = tuple(sum(r.probabilities[i] for r in readings) / len(readings)
                 for i in range(len(values)))
    _, value, root = along[0]
    return FieldDistribution(name, tuple(values), mean, value, root, passes,
                             readings if sampled else (), sampler)
