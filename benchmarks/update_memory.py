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
trainer before it). The pack column: ``--pack-prompts`` (off: padded passes, the trainer's
way on a GPU; on: each distinct prompt run once for its rows, without padding, the trainer's
way on a CPU). CPU seconds (user + system) are reported beside wall seconds: on a loaded
machine they are the fairer cost.

``--calls FILE`` takes the batch's prompts from a rollout recorded by ``python -m
benchmarks.rollout_throughput --save-calls FILE``: every row of every policy call, as the
rollout asked them (their lengths, and the copies of a task that share a prompt), each with
``--reply`` tokens of reply (the recording keeps prompts only):

    python -m benchmarks.update_memory --calls \
        benchmarks/results/rollout_throughput/avx2/calls.jsonl.gz --reply 48 \
        --model runs/real_model/warm_start/final --settings on,4096,mmap,amp,off \
        on,4096,mmap,amp,on
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.record import command_line, recorded

#: (gradient checkpointing, micro-batch tokens, heap) measured by default (reference: amp).
SETTINGS = (("off", 16384, "glibc"), ("on", 16384, "glibc"), ("on", 4096, "glibc"),
            ("off", 2048, "glibc"), ("on", 2048, "glibc"), ("on", 2048, "mmap"))
HEAPS = ("glibc", "mmap")
REFERENCES = ("amp", "fp32")
PACKS = ("off", "on")


def recorded_prompts(path: Path) -> list[list[int]]:
    """Every row's prompt ids, call after call, from a ``--save-calls`` file."""
    from benchmarks.rollout_throughput import recorded_calls

    prompts = [ids for call in recorded_calls(path) for ids in call["prompt_token_ids"]]
    if not prompts:
        raise SystemExit(f"{path}: no calls in it")
    return prompts


def one(model: str, rows: int, prompt: int, reply: int, checkpointing: str,
        budget: int, heap: str = "glibc", updates: int = 1, reference: str = "amp",
        pack: str = "off", calls: Path | None = None) -> dict:
    """``updates`` updates in this process; returns their seconds, the peak RSS and the
    tokens the passes ran on."""
    import torch

    from gagpo.common.malloc import return_freed_memory

    if heap == "mmap" and not return_freed_memory():
        raise SystemExit("heap mmap: glibc's mallopt is not available here")
    from gagpo.distributed import Compute
    from gagpo.policy_update import frozen_reference
    from gagpo.train_config import TrainConfig
    from gagpo.trainer import build_model, update

    torch.set_num_threads(1)
    from gagpo.agents.models import bf16_autocast

    cfg = TrainConfig(model=model, gradient_checkpointing=checkpointing,
                      micro_batch_tokens=budget, kl_coef=0.01, lr=1e-6, pack_prompts=pack)
    net, tok = build_model(cfg, torch.device("cpu"))
    # As the trainer runs it: bf16 autocast where the CPU has it (auto), and the KL
    # reference, a frozen copy of the starting model (its linear weights in bf16, or float32).
    amp = bf16_autocast(cfg.bf16, net, "cpu")
    ref = frozen_reference(net, amp if reference == "amp" else None)
    net.train()
    g = torch.Generator().manual_seed(0)
    vocab = min(len(tok), 40000)
    prompts = recorded_prompts(calls) if calls is not None else [
        torch.randint(100, vocab, (prompt,), generator=g).tolist() for _ in range(rows)]
    too_big = max(max(p) for p in prompts)
    if too_big >= net.get_input_embeddings().num_embeddings:
        raise SystemExit(f"{calls}: token id {too_big} is beyond {model}'s vocabulary: "
                         "measure with the model that recorded it")
    rows = len(prompts)
    batch = {"prompt": prompts,
             "reply": [torch.randint(100, vocab, (reply,), generator=g).tolist()
                       for _ in range(rows)],
             "old_logp": [[-3.0] * reply for _ in range(rows)],
             "adv": [(-1.0) ** i for i in range(rows)]}
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=cfg.lr)
    compute = Compute.local(tok.pad_token_id, amp=amp)
    start, cpu_start = time.perf_counter(), time.process_time()
    tokens = 0.0
    for i in range(updates):
        stats = update(net, ref, opt, batch, cfg, compute=compute, epoch_seed=i)
        tokens += stats.padded_tokens

    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_gb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 2**20, "autocast": str(amp), "tokens": tokens,
        "rows": rows, "real_tokens": sum(len(p) + reply for p in prompts) * updates,
        "distinct_prompts": len({tuple(p) for p in prompts})}


