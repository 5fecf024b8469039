"""Mode ``raster``: homes get their grid cell's depth, year by year, on a tiny grid.

The grids (3 rows x 4 columns of 10 m cells, lower-left corner at 0, 0) are written by the
test; depths per calendar year are in ``GRIDS`` (first row = northernmost, -9999 = NODATA).
"""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.loader import hazard_with_paths
from governed_broker.runner import run_experiment
from governed_broker.sim.hazard import make_hazard

GRIDS = {
    2000: [[0.0, 0.5, -9999, 0.0], [1.0, 0.0, 0.0, 0.0], [2.0, 0.2, 0.0, 0.0]],
    2001: [[0.0, 0.0, -9999, 0.0], [0.0, 0.0, 0.0, 0.0], [0.3, 0.0, 0.0, 0.0]],
    2002: [[0.0, 0.7, -9999, 0.0], [1.5, 0.0, 0.0, 0.0], [2.5, 0.4, 0.0, 0.0]],
}
#: Homes (x, y) at cell centres: (row 2, col 0), (row 0, col 1), (row 1, col 3), (row 1, col 0).
HOMES = [(5.0, 5.0, "sfha"), (15.0, 25.0, "sfha"), (35.0, 15.0, "other"), (5.0, 15.0, "sfha")]
CELLS = [(2, 0), (0, 1), (1, 3), (1, 0)]
STATEMENT = {"sfha": {"annual_probability": 0.01, "median_depth_m": 0.6},
             "other": {"annual_probability": 0.002, "median_depth_m": 0.3}}


def write_grid(path: Path, rows: list[list[float]]) -> None:
    header = "ncols 4\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 10\nNODATA_value -9999\n"
    text = header + "\n".join(" ".join(f"{v:g}" for v in row) for row in rows) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


@pytest.fixture
def grid_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "grids"
    folder.mkdir()
    for year, rows in GRIDS.items():
        write_grid(folder / (f"depth{year}.asc" + (".gz" if year == 2001 else "")), rows)
    return folder


def grid_names() -> dict[int, str]:
    return {y: f"depth{y}.asc" + (".gz" if y == 2001 else "") for y in GRIDS}


def population_csv(tmp_path: Path, with_xy: bool = True) -> Path:
    lines = ["tenure,flood_zone,income_usd,savings_usd,structure_value_usd,contents_value_usd,"
             "elevated,insured,trust_insurance,trust_neighbours" + (",x,y" if with_xy else "")]
    for x, y, zone in HOMES:
        xy = f",{x},{y}" if with_xy else ""
        lines.append(f"owner,{zone},80000,50000,250000,100000,False,False,0.3,0.5{xy}")
    path = tmp_path / "homes.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def raster_data(experiments, grid_path: Path, population: Path, **raster) -> dict:
    data = experiments.data()
    data["years"] = 3
    data["population"] = {"source": "test homes", "file": str(population)}
    data["network"] = {"kind": "none"}
    data["hazard"] = {"source": "test grids; statement: test", "mode": "raster",
                      "zones": STATEMENT,
                      "raster": {"path": str(grid_path), "grids": grid_names(),
                                 "start_year": 2000, **raster}}
    data["insurance"]["mandatory_purchase"]["zones"] = ["sfha"]
    data["finance"]["aid"]["group_policy"]["zones"] = ["sfha"]
    data["insurance"]["preferred_risk"]["zones"] = ["other"]
    return data


def placed(experiments, grid_dir: Path, tmp_path: Path, placement: dict):
    """The raster hazard with 50 homes in zone sfha and 50 in other placed by ``placement``."""
    data = raster_data(experiments, grid_dir, population_csv(tmp_path, with_xy=False),
                       placement=placement)
    hazard = make_hazard(hazard_with_paths(experiments.config(data=data)),
                         ["other", "sfha"], 7, 3)
    hazard.place_households(np.array([1] * 50 + [0] * 50), None, None)
    return hazard


