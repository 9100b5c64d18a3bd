"""Our environments, state keys and estimators inside verl (``gagpo.integrations.verl``).

Runs where verl is installed (``make test-verl``: a venv of its own, ``GAGPO_REQUIRE_VERL=1``
turns the skip into a failure); the main suite runs only the tests that need no verl.

verl's trainer needs a GPU; what runs here is every part of it our code touches, for real:
verl's dataset class on our parquet, its agent-loop worker as a Ray actor with a real
TransferQueue on local Ray, the generation server replaced by
:class:`~gagpo.integrations.verl.scripted_server.ScriptedServer` (verl's own CPU tests stand in
for the server the same way), then our trainer's ``_compute_advantage`` on the samples the
worker stored, as verl's training step calls it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gagpo.agents.policies.base import Request
from gagpo.agents.rollout import StepRow, StepTable

ROOT = Path(__file__).resolve().parent.parent
HAS_VERL = importlib.util.find_spec("verl") is not None
REQUIRED = os.environ.get("GAGPO_REQUIRE_VERL") == "1"
needs_verl = pytest.mark.skipif(not (HAS_VERL or REQUIRED),
                                reason="needs verl: make test-verl (pip install 'gagpo[verl]')")
G = 4  # rollout.n: copies of each task
METHODS = [("gagpo", "ancestor-td"), ("gagpo", "paper"), ("gigpo", "ancestor-td"),
           ("grpo", "ancestor-td"), ("rloo", "ancestor-td")]


def test_without_verl_the_integration_says_what_to_install():
    """A missing extra: a clear ImportError naming the extra, in any venv."""
    code = ("import sys; sys.modules['verl'] = None\n"
            "try:\n    import gagpo.integrations.verl.agent_loop\n"
            "except ImportError as e:\n    print(e)\nelse:\n    print('imported')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert "needs verl 0.9.1: pip install 'gagpo[verl]'" in out.stdout, out.stdout + out.stderr


def test_the_settings_refuse_unknown_names_and_bad_values():
    from gagpo.integrations.verl.settings import read_settings
    from gagpo.step_credit import CreditSettings

    agent, credit = read_settings({"gagpo": {"history_length": 1, "algo": "gigpo"}})
    assert agent.history_length == 1 and credit == CreditSettings(algo="gigpo")
    assert read_settings({})[1] == CreditSettings()
    with pytest.raises(ValueError, match=r"unknown gagpo\.\* settings \['histroy'\]"):
        read_settings({"gagpo": {"histroy": 2}})
    with pytest.raises(ValueError, match="gagpo_variant must be one of"):
        read_settings({"gagpo": {"gagpo_variant": "nope"}})
    with pytest.raises(ValueError, match="history_length"):
        read_settings({"gagpo": {"history_length": -1}})


def test_train_config_and_verl_share_one_credit_rule():
    """``gagpo train``'s defaults are the verl trainer's (one CreditSettings)."""
    pytest.importorskip("torch")
    from gagpo.step_credit import CreditSettings
    from gagpo.train_config import TrainConfig

    assert TrainConfig().credit() == CreditSettings()
    cfg = TrainConfig(algo="rloo", reward="score", invalid_penalty=0.3, gamma=0.9)
    assert cfg.credit() == CreditSettings(algo="rloo", reward="score", invalid_penalty=0.3,
                                          gamma=0.9)


# ---------------------------------------------------------------------------------------------
# Everything below needs verl.


@pytest.fixture(scope="module")
def tiny_path() -> str:
    from gagpo.agents.models import TinySpec, tiny_model_folder

    return tiny_model_folder(TinySpec())


@pytest.fixture(scope="module")
def tokenizer(tiny_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_path)


def datasets(tmp: Path) -> dict[str, Path]:
    from gagpo.integrations.verl.dataset import write_dataset

    out = {}
    for env_id, size in (("WebShop-v0", 3), ("ALFWorld-v0", 2)):
        out[env_id] = write_dataset(env_id, tmp / env_id, train_size=size, test_size=2)["train"]
    return out


def verl_config(tiny_path: str, train_file: Path, *overrides: str):
    """verl's own configuration (its Hydra files), composed with the launch script's settings."""
    from hydra import compose, initialize_config_dir
    from verl.trainer import main_ppo

    config_dir = str(Path(main_ppo.__file__).parent / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=[
            f"actor_rollout_ref.model.path={tiny_path}",
            f"data.train_files={train_file}", f"data.val_files={train_file}",
            "data.train_batch_size=2", "data.max_prompt_length=2048",
            "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.prompt_length=2048",
            "actor_rollout_ref.rollout.response_length=128",
            f"actor_rollout_ref.rollout.n={G}",
            "actor_rollout_ref.rollout.agent.default_agent_loop=gagpo_env",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "algorithm.adv_estimator=grpo", "trainer.use_v1=True",
            "trainer.v1.trainer_mode=gagpo", "+gagpo.history_length=2", *overrides])


def prompt_batch(config, train_file: Path):
    """The first rows of the training set as verl's trainer hands them to the rollout: verl's
    dataset class and collate function, a uid per row, the global step."""
    import transfer_queue  # noqa: F401  (verl's tensordict helpers expect it)
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    dataset = RLHFDataset(data_files=[str(train_file)], tokenizer=None, config=config.data)
    batch = collate_fn([dataset[i] for i in range(len(dataset))])
    batch["uid"] = np.array([f"task{i}" for i in range(len(dataset))], dtype=object)
    batch = tu.get_tensordict(batch)
    tu.assign_non_tensor_data(batch, "global_steps", 1)
    return batch


@pytest.fixture(scope="module")
def local_ray():
    """Local Ray with TransferQueue (it needs 3+ logical CPUs: a controller, two storage
    units; on 2 cores num_cpus=4 works, 2 hangs)."""
    if not HAS_VERL:
        pytest.fail("GAGPO_REQUIRE_VERL=1 but verl is not installed")
    import ray
    import transfer_queue as tq

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(
                 [str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}})
    tq.init()
    yield tq
    tq.close()
    ray.shutdown()


def run_rollout(tq, config, batch, server, timeout: float = 240.0) -> dict:
    """verl's agent-loop worker (a Ray actor) plays ``batch``; waits for every prompt's
    status in TransferQueue; returns {key: fields} of the stored samples and their tags."""
    import ray
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    uids = list(batch["uid"])
    tq.kv_batch_put(keys=uids, partition_id="train",
                    tags=[{"is_prompt": True, "status": "pending", "global_steps": 1}] * len(uids))
    worker = AgentLoopWorkerTQ.remote(config, server)
    ray.get(worker.generate_sequences.remote(batch))
    deadline = time.monotonic() + timeout
    while True:
        listing = tq.kv_list(partition_id="train")["train"]
        status = {u: listing.get(u, {}).get("status") for u in uids}
        if all(s in ("finished", "failure") for s in status.values()):
            break
        assert time.monotonic() < deadline, f"rollout did not finish in {timeout} s: {status}"
        time.sleep(0.2)
    assert set(status.values()) == {"finished"}, status
    keys = sorted(k for k in listing if k not in uids and k.rsplit("_", 2)[0] in uids)
    data = tq.kv_batch_get(keys=keys, partition_id="train",
                           select_fields=["extra_fields", "response_mask", "rm_scores",
                                          "responses"])
    ray.kill(worker)
    return {"keys": keys, "tags": [listing[k] for k in keys], "data": data}


@pytest.fixture(scope="module", params=["WebShop-v0", "ALFWorld-v0"])
def rollout(request, local_ray, tiny_path, tokenizer, tmp_path_factory):
    from gagpo.integrations.verl.scripted_server import ScriptedServer

    env_id = request.param
    train_file = datasets(tmp_path_factory.mktemp("verl"))[env_id]
    config = verl_config(tiny_path, train_file)
    batch = prompt_batch(config, train_file)
    result = run_rollout(local_ray, config, batch,
                         ScriptedServer(tokenizer, seed=3, malformed_rate=0.2))
    result.update(env_id=env_id, config=config, tq=local_ray, train_file=train_file,
                  uids=list(batch["uid"]))
    return result


def changed(config, change: dict):
    """A copy of verl's (struct) configuration with ``change`` merged in, new keys allowed."""
    from omegaconf import OmegaConf

    config = OmegaConf.create(OmegaConf.to_container(config))
    return OmegaConf.merge(config, change)


