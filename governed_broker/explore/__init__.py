"""The run explorer: a browser app to look at a run or sweep and explain any decision.

``governed-broker explore RUN_OR_SWEEP_DIR`` (or ``python run.py X.yaml --explore``) serves a
Solara app (Mesa's visualisation stack) on this machine. The modules below the app are plain
Python and tested without a browser:

* ``files``: which directory to read (a finished run, a live ``.partial`` run, a sweep) and how
  to read files that a running run is still appending to;
* ``run_view``: one run's tables, decision audit, reflections, memories, prompts, validity card
  and benchmark fit, as read at one moment;
* ``timeline``: one household's years, every fact of each decision joined in one place;
* ``filters``: which decisions match a filter (rejected, a rule fired, laundering, groups);
* ``charts``: the figures as ECharts options (neighbourhood, time series);
* ``app`` (needs the ``explore`` extra) and ``server``: the browser app and how it is served.
"""
