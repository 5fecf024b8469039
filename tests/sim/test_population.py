"""Population generation and CSV populations."""

from __future__ import annotations

import numpy as np

from governed_broker.config import load_experiment
from governed_broker.sim.population import Population, generate_population, load_population


def test_generated_population_follows_the_distributions(repo_root) -> None:
    config = load_experiment(repo_root / "experiments" / "baseline.yaml")
    pop = generate_population(config.population.generate, 20_000, seed=3)
    assert abs(pop.is_owner.mean() - 0.74) < 0.02
    assert abs((pop.zone == "high").mean() - 0.3) < 0.02
    owners = pop.is_owner
    assert abs(np.median(np.log(pop.structure_value_usd[owners])) - 12.46) < 0.03
    assert np.all(pop.structure_value_usd[~owners] == 0)
    np.testing.assert_allclose(pop.contents_value_usd[owners],
                               0.57 * pop.structure_value_usd[owners])
    # renters' belongings have their own distribution (median about $25,000)
    assert abs(np.median(np.log(pop.contents_value_usd[~owners])) - 10.13) < 0.03
    high_owner = (pop.zone == "high") & owners
    assert abs(pop.insured[high_owner].mean() - 0.474) < 0.03
    assert not pop.elevated[~pop.is_owner].any()
    assert np.all((pop.trust_insurance >= 0.2) & (pop.trust_insurance <= 0.49))


def test_income_follows_tenure(repo_root) -> None:
    gen = load_experiment(repo_root / "experiments" / "baseline.yaml").population.generate
    pop = generate_population(gen, 20_000, seed=5)
    owners = pop.is_owner
    # owners' median $78,000, renters' $41,000 (experiments/baseline.yaml)
    assert abs(np.median(np.log(pop.income_usd[owners])) - 11.264) < 0.03
    assert abs(np.median(np.log(pop.income_usd[~owners])) - 10.621) < 0.05
    assert abs(np.std(np.log(pop.income_usd[~owners])) - 0.8) < 0.03


def test_renters_income_moves_only_renters_incomes(repo_root) -> None:
    """With or without renters' own distribution.

    Owners' incomes and every draw after income are the same: one draw per household either way, so
    the option changes renters' incomes (and savings) only.
    """
    gen = load_experiment(repo_root / "experiments" / "baseline.yaml").population.generate
    blind = generate_population(gen.model_copy(update={"renter_income_usd": None}), 500, seed=9)
    split = generate_population(gen, 500, seed=9)
    owners = blind.is_owner
    assert np.array_equal(owners, split.is_owner)
    np.testing.assert_array_equal(blind.income_usd[owners], split.income_usd[owners])
    assert np.all(split.income_usd[~owners] < blind.income_usd[~owners])
    np.testing.assert_array_equal(blind.structure_value_usd, split.structure_value_usd)
    np.testing.assert_array_equal(blind.trust_insurance, split.trust_insurance)


def test_generation_is_seeded(repo_root) -> None:
    gen = load_experiment(repo_root / "experiments" / "baseline.yaml").population.generate
    a, b, c = (generate_population(gen, 100, s) for s in (1, 1, 2))
    assert np.array_equal(a.income_usd, b.income_usd)
    assert not np.array_equal(a.income_usd, c.income_usd)


def population_to_csv_text(pop: Population, comment: str) -> str:
    """Render a population as a CSV (with ``#`` comment lines) readable by ``load_population``."""
    lines = [f"# {line}" for line in comment.splitlines()]
    lines.append(
        "tenure,flood_zone,income_usd,savings_usd,structure_value_usd,contents_value_usd,"
        "elevated,insured,trust_insurance,trust_neighbours"
    )
    for i in range(pop.size):
        lines.append(
            f"{'owner' if pop.is_owner[i] else 'renter'},{pop.zone[i]},{pop.income_usd[i]:.2f},"
            f"{pop.savings_usd[i]:.2f},{pop.structure_value_usd[i]:.2f},"
            f"{pop.contents_value_usd[i]:.2f},{bool(pop.elevated[i])},{bool(pop.insured[i])},"
            f"{pop.trust_insurance[i]:.4f},{pop.trust_neighbours[i]:.4f}"
        )
    return "\n".join(lines) + "\n"


def test_csv_round_trip(experiments, repo_root) -> None:
    gen = load_experiment(repo_root / "experiments" / "baseline.yaml").population.generate
    pop = generate_population(gen, 30, seed=4)
    (experiments.tmp_path / "pop.csv").write_text(population_to_csv_text(pop, "synthetic test"))
    data = experiments.data()
    data["population"] = {"source": "test", "file": "pop.csv"}
    config = experiments.config(data=data)
    loaded = load_population(config.population, config.seed, config.resolve_path)
    np.testing.assert_allclose(loaded.income_usd, np.round(pop.income_usd, 2))
    assert loaded.zone.tolist() == pop.zone.tolist()
    assert np.array_equal(loaded.insured, pop.insured)


def test_committed_synthetic_population_loads(repo_root) -> None:
    path = repo_root / "configs" / "populations" / "synthetic_100.csv"
    assert path.read_text().startswith("# SYNTHETIC")
    from governed_broker.config.loader import read_population_csv

    assert len(read_population_csv(path)) == 100
