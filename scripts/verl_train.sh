#!/usr/bin/env bash
# Train a ReAct agent on one of our environments with GAGPO inside verl, on a user's GPU machine.
#
#   bash scripts/verl_train.sh WebShop-v0                  # 1 GPU, Qwen2.5-1.5B-Instruct
#   N_GPUS=8 bash scripts/verl_train.sh ALFWorld-v0        # 8 GPUs on one node
#   NNODES=2 N_GPUS=8 bash scripts/verl_train.sh WebShop-v0  # two nodes (start Ray on both first)
#   bash scripts/verl_train.sh WebShop-v0 +gagpo.algo=gigpo trainer.total_training_steps=5
#
# Arguments after the env id are Hydra overrides for verl's configuration (they win over the
# ones below; `--cfg job` prints the composed configuration and stops). Environment variables:
# MODEL (a Hugging Face id or folder), N_GPUS (per node), NNODES, GAGPO_DATA (where the task
# datasets go), ALGO (gagpo, gigpo, grpo or rloo), PYTHON. Needs `pip install 'gagpo[verl]'` and
# vLLM for verl (see docs/verl.md). The settings are the papers' (docs/recipes.md): 16 tasks x 8
# rollouts an iteration, history 2, temperature 1.0, lr 1e-6, KL 0.01, 150 iterations.
set -euo pipefail

ENV_ID="${1:-WebShop-v0}"
shift || true
MODEL="${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}"
N_GPUS="${N_GPUS:-1}"
NNODES="${NNODES:-1}"
GAGPO_DATA="${GAGPO_DATA:-data}"
ALGO="${ALGO:-gagpo}"
PYTHON="${PYTHON:-python3}"
DATA="$GAGPO_DATA/$ENV_ID"

case "$ENV_ID" in
  ALFWorld-v0) MAX_STEPS=50; RESPONSE=512; PROMPT=4096 ;;
  *) MAX_STEPS=15; RESPONSE=512; PROMPT=4096 ;;
esac

if [ ! -f "$DATA/train.parquet" ] || [ ! -f "$DATA/test.parquet" ]; then
  "$PYTHON" -m gagpo.integrations.verl.dataset --env "$ENV_ID" --out "$DATA"
fi

exec "$PYTHON" -m verl.trainer.main_ppo \
  trainer.use_v1=True \
  trainer.v1.trainer_mode=gagpo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=False \
  data.train_files="$DATA/train.parquet" \
  data.val_files="$DATA/test.parquet" \
  data.train_batch_size=16 \
  data.max_prompt_length="$PROMPT" \
  data.max_response_length="$RESPONSE" \
  data.filter_overlong_prompts=False \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.01 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.entropy_coeff=0.001 \
  actor_rollout_ref.actor.clip_ratio_c=3.0 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.temperature=1.0 \
  actor_rollout_ref.rollout.prompt_length="$PROMPT" \
  actor_rollout_ref.rollout.response_length="$RESPONSE" \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.rollout.agent.default_agent_loop=gagpo_env \
  actor_rollout_ref.rollout.val_kwargs.temperature=0.4 \
  actor_rollout_ref.rollout.val_kwargs.do_sample=True \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \
  +gagpo.algo="$ALGO" \
  +gagpo.history_length=2 \
  +gagpo.max_steps="$MAX_STEPS" \
  +gagpo.gamma=0.95 \
  +gagpo.invalid_penalty=0.1 \
  trainer.n_gpus_per_node="$N_GPUS" \
  trainer.nnodes="$NNODES" \
  trainer.total_epochs=1000 \
  trainer.total_training_steps=150 \
  trainer.test_freq=10 \
  trainer.save_freq=50 \
  trainer.val_before_train=True \
  trainer.logger='[console]' \
  trainer.project_name=gagpo \
  trainer.experiment_name="${ENV_ID}-${ALGO}" \
  "$@"
