/* Sortable, filterable generated tables (kernel directory). Works on direct loads, under
   Material's instant navigation (document$) and under Zensical. */
(function () {
  "use strict";
  function cellValue(row, i) {
    var c = row.cells[i];
    return c ? c.textContent.trim() : "";
  }
  function setupSort(table) {
    var ths = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(ths, function (th, i) {
      th.setAttribute("role", "button");
      th.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(ths, function (o) { o.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, i), y = cellValue(b, i);
          var r = x.localeCompare(y, undefined, { numeric: true, sensitivity: "base" });
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  function setupFilter(box) {
    var table = document.getElementById(box.getAttribute("data-arw-table"));
    if (!table) return;
    var text = box.querySelector(".arw-filter-text");
    var selects = box.querySelectorAll("select[data-arw-col]");
    var count = box.querySelector(".arw-count");
    function apply() {
      var q = (text && text.value || "").toLowerCase().trim();
      var shown = 0, rows = table.tBodies[0].rows;
      for (var i = 0; i < rows.length; i++) {
        var row = rows[i], ok = !q || row.textContent.toLowerCase().indexOf(q) >= 0;
        for (var j = 0; ok && j < selects.length; j++) {
          var v = selects[j].value;
          if (v && row.getAttribute("data-" + selects[j].getAttribute("data-arw-col")) !== v) ok = false;
        }
        row.hidden = !ok;
        if (ok) shown++;
      }
      if (count) count.textContent = shown + " of " + rows.length;
    }
    if (text) text.addEventListener("input", apply);
    Array.prototype.forEach.call(selects, function (s) { s.addEventListener("change", apply); });
    apply();
  }
  function init() {
    document.querySelectorAll("table.arw-table:not([data-arw-ready])").forEach(function (t) {
      t.setAttribute("data-arw-ready", "1");
      setupSort(t);
    });
    document.querySelectorAll(".arw-filters:not([data-arw-ready])").forEach(function (b) {
      b.setAttribute("data-arw-ready", "1");
      setupFilter(b);
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
