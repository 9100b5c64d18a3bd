"""What this machine's CPU computes natively, which decides the arithmetic of a CPU run.

With ``--bf16 auto`` a model of 50M+ parameters runs under bf16 autocast only on a CPU with
native bf16 products (:data:`BF16_CPU_FLAGS`), and in float32 elsewhere. The two give other
parameters from the same commands and seeds, so reports name which one a machine ran
(:func:`arithmetic`) and a run resumed on another machine can be checked against it.
"""

from __future__ import annotations

from pathlib import Path

BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
"""CPU features that run bf16 matrix products natively: on a 2-core AVX512-BF16 machine
autocast doubled SmolLM2-135M's prefill (305 -> 643 prompt tokens/s, 8 prompts of 600 tokens);
without them bf16 is emulated and slower than float32."""

CPUINFO = Path("/proc/cpuinfo")


def native_bf16(cpuinfo: Path = CPUINFO) -> bool:
    """Whether the CPU lists one of :data:`BF16_CPU_FLAGS` (False where ``cpuinfo`` cannot be
    read: another OS, a sandbox)."""
    try:
        flags = cpuinfo.read_text().split()
    except OSError:
        return False
    return any(f in flags for f in BF16_CPU_FLAGS)


def arithmetic(cpuinfo: Path = CPUINFO) -> str:
    """How ``--bf16 auto`` runs a 50M+ parameter model on this CPU: ``"bf16 autocast"`` or
    ``"float32"``."""
    return "bf16 autocast" if native_bf16(cpuinfo) else "float32"
