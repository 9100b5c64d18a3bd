"""The viewer's page templates and style sheet (Jinja2, autoescaped; no script at all: the
filters are forms, the folds are ``<details>``)."""

from __future__ import annotations

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.2em 2em;color:#222}
h1{font-size:20px;margin:.6em 0 .2em} h2{font-size:16px;margin:1em 0 .3em}
a{color:#0060a0} .muted{color:#777} .note{background:#fff6d8;border:1px solid #e8d48a;
padding:.4em .7em;margin:.5em 0} .error{background:#fde4e1;border:1px solid #e0a39b;
padding:.6em .8em;margin:1em 0}
table.list{border-collapse:collapse} table.list td,table.list th{padding:2px 10px;
border-bottom:1px solid #eee;text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:14px}
.chartbox{border:1px solid #ddd;padding:4px 6px} .chartbox h3{font-size:13px;margin:0 0 2px}
.legend span{margin-right:10px;font-size:12px} .legend i{display:inline-block;width:18px;
height:3px;vertical-align:middle;margin-right:3px}
svg .frame{fill:none;stroke:#bbb} svg .grid{stroke:#eee} svg .tick{font-size:10px;fill:#666}
svg .nodata{font-size:12px;fill:#999}
form.filters{margin:.5em 0;padding:.4em .6em;background:#f4f6f8;border:1px solid #dde}
form.filters label{margin-right:14px}
.rollouts{display:grid;gap:6px;align-items:stretch}
.colhead{font-weight:600;padding:4px;border-bottom:2px solid #999}
.colhead.won{border-color:#2a8a4a} .colhead.lost{border-color:#b44}
.step{border:1px solid #ddd;border-radius:4px;padding:4px 6px;background:#fff;min-width:0}
.step.zero{background:#f7f7f7} .step.hidden{background:none;border:1px dashed #e4e4e4;
color:#aaa;font-size:12px}
.chip{display:inline-block;min-width:60px;padding:0 6px;border-radius:9px;color:#fff;
font:12px monospace;text-align:center}
.chip.unshared{background:#fff!important;color:#777;border:1px dashed #999}
.kv{font-size:12px;color:#444} .kv b{font-weight:600}
.bar{position:relative;height:10px;background:#f0f0f0;margin:2px 0 3px;border-radius:2px}
.bar .mid{position:absolute;left:50%;top:0;bottom:0;border-left:1px solid #888}
.bar .fill{position:absolute;top:1px;bottom:1px}
.bar .fill.pos{left:50%;background:#2a8a4a} .bar .fill.neg{right:50%;background:#c0392b}
.barlabel{font-size:11px;color:#555}
.badge{font-size:11px;padding:0 4px;border-radius:3px;margin-right:3px}
.ok{background:#dff3e4;color:#1d6b36} .bad{background:#fde4e1;color:#9b2a1d}
.zerotag{background:#eee;color:#555}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font-size:12px;background:#fafafa;
padding:3px}
details summary{cursor:pointer;font-size:12px;color:#555}
"""

BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }} - gagpo view</title>
<link rel="stylesheet" href="{{ url_for('css') }}"></head>
<body><p class="muted"><a href="{{ url_for('index') }}">runs</a>{% block crumbs %}{% endblock %}
</p>{% block body %}{% endblock %}</body></html>"""

ERROR = """{% extends "base" %}{% block body %}<h1>{{ title }}</h1>
<div class="error" id="error">{{ message }}</div>{% endblock %}"""

INDEX = """{% extends "base" %}{% block body %}<h1>Runs</h1>
{% if not runs %}<div class="note" id="no-runs">No run folders {{ where }}. Train one
(<code>gagpo train --out-dir runs/NAME</code>, or <code>make demo</code>), or name folders:
<code>gagpo view RUN_DIR ...</code></div>{% else %}
<form action="{{ url_for('run_page') }}" method="get">
<table class="list" id="runs"><tr><th>compare</th><th>run</th><th>kind</th><th>algo</th>
<th>env</th><th>model</th><th>iterations</th><th>last training success</th></tr>
{% for r, s in runs %}<tr><td><input type="checkbox" name="r" value="{{ r.name }}"></td>
<td>{% if r.kind == "eval" %}<a href="{{ url_for('eval_page', name=r.name) }}">{{ r.name }}</a>
{% else %}<a href="{{ url_for('run_page', r=r.name) }}">{{ r.name }}</a>{% endif %}</td>
<td>{{ r.kind }}</td><td>{{ s.algo or "" }}</td><td>{{ s.env or "" }}</td>
<td>{{ s.model or "" }}</td><td>{{ s.iterations_logged }}{% if s.iterations_planned %} /
{{ s.iterations_planned }}{% endif %}</td>
<td>{% if "train/success" in s.last %}{{ "%.2f"|format(s.last["train/success"]) }}{% endif %}
</td></tr>{% endfor %}</table>
<p><button type="submit">overlay the checked runs</button></p></form>{% endif %}
{% endblock %}"""

RUN = """{% extends "base" %}{% block body %}<h1>{{ title }}</h1>
{% for r, s, problem in runs %}<div class="runhead" id="run-{{ loop.index0 }}">
<span class="legend"><span><i style="background:{{ colours[loop.index0] }}"></i></span></span>
<b>{{ r.name }}</b> <span class="muted">{{ r.path }}</span>
{% if s.algo %} &middot; {{ s.algo }} on {{ s.env }}, model {{ s.model }}{% endif %}
&middot; {{ s.iterations_logged }} iterations logged{% if s.iterations_planned %} of
{{ s.iterations_planned }}{% endif %}
{% if problem %}<div class="note problem">{{ problem }}</div>{% endif %}</div>{% endfor %}
{% if curves_shown %}<div class="charts" id="charts">{% for c in charts %}
<div class="chartbox" id="box-{{ c.id }}"><h3>{{ c.title }}</h3>{{ c.svg|safe }}
<div class="legend">{% for label, colour, dash in c.legend %}<span><i style="background:
{{ colour }};{% if dash %}height:2px;border-top:2px dashed {{ colour }};background:none{% endif %}">
</i>{{ label }}</span>{% endfor %}</div></div>{% endfor %}</div>{% endif %}
{% for r, s, problem in runs %}{% if s.tables %}<h2>Rollouts of {{ r.name }}, by iteration</h2>
<p class="iterations" id="iterations-{{ loop.index0 }}">{% for it in s.tables %}
<a href="{{ url_for('iteration_page', name=r.name, it=it) }}">{{ it }}</a> {% endfor %}</p>
{% endif %}{% endfor %}{% endblock %}"""

ROLLOUTS = """{% extends "base" %}{% block crumbs %} &rsaquo;
{% if run.kind == "eval" %}{{ run.name }}{% else %}<a href="{{ url_for('run_page', r=run.name) }}">
{{ run.name }}</a> &rsaquo; iteration {{ it }}{% endif %}{% endblock %}
{% block body %}<h1>{{ title }}</h1>
{% for n in notes %}<div class="note">{{ n }}</div>{% endfor %}
<form class="filters" method="get" id="filters">
{% if group is not none %}<input type="hidden" name="group" value="{{ group }}">{% endif %}
<label>task type <select name="type" id="f-type"><option value="">all</option>
{% for tt in task_types %}<option value="{{ tt }}"{% if tt == f.type %} selected{% endif %}>
{{ tt }}</option>{% endfor %}</select></label>
<label>outcome <select name="outcome" id="f-outcome">{% for o in ["", "won", "lost"] %}
<option value="{{ o }}"{% if o == f.outcome %} selected{% endif %}>{{ o or "all" }}</option>
{% endfor %}</select></label>
{% if has_adv %}<label><input type="checkbox" name="shared" value="1" id="f-shared"
{% if f.shared %} checked{% endif %}> steps in a shared state only</label>{% endif %}
<button type="submit" id="f-apply">apply</button></form>
<table class="list" id="groups"><tr><th>{{ "group" if has_adv else "page" }}</th><th>task</th>
<th>type</th><th>rollouts</th><th>won</th><th>steps</th>{% if has_adv %}<th>in shared states
</th>{% endif %}</tr>{% for g in groups %}<tr class="grouprow{% if g.group == group %} current
{% endif %}" data-group="{{ g.group }}"><td><a href="{{ g.href }}">{{ g.group }}</a></td>
<td>{{ g.task_id }}</td><td>{{ g.task_type }}</td><td>{{ g.rollouts }}</td><td>{{ g.won }}</td>
<td>{{ g.steps }}</td>{% if has_adv %}<td>{{ g.shared }}</td>{% endif %}</tr>{% endfor %}
</table>{% if not groups %}<p class="note" id="no-groups">No group matches the filters.</p>
{% endif %}
{% if columns %}<h2 id="group-title">{{ group_title }}</h2>
<div class="rollouts" id="rollouts" data-columns="{{ columns|length }}"
 style="grid-template-columns:repeat({{ columns|length }},minmax(230px,1fr))">
{% for c in columns %}<div class="colhead {{ 'won' if c.won else 'lost' }}" data-traj=
"{{ c.trajectory }}" style="grid-row:1;grid-column:{{ loop.index }}">rollout {{ c.trajectory }}
&middot; {{ "won" if c.won else "lost" }} &middot; score {{ "%.2f"|format(c.score) }}
&middot; {{ c.steps|length }} steps{% if c.task_type %} &middot; {{ c.task_type }}{% endif %}
</div>{% endfor %}
{% for c in columns %}{% set col = loop.index %}{% for s in c.steps %}
{% if s.hidden %}<div class="step hidden" style="grid-row:{{ s.t + 2 }};grid-column:{{ col }}"
 data-traj="{{ c.trajectory }}" data-t="{{ s.t }}">t={{ s.t }}: state not shared</div>
{% else %}<div class="step{% if s.zero %} zero{% endif %}" style="grid-row:{{ s.t + 2 }};
grid-column:{{ col }}" data-traj="{{ c.trajectory }}" data-t="{{ s.t }}"
 data-key="{{ s.state_key }}"{% if s.advantage is not none %} data-adv="{{ s.advantage }}"
{% endif %}><div><b>t={{ s.t }}</b> <span class="chip{% if s.unshared %} unshared{% endif %}"
 data-key="{{ s.state_key }}" title="state {{ s.state_key }}" style="background:{{ s.colour }}">
{{ s.state_key[:8] }}</span>{% if s.group_size is not none %} <span class="kv">state group
<b class="gsize">{{ s.group_size }}</b></span>{% endif %}</div>
<div>{% if s.well_formed is not none %}<span class="badge {{ 'ok' if s.well_formed else 'bad' }}
">{{ "well-formed" if s.well_formed else "malformed" }}</span>{% endif %}
{% if s.action_valid is not none %}<span class="badge {{ 'ok' if s.action_valid else 'bad' }}">
{{ "admissible" if s.action_valid else "not admissible" }}</span>{% endif %}
<span class="kv">r <b>{{ "%.3g"|format(s.reward) }}</b></span>
{% if s.zero %}<span class="badge zerotag" title="no other rollout of the group visited this
 state (GAGPO), or every step of its group agreed">A = 0</span>{% endif %}</div>
{% for b in s.bars %}<div class="barlabel">{{ b.label }} <b>{{ b.text }}</b></div>
<div class="bar {{ b.cls }}" data-value="{{ b.value }}"><div class="mid"></div>
<div class="fill {{ 'pos' if b.value >= 0 else 'neg' }}" style="width:{{ b.width }}%"></div>
</div>{% endfor %}
<div class="kv">action <code class="action">{{ s.action }}</code>
{% if s.shop %} &middot; <a class="shoplink" href="{{ s.shop }}" target="_blank">shop page
</a>{% endif %}{% if s.shop_after %} &middot; <a class="shoplink after" href="{{ s.shop_after }}"
 target="_blank" title="the page this last action led to">page after</a>{% endif %}</div>
{% if s.reply is not none %}<details class="reply" open><summary>reply</summary><pre>{{ s.reply }}
</pre></details>{% endif %}
{% if s.observation is not none %}<details class="obs"><summary>observation</summary><pre>
{{ s.observation }}</pre></details>{% endif %}</div>{% endif %}{% endfor %}{% endfor %}
</div>{% endif %}{% endblock %}"""

TEMPLATES = {"base": BASE, "error": ERROR, "index": INDEX, "run": RUN, "rollouts": ROLLOUTS}
