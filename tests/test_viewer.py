"""``gagpo view`` without a browser: the step tables it reads (replies and observations kept,
older tables still read), its pages on synthetic runs written by the trainer's own writer,
the pages for folders that are missing, empty, half-written or old (never a 500), evaluation
trajectories, and the WebShop link replayed on a served shop."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gagpo.run_folder import read_step_table, save_step_table, step_tables
from gagpo.synthetic_run import synthetic_run, synthetic_table
from gagpo.train_config import OBSERVATION_STEPS_AUTO, TrainConfig
from gagpo.viewer.app import create_app


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    synthetic_run(root / "synth", iterations=3, steps=60, group_size=4, max_t=5)
    (root / "empty").mkdir()
    return root


def _client(*dirs, **kw):
    return create_app([str(d) for d in dirs], **kw).test_client()


def test_step_tables_keep_replies_and_observations_compressed(tmp_path):
    table, cols = synthetic_table(random.Random(1), 40, group_size=4, max_t=5)
    save_step_table(tmp_path / "a.npz", table, cols, keep_observations=True)
    save_step_table(tmp_path / "b.npz", table, cols, keep_observations=False)
    a = read_step_table([tmp_path / "a.npz"])
    assert a["version"] == 2
    assert list(a["reply"]) == [r.reply for r in table.rows]
    assert list(a["observation"]) == [r.observation for r in table.rows]
    assert list(a["task_type"]) == [r.task_type for r in table.rows]
    assert "observation" not in read_step_table([tmp_path / "b.npz"])
    raw = sum(len(r.observation) + len(r.reply) for r in table.rows)
    assert (tmp_path / "a.npz").stat().st_size < raw  # compressed
    # Only the columns asked for (plus group and trajectory) come back.
    assert set(read_step_table([tmp_path / "a.npz"], ["reply"])) == {
        "version", "group", "trajectory", "reply"}


def test_save_observations_is_on_for_modest_runs_and_reads_old_settings():
    assert TrainConfig().save_observations == "auto"
    assert TrainConfig(iterations=10, n_groups=4, group_size=4).keeps_observations()
    big = OBSERVATION_STEPS_AUTO  # iterations x groups x G x 50 steps well over the bound
    assert not TrainConfig(iterations=big, n_groups=4, group_size=4).keeps_observations()
    assert TrainConfig(iterations=big, save_observations="on").keeps_observations()
    assert not TrainConfig(iterations=1, save_observations="off").keeps_observations()
    assert TrainConfig(save_observations=True).save_observations == "on"  # older config files
    assert TrainConfig(save_observations=False).save_observations == "off"
    with pytest.raises(ValueError):
        TrainConfig(save_observations="sometimes")


def test_the_viewer_imports_neither_torch_nor_the_trainer():
    code = ("import sys; import gagpo.viewer.app, gagpo.cli; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('gagpo.trainer', "
            "'gagpo.agents.policies.transformers', 'gagpo.policy_update'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parent.parent)
    assert out.stdout.strip() == "[]"


def test_run_list_and_run_page(runs):
    c = create_app(root=runs).test_client()
    page = c.get("/").get_data(as_text=True)
    assert "synth" in page and "empty" not in page  # an empty folder is no run
    page = _client(runs / "synth").get("/run?r=synth").get_data(as_text=True)
    for chart in ("success", "score", "length", "invalid", "kl", "entropy", "clip", "adv",
                  "zero_adv", "gap", "tps", "time"):
        svg = re.search(rf'<svg id="chart-{chart}".*?</svg>', page, re.S).group(0)
        counts = [int(n) for n in re.findall(r'data-points="(\d+)"', svg)]
        assert counts and all(n > 0 for n in counts), chart
    assert page.count('href="/run/synth/iter/') == 3


def test_a_group_shows_the_saved_keys_and_advantages(runs):
    table = read_step_table(step_tables(runs / "synth")[2])
    page = _client(runs / "synth").get("/run/synth/iter/2?group=1").get_data(as_text=True)
    cells = re.findall(r'<div class="step[^"]*"[^>]*data-traj="(\d+)" data-t="(\d+)"\s*'
                       r'data-key="([^"]*)" data-adv="([^"]*)"', page)
    rows = np.flatnonzero(table["group"] == 1)
    assert len(cells) == len(rows) > 0
    saved = {(int(table["trajectory"][i]), int(table["t"][i])):
             (str(table["state_key"][i]), float(table["advantage"][i])) for i in rows}
    for traj, t, key, adv in cells:
        assert saved[int(traj), int(t)] == (key, float(adv))
    assert page.count('class="colhead') == len(set(table["trajectory"][rows]))
    zero = sum(1 for i in rows if table["advantage"][i] == 0)
    assert page.count('class="step zero"') == zero


def test_filters(runs):
    c = _client(runs / "synth")
    table = read_step_table(step_tables(runs / "synth")[1])
    for task_type in set(table["task_type"]):
        page = c.get(f"/run/synth/iter/1?type={task_type}").get_data(as_text=True)
        shown = {int(g) for g in re.findall(r'data-group="(\d+)"', page)}
        assert shown == {int(g) for g in table["group"][table["task_type"] == task_type]}
    g = int(table["group"][np.flatnonzero(table["won"])[0]])
    page = c.get(f"/run/synth/iter/1?group={g}&outcome=won").get_data(as_text=True)
    assert 'colhead won' in page and 'colhead lost' not in page
    page = c.get(f"/run/synth/iter/1?group={g}&shared=1").get_data(as_text=True)
    rows = np.flatnonzero(table["group"] == g)
    assert page.count('class="step hidden"') == int((table["state_group_size"][rows] == 1).sum())


def test_missing_empty_half_written_and_old_folders_get_clear_pages(runs, tmp_path):
    c = _client(tmp_path / "nowhere", runs / "empty")
    r = c.get("/run?r=nowhere")
    assert r.status_code == 404 and "does not exist" in r.get_data(as_text=True)
    r = c.get("/run?r=empty")
    assert r.status_code == 200 and "No iteration recorded yet" in r.get_data(as_text=True)
    half = tmp_path / "half"
    synthetic_run(half, iterations=2, steps=30, group_size=3, max_t=4)
    good = (half / "steps" / "iter_00002.npz").read_bytes()
    (half / "steps" / "iter_00002.npz").write_bytes(good[: len(good) // 2])  # torn
    (half / "steps" / "iter_00003.npz.tmp").write_bytes(good[:100])  # a write under way
    c = _client(half)
    assert c.get("/run?r=half").status_code == 200
    r = c.get("/run/half/iter/2")
    assert r.status_code == 503 and "reload" in r.get_data(as_text=True)
    assert c.get("/run/half/iter/3").status_code == 404
    with open(half / "metrics.jsonl", "a") as f:
        f.write('{"iteration": 3, "train/succ')  # a line being written
    assert c.get("/run?r=half").status_code == 200
    # A version-1 table: no version, no reply, no task type.
    old = tmp_path / "old"
    (old / "steps").mkdir(parents=True)
    with np.load(half / "steps" / "iter_00001.npz") as z:
        cols = {k: z[k] for k in z.files if k not in ("version", "reply", "task_type",
                                                       "observation")}
    np.savez_compressed(old / "steps" / "iter_00001.npz", **cols)
    r = _client(old).get("/run/old/iter/1")
    assert r.status_code == 200 and "older gagpo" in r.get_data(as_text=True)
    assert _client(old).get("/run?r=old").status_code == 200
    for url in ("/run/nope/iter/1", "/eval/nope", "/shop/nope/1/0/0", "/no/such/page"):
        assert _client(old).get(url).status_code == 404


def test_eval_trajectories_open_in_the_browser(tmp_path):
    out = tmp_path / "ev"
    out.mkdir()
    rows = []
    for k in range(10):
        for t in range(3):
            rows.append({"group": 0, "trajectory": k, "t": t, "task_id": f"webshop:{k}",
                         "task_type": "a" if k % 2 else "b", "state_key": f"s{k}{t}",
                         "observation": "page", "prompt": [], "reply": f"<action>x{t}</action>",
                         "action": f"x{t}", "well_formed": True, "action_valid": t != 1,
                         "reward": 0.0, "done": t == 2, "terminated": False,
                         "won": k == 3 and t == 2, "score": 0.0, "token_ids": [],
                         "logprobs": [], "prompt_token_ids": None, "failed": False,
                         "task_index": k})
    (out / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                            + '{"torn')
    c = _client(out)
    assert "/eval/ev" in c.get("/").get_data(as_text=True)
    page = c.get("/eval/ev").get_data(as_text=True)
    assert page.count('class="colhead') == 8 and "data-adv" not in page
    page = c.get("/eval/ev?outcome=won").get_data(as_text=True)
    assert page.count('class="colhead') == 1 and "rollout 3" in page
    page = c.get("/eval/ev?type=a&group=0").get_data(as_text=True)
    assert page.count('class="colhead') == 5


def test_the_shop_link_opens_the_page_the_agent_saw(tmp_path, serve):
    from gagpo.servers.webshop import open_shop
    from gagpo.servers.webshop.web.app import create_app as shop_app

    table, cols = synthetic_table(random.Random(0), 5, group_size=1, max_t=3)
    shop = open_shop(num_products=200)
    query = shop.goals[0].instruction_text[:40].replace("[", " ").replace("]", " ")
    for r in table.rows:
        r.task_id = "webshop:0"
        r.action = f"search[{query}]" if r.t == 0 else "click[< prev]"
    run = tmp_path / "shoprun"
    (run / "steps").mkdir(parents=True)
    save_step_table(run / "steps" / "iter_00001.npz", table, cols, True)
    with serve(shop_app(shop), threads=2) as url:
        c = _client(run, shop_url=url)
        r = c.get("/shop/shoprun/1/0/0")
        assert r.status_code == 302 and r.location == f"{url}/fixed_0"
        r = c.get("/shop/shoprun/1/0/1")
        assert r.status_code == 302 and r.location.startswith(f"{url}/search_results/fixed_0/")
        import urllib.request

        with urllib.request.urlopen(r.location, timeout=10) as page:
            assert page.status == 200
        assert 'class="shoplink"' in c.get("/run/shoprun/iter/1").get_data(as_text=True)
    r = _client(run, shop_url="http://127.0.0.1:9").get("/shop/shoprun/1/0/1")
    assert r.status_code == 502 and "gagpo serve webshop" in r.get_data(as_text=True)


# ---------------------------------------------------------------------------------------------
# The TD bar of a run with a critic (PPO) and of one without, against TD errors computed here.

GAMMA = 0.9
# (trajectory, t, reward, GAGPO's grouped V(s), the critic's V(s)): rows stored out of step
# order, trajectories of 3, 1 and 2 steps, in group 0.
TD_ROWS = [(0, 2, 1.0, 0.5, 0.8), (1, 0, 0.0, 0.25, -0.4), (0, 0, 0.0, 0.3, 0.1),
           (2, 1, 0.5, 0.7, 0.6), (0, 1, 0.0, 0.4, 0.5), (2, 0, 0.0, 0.2, 0.3)]
# TD error on the critic's V, r_t + 0.9 V(s_{t+1}) - V(s_t), V = 0 after the last step:
#   traj 0: t0 0 + 0.9*0.5 - 0.1 = 0.35; t1 0 + 0.9*0.8 - 0.5 = 0.22; t2 1 - 0.8 = 0.2
#   traj 1: t0 0 - (-0.4) = 0.4
#   traj 2: t0 0 + 0.9*0.6 - 0.3 = 0.24; t1 0.5 - 0.6 = -0.1
TD_CRITIC = {(0, 0): 0.35, (0, 1): 0.22, (0, 2): 0.2, (1, 0): 0.4, (2, 0): 0.24, (2, 1): -0.1}
# ... and on the grouped V (a run without a critic):
#   traj 0: t0 0.9*0.4 - 0.3 = 0.06; t1 0.9*0.5 - 0.4 = 0.05; t2 1 - 0.5 = 0.5
#   traj 1: t0 -0.25;  traj 2: t0 0.9*0.7 - 0.2 = 0.43; t1 0.5 - 0.7 = -0.2
TD_GROUPED = {(0, 0): 0.06, (0, 1): 0.05, (0, 2): 0.5, (1, 0): -0.25, (2, 0): 0.43,
              (2, 1): -0.2}


def _td_run(out: Path, critic: bool) -> None:
    from gagpo.agents.rollout import StepRow, StepTable
    from gagpo.run_folder import write_json

    (out / "steps").mkdir(parents=True)
    write_json(out / "config.json", {"algo": "ppo" if critic else "gagpo", "gamma": GAMMA,
                                     "env": "ALFWorld-v0", "iterations": 1})
    last = {traj: max(t for tr, t, *_ in TD_ROWS if tr == traj) for traj, *_ in TD_ROWS}
    rows = [StepRow(group=0, trajectory=traj, t=t, task_id="alfworld:x", task_type="pick",
                    state_key=f"s{traj}{t}", request=None, observation="o", reply="r",
                    action="look", well_formed=True, action_valid=True, reward=r,
                    done=t == last[traj], terminated=False, won=False, score=0.0,
                    token_ids=[1], logprobs=[-0.5]) for traj, t, r, *_ in TD_ROWS]
    n = len(rows)
    columns = {"reward": np.array([r for *_, r, _, _ in TD_ROWS]),
               "advantage": np.linspace(-1, 1, n), "value": np.array([v for *_, v, _ in TD_ROWS]),
               "state_group_size": np.ones(n)}
    if critic:
        columns["critic_value"] = np.array([c for *_, c in TD_ROWS])
    save_step_table(out / "steps" / "iter_00001.npz", StepTable(rows=rows, num_envs=3,
                                                                group_size=3),
                    columns, keep_observations=False)
    (out / "metrics.jsonl").write_text('{"iteration": 1}\n')


def _bars(page: str) -> dict[tuple[int, int], dict[str, float]]:
    """Each step cell's bars: (trajectory, t) -> {bar class: data-value}."""
    out = {}
    for cell in page.split('<div class="step')[1:]:
        where = re.search(r'data-traj="(\d+)" data-t="(\d+)"', cell)
        bars = re.findall(r'<div class="bar (\w+)" data-value="([^"]+)"', cell)
        out[int(where.group(1)), int(where.group(2))] = {k: float(v) for k, v in bars}
    return out


