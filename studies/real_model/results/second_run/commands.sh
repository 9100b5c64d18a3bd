# expert
gagpo eval --env WebShop-v0 --policy expert --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_expert
# rule
gagpo eval --env WebShop-v0 --policy rule --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_rule
# warm_start
gagpo train --env WebShop-v0 --model smollm2-135m --mode generate --algo gagpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/warm_start --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --iterations 0 --bc-episodes 24 --bc-epochs 1 --bc-lr 0.0001 --bc-batch 8
# warm_eval
gagpo eval --env WebShop-v0 --policy runs/real_model/warm_start/final --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_warm_start --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# gagpo
gagpo train --env WebShop-v0 --model runs/real_model/warm_start/final --mode generate --algo gagpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/gagpo --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --iterations 6 --n-groups 4 --group-size 4 --lr 1e-05 --reward score --kl-coef 0.01 --save-every 1
# gagpo_eval
gagpo eval --env WebShop-v0 --policy runs/real_model/gagpo/final --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_gagpo --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# gigpo
gagpo train --env WebShop-v0 --model runs/real_model/warm_start/final --mode generate --algo gigpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/gigpo --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --iterations 6 --n-groups 4 --group-size 4 --lr 1e-05 --reward score --kl-coef 0.01 --save-every 1
# gigpo_eval
gagpo eval --env WebShop-v0 --policy runs/real_model/gigpo/final --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_gigpo --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# grpo
gagpo train --env WebShop-v0 --model runs/real_model/warm_start/final --mode generate --algo grpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/grpo --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --iterations 6 --n-groups 4 --group-size 4 --lr 1e-05 --reward score --kl-coef 0.01 --save-every 1
# grpo_eval
gagpo eval --env WebShop-v0 --policy runs/real_model/grpo/final --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_grpo --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# memory_1
gagpo train --env WebShop-v0 --model runs/real_model/warm_start/final --mode generate --algo gagpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/memory_check --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --rollout-batch-tokens 8192 --iterations 1 --n-groups 4 --group-size 4 --lr 1e-05 --reward score --kl-coef 0.01 --save-every 1
# memory_2
gagpo train --env WebShop-v0 --model runs/real_model/warm_start/final --mode generate --algo gagpo --max-steps 10 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/memory_check --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --rollout-batch-tokens 8192 --iterations 2 --n-groups 4 --group-size 4 --lr 1e-05 --reward score --kl-coef 0.01 --save-every 1
# untrained
gagpo eval --env WebShop-v0 --policy smollm2-135m --split test --episodes 200 --batch 50 --seed 0 --temperature 0.4 --env-arg max_steps=10 --env-arg max_episode_steps=10 --out runs/real_model/eval_untrained --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# alfworld_expert
gagpo eval --env ALFWorld-v0 --policy expert --split valid_unseen --episodes 24 --batch 24 --seed 0 --temperature 0.4 --env-arg max_steps=20 --env-arg max_episode_steps=20 --out runs/real_model/alfworld_eval_expert
# alfworld_warm_start
gagpo train --env ALFWorld-v0 --model smollm2-135m --mode generate --algo gagpo --max-steps 20 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/alfworld_warm_start --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --iterations 0 --bc-episodes 48 --bc-epochs 1 --bc-lr 0.0001 --bc-batch 8
# alfworld_warm_eval
gagpo eval --env ALFWorld-v0 --policy runs/real_model/alfworld_warm_start/final --split valid_unseen --episodes 24 --batch 24 --seed 0 --temperature 0.4 --env-arg max_steps=20 --env-arg max_episode_steps=20 --out runs/real_model/alfworld_eval_warm_start --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# alfworld_gagpo
gagpo train --env ALFWorld-v0 --model runs/real_model/alfworld_warm_start/final --mode generate --algo gagpo --max-steps 20 --temperature 1.0 --eval-temperature 0.4 --eval-episodes 0 --gradient-checkpointing on --micro-batch-tokens 2048 --return-freed-memory --seed 0 --out-dir runs/real_model/alfworld_gagpo --no-progress --resume --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024 --rollout-batch-tokens 8192 --iterations 6 --n-groups 4 --group-size 4 --lr 1e-05 --kl-coef 0.01 --save-every 1
# alfworld_gagpo_eval
gagpo eval --env ALFWorld-v0 --policy runs/real_model/alfworld_gagpo/final --split valid_unseen --episodes 24 --batch 24 --seed 0 --temperature 0.4 --env-arg max_steps=20 --env-arg max_episode_steps=20 --out runs/real_model/alfworld_eval_gagpo --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
# alfworld_untrained
gagpo eval --env ALFWorld-v0 --policy smollm2-135m --split valid_unseen --episodes 24 --batch 24 --seed 0 --temperature 0.4 --env-arg max_steps=20 --env-arg max_episode_steps=20 --out runs/real_model/alfworld_eval_untrained --max-new-tokens 96 --history-length 2 --max-prompt-tokens 1024
