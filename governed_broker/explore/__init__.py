"""The run explorer: a browser app to look at a run or sweep and explain any decision.

``governed-broker explore RUN_OR_SWEEP_DIR`` (or ``python run.py X.yaml --explore``) serves a
Solara app (Mesa's visualisation stack) on this machine. The modules below the app are plain
Python and tested without a browser:

* ``files``: which directory to read (a finished run, a live ``.partial`` run, a sweep) and how
  to read files that a running run is still appending to;
* ``run_view``: one run's tables, decision audit, reflections, memories, prompts, validity card
  and benchmark fit, as read at one moment;
* ``timeline``: one household's years, every fact of each decision joined in one place;
* ``validity_card``: the minimal shape of ``validity_card.json`` the first page reads;
* ``sweep_index``: a sweep's runs, to pick one;
* ``filters``: which decisions match a filter (rejected, a rule fired, laundering, groups);
* ``layout`` and ``charts``: where households are drawn, and the figures as ECharts options;
* ``app`` and ``views`` (need the ``explore`` extra), ``server`` and ``cli``: the browser app,
  how it is served and the ``explore`` command. See docs/explorer.md.
"""