@pytest.mark.parametrize("critic", [True, False])
def test_the_td_bar_is_the_td_error_on_the_critics_values_when_the_run_has_a_critic(
        tmp_path, critic):
    _td_run(tmp_path / "run", critic)
    page = _client(tmp_path / "run").get("/run/run/iter/1?group=0").get_data(as_text=True)
    bars = _bars(page)
    want = TD_CRITIC if critic else TD_GROUPED
    assert bars.keys() == want.keys()
    for step, td in want.items():
        assert bars[step]["td_error"] == pytest.approx(td, abs=1e-6), step
    cells = _cells(page)
    for traj, t, r, _, _ in TD_ROWS:
        assert f"r <b>{r:.3g}</b>" in cells[traj, t]
    values = {(traj, t): (v, c) for traj, t, _, v, c in TD_ROWS}
    for step, shown in bars.items():
        assert shown["value"] == pytest.approx(values[step][0], abs=1e-6)
        assert ("critic_value" in shown) == critic
        if critic:
            assert shown["critic_value"] == pytest.approx(values[step][1], abs=1e-6)


def _cells(page: str) -> dict[tuple[int, int], str]:
    """Each shown step's cell, by (trajectory, t)."""
    out = {}
    for cell in page.split('<div class="step')[1:]:
        where = re.search(r'data-traj="(\d+)" data-t="(\d+)"', cell)
        out[int(where.group(1)), int(where.group(2))] = cell
    return out