def records_of(rollout) -> list[dict]:
    return [extra["gagpo"] for extra in rollout["data"]["extra_fields"]]


@needs_verl
@pytest.mark.timeout(600)
def test_episodes_end_with_a_record_per_step_and_copies_start_together(rollout):
    keys, records = rollout["keys"], records_of(rollout)
    episodes: dict[str, list] = {}
    for key, record in zip(keys, records, strict=True):
        uid, session, index = key.rsplit("_", 2)
        assert int(index) == record["t"]  # verl's sample index is the step
        episodes.setdefault(f"{uid}_{session}", []).append(record)
    assert len(episodes) == len(rollout["uids"]) * G  # every copy of every task arrived
    limit = 15 if rollout["env_id"] == "WebShop-v0" else 50
    for name, steps in episodes.items():
        steps.sort(key=lambda r: r["t"])
        assert [r["t"] for r in steps] == list(range(len(steps))), name
        assert steps[-1]["done"] and not any(r["done"] for r in steps[:-1]), name
        assert len(steps) <= limit and (steps[-1]["terminated"] or len(steps) == limit)
        assert all(isinstance(r["state_key"], str) and len(r["state_key"]) == 16 for r in steps)
        assert not any(r["failed"] for r in steps)
    for uid in rollout["uids"]:
        first = {episodes[f"{uid}_{s}"][0]["state_key"] for s in range(G)}
        assert len(first) == 1, f"{uid}'s {G} copies start in {len(first)} states"
        task_ids = {r["task_id"] for s in range(G) for r in episodes[f"{uid}_{s}"]}
        assert len(task_ids) == 1
    # The scripted server's malformed replies reached the env as invalid actions.
    assert any(not r["well_formed"] and not r["action_valid"] for r in records)
    # verl's reward fields: the episode's reward on every sample of it (metrics only).
    scores = rollout["data"]["rm_scores"]
    for key, row in zip(keys, scores.unbind(), strict=True):
        episode = episodes[key.rsplit("_", 1)[0]]
        assert float(row.sum()) == pytest.approx(10.0 * episode[-1]["won"])


