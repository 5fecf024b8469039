"""The three analysis notebooks run top to bottom on the committed fixtures.

The kernel is the Python running the tests: a kernel spec pointing at ``sys.executable`` is
written to a temporary directory at test time and used through its own spec manager, so the
test works in a fresh virtual environment and ignores kernels installed elsewhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

try:  # a missing package is a failure, not a skip: the notebooks must run in CI
    import ipykernel  # noqa: F401
    import nbclient
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"{exc}: the notebook tests need nbclient, nbformat and ipykernel "
        "(dev extra: pip install -e '.[dev]')"
    ) from exc

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
KERNEL_NAME = "governed-broker-test"


@pytest.fixture(scope="module")
def kernel_dirs(tmp_path_factory) -> Path:
    from ipykernel.kernelspec import write_kernel_spec

    root = tmp_path_factory.mktemp("kernels")
    write_kernel_spec(path=str(root / KERNEL_NAME),
                      overrides={"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                                          "{connection_file}"],
                                 "display_name": "governed-broker test kernel"})
    return root


@pytest.mark.parametrize(
    "name", ["01_single_run.ipynb", "02_ablation_groups.ipynb", "03_sensitivity.ipynb"]
)
def test_notebook_runs(name: str, kernel_dirs: Path):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    specs = KernelSpecManager(kernel_dirs=[str(kernel_dirs)])
    manager = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    client = nbclient.NotebookClient(
        notebook, km=manager, timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute()
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
    images = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert images, f"{name} produced no figure"