def test_each_step_shows_its_own_saved_row(runs):
    """What a step's cell says (action, reply, observation, the well-formed and admissible
    badges, r) is its own row of the step table, and the group's title names its group and
    task type."""
    import html

    table = read_step_table(step_tables(runs / "synth")[2])
    page = _client(runs / "synth").get("/run/synth/iter/2?group=1").get_data(as_text=True)
    rows = np.flatnonzero(table["group"] == 1)
    i0 = rows[0]
    title = re.search(r'<h2 id="group-title">([^<]*)</h2>', page).group(1)
    assert title == (f"Group 1: task {table['task_id'][i0]} ({table['task_type'][i0]}), "
                     f"{len(set(table['trajectory'][rows]))} rollouts")
    cells = _cells(page)
    assert len(cells) == len(rows)
    kinds = set()
    for i in rows:
        cell = cells[int(table["trajectory"][i]), int(table["t"][i])]
        text = html.unescape(cell)
        assert f'<code class="action">{table["action"][i]}</code>' in text
        assert f"<summary>reply</summary><pre>{table['reply'][i]}\n</pre>" in text
        assert f"<summary>observation</summary><pre>\n{table['observation'][i]}</pre>" in text
        well, valid = bool(table["well_formed"][i]), bool(table["action_valid"][i])
        badges = re.findall(r'class="badge (?:ok|bad)\s*">\s*([a-z -]+)</span>', text)
        assert badges == ["well-formed" if well else "malformed",
                          "admissible" if valid else "not admissible"]
        assert f'r <b>{float(table["reward"][i]):.3g}</b>' in text
        kinds.add((well, valid, float(table["reward"][i]) > 0))
    assert len(kinds) >= 2  # rows that differ in what they show