def test_homes_get_their_cells_depth_every_year(experiments, grid_dir, tmp_path) -> None:
    config = experiments.config(data=raster_data(experiments, grid_dir,
                                                 population_csv(tmp_path)))
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    agents = pd.read_csv(out / "agents_yearly.csv")
    for year, calendar in enumerate(sorted(GRIDS), start=1):
        rows = agents[agents["year"] == year].set_index("agent_id")
        expected = [GRIDS[calendar][r][c] for r, c in CELLS]
        np.testing.assert_allclose(rows.loc[[1, 2, 3, 4], "depth_m"], expected)
        assert rows.loc[[1, 2, 3, 4], "flooded"].tolist() == [d > 0 for d in expected]


def test_a_tar_archive_reads_as_the_directory(experiments, grid_dir, tmp_path) -> None:
    archive = tmp_path / "grids.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in grid_names().values():
            tar.add(grid_dir / name, arcname=name)
    pop = population_csv(tmp_path)
    hazards = [make_hazard(hazard_with_paths(experiments.config(
        data=raster_data(experiments, path, pop))), ["other", "sfha"], 1, 3)
        for path in (grid_dir, archive)]
    for year in sorted(GRIDS):
        np.testing.assert_array_equal(hazards[0].depths[year], hazards[1].depths[year])


def test_households_are_told_the_declared_chance_not_the_series(experiments, grid_dir,
                                                                 tmp_path) -> None:
    """The stated chance is the declared statement, whatever the grids hold."""
    data = raster_data(experiments, grid_dir, population_csv(tmp_path))
    hazard = make_hazard(hazard_with_paths(experiments.config(data=data)),
                         ["other", "sfha"], 1, 3)
    np.testing.assert_allclose(hazard.probability, [0.002, 0.01])
    np.testing.assert_allclose(hazard.typical_depth_m, [0.3, 0.6])
    write_grid(grid_dir / "depth2001.asc.gz", GRIDS[2000])  # a wetter future changes nothing
    again = make_hazard(hazard_with_paths(experiments.config(data=data)),
                        ["other", "sfha"], 1, 3)
    np.testing.assert_allclose(again.probability, hazard.probability)


def test_the_placement_rule_draws_cells_of_the_zone_class(experiments, grid_dir,
                                                          tmp_path) -> None:
    placement = {"source": "test rule",
                 "zones": {"sfha": {"wet_years_min": 2, "wet_years_max": 3},
                           "other": {"wet_years_min": 0, "wet_years_max": 0}}}
    hazard = placed(experiments, grid_dir, tmp_path, placement)
    wet = hazard.wet_years()
    assert set(wet[hazard.cells[:50]]) <= {2, 3} and set(wet[hazard.cells[50:]]) == {0}
    again = placed(experiments, grid_dir, tmp_path, placement)
    np.testing.assert_array_equal(again.cells, hazard.cells)  # seeded
    # wet in 2 or 3 years: (row 0, col 1), (row 1, col 0), (row 2, col 0), (row 2, col 1)
    assert set(hazard.cells[:50]) <= {1, 4, 8, 9}


def test_a_placement_share_puts_that_many_homes_on_the_class_and_the_rest_on_dry_cells(
        experiments, grid_dir, tmp_path) -> None:
    placement = {"source": "test rule",
                 "zones": {"sfha": {"wet_years_min": 2, "wet_years_max": 3, "share": 0.3},
                           "other": {"wet_years_min": 1, "wet_years_max": 3, "share": 0.0}}}
    hazard = placed(experiments, grid_dir, tmp_path, placement)
    wet = hazard.wet_years()
    sfha = wet[hazard.cells[:50]]
    assert (np.isin(sfha, [2, 3])).sum() == 15 and (sfha == 0).sum() == 35  # round(0.3 * 50)
    assert set(wet[hazard.cells[50:]]) == {0}


