"""Our environments, state keys and estimators inside verl (``pip install 'gagpo[verl]'``).

verl (https://github.com/volcengine/verl) is the engine agents are trained on at 1.5B-7B
parameters on GPU clusters. This package plugs into it at three documented points, so a user
keeps WebShop-v0, ALFWorld-v0 (or any environment registered under the contract), their
``state_key`` and GAGPO, and gets verl's FSDP/Megatron workers, vLLM/SGLang servers and
multi-node Ray:

- :mod:`~gagpo.integrations.verl.agent_loop`: the agent loop ``gagpo_env``, one verl sample per
  environment step, with our ReAct prompt, memory window and parser;
- :mod:`~gagpo.integrations.verl.trainer`: the trainer ``gagpo`` (``trainer.v1.trainer_mode``),
  verl's synchronous trainer whose advantages are :mod:`gagpo.step_credit`'s;
- :mod:`~gagpo.integrations.verl.dataset`: the task dataset (parquet) verl reads;
- :mod:`~gagpo.integrations.verl.plugin`: the ``verl.plugins`` entry point that registers the
  first two on every ``import verl``.

Settings live under a ``gagpo`` key of verl's configuration (:mod:`.settings`); ``docs/verl.md``
has the launch lines. Everything is tested against :data:`VERL_VERSION`: the agent-loop and
trainer APIs of verl change between releases (the trainer overrides the private
``PPOTrainer._compute_advantage``).
"""

from __future__ import annotations

VERL_VERSION = "0.9.1"
"""The verl release this integration is tested with (the ``verl`` extra pins it)."""


def require_verl() -> str:
    """verl's version, once it imports; a clear ImportError when the extra is missing."""
    try:
        import verl
    except ImportError as e:
        raise ImportError(f"gagpo's verl integration needs verl {VERL_VERSION}: "
                          f"pip install 'gagpo[verl]' ({e})") from e
    return str(verl.__version__)