@pytest.mark.parametrize("reward", [False, True])
def test_a_table_without_the_optional_columns_shows_what_it_has(tmp_path, reward):
    """A step table with none of the trainer's columns (no value, advantage, group size,
    reply, badges; with or without rewards): the group shows its steps, r 0, and no bar (no TD
    error without a value); the data layer says None for a group the table does not hold."""
    from gagpo.viewer import data

    run = tmp_path / "bare"
    (run / "steps").mkdir(parents=True)
    n = 3
    np.savez_compressed(run / "steps" / "iter_00001.npz", version=np.int16(2),
                        group=np.zeros(n, np.int32), trajectory=np.array([0, 0, 1], np.int32),
                        t=np.array([0, 1, 0], np.int16), task_id=np.array(["a"] * n),
                        state_key=np.array(["k0", "k1", "k0"]),
                        action=np.array(["look", "go", "look"]),
                        score=np.zeros(n, np.float32), won=np.zeros(n, bool),
                        **({"reward": np.zeros(n, np.float32)} if reward else {}))
    (run / "metrics.jsonl").write_text('{"iteration": 1}\n')
    r = _client(run).get("/run/bare/iter/1?group=0")
    assert r.status_code == 200
    cells = _cells(r.get_data(as_text=True))
    assert set(cells) == {(0, 0), (0, 1), (1, 0)}
    for cell in cells.values():
        assert "r <b>0</b>" in cell and 'class="bar' not in cell and "badge" not in cell
        assert "<summary>reply" not in cell
    paths = step_tables(run)[1]
    assert data.load_group(paths, 7, 0.95) == (2, None)
    _, group = data.load_group(paths, 0, 0.95)
    assert [s.td_error for r in group.rollouts for s in r.steps] == [None] * 3
    assert group.task_type == "" and [r.steps[0].reply for r in group.rollouts] == [None] * 2
    assert data.iteration_groups(paths) == (2, [{"group": 0, "task_id": "a", "task_type": "",
                                                 "won": 0, "steps": 3, "shared": 0,
                                                 "rollouts": 2}])


