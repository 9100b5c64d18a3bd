"""``python -m benchmarks.cpu_costs`` on the tiny model: every figure the report promises is
printed, recorded and positive, the decoding split comes from the profiler, and both samplers
are timed."""

import pytest
import torch

from benchmarks import cpu_costs

torch.set_num_threads(1)


# transformers 5 renamed the cache argument; the benchmark passes it under the model's own name.
@pytest.mark.filterwarnings("error:`past_key_values` is deprecated:FutureWarning")
def test_cpu_costs_prints_products_prefill_and_decoding(tmp_path, capsys):
    out = tmp_path / "cpu_costs"
    figures = cpu_costs.main(["--model", "tiny", "--prompts", "3", "--lengths", "20,60",
                              "--tokens", "256", "--context", "40", "--rows", "2,16",
                              "--out", str(out)])
    printed = capsys.readouterr().out
    report = (out / "report.txt").read_text()
    for line in ("products: a layer's float32 products", "prefill: 3 prompts of 20-60 tokens",
                 "decode: 2 rows of a 40-token prompt", "decode: 16 rows of a 40-token prompt",
                 "sampling: 2 rows of", "sampling: 16 rows of"):
        assert line in printed and line in report
    assert figures["products_gflops"] > 0
    assert figures["prefill_padded"] > 0 and figures["prefill_alone"] > 0
    assert figures["decode_ms_2"] > 0 and figures["decode_ms_16"] > 0
    # At 16 rows the step is split by the profiler: products and attention each take time.
    assert figures["decode_16_products_ms"] > 0 and figures["decode_16_attention_ms"] > 0
    # Both ways of drawing the next token are timed, side by side, at every row count.
    assert all(figures[f"sampling_ms_{rows}_{way}"] > 0 for rows in (2, 16)
               for way in ("multinomial", "draw"))