def train_path_advantages(keys: list[str], records: list[dict], algo: str, variant: str):
    """What ``gagpo train`` computes for the same steps: its StepTable and its functions."""
    from gagpo import trainer
    from gagpo.train_config import TrainConfig

    groups = {k.rsplit("_", 2)[0] for k in keys}
    group_id = {g: i for i, g in enumerate(sorted(groups))}
    traj_id = {t: i for i, t in enumerate(sorted({k.rsplit("_", 1)[0] for k in keys}))}
    rows = [StepRow(group=group_id[k.rsplit("_", 2)[0]], trajectory=traj_id[k.rsplit("_", 1)[0]],
                    t=r["t"], task_id=r["task_id"], task_type=r["task_type"],
                    state_key=r["state_key"], observation=r["observation"], request=Request([]),
                    reply="", action=r["action"], well_formed=r["well_formed"],
                    action_valid=r["action_valid"], reward=r["env_reward"], done=r["done"],
                    terminated=r["terminated"], won=r["won"], score=r["score"])
            for k, r in zip(keys, records, strict=True)]
    # Shuffled, as the trainer's rows from several workers may come.
    order = np.random.default_rng(0).permutation(len(rows))
    table = StepTable(rows=[rows[i] for i in order], num_envs=len(traj_id), group_size=G)
    cfg = TrainConfig(algo=algo, gagpo_variant=variant)
    rewards, penalty = trainer.rewards_and_penalties(table, cfg)
    adv, _ = trainer.advantages_of(table, rewards, cfg, penalty)
    out = np.empty(len(rows))
    out[order] = adv
    return out, penalty[np.argsort(order)]


@needs_verl
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("algo", "variant"), METHODS)
def test_verl_step_gets_the_advantages_gagpo_train_computes(rollout, algo, variant):
    """The trainer's ``_compute_advantage``, as verl's step calls it, on the stored samples:
    every reply token of a step gets the step's advantage, equal to ``gagpo train``'s."""
    from transfer_queue import KVBatchMeta

    from gagpo.integrations.verl.trainer import GagpoTrainer

    tq, keys = rollout["tq"], rollout["keys"]
    config = changed(rollout["config"], {"gagpo": {"algo": algo, "gagpo_variant": variant}})
    trainer = GagpoTrainer(config)
    assert trainer.trainer_mode == "sync"  # verl's sync replay buffer and checkpoints
    metrics: dict = {}
    trainer._compute_advantage(KVBatchMeta(keys=keys, tags=rollout["tags"],
                                           partition_id="train"), metrics)
    back = tq.kv_batch_get(keys=keys, partition_id="train",
                           select_fields=["advantages", "returns", "response_mask"])
    expected, penalty = train_path_advantages(keys, records_of(rollout), algo, variant)
    assert np.abs(expected).max() > 0
    for i, (adv, mask) in enumerate(zip(back["advantages"].unbind(),
                                        back["response_mask"].unbind(), strict=True)):
        tokens = adv[mask.bool()].double().numpy()
        assert len(tokens) and np.allclose(tokens, expected[i], atol=1e-5), keys[i]
        assert not adv[~mask.bool()].any()
    assert (penalty > 0).any()  # the malformed replies were charged
    assert metrics["gagpo/episodes"] == len(rollout["uids"]) * G
    assert metrics["gagpo/failed_episodes"] == 0
    assert 0 < metrics["gagpo/invalid_rate"] < 1
    assert 0 < metrics["gagpo/met_fraction"] <= metrics["gagpo/shared_fraction"] <= 1