def test_the_group_list_counts_each_groups_rollouts_wins_steps_and_shared_steps(runs):
    table = read_step_table(step_tables(runs / "synth")[3])
    page = _client(runs / "synth").get("/run/synth/iter/3").get_data(as_text=True)
    shown = re.findall(r'data-group="(\d+)"><td><a [^>]*>\d+</a></td>\s*<td>([^<]*)</td>'
                       r'<td>([^<]*)</td><td>(\d+)</td><td>(\d+)</td>\s*<td>(\d+)</td>'
                       r'<td>(\d+)</td>', page)
    want = []
    for g in sorted(set(table["group"].tolist())):
        rows = table["group"] == g
        trajs = set(table["trajectory"][rows].tolist())
        won = {int(tr) for tr in table["trajectory"][rows & table["won"]]}
        i = np.flatnonzero(rows)[0]
        want.append((str(g), str(table["task_id"][i]), str(table["task_type"][i]),
                     str(len(trajs)), str(len(won)), str(int(rows.sum())),
                     str(int((rows & (table["state_group_size"] > 1)).sum()))))
    assert shown == want
    assert any(w[4] != "0" for w in want) and any(w[6] != "0" for w in want)


def test_the_data_layer_reads_runs_their_summaries_and_iteration_shares(tmp_path):
    """The run list (nested folders, a name taken twice), each run's summary (its settings and
    last metrics), held-out points (the evaluation before training at 0, then the logged
    ones) and an iteration's shares of malformed, zero-advantage and unshared steps."""
    import json
    import math

    from gagpo.viewer import data

    root = tmp_path / "root"
    synthetic_run(root / "a", iterations=3, steps=20, group_size=3, max_t=4)
    synthetic_run(root / "deep" / "a", iterations=1, steps=10, group_size=2, max_t=3)
    (root / "evals").mkdir()
    (root / "evals" / data.EVAL_FILE).write_text("")
    (root / "notes.txt").write_text("not a run")
    (root / "deep" / "evals").mkdir()
    (root / "deep" / "evals" / data.EVAL_FILE).write_text("")
    runs = data.find_runs([tmp_path / "nowhere", root], explicit=False)
    assert [(r.name, r.path, r.kind) for r in runs] == [
        ("a", root / "a", "train"), ("a+", root / "deep" / "a", "train"),
        ("evals", root / "deep" / "evals", "eval"), ("evals+", root / "evals", "eval")]
    assert [(r.name, r.kind) for r in data.find_runs([root / "a", root / "nowhere", Path(".")],
                                                     explicit=True)] == [
        ("a", "train"), ("nowhere", "train"), (".", "train")]
    assert data.looks_like_run(root / "deep") is None
    for name in ("config.json", "metrics.jsonl", "steps"):
        (tmp_path / name.replace(".", "_")).mkdir()
        (tmp_path / name.replace(".", "_") / name).write_text("{}")
        assert data.looks_like_run(tmp_path / name.replace(".", "_")) == "train", name
    run = runs[0]
    metrics = [json.loads(x) for x in (run.path / "metrics.jsonl").read_text().splitlines()]
    summary = data.run_summary(run)
    assert (summary["algo"], summary["env"], summary["model"], summary["iterations_planned"],
            summary["iterations_logged"], summary["last"], summary["tables"]) == (
        "gagpo", "WebShop-v0", "synthetic", 3, 3, metrics[-1], [1, 2, 3])
    assert summary["config"]["gamma"] == 0.95
    (run.path / "evals.json").write_text(json.dumps(
        {"before": {"all": {"success": 0.25, "score": 0.5}}}))
    assert data.held_out_points(run) == [(0.0, {"success": 0.25, "score": 0.5})] + [
        (float(m["iteration"]), {"success": m["eval/success"], "score": m["eval/score"]})
        for m in metrics if "eval/success" in m]
    paths = step_tables(run.path)[2]
    t = read_step_table(paths)
    n = len(t["group"])
    stats = data.iteration_stats(paths)
    assert stats == pytest.approx({"malformed": (~t["well_formed"]).sum() / n,
                                   "zero_adv": (t["advantage"] == 0).sum() / n,
                                   "unshared": (t["state_group_size"] <= 1).sum() / n})
    assert 0 < stats["zero_adv"] < 1 and 0 < stats["unshared"] < 1
    assert data.iteration_stats(paths) == stats  # from the cache, the same
    assert data._num(True) != data._num(True) and data._num(3) == 3.0
    assert math.isnan(data._num("3"))


