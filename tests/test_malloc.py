"""gagpo.common.malloc: freed large blocks go back to the system (``--return-freed-memory``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")

# 64 blocks of 2 MiB, each followed by a small live block (as a training step leaves a few small
# tensors alive between its activations), then the large blocks freed. glibc's threshold is
# first raised the way a run raises it, by freeing one large mmapped block.
PROGRAM = """
import os, sys
from gagpo.common.malloc import return_freed_memory

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

took = return_freed_memory() if sys.argv[1] == "on" else False
big = bytearray(16 << 20)
del big
blocks, small = [], []
for _ in range(64):
    blocks.append(bytearray(2 << 20))
    small.append(bytearray(4096))
before = rss()
del blocks
print(took, (before - rss()) >> 20)
"""


def _released(setting: str, **env: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, setting], capture_output=True,
                         text=True, check=True, env={**os.environ, **env}).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_return_to_the_system_only_with_the_setting():
    took, mib = _released("on")
    assert took == "True" and mib >= 100  # 128 MiB freed, nearly all of it returned
    took, mib = _released("off")
    assert took == "False" and mib < 32  # held in the heap behind the small live blocks


def test_the_users_own_threshold_wins():
    took, _ = _released("on", MALLOC_MMAP_THRESHOLD_="131072")
    assert took == "False"
