"""Memory and time of one policy update: gradient checkpointing and micro-batch sizes.

Each update is the trainer's: bf16 autocast as ``--bf16 auto`` decides on this machine, and a
KL reference (a frozen copy of the model, ``--kl-coef 0.01``), whose forward passes count.

A training iteration's update holds the model, its gradients and AdamW's two moments, plus the
activations of one micro-batch, which grow with rows x prompt length: on a CPU machine the
activations decide whether a run fits. Each setting runs ``gagpo.trainer.update`` (the trainer's
own code path, the model built by ``gagpo.trainer.build_model``) in a fresh process, on the same
synthetic batch, and reports the process's peak RSS and the update's seconds, side by side.

    python -m benchmarks.update_memory                      # SmolLM2-135M, 12 rows of 940 + 60
    python -m benchmarks.update_memory --rows 4 --prompt 300  # a quick look
    python -m benchmarks.update_memory --out benchmarks/results/update_memory
    python -m benchmarks.update_memory --updates 2 --settings on,2048,glibc on,2048,mmap
    python -m benchmarks.update_memory --updates 2 --settings on,2048,mmap,fp32 on,2048,mmap,amp

The heap column: glibc's defaults, or ``mmap``, the trainer's setting on a CPU
(:func:`gagpo.common.malloc.return_freed_memory`: blocks of 1 MiB and more served by mmap, so
that freed activations go back to the system instead of leaving holes in the heap). The second
update is the steady state: the first one's peak comes before AdamW's moments exist. The
reference column: the KL reference as the trainer keeps it (``amp``: linear weights in the
autocast dtype, :func:`gagpo.policy_update.frozen_reference`), or a float32 copy (``fp32``, the
trainer before it). CPU seconds
(user + system) are reported beside wall seconds: on a loaded machine they are the fairer cost.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.record import command_line, recorded

#: (gradient checkpointing, micro-batch tokens, heap) measured by default (reference: amp).
SETTINGS = (("off", 16384, "glibc"), ("on", 16384, "glibc"), ("on", 4096, "glibc"),
            ("off", 2048, "glibc"), ("on", 2048, "glibc"), ("on", 2048, "mmap"))
HEAPS = ("glibc", "mmap")
REFERENCES = ("amp", "fp32")


def one(model: str, rows: int, prompt: int, reply: int, checkpointing: str,
        budget: int, heap: str = "glibc", updates: int = 1, reference: str = "amp") -> dict:
    """``updates`` updates in this process; returns their seconds and the peak RSS."""
    import torch

    from gagpo.common.malloc import return_freed_memory

    if heap == "mmap" and not return_freed_memory():
        raise SystemExit("heap mmap: glibc's mallopt is not available here")
    from gagpo.policy_update import frozen_reference
    from gagpo.train_config import TrainConfig
    from gagpo.trainer import build_model, update

    torch.set_num_threads(1)
    from gagpo.agents.models import bf16_autocast

    cfg = TrainConfig(model=model, gradient_checkpointing=checkpointing,
                      micro_batch_tokens=budget, kl_coef=0.01, lr=1e-6)
    net, tok = build_model(cfg, torch.device("cpu"))
    # As the trainer runs it: bf16 autocast where the CPU has it (auto), and the KL
    # reference, a frozen copy of the starting model (its linear weights in bf16, or float32).
    amp = bf16_autocast(cfg.bf16, net, "cpu")
    ref = frozen_reference(net, amp if reference == "amp" else None)
    net.train()
    g = torch.Generator().manual_seed(0)
    vocab = min(len(tok), 40000)
    batch = {"prompt": [torch.randint(100, vocab, (prompt,), generator=g).tolist()
                        for _ in range(rows)],
             "reply": [torch.randint(100, vocab, (reply,), generator=g).tolist()
                       for _ in range(rows)],
             "old_logp": [[-3.0] * reply for _ in range(rows)],
             "adv": [(-1.0) ** i for i in range(rows)]}
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=cfg.lr)
    start, cpu_start = time.perf_counter(), time.process_time()
    for i in range(updates):
        update(net, ref, opt, batch, cfg, world=1, epoch_seed=i, amp=amp,
               pad_id=tok.pad_token_id)

    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_gb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 2**20, "autocast": str(amp)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", type=int, default=12, help="rows in the update's batch")
    parser.add_argument("--prompt", type=int, default=940, help="prompt tokens per row")
    parser.add_argument("--reply", type=int, default=60, help="reply tokens per row")
    parser.add_argument("--out", type=Path, help="also write the report to OUT/report.txt")
    parser.add_argument("--updates", type=int, default=1, help="updates in a row, per setting")
    parser.add_argument("--settings", nargs="+", metavar="CKPT,TOKENS,HEAP[,REF]",
                        help="settings to run, e.g. on,2048,mmap or on,2048,mmap,fp32 "
                             "(default: all of SETTINGS)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one setting, as above
    args = parser.parse_args(argv)
    if args.one:
        checkpointing, budget, heap, reference = args.one.split(",")
        print(json.dumps(one(args.model, args.rows, args.prompt, args.reply, checkpointing,
                             int(budget), heap, args.updates, reference)))
        return
    settings = [tuple(s.split(",")) for s in args.settings] if args.settings else SETTINGS
    settings = [(*s, "amp") if len(s) == 3 else s for s in settings]
    with recorded(args.out, command_line("benchmarks.update_memory", argv)):
        print(f"{args.updates} update(s) of {args.model}: {args.rows} rows x ({args.prompt} "
              f"prompt + {args.reply} reply tokens), each setting in a fresh process")
        print(f"  {'checkpointing':<14}{'micro-batch':>12}{'heap':>7}{'ref':>6}{'seconds':>10}"
              f"{'CPU s':>9}{'peak RSS':>11}")
        base = None
        for setting in settings:
            if len(setting) != 4:
                raise SystemExit(f"a setting is CKPT,TOKENS,HEAP[,REF], not {','.join(setting)}")
            checkpointing, budget, heap, reference = setting
            if heap not in HEAPS or reference not in REFERENCES:
                raise SystemExit(f"heap must be one of {HEAPS} and the reference one of "
                                 f"{REFERENCES}, not {heap!r}, {reference!r}")
            child = subprocess.run(
                [sys.executable, "-m", "benchmarks.update_memory", "--model", args.model,
                 "--rows", str(args.rows), "--prompt", str(args.prompt), "--reply",
                 str(args.reply), "--updates", str(args.updates),
                 "--one", f"{checkpointing},{budget},{heap},{reference}"],
                capture_output=True, text=True, check=True)
            r = json.loads(child.stdout.strip().splitlines()[-1])
            if base is None:
                print(f"  (autocast: {r['autocast']}; KL reference: a frozen copy)")
            base = base or r
            print(f"  {checkpointing:<14}{budget:>12}{heap:>7}{reference:>6}{r['seconds']:>9.1f}s"
                  f"{r['cpu_seconds']:>8.1f}s"
                  f"{r['peak_rss_gb']:>9.2f} GB   (x{r['peak_rss_gb'] / base['peak_rss_gb']:.2f} "
                  f"memory, x{r['cpu_seconds'] / base['cpu_seconds']:.2f} CPU time)",
                  flush=True)


if __name__ == "__main__":
    main()
