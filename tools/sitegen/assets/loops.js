/* Loop pages: the frontier staircase (explore/loops/<name>/staircase.html) in an iframe wherever a page holds
   <div class="arw-loop-plot" data-loop="<name>">. The site root comes from this script's own URL, so the frame
   is right on direct loads, under Material's instant navigation (document$) and under Zensical. */
(function () {
  "use strict";
  var me = document.currentScript ? document.currentScript.src : "";
  var root = me.replace(/assets\/autoresearch\/loops\.js(?:[?#].*)?$/, "");
  var NAME = /^[A-Za-z0-9][A-Za-z0-9_.\-]*$/;  // loop names (tools/sitegen/loops.py NAME)
  function init() {
    if (!root || root === me) return;
    var boxes = document.querySelectorAll("div.arw-loop-plot[data-loop]:not([data-arw-ready])");
    Array.prototype.forEach.call(boxes, function (box) {
      box.setAttribute("data-arw-ready", "1");
      var name = box.getAttribute("data-loop") || "";
      if (!NAME.test(name)) return;
      var base = root + "explore/loops/" + name + "/";
      var frame = document.createElement("iframe");
      frame.className = "arw-frame arw-loop-frame";
      frame.src = base + "staircase.html";
      frame.title = name + " frontier staircase";
      frame.setAttribute("style", "width:100%;height:520px;border:0");
      box.appendChild(frame);
      var p = document.createElement("p"), a = document.createElement("a");
      a.href = base;
      a.textContent = "Open the loop explorer";
      p.appendChild(a);
      box.appendChild(p);
    });
  }
  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(init);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
