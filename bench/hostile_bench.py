"""Hostile drafts: what texts built to be expensive cost, and what they cost another caller.

    python -m bench.hostile_bench run [--seconds S]    # both parts below; one JSON object
    python -m bench.hostile_bench keys --database URL --count N    # (run's helper)

- ``parse``: the CPU time (``time.process_time``) ``parse_yaml`` spends on each of a set of
  pathological texts (deep nesting, many tiny values, aliases, a huge key, many documents,
  a byte-order mark, unicode, a syntax error after nearly as many values as allowed), and
  how each ended: accepted, or the refusal's words.
- ``server``: a real ``guidepost-mcp serve`` (one worker, SQLite) and six agent keys. One
  key calls ``guide_flows`` in a loop, first alone (``calm``), then while the five others
  each keep one hostile ``guide_draft`` in flight (``hostile``): a 250 KB text of more
  than 100,000 one-character values, sent again as soon as it is answered. ``delay`` is
  the difference of the two phases' percentiles (ms): what five such drafts cost another
  caller.

Nothing here judges a figure; ``bench/run.py`` reports the delay against its target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from bench.e2e_bench import tool_call_body
from bench.servers import RPC_HEADERS, fresh_database, start_guidepost
from bench.stats import summary
from bench.synthetic import write_flows_dir

REPO = Path(__file__).resolve().parent.parent
HOSTILE_KEYS = 5
TEXT_BYTES = 250 * 1024


def hostile_draft() -> str:
    """A draft that looks like a flow and holds far more values than a flow may: a
    header, then ``nodes`` as a flow list of one-character values up to 250 KB."""
    head = "id: hostile\ntitle: Hostile\ncategory: bench\nentry: a\nnodes: ["
    count = (TEXT_BYTES - len(head) - 2) // 2
    return head + ",".join(["1"] * count) + "]\n"


def _filled(head: str, unit: str, tail: str = "") -> str:
    """``head``, then ``unit`` as many times as fit in 250 KB (UTF-8) with ``tail``; a
    ``#`` in ``unit`` is replaced by the unit's number."""
    parts, size, i = [head], len((head + tail).encode()), 0
    while size + len(unit.replace("#", str(i)).encode()) <= TEXT_BYTES:
        parts.append(unit.replace("#", str(i)))
        size += len(parts[-1].encode())
        i += 1
    return "".join(parts) + tail


def pathological_texts() -> dict[str, str]:
    near_limit = "id: x\na: [" + ",".join(["v" * 11] * 19_990) + "]\n"
    return {
        "flow list of tiny values": hostile_draft(),
        "block list of tiny values": _filled("id: x\na:\n", "- 1\n"),
        "flow mappings in a list": _filled("id: x\nnodes:\n", "  - {id: n, kind: tell}\n"),
        "keys without values": _filled("id: x\na: {", "k#,", "k}\n"),
        "deep flow lists": "id: x\na: " + "[" * 3000 + "]" * 3000 + "\n",
        "deep block mappings": "".join(" " * i + "k:\n" for i in range(700)),
        "an alias used 20,000 times": "id: x\nb: &b [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nc: ["
        + ", ".join(["*b"] * 20_000)
        + "]\n",
        "nested aliases (a bomb)": "".join(
            f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else "x"] * 9) + "]\n"
            for i in range(10)
        ),
        "many anchors": _filled("id: x\na: [", "&a# 1, ", "1]\n"),
        "a huge key": "id: x\n" + "k" * 200_000 + ": 1\n",
        "many documents": _filled("id: x\n", "---\na: 1\n"),
        "unicode values": _filled("id: x\na: [", "あ,", "あ]\n"),
        "a byte-order mark": "\ufeff" + hostile_draft()[:-1],
        "tags on every value": _filled("id: x\na: [", "!!str 1,", "1]\n"),
        "a syntax error after 19,990 values": near_limit + "b: [\n",
        "a list as a key after 19,990 values": near_limit + "? [k]\n: v\n",
    }


def parse_costs() -> dict[str, Any]:
    """CPU milliseconds of ``parse_yaml`` for each pathological text, and how it ended."""
    import yaml

    from flowcore.flow.yaml_safe import YamlRefused, parse_yaml

    out: dict[str, Any] = {}
    for name, text in pathological_texts().items():
        began = time.process_time()
        try:
            parse_yaml(text)
            outcome = "accepted"
        except YamlRefused as refused:
            outcome = f"refused: {refused}"
        except yaml.YAMLError as exc:
            outcome = "does not parse: " + " ".join(str(exc).split())
        out[name] = {
            "kb": round(len(text.encode("utf-8")) / 1024, 1),
            "cpu_ms": (time.process_time() - began) * 1000,
            "outcome": outcome[:160],
        }
    return out


# --- a real server ---------------------------------------------------------------------------


def make_keys(database_url: str, count: int) -> list[str]:
    """``count`` new agent keys on the database (migrated first): their secrets."""
    from bench.service_bench import setup

    setup(database_url, write_flows_dir(Path(tempfile.mkdtemp(prefix="hostile-keys-")), 1))
    from access_app.services import key_create

    return [key_create(name=f"bench_{i}")[1] for i in range(count)]


