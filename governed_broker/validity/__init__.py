"""Behavioural validity: does the model behind the households respond to the world as people do?

A battery of vignettes (``configs/validity/``), rendered through the experiment's own context
builder and decided by its own governed broker, measured by small tests (directional, guards,
persona, invariance, test-retest, governance laundering, reason coherence), each passing only
when its confidence bound clears a declared threshold, and summarised in a *validity card*
stored under the key of the configuration (model, prompts, rules, battery); the card passes when
every primary test passes. Runs record the card of their configuration and, with
``validity.gate: block``, refuse to start without a passing one. docs/validity.md explains the
tests, the card and the gate.

Modules: ``battery`` (the YAML), ``power`` and ``plan`` (how many replies, which vignettes),
``budget`` (what it costs), ``situations`` (a vignette in the experiment's world), ``probe``
(asking the broker), ``stats`` and ``measures`` (the tests and their outcomes), ``card`` (key,
card, verdict, calibration), ``store``, ``gate`` (runs), ``validate`` and ``cli`` (the command),
``reference`` (the battery calibrated on the reference respondents of ``llm.reference``).
"""

#: The version of the code that judges a battery: the statistics (``stats``), the tests and
#: their outcomes (``measures``), the verdict (``card.verdict``) and the reference respondents
#: (``llm.reference``). **Bump it in the commit that changes an outcome of any of them**, and
#: regenerate ``configs/validity/calibration.json`` (the command in docs/validity.md): a
#: calibration of another version is ``out_of_date`` on every card, as one of another battery
#: is. A number, not a hash of the modules: a hash would call the calibration stale on every
#: comment or refactoring (and a regeneration takes half an hour); what a forgotten bump lets
#: through, tests/validity/test_calibration_file.py catches by judging the first battery seed
#: of the deaf and the rule respondents again against the outcomes the calibration stored.
CALIBRATION_VERSION = 2