def test_a_placement_share_below_one_needs_a_class_that_excludes_dry_cells(
        experiments, grid_dir, tmp_path) -> None:
    placement = {"source": "s", "zones": {"sfha": {"wet_years_min": 0, "wet_years_max": 3,
                                                   "share": 0.5}}}
    data = raster_data(experiments, grid_dir, population_csv(tmp_path, with_xy=False),
                       placement=placement)
    with pytest.raises(ConfigError, match="needs wet_years_min >= 1"):
        experiments.config(data=data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d, p: d["hazard"]["raster"].update(path=str(p / "nowhere.tar.gz")),
         "not found.*fetch the archive named in the experiment's hazard.source"),
        (lambda d, p: d.update(years=4), r"no grid for calendar year\(s\) \[2003\]"),
        (lambda d, p: d["hazard"].pop("zones"), "declared annual chance"),
        (lambda d, p: d["hazard"]["raster"].update(
            placement={"source": "s", "zones": {"sfha": {"wet_years_min": 0,
                                                         "wet_years_max": 1}}}),
         "coordinates or a placement rule, not both"),
        (lambda d, p: d["hazard"]["raster"]["grids"].update({2002: "depth2000.asc"}),
         "stand for more than one year"),
    ],
)
def test_bad_raster_settings_are_configuration_errors(experiments, grid_dir, tmp_path,
                                                      change, message) -> None:
    data = raster_data(experiments, grid_dir, population_csv(tmp_path))
    change(data, tmp_path)
    with pytest.raises(ConfigError, match=message):
        experiments.config(data=data)


def test_a_home_outside_the_modelled_area_is_named(experiments, grid_dir, tmp_path) -> None:
    pop = population_csv(tmp_path)
    pop.write_text(pop.read_text().replace("35.0,15.0", "25.0,25.0"))  # the NODATA cell
    config = experiments.config(data=raster_data(experiments, grid_dir, pop))
    with pytest.raises(ConfigError, match="household 3 at x=25, y=25 is outside"):
        run_experiment(config, tmp_path / "run", progress=False)