@dataclass
class Tally:
    flows_ms: list[float] = field(default_factory=list)
    drafts_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    refusals: dict[str, int] = field(default_factory=dict)


async def _timed_call(
    client: httpx2.AsyncClient, url: str, key: str, tool: str, body: bytes, tally: Tally
) -> tuple[float, dict[str, Any]] | None:
    """(milliseconds, the JSON-RPC answer) of one call with ``key``; None, noted, on an
    HTTP failure."""
    headers = {**RPC_HEADERS, "Authorization": f"Bearer {key}"}
    began = time.perf_counter()
    try:
        response = await client.post(url, content=body, headers=headers)
        response.raise_for_status()
    except httpx2.HTTPError as exc:
        tally.errors.append(f"{tool}: {type(exc).__name__}: {exc}"[:200])
        return None
    answer: dict[str, Any] = response.json()
    return (time.perf_counter() - began) * 1000, answer


async def _calls_of_guide_flows(
    client: httpx2.AsyncClient, url: str, key: str, until: float, tally: Tally
) -> None:
    body = tool_call_body("guide_flows", {})
    while time.perf_counter() < until:
        timed = await _timed_call(client, url, key, "guide_flows", body, tally)
        if timed is None:
            continue
        elapsed, answer = timed
        if answer.get("result", {}).get("isError", True):
            tally.errors.append(f"guide_flows: {json.dumps(answer)}"[:200])
            continue
        tally.flows_ms.append(elapsed)


async def _hostile_drafts(
    client: httpx2.AsyncClient, url: str, key: str, stop: asyncio.Event, tally: Tally
) -> None:
    body = tool_call_body("guide_draft", {"yaml": hostile_draft()})
    while not stop.is_set():
        timed = await _timed_call(client, url, key, "guide_draft", body, tally)
        if timed is None:
            continue
        elapsed, answer = timed
        tally.drafts_ms.append(elapsed)
        result = answer.get("result", {})
        said = json.loads(result["content"][0]["text"]) if result.get("content") else {}
        reason = f"{said.get('error', 'answered')}: {said.get('reason', '')}"
        tally.refusals[reason] = tally.refusals.get(reason, 0) + 1


async def _phases(url: str, keys: list[str], seconds: float) -> dict[str, Tally]:
    calm_key, hostile_keys = keys[0], keys[1:]
    timeout = httpx2.Timeout(600.0)
    async with httpx2.AsyncClient(timeout=timeout) as client:
        warm = Tally()
        await _calls_of_guide_flows(client, url, calm_key, time.perf_counter() + 1.0, warm)
        calm = Tally()
        await _calls_of_guide_flows(client, url, calm_key, time.perf_counter() + seconds, calm)
        hostile = Tally()
        stop = asyncio.Event()
        senders = [
            asyncio.create_task(_hostile_drafts(client, url, key, stop, hostile))
            for key in hostile_keys
        ]
        await asyncio.sleep(0.2)  # the five drafts are in flight
        await _calls_of_guide_flows(client, url, calm_key, time.perf_counter() + seconds, hostile)
        stop.set()
        await asyncio.gather(*senders)
    return {"calm": calm, "hostile": hostile}


def measure_server(seconds: float, tmp: Path) -> dict[str, Any]:
    flows = write_flows_dir(tmp / "flows", 10)
    with fresh_database("sqlite", tmp / "db", "") as url:
        done = subprocess.run(
            [sys.executable, "-m", "bench.hostile_bench", "keys", "--database", url]
            + ["--count", str(1 + HOSTILE_KEYS)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"creating keys failed:\n{done.stderr[-3000:]}")
        keys = json.loads(done.stdout.strip().splitlines()[-1])["keys"]
        # Every hostile draft is parsed: the budget of drafts an hour would otherwise refuse
        # all but the first ten of each key before parsing, and hide the parser's cost.
        server = start_guidepost(
            url, flows, tmp / "serve.log", key=keys[0], env={"GUIDEPOST_DRAFTS_PER_HOUR": "0"}
        )
        try:
            tallies = asyncio.run(_phases(server.url, keys, seconds))
        finally:
            server.stop()
    calm, hostile = (summary(tallies[p].flows_ms) for p in ("calm", "hostile"))
    drafts = tallies["hostile"]
    return {
        "seconds": seconds,
        "hostile_keys": HOSTILE_KEYS,
        "draft_kb": round(len(hostile_draft()) / 1024, 1),
        "calm": calm,
        "hostile": hostile,
        "delay": {p: hostile[p] - calm[p] for p in ("p50", "p95", "p99")},
        "drafts": {**summary(drafts.drafts_ms), "answers": drafts.refusals},
        "errors": tallies["calm"].errors + drafts.errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run")
    run.add_argument("--seconds", type=float, default=10.0)
    keys = sub.add_parser("keys")
    keys.add_argument("--database", required=True)
    keys.add_argument("--count", type=int, required=True)
    options = parser.parse_args()
    if options.what == "keys":
        result: dict[str, Any] = {"keys": make_keys(options.database, options.count)}
    else:
        tmp = Path(tempfile.mkdtemp(prefix="guidepost-bench-hostile-"))
        result = {"parse": parse_costs(), "server": measure_server(options.seconds, tmp)}
    json.dump(result, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
