"""The domain: flows, their lint, and the engine that walks them.

Everything in this folder is plain Python: no Django import, no database, no
clock (``tests/guidepost/test_layering.py`` imports every module here and fails on
any Django import; ``mypy --strict`` covers the whole folder). Only ``files``
reads from disk. Django code (services, selectors, views, commands) calls in;
nothing here calls out. See ``docs/architecture.md``.
"""
