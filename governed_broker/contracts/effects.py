"""What an action's ``effect`` means, declared once for the whole package (ground floor).

Every action of ``agent_types.yaml`` names one effect. The effect, not the action id, decides
what the world executes (``governed_broker.sim.effects`` prices and applies it), how the
baseline decision maker weighs it and how a household remembers it. The traits below are the
shared vocabulary; a new effect is one entry here plus its pricing in ``sim/effects.py``.

An action may combine effects, written ``elevate+insure`` (elevate the home and buy or renew
the policy in the same year): its traits are those of its parts together (``traits_of``), the
world sums their costs and judges the loss with all of them in place. Doing nothing (``none``)
and leaving (an effect that ``leaves``) combine with nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class EffectTraits:
    """The categorical meaning of one effect.

    Attributes:
        name: The effect's name as written in ``agent_types.yaml``.
        protective: Lowers or removes the household's loss from a future flood (a measure,
            as opposed to doing nothing).
        one_off: A lasting change paid once (the baseline annualises its cost over its
            horizon); insurance, by contrast, is paid every year it is held.
        insures: Buys a policy for next year's flood; the cost is a premium, and the policy
            lapses unless an insuring action is chosen again the next year.
        elevates: Raises the home by ``elevation.height_m`` for good.
        leaves: The household leaves the area and is inactive from then on.
        bought_out: The home is sold to the buyout programme (only open to an owner the
            programme made an offer to this year; the household leaves).
    """

    name: str
    protective: bool = False
    one_off: bool = False
    insures: bool = False
    elevates: bool = False
    leaves: bool = False
    bought_out: bool = False


#: The effect of the default action: nothing changes.
NO_EFFECT = "none"

#: Every effect the world knows, by name.
EFFECTS: dict[str, EffectTraits] = {t.name: t for t in (
    EffectTraits(NO_EFFECT),
    EffectTraits("insure", protective=True, insures=True),
    EffectTraits("elevate", protective=True, one_off=True, elevates=True),
    EffectTraits("relocate", protective=True, one_off=True, leaves=True),
    EffectTraits("buyout", protective=True, one_off=True, leaves=True, bought_out=True),
)}

#: How the parts of a combined effect are joined (``elevate+insure``).
COMBINE = "+"


def effect_names(effect: str) -> tuple[str, ...]:
    """The parts of an effect as written (``"elevate+insure"`` -> ``("elevate", "insure")``)."""
    return tuple(part.strip() for part in effect.split(COMBINE))


def check_effect(effect: str) -> None:
    """Raise ``ValueError`` unless ``effect`` is a known effect or a valid combination."""
    parts = effect_names(effect)
    unknown = [p for p in parts if p not in EFFECTS]
    if unknown:
        raise ValueError(f"unknown effect {unknown[0][:40]!r}; known: {', '.join(EFFECTS)} "
                         f"(combine with '{COMBINE}', e.g. 'elevate{COMBINE}insure')")
    if len(parts) > 1:
        if len(set(parts)) != len(parts):
            raise ValueError(f"effect {effect[:80]!r} names a part twice")
        alone = [p for p in parts if p == NO_EFFECT or EFFECTS[p].leaves]
        if alone:
            raise ValueError(f"effect {effect[:80]!r}: {alone[0]!r} cannot be combined with "
                             "another effect (doing nothing and leaving exclude everything else)")


@cache
def traits_of(effect: str) -> EffectTraits:
    """The traits of an effect or a combination (a trait holds if any part has it)."""
    check_effect(effect)
    parts = [EFFECTS[p] for p in effect_names(effect)]
    return EffectTraits(effect, **{
        trait: any(getattr(p, trait) for p in parts)
        for trait in ("protective", "one_off", "insures", "elevates", "leaves", "bought_out")})
