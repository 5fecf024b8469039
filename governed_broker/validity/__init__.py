"""Behavioural validity: does the model behind the households respond to the world as people do?

A battery of vignettes (``configs/validity/``), rendered through the experiment's own context
builder and decided by its own governed broker, measured by small tests (directional, persona
swap, invariance, test-retest, governance laundering, reason coherence) and summarised in a
*validity card* stored under the key of the configuration (model, prompts, rules, battery).
Runs record the card of their configuration and, with ``validity.gate: block``, refuse to start
without a passing one. docs/validity.md explains the tests, the card and the gate.

Modules: ``battery`` (the YAML), ``plan`` (vignettes to ask), ``situations`` (a vignette in the
experiment's world), ``probe`` (asking the broker), ``stats`` and ``measures`` (the tests),
``card`` (key, card, store), ``gate`` (runs), ``validate`` and ``cli`` (the command).
"""
