// uopir visualizer page: reads the embedded rewrite trace (version 1) and draws the chosen pass with dagre.
// The view lives in the URL hash (#pass=3&step=5&q=core.add&all=1&t=12,40&view=sources; pass and step count from 1,
// step=0 is "no step"), so every view is a link and the browser test steps through it without a driver.
"use strict";
(function () {
  const T = JSON.parse(document.getElementById("uopir-trace").textContent);
  const NODES = T.nodes;
  const PASSES = T.passes;
  const SOURCES = T.sources || [];
  const CAP = 200;            // nodes drawn per graph before "show all"
  const STEP_CAP = 60;        // nodes drawn per step subgraph
  const WALK_CAP = 20000;     // nodes visited when measuring a step's subgraph
  const REGION_OPS = new Set(["kernel.def", "device.program"]);
  const DIALECT_FILL = {core: "#cfe1fb", tensor: "#ffe2bf", kernel: "#d3f0d6", device: "#e8dcf7"};  // as uop-opt's dot
  const $ = (id) => document.getElementById(id);
  const SVGNS = "http://www.w3.org/2000/svg";

  // ---- state (from and to the hash) ----------------------------------------------------------------------------
  let state = {pass: 1, step: 0, q: "", all: false, toggled: new Set(), view: "pass"};

  function readHash() {
    const kv = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      if (!part) continue;
      const i = part.indexOf("=");
      kv[decodeURIComponent(i < 0 ? part : part.slice(0, i))] = i < 0 ? "" : decodeURIComponent(part.slice(i + 1));
    }
    const clamp = (v, lo, hi, d) => { const n = parseInt(v, 10); return isNaN(n) ? d : Math.max(lo, Math.min(hi, n)); };
    const pass = clamp(kv.pass, 1, Math.max(PASSES.length, 1), 1);
    const nsteps = PASSES.length ? (PASSES[pass - 1].steps || []).length : 0;
    return {pass: pass, step: clamp(kv.step, 0, nsteps, 0), q: kv.q || "", all: kv.all === "1",
            toggled: new Set((kv.t || "").split(",").filter((s) => s !== "")),
            view: kv.view === "sources" || !PASSES.length ? "sources" : "pass"};
  }

  function go(change) {
    const s = Object.assign({}, state, change);
    const parts = [];
    if (s.view === "sources") parts.push("view=sources");
    parts.push("pass=" + s.pass);
    if (s.step) parts.push("step=" + s.step);
    if (s.q) parts.push("q=" + encodeURIComponent(s.q));
    if (s.all) parts.push("all=1");
    if (s.toggled.size) parts.push("t=" + Array.from(s.toggled).join(","));
    const h = "#" + parts.join("&");
    if (location.hash === h) render(); else location.hash = h;
  }

  // ---- graph helpers ------------------------------------------------------------------------------------------
  const node = (id) => NODES[String(id)];
  const kids = (id) => {
    const n = node(id);
    return n ? (n.src || []).map(String).concat((n.regions || []).map(String)) : [];
  };
  // a child element with a class and a text
  function add(parent, tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    parent.appendChild(e);
    return e;
  }

  // nodes reachable from roots, in breadth-first order (closest to the roots first); stop(id) ends the walk there
  function reach(roots, stop, cap) {
    const seen = new Set(), order = [];
    const queue = roots.map(String);
    for (let qi = 0; qi < queue.length; qi++) {
      const id = queue[qi];
      if (seen.has(id) || !node(id)) continue;
      seen.add(id); order.push(id);
      if (cap && order.length >= cap) break;
      if (stop && stop(id)) continue;
      for (const k of kids(id)) if (!seen.has(k)) queue.push(k);
    }
    return order;
  }

  function dialectOf(n) { return n.dialect || (n.op || "").split(".")[0]; }
  function fillOf(n) {
    const d = dialectOf(n);
    if (DIALECT_FILL[d]) return DIALECT_FILL[d];
    let h = 0;
    for (const c of d) h = (h * 31 + c.charCodeAt(0)) % 360;
    return "hsl(" + h + ",60%,86%)";
  }
  function shortArg(a) { return a == null ? "" : (a.length > 28 ? a.slice(0, 27) + "\u2026" : a); }
  // the %name a node has in the text of the graph being drawn (the trace's per-pass names), else its first one
  let NAMES = {};
  const nameOf = (id) => NAMES[id] || node(id).name || "";
  function label(id, extra) {
    const n = node(id);
    const l2 = [nameOf(id), n.dtype || "", shortArg(n.arg)].filter((s) => s).join(" ");
    return [n.op + (extra || ""), l2];
  }
  function matches(id, q) {
    if (!q) return false;
    const n = node(id);
    if (q[0] === "%") return nameOf(id) === q;
    return (n.op || "").toLowerCase().includes(q.toLowerCase());
  }
  function regionHead(id) { return REGION_OPS.has(node(id).op); }

  // which nodes of the graph rooted at roots to draw: collapsed nodes hide what only they reach; a cap keeps the
  // nodes nearest the roots
  function visibleGraph(roots, bigDefault, focus) {
    const all = reach(roots);
    const rootSet = new Set(roots.map(String));
    const collapsed = (id) => {
      const dflt = bigDefault && regionHead(id) && !rootSet.has(id);  // a pass run on kernels shows them open
      return state.toggled.has(id) ? !dflt : dflt;
    };
    const shown = reach(roots, (id) => collapsed(id) && kids(id).length > 0);
    const shownSet = new Set(shown);
    const hiddenUnder = {};
    for (const id of shown) {
      if (collapsed(id) && kids(id).length) {
        hiddenUnder[id] = reach(kids(id), (k) => shownSet.has(k)).filter((k) => !shownSet.has(k)).length;
      }
    }
    let ids = shown;
    if (!state.all && ids.length > CAP) {
      ids = ids.slice(0, CAP);
      if (focus !== null && shownSet.has(focus) && !ids.includes(focus)) {
        // the step's node lies beyond the cap: draw it and what it reads (a few levels) in place of the last ones
        const near = reach([focus], (k) => !shownSet.has(k) || collapsed(k), 40).filter((k) => !ids.includes(k));
        ids = ids.slice(0, CAP - near.length).concat(near);
      }
    }
    return {all: all, ids: ids, hiddenUnder: hiddenUnder, capped: ids.length < shown.length};
  }

  // ---- drawing ------------------------------------------------------------------------------------------------
  function el(tag, attrs, parent) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  // draws ids (a subset of NODES) with dagre into container; cls(id) gives extra classes, extra(id) a label suffix
  function draw(container, ids, cls, extra) {
    container.textContent = "";
    if (!ids.length) {
      const d = document.createElement("div");
      d.className = "empty"; d.textContent = "(empty)";
      container.appendChild(d);
      return;
    }
    const idset = new Set(ids);
    const g = new dagre.graphlib.Graph();
    g.setGraph({rankdir: "TB", nodesep: 10, ranksep: 22, marginx: 6, marginy: 6});
    g.setDefaultEdgeLabel(() => ({}));
    const labels = {};
    for (const id of ids) {
      labels[id] = label(id, extra(id));
      const w = Math.max(labels[id][0].length * 6.7, labels[id][1].length * 6.1) + 14;
      g.setNode(id, {width: w, height: labels[id][1] ? 32 : 20});
    }
    const regionEdges = new Set();
    for (const id of ids) {
      const n = node(id);
      for (const s of (n.src || []).map(String)) if (idset.has(s) && s !== id) g.setEdge(s, id);
      for (const s of (n.regions || []).map(String)) {
        if (idset.has(s) && s !== id) { g.setEdge(s, id); regionEdges.add(s + ">" + id); }
      }
    }
    dagre.layout(g);
    const gg = g.graph();
    const svg = el("svg", {width: Math.ceil(gg.width), height: Math.ceil(gg.height)});
    el("defs", {}, svg).innerHTML =
      '<marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" orient="auto">' +
      '<path d="M0,0 L8,4 L0,8 z" fill="#8d97a8"/></marker>';
    for (const e of g.edges()) {
      const pts = g.edge(e).points.map((p) => p.x.toFixed(1) + "," + p.y.toFixed(1)).join(" ");
      el("polyline", {points: pts, class: "edge" + (regionEdges.has(e.v + ">" + e.w) ? " region" : ""),
                      "marker-end": "url(#arrow)"}, svg);
    }
    for (const id of ids) {
      const p = g.node(id), n = node(id);
      const at = (p.x - p.width / 2).toFixed(1) + "," + (p.y - p.height / 2).toFixed(1);
      const grp = el("g", {class: "node " + cls(id), "data-id": id, "data-op": n.op,
                           transform: "translate(" + at + ")"}, svg);
      const info = [nameOf(id), n.op, n.dtype || "", n.arg == null ? "" : n.arg].join(" ").trim();
      el("title", {}, grp).textContent = info +
        "\n(id " + id + ", " + (n.src || []).length + " sources; click to collapse/expand)";
      el("rect", {width: p.width, height: p.height, rx: 4, fill: fillOf(n)}, grp);
      const t = el("text", {x: 7, y: 13}, grp);
      el("tspan", {}, t).textContent = labels[id][0];
      if (labels[id][1]) { const s = el("tspan", {x: 7, dy: 12, class: "sub"}, t); s.textContent = labels[id][1]; }
      grp.addEventListener("click", () => {
        const tg = new Set(state.toggled);
        if (tg.has(id)) tg.delete(id); else tg.add(id);
        go({toggled: tg});
      });
    }
    container.appendChild(svg);
    const focus = svg.querySelector(".node.step-node") || svg.querySelector(".node.match");
    if (focus) {  // bring the step's node (or the first search match) into view
      const m = /translate\(([-\d.]+),([-\d.]+)\)/.exec(focus.getAttribute("transform"));
      container.scrollLeft = Math.max(0, +m[1] - container.clientWidth / 3);
      container.scrollTop = Math.max(0, +m[2] - container.clientHeight / 3);
    }
  }

  // one of the two big graphs of a pass: other = the node set of the other side (what is not in it changed)
  function drawPassGraph(which, roots, other, mark, big, stepId) {
    const v = visibleGraph(roots, big, stepId);
    const idset = new Set(v.ids);
    const cls = (id) => {
      const c = [];
      if (!other.has(id)) c.push(mark);
      if (v.hiddenUnder[id] !== undefined) c.push("collapsed");
      if (kids(id).some((k) => !idset.has(k)) && v.hiddenUnder[id] === undefined) c.push("truncated");
      if (matches(id, state.q)) c.push("match");
      if (stepId !== null && id === stepId) c.push("step-node");
      return c.join(" ");
    };
    const box = $("graph-" + which);
    draw(box, v.ids, cls, (id) => v.hiddenUnder[id] !== undefined ? " [+" + v.hiddenUnder[id] + " ops]" : "");
    if (v.capped && !box.querySelector(".step-node, .match")) {
      box.scrollTop = box.scrollHeight;  // a capped graph: show its roots (at the bottom), not the cut-off sources
      box.scrollLeft = (box.scrollWidth - box.clientWidth) / 2;
    }
    const changed = v.all.filter((id) => !other.has(id)).length;
    $(which + "-count").textContent = v.all.length + " nodes, " + changed +
      (mark === "changed" ? " removed" : " added") +
      (v.ids.length < v.all.length ? " (" + v.ids.length + " drawn)" : "");
    $(which + "-count").dataset.nodes = v.all.length;
    $(which + "-count").dataset.changed = changed;
    $(which + "-count").dataset.drawn = v.ids.length;
    return v;
  }

  // ---- line diff of the .uop texts (LCS on the middle after trimming the common ends; big inputs: set membership)
  function diffLines(a, b) {
    const da = new Array(a.length).fill(false), db = new Array(b.length).fill(false);
    let s = 0;
    while (s < a.length && s < b.length && a[s] === b[s]) s++;
    let ea = a.length, eb = b.length;
    while (ea > s && eb > s && a[ea - 1] === b[eb - 1]) { ea--; eb--; }
    const n = ea - s, m = eb - s;
    if (n * m <= 4e6) {
      const w = m + 1, L = new Int32Array((n + 1) * w);
      for (let i = n - 1; i >= 0; i--)
        for (let j = m - 1; j >= 0; j--)
          L[i * w + j] = a[s + i] === b[s + j] ? L[(i + 1) * w + j + 1] + 1
                                               : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
      let i = 0, j = 0;
      while (i < n && j < m) {
        if (a[s + i] === b[s + j]) { i++; j++; }
        else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) da[s + i++] = true;
        else db[s + j++] = true;
      }
      for (; i < n; i++) da[s + i] = true;
      for (; j < m; j++) db[s + j] = true;
    } else {
      const sa = new Set(a), sb = new Set(b);
      for (let i = s; i < ea; i++) da[i] = !sb.has(a[i]);
      for (let j = s; j < eb; j++) db[j] = !sa.has(b[j]);
    }
    return [da, db];
  }

  function drawText(container, lines, marks, cls) {
    container.textContent = "";
    const frag = document.createDocumentFragment();
    const lim = Math.min(lines.length, 5000);
    for (let i = 0; i < lim; i++) {
      const d = document.createElement("div");
      d.className = "line" + (marks[i] ? " " + cls : "");
      const ln = document.createElement("span");
      ln.className = "ln"; ln.textContent = (marks[i] ? (cls === "del" ? "- " : "+ ") : "") + (i + 1);
      d.appendChild(ln);
      d.appendChild(document.createTextNode(lines[i]));
      frag.appendChild(d);
    }
    if (lines.length > lim) {
      const d = document.createElement("div");
      d.textContent = "\u2026 " + (lines.length - lim) + " more lines";
      frag.appendChild(d);
    }
    container.appendChild(frag);
    const first = container.querySelector(".line." + cls);
    if (first) container.scrollTop = Math.max(0, first.offsetTop - container.offsetTop - 40);
  }

  function splitLines(t) { const l = (t || "").split("\n"); if (l.length && l[l.length - 1] === "") l.pop(); return l; }

  // ---- the step pane: what the step matched (down to what its result shares) and what it produced ------------
  function drawStep(step) {
    const sb = $("graph-step-before"), sa = $("graph-step-after");
    if (!step) {
      for (const c of [sb, sa]) {
        c.textContent = "";
        add(c, "div", "empty", "no step chosen (next \u25b6 or \u2192)");
      }
      $("step-before-count").textContent = ""; $("step-after-count").textContent = "";
      return;
    }
    const before = String(step.before), after = String(step.after);
    const rb = new Set(reach([before], null, WALK_CAP)), ra = new Set(reach([after], null, WALK_CAP));
    const one = (root, other, box, count, mark) => {
      const ids = reach([root], (id) => other.has(id), STEP_CAP);
      draw(box, ids, (id) => (other.has(id) ? "boundary" : mark) + (id === root ? " step-node" : "") +
           (matches(id, state.q) ? " match" : ""), () => "");
      const own = ids.filter((id) => !other.has(id)).length;
      count.textContent = own + " nodes" + (mark === "changed" ? " replaced" : " new") + ", " +
        (ids.length - own) + " shared";
      count.dataset.nodes = own;
    };
    one(before, ra, sb, $("step-before-count"), "changed");
    one(after, rb, sa, $("step-after-count"), "added");
  }

  // ---- the whole view -----------------------------------------------------------------------------------------
  function renderPasses() {
    const ol = $("passes");
    ol.textContent = "";
    PASSES.forEach((p, i) => {
      const li = document.createElement("li");
      li.className = "pass" + (state.view === "pass" && state.pass === i + 1 ? " current" : "") +
        (p.failed ? " failed" : "");
      li.dataset.pass = i + 1;
      add(li, "span", "name", p.name);
      add(li, "span", "time", (+p.time_ms || 0).toFixed(2) + " ms");
      add(li, "span", "nsteps", (p.steps || []).length + " steps");
      li.title = p.name + (p.options ? " " + p.options : "") + (p.failed ? " (failed: its output is its input)" : "");
      li.addEventListener("click", () => go({pass: i + 1, step: 0, view: "pass"}));
      ol.appendChild(li);
    });
    if (SOURCES.length) {
      const li = document.createElement("li");
      li.className = "sources-item" + (state.view === "sources" ? " current" : "");
      li.textContent = "emitted sources (" + SOURCES.length + ")";
      li.addEventListener("click", () => go({view: "sources"}));
      ol.appendChild(li);
    }
  }

  function renderSources() {
    const box = $("sources");
    box.textContent = "";
    if (!SOURCES.length) box.textContent = "(this trace has no emitted sources)";
    for (const s of SOURCES) {
      add(box, "h3", "kernel", s.kernel + " (" + s.lang + ")");
      add(box, "pre", "", s.text);
    }
  }

  function render() {
    state = readHash();
    document.title = (T.title || "trace") + " - uopir visualizer";
    $("title").textContent = T.title || "trace";
    const nsteps = PASSES.reduce((a, p) => a + (p.steps || []).length, 0);
    const ms = PASSES.reduce((a, p) => a + (+p.time_ms || 0), 0);
    $("summary").textContent = PASSES.length + " passes, " + nsteps + " rewrite steps, " + ms.toFixed(2) + " ms, " +
      Object.keys(NODES).length + " distinct nodes";
    $("search").value = state.q;
    $("show-all").textContent = state.all ? "cap at " + CAP + " nodes" : "show all";
    renderPasses();
    $("pass-view").hidden = state.view !== "pass";
    $("sources-view").hidden = state.view !== "sources";
    if (state.view === "sources") { renderSources(); return; }
    const p = PASSES[state.pass - 1], steps = p.steps || [];
    $("pass-name").textContent = state.pass + ". " + p.name;
    $("pass-options").textContent = p.options || "";
    $("pass-time").textContent = (+p.time_ms || 0).toFixed(3) + " ms";
    const step = state.step ? steps[state.step - 1] : null;
    $("step-pos").textContent = steps.length ? "step " + state.step + " / " + steps.length : "no rewrite steps";
    $("step-pattern").textContent = step ? step.pattern : "";
    const us = step && step.time_us != null ? "  (" + (+step.time_us).toFixed(1) + " \u00b5s)" : "";
    $("step-location").textContent = step ? (step.location || "") + us : "";
    $("step-view").hidden = !steps.length;  // a pass without rewrite steps gives the graphs the whole height
    $("prev").disabled = state.step <= 0;
    $("next").disabled = state.step >= steps.length;

    const inSet = new Set(reach(p.input)), outSet = new Set(reach(p.output));
    const big = Math.max(inSet.size, outSet.size) > CAP;
    const stepId = step ? String(step.before) : null;
    NAMES = p.before_names || {};
    drawPassGraph("before", p.input, outSet, "changed", big, stepId);
    NAMES = p.after_names || {};
    drawPassGraph("after", p.output, inSet, "added", big, step ? String(step.after) : null);
    NAMES = {};
    drawStep(step);

    const a = splitLines(p.before_text), b = splitLines(p.after_text);
    const [da, db] = diffLines(a, b);
    drawText($("text-before"), a, da, "del");
    drawText($("text-after"), b, db, "add");
    $("diff-count").textContent = "-" + da.filter((x) => x).length + " +" + db.filter((x) => x).length + " lines";

    const sl = $("step-list");
    sl.textContent = "";
    steps.slice(0, 2000).forEach((s, i) => {
      const li = document.createElement("li");
      li.className = "step" + (state.step === i + 1 ? " current" : "");
      li.textContent = s.pattern;
      li.title = s.location;
      li.addEventListener("click", () => go({step: i + 1}));
      sl.appendChild(li);
    });
    $("steps-count").textContent = steps.length + (steps.length > 2000 ? " (first 2000 listed)" : "");
    const cur = sl.querySelector("li.current");
    if (cur) {  // scroll the list, not the page
      const top = cur.getBoundingClientRect().top - sl.getBoundingClientRect().top + sl.scrollTop;
      sl.scrollTop = Math.max(0, top - sl.clientHeight / 2);
    }
    const st = $("stats");
    st.textContent = "";
    const stats = p.stats || {};
    for (const k of Object.keys(stats).sort((x, y) => stats[y] - stats[x])) {
      const tr = document.createElement("tr");
      tr.innerHTML = "<td class='n'></td><td></td>";
      tr.children[0].textContent = stats[k]; tr.children[1].textContent = k;
      st.appendChild(tr);
    }
    const inMatch = (names, set) => {
      NAMES = names || {};
      return Array.from(set).filter((id) => matches(id, state.q));
    };
    const nq = state.q ? new Set([...inMatch(p.before_names, inSet), ...inMatch(p.after_names, outSet)]).size : 0;
    NAMES = {};
    $("search-count").textContent = state.q ? nq + " matching nodes in this pass" : "";
    $("search-count").dataset.matches = nq;
  }

  // ---- controls -----------------------------------------------------------------------------------------------
  $("prev").addEventListener("click", () => go({step: Math.max(0, state.step - 1)}));
  $("next").addEventListener("click", () => go({step: state.step + 1}));
  $("show-all").addEventListener("click", () => go({all: !state.all}));
  $("search").addEventListener("change", (e) => go({q: e.target.value.trim()}));
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT") { if (e.key === "Escape") e.target.blur(); return; }
    const nsteps = PASSES.length ? (PASSES[state.pass - 1].steps || []).length : 0;
    if (e.key === "ArrowRight" || e.key === "n") go({step: Math.min(nsteps, state.step + 1)});
    else if (e.key === "ArrowLeft" || e.key === "p") go({step: Math.max(0, state.step - 1)});
    else if (e.key === "ArrowDown") go({pass: Math.min(PASSES.length, state.pass + 1), step: 0, view: "pass"});
    else if (e.key === "ArrowUp") go({pass: Math.max(1, state.pass - 1), step: 0, view: "pass"});
    else if (e.key === "/") { e.preventDefault(); $("search").focus(); }
    else return;
    e.preventDefault();
  });
  window.addEventListener("hashchange", render);
  render();
})();
