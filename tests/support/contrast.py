"""Text contrast in a real browser, as WCAG 2.2 AA measures it (success criterion 1.4.3).

``contrast_failures`` reads every piece of text inside some parts of a page the way a
person meets it: the colour chromium computed for the text (``color``, or ``fill`` for
SVG text), against what is really behind it: for HTML, the first background up the
ancestors that is not transparent (semi-transparent ones composited on the way); for SVG
text, the shape drawn under the middle of the text (``elementsFromPoint``), else the
HTML behind the drawing. Text needs 4.5:1, large text (24 px, or 18.66 px bold) 3:1.
Closed ``<details>`` in the parts are opened first, so nothing hidden goes unchecked;
hidden text (no box) is skipped.

``low_contrast`` reads a whole page as it stands instead (nothing opened, nothing
scrolled, so a screenshot taken after it shows the page as it came), 4.5:1 for all text;
its SVG text is measured against the diagram's own node shape or label box, every colour
of a pattern fill included.

``outline_failures`` measures the outlines of SVG shapes instead (success criterion
1.4.11, 3:1): against the page behind the drawing and against the shape's own fill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Page

# Returns one entry per piece of text: its text, ratio, colours and where it is.
_MEASURE = r"""
(parts) => {
  const parse = (css) => {
    const m = /^rgba?\(([^)]+)\)$/.exec(css.trim());
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, under) => {
    const a = top.a + under.a * (1 - top.a);
    if (a === 0) return {r: 0, g: 0, b: 0, a: 0};
    const mix = (x, y) => (x * top.a + y * under.a * (1 - top.a)) / a;
    return {r: mix(top.r, under.r), g: mix(top.g, under.g), b: mix(top.b, under.b), a};
  };
  const luminance = (c) => {
    const lin = (v) => {
      v /= 255;
      return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  };
  const opacity = (el) => {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      o *= Number(getComputedStyle(e).opacity);
    }
    return o;
  };
  const htmlBackground = (el) => {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let bg = {r: 255, g: 255, b: 255, a: 1};  // the canvas, if nothing is opaque
    for (const layer of layers.reverse()) bg = over(layer, bg);
    return bg;
  };
  const SHAPES = new Set(["rect", "path", "polygon", "ellipse", "circle", "polyline"]);
  const svgBackground = (text) => {
    const box = text.getBoundingClientRect();
    const x = box.left + box.width / 2, y = box.top + box.height / 2;
    for (const e of document.elementsFromPoint(x, y)) {
      if (e === text || text.contains(e) || e.contains(text)) continue;
      if (!(e instanceof SVGElement)) return htmlBackground(e);
      if (!SHAPES.has(e.localName)) continue;
      const fill = getComputedStyle(e).fill;
      if (fill === "none") continue;
      const c = parse(fill);
      if (!c) return {unreadable: fill};
      if (c.a > 0) return over(c, htmlBackground(text.ownerSVGElement));
    }
    return htmlBackground(text.ownerSVGElement);
  };
  const results = [];
  for (const selector of parts) {
    for (const part of document.querySelectorAll(selector)) {
      part.querySelectorAll("details").forEach((d) => { d.open = true; });
      for (const el of [part, ...part.querySelectorAll("*")]) {
        const own = [...el.childNodes]
          .filter((n) => n.nodeType === 3)
          .map((n) => n.textContent)
          .join("")
          .trim();
        if (!own || el.getClientRects().length === 0) continue;
        const style = getComputedStyle(el);
        if (style.visibility !== "visible" || style.display === "none") continue;
        const svg = el instanceof SVGElement;
        el.scrollIntoView({block: "center", inline: "center"});
        const bg = svg ? svgBackground(el) : htmlBackground(el);
        const fgCss = svg ? style.fill : style.color;
        const fg = parse(fgCss);
        const size = parseFloat(style.fontSize), weight = Number(style.fontWeight) || 400;
        const large = size >= 24 || (size >= 18.66 && weight >= 700);
        const classes = (el.getAttribute("class") || "").trim().split(/\s+/).filter(Boolean);
        const where = selector + " " + el.localName + (el.id ? "#" + el.id : "") +
          classes.map((c) => "." + c).join("");
        const text = own.slice(0, 60);
        if (!fg || bg.unreadable) {
          const bgCss = String(bg.unreadable || "");
          results.push({text, where, ratio: 0, needed: 4.5, fg: fgCss, bg: bgCss});
          continue;
        }
        const seen = over({...fg, a: fg.a * opacity(el)}, bg);
        const [hi, lo] = [luminance(seen), luminance(bg)].sort((a, b) => b - a);
        const ratio = (hi + 0.05) / (lo + 0.05);
        const rgb = (c) => `rgb(${Math.round(c.r)}, ${Math.round(c.g)}, ${Math.round(c.b)})`;
        const needed = large ? 3 : 4.5;
        results.push({text, where, ratio, needed, fg: rgb(seen), bg: rgb(bg)});
      }
    }
  }
  window.scrollTo(0, 0);
  return results;
}
"""


@dataclass(frozen=True)
class Contrast:
    """One piece of text as measured: ``ratio`` against the ``needed`` one."""

    text: str
    where: str
    ratio: float
    needed: float
    fg: str
    bg: str

    def __str__(self) -> str:
        return (
            f"{self.where}: {self.text!r} {self.ratio:.2f}:1 < {self.needed:g}:1 "
            f"({self.fg} on {self.bg})"
        )


def text_contrasts(page: Page, parts: list[str]) -> list[Contrast]:
    """Every piece of visible text inside the elements ``parts`` (CSS selectors) select."""
    measured: list[dict[str, Any]] = page.evaluate(_MEASURE, parts)
    return [Contrast(**m) for m in measured]


def contrast_failures(page: Page, parts: list[str]) -> list[Contrast]:
    """The text inside ``parts`` below WCAG AA's contrast; an empty list when all reads."""
    return [c for c in text_contrasts(page, parts) if c.ratio < c.needed]


