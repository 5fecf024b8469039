"""HTML report and the `report` sub-command on the committed sample outputs."""

from __future__ import annotations

import argparse
import base64
import io
import re
from pathlib import Path

import matplotlib.image as mpimg
import pytest

from governed_broker.analysis.cli import register
from governed_broker.analysis.report import write_report
from governed_broker.analysis.version import METRIC_VERSION


def _images(text: str) -> list[tuple[str, bytes]]:
    found = re.findall(r'alt="([^"]*)" src="data:image/png;base64,([^"]+)"', text)
    return [(alt, base64.b64decode(data)) for alt, data in found]


def test_run_report_is_self_contained(fixtures_dir: Path, tmp_path: Path):
    out = write_report(fixtures_dir / "baseline_run", tmp_path / "r.html")
    text = out.read_text(encoding="utf-8")
    assert METRIC_VERSION in text
    assert "benchmarks-3.0" in text and "not computable" in text  # B6 needs MG/NMG data
    assert "config_hash" in text  # the manifest is embedded
    # the MG-NMG gap with its within-tenure and composition parts (analysis.equity)
    section = text.split("<h2>Marginalised households (B6)</h2>")[1].split("<h2>")[0]
    assert all(f"<td>{group}</td>" in section for group in ("all", "within", "composition"))
    assert not re.search(r'src="(?!data:)', text)  # no external resources
    images = _images(text)
    assert [alt for alt, _ in images] == [
        "adaptation trajectories", "losses by year", "TP/CP labels", "governance workload"
    ]
    for _, png in images:
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        pixels = mpimg.imread(io.BytesIO(png), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400
        assert pixels[..., :3].std() > 0.05  # not a blank canvas


def test_figures_link_to_the_explorer_views_it_serves(fixtures_dir: Path, tmp_path: Path):
    from governed_broker.analysis.report import EXPLORER_URL

    text = write_report(fixtures_dir / "scripted_broker_run", tmp_path / "r.html").read_text()
    links = re.findall(r'<a href="([^"]+)">Explore', text)
    assert len(links) == 5 and all(link.startswith(EXPLORER_URL + "?") for link in links)
    assert EXPLORER_URL + "?tab=decisions&amp;status=rejected" in links
    assert "governed-broker explore " in text  # how to start it


def test_sweep_report(fixtures_dir: Path, tmp_path: Path):
    out = write_report(fixtures_dir / "sensitivity_sweep", tmp_path / "s.html")
    text = out.read_text(encoding="utf-8")
    alts = [alt for alt, _ in _images(text)]
    assert "insured share" in alts and "Sobol final_share_insured" in alts
    assert "param.elevation.subsidy_share" in text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="governed-broker")
    register(parser.add_subparsers(dest="command"))
    return parser


def test_cli_writes_report(fixtures_dir: Path, tmp_path: Path, capsys):
    target = tmp_path / "out" / "report.html"
    args = _parser().parse_args(
        ["report", str(fixtures_dir / "ablation" / "baseline" / "seed_15"), "--out", str(target)]
    )
    assert args.func(args) == 0
    assert target.is_file() and str(target) in capsys.readouterr().out


def test_cli_bad_directory_exit_2(tmp_path: Path, capsys):
    (tmp_path / "run").mkdir()
    args = _parser().parse_args(["report", str(tmp_path / "run")])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "agents_yearly.csv" in err and "file not found" in err
    assert not (tmp_path / "run" / "report.html").exists()


def test_cli_requires_directory():
    with pytest.raises(SystemExit):
        _parser().parse_args(["report"])


@pytest.mark.parametrize("where", ["directory", "/proc/governed-broker-report.html"])
def test_cli_report_out_where_no_file_can_be_written_is_exit_2(fixtures_dir: Path,
                                                                tmp_path: Path, capsys, where):
    target = tmp_path if where == "directory" else Path(where)
    args = _parser().parse_args(
        ["report", str(fixtures_dir / "baseline_run"), "--out", str(target)])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert f"--out {target}" in err and "not expected" not in err and len(err) < 400