def summarize(report: str) -> dict[str, Any]:
    """The figures of a printed report (what ``benchmarks.figures`` quotes): the updates a
    setting ran, the autocast, with ``--calls`` the batch's rows, distinct prompts and tokens
    without padding or sharing, and ``"settings"``, one entry per row of the table in its order:
    checkpointing, micro-batch tokens, the heap, ref and pack columns the report has, seconds,
    CPU seconds and tokens run (where it has them) and peak RSS in GB.

    Raises:
        ValueError: the report has no header or no setting's row.
    """
    head = re.search(r"^(\d+|one) update(?:\(s\))? of ", report, re.M)
    columns = re.search(r"^  checkpointing +micro-batch((?: +(?:heap|ref|pack))*) +seconds",
                        report, re.M)
    if head is None or columns is None:
        raise ValueError("not an update_memory report: no '... update(s) of' line or no "
                         "'checkpointing micro-batch ...' header")
    named = columns[1].split()
    words = r"".join(r" +(\S+)" for _ in named)
    row = re.compile(rf"^  (on|off) +(\d+){words} +([\d.]+)s(?: +([\d.]+)s)? +([\d.]+) GB"
                     rf"(?: +([\d,]+))? +\(x", re.M)
    settings = []
    for m in row.finditer(report):
        *given, seconds, cpu, rss, tokens = m.groups()[2:]
        setting: dict[str, Any] = {"checkpointing": m[1], "micro_batch": int(m[2]),
                                   **dict(zip(named, given, strict=True)),
                                   "seconds": float(seconds), "peak_rss_gb": float(rss)}
        if cpu is not None:
            setting["cpu_seconds"] = float(cpu)
        if tokens is not None:
            setting["tokens_run"] = int(tokens.replace(",", ""))
        settings.append(setting)
    if not settings:
        raise ValueError("not an update_memory report: no setting's row")
    out: dict[str, Any] = {"updates": 1 if head[1] == "one" else int(head[1])}
    autocast = re.search(r"\(autocast: ([^;]+);", report)
    if autocast is not None:
        out["autocast"] = autocast[1]
    batch = re.search(r"(\d+) rows, (\d+) distinct prompts, ([\d,]+) tokens without padding",
                      report)
    if batch is not None:
        out.update(rows=int(batch[1]), distinct_prompts=int(batch[2]),
                   real_tokens=int(batch[3].replace(",", "")))
    return out | {"settings": settings}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rows", type=int, default=12, help="rows in the update's batch")
    parser.add_argument("--prompt", type=int, default=940, help="prompt tokens per row")
    parser.add_argument("--reply", type=int, default=60, help="reply tokens per row")
    parser.add_argument("--out", type=Path, help="also write the report to OUT/report.txt")
    parser.add_argument("--updates", type=int, default=1, help="updates in a row, per setting")
    parser.add_argument("--settings", nargs="+", metavar="CKPT,TOKENS,HEAP[,REF[,PACK]]",
                        help="settings to run, e.g. on,2048,mmap or on,2048,mmap,fp32 or "
                             "on,4096,mmap,amp,on (default: all of SETTINGS, unpacked)")
    parser.add_argument("--calls", type=Path, help="the batch's prompts: every row of a "
                        "rollout_throughput --save-calls file (then --rows and --prompt "
                        "are unused)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one setting, as above
    args = parser.parse_args(argv)
    if args.one:
        checkpointing, budget, heap, reference, pack = args.one.split(",")
        print(json.dumps(one(args.model, args.rows, args.prompt, args.reply, checkpointing,
                             int(budget), heap, args.updates, reference, pack, args.calls)))
        return
    settings = [tuple(s.split(",")) for s in args.settings] if args.settings else [
        tuple(map(str, s)) for s in SETTINGS]
    # REF and PACK default to amp and off.
    settings = [s + ("amp", "off")[len(s) - 3:] if len(s) in (3, 4) else s for s in settings]
    for setting in settings:
        if len(setting) != 5 or not setting[1].isdigit() or setting[2] not in HEAPS \
                or setting[3] not in REFERENCES or setting[4] not in PACKS:
            raise SystemExit(f"a setting is CKPT,TOKENS,HEAP[,REF[,PACK]] with HEAP one of "
                             f"{HEAPS}, REF one of {REFERENCES} and PACK one of {PACKS}, not "
                             f"{','.join(setting)}")
    if args.calls is not None:
        recorded_prompts(args.calls)  # refused here, before any child runs
    with recorded(args.out, command_line("benchmarks.update_memory", argv), summarize):
        batch = (f"the prompts of {args.calls} + {args.reply} reply tokens each" if args.calls
                 else f"{args.rows} rows x ({args.prompt} prompt + {args.reply} reply tokens)")
        print(f"{args.updates} update(s) of {args.model}: {batch}, each setting in a fresh "
              "process")
        print(f"  {'checkpointing':<14}{'micro-batch':>12}{'heap':>7}{'ref':>6}{'pack':>6}"
              f"{'seconds':>10}{'CPU s':>9}{'peak RSS':>11}{'tokens run':>12}")
        base = None
        for checkpointing, budget, heap, reference, pack in settings:
            command = [sys.executable, "-m", "benchmarks.update_memory", "--model", args.model,
                       "--rows", str(args.rows), "--prompt", str(args.prompt), "--reply",
                       str(args.reply), "--updates", str(args.updates),
                       "--one", f"{checkpointing},{budget},{heap},{reference},{pack}"]
            if args.calls is not None:
                command += ["--calls", str(args.calls)]
            child = subprocess.run(command, capture_output=True, text=True)
            if child.returncode != 0:
                raise SystemExit(f"setting {checkpointing},{budget},{heap},{reference},{pack} "
                                 f"failed:\n{child.stderr.strip()[-2000:]}")
            r = json.loads(child.stdout.strip().splitlines()[-1])
            if base is None:
                print(f"  (autocast: {r['autocast']}; KL reference: a frozen copy; "
                      f"{r['rows']} rows, {r['distinct_prompts']} distinct prompts, "
                      f"{r['real_tokens']:,.0f} tokens without padding or sharing)")
            base = base or r
            print(f"  {checkpointing:<14}{budget:>12}{heap:>7}{reference:>6}{pack:>6}"
                  f"{r['seconds']:>9.1f}s{r['cpu_seconds']:>8.1f}s"
                  f"{r['peak_rss_gb']:>9.2f} GB{r['tokens']:>12,.0f}   "
                  f"(x{r['peak_rss_gb'] / base['peak_rss_gb']:.2f} memory, "
                  f"x{r['cpu_seconds'] / base['cpu_seconds']:.2f} CPU time, "
                  f"x{r['seconds'] / base['seconds']:.2f} time)", flush=True)


if __name__ == "__main__":
    main()
