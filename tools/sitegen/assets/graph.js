/* Concept graph: sigma.js 4 (WebGL) over graphology, with positions precomputed by tools.sitegen.graph.
   Search dims non-matches (Enter zooms to them), the legend toggles categories, hover lights up
   neighbours, a click opens the page in the top window. Titles are drawn on canvas or set with
   textContent, never parsed as HTML. State for tests: window.graphView. */
(function () {
  "use strict";
  var t0 = performance.now();
  var script = document.currentScript;
  var dataUrl = (script && script.getAttribute("data-graph")) || "graph.json";
  var siteRoot = new URL((script && script.getAttribute("data-root")) || "../../", location.href);
  var Graph = graphology.Graph || graphology;
  var view = { ready: false, error: null, drawMs: null, matches: [], hidden: {}, query: "" };
  window.graphView = view;

  function isDark() {
    try {
      var b = window.parent && window.parent !== window && window.parent.document.body;
      var s = b && b.getAttribute("data-md-color-scheme");
      if (s) return s === "slate";
    } catch (e) { /* not same-origin: fall through */ }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  }

  function themeColors() {
    var dark = isDark();
    document.documentElement.classList.toggle("dark", dark);
    return dark
      ? { label: "#e6edf3", edge: "rgba(160,170,190,0.22)", dim: "#3a3f4b", dimEdge: "rgba(80,85,95,0.12)", hl: "#ffd33d" }
      : { label: "#1f2328", edge: "rgba(90,100,120,0.20)", dim: "#e3e6ea", dimEdge: "rgba(200,200,200,0.15)", hl: "#d4a72c" };
  }

  fetch(dataUrl).then(function (r) {
    if (!r.ok) throw new Error("graph data: HTTP " + r.status);
    return r.json();
  }).then(draw).catch(function (e) {
    view.error = String(e);
    document.getElementById("info").textContent = "Could not load the graph: " + e;
  });

  function draw(data) {
    var colors = themeColors();
    var graph = new Graph({ type: "undirected", multi: false, allowSelfLoops: false });
    var catColor = {};
    data.categories.forEach(function (c) { catColor[c.name] = c.color; });
    data.nodes.forEach(function (n) {
      graph.addNode(n.id, { x: n.x, y: n.y, size: n.size, label: String(n.label), color: catColor[n.category] || "#888",
        category: n.category, url: n.url, degree: n.degree, forceLabel: !!n.forceLabel,
        search: (String(n.label) + " " + n.id).toLowerCase() });
    });
    data.edges.forEach(function (e) {
      var s = data.nodes[e[0]].id, t = data.nodes[e[1]].id;
      if (!graph.hasEdge(s, t)) graph.addEdge(s, t, { kind: e[2] });
    });

    var hovered = null, hoverNbrs = null, hoverLabels = null, matchSet = null;
    var container = document.getElementById("graph");
    // sigma 4 options: reducers return display variables (visibility, labelVisibility, labelColor...).
    // Titles: placed here, in priority order (landmarks: concepts, codebases, models, loops and hubs; then by
    // degree), each only where its box overlaps no title already placed and lies inside the frame. Zooming in
    // makes room for more; re-placed when the camera stops.
    var placed = new Set();
    var measure = document.createElement("canvas").getContext("2d");
    measure.font = "14px Arial, sans-serif";
    var widths = {};
    var priority = graph.nodes().sort(function (a, b) {
      var fa = graph.getNodeAttribute(a, "forceLabel") ? 1 : 0, fb = graph.getNodeAttribute(b, "forceLabel") ? 1 : 0;
      return (fb - fa) || (graph.getNodeAttribute(b, "degree") - graph.getNodeAttribute(a, "degree"));
    });
    var MAX_TITLES = 300, CELL = 80, PAD = 3;
    function placeLabels() {
      var dims = renderer.getDimensions(), grid = new Map(), boxes = [];
      var next = new Set();
      function cells(b, add) {  // b: [x1, y1, x2, y2, owner]; a title never overlaps another or a dot
        for (var cx = Math.floor(b[0] / CELL); cx <= Math.floor(b[2] / CELL); cx++) {
          for (var cy = Math.floor(b[1] / CELL); cy <= Math.floor(b[3] / CELL); cy++) {
            var k = cx + ":" + cy, list = grid.get(k);
            if (add) { if (!list) grid.set(k, list = []); list.push(b); continue; }
            if (list) for (var i = 0; i < list.length; i++) {
              var o = list[i];
              if (o[4] === b[4] || (o[5] === "dot" && b[5] === "landmark")) continue;  // its own dot; a landmark's title may cross dots
              if (b[0] < o[2] + PAD && o[0] < b[2] + PAD && b[1] < o[3] + PAD && o[1] < b[3] + PAD)
                return true;
            }
          }
        }
        return false;
      }
      var where = {};
      graph.forEachNode(function (n, a) {  // every visible dot is an obstacle for the titles of the others
        if (view.hidden[a.category]) return;
        var d = renderer.getNodeDisplayData(n);
        if (!d) return;
        var p = renderer.framedGraphToViewport(d), r = renderer.scaleSize(d.size);
        where[n] = [p, r];
        if (p.x < -r || p.y < -r || p.x > dims.width + r || p.y > dims.height + r) return;
        cells([p.x - r, p.y - r, p.x + r, p.y + r, n, "dot"], true);
      });
      var legend = document.getElementById("legend").getBoundingClientRect();
      var frame = container.getBoundingClientRect();
      cells([legend.left - frame.left, legend.top - frame.top, legend.right - frame.left, legend.bottom - frame.top,
        "legend"], true);
      for (var i = 0; i < priority.length && next.size < MAX_TITLES; i++) {
        var n = priority[i], a = graph.getNodeAttributes(n), at = where[n];
        if (!at) continue;
        var p = at[0], r = at[1];
        var w = widths[n] || (widths[n] = measure.measureText(a.label).width);
        var box = [p.x + r + 2, p.y - 8, p.x + r + 6 + w, p.y + 8, n, !!a.forceLabel && "landmark"];
        if (box[0] < 0 || box[1] < 0 || box[2] > dims.width || box[3] > dims.height) continue;
        if (cells(box, false)) continue;
        cells(box, true);
        boxes.push(box.slice(0, 4));
        next.add(n);
      }
      var changed = [];
      placed.forEach(function (n) { if (!next.has(n)) changed.push(n); });
      next.forEach(function (n) { if (!placed.has(n)) changed.push(n); });
      placed = next;
      view.placed = Array.from(next);
      view.labelBoxes = boxes;
      return changed;
    }
    function replace() {
      var changed = placeLabels();
      if (changed.length) renderer.refresh({ partialGraph: { nodes: changed }, skipIndexation: true });
    }

    var renderer = new Sigma(graph, container, {
      settings: { itemSizesReference: "screen", autoRescale: true, stagePadding: 40,
        hideEdgesOnMove: graph.size > 20000 },
      // sigma 4 calls reducers with (key, display data, graph attributes, state...); the result is merged.
      nodeReducer: function (node, data, attrs) {
        var res = { labelColor: colors.label };
        if (view.hidden[(attrs || data).category]) { res.visibility = "hidden"; res.labelVisibility = "hidden"; return res; }
        if (hovered && (node === hovered || hoverLabels.has(node))) {
          res.labelVisibility = "visible";  // no zIndex/size change: allows skipIndexation
        } else if (matchSet) {
          if (matchSet.has(node)) {
            res.zIndex = 2;
            if (matchSet.size <= 40) { res.labelVisibility = "visible"; res.highlighted = true; }
          } else { res.color = colors.dim; res.labelVisibility = "hidden"; res.zIndex = 0; }
        } else if (!hovered) {
          // titles placed without overlap (placeLabels): landmarks first, then the busiest pages
          res.labelVisibility = placed.has(node) ? "visible" : "hidden";
        }
        return res;
      },
      edgeReducer: function (edge) {
        var res = { color: colors.edge };
        var ext = graph.extremities(edge);
        if (view.hidden[graph.getNodeAttribute(ext[0], "category")] ||
            view.hidden[graph.getNodeAttribute(ext[1], "category")]) { res.visibility = "hidden"; return res; }
        if (hovered && (ext[0] === hovered || ext[1] === hovered)) {
          res.color = colors.hl;
        } else if (matchSet && !(matchSet.has(ext[0]) && matchSet.has(ext[1]))) {
          res.color = colors.dimEdge;
        }
        return res;
      }
    });
    view.sigma = renderer;
    view.graph = graph;

    // Hover: only the hovered node, its neighbours and its edges are re-processed (partial refresh),
    // which keeps it fluid at thousands of nodes.
    function hoverPart(node) {
      return { nodes: [node].concat(graph.neighbors(node)), edges: graph.edges(node) };
    }
    renderer.on("enterNode", function (e) {
      hovered = e.node;
      hoverNbrs = new Set(graph.neighbors(e.node));
      // label at most 25 neighbours (the busiest), or a hub's hover becomes a smudge of text
      hoverLabels = new Set(Array.from(hoverNbrs).sort(function (a, b) {
        return graph.getNodeAttribute(b, "degree") - graph.getNodeAttribute(a, "degree");
      }).slice(0, 25));
      container.style.cursor = "pointer";
      var t = performance.now();
      renderer.refresh({ partialGraph: hoverPart(e.node), skipIndexation: true });
      view.hoverMs = performance.now() - t;
      view.hovered = e.node;
    });
    renderer.on("leaveNode", function (e) {
      var node = hovered;
      hovered = null; hoverNbrs = null; view.hovered = null;
      container.style.cursor = "";
      if (node) renderer.refresh({ partialGraph: hoverPart(node), skipIndexation: true });
    });
    renderer.on("clickNode", function (e) {
      var url = new URL(graph.getNodeAttribute(e.node, "url"), siteRoot).href;
      view.clicked = url;
      (window.top || window).location.href = url;
    });

    // Search: dim everything else; Enter zooms the camera onto the matches.
    var input = document.getElementById("search");
    var info = document.getElementById("info");
    function runSearch(q) {
      q = (q || "").toLowerCase().trim();
      view.query = q;
      if (!q) { matchSet = null; view.matches = []; }
      else {
        matchSet = new Set();
        graph.forEachNode(function (n, a) {
          if (!view.hidden[a.category] && a.search.indexOf(q) >= 0) matchSet.add(n);
        });
        view.matches = Array.from(matchSet);
      }
      info.textContent = q ? view.matches.length + " of " + graph.order + " pages match"
        : graph.order + " pages, " + graph.size + " links";
      renderer.refresh();
    }
    function zoomToMatches() {
      if (!matchSet || !matchSet.size) return;
      var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
      matchSet.forEach(function (n) {
        var d = renderer.getNodeDisplayData(n);
        if (!d) return;
        minX = Math.min(minX, d.x); maxX = Math.max(maxX, d.x);
        minY = Math.min(minY, d.y); maxY = Math.max(maxY, d.y);
      });
      var ratio = Math.max(maxX - minX, maxY - minY, 0.1) * 1.4;
      return renderer.getCamera().animate({ x: (minX + maxX) / 2, y: (minY + maxY) / 2, ratio: Math.min(ratio, 1) },
        { duration: 400 });
    }
    var pending = null;  // debounce: each search re-processes the whole graph
    input.addEventListener("input", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { runSearch(input.value); }, graph.order > 1000 ? 150 : 0);
    });
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { clearTimeout(pending); runSearch(input.value); zoomToMatches(); }
    });
    view.search = runSearch;
    view.zoomToMatches = zoomToMatches;

    // Legend: one toggle per category (experiments are split by model).
    var legend = document.getElementById("legend");
    data.categories.forEach(function (c) {
      var label = document.createElement("label");
      var box = document.createElement("input");
      box.type = "checkbox"; box.checked = true; box.setAttribute("data-category", c.name);
      var dot = document.createElement("span");
      dot.className = "dot"; dot.style.background = c.color;
      var text = document.createElement("span");
      text.textContent = c.name + " (" + c.count + ")";
      label.appendChild(box); label.appendChild(dot); label.appendChild(text);
      box.addEventListener("change", function () {
        view.hidden[c.name] = !box.checked;
        label.classList.toggle("off", !box.checked);
        placeLabels();
        runSearch(input.value);
      });
      legend.appendChild(label);
    });

    // Follow the site's light/dark toggle.
    function retheme() {
      colors = themeColors();
      renderer.refresh();
    }
    try {
      if (window.parent !== window) {
        new MutationObserver(retheme).observe(window.parent.document.body,
          { attributes: true, attributeFilter: ["data-md-color-scheme"] });
      }
    } catch (e) { /* standalone */ }
    if (window.matchMedia) window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", retheme);

    view.nodeViewport = function (id) {
      var a = graph.getNodeAttributes(id);
      return renderer.graphToViewport({ x: a.x, y: a.y });
    };
    var settle = null;  // titles are re-placed once the camera has stopped moving
    renderer.getCamera().on("updated", function () {
      clearTimeout(settle);
      settle = setTimeout(replace, 120);
    });
    renderer.once("afterRender", function () {
      view.drawMs = Math.round(performance.now() - t0);
      replace();
      view.ready = true;
    });
    runSearch("");
    renderer.refresh();
  }
})();