def test_eval_episodes_are_read_whole_from_trajectories_jsonl(tmp_path):
    """Each line is a step of an episode keyed by its task index (its trajectory where none):
    every field read, missing ones defaulted, a bad line skipped (the next ones still read), a
    torn last line skipped, episodes interleaved; the episode's outcome is its last step's
    (``gagpo eval`` writes an episode's steps in order)."""
    import json

    from gagpo.viewer import data

    full = {"trajectory": 9, "task_index": 4, "t": 1, "state_key": "k1", "action": "go",
            "reply": "<action>go</action>", "observation": "a room", "well_formed": True,
            "action_valid": False, "reward": 0.5, "score": 0.75, "won": True,
            "task_id": "alfworld:4", "task_type": "pick"}
    lines = [json.dumps({**full, "t": 0, "won": False, "score": 0.25, "state_key": "k0",
                         "action": "look", "reward": 0.0}),
             json.dumps({"trajectory": 2, "t": "not a number"}),
             json.dumps({"trajectory": 2, "t": 0, "task_id": "alfworld:2"}),
             json.dumps(full),
             json.dumps({"trajectory": 5, "t": 0}),
             '{"trajectory": 3, "t": 0, "task_id": "torn']
    run_dir = tmp_path / "ev"
    run_dir.mkdir()
    (run_dir / data.EVAL_FILE).write_text("\n".join(lines))
    got = data.eval_episodes(data.Run("ev", run_dir, "eval"))

    def step(key, **kw):
        base = dict(row=-1, trajectory=key, t=0, state_key="", action="", reply=None,
                    observation=None, well_formed=None, action_valid=None, reward=0.0,
                    score=0.0, won=False, advantage=None, value=None, critic_value=None,
                    td_error=None, group_size=None)
        return data.Step(**{**base, **kw})

    shared = dict(reply="<action>go</action>", observation="a room", well_formed=True,
                  action_valid=False)
    assert got == [
        data.Rollout(2, "alfworld:2", "", False, 0.0, [step(2)]),
        data.Rollout(4, "alfworld:4", "pick", True, 0.75, [
            step(4, t=0, state_key="k0", action="look", score=0.25, **shared),
            step(4, t=1, state_key="k1", action="go", reward=0.5, score=0.75, won=True,
                 **shared)]),
        data.Rollout(5, "", "", False, 0.0, [step(5)]),
    ]
    assert data.eval_episodes(data.Run("ev", run_dir, "eval")) == got  # cached, the same


