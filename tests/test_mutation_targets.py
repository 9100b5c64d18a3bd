"""``make mutate`` (tools/mutation.py): its targets point at real code and tests, and the
driver leaves the package unimported until mutmut has put its mutated copy first.

A driver that imported gagpo at start-up (through a helper module) once made every target
report "no test case for any mutant": the tests ran the checkout's code, not the mutants'."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.mutation import TARGETS, _module

ROOT = Path(__file__).resolve().parent.parent


def test_the_driver_imports_no_gagpo_before_mutmut_runs():
    probe = ("import sys, tools.mutation; "
             "print(sorted(m for m in sys.modules if m == 'gagpo' or m.startswith('gagpo.')))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_every_target_names_files_tests_and_functions_that_exist(target):
    for f in target.files:
        assert (ROOT / f).is_file(), f
    for t in (*target.tests, *target.subprocess_tests):
        if t.startswith("-") or not t.startswith("tests/"):
            continue  # pytest options and -k expressions
        path, _, test = t.partition("::")
        assert (ROOT / path).is_file(), t
        if test:
            assert f"def {test.split('[')[0]}(" in (ROOT / path).read_text(), t
    modules = {_module(f) for f in target.files}
    for key in target.functions:
        module, _, name = key.rpartition(".x_") if ".x_" in key else key.rpartition(".xǁ")
        assert module in modules, key
        source = "\n".join((ROOT / f).read_text() for f in target.files
                           if _module(f) == module)
        bare = name.split("ǁ")[-1] if "ǁ" in name else name
        assert f"def {bare}(" in source, key
