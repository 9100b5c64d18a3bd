"""The installed names: one import namespace, ``gagpo.*``, that cannot collide with other
distributions (``openai-agents`` owns ``agents``, the ``envs`` package owns ``envs``).

The repository keeps a top-level folder per layer (envs/, agents/, servers/, and common/ that
they share, beside gagpo/);
pyproject maps them under ``gagpo``. The slow test builds the wheel and installs it into a
fresh virtual environment beside both of those distributions, and plays both envs and
``gagpo eval`` there, outside the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import gagpo.envs  # noqa: F401  (registers the environments)

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"gagpo": "gagpo", "gagpo.envs": "envs", "gagpo.agents": "agents",
          "gagpo.servers": "servers", "gagpo.common": "common"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_folders() -> set[str]:
    """Every folder with an ``__init__.py`` under the layers' folders, as its import name."""
    names = set()
    for name, folder in LAYERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(ROOT / folder).parts
            names.add(".".join((name, *rel)))
    return names


def test_pyproject_lists_every_package_folder_under_gagpo():
    tool = _pyproject()["tool"]["setuptools"]
    assert tool["package-dir"] == LAYERS
    # A sub-package missing from the list would be left out of the wheel without a word; the
    # data folders (templates, static files) are listed too, each with its package data.
    assert set(tool["packages"]) == _package_folders() | set(tool["package-data"])


def test_each_name_imports_from_the_module_that_defines_it():
    """No "moved to" modules: the OpenEnv and TRL integrations import from gagpo.integrations
    only, the log-probs from gagpo.logprobs and the micro-batches from gagpo.batching (not
    through gagpo.losses)."""
    import importlib.util

    from gagpo import losses

    for gone in ("gagpo.trl_envs", "gagpo.openenv_client", "gagpo.openenv_server"):
        assert importlib.util.find_spec(gone) is None, gone
    for name in ("reply_logprobs", "pad_batch", "pack_replies", "right_align", "micro_batches",
                 "packed_micro_batches"):
        assert not hasattr(losses, name) and name not in losses.__all__, name


def test_the_layers_import_as_gagpo_subpackages_from_their_folders():
    import gagpo.agents.parser
    import gagpo.common.cache
    import gagpo.servers.webshop.web.app

    assert Path(gagpo.envs.__file__) == ROOT / "envs" / "__init__.py"
    assert Path(gagpo.agents.parser.__file__) == ROOT / "agents" / "parser.py"
    assert Path(gagpo.common.cache.__file__) == ROOT / "common" / "cache.py"
    assert Path(gagpo.servers.webshop.web.app.__file__) == (
        ROOT / "servers" / "webshop" / "web" / "app.py")
    spec = gym.spec("WebShop-v0")
    assert spec.entry_point == "gagpo.envs.webshop.env:WebShopEnv"
    # No module of the project was loaded under a top-level layer name as well (it would run
    # twice, with two copies of every registry and cache).
    assert not [m for m in sys.modules if m.split(".")[0] in ("envs", "agents", "servers", "common")
                and getattr(sys.modules[m], "__file__", "") and
                str(ROOT) in str(sys.modules[m].__file__)]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


PROBE = """
import json, sys
import agents, envs                       # openai-agents' and the envs package's own
import gymnasium as gym
import gagpo, gagpo.envs
out = {"gagpo": gagpo.__file__, "agents": hasattr(agents, "Runner") and agents.__file__,
       "envs": hasattr(envs, "Env") and envs.__file__}
for env_id in ("WebShop-v0", "ALFWorld-v0"):
    env = gym.make(env_id)
    obs, info = env.reset(options={"task": 0})
    obs, reward, terminated, truncated, info = env.step(info["admissible_actions"][0])
    out[env_id] = [type(env.unwrapped).__module__, len(obs) > 0, bool(info["admissible_actions"])]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_wheel_installs_beside_openai_agents_and_envs(tmp_path):
    # The generated ALFWorld games are made here (that needs the planner of gagpo[alfworld]);
    # the fresh environment reads them from the same cache.
    gym.make("ALFWorld-v0").reset(options={"task": 0})
    # Built from a copy: setuptools writes build/ and egg-info beside the sources it builds.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in LAYERS.values():
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", str(wheels), str(src)], tmp_path, env)
    (wheel,) = wheels.glob("gagpo-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = "-".join(wheel.name.split("-")[:2]) + ".dist-info"
    assert {n.split("/")[0] for n in names} == {"gagpo", dist_info}  # one top-level name
    for needed in ("gagpo/envs/alfworld/native/play.py", "gagpo/agents/policies/base.py",
                   "gagpo/servers/webshop/templates/base.html",
                   "gagpo/servers/webshop/web/static/shop.js",
                   "gagpo/envs/alfworld/data/default_set.json.gz"):
        assert needed in names

    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=True)
    py = str(fresh / "bin" / "python")
    _run([py, "-m", "pip", "install", "-q", "openai-agents", "envs", str(wheel)], tmp_path, env)
    # ALFWorld's data files (the PDDL domain, object lists); its code is not needed to play.
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "alfworld==0.4.2"], tmp_path, env)

    work = tmp_path / "elsewhere"  # outside the repository: only installed code is found
    work.mkdir()
    got = json.loads(_run([py, "-c", PROBE], work, env).strip().splitlines()[-1])
    site = str(fresh)
    assert got["gagpo"].startswith(site)
    assert got["agents"] and got["agents"].startswith(site)  # openai-agents still works
    assert got["envs"] and got["envs"].startswith(site)
    assert got["WebShop-v0"] == ["gagpo.envs.webshop.env", True, True]
    assert got["ALFWorld-v0"] == ["gagpo.envs.alfworld.env", True, True]

    gagpo_cli = str(fresh / "bin" / "gagpo")
    for env_id in ("WebShop-v0", "ALFWorld-v0"):
        out_dir = tmp_path / f"eval-{env_id}"
        _run([gagpo_cli, "eval", "--env", env_id, "--policy", "expert", "--episodes", "2",
              "--batch", "2", "--out", str(out_dir)], work, env)
        summary = json.loads((out_dir / "summary.json").read_text())
        assert summary["episodes"] == 2 and summary["by_type"]["all"]["success"] == 1.0, summary
    # The served shop finds its templates and static files in the installed package.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([gagpo_cli, "serve", "webshop", "--port", str(port),
                               "--num-products", "200"], cwd=work, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pages = {}
        deadline = time.monotonic() + 120
        while not pages and time.monotonic() < deadline and server.poll() is None:
            try:
                for path in ("/", "/static/shop.js"):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as r:
                        pages[path] = (r.status, r.read().decode())
            except OSError:
                pages = {}
                time.sleep(0.5)
        assert pages, server.stdout.read() if server.poll() is not None else "no answer"
        assert pages["/"][0] == 200 and "Instruction:" in pages["/"][1]
        assert pages["/static/shop.js"][0] == 200
    finally:
        server.terminate()
        server.wait(timeout=30)

    # Training needs the extras (torch...): the base install says which, instead of a traceback.
    out = subprocess.run([gagpo_cli, "train", "--env", "WebShop-v0"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "pip install 'gagpo[agents,train]'" in out.stderr, out.stderr