@needs_verl
def test_padding_samples_and_failed_episodes_get_no_advantage():
    from gagpo.integrations.verl.trainer import step_advantages
    from gagpo.step_credit import CreditSettings

    def record(t, key, done, won=False, failed=False):
        return {"gagpo": {"t": t, "task_id": "1", "task_type": "x", "state_key": key,
                          "observation": "", "action": "a", "well_formed": True,
                          "action_valid": True, "env_reward": 0.0, "done": done,
                          "terminated": done, "won": won, "score": float(won),
                          "failed": failed, "error": "boom" if failed else ""}}

    keys = ["u_0_0", "u_0_1", "u_1_0", "u_1_1", "u_2_0", "pad9_0_0"]
    records = [record(0, "s0", False), record(1, "s1", True, won=True),
               record(0, "s0", False), record(1, "s2", True),
               record(0, "s0", True, failed=True), record(0, "s0", False)]
    adv, metrics = step_advantages(keys, records, [False] * 5 + [True],
                                   CreditSettings(algo="grpo"))
    assert adv[4] == 0 and adv[5] == 0  # failed episode, verl's padding sample
    assert adv[0] > 0 and adv[2] < 0  # the won copy above the lost one
    assert metrics["gagpo/failed_episodes"] == 1 and metrics["gagpo/episodes"] == 3
    with pytest.raises(ValueError, match="carries no gagpo step record"):
        step_advantages(["u_0_0"], [{}], [False], CreditSettings())


# ---------------------------------------------------------------------------------------------
# The agent loop in this process, for the edges: bad input gets an error or the penalty.