@pytest.fixture
def no_hang():
    """Fail, rather than hang, a test whose code under test blocks (reading a FIFO)."""
    import signal

    def alarm(*_):
        raise TimeoutError("the code under test blocked for 20 s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "grid fifo"])
def test_a_raster_path_that_is_no_regular_file_is_refused_at_once(
        experiments, grid_dir, tmp_path, no_hang, kind) -> None:
    import os

    path = grid_dir
    if kind == "fifo":
        path = tmp_path / "grids.tar.gz"
        os.mkfifo(path)
    elif kind == "/dev/zero":
        path = Path("/dev/zero")
    else:
        (grid_dir / "depth2002.asc").unlink()
        os.mkfifo(grid_dir / "depth2002.asc")
    data = raster_data(experiments, path, population_csv(tmp_path))
    with pytest.raises(ConfigError, match="not a regular file"):
        experiments.config(data=data)


@pytest.mark.parametrize("cell, message", [
    ("nan", r"row 2, column 3 is NaN"), ("inf", r"row 2, column 3 is not finite"),
    ("-0.5", r"row 2, column 3 is -0.5"), ("1e400", r"row 2, column 3 is not finite")])
def test_a_grid_value_that_is_no_depth_is_named_by_its_cell(experiments, grid_dir, tmp_path,
                                                            cell, message) -> None:
    path = grid_dir / "depth2000.asc"
    path.write_text(path.read_text().replace("1 0 0 0", f"1 0 {cell} 0"))
    config = experiments.config(data=raster_data(experiments, grid_dir, population_csv(tmp_path)))
    with pytest.raises(ConfigError, match=f"depth2000.asc.*{message}"):
        run_experiment(config, tmp_path / "run", progress=False)


def test_nan_cells_are_nodata_only_when_the_grid_declares_nan_its_nodata(
        experiments, grid_dir, tmp_path) -> None:
    from governed_broker.config.grids import parse_depths

    for name in grid_names().values():
        path = grid_dir / name
        if name.endswith(".gz"):
            text = gzip.decompress(path.read_bytes()).decode()
            path.write_bytes(gzip.compress(text.replace("-9999", "nan").encode()))
        else:
            path.write_text(path.read_text().replace("-9999", "nan"))
    _, grid = parse_depths((grid_dir / "depth2000.asc").read_text(), "t")
    assert np.isnan(grid[0, 2]) and np.isnan(grid).sum() == 1
    config = experiments.config(data=raster_data(experiments, grid_dir, population_csv(tmp_path)))
    assert run_experiment(config, tmp_path / "run", progress=False).n_agent_rows == 12


@pytest.mark.parametrize("suffix, cut", [("tar.gz", 0.1), ("tar.gz", 0.5), ("tar.gz", -30),
                                        ("tar.gz", -8),  # every member and the marker there
                                        ("tar", 2048)])  # after its second member
def test_a_truncated_archive_is_named_as_such(experiments, grid_dir, tmp_path, suffix,
                                              cut) -> None:
    big = {y: [[0.25 * ((r * 7 + c * 3 + y) % 9) for c in range(4)] for r in range(3)]
           for y in GRIDS}
    for year, rows in big.items():
        write_grid(grid_dir / grid_names()[year], rows)
    archive = tmp_path / f"grids.{suffix}"
    with tarfile.open(archive, "w:gz" if suffix == "tar.gz" else "w") as tar:
        for name in grid_names().values():
            tar.add(grid_dir / name, arcname=name)
    data = archive.read_bytes()
    archive.write_bytes(data[: int(len(data) * cut) if 0 < cut < 1 else cut])
    config_data = raster_data(experiments, archive, population_csv(tmp_path))
    with pytest.raises(ConfigError) as info:
        experiments.config(data=config_data)
    message = str(info.value)
    assert "hazard.raster" in message and str(archive) in message
    assert "truncated or corrupt" in message and "fetch it again" in message
    assert "could not be opened successfully" not in message and len(message) < 900


TOKENS = ("nan", "NaN", "inf", "-inf", "-1", "1e400", "21", "x", "", "\x00", "0x10", "1,5",
          "-9999", "0.5", "1e-300")


def test_fuzzed_grids_and_archives_are_read_or_refused(grid_dir, tmp_path, no_hang) -> None:
    """Grids with hostile cells and headers, archives cut short or with bytes flipped.

    Each is read into finite depths in range (NODATA as NaN) or refused with a ConfigError.
    ``GOVERNED_BROKER_FUZZ_N`` sets the number of cases (fuzz harder by hand).
    """
    import os
    import random
    import signal

    from governed_broker.config.grids import load_depth_series
    from governed_broker.config.raster import RasterConfig
    from governed_broker.config.world import MAX_DEPTH_M

    rng = random.Random(40)
    names = grid_names()
    plain = {y: (grid_dir / names[y]).read_bytes() for y in GRIDS}
    outcomes = {"read": 0, "refused": 0}
    for i in range(int(os.environ.get("GOVERNED_BROKER_FUZZ_N", "150"))):
        signal.alarm(20)  # no_hang: 20 s per case
        folder = tmp_path / f"f{i}"
        folder.mkdir()
        for year, data in plain.items():
            text = (gzip.decompress(data) if names[year].endswith(".gz") else data).decode()
            lines = text.split("\n")
            if rng.random() < 0.5:  # a hostile cell or header value
                row = rng.randrange(len(lines) - 1)
                parts = lines[row].split(" ")
                parts[rng.randrange(len(parts))] = rng.choice(TOKENS)
                lines[row] = " ".join(parts)
            body = "\n".join(lines).encode()
            write = gzip.compress(body) if names[year].endswith(".gz") else body
            (folder / names[year]).write_bytes(write)
        path: Path = folder
        if rng.random() < 0.5:
            compression = rng.choice(["", "gz", "xz", "bz2"])
            path = tmp_path / (f"a{i}.tar" + (f".{compression}" if compression else ""))
            with tarfile.open(path, f"w:{compression}") as tar:
                for name in names.values():
                    tar.add(folder / name, arcname=name)
            data = bytearray(path.read_bytes())
            if rng.random() < 0.4:
                data = data[: rng.randrange(len(data))]
            elif rng.random() < 0.5:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            path.write_bytes(bytes(data))
        raster = RasterConfig(path=path, grids=names, start_year=2000)
        try:
            _, grids = load_depth_series(raster, path)
        except ConfigError as exc:
            outcomes["refused"] += 1
            assert len(str(exc)) < 1500
            continue
        outcomes["read"] += 1
        for grid in grids.values():
            valid = grid[~np.isnan(grid)]
            assert ((valid >= 0) & (valid <= MAX_DEPTH_M)).all()
    assert outcomes["read"] > 10 and outcomes["refused"] > 50, outcomes
