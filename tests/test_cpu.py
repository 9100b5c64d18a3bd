"""gagpo.common.cpu: the CPU's flags decide the arithmetic a 50M+ parameter model gets (bf16
autocast with native bf16 products, else float32), which a training stage's record names."""

from gagpo.common.cpu import arithmetic, native_bf16


def test_the_cpu_flags_decide_the_arithmetic(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx2 avx512f avx512_bf16 fma\n")
    assert native_bf16(cpuinfo) and arithmetic(cpuinfo) == "bf16 autocast"
    cpuinfo.write_text("processor : 0\nflags : fpu sse2 avx2 avx512f fma\n")
    assert not native_bf16(cpuinfo) and arithmetic(cpuinfo) == "float32"
    assert arithmetic(tmp_path / "missing") == "float32"
