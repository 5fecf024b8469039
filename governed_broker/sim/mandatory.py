"""The mandatory purchase requirement: who must hold flood insurance, and what that does to the
price of each choice (``config.world.MandatoryPurchaseConfig``).

A household whose lender enforces the requirement is insured every year it stays: when its own
choice does not insure, the lender renews the policy and charges the premium. The choice is
priced that way (``effect`` with ``insure`` added: cost and premium with the policy, the loss of
a typical flood insured), so the decision makers see what each choice really costs; where the
household cannot pay the premium on top of its choice, the choice stays as it is and the
policy lapses.
"""

from __future__ import annotations

import numpy as np

from governed_broker.config.world import MandatoryPurchaseConfig
from governed_broker.contracts.effects import COMBINE, NO_EFFECT, effect_names, traits_of
from governed_broker.seeding import child_rng

#: The effect the lender adds to a choice that does not insure.
INSURE = "insure"


def draw_required(config: MandatoryPurchaseConfig | None, zone: np.ndarray, is_owner: np.ndarray,
                  seed: int) -> np.ndarray:
    """Households whose lender enforces the requirement (drawn once from the run's seed).

    Two uniform draws per household, in agent-id order (whatever its zone or tenure, so the
    draws do not depend on the population's make-up): a mortgage that requires insurance when
    the first is below ``mortgage_share``, enforced when the second is below
    ``compliance_share``.

    Args:
        config: The requirement (None: nobody is required to insure).
        zone: Zone name per household.
        is_owner: Owner (True) or renter per household.
        seed: The experiment seed.
    """
    n = len(zone)
    if config is None:
        return np.zeros(n, dtype=bool)
    draws = child_rng(seed, "mandatory_purchase").random((n, 2))
    in_zones = np.isin(np.asarray(zone, dtype=object), config.zones)
    return (in_zones & np.asarray(is_owner, dtype=bool) & (draws[:, 0] < config.mortgage_share)
            & (draws[:, 1] < config.compliance_share))


def lender_adds_insurance(effect: str) -> bool:
    """Whether the lender would add a policy to a choice of this effect (it neither insures nor
    leaves)."""
    traits = traits_of(effect)
    return not traits.insures and not traits.leaves


def with_insurance(effect: str) -> str:
    """The effect with the lender's policy added (``none`` -> ``insure``, ``elevate`` ->
    ``elevate+insure``)."""
    parts = [p for p in effect_names(effect) if p != NO_EFFECT]
    return COMBINE.join([*parts, INSURE])
