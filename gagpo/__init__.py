"""gagpo: text environments and a trainer for LLM agents.

One import namespace: ``gagpo.envs`` (the environments; importing it registers ``WebShop-v0``
and ``ALFWorld-v0``), ``gagpo.agents`` (the ReAct agent and its policies), ``gagpo.servers``
(the WebShop site), ``gagpo.common`` (what every layer shares: the cache folder) and the
trainer's modules (``gagpo.trainer``, ``gagpo.advantages``...).
"""

import os as _os

__version__ = "0.1.0"

# In the repository the four sub-packages keep their own top-level folders (envs/, agents/,
# servers/, common/, beside this one); the wheel and the editable install map them under gagpo
# (pyproject's package-dir). A checkout imported from its root (a test run, a git worktree, a
# mutation-testing copy) must resolve them to its own folders, not to whichever copy the
# editable install points at: there, the repository root joins this package's search path.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "envs")) and all(
    _os.path.isfile(_os.path.join(_root, name, "__init__.py"))
    for name in ("envs", "agents", "servers", "common")
):
    __path__.append(_root)  # noqa: F821  (a package's module global)
