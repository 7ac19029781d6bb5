/* guidepost pages: zoom and scroll for flow diagrams, and live updates of a run page.
   No inline script anywhere: pages load this file only (Content-Security-Policy friendly). */
(function () {
  "use strict";

  var ENDED = ["completed", "stalled", "closed"];
  var FAST_MS = 1000; // poll interval while a run may move
  var SLOW_MS = 10000; // after a minute of quiet on an ended run (guide_back can reopen it)
  var QUIET_MS = 60000;

  // Scrolls the frame so that ``box`` (a rectangle on the screen) is in its middle.
  function centre(scroll, box, smooth) {
    var outer = scroll.getBoundingClientRect();
    scroll.scrollTo({
      left: scroll.scrollLeft + box.left - outer.left - (outer.width - box.width) / 2,
      top: scroll.scrollTop + box.top - outer.top - Math.min(80, (outer.height - box.height) / 2),
      behavior: smooth ? "smooth" : "auto",
    });
  }

  function whereTheRunIs(scroll) {
    return scroll.querySelector(
      "g.node.state-current, g.node.state-stalled, g.node.state-completed"
    );
  }

  // The smallest rectangle around every element of ``elements``.
  function around(elements) {
    var left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
    elements.forEach(function (el) {
      var box = el.getBoundingClientRect();
      left = Math.min(left, box.left);
      top = Math.min(top, box.top);
      right = Math.max(right, box.right);
      bottom = Math.max(bottom, box.bottom);
    });
    return { left: left, top: top, width: right - left, height: bottom - top };
  }

  // The diagram's controls: buttons, and keys while the diagram has the focus.
  var ZOOM_STEP = 1.25;
  var ZOOM_MIN = 0.02; // small enough for Fit to show a 150-node flow on a phone
  var ZOOM_MAX = 4;
  var CHANGES_MIN_ZOOM = 0.5; // below this a draft's changes are not read, only found
  var PAN_PX = 60; // an arrow key moves the diagram this far; with Shift, four times as far
  var PAN_KEYS = {
    ArrowLeft: [-1, 0],
    ArrowRight: [1, 0],
    ArrowUp: [0, -1],
    ArrowDown: [0, 1],
  };

  function setUpDiagram(panel) {
    var scroll = panel.querySelector(".diagram-scroll");
    var svg = scroll && scroll.querySelector("svg.gp-diagram");
    if (!svg) return;
    var readout = panel.querySelector(".zoom-level");
    var width = parseFloat(svg.getAttribute("width"));
    var height = parseFloat(svg.getAttribute("height"));
    var scale = 1;
    // Resizes the drawing (so the frame scrolls over all of it), keeping the point at the
    // middle of the frame where it was, and says the new scale.
    function zoom(next) {
      var middleX = (scroll.scrollLeft + scroll.clientWidth / 2) / scale;
      var middleY = (scroll.scrollTop + scroll.clientHeight / 2) / scale;
      scale = Math.max(ZOOM_MIN, Math.min(ZOOM_MAX, next));
      svg.setAttribute("width", String(Math.round(width * scale)));
      svg.setAttribute("height", String(Math.round(height * scale)));
      scroll.scrollLeft = middleX * scale - scroll.clientWidth / 2;
      scroll.scrollTop = middleY * scale - scroll.clientHeight / 2;
      if (readout) readout.textContent = Math.round(scale * 100) + "%";
    }
    function fit() {
      zoom(Math.min(1, (scroll.clientWidth - 16) / width));
    }
    // A draft's new and changed nodes (mark-*) all in view: zoomed out as far as
    // CHANGES_MIN_ZOOM to show them together, else the first of them alone.
    function showChanges(marked) {
      var all = around(marked);
      var room = Math.min(
        (scroll.clientWidth - 16) / all.width,
        (scroll.clientHeight - 16) / all.height
      );
      if (room < 1 && room * scale >= CHANGES_MIN_ZOOM) zoom(scale * room);
      all = around(marked);
      var fits = all.width <= scroll.clientWidth && all.height <= scroll.clientHeight;
      centre(scroll, fits ? all : marked[0].getBoundingClientRect(), false);
    }
    panel.addEventListener("click", function (event) {
      var button = event.target.closest("button");
      if (!button) return;
      var how = button.getAttribute("data-zoom");
      if (how === "in") zoom(scale * ZOOM_STEP);
      else if (how === "out") zoom(scale / ZOOM_STEP);
      else if (how === "reset") zoom(1);
      else if (how === "fit") fit();
      if (button.getAttribute("data-find") === "current") {
        var here = whereTheRunIs(scroll);
        if (here) centre(scroll, here.getBoundingClientRect(), true);
      }
    });
    scroll.addEventListener("keydown", function (event) {
      if (event.ctrlKey || event.metaKey || event.altKey) return; // the browser's own zoom
      var pan = PAN_KEYS[event.key];
      var step = PAN_PX * (event.shiftKey ? 4 : 1);
      if (pan) scroll.scrollBy(pan[0] * step, pan[1] * step);
      else if (event.key === "+" || event.key === "=") zoom(scale * ZOOM_STEP);
      else if (event.key === "-" || event.key === "_") zoom(scale / ZOOM_STEP);
      else if (event.key === "0") fit();
      else return;
      event.preventDefault();
    });
    // First view: the run's node on a run page, what a draft changes on a draft's page,
    // else the top of the flow, centred.
    var marked = scroll.querySelectorAll("g.node.mark-new, g.node.mark-changed");
    var first = whereTheRunIs(scroll) || (marked.length ? null : scroll.querySelector("g.node"));
    if (first) centre(scroll, first.getBoundingClientRect(), false);
    else if (marked.length) showChanges(marked);
  }

  function setState(el, state) {
    var old = el.getAttribute("class") || "";
    var next = /\bstate-[a-z_]+/.test(old)
      ? old.replace(/\bstate-[a-z_]+/, "state-" + state)
      : old + " state-" + state;
    if (next !== old) el.setAttribute("class", next);
  }

  function live(run) {
    var url = run.getAttribute("data-live-url");
    var revision = parseInt(run.getAttribute("data-revision"), 10) || 0;
    var status = document.getElementById("live-status");
    var diagram = document.getElementById("diagram");
    var timeline = document.getElementById("timeline");
    var quietSince = Date.now();
    var polls = 0;

    function say(text, kind) {
      if (!status) return;
      status.textContent = text;
      status.setAttribute("data-kind", kind || "");
    }

    function apply(data) {
      Object.keys(data.node_states || {}).forEach(function (id) {
        var node = document.getElementById("node-" + id);
        if (node) setState(node, data.node_states[id]);
      });
      var taken = {};
      (data.taken || []).forEach(function (pair) {
        taken[pair[0] + "\u0000" + pair[1]] = true;
      });
      diagram.querySelectorAll("g.edge").forEach(function (edge) {
        var from = edge.getAttribute("data-from");
        var labels = (edge.getAttribute("data-label") || "").split(" ");
        var isTaken = labels.some(function (label) {
          return taken[from + "\u0000" + label];
        });
        setState(edge, isTaken ? "taken" : "plain");
      });
      if (data.reset) timeline.innerHTML = "";
      timeline.insertAdjacentHTML("beforeend", data.rows_html);
      document.getElementById("run-summary").innerHTML = data.summary_html;
      document.getElementById("run-values").innerHTML = data.values_html;
      var resolve = document.getElementById("run-resolve");
      if (resolve && data.resolve_html !== undefined) resolve.innerHTML = data.resolve_html;
      revision = data.revision;
      run.setAttribute("data-revision", String(revision));
    }

    function schedule() {
      var ended = ENDED.indexOf(run.getAttribute("data-state")) >= 0;
      var wait = ended && Date.now() - quietSince > QUIET_MS ? SLOW_MS : FAST_MS;
      window.setTimeout(poll, wait);
    }

    function poll() {
      if (document.hidden) {
        document.addEventListener("visibilitychange", poll, { once: true });
        return;
      }
      polls += 1;
      window.guidepostLive = { polls: polls, revision: revision };
      fetch(url + "?after=" + revision, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      })
        .then(function (response) {
          if (response.status === 401 || response.status === 403) {
            throw new Error("signed out");
          }
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (data) {
          if (data.revision !== revision) {
            apply(data);
            quietSince = Date.now();
          }
          run.setAttribute("data-state", data.state);
          if (data.final) {
            say("closed: live updates stopped", "ended");
            return;
          }
          // UTC and 24-hour, as every other time on the pages: the browser's locale may
          // say 11:09:53 AM in another zone.
          say("live · checked " + new Date().toISOString().slice(11, 19) + " UTC", "ok");
          schedule();
        })
        .catch(function (error) {
          if (error.message === "signed out") {
            say("signed out: reload the page to sign in", "error");
            return;
          }
          say("cannot reach the server; retrying", "error");
          window.setTimeout(poll, 5000);
        });
    }

    if (run.getAttribute("data-state") === "closed") {
      say("closed", "ended");
      return;
    }
    schedule();
  }

  document.querySelectorAll(".diagram-panel").forEach(setUpDiagram);
  var run = document.getElementById("run");
  if (run) live(run);
})();