# The whole page at once (low_contrast), from computed styles: an HTML
# element's colour over its background (the ancestors' background colours composited),
# an SVG text's fill over the node shape or label box it sits on (every colour of a
# pattern fill), or over the page when it sits on neither.
_WHOLE_PAGE = r"""
(minimum) => {
  const parse = (c) => {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const channel = (v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  const lum = (c) => 0.2126 * channel(c[0]) + 0.7152 * channel(c[1]) + 0.0722 * channel(c[2]);
  const ratio = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const over = (top, under) =>
    [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const pageBehind = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    return layers.reverse().reduce((under, top) => over(top, under), [255, 255, 255, 1]);
  };
  const fills = (el, svg) => {
    const fill = getComputedStyle(el).fill;
    const ref = /url\("?#([^")]+)"?\)/.exec(fill);
    if (!ref) return [parse(fill)];
    const pattern = svg.querySelector("#" + ref[1]);
    return [...pattern.children].map((part) => parse(getComputedStyle(part).fill));
  };
  const behindSvgText = (text) => {
    const svg = text.ownerSVGElement;
    const under = pageBehind(svg);
    const holder = text.closest("g.node, g.edge");
    const ground = holder && holder.querySelector(":scope > .shape, :scope > .label-bg");
    if (!ground) return [under];
    return fills(ground, svg).map((c) => over(c, under));
  };
  const skip = new Set(["SCRIPT", "STYLE", "TITLE", "OPTION", "NOSCRIPT"]);
  const failures = [];
  let checked = 0;
  for (const el of document.body.querySelectorAll("*")) {
    if (skip.has(el.tagName.toUpperCase())) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const style = getComputedStyle(el);
    if (style.visibility !== "visible" || el.closest(".visually-hidden")) continue;
    const isSvg = el instanceof SVGElement;
    const ink = parse(isSvg ? style.fill : style.color);
    const grounds = isSvg ? behindSvgText(el.closest("text")) : [pageBehind(el)];
    checked += 1;
    for (const ground of grounds) {
      const r = ratio(over(ink, ground), ground);
      if (r < minimum) {
        failures.push(`${r.toFixed(2)} ${el.tagName}.${el.getAttribute("class") || ""} ` +
          `"${el.textContent.trim().slice(0, 30)}" ${ink} on ${ground}`);
        break;
      }
    }
  }
  return { checked, failures };
}
"""


def low_contrast(tab: Page) -> list[str]:
    """Text on the page whose contrast is below WCAG AA's 4.5:1."""
    found = tab.evaluate(_WHOLE_PAGE, 4.5)
    assert found["checked"] > 20  # it read the page
    return list(found["failures"])


# The outline of SVG shapes against what is on either side of it (WCAG 2.2 1.4.11,
# non-text contrast, 3:1): the shape's own fill inside (when it has one), and the HTML
# behind the drawing outside.
_OUTLINES = r"""
(selector) => {
  const parse = (css) => {
    const m = /^rgba?\(([^)]+)\)$/.exec((css || "").trim());
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, under) => {
    const a = top.a + under.a * (1 - top.a);
    const mix = (x, y) => (x * top.a + y * under.a * (1 - top.a)) / a;
    return {r: mix(top.r, under.r), g: mix(top.g, under.g), b: mix(top.b, under.b), a};
  };
  const lum = (c) => {
    const lin = (v) => {
      v /= 255;
      return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  };
  const ratio = (x, y) => {
    const [hi, lo] = [lum(x), lum(y)].sort((a, b) => b - a);
    return (hi + 0.05) / (lo + 0.05);
  };
  const behind = (el) => {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let bg = {r: 255, g: 255, b: 255, a: 1};
    for (const layer of layers.reverse()) bg = over(layer, bg);
    return bg;
  };
  const rgb = (c) => `rgb(${Math.round(c.r)}, ${Math.round(c.g)}, ${Math.round(c.b)})`;
  const results = [];
  for (const shape of document.querySelectorAll(selector)) {
    const style = getComputedStyle(shape);
    const page = behind(shape.ownerSVGElement);
    const stroke = parse(style.stroke);
    const fill = parse(style.fill);
    const where = selector + " in " + (shape.closest("[id]") || {}).id;
    const add = (text, ratio, fg, bg) => results.push({text, where, ratio, needed: 3, fg, bg});
    if (!stroke) { add("outline", 0, style.stroke, ""); continue; }
    const seen = over(stroke, page);
    add("outline outside", ratio(seen, page), rgb(seen), rgb(page));
    if (fill && fill.a > 0) {
      const inside = over(fill, page);
      add("outline inside", ratio(seen, inside), rgb(seen), rgb(inside));
    }
  }
  return results;
}
"""


def outline_failures(page: Page, selector: str) -> list[Contrast]:
    """The SVG shapes ``selector`` selects whose outline is below 3:1 against the page
    behind the drawing or against their own fill; an empty list when every one stands out.
    Fails when the selector matches nothing (nothing would have been measured)."""
    measured: list[dict[str, Any]] = page.evaluate(_OUTLINES, selector)
    assert measured, f"no shape matches {selector}"
    return [c for c in (Contrast(**m) for m in measured) if c.ratio < c.needed]
