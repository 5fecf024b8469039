"""The model identity a validity card's key is built from (``validity.card.model_identity``)."""

from __future__ import annotations

from governed_broker.validity.card import model_identity


def test_whole_prompt_evaluation_is_part_of_the_identity_only_when_set(experiments) -> None:
    llm = ["decision.maker=llm", "llm.backend=embedded"]
    default = model_identity(experiments.config(llm))
    whole = model_identity(experiments.config([*llm, "llm.prompt_cache=false"]))
    assert "prompt_cache" not in default  # the keys of existing cards do not move
    assert whole == {**default, "prompt_cache": False}
