"""docs/research/voice-agent-latency-budget.md from the bench's JSON.

    python -m bench.report [--json var/bench/latest.json] [--out PAGE]

The other components' figures are published ones (sources listed in the page); this
server's are the bench's, as measured: nothing here is edited by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.run import DEFAULT_OUT, REPO, lookup

DEFAULT_PAGE = REPO / "docs" / "research" / "voice-agent-latency-budget.md"
TURN_MS = 2500  # a voice agent's turn end to end, as issue 12 takes it

# (component, low ms, high ms, what the figure is, source numbers)
COMPONENTS: list[tuple[str, int, int, str, list[int]]] = [
    (
        "end of speech detected (VAD / end-of-turn)",
        40,
        300,
        "silence or model end-of-turn",
        [1, 2, 3],
    ),
    (
        "speech recognition, final transcript",
        80,
        500,
        "streaming STT after end of speech",
        [1, 2, 3, 4],
    ),
    ("LLM, time to first token", 200, 1500, "p50 to bad case; p95 can reach 2.2 s", [1, 2, 3, 5]),
    (
        "speech synthesis, first audio",
        75,
        400,
        "streaming TTS; 75 ms is model inference alone",
        [1, 2, 6],
    ),
    ("network and buffering", 30, 200, "WebRTC/WebSocket both ways, jitter buffer", [1, 2, 3]),
]
SOURCES = [
    "Cognilium, “Voice AI latency budget: a deep dive” — VAD 150 ms, STT 350 ms, LLM 500 ms, "
    "TTS 250 ms, network 200 ms: https://cognilium.ai/blogs/voice-ai-latency-budget-deep-dive",
    "CallingScout, “below 400ms: the transcribe → reason → speak budget” — p50 end-of-turn "
    "40–80 ms, STT final 80–150 ms, LLM first byte 200–350 ms, TTS first chunk 150–250 ms, "
    "transport 30–60 ms: https://callingscout.ai/research/below-400ms",
    "promptz2h, “Latency budgeting: speed goals for realtime voice” — STT 300–500 ms, LLM "
    "800–1500 ms, TTS 200–400 ms sequential; 1.4–2.9 s total: "
    "https://promptz2h.com/chapter_17_multimodal_and_voice_ai_engineering/series_04_realtime_voice_agents/latency_budgeting_voice_systems",
    "Deepgram, “Measuring STT latency” (end-of-turn latency as the voice-agent metric): "
    "https://developers.deepgram.com/docs/measuring-streaming-latency",
    "AlterSquare, “Building a production voice agent: the latency budget nobody talks about” — "
    "LLM TTFT 566 ms p50, 2,246 ms p95: https://altersquare.io/?p=12917",
    "ElevenLabs models overview (Flash v2.5 ~75 ms) and latency guide (75 ms is model "
    "inference only): https://elevenlabs.io/docs/overview/models, "
    "https://elevenlabs.io/docs/api-reference/reducing-latency",
    "Levinson & Torreira, “Timing in turn-taking and its implications for processing models of "
    "language”, Frontiers in Psychology 2015 — gaps between human turns ≈ 200 ms: "
    "https://pmc.ncbi.nlm.nih.gov/articles/PMC4464110",
]
# The reference published for this design, measured on a Raspberry Pi 5 (issue 12).
PI5 = {
    "transition": 0.006,
    "transition_sqlite": 0.76,
    "e2e_http": 9.1,
}


def _ms(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, int | float) else "—"


def _busy(machine: dict[str, Any]) -> str:
    """What the load average says about the figures."""
    load, cpus = machine.get("load_average") or [0.0], machine.get("cpus") or 1
    if load[0] > cpus:
        return (
            "The load was above the CPU count: every figure below is inflated by waiting for "
            "a CPU, and the tails most."
        )
    return "The machine was otherwise quiet (load below its CPU count) when the run began."


def _reading(data: dict[str, Any]) -> str:
    """How far the machine itself sets the figures: the engine's control, and the floor
    alone at 64 clients."""
    control = lookup(data, "engine.control") or {}
    plain = lookup(data, "engine.answer_plain") or {}
    loaded = lookup(data, "e2e.sqlite.w2_c64") or {}
    parts = ["**Reading these figures.**"]
    if control and plain:
        parts.append(
            f"A control with no engine in it (a fixed function that only builds small dicts "
            f"and tuples) took {_ms(control['p50'], 2)} µs at p50 and {_ms(control['p95'], 2)} "
            f"µs at p95 (×{control['p95'] / control['p50']:.2f}): that spread is the "
            f"machine's own; the engine's plain answer spread ×{plain['p95'] / plain['p50']:.2f}."
        )
    if loaded.get("floor_calls_per_s"):
        parts.append(
            f"At 64 clients on 2 workers, the floor alone (a trivial tool, no database) "
            f"answered {_ms(loaded['floor_calls_per_s'], 0)} calls/s with p99 "
            f"{_ms(loaded.get('floor_alone_p99'))} ms: the most this machine, this client "
            "(which shares its cores) and this HTTP stack allow any tool, so no step rate "
            "above it can be measured here."
        )
    parts.append("The ratios to the floor are the figures least affected by the machine.")
    return " ".join(parts)


def _kinds(data: dict[str, Any]) -> list[str]:
    """A check step and a lookup step beside a label step, end to end (issue 49)."""
    lines = [
        "",
        "## A check step and a lookup step, beside a label step",
        "",
        "One `guide_answer` passing a plain label, one passing a check node and one passing "
        "a lookup node (its endpoint on loopback, answering at once), each client calling "
        "them in turn on the same 1-worker server, so that the three see the same machine "
        "at the same moment.",
        "",
        "| database | clients | label p50 | label p95 | check p95 | ×label | lookup p95 "
        "| ×label | endpoint CPU a call | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for vendor, settings in data.get("e2e_kinds", {}).items():
        for k in settings.values():
            lines.append(
                f"| {vendor} | {k['concurrency']} | {_ms(k['label']['p50'])} | "
                f"{_ms(k['label']['p95'])} | {_ms(k['check']['p95'])} | "
                f"{_ms(k['check_ratio_p95'], 2)} | {_ms(k['lookup']['p95'])} | "
                f"{_ms(k['lookup_ratio_p95'], 2)} | {_ms(k.get('endpoint_cpu_ms'))} | "
                f"{k['errors']} |"
            )
    return lines


def render(data: dict[str, Any]) -> str:
    engine_p95_ms = lookup(data, "engine.answer_plain.p95")
    engine_p95_ms = engine_p95_ms / 1000 if isinstance(engine_p95_ms, int | float) else None
    sqlite_step = lookup(data, "service.sqlite.service.p95")
    sqlite_dispatch = lookup(data, "service.sqlite.dispatch.p95")
    pg_step = lookup(data, "service.postgresql.service.p95")
    e2e = lookup(data, "e2e.sqlite.w1_c1") or {}
    e2e_pg = lookup(data, "e2e.postgresql.w1_c1") or {}
    loaded = lookup(data, "e2e.sqlite.w2_c64") or {}
    loaded_pg = lookup(data, "e2e.postgresql.w2_c64") or {}
    machine = data.get("machine", {})
    ours_p95 = e2e.get("p95")
    lines = [
        "# A voice turn's latency budget, and this server's share of it",
        "",
        f"Generated by `python -m bench.report` from the bench's JSON (`{data.get('when', '?')}`, "
        f"commit `{data.get('commit', '?')}`"
        + (", **quick run: sizes too small to mean anything**" if data.get("quick") else "")
        + "; the bench writes it under var/bench/, which the repository does not keep: this "
        "page is the run's record). Do not edit by hand: run `python3 scripts/dev.py bench`, "
        "then the report.",
        "",
        "## The machine",
        "",
        f"{machine.get('cpus', '?')} CPUs, Python {machine.get('python', '?')}, "
        f"{machine.get('platform', '?')}. Load average at the start "
        f"{', '.join(f'{x:.1f}' for x in machine.get('load_average', []))}, at the end "
        f"{', '.join(f'{x:.1f}' for x in machine.get('load_average_end', []))}; a fixed "
        f"2-million-step Python loop took {_ms(machine.get('loop_2m_ms'), 0)} ms. "
        + _busy(machine),
        "",
        f"## A turn of about {TURN_MS / 1000:.1f} s",
        "",
        "From the moment the person stops speaking to the first audio of the reply, a "
        "cascaded voice agent (speech recognition → LLM → speech synthesis) spends its time "
        "roughly as below (published figures; sources at the end). People expect the reply "
        "within a few hundred milliseconds: the gap between human turns is about 200 ms [7].",
        "",
        "| component | low (ms) | high (ms) | what | sources |",
        "|---|---:|---:|---|---|",
    ]
    for name, low, high, what, sources in COMPONENTS:
        refs = ", ".join(f"[{n}]" for n in sources)
        lines.append(f"| {name} | {low} | {high} | {what} | {refs} |")
    share = (ours_p95 / TURN_MS * 100) if isinstance(ours_p95, int | float) else None
    loaded_p99 = loaded.get("p99")
    lines += [
        f"| **this server: one `guide_answer` over HTTP MCP, p95** | | **{_ms(ours_p95)}** | "
        "measured, 1 client, SQLite | bench |",
        "",
        "An agent makes one tool call per turn in the usual case (a `guide_answer`, or a "
        "`guide_start` on the first turn): the LLM emits the call, waits for its result, and "
        "only then writes the words to say, so the server's time adds to the turn in full.",
        "",
        f"**Share of a {TURN_MS} ms turn at p95:** "
        + (f"{share:.2f}% ({_ms(ours_p95)} ms) with one client" if share is not None else "—")
        + (
            f"; {loaded_p99 / TURN_MS * 100:.2f}% at p99 ({_ms(loaded_p99)} ms) with 64 clients "
            "on 2 workers."
            if isinstance(loaded_p99, int | float)
            else "."
        ),
        "",
        "## Side by side: the Raspberry Pi 5 reference, the SDK's floor, and this machine",
        "",
        "| figure | Pi 5 reference (ms) | this machine (ms) | floor (ms) |",
        "|---|---:|---:|---:|",
        f"| engine transition, p95 (a plain answer on 40 nodes) | {PI5['transition']} | "
        f"{_ms(engine_p95_ms, 4)} | |",
        f"| transition with SQLite, p95 (`run_answer`) | {PI5['transition_sqlite']} | "
        f"{_ms(sqlite_step)} | |",
        f"| … through the dispatcher (rate limit, audit), p95 | | {_ms(sqlite_dispatch)} | |",
        f"| transition with PostgreSQL, p95 | | {_ms(pg_step)} | |",
        f"| end to end over HTTP MCP, p95, 1 client, SQLite | {PI5['e2e_http']} | "
        f"{_ms(e2e.get('p95'))} (×{_ms(e2e.get('ratio_p95'), 2)} the floor) | "
        f"{_ms(e2e.get('floor_p95'))} |",
        f"| end to end over HTTP MCP, p95, 1 client, PostgreSQL | | {_ms(e2e_pg.get('p95'))} "
        f"(×{_ms(e2e_pg.get('ratio_p95'), 2)}) | {_ms(e2e_pg.get('floor_p95'))} |",
        f"| 64 clients, 2 workers, SQLite: p99, steps/s, errors | | {_ms(loaded.get('p99'))}, "
        f"{_ms(loaded.get('steps_per_s'), 0)}/s, {loaded.get('errors', '—')} | |",
        f"| 64 clients, 2 workers, PostgreSQL: p99, steps/s, errors | | "
        f"{_ms(loaded_pg.get('p99'))}, {_ms(loaded_pg.get('steps_per_s'), 0)}/s, "
        f"{loaded_pg.get('errors', '—')} | |",
        "",
        "The floor is a trivial tool on a bare server of the same MCP SDK, transport settings "
        "and uvicorn options, called by the same client right after each of ours (call for "
        "call), so both see the same machine at the same moment. The store floor is the same "
        "server whose tool records a step as `guide_answer` does (the run's locked read, its "
        "UPDATE, the step's and the audit record's INSERTs, one transaction) through the bare "
        "database driver, called right after the floor: what recording each step costs any "
        "server, with nothing else of ours.",
        "",
        _reading(data),
        "",
        "## Every setting measured end to end",
        "",
        "| database | workers | clients | p50 | p95 | floor p95 | ×floor | store floor p95 "
        "| ×store floor | p99 (alone) | steps/s | floor alone, calls/s "
        "| store floor alone, calls/s | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for vendor, settings in data.get("e2e", {}).items():
        for figures in settings.values():
            lines.append(
                f"| {vendor} | {figures['workers']} | {figures['concurrency']} | "
                f"{_ms(figures['p50'])} | {_ms(figures['p95'])} | {_ms(figures['floor_p95'])} | "
                f"{_ms(figures['ratio_p95'], 2)} | {_ms(figures.get('store_p95'))} | "
                f"{_ms(figures.get('ratio_to_store_p95'), 2)} | {_ms(figures['p99'])} | "
                f"{_ms(figures['steps_per_s'], 0)} | "
                f"{_ms(figures.get('floor_calls_per_s'), 0)} | "
                f"{_ms(figures.get('store_calls_per_s'), 0)} | {figures['errors']} |"
            )
    lines += _kinds(data)
    lines += ["", "## Targets (issue 12), as measured", ""]
    for verdict in data.get("targets", []):
        mark = {True: "met", False: "**missed**", None: "not measured"}[verdict["met"]]
        value = verdict["value"]
        shown = _ms(value) if isinstance(value, float) else str(value)
        lines.append(f"- {verdict['target']}: {shown} — {mark}")
    lines += ["", "## Sources", ""]
    lines += [f"{i}. {source}" for i, source in enumerate(SOURCES, start=1)]
    lines += [
        "",
        "The Pi 5 figures are the reference published for this design, as issue 12 quotes "
        "them (transition p95 0.006 ms, with SQLite 0.76 ms, end to end over HTTP MCP 9.1 ms).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--out", type=Path, default=DEFAULT_PAGE)
    options = parser.parse_args()
    data = json.loads(options.json.read_text(encoding="utf-8"))
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(render(data), encoding="utf-8")
    print(options.out)


if __name__ == "__main__":
    main()
