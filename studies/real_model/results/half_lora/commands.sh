# The half-LoRA seed 0, run by hand from a checkout at commit 5d0a26d with the commands that
# `python -m benchmarks.real_model --stages half_lora_gagpo_s0,half_lora_gagpo_s0_eval` gives
# (only the folders' paths differ), 2026-12-05 23:32 UTC - 2026-12-06 01:00 UTC.
# half_lora_gagpo_s0
gagpo train --env WebShop-v0 --model runs/real_model/warm_start/final --mode generate --algo gagpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/half_lora/gagpo_s0 --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --iterations 6 --n-groups 4 --group-size 4 --lr 1e-05 --reward score --kl-coef 0.01 --save-every 1 --aggregation token-mean --rollout-batch-tokens 8192 --lora-rank 16 --lora-alpha 32 --lr 1e-4 --kl-coef 0 --gradient-checkpointing off --no-return-freed-memory --lora-layers 15
# half_lora_gagpo_s0_eval
gagpo eval --env WebShop-v0 --policy runs/real_model/half_lora/gagpo_s0/final --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/half_lora/eval_gagpo_s0 --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