def play(tokenizer, server, env_id: str = "WebShop-v0", settings: dict | None = None,
         **extra):
    """One episode of the agent loop in this process (made inside the event loop, as verl's
    worker makes one per episode), at most 60 s."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from gagpo.integrations.verl.agent_loop import GymEnvAgentLoop

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 2048,
                                                               "response_length": 128}},
                            "data": {"apply_chat_template_kwargs": {}},
                            "gagpo": settings or {}})
    row = {k: v for k, v in ({"task": 0, "split": "train", "seed": 0, "index": 0} | extra
                             ).items() if v is not None}  # None: the row leaves it out

    async def episode():
        loop = GymEnvAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server,
                               tokenizer=tokenizer, processor=None, dataset_cls=RLHFDataset,
                               data_config=DictConfigWrap(cfg.data))
        return await loop.run({}, data_source=env_id, extra_info=row)

    return asyncio.run(asyncio.wait_for(episode(), 60))


@needs_verl
def test_an_env_that_raises_ends_its_episode_kept_and_marked(tokenizer, caplog):
    from verl_envs import RAISE_AT_STEP

    from gagpo.integrations.verl.scripted_server import ScriptedServer

    with caplog.at_level("ERROR"):
        outputs = play(tokenizer, ScriptedServer(tokenizer, seed=1), "verl_envs:RaisingShop-v0")
    records = [o.extra_fields["gagpo"] for o in outputs]
    assert len(records) == RAISE_AT_STEP + 1
    assert records[-1]["failed"] and records[-1]["done"]
    assert records[-1]["error"] == "RuntimeError: the shop's database went away"
    assert not any(r["failed"] for r in records[:-1])
    assert "raised at step 2" in caplog.text


@needs_verl
def test_a_reply_without_an_action_is_sent_and_charged_the_penalty(tokenizer):
    from gagpo import step_credit
    from gagpo.integrations.verl.scripted_server import ScriptedServer
    from gagpo.integrations.verl.steps import VerlStepTable

    outputs = play(tokenizer, ScriptedServer(tokenizer, malformed_rate=1.0))
    records = [o.extra_fields["gagpo"] for o in outputs]
    assert len(records) == 15  # never bought: the step limit ended it
    assert all(not r["well_formed"] and not r["action_valid"] for r in records)
    assert all(r["action"] == "I am not sure what to do." for r in records)
    table = VerlStepTable([f"u_0_{r['t']}" for r in records], records)
    rewards, penalty = step_credit.rewards_and_penalties(table, step_credit.CreditSettings())
    assert (penalty == 0.1).all() and (rewards == 0).all()


@needs_verl
def test_the_step_budget_truncates_the_episode(tokenizer):
    from gagpo.integrations.verl.scripted_server import ScriptedServer

    outputs = play(tokenizer, ScriptedServer(tokenizer), "ALFWorld-v0", {"max_steps": 3})
    records = [o.extra_fields["gagpo"] for o in outputs]
    assert [r["t"] for r in records] == [0, 1, 2]
    assert records[-1]["done"] and not records[-1]["terminated"]
    assert outputs[-1].extra_fields["reward_extra_info"]["episode_steps"] == 3.0


@needs_verl
def test_a_task_out_of_range_or_a_row_without_a_task_is_a_clear_error(tokenizer):
    from gagpo.integrations.verl.scripted_server import ScriptedServer

    server = ScriptedServer(tokenizer)
    with pytest.raises(ValueError, match=r"dataset row 7 \(WebShop-v0\): .*task"):
        play(tokenizer, server, task=10**6, index=7)
    with pytest.raises(ValueError, match="needs data_source .* and extra_info.task"):
        play(tokenizer, server, task=None)
    with pytest.raises(ValueError, match="no environment 'Nope-v0'"):
        play(tokenizer, server, "Nope-v0")


@needs_verl
def test_the_trainer_refuses_settings_it_would_ignore(tiny_path, tmp_path):
    from gagpo.integrations.verl.trainer import check_verl_config

    config = verl_config(tiny_path, tmp_path / "none.parquet")
    assert check_verl_config(config).algo == "gagpo"
    for change, message in (({"algorithm": {"adv_estimator": "gae"}}, "adv_estimator=grpo"),
                            ({"algorithm": {"use_kl_in_reward": True}}, "use_kl_loss"),
                            ({"gagpo": {"algo": "ppo"}}, "verl's own adv_estimator=gae"),
                            ({"algorithm": {"rollout_correction": {"rollout_is": "token"}}},
                             "decoupled rollout correction")):
        with pytest.raises(ValueError, match=message):
            check_verl_config(changed(config, change))


@needs_verl
def test_import_verl_registers_the_loop_and_the_trainer_in_a_fresh_process():
    code = ("import verl\n"
            "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry\n"
            "from verl.trainer.ppo.v1 import get_trainer_cls\n"
            "print(_agent_loop_registry['gagpo_env']['_target_'])\n"
            "print(get_trainer_cls('gagpo').__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["gagpo.integrations.verl.agent_loop.GymEnvAgentLoop",
                                  "GagpoTrainer"]


@needs_verl
def test_a_plugin_that_fails_to_import_says_so_loudly():
    code = ("import sys; sys.modules['gagpo.integrations.verl.agent_loop'] = None\n"
            "import verl\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert "gagpo: the verl plugin failed to import, so the gagpo_env agent loop and the " \
           "gagpo trainer are NOT registered" in out.stderr


@needs_verl
def test_the_launch_script_composes_a_configuration_verl_validates(tmp_path, tiny_path):
    """The launch script's configuration, composed by verl's own Hydra entry point (``--cfg
    job`` prints it and stops before any GPU is asked for), then checked by verl's
    ``validate_config`` and ours, as ``main_ppo`` does first."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from gagpo.integrations.verl.trainer import check_verl_config

    env = os.environ | {"GAGPO_DATA": str(tmp_path / "data"), "MODEL": tiny_path,
                        "N_GPUS": "1", "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "verl_train.sh"), "WebShop-v0",
                          "--cfg", "job"], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "data" / "WebShop-v0" / "train.parquet").exists()
    config = OmegaConf.create(out.stdout[out.stdout.index("actor_rollout_ref:"):])
    assert config.trainer.v1.trainer_mode == "gagpo"
    assert config.actor_rollout_ref.rollout.agent.default_agent_loop == "gagpo_env"
    assert config.gagpo.algo == "gagpo"
    validate_config(config=config, use_reference_policy=need_reference_policy(config),
                    use_critic=need_critic(config))
    check_verl_config(config)