def _table_file(path: Path, **columns) -> list[Path]:
    n = len(next(iter(columns.values())))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, version=np.int16(2), group=np.zeros(n, np.int32),  # size: the shapes'
             trajectory=np.arange(n, dtype=np.int32), **columns)
    return [path]


def test_iteration_shares_count_each_kind_of_step_and_tell_tables_apart(tmp_path):
    """Malformed, zero-advantage and unshared (a state group of one) steps over all steps, on
    tables of three rows, of one row, and without those columns (NaN); two tables of the same
    size and time are not taken for each other."""
    import math
    import os

    from gagpo.viewer import data

    three = _table_file(tmp_path / "a" / "iter_00001.npz",
                        well_formed=np.array([False, True, True]),
                        advantage=np.array([0.0, 0.5, 0.0], np.float32),
                        state_group_size=np.array([1, 2, 3], np.float32))
    assert data.iteration_stats(three) == pytest.approx(
        {"malformed": 1 / 3, "zero_adv": 2 / 3, "unshared": 1 / 3})
    one = _table_file(tmp_path / "b" / "iter_00001.npz", well_formed=np.array([False]),
                      advantage=np.array([0.0], np.float32),
                      state_group_size=np.array([1.0], np.float32))
    assert data.iteration_stats(one) == {"malformed": 1.0, "zero_adv": 1.0, "unshared": 1.0}
    bare = _table_file(tmp_path / "c" / "iter_00001.npz", t=np.zeros(2, np.int16))
    assert all(math.isnan(v) for v in data.iteration_stats(bare).values())
    twin = _table_file(tmp_path / "d" / "iter_00001.npz", well_formed=np.array([True, True, True]),
                       advantage=np.array([1.0, 0.5, 2.0], np.float32),
                       state_group_size=np.array([2, 2, 3], np.float32))
    st = os.stat(three[0])
    assert os.stat(twin[0]).st_size == st.st_size
    os.utime(twin[0], ns=(st.st_atime_ns, st.st_mtime_ns))
    assert data.iteration_stats(twin) == {"malformed": 0.0, "zero_adv": 0.0, "unshared": 0.0}
