"""What an action's ``effect`` means, declared once for the whole package (ground floor).

Every action of ``agent_types.yaml`` names one effect. The effect, not the action id, decides
what the world executes (``governed_broker.sim.effects`` prices and applies it), how the
baseline decision maker weighs it and how a household remembers it. The traits below are the
shared vocabulary; a new effect is one entry here plus its pricing in ``sim/effects.py``.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    """

    name: str
    protective: bool = False
    one_off: bool = False
    insures: bool = False
    elevates: bool = False
    leaves: bool = False


#: The effect of the default action: nothing changes.
NO_EFFECT = "none"

#: Every effect the world knows, by name.
EFFECTS: dict[str, EffectTraits] = {t.name: t for t in (
    EffectTraits(NO_EFFECT),
    EffectTraits("insure", protective=True, insures=True),
    EffectTraits("elevate", protective=True, one_off=True, elevates=True),
    EffectTraits("relocate", protective=True, one_off=True, leaves=True),
)}
