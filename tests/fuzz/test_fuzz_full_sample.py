"""A small fixed sample of the full fuzz run (benchmarks/fuzz_run.py, issue 28), with its oracle:
forked children under a 3 GiB address-space limit and a time limit; exit 0 or 2; exit 2 one line
(or the JSON error object); no traceback, no internal error; non-finite numbers as `null`; no
silent acceptance of input outside an option's documented range; an output path that is not a
regular file never replaced. Plus the web part: malformed requests all get a 4xx naming the field.

The sample: every command's base invocation (table and JSON modes), and a seeded draw of option,
`--set`, path, crafted-file and web cases; and each cause the full run found, as its own case.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import fuzz_run  # noqa: E402
from full_cases import all_cases, command_tree  # noqa: E402

#: causes the full run found that need no file, each fixed at its source (the case as the run drew it);
#: the others are in test_fuzz_found_causes.py
FOUND = [
    {"kind": "found formats compare --tensor with --random", "args": ["formats", "compare", "--random", "normal:256",
                                                                      "--tensor", "a\nb", "--json"], "invalid": True},
    {"kind": "found --random past the cap", "args": ["formats", "compare", "--random", "normal:268435456"],
     "invalid": True},
    {"kind": "found price 0", "args": ["train", "gpt3-125m", "--gpus", "8", "--usd-per-gpu-hour", "0"], "invalid": True},
]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    rng = random.Random(28)
    cases = all_cases(tmp, rng, per_option=1, n_set=20, n_files=40)
    base = [c for i, c in enumerate(c for c in cases if c["kind"].startswith("base ")) if i % 4 in (0, 3)]  # one mode each, alternating
    rest = [c for c in cases if not c["kind"].startswith(("base ", "huge", "deep", "option bench", "path out --out",
                                                          "path out --profile", "web serves"))]
    drawn = random.Random(0).sample(rest, 40)
    return tmp, base + drawn


def test_the_sample_reaches_every_command(sample):
    _, cases = sample
    for path in command_tree():
        assert any(c["args"][:len(path)] == list(path) for c in cases), path


def test_the_sample_passes_the_oracle(sample):
    tmp, cases = sample
    results = fuzz_run.run_all(cases + FOUND, workers=2, timeout=120, tmp=tmp, progress=False)
    failures = [f"{r['failure']}: {r['cause']} (gpuplan {' '.join(r['args'])[:200]})" for r in results if r["failure"]]
    assert not failures, "\n".join(failures)


def test_malformed_web_requests_get_a_4xx_naming_the_field():
    import fuzz_web

    counts = fuzz_web.run_web(150, random.Random(0))
    assert counts["requests"] == 150
    assert counts.get("4xx_naming_the_field", 0) == 150, counts["causes"].most_common(10)
