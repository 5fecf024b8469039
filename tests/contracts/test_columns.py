"""The output column table: one declaration per column, used by the writer and the readers."""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.analysis.schema import AGENT_COLUMNS, NULLABLE_AGENT_COLUMNS, model_columns
from governed_broker.contracts.columns import AGENT_YEARLY, MODEL_YEARLY_FIXED, names
from governed_broker.contracts.columns import model_columns as model_column_table
from governed_broker.sim.csvout import format_rows


@pytest.mark.parametrize("table", [AGENT_YEARLY, MODEL_YEARLY_FIXED])
def test_names_are_unique_and_every_float_has_decimals(table) -> None:
    assert len(set(names(table))) == len(table)
    for column in table:
        assert column.meaning and column.unit
        assert (column.kind == "float") <= (column.decimals is not None), column.name


def test_per_action_counts_sit_between_the_fixed_columns() -> None:
    cols = names(model_column_table(["stay", "insure_it"]))
    assert cols[cols.index("mean_depth_flooded_m") + 1:cols.index("n_rejected")] == (
        "n_stay", "n_insure_it")


def test_readers_take_dtypes_and_nullability_from_the_table() -> None:
    assert list(AGENT_COLUMNS) == list(names(AGENT_YEARLY))
    assert NULLABLE_AGENT_COLUMNS == {c.name for c in AGENT_YEARLY if c.nullable}
    assert model_columns(["stay"])["n_stay"] == "Int64"


def test_writer_uses_declared_decimals_and_refuses_undeclared_floats() -> None:
    text = format_rows(["damage_usd", "depth_m", "share_insured"],
                       {"damage_usd": np.array([1234.5]), "depth_m": np.array([0.123456]),
                        "share_insured": np.array([1 / 3])})
    assert text == "1234.50,0.1235,0.333333\n"
    with pytest.raises(ValueError, match="contracts/columns.py"):
        format_rows(["undeclared_ratio"], {"undeclared_ratio": np.array([0.5])})
