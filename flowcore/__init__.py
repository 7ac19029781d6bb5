"""The core of guidepost: flows, the engine that walks them, their checks and drawings.

Plain Python, grouped by concern, each package importing only those before it:
``common`` (errors, limits, text, names, JSON), ``flow`` (the model, YAML loading, lint,
building, flow files, drafts), ``run`` (the engine, run state, paths, results, replay,
moving a run), ``checks`` (scenarios, guarantees, coverage, tests files) and ``drawing``
(layout, diagrams, text trees, a run on its flow). No Django, no database, no clock:
Django's apps call in, nothing here calls out (``tests/guidepost/test_layering.py``).
"""
