#!/usr/bin/env bash
# Wheels that a GPU machine without internet needs beside its own image (which has torch,
# transformers, peft, tokenizers, numba, tensorboard, ...): gagpo's WebShop dependencies, at the
# versions of this machine's .venv when it has one, for CPython 3.12 on manylinux x86_64.
# About 5 MB into .whl/ (git ignores it). On the GPU machine, before scripts/gpu_checks.sh:
#   pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
PY_VERSION=${PY_VERSION:-3.12}
names=(gymnasium farama-notifications flask blinker itsdangerous waitress bm25s PyStemmer
       rapidfuzz ijson)
pins=()
for n in "${names[@]}"; do
  v=$(.venv/bin/pip show "$n" 2>/dev/null | sed -n 's/^Version: //p' || true)
  pins+=("$n${v:+==$v}")
done
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d .whl "${pins[@]}"
ls .whl && du -sh .whl
