"""``gagpo export RUN_DIR --out DIR``: a training run's latest checkpoint as a model folder.

The trainer writes ``RUN_DIR/final`` only when a run completes; a run still going, or one that
``--max-minutes`` stopped, has only ``checkpoint.pt``. This writes the checkpoint's model the
way ``final/`` is written (:func:`gagpo.distributed.save_pretrained`: a transformers folder,
or a LoRA adapter over the run's base model), so that ``gagpo eval --policy DIR`` and
``gagpo train --model DIR`` read it. ``DIR/exported_from.json`` says which run, which
iteration, and the sha256 of the parameters (:func:`gagpo.distributed.parameters_sha256`,
the digest a finished run records in ``parameter_digests.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from gagpo.distributed import load_full_state, parameters_sha256, save_pretrained
from gagpo.run_folder import load_checkpoint
from gagpo.train_config import TrainConfig

MODEL_SETTINGS = ("model", "lora_rank", "lora_alpha", "lora_dropout", "lora_layers",
                  "lora_embeddings")
"""What decides the model a checkpoint's weights load into (see ``trainer.build_model``)."""


def export_checkpoint(run: Path, out: Path) -> dict[str, Any]:
    """Write ``run``'s checkpointed model to ``out`` (which must be new or empty); returns
    what ``out/exported_from.json`` records."""
    from gagpo.trainer import build_model

    ckpt = run / "checkpoint.pt"
    if not ckpt.is_file():
        raise FileNotFoundError(f"{run} holds no checkpoint.pt (a run writes one after each "
                                "--save-every iterations)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out} exists and is not an empty folder: choose another --out")
    state = load_checkpoint(ckpt, mmap=True)
    saved = state["config"]
    cfg = TrainConfig(**{k: saved[k] for k in MODEL_SETTINGS if k in saved},
                      gradient_checkpointing="off")
    model, tokenizer = build_model(cfg, torch.device("cpu"))
    try:
        load_full_state(model, state["model"])  # checks the weights fit (state_misfit)
    except ValueError as e:
        raise ValueError(f"{ckpt} does not fit {cfg.model} (lora_rank {cfg.lora_rank}): "
                         f"{e}") from None
    save_pretrained(model, tokenizer, out, rank=0)
    record = {"run": str(run), "iteration": state["iteration"],
              "parameters_sha256": parameters_sha256(model),
              **{k: getattr(cfg, k) for k in MODEL_SETTINGS}}
    (out / "exported_from.json").write_text(json.dumps(record, indent=1) + "\n")
    return record
