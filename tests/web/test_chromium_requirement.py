"""Whether the browser tests run (conftest.chromium_or_skip): with a Chromium they run; without one
they skip with a one-line reason, except under CI=true, where they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import conftest


def test_without_chromium_the_browser_tests_skip_with_one_line(monkeypatch):
    monkeypatch.setattr(conftest, "find_chromium", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as exc:
        conftest.chromium_or_skip()
    assert str(exc.value.msg).startswith("no Chromium found (") and "\n" not in str(exc.value.msg)


@pytest.mark.parametrize("value", ["true", "True", "1"])
def test_under_ci_a_missing_chromium_fails(monkeypatch, value):
    monkeypatch.setattr(conftest, "find_chromium", lambda: None)
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception) as exc:
        conftest.chromium_or_skip()
    assert "CI=true requires the browser tests to run" in str(exc.value.msg)


def test_a_chromium_named_by_the_environment_is_used(monkeypatch, tmp_path):
    exe = tmp_path / "chrome"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("GPUPLAN_CHROMIUM", str(exe))
    assert conftest.find_chromium() == exe
    monkeypatch.setenv("GPUPLAN_CHROMIUM", str(tmp_path / "missing"))
    assert conftest.find_chromium() != tmp_path / "missing"


def test_ci_run_sets_ci_and_installs_chromium():
    text = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "export CI=true" in text and "apt-get install -y -qq chromium" in text
